/* context.h — struct hoff_ctx: the configuration, the API's lock, the memory layer (mem/mem.h), the pipeline of
 * steps, graph capture and publishing of one context, with the context's own counters.
 * Threading: `lock` guards everything here and in the memory layer, except what mem/mem.h names (issuers,
 * completions). */
#ifndef HOFF_CONTEXT_H
#define HOFF_CONTEXT_H

#include <limits.h>
#include <pthread.h>

#include "core/rank.h"
#include "core/stat.h"
#include "exec/pipeline.h"
#include "mem/mem.h"

struct hoff__publisher;

/* The hoff_stats fields the context keeps itself (core/stat.h); the memory layer's (mem/mem.h), the pipeline's
 * (exec/executor.h) and the figures read from the pools, the issuer, the backend and the NVMe tier
 * (core/ctx_stats.c) are folded in on read. */
#define HOFF__CTX_STATS(X) \
    X(budget_bytes)        \
    X(host_cap_bytes)      \
    X(allocs)              \
    X(frees)               \
    X(alloc_failures)      \
    X(cache_flushes)       \
    X(steps)               \
    X(last_step_ns)        \
    X(touch_faults)        \
    X(discard_touches)     \
    X(rank)                \
    X(world_size)          \
    X(local_rank)          \
    X(device)              \
    X(capture_allocs)      \
    X(free_fence_syncs)    \
    X(side_stream_allocs)  \
    X(kept_allocs)         \
    X(keep_ignored)        \
    X(graph_pool_begins)   \
    X(graph_pool_releases) \
    X(graph_released_bytes)

struct hoff__ctx_stats {
#define HOFF__CTX_STAT_(name) HOFF__STAT_FIELD(name)
    HOFF__CTX_STATS(HOFF__CTX_STAT_)
#undef HOFF__CTX_STAT_
};

/* A block freed on stream s while s was capturing a graph (hoff_ctx.capfree). */
struct hoff__capfree {
    struct hoff__block *b;
    hoff_stream s;
};

/* A graph pool the framework named (hoff_ctx.gpools). */
struct hoff__gpool {
    uint64_t id[2];
    uint32_t uses;
    uint8_t released;
};

struct hoff_ctx {
    struct hoff_config cfg;
    pthread_mutex_t lock;
    struct hoff__mem mem; /* the memory layer: backend, issuers, tiers, pools, residency (mem/mem.h) */
    /* Blocks freed on a stream while it was capturing a graph (other than
     * the graph pool's): freed for real once the capture is over, since
     * hoff's free path records and queries events, which a capture forbids. */
    struct hoff__capfree *capfree;
    size_t ncapfree, capcap;
    /* The graph pools the framework named (core/ctx_graph.c): each id with
     * its captures not yet released (uses) and whether its graphs are gone
     * (released: a block of it freed later is reclaimed, not retired). */
    struct hoff__gpool *gpools;
    size_t ngpools, capgpools;
    uint32_t captures_open;     /* graph pool begins not yet ended */
    struct hoff__pipeline pipe; /* warmup / plan / replay of steps */
    struct hoff__ctx_stats st;  /* the context's own counters */
    uint64_t alloc_seq;
    int in_step;
    int region_depth;
    int phase;           /* enum hoff_phase of the op marks to come (hoff_set_phase) */
    int step_stream_set; /* hoff_step_stream named the step's stream */
    hoff_stream step_stream;
    uint64_t step_start_ns;
    int sim_wallclock;     /* sim: each op mark advances the compute clock by the CPU time since the
                              previous mark or step begin (hoff_sim_wallclock) */
    uint64_t wall_mark_ns; /* CLOCK_MONOTONIC of that previous mark (0: none this step) */
    int shutting_down;
    struct hoff__publisher *pub; /* the stats segment for hoff-stat (core/publish.h), or NULL */
    struct hoff__rank rank;      /* this process in its job (core/rank.h) */
    char trace_path[PATH_MAX];   /* cfg.trace_path with %r / %p expanded ("" = no trace) */
    char spill_dir[PATH_MAX];    /* where the spill file goes: cfg.spill_dir expanded, then rank.<R>/
                                    under it when the job has several ranks */
};

/* The live limits of the options (budget, host cap, oversubscription) copied into the memory layer: at start and
 * after every live change of ctx->cfg (core/context.c).  Caller holds ctx->lock (or owns ctx). */
void hoff__ctx_push_limits(struct hoff_ctx *ctx);

/* hoff_malloc_flags and hoff_free that also give the block's size (hoff's
 * size class, what hoff_block_size says) through bytes when it is not NULL,
 * without a second lookup: for the PyTorch entry points' statistics
 * (torch/memstats.c).  flags are valid ones (hoff_malloc_flags checks what
 * a caller gives).  They take ctx->lock. */
void *hoff__malloc_sized(struct hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags, size_t *bytes);
int hoff__free_sized(struct hoff_ctx *ctx, void *ptr, hoff_stream stream, size_t *bytes);

/* Graph pools (core/ctx_graph.c).  The calling thread's captures allocate
 * for the pool id {id0, id1} from now on ({0, 0}: none named). */
void hoff__graph_pool_use(uint64_t id0, uint64_t id1);
/* That id, for the block a capture allocates (caller holds ctx->lock). */
void hoff__graph_pool_tag(struct hoff__block *b);
/* May the free graph block b serve the capture allocation the calling thread
 * makes now?  Only a block of the same pool id (graphs that share a pool
 * replay in capture order), or one whose pool's graphs are gone: a block
 * freed during another live pool's capture is that graph's scratch, which its
 * replays write.  ctx is the struct hoff_ctx (the graph pool's reuse_ok). */
int hoff__graph_reuse_ok(const struct hoff__block *b, void *ctx);
/* A capture for pool id begins / ends on ctx (PyTorch's beginAllocateToPool
 * and endAllocateToPool); they take ctx->lock.  0 or -errno. */
int hoff__ctx_graph_pool_begin(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1);
int hoff__ctx_graph_pool_end(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1);
/* The graphs of pool id are gone (PyTorch's releasePool, once per graph):
 * when no capture of it is left, its graph blocks become reusable after a
 * device-wide synchronisation; takes ctx->lock.  0 or -errno. */
int hoff__ctx_graph_pool_release(struct hoff_ctx *ctx, uint64_t id0, uint64_t id1);
/* The free of graph block b (out of the table) on stream s, capturing or
 * not.  Caller holds ctx->lock. */
void hoff__ctx_graph_free(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s, int capturing);
/* The device-wide synchronisation has happened (sync_rc 0): reclaimed graph
 * blocks become reusable; with trim, those of released pools are unmapped.
 * Caller holds ctx->lock. */
void hoff__ctx_graph_fenced(struct hoff_ctx *ctx, int trim);

/* The counters with the pool and issuer figures folded in (hoff_stats_get
 * without the lock and the poll).  Caller holds ctx->lock. */
void hoff__stats_snapshot(struct hoff_ctx *ctx, struct hoff_stats *out);
/* Snapshot the counters and write them to ctx's stats segment now (nothing
 * without one).  Caller holds ctx->lock. */
void hoff__publish_now(struct hoff_ctx *ctx);

#endif
