/* synth.c — synthetic traces: one training step of a decoder-only transformer built from its shapes and FLOPs,
 * and random training-shaped traces of a requested size for planner benchmarks.
 * Threading: pure functions of their options (the trace written is the caller's). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "trace/synth_build.h"

/*
 * The transformer model (pre-LayerNorm decoder layer, bf16 by default).
 *
 * Units: T = b*s tokens; a "width w" tensor holds T*w elements of elem_bytes.
 * Per layer l the forward pass saves for backward:
 *   x        the layer input, h (= the residual stream; allocated by the layer
 *            before, or by the embedding for layer 0)
 *   ln1.st   LayerNorm mean and rstd, T*8 bytes (float32; small: device pool)
 *   ln1.out  the QKV projection's input, h
 *   qkv      3h
 *   probs    the softmax probabilities, b*heads*s*s elements, only when the
 *            attention is not flash attention: modelled for s <= 1024 (short
 *            sequences, where frameworks use the math kernel); for longer ones
 *            flash attention saves only its log-sum-exp, b*heads*s float32
 *   ctx      the attention output (the output projection's input), h
 *   ln2.in   x + attention (residual), h
 *   ln2.st   mean and rstd, T*8 bytes
 *   ln2.out  the MLP's input, h
 *   up       the MLP up projection (the activation's input), 4h
 *   act      the activation's output (the down projection's input), 4h
 * Temporaries, allocated and freed inside the layer: the attention's
 * workspace (b*heads*s float32, small), the output projection's result and
 * the down projection's result (h each, freed by the residual add), and in
 * backward the activation gradients (h to 4h).  Sizes at or above
 * managed_min go to the managed pool (offload candidates), smaller ones to
 * the device pool.  Backward allocates the layer's parameter gradients in the
 * device pool (W_qkv 3h^2, W_o h^2, W_up 4h^2, W_down 4h^2 = 12h^2 elements,
 * plus one buffer of 13h for the biases and LayerNorm weights); they are never
 * freed in the step (retained), like the gradients a framework keeps for the
 * optimizer.  The embedding and the LM head are modelled only by the layer-0
 * input and a loss op (no b*s*vocab logits).
 *
 * Access marks (access_marks != 0) are what saved_tensors_hooks give: a read
 * at the last forward use of each saved tensor (pack) and one at its first
 * backward use (unpack).
 *
 * Times: an op's time is its FLOPs / tflops.  Forward: 2 * parameters *
 * tokens for the projections, 4*b*s^2*h for attention (QK^T and PV), about 8
 * FLOPs per element for LayerNorm, activation and adds; backward is twice the
 * forward.  With hbm_gbps (the roofline), an op takes at least the time its
 * bytes take at that rate: what it reads and writes (inputs, outputs and
 * weights; backward twice the forward's), so LayerNorm, the activation and
 * the adds are memory-bound as on a GPU, and the projections stay compute-bound.
 *
 * Input reads (input_reads != 0): each forward op also marks a read of the
 * inputs the hooks' marks miss (LayerNorm's input, the projections' results
 * the residual adds take), so that the trace says what each op needs: what
 * recomputing it needs (plan/recompute.c).
 *
 * Every event of an op carries the op's start time (host and GPU timelines
 * are the same here), so the gap before the next op mark is the op's
 * compute.  The builder is synth_build.c's.
 */

void hoff__synth_defaults(struct hoff__synth_opts *o) {
    memset(o, 0, sizeof *o);
    o->layers = 8;
    o->hidden = 1024;
    o->seq = 2048;
    o->batch = 1;
    o->elem_bytes = 2;
    o->access_marks = 1;
    o->tflops = 400.0;
    o->managed_min = 1u << 20;
    o->vocab = 8192;
}

struct saved {
    uint32_t x, ln1_st, ln1_out, qkv, probs, lse, ctx, ln2_in, ln2_st, ln2_out, up, act;
};

/* The coarse transformer's shape: sizes in bytes (bsh = b*s*h*e, wsb the
 * softmax statistics), whether attention is flash, each op's FLOPs and the
 * bytes its forward reads and writes (its backward: twice that), for the roofline. */
