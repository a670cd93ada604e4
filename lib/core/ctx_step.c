/* ctx_step.c — the step's entry points: the explicit residency actions (hoff_evict, hoff_prefetch, hoff_discard,
 * hoff_access, hoff_residency, hoff_sync), the marks (step begin/end/abort, ops, regions) that drive the
 * pipeline, hoff_trace_save, and the sim's hooks (hoff_sim_compute, hoff_sim_touch).
 * Threading: every entry point takes ctx->lock (one lock per context: the pools, table and residency share it). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "core/context.h"
#include "core/core.h"
#include "core/ctx_impl.h"
#include "core/publish.h"
#include "mem/guard.h"
#include "plan/plan.h"

/* --- residency ------------------------------------------------------------- */

typedef int (*res_action)(struct hoff_ctx *, struct hoff__block *, hoff_stream);

static int with_block(hoff_ctx *ctx, const void *ptr, const char *what, res_action fn, hoff_stream s) {
    unsigned seq = hoff__error_seq();
    struct hoff__block *b;
    int rc;

    if (!ctx)
        return hoff__error(-EINVAL, "%s: NULL context", what);
    LOCK(ctx);
    if ((rc = hoff__ctx_block(ctx, ptr, what, &b)) != 0) {
        UNLOCK(ctx);
        return rc;
    }
    rc = fn(ctx, b, s);
#ifdef HOFF_DEBUG
    hoff__res_check(&ctx->mem);
#endif
    hoff__publish_tick(ctx, NULL);
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, what); /* residency's messages do not know the call */
}

/* The explicit calls close the block's use window: the caller says the work
 * that uses it is enqueued on the stream it names (hoff_evict(3)). */
static int evict_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    if (b->pool == HOFF__POOL_MANAGED)
        hoff__res_end_use(&ctx->mem, b);
    return hoff__res_evict(&ctx->mem, b, s);
}

static int discard_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    if (b->pool == HOFF__POOL_MANAGED)
        hoff__res_end_use(&ctx->mem, b);
    return hoff__res_discard(&ctx->mem, b, s);
}

static int prefetch_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    return hoff__res_prefetch(&ctx->mem, b, s);
}

HOFF_API int hoff_evict(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_evict", evict_now, stream);
}

HOFF_API int hoff_prefetch(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_prefetch", prefetch_now, stream);
}

HOFF_API int hoff_discard(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_discard", discard_now, stream);
}

/* An access is an event of the step: the pipeline sees it on both sides. */
/* A use of b, a live block hoff released (discarded, or its discard in
 * flight): its bytes are gone, so this is a plan or use-window error.
 * Counted and said once; 1 if so. */
static int released_use(struct hoff_ctx *ctx, struct hoff__block *b, const char *how) {
    if (b->pool != HOFF__POOL_MANAGED || !(b->flags & HOFF__BLK_LIVE) ||
        !(b->state == HOFF_RES_DISCARDED || (b->state == HOFF_RES_EVICTING && (b->flags & HOFF__BLK_DISCARDING))))
        return 0;
    HOFF__STAT_ADD(&ctx->st, discard_touches, 1);
    HOFF__LOG_ONCE(HOFF_LOG_ERROR,
                   "block %p (%zu bytes) was %s after hoff released it: its contents are "
                   "lost (a plan or use-window error; counted in discard_touches)",
                   b->ptr, b->size, how);
    return 1;
}

static int access_marked(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s, int write) {
    struct hoff__event_info e;
    int rc;

    if (!write) /* a write makes the contents anew; a read would see none */
        released_use(ctx, b, "read (hoff_access)");
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_ACCESS;
    e.stream = s;
    e.write = write;
    e.b = b;
    hoff__pipe_before(ctx, &e);
    rc = hoff__res_access(&ctx->mem, b, write, s);
    hoff__pipe_after(ctx, &e);
    return rc;
}

static int access_read(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    return access_marked(ctx, b, s, 0);
}

