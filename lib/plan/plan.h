/* plan.h — the planner interface and the schedule it produces: residency actions attached to trace events.
 * Threading: planners are pure functions of (trace, options); a schedule is read-only once built. */
#ifndef HOFF_PLAN_H
#define HOFF_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/xfer.h"
#include "trace/trace.h"

enum hoff__act_kind {
    HOFF__ACT_EVICT = 0, /* start the copy to host (D2H) of block */
    HOFF__ACT_PREFETCH,  /* start the copy back (H2D) of block */
    HOFF__ACT_RELEASE,   /* block's contents are dead (after its last use): drop, no copy */
    HOFF__ACT_SPILL,     /* write the host copy of an evicted block to the NVMe tier */
    HOFF__ACT_RESTORE,   /* read a spilled block back to the host (before its prefetch) */
    HOFF__ACT_KIND_COUNT
};

enum hoff__act_when {
    HOFF__ACT_BEFORE = 0, /* fired before the event is carried out */
    HOFF__ACT_AFTER = 1,  /* fired once its work is done: when the next event of the
                             step comes (or the step ends) — the caller fills a block
                             after hoff_malloc returns and uses it after hoff_access */
};

struct hoff__action {
    uint32_t ev;      /* trace event index */
    uint8_t when;     /* enum hoff__act_when */
    uint8_t kind;     /* enum hoff__act_kind */
    uint32_t block;   /* trace block id */
    uint32_t copy_ev; /* evict: the last write before the gap (RFC copy_start): the
                         bytes are final from there on.  Managed memory moves the
                         pages with the copy, so the runtime starts the eviction at
                         ev (the gap's start); a backend that can keep a read
                         duplicate could start the copy at copy_ev.
                         Prefetch and release: UINT32_MAX. */
    uint32_t group;   /* 0: the block's own action.  g > 0: the block is a member
                         of group g - 1 (hoff__plan_groups) and this is its part of
                         the group's EVICT or PREFETCH: every member has one, at the
                         same event and timing, and the runtime moves them all with
                         one call over the group's region when it can (the first
                         member's action fires it, the others are covered), else
                         one by one.  The schedule reads the same either way. */
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
    uint64_t budget_bytes;            /* resident offload bytes allowed (0 = no limit: empty schedule) */
    uint64_t host_cap_bytes;          /* 0 = no limit */
    uint32_t guard_after_alloc;       /* no-access blocks: events after the alloc before an eviction */
    uint32_t guard_before_free;       /* no-access blocks: events before the free for the prefetch */
    double h2d_gbps, d2h_gbps;        /* for timed planners */
    hoff__block_bytes_fn block_bytes; /* what a block counts for (NULL: its size) */
    int nvme;                         /* an NVMe tier exists: the host cap is kept by spilling */
    double nvme_read_gbps, nvme_write_gbps;
    /* The runtime's timing, for predictions (predict.c); 0 = the defaults
     * there (the sim backend's: 10 us a call, 20 us + 8 GB/s a page-in). */
    uint64_t latency_ns;         /* fixed cost of one transfer call on its engine */
    uint64_t call_ns;            /* the issuing thread's own cost per call */
    uint64_t fault_ns;           /* one page-in on demand: fixed cost ... */
    double fault_gbps;           /* ... and rate */
    int groups;                  /* co-located groups are wanted (HOFF_GROUPS) */
    const int *stop;             /* NULL, or set (read atomically) once the result is no
                                    longer wanted: a planner may then cut its searches
                                    short (the schedule stays valid, only less good) */
    uint64_t deadline_ns;        /* 0, or the hoff__plan_now_ns() time by which a planner
                                    should answer (anytime: timed predicts greedy's
                                    schedule first, then adds candidates and searches
                                    while time is left); hoff__plan_deadline makes it */
    hoff__xfer_observer observe; /* NULL, or told each copy, page-in and stall of the step
                                   hoff__plan_predict predicts (not the step before it), on
                                   that step's clock: 0 at its start (tests/test_agree.c) */
    void *observe_arg;
};

