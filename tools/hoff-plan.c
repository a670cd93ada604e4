/* hoff-plan.c — the trace and plan tool: simulate a recorded trace under a budget on the sim backend, show the
 * schedule a planner builds for it, write synthetic transformer traces, and summarise a trace.
 * Threading: single-threaded (the library's issuing thread runs behind the API). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "hoff.h"
#include "plan/plan.h"
#include "trace/drive.h"
#include "trace/synth.h"
#include "mem/pool.h"
#include "trace/trace.h"

#define EXIT_FAIL 1  /* integrity failure, budget exceeded, unreadable trace, runtime error */
#define EXIT_USAGE 2 /* bad usage */

#define GiB ((uint64_t)1 << 30)

static const char *cmd = "hoff-plan";

/* --- formatting ------------------------------------------------------------ */

static const char *fmt_time(uint64_t ns, char *buf, size_t len) {
    if (ns < 1000)
        snprintf(buf, len, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, len, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.2f s", (double)ns / 1e9);
    return buf;
}

#define SZ(x) hoff__fmt_size((x), (char[32]){0}, 32)
#define TM(x) fmt_time((x), (char[32]){0}, 32)

/* A JSON string (quotes included). */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static const char *yes(int v) {
    return v ? "true" : "false";
}

/* --- argument parsing ------------------------------------------------------ */

static int usage_error(const char *sub, const char *fmt, ...) HOFF__PRINTF(2, 3);
static int usage_error(const char *sub, const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "%s %s: ", cmd, sub);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see '%s %s --help')\n", cmd, sub);
    return EXIT_USAGE;
}

/* getopt's complaint, in our words. */
static int bad_option(const char *sub, char **argv, int opt) {
    const char *what = argv[optind - 1];

    if (opt == ':')
        return usage_error(sub, "option '%s' needs a value", what);
    return usage_error(sub, "unknown option '%s'", what);
}

static int parse_u64(const char *sub, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "%s %s: %s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n", cmd, sub, opt,
                min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_pos_double(const char *sub, const char *opt, const char *s, double *out) {
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || !isfinite(v)) {
        fprintf(stderr, "%s %s: %s: expected a positive number, got '%s'\n", cmd, sub, opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_size_opt(const char *sub, const char *opt, const char *s, uint64_t *out) {
    if (hoff__parse_size(s, out) != 0) {
        fprintf(stderr, "%s %s: %s: expected a size such as 4096, 512M or 2G, got '%s'\n", cmd, sub, opt, s);
        return -1;
    }
    return 0;
}

/* --budget SIZE|PCT%: pct < 0 when given as a size. */
struct budget_arg {
    const char *text;
    double pct;
    uint64_t size;
};

static int parse_budget(const char *sub, const char *s, struct budget_arg *b) {
    size_t n = strlen(s);

    b->text = s;
    b->pct = -1;
    b->size = 0;
    if (n > 1 && s[n - 1] == '%') {
        char num[64], *end;
        double v;

        if (n >= sizeof num)
            goto bad;
        memcpy(num, s, n - 1);
        num[n - 1] = '\0';
        errno = 0;
        v = strtod(num, &end);
        if (errno || end == num || *end || !(v > 0) || v > 1000)
            goto bad;
        b->pct = v;
        return 0;
    }
    if (hoff__parse_size(s, &b->size) == 0)
        return 0;
bad:
    fprintf(stderr,
            "%s %s: --budget: expected a size (512M, 2G; 0 = no limit) or a percentage of the trace's "
            "offload peak (25%%, in (0, 1000]), got '%s'\n",
            cmd, sub, s);
    return -1;
}

/* The budget in bytes for trace t. */
static int resolve_budget(const char *sub, const struct budget_arg *b, uint64_t offload_peak, uint64_t *out) {
    if (b->pct < 0) {
        *out = b->size;
        return 0;
    }
    if (offload_peak == 0) {
        fprintf(stderr,
                "%s %s: --budget %s: the trace has no offload candidates (its offload peak is 0); give a size "
                "instead\n",
                cmd, sub, b->text);
        return -1;
    }
    *out = (uint64_t)((double)offload_peak * b->pct / 100.0);
    if (*out == 0)
        *out = 1;
    return 0;
}

static int load_trace(const char *path, struct hoff__trace *t) {
    char err[512];
    int rc;

    hoff__trace_init(t);
    err[0] = '\0';
    rc = hoff__trace_load(t, path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: cannot read trace %s: %s\n", cmd, path,
                err[0] ? err : (hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc)));
        hoff__trace_destroy(t);
        return -1;
    }
    return 0;
}

/* Peak of every live byte (both pools) over the trace. */
static uint64_t total_peak(const struct hoff__trace *t) {
    uint64_t cur = 0, peak = 0;
    size_t i;

    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];

        if (e->kind == HOFF__TEV_ALLOC) {
            cur += e->size;
            if (cur > peak)
                peak = cur;
        } else if (e->kind == HOFF__TEV_FREE && e->block < t->nblocks) {
            cur -= t->blocks[e->block].size;
        }
    }
    return peak;
}

static void list_planners(FILE *f) {
    const struct hoff__planner *p;
    int i;

    for (i = 0; (p = hoff__planner_at(i)) != NULL; i++)
        fprintf(f, "  %-10s %s\n", p->name, p->help ? p->help : "");
}

static int check_planner(const char *sub, const char *name) {
    if (hoff__planner_find(name))
        return 0;
    fprintf(stderr, "%s %s: --planner: unknown planner '%s'; the planners are:\n", cmd, sub, name);
    list_planners(stderr);
    return -1;
}

/* ---------------------------------------------------------------------------
 * simulate
 * ------------------------------------------------------------------------- */

