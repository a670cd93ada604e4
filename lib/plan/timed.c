/* timed.c — the timing-aware residency planner: it builds candidate schedules (which gaps to evict, where to
 * issue each prefetch) and keeps the one whose predicted replay (predict.c) stalls least.
 * Threading: a pure function of (trace, options); no shared state. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plan/plan.h"

/*
 * Why a portfolio.  What a plan costs on the device depends on things a
 * single greedy rule cannot see at once: when each eviction's copy lands
 * (the D2H engine is a queue, and the budget counts a block until then),
 * whether an early prefetch takes room an allocation needs before the
 * evictions in flight free it, and whether the copies can be hidden at all.
 * predict.c replays a schedule with the runtime's own rules on the trace's
 * event times, so the planner can simply build a few good candidates and
 * keep the one that stalls least (first, the one whose replay overruns the
 * budget least often: where a plan is infeasible, the runtime's evictions
 * on demand decide how often, and a schedule that stalls less by letting
 * the device go over its budget is no answer):
 *
 *  selections (which gaps): greedy's — longest gaps in events first — and
 *    the same order by the gaps' length in time, which prefers gaps that
 *    span long computations (those hide their copies);
 *  placements (where each prefetch goes): at the use (greedy's), or as
 *    early as it fits (HOFF__PLACE_EARLY): earliest deadline first, once its
 *    eviction has landed, when the budget has room now and the plan's
 *    resident bytes stay within it until the use; or the same leaving each
 *    release's room to the event its call fires at (
 *    HOFF__PLACE_EARLY_HEADROOM): packed as tightly as the budget allows,
 *    early prefetches make every allocation after a release wait for the
 *    release's call to land, a latency each.
 *
 * Evictions always start right after the gap's last access (the earliest
 * point: they land soonest).  With a host cap, the tiers pass (tiers.c)
 * then spills and restores each candidate's evictions for the prefetch
 * points it has, and the candidate is judged with them: the prediction
 * keeps the host tier under its cap as the runtime does and puts spills and
 * restores on the NVMe device's queue, so a selection whose evictions the
 * disk cannot carry loses to one it can.  Ties go to the earlier candidate,
 * greedy's first, so on its own model timed is never worse than greedy.
 *
 * Refinement: the best candidate's prefetch points are then searched
 * locally (refine): a rule places every prefetch alike, while the copies
 * queued behind each other, the room each takes from an allocation and the
 * evictions it waits for leave some better off a few events earlier or
 * later.  Before that, which gaps it evicts is searched the same way
 * (refine_selection: drop a gap, add one, or swap one for another): the
 * rules take gaps longest first, but what a gap costs depends on when its
 * copies can run.  The refined copy is a seventh candidate.
 *
 * Groups (o->groups, HOFF_GROUPS): an eighth candidate is greedy's
 * schedule grouped as the runtime groups greedy's (hoff__plan_groups).
 * Unless it wins, fewer prefetch calls may cost a hair of stall: of the
 * candidates within 2% of the best rule's stall (or 0.5% of the step's
 * compute), and never above the eighth's, up to four (least stall first,
 * one per distinct schedule) have their consecutive prefetches merged into
 * one call at the last one's point (hoff__plan_groups_late) with the
 * widest span that stays within that limit, then their groups' points
 * refined; of those within 2% (or 0.5% of compute) of the refined
 * ungrouped stall, the one with the fewest calls wins.  The evictions stay
 * each block's own, right after its last access, where they land soonest.
 * The schedule is marked grouped: the runtime does not group it again.
 *
 * Cost: six selections, seven predicted replays (twice that many with a
 * host cap), up to 4 x 27 more for the groups (7 on traces of more than
 * 200000 events), each O(M log M + nev log nev), up to six refinements of
 * prefetch points of about 10^7 event-steps of prediction each and one of
 * the selection of about 2 x 10^7 (together under a second; none on traces
 * of more than 200000 events).
 *
 * Anytime (o->deadline_ns, HOFF_PLAN_TIME): greedy's schedule, predicted,
 * is the first answer; the other candidates, the searches and the groups
 * come while time is left (each candidate is a predicted replay, checked
 * between them; the searches check at every move).  Without time for the
 * groups the schedule is left ungrouped (the runtime groups it as it
 * groups greedy's).
 */

