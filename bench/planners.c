/* planners.c — benchmark: greedy against timed on the sim backend (50 GB/s per direction): synthetic transformer
 * steps and the committed CPU traces put on an H200 clock, at 50/25/10% of the no-offload peak; one JSON line per
 * (trace, budget, planner) with the exposed stall and a lower bound on it.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchargs.h"
#include "hoff.h"
#include "mem/pool.h"
#include "plan/plan.h"
#include "trace/drive.h"
#include "trace/synth.h"
#include "trace/trace.h"

#include "lpbound.h"

#define GBPS 50.0

/* --- the lower bound ---------------------------------------------------------
 * At event i the resident offload bytes after every possible release (greedy's
 * releases: a block's dead tail after its last access) are R_i; at least
 * X_i = R_i - budget of them must be away.  Every block is allocated in the
 * step, so those bytes crossed the D2H engine between the step's start and
 * event i: stall >= X_i / d2h - C_i (C_i the compute before event i).  Of
 * them, all but the bytes live at i with no access after i (retained blocks
 * past their last use; blocks without access marks are counted as never used
 * again, which only weakens the bound) must come back over H2D before the
 * step ends: stall >= (X_i - N_i) / h2d - (C_end - C_i).  The bound is the
 * maximum over events of both, floored at 0.  Per-call latency, queueing and
 * the ordering of uses are ignored: it is weak (often 0) but honest. */
/* With a host cap (--host-cap), W_i = X_i - cap of them must be on the
 * NVMe tier at event i: written there before it, stall >= W_i / nvme_write
 * - C_i; and all but the dead ones read back after it, stall >= (W_i -
 * N_i) / nvme_read - (C_end - C_i); one device does both, stall >= W_i /
 * nvme_write + (W_i - N_i) / nvme_read - C_end. */
#define NVME_READ_GBPS 6.5 /* the sim's defaults */
#define NVME_WRITE_GBPS 3.5

static uint64_t bound_ns(const struct hoff__trace *t, uint64_t budget, uint64_t host_cap, const double *C,
                         double cend) {
    size_t n = t->nev, i;
    int64_t *res = calloc(n + 1, sizeof *res), *dead = calloc(n + 1, sizeof *dead), r = 0, d = 0;
    double best = 0;

    if (!res || !dead) {
        free(res);
        free(dead);
        return 0;
    }
    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];
        int64_t sz = (int64_t)hoff__pool_block_bytes(b->pool, b->size);
        uint32_t end = b->retained ? (uint32_t)n : b->free_ev + 1, last;

        if (b->pool != 1)
            continue;
        last = b->naccess ? t->acc[b->first_access + b->naccess - 1].ev : b->alloc_ev;
        res[b->alloc_ev] += sz;
        res[end] -= sz;
        if (b->pinned)
            continue;
        if (b->naccess >= 2 && !b->retained && last + 1 < b->free_ev) { /* released after last */
            res[last + 1] -= sz;
            res[end] += sz;
        } else if (b->naccess < 2 || b->retained) { /* live with no (known) access after last */
            dead[last + 1 < end ? last + 1 : end] += sz;
            dead[end] -= sz;
        }
    }
    for (i = 0; i < n; i++) {
        double x, y;

        r += res[i];
        d += dead[i];
        if (r <= (int64_t)budget)
            continue;
        x = (double)(r - (int64_t)budget);
        y = x - (double)d;
        if (x / GBPS - C[i] > best)
            best = x / GBPS - C[i];
        if (y > 0 && y / GBPS - (cend - C[i]) > best)
            best = y / GBPS - (cend - C[i]);
        if (host_cap && x > (double)host_cap) {
            double w = x - (double)host_cap, back = w - (double)d > 0 ? w - (double)d : 0, v;

            v = w / NVME_WRITE_GBPS - C[i];
            best = v > best ? v : best;
            v = back / NVME_READ_GBPS - (cend - C[i]);
            best = v > best ? v : best;
            v = w / NVME_WRITE_GBPS + back / NVME_READ_GBPS - cend;
            best = v > best ? v : best;
        }
    }
    free(res);
    free(dead);
    return (uint64_t)best;
}

