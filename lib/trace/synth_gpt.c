/* synth_gpt.c — a GPT step as eager PyTorch allocates it, op by op (hoff__synth_gpt; bench/models/gpt.py's
 * decoder; checked against a recorded CPU step by tests/synth_gpt.sh).  Threading: a pure function of its options
 * (the trace written is the caller's). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "trace/synth_build.h"

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
static uint32_t gpt_fwd(struct hoff__sb *s, uint32_t l, const char *name, double flops, uint32_t in, uint64_t bytes) {
    hoff__sb_op(s, l, name, flops);
    hoff__sb_mark(s, in);
    return hoff__sb_alloc(s, bytes);
}

/* A residual add of layer l (forward, or its backward summing two gradients): the sum of bytes (its id), then a
 * and b freed (UINT32_MAX: one that lives on). */
static uint32_t gpt_add(struct hoff__sb *s, uint32_t l, const char *name, double flops, uint64_t bytes, uint32_t a,
                        uint32_t b) {
    uint32_t sum;

    hoff__sb_op(s, l, name, flops);
    sum = hoff__sb_alloc(s, bytes);
    hoff__sb_free(s, a);
    hoff__sb_free(s, b);
    return sum;
}

/* A weight gradient of bytes: retained (the optimizer reads it after the step's backward) and kept: hoff's
 * Python package keeps every gradient on the device, outside the budget (hoff.grads). */
static void gpt_dw(struct hoff__sb *s, uint64_t bytes) {
    hoff__sb_keep(s, hoff__sb_alloc(s, bytes));
}

