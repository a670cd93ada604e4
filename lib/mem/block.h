/* block.h — the descriptor of one allocation (a block) shared by the pools, the block table and residency.
 * Threading: every field is guarded by the context lock, except `pending`, which the issuing thread also reads under
 * it. */
#ifndef HOFF_BLOCK_H
#define HOFF_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

enum hoff__pool_kind {
    HOFF__POOL_DEVICE = 0,  /* plain device memory, never offloaded */
    HOFF__POOL_MANAGED = 1, /* managed memory: offload candidates */
};

enum hoff__block_flags {
    HOFF__BLK_LIVE = 1u << 0,        /* handed out to the user */
    HOFF__BLK_PINNED = 1u << 1,      /* allocated inside a region: never evicted */
    HOFF__BLK_SLAB = 1u << 2,        /* a slot of a slab segment */
    HOFF__BLK_FREED = 1u << 3,       /* freed by the user while a transfer was in flight */
    HOFF__BLK_DISCARDING = 1u << 4,  /* the transfer in flight carries no contents: a discard (state
                                        EVICTING), or the prefetch of a discarded block (PREFETCHING: no
                                        host bytes, so none on the host count; residency.c) */
    HOFF__BLK_REGION = 1u << 5,      /* a slot of a group's region (pool.c): never on a free list */
    HOFF__BLK_SPILL_AFTER = 1u << 6, /* a planned spill waits for the eviction in flight to land
                                        (residency.c); dropped when the block is wanted back */
    HOFF__BLK_HOLD = 1u << 7,        /* on its way back to the device (residency.c, while room is
                                        made for it): never spilled for host room */
};

/* The streams a block remembers (struct hoff__block.streams). */
#define HOFF__BLOCK_STREAMS 4

struct hoff__seg;
struct hoff__region;
struct hoff__nvme_spill;
struct hoff_group;

struct hoff__block {
    void *ptr;
    size_t size;                     /* usable bytes (the class size) */
    size_t req;                      /* bytes asked for */
    uint8_t pool;                    /* enum hoff__pool_kind */
    uint8_t state;                   /* enum hoff_residency (managed blocks) */
    uint8_t flags;                   /* enum hoff__block_flags */
    uint8_t pending;                 /* commands queued at the issuer, not yet run (atomic) */
    int cls;                         /* size class */
    hoff_stream stream;              /* stream of the allocation, then of the free */
    uint64_t free_seq;               /* the free's number on its stream */
    uint64_t seq;                    /* allocation order */
    uint64_t tstep;                  /* the step it was allocated in (1-based; 0 = outside a step) */
    uint32_t tid;                    /* its block id in that step's trace */
    int xfer_rc;                     /* result of the last command run (atomic) */
    char *xfer_err;                  /* ...its message when it failed (malloc'd, from the thread that ran it;
                                        published with `pending`, consumed when the transfer is retired) */
    uint64_t t_issue;                /* backend clock when its transfer was issued */
    hoff__event *ev;                 /* completion of the block's last transfer */
    hoff__event *after;              /* the compute-stream point that transfer waits for */
    struct hoff__nvme_spill *spill;  /* its copy on the NVMe tier (state NVME, RESTORING) */
    struct hoff__block *next, *prev; /* free list while cached; LRU or in-flight
                                        list (residency) while live */
    struct hoff__seg *seg;           /* slab segment, for HOFF__BLK_SLAB */
    struct hoff__region *region;     /* its group's region, for HOFF__BLK_REGION */
    uint32_t slot;                   /* ...and its slot there */
    /* A transfer of several blocks with one call (a group, residency.c):
     * every member points to the member whose command carries the transfer
     * (`pending`, `xfer_rc`, `ev`), and the members are chained through
     * xnext; NULL outside such a transfer. */
    struct hoff__block *xlead, *xnext;
    /* Its use window (residency.c, doc/design.md): open from an access (or
     * its allocation) until the next op mark, its free or the step's end;
     * while open the block is on the context's list of open windows and
     * nothing moves it away or drops it.  use_stream: the stream of its last
     * access, which the fence of a later move (`after`) is recorded on. */
    uint8_t win;
    hoff_stream use_stream;
    struct hoff__block *wnext, *wprev;
    /* Every stream its work was queued on since it was handed out: the
     * allocation's, each access mark's, each hoff_record_stream's.  A move
     * away is fenced after all of them (`after` on use_stream, fence[i] on
     * the others); with more streams than fit (`streams_lost`) it waits for
     * the whole device instead (counted in fence_syncs). */
    uint8_t nstreams;
    uint8_t streams_lost;
    hoff_stream streams[HOFF__BLOCK_STREAMS];
    hoff__event *fence[HOFF__BLOCK_STREAMS];
    /* Freed while other streams than the free's had used it (pool.c): the
     * first nreuse fences mark their work at the free, and the next owner's
     * stream waits for them when the block is handed out again. */
    uint8_t nreuse;
    /* Allocated while its stream was capturing a CUDA graph: it belongs to
     * the graph-private pool (pool.c), never to the other pools' lists.
     * gpool: the framework's id of the graphs' memory pool it was allocated
     * for (PyTorch's MempoolId_t; hoff_torch_graph_pool_use), {0, 0} when
     * none was named; meaningful only with `graph`. */
    uint8_t graph;
    uint64_t gpool[2];
    /* The manual swap group it belongs to (swapgroup.c), or NULL: such a
     * block is moved only by its group, never by the plan or the online
     * policy; mslot is its index in the group's member array. */
    struct hoff_group *mgroup;
    uint32_t mslot;
    /* Kept (hoff_keep): not an activation; a managed block that is kept is
     * pinned on the device and out of the budget's books (res.kept instead of
     * res.resident) until its free.  moved: it was evicted since it was
     * handed out (a kept block that had been is counted in kept_evicted). */
    uint8_t kept;
    uint8_t moved;
};

#endif
