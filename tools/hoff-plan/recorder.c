/* recorder.c — the replay recorder of hoff-plan timeline and export: a replay on sim with the backend's
 * transfer functions wrapped to log every copy, fault and wait, and the statistics sampled after every event.
 * Threading: the driving thread samples; the library's issuing thread adds spans, under the recorder's lock.
 * The wrapped backend functions find the recorder through one global (g_rec): one replay at a time. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "hoff-plan.h"
#include "mem/pool.h"

static struct recorder *g_rec; /* the backend ops have no argument of their own */

static void span_add(struct recorder *r, int kind, uint64_t t0, uint64_t t1, uint64_t bytes) {
    pthread_mutex_lock(&r->lock);
    if (r->nsp == r->cap_sp) {
        size_t cap = r->cap_sp ? r->cap_sp * 2 : 1024;
        struct rec_span *n = realloc(r->sp, cap * sizeof *n);

        if (!n) {
            r->oom = 1;
            pthread_mutex_unlock(&r->lock);
            return;
        }
        r->sp = n;
        r->cap_sp = cap;
    }
    r->sp[r->nsp++] = (struct rec_span){.t0 = t0, .t1 = t1, .bytes = bytes, .kind = kind, .step = r->step};
    pthread_mutex_unlock(&r->lock);
}

/* A copy that ended at `until` on an engine after taking dur. */
static void copy_span(int kind, uint64_t until, uint64_t dur, uint64_t bytes) {
    span_add(g_rec, kind, until > dur ? until - dur : 0, until, bytes);
}

static int rec_evict(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct hoff__sim_counters c;
    int rc = g_rec->orig->evict(be, p, size, after, done);

    if (rc == 0 && hoff__sim_counters(be, &c) == 0)
        copy_span(REC_D2H, c.d2h_busy_until, g_rec->latency_ns + hoff__copy_ns(size, g_rec->d2h_gbps), size);
    return rc;
}

static int rec_evict_node(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after,
                          hoff__event *done) {
    struct hoff__sim_counters c;
    int rc = g_rec->orig->evict_node(be, p, size, node, after, done);

    if (rc == 0 && hoff__sim_counters(be, &c) == 0)
        copy_span(REC_D2H, c.d2h_busy_until, g_rec->latency_ns + hoff__copy_ns(size, g_rec->d2h_gbps), size);
    return rc;
}

/* The simulated NVMe device: one queue for writes (spills) and reads (restores). */
static int rec_nvme_model(struct hoff__backend *be, uint64_t bytes, int write, hoff__event *after,
                          hoff__event *done) {
    struct hoff__sim_counters c;
    int rc = g_rec->orig->nvme_model(be, bytes, write, after, done);
    uint64_t dur = g_rec->latency_ns + hoff__copy_ns(bytes, write ? g_rec->nvme_w_gbps : g_rec->nvme_r_gbps);

    if (rc == 0 && hoff__sim_counters(be, &c) == 0)
        copy_span(write ? REC_NVME_W : REC_NVME_R, c.nvme_busy_until, dur, bytes);
    return rc;
}

static int rec_prefetch(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct hoff__sim_counters c0, c;
    int rc, have0 = hoff__sim_counters(be, &c0) == 0;

    rc = g_rec->orig->prefetch(be, p, size, after, done);
    /* A prefetch of a released block moves nothing: not a copy. */
    if (rc == 0 && have0 && hoff__sim_counters(be, &c) == 0 && c.bytes_h2d > c0.bytes_h2d)
        copy_span(REC_H2D, c.h2d_busy_until, g_rec->latency_ns + hoff__copy_ns(size, g_rec->h2d_gbps), size);
    return rc;
}

static int rec_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream s, uint64_t *stall_ns) {
    uint64_t t0 = g_rec->orig->clock_ns(be), stall = 0;
    int rc = g_rec->orig->fault(be, p, size, s, &stall);

    if (stall_ns)
        *stall_ns = stall;
    if (rc == 0 && stall)
        span_add(g_rec, REC_FAULT, t0, t0 + stall, size);
    return rc;
}

