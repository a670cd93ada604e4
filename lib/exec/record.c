/* record.c — the warmup executor: records every event of a step into the trace (the budget meanwhile is kept
 * online by residency, earliest-allocated first), and at the step's end hands the trace to the planner.
 * Threading: caller holds the context lock. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/grow.h"
#include "exec/executor.h"

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int is_sim(const struct hoff__pipeline *p) {
    return p->sim;
}

/* A real device's timeline: a timed event recorded on the stream of each
 * event; resolved into t_gpu_ns once the step is over. */
void hoff__record_begin(struct hoff__pipeline *p, struct hoff__mem *mem) {
    struct hoff__backend *be = mem->be;

    p->ntev = 0;
    if (is_sim(p) || !be->ops->event_create_timed)
        return;
    if (!p->tev0 && be->ops->event_create_timed(be, &p->tev0) != 0)
        p->tev0 = NULL;
    if (p->tev0 && be->ops->event_record(be, p->tev0, NULL) != 0) {
        be->ops->event_destroy(be, p->tev0);
        p->tev0 = NULL;
    }
}

static void record_timed(struct hoff__pipeline *p, struct hoff__mem *mem, hoff_stream s) {
    struct hoff__backend *be = mem->be;

    if (!p->tev0)
        return;
    if (p->ntev == p->cap_tev) {
        size_t old = p->cap_tev;

        if (HOFF__GROW(p->tev, p->cap_tev, p->ntev + 1) != 0)
            goto off;
        memset(p->tev + old, 0, (p->cap_tev - old) * sizeof *p->tev); /* events are made on first use */
    }
    if (!p->tev[p->ntev] && be->ops->event_create_timed(be, &p->tev[p->ntev]) != 0)
        goto off;
    if (be->ops->event_record(be, p->tev[p->ntev], s) != 0)
        goto off;
    p->ntev++;
    return;
off: /* no estimate for this step: the times stay unknown */
    HOFF__LOG_ONCE(HOFF_LOG_INFO, "cannot record device-timeline events; the trace keeps host times only");
    be->ops->event_destroy(be, p->tev0);
    p->tev0 = NULL;
}

/* Fill t_gpu_ns of every event from the timed events. */
static void resolve_timed(struct hoff__pipeline *p, struct hoff__mem *mem) {
    struct hoff__backend *be = mem->be;
    size_t i;
    uint64_t ns;

    if (!p->tev0 || p->ntev != p->trace.nev) {
        for (i = 0; i < p->trace.nev; i++)
            p->trace.ev[i].t_gpu_ns = HOFF__TIME_UNKNOWN;
        return;
    }
    if (p->ntev && be->ops->sync(be) != 0)
        return;
    for (i = 0; i < p->ntev; i++)
        p->trace.ev[i].t_gpu_ns = be->ops->event_elapsed_ns(be, p->tev0, p->tev[i], &ns) == 0 ? ns : HOFF__TIME_UNKNOWN;
    if (p->ntev && p->trace.ev[p->ntev - 1].t_gpu_ns != HOFF__TIME_UNKNOWN)
        p->trace.step_gpu_ns = p->trace.ev[p->ntev - 1].t_gpu_ns;
}

void hoff__record_release(struct hoff__pipeline *p, struct hoff__mem *mem) {
    size_t i;

    for (i = 0; i < p->cap_tev; i++)
        if (p->tev[i])
            mem->be->ops->event_destroy(mem->be, p->tev[i]);
    free(p->tev);
    if (p->tev0)
        mem->be->ops->event_destroy(mem->be, p->tev0);
    p->tev = NULL;
    p->tev0 = NULL;
    p->ntev = p->cap_tev = 0;
}

