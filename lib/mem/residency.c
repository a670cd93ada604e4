/* residency.c — the actions of residency.h on offload candidates (allocation, evict, prefetch, discard, spill,
 * restore, keep, access, group moves), the top of the residency files (res_internal.h): the state machine and the
 * books are res_state.c's, the transfers res_xfer.c's, making room res_room.c's.  Threading: caller holds the context
 * lock; hoff__res_cmd_done runs on the issuing thread.
 *
 * Accounting.  `resident` counts the bytes of live managed blocks that hold
 * device memory: DEVICE, EVICTING (the device copy lives until the D2H copy
 * completes) and PREFETCHING (it occupies the device from the moment its H2D
 * copy starts).  It changes only at transitions, under the lock, so it is
 * exact at every event.  When a block would take it over the budget, the
 * least recently used unpinned blocks on the device are evicted, and the
 * caller waits (a counted stall) until enough of those copies complete.
 *
 * Groups.  hoff__res_group moves the blocks of a group laid out in one
 * region with ONE backend call over their range.  Each member still goes
 * through its own transition (DEVICE -> EVICTING -> HOST, ...) with its own
 * bytes in the books; the command is carried by one member (the leader: its
 * `pending`, `xfer_rc` and `ev`), the others point to it (xlead) and are
 * chained (xnext), and whichever member is retired first retires them all:
 * one completion, one outcome for every member. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "mem/guard.h"
#include "mem/res_internal.h"
#include "mem/swapgroup.h"
#include "tier/nvme.h"
#include "tier/spill.h"

/* --- actions --------------------------------------------------------------- */

int hoff__res_on_alloc(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = mem->be;
    enum hoff__room_why why;
    int rc;

    b->moved = 0;
    if (!b->kept) {
        hoff__res_check_host_cap(mem, b);
        if (hoff__res_make_room(mem, b->size, b, s, &why) != 0)
            hoff__res_overrun(mem, b->size, why);
    }
    if (b->state != S_DEV) {
        /* A cached mapping whose contents were dropped: contents undefined. */
        rc = hoff__res_next(b->state, HOFF__EV_POPULATE);
        if (rc < 0)
            return rc;
        rc = be->ops->populate(be, b->ptr, b->size, s);
        if (rc)
            return rc;
        hoff__guard_fault(mem, s); /* pages appear: no measure of the driver meanwhile */
    }
    b->state = S_DEV;
    if (b->kept) { /* the recorded step kept it (ctx_alloc.c): outside the budget from the start */
        mem->res.kept += b->size;
    } else {
        mem->res.resident += b->size;
        if (hoff__res_evictable(b))
            hoff__res_list_append(HOFF__RES_LRU(mem), b);
    }
    hoff__res_note_resident(mem);
    hoff__res_window_open(mem, b, s); /* the caller fills it next (its streams: s's, from the pool) */
    return 0;
}

static int candidate(const struct hoff__block *b) {
    if (b->pool != HOFF__POOL_MANAGED)
        return hoff__error(-EPERM, "block %p is in the device pool: not an offload candidate", b->ptr);
    if (b->kept)
        return hoff__error(-EPERM,
                           "block %p is kept on the device (hoff_keep: a gradient or an optimizer's "
                           "block): never offloaded",
                           b->ptr);
    if (b->flags & HOFF__BLK_PINNED)
        return hoff__error(-EPERM, "block %p was allocated inside a region: never offloaded", b->ptr);
    return 0;
}

static int check_next(const struct hoff__block *b, int ev) {
    int n = hoff__res_next(b->state, ev);

    if (n < 0)
        return hoff__error(n, "cannot %s block %p while it is %s", hoff__res_event_name(ev), b->ptr,
                           hoff__res_state_name(b->state));
    return n;
}

int hoff__res_evict(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    hoff__res_poll(mem);
    if ((rc = check_next(b, HOFF__EV_EVICT)) < 0)
        return rc;
    if ((rc = hoff__res_window_closed(mem, b, "evict")) != 0)
        return rc;
    rc = hoff__res_start_evict(mem, b, s);
    hoff__res_note_resident(mem);
    return rc;
}

