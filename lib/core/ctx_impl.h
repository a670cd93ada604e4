/* ctx_impl.h — what the pieces of the context's entry points share: context.c (life cycle), ctx_alloc.c
 * (allocation and free), ctx_step.c (residency actions and the step's marks) and ctx_stats.c (counters): the
 * context lock's shorthand and the helpers more than one of them calls.
 * Threading: the helpers run with ctx->lock held. */
#ifndef HOFF_CTX_IMPL_H
#define HOFF_CTX_IMPL_H

#include <pthread.h>

#include "core/context.h"

#define LOCK(ctx) pthread_mutex_lock(&(ctx)->lock)
#define UNLOCK(ctx) pthread_mutex_unlock(&(ctx)->lock)

/* HOFF_FREE_FENCE=device: wait for the whole device, then the deferred
 * frees are safe to reuse (ctx_alloc.c).  Caller holds the lock. */
void hoff__ctx_release_deferred(struct hoff_ctx *ctx);

#endif
