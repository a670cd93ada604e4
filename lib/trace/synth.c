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
#include "trace/synth.h"

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
 * recomputing it needs (plan/recompute.c).  Every event of an op carries the op's start time (host and GPU
 * timelines are the same here), so the gap before the next op mark is the
 * op's compute.
 */

struct sb {
    struct hoff__trace *t;
    const struct hoff__synth_opts *o;
    uint64_t now, pending; /* start of the current op, its duration */
    uint64_t rw;           /* bytes the next op reads and writes (sb_rw), for the roofline; 0: not said */
    int region;            /* inside a region */
    int rc;
};

/* Start building the step's trace t under options o (t's backend "synth" unless it names one). */
static void sb_init(struct sb *s, struct hoff__trace *t, const struct hoff__synth_opts *o) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->o = o;
    if (!t->backend[0])
        snprintf(t->backend, sizeof t->backend, "synth");
}

/* The step's time (the clock where the builder stands) into t, which is finished.  0 or -errno (the builder's
 * first error, or hoff__trace_finish's). */
static int sb_finish(struct sb *s) {
    if (s->rc)
        return s->rc;
    s->t->step_ns = s->now;
    s->t->step_gpu_ns = s->now;
    return hoff__trace_finish(s->t);
}

static void sb_append(struct sb *s, struct hoff__tev *e) {
    int rc;

    if (s->rc)
        return;
    e->t_cpu_ns = s->now;
    e->t_gpu_ns = s->now;
    rc = hoff__trace_append(s->t, e);
    if (rc)
        s->rc = rc;
}

/* Allocate a block of size bytes in pool; returns its id. */
static uint32_t sb_alloc_pool(struct sb *s, uint64_t size, int pool) {
    struct hoff__tev e;
    uint32_t id = s->t->nblocks;

    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_ALLOC;
    e.pool = (uint8_t)pool;
    e.flags = s->region && pool == 1 ? HOFF__TEV_PINNED : 0;
    e.block = id;
    e.name = UINT32_MAX;
    e.size = size ? size : 1;
    sb_append(s, &e);
    return id;
}

/* An in-step tensor: the pool follows hoff_malloc's rule (managed_min; a region's are device-pool blocks). */
static uint32_t sb_alloc(struct sb *s, uint64_t size) {
    return sb_alloc_pool(s, size, !s->region && size >= s->o->managed_min ? 1 : 0);
}

/* Block id is not an activation (a parameter's gradient): its allocation is flagged kept, as the Python
 * package's hoff_keep makes the recorded step flag it (the planner counts it as device memory). */
static void sb_keep(struct sb *s, uint32_t id) {
    struct hoff__tblock *b;

    if (s->rc || id >= s->t->nblocks)
        return;
    b = &s->t->blocks[id];
    if (b->pool != 1)
        return;
    s->t->ev[b->alloc_ev].flags |= HOFF__TEV_KEPT;
    b->kept = 1;
    b->pool = 0;
}

static void sb_block_ev(struct sb *s, int kind, uint32_t id, int write) {
    struct hoff__tev e;

    if (id == UINT32_MAX)
        return;
    memset(&e, 0, sizeof e);
    e.kind = (uint8_t)kind;
    e.block = id;
    e.name = UINT32_MAX;
    e.flags = write ? HOFF__TEV_WRITE : 0;
    sb_append(s, &e);
}

static void sb_free(struct sb *s, uint32_t id) {
    sb_block_ev(s, HOFF__TEV_FREE, id, 0);
}

/* A saved-tensor hook's mark (only with access marks). */
static void sb_mark(struct sb *s, uint32_t id) {
    if (s->o->access_marks)
        sb_block_ev(s, HOFF__TEV_ACCESS, id, 0);
}

static void sb_region(struct sb *s, int begin) {
    struct hoff__tev e;

    memset(&e, 0, sizeof e);
    e.kind = begin ? HOFF__TEV_REGION_BEGIN : HOFF__TEV_REGION_END;
    e.block = UINT32_MAX;
    e.name = UINT32_MAX;
    sb_append(s, &e);
    s->region = begin;
}

/* The previous op's time passes.  A step past HOFF__STEP_NS_MAX cannot be on
 * a step's clock (the reader would refuse the trace): an error, and the
 * clock stops there (pending is at most HOFF__STEP_NS_MAX + 1: no wrap). */
static void sb_advance(struct sb *s) {
    s->now += s->pending;
    s->pending = 0;
    if (s->now <= HOFF__STEP_NS_MAX)
        return;
    s->now = HOFF__STEP_NS_MAX + 1;
    if (!s->rc)
        s->rc = hoff__error(-ERANGE,
                            "synth: the step would compute for more than %s at %g TFLOP/s; raise "
                            "--tflops or make the model smaller",
                            HOFF__STEP_NS_MAX_TEXT, s->o ? s->o->tflops : 0.0);
}