static int access_write(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    return access_marked(ctx, b, s, 1);
}

HOFF_API int hoff_access(hoff_ctx *ctx, void *ptr, int write, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_access", write ? access_write : access_read, stream);
}

/* hoff_keep: out of the budget at once, and in the recorded step's trace. */
static int keep_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    int rc;

    (void)s;
    if (ctx->cfg.offload_gradients) {
        HOFF__STAT_ADD(&ctx->st, keep_ignored, 1);
        return 0;
    }
    rc = hoff__res_keep(&ctx->mem, b, b->use_stream ? b->use_stream : b->stream);
    if (rc == 0)
        hoff__record_keep(&ctx->pipe, &ctx->mem, b);
    return rc;
}

HOFF_API int hoff_keep(hoff_ctx *ctx, void *ptr) {
    return with_block(ctx, ptr, "hoff_keep", keep_now, NULL);
}

HOFF_API int hoff_residency(hoff_ctx *ctx, const void *ptr) {
    struct hoff__block *b;
    int st;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_residency: NULL context");
    LOCK(ctx);
    if (ctx->mem.res.inf_head)
        hoff__res_poll(&ctx->mem);
    st = hoff__ctx_block(ctx, ptr, "hoff_residency", &b);
    if (st == 0)
        st = b->state;
    UNLOCK(ctx);
    return st;
}

HOFF_API int hoff_sync(hoff_ctx *ctx) {
    unsigned seq = hoff__error_seq();
    int rc;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_sync: NULL context");
    LOCK(ctx);
    rc = hoff__ctx_settle(ctx);
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, "hoff_sync");
}

/* --- marks ----------------------------------------------------------------- */

HOFF_API int hoff_step_stream(hoff_ctx *ctx, hoff_stream stream) {
    if (!ctx)
        return hoff__error(-EINVAL, "hoff_step_stream: NULL context");
    LOCK(ctx);
    ctx->step_stream = stream;
    ctx->step_stream_set = 1;
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_step_begin(hoff_ctx *ctx) {
    unsigned seq = hoff__error_seq();
    int rc;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_step_begin: NULL context");
    LOCK(ctx);
    if (ctx->in_step) {
        UNLOCK(ctx);
        return hoff__error(-EALREADY, "hoff_step_begin: a step is already open (missing hoff_step_end)");
    }
    hoff__res_close_windows(&ctx->mem);
    ctx->in_step = 1;
    hoff__pipe_policy(ctx);
    ctx->phase = HOFF_PHASE_NONE; /* the framework says it again (hoff_set_phase) */
    ctx->step_start_ns = ctx->mem.be->ops->clock_ns(ctx->mem.be);
    ctx->wall_mark_ns = ctx->sim_wallclock ? hoff__plan_now_ns() : 0;
    rc = hoff__pipe_step_begin(ctx);
    if (rc) {
        ctx->in_step = 0;
        hoff__pipe_policy(ctx);
    }
    hoff__publish_now(ctx);
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, "hoff_step_begin");
}

/* Take the lock for an entry point that ends the open step: 0 with the lock
 * held, or -EINVAL ("<what>: no step is open") without it. */
static int lock_open_step(struct hoff_ctx *ctx, const char *what) {
    if (!ctx)
        return hoff__error(-EINVAL, "%s: NULL context", what);
    LOCK(ctx);
    if (!ctx->in_step) {
        UNLOCK(ctx);
        return hoff__error(-EINVAL, "%s: no step is open", what);
    }
    return 0;
}