static void usage_simulate(FILE *f) {
    fprintf(f,
            "usage: hoff-plan simulate TRACE --budget SIZE|PCT%% [options]\n"
            "Replays TRACE on the sim backend under a budget: a warmup step that records and plans,\n"
            "then replay steps that fire the plan, every block stamped and checked; and the same\n"
            "trace without a budget for the step time it is compared with.\n"
            "\n"
            "  --budget SIZE|PCT%%  resident offload bytes allowed: a size (512M, 2G; 0 = no limit)\n"
            "                      or a percentage of the trace's offload peak without offload\n"
            "  --host-cap SIZE     host-tier bytes (default: no limit)\n"
            "  --bandwidth GBPS    the sim's H2D and D2H copy engines, and what the planner\n"
            "                      assumes, GB/s (default 50)\n"
            "  --planner NAME      planner (default greedy; 'hoff-plan show --help' lists them)\n"
            "  --steps N           steps to run, the first being the warmup (default 3, >= 2)\n"
            "  --compute-scale X   divide the trace's compute gaps by X (default 1)\n"
            "  --gpu-step MS       scale the compute gaps so a step computes for MS milliseconds\n"
            "  --json              print one JSON object instead of the report\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 ok, 1 integrity failure, replay peak above the budget, unreadable\n"
            "trace or runtime error, 2 bad usage.\n");
}

struct sim_opts {
    const char *trace_path;
    struct budget_arg budget;
    uint64_t host_cap;
    double bandwidth;
    const char *planner;
    uint64_t steps;
    double compute_scale;
    double gpu_step_ms;
    int json;
};

struct sim_run {
    struct hoff__drive_result r;   /* all steps, merged */
    struct hoff_stats last;        /* stats after the run */
    uint64_t last_fired, last_skipped, last_divergent; /* the last step's deltas */
    uint64_t divergent_steps;
};

static int make_ctx(const struct sim_opts *so, uint64_t budget, uint64_t device_bytes, hoff_ctx **ctx) {
    struct hoff_config cfg;
    char err[256];
    int rc;

    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_SIM;
    cfg.sim_device_bytes = device_bytes;
    cfg.sim_h2d_gbps = so->bandwidth;
    cfg.sim_d2h_gbps = so->bandwidth;
    cfg.bandwidth_gbps = so->bandwidth;
    cfg.sim_protect = HOFF_SIM_POISON;
    cfg.oversub_margin_bytes = 0;
    cfg.budget_bytes = budget;
    cfg.host_cap_bytes = so->host_cap;
    err[0] = '\0';
    if ((rc = hoff_config_set(&cfg, "planner", so->planner, err, sizeof err)) != 0) {
        fprintf(stderr, "%s simulate: --planner: %s\n", cmd, err[0] ? err : hoff_strerror(rc));
        return rc;
    }
    if ((rc = hoff_init(ctx, &cfg)) != 0) {
        fprintf(stderr, "%s simulate: cannot create the sim context: %s\n", cmd, hoff_last_error());
        return rc;
    }
    return 0;
}

/* Append src's steps to dst (dst->step has room for all). */
static void merge(struct hoff__drive_result *dst, const struct hoff__drive_result *src) {
    int k;

    for (k = 0; k < src->steps; k++)
        dst->step[dst->steps++] = src->step[k];
    dst->peak_device_bytes = src->peak_device_bytes > dst->peak_device_bytes ? src->peak_device_bytes
                                                                             : dst->peak_device_bytes;
    dst->blocks_verified += src->blocks_verified;
    dst->bytes_verified += src->bytes_verified;
    dst->integrity_errors += src->integrity_errors;
    if (!dst->first_error[0] && src->first_error[0])
        memcpy(dst->first_error, src->first_error, sizeof dst->first_error);
}

/* Drive t through ctx for steps steps; the last step is driven on its own
 * so that its action counters are exact. */
static int run_sim(hoff_ctx *ctx, const struct hoff__trace *t, const struct sim_opts *so, int steps, int verify,
                   struct sim_run *out) {
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    struct hoff_stats s0;
    int rc, k;

    memset(out, 0, sizeof *out);
    out->r.step = calloc((size_t)steps, sizeof *out->r.step);
    if (!out->r.step)
        return -ENOMEM;
    memset(&o, 0, sizeof o);
    o.verify = verify;
    o.compute_scale = so->compute_scale;
    o.gpu_step_ns = so->gpu_step_ms > 0 ? (uint64_t)(so->gpu_step_ms * 1e6 + 0.5) : 0;
    for (k = 0; k < 2; k++) {
        o.steps = k == 0 ? steps - 1 : 1;
        if ((rc = hoff_stats_get(ctx, &s0)) != 0)
            return rc;
        rc = hoff__trace_drive(ctx, t, &o, &r);
        merge(&out->r, &r);
        hoff__drive_result_free(&r);
        if (rc)
            return rc;
        if ((rc = hoff_stats_get(ctx, &out->last)) != 0)
            return rc;
        out->last_fired = out->last.actions_fired - s0.actions_fired;
        out->last_skipped = out->last.actions_skipped - s0.actions_skipped;
        out->last_divergent = out->last.divergent_steps - s0.divergent_steps;
    }
    out->divergent_steps = out->last.divergent_steps;
    for (k = 1; k < out->r.steps; k++)
        if (out->r.step[k].peak_resident_bytes > out->r.peak_resident_bytes)
            out->r.peak_resident_bytes = out->r.step[k].peak_resident_bytes;
    return 0;
}

static const char *state_name(int st) {
    switch (st) {
    case HOFF_PLAN_NONE:
        return "none";
    case HOFF_PLAN_WARMUP:
        return "warmup";
    case HOFF_PLAN_REPLAY:
        return "replay";
    case HOFF_PLAN_FALLBACK:
        return "fallback";
    default:
        return "unknown";
    }
}

static void json_step(FILE *f, const struct hoff__drive_step *s) {
    fprintf(f,
            "{\"state\":\"%s\",\"step_ns\":%" PRIu64 ",\"compute_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64
            ",\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64
            ",\"faults\":%" PRIu64 ",\"late_prefetches\":%" PRIu64 ",\"peak_resident_bytes\":%" PRIu64 "}",
            state_name(s->plan_state), s->step_ns, s->compute_ns, s->stall_ns, s->bytes_d2h, s->bytes_h2d,
            s->evictions, s->prefetches, s->faults, s->late_prefetches, s->peak_resident_bytes);
}

