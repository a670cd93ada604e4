/* hoff-demo.c — a synthetic transformer training run on hoff's pipeline: parameters in the device pool;
 * activations marked (steps, ops, accesses) so that hoff records step 0 (warmup), plans a residency schedule
 * and replays it in later steps; every byte checked on the way back.  --mode manual adds the pre-pipeline
 * demo's hand prefetches in backward, for comparison.
 * Threading: single-threaded (the library's issuing thread runs behind the API). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hoff.h"
#include "trace/synth.h" /* the compute-rate range */
#include "trace/trace.h" /* the longest step hoff models */

#define DEMO_MAX_LAYERS 1024
#define DEMO_BLOCKS_PER_LAYER 8

/* One activation a layer saves for backward (bf16 unless said otherwise). */
struct act_spec {
    const char *name;
    size_t bytes;
    int candidate;  /* >= managed_min: goes to the managed pool (in a step) */
    size_t usable;  /* bytes hoff hands out for it (probed), candidates only */
};

struct act {
    void *p;
    uint64_t seed;
};

enum demo_mode {
    MODE_PLAN = 0,   /* marks only: the pipeline evicts and prefetches */
    MODE_MANUAL = 1, /* ...plus hand prefetches in backward (the pre-pipeline demo) */
};

struct step_report {
    int state;                    /* enum hoff_plan_state of the step (fallback if it diverged) */
    int planned;                  /* a schedule was built at the end of this step, or (planning
                                     thread) became ready for use at its start */
    int planning;                 /* the step ran under the online policy while the plan was made */
    int plan_after;               /* a plan is being made once the step is over (recorded) */
    uint64_t host_ns;             /* host time of the training thread from step begin to end */
    uint64_t plan_wait_ns;        /* ...of which it waited for planning */
    uint64_t time_ns, compute_ns, stall_ns;
    uint64_t evicted, prefetched, faults, bytes_faulted, late;
    uint64_t fired, skipped, peak_resident;
    uint64_t prefetch_issued, prefetch_resident, prefetch_nospace;
};

struct bad_block {
    int found;
    int step, layer;
    const char *name;
    size_t offset;
    unsigned expected, got;
    int residency;
};

struct demo {
    /* options */
    unsigned layers, hidden, seq, batch, steps;
    int mode;                     /* enum demo_mode */
    unsigned lookahead;           /* manual: layers prefetched ahead in backward; 0 = budget room */
    int corrupt;                  /* flip a byte after writing (checks the checker) */
    double tflops;
    int json;
    int plan_thread;              /* the context plans on its planning thread (HOFF_PLAN_THREAD) */
    /* workload */
    struct act_spec spec[DEMO_BLOCKS_PER_LAYER];
    int nspec;
    uint64_t param_bytes, nparams;
    uint64_t act_bytes_layer, cand_bytes_layer, cand_usable_layer;
    uint64_t act_peak;            /* resident offload bytes without offload */
    uint64_t budget;
    double budget_pct;            /* < 0: given as a size */
    uint64_t fwd_ns, bwd_ns;      /* modelled compute per layer */
    double step_compute_ns;       /* modelled compute per step */
    /* run */
    hoff_ctx *ctx;
    hoff_stream stream;
    int compute_modelled;
    struct act *acts;             /* layers x nspec */
    struct step_report *rep;
    uint64_t verified_blocks, verified_bytes;
    uint64_t prefetch_errors, access_errors;
    struct bad_block bad;
};

