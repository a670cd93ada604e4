/* room.c — the decisions of making room on the device and on the host tier (room.h).
 * Threading: pure functions of their arguments; no state. */
#include "config.h"

#include "mem/room.h"

uint64_t hoff__room_budget(uint64_t budget, uint64_t floor) {
    return budget && floor > budget ? floor : budget;
}

enum hoff__room_step hoff__room_device(uint64_t resident, uint64_t evicting, uint64_t need, uint64_t budget) {
    if (!budget || resident + need <= budget)
        return HOFF__ROOM_FITS;
    return evicting < resident + need - budget ? HOFF__ROOM_EVICT : HOFF__ROOM_WAIT;
}

enum hoff__victim hoff__room_victim(int keep, int in_window, int grouped, uint64_t cap, uint64_t bytes) {
    if (keep || in_window || grouped)
        return HOFF__VICTIM_SKIP;
    return hoff__host_takes(cap, bytes) ? HOFF__VICTIM_OK : HOFF__VICTIM_OVER_CAP;
}

enum hoff__host_step hoff__room_host(const struct hoff__host_books *h, uint64_t bytes,
                                     const struct hoff__host_cands *c) {
    if (!hoff__host_full(h->cap, h->host, h->to_host, bytes))
        return HOFF__HOST_FITS;
    /* Not enough on its way off the host?  Spill (the oldest first). */
    if (c->can_spill && c->victim &&
        hoff__host_spill_more(h->cap, h->host, h->to_host, h->spilling, h->from_host, bytes))
        return HOFF__HOST_SPILL;
    /* A prefetch frees its host copy as fast as the link moves it, where a spill waits for the disk; failing
     * those, with an NVMe tier, an eviction or a restore lands a block that can then be spilled (restores in
     * flight can fill the host tier to its cap, and a use of another block on the NVMe tier must be served). */
    if (c->leaving)
        return HOFF__HOST_WAIT_LEAVING;
    if (!c->can_spill || !c->arriving)
        return HOFF__HOST_STUCK;
    return HOFF__HOST_WAIT_ARRIVING;
}
