/* cuda.c — the cuda backend: CUDA managed memory moved between the device and a host NUMA node by
 * cudaMemPrefetchAsync on two copy streams (D2H, H2D), ordered against the caller's streams with events.
 * This file: open (probing the device), close, the function table, and what every call uses: error
 * conversion and making the device current.  The policy, and the files that implement it: cuda_be.h.
 * Threading: every op may be called from any thread.  hoff's own threads bind themselves to the device once
 * (bind_thread) and never switch; on any other thread an op makes the backend's device current for the
 * call and restores the caller's.  The mapping table is under a mutex, the flags and counters are atomics,
 * the rest is fixed at open. */
#include "config.h"

#ifdef HAVE_CUDA

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend/cuda_be.h"
#include "core/core.h"

/* ---- errors --------------------------------------------------------------- */

int hoff__cuda_fail(cudaError_t e, const char *fmt, ...) {
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)cudaGetLastError(); /* ours: do not leave it to the framework */
    return hoff__error(e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO, "cuda: %s: %s (%s)", what,
                       cudaGetErrorString(e), cudaGetErrorName(e));
}

/* ---- the current device ----------------------------------------------------- */

/* The device this thread was bound to by bind_thread (-1: none): such a
 * thread (hoff's issuing or tier thread) never switches. */
static __thread int bound_device = -1;

/* Make the backend's device current on this thread; *saved gets the device
 * to restore (-1: nothing to restore). */
int hoff__cuda_dev_enter(struct cuda_be *b, int *saved) {
    int cur = -1;
    cudaError_t e;

    *saved = -1;
    if (bound_device == b->device)
        return 0;
    e = cudaGetDevice(&cur);

    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cur = -1;
    }
    if (cur == b->device)
        return 0;
    e = cudaSetDevice(b->device);
    if (e != cudaSuccess)
        return hoff__cuda_fail(e, "cudaSetDevice(%d)", b->device);
    *saved = cur;
    return 0;
}

void hoff__cuda_dev_leave(struct cuda_be *b, int saved) {
    if (saved >= 0 && saved != b->device && cudaSetDevice(saved) != cudaSuccess)
        (void)cudaGetLastError();
}

/* hoff's own threads: the device, once, for the thread's life. */
static int cuda_bind_thread(struct hoff__backend *be) {
    struct cuda_be *b = cbe(be);
    cudaError_t e;

    if (bound_device == b->device)
        return 0;
    e = cudaSetDevice(b->device);
    if (e != cudaSuccess)
        return hoff__cuda_fail(e, "cudaSetDevice(%d) on a thread of hoff's own", b->device);
    bound_device = b->device;
    return 0;
}

static int cuda_counters(struct hoff__backend *be, struct hoff__be_counters *out) {
    struct cuda_be *b = cbe(be);

    out->numa_refusals = __atomic_load_n(&b->cnt.numa_refusals, __ATOMIC_RELAXED);
    out->discard_fallbacks = __atomic_load_n(&b->cnt.discard_fallbacks, __ATOMIC_RELAXED);
    out->drop_refusals = __atomic_load_n(&b->cnt.drop_refusals, __ATOMIC_RELAXED);
    return 0;
}

static int cuda_pci_bus_id(struct hoff__backend *be, char *buf, size_t len) {
    struct cuda_be *b = cbe(be);
    cudaError_t e = cudaDeviceGetPCIBusId(buf, (int)len, b->device);

    return e == cudaSuccess ? 0 : hoff__cuda_fail(e, "cudaDeviceGetPCIBusId(%d)", b->device);
}

static void destroy_stream(cudaStream_t s) {
    if (s && cudaStreamDestroy(s) != cudaSuccess)
        (void)cudaGetLastError();
}

