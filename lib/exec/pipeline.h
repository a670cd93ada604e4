/* pipeline.h — the pipeline's entry points on a context (pipeline.c): the life of steps, the events around every API
 * call, the allocations a plan's groups serve.  The top layer: the pipeline reads the context's options and step
 * state and drives the memory layer and the executors (exec/executor.h) with their own parts of it.
 * Threading: caller holds the context lock. */
#ifndef HOFF_PIPELINE_H
#define HOFF_PIPELINE_H

#include <stdint.h>

#include "exec/executor.h"

struct hoff_ctx;

void hoff__pipe_init(struct hoff_ctx *ctx);
void hoff__pipe_destroy(struct hoff_ctx *ctx);

/* Step marks: 0 or -errno (-ENOMEM recording; a planning failure is logged
 * and leaves the context a plain caching allocator with the budget kept
 * online, not an error of the step). */
int hoff__pipe_step_begin(struct hoff_ctx *ctx);
int hoff__pipe_step_end(struct hoff_ctx *ctx);
/* The step failed (an exception in the framework): a warmup's recording is
 * dropped (the next step records again); a replay's remaining actions count
 * as skipped and the plan stays.  Caller has waited for the transfers. */
int hoff__pipe_step_abort(struct hoff_ctx *ctx);

/* The memory layer's policy (mem/mem.h) from the pipeline and the context's step state, pushed down: after every
 * change of either. */
void hoff__pipe_policy(struct hoff_ctx *ctx);

/* Replay: the block of allocation e (the next one of the step) from its
 * group's region when the plan has it in a group and the step still
 * follows the plan; NULL to allocate normally (not grouped, groups off,
 * diverged, inside a region, the region refused or its slot busy). */
struct hoff__block *hoff__pipe_alloc(struct hoff_ctx *ctx, const struct hoff__event_info *e, int cls);

/* Around every event of a step: `before` runs first (replay: checks the
 * event against the plan and fires the actions planned before it), then the
 * API does its work, then `after` (warmup: records it; replay: binds a new
 * block and fires the actions planned after it).  No-ops outside a step. */
void hoff__pipe_before(struct hoff_ctx *ctx, struct hoff__event_info *e);
void hoff__pipe_after(struct hoff_ctx *ctx, struct hoff__event_info *e);

/* Replay: the step's next event is the allocation of size bytes of a block
 * the recorded step kept (it goes outside the budget: ctx_alloc.c). */
int hoff__pipe_kept_next(const struct hoff_ctx *ctx, uint64_t size);

#endif