static uint64_t mono_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *fmt_size(uint64_t bytes, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;

    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

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

#define SZ(x) fmt_size((x), (char[32]){0}, 32)
#define TM(x) fmt_time((x), (char[32]){0}, 32)

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

/* The activations one layer saves for backward (flash attention: no s x s
 * scores).  b*s*h elements in bf16 is the unit. */
static void build_workload(struct demo *d, uint64_t managed_min) {
    size_t bsh = (size_t)d->batch * d->seq * d->hidden;
    size_t heads = d->hidden >= 64 ? d->hidden / 64 : 1;
    struct {
        const char *name;
        size_t bytes;
    } s[] = {
        {"ln1_input", bsh * 2},
        {"qkv", bsh * 3 * 2},
        {"attn_out", bsh * 2},
        {"attn_lse", (size_t)d->batch * heads * d->seq * 4}, /* fp32 */
        {"attn_dropout_mask", bsh},                          /* 1 byte */
        {"ln2_input", bsh * 2},
        {"mlp_fc1", bsh * 4 * 2},
        {"mlp_gelu", bsh * 4 * 2},
    };
    double fwd_flops;

    d->nspec = (int)(sizeof(s) / sizeof(s[0]));
    d->act_bytes_layer = d->cand_bytes_layer = 0;
    for (int i = 0; i < d->nspec; i++) {
        d->spec[i].name = s[i].name;
        d->spec[i].bytes = (s[i].bytes + 7) & ~(size_t)7;
        d->spec[i].candidate = d->spec[i].bytes >= managed_min;
        d->spec[i].usable = d->spec[i].bytes;
        d->act_bytes_layer += d->spec[i].bytes;
        if (d->spec[i].candidate)
            d->cand_bytes_layer += d->spec[i].bytes;
    }
    /* Parameters: qkv, out projection, fc1, fc2 (bf16) and two layer norms. */
    d->param_bytes = (uint64_t)d->layers * (12ull * d->hidden * d->hidden * 2 + 4ull * d->hidden * 2);
    d->nparams = (uint64_t)d->layers * 6;
    /* Forward FLOPs of a layer: 24*b*s*h^2 (matmuls) + 4*b*s^2*h (attention). */
    fwd_flops = 24.0 * d->batch * d->seq * (double)d->hidden * d->hidden +
                4.0 * d->batch * (double)d->seq * d->seq * d->hidden;
    /* A step computes for 3 * layers * fwd; main refuses one past the
     * longest step hoff models (the sim clock must not saturate). */
    d->step_compute_ns = 3.0 * d->layers * (fwd_flops / (d->tflops * 1e3));
    if (d->step_compute_ns > (double)HOFF__STEP_NS_MAX)
        return;
    d->fwd_ns = (uint64_t)(fwd_flops / (d->tflops * 1e3));
    if (d->fwd_ns == 0)
        d->fwd_ns = 1;
    d->bwd_ns = 2 * d->fwd_ns;
}

/* What hoff hands out for each offload candidate: a throw-away context with
 * the same configuration and no budget. */
static int probe_sizes(struct demo *d, const struct hoff_config *cfg, const char **what) {
    struct hoff_config c = *cfg;
    hoff_ctx *probe;
    int rc;

    c.budget_bytes = 0;
    *what = "hoff_init";
    rc = hoff_init(&probe, &c);
    if (rc)
        return rc;
    d->cand_usable_layer = 0;
    for (int i = 0; i < d->nspec; i++) {
        void *p;
        if (!d->spec[i].candidate)
            continue;
        p = hoff_malloc_flags(probe, d->spec[i].bytes, NULL, HOFF_ALLOC_MANAGED);
        if (!p) {
            *what = "hoff_malloc_flags (probing the block sizes)";
            rc = errno ? -errno : -ENOMEM;
            hoff_shutdown(probe);
            return rc;
        }
        d->spec[i].usable = hoff_block_size(probe, p);
        if (d->spec[i].usable < d->spec[i].bytes)
            d->spec[i].usable = d->spec[i].bytes;
        d->cand_usable_layer += d->spec[i].usable;
        hoff_free(probe, p, NULL);
    }
    return hoff_shutdown(probe);
}

/* The pattern: 64-bit words seed ^ k*golden, little-endian in memory, so any
 * lost, stale, swapped or shifted page shows. */
static inline uint64_t pat_word(uint64_t seed, size_t k) {
    return seed ^ ((uint64_t)k * 0x9E3779B97F4A7C15ull);
}

static inline unsigned pat_byte(uint64_t seed, size_t i) {
    return (unsigned)(pat_word(seed, i / 8) >> (8 * (i % 8))) & 0xff;
}

static void fill(void *p, size_t n, uint64_t seed) {
    unsigned char *b = p;
    size_t words = n / 8;

    for (size_t k = 0; k < words; k++) {
        uint64_t w = pat_word(seed, k);
        memcpy(b + 8 * k, &w, 8);
    }
    for (size_t i = words * 8; i < n; i++)
        b[i] = (unsigned char)pat_byte(seed, i);
}

/* Returns the offset of the first bad byte, or (size_t)-1. */
static size_t check(const void *p, size_t n, uint64_t seed) {
    const unsigned char *b = p;
    size_t words = n / 8;

    for (size_t k = 0; k < words; k++) {
        uint64_t w, want = pat_word(seed, k);
        memcpy(&w, b + 8 * k, 8);
        if (w != want) {
            for (size_t i = 8 * k; i < 8 * k + 8; i++)
                if (b[i] != pat_byte(seed, i))
                    return i;
        }
    }
    for (size_t i = words * 8; i < n; i++)
        if (b[i] != pat_byte(seed, i))
            return i;
    return (size_t)-1;
}

static uint64_t seed_of(int step, int layer, int j) {
    uint64_t x = ((uint64_t)step << 40) ^ ((uint64_t)layer << 16) ^ (uint64_t)j;
    x ^= 0xD1B54A32D192ED03ull;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return x;
}

static int fail_call(const char *what, int rc) {
    fprintf(stderr, "hoff-demo: %s: %s (%s)\n", what, hoff_strerror(rc), hoff_last_error());
    return 1;
}

static void compute(struct demo *d, uint64_t ns, uint64_t *acc) {
    int rc;

    if (!d->compute_modelled)
        return;
    rc = hoff_sim_compute(d->ctx, d->stream, ns);
    if (rc == -ENOTSUP) {
        d->compute_modelled = 0;
        return;
    }
    if (rc == 0)
        *acc += ns;
}

/* An op boundary: the previous op's work is enqueued, so the use windows of
 * the blocks it used close here (hoff_mark_op(3)); the plan's actions are
 * attached to these marks, the allocations and the accesses. */
static int mark_op(struct demo *d, unsigned l, const char *phase) {
    char name[64];
    int rc;

    snprintf(name, sizeof name, "L%u.%s", l, phase);
    rc = hoff_mark_op(d->ctx, name);
    return rc ? fail_call("hoff_mark_op", rc) : 0;
}

/* The compute of one of a layer's nspec ops: an equal share of the layer's
 * time (the last op takes the remainder). */
static uint64_t op_ns(const struct demo *d, uint64_t layer_ns, int j) {
    uint64_t share = layer_ns / (uint64_t)d->nspec;

    return j == d->nspec - 1 ? layer_ns - share * (uint64_t)(d->nspec - 1) : share;
}

/* Forward: each activation is the output of an op of its own, marked before
 * the op allocates it (the op boundaries a framework reports), so that its
 * use window closes when the next op begins. */
static int forward(struct demo *d, int step, struct step_report *r) {
    for (unsigned l = 0; l < d->layers; l++) {
        for (int j = 0; j < d->nspec; j++) {
            struct act *a = &d->acts[l * d->nspec + j];
            char phase[40];
            int rc;

            snprintf(phase, sizeof phase, "fwd.%s", d->spec[j].name);
            if (mark_op(d, l, phase))
                return 1;
            a->p = hoff_malloc(d->ctx, d->spec[j].bytes, d->stream);
            if (!a->p)
                return fail_call("hoff_malloc", errno ? -errno : -ENOMEM);
            a->seed = seed_of(step, (int)l, j);
            rc = hoff_access(d->ctx, a->p, 1, d->stream);
            if (rc)
                return fail_call("hoff_access (write)", rc);
            fill(a->p, d->spec[j].bytes, a->seed);
            if (d->corrupt && step == (int)d->steps - 1 && l == d->layers / 2 && j == 1)
                ((unsigned char *)a->p)[d->spec[j].bytes / 3] ^= 0x5a;
            compute(d, op_ns(d, d->fwd_ns, j), &r->compute_ns);
        }
    }
    return 0;
}

/* Bytes of layer l's offload candidates that are off the device. */
static uint64_t away_bytes(struct demo *d, unsigned l) {
    uint64_t n = 0;

    for (int j = 0; j < d->nspec; j++) {
        int res;
        if (!d->spec[j].candidate)
            continue;
        res = hoff_residency(d->ctx, d->acts[l * d->nspec + j].p);
        if (res == HOFF_RES_HOST || res == HOFF_RES_DISCARDED || res == HOFF_RES_EVICTING)
            n += d->spec[j].usable;
    }
    return n;
}

/* Prefetch layer l's candidates that are on the host.  fit_only: only those
 * that fit in the budget's free room now, so that the prefetch never evicts
 * the blocks the current layer is computing with. */
static void prefetch_layer(struct demo *d, unsigned l, struct step_report *r, int fit_only) {
    for (int j = 0; j < d->nspec; j++) {
        void *p = d->acts[l * d->nspec + j].p;
        struct hoff_stats st;
        int rc, res;

        if (!d->spec[j].candidate)
            continue;
        res = hoff_residency(d->ctx, p);
        if (res == HOFF_RES_DEVICE || res == HOFF_RES_PREFETCHING) {
            r->prefetch_resident++;
            continue;
        }
        if (res != HOFF_RES_HOST && res != HOFF_RES_DISCARDED)
            continue; /* still evicting: a later pass or the access brings it back */
        if (fit_only && d->budget &&
            (hoff_stats_get(d->ctx, &st) != 0 ||
             st.resident_bytes + d->spec[j].usable > d->budget)) {
            r->prefetch_nospace++;
            continue;
        }
        rc = hoff_prefetch(d->ctx, p, d->stream);
        if (rc == 0)
            r->prefetch_issued++;
        else if (rc == -EALREADY)
            r->prefetch_resident++;
        else if (rc == -HOFF_EBUDGET)
            r->prefetch_nospace++; /* comes back on demand instead */
        else if (d->prefetch_errors++ == 0)
            fprintf(stderr, "hoff-demo: warning: hoff_prefetch: %s (%s)\n",
                    hoff_strerror(rc), hoff_last_error());
    }
}

/* Backward: the op that needs activation j (read, in the reverse of their
 * order) runs, then releases it, as autograd frees a node's saved tensors
 * once the node has run. */
static int backward(struct demo *d, int step, struct step_report *r) {
    for (int l = (int)d->layers - 1; l >= 0; l--) {
        for (int j = d->nspec - 1; j >= 0; j--) {
            struct act *a = &d->acts[l * d->nspec + j];
            char phase[40];
            size_t bad;
            int rc;

            snprintf(phase, sizeof phase, "bwd.%s", d->spec[j].name);
            if (mark_op(d, (unsigned)l, phase))
                return 1;
            rc = hoff_access(d->ctx, a->p, 0, d->stream);
            if (rc)
                return fail_call("hoff_access (read)", rc);
            bad = check(a->p, d->spec[j].bytes, a->seed);
            if (bad != (size_t)-1) {
                if (!d->bad.found) {
                    const unsigned char *b = a->p;
                    d->bad.found = 1;
                    d->bad.step = step;
                    d->bad.layer = l;
                    d->bad.name = d->spec[j].name;
                    d->bad.offset = bad;
                    d->bad.expected = pat_byte(a->seed, bad);
                    d->bad.got = b[bad];
                    d->bad.residency = hoff_residency(d->ctx, a->p);
                }
            } else {
                d->verified_blocks++;
                d->verified_bytes += d->spec[j].bytes;
            }
            /* Manual mode, at the layer's first op: bring the next layer
             * back while this one computes, as far as the budget has room
             * without evicting this layer, then the layers after it while
             * there is room... (plan mode leaves it to the replayed
             * schedule) */
            if (d->mode == MODE_MANUAL && j == d->nspec - 1) {
                if (l > 0)
                    prefetch_layer(d, (unsigned)l - 1, r, 1);
                for (int k = l - 2; k >= 0 && (d->lookahead == 0 || l - k <= (int)d->lookahead); k--) {
                    uint64_t need = away_bytes(d, (unsigned)k);
                    struct hoff_stats st;

                    if (need == 0)
                        continue;
                    if (d->budget == 0 || hoff_stats_get(d->ctx, &st) != 0 ||
                        st.resident_bytes + need > d->budget)
                        break; /* no room: it would only evict what is needed sooner */
                    prefetch_layer(d, (unsigned)k, r, 1);
                }
            }
            compute(d, op_ns(d, d->bwd_ns, j), &r->compute_ns);
            rc = hoff_free(d->ctx, a->p, d->stream);
            if (rc)
                return fail_call("hoff_free", rc);
            a->p = NULL;
        }
        /* ...and what did not fit before now that this layer is gone. */
        if (d->mode == MODE_MANUAL && l > 0)
            prefetch_layer(d, (unsigned)l - 1, r, 0);
    }
    return 0;
}

static const char *res_name(int r) {
    switch (r) {
    case HOFF_RES_DEVICE: return "device";
    case HOFF_RES_EVICTING: return "evicting";
    case HOFF_RES_HOST: return "host";
    case HOFF_RES_PREFETCHING: return "prefetching";
    case HOFF_RES_DISCARDED: return "discarded";
    case HOFF_RES_SPILLING: return "spilling";
    case HOFF_RES_NVME: return "nvme";
    case HOFF_RES_RESTORING: return "restoring";
    default: return "?";
    }
}

static const char *mode_name(int m) {
    return m == MODE_MANUAL ? "manual" : "plan";
}

/* MB/s (the stats' unit) as GB/s. */
static double gbps(uint64_t mbps) {
    return (double)mbps / 1000.0;
}

static void print_plan(const struct demo *d, const struct hoff_stats *st, const char *planner) {
    printf("plan: %s, %" PRIu64 " actions, ", planner, st->plan_actions);
    if (st->plan_feasible)
        printf("feasible (peak %s, working-set floor %s)", SZ(st->plan_peak_bytes), SZ(st->plan_floor_bytes));
    else if (d->budget && d->budget < st->plan_floor_bytes)
        printf("NOT feasible (the budget %s is below the working-set floor %s: the bytes one op uses; "
               "planned for the floor)", SZ(d->budget), SZ(st->plan_floor_bytes));
    else
        printf("NOT feasible (lowest peak %s, over the budget %s)", SZ(st->plan_peak_bytes),
               SZ(d->budget));
    printf(", planned in %s, bandwidths %g GB/s H2D and %g GB/s D2H\n", TM(st->plan_ns),
           gbps(st->h2d_mbps), gbps(st->d2h_mbps));
}

static void print_json(struct demo *d, const struct hoff_stats *st, int within_budget,
                       int params_ok, const char *planner) {
    char *stats_json = NULL;
    int n = hoff_stats_json(d->ctx, NULL, 0);

    if (n > 0 && (stats_json = malloc((size_t)n + 1)) != NULL &&
        hoff_stats_json(d->ctx, stats_json, (size_t)n + 1) < 0) {
        free(stats_json);
        stats_json = NULL;
    }
    printf("{\"backend\":\"%s\",\"mode\":\"%s\",\"layers\":%u,\"hidden\":%u,\"seq\":%u,"
           "\"batch\":%u,\"steps\":%u,\"lookahead\":%u,\"tflops\":%g,",
           hoff_backend_name(d->ctx), mode_name(d->mode), d->layers, d->hidden, d->seq, d->batch,
           d->steps, d->lookahead, d->tflops);
    printf("\"param_bytes\":%" PRIu64 ",\"activation_bytes_per_step\":%" PRIu64
           ",\"activation_peak_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64 ",",
           d->param_bytes, d->act_bytes_layer * d->layers, d->act_peak, d->budget);
    if (d->budget_pct >= 0)
        printf("\"budget_percent\":%.4g,", d->budget_pct);
    printf("\"compute_modelled\":%s,\"step_reports\":[", d->compute_modelled ? "true" : "false");
    for (unsigned s = 0; s < d->steps; s++) {
        const struct step_report *r = &d->rep[s];
        printf("%s{\"step\":%u,\"state\":\"%s\",\"planning\":%s,\"planned\":%s,\"time_ns\":%" PRIu64
               ",\"host_ns\":%" PRIu64 ",\"plan_wait_ns\":%" PRIu64
               ",\"compute_ns\":%" PRIu64
               ",\"stall_ns\":%" PRIu64 ",\"bytes_evicted\":%" PRIu64
               ",\"bytes_prefetched\":%" PRIu64 ",\"faults\":%" PRIu64
               ",\"bytes_faulted\":%" PRIu64 ",\"late_prefetches\":%" PRIu64
               ",\"prefetches_issued\":%" PRIu64 ",\"prefetches_already_resident\":%" PRIu64
               ",\"prefetches_no_space\":%" PRIu64 ",\"actions_fired\":%" PRIu64
               ",\"actions_skipped\":%" PRIu64 ",\"step_peak_resident_bytes\":%" PRIu64 "}",
               s ? "," : "", s, hoff_plan_state_name((int)r->state), r->planning ? "true" : "false",
               r->planned ? "true" : "false", r->time_ns, r->host_ns, r->plan_wait_ns,
               r->compute_ns, r->stall_ns, r->evicted, r->prefetched, r->faults, r->bytes_faulted,
               r->late, r->prefetch_issued, r->prefetch_resident, r->prefetch_nospace, r->fired,
               r->skipped, r->peak_resident);
    }
    printf("],\"peak_resident_bytes\":%" PRIu64 ",\"within_budget\":%s,"
           "\"bytes_evicted\":%" PRIu64 ",\"bytes_prefetched\":%" PRIu64
           ",\"faults\":%" PRIu64 ",\"bytes_faulted\":%" PRIu64 ",\"stall_ns\":%" PRIu64
           ",\"late_prefetches\":%" PRIu64 ",\"params_on_device\":%s,",
           st->peak_resident_bytes, within_budget ? "true" : "false", st->bytes_evicted,
           st->bytes_prefetched, st->faults, st->bytes_faulted, st->stall_ns,
           st->late_prefetches, params_ok ? "true" : "false");
    printf("\"plan\":{\"planner\":\"%s\",\"plans\":%" PRIu64 ",\"actions\":%" PRIu64
           ",\"feasible\":%s,\"peak_bytes\":%" PRIu64 ",\"floor_bytes\":%" PRIu64 ",\"plan_ns\":%" PRIu64
           ",\"h2d_mbps\":%" PRIu64 ",\"d2h_mbps\":%" PRIu64 ",\"thread\":%s,\"lag_steps\":%" PRIu64
           ",\"lag_ns\":%" PRIu64 ",\"wait_ns\":%" PRIu64 ",\"pending\":%s},",
           planner, st->plans, st->plan_actions, st->plan_feasible ? "true" : "false",
           st->plan_peak_bytes, st->plan_floor_bytes, st->plan_ns, st->h2d_mbps, st->d2h_mbps,
           d->plan_thread ? "true" : "false", st->plan_lag_steps, st->plan_lag_ns, st->plan_wait_ns,
           st->plan_pending ? "true" : "false");
    printf("\"divergent_steps\":%" PRIu64 ",\"replans\":%" PRIu64 ",\"actions_fired\":%" PRIu64
           ",\"actions_skipped\":%" PRIu64 ",",
           st->divergent_steps, st->replans, st->actions_fired, st->actions_skipped);
    printf("\"integrity\":{\"ok\":%s,\"blocks\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"first_bad\":",
           d->bad.found ? "false" : "true", d->verified_blocks, d->verified_bytes);
    if (d->bad.found)
        printf("{\"step\":%d,\"layer\":%d,\"block\":\"%s\",\"offset\":%zu,\"expected\":%u,"
               "\"got\":%u,\"residency\":\"%s\"}}",
               d->bad.step, d->bad.layer, d->bad.name, d->bad.offset, d->bad.expected,
               d->bad.got, res_name(d->bad.residency));
    else
        printf("null}");
    printf(",\"stats\":%s}\n", stats_json ? stats_json : "null");
    free(stats_json);
}

static void print_step(struct demo *d, unsigned s) {
    const struct step_report *r = &d->rep[s];

    printf("step %u (%s%s): %s", s, hoff_plan_state_name((int)r->state), r->planning ? ", planning" : "",
           TM(r->time_ns));
    if (d->compute_modelled)
        printf(" (compute %s, stall %s)", TM(r->compute_ns), TM(r->stall_ns));
    else
        printf(" (stall %s)", TM(r->stall_ns));
    printf(", evicted %s, prefetched %s, faults %" PRIu64, SZ(r->evicted), SZ(r->prefetched),
           r->faults);
    if (r->faults)
        printf(" (%s)", SZ(r->bytes_faulted));
    printf(", late prefetches %" PRIu64 ", actions fired %" PRIu64 " skipped %" PRIu64
           ", peak resident %s\n",
           r->late, r->fired, r->skipped, SZ(r->peak_resident));
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
