/* hoff-plan.h — what the files of the trace and plan tool share: the command table, the one option table and
 * its parsed values, the trace and budget helpers, the sim runs and the replay recorder.
 * Threading: one thread drives the tool; the library's issuing thread adds recorder spans under the
 * recorder's lock (recorder.c). */
#ifndef HOFF_PLAN_TOOL_H
#define HOFF_PLAN_TOOL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "core/context.h"
#include "core/core.h"
#include "hoff.h"
#include "plan/plan.h"
#include "trace/drive.h"
#include "trace/synth.h"
#include "trace/trace.h"

#define EXIT_FAIL 1        /* integrity failure, budget exceeded, unreadable trace, runtime error */
#define EXIT_USAGE 2       /* bad usage */
#define EXIT_MEMORY 3      /* a simulation refused: it needs more memory than the machine has available now */
#define HP_HELP_SHOWN (-1) /* hp_parse: --help printed; exit 0 */

#define GiB ((uint64_t)1 << 30)

extern const char *const hp_cmd; /* "hoff-plan" */

#define SZ(x) hoff__fmt_size((x), (char[32]){0}, 32)
#define TM(x) hoff__fmt_time((x), (char[32]){0}, 32)

/* --- the commands (main.c): the one list of them --------------------------
 * X(name, synopsis, what it does): hoff-plan --help, the unknown-command
 * message and tests/man.sh (every command has a section in hoff-plan(1))
 * read this list. */
#define HOFF_PLAN_COMMANDS(X)                                                                              \
    X(simulate, "TRACE --budget SIZE|PCT%", "replay TRACE on the sim backend under a budget")              \
    X(show, "TRACE --budget SIZE|PCT%", "print the schedule a planner builds")                             \
    X(timeline, "TRACE --budget SIZE|PCT% -o FILE.svg", "draw resident bytes over the step (SVG)")         \
    X(export, "TRACE --budget SIZE|PCT% --perfetto FILE.json", "the simulated replay as a Perfetto trace") \
    X(synth, "-o FILE", "write a synthetic transformer trace")                                             \
    X(info, "TRACE", "summarise a trace")                                                                  \
    X(model, "TRACE --budget SIZE|PCT%", "times, resident bytes and gaps as JSON (for bounds)")            \
    X(advise, "TRACE --budget SIZE|PCT%", "what to recompute instead of offloading, and the predicted steps")

#define HP_DECLARE(name, synopsis, what) int hp_cmd_##name(int argc, char **argv);
HOFF_PLAN_COMMANDS(HP_DECLARE)
#undef HP_DECLARE

/* --- the options (options.c) ----------------------------------------------
 * One table of every flag of every command, with its parser; a command
 * names the flags it takes (a mask of HP_F(x)). */
enum hp_flag {
    HP_BUDGET,
    HP_HOST_CAP,
    HP_SPILL_DIR,
    HP_BANDWIDTH,
    HP_PLANNER,
    HP_GROUPS,
    HP_STEPS,
    HP_COMPUTE_SCALE,
    HP_GPU_STEP,
    HP_NO_MEMORY_CHECK,
    HP_GUARD_AFTER,
    HP_GUARD_BEFORE,
    HP_ACTIONS_ONLY,
    HP_JSON,
    HP_OUTPUT,
    HP_WIDTH,
    HP_HEIGHT,
    HP_PERFETTO,
    /* synth */
    HP_MODEL,
    HP_LAYERS,
    HP_HIDDEN,
    HP_SEQ,
    HP_HEADS,
    HP_BATCH,
    HP_DTYPE,
    HP_ELEM_BYTES,
    HP_ATTENTION,
    HP_VOCAB,
    HP_TFLOPS,
    HP_MANAGED_MIN,
    HP_NO_ACCESS,
    HP_HBM_GBPS,
    HP_INPUT_READS,
    HP_EVENTS,
    HP_SEED,
    HP_HELP,
    HP_NFLAGS
};
#define HP_F(x) (1ull << HP_##x)
/* The flags of a simulated replay (simulate, timeline, export). */
#define HP_SIM_FLAGS                                                                                       \
    (HP_F(BUDGET) | HP_F(HOST_CAP) | HP_F(BANDWIDTH) | HP_F(PLANNER) | HP_F(STEPS) | HP_F(COMPUTE_SCALE) | \
     HP_F(GPU_STEP) | HP_F(SPILL_DIR) | HP_F(NO_MEMORY_CHECK) | HP_F(HELP))

