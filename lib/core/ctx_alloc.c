/* ctx_alloc.c — the allocation entry points: hoff_malloc (the offload-candidate rule that picks the pool, the
 * graph pool during a CUDA graph capture, the out-of-memory retry), hoff_free (frees deferred past a capture; a
 * graph block's fate is ctx_graph.c's), hoff_record_stream, hoff_block_size and hoff_empty_cache.
 * Threading: every entry point takes ctx->lock (one lock per context: the pools, table and residency share it). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/core.h"
#include "core/grow.h"
#include "core/ctx_impl.h"
#include "core/publish.h"

/* --- allocation ------------------------------------------------------------ */

/* The offload-candidate rule (doc/design.md, "Two pools"): inside a step,
 * outside every region, at least managed_min bytes, and on the step's
 * stream when hoff_step_stream named one.  A block the recorded step kept
 * (hoff_keep: a gradient, an optimizer's block; `kept`) goes to the device
 * pool instead, unless the caller takes candidates only (the sim preload:
 * then it stays managed, kept from its allocation; hoff_malloc_flags). */
static int choose_pool(struct hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags, int kept) {
    if (flags & HOFF_ALLOC_DEVICE)
        return HOFF__POOL_DEVICE;
    if (flags & HOFF_ALLOC_MANAGED)
        return HOFF__POOL_MANAGED;
    if (ctx->in_step && !ctx->region_depth && size >= ctx->cfg.managed_min_bytes) {
        if (ctx->step_stream_set && stream != ctx->step_stream) {
            HOFF__STAT_ADD(&ctx->st, side_stream_allocs, 1);
            return HOFF__POOL_DEVICE;
        }
        if (kept && !(flags & HOFF_ALLOC_CANDIDATE)) {
            HOFF__STAT_ADD(&ctx->st, kept_allocs, 1);
            return HOFF__POOL_DEVICE;
        }
        return HOFF__POOL_MANAGED;
    }
    return HOFF__POOL_DEVICE;
}

/* Is stream s capturing a CUDA graph?  An answer the backend cannot give
 * counts as yes: the safe side (device pool, no events on s). */
static int capturing(struct hoff_ctx *ctx, hoff_stream s) {
    return ctx->mem.be->ops->stream_capturing && ctx->mem.be->ops->stream_capturing(ctx->mem.be, s) != 0;
}

/* HOFF_FREE_FENCE=device: wait for the whole device, then the deferred
 * frees are safe to reuse. */
void hoff__ctx_release_deferred(struct hoff_ctx *ctx) {
    int graph = ctx->mem.graph_pool.deferred != NULL && !ctx->captures_open;

    if (!ctx->mem.pools[HOFF__POOL_DEVICE].deferred && !graph)
        return;
    if (ctx->mem.be->ops->sync(ctx->mem.be) != 0 && graph)
        graph = 0; /* a reclaimed graph block is never reused without the sync */
    hoff__pool_fence_all(&ctx->mem.pools[HOFF__POOL_DEVICE]);
    if (graph) /* the released graphs' blocks too (ctx_graph.c) */
        hoff__ctx_graph_fenced(ctx, 0);
    HOFF__STAT_ADD(&ctx->st, free_fence_syncs, 1);
}

/* Wait for the device and give every cached block back to the backend:
 * the graph pool's too, those of pools whose graphs are gone (ctx_graph.c). */
static void flush_cache(struct hoff_ctx *ctx) {
    int deferred = ctx->mem.pools[HOFF__POOL_DEVICE].deferred != NULL || ctx->mem.graph_pool.deferred != NULL;
    int rc = hoff__ctx_settle(ctx);

    hoff__pool_fence_all(&ctx->mem.pools[0]);
    hoff__pool_fence_all(&ctx->mem.pools[1]);
    hoff__pool_trim(&ctx->mem.pools[0]);
    hoff__pool_trim(&ctx->mem.pools[1]);
    if (rc == 0 && !ctx->captures_open)
        hoff__ctx_graph_fenced(ctx, 1);
    if (deferred)
        HOFF__STAT_ADD(&ctx->st, free_fence_syncs, 1);
    HOFF__STAT_ADD(&ctx->st, cache_flushes, 1);
}