struct tf {
    uint64_t h, e, T, heads, bsh, wsb;
    int flash;
    double f_ln, f_qkv, f_attn, f_proj, f_up, f_act, f_down, f_add;
    uint64_t b_ln, b_qkv, b_attn, b_proj, b_up, b_act, b_down, b_add;
};

/* An op of layer l making a tensor of bytes (its id), then the mark of its input's read. */
static uint32_t tf_fwd(struct hoff__sb *s, uint32_t l, const char *name, double flops, uint64_t bytes, uint32_t in) {
    uint32_t out;

    hoff__sb_op(s, l, name, flops);
    out = hoff__sb_alloc(s, bytes);
    hoff__sb_mark(s, in);
    return out;
}

/* A LayerNorm of layer l: its statistics (*st, saved) and its output (the id returned), the statistics read. */
static uint32_t tf_ln(struct hoff__sb *s, const struct tf *c, uint32_t l, const char *name, uint32_t *st) {
    uint32_t out;

    hoff__sb_rw(s, c->b_ln);
    hoff__sb_op(s, l, name, c->f_ln);
    *st = hoff__sb_alloc(s, c->T * 8);
    out = hoff__sb_alloc(s, c->bsh);
    hoff__sb_mark(s, *st);
    return out;
}

/* Layer l's forward: its saved tensors into v; *x_next is its input, then its output. */
static void tf_layer_fwd(struct hoff__sb *s, const struct tf *c, uint32_t l, struct saved *v, uint32_t *x_next) {
    uint32_t tmp;

    v->x = *x_next;
    v->probs = v->lse = UINT32_MAX;
    v->ln1_out = tf_ln(s, c, l, "ln1", &v->ln1_st);
    hoff__sb_input(s, v->x);
    hoff__sb_rw(s, c->b_qkv);
    v->qkv = tf_fwd(s, l, "qkv", c->f_qkv, 3 * c->bsh, v->ln1_out);
    hoff__sb_rw(s, c->b_attn);
    hoff__sb_op(s, l, "attn", c->f_attn);
    tmp = hoff__sb_alloc(s, c->wsb); /* workspace */
    if (c->flash) {
        v->lse = hoff__sb_alloc(s, c->wsb);
    } else {
        v->probs = hoff__sb_alloc(s, s->o->batch * c->heads * s->o->seq * s->o->seq * c->e);
    }
    v->ctx = hoff__sb_alloc(s, c->bsh);
    hoff__sb_free(s, tmp);
    hoff__sb_mark(s, v->qkv);
    hoff__sb_mark(s, c->flash ? v->lse : v->probs);
    hoff__sb_rw(s, c->b_proj);
    tmp = tf_fwd(s, l, "proj", c->f_proj, c->bsh, v->ctx);
    hoff__sb_rw(s, c->b_add);
    v->ln2_in = tf_fwd(s, l, "add1", c->f_add, c->bsh, v->x);
    hoff__sb_input(s, tmp);
    hoff__sb_free(s, tmp);
    v->ln2_out = tf_ln(s, c, l, "ln2", &v->ln2_st);
    hoff__sb_input(s, v->ln2_in);
    hoff__sb_rw(s, c->b_up);
    v->up = tf_fwd(s, l, "mlp_up", c->f_up, 4 * c->bsh, v->ln2_out);
    hoff__sb_rw(s, c->b_act);
    v->act = tf_fwd(s, l, "act", c->f_act, 4 * c->bsh, v->up);
    hoff__sb_rw(s, c->b_down);
    tmp = tf_fwd(s, l, "mlp_down", c->f_down, c->bsh, v->act);
    hoff__sb_rw(s, c->b_add);
    *x_next = tf_fwd(s, l, "add2", c->f_add, c->bsh, v->ln2_in);
    hoff__sb_input(s, tmp);
    hoff__sb_free(s, tmp);
}

