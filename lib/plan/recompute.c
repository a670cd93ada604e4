/* recompute.c — the recompute model of a trace: its forward ops (the spans between op marks before the backward),
 * the saved activations each allocates, what each reads and its time; and the rewrite of a trace into the step
 * where chosen saved activations are freed after their last forward use and made again, by an inserted op that
 * takes the recomputed ops' time, at the first backward op that uses them.
 *
 * Which op allocated a block: the span of events between the op marks around its allocation.  Its time is the
 * span's (the time from the mark before to the mark after), whichever way a producer names its marks: hoff's
 * recorders end an op with its mark (doc/trace-format.md), hoff-plan synth's transformer starts one with it (so
 * the op's name is the mark after the span, or for a "synth" trace the mark before).
 *
 * The rewrite is the model of a lazy recompute: what checkpointing one module does (torch.utils.checkpoint of a
 * LayerNorm or an activation: its saved tensors are made again when backward first unpacks one) and what
 * Megatron-Core's fine-grained recompute does.  A recompute needs what the op reads: a block still allocated where
 * it is made again, or a forward temporary that the recompute makes again by running its producer too (a chain of
 * at most HOFF__RC_CHAIN_MAX ops, as checkpointing a module of several ops runs them all); saved activations are
 * never recomputed through each other.  The trace must mark those reads (the Python package's op marks do;
 * hoff-plan synth does with --input-reads).
 * Threading: pure functions of their arguments. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "plan/recompute.h"

#define NONE UINT32_MAX

static int is_mark(const struct hoff__trace *t, size_t i) {
    return t->ev[i].kind == HOFF__TEV_OP;
}

/* The first event of the backward: the span of the first op of phase backward, else the span of the offload peak
 * (a trace without phases: the peak is where the forward ends).  *phases: the marks say phases. */
static uint32_t backward_start(const struct hoff__trace *t, hoff__block_bytes_fn bytes, int *phases) {
    uint32_t prev = NONE, i;
    size_t peak = 0;

    *phases = 0;
    for (i = 0; i < t->nev; i++) {
        if (!is_mark(t, i))
            continue;
        *phases |= hoff__tev_phase(&t->ev[i]) != 0;
        if (hoff__tev_phase(&t->ev[i]) == HOFF_PHASE_BACKWARD)
            return prev == NONE ? 0 : prev + 1;
        prev = i;
    }
    hoff__trace_offload_peak(t, bytes, &peak);
    prev = NONE;
    for (i = 0; i < peak && i < t->nev; i++)
        if (is_mark(t, i))
            prev = i;
    return prev == NONE ? 0 : prev + 1;
}

void hoff__rc_model_destroy(struct hoff__rc_model *m) {
    uint32_t i;

    if (!m)
        return;
    if (m->iv_key)
        for (i = 0; i < m->niv; i++)
            free(m->iv_key[i]);
    free(m->iv_key);
    free(m->u);
    free(m->blk);
    free(m->in);
    free(m->ops);
    free(m->tmp);
    free(m->fwd_close);
    free(m->bwd_first);
    free(m->iv_ns);
    free(m->iv_begin);
    free(m->iv_mark);
    free(m->span_start);
    memset(m, 0, sizeof *m);
}

/* The mark that names forward op j (its events iv_begin[j] .. end - 1). */
static uint32_t name_mark(const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t j, uint32_t end) {
    if (strcmp(t->backend, "synth") == 0) /* synth starts an op with its mark */
        return m->iv_begin[j] > 0 ? m->iv_begin[j] - 1 : NONE;
    return end < t->nev ? end : NONE;
}

const char *hoff__rc_op_name(const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t j) {
    return m->iv_mark[j] == NONE ? "" : hoff__tev_op_name(t, &t->ev[m->iv_mark[j]]);
}

