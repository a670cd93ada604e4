/* pipeline.c — the life of steps: which executor runs a step (warmup or replay), planning at the end of a
 * recorded step (collected from its planning job at a later step's start), and re-recording after repeated
 * divergence.  Threading: caller holds the context lock; the planning job's thread never touches the pipeline. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "core/core.h"
#include "core/grow.h"
#include "exec/executor.h"
#include "exec/pipeline.h"

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
    p->sim = strcmp(ctx->mem.be->ops->name, "sim") == 0;
    p->cfg = &ctx->cfg;
    p->trace_path = ctx->trace_path;
    hoff__bandwidth_measure(ctx->mem.be, &ctx->cfg, &p->h2d_gbps, &p->d2h_gbps);
    hoff__nvme_bandwidth_measure(ctx->mem.be, ctx->mem.nvme, &ctx->cfg, &p->nvme_read_gbps, &p->nvme_write_gbps);
    HOFF__STAT_SET(&ctx->pipe.st, h2d_mbps, (uint64_t)(p->h2d_gbps * 1000.0 + 0.5));
    HOFF__STAT_SET(&ctx->pipe.st, d2h_mbps, (uint64_t)(p->d2h_gbps * 1000.0 + 0.5));
    hoff__pipe_policy(ctx);
}

/* The policy of ctx's pipeline and step state now, into pol. */
static void policy_of(const struct hoff_ctx *ctx, struct hoff__mem_policy *pol) {
    hoff__pipe_push_policy(&ctx->pipe, pol);
    pol->in_step = ctx->in_step;
    pol->steps = ctx->st.steps;
}

void hoff__pipe_policy(struct hoff_ctx *ctx) {
    policy_of(ctx, &ctx->mem.pol);
}

/* The plan's groups are done with: their regions go back to the pool (at
 * once, or when their last live slot is freed). */
static void groups_release(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;
    size_t i;

    if (p->rg)
        for (i = 0; i < p->sched.ngroups; i++)
            hoff__pool_region_release(&ctx->mem.pools[HOFF__POOL_MANAGED], p->rg[i].region);
    free(p->rg);
    free(p->gm);
    p->rg = NULL;
    p->gm = NULL;
    p->ngm = 0;
}

/* The runtime side of the plan's groups, on the first replayed step. */
static int groups_ready(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;
    size_t i, most = 0;

    if (p->rg || !p->sched.ngroups)
        return 0;
    for (i = 0; i < p->sched.ngroups; i++)
        most = p->sched.groups[i].n > most ? p->sched.groups[i].n : most;
    p->rg = calloc(p->sched.ngroups, sizeof *p->rg);
    p->gm = malloc(most * sizeof *p->gm);
    if (!p->rg || !p->gm) {
        free(p->rg);
        free(p->gm);
        p->rg = NULL;
        p->gm = NULL;
        return -ENOMEM;
    }
    p->ngm = most;
    return 0;
}

struct hoff__block *hoff__pipe_alloc(struct hoff_ctx *ctx, const struct hoff__event_info *e, int cls) {
    struct hoff__pipeline *p = &ctx->pipe;
    const struct hoff__schedule *sc = &p->sched;
    struct hoff__pool *mp = &ctx->mem.pools[HOFF__POOL_MANAGED];
    const struct hoff__group *g;
    struct hoff__rgroup *rg;
    struct hoff__block *b;
    uint32_t id = p->nalloc, gi, k;
    int err;

