/* alloc.c — benchmark: steady-state malloc+free pairs of hoff (sim backend, device and managed pools)
 * against glibc malloc/free in the same run, on the size mix of a recorded transformer step.
 * Threading: single-threaded. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchargs.h"
#include "hoff.h"

/* The sizes one step of a small GPT (h = 1024, s = 2048, b = 1, bf16) asks
 * its allocator for, by count: many small temporaries, some large
 * activations.  The run cycles through a fixed shuffle of this list. */
static const struct {
    size_t bytes;
    unsigned count;
    const char *what;
} mix[] = {
    {512, 48, "scalars, loss, grad-norm partials"},
    {2u << 10, 24, "bias and layer-norm weight grads (h, bf16)"},
    {8u << 10, 32, "layer-norm mean/rstd (b*s, fp32)"},
    {64u << 10, 24, "reduction workspaces"},
    {128u << 10, 32, "attention log-sum-exp (b*heads*s, fp32)"},
    {256u << 10, 24, "cuBLAS workspaces"},
    {768u << 10, 16, "embedding-grad chunks"},
    {2u << 20, 16, "dropout masks (b*s*h, u8)"},
    {4u << 20, 24, "hidden states (b*s*h, bf16)"},
    {12u << 20, 8, "qkv (3*b*s*h, bf16)"},
    {16u << 20, 8, "MLP fc1/gelu (4*b*s*h, bf16)"},
};
#define NMIX (sizeof mix / sizeof mix[0])
#define SEQ_LEN 256 /* sum of the counts */
#define WINDOW 32   /* live blocks: each pair allocates one and frees the oldest */

static size_t seq[SEQ_LEN];
static size_t seq_small[SEQ_LEN]; /* the entries below 1 MiB, in the same order */
static size_t nsmall;