static void human_step(int k, const struct hoff__drive_step *s) {
    printf("step %d (%s): %s (compute %s, stall %s), evicted %s, prefetched %s, faults %" PRIu64
           ", late prefetches %" PRIu64 ", peak resident %s\n",
           k, state_name(s->plan_state), TM(s->step_ns), TM(s->compute_ns), TM(s->stall_ns), SZ(s->bytes_d2h),
           SZ(s->bytes_h2d), s->faults, s->late_prefetches, SZ(s->peak_resident_bytes));
}

static int cmd_simulate(int argc, char **argv) {
    static const struct option longopts[] = {
        {"budget", required_argument, NULL, 'b'},  {"host-cap", required_argument, NULL, 'H'},
        {"bandwidth", required_argument, NULL, 'w'}, {"planner", required_argument, NULL, 'p'},
        {"steps", required_argument, NULL, 's'},   {"compute-scale", required_argument, NULL, 'c'},
        {"gpu-step", required_argument, NULL, 'g'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *sub = "simulate";
    struct sim_opts so;
    struct hoff__trace t;
    struct sim_run run, base;
    hoff_ctx *ctx = NULL;
    uint64_t budget, offload_peak, device_bytes, tpeak, no_offload_ns;
    size_t peak_ev;
    int opt, have_budget = 0, rc, exit_code, integrity_ok, within, last;
    const struct hoff__drive_step *ls, *ws;

    memset(&so, 0, sizeof so);
    so.bandwidth = 50.0;
    so.planner = "greedy";
    so.steps = 3;
    so.compute_scale = 1.0;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (parse_budget(sub, optarg, &so.budget))
                return EXIT_USAGE;
            have_budget = 1;
            break;
        case 'H':
            if (parse_size_opt(sub, "--host-cap", optarg, &so.host_cap))
                return EXIT_USAGE;
            break;
        case 'w':
            if (parse_pos_double(sub, "--bandwidth", optarg, &so.bandwidth))
                return EXIT_USAGE;
            break;
        case 'p':
            so.planner = optarg;
            break;
        case 's':
            if (parse_u64(sub, "--steps", optarg, 2, 1000, &so.steps))
                return EXIT_USAGE;
            break;
        case 'c':
            if (parse_pos_double(sub, "--compute-scale", optarg, &so.compute_scale))
                return EXIT_USAGE;
            break;
        case 'g':
            if (parse_pos_double(sub, "--gpu-step", optarg, &so.gpu_step_ms))
                return EXIT_USAGE;
            break;
        case 'j':
            so.json = 1;
            break;
        case 'h':
            usage_simulate(stdout);
            return 0;
        default:
            return bad_option(sub, argv, opt);
        }
    }
    if (optind >= argc)
        return usage_error(sub, "no trace file given");
    if (optind + 1 < argc)
        return usage_error(sub, "one trace file expected, got also '%s'", argv[optind + 1]);
    if (!have_budget)
        return usage_error(sub, "--budget is required");
    if (check_planner(sub, so.planner))
        return EXIT_USAGE;
    so.trace_path = argv[optind];
    if (load_trace(so.trace_path, &t))
        return EXIT_FAIL;
    offload_peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, &peak_ev);
    if (resolve_budget(sub, &so.budget, offload_peak, &budget)) {
        hoff__trace_destroy(&t);
        return EXIT_USAGE;
    }
    tpeak = total_peak(&t);
    device_bytes = 80 * GiB;
    if (tpeak > device_bytes / 2)
        device_bytes = tpeak * 2;

    exit_code = EXIT_FAIL;
    memset(&run, 0, sizeof run);
    memset(&base, 0, sizeof base);
    /* The run under the budget. */
    if (make_ctx(&so, budget, device_bytes, &ctx))
        goto out;
    rc = run_sim(ctx, &t, &so, (int)so.steps, 1, &run);
    hoff_shutdown(ctx);
    ctx = NULL;
    if (rc) {
        fprintf(stderr, "%s simulate: %s: %s\n", cmd, so.trace_path, hoff_last_error());
        goto out;
    }
    /* The same trace without a budget: the step time offloading is compared with. */
    if (make_ctx(&so, 0, device_bytes, &ctx))
        goto out;
    rc = run_sim(ctx, &t, &so, 2, 0, &base);
    hoff_shutdown(ctx);
    ctx = NULL;
    if (rc) {
        fprintf(stderr, "%s simulate: %s (no budget): %s\n", cmd, so.trace_path, hoff_last_error());
        goto out;
    }
    no_offload_ns = base.r.step[base.r.steps - 1].step_ns;

    last = run.r.steps - 1;
    ls = &run.r.step[last];
    ws = &run.r.step[0];
    integrity_ok = run.r.integrity_errors == 0;
    within = budget == 0 || run.r.peak_resident_bytes <= budget;
    exit_code = integrity_ok && within ? 0 : EXIT_FAIL;

    if (so.json) {
        int k;

        printf("{\"trace\":");
        json_str(stdout, so.trace_path);
        printf(",\"planner\":");
        json_str(stdout, so.planner);
        printf(",\"events\":%zu,\"blocks\":%" PRIu32 ",\"steps\":%d,\"bandwidth_gbps\":%g", t.nev, t.nblocks,
               run.r.steps, so.bandwidth);
        printf(",\"offload_peak_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64, offload_peak, budget);
        if (so.budget.pct >= 0)
            printf(",\"budget_pct\":%g", so.budget.pct);
        printf(",\"host_cap_bytes\":%" PRIu64 ",\"peak_resident_bytes\":%" PRIu64 ",\"within_budget\":%s"
               ",\"peak_device_bytes\":%" PRIu64,
               so.host_cap, run.r.peak_resident_bytes, yes(within), run.r.peak_device_bytes);
        printf(",\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64 ",\"evictions\":%" PRIu64
               ",\"prefetches\":%" PRIu64,
               ls->bytes_d2h, ls->bytes_h2d, ls->evictions, ls->prefetches);
        printf(",\"actions\":%" PRIu64 ",\"actions_fired\":%" PRIu64 ",\"actions_skipped\":%" PRIu64,
               run.last.plan_actions, run.last_fired, run.last_skipped);
        printf(",\"faults\":%" PRIu64 ",\"late_prefetches\":%" PRIu64 ",\"stall_ns\":%" PRIu64
               ",\"compute_ns\":%" PRIu64 ",\"step_ns\":%" PRIu64 ",\"step_ns_no_offload\":%" PRIu64,
               ls->faults, ls->late_prefetches, ls->stall_ns, ls->compute_ns, ls->step_ns, no_offload_ns);
        printf(",\"plan_ns\":%" PRIu64 ",\"feasible\":%s,\"plan_peak_bytes\":%" PRIu64 ",\"plans\":%" PRIu64
               ",\"replans\":%" PRIu64 ",\"divergent_steps\":%" PRIu64 ",\"state\":\"%s\"",
               run.last.plan_ns, yes(run.last.plan_feasible != 0), run.last.plan_peak_bytes, run.last.plans,
               run.last.replans, run.divergent_steps, state_name(ls->plan_state));
        printf(",\"integrity_ok\":%s,\"integrity_errors\":%" PRIu64 ",\"blocks_verified\":%" PRIu64
               ",\"bytes_verified\":%" PRIu64 ",\"first_error\":",
               yes(integrity_ok), run.r.integrity_errors, run.r.blocks_verified, run.r.bytes_verified);
        json_str(stdout, run.r.first_error);
        printf(",\"warmup\":");
        json_step(stdout, ws);
        printf(",\"per_step\":[");
        for (k = 0; k < run.r.steps; k++) {
            if (k)
                putchar(',');
            json_step(stdout, &run.r.step[k]);
        }
        printf("]}\n");
    } else {
        int k;
        double slow = no_offload_ns ? 100.0 * ((double)ls->step_ns - (double)no_offload_ns) / (double)no_offload_ns
                                    : 0.0;

        printf("trace: %s (%zu events, %" PRIu32 " blocks, backend %s)\n", so.trace_path, t.nev, t.nblocks,
               t.backend[0] ? t.backend : "?");
        printf("sim: copy engines %g GB/s H2D and D2H, device %s; planner %s; %d steps (warmup + %d replays)\n",
               so.bandwidth, SZ(device_bytes), so.planner, run.r.steps, run.r.steps - 1);
        printf("offload peak without offload: %s (event %zu)\n", SZ(offload_peak), peak_ev);
        if (budget == 0)
            printf("budget: none\n");
        else if (so.budget.pct >= 0)
            printf("budget: %s (%g%% of the offload peak)\n", SZ(budget), so.budget.pct);
        else
            printf("budget: %s\n", SZ(budget));
        printf("plan: %" PRIu64 " actions, %s, plan peak %s, planned in %s\n", run.last.plan_actions,
               run.last.plan_feasible ? "feasible" : "NOT feasible", SZ(run.last.plan_peak_bytes),
               TM(run.last.plan_ns));
        for (k = 0; k < run.r.steps; k++)
            human_step(k, &run.r.step[k]);
        printf("last replay step (step %d):\n", last);
        printf("  peak resident offload bytes: %s over the replay steps (%s)\n", SZ(run.r.peak_resident_bytes),
               within ? (budget ? "within budget" : "no budget") : "OVER BUDGET");
        printf("  peak device bytes: %s (both pools and resident offload bytes, whole run)\n",
               SZ(run.r.peak_device_bytes));
        printf("  evicted: %s in %" PRIu64 " evictions\n", SZ(ls->bytes_d2h), ls->evictions);
        printf("  prefetched: %s in %" PRIu64 " prefetches\n", SZ(ls->bytes_h2d), ls->prefetches);
        printf("  actions: %" PRIu64 " planned, %" PRIu64 " fired, %" PRIu64 " skipped\n", run.last.plan_actions,
               run.last_fired, run.last_skipped);
        printf("  faults: %" PRIu64 "\n", ls->faults);
        printf("  late prefetches: %" PRIu64 "\n", ls->late_prefetches);
        printf("  exposed stall: %s\n", TM(ls->stall_ns));
        printf("  step time: %s vs %s without offload (%+.1f%%)\n", TM(ls->step_ns), TM(no_offload_ns), slow);
        printf("  divergent steps: %" PRIu64 " (whole run)\n", run.divergent_steps);
        if (integrity_ok)
            printf("integrity: OK (%" PRIu64 " block checks, %s verified)\n", run.r.blocks_verified,
                   SZ(run.r.bytes_verified));
        else
            printf("integrity: FAILED (%" PRIu64 " wrong stamps; first: %s)\n", run.r.integrity_errors,
                   run.r.first_error);
    }
out:
    free(run.r.step);
    free(base.r.step);
    hoff__trace_destroy(&t);
    return exit_code;
}