/* Layer l's backward: g is the gradient of its output; returns its input's. */
static uint32_t tf_layer_bwd(struct hoff__sb *s, const struct tf *c, uint32_t l, struct saved *v, uint32_t g) {
    uint64_t wh = c->h * c->h * c->e;
    uint32_t g_act, g_up, g_ln2out, g_mid, g_ctx, g_qkv, g_ln1out, g_in, tmp;

    /* dW_down, dW_up, dW_o and dW_qkv: weight gradients (retained) */
    hoff__sb_rw(s, 2 * c->b_down);
    g_act = hoff__sb_bwd(s, l, "mlp_down.bwd", 2 * c->f_down, v->act, 4 * c->bsh, 4 * wh, HOFF__SB_DW_DEVICE_FIRST,
                         UINT32_MAX);
    hoff__sb_rw(s, 2 * c->b_act);
    g_up = hoff__sb_bwd(s, l, "act.bwd", 2 * c->f_act, v->up, 4 * c->bsh, 0, HOFF__SB_DW_DEVICE_FIRST, g_act);
    hoff__sb_rw(s, 2 * c->b_up);
    g_ln2out =
        hoff__sb_bwd(s, l, "mlp_up.bwd", 2 * c->f_up, v->ln2_out, c->bsh, 4 * wh, HOFF__SB_DW_DEVICE_FIRST, g_up);
    hoff__sb_rw(s, 2 * c->b_ln);
    hoff__sb_op(s, l, "ln2.bwd", 2 * c->f_ln);
    hoff__sb_mark(s, v->ln2_in);
    hoff__sb_mark(s, v->ln2_st);
    hoff__sb_alloc_pool(s, 13 * c->h * c->e, 0); /* biases and LayerNorm weights */
    g_mid = hoff__sb_alloc(s, c->bsh);           /* g + LN2'(g_ln2out): the residual */
    hoff__sb_free(s, g_ln2out);
    hoff__sb_free(s, g);
    hoff__sb_free(s, v->ln2_st);
    hoff__sb_free(s, v->ln2_in);
    hoff__sb_rw(s, 2 * c->b_proj);
    g_ctx = hoff__sb_bwd(s, l, "proj.bwd", 2 * c->f_proj, v->ctx, c->bsh, wh, HOFF__SB_DW_DEVICE_FIRST, UINT32_MAX);
    hoff__sb_rw(s, 2 * c->b_attn);
    hoff__sb_op(s, l, "attn.bwd", 2 * c->f_attn);
    hoff__sb_mark(s, v->qkv);
    hoff__sb_mark(s, c->flash ? v->lse : v->probs);
    tmp = hoff__sb_alloc(s, c->wsb); /* workspace (softmax-gradient row sums) */
    g_qkv = hoff__sb_alloc(s, 3 * c->bsh);
    hoff__sb_free(s, tmp);
    hoff__sb_free(s, g_ctx);
    hoff__sb_free(s, c->flash ? v->lse : v->probs);
    hoff__sb_free(s, v->qkv);
    hoff__sb_rw(s, 2 * c->b_qkv);
    g_ln1out = hoff__sb_bwd(s, l, "qkv.bwd", 2 * c->f_qkv, v->ln1_out, c->bsh, 3 * wh, HOFF__SB_DW_DEVICE_FIRST, g_qkv);
    hoff__sb_rw(s, 2 * c->b_ln);
    hoff__sb_op(s, l, "ln1.bwd", 2 * c->f_ln);
    hoff__sb_mark(s, v->x);
    hoff__sb_mark(s, v->ln1_st);
    g_in = hoff__sb_alloc(s, c->bsh);
    hoff__sb_free(s, g_ln1out);
    hoff__sb_free(s, g_mid);
    hoff__sb_free(s, v->ln1_st);
    hoff__sb_free(s, v->x);
    return g_in;
}

