/* hostcap.h — the host tier's cap rule, written once for the runtime (mem/res_room.c), its prediction
 * (plan/model.c) and the planners' candidates (plan/plan.c), which must agree.  Threading: pure functions of the counts
 * they are given. */
#ifndef HOFF_HOSTCAP_H
#define HOFF_HOSTCAP_H

#include <stdint.h>

/* Both count the host tier the same way: `host` bytes on the host (spills in flight included), `to_host`
 * bytes on their way there (evictions and restores in flight), `spilling` and `from_host` bytes on their way
 * off it (spills, prefetches in flight); cap is HOFF_HOST_CAP (0: none). */

/* Can the host tier ever take a block of `bytes`?  An eviction lands on the host first, so a block larger
 * than the cap can never leave the device: no victim (room.h's hoff__room_victim), no candidate (plan.c). */
static inline int hoff__host_takes(uint64_t cap, uint64_t bytes) {
    return !cap || bytes <= cap;
}

/* Would `bytes` more (an eviction or a restore) take the host tier over its cap? */
static inline int hoff__host_full(uint64_t cap, uint64_t host, uint64_t to_host, uint64_t bytes) {
    return cap && host + to_host + bytes > cap;
}

/* With the host full: is what is already leaving it too little, so that another block must be spilled? */
static inline int hoff__host_spill_more(uint64_t cap, uint64_t host, uint64_t to_host, uint64_t spilling,
                                        uint64_t from_host, uint64_t bytes) {
    return host - spilling - from_host + to_host + bytes > cap;
}

#endif
