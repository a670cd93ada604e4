/* model.c — the prediction's model of a replayed step: what each planned action (evict, prefetch, release, spill,
 * restore, a group's one call) and each trace event (allocation, free, access) does to the model's state under the
 * runtime's rules, on the sim's transfer clock (core/xfer.h).
 * Threading: a pure function of its model (model.h); no shared state. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "mem/room.h"
#include "plan/model.h"

/*
 * The rules are the runtime's (lib/mem/residency.c and res_*.c, lib/exec/replay.c;
 * the decisions of making room are the runtime's own functions, lib/mem/room.h) and
 * the sim backend's clock (lib/backend/sim.c), so that a planner can compare
 * schedules by what the replay will cost rather than by a proxy:
 *
 *  - compute advances `now` by T[i] - T[i-1] before event i; only waits add
 *    to it beyond that (the stall);
 *  - at event i, the AFTER actions of i-1 fire, then the BEFORE actions of i,
 *    then the event itself; every call polls the copies that have landed;
 *  - a transfer call is ready at max(now, issuer) + call (the issuing thread
 *    is serial), starts at max(ready, its engine's busy_until) and lands
 *    latency + ceil(bytes / GB/s) later; a release (discard) is a call of
 *    latency only on the D2H engine;
 *  - an eviction or a release holds its bytes until it lands; a prefetch
 *    holds them from its issue;
 *  - room (a prefetch, an allocation, a page-in): while resident + need is
 *    over the budget, evict an unplanned victim if the evictions in flight
 *    cannot free enough (the runtime's: the least recently used resident
 *    block, paged back in at its next use), else wait for the oldest
 *    eviction in flight, else for the prefetch that lands first; with
 *    nothing left to evict or wait for, a prefetch is refused (the block is
 *    paged in at its use) and an allocation or a page-in goes over the
 *    budget, as residency.c does;
 *  - a prefetch of a block whose eviction is still in flight waits for it
 *    (replay.c does the same); a use waits for its prefetch, or pages the
 *    block in on demand (fault_ns + bytes / fault_gbps);
 *  - the host tier (o->host_cap_bytes) counts as residency.c counts it
 *    (mem/hostcap.h and mem/room.h hold the rules for both):
 *    bytes on the host, spilling included, plus bytes on their way there
 *    (evictions and restores in flight); an eviction or a restore that would
 *    take it over the cap first makes room: when what is leaving the host
 *    (spills and prefetches in flight) is not enough, with an NVMe tier
 *    (o->nvme) it spills the block that reached the host first; then it
 *    waits for the spill or the prefetch issued first, else (with an NVMe
 *    tier) the eviction or restore issued first, whose block can then be
 *    spilled (a stall, tier_ns); when there is nothing to wait for the
 *    eviction does not happen (the block stays on the device);
 *  - the NVMe tier is one FIFO device for spills (write) and restores
 *    (read), each latency + ceil(bytes / GB/s), with no issuing-thread cost
 *    (the tier thread issues them); a planned spill of a block whose
 *    eviction is in flight starts when that lands (unless the block is
 *    wanted back first), a restore of a block whose spill is
 *    still in flight waits for it, and a prefetch or a use of a block on the
 *    NVMe tier waits for its restore (starting one if none was planned),
 *    over the host cap when no room can be made;
 *  - two steps back to back, the second being the prediction: what the
 *    first leaves in flight holds the engines, the budget and the host tier,
 *    and a group member whose slot is still held by such a copy waits for it
 *    at its allocation (pipeline.c).
 * Not modelled: a spill that fails (the predicted disk never fills; the
 * runtime then spills nothing more for host room until the disk has room
 * again: res_room.c's spill_ok), the step's end (the runtime does not wait there), the
 * host-tier bytes of blocks that outlive the step (retained blocks left on
 * the host), and a wait for room on a spill or restore in flight (the
 * runtime may wait on any transfer; this waits on the copy engines').
 */

