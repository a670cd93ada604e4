/* dbl_check.c — the CUDA runtime double's bookkeeping around every call: configuration from the
 * environment, the global lock, per-thread last error and the sticky error, error injection, the
 * hard checks (strict: abort; else count), per-thread current device and primary contexts, error
 * names, and the sorted range set the other files index with.
 * Threading: the last error and current device are per thread (TLS); everything else is under
 * G.lock, which dbl_enter takes and dbl_ret releases. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbl.h"

struct dbl_state G = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

extern const char *const dbl_calls[]; /* cudart.c: every runtime function the double implements */

static __thread cudaError_t tls_last = cudaSuccess;
static __thread int tls_dev = 0;

static const char *const check_names[CHK_N] = {
    [CHK_POINTER] = "pointer",       [CHK_RANGE] = "range", [CHK_RACE] = "race",     [CHK_DEVICE] = "device",
    [CHK_UNRECORDED] = "unrecorded", [CHK_STALE] = "stale", [CHK_HANDLE] = "handle", [CHK_CAPTURE] = "capture",
};

static uint64_t env_u64(const char *name, uint64_t def, uint64_t lo, uint64_t hi) {
    const char *v = getenv(name);
    char *end = NULL;
    unsigned long long x;

    if (!v || !*v)
        return def;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (errno || !end || *end || x < lo || x > hi) {
        fprintf(stderr, "hoffdbl: %s=\"%s\": not an integer in [%llu, %llu]; using %llu\n", name, v,
                (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)def);
        return def;
    }
    return x;
}

/* HOFFDBL_ALLOW="unrecorded:1,pointer:2": failures of a kind that count without aborting. */
static void parse_allow(const char *v) {
    char buf[256], *save = NULL, *tok;

    snprintf(buf, sizeof buf, "%s", v);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        int k, n = colon ? atoi(colon + 1) : 0;

        if (colon)
            *colon = 0;
        for (k = 0; k < CHK_N; k++)
            if (strcmp(tok, check_names[k]) == 0)
                break;
        if (k == CHK_N || n <= 0) {
            fprintf(stderr,
                    "hoffdbl: HOFFDBL_ALLOW entry \"%s\" ignored: want KIND:N with N > 0 "
                    "and KIND one of pointer, range, race, device, unrecorded, stale, handle, capture\n",
                    tok);
            continue;
        }
        G.allow[k] += n;
    }
}

void dbl_init_locked(void) {
    const char *v;

    if (G.ready)
        return;
    G.ndev = (int)env_u64("HOFFDBL_DEVICES", 2, 0, DBL_MAXDEV);
    G.cap = env_u64("HOFFDBL_MEM", (uint64_t)8 << 30, (uint64_t)4 << 20, (uint64_t)1 << 40);
    G.gbps = (double)env_u64("HOFFDBL_GBPS", 50, 1, 100000);
    G.numa_nodes = (int)env_u64("HOFFDBL_NUMA_NODES", 1, 0, 64);
    v = getenv("HOFFDBL_STRICT");
    G.strict = !(v && strcmp(v, "0") == 0);
    v = getenv("HOFFDBL_ALLOW");
    if (v && *v)
        parse_allow(v);
    G.ready = 1;
}

static int is_sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable: return 1;
    default: return 0;
    }
}

cudaError_t dbl_enter(const char *call) {
    size_t i;

    pthread_mutex_lock(&G.lock);
    dbl_init_locked();
    for (i = 0; dbl_calls[i] && i < sizeof G.ncalls / sizeof G.ncalls[0]; i++)
        if (strcmp(dbl_calls[i], call) == 0) {
            G.ncalls[i]++;
            break;
        }
    if (G.sticky != cudaSuccess)
        return G.sticky;
    for (i = 0; i < sizeof G.inj / sizeof G.inj[0]; i++) {
        struct dbl_inject *in = &G.inj[i];

        if (in->times > 0 && strcmp(in->call, call) == 0) {
            in->times--;
            if (is_sticky(in->e))
                G.sticky = in->e;
            return in->e;
        }
    }
    return cudaSuccess;
}

cudaError_t dbl_ret(cudaError_t e) {
    if (e != cudaSuccess)
        tls_last = e;
    pthread_mutex_unlock(&G.lock);
    return e;
}

cudaError_t dbl_last_take(int clear) {
    cudaError_t e;

    pthread_mutex_lock(&G.lock);
    e = tls_last;
    if (e == cudaSuccess)
        e = G.sticky;
    if (clear)
        tls_last = cudaSuccess;
    pthread_mutex_unlock(&G.lock);
    return e;
}

