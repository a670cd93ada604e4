/* timed.c — the timing-aware residency planner: for each eviction it chooses the gap and the prefetch issue
 * point from the event times and the copy engines' bandwidths, so that H2D copies land before their use.
 * Threading: a pure function of (trace, options); no shared state. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plan/plan.h"
#include "plan/segtree.h"

/*
 * The model.  Residency semantics, candidates (access gaps; the no-access
 * blocks' guarded lifetimes; retained blocks away to the step's end) and
 * releases are greedy.c's.  Event i happens at T[i] (t_gpu_ns where every
 * event has one, else t_cpu_ns; made non-decreasing).  D2H and H2D are two
 * FIFO engines; a copy of n bytes takes LAT + n / gbps.  An eviction AFTER a
 * is issued when event a+1 comes; the block holds device memory until its
 * D2H copy lands, i.e. up to the first event at or after the landing time
 * (e).  A prefetch BEFORE p holds device memory from p on, and is on time if
 * T[p] + its queueing + copy <= T[b], b the use.  So the budget is kept on
 * the away interval [e, p-1], not greedy's [a+1, b-1].
 *
 *  A. Hidden candidates: those whose isolated copies fit in the gap (an
 *     interval [e, p-1] with p the latest event leaving room for the H2D
 *     copy) are taken longest (in time) first while an event of their away
 *     interval is over budget (segment tree: range add, range max).
 *  B. The D2H FIFO: replayed in issue order over the taken ones; where the
 *     queue makes a copy land later than assumed, the block counts until it
 *     lands (the tree grows back there; one that would land after its
 *     prefetch is dropped).
 *  C. If events are still over budget: the other candidates over greedy's
 *     instant interval [a+1, b-1] (the runtime then waits for copies: stall),
 *     least estimated exposed stall first (max(0, d2h + h2d - gap time)),
 *     then longest gap.
 *     If the timed tree is still over budget after C, or either engine's
 *     planned copies take longer than the step's compute, the copies cannot
 *     keep up: the schedule is greedy's (prefetch at the use), which the
 *     benchmark shows is better there than early prefetches that take room
 *     the evictions have not freed yet.
 *  D. The H2D FIFO, backwards from the last use: each prefetch should start
 *     by min(T[use], next one's start) - copy; its issue event moves earlier
 *     (never before its eviction lands) as far as the budget allows over the
 *     events it now holds (a binary search on the tree: the range max grows
 *     with the range).
 *
 * The tree's values are >= the instant-transfer resident bytes at every
 * event (the intervals only shrink from [a+1, p-1]).  The reported peak and
 * feasibility are the schedule's instant-transfer ones (plan.h), from
 * hoff__schedule_peak: what the plan reaches, never more; where the timed
 * tree stays over budget the runtime waits for copies (stall).  O(M log S)
 * plus sorts.
 */

#define LAT_NS 10000u /* per-call latency of a copy (the sim's default 10 us) */

struct tcand {
    uint64_t size;
    uint64_t dx, hx;  /* D2H and H2D copy times, ns */
    uint64_t key;     /* sort key of its phase */
    uint32_t a, b;    /* evict AFTER a; use at b (b == nev: no prefetch) */
    uint32_t block, copy_ev;
    uint32_t l, r;    /* interval of the tree it is away on when taken */
    uint32_t land;    /* first event where its D2H copy has landed */
    uint32_t p;       /* prefetch BEFORE p (== b as greedy; nev: none) */
    uint8_t taken;    /* 0, 'A' hidden, 'C' instant */
};


static uint64_t xfer_ns(uint64_t bytes, double gbps) {
    return LAT_NS + (uint64_t)((double)bytes / gbps + 0.5);
}

