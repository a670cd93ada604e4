/* cuda_be.h — the cuda backend's internals, shared by its files and by nothing else (named so as not
 * to be taken for the toolkit's own cuda.h): its policy (below), its state (struct cuda_be), and what
 * its files share: cuda.c (open: probing the device; close; the function table; error conversion and
 * making the device current), cuda_mem.c (plain and managed memory, the mapping table), cuda_event.c
 * (events and stream ordering, sync, the clock), cuda_xfer.c (the transfers: evict, prefetch,
 * discard, fault, populate, the tiers' host pages).  Include it only under HAVE_CUDA.
 * Threading: every op may be called from any thread (cuda.c: how the device is made current for
 * it); the mapping table is under b->lock, the flags and counters are atomics, the rest is fixed
 * at open. */
#ifndef HOFF_BACKEND_CUDA_BE_H
#define HOFF_BACKEND_CUDA_BE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "core/core.h"

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

#if CUDART_VERSION >= 13000
#define cuda_prefetch_ cudaMemPrefetchAsync
#define cuda_advise_ cudaMemAdvise
#elif CUDART_VERSION >= 12020
#define cuda_prefetch_ cudaMemPrefetchAsync_v2
#define cuda_advise_ cudaMemAdvise_v2
#else
#error \
    "the cuda backend needs CUDA 12.2 or later (cudaMemPrefetchAsync with a cudaMemLocation); configure --without-cuda"
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
    cudaStream_t d2h, h2d; /* copy streams, highest priority, non-blocking */
    cudaStream_t pop;      /* managed_alloc's initial prefetch */
    cudaStream_t drop;     /* host_drop's discards (the tier thread's alone) */
    struct cudaMemLocation dev_loc;
    struct cudaMemLocation host_loc;    /* HostNuma(node) or Host */
    uint64_t numa_bad[NUMA_NODES / 64]; /* atomic bits: the driver refused these nodes */
    int discard_ok;                     /* atomic: 0 once cudaMemDiscardBatchAsync was refused */
    int drop_ok;                        /* atomic: 0 once a discard of a spilled block's host pages was refused */
    int dap_ok;                         /* atomic: 0 once cudaMemDiscardAndPrefetchBatchAsync was refused */
    struct hoff__be_counters cnt;       /* atomics */
    pthread_mutex_t lock;               /* the mapping table */
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

/* cuda.c: convert a failed call's error e to -ENOMEM or -EIO with a message (fmt names the call) and
 * clear the runtime's last error; make the backend's device current on this thread (*saved: the
 * device to restore, -1 none) and restore it. */
int hoff__cuda_fail(cudaError_t e, const char *fmt, ...) HOFF__PRINTF(2, 3);
int hoff__cuda_dev_enter(struct cuda_be *b, int *saved);
void hoff__cuda_dev_leave(struct cuda_be *b, int saved);

/* cuda_mem.c: free a managed mapping as cudaMallocManaged returned it (base). */
void hoff__cuda_managed_release(void *base);

/* cuda_xfer.c: a cudaMemLocation in words, in buf. */
const char *hoff__cuda_loc_text(struct cudaMemLocation loc, char *buf, size_t len);

/* The ops (struct hoff__backend_ops in backend/backend.h says what each does), by file. */
/* cuda_mem.c */
int hoff__cuda_mem_info(struct hoff__backend *be, uint64_t *free_b, uint64_t *total_b);
int hoff__cuda_dev_alloc(struct hoff__backend *be, size_t size, void **out);
int hoff__cuda_dev_free(struct hoff__backend *be, void *p, size_t size);
int hoff__cuda_managed_alloc(struct hoff__backend *be, size_t size, void **out);
int hoff__cuda_managed_free(struct hoff__backend *be, void *p, size_t size);
int hoff__cuda_memcpy(struct hoff__backend *be, void *dst, const void *src, size_t n);
/* cuda_event.c */
int hoff__cuda_event_create(struct hoff__backend *be, hoff__event **out);
int hoff__cuda_event_create_timed(struct hoff__backend *be, hoff__event **out);
int hoff__cuda_event_elapsed_ns(struct hoff__backend *be, hoff__event *a, hoff__event *z, uint64_t *ns);
void hoff__cuda_event_destroy(struct hoff__backend *be, hoff__event *ev);
int hoff__cuda_event_record(struct hoff__backend *be, hoff__event *ev, hoff_stream s);
int hoff__cuda_event_query(struct hoff__backend *be, hoff__event *ev);
int hoff__cuda_event_sync(struct hoff__backend *be, hoff__event *ev);
int hoff__cuda_stream_wait(struct hoff__backend *be, hoff_stream s, hoff__event *ev);
int hoff__cuda_stream_capturing(struct hoff__backend *be, hoff_stream s);
int hoff__cuda_sync(struct hoff__backend *be);
uint64_t hoff__cuda_clock_ns(struct hoff__backend *be);
int hoff__cuda_compute(struct hoff__backend *be, hoff_stream s, uint64_t ns);
/* cuda_xfer.c */
int hoff__cuda_transfer_wait(struct hoff__backend *be, int dir, hoff__event *ev);
int hoff__cuda_evict(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
int hoff__cuda_evict_node(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after,
                          hoff__event *done);
int hoff__cuda_prefetch(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
int hoff__cuda_discard(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
int hoff__cuda_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream s, uint64_t *stall_ns);
int hoff__cuda_populate(struct hoff__backend *be, void *p, size_t size, hoff_stream s);
int hoff__cuda_host_bytes(struct hoff__backend *be, void *p, size_t size, void **host);
int hoff__cuda_host_make(struct hoff__backend *be, void *p, size_t size, void **host);
int hoff__cuda_host_drop(struct hoff__backend *be, void *p, size_t size);

#endif
