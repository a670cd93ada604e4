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

/* Called before the pool maps new memory: 0 to go ahead, -errno to refuse. */
typedef int (*hoff__pool_map_check)(void *arg, size_t bytes);

struct hoff__pool {
    int kind;                         /* enum hoff__pool_kind */
    struct hoff__backend *be;
    hoff__pool_map_check check;
    void *check_arg;
    struct hoff__pool_stream **streams; /* every stream that freed into the pool */
    size_t nstreams, cap_streams;
    struct hoff__pool_stream *last;     /* the last stream looked up */
    struct hoff__seg *segs;             /* slab segments */
    struct hoff__seg *cur[HOFF__SIZECLASS_COUNT]; /* segment being carved, per class */
    struct hoff__block *spare;          /* recycled descriptors */
    uint64_t mapped_bytes;              /* bytes held from the backend */
    uint64_t in_use_bytes;              /* bytes handed out */
    uint64_t cached_bytes;              /* bytes in free lists */
    uint64_t hits, misses, cross_stream, flushes;
};

void hoff__pool_init(struct hoff__pool *p, int kind, struct hoff__backend *be,
                     hoff__pool_map_check check, void *check_arg);
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
/* Every free so far is known complete (the caller synchronised the device). */
void hoff__pool_fence_all(struct hoff__pool *p);
/* Give every cached block back to the backend (call after hoff__pool_fence_all);
 * returns the bytes released. */
uint64_t hoff__pool_trim(struct hoff__pool *p);

#endif
