/* advise.c — recompute advice: under a budget, the step of offload only, of full activation checkpointing (per
 * layer-like region of op names, with offload of what is still over the budget) and of the best choice of forward
 * ops to recompute combined with offload, each a rewritten trace (recompute.c) planned and predicted as the runtime
 * would replay it; and a lower bound on the step of any plan of the model.
 *
 * The search: the recomputable forward ops, cheapest time per byte saved first (an op none of whose inputs is
 * recomputed before it, and that no op before it reads), and every prefix of that order planned (a sampled set of
 * prefixes past 64); combined is the best of those, offload only and full checkpointing, so it is never worse than
 * either.  A prefix whose step has no stall ends the search: a longer one only adds recompute time.
 *
 * The bound: at the offload peak of the step without offload, the bytes over the budget must be away.  A byte away
 * is either recomputed (it is freed after its last forward use and made again later, at the time its op takes) or
 * offloaded (its copy to the host must land before the peak, on a D2H link that starts with the step).  So the step
 * is at least compute + min over r of [ R(r) + max(0, (over - r) / D2H - the compute before the peak) ], R(r) the
 * least recompute time that frees r bytes there (a fractional knapsack over the recomputable ops' bytes at the
 * peak and the checkpoint regions' bytes there: a relaxation, which drops the inputs rule, lets an op or a region be
 * part recomputed and lets the two overlap, so it holds for every alternative above).  Threading: pure functions. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plan/recompute.h"

#define NONE UINT32_MAX

/* Unit un's recompute as a group of the rewrite. */
static struct hoff__rc_group unit_group(const struct hoff__rc_model *m, const struct hoff__rc_unit *un) {
    struct hoff__rc_group g = {
        un->regen_ev, un->cost_ns, m->blk + un->first_blk, un->nblk, un->ntmp ? m->tmp + un->first_tmp : NULL,
        un->ntmp};

    return g;
}

/* Plan and predict t rewritten with the groups under po; the figures into alt. */
static int evaluate(const struct hoff__trace *t, const struct hoff__rc_model *m, const struct hoff__rc_group *g,
                    size_t ng, const struct hoff__plan_opts *po, const struct hoff__planner *pl,
                    struct hoff__rc_alt *alt) {
    struct hoff__trace r;
    const struct hoff__trace *x = t;
    struct hoff__schedule s;
    struct hoff__prediction pr;
    uint64_t *T = NULL;
    size_t q;
    int rc = 0;

    memset(alt, 0, sizeof *alt);
    hoff__trace_init(&r);
    hoff__schedule_init(&s);
    if (ng) {
        if ((rc = hoff__rc_rewrite(t, m, g, ng, &r)) != 0)
            goto out;
        x = &r;
    }
    for (q = 0; q < ng; q++)
        alt->recompute_ns += g[q].cost_ns;
    if (!(T = hoff__plan_times(x))) {
        rc = hoff__error(-ENOMEM, "recompute: out of memory");
        goto out;
    }
    alt->peak_bytes = hoff__trace_offload_peak(x, po->block_bytes, NULL);
    if ((rc = hoff__plan_build(pl, x, po, &s)) != 0)
        goto out;
    if (!s.grouped && po->groups && (rc = hoff__plan_groups(x, po, &s)) != 0)
        goto out;
    if ((rc = hoff__plan_predict(x, po, T, &s, HOFF__PLACE_KEEP, &pr)) != 0)
        goto out;
    alt->have = 1;
    alt->feasible = s.feasible && pr.overruns == 0;
    alt->stall_ns = pr.stall_ns;
    alt->step_ns = hoff__plan_compute_ns(x, T) + pr.stall_ns;
    alt->floor_bytes = s.floor_bytes;
    alt->bytes_d2h = pr.bytes_d2h;
    alt->units = (uint32_t)ng;
out:
    free(T);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&r);
    return rc;
}

/* a better than b: feasible first, then the shorter step, then less recompute. */
static int better(const struct hoff__rc_alt *a, const struct hoff__rc_alt *b) {
    if (!b->have)
        return a->have;
    if (!a->have || a->feasible != b->feasible)
        return a->have && a->feasible > b->feasible;
    if (a->step_ns != b->step_ns)
        return a->step_ns < b->step_ns;
    return a->recompute_ns < b->recompute_ns;
}

/* Full checkpointing: per region (consecutive forward ops sharing a region key), its saved activations that no
 * later forward op reads (the region's output is its checkpoint), made again at its first backward use at the
 * region's whole forward time; a region whose inputs are gone by then is left as it is.  Groups into *g, their
 * blocks into *blk (both malloc'd).  *ng 0: no regions (fewer than two). */