/* Start an op that runs for ns: the previous op's time passes first. */
static void sb_op_ns(struct sb *s, const char *name, uint64_t ns) {
    struct hoff__tev e;

    sb_advance(s);
    s->pending = ns;
    if (s->rc)
        return;
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_OP;
    e.block = UINT32_MAX;
    e.name = hoff__trace_name(s->t, name);
    if (e.name == UINT32_MAX) {
        s->rc = -ENOMEM;
        return;
    }
    sb_append(s, &e);
}

/* ns for flops at o->tflops (at least 1 ns). */
static uint64_t flops_ns(const struct sb *s, double flops) {
    double ns = flops / (s->o->tflops * 1e3);

    if (!(ns <= (double)HOFF__STEP_NS_MAX))
        return HOFF__STEP_NS_MAX + 1; /* sb_advance refuses it */
    return ns < 1.0 ? 1 : (uint64_t)(ns + 0.5);
}

/* The bytes the next op (sb_op) reads and writes: with hbm_gbps, its time is at least their time at that rate. */
static void sb_rw(struct sb *s, uint64_t bytes) {
    s->rw = bytes;
}

/* An op's time: its FLOPs at tflops, or with hbm_gbps and sb_rw's bytes, the longer of that and the bytes' time
 * (the roofline); sb_rw's bytes are used once. */
static uint64_t op_ns(struct sb *s, double flops) {
    uint64_t ns = flops_ns(s, flops);

    if (s->o->hbm_gbps > 0 && s->rw) {
        double m = (double)s->rw / s->o->hbm_gbps; /* GB/s = bytes per ns */

        if (m > (double)HOFF__STEP_NS_MAX)
            ns = HOFF__STEP_NS_MAX + 1; /* sb_advance refuses it */
        else if ((uint64_t)(m + 0.5) > ns)
            ns = (uint64_t)(m + 0.5);
    }
    s->rw = 0;
    return ns;
}

static void sb_op(struct sb *s, uint32_t layer, const char *what, double flops) {
    char name[64];

    snprintf(name, sizeof name, "L%u.%s", (unsigned)layer, what);
    sb_op_ns(s, name, op_ns(s, flops));
}

/* With input_reads: a read of block id by the op now running (an input no saved-tensor hook marks). */
static void sb_input(struct sb *s, uint32_t id) {
    if (s->o->input_reads)
        sb_block_ev(s, HOFF__TEV_ACCESS, id, 0);
}

/* Where a model's backward puts a weight gradient (retained: the optimizer reads it after the step's
 * backward): before the input's gradient in the device pool (the coarse transformer), or after it in the pool
 * managed_min picks, as PyTorch's eager autograd does (the GPT step). */
enum sb_dw { SB_DW_AFTER = 0, SB_DW_DEVICE_FIRST = 1 };

/* The backward of an op of layer l that saved `saved`: it reads it, makes its input's gradient of bytes (the id
 * returned) and its weight gradient of dw bytes (0: no weight) where `order` says, then frees its output's
 * gradient gout (UINT32_MAX: the residual stream's, which a later op frees) and the saved tensor. */
static uint32_t sb_bwd(struct sb *s, uint32_t l, const char *name, double flops, uint32_t saved, uint64_t bytes,
                       uint64_t dw, enum sb_dw order, uint32_t gout) {
    uint32_t gin;

    sb_op(s, l, name, flops);
    sb_mark(s, saved);
    if (dw && order == SB_DW_DEVICE_FIRST)
        sb_alloc_pool(s, dw, 0);
    gin = sb_alloc(s, bytes);
    if (dw && order == SB_DW_AFTER)
        sb_alloc(s, dw);
    sb_free(s, gout);
    sb_free(s, saved);
    return gin;
}

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

/* Non-flash attention (softmax probabilities saved) for short sequences. */
#define SYNTH_FLASH_FROM_SEQ 1024

