/* cuda.c — the cuda backend: CUDA managed memory moved between the device and a host NUMA node by
 * cudaMemPrefetchAsync on two copy streams (D2H, H2D), ordered against the caller's streams with events.
 * Threading: every op may be called from any thread.  hoff's own threads bind themselves to the device once
 * (bind_thread) and never switch; on any other thread an op makes the backend's device current for the
 * call and restores the caller's.  The mapping table is under a mutex, the flags and counters are atomics,
 * the rest is fixed at open. */
#include "config.h"

#ifdef HAVE_CUDA

/*
 * Policy (reasons: shared/FACTS.md, the cudaMemAdvise/cudaMemPrefetchAsync
 * documentation in cuda_runtime_api.h, and the UVM driver's residency rules).
 *
 * Advice.  Every managed mapping gets SetPreferredLocation(device) once, at
 * managed_alloc, and keeps it for life; there is no SetAccessedBy and no
 * per-transfer advice.
 *   - An explicit prefetch overrides the preferred location, so evicting to
 *     the host needs no advice: after the prefetch to the host the device's
 *     mapping is removed (on x86 PCIe the driver leaves no remote mapping),
 *     and nothing pulls the data back by itself: SetPreferredLocation never
 *     migrates, and access-counter migration is off on PCIe systems.
 *   - The only thing that brings an evicted block back unasked is a GPU
 *     access.  An access mark of a block that is away pages it in with one
 *     prefetch on the user's stream (fault op, hoff_access); a GPU access
 *     without a mark faults it in, and with the preferred location on the
 *     device a GPU fault on a host-resident page migrates it to the device,
 *     where it runs at HBM speed.  Advising "host" while evicted would
 *     instead map the host pages remotely (uncached, over PCIe, for every
 *     access of every kernel), and the books would call resident a block that
 *     is not.
 *   - cudaMemAdvise is not stream-ordered: it takes effect when called, while
 *     the transfer waits for its "after" event.  Changing advice at issue time
 *     would change the policy under kernels still using the block.  Advice
 *     set once at allocation has no such race, and saves two driver calls per
 *     transfer.
 *   - Preferred location device also keeps the driver's thrashing pin from
 *     settling a block on the host.
 *   - SetAccessedBy(device) is avoided on purpose: it keeps a remote mapping
 *     after eviction, so GPU accesses would read host memory instead of
 *     faulting the block back.
 *
 * Host location.  Evictions prefetch to cudaMemLocationTypeHostNuma with the
 * device's closest node (cudaDevAttrHostNumaId) or the node the host tier
 * chose, else to cudaMemLocationTypeHost.  If the driver refuses a NUMA node
 * at run time, evictions meant for that node (only that one) go to plain
 * host memory from then on (logged once per node, numa_refusals).
 *
 * Initial residency.  managed_alloc prefetches the new mapping to the device
 * on a private stream and waits for it, so a new mapping is really resident
 * (the contract) when it is handed out.  The reasons:
 *   - the first kernel does not fault it in at 64 KiB granularity;
 *   - cudaMemGetInfo, which the oversubscription guard reads, counts it.
 * The cost is paid once per mapping, and the pools cache mappings.
 *
 * Discard uses cudaMemDiscardBatchAsync where the toolkit declares it and the
 * driver accepts it.  Otherwise (or once the driver refuses it) it falls back
 * to an eviction to the host.  That is safe: after a discard the contents are
 * undefined, so any contents (the old bytes, moved to the host) meet the
 * contract; the fallback costs only D2H bandwidth.
 *
 * populate makes a discarded range resident with cudaMemDiscardAndPrefetchBatchAsync
 * where the toolkit has it (no bytes copied: the contents are dead), else
 * with a prefetch, which may copy stale bytes from the host.  It runs on the
 * D2H stream, not the H2D one: a discard runs on the D2H stream, and a
 * prefetch concurrent with a discard of the same range is undefined
 * behaviour, so stream order keeps it after any discard of the block.  The
 * caller does not wait, but its stream is made to wait (an event), since its
 * kernels write the block next and a write concurrent with a discard is
 * undefined too.
 *
 * host_drop (the host copy of a spilled block is dead) discards the range on
 * a stream of its own, so it waits for nothing but itself, not for the
 * evictions queued on the D2H stream.  A driver that refuses it is not asked
 * again: spilled blocks then keep their host pages (host_drop_refusals).
 *
 * Errors are converted here, where each call is made:
 *   cudaErrorMemoryAllocation -> -ENOMEM, anything else -> -EIO;
 * each has a hoff__error message, and the runtime's last error is cleared, so
 * that the framework's next cudaGetLastError() does not blame its own kernel.
 * A query that finds work pending (cudaErrorNotReady) also leaves that in the
 * thread's last error; it is cleared only when it is still the last error
 * (cudaPeekAtLastError), so that another error is never masked.
 */

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "core/core.h"

#if CUDART_VERSION >= 13000
#define cuda_prefetch_ cudaMemPrefetchAsync
#define cuda_advise_ cudaMemAdvise
#elif CUDART_VERSION >= 12020
#define cuda_prefetch_ cudaMemPrefetchAsync_v2
#define cuda_advise_ cudaMemAdvise_v2
#else
#error "the cuda backend needs CUDA 12.2 or later (cudaMemPrefetchAsync with a cudaMemLocation); configure --without-cuda"
#endif

