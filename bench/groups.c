/* groups.c — benchmark: transfer calls with and without groups (HOFF_GROUPS) on a trace driven through the sim,
 * with the bytes moved, the integrity of every block and the step time of the last replayed step.
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchargs.h"
#include "hoff.h"
#include "mem/pool.h"
#include "trace/drive.h"
#include "trace/trace.h"

struct run {
    struct hoff_stats d; /* the last step's counters (differences) */
    struct hoff__drive_step last;
    uint64_t integrity_errors, blocks_verified, plan_groups, plan_ns;
};

/* Drive t for steps steps (the last one measured) at budget, groups on or off. */
static int drive(const struct hoff__trace *t, const char *planner, uint64_t budget, uint64_t device, int steps,
                 int groups, struct run *out) {
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    struct hoff_stats a, b;
    struct hoff_config cfg;
    hoff_ctx *ctx = NULL;
    char err[256];
    int rc, k;

    memset(out, 0, sizeof *out);
    hoff_config_init(&cfg);
    if ((rc = hoff_config_from_env(&cfg, err, sizeof err)) != 0) { /* HOFF_SIM_* and the like */
        fprintf(stderr, "bench/groups: %s\n", err);
        return rc;
    }
    cfg.backend = HOFF_BACKEND_SIM;
    cfg.sim_device_bytes = device;
    cfg.oversub_margin_bytes = 0;
    cfg.budget_bytes = budget;
    cfg.groups = groups;
    cfg.plan_thread = 0; /* the replay from the step after the recording: the steady state */
    if ((rc = hoff_config_set(&cfg, "planner", planner, err, sizeof err)) != 0) {
        fprintf(stderr, "bench/groups: --planner: %s\n", err);
        return rc;
    }
    if ((rc = hoff_init(&ctx, &cfg)) != 0) {
        fprintf(stderr, "bench/groups: hoff_init: %s\n", hoff_last_error());
        return rc;
    }
    memset(&o, 0, sizeof o);
    o.verify = 1;
    o.compute_scale = 1.0;
    for (k = 0; k < 2 && rc == 0; k++) {
        o.steps = k == 0 ? steps - 1 : 1;
        hoff_stats_get(ctx, &a);
        rc = hoff__trace_drive(ctx, t, &o, &r);
        hoff_stats_get(ctx, &b);
        if (rc == 0) {
            out->integrity_errors += r.integrity_errors;
            out->blocks_verified += r.blocks_verified;
            out->last = r.step[r.steps - 1];
        } else {
            fprintf(stderr, "bench/groups: drive: %s\n", hoff_last_error());
        }
        hoff__drive_result_free(&r);
    }
#define DIFF_(name, desc) out->d.name = b.name - a.name;
    HOFF_STATS_FIELDS(DIFF_)
#undef DIFF_
    out->plan_groups = b.plan_groups;
    out->plan_ns = b.plan_ns;
    hoff_shutdown(ctx);
    return rc;
}

static void json_run(const char *name, const struct run *r) {
    printf("\"%s\":{\"evict_calls\":%" PRIu64 ",\"prefetch_calls\":%" PRIu64 ",\"group_calls_saved\":%" PRIu64
           ",\"group_fallbacks\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64
           ",\"bytes_evicted\":%" PRIu64 ",\"bytes_prefetched\":%" PRIu64 ",\"faults\":%" PRIu64
           ",\"stall_ns\":%" PRIu64 ",\"step_ns\":%" PRIu64 ",\"plan_groups\":%" PRIu64 ",\"plan_ns\":%" PRIu64
           ",\"integrity_errors\":%" PRIu64 ",\"blocks_verified\":%" PRIu64 "}",
           name, r->d.evict_calls, r->d.prefetch_calls, r->d.group_calls_saved, r->d.group_fallbacks, r->d.evictions,
           r->d.prefetches, r->d.bytes_evicted, r->d.bytes_prefetched, r->d.faults, r->last.stall_ns, r->last.step_ns,
           r->plan_groups, r->plan_ns, r->integrity_errors, r->blocks_verified);
}

static void usage(FILE *f, const struct bench_args *ba) {
    fprintf(f,
            "usage: %s TRACE [--budget PCT] [--planner NAME] [--steps N]\n"
            "Drives TRACE on the sim with groups on and off (HOFF_* from the environment) and prints\n"
            "the last replayed step's transfer calls, bytes, stall and integrity as JSON.\n",
            ba->argv[0]);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"budget", required_argument, NULL, 'b'},
                                             {"planner", required_argument, NULL, 'p'},
                                             {"steps", required_argument, NULL, 's'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    struct bench_args ba = {"bench/groups", usage, argc, argv, 0};
    const char *planner = "greedy";
    double pct = 50;
    int steps = 3, opt, rc;
    struct hoff__trace t;
    struct run on, off;
    uint64_t peak, budget, device;
    size_t at;
    char err[256];

    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'b': pct = bench_args_pct(&ba, "--budget", optarg, 0, INFINITY); break;
        case 'p': planner = optarg; break;
        case 's': steps = (int)bench_args_uint(&ba, "--steps", optarg, 2, INT_MAX); break;
        case 'h': bench_args_help(&ba); break;
        default: usage(stderr, &ba); return 2;
        }
    }
    if (optind != argc - 1)
        bench_args_fail(&ba, "expected one TRACE operand, got %d", argc - optind);
    hoff__trace_init(&t);
    if ((rc = hoff__trace_load(&t, argv[optind], err, sizeof err)) != 0) {
        fprintf(stderr, "bench/groups: %s: %s\n", argv[optind], err);
        return 1;
    }
    peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, &at);
    budget = (uint64_t)((double)peak * pct / 100.0);
    device = (uint64_t)80 << 30;
    if (device < 4 * peak)
        device = 4 * peak;
    rc = drive(&t, planner, budget, device, steps, 1, &on);
    if (rc == 0)
        rc = drive(&t, planner, budget, device, steps, 0, &off);
    if (rc == 0) {
        printf("{\"trace\":\"%s\",\"planner\":\"%s\",\"budget_pct\":%g,\"budget_bytes\":%" PRIu64 ",", argv[optind],
               planner, pct, budget);
        json_run("groups_on", &on);
        putchar(',');
        json_run("groups_off", &off);
        printf("}\n");
    }
    hoff__trace_destroy(&t);
    return rc ? 1 : (on.integrity_errors || off.integrity_errors ? 1 : 0);
}
