/* residency.c — the residency state machine of offload candidates, exact budget accounting and the actions
 * issued through the issuing thread.  Threading: caller holds ctx->lock; hoff__res_cmd_done runs on the issuing thread.
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

#include "core/context.h"
#include "core/core.h"
#include "mem/guard.h"
#include "mem/hostcap.h"
#include "mem/residency.h"
#include "mem/swapgroup.h"
#include "tier/host.h"
#include "tier/nvme.h"
#include "tier/spill.h"

/* --- the state machine ----------------------------------------------------- */

#define S_DEV HOFF_RES_DEVICE
#define S_EVI HOFF_RES_EVICTING
#define S_HOST HOFF_RES_HOST
#define S_PRE HOFF_RES_PREFETCHING
#define S_DIS HOFF_RES_DISCARDED
#define NO_AL (-EALREADY)
#define BUSY (-EBUSY)
#define INVAL (-EINVAL)

#define S_SPI HOFF_RES_SPILLING
#define S_NVM HOFF_RES_NVME
#define S_RES HOFF_RES_RESTORING

/* next[state][event].  A discard in flight is shown as evicting (it holds
 * device pages until it lands); a block on the NVMe tier is restored to the
 * host before it can be prefetched or paged in (-EBUSY until then). */
static const int next_state[HOFF__RES_STATE_COUNT][HOFF__EV_COUNT] = {
    /*           EVICT  E_DONE  E_FAIL PREF   P_DONE P_FAIL  DISC   FAULT  POPUL  SPILL  S_DONE S_FAIL REST   R_DONE R_FAIL */
    [S_DEV]  = {S_EVI, INVAL,  INVAL, NO_AL, INVAL, INVAL,  S_DIS, NO_AL, NO_AL, INVAL, INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_EVI]  = {NO_AL, S_HOST, S_DEV, BUSY,  INVAL, INVAL,  BUSY,  BUSY,  BUSY,  BUSY,  INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_HOST] = {NO_AL, INVAL,  INVAL, S_PRE, INVAL, INVAL,  S_DIS, S_DEV, S_DEV, S_SPI, INVAL, INVAL, NO_AL, INVAL, INVAL},
    [S_PRE]  = {BUSY,  INVAL,  INVAL, NO_AL, S_DEV, S_HOST, BUSY,  BUSY,  BUSY,  BUSY,  INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_DIS]  = {NO_AL, INVAL,  INVAL, S_PRE, INVAL, INVAL,  NO_AL, S_DEV, S_DEV, INVAL, INVAL, INVAL, INVAL, INVAL, INVAL},
    [S_SPI]  = {NO_AL, INVAL,  INVAL, BUSY,  INVAL, INVAL,  BUSY,  BUSY,  BUSY,  NO_AL, S_NVM, S_HOST, BUSY, INVAL, INVAL},
    [S_NVM]  = {NO_AL, INVAL,  INVAL, BUSY,  INVAL, INVAL,  S_DIS, BUSY,  INVAL, NO_AL, INVAL, INVAL, S_RES, INVAL, INVAL},
    [S_RES]  = {NO_AL, INVAL,  INVAL, BUSY,  INVAL, INVAL,  BUSY,  BUSY,  BUSY,  BUSY,  INVAL, INVAL, NO_AL, S_HOST, S_NVM},
};

int hoff__res_next(int st, int ev) {
    if (st < 0 || st >= HOFF__RES_STATE_COUNT || ev < 0 || ev >= HOFF__EV_COUNT)
        return -EINVAL;
    return next_state[st][ev];
}

const char *hoff__res_state_name(int st) {
    static const char *const names[HOFF__RES_STATE_COUNT] = {
        "device", "evicting", "host", "prefetching", "discarded", "spilling", "nvme", "restoring"};
    return st >= 0 && st < HOFF__RES_STATE_COUNT ? names[st] : "invalid";
}

const char *hoff__res_event_name(int ev) {
    static const char *const names[HOFF__EV_COUNT] = {
        "evict", "evict-done", "evict-fail", "prefetch", "prefetch-done", "prefetch-fail",
        "discard", "fault", "populate", "spill", "spill-done", "spill-fail",
        "restore", "restore-done", "restore-fail"};
    return ev >= 0 && ev < HOFF__EV_COUNT ? names[ev] : "invalid";
}

/* --- lists ----------------------------------------------------------------- */

static void list_append(struct hoff__block **head, struct hoff__block **tail, struct hoff__block *b) {
    b->next = NULL;
    b->prev = *tail;
    if (*tail)
        (*tail)->next = b;
    else
        *head = b;
    *tail = b;
}

static void list_remove(struct hoff__block **head, struct hoff__block **tail, struct hoff__block *b) {
    if (b->prev)
        b->prev->next = b->next;
    else
        *head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        *tail = b->prev;
    b->next = b->prev = NULL;
}

#define LRU(ctx) &(ctx)->res.lru_head, &(ctx)->res.lru_tail
#define INF(ctx) &(ctx)->res.inf_head, &(ctx)->res.inf_tail
#define HOSTL(ctx) &(ctx)->res.host_head, &(ctx)->res.host_tail

static int in_flight(int st) {
    return st == S_EVI || st == S_PRE || st == S_SPI || st == S_RES;
}

static int evictable(const struct hoff__block *b) {
    return !(b->flags & HOFF__BLK_PINNED);
}

/* --- the streams a block was used on --------------------------------------- */

/* b's work was (also) queued on s. */
static void note_stream(struct hoff__block *b, hoff_stream s) {
    unsigned i;

    for (i = 0; i < b->nstreams; i++)
        if (b->streams[i] == s)
            return;
    if (b->nstreams < HOFF__BLOCK_STREAMS)
        b->streams[b->nstreams++] = s;
    else
        b->streams_lost = 1;
}

void hoff__res_note_stream(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    (void)ctx;
    note_stream(b, s);
}

/* Add b's streams to the fence of the move cmd carries: cmd->after on b's
 * last use stream when the command has none yet, then an event on each
 * other stream not fenced yet (done[0..*ndone), at most 1 + HOFF__CMD_ALSO).
 * *lost: some stream could not be fenced (the caller synchronises). */
static int fence_block(struct hoff_ctx *ctx, struct hoff__block *b, struct hoff__cmd *cmd, hoff_stream *done,
                       unsigned *ndone, int *lost) {
    struct hoff__backend *be = ctx->be;
    unsigned i, j;
    int rc;

    if (b->streams_lost)
        *lost = 1;
    for (i = cmd->after ? 1 : 0; i <= b->nstreams; i++) {
        hoff_stream s = i == 0 ? b->use_stream : b->streams[i - 1];
        hoff__event **ev = i == 0 ? &b->after : &b->fence[i - 1];

        for (j = 0; j < *ndone && done[j] != s; j++)
            ;
        if (j < *ndone)
            continue; /* fenced already: the same point on the same stream */
        if (i && cmd->nalso >= HOFF__CMD_ALSO) {
            *lost = 1;
            continue;
        }
        if (!*ev && (rc = be->ops->event_create(be, ev)) != 0) {
            *ev = NULL;
            return rc;
        }
        if ((rc = be->ops->event_record(be, *ev, s)) != 0)
            return rc;
        if (i == 0)
            cmd->after = *ev;
        else
            cmd->also[cmd->nalso++] = *ev;
        done[(*ndone)++] = s;
    }
    return 0;
}