static int full_groups(const struct hoff__trace *t, const struct hoff__rc_model *m, struct hoff__rc_group **g,
                       size_t *ng, uint32_t **blk) {
    uint32_t j = 0, j2, k, nb = 0;
    size_t n = 0, u;

    *g = malloc((m->niv + 1) * sizeof **g);
    *blk = malloc((m->nblk + 1) * sizeof **blk);
    *ng = 0;
    if (!*g || !*blk)
        return hoff__error(-ENOMEM, "recompute: out of memory");
    while (j < m->niv) {
        uint32_t begin, end, regen = NONE, first = nb, ok = 1;
        uint64_t cost = 0;

        for (j2 = j; j2 < m->niv && m->iv_key[j][0] && strcmp(m->iv_key[j2], m->iv_key[j]) == 0; j2++)
            cost += m->iv_ns[j2];
        if (j2 == j) {
            j++;
            continue;
        }
        begin = m->iv_begin[j];
        end = j2 < m->niv ? m->iv_begin[j2] : m->bwd_ev;
        for (u = 0; u < m->nu; u++) {
            const struct hoff__rc_unit *un = &m->u[u];

            if (un->interval < j || un->interval >= j2)
                continue;
            for (k = 0; k < un->nblk; k++) {
                uint32_t b = m->blk[un->first_blk + k], a, at;
                const struct hoff__tblock *tb = &t->blocks[b];

                for (a = 0; a < tb->naccess; a++) { /* read by a later forward op: the checkpoint */
                    uint32_t e = t->acc[tb->first_access + a].ev;

                    if (e >= end && e < m->bwd_ev)
                        break;
                }
                if (a < tb->naccess)
                    continue;
                (*blk)[nb++] = b;
                at = m->span_start[m->bwd_first[b]];
                if (at < regen)
                    regen = at;
            }
        }
        /* The region's inputs must still be there when it is recomputed. */
        for (k = begin; k < end && nb > first; k++) {
            const struct hoff__tev *e = &t->ev[k];

            if ((e->kind == HOFF__TEV_ACCESS || e->kind == HOFF__TEV_FREE) && t->blocks[e->block].alloc_ev < begin &&
                !t->blocks[e->block].retained && t->blocks[e->block].free_ev < regen)
                ok = 0;
        }
        if (nb > first && ok) {
            (*g)[n].regen_ev = regen;
            (*g)[n].cost_ns = cost;
            (*g)[n].blk = *blk + first;
            (*g)[n].nblk = nb - first;
            (*g)[n].tmp = NULL; /* a region's own temporaries come and go inside its recompute */
            (*g)[n].ntmp = 0;
            n++;
        } else {
            nb = first;
        }
        j = j2;
    }
    *ng = n >= 2 ? n : 0;
    return 0;
}

/* The prefix after k of n planned: every one up to 64, then one in every k/8, and n. */
static size_t next_prefix(size_t k, size_t n) {
    size_t next = k < 64 ? k + 1 : k + k / 8;

    return next > n && k < n ? n : next;
}

struct byratio {
    uint32_t u;
    double r;
    uint64_t bytes;
};

static int by_ratio(const void *a, const void *b) {
    const struct byratio *x = a, *y = b;

    if (x->r != y->r)
        return x->r < y->r ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->u < y->u ? -1 : x->u > y->u;
}

/* The bytes of blocks blk[0..n) away at event p when recomputed: freed after their last forward use by p, and
 * allocated there otherwise. */
static uint64_t away_at(const struct hoff__trace *t, const struct hoff__rc_model *m, const struct hoff__plan_opts *po,
                        const uint32_t *blk, uint32_t n, size_t p) {
    uint64_t b = 0;
    uint32_t k;

    for (k = 0; k < n; k++)
        if (m->fwd_close[blk[k]] <= p && t->blocks[blk[k]].free_ev > p)
            b += hoff__plan_bytes(po->block_bytes, &t->blocks[blk[k]]);
    return b;
}

/* The stall of copying bytes out on a D2H link of d2h GB/s before a peak that comes after to_peak ns of compute. */
static double link_stall(double bytes, double d2h, double to_peak) {
    double s = bytes / d2h - to_peak;

    return s > 0 ? s : 0;
}

