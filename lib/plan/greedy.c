/* greedy.c — the HyperOffload RFC's greedy residency planner (section 4.4): evict the longest access gaps
 * first while an event they cover is over budget, with a segment tree over events (O(M log S), not the RFC's
 * O(M*S)).  Threading: a pure function of (trace, options); no shared state. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plan/plan.h"
#include "plan/segtree.h"

/*
 * What the planner does:
 *
 * Resident offload bytes at event i are the sizes of the live blocks of the
 * managed pool (pool 1), pinned ones included: a block inside a region holds
 * device memory and counts against the budget, it just cannot be evicted.
 * Device-pool blocks never count.  A block allocated at i or freed at i
 * counts at i; the BEFORE actions of i apply before it, the AFTER ones after
 * it (hoff__schedule_peak in plan.c is the reference).
 *
 * Candidates, for every managed unpinned block (hoff__plan_gaps, on the
 * use windows of doc/design.md: an access at e holds the block on
 * e .. close - 1, close being the next op mark, its free or the step's end):
 *  - with access events (naccess > 1; its alloc is the first access, a
 *    write): consecutive accesses p, q whose windows do not meet (q after
 *    p's close) are a gap: EVICT AFTER close - 1 (it fires at the op mark
 *    that closes p's window), PREFETCH BEFORE q; the block is away on
 *    close .. q-1.  copy_ev is the last write at or before p (the RFC's
 *    copy_start).  Once the window of the last access of a non-retained
 *    block has closed, a RELEASE AFTER close - 1 drops its dead bytes until
 *    the free (RFC step 7) when that close comes before the free: at the
 *    free itself the free releases.
 *    Retained blocks get no release, and their tail after the last access is
 *    no candidate (the RFC does not offload across the step boundary).
 *  - without access events (only its alloc) in a step that has some: its
 *    accesses are unknown, so the gap is its lifetime less the guard
 *    margins and its allocation's window: EVICT AFTER
 *    max(alloc_ev + guard_after_alloc, close - 1), PREFETCH BEFORE
 *    free_ev - guard_before_free.  (In a step without any access event every
 *    window lasts to the free: no gap at all.)
 *    copy_ev is the alloc (its only known write).  A retained one is evicted
 *    AFTER alloc_ev + guard_after_alloc and away until the step's end with
 *    NO prefetch: its next use is in a later step (or between steps, by the
 *    optimizer), which the trace does not show, and bringing it back at the
 *    step's end would spend the budget at the step boundary on bytes that may
 *    not be needed soon.  Managed memory keeps its address valid, so the
 *    first use pages it back in (counted as a fault), nothing is stranded.
 *    Its gap length, for the ordering, runs to nev (the step's end).
 *
 * Releases are planned first (they cost no transfer) and lower the resident
 * bytes the candidates are weighed against.  Then candidates are sorted by
 * (gap length, size, -start) descending (ties: lower block id first) and
 * taken in that order while the maximum of the resident bytes over the
 * events they cover is above the budget; a taken candidate subtracts its
 * size there.  The segment tree keeps the per-event resident bytes with
 * range add and range max.  The reached peak is the tree's maximum after the
 * last candidate (the first event holding it): the plan never claims more
 * than it achieves.  budget_bytes == 0 means no limit: empty schedule.
 */

static int cand_cmp(const void *pa, const void *pb) {
    const struct hoff__gap *x = pa, *y = pb;
    uint32_t dx = x->b - x->a, dy = y->b - y->a;

    if (dx != dy)
        return dx > dy ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    if (x->block != y->block)
        return x->block < y->block ? -1 : 1;
    return 0;
}

/* The same order with the gap's length in time on T (the step's end for a
 * gap to it) in place of its length in events. */
struct tkey {
    uint64_t len;
    struct hoff__gap g;
    size_t i;
};

static int tkey_cmp(const void *pa, const void *pb) {
    const struct tkey *x = pa, *y = pb;

    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return cand_cmp(&x->g, &y->g);
}

/* --- the selection ---------------------------------------------------------- */

