/* probes.c — raw CUDA runtime probes (no hoff) that settle what a CUDA runtime double has to assume about the
 * real runtime and driver: does cudaErrorNotReady stick as the last error, does a discard free device memory at
 * once, does cudaMalloc evict managed pages, does a prefetch block the host, and how fast is a managed prefetch
 * against a pinned cudaMemcpyAsync.  Plain runtime calls only, so it also links against a runtime double.
 * Prints "probe NAME: value" lines; with OUT set, $OUT/probes.json gets the same values (rewritten after each
 * probe, so a kill leaves what ran).  Exit 0 all probes ran, 1 a probe failed or the watchdog fired, 77 no GPU.
 * Env: HOFF_DEVICE (ordinal, default 0), HOFF_PROBE_TIMEOUT (s, default 150).
 * Threading: the main thread; the gate runs on the runtime's host-function thread. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define GRAIN (2 * MiB)
#define GATE_MAX_NS (2ull * 1000000000ull) /* a gate opens by itself after this */
#define REPS 3

/* ---- results ------------------------------------------------------------------------ */

enum kind { K_INT, K_NUM, K_BOOL, K_STR, K_NULL };

struct entry {
    char probe[24];
    char key[48];
    enum kind kind;
    long long i;
    double d;
    char s[96];
};

#define MAX_ENTRIES 160
static struct entry E[MAX_ENTRIES];
static int n_entries;
static const char *current = "start";
static int failures;

static struct entry *add(const char *probe, const char *key, enum kind kind) {
    struct entry *e;

    if (n_entries >= MAX_ENTRIES) {
        fprintf(stderr, "probes: more than %d results; %s.%s dropped\n", MAX_ENTRIES, probe, key);
        return NULL;
    }
    e = &E[n_entries++];
    memset(e, 0, sizeof *e);
    snprintf(e->probe, sizeof e->probe, "%s", probe);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->kind = kind;
    return e;
}

static void put_int(const char *probe, const char *key, long long v) {
    struct entry *e = add(probe, key, K_INT);

    if (e)
        e->i = v;
    printf("probe %s.%s: %lld\n", probe, key, v);
}

static void put_num(const char *probe, const char *key, double v) {
    struct entry *e = add(probe, key, isfinite(v) ? K_NUM : K_NULL);

    if (e)
        e->d = v;
    if (isfinite(v))
        printf("probe %s.%s: %.3f\n", probe, key, v);
    else
        printf("probe %s.%s: null\n", probe, key);
}

static void put_bool(const char *probe, const char *key, int v) {
    struct entry *e = add(probe, key, K_BOOL);

    if (e)
        e->i = v != 0;
    printf("probe %s.%s: %s\n", probe, key, v ? "true" : "false");
}

static void put_str(const char *probe, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put_str(const char *probe, const char *key, const char *fmt, ...) {
    struct entry *e = add(probe, key, K_STR);
    char buf[96];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (e)
        snprintf(e->s, sizeof e->s, "%s", buf);
    printf("probe %s.%s: %s\n", probe, key, buf);
}

/* A probe could not run to its end: the reason goes in as NAME.error. */
static int probe_fail(const char *probe, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int probe_fail(const char *probe, const char *fmt, ...) {
    char buf[96];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put_str(probe, "error", "%s", buf);
    failures++;
    return -1;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* status: "running" (a probe is under way: `current`), "ok", "failed" or "skipped". */
static void write_json(const char *status, const char *reason) {
    const char *out = getenv("OUT");
    char path[4096], tmp[4200];
    const char *open_probe = NULL;
    FILE *f;

    if (!out || !*out)
        return;
    snprintf(path, sizeof path, "%s/probes.json", out);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "probes: cannot write %s: %s\n", tmp, strerror(errno));
        return;
    }
    fprintf(f, "{\n  \"status\": \"%s\",\n  \"reason\": ", status);
    json_string(f, reason ? reason : "");
    fprintf(f, ",\n  \"current\": ");
    json_string(f, current);
    fprintf(f, ",\n  \"failures\": %d,\n  \"results\": {", failures);
    for (int i = 0; i < n_entries; i++) {
        struct entry *e = &E[i];

        if (!open_probe || strcmp(open_probe, e->probe) != 0) {
            if (open_probe)
                fprintf(f, "\n    },");
            fprintf(f, "\n    ");
            json_string(f, e->probe);
            fprintf(f, ": {");
            open_probe = e->probe;
        } else {
            fprintf(f, ",");
        }
        fprintf(f, "\n      ");
        json_string(f, e->key);
        fprintf(f, ": ");
        switch (e->kind) {
        case K_INT: fprintf(f, "%lld", e->i); break;
        case K_NUM: fprintf(f, "%.6g", e->d); break;
        case K_BOOL: fprintf(f, "%s", e->i ? "true" : "false"); break;
        case K_STR: json_string(f, e->s); break;
        case K_NULL: fprintf(f, "null"); break;
        }
    }
    fprintf(f, "%s\n  }\n}\n", open_probe ? "\n    }" : "");
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "probes: cannot write %s: %s\n", path, strerror(errno));
}