/* The bound (the file's comment), on the original trace, whose offload peak is peak bytes at event p. */
static uint64_t bound(const struct hoff__trace *t, const struct hoff__rc_model *m, const struct hoff__plan_opts *po,
                      uint64_t peak, size_t p, const struct hoff__rc_group *fg, size_t nfg) {
    struct byratio *v;
    uint64_t *T, to_peak, best, over, r = 0, cost = 0, budget = po->budget_bytes;
    size_t u, n = 0;
    double d2h = po->d2h_gbps > 0 ? po->d2h_gbps : 1e-9;

    if (peak <= budget || !budget)
        return m->compute_ns;
    over = peak - budget;
    if (!(T = hoff__plan_times(t)))
        return m->compute_ns; /* out of memory: the trivial bound */
    to_peak = T[p] - T[0];
    free(T);
    /* The items: each recomputable op, and each region full checkpointing recomputes (they overlap: a relaxation
     * that lets the knapsack take either, so the bound is under both kinds of plan). */
    v = malloc((m->nu + nfg + 1) * sizeof *v);
    if (!v)
        return m->compute_ns;
    for (u = 0; u < m->nu + nfg; u++) {
        const struct hoff__rc_unit *un = u < m->nu ? &m->u[u] : NULL;
        uint64_t b, c = un ? un->cost_ns : fg[u - m->nu].cost_ns;
        uint32_t regen = un ? un->regen_ev : fg[u - m->nu].regen_ev;

        if (un && !un->ok)
            continue;

        if (regen <= p) { /* made again before the peak: nothing away there, but its time may come before it */
            to_peak += c;
            continue;
        }
        b = un ? away_at(t, m, po, m->blk + un->first_blk, un->nblk, p)
               : away_at(t, m, po, fg[u - m->nu].blk, fg[u - m->nu].nblk, p);
        if (b)
            v[n++] = (struct byratio){(uint32_t)u, (double)c / (double)b, b};
    }
    qsort(v, n, sizeof *v, by_ratio);
    /* f(r) = R(r) + max(0, (over - r) / d2h - to_peak): convex, piecewise linear; its minimum is at a breakpoint of
     * R or where the offload term reaches 0. */
    {
        double r_zero = (double)over - (double)to_peak * d2h; /* past it the copies hide behind compute */
        double bestd = link_stall((double)over, d2h, (double)to_peak);

        for (u = 0; u < n && r < over; u++) {
            uint64_t take = v[u].bytes < over - r ? v[u].bytes : over - r;
            double c0 = (double)cost, f;

            if (r_zero > (double)r && r_zero < (double)(r + take)) { /* the kink inside this piece */
                f = c0 + v[u].r * (r_zero - (double)r);
                if (f < bestd)
                    bestd = f;
            }
            r += take;
            cost += (uint64_t)((double)take * v[u].r + 0.5);
            f = (double)cost + link_stall((double)(over - r), d2h, (double)to_peak);
            if (f < bestd)
                bestd = f;
        }
        best = (uint64_t)bestd;
    }
    free(v);
    return m->compute_ns + best;
}

static int by_u32(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;

    return *x < *y ? -1 : *x > *y;
}

void hoff__rc_advice_destroy(struct hoff__rc_advice *a) {
    if (!a)
        return;
    free(a->units);
    memset(a, 0, sizeof *a);
}

/* The recomputable ops into order[0..*n), cheapest time per byte first, leaving out an op that reads what an op
 * before it recomputes or that an op before it reads (recomputes never chain).  0 or -ENOMEM. */
static int greedy_order(const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t *order, size_t *n) {
    struct byratio *v = malloc((m->nu + 1) * sizeof *v);
    uint8_t *gone = calloc((size_t)t->nblocks + 1, 1); /* recomputed by an op in the order */
    uint8_t *read = calloc((size_t)t->nblocks + 1, 1); /* read by an op in the order */
    size_t nv = 0, k, u;

    *n = 0;
    if (!v || !gone || !read) {
        free(v);
        free(gone);
        free(read);
        return -ENOMEM;
    }
    for (u = 0; u < m->nu; u++)
        if (m->u[u].ok && m->u[u].bytes)
            v[nv++] = (struct byratio){(uint32_t)u, (double)m->u[u].cost_ns / (double)m->u[u].bytes, m->u[u].bytes};
    qsort(v, nv, sizeof *v, by_ratio);
    for (k = 0; k < nv; k++) {
        const struct hoff__rc_unit *un = &m->u[v[k].u];
        uint32_t i, clash = 0;

        for (i = 0; i < un->nin; i++)
            clash |= gone[m->in[un->first_in + i]];
        for (i = 0; i < un->nblk; i++)
            clash |= read[m->blk[un->first_blk + i]];
        if (clash)
            continue;
        for (i = 0; i < un->nin; i++)
            read[m->in[un->first_in + i]] = 1;
        for (i = 0; i < un->nblk; i++)
            gone[m->blk[un->first_blk + i]] = 1;
        order[(*n)++] = v[k].u;
    }
    free(v);
    free(gone);
    free(read);
    return 0;
}

