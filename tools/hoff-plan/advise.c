/* advise.c — hoff-plan advise: which forward ops to recompute instead of offloading their saved activations under
 * a budget (lib/plan/advise.c), against offload only, full activation checkpointing and no offload, with the
 * predicted step of each and a lower bound; as text or one JSON object (what hoff.recompute and bench/pareto.py
 * read).  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hoff-plan.h"
#include "plan/recompute.h"
#include "trace/drive.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-plan advise TRACE --budget SIZE|PCT%% [options]\n"
               "Advises which forward ops to recompute in the backward instead of keeping or\n"
               "offloading what they save, where the link cannot carry the budget: plans and\n"
               "predicts offload only, full activation checkpointing (per layer, from op names\n"
               "like L3.mlp_up) and the recompute choice combined with offload, and prints each\n"
               "predicted step with a lower bound on any keep/offload/recompute plan.\n"
               "\n"
               "  --budget SIZE|PCT%%       resident offload bytes allowed: a size (512M, 2G) or a\n"
               "                           percentage of the trace's offload peak\n"
               "  --bandwidth GBPS         the H2D and D2H copy engines, GB/s (default 50)\n"
               "  --planner NAME           the planner of the offloads (default timed)\n"
               "  --groups on|off          co-located groups (default on)\n"
               "  --host-cap SIZE          the host tier's cap (default none)\n"
               "  --compute-scale X        divide the trace's compute gaps by X (default 1): a step\n"
               "                           recorded on the CPU (--sim) at a GPU's speed\n"
               "  --gpu-step MS            scale the compute gaps so a step computes for MS ms\n"
               "  --json                   print one JSON object\n"
               "  -o, --output FILE        also write the trace of the step with the advice's\n"
               "                           recomputes (for 'hoff-plan simulate' to replay it)\n"
               "  -h, --help               this text\n"
               "\n"
               "JSON fields: trace, budget_bytes, peak_bytes, compute_ns, h2d_gbps, d2h_gbps, bound_ns,\n"
               "no_offload {step_ns, feasible}, offload_only, full_checkpoint (null without layer\n"
               "regions) and combined {step_ns, stall_ns, recompute_ns, feasible, floor_bytes,\n"
               "peak_bytes, bytes_d2h, units}, chosen, evaluated, recompute [{op, occurrence,\n"
               "interval, event, cost_ns, bytes, ops [{op, occurrence, interval}]}] (combined's ops,\n"
               "forward order; occurrence: the op's index among the forward ops of its name; ops:\n"
               "the forward ops its recompute runs, itself first).\n"
               "\n"
               "Exit status: 0 ok, 1 unreadable trace or out of memory, 2 bad usage.\n");
}

static void alt_json(const char *key, const struct hoff__rc_alt *x) {
    if (!x->have) {
        printf(",\"%s\":null", key);
        return;
    }
    printf(",\"%s\":{\"step_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64 ",\"recompute_ns\":%" PRIu64
           ",\"feasible\":%s,\"floor_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64 ",\"bytes_d2h\":%" PRIu64
           ",\"units\":%" PRIu32 "}",
           key, x->step_ns, x->stall_ns, x->recompute_ns, hp_yes(x->feasible), x->floor_bytes, x->peak_bytes,
           x->bytes_d2h, x->units);
}

static void alt_text(const char *name, const struct hoff__rc_alt *x, uint64_t compute) {
    if (!x->have) {
        printf("  %-16s not modelled (no layer regions in the op names)\n", name);
        return;
    }
    printf("  %-16s %10.3f ms  %+6.1f%%  stall %8.3f ms  recompute %8.3f ms  peak %8.1f MiB  %s\n", name,
           x->step_ns / 1e6, compute ? 100.0 * ((double)x->step_ns / (double)compute - 1) : 0.0, x->stall_ns / 1e6,
           x->recompute_ns / 1e6, x->peak_bytes / 1048576.0, x->feasible ? "feasible" : "over the budget");
}

/* The trace's times on the clock 'simulate' drives it on under --compute-scale or --gpu-step (lib/trace/drive.c):
 * what the runtime would record and plan from at that speed.  0 or EXIT_FAIL (reported). */
