/* executor.h — the pipeline of steps: warmup records a step, the planner turns it into a schedule at its end,
 * replay fires the schedule in later steps and falls back when a step diverges.  Threading: caller holds the context
 * lock. */
#ifndef HOFF_EXECUTOR_H
#define HOFF_EXECUTOR_H

#include <stdint.h>

#include "core/stat.h"
#include "mem/block.h"
#include "mem/mem.h"
#include "plan/plan.h"
#include "trace/trace.h"

struct hoff__planjob;
struct hoff__plan_result;

/* What the API is doing: one event of the step. */
struct hoff__event_info {
    int kind;      /* enum hoff__tev_kind */
    int pool;      /* alloc: the pool chosen */
    int pinned;    /* alloc: inside a region */
    uint64_t size; /* alloc: bytes asked for */
    hoff_stream stream;
    int write;             /* access */
    const char *name;      /* op */
    int phase;             /* enum hoff_phase of the op marks now (recorded in the event's flags) */
    struct hoff__block *b; /* free/access: the block; alloc: set once allocated */
};

/* The runtime side of a schedule's group (plan.h): its region, mapped at the
 * first member's allocation in a replayed step and kept across steps while
 * the plan stands (each member reuses its slot), and what happened to the
 * group's actions in the current step. */
struct hoff__rgroup {
    struct hoff__region *region;        /* NULL until mapped */
    int refused;                        /* mapping it failed: members allocate normally */
    uint64_t evict_step, prefetch_step; /* the step whose group EVICT/PREFETCH was handled */
    uint8_t evict_one, prefetch_one;    /* ...as one call (1) or member by member (0) */
};

/* The hoff_stats fields the pipeline keeps (core/stat.h); core/ctx_stats.c folds them in on read. */
#define HOFF__PIPE_STATS(X) \
    X(plan_state)           \
    X(plans)                \
    X(plan_actions)         \
    X(plan_feasible)        \
    X(plan_peak_bytes)      \
    X(plan_ns)              \
    X(plan_stall_ns)        \
    X(actions_fired)        \
    X(actions_skipped)      \
    X(divergent_steps)      \
    X(replans)              \
    X(h2d_mbps)             \
    X(d2h_mbps)             \
    X(group_fallbacks)      \
    X(plan_groups)          \
    X(plan_floor_bytes)     \
    X(plan_floor_phase)     \
    X(plan_floor_blocks)    \
    X(plan_pending)         \
    X(plan_online_steps)    \
    X(plan_lag_steps)       \
    X(plan_lag_ns)          \
    X(plan_wait_ns)         \
    X(plans_dropped)        \
    X(recorded_peak_bytes)

struct hoff__pipe_stats {
#define HOFF__PIPE_STAT_(name) HOFF__STAT_FIELD(name)
    HOFF__PIPE_STATS(HOFF__PIPE_STAT_)
#undef HOFF__PIPE_STAT_
};

struct hoff__pipeline {
    const struct hoff_config *cfg; /* the context's options, as they are now (read only) */
    const char *trace_path;        /* where each recorded step's trace goes ("": nowhere) */
    struct hoff__pipe_stats st;
    int state;                /* enum hoff_plan_state */
    uint64_t step;            /* steps begun (the current one while in a step) */
    struct hoff__trace trace; /* recording (warmup), else the last recorded step */
    int have_trace;
    struct hoff__schedule sched;
    int have_plan;
    /* per step */
    uint32_t ev;              /* index of the next event in the step */
    uint32_t nalloc;          /* allocations so far (the next block id) */
    size_t next_act;          /* replay: next action of sched */
    struct hoff__block **map; /* replay: trace block id -> live block */
    size_t map_len;
    hoff_stream last_stream;
    uint64_t t0_cpu, t0_be;                 /* step start on the host clock and the backend's */
    uint64_t stall0_ns;                     /* stats stall_ns at the step's start (sim: compute-only event times) */
    int diverged;                           /* this step left the plan */
    uint32_t divergent_run;                 /* divergent steps in a row */
    int rerecord;                           /* the next step records again */
    uint64_t fired, skipped;                /* this step */
    double h2d_gbps, d2h_gbps;              /* bandwidths the planner gets */
    double nvme_read_gbps, nvme_write_gbps; /* the NVMe tier's, likewise */
    int sim;                                /* the backend's clock is the device timeline (sim) */
    struct hoff__rgroup *rg;                /* replay: sched.ngroups entries, NULL without groups */
    struct hoff__block **gm;                /* scratch: a group's members for one call */
    size_t ngm;
    /* warmup on a real device: a timed event per recorded event, for its
     * device-timeline estimate (the sim's virtual clock needs none) */
    hoff__event **tev;
    size_t ntev, cap_tev;
    hoff__event *tev0; /* recorded when the step began */
    /* planning off the training thread (HOFF_PLAN_THREAD): the job making
     * the plan of `trace` (which stays unchanged until it is collected);
     * while it runs, steps are neither recorded nor replayed: the online
     * policy keeps the budget, as in the warmup */
    struct hoff__planjob *job;
    int online;         /* this step runs under the online policy while the job plans */
    uint64_t lag;       /* steps begun while the current job plans */
    uint64_t t_job;     /* host clock when the job started */
    char floor_op[128]; /* the plan's floor: the op mark that ends it (hoff_floor_json) */
};