uint32_t hoff__rc_op_occurrence(const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t j) {
    uint32_t k, n = 0, mk = m->iv_mark[j];

    for (k = 0; k < j; k++)
        if ((m->iv_mark[k] == NONE) == (mk == NONE) && (mk == NONE || t->ev[m->iv_mark[k]].name == t->ev[mk].name))
            n++;
    return n;
}

/* Layer-like region key of an op name: the part before the first '.', when it has a digit ("L3" of "L3.mlp_up",
 * "layers3"); else "" (no region: aten.mm.default's "aten" names no layer). */
static char *region_key(const char *name) {
    const char *dot = strchr(name, '.');
    size_t n = dot ? (size_t)(dot - name) : 0, i;
    char *k;

    for (i = 0; i < n && !(name[i] >= '0' && name[i] <= '9'); i++)
        ;
    if (i == n)
        n = 0;
    if (!(k = malloc(n + 1)))
        return NULL;
    memcpy(k, name, n);
    k[n] = '\0';
    return k;
}

/* Per block: where its last forward use window closes and its first backward access; a candidate is movable, an
 * activation (not kept), freed in the step, allocated in the forward and used on both sides of bwd_ev. */
static void block_uses(const struct hoff__trace *t, struct hoff__rc_model *m) {
    uint32_t b, k;

    for (b = 0; b < t->nblocks; b++) {
        const struct hoff__tblock *tb = &t->blocks[b];
        uint32_t close = NONE, first = NONE;

        m->fwd_close[b] = m->bwd_first[b] = NONE;
        if (!hoff__plan_movable(tb) || tb->kept || tb->retained || tb->alloc_ev >= m->bwd_ev)
            continue;
        for (k = 0; k < tb->naccess; k++) {
            const struct hoff__tacc *a = &t->acc[tb->first_access + k];

            if (a->ev < m->bwd_ev)
                close = a->close;
            else if (first == NONE)
                first = a->ev;
        }
        if (close == NONE || first == NONE || close > m->bwd_ev)
            continue;
        m->fwd_close[b] = close;
        m->bwd_first[b] = first;
    }
}

/* Grow-append v to a uint32 array. */
static int push32(uint32_t **a, size_t *n, size_t *cap, uint32_t v) {
    if (*n == *cap && HOFF__GROW(*a, *cap, *n + 1))
        return -ENOMEM;
    (*a)[(*n)++] = v;
    return 0;
}

/* The capacities of the model's arrays while it is built. */
struct caps {
    size_t u, blk, in, ops, tmp;
};

/* The events of forward op j: iv_begin[j] .. *end - 1 (*end its mark). */
static uint32_t op_end(const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t j) {
    uint32_t e;

    for (e = m->iv_begin[j]; e < t->nev && !is_mark(t, e); e++)
        ;
    return e;
}

