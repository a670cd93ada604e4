/* ctx_stats.c — a context's counters: the snapshot that folds in the pools', the issuer's, the backend's and the
 * NVMe tier's own figures, and hoff_stats_get / hoff_stats_json, which also write it to the stats segment;
 * hoff_reset_peaks; and the glue that hands snapshots to that segment's writer (publish.c).
 * Threading: hoff__stats_snapshot and the publishing glue run under ctx->lock; the entry points take it. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "core/core.h"
#include "core/ctx_impl.h"
#include "core/publish.h"
#include "tier/nvme.h"

/* --- statistics ------------------------------------------------------------ */

/* The hoff_stats fields read here from the pools, the issuer, the backend and the NVMe tier, which keep them. */
#define DERIVED_STATS(X)    \
    X(device_pool_bytes)    \
    X(managed_pool_bytes)   \
    X(device_in_use_bytes)  \
    X(managed_in_use_bytes) \
    X(cache_hits)           \
    X(cache_misses)         \
    X(cross_stream_reuses)  \
    X(live_blocks)          \
    X(deferred_frees)       \
    X(deferred_bytes)       \
    X(graph_private_bytes)  \
    X(peak_in_use_bytes)    \
    X(peak_pool_bytes)      \
    X(queue_depth_max)      \
    X(window_violations)    \
    X(numa_refusals)        \
    X(discard_fallbacks)    \
    X(host_drop_refusals)   \
    X(spill_ns)             \
    X(restore_ns)           \
    X(crc_errors)

/* Every hoff_stats field has exactly one keeper: the context, the memory layer, the pipeline or the figures above.
 * A field named twice is a duplicate enumerator here; one named nowhere (or not a field) fails the count below or
 * the copy in fold(). */
enum {
#define ONE_(name) KEEPER_##name,
    HOFF__CTX_STATS(ONE_) HOFF__MEM_STATS(ONE_) HOFF__PIPE_STATS(ONE_) DERIVED_STATS(ONE_)
#undef ONE_
        KEEPERS_
};
enum {
#define ONE_(name, desc) FIELD_##name,
    HOFF_STATS_FIELDS(ONE_)
#undef ONE_
        FIELDS_
};
_Static_assert((int)KEEPERS_ == (int)FIELDS_,
               "every hoff_stats field is kept by exactly one layer (HOFF__*_STATS lists)");

/* The layers' own counters into out, which starts from zeros. */
static void fold(const struct hoff_ctx *ctx, struct hoff_stats *out) {
    memset(out, 0, sizeof *out);
    out->version = HOFF_STATS_VERSION;
    out->size = sizeof *out;
#define CTX_(name) out->name = ctx->st.name;
#define MEM_(name) out->name = ctx->mem.st.name;
#define PIPE_(name) out->name = ctx->pipe.st.name;
    HOFF__CTX_STATS(CTX_)
    HOFF__MEM_STATS(MEM_)
    HOFF__PIPE_STATS(PIPE_)
#undef CTX_
#undef MEM_
#undef PIPE_
}

void hoff__stats_snapshot(struct hoff_ctx *ctx, struct hoff_stats *out) {
    struct hoff__issuer_stats is;
    struct hoff__pool *dp, *mp;

    dp = &ctx->mem.pools[HOFF__POOL_DEVICE];
    mp = &ctx->mem.pools[HOFF__POOL_MANAGED];
    fold(ctx, out);
    out->device_pool_bytes = dp->mapped_bytes;
    out->managed_pool_bytes = mp->mapped_bytes;
    out->device_in_use_bytes = dp->in_use_bytes;
    out->managed_in_use_bytes = mp->in_use_bytes;
    out->cache_hits = dp->hits + mp->hits;
    out->cache_misses = dp->misses + mp->misses;
    out->cross_stream_reuses = dp->cross_stream + mp->cross_stream;
    out->fence_syncs += dp->reuse_syncs + mp->reuse_syncs;
    out->live_blocks = ctx->mem.table.count;
    out->deferred_frees = dp->deferred_frees;
    out->deferred_bytes = dp->deferred_bytes;
    out->graph_private_bytes = ctx->mem.graph_pool.mapped_bytes;
    out->peak_in_use_bytes = ctx->mem.pool_sum.peak_in_use;
    out->peak_pool_bytes = ctx->mem.pool_sum.peak_mapped;
    hoff__issuer_stats(ctx->mem.issuer, &is); /* its own lock, taken under ctx->lock as pushes do */
    out->queue_depth_max = is.depth_max;
    {
        struct hoff__sim_counters sc; /* the sim's own check of the use windows */

        if (hoff__sim_counters(ctx->mem.be, &sc) == 0)
            out->window_violations = sc.window_violations;
    }
    if (ctx->mem.be->ops->counters) { /* what the backend gave up on */
        struct hoff__be_counters bc;

        memset(&bc, 0, sizeof bc);
        if (ctx->mem.be->ops->counters(ctx->mem.be, &bc) == 0) {
            out->numa_refusals = bc.numa_refusals;
            out->discard_fallbacks = bc.discard_fallbacks;
            out->host_drop_refusals = bc.drop_refusals;
        }
    }
    if (ctx->mem.nvme) { /* the tier's own clocks and checks */
        struct hoff__nvme_stats ns;
        hoff__nvme_stats(ctx->mem.nvme, &ns);
        out->spill_ns = ns.spill_ns;
        out->restore_ns = ns.restore_ns;
        out->crc_errors = ns.crc_errors;
    }
}