static void free_block(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream stream);

/* Frees made while their stream captured, whose capture is over now. */
static void drain_capfree(struct hoff_ctx *ctx) {
    size_t i = 0;

    while (i < ctx->ncapfree) {
        struct hoff__capfree c = ctx->capfree[i];

        if (capturing(ctx, c.s)) {
            i++;
            continue;
        }
        ctx->capfree[i] = ctx->capfree[--ctx->ncapfree];
        free_block(ctx, c.b, c.s);
    }
}

/* An allocation on a stream that is capturing a graph: always the graph
 * pool (managed memory cannot be captured, and the pipeline's events on s
 * would join hoff's copy streams to the capture).  Caller holds the lock;
 * this releases it. */
static void *capture_alloc(struct hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags, size_t *bytes) {
    struct hoff__block *b;
    int cls, err;

    if (flags & HOFF_ALLOC_CANDIDATE) {
        UNLOCK(ctx); /* never an offload candidate: the caller's other allocator takes it */
        errno = EAGAIN;
        return NULL;
    }
    if (flags & HOFF_ALLOC_MANAGED) {
        UNLOCK(ctx);
        errno = ENOTSUP;
        hoff__error(-ENOTSUP,
                    "hoff_malloc: managed memory asked for on stream %p while it captures a CUDA "
                    "graph; managed memory cannot be captured (use HOFF_ALLOC_AUTO or DEVICE)",
                    (void *)stream);
        return NULL;
    }
    cls = hoff__pool_class(&ctx->mem.graph_pool, size);
    b = cls < 0 ? NULL : hoff__pool_get(&ctx->mem.graph_pool, cls, stream, &err);
    if (cls < 0)
        err = -ENOMEM;
    if (b && (err = hoff__bt_insert(&ctx->mem.table, b->ptr, b)) != 0) {
        hoff__pool_retire(&ctx->mem.graph_pool, b);
        b = NULL;
    }
    if (!b) {
        HOFF__STAT_ADD(&ctx->st, alloc_failures, 1);
        UNLOCK(ctx);
        errno = -err;
        if (err != -EOVERFLOW)
            hoff__error(err, "hoff_malloc: cannot allocate %zu bytes during graph capture: %s", size,
                        hoff_strerror(err));
        return NULL;
    }
    b->req = size;
    b->seq = ++ctx->alloc_seq;
    b->graph = 1;
    hoff__graph_pool_tag(b); /* the pool the framework said this thread captures for (ctx_graph.c) */
    HOFF__STAT_ADD(&ctx->st, allocs, 1);
    HOFF__STAT_ADD(&ctx->st, capture_allocs, 1);
    if (bytes)
        *bytes = b->size;
    UNLOCK(ctx);
    return b->ptr;
}