/* The fence of moving blocks m[0..n) away (evict, discard): after the work
 * queued on every stream they were used on.  A stream that does not fit the
 * command: wait for the whole device now (slow, never unsafe; fence_syncs). */
static int fence_move(struct hoff_ctx *ctx, struct hoff__block *const *m, unsigned n, struct hoff__cmd *cmd) {
    hoff_stream done[1 + HOFF__CMD_ALSO];
    unsigned i, ndone = 0;
    int lost = 0, rc;

    cmd->after = NULL;
    cmd->nalso = 0;
    for (i = 0; i < n; i++)
        if ((rc = fence_block(ctx, m[i], cmd, done, &ndone, &lost)) != 0)
            return rc;
    if (lost) {
        ctx->st.fence_syncs++;
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "a block was used on more streams than hoff fences one move after (%d); "
                       "such moves wait for the whole device (counted in fence_syncs)", HOFF__BLOCK_STREAMS);
        if ((rc = ctx->be->ops->sync(ctx->be)) != 0)
            return rc;
    }
    return 0;
}

/* --- use windows ----------------------------------------------------------- */

static void window_open(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = ctx->be;

    b->use_stream = s;
    note_stream(b, s);
    if (b->win)
        return;
    b->win = 1;
    b->wprev = NULL;
    b->wnext = ctx->res.win_head;
    if (b->wnext)
        b->wnext->wprev = b;
    ctx->res.win_head = b;
    if (be->ops->window_open)
        be->ops->window_open(be, b->ptr, b->size, s);
}

void hoff__res_end_use(struct hoff_ctx *ctx, struct hoff__block *b) {
    struct hoff__backend *be = ctx->be;

    if (!b->win)
        return;
    if (b->wprev)
        b->wprev->wnext = b->wnext;
    else
        ctx->res.win_head = b->wnext;
    if (b->wnext)
        b->wnext->wprev = b->wprev;
    b->wnext = b->wprev = NULL;
    b->win = 0;
    if (be->ops->window_close)
        be->ops->window_close(be, b->ptr, b->size);
}

void hoff__res_close_windows(struct hoff_ctx *ctx) {
    if (!ctx->res.marks_seen)
        return; /* no access marks: a block's uses are unknown until its free */
    while (ctx->res.win_head)
        hoff__res_end_use(ctx, ctx->res.win_head);
}

/* Nothing moves a block away or drops it inside its use window. */
static int window_closed(struct hoff_ctx *ctx, const struct hoff__block *b, const char *what) {
    if (!b->win)
        return 0;
    ctx->st.window_refusals++;
    return hoff__error(-EBUSY, "cannot %s block %p: it is in use (its use window stays open until the next "
                       "op mark, its free or the step's end)", what, b->ptr);
}

/* Can the host tier ever take b?  An eviction lands on the host first, so a
 * block larger than the host cap can never be evicted. */
static int fits_host(const struct hoff_ctx *ctx, const struct hoff__block *b) {
    return hoff__host_takes(ctx->cfg.host_cap_bytes, b->size);
}

/* The block enters state st: move it between lists (LRU on the device,
 * in flight, on the host; none for the others). */
static void set_state(struct hoff_ctx *ctx, struct hoff__block *b, int st) {
    int live = (b->flags & HOFF__BLK_LIVE) != 0;

    if (b->state == S_DEV && evictable(b) && live)
        list_remove(LRU(ctx), b);
    else if (in_flight(b->state))
        list_remove(INF(ctx), b);
    else if (b->state == S_HOST && live)
        list_remove(HOSTL(ctx), b);
    b->state = (uint8_t)st;
    if (st == S_DEV && evictable(b) && live)
        list_append(LRU(ctx), b);
    else if (in_flight(st))
        list_append(INF(ctx), b);
    else if (st == S_HOST && live)
        list_append(HOSTL(ctx), b);
}

static void note_resident(struct hoff_ctx *ctx) {
    struct hoff_stats *st = &ctx->st;

    st->resident_bytes = ctx->res.resident;
    if (ctx->res.resident > st->peak_resident_bytes)
        st->peak_resident_bytes = ctx->res.resident;
    if (ctx->res.resident > st->step_peak_resident_bytes)
        st->step_peak_resident_bytes = ctx->res.resident;
    if (ctx->cfg.budget_bytes && ctx->res.resident > ctx->cfg.budget_bytes)
        st->budget_overruns++;
    st->host_bytes = ctx->res.host;
    if (ctx->res.host > st->peak_host_bytes)
        st->peak_host_bytes = ctx->res.host;
    st->nvme_bytes = ctx->res.nvme;
    if (ctx->res.nvme > st->peak_nvme_bytes)
        st->peak_nvme_bytes = ctx->res.nvme;
}

/* --- issuing --------------------------------------------------------------- */