static void build_seq(void) {
    size_t n = 0;
    uint64_t x = 0x243F6A8885A308D3ull;

    for (size_t i = 0; i < NMIX; i++)
        for (unsigned c = 0; c < mix[i].count; c++)
            seq[n++] = mix[i].bytes;
    for (size_t i = n - 1; i > 0; i--) { /* fixed Fisher-Yates shuffle */
        size_t j, t;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        j = (size_t)((x * 0x2545F4914F6CDD1Dull) % (i + 1));
        t = seq[i];
        seq[i] = seq[j];
        seq[j] = t;
    }
    for (size_t i = 0; i < SEQ_LEN; i++)
        if (seq[i] < ((size_t)1 << 20))
            seq_small[nsmall++] = seq[i];
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct runner {
    hoff_ctx *ctx; /* NULL: glibc */
    const size_t *sizes;
    size_t nsizes;
    void *ring[WINDOW];
    size_t pos;
    int steps; /* each batch is one training step (hoff_step_begin/end) */
    int failed;
};

/* One batch of pairs; returns ns per pair.  Each pair allocates the next size
 * of the sequence and frees the block allocated WINDOW pairs earlier. */
static double batch(struct runner *r, unsigned pairs) {
    uint64_t t0, t1;
    size_t pos = r->pos;

    t0 = now_ns();
    if (r->ctx) {
        /* A step per batch, as training does: the first is recorded (warmup)
         * and planned, the others are checked against it; the marks are
         * inside the timing. */
        if (r->steps && hoff_step_begin(r->ctx) != 0)
            r->failed = 1;
        for (unsigned i = 0; i < pairs; i++, pos++) {
            void *p = hoff_malloc(r->ctx, r->sizes[pos % r->nsizes], NULL);
            void *old = r->ring[pos % WINDOW];
            r->ring[pos % WINDOW] = p;
            if (!p)
                r->failed = 1;
            if (old)
                hoff_free(r->ctx, old, NULL);
        }
        if (r->steps && hoff_step_end(r->ctx) != 0)
            r->failed = 1;
    } else {
        for (unsigned i = 0; i < pairs; i++, pos++) {
            void *p = malloc(r->sizes[pos % r->nsizes]);
            void *old = r->ring[pos % WINDOW];
            __asm__ volatile("" : : "r"(p) : "memory");
            r->ring[pos % WINDOW] = p;
            if (!p)
                r->failed = 1;
            free(old);
        }
    }
    t1 = now_ns();
    r->pos = pos;
    return (double)(t1 - t0) / pairs;
}

static void drain(struct runner *r) {
    for (size_t i = 0; i < WINDOW; i++) {
        if (r->ring[i]) {
            if (r->ctx)
                hoff_free(r->ctx, r->ring[i], NULL);
            else
                free(r->ring[i]);
        }
        r->ring[i] = NULL;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of n sorted values (nearest rank). */
static double quantile(const double *v, unsigned n, double q) {
    unsigned i = (unsigned)(q * n + 0.999999);
    if (i == 0)
        i = 1;
    if (i > n)
        i = n;
    return v[i - 1];
}

static void usage(FILE *f, const struct bench_args *ba) {
    fprintf(f,
            "usage: bench/alloc [--json] [--quick] [--batches N] [--pairs N]\n"
            "Median ns per malloc+free pair of hoff (sim backend) and glibc on a\n"
            "transformer-step size mix; %u batches of %u pairs by default.\n",
            200u, 1000u);
}

/* Per-batch ns/pair of one measured configuration, sorted at the end. */
struct series {
    const char *name;
    struct runner r;
    double *t;
    double med, p90;
};

static void summarize(struct series *x, unsigned n) {
    qsort(x->t, n, sizeof *x->t, cmp_double);
    x->med = quantile(x->t, n, 0.5);
    x->p90 = quantile(x->t, n, 0.9);
}

/* Warm up, then measure the series in x[] batch by batch, interleaved, so
 * that drift (other load, frequency) hits all of them alike. */
static void measure(struct series *x, int nx, unsigned warmup, unsigned batches, unsigned pairs) {
    for (unsigned i = 0; i < warmup; i++)
        for (int k = 0; k < nx; k++)
            batch(&x[k].r, pairs);
    for (unsigned i = 0; i < batches; i++)
        for (int k = 0; k < nx; k++)
            x[k].t[i] = batch(&x[k].r, pairs);
    for (int k = 0; k < nx; k++) {
        drain(&x[k].r);
        summarize(&x[k], batches);
    }
}

int main(int argc, char **argv) {
    unsigned batches = 200, pairs = 1000, warmup = 20;
    int json = 0, rc, failed = 0;
    struct hoff_config cfg;
    char err[256];
    struct hoff_stats st;
    hoff_ctx *ctx;
    struct bench_args ba = {"bench/alloc", usage, argc, argv, 0};
    /* 0: hoff full mix in a step, 1: glibc full mix, 2: hoff small sizes,
     * 3: glibc small sizes, 4: hoff full mix outside a step (device pool). */
    struct series x[5] = {
        {.name = "hoff"},
        {.name = "glibc"},
        {.name = "hoff_small"},
        {.name = "glibc_small"},
        {.name = "hoff_device_pool"},
    };

    for (ba.i = 1; ba.i < argc; ba.i++) {
        if (bench_args_is(&ba, "--json")) {
            json = 1;
        } else if (bench_args_is(&ba, "--quick")) {
            batches = 10;
            pairs = 200;
            warmup = 2;
        } else if (bench_args_is(&ba, "--batches")) {
            batches = (unsigned)bench_args_uint(&ba, "--batches", bench_args_value(&ba), 1, 100000000);
        } else if (bench_args_is(&ba, "--pairs")) {
            pairs = (unsigned)bench_args_uint(&ba, "--pairs", bench_args_value(&ba), 1, 100000000);
        } else if (bench_args_is(&ba, "-h") || bench_args_is(&ba, "--help")) {
            bench_args_help(&ba);
        } else {
            bench_args_unknown(&ba, argv[ba.i]);
        }
    }
    build_seq();

    hoff_config_init(&cfg);
    err[0] = '\0';
    if ((rc = hoff_config_from_env(&cfg, err, sizeof err)) != 0) {
        fprintf(stderr, "bench/alloc: %s\n", err[0] ? err : hoff_strerror(rc));
        return 2;
    }
    if (hoff_config_set(&cfg, "backend", "sim", err, sizeof err) ||
        hoff_config_set(&cfg, "budget", "0", err, sizeof err)) {
        fprintf(stderr, "bench/alloc: %s\n", err);
        return 2;
    }
    if ((rc = hoff_init(&ctx, &cfg)) != 0) {
        fprintf(stderr, "bench/alloc: hoff_init: %s (%s)\n", hoff_strerror(rc), hoff_last_error());
        return 1;
    }
    for (int k = 0; k < 5; k++) {
        x[k].r.ctx = (k % 2 == 0) ? ctx : NULL;
        x[k].r.sizes = (k == 2 || k == 3) ? seq_small : seq;
        x[k].r.nsizes = (k == 2 || k == 3) ? nsmall : SEQ_LEN;
        x[k].t = calloc(batches, sizeof *x[k].t);
        if (!x[k].t)
            return 1;
    }

    /* In steps: sizes >= managed_min come from the managed pool. */
    x[0].r.steps = x[2].r.steps = 1;
    measure(x, 4, warmup, batches, pairs);
    /* Outside a step: every size from the plain device pool. */
    measure(&x[4], 1, warmup, batches, pairs);
    hoff_stats_get(ctx, &st);
    for (int k = 0; k < 5; k++)
        failed |= x[k].r.failed;
    if (failed) {
        fprintf(stderr, "bench/alloc: an allocation failed (%s)\n", hoff_last_error());
        return 1;
    }

    {
        double ratio = x[1].med > 0 ? x[0].med / x[1].med : 0;
        double ratio_small = x[3].med > 0 ? x[2].med / x[3].med : 0;
        int met = ratio <= 2.0 && x[0].med < 200.0;
        unsigned small = 0, large = 0;

        for (size_t i = 0; i < NMIX; i++) {
            if (mix[i].bytes >= cfg.managed_min_bytes)
                large += mix[i].count;
            else
                small += mix[i].count;
        }
        if (json) {
            printf("{\"bench\":\"alloc\",\"backend\":\"%s\",\"batches\":%u,\"pairs_per_batch\":%u,"
                   "\"pairs\":%llu,\"window\":%u,\"managed_min_bytes\":%" PRIu64 ",",
                   hoff_backend_name(ctx), batches, pairs, (unsigned long long)batches * pairs, WINDOW,
                   cfg.managed_min_bytes);
            printf("\"hoff_pair_ns_median\":%.1f,\"hoff_pair_ns_p90\":%.1f,"
                   "\"glibc_pair_ns_median\":%.1f,\"glibc_pair_ns_p90\":%.1f,\"ratio\":%.3f,",
                   x[0].med, x[0].p90, x[1].med, x[1].p90, ratio);
            printf("\"small_only\":{\"max_bytes\":%zu,\"hoff_pair_ns_median\":%.1f,"
                   "\"hoff_pair_ns_p90\":%.1f,\"glibc_pair_ns_median\":%.1f,"
                   "\"glibc_pair_ns_p90\":%.1f,\"ratio\":%.3f},",
                   (size_t)(1u << 20) - 1, x[2].med, x[2].p90, x[3].med, x[3].p90, ratio_small);
            printf("\"hoff_device_pool_pair_ns_median\":%.1f,\"hoff_device_pool_pair_ns_p90\":%.1f,", x[4].med,
                   x[4].p90);
            printf("\"target\":{\"ratio_max\":2.0,\"median_ns_max\":200,\"met\":%s},", met ? "true" : "false");
            printf("\"cache_hits\":%" PRIu64 ",\"cache_misses\":%" PRIu64 ",", st.cache_hits, st.cache_misses);
            printf("\"size_mix\":[");
            for (size_t i = 0; i < NMIX; i++)
                printf("%s{\"bytes\":%zu,\"count\":%u,\"pool_in_step\":\"%s\"}", i ? "," : "", mix[i].bytes,
                       mix[i].count, mix[i].bytes >= cfg.managed_min_bytes ? "managed" : "device");
            printf("]}\n");
        } else {
            printf("bench/alloc: %u batches x %u malloc+free pairs, %u blocks live, sizes cycled\n"
                   "from a %u-entry transformer-step mix (%u below managed_min = %" PRIu64 " bytes, %u at or above)\n",
                   batches, pairs, WINDOW, SEQ_LEN, small, cfg.managed_min_bytes, large);
            printf("                                        median ns/pair   p90\n");
            printf("  hoff, full mix, in a step (both pools)   %8.1f  %8.1f\n", x[0].med, x[0].p90);
            printf("  glibc, full mix                          %8.1f  %8.1f\n", x[1].med, x[1].p90);
            printf("  hoff, sizes < 1 MiB only                 %8.1f  %8.1f\n", x[2].med, x[2].p90);
            printf("  glibc, sizes < 1 MiB only                %8.1f  %8.1f\n", x[3].med, x[3].p90);
            printf("  hoff, full mix, no step (device pool)    %8.1f  %8.1f\n", x[4].med, x[4].p90);
            printf("  ratio hoff/glibc (median): full mix %.2f, small sizes %.2f\n", ratio, ratio_small);
            printf("  target (full mix: ratio <= 2.0 and median < 200 ns): %s\n", met ? "met" : "NOT met");
            printf("  hoff cache: %" PRIu64 " hits, %" PRIu64 " misses\n", st.cache_hits, st.cache_misses);
        }
    }
    for (int k = 0; k < 5; k++)
        free(x[k].t);
    hoff_shutdown(ctx);
    return 0;
}