static int rec_event_sync(struct hoff__backend *be, hoff__event *ev) {
    uint64_t t0 = g_rec->orig->clock_ns(be), t1;
    int rc = g_rec->orig->event_sync(be, ev);

    t1 = g_rec->orig->clock_ns(be);
    if (t1 > t0)
        span_add(g_rec, REC_WAIT, t0, t1, 0);
    return rc;
}

static int rec_stream_wait(struct hoff__backend *be, hoff_stream s, hoff__event *ev) {
    uint64_t t0 = g_rec->orig->clock_ns(be), t1;
    int rc = g_rec->orig->stream_wait(be, s, ev);

    t1 = g_rec->orig->clock_ns(be);
    if (t1 > t0)
        span_add(g_rec, REC_WAIT, t0, t1, 0);
    return rc;
}

/* The driver's callback: the counters as they are (no poll: sampling must not
 * change what the replay does) and the virtual clock. */
static void rec_on_event(void *arg, int step, size_t ev) {
    struct recorder *r = arg;
    size_t i = ev == SIZE_MAX ? 0 : ev + 1;
    struct rec_sample *s;

    /* The issuing thread reads step in span_add, under the same lock. */
    pthread_mutex_lock(&r->lock);
    r->step = step;
    pthread_mutex_unlock(&r->lock);
    if (step < 0 || step >= r->steps || i >= r->per_step)
        return;
    s = &r->s[(size_t)step * r->per_step + i];
    pthread_mutex_lock(&r->ctx->lock);
    hoff__stats_snapshot(r->ctx, &s->st);
    pthread_mutex_unlock(&r->ctx->lock);
    s->t = r->ctx->be->ops->clock_ns(r->ctx->be);
    r->have[(size_t)step * r->per_step + i] = 1;
}

struct rec_sample *rec_at(const struct recorder *r, int step, size_t i) {
    return r->have[(size_t)step * r->per_step + i] ? &r->s[(size_t)step * r->per_step + i] : NULL;
}

void pic_free(struct pic *p) {
    free(p->rec.s);
    free(p->rec.have);
    free(p->rec.sp);
    pthread_mutex_destroy(&p->rec.lock);
    hoff__schedule_destroy(&p->sched);
    hoff__trace_destroy(&p->planned);
    hoff__trace_destroy(&p->ht.t);
}

/* Put the recorder between ctx and its sim backend. */
static void wrap(struct recorder *r, hoff_ctx *ctx) {
    r->orig = ctx->be->ops;
    r->ops = *r->orig;
    r->ops.evict = rec_evict;
    r->ops.prefetch = rec_prefetch;
    r->ops.fault = rec_fault;
    r->ops.event_sync = rec_event_sync;
    r->ops.stream_wait = rec_stream_wait;
    if (r->orig->evict_node)
        r->ops.evict_node = rec_evict_node;
    if (r->orig->nvme_model)
        r->ops.nvme_model = rec_nvme_model;
    r->nvme_w_gbps = ctx->cfg.sim_nvme_write_gbps;
    r->nvme_r_gbps = ctx->cfg.sim_nvme_read_gbps;
    r->latency_ns = ctx->cfg.sim_latency_ns;
    g_rec = r;
    ctx->be->ops = &r->ops;
}

/* Keep the plan the context replayed and the trace it was planned on. */
static void keep_plan(struct pic *p, hoff_ctx *ctx, const char *sub) {
    int rc;

    hoff_stats_get(ctx, &p->last);
    pthread_mutex_lock(&ctx->lock);
    hoff__schedule_init(&p->sched);
    if (ctx->pipe.have_plan && ctx->pipe.have_trace) {
        rc = hoff__schedule_copy(&p->sched, &ctx->pipe.sched);
        if (rc == 0) {
            hoff__trace_destroy(&p->planned);
            rc = hoff__trace_copy(&p->planned, &ctx->pipe.trace);
        }
        p->have_plan = rc == 0;
        if (rc)
            fprintf(stderr, "%s %s: cannot copy the plan: %s\n", hp_cmd, sub, hoff_strerror(rc));
    }
    snprintf(p->planner, sizeof p->planner, "%s", ctx->cfg.planner);
    pthread_mutex_unlock(&ctx->lock);
}