/* ---------------------------------------------------------------------------
 * show
 * ------------------------------------------------------------------------- */

static void usage_show(FILE *f) {
    fprintf(f,
            "usage: hoff-plan show TRACE --budget SIZE|PCT%% [options]\n"
            "Runs a planner on TRACE and prints the schedule: every event with the actions\n"
            "planned before and after it, then a summary.\n"
            "\n"
            "  --budget SIZE|PCT%%       resident offload bytes allowed: a size (512M, 2G) or a\n"
            "                           percentage of the trace's offload peak\n"
            "  --planner NAME           planner (default greedy)\n"
            "  --host-cap SIZE          host-tier bytes (default: no limit)\n"
            "  --bandwidth GBPS         H2D and D2H bandwidth for timed planners (default 50)\n"
            "  --guard-after-alloc N    blocks without access marks: events after the alloc\n"
            "                           before an eviction (default 1)\n"
            "  --guard-before-free N    ...and events before the free by which they are back\n"
            "                           (default 1)\n"
            "  --actions-only           list only the events that have actions\n"
            "  --json                   print one JSON object\n"
            "  -h, --help               this text\n"
            "\n"
            "Planners:\n");
    list_planners(f);
    fprintf(f, "\nExit status: 0 ok, 1 unreadable trace or planner error, 2 bad usage.\n");
}

static const char *act_name(int kind) {
    switch (kind) {
    case HOFF__ACT_EVICT:
        return "evict";
    case HOFF__ACT_PREFETCH:
        return "prefetch";
    case HOFF__ACT_RELEASE:
        return "release";
    default:
        return "?";
    }
}

