/* pipeline.c — the life of steps: which executor runs a step (warmup or replay), planning at the end of a
 * recorded step, and re-recording after repeated divergence.  Threading: caller holds ctx->lock. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "core/core.h"
#include "exec/executor.h"

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hoff__pipe_init(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    memset(p, 0, sizeof *p);
    hoff__trace_init(&p->trace);
    hoff__schedule_init(&p->sched);
    p->sim = strcmp(ctx->be->ops->name, "sim") == 0;
    hoff__bandwidth_measure(ctx, &p->h2d_gbps, &p->d2h_gbps);
    hoff__nvme_bandwidth_measure(ctx, &p->nvme_read_gbps, &p->nvme_write_gbps);
    ctx->st.h2d_mbps = (uint64_t)(p->h2d_gbps * 1000.0 + 0.5);
    ctx->st.d2h_mbps = (uint64_t)(p->d2h_gbps * 1000.0 + 0.5);
}

void hoff__pipe_destroy(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    hoff__record_release(ctx);
    hoff__trace_destroy(&p->trace);
    hoff__schedule_destroy(&p->sched);
    free(p->map);
    memset(p, 0, sizeof *p);
}

static void set_state(struct hoff_ctx *ctx, int st) {
    ctx->pipe.state = st;
    ctx->st.plan_state = (uint64_t)st;
}

int hoff__pipe_step_begin(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    p->step++;
    p->ev = 0;
    p->nalloc = 0;
    p->next_act = 0;
    p->diverged = 0;
    p->fired = p->skipped = 0;
    p->t0_cpu = mono_ns();
    p->t0_be = ctx->be->ops->clock_ns(ctx->be);
    p->stall0_ns = ctx->st.stall_ns;
    ctx->st.step_peak_resident_bytes = ctx->res.resident;
    if (p->have_plan && !p->rerecord) {
        size_t n = p->trace.nblocks;
        if (p->map_len < n) {
            struct hoff__block **m = realloc(p->map, n * sizeof *m);
            if (!m)
                return hoff__error(-ENOMEM, "hoff_step_begin: no memory for the replay map");
            p->map = m;
            p->map_len = n;
        }
        memset(p->map, 0, p->map_len * sizeof *p->map);
        set_state(ctx, HOFF_PLAN_REPLAY);
        return 0;
    }
    /* Warmup: record this step. */
    if (p->rerecord)
        ctx->st.replans++;
    p->rerecord = 0;
    p->have_plan = 0;
    hoff__schedule_destroy(&p->sched);
    hoff__schedule_init(&p->sched);
    hoff__trace_destroy(&p->trace);
    hoff__trace_init(&p->trace);
    p->have_trace = 0;
    p->trace.budget_bytes = ctx->cfg.budget_bytes;
    p->trace.host_cap_bytes = ctx->cfg.host_cap_bytes;
    p->trace.h2d_gbps = p->h2d_gbps;
    p->trace.d2h_gbps = p->d2h_gbps;
    snprintf(p->trace.backend, sizeof p->trace.backend, "%s", ctx->be->ops->name);
    set_state(ctx, HOFF_PLAN_WARMUP);
    hoff__record_begin(ctx);
    return 0;
}

int hoff__pipe_step_end(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    switch (p->state) {
    case HOFF_PLAN_WARMUP:
        p->trace.step_ns = mono_ns() - p->t0_cpu;
        p->trace.step_gpu_ns = strcmp(ctx->be->ops->name, "sim") == 0
                                   ? ctx->be->ops->clock_ns(ctx->be) - p->t0_be -
                                         (ctx->st.stall_ns - p->stall0_ns)
                                   : HOFF__TIME_UNKNOWN; /* record_finish fills it from events */
        {
            int rc = hoff__record_finish(ctx);
            set_state(ctx, p->have_plan ? HOFF_PLAN_REPLAY : HOFF_PLAN_WARMUP);
            return rc;
        }
    case HOFF_PLAN_REPLAY:
    case HOFF_PLAN_FALLBACK:
        hoff__replay_finish(ctx);
        if (p->diverged) {
            ctx->st.divergent_steps++;
            p->divergent_run++;
            if (ctx->cfg.replan_after && p->divergent_run >= ctx->cfg.replan_after) {
                hoff__log(HOFF_LOG_INFO, "%u divergent steps in a row: recording the next step and planning again",
                          p->divergent_run);
                p->rerecord = 1;
                p->divergent_run = 0;
            }
        } else {
            p->divergent_run = 0;
        }
        set_state(ctx, HOFF_PLAN_REPLAY);
        return 0;
    default:
        return 0;
    }
}

int hoff__pipe_step_abort(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    switch (p->state) {
    case HOFF_PLAN_WARMUP:
        hoff__trace_destroy(&p->trace);
        hoff__trace_init(&p->trace);
        p->have_trace = 0;
        hoff__log(HOFF_LOG_INFO, "step %llu aborted during warmup: its recording is dropped; the next step records",
                  (unsigned long long)p->step);
        return 0;
    case HOFF_PLAN_REPLAY:
    case HOFF_PLAN_FALLBACK:
        p->diverged = 1; /* fire nothing more */
        hoff__replay_finish(ctx);
        set_state(ctx, HOFF_PLAN_REPLAY);
        hoff__log(HOFF_LOG_INFO, "step %llu aborted during replay: %llu planned actions skipped",
                  (unsigned long long)p->step, (unsigned long long)p->skipped);
        return 0;
    default:
        return 0;
    }
}

/* Frees and accesses of blocks from before this step are not its events. */
static int in_trace(const struct hoff_ctx *ctx, const struct hoff__event_info *e) {
    if (!ctx->in_step)
        return 0;
    if (e->kind == HOFF__TEV_FREE || e->kind == HOFF__TEV_ACCESS)
        return e->b && e->b->tstep == ctx->pipe.step;
    return 1;
}

void hoff__pipe_before(struct hoff_ctx *ctx, struct hoff__event_info *e) {
    struct hoff__pipeline *p = &ctx->pipe;

    if (!in_trace(ctx, e))
        return;
    if (e->stream || e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_FREE)
        p->last_stream = e->stream;
    if (p->state == HOFF_PLAN_REPLAY)
        hoff__replay_before(ctx, e);
}

void hoff__pipe_after(struct hoff_ctx *ctx, struct hoff__event_info *e) {
    struct hoff__pipeline *p = &ctx->pipe;

    if (!in_trace(ctx, e) || (e->kind == HOFF__TEV_ALLOC && !e->b))
        return;
    if (e->kind == HOFF__TEV_ALLOC && e->b) {
        e->b->tstep = p->step;
        e->b->tid = p->nalloc++;
    }
    switch (p->state) {
    case HOFF_PLAN_WARMUP:
        hoff__record_event(ctx, e);
        break;
    case HOFF_PLAN_REPLAY:
    case HOFF_PLAN_FALLBACK:
        hoff__replay_after(ctx, e);
        break;
    default:
        break;
    }
    p->ev++;
}