/* Tell the observer (hoff__plan_opts.observe) of a copy, page-in or stall
 * in the predicted step (the second pass). */
static void observe(const struct hoff__pm *p, int kind, uint32_t block, uint32_t group, uint64_t bytes, uint64_t issued,
                    uint64_t start, uint64_t end) {
    if (p->obs && p->pass)
        p->obs(p->obs_arg, &(struct hoff__xfer_obs){.kind = kind,
                                                    .block = block,
                                                    .group = group,
                                                    .bytes = bytes,
                                                    .issued = issued,
                                                    .start = start,
                                                    .end = end});
}

/* A transfer call of the issuing thread made now on the engine whose
 * busy_until is *busy (core/xfer.h's clock); its landing, reported as kind. */
static uint64_t call(struct hoff__pm *p, uint64_t *busy, uint64_t dur, int kind, uint32_t block, uint32_t group,
                     uint64_t bytes) {
    uint64_t start, land = hoff__xfer_call(p->now, &p->issuer, p->call, busy, 0, p->lat, dur, &start);

    observe(p, kind, block, group, bytes, p->issuer, start, land);
    return land;
}

#define HOFF__PM_NIL UINT32_MAX

static int bl_on(const struct hoff__pm_list *l, uint32_t x) {
    return l->prev[x] != HOFF__PM_NIL || l->head == x;
}

static void bl_remove(struct hoff__pm_list *l, uint32_t x) {
    if (!bl_on(l, x))
        return;
    if (l->prev[x] != HOFF__PM_NIL)
        l->next[l->prev[x]] = l->next[x];
    else
        l->head = l->next[x];
    if (l->next[x] != HOFF__PM_NIL)
        l->prev[l->next[x]] = l->prev[x];
    else
        l->tail = l->prev[x];
    l->prev[x] = l->next[x] = HOFF__PM_NIL;
}

static void bl_append(struct hoff__pm_list *l, uint32_t x) {
    bl_remove(l, x);
    l->prev[x] = l->tail;
    l->next[x] = HOFF__PM_NIL;
    if (l->tail != HOFF__PM_NIL)
        l->next[l->tail] = x;
    else
        l->head = x;
    l->tail = x;
}

void hoff__pm_list_reset(struct hoff__pm_list *l, uint32_t nb) {
    uint32_t i;

    for (i = 0; i < nb; i++)
        l->prev[i] = l->next[i] = HOFF__PM_NIL;
    l->head = l->tail = HOFF__PM_NIL;
}

static void lru_remove(struct hoff__pm *p, uint32_t x) {
    bl_remove(&p->lru, x);
}

/* x is resident and was just used (or arrived): most recently used. */
static void lru_touch(struct hoff__pm *p, uint32_t x) {
    if (p->t->blocks[x].pinned)
        return; /* never a victim */
    bl_append(&p->lru, x);
}

/* x leaves the host (prefetched, paged in, spilled, freed, released). */
static void host_leave(struct hoff__pm *p, uint32_t x) {
    bl_remove(&p->hl, x);
}

/* x's host copy is gone now (paged in, freed, released): off the count too. */
static void host_drop(struct hoff__pm *p, uint32_t x) {
    p->host -= p->bytes[x];
    host_leave(p, x);
}

static int nvme_push(struct hoff__pm *p, uint32_t x, int kind);

static void land(struct hoff__pm *p, const struct hoff__pm_q *e) {
    p->resident -= e->bytes;
    p->evicting -= e->bytes;
    if (e->kind == Q_RELEASE)
        return;
    p->to_host -= e->bytes;
    if (e->block != HOFF__PM_NIL && p->st[e->block] == P_EVI) { /* freed in flight: its host copy is dead */
        p->st[e->block] = P_HOST;
        p->host += e->bytes;
        bl_append(&p->hl, e->block);
        if (p->sa[e->block]) { /* the planned spill, now that it can (residency.c's retire) */
            p->sa[e->block] = 0;
            if (nvme_push(p, e->block, Q_SPILL) != 0)
                p->err = -ENOMEM;
        }
    }
}

