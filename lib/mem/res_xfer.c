/* res_xfer.c — a managed block's transfers: commands queued on the issuing threads, their completion, and
 * retiring them (the transition's end, its books, the stats); waits for them.
 * Threading: caller holds the context lock; hoff__res_cmd_done runs on the issuing thread. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "mem/guard.h"
#include "mem/res_internal.h"
#include "tier/host.h"
#include "tier/spill.h"

/* --- issuing --------------------------------------------------------------- */

static int ensure_events(struct hoff__mem *mem, struct hoff__block *b) {
    struct hoff__backend *be = mem->be;
    int rc;

    if (!b->ev && (rc = be->ops->event_create(be, &b->ev)) != 0) {
        b->ev = NULL;
        return rc;
    }
    if (!b->after && (rc = be->ops->event_create(be, &b->after)) != 0) {
        b->after = NULL;
        return rc;
    }
    return 0;
}

int hoff__res_cmd_prepare(struct hoff__mem *mem, struct hoff__block *const *m, unsigned n, int op, void *ptr,
                          size_t size, hoff_stream s, struct hoff__cmd *cmd) {
    struct hoff__backend *be = mem->be;
    struct hoff__block *lead = m[0];
    int rc;

    if ((rc = ensure_events(mem, lead)) != 0)
        return rc;
    memset(cmd, 0, sizeof *cmd);
    /* A move away is fenced after the work queued on every stream that used
     * the blocks; a move back after the caller's. */
    if (op == HOFF__CMD_EVICT || op == HOFF__CMD_DISCARD) {
        if ((rc = hoff__res_fence_move(mem, m, n, cmd)) != 0)
            return rc;
    } else {
        if ((rc = be->ops->event_record(be, lead->after, s)) != 0)
            return rc;
        cmd->after = lead->after;
    }
    cmd->op = op;
    cmd->ptr = ptr;
    cmd->size = size;
    cmd->done = lead->ev;
    cmd->cookie = lead;
    cmd->node = op == HOFF__CMD_EVICT && mem->host_tier ? hoff__host_tier_node(mem->host_tier) : -1;
    return 0;
}

int hoff__res_issue_run(struct hoff__mem *mem, struct hoff__block *b, int op,
                        int (*run)(void *, const struct hoff__cmd *), hoff_stream s) {
    struct hoff__backend *be = mem->be;
    struct hoff__cmd cmd;
    int rc;

    if ((rc = hoff__res_cmd_prepare(mem, &b, 1, op, b->ptr, b->size, s, &cmd)) != 0)
        return rc;
    if (op == HOFF__CMD_RUN) { /* the NVMe tier: its own thread */
        cmd.run = run;
        cmd.run_arg = mem;
    }
    __atomic_store_n(&b->xfer_rc, 0, __ATOMIC_RELAXED);
    b->t_issue = be->ops->clock_ns(be);
    hoff__guard_probe_issue(mem, b, op == HOFF__CMD_EVICT ? 1 : op == HOFF__CMD_PREFETCH ? 0 : -1);
    __atomic_add_fetch(&b->pending, 1, __ATOMIC_ACQ_REL);
    rc = hoff__issuer_push(op == HOFF__CMD_RUN ? mem->tier_issuer : mem->issuer, &cmd);
    if (rc) {
        __atomic_sub_fetch(&b->pending, 1, __ATOMIC_ACQ_REL);
        hoff__guard_probe_cancel(mem, b);
    } else if (op == HOFF__CMD_EVICT)
        HOFF__STAT_ADD(&mem->st, evict_calls, 1);
    else if (op == HOFF__CMD_PREFETCH)
        HOFF__STAT_ADD(&mem->st, prefetch_calls, 1);
    return rc;
}

int hoff__res_issue(struct hoff__mem *mem, struct hoff__block *b, int op, hoff_stream s) {
    return hoff__res_issue_run(mem, b, op, NULL, s);
}

void hoff__res_cmd_done(void *arg, const struct hoff__cmd *cmd, int rc) {
    struct hoff__mem *mem = arg;
    struct hoff__block *b = cmd->cookie;
    /* The failure's message travels with the command: it was written on this
     * thread, and the thread that retires the transfer reports it.  Cleared
     * either way, so the next command starts clean. */
    char *why = rc ? hoff__error_take() : NULL;

    if (!rc)
        hoff__error_clear();
    pthread_mutex_lock(&mem->done_lock);
    free(b->xfer_err); /* not consumed: a transfer retired without looking (cannot happen; be safe) */
    b->xfer_err = why;
    __atomic_store_n(&b->xfer_rc, rc, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&b->pending, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&mem->done_cond);
    pthread_mutex_unlock(&mem->done_lock);
}