int hoff__synth_transformer(struct hoff__trace *t, const struct hoff__synth_opts *o) {
    struct hoff__sb s;
    struct tf c;
    struct saved *sv;
    uint64_t h, e, T, bsh;
    double Td, hd;
    uint32_t l, x_next, g;
    int rc;

    if ((rc = hoff__synth_check(t, o)) != 0)
        return rc;
    h = o->hidden;
    e = o->elem_bytes;
    T = o->batch * o->seq;
    memset(&c, 0, sizeof c);
    c.h = h;
    c.e = e;
    c.T = T;
    c.heads = o->heads ? o->heads : h >= 64 ? h / 64 : 1;
    bsh = c.bsh = T * h * e;
    if (bsh / e / h != T || bsh > ((uint64_t)1 << 44))
        return hoff__error(-EINVAL, "synth: b*s*h*elem_bytes is too large");
    c.flash = o->attention == HOFF__SYNTH_ATTN_FLASH ||
              (o->attention == HOFF__SYNTH_ATTN_AUTO && o->seq > HOFF__SYNTH_FLASH_FROM_SEQ);
    c.wsb = o->batch * c.heads * o->seq * 4; /* log-sum-exp / softmax statistics, float32 */
    sv = calloc(o->layers, sizeof *sv);
    if (!sv)
        return hoff__error(-ENOMEM, "synth: out of memory");
    hoff__sb_init(&s, t, o);

    Td = (double)T;
    hd = (double)h;
    c.f_ln = 8.0 * Td * hd;
    c.f_qkv = 2.0 * 3.0 * hd * hd * Td;
    c.f_attn = 4.0 * (double)o->batch * (double)o->seq * (double)o->seq * hd;
    c.f_proj = 2.0 * hd * hd * Td;
    c.f_up = 2.0 * 4.0 * hd * hd * Td;
    c.f_act = 8.0 * Td * 4.0 * hd;
    c.f_down = c.f_up;
    c.f_add = Td * hd;
    {
        uint64_t wh = h * h * e;

        c.b_ln = 2 * bsh + T * 8;
        c.b_qkv = 4 * bsh + 3 * wh;
        c.b_attn = 4 * bsh + c.wsb + (c.flash ? 0 : o->batch * c.heads * o->seq * o->seq * e);
        c.b_proj = 2 * bsh + wh;
        c.b_up = 5 * bsh + 4 * wh;
        c.b_act = 8 * bsh;
        c.b_down = 5 * bsh + 4 * wh;
        c.b_add = 3 * bsh;
    }

    /* --- forward --- */
    hoff__sb_rw(&s, bsh);
    hoff__sb_op_ns(&s, "embed", hoff__sb_time_ns(&s, c.f_add));
    x_next = hoff__sb_alloc(&s, bsh);
    for (l = 0; l < o->layers; l++)
        tf_layer_fwd(&s, &c, l, &sv[l], &x_next);
    hoff__sb_rw(&s, bsh);
    hoff__sb_op_ns(&s, "loss", hoff__sb_time_ns(&s, c.f_ln));
    hoff__sb_mark(&s, x_next);

    /* --- backward --- */
    hoff__sb_rw(&s, 2 * bsh);
    hoff__sb_op_ns(&s, "loss.bwd", hoff__sb_time_ns(&s, 2 * c.f_ln));
    hoff__sb_mark(&s, x_next);
    g = hoff__sb_alloc(&s, bsh);
    hoff__sb_free(&s, x_next);
    for (l = o->layers; l-- > 0;)
        g = tf_layer_bwd(&s, &c, l, &sv[l], g);
    hoff__sb_rw(&s, 2 * bsh);
    hoff__sb_op_ns(&s, "embed.bwd", hoff__sb_time_ns(&s, 2 * c.f_add));
    hoff__sb_free(&s, g);
    hoff__sb_advance(&s);
    free(sv);
    return hoff__sb_finish(&s);
}

/* --- random training-shaped traces ----------------------------------------- */