/* A spill or a restore has landed (residency.c's retire). */
static void land_nvme(struct hoff__pm *p, const struct hoff__pm_q *e) {
    uint32_t x = e->block;

    if (e->kind == Q_SPILL) { /* its host copy is gone, freed in flight or not */
        p->spilling -= e->bytes;
        p->host -= e->bytes;
        if (x != HOFF__PM_NIL && p->st[x] == P_SPI)
            p->st[x] = P_NVM;
        return;
    }
    p->to_host -= e->bytes;
    if (x != HOFF__PM_NIL && p->st[x] == P_RES) {
        p->st[x] = P_HOST;
        p->host += e->bytes;
        bl_append(&p->hl, x);
    }
}

void hoff__pm_poll(struct hoff__pm *p) {
    while (p->qh < p->qt && p->q[p->qh].land <= p->now)
        land(p, &p->q[p->qh++]);
    while (p->nh < p->nt && p->nq[p->nh].land <= p->now)
        land_nvme(p, &p->nq[p->nh++]);
    while (p->hh < p->ht && p->hq[p->hh].land <= p->now) {
        uint32_t x = p->hq[p->hh].block;
        uint64_t nbytes = p->hq[p->hh++].bytes;

        p->host -= nbytes; /* on the host until it lands, as residency.c counts it */
        p->from_host -= nbytes;
        if (x == HOFF__PM_NIL) { /* the step before's, freed in flight */
            p->resident -= nbytes;
            continue;
        }
        if (p->st[x] == P_PRE) { /* landed: resident, and a victim like any other */
            p->st[x] = P_DEV;
            lru_touch(p, x);
        } else if (p->st[x] == P_FREED_PRE) { /* freed in flight: its bytes go now */
            p->resident -= p->bytes[x];
            p->st[x] = P_NONE;
        }
    }
}

/* Make room for one more entry at the tail *qt of the queue *q (capacity *cap): 0 or -ENOMEM. */
static int push(struct hoff__pm_q **q, size_t *qt, size_t *cap) {
    return HOFF__GROW(*q, *cap, *qt + 1);
}

/* Compute waits until `when` (a stall, added to *to). */
static void wait_until(struct hoff__pm *p, uint64_t when, uint64_t *to) {
    if (when > p->now) {
        observe(p, HOFF__XF_WAIT, HOFF__PM_NIL, 0, 0, p->now, p->now, when);
        *to += when - p->now;
        p->now = when;
    }
    hoff__pm_poll(p);
}

/* Wait for the oldest copy on the D2H FIFO; 0 if there is none. */
static int wait_oldest(struct hoff__pm *p) {
    if (p->qh == p->qt)
        return 0;
    wait_until(p, p->q[p->qh].land, &p->out->room_ns);
    return 1;
}

static int d2h_push(struct hoff__pm *p, uint64_t bytes, uint32_t block, int kind) {
    struct hoff__pm_q *e;

    if (push(&p->q, &p->qt, &p->qcap))
        return -ENOMEM;
    e = &p->q[p->qt++];
    e->land = call(p, &p->d2h_busy, kind == Q_RELEASE ? 0 : hoff__copy_ns(bytes, p->d2h),
                   kind == Q_RELEASE ? HOFF__XF_DISCARD : HOFF__XF_EVICT, block, 0, bytes);
    e->bytes = bytes;
    e->block = block;
    e->kind = (uint8_t)kind;
    e->seq = p->seq++;
    if (block != HOFF__PM_NIL)
        p->dland[block] = e->land;
    p->evicting += bytes;
    if (kind != Q_RELEASE) {
        p->out->bytes_d2h += bytes;
        p->out->evict_calls++;
    }
    if (kind == Q_VICTIM)
        p->out->victim_bytes += bytes;
    if (block != HOFF__PM_NIL)
        lru_remove(p, block);
    return 0;
}