int hoff__rc_advise(const struct hoff__trace *t, const struct hoff__rc_model *m, const struct hoff__plan_opts *po,
                    const struct hoff__planner *pl, struct hoff__rc_advice *a) {
    struct hoff__rc_group *fg = NULL, *g = NULL;
    uint32_t *fblk = NULL, *order = NULL;
    size_t nfg = 0, n = 0, u, k, best_k = 0, peak_ev = 0;
    struct hoff__rc_alt best, alt;
    int rc;

    memset(a, 0, sizeof *a);
    if (!pl && !(pl = hoff__planner_find("timed")))
        return hoff__error(-EINVAL, "recompute: no timed planner");
    a->budget_bytes = po->budget_bytes;
    a->peak_bytes = hoff__trace_offload_peak(t, po->block_bytes, &peak_ev);
    a->compute_ns = m->compute_ns;
    if ((rc = full_groups(t, m, &fg, &nfg, &fblk)) != 0)
        goto out;
    a->bound_ns = bound(t, m, po, a->peak_bytes, peak_ev, fg, nfg);
    if ((rc = evaluate(t, m, NULL, 0, po, pl, &a->offload_only)) != 0)
        goto out;
    if (nfg && (rc = evaluate(t, m, fg, nfg, po, pl, &a->full)) != 0)
        goto out;
    order = malloc((m->nu + 1) * sizeof *order);
    g = malloc((m->nu + 1) * sizeof *g);
    if (!order || !g || greedy_order(t, m, order, &n)) {
        rc = hoff__error(-ENOMEM, "recompute: out of memory");
        goto out;
    }
    best = a->offload_only;
    for (k = 1; k <= n; k = next_prefix(k, n)) {
        for (u = 0; u < k; u++)
            g[u] = unit_group(m, &m->u[order[u]]);
        if ((rc = evaluate(t, m, g, k, po, pl, &alt)) != 0)
            goto out;
        a->evaluated++;
        if (better(&alt, &best)) {
            best = alt;
            best_k = k;
        }
        if (alt.feasible && alt.stall_ns == 0)
            break; /* longer prefixes only add recompute time */
    }
    a->chosen = "combined";
    if (a->full.have && better(&a->full, &best)) {
        best = a->full;
        best_k = 0;
        a->chosen = "full_checkpoint";
    } else if (best_k == 0) {
        a->chosen = "offload_only";
    }
    a->combined = best;
    a->combined.units = (uint32_t)best_k;
    if (best_k) {
        if (!(a->units = malloc(best_k * sizeof *a->units))) {
            rc = hoff__error(-ENOMEM, "recompute: out of memory");
            goto out;
        }
        memcpy(a->units, order, best_k * sizeof *a->units);
        qsort(a->units, best_k, sizeof *a->units, by_u32); /* forward order */
        a->nunits = best_k;
    }
    a->full.units = (uint32_t)nfg;
out:
    free(fg);
    free(fblk);
    free(order);
    free(g);
    if (rc)
        hoff__rc_advice_destroy(a);
    return rc;
}

int hoff__rc_advice_rewrite(const struct hoff__trace *t, const struct hoff__rc_model *m,
                            const struct hoff__rc_advice *a, struct hoff__trace *out) {
    struct hoff__rc_group *g = NULL;
    uint32_t *blk = NULL;
    size_t ng = 0, u;
    int rc;

    if (a->chosen && strcmp(a->chosen, "full_checkpoint") == 0) {
        rc = full_groups(t, m, &g, &ng, &blk);
    } else {
        rc = (g = malloc((a->nunits + 1) * sizeof *g)) ? 0 : hoff__error(-ENOMEM, "recompute: out of memory");
        for (u = 0; !rc && u < a->nunits; u++)
            g[u] = unit_group(m, &m->u[a->units[u]]);
        ng = a->nunits;
    }
    if (!rc)
        rc = ng ? hoff__rc_rewrite(t, m, g, ng, out) : hoff__trace_copy(out, t);
    else
        hoff__trace_init(out);
    free(g);
    free(blk);
    return rc;
}
