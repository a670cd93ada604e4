/* res_internal.h — the interface between the pieces of the runtime's residency, one concern a file and lowest
 * first, each calling only the files before it (tests/layers.sh checks the order, doc/design.md lists it):
 * res_fence.c (use windows and move fences), res_state.c (the state machine, the lists and the byte books),
 * res_xfer.c (issuing and retiring transfers), res_room.c (making room on the device and the host), residency.c
 * (the actions residency.h declares).  Threading: caller holds the context lock, as for residency.h. */
#ifndef HOFF_RES_INTERNAL_H
#define HOFF_RES_INTERNAL_H

#include <stdint.h>

#include "mem/mem.h"
#include "mem/block.h"
#include "mem/residency.h"

#define S_DEV HOFF_RES_DEVICE
#define S_EVI HOFF_RES_EVICTING
#define S_HOST HOFF_RES_HOST
#define S_PRE HOFF_RES_PREFETCHING
#define S_DIS HOFF_RES_DISCARDED
#define S_SPI HOFF_RES_SPILLING
#define S_NVM HOFF_RES_NVME
#define S_RES HOFF_RES_RESTORING

static inline int hoff__res_in_flight(int st) {
    return st == S_EVI || st == S_PRE || st == S_SPI || st == S_RES;
}

static inline int hoff__res_evictable(const struct hoff__block *b) {
    return !(b->flags & HOFF__BLK_PINNED);
}

/* The lists of struct hoff__residency (res_state.c keeps them by state): append at the tail, remove anywhere. */
static inline void hoff__res_list_append(struct hoff__block **head, struct hoff__block **tail, struct hoff__block *b) {
    b->next = NULL;
    b->prev = *tail;
    if (*tail)
        (*tail)->next = b;
    else
        *head = b;
    *tail = b;
}

static inline void hoff__res_list_remove(struct hoff__block **head, struct hoff__block **tail, struct hoff__block *b) {
    if (b->prev)
        b->prev->next = b->next;
    else
        *head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        *tail = b->prev;
    b->next = b->prev = NULL;
}

#define HOFF__RES_LRU(mem) &(mem)->res.lru_head, &(mem)->res.lru_tail
#define HOFF__RES_INF(mem) &(mem)->res.inf_head, &(mem)->res.inf_tail
#define HOFF__RES_HOSTL(mem) &(mem)->res.host_head, &(mem)->res.host_tail

/* --- res_fence.c: use windows and the fences of a move (calls no other residency file) ----------------------- */

/* Fence moving blocks m[0..n) away after the work queued on every stream they were used on. */
int hoff__res_fence_move(struct hoff__mem *mem, struct hoff__block *const *m, unsigned n, struct hoff__cmd *cmd);
/* Open b's use window on stream s (an access, its allocation). */
void hoff__res_window_open(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
/* 0, or -EBUSY (counted in window_refusals) when b's use window is open: nothing may `what` it. */
int hoff__res_window_closed(struct hoff__mem *mem, const struct hoff__block *b, const char *what);

/* --- res_state.c: transitions and books (may call res_fence.c) -------------------------------------------- */

/* The block enters state st: move it between lists (LRU on the device, in flight, on the host). */
void hoff__res_set_state(struct hoff__mem *mem, struct hoff__block *b, int st);
/* Publish the byte counters in the stats (peaks, budget overruns). */
void hoff__res_note_resident(struct hoff__mem *mem);
/* The spilled copy is dead (freed, discarded): give its file space back. */
void hoff__res_drop_spill(struct hoff__mem *mem, struct hoff__block *b);

/* --- res_xfer.c: issuing and retiring transfers (may call res_state.c, res_fence.c) ----------------------- */

enum hoff__res_wait {
    HOFF__WAIT_SYNC, /* the host asked to wait (hoff_sync, shutdown): not a stall */
    HOFF__WAIT_USE,  /* compute needs the block or the room: a stall */
    HOFF__WAIT_LATE, /* compute uses a block whose prefetch has not landed */
};

/* The command that moves m[0..n) (one block, or a group's members tiling (ptr, size)) with op, carried by m[0]:
 * its events made, fenced (a move away after every stream the blocks were used on, a move back after s), and
 * filled in.  0 or -errno. */
int hoff__res_cmd_prepare(struct hoff__mem *mem, struct hoff__block *const *m, unsigned n, int op, void *ptr,
                          size_t size, hoff_stream s, struct hoff__cmd *cmd);
/* Queue command op for b on the issuing thread (HOFF__CMD_RUN: run() on the tier thread), fenced. */
int hoff__res_issue_run(struct hoff__mem *mem, struct hoff__block *b, int op,
                        int (*run)(void *, const struct hoff__cmd *), hoff_stream s);
int hoff__res_issue(struct hoff__mem *mem, struct hoff__block *b, int op, hoff_stream s);
/* The block whose command carries b's transfer: b, or its group's leader. */
struct hoff__block *hoff__res_carrier(struct hoff__block *b);
/* Wait until b's transfer is over and retire it. */
void hoff__res_finish(struct hoff__mem *mem, struct hoff__block *b, enum hoff__res_wait why);
/* Write a host block to the NVMe tier (on the tier thread). */
int hoff__res_start_spill(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);

/* --- res_room.c: making room on the device and the host (may call res_xfer.c, res_state.c) ---------------- */

/* Why hoff__res_make_room could not make room: the cause the messages name. */
enum hoff__room_why {
    HOFF__WHY_NOTHING,   /* every resident block is in use or pinned */
    HOFF__WHY_OVER_CAP,  /* what is left is larger than the host cap */
    HOFF__WHY_EVICT_ERR, /* an eviction was refused (hoff_last_error says why) */
};

/* Can the host tier ever take b? */
int hoff__res_fits_host(const struct hoff__mem *mem, const struct hoff__block *b);
/* Would one more eviction (or restore) of `bytes` take the host tier over its cap? */
int hoff__res_host_full(const struct hoff__mem *mem, uint64_t bytes);
/* Make room on the host tier for `bytes` more, never spilling keep: 0 or -HOFF_EHOSTCAP. */
int hoff__res_make_host_room(struct hoff__mem *mem, uint64_t bytes, const struct hoff__block *keep, hoff_stream s);
/* Start evicting b: host room first. */
int hoff__res_start_evict(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
/* Make resident + need fit in the budget, never evicting keep: 0, or -ENOSPC with the cause in *why. */
int hoff__res_make_room(struct hoff__mem *mem, uint64_t need, struct hoff__block *keep, hoff_stream s,
                        enum hoff__room_why *why);
/* Why no more room could be made, in words. */
const char *hoff__res_room_cause(const struct hoff__mem *mem, enum hoff__room_why why, char *buf, size_t len);
/* The budget is passed (counted by note_resident): say why, once per cause. */
void hoff__res_overrun(struct hoff__mem *mem, uint64_t need, enum hoff__room_why why);
/* A new offload candidate that the host tier can never take: count it, say so once. */
void hoff__res_check_host_cap(struct hoff__mem *mem, const struct hoff__block *b);

/* --- residency.c: the actions of residency.h (may call every file above) ---------------------------------- */

/* Bring a block on the NVMe tier (or on its way there or back) to the host, waiting for it. */
int hoff__res_to_host_now(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);

#endif