void hoff__record_event(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__event_info *e) {
    struct hoff__tev ev;
    int rc;

    if (p->diverged)
        return; /* recording already failed this step */
    memset(&ev, 0, sizeof ev);
    ev.kind = (uint8_t)e->kind;
    ev.block = UINT32_MAX;
    ev.name = UINT32_MAX;
    ev.stream = (uint64_t)(uintptr_t)e->stream;
    ev.t_cpu_ns = mono_ns() - p->t0_cpu;
    /* On sim the virtual clock is the device's timeline, less the stall of
     * the recorded step (the warmup's on-demand evictions and faults are not
     * compute: planners time their copies against compute); on a real device
     * a timed event on the stream, resolved at the step's end. */
    if (is_sim(p)) {
        uint64_t now = mem->be->ops->clock_ns(mem->be) - p->t0_be, st = mem->st.stall_ns - p->stall0_ns;

        ev.t_gpu_ns = now > st ? now - st : 0;
    } else {
        ev.t_gpu_ns = HOFF__TIME_UNKNOWN;
        record_timed(p, mem, e->stream ? e->stream : p->last_stream);
    }
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        ev.block = e->b->tid;
        ev.size = e->size ? e->size : 1;
        ev.pool = (uint8_t)e->pool;
        ev.flags = e->pinned ? HOFF__TEV_PINNED : 0;
        break;
    case HOFF__TEV_FREE: ev.block = e->b->tid; break;
    case HOFF__TEV_ACCESS:
        ev.block = e->b->tid;
        ev.flags = e->write ? HOFF__TEV_WRITE : 0;
        break;
    case HOFF__TEV_OP:
        if (e->name && *e->name)
            ev.name = hoff__trace_name(&p->trace, e->name);
        ev.flags = (uint8_t)((unsigned)e->phase << HOFF__TEV_PHASE_SHIFT);
        break;
    default: break;
    }
    rc = hoff__trace_append(&p->trace, &ev);
    if (rc) {
        /* Nothing is lost: the step runs on; it is just not planned. */
        hoff__log(HOFF_LOG_WARN, "recording the step failed (%s: %s); this step will not be planned", hoff_strerror(rc),
                  hoff_last_error());
        p->diverged = 1;
        hoff__pipe_push_policy(p, &mem->pol);
    }
}

void hoff__record_plan_opts(const struct hoff__pipeline *p, struct hoff__plan_opts *o) {
    memset(o, 0, sizeof *o);
    o->budget_bytes = p->cfg->budget_bytes;
    o->host_cap_bytes = p->cfg->host_cap_bytes;
    o->guard_after_alloc = p->cfg->guard_after_alloc;
    o->guard_before_free = p->cfg->guard_before_free;
    o->h2d_gbps = p->h2d_gbps;
    o->d2h_gbps = p->d2h_gbps;
    o->block_bytes = hoff__pool_block_bytes; /* plan in the bytes the budget counts */
    o->nvme = p->cfg->spill_dir[0] != 0;
    o->nvme_read_gbps = p->nvme_read_gbps;
    o->nvme_write_gbps = p->nvme_write_gbps;
    if (is_sim(p)) { /* the sim's costs are known exactly; on a GPU predict.c's defaults stand */
        o->latency_ns = p->cfg->sim_latency_ns;
        o->call_ns = p->cfg->sim_call_ns;
        o->fault_ns = p->cfg->sim_fault_ns;
        o->fault_gbps = p->cfg->sim_fault_gbps;
    }
    o->groups = p->cfg->groups;
}