/* Compute time before each event as the drive models it (drive.c). */
static double *compute_times(const struct hoff__trace *t, uint64_t gpu_step_ns, double *cend) {
    double *C = malloc((t->nev ? t->nev : 1) * sizeof *C), scale;
    int gpu = t->nev > 0;
    uint64_t end, last;
    size_t i;

    if (!C)
        return NULL;
    for (i = 0; i < t->nev; i++)
        if (t->ev[i].t_gpu_ns == HOFF__TIME_UNKNOWN)
            gpu = 0;
    end = gpu ? t->step_gpu_ns : t->step_ns;
    last = t->nev ? (gpu ? t->ev[t->nev - 1].t_gpu_ns : t->ev[t->nev - 1].t_cpu_ns) : 0;
    if (end == HOFF__TIME_UNKNOWN || end < last)
        end = last;
    scale = gpu_step_ns ? (end ? (double)gpu_step_ns / (double)end : 0) : 1.0;
    for (i = 0; i < t->nev; i++)
        C[i] = (double)(gpu ? t->ev[i].t_gpu_ns : t->ev[i].t_cpu_ns) * scale;
    *cend = (double)end * scale;
    return C;
}

/* --- one run -------------------------------------------------------------- */

struct run {
    uint64_t stall_ns, step_ns, compute_ns, bytes_moved, prefetch_calls, prefetches, plan_ns, peak;
    uint64_t predicted_ns, groups, evict_calls, evictions;
    uint64_t peak_host, bytes_spilled, bytes_restored, host_cap_waits; /* over the whole run */
    uint64_t floor, window_violations;
    int integrity_ok, feasible;
};

/* --host-cap PCT: the host tier's cap, in % of each trace's offload peak,
 * with an NVMe tier in spill_dir (0: no cap). */
static int host_cap_pct;
static char spill_dir[4096];

static int simulate(const struct hoff__trace *t, uint64_t budget, uint64_t host_cap, const char *planner,
                    uint64_t plan_time_ns, uint64_t gpu_step_ns, struct run *out) {
    struct hoff_config cfg;
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    struct hoff_stats st;
    hoff_ctx *ctx = NULL;
    char err[256];
    const struct hoff__drive_step *ls;
    int rc, k;

    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_SIM;
    cfg.sim_device_bytes = 80ull << 30;
    cfg.sim_h2d_gbps = cfg.sim_d2h_gbps = cfg.bandwidth_gbps = GBPS;
    cfg.sim_protect = HOFF_SIM_POISON;
    cfg.oversub_margin_bytes = 0;
    cfg.budget_bytes = budget;
    cfg.log_level = HOFF_LOG_ERROR;
    cfg.plan_thread = 0; /* the replay from the step after the recording: the steady state */
    cfg.plan_time_ns = plan_time_ns;
    if (host_cap) {
        cfg.host_cap_bytes = host_cap;
        if ((rc = hoff_config_set(&cfg, "spill_dir", spill_dir, err, sizeof err)) != 0) {
            fprintf(stderr, "bench/planners: spill directory %s: %s\n", spill_dir, err);
            return rc;
        }
    }
    if ((rc = hoff_config_set(&cfg, "planner", planner, err, sizeof err)) != 0) {
        fprintf(stderr, "bench/planners: planner %s: %s\n", planner, err);
        return rc;
    }
    if ((rc = hoff_init(&ctx, &cfg)) != 0) {
        fprintf(stderr, "bench/planners: sim context: %s\n", hoff_last_error());
        return rc;
    }
    memset(&o, 0, sizeof o);
    o.steps = 3;
    o.verify = 1;
    o.compute_scale = 1.0;
    o.gpu_step_ns = gpu_step_ns;
    memset(&r, 0, sizeof r);
    rc = hoff__trace_drive(ctx, t, &o, &r);
    if (rc == 0)
        rc = hoff_stats_get(ctx, &st);
    if (rc) {
        fprintf(stderr, "bench/planners: drive: %s\n", hoff_last_error());
    } else {
        ls = &r.step[r.steps - 1];
        memset(out, 0, sizeof *out);
        out->stall_ns = ls->stall_ns;
        out->step_ns = ls->step_ns;
        out->compute_ns = ls->compute_ns;
        out->bytes_moved = ls->bytes_d2h + ls->bytes_h2d;
        out->prefetch_calls = ls->prefetch_calls;
        out->evict_calls = ls->evict_calls;
        out->evictions = ls->evictions;
        out->prefetches = ls->prefetches;
        out->plan_ns = st.plan_ns;
        out->predicted_ns = st.plan_stall_ns;
        out->groups = st.plan_groups;
        out->peak_host = st.peak_host_bytes;
        out->bytes_spilled = st.bytes_spilled;
        out->bytes_restored = st.bytes_restored;
        out->host_cap_waits = st.host_cap_waits;
        out->feasible = st.plan_feasible != 0;
        out->floor = st.plan_floor_bytes;
        out->window_violations = st.window_violations;
        for (k = 1; k < r.steps; k++)
            if (r.step[k].peak_resident_bytes > out->peak)
                out->peak = r.step[k].peak_resident_bytes;
        out->integrity_ok = r.integrity_errors == 0;
    }
    hoff__drive_result_free(&r);
    hoff_shutdown(ctx);
    return rc;
}

