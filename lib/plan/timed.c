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
 * keep the one that stalls least:
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
 * Groups (o->groups, HOFF_GROUPS): a seventh candidate is greedy's schedule
 * grouped as the runtime groups greedy's (hoff__plan_groups).  Unless it
 * wins, fewer prefetch calls may cost a hair of stall: of the candidates
 * within 2% of the best one's stall (or 0.5% of the step's compute), and
 * never above the seventh's, up to three (least stall first, one per
 * distinct schedule) have their consecutive prefetches merged into one
 * call at the last one's point (hoff__plan_groups_late) with the widest
 * span that stays within that limit, and the one left with the fewest
 * calls wins; the evictions stay each block's own, right after its last
 * access, where they land soonest.  The schedule is marked grouped: the
 * runtime does not group it again.
 *
 * Cost: six selections, seven predicted replays (twice that many with a
 * host cap), and up to 3 x 27 more for the groups (7 on traces of more
 * than 200000 events), each
 * O(M log M + nev log nev).
 */

/* Co-located groups on the prefetch side (hoff__plan_groups_late): of
 * several spans, with and without the test that a group's copy lands before
 * its first use, the grouping with the fewest prefetch calls whose predicted
 * stall is at most limit; s is left as it is when none is.  tmp and keep
 * are scratch. */