int hoff__res_prefetch(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    enum hoff__room_why why;
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back */
    hoff__res_poll(mem);
    if (b->state == S_NVM && (rc = hoff__res_to_host_now(mem, b, s)) != 0)
        return rc; /* an online prefetch of a spilled block: restore, waiting */
    if ((rc = check_next(b, HOFF__EV_PREFETCH)) < 0)
        return rc;
    if (hoff__res_make_room(mem, b->size, b, s, &why) != 0) {
        char cause[400];

        return hoff__error(-HOFF_EBUDGET, "prefetch of %p (%zu bytes) does not fit in the budget: %s", b->ptr, b->size,
                           hoff__res_room_cause(mem, why, cause, sizeof cause));
    }
    if ((rc = hoff__res_issue(mem, b, HOFF__CMD_PREFETCH, s)) != 0)
        return rc;
    mem->res.resident += b->size;
    if (b->state == S_DIS) /* no bytes on the host to move: it takes no host room (retire) */
        b->flags |= HOFF__BLK_DISCARDING;
    else
        mem->res.from_host += b->size;
    hoff__res_set_state(mem, b, S_PRE);
    hoff__res_note_resident(mem);
    return 0;
}

int hoff__res_group(struct hoff__mem *mem, int op, struct hoff__block *const *m, unsigned n, void *base, size_t size,
                    hoff_stream s) {
    struct hoff__backend *be = mem->be;
    struct hoff__block *lead;
    struct hoff__cmd cmd;
    uint64_t total = 0, now;
    unsigned i;
    int rc, want = op == HOFF__CMD_EVICT ? S_DEV : S_HOST;

    if ((op != HOFF__CMD_EVICT && op != HOFF__CMD_PREFETCH) || !n || !m)
        return -EINVAL;
    hoff__res_poll(mem);
    /* A member whose own eviction is still in flight: wait for it to land,
     * as hoff__res_prefetch does. */
    for (i = 0; op == HOFF__CMD_PREFETCH && i < n; i++) {
        if (m[i])
            m[i]->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back */
        if (m[i] && m[i]->state == S_EVI && (m[i]->flags & HOFF__BLK_LIVE))
            hoff__res_finish(mem, m[i], HOFF__WAIT_USE);
    }
    /* Every member live, movable, settled where the call moves it from, and
     * the members tile the range in order. */
    for (i = 0; i < n; i++) {
        const struct hoff__block *b = m[i];

        if (!b || b->pool != HOFF__POOL_MANAGED || !(b->flags & HOFF__BLK_LIVE) ||
            (b->flags & (HOFF__BLK_PINNED | HOFF__BLK_FREED)) || b->state != want ||
            __atomic_load_n(&b->pending, __ATOMIC_ACQUIRE) || b->xlead || (op == HOFF__CMD_EVICT && b->win) ||
            b->mgroup != m[0]->mgroup || (char *)b->ptr != (char *)base + total || b->size > size - total)
            return -EAGAIN;
        total += b->size;
    }
    if (total != size)
        return -EAGAIN;
    lead = m[0];
    if (op == HOFF__CMD_EVICT) {
        if (hoff__res_host_full(mem, total))
            return -ENOSPC; /* block by block: the host tier makes room as it must */
    } else {
        for (i = 0; i < n; i++) /* the members stay on the host while room is made */
            m[i]->flags |= HOFF__BLK_HOLD;
        rc = hoff__res_make_room(mem, total, lead, s, &(enum hoff__room_why){HOFF__WHY_NOTHING});
        for (i = 0; i < n; i++)
            m[i]->flags &= (uint8_t)~HOFF__BLK_HOLD;
        if (rc != 0)
            return -ENOSPC;
        /* Making room may have waited and retired transfers: members are
         * not in flight, but check they are still where they were. */
        for (i = 0; i < n; i++)
            if (m[i]->state != want || !(m[i]->flags & HOFF__BLK_LIVE))
                return -EAGAIN;
    }
    if ((rc = hoff__res_cmd_prepare(mem, m, n, op, base, size, s, &cmd)) != 0)
        return rc; /* an eviction: after every stream any member was used on */
    __atomic_store_n(&lead->xfer_rc, 0, __ATOMIC_RELAXED);
    hoff__guard_probe_issue(mem, lead, -1); /* a group: not measured */
    __atomic_add_fetch(&lead->pending, 1, __ATOMIC_ACQ_REL);
    rc = hoff__issuer_push(mem->issuer, &cmd);
    if (rc) {
        __atomic_sub_fetch(&lead->pending, 1, __ATOMIC_ACQ_REL);
        return rc;
    }
    if (op == HOFF__CMD_EVICT)
        HOFF__STAT_ADD(&mem->st, evict_calls, 1);
    else
        HOFF__STAT_ADD(&mem->st, prefetch_calls, 1);
    HOFF__STAT_ADD(&mem->st, group_calls_saved, n - 1);
    now = be->ops->clock_ns(be);
    for (i = 0; i < n; i++) {
        struct hoff__block *b = m[i];

        b->xlead = lead;
        b->xnext = i + 1 < n ? m[i + 1] : NULL;
        b->t_issue = now;
        if (op == HOFF__CMD_EVICT) {
            mem->res.evicting += b->size;
            mem->res.to_host += b->size;
            b->moved = 1;
            hoff__res_set_state(mem, b, S_EVI);
        } else {
            mem->res.resident += b->size;
            mem->res.from_host += b->size;
            hoff__res_set_state(mem, b, S_PRE);
        }
    }
    hoff__res_note_resident(mem);
    return 0;
}