static int ensure_events(struct hoff_ctx *ctx, struct hoff__block *b) {
    struct hoff__backend *be = ctx->be;
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

static int issue_run(struct hoff_ctx *ctx, struct hoff__block *b, int op,
                     int (*run)(void *, const struct hoff__cmd *), hoff_stream s) {
    struct hoff__backend *be = ctx->be;
    struct hoff__cmd cmd;
    int rc;

    if ((rc = ensure_events(ctx, b)) != 0)
        return rc;
    memset(&cmd, 0, sizeof cmd);
    /* A move away is fenced after the work queued on every stream that used
     * the block; a move back after the caller's. */
    if (op == HOFF__CMD_EVICT || op == HOFF__CMD_DISCARD) {
        if ((rc = fence_move(ctx, &b, 1, &cmd)) != 0)
            return rc;
    } else {
        if ((rc = be->ops->event_record(be, b->after, s)) != 0)
            return rc;
        cmd.after = b->after;
    }
    cmd.op = op;
    cmd.ptr = b->ptr;
    cmd.size = b->size;
    cmd.done = b->ev;
    cmd.cookie = b;
    cmd.node = op == HOFF__CMD_EVICT && ctx->host_tier ? hoff__host_tier_node(ctx->host_tier) : -1;
    if (op == HOFF__CMD_RUN) { /* the NVMe tier: its own thread */
        cmd.run = run;
        cmd.run_arg = ctx;
    }
    __atomic_store_n(&b->xfer_rc, 0, __ATOMIC_RELAXED);
    b->t_issue = be->ops->clock_ns(be);
    hoff__guard_probe_issue(ctx, b, op == HOFF__CMD_EVICT ? 1 : op == HOFF__CMD_PREFETCH ? 0 : -1);
    __atomic_add_fetch(&b->pending, 1, __ATOMIC_ACQ_REL);
    rc = hoff__issuer_push(op == HOFF__CMD_RUN ? ctx->tier_issuer : ctx->issuer, &cmd);
    if (rc) {
        __atomic_sub_fetch(&b->pending, 1, __ATOMIC_ACQ_REL);
        hoff__guard_probe_cancel(ctx, b);
    } else if (op == HOFF__CMD_EVICT)
        ctx->st.evict_calls++;
    else if (op == HOFF__CMD_PREFETCH)
        ctx->st.prefetch_calls++;
    return rc;
}

static int issue(struct hoff_ctx *ctx, struct hoff__block *b, int op, hoff_stream s) {
    return issue_run(ctx, b, op, NULL, s);
}

void hoff__res_cmd_done(void *arg, const struct hoff__cmd *cmd, int rc) {
    struct hoff_ctx *ctx = arg;
    struct hoff__block *b = cmd->cookie;
    /* The failure's message travels with the command: it was written on this
     * thread, and the thread that retires the transfer reports it.  Cleared
     * either way, so the next command starts clean. */
    char *why = rc ? hoff__error_take() : NULL;

    if (!rc)
        hoff__error_clear();
    pthread_mutex_lock(&ctx->done_lock);
    free(b->xfer_err); /* not consumed: a transfer retired without looking (cannot happen; be safe) */
    b->xfer_err = why;
    __atomic_store_n(&b->xfer_rc, rc, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&b->pending, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&ctx->done_cond);
    pthread_mutex_unlock(&ctx->done_lock);
}

/* The block whose command carries b's transfer: b, or its group's leader. */
static struct hoff__block *carrier(struct hoff__block *b) {
    return b->xlead ? b->xlead : b;
}

/* Wait (real time) until the command of b has run on its thread. */
static void wait_issued(struct hoff_ctx *ctx, struct hoff__block *b) {
    b = carrier(b);
    if (!__atomic_load_n(&b->pending, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&ctx->done_lock);
    while (__atomic_load_n(&b->pending, __ATOMIC_ACQUIRE))
        pthread_cond_wait(&ctx->done_cond, &ctx->done_lock);
    pthread_mutex_unlock(&ctx->done_lock);
}

/* --- completion ------------------------------------------------------------ */

static void put_back(struct hoff_ctx *ctx, struct hoff__block *b);
static int to_host_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s);
static int start_spill(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s);

/* b's command has run: finish the transition (success or failure); why is
 * the failed command's own message (NULL: rc says all there is). */
static void retire(struct hoff_ctx *ctx, struct hoff__block *b, int rc, const char *why) {
    struct hoff_stats *st = &ctx->st;
    int live = !(b->flags & HOFF__BLK_FREED);
    uint64_t now = ctx->be->ops->clock_ns(ctx->be);
    /* issue to completion as seen here (sim: the virtual clock when polled) */
    uint64_t took = now > b->t_issue ? now - b->t_issue : 0;
    const char *cause = why ? why : hoff_strerror(rc);

    if (rc) /* the caller's last error names the real cause, not one left over on this thread */
        hoff__error(rc, "%s", cause);
    hoff__guard_probe_retire(ctx, b, rc);
    if (!live) /* freed in flight: finish as a live block, then free it */
        b->flags = (uint8_t)((b->flags & ~HOFF__BLK_FREED) | HOFF__BLK_LIVE);
    if (b->state == S_EVI && (b->flags & HOFF__BLK_DISCARDING)) {
        /* A discard: the device pages are gone once the copy stream got
         * there; nothing went to the host. */
        b->flags &= (uint8_t)~HOFF__BLK_DISCARDING;
        ctx->res.evicting -= b->size;
        if (rc) {
            st->transfer_errors++;
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "discard failed (%s); the block keeps its contents on the device",
                           cause);
            set_state(ctx, b, S_DEV);
        } else {
            st->discards++;
            ctx->res.resident -= b->size;
            set_state(ctx, b, S_DIS);
        }
    } else if (b->state == S_EVI) {
        ctx->res.evicting -= b->size;
        ctx->res.to_host -= b->size;
        if (rc) {
            st->transfer_errors++;
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "eviction failed (%s); the block stays on the device "
                           "(further transfer errors are counted, not logged)", cause);
            set_state(ctx, b, hoff__res_next(S_EVI, HOFF__EV_EVICT_FAIL));
        } else {
            st->evictions++;
            st->bytes_evicted += b->size;
            st->evict_ns += took;
            ctx->res.resident -= b->size;
            ctx->res.host += b->size;
            set_state(ctx, b, hoff__res_next(S_EVI, HOFF__EV_EVICT_DONE));
            if ((b->flags & HOFF__BLK_SPILL_AFTER) && live) { /* the planned spill, now that it can */
                b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER;
                if (start_spill(ctx, b, b->stream) != 0)
                    HOFF__LOG_ONCE(HOFF_LOG_WARN, "a planned spill could not start (%s); the block stays on "
                                   "the host", hoff_last_error());
            }
        }
    } else if (b->state == S_PRE) {
        /* A discarded block's prefetch (DISCARDING) moved nothing off the host: never on its count */
        int dead = (b->flags & HOFF__BLK_DISCARDING) != 0;

        b->flags &= (uint8_t)~HOFF__BLK_DISCARDING;
        if (!dead)
            ctx->res.from_host -= b->size;
        if (rc) {
            st->transfer_errors++;
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "prefetch failed (%s); the block stays on the host (or discarded) and "
                           "is paged in on use", cause);
            ctx->res.resident -= b->size;
            set_state(ctx, b, dead ? S_DIS : hoff__res_next(S_PRE, HOFF__EV_PREFETCH_FAIL));
        } else {
            st->prefetches++;
            st->bytes_prefetched += b->size;
            st->prefetch_ns += took;
            if (!dead)
                ctx->res.host -= b->size;
            set_state(ctx, b, hoff__res_next(S_PRE, HOFF__EV_PREFETCH_DONE));
        }
    } else if (b->state == S_SPI) {
        ctx->res.spilling -= b->size;
        if (rc) {
            st->spill_failures++;
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "spill to the NVMe tier failed (%s); the block stays on the host "
                           "(further failures are counted in spill_failures)", cause);
            set_state(ctx, b, hoff__res_next(S_SPI, HOFF__EV_SPILL_FAIL));
            /* No more spills for host room until the tier can take them
             * (spill_ok): spilling again at once would fail again, forever. */
            ctx->res.spill_refused = 1;
            ctx->res.refused_nvme = ctx->res.nvme;
            ctx->res.refused_step = st->steps;
            ctx->res.refused_ns = now;
            snprintf(ctx->res.refused_why, sizeof ctx->res.refused_why, "%s", cause);
        } else {
            ctx->res.spill_refused = 0; /* the tier took one: it has room again */
            st->spills++;
            st->bytes_spilled += b->size;
            ctx->res.host -= b->size;
            ctx->res.nvme += b->size;
            set_state(ctx, b, hoff__res_next(S_SPI, HOFF__EV_SPILL_DONE));
        }
    } else if (b->state == S_RES) {
        ctx->res.to_host -= b->size;
        if (rc) {
            st->transfer_errors++;
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "restore from the NVMe tier failed (%s); the spill is kept and "
                           "will be read again when the block is used", cause);
            set_state(ctx, b, hoff__res_next(S_RES, HOFF__EV_RESTORE_FAIL));
        } else {
            st->restores++;
            st->bytes_restored += b->size;
            ctx->res.nvme -= b->size;
            ctx->res.host += b->size;
            set_state(ctx, b, hoff__res_next(S_RES, HOFF__EV_RESTORE_DONE));
        }
    }
    if (b->state != S_EVI)
        b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* failed, freed, or done: nothing waits */
    if (!live && hoff__res_on_free(ctx, b))
        put_back(ctx, b);
    note_resident(ctx);
}