/* Would `bytes` more take the host tier over its cap (res_room.c's hoff__res_host_full)? */
static int host_full(const struct hoff__pm *p, uint64_t bytes) {
    return hoff__host_full(p->cap, p->host, p->to_host, bytes);
}

/* Queue an operation on the NVMe device: a spill of a block on the host or
 * a restore of a block on the NVMe tier. */
static int nvme_push(struct hoff__pm *p, uint32_t x, int kind) {
    uint64_t start;

    if (push(&p->nq, &p->nt, &p->ncap))
        return -ENOMEM;
    hoff__xfer_call(p->now, NULL, 0, &p->nvme_busy, 0, p->lat,
                    hoff__copy_ns(p->bytes[x], kind == Q_SPILL ? p->nvme_w : p->nvme_r), &start);
    observe(p, kind == Q_SPILL ? HOFF__XF_SPILL : HOFF__XF_RESTORE, x, 0, p->bytes[x], p->now, start, p->nvme_busy);
    p->nq[p->nt++] = (struct hoff__pm_q){
        .land = p->nvme_busy, .bytes = p->bytes[x], .seq = p->seq++, .block = x, .kind = (uint8_t)kind};
    p->nland[x] = p->nvme_busy;
    if (kind == Q_SPILL) {
        p->spilling += p->bytes[x];
        p->st[x] = P_SPI;
        host_leave(p, x);
        p->out->bytes_spilled += p->bytes[x];
    } else {
        p->to_host += p->bytes[x];
        p->st[x] = P_RES;
        p->out->bytes_restored += p->bytes[x];
    }
    return 0;
}

/* The runtime's host room (res_room.c's hoff__res_make_host_room, room.h's decisions): keep the host tier under its cap
 * for `bytes` more.  When what is leaving the host (spills and prefetches in flight) is not enough, spill the block
 * that reached the host first (never keep, nor a block held while it comes back); then wait for the spill or the
 * prefetch issued first, else (with an NVMe tier) the eviction or restore
 * issued first.  0 when the bytes fit (at once when the host has room),
 * 1 when they cannot (nothing to spill or wait for), -ENOMEM. */
static int host_room(struct hoff__pm *p, uint64_t bytes, uint32_t keep) {
    for (;;) {
        struct hoff__host_books h = {p->cap, p->host, p->to_host, p->spilling, p->from_host};
        struct hoff__host_cands c = {.can_spill = p->nvme};
        size_t k, e, r;
        uint32_t v;
        int rc;

        /* what room.c decides over: the host block that got there first (not keep, not one held), the first spill
         * and the first prefetch, the first eviction and the first restore in flight */
        for (v = p->hl.head; v != HOFF__PM_NIL && (v == keep || p->hold[v]); v = p->hl.next[v])
            ;
        for (k = p->nh; k < p->nt && p->nq[k].kind != Q_SPILL; k++)
            ;
        for (e = p->qh; e < p->qt && p->q[e].kind == Q_RELEASE; e++)
            ;
        for (r = p->nh; r < p->nt && p->nq[r].kind != Q_RESTORE; r++)
            ;
        c.victim = v != HOFF__PM_NIL;
        c.leaving = p->hh < p->ht || k < p->nt;
        c.arriving = e < p->qt || r < p->nt;
        switch (hoff__room_host(&h, bytes, &c)) {
        case HOFF__HOST_FITS: return 0;
        case HOFF__HOST_SPILL:
            if ((rc = nvme_push(p, v, Q_SPILL)) != 0)
                return rc;
            break;
        case HOFF__HOST_WAIT_LEAVING: /* the spill or the prefetch issued first */
            if (p->hh < p->ht && (k == p->nt || p->hq[p->hh].seq < p->nq[k].seq))
                wait_until(p, p->hq[p->hh].land, &p->out->tier_ns);
            else
                wait_until(p, p->nq[k].land, &p->out->tier_ns);
            break;
        case HOFF__HOST_WAIT_ARRIVING: /* the eviction or restore issued first: its block can then be spilled */
            if (e < p->qt && (r == p->nt || p->q[e].seq < p->nq[r].seq))
                wait_until(p, p->q[e].land, &p->out->tier_ns);
            else
                wait_until(p, p->nq[r].land, &p->out->tier_ns);
            break;
        default: return 1;
        }
    }
}

