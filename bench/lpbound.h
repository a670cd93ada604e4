/* lpbound.h — the benchmarks' bridge to bench/bound.py: run its LP lower bound on the stall of any plan made of
 * a trace's gaps (use windows, per-call latency, the two FIFO copy engines) for a few budgets, and read its JSON
 * lines back.  bench/planners and bench/shapes report the bound as lp_bound_ns.  Threading: single-threaded. */
#ifndef HOFF_BENCH_LPBOUND_H
#define HOFF_BENCH_LPBOUND_H

#include <stdint.h>

#include "benchargs.h"

struct hoff__trace;

struct hoff_bench_lp {
    int pct;          /* the budget, % of the trace's offload peak */
    int have;         /* ns holds a bound (else status says why not) */
    uint64_t ns;      /* lp_bound_ns: no plan of the gaps stalls less */
    char status[128]; /* bound.py's lp_status, or why there is none */
};

/* Where bound.py is: cmd runs it (e.g. "python3 ../bench/bound.py"; NULL: not run), hoff_plan is the hoff-plan it
 * is to use. */
struct hoff_bench_lp_run {
    const char *cmd;
    const char *hoff_plan;
    double gbps;        /* each way */
    double gpu_step_ms; /* > 0: --gpu-step (the clock); 0: the trace's own */
};

/* bound.py on the trace at path for the n (<= 3) budgets pct[]; each lp[i] gets its bound or the reason it has
 * none (never fails: a bound that cannot be had is a status). */
void hoff_bench_lp_file(const struct hoff_bench_lp_run *run, const char *path, const int *pct, int n,
                        struct hoff_bench_lp *lp);

/* The same for a trace in memory (bound.py reads a file: it is written to $TMPDIR, or /tmp, named by tag, and
 * removed after). */
void hoff_bench_lp_trace(const struct hoff_bench_lp_run *run, const struct hoff__trace *t, const char *tag,
                         const int *pct, int n, struct hoff_bench_lp *lp);

/* The flags that set run: --lp CMD and --hoff-plan PATH.  When ba's current argument is one of them, its value goes
 * into run and ba->i steps onto the value: 1; 0 when it is neither.  A missing or empty value ends the program
 * (benchargs.h: exit status 2). */
int hoff_bench_lp_arg(struct bench_args *ba, struct hoff_bench_lp_run *run);

/* Every lp[i] without a bound, with this reason. */
void hoff_bench_lp_none(struct hoff_bench_lp *lp, const int *pct, int n, const char *why);

#endif