void hoff__publish_now(struct hoff_ctx *ctx) {
    struct hoff_stats st;

    if (!ctx->pub)
        return;
    hoff__stats_snapshot(ctx, &st);
    hoff__publish_write(ctx->pub, &st, ctx->pipe.floor_op);
}

void hoff__publish_event(struct hoff_ctx *ctx) {
    if (hoff__publish_due(ctx->pub))
        hoff__publish_now(ctx);
}

HOFF_API int hoff_stats_get(hoff_ctx *ctx, struct hoff_stats *out) {
    if (!ctx || !out)
        return hoff__error(-EINVAL, "hoff_stats_get: NULL %s", ctx ? "out" : "context");
    LOCK(ctx);
    if (ctx->mem.res.inf_head)
        hoff__res_poll(&ctx->mem);
    hoff__stats_snapshot(ctx, out);
    hoff__publish_write(ctx->pub, out, ctx->pipe.floor_op); /* what the caller reads, hoff-stat reads */
    UNLOCK(ctx);
    return 0;
}

/* The peaks restart from the current figures; step_peak_resident_bytes is
 * the step's own (hoff_step_begin restarts it). */
HOFF_API int hoff_reset_peaks(hoff_ctx *ctx) {
    if (!ctx)
        return hoff__error(-EINVAL, "hoff_reset_peaks: NULL context");
    LOCK(ctx);
    if (ctx->mem.res.inf_head)
        hoff__res_poll(&ctx->mem);
    HOFF__STAT_SET(&ctx->mem.st, peak_resident_bytes, ctx->mem.res.resident);
    HOFF__STAT_SET(&ctx->mem.st, peak_host_bytes, ctx->mem.res.host);
    HOFF__STAT_SET(&ctx->mem.st, peak_nvme_bytes, ctx->mem.res.nvme);
    ctx->mem.pool_sum.peak_in_use = ctx->mem.pool_sum.in_use;
    ctx->mem.pool_sum.peak_mapped = ctx->mem.pool_sum.mapped;
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_stats_json(hoff_ctx *ctx, char *buf, size_t len) {
    struct hoff_stats st;
    unsigned seq = hoff__error_seq();
    int rc;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_stats_json: NULL context");
    if (!buf && len)
        return hoff__error(-EINVAL, "hoff_stats_json: buf is NULL");
    rc = hoff_stats_get(ctx, &st);
    if (rc == 0)
        rc = hoff_stats_format_json(&st, buf, len);
    return hoff__error_since(seq, rc, "hoff_stats_json");
}

/* A JSON string's body: quotes, backslashes and control bytes escaped. */
static size_t json_text(char *out, size_t len, const char *s) {
    size_t n = 0;

    for (; *s && n + 7 < len; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, len - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return n;
}

HOFF_API int hoff_floor_json(hoff_ctx *ctx, char *buf, size_t len) {
    char op[sizeof ctx->pipe.floor_op * 6 + 1], advice[1024];
    uint64_t bytes, blocks, phase;
    int n;

    if (!ctx)
        return hoff__error(-EINVAL, "hoff_floor_json: NULL context");
    if (!buf && len)
        return hoff__error(-EINVAL, "hoff_floor_json: buf is NULL");
    LOCK(ctx);
    bytes = ctx->pipe.st.plan_floor_bytes;
    blocks = ctx->pipe.st.plan_floor_blocks;
    phase = ctx->pipe.st.plan_floor_phase;
    json_text(op, sizeof op, ctx->pipe.floor_op);
    UNLOCK(ctx);
    json_text(advice, sizeof advice, hoff__plan_floor_advice((unsigned)phase));
    n = snprintf(buf, len, "{\"bytes\":%llu,\"blocks\":%llu,\"op\":\"%s\",\"phase\":\"%s\",\"advice\":\"%s\"}",
                 (unsigned long long)bytes, (unsigned long long)blocks, op, hoff_phase_name((int)phase), advice);
    if (n < 0)
        return hoff__error(-EIO, "hoff_floor_json: snprintf failed");
    return n;
}