/* Start evicting resident block x (planned, or a victim): host room first;
 * 1 when the host tier has none (the block stays on the device). */
static int start_evict(struct hoff__pm *p, uint32_t x, int kind) {
    int rc = host_room(p, p->bytes[x], x);

    if (rc)
        return rc;
    if ((rc = d2h_push(p, p->bytes[x], x, kind)) != 0)
        return rc;
    p->to_host += p->bytes[x];
    p->st[x] = P_EVI;
    return 0;
}

/* A block on the NVMe tier (or on its way there or back) back on the host,
 * waiting for it: a use or a prefetch needs the bytes (residency.c's
 * to_host_now).  When no host room can be made the block comes back over
 * the cap, as residency.c's start_restore does for a use.  0, -ENOMEM. */
static int to_host_now(struct hoff__pm *p, uint32_t x) {
    int rc;

    if (p->st[x] == P_SPI || p->st[x] == P_RES)
        wait_until(p, p->nland[x], &p->out->tier_ns);
    if (p->st[x] == P_NVM) {
        if ((rc = host_room(p, p->bytes[x], x)) < 0)
            return rc;
        if ((rc = nvme_push(p, x, Q_RESTORE)) != 0)
            return rc;
        wait_until(p, p->nland[x], &p->out->tier_ns);
    }
    return 0;
}

static int do_spill(struct hoff__pm *p, uint32_t x) {
    hoff__pm_poll(p);
    if (p->st[x] == P_EVI) /* once the eviction lands (land()) */
        p->sa[x] = 1;
    return p->st[x] == P_HOST ? nvme_push(p, x, Q_SPILL) : 0; /* else skipped, as the runtime does */
}

static int do_restore(struct hoff__pm *p, uint32_t x) {
    int rc;

    hoff__pm_poll(p);
    if (p->st[x] == P_SPI) /* its spill must land first (replay.c waits) */
        wait_until(p, p->nland[x], &p->out->tier_ns);
    if (p->st[x] != P_NVM)
        return 0;
    if ((rc = host_room(p, p->bytes[x], x)) != 0)
        return rc < 0 ? rc : 0;
    return nvme_push(p, x, Q_RESTORE);
}

static int make_room_once(struct hoff__pm *p, uint64_t need, uint32_t keep);

/* The runtime's make_room (res_room.c, room.h's decisions): victims least recently used first (never keep),
 * else the oldest eviction in flight, else the prefetch that lands first;
 * keep is held on the host meanwhile (never spilled for a victim's room).
 * 0, 1 when there is no room to be made (an allocation or a page-in then
 * overruns the budget, a prefetch is refused), -ENOMEM. */
static int make_room(struct hoff__pm *p, uint64_t need, uint32_t keep) {
    uint8_t held;
    int rc;

    if (keep == HOFF__PM_NIL)
        return make_room_once(p, need, keep);
    held = p->hold[keep];
    p->hold[keep] = 1;
    rc = make_room_once(p, need, keep);
    p->hold[keep] = held;
    return rc;
}