static void on_alarm(int sig) {
    static const char msg[] = "probes: watchdog: the probes ran longer than HOFF_PROBE_TIMEOUT\n";

    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
        /* nothing more to do: probes.json says "running" and which probe */
    }
    _exit(1);
}

/* ---- helpers ------------------------------------------------------------------------ */

static uint64_t now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int device;

static long long dev_free(void) {
    size_t f = 0, t = 0;

    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (long long)f;
}

static size_t round_grain(size_t n) {
    return n / GRAIN * GRAIN;
}

static size_t min_sz(size_t a, size_t b) {
    return a < b ? a : b;
}

static struct cudaMemLocation dev_loc(void) {
    struct cudaMemLocation l = {.type = cudaMemLocationTypeDevice, .id = device};
    return l;
}

static struct cudaMemLocation host_loc(void) {
    struct cudaMemLocation l = {.type = cudaMemLocationTypeHost, .id = 0};
    return l;
}

/* A gate: a host function that holds its stream until opened, or opens
 * itself after GATE_MAX_NS (then timed_out says nobody opened it in time). */
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

static void gate_open(struct gate *g) {
    __atomic_store_n(&g->open, 1, __ATOMIC_RELEASE);
}

/* Milliseconds between two events that completed, or NAN. */
static double event_ms(cudaEvent_t a, cudaEvent_t z) {
    float ms = 0;

    if (cudaEventElapsedTime(&ms, a, z) != cudaSuccess) {
        (void)cudaGetLastError();
        return NAN;
    }
    return (double)ms;
}

static double gbps(size_t bytes, double ms) {
    return ms > 0 ? (double)bytes / (ms / 1e3) / 1e9 : NAN;
}