/* The block whose command carries b's transfer: b, or its group's leader. */
struct hoff__block *hoff__res_carrier(struct hoff__block *b) {
    return b->xlead ? b->xlead : b;
}

/* Wait (real time) until the command of b has run on its thread. */
static void wait_issued(struct hoff__mem *mem, struct hoff__block *b) {
    b = hoff__res_carrier(b);
    if (!__atomic_load_n(&b->pending, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&mem->done_lock);
    while (__atomic_load_n(&b->pending, __ATOMIC_ACQUIRE))
        pthread_cond_wait(&mem->done_cond, &mem->done_lock);
    pthread_mutex_unlock(&mem->done_lock);
}

/* Write a host block to the NVMe tier (on the tier thread). */
int hoff__res_start_spill(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    int rc = hoff__res_issue_run(mem, b, HOFF__CMD_RUN, hoff__spill_run, s);

    if (rc)
        return rc;
    mem->res.spilling += b->size;
    hoff__res_set_state(mem, b, S_SPI);
    return 0;
}

/* --- completion ------------------------------------------------------------ */

static void put_back(struct hoff__mem *mem, struct hoff__block *b);

/* A discard landed (DISCARDING): the device pages are gone once the copy stream got there; nothing went to the
 * host. */
static void retire_discard(struct hoff__mem *mem, struct hoff__block *b, int rc, const char *cause) {
    b->flags &= (uint8_t)~HOFF__BLK_DISCARDING;
    mem->res.evicting -= b->size;
    if (rc) {
        HOFF__STAT_ADD(&mem->st, transfer_errors, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "discard failed (%s); the block keeps its contents on the device", cause);
        hoff__res_set_state(mem, b, S_DEV);
    } else {
        HOFF__STAT_ADD(&mem->st, discards, 1);
        mem->res.resident -= b->size;
        hoff__res_set_state(mem, b, S_DIS);
    }
}

/* An eviction landed: on the host, then the planned spill when one waits for it (a live block only). */
static void retire_evict(struct hoff__mem *mem, struct hoff__block *b, int rc, const char *cause, int live,
                         uint64_t took) {
    mem->res.evicting -= b->size;
    mem->res.to_host -= b->size;
    if (rc) {
        HOFF__STAT_ADD(&mem->st, transfer_errors, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "eviction failed (%s); the block stays on the device "
                       "(further transfer errors are counted, not logged)",
                       cause);
        hoff__res_set_state(mem, b, hoff__res_next(S_EVI, HOFF__EV_EVICT_FAIL));
        return;
    }
    HOFF__STAT_ADD(&mem->st, evictions, 1);
    HOFF__STAT_ADD(&mem->st, bytes_evicted, b->size);
    HOFF__STAT_ADD(&mem->st, evict_ns, took);
    mem->res.resident -= b->size;
    mem->res.host += b->size;
    hoff__res_set_state(mem, b, hoff__res_next(S_EVI, HOFF__EV_EVICT_DONE));
    if ((b->flags & HOFF__BLK_SPILL_AFTER) && live) { /* the planned spill, now that it can */
        b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER;
        if (hoff__res_start_spill(mem, b, b->stream) != 0)
            HOFF__LOG_ONCE(HOFF_LOG_WARN,
                           "a planned spill could not start (%s); the block stays on "
                           "the host",
                           hoff_last_error());
    }
}

/* A prefetch landed.  A discarded block's prefetch (DISCARDING) moved nothing off the host: never on its count. */
static void retire_prefetch(struct hoff__mem *mem, struct hoff__block *b, int rc, const char *cause, uint64_t took) {
    int dead = (b->flags & HOFF__BLK_DISCARDING) != 0;

    b->flags &= (uint8_t)~HOFF__BLK_DISCARDING;
    if (!dead)
        mem->res.from_host -= b->size;
    if (rc) {
        HOFF__STAT_ADD(&mem->st, transfer_errors, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "prefetch failed (%s); the block stays on the host (or discarded) and "
                       "is paged in on use",
                       cause);
        mem->res.resident -= b->size;
        hoff__res_set_state(mem, b, dead ? S_DIS : hoff__res_next(S_PRE, HOFF__EV_PREFETCH_FAIL));
        return;
    }
    HOFF__STAT_ADD(&mem->st, prefetches, 1);
    HOFF__STAT_ADD(&mem->st, bytes_prefetched, b->size);
    HOFF__STAT_ADD(&mem->st, prefetch_ns, took);
    if (!dead)
        mem->res.host -= b->size;
    hoff__res_set_state(mem, b, hoff__res_next(S_PRE, HOFF__EV_PREFETCH_DONE));
}

/* A spill landed on the NVMe tier; a failed one stops spills for host room until the tier can take them
 * (res_room.c spill_ok): spilling again at once would fail again, forever. */
static void retire_spill(struct hoff__mem *mem, struct hoff__block *b, int rc, const char *cause, uint64_t now) {
    mem->res.spilling -= b->size;
    if (rc) {
        HOFF__STAT_ADD(&mem->st, spill_failures, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "spill to the NVMe tier failed (%s); the block stays on the host "
                       "(further failures are counted in spill_failures)",
                       cause);
        hoff__res_set_state(mem, b, hoff__res_next(S_SPI, HOFF__EV_SPILL_FAIL));
        mem->res.spill_refused = 1;
        mem->res.refused_nvme = mem->res.nvme;
        mem->res.refused_step = mem->pol.steps;
        mem->res.refused_ns = now;
        snprintf(mem->res.refused_why, sizeof mem->res.refused_why, "%s", cause);
        return;
    }
    mem->res.spill_refused = 0; /* the tier took one: it has room again */
    HOFF__STAT_ADD(&mem->st, spills, 1);
    HOFF__STAT_ADD(&mem->st, bytes_spilled, b->size);
    mem->res.host -= b->size;
    mem->res.nvme += b->size;
    hoff__res_set_state(mem, b, hoff__res_next(S_SPI, HOFF__EV_SPILL_DONE));
}

/* A restore from the NVMe tier landed on the host; a failed one keeps the spill, to read again. */
static void retire_restore(struct hoff__mem *mem, struct hoff__block *b, int rc, const char *cause) {
    mem->res.to_host -= b->size;
    if (rc) {
        HOFF__STAT_ADD(&mem->st, transfer_errors, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "restore from the NVMe tier failed (%s); the spill is kept and "
                       "will be read again when the block is used",
                       cause);
        hoff__res_set_state(mem, b, hoff__res_next(S_RES, HOFF__EV_RESTORE_FAIL));
        return;
    }
    HOFF__STAT_ADD(&mem->st, restores, 1);
    HOFF__STAT_ADD(&mem->st, bytes_restored, b->size);
    mem->res.nvme -= b->size;
    mem->res.host += b->size;
    hoff__res_set_state(mem, b, hoff__res_next(S_RES, HOFF__EV_RESTORE_DONE));
}

/* b's command has run: finish the transition (success or failure); why is
 * the failed command's own message (NULL: rc says all there is). */
static void retire(struct hoff__mem *mem, struct hoff__block *b, int rc, const char *why) {
    int live = !(b->flags & HOFF__BLK_FREED);
    uint64_t now = mem->be->ops->clock_ns(mem->be);
    /* issue to completion as seen here (sim: the virtual clock when polled) */
    uint64_t took = now > b->t_issue ? now - b->t_issue : 0;
    const char *cause = why ? why : hoff_strerror(rc);

    if (rc) /* the caller's last error names the real cause, not one left over on this thread */
        hoff__error(rc, "%s", cause);
    hoff__guard_probe_retire(mem, b, rc);
    if (!live) /* freed in flight: finish as a live block, then free it */
        b->flags = (uint8_t)((b->flags & ~HOFF__BLK_FREED) | HOFF__BLK_LIVE);
    if (b->state == S_EVI && (b->flags & HOFF__BLK_DISCARDING))
        retire_discard(mem, b, rc, cause);
    else if (b->state == S_EVI)
        retire_evict(mem, b, rc, cause, live, took);
    else if (b->state == S_PRE)
        retire_prefetch(mem, b, rc, cause, took);
    else if (b->state == S_SPI)
        retire_spill(mem, b, rc, cause, now);
    else if (b->state == S_RES)
        retire_restore(mem, b, rc, cause);
    if (b->state != S_EVI)
        b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* failed, freed, or done: nothing waits */
    if (!live && hoff__res_on_free(mem, b))
        put_back(mem, b);
    hoff__res_note_resident(mem);
}

static void put_back(struct hoff__mem *mem, struct hoff__block *b) {
    hoff__pool_put(&mem->pools[HOFF__POOL_MANAGED], b, b->stream);
}

/* b's transfer is over with rc: retire b, or every member of its group
 * transfer (the chain is unlinked first: retiring may return a block to its
 * slot). */
static void retire_xfer(struct hoff__mem *mem, struct hoff__block *b, int rc) {
    struct hoff__block *m, *next, *c = hoff__res_carrier(b);
    char *why = c->xfer_err; /* the command's message, consumed here */

    c->xfer_err = NULL;
    if (!b->xlead) {
        retire(mem, b, rc, why);
    } else {
        for (m = b->xlead; m; m = next) {
            next = m->xnext;
            m->xlead = m->xnext = NULL;
            retire(mem, m, rc, why);
        }
    }
    free(why);
}

/* Try to retire b: 1 if its transfer is over (2: with other members of a
 * group), 0 if still running. */
static int try_retire(struct hoff__mem *mem, struct hoff__block *b) {
    struct hoff__block *c = hoff__res_carrier(b);
    int rc, group = b->xlead != NULL;

    if (__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE))
        return 0;
    rc = __atomic_load_n(&c->xfer_rc, __ATOMIC_RELAXED);
    if (rc == 0) {
        int q = mem->be->ops->event_query(mem->be, c->ev);
        if (q == -EAGAIN)
            return 0;
        rc = q;
    }
    retire_xfer(mem, b, rc);
    return group ? 2 : 1;
}