/* The searches end early, with what they have (always a valid schedule),
 * once the caller no longer wants the result (o->stop: a planning thread
 * being shut down) or its time budget is spent (o->deadline_ns). */
static int cut(const struct hoff__plan_opts *o) {
    return (o->stop && __atomic_load_n(o->stop, __ATOMIC_RELAXED)) ||
           (o->deadline_ns && hoff__plan_now_ns() >= o->deadline_ns);
}

/* a beats b: fewer predicted budget overruns (an infeasible plan
 * whose replay the runtime must take over the budget), then less stall. */
static int beats(const struct hoff__schedule *a, const struct hoff__schedule *b) {
    return a->overruns != b->overruns ? a->overruns < b->overruns : a->stall_ns < b->stall_ns;
}

/* Predict d; when it beats *s, swap them (d keeps the old one, as the
 * next scratch).  1 kept, 0 not, -errno. */
static int keep_if_better(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                          struct hoff__schedule *s, struct hoff__schedule *d) {
    struct hoff__prediction pr;
    struct hoff__schedule x;
    int rc;

    if ((rc = hoff__plan_predict(t, o, T, d, HOFF__PLACE_KEEP, &pr)) != 0)
        return rc;
    if (!beats(d, s))
        return 0;
    x = *s;
    *s = *d;
    *d = x;
    return 1;
}

/* Co-located groups on the prefetch side (hoff__plan_groups_late): of
 * several spans, with and without the test that a group's copy lands before
 * its first use, the grouping with the fewest prefetch calls whose predicted
 * stall is at most limit; s is left as it is when none is.  tmp and keep
 * are scratch. */
static int choose_groups(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                         struct hoff__schedule *s, struct hoff__schedule *tmp, struct hoff__schedule *keep,
                         uint64_t limit) {
    /* spans in events, each without and with the landing test (odd rungs) */
    static const uint32_t spans[] = {UINT32_MAX, UINT32_MAX, 128, 128, 96, 96, 64, 64, 48, 48, 32, 32, 24,
                                     24,         16,         16,  12,  12, 8,  8,  6,  6,  4,  4,  2,  2};
    uint64_t calls = UINT64_MAX, kstall = UINT64_MAX;
    struct hoff__prediction pr;
    size_t i;
    int rc;

    /* every rung (on very long traces every fifth: each is a predicted
     * replay); keep the fewest calls within the limit, then the least stall */
    for (i = 0; i < sizeof spans / sizeof spans[0]; i += (t->nev > 200000 ? 5 : 1)) {
        if ((rc = hoff__schedule_copy(tmp, s)) != 0 ||
            (rc = hoff__plan_groups_late(t, o, tmp, spans[i], i & 1 ? T : NULL)) != 0)
            return rc;
        if (!tmp->ngroups)
            continue;
        if ((rc = hoff__plan_predict(t, o, T, tmp, HOFF__PLACE_KEEP, &pr)) != 0)
            return rc;
        if (tmp->stall_ns <= limit && tmp->overruns <= s->overruns &&
            (pr.prefetch_calls < calls || (pr.prefetch_calls == calls && tmp->stall_ns < kstall))) {
            calls = pr.prefetch_calls;
            kstall = tmp->stall_ns;
            if ((rc = hoff__schedule_copy(keep, tmp)) != 0)
                return rc;
        }
    }
    return calls == UINT64_MAX ? 0 : hoff__schedule_copy(s, keep);
}

/* The tiers pass on a candidate (its spills and restores, for the prefetch
 * points it has now), then its predicted stall with them. */
static int tiers_and_predict(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                             struct hoff__schedule *s) {
    struct hoff__prediction pr;
    int rc = hoff__plan_tiers(t, o, s);

    return rc ? rc : hoff__plan_predict(t, o, T, s, HOFF__PLACE_KEEP, &pr);
}