static void put_back(struct hoff_ctx *ctx, struct hoff__block *b) {
    hoff__pool_put(&ctx->pools[HOFF__POOL_MANAGED], b, b->stream);
}

/* b's transfer is over with rc: retire b, or every member of its group
 * transfer (the chain is unlinked first: retiring may return a block to its
 * slot). */
static void retire_xfer(struct hoff_ctx *ctx, struct hoff__block *b, int rc) {
    struct hoff__block *m, *next, *c = carrier(b);
    char *why = c->xfer_err; /* the command's message, consumed here */

    c->xfer_err = NULL;
    if (!b->xlead) {
        retire(ctx, b, rc, why);
    } else {
        for (m = b->xlead; m; m = next) {
            next = m->xnext;
            m->xlead = m->xnext = NULL;
            retire(ctx, m, rc, why);
        }
    }
    free(why);
}

/* Try to retire b: 1 if its transfer is over (2: with other members of a
 * group), 0 if still running. */
static int try_retire(struct hoff_ctx *ctx, struct hoff__block *b) {
    struct hoff__block *c = carrier(b);
    int rc, group = b->xlead != NULL;

    if (__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE))
        return 0;
    rc = __atomic_load_n(&c->xfer_rc, __ATOMIC_RELAXED);
    if (rc == 0) {
        int q = ctx->be->ops->event_query(ctx->be, c->ev);
        if (q == -EAGAIN)
            return 0;
        rc = q;
    }
    retire_xfer(ctx, b, rc);
    return group ? 2 : 1;
}

void hoff__res_poll(struct hoff_ctx *ctx) {
    struct hoff__block *b, *next;

    for (b = ctx->res.inf_head; b; b = next) {
        next = b->next;
        if (try_retire(ctx, b) == 2)
            next = ctx->res.inf_head; /* the group's members left the list too */
    }
}

enum wait_kind {
    WAIT_SYNC, /* the host asked to wait (hoff_sync, shutdown): not a stall */
    WAIT_USE,  /* compute needs the block or the room: a stall */
    WAIT_LATE, /* compute uses a block whose prefetch has not landed */
};

/* Wait until b's transfer is over and retire it. */
static void finish(struct hoff_ctx *ctx, struct hoff__block *b, enum wait_kind why) {
    struct hoff__backend *be = ctx->be;

    /* Every queued command runs before the host waits: on sim, a command run
     * after the clock moved would start later than its place in the program
     * (the simulation stays deterministic); on cuda it is on the way anyway.
     * A tier command runs on the tier thread: wait for that one too. */
    hoff__issuer_drain(ctx->issuer);
    wait_issued(ctx, b);
    if (try_retire(ctx, b))
        return;
    {
        uint64_t t0 = be->ops->clock_ns(be);
        int rc = be->ops->event_sync(be, carrier(b)->ev);
        uint64_t t1 = be->ops->clock_ns(be);
        if (why != WAIT_SYNC)
            ctx->st.stall_ns += t1 > t0 ? t1 - t0 : 0;
        if (why == WAIT_LATE)
            ctx->st.late_prefetches++;
        retire_xfer(ctx, b, rc);
    }
}

void hoff__res_settle(struct hoff_ctx *ctx, struct hoff__block *b) {
    if (!b)
        return;
    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back: no spill when it lands */
    if (in_flight(b->state))
        finish(ctx, b, WAIT_USE);
}

int hoff__res_wait_all(struct hoff_ctx *ctx) {
    while (ctx->res.inf_head)
        finish(ctx, ctx->res.inf_head, WAIT_SYNC);
    return 0;
}

/* --- the budget ------------------------------------------------------------ */

/* Would one more eviction of `bytes` take the host tier over its cap? */
static int host_full(const struct hoff_ctx *ctx, uint64_t bytes) {
    return hoff__host_full(ctx->cfg.host_cap_bytes, ctx->res.host, ctx->res.to_host, bytes);
}

/* May blocks be spilled to make host room?  Not without an NVMe tier, nor
 * after the tier refused a spill (a full disk, an I/O error) until it gave
 * space back, a step ended, a second passed (a disk freed by someone else),
 * or a planned spill succeeded: each spill would fail like the last, and the
 * block come back to the host to be spilled again (a process that never
 * ends).  A retry costs one failed spill. */
#define SPILL_RETRY_NS 1000000000ull

static int spill_ok(struct hoff_ctx *ctx) {
    struct hoff__residency *r = &ctx->res;

    if (r->spill_refused &&
        (r->nvme < r->refused_nvme || ctx->st.steps != r->refused_step ||
         ctx->be->ops->clock_ns(ctx->be) - r->refused_ns >= SPILL_RETRY_NS))
        r->spill_refused = 0;
    return ctx->nvme && !r->spill_refused;
}

/* Write a host block to the NVMe tier (on the tier thread). */
static int start_spill(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc = issue_run(ctx, b, HOFF__CMD_RUN, hoff__spill_run, s);

    if (rc)
        return rc;
    ctx->res.spilling += b->size;
    set_state(ctx, b, S_SPI);
    return 0;
}

/* Make room for `bytes` more on the host tier: wait for what is already
 * leaving it (prefetches to the device, spills to the NVMe tier) when that
 * is enough, else spill the blocks evicted longest ago, waiting for the
 * writes if it must (a counted stall): the host tier never goes over its
 * cap.  -HOFF_EHOSTCAP when nothing is leaving and nothing can be spilled (no
 * NVMe tier, or one that refuses spills). */