static int make_room_once(struct hoff__pm *p, uint64_t need, uint32_t keep) {
    if (!p->budget)
        return 0;
    for (;;) {
        enum hoff__room_step step;
        uint32_t v;
        int rc;

        hoff__pm_poll(p);
        step = hoff__room_device(p->resident, p->evicting, need, p->budget);
        if (step == HOFF__ROOM_FITS)
            return 0;
        if (step == HOFF__ROOM_EVICT) {
            /* res_room.c's pick_victim: never keep, one in its use window, or one the host tier can never take */
            for (v = p->lru.head;
                 v != HOFF__PM_NIL && hoff__room_victim(v == keep, v != keep && hoff__plan_window_open(p->t, v, p->ev),
                                                        0, p->cap, p->bytes[v]) != HOFF__VICTIM_OK;
                 v = p->lru.next[v])
                ;
            if (v != HOFF__PM_NIL) {
                if ((rc = start_evict(p, v, Q_VICTIM)) != 0)
                    return rc; /* 1: the host tier is full, no room */
                continue;
            }
        }
        if (wait_oldest(p))
            continue;
        if (p->hh < p->ht) { /* a prefetch in flight: wait for it to land */
            wait_until(p, p->hq[p->hh].land, &p->out->room_ns);
            continue;
        }
        return 1; /* nothing left to evict or wait for: no room */
    }
}

static int do_evict(struct hoff__pm *p, uint32_t x) {
    int rc;

    hoff__pm_poll(p);
    if (p->st[x] != P_DEV)
        return 0; /* the runtime skips it too (not resident: a victim already, or in flight) */
    rc = start_evict(p, x, Q_EVICT);
    return rc < 0 ? rc : 0; /* 1: the host tier is full, the block stays */
}

static int do_release(struct hoff__pm *p, uint32_t x) {
    int rc = 0;

    p->sa[x] = 0;
    hoff__pm_poll(p);
    if (p->st[x] == P_DEV)
        rc = d2h_push(p, p->bytes[x], x, Q_RELEASE);
    else if (p->st[x] == P_PRE) /* a prefetch in flight: cannot happen in a valid schedule */
        p->resident -= p->bytes[x];
    else if (p->st[x] == P_HOST) /* the host copy is simply dead */
        host_drop(p, x);
    else if (p->st[x] == P_SPI || p->st[x] == P_RES || p->st[x] == P_EVI)
        return 0; /* busy: the runtime skips it */
    p->st[x] = P_DEAD;
    return rc;
}

int hoff__pm_prefetch(struct hoff__pm *p, uint32_t x) {
    int rc;

    p->sa[x] = 0; /* wanted back: no spill when its eviction lands */
    hoff__pm_poll(p);
    while (p->st[x] == P_EVI && wait_oldest(p))
        ;
    if ((p->st[x] == P_SPI || p->st[x] == P_NVM || p->st[x] == P_RES) && (rc = to_host_now(p, x)) != 0)
        return rc;
    if (p->st[x] != P_HOST)
        return 0;
    if ((rc = make_room(p, p->bytes[x], x)) != 0)
        return rc < 0 ? rc : 0; /* refused (residency.c): paged in at its use */
    if ((rc = push(&p->hq, &p->ht, &p->hcap)) != 0)
        return rc;
    host_leave(p, x); /* counted on the host until the copy lands */
    p->pland[x] = call(p, &p->h2d_busy, hoff__copy_ns(p->bytes[x], p->h2d), HOFF__XF_PREFETCH, x, 0, p->bytes[x]);
    p->hq[p->ht].land = p->pland[x];
    p->hq[p->ht].block = x;
    p->hq[p->ht].bytes = p->bytes[x];
    p->hq[p->ht].seq = p->seq++;
    p->hq[p->ht++].kind = 0;
    p->resident += p->bytes[x];
    p->from_host += p->bytes[x];
    p->st[x] = P_PRE;
    p->out->bytes_h2d += p->bytes[x];
    p->out->prefetch_calls++;
    return 0;
}