    if (p->state != HOFF_PLAN_REPLAY || p->diverged || !ctx->in_step || ctx->region_depth || !p->rg ||
        e->pool != HOFF__POOL_MANAGED || id >= sc->nblocks_grouped || !(gi = sc->block_group[id]))
        return NULL;
    g = &sc->groups[gi - 1];
    rg = &p->rg[gi - 1];
    if (rg->refused)
        return NULL;
    if (!rg->region) {
        uint64_t *off = malloc(2 * (size_t)g->n * sizeof *off);

        err = -ENOMEM;
        if (off) {
            for (k = 0; k < g->n; k++) {
                off[k] = sc->gmember[g->first + k].off;
                off[g->n + k] = sc->gmember[g->first + k].bytes;
            }
            err = hoff__pool_region_map(mp, g->bytes, g->n, off, off + g->n, &rg->region);
            if (err == -ENOMEM || err == -EOVERFLOW) {
                hoff__pool_trim(mp); /* cached blocks known free: once, then again */
                err = hoff__pool_region_map(mp, g->bytes, g->n, off, off + g->n, &rg->region);
            }
            free(off);
        }
        if (err) {
            rg->refused = 1;
            HOFF__LOG_ONCE(HOFF_LOG_WARN,
                           "cannot map the region of a group (%llu bytes: %s); its blocks are "
                           "allocated and moved one by one (further refusals are not logged)",
                           (unsigned long long)g->bytes, hoff_strerror(err));
            return NULL;
        }
    }
    k = sc->block_member[id] - g->first;
    b = hoff__pool_region_get(mp, rg->region, k, cls, e->stream, &err);
    if (!b && err == -EBUSY) {
        /* Freed in the last step while its transfer (typically the release
         * after its last use) was in flight: that lands first. */
        struct hoff__block *old = hoff__pool_region_slot(rg->region, k);

        if (old && (old->flags & HOFF__BLK_FREED)) {
            hoff__res_settle(&ctx->mem, old);
            b = hoff__pool_region_get(mp, rg->region, k, cls, e->stream, &err);
        }
    }
    return b; /* NULL: the slot is busy (a block of a diverged step still holds it) or not fenced yet */
}

void hoff__pipe_destroy(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    if (p->job) { /* its trace is about to go: stop it first */
        hoff__planjob_cancel(p->job);
        p->job = NULL;
        HOFF__STAT_ADD(&ctx->pipe.st, plans_dropped, 1);
    }
    groups_release(ctx);
    hoff__record_release(p, &ctx->mem);
    hoff__trace_destroy(&p->trace);
    hoff__schedule_destroy(&p->sched);
    free(p->map);
    memset(p, 0, sizeof *p);
    hoff__pipe_policy(ctx);
}

/* A step begins while a planning job runs: take its plan if it is ready
 * (never waiting for it).  A plan made for a budget, host cap or planner that
 * has changed since is dropped, and this step records again. */
static void job_poll(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;
    const struct hoff__planner *pl;
    struct hoff__plan_opts o;
    struct hoff__plan_result r;

    if (!p->job || !hoff__planjob_done(p->job))
        return;
    pl = hoff__planjob_planner(p->job);
    o = *hoff__planjob_opts(p->job);
    o.stop = NULL;
    hoff__planjob_collect(p->job, &r);
    p->job = NULL;
    HOFF__STAT_SET(&ctx->pipe.st, plan_pending, 0);
    HOFF__STAT_SET(&ctx->pipe.st, plan_lag_steps, p->lag);
    HOFF__STAT_SET(&ctx->pipe.st, plan_lag_ns, r.done_ns > p->t_job ? r.done_ns - p->t_job : 0);
    if (hoff__record_stale(p, pl, &o)) {
        hoff__log(HOFF_LOG_INFO, "the plan made in the background was for another budget, host cap or planner "
                                 "than the context has now: dropped, and this step records again");
        if (r.save_err[0])
            hoff__log(HOFF_LOG_WARN, "cannot write the trace to HOFF_TRACE=%s: %s", ctx->trace_path, r.save_err);
        hoff__schedule_destroy(&r.sched);
        HOFF__STAT_ADD(&ctx->pipe.st, plans_dropped, 1);
        p->rerecord = 1;
        return;
    }
    hoff__record_adopt(p, &ctx->mem, pl, &o, &r);
}

