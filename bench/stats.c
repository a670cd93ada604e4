/* stats.c — benchmark: what publishing the statistics for hoff-stat costs per allocator event.  Two sim contexts in
 * one run, publishing on (the default) and off (HOFF_STATS=0), take turns doing the same malloc+free pairs; the medians
 * give the overhead.  Also the cost of one full write of the segment, and of writing on every event (no rate limit).
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "benchargs.h"
#include "core/context.h"
#include "core/publish.h"
#include "hoff.h"

#define WINDOW 32 /* live blocks: each pair allocates one and frees the oldest */

/* Device-pool sizes of a transformer step's small temporaries (the fastest
 * allocator path there is, so the overhead shows the most). */
static const size_t sizes[] = {512, 2048, 8192, 65536, 131072, 262144, 786432, 512, 8192, 131072, 2048, 65536};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static uint64_t now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One context; a mode per batch: publishing on (the default), off (as with
 * HOFF_STATS=0: ctx->pub NULL), and off again (the control). */
enum mode { ON, OFF, OFF2, NMODES };
static const char *const mode_name[NMODES] = {"on", "off", "off (control)"};

struct bench {
    hoff_ctx *ctx;
    struct hoff__publisher *pub;
    void *ring[WINDOW];
    size_t pos;
    int failed;
};

static double batch(struct bench *b, enum mode m, unsigned pairs) {
    uint64_t t0;
    unsigned i;

    pthread_mutex_lock(&b->ctx->lock);
    b->ctx->pub = m == ON ? b->pub : NULL;
    pthread_mutex_unlock(&b->ctx->lock);
    t0 = now_ns();
    for (i = 0; i < pairs; i++) {
        size_t slot = b->pos % WINDOW;

        if (b->ring[slot] && hoff_free(b->ctx, b->ring[slot], NULL) != 0)
            b->failed = 1;
        b->ring[slot] = hoff_malloc_flags(b->ctx, sizes[b->pos % NSIZES], NULL, HOFF_ALLOC_DEVICE);
        if (!b->ring[slot])
            b->failed = 1;
        b->pos++;
    }
    return (double)(now_ns() - t0) / pairs;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)((n - 1) * p + 0.5)];
}

static int open_ctx(hoff_ctx **ctx, int publish) {
    struct hoff_config cfg;
    int rc;

    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_SIM;
    cfg.sim_device_bytes = 1ull << 30;
    cfg.log_level = HOFF_LOG_WARN;
    cfg.stats_publish = publish;
    rc = hoff_init(ctx, &cfg);
    if (rc)
        fprintf(stderr, "bench/stats: hoff_init: %s\n", hoff_last_error());
    return rc;
}

static void usage(FILE *f, const struct bench_args *ba) {
    fprintf(f, "usage: bench/stats [--json] [--quick] [--batches N] [--pairs N]\n"
               "Overhead of publishing the statistics (HOFF_STATS=1, the default) per allocator\n"
               "event, against publishing off, in the same run and on the same context: median\n"
               "ns per malloc+free pair of each over batches that take turns, and the median of\n"
               "the rounds' ratios (target: < 1.02).\n");
}

