/* hoff-plan.c — the trace and plan tool: simulate a recorded trace under a budget on the sim backend, show the
 * schedule a planner builds for it, draw it (timeline: SVG; export: Perfetto JSON), write synthetic transformer
 * traces, and summarise a trace.
 * Threading: one thread drives the API; the library's issuing thread runs behind it and, in timeline/export, adds
 * transfer spans to the recorder under its lock. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "core/context.h"
#include "core/core.h"
#include "core/options.h"
#include "core/outfile.h"
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

/* A number in [min, max].  Every number flag has a range: beyond it the
 * virtual clock could saturate (rates, scales) or the value is meaningless. */
static int parse_double_in(const char *sub, const char *opt, const char *s, double min, double max, double *out) {
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "%s %s: %s: expected a number from %g to %g, got '%s'\n", cmd, sub, opt, min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* The ranges of the number flags (doc/man/hoff-plan.1). */
#define parse_bandwidth(sub, s, out) parse_double_in(sub, "--bandwidth", s, HOFF__GBPS_MIN, HOFF__GBPS_MAX, out)
#define parse_compute_scale(sub, s, out)                                                                           \
    parse_double_in(sub, "--compute-scale", s, HOFF__COMPUTE_SCALE_MIN, HOFF__COMPUTE_SCALE_MAX, out)
/* --gpu-step MS: 1 ns to the longest step hoff models. */
#define parse_gpu_step(sub, s, out) parse_double_in(sub, "--gpu-step", s, 1e-6, HOFF__STEP_NS_MAX / 1e6, out)

/* --gpu-step MS in ns (0: not given). */
static uint64_t gpu_step_ns(double ms) {
    return ms > 0 ? (uint64_t)(ms * 1e6 + 0.5) : 0;
}

/* The step the compute scaling models for t is one the driver can model
 * (hoff__drive_check); else a message naming the flag, and EXIT_USAGE. */
static int check_scale(const char *sub, const struct hoff__trace *t, double compute_scale, double gpu_step_ms) {
    struct hoff__drive_opts o;
    char why[256];

    memset(&o, 0, sizeof o);
    o.compute_scale = compute_scale;
    o.gpu_step_ns = gpu_step_ns(gpu_step_ms);
    if (hoff__drive_check(t, &o, why, sizeof why) == 0)
        return 0;
    if (gpu_step_ms > 0)
        fprintf(stderr, "%s %s: --gpu-step %g: %s\n", cmd, sub, gpu_step_ms, why);
    else
        fprintf(stderr, "%s %s: --compute-scale %g: %s; expected a scale that keeps the step within it\n", cmd, sub,
                compute_scale, why);
    return EXIT_USAGE;
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

/* Peak of every live byte (both pools) over the trace: bytes(pool, size) is
 * what a block holds (hoff__pool_block_bytes), NULL the size asked for. */
static uint64_t total_peak(const struct hoff__trace *t, uint64_t (*bytes)(int pool, uint64_t size)) {
    uint64_t cur = 0, peak = 0;
    size_t i;

    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];

        if (e->kind == HOFF__TEV_ALLOC) {
            cur += bytes ? bytes(e->pool, e->size) : e->size;
            if (cur > peak)
                peak = cur;
        } else if (e->kind == HOFF__TEV_FREE && e->block < t->nblocks) {
            const struct hoff__tblock *b = &t->blocks[e->block];

            cur -= bytes ? bytes(b->pool, b->size) : b->size;
        }
    }
    return peak;
}

/* --- what a simulation needs ------------------------------------------------ */

/* Memory a new allocation can get now: MemAvailable from /proc/meminfo, else
 * sysinfo's free and buffer RAM; 0 when neither says. */
static uint64_t mem_available(const char **source) {
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    struct sysinfo si;

    if (f) {
        unsigned long long kb;

        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                *source = "MemAvailable";
                return (uint64_t)kb * 1024;
            }
        fclose(f);
    }
    if (sysinfo(&si) == 0) {
        *source = "free and buffer RAM";
        return ((uint64_t)si.freeram + si.bufferram) * si.mem_unit;
    }
    *source = "unknown";
    return 0;
}

/* The sim device a run of t gets, and the memory it takes of this machine. */
struct sim_size {
    uint64_t device_bytes; /* the simulated device: room for twice the peak, 80 GiB at least */
    uint64_t mem_bytes;    /* this process's memory for the run, estimated */
    uint64_t avail_bytes;  /* what the machine has available (0: unknown) */
};

/* The sim backs every device byte with real memory (and the stamps touch
 * every page of every block), and each evicted block's host copy as well.
 * With L the peak of live blocks in block bytes (size classes, the 2 MiB
 * managed grain), a run needs about 2L with no budget (the pool's cache maps
 * more than is live at once) and 3L plus the offload peak under one (the
 * plan's group layouts are mappings of their own; evicted blocks have host
 * copies), plus `extra` (the caller's own tables).  Measured maximum RSS
 * against the estimate, 25% budget: gpt.trace.gz 3.1 GiB (3.8), wide 3.1
 * (4.3), cnn 1.6 (1.6); no budget: gpt 1.2 (1.9), cnn 0.6 (0.8).  Refuses (a
 * message, EXIT_FAIL) when that passes what the machine has available,
 * unless no_check; 0 otherwise. */