/* The deadline of a planning that starts now with a time budget of
 * budget_ns (0: none). */
uint64_t hoff__plan_deadline(uint64_t budget_ns);

/* A group (hoff__plan_groups): blocks the schedule evicts at one point and
 * prefetches at one point, laid out in one region so that one call moves
 * them all.  Members are gmember[first .. first + n - 1], in region order. */
struct hoff__group {
    uint32_t first, n;
    uint64_t bytes;                 /* the region: the members' bytes, end to end */
    uint32_t evict_ev, prefetch_ev; /* where the group's actions are (their event);
                                   evict_ev UINT32_MAX: the members are evicted
                                   on their own (hoff__plan_groups_late) */
    uint8_t evict_when, prefetch_when;
};

struct hoff__gmember {
    uint32_t block;      /* trace block id */
    uint64_t off, bytes; /* its slot: offset in the region and size, both
                            multiples of HOFF__MANAGED_GRAIN (2 MiB) */
};

struct hoff__schedule {
    struct hoff__action *act; /* sorted by hoff__schedule_sort */
    size_t nact, cap_act;
    /* Groups (hoff__plan_groups; none until it runs): the groups, their
     * members, and per trace block its group + 1 (0: none) and its member
     * index in gmember (nblocks entries each, NULL without groups). */
    struct hoff__group *groups;
    size_t ngroups;
    struct hoff__gmember *gmember;
    size_t ngmember;
    uint32_t *block_group, *block_member;
    uint32_t nblocks_grouped; /* entries of block_group/block_member */
    uint64_t group_ns;        /* time the grouping pass took */
    int grouped;              /* the planner has decided on groups itself (timed.c):
                                 the runtime does not run hoff__plan_groups on it */
    char planner[16];
    /* What the plan achieves, computed by the planner in event-count terms
     * (transfers instant): the resident offload peak after the plan and the
     * event where it is; feasible = peak <= budget. */
    uint64_t budget_bytes;
    uint64_t peak_bytes;
    uint32_t peak_ev;
    uint64_t nopeak_bytes; /* the trace's peak with no offload */
    /* The working-set floor (hoff__plan_floor) and its event: no schedule
     * of the trace reaches a lower peak.  Set by hoff__plan_build (0 when a
     * planner was called directly). */
    uint64_t floor_bytes;
    uint32_t floor_ev;
    /* Where it comes from (hoff__plan_floor_where): the op mark that ends the
     * use windows open there (UINT32_MAX: the step's end), that op's phase
     * (enum hoff_phase) and the blocks on the device there. */
    uint32_t floor_op_ev;
    unsigned floor_phase;
    uint32_t floor_blocks;
    int feasible;
    uint64_t bytes_d2h, bytes_h2d; /* planned traffic */
    uint64_t plan_ns;              /* planning time */
    uint64_t candidates;           /* gaps the planner considered (0 for planners without) */
    /* The replay's predicted exposed stall per step (hoff__plan_predict on
     * the trace's event times); UINT64_MAX when not predicted. */
    uint64_t stall_ns;
    uint64_t overruns;                /* the same replay's budget overruns per step */
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
    int (*build)(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *out);
};

/* Build a schedule with planner pl: what every caller uses.  It computes the
 * working-set floor first; a budget below it is infeasible for any plan, so
 * the planner plans for the floor (moving no byte that cannot lower the
 * peak: an infeasible budget never moves more than the floor does) and the
 * schedule keeps the caller's budget_bytes with feasible = 0.  Fills
 * floor_bytes and floor_ev.  0 or -errno as pl->build. */
int hoff__plan_build(const struct hoff__planner *pl, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                     struct hoff__schedule *out);
/* The working-set floor: the largest, over the events, of the resident
 * offload bytes that no plan can move away there — the blocks in a use
 * window (doc/design.md), pinned ones, and those the guards and the
 * release rule keep — i.e. the peak with every gap of hoff__plan_gaps taken
 * and the releases planned.  *floor_ev: its first event.  0, -ENOMEM, -EINVAL. */
