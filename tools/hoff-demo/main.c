/* main.c — hoff-demo's entry: the options, the configuration and the budget, then the run: parameters in the
 * device pool, the steps, and the report.  Threading: single-threaded (the library's issuing thread runs
 * behind the API). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoff-demo.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-demo [options]\n"
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

static int parse_uint(const char *opt, const char *s, unsigned min, unsigned max, unsigned *out) {
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "hoff-demo: --%s: expected an integer in [%u, %u], got '%s'\n", opt, min, max, s);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* What the command line asks for besides the run's own options (struct demo). */
struct demo_args {
    const char *budget, *backend; /* --budget, --backend (NULL: not given) */
    unsigned step_delay_ms, hold_s;
};

#define DEMO_HELP_SHOWN (-1)

/* The options into d and a.  0, DEMO_HELP_SHOWN (--help printed) or 2 (reported). */
static int parse_args(int argc, char **argv, struct demo *d, struct demo_args *a) {
    static const struct option longopts[] = {
        {"layers", required_argument, NULL, 'L'},    {"hidden", required_argument, NULL, 'H'},
        {"seq", required_argument, NULL, 'S'},       {"batch", required_argument, NULL, 'B'},
        {"steps", required_argument, NULL, 'n'},     {"budget", required_argument, NULL, 'b'},
        {"backend", required_argument, NULL, 'k'},   {"tflops", required_argument, NULL, 't'},
        {"lookahead", required_argument, NULL, 'a'}, {"json", no_argument, NULL, 'j'},
        {"corrupt", no_argument, NULL, 'c'},         {"help", no_argument, NULL, 'h'},
        {"mode", required_argument, NULL, 'm'},      {"step-delay", required_argument, NULL, 'D'},
        {"hold", required_argument, NULL, 'W'},      {NULL, 0, NULL, 0},
    };
    int opt;

    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'L':
            if (parse_uint("layers", optarg, 1, DEMO_MAX_LAYERS, &d->layers))
                return 2;
            break;
        case 'H':
            if (parse_uint("hidden", optarg, 8, 1u << 17, &d->hidden))
                return 2;
            break;
        case 'S':
            if (parse_uint("seq", optarg, 1, 1u << 20, &d->seq))
                return 2;
            break;
        case 'B':
            if (parse_uint("batch", optarg, 1, 4096, &d->batch))
                return 2;
            break;
        case 'n':
            if (parse_uint("steps", optarg, 1, 1000000, &d->steps))
                return 2;
            break;
        case 'b': a->budget = optarg; break;
        case 'a':
            if (parse_uint("lookahead", optarg, 0, DEMO_MAX_LAYERS, &d->lookahead))
                return 2;
            break;
        case 'k': a->backend = optarg; break;
        case 't': {
            char *end;
            d->tflops = strtod(optarg, &end);
            if (end == optarg || *end ||
                !(d->tflops >= HOFF__SYNTH_TFLOPS_MIN && d->tflops <= HOFF__SYNTH_TFLOPS_MAX)) {
                fprintf(stderr, "hoff-demo: --tflops: expected a number from %g to %g, got '%s'\n",
                        HOFF__SYNTH_TFLOPS_MIN, HOFF__SYNTH_TFLOPS_MAX, optarg);
                return 2;
            }
            break;
        }
        case 'm':
            if (strcmp(optarg, "plan") == 0)
                d->mode = MODE_PLAN;
            else if (strcmp(optarg, "manual") == 0)
                d->mode = MODE_MANUAL;
            else {
                fprintf(stderr, "hoff-demo: --mode: expected plan or manual, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'j': d->json = 1; break;
        case 'c': d->corrupt = 1; break;
        case 'D':
            if (parse_uint("step-delay", optarg, 0, 3600000, &a->step_delay_ms))
                return 2;
            break;
        case 'W':
            if (parse_uint("hold", optarg, 0, 86400, &a->hold_s))
                return 2;
            break;
        case 'h': usage(stdout); return DEMO_HELP_SHOWN;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hoff-demo: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return 0;
}

/* The budget: --budget, else HOFF_BUDGET, else 25% of the peak (d->act_peak),
 * into cfg and d->budget.  0 or 2 (reported). */
static int set_budget(struct demo *d, struct hoff_config *cfg, const char *budget_arg) {
    char err[256];
    int rc;

    err[0] = '\0';
    if (budget_arg || !getenv("HOFF_BUDGET") || !*getenv("HOFF_BUDGET")) {
        const char *b = budget_arg ? budget_arg : "25%";
        size_t n = strlen(b);

        if (n > 0 && b[n - 1] == '%') {
            char *end, num[32];
            double pct = strtod(b, &end);
            /* "%" alone and "0%" are no percentage (a budget of 0 would mean no limit). */
            if (end == b || end != b + n - 1 || !(pct > 0) || pct > 100) {
                fprintf(stderr,
                        "hoff-demo: --budget: expected a size (512M, 2G; 0 = no limit) or a "
                        "percentage of the activation peak in (0%%, 100%%], got '%s'\n",
                        b);
                return 2;
            }
            d->budget_pct = pct;
            {
                uint64_t bytes = (uint64_t)((double)d->act_peak * pct / 100.0);

                snprintf(num, sizeof num, "%" PRIu64, bytes ? bytes : 1); /* 0 would mean no limit */
            }
            rc = hoff_config_set(cfg, "budget", num, err, sizeof err);
        } else {
            rc = hoff_config_set(cfg, "budget", b, err, sizeof err);
        }
        if (rc) {
            fprintf(stderr, "hoff-demo: --budget: %s\n", err[0] ? err : hoff_strerror(rc));
            return 2;
        }
    }
    d->budget = cfg->budget_bytes;
    {
        size_t largest = 0;
        for (int j = 0; j < d->nspec; j++)
            if (d->spec[j].candidate && d->spec[j].usable > largest)
                largest = d->spec[j].usable;
        if (d->budget && d->budget < largest)
            fprintf(stderr,
                    "hoff-demo: warning: the budget (%s) is smaller than one activation "
                    "(%s): it cannot be kept\n",
                    SZ(d->budget), SZ(largest));
    }
    return 0;
}

/* Configuration: defaults, then HOFF_*, then the options; the workload, its
 * block sizes and the budget.  0 or the exit status (reported). */
static int configure(struct demo *d, struct hoff_config *cfg, const struct demo_args *a) {
    const char *what = NULL;
    char err[256];
    int rc;
    uint64_t total_plan;
    long pages = sysconf(_SC_PHYS_PAGES), pagesz = sysconf(_SC_PAGESIZE);

    hoff_config_init(cfg);
    err[0] = '\0';
    if ((rc = hoff_config_from_env(cfg, err, sizeof err)) != 0) {
        fprintf(stderr, "hoff-demo: %s\n", err[0] ? err : hoff_strerror(rc));
        return 2;
    }
    if (a->backend && (rc = hoff_config_set(cfg, "backend", a->backend, err, sizeof err)) != 0) {
        fprintf(stderr, "hoff-demo: --backend: %s\n", err[0] ? err : hoff_strerror(rc));
        return 2;
    }

    d->plan_thread = cfg->plan_thread;
    build_workload(d, cfg->managed_min_bytes);
    if (d->step_compute_ns > (double)HOFF__STEP_NS_MAX) {
        fprintf(stderr,
                "hoff-demo: --tflops %g: a step of this model would compute for %.3g s, past %s; raise "
                "--tflops or make the model smaller\n",
                d->tflops, d->step_compute_ns / 1e9, HOFF__STEP_NS_MAX_TEXT);
        return 2;
    }
    total_plan = d->param_bytes + d->act_bytes_layer * d->layers;
    if (pages > 0 && pagesz > 0 && total_plan > (uint64_t)pages * (uint64_t)pagesz / 2) {
        fprintf(stderr,
                "hoff-demo: the workload needs %s (parameters %s, activations %s), more "
                "than half of this machine's memory; use smaller --layers/--hidden/--seq/--batch\n",
                SZ(total_plan), SZ(d->param_bytes), SZ(d->act_bytes_layer * d->layers));
        return 2;
    }
    if ((rc = probe_sizes(d, cfg, &what)) != 0)
        return fail_call(what, rc) + (rc == -EINVAL); /* a bad configuration: 2 */
    d->act_peak = d->cand_usable_layer * d->layers;
    return set_budget(d, cfg, a->budget);
}

/* Parameters live across steps: the plain device pool.  0 or 1 (reported). */
static int alloc_params(struct demo *d, void **params) {
    size_t h = d->hidden, sizes[6] = {3 * h * h * 2, h * h * 2, 4 * h * h * 2, 4 * h * h * 2, 2 * h * 2, 2 * h * 2};

    for (uint64_t i = 0; i < d->nparams; i++) {
        params[i] = hoff_malloc_flags(d->ctx, sizes[i % 6], d->stream, HOFF_ALLOC_DEVICE);
        if (!params[i])
            return fail_call("hoff_malloc_flags (parameters)", errno ? -errno : -ENOMEM);
    }
    return 0;
}

/* Every parameter is freed; 1 when each stayed on the device and refused eviction. */
static int free_params(struct demo *d, void **params) {
    int params_ok = 1;

    for (uint64_t i = 0; i < d->nparams; i++) {
        int res = hoff_residency(d->ctx, params[i]);
        if (res != HOFF_RES_DEVICE && res != -EINVAL)
            params_ok = 0;
        if (hoff_evict(d->ctx, params[i], d->stream) != -EPERM)
            params_ok = 0;
        hoff_free(d->ctx, params[i], d->stream);
    }
    return params_ok;
}

/* The steps, each reported as it ends.  0 or 1 (reported). */
static int run_steps(struct demo *d, const struct demo_args *a, const char *planner) {
    struct hoff_stats st0;
    int rc;

    if ((rc = hoff_stats_get(d->ctx, &st0)) != 0)
        return fail_call("hoff_stats_get", rc);
    for (unsigned s = 0; s < d->steps; s++) {
        if (run_step(d, s, &st0, planner))
            return 1;
        if (a->step_delay_ms) {
            fflush(stdout);
            usleep(a->step_delay_ms * 1000u);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    struct demo d = {.layers = 8,
                     .hidden = 1024,
                     .seq = 2048,
                     .batch = 1,
                     .steps = 4,
                     .tflops = 400.0,
                     .budget_pct = -1,
                     .compute_modelled = 1};
    struct demo_args a = {NULL, NULL, 0, 0};
    struct hoff_config cfg;
    struct hoff_stats st;
    int rc, within_budget, params_ok;
    void **params = NULL;

    if ((rc = parse_args(argc, argv, &d, &a)) != 0)
        return rc == DEMO_HELP_SHOWN ? 0 : rc;
    if ((rc = configure(&d, &cfg, &a)) != 0)
        return rc;

    if ((rc = hoff_init(&d.ctx, &cfg)) != 0)
        return fail_call("hoff_init", rc) + (rc == -EINVAL);
    d.acts = calloc((size_t)d.layers * (size_t)d.nspec, sizeof *d.acts);
    d.rep = calloc(d.steps, sizeof *d.rep);
    params = calloc(d.nparams, sizeof *params);
    if (!d.acts || !d.rep || !params) {
        fprintf(stderr, "hoff-demo: out of memory\n");
        return 1;
    }
    if (!d.json)
        print_intro(&d, &cfg);
    if (alloc_params(&d, params) || run_steps(&d, &a, cfg.planner))
        return 1;
    if ((rc = hoff_sync(d.ctx)) != 0)
        return fail_call("hoff_sync", rc);
    if ((rc = hoff_stats_get(d.ctx, &st)) != 0)
        return fail_call("hoff_stats_get", rc);
    params_ok = free_params(&d, params);
    within_budget = d.budget == 0 || st.peak_resident_bytes <= d.budget;
    if (d.json)
        print_json(&d, &st, within_budget, params_ok, cfg.planner);
    else
        print_summary(&d, &st, within_budget, params_ok);

    /* --hold: hoff_stats_get publishes the final counters; with --json they
     * equal the "stats" printed (nothing happened since its hoff_stats_json). */
    fflush(stdout);
    if (a.hold_s && hoff_stats_get(d.ctx, &st) == 0)
        for (unsigned t = 0; t < a.hold_s; t++)
            sleep(1);
    if ((rc = hoff_shutdown(d.ctx)) != 0)
        fprintf(stderr, "hoff-demo: warning: hoff_shutdown: %s\n", hoff_strerror(rc));
    free(d.acts);
    free(d.rep);
    free(params);
    if (d.bad.found)
        return 1;
    if (!within_budget) {
        fprintf(stderr, "hoff-demo: peak resident offload bytes %s exceed the budget %s\n", SZ(st.peak_resident_bytes),
                SZ(d.budget));
        return 1;
    }
    return params_ok ? 0 : 1;
}
