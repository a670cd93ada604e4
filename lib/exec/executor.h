/* executor.h — the pipeline of steps: warmup records a step, the planner turns it into a schedule at its end,
 * replay fires the schedule in later steps and falls back when a step diverges.  Threading: caller holds ctx->lock. */
#ifndef HOFF_EXECUTOR_H
#define HOFF_EXECUTOR_H

#include <stdint.h>

#include "mem/block.h"
#include "plan/plan.h"
#include "trace/trace.h"

struct hoff_ctx;
struct hoff__planjob;
struct hoff__plan_result;

/* What the API is doing: one event of the step. */
struct hoff__event_info {
    int kind;                   /* enum hoff__tev_kind */
    int pool;                   /* alloc: the pool chosen */
    int pinned;                 /* alloc: inside a region */
    uint64_t size;              /* alloc: bytes asked for */
    hoff_stream stream;
    int write;                  /* access */
    const char *name;           /* op */
    struct hoff__block *b;      /* free/access: the block; alloc: set once allocated */
};

/* The runtime side of a schedule's group (plan.h): its region, mapped at the
 * first member's allocation in a replayed step and kept across steps while
 * the plan stands (each member reuses its slot), and what happened to the
 * group's actions in the current step. */
struct hoff__rgroup {
    struct hoff__region *region;    /* NULL until mapped */
    int refused;                    /* mapping it failed: members allocate normally */
    uint64_t evict_step, prefetch_step; /* the step whose group EVICT/PREFETCH was handled */
    uint8_t evict_one, prefetch_one;    /* ...as one call (1) or member by member (0) */
};

struct hoff__pipeline {
    int state;                  /* enum hoff_plan_state */
    uint64_t step;              /* steps begun (the current one while in a step) */
    struct hoff__trace trace;   /* recording (warmup), else the last recorded step */
    int have_trace;
    struct hoff__schedule sched;
    int have_plan;
    /* per step */
    uint32_t ev;                /* index of the next event in the step */
    uint32_t nalloc;            /* allocations so far (the next block id) */
    size_t next_act;            /* replay: next action of sched */
    struct hoff__block **map;   /* replay: trace block id -> live block */
    size_t map_len;
    hoff_stream last_stream;
    uint64_t t0_cpu, t0_be;     /* step start on the host clock and the backend's */
    uint64_t stall0_ns;         /* stats stall_ns at the step's start (sim: compute-only event times) */
    int diverged;               /* this step left the plan */
    uint32_t divergent_run;     /* divergent steps in a row */
    int rerecord;               /* the next step records again */
    uint64_t fired, skipped;    /* this step */
    double h2d_gbps, d2h_gbps;  /* bandwidths the planner gets */
    double nvme_read_gbps, nvme_write_gbps; /* the NVMe tier's, likewise */
    int sim;                    /* the backend's clock is the device timeline (sim) */
    struct hoff__rgroup *rg;    /* replay: sched.ngroups entries, NULL without groups */
    struct hoff__block **gm;    /* scratch: a group's members for one call */
    size_t ngm;
    /* warmup on a real device: a timed event per recorded event, for its
     * device-timeline estimate (the sim's virtual clock needs none) */
    hoff__event **tev;
    size_t ntev, cap_tev;
    hoff__event *tev0;          /* recorded when the step began */
    /* planning off the training thread (HOFF_PLAN_THREAD): the job making
     * the plan of `trace` (which stays unchanged until it is collected);
     * while it runs, steps are neither recorded nor replayed: the online
     * policy keeps the budget, as in the warmup */
    struct hoff__planjob *job;
    int online;                 /* this step runs under the online policy while the job plans */
    uint64_t lag;               /* steps begun while the current job plans */
    uint64_t t_job;             /* host clock when the job started */
    char floor_op[128];         /* the plan's floor: the op mark that ends it (hoff_floor_json) */
};

void hoff__pipe_init(struct hoff_ctx *ctx);
void hoff__pipe_destroy(struct hoff_ctx *ctx);

/* Step marks: 0 or -errno (-ENOMEM recording; a planning failure is logged
 * and leaves the context a plain caching allocator with the budget kept
 * online, not an error of the step). */
int hoff__pipe_step_begin(struct hoff_ctx *ctx);
int hoff__pipe_step_end(struct hoff_ctx *ctx);
/* The step failed (an exception in the framework): a warmup's recording is
 * dropped (the next step records again); a replay's remaining actions count
 * as skipped and the plan stays.  Caller has waited for the transfers. */
int hoff__pipe_step_abort(struct hoff_ctx *ctx);

/* The plan was made for other options (a live change of budget, host cap or
 * planner): the next step records and plans again (nothing to do before a
 * plan exists).  Caller holds the context lock. */
void hoff__pipe_replan(struct hoff__pipeline *p);

/* Copies of the plan being replayed and of the trace it was planned on, for
 * tools that show them: 0, -ENOENT when there is no plan yet, or -ENOMEM
 * (neither copy is kept).  s and t are initialised here, whatever the
 * result; the caller destroys both.  Caller holds the context lock. */