int hoff__res_discard(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    hoff__res_poll(mem);
    if ((rc = check_next(b, HOFF__EV_DISCARD)) < 0)
        return rc;
    if ((rc = hoff__res_window_closed(mem, b, "discard")) != 0)
        return rc;
    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* dead: nothing to keep */
    if (b->state == S_DEV) {
        /* Stream-ordered drop of the device pages on the copy stream, after
         * the work queued on s: in flight like an eviction (the pages count
         * against the budget until it lands), and retired the same way.
         * Until then the block may not be touched or reused: a use waits for
         * it (hoff__res_access), a free is deferred (hoff__res_on_free). */
        if ((rc = hoff__res_issue(mem, b, HOFF__CMD_DISCARD, s)) != 0)
            return rc;
        mem->res.evicting += b->size;
        b->flags |= HOFF__BLK_DISCARDING;
        b->moved = 1;
        hoff__res_set_state(mem, b, S_EVI);
    } else if (b->state == S_NVM) {
        struct hoff__backend *be = mem->be;
        void *host;

        hoff__res_drop_spill(mem, b); /* the spilled copy is simply dead */
        /* The backend dropped the host pages at the spill: give them back
         * (contents undefined, as after any discard) so that the next use
         * pages the block in like any discarded one instead of finding no
         * copy anywhere.  The block is settled (no transfer in flight). */
        if (be->ops->host_make && (rc = be->ops->host_make(be, b->ptr, b->size, &host)) != 0)
            return hoff__error(rc, "discard of %p (on the NVMe tier): %s", b->ptr, hoff_last_error());
        hoff__res_set_state(mem, b, S_DIS);
        HOFF__STAT_ADD(&mem->st, discards, 1);
    } else {
        mem->res.host -= b->size; /* the host copy is simply dead */
        hoff__res_set_state(mem, b, S_DIS);
        HOFF__STAT_ADD(&mem->st, discards, 1);
    }
    hoff__res_note_resident(mem);
    return 0;
}