/* Drive the trace on sim with the recorder in place; keep the plan.  0 or -1 (reported). */
static int run(struct pic *p) {
    struct hoff__drive_opts o;
    struct hoff__drive_result res;
    struct recorder *r = &p->rec;
    struct sim_size z;
    hoff_ctx *ctx = NULL;
    const char *sub = p->a.sub;
    int rc;

    /* The recorder's samples: every event of every step. */
    if (hp_sim_size(sub, &p->ht.t, p->ht.budget, p->ht.offload_peak,
                    (uint64_t)p->a.steps * (p->ht.t.nev + 2) * sizeof(struct rec_sample), p->a.no_mem_check, &z))
        return -1;
    if (hp_make_ctx(&p->a, p->ht.budget, z.device_bytes, &ctx))
        return -1;
    r->ctx = ctx;
    r->t = &p->ht.t;
    r->steps = (int)p->a.steps;
    r->per_step = p->ht.t.nev + 2;
    r->s = calloc((size_t)r->steps * r->per_step, sizeof *r->s);
    r->have = calloc((size_t)r->steps * r->per_step, 1);
    if (!r->s || !r->have) {
        hoff_shutdown(ctx);
        fprintf(stderr, "%s %s: out of memory\n", hp_cmd, sub);
        return -1;
    }
    r->h2d_gbps = p->a.bandwidth;
    r->d2h_gbps = p->a.bandwidth;
    wrap(r, ctx);

    memset(&o, 0, sizeof o);
    o.steps = r->steps;
    o.verify = 1;
    o.compute_scale = p->a.compute_scale;
    o.gpu_step_ns = hp_gpu_step_ns(p->a.gpu_step_ms);
    o.on_event = rec_on_event;
    o.on_event_arg = r;
    rc = hoff__trace_drive(ctx, &p->ht.t, &o, &res);
    if (rc == 0 && res.integrity_errors)
        fprintf(stderr, "%s %s: warning: integrity: %s\n", hp_cmd, sub, res.first_error);
    hoff__drive_result_free(&res);
    if (rc)
        fprintf(stderr, "%s %s: %s: %s\n", hp_cmd, sub, p->a.trace_path, hoff_last_error());
    else
        keep_plan(p, ctx, sub);
    ctx->be->ops = r->orig;
    g_rec = NULL;
    hoff_shutdown(ctx);
    if (r->oom) {
        fprintf(stderr, "%s %s: out of memory recording the replay\n", hp_cmd, sub);
        return -1;
    }
    return rc ? -1 : 0;
}

int pic_setup(struct pic *p, const char *sub, int argc, char **argv, uint64_t extra, uint64_t required,
              const char *missing, void (*usage_fn)(FILE *)) {
    int rc;

    memset(p, 0, sizeof *p);
    if ((rc = hp_parse(sub, argc, argv, HP_SIM_FLAGS | extra, usage_fn, &p->a)) != 0)
        return rc;
    if ((rc = hp_trace_operand(&p->a, argc, argv, 1, 1)) != 0)
        return rc;
    if (!(p->a.given & required))
        return hp_usage_error(sub, "%s", missing);
    if ((rc = hp_trace_load(&p->a, 1, &p->ht)) != 0)
        return rc;
    pthread_mutex_init(&p->rec.lock, NULL);
    hoff__schedule_init(&p->sched);
    hoff__trace_init(&p->planned);
    if (run(p)) {
        pic_free(p);
        return EXIT_FAIL;
    }
    return 0;
}