int hoff__pipe_copy_plan(const struct hoff__pipeline *p, struct hoff__schedule *s, struct hoff__trace *t);

/* Replay: the block of allocation e (the next one of the step) from its
 * group's region when the plan has it in a group and the step still
 * follows the plan; NULL to allocate normally (not grouped, groups off,
 * diverged, inside a region, the region refused or its slot busy). */
struct hoff__block *hoff__pipe_alloc(struct hoff_ctx *ctx, const struct hoff__event_info *e, int cls);

/* Is this block part of the current step's trace? */
static inline int hoff__pipe_owns(const struct hoff__pipeline *p, const struct hoff__block *b) {
    return p->state != 0 && b->tstep == p->step;
}

/* Around every event of a step: `before` runs first (replay: checks the
 * event against the plan and fires the actions planned before it), then the
 * API does its work, then `after` (warmup: records it; replay: binds a new
 * block and fires the actions planned after it).  No-ops outside a step. */
void hoff__pipe_before(struct hoff_ctx *ctx, struct hoff__event_info *e);
void hoff__pipe_after(struct hoff_ctx *ctx, struct hoff__event_info *e);

/* warmup (record.c) */
void hoff__record_begin(struct hoff_ctx *ctx);
void hoff__record_event(struct hoff_ctx *ctx, const struct hoff__event_info *e);
/* What the planner gets for ctx's recorded step: the configuration, the
 * measured bandwidths and, on sim, the sim's costs.  Caller holds ctx->lock
 * (or owns ctx). */
void hoff__record_plan_opts(const struct hoff_ctx *ctx, struct hoff__plan_opts *o);

/* The recorded step is over: finish its trace and plan it, on a planning
 * job (HOFF_PLAN_THREAD: the pipeline collects it at a later step's start)
 * or inline (the training thread waits: counted in plan_wait_ns). */
int hoff__record_finish(struct hoff_ctx *ctx);
/* Make r (planned by pl with o for the recorded trace) the context's plan,
 * with its statistics and log lines; a failed plan makes the next step
 * record again.  r's schedule is moved out. */
void hoff__record_adopt(struct hoff_ctx *ctx, const struct hoff__planner *pl, const struct hoff__plan_opts *o,
                        struct hoff__plan_result *r);
/* Was a plan made with pl and o for another budget, host cap or planner
 * than the context has now (a live change while it was planned)? */
int hoff__record_stale(const struct hoff_ctx *ctx, const struct hoff__planner *pl, const struct hoff__plan_opts *o);
/* b joined a manual swap group: it is outside the plan.  While its step is
 * recorded its allocation is recorded as pinned (never a candidate; the
 * budget counts it); in a replayed step whose plan counted it as a
 * candidate, the next step records and plans again. */
void hoff__record_exclude(struct hoff_ctx *ctx, const struct hoff__block *b);
/* hoff_keep of b: a recorded step notes it (its allocation is flagged kept:
 * the plan counts it as device memory); a replayed step whose plan had it as
 * a candidate records again. */
void hoff__record_keep(struct hoff_ctx *ctx, const struct hoff__block *b);
/* Replay: the step's next event is the allocation of size bytes of a block
 * the recorded step kept (it goes outside the budget: ctx_alloc.c). */
int hoff__pipe_kept_next(const struct hoff_ctx *ctx, uint64_t size);
void hoff__record_release(struct hoff_ctx *ctx);  /* free the timed events */

/* planning (planjob.c): what planning a recorded step produces */
struct hoff__plan_result {
    int rc;                     /* hoff__plan_build's; sched is empty unless 0 */
    char err[256];              /* its message */
    int group_rc;               /* hoff__plan_groups' (the plan stands without groups) */
    char group_err[256];
    char save_err[320];         /* writing the trace to HOFF_TRACE failed: why ("" if not) */
    struct hoff__schedule sched;
    uint64_t done_ns;           /* planning job: CLOCK_MONOTONIC when it finished */
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
void hoff__replay_before(struct hoff_ctx *ctx, struct hoff__event_info *e);
void hoff__replay_after(struct hoff_ctx *ctx, struct hoff__event_info *e);
/* The step is over: count what did not happen. */
void hoff__replay_finish(struct hoff_ctx *ctx);

/* bandwidth.c: D2H and H2D GB/s of this backend: measured with a 16 MiB probe
 * on a real device, the model's figures on sim, cfg.bandwidth_gbps where
 * neither works. */
void hoff__bandwidth_measure(struct hoff_ctx *ctx, double *h2d_gbps, double *d2h_gbps);
/* The NVMe tier's read and write GB/s: the model's on sim, measured with a
 * 16 MiB probe spill on a real device, the sim defaults where neither works
 * (or there is no NVMe tier). */
void hoff__nvme_bandwidth_measure(struct hoff_ctx *ctx, double *read_gbps, double *write_gbps);

#endif