static int do_access(struct hoff__pm *p, uint32_t x) {
    uint64_t c;
    int rc;

    p->sa[x] = 0;
    hoff__pm_poll(p);
    switch (p->st[x]) {
    case P_DEV: lru_touch(p, x); return 0;
    case P_PRE:
        wait_until(p, p->pland[x], &p->out->late_ns);
        p->st[x] = P_DEV;
        lru_touch(p, x);
        return 0;
    case P_EVI:
        while (p->st[x] == P_EVI && wait_oldest(p))
            ;
        break;
    case P_SPI:
    case P_NVM:
    case P_RES:
        if ((rc = to_host_now(p, x)) != 0) /* off the disk first */
            return rc;
        break;
    case P_HOST: break;
    default: return 0;
    }
    if ((rc = make_room(p, p->bytes[x], x)) < 0) /* 1: paged in over the budget */
        return rc;
    p->out->overruns += rc == 1;
    if (p->st[x] == P_HOST)
        host_drop(p, x);
    c = hoff__sat_add(p->fault_ns, hoff__copy_ns(p->bytes[x], p->fault_gbps));
    observe(p, HOFF__XF_FAULT, x, 0, p->bytes[x], p->now, p->now, p->now + c);
    p->now += c;
    p->out->fault_ns += c;
    p->out->faults++;
    p->resident += p->bytes[x];
    p->st[x] = P_DEV;
    lru_touch(p, x);
    return 0;
}

int hoff__pm_event(struct hoff__pm *p, const struct hoff__tev *e) {
    uint32_t x = e->block;
    int rc;

    if (e->kind != HOFF__TEV_ALLOC && e->kind != HOFF__TEV_FREE && e->kind != HOFF__TEV_ACCESS)
        return 0;
    if (x >= p->t->nblocks || p->t->blocks[x].pool != 1)
        return 0;
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        /* A group member whose slot is still held by the step before's copy
         * in flight waits for it to land (pipeline.c): a stall. */
        if (p->carry[x] > p->now && p->s->block_group && x < p->s->nblocks_grouped && p->s->block_group[x])
            wait_until(p, p->carry[x], &p->out->room_ns);
        if ((rc = make_room(p, p->bytes[x], x)) < 0) /* 1: allocated over the budget */
            return rc;
        p->out->overruns += rc == 1;
        p->resident += p->bytes[x];
        p->st[x] = P_DEV;
        lru_touch(p, x);
        return 0;
    case HOFF__TEV_ACCESS: return do_access(p, x);
    default: /* free */
        p->sa[x] = 0;
        hoff__pm_poll(p);
        lru_remove(p, x);
        if (p->st[x] == P_PRE) { /* residency.c counts it until its copy lands */
            p->st[x] = P_FREED_PRE;
            p->busy[x] = p->pland[x];
            return 0;
        }
        if ((p->st[x] == P_EVI || p->st[x] == P_DEAD) && p->dland[x] > p->now)
            p->busy[x] = p->dland[x];
        if ((p->st[x] == P_SPI || p->st[x] == P_RES) && p->nland[x] > p->now)
            p->busy[x] = p->nland[x];
        if (p->st[x] == P_DEV)
            p->resident -= p->bytes[x];
        if (p->st[x] == P_HOST) /* the host copy is dead */
            host_drop(p, x);
        /* an eviction, a spill or a restore in flight still lands (and gives
         * its bytes back) */
        p->st[x] = P_NONE;
        return 0;
    }
}

/* A group's EVICT or PREFETCH (plan.h): the first member's action moves
 * every member with one call when each is where the call moves it from
 * (for a prefetch, after waiting for members whose own eviction is still in
 * flight), as replay.c and hoff__res_group do; else block by block.
 * Returns 1 when the action is covered by the group's call. */
