/* residency.h — where each offload candidate's bytes are: the state machine, budget accounting and the actions
 * (evict, prefetch, discard, fault) issued through the issuing thread.  Threading: caller holds the context lock.
 *
 * Where each entry point lives and what it may call: the residency files are ordered lowest first, each calling
 * only the files before it (res_internal.h; tests/layers.sh checks it):
 *   res_fence.c  (calls none of them)                 hoff__res_note_stream, _close_windows, _end_use
 *   res_state.c  (may call res_fence.c)               hoff__res_next, _state_name, _event_name, _on_free
 *   res_xfer.c   (may call res_state.c, res_fence.c)  hoff__res_stream_wait, _settle, _poll, _wait_all, _cmd_done
 *   res_room.c   (may call the three above)           hoff__res_budget_room, _host_room, _fit_device
 *   residency.c  (may call all four)                  hoff__res_on_alloc, _keep, _evict, _prefetch, _discard,
 *                                                     _group, _access, _spill, _restore, _check */
#ifndef HOFF_RESIDENCY_H
#define HOFF_RESIDENCY_H

#include <stdint.h>

#include "exec/issuer.h"
#include "mem/block.h"

struct hoff__mem;

/* What happens to a block. */
enum hoff__res_event {
    HOFF__EV_EVICT = 0,  /* eviction queued */
    HOFF__EV_EVICT_DONE, /* its copy to the host completed */
    HOFF__EV_EVICT_FAIL, /* it failed: the bytes stayed on the device */
    HOFF__EV_PREFETCH,   /* prefetch queued */
    HOFF__EV_PREFETCH_DONE,
    HOFF__EV_PREFETCH_FAIL, /* the bytes stayed on the host */
    HOFF__EV_DISCARD,       /* contents dropped without a copy */
    HOFF__EV_FAULT,         /* used while not resident: paged in on demand */
    HOFF__EV_POPULATE,      /* reused from the cache: resident, contents undefined */
    HOFF__EV_SPILL,         /* spill of the host copy to the NVMe tier queued */
    HOFF__EV_SPILL_DONE,    /* written (and its host pages dropped) */
    HOFF__EV_SPILL_FAIL,    /* it failed: the bytes stayed on the host */
    HOFF__EV_RESTORE,       /* read back from the NVMe tier queued */
    HOFF__EV_RESTORE_DONE,  /* read, CRC-checked, on the host again */
    HOFF__EV_RESTORE_FAIL,  /* it failed: the spill is kept, to retry */
    HOFF__EV_COUNT
};
#define HOFF__RES_STATE_COUNT 8

/* The state after event ev in state st (>= 0), or a -errno saying why the
 * event is not legal there: -EALREADY (already where asked), -EBUSY (a
 * transfer is in flight, or the block must come off the NVMe tier first),
 * -EINVAL (cannot happen in st). */
int hoff__res_next(int st, int ev);
const char *hoff__res_state_name(int st);
const char *hoff__res_event_name(int ev);

/* Blocks on the device (LRU order) and blocks with a transfer in flight
 * (issue order); a live block is on at most one of the two lists. */
struct hoff__residency {
    struct hoff__block *lru_head, *lru_tail; /* head: least recently used */
    struct hoff__block *inf_head, *inf_tail;
    uint64_t resident;  /* live offload bytes on the device (incl. in flight) */
    uint64_t evicting;  /* of which, bytes being evicted */
    uint64_t host;      /* live offload bytes on the host */
    uint64_t to_host;   /* bytes of evictions in flight (they land on the host) */
    uint64_t spilling;  /* bytes of spills in flight (they leave the host) */
    uint64_t from_host; /* bytes of prefetches in flight (they leave the host when they land) */
    uint64_t nvme;      /* live offload bytes on the NVMe tier */
    uint64_t kept;      /* live managed bytes kept on the device (hoff_keep): outside the budget */
    struct hoff__block *host_head, *host_tail; /* blocks on the host, oldest eviction first */
    struct hoff__block *win_head;              /* blocks with an open use window */
    int marks_seen;                            /* an access mark was made (ever): until then op marks close no
                                                  window, as nothing says when a block is used */
    /* The NVMe tier refused a spill (a full disk, an I/O error): nothing more is spilled to make host room
     * until the tier gives space back (nvme below refused_nvme), the next step (steps past refused_step), a
     * second of the backend's clock after refused_ns, or a planned spill succeeds; refused_why is what the
     * tier said. */
    int spill_refused;
    uint64_t refused_nvme, refused_step, refused_ns;
    char refused_why[256];
};

/* A managed block was handed out (new or from the cache): make room in the
 * budget, make it resident and count it. */