void *hoff__malloc_sized(struct hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags, size_t *bytes) {
    struct hoff__event_info e;
    struct hoff__block *b;
    struct hoff__pool *p;
    int kind, cls, err, kept;

    if (!ctx) {
        errno = EINVAL;
        hoff__error(-EINVAL, "hoff_malloc: NULL context");
        return NULL;
    }
    LOCK(ctx);
    if (capturing(ctx, stream))
        return capture_alloc(ctx, size, stream, flags, bytes);
    if (ctx->ncapfree)
        drain_capfree(ctx);
    kept = hoff__pipe_kept_next(ctx, size);
    kind = choose_pool(ctx, size, stream, flags, kept);
    if ((flags & HOFF_ALLOC_CANDIDATE) && kind != HOFF__POOL_MANAGED) {
        UNLOCK(ctx); /* not an offload candidate: the caller's other allocator takes it */
        errno = EAGAIN;
        return NULL;
    }
    p = &ctx->mem.pools[kind];
    cls = hoff__pool_class(p, size);
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_ALLOC;
    e.pool = kind;
    e.pinned = kind == HOFF__POOL_MANAGED && ctx->region_depth;
    e.size = size;
    e.stream = stream;
    if (cls < 0) {
        UNLOCK(ctx);
        errno = ENOMEM;
        hoff__error(-ENOMEM, "hoff_malloc: %zu bytes is more than the largest block (%zu)", size,
                    (size_t)HOFF__SIZECLASS_MAX_BYTES);
        return NULL;
    }
    if (ctx->mem.res.inf_head)
        hoff__res_poll(&ctx->mem);
    hoff__pipe_before(ctx, &e);
    b = kind == HOFF__POOL_MANAGED ? hoff__pipe_alloc(ctx, &e, cls) : NULL; /* a group's slot */
    if (!b)
        b = hoff__pool_get(p, cls, stream, &err);
    if (!b && (err == -ENOMEM || err == -EOVERFLOW)) {
        flush_cache(ctx); /* out of memory: release the cache and retry once */
        b = hoff__pool_get(p, cls, stream, &err);
    }
    if (!b)
        goto fail;
    b->req = size;
    b->seq = ++ctx->alloc_seq;
    b->kept = 0;
    if (kind == HOFF__POOL_MANAGED && ctx->region_depth)
        b->flags |= HOFF__BLK_PINNED;
    if (kind == HOFF__POOL_MANAGED && kept) { /* kept from its allocation: pinned, outside the budget */
        b->kept = 1;
        b->flags |= HOFF__BLK_PINNED;
        HOFF__STAT_ADD(&ctx->st, kept_allocs, 1);
    }
    if (kind == HOFF__POOL_MANAGED && (err = hoff__res_on_alloc(&ctx->mem, b, stream)) != 0) {
        hoff__pool_put(p, b, stream);
        goto fail;
    }
    if ((err = hoff__bt_insert(&ctx->mem.table, b->ptr, b)) != 0) {
        if (kind == HOFF__POOL_MANAGED)
            hoff__res_on_free(&ctx->mem, b);
        hoff__pool_put(p, b, stream);
        goto fail;
    }
    HOFF__STAT_ADD(&ctx->st, allocs, 1);
    b->tstep = 0;
    e.b = b;
    hoff__pipe_after(ctx, &e);
    hoff__publish_tick(ctx, &ctx->st.allocs);
    if (bytes)
        *bytes = b->size;
    UNLOCK(ctx);
    return b->ptr;
fail:
    HOFF__STAT_ADD(&ctx->st, alloc_failures, 1);
    UNLOCK(ctx);
    errno = -err;
    if (err != -EOVERFLOW) /* the guard has said why already */
        hoff__error(err, "hoff_malloc: cannot allocate %zu bytes: %s", size, hoff_strerror(err));
    return NULL;
}

/* A failed allocation's message made the entry point's own (hoff__error_since), errno kept; EAGAIN (not a
 * candidate) is an answer, not a failure. */
static void *own_failure(void *p, unsigned seq, const char *what) {
    int e = errno;

    if (!p && e != EAGAIN) {
        hoff__error_since(seq, -e, what);
        errno = e;
    }
    return p;
}

HOFF_API void *hoff_malloc_flags(hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags) {
    unsigned seq = hoff__error_seq();

    if (!ctx || (flags & ~7u) || (flags & 3u) == 3u || ((flags & 4u) && (flags & 3u))) {
        errno = EINVAL;
        hoff__error(-EINVAL,
                    ctx ? "hoff_malloc_flags: flags 0x%x: accepted are HOFF_ALLOC_AUTO (0), "
                          "HOFF_ALLOC_DEVICE (1), HOFF_ALLOC_MANAGED (2) and HOFF_ALLOC_CANDIDATE (4)"
                        : "hoff_malloc_flags: NULL context (flags 0x%x)",
                    flags);
        return NULL;
    }
    return own_failure(hoff__malloc_sized(ctx, size, stream, flags, NULL), seq, "hoff_malloc_flags");
}

HOFF_API void *hoff_malloc(hoff_ctx *ctx, size_t size, hoff_stream stream) {
    unsigned seq = hoff__error_seq();

    return own_failure(hoff__malloc_sized(ctx, size, stream, HOFF_ALLOC_AUTO, NULL), seq, "hoff_malloc");
}