#ifndef HAVE_DECL_CUDAMEMDISCARDBATCHASYNC
#define HAVE_DECL_CUDAMEMDISCARDBATCHASYNC 0
#endif
#ifndef HAVE_DECL_CUDAMEMDISCARDANDPREFETCHBATCHASYNC
#define HAVE_DECL_CUDAMEMDISCARDANDPREFETCHBATCHASYNC 0
#endif

#define NUMA_NODES 256 /* nodes whose refusal is remembered one by one; others share the last bit */

#define MAP_BUCKETS 1024

/* One managed mapping: p is what was handed out (2 MiB aligned), base what
 * cudaMallocManaged returned (p, or below p when the driver gave an unaligned
 * pointer and the mapping was over-allocated by one grain). */
struct cuda_map {
    void *p;
    void *base;
    size_t size;
    struct cuda_map *next;
};

struct cuda_be {
    struct hoff__backend be; /* first: the ops table */
    int device;
    cudaStream_t d2h, h2d;   /* copy streams, highest priority, non-blocking */
    cudaStream_t pop;        /* managed_alloc's initial prefetch */
    cudaStream_t drop;       /* host_drop's discards (the tier thread's alone) */
    struct cudaMemLocation dev_loc;
    struct cudaMemLocation host_loc; /* HostNuma(node) or Host */
    uint64_t numa_bad[NUMA_NODES / 64]; /* atomic bits: the driver refused these nodes */
    int discard_ok;          /* atomic: 0 once cudaMemDiscardBatchAsync was refused */
    int drop_ok;             /* atomic: 0 once a discard of a spilled block's host pages was refused */
    int dap_ok;              /* atomic: 0 once cudaMemDiscardAndPrefetchBatchAsync was refused */
    struct hoff__be_counters cnt; /* atomics */
    pthread_mutex_t lock;    /* the mapping table */
    struct cuda_map *maps[MAP_BUCKETS];
    size_t nmaps;
    uint64_t mapped_bytes;
    char name[256];
};

static inline struct cuda_be *cbe(struct hoff__backend *be) {
    return (struct cuda_be *)be;
}

/* hoff__event is a cudaEvent_t on this backend (no wrapper). */
static inline cudaEvent_t cev(hoff__event *ev) {
    return (cudaEvent_t)(void *)ev;
}

static inline cudaStream_t cstream(hoff_stream s) {
    return (cudaStream_t)s;
}

/* ---- errors --------------------------------------------------------------- */

static int cuda_fail(cudaError_t e, const char *fmt, ...) HOFF__PRINTF(2, 3);
static int cuda_fail(cudaError_t e, const char *fmt, ...) {
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)cudaGetLastError(); /* ours: do not leave it to the framework */
    return hoff__error(e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO,
                       "cuda: %s: %s (%s)", what, cudaGetErrorString(e),
                       cudaGetErrorName(e));
}

/* A query found work pending: the runtime keeps cudaErrorNotReady as the
 * thread's last error, which the framework's next launch check would take
 * for its own failure.  Clear it, but only if it is still the last error. */
static void clear_not_ready(void) {
    if (cudaPeekAtLastError() == cudaErrorNotReady)
        (void)cudaGetLastError();
}