HOFF_API int hoff_step_end(hoff_ctx *ctx) {
    unsigned seq = hoff__error_seq();
    uint64_t now;
    int rc;

    if ((rc = lock_open_step(ctx, "hoff_step_end")) != 0)
        return rc;
    if (ctx->region_depth) {
        UNLOCK(ctx);
        return hoff__error(-EBUSY, "hoff_step_end: %d region(s) still open", ctx->region_depth);
    }
    hoff__res_close_windows(&ctx->mem); /* the step's work is enqueued: every window closes */
    hoff__ctx_release_deferred(ctx);    /* HOFF_FREE_FENCE=device: the step's frees become reusable */
    ctx->in_step = 0;
    now = ctx->mem.be->ops->clock_ns(ctx->mem.be);
    HOFF__STAT_ADD(&ctx->st, steps, 1);
    HOFF__STAT_SET(&ctx->st, last_step_ns, now - ctx->step_start_ns);
    hoff__pipe_policy(ctx);
    rc = hoff__pipe_step_end(ctx);
    hoff__guard_sample(&ctx->mem); /* once a step: the device memory that is not hoff's */
    hoff__publish_now(ctx);
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, "hoff_step_end");
}

HOFF_API int hoff_step_abort(hoff_ctx *ctx) {
    unsigned seq = hoff__error_seq();
    int rc;

    if ((rc = lock_open_step(ctx, "hoff_step_abort")) != 0)
        return rc;
    /* Transfers land first, so every block is in a settled state. */
    hoff__res_close_windows(&ctx->mem);
    hoff__ctx_settle(ctx);
    ctx->in_step = 0;
    ctx->region_depth = 0;
    hoff__pipe_policy(ctx);
    rc = hoff__pipe_step_abort(ctx);
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, "hoff_step_abort");
}

/* stream computes for ns of virtual time (the lock is held).  Commands queued so far take their place on the
 * virtual timeline before it moves (see finish() in residency.c). */
static int sim_compute(struct hoff_ctx *ctx, hoff_stream stream, uint64_t ns) {
    int rc;

    hoff__issuer_drain(ctx->mem.issuer);
    rc = ctx->mem.be->ops->compute(ctx->mem.be, stream, ns);
    if (ctx->mem.res.inf_head)
        hoff__res_poll(&ctx->mem);
    return rc;
}

/* The virtual compute stream runs for the CPU time since the previous op mark (hoff_sim_wallclock); the lock is
 * held. */
static void wallclock_advance(struct hoff_ctx *ctx) {
    uint64_t now = hoff__plan_now_ns(), last = ctx->wall_mark_ns;

    ctx->wall_mark_ns = now;
    if (last && now > last)
        sim_compute(ctx, NULL, now - last);
}

HOFF_API int hoff_mark_op(hoff_ctx *ctx, const char *name) {
    struct hoff__event_info e;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_mark_op: NULL context");
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_OP;
    e.name = name;
    LOCK(ctx);
    if (ctx->sim_wallclock && ctx->in_step)
        wallclock_advance(ctx);
    /* The previous op's work is enqueued: its use windows close before the
     * actions planned at this boundary fire. */
    hoff__res_close_windows(&ctx->mem);
    hoff__pipe_before(ctx, &e);
    hoff__pipe_after(ctx, &e);
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_set_phase(hoff_ctx *ctx, int phase) {
    if (!ctx)
        return hoff__error(-EINVAL, "hoff_set_phase: NULL context");
    if (phase < 0 || phase >= HOFF_PHASE_COUNT)
        return hoff__error(-EINVAL,
                           "hoff_set_phase: phase %d: expected 0 to %d (enum hoff_phase: none, forward, "
                           "backward, loss, optimizer)",
                           phase, HOFF_PHASE_COUNT - 1);
    LOCK(ctx);
    ctx->phase = phase;
    UNLOCK(ctx);
    return 0;
}

HOFF_API const char *hoff_phase_name(int phase) {
    static const char *const names[HOFF_PHASE_COUNT] = {"none", "forward", "backward", "loss", "optimizer"};

    return phase >= 0 && phase < HOFF_PHASE_COUNT ? names[phase] : "unknown";
}

HOFF_API int hoff_trace_save(hoff_ctx *ctx, const char *path) {
    unsigned seq = hoff__error_seq();
    int rc;

    if (!ctx || !path)
        return hoff__error(-EINVAL, "hoff_trace_save: NULL %s", ctx ? "path" : "context");
    LOCK(ctx);
    rc = ctx->pipe.have_trace ? hoff__trace_save(&ctx->pipe.trace, path)
                              : hoff__error(-ENOENT, "hoff_trace_save: no step has been recorded yet");
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, "hoff_trace_save");
}