int hoff__record_finish(struct hoff__pipeline *p, struct hoff__mem *mem) {
    const struct hoff__planner *pl;
    struct hoff__plan_result r;
    struct hoff__plan_opts o;
    uint64_t t0;
    int rc;

    if (p->diverged) {
        p->rerecord = 1;
        return 0;
    }
    if (!is_sim(p))
        resolve_timed(p, mem);
    rc = hoff__trace_finish(&p->trace);
    if (rc) {
        hoff__log(HOFF_LOG_WARN, "the recorded step is inconsistent (%s); recording again next step",
                  hoff_last_error());
        p->rerecord = 1;
        return 0;
    }
    p->have_trace = 1;
    /* What the step's activations need with no offload: kept blocks (gradients) are not counted, though
     * the warmup counted them until it learnt what they were. */
    HOFF__STAT_SET(&p->st, recorded_peak_bytes, hoff__trace_offload_peak(&p->trace, hoff__pool_block_bytes, NULL));
    pl = hoff__planner_find(p->cfg->planner);
    if (!pl) /* validated at init; a planner removed since cannot happen */
        return hoff__error(-EINVAL, "unknown planner '%s'", p->cfg->planner);
    hoff__record_plan_opts(p, &o);
    hoff__schedule_destroy(&p->sched);
    hoff__schedule_init(&p->sched);
    if (p->cfg->plan_thread) {
        p->t_job = mono_ns(); /* before the thread can start planning */
        rc = hoff__planjob_start(&p->job, pl, &p->trace, &o, p->cfg->plan_time_ns, p->trace_path);
        if (rc == 0) {
            p->lag = 0;
            HOFF__STAT_SET(&p->st, plan_pending, 1);
            return 0;
        }
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "%s; planning on the training thread instead", hoff_last_error());
    }
    /* Inline: the training thread waits for the planner. */
    t0 = mono_ns();
    hoff__plan_make(pl, &p->trace, &o, p->cfg->plan_time_ns, p->trace_path, &r);
    HOFF__STAT_ADD(&p->st, plan_wait_ns, mono_ns() - t0);
    HOFF__STAT_SET(&p->st, plan_lag_steps, 0);
    HOFF__STAT_SET(&p->st, plan_lag_ns, mono_ns() - t0);
    hoff__record_adopt(p, mem, pl, &o, &r);
    return 0;
}

int hoff__record_stale(const struct hoff__pipeline *p, const struct hoff__planner *pl,
                       const struct hoff__plan_opts *o) {
    return o->budget_bytes != p->cfg->budget_bytes || o->host_cap_bytes != p->cfg->host_cap_bytes ||
           strcmp(pl->name, p->cfg->planner) != 0;
}