static int sim_size(const char *sub, const struct hoff__trace *t, uint64_t budget, uint64_t offload_peak,
                    uint64_t extra, int no_check, struct sim_size *z) {
    uint64_t live = total_peak(t, hoff__pool_block_bytes), asked = total_peak(t, NULL);
    const char *source;
    char grain[160] = "";

    z->device_bytes = 80 * GiB;
    if (live > z->device_bytes / 2)
        z->device_bytes = live > UINT64_MAX / 2 ? UINT64_MAX : live * 2;
    if (budget > z->device_bytes)
        z->device_bytes = budget; /* a budget above every peak never binds */
    z->mem_bytes = (budget ? 3 * live + offload_peak : 2 * live) + extra;
    z->avail_bytes = mem_available(&source);
    if (no_check || z->avail_bytes == 0 || z->mem_bytes <= z->avail_bytes)
        return 0;
    if (live / 2 > asked)
        snprintf(grain, sizeof grain, " (%s asked for: every offload block takes whole 2 MiB grains, and small "
                 "ones take size classes)", SZ(asked));
    fprintf(stderr,
            "%s %s: this simulation needs about %s of memory and the machine has %s available (%s): the sim "
            "backs the trace's blocks with real memory, %s a peak of %s of live blocks%s%s%s; refusing.  "
            "Simulate a smaller trace, or pass --no-memory-check to run anyway.\n",
            cmd, sub, SZ(z->mem_bytes), SZ(z->avail_bytes), source, budget ? "three times" : "twice", SZ(live), grain,
            budget ? ", plus host copies of evicted blocks up to " : "", budget ? SZ(offload_peak) : "");
    return EXIT_FAIL;
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

/* The one TRACE operand after the options, with the checks every planning
 * subcommand shares (need_budget: --budget given; planner: known).  0, or
 * the exit code to return. */
static int trace_operand(const char *sub, int argc, char **argv, int need_budget, int have_budget,
                         const char *planner, const char **path) {
    if (optind >= argc)
        return usage_error(sub, "no trace file given");
    if (optind + 1 < argc)
        return usage_error(sub, "one trace file expected, got also '%s'", argv[optind + 1]);
    if (need_budget && !have_budget)
        return usage_error(sub, "--budget is required");
    if (planner && check_planner(sub, planner))
        return EXIT_USAGE;
    *path = argv[optind];
    return 0;
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
            "  --spill-dir DIR     NVMe tier: spill what passes the host cap to files in DIR\n"
            "  --bandwidth GBPS    the sim's H2D and D2H copy engines, and what the planner\n"
            "                      assumes, GB/s (default 50)\n"
            "  --planner NAME      planner (default timed; 'hoff-plan show --help' lists them)\n"
            "  --groups on|off     co-located groups: blocks the plan prefetches together share one\n"
            "                      mapping and move with one call (default on, as HOFF_GROUPS)\n"
            "  --steps N           steps to run, the first being the warmup (default 3, >= 2)\n"
            "  --compute-scale X   divide the trace's compute gaps by X (default 1)\n"
            "  --gpu-step MS       scale the compute gaps so a step computes for MS milliseconds\n"
            "  --no-memory-check   run even when the machine's available memory looks too small\n"
            "                      for the simulation (the sim backs every block with real memory)\n"
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
    int no_mem_check;        /* --no-memory-check: run even if the machine looks too small */
    const char *spill_dir;   /* NVMe tier (HOFF_SPILL_DIR); NULL = none */
    int groups;              /* co-located groups (HOFF_GROUPS) */
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
    cfg.groups = so->groups;
    /* The plan is in use from the step after the recording, as on a step
     * long enough to hide the planning thread: what a budget costs in the
     * steady state, the same on every run. */
    cfg.plan_thread = 0;
    err[0] = '\0';
    if ((rc = hoff_config_set(&cfg, "planner", so->planner, err, sizeof err)) != 0) {
        fprintf(stderr, "%s simulate: --planner: %s\n", cmd, err[0] ? err : hoff_strerror(rc));
        return rc;
    }
    if (so->spill_dir && (rc = hoff_config_set(&cfg, "spill_dir", so->spill_dir, err, sizeof err)) != 0) {
        fprintf(stderr, "%s: --spill-dir: %s\n", cmd, err[0] ? err : hoff_strerror(rc));
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
    o.gpu_step_ns = gpu_step_ns(so->gpu_step_ms);
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

static void json_step(FILE *f, const struct hoff__drive_step *s) {
    fprintf(f,
            "{\"state\":\"%s\",\"step_ns\":%" PRIu64 ",\"compute_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64
            ",\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64
            ",\"faults\":%" PRIu64 ",\"late_prefetches\":%" PRIu64 ",\"peak_resident_bytes\":%" PRIu64 "}",
            hoff_plan_state_name((int)s->plan_state), s->step_ns, s->compute_ns, s->stall_ns, s->bytes_d2h, s->bytes_h2d,
            s->evictions, s->prefetches, s->faults, s->late_prefetches, s->peak_resident_bytes);
}

static void human_step(int k, const struct hoff__drive_step *s) {
    printf("step %d (%s): %s (compute %s, stall %s), evicted %s, prefetched %s, faults %" PRIu64
           ", late prefetches %" PRIu64 ", peak resident %s\n",
           k, hoff_plan_state_name((int)s->plan_state), TM(s->step_ns), TM(s->compute_ns), TM(s->stall_ns), SZ(s->bytes_d2h),
           SZ(s->bytes_h2d), s->faults, s->late_prefetches, SZ(s->peak_resident_bytes));
}

static int cmd_simulate(int argc, char **argv) {
    static const struct option longopts[] = {
        {"budget", required_argument, NULL, 'b'},  {"host-cap", required_argument, NULL, 'H'},
        {"bandwidth", required_argument, NULL, 'w'}, {"planner", required_argument, NULL, 'p'},
        {"steps", required_argument, NULL, 's'},   {"compute-scale", required_argument, NULL, 'c'},
        {"gpu-step", required_argument, NULL, 'g'}, {"json", no_argument, NULL, 'j'},
        {"spill-dir", required_argument, NULL, 'N'}, {"groups", required_argument, NULL, 'G'},
        {"no-memory-check", no_argument, NULL, 'M'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *sub = "simulate";
    struct sim_opts so;
    struct hoff__trace t;
    struct sim_run run, base;
    hoff_ctx *ctx = NULL;
    uint64_t budget, offload_peak, device_bytes, no_offload_ns;
    struct sim_size z;
    size_t peak_ev;
    int opt, have_budget = 0, rc, exit_code, integrity_ok, within, last, below_floor;
    const struct hoff__drive_step *ls, *ws;

    memset(&so, 0, sizeof so);
    so.bandwidth = 50.0;
    so.planner = "timed";
    so.groups = 1;
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
            if (parse_bandwidth(sub, optarg, &so.bandwidth))
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
            if (parse_compute_scale(sub, optarg, &so.compute_scale))
                return EXIT_USAGE;
            break;
        case 'g':
            if (parse_gpu_step(sub, optarg, &so.gpu_step_ms))
                return EXIT_USAGE;
            break;
        case 'j':
            so.json = 1;
            break;
        case 'N':
            so.spill_dir = optarg;
            break;
        case 'M':
            so.no_mem_check = 1;
            break;
        case 'G':
            if (strcmp(optarg, "on") == 0)
                so.groups = 1;
            else if (strcmp(optarg, "off") == 0)
                so.groups = 0;
            else {
                fprintf(stderr, "%s %s: --groups: expected on or off, not '%s'\n", cmd, sub, optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h':
            usage_simulate(stdout);
            return 0;
        default:
            return bad_option(sub, argv, opt);
        }
    }
    if ((rc = trace_operand(sub, argc, argv, 1, have_budget, so.planner, &so.trace_path)) != 0)
        return rc;
    if (load_trace(so.trace_path, &t))
        return EXIT_FAIL;
    offload_peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, &peak_ev);
    if (resolve_budget(sub, &so.budget, offload_peak, &budget) ||
        check_scale(sub, &t, so.compute_scale, so.gpu_step_ms)) {
        hoff__trace_destroy(&t);
        return EXIT_USAGE;
    }
    if ((rc = sim_size(sub, &t, budget, offload_peak, 0, so.no_mem_check, &z)) != 0) {
        hoff__trace_destroy(&t);
        return rc;
    }
    device_bytes = z.device_bytes;

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
    /* A budget below the working-set floor is declared infeasible (the
     * plan's figures say so); the run then keeps the floor, not the budget. */
    below_floor = budget != 0 && budget < run.last.plan_floor_bytes;
    exit_code = integrity_ok && run.last.window_violations == 0 &&
                        (within || (below_floor && run.r.peak_resident_bytes <= run.last.plan_floor_bytes))
                    ? 0
                    : EXIT_FAIL;
    if (below_floor)
        fprintf(stderr, "%s simulate: the budget of %s is infeasible: below the working-set floor of %s "
                "(the blocks one op uses and the ones that cannot move); planned and checked at the floor\n",
                cmd, SZ(budget), SZ(run.last.plan_floor_bytes));
    if (run.last.window_violations)
        fprintf(stderr, "%s simulate: %" PRIu64 " blocks moved or dropped inside an open use window\n", cmd,
                run.last.window_violations);

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
        printf(",\"evict_calls\":%" PRIu64 ",\"prefetch_calls\":%" PRIu64 ",\"groups\":%s,\"plan_groups\":%" PRIu64
               ",\"group_calls_saved\":%" PRIu64 ",\"group_fallbacks\":%" PRIu64 ",\"plan_stall_ns\":%" PRIu64,
               ls->evict_calls, ls->prefetch_calls, yes(so.groups), run.last.plan_groups,
               run.last.group_calls_saved, run.last.group_fallbacks, run.last.plan_stall_ns);
        /* the tiers, over the whole run */
        printf(",\"peak_host_bytes\":%" PRIu64 ",\"peak_nvme_bytes\":%" PRIu64 ",\"bytes_spilled\":%" PRIu64
               ",\"bytes_restored\":%" PRIu64 ",\"spill_failures\":%" PRIu64 ",\"crc_errors\":%" PRIu64
               ",\"host_cap_waits\":%" PRIu64,
               run.last.peak_host_bytes, run.last.peak_nvme_bytes, run.last.bytes_spilled,
               run.last.bytes_restored, run.last.spill_failures, run.last.crc_errors, run.last.host_cap_waits);
        printf(",\"actions\":%" PRIu64 ",\"actions_fired\":%" PRIu64 ",\"actions_skipped\":%" PRIu64,
               run.last.plan_actions, run.last_fired, run.last_skipped);
        printf(",\"faults\":%" PRIu64 ",\"late_prefetches\":%" PRIu64 ",\"stall_ns\":%" PRIu64
               ",\"compute_ns\":%" PRIu64 ",\"step_ns\":%" PRIu64 ",\"step_ns_no_offload\":%" PRIu64,
               ls->faults, ls->late_prefetches, ls->stall_ns, ls->compute_ns, ls->step_ns, no_offload_ns);
        printf(",\"floor_bytes\":%" PRIu64 ",\"plan_feasible\":%s,\"window_violations\":%" PRIu64
               ",\"window_refusals\":%" PRIu64,
               run.last.plan_floor_bytes, yes(run.last.plan_feasible != 0), run.last.window_violations,
               run.last.window_refusals);
        printf(",\"plan_ns\":%" PRIu64 ",\"feasible\":%s,\"plan_peak_bytes\":%" PRIu64 ",\"plans\":%" PRIu64
               ",\"replans\":%" PRIu64 ",\"divergent_steps\":%" PRIu64 ",\"state\":\"%s\"",
               run.last.plan_ns, yes(run.last.plan_feasible != 0), run.last.plan_peak_bytes, run.last.plans,
               run.last.replans, run.divergent_steps, hoff_plan_state_name((int)ls->plan_state));
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
        printf("sim: copy engines %g GB/s H2D and D2H, device %s; planner %s; %d steps (warmup + %d replays); "
               "memory about %s (%s available)\n",
               so.bandwidth, SZ(device_bytes), so.planner, run.r.steps, run.r.steps - 1, SZ(z.mem_bytes),
               z.avail_bytes ? SZ(z.avail_bytes) : "unknown");
        printf("offload peak without offload: %s (event %zu)\n", SZ(offload_peak), peak_ev);
        if (budget == 0)
            printf("budget: none\n");
        else if (so.budget.pct >= 0)
            printf("budget: %s (%g%% of the offload peak)\n", SZ(budget), so.budget.pct);
        else
            printf("budget: %s\n", SZ(budget));
        printf("plan: %" PRIu64 " actions, %s, plan peak %s, planned in %s; predicted stall %s a step; "
               "%" PRIu64 " co-located groups\n", run.last.plan_actions,
               run.last.plan_feasible ? "feasible" : "NOT feasible", SZ(run.last.plan_peak_bytes),
               TM(run.last.plan_ns), TM(run.last.plan_stall_ns), run.last.plan_groups);
        printf("working-set floor: %s (the blocks one op uses and the ones that cannot move; no plan goes "
               "below it)%s\n", SZ(run.last.plan_floor_bytes), below_floor ? ": the budget is infeasible" : "");
        for (k = 0; k < run.r.steps; k++)
            human_step(k, &run.r.step[k]);
        printf("last replay step (step %d):\n", last);
        printf("  peak resident offload bytes: %s over the replay steps (%s)\n", SZ(run.r.peak_resident_bytes),
               within ? (budget ? "within budget" : "no budget") : "OVER BUDGET");
        printf("  peak device bytes: %s (both pools and resident offload bytes, whole run)\n",
               SZ(run.r.peak_device_bytes));
        printf("  evicted: %s in %" PRIu64 " evictions\n", SZ(ls->bytes_d2h), ls->evictions);
        printf("  host tier: peak %s%s%s; NVMe tier: peak %s, spilled %s, restored %s (whole run)\n",
               SZ(run.last.peak_host_bytes), so.host_cap ? " of a cap of " : "", so.host_cap ? SZ(so.host_cap) : "",
               SZ(run.last.peak_nvme_bytes), SZ(run.last.bytes_spilled), SZ(run.last.bytes_restored));
        printf("  prefetched: %s in %" PRIu64 " prefetches, %" PRIu64 " calls\n", SZ(ls->bytes_h2d), ls->prefetches,
               ls->prefetch_calls);
        printf("  actions: %" PRIu64 " planned, %" PRIu64 " fired, %" PRIu64 " skipped\n", run.last.plan_actions,
               run.last_fired, run.last_skipped);
        printf("  faults: %" PRIu64 "\n", ls->faults);
        printf("  late prefetches: %" PRIu64 "\n", ls->late_prefetches);
        printf("  exposed stall: %s\n", TM(ls->stall_ns));
        printf("  step time: %s vs %s without offload (%+.1f%%)\n", TM(ls->step_ns), TM(no_offload_ns), slow);
        printf("  divergent steps: %" PRIu64 " (whole run)\n", run.divergent_steps);
        printf("  use-window violations: %" PRIu64 " (whole run; 0 when correct)\n", run.last.window_violations);
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

/* --- the options show and model share ---------------------------------------
 * --budget, --bandwidth, --guard-after-alloc, --guard-before-free and --json,
 * then the trace operand, the trace and the plan options built from them as
 * the runtime builds its own. */

struct plan_args {
    struct budget_arg budget;
    int have_budget, json;
    double bw;
    uint64_t ga, gb;
};

static void plan_args_init(struct plan_args *a) {
    struct hoff_config defaults;

    hoff_config_init(&defaults);
    memset(a, 0, sizeof *a);
    a->bw = 50.0;
    a->ga = defaults.guard_after_alloc;
    a->gb = defaults.guard_before_free;
}

/* 1: opt was one of the shared options (taken), 0: not one, -1: bad value
 * (reported). */
static int plan_option(const char *sub, int opt, const char *arg, struct plan_args *a) {
    switch (opt) {
    case 'b':
        if (parse_budget(sub, arg, &a->budget))
            return -1;
        a->have_budget = 1;
        return 1;
    case 'w':
        return parse_bandwidth(sub, arg, &a->bw) ? -1 : 1;
    case 'A':
        return parse_u64(sub, "--guard-after-alloc", arg, 0, 1000000, &a->ga) ? -1 : 1;
    case 'F':
        return parse_u64(sub, "--guard-before-free", arg, 0, 1000000, &a->gb) ? -1 : 1;
    case 'j':
        a->json = 1;
        return 1;
    default:
        return 0;
    }
}

/* The trace operand, the trace (t, its offload peak and where) and po's
 * budget, guards, bandwidths and block bytes.  0, or the exit status. */
static int plan_setup(const char *sub, int argc, char **argv, const struct plan_args *a, const char *planner,
                      const char **path, struct hoff__trace *t, uint64_t *offload_peak, size_t *peak_ev,
                      struct hoff__plan_opts *po) {
    int rc;

    if ((rc = trace_operand(sub, argc, argv, 1, a->have_budget, planner, path)) != 0)
        return rc;
    if (load_trace(*path, t))
        return EXIT_FAIL;
    *offload_peak = hoff__trace_offload_peak(t, hoff__pool_block_bytes, peak_ev);
    if (resolve_budget(sub, &a->budget, *offload_peak, &po->budget_bytes)) {
        hoff__trace_destroy(t);
        return EXIT_USAGE;
    }
    po->guard_after_alloc = (uint32_t)a->ga;
    po->guard_before_free = (uint32_t)a->gb;
    po->block_bytes = hoff__pool_block_bytes; /* as the runtime plans */
    po->h2d_gbps = a->bw;
    po->d2h_gbps = a->bw;
    return 0;
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
            "  --planner NAME           planner (default timed)\n"
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
    const char *sub = "show", *planner = "timed", *path;
    struct plan_args pa;
    struct hoff__plan_opts po;
    struct hoff__schedule s;
    struct hoff__trace t;
    const struct hoff__planner *pl;
    uint64_t offload_peak, *res = NULL;
    size_t nopeak_ev, i, k, k0, nact_kind[HOFF__ACT_KIND_COUNT] = {0};
    int opt, actions_only = 0, rc, first = 1, json;
    char buf[160];

    plan_args_init(&pa);
    memset(&po, 0, sizeof po);
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if ((rc = plan_option(sub, opt, optarg, &pa)) != 0) {
            if (rc < 0)
                return EXIT_USAGE;
            continue;
        }
        switch (opt) {
        case 'p':
            planner = optarg;
            break;
        case 'H':
            if (parse_size_opt(sub, "--host-cap", optarg, &po.host_cap_bytes))
                return EXIT_USAGE;
            break;
        case 'a':
            actions_only = 1;
            break;
        case 'h':
            usage_show(stdout);
            return 0;
        default:
            return bad_option(sub, argv, opt);
        }
    }
    if ((rc = plan_setup(sub, argc, argv, &pa, planner, &path, &t, &offload_peak, &nopeak_ev, &po)) != 0)
        return rc;
    json = pa.json;
    pl = hoff__planner_find(planner);
    hoff__schedule_init(&s);
    rc = hoff__plan_build(pl, &t, &po, &s);
    if (rc) {
        fprintf(stderr, "%s show: planner %s failed on %s: %s\n", cmd, pl->name, path,
                hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        hoff__schedule_destroy(&s);
        hoff__trace_destroy(&t);
        return EXIT_FAIL;
    }
    /* The per-event column is the library's residency walk, in the block bytes
     * the planner and the summary count (size classes, the managed grain). */
    res = calloc(t.nev ? t.nev : 1, sizeof *res);
    if (!res || (rc = hoff__schedule_resident(&t, &s, res, &(uint64_t){0}, &(uint32_t){0})) != 0) {
        fprintf(stderr, "%s show: %s\n", cmd,
                !res || rc == -ENOMEM ? "out of memory" : "the planner's schedule does not apply to the trace");
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
                printf(",\"size\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"pool\":\"%s\",\"pinned\":%s", e->size,
                       hoff__pool_block_bytes(e->pool, e->size), e->pool ? "managed" : "device",
                       yes((e->flags & HOFF__TEV_PINNED) != 0));
            if (e->kind == HOFF__TEV_ACCESS)
                printf(",\"write\":%s", yes((e->flags & HOFF__TEV_WRITE) != 0));
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
        printf("],\"summary\":{\"feasible\":%s,\"plan_feasible\":%s,\"floor_bytes\":%" PRIu64
               ",\"floor_ev\":%" PRIu32 ",\"floor_op\":",
               yes(s.feasible), yes(s.feasible), s.floor_bytes, s.floor_ev);
        json_str(stdout, hoff__plan_op_at(&t, s.floor_ev));
        printf(",\"peak_bytes\":%" PRIu64 ",\"peak_ev\":%" PRIu32
               ",\"nopeak_bytes\":%" PRIu64 ",\"offload_peak_bytes\":%" PRIu64 ",\"actions\":%zu,\"evictions\":%zu"
               ",\"prefetches\":%zu,\"releases\":%zu,\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64
               ",\"plan_ns\":%" PRIu64 "}}\n",
               s.peak_bytes, s.peak_ev, s.nopeak_bytes, offload_peak, s.nact,
               nact_kind[HOFF__ACT_EVICT], nact_kind[HOFF__ACT_PREFETCH], nact_kind[HOFF__ACT_RELEASE], s.bytes_d2h,
               s.bytes_h2d, s.plan_ns);
    } else {
        printf("summary:\n");
        printf("  feasible: %s\n", s.feasible ? "yes" : "NO (the budget cannot be met; the peak below is the lowest "
                                                        "the planner reached)");
        printf("  working-set floor: %s at event %" PRIu32 " (op %s): no plan goes below it%s\n", SZ(s.floor_bytes),
               s.floor_ev, hoff__plan_op_at(&t, s.floor_ev),
               s.budget_bytes && s.budget_bytes < s.floor_bytes ? "; the budget is below it, so the plan is for it"
                                                                 : "");
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
 * model: the planner-independent view of a trace under a budget, for bounds
 * (bench/bound.py): event times, resident bytes, the gaps
 * ------------------------------------------------------------------------- */

static void usage_model(FILE *f) {
    fprintf(f,
            "usage: hoff-plan model TRACE --budget SIZE|PCT%% [options]\n"
            "Prints what every planner starts from, for lower bounds on the stall (bench/bound.py):\n"
            "each event's time on the clock 'simulate' models, the resident offload bytes at each\n"
            "event with the planned releases and no offload, and every candidate gap (evict after\n"
            "event a, back before event b).\n"
            "\n"
            "  --budget SIZE|PCT%%       resident offload bytes allowed: a size (512M, 2G; 0 = no\n"
            "                           limit) or a percentage of the trace's offload peak\n"
            "  --bandwidth GBPS         the H2D and D2H copy engines, GB/s (default 50)\n"
            "  --compute-scale X        divide the trace's compute gaps by X (default 1)\n"
            "  --gpu-step MS            scale the compute gaps so a step computes for MS ms\n"
            "  --guard-after-alloc N    blocks without access marks: events after the alloc\n"
            "                           before an eviction (default 1)\n"
            "  --guard-before-free N    ...and events before the free by which they are back\n"
            "                           (default 1)\n"
            "  --json                   print the model as one JSON object (default: a summary)\n"
            "  -h, --help               this text\n"
            "\n"
            "JSON fields: trace, budget_bytes, nopeak_bytes, offload_peak_bytes, h2d_gbps, d2h_gbps,\n"
            "latency_ns, fault_gbps, fault_ns, nev, step_ns, t_ns[nev], resident[nev],\n"
            "gaps[[a, b, size, block], ...] (b == nev: away to the step's end, no prefetch) and\n"
            "runtime_gaps[[a, b, size, block], ...] (away on a+1 .. b-1 with no prefetch: what\n"
            "evictions on demand can use besides the gaps).\n"
            "\n"
            "Exit status: 0 ok, 1 unreadable trace or out of memory, 2 bad usage.\n");
}

static int cmd_model(int argc, char **argv) {
    static const struct option longopts[] = {
        {"budget", required_argument, NULL, 'b'},
        {"bandwidth", required_argument, NULL, 'w'},
        {"compute-scale", required_argument, NULL, 'c'},
        {"gpu-step", required_argument, NULL, 'g'},
        {"guard-after-alloc", required_argument, NULL, 'A'},
        {"guard-before-free", required_argument, NULL, 'F'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *sub = "model", *path;
    struct plan_args pa;
    struct hoff_config defaults; /* the sim's per-call and page-in costs */
    struct hoff__plan_opts po;
    struct hoff__drive_opts dopt;
    struct hoff__schedule s;
    struct hoff__trace t;
    struct hoff__gap *gaps = NULL;
    size_t ngaps = 0, nopeak_ev, i;
    uint64_t offload_peak, *t_ns = NULL, step_ns = 0, max_res = 0, over = 0;
    int64_t *res = NULL;
    double compute_scale = 1.0, gpu_step_ms = 0;
    int opt, json, rc, exit_code = EXIT_FAIL, first;

    hoff_config_init(&defaults);
    plan_args_init(&pa);
    memset(&po, 0, sizeof po);
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if ((rc = plan_option(sub, opt, optarg, &pa)) != 0) {
            if (rc < 0)
                return EXIT_USAGE;
            continue;
        }
        switch (opt) {
        case 'c':
            if (parse_compute_scale(sub, optarg, &compute_scale))
                return EXIT_USAGE;
            break;
        case 'g':
            if (parse_gpu_step(sub, optarg, &gpu_step_ms))
                return EXIT_USAGE;
            break;
        case 'h':
            usage_model(stdout);
            return 0;
        default:
            return bad_option(sub, argv, opt);
        }
    }
    if ((rc = plan_setup(sub, argc, argv, &pa, NULL, &path, &t, &offload_peak, &nopeak_ev, &po)) != 0)
        return rc;
    if (check_scale(sub, &t, compute_scale, gpu_step_ms)) {
        hoff__trace_destroy(&t);
        return EXIT_USAGE;
    }
    json = pa.json;
    hoff__schedule_init(&s);

    /* The clock 'simulate' drives the trace on (lib/trace/drive.c). */
    memset(&dopt, 0, sizeof dopt);
    dopt.compute_scale = compute_scale;
    dopt.gpu_step_ns = gpu_step_ns(gpu_step_ms);
    t_ns = calloc(t.nev ? t.nev : 1, sizeof *t_ns);
    if (!t_ns || hoff__drive_clock(&t, &dopt, t_ns, &step_ns) != 0) {
        fprintf(stderr, "%s model: out of memory\n", cmd);
        goto out;
    }
    /* The resident bytes every planner starts from: with no limit the
     * prologue plans no releases, so ask it with the largest budget. */
    {
        struct hoff__plan_opts pb = po;

        if (pb.budget_bytes == 0)
            pb.budget_bytes = UINT64_MAX;
        rc = hoff__plan_begin("model", &t, &pb, &s, &res);
    }
    if (rc == 0)
        rc = hoff__plan_gaps(&t, &po, &gaps, &ngaps);
    if (rc) {
        fprintf(stderr, "%s model: %s: %s\n", cmd, path, hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        goto out;
    }
    for (i = 0; i < t.nev && res; i++) {
        if ((uint64_t)res[i] > max_res)
            max_res = (uint64_t)res[i];
        if (po.budget_bytes && (uint64_t)res[i] > po.budget_bytes)
            over++;
    }
    if (json) {
        printf("{\"trace\":");
        json_str(stdout, path);
        printf(",\"budget_bytes\":%" PRIu64 ",\"nopeak_bytes\":%" PRIu64 ",\"offload_peak_bytes\":%" PRIu64
               ",\"h2d_gbps\":%g,\"d2h_gbps\":%g,\"latency_ns\":%" PRIu64 ",\"fault_gbps\":%g,\"fault_ns\":%" PRIu64
               ",\"nev\":%zu,\"step_ns\":%" PRIu64,
               po.budget_bytes, s.nopeak_bytes, offload_peak, pa.bw, pa.bw, defaults.sim_latency_ns, defaults.sim_fault_gbps,
               defaults.sim_fault_ns, t.nev, step_ns);
        printf(",\"t_ns\":[");
        for (i = 0; i < t.nev; i++)
            printf("%s%" PRIu64, i ? "," : "", t_ns[i]);
        printf("],\"resident\":[");
        for (i = 0; i < t.nev; i++)
            printf("%s%" PRId64, i ? "," : "", res ? res[i] : 0);
        printf("],\"gaps\":[");
        for (i = 0; i < ngaps; i++)
            printf("%s[%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%" PRIu32 "]", i ? "," : "", gaps[i].a, gaps[i].b,
                   gaps[i].size, gaps[i].block);
        /* What the runtime's evictions on demand can use besides: a block
         * with no access after its alloc can stay away from its alloc to its
         * free, a retained one after its last access to the step's end;
         * neither comes back in the step. */
        printf("],\"runtime_gaps\":[");
        for (i = 0, first = 1; i < t.nblocks; i++) {
            const struct hoff__tblock *b = &t.blocks[i];
            uint32_t a, e;

            if (!hoff__plan_movable(b))
                continue;
            if (b->naccess <= 1) {
                a = b->alloc_ev;
                e = b->retained ? (uint32_t)t.nev : b->free_ev + 1;
            } else if (b->retained) {
                a = t.acc[b->first_access + b->naccess - 1].ev;
                e = (uint32_t)t.nev;
            } else {
                continue;
            }
            if (e <= a + 1)
                continue;
            printf("%s[%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%zu]", first ? "" : ",", a, e,
                   hoff__plan_bytes(po.block_bytes, b), i);
            first = 0;
        }
        printf("]}\n");
    } else {
        printf("trace: %s (%zu events, %" PRIu32 " blocks)\n", path, t.nev, t.nblocks);
        printf("budget: %s; offload peak %s without offload, %s with the releases planned\n",
               po.budget_bytes ? SZ(po.budget_bytes) : "none", SZ(s.nopeak_bytes), SZ(max_res));
        printf("events over the budget: %" PRIu64 "\n", over);
        printf("gaps: %zu\n", ngaps);
        printf("clock: step computes for %s; copy engines %g GB/s each way, %s per call\n", TM(step_ns), pa.bw,
               TM(defaults.sim_latency_ns));
    }
    exit_code = 0;
out:
    free(gaps);
    free(res);
    free(t_ns);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
    return exit_code;
}

/* ---------------------------------------------------------------------------
 * timeline and export: a replay on sim, sampled after every event, with every
 * copy the sim's engines carried out and every stall of the compute stream
 * ------------------------------------------------------------------------- */

enum rec_kind { REC_D2H = 0, REC_H2D, REC_FAULT, REC_WAIT, REC_NVME_W, REC_NVME_R };

struct rec_span {
    uint64_t t0, t1;        /* virtual ns */
    uint64_t bytes;
    int kind;               /* enum rec_kind */
    int step;
};

struct rec_sample {
    uint64_t t;             /* virtual ns */
    struct hoff_stats st;
};

struct recorder {
    hoff_ctx *ctx;
    const struct hoff__trace *t;
    int steps;
    size_t per_step;                /* nev + 2: step begin, each event, step end */
    struct rec_sample *s;           /* steps * per_step */
    unsigned char *have;            /* which samples were taken */
    struct rec_span *sp;
    size_t nsp, cap_sp;
    int step;                       /* the step being driven (under lock) */
    int oom;
    pthread_mutex_t lock;           /* sp, nsp, cap_sp, step, oom: the issuing thread adds spans */
    struct hoff__backend_ops ops;   /* the sim's, with the transfers wrapped */
    const struct hoff__backend_ops *orig;
    double h2d_gbps, d2h_gbps, nvme_w_gbps, nvme_r_gbps;
    uint64_t latency_ns;
};

static struct recorder *g_rec; /* the backend ops have no argument of their own */

static void rec_span_add(struct recorder *r, int kind, uint64_t t0, uint64_t t1, uint64_t bytes) {
    pthread_mutex_lock(&r->lock);
    if (r->nsp == r->cap_sp) {
        size_t cap = r->cap_sp ? r->cap_sp * 2 : 1024;
        struct rec_span *n = realloc(r->sp, cap * sizeof *n);

        if (!n) {
            r->oom = 1;
            pthread_mutex_unlock(&r->lock);
            return;
        }
        r->sp = n;
        r->cap_sp = cap;
    }
    r->sp[r->nsp++] = (struct rec_span){.t0 = t0, .t1 = t1, .bytes = bytes, .kind = kind, .step = r->step};
    pthread_mutex_unlock(&r->lock);
}

static int rec_evict(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct hoff__sim_counters c;
    int rc = g_rec->orig->evict(be, p, size, after, done);
    uint64_t dur = g_rec->latency_ns + hoff__copy_ns(size, g_rec->d2h_gbps);

    if (rc == 0 && hoff__sim_counters(be, &c) == 0)
        rec_span_add(g_rec, REC_D2H, c.d2h_busy_until > dur ? c.d2h_busy_until - dur : 0, c.d2h_busy_until, size);
    return rc;
}

static int rec_evict_node(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after,
                          hoff__event *done) {
    struct hoff__sim_counters c;
    int rc = g_rec->orig->evict_node(be, p, size, node, after, done);
    uint64_t dur = g_rec->latency_ns + hoff__copy_ns(size, g_rec->d2h_gbps);

    if (rc == 0 && hoff__sim_counters(be, &c) == 0)
        rec_span_add(g_rec, REC_D2H, c.d2h_busy_until > dur ? c.d2h_busy_until - dur : 0, c.d2h_busy_until, size);
    return rc;
}

/* The simulated NVMe device: one queue for writes (spills) and reads (restores). */
static int rec_nvme_model(struct hoff__backend *be, uint64_t bytes, int write, hoff__event *after,
                          hoff__event *done) {
    struct hoff__sim_counters c;
    int rc = g_rec->orig->nvme_model(be, bytes, write, after, done);
    uint64_t dur = g_rec->latency_ns + hoff__copy_ns(bytes, write ? g_rec->nvme_w_gbps : g_rec->nvme_r_gbps);

    if (rc == 0 && hoff__sim_counters(be, &c) == 0)
        rec_span_add(g_rec, write ? REC_NVME_W : REC_NVME_R, c.nvme_busy_until > dur ? c.nvme_busy_until - dur : 0,
                     c.nvme_busy_until, bytes);
    return rc;
}

static int rec_prefetch(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct hoff__sim_counters c0, c;
    int rc, have0 = hoff__sim_counters(be, &c0) == 0;
    uint64_t dur = g_rec->latency_ns + hoff__copy_ns(size, g_rec->h2d_gbps);

    rc = g_rec->orig->prefetch(be, p, size, after, done);
    /* A prefetch of a released block moves nothing: not a copy. */
    if (rc == 0 && have0 && hoff__sim_counters(be, &c) == 0 && c.bytes_h2d > c0.bytes_h2d)
        rec_span_add(g_rec, REC_H2D, c.h2d_busy_until > dur ? c.h2d_busy_until - dur : 0, c.h2d_busy_until, size);
    return rc;
}

static int rec_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream s, uint64_t *stall_ns) {
    uint64_t t0 = g_rec->orig->clock_ns(be), stall = 0;
    int rc = g_rec->orig->fault(be, p, size, s, &stall);

    if (stall_ns)
        *stall_ns = stall;
    if (rc == 0 && stall)
        rec_span_add(g_rec, REC_FAULT, t0, t0 + stall, size);
    return rc;
}

static int rec_event_sync(struct hoff__backend *be, hoff__event *ev) {
    uint64_t t0 = g_rec->orig->clock_ns(be), t1;
    int rc = g_rec->orig->event_sync(be, ev);

    t1 = g_rec->orig->clock_ns(be);
    if (t1 > t0)
        rec_span_add(g_rec, REC_WAIT, t0, t1, 0);
    return rc;
}

static int rec_stream_wait(struct hoff__backend *be, hoff_stream s, hoff__event *ev) {
    uint64_t t0 = g_rec->orig->clock_ns(be), t1;
    int rc = g_rec->orig->stream_wait(be, s, ev);

    t1 = g_rec->orig->clock_ns(be);
    if (t1 > t0)
        rec_span_add(g_rec, REC_WAIT, t0, t1, 0);
    return rc;
}

/* The driver's callback: the counters as they are (no poll: sampling must not
 * change what the replay does) and the virtual clock. */
static void rec_on_event(void *arg, int step, size_t ev) {
    struct recorder *r = arg;
    size_t i = ev == SIZE_MAX ? 0 : ev + 1;
    struct rec_sample *s;

    /* The issuing thread reads step in rec_span_add, under the same lock. */
    pthread_mutex_lock(&r->lock);
    r->step = step;
    pthread_mutex_unlock(&r->lock);
    if (step < 0 || step >= r->steps || i >= r->per_step)
        return;
    s = &r->s[(size_t)step * r->per_step + i];
    pthread_mutex_lock(&r->ctx->lock);
    hoff__stats_snapshot(r->ctx, &s->st);
    pthread_mutex_unlock(&r->ctx->lock);
    s->t = r->ctx->be->ops->clock_ns(r->ctx->be);
    r->have[(size_t)step * r->per_step + i] = 1;
}

static struct rec_sample *rec_at(const struct recorder *r, int step, size_t i) {
    return r->have[(size_t)step * r->per_step + i] ? &r->s[(size_t)step * r->per_step + i] : NULL;
}

/* What the picture commands share: the trace, the budget, the run. */
struct pic {
    const char *sub;
    struct sim_opts so;
    struct hoff__trace t;
    uint64_t budget, offload_peak;
    size_t peak_ev;
    struct recorder rec;
    /* the plan the context replayed, taken before shutdown */
    struct hoff__schedule sched;
    struct hoff__trace planned;     /* the trace it was planned on */
    int have_plan;
    char planner[16];
    struct hoff_stats last;
};

static void pic_free(struct pic *p) {
    free(p->rec.s);
    free(p->rec.have);
    free(p->rec.sp);
    pthread_mutex_destroy(&p->rec.lock);
    hoff__schedule_destroy(&p->sched);
    hoff__trace_destroy(&p->planned);
    hoff__trace_destroy(&p->t);
}

/* Copy a finished trace (events and names) and finish the copy. */
static int trace_copy(struct hoff__trace *dst, const struct hoff__trace *src) {
    size_t i;
    int rc;

    hoff__trace_init(dst);
    for (i = 0; i < src->nnames; i++)
        if (hoff__trace_name(dst, src->names[i]) == UINT32_MAX)
            return -ENOMEM;
    for (i = 0; i < src->nev; i++)
        if ((rc = hoff__trace_append(dst, &src->ev[i])) != 0)
            return rc;
    dst->budget_bytes = src->budget_bytes;
    dst->host_cap_bytes = src->host_cap_bytes;
    dst->h2d_gbps = src->h2d_gbps;
    dst->d2h_gbps = src->d2h_gbps;
    dst->step_ns = src->step_ns;
    dst->step_gpu_ns = src->step_gpu_ns;
    memcpy(dst->backend, src->backend, sizeof dst->backend);
    return hoff__trace_finish(dst);
}

/* Drive the trace on sim with the recorder in place; keep the plan. */
static int pic_run(struct pic *p) {
    struct hoff__drive_opts o;
    struct hoff__drive_result res;
    struct hoff__sim_counters c;
    struct recorder *r = &p->rec;
    struct sim_size z;
    hoff_ctx *ctx = NULL;
    int rc;

    /* The recorder's samples: every event of every step. */
    if (sim_size(p->sub, &p->t, p->budget, p->offload_peak,
                 (uint64_t)p->so.steps * (p->t.nev + 2) * sizeof(struct rec_sample), p->so.no_mem_check, &z))
        return -1;
    if (make_ctx(&p->so, p->budget, z.device_bytes, &ctx))
        return -1;
    r->ctx = ctx;
    r->t = &p->t;
    r->steps = (int)p->so.steps;
    r->per_step = p->t.nev + 2;
    r->s = calloc((size_t)r->steps * r->per_step, sizeof *r->s);
    r->have = calloc((size_t)r->steps * r->per_step, 1);
    if (!r->s || !r->have) {
        hoff_shutdown(ctx);
        fprintf(stderr, "%s %s: out of memory\n", cmd, p->sub);
        return -1;
    }
    r->orig = ctx->be->ops;
    r->ops = *r->orig;
    r->ops.evict = rec_evict;
    r->ops.prefetch = rec_prefetch;
    r->ops.fault = rec_fault;
    r->ops.event_sync = rec_event_sync;
    r->ops.stream_wait = rec_stream_wait;
    if (r->orig->evict_node)
        r->ops.evict_node = rec_evict_node;
    if (r->orig->nvme_model)
        r->ops.nvme_model = rec_nvme_model;
    r->h2d_gbps = p->so.bandwidth;
    r->d2h_gbps = p->so.bandwidth;
    r->nvme_w_gbps = ctx->cfg.sim_nvme_write_gbps;
    r->nvme_r_gbps = ctx->cfg.sim_nvme_read_gbps;
    r->latency_ns = ctx->cfg.sim_latency_ns;
    g_rec = r;
    ctx->be->ops = &r->ops;

    memset(&o, 0, sizeof o);
    o.steps = r->steps;
    o.verify = 1;
    o.compute_scale = p->so.compute_scale;
    o.gpu_step_ns = gpu_step_ns(p->so.gpu_step_ms);
    o.on_event = rec_on_event;
    o.on_event_arg = r;
    rc = hoff__trace_drive(ctx, &p->t, &o, &res);
    if (rc == 0 && res.integrity_errors)
        fprintf(stderr, "%s %s: warning: integrity: %s\n", cmd, p->sub, res.first_error);
    hoff__drive_result_free(&res);
    if (rc) {
        fprintf(stderr, "%s %s: %s: %s\n", cmd, p->sub, p->so.trace_path, hoff_last_error());
    } else {
        hoff_stats_get(ctx, &p->last);
        pthread_mutex_lock(&ctx->lock);
        hoff__schedule_init(&p->sched);
        if (ctx->pipe.have_plan && ctx->pipe.have_trace) {
            rc = hoff__schedule_copy(&p->sched, &ctx->pipe.sched);
            if (rc == 0)
                rc = trace_copy(&p->planned, &ctx->pipe.trace);
            p->have_plan = rc == 0;
            if (rc)
                fprintf(stderr, "%s %s: cannot copy the plan: %s\n", cmd, p->sub, hoff_strerror(rc));
        }
        snprintf(p->planner, sizeof p->planner, "%s", ctx->cfg.planner);
        pthread_mutex_unlock(&ctx->lock);
        if (hoff__sim_counters(ctx->be, &c) != 0)
            memset(&c, 0, sizeof c);
    }
    ctx->be->ops = r->orig;
    g_rec = NULL;
    hoff_shutdown(ctx);
    if (r->oom) {
        fprintf(stderr, "%s %s: out of memory recording the replay\n", cmd, p->sub);
        return -1;
    }
    return rc ? -1 : 0;
}

/* The options both commands take (simulate's, without --json). */
static int pic_parse(struct pic *p, int argc, char **argv, const char *short_opts, const struct option *extra,
                     int nextra, int (*on_extra)(struct pic *, int, const char *), void (*usage_fn)(FILE *)) {
    struct option longopts[24];
    static const struct option common[] = {
        {"budget", required_argument, NULL, 'b'},  {"host-cap", required_argument, NULL, 'H'},
        {"bandwidth", required_argument, NULL, 'w'}, {"planner", required_argument, NULL, 'p'},
        {"steps", required_argument, NULL, 's'},   {"compute-scale", required_argument, NULL, 'c'},
        {"gpu-step", required_argument, NULL, 'g'}, {"spill-dir", required_argument, NULL, 'N'},
        {"no-memory-check", no_argument, NULL, 'M'}, {"help", no_argument, NULL, 'h'}};
    const int ncommon = (int)(sizeof common / sizeof common[0]);
    int opt, have_budget = 0, i, n = 0;

    for (i = 0; i < ncommon; i++)
        longopts[n++] = common[i];
    for (i = 0; i < nextra && n < 23; i++)
        longopts[n++] = extra[i];
    memset(&longopts[n], 0, sizeof longopts[n]);
    memset(&p->so, 0, sizeof p->so);
    p->so.bandwidth = 50.0;
    p->so.planner = "timed";
    p->so.groups = 1;
    p->so.steps = 3;
    p->so.compute_scale = 1.0;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, short_opts, longopts, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (parse_budget(p->sub, optarg, &p->so.budget))
                return EXIT_USAGE;
            have_budget = 1;
            break;
        case 'H':
            if (parse_size_opt(p->sub, "--host-cap", optarg, &p->so.host_cap))
                return EXIT_USAGE;
            break;
        case 'w':
            if (parse_bandwidth(p->sub, optarg, &p->so.bandwidth))
                return EXIT_USAGE;
            break;
        case 'p':
            p->so.planner = optarg;
            break;
        case 's':
            if (parse_u64(p->sub, "--steps", optarg, 2, 1000, &p->so.steps))
                return EXIT_USAGE;
            break;
        case 'c':
            if (parse_compute_scale(p->sub, optarg, &p->so.compute_scale))
                return EXIT_USAGE;
            break;
        case 'g':
            if (parse_gpu_step(p->sub, optarg, &p->so.gpu_step_ms))
                return EXIT_USAGE;
            break;
        case 'N':
            p->so.spill_dir = optarg;
            break;
        case 'M':
            p->so.no_mem_check = 1;
            break;
        case 'h':
            usage_fn(stdout);
            return -1;
        case ':':
        case '?':
            return bad_option(p->sub, argv, opt);
        default:
            if (on_extra(p, opt, optarg))
                return EXIT_USAGE;
            break;
        }
    }
    return trace_operand(p->sub, argc, argv, 1, have_budget, p->so.planner, &p->so.trace_path);
}

static int pic_load(struct pic *p) {
    if (load_trace(p->so.trace_path, &p->t))
        return EXIT_FAIL;
    p->offload_peak = hoff__trace_offload_peak(&p->t, hoff__pool_block_bytes, &p->peak_ev);
    if (resolve_budget(p->sub, &p->so.budget, p->offload_peak, &p->budget) ||
        check_scale(p->sub, &p->t, p->so.compute_scale, p->so.gpu_step_ms)) {
        hoff__trace_destroy(&p->t);
        return EXIT_USAGE;
    }
    pthread_mutex_init(&p->rec.lock, NULL);
    hoff__schedule_init(&p->sched);
    hoff__trace_init(&p->planned);
    return 0;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');

    return s ? s + 1 : path;
}

/* Where each managed block of `t` is at each event under schedule s, with
 * transfers instant (the model of hoff__schedule_peak): bytes on the device,
 * the host and NVMe at each event's peak point (after the actions before it
 * and the event; a block freed at i counts at i). */
enum { AT_NONE = 0, AT_DEVICE, AT_HOST, AT_NVME, AT_RELEASED };

static int counted(int at) {
    return at == AT_DEVICE || at == AT_HOST || at == AT_NVME;
}

static void plan_tiers(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *dev, uint64_t *host,
                       uint64_t *nvme) {
    uint8_t *at = calloc(t->nblocks ? t->nblocks : 1, 1);
    uint64_t cur[5] = {0};
    size_t i, k = 0;

    if (!at)
        return;
    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];
        int pass;

        for (pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                if (e->kind == HOFF__TEV_ALLOC && e->block < t->nblocks && e->pool == 1) {
                    at[e->block] = AT_DEVICE;
                    cur[AT_DEVICE] += hoff__pool_block_bytes(1, e->size);
                }
                dev[i] = cur[AT_DEVICE];
                host[i] = cur[AT_HOST];
                nvme[i] = cur[AT_NVME];
                if (e->kind == HOFF__TEV_FREE && e->block < t->nblocks && t->blocks[e->block].pool == 1) {
                    if (counted(at[e->block]))
                        cur[at[e->block]] -= hoff__pool_block_bytes(1, t->blocks[e->block].size);
                    at[e->block] = AT_NONE;
                }
            }
            for (; k < s->nact && s->act[k].ev == i && (pass == 1 || s->act[k].when == HOFF__ACT_BEFORE); k++) {
                const struct hoff__action *a = &s->act[k];
                uint64_t b;
                int to;

                if (a->block >= t->nblocks || t->blocks[a->block].pool != 1 || at[a->block] == AT_NONE)
                    continue;
                switch (a->kind) {
                case HOFF__ACT_EVICT:
                case HOFF__ACT_RESTORE:
                    to = AT_HOST;
                    break;
                case HOFF__ACT_PREFETCH:
                    to = AT_DEVICE;
                    break;
                case HOFF__ACT_SPILL:
                    to = AT_NVME;
                    break;
                default:
                    to = AT_RELEASED;
                    break;
                }
                b = hoff__pool_block_bytes(1, t->blocks[a->block].size);
                if (counted(at[a->block]))
                    cur[at[a->block]] -= b;
                if (counted(to))
                    cur[to] += b;
                at[a->block] = (uint8_t)to;
            }
        }
    }
    free(at);
}

/* --- timeline: SVG --------------------------------------------------------- */

static void usage_timeline(FILE *f) {
    fprintf(f,
            "usage: hoff-plan timeline TRACE --budget SIZE|PCT%% -o FILE.svg [options]\n"
            "Draws resident offload bytes over the step, events on the x axis: without offload,\n"
            "and with the plan (on the device, the host tier and the NVMe tier stacked), the\n"
            "replay's own resident bytes as the sim measured them, the budget line, and marks\n"
            "where prefetches were late.  The last step of a replay on the sim backend is shown.\n"
            "No dependencies: the SVG is written by hand.\n"
            "\n"
            "  -o, --output FILE    the SVG to write (required)\n"
            "  --budget SIZE|PCT%%   resident offload bytes allowed (as in simulate)\n"
            "  --host-cap SIZE      host-tier bytes (default: no limit)\n"
            "  --spill-dir DIR      NVMe tier: spill what passes the host cap to files in DIR\n"
            "  --bandwidth GBPS     the sim's copy engines and the planner's figure (default 50)\n"
            "  --planner NAME       planner (default timed)\n"
            "  --steps N            steps to simulate, the first the warmup (default 3, >= 2)\n"
            "  --compute-scale X    divide the trace's compute gaps by X (default 1)\n"
            "  --gpu-step MS        scale the compute gaps so a step computes for MS ms\n"
            "  --no-memory-check    run even when available memory looks too small for the sim\n"
            "  --width PX           picture width (default 1200, >= 400)\n"
            "  --height PX          picture height (default 640, >= 300)\n"
            "  -h, --help           this text\n"
            "\n"
            "Exit status: 0 ok, 1 unreadable trace, runtime error or unwritable file, 2 bad usage.\n");
}

struct tl_opts {
    const char *out;
    uint64_t width, height;
};

static struct tl_opts tl;

static int tl_extra(struct pic *p, int opt, const char *arg) {
    switch (opt) {
    case 'o':
        tl.out = arg;
        return 0;
    case 'W':
        return parse_u64(p->sub, "--width", arg, 400, 20000, &tl.width);
    case 'T':
        return parse_u64(p->sub, "--height", arg, 300, 20000, &tl.height);
    default:
        return -1;
    }
}

/* Axis units: the largest power of 1024 under max, and a 1-2-5 step that
 * gives about `ticks` ticks. */
static double nice_step(double range, int ticks) {
    double raw = range / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;

    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void xml_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
            break;
        }
    }
}

/* A step function of one value per column as an SVG path: along the top
 * from left to right, then back along `base` (NULL: the x axis). */
static void band_path(FILE *f, const double *top, const double *base, int ncol, double x0, double colw, double y0,
                      double yscale) {
    int c;

    fprintf(f, "M%.1f,%.1f", x0, y0 - top[0] * yscale);
    for (c = 0; c < ncol; c++) {
        double y = y0 - top[c] * yscale;

        fprintf(f, " L%.1f,%.1f L%.1f,%.1f", x0 + c * colw, y, x0 + (c + 1) * colw, y);
    }
    for (c = ncol - 1; c >= 0; c--) {
        double y = y0 - (base ? base[c] : 0) * yscale;

        fprintf(f, " L%.1f,%.1f L%.1f,%.1f", x0 + (c + 1) * colw, y, x0 + c * colw, y);
    }
    fputs(" Z", f);
}

static void line_path(FILE *f, const double *v, int ncol, double x0, double colw, double y0, double yscale) {
    int c;

    for (c = 0; c < ncol; c++) {
        double y = y0 - v[c] * yscale;

        fprintf(f, "%s%.1f,%.1f L%.1f,%.1f", c ? " L" : "M", x0 + c * colw, y, x0 + (c + 1) * colw, y);
    }
}

static int cmd_timeline(int argc, char **argv) {
    static const struct option extra[] = {{"output", required_argument, NULL, 'o'},
                                          {"width", required_argument, NULL, 'W'},
                                          {"height", required_argument, NULL, 'T'}};
    struct pic p;
    uint64_t *nooff = NULL, *pdev = NULL, *phost = NULL, *pnvme = NULL, *real = NULL, *late = NULL;
    double *c_nooff = NULL, *c_dev = NULL, *c_host = NULL, *c_nvme = NULL, *c_real = NULL, *c_late = NULL;
    double W, H, L = 96, R = 24, T = 74, B = 150, pw, ph, x0, y0, colw, ymax, unit, ystep, xstep, yscale, v;
    const char *uname;
    size_t i, nev, nlate = 0, late_total = 0;
    int rc, ncol, c, exit_code = EXIT_FAIL, last, tick;
    FILE *f = NULL;
    struct hoff__outfile of;
    char buf[256];

    memset(&p, 0, sizeof p);
    memset(&tl, 0, sizeof tl);
    tl.width = 1200;
    tl.height = 640;
    p.sub = "timeline";
    rc = pic_parse(&p, argc, argv, ":ho:", extra, 3, tl_extra, usage_timeline);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!tl.out)
        return usage_error(p.sub, "-o FILE.svg is required");
    if ((rc = pic_load(&p)) != 0)
        return rc;
    if (pic_run(&p))
        goto out;
    nev = p.t.nev;
    if (nev == 0) {
        fprintf(stderr, "%s timeline: %s has no events\n", cmd, p.so.trace_path);
        goto out;
    }
    last = p.rec.steps - 1;
    nooff = calloc(nev, sizeof *nooff);
    pdev = calloc(nev, sizeof *pdev);
    phost = calloc(nev, sizeof *phost);
    pnvme = calloc(nev, sizeof *pnvme);
    real = calloc(nev, sizeof *real);
    late = calloc(nev, sizeof *late);
    if (!nooff || !pdev || !phost || !pnvme || !real || !late) {
        fprintf(stderr, "%s timeline: out of memory\n", cmd);
        goto out;
    }
    /* Without offload: the live managed bytes (what the budget counts). */
    {
        struct hoff__schedule empty;

        hoff__schedule_init(&empty);
        plan_tiers(&p.t, &empty, nooff, phost, pnvme);
        hoff__schedule_destroy(&empty);
    }
    /* With the plan: the replayed schedule on the trace it was planned on
     * (the same events as TRACE, as the replay did not diverge). */
    memset(phost, 0, nev * sizeof *phost);
    memset(pnvme, 0, nev * sizeof *pnvme);
    if (p.have_plan && p.planned.nev == nev)
        plan_tiers(&p.planned, &p.sched, pdev, phost, pnvme);
    else
        memcpy(pdev, nooff, nev * sizeof *pdev);
    /* The replay as measured: resident bytes after each event of the last
     * step, and the late prefetches each event saw. */
    for (i = 0; i < nev; i++) {
        struct rec_sample *s = rec_at(&p.rec, last, i + 1), *s0 = rec_at(&p.rec, last, i);

        real[i] = s ? s->st.resident_bytes : 0;
        late[i] = s && s0 && s->st.late_prefetches > s0->st.late_prefetches
                      ? s->st.late_prefetches - s0->st.late_prefetches
                      : 0;
        nlate += late[i] != 0;
        late_total += late[i];
    }

    /* Columns: at most one per pixel, each the maximum of its events. */
    W = (double)tl.width;
    H = (double)tl.height;
    pw = W - L - R;
    ph = H - T - B;
    ncol = nev < (size_t)pw ? (int)nev : (int)pw;
    c_nooff = calloc((size_t)ncol, sizeof(double));
    c_dev = calloc((size_t)ncol, sizeof(double));
    c_host = calloc((size_t)ncol, sizeof(double));
    c_nvme = calloc((size_t)ncol, sizeof(double));
    c_real = calloc((size_t)ncol, sizeof(double));
    c_late = calloc((size_t)ncol, sizeof(double));
    if (!c_nooff || !c_dev || !c_host || !c_nvme || !c_real || !c_late) {
        fprintf(stderr, "%s timeline: out of memory\n", cmd);
        goto out;
    }
    ymax = (double)p.budget;
    for (i = 0; i < nev; i++) {
        c = (int)((double)i * ncol / (double)nev);
        if (c >= ncol)
            c = ncol - 1;
#define MAXTO(a, x) ((a) = (a) > (x) ? (a) : (x))
        MAXTO(c_nooff[c], (double)nooff[i]);
        MAXTO(c_dev[c], (double)pdev[i]);
        MAXTO(c_host[c], (double)(pdev[i] + phost[i]));
        MAXTO(c_nvme[c], (double)(pdev[i] + phost[i] + pnvme[i]));
        MAXTO(c_real[c], (double)real[i]);
        c_late[c] += (double)late[i];
        MAXTO(ymax, (double)nooff[i]);
        MAXTO(ymax, (double)(pdev[i] + phost[i] + pnvme[i]));
        MAXTO(ymax, (double)real[i]);
#undef MAXTO
    }
    if (ymax <= 0)
        ymax = 1;
    if (ymax >= (double)GiB) {
        unit = (double)GiB;
        uname = "GiB";
    } else if (ymax >= (double)(1 << 20)) {
        unit = (double)(1 << 20);
        uname = "MiB";
    } else {
        unit = 1024;
        uname = "KiB";
    }
    ystep = nice_step(ymax / unit * 1.05, 6);
    ymax = ceil(ymax / unit * 1.05 / ystep) * ystep * unit;
    x0 = L;
    y0 = T + ph;
    colw = pw / ncol;
    yscale = ph / ymax;

    if (hoff__out_open(&of, tl.out) < 0) {
        fprintf(stderr, "%s timeline: %s\n", cmd, hoff_last_error());
        goto out;
    }
    f = of.f;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"13\">\n",
            W, H, W, H);
    fprintf(f, "<title>hoff-plan timeline: ");
    xml_text(f, base_name(p.so.trace_path));
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", W, H);
    /* Title and what was run. */
    fprintf(f, "<text x=\"%.0f\" y=\"28\" font-size=\"18\" font-weight=\"bold\">Resident offload bytes over the step: ",
            L);
    xml_text(f, base_name(p.so.trace_path));
    fprintf(f, "</text>\n");
    snprintf(buf, sizeof buf, "%s", SZ(p.budget));
    fprintf(f, "<text x=\"%.0f\" y=\"50\" fill=\"#444444\">planner %s, budget %s", L, p.planner, buf);
    if (p.so.budget.pct >= 0)
        fprintf(f, " (%g%% of the %s peak)", p.so.budget.pct, SZ(p.offload_peak));
    fprintf(f, ", copy engines %g GB/s; step %d of %d simulated on sim (", p.so.bandwidth, last, p.rec.steps);
    fprintf(f, "%s), %zu events", p.last.plans ? "replay" : "no plan", nev);
    if (p.so.host_cap)
        fprintf(f, ", host cap %s", SZ(p.so.host_cap));
    fprintf(f, "</text>\n");

    /* Grid and y axis. */
    fprintf(f, "<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    for (v = 0; v <= ymax / unit + 1e-9; v += ystep)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, y0 - v * unit * yscale, x0 + pw,
                y0 - v * unit * yscale);
    fprintf(f, "</g>\n<g text-anchor=\"end\" fill=\"#333333\">\n");
    for (v = 0; v <= ymax / unit + 1e-9; v += ystep)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n", x0 - 8, y0 - v * unit * yscale + 4, v);
    fprintf(f, "</g>\n");
    fprintf(f,
            "<text transform=\"translate(%.0f,%.1f) rotate(-90)\" text-anchor=\"middle\" fill=\"#333333\">"
            "resident offload bytes (%s)</text>\n",
            L - 62, T + ph / 2, uname);

    /* The plan's tiers, stacked: NVMe on top, then host, then device. */
    fprintf(f, "<path fill=\"#b39ddb\" fill-opacity=\"0.85\" stroke=\"none\" d=\"");
    band_path(f, c_nvme, c_host, ncol, x0, colw, y0, yscale);
    fprintf(f, "\"><title>with the plan: on the NVMe tier</title></path>\n");
    fprintf(f, "<path fill=\"#ffcc80\" fill-opacity=\"0.9\" stroke=\"none\" d=\"");
    band_path(f, c_host, c_dev, ncol, x0, colw, y0, yscale);
    fprintf(f, "\"><title>with the plan: on the host tier</title></path>\n");
    fprintf(f, "<path fill=\"#90caf9\" fill-opacity=\"0.95\" stroke=\"none\" d=\"");
    band_path(f, c_dev, NULL, ncol, x0, colw, y0, yscale);
    fprintf(f, "\"><title>with the plan: resident on the device (transfers instant)</title></path>\n");
    /* Without offload, and the replay as measured. */
    fprintf(f, "<path fill=\"none\" stroke=\"#757575\" stroke-width=\"1.4\" d=\"");
    line_path(f, c_nooff, ncol, x0, colw, y0, yscale);
    fprintf(f, "\"><title>without offload: %s peak</title></path>\n", SZ(p.offload_peak));
    fprintf(f, "<path fill=\"none\" stroke=\"#0d47a1\" stroke-width=\"1.6\" d=\"");
    line_path(f, c_real, ncol, x0, colw, y0, yscale);
    fprintf(f, "\"><title>replay on sim: resident bytes measured after each event</title></path>\n");
    /* The budget. */
    if (p.budget) {
        double yb = y0 - (double)p.budget * yscale;

        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d32f2f\" stroke-width=\"2\" "
                "stroke-dasharray=\"10,5\"/>\n",
                x0, yb, x0 + pw, yb);
        /* Its label goes where the curves stay lowest under it (the right
         * end, the left end, or a tenth of the way in between). */
        double lw = 8.0 * (7 + (double)strlen(SZ(p.budget))), best_x = x0 + pw - 4 - lw, best = -1;
        int cand;

        for (cand = 0; cand <= 10; cand++) {
            double lx = x0 + 4 + (pw - 8 - lw) * (10 - cand) / 10.0, top = 0;
            int c0 = (int)((lx - x0) / colw), c1 = (int)((lx + lw - x0) / colw);

            for (c = c0 < 0 ? 0 : c0; c <= c1 && c < ncol; c++) {
                top = c_nooff[c] > top ? c_nooff[c] : top;
                top = c_nvme[c] > top ? c_nvme[c] : top;
                top = c_real[c] > top ? c_real[c] : top;
            }
            if (best < 0 || top < best) {
                best = top;
                best_x = lx;
            }
        }
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d32f2f\" font-weight=\"bold\" "
                "stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">budget %s</text>\n",
                best_x, yb - 6, SZ(p.budget));
    }
    /* Late prefetches: a red triangle under the axis at each event that
     * waited for one. */
    fprintf(f, "<g fill=\"#d32f2f\">\n");
    for (c = 0; c < ncol; c++) {
        double xc = x0 + (c + 0.5) * colw;

        if (c_late[c] <= 0)
            continue;
        fprintf(f, "<path d=\"M%.1f,%.1f l-5,9 l10,0 Z\"><title>%.0f late prefetch%s</title></path>\n", xc, y0 + 3,
                c_late[c], c_late[c] == 1 ? "" : "es");
    }
    fprintf(f, "</g>\n");

    /* Axes and the x ticks. */
    fprintf(f,
            "<g stroke=\"#333333\" stroke-width=\"1.2\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
            x0, y0, x0 + pw, y0, x0, y0, x0, T);
    xstep = nice_step((double)nev, 10);
    if (xstep < 1)
        xstep = 1;
    fprintf(f, "<g text-anchor=\"middle\" fill=\"#333333\">\n");
    for (v = 0, tick = 0; v <= (double)nev + 1e-9 && tick < 100; v += xstep, tick++) {
        double xv = x0 + v / (double)nev * pw;

        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>", xv, y0, xv, y0 + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%.0f</text>\n", xv, y0 + 28, v);
    }
    fprintf(f, "</g>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#333333\">trace event "
               "(allocations, frees, accesses and op marks of one step, in order)</text>\n",
            x0 + pw / 2, y0 + 50);

    /* Legend, two rows under the axis. */
    {
        struct item {
            const char *kind; /* "fill", "line", "budget", "late" */
            const char *color;
            const char *text;
        } items[] = {
            {"fill", "#90caf9", "with the plan: on the device"},
            {"fill", "#ffcc80", "with the plan: on the host tier"},
            {"fill", "#b39ddb", "with the plan: on the NVMe tier"},
            {"line", "#757575", "without offload"},
            {"line", "#0d47a1", "replay on sim (measured)"},
            {"budget", "#d32f2f", "budget"},
            {"late", "#d32f2f", "late prefetch"},
        };
        int n = (int)(sizeof items / sizeof items[0]), k;

        /* Row 1: the plan's three tiers; row 2: the lines and marks. */
        for (k = 0; k < n; k++) {
            int row = k < 3 ? 0 : 1, col = k < 3 ? k : k - 3;
            double lx = x0 + col * (row ? pw / 4 : pw / 3), yy = y0 + 78 + row * 24;

            if (!strcmp(items[k].kind, "fill"))
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"12\" fill=\"%s\"/>", lx, yy - 10,
                        items[k].color);
            else if (!strcmp(items[k].kind, "late"))
                fprintf(f, "<path d=\"M%.1f,%.1f l-5,9 l10,0 Z\" fill=\"%s\"/>", lx + 11, yy - 10, items[k].color);
            else
                fprintf(f,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>",
                        lx, yy - 4, lx + 22, yy - 4, items[k].color,
                        !strcmp(items[k].kind, "budget") ? " stroke-dasharray=\"10,5\"" : "");
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", lx + 30, yy);
            xml_text(f, items[k].text);
            if (!strcmp(items[k].kind, "late"))
                fprintf(f, " (%zu at %zu events)", late_total, nlate);
            else if (!strcmp(items[k].kind, "budget"))
                fprintf(f, " %s", p.budget ? SZ(p.budget) : "(none)");
            else if (k == 2 && !p.last.spills)
                fprintf(f, "%s", p.so.host_cap ? " (none)" : " (none: no host cap)");
            fprintf(f, "</text>\n");
        }
    }
    fprintf(f, "</svg>\n");
    f = NULL;
    if (hoff__out_commit(&of) < 0) {
        fprintf(stderr, "%s timeline: %s\n", cmd, hoff_last_error());
        goto out;
    }
    printf("%s: %zu events, budget %s, peak %s without offload; %zu late prefetches in the last step\n", tl.out, nev,
           SZ(p.budget), SZ(p.offload_peak), late_total);
    exit_code = 0;
