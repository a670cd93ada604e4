/* cuda_xfer.c — the cuda backend's transfers of managed ranges: evict (to a host NUMA node, or plain
 * host memory once the driver refused that node), prefetch, discard (or an eviction where the driver
 * has none), the fault of a block used while away, populate, and the host pages of the tiers, each
 * ordered by events on the copy streams.  The policy: cuda_be.h.
 * Threading: transfers are made from hoff's issuing thread, host_* from its tier thread; fault and
 * populate from any thread.  The refusal flags and counters are atomics. */
#include "config.h"

#ifdef HAVE_CUDA

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "backend/cuda_be.h"
#include "core/core.h"

static void count(uint64_t *c) {
    __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

/* ---- transfers ---------------------------------------------------------------------- */

/* The copy stream of direction dir (enum hoff__xfer_dir: evict and discard
 * run D2H, prefetch H2D), and its name for messages. */
static cudaStream_t copy_stream(struct cuda_be *b, int dir) {
    return dir == HOFF__XFER_H2D ? b->h2d : b->d2h;
}

static const char *dir_name(int dir) {
    return dir == HOFF__XFER_H2D ? "H2D" : "D2H";
}

/* The next transfer in direction dir waits for ev too (issuing thread only,
 * which is bound to the device). */
int hoff__cuda_transfer_wait(struct hoff__backend *be, int dir, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev || (dir != HOFF__XFER_D2H && dir != HOFF__XFER_H2D))
        return hoff__error(-EINVAL, "cuda: transfer_wait: %s", ev ? "no such direction" : "NULL event");
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaStreamWaitEvent(copy_stream(b, dir), cev(ev), 0);
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaStreamWaitEvent(%s stream, a fence of another stream)", dir_name(dir));
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

/* The device must be current for these helpers. */

static int wait_after(cudaStream_t s, hoff__event *after, const char *dir) {
    cudaError_t e;

    if (!after)
        return 0;
    e = cudaStreamWaitEvent(s, cev(after), 0);
    if (e != cudaSuccess)
        return hoff__cuda_fail(e, "cudaStreamWaitEvent(%s stream, after)", dir);
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
        return hoff__cuda_fail(e, "cudaEventRecord(%s stream, done)", dir);
    return 0;
}

const char *hoff__cuda_loc_text(struct cudaMemLocation loc, char *buf, size_t len) {
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
static int prefetch_host_to(struct cuda_be *b, struct cudaMemLocation loc, void *p, size_t size, cudaStream_t s) {
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
                hoff__log(HOFF_LOG_WARN,
                          "cuda: prefetch to host NUMA node %d refused (%s); evictions "
                          "meant for that node go to plain host memory from now on (numa_refusals)",
                          loc.id, cudaGetErrorString(e));
            return 0;
        }
        e = e2;
        loc = host;
    }
    if (e != cudaSuccess)
        return hoff__cuda_fail(e, "cudaMemPrefetchAsync(%p, %zu, %s)", p, size,
                               hoff__cuda_loc_text(loc, lt, sizeof lt));
    return 0;
}

static int prefetch_host(struct cuda_be *b, void *p, size_t size, cudaStream_t s) {
    return prefetch_host_to(b, b->host_loc, p, size, s);
}

static int prefetch_device(struct cuda_be *b, void *p, size_t size, cudaStream_t s) {
    cudaError_t e = cuda_prefetch_(p, size, b->dev_loc, 0, s);

    if (e != cudaSuccess)
        return hoff__cuda_fail(e, "cudaMemPrefetchAsync(%p, %zu, device %d)", p, size, b->device);
    return 0;
}

#if HAVE_DECL_CUDAMEMDISCARDBATCHASYNC
/* Discard the one range (p, size) on s. */
static cudaError_t discard_one(void *p, size_t size, cudaStream_t s) {
    void *ptrs[1] = {p};
    size_t sizes[1] = {size};

    return cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, s);
}
#endif

/* What a transfer moves on its copy stream s, with the device current and s
 * ordered after the transfer's "after"; node: evict_node's host node (-1:
 * the backend's own choice). */
typedef int (*move_fn)(struct cuda_be *b, void *p, size_t size, cudaStream_t s, int node);

/* Every transfer (evict, prefetch, discard): the device current, the copy
 * stream of dir waits for after, then move, then done is recorded on that
 * stream, also when the wait or the move failed (record_done). */
static int transfer(struct hoff__backend *be, int dir, void *p, size_t size, hoff__event *after, hoff__event *done,
                    move_fn move, int node) {
    struct cuda_be *b = cbe(be);
    cudaStream_t s = copy_stream(b, dir);
    int saved, rc, rc2;

    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = wait_after(s, after, dir_name(dir));
    if (rc == 0)
        rc = move(b, p, size, s, node);
    rc2 = record_done(s, done, dir_name(dir));
    hoff__cuda_dev_leave(b, saved);
    return rc ? rc : rc2;
}

static int move_evict(struct cuda_be *b, void *p, size_t size, cudaStream_t s, int node) {
    struct cudaMemLocation loc = {.type = cudaMemLocationTypeHostNuma, .id = node};

    return node < 0 ? prefetch_host(b, p, size, s) : prefetch_host_to(b, loc, p, size, s);
}

/* The preferred location is the device for the mapping's whole life (see
 * the policy in cuda_be.h): no advice to change here. */
static int move_prefetch(struct cuda_be *b, void *p, size_t size, cudaStream_t s, int node) {
    return prefetch_device(b, p, size, s);
}