static const char *ev_kind_name(const struct hoff__tev *e) {
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        return "alloc";
    case HOFF__TEV_FREE:
        return "free";
    case HOFF__TEV_ACCESS:
        return e->flags & HOFF__TEV_WRITE ? "write" : "read";
    case HOFF__TEV_OP:
        return "op";
    case HOFF__TEV_REGION_BEGIN:
        return "region_begin";
    case HOFF__TEV_REGION_END:
        return "region_end";
    default:
        return "?";
    }
}

static const char *op_name(const struct hoff__trace *t, const struct hoff__tev *e) {
    return e->name != UINT32_MAX && e->name < t->nnames ? t->names[e->name] : "";
}

/* One line of text for event e. */
static const char *ev_text(const struct hoff__trace *t, size_t i, char *buf, size_t len) {
    const struct hoff__tev *e = &t->ev[i];
    const struct hoff__tblock *b = e->block < t->nblocks ? &t->blocks[e->block] : NULL;

    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        snprintf(buf, len, "alloc b%" PRIu32 " %s %s%s%s", e->block, SZ(e->size), e->pool ? "managed" : "device",
                 b && b->pinned ? " pinned" : "", b && b->retained ? " retained" : "");
        break;
    case HOFF__TEV_FREE:
    case HOFF__TEV_ACCESS:
        snprintf(buf, len, "%s b%" PRIu32, ev_kind_name(e), e->block);
        break;
    case HOFF__TEV_OP:
        snprintf(buf, len, "op %s", op_name(t, e));
        break;
    case HOFF__TEV_REGION_BEGIN:
        snprintf(buf, len, "region begin");
        break;
    case HOFF__TEV_REGION_END:
        snprintf(buf, len, "region end");
        break;
    default:
        snprintf(buf, len, "kind %d", e->kind);
        break;
    }
    return buf;
}

/* Resident offload bytes at each event's peak point (after the actions
 * before it and the event itself, before the actions after it), with
 * instant transfers: the model of hoff__schedule_peak. */
static int resident_per_event(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *res) {
    uint8_t *st = calloc(t->nblocks ? t->nblocks : 1, 1); /* 1 resident, 0 not */
    uint64_t cur = 0;
    size_t i, k = 0;

    if (!st)
        return -ENOMEM;
    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];
        int pass;

        for (pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                if (e->kind == HOFF__TEV_ALLOC && e->block < t->nblocks) {
                    st[e->block] = 1;
                    if (e->pool == 1)
                        cur += e->size;
                }
                res[i] = cur;
                if (e->kind == HOFF__TEV_FREE && e->block < t->nblocks) {
                    if (st[e->block] && t->blocks[e->block].pool == 1)
                        cur -= t->blocks[e->block].size;
                    st[e->block] = 0;
                }
            }
            for (; k < s->nact && s->act[k].ev == i && (pass == 1 || s->act[k].when == HOFF__ACT_BEFORE); k++) {
                const struct hoff__action *a = &s->act[k];

                if (a->block >= t->nblocks)
                    continue;
                if (a->kind == HOFF__ACT_PREFETCH && !st[a->block]) {
                    st[a->block] = 1;
                    cur += t->blocks[a->block].size;
                } else if (a->kind != HOFF__ACT_PREFETCH && st[a->block]) {
                    st[a->block] = 0;
                    cur -= t->blocks[a->block].size;
                }
            }
        }
    }
    free(st);
    return 0;
}

static void print_actions(const struct hoff__schedule *s, size_t from, size_t to, int when, int json) {
    size_t k;
    int n = 0;

    for (k = from; k < to; k++) {
        if (s->act[k].when != when)
            continue;
        if (json)
            printf("%s{\"kind\":\"%s\",\"block\":%" PRIu32 ",\"copy_ev\":%" PRIu32 "}", n ? "," : "",
                   act_name(s->act[k].kind), s->act[k].block, s->act[k].copy_ev);
        else
            printf("%s%s b%" PRIu32, n ? ", " : "", act_name(s->act[k].kind), s->act[k].block);
        n++;
    }
}

