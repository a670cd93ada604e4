/* test_cuda.c — the cuda backend's GPU suite: the backend table itself (backend.h), then the public API on
 * HOFF_BACKEND_CUDA; plain C, one line per check, exit 77 without a GPU.  Writes $OUT/test_cuda.json if OUT is
 * set (tests/gpu/run.sh merges it into gpu.json as "suite").
 * Threading: the main thread, plus one helper thread that plays the issuing thread for one eviction. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "hoff.h"
#define PLAINCHECK_NUMBERED
#include "../plaincheck.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define BLK (256 * MiB)       /* the block the checks move */
#define BENCH (1 * GiB)       /* the block the bandwidth is measured on */
#define MAX_MANAGED (4 * GiB) /* never map more than this, nor more than half the free memory */
#define TOL (24 * MiB)        /* slack on cudaMemGetInfo deltas */
#define GATE_MAX_NS (5ull * 1000000000ull)
#define WATCHDOG_S 270

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    va_list ap;

    printf("#          ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static uint64_t now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_alarm(int sig) {
    static const char msg[] = "FAIL: watchdog: the suite ran longer than its limit\n";

    (void)sig;
    if (write(STDOUT_FILENO, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(1);
}

/* ---- results for gpu.json ---------------------------------------------------- */

static struct {
    char device[256];
    uint64_t total_bytes;
    int host_numa;
    uint64_t bench_bytes;
    double evict_gbps, prefetch_gbps;         /* cudaEvent-timed transfer */
    double evict_issue_us, prefetch_issue_us; /* host time in the op call */
    int issue_blocked;                        /* an op call waited for its "after" */
    int64_t alloc_drop, evict_rise, prefetch_drop, discard_rise, populate_drop;
    int64_t api_evict_rise;
} R = {.host_numa = -2,
       .evict_gbps = NAN,
       .prefetch_gbps = NAN,
       .evict_issue_us = NAN,
       .prefetch_issue_us = NAN,
       .issue_blocked = -1,
       .alloc_drop = INT64_MIN,
       .evict_rise = INT64_MIN,
       .prefetch_drop = INT64_MIN,
       .discard_rise = INT64_MIN,
       .populate_drop = INT64_MIN,
       .api_evict_rise = INT64_MIN};

static void json_num(FILE *f, const char *k, double v, int last) {
    if (isnan(v))
        fprintf(f, "  \"%s\": null%s\n", k, last ? "" : ",");
    else
        fprintf(f, "  \"%s\": %.3f%s\n", k, v, last ? "" : ",");
}

static void json_int(FILE *f, const char *k, int64_t v) {
    if (v == INT64_MIN)
        fprintf(f, "  \"%s\": null,\n", k);
    else
        fprintf(f, "  \"%s\": %lld,\n", k, (long long)v);
}

/* finished: 0 after part (a) (a kill during (b) leaves these), 1 at the end. */
static void write_json(int finished) {
    const char *out = getenv("OUT");
    char path[4096], tmp[4200];
    FILE *f;

    if (!out || !*out)
        return;
    snprintf(path, sizeof path, "%s/test_cuda.json", out);
    snprintf(tmp, sizeof tmp, "%s.tmp", path); /* written whole, then renamed: a kill leaves the last one */
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "test_cuda: cannot write %s\n", tmp);
        return;
    }
    fprintf(f, "{\n  \"suite\": \"test_cuda\",\n  \"device\": \"%s\",\n", R.device);
    fprintf(f, "  \"device_total_bytes\": %llu,\n", (unsigned long long)R.total_bytes);
    if (R.host_numa == -2)
        fprintf(f, "  \"host_numa_node\": null,\n");
    else
        fprintf(f, "  \"host_numa_node\": %d,\n", R.host_numa);
    fprintf(f, "  \"bench_bytes\": %llu,\n", (unsigned long long)R.bench_bytes);
    json_num(f, "evict_gbps", R.evict_gbps, 0);
    json_num(f, "prefetch_gbps", R.prefetch_gbps, 0);
    json_num(f, "evict_issue_us", R.evict_issue_us, 0);
    json_num(f, "prefetch_issue_us", R.prefetch_issue_us, 0);
    if (R.issue_blocked < 0)
        fprintf(f, "  \"issue_blocked_on_after\": null,\n");
    else
        fprintf(f, "  \"issue_blocked_on_after\": %s,\n", R.issue_blocked ? "true" : "false");
    json_int(f, "free_drop_after_managed_alloc", R.alloc_drop);
    json_int(f, "free_rise_after_evict", R.evict_rise);
    json_int(f, "free_drop_after_prefetch", R.prefetch_drop);
    json_int(f, "free_rise_after_discard", R.discard_rise);
    json_int(f, "free_drop_after_populate", R.populate_drop);
    json_int(f, "free_rise_after_hoff_evict", R.api_evict_rise);
    fprintf(f, "  \"block_bytes\": %llu,\n", (unsigned long long)BLK);
    fprintf(f, "  \"finished\": %s,\n", finished ? "true" : "false");
    fprintf(f, "  \"passed\": %d,\n  \"failed\": %d\n}\n", n_pass, n_fail);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "test_cuda: cannot write %s\n", path);
        return;
    }
    if (finished)
        printf("# results in %s\n", path);
}