out:
    if (f)
        hoff__out_abort(&of); /* the file at the path, if any, is left as it was */
    free(nooff);
    free(pdev);
    free(phost);
    free(pnvme);
    free(real);
    free(late);
    free(c_nooff);
    free(c_dev);
    free(c_host);
    free(c_nvme);
    free(c_real);
    free(c_late);
    pic_free(&p);
    return exit_code;
}

/* --- export: Chrome trace-event JSON (Perfetto) ------------------------------ */

static void usage_export(FILE *f) {
    fprintf(f,
            "usage: hoff-plan export TRACE --budget SIZE|PCT%% --perfetto FILE.json [options]\n"
            "Writes the simulated replay as Chrome trace-event JSON, which ui.perfetto.dev and\n"
            "chrome://tracing open: a compute track (steps, ops, stalls for faults and waits),\n"
            "D2H and H2D copy tracks (every eviction and prefetch), an NVMe track (spills and\n"
            "restores), and counter tracks for the bytes on the device, the host tier and the\n"
            "NVMe tier.  Times are the sim's virtual clock; every step is exported.\n"
            "\n"
            "  --perfetto FILE      the JSON to write (required)\n"
            "  --budget SIZE|PCT%%   resident offload bytes allowed (as in simulate)\n"
            "  --host-cap SIZE      host-tier bytes (default: no limit)\n"
            "  --spill-dir DIR      NVMe tier: spill what passes the host cap to files in DIR\n"
            "  --bandwidth GBPS     the sim's copy engines and the planner's figure (default 50)\n"
            "  --planner NAME       planner (default timed)\n"
            "  --steps N            steps to simulate, the first the warmup (default 3, >= 2)\n"
            "  --compute-scale X    divide the trace's compute gaps by X (default 1)\n"
            "  --gpu-step MS        scale the compute gaps so a step computes for MS ms\n"
            "  --no-memory-check    run even when available memory looks too small for the sim\n"
            "  -h, --help           this text\n"
            "\n"
            "Exit status: 0 ok, 1 unreadable trace, runtime error or unwritable file, 2 bad usage.\n");
}