int hoff__plan_greedy_select(const struct hoff__trace *t, const struct hoff__plan_opts *o, const int64_t *res,
                             const uint64_t *T, struct hoff__schedule *out) {
    uint32_t nev = (uint32_t)t->nev;
    struct hoff__gap *c = NULL;
    struct tkey *tk = NULL;
    uint32_t *taken = NULL;
    size_t nc = 0, ntaken = 0, k;
    struct hoff__segtree sg = {0};
    int rc;

    rc = hoff__plan_gaps(t, o, &c, &nc);
    if (rc)
        goto done;
    out->candidates = nc;
    tk = malloc((nc ? nc : 1) * sizeof *tk);
    taken = malloc((nc ? nc : 1) * sizeof *taken);
    rc = tk && taken ? hoff__segtree_init(&sg, res, nev) : -ENOMEM;
    if (rc)
        goto done;
    if (T) {
        for (k = 0; k < nc; k++) {
            uint64_t end = c[k].b < nev ? T[c[k].b] : T[nev - 1] + 1;

            tk[k].len = end - T[c[k].a + 1];
            tk[k].g = c[k];
            tk[k].i = k;
        }
        if (nc)
            qsort(tk, nc, sizeof *tk, tkey_cmp);
    } else {
        if (nc)
            qsort(c, nc, sizeof *c, cand_cmp);
        for (k = 0; k < nc; k++)
            tk[k].i = k;
    }
    for (k = 0; k < nc && hoff__segtree_top(&sg) > (int64_t)o->budget_bytes; k++) {
        const struct hoff__gap *x = &c[tk[k].i];
        uint32_t l = x->a + 1, r = x->b - 1;

        if (hoff__segtree_max(&sg, l, r) > (int64_t)o->budget_bytes) {
            hoff__segtree_add(&sg, l, r, -(int64_t)x->size);
            taken[ntaken++] = (uint32_t)tk[k].i;
        }
    }
    out->peak_bytes = (uint64_t)hoff__segtree_top(&sg);
    out->peak_ev = hoff__segtree_argmax(&sg);
    out->feasible = out->peak_bytes <= o->budget_bytes;

    /* Actions of the taken candidates, in the order they were taken (within
     * one event the most valuable eviction goes first). */
    for (k = 0; k < ntaken; k++) {
        const struct hoff__gap *x = &c[taken[k]];

        rc = hoff__schedule_add(out, x->a, HOFF__ACT_AFTER, HOFF__ACT_EVICT, x->block, x->copy_ev);
        if (rc)
            goto done;
        out->bytes_d2h += x->size;
        if (x->b < nev) {
            rc = hoff__schedule_add(out, x->b, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, x->block, UINT32_MAX);
            if (rc)
                goto done;
            out->bytes_h2d += x->size;
        }
    }
    hoff__schedule_sort(out);

done:
    if (sg.mx)
        hoff__segtree_destroy(&sg);
    free(taken);
    free(tk);
    free(c);
    return rc;
}

/* --- the planner ------------------------------------------------------------ */

static int greedy_build(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *out) {
    uint64_t t0 = hoff__plan_now_ns();
    int64_t *res = NULL;
    uint64_t *T = NULL;
    struct hoff__prediction pr;
    int rc;

    rc = hoff__plan_begin(hoff__planner_greedy.name, t, o, out, &res);
    if (rc || !res)
        goto done;
    rc = hoff__plan_greedy_select(t, o, res, NULL, out);
    if (!rc)
        rc = hoff__plan_tiers(t, o, out); /* the host cap, and the NVMe tier below it */
    if (!rc)                              /* what the replay will cost, for the report (plan.h) */
        rc = (T = hoff__plan_times(t)) ? hoff__plan_predict(t, o, T, out, HOFF__PLACE_KEEP, &pr) : -ENOMEM;

done:
    if (rc) {
        out->nact = 0;
        out->bytes_d2h = out->bytes_h2d = 0;
    }
    free(T);
    free(res);
    out->plan_ns = hoff__plan_now_ns() - t0;
    return rc;
}

const struct hoff__planner hoff__planner_greedy = {
    .name = "greedy",
    .help = "the HyperOffload RFC's greedy residency planner: longest access gaps first, "
            "while an event they cover is over budget",
    .build = greedy_build,
};
