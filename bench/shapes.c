/* shapes.c — benchmark: production transformer shapes (GPT, h 4096, s 8K/32K/128K, flash attention, bf16) at
 * budgets of 75/50/25% of the activation peak, planned by greedy and timed; the step time each plan's predicted
 * replay gives (predict.c: the sim's model, which a replay step matches to microseconds) against the no-offload
 * step, against the bound max(compute, bytes that must move / link bandwidth), and against the fraction of the
 * activations the FLOP-per-byte rule says can move for free; with --lp, against bench/bound.py's LP lower bound on
 * the stall of any plan made of the trace's gaps too (lp_bound_ns).  No bytes are moved: at these shapes a step's
 * activations (tens to hundreds of GiB) could not be simulated with real memory.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/pool.h"
#include "plan/plan.h"
#include "trace/synth.h"
#include "trace/trace.h"

#include "benchargs.h"
#include "lpbound.h"

#define GBPS 50.0    /* each way: PCIe Gen5 x16, as the sim's default */
#define TFLOPS 400.0 /* the synthetic step's compute rate (about 40% of an H200's bf16 peak) */
#define LAYERS 4

static const struct {
    const char *name;
    uint64_t hidden, seq;
} shapes[] = {
    {"gpt-h4096-s8K", 4096, 8192},
    {"gpt-h4096-s32K", 4096, 32768},
    {"gpt-h4096-s128K", 4096, 131072},
};

/* The FLOP-per-byte rule (shared/FACTS.md): a transformer's saved activations
 * take about 0.71 h + 0.059 s FLOP per byte; the link moves a byte in the
 * time the device does TFLOPS / GBPS FLOPs: the fraction of the activations
 * that can move while compute hides it. */
static double free_fraction(uint64_t h, uint64_t s) {
    double f = (0.71 * (double)h + 0.059 * (double)s) / (TFLOPS * 1e12 / (GBPS * 1e9));

    return f < 1 ? f : 1;
}

static int plan_one(const struct hoff__trace *t, const uint64_t *T, const struct hoff__planner *pl, uint64_t budget,
                    struct hoff__schedule *s) {
    struct hoff__plan_opts o;
    struct hoff__prediction pr;
    int rc;

    memset(&o, 0, sizeof o);
    o.budget_bytes = budget;
    o.h2d_gbps = o.d2h_gbps = GBPS;
    o.block_bytes = hoff__pool_block_bytes;
    o.guard_after_alloc = o.guard_before_free = 1;
    o.groups = 1;
    rc = hoff__plan_build(pl, t, &o, s);
    if (!rc && !s->grouped && (rc = hoff__plan_groups(t, &o, s)) == 0)
        rc = hoff__plan_predict(t, &o, T, s, HOFF__PLACE_KEEP, &pr); /* greedy: as the runtime groups it */
    return rc;
}

static void usage(FILE *f, const struct bench_args *ba) {
    fprintf(f,
            "usage: bench/shapes [--json] [--lp CMD [--hoff-plan PATH]]\n"
            "GPT shapes h 4096, s 8K/32K/128K (%d layers, batch 1, bf16, flash attention) at budgets of "
            "75/50/25%% of the activation peak; step time from each plan's predicted replay at %g GB/s each way "
            "and %g TFLOP/s.\n"
            "--lp CMD: also bench/bound.py's LP lower bound on the stall (run as CMD, e.g. \"python3 "
            "../bench/bound.py\", with --hoff-plan PATH, default ./hoff-plan), as lp_bound_ns.\n",
            LAYERS, GBPS, TFLOPS);
}

