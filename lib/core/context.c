/* context.c — the context's life cycle: hoff_init (options, rank, backend, pools, issuing threads, tiers, the
 * stats segment) and hoff_shutdown, and the names a context reports.  The other entry points are ctx_alloc.c,
 * ctx_step.c and ctx_stats.c.
 * Threading: hoff_init builds a context no other thread sees yet; hoff_shutdown takes ctx->lock, and no other call
 * may run on the context during or after it. */
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
#include "core/ctx_impl.h"
#include "core/options.h"
#include "core/publish.h"
#include "mem/guard.h"
#include "mem/swapgroup.h"
#include "tier/host.h"
#include "tier/nvme.h"

static int open_backend(struct hoff_ctx *ctx) {
    int rc;

    switch (ctx->cfg.backend) {
    case HOFF_BACKEND_SIM: return hoff__backend_open_sim(&ctx->cfg, &ctx->mem.be);
    case HOFF_BACKEND_CUDA: return hoff__backend_open_cuda(&ctx->cfg, &ctx->mem.be);
    default:
        rc = hoff__backend_open_cuda(&ctx->cfg, &ctx->mem.be);
        if (rc == 0)
            return 0;
        hoff__log(HOFF_LOG_INFO, "no usable GPU (%s): using the sim backend", hoff_last_error());
        return hoff__backend_open_sim(&ctx->cfg, &ctx->mem.be);
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
        (rc = hoff__path_expand(ctx->trace_path, sizeof ctx->trace_path, ctx->cfg.trace_path, &ctx->rank, "HOFF_TRACE",
                                err, sizeof err)) != 0)
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
            return hoff__error(-EPERM,
                               "HOFF_SPILL_DIR=%s: %s is not a directory of this user (a link or another "
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

    if (ctx->mem.be->ops->pci_bus_id && ctx->mem.be->ops->pci_bus_id(ctx->mem.be, bus, sizeof bus) == 0)
        busid = bus;
    rc = hoff__host_tier_open(&ctx->mem.host_tier, ctx->cfg.numa, busid, NULL, 0);
    if (rc)
        return rc; /* a bad HOFF_NUMA: the message says why */
    hoff__log(HOFF_LOG_INFO, "host tier: %s", hoff__host_tier_describe(ctx->mem.host_tier, desc, sizeof desc));
    if (!ctx->spill_dir[0])
        return 0;
    rc = hoff__nvme_open(&ctx->mem.nvme, ctx->spill_dir, (size_t)ctx->cfg.spill_chunk_bytes, ctx->cfg.io_queue_depth,
                         ctx->mem.host_tier, NULL);
    if (rc)
        goto fail;
    rc = hoff__issuer_start(&ctx->mem.tier_issuer, ctx->mem.be, 64, hoff__res_cmd_done, &ctx->mem);
    if (rc) {
        hoff__error(rc, "cannot start the NVMe tier's thread");
        goto fail;
    }
    hoff__log(HOFF_LOG_INFO, "NVMe tier in %s: %s", ctx->spill_dir, hoff__nvme_mode(ctx->mem.nvme, desc, sizeof desc));
    return 0;
fail:
    if (ctx->mem.nvme)
        hoff__nvme_close(ctx->mem.nvme);
    ctx->mem.nvme = NULL;
    hoff__host_tier_close(ctx->mem.host_tier);
    ctx->mem.host_tier = NULL;
    return rc;
}

static void close_tiers(struct hoff_ctx *ctx) {
    if (ctx->mem.tier_issuer)
        hoff__issuer_stop(ctx->mem.tier_issuer);
    if (ctx->mem.nvme)
        hoff__nvme_close(ctx->mem.nvme);
    if (ctx->mem.host_tier)
        hoff__host_tier_close(ctx->mem.host_tier);
    ctx->mem.tier_issuer = NULL;
    ctx->mem.nvme = NULL;
    ctx->mem.host_tier = NULL;
}

void hoff__ctx_push_limits(struct hoff_ctx *ctx) {
    ctx->mem.lim.budget_bytes = ctx->cfg.budget_bytes;
    ctx->mem.lim.host_cap_bytes = ctx->cfg.host_cap_bytes;
    ctx->mem.lim.oversub_margin_bytes = ctx->cfg.oversub_margin_bytes;
    ctx->mem.lim.oversubscribe = ctx->cfg.oversubscribe;
}

/* hoff_init's work; every failure below says why, and hoff_init makes the message its own. */
/* The options of a new context: cfg (checked against this library's version) or, with none, the HOFF_* variables;
 * validated, and the job's rank resolved.  0 or -errno with the message. */
static int init_config(struct hoff_ctx *ctx, const struct hoff_config *cfg) {
    char err[512];
    int rc;

    if (cfg) {
        if (cfg->version != HOFF_CONFIG_VERSION || cfg->size != sizeof *cfg)
            return hoff__error(-EINVAL,
                               "hoff_init: config version %u size %u, this library expects "
                               "version %d size %zu (call hoff_config_init)",
                               cfg->version, cfg->size, HOFF_CONFIG_VERSION, sizeof *cfg);
        ctx->cfg = *cfg;
    } else {
        hoff_config_init(&ctx->cfg);
        rc = hoff_config_from_env(&ctx->cfg, err, sizeof err);
        if (rc) {
            hoff__log(HOFF_LOG_ERROR, "%s", err);
            return hoff__error(rc, "%s", err);
        }
    }
    rc = hoff__config_validate(&ctx->cfg, err, sizeof err);
    if (rc) {
        hoff__log(HOFF_LOG_ERROR, "%s", err);
        return hoff__error(rc, "%s", err);
    }
    hoff__log_set_level(ctx->cfg.log_level);
    if ((rc = resolve_rank(ctx)) != 0)
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
    return rc;
}

/* A budget given as a percentage becomes a size of this rank's own device.  0 or the backend's -errno. */
static int resolve_budget(struct hoff_ctx *ctx) {
    uint64_t free_b = 0, total_b = 0;
    int rc;

    if (ctx->cfg.budget_pct <= 0)
        return 0;
    if ((rc = ctx->mem.be->ops->mem_info(ctx->mem.be, &free_b, &total_b)) != 0)
        return rc;
    ctx->cfg.budget_bytes = (uint64_t)((double)total_b * ctx->cfg.budget_pct / 100.0);
    ctx->cfg.budget_pct = 0; /* resolved: the context's budget is a size from here on */
    if (ctx->cfg.budget_bytes == 0)
        ctx->cfg.budget_bytes = 1; /* a tiny percentage is still a budget, not "no limit" */
    return 0;
}

/* The memory layer on the open backend: the guard, the block table, the pools, the issuing thread and the tiers
 * below the device.  0, or -errno with everything it made undone (the backend stays open). */
static int open_memory(struct hoff_ctx *ctx) {
    struct hoff__mem *mem = &ctx->mem;
    int rc;

    hoff__ctx_push_limits(ctx);
    if ((rc = hoff__guard_init(mem)) != 0)
        return rc;
    if ((rc = hoff__bt_init(&mem->table, 1024)) != 0)
        return rc;
    hoff__pool_init(&mem->pools[HOFF__POOL_DEVICE], HOFF__POOL_DEVICE, mem->be, hoff__guard_check_device, mem);
    hoff__pool_init(&mem->pools[HOFF__POOL_MANAGED], HOFF__POOL_MANAGED, mem->be, hoff__guard_check, mem);
    hoff__pool_init_graph(&mem->graph_pool, mem->be, hoff__guard_check_device, mem);
    hoff__pool_set_reuse(&mem->graph_pool, hoff__graph_reuse_ok, ctx);
    mem->pools[HOFF__POOL_DEVICE].defer = ctx->cfg.free_fence == HOFF_FENCE_DEVICE;
    mem->pools[HOFF__POOL_DEVICE].sum = mem->pools[HOFF__POOL_MANAGED].sum = &mem->pool_sum;
    rc = hoff__issuer_start(&mem->issuer, mem->be, (size_t)ctx->cfg.issue_queue_depth, hoff__res_cmd_done, mem);
    if (rc) {
        hoff__error(rc, "cannot start the issuing thread");
        hoff__bt_destroy(&mem->table);
        return rc;
    }
    if ((rc = open_tiers(ctx)) != 0) {
        hoff__issuer_stop(mem->issuer);
        hoff__bt_destroy(&mem->table);
    }
    return rc;
}

/* The context's own figures that do not change, and its first publication. */
static void init_stats(struct hoff_ctx *ctx) {
    HOFF__STAT_SET(&ctx->st, budget_bytes, ctx->cfg.budget_bytes);
    HOFF__STAT_SET(&ctx->st, host_cap_bytes, ctx->cfg.host_cap_bytes);
    HOFF__STAT_SET(&ctx->st, rank, (uint64_t)ctx->rank.rank);
    HOFF__STAT_SET(&ctx->st, world_size, (uint64_t)ctx->rank.world_size);
    HOFF__STAT_SET(&ctx->st, local_rank, ctx->rank.local_rank > 0 ? (uint64_t)ctx->rank.local_rank : 0);
    HOFF__STAT_SET(&ctx->st, device, (uint64_t)ctx->cfg.device);
}

static int init(hoff_ctx **out, const struct hoff_config *cfg) {
    struct hoff_ctx *ctx;
    int rc;

    if (!out)
        return hoff__error(-EINVAL, "hoff_init: ctx must not be NULL");
    *out = NULL;
    ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return hoff__error(-ENOMEM, "hoff_init: out of host memory");
    if ((rc = init_config(ctx, cfg)) != 0) {
        free(ctx);
        return rc;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->mem.done_lock, NULL);
    pthread_cond_init(&ctx->mem.done_cond, NULL);
    if ((rc = open_backend(ctx)) != 0)
        goto fail;
    if ((rc = resolve_budget(ctx)) != 0 || (rc = open_memory(ctx)) != 0) {
        ctx->mem.be->ops->close(ctx->mem.be);
        goto fail;
    }
    init_stats(ctx);
    hoff__pipe_init(ctx);
    hoff__log(HOFF_LOG_INFO, "context ready: backend %s, budget %llu bytes", ctx->mem.be->ops->name,
              (unsigned long long)ctx->cfg.budget_bytes);
    if (ctx->cfg.stats_publish) /* stats for hoff-stat; never fails the init */
        ctx->pub = hoff__publish_open(ctx->cfg.planner, ctx->mem.be->ops->name, ctx->rank.job);
    hoff__publish_now(ctx); /* nobody else has ctx yet: no lock needed */
    *out = ctx;
    return 0;
fail:
    pthread_cond_destroy(&ctx->mem.done_cond);
    pthread_mutex_destroy(&ctx->mem.done_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return rc;
}

HOFF_API int hoff_init(hoff_ctx **out, const struct hoff_config *cfg) {
    unsigned seq = hoff__error_seq();

    return hoff__error_since(seq, init(out, cfg), "hoff_init");
}

static void count_leak(const void *key, void *val, void *arg) {
    struct hoff__block *b = val;
    struct hoff_ctx *ctx = arg;

    (void)key;
    if (b->graph) {
        hoff__pool_retire(&ctx->mem.graph_pool, b);
        return;
    }
    if (b->pool == HOFF__POOL_MANAGED && hoff__res_on_free(&ctx->mem, b) == 0)
        return; /* cannot happen after wait_all */
    hoff__pool_put(&ctx->mem.pools[b->pool], b, b->stream);
}

HOFF_API int hoff_shutdown(hoff_ctx *ctx) {
    size_t leaked;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_shutdown: NULL context");
    LOCK(ctx);
    ctx->shutting_down = 1;
    hoff__publish_close(ctx->pub);
    ctx->pub = NULL;
    hoff__res_wait_all(&ctx->mem);
    UNLOCK(ctx);
    hoff__issuer_stop(ctx->mem.issuer);
    if (ctx->mem.tier_issuer)
        hoff__issuer_drain(ctx->mem.tier_issuer);
    LOCK(ctx);
    hoff__ctx_settle(ctx);
    hoff__guard_close(&ctx->mem);
    hoff__groups_destroy_all(&ctx->mem);
    leaked = ctx->mem.table.count;
    if (leaked)
        hoff__log(HOFF_LOG_WARN, "shutdown with %zu blocks still allocated; releasing them", leaked);
    hoff__bt_foreach(&ctx->mem.table, count_leak, ctx);
    for (size_t i = 0; i < ctx->ncapfree; i++) /* freed during a capture that never ended */
        count_leak(NULL, ctx->capfree[i].b, ctx);
    free(ctx->capfree);
    free(ctx->gpools);
    hoff__pipe_destroy(ctx);
    close_tiers(ctx); /* after the blocks let go of their spills */
    hoff__pool_destroy(&ctx->mem.pools[HOFF__POOL_DEVICE]);
    hoff__pool_destroy(&ctx->mem.pools[HOFF__POOL_MANAGED]);
    hoff__pool_destroy(&ctx->mem.graph_pool);
    hoff__bt_destroy(&ctx->mem.table);
    ctx->mem.be->ops->close(ctx->mem.be);
    UNLOCK(ctx);
    pthread_cond_destroy(&ctx->mem.done_cond);
    pthread_mutex_destroy(&ctx->mem.done_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return 0;
}

HOFF_API const char *hoff_backend_name(const hoff_ctx *ctx) {
    return ctx && ctx->mem.be ? ctx->mem.be->ops->name : "none";
}

HOFF_API const char *hoff_planner_name(const hoff_ctx *ctx) {
    return ctx ? ctx->cfg.planner : "none";
}

HOFF_API const char *hoff_plan_state_name(int state) {
    switch (state) {
    case HOFF_PLAN_NONE: return "none";
    case HOFF_PLAN_WARMUP: return "warmup";
    case HOFF_PLAN_REPLAY: return "replay";
    case HOFF_PLAN_FALLBACK: return "fallback";
    default: return "unknown";
    }
}