HOFF_API int hoff_region_begin(hoff_ctx *ctx) {
    struct hoff__event_info e;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_region_begin: NULL context");
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_REGION_BEGIN;
    LOCK(ctx);
    hoff__pipe_before(ctx, &e);
    ctx->region_depth++;
    hoff__pipe_after(ctx, &e);
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_region_end(hoff_ctx *ctx) {
    struct hoff__event_info e;
    int rc = 0;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_region_end: NULL context");
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_REGION_END;
    LOCK(ctx);
    if (ctx->region_depth > 0) {
        hoff__pipe_before(ctx, &e);
        ctx->region_depth--;
        hoff__pipe_after(ctx, &e);
    } else {
        rc = hoff__error(-EINVAL, "hoff_region_end: no region is open");
    }
    UNLOCK(ctx);
    return rc;
}

HOFF_API int hoff_sim_compute(hoff_ctx *ctx, hoff_stream stream, uint64_t ns) {
    unsigned seq = hoff__error_seq();
    int rc;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_sim_compute: NULL context");
    LOCK(ctx);
    rc = sim_compute(ctx, stream, ns);
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, "hoff_sim_compute");
}

HOFF_API int hoff_sim_wallclock(hoff_ctx *ctx, int enable) {
    if (!ctx)
        return hoff__error(-EINVAL, "hoff_sim_wallclock: NULL context");
    if (strcmp(ctx->mem.be->ops->name, "sim") != 0)
        return hoff__error(-ENOTSUP,
                           "hoff_sim_wallclock: the %s backend has a real clock; only sim has a virtual "
                           "one",
                           ctx->mem.be->ops->name);
    if (enable != 0 && enable != 1)
        return hoff__error(-EINVAL, "hoff_sim_wallclock: enable %d: expected 0 or 1", enable);
    LOCK(ctx);
    ctx->sim_wallclock = enable;
    ctx->wall_mark_ns = enable && ctx->in_step ? hoff__plan_now_ns() : 0;
    UNLOCK(ctx);
    return 0;
}

/* A page fault on a block that is away (python -m hoff --sim): page it in as
 * an access does; a block the plan released is an error, counted. */
static int touch_block(struct hoff_ctx *ctx, struct hoff__block *b, int write) {
    uint64_t faults = ctx->mem.st.faults;
    int dropped, rc;

    if (b->pool != HOFF__POOL_MANAGED)
        return 0; /* device pool: never away */
    dropped = released_use(ctx, b, "touched");
    rc = hoff__res_access(&ctx->mem, b, write, NULL);
    if (dropped) {
        return hoff__error(-ENODATA, "hoff_sim_touch: block %p was released (discarded) before this use", b->ptr);
    }
    HOFF__STAT_ADD(&ctx->st, touch_faults, ctx->mem.st.faults - faults); /* 0 when it was resident, or only late */
    return rc;
}

HOFF_API int hoff_sim_touch(hoff_ctx *ctx, void *ptr, int write) {
    unsigned seq = hoff__error_seq();
    struct hoff__block *b;
    int rc;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_sim_touch: NULL context");
    if (strcmp(ctx->mem.be->ops->name, "sim") != 0)
        return hoff__error(-ENOTSUP, "hoff_sim_touch: the %s backend pages in by itself; only sim needs it",
                           ctx->mem.be->ops->name);
    LOCK(ctx);
    if ((rc = hoff__ctx_block(ctx, ptr, "hoff_sim_touch", &b)) == 0)
        rc = touch_block(ctx, b, write);
    hoff__publish_tick(ctx, NULL);
    UNLOCK(ctx);
    return hoff__error_since(seq, rc, "hoff_sim_touch");
}
