/* res_state.c — the books of residency: the state machine (which event is legal in which state), the lists a block
 * is on in each state, the byte counters and their gauges, and a block's free.  The lowest of the residency files:
 * it calls only res_fence.c (a freed block's use window closes) and the manual groups (a freed block leaves its
 * group), never the files that issue transfers or make room.
 * Threading: caller holds the context lock. */
#include "config.h"

#include <errno.h>

#include "core/core.h"
#include "mem/res_internal.h"
#include "mem/swapgroup.h"
#include "tier/nvme.h"

/* --- the state machine ----------------------------------------------------- */

#define NO_AL (-EALREADY)
#define BUSY (-EBUSY)
#define INVAL (-EINVAL)

/* next[state][event].  A discard in flight is shown as evicting (it holds
 * device pages until it lands); a block on the NVMe tier is restored to the
 * host before it can be prefetched or paged in (-EBUSY until then). */
static const int next_state[HOFF__RES_STATE_COUNT][HOFF__EV_COUNT] = {
    /*           EVICT  E_DONE  E_FAIL PREF   P_DONE P_FAIL  DISC   FAULT  POPUL  SPILL  S_DONE S_FAIL REST   R_DONE
       R_FAIL */
    [S_DEV] = {S_EVI, INVAL, INVAL, NO_AL, INVAL, INVAL, S_DIS, NO_AL, NO_AL, INVAL, INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_EVI] = {NO_AL, S_HOST, S_DEV, BUSY, INVAL, INVAL, BUSY, BUSY, BUSY, BUSY, INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_HOST] = {NO_AL, INVAL, INVAL, S_PRE, INVAL, INVAL, S_DIS, S_DEV, S_DEV, S_SPI, INVAL, INVAL, NO_AL, INVAL,
                INVAL},
    [S_PRE] = {BUSY, INVAL, INVAL, NO_AL, S_DEV, S_HOST, BUSY, BUSY, BUSY, BUSY, INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_DIS] = {NO_AL, INVAL, INVAL, S_PRE, INVAL, INVAL, NO_AL, S_DEV, S_DEV, INVAL, INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_SPI] = {NO_AL, INVAL, INVAL, BUSY, INVAL, INVAL, BUSY, BUSY, BUSY, NO_AL, S_NVM, S_HOST, BUSY, INVAL, INVAL},
    [S_NVM] = {NO_AL, INVAL, INVAL, BUSY, INVAL, INVAL, S_DIS, BUSY, INVAL, NO_AL, INVAL, INVAL, S_RES, INVAL, INVAL},
    [S_RES] = {NO_AL, INVAL, INVAL, BUSY, INVAL, INVAL, BUSY, BUSY, BUSY, BUSY, INVAL, INVAL, NO_AL, S_HOST, S_NVM},
};

int hoff__res_next(int st, int ev) {
    if (st < 0 || st >= HOFF__RES_STATE_COUNT || ev < 0 || ev >= HOFF__EV_COUNT)
        return -EINVAL;
    return next_state[st][ev];
}

const char *hoff__res_state_name(int st) {
    static const char *const names[HOFF__RES_STATE_COUNT] = {"device",    "evicting", "host", "prefetching",
                                                             "discarded", "spilling", "nvme", "restoring"};
    return st >= 0 && st < HOFF__RES_STATE_COUNT ? names[st] : "invalid";
}

const char *hoff__res_event_name(int ev) {
    static const char *const names[HOFF__EV_COUNT] = {
        "evict",    "evict-done", "evict-fail", "prefetch",   "prefetch-done", "prefetch-fail", "discard",     "fault",
        "populate", "spill",      "spill-done", "spill-fail", "restore",       "restore-done",  "restore-fail"};
    return ev >= 0 && ev < HOFF__EV_COUNT ? names[ev] : "invalid";
}

/* --- lists and books ------------------------------------------------------- */

/* The block enters state st: move it between lists (LRU on the device,
 * in flight, on the host; none for the others). */
void hoff__res_set_state(struct hoff__mem *mem, struct hoff__block *b, int st) {
    int live = (b->flags & HOFF__BLK_LIVE) != 0;

    if (b->state == S_DEV && hoff__res_evictable(b) && live)
        hoff__res_list_remove(HOFF__RES_LRU(mem), b);
    else if (hoff__res_in_flight(b->state))
        hoff__res_list_remove(HOFF__RES_INF(mem), b);
    else if (b->state == S_HOST && live)
        hoff__res_list_remove(HOFF__RES_HOSTL(mem), b);
    b->state = (uint8_t)st;
    if (st == S_DEV && hoff__res_evictable(b) && live)
        hoff__res_list_append(HOFF__RES_LRU(mem), b);
    else if (hoff__res_in_flight(st))
        hoff__res_list_append(HOFF__RES_INF(mem), b);
    else if (st == S_HOST && live)
        hoff__res_list_append(HOFF__RES_HOSTL(mem), b);
}

void hoff__res_note_resident(struct hoff__mem *mem) {
    struct hoff__mem_stats *st = &mem->st;

    HOFF__GAUGE_SET(st, resident_bytes, mem->res.resident, peak_resident_bytes);
    HOFF__STAT_PEAK(st, step_peak_resident_bytes, mem->res.resident);
    if (mem->lim.budget_bytes && mem->res.resident > mem->lim.budget_bytes)
        HOFF__STAT_ADD(st, budget_overruns, 1);
    HOFF__GAUGE_SET(st, host_bytes, mem->res.host, peak_host_bytes);
    HOFF__GAUGE_SET(st, nvme_bytes, mem->res.nvme, peak_nvme_bytes);
}

/* The spilled copy is dead (freed, discarded): give its file space back. */
void hoff__res_drop_spill(struct hoff__mem *mem, struct hoff__block *b) {
    hoff__nvme_drop(mem->nvme, b->spill);
    b->spill = NULL;
    mem->res.nvme -= b->size;
}

int hoff__res_on_free(struct hoff__mem *mem, struct hoff__block *b) {
    hoff__res_end_use(mem, b); /* stream-ordered: its uses are enqueued */
    hoff__group_leave(mem, b); /* a freed block is no member of a manual group */
    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER;
    switch (b->state) {
    case S_EVI:
    case S_PRE:
    case S_SPI:
    case S_RES:
        b->flags |= HOFF__BLK_FREED;
        b->flags &= (uint8_t)~HOFF__BLK_LIVE;
        return 0;
    case S_DEV:
        if (b->kept) {
            mem->res.kept -= b->size;
        } else {
            if (hoff__res_evictable(b))
                hoff__res_list_remove(HOFF__RES_LRU(mem), b);
            mem->res.resident -= b->size;
        }
        break;
    case S_HOST:
        mem->res.host -= b->size;
        hoff__res_set_state(mem, b, S_DIS); /* the host copy is dead: reuse repopulates */
        break;
    case S_NVM:
        hoff__res_drop_spill(mem, b);
        hoff__res_set_state(mem, b, S_DIS);
        break;
    default: break;
    }
    b->flags &= (uint8_t)~HOFF__BLK_LIVE;
    b->kept = 0;
    hoff__res_note_resident(mem);
    return 1;
}