int hoff__pipe_step_begin(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    p->step++;
    p->ev = 0;
    p->nalloc = 0;
    p->next_act = 0;
    p->diverged = 0;
    p->fired = p->skipped = 0;
    hoff__pipe_policy(ctx);
    p->t0_cpu = mono_ns();
    p->t0_be = ctx->mem.be->ops->clock_ns(ctx->mem.be);
    p->stall0_ns = ctx->mem.st.stall_ns;
    HOFF__STAT_SET(&ctx->mem.st, step_peak_resident_bytes, ctx->mem.res.resident);
    p->online = 0;
    job_poll(ctx);
    if (p->job) {
        /* Still planning: this step keeps the budget online, as the warmup
         * does, and is neither recorded nor replayed. */
        p->online = 1;
        p->lag++;
        HOFF__STAT_ADD(&ctx->pipe.st, plan_online_steps, 1);
        hoff__pipe_set_state(p, &ctx->mem.pol, HOFF_PLAN_WARMUP);
        return 0;
    }
    if (p->have_plan && !p->rerecord) {
        size_t n = p->trace.nblocks;
        if (HOFF__GROW(p->map, p->map_len, n) != 0)
            return hoff__error(-ENOMEM, "hoff_step_begin: no memory for the replay map");
        if (p->map) /* NULL for a recorded step without blocks: memset(NULL, 0, 0) is undefined */
            memset(p->map, 0, p->map_len * sizeof *p->map);
        if (groups_ready(ctx) != 0)
            hoff__log(HOFF_LOG_WARN, "no memory for the plan's groups: their blocks move one by one this step");
        hoff__pipe_set_state(p, &ctx->mem.pol, HOFF_PLAN_REPLAY);
        return 0;
    }
    /* Warmup: record this step. */
    if (p->rerecord)
        HOFF__STAT_ADD(&ctx->pipe.st, replans, 1);
    p->rerecord = 0;
    p->have_plan = 0;
    groups_release(ctx);
    hoff__schedule_destroy(&p->sched);
    hoff__schedule_init(&p->sched);
    hoff__trace_destroy(&p->trace);
    hoff__trace_init(&p->trace);
    p->have_trace = 0;
    hoff__pipe_policy(ctx);
    p->trace.budget_bytes = ctx->cfg.budget_bytes;
    p->trace.host_cap_bytes = ctx->cfg.host_cap_bytes;
    p->trace.h2d_gbps = p->h2d_gbps;
    p->trace.d2h_gbps = p->d2h_gbps;
    snprintf(p->trace.backend, sizeof p->trace.backend, "%s", ctx->mem.be->ops->name);
    hoff__pipe_set_state(p, &ctx->mem.pol, HOFF_PLAN_WARMUP);
    hoff__record_begin(p, &ctx->mem);
    return 0;
}

