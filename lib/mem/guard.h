/* guard.h — the oversubscription guard: map only what the device can hold, and watch the driver (DESIGN.md item 5).
 * Threading: caller holds the context lock. */
#ifndef HOFF_GUARD_H
#define HOFF_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

struct hoff__mem;
struct hoff__block;

/* What the guard keeps between calls (struct hoff__mem.guard). */
struct hoff__guard {
    uint64_t total;   /* the device's memory, read at start */
    uint64_t growing; /* bytes the device pool is about to map (its check is running) */
    /* The move being measured against the device's free memory (drift): */
    const struct hoff__block *probe;
    int probe_evict;   /* 1 an eviction, 0 a prefetch */
    int probe_spoiled; /* something else moved meanwhile: no verdict */
    uint64_t probe_free0, probe_last_ns;
    uint64_t probe_mapped0; /* both pools' mapped bytes then: a map or unmap meanwhile spoils it */
    hoff__event *fault_ev;  /* after the last page-in (on its user's stream) */
    int fault_recorded;
};

/* Check the configuration against the device at start-up: a budget the
 * device cannot hold is an error (-EINVAL with a message). */
int hoff__guard_init(struct hoff__mem *mem);

/* The managed pool's map check (hoff__pool_map_check): 0 when `bytes` more
 * managed memory fits, -EOVERFLOW (counted, with a message) when it would
 * oversubscribe the device and the user has not opted in. */
int hoff__guard_check(void *mem, size_t bytes);

/* The device pool's map check: -ENOMEM (with a message) if the pool would
 * outgrow the device; else hoff first evicts offload blocks so that what
 * stays resident fits beside the grown pool and the margin (counted in
 * device_squeezes), and waits for them, so the driver never has to evict
 * them for cudaMalloc behind hoff's books. */
int hoff__guard_check_device(void *mem, size_t bytes);

/* The most offload bytes hoff keeps resident beside its device pool: the
 * device's memory less the pool (and its growth in progress) and the margin;
 * 0 = no such limit (HOFF_OVERSUBSCRIBE=1, or the size is unknown). */
uint64_t hoff__guard_cap(const struct hoff__mem *mem);

/* Driver drift, measured on evictions (doc/design.md, "What hoff can and
 * cannot know"): an eviction of one block issued while nothing else is in
 * flight (at most one a millisecond) reads the device's free memory before
 * it and after it lands; if it freed less than the block, the driver had
 * already moved pages behind hoff's books (driver_drift_*).  Call
 * probe_issue before a transfer is pushed (evict 1 an eviction, 0 a
 * prefetch, -1 any other move; anything but the measured eviction spoils
 * it), probe_cancel if the push failed, probe_retire when a block's transfer
 * is retired. */
void hoff__guard_probe_issue(struct hoff__mem *mem, const struct hoff__block *b, int evict);
void hoff__guard_probe_cancel(struct hoff__mem *mem, const struct hoff__block *b);
void hoff__guard_probe_retire(struct hoff__mem *mem, const struct hoff__block *b, int rc);
/* A page-in or populate was queued on stream s (a block that was away or
 * discarded is used):
 * it spoils a measure in progress, and none starts before it is done.
 * Free the event with hoff__guard_close. */
void hoff__guard_fault(struct hoff__mem *mem, hoff_stream s);
void hoff__guard_close(struct hoff__mem *mem);

/* At a step's end (one mem_info call): device_foreign_bytes, the device
 * memory in use that hoff does not count as a live block. */
void hoff__guard_sample(struct hoff__mem *mem);

#endif
