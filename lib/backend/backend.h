/* backend.h — the table of functions every backend (sim, cuda) implements.
 * Threading: a backend is shared by the calling threads and the issuing thread; each op is thread safe. */
#ifndef HOFF_BACKEND_H
#define HOFF_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/xfer.h"
#include "hoff.h"

/* 2 MiB: the driver's migration unit; managed blocks are multiples of it. */
#define HOFF__MANAGED_GRAIN ((size_t)2 << 20)
/* Device-pool allocations are multiples of this. */
#define HOFF__DEVICE_GRAIN ((size_t)512)

typedef struct hoff__event hoff__event; /* defined by each backend */
struct hoff__backend;

/* The copy direction a transfer runs in (its copy stream or engine). */
enum hoff__xfer_dir { HOFF__XFER_D2H = 0, HOFF__XFER_H2D = 1 };

/* What a backend had to give up on, for the statistics (all counts). */
struct hoff__be_counters {
    uint64_t numa_refusals;     /* evictions the driver refused at a host NUMA node: that node's
                                   evictions go to plain host memory from then on */
    uint64_t discard_fallbacks; /* discards done as evictions (the driver refused the discard, or the
                                   toolkit has none) */
    uint64_t drop_refusals;     /* host copies of spilled blocks the driver would not drop: they keep
                                   their host pages */
};

/* Every op returns 0 or -errno unless said otherwise.  "after" may be NULL
 * (no ordering); "done" may be NULL (nobody waits). */
struct hoff__backend_ops {
    const char *name;
    void (*close)(struct hoff__backend *be);

    /* Device memory: what is free and the total, in bytes. */
    int (*mem_info)(struct hoff__backend *be, uint64_t *free_b, uint64_t *total_b);

    /* Plain device memory (size a multiple of HOFF__DEVICE_GRAIN). */
    int (*dev_alloc)(struct hoff__backend *be, size_t size, void **out);
    int (*dev_free)(struct hoff__backend *be, void *p, size_t size);

    /* Managed memory: size a multiple of HOFF__MANAGED_GRAIN, the result
     * aligned to it.  A new mapping is resident on the device, contents
     * undefined.  managed_free takes the exact (p, size) of a mapping. */
    int (*managed_alloc)(struct hoff__backend *be, size_t size, void **out);
    int (*managed_free)(struct hoff__backend *be, void *p, size_t size);

    /* Events: points on a stream's timeline. */
    int (*event_create)(struct hoff__backend *be, hoff__event **out);
    void (*event_destroy)(struct hoff__backend *be, hoff__event *ev);
    int (*event_record)(struct hoff__backend *be, hoff__event *ev, hoff_stream s);
    /* 0 when complete, -EAGAIN while pending, -errno on error. */
    int (*event_query)(struct hoff__backend *be, hoff__event *ev);
    /* Host waits for ev (sim: the virtual clock advances to it). */
    int (*event_sync)(struct hoff__backend *be, hoff__event *ev);
    /* Later work on stream s waits for ev (sim: the stall is added to s). */
    int (*stream_wait)(struct hoff__backend *be, hoff_stream s, hoff__event *ev);
    /* An event that can be timed (the others may skip timing, which is
     * cheaper), and the device time from a to b, both recorded and complete
     * (-EAGAIN if not yet). */
    int (*event_create_timed)(struct hoff__backend *be, hoff__event **out);
    int (*event_elapsed_ns)(struct hoff__backend *be, hoff__event *a, hoff__event *b, uint64_t *ns);

