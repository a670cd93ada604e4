/* plan.h — the planner interface and the schedule it produces: residency actions attached to trace events.
 * Threading: planners are pure functions of (trace, options); a schedule is read-only once built. */
#ifndef HOFF_PLAN_H
#define HOFF_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"

enum hoff__act_kind {
    HOFF__ACT_EVICT = 0,    /* start the copy to host (D2H) of block */
    HOFF__ACT_PREFETCH,     /* start the copy back (H2D) of block */
    HOFF__ACT_RELEASE,      /* block's contents are dead (after its last use): drop, no copy */
    HOFF__ACT_SPILL,        /* write the host copy of an evicted block to the NVMe tier */
    HOFF__ACT_RESTORE,      /* read a spilled block back to the host (before its prefetch) */
    HOFF__ACT_KIND_COUNT
};

enum hoff__act_when {
    HOFF__ACT_BEFORE = 0,   /* fired before the event is carried out */
    HOFF__ACT_AFTER = 1,    /* fired once its work is done: when the next event of the
                               step comes (or the step ends) — the caller fills a block
                               after hoff_malloc returns and uses it after hoff_access */
};

struct hoff__action {
    uint32_t ev;            /* trace event index */
    uint8_t when;           /* enum hoff__act_when */
    uint8_t kind;           /* enum hoff__act_kind */
    uint32_t block;         /* trace block id */
    uint32_t copy_ev;       /* evict: the last write before the gap (RFC copy_start): the
                               bytes are final from there on.  Managed memory moves the
                               pages with the copy, so the runtime starts the eviction at
                               ev (the gap's start); a backend that can keep a read
                               duplicate could start the copy at copy_ev.
                               Prefetch and release: UINT32_MAX. */
};

/* The bytes a block of the trace holds on the device, from its pool and the
 * size asked for: hoff__pool_block_bytes in the runtime (size classes, 2 MiB
 * managed grain); NULL counts the size asked for. */
typedef uint64_t (*hoff__block_bytes_fn)(int pool, uint64_t size);

static inline uint64_t hoff__plan_bytes(hoff__block_bytes_fn f, const struct hoff__tblock *b) {
    return f ? f(b->pool, b->size) : b->size;
}

/* Blocks a planner may move: managed, not pinned by a region. */
static inline int hoff__plan_movable(const struct hoff__tblock *b) {
    return b->pool == 1 && !b->pinned;
}

struct hoff__plan_opts {
    uint64_t budget_bytes;      /* resident offload bytes allowed (0 = no limit: empty schedule) */
    uint64_t host_cap_bytes;    /* 0 = no limit */
    uint32_t guard_after_alloc; /* no-access blocks: events after the alloc before an eviction */
    uint32_t guard_before_free; /* no-access blocks: events before the free for the prefetch */
    double h2d_gbps, d2h_gbps;  /* for timed planners */
    hoff__block_bytes_fn block_bytes; /* what a block counts for (NULL: its size) */
    int nvme;                   /* an NVMe tier exists: the host cap is kept by spilling */
    double nvme_read_gbps, nvme_write_gbps;
};

struct hoff__schedule {
    struct hoff__action *act;   /* sorted by hoff__schedule_sort */
    size_t nact, cap_act;
    char planner[16];
    /* What the plan achieves, computed by the planner in event-count terms
     * (transfers instant): the resident offload peak after the plan and the
     * event where it is; feasible = peak <= budget. */
    uint64_t budget_bytes;
    uint64_t peak_bytes;
    uint32_t peak_ev;
    uint64_t nopeak_bytes;      /* the trace's peak with no offload */
    int feasible;
    uint64_t bytes_d2h, bytes_h2d;  /* planned traffic */
    uint64_t plan_ns;           /* planning time */
    uint64_t candidates;        /* gaps the planner considered (0 for planners without) */
    hoff__block_bytes_fn block_bytes; /* the opts' (hoff__schedule_peak counts with it) */
    /* The host and NVMe tiers (hoff__plan_tiers): peaks of evicted bytes on
     * the host and of spilled bytes, traffic, and whether the host cap holds. */
    uint64_t host_cap_bytes;
    uint64_t peak_host_bytes, peak_nvme_bytes;
    uint32_t peak_host_ev;
    uint64_t bytes_spilled, bytes_restored;
    int host_feasible;
};

