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
#include "mem/residency.h"

int hoff__guard_init(struct hoff_ctx *ctx) {
    uint64_t free_b = 0, total_b = 0;
    char a[32], b[32], c[32];
    int rc;

    rc = ctx->be->ops->mem_info(ctx->be, &free_b, &total_b);
    if (rc)
        return hoff__error(rc, "cannot read the device's memory size (%s)", hoff_strerror(rc));
    ctx->guard.total = total_b;
    hoff__guard_sample(ctx); /* the baseline: what others hold before hoff maps anything */
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

/* Device memory hoff may hold by its books: the device pool, and every
 * mapped managed byte not known to be on the host. */
static uint64_t on_device(const struct hoff_ctx *ctx) {
    const struct hoff__pool *mp = &ctx->pools[HOFF__POOL_MANAGED];
    uint64_t host = ctx->res.host;

    return ctx->pools[HOFF__POOL_DEVICE].mapped_bytes + (mp->mapped_bytes > host ? mp->mapped_bytes - host : 0);
}

int hoff__guard_check(void *arg, size_t bytes) {
    struct hoff_ctx *ctx = arg;
    uint64_t free_b = 0, total_b = 0, margin = ctx->cfg.oversub_margin_bytes;
    uint64_t on_dev;
    char a[32], b[32], c[32];
    int rc;

    if (ctx->cfg.oversubscribe)
        return 0;
    rc = ctx->be->ops->mem_info(ctx->be, &free_b, &total_b);
    if (rc)
        return rc;
    on_dev = on_device(ctx);
    if (on_dev + bytes + margin > total_b || bytes + margin > free_b) {
        ctx->st.oversub_refusals++;
        return hoff__error(-EOVERFLOW,
                           "refusing to map %s of managed memory: the device has %s free of %s and "
                           "hoff holds %s there, with %s kept free (HOFF_OVERSUB_MARGIN); "
                           "set HOFF_OVERSUBSCRIBE=1 to allow it",
                           hoff__fmt_size(bytes, a, sizeof a), hoff__fmt_size(free_b, b, sizeof b),
                           hoff__fmt_size(total_b, c, sizeof c),
                           hoff__fmt_size(on_dev, (char[32]){0}, 32),
                           hoff__fmt_size(margin, (char[32]){0}, 32));
    }
    return 0;
}

uint64_t hoff__guard_cap(const struct hoff_ctx *ctx) {
    uint64_t pool = ctx->pools[HOFF__POOL_DEVICE].mapped_bytes + ctx->guard.growing;
    uint64_t margin = ctx->cfg.oversub_margin_bytes;

    if (ctx->cfg.oversubscribe || !ctx->guard.total)
        return 0;
    /* At least one byte: 0 would mean "no limit". */
    return pool + margin < ctx->guard.total ? ctx->guard.total - pool - margin : 1;
}

int hoff__guard_check_device(void *arg, size_t bytes) {
    struct hoff_ctx *ctx = arg;
    uint64_t pool = ctx->pools[HOFF__POOL_DEVICE].mapped_bytes;
    char a[32], b[32], c[32];
    int rc;

    if (!ctx->guard.total)
        return 0;
    if (pool + bytes > ctx->guard.total) /* no driver can map that: say so before asking */
        return hoff__error(-ENOMEM, "cannot grow the device pool by %s: it holds %s of the device's %s",
                           hoff__fmt_size(bytes, a, sizeof a), hoff__fmt_size(pool, b, sizeof b),
                           hoff__fmt_size(ctx->guard.total, c, sizeof c));
    if (ctx->cfg.oversubscribe)
        return 0; /* the user lets the driver share the device as it likes */
    /* Make the room now, and wait for it, rather than leave the driver to
     * evict hoff's blocks for cudaMalloc, behind hoff's books. */
    ctx->guard.growing = bytes;
    rc = hoff__res_fit_device(ctx);
    ctx->guard.growing = 0;
    if (rc)
        hoff__log(HOFF_LOG_DEBUG, "the device pool grows by %s while offload blocks that cannot move hold "
                  "the room; the driver may evict some (driver_drift_bytes)", hoff__fmt_size(bytes, a, sizeof a));
    return 0;
}

void hoff__guard_sample(struct hoff_ctx *ctx) {
    uint64_t free_b = 0, total_b = 0, used, sure, seen;
    struct hoff_stats *st = &ctx->st;

    if (ctx->be->ops->mem_info(ctx->be, &free_b, &total_b) != 0 || free_b > total_b)
        return;
    used = total_b - free_b;
    /* What hoff is sure the device holds: its device pool, and the offload
     * blocks resident by its books whose moves have all landed. */
    sure = ctx->pools[HOFF__POOL_DEVICE].mapped_bytes + ctx->res.resident;
    sure = sure > ctx->res.evicting + ctx->res.from_host ? sure - ctx->res.evicting - ctx->res.from_host : 0;
    if (!ctx->guard.sampled) {
        ctx->guard.foreign0 = used > sure ? used - sure : 0;
        ctx->guard.sampled = 1;
        return;
    }
    st->driver_drift_samples++;
    seen = used > ctx->guard.foreign0 ? used - ctx->guard.foreign0 : 0; /* hoff's share, as the device sees it */
    st->driver_drift_bytes = sure > seen ? sure - seen : 0;
    if (st->driver_drift_bytes > st->driver_drift_max_bytes)
        st->driver_drift_max_bytes = st->driver_drift_bytes;
    st->device_foreign_bytes = used > sure ? used - sure : 0;
}