static void count(uint64_t *c) {
    __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

/* ---- the current device ----------------------------------------------------- */

/* The device this thread was bound to by bind_thread (-1: none): such a
 * thread (hoff's issuing or tier thread) never switches. */
static __thread int bound_device = -1;

/* Make the backend's device current on this thread; *saved gets the device
 * to restore (-1: nothing to restore). */
static int dev_enter(struct cuda_be *b, int *saved) {
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
        return cuda_fail(e, "cudaSetDevice(%d)", b->device);
    *saved = cur;
    return 0;
}

static void dev_leave(struct cuda_be *b, int saved) {
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
        return cuda_fail(e, "cudaSetDevice(%d) on a thread of hoff's own", b->device);
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

/* ---- the mapping table -------------------------------------------------------- */

static size_t map_bucket(const void *p) {
    uint64_t k = (uint64_t)(uintptr_t)p >> 21;

    k *= 0x9E3779B97F4A7C15ull;
    return (size_t)(k >> 54) % MAP_BUCKETS;
}

static int map_insert(struct cuda_be *b, void *p, void *base, size_t size) {
    struct cuda_map *m = malloc(sizeof *m);
    size_t h = map_bucket(p);

    if (!m)
        return hoff__error(-ENOMEM, "cuda: out of host memory for the mapping table");
    m->p = p;
    m->base = base;
    m->size = size;
    pthread_mutex_lock(&b->lock);
    m->next = b->maps[h];
    b->maps[h] = m;
    b->nmaps++;
    b->mapped_bytes += size;
    pthread_mutex_unlock(&b->lock);
    return 0;
}

/* Unlink the mapping at p into *out: 0, -ENOENT (no such mapping) or
 * -ERANGE (it has another size; left in place, its size in *out_size). */
static int map_take(struct cuda_be *b, const void *p, size_t size,
                    struct cuda_map **out, size_t *out_size) {
    struct cuda_map **pp, *m;
    int rc = -ENOENT;

    *out = NULL;
    pthread_mutex_lock(&b->lock);
    for (pp = &b->maps[map_bucket(p)]; *pp; pp = &(*pp)->next) {
        m = *pp;
        if (m->p != p)
            continue;
        if (m->size != size) {
            *out_size = m->size;
            rc = -ERANGE;
            break;
        }
        *pp = m->next;
        b->nmaps--;
        b->mapped_bytes -= m->size;
        *out = m;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* ---- memory ------------------------------------------------------------------- */

static int cuda_mem_info(struct hoff__backend *be, uint64_t *free_b, uint64_t *total_b) {
    struct cuda_be *b = cbe(be);
    size_t f = 0, t = 0;
    int saved, rc = dev_enter(b, &saved);
    cudaError_t e;

    if (rc)
        return rc;
    e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaMemGetInfo(device %d)", b->device);
    dev_leave(b, saved);
    if (rc)
        return rc;
    if (free_b)
        *free_b = f;
    if (total_b)
        *total_b = t;
    return 0;
}

static int cuda_dev_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct cuda_be *b = cbe(be);
    void *p = NULL;
    int saved, rc;
    cudaError_t e;

    *out = NULL;
    if (size == 0)
        return hoff__error(-EINVAL, "cuda: dev_alloc of 0 bytes");
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    {
        /* A stream of this thread may be capturing a graph (the pool serves
         * its allocations): in the global or thread-local capture mode
         * cudaMalloc, a call that may synchronise, would fail and invalidate
         * the capture.  The relaxed mode lets it through, as PyTorch's own
         * allocator does (CUDAStreamCaptureModeGuard). */
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        int swapped = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;

        if (!swapped)
            (void)cudaGetLastError();
        e = cudaMalloc(&p, size);
        if (swapped && cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess)
            (void)cudaGetLastError();
    }
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaMalloc(%zu)", size);
    else
        *out = p;
    dev_leave(b, saved);
    return rc;
}

static int cuda_stream_capturing(struct hoff__backend *be, hoff_stream s) {
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e;

    (void)be;
    e = cudaStreamIsCapturing((cudaStream_t)s, &st);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaStreamIsCapturing(%p)", s);
    /* Invalidated counts as capturing: the capture is still open and must
     * not see managed memory either. */
    return st != cudaStreamCaptureStatusNone;
}

static int cuda_dev_free(struct hoff__backend *be, void *p, size_t size) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!p)
        return 0;
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaFree(p);
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaFree(%p, %zu bytes)", p, size);
    dev_leave(b, saved);
    return rc;
}

static void managed_release(void *base) {
    if (cudaFree(base) != cudaSuccess)
        (void)cudaGetLastError();
}

static int cuda_managed_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct cuda_be *b = cbe(be);
    void *base = NULL, *p;
    int saved, rc;
    cudaError_t e;

    *out = NULL;
    if (size == 0 || size % HOFF__MANAGED_GRAIN)
        return hoff__error(-EINVAL, "cuda: managed_alloc(%zu): not a positive multiple of 2 MiB", size);
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaMallocManaged(&base, size, cudaMemAttachGlobal);
    if (e != cudaSuccess) {
        rc = cuda_fail(e, "cudaMallocManaged(%zu)", size);
        goto out;
    }
    p = base;
    if ((uintptr_t)base % HOFF__MANAGED_GRAIN) {
        /* Separate 2 MiB blocks migrate separately only if the mapping
         * starts on a grain: over-allocate and hand out the aligned part
         * (the slack is never touched, so it never gets pages). */
        managed_release(base);
        base = NULL;
        if (size > SIZE_MAX - HOFF__MANAGED_GRAIN) {
            rc = hoff__error(-ENOMEM, "cuda: managed_alloc(%zu): too large", size);
            goto out;
        }
        e = cudaMallocManaged(&base, size + HOFF__MANAGED_GRAIN, cudaMemAttachGlobal);
        if (e != cudaSuccess) {
            rc = cuda_fail(e, "cudaMallocManaged(%zu)", size + HOFF__MANAGED_GRAIN);
            goto out;
        }
        p = (void *)(uintptr_t)hoff__align_up((uint64_t)(uintptr_t)base, HOFF__MANAGED_GRAIN);
        HOFF__LOG_ONCE(HOFF_LOG_DEBUG, "cuda: cudaMallocManaged returned an address off the "
                       "2 MiB grain; over-allocating managed mappings by 2 MiB to align them");
    }
    e = cuda_advise_(p, size, cudaMemAdviseSetPreferredLocation, b->dev_loc);
    if (e != cudaSuccess) {
        /* Advice is only a hint: keep going without it. */
        (void)cudaGetLastError();
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "cuda: cudaMemAdvise(SetPreferredLocation, device %d) "
                       "failed: %s; managed memory works without it", b->device,
                       cudaGetErrorString(e));
    }
    e = cuda_prefetch_(p, size, b->dev_loc, 0, b->pop);
    if (e != cudaSuccess) {
        rc = cuda_fail(e, "cudaMemPrefetchAsync(%p, %zu, device %d)", p, size, b->device);
        managed_release(base);
        goto out;
    }
    e = cudaStreamSynchronize(b->pop);
    if (e != cudaSuccess) {
        rc = cuda_fail(e, "cudaStreamSynchronize(initial prefetch of %zu bytes)", size);
        managed_release(base);
        goto out;
    }
    rc = map_insert(b, p, base, size);
    if (rc) {
        managed_release(base);
        goto out;
    }
    *out = p;