static int rescale(const struct hp_args *a, struct hoff__trace *t) {
    struct hoff__drive_opts o;
    uint64_t *t_ns, step;
    size_t i;

    hp_drive_opts(a, &o);
    t_ns = calloc(t->nev ? t->nev : 1, sizeof *t_ns);
    if (!t_ns || hoff__drive_clock(t, &o, t_ns, &step) != 0) {
        fprintf(stderr, "%s advise: %s\n", hp_cmd, t_ns ? hoff_last_error() : "out of memory");
        free(t_ns);
        return EXIT_FAIL;
    }
    for (i = 0; i < t->nev; i++)
        t->ev[i].t_cpu_ns = t->ev[i].t_gpu_ns = t_ns[i];
    t->step_ns = t->step_gpu_ns = step;
    free(t_ns);
    return 0;
}

/* The advice as one JSON object. */
static void print_json(const struct hp_args *a, const struct hoff__trace *t, const struct hoff__plan_opts *po,
                       const struct hoff__rc_model *m, const struct hoff__rc_advice *ad) {
    size_t i;
    uint32_t k;

    printf("{\"trace\":");
    hp_json_str(stdout, a->trace_path);
    printf(",\"budget_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64 ",\"compute_ns\":%" PRIu64
           ",\"h2d_gbps\":%.17g,\"d2h_gbps\":%.17g,\"bound_ns\":%" PRIu64 ",\"no_offload\":{\"step_ns\":%" PRIu64
           ",\"feasible\":%s}",
           ad->budget_bytes, ad->peak_bytes, ad->compute_ns, po->h2d_gbps, po->d2h_gbps, ad->bound_ns, ad->compute_ns,
           hp_yes(ad->peak_bytes <= ad->budget_bytes));
    alt_json("offload_only", &ad->offload_only);
    alt_json("full_checkpoint", &ad->full);
    alt_json("combined", &ad->combined);
    printf(",\"chosen\":\"%s\",\"evaluated\":%" PRIu32 ",\"recompute\":[", ad->chosen, ad->evaluated);
    for (i = 0; i < ad->nunits; i++) {
        const struct hoff__rc_unit *u = &m->u[ad->units[i]];

        printf("%s{\"op\":", i ? "," : "");
        hp_json_str(stdout, hoff__rc_op_name(t, m, u->interval));
        printf(",\"occurrence\":%" PRIu32 ",\"interval\":%" PRIu32 ",\"event\":%" PRIu32 ",\"cost_ns\":%" PRIu64
               ",\"bytes\":%" PRIu64 ",\"ops\":[",
               u->occurrence, u->interval, u->mark == UINT32_MAX ? u->begin : u->mark, u->cost_ns, u->bytes);
        for (k = 0; k < u->nop; k++) {
            uint32_t j = m->ops[u->first_op + k];

            printf("%s{\"op\":", k ? "," : "");
            hp_json_str(stdout, hoff__rc_op_name(t, m, j));
            printf(",\"occurrence\":%" PRIu32 ",\"interval\":%" PRIu32 "}", hoff__rc_op_occurrence(t, m, j), j);
        }
        printf("]}");
    }
    printf("]}\n");
}