int hoff__free_sized(struct hoff_ctx *ctx, void *ptr, hoff_stream stream, size_t *bytes) {
    struct hoff__block *b;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_free: NULL context");
    if (!ptr)
        return 0;
    LOCK(ctx);
    b = hoff__bt_remove(&ctx->mem.table, ptr);
    if (!b) {
        UNLOCK(ctx);
        return hoff__error(-EINVAL, "hoff_free: %p is not a live hoff block (double free or foreign pointer)", ptr);
    }
    if (bytes)
        *bytes = b->size;
    HOFF__STAT_ADD(&ctx->st, frees, 1);
    if (b->graph) { /* reused within its capture, else kept while its graphs live (ctx_graph.c) */
        hoff__ctx_graph_free(ctx, b, stream, capturing(ctx, stream));
        UNLOCK(ctx);
        return 0;
    }
    if (capturing(ctx, stream)) {
        if (HOFF__GROW(ctx->capfree, ctx->capcap, ctx->ncapfree + 1) != 0) {
            /* keep it live rather than free it under a capture */
            hoff__bt_insert(&ctx->mem.table, b->ptr, b);
            HOFF__STAT_SUB(&ctx->st, frees, 1);
            UNLOCK(ctx);
            return hoff__error(-ENOMEM, "hoff_free: out of host memory deferring a free made during graph "
                                        "capture; the block stays allocated");
        }
        ctx->capfree[ctx->ncapfree++] = (struct hoff__capfree){b, stream};
        UNLOCK(ctx);
        return 0;
    }
    if (ctx->ncapfree)
        drain_capfree(ctx);
    free_block(ctx, b, stream);
    {
        struct hoff__pool *dp = &ctx->mem.pools[HOFF__POOL_DEVICE];
        uint64_t lim = dp->mapped_bytes / 8 > (64u << 20) ? dp->mapped_bytes / 8 : (64u << 20);

        if (dp->deferred_bytes > lim)
            hoff__ctx_release_deferred(ctx);
    }
    hoff__publish_tick(ctx, &ctx->st.frees);
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_free(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    return hoff__free_sized(ctx, ptr, stream, NULL);
}

/* The free of a live block (out of the table) on stream: the pipeline's
 * event, the residency's book-keeping, back to its pool.  Caller holds the
 * lock. */
static void free_block(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream stream) {
    struct hoff__event_info e;

    if (ctx->mem.res.inf_head)
        hoff__res_poll(&ctx->mem);
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_FREE;
    e.stream = stream;
    e.b = b;
    hoff__pipe_before(ctx, &e);
    if (b->pool == HOFF__POOL_MANAGED && !hoff__res_on_free(&ctx->mem, b))
        b->stream = stream; /* returned to the cache on this stream when its transfer lands */
    else
        hoff__pool_put(&ctx->mem.pools[b->pool], b, stream);
    hoff__pipe_after(ctx, &e); /* reads only b's step and id, which the pool keeps */
}

HOFF_API int hoff_record_stream(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    struct hoff__block *b;
    int rc;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_record_stream: NULL context");
    LOCK(ctx);
    if ((rc = hoff__ctx_block(ctx, ptr, "hoff_record_stream", &b)) == 0)
        hoff__res_note_stream(&ctx->mem, b, stream);
    UNLOCK(ctx);
    return rc;
}

HOFF_API size_t hoff_block_size(hoff_ctx *ctx, const void *ptr) {
    struct hoff__block *b;
    size_t n;

    if (!ctx) {
        hoff__error(-EINVAL, "hoff_block_size: NULL context");
        return 0;
    }
    LOCK(ctx);
    b = hoff__bt_lookup(&ctx->mem.table, ptr);
    n = b ? b->size : 0;
    UNLOCK(ctx);
    return n;
}

HOFF_API int hoff_empty_cache(hoff_ctx *ctx) {
    if (!ctx)
        return hoff__error(-EINVAL, "hoff_empty_cache: NULL context");
    LOCK(ctx);
    flush_cache(ctx);
    UNLOCK(ctx);
    return 0;
}