out:
    dev_leave(b, saved);
    return rc;
}

static int cuda_managed_free(struct hoff__backend *be, void *p, size_t size) {
    struct cuda_be *b = cbe(be);
    struct cuda_map *m;
    size_t have = 0;
    int saved, rc;
    cudaError_t e;

    if (!p)
        return 0;
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = map_take(b, p, size, &m, &have);
    if (rc == -ENOENT) {
        rc = hoff__error(-EINVAL, "cuda: managed_free(%p): not a managed mapping of this backend", p);
    } else if (rc == -ERANGE) {
        rc = hoff__error(-EINVAL, "cuda: managed_free(%p, %zu): the mapping has %zu bytes",
                         p, size, have);
    } else {
        e = cudaFree(m->base);
        if (e != cudaSuccess)
            rc = cuda_fail(e, "cudaFree(managed %p, %zu bytes)", p, size);
        free(m);
    }
    dev_leave(b, saved);
    return rc;
}

/* ---- events --------------------------------------------------------------------- */

static int event_create_flags(struct hoff__backend *be, hoff__event **out, unsigned flags) {
    struct cuda_be *b = cbe(be);
    cudaEvent_t ev = NULL;
    int saved, rc = dev_enter(b, &saved);
    cudaError_t e;

    *out = NULL;
    if (rc)
        return rc;
    e = cudaEventCreateWithFlags(&ev, flags);
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaEventCreateWithFlags(%#x)", flags);
    else
        *out = (hoff__event *)(void *)ev;
    dev_leave(b, saved);
    return rc;
}

static int cuda_event_create(struct hoff__backend *be, hoff__event **out) {
    return event_create_flags(be, out, cudaEventDisableTiming);
}

/* For the recorder's device-timeline estimate: events with timing. */
static int cuda_event_create_timed(struct hoff__backend *be, hoff__event **out) {
    return event_create_flags(be, out, cudaEventDefault);
}

static int cuda_event_elapsed_ns(struct hoff__backend *be, hoff__event *a, hoff__event *z, uint64_t *ns) {
    struct cuda_be *b = cbe(be);
    float ms = 0;
    int saved, rc;
    cudaError_t e;

    if (!a || !z || !ns)
        return hoff__error(-EINVAL, "cuda: event_elapsed_ns: NULL argument");
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventElapsedTime(&ms, cev(a), cev(z));
    if (e == cudaErrorNotReady) {
        clear_not_ready();
        rc = -EAGAIN;
    }
    else if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaEventElapsedTime");
    else
        *ns = ms > 0 ? (uint64_t)((double)ms * 1e6 + 0.5) : 0;
    dev_leave(b, saved);
    return rc;
}

static void cuda_event_destroy(struct hoff__backend *be, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved;

    if (!ev || dev_enter(b, &saved))
        return;
    if (cudaEventDestroy(cev(ev)) != cudaSuccess)
        (void)cudaGetLastError();
    dev_leave(b, saved);
}

static int cuda_event_record(struct hoff__backend *be, hoff__event *ev, hoff_stream s) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return hoff__error(-EINVAL, "cuda: event_record of a NULL event");
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventRecord(cev(ev), cstream(s));
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaEventRecord(stream %p)", s);
    dev_leave(b, saved);
    return rc;
}

static int cuda_event_query(struct hoff__backend *be, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return hoff__error(-EINVAL, "cuda: event_query of a NULL event");
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventQuery(cev(ev));
    if (e == cudaErrorNotReady) {
        clear_not_ready(); /* pending is no failure, and must not look like one later */
        rc = -EAGAIN;
    } else if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaEventQuery");
    dev_leave(b, saved);
    return rc;
}

static int cuda_event_sync(struct hoff__backend *be, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return hoff__error(-EINVAL, "cuda: event_sync of a NULL event");
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventSynchronize(cev(ev));
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaEventSynchronize");
    dev_leave(b, saved);
    return rc;
}

static int cuda_stream_wait(struct hoff__backend *be, hoff_stream s, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return 0; /* nothing to wait for */
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaStreamWaitEvent(cstream(s), cev(ev), 0);
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaStreamWaitEvent(stream %p)", s);
    dev_leave(b, saved);
    return rc;
}

/* ---- transfers ---------------------------------------------------------------------- */

/* The next transfer in direction dir waits for ev too (issuing thread only,
 * which is bound to the device). */