    /* Transfers of a range of managed memory: a whole mapping (p, size as
     * from managed_alloc) or any range of whole 2 MiB pages inside one (a
     * group of blocks laid out in one mapping moves with one call), called
     * only from the issuing thread.  Each waits for "after", runs on
     * the backend's copy stream for its direction, and records "done" when
     * complete.  evict: device -> host (prefetch to a host location and
     * advise); prefetch: host -> device; discard: drop the device pages
     * without a copy (contents undefined afterwards). */
    int (*evict)(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
    int (*prefetch)(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
    int (*discard)(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);

    /* The next transfer in direction dir (enum hoff__xfer_dir: evict and
     * discard run D2H, prefetch H2D) from this thread also waits for ev: a
     * range used on several streams is fenced after each of them.  Called
     * only from the issuing thread, right before the transfer. */
    int (*transfer_wait)(struct hoff__backend *be, int dir, hoff__event *ev);

    /* Bind the calling thread to the backend's device for good (cuda:
     * cudaSetDevice once); hoff's own threads (issuing, tier) call it when
     * they start, so they never switch devices and never touch another
     * device's context.  NULL where there is nothing to do. */
    int (*bind_thread)(struct hoff__backend *be);

    /* The backend's degradations (NULL: none counted). */
    int (*counters)(struct hoff__backend *be, struct hoff__be_counters *out);

    /* Use windows (doc/design.md): work on stream s that uses the range may
     * run from window_open until window_close; nothing may move or drop the
     * range in between, and a move after it must be ordered after the
     * close ("after" recorded no earlier).  The sim checks every evict and
     * discard against them and counts a breach in window_violations (the
     * move still happens, so a test sees its effect); NULL where a backend
     * keeps no such books. */
    int (*window_open)(struct hoff__backend *be, void *p, size_t size, hoff_stream s);
    int (*window_close)(struct hoff__backend *be, void *p, size_t size);

    /* fault, populate and the tier ops below take ranges as the transfers do.
     * A mapping that is not resident is used by work on stream s: page it in
     * before that work (sim: now; cuda: a prefetch on s).  *stall_ns gets the
     * time s waited (sim; 0 on cuda, where s itself waits). */
    int (*fault)(struct hoff__backend *be, void *p, size_t size, hoff_stream s, uint64_t *stall_ns);
    /* Make a discarded mapping resident again with undefined contents; work
     * queued on stream s from now on (the block's new user) is ordered
     * after it, since a write concurrent with a discard is undefined. */
    int (*populate)(struct hoff__backend *be, void *p, size_t size, hoff_stream s);

    /* Copy n bytes between host memory and any hoff memory (tests, tools);
     * synchronous. */
    int (*memcpy)(struct hoff__backend *be, void *dst, const void *src, size_t n);

    /* Wait for everything on every stream and copy engine. */
    int (*sync)(struct hoff__backend *be);
    /* Is stream s being captured into a CUDA graph (cudaStreamIsCapturing)?
     * 1 yes, 0 no, -errno when it cannot tell.  NULL: never (sim). */
    int (*stream_capturing)(struct hoff__backend *be, hoff_stream s);
    /* Nanoseconds on the backend's clock (sim: virtual, cuda: CLOCK_MONOTONIC). */
    uint64_t (*clock_ns)(struct hoff__backend *be);
    /* sim: compute on s for ns of virtual time.  cuda: -ENOTSUP. */
    int (*compute)(struct hoff__backend *be, hoff_stream s, uint64_t ns);

    /* The host and NVMe tiers (all may be NULL where a backend has nothing
     * to do).  evict_node: evict to host NUMA node `node` (the host tier's
     * choice).  host_bytes: where the host copy of an evicted mapping is, for
     * the NVMe tier to read (sim: its shadow; cuda: the managed pointer
     * itself).  host_drop: the host copy is spilled, free its memory.
     * host_make: make room for a host copy to restore into.  nvme_model: sim
     * only, account a write (write != 0) or read of bytes on the simulated
     * NVMe after `after`, recording `done` when it would complete.  Called
     * from hoff's tier thread, never while another op runs on the mapping. */
    int (*evict_node)(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after, hoff__event *done);
    int (*host_bytes)(struct hoff__backend *be, void *p, size_t size, void **host);
    int (*host_drop)(struct hoff__backend *be, void *p, size_t size);
    int (*host_make)(struct hoff__backend *be, void *p, size_t size, void **host);
    int (*nvme_model)(struct hoff__backend *be, uint64_t bytes, int write, hoff__event *after, hoff__event *done);
    /* The GPU's PCI bus id ("0000:41:00.0"), for NUMA placement; NULL on sim. */
    int (*pci_bus_id)(struct hoff__backend *be, char *buf, size_t len);
};

struct hoff__backend {
    const struct hoff__backend_ops *ops;
};

/* Open a backend.  -ENODEV where it cannot run (no GPU, or built without
 * CUDA: hoff__backend_open_cuda then always fails with -ENODEV). */
int hoff__backend_open_sim(const struct hoff_config *cfg, struct hoff__backend **out);
int hoff__backend_open_cuda(const struct hoff_config *cfg, struct hoff__backend **out);
/* The calling thread's current CUDA device (cudaGetDevice: creates no
 * context), or -ENODEV without CUDA or a device. */
int hoff__cuda_current_device(void);

/* sim only: counters for tests and reports (zero on other backends). */
struct hoff__sim_counters {
    uint64_t now_ns;         /* virtual clock */
    uint64_t d2h_busy_until; /* D2H copy engine free from */
    uint64_t h2d_busy_until; /* H2D copy engine free from */
    uint64_t device_used;    /* dev pool + resident managed bytes */
    uint64_t peak_device_used;
    uint64_t bytes_d2h, bytes_h2d, bytes_faulted;
    uint64_t faults, fault_stall_ns, wait_stall_ns;
    uint64_t over_capacity;   /* times device_used exceeded capacity */
    uint64_t nvme_busy_until; /* the simulated NVMe is free from */
    uint64_t bytes_nvme_written, bytes_nvme_read;
    uint64_t issuer_busy_until; /* the issuing thread is done with its last call at */
    uint64_t transfer_calls;    /* evict, prefetch and discard calls */
    uint64_t window_violations; /* evicts and discards of a range inside an open use
                                   window, or not ordered after its close */
};
int hoff__sim_counters(struct hoff__backend *be, struct hoff__sim_counters *out);
/* sim only: call fn(arg, x) for each transfer call, page-in and wait the sim
 * models, as it models it (on the virtual clock; core/xfer.h), under the
 * sim's lock (fn must not call the backend); NULL stops.  0, or -ENOTSUP on
 * another backend. */
int hoff__sim_observe(struct hoff__backend *be, hoff__xfer_observer fn, void *arg);
/* sim only, for tests: the n-th next change of a page's protection (the
 * mprotect calls of PROTECT mode) and the count - 1 after it fail with
 * ENOMEM, as they do when the process reaches vm.max_map_count; later ones
 * succeed.  n = 0 or count = 0 disarms.  Unset, it costs one test of an int
 * per change.  0, or -ENOTSUP on another backend. */
int hoff__sim_test_fail_protect(struct hoff__backend *be, unsigned n, unsigned count);

#endif