/* Read a spilled block back to the host (on the tier thread); host room
 * first.  `use`: a use needs the bytes (to_host_now); when no room can be
 * made (the NVMe tier refuses spills, every host block is held) the block
 * comes back over the cap rather than never: counted in host_cap_overruns
 * and said once with the cause. */
static int start_restore(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s, int use) {
    int rc;

    if (hoff__res_host_full(mem, b->size) && (rc = hoff__res_make_host_room(mem, b->size, b, s)) != 0) {
        if (!use)
            return rc;
        HOFF__STAT_ADD(&mem->st, host_cap_overruns, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "a spilled block in use comes back over the host cap: %s; counted in "
                       "host_cap_overruns",
                       hoff_last_error());
    }
    rc = hoff__res_issue_run(mem, b, HOFF__CMD_RUN, hoff__restore_run, s);
    if (rc)
        return rc;
    mem->res.to_host += b->size;
    hoff__res_set_state(mem, b, S_RES);
    return 0;
}

int hoff__res_spill(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    if (!mem->nvme)
        return hoff__error(-ENOTSUP, "no NVMe tier (set HOFF_SPILL_DIR)");
    hoff__res_poll(mem);
    if (b->state == S_EVI && !(b->flags & HOFF__BLK_DISCARDING)) {
        /* The replay runs ahead of the plan's timing: spill once the
         * eviction lands (retire), unless the block is wanted back first. */
        b->flags |= HOFF__BLK_SPILL_AFTER;
        return 0;
    }
    if ((rc = check_next(b, HOFF__EV_SPILL)) < 0)
        return rc;
    rc = hoff__res_start_spill(mem, b, s);
    hoff__res_note_resident(mem);
    return rc;
}

int hoff__res_restore(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    hoff__res_poll(mem);
    if ((rc = check_next(b, HOFF__EV_RESTORE)) < 0)
        return rc;
    rc = start_restore(mem, b, s, 0);
    hoff__res_note_resident(mem);
    return rc;
}

/* Bring a block on the NVMe tier (or on its way there or back) to the host,
 * waiting for it: a use or a prefetch needs the bytes. */
int hoff__res_to_host_now(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc;

    if (b->state == S_SPI || b->state == S_RES)
        hoff__res_finish(mem, b, HOFF__WAIT_USE);
    if (b->state == S_NVM) {
        if ((rc = start_restore(mem, b, s, 1)) != 0)
            return rc;
        hoff__res_finish(mem, b, HOFF__WAIT_USE);
    }
    return b->state == S_NVM
               ? hoff__error(-EIO, "restore of %p from the NVMe tier failed: %s", b->ptr, hoff_last_error())
               : 0;
}

static int bring_back(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s, int budgeted) {
    struct hoff__backend *be = mem->be;
    enum hoff__room_why why;
    uint64_t stall = 0;
    int rc;

    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back */
    hoff__res_poll(mem);
    switch (b->state) {
    case S_DEV:
        if (hoff__res_evictable(b)) { /* most recently used */
            hoff__res_list_remove(HOFF__RES_LRU(mem), b);
            hoff__res_list_append(HOFF__RES_LRU(mem), b);
        }
        return 0;
    case S_PRE:
        hoff__res_finish(mem, b, HOFF__WAIT_LATE); /* used before its prefetch completed */
        if (b->state == S_DEV)
            return 0;
        break; /* the prefetch failed: page it in */
    case S_EVI:
        hoff__res_finish(mem, b, HOFF__WAIT_USE); /* the eviction must land before the page-in */
        if (b->state == S_DEV)
            return 0;
        break;
    case S_SPI:
    case S_NVM:
    case S_RES:
        if ((rc = hoff__res_to_host_now(mem, b, s)) != 0) /* off the disk first */
            return rc;
        break;
    default: break;
    }
    if ((rc = check_next(b, HOFF__EV_FAULT)) < 0)
        return rc;
    /* A block coming back to be kept (hoff_keep) leaves the budget at once: no room is made for it. */
    if (budgeted && hoff__res_make_room(mem, b->size, b, s, &why) != 0)
        hoff__res_overrun(mem, b->size, why);
    hoff__issuer_drain(mem->issuer); /* the fault moves the clock: see hoff__res_finish() */
    rc = be->ops->fault(be, b->ptr, b->size, s, &stall);
    if (rc) {
        HOFF__STAT_ADD(&mem->st, transfer_errors, 1);
        return hoff__error(rc, "paging in block %p failed", b->ptr);
    }
    HOFF__STAT_ADD(&mem->st, faults, 1);
    hoff__guard_fault(mem, s);
    if (b->state == S_HOST) { /* a discarded block has no bytes to move */
        mem->res.host -= b->size;
        HOFF__STAT_ADD(&mem->st, bytes_faulted, b->size);
    }
    mem->res.resident += b->size;
    hoff__res_set_state(mem, b, S_DEV);
    HOFF__STAT_ADD(&mem->st, stall_ns, stall);
    if (budgeted) /* a kept block leaves `resident` before anything reads it (hoff__res_keep) */
        hoff__res_note_resident(mem);
    return 0;
}