int hoff__plan_floor(const struct hoff__trace *t, const struct hoff__plan_opts *o, uint64_t *floor, uint32_t *floor_ev);
/* The name of the op running at event ev (the last op mark at or before it;
 * a fixed text when there is none).  For messages. */
const char *hoff__plan_op_at(const struct hoff__trace *t, uint32_t ev);
/* Where the working-set floor at event ev comes from: op_ev, the op mark
 * that ends the use windows open at ev (the first op event at or after it;
 * UINT32_MAX when none comes: the step's end) and its phase (enum
 * hoff_phase); blocks and bytes, the blocks on the device at ev with every
 * gap taken (bytes is the floor itself at the floor's event).  With ids, the
 * blocks' ids too (malloc'd, blocks entries; free it).  0, -ENOMEM. */
struct hoff__floor_where {
    uint32_t op_ev;
    unsigned phase;
    uint32_t blocks;
    uint64_t bytes;
};
int hoff__plan_floor_where(const struct hoff__trace *t, const struct hoff__plan_opts *o, uint32_t ev,
                           struct hoff__floor_where *w, uint32_t **ids);
/* The op name of op event ev, for messages: "(the step's end)" for
 * UINT32_MAX, "(unnamed op)" for an op without a name. */
const char *hoff__plan_op_name(const struct hoff__trace *t, uint32_t ev);
/* What a floor set in phase (enum hoff_phase) is, and what would lower it:
 * one sentence for messages and reports ("" for HOFF_PHASE_NONE). */
const char *hoff__plan_floor_advice(unsigned phase);
/* Is block `block` in a use window at event x (an access at or before x
 * whose window closes after x)?  Nothing may move it away or drop it there.
 * O(log accesses). */
int hoff__plan_in_window(const struct hoff__trace *t, uint32_t block, uint32_t x);
/* The runtime's view while event x is handled, before its own work: is a
 * window opened by an earlier access still open (it closes after x; an op
 * mark at x has closed it)?  The runtime never picks such a block as a
 * victim (mem/room.h), and the prediction (model.c) follows it. */
int hoff__plan_window_open(const struct hoff__trace *t, uint32_t block, uint32_t x);

/* The grouping pass (groups.c), run on a finished schedule after any planner
 * and hoff__plan_tiers: blocks whose evictions and prefetches can be issued
 * together become a group, their actions moved to one point each (evictions
 * later, to the latest member's; prefetches earlier, to the earliest
 * member's), accepted only while the schedule's peak (hoff__schedule_peak)
 * stays within the budget (an infeasible plan's peak: does not rise) and
 * the bytes planned stay the same; each group gets a layout (members at
 * 2 MiB-grain offsets in one region).  Members: movable, non-retained blocks
 * of the managed pool, allocated on the group's stream, never spilled or
 * restored; one gap per block (its longest evicted one; its other gaps stay
 * its own).  O((M + A) log N) for M gaps, A actions, N events.  0 or
 * -ENOMEM (the schedule is then as it was, with no groups). */
int hoff__plan_groups(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s);
/* Groups on the prefetch side only (groups.c): the members keep their own
 * evictions; consecutive prefetches (in schedule order, one allocation
 * stream) merge into one, issued at the latest member's point, when that
 * point is at or before every member's next use and within max_span events
 * of the first member's, and, given event times T (NULL: not checked), when
 * the group's one copy started there (at o's H2D bandwidth) would land
 * before the first member's use.  Blocks only come back later than planned, so the
 * peak never rises; the stall may (a caller that predicts it decides).  A
 * group's evict_ev is UINT32_MAX.  0 or -ENOMEM (no groups then). */
int hoff__plan_groups_late(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s,
                           uint32_t max_span, const uint64_t *T);

/* The RFC's greedy residency planner (section 4.4), O(M log S): greedy.c. */
extern const struct hoff__planner hoff__planner_greedy;
/* Timing-aware: gaps and prefetch issue points from event times and copy
 * bandwidths, so transfers hide behind compute: timed.c. */
extern const struct hoff__planner hoff__planner_timed;