int main(int argc, char **argv) {
    unsigned batches = 400, pairs = 2000, warm = 20;
    struct bench b;
    double *ns[NMODES], *ratio_on, *ratio_ctl, med[NMODES], p90[NMODES], ratio, ratio_med, ratio_ctl_med, ratio_every,
        write_ns;
    int json = 0, i, k, m, rc;
    uint64_t t0, writes_before, writes;
    struct hoff__pub_reader rd;
    char name[64], err[256];
    struct bench_args ba = {"bench/stats", usage, argc, argv, 0};

    for (ba.i = 1; ba.i < argc; ba.i++) {
        if (bench_args_is(&ba, "--json")) {
            json = 1;
        } else if (bench_args_is(&ba, "--quick")) {
            batches = 60;
            pairs = 1000;
            warm = 5;
        } else if (bench_args_is(&ba, "--batches")) {
            batches = (unsigned)bench_args_uint(&ba, "--batches", bench_args_value(&ba), 3, UINT_MAX);
        } else if (bench_args_is(&ba, "--pairs")) {
            pairs = (unsigned)bench_args_uint(&ba, "--pairs", bench_args_value(&ba), 10, UINT_MAX);
        } else if (bench_args_is(&ba, "-h") || bench_args_is(&ba, "--help")) {
            bench_args_help(&ba);
        } else {
            bench_args_unknown(&ba, argv[ba.i]);
        }
    }
    memset(&b, 0, sizeof b);
    if (open_ctx(&b.ctx, 1))
        return 1;
    b.pub = b.ctx->pub;
    if (!b.pub) {
        fprintf(stderr, "bench/stats: the context could not publish (see the log above)\n");
        return 1;
    }
    for (m = 0; m < NMODES; m++)
        ns[m] = calloc(batches, sizeof(double));
    ratio_on = calloc(batches, sizeof(double));
    ratio_ctl = calloc(batches, sizeof(double));
    if (!ns[ON] || !ns[OFF] || !ns[OFF2] || !ratio_on || !ratio_ctl)
        return 1;
    for (k = 0; k < (int)warm; k++)
        for (m = 0; m < NMODES; m++)
            batch(&b, (enum mode)m, pairs);
    /* Take turns in a rotating order, so drift and noise fall on every mode;
     * a second "off" is the control: its ratio to "off" is the noise. */
    writes_before = b.pub->seg->h.updates;
    writes = 0;
    for (k = 0; k < (int)batches; k++) {
        for (m = 0; m < NMODES; m++) {
            enum mode mm = (enum mode)((m + k) % NMODES);
            uint64_t w0 = b.pub->seg->h.updates;

            ns[mm][k] = batch(&b, mm, pairs);
            if (mm == ON)
                writes += b.pub->seg->h.updates - w0;
        }
        ratio_on[k] = ns[ON][k] / ns[OFF][k];
        ratio_ctl[k] = ns[OFF2][k] / ns[OFF][k];
    }
    (void)writes_before;
    batch(&b, ON, 1); /* leave it publishing */
    /* One full write: snapshot under the lock and the sequence-locked copy. */
    pthread_mutex_lock(&b.ctx->lock);
    t0 = now_ns();
    for (k = 0; k < 100000; k++)
        hoff__publish_now(b.ctx);
    write_ns = (double)(now_ns() - t0) / 100000.0;
    pthread_mutex_unlock(&b.ctx->lock);
    /* The segment is readable and says what the context says. */
    hoff__pub_name(name, sizeof name, (unsigned)getuid(), hoff__pub_self_ns(), (int)getpid(), 0);
    rc = hoff__pub_open(NULL, name, &rd, err, sizeof err);
    if (rc == 0) {
        struct hoff_stats x, y;

        hoff_stats_get(b.ctx, &x);
        rc = hoff__pub_read(&rd, &y, NULL, NULL, 1000);
        if (rc == 0 && memcmp(&x, &y, sizeof x) != 0)
            rc = -EPROTO;
        hoff__pub_close(&rd);
    } else {
        fprintf(stderr, "bench/stats: %s: %s\n", name, err);
    }
    for (i = 0; i < WINDOW; i++)
        if (b.ring[i])
            hoff_free(b.ctx, b.ring[i], NULL);
    for (m = 0; m < NMODES; m++) {
        med[m] = pct(ns[m], (int)batches, 0.5);
        p90[m] = pct(ns[m], (int)batches, 0.9);
    }
    ratio = med[ON] / med[OFF];
    ratio_med = pct(ratio_on, (int)batches, 0.5);
    ratio_ctl_med = pct(ratio_ctl, (int)batches, 0.5);
    /* What writing on every event (no rate limit) would cost. */
    ratio_every = (med[OFF] + 2.0 * write_ns) / med[OFF];
    if (json) {
        printf("{\"benchmark\":\"stats\",\"batches\":%u,\"pairs_per_batch\":%u,\"events_per_pair\":2,"
               "\"publish_on_pair_ns_median\":%.2f,\"publish_on_pair_ns_p90\":%.2f,"
               "\"publish_off_pair_ns_median\":%.2f,\"publish_off_pair_ns_p90\":%.2f,"
               "\"ratio\":%.4f,\"ratio_paired_median\":%.4f,\"overhead_ns_per_event\":%.2f,"
               "\"control_ratio_paired_median\":%.4f,"
               "\"writes_during_on_batches\":%" PRIu64 ",\"write_ns\":%.1f,\"rate_limit_ns\":%llu,"
               "\"clock_read_every_events\":%u,"
               "\"every_event_ratio_estimate\":%.3f,"
               "\"segment_matches_stats\":%s,\"target\":{\"ratio_max\":1.02,\"met\":%s}}\n",
               batches, pairs, med[ON], p90[ON], med[OFF], p90[OFF], ratio, ratio_med, (med[ON] - med[OFF]) / 2.0,
               ratio_ctl_med, writes, write_ns, (unsigned long long)HOFF__PUB_INTERVAL_NS, HOFF__PUB_TICK_MASK + 1,
               ratio_every, rc == 0 ? "true" : "false", ratio_med < 1.02 ? "true" : "false");
    } else {
        printf("bench/stats: %u rounds of %u malloc+free pairs per mode (one sim context, device pool),\n"
               "modes taking turns in a rotating order\n",
               batches, pairs);
        printf("                                       median ns/pair     p90\n");
        for (m = 0; m < NMODES; m++)
            printf("  publishing %-26s %10.2f  %8.2f\n", mode_name[m], med[m], p90[m]);
        printf("  overhead of publishing: ratio on/off %.4f (of the medians), %.4f (median of the rounds'\n"
               "  ratios), %+.2f ns per event; target < 1.02: %s\n",
               ratio, ratio_med, (med[ON] - med[OFF]) / 2.0, ratio_med < 1.02 ? "met" : "NOT met");
        printf("  noise: control/off %.4f (median of the rounds' ratios)\n", ratio_ctl_med);
        printf("  segment writes in the 'on' rounds: %" PRIu64 " (at most one per %.1f ms, the clock read every %u "
               "events)\n",
               writes, (double)HOFF__PUB_INTERVAL_NS / 1e6, HOFF__PUB_TICK_MASK + 1);
        printf("  one write (snapshot + sequence-locked copy): %.1f ns\n", write_ns);
        printf("  writing on every event instead would cost: ratio %.2f\n", ratio_every);
        printf("  segment matches hoff_stats_get: %s\n", rc == 0 ? "yes" : "NO");
    }
    hoff_shutdown(b.ctx);
    for (m = 0; m < NMODES; m++)
        free(ns[m]);
    free(ratio_on);
    free(ratio_ctl);
    return b.failed || rc ? 1 : 0;
}