int dbl_hard(enum dbl_check k, const char *call, const void *p, const char *fmt, ...) {
    char why[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    G.st.hard_errors++;
    fprintf(stderr, "hoffdbl: HARD ERROR [%s] in %s(%p): %s\n", check_names[k], call, p, why);
    if (G.allow[k] > 0) {
        G.allow[k]--;
        fprintf(stderr, "hoffdbl: (allowed by HOFFDBL_ALLOW: counted, not fatal)\n");
        return 1;
    }
    if (G.strict) {
        fprintf(stderr, "hoffdbl: aborting (strict; HOFFDBL_STRICT=0 or hoffdbl_set_strict(0) "
                        "only counts)\n");
        fflush(stderr);
        abort();
    }
    return 1;
}

int dbl_cur_dev(void) {
    return tls_dev;
}

void dbl_set_cur_dev(int d) {
    if (d != tls_dev)
        G.st.device_switches[d]++;
    tls_dev = d;
}

void dbl_need_ctx(void) {
    int d = tls_dev;

    if (d < G.ndev)
        G.st.device_calls[d]++;
    if (d < G.ndev && !G.ctx[d]) {
        G.ctx[d] = 1;
        G.st.contexts_created[d]++;
    }
}

/* ---- error names (the runtime's own strings) ------------------------------------------------ */

#define DBL_ERRORS(X)                                                                                                 \
    X(cudaSuccess, "no error")                                                                                        \
    X(cudaErrorInvalidValue, "invalid argument")                                                                      \
    X(cudaErrorMemoryAllocation, "out of memory")                                                                     \
    X(cudaErrorInitializationError, "initialization error")                                                           \
    X(cudaErrorLaunchTimeout, "the launch timed out and was terminated")                                              \
    X(cudaErrorInvalidDevicePointer, "invalid device pointer")                                                        \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                                           \
    X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version")                    \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                                        \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                                               \
    X(cudaErrorECCUncorrectable, "uncorrectable ECC error encountered")                                               \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                                      \
    X(cudaErrorNotReady, "device not ready")                                                                          \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                                            \
    X(cudaErrorHardwareStackError, "an illegal memory access was encountered")                                        \
    X(cudaErrorIllegalInstruction, "an illegal instruction was encountered")                                          \
    X(cudaErrorMisalignedAddress, "misaligned address")                                                               \
    X(cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space")                         \
    X(cudaErrorInvalidPc, "invalid program counter")                                                                  \
    X(cudaErrorAssert, "device-side assert triggered")                                                                \
    X(cudaErrorLaunchFailure, "unspecified launch failure")                                                           \
    X(cudaErrorNotPermitted, "operation not permitted")                                                               \
    X(cudaErrorIllegalState, "the operation cannot be performed in the present state")                                \
    X(cudaErrorNotSupported, "operation not supported")                                                               \
    X(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable")                               \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")                          \
    X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture")                   \
    X(cudaErrorStreamCaptureUnmatched, "capture was not initiated in this stream")                                    \
    X(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream")                     \
    X(cudaErrorStreamCaptureImplicit, "operation would make the legacy stream depend on a capturing blocking stream") \
    X(cudaErrorUnknown, "unknown error")

const char *dbl_err_name(cudaError_t e) {
#define X(c, s) \
    case c: return #c;
    switch (e) {
        DBL_ERRORS(X)
    default: return "unrecognized error code";
    }
#undef X
}

const char *dbl_err_text(cudaError_t e) {
#define X(c, s) \
    case c: return s;
    switch (e) {
        DBL_ERRORS(X)
    default: return "unrecognized error code";
    }
#undef X
}

/* ---- the sorted range set ---------------------------------------------------------------------- */

int dbl_set_add(struct dbl_set *s, uintptr_t lo, uintptr_t len, void *item) {
    size_t i;

    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct dbl_item *v = realloc(s->v, cap * sizeof *v);

        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    for (i = s->n; i > 0 && s->v[i - 1].lo > lo; i--)
        s->v[i] = s->v[i - 1];
    s->v[i].lo = lo;
    s->v[i].len = len ? len : 1;
    s->v[i].item = item;
    s->n++;
    return 0;
}