/* --budget SIZE|PCT%: pct < 0 when given as a size. */
struct budget_arg {
    const char *text;
    double pct;
    uint64_t size;
};

struct hp_args {
    const char *sub;        /* the command, for messages */
    uint64_t given;         /* HP_F(x) of each flag given */
    const char *trace_path; /* the TRACE operand */
    struct budget_arg budget;
    uint64_t host_cap;
    const char *spill_dir; /* NVMe tier (HOFF_SPILL_DIR); NULL = none */
    double bandwidth;      /* GB/s each way (default 50) */
    const char *planner;   /* default timed */
    int groups;            /* co-located groups (HOFF_GROUPS), default on */
    uint64_t steps;        /* default 3 */
    double compute_scale;  /* default 1 */
    double gpu_step_ms;    /* 0: not given */
    int no_mem_check, json, actions_only;
    uint64_t guard_after, guard_before; /* the runtime's defaults */
    const char *output;                 /* -o */
    uint64_t width, height;             /* timeline: default 1200 x 640 */
    const char *perfetto;
    struct hoff__synth_opts synth;         /* synth: hoff__synth_defaults */
    const char *model, *dtype, *attention; /* synth --model, --dtype, --attention (NULL: not given) */
    uint64_t events, seed;                 /* synth --events (0: a transformer), --seed (default 1) */
};

/* Parse argv (argv[0] the command) with the flags in `accepted`; the usage
 * function prints the command's --help.  0, HP_HELP_SHOWN, or EXIT_USAGE
 * (reported).  Operands are left at argv[optind..]. */
int hp_parse(const char *sub, int argc, char **argv, uint64_t accepted, void (*usage_fn)(FILE *), struct hp_args *a);
int hp_usage_error(const char *sub, const char *fmt, ...) HOFF__PRINTF(2, 3);
/* The one TRACE operand after the options (into a->trace_path), --budget when
 * need_budget, a known planner when check_planner.  0 or the exit code. */
int hp_trace_operand(struct hp_args *a, int argc, char **argv, int need_budget, int check_planner);
/* The budget in bytes for a trace with this offload peak.  0 or -1 (reported). */
int hp_resolve_budget(const char *sub, const struct budget_arg *b, uint64_t offload_peak, uint64_t *out);
/* --gpu-step MS in ns (0: not given). */
uint64_t hp_gpu_step_ns(double ms);
/* o zeroed, with the clock --compute-scale and --gpu-step give (the driver's other fields are the caller's). */
void hp_drive_opts(const struct hp_args *a, struct hoff__drive_opts *o);
/* The compute scaling models a step the driver can model; else a message
 * naming the flag and EXIT_USAGE. */
int hp_check_scale(const char *sub, const struct hoff__trace *t, double compute_scale, double gpu_step_ms);

/* --- common helpers (common.c) -------------------------------------------- */
int hp_load_trace(const char *path, struct hoff__trace *t); /* 0 or -1 (reported) */
void hp_json_str(FILE *f, const char *s);                   /* a JSON string, quotes included */
const char *hp_yes(int v);                                  /* "true" / "false" */
const char *hp_base_name(const char *path);
void hp_list_planners(FILE *f);

/* Where the working-set floor comes from (show and info): its bytes and
 * event, the op mark ending the use windows open there, its phase, the
 * blocks on the device there and the HP_FLOOR_TOP largest of them. */
#define HP_FLOOR_TOP 8
struct hp_floor {
    uint64_t bytes;
    uint32_t ev;
    struct hoff__floor_where w;       /* hoff__plan_floor_where at ev (op_ev UINT32_MAX: the step's end) */
    uint32_t top[HP_FLOOR_TOP];       /* block ids, largest first */
    uint64_t top_bytes[HP_FLOOR_TOP]; /* their block bytes (as the floor counts them) */
    unsigned ntop;
};
/* Fill f for the floor of bytes at ev (hoff__plan_floor's, or a schedule's)
 * under po.  0 or EXIT_FAIL (reported, naming sub). */
int hp_floor(const char *sub, const struct hoff__trace *t, const struct hoff__plan_opts *po, uint64_t bytes,
             uint32_t ev, struct hp_floor *f);
/* The floor as lines of text, each after indent: where it is, the op and
 * phase, the largest blocks, and what the floor is and what lowers it when
 * budget (0: none; budget_name in the text) is below it. */
void hp_floor_text(const struct hoff__trace *t, const struct hp_floor *f, uint64_t budget, const char *budget_name,
                   const char *indent);
