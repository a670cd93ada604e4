/* context.c — the public API's entry points: context life cycle, allocation, residency actions, marks and stats.
 * Threading: every entry point takes ctx->lock (one lock per context: the pools, table and residency share it). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/context.h"
#include "core/core.h"
#include "core/options.h"
#include "core/publish.h"
#include "mem/guard.h"
#include "mem/swapgroup.h"
#include "tier/host.h"
#include "tier/nvme.h"

#define LOCK(ctx) pthread_mutex_lock(&(ctx)->lock)
#define UNLOCK(ctx) pthread_mutex_unlock(&(ctx)->lock)

static int open_backend(struct hoff_ctx *ctx) {
    int rc;

    switch (ctx->cfg.backend) {
    case HOFF_BACKEND_SIM:
        return hoff__backend_open_sim(&ctx->cfg, &ctx->be);
    case HOFF_BACKEND_CUDA:
        return hoff__backend_open_cuda(&ctx->cfg, &ctx->be);
    default:
        rc = hoff__backend_open_cuda(&ctx->cfg, &ctx->be);
        if (rc == 0)
            return 0;
        hoff__log(HOFF_LOG_INFO, "no usable GPU (%s): using the sim backend", hoff_last_error());
        return hoff__backend_open_sim(&ctx->cfg, &ctx->be);
    }
}

/* Who this process is in its job, and what follows from it: the device
 * when HOFF_DEVICE is -1 (LOCAL_RANK, else the calling thread's current
 * device), the trace file's name and the spill directory.  0 or -errno with
 * the message set. */
