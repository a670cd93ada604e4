/* groups.c — the grouping pass: blocks a finished schedule evicts and prefetches together become a group, laid
 * out in one region so that one call moves them all.  Threading: a pure function of (trace, options, schedule). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/core.h"
#include "core/grow.h"
#include "core/optdefs.h"
#include "plan/plan.h"
#include "plan/segtree.h"

/*
 * What the pass does.
 *
 * A block is away from the device between its EVICT and the next PREFETCH.
 * With an action at event ev and timing when (0 before, 1 after), the bytes
 * leave or come back from event ev + when on (its "effective" event, as
 * hoff__schedule_peak counts them), so a block evicted at e and prefetched
 * at p is away on events e .. p - 1.
 *
 * Candidates: for every movable, non-retained block of the managed pool
 * that no SPILL or RESTORE action touches, its longest evicted gap that
 * ends with a prefetch (one gap per block: a block lives in one region, so
 * it can be in one group; its other gaps stay its own actions, which the
 * runtime issues on the block's part of the region).
 *
 * Groups form in the order of the prefetches (then of the evictions): the
 * blocks that come back one after the other, typically one layer's saved
 * activations in its backward.  A group has one eviction point E (the
 * latest member's) and one prefetch point P (the earliest member's): every
 * member is away on E .. P - 1, inside its own gap, so no member's access,
 * allocation or free is crossed and every member is live at both points.
 * A candidate joins the group at the head of the scan when
 *  - it was allocated on the group's stream,
 *  - the group keeps at least one event away (max(E, e) < P),
 *  - the group has fewer than MAX_MEMBERS members,
 *  - and the resident bytes stay within the limit: the budget (or, for an
 *    infeasible schedule, its peak: grouping never raises it) once the
 *    members' evictions are delayed to the new E and its prefetch moved up
 *    to P.  A segment tree over the per-event resident bytes (range add,
 *    global max) makes each test O(log N); a refused candidate's adds are
 *    undone and it starts the next group.
 * One thing the instant-transfer peak does not see is what makes a group
 * cost time: the members' evictions, spread over many events alone, become
 * one copy of all their bytes, and none of them leaves the budget before
 * the whole copy has landed.  So the test also holds a group's bytes on the
 * device from E until its copy would land (the first event at or after
 * time(E) + bytes / d2h_gbps, event times from the trace: t_gpu_ns where
 * every event has one, else t_cpu_ns; at most until P), as the runtime's
 * budget will: a group only grows while the budget has room for its copy in
 * flight.  Without event times or a D2H bandwidth it is held at E only.
 * Groups of one are dropped.  Bytes planned do not change: every member is
 * still evicted and prefetched once for that gap.
 *
 * Then the members' actions move to the group's points (group = g + 1 on
 * each), the schedule is sorted again, and its peak is checked with
 * hoff__schedule_peak (a pass that broke it would be undone).  Each group
 * is laid out in the order of its prefetches: member k at the sum of the
 * bytes of members 0 .. k-1, each member's bytes rounded up to the 2 MiB
 * managed grain, so that separately moved blocks never share one of the
 * driver's migration units.
 *
 * Cost: O(A) to pair actions, O(M log M) to sort the candidates, O(M log N)
 * for the tests, O(A log A) for the sort: no worse than the planners'.
 */

#define MAX_MEMBERS 64

/* When a group evicted at E with S bytes has landed (see above): an event in
 * [E, P]. */
struct landing {
    const uint64_t *T; /* event times, non-decreasing; NULL: no timing */
    uint32_t nev;
    double d2h_gbps;
};