/* The local searches (refine, refine_selection) are skipped on traces
 * longer than this: their work caps would allow only a handful of moves. */
#define LOCAL_MAX_EV 200000u

/* The first event at or after ev (after it, for an AFTER action) where
 * block x is used or freed: a prefetch must come by then.  A block without
 * access marks has uses the trace does not show (the prediction cannot see
 * them either): its prefetch stays no later than the rule put it (ev). */
static uint32_t next_use(const struct hoff__trace *t, uint32_t x, uint32_t ev, int when) {
    const struct hoff__tblock *b = &t->blocks[x];
    const struct hoff__tacc *a = t->acc + b->first_access;
    uint32_t lo = 0, hi = b->naccess, until = b->free_ev;

    if (b->naccess < 2)
        return ev;

    while (lo < hi) { /* the first access at or past ev (past it, AFTER) */
        uint32_t mid = lo + (hi - lo) / 2;

        if (a[mid].ev < ev + (when == HOFF__ACT_AFTER))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < b->naccess && a[lo].ev < until ? a[lo].ev : until;
}

/* Move prefetch unit u (one block's own prefetch, or every member's part of
 * group u.group) of s to event ne in d (a copy of s); 0, 1 when the move
 * is not allowed (a member used or freed on the way, a block the tiers
 * move), -ENOMEM. */
struct unit {
    uint32_t ev, block, group;
    uint8_t when;
};

static int move_unit(const struct hoff__trace *t, const struct hoff__schedule *s, const uint8_t *tiered,
                     const struct unit *u, uint32_t ne, struct hoff__schedule *d) {
    size_t j;
    int rc;

    for (j = 0; j < s->nact; j++) {
        const struct hoff__action *a = &s->act[j];

        if (a->kind != HOFF__ACT_PREFETCH || a->ev != u->ev || a->when != u->when ||
            (u->group ? a->group != u->group : (a->group || a->block != u->block)))
            continue;
        if (tiered[a->block] ||
            (ne > u->ev && ne + (u->when == HOFF__ACT_AFTER) > next_use(t, a->block, u->ev, u->when)))
            return 1;
    }
    if ((rc = hoff__schedule_copy(d, s)) != 0)
        return rc;
    for (j = 0; j < d->nact; j++) {
        struct hoff__action *a = &d->act[j];

        if (a->kind == HOFF__ACT_PREFETCH && a->ev == u->ev && a->when == u->when &&
            (u->group ? a->group == u->group : (!a->group && a->block == u->block)))
            a->ev = ne;
    }
    if (u->group)
        d->groups[u->group - 1].prefetch_ev = ne;
    hoff__schedule_sort(d);
    return 0;
}

/*
 * Local search on the prefetch points of the chosen schedule.  The
 * candidates place every prefetch by one rule; the copies they then queue
 * behind each other, the room each takes from an allocation and the
 * evictions it waits for leave a few prefetches better off a few events
 * earlier or later.  Each prefetch (a group's as one) is tried 32, 16, 8,
 * 4, 2 and 1 events earlier, then as many later (never past its use), and
 * the first move the prediction says stalls less is kept, as long as the
 * instant-transfer peak stays within the budget (or does not rise on an
 * infeasible plan); rounds repeat until one finds nothing.  Work is capped
 * at about 10^7 event-steps of prediction (a few hundred milliseconds), so
 * on long traces it does a round or less (none past LOCAL_MAX_EV events).
 * Blocks the tiers spill and
 * restore keep their points (their restores are timed to them).  s must be
 * predicted (s->stall_ns); it is only ever replaced by a better schedule.
 */
static int refine(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                  struct hoff__schedule *s) {
    static const int delta[] = {-32, -16, -8, -4, -2, -1, 1, 2, 4, 8, 16, 32};
    const uint64_t work = 10000000;
    uint64_t evals, max_evals, ceiling, peak;
    struct hoff__schedule d;
    struct unit *u = NULL;
    uint8_t *tiered = NULL, *seen = NULL;
    size_t i, nu, k;
    uint32_t pev;
    int rc = 0, round, found = 1;

    if ((s->stall_ns == 0 && !s->overruns) || s->stall_ns == UINT64_MAX || !t->nev || t->nev > LOCAL_MAX_EV)
        return 0;
    if ((rc = hoff__schedule_peak(t, s, &peak, &pev)) != 0)
        return rc;
    ceiling = peak > o->budget_bytes ? peak : o->budget_bytes;
    max_evals = work / (t->nev + s->nact + 1);
    hoff__schedule_init(&d);
    tiered = calloc(t->nblocks ? t->nblocks : 1, 1);
    seen = calloc(s->ngroups + 1, 1);
    u = malloc((s->nact ? s->nact : 1) * sizeof *u);
    if (!tiered || !seen || !u) {
        rc = -ENOMEM;
        goto out;
    }
    for (i = 0; i < s->nact; i++)
        if (s->act[i].kind == HOFF__ACT_SPILL || s->act[i].kind == HOFF__ACT_RESTORE)
            tiered[s->act[i].block] = 1;
    for (evals = 0, round = 0; found && round < 8 && evals < max_evals && !cut(o); round++) {
        found = 0;
        /* the units, in schedule order, as the round starts */
        memset(seen, 0, s->ngroups + 1);
        for (i = nu = 0; i < s->nact; i++) {
            const struct hoff__action *a = &s->act[i];

            if (a->kind != HOFF__ACT_PREFETCH || (a->group && (a->group > s->ngroups || seen[a->group])))
                continue;
            seen[a->group] = a->group != 0;
            u[nu++] = (struct unit){.ev = a->ev, .block = a->block, .group = a->group, .when = a->when};
        }
        for (i = 0; i < nu && evals < max_evals && !cut(o); i++) {
            for (k = 0; k < sizeof delta / sizeof delta[0] && evals < max_evals; k++) {
                int64_t ne = (int64_t)u[i].ev + delta[k];

                if (ne < 0 || ne >= (int64_t)t->nev)
                    continue;
                if ((rc = move_unit(t, s, tiered, &u[i], (uint32_t)ne, &d)) < 0)
                    goto out;
                if (rc) { /* not allowed; later ones are not either */
                    rc = 0;
                    if (delta[k] > 0)
                        break;
                    continue;
                }
                if (hoff__schedule_peak(t, &d, &peak, &pev) != 0 || peak > ceiling)
                    continue; /* before its eviction, or the budget breaks */
                evals++;
                if ((rc = keep_if_better(t, o, T, s, &d)) < 0)
                    goto out;
                if (rc) {
                    rc = 0;
                    u[i].ev = (uint32_t)ne;
                    found = 1;
                    break;
                }
            }
        }
    }
out:
    hoff__schedule_destroy(&d);
    free(u);
    free(tiered);
    free(seen);
    return rc;
}

/* s spills or restores a block (the tiers pass planned them). */
static int has_tiers(const struct hoff__schedule *s) {
    size_t i;

    for (i = 0; i < s->nact; i++)
        if (s->act[i].kind == HOFF__ACT_SPILL || s->act[i].kind == HOFF__ACT_RESTORE)
            return 1;
    return 0;
}

/* Block x has access marks: the trace (and the prediction) sees its uses.
 * Without them its guard gap is the rules' guess at where it is idle, and
 * dropping that gap would leave the block to the runtime's evictions on
 * demand, which the prediction sees never paid back. */
static int marked(const struct hoff__trace *t, uint32_t x) {
    return t->blocks[x].naccess > 1;
}

/* d = s without the gap whose eviction is s->act[i]: that eviction and
 * the block's next prefetch.  0 or -ENOMEM. */
static int drop_gap(const struct hoff__schedule *s, size_t i, struct hoff__schedule *d) {
    uint32_t x = s->act[i].block;
    size_t j, w;
    int rc, gone = 0;

    if ((rc = hoff__schedule_copy(d, s)) != 0)
        return rc;
    for (j = w = 0; j < d->nact; j++) {
        const struct hoff__action *a = &d->act[j];

        if (j == i)
            continue;
        if (j > i && !gone && a->block == x && a->kind == HOFF__ACT_EVICT)
            gone = 1; /* the block's next gap: its prefetch stays */
        if (j > i && !gone && a->block == x && a->kind == HOFF__ACT_PREFETCH) {
            gone = 1;
            continue;
        }
        d->act[w++] = *a;
    }
    d->nact = w;
    return 0;
}

/* keep_if_better, when d is valid and its instant-transfer peak stays
 * within ceiling; *work counts both.  1 kept, 0 not, -errno. */
static int try_keep(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                    struct hoff__schedule *s, struct hoff__schedule *d, uint64_t ceiling, uint64_t *work) {
    uint64_t peak;
    uint32_t pev;

    *work += t->nev + d->nact;
    if (hoff__schedule_peak(t, d, &peak, &pev) != 0 || peak > ceiling)
        return 0; /* not valid (the block is away already), or the budget breaks */
    *work += t->nev + d->nact;
    return keep_if_better(t, o, T, s, d);
}

/*
 * Local search on which gaps an ungrouped schedule evicts.  The selections
 * take gaps longest first; what a gap costs on the device depends on when
 * its copies can run, so the prediction judges moves of three kinds: drop
 * an evicted gap (its eviction and its prefetch), add a gap the trace has
 * (evicted right after its last access, prefetched at its use), or add one
 * and drop another; only gaps of blocks with access marks are dropped
 * (marked()).  A move is kept when the schedule stays valid, its
 * instant-transfer peak within the budget (or no higher, infeasible), and
 * the predicted stall falls; rounds repeat while one finds something.  The
 * work is capped at about 2 x 10^7 event-steps (none past LOCAL_MAX_EV
 * events).  Schedules with groups or with the tiers' spills and restores
 * are left as they are; under a host cap that did not need spills, the
 * tiers pass runs again on the new selection (its spills and host figures)
 * and the prediction judges the whole against the schedule it started
 * from.  s must be predicted.
 */
static int refine_selection(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                            struct hoff__schedule *s) {
    const uint64_t cap = 20000000;
    uint64_t work = 0, peak, ceiling;
    struct hoff__schedule d, e, orig;
    struct hoff__gap *g = NULL;
    size_t ng = 0, i, k;
    uint32_t pev;
    int rc, round, found = 1;

    if ((s->stall_ns == 0 && !s->overruns) || s->stall_ns == UINT64_MAX || s->ngroups || !t->nev ||
        t->nev > LOCAL_MAX_EV)
        return 0;
    if (has_tiers(s)) /* the tiers pass spills for this selection: it stays */
        return 0;
    if ((rc = hoff__schedule_peak(t, s, &peak, &pev)) != 0 || (rc = hoff__plan_gaps(t, o, &g, &ng)) != 0)
        return rc;
    ceiling = peak > o->budget_bytes ? peak : o->budget_bytes;
    hoff__schedule_init(&d);
    hoff__schedule_init(&e);
    hoff__schedule_init(&orig);
    if (o->host_cap_bytes && (rc = hoff__schedule_copy(&orig, s)) != 0)
        goto out;
    for (round = 0; found && round < 8 && work < cap && !rc && !cut(o); round++) {
        found = 0;
        for (i = 0; i < s->nact && work < cap && !cut(o); i++) { /* drops */
            if (s->act[i].kind != HOFF__ACT_EVICT || s->act[i].group || !marked(t, s->act[i].block))
                continue;
            if ((rc = drop_gap(s, i, &d)) != 0 || (rc = try_keep(t, o, T, s, &d, ceiling, &work)) < 0)
                goto out;
            if (rc) { /* s changed: look at this position again */
                found = 1;
                i--;
            }
        }
        for (k = 0; k < ng && work < cap && !cut(o); k++) { /* adds, then swaps */
            const struct hoff__gap *x = &g[k];

            if ((rc = hoff__schedule_copy(&d, s)) != 0 ||
                (rc = hoff__schedule_add(&d, x->a, HOFF__ACT_AFTER, HOFF__ACT_EVICT, x->block, x->copy_ev)) != 0 ||
                (x->b < t->nev &&
                 (rc = hoff__schedule_add(&d, x->b, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, x->block, UINT32_MAX)) != 0))
                goto out;
            hoff__schedule_sort(&d);
            work += t->nev + d.nact;
            if (hoff__schedule_peak(t, &d, &peak, &pev) != 0)
                continue; /* taken already, or overlapping a taken one */
            if ((rc = try_keep(t, o, T, s, &d, ceiling, &work)) < 0)
                goto out;
            if (rc) {
                found = 1;
                continue;
            }
            for (i = 0; i < d.nact && work < cap; i++) {
                if (d.act[i].kind != HOFF__ACT_EVICT || d.act[i].group || !marked(t, d.act[i].block) ||
                    (d.act[i].block == x->block && d.act[i].ev == x->a))
                    continue;
                if ((rc = drop_gap(&d, i, &e)) != 0 || (rc = try_keep(t, o, T, s, &e, ceiling, &work)) < 0)
                    goto out;
                if (rc) {
                    found = 1;
                    break;
                }
            }
        }
        rc = 0;
    }
out:
    rc = rc < 0 ? rc : 0;
    if (!rc && o->host_cap_bytes && orig.nact &&
        (s->nact != orig.nact || memcmp(s->act, orig.act, s->nact * sizeof *s->act))) {
        struct hoff__prediction pr;

        if ((rc = hoff__plan_tiers(t, o, s)) == 0 &&
            (rc = hoff__plan_predict(t, o, T, s, HOFF__PLACE_KEEP, &pr)) == 0 && !beats(s, &orig))
            rc = hoff__schedule_copy(s, &orig);
    }
    if (!rc) { /* the figures the planners keep */
        s->bytes_d2h = s->bytes_h2d = 0;
        for (i = 0; i < s->nact; i++) {
            uint64_t b = hoff__plan_bytes(o->block_bytes, &t->blocks[s->act[i].block]);

            s->bytes_d2h += s->act[i].kind == HOFF__ACT_EVICT ? b : 0;
            s->bytes_h2d += s->act[i].kind == HOFF__ACT_PREFETCH ? b : 0;
        }
    }
    hoff__schedule_destroy(&d);
    hoff__schedule_destroy(&e);
    hoff__schedule_destroy(&orig);
    free(g);
    return rc;
}

/* A hair of stall that fewer prefetch calls may cost over base: 2% of it,
 * or 0.5% of the step's compute, never past cap (when cap >= base). */
static uint64_t allowance(const struct hoff__trace *t, const uint64_t *T, uint64_t base, uint64_t cap) {
    uint64_t compute = hoff__plan_compute_ns(t, T);
    uint64_t limit = base + (base / 50 > compute / 200 ? base / 50 : compute / 200);

    return limit > cap && cap >= base ? cap : limit;
}

/* Groups for the ungrouped candidates c[0 .. n-1], of which the rules'
 * best stalls rules_best and the best of all (refined) *best: fewer calls
 * may cost at most a hair of stall over c[*best] (allowance) and never
 * more than cap (greedy's schedule as the runtime groups it).  Each of the
 * (up to four) candidates within the rules' allowance, least stall first,
 * is grouped as far as that allowance lets (choose_groups), then its
 * points refined (refine); of those within c[*best]'s allowance the one
 * with the fewest prefetch calls wins (then the least stall) and is left
 * grouped in c[*best]. */
static int group_best(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                      struct hoff__schedule *c, int n, uint64_t rules_best, uint64_t cap, int *best) {
    enum { MAXC = 8 };
    const int TRY = t->nev > 200000 ? 1 : 4; /* each try is up to 27 predicted replays and a refine */
    uint64_t limit, final;
    uint64_t calls = UINT64_MAX, kstall = UINT64_MAX;
    struct hoff__schedule tmp, keep, r, w;
    struct hoff__prediction pr;
    uint8_t tried[MAXC] = {0};
    int k, j, win = -1, rc = 0;

    if (rules_best == UINT64_MAX || c[*best].stall_ns == UINT64_MAX || n > MAXC)
        return 0;
    limit = allowance(t, T, rules_best, cap);
    final = allowance(t, T, c[*best].stall_ns, cap);
    hoff__schedule_init(&tmp);
    hoff__schedule_init(&keep);
    hoff__schedule_init(&r);
    hoff__schedule_init(&w);
    for (j = 0; j < TRY && !rc && !cut(o); j++) {
        int next = -1;

        for (k = 0; k < n; k++) /* the next candidate by stall */
            if (!tried[k] && c[k].stall_ns <= limit && c[k].overruns <= c[*best].overruns &&
                (next < 0 || c[k].stall_ns < c[next].stall_ns))
                next = k;
        if (next < 0)
            break;
        tried[next] = 1;
        for (k = 0; k < n; k++) /* the same schedule by another route: once is enough */
            if (k != next && !tried[k] && c[k].stall_ns == c[next].stall_ns && c[k].nact == c[next].nact &&
                (!c[k].nact || !memcmp(c[k].act, c[next].act, c[k].nact * sizeof *c[k].act)))
                tried[k] = 1;
        if ((rc = hoff__schedule_copy(&r, &c[next])) != 0 ||
            (rc = choose_groups(t, o, T, &r, &tmp, &keep, limit)) != 0 ||
            (r.ngroups && (rc = refine(t, o, T, &r)) != 0) ||
            (rc = hoff__plan_predict(t, o, T, &r, HOFF__PLACE_KEEP, &pr)) != 0)
            break;
        if (r.stall_ns <= final && r.overruns <= c[*best].overruns &&
            (pr.prefetch_calls < calls || (pr.prefetch_calls == calls && r.stall_ns < kstall))) {
            calls = pr.prefetch_calls;
            kstall = r.stall_ns;
            win = next;
            rc = hoff__schedule_copy(&w, &r);
        }
    }
    if (!rc && win >= 0 && (rc = hoff__schedule_copy(&c[win], &w)) == 0)
        *best = win;
    hoff__schedule_destroy(&tmp);
    hoff__schedule_destroy(&keep);
    hoff__schedule_destroy(&r);
    hoff__schedule_destroy(&w);
    return rc;
}

/* The ungrouped candidates c[0 .. nu - 1] (nu a multiple of 3): two selections (by events, by time), each placed
 * three ways, with the tiers pass after when there is a host cap; *best (0 on entry) the index of the one that
 * beats the others.  Under a time budget that runs out, the ones not made are never chosen.  0 or -errno. */
static int ungrouped(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                     const int64_t *res, const struct hoff__schedule *out, struct hoff__schedule *c, int nu,
                     int *best) {
    static const int place[3] = {HOFF__PLACE_KEEP, HOFF__PLACE_EARLY, HOFF__PLACE_EARLY_HEADROOM};
    struct hoff__prediction pr;
    struct hoff__plan_opts o2 = *o;
    int rc = 0, i;

    o2.host_cap_bytes = 0; /* selection and placement first, the tiers after */
    o2.nvme = 0;
    /* Every candidate starts from out as hoff__plan_begin left it (its
     * releases), then selects and places; then the tiers pass keeps the
     * host cap on it, and the prediction judges the whole (host room,
     * spills and restores included). */
    for (i = 0; i < nu && !rc; i++) {
        if (i && cut(o)) { /* anytime: greedy's, predicted, is an answer */
            for (; i < nu; i++) {
                c[i].stall_ns = UINT64_MAX; /* never chosen */
                c[i].overruns = UINT64_MAX;
            }
            break;
        }
        /* two selections (by events, by time), each placed three ways: a
         * selection is made once and copied (it is 40% of the time at 10^6
         * events), before the placement rewrites it */
        if (i % 3 == 0) {
            rc = hoff__schedule_copy(&c[i], out);
            if (!rc)
                rc = hoff__plan_greedy_select(t, &o2, res, i < 3 ? NULL : T, &c[i]);
            if (!rc)
                rc = hoff__schedule_copy(&c[i + 1], &c[i]);
            if (!rc)
                rc = hoff__schedule_copy(&c[i + 2], &c[i]);
        }
        if (!rc)
            rc = hoff__plan_predict(t, &o2, T, &c[i], place[i % 3], &pr);
        if (!rc && o->host_cap_bytes)
            rc = tiers_and_predict(t, o, T, &c[i]);
        if (!rc && beats(&c[i], &c[*best]))
            *best = i;
    }
    return rc;
}

static int timed_build(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *out) {
    /* NU ungrouped candidates, the best of them refined (R), and greedy's
     * as the runtime groups it (G) */
    enum { NU = 6, R = NU, G = NU + 1, NC = NU + 2 };
    uint64_t t0 = hoff__plan_now_ns(), *T = NULL, base;
    int64_t *res = NULL;
    struct hoff__schedule c[NC];
    struct hoff__prediction pr;
    int rc, i, best = 0, grouped = 0;

    for (i = 0; i < NC; i++)
        hoff__schedule_init(&c[i]);
    rc = hoff__plan_begin(hoff__planner_timed.name, t, o, out, &res);
    if (rc || !res)
        goto done;
    T = hoff__plan_times(t);
    if (!T) {
        rc = -ENOMEM;
        goto done;
    }
    rc = ungrouped(t, o, T, res, out, c, NU, &best);
    if (rc || (rc = hoff__schedule_copy(&c[R], &c[best])) != 0 || (rc = refine_selection(t, o, T, &c[R])) != 0 ||
        (rc = refine(t, o, T, &c[R])) != 0)
        goto done;
    base = c[best].stall_ns; /* what the rules reach: the groups' allowance is from it */
    if (beats(&c[R], &c[best]))
        best = R;
    if (o->groups && !cut(o)) {
        grouped = 1;
        /* greedy's schedule as the runtime groups it (hoff__plan_groups,
         * after the tiers): a candidate too, and the stall timed's own
         * groups may not pass */
        if ((rc = hoff__schedule_copy(&c[G], &c[0])) != 0 || (rc = hoff__plan_groups(t, o, &c[G])) != 0 ||
            (rc = hoff__plan_predict(t, o, T, &c[G], HOFF__PLACE_KEEP, &pr)) != 0)
            goto done;
        if (beats(&c[G], &c[best]))
            best = G;
        else if ((rc = group_best(t, o, T, c, NU + 1, base, c[G].stall_ns, &best)) != 0)
            goto done;
        if (best == G && (rc = refine(t, o, T, &c[best])) != 0) /* the groups' points */
            goto done;
    }
    if ((rc = hoff__schedule_copy(out, &c[best])) != 0)
        goto done;
    out->grouped = grouped; /* else (groups off, or no time left) the runtime groups it as greedy's */
    memset(out->planner, 0, sizeof out->planner);
    strncpy(out->planner, hoff__planner_timed.name, sizeof out->planner - 1);
    /* What the plan reaches in instant-transfer terms (early prefetches hold
     * room sooner, within the budget), then the host and NVMe tiers. */
    rc = hoff__schedule_peak(t, out, &out->peak_bytes, &out->peak_ev);
    if (!rc) {
        out->feasible = out->peak_bytes <= o->budget_bytes;
        /* the host peak, for the record; under a cap that the candidate
         * needed no spills for, the searches and groups may have moved the
         * prefetches since its tiers pass: again, with a prediction */
        if (!o->host_cap_bytes)
            rc = hoff__plan_tiers(t, o, out);
        else if (!has_tiers(out) && (rc = hoff__plan_tiers(t, o, out)) == 0 && has_tiers(out))
            rc = hoff__plan_predict(t, o, T, out, HOFF__PLACE_KEEP, &pr);
    }

done:
    if (rc) {
        out->nact = 0;
        out->bytes_d2h = out->bytes_h2d = 0;
    }
    for (i = 0; i < NC; i++)
        hoff__schedule_destroy(&c[i]);
    free(T);
    free(res);
    out->plan_ns = hoff__plan_now_ns() - t0;
    return rc;
}

const struct hoff__planner hoff__planner_timed = {
    .name = "timed",
    .help = "timing-aware: the schedule (gaps by events or by time; prefetches at the use or as early as they "
            "fit) whose predicted replay stalls least",
    .build = timed_build,
};
