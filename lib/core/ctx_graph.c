/* ctx_graph.c — the graph pools a framework names (PyTorch's MempoolId_t): the pool id a thread's captures
 * allocate for, the count of each pool's captures (begin) and releases, and what becomes of a graph block at
 * its free: reused within its capture, retired while its graphs may replay, reclaimed once they are gone.
 * Threading: the pool id is the calling thread's own (thread-local); the rest runs under ctx->lock. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "core/context.h"
#include "core/core.h"
#include "core/grow.h"
#include "core/ctx_impl.h"

/* The id the calling thread's capture allocations are tagged with. */
static __thread uint64_t tls_gpool[2];

void hoff__graph_pool_use(uint64_t id0, uint64_t id1) {
    tls_gpool[0] = id0;
    tls_gpool[1] = id1;
}

void hoff__graph_pool_tag(struct hoff__block *b) {
    b->gpool[0] = tls_gpool[0];
    b->gpool[1] = tls_gpool[1];
}

static int named(uint64_t id0, uint64_t id1) {
    return id0 || id1;
}

static struct hoff__gpool *gpool_find(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1) {
    size_t i;

    for (i = 0; i < ctx->ngpools; i++)
        if (ctx->gpools[i].id[0] == id0 && ctx->gpools[i].id[1] == id1)
            return &ctx->gpools[i];
    return NULL;
}

/* The record of pool id, made if new; NULL when out of memory. */
static struct hoff__gpool *gpool_get(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1) {
    struct hoff__gpool *g = gpool_find(ctx, id0, id1);

    if (g)
        return g;
    if (HOFF__GROW(ctx->gpools, ctx->capgpools, ctx->ngpools + 1) != 0)
        return NULL;
    g = &ctx->gpools[ctx->ngpools++];
    g->id[0] = id0;
    g->id[1] = id1;
    g->uses = 0;
    g->released = 0;
    return g;
}

static int released(struct hoff_ctx *ctx, const uint64_t id[2]) {
    struct hoff__gpool *g;

    if (!named(id[0], id[1]))
        return 0;
    g = gpool_find(ctx, id[0], id[1]);
    return g && g->released;
}

static int may_unmap(const struct hoff__block *b, void *arg) {
    return released(arg, b->gpool);
}

int hoff__graph_reuse_ok(const struct hoff__block *b, void *ctx) {
    return (b->gpool[0] == tls_gpool[0] && b->gpool[1] == tls_gpool[1]) || released(ctx, b->gpool);
}

void hoff__ctx_graph_fenced(struct hoff_ctx *ctx, int trim) {
    struct hoff__pool *gp = &ctx->mem.graph_pool;

    hoff__pool_fence_all(gp);
    if (trim)
        hoff__pool_trim_if(gp, may_unmap, ctx);
}

void hoff__ctx_graph_free(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s, int capturing) {
    if (capturing) {
        hoff__pool_put(&ctx->mem.graph_pool, b, s); /* reused within its capture, in stream (graph) order */
    } else if (released(ctx, b->gpool)) {
        HOFF__STAT_ADD(&ctx->st, graph_released_bytes, b->size); /* its graphs are gone: reusable after a device sync */
        hoff__pool_put_deferred(&ctx->mem.graph_pool, b, s);
    } else {
        hoff__pool_retire(&ctx->mem.graph_pool, b); /* its graphs may replay into it */
    }
}

int hoff__ctx_graph_pool_begin(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1) {
    struct hoff__gpool *g = NULL;
    int rc = 0;

    LOCK(ctx);
    HOFF__STAT_ADD(&ctx->st, graph_pool_begins, 1);
    if (named(id0, id1)) {
        g = gpool_get(ctx, id0, id1);
        if (!g) {
            rc = hoff__error(-ENOMEM,
                             "graph pool (%llu, %llu): out of host memory for its record; its blocks "
                             "stay retired until shutdown",
                             (unsigned long long)id0, (unsigned long long)id1);
        } else {
            if (g->released) { /* captured into again after its graphs were gone: a new life */
                g->released = 0;
                g->uses = 0;
            }
            g->uses++;
        }
    }
    /* Reclaimed blocks wait for a device-wide synchronisation; a capture is
     * about to begin, and none is open (one would forbid the sync). */
    if (!ctx->captures_open && ctx->mem.graph_pool.deferred) {
        if (ctx->mem.be->ops->sync(ctx->mem.be) == 0) {
            hoff__ctx_graph_fenced(ctx, 0);
            HOFF__STAT_ADD(&ctx->st, free_fence_syncs, 1);
        }
    }
    ctx->captures_open++;
    hoff__log(HOFF_LOG_DEBUG, "graph pool (%llu, %llu): capture begins (%u of its captures live, %u open)",
              (unsigned long long)id0, (unsigned long long)id1, g ? g->uses : 0, ctx->captures_open);
    UNLOCK(ctx);
    return rc;
}

int hoff__ctx_graph_pool_end(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1) {
    LOCK(ctx);
    if (ctx->captures_open)
        ctx->captures_open--;
    hoff__log(HOFF_LOG_DEBUG, "graph pool (%llu, %llu): capture ends (%u open)", (unsigned long long)id0,
              (unsigned long long)id1, ctx->captures_open);
    UNLOCK(ctx);
    return 0;
}

int hoff__ctx_graph_pool_release(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1) {
    const uint64_t id[2] = {id0, id1};
    struct hoff__gpool *g;
    uint64_t bytes;
    int rc = 0;

    LOCK(ctx);
    HOFF__STAT_ADD(&ctx->st, graph_pool_releases, 1);
    if (!named(id0, id1)) { /* no pool: its blocks cannot be told from another's */
        UNLOCK(ctx);
        hoff__log(HOFF_LOG_DEBUG, "graph pool (0, 0) released: nothing to do (unnamed graph blocks stay retired)");
        return 0;
    }
    g = gpool_find(ctx, id0, id1);
    if (g && g->uses > 1) { /* another graph captured into this pool still lives */
        g->uses--;
        hoff__log(HOFF_LOG_DEBUG, "graph pool (%llu, %llu): a graph released, %u still use it", (unsigned long long)id0,
                  (unsigned long long)id1, g->uses);
        UNLOCK(ctx);
        return 0;
    }
    if (!g && !(g = gpool_get(ctx, id0, id1))) /* remembered, for its blocks freed later */
        rc = hoff__error(-ENOMEM,
                         "graph pool (%llu, %llu): out of host memory for its record; its blocks freed "
                         "from now on stay retired",
                         (unsigned long long)id0, (unsigned long long)id1);
    if (g) {
        g->uses = 0;
        g->released = 1;
    }
    bytes = hoff__pool_reclaim(&ctx->mem.graph_pool, id);
    HOFF__STAT_ADD(&ctx->st, graph_released_bytes, bytes);
    hoff__log(HOFF_LOG_DEBUG,
              "graph pool (%llu, %llu) released: %llu retired bytes reusable after the next "
              "device-wide synchronisation",
              (unsigned long long)id0, (unsigned long long)id1, (unsigned long long)bytes);
    UNLOCK(ctx);
    return rc;
}