static int cuda_transfer_wait(struct hoff__backend *be, int dir, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev || (dir != HOFF__XFER_D2H && dir != HOFF__XFER_H2D))
        return hoff__error(-EINVAL, "cuda: transfer_wait: %s", ev ? "no such direction" : "NULL event");
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaStreamWaitEvent(dir == HOFF__XFER_H2D ? b->h2d : b->d2h, cev(ev), 0);
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaStreamWaitEvent(%s stream, a fence of another stream)",
                       dir == HOFF__XFER_H2D ? "H2D" : "D2H");
    dev_leave(b, saved);
    return rc;
}

/* The device must be current for these helpers. */

static int wait_after(cudaStream_t s, hoff__event *after, const char *dir) {
    cudaError_t e;

    if (!after)
        return 0;
    e = cudaStreamWaitEvent(s, cev(after), 0);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaStreamWaitEvent(%s stream, after)", dir);
    return 0;
}

/* Record done on s.  Also after a failed transfer: done then marks the point
 * on s where the transfer would have been, and nobody waits on an event
 * recorded long ago. */
static int record_done(cudaStream_t s, hoff__event *done, const char *dir) {
    cudaError_t e;

    if (!done)
        return 0;
    e = cudaEventRecord(cev(done), s);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaEventRecord(%s stream, done)", dir);
    return 0;
}

static const char *loc_text(struct cudaMemLocation loc, char *buf, size_t len) {
    switch (loc.type) {
    case cudaMemLocationTypeDevice: snprintf(buf, len, "device %d", loc.id); break;
    case cudaMemLocationTypeHostNuma: snprintf(buf, len, "host NUMA node %d", loc.id); break;
    case cudaMemLocationTypeHost: snprintf(buf, len, "host"); break;
    default: snprintf(buf, len, "location type %d", (int)loc.type); break;
    }
    return buf;
}

static int numa_bit(int node, uint64_t *mask) {
    int i = node < 0 ? 0 : node >= NUMA_NODES ? NUMA_NODES - 1 : node;

    *mask = 1ull << (i % 64);
    return i / 64;
}

static int numa_refused(struct cuda_be *b, int node) {
    uint64_t m;
    int w = numa_bit(node, &m);

    return (__atomic_load_n(&b->numa_bad[w], __ATOMIC_RELAXED) & m) != 0;
}

/* Prefetch (p, size) to the host on s: the NUMA node if the driver takes it,
 * else plain host memory (and plain host for that node from then on; the
 * other nodes keep being asked for). */
static int prefetch_host_to(struct cuda_be *b, struct cudaMemLocation loc, void *p, size_t size,
                            cudaStream_t s) {
    char lt[48];
    cudaError_t e;

    if (loc.type == cudaMemLocationTypeHostNuma && numa_refused(b, loc.id)) {
        loc.type = cudaMemLocationTypeHost;
        loc.id = 0;
    }
    e = cuda_prefetch_(p, size, loc, 0, s);
    if (e != cudaSuccess && loc.type == cudaMemLocationTypeHostNuma) {
        cudaError_t e2;
        struct cudaMemLocation host = {.type = cudaMemLocationTypeHost, .id = 0};

        (void)cudaGetLastError();
        e2 = cuda_prefetch_(p, size, host, 0, s);
        if (e2 == cudaSuccess) {
            uint64_t m;
            int w = numa_bit(loc.id, &m);

            count(&b->cnt.numa_refusals);
            if (!(__atomic_fetch_or(&b->numa_bad[w], m, __ATOMIC_RELAXED) & m))
                hoff__log(HOFF_LOG_WARN, "cuda: prefetch to host NUMA node %d refused (%s); evictions "
                          "meant for that node go to plain host memory from now on (numa_refusals)",
                          loc.id, cudaGetErrorString(e));
            return 0;
        }
        e = e2;
        loc = host;
    }
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaMemPrefetchAsync(%p, %zu, %s)", p, size,
                         loc_text(loc, lt, sizeof lt));
    return 0;
}

static int prefetch_host(struct cuda_be *b, void *p, size_t size, cudaStream_t s) {
    return prefetch_host_to(b, b->host_loc, p, size, s);
}

static int prefetch_device(struct cuda_be *b, void *p, size_t size, cudaStream_t s) {
    cudaError_t e = cuda_prefetch_(p, size, b->dev_loc, 0, s);

    if (e != cudaSuccess)
        return cuda_fail(e, "cudaMemPrefetchAsync(%p, %zu, device %d)", p, size, b->device);
    return 0;
}

static int cuda_evict(struct hoff__backend *be, void *p, size_t size,
                      hoff__event *after, hoff__event *done) {
    struct cuda_be *b = cbe(be);
    int saved, rc, rc2;

    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = wait_after(b->d2h, after, "D2H");
    if (rc == 0)
        rc = prefetch_host(b, p, size, b->d2h);
    rc2 = record_done(b->d2h, done, "D2H");
    dev_leave(b, saved);
    return rc ? rc : rc2;
}

/* Evict to host NUMA node `node` (the host tier's choice: interleave or a
 * node list); -1 is the backend's own choice. */
