/* main.c — hoff-demo's entry: the options, the configuration and the budget, then the run: parameters in the
 * device pool, the steps, and the report.  Threading: single-threaded (the library's issuing thread runs
 * behind the API). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hoff-demo.h"

static uint64_t mono_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: hoff-demo [options]\n"
            "Runs a synthetic transformer training workload on hoff and checks every byte.\n"
            "\n"
            "  --layers N        transformer layers (default 8)\n"
            "  --hidden H        hidden size (default 1024)\n"
            "  --seq S           sequence length (default 2048)\n"
            "  --batch B         micro-batch size (default 1)\n"
            "  --steps N         training steps (default 4: the warmup and 3 replays)\n"
            "  --budget SIZE|P%%  device budget for resident activations: a size (512M,\n"
            "                    2G, 0 = no limit) or a percentage of the activation peak\n"
            "                    without offload (default 25%%, or HOFF_BUDGET)\n"
            "  --backend NAME    auto, sim or cuda (default auto, or HOFF_BACKEND)\n"
            "  --mode MODE       plan (default): mark steps, ops and accesses and let hoff's\n"
            "                    pipeline evict and prefetch (warmup, plan, replay);\n"
            "                    manual: the same plus the pre-pipeline demo's hand\n"
            "                    prefetches in backward, for comparison\n"
            "  --lookahead N     manual mode: in backward, prefetch up to N layers ahead\n"
            "                    (default 0: the next layer, and more while the budget has room)\n"
            "  --tflops T        modelled compute throughput on sim (default 400)\n"
            "  --json            print one JSON object instead of the report\n"
            "  --corrupt         flip one byte of one activation after writing it, to\n"
            "                    show that the check catches it (exits 1)\n"
            "  --step-delay MS   sleep MS milliseconds after each step (to watch it with\n"
            "                    hoff-stat)\n"
            "  --hold SECONDS    after the report, stay alive SECONDS before shutting down,\n"
            "                    its statistics still published (for hoff-stat)\n"
            "  -h, --help        this text\n"
            "\n"
            "Every HOFF_* environment variable applies (see hoff-config(7)); the options\n"
            "above override it.  Exit status: 0 ok, 1 integrity failure, budget exceeded\n"
            "or runtime error, 2 bad usage or configuration.\n");
}

static int parse_uint(const char *opt, const char *s, unsigned min, unsigned max,
                      unsigned *out) {
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "hoff-demo: --%s: expected an integer in [%u, %u], got '%s'\n",
                opt, min, max, s);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"layers", required_argument, NULL, 'L'}, {"hidden", required_argument, NULL, 'H'},
        {"seq", required_argument, NULL, 'S'},    {"batch", required_argument, NULL, 'B'},
        {"steps", required_argument, NULL, 'n'},  {"budget", required_argument, NULL, 'b'},
        {"backend", required_argument, NULL, 'k'}, {"tflops", required_argument, NULL, 't'},
        {"lookahead", required_argument, NULL, 'a'}, {"json", no_argument, NULL, 'j'},
        {"corrupt", no_argument, NULL, 'c'},         {"help", no_argument, NULL, 'h'},
        {"mode", required_argument, NULL, 'm'},
        {"step-delay", required_argument, NULL, 'D'}, {"hold", required_argument, NULL, 'W'},
        {NULL, 0, NULL, 0},
    };
    struct demo d = {.layers = 8, .hidden = 1024, .seq = 2048, .batch = 1, .steps = 4,
                     .tflops = 400.0, .budget_pct = -1, .compute_modelled = 1};
    struct hoff_config cfg;
    struct hoff_stats st0, st, sb;
    const char *budget_arg = NULL, *backend_arg = NULL, *what = NULL;
    char err[256];
    int opt, rc, within_budget, params_ok = 1;
    void **params = NULL;
    uint64_t total_plan;
    long pages = sysconf(_SC_PHYS_PAGES), pagesz = sysconf(_SC_PAGESIZE);
    unsigned step_delay_ms = 0, hold_s = 0;

    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'L': if (parse_uint("layers", optarg, 1, DEMO_MAX_LAYERS, &d.layers)) return 2; break;
        case 'H': if (parse_uint("hidden", optarg, 8, 1u << 17, &d.hidden)) return 2; break;
        case 'S': if (parse_uint("seq", optarg, 1, 1u << 20, &d.seq)) return 2; break;
        case 'B': if (parse_uint("batch", optarg, 1, 4096, &d.batch)) return 2; break;
        case 'n': if (parse_uint("steps", optarg, 1, 1000000, &d.steps)) return 2; break;
        case 'b': budget_arg = optarg; break;
        case 'a': if (parse_uint("lookahead", optarg, 0, DEMO_MAX_LAYERS, &d.lookahead)) return 2; break;
        case 'k': backend_arg = optarg; break;
        case 't': {
            char *end;
            d.tflops = strtod(optarg, &end);
            if (end == optarg || *end || !(d.tflops >= HOFF__SYNTH_TFLOPS_MIN && d.tflops <= HOFF__SYNTH_TFLOPS_MAX)) {
                fprintf(stderr, "hoff-demo: --tflops: expected a number from %g to %g, got '%s'\n",
                        HOFF__SYNTH_TFLOPS_MIN, HOFF__SYNTH_TFLOPS_MAX, optarg);
                return 2;
            }
            break;
        }
        case 'm':
            if (strcmp(optarg, "plan") == 0)
                d.mode = MODE_PLAN;
            else if (strcmp(optarg, "manual") == 0)
                d.mode = MODE_MANUAL;
            else {
                fprintf(stderr, "hoff-demo: --mode: expected plan or manual, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'j': d.json = 1; break;
        case 'c': d.corrupt = 1; break;
        case 'D': if (parse_uint("step-delay", optarg, 0, 3600000, &step_delay_ms)) return 2; break;
        case 'W': if (parse_uint("hold", optarg, 0, 86400, &hold_s)) return 2; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hoff-demo: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    /* Configuration: defaults, then HOFF_*, then the options. */
    hoff_config_init(&cfg);
    err[0] = '\0';
    if ((rc = hoff_config_from_env(&cfg, err, sizeof err)) != 0) {
        fprintf(stderr, "hoff-demo: %s\n", err[0] ? err : hoff_strerror(rc));
        return 2;
    }
    if (backend_arg && (rc = hoff_config_set(&cfg, "backend", backend_arg, err, sizeof err)) != 0) {
        fprintf(stderr, "hoff-demo: --backend: %s\n", err[0] ? err : hoff_strerror(rc));
        return 2;
    }

    d.plan_thread = cfg.plan_thread;
    build_workload(&d, cfg.managed_min_bytes);
    if (d.step_compute_ns > (double)HOFF__STEP_NS_MAX) {
        fprintf(stderr, "hoff-demo: --tflops %g: a step of this model would compute for %.3g s, past %s; raise "
                        "--tflops or make the model smaller\n", d.tflops, d.step_compute_ns / 1e9,
                HOFF__STEP_NS_MAX_TEXT);
        return 2;
    }
    total_plan = d.param_bytes + d.act_bytes_layer * d.layers;
    if (pages > 0 && pagesz > 0 && total_plan > (uint64_t)pages * (uint64_t)pagesz / 2) {
        fprintf(stderr, "hoff-demo: the workload needs %s (parameters %s, activations %s), more "
                        "than half of this machine's memory; use smaller --layers/--hidden/--seq/--batch\n",
                SZ(total_plan), SZ(d.param_bytes), SZ(d.act_bytes_layer * d.layers));
        return 2;
    }
    if ((rc = probe_sizes(&d, &cfg, &what)) != 0)
        return fail_call(what, rc) + (rc == -EINVAL); /* a bad configuration: 2 */
    d.act_peak = d.cand_usable_layer * d.layers;

    /* The budget: --budget, else HOFF_BUDGET, else 25% of the peak. */
    if (budget_arg || !getenv("HOFF_BUDGET") || !*getenv("HOFF_BUDGET")) {
        const char *b = budget_arg ? budget_arg : "25%";
        size_t n = strlen(b);

        if (n > 0 && b[n - 1] == '%') {
            char *end, num[32];
            double pct = strtod(b, &end);
            /* "%" alone and "0%" are no percentage (a budget of 0 would mean no limit). */
            if (end == b || end != b + n - 1 || !(pct > 0) || pct > 100) {
                fprintf(stderr, "hoff-demo: --budget: expected a size (512M, 2G; 0 = no limit) or a "
                                "percentage of the activation peak in (0%%, 100%%], got '%s'\n", b);
                return 2;
            }
            d.budget_pct = pct;
            {
                uint64_t bytes = (uint64_t)((double)d.act_peak * pct / 100.0);

                snprintf(num, sizeof num, "%" PRIu64, bytes ? bytes : 1); /* 0 would mean no limit */
            }
            rc = hoff_config_set(&cfg, "budget", num, err, sizeof err);
        } else {
            rc = hoff_config_set(&cfg, "budget", b, err, sizeof err);
        }
        if (rc) {
            fprintf(stderr, "hoff-demo: --budget: %s\n", err[0] ? err : hoff_strerror(rc));
            return 2;
        }
    }
    d.budget = cfg.budget_bytes;
    {
        size_t largest = 0;
        for (int j = 0; j < d.nspec; j++)
            if (d.spec[j].candidate && d.spec[j].usable > largest)
                largest = d.spec[j].usable;
        if (d.budget && d.budget < largest)
            fprintf(stderr, "hoff-demo: warning: the budget (%s) is smaller than one activation "
                            "(%s): it cannot be kept\n", SZ(d.budget), SZ(largest));
    }

    if ((rc = hoff_init(&d.ctx, &cfg)) != 0)
        return fail_call("hoff_init", rc) + (rc == -EINVAL);
    d.acts = calloc((size_t)d.layers * (size_t)d.nspec, sizeof *d.acts);
    d.rep = calloc(d.steps, sizeof *d.rep);
    params = calloc(d.nparams, sizeof *params);
    if (!d.acts || !d.rep || !params) {
        fprintf(stderr, "hoff-demo: out of memory\n");
        return 1;
    }

    if (!d.json) {
        printf("hoff-demo: %u layers, hidden %u, seq %u, batch %u, %u steps, mode %s\n",
               d.layers, d.hidden, d.seq, d.batch, d.steps, mode_name(d.mode));
        printf("backend: %s\n", hoff_backend_name(d.ctx));
        if (d.compute_modelled && strcmp(hoff_backend_name(d.ctx), "sim") == 0)
            printf("sim model: compute at %g TFLOP/s (forward %s, backward %s per layer), "
                   "copy engines %g GB/s H2D and %g GB/s D2H\n",
                   d.tflops, TM(d.fwd_ns), TM(d.bwd_ns), cfg.sim_h2d_gbps, cfg.sim_d2h_gbps);
        printf("parameters: %s in %" PRIu64 " blocks (device pool, never offloaded)\n",
               SZ(d.param_bytes), d.nparams);
        unsigned ncand = 0;
        for (int j = 0; j < d.nspec; j++)
            ncand += (unsigned)d.spec[j].candidate;
        printf("activations per step: %s in %u blocks (%u offload candidates of >= %s)\n",
               SZ(d.act_bytes_layer * d.layers), d.layers * (unsigned)d.nspec,
               d.layers * ncand, SZ(cfg.managed_min_bytes));
    }

    /* Parameters live across steps: the plain device pool. */
    {
        size_t h = d.hidden, sizes[6] = {3 * h * h * 2, h * h * 2, 4 * h * h * 2,
                                         4 * h * h * 2, 2 * h * 2, 2 * h * 2};
        for (uint64_t i = 0; i < d.nparams; i++) {
            params[i] = hoff_malloc_flags(d.ctx, sizes[i % 6], d.stream, HOFF_ALLOC_DEVICE);
            if (!params[i])
                return fail_call("hoff_malloc_flags (parameters)", errno ? -errno : -ENOMEM);
        }
    }

    if ((rc = hoff_stats_get(d.ctx, &st0)) != 0)
        return fail_call("hoff_stats_get", rc);
    for (unsigned s = 0; s < d.steps; s++) {
        struct step_report *r = &d.rep[s];

        uint64_t h0 = mono_ns();

        if ((rc = hoff_step_begin(d.ctx)) != 0)
            return fail_call("hoff_step_begin", rc);
        /* Where the pipeline is: warmup (recording) or replay. */
        if ((rc = hoff_stats_get(d.ctx, &sb)) != 0)
            return fail_call("hoff_stats_get", rc);
        r->state = (int)sb.plan_state;
        r->planning = sb.plan_pending != 0;
        if (forward(&d, (int)s, r) || backward(&d, (int)s, r))
            return 1;
        /* A replay that diverged is in fallback by now. */
        if ((rc = hoff_stats_get(d.ctx, &sb)) != 0)
            return fail_call("hoff_stats_get", rc);
        if (sb.plan_state == HOFF_PLAN_FALLBACK)
            r->state = HOFF_PLAN_FALLBACK;
        if ((rc = hoff_step_end(d.ctx)) != 0)
            return fail_call("hoff_step_end", rc);
        r->host_ns = mono_ns() - h0;
        if ((rc = hoff_stats_get(d.ctx, &st)) != 0)
            return fail_call("hoff_stats_get", rc);
        r->plan_after = st.plan_pending && !r->planning;
        r->plan_wait_ns = st.plan_wait_ns - st0.plan_wait_ns;
        /* ...or diverged at its end (fewer events than the recorded step). */
        if (st.divergent_steps > st0.divergent_steps)
            r->state = HOFF_PLAN_FALLBACK;
        r->planned = st.plans > st0.plans;
        r->fired = st.actions_fired - st0.actions_fired;
        r->skipped = st.actions_skipped - st0.actions_skipped;
        r->peak_resident = st.step_peak_resident_bytes;
        r->time_ns = st.last_step_ns;
        r->stall_ns = st.stall_ns - st0.stall_ns;
        r->evicted = st.bytes_evicted - st0.bytes_evicted;
        r->prefetched = st.bytes_prefetched - st0.bytes_prefetched;
        r->faults = st.faults - st0.faults;
        r->bytes_faulted = st.bytes_faulted - st0.bytes_faulted;
        r->late = st.late_prefetches - st0.late_prefetches;
        st0 = st;
        if (!d.json) {
            print_step(&d, s);
            if (r->planned)
                print_plan(&d, &st, cfg.planner);
            else if (r->plan_after)
                printf("plan: being made on the planning thread; the next steps keep the budget online "
                       "until it is ready\n");
            else if (r->state == HOFF_PLAN_WARMUP && !r->planning)
                printf("plan: none (the planner did not produce a schedule; recording again)\n");
        }
        if (step_delay_ms) {
            fflush(stdout);
            usleep(step_delay_ms * 1000u);
        }
    }
    if ((rc = hoff_sync(d.ctx)) != 0)
        return fail_call("hoff_sync", rc);
    if ((rc = hoff_stats_get(d.ctx, &st)) != 0)
        return fail_call("hoff_stats_get", rc);

    for (uint64_t i = 0; i < d.nparams; i++) {
        int res = hoff_residency(d.ctx, params[i]);
        if (res != HOFF_RES_DEVICE && res != -EINVAL)
            params_ok = 0;
        if (hoff_evict(d.ctx, params[i], d.stream) != -EPERM)
            params_ok = 0;
        hoff_free(d.ctx, params[i], d.stream);
    }
    within_budget = d.budget == 0 || st.peak_resident_bytes <= d.budget;

    if (d.json) {
        print_json(&d, &st, within_budget, params_ok, cfg.planner);
    } else {
        printf("activation peak without offload: %s\n", SZ(d.act_peak));
        if (d.budget == 0)
            printf("budget: none (no limit)\n");
        else if (d.budget_pct >= 0)
            printf("budget: %s (%.4g%% of the peak)\n", SZ(d.budget), d.budget_pct);
        else
            printf("budget: %s\n", SZ(d.budget));
        printf("peak resident offload bytes: %s (%s)\n", SZ(st.peak_resident_bytes),
               within_budget ? "within budget" : "OVER BUDGET");
        printf("evicted: %s in %" PRIu64 " evictions (%" PRIu64 " forced by the budget)\n",
               SZ(st.bytes_evicted), st.evictions, st.budget_evictions);
        printf("prefetched: %s in %" PRIu64 " prefetches\n", SZ(st.bytes_prefetched),
               st.prefetches);
        printf("faults: %" PRIu64 " (%s paged in on demand)\n", st.faults, SZ(st.bytes_faulted));
        if (d.compute_modelled) {
            uint64_t comp = 0;
            for (unsigned s = 0; s < d.steps; s++)
                comp += d.rep[s].compute_ns;
            printf("stall: %s (on %s of modelled compute, %.1f%%)\n", TM(st.stall_ns), TM(comp),
                   comp ? 100.0 * (double)st.stall_ns / (double)comp : 0.0);
        } else {
            printf("stall: %s\n", TM(st.stall_ns));
        }
        printf("late prefetches: %" PRIu64 "\n", st.late_prefetches);
        printf("plans: %" PRIu64 " (%" PRIu64 " replans), divergent steps: %" PRIu64 "\n",
               st.plans, st.replans, st.divergent_steps);
        printf("planning: %s; steps run under the online policy while planning: %" PRIu64
               " (the last plan: %" PRIu64 ", ready %s after its recording); the training thread waited %s for it\n",
               d.plan_thread ? "on the planning thread" : "on the training thread (HOFF_PLAN_THREAD=0)",
               st.plan_online_steps, st.plan_lag_steps, TM(st.plan_lag_ns), TM(st.plan_wait_ns));
        printf("actions: %" PRIu64 " fired, %" PRIu64 " skipped\n", st.actions_fired,
               st.actions_skipped);
        printf("parameters: %s\n", params_ok ? "stayed on the device" : "MOVED (unexpected)");
        if (d.bad.found)
            printf("integrity: FAILED (step %d, layer %d, block %s, byte %zu: expected 0x%02x, "
                   "got 0x%02x, residency %s)\n",
                   d.bad.step, d.bad.layer, d.bad.name, d.bad.offset, d.bad.expected, d.bad.got,
                   res_name(d.bad.residency));
        else
            printf("integrity: OK (%" PRIu64 " blocks, %s verified)\n", d.verified_blocks,
                   SZ(d.verified_bytes));
    }

    /* --hold: hoff_stats_get publishes the final counters; with --json they
     * equal the "stats" printed (nothing happened since its hoff_stats_json). */
    fflush(stdout);
    if (hold_s && hoff_stats_get(d.ctx, &st) == 0)
        for (unsigned t = 0; t < hold_s; t++)
            sleep(1);
    if ((rc = hoff_shutdown(d.ctx)) != 0)
        fprintf(stderr, "hoff-demo: warning: hoff_shutdown: %s\n", hoff_strerror(rc));
    free(d.acts);
    free(d.rep);
    free(params);
    if (d.bad.found)
        return 1;
    if (!within_budget) {
        fprintf(stderr, "hoff-demo: peak resident offload bytes %s exceed the budget %s\n",
                SZ(st.peak_resident_bytes), SZ(d.budget));
        return 1;
    }
    return params_ok ? 0 : 1;
}