static int choose_groups(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                         struct hoff__schedule *s, struct hoff__schedule *tmp, struct hoff__schedule *keep,
                         uint64_t limit) {
    /* spans in events, each without and with the landing test (odd rungs) */
    static const uint32_t spans[] = {UINT32_MAX, UINT32_MAX, 128, 128, 96, 96, 64, 64, 48, 48, 32, 32, 24, 24,
                                     16, 16, 12, 12, 8, 8, 6, 6, 4, 4, 2, 2};
    uint64_t calls = UINT64_MAX, kstall = UINT64_MAX;
    struct hoff__prediction pr;
    size_t i;
    int rc;

    /* every rung (on very long traces every fifth: each is a predicted
     * replay); keep the fewest calls within the limit, then the least stall */
    for (i = 0; i < sizeof spans / sizeof spans[0]; i += t->nev > 200000 ? 5 : 1) {
        if ((rc = hoff__schedule_copy(tmp, s)) != 0 ||
            (rc = hoff__plan_groups_late(t, o, tmp, spans[i], i & 1 ? T : NULL)) != 0)
            return rc;
        if (!tmp->ngroups)
            continue;
        if ((rc = hoff__plan_predict(t, o, T, tmp, HOFF__PLACE_KEEP, &pr)) != 0)
            return rc;
        if (tmp->stall_ns <= limit && (pr.prefetch_calls < calls || (pr.prefetch_calls == calls && tmp->stall_ns < kstall))) {
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

/* Groups for the ungrouped candidates c[0 .. n-1], *best the one that
 * stalls least: fewer calls may cost at most a hair of stall (2% of the
 * best's, or 0.5% of the step's compute) and never more than cap (greedy's
 * schedule as the runtime groups it).  Each of the (up to three) candidates
 * within that limit, least stall first, is grouped as far as the limit
 * allows (choose_groups); the one with the fewest prefetch calls wins (then
 * the least stall) and is left grouped in c[*best]. */
static int group_best(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                      struct hoff__schedule *c, int n, uint64_t cap, int *best) {
    enum { MAXC = 8 };
    const int TRY = t->nev > 200000 ? 1 : 3; /* each try is up to 27 predicted replays */
    uint64_t base = c[*best].stall_ns, compute = t->nev ? T[t->nev - 1] - T[0] : 0, limit;
    uint64_t calls = UINT64_MAX, kstall = UINT64_MAX;
    struct hoff__schedule tmp, keep, r, w;
    struct hoff__prediction pr;
    uint8_t tried[MAXC] = {0};
    int k, j, win = -1, rc = 0;

    if (base == UINT64_MAX || n > MAXC)
        return 0;
    limit = base + (base / 50 > compute / 200 ? base / 50 : compute / 200);
    if (limit > cap && cap >= base)
        limit = cap;
    hoff__schedule_init(&tmp);
    hoff__schedule_init(&keep);
    hoff__schedule_init(&r);
    hoff__schedule_init(&w);
    for (j = 0; j < TRY && !rc; j++) {
        int next = -1;

        for (k = 0; k < n; k++) /* the next candidate by stall */
            if (!tried[k] && c[k].stall_ns <= limit && (next < 0 || c[k].stall_ns < c[next].stall_ns))
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
            (rc = hoff__plan_predict(t, o, T, &r, HOFF__PLACE_KEEP, &pr)) != 0)
            break;
        if (pr.prefetch_calls < calls || (pr.prefetch_calls == calls && r.stall_ns < kstall)) {
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

static int timed_build(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *out) {
    enum { NC = 7 }; /* 6 ungrouped, and greedy's as the runtime groups it */
    static const int place[3] = {HOFF__PLACE_KEEP, HOFF__PLACE_EARLY, HOFF__PLACE_EARLY_HEADROOM};
    uint64_t t0 = hoff__plan_now_ns(), *T = NULL;
    int64_t *res = NULL;
    struct hoff__schedule c[NC];
    struct hoff__prediction pr;
    struct hoff__plan_opts o2 = *o;
    int rc, i, best = 0;

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
    o2.host_cap_bytes = 0; /* selection and placement first, the tiers after */
    o2.nvme = 0;
    /* Every candidate starts from out as hoff__plan_begin left it (its
     * releases), then selects and places; then the tiers pass keeps the
     * host cap on it, and the prediction judges the whole (host room,
     * spills and restores included). */
    for (i = 0; i < NC - 1 && !rc; i++) {
        rc = hoff__schedule_copy(&c[i], out);
        if (!rc)
            rc = hoff__plan_greedy_select(t, &o2, res, i < 3 ? NULL : T, &c[i]);
        if (!rc)
            rc = hoff__plan_predict(t, &o2, T, &c[i], place[i % 3], &pr);
        if (!rc && o->host_cap_bytes)
            rc = tiers_and_predict(t, o, T, &c[i]);
        if (!rc && c[i].stall_ns < c[best].stall_ns)
            best = i;
    }
    if (rc)
        goto done;
    if (o->groups) {
        /* greedy's schedule as the runtime groups it (hoff__plan_groups,
         * after the tiers): a candidate too, and the stall timed's own
         * groups may not pass */
        const int g = NC - 1;

        if ((rc = hoff__schedule_copy(&c[g], &c[0])) != 0 || (rc = hoff__plan_groups(t, o, &c[g])) != 0 ||
            (rc = hoff__plan_predict(t, o, T, &c[g], HOFF__PLACE_KEEP, &pr)) != 0)
            goto done;
        if (c[g].stall_ns < c[best].stall_ns)
            best = g;
        else if ((rc = group_best(t, o, T, c, NC - 1, c[g].stall_ns, &best)) != 0)
            goto done;
    }
    if ((rc = hoff__schedule_copy(out, &c[best])) != 0)
        goto done;
    out->grouped = o->groups;
    memset(out->planner, 0, sizeof out->planner);
    strncpy(out->planner, hoff__planner_timed.name, sizeof out->planner - 1);
    /* What the plan reaches in instant-transfer terms (early prefetches hold
     * room sooner, within the budget), then the host and NVMe tiers. */
    rc = hoff__schedule_peak(t, out, &out->peak_bytes, &out->peak_ev);
    if (!rc) {
        out->feasible = out->peak_bytes <= o->budget_bytes;
        if (!o->host_cap_bytes)
            rc = hoff__plan_tiers(t, o, out); /* the host peak, for the record */
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
