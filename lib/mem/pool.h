/* pool.h — a caching pool of blocks with size classes and stream-ordered reuse (one per kind: device, managed).
 * Threading: not synchronised; the caller holds the context lock. */
#ifndef HOFF_POOL_H
#define HOFF_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "mem/block.h"
#include "mem/sizeclass.h"

/* Classes up to this size are carved out of 2 MiB slab segments (device pool). */
#define HOFF__SLAB_MAX ((size_t)1 << 20)
#define HOFF__SLAB_SEG ((size_t)2 << 20)

struct hoff__pool_stream;
struct hoff__region;

/* The context's device and managed pools together (never the graph pool):
 * bytes handed out and bytes mapped, and the highest each has been since the
 * context began or the last hoff_reset_peaks (PyTorch's allocated and
 * reserved bytes and their peaks).  Kept by pool.c wherever a figure moves. */
struct hoff__pool_sum {
    uint64_t in_use, mapped;
    uint64_t peak_in_use, peak_mapped;
};

/* Called before the pool maps new memory: 0 to go ahead, -errno to refuse. */
typedef int (*hoff__pool_map_check)(void *arg, size_t bytes);

struct hoff__pool {
    int kind; /* enum hoff__pool_kind */
    struct hoff__backend *be;
    hoff__pool_map_check check;
    void *check_arg;
    struct hoff__pool_stream **streams; /* every stream that freed into the pool */
    size_t nstreams, cap_streams;
    struct hoff__pool_stream *last;               /* the last stream looked up */
    struct hoff__seg *segs;                       /* slab segments */
    struct hoff__seg *cur[HOFF__SIZECLASS_COUNT]; /* segment being carved, per class */
    struct hoff__block *spare;                    /* recycled descriptors */
    struct hoff__region *regions;                 /* group regions (managed pool) */
    struct hoff__pool_sum *sum;                   /* shared with the context's other main pool, or NULL */
    uint64_t mapped_bytes;                        /* bytes held from the backend */
    uint64_t in_use_bytes;                        /* bytes handed out */
    uint64_t cached_bytes;                        /* bytes in free lists */
    uint64_t hits, misses, cross_stream, flushes;
    uint64_t reuse_syncs; /* frees that waited for the device: more streams than fences */
    /* HOFF_FREE_FENCE=device (device pool), and a graph pool's blocks whose
     * graphs are gone (hoff__pool_reclaim, hoff__pool_put_deferred): a freed
     * block waits on `deferred` until hoff__pool_fence_all says the whole
     * device passed its free. */
    int defer;
    struct hoff__block *deferred;
    uint64_t deferred_bytes, deferred_frees;
    /* The graph-private pool (hoff__pool_init_graph): whole mappings only,
     * reuse on the free's own stream only (no event is recorded or queried,
     * which a capturing stream would not allow), and blocks retired
     * (hoff__pool_retire) once the graph may replay into them, until the
     * graph's pool is released (hoff__pool_reclaim). */
    int graph;
    struct hoff__block *retired;
    uint64_t retired_bytes;
    /* Which free block may serve the allocation being made (NULL: any), asked
     * of each cached block of the stream's class, newest first; a graph pool's
     * (core/ctx_graph.c): one of the same graph pool, or one whose graphs are
     * gone, never another live pool's (hoff__pool_set_reuse). */
    int (*reuse_ok)(const struct hoff__block *b, void *arg);
    void *reuse_arg;
};

void hoff__pool_init(struct hoff__pool *p, int kind, struct hoff__backend *be, hoff__pool_map_check check,
                     void *check_arg);
/* A device pool for allocations made during CUDA graph capture (see
 * struct hoff__pool's `graph`). */
void hoff__pool_init_graph(struct hoff__pool *p, struct hoff__backend *be, hoff__pool_map_check check, void *check_arg);
/* Set the pool's reuse_ok test and its argument (see struct hoff__pool). */
void hoff__pool_set_reuse(struct hoff__pool *p, int (*ok)(const struct hoff__block *b, void *arg), void *arg);
/* Keep b (handed out from a graph pool) mapped and out of every list until
 * hoff__pool_destroy: a captured graph may still replay into it. */
