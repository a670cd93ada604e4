/* guard.h — the oversubscription guard: map only what the device can hold, and watch the driver (DESIGN.md item 5).
 * Threading: caller holds the context lock. */
#ifndef HOFF_GUARD_H
#define HOFF_GUARD_H

#include <stddef.h>
#include <stdint.h>

struct hoff_ctx;

/* What the guard keeps between calls (struct hoff_ctx.guard). */
struct hoff__guard {
    uint64_t total;        /* the device's memory, read at start */
    uint64_t growing;      /* bytes the device pool is about to map (its check is running) */
    uint64_t foreign0;     /* device memory in use at start that was not hoff's */
    int sampled;           /* foreign0 was read */
};

/* Check the configuration against the device at start-up: a budget the
 * device cannot hold is an error (-EINVAL with a message). */
int hoff__guard_init(struct hoff_ctx *ctx);

/* The managed pool's map check (hoff__pool_map_check): 0 when `bytes` more
 * managed memory fits, -EOVERFLOW (counted, with a message) when it would
 * oversubscribe the device and the user has not opted in. */
int hoff__guard_check(void *ctx, size_t bytes);

/* The device pool's map check: -ENOMEM (with a message) if the pool would
 * outgrow the device; else hoff first evicts offload blocks so that what
 * stays resident fits beside the grown pool and the margin (counted in
 * device_squeezes), and waits for them, so the driver never has to evict
 * them for cudaMalloc behind hoff's books. */
int hoff__guard_check_device(void *ctx, size_t bytes);

/* The most offload bytes hoff keeps resident beside its device pool: the
 * device's memory less the pool (and its growth in progress) and the margin;
 * 0 = no such limit (HOFF_OVERSUBSCRIBE=1, or the size is unknown). */
uint64_t hoff__guard_cap(const struct hoff_ctx *ctx);

/* Compare hoff's books with the device's free memory (step ends; one
 * mem_info call): driver_drift_bytes is what hoff counts resident beyond
 * what the device holds, device_foreign_bytes the rest of its use.  The
 * first call takes the baseline. */
void hoff__guard_sample(struct hoff_ctx *ctx);

#endif