void hoff__res_poll(struct hoff__mem *mem) {
    struct hoff__block *b, *next;

    for (b = mem->res.inf_head; b; b = next) {
        next = b->next;
        if (try_retire(mem, b) == 2)
            next = mem->res.inf_head; /* the group's members left the list too */
    }
}

/* Wait until b's transfer is over and retire it. */
void hoff__res_finish(struct hoff__mem *mem, struct hoff__block *b, enum hoff__res_wait why) {
    struct hoff__backend *be = mem->be;

    /* Every queued command runs before the host waits: on sim, a command run
     * after the clock moved would start later than its place in the program
     * (the simulation stays deterministic); on cuda it is on the way anyway.
     * A tier command runs on the tier thread: wait for that one too. */
    hoff__issuer_drain(mem->issuer);
    wait_issued(mem, b);
    if (try_retire(mem, b))
        return;
    {
        uint64_t t0 = be->ops->clock_ns(be);
        int rc = be->ops->event_sync(be, hoff__res_carrier(b)->ev);
        uint64_t t1 = be->ops->clock_ns(be);
        if (why != HOFF__WAIT_SYNC)
            HOFF__STAT_ADD(&mem->st, stall_ns, t1 > t0 ? t1 - t0 : 0);
        if (why == HOFF__WAIT_LATE)
            HOFF__STAT_ADD(&mem->st, late_prefetches, 1);
        retire_xfer(mem, b, rc);
    }
}

void hoff__res_settle(struct hoff__mem *mem, struct hoff__block *b) {
    if (!b)
        return;
    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back: no spill when it lands */
    if (hoff__res_in_flight(b->state))
        hoff__res_finish(mem, b, HOFF__WAIT_USE);
}

int hoff__res_wait_all(struct hoff__mem *mem) {
    while (mem->res.inf_head)
        hoff__res_finish(mem, mem->res.inf_head, HOFF__WAIT_SYNC);
    return 0;
}

int hoff__res_stream_wait(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = mem->be;

    if (!hoff__res_in_flight(b->state) || b->state == S_SPI || b->state == S_RES)
        return 0;
    /* The issuing thread records the transfer's event when it runs the
     * command: a stream cannot wait for an event not recorded yet. */
    hoff__issuer_drain(mem->issuer);
    wait_issued(mem, b);
    return be->ops->stream_wait ? be->ops->stream_wait(be, s, hoff__res_carrier(b)->ev) : 0;
}