/* The advice as text. */
static void print_text(const struct hp_args *a, const struct hoff__trace *t, const struct hoff__plan_opts *po,
                       const struct hoff__rc_model *m, const struct hoff__rc_advice *ad) {
    size_t i;

    printf("trace: %s\nbudget: %.1f MiB of an offload peak of %.1f MiB, %g GB/s each way\n", a->trace_path,
           ad->budget_bytes / 1048576.0, ad->peak_bytes / 1048576.0, po->d2h_gbps);
    printf("predicted step (x no offload):\n");
    printf("  %-16s %10.3f ms  %s\n", "no offload", ad->compute_ns / 1e6,
           ad->peak_bytes <= ad->budget_bytes ? "fits the budget" : "over the budget");
    alt_text("offload only", &ad->offload_only, ad->compute_ns);
    alt_text("full checkpoint", &ad->full, ad->compute_ns);
    alt_text("combined", &ad->combined, ad->compute_ns);
    printf("  %-16s %10.3f ms  (no keep/offload/recompute plan of hoff's model is faster)\n", "lower bound",
           ad->bound_ns / 1e6);
    printf("advice: %s", strcmp(ad->chosen, "combined") == 0          ? "recompute these forward ops, offload the rest"
                         : strcmp(ad->chosen, "full_checkpoint") == 0 ? "checkpoint every layer"
                                                                      : "offload only: no recompute pays");
    printf(" (%" PRIu32 " choices planned)\n", ad->evaluated);
    for (i = 0; i < ad->nunits; i++) {
        const struct hoff__rc_unit *u = &m->u[ad->units[i]];

        printf("  %-32s occurrence %-4" PRIu32 " %8.1f MiB  %8.3f ms", hoff__rc_op_name(t, m, u->interval),
               u->occurrence, u->bytes / 1048576.0, u->cost_ns / 1e6);
        if (u->nop > 1)
            printf("  (and the %" PRIu32 " ops making the forward temporaries it reads)", u->nop - 1);
        printf("\n");
    }
}

int hp_cmd_advise(int argc, char **argv) {
    const uint64_t accepted = HP_F(BUDGET) | HP_F(BANDWIDTH) | HP_F(PLANNER) | HP_F(GROUPS) | HP_F(HOST_CAP) |
                              HP_F(JSON) | HP_F(OUTPUT) | HP_F(COMPUTE_SCALE) | HP_F(GPU_STEP) | HP_F(HELP);
    struct hp_args a;
    struct hp_trace ht;
    struct hoff__plan_opts po;
    struct hoff__rc_model m;
    struct hoff__rc_advice ad;
    uint64_t *T;
    int rc;

    rc = hp_parse("advise", argc, argv, accepted, usage, &a);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    if ((rc = hp_trace_operand(&a, argc, argv, 1, 1)) != 0)
        return rc;
    if ((rc = hp_trace_load(&a, 1, &ht)) != 0)
        return rc;
    if ((a.compute_scale != 1.0 || a.gpu_step_ms > 0) && (rc = rescale(&a, &ht.t)) != 0) {
        hoff__trace_destroy(&ht.t);
        return rc;
    }
    hp_plan_opts(&a, ht.budget, &po);
    po.groups = a.groups;
    if (!(T = hoff__plan_times(&ht.t))) {
        fprintf(stderr, "%s advise: out of memory\n", hp_cmd);
        hoff__trace_destroy(&ht.t);
        return EXIT_FAIL;
    }
    rc = hoff__rc_model_build(&ht.t, T, po.block_bytes, &m);
    free(T);
    if (rc == 0) {
        rc = hoff__rc_advise(&ht.t, &m, &po, hoff__planner_find(a.planner), &ad);
        if (rc)
            hoff__rc_model_destroy(&m);
    }
    if (rc) {
        fprintf(stderr, "%s advise: %s: %s\n", hp_cmd, a.trace_path,
                hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        hoff__trace_destroy(&ht.t);
        return rc == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
    }
    if (a.output) {
        struct hoff__trace r;

        rc = hoff__rc_advice_rewrite(&ht.t, &m, &ad, &r);
        if (!rc)
            rc = hoff__trace_save(&r, a.output);
        hoff__trace_destroy(&r);
        if (rc) {
            fprintf(stderr, "%s advise: %s: %s\n", hp_cmd, a.output,
                    hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
            hoff__rc_advice_destroy(&ad);
            hoff__rc_model_destroy(&m);
            hoff__trace_destroy(&ht.t);
            return EXIT_FAIL;
        }
    }
    if (a.json)
        print_json(&a, &ht.t, &po, &m, &ad);
    else
        print_text(&a, &ht.t, &po, &m, &ad);
    hoff__rc_advice_destroy(&ad);
    hoff__rc_model_destroy(&m);
    hoff__trace_destroy(&ht.t);
    return 0;
}