#define TRY(probe, call)                                                   \
    do {                                                                   \
        cudaError_t e_ = (call);                                           \
        if (e_ != cudaSuccess) {                                           \
            (void)cudaGetLastError();                                      \
            rc = probe_fail(probe, "%s: %s", #call, cudaGetErrorName(e_)); \
            goto out;                                                      \
        }                                                                  \
    } while (0)

/* ---- (1) does cudaErrorNotReady stick? ----------------------------------------------- */

static int probe_not_ready(void) {
    const char *P = "not_ready";
    struct gate g = {0, 0};
    cudaStream_t s = NULL;
    cudaEvent_t ev = NULL;
    cudaError_t q, q_event, peek;
    size_t f, t;
    int rc = 0, sticky = 0;

    TRY(P, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    TRY(P, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    (void)cudaGetLastError();
    TRY(P, cudaLaunchHostFunc(s, gate_fn, &g));
    TRY(P, cudaEventRecord(ev, s));

    q = q_event = cudaEventQuery(ev);
    put_str(P, "event_query", "%s", cudaGetErrorName(q));
    peek = cudaPeekAtLastError();
    put_str(P, "peek_after_event_query", "%s", cudaGetErrorName(peek));
    sticky |= q == cudaErrorNotReady && peek == cudaErrorNotReady;
    /* Does a later successful call clear it? */
    (void)cudaMemGetInfo(&f, &t);
    put_str(P, "peek_after_a_successful_call", "%s", cudaGetErrorName(cudaPeekAtLastError()));
    put_str(P, "get_last_error", "%s", cudaGetErrorName(cudaGetLastError()));
    put_str(P, "peek_after_get_last_error", "%s", cudaGetErrorName(cudaPeekAtLastError()));

    q = cudaStreamQuery(s);
    put_str(P, "stream_query", "%s", cudaGetErrorName(q));
    peek = cudaPeekAtLastError();
    put_str(P, "peek_after_stream_query", "%s", cudaGetErrorName(peek));
    sticky |= q == cudaErrorNotReady && peek == cudaErrorNotReady;
    (void)cudaGetLastError();

    gate_open(&g);
    TRY(P, cudaStreamSynchronize(s));
    /* Both queries ran while the gate held the stream (else "sticky" means nothing). */
    put_bool(P, "gate_held", q_event == cudaErrorNotReady && !__atomic_load_n(&g.timed_out, __ATOMIC_ACQUIRE));
    put_str(P, "event_query_after_sync", "%s", cudaGetErrorName(cudaEventQuery(ev)));
    put_bool(P, "sticky", sticky);
out:
    gate_open(&g);
    if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    if (ev)
        cudaEventDestroy(ev);
    (void)cudaGetLastError();
    return rc;
}

/* ---- (2) does a discard free device memory at once? ---------------------------------- */

static int probe_discard(size_t free0) {
    const char *P = "discard";
    cudaStream_t s = NULL;
    void *m = NULL;
    size_t n = round_grain(min_sz(1 * GiB, free0 / 8));
    long long f0, f_call, f_sync, f_later, f_back;
    int rc = 0;

#if CUDART_VERSION >= 13000
    if (n < 64 * MiB)
        return probe_fail(P, "only %zu MiB free; the probe needs 512 MiB", free0 / MiB);
    put_int(P, "bytes", (long long)n);
    TRY(P, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    TRY(P, cudaMallocManaged(&m, n, cudaMemAttachGlobal));
    TRY(P, cudaMemPrefetchAsync(m, n, dev_loc(), 0, s));
    TRY(P, cudaStreamSynchronize(s));
    f0 = dev_free();
    {
        void *ptrs[1] = {m};
        size_t sizes[1] = {n};
        cudaError_t e = cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, s);

        /* A refusal is an answer (the driver has no discard), not a failed probe. */
        put_str(P, "result", "%s", cudaGetErrorName(e));
        put_bool(P, "supported", e == cudaSuccess);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            goto out;
        }
    }
    f_call = dev_free();
    TRY(P, cudaStreamSynchronize(s));
    f_sync = dev_free();
    usleep(200 * 1000);
    f_later = dev_free();
    put_int(P, "freed_at_call", f_call - f0);
    put_int(P, "freed_after_sync", f_sync - f0);
    put_int(P, "freed_200ms_later", f_later - f0);
    put_bool(P, "frees_at_once", f_sync - f0 >= (long long)n / 2);
    /* A prefetch of the discarded range: does it take device memory again? */
    TRY(P, cudaMemPrefetchAsync(m, n, dev_loc(), 0, s));
    TRY(P, cudaStreamSynchronize(s));
    f_back = dev_free();
    put_int(P, "taken_by_prefetch_after", f_later - f_back);
out:
    if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    if (m)
        cudaFree(m);
    (void)cudaGetLastError();
    return rc;
#else
    (void)s;
    (void)m;
    (void)n;
    (void)f0;
    (void)f_call;
    (void)f_sync;
    (void)f_later;
    (void)f_back;
    put_str(P, "skipped", "CUDA %d has no cudaMemDiscardBatchAsync (13.0 has)", CUDART_VERSION);
    return rc;
#endif
}

/* ---- (3) does cudaMalloc evict managed pages? ----------------------------------------- */

static int probe_malloc_evicts(size_t free0) {
    const char *P = "malloc_evicts";
    cudaStream_t s = NULL;
    void *ballast = NULL, *m = NULL, *x = NULL;
    size_t n = round_grain(min_sz(2 * GiB, free0 / 4)), ballast_n;
    long long f_full, f_malloc, f_freed, f_back;
    enum cudaMemLocationType lt = cudaMemLocationTypeInvalid;
    cudaError_t e;
    int rc = 0;

    if (n < 64 * MiB)
        return probe_fail(P, "only %zu MiB free; the probe needs 256 MiB", free0 / MiB);
    /* Plain device memory fills all but 1.5 n; then n of resident managed
     * memory leaves about n / 2 free; then cudaMalloc(n) needs n / 2 more. */
    ballast_n = round_grain(free0 - n - n / 2);
    put_int(P, "managed_bytes", (long long)n);
    put_int(P, "ballast_bytes", (long long)ballast_n);
    TRY(P, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    TRY(P, cudaMalloc(&ballast, ballast_n));
    TRY(P, cudaMallocManaged(&m, n, cudaMemAttachGlobal));
    TRY(P, cudaMemPrefetchAsync(m, n, dev_loc(), 0, s));
    TRY(P, cudaStreamSynchronize(s));
    f_full = dev_free();
    put_int(P, "free_before_malloc", f_full);
    e = cudaMalloc(&x, n);
    f_malloc = dev_free();
    put_str(P, "malloc_result", "%s", cudaGetErrorName(e));
    put_int(P, "free_after_malloc", f_malloc);
    (void)cudaGetLastError();
    put_bool(P, "malloc_succeeds", e == cudaSuccess);
    if (cudaMemRangeGetAttribute(&lt, sizeof lt, cudaMemRangeAttributeLastPrefetchLocationType, m, n) == cudaSuccess)
        put_int(P, "last_prefetch_location_type", (long long)lt);
    else
        (void)cudaGetLastError();
    if (e != cudaSuccess) {
        put_bool(P, "evicts", 0);
        goto out;
    }
    /* Where are the managed pages?  Free the plain block, prefetch the managed
     * range again: what that prefetch takes is what had left the device. */
    TRY(P, cudaFree(x));
    x = NULL;
    f_freed = dev_free();
    TRY(P, cudaMemPrefetchAsync(m, n, dev_loc(), 0, s));
    TRY(P, cudaStreamSynchronize(s));
    f_back = dev_free();
    put_int(P, "managed_bytes_evicted", f_freed - f_back);
    put_bool(P, "evicts", f_freed - f_back >= (long long)(n / 4));
out:
    if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    if (x)
        cudaFree(x);
    if (m)
        cudaFree(m);
    if (ballast)
        cudaFree(ballast);
    (void)cudaGetLastError();
    return rc;
}

/* ---- (4) does a prefetch block the host? --------------------------------------------- */

/* One prefetch of (m, n) to loc on s: gated (behind a host function that
 * holds s) or not.  Host time in the call and device time of the transfer. */
static int one_prefetch(const char *P, const char *dir, int gated, void *m, size_t n, struct cudaMemLocation loc,
                        cudaStream_t s, cudaEvent_t t0, cudaEvent_t t1) {
    struct gate g = {0, 0};
    char key[48];
    uint64_t c0, c1;
    cudaError_t e, q = cudaSuccess;
    int rc = 0, timed_out;

    if (gated)
        TRY(P, cudaLaunchHostFunc(s, gate_fn, &g));
    TRY(P, cudaEventRecord(t0, s));
    c0 = now_ns();
    e = cudaMemPrefetchAsync(m, n, loc, 0, s);
    c1 = now_ns();
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        rc = probe_fail(P, "cudaMemPrefetchAsync(%s): %s", dir, cudaGetErrorName(e));
        goto out;
    }
    TRY(P, cudaEventRecord(t1, s));
    if (gated)
        q = cudaEventQuery(t1);
    (void)cudaGetLastError();
    timed_out = __atomic_load_n(&g.timed_out, __ATOMIC_ACQUIRE);
    gate_open(&g);
    TRY(P, cudaStreamSynchronize(s));
    snprintf(key, sizeof key, "%s_%s_call_us", dir, gated ? "gated" : "free");
    put_num(P, key, (double)(c1 - c0) / 1e3);
    snprintf(key, sizeof key, "%s_%s_device_ms", dir, gated ? "gated" : "free");
    put_num(P, key, event_ms(t0, t1));
    if (gated) {
        /* The gate opened by itself while the call ran: the call waited for
         * the stream's earlier work. */
        snprintf(key, sizeof key, "%s_call_waits_for_stream", dir);
        put_bool(P, key, timed_out);
        snprintf(key, sizeof key, "%s_pending_after_call", dir);
        put_bool(P, key, q == cudaErrorNotReady);
    }
out:
    gate_open(&g);
    return rc;
}

static int probe_prefetch_blocks(size_t free0) {
    const char *P = "prefetch_blocks";
    cudaStream_t s = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    void *m = NULL;
    size_t n = round_grain(min_sz(512 * MiB, free0 / 8));
    int rc = 0;

    if (n < 32 * MiB)
        return probe_fail(P, "only %zu MiB free; the probe needs 256 MiB", free0 / MiB);
    put_int(P, "bytes", (long long)n);
    TRY(P, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    TRY(P, cudaEventCreate(&t0));
    TRY(P, cudaEventCreate(&t1));
    TRY(P, cudaMallocManaged(&m, n, cudaMemAttachGlobal));
    memset(m, 0x5a, n); /* host pages with data */
    TRY(P, cudaMemPrefetchAsync(m, n, dev_loc(), 0, s));
    TRY(P, cudaStreamSynchronize(s));
    if (one_prefetch(P, "d2h", 1, m, n, host_loc(), s, t0, t1) ||
        one_prefetch(P, "h2d", 1, m, n, dev_loc(), s, t0, t1) ||
        one_prefetch(P, "d2h", 0, m, n, host_loc(), s, t0, t1) || one_prefetch(P, "h2d", 0, m, n, dev_loc(), s, t0, t1))
        rc = -1;
out:
    if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    if (m)
        cudaFree(m);
    (void)cudaGetLastError();
    return rc;
}

/* ---- (5) managed prefetch against pinned cudaMemcpyAsync ------------------------------- */

static int probe_bandwidth(size_t free0) {
    const char *P = "bandwidth";
    cudaStream_t s = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    void *m = NULL, *h = NULL, *d = NULL;
    size_t n = round_grain(min_sz(1 * GiB, free0 / 8));
    double best[4] = {0, 0, 0, 0}, ms;
    static const char *const names[4] = {"prefetch_h2d_gbps", "prefetch_d2h_gbps", "pinned_h2d_gbps",
                                         "pinned_d2h_gbps"};
    int rc = 0;

    if (n < 64 * MiB)
        return probe_fail(P, "only %zu MiB free; the probe needs 512 MiB", free0 / MiB);
    put_int(P, "bytes", (long long)n);
    put_int(P, "reps", REPS);
    TRY(P, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    TRY(P, cudaEventCreate(&t0));
    TRY(P, cudaEventCreate(&t1));
    TRY(P, cudaMallocManaged(&m, n, cudaMemAttachGlobal));
    TRY(P, cudaMallocHost(&h, n));
    TRY(P, cudaMalloc(&d, n));
    memset(m, 0x3c, n);
    memset(h, 0x3c, n);
    TRY(P, cudaMemPrefetchAsync(m, n, host_loc(), 0, s));
    TRY(P, cudaStreamSynchronize(s));
    for (int r = 0; r < REPS; r++) {
        for (int k = 0; k < 4; k++) {
            TRY(P, cudaEventRecord(t0, s));
            switch (k) {
            case 0: TRY(P, cudaMemPrefetchAsync(m, n, dev_loc(), 0, s)); break;
            case 1: TRY(P, cudaMemPrefetchAsync(m, n, host_loc(), 0, s)); break;
            case 2: TRY(P, cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s)); break;
            default: TRY(P, cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s)); break;
            }
            TRY(P, cudaEventRecord(t1, s));
            TRY(P, cudaStreamSynchronize(s));
            ms = event_ms(t0, t1);
            if (isfinite(ms) && gbps(n, ms) > best[k])
                best[k] = gbps(n, ms);
        }
    }
    for (int k = 0; k < 4; k++)
        put_num(P, names[k], best[k] > 0 ? best[k] : NAN);
    if (best[2] > 0) {
        put_num(P, "prefetch_over_pinned_h2d", best[0] / best[2]);
        put_num(P, "prefetch_over_pinned_d2h", best[3] > 0 ? best[1] / best[3] : NAN);
    }
out:
    if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    if (m)
        cudaFree(m);
    if (h)
        cudaFreeHost(h);
    if (d)
        cudaFree(d);
    (void)cudaGetLastError();
    return rc;
}

/* ---- main ------------------------------------------------------------------------------- */

int main(void) {
    static const struct {
        const char *name;
        int (*fn)(size_t free0);
    } probes[] = {
        {"discard", probe_discard},
        {"malloc_evicts", probe_malloc_evicts},
        {"prefetch_blocks", probe_prefetch_blocks},
        {"bandwidth", probe_bandwidth},
    };
    struct cudaDeviceProp prop;
    const char *env = getenv("HOFF_DEVICE"), *tenv = getenv("HOFF_PROBE_TIMEOUT");
    char reason[160];
    size_t f = 0, t = 0;
    int n = 0, limit = tenv ? atoi(tenv) : 150;
    cudaError_t e;

    setvbuf(stdout, NULL, _IOLBF, 0);
    device = env ? atoi(env) : 0;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        snprintf(reason, sizeof reason, "no CUDA device (cudaGetDeviceCount: %s, %d devices)",
                 e != cudaSuccess ? cudaGetErrorName(e) : "cudaSuccess", n);
        printf("# skip: %s\n", reason);
        write_json("skipped", reason);
        return 77;
    }
    if (device < 0 || device >= n) {
        snprintf(reason, sizeof reason, "HOFF_DEVICE=%d but there are %d devices (0 to %d)", device, n, n - 1);
        printf("# skip: %s\n", reason);
        write_json("skipped", reason);
        return 77;
    }
    if (limit <= 0) {
        fprintf(stderr, "probes: HOFF_PROBE_TIMEOUT=%s: expected a number of seconds above 0\n", tenv);
        return 2;
    }
    signal(SIGALRM, on_alarm);
    alarm((unsigned)limit);
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaMemGetInfo(&f, &t)) != cudaSuccess) {
        snprintf(reason, sizeof reason, "cannot use device %d: %s", device, cudaGetErrorName(e));
        printf("FAIL: %s\n", reason);
        write_json("failed", reason);
        return 1;
    }
    memset(&prop, 0, sizeof prop);
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
        put_str("device", "name", "%s", prop.name);
    (void)cudaGetLastError();
    put_int("device", "ordinal", device);
    put_int("device", "total_bytes", (long long)t);
    put_int("device", "free_bytes", (long long)f);
    put_int("device", "runtime_version", CUDART_VERSION);

    current = "not_ready";
    write_json("running", "");
    probe_not_ready();
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        long long fr = dev_free();

        current = probes[i].name;
        write_json("running", "");
        if (fr < 0) {
            probe_fail(probes[i].name, "cudaMemGetInfo failed before the probe");
            continue;
        }
        probes[i].fn((size_t)fr);
    }
    current = "done";
    write_json(failures ? "failed" : "ok", failures ? "a probe could not run to its end (see NAME.error)" : "");
    printf("# probes: %d failed\n", failures);
    return failures ? 1 : 0;
}