static int host_room(struct hoff_ctx *ctx, uint64_t bytes, const struct hoff__block *keep, hoff_stream s) {
    struct hoff__residency *r = &ctx->res;
    int waited = 0;

    while (host_full(ctx, bytes)) {
        struct hoff__block *v;

        /* Not enough on its way off the host? Spill (the oldest first). */
        if (spill_ok(ctx) &&
            hoff__host_spill_more(ctx->cfg.host_cap_bytes, r->host, r->to_host, r->spilling, r->from_host, bytes)) {
            for (v = ctx->res.host_head; v && (v == keep || v->pending || (v->flags & HOFF__BLK_HOLD)); v = v->next)
                ;
            if (v && start_spill(ctx, v, s) == 0)
                continue;
        }
        /* Wait for a spill or a prefetch to land (the one issued first); a
         * prefetch frees its host copy as fast as the link moves it, where a
         * spill would wait for the disk.  Failing that, with an NVMe tier,
         * for an eviction or a restore, whose block can then be spilled
         * (restores in flight can fill the host tier to its cap, and a use
         * of another block on the NVMe tier must still be served). */
        for (v = ctx->res.inf_head;
             v && v->state != S_SPI && (v->state != S_PRE || (v->flags & HOFF__BLK_DISCARDING)); v = v->next)
            ; /* (a discarded block's prefetch frees no host bytes) */
        if (!v && !spill_ok(ctx))
            break;
        if (!v)
            for (v = ctx->res.inf_head;
                 v && v->state != S_RES && (v->state != S_EVI || (v->flags & HOFF__BLK_DISCARDING));
                 v = v->next)
                ;
        if (!v)
            break;
        waited = 1;
        finish(ctx, v, WAIT_USE);
    }
    if (waited)
        ctx->st.host_cap_waits++;
    if (!host_full(ctx, bytes))
        return 0;
    if (!waited)
        ctx->st.host_cap_waits++;
    if (ctx->nvme && r->spill_refused)
        return hoff__error(-HOFF_EHOSTCAP, "%zu more bytes would take the host tier over its cap (HOFF_HOST_CAP), and "
                           "the NVMe tier refused the last spill: %s", (size_t)bytes, r->refused_why);
    return hoff__error(-HOFF_EHOSTCAP, "%zu more bytes would take the host tier over its cap (HOFF_HOST_CAP)%s",
                       (size_t)bytes, ctx->nvme ? "" : "; set HOFF_SPILL_DIR to spill to NVMe");
}

static int start_evict(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc;

    if (host_full(ctx, b->size) && (rc = host_room(ctx, b->size, b, s)) != 0)
        return rc; /* the block stays where it is */
    rc = issue(ctx, b, HOFF__CMD_EVICT, s);
    if (rc)
        return rc;
    ctx->res.evicting += b->size;
    ctx->res.to_host += b->size;
    set_state(ctx, b, S_EVI);
    return 0;
}

/* The next block to evict for room.  While a step is being recorded, the
 * RFC's warmup rule: the earliest allocated first (each allocation is its
 * own event here, so "larger first within an event" has nothing to break);
 * otherwise the least recently used.  Never `keep`, the block the current
 * event uses, nor a block in its use window. */
static struct hoff__block *pick_victim(struct hoff_ctx *ctx, const struct hoff__block *keep, int *over_cap) {
    struct hoff__block *v, *best = NULL;
    int warmup = ctx->in_step && ctx->pipe.state == HOFF_PLAN_WARMUP;

    for (v = ctx->res.lru_head; v; v = v->next) {
        if (v == keep || v->win || v->mgroup) /* a manual group's block moves with its group only */
            continue;
        if (!fits_host(ctx, v)) { /* never evictable: look further */
            *over_cap = 1;
            continue;
        }
        if (!warmup)
            return v;
        if (!best || v->seq < best->seq)
            best = v;
    }
    return best;
}

/* Why make_room could not make room: the cause the messages name. */
enum room_why {
    ROOM_NOTHING,   /* every resident block is in use or pinned */
    ROOM_OVER_CAP,  /* what is left is larger than the host cap */
    ROOM_EVICT_ERR, /* an eviction was refused (hoff_last_error says why) */
};

/* Make resident + need fit in the budget, never evicting `keep`.  -ENOSPC
 * when nothing more can be evicted, with the cause in *why.  keep, when on
 * the host (coming back), is held there: a victim's eviction that needs host
 * room does not spill it (host_room skips HOFF__BLK_HOLD). */
static int make_room_once(struct hoff_ctx *ctx, uint64_t need, struct hoff__block *keep, hoff_stream s,
                          enum room_why *why);

static int make_room(struct hoff_ctx *ctx, uint64_t need, struct hoff__block *keep, hoff_stream s,
                     enum room_why *why) {
    uint8_t held = keep ? keep->flags & HOFF__BLK_HOLD : 0;
    int rc;

    if (keep)
        keep->flags |= HOFF__BLK_HOLD;
    *why = ROOM_NOTHING;
    rc = make_room_once(ctx, need, keep, s, why);
    if (keep && !held)
        keep->flags &= (uint8_t)~HOFF__BLK_HOLD;
    return rc;
}

/* The budget the online policy keeps: the configured one, but while a step
 * replays a plan for a budget below the working-set floor, the floor: no
 * eviction can take the peak below it, so none is forced beyond it. */
static uint64_t room_budget(const struct hoff_ctx *ctx, int *squeezed) {
    const struct hoff__pipeline *p = &ctx->pipe;
    uint64_t budget = ctx->cfg.budget_bytes, cap = hoff__guard_cap(ctx);

    if (budget && ctx->in_step && p->have_plan && p->state == HOFF_PLAN_REPLAY && !p->diverged &&
        p->sched.floor_bytes > budget)
        budget = p->sched.floor_bytes;
    /* The device itself: what its memory leaves beside hoff's device pool
     * (guard.c), below any budget, so that the driver never has to evict
     * hoff's blocks behind its back. */
    *squeezed = cap && (!budget || cap < budget);
    return *squeezed ? cap : budget;
}

static int make_room_once(struct hoff_ctx *ctx, uint64_t need, struct hoff__block *keep, hoff_stream s,
                          enum room_why *why) {
    int squeezed, counted = 0;
    uint64_t budget = room_budget(ctx, &squeezed);
    int over_cap = 0;

    if (!budget)
        return 0;
    for (;;) {
        uint64_t over;
        struct hoff__block *v;

        hoff__res_poll(ctx);
        if (ctx->res.resident + need <= budget)
            return 0;
        if (squeezed && !counted++)
            ctx->st.device_squeezes++;
        over = ctx->res.resident + need - budget;
        if (ctx->res.evicting < over) {
            v = pick_victim(ctx, keep, &over_cap);
            if (v) {
                if (start_evict(ctx, v, s) == 0) {
                    ctx->st.budget_evictions++;
                    continue;
                }
                *why = ROOM_EVICT_ERR;
                return -ENOSPC;
            }
            if (over_cap)
                *why = ROOM_OVER_CAP;
        }
        /* Wait for the oldest eviction in flight; failing that, for the
         * oldest prefetch, which then becomes evictable. */
        for (v = ctx->res.inf_head; v && v->state != S_EVI; v = v->next)
            ;
        if (!v)
            for (v = ctx->res.inf_head; v && v == keep; v = v->next)
                ;
        if (!v)
            return -ENOSPC;
        finish(ctx, v, WAIT_USE);
    }
}