struct hoff__planner {
    const char *name;
    const char *help;
    /* Build a schedule for the finished trace t.  0 on success, also when the
     * budget cannot be met (then feasible = 0 and peak_bytes/peak_ev say the
     * lowest peak reached and where); -ENOMEM, -EINVAL.  out was set up
     * with hoff__schedule_init (or built before): its actions are replaced. */
    int (*build)(const struct hoff__trace *t, const struct hoff__plan_opts *o,
                 struct hoff__schedule *out);
};

/* The RFC's greedy residency planner (section 4.4), O(M log S): greedy.c. */
extern const struct hoff__planner hoff__planner_greedy;
/* Timing-aware: gaps and prefetch issue points from event times and copy
 * bandwidths, so transfers hide behind compute: timed.c. */
extern const struct hoff__planner hoff__planner_timed;

/* The host and NVMe tiers, after any planner's evictions (tiers.c): where
 * the evicted bytes would take the host tier over o->host_cap_bytes, spill
 * the blocks that stay away longest to NVMe once their eviction has landed,
 * and restore them early enough (event times and NVMe bandwidth) before
 * their prefetch; without an NVMe tier, report the host peak only.  Fills
 * the schedule's tier fields.  0 or -ENOMEM. */
int hoff__plan_tiers(const struct hoff__trace *t, const struct hoff__plan_opts *o,
                     struct hoff__schedule *s);

/* What every planner starts with (plan.c): reset out under the planner's
 * name, check the finished trace, and build the resident bytes per event
 * with the RFC's releases planned (a RELEASE after the last access of a
 * non-retained movable block when an event lies between it and the free).
 * On return *res holds nev values (the caller frees it), or NULL when there
 * is nothing more to plan (no budget, empty trace): out is then complete but
 * for plan_ns.  0 or -errno (-EINVAL naming the planner, -ENOMEM). */
int hoff__plan_begin(const char *name, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                     struct hoff__schedule *out, int64_t **res);
/* A candidate eviction: evict block AFTER event a, prefetch BEFORE event b
 * (b == nev: not before the step's end); size is what it frees (block_bytes),
 * copy_ev the last write at or before a.  Gaps between consecutive accesses
 * of a movable block; for a block with no access after its alloc, its life
 * less the guard margins (greedy.c's header says why).  Gaps covering no
 * event are left out. */
struct hoff__gap {
    uint64_t size;
    uint32_t a, b, block, copy_ev;
};

/* Every gap of the trace, into *out (malloc'd; free it).  0 or -ENOMEM. */
int hoff__plan_gaps(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__gap **out,
                    size_t *nout);

/* CLOCK_MONOTONIC in ns, for plan_ns. */
uint64_t hoff__plan_now_ns(void);

/* Planners by name ("greedy", ...); NULL if unknown. */
const struct hoff__planner *hoff__planner_find(const char *name);
/* The i-th registered planner, NULL past the end. */
const struct hoff__planner *hoff__planner_at(int i);

void hoff__schedule_init(struct hoff__schedule *s);
void hoff__schedule_destroy(struct hoff__schedule *s);
int hoff__schedule_add(struct hoff__schedule *s, uint32_t ev, int when, int kind, uint32_t block,
                       uint32_t copy_ev);
/* Sort the actions by (ev, when) keeping the order within an event:
 * evictions and releases before prefetches. */
void hoff__schedule_sort(struct hoff__schedule *s);

/* The resident offload bytes at each event under schedule s with instant
 * transfers: a check that planners and tests share.  Writes the peak and its
 * event; returns 0 or -errno (-EINVAL if s evicts a block that is not
 * resident or prefetches one that is not evicted).
 * Resident offload bytes are the live blocks of the managed pool, pinned ones
 * included (they hold device memory and cannot be evicted); device-pool blocks
 * never count.  At event i: the BEFORE actions of i apply first; a block
 * allocated at i counts at i, a block freed at i counts at i; the AFTER
 * actions of i apply after i.  A release drops the block until its free.
 * s must be sorted (hoff__schedule_sort); -EINVAL otherwise, and for an
 * action on a block that is not live there (before its alloc, after its
 * free, released), on a device-pool or pinned block, or past the trace's
 * end.  The peak is the first event where the maximum is reached (0, 0 for
 * an empty trace).  O(nev + nact + nblocks). */
int hoff__schedule_peak(const struct hoff__trace *t, const struct hoff__schedule *s,
                        uint64_t *peak, uint32_t *peak_ev);

#endif
