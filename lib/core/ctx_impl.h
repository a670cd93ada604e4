/* ctx_impl.h — what the pieces of the context's entry points share: context.c (life cycle), ctx_alloc.c
 * (allocation and free), ctx_step.c (residency actions and the step's marks) and ctx_stats.c (counters): the
 * context lock's shorthand and the helpers more than one of them calls.
 * Threading: the helpers run with ctx->lock held. */
#ifndef HOFF_CTX_IMPL_H
#define HOFF_CTX_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "core/context.h"
#include "core/core.h"
#include "core/publish.h"

#define LOCK(ctx) pthread_mutex_lock(&(ctx)->lock)
#define UNLOCK(ctx) pthread_mutex_unlock(&(ctx)->lock)

/* HOFF_FREE_FENCE=device: wait for the whole device, then the deferred
 * frees are safe to reuse (ctx_alloc.c).  Caller holds the lock. */
void hoff__ctx_release_deferred(struct hoff_ctx *ctx);

/* The settled state: every transfer has landed, then the device is idle
 * (hoff_sync, a step's abort, the cache flush, shutdown).  The backend's
 * sync result.  Caller holds the lock. */
static inline int hoff__ctx_settle(struct hoff_ctx *ctx) {
    hoff__res_wait_all(&ctx->mem);
    return ctx->mem.be->ops->sync(ctx->mem.be);
}

/* The live block at ptr: 0 and *out, or -EINVAL with "<what>: <ptr> is not
 * a live hoff block" said (*out NULL).  Caller holds the lock. */
static inline int hoff__ctx_block(struct hoff_ctx *ctx, const void *ptr, const char *what, struct hoff__block **out) {
    *out = hoff__bt_lookup(&ctx->mem.table, ptr);
    return *out ? 0 : hoff__error(-EINVAL, "%s: %p is not a live hoff block", what, ptr);
}

/* The event path's slow half (ctx_stats.c): write the segment if its
 * interval has passed since the last write. */
void hoff__publish_event(struct hoff_ctx *ctx);

/* After an allocator event (caller holds ctx->lock).  count is a counter the
 * event has just incremented anyway (allocs, frees), or NULL for the
 * publisher's own: every HOFF__PUB_TICK_MASK + 1 events the clock is read
 * and, HOFF__PUB_INTERVAL_NS after the last write, the segment is written.
 * The rest of the time this costs an AND and a branch on a hot counter. */
#define hoff__publish_tick(ctx, count)                                                                           \
    do {                                                                                                         \
        const uint64_t *c_ = (count);                                                                            \
        struct hoff__publisher *pub_ = (ctx)->pub;                                                               \
        if (__builtin_expect(                                                                                    \
                c_ ? (*c_ & HOFF__PUB_TICK_MASK) == 0 : pub_ && (++pub_->tick & HOFF__PUB_TICK_MASK) == 0, 0) && \
            pub_)                                                                                                \
            hoff__publish_event(ctx);                                                                            \
    } while (0)

#endif