static int resolve_rank(struct hoff_ctx *ctx) {
    char err[512], dir[PATH_MAX];
    int rc;

    if ((rc = hoff__rank_from_env(&ctx->rank, err, sizeof err)) != 0 ||
        (rc = hoff__path_expand(ctx->trace_path, sizeof ctx->trace_path, ctx->cfg.trace_path, &ctx->rank,
                                "HOFF_TRACE", err, sizeof err)) != 0)
        return hoff__error(rc, "%s", err);
    if (ctx->cfg.device < 0) {
        if (ctx->rank.local_rank >= 0)
            ctx->cfg.device = ctx->rank.local_rank;
        else if (ctx->cfg.backend != HOFF_BACKEND_SIM)
            ctx->cfg.device = hoff__cuda_current_device();
        if (ctx->cfg.device < 0)
            ctx->cfg.device = 0; /* sim, or no CUDA: the backend says so if it matters */
    }
    ctx->spill_dir[0] = '\0';
    if (!ctx->cfg.spill_dir[0])
        return 0;
    /* Several ranks may share HOFF_SPILL_DIR: each spills under its own
     * rank.<R> there (a %r in HOFF_SPILL_DIR itself can put ranks on
     * different disks, so it counts as per rank too). */
    {
        struct hoff__rank one = ctx->rank;

        one.world_size = 1; /* a spill directory shared by the ranks is fine: the subdirectory separates them */
        if ((rc = hoff__path_expand(dir, sizeof dir, ctx->cfg.spill_dir, &one, "HOFF_SPILL_DIR", err, sizeof err)))
            return hoff__error(rc, "%s", err);
    }
    if (ctx->rank.world_size <= 1 || strstr(ctx->cfg.spill_dir, "%r")) {
        snprintf(ctx->spill_dir, sizeof ctx->spill_dir, "%s", dir);
        return 0;
    }
    if (snprintf(ctx->spill_dir, sizeof ctx->spill_dir, "%s/rank.%d", dir, ctx->rank.rank) >=
        (int)sizeof ctx->spill_dir)
        return hoff__error(-ENAMETOOLONG, "HOFF_SPILL_DIR=%.64s...: the path is too long", ctx->cfg.spill_dir);
    if (mkdir(ctx->spill_dir, 0700) != 0 && errno != EEXIST) {
        rc = -errno;
        return hoff__error(rc, "HOFF_SPILL_DIR=%s: cannot create the rank's directory %s (%s)", ctx->cfg.spill_dir,
                           ctx->spill_dir, strerror(-rc));
    }
    {
        struct stat sb;

        /* Never a link planted in its place, never someone else's directory. */
        if (lstat(ctx->spill_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid())
            return hoff__error(-EPERM, "HOFF_SPILL_DIR=%s: %s is not a directory of this user (a link or another "
                               "user's file is in the way); remove it or choose another HOFF_SPILL_DIR",
                               ctx->cfg.spill_dir, ctx->spill_dir);
    }
    return 0;
}

/* The host tier (placement of evictions) and, with HOFF_SPILL_DIR, the NVMe
 * tier and its thread. */
static int open_tiers(struct hoff_ctx *ctx) {
    char bus[64], desc[160];
    const char *busid = NULL;
    int rc;

    if (ctx->be->ops->pci_bus_id && ctx->be->ops->pci_bus_id(ctx->be, bus, sizeof bus) == 0)
        busid = bus;
    rc = hoff__host_tier_open(&ctx->host_tier, ctx->cfg.numa, busid, NULL, 0);
    if (rc)
        return rc; /* a bad HOFF_NUMA: the message says why */
    hoff__log(HOFF_LOG_INFO, "host tier: %s", hoff__host_tier_describe(ctx->host_tier, desc, sizeof desc));
    if (!ctx->spill_dir[0])
        return 0;
    rc = hoff__nvme_open(&ctx->nvme, ctx->spill_dir, (size_t)ctx->cfg.spill_chunk_bytes,
                         ctx->cfg.io_queue_depth, ctx->host_tier, NULL);
    if (rc)
        goto fail;
    rc = hoff__issuer_start(&ctx->tier_issuer, ctx->be, 64, hoff__res_cmd_done, ctx);
    if (rc) {
        hoff__error(rc, "cannot start the NVMe tier's thread");
        goto fail;
    }
    hoff__log(HOFF_LOG_INFO, "NVMe tier in %s: %s", ctx->spill_dir, hoff__nvme_mode(ctx->nvme, desc, sizeof desc));
    return 0;
fail:
    if (ctx->nvme)
        hoff__nvme_close(ctx->nvme);
    ctx->nvme = NULL;
    hoff__host_tier_close(ctx->host_tier);
    ctx->host_tier = NULL;
    return rc;
}

static void close_tiers(struct hoff_ctx *ctx) {
    if (ctx->tier_issuer)
        hoff__issuer_stop(ctx->tier_issuer);
    if (ctx->nvme)
        hoff__nvme_close(ctx->nvme);
    if (ctx->host_tier)
        hoff__host_tier_close(ctx->host_tier);
    ctx->tier_issuer = NULL;
    ctx->nvme = NULL;
    ctx->host_tier = NULL;
}

HOFF_API int hoff_init(hoff_ctx **out, const struct hoff_config *cfg) {
    struct hoff_ctx *ctx;
    char err[512];
    int rc;

    if (!out)
        return hoff__error(-EINVAL, "hoff_init: ctx must not be NULL");
    *out = NULL;
    ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return hoff__error(-ENOMEM, "hoff_init: out of host memory");
    if (cfg) {
        if (cfg->version != HOFF_CONFIG_VERSION || cfg->size != sizeof *cfg) {
            free(ctx);
            return hoff__error(-EINVAL, "hoff_init: config version %u size %u, this library expects "
                               "version %d size %zu (call hoff_config_init)",
                               cfg->version, cfg->size, HOFF_CONFIG_VERSION, sizeof *cfg);
        }
        ctx->cfg = *cfg;
    } else {
        hoff_config_init(&ctx->cfg);
        rc = hoff_config_from_env(&ctx->cfg, err, sizeof err);
        if (rc) {
            hoff__log(HOFF_LOG_ERROR, "%s", err);
            free(ctx);
            return hoff__error(rc, "%s", err);
        }
    }
    rc = hoff__config_validate(&ctx->cfg, err, sizeof err);
    if (rc) {
        hoff__log(HOFF_LOG_ERROR, "%s", err);
        free(ctx);
        return hoff__error(rc, "%s", err);
    }
    hoff__log_set_level(ctx->cfg.log_level);
    if ((rc = resolve_rank(ctx)) != 0) {
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        free(ctx);
        return rc;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->done_lock, NULL);
    pthread_cond_init(&ctx->done_cond, NULL);
    if ((rc = open_backend(ctx)) != 0)
        goto fail;
    if (ctx->cfg.budget_pct > 0) { /* a percentage of this rank's own device */
        uint64_t free_b = 0, total_b = 0;

        if ((rc = ctx->be->ops->mem_info(ctx->be, &free_b, &total_b)) != 0) {
            ctx->be->ops->close(ctx->be);
            goto fail;
        }
        ctx->cfg.budget_bytes = (uint64_t)((double)total_b * ctx->cfg.budget_pct / 100.0);
        ctx->cfg.budget_pct = 0; /* resolved: the context's budget is a size from here on */
        if (ctx->cfg.budget_bytes == 0)
            ctx->cfg.budget_bytes = 1; /* a tiny percentage is still a budget, not "no limit" */
    }
    if ((rc = hoff__guard_init(ctx)) != 0)
        goto fail_be;
    if ((rc = hoff__bt_init(&ctx->table, 1024)) != 0)
        goto fail_be;
    hoff__pool_init(&ctx->pools[HOFF__POOL_DEVICE], HOFF__POOL_DEVICE, ctx->be, hoff__guard_check_device, ctx);
    hoff__pool_init(&ctx->pools[HOFF__POOL_MANAGED], HOFF__POOL_MANAGED, ctx->be, hoff__guard_check, ctx);
    hoff__pool_init_graph(&ctx->graph_pool, ctx->be, hoff__guard_check_device, ctx);
    ctx->pools[HOFF__POOL_DEVICE].defer = ctx->cfg.free_fence == HOFF_FENCE_DEVICE;
    rc = hoff__issuer_start(&ctx->issuer, ctx->be, (size_t)ctx->cfg.issue_queue_depth,
                            hoff__res_cmd_done, ctx);
    if (rc) {
        hoff__error(rc, "cannot start the issuing thread");
        goto fail_bt;
    }
    if ((rc = open_tiers(ctx)) != 0)
        goto fail_issuer;
    ctx->st.version = HOFF_STATS_VERSION;
    ctx->st.size = sizeof ctx->st;
    ctx->st.budget_bytes = ctx->cfg.budget_bytes;
    ctx->st.host_cap_bytes = ctx->cfg.host_cap_bytes;
    ctx->st.rank = (uint64_t)ctx->rank.rank;
    ctx->st.world_size = (uint64_t)ctx->rank.world_size;
    ctx->st.local_rank = ctx->rank.local_rank > 0 ? (uint64_t)ctx->rank.local_rank : 0;
    ctx->st.device = (uint64_t)ctx->cfg.device;
    hoff__pipe_init(ctx);
    hoff__log(HOFF_LOG_INFO, "context ready: backend %s, budget %llu bytes", ctx->be->ops->name,
              (unsigned long long)ctx->cfg.budget_bytes);
    hoff__publish_open(ctx); /* stats for hoff-stat; never fails the init */
    *out = ctx;
    return 0;
fail_issuer:
    hoff__issuer_stop(ctx->issuer);
fail_bt:
    hoff__bt_destroy(&ctx->table);
fail_be:
    ctx->be->ops->close(ctx->be);
fail:
    pthread_cond_destroy(&ctx->done_cond);
    pthread_mutex_destroy(&ctx->done_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return rc;
}

static void count_leak(const void *key, void *val, void *arg) {
    struct hoff__block *b = val;
    struct hoff_ctx *ctx = arg;

    (void)key;
    if (b->graph) {
        hoff__pool_retire(&ctx->graph_pool, b);
        return;
    }
    if (b->pool == HOFF__POOL_MANAGED && hoff__res_on_free(ctx, b) == 0)
        return; /* cannot happen after wait_all */
    hoff__pool_put(&ctx->pools[b->pool], b, b->stream);
}

HOFF_API int hoff_shutdown(hoff_ctx *ctx) {
    size_t leaked;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    ctx->shutting_down = 1;
    hoff__publish_close(ctx);
    hoff__res_wait_all(ctx);
    UNLOCK(ctx);
    hoff__issuer_stop(ctx->issuer);
    if (ctx->tier_issuer)
        hoff__issuer_drain(ctx->tier_issuer);
    LOCK(ctx);
    hoff__res_wait_all(ctx);
    ctx->be->ops->sync(ctx->be);
    hoff__guard_close(ctx);
    hoff__groups_destroy_all(ctx);
    leaked = ctx->table.count;
    if (leaked)
        hoff__log(HOFF_LOG_WARN, "shutdown with %zu blocks still allocated; releasing them", leaked);
    hoff__bt_foreach(&ctx->table, count_leak, ctx);
    for (size_t i = 0; i < ctx->ncapfree; i++) /* freed during a capture that never ended */
        count_leak(NULL, ctx->capfree[i].b, ctx);
    free(ctx->capfree);
    hoff__pipe_destroy(ctx);
    close_tiers(ctx); /* after the blocks let go of their spills */
    hoff__pool_destroy(&ctx->pools[HOFF__POOL_DEVICE]);
    hoff__pool_destroy(&ctx->pools[HOFF__POOL_MANAGED]);
    hoff__pool_destroy(&ctx->graph_pool);
    hoff__bt_destroy(&ctx->table);
    ctx->be->ops->close(ctx->be);
    UNLOCK(ctx);
    pthread_cond_destroy(&ctx->done_cond);
    pthread_mutex_destroy(&ctx->done_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return 0;
}

HOFF_API const char *hoff_backend_name(const hoff_ctx *ctx) {
    return ctx && ctx->be ? ctx->be->ops->name : "none";
}

HOFF_API const char *hoff_planner_name(const hoff_ctx *ctx) {
    return ctx ? ctx->cfg.planner : "none";
}

HOFF_API const char *hoff_plan_state_name(int state) {
    switch (state) {
    case HOFF_PLAN_NONE:
        return "none";
    case HOFF_PLAN_WARMUP:
        return "warmup";
    case HOFF_PLAN_REPLAY:
        return "replay";
    case HOFF_PLAN_FALLBACK:
        return "fallback";
    default:
        return "unknown";
    }
}

/* --- allocation ------------------------------------------------------------ */

/* The offload-candidate rule (doc/design.md, "Two pools"): inside a step,
 * outside every region, at least managed_min bytes, and on the step's
 * stream when hoff_step_stream named one. */
static int choose_pool(struct hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags) {
    if (flags & HOFF_ALLOC_DEVICE)
        return HOFF__POOL_DEVICE;
    if (flags & HOFF_ALLOC_MANAGED)
        return HOFF__POOL_MANAGED;
    if (ctx->in_step && !ctx->region_depth && size >= ctx->cfg.managed_min_bytes) {
        if (ctx->step_stream_set && stream != ctx->step_stream) {
            ctx->st.side_stream_allocs++;
            return HOFF__POOL_DEVICE;
        }
        return HOFF__POOL_MANAGED;
    }
    return HOFF__POOL_DEVICE;
}

/* Is stream s capturing a CUDA graph?  An answer the backend cannot give
 * counts as yes: the safe side (device pool, no events on s). */
static int capturing(struct hoff_ctx *ctx, hoff_stream s) {
    return ctx->be->ops->stream_capturing && ctx->be->ops->stream_capturing(ctx->be, s) != 0;
}

/* HOFF_FREE_FENCE=device: wait for the whole device, then the deferred
 * frees are safe to reuse. */
static void release_deferred(struct hoff_ctx *ctx) {
    if (!ctx->pools[HOFF__POOL_DEVICE].deferred)
        return;
    ctx->be->ops->sync(ctx->be);
    hoff__pool_fence_all(&ctx->pools[HOFF__POOL_DEVICE]);
    ctx->st.free_fence_syncs++;
}

/* Wait for the device and give every cached block back to the backend. */
static void flush_cache(struct hoff_ctx *ctx) {
    int deferred = ctx->pools[HOFF__POOL_DEVICE].deferred != NULL;

    hoff__res_wait_all(ctx);
    ctx->be->ops->sync(ctx->be);
    hoff__pool_fence_all(&ctx->pools[0]);
    hoff__pool_fence_all(&ctx->pools[1]);
    hoff__pool_trim(&ctx->pools[0]);
    hoff__pool_trim(&ctx->pools[1]);
    if (deferred)
        ctx->st.free_fence_syncs++;
    ctx->st.cache_flushes++;
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
static void *capture_alloc(struct hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags) {
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
        hoff__error(-ENOTSUP, "hoff_malloc: managed memory asked for on stream %p while it captures a CUDA "
                    "graph; managed memory cannot be captured (use HOFF_ALLOC_AUTO or DEVICE)", (void *)stream);
        return NULL;
    }
    cls = hoff__pool_class(&ctx->graph_pool, size);
    b = cls < 0 ? NULL : hoff__pool_get(&ctx->graph_pool, cls, stream, &err);
    if (cls < 0)
        err = -ENOMEM;
    if (b && (err = hoff__bt_insert(&ctx->table, b->ptr, b)) != 0) {
        hoff__pool_retire(&ctx->graph_pool, b);
        b = NULL;
    }
    if (!b) {
        ctx->st.alloc_failures++;
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
    ctx->st.allocs++;
    ctx->st.capture_allocs++;
    UNLOCK(ctx);
    return b->ptr;
}

HOFF_API void *hoff_malloc_flags(hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags) {
    struct hoff__event_info e;
    struct hoff__block *b;
    struct hoff__pool *p;
    int kind, cls, err;

    if (!ctx || (flags & ~7u) || (flags & 3u) == 3u || ((flags & 4u) && (flags & 3u))) {
        errno = EINVAL;
        hoff__error(-EINVAL, "hoff_malloc: %s",
                    ctx ? "flags must be AUTO, DEVICE, MANAGED or CANDIDATE" : "NULL context");
        return NULL;
    }
    LOCK(ctx);
    if (capturing(ctx, stream))
        return capture_alloc(ctx, size, stream, flags);
    if (ctx->ncapfree)
        drain_capfree(ctx);
    kind = choose_pool(ctx, size, stream, flags & 3u);
    if ((flags & HOFF_ALLOC_CANDIDATE) && kind != HOFF__POOL_MANAGED) {
        UNLOCK(ctx); /* not an offload candidate: the caller's other allocator takes it */
        errno = EAGAIN;
        return NULL;
    }
    p = &ctx->pools[kind];
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
    if (ctx->res.inf_head)
        hoff__res_poll(ctx);
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
    if (kind == HOFF__POOL_MANAGED && ctx->region_depth)
        b->flags |= HOFF__BLK_PINNED;
    if (kind == HOFF__POOL_MANAGED && (err = hoff__res_on_alloc(ctx, b, stream)) != 0) {
        hoff__pool_put(p, b, stream);
        goto fail;
    }
    if ((err = hoff__bt_insert(&ctx->table, b->ptr, b)) != 0) {
        if (kind == HOFF__POOL_MANAGED)
            hoff__res_on_free(ctx, b);
        hoff__pool_put(p, b, stream);
        goto fail;
    }
    ctx->st.allocs++;
    b->tstep = 0;
    e.b = b;
    hoff__pipe_after(ctx, &e);
    hoff__publish_tick(ctx, &ctx->st.allocs);
    UNLOCK(ctx);
    return b->ptr;
fail:
    ctx->st.alloc_failures++;
    UNLOCK(ctx);
    errno = -err;
    if (err != -EOVERFLOW) /* the guard has said why already */
        hoff__error(err, "hoff_malloc: cannot allocate %zu bytes: %s", size, hoff_strerror(err));
    return NULL;
}

HOFF_API void *hoff_malloc(hoff_ctx *ctx, size_t size, hoff_stream stream) {
    return hoff_malloc_flags(ctx, size, stream, HOFF_ALLOC_AUTO);
}

HOFF_API int hoff_free(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    struct hoff__block *b;

    if (!ctx)
        return -EINVAL;
    if (!ptr)
        return 0;
    LOCK(ctx);
    b = hoff__bt_remove(&ctx->table, ptr);
    if (!b) {
        UNLOCK(ctx);
        return hoff__error(-EINVAL, "hoff_free: %p is not a live hoff block (double free or foreign pointer)", ptr);
    }
    ctx->st.frees++;
    if (b->graph) { /* reused within its capture, else kept for the graph for good */
        if (capturing(ctx, stream))
            hoff__pool_put(&ctx->graph_pool, b, stream);
        else
            hoff__pool_retire(&ctx->graph_pool, b);
        UNLOCK(ctx);
        return 0;
    }
    if (capturing(ctx, stream)) {
        if (ctx->ncapfree == ctx->capcap) {
            size_t cap = ctx->capcap ? 2 * ctx->capcap : 16;
            struct hoff__capfree *n = realloc(ctx->capfree, cap * sizeof *n);

            if (!n) { /* keep it live rather than free it under a capture */
                hoff__bt_insert(&ctx->table, b->ptr, b);
                ctx->st.frees--;
                UNLOCK(ctx);
                return hoff__error(-ENOMEM, "hoff_free: out of host memory deferring a free made during graph "
                                   "capture; the block stays allocated");
            }
            ctx->capfree = n;
            ctx->capcap = cap;
        }
        ctx->capfree[ctx->ncapfree++] = (struct hoff__capfree){b, stream};
        UNLOCK(ctx);
        return 0;
    }
    if (ctx->ncapfree)
        drain_capfree(ctx);
    free_block(ctx, b, stream);
    {
        struct hoff__pool *dp = &ctx->pools[HOFF__POOL_DEVICE];
        uint64_t lim = dp->mapped_bytes / 8 > (64u << 20) ? dp->mapped_bytes / 8 : (64u << 20);

        if (dp->deferred_bytes > lim)
            release_deferred(ctx);
    }
    hoff__publish_tick(ctx, &ctx->st.frees);
    UNLOCK(ctx);
    return 0;
}

/* The free of a live block (out of the table) on stream: the pipeline's
 * event, the residency's book-keeping, back to its pool.  Caller holds the
 * lock. */
static void free_block(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream stream) {
    struct hoff__event_info e;

    if (ctx->res.inf_head)
        hoff__res_poll(ctx);
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_FREE;
    e.stream = stream;
    e.b = b;
    hoff__pipe_before(ctx, &e);
    if (b->pool == HOFF__POOL_MANAGED && !hoff__res_on_free(ctx, b))
        b->stream = stream; /* returned to the cache on this stream when its transfer lands */
    else
        hoff__pool_put(&ctx->pools[b->pool], b, stream);
    hoff__pipe_after(ctx, &e); /* reads only b's step and id, which the pool keeps */
}

HOFF_API int hoff_record_stream(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    struct hoff__block *b;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_record_stream: NULL context");
    LOCK(ctx);
    b = hoff__bt_lookup(&ctx->table, ptr);
    if (b)
        hoff__res_note_stream(ctx, b, stream);
    UNLOCK(ctx);
    return b ? 0 : hoff__error(-EINVAL, "hoff_record_stream: %p is not a live hoff block", ptr);
}

HOFF_API size_t hoff_block_size(hoff_ctx *ctx, const void *ptr) {
    struct hoff__block *b;
    size_t n;

    if (!ctx)
        return 0;
    LOCK(ctx);
    b = hoff__bt_lookup(&ctx->table, ptr);
    n = b ? b->size : 0;
    UNLOCK(ctx);
    return n;
}

HOFF_API int hoff_empty_cache(hoff_ctx *ctx) {
    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    flush_cache(ctx);
    UNLOCK(ctx);
    return 0;
}

/* --- residency ------------------------------------------------------------- */

typedef int (*res_action)(struct hoff_ctx *, struct hoff__block *, hoff_stream);

static int with_block(hoff_ctx *ctx, const void *ptr, const char *what, res_action fn, hoff_stream s) {
    struct hoff__block *b;
    int rc;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    b = hoff__bt_lookup(&ctx->table, ptr);
    if (!b) {
        UNLOCK(ctx);
        return hoff__error(-EINVAL, "%s: %p is not a live hoff block", what, ptr);
    }
    rc = fn(ctx, b, s);
#ifdef HOFF_DEBUG
    hoff__res_check(ctx);
#endif
    hoff__publish_tick(ctx, NULL);
    UNLOCK(ctx);
    return rc;
}

/* The explicit calls close the block's use window: the caller says the work
 * that uses it is enqueued on the stream it names (hoff_evict(3)). */
static int evict_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    if (b->pool == HOFF__POOL_MANAGED)
        hoff__res_end_use(ctx, b);
    return hoff__res_evict(ctx, b, s);
}

static int discard_now(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    if (b->pool == HOFF__POOL_MANAGED)
        hoff__res_end_use(ctx, b);
    return hoff__res_discard(ctx, b, s);
}

HOFF_API int hoff_evict(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_evict", evict_now, stream);
}

HOFF_API int hoff_prefetch(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_prefetch", hoff__res_prefetch, stream);
}

HOFF_API int hoff_discard(hoff_ctx *ctx, void *ptr, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_discard", discard_now, stream);
}

/* An access is an event of the step: the pipeline sees it on both sides. */
/* A use of b, a live block hoff released (discarded, or its discard in
 * flight): its bytes are gone, so this is a plan or use-window error.
 * Counted and said once; 1 if so. */
static int released_use(struct hoff_ctx *ctx, struct hoff__block *b, const char *how) {
    if (b->pool != HOFF__POOL_MANAGED || !(b->flags & HOFF__BLK_LIVE) ||
        !(b->state == HOFF_RES_DISCARDED || (b->state == HOFF_RES_EVICTING && (b->flags & HOFF__BLK_DISCARDING))))
        return 0;
    ctx->st.discard_touches++;
    HOFF__LOG_ONCE(HOFF_LOG_ERROR, "block %p (%zu bytes) was %s after hoff released it: its contents are "
                   "lost (a plan or use-window error; counted in discard_touches)", b->ptr, b->size, how);
    return 1;
}

static int access_marked(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s, int write) {
    struct hoff__event_info e;
    int rc;

    if (!write) /* a write makes the contents anew; a read would see none */
        released_use(ctx, b, "read (hoff_access)");
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_ACCESS;
    e.stream = s;
    e.write = write;
    e.b = b;
    hoff__pipe_before(ctx, &e);
    rc = hoff__res_access(ctx, b, write, s);
    hoff__pipe_after(ctx, &e);
    return rc;
}

static int access_read(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    return access_marked(ctx, b, s, 0);
}

static int access_write(struct hoff_ctx *ctx, struct hoff__block *b, hoff_stream s) {
    return access_marked(ctx, b, s, 1);
}

HOFF_API int hoff_access(hoff_ctx *ctx, void *ptr, int write, hoff_stream stream) {
    return with_block(ctx, ptr, "hoff_access", write ? access_write : access_read, stream);
}

HOFF_API int hoff_residency(hoff_ctx *ctx, const void *ptr) {
    struct hoff__block *b;
    int st;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    if (ctx->res.inf_head)
        hoff__res_poll(ctx);
    b = hoff__bt_lookup(&ctx->table, ptr);
    st = b ? b->state : hoff__error(-EINVAL, "hoff_residency: %p is not a live hoff block", ptr);
    UNLOCK(ctx);
    return st;
}

HOFF_API int hoff_sync(hoff_ctx *ctx) {
    int rc;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    hoff__res_wait_all(ctx);
    rc = ctx->be->ops->sync(ctx->be);
    UNLOCK(ctx);
    return rc;
}

/* --- marks ----------------------------------------------------------------- */

HOFF_API int hoff_step_stream(hoff_ctx *ctx, hoff_stream stream) {
    if (!ctx)
        return hoff__error(-EINVAL, "hoff_step_stream: NULL context");
    LOCK(ctx);
    ctx->step_stream = stream;
    ctx->step_stream_set = 1;
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_step_begin(hoff_ctx *ctx) {
    int rc;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    if (ctx->in_step) {
        UNLOCK(ctx);
        return hoff__error(-EALREADY, "hoff_step_begin: a step is already open (missing hoff_step_end)");
    }
    hoff__res_close_windows(ctx);
    ctx->in_step = 1;
    ctx->step_start_ns = ctx->be->ops->clock_ns(ctx->be);
    rc = hoff__pipe_step_begin(ctx);
    if (rc)
        ctx->in_step = 0;
    hoff__publish_now(ctx);
    UNLOCK(ctx);
    return rc;
}

HOFF_API int hoff_step_end(hoff_ctx *ctx) {
    uint64_t now;
    int rc;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    if (!ctx->in_step) {
        UNLOCK(ctx);
        return hoff__error(-EINVAL, "hoff_step_end: no step is open");
    }
    if (ctx->region_depth) {
        UNLOCK(ctx);
        return hoff__error(-EBUSY, "hoff_step_end: %d region(s) still open", ctx->region_depth);
    }
    hoff__res_close_windows(ctx); /* the step's work is enqueued: every window closes */
    release_deferred(ctx);        /* HOFF_FREE_FENCE=device: the step's frees become reusable */
    ctx->in_step = 0;
    now = ctx->be->ops->clock_ns(ctx->be);
    ctx->st.steps++;
    ctx->st.last_step_ns = now - ctx->step_start_ns;
    rc = hoff__pipe_step_end(ctx);
    hoff__guard_sample(ctx); /* once a step: the device memory that is not hoff's */
    hoff__publish_now(ctx);
    UNLOCK(ctx);
    return rc;
}

HOFF_API int hoff_step_abort(hoff_ctx *ctx) {
    int rc;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    if (!ctx->in_step) {
        UNLOCK(ctx);
        return hoff__error(-EINVAL, "hoff_step_abort: no step is open");
    }
    /* Transfers land first, so every block is in a settled state. */
    hoff__res_close_windows(ctx);
    hoff__res_wait_all(ctx);
    ctx->be->ops->sync(ctx->be);
    ctx->in_step = 0;
    ctx->region_depth = 0;
    rc = hoff__pipe_step_abort(ctx);
    UNLOCK(ctx);
    return rc;
}

HOFF_API int hoff_mark_op(hoff_ctx *ctx, const char *name) {
    struct hoff__event_info e;

    if (!ctx)
        return -EINVAL;
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_OP;
    e.name = name;
    LOCK(ctx);
    /* The previous op's work is enqueued: its use windows close before the
     * actions planned at this boundary fire. */
    hoff__res_close_windows(ctx);
    hoff__pipe_before(ctx, &e);
    hoff__pipe_after(ctx, &e);
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_trace_save(hoff_ctx *ctx, const char *path) {
    int rc;

    if (!ctx || !path)
        return -EINVAL;
    LOCK(ctx);
    rc = ctx->pipe.have_trace ? hoff__trace_save(&ctx->pipe.trace, path)
                              : hoff__error(-ENOENT, "hoff_trace_save: no step has been recorded yet");
    UNLOCK(ctx);
    return rc;
}

HOFF_API int hoff_region_begin(hoff_ctx *ctx) {
    struct hoff__event_info e;

    if (!ctx)
        return -EINVAL;
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_REGION_BEGIN;
    LOCK(ctx);
    hoff__pipe_before(ctx, &e);
    ctx->region_depth++;
    hoff__pipe_after(ctx, &e);
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_region_end(hoff_ctx *ctx) {
    struct hoff__event_info e;
    int rc = 0;

    if (!ctx)
        return -EINVAL;
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_REGION_END;
    LOCK(ctx);
    if (ctx->region_depth > 0) {
        hoff__pipe_before(ctx, &e);
        ctx->region_depth--;
        hoff__pipe_after(ctx, &e);
    } else {
        rc = hoff__error(-EINVAL, "hoff_region_end: no region is open");
    }
    UNLOCK(ctx);
    return rc;
}

HOFF_API int hoff_sim_compute(hoff_ctx *ctx, hoff_stream stream, uint64_t ns) {
    int rc;

    if (!ctx)
        return -EINVAL;
    LOCK(ctx);
    /* Commands queued so far take their place on the virtual timeline
     * before it moves (see finish() in residency.c). */
    hoff__issuer_drain(ctx->issuer);
    rc = ctx->be->ops->compute(ctx->be, stream, ns);
    if (ctx->res.inf_head)
        hoff__res_poll(ctx);
    UNLOCK(ctx);
    return rc;
}

/* A page fault on a block that is away (python -m hoff --sim): page it in as
 * an access does; a block the plan released is an error, counted. */
static int touch_block(struct hoff_ctx *ctx, struct hoff__block *b, int write) {
    uint64_t faults = ctx->st.faults;
    int dropped, rc;

    if (b->pool != HOFF__POOL_MANAGED)
        return 0; /* device pool: never away */
    dropped = released_use(ctx, b, "touched");
    rc = hoff__res_access(ctx, b, write, NULL);
    if (dropped) {
        return hoff__error(-ENODATA, "hoff_sim_touch: block %p was released (discarded) before this use",
                           b->ptr);
    }
    ctx->st.touch_faults += ctx->st.faults - faults; /* 0 when it was resident, or only late */
    return rc;
}

HOFF_API int hoff_sim_touch(hoff_ctx *ctx, void *ptr, int write) {
    struct hoff__block *b;
    int rc;

    if (!ctx)
        return -EINVAL;
    if (strcmp(ctx->be->ops->name, "sim") != 0)
        return hoff__error(-ENOTSUP, "hoff_sim_touch: the %s backend pages in by itself; only sim needs it",
                           ctx->be->ops->name);
    LOCK(ctx);
    b = hoff__bt_lookup(&ctx->table, ptr);
    rc = b ? touch_block(ctx, b, write)
           : hoff__error(-EINVAL, "hoff_sim_touch: %p is not a live hoff block", ptr);
    hoff__publish_tick(ctx, NULL);
    UNLOCK(ctx);
    return rc;
}

/* --- statistics ------------------------------------------------------------ */

void hoff__stats_snapshot(struct hoff_ctx *ctx, struct hoff_stats *out) {
    struct hoff__issuer_stats is;
    struct hoff__pool *dp, *mp;

    dp = &ctx->pools[HOFF__POOL_DEVICE];
    mp = &ctx->pools[HOFF__POOL_MANAGED];
    *out = ctx->st;
    out->device_pool_bytes = dp->mapped_bytes;
    out->managed_pool_bytes = mp->mapped_bytes;
    out->device_in_use_bytes = dp->in_use_bytes;
    out->managed_in_use_bytes = mp->in_use_bytes;
    out->cache_hits = dp->hits + mp->hits;
    out->cache_misses = dp->misses + mp->misses;
    out->cross_stream_reuses = dp->cross_stream + mp->cross_stream;
    out->fence_syncs += dp->reuse_syncs + mp->reuse_syncs;
    out->live_blocks = ctx->table.count;
    out->deferred_frees = dp->deferred_frees;
    out->deferred_bytes = dp->deferred_bytes;
    out->graph_private_bytes = ctx->graph_pool.mapped_bytes;
    hoff__issuer_stats(ctx->issuer, &is); /* its own lock, taken under ctx->lock as pushes do */
    out->queue_depth_max = is.depth_max;
    {
        struct hoff__sim_counters sc; /* the sim's own check of the use windows */

        if (hoff__sim_counters(ctx->be, &sc) == 0)
            out->window_violations = sc.window_violations;
    }
    if (ctx->be->ops->counters) { /* what the backend gave up on */
        struct hoff__be_counters bc;

        memset(&bc, 0, sizeof bc);
        if (ctx->be->ops->counters(ctx->be, &bc) == 0) {
            out->numa_refusals = bc.numa_refusals;
            out->discard_fallbacks = bc.discard_fallbacks;
            out->host_drop_refusals = bc.drop_refusals;
        }
    }
    if (ctx->nvme) { /* the tier's own clocks and checks */
        struct hoff__nvme_stats ns;
        hoff__nvme_stats(ctx->nvme, &ns);
        out->spill_ns = ns.spill_ns;
        out->restore_ns = ns.restore_ns;
        out->crc_errors = ns.crc_errors;
    }
}

HOFF_API int hoff_stats_get(hoff_ctx *ctx, struct hoff_stats *out) {
    if (!ctx || !out)
        return -EINVAL;
    LOCK(ctx);
    if (ctx->res.inf_head)
        hoff__res_poll(ctx);
    hoff__stats_snapshot(ctx, out);
    hoff__publish_write(ctx, out); /* what the caller reads, hoff-stat reads */
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_stats_json(hoff_ctx *ctx, char *buf, size_t len) {
    struct hoff_stats st;
    int rc = hoff_stats_get(ctx, &st);

    return rc ? rc : hoff_stats_format_json(&st, buf, len);
}