int hoff__res_keep(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc;

    if (b->pool != HOFF__POOL_MANAGED || b->kept)
        return 0;
    if (b->mgroup)
        return hoff__error(-EBUSY, "block %p is a member of a manual swap group, which alone moves it: not kept",
                           b->ptr);
    if ((rc = bring_back(mem, b, s, 0)) != 0)
        return rc;
    if (b->state != S_DEV)
        return hoff__error(-EIO, "block %p could not be brought back to the device to be kept (it is %s)", b->ptr,
                           hoff__res_state_name(b->state));
    if (b->moved)
        HOFF__STAT_ADD(&mem->st, kept_evicted, 1);
    if (hoff__res_evictable(b))
        hoff__res_list_remove(HOFF__RES_LRU(mem), b);
    b->flags |= HOFF__BLK_PINNED;
    b->kept = 1;
    mem->res.resident -= b->size;
    mem->res.kept += b->size;
    HOFF__STAT_ADD(&mem->st, keep_marks, 1);
    HOFF__STAT_ADD(&mem->st, kept_bytes, b->size);
    hoff__res_note_resident(mem);
    return 0;
}

int hoff__res_access(struct hoff__mem *mem, struct hoff__block *b, int write, hoff_stream s) {
    int rc;

    (void)write;
    mem->res.marks_seen = 1;
    if (b->pool != HOFF__POOL_MANAGED)
        return 0;
    rc = bring_back(mem, b, s, 1);
    /* Resident now (or paging in failed, and the work runs anyway): its
     * window opens only here, so that a move still in flight from before
     * never counts as inside it. */
    hoff__res_window_open(mem, b, s);
    return rc;
}

#ifdef HOFF_DEBUG
#include <stdio.h>

void hoff__res_check(struct hoff__mem *mem) {
    uint64_t lru = 0, evi = 0, pre = 0;
    struct hoff__block *b;

    for (b = mem->res.lru_head; b; b = b->next) {
        if (b->state != S_DEV || !(b->flags & HOFF__BLK_LIVE)) {
            fprintf(stderr, "hoff: debug: block %p on the LRU list is %s\n", b->ptr, hoff__res_state_name(b->state));
            abort();
        }
        lru += b->size;
    }
    for (b = mem->res.inf_head; b; b = b->next) {
        if (b->state == S_EVI)
            evi += b->size;
        else if (b->state == S_PRE)
            pre += b->size;
        else if (b->state != S_SPI && b->state != S_RES)
            abort();
    }
    if (evi != mem->res.evicting || lru + evi + pre > mem->res.resident) {
        fprintf(stderr, "hoff: debug: residency books: lru %llu evicting %llu/%llu prefetching %llu resident %llu\n",
                (unsigned long long)lru, (unsigned long long)evi, (unsigned long long)mem->res.evicting,
                (unsigned long long)pre, (unsigned long long)mem->res.resident);
        abort();
    }
}
#endif