static int cmd_show(int argc, char **argv) {
    static const struct option longopts[] = {
        {"budget", required_argument, NULL, 'b'},
        {"planner", required_argument, NULL, 'p'},
        {"host-cap", required_argument, NULL, 'H'},
        {"bandwidth", required_argument, NULL, 'w'},
        {"guard-after-alloc", required_argument, NULL, 'A'},
        {"guard-before-free", required_argument, NULL, 'F'},
        {"actions-only", no_argument, NULL, 'a'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *sub = "show", *planner = "greedy", *path;
    struct budget_arg ba;
    struct hoff_config defaults;
    struct hoff__plan_opts po;
    struct hoff__schedule s;
    struct hoff__trace t;
    const struct hoff__planner *pl;
    uint64_t offload_peak, ga, gb, *res = NULL;
    double bw = 50.0;
    size_t nopeak_ev, i, k, k0, nact_kind[HOFF__ACT_KIND_COUNT] = {0};
    int opt, have_budget = 0, json = 0, actions_only = 0, rc, first = 1;
    char buf[160];

    hoff_config_init(&defaults);
    memset(&po, 0, sizeof po);
    ga = defaults.guard_after_alloc;
    gb = defaults.guard_before_free;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (parse_budget(sub, optarg, &ba))
                return EXIT_USAGE;
            have_budget = 1;
            break;
        case 'p':
            planner = optarg;
            break;
        case 'H':
            if (parse_size_opt(sub, "--host-cap", optarg, &po.host_cap_bytes))
                return EXIT_USAGE;
            break;
        case 'w':
            if (parse_pos_double(sub, "--bandwidth", optarg, &bw))
                return EXIT_USAGE;
            break;
        case 'A':
            if (parse_u64(sub, "--guard-after-alloc", optarg, 0, 1000000, &ga))
                return EXIT_USAGE;
            break;
        case 'F':
            if (parse_u64(sub, "--guard-before-free", optarg, 0, 1000000, &gb))
                return EXIT_USAGE;
            break;
        case 'a':
            actions_only = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            usage_show(stdout);
            return 0;
        default:
            return bad_option(sub, argv, opt);
        }
    }
    if (optind >= argc)
        return usage_error(sub, "no trace file given");
    if (optind + 1 < argc)
        return usage_error(sub, "one trace file expected, got also '%s'", argv[optind + 1]);
    if (!have_budget)
        return usage_error(sub, "--budget is required");
    if (check_planner(sub, planner))
        return EXIT_USAGE;
    pl = hoff__planner_find(planner);
    path = argv[optind];
    if (load_trace(path, &t))
        return EXIT_FAIL;
    offload_peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, &nopeak_ev);
    if (resolve_budget(sub, &ba, offload_peak, &po.budget_bytes)) {
        hoff__trace_destroy(&t);
        return EXIT_USAGE;
    }
    po.guard_after_alloc = (uint32_t)ga;
    po.guard_before_free = (uint32_t)gb;
    po.block_bytes = hoff__pool_block_bytes; /* as the runtime plans */
    po.h2d_gbps = bw;
    po.d2h_gbps = bw;
    hoff__schedule_init(&s);
    rc = pl->build(&t, &po, &s);
    if (rc) {
        fprintf(stderr, "%s show: planner %s failed on %s: %s\n", cmd, pl->name, path,
                hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        hoff__schedule_destroy(&s);
        hoff__trace_destroy(&t);
        return EXIT_FAIL;
    }
    res = calloc(t.nev ? t.nev : 1, sizeof *res);
    if (!res || resident_per_event(&t, &s, res)) {
        fprintf(stderr, "%s show: out of memory\n", cmd);
        free(res);
        hoff__schedule_destroy(&s);
        hoff__trace_destroy(&t);
        return EXIT_FAIL;
    }
    for (k = 0; k < s.nact; k++)
        if (s.act[k].kind < HOFF__ACT_KIND_COUNT)
            nact_kind[s.act[k].kind]++;

    if (json) {
        printf("{\"trace\":");
        json_str(stdout, path);
        printf(",\"planner\":");
        json_str(stdout, pl->name);
        printf(",\"budget_bytes\":%" PRIu64, po.budget_bytes);
        printf(",\"events\":[");
    } else {
        printf("trace %s: %zu events, %" PRIu32 " blocks; planner %s, budget %s\n", path, t.nev, t.nblocks,
               pl->name, po.budget_bytes ? SZ(po.budget_bytes) : "none");
        printf("%8s  %-40s %10s  %s\n", "event", "what", "resident", "actions");
    }
    for (i = 0, k = 0; i < t.nev; i++) {
        const struct hoff__tev *e = &t.ev[i];

        k0 = k;
        while (k < s.nact && s.act[k].ev < i)
            k0 = ++k; /* out of order cannot happen in a sorted schedule */
        while (k < s.nact && s.act[k].ev == i)
            k++;
        if (actions_only && k == k0)
            continue;
        if (json) {
            printf("%s{\"ev\":%zu,\"kind\":\"%s\"", first ? "" : ",", i, ev_kind_name(e));
            if (e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_FREE || e->kind == HOFF__TEV_ACCESS)
                printf(",\"block\":%" PRIu32, e->block);
            if (e->kind == HOFF__TEV_ALLOC)
                printf(",\"size\":%" PRIu64 ",\"pool\":\"%s\"", e->size, e->pool ? "managed" : "device");
            if (e->kind == HOFF__TEV_OP) {
                printf(",\"name\":");
                json_str(stdout, op_name(&t, e));
            }
            printf(",\"resident_bytes\":%" PRIu64 ",\"before\":[", res[i]);
            print_actions(&s, k0, k, HOFF__ACT_BEFORE, 1);
            printf("],\"after\":[");
            print_actions(&s, k0, k, HOFF__ACT_AFTER, 1);
            printf("]}");
        } else {
            int nb = 0, na = 0;
            size_t j;

            for (j = k0; j < k; j++) {
                nb += s.act[j].when == HOFF__ACT_BEFORE;
                na += s.act[j].when == HOFF__ACT_AFTER;
            }
            printf("%8zu  %-40s %10s  ", i, ev_text(&t, i, buf, sizeof buf), SZ(res[i]));
            if (nb) {
                printf("before: ");
                print_actions(&s, k0, k, HOFF__ACT_BEFORE, 0);
            }
            if (na) {
                printf("%safter: ", nb ? "; " : "");
                print_actions(&s, k0, k, HOFF__ACT_AFTER, 0);
            }
            putchar('\n');
        }
        first = 0;
    }
    if (json) {
        printf("],\"summary\":{\"feasible\":%s,\"peak_bytes\":%" PRIu64 ",\"peak_ev\":%" PRIu32
               ",\"nopeak_bytes\":%" PRIu64 ",\"offload_peak_bytes\":%" PRIu64 ",\"actions\":%zu,\"evictions\":%zu"
               ",\"prefetches\":%zu,\"releases\":%zu,\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64
               ",\"plan_ns\":%" PRIu64 "}}\n",
               yes(s.feasible), s.peak_bytes, s.peak_ev, s.nopeak_bytes, offload_peak, s.nact,
               nact_kind[HOFF__ACT_EVICT], nact_kind[HOFF__ACT_PREFETCH], nact_kind[HOFF__ACT_RELEASE], s.bytes_d2h,
               s.bytes_h2d, s.plan_ns);
    } else {
        printf("summary:\n");
        printf("  feasible: %s\n", s.feasible ? "yes" : "NO (the budget cannot be met; the peak below is the lowest "
                                                        "the planner reached)");
        printf("  peak: %s at event %" PRIu32 " (%s); without offload %s at event %zu\n", SZ(s.peak_bytes),
               s.peak_ev, s.peak_ev < t.nev ? ev_text(&t, s.peak_ev, buf, sizeof buf) : "-", SZ(offload_peak),
               nopeak_ev);
        printf("  actions: %zu (%zu evictions, %zu prefetches, %zu releases)\n", s.nact, nact_kind[HOFF__ACT_EVICT],
               nact_kind[HOFF__ACT_PREFETCH], nact_kind[HOFF__ACT_RELEASE]);
        printf("  bytes planned: %s D2H, %s H2D\n", SZ(s.bytes_d2h), SZ(s.bytes_h2d));
        printf("  plan time: %s\n", TM(s.plan_ns));
    }
    free(res);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
    return 0;
}