void hoff__record_adopt(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__planner *pl,
                        const struct hoff__plan_opts *o, struct hoff__plan_result *r) {
    char a[32], b[32];

    if (r->save_err[0])
        hoff__log(HOFF_LOG_WARN, "cannot write the trace to HOFF_TRACE=%s: %s", p->trace_path, r->save_err);
    if (r->rc) {
        hoff__log(HOFF_LOG_WARN, "planner %s failed (%s: %s); the budget is kept online without a plan", pl->name,
                  hoff_strerror(r->rc), r->err);
        hoff__schedule_destroy(&r->sched);
        p->rerecord = 1;
        return;
    }
    if (r->group_rc)
        hoff__log(HOFF_LOG_WARN, "grouping the plan failed (%s: %s); its blocks move one by one",
                  hoff_strerror(r->group_rc), r->group_err);
    hoff__schedule_destroy(&p->sched);
    p->sched = r->sched; /* moved */
    hoff__schedule_init(&r->sched);
    p->have_plan = 1;
    hoff__pipe_push_policy(p, &mem->pol);
    HOFF__STAT_ADD(&p->st, plans, 1);
    HOFF__STAT_SET(&p->st, plan_groups, p->sched.ngroups);
    HOFF__STAT_SET(&p->st, plan_actions, p->sched.nact);
    HOFF__STAT_SET(&p->st, plan_feasible, (uint64_t)p->sched.feasible);
    HOFF__STAT_SET(&p->st, plan_peak_bytes, p->sched.peak_bytes);
    HOFF__STAT_SET(&p->st, plan_ns, p->sched.plan_ns);
    HOFF__STAT_SET(&p->st, plan_stall_ns, p->sched.stall_ns == UINT64_MAX ? 0 : p->sched.stall_ns);
    HOFF__STAT_SET(&p->st, plan_floor_bytes, p->sched.floor_bytes);
    HOFF__STAT_SET(&p->st, plan_floor_phase, p->sched.floor_phase);
    HOFF__STAT_SET(&p->st, plan_floor_blocks, p->sched.floor_blocks);
    snprintf(p->floor_op, sizeof p->floor_op, "%s", hoff__plan_op_name(&p->trace, p->sched.floor_op_ev));
    if (o->budget_bytes && o->budget_bytes < p->sched.floor_bytes) {
        const char *why = hoff__plan_floor_advice(p->sched.floor_phase);
        char c[32];

        hoff__log(HOFF_LOG_WARN,
                  "the budget of %s is infeasible: %u blocks (%s) are in use on the device at once at event %u of "
                  "%zu, in op %s (%s phase; the working-set floor, the blocks in use there and the ones that "
                  "cannot move); planned for the floor instead, and moving nothing that cannot lower the peak%s%s",
                  hoff__fmt_size(o->budget_bytes, a, sizeof a), (unsigned)p->sched.floor_blocks,
                  hoff__fmt_size(p->sched.floor_bytes, c, sizeof c), p->sched.floor_ev, p->trace.nev, p->floor_op,
                  hoff_phase_name((int)p->sched.floor_phase), *why ? ". The floor is " : "", why);
    } else if (!p->sched.feasible)
        hoff__log(HOFF_LOG_WARN,
                  "planner %s cannot meet the budget of %s: the lowest peak it reaches is %s, at event %u of "
                  "%zu; the rest is kept online (evictions on demand, counted as stall)",
                  pl->name, hoff__fmt_size(o->budget_bytes, a, sizeof a),
                  hoff__fmt_size(p->sched.peak_bytes, b, sizeof b), p->sched.peak_ev, p->trace.nev);
    else
        hoff__log(HOFF_LOG_INFO, "planned %zu actions for %zu events (%s) in %.3f ms", p->sched.nact, p->trace.nev,
                  pl->name, (double)p->sched.plan_ns / 1e6);
}

/* What a fact learnt about block b of this step (after its allocation) does
 * to the trace: 1 when the step is being recorded and b is in its trace (the
 * caller notes the fact there); 0 when the step replays a plan that did not
 * know it (a replan is asked for when stale says the plan is wrong, which the
 * caller tells from the trace) or when nothing is recorded (outside a step, an
 * online step while a planning job reads the trace, a failed recording). */
static int learnt(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__block *b,
                  int (*stale)(const struct hoff__tblock *)) {
    struct hoff__trace *t = &p->trace;

    if (!mem->pol.in_step || !hoff__pipe_owns(p, b) || b->tid >= t->nblocks)
        return 0;
    if (p->state == HOFF_PLAN_WARMUP)
        return !p->online && !p->diverged; /* an online step: the trace is the planning job's, read-only */
    if (p->have_trace && stale(&t->blocks[b->tid]))
        p->rerecord = 1;
    return 0;
}

static int not_pinned(const struct hoff__tblock *tb) {
    return !tb->pinned;
}

static int not_kept(const struct hoff__tblock *tb) {
    return !tb->kept;
}

void hoff__record_exclude(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__block *b) {
    struct hoff__trace *t = &p->trace;

    if (!learnt(p, mem, b, not_pinned))
        return;
    t->blocks[b->tid].pinned = 1;
    t->ev[t->blocks[b->tid].alloc_ev].flags |= HOFF__TEV_PINNED;
}

void hoff__record_keep(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__block *b) {
    struct hoff__trace *t = &p->trace;

    if (!learnt(p, mem, b, not_kept))
        return;
    t->blocks[b->tid].kept = 1;
    t->blocks[b->tid].pool = 0; /* as hoff__trace_finish derives it */
    t->ev[t->blocks[b->tid].alloc_ev].flags |= HOFF__TEV_KEPT;
}