static int cuda_evict_node(struct hoff__backend *be, void *p, size_t size, int node,
                           hoff__event *after, hoff__event *done) {
    struct cuda_be *b = cbe(be);
    struct cudaMemLocation loc = {.type = cudaMemLocationTypeHostNuma, .id = node};
    int saved, rc, rc2;

    if (node < 0)
        return cuda_evict(be, p, size, after, done);
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = wait_after(b->d2h, after, "D2H");
    if (rc == 0)
        rc = prefetch_host_to(b, loc, p, size, b->d2h);
    rc2 = record_done(b->d2h, done, "D2H");
    dev_leave(b, saved);
    return rc ? rc : rc2;
}

/* The host copy of an evicted mapping is the mapping itself: the CPU reads
 * host-resident managed pages in place. */
static int cuda_host_bytes(struct hoff__backend *be, void *p, size_t size, void **host) {
    (void)be;
    (void)size;
    *host = p;
    return 0;
}

static int cuda_host_make(struct hoff__backend *be, void *p, size_t size, void **host) {
    (void)be;
    (void)size;
    *host = p; /* CPU writes populate the pages on the host */
    return 0;
}

/* Spilled: drop the host pages (a discard on the drop stream, waited for on
 * the tier thread; nothing else is queued there). */
static int cuda_host_drop(struct hoff__backend *be, void *p, size_t size) {
    struct cuda_be *b = cbe(be);
    int saved, rc = 0;

    if (!__atomic_load_n(&b->drop_ok, __ATOMIC_RELAXED)) {
        count(&b->cnt.drop_refusals);
        return 0;
    }
#if HAVE_DECL_CUDAMEMDISCARDBATCHASYNC
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    {
        void *ptrs[1] = {p};
        size_t sizes[1] = {size};
        cudaError_t e = cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, b->drop);

        if (e == cudaSuccess)
            e = cudaStreamSynchronize(b->drop);
        if (e != cudaSuccess) {
            /* The copy on the NVMe tier is good; only the host pages stay.
             * Do not ask again for every spill. */
            (void)cudaGetLastError();
            __atomic_store_n(&b->drop_ok, 0, __ATOMIC_RELAXED);
            count(&b->cnt.drop_refusals);
            hoff__log(HOFF_LOG_WARN, "cuda: cudaMemDiscardBatchAsync(%p, %zu) of a spilled block's host "
                      "pages refused (%s); spilled blocks keep their host pages from now on "
                      "(host_drop_refusals)", p, size, cudaGetErrorString(e));
        }
    }
    dev_leave(b, saved);
#else
    (void)p;
    (void)size;
    (void)saved;
    __atomic_store_n(&b->drop_ok, 0, __ATOMIC_RELAXED);
    count(&b->cnt.drop_refusals);
    HOFF__LOG_ONCE(HOFF_LOG_WARN, "cuda: no discard API in this CUDA toolkit: spilled blocks keep their "
                   "host pages (host_drop_refusals)");
#endif
    return rc;
}

static int cuda_pci_bus_id(struct hoff__backend *be, char *buf, size_t len) {
    struct cuda_be *b = cbe(be);
    cudaError_t e = cudaDeviceGetPCIBusId(buf, (int)len, b->device);

    return e == cudaSuccess ? 0 : cuda_fail(e, "cudaDeviceGetPCIBusId(%d)", b->device);
}

static int cuda_prefetch(struct hoff__backend *be, void *p, size_t size,
                         hoff__event *after, hoff__event *done) {
    struct cuda_be *b = cbe(be);
    int saved, rc, rc2;

    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    /* The preferred location is the device for the mapping's whole life
     * (see the policy above): no advice to change here. */
    rc = wait_after(b->h2d, after, "H2D");
    if (rc == 0)
        rc = prefetch_device(b, p, size, b->h2d);
    rc2 = record_done(b->h2d, done, "H2D");
    dev_leave(b, saved);
    return rc ? rc : rc2;
}

static int cuda_discard(struct hoff__backend *be, void *p, size_t size,
                        hoff__event *after, hoff__event *done) {
    struct cuda_be *b = cbe(be);
    int saved, rc, rc2;

    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = wait_after(b->d2h, after, "D2H");
    if (rc)
        goto record;
#if HAVE_DECL_CUDAMEMDISCARDBATCHASYNC
    if (__atomic_load_n(&b->discard_ok, __ATOMIC_RELAXED)) {
        void *ptrs[1] = {p};
        size_t sizes[1] = {size};
        cudaError_t e = cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, b->d2h);

        if (e == cudaSuccess)
            goto record;
        (void)cudaGetLastError();
        /* Fall back to an eviction; stop asking if that works (the driver
         * does not take discards, not this range is wrong). */
        rc = prefetch_host(b, p, size, b->d2h);
        if (rc == 0) {
            __atomic_store_n(&b->discard_ok, 0, __ATOMIC_RELAXED);
            count(&b->cnt.discard_fallbacks);
            hoff__log(HOFF_LOG_WARN, "cuda: cudaMemDiscardBatchAsync refused (%s); "
                      "discards evict to the host from now on (discard_fallbacks)", cudaGetErrorString(e));
        }
        goto record;
    }
#endif
    /* Contents are undefined after a discard, so moving the old bytes to the
     * host meets the contract. */
    count(&b->cnt.discard_fallbacks);
    rc = prefetch_host(b, p, size, b->d2h);