static int json;

/* --lp CMD: the LP lower bound of bench/bound.py (its relaxation of every
 * plan made of the trace's gaps, with use windows, per-call latency and the
 * two FIFO engines), run as CMD (e.g. "python3 ../bench/bound.py") with
 * --hoff-plan ./hoff-plan on the same trace, budgets, clock and bandwidth,
 * and reported as lp_bound_ns beside bound_ns.  Not with --host-cap (the LP
 * has no host tier). */
static struct hoff_bench_lp_run lp_run = {NULL, "./hoff-plan", GBPS, 0};

/* --anytime MS[,MS...]: timed is run again under each of these time
 * budgets (HOFF_PLAN_TIME), to show what a budget costs in stall. */
#define MAX_ANYTIME 8
static uint64_t anytime_ns[MAX_ANYTIME];
static int nanytime;

static int bench_trace(const char *name, const struct hoff__trace *t, const char *path, uint64_t gpu_step_ns) {
    static const int pct[] = {50, 25, 10};
    static const char *const planners[] = {"greedy", "timed"};
    uint64_t peak = hoff__trace_offload_peak(t, hoff__pool_block_bytes, NULL);
    double cend, *C = compute_times(t, gpu_step_ns, &cend);
    struct hoff_bench_lp lp[3];
    size_t i, j;

    if (!C)
        return -ENOMEM;
    lp_run.gpu_step_ms = gpu_step_ns / 1e6;
    if (lp_run.cmd && host_cap_pct)
        hoff_bench_lp_none(lp, pct, 3, "not run: the LP has no host tier (--host-cap)");
    else if (path)
        hoff_bench_lp_file(&lp_run, path, pct, 3, lp);
    else /* a synthetic step: bound.py reads a file */
        hoff_bench_lp_trace(&lp_run, t, name, pct, 3, lp);
    for (i = 0; i < sizeof pct / sizeof pct[0]; i++) {
        uint64_t budget = peak * (uint64_t)pct[i] / 100, cap = peak * (uint64_t)host_cap_pct / 100;
        uint64_t bound = bound_ns(t, budget, cap, C, cend);

        for (j = 0; j < 2 + (size_t)nanytime; j++) {
            struct run r;
            uint64_t pt = j < 2 ? 0 : anytime_ns[j - 2];
            const char *pl = j < 2 ? planners[j] : "timed";
            int rc = simulate(t, budget, cap, pl, pt, gpu_step_ns, &r);
            char label[32];

            char lpv[32];

            snprintf(label, sizeof label, pt ? "%s@%gms" : "%s", pl, (double)pt / 1e6);
            if (lp[i].have)
                snprintf(lpv, sizeof lpv, "%" PRIu64, lp[i].ns);
            else
                snprintf(lpv, sizeof lpv, "null");

            if (rc) {
                free(C);
                return rc;
            }
            if (json)
                printf("{\"trace\":\"%s\",\"budget_pct\":%d,\"budget_bytes\":%" PRIu64 ",\"planner\":\"%s\""
                       ",\"plan_time_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64 ",\"bound_ns\":%" PRIu64
                       ",\"step_ns\":%" PRIu64 ",\"compute_ns\":%" PRIu64 ",\"bytes_moved\":%" PRIu64
                       ",\"prefetch_calls\":%" PRIu64 ",\"prefetches\":%" PRIu64 ",\"evict_calls\":%" PRIu64
                       ",\"evictions\":%" PRIu64 ",\"groups\":%" PRIu64 ",\"predicted_stall_ns\":%" PRIu64
                       ",\"plan_ns\":%" PRIu64 ",\"peak_resident_bytes\":%" PRIu64 ",\"within_budget\":%s"
                       ",\"plan_feasible\":%s,\"integrity_ok\":%s,\"host_cap_bytes\":%" PRIu64
                       ",\"peak_host_bytes\":%" PRIu64 ",\"within_host_cap\":%s,\"bytes_spilled\":%" PRIu64
                       ",\"bytes_restored\":%" PRIu64 ",\"host_cap_waits\":%" PRIu64 ",\"floor_bytes\":%" PRIu64
                       ",\"window_violations\":%" PRIu64 ",\"lp_bound_ns\":%s,\"lp_status\":\"%s\"}\n",
                       name, pct[i], budget, pl, pt, r.stall_ns, bound, r.step_ns, r.compute_ns, r.bytes_moved,
                       r.prefetch_calls, r.prefetches, r.evict_calls, r.evictions, r.groups, r.predicted_ns, r.plan_ns,
                       r.peak, r.peak <= budget ? "true" : "false", r.feasible ? "true" : "false",
                       r.integrity_ok ? "true" : "false", cap, r.peak_host,
                       !cap || r.peak_host <= cap ? "true" : "false", r.bytes_spilled, r.bytes_restored,
                       r.host_cap_waits, r.floor, r.window_violations, lpv, lp[i].status);
            else
                printf("%-22s %3d%% %-13s stall %10.3f ms  bound %9.3f ms  lp %9s  step %10.3f ms  moved %7.0f MiB  "
                       "prefetch calls %3" PRIu64 " (blocks %3" PRIu64 ")  plan %8.2f ms  %s%s\n",
                       name, pct[i], label, r.stall_ns / 1e6, bound / 1e6,
                       lp[i].have ? (snprintf(lpv, sizeof lpv, "%.3f ms", lp[i].ns / 1e6), lpv) : "-", r.step_ns / 1e6,
                       r.bytes_moved / 1048576.0, r.prefetch_calls, r.prefetches, r.plan_ns / 1e6,
                       r.peak <= budget ? "within budget" : "OVER BUDGET", r.integrity_ok ? "" : ", INTEGRITY ERROR");
            if (!json && cap)
                printf("%-22s      host cap %7.0f MiB: peak %7.0f MiB%s, spilled %7.0f MiB, %" PRIu64
                       " waits for room\n",
                       "", cap / 1048576.0, r.peak_host / 1048576.0, r.peak_host <= cap ? "" : " OVER THE CAP",
                       r.bytes_spilled / 1048576.0, r.host_cap_waits);
            fflush(stdout);
        }
    }
    free(C);
    return 0;
}