/* Smallest i in [from, n) with T[i] >= t, n if none. */
static uint32_t first_at(const uint64_t *T, uint32_t from, uint32_t n, uint64_t t) {
    uint32_t lo = from, hi = n;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (T[mid] >= t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Largest i in [lo, hi] with T[i] <= t; lo - 1 (as int64) if none. */
static int64_t last_at(const uint64_t *T, uint32_t lo, uint32_t hi, int64_t t) {
    int64_t a = lo, b = (int64_t)hi + 1; /* answer in [a-1, b-1] */

    if (t < 0)
        return (int64_t)lo - 1;
    while (a < b) {
        int64_t mid = a + (b - a) / 2;

        if (T[mid] <= (uint64_t)t)
            a = mid + 1;
        else
            b = mid;
    }
    return a - 1;
}

static int by_key_desc(const void *pa, const void *pb) {
    const struct tcand *x = *(const struct tcand *const *)pa, *y = *(const struct tcand *const *)pb;

    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    return x->block < y->block ? -1 : x->block > y->block;
}

static int by_a(const void *pa, const void *pb) {
    const struct tcand *x = *(const struct tcand *const *)pa, *y = *(const struct tcand *const *)pb;

    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    return x->block < y->block ? -1 : x->block > y->block;
}

static int by_b_desc(const void *pa, const void *pb) {
    const struct tcand *x = *(const struct tcand *const *)pa, *y = *(const struct tcand *const *)pb;

    if (x->b != y->b)
        return x->b > y->b ? -1 : 1;
    return x->block < y->block ? -1 : x->block > y->block;
}

/* The gaps (hoff__plan_gaps), as timed's candidates. */
static int collect(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct tcand **out,
                   size_t *nout) {
    struct hoff__gap *g = NULL;
    struct tcand *c;
    size_t n = 0, k;
    int rc = hoff__plan_gaps(t, o, &g, &n);

    if (rc)
        return rc;
    c = calloc(n ? n : 1, sizeof *c);
    if (!c) {
        free(g);
        return -ENOMEM;
    }
    for (k = 0; k < n; k++)
        c[k] = (struct tcand){.size = g[k].size, .a = g[k].a, .b = g[k].b, .block = g[k].block,
                              .copy_ev = g[k].copy_ev};
    free(g);
    *out = c;
    *nout = n;
    return 0;
}

/* Event times, non-decreasing: t_gpu_ns if every event has one, else t_cpu_ns. */
static uint64_t *event_times(const struct hoff__trace *t) {
    uint64_t *T = malloc((t->nev ? t->nev : 1) * sizeof *T), last = 0;
    int gpu = 1;
    size_t i;

    if (!T)
        return NULL;
    for (i = 0; i < t->nev; i++)
        if (t->ev[i].t_gpu_ns == HOFF__TIME_UNKNOWN)
            gpu = 0;
    for (i = 0; i < t->nev; i++) {
        uint64_t v = gpu ? t->ev[i].t_gpu_ns : t->ev[i].t_cpu_ns;

        if (v == HOFF__TIME_UNKNOWN)
            v = last;
        last = v > last ? v : last;
        T[i] = last;
    }
    return T;
}

/* Phase B: replay the D2H FIFO over the taken candidates (by issue event);
 * adjust == 1: a hidden one whose copy lands after its assumed start holds
 * its bytes until then (tree and l updated; dropped if it lands after its
 * prefetch).  Sets land for each. */
static void d2h_pass(struct tcand **v, size_t n, const uint64_t *T, uint32_t nev, struct hoff__seg *sg,
                     int adjust) {
    uint64_t busy = 0;
    size_t k;

    for (k = 0; k < n; k++) {
        struct tcand *x = v[k];
        uint64_t start = T[x->a + 1] > busy ? T[x->a + 1] : busy, land = start + x->dx;
        uint32_t e = first_at(T, x->a + 1, nev, land);

        if (!x->taken)
            continue;
        if (adjust && x->taken == 'A' && e > x->l) {
            uint32_t hi = e <= x->r ? e - 1 : x->r;

            hoff__seg_add(sg, x->l, hi, (int64_t)x->size);
            if (e > x->r) { /* never away: drop it */
                x->taken = 0;
                continue;
            }
            x->l = e;
        }
        busy = land;
        x->land = e;
    }
}

static int timed_build(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *out) {
    uint64_t t0 = hoff__plan_now_ns();
    uint32_t nev = (uint32_t)t->nev;
    int64_t *res = NULL, budget = (int64_t)o->budget_bytes;
    double h2d = o->h2d_gbps > 0 ? o->h2d_gbps : 50.0, d2h = o->d2h_gbps > 0 ? o->d2h_gbps : 50.0;
    uint64_t *T = NULL, tend;
    struct tcand *c = NULL, **v = NULL;
    size_t nc = 0, nv, k;
    struct hoff__seg sg = {0};
    int rc, fallback = 0;

    rc = hoff__plan_begin(hoff__planner_timed.name, t, o, out, &res);
    if (rc || !res)
        goto done;

    T = event_times(t);
    rc = T ? collect(t, o, &c, &nc) : -ENOMEM;
    if (rc)
        goto done;
    out->candidates = nc;
    v = malloc((nc ? nc : 1) * sizeof *v);
    rc = v ? hoff__seg_init(&sg, res, nev) : -ENOMEM;
    if (rc)
        goto done;
    tend = T[nev - 1];

    /* A: the hidden candidates, longest away time first. */
    for (k = 0, nv = 0; k < nc; k++) {
        struct tcand *x = &c[k];
        uint64_t dl;
        int64_t p;

        x->dx = xfer_ns(x->size, d2h);
        x->hx = xfer_ns(x->size, h2d);
        x->p = x->b;
        x->land = first_at(T, x->a + 1, nev, T[x->a + 1] + x->dx);
        if (x->b < nev) {
            p = last_at(T, x->land + 1, x->b, (int64_t)T[x->b] - (int64_t)x->hx);
            if (p < (int64_t)x->land + 1)
                continue; /* cannot hide: phase C */
            x->l = x->land;
            x->r = (uint32_t)p - 1;
            dl = T[p];
        } else {
            if (x->land >= nev)
                continue;
            x->l = x->land;
            x->r = nev - 1;
            dl = tend + 1;
        }
        x->key = dl - T[x->l];
        v[nv++] = x;
    }
    if (nv)
        qsort(v, nv, sizeof *v, by_key_desc);
    for (k = 0; k < nv && hoff__seg_top(&sg) > budget; k++) {
        struct tcand *x = v[k];

        if (hoff__seg_max(&sg, x->l, x->r) > budget) {
            hoff__seg_add(&sg, x->l, x->r, -(int64_t)x->size);
            x->taken = 'A';
            x->p = x->b < nev ? x->r + 1 : nev;
        }
    }

    /* B: the D2H queue over what A took. */
    for (k = 0, nv = 0; k < nc; k++)
        if (c[k].taken)
            v[nv++] = &c[k];
    if (nv)
        qsort(v, nv, sizeof *v, by_a);
    d2h_pass(v, nv, T, nev, &sg, 1);

    /* C: still over budget: the instant intervals, least exposed stall first. */
    if (hoff__seg_top(&sg) > budget) {
        for (k = 0, nv = 0; k < nc; k++) {
            struct tcand *x = &c[k];
            uint64_t gap = (x->b < nev ? T[x->b] : tend) - T[x->a + 1];
            uint64_t need = x->dx + (x->b < nev ? x->hx : 0);
            uint64_t stall = need > gap ? need - gap : 0;

            if (x->taken)
                continue;
            /* key: lower stall first (descending sort on its complement),
             * then the longer gap in events */
            x->key = ((UINT64_MAX >> 24) - (stall < (UINT64_MAX >> 24) ? stall : (UINT64_MAX >> 24))) << 24 |
                     ((uint64_t)(x->b - x->a) & 0xffffffu);
            v[nv++] = x;
        }
        if (nv)
            qsort(v, nv, sizeof *v, by_key_desc);
        for (k = 0; k < nv && hoff__seg_top(&sg) > budget; k++) {
            struct tcand *x = v[k];

            x->l = x->a + 1;
            x->r = x->b - 1;
            if (hoff__seg_max(&sg, x->l, x->r) > budget) {
                hoff__seg_add(&sg, x->l, x->r, -(int64_t)x->size);
                x->taken = 'C';
                x->p = x->b;
            }
        }
        /* where every copy lands, with C's traffic in the queue */
        for (k = 0, nv = 0; k < nc; k++)
            if (c[k].taken)
                v[nv++] = &c[k];
        if (nv)
            qsort(v, nv, sizeof *v, by_a);
        d2h_pass(v, nv, T, nev, &sg, 0);
    }

    /* The copies cannot keep up with the budget (the timed tree stays over
     * it): moving prefetches earlier would only take room the evictions
     * have not freed yet, and the runtime would wait for them.  Greedy's
     * plan (prefetch at the use) is the better one there. */
    if (hoff__seg_top(&sg) > budget) {
        fallback = 1;
        goto done;
    }
    /* The same when either engine's traffic alone outlasts the step's
     * compute: nothing can be hidden, and early prefetches only contend
     * with the evictions for the room. */
    {
        double xd = 0, xh = 0;

        for (k = 0; k < nc; k++)
            if (c[k].taken) {
                xd += (double)c[k].dx;
                xh += c[k].b < nev ? (double)c[k].hx : 0;
            }
        if (xd > (double)tend || xh > (double)tend) {
            fallback = 1;
            goto done;
        }
    }

    /* D: the H2D queue, backwards from the last use: move prefetches earlier. */
    for (k = 0, nv = 0; k < nc; k++)
        if (c[k].taken && c[k].b < nev)
            v[nv++] = &c[k];
    if (nv)
        qsort(v, nv, sizeof *v, by_b_desc);
    {
        int64_t next_start = INT64_MAX;

        for (k = 0; k < nv; k++) {
            struct tcand *x = v[k];
            int64_t deadline = (int64_t)T[x->b] < next_start ? (int64_t)T[x->b] : next_start;
            int64_t want = deadline - (int64_t)x->hx, pw;
            uint32_t lo = (x->land > x->l ? x->land : x->l) + 1, pcur = x->p;

            if (lo < pcur) {
                pw = last_at(T, lo, pcur, want);
                if (pw < (int64_t)lo)
                    pw = lo;
                if ((uint32_t)pw < pcur) {
                    /* smallest p' in [pw, pcur] with max over [p', pcur-1] + size <= budget */
                    uint32_t a = (uint32_t)pw, b = pcur;

                    while (a < b) {
                        uint32_t mid = a + (b - a) / 2;

                        if (hoff__seg_max(&sg, mid, pcur - 1) + (int64_t)x->size <= budget)
                            b = mid;
                        else
                            a = mid + 1;
                    }
                    if (a < pcur) {
                        hoff__seg_add(&sg, a, pcur - 1, (int64_t)x->size);
                        x->p = a;
                        x->r = a - 1;
                    }
                }
            }
            next_start = (int64_t)T[x->p] > want ? (int64_t)T[x->p] : (want > 0 ? want : 0);
        }
    }

    /* Actions, by eviction event (sorting keeps the order within an event). */
    for (k = 0, nv = 0; k < nc; k++)
        if (c[k].taken)
            v[nv++] = &c[k];
    if (nv)
        qsort(v, nv, sizeof *v, by_a);
    for (k = 0; k < nv; k++) {
        const struct tcand *x = v[k];

        rc = hoff__schedule_add(out, x->a, HOFF__ACT_AFTER, HOFF__ACT_EVICT, x->block, x->copy_ev);
        if (rc)
            goto done;
        out->bytes_d2h += x->size;
        if (x->b < nev) {
            rc = hoff__schedule_add(out, x->p, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, x->block, UINT32_MAX);
            if (rc)
                goto done;
            out->bytes_h2d += x->size;
        }
    }
    hoff__schedule_sort(out);
    /* What the plan reaches, in the schedule's instant-transfer terms (the
     * timed tree above is at least that at every event). */
    rc = hoff__schedule_peak(t, out, &out->peak_bytes, &out->peak_ev);
    if (rc)
        goto done;
    out->feasible = out->peak_bytes <= o->budget_bytes;
    rc = hoff__plan_tiers(t, o, out);

done:
    if (rc) {
        out->nact = 0;
        out->bytes_d2h = out->bytes_h2d = 0;
    }
    if (sg.mx)
        hoff__seg_destroy(&sg);
    free(v);
    free(c);
    free(T);
    free(res);
    if (fallback) {
        rc = hoff__planner_greedy.build(t, o, out);
        memset(out->planner, 0, sizeof out->planner);
        strncpy(out->planner, hoff__planner_timed.name, sizeof out->planner - 1);
    }
    out->plan_ns = hoff__plan_now_ns() - t0;
    return rc;
}

const struct hoff__planner hoff__planner_timed = {
    .name = "timed",
    .help = "timing-aware: prefetches issued early enough (event times, copy bandwidths) within the budget, "
            "evictions that hide their copies first",
    .build = timed_build,
};