static uint64_t rnd(uint64_t *st) {
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rnd_range(uint64_t *st, uint64_t lo, uint64_t hi) {
    return lo + rnd(st) % (hi - lo + 1);
}

/* Log-uniform size between 2^lo and 2^hi bytes, rounded to 512. */
static uint64_t rnd_size(uint64_t *st, int lo, int hi) {
    int sh = (int)rnd_range(st, (uint64_t)lo, (uint64_t)hi - 1);
    uint64_t v = ((uint64_t)1 << sh) + rnd(st) % ((uint64_t)1 << sh);

    return (v + 511) / 512 * 512;
}

#define EV_MAX_SAVED 8

struct rlayer {
    uint32_t saved[EV_MAX_SAVED];
    uint32_t nsaved, ntemp_f, ntemp_b;
    int region; /* one pinned block allocated inside a region */
    uint32_t pinned;
    uint64_t fwd_ns;
};

/* Events a layer with these counts produces (forward + backward). */
static size_t rlayer_events(const struct rlayer *r) {
    size_t n = 0;

    n += 1 + r->nsaved * 2 + r->ntemp_f * 2;     /* op, alloc + pack, temps */
    n += r->region ? 3 : 0;                      /* region begin, alloc, end */
    n += 1 + r->nsaved * 2 + r->ntemp_b * 2 + 1; /* op, unpack + free, temps, grad */
    n += r->region ? 1 : 0;                      /* pinned free */
    return n;
}

int hoff__synth_events(struct hoff__trace *t, size_t nev, uint64_t seed) {
    struct hoff__synth_opts o;
    struct rlayer *L = NULL;
    size_t nl = 0, cap = 0, total = 1, i; /* the loss op */
    uint64_t st = seed ^ 0x6A09E667F3BCC909ull;
    struct hoff__sb s;
    char name[48];
    uint32_t j;

    if (!t)
        return -EINVAL;
    if (nev < 16)
        nev = 16;
    /* Shape the layers first, so that forward + backward add up to nev. */
    while (total < nev) {
        struct rlayer *r;

        if (HOFF__GROW(L, cap, nl + 1)) {
            free(L);
            return hoff__error(-ENOMEM, "synth: out of memory");
        }
        r = &L[nl];
        memset(r, 0, sizeof *r);
        r->nsaved = (uint32_t)rnd_range(&st, 1, EV_MAX_SAVED);
        r->ntemp_f = (uint32_t)rnd_range(&st, 0, 3);
        r->ntemp_b = (uint32_t)rnd_range(&st, 0, 3);
        r->region = rnd(&st) % 8 == 0;
        r->fwd_ns = rnd_range(&st, 20000, 500000);
        total += rlayer_events(r);
        nl++;
    }
    hoff__synth_defaults(&o);
    o.access_marks = 1;
    hoff__sb_init(&s, t, &o);
    /* forward: each layer allocates its saved tensors (a few below 1 MiB,
     * which go to the device pool), uses temporaries, and marks the saved
     * tensors of the layer before as packed (their last forward use). */
    for (i = 0; i < nl; i++) {
        struct rlayer *r = &L[i];

        snprintf(name, sizeof name, "f%zu", i);
        hoff__sb_op_ns(&s, name, r->fwd_ns);
        for (j = 0; j < r->nsaved; j++)
            r->saved[j] = hoff__sb_alloc(&s, rnd_size(&st, 16, 24));
        for (j = 0; j < r->ntemp_f; j++) {
            uint32_t tmp = hoff__sb_alloc(&s, rnd_size(&st, 12, 22));
            hoff__sb_free(&s, tmp);
        }
        if (r->region) {
            hoff__sb_region(&s, 1);
            r->pinned = hoff__sb_alloc_pool(&s, rnd_size(&st, 20, 23), 1);
            hoff__sb_region(&s, 0);
        }
        if (i > 0)
            for (j = 0; j < L[i - 1].nsaved; j++)
                hoff__sb_mark(&s, L[i - 1].saved[j]);
    }
    hoff__sb_op_ns(&s, "loss", 10000);
    for (j = 0; nl && j < L[nl - 1].nsaved; j++)
        hoff__sb_mark(&s, L[nl - 1].saved[j]);
    /* backward, in reverse: unpack, temporaries, a retained gradient, frees */
    for (i = nl; i-- > 0;) {
        struct rlayer *r = &L[i];

        snprintf(name, sizeof name, "b%zu", i);
        hoff__sb_op_ns(&s, name, r->fwd_ns * 2);
        for (j = r->nsaved; j-- > 0;)
            hoff__sb_mark(&s, r->saved[j]);
        for (j = 0; j < r->ntemp_b; j++) {
            uint32_t tmp = hoff__sb_alloc(&s, rnd_size(&st, 12, 23));
            hoff__sb_free(&s, tmp);
        }
        hoff__sb_alloc_pool(&s, rnd_size(&st, 12, 22), 0); /* a parameter gradient, retained */
        for (j = r->nsaved; j-- > 0;)
            hoff__sb_free(&s, r->saved[j]);
        if (r->region)
            hoff__sb_free(&s, r->pinned);
    }
    s.now += s.pending;
    free(L);
    return hoff__sb_finish(&s);
}