/* The plan was made for other options (a live change of budget, host cap or
 * planner): the next step records and plans again (nothing to do before a
 * plan exists).  Caller holds the context lock. */
void hoff__pipe_replan(struct hoff__pipeline *p);

/* Copies of the plan being replayed and of the trace it was planned on, for
 * tools that show them: 0, -ENOENT when there is no plan yet, or -ENOMEM
 * (neither copy is kept).  s and t are initialised here, whatever the
 * result; the caller destroys both.  Caller holds the context lock. */
int hoff__pipe_copy_plan(const struct hoff__pipeline *p, struct hoff__schedule *s, struct hoff__trace *t);

/* Is this block part of the current step's trace? */
static inline int hoff__pipe_owns(const struct hoff__pipeline *p, const struct hoff__block *b) {
    return p->state != 0 && b->tstep == p->step;
}

/* The memory layer's view of the pipeline's state (mem/mem.h): pushed after every change of p's state, plan,
 * divergence or step (the context pushes its own step state beside it: exec/pipeline.h hoff__pipe_policy). */
static inline void hoff__pipe_push_policy(const struct hoff__pipeline *p, struct hoff__mem_policy *pol) {
    pol->warmup = p->state == HOFF_PLAN_WARMUP;
    pol->replaying = p->have_plan && p->state == HOFF_PLAN_REPLAY && !p->diverged;
    pol->floor_bytes = p->sched.floor_bytes;
    pol->step = p->step;
}

/* The pipeline enters state st (enum hoff_plan_state): its statistic and the memory layer's policy follow. */
static inline void hoff__pipe_set_state(struct hoff__pipeline *p, struct hoff__mem_policy *pol, int st) {
    p->state = st;
    HOFF__STAT_SET(&p->st, plan_state, (uint64_t)st);
    hoff__pipe_push_policy(p, pol);
}

/* warmup (record.c) */
void hoff__record_begin(struct hoff__pipeline *p, struct hoff__mem *mem);
void hoff__record_event(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__event_info *e);
/* What the planner gets for p's recorded step: the configuration, the
 * measured bandwidths and, on sim, the sim's costs.  Caller holds the context
 * lock (or owns the context). */
void hoff__record_plan_opts(const struct hoff__pipeline *p, struct hoff__plan_opts *o);

/* The recorded step is over: finish its trace and plan it, on a planning
 * job (HOFF_PLAN_THREAD: the pipeline collects it at a later step's start)
 * or inline (the training thread waits: counted in plan_wait_ns). */
int hoff__record_finish(struct hoff__pipeline *p, struct hoff__mem *mem);
/* Make r (planned by pl with o for the recorded trace) the context's plan,
 * with its statistics and log lines; a failed plan makes the next step
 * record again.  r's schedule is moved out. */
void hoff__record_adopt(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__planner *pl,
                        const struct hoff__plan_opts *o, struct hoff__plan_result *r);