int hoff__pipe_step_end(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    switch (p->state) {
    case HOFF_PLAN_WARMUP:
        if (p->online)
            return 0;
        p->trace.step_ns = mono_ns() - p->t0_cpu;
        p->trace.step_gpu_ns =
            strcmp(ctx->mem.be->ops->name, "sim") == 0
                ? ctx->mem.be->ops->clock_ns(ctx->mem.be) - p->t0_be - (ctx->mem.st.stall_ns - p->stall0_ns)
                : HOFF__TIME_UNKNOWN; /* record_finish fills it from events */
        {
            int rc = hoff__record_finish(p, &ctx->mem);
            hoff__pipe_set_state(p, &ctx->mem.pol, p->have_plan ? HOFF_PLAN_REPLAY : HOFF_PLAN_WARMUP);
            return rc;
        }
    case HOFF_PLAN_REPLAY:
    case HOFF_PLAN_FALLBACK:
        hoff__replay_finish(p, &ctx->mem);
        if (p->diverged) {
            HOFF__STAT_ADD(&ctx->pipe.st, divergent_steps, 1);
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
        hoff__pipe_set_state(p, &ctx->mem.pol, HOFF_PLAN_REPLAY);
        return 0;
    default: return 0;
    }
}

int hoff__pipe_step_abort(struct hoff_ctx *ctx) {
    struct hoff__pipeline *p = &ctx->pipe;

    switch (p->state) {
    case HOFF_PLAN_WARMUP:
        if (p->online)
            return 0; /* nothing recorded: the planning job keeps its trace */
        hoff__trace_destroy(&p->trace);
        hoff__trace_init(&p->trace);
        p->have_trace = 0;
        hoff__log(HOFF_LOG_INFO, "step %llu aborted during warmup: its recording is dropped; the next step records",
                  (unsigned long long)p->step);
        return 0;
    case HOFF_PLAN_REPLAY:
    case HOFF_PLAN_FALLBACK:
        p->diverged = 1; /* fire nothing more */
        hoff__pipe_policy(ctx);
        hoff__replay_finish(p, &ctx->mem);
        hoff__pipe_set_state(p, &ctx->mem.pol, HOFF_PLAN_REPLAY);
        hoff__log(HOFF_LOG_INFO, "step %llu aborted during replay: %llu planned actions skipped",
                  (unsigned long long)p->step, (unsigned long long)p->skipped);
        return 0;
    default: return 0;
    }
}

/* Frees and accesses of blocks from before this step are not its events. */
void hoff__pipe_replan(struct hoff__pipeline *p) {
    if (p->have_plan)
        p->rerecord = 1;
}

int hoff__pipe_copy_plan(const struct hoff__pipeline *p, struct hoff__schedule *s, struct hoff__trace *t) {
    int rc;

    hoff__schedule_init(s);
    hoff__trace_init(t);
    if (!p->have_plan || !p->have_trace)
        return -ENOENT;
    rc = hoff__schedule_copy(s, &p->sched);
    if (rc == 0 && (rc = hoff__trace_copy(t, &p->trace)) != 0) {
        hoff__schedule_destroy(s);
        hoff__trace_destroy(t);
        hoff__trace_init(t);
    }
    return rc;
}

static int in_trace(const struct hoff_ctx *ctx, const struct hoff__event_info *e) {
    if (!ctx->in_step)
        return 0;
    if (e->kind == HOFF__TEV_FREE || e->kind == HOFF__TEV_ACCESS)
        return e->b && e->b->tstep == ctx->pipe.step;
    return 1;
}

int hoff__pipe_kept_next(const struct hoff_ctx *ctx, uint64_t size) {
    const struct hoff__pipeline *p = &ctx->pipe;
    const struct hoff__tev *t;

    if (!ctx->in_step || p->state != HOFF_PLAN_REPLAY || p->diverged || p->ev >= p->trace.nev)
        return 0;
    t = &p->trace.ev[p->ev];
    return t->kind == HOFF__TEV_ALLOC && (t->flags & HOFF__TEV_KEPT) != 0 && t->size == (size ? size : 1);
}

#ifdef HOFF_DEBUG
/* The policy the memory layer acts on is the pipeline's and the context's state now: a change of either without
 * its push (hoff__pipe_policy) would have the memory layer make room for an old step. */
static void check_policy(const struct hoff_ctx *ctx) {
    const struct hoff__mem_policy *pol = &ctx->mem.pol;
    struct hoff__mem_policy want;

    policy_of(ctx, &want);
    if (want.in_step != pol->in_step || want.warmup != pol->warmup || want.replaying != pol->replaying ||
        want.floor_bytes != pol->floor_bytes || want.step != pol->step || want.steps != pol->steps) {
        hoff__log(HOFF_LOG_ERROR, "the memory layer's policy is stale (a pipeline change was not pushed)");
        abort();
    }
}
#else
#define check_policy(ctx) ((void)0)
#endif

void hoff__pipe_before(struct hoff_ctx *ctx, struct hoff__event_info *e) {
    struct hoff__pipeline *p = &ctx->pipe;

    check_policy(ctx);
    if (!in_trace(ctx, e))
        return;
    if (e->stream || e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_FREE)
        p->last_stream = e->stream;
    if (p->state == HOFF_PLAN_REPLAY)
        hoff__replay_before(p, &ctx->mem, e);
}

void hoff__pipe_after(struct hoff_ctx *ctx, struct hoff__event_info *e) {
    struct hoff__pipeline *p = &ctx->pipe;

    check_policy(ctx);
    if (!in_trace(ctx, e) || (e->kind == HOFF__TEV_ALLOC && !e->b))
        return;
    if (e->kind == HOFF__TEV_ALLOC && e->b) {
        e->b->tstep = p->step;
        e->b->tid = p->nalloc++;
    }
    switch (p->state) {
    case HOFF_PLAN_WARMUP:
        if (!p->online) {
            e->phase = ctx->phase;
            hoff__record_event(p, &ctx->mem, e);
        }
        break;
    case HOFF_PLAN_REPLAY:
    case HOFF_PLAN_FALLBACK: hoff__replay_after(p, &ctx->mem, e); break;
    default: break;
    }
    p->ev++;
}