static void cuda_close(struct hoff__backend *be) {
    struct cuda_be *b = cbe(be);
    size_t i, n = 0;
    uint64_t bytes = 0;
    int saved = -1;

    if (!b)
        return;
    if (hoff__cuda_dev_enter(b, &saved) == 0) {
        cudaError_t e = cudaDeviceSynchronize();

        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            hoff__log(HOFF_LOG_WARN, "cuda: cudaDeviceSynchronize at close: %s", cudaGetErrorString(e));
        }
    }
    destroy_stream(b->d2h);
    destroy_stream(b->h2d);
    destroy_stream(b->pop);
    destroy_stream(b->drop);
    for (i = 0; i < MAP_BUCKETS; i++) {
        while (b->maps[i]) {
            struct cuda_map *m = b->maps[i];

            b->maps[i] = m->next;
            hoff__cuda_managed_release(m->base);
            n++;
            bytes += m->size;
            free(m);
        }
    }
    if (n) {
        char sz[32];

        hoff__log(HOFF_LOG_WARN, "cuda: %zu managed mapping%s (%s) still mapped at close; released", n,
                  n == 1 ? "" : "s", hoff__fmt_size(bytes, sz, sizeof sz));
    }
    hoff__cuda_dev_leave(b, saved);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static const struct hoff__backend_ops cuda_ops = {
    .name = "cuda",
    .close = cuda_close,
    .mem_info = hoff__cuda_mem_info,
    .dev_alloc = hoff__cuda_dev_alloc,
    .dev_free = hoff__cuda_dev_free,
    .managed_alloc = hoff__cuda_managed_alloc,
    .managed_free = hoff__cuda_managed_free,
    .event_create = hoff__cuda_event_create,
    .event_create_timed = hoff__cuda_event_create_timed,
    .event_elapsed_ns = hoff__cuda_event_elapsed_ns,
    .event_destroy = hoff__cuda_event_destroy,
    .event_record = hoff__cuda_event_record,
    .event_query = hoff__cuda_event_query,
    .event_sync = hoff__cuda_event_sync,
    .stream_wait = hoff__cuda_stream_wait,
    .transfer_wait = hoff__cuda_transfer_wait,
    .bind_thread = cuda_bind_thread,
    .counters = cuda_counters,
    .evict = hoff__cuda_evict,
    .evict_node = hoff__cuda_evict_node,
    .pci_bus_id = cuda_pci_bus_id,
    .host_bytes = hoff__cuda_host_bytes,
    .host_drop = hoff__cuda_host_drop,
    .host_make = hoff__cuda_host_make,
    .prefetch = hoff__cuda_prefetch,
    .discard = hoff__cuda_discard,
    .fault = hoff__cuda_fault,
    .populate = hoff__cuda_populate,
    .memcpy = hoff__cuda_memcpy,
    .sync = hoff__cuda_sync,
    .stream_capturing = hoff__cuda_stream_capturing,
    .clock_ns = hoff__cuda_clock_ns,
    .compute = hoff__cuda_compute,
};

/* ---- open ----------------------------------------------------------------------------- */

static int attr(int *v, enum cudaDeviceAttr a, int dev) {
    cudaError_t e = cudaDeviceGetAttribute(v, a, dev);

    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *v = 0;
        return -1;
    }
    return 0;
}

static int make_stream(cudaStream_t *s, int prio, const char *what) {
    cudaError_t e = cudaStreamCreateWithPriority(s, cudaStreamNonBlocking, prio);

    if (e != cudaSuccess) {
        *s = NULL;
        return hoff__cuda_fail(e, "cudaStreamCreateWithPriority(%s)", what);
    }
    return 0;
}

int hoff__cuda_current_device(void) {
    int n = 0, dev = -1;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0 || cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return -ENODEV;
    }
    return dev;
}

/* Open, first phase: the device ordinal to use (cfg's, or -1: the calling thread's), checked against the devices
 * there are; -ENODEV (with the error set) when there is none. */
static int open_pick_device(const struct hoff_config *cfg) {
    int n = 0, dev = cfg ? cfg->device : 0;
    cudaError_t e;

    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return hoff__error(-ENODEV, "cuda: no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    }
    if (n <= 0)
        return hoff__error(-ENODEV, "cuda: no CUDA device (cudaGetDeviceCount: 0 devices)");
    if (dev < 0 && cudaGetDevice(&dev) != cudaSuccess) { /* -1: the calling thread's device */
        (void)cudaGetLastError();
        dev = 0;
    }
    if (dev < 0 || dev >= n)
        return hoff__error(-ENODEV,
                           "cuda: no CUDA device %d (HOFF_DEVICE, or LOCAL_RANK when HOFF_DEVICE is -1): %d device%s, "
                           "ordinals 0..%d",
                           dev, n, n == 1 ? "" : "s", n - 1);
    return dev;
}

/* Open: name the device (b->name) and check it has what hoff needs, managed memory with concurrent access. */
static int open_check_device(struct cuda_be *b, int dev) {
    struct cudaDeviceProp prop;
    int managed = 0, cma = 0;

    memset(&prop, 0, sizeof prop);
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(b->name, sizeof b->name, "device %d", dev);
    } else {
        snprintf(b->name, sizeof b->name, "%s", prop.name);
    }
    attr(&managed, cudaDevAttrManagedMemory, dev);
    attr(&cma, cudaDevAttrConcurrentManagedAccess, dev);
    if (!managed)
        return hoff__error(-ENODEV,
                           "cuda: device %d (%s) cannot allocate managed memory "
                           "(cudaDevAttrManagedMemory = 0); hoff offloads through managed memory",
                           dev, b->name);
    if (!cma)
        return hoff__error(-ENODEV,
                           "cuda: device %d (%s) has no concurrent managed access "
                           "(cudaDevAttrConcurrentManagedAccess = 0: Windows/WSL, a GPU older than "
                           "Pascal, or a virtual GPU without it), so managed memory cannot be "
                           "prefetched; hoff needs it",
                           dev, b->name);
    return 0;
}