/* ---------------------------------------------------------------------------
 * synth
 * ------------------------------------------------------------------------- */

static void usage_synth(FILE *f) {
    fprintf(f,
            "usage: hoff-plan synth [options] -o FILE\n"
            "Writes the trace of one training step of a synthetic decoder-only transformer\n"
            "(or, with --events, a random training-shaped trace for planner benchmarks).\n"
            "\n"
            "  --layers N          transformer layers (default 8)\n"
            "  --hidden H          hidden size (default 1024)\n"
            "  --seq S             sequence length (default 2048; <= 1024 saves the attention\n"
            "                      probabilities, longer ones model flash attention)\n"
            "  --batch B           micro-batch size (default 1)\n"
            "  --elem-bytes N      bytes per element (default 2, bf16)\n"
            "  --tflops T          compute rate for the event times, TFLOP/s (default 400)\n"
            "  --managed-min SIZE  tensors of at least SIZE are offload candidates (default 1M)\n"
            "  --no-access         no access marks (saved-tensor pack/unpack)\n"
            "  --events N          instead: a random training-shaped trace of about N events\n"
            "  --seed S            its seed (default 1)\n"
            "  -o, --output FILE   where to write the trace (required)\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 ok, 1 the file cannot be written, 2 bad usage.\n");
}

static int cmd_synth(int argc, char **argv) {
    static const struct option longopts[] = {
        {"layers", required_argument, NULL, 'L'},   {"hidden", required_argument, NULL, 'H'},
        {"seq", required_argument, NULL, 'S'},      {"batch", required_argument, NULL, 'B'},
        {"elem-bytes", required_argument, NULL, 'E'}, {"tflops", required_argument, NULL, 'T'},
        {"managed-min", required_argument, NULL, 'M'}, {"no-access", no_argument, NULL, 'n'},
        {"events", required_argument, NULL, 'e'},   {"seed", required_argument, NULL, 'r'},
        {"output", required_argument, NULL, 'o'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *sub = "synth", *out = NULL;
    struct hoff__synth_opts o;
    struct hoff__trace t;
    uint64_t v, nev = 0, seed = 1;
    int opt, rc;

    hoff__synth_defaults(&o);
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'L':
            if (parse_u64(sub, "--layers", optarg, 1, 100000, &v))
                return EXIT_USAGE;
            o.layers = (uint32_t)v;
            break;
        case 'H':
            if (parse_u64(sub, "--hidden", optarg, 1, 1u << 20, &o.hidden))
                return EXIT_USAGE;
            break;
        case 'S':
            if (parse_u64(sub, "--seq", optarg, 1, 1u << 24, &o.seq))
                return EXIT_USAGE;
            break;
        case 'B':
            if (parse_u64(sub, "--batch", optarg, 1, 1u << 20, &o.batch))
                return EXIT_USAGE;
            break;
        case 'E':
            if (parse_u64(sub, "--elem-bytes", optarg, 1, 16, &v))
                return EXIT_USAGE;
            o.elem_bytes = (uint32_t)v;
            break;
        case 'T':
            if (parse_pos_double(sub, "--tflops", optarg, &o.tflops))
                return EXIT_USAGE;
            break;
        case 'M':
            if (parse_size_opt(sub, "--managed-min", optarg, &o.managed_min))
                return EXIT_USAGE;
            break;
        case 'n':
            o.access_marks = 0;
            break;
        case 'e':
            if (parse_u64(sub, "--events", optarg, 16, 100000000, &nev))
                return EXIT_USAGE;
            break;
        case 'r':
            if (parse_u64(sub, "--seed", optarg, 0, UINT64_MAX, &seed))
                return EXIT_USAGE;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            usage_synth(stdout);
            return 0;
        default:
            return bad_option(sub, argv, opt);
        }
    }
    if (optind < argc)
        return usage_error(sub, "unexpected argument '%s'", argv[optind]);
    if (!out)
        return usage_error(sub, "-o FILE is required");
    hoff__trace_init(&t);
    rc = nev ? hoff__synth_events(&t, (size_t)nev, seed) : hoff__synth_transformer(&t, &o);
    if (rc) {
        fprintf(stderr, "%s synth: %s\n", cmd, hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        hoff__trace_destroy(&t);
        return rc == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
    }
    rc = hoff__trace_save(&t, out);
    if (rc) {
        fprintf(stderr, "%s synth: cannot write %s: %s\n", cmd, out, hoff_strerror(rc));
        hoff__trace_destroy(&t);
        return EXIT_FAIL;
    }
    hoff__trace_destroy(&t);
    return 0;
}

/* ---------------------------------------------------------------------------
 * info
 * ------------------------------------------------------------------------- */

static void usage_info(FILE *f) {
    fprintf(f,
            "usage: hoff-plan info TRACE [--json]\n"
            "Summarises a trace: events by kind, blocks by pool, retained and pinned blocks,\n"
            "the peaks without offload, the step time and the header fields.\n"
            "\n"
            "  --json       print one JSON object\n"
            "  -h, --help   this text\n"
            "\n"
            "Exit status: 0 ok, 1 unreadable trace, 2 bad usage.\n");
}

static const char *time_or_unknown(uint64_t ns, char *buf, size_t len) {
    return ns == HOFF__TIME_UNKNOWN ? "unknown" : fmt_time(ns, buf, len);
}

static int cmd_info(int argc, char **argv) {
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *sub = "info", *path;
    struct hoff__trace t;
    size_t kinds[HOFF__TEV_KIND_COUNT] = {0}, peak_ev, i;
    uint64_t managed = 0, device = 0, pinned = 0, retained = 0, retained_bytes = 0, managed_bytes = 0,
             device_bytes = 0, offload_peak, tpeak;
    int opt, json = 0;
    char tb[32], gb[32];

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'j':
            json = 1;
            break;
        case 'h':
            usage_info(stdout);
            return 0;
        default:
            return bad_option(sub, argv, opt);
        }
    }
    if (optind >= argc)
        return usage_error(sub, "no trace file given");
    if (optind + 1 < argc)
        return usage_error(sub, "one trace file expected, got also '%s'", argv[optind + 1]);
    path = argv[optind];
    if (load_trace(path, &t))
        return EXIT_FAIL;
    for (i = 0; i < t.nev; i++)
        if (t.ev[i].kind < HOFF__TEV_KIND_COUNT)
            kinds[t.ev[i].kind]++;
    for (i = 0; i < t.nblocks; i++) {
        const struct hoff__tblock *b = &t.blocks[i];

        if (b->pool == 1) {
            managed++;
            managed_bytes += b->size;
        } else {
            device++;
            device_bytes += b->size;
        }
        pinned += b->pinned != 0;
        if (b->retained) {
            retained++;
            retained_bytes += b->size;
        }
    }
    offload_peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, &peak_ev);
    tpeak = total_peak(&t);
    if (json) {
        printf("{\"trace\":");
        json_str(stdout, path);
        printf(",\"version\":%" PRIu32 ",\"backend\":", t.version);
        json_str(stdout, t.backend);
        printf(",\"events\":%zu,\"allocs\":%zu,\"frees\":%zu,\"accesses\":%zu,\"ops\":%zu,\"regions\":%zu"
               ",\"op_names\":%" PRIu32,
               t.nev, kinds[HOFF__TEV_ALLOC], kinds[HOFF__TEV_FREE], kinds[HOFF__TEV_ACCESS], kinds[HOFF__TEV_OP],
               kinds[HOFF__TEV_REGION_BEGIN], t.nnames);
        printf(",\"blocks\":%" PRIu32 ",\"managed_blocks\":%" PRIu64 ",\"managed_bytes\":%" PRIu64
               ",\"device_blocks\":%" PRIu64 ",\"device_bytes\":%" PRIu64 ",\"pinned_blocks\":%" PRIu64
               ",\"retained_blocks\":%" PRIu64 ",\"retained_bytes\":%" PRIu64,
               t.nblocks, managed, managed_bytes, device, device_bytes, pinned, retained, retained_bytes);
        printf(",\"offload_peak_bytes\":%" PRIu64 ",\"offload_peak_ev\":%zu,\"total_peak_bytes\":%" PRIu64
               ",\"has_access_events\":%s",
               offload_peak, peak_ev, tpeak, yes(t.has_access_events));
        printf(",\"step_ns\":%" PRIu64 ",\"step_gpu_ns\":", t.step_ns);
        if (t.step_gpu_ns == HOFF__TIME_UNKNOWN)
            printf("null");
        else
            printf("%" PRIu64, t.step_gpu_ns);
        printf(",\"budget_bytes\":%" PRIu64 ",\"host_cap_bytes\":%" PRIu64 ",\"h2d_gbps\":%g,\"d2h_gbps\":%g}\n",
               t.budget_bytes, t.host_cap_bytes, t.h2d_gbps, t.d2h_gbps);
    } else {
        printf("trace: %s (format version %" PRIu32 ", recorded on %s)\n", path, t.version,
               t.backend[0] ? t.backend : "?");
        printf("events: %zu (%zu allocs, %zu frees, %zu accesses, %zu ops, %zu regions; %" PRIu32 " op names)\n",
               t.nev, kinds[HOFF__TEV_ALLOC], kinds[HOFF__TEV_FREE], kinds[HOFF__TEV_ACCESS], kinds[HOFF__TEV_OP],
               kinds[HOFF__TEV_REGION_BEGIN], t.nnames);
        printf("blocks: %" PRIu32 " (%" PRIu64 " managed, %s; %" PRIu64 " device pool, %s; %" PRIu64
               " pinned in regions)\n",
               t.nblocks, managed, SZ(managed_bytes), device, SZ(device_bytes), pinned);
        printf("retained at step end: %" PRIu64 " blocks, %s\n", retained, SZ(retained_bytes));
        printf("access marks: %s\n", t.has_access_events ? "yes" : "no");
        printf("offload peak without offload: %s (event %zu)\n", SZ(offload_peak), peak_ev);
        printf("peak of all live bytes: %s\n", SZ(tpeak));
        printf("step time: %s host, %s device\n", time_or_unknown(t.step_ns, tb, sizeof tb),
               time_or_unknown(t.step_gpu_ns, gb, sizeof gb));
        printf("recorded with: budget %s, host cap %s, H2D %g GB/s, D2H %g GB/s\n",
               t.budget_bytes ? SZ(t.budget_bytes) : "none", t.host_cap_bytes ? SZ(t.host_cap_bytes) : "none",
               t.h2d_gbps, t.d2h_gbps);
    }
    hoff__trace_destroy(&t);
    return 0;
}