static int fire_group(struct hoff__pm *p, const struct hoff__action *a, int *rc) {
    const struct hoff__schedule *s = p->s;
    const struct hoff__group *g;
    uint8_t *st;
    uint64_t total = 0, land;
    uint32_t k, want;
    int evict = a->kind == HOFF__ACT_EVICT;

    *rc = 0;
    if (!a->group || a->group > s->ngroups || !p->gst || (a->kind != HOFF__ACT_EVICT && a->kind != HOFF__ACT_PREFETCH))
        return 0;
    g = &s->groups[a->group - 1];
    st = &p->gst[2 * (a->group - 1) + (evict ? 0 : 1)];
    if (*st)
        return *st == 1;
    hoff__pm_poll(p);
    want = evict ? P_DEV : P_HOST;
    for (k = 0; k < g->n && !evict; k++) {
        uint32_t x = s->gmember[g->first + k].block;

        p->sa[x] = 0;
        while (p->st[x] == P_EVI && wait_oldest(p))
            ;
    }
    for (k = 0; k < g->n; k++) {
        uint32_t x = s->gmember[g->first + k].block;

        if (p->st[x] != want)
            break;
        total += p->bytes[x];
    }
    if (k < g->n || (evict && host_full(p, total))) { /* block by block (the host tier makes room) */
        *st = 2;
        return 0;
    }
    if (!evict) {
        for (k = 0; k < g->n; k++) /* the members stay on the host while room is made */
            p->hold[s->gmember[g->first + k].block] = 1;
        *rc = make_room(p, total, s->gmember[g->first].block);
        for (k = 0; k < g->n; k++)
            p->hold[s->gmember[g->first + k].block] = 0;
        if (*rc == 1) { /* no room for the whole group: block by block */
            *rc = 0;
            *st = 2;
            return 0;
        }
        if (*rc)
            return 0;
        for (k = 0; k < g->n; k++) /* still where they were (residency.c checks) */
            if (p->st[s->gmember[g->first + k].block] != P_HOST) {
                *st = 2;
                return 0;
            }
    }
    if (evict) {
        land = call(p, &p->d2h_busy, hoff__copy_ns(total, p->d2h), HOFF__XF_EVICT, s->gmember[g->first].block, a->group,
                    total);
        for (k = 0; k < g->n; k++) {
            uint32_t x = s->gmember[g->first + k].block;

            if ((*rc = push(&p->q, &p->qt, &p->qcap)) != 0)
                return 0;
            p->q[p->qt++] =
                (struct hoff__pm_q){.land = land, .bytes = p->bytes[x], .seq = p->seq, .block = x, .kind = Q_EVICT};
            p->evicting += p->bytes[x];
            p->to_host += p->bytes[x];
            p->dland[x] = land;
            p->st[x] = P_EVI;
            lru_remove(p, x);
        }
        p->out->bytes_d2h += total;
        p->out->evict_calls++;
        p->seq++;
    } else {
        land = call(p, &p->h2d_busy, hoff__copy_ns(total, p->h2d), HOFF__XF_PREFETCH, s->gmember[g->first].block,
                    a->group, total);
        for (k = 0; k < g->n; k++) {
            uint32_t x = s->gmember[g->first + k].block;

            if ((*rc = push(&p->hq, &p->ht, &p->hcap)) != 0)
                return 0;
            p->hq[p->ht++] =
                (struct hoff__pm_q){.land = land, .bytes = p->bytes[x], .seq = p->seq, .block = x, .kind = 0};
            p->pland[x] = land;
            p->resident += p->bytes[x];
            p->from_host += p->bytes[x];
            p->st[x] = P_PRE;
            host_leave(p, x);
        }
        p->out->bytes_h2d += total;
        p->out->prefetch_calls++;
        p->seq++;
    }
    *st = 1;
    return 1;
}

/* One planned action, as replay.c fires it. */
int hoff__pm_fire(struct hoff__pm *p, const struct hoff__action *a) {
    int rc;

    if (fire_group(p, a, &rc) || rc)
        return rc;
    switch (a->kind) {
    case HOFF__ACT_EVICT: return do_evict(p, a->block);
    case HOFF__ACT_PREFETCH: return hoff__pm_prefetch(p, a->block);
    case HOFF__ACT_RELEASE: return do_release(p, a->block);
    case HOFF__ACT_SPILL: return do_spill(p, a->block);
    case HOFF__ACT_RESTORE: return do_restore(p, a->block);
    default: return 0;
    }
}