/* Open: the four streams (the copies at the greatest priority, the host drop at the least) and the device and
 * host locations that evictions move between. */
static int open_streams(struct cuda_be *b, int dev) {
    int numa = -1, least = 0, greatest = 0, rc;

    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
        (void)cudaGetLastError();
        greatest = 0;
    }
    if ((rc = make_stream(&b->d2h, greatest, "D2H")) || (rc = make_stream(&b->h2d, greatest, "H2D")) ||
        (rc = make_stream(&b->pop, greatest, "populate")) || (rc = make_stream(&b->drop, least, "host drop")))
        return rc;

    b->dev_loc.type = cudaMemLocationTypeDevice;
    b->dev_loc.id = dev;
    if (attr(&numa, cudaDevAttrHostNumaId, dev) == 0 && numa >= 0) {
        b->host_loc.type = cudaMemLocationTypeHostNuma;
        b->host_loc.id = numa;
    } else {
        b->host_loc.type = cudaMemLocationTypeHost;
        b->host_loc.id = 0;
    }
    return 0;
}

int hoff__backend_open_cuda(const struct hoff_config *cfg, struct hoff__backend **out) {
    struct cuda_be *b;
    int dev, saved = -1, rc;
    size_t f = 0, t = 0;
    char sf[32], st[32], lt[48];

    *out = NULL;
    dev = open_pick_device(cfg);
    if (dev < 0)
        return dev;

    b = calloc(1, sizeof *b);
    if (!b)
        return hoff__error(-ENOMEM, "cuda: out of host memory");
    b->be.ops = &cuda_ops;
    b->device = dev;
    b->discard_ok = 1;
    b->drop_ok = 1;
    b->dap_ok = 1;
    if (pthread_mutex_init(&b->lock, NULL)) {
        free(b);
        return hoff__error(-ENOMEM, "cuda: pthread_mutex_init failed");
    }
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc) {
        /* e.g. a device in prohibited compute mode, or one already broken */
        char why[512];

        snprintf(why, sizeof why, "%s", hoff_last_error());
        rc = hoff__error(-ENODEV, "cuda: cannot use device %d: %s", dev, why);
        pthread_mutex_destroy(&b->lock);
        free(b);
        return rc;
    }

    if ((rc = open_check_device(b, dev)) || (rc = open_streams(b, dev)))
        goto fail;

    if (cudaMemGetInfo(&f, &t) != cudaSuccess)
        (void)cudaGetLastError();
    hoff__log(HOFF_LOG_INFO,
              "cuda: device %d (%s): %s free of %s; evictions go to %s; "
              "discard: %s",
              dev, b->name, hoff__fmt_size(f, sf, sizeof sf), hoff__fmt_size(t, st, sizeof st),
              hoff__cuda_loc_text(b->host_loc, lt, sizeof lt),
              HAVE_DECL_CUDAMEMDISCARDBATCHASYNC ? "cudaMemDiscardBatchAsync" : "evict (no discard API)");
    hoff__cuda_dev_leave(b, saved);
    *out = &b->be;
    return 0;

fail:
    destroy_stream(b->d2h);
    destroy_stream(b->h2d);
    destroy_stream(b->pop);
    destroy_stream(b->drop);
    hoff__cuda_dev_leave(b, saved);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return rc == -ENOMEM ? rc : -ENODEV; /* the message says which call failed */
}

#else /* !HAVE_CUDA */

typedef int hoff__cuda_unused; /* an empty translation unit is not ISO C */

#endif