void *dbl_set_find(const struct dbl_set *s, uintptr_t p, size_t *idx) {
    size_t lo = 0, hi = s->n;

    while (lo < hi) { /* first entry with lo > p */
        size_t mid = (lo + hi) / 2;

        if (s->v[mid].lo <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || p - s->v[lo - 1].lo >= s->v[lo - 1].len)
        return NULL;
    if (idx)
        *idx = lo - 1;
    return s->v[lo - 1].item;
}

void dbl_set_del(struct dbl_set *s, size_t idx) {
    memmove(&s->v[idx], &s->v[idx + 1], (s->n - idx - 1) * sizeof s->v[0]);
    s->n--;
}

/* ---- the harness's controls ---------------------------------------------------------------------- */

uint64_t hoffdbl_calls(const char *call) {
    uint64_t n = 0;
    size_t i;

    pthread_mutex_lock(&G.lock);
    for (i = 0; call && dbl_calls[i] && i < sizeof G.ncalls / sizeof G.ncalls[0]; i++)
        if (strcmp(dbl_calls[i], call) == 0)
            n = G.ncalls[i];
    pthread_mutex_unlock(&G.lock);
    return n;
}

void hoffdbl_set_strict(int strict) {
    pthread_mutex_lock(&G.lock);
    dbl_init_locked();
    G.strict = strict != 0;
    pthread_mutex_unlock(&G.lock);
}

int hoffdbl_fail(const char *call, cudaError_t e, int times) {
    size_t i;
    int known = 0;

    for (i = 0; call && dbl_calls[i]; i++)
        known |= strcmp(dbl_calls[i], call) == 0;
    if (!known || e == cudaSuccess || times <= 0) {
        fprintf(stderr,
                "hoffdbl_fail(\"%s\", %d, %d): want a runtime function the double "
                "implements, an error other than cudaSuccess and times > 0\n",
                call ? call : "(null)", (int)e, times);
        return -EINVAL;
    }
    pthread_mutex_lock(&G.lock);
    dbl_init_locked();
    for (i = 0; i < sizeof G.inj / sizeof G.inj[0]; i++) {
        if (G.inj[i].times <= 0) {
            snprintf(G.inj[i].call, sizeof G.inj[i].call, "%s", call);
            G.inj[i].e = e;
            G.inj[i].times = times;
            pthread_mutex_unlock(&G.lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&G.lock);
    return -ENOSPC;
}

void hoffdbl_stats(struct hoffdbl_stats *out) {
    pthread_mutex_lock(&G.lock);
    *out = G.st;
    pthread_mutex_unlock(&G.lock);
}

void hoffdbl_reset(void) {
    pthread_mutex_lock(&G.lock);
    memset(G.inj, 0, sizeof G.inj);
    memset(&G.st, 0, sizeof G.st);
    memset(G.ncalls, 0, sizeof G.ncalls);
    G.sticky = cudaSuccess;
    tls_last = cudaSuccess;
    pthread_mutex_unlock(&G.lock);
}

/* HOFFDBL_REPORT=FILE: the counters as "name value" lines at exit, for scripts that run an
 * unchanged program (test_cuda) on the double and check what it did to the "driver". */
__attribute__((destructor)) static void dbl_report(void) {
    const char *path = getenv("HOFFDBL_REPORT");
    struct hoffdbl_stats st;
    FILE *f;

    if (!path || !*path)
        return;
    hoffdbl_stats(&st);
    f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "hoffdbl: cannot write HOFFDBL_REPORT=%s\n", path);
        return;
    }
    fprintf(f,
            "hard_errors %llu\ndiscard_races %llu\nmove_races %llu\nfaults %llu\n"
            "fault_bytes %llu\ndriver_evictions %llu\ndriver_evicted_bytes %llu\n"
            "stale_launch_errors %llu\nlazy_reclaims %llu\npoisoned_bytes %llu\n",
            (unsigned long long)st.hard_errors, (unsigned long long)st.discard_races, (unsigned long long)st.move_races,
            (unsigned long long)st.faults, (unsigned long long)st.fault_bytes, (unsigned long long)st.driver_evictions,
            (unsigned long long)st.driver_evicted_bytes, (unsigned long long)st.stale_launch_errors,
            (unsigned long long)st.lazy_reclaims, (unsigned long long)st.poisoned_bytes);
    fprintf(f,
            "access_races %llu\ndevice_races %llu\ncaptured_ops %llu\ncapture_refusals %llu\n"
            "discard_prefetch_races %llu\n",
            (unsigned long long)st.access_races, (unsigned long long)st.device_races,
            (unsigned long long)st.captured_ops, (unsigned long long)st.capture_refusals,
            (unsigned long long)st.discard_prefetch_races);
    for (int d = 0; d < DBL_MAXDEV; d++)
        fprintf(f, "contexts_created_%d %llu\ndevice_switches_%d %llu\ndevice_calls_%d %llu\n", d,
                (unsigned long long)st.contexts_created[d], d, (unsigned long long)st.device_switches[d], d,
                (unsigned long long)st.device_calls[d]);
    fclose(f);
}