int hoff__res_fit_device(struct hoff_ctx *ctx) {
    enum room_why why = ROOM_NOTHING;

    return make_room_once(ctx, 0, NULL, NULL, &why);
}

static const char *room_cause(const struct hoff_ctx *ctx, enum room_why why, char *buf, size_t len);

int hoff__res_budget_room(struct hoff_ctx *ctx, uint64_t need, hoff_stream s, const char *what) {
    enum room_why why;
    char a[32], b[32], c[32], cause[400];

    if (make_room(ctx, need, NULL, s, &why) == 0)
        return 0;
    return hoff__error(-HOFF_EBUDGET, "%s: %s more resident bytes do not fit in the budget (HOFF_BUDGET %s, %s "
                       "resident): %s", what, hoff__fmt_size(need, a, sizeof a),
                       hoff__fmt_size(ctx->cfg.budget_bytes, b, sizeof b),
                       hoff__fmt_size(ctx->res.resident, c, sizeof c), room_cause(ctx, why, cause, sizeof cause));
}

int hoff__res_host_room(struct hoff_ctx *ctx, uint64_t bytes, hoff_stream s) {
    return host_full(ctx, bytes) ? host_room(ctx, bytes, NULL, s) : 0;
}

int hoff__res_stream_wait(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = ctx->be;

    if (!in_flight(b->state) || b->state == S_SPI || b->state == S_RES)
        return 0;
    /* The issuing thread records the transfer's event when it runs the
     * command: a stream cannot wait for an event not recorded yet. */
    hoff__issuer_drain(ctx->issuer);
    wait_issued(ctx, b);
    return be->ops->stream_wait ? be->ops->stream_wait(be, s, carrier(b)->ev) : 0;
}

/* Why no more room could be made, in words. */
static const char *room_cause(const struct hoff_ctx *ctx, enum room_why why, char *buf, size_t len) {
    char c[32];

    switch (why) {
    case ROOM_OVER_CAP:
        snprintf(buf, len,
                 "the blocks left to evict are larger than the host cap (HOFF_HOST_CAP %s), so they can never "
                 "be evicted",
                 hoff__fmt_size(ctx->cfg.host_cap_bytes, c, sizeof c));
        break;
    case ROOM_EVICT_ERR:
        snprintf(buf, len, "an eviction was refused: %s", hoff_last_error());
        break;
    default:
        snprintf(buf, len, "nothing left to evict (every resident block is in use or pinned)");
        break;
    }
    return buf;
}

/* The budget is passed (counted by note_resident): say why, once per cause. */
static void overrun(struct hoff_ctx *ctx, uint64_t need, enum room_why why) {
    char a[32], b[32], cause[400];

    hoff__fmt_size(ctx->cfg.budget_bytes, a, sizeof a);
    hoff__fmt_size(need, b, sizeof b);
    room_cause(ctx, why, cause, sizeof cause);
#define OVERRUN_LOG() \
    HOFF__LOG_ONCE(HOFF_LOG_WARN, "budget %s exceeded: %s more resident offload bytes; %s; counted in " \
                   "budget_overruns", a, b, cause)
    switch (why) { /* one log line per cause */
    case ROOM_OVER_CAP: OVERRUN_LOG(); break;
    case ROOM_EVICT_ERR: OVERRUN_LOG(); break;
    default: OVERRUN_LOG(); break;
    }
#undef OVERRUN_LOG
}

/* A new offload candidate that the host tier can never take: count it and
 * say so once, naming the sizes (hoff-config(7), HOFF_HOST_CAP). */
static void check_host_cap(struct hoff_ctx *ctx, const struct hoff__block *b) {
    char a[32], c[32];

    if (!evictable(b) || fits_host(ctx, b))
        return;
    ctx->st.host_cap_unevictable++;
    HOFF__LOG_ONCE(HOFF_LOG_WARN,
                   "HOFF_HOST_CAP %s is below this %s offload block: an eviction lands on the host tier "
                   "first, so the block can never be evicted and stays on the device, over the budget if it "
                   "must; set HOFF_HOST_CAP to at least %s (or 0, no limit); counted in host_cap_unevictable",
                   hoff__fmt_size(ctx->cfg.host_cap_bytes, c, sizeof c), hoff__fmt_size(b->size, a, sizeof a),
                   a);
}

/* --- actions --------------------------------------------------------------- */

int hoff__res_on_alloc(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = ctx->be;
    enum room_why why;
    int rc;

    check_host_cap(ctx, b);
    if (make_room(ctx, b->size, b, s, &why) != 0)
        overrun(ctx, b->size, why);
    if (b->state != S_DEV) {
        /* A cached mapping whose contents were dropped: contents undefined. */
        rc = hoff__res_next(b->state, HOFF__EV_POPULATE);
        if (rc < 0)
            return rc;
        rc = be->ops->populate(be, b->ptr, b->size, s);
        if (rc)
            return rc;
        hoff__guard_fault(ctx, s); /* pages appear: no measure of the driver meanwhile */
    }
    b->state = S_DEV;
    ctx->res.resident += b->size;
    if (evictable(b))
        list_append(LRU(ctx), b);
    note_resident(ctx);
    window_open(ctx, b, s); /* the caller fills it next (its streams: s's, from the pool) */
    return 0;
}

/* The spilled copy is dead (freed, discarded): give its file space back. */
static void drop_spill(struct hoff_ctx *ctx, struct hoff__block *b) {
    hoff__nvme_drop(ctx->nvme, b->spill);
    b->spill = NULL;
    ctx->res.nvme -= b->size;
}

int hoff__res_on_free(struct hoff_ctx *ctx, struct hoff__block *b) {
    hoff__res_end_use(ctx, b); /* stream-ordered: its uses are enqueued */
    hoff__group_leave(ctx, b);  /* a freed block is no member of a manual group */
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
        if (evictable(b))
            list_remove(LRU(ctx), b);
        ctx->res.resident -= b->size;
        break;
    case S_HOST:
        ctx->res.host -= b->size;
        set_state(ctx, b, S_DIS); /* the host copy is dead: reuse repopulates */
        break;
    case S_NVM:
        drop_spill(ctx, b);
        set_state(ctx, b, S_DIS);
        break;
    default:
        break;
    }
    b->flags &= (uint8_t)~HOFF__BLK_LIVE;
    note_resident(ctx);
    return 1;
}

