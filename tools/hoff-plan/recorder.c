/* recorder.c — the replay recorder of hoff-plan timeline and export: a replay on sim with the backend's
 * transfer functions wrapped to log every copy, fault and wait, and the statistics sampled after every event.
 * Threading: the driving thread samples; the sim's observer (hoff__sim_observe) adds spans from the driving and the
 * issuing threads, under the recorder's lock. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/grow.h"
#include "hoff-plan.h"
#include "mem/pool.h"

static void span_add(struct recorder *r, int kind, uint64_t t0, uint64_t t1, uint64_t bytes) {
    pthread_mutex_lock(&r->lock);
    if (HOFF__GROW(r->sp, r->cap_sp, r->nsp + 1)) {
        r->oom = 1;
        pthread_mutex_unlock(&r->lock);
        return;
    }
    r->sp[r->nsp++] = (struct rec_span){.t0 = t0, .t1 = t1, .bytes = bytes, .kind = kind, .step = r->step};
    pthread_mutex_unlock(&r->lock);
}

/* The sim's report of a copy, page-in or wait (hoff__sim_observe; under the
 * sim's lock, from the driving or the issuing thread): one span.  A discard
 * moves nothing and a prefetch of released pages copies nothing: no span. */
static void rec_observe(void *arg, const struct hoff__xfer_obs *x) {
    struct recorder *r = arg;

    switch (x->kind) {
    case HOFF__XF_EVICT: span_add(r, REC_D2H, x->start, x->end, x->bytes); break;
    case HOFF__XF_PREFETCH:
        if (x->bytes)
            span_add(r, REC_H2D, x->start, x->end, x->bytes);
        break;
    case HOFF__XF_FAULT: span_add(r, REC_FAULT, x->start, x->end, x->bytes); break;
    case HOFF__XF_WAIT: span_add(r, REC_WAIT, x->start, x->end, 0); break;
    case HOFF__XF_SPILL: span_add(r, REC_NVME_W, x->start, x->end, x->bytes); break;
    case HOFF__XF_RESTORE: span_add(r, REC_NVME_R, x->start, x->end, x->bytes); break;
    default: break;
    }
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
    s->t = r->ctx->mem.be->ops->clock_ns(r->ctx->mem.be);
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

/* Keep the plan the context replayed and the trace it was planned on. */
static void keep_plan(struct pic *p, hoff_ctx *ctx, const char *sub) {
    int rc;

    hoff_stats_get(ctx, &p->last);
    pthread_mutex_lock(&ctx->lock);
    hoff__trace_destroy(&p->planned);
    rc = hoff__pipe_copy_plan(&ctx->pipe, &p->sched, &p->planned);
    p->have_plan = rc == 0;
    if (rc && rc != -ENOENT)
        fprintf(stderr, "%s %s: cannot copy the plan: %s\n", hp_cmd, sub, hoff_strerror(rc));
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
    if ((rc = hp_sim_size(sub, &p->ht.t, p->ht.budget, p->ht.offload_peak,
                          (uint64_t)p->a.steps * (p->ht.t.nev + 2) * sizeof(struct rec_sample), p->a.no_mem_check,
                          &z)) != 0)
        return rc; /* EXIT_MEMORY or EXIT_USAGE */
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
    if ((rc = hoff__sim_observe(ctx->mem.be, rec_observe, r)) != 0) {
        hoff_shutdown(ctx);
        fprintf(stderr, "%s %s: cannot observe the sim: %s\n", hp_cmd, sub, hoff_strerror(rc));
        return -1;
    }

    hp_drive_opts(&p->a, &o);
    o.steps = r->steps;
    o.verify = 1;
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
    hoff__sim_observe(ctx->mem.be, NULL, NULL); /* shutdown's own waits are not the replay's */
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
    if ((rc = run(p)) != 0) {
        pic_free(p);
        return rc == EXIT_MEMORY || rc == EXIT_USAGE ? rc : EXIT_FAIL;
    }
    return 0;
}