record:
    rc2 = record_done(b->d2h, done, "D2H");
    dev_leave(b, saved);
    return rc ? rc : rc2;
}

/* A block used while away: page it in with one prefetch on the user's
 * stream, ordered before the kernels that use it, rather than leave the
 * driver to fault it in 64 KiB at a time behind hoff's books (the preferred
 * location, the device, is the fallback if this fails).  The caller's thread
 * pays the call; the stream waits for the copy (the sim's stall). */
static int cuda_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream s,
                      uint64_t *stall_ns) {
    struct cuda_be *b = cbe(be);
    int saved, rc;

    if (stall_ns)
        *stall_ns = 0;
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = prefetch_device(b, p, size, cstream(s));
    dev_leave(b, saved);
    return rc;
}

/* Work queued on s from now on waits for what is queued on the D2H stream
 * so far (a populate's discard: a write concurrent with it is undefined). */
static int order_after_d2h(struct cuda_be *b, hoff_stream s) {
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);

    if (e != cudaSuccess)
        return cuda_fail(e, "cudaEventCreateWithFlags(populate's fence)");
    e = cudaEventRecord(ev, b->d2h);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(cstream(s), ev, 0);
    if (cudaEventDestroy(ev) != cudaSuccess) /* released once it completes */
        (void)cudaGetLastError();
    return e == cudaSuccess ? 0 : cuda_fail(e, "ordering stream %p after a populate", s);
}

static int cuda_populate(struct hoff__backend *be, void *p, size_t size, hoff_stream s) {
    struct cuda_be *b = cbe(be);
    int saved, rc;

    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    /* D2H stream: stream order puts this after any discard of the block. */
#if HAVE_DECL_CUDAMEMDISCARDANDPREFETCHBATCHASYNC
    if (__atomic_load_n(&b->dap_ok, __ATOMIC_RELAXED)) {
        void *ptrs[1] = {p};
        size_t sizes[1] = {size}, idx[1] = {0};
        struct cudaMemLocation loc[1] = {b->dev_loc};
        cudaError_t e = cudaMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 1, loc, idx, 1, 0, b->d2h);

        if (e == cudaSuccess)
            goto order;
        (void)cudaGetLastError();
        __atomic_store_n(&b->dap_ok, 0, __ATOMIC_RELAXED);
        hoff__log(HOFF_LOG_WARN, "cuda: cudaMemDiscardAndPrefetchBatchAsync refused (%s); discarded blocks "
                  "are made resident with a prefetch from now on, which may copy dead bytes",
                  cudaGetErrorString(e));
    }
#endif
    rc = prefetch_device(b, p, size, b->d2h);
    if (rc)
        goto out;
#if HAVE_DECL_CUDAMEMDISCARDANDPREFETCHBATCHASYNC
order:
#endif
    /* The new user's work, and the caller's host code after it, come after
     * it: a write concurrent with a discard is undefined. */
    rc = order_after_d2h(b, s);
out:
    dev_leave(b, saved);
    return rc;
}

/* ---- the rest ------------------------------------------------------------------------- */

static int cuda_memcpy(struct hoff__backend *be, void *dst, const void *src, size_t n) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (n == 0)
        return 0;
    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaMemcpy(%p <- %p, %zu)", dst, src, n);
    dev_leave(b, saved);
    return rc;
}

static int cuda_sync(struct hoff__backend *be) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    rc = dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        rc = cuda_fail(e, "cudaDeviceSynchronize(device %d)", b->device);
    dev_leave(b, saved);
    return rc;
}