static int candidate(const struct hoff__block *b) {
    if (b->pool != HOFF__POOL_MANAGED)
        return hoff__error(-EPERM, "block %p is in the device pool: not an offload candidate", b->ptr);
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

int hoff__res_evict(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    hoff__res_poll(ctx);
    if ((rc = check_next(b, HOFF__EV_EVICT)) < 0)
        return rc;
    if ((rc = window_closed(ctx, b, "evict")) != 0)
        return rc;
    rc = start_evict(ctx, b, s);
    note_resident(ctx);
    return rc;
}

int hoff__res_prefetch(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    enum room_why why;
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back */
    hoff__res_poll(ctx);
    if (b->state == S_NVM && (rc = to_host_now(ctx, b, s)) != 0)
        return rc; /* an online prefetch of a spilled block: restore, waiting */
    if ((rc = check_next(b, HOFF__EV_PREFETCH)) < 0)
        return rc;
    if (make_room(ctx, b->size, b, s, &why) != 0) {
        char cause[400];

        return hoff__error(-HOFF_EBUDGET, "prefetch of %p (%zu bytes) does not fit in the budget: %s", b->ptr,
                           b->size, room_cause(ctx, why, cause, sizeof cause));
    }
    if ((rc = issue(ctx, b, HOFF__CMD_PREFETCH, s)) != 0)
        return rc;
    ctx->res.resident += b->size;
    if (b->state == S_DIS) /* no bytes on the host to move: it takes no host room (retire) */
        b->flags |= HOFF__BLK_DISCARDING;
    else
        ctx->res.from_host += b->size;
    set_state(ctx, b, S_PRE);
    note_resident(ctx);
    return 0;
}

int hoff__res_group(struct hoff_ctx *ctx, int op, struct hoff__block *const *m, unsigned n, void *base,
                    size_t size, hoff_stream s) {
    struct hoff__backend *be = ctx->be;
    struct hoff__block *lead;
    struct hoff__cmd cmd;
    uint64_t total = 0, now;
    unsigned i;
    int rc, want = op == HOFF__CMD_EVICT ? S_DEV : S_HOST;

    if ((op != HOFF__CMD_EVICT && op != HOFF__CMD_PREFETCH) || !n || !m)
        return -EINVAL;
    hoff__res_poll(ctx);
    /* A member whose own eviction is still in flight: wait for it to land,
     * as hoff__res_prefetch does. */
    for (i = 0; op == HOFF__CMD_PREFETCH && i < n; i++) {
        if (m[i])
            m[i]->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back */
        if (m[i] && m[i]->state == S_EVI && (m[i]->flags & HOFF__BLK_LIVE))
            finish(ctx, m[i], WAIT_USE);
    }
    /* Every member live, movable, settled where the call moves it from, and
     * the members tile the range in order. */
    for (i = 0; i < n; i++) {
        const struct hoff__block *b = m[i];

        if (!b || b->pool != HOFF__POOL_MANAGED || !(b->flags & HOFF__BLK_LIVE) ||
            (b->flags & (HOFF__BLK_PINNED | HOFF__BLK_FREED)) || b->state != want || __atomic_load_n(&b->pending, __ATOMIC_ACQUIRE) || b->xlead ||
            (op == HOFF__CMD_EVICT && b->win) || b->mgroup != m[0]->mgroup ||
            (char *)b->ptr != (char *)base + total || b->size > size - total)
            return -EAGAIN;
        total += b->size;
    }
    if (total != size)
        return -EAGAIN;
    lead = m[0];
    if (op == HOFF__CMD_EVICT) {
        if (host_full(ctx, total))
            return -ENOSPC; /* block by block: the host tier makes room as it must */
    } else {
        for (i = 0; i < n; i++) /* the members stay on the host while room is made */
            m[i]->flags |= HOFF__BLK_HOLD;
        rc = make_room(ctx, total, lead, s, &(enum room_why){ROOM_NOTHING});
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
    if ((rc = ensure_events(ctx, lead)) != 0)
        return rc;
    memset(&cmd, 0, sizeof cmd);
    if (op == HOFF__CMD_EVICT) { /* after every stream any member was used on */
        if ((rc = fence_move(ctx, m, n, &cmd)) != 0)
            return rc;
    } else {
        if ((rc = be->ops->event_record(be, lead->after, s)) != 0)
            return rc;
        cmd.after = lead->after;
    }
    cmd.op = op;
    cmd.ptr = base;
    cmd.size = size;
    cmd.done = lead->ev;
    cmd.cookie = lead;
    cmd.node = op == HOFF__CMD_EVICT && ctx->host_tier ? hoff__host_tier_node(ctx->host_tier) : -1;
    __atomic_store_n(&lead->xfer_rc, 0, __ATOMIC_RELAXED);
    hoff__guard_probe_issue(ctx, lead, -1); /* a group: not measured */
    __atomic_add_fetch(&lead->pending, 1, __ATOMIC_ACQ_REL);
    rc = hoff__issuer_push(ctx->issuer, &cmd);
    if (rc) {
        __atomic_sub_fetch(&lead->pending, 1, __ATOMIC_ACQ_REL);
        return rc;
    }
    if (op == HOFF__CMD_EVICT)
        ctx->st.evict_calls++;
    else
        ctx->st.prefetch_calls++;
    ctx->st.group_calls_saved += n - 1;
    now = be->ops->clock_ns(be);
    for (i = 0; i < n; i++) {
        struct hoff__block *b = m[i];

        b->xlead = lead;
        b->xnext = i + 1 < n ? m[i + 1] : NULL;
        b->t_issue = now;
        if (op == HOFF__CMD_EVICT) {
            ctx->res.evicting += b->size;
            ctx->res.to_host += b->size;
            set_state(ctx, b, S_EVI);
        } else {
            ctx->res.resident += b->size;
            ctx->res.from_host += b->size;
            set_state(ctx, b, S_PRE);
        }
    }
    note_resident(ctx);
    return 0;
}

int hoff__res_discard(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    hoff__res_poll(ctx);
    if ((rc = check_next(b, HOFF__EV_DISCARD)) < 0)
        return rc;
    if ((rc = window_closed(ctx, b, "discard")) != 0)
        return rc;
    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* dead: nothing to keep */
    if (b->state == S_DEV) {
        /* Stream-ordered drop of the device pages on the copy stream, after
         * the work queued on s: in flight like an eviction (the pages count
         * against the budget until it lands), and retired the same way.
         * Until then the block may not be touched or reused: a use waits for
         * it (hoff__res_access), a free is deferred (hoff__res_on_free). */
        if ((rc = issue(ctx, b, HOFF__CMD_DISCARD, s)) != 0)
            return rc;
        ctx->res.evicting += b->size;
        b->flags |= HOFF__BLK_DISCARDING;
        set_state(ctx, b, S_EVI);
    } else if (b->state == S_NVM) {
        struct hoff__backend *be = ctx->be;
        void *host;

        drop_spill(ctx, b); /* the spilled copy is simply dead */
        /* The backend dropped the host pages at the spill: give them back
         * (contents undefined, as after any discard) so that the next use
         * pages the block in like any discarded one instead of finding no
         * copy anywhere.  The block is settled (no transfer in flight). */
        if (be->ops->host_make && (rc = be->ops->host_make(be, b->ptr, b->size, &host)) != 0)
            return hoff__error(rc, "discard of %p (on the NVMe tier): %s", b->ptr, hoff_last_error());
        set_state(ctx, b, S_DIS);
        ctx->st.discards++;
    } else {
        ctx->res.host -= b->size; /* the host copy is simply dead */
        set_state(ctx, b, S_DIS);
        ctx->st.discards++;
    }
    note_resident(ctx);
    return 0;
}

/* Read a spilled block back to the host (on the tier thread); host room
 * first.  `use`: a use needs the bytes (to_host_now); when no room can be
 * made (the NVMe tier refuses spills, every host block is held) the block
 * comes back over the cap rather than never: counted in host_cap_overruns
 * and said once with the cause. */
static int start_restore(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s, int use) {
    int rc;

    if (host_full(ctx, b->size) && (rc = host_room(ctx, b->size, b, s)) != 0) {
        if (!use)
            return rc;
        ctx->st.host_cap_overruns++;
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "a spilled block in use comes back over the host cap: %s; counted in "
                       "host_cap_overruns", hoff_last_error());
    }
    rc = issue_run(ctx, b, HOFF__CMD_RUN, hoff__restore_run, s);
    if (rc)
        return rc;
    ctx->res.to_host += b->size;
    set_state(ctx, b, S_RES);
    return 0;
}

int hoff__res_spill(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    if (!ctx->nvme)
        return hoff__error(-ENOTSUP, "no NVMe tier (set HOFF_SPILL_DIR)");
    hoff__res_poll(ctx);
    if (b->state == S_EVI && !(b->flags & HOFF__BLK_DISCARDING)) {
        /* The replay runs ahead of the plan's timing: spill once the
         * eviction lands (retire), unless the block is wanted back first. */
        b->flags |= HOFF__BLK_SPILL_AFTER;
        return 0;
    }
    if ((rc = check_next(b, HOFF__EV_SPILL)) < 0)
        return rc;
    rc = start_spill(ctx, b, s);
    note_resident(ctx);
    return rc;
}

int hoff__res_restore(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc;

    if ((rc = candidate(b)) != 0)
        return rc;
    hoff__res_poll(ctx);
    if ((rc = check_next(b, HOFF__EV_RESTORE)) < 0)
        return rc;
    rc = start_restore(ctx, b, s, 0);
    note_resident(ctx);
    return rc;
}

/* Bring a block on the NVMe tier (or on its way there or back) to the host,
 * waiting for it: a use or a prefetch needs the bytes. */
static int to_host_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc;

    if (b->state == S_SPI || b->state == S_RES)
        finish(ctx, b, WAIT_USE);
    if (b->state == S_NVM) {
        if ((rc = start_restore(ctx, b, s, 1)) != 0)
            return rc;
        finish(ctx, b, WAIT_USE);
    }
    return b->state == S_NVM ? hoff__error(-EIO, "restore of %p from the NVMe tier failed: %s", b->ptr,
                                           hoff_last_error())
                             : 0;
}