/* The committed CPU traces and their H200 step estimates (FLOPs at 40% of
 * bf16 peak, ~400 TFLOP/s; bench/results/planners-2026-11-29.md). */
static const struct {
    const char *name;
    double gpu_step_ms;
} real[] = {
    {"cnn", 0.44},
    {"gpt", 0.29},
    {"wide", 0.45},
};

static const struct {
    const char *name;
    uint32_t layers;
    uint64_t hidden, seq;
} shapes[] = {
    {"synth-L8-h1024-s2048", 8, 1024, 2048},
    {"synth-L8-h4096-s2048", 8, 4096, 2048},
    {"synth-L4-h8192-s2048", 4, 8192, 2048},
};

/* --only NAMES: the traces to run (comma-separated names as in the output;
 * NULL: all). */
static const char *only;

static int wanted(const char *name) {
    size_t n = strlen(name);
    const char *p = only;

    if (!only)
        return 1;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);

        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

static void usage(FILE *f, const struct bench_args *ba) {
    fprintf(f,
            "usage: %s [--json] [--host-cap PCT] [--anytime MS[,MS...]] [--lp CMD [--hoff-plan PATH]]\n"
            "       [--only NAME[,NAME...]] [TRACEDIR]\n"
            "Replays the synthetic transformer steps and the committed traces in TRACEDIR (default\n"
            "tests/data/traces) on the sim at 50/25/10%% of their no-offload peak with each planner.\n"
            "--json: one JSON object per (trace, budget, planner) instead of the table.\n"
            "--host-cap PCT: cap the host tier at PCT%% (1-100) of each trace's offload peak and\n"
            "spill the rest to an NVMe tier (the sim's 6.5 GB/s read, 3.5 GB/s write) in a fresh\n"
            "directory under $TMPDIR (default /var/tmp), removed at the end.\n"
            "--anytime MS,...: run timed again with each time budget (HOFF_PLAN_TIME; the plan_time_ns\n"
            "of the row, 0 without): what the budget costs in stall.\n"
            "--lp CMD: also the LP lower bound of bench/bound.py, run as CMD (e.g. \"python3\n"
            "../bench/bound.py\"; scipy needed) with --hoff-plan PATH (default ./hoff-plan), as\n"
            "lp_bound_ns (null, with lp_status saying why, when infeasible or not run).\n"
            "--only NAMES: run only these traces (comma-separated, as named in the output:\n"
            "synth-L8-h1024-s2048, synth-L8-h4096-s2048, synth-L4-h8192-s2048, cnn, gpt, wide).\n",
            ba->argv[0]);
}