/* --------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: hoff-plan COMMAND [options]\n"
            "Works on hoff traces (one recorded training step) and the plans built from them.\n"
            "\n"
            "  simulate TRACE --budget SIZE|PCT%%   replay TRACE on the sim backend under a budget\n"
            "  show TRACE --budget SIZE|PCT%%       print the schedule a planner builds\n"
            "  synth -o FILE                       write a synthetic transformer trace\n"
            "  info TRACE                          summarise a trace\n"
            "\n"
            "'hoff-plan COMMAND --help' describes a command's options; hoff-plan(1) has the rest.\n");
}

int main(int argc, char **argv) {
    const char *c;

    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    c = argv[1];
    if (strcmp(c, "-h") == 0 || strcmp(c, "--help") == 0 || strcmp(c, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(c, "--version") == 0) {
        printf("hoff-plan %d.%d.%d\n", HOFF_VERSION_MAJOR, HOFF_VERSION_MINOR, HOFF_VERSION_PATCH);
        return 0;
    }
    if (strcmp(c, "simulate") == 0)
        return cmd_simulate(argc - 1, argv + 1);
    if (strcmp(c, "show") == 0)
        return cmd_show(argc - 1, argv + 1);
    if (strcmp(c, "synth") == 0)
        return cmd_synth(argc - 1, argv + 1);
    if (strcmp(c, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s' (simulate, show, synth or info; see '%s --help')\n", cmd, c, cmd);
    return EXIT_USAGE;
}
