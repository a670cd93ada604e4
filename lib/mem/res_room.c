/* res_room.c — the runtime making room: evicting for the budget (and the device beside the device pool), and
 * spilling or waiting for the host tier's cap; the messages that say why no room could be made.
 * Threading: caller holds the context lock. */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "core/core.h"
#include "mem/guard.h"
#include "mem/hostcap.h"
#include "mem/res_internal.h"
#include "mem/room.h"
#include "tier/spill.h"

/* Can the host tier ever take b?  An eviction lands on the host first, so a
 * block larger than the host cap can never be evicted. */
int hoff__res_fits_host(const struct hoff__mem *mem, const struct hoff__block *b) {
    return hoff__host_takes(mem->lim.host_cap_bytes, b->size);
}

/* --- the budget ------------------------------------------------------------ */

/* Would one more eviction of `bytes` take the host tier over its cap? */
int hoff__res_host_full(const struct hoff__mem *mem, uint64_t bytes) {
    return hoff__host_full(mem->lim.host_cap_bytes, mem->res.host, mem->res.to_host, bytes);
}

/* May blocks be spilled to make host room?  Not without an NVMe tier, nor
 * after the tier refused a spill (a full disk, an I/O error) until it gave
 * space back, a step ended, a second passed (a disk freed by someone else),
 * or a planned spill succeeded: each spill would fail like the last, and the
 * block come back to the host to be spilled again (a process that never
 * ends).  A retry costs one failed spill. */
#define SPILL_RETRY_NS 1000000000ull

static int spill_ok(struct hoff__mem *mem) {
    struct hoff__residency *r = &mem->res;

    if (r->spill_refused && (r->nvme < r->refused_nvme || mem->pol.steps != r->refused_step ||
                             mem->be->ops->clock_ns(mem->be) - r->refused_ns >= SPILL_RETRY_NS))
        r->spill_refused = 0;
    return mem->nvme && !r->spill_refused;
}

/* Make room for `bytes` more on the host tier: wait for what is already
 * leaving it (prefetches to the device, spills to the NVMe tier) when that
 * is enough, else spill the blocks evicted longest ago, waiting for the
 * writes if it must (a counted stall): the host tier never goes over its
 * cap.  -HOFF_EHOSTCAP when nothing is leaving and nothing can be spilled (no
 * NVMe tier, or one that refuses spills). */
int hoff__res_make_host_room(struct hoff__mem *mem, uint64_t bytes, const struct hoff__block *keep, hoff_stream s) {
    struct hoff__residency *r = &mem->res;
    int waited = 0;

    while (hoff__res_host_full(mem, bytes)) {
        struct hoff__host_books h = {mem->lim.host_cap_bytes, r->host, r->to_host, r->spilling, r->from_host};
        struct hoff__host_cands c = {.can_spill = spill_ok(mem)};
        struct hoff__block *sv, *lv, *av;
        enum hoff__host_step step;

        /* what room.c decides over: the host block evicted longest ago that may be spilled; the spill or prefetch
         * issued first (a discarded block's prefetch frees no host bytes); the eviction or restore issued first */
        for (sv = r->host_head; sv && (sv == keep || sv->pending || (sv->flags & HOFF__BLK_HOLD)); sv = sv->next)
            ;
        for (lv = r->inf_head; lv && lv->state != S_SPI && (lv->state != S_PRE || (lv->flags & HOFF__BLK_DISCARDING));
             lv = lv->next)
            ;
        for (av = r->inf_head; av && av->state != S_RES && (av->state != S_EVI || (av->flags & HOFF__BLK_DISCARDING));
             av = av->next)
            ;
        c.victim = sv != NULL;
        c.leaving = lv != NULL;
        c.arriving = av != NULL;
        step = hoff__room_host(&h, bytes, &c);
        if (step == HOFF__HOST_SPILL) {
            if (hoff__res_start_spill(mem, sv, s) == 0)
                continue;
            c.victim = 0; /* it could not start: wait instead */
            step = hoff__room_host(&h, bytes, &c);
        }
        if (step != HOFF__HOST_WAIT_LEAVING && step != HOFF__HOST_WAIT_ARRIVING)
            break;
        waited = 1;
        hoff__res_finish(mem, step == HOFF__HOST_WAIT_LEAVING ? lv : av, HOFF__WAIT_USE);
    }
    if (waited)
        HOFF__STAT_ADD(&mem->st, host_cap_waits, 1);
    if (!hoff__res_host_full(mem, bytes))
        return 0;
    if (!waited)
        HOFF__STAT_ADD(&mem->st, host_cap_waits, 1);
    if (mem->nvme && r->spill_refused)
        return hoff__error(-HOFF_EHOSTCAP,
                           "%zu more bytes would take the host tier over its cap (HOFF_HOST_CAP), and "
                           "the NVMe tier refused the last spill: %s",
                           (size_t)bytes, r->refused_why);
    return hoff__error(-HOFF_EHOSTCAP, "%zu more bytes would take the host tier over its cap (HOFF_HOST_CAP)%s",
                       (size_t)bytes, mem->nvme ? "" : "; set HOFF_SPILL_DIR to spill to NVMe");
}