int hoff__res_on_alloc(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
/* A managed block is being freed.  Returns 1 when it may go back to the pool
 * now, 0 when a transfer is in flight (hoff__res_poll returns it later). */
int hoff__res_on_free(struct hoff__mem *mem, struct hoff__block *b);

/* hoff_keep of a managed block (any other: 0): bring it back if it is away,
 * then pin it and move its bytes from `resident` to `kept`.  0, -EBUSY for a
 * manual group's member, or paging in's error. */
int hoff__res_keep(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);

int hoff__res_evict(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
int hoff__res_prefetch(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
int hoff__res_discard(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
/* Evict (op HOFF__CMD_EVICT) or prefetch (HOFF__CMD_PREFETCH) the n blocks m
 * of a group with ONE backend call over (base, size), which they tile in
 * order (a region's slots).  Each member makes its own transition and keeps
 * its own books; the group's completion retires every member.  Nothing is
 * done and -EAGAIN returned unless every member is live, unpinned, not in
 * flight and where the call moves it from (DEVICE for an eviction, HOST for
 * a prefetch); -ENOSPC when the host tier or the budget has no room for the
 * whole group at once.  On any error the caller moves the members one by
 * one (the fallback). */
int hoff__res_group(struct hoff__mem *mem, int op, struct hoff__block *const *m, unsigned n, void *base, size_t size,
                    hoff_stream s);
/* Make room in the budget for need more resident bytes, evicting other
 * blocks (never a manual group's) and waiting for them: 0, or -HOFF_EBUDGET
 * with a message that starts with what and says why. */
int hoff__res_budget_room(struct hoff__mem *mem, uint64_t need, hoff_stream s, const char *what);
/* Make room on the host tier for bytes more (spilling, waiting): 0 or
 * -HOFF_EHOSTCAP with the message. */
int hoff__res_host_room(struct hoff__mem *mem, uint64_t bytes, hoff_stream s);
/* Work queued on stream s afterwards waits for b's eviction or prefetch in
 * flight (none: 0). */
int hoff__res_stream_wait(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
/* Evict until the resident bytes fit what the device leaves beside the
 * device pool (hoff__guard_cap) and the budget, and wait for it: before the
 * device pool grows.  0, or -ENOSPC when nothing more can be evicted. */
int hoff__res_fit_device(struct hoff__mem *mem);
/* Work on stream s also uses b (hoff_record_stream): its moves away are
 * fenced after that stream's work too. */
void hoff__res_note_stream(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
/* An access: bring the block back if it is away (waiting, or paging it in),
 * then open its use window on stream s. */
int hoff__res_access(struct hoff__mem *mem, struct hoff__block *b, int write, hoff_stream s);
/* Use windows (doc/design.md, "Use windows").  An access, or the allocation,
 * opens one; an op mark, the step's end (hoff__res_close_windows) or the
 * block's free closes it — but until the context has seen an access mark,
 * only the free does (nothing says when a block is used).  While it is open nothing moves the block away or
 * drops it: evict, discard and group moves refuse with -EBUSY (counted in
 * window_refusals) and the online policy picks other victims.  A move after
 * the close is fenced on the stream of the block's last use.
 * hoff__res_end_use closes one block's window: the explicit API's caller
 * asserts that the work using it is enqueued on the stream it names. */
void hoff__res_close_windows(struct hoff__mem *mem);
void hoff__res_end_use(struct hoff__mem *mem, struct hoff__block *b);
/* The NVMe tier: write a block on the host to it / read it back to the host.
 * A spill of a block whose eviction is still in flight starts when that
 * lands (0 now), unless the block is wanted back (prefetched, used,
 * discarded, freed) first. */
int hoff__res_spill(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);
int hoff__res_restore(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s);

/* Wait for b's transfer in flight, if any (a counted stall), and retire it:
 * a block freed while its transfer was in flight then goes back to its pool
 * (a group's slot that the next step wants again). */
void hoff__res_settle(struct hoff__mem *mem, struct hoff__block *b);
/* Retire completed transfers (cheap when nothing is in flight). */
void hoff__res_poll(struct hoff__mem *mem);
/* Wait for every transfer in flight and retire it. */
int hoff__res_wait_all(struct hoff__mem *mem);
/* The issuing thread's completion callback (struct hoff__cmd.cookie is the block). */
void hoff__res_cmd_done(void *mem, const struct hoff__cmd *cmd, int rc);

#ifdef HOFF_DEBUG
/* Recount every list and compare with the counters; aborts on a mismatch. */
void hoff__res_check(struct hoff__mem *mem);
#endif

#endif