static const char *ex_out;

static int ex_extra(struct pic *p, int opt, const char *arg) {
    if (opt == 'P') {
        ex_out = arg;
        return 0;
    }
    return -1;
}

#define TID_COMPUTE 1
#define TID_D2H 2
#define TID_H2D 3
#define TID_NVME 4

static void ex_sep(FILE *f, int *first) {
    fputs(*first ? "\n" : ",\n", f);
    *first = 0;
}

/* ns as trace-event microseconds. */
static double us(uint64_t ns) {
    return (double)ns / 1000.0;
}

static void ex_slice(FILE *f, int *first, int tid, const char *name, const char *cat, uint64_t t0, uint64_t t1,
                     const char *args) {
    ex_sep(f, first);
    fprintf(f, "{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"name\":", tid);
    json_str(f, name);
    fprintf(f, ",\"cat\":\"%s\",\"ts\":%.3f,\"dur\":%.3f%s%s}", cat, us(t0), us(t1 > t0 ? t1 - t0 : 0),
            args ? ",\"args\":" : "", args ? args : "");
}

static void ex_counter(FILE *f, int *first, const char *name, uint64_t t, uint64_t v) {
    ex_sep(f, first);
    fprintf(f, "{\"ph\":\"C\",\"pid\":1,\"name\":\"%s\",\"ts\":%.3f,\"args\":{\"bytes\":%" PRIu64 "}}", name, us(t),
            v);
}