void hoff__pool_retire(struct hoff__pool *p, struct hoff__block *b);
/* The graphs of pool id (a block's gpool, never {0, 0}) are gone: every
 * retired block of that pool waits on `deferred` for a device-wide
 * synchronisation (hoff__pool_fence_all), then goes back to the free lists
 * (reused by later captures only).  Returns the bytes. */
uint64_t hoff__pool_reclaim(struct hoff__pool *p, const uint64_t id[2]);
/* Return b, freed on stream s, to the cache only after a device-wide
 * synchronisation that begins after now (hoff__pool_fence_all), whatever
 * `defer` says: work on any stream may still use it. */
void hoff__pool_put_deferred(struct hoff__pool *p, struct hoff__block *b, hoff_stream s);
/* Release everything (blocks still handed out are released too). */
void hoff__pool_destroy(struct hoff__pool *p);

/* Class (and so usable size) a request of size bytes gets in this pool, or -1. */
int hoff__pool_class(const struct hoff__pool *p, size_t size);
/* The bytes a request of size bytes holds in a pool of this kind (its class
 * size; at least 2 MiB in the managed pool): what the budget counts, and so
 * what planners must count.  0 when out of range. */
uint64_t hoff__pool_block_bytes(int kind, uint64_t size);

/* A block of class cls for use on stream s: from the cache when one is free
 * on s or fenced on another stream, else newly mapped.  NULL and *err set on
 * failure (-ENOMEM, -EOVERFLOW from the map check, ...). */
struct hoff__block *hoff__pool_get(struct hoff__pool *p, int cls, hoff_stream s, int *err);
/* Return a block freed on stream s to the cache. */
int hoff__pool_put(struct hoff__pool *p, struct hoff__block *b, hoff_stream s);
/* Every free so far is known complete (the caller synchronised the device):
 * deferred frees become reusable too. */
void hoff__pool_fence_all(struct hoff__pool *p);
/* Give every cached block back to the backend (call after hoff__pool_fence_all);
 * returns the bytes released. */
uint64_t hoff__pool_trim(struct hoff__pool *p);
/* hoff__pool_trim of the whole-mapping blocks for which may_unmap says yes
 * only (a graph pool: those no live graph can replay into). */
uint64_t hoff__pool_trim_if(struct hoff__pool *p, int (*may_unmap)(const struct hoff__block *b, void *arg), void *arg);

/* Regions (managed pool): one mapping holding the blocks of a group at fixed
 * offsets, so that the group moves with one transfer call.  A region of size
 * bytes has nslots slots, slot i at off[i] holding bytes[i] (multiples of
 * the 2 MiB grain, non-overlapping, inside size).  It is mapped through the
 * map check like any new memory.  0 or -errno (-EINVAL, -ENOMEM, the
 * check's -EOVERFLOW). */
int hoff__pool_region_map(struct hoff__pool *p, size_t size, unsigned nslots, const uint64_t *off,
                          const uint64_t *bytes, struct hoff__region **out);
/* The block of slot i for use on stream s, as hoff__pool_get hands out a
 * block of class cls (which must hold the slot's bytes).  Its descriptor is
 * the slot's own across uses, so it keeps its residency state like a cached
 * block.  NULL and *err: -EINVAL (no such slot, other size, a released
 * region), -EBUSY (handed out already), -EAGAIN (freed on another stream
 * that has not passed the free yet).  hoff__pool_put takes it back to its
 * slot, never to a free list. */
struct hoff__block *hoff__pool_region_get(struct hoff__pool *p, struct hoff__region *r, unsigned i, int cls,
                                          hoff_stream s, int *err);
/* The descriptor of slot i (NULL before its first use): while it is handed
 * out, and after a free whose transfer has not landed yet. */
struct hoff__block *hoff__pool_region_slot(const struct hoff__region *r, unsigned i);
/* Where the region is and how large. */
void *hoff__pool_region_base(const struct hoff__region *r);
size_t hoff__pool_region_size(const struct hoff__region *r);
/* The owner lets go of r: it is unmapped now when no slot is handed out, else
 * when the last one comes back. */
void hoff__pool_region_release(struct hoff__pool *p, struct hoff__region *r);

#endif