int hoff__res_start_evict(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc;

    if (hoff__res_host_full(mem, b->size) && (rc = hoff__res_make_host_room(mem, b->size, b, s)) != 0)
        return rc; /* the block stays where it is */
    rc = hoff__res_issue(mem, b, HOFF__CMD_EVICT, s);
    if (rc)
        return rc;
    mem->res.evicting += b->size;
    mem->res.to_host += b->size;
    b->moved = 1;
    hoff__res_set_state(mem, b, S_EVI);
    return 0;
}

/* The next block to evict for room.  While a step is being recorded, the
 * RFC's warmup rule: the earliest allocated first (each allocation is its
 * own event here, so "larger first within an event" has nothing to break);
 * otherwise the least recently used.  Never `keep`, the block the current
 * event uses, nor a block in its use window. */
static struct hoff__block *pick_victim(struct hoff__mem *mem, const struct hoff__block *keep, int *over_cap) {
    struct hoff__block *v, *best = NULL;
    int warmup = mem->pol.in_step && mem->pol.warmup;

    for (v = mem->res.lru_head; v; v = v->next) {
        switch (hoff__room_victim(v == keep, v->win, v->mgroup != NULL, mem->lim.host_cap_bytes, v->size)) {
        case HOFF__VICTIM_SKIP: continue;
        case HOFF__VICTIM_OVER_CAP: /* never evictable: look further */ *over_cap = 1; continue;
        default: break;
        }
        if (!warmup)
            return v;
        if (!best || v->seq < best->seq)
            best = v;
    }
    return best;
}

/* Make resident + need fit in the budget, never evicting `keep`.  -ENOSPC
 * when nothing more can be evicted, with the cause in *why.  keep, when on
 * the host (coming back), is held there: a victim's eviction that needs host
 * room does not spill it (host_room skips HOFF__BLK_HOLD). */
static int make_room_once(struct hoff__mem *mem, uint64_t need, struct hoff__block *keep, hoff_stream s,
                          enum hoff__room_why *why);

int hoff__res_make_room(struct hoff__mem *mem, uint64_t need, struct hoff__block *keep, hoff_stream s,
                        enum hoff__room_why *why) {
    uint8_t held = keep ? keep->flags & HOFF__BLK_HOLD : 0;
    int rc;

    if (keep)
        keep->flags |= HOFF__BLK_HOLD;
    *why = HOFF__WHY_NOTHING;
    rc = make_room_once(mem, need, keep, s, why);
    if (keep && !held)
        keep->flags &= (uint8_t)~HOFF__BLK_HOLD;
    return rc;
}

/* The budget the online policy keeps: the configured one, but while a step
 * replays a plan for a budget below the working-set floor, the floor: no
 * eviction can take the peak below it, so none is forced beyond it. */
static uint64_t room_budget(const struct hoff__mem *mem, int *squeezed) {
    int replaying = mem->pol.in_step && mem->pol.replaying;
    uint64_t budget = hoff__room_budget(mem->lim.budget_bytes, replaying ? mem->pol.floor_bytes : 0);
    uint64_t cap = hoff__guard_cap(mem);

    /* The device itself: what its memory leaves beside hoff's device pool
     * (guard.c), below any budget, so that the driver never has to evict
     * hoff's blocks behind its back. */
    *squeezed = cap && (!budget || cap < budget);
    return *squeezed ? cap : budget;
}

static int make_room_once(struct hoff__mem *mem, uint64_t need, struct hoff__block *keep, hoff_stream s,
                          enum hoff__room_why *why) {
    int squeezed, counted = 0;
    uint64_t budget = room_budget(mem, &squeezed);
    int over_cap = 0;

    if (!budget)
        return 0;
    for (;;) {
        struct hoff__block *v;
        enum hoff__room_step step;

        hoff__res_poll(mem);
        step = hoff__room_device(mem->res.resident, mem->res.evicting, need, budget);
        if (step == HOFF__ROOM_FITS)
            return 0;
        if (squeezed && !counted++)
            HOFF__STAT_ADD(&mem->st, device_squeezes, 1);
        if (step == HOFF__ROOM_EVICT) {
            v = pick_victim(mem, keep, &over_cap);
            if (v) {
                if (hoff__res_start_evict(mem, v, s) == 0) {
                    HOFF__STAT_ADD(&mem->st, budget_evictions, 1);
                    continue;
                }
                *why = HOFF__WHY_EVICT_ERR;
                return -ENOSPC;
            }
            if (over_cap)
                *why = HOFF__WHY_OVER_CAP;
        }
        /* Wait for the oldest eviction in flight; failing that, for the
         * oldest prefetch, which then becomes evictable. */
        for (v = mem->res.inf_head; v && v->state != S_EVI; v = v->next)
            ;
        if (!v)
            for (v = mem->res.inf_head; v && v == keep; v = v->next)
                ;
        if (!v)
            return -ENOSPC;
        hoff__res_finish(mem, v, HOFF__WAIT_USE);
    }
}