/* The options both transformer models share.  0 or -EINVAL with a message. */
static int synth_check(const struct hoff__trace *t, const struct hoff__synth_opts *o) {
    if (!t || !o || o->layers == 0 || o->hidden == 0 || o->seq == 0 || o->batch == 0 || o->elem_bytes == 0)
        return hoff__error(-EINVAL, "synth: layers, hidden, seq, batch and elem_bytes must be positive");
    if (!(o->tflops >= HOFF__SYNTH_TFLOPS_MIN && o->tflops <= HOFF__SYNTH_TFLOPS_MAX))
        return hoff__error(-EINVAL, "synth: tflops is %g; expected %g to %g TFLOP/s", o->tflops, HOFF__SYNTH_TFLOPS_MIN,
                           HOFF__SYNTH_TFLOPS_MAX);
    if (!(o->hbm_gbps >= 0 && o->hbm_gbps <= HOFF__SYNTH_HBM_GBPS_MAX))
        return hoff__error(-EINVAL, "synth: hbm_gbps is %g; expected 0 (FLOPs only) to %g GB/s", o->hbm_gbps,
                           HOFF__SYNTH_HBM_GBPS_MAX);
    if (o->layers > 100000 || o->hidden > (1u << 20) || o->seq > (1u << 24) || o->batch > (1u << 20))
        return hoff__error(-EINVAL, "synth: shape out of range (layers <= 100000, hidden <= 2^20, seq <= 2^24, "
                                    "batch <= 2^20)");
    return 0;
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
static uint32_t tf_fwd(struct sb *s, uint32_t l, const char *name, double flops, uint64_t bytes, uint32_t in) {
    uint32_t out;

    sb_op(s, l, name, flops);
    out = sb_alloc(s, bytes);
    sb_mark(s, in);
    return out;
}

/* A LayerNorm of layer l: its statistics (*st, saved) and its output (the id returned), the statistics read. */
static uint32_t tf_ln(struct sb *s, const struct tf *c, uint32_t l, const char *name, uint32_t *st) {
    uint32_t out;

    sb_rw(s, c->b_ln);
    sb_op(s, l, name, c->f_ln);
    *st = sb_alloc(s, c->T * 8);
    out = sb_alloc(s, c->bsh);
    sb_mark(s, *st);
    return out;
}

/* Layer l's forward: its saved tensors into v; *x_next is its input, then its output. */
static void tf_layer_fwd(struct sb *s, const struct tf *c, uint32_t l, struct saved *v, uint32_t *x_next) {
    uint32_t tmp;

    v->x = *x_next;
    v->probs = v->lse = UINT32_MAX;
    v->ln1_out = tf_ln(s, c, l, "ln1", &v->ln1_st);
    sb_input(s, v->x);
    sb_rw(s, c->b_qkv);
    v->qkv = tf_fwd(s, l, "qkv", c->f_qkv, 3 * c->bsh, v->ln1_out);
    sb_rw(s, c->b_attn);
    sb_op(s, l, "attn", c->f_attn);
    tmp = sb_alloc(s, c->wsb); /* workspace */
    if (c->flash) {
        v->lse = sb_alloc(s, c->wsb);
    } else {
        v->probs = sb_alloc(s, s->o->batch * c->heads * s->o->seq * s->o->seq * c->e);
    }
    v->ctx = sb_alloc(s, c->bsh);
    sb_free(s, tmp);
    sb_mark(s, v->qkv);
    sb_mark(s, c->flash ? v->lse : v->probs);
    sb_rw(s, c->b_proj);
    tmp = tf_fwd(s, l, "proj", c->f_proj, c->bsh, v->ctx);
    sb_rw(s, c->b_add);
    v->ln2_in = tf_fwd(s, l, "add1", c->f_add, c->bsh, v->x);
    sb_input(s, tmp);
    sb_free(s, tmp);
    v->ln2_out = tf_ln(s, c, l, "ln2", &v->ln2_st);
    sb_input(s, v->ln2_in);
    sb_rw(s, c->b_up);
    v->up = tf_fwd(s, l, "mlp_up", c->f_up, 4 * c->bsh, v->ln2_out);
    sb_rw(s, c->b_act);
    v->act = tf_fwd(s, l, "act", c->f_act, 4 * c->bsh, v->up);
    sb_rw(s, c->b_down);
    tmp = tf_fwd(s, l, "mlp_down", c->f_down, c->bsh, v->act);
    sb_rw(s, c->b_add);
    *x_next = tf_fwd(s, l, "add2", c->f_add, c->bsh, v->ln2_in);
    sb_input(s, tmp);
    sb_free(s, tmp);
}

/* Layer l's backward: g is the gradient of its output; returns its input's. */
static uint32_t tf_layer_bwd(struct sb *s, const struct tf *c, uint32_t l, struct saved *v, uint32_t g) {
    uint64_t wh = c->h * c->h * c->e;
    uint32_t g_act, g_up, g_ln2out, g_mid, g_ctx, g_qkv, g_ln1out, g_in, tmp;

    /* dW_down, dW_up, dW_o and dW_qkv: weight gradients (retained) */
    sb_rw(s, 2 * c->b_down);
    g_act = sb_bwd(s, l, "mlp_down.bwd", 2 * c->f_down, v->act, 4 * c->bsh, 4 * wh, SB_DW_DEVICE_FIRST, UINT32_MAX);
    sb_rw(s, 2 * c->b_act);
    g_up = sb_bwd(s, l, "act.bwd", 2 * c->f_act, v->up, 4 * c->bsh, 0, SB_DW_DEVICE_FIRST, g_act);
    sb_rw(s, 2 * c->b_up);
    g_ln2out = sb_bwd(s, l, "mlp_up.bwd", 2 * c->f_up, v->ln2_out, c->bsh, 4 * wh, SB_DW_DEVICE_FIRST, g_up);
    sb_rw(s, 2 * c->b_ln);
    sb_op(s, l, "ln2.bwd", 2 * c->f_ln);
    sb_mark(s, v->ln2_in);
    sb_mark(s, v->ln2_st);
    sb_alloc_pool(s, 13 * c->h * c->e, 0); /* biases and LayerNorm weights */
    g_mid = sb_alloc(s, c->bsh);           /* g + LN2'(g_ln2out): the residual */
    sb_free(s, g_ln2out);
    sb_free(s, g);
    sb_free(s, v->ln2_st);
    sb_free(s, v->ln2_in);
    sb_rw(s, 2 * c->b_proj);
    g_ctx = sb_bwd(s, l, "proj.bwd", 2 * c->f_proj, v->ctx, c->bsh, wh, SB_DW_DEVICE_FIRST, UINT32_MAX);
    sb_rw(s, 2 * c->b_attn);
    sb_op(s, l, "attn.bwd", 2 * c->f_attn);
    sb_mark(s, v->qkv);
    sb_mark(s, c->flash ? v->lse : v->probs);
    tmp = sb_alloc(s, c->wsb); /* workspace (softmax-gradient row sums) */
    g_qkv = sb_alloc(s, 3 * c->bsh);
    sb_free(s, tmp);
    sb_free(s, g_ctx);
    sb_free(s, c->flash ? v->lse : v->probs);
    sb_free(s, v->qkv);
    sb_rw(s, 2 * c->b_qkv);
    g_ln1out = sb_bwd(s, l, "qkv.bwd", 2 * c->f_qkv, v->ln1_out, c->bsh, 3 * wh, SB_DW_DEVICE_FIRST, g_qkv);
    sb_rw(s, 2 * c->b_ln);
    sb_op(s, l, "ln1.bwd", 2 * c->f_ln);
    sb_mark(s, v->x);
    sb_mark(s, v->ln1_st);
    g_in = sb_alloc(s, c->bsh);
    sb_free(s, g_ln1out);
    sb_free(s, g_mid);
    sb_free(s, v->ln1_st);
    sb_free(s, v->x);
    return g_in;
}

int hoff__synth_transformer(struct hoff__trace *t, const struct hoff__synth_opts *o) {
    struct sb s;
    struct tf c;
    struct saved *sv;
    uint64_t h, e, T, bsh;
    double Td, hd;
    uint32_t l, x_next, g;
    int rc;

    if ((rc = synth_check(t, o)) != 0)
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
              (o->attention == HOFF__SYNTH_ATTN_AUTO && o->seq > SYNTH_FLASH_FROM_SEQ);
    c.wsb = o->batch * c.heads * o->seq * 4; /* log-sum-exp / softmax statistics, float32 */
    sv = calloc(o->layers, sizeof *sv);
    if (!sv)
        return hoff__error(-ENOMEM, "synth: out of memory");
    sb_init(&s, t, o);

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
    sb_rw(&s, bsh);
    sb_op_ns(&s, "embed", op_ns(&s, c.f_add));
    x_next = sb_alloc(&s, bsh);
    for (l = 0; l < o->layers; l++)
        tf_layer_fwd(&s, &c, l, &sv[l], &x_next);
    sb_rw(&s, bsh);
    sb_op_ns(&s, "loss", op_ns(&s, c.f_ln));
    sb_mark(&s, x_next);

    /* --- backward --- */
    sb_rw(&s, 2 * bsh);
    sb_op_ns(&s, "loss.bwd", op_ns(&s, 2 * c.f_ln));
    sb_mark(&s, x_next);
    g = sb_alloc(&s, bsh);
    sb_free(&s, x_next);
    for (l = o->layers; l-- > 0;)
        g = tf_layer_bwd(&s, &c, l, &sv[l], g);
    sb_rw(&s, 2 * bsh);
    sb_op_ns(&s, "embed.bwd", op_ns(&s, 2 * c.f_add));
    sb_free(&s, g);
    sb_advance(&s);
    free(sv);
    return sb_finish(&s);
}

/* --- a GPT step as eager PyTorch runs it ----------------------------------------
 *
 * bench/models/gpt.py's decoder (pre-LayerNorm blocks, causal attention, GELU
 * MLP, an LM head with log-softmax and a loss inside a region) traced op by op
 * as PyTorch's eager autograd allocates it; checked against a recorded CPU
 * step of the same shape (tests/synth_gpt.sh).  T = b*s tokens, "w" a T*w
 * tensor, S = b*heads*s*s the attention scores, M = s*s bytes a boolean mask.
 *
 * Forward, per layer: ln1 (h), qkv (3h); materialised ("math") attention:
 * q@k^T (S), the scaling (S), the causal mask (ones, tril, ~mask: M each, the
 * last saved), masked_fill (S), softmax (S, saved), probs@v (h) and its
 * contiguous copy (h, saved); flash attention instead: the output (h, saved)
 * and its log-sum-exp (b*heads*s float32, saved).  Then the projection (h),
 * the residual (h, saved), ln2 (h), fc (4h), GELU (4h), out (h), the residual
 * (h: the next layer's input).  Head: ln_f (h), logits (T*vocab: the model's
 * output, which the training loop holds past the step's end) and, inside the
 * loss region, log-softmax (T*vocab).
 * Backward mirrors it: every saved tensor is read (unpacked) at its backward
 * op and freed after it; each op allocates its input gradients (the q/k/v
 * gradients are concatenated into one 3h gradient) and its weight gradient
 * (retained); the position embedding's gradient is first summed over the
 * batch.  Weight gradients are flagged kept, and the optimizer (foreach AdamW) makes two temporaries the
 * size of each weight gradient, parameter by parameter, in a region: what hoff's Python package does with
 * them (hoff.grads: neither is an activation).  Tensors under managed_min (LayerNorm
 * statistics, biases) go to the device pool; GPU-side workspaces are not
 * modelled.  Times are FLOPs at tflops, backward twice forward. */

struct gpt_saved {
    uint32_t x, ln1, qkv, notmask, probs, lse, ctx, x1, ln2, fc, gl;
};

struct gpt_shape {
    uint64_t h, e, T, heads, S, M, V, lse; /* sizes in bytes: S scores, M mask, V logits, lse */
    int flash;
    double f_ln, f_qkv, f_attn, f_proj, f_mlp, f_elem, f_head;
};

/* An op of layer l that reads `in` (its access mark) and makes a tensor of bytes: the tensor's id. */
static uint32_t gpt_fwd(struct sb *s, uint32_t l, const char *name, double flops, uint32_t in, uint64_t bytes) {
    sb_op(s, l, name, flops);
    sb_mark(s, in);
    return sb_alloc(s, bytes);
}

/* A residual add of layer l (forward, or its backward summing two gradients): the sum of bytes (its id), then a
 * and b freed (UINT32_MAX: one that lives on). */
static uint32_t gpt_add(struct sb *s, uint32_t l, const char *name, double flops, uint64_t bytes, uint32_t a,
                        uint32_t b) {
    uint32_t sum;

    sb_op(s, l, name, flops);
    sum = sb_alloc(s, bytes);
    sb_free(s, a);
    sb_free(s, b);
    return sum;
}

/* A weight gradient of bytes: retained (the optimizer reads it after the step's backward) and kept: hoff's
 * Python package keeps every gradient on the device, outside the budget (hoff.grads). */
static void gpt_dw(struct sb *s, uint64_t bytes) {
    sb_keep(s, sb_alloc(s, bytes));
}

static void gpt_layer_fwd(struct sb *s, const struct gpt_shape *g, uint32_t l, struct gpt_saved *v, uint32_t *x_next) {
    uint64_t h = g->h * g->e * g->T;
    double add = g->f_elem * (double)g->T * (double)g->h;
    uint32_t a, b, c, d;

    v->x = *x_next;
    v->notmask = v->probs = v->lse = UINT32_MAX;
    v->ln1 = gpt_fwd(s, l, "ln1", g->f_ln, v->x, h);
    v->qkv = gpt_fwd(s, l, "qkv", g->f_qkv, v->ln1, 3 * h);
    sb_mark(s, v->qkv);
    if (g->flash) {
        sb_op(s, l, "attn", g->f_attn);
        v->ctx = sb_alloc(s, h);
        v->lse = sb_alloc(s, g->lse);
    } else {
        sb_op(s, l, "scores", g->f_attn / 2);
        a = sb_alloc(s, g->S);
        sb_op(s, l, "scale", g->f_elem * (double)g->S / (double)g->e);
        b = sb_alloc(s, g->S);
        sb_free(s, a);
        sb_op(s, l, "mask", 1);
        a = sb_alloc(s, g->M);
        c = sb_alloc(s, g->M); /* tril */
        sb_free(s, a);
        v->notmask = sb_alloc(s, g->M);
        a = gpt_fwd(s, l, "masked_fill", g->f_elem * (double)g->S / (double)g->e, v->notmask, g->S);
        sb_free(s, b);
        sb_op(s, l, "softmax", g->f_elem * (double)g->S / (double)g->e);
        v->probs = sb_alloc(s, g->S);
        sb_free(s, a);
        a = gpt_fwd(s, l, "pv", g->f_attn / 2, v->probs, h);
        sb_op(s, l, "contiguous", add);
        v->ctx = sb_alloc(s, h);
        sb_free(s, a);
        sb_free(s, c);
    }
    d = gpt_fwd(s, l, "proj", g->f_proj, v->ctx, h);
    v->x1 = gpt_add(s, l, "add1", add, h, d, UINT32_MAX);
    v->ln2 = gpt_fwd(s, l, "ln2", g->f_ln, v->x1, h);
    v->fc = gpt_fwd(s, l, "fc", g->f_mlp, v->ln2, 4 * h);
    v->gl = gpt_fwd(s, l, "gelu", 4 * g->f_elem * (double)g->T * (double)g->h, v->fc, 4 * h);
    d = gpt_fwd(s, l, "out", g->f_mlp, v->gl, h);
    *x_next = gpt_add(s, l, "add2", add, h, d, UINT32_MAX);
}

/* Layer l's backward: g is the gradient of its output, replaced by its input's. */
static void gpt_layer_bwd(struct sb *s, const struct gpt_shape *g, uint32_t l, struct gpt_saved *v, uint32_t *grad) {
    uint64_t h = g->h * g->e * g->T, wh = g->h * g->h * g->e;
    double add = g->f_elem * (double)g->T * (double)g->h;
    uint32_t a, b, c, q, k, gv, g1;

    a = sb_bwd(s, l, "out.bwd", 2 * g->f_mlp, v->gl, 4 * h, 4 * wh, SB_DW_AFTER, UINT32_MAX);
    b = sb_bwd(s, l, "gelu.bwd", 8 * g->f_elem * (double)g->T * (double)g->h, v->fc, 4 * h, 0, SB_DW_AFTER, a);
    a = sb_bwd(s, l, "fc.bwd", 2 * g->f_mlp, v->ln2, h, 4 * wh, SB_DW_AFTER, b);
    b = sb_bwd(s, l, "ln2.bwd", 2 * g->f_ln, v->x1, h, 0, SB_DW_AFTER, a);
    g1 = gpt_add(s, l, "add1.bwd", add, h, *grad, b);
    a = sb_bwd(s, l, "proj.bwd", 2 * g->f_proj, v->ctx, h, wh, SB_DW_AFTER, UINT32_MAX);
    sb_mark(s, v->qkv);
    if (g->flash) {
        sb_op(s, l, "attn.bwd", 2.5 * g->f_attn);
        sb_mark(s, v->lse);
        c = sb_alloc(s, 3 * h);
        sb_free(s, a);
        sb_free(s, v->lse);
        sb_free(s, v->qkv);
    } else {
        sb_op(s, l, "pv.bwd", g->f_attn);
        sb_mark(s, v->probs);
        gv = sb_alloc(s, h);
        b = sb_alloc(s, g->S);
        sb_free(s, a);
        sb_op(s, l, "softmax.bwd", 2 * g->f_elem * (double)g->S / (double)g->e);
        a = sb_alloc(s, g->S);
        sb_free(s, b);
        sb_free(s, v->probs);
        b = sb_bwd(s, l, "masked_fill.bwd", g->f_elem * (double)g->S / (double)g->e, v->notmask, g->S, 0, SB_DW_AFTER,
                   a);
        sb_op(s, l, "scale.bwd", g->f_elem * (double)g->S / (double)g->e);
        a = sb_alloc(s, g->S);
        sb_free(s, b);
        sb_op(s, l, "scores.bwd", g->f_attn);
        q = sb_alloc(s, h);
        k = sb_alloc(s, h);
        sb_free(s, a);
        sb_free(s, v->qkv);
        sb_op(s, l, "qkv.cat", g->f_elem * 3.0 * (double)g->T * (double)g->h);
        a = sb_alloc(s, h);
        sb_free(s, gv);
        b = sb_alloc(s, h);
        sb_free(s, k);
        c = sb_alloc(s, 3 * h);
        sb_free(s, b);
        sb_free(s, q);
        sb_free(s, a);
    }
    a = sb_bwd(s, l, "qkv.bwd", 2 * g->f_qkv, v->ln1, h, 3 * wh, SB_DW_AFTER, c);
    b = sb_bwd(s, l, "ln1.bwd", 2 * g->f_ln, v->x, h, 0, SB_DW_AFTER, a);
    *grad = gpt_add(s, l, "add0.bwd", add, h, g1, b);
}

static int gpt_shape(const struct hoff__synth_opts *o, struct gpt_shape *g) {
    uint64_t T = o->batch * o->seq;

    memset(g, 0, sizeof *g);
    g->h = o->hidden;
    g->e = o->elem_bytes;
    g->T = T;
    g->heads = o->heads ? o->heads : (o->hidden >= 64 ? o->hidden / 64 : 1);
    if (o->hidden % g->heads)
        return hoff__error(-EINVAL, "synth: --heads %" PRIu64 " does not divide --hidden %" PRIu64, g->heads,
                           o->hidden);
    g->flash = o->attention == HOFF__SYNTH_ATTN_FLASH ||
               (o->attention == HOFF__SYNTH_ATTN_AUTO && o->seq > SYNTH_FLASH_FROM_SEQ);
    if (T * o->hidden * g->e > ((uint64_t)1 << 44) / 4 || T * o->vocab * g->e > ((uint64_t)1 << 44) ||
        (!g->flash && o->batch * g->heads * o->seq * o->seq * g->e > ((uint64_t)1 << 44)))
        return hoff__error(-EINVAL, "synth: a tensor of this shape passes 2^44 bytes (16 TiB); use flash attention "
                                    "(--attention flash) or a smaller shape");
    g->S = o->batch * g->heads * o->seq * o->seq * g->e;
    g->M = o->seq * o->seq;
    g->V = T * o->vocab * g->e;
    g->lse = o->batch * g->heads * o->seq * 4;
    g->f_ln = 8.0 * (double)T * (double)g->h;
    g->f_qkv = 6.0 * (double)g->h * (double)g->h * (double)T;
    g->f_attn = 4.0 * (double)o->batch * (double)o->seq * (double)o->seq * (double)g->h;
    g->f_proj = 2.0 * (double)g->h * (double)g->h * (double)T;
    g->f_mlp = 8.0 * (double)g->h * (double)g->h * (double)T;
    g->f_elem = 1.0;
    g->f_head = 2.0 * (double)g->h * (double)o->vocab * (double)T;
    return 0;
}

int hoff__synth_gpt(struct hoff__trace *t, const struct hoff__synth_opts *o) {
    struct sb s;
    struct gpt_shape g;
    struct gpt_saved *sv;
    uint64_t *dw, h, dw_bytes = 0;
    uint32_t ndw = 0, l, x, lnf, logits, lsm, grad, a, i;
    int rc;

    if ((rc = synth_check(t, o)) != 0 || (rc = gpt_shape(o, &g)) != 0)
        return rc;
    h = g.T * g.h * g.e;
    sv = calloc(o->layers, sizeof *sv);
    dw = calloc((size_t)o->layers * 4 + 3, sizeof *dw);
    if (!sv || !dw) {
        free(sv);
        free(dw);
        return hoff__error(-ENOMEM, "synth: out of memory");
    }
    sb_init(&s, t, o);
    /* Forward: token and position embeddings, their sum. */
    sb_op_ns(&s, "embed", flops_ns(&s, (double)g.T * (double)g.h));
    a = sb_alloc(&s, h);
    x = sb_alloc(&s, o->seq * g.h * g.e);
    sb_op_ns(&s, "embed.add", flops_ns(&s, (double)g.T * (double)g.h));
    i = sb_alloc(&s, h);
    sb_free(&s, a);
    sb_free(&s, x);
    x = i;
    for (l = 0; l < o->layers; l++)
        gpt_layer_fwd(&s, &g, l, &sv[l], &x);
    sb_op_ns(&s, "ln_f", flops_ns(&s, g.f_ln));
    sb_mark(&s, x);
    lnf = sb_alloc(&s, h);
    sb_op_ns(&s, "head", flops_ns(&s, g.f_head));
    sb_mark(&s, lnf);
    logits = sb_alloc(&s, g.V);
    sb_region(&s, 1); /* the loss: never offloaded (gpt.py's skip_offload) */
    sb_op_ns(&s, "log_softmax", flops_ns(&s, 4.0 * (double)g.V / (double)g.e));
    lsm = sb_alloc(&s, g.V);
    sb_op_ns(&s, "loss", flops_ns(&s, (double)g.T));
    sb_region(&s, 0);
    /* Backward: the loss and the head. */
    sb_op_ns(&s, "loss.bwd", flops_ns(&s, 4.0 * (double)g.V / (double)g.e));
    a = sb_alloc(&s, g.V);
    i = sb_alloc(&s, g.V);
    sb_free(&s, a);
    sb_free(&s, lsm);
    (void)logits; /* the model's output: the caller holds it past the step's end */
    sb_op_ns(&s, "head.bwd", flops_ns(&s, 2 * g.f_head));
    sb_mark(&s, lnf);
    gpt_dw(&s, o->vocab * g.h * g.e);
    a = sb_alloc(&s, h);
    sb_free(&s, i);
    sb_free(&s, lnf);
    sb_op_ns(&s, "ln_f.bwd", flops_ns(&s, 2 * g.f_ln));
    sb_mark(&s, x);
    grad = sb_alloc(&s, h);
    sb_free(&s, a);
    sb_free(&s, x);
    for (l = o->layers; l-- > 0;)
        gpt_layer_bwd(&s, &g, l, &sv[l], &grad);
    /* The embeddings: the position gradient summed over the batch, dW_pos, dW_tok. */
    sb_op_ns(&s, "embed.bwd", flops_ns(&s, 2.0 * (double)g.T * (double)g.h));
    a = sb_alloc(&s, o->seq * g.h * g.e);
    gpt_dw(&s, o->seq * g.h * g.e);
    sb_free(&s, a);
    gpt_dw(&s, o->vocab * g.h * g.e);
    sb_free(&s, grad);
    /* The optimizer (foreach AdamW): two temporaries the size of each weight
     * gradient, parameter by parameter in the model's order. */
    dw[ndw++] = o->vocab * g.h * g.e;
    dw[ndw++] = o->seq * g.h * g.e;
    for (l = 0; l < o->layers; l++) {
        dw[ndw++] = 3 * g.h * g.h * g.e;
        dw[ndw++] = g.h * g.h * g.e;
        dw[ndw++] = 4 * g.h * g.h * g.e;
        dw[ndw++] = 4 * g.h * g.h * g.e;
    }
    dw[ndw++] = o->vocab * g.h * g.e;
    for (i = 0; i < ndw; i++)
        dw_bytes += dw[i] / g.e;
    sb_op_ns(&s, "adamw", flops_ns(&s, 10.0 * (double)dw_bytes));
    sb_region(&s, 1); /* the optimizer's step: hoff.grads runs it in a region, so these are device-pool blocks */
    for (i = 0; i < ndw; i++) {
        a = sb_alloc(&s, dw[i]);
        x = sb_alloc(&s, dw[i]);
        sb_free(&s, a);
        sb_free(&s, x);
    }
    sb_region(&s, 0);
    sb_advance(&s);
    free(sv);
    free(dw);
    return sb_finish(&s);
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
    struct sb s;
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
    sb_init(&s, t, &o);
    /* forward: each layer allocates its saved tensors (a few below 1 MiB,
     * which go to the device pool), uses temporaries, and marks the saved
     * tensors of the layer before as packed (their last forward use). */
    for (i = 0; i < nl; i++) {
        struct rlayer *r = &L[i];

        snprintf(name, sizeof name, "f%zu", i);
        sb_op_ns(&s, name, r->fwd_ns);
        for (j = 0; j < r->nsaved; j++)
            r->saved[j] = sb_alloc(&s, rnd_size(&st, 16, 24));
        for (j = 0; j < r->ntemp_f; j++) {
            uint32_t tmp = sb_alloc(&s, rnd_size(&st, 12, 22));
            sb_free(&s, tmp);
        }
        if (r->region) {
            sb_region(&s, 1);
            r->pinned = sb_alloc_pool(&s, rnd_size(&st, 20, 23), 1);
            sb_region(&s, 0);
        }
        if (i > 0)
            for (j = 0; j < L[i - 1].nsaved; j++)
                sb_mark(&s, L[i - 1].saved[j]);
    }
    sb_op_ns(&s, "loss", 10000);
    for (j = 0; nl && j < L[nl - 1].nsaved; j++)
        sb_mark(&s, L[nl - 1].saved[j]);
    /* backward, in reverse: unpack, temporaries, a retained gradient, frees */
    for (i = nl; i-- > 0;) {
        struct rlayer *r = &L[i];

        snprintf(name, sizeof name, "b%zu", i);
        sb_op_ns(&s, name, r->fwd_ns * 2);
        for (j = r->nsaved; j-- > 0;)
            sb_mark(&s, r->saved[j]);
        for (j = 0; j < r->ntemp_b; j++) {
            uint32_t tmp = sb_alloc(&s, rnd_size(&st, 12, 23));
            sb_free(&s, tmp);
        }
        sb_alloc_pool(&s, rnd_size(&st, 12, 22), 0); /* a parameter gradient, retained */
        for (j = r->nsaved; j-- > 0;)
            sb_free(&s, r->saved[j]);
        if (r->region)
            sb_free(&s, r->pinned);
    }
    s.now += s.pending;
    free(L);
    return sb_finish(&s);
}