/* The floor as JSON members ("floor_bytes":...,"floor_advice":"..."), no
 * leading or trailing comma. */
void hp_floor_json(const struct hoff__trace *t, const struct hp_floor *f);

/* A trace with its budget resolved: what every planning command loads. */
struct hp_trace {
    struct hoff__trace t;
    uint64_t offload_peak; /* in block bytes (hoff__pool_block_bytes) */
    size_t peak_ev;
    uint64_t budget;
};
/* The plan options the runtime would build from the flags and this budget. */
void hp_plan_opts(const struct hp_args *a, uint64_t budget, struct hoff__plan_opts *po);
/* Load a->trace_path, its offload peak, the budget and (check_scale) the
 * compute scaling.  0 or the exit code (the trace is destroyed then). */
int hp_trace_load(const struct hp_args *a, int check_scale, struct hp_trace *ht);

/* --- the sim (simrun.c) --------------------------------------------------- */
/* The sim device a run of t gets, and the memory it takes of this machine. */
struct sim_size {
    uint64_t device_bytes; /* the simulated device: room for twice the peak, 80 GiB at least */
    uint64_t mem_bytes;    /* this process's memory for the run, estimated */
    uint64_t avail_bytes;  /* what the machine has available (0: unknown) */
};
int hp_sim_size(const char *sub, const struct hoff__trace *t, uint64_t budget, uint64_t offload_peak, uint64_t extra,
                int no_check, struct sim_size *z);
int hp_make_ctx(const struct hp_args *a, uint64_t budget, uint64_t device_bytes, hoff_ctx **ctx);

/* --- the replay recorder (recorder.c): timeline and export ---------------- */
enum rec_kind { REC_D2H = 0, REC_H2D, REC_FAULT, REC_WAIT, REC_NVME_W, REC_NVME_R };

struct rec_span {
    uint64_t t0, t1; /* virtual ns */
    uint64_t bytes;
    int kind; /* enum rec_kind */
    int step;
};

struct rec_sample {
    uint64_t t; /* virtual ns */
    struct hoff_stats st;
};

struct recorder {
    hoff_ctx *ctx;
    const struct hoff__trace *t;
    int steps;
    size_t per_step;      /* nev + 2: step begin, each event, step end */
    struct rec_sample *s; /* steps * per_step */
    unsigned char *have;  /* which samples were taken */
    struct rec_span *sp;
    size_t nsp, cap_sp;
    int step; /* the step being driven (under lock) */
    int oom;
    pthread_mutex_t lock; /* sp, nsp, cap_sp, step, oom: the sim's observer adds spans */
};

/* What the picture commands share: the trace, the budget, the run. */
struct pic {
    struct hp_args a;
    struct hp_trace ht;
    struct recorder rec;
    /* the plan the context replayed, taken before shutdown */
    struct hoff__schedule sched;
    struct hoff__trace planned; /* the trace it was planned on */
    int have_plan;
    char planner[16];
    struct hoff_stats last;
};

/* The --help lines of the simulated replay's flags (HP_SIM_FLAGS) as timeline
 * and export describe them: a piece of their usage's format string. */
#define PIC_FLAGS_HELP                                                                      \
    "  --budget SIZE|PCT%%   resident offload bytes allowed (as in simulate)\n"             \
    "  --host-cap SIZE      host-tier bytes (default: no limit)\n"                          \
    "  --spill-dir DIR      NVMe tier: spill what passes the host cap to files in DIR\n"    \
    "  --bandwidth GBPS     the sim's copy engines and the planner's figure (default 50)\n" \
    "  --planner NAME       planner (default timed)\n"                                      \
    "  --steps N            steps to simulate, the first the warmup (default 3, >= 2)\n"    \
    "  --compute-scale X    divide the trace's compute gaps by X (default 1)\n"             \
    "  --gpu-step MS        scale the compute gaps so a step computes for MS ms\n"          \
    "  --no-memory-check    run even when available memory looks too small for the sim\n"

/* Parse (the simulated replay's flags and `extra`; `required` must be given,
 * else `missing` is the usage error), load and run with the recorder in
 * place.  0 (pic_free after), HP_HELP_SHOWN, or the exit code. */
int pic_setup(struct pic *p, const char *sub, int argc, char **argv, uint64_t extra, uint64_t required,
              const char *missing, void (*usage_fn)(FILE *));
void pic_free(struct pic *p);
struct rec_sample *rec_at(const struct recorder *r, int step, size_t i);

#endif