static uint64_t cuda_clock_ns(struct hoff__backend *be) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cuda_compute(struct hoff__backend *be, hoff_stream s, uint64_t ns) {
    return hoff__error(-ENOTSUP, "cuda: simulated compute exists only on the sim backend");
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
    if (dev_enter(b, &saved) == 0) {
        cudaError_t e = cudaDeviceSynchronize();

        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            hoff__log(HOFF_LOG_WARN, "cuda: cudaDeviceSynchronize at close: %s",
                      cudaGetErrorString(e));
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
            managed_release(m->base);
            n++;
            bytes += m->size;
            free(m);
        }
    }
    if (n) {
        char sz[32];

        hoff__log(HOFF_LOG_WARN, "cuda: %zu managed mapping%s (%s) still mapped at close; released",
                  n, n == 1 ? "" : "s", hoff__fmt_size(bytes, sz, sizeof sz));
    }
    dev_leave(b, saved);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static const struct hoff__backend_ops cuda_ops = {
    .name = "cuda",
    .close = cuda_close,
    .mem_info = cuda_mem_info,
    .dev_alloc = cuda_dev_alloc,
    .dev_free = cuda_dev_free,
    .managed_alloc = cuda_managed_alloc,
    .managed_free = cuda_managed_free,
    .event_create = cuda_event_create,
    .event_create_timed = cuda_event_create_timed,
    .event_elapsed_ns = cuda_event_elapsed_ns,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .stream_wait = cuda_stream_wait,
    .transfer_wait = cuda_transfer_wait,
    .bind_thread = cuda_bind_thread,
    .counters = cuda_counters,
    .evict = cuda_evict,
    .evict_node = cuda_evict_node,
    .pci_bus_id = cuda_pci_bus_id,
    .host_bytes = cuda_host_bytes,
    .host_drop = cuda_host_drop,
    .host_make = cuda_host_make,
    .prefetch = cuda_prefetch,
    .discard = cuda_discard,
    .fault = cuda_fault,
    .populate = cuda_populate,
    .memcpy = cuda_memcpy,
    .sync = cuda_sync,
    .stream_capturing = cuda_stream_capturing,
    .clock_ns = cuda_clock_ns,
    .compute = cuda_compute,
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
        return cuda_fail(e, "cudaStreamCreateWithPriority(%s)", what);
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

int hoff__backend_open_cuda(const struct hoff_config *cfg, struct hoff__backend **out) {
    struct cuda_be *b;
    struct cudaDeviceProp prop;
    int n = 0, dev = cfg ? cfg->device : 0;
    int managed = 0, cma = 0, numa = -1, least = 0, greatest = 0, saved = -1, rc;
    size_t f = 0, t = 0;
    char sf[32], st[32], lt[48];
    cudaError_t e;

    *out = NULL;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return hoff__error(-ENODEV, "cuda: no CUDA device (cudaGetDeviceCount: %s)",
                           cudaGetErrorString(e));
    }
    if (n <= 0)
        return hoff__error(-ENODEV, "cuda: no CUDA device (cudaGetDeviceCount: 0 devices)");
    if (dev < 0 && cudaGetDevice(&dev) != cudaSuccess) { /* -1: the calling thread's device */
        (void)cudaGetLastError();
        dev = 0;
    }
    if (dev < 0 || dev >= n)
        return hoff__error(-ENODEV, "cuda: no CUDA device %d (HOFF_DEVICE, or LOCAL_RANK when HOFF_DEVICE is -1): %d device%s, "
                           "ordinals 0..%d", dev, n, n == 1 ? "" : "s", n - 1);

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
    rc = dev_enter(b, &saved);
    if (rc) {
        /* e.g. a device in prohibited compute mode, or one already broken */
        char why[512];

        snprintf(why, sizeof why, "%s", hoff_last_error());
        rc = hoff__error(-ENODEV, "cuda: cannot use device %d: %s", dev, why);
        pthread_mutex_destroy(&b->lock);
        free(b);
        return rc;
    }

    memset(&prop, 0, sizeof prop);
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(b->name, sizeof b->name, "device %d", dev);
    } else {
        snprintf(b->name, sizeof b->name, "%s", prop.name);
    }
    attr(&managed, cudaDevAttrManagedMemory, dev);
    attr(&cma, cudaDevAttrConcurrentManagedAccess, dev);
    if (!managed) {
        rc = hoff__error(-ENODEV, "cuda: device %d (%s) cannot allocate managed memory "
                         "(cudaDevAttrManagedMemory = 0); hoff offloads through managed memory",
                         dev, b->name);
        goto fail;
    }
    if (!cma) {
        rc = hoff__error(-ENODEV, "cuda: device %d (%s) has no concurrent managed access "
                         "(cudaDevAttrConcurrentManagedAccess = 0: Windows/WSL, a GPU older than "
                         "Pascal, or a virtual GPU without it), so managed memory cannot be "
                         "prefetched; hoff needs it", dev, b->name);
        goto fail;
    }

    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
        (void)cudaGetLastError();
        greatest = 0;
    }
    if ((rc = make_stream(&b->d2h, greatest, "D2H")) ||
        (rc = make_stream(&b->h2d, greatest, "H2D")) ||
        (rc = make_stream(&b->pop, greatest, "populate")) ||
        (rc = make_stream(&b->drop, least, "host drop")))
        goto fail;

    b->dev_loc.type = cudaMemLocationTypeDevice;
    b->dev_loc.id = dev;
    if (attr(&numa, cudaDevAttrHostNumaId, dev) == 0 && numa >= 0) {
        b->host_loc.type = cudaMemLocationTypeHostNuma;
        b->host_loc.id = numa;
    } else {
        b->host_loc.type = cudaMemLocationTypeHost;
        b->host_loc.id = 0;
    }

    if (cudaMemGetInfo(&f, &t) != cudaSuccess)
        (void)cudaGetLastError();
    hoff__log(HOFF_LOG_INFO, "cuda: device %d (%s): %s free of %s; evictions go to %s; "
              "discard: %s", dev, b->name, hoff__fmt_size(f, sf, sizeof sf),
              hoff__fmt_size(t, st, sizeof st), loc_text(b->host_loc, lt, sizeof lt),
              HAVE_DECL_CUDAMEMDISCARDBATCHASYNC ? "cudaMemDiscardBatchAsync" : "evict (no discard API)");
    dev_leave(b, saved);
    *out = &b->be;
    return 0;

fail:
    destroy_stream(b->d2h);
    destroy_stream(b->h2d);
    destroy_stream(b->pop);
    destroy_stream(b->drop);
    dev_leave(b, saved);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return rc == -ENOMEM ? rc : -ENODEV; /* the message says which call failed */
}

#else /* !HAVE_CUDA */

typedef int hoff__cuda_unused; /* an empty translation unit is not ISO C */

#endif
