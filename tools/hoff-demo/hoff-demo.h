/* hoff-demo.h — what the files of hoff-demo share: the run (struct demo) with its options, workload and
 * per-step reports, and the functions of each part.  hoff-demo is a synthetic transformer training run on
 * hoff's pipeline: parameters in the device pool; activations marked (steps, ops, accesses) so that hoff records
 * step 0 (warmup), plans a residency schedule and replays it in later steps; every byte checked on the way back.
 * --mode manual adds the pre-pipeline demo's hand prefetches in backward, for comparison.
 * Threading: single-threaded (the library's issuing thread runs behind the API). */
#ifndef HOFF_DEMO_TOOL_H
#define HOFF_DEMO_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h" /* hoff__fmt_size, hoff__fmt_time */
#include "hoff.h"
#include "trace/drive.h" /* a step's counters */
#include "trace/synth.h" /* the compute-rate range */
#include "trace/trace.h" /* the longest step hoff models */

#define DEMO_MAX_LAYERS 1024
#define DEMO_BLOCKS_PER_LAYER 8

/* One activation a layer saves for backward (bf16 unless said otherwise). */
struct act_spec {
    const char *name;
    size_t bytes;
    int candidate; /* >= managed_min: goes to the managed pool (in a step) */
    size_t usable; /* bytes hoff hands out for it (probed), candidates only */
};

struct act {
    void *p;
    uint64_t seed;
};

enum demo_mode {
    MODE_PLAN = 0,   /* marks only: the pipeline evicts and prefetches */
    MODE_MANUAL = 1, /* ...plus hand prefetches in backward (the pre-pipeline demo) */
};

struct step_report {
    int state;                 /* enum hoff_plan_state of the step (fallback if it diverged) */
    int planned;               /* a schedule was built at the end of this step, or (planning
                                  thread) became ready for use at its start */
    int planning;              /* the step ran under the online policy while the plan was made */
    int plan_after;            /* a plan is being made once the step is over (recorded) */
    uint64_t host_ns;          /* host time of the training thread from step begin to end */
    uint64_t plan_wait_ns;     /* ...of which it waited for planning */
    struct hoff__drive_step c; /* time, compute, stall, traffic and peak (hoff__drive_step_counters) */
    uint64_t bytes_faulted, fired, skipped;
    uint64_t prefetch_issued, prefetch_resident, prefetch_nospace;
};

struct bad_block {
    int found;
    int step, layer;
    const char *name;
    size_t offset;
    unsigned expected, got;
    int residency;
};

struct demo {
    /* options */
    unsigned layers, hidden, seq, batch, steps;
    int mode;           /* enum demo_mode */
    unsigned lookahead; /* manual: layers prefetched ahead in backward; 0 = budget room */
    int corrupt;        /* flip a byte after writing (checks the checker) */
    double tflops;
    int json;
    int plan_thread; /* the context plans on its planning thread (HOFF_PLAN_THREAD) */
    /* workload */
    struct act_spec spec[DEMO_BLOCKS_PER_LAYER];
    int nspec;
    uint64_t param_bytes, nparams;
    uint64_t act_bytes_layer, cand_bytes_layer, cand_usable_layer;
    uint64_t act_peak; /* resident offload bytes without offload */
    uint64_t budget;
    double budget_pct;       /* < 0: given as a size */
    uint64_t fwd_ns, bwd_ns; /* modelled compute per layer */
    double step_compute_ns;  /* modelled compute per step */
    /* run */
    hoff_ctx *ctx;
    hoff_stream stream;
    int compute_modelled;
    struct act *acts; /* layers x nspec */
    struct step_report *rep;
    uint64_t verified_blocks, verified_bytes;
    uint64_t prefetch_errors, access_errors;
    struct bad_block bad;
};

/* --- the workload (workload.c) ----------------------------------------------- */

/* The activations one layer saves, the parameters and the modelled compute
 * (step_compute_ns past HOFF__STEP_NS_MAX: the rest is not set). */
void build_workload(struct demo *d, uint64_t managed_min);
/* What hoff hands out for each offload candidate (spec[].usable).  0 or
 * -errno, *what the call that failed. */
int probe_sizes(struct demo *d, const struct hoff_config *cfg, const char **what);

/* --- the pattern (pattern.c) ---------------------------------------------------- */

unsigned pat_byte(uint64_t seed, size_t i);           /* byte i of the pattern of seed */
void fill(void *p, size_t n, uint64_t seed);          /* write the pattern */
size_t check(const void *p, size_t n, uint64_t seed); /* the first bad byte's offset, or (size_t)-1 */
uint64_t seed_of(int step, int layer, int j);         /* the seed of activation j of a layer in a step */

/* --- a step (step.c) ---------------------------------------------------------- */

/* Print what hoff call failed and why; returns 1 (the exit status). */
int fail_call(const char *what, int rc);
/* Forward and backward of step `step`, counted in r.  0, or 1 (reported). */
int forward(struct demo *d, int step, struct step_report *r);
int backward(struct demo *d, int step, struct step_report *r);
/* Step s: begin, forward, backward, end; d->rep[s] from the counters before
 * it (*st0, advanced to its end), printed unless --json.  0 or 1 (reported). */
int run_step(struct demo *d, unsigned s, struct hoff_stats *st0, const char *planner);

/* --- the report (report.c) ------------------------------------------------------ */

#define SZ(x) hoff__fmt_size((x), (char[32]){0}, 32)
#define TM(x) hoff__fmt_time((x), (char[32]){0}, 32)
const char *res_name(int r);
const char *mode_name(int m);
void print_step(struct demo *d, unsigned s);
void print_plan(const struct demo *d, const struct hoff_stats *st, const char *planner);
void print_intro(const struct demo *d, const struct hoff_config *cfg);
void print_summary(const struct demo *d, const struct hoff_stats *st, int within_budget, int params_ok);
void print_json(struct demo *d, const struct hoff_stats *st, int within_budget, int params_ok, const char *planner);

#endif