int main(int argc, char **argv) {
    static const int pct[] = {75, 50, 25};
    struct hoff_bench_lp_run lp_run = {NULL, "./hoff-plan", GBPS, 0};
    struct bench_args ba = {"bench/shapes", usage, argc, argv, 0};
    int json = 0;
    size_t i, j;

    for (ba.i = 1; ba.i < argc; ba.i++) {
        if (bench_args_is(&ba, "--json"))
            json = 1;
        else if (hoff_bench_lp_arg(&ba, &lp_run))
            continue;
        else if (bench_args_is(&ba, "-h") || bench_args_is(&ba, "--help"))
            bench_args_help(&ba);
        else
            bench_args_unknown(&ba, argv[ba.i]);
    }
    if (!json)
        printf("%-16s %6s %6s %10s %12s %12s %12s %12s %9s %9s %12s %13s\n", "shape", "budget", "free", "compute_ms",
               "timed_ms", "greedy_ms", "bound_ms", "x_nooffload", "x_bound", "feasible", "lp_bound_ms",
               "peak_bound_ms");
    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        struct hoff__synth_opts so;
        struct hoff__trace t;
        uint64_t *T, peak, compute, to_peak;
        size_t peak_ev = 0;
        struct hoff_bench_lp lp[3];
        double ff = free_fraction(shapes[i].hidden, shapes[i].seq);
        int rc;

        hoff__synth_defaults(&so);
        so.layers = LAYERS;
        so.hidden = shapes[i].hidden;
        so.seq = shapes[i].seq;
        so.tflops = TFLOPS;
        hoff__trace_init(&t);
        rc = hoff__synth_transformer(&t, &so);
        T = rc ? NULL : hoff__plan_times(&t);
        if (rc || !T) {
            fprintf(stderr, "bench/shapes: %s: %s\n", shapes[i].name, strerror(rc ? -rc : ENOMEM));
            return 1;
        }
        peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, &peak_ev);
        compute = hoff__plan_compute_ns(&t, T);
        to_peak = t.nev ? T[peak_ev] - T[0] : 0;
        hoff_bench_lp_trace(&lp_run, &t, shapes[i].name, pct, 3, lp);
        for (j = 0; j < sizeof pct / sizeof pct[0]; j++) {
            uint64_t budget = peak * (uint64_t)pct[j] / 100, must = peak - budget;
            double bound = (double)compute, link = (double)must / GBPS,
                   early = (double)compute + link - (double)to_peak;
            struct hoff__schedule ts, gs;

            bound = link > bound ? link : bound;
            /* The bytes that must be away at the peak can only leave between the step's start and the peak: the
             * D2H link's time for them, less the compute before the peak, is stall no plan avoids. */
            early = early > bound ? early : bound;
            hoff__schedule_init(&ts);
            hoff__schedule_init(&gs);
            if ((rc = plan_one(&t, T, &hoff__planner_timed, budget, &ts)) != 0 ||
                (rc = plan_one(&t, T, &hoff__planner_greedy, budget, &gs)) != 0) {
                fprintf(stderr, "bench/shapes: %s at %d%%: %s\n", shapes[i].name, pct[j], strerror(-rc));
                return 1;
            }
            {
                double step = (double)compute + (double)ts.stall_ns, gstep = (double)compute + (double)gs.stall_ns;
                char lpv[32] = "null", lpt[32] = "-";

                if (lp[j].have) {
                    snprintf(lpv, sizeof lpv, "%" PRIu64, lp[j].ns);
                    snprintf(lpt, sizeof lpt, "%.3f", lp[j].ns / 1e6);
                }

                if (json)
                    printf(
                        "{\"shape\":\"%s\",\"hidden\":%" PRIu64 ",\"seq\":%" PRIu64 ",\"layers\":%d,"
                        "\"budget_pct\":%d,\"peak_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64
                        ",\"floor_bytes\":%" PRIu64 ",\"feasible\":%s,\"offload_fraction\":%.4f,"
                        "\"free_fraction\":%.4f,\"compute_ns\":%" PRIu64 ",\"no_offload_step_ns\":%" PRIu64
                        ",\"bound_ns\":%.0f,\"peak_bound_ns\":%.0f,\"timed_step_ns\":%.0f,\"timed_stall_ns\":%" PRIu64
                        ",\"greedy_step_ns\":%.0f,\"greedy_stall_ns\":%" PRIu64 ",\"bytes_d2h\":%" PRIu64
                        ",\"bytes_h2d\":%" PRIu64 ",\"plan_ns\":%" PRIu64 ",\"events\":%zu,\"lp_bound_ns\":%s,"
                        "\"lp_status\":\"%s\"}\n",
                        shapes[i].name, shapes[i].hidden, shapes[i].seq, LAYERS, pct[j], peak, budget, ts.floor_bytes,
                        ts.feasible ? "true" : "false", 1 - pct[j] / 100.0, ff, compute, compute, bound, early, step,
                        ts.stall_ns, gstep, gs.stall_ns, ts.bytes_d2h, ts.bytes_h2d, ts.plan_ns, t.nev, lpv,
                        lp[j].status);
                else
                    printf("%-16s %5d%% %5.0f%% %10.3f %12.3f %12.3f %12.3f %12.3f %9.3f %9s %12s %13.3f\n",
                           shapes[i].name, pct[j], 100 * ff, compute / 1e6, step / 1e6, gstep / 1e6, bound / 1e6,
                           step / (double)compute, step / bound, ts.feasible ? "yes" : "no", lpt, early / 1e6);
            }
            hoff__schedule_destroy(&ts);
            hoff__schedule_destroy(&gs);
        }
        free(T);
        hoff__trace_destroy(&t);
    }
    return 0;
}
