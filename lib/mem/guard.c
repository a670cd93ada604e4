/* guard.c — the oversubscription guard: managed memory is mapped only while the device can hold it.
 * Threading: caller holds the context lock.
 *
 * Two tests, both must pass unless HOFF_OVERSUBSCRIBE=1:
 *  1. hoff's own books: device-pool bytes + managed bytes that hold device
 *     memory (every mapped managed byte that is not known to be on the
 *     host) + the new bytes + the margin <= the device's total.  A fresh
 *     cudaMallocManaged mapping has no pages until first touch, so
 *     cudaMemGetInfo alone would let a burst of mappings through.
 *  2. the device's word: the new bytes + the margin <= what it reports free
 *     (other processes share the GPU). */
#include "config.h"

#include <errno.h>

#include "core/context.h"
#include "core/core.h"
#include "mem/guard.h"

int hoff__guard_init(struct hoff_ctx *ctx) {
    uint64_t free_b = 0, total_b = 0;
    char a[32], b[32], c[32];
    int rc;

    rc = ctx->be->ops->mem_info(ctx->be, &free_b, &total_b);
    if (rc)
        return hoff__error(rc, "cannot read the device's memory size (%s)", hoff_strerror(rc));
    if (ctx->cfg.oversubscribe || !ctx->cfg.budget_bytes)
        return 0;
    if (ctx->cfg.budget_bytes + ctx->cfg.oversub_margin_bytes > total_b)
        return hoff__error(-EINVAL,
                           "HOFF_BUDGET=%s does not fit the device: it has %s in all and %s is kept free "
                           "(HOFF_OVERSUB_MARGIN); lower the budget, or set HOFF_OVERSUBSCRIBE=1 to allow it",
                           hoff__fmt_size(ctx->cfg.budget_bytes, a, sizeof a),
                           hoff__fmt_size(total_b, b, sizeof b),
                           hoff__fmt_size(ctx->cfg.oversub_margin_bytes, c, sizeof c));
    return 0;
}

int hoff__guard_check(void *arg, size_t bytes) {
    struct hoff_ctx *ctx = arg;
    struct hoff__pool *mp = &ctx->pools[HOFF__POOL_MANAGED];
    uint64_t free_b = 0, total_b = 0, margin = ctx->cfg.oversub_margin_bytes;
    uint64_t on_device, host;
    char a[32], b[32], c[32];
    int rc;

    if (ctx->cfg.oversubscribe)
        return 0;
    rc = ctx->be->ops->mem_info(ctx->be, &free_b, &total_b);
    if (rc)
        return rc;
    host = ctx->res.host;
    on_device = ctx->pools[HOFF__POOL_DEVICE].mapped_bytes +
                (mp->mapped_bytes > host ? mp->mapped_bytes - host : 0);
    if (on_device + bytes + margin > total_b || bytes + margin > free_b) {
        ctx->st.oversub_refusals++;
        return hoff__error(-EOVERFLOW,
                           "refusing to map %s of managed memory: the device has %s free of %s and "
                           "hoff holds %s there, with %s kept free (HOFF_OVERSUB_MARGIN); "
                           "set HOFF_OVERSUBSCRIBE=1 to allow it",
                           hoff__fmt_size(bytes, a, sizeof a), hoff__fmt_size(free_b, b, sizeof b),
                           hoff__fmt_size(total_b, c, sizeof c),
                           hoff__fmt_size(on_device, (char[32]){0}, 32),
                           hoff__fmt_size(margin, (char[32]){0}, 32));
    }
    return 0;
}