static int cmd_export(int argc, char **argv) {
    static const struct option extra[] = {{"perfetto", required_argument, NULL, 'P'}};
    static const struct {
        int tid;
        const char *name;
    } tracks[] = {{TID_COMPUTE, "compute"},
                  {TID_D2H, "D2H copy engine (evictions)"},
                  {TID_H2D, "H2D copy engine (prefetches)"},
                  {TID_NVME, "NVMe tier (spills, restores)"}};
    struct pic p;
    FILE *f = NULL;
    struct hoff__outfile of;
    int rc, first = 1, exit_code = EXIT_FAIL, k;
    size_t i, j, nslices = 0;
    char args[256];

    memset(&p, 0, sizeof p);
    ex_out = NULL;
    p.sub = "export";
    rc = pic_parse(&p, argc, argv, ":h", extra, 1, ex_extra, usage_export);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!ex_out)
        return usage_error(p.sub, "--perfetto FILE.json is required");
    if ((rc = pic_load(&p)) != 0)
        return rc;
    if (pic_run(&p))
        goto out;
    if (hoff__out_open(&of, ex_out) < 0) {
        fprintf(stderr, "%s export: %s\n", cmd, hoff_last_error());
        goto out;
    }
    f = of.f;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"hoff-plan export\",\"trace\":");
    json_str(f, p.so.trace_path);
    fprintf(f, ",\"planner\":");
    json_str(f, p.planner);
    fprintf(f, ",\"budget_bytes\":%" PRIu64 ",\"offload_peak_bytes\":%" PRIu64 ",\"bandwidth_gbps\":%g,\"steps\":%d"
               ",\"host_cap_bytes\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64 ",\"spills\":%" PRIu64
               ",\"restores\":%" PRIu64 ",\"clock\":\"sim virtual time\"},\n\"traceEvents\":[",
            p.budget, p.offload_peak, p.so.bandwidth, p.rec.steps, p.so.host_cap, p.last.evictions, p.last.prefetches,
            p.last.spills, p.last.restores);
    /* Tracks. */
    ex_sep(f, &first);
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":");
    snprintf(args, sizeof args, "hoff sim replay: %s (budget %s)", base_name(p.so.trace_path), SZ(p.budget));
    json_str(f, args);
    fprintf(f, "}}");
    for (k = 0; k < (int)(sizeof tracks / sizeof tracks[0]); k++) {
        ex_sep(f, &first);
        fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}}",
                tracks[k].tid, tracks[k].name);
        ex_sep(f, &first);
        fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
                tracks[k].tid, k);
    }
    /* Compute: a slice per step, per op (op mark to the next), per stall. */
    for (k = 0; k < p.rec.steps; k++) {
        struct rec_sample *b = rec_at(&p.rec, k, 0), *e = rec_at(&p.rec, k, p.rec.per_step - 1);
        size_t op_ev = SIZE_MAX;
        uint64_t op_t = 0;
        struct rec_sample *s0 = b;

        if (!b || !e)
            continue;
        snprintf(args, sizeof args, "step %d (%s)", k, k == 0 ? "warmup" : "replay");
        ex_slice(f, &first, TID_COMPUTE, args, "step", b->t, e->t, NULL);
        nslices++;
        for (i = 0; i <= p.t.nev; i++) {
            struct rec_sample *s = rec_at(&p.rec, k, i + 1);
            int is_op = i < p.t.nev && p.t.ev[i].kind == HOFF__TEV_OP;

            if ((is_op || i == p.t.nev) && op_ev != SIZE_MAX && s) {
                ex_slice(f, &first, TID_COMPUTE, op_name(&p.t, &p.t.ev[op_ev])[0] ? op_name(&p.t, &p.t.ev[op_ev])
                                                                                   : "op",
                         "op", op_t, s->t, NULL);
                nslices++;
            }
            if (is_op && s) {
                op_ev = i;
                op_t = s->t;
            }
            /* The bytes per tier after every event, and the late prefetches. */
            if (s && i < p.t.nev) {
                ex_counter(f, &first, "device: resident offload bytes", s->t, s->st.resident_bytes);
                ex_counter(f, &first, "host tier bytes", s->t, s->st.host_bytes);
                ex_counter(f, &first, "NVMe tier bytes", s->t, s->st.nvme_bytes);
                if (s0 && s->st.late_prefetches > s0->st.late_prefetches) {
                    ex_sep(f, &first);
                    fprintf(f,
                            "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%d,\"name\":\"late prefetch\",\"ts\":%.3f,"
                            "\"args\":{\"event\":%zu,\"count\":%" PRIu64 "}}",
                            TID_COMPUTE, us(s->t), i, s->st.late_prefetches - s0->st.late_prefetches);
                }
            }
            if (s)
                s0 = s;
        }
        if (e) {
            ex_counter(f, &first, "device: resident offload bytes", e->t, e->st.resident_bytes);
            ex_counter(f, &first, "host tier bytes", e->t, e->st.host_bytes);
            ex_counter(f, &first, "NVMe tier bytes", e->t, e->st.nvme_bytes);
        }
    }
    if (p.budget) {
        struct rec_sample *b = rec_at(&p.rec, 0, 0), *e = rec_at(&p.rec, p.rec.steps - 1, p.rec.per_step - 1);

        if (b && e) {
            ex_counter(f, &first, "budget", b->t, p.budget);
            ex_counter(f, &first, "budget", e->t, p.budget);
        }
    }
    /* Copies and stalls as the sim's engines and clock had them. */
    for (j = 0; j < p.rec.nsp; j++) {
        const struct rec_span *sp = &p.rec.sp[j];
        static const char *const names[] = {"evict",  "prefetch", "fault (page-in)", "wait for a transfer",
                                            "spill (write)", "restore (read)"};
        static const char *const cats[] = {"d2h", "h2d", "stall", "stall", "nvme", "nvme"};
        static const int tids[] = {TID_D2H, TID_H2D, TID_COMPUTE, TID_COMPUTE, TID_NVME, TID_NVME};

        snprintf(args, sizeof args, "{\"bytes\":%" PRIu64 ",\"step\":%d}", sp->bytes, sp->step);
        ex_slice(f, &first, tids[sp->kind], names[sp->kind], cats[sp->kind], sp->t0, sp->t1, args);
        nslices++;
    }
    if (!p.last.spills && !p.last.restores) {
        struct rec_sample *b = rec_at(&p.rec, 0, 0);

        ex_sep(f, &first);
        fprintf(f,
                "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%d,\"name\":\"no NVMe traffic in this replay\","
                "\"ts\":%.3f}",
                TID_NVME, b ? us(b->t) : 0.0);
    }
    fprintf(f, "\n]}\n");
    f = NULL;
    if (hoff__out_commit(&of) < 0) {
        fprintf(stderr, "%s export: %s\n", cmd, hoff_last_error());
        goto out;
    }
    printf("%s: %d steps, %zu slices (%zu copies and stalls), counters after each of %zu events\n", ex_out,
           p.rec.steps, nslices, p.rec.nsp, p.t.nev);
    exit_code = 0;
