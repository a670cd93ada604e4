/* room.h — the decisions of making room, written once for the runtime (mem/res_room.c) and its prediction
 * (plan/model.c): room in the budget on the device, and room under the cap on the host tier.  Each side executes a
 * decision with its own lists (the runtime's blocks, the model's FIFOs) and asks again after each step.
 * Threading: pure functions of the numbers they are given. */
#ifndef HOFF_ROOM_H
#define HOFF_ROOM_H

#include <stdint.h>

#include "mem/hostcap.h"

/* The budget the online policy keeps: the configured one (0: none), but while a plan for a budget below the
 * working-set floor replays (floor: that plan's floor, else 0) the floor, as no eviction can take the peak below
 * it, so none is forced beyond it. */
uint64_t hoff__room_budget(uint64_t budget, uint64_t floor);

/* One step of making `need` more resident bytes fit in `budget` (0: no budget), with `resident` bytes on the device
 * of which `evicting` are being evicted. */
enum hoff__room_step {
    HOFF__ROOM_FITS,  /* they fit: done */
    HOFF__ROOM_EVICT, /* the evictions in flight cannot free enough: evict a victim (hoff__room_victim); with none,
                         wait as for HOFF__ROOM_WAIT */
    HOFF__ROOM_WAIT,  /* they will: wait for the oldest eviction in flight, else for a prefetch in flight (it then
                         becomes a victim); with nothing to wait for there is no room */
};
enum hoff__room_step hoff__room_device(uint64_t resident, uint64_t evicting, uint64_t need, uint64_t budget);

/* May a resident movable block of `bytes` be evicted to make room?  Never the block the room is for (keep), one
 * in its use window, nor a manual group's (it moves with its group only): HOFF__VICTIM_SKIP; never one larger
 * than the host cap (an eviction lands on the host first): HOFF__VICTIM_OVER_CAP, which the caller may name. */
enum hoff__victim { HOFF__VICTIM_OK, HOFF__VICTIM_SKIP, HOFF__VICTIM_OVER_CAP };
enum hoff__victim hoff__room_victim(int keep, int in_window, int grouped, uint64_t cap, uint64_t bytes);

/* The host tier's books, as both sides count them (mem/hostcap.h): `host` bytes on the host (spills in flight
 * included), `to_host` on their way there (evictions and restores in flight), `spilling` and `from_host` on their
 * way off it (spills, prefetches that carry host bytes); cap is HOFF_HOST_CAP (0: none). */
struct hoff__host_books {
    uint64_t cap, host, to_host, spilling, from_host;
};

/* What is there to act on: can_spill (an NVMe tier that takes spills now), victim (a block on the host that may be
 * spilled: not the one the room is for, not one held while it comes back, not one with a command queued), leaving
 * (a spill or a prefetch with host bytes in flight), arriving (an eviction or a restore in flight). */
struct hoff__host_cands {
    int can_spill, victim, leaving, arriving;
};

/* One step of making room on the host tier for `bytes` more (an eviction or a restore). */
enum hoff__host_step {
    HOFF__HOST_FITS,          /* they fit: done */
    HOFF__HOST_SPILL,         /* what is leaving is not enough: spill the block that reached the host first (a
                                 failed spill: ask again with no victim) */
    HOFF__HOST_WAIT_LEAVING,  /* wait for the spill or the prefetch issued first */
    HOFF__HOST_WAIT_ARRIVING, /* wait for the eviction or restore issued first: its block can then be spilled */
    HOFF__HOST_STUCK,         /* nothing to spill or wait for: no room (the block stays where it is) */
};
enum hoff__host_step hoff__room_host(const struct hoff__host_books *h, uint64_t bytes,
                                     const struct hoff__host_cands *c);

#endif