/* The forward op that holds event e (< bwd_ev, not a mark): the last op that begins at or before it. */
static uint32_t op_of(const struct hoff__rc_model *m, uint32_t e) {
    uint32_t lo = 0, hi = m->niv;

    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (m->iv_begin[mid] <= e)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Add to the list in[from ..] (*n entries after from) the blocks forward op j reads or frees that were allocated
 * before it.  0 or -ENOMEM. */
static int add_reads(const struct hoff__trace *t, struct hoff__rc_model *m, struct caps *c, uint32_t j, uint32_t from,
                     uint32_t *n) {
    uint32_t e, k, end = op_end(t, m, j);

    for (e = m->iv_begin[j]; e < end; e++) {
        const struct hoff__tev *ev = &t->ev[e];

        if ((ev->kind != HOFF__TEV_ACCESS && ev->kind != HOFF__TEV_FREE) ||
            t->blocks[ev->block].alloc_ev >= m->iv_begin[j])
            continue;
        for (k = from; k < m->nin && m->in[k] != ev->block; k++)
            ;
        if (k == m->nin) {
            if (push32(&m->in, &m->nin, &c->in, ev->block))
                return -ENOMEM;
            (*n)++;
        }
    }
    return 0;
}

/* The recompute of unit u: every block its ops read must be allocated at regen_ev; a forward temporary that is not
 * (freed in the forward) is made again by running its producer too, whose reads then count, up to
 * HOFF__RC_CHAIN_MAX ops.  Sets u's ops, temporaries, cost and ok.  0 or -ENOMEM. */
static int chain(const struct hoff__trace *t, struct hoff__rc_model *m, struct caps *c, struct hoff__rc_unit *u) {
    uint32_t k, i;

    u->ok = 1;
    for (k = 0; k < u->nin && u->ok; k++) { /* u->nin grows as producers join */
        uint32_t x = m->in[u->first_in + k], p;
        const struct hoff__tblock *in = &t->blocks[x];

        if (in->retained || in->free_ev >= u->regen_ev)
            continue; /* still there */
        if (in->free_ev >= m->bwd_ev || in->alloc_ev >= m->bwd_ev || u->nop >= HOFF__RC_CHAIN_MAX) {
            u->ok = 0; /* used and freed in the backward before the recompute, or too long a chain */
            break;
        }
        p = op_of(m, in->alloc_ev);
        for (i = 0; i < u->nop && m->ops[u->first_op + i] != p; i++)
            ;
        if (i == u->nop) {
            if (push32(&m->ops, &m->nops, &c->ops, p) || add_reads(t, m, c, p, u->first_in, &u->nin))
                return -ENOMEM;
            u->nop++;
            u->cost_ns += m->iv_ns[p];
        }
        if (push32(&m->tmp, &m->ntmp, &c->tmp, x))
            return -ENOMEM;
        u->ntmp++;
    }
    return 0;
}

/* Forward op j as a unit, when it allocates a candidate: its blocks, inputs, the ops its recompute runs and its
 * cost, where it is made again, whether it can be, its occurrence.  0 or -ENOMEM. */
static int add_unit(const struct hoff__trace *t, struct hoff__rc_model *m, struct caps *c, hoff__block_bytes_fn bytes,
                    uint32_t j) {
    struct hoff__rc_unit u;
    uint32_t e;

    memset(&u, 0, sizeof u);
    u.interval = j;
    u.begin = m->iv_begin[j];
    u.end = op_end(t, m, j);
    u.mark = m->iv_mark[j];
    u.cost_ns = m->iv_ns[j];
    u.regen_ev = NONE;
    u.first_blk = (uint32_t)m->nblk;
    u.first_in = (uint32_t)m->nin;
    u.first_op = (uint32_t)m->nops;
    u.first_tmp = (uint32_t)m->ntmp;
    for (e = u.begin; e < u.end; e++) {
        const struct hoff__tev *ev = &t->ev[e];

        if (ev->kind == HOFF__TEV_ALLOC && m->fwd_close[ev->block] != NONE) {
            uint32_t at = m->span_start[m->bwd_first[ev->block]];

            if (push32(&m->blk, &m->nblk, &c->blk, ev->block))
                return -ENOMEM;
            u.nblk++;
            u.bytes += hoff__plan_bytes(bytes, &t->blocks[ev->block]);
            if (at < u.regen_ev)
                u.regen_ev = at;
        }
    }
    if (!u.nblk)
        return 0;
    if (push32(&m->ops, &m->nops, &c->ops, j) || add_reads(t, m, c, j, u.first_in, &u.nin))
        return -ENOMEM;
    u.nop = 1;
    if (chain(t, m, c, &u))
        return -ENOMEM;
    u.occurrence = hoff__rc_op_occurrence(t, m, j);
    if (m->nu == c->u && HOFF__GROW(m->u, c->u, m->nu + 1))
        return -ENOMEM;
    m->u[m->nu++] = u;
    return 0;
}

int hoff__rc_model_build(const struct hoff__trace *t, const uint64_t *T, hoff__block_bytes_fn bytes,
                         struct hoff__rc_model *m) {
    uint32_t *iv_mark, i, j, nm = 0, prev;
    struct caps caps = {0, 0, 0, 0, 0};
    int rc = -ENOMEM;

    memset(m, 0, sizeof *m);
    for (i = 0; i < t->nev; i++)
        nm += is_mark(t, i);
    if (nm == 0)
        return hoff__error(-EINVAL, "recompute: the trace has no op marks, so no op to recompute (record it with "
                                    "op marks: the Python package's, or hoff_op_mark)");
    m->bwd_ev = backward_start(t, bytes, &m->phases);
    m->compute_ns = hoff__plan_compute_ns(t, T);
    m->span_start = malloc((t->nev + 1) * sizeof *m->span_start);
    iv_mark = m->iv_mark = malloc((nm + 1) * sizeof *iv_mark); /* the mark that names each forward op */
    m->fwd_close = malloc(((size_t)t->nblocks + 1) * sizeof *m->fwd_close);
    m->bwd_first = malloc(((size_t)t->nblocks + 1) * sizeof *m->bwd_first);
    m->iv_ns = malloc((nm + 1) * sizeof *m->iv_ns);
    m->iv_begin = malloc((nm + 1) * sizeof *m->iv_begin);
    m->iv_key = calloc(nm + 1, sizeof *m->iv_key);
    if (!iv_mark || !m->span_start || !m->fwd_close || !m->bwd_first || !m->iv_ns || !m->iv_begin || !m->iv_key)
        goto out;
    /* Forward ops: the spans that end with a mark before bwd_ev. */
    prev = 0;
    for (i = 0; i < t->nev; i++) {
        m->span_start[i] = prev;
        if (is_mark(t, i)) {
            if (i < m->bwd_ev) {
                j = m->niv++;
                m->iv_begin[j] = prev;
                m->iv_ns[j] = T[i] - T[prev > 0 ? prev - 1 : 0];
                iv_mark[j] = name_mark(t, m, j, i);
                if (!(m->iv_key[j] = region_key(iv_mark[j] == NONE ? "" : hoff__tev_op_name(t, &t->ev[iv_mark[j]]))))
                    goto out;
            }
            prev = i + 1;
        }
    }
    block_uses(t, m);
    /* Units: the forward ops that allocate candidates, with what they read. */
    for (j = 0; j < m->niv; j++)
        if (add_unit(t, m, &caps, bytes, j))
            goto out;
    rc = 0;
out:
    if (rc) {
        hoff__rc_model_destroy(m);
        return hoff__error(rc, "recompute: out of memory");
    }
    return 0;
}

/* --- the rewrite ------------------------------------------------------------ */

struct rw {
    struct hoff__trace *o;
    const struct hoff__rc_group *g;
    uint64_t shift;                            /* time inserted so far */
    uint32_t *first_id, *second_id, *regen_of; /* per block of t: its ids in o, where it is made again */
    uint64_t *frees, *regens;                  /* (event << 32 | block), (event << 32 | group), by event */
    uint32_t *tmp_id;                          /* the temporaries made again at one event, their ids in o */
    size_t nfree, nregen, fi, ri;
    uint32_t name; /* "hoff.recompute" */
    int rc;
};

static void rw_put(struct rw *w, struct hoff__tev e, uint64_t tcpu, uint64_t tgpu) {
    int rc;

    if (w->rc)
        return;
    e.t_cpu_ns = tcpu + w->shift;
    e.t_gpu_ns = tgpu == HOFF__TIME_UNKNOWN ? tgpu : tgpu + w->shift;
    if ((rc = hoff__trace_append(w->o, &e)) != 0)
        w->rc = rc;
}

static int by_ev(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;

    return *x < *y ? -1 : *x > *y;
}

/* The groups checked against the model, and their frees and recomputes in event order.  0, -ENOMEM, -EINVAL. */
static int rw_collect(struct rw *w, const struct hoff__trace *t, const struct hoff__rc_model *m, size_t ng) {
    const struct hoff__rc_group *g = w->g;
    size_t q, n = 0;
    uint32_t i, k;

    for (q = 0; q < ng; q++)
        n += g[q].nblk;
    w->first_id = malloc(((size_t)t->nblocks + 1) * sizeof *w->first_id);
    w->second_id = malloc(((size_t)t->nblocks + 1) * sizeof *w->second_id);
    w->regen_of = malloc(((size_t)t->nblocks + 1) * sizeof *w->regen_of);
    w->frees = malloc((n + 1) * sizeof *w->frees);
    w->regens = malloc((ng + 1) * sizeof *w->regens);
    for (q = 0, i = 0; q < ng; q++)
        i += g[q].ntmp;
    w->tmp_id = malloc(((size_t)i + 1) * sizeof *w->tmp_id);
    if (!w->first_id || !w->second_id || !w->regen_of || !w->frees || !w->regens || !w->tmp_id)
        return hoff__error(-ENOMEM, "recompute: out of memory");
    for (i = 0; i < t->nblocks; i++)
        w->first_id[i] = w->second_id[i] = w->regen_of[i] = NONE;
    for (q = 0; q < ng; q++) {
        if (g[q].regen_ev < m->bwd_ev || g[q].regen_ev >= t->nev)
            return hoff__error(-EINVAL, "recompute: a recompute at event %u is not in the backward (events %u to %zu)",
                               (unsigned)g[q].regen_ev, (unsigned)m->bwd_ev, t->nev - 1);
        for (k = 0; k < g[q].nblk; k++) {
            uint32_t b = g[q].blk[k];

            if (b >= t->nblocks || m->fwd_close[b] == NONE || w->regen_of[b] != NONE || g[q].regen_ev > m->bwd_first[b])
                return hoff__error(-EINVAL,
                                   "recompute: block %u cannot be recomputed at event %u (not a saved activation, "
                                   "named twice, or used in the backward before that)",
                                   (unsigned)b, (unsigned)g[q].regen_ev);
            w->regen_of[b] = g[q].regen_ev;
            w->frees[w->nfree++] = (uint64_t)m->fwd_close[b] << 32 | b;
        }
        for (k = 0; k < g[q].ntmp; k++)
            if (g[q].tmp[k] >= t->nblocks || t->blocks[g[q].tmp[k]].free_ev >= m->bwd_ev)
                return hoff__error(-EINVAL, "recompute: block %u is not a forward temporary", (unsigned)g[q].tmp[k]);
        w->regens[w->nregen++] = (uint64_t)g[q].regen_ev << 32 | q;
    }
    qsort(w->frees, w->nfree, sizeof *w->frees, by_ev);
    qsort(w->regens, w->nregen, sizeof *w->regens, by_ev);
    return 0;
}

/* o's header and names as t's (the same indices), and the recompute op's name.  0 or -ENOMEM. */
static int rw_header(struct rw *w, const struct hoff__trace *t) {
    if (hoff__trace_copy_header(w->o, t) != 0 || (w->name = hoff__trace_name(w->o, "hoff.recompute")) == NONE)
        return hoff__error(-ENOMEM, "recompute: out of memory");
    return 0;
}

/* Block b of t allocated again in o as a new block (its size, pool and stream; never pinned), at event ev's time;
 * its id in o. */
static uint32_t rw_again(struct rw *w, const struct hoff__trace *t, uint32_t b, const struct hoff__tev *ev) {
    struct hoff__tev e = t->ev[t->blocks[b].alloc_ev];
    uint32_t id = w->o->nblocks;

    e.flags &= (uint8_t)~HOFF__TEV_PINNED;
    e.block = id;
    rw_put(w, e, ev->t_cpu_ns, ev->t_gpu_ns);
    return id;
}

/* A free of block id of o on stream, at event ev's time. */
static void rw_free(struct rw *w, uint32_t id, uint64_t stream, const struct hoff__tev *ev) {
    struct hoff__tev e;

    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_FREE;
    e.block = id;
    e.name = NONE;
    e.stream = stream;
    rw_put(w, e, ev->t_cpu_ns, ev->t_gpu_ns);
}

/* Event i of t into o: first the frees of the first halves whose last forward use window it closes, then the
 * recomputes made again before it (their blocks, then the inserted op's end at their time), then the event with
 * its block's id in o. */
static void rw_event(struct rw *w, const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t i) {
    const struct hoff__tev *ev = &t->ev[i];
    struct hoff__tev e;
    uint32_t k;

    for (; w->fi < w->nfree && (uint32_t)(w->frees[w->fi] >> 32) == i; w->fi++) {
        uint32_t b = (uint32_t)w->frees[w->fi];

        rw_free(w, w->first_id[b], t->ev[t->blocks[b].alloc_ev].stream, ev);
    }
    if (w->ri < w->nregen && (uint32_t)(w->regens[w->ri] >> 32) == i) {
        uint64_t cost = 0;
        uint32_t ntmp = 0;

        for (; w->ri < w->nregen && (uint32_t)(w->regens[w->ri] >> 32) == i; w->ri++) {
            const struct hoff__rc_group *gr = &w->g[(uint32_t)w->regens[w->ri]];

            cost += gr->cost_ns;
            for (k = 0; k < gr->nblk; k++)
                w->second_id[gr->blk[k]] = rw_again(w, t, gr->blk[k], ev);
            for (k = 0; k < gr->ntmp; k++)
                w->tmp_id[ntmp++] = rw_again(w, t, gr->tmp[k], ev);
        }
        w->shift += cost;
        memset(&e, 0, sizeof e);
        e.kind = HOFF__TEV_OP;
        e.block = NONE;
        e.name = w->name;
        if (m->phases)
            e.flags = (uint8_t)(HOFF_PHASE_BACKWARD << HOFF__TEV_PHASE_SHIFT);
        rw_put(w, e, ev->t_cpu_ns, ev->t_gpu_ns);
        for (k = 0; k < ntmp; k++) /* the temporaries die with the recompute */
            rw_free(w, w->tmp_id[k], 0, ev);
    }
    e = *ev;
    if (ev->kind == HOFF__TEV_ALLOC)
        e.block = w->first_id[ev->block] = w->o->nblocks;
    else if (ev->kind == HOFF__TEV_FREE || ev->kind == HOFF__TEV_ACCESS)
        e.block = w->regen_of[ev->block] != NONE && i >= w->regen_of[ev->block] ? w->second_id[ev->block]
                                                                                : w->first_id[ev->block];
    rw_put(w, e, ev->t_cpu_ns, ev->t_gpu_ns);
}

int hoff__rc_rewrite(const struct hoff__trace *t, const struct hoff__rc_model *m, const struct hoff__rc_group *g,
                     size_t ng, struct hoff__trace *out) {
    struct rw w;
    uint32_t i;

    memset(&w, 0, sizeof w);
    w.o = out;
    w.g = g;
    hoff__trace_init(out);
    if ((w.rc = rw_collect(&w, t, m, ng)) == 0 && (w.rc = rw_header(&w, t)) == 0) {
        for (i = 0; i < t->nev && !w.rc; i++)
            rw_event(&w, t, m, i);
        if (!w.rc) {
            out->step_ns = t->step_ns + w.shift;
            out->step_gpu_ns = t->step_gpu_ns ? t->step_gpu_ns + w.shift : 0;
            w.rc = hoff__trace_finish(out);
        }
    }
    free(w.first_id);
    free(w.second_id);
    free(w.regen_of);
    free(w.frees);
    free(w.regens);
    free(w.tmp_id);
    return w.rc;
}