static uint32_t land(const struct landing *L, uint32_t E, uint64_t S, uint32_t P) {
    uint64_t end;
    uint32_t lo = E, hi = P;

    if (!L->T || E >= L->nev || !(L->d2h_gbps > 0))
        return E;
    end = L->T[E] + (uint64_t)((double)S / L->d2h_gbps);
    if (hi > L->nev)
        hi = L->nev;
    while (lo < hi) { /* first event at or after end */
        uint32_t mid = lo + (hi - lo) / 2;

        if (L->T[mid] >= end)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

struct cand {
    uint32_t block;
    uint32_t ie, ip; /* its EVICT and PREFETCH actions */
    uint32_t e, p;   /* effective events: away on e .. p - 1 */
    uint64_t bytes;  /* what it counts for (block_bytes) */
    uint64_t stream;
};

static int cand_cmp(const void *pa, const void *pb) {
    const struct cand *x = pa, *y = pb;

    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    if (x->e != y->e)
        return x->e < y->e ? -1 : 1;
    return x->block < y->block ? -1 : x->block > y->block;
}

static uint32_t eff(const struct hoff__action *a) {
    return a->ev + (a->when ? 1u : 0u);
}

/* Add d on events [l, end) clipped to the trace (nothing when empty). */
static void add(struct hoff__segtree *sg, uint32_t nev, uint32_t l, uint32_t end, int64_t d) {
    if (end > nev)
        end = nev;
    if (l < end && d)
        hoff__segtree_add(sg, l, end - 1, d);
}

static void drop_groups(struct hoff__schedule *s) {
    size_t i;

    for (i = 0; i < s->nact; i++)
        s->act[i].group = 0;
    hoff__schedule_free_groups(s);
}

/* The candidates: each eligible block's longest evicted gap ending with a prefetch. */
static int candidates(const struct hoff__trace *t, const struct hoff__plan_opts *o, const struct hoff__schedule *s,
                      struct cand **out, size_t *nout) {
    uint32_t nb = t->nblocks, i;
    uint32_t *open = NULL, *be = NULL, *bp = NULL;
    uint8_t *bad = NULL;
    struct cand *c = NULL;
    size_t k, nc = 0;
    int rc = -ENOMEM;

    *out = NULL;
    *nout = 0;
    open = malloc((nb ? nb : 1) * sizeof *open);
    be = malloc((nb ? nb : 1) * sizeof *be);
    bp = malloc((nb ? nb : 1) * sizeof *bp);
    bad = calloc(nb ? nb : 1, 1);
    if (!open || !be || !bp || !bad)
        goto out;
    for (i = 0; i < nb; i++) {
        const struct hoff__tblock *b = &t->blocks[i];

        open[i] = be[i] = bp[i] = UINT32_MAX;
        bad[i] = !hoff__plan_movable(b) || b->retained;
    }
    for (k = 0; k < s->nact; k++) {
        const struct hoff__action *a = &s->act[k];

        if (a->block >= nb)
            continue;
        switch (a->kind) {
        case HOFF__ACT_EVICT: open[a->block] = (uint32_t)k; break;
        case HOFF__ACT_PREFETCH:
            if (open[a->block] != UINT32_MAX) {
                uint32_t ie = open[a->block], e = eff(&s->act[ie]), p = eff(a);

                if (p > e &&
                    (be[a->block] == UINT32_MAX || p - e > eff(&s->act[bp[a->block]]) - eff(&s->act[be[a->block]]))) {
                    be[a->block] = ie;
                    bp[a->block] = (uint32_t)k;
                }
            }
            open[a->block] = UINT32_MAX;
            break;
        case HOFF__ACT_SPILL:
        case HOFF__ACT_RESTORE:
            bad[a->block] = 1; /* the tiers' blocks are left alone */
            break;
        default: break;
        }
    }
    for (i = 0; i < nb; i++)
        nc += !bad[i] && be[i] != UINT32_MAX;
    c = malloc((nc ? nc : 1) * sizeof *c);
    if (!c)
        goto out;
    nc = 0;
    for (i = 0; i < nb; i++) {
        if (bad[i] || be[i] == UINT32_MAX)
            continue;
        c[nc].block = i;
        c[nc].ie = be[i];
        c[nc].ip = bp[i];
        c[nc].e = eff(&s->act[be[i]]);
        c[nc].p = eff(&s->act[bp[i]]);
        c[nc].bytes = hoff__plan_bytes(o->block_bytes, &t->blocks[i]);
        c[nc].stream = t->ev[t->blocks[i].alloc_ev].stream;
        nc++;
    }
    if (nc > 1)
        qsort(c, nc, sizeof *c, cand_cmp);
    *out = c;
    *nout = nc;
    c = NULL;
    rc = 0;
out:
    free(c);
    free(open);
    free(be);
    free(bp);
    free(bad);
    return rc;
}

/* Record the group c[first .. first + n - 1] with eviction point E. */
static int keep_group(struct hoff__schedule *s, const struct cand *c, size_t first, size_t n, uint32_t evict_k,
                      size_t *cap_g) {
    struct hoff__group *g;
    uint64_t off = 0;
    size_t k;

    if (HOFF__GROW(s->groups, *cap_g, s->ngroups + 1))
        return -ENOMEM;
    g = &s->groups[s->ngroups];
    g->first = (uint32_t)s->ngmember;
    g->n = (uint32_t)n;
    g->evict_ev = s->act[evict_k].ev;
    g->evict_when = s->act[evict_k].when;
    g->prefetch_ev = s->act[c[first].ip].ev;
    g->prefetch_when = s->act[c[first].ip].when;
    for (k = 0; k < n; k++) {
        struct hoff__gmember *m = &s->gmember[s->ngmember++];
        uint64_t bytes = hoff__align_up(c[first + k].bytes ? c[first + k].bytes : 1, HOFF__MANAGED_GRAIN);

        m->block = c[first + k].block;
        m->off = off;
        m->bytes = bytes;
        off += bytes;
        s->block_group[m->block] = (uint32_t)s->ngroups + 1;
        s->block_member[m->block] = g->first + (uint32_t)k;
    }
    g->bytes = off;
    s->ngroups++;
    return 0;
}

/* Move each member's actions to its group's points — the eviction too
 * unless the group's evict_ev is UINT32_MAX — sort, and check that the
 * schedule holds and its peak stays within limit.  1: done; 0: undone, s
 * as it was (cannot happen: the callers counted the same bytes); -errno. */
static int apply(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s,
                 const struct cand *c, size_t nc, struct hoff__action *saved, uint64_t limit) {
    uint64_t peak = 0;
    uint32_t peak_ev = 0;
    size_t k;
    int rc;

    memcpy(saved, s->act, s->nact * sizeof *saved);
    for (k = 0; k < nc; k++) {
        uint32_t gi = s->block_group[c[k].block];
        const struct hoff__group *g;

        if (!gi)
            continue;
        g = &s->groups[gi - 1];
        if (g->evict_ev != UINT32_MAX) {
            s->act[c[k].ie].ev = g->evict_ev;
            s->act[c[k].ie].when = g->evict_when;
            s->act[c[k].ie].group = gi;
        }
        s->act[c[k].ip].ev = g->prefetch_ev;
        s->act[c[k].ip].when = g->prefetch_when;
        s->act[c[k].ip].group = gi;
    }
    hoff__schedule_sort(s);
    rc = hoff__schedule_peak(t, s, &peak, &peak_ev);
    if (rc || peak > limit) {
        memcpy(s->act, saved, s->nact * sizeof *saved);
        hoff__log(HOFF_LOG_WARN, "grouping: the grouped schedule does not hold (%s); planned without groups",
                  rc ? "invalid" : "its peak rose");
        return 0;
    }
    s->peak_bytes = peak;
    s->peak_ev = peak_ev;
    s->feasible = peak <= o->budget_bytes;
    return 1;
}

/* The scan: the candidates in order, each joining the open group while the resident peak on sg (the schedule's,
 * with the group's moves added) stays within limit, else closing it (kept when it has two or more members) and
 * opening one of its own.  0 or -ENOMEM. */
static int form_groups(struct hoff__schedule *s, const struct cand *c, size_t nc, struct hoff__segtree *sg,
                       const struct landing *L, uint64_t limit) {
    uint32_t nev = L->nev, E = 0, P = 0, evict_k = 0;
    uint32_t XL = 0; /* the group's copy in flight is held on [E, XL) (E == XL: not held) */
    size_t k, first = 0, n = 0, cap_g = 0;
    uint64_t S = 0, stream = 0;
    int rc;

    for (k = 0; k <= nc; k++) {
        const struct cand *g = k < nc ? &c[k] : NULL;

        if (g && n > 0 && g->stream == stream && n < MAX_MEMBERS && (g->e > E ? g->e : E) < P) {
            uint32_t E2 = g->e > E ? g->e : E, XL2 = land(L, E2, S + g->bytes, P);

            add(sg, nev, E, XL, -(int64_t)S);               /* the old copy in flight */
            add(sg, nev, E, E2, (int64_t)S);                /* the members leave later */
            add(sg, nev, g->e, E, (int64_t)g->bytes);       /* so does g */
            add(sg, nev, P, g->p, (int64_t)g->bytes);       /* g comes back with the first */
            add(sg, nev, E2, XL2, (int64_t)(S + g->bytes)); /* the group's copy in flight */
            if ((uint64_t)hoff__segtree_top(sg) <= limit) {
                if (g->e > E)
                    evict_k = g->ie;
                E = E2;
                XL = XL2;
                S += g->bytes;
                n++;
                continue;
            }
            add(sg, nev, E2, XL2, -(int64_t)(S + g->bytes));
            add(sg, nev, E, E2, -(int64_t)S);
            add(sg, nev, g->e, E, -(int64_t)g->bytes);
            add(sg, nev, P, g->p, -(int64_t)g->bytes);
            add(sg, nev, E, XL, (int64_t)S);
        }
        /* Close the group at the head of the scan, start one with g. */
        if (n >= 2 && (rc = keep_group(s, c, first, n, evict_k, &cap_g)) != 0)
            return rc;
        if (!g)
            break;
        first = k;
        n = 1;
        E = g->e;
        XL = E; /* one block alone: as the schedule had it */
        P = g->p;
        S = g->bytes;
        stream = g->stream;
        evict_k = g->ie;
    }
    return 0;
}

int hoff__plan_groups(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s) {
    uint64_t t0 = hoff__plan_now_ns(), peak = 0, limit, *res = NULL;
    uint32_t nev = (uint32_t)t->nev, peak_ev = 0;
    struct cand *c = NULL;
    struct hoff__segtree sg = {0};
    size_t nc = 0, k;
    int64_t *v = NULL;
    struct hoff__action *saved = NULL;
    struct landing L = {NULL, nev, o->d2h_gbps};
    int rc;

    drop_groups(s);
    if (!s->nact || !nev || !t->nblocks)
        goto done_ok;
    rc = candidates(t, o, s, &c, &nc);
    if (rc)
        goto fail;
    if (nc < 2)
        goto done_ok;
    res = malloc((size_t)nev * sizeof *res);
    v = malloc((size_t)nev * sizeof *v);
    L.T = hoff__plan_times(t); /* NULL: no timing (the test is then the peak's alone) */
    s->gmember = malloc(nc * sizeof *s->gmember);
    s->block_group = calloc(t->nblocks, sizeof *s->block_group);
    s->block_member = calloc(t->nblocks, sizeof *s->block_member);
    saved = malloc(s->nact * sizeof *saved);
    rc = -ENOMEM;
    if (!res || !v || !s->gmember || !s->block_group || !s->block_member || !saved)
        goto fail;
    s->nblocks_grouped = t->nblocks;
    if (hoff__schedule_resident(t, s, res, &peak, &peak_ev) != 0)
        goto done_ok; /* not a schedule this pass can reason about: leave it alone */
    limit = o->budget_bytes > peak ? o->budget_bytes : peak;
    for (k = 0; k < nev; k++)
        v[k] = (int64_t)res[k];
    if ((rc = hoff__segtree_init(&sg, v, nev)) != 0)
        goto fail;

    if ((rc = form_groups(s, c, nc, &sg, &L, limit)) != 0)
        goto fail;
    if (!s->ngroups)
        goto done_ok;

    /* Move the members' actions to the group's points. */
    rc = apply(t, o, s, c, nc, saved, limit);
    if (rc < 0)
        goto fail;
    if (rc == 0)
        goto done_ok;
    rc = 0;
    goto done;

done_ok:
    drop_groups(s);
    rc = 0;
    if (0) {
    fail:
        drop_groups(s);
        if (rc == -ENOMEM)
            rc = hoff__error(-ENOMEM, "grouping: out of memory");
    }
done:
    if (sg.mx)
        hoff__segtree_destroy(&sg);
    free(saved);
    free((void *)L.T);
    free(c);
    free(res);
    free(v);
    s->group_ns = hoff__plan_now_ns() - t0;
    return rc;
}

/* --- prefetch groups -------------------------------------------------------- */

/*
 * hoff__plan_groups_late: groups on the prefetch side only.  The members
 * keep their own evictions (each starts right after its gap's last access,
 * where a timing-aware planner put it: a group eviction would start the
 * first members' copies later, and the budget waits for them); consecutive
 * prefetches merge, and the group is prefetched at its LATEST member's
 * point — so no block comes back earlier than planned and the resident
 * bytes can only fall — provided that point is at or before every member's
 * next use (its deadline) and within max_span events of the first member's
 * point.  Whether the later start costs stall is for the caller to judge
 * (timed.c predicts it).
 */

/* The event by which the block of gap c must be back: its first access after
 * the eviction; for a block without access marks, the guard before its free. */
static uint32_t deadline(const struct hoff__trace *t, const struct hoff__plan_opts *o, const struct hoff__schedule *s,
                         const struct cand *c) {
    const struct hoff__tblock *b = &t->blocks[c->block];
    uint32_t a = s->act[c->ie].ev, k, d;

    for (k = 0; k < b->naccess; k++) {
        uint32_t ev = t->acc[b->first_access + k].ev;

        if (ev > a)
            return ev;
    }
    d = b->free_ev == UINT32_MAX ? (uint32_t)t->nev : b->free_ev;
    d = d > o->guard_before_free ? d - o->guard_before_free : 0;
    return d > c->p ? d : c->p; /* never earlier than the schedule has it */
}

int hoff__plan_groups_late(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s,
                           uint32_t max_span, const uint64_t *T) {
    uint64_t t0 = hoff__plan_now_ns(), before = 0;
    uint32_t peak_ev = 0, Dmin = 0, P0 = 0;
    uint64_t S = 0;
    double h2d = o->h2d_gbps > 0 ? o->h2d_gbps : HOFF__DEF_SIM_H2D_GBPS;
    struct cand *c = NULL;
    struct hoff__action *saved = NULL;
    size_t nc = 0, k, first = 0, n = 0, cap_g = 0;
    uint64_t stream = 0;
    int rc;

    drop_groups(s);
    if (!s->nact || !t->nev || !t->nblocks)
        goto late_ok;
    if ((rc = hoff__schedule_peak(t, s, &before, &peak_ev)) != 0)
        goto late_ok; /* not a schedule this pass can reason about */
    rc = candidates(t, o, s, &c, &nc);
    if (rc)
        goto late_fail;
    if (nc < 2)
        goto late_ok;
    s->gmember = malloc(nc * sizeof *s->gmember);
    s->block_group = calloc(t->nblocks, sizeof *s->block_group);
    s->block_member = calloc(t->nblocks, sizeof *s->block_member);
    saved = malloc(s->nact * sizeof *saved);
    rc = -ENOMEM;
    if (!s->gmember || !s->block_group || !s->block_member || !saved)
        goto late_fail;
    s->nblocks_grouped = t->nblocks;

    for (k = 0; k <= nc; k++) {
        const struct cand *g = k < nc ? &c[k] : NULL;
        uint32_t d = g ? deadline(t, o, s, g) : 0;

        if (g && n > 0 && g->stream == stream && n < MAX_MEMBERS && g->p <= Dmin && g->p - P0 <= max_span &&
            s->act[g->ip].when == s->act[c[first].ip].when &&
            /* with event times: the group's one copy, started at g's point,
             * lands before the first member's use (queueing aside) */
            (!T || g->p >= t->nev ||
             (double)T[g->p] + (double)(S + g->bytes) / h2d <=
                 (double)T[(d < Dmin ? d : Dmin) < t->nev ? (d < Dmin ? d : Dmin) : t->nev - 1])) {
            Dmin = d < Dmin ? d : Dmin;
            S += g->bytes;
            n++;
            continue;
        }
        if (n >= 2 && (rc = keep_group(s, c, first, n, c[first].ie, &cap_g)) != 0)
            goto late_fail;
        if (n >= 2) { /* prefetched at the last member's point; evictions stay the members' own */
            struct hoff__group *gr = &s->groups[s->ngroups - 1];

            gr->prefetch_ev = s->act[c[first + n - 1].ip].ev;
            gr->prefetch_when = s->act[c[first + n - 1].ip].when;
            gr->evict_ev = UINT32_MAX;
            gr->evict_when = 0;
        }
        if (!g)
            break;
        first = k;
        n = 1;
        P0 = g->p;
        Dmin = d;
        S = g->bytes;
        stream = g->stream;
    }
    if (!s->ngroups)
        goto late_ok;

    rc = apply(t, o, s, c, nc, saved, before);
    if (rc < 0)
        goto late_fail;
    if (rc == 0)
        goto late_ok;
    rc = 0;
    goto late_done;

late_ok:
    drop_groups(s);
    rc = 0;
    if (0) {
    late_fail:
        drop_groups(s);
        if (rc == -ENOMEM)
            rc = hoff__error(-ENOMEM, "grouping: out of memory");
    }
late_done:
    free(saved);
    free(c);
    s->group_ns = hoff__plan_now_ns() - t0;
    return rc;
}