static void gpt_layer_fwd(struct hoff__sb *s, const struct gpt_shape *g, uint32_t l, struct gpt_saved *v,
                          uint32_t *x_next) {
    uint64_t h = g->h * g->e * g->T;
    double add = g->f_elem * (double)g->T * (double)g->h;
    uint32_t a, b, c, d;

    v->x = *x_next;
    v->notmask = v->probs = v->lse = UINT32_MAX;
    v->ln1 = gpt_fwd(s, l, "ln1", g->f_ln, v->x, h);
    v->qkv = gpt_fwd(s, l, "qkv", g->f_qkv, v->ln1, 3 * h);
    hoff__sb_mark(s, v->qkv);
    if (g->flash) {
        hoff__sb_op(s, l, "attn", g->f_attn);
        v->ctx = hoff__sb_alloc(s, h);
        v->lse = hoff__sb_alloc(s, g->lse);
    } else {
        hoff__sb_op(s, l, "scores", g->f_attn / 2);
        a = hoff__sb_alloc(s, g->S);
        hoff__sb_op(s, l, "scale", g->f_elem * (double)g->S / (double)g->e);
        b = hoff__sb_alloc(s, g->S);
        hoff__sb_free(s, a);
        hoff__sb_op(s, l, "mask", 1);
        a = hoff__sb_alloc(s, g->M);
        c = hoff__sb_alloc(s, g->M); /* tril */
        hoff__sb_free(s, a);
        v->notmask = hoff__sb_alloc(s, g->M);
        a = gpt_fwd(s, l, "masked_fill", g->f_elem * (double)g->S / (double)g->e, v->notmask, g->S);
        hoff__sb_free(s, b);
        hoff__sb_op(s, l, "softmax", g->f_elem * (double)g->S / (double)g->e);
        v->probs = hoff__sb_alloc(s, g->S);
        hoff__sb_free(s, a);
        a = gpt_fwd(s, l, "pv", g->f_attn / 2, v->probs, h);
        hoff__sb_op(s, l, "contiguous", add);
        v->ctx = hoff__sb_alloc(s, h);
        hoff__sb_free(s, a);
        hoff__sb_free(s, c);
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
static void gpt_layer_bwd(struct hoff__sb *s, const struct gpt_shape *g, uint32_t l, struct gpt_saved *v,
                          uint32_t *grad) {
    uint64_t h = g->h * g->e * g->T, wh = g->h * g->h * g->e;
    double add = g->f_elem * (double)g->T * (double)g->h;
    uint32_t a, b, c, q, k, gv, g1;

    a = hoff__sb_bwd(s, l, "out.bwd", 2 * g->f_mlp, v->gl, 4 * h, 4 * wh, HOFF__SB_DW_AFTER, UINT32_MAX);
    b = hoff__sb_bwd(s, l, "gelu.bwd", 8 * g->f_elem * (double)g->T * (double)g->h, v->fc, 4 * h, 0, HOFF__SB_DW_AFTER,
                     a);
    a = hoff__sb_bwd(s, l, "fc.bwd", 2 * g->f_mlp, v->ln2, h, 4 * wh, HOFF__SB_DW_AFTER, b);
    b = hoff__sb_bwd(s, l, "ln2.bwd", 2 * g->f_ln, v->x1, h, 0, HOFF__SB_DW_AFTER, a);
    g1 = gpt_add(s, l, "add1.bwd", add, h, *grad, b);
    a = hoff__sb_bwd(s, l, "proj.bwd", 2 * g->f_proj, v->ctx, h, wh, HOFF__SB_DW_AFTER, UINT32_MAX);
    hoff__sb_mark(s, v->qkv);
    if (g->flash) {
        hoff__sb_op(s, l, "attn.bwd", 2.5 * g->f_attn);
        hoff__sb_mark(s, v->lse);
        c = hoff__sb_alloc(s, 3 * h);
        hoff__sb_free(s, a);
        hoff__sb_free(s, v->lse);
        hoff__sb_free(s, v->qkv);
    } else {
        hoff__sb_op(s, l, "pv.bwd", g->f_attn);
        hoff__sb_mark(s, v->probs);
        gv = hoff__sb_alloc(s, h);
        b = hoff__sb_alloc(s, g->S);
        hoff__sb_free(s, a);
        hoff__sb_op(s, l, "softmax.bwd", 2 * g->f_elem * (double)g->S / (double)g->e);
        a = hoff__sb_alloc(s, g->S);
        hoff__sb_free(s, b);
        hoff__sb_free(s, v->probs);
        b = hoff__sb_bwd(s, l, "masked_fill.bwd", g->f_elem * (double)g->S / (double)g->e, v->notmask, g->S, 0,
                         HOFF__SB_DW_AFTER, a);
        hoff__sb_op(s, l, "scale.bwd", g->f_elem * (double)g->S / (double)g->e);
        a = hoff__sb_alloc(s, g->S);
        hoff__sb_free(s, b);
        hoff__sb_op(s, l, "scores.bwd", g->f_attn);
        q = hoff__sb_alloc(s, h);
        k = hoff__sb_alloc(s, h);
        hoff__sb_free(s, a);
        hoff__sb_free(s, v->qkv);
        hoff__sb_op(s, l, "qkv.cat", g->f_elem * 3.0 * (double)g->T * (double)g->h);
        a = hoff__sb_alloc(s, h);
        hoff__sb_free(s, gv);
        b = hoff__sb_alloc(s, h);
        hoff__sb_free(s, k);
        c = hoff__sb_alloc(s, 3 * h);
        hoff__sb_free(s, b);
        hoff__sb_free(s, q);
        hoff__sb_free(s, a);
    }
    a = hoff__sb_bwd(s, l, "qkv.bwd", 2 * g->f_qkv, v->ln1, h, 3 * wh, HOFF__SB_DW_AFTER, c);
    b = hoff__sb_bwd(s, l, "ln1.bwd", 2 * g->f_ln, v->x, h, 0, HOFF__SB_DW_AFTER, a);
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
               (o->attention == HOFF__SYNTH_ATTN_AUTO && o->seq > HOFF__SYNTH_FLASH_FROM_SEQ);
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
    struct hoff__sb s;
    struct gpt_shape g;
    struct gpt_saved *sv;
    uint64_t *dw, h, dw_bytes = 0;
    uint32_t ndw = 0, l, x, lnf, logits, lsm, grad, a, i;
    int rc;

    if ((rc = hoff__synth_check(t, o)) != 0 || (rc = gpt_shape(o, &g)) != 0)
        return rc;
    h = g.T * g.h * g.e;
    sv = calloc(o->layers, sizeof *sv);
    dw = calloc((size_t)o->layers * 4 + 3, sizeof *dw);
    if (!sv || !dw) {
        free(sv);
        free(dw);
        return hoff__error(-ENOMEM, "synth: out of memory");
    }
    hoff__sb_init(&s, t, o);
    /* Forward: token and position embeddings, their sum. */
    hoff__sb_op_ns(&s, "embed", hoff__sb_flops_ns(&s, (double)g.T * (double)g.h));
    a = hoff__sb_alloc(&s, h);
    x = hoff__sb_alloc(&s, o->seq * g.h * g.e);
    hoff__sb_op_ns(&s, "embed.add", hoff__sb_flops_ns(&s, (double)g.T * (double)g.h));
    i = hoff__sb_alloc(&s, h);
    hoff__sb_free(&s, a);
    hoff__sb_free(&s, x);
    x = i;
    for (l = 0; l < o->layers; l++)
        gpt_layer_fwd(&s, &g, l, &sv[l], &x);
    hoff__sb_op_ns(&s, "ln_f", hoff__sb_flops_ns(&s, g.f_ln));
    hoff__sb_mark(&s, x);
    lnf = hoff__sb_alloc(&s, h);
    hoff__sb_op_ns(&s, "head", hoff__sb_flops_ns(&s, g.f_head));
    hoff__sb_mark(&s, lnf);
    logits = hoff__sb_alloc(&s, g.V);
    hoff__sb_region(&s, 1); /* the loss: never offloaded (gpt.py's skip_offload) */
    hoff__sb_op_ns(&s, "log_softmax", hoff__sb_flops_ns(&s, 4.0 * (double)g.V / (double)g.e));
    lsm = hoff__sb_alloc(&s, g.V);
    hoff__sb_op_ns(&s, "loss", hoff__sb_flops_ns(&s, (double)g.T));
    hoff__sb_region(&s, 0);
    /* Backward: the loss and the head. */
    hoff__sb_op_ns(&s, "loss.bwd", hoff__sb_flops_ns(&s, 4.0 * (double)g.V / (double)g.e));
    a = hoff__sb_alloc(&s, g.V);
    i = hoff__sb_alloc(&s, g.V);
    hoff__sb_free(&s, a);
    hoff__sb_free(&s, lsm);
    (void)logits; /* the model's output: the caller holds it past the step's end */
    hoff__sb_op_ns(&s, "head.bwd", hoff__sb_flops_ns(&s, 2 * g.f_head));
    hoff__sb_mark(&s, lnf);
    gpt_dw(&s, o->vocab * g.h * g.e);
    a = hoff__sb_alloc(&s, h);
    hoff__sb_free(&s, i);
    hoff__sb_free(&s, lnf);
    hoff__sb_op_ns(&s, "ln_f.bwd", hoff__sb_flops_ns(&s, 2 * g.f_ln));
    hoff__sb_mark(&s, x);
    grad = hoff__sb_alloc(&s, h);
    hoff__sb_free(&s, a);
    hoff__sb_free(&s, x);
    for (l = o->layers; l-- > 0;)
        gpt_layer_bwd(&s, &g, l, &sv[l], &grad);
    /* The embeddings: the position gradient summed over the batch, dW_pos, dW_tok. */
    hoff__sb_op_ns(&s, "embed.bwd", hoff__sb_flops_ns(&s, 2.0 * (double)g.T * (double)g.h));
    a = hoff__sb_alloc(&s, o->seq * g.h * g.e);
    gpt_dw(&s, o->seq * g.h * g.e);
    hoff__sb_free(&s, a);
    gpt_dw(&s, o->vocab * g.h * g.e);
    hoff__sb_free(&s, grad);
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
    hoff__sb_op_ns(&s, "adamw", hoff__sb_flops_ns(&s, 10.0 * (double)dw_bytes));
    hoff__sb_region(&s, 1); /* the optimizer's step: hoff.grads runs it in a region, so these are device-pool blocks */
    for (i = 0; i < ndw; i++) {
        a = hoff__sb_alloc(&s, dw[i]);
        x = hoff__sb_alloc(&s, dw[i]);
        hoff__sb_free(&s, a);
        hoff__sb_free(&s, x);
    }
    hoff__sb_region(&s, 0);
    hoff__sb_advance(&s);
    free(sv);
    free(dw);
    return hoff__sb_finish(&s);
}