out:
    if (f)
        hoff__out_abort(&of); /* the file at the path, if any, is left as it was */
    pic_free(&p);
    return exit_code;
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
            if (parse_double_in(sub, "--tflops", optarg, HOFF__SYNTH_TFLOPS_MIN, HOFF__SYNTH_TFLOPS_MAX, &o.tflops))
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
        return rc == -EINVAL || rc == -ERANGE ? EXIT_USAGE : EXIT_FAIL;
    }
    rc = hoff__trace_save(&t, out);
    if (rc) {
        fprintf(stderr, "%s synth: %s\n", cmd, hoff_last_error());
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
    int opt, json = 0, rc;
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
    if ((rc = trace_operand(sub, argc, argv, 0, 0, NULL, &path)) != 0)
        return rc;
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
    tpeak = total_peak(&t, NULL);
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
            "  timeline TRACE --budget SIZE|PCT%% -o FILE.svg\n"
            "                                      draw resident bytes over the step (SVG)\n"
            "  export TRACE --budget SIZE|PCT%% --perfetto FILE.json\n"
            "                                      the simulated replay as a Perfetto trace\n"
            "  synth -o FILE                       write a synthetic transformer trace\n"
            "  info TRACE                          summarise a trace\n"
            "  model TRACE --budget SIZE|PCT%%      times, resident bytes and gaps as JSON (for bounds)\n"
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
    if (strcmp(c, "timeline") == 0)
        return cmd_timeline(argc - 1, argv + 1);
    if (strcmp(c, "export") == 0)
        return cmd_export(argc - 1, argv + 1);
    if (strcmp(c, "synth") == 0)
        return cmd_synth(argc - 1, argv + 1);
    if (strcmp(c, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(c, "model") == 0)
        return cmd_model(argc - 1, argv + 1);
    fprintf(stderr,
            "%s: unknown command '%s' (simulate, show, timeline, export, synth, info or model; see '%s --help')\n",
            cmd, c, cmd);
    return EXIT_USAGE;
}