/* Was a plan made with pl and o for another budget, host cap or planner
 * than the context has now (a live change while it was planned)? */
int hoff__record_stale(const struct hoff__pipeline *p, const struct hoff__planner *pl, const struct hoff__plan_opts *o);
/* b joined a manual swap group: it is outside the plan.  While its step is
 * recorded its allocation is recorded as pinned (never a candidate; the
 * budget counts it); in a replayed step whose plan counted it as a
 * candidate, the next step records and plans again. */
void hoff__record_exclude(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__block *b);
/* hoff_keep of b: a recorded step notes it (its allocation is flagged kept:
 * the plan counts it as device memory); a replayed step whose plan had it as
 * a candidate records again. */
void hoff__record_keep(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__block *b);
void hoff__record_release(struct hoff__pipeline *p, struct hoff__mem *mem); /* free the timed events */

/* planning (planjob.c): what planning a recorded step produces */
struct hoff__plan_result {
    int rc;        /* hoff__plan_build's; sched is empty unless 0 */
    char err[256]; /* its message */
    int group_rc;  /* hoff__plan_groups' (the plan stands without groups) */
    char group_err[256];
    char save_err[320]; /* writing the trace to HOFF_TRACE failed: why ("" if not) */
    struct hoff__schedule sched;
    uint64_t done_ns; /* planning job: CLOCK_MONOTONIC when it finished */
};
/* Write the trace to trace_path (if not ""), build the plan with pl within
 * time_ns (0: no limit; the planner's deadline, from when the trace is
 * written), group it when o->groups asks and the planner did not, and
 * predict it again if grouped.  Pure: touches only t (read), o and *r.
 * Thread safe. */
void hoff__plan_make(const struct hoff__planner *pl, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                     uint64_t time_ns, const char *trace_path, struct hoff__plan_result *r);
/* hoff__plan_make on a new thread.  t, pl and trace_path must stay valid and
 * t unchanged until the job is collected or cancelled.  0, or -errno (no
 * memory, no thread) with *out NULL: the caller plans inline instead. */
int hoff__planjob_start(struct hoff__planjob **out, const struct hoff__planner *pl, const struct hoff__trace *t,
                        const struct hoff__plan_opts *o, uint64_t time_ns, const char *trace_path);
/* Has the job finished?  Never blocks. */
int hoff__planjob_done(const struct hoff__planjob *j);
/* The options and planner the job plans with. */
const struct hoff__plan_opts *hoff__planjob_opts(const struct hoff__planjob *j);
const struct hoff__planner *hoff__planjob_planner(const struct hoff__planjob *j);
/* Take the result of a finished job (hoff__planjob_done) and free the job:
 * joins a thread that has already finished, so it does not wait. */
void hoff__planjob_collect(struct hoff__planjob *j, struct hoff__plan_result *r);
/* Give up on a job: ask the planner to stop early, wait for its thread, drop
 * the result and free the job (NULL: nothing).  For shutdown. */
void hoff__planjob_cancel(struct hoff__planjob *j);

/* replay (replay.c) */
void hoff__replay_before(struct hoff__pipeline *p, struct hoff__mem *mem, struct hoff__event_info *e);
void hoff__replay_after(struct hoff__pipeline *p, struct hoff__mem *mem, struct hoff__event_info *e);
/* The step is over: count what did not happen. */
void hoff__replay_finish(struct hoff__pipeline *p, struct hoff__mem *mem);

/* bandwidth.c: D2H and H2D GB/s of this backend: measured with a 16 MiB probe
 * on a real device, the model's figures on sim, cfg.bandwidth_gbps where
 * neither works. */
void hoff__bandwidth_measure(struct hoff__backend *be, const struct hoff_config *cfg, double *h2d_gbps,
                             double *d2h_gbps);
/* The NVMe tier's read and write GB/s: the model's on sim, measured with a
 * 16 MiB probe spill on a real device, the sim defaults where neither works
 * (or there is no NVMe tier). */
void hoff__nvme_bandwidth_measure(struct hoff__backend *be, struct hoff__nvme *nvme, const struct hoff_config *cfg,
                                  double *read_gbps, double *write_gbps);

#endif