/* Greedy's selection (greedy.c), for planners that build on it: the gaps
 * longest first — in events, or in time on T when T is not NULL — taken
 * while an event they cover is over budget, over res (hoff__plan_begin's);
 * adds the evictions and prefetches (at the use) to out, sorts it, and sets
 * its peak, feasibility, traffic and candidates.  0 or -ENOMEM. */
int hoff__plan_greedy_select(const struct hoff__trace *t, const struct hoff__plan_opts *o, const int64_t *res,
                             const uint64_t *T, struct hoff__schedule *out);

/* The host and NVMe tiers, after any planner's evictions (tiers.c): where
 * the evicted bytes would take the host tier over o->host_cap_bytes, spill
 * the blocks that stay away longest to NVMe once their eviction has landed,
 * and restore them early enough (event times and NVMe bandwidth) before
 * their prefetch; without an NVMe tier, report the host peak only.  Fills
 * the schedule's tier fields.  0 or -ENOMEM. */
int hoff__plan_tiers(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s);

/* What every planner starts with (plan.c): reset out under the planner's
 * name, check the finished trace, and build the resident bytes per event
 * with the RFC's releases planned (a RELEASE of a non-retained movable block
 * once the use window of its last access has closed — AFTER close - 1 —
 * when that comes before its free).
 * On return *res holds nev values (the caller frees it), or NULL when there
 * is nothing more to plan (no budget, empty trace): out is then complete but
 * for plan_ns.  0 or -errno (-EINVAL naming the planner, -ENOMEM). */
int hoff__plan_begin(const char *name, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                     struct hoff__schedule *out, int64_t **res);
/* A candidate eviction: evict block AFTER event a, prefetch BEFORE event b
 * (b == nev: not before the step's end); size is what it frees (block_bytes),
 * copy_ev the last write mark at or before a (its kernel may still run
 * until that access's window closes: a backend that copies early must not
 * start before a + 1).  Gaps between the use windows of consecutive accesses
 * of a movable block (a = the event before the window's close); for a block
 * with no access after its alloc, its life less the guard margins, never
 * inside its allocation's window (greedy.c's header says why).  Gaps
 * covering no event are left out. */
struct hoff__gap {
    uint64_t size;
    uint32_t a, b, block, copy_ev;
};

/* Every gap of the trace, into *out (malloc'd; free it).  0 or -ENOMEM. */
int hoff__plan_gaps(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__gap **out, size_t *nout);

/* --- predicting a replay (predict.c) -------------------------------------- */

/* Event times for the planners, non-decreasing: t_gpu_ns where every event
 * has one, else t_cpu_ns (malloc'd, nev values; NULL on -ENOMEM). */
uint64_t *hoff__plan_times(const struct hoff__trace *t);
/* The step's compute on those times: from its first event to its last (the no-offload step the planners and their
 * predictions compare with). */
static inline uint64_t hoff__plan_compute_ns(const struct hoff__trace *t, const uint64_t *T) {
    return t->nev ? T[t->nev - 1] - T[0] : 0;
}

/* How hoff__plan_predict treats the schedule's prefetches. */
enum hoff__place {
    HOFF__PLACE_KEEP = 0,       /* where the schedule has them */
    HOFF__PLACE_EARLY,          /* re-placed: each as early as it can go (below) */
    HOFF__PLACE_EARLY_HEADROOM, /* the same, leaving each release's bytes counted
                               through the event its call fires at */
};

struct hoff__prediction {
    uint64_t stall_ns; /* exposed stall: every wait of the compute timeline */
    uint64_t room_ns;  /* of which: waits for evictions to land (the budget) */
    uint64_t late_ns;  /* waits for prefetches still in flight at their use */
    uint64_t fault_ns; /* page-ins on demand (a prefetch that did not happen) */
    uint64_t tier_ns;  /* waits for the host and NVMe tiers: room under the host
                          cap, spills and restores that must land first */
    uint64_t faults;
    uint64_t overruns;     /* allocations and page-ins that found no room to be made:
                              the budget is exceeded there (the runtime's
                              budget_overruns) */
    uint64_t victim_bytes; /* evicted on demand for room (unplanned traffic) */
    uint64_t bytes_d2h, bytes_h2d;
    uint64_t prefetch_calls, evict_calls;
    uint64_t bytes_spilled, bytes_restored; /* the NVMe tier's traffic, planned and on demand */
};