/* --anytime MS,...: up to MAX_ANYTIME time budgets. */
static void parse_anytime(const struct bench_args *ba, const char *s) {
    char buf[512], *item[MAX_ANYTIME];
    int k, n = bench_args_list(ba, "--anytime", s, buf, sizeof buf, item, MAX_ANYTIME);

    for (k = 0; k < n; k++)
        anytime_ns[k] =
            (uint64_t)(bench_args_real(ba, "--anytime", item[k], "a time budget in ms", 0, 3600e3) * 1e6 + 0.5);
    nanytime = n;
}

/* --only NAMES: at least one of them must name a trace this benchmark runs. */
static void parse_only(const struct bench_args *ba, const char *s) {
    size_t k;
    int known = 0;

    only = s;
    for (k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        known += wanted(shapes[k].name);
    for (k = 0; k < sizeof real / sizeof real[0]; k++)
        known += wanted(real[k].name);
    if (!known)
        bench_args_bad(ba, "--only", s,
                       "trace names separated by commas (synth-L8-h1024-s2048, synth-L8-h4096-s2048, "
                       "synth-L4-h8192-s2048, cnn, gpt, wide)");
}

int main(int argc, char **argv) {
    struct bench_args ba = {"bench/planners", usage, argc, argv, 0};
    const char *dir = "tests/data/traces";
    char path[4096], err[256];
    size_t i;
    int rc = 0;

    for (ba.i = 1; ba.i < argc; ba.i++) {
        if (bench_args_is(&ba, "--json"))
            json = 1;
        else if (bench_args_is(&ba, "--host-cap"))
            host_cap_pct = (int)bench_args_uint(&ba, "--host-cap", bench_args_value(&ba), 1, 100);
        else if (hoff_bench_lp_arg(&ba, &lp_run))
            continue;
        else if (bench_args_is(&ba, "--anytime"))
            parse_anytime(&ba, bench_args_value(&ba));
        else if (bench_args_is(&ba, "--only"))
            parse_only(&ba, bench_args_value(&ba));
        else if (bench_args_is(&ba, "-h") || bench_args_is(&ba, "--help"))
            bench_args_help(&ba);
        else if (argv[ba.i][0] == '-')
            bench_args_unknown(&ba, argv[ba.i]);
        else
            dir = argv[ba.i];
    }

    if (host_cap_pct) {
        const char *tmp = getenv("TMPDIR");

        snprintf(spill_dir, sizeof spill_dir, "%s/hoff-planners-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
        if (!mkdtemp(spill_dir)) {
            fprintf(stderr, "bench/planners: cannot make a spill directory %s: %s\n", spill_dir, strerror(errno));
            return 1;
        }
    }
    for (i = 0; i < sizeof shapes / sizeof shapes[0] && rc == 0; i++) {
        struct hoff__synth_opts so;
        struct hoff__trace t;

        if (!wanted(shapes[i].name))
            continue;
        hoff__synth_defaults(&so);
        so.layers = shapes[i].layers;
        so.hidden = shapes[i].hidden;
        so.seq = shapes[i].seq;
        hoff__trace_init(&t);
        rc = hoff__synth_transformer(&t, &so);
        if (rc == 0)
            rc = bench_trace(shapes[i].name, &t, NULL, 0);
        hoff__trace_destroy(&t);
    }
    for (i = 0; i < sizeof real / sizeof real[0] && rc == 0; i++) {
        struct hoff__trace t;

        if (!wanted(real[i].name))
            continue;
        snprintf(path, sizeof path, "%s/%s.trace.gz", dir, real[i].name);
        hoff__trace_init(&t);
        rc = hoff__trace_load(&t, path, err, sizeof err);
        if (rc)
            fprintf(stderr, "bench/planners: %s: %s\n", path, err);
        else
            rc = bench_trace(real[i].name, &t, path, (uint64_t)(real[i].gpu_step_ms * 1e6 + 0.5));
        hoff__trace_destroy(&t);
    }
    if (host_cap_pct)
        rmdir(spill_dir); /* the tier's files are unlinked O_TMPFILEs: it is empty */
    return rc ? 1 : 0;
}