int hoff__res_fit_device(struct hoff__mem *mem) {
    enum hoff__room_why why = HOFF__WHY_NOTHING;

    return make_room_once(mem, 0, NULL, NULL, &why);
}

int hoff__res_budget_room(struct hoff__mem *mem, uint64_t need, hoff_stream s, const char *what) {
    enum hoff__room_why why;
    char a[32], b[32], c[32], cause[400];

    if (hoff__res_make_room(mem, need, NULL, s, &why) == 0)
        return 0;
    return hoff__error(-HOFF_EBUDGET,
                       "%s: %s more resident bytes do not fit in the budget (HOFF_BUDGET %s, %s "
                       "resident): %s",
                       what, hoff__fmt_size(need, a, sizeof a), hoff__fmt_size(mem->lim.budget_bytes, b, sizeof b),
                       hoff__fmt_size(mem->res.resident, c, sizeof c),
                       hoff__res_room_cause(mem, why, cause, sizeof cause));
}

int hoff__res_host_room(struct hoff__mem *mem, uint64_t bytes, hoff_stream s) {
    return hoff__res_host_full(mem, bytes) ? hoff__res_make_host_room(mem, bytes, NULL, s) : 0;
}
/* Why no more room could be made, in words. */
const char *hoff__res_room_cause(const struct hoff__mem *mem, enum hoff__room_why why, char *buf, size_t len) {
    char c[32];

    switch (why) {
    case HOFF__WHY_OVER_CAP:
        snprintf(buf, len,
                 "the blocks left to evict are larger than the host cap (HOFF_HOST_CAP %s), so they can never "
                 "be evicted",
                 hoff__fmt_size(mem->lim.host_cap_bytes, c, sizeof c));
        break;
    case HOFF__WHY_EVICT_ERR: snprintf(buf, len, "an eviction was refused: %s", hoff_last_error()); break;
    default: snprintf(buf, len, "nothing left to evict (every resident block is in use or pinned)"); break;
    }
    return buf;
}

/* The budget is passed (counted by note_resident): say why, once per cause. */
void hoff__res_overrun(struct hoff__mem *mem, uint64_t need, enum hoff__room_why why) {
    char a[32], b[32], cause[400];

    hoff__fmt_size(mem->lim.budget_bytes, a, sizeof a);
    hoff__fmt_size(need, b, sizeof b);
    hoff__res_room_cause(mem, why, cause, sizeof cause);
#define OVERRUN_LOG()                                                                    \
    HOFF__LOG_ONCE(HOFF_LOG_WARN,                                                        \
                   "budget %s exceeded: %s more resident offload bytes; %s; counted in " \
                   "budget_overruns",                                                    \
                   a, b, cause)
    switch (why) { /* one log line per cause */
    case HOFF__WHY_OVER_CAP: OVERRUN_LOG(); break;
    case HOFF__WHY_EVICT_ERR: OVERRUN_LOG(); break;
    default: OVERRUN_LOG(); break;
    }
#undef OVERRUN_LOG
}

/* A new offload candidate that the host tier can never take: count it and
 * say so once, naming the sizes (hoff-config(7), HOFF_HOST_CAP). */
void hoff__res_check_host_cap(struct hoff__mem *mem, const struct hoff__block *b) {
    char a[32], c[32];

    if (!hoff__res_evictable(b) || hoff__res_fits_host(mem, b))
        return;
    HOFF__STAT_ADD(&mem->st, host_cap_unevictable, 1);
    HOFF__LOG_ONCE(HOFF_LOG_WARN,
                   "HOFF_HOST_CAP %s is below this %s offload block: an eviction lands on the host tier "
                   "first, so the block can never be evicted and stays on the device, over the budget if it "
                   "must; set HOFF_HOST_CAP to at least %s (or 0, no limit); counted in host_cap_unevictable",
                   hoff__fmt_size(mem->lim.host_cap_bytes, c, sizeof c), hoff__fmt_size(b->size, a, sizeof a), a);
}
