/* guard.h — the oversubscription guard: refuse to map managed memory the device cannot hold (DESIGN.md item 5).
 * Threading: caller holds the context lock. */
#ifndef HOFF_GUARD_H
#define HOFF_GUARD_H

#include <stddef.h>
#include <stdint.h>

struct hoff_ctx;

/* Check the configuration against the device at start-up: a budget the
 * device cannot hold is an error (-EINVAL with a message). */
int hoff__guard_init(struct hoff_ctx *ctx);

/* The managed pool's map check (hoff__pool_map_check): 0 when `bytes` more
 * managed memory fits, -EOVERFLOW (counted, with a message) when it would
 * oversubscribe the device and the user has not opted in. */
int hoff__guard_check(void *ctx, size_t bytes);

#endif