/* ---- helpers --------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Words [first, first + n) of the pattern with this seed. */
static void pattern(uint64_t *w, size_t n, uint64_t seed, uint64_t first) {
    for (size_t i = 0; i < n; i++)
        w[i] = mix(seed * 0x100000001B3ull + first + i);
}

static uint64_t *hbuf, *hcmp; /* BLK bytes each */

static int64_t dev_free(void) {
    size_t f = 0, t = 0;

    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (int64_t)f;
}

static int near(int64_t delta, int64_t want) {
    return delta >= want - (int64_t)TOL && delta <= want + (int64_t)TOL;
}

static double mib(int64_t v) {
    return (double)v / (double)MiB;
}

typedef int (*copy_fn)(void *arg, void *dst, const void *src, size_t n);

static int be_copy(void *arg, void *dst, const void *src, size_t n) {
    struct hoff__backend *be = arg;

    return be->ops->memcpy(be, dst, src, n);
}

static int rt_copy(void *arg, void *dst, const void *src, size_t n) {
    (void)arg;
    if (cudaMemcpy(dst, src, n, cudaMemcpyDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    return 0;
}

static int fill(copy_fn cp, void *arg, void *p, size_t size, uint64_t seed) {
    for (size_t off = 0; off < size; off += BLK) {
        size_t n = size - off < BLK ? size - off : BLK;
        int rc;

        pattern(hbuf, n / 8, seed, off / 8);
        rc = cp(arg, (char *)p + off, hbuf, n);
        if (rc)
            return rc;
    }
    return 0;
}

/* 0 when every byte matches; else the first bad offset + 1, or -errno. */
static int64_t verify(copy_fn cp, void *arg, const void *p, size_t size, uint64_t seed) {
    for (size_t off = 0; off < size; off += BLK) {
        size_t n = size - off < BLK ? size - off : BLK;
        int rc = cp(arg, hcmp, (const char *)p + off, n);

        if (rc)
            return rc;
        pattern(hbuf, n / 8, seed, off / 8);
        if (memcmp(hbuf, hcmp, n) != 0) {
            for (size_t i = 0; i < n / 8; i++)
                if (hbuf[i] != hcmp[i])
                    return (int64_t)(off + i * 8) + 1;
        }
    }
    return 0;
}

static const char *loc_type_name(int t) {
    switch (t) {
    case cudaMemLocationTypeDevice: return "device";
    case cudaMemLocationTypeHost: return "host";
    case cudaMemLocationTypeHostNuma: return "host NUMA";
    case cudaMemLocationTypeHostNumaCurrent: return "host NUMA current";
    case cudaMemLocationTypeInvalid: return "invalid";
    default: return "other";
    }
}

/* Last prefetch location type of (p, n), or -1. */
static int last_prefetch_type(void *p, size_t n) {
    enum cudaMemLocationType t = cudaMemLocationTypeInvalid;

    if (cudaMemRangeGetAttribute(&t, sizeof t, cudaMemRangeAttributeLastPrefetchLocationType, p, n) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (int)t;
}

static int is_host_type(int t) {
    return t == cudaMemLocationTypeHost || t == cudaMemLocationTypeHostNuma || t == cudaMemLocationTypeHostNumaCurrent;
}

/* A gate: a host function that holds a stream until opened (or GATE_MAX_NS). */
struct gate {
    int open;
    int timed_out;
};

static void CUDART_CB gate_fn(void *arg) {
    struct gate *g = arg;
    uint64_t t0 = now_ns();
    struct timespec nap = {0, 50000};

    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE)) {
        if (now_ns() - t0 > GATE_MAX_NS) {
            __atomic_store_n(&g->timed_out, 1, __ATOMIC_RELEASE);
            break;
        }
        nanosleep(&nap, NULL);
    }
}

static hoff__event *as_ev(cudaEvent_t e) {
    return (hoff__event *)(void *)e;
}

/* ---- the issuing thread, played by a helper thread ------------------------------- */

struct issue {
    struct hoff__backend *be;
    void *p;
    size_t size;
    hoff__event *done;
    int rc;
};

static void *issue_evict(void *arg) {
    struct issue *is = arg;

    /* A thread of hoff's own, like the issuing thread: it binds itself to
     * the backend's device once, never having called cudaSetDevice. */
    is->rc = is->be->ops->bind_thread ? is->be->ops->bind_thread(is->be) : 0;
    if (is->rc == 0)
        is->rc = is->be->ops->evict(is->be, is->p, is->size, NULL, is->done);
    return NULL;
}

/* ---- (a) the backend table ------------------------------------------------------- */

typedef int (*xfer_fn)(struct hoff__backend *, void *, size_t, hoff__event *, hoff__event *);

/* Move (p, size) with op, after a gate on a user stream; measure the op call
 * and the transfer (cudaEvents).  Returns the op's rc; *gbps, *issue_us. */
static int timed_transfer(struct hoff__backend *be, xfer_fn op, const char *what, void *p, size_t size, cudaStream_t us,
                          double *gbps, double *issue_us) {
    struct gate g = {0, 0};
    cudaEvent_t t0 = NULL, t1 = NULL;
    uint64_t c0, c1;
    float ms = 0;
    int rc, q;

    *gbps = NAN;
    *issue_us = NAN;
    if (cudaEventCreate(&t0) != cudaSuccess || cudaEventCreate(&t1) != cudaSuccess) {
        (void)cudaGetLastError();
        check(0, "%s: cudaEventCreate (timing)", what);
        return -EIO;
    }
    if (cudaLaunchHostFunc(us, gate_fn, &g) != cudaSuccess || cudaEventRecord(t0, us) != cudaSuccess) {
        (void)cudaGetLastError();
        check(0, "%s: gate on a user stream", what);
        __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
        cudaStreamSynchronize(us);
        cudaEventDestroy(t0);
        cudaEventDestroy(t1);
        return -EIO;
    }
    c0 = now_ns();
    rc = op(be, p, size, as_ev(t0), as_ev(t1));
    c1 = now_ns();
    *issue_us = (double)(c1 - c0) / 1e3;
    q = be->ops->event_query(be, as_ev(t1));
    if (__atomic_load_n(&g.timed_out, __ATOMIC_ACQUIRE)) {
        R.issue_blocked = 1;
        note("%s: the op call blocked until its \"after\" event (%.0f ms)", what, *issue_us / 1e3);
    } else {
        if (R.issue_blocked < 0)
            R.issue_blocked = 0;
        check(q == -EAGAIN, "%s: \"done\" waits for \"after\" (event_query = %d while the gate holds)", what, q);
    }
    __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
    check(rc == 0, "%s of %zu MiB: rc %d (%s)", what, size / MiB, rc, rc ? hoff_last_error() : "");
    q = be->ops->event_sync(be, as_ev(t1));
    check(q == 0, "%s: event_sync(done) = %d", what, q);
    cudaStreamSynchronize(us);
    if (rc == 0 && q == 0 && cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess && ms > 0) {
        *gbps = (double)size / ((double)ms / 1e3) / 1e9;
        note("%s: %.1f GB/s (%.2f ms on the copy stream), op call %.1f us", what, *gbps, (double)ms, *issue_us);
    } else {
        (void)cudaGetLastError();
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return rc;
}

static void test_backend(int device, size_t cap) {
    struct hoff_config cfg;
    struct hoff__backend *be = NULL;
    hoff__event *ev = NULL, *done = NULL;
    cudaStream_t us = NULL;
    uint64_t bf = 0, bt = 0, stall = 1;
    size_t rf = 0, rt = 0;
    int64_t f0, f1, bad;
    void *a = NULL, *w = NULL, *d = NULL, *big = NULL;
    int rc, t;

    printf("# (a) the backend table\n");
    memset(&cfg, 0, sizeof cfg);
    cfg.version = HOFF_CONFIG_VERSION;
    cfg.size = sizeof cfg;
    cfg.backend = HOFF_BACKEND_CUDA;
    cfg.device = device;
    rc = hoff__backend_open_cuda(&cfg, &be);
    if (!check(rc == 0 && be, "hoff__backend_open_cuda(device %d): rc %d %s", device, rc, rc ? hoff_last_error() : ""))
        return;
    check(strcmp(be->ops->name, "cuda") == 0, "backend name is \"%s\"", be->ops->name);

    {
        struct hoff_config bad_cfg = cfg;
        struct hoff__backend *nb = NULL;
        int n = 0;

        cudaGetDeviceCount(&n);
        bad_cfg.device = n;
        rc = hoff__backend_open_cuda(&bad_cfg, &nb);
        check(rc == -ENODEV && !nb, "open with device %d (does not exist): -ENODEV (%d): %s", n, rc, hoff_last_error());
    }

    rc = be->ops->mem_info(be, &bf, &bt);
    cudaMemGetInfo(&rf, &rt);
    check(rc == 0 && bt == rt && bt > 0, "mem_info: total %llu MiB (cudaMemGetInfo %zu MiB)",
          (unsigned long long)(bt / MiB), rt / MiB);
    check(bf > 0 && bf <= bt && (int64_t)bf - (int64_t)rf < (int64_t)(256 * MiB) &&
              (int64_t)rf - (int64_t)bf < (int64_t)(256 * MiB),
          "mem_info: free %llu MiB (cudaMemGetInfo %zu MiB)", (unsigned long long)(bf / MiB), rf / MiB);

    if (cudaStreamCreateWithFlags(&us, cudaStreamNonBlocking) != cudaSuccess) {
        (void)cudaGetLastError();
        check(0, "cudaStreamCreateWithFlags (user stream)");
        goto out;
    }

    /* Warm up: the first managed mapping may set up the driver's own state. */
    rc = be->ops->managed_alloc(be, HOFF__MANAGED_GRAIN, &w);
    check(rc == 0 && w, "managed_alloc(2 MiB) warm-up: rc %d %s", rc, rc ? hoff_last_error() : "");
    if (w)
        check(be->ops->managed_free(be, w, HOFF__MANAGED_GRAIN) == 0, "managed_free(2 MiB)");
    rc = be->ops->managed_alloc(be, 3 * MiB, &w);
    check(rc == -EINVAL, "managed_alloc(3 MiB), not a multiple of 2 MiB: -EINVAL (%d)", rc);

    /* A block: allocated resident on the device. */
    f0 = dev_free();
    rc = be->ops->managed_alloc(be, BLK, &a);
    f1 = dev_free();
    if (!check(rc == 0 && a, "managed_alloc(%zu MiB): rc %d %s", BLK / MiB, rc, rc ? hoff_last_error() : ""))
        goto out;
    check(((uintptr_t)a % HOFF__MANAGED_GRAIN) == 0, "managed mapping %p is 2 MiB aligned", a);
    R.alloc_drop = f0 - f1;
    check(near(f0 - f1, BLK), "device free memory dropped by %.1f MiB after managed_alloc (want %zu +- %zu)",
          mib(f0 - f1), BLK / MiB, TOL / MiB);
    t = last_prefetch_type(a, BLK);
    check(t == cudaMemLocationTypeDevice, "new mapping: last prefetch location is %s", loc_type_name(t));
    rc = fill(be_copy, be, a, BLK, 1);
    check(rc == 0, "memcpy op: fill %zu MiB with a pattern (rc %d)", BLK / MiB, rc);
    bad = verify(be_copy, be, a, BLK, 1);
    check(bad == 0, "memcpy op: read back every byte (%lld)", (long long)bad);

    /* Events. */
    rc = be->ops->event_create(be, &ev);
    check(rc == 0 && ev, "event_create: rc %d", rc);
    rc = be->ops->event_create(be, &done);
    check(rc == 0 && done, "event_create: rc %d", rc);
    if (!ev || !done)
        goto out;
    check(be->ops->event_query(be, ev) == 0, "event_query of an event never recorded: 0");
    check(be->ops->event_record(be, ev, NULL) == 0, "event_record on the legacy default stream");
    check(be->ops->stream_wait(be, us, ev) == 0, "stream_wait(user stream, event)");
    check(be->ops->event_sync(be, ev) == 0, "event_sync");
    check(be->ops->event_query(be, ev) == 0, "event_query after event_sync: 0");
    {
        struct gate g = {0, 0};
        int q;

        if (cudaLaunchHostFunc(us, gate_fn, &g) == cudaSuccess) {
            be->ops->event_record(be, ev, us);
            q = be->ops->event_query(be, ev);
            check(q == -EAGAIN, "event_query of a pending event: -EAGAIN (%d)", q);
            __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
            check(be->ops->event_sync(be, ev) == 0, "event_sync of the released event");
        } else {
            (void)cudaGetLastError();
            check(0, "cudaLaunchHostFunc (gate)");
        }
    }

    /* Evict from another thread (the issuing thread's job). */
    {
        struct issue is = {be, a, BLK, done, -1};
        pthread_t th;

        f0 = dev_free();
        if (pthread_create(&th, NULL, issue_evict, &is) == 0) {
            pthread_join(th, NULL);
            check(is.rc == 0, "evict(%zu MiB) from a thread bound by bind_thread that never set a device: rc %d %s",
                  BLK / MiB, is.rc, is.rc ? hoff_last_error() : "");
            check(be->ops->event_sync(be, done) == 0, "evict: event_sync(done)");
            f1 = dev_free();
            R.evict_rise = f1 - f0;
            check(near(f1 - f0, BLK), "device free memory rose by %.1f MiB after evict (want %zu +- %zu)", mib(f1 - f0),
                  BLK / MiB, TOL / MiB);
            t = last_prefetch_type(a, BLK);
            check(is_host_type(t), "evicted: last prefetch location is %s", loc_type_name(t));
        } else {
            check(0, "pthread_create");
        }
    }

    /* Prefetch back, ordered after an event on a user stream. */
    f0 = dev_free();
    check(be->ops->event_record(be, ev, us) == 0, "event_record on a user stream");
    rc = be->ops->prefetch(be, a, BLK, ev, done);
    check(rc == 0, "prefetch(%zu MiB, after = that event): rc %d %s", BLK / MiB, rc, rc ? hoff_last_error() : "");
    check(be->ops->event_sync(be, done) == 0, "prefetch: event_sync(done)");
    f1 = dev_free();
    R.prefetch_drop = f0 - f1;
    check(near(f0 - f1, BLK), "device free memory dropped by %.1f MiB after prefetch (want %zu +- %zu)", mib(f0 - f1),
          BLK / MiB, TOL / MiB);
    t = last_prefetch_type(a, BLK);
    check(t == cudaMemLocationTypeDevice, "prefetched: last prefetch location is %s", loc_type_name(t));
    bad = verify(be_copy, be, a, BLK, 1);
    check(bad == 0, "every byte survived evict + prefetch (%lld)", (long long)bad);

    /* Evict and prefetch with no events at all.  They run on different copy
     * streams (D2H, H2D), so nothing orders the prefetch after the evict: were
     * both issued before one sync, the block would end wherever the later one
     * ran, and the readings below (and the discard's) would mean nothing.  A
     * sync after each orders them; each reading is then that move's. */
    f0 = dev_free();
    rc = be->ops->evict(be, a, BLK, NULL, NULL);
    check(rc == 0, "evict with after = done = NULL: rc %d", rc);
    check(be->ops->sync(be) == 0, "sync after the evict");
    f1 = dev_free();
    check(near(f1 - f0, BLK), "device free memory rose by %.1f MiB after the evict with no events", mib(f1 - f0));
    t = last_prefetch_type(a, BLK);
    check(is_host_type(t), "evicted with no events: last prefetch location is %s", loc_type_name(t));
    f0 = f1;
    rc = be->ops->prefetch(be, a, BLK, NULL, NULL);
    check(rc == 0, "prefetch with after = done = NULL: rc %d", rc);
    check(be->ops->sync(be) == 0, "sync after the prefetch");
    f1 = dev_free();
    check(near(f0 - f1, BLK), "device free memory dropped by %.1f MiB after the prefetch with no events", mib(f0 - f1));
    t = last_prefetch_type(a, BLK);
    check(t == cudaMemLocationTypeDevice,
          "prefetched with no events: last prefetch location is %s "
          "(the discard below starts from a resident block)",
          loc_type_name(t));
    bad = verify(be_copy, be, a, BLK, 1);
    check(bad == 0, "every byte survived a round trip with no events (%lld)", (long long)bad);

    /* Fault: bookkeeping only.  It still prefetches the block on the stream
     * it is given (here the legacy default stream), and the discard below
     * runs on the D2H copy stream, which is non-blocking: nothing orders the
     * two.  A prefetch concurrent with a discard of any part of the range is
     * undefined behaviour (cudaMemDiscardBatchAsync), so the discard's
     * "after" is an event recorded on the fault's stream after the fault:
     * the copy stream waits for the prefetch, as hoff's own fence would. */
    rc = be->ops->fault(be, a, BLK, NULL, &stall);
    check(rc == 0 && stall == 0, "fault: rc %d, stall %llu ns", rc, (unsigned long long)stall);
    check(be->ops->event_record(be, ev, NULL) == 0,
          "event_record on the fault's stream, after the fault (the discard's \"after\")");

    /* Discard, populate, reuse. */
    f0 = dev_free();
    rc = be->ops->discard(be, a, BLK, ev, done);
    check(rc == 0, "discard(%zu MiB): rc %d %s", BLK / MiB, rc, rc ? hoff_last_error() : "");
    check(be->ops->event_sync(be, done) == 0, "discard: event_sync(done)");
    f1 = dev_free();
    R.discard_rise = f1 - f0;
    note("device free memory changed by %+.1f MiB after discard (informational)", mib(f1 - f0));
    f0 = f1;
    rc = be->ops->populate(be, a, BLK, NULL);
    check(rc == 0, "populate: rc %d %s", rc, rc ? hoff_last_error() : "");
    check(be->ops->sync(be) == 0, "sync after populate");
    f1 = dev_free();
    R.populate_drop = f0 - f1;
    note("device free memory changed by %+.1f MiB after populate (informational)", mib(f0 - f1));
    rc = fill(be_copy, be, a, BLK, 2);
    bad = verify(be_copy, be, a, BLK, 2);
    check(rc == 0 && bad == 0, "a discarded, repopulated block holds new data (%d, %lld)", rc, (long long)bad);

    /* managed_free. */
    check(be->ops->managed_free(be, a, BLK / 2) == -EINVAL, "managed_free with the wrong size: -EINVAL");
    check(be->ops->managed_free(be, (char *)a + HOFF__MANAGED_GRAIN, BLK) == -EINVAL,
          "managed_free of an address that is no mapping: -EINVAL");
    f0 = dev_free();
    rc = be->ops->managed_free(be, a, BLK);
    f1 = dev_free();
    check(rc == 0, "managed_free(%zu MiB): rc %d", BLK / MiB, rc);
    check(near(f1 - f0, BLK), "device free memory rose by %.1f MiB after managed_free", mib(f1 - f0));
    a = NULL;

    /* Plain device memory. */
    f0 = dev_free();
    rc = be->ops->dev_alloc(be, BLK, &d);
    f1 = dev_free();
    if (check(rc == 0 && d, "dev_alloc(%zu MiB): rc %d %s", BLK / MiB, rc, rc ? hoff_last_error() : "")) {
        check(near(f0 - f1, BLK), "device free memory dropped by %.1f MiB after dev_alloc", mib(f0 - f1));
        rc = fill(be_copy, be, d, 64 * MiB, 3);
        bad = verify(be_copy, be, d, 64 * MiB, 3);
        check(rc == 0 && bad == 0, "memcpy op on device memory (%d, %lld)", rc, (long long)bad);
        f0 = dev_free();
        rc = be->ops->dev_free(be, d, BLK);
        f1 = dev_free();
        check(rc == 0, "dev_free: rc %d", rc);
        check(near(f1 - f0, BLK), "device free memory rose by %.1f MiB after dev_free", mib(f1 - f0));
    }
    {
        void *huge = NULL;

        rc = be->ops->dev_alloc(be, (size_t)bt * 2, &huge);
        check(rc == -ENOMEM && !huge, "dev_alloc of twice the device: -ENOMEM (%d): %s", rc, hoff_last_error());
        check(cudaGetLastError() == cudaSuccess, "the failed call left no CUDA error behind");
    }

    /* The rest of the table. */
    {
        uint64_t c0 = be->ops->clock_ns(be), c1 = be->ops->clock_ns(be);

        check(c0 > 0 && c1 >= c0, "clock_ns is monotonic");
    }
    check(be->ops->compute(be, NULL, 1000) == -ENOTSUP, "compute: -ENOTSUP");

    /* Bandwidth of a 1 GiB block (or what fits). */
    {
        size_t n = BENCH <= cap ? BENCH : cap / HOFF__MANAGED_GRAIN * HOFF__MANAGED_GRAIN;
        double issue = 0;

        if (n < BLK) {
            note("bandwidth: skipped (only %zu MiB may be mapped)", cap / MiB);
            goto events;
        }
        R.bench_bytes = n;
        rc = be->ops->managed_alloc(be, n, &big);
        if (!check(rc == 0 && big, "managed_alloc(%zu MiB) for bandwidth: rc %d %s", n / MiB, rc,
                   rc ? hoff_last_error() : ""))
            goto events;
        rc = fill(be_copy, be, big, n, 4);
        check(rc == 0, "fill %zu MiB (rc %d)", n / MiB, rc);
        check(be->ops->sync(be) == 0, "sync");
        timed_transfer(be, be->ops->evict, "evict", big, n, us, &R.evict_gbps, &issue);
        R.evict_issue_us = issue;
        timed_transfer(be, be->ops->prefetch, "prefetch", big, n, us, &R.prefetch_gbps, &issue);
        R.prefetch_issue_us = issue;
        bad = verify(be_copy, be, big, n, 4);
        check(bad == 0, "every byte of %zu MiB survived the timed round trip (%lld)", n / MiB, (long long)bad);
        check(be->ops->managed_free(be, big, n) == 0, "managed_free(%zu MiB)", n / MiB);
        big = NULL;
    }
events:
    be->ops->event_destroy(be, ev);
    be->ops->event_destroy(be, done);
    ev = done = NULL;

out:
    if (a)
        be->ops->managed_free(be, a, BLK);
    if (big)
        be->ops->managed_free(be, big, R.bench_bytes);
    if (ev)
        be->ops->event_destroy(be, ev);
    if (done)
        be->ops->event_destroy(be, done);
    if (us)
        cudaStreamDestroy(us);
    be->ops->close(be);
    printf("# backend closed\n");
}

/* ---- (b) the public API ------------------------------------------------------------ */

static void test_api(int device) {
    struct hoff_config cfg;
    struct hoff_stats st;
    hoff_ctx *ctx = NULL;
    void *p, *q;
    int64_t f0, f1, bad;
    int rc, r;

    printf("# (b) the public API on HOFF_BACKEND_CUDA\n");
    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_CUDA;
    cfg.device = device;
    rc = hoff_init(&ctx, &cfg);
    if (!check(rc == 0 && ctx, "hoff_init(backend = cuda): rc %d %s", rc, rc ? hoff_last_error() : ""))
        return;
    check(strcmp(hoff_backend_name(ctx), "cuda") == 0, "hoff_backend_name: %s", hoff_backend_name(ctx));

    p = hoff_malloc_flags(ctx, BLK, NULL, HOFF_ALLOC_MANAGED);
    if (!check(p != NULL, "hoff_malloc_flags(%zu MiB, MANAGED): %p %s", BLK / MiB, p, p ? "" : hoff_last_error()))
        goto out;
    check(hoff_block_size(ctx, p) >= BLK, "hoff_block_size >= %zu MiB", BLK / MiB);
    r = hoff_residency(ctx, p);
    check(r == HOFF_RES_DEVICE, "a new managed block is on the device (%d)", r);
    check(fill(rt_copy, NULL, p, BLK, 5) == 0, "fill it (cudaMemcpy)");
    cudaDeviceSynchronize();

    f0 = dev_free();
    rc = hoff_evict(ctx, p, NULL);
    check(rc == 0, "hoff_evict: rc %d %s", rc, rc ? hoff_last_error() : "");
    rc = hoff_sync(ctx);
    check(rc == 0, "hoff_sync: rc %d", rc);
    f1 = dev_free();
    R.api_evict_rise = f1 - f0;
    r = hoff_residency(ctx, p);
    check(r == HOFF_RES_HOST, "after hoff_evict + hoff_sync the block is on the host (%d)", r);
    check(near(f1 - f0, BLK), "device free memory rose by %.1f MiB after hoff_evict", mib(f1 - f0));
    check(is_host_type(last_prefetch_type(p, BLK)), "the driver's last prefetch location is the host");
    rc = hoff_evict(ctx, p, NULL);
    check(rc == -EALREADY, "hoff_evict of a block on the host: -EALREADY (%d)", rc);

    rc = hoff_prefetch(ctx, p, NULL);
    check(rc == 0, "hoff_prefetch: rc %d %s", rc, rc ? hoff_last_error() : "");
    check(hoff_sync(ctx) == 0, "hoff_sync");
    r = hoff_residency(ctx, p);
    check(r == HOFF_RES_DEVICE, "after hoff_prefetch + hoff_sync the block is on the device (%d)", r);
    check(last_prefetch_type(p, BLK) == cudaMemLocationTypeDevice, "the driver's last prefetch location is the device");
    bad = verify(rt_copy, NULL, p, BLK, 5);
    check(bad == 0, "every byte survived hoff_evict + hoff_prefetch (%lld)", (long long)bad);
    rc = hoff_prefetch(ctx, p, NULL);
    check(rc == -EALREADY, "hoff_prefetch of a resident block: -EALREADY (%d)", rc);

    q = hoff_malloc_flags(ctx, 4 * MiB, NULL, HOFF_ALLOC_DEVICE);
    if (check(q != NULL, "hoff_malloc_flags(4 MiB, DEVICE): %p", q)) {
        rc = hoff_evict(ctx, q, NULL);
        check(rc == -EPERM, "hoff_evict of a device-pool block: -EPERM (%d)", rc);
        check(hoff_free(ctx, q, NULL) == 0, "hoff_free(device block)");
    }

    memset(&st, 0, sizeof st);
    st.version = HOFF_STATS_VERSION;
    st.size = sizeof st;
    rc = hoff_stats_get(ctx, &st);
    check(rc == 0, "hoff_stats_get: rc %d", rc);
    check(st.evictions >= 1 && st.bytes_evicted >= BLK, "stats: %llu evictions, %llu bytes evicted",
          (unsigned long long)st.evictions, (unsigned long long)st.bytes_evicted);
    check(st.prefetches >= 1 && st.bytes_prefetched >= BLK, "stats: %llu prefetches, %llu bytes prefetched",
          (unsigned long long)st.prefetches, (unsigned long long)st.bytes_prefetched);
    check(st.transfer_errors == 0, "stats: %llu transfer errors", (unsigned long long)st.transfer_errors);
    check(st.live_blocks >= 1, "stats: %llu live blocks", (unsigned long long)st.live_blocks);

    check(hoff_free(ctx, p, NULL) == 0, "hoff_free(managed block)");
    check(hoff_free(ctx, p, NULL) == -EINVAL, "hoff_free twice: -EINVAL");
out:
    rc = hoff_shutdown(ctx);
    check(rc == 0, "hoff_shutdown: rc %d %s", rc, rc ? hoff_last_error() : "");
}

/* ---- main ------------------------------------------------------------------------------ */

int main(void) {
    struct cudaDeviceProp prop;
    const char *env = getenv("HOFF_DEVICE");
    int n = 0, device = env ? atoi(env) : 0, numa = -1;
    size_t f = 0, t = 0, cap;
    cudaError_t e;

    setvbuf(stdout, NULL, _IOLBF, 0);
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        printf("# skip: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "ok", n);
        return 77;
    }
    if (device < 0 || device >= n) {
        printf("# skip: HOFF_DEVICE=%d but there %s %d device%s\n", device, n == 1 ? "is" : "are", n,
               n == 1 ? "" : "s");
        return 77;
    }
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
        printf("FAIL: cannot use device %d: %s\n", device, cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    memset(&prop, 0, sizeof prop);
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
        snprintf(R.device, sizeof R.device, "%s", prop.name);
    if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, device) == cudaSuccess)
        R.host_numa = numa;
    (void)cudaGetLastError();
    R.total_bytes = t;
    printf("# device %d: %s, %zu MiB free of %zu MiB, host NUMA node %d\n", device, R.device, f / MiB, t / MiB, numa);

    cap = f / 2 < MAX_MANAGED ? f / 2 : MAX_MANAGED;
    if (cap < 2 * BLK) {
        printf("# skip: only %zu MiB free; the suite maps up to %zu MiB and never more than half\n", f / MiB,
               (size_t)(BENCH + BLK) / MiB);
        return 77;
    }
    hbuf = malloc(BLK);
    hcmp = malloc(BLK);
    if (!hbuf || !hcmp) {
        printf("FAIL: out of host memory\n");
        return 1;
    }
    test_backend(device, cap);
    write_json(0);
    test_api(device);

    printf("%d passed, %d failed\n", n_pass, n_fail);
    write_json(1);
    free(hbuf);
    free(hcmp);
    return n_fail ? 1 : 0;
}