/* Replay schedule s over trace t as the runtime does, on the event times T
 * (hoff__plan_times), and predict its stall: compute runs from event to
 * event as T says; the D2H and H2D copy engines are FIFOs at o's bandwidths
 * with o's per-call latency; an eviction holds its bytes until its copy
 * lands, a prefetch from its issue; a prefetch or an allocation that does
 * not fit waits for the oldest eviction in flight (and, when those do not
 * free enough, evicts an unplanned victim; with nothing to evict or wait
 * for, a prefetch is refused and an allocation or page-in overruns); a use
 * waits for its prefetch, or pages the block in on demand.  The host tier is kept under
 * o->host_cap_bytes as the runtime keeps it (mem/room.h), and spills and restores go
 * through one FIFO NVMe device at o's NVMe bandwidths (model.c says how).
 * With HOFF__PLACE_EARLY the prefetches are re-placed while replaying:
 * earliest deadline first, each prefetch is issued at the first event where
 * its eviction has landed, it fits in the budget now, and the schedule's
 * instant-transfer resident bytes (hoff__schedule_peak's) plus every early
 * prefetch stay within the budget until its original position, which
 * remains its latest; s is rewritten and re-sorted.  HOFF__PLACE_EARLY_HEADROOM
 * counts a release (a call that lands a latency later) through the event
 * it fires at, so that early prefetches leave an allocation there the room
 * the release is about to free instead of making it wait for the call.
 * s must be sorted and valid (hoff__schedule_peak).  Fills *out,
 * s->stall_ns and s->overruns.  0, -ENOMEM, -EINVAL. */
int hoff__plan_predict(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                       struct hoff__schedule *s, int place, struct hoff__prediction *out);

/* CLOCK_MONOTONIC in ns, for plan_ns. */
uint64_t hoff__plan_now_ns(void);

/* Planners by name ("greedy", ...); NULL if unknown. */
const struct hoff__planner *hoff__planner_find(const char *name);
/* The i-th registered planner, NULL past the end. */
const struct hoff__planner *hoff__planner_at(int i);

void hoff__schedule_init(struct hoff__schedule *s);
void hoff__schedule_destroy(struct hoff__schedule *s);
/* dst = a deep copy of src (actions, groups, every figure); dst's own
 * arrays are freed first.  0 or -ENOMEM (dst unchanged). */
int hoff__schedule_copy(struct hoff__schedule *dst, const struct hoff__schedule *src);
/* Free the schedule's groups and forget them (its actions stay as they are). */
void hoff__schedule_free_groups(struct hoff__schedule *s);
int hoff__schedule_add(struct hoff__schedule *s, uint32_t ev, int when, int kind, uint32_t block, uint32_t copy_ev);
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
int hoff__schedule_peak(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *peak, uint32_t *peak_ev);
/* The same walk, writing the resident offload bytes at every event into
 * res[0 .. nev - 1] (the caller's).  Same errors. */
int hoff__schedule_resident(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *res, uint64_t *peak,
                            uint32_t *peak_ev);
/* The same walk again, with every tier: at each event the managed bytes on
 * the device (dev, what hoff__schedule_resident writes), on the host tier
 * (evicted or restored blocks, host) and on the NVMe tier (spilled, nvme),
 * each array nev long or NULL.  A block's bytes are s->block_bytes'; a
 * freed or released block counts nowhere.  Same errors and peak.  This is
 * the one walk of resident bytes under a schedule (planners, the runtime's
 * checks and hoff-plan's pictures use it). */
int hoff__schedule_tiers(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *dev, uint64_t *host,
                         uint64_t *nvme, uint64_t *peak, uint32_t *peak_ev);

/* An action kind's name ("evict", "prefetch", "release", "spill",
 * "restore"; "?" for anything else). */
const char *hoff__act_kind_name(int kind);

#endif