static int bring_back(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = ctx->be;
    enum room_why why;
    uint64_t stall = 0;
    int rc;

    b->flags &= (uint8_t)~HOFF__BLK_SPILL_AFTER; /* wanted back */
    hoff__res_poll(ctx);
    switch (b->state) {
    case S_DEV:
        if (evictable(b)) { /* most recently used */
            list_remove(LRU(ctx), b);
            list_append(LRU(ctx), b);
        }
        return 0;
    case S_PRE:
        finish(ctx, b, WAIT_LATE); /* used before its prefetch completed */
        if (b->state == S_DEV)
            return 0;
        break; /* the prefetch failed: page it in */
    case S_EVI:
        finish(ctx, b, WAIT_USE); /* the eviction must land before the page-in */
        if (b->state == S_DEV)
            return 0;
        break;
    case S_SPI:
    case S_NVM:
    case S_RES:
        if ((rc = to_host_now(ctx, b, s)) != 0) /* off the disk first */
            return rc;
        break;
    default:
        break;
    }
    if ((rc = check_next(b, HOFF__EV_FAULT)) < 0)
        return rc;
    if (make_room(ctx, b->size, b, s, &why) != 0)
        overrun(ctx, b->size, why);
    hoff__issuer_drain(ctx->issuer); /* the fault moves the clock: see finish() */
    rc = be->ops->fault(be, b->ptr, b->size, s, &stall);
    if (rc) {
        ctx->st.transfer_errors++;
        return hoff__error(rc, "paging in block %p failed", b->ptr);
    }
    ctx->st.faults++;
    hoff__guard_fault(ctx, s);
    if (b->state == S_HOST) { /* a discarded block has no bytes to move */
        ctx->res.host -= b->size;
        ctx->st.bytes_faulted += b->size;
    }
    ctx->res.resident += b->size;
    set_state(ctx, b, S_DEV);
    ctx->st.stall_ns += stall;
    note_resident(ctx);
    return 0;
}

int hoff__res_access(struct hoff_ctx *ctx, struct hoff__block *b, int write, hoff_stream s) {
    int rc;

    (void)write;
    ctx->res.marks_seen = 1;
    if (b->pool != HOFF__POOL_MANAGED)
        return 0;
    rc = bring_back(ctx, b, s);
    /* Resident now (or paging in failed, and the work runs anyway): its
     * window opens only here, so that a move still in flight from before
     * never counts as inside it. */
    window_open(ctx, b, s);
    return rc;
}

#ifdef HOFF_DEBUG
#include <stdio.h>

void hoff__res_check(struct hoff_ctx *ctx) {
    uint64_t lru = 0, evi = 0, pre = 0;
    struct hoff__block *b;

    for (b = ctx->res.lru_head; b; b = b->next) {
        if (b->state != S_DEV || !(b->flags & HOFF__BLK_LIVE)) {
            fprintf(stderr, "hoff: debug: block %p on the LRU list is %s\n", b->ptr,
                    hoff__res_state_name(b->state));
            abort();
        }
        lru += b->size;
    }
    for (b = ctx->res.inf_head; b; b = b->next) {
        if (b->state == S_EVI)
            evi += b->size;
        else if (b->state == S_PRE)
            pre += b->size;
        else if (b->state != S_SPI && b->state != S_RES)
            abort();
    }
    if (evi != ctx->res.evicting || lru + evi + pre > ctx->res.resident) {
        fprintf(stderr, "hoff: debug: residency books: lru %llu evicting %llu/%llu prefetching %llu resident %llu\n",
                (unsigned long long)lru, (unsigned long long)evi, (unsigned long long)ctx->res.evicting,
                (unsigned long long)pre, (unsigned long long)ctx->res.resident);
        abort();
    }
}
#endif