static int move_discard(struct cuda_be *b, void *p, size_t size, cudaStream_t s, int node) {
#if HAVE_DECL_CUDAMEMDISCARDBATCHASYNC
    if (__atomic_load_n(&b->discard_ok, __ATOMIC_RELAXED)) {
        cudaError_t e = discard_one(p, size, s);
        int rc;

        if (e == cudaSuccess)
            return 0;
        (void)cudaGetLastError();
        /* Fall back to an eviction; stop asking if that works (the driver
         * does not take discards, not this range is wrong). */
        rc = prefetch_host(b, p, size, s);
        if (rc == 0) {
            __atomic_store_n(&b->discard_ok, 0, __ATOMIC_RELAXED);
            count(&b->cnt.discard_fallbacks);
            hoff__log(HOFF_LOG_WARN,
                      "cuda: cudaMemDiscardBatchAsync refused (%s); "
                      "discards evict to the host from now on (discard_fallbacks)",
                      cudaGetErrorString(e));
        }
        return rc;
    }
#endif
    /* Contents are undefined after a discard, so moving the old bytes to the
     * host meets the contract. */
    count(&b->cnt.discard_fallbacks);
    return prefetch_host(b, p, size, s);
}

int hoff__cuda_evict(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    return transfer(be, HOFF__XFER_D2H, p, size, after, done, move_evict, -1);
}

/* Evict to host NUMA node `node` (the host tier's choice: interleave or a
 * node list); -1 is the backend's own choice. */
int hoff__cuda_evict_node(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after,
                          hoff__event *done) {
    return transfer(be, HOFF__XFER_D2H, p, size, after, done, move_evict, node);
}

int hoff__cuda_prefetch(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    return transfer(be, HOFF__XFER_H2D, p, size, after, done, move_prefetch, -1);
}

int hoff__cuda_discard(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    return transfer(be, HOFF__XFER_D2H, p, size, after, done, move_discard, -1);
}

/* The host copy of an evicted mapping is the mapping itself: the CPU reads
 * host-resident managed pages in place. */
int hoff__cuda_host_bytes(struct hoff__backend *be, void *p, size_t size, void **host) {
    (void)be;
    (void)size;
    *host = p;
    return 0;
}

int hoff__cuda_host_make(struct hoff__backend *be, void *p, size_t size, void **host) {
    (void)be;
    (void)size;
    *host = p; /* CPU writes populate the pages on the host */
    return 0;
}

/* Spilled: drop the host pages (a discard on the drop stream, waited for on
 * the tier thread; nothing else is queued there). */
int hoff__cuda_host_drop(struct hoff__backend *be, void *p, size_t size) {
    struct cuda_be *b = cbe(be);
    int saved, rc = 0;

    if (!__atomic_load_n(&b->drop_ok, __ATOMIC_RELAXED)) {
        count(&b->cnt.drop_refusals);
        return 0;
    }
#if HAVE_DECL_CUDAMEMDISCARDBATCHASYNC
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    {
        cudaError_t e = discard_one(p, size, b->drop);

        if (e == cudaSuccess)
            e = cudaStreamSynchronize(b->drop);
        if (e != cudaSuccess) {
            /* The copy on the NVMe tier is good; only the host pages stay.
             * Do not ask again for every spill. */
            (void)cudaGetLastError();
            __atomic_store_n(&b->drop_ok, 0, __ATOMIC_RELAXED);
            count(&b->cnt.drop_refusals);
            hoff__log(HOFF_LOG_WARN,
                      "cuda: cudaMemDiscardBatchAsync(%p, %zu) of a spilled block's host "
                      "pages refused (%s); spilled blocks keep their host pages from now on "
                      "(host_drop_refusals)",
                      p, size, cudaGetErrorString(e));
        }
    }
    hoff__cuda_dev_leave(b, saved);
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

/* A block used while away: page it in with one prefetch on the user's
 * stream, ordered before the kernels that use it, rather than leave the
 * driver to fault it in 64 KiB at a time behind hoff's books (the preferred
 * location, the device, is the fallback if this fails).  The caller's thread
 * pays the call; the stream waits for the copy (the sim's stall). */
int hoff__cuda_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream s, uint64_t *stall_ns) {
    struct cuda_be *b = cbe(be);
    int saved, rc;

    if (stall_ns)
        *stall_ns = 0;
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = prefetch_device(b, p, size, cstream(s));
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

/* Work queued on s from now on waits for what is queued on the D2H stream
 * so far (a populate's discard: a write concurrent with it is undefined). */
static int order_after_d2h(struct cuda_be *b, hoff_stream s) {
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);

    if (e != cudaSuccess)
        return hoff__cuda_fail(e, "cudaEventCreateWithFlags(populate's fence)");
    e = cudaEventRecord(ev, b->d2h);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(cstream(s), ev, 0);
    if (cudaEventDestroy(ev) != cudaSuccess) /* released once it completes */
        (void)cudaGetLastError();
    return e == cudaSuccess ? 0 : hoff__cuda_fail(e, "ordering stream %p after a populate", s);
}

int hoff__cuda_populate(struct hoff__backend *be, void *p, size_t size, hoff_stream s) {
    struct cuda_be *b = cbe(be);
    int saved, rc;

    rc = hoff__cuda_dev_enter(b, &saved);
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
        hoff__log(HOFF_LOG_WARN,
                  "cuda: cudaMemDiscardAndPrefetchBatchAsync refused (%s); discarded blocks "
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
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

#else /* !HAVE_CUDA */

typedef int hoff__cuda_unused; /* an empty translation unit is not ISO C */

#endif
