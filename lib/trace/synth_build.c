/* synth_build.c — the builder of synthetic steps (synth_build.h): events appended on a clock the ops advance, the
 * pools' rule, marks, regions, kept gradients, op times; and the shape checks both transformer models share.
 * Threading: a builder is owned by one thread. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "trace/synth_build.h"

/* Start building the step's trace t under options o (t's backend "synth" unless it names one). */
void hoff__sb_init(struct hoff__sb *s, struct hoff__trace *t, const struct hoff__synth_opts *o) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->o = o;
    if (!t->backend[0])
        snprintf(t->backend, sizeof t->backend, "synth");
}

/* The step's time (the clock where the builder stands) into t, which is finished.  0 or -errno (the builder's
 * first error, or hoff__trace_finish's). */
int hoff__sb_finish(struct hoff__sb *s) {
    if (s->rc)
        return s->rc;
    s->t->step_ns = s->now;
    s->t->step_gpu_ns = s->now;
    return hoff__trace_finish(s->t);
}

void hoff__sb_append(struct hoff__sb *s, struct hoff__tev *e) {
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
uint32_t hoff__sb_alloc_pool(struct hoff__sb *s, uint64_t size, int pool) {
    struct hoff__tev e;
    uint32_t id = s->t->nblocks;

    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_ALLOC;
    e.pool = (uint8_t)pool;
    e.flags = s->region && pool == 1 ? HOFF__TEV_PINNED : 0;
    e.block = id;
    e.name = UINT32_MAX;
    e.size = size ? size : 1;
    hoff__sb_append(s, &e);
    return id;
}

/* An in-step tensor: the pool follows hoff_malloc's rule (managed_min; a region's are device-pool blocks). */
uint32_t hoff__sb_alloc(struct hoff__sb *s, uint64_t size) {
    return hoff__sb_alloc_pool(s, size, !s->region && size >= s->o->managed_min ? 1 : 0);
}

/* Block id is not an activation (a parameter's gradient): its allocation is flagged kept, as the Python
 * package's hoff_keep makes the recorded step flag it (the planner counts it as device memory). */
void hoff__sb_keep(struct hoff__sb *s, uint32_t id) {
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

void hoff__sb_block_ev(struct hoff__sb *s, int kind, uint32_t id, int write) {
    struct hoff__tev e;

    if (id == UINT32_MAX)
        return;
    memset(&e, 0, sizeof e);
    e.kind = (uint8_t)kind;
    e.block = id;
    e.name = UINT32_MAX;
    e.flags = write ? HOFF__TEV_WRITE : 0;
    hoff__sb_append(s, &e);
}

void hoff__sb_free(struct hoff__sb *s, uint32_t id) {
    hoff__sb_block_ev(s, HOFF__TEV_FREE, id, 0);
}

/* A saved-tensor hook's mark (only with access marks). */
void hoff__sb_mark(struct hoff__sb *s, uint32_t id) {
    if (s->o->access_marks)
        hoff__sb_block_ev(s, HOFF__TEV_ACCESS, id, 0);
}

void hoff__sb_region(struct hoff__sb *s, int begin) {
    struct hoff__tev e;

    memset(&e, 0, sizeof e);
    e.kind = begin ? HOFF__TEV_REGION_BEGIN : HOFF__TEV_REGION_END;
    e.block = UINT32_MAX;
    e.name = UINT32_MAX;
    hoff__sb_append(s, &e);
    s->region = begin;
}

/* The previous op's time passes.  A step past HOFF__STEP_NS_MAX cannot be on
 * a step's clock (the reader would refuse the trace): an error, and the
 * clock stops there (pending is at most HOFF__STEP_NS_MAX + 1: no wrap). */
void hoff__sb_advance(struct hoff__sb *s) {
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
void hoff__sb_op_ns(struct hoff__sb *s, const char *name, uint64_t ns) {
    struct hoff__tev e;

    hoff__sb_advance(s);
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
    hoff__sb_append(s, &e);
}

/* ns for flops at o->tflops (at least 1 ns). */
uint64_t hoff__sb_flops_ns(const struct hoff__sb *s, double flops) {
    double ns = flops / (s->o->tflops * 1e3);

    if (!(ns <= (double)HOFF__STEP_NS_MAX))
        return HOFF__STEP_NS_MAX + 1; /* sb_advance refuses it */
    return ns < 1.0 ? 1 : (uint64_t)(ns + 0.5);
}

/* The bytes the next op (hoff__sb_op) reads and writes: with hbm_gbps, its time is at least their time at that rate. */
void hoff__sb_rw(struct hoff__sb *s, uint64_t bytes) {
    s->rw = bytes;
}

/* An op's time: its FLOPs at tflops, or with hbm_gbps and hoff__sb_rw's bytes, the longer of that and the bytes' time
 * (the roofline); hoff__sb_rw's bytes are used once. */
uint64_t hoff__sb_time_ns(struct hoff__sb *s, double flops) {
    uint64_t ns = hoff__sb_flops_ns(s, flops);

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

void hoff__sb_op(struct hoff__sb *s, uint32_t layer, const char *what, double flops) {
    char name[64];

    snprintf(name, sizeof name, "L%u.%s", (unsigned)layer, what);
    hoff__sb_op_ns(s, name, hoff__sb_time_ns(s, flops));
}

/* With input_reads: a read of block id by the op now running (an input no saved-tensor hook marks). */
void hoff__sb_input(struct hoff__sb *s, uint32_t id) {
    if (s->o->input_reads)
        hoff__sb_block_ev(s, HOFF__TEV_ACCESS, id, 0);
}

/* The backward of an op of layer l that saved `saved`: it reads it, makes its input's gradient of bytes (the id
 * returned) and its weight gradient of dw bytes (0: no weight) where `order` says, then frees its output's
 * gradient gout (UINT32_MAX: the residual stream's, which a later op frees) and the saved tensor. */
uint32_t hoff__sb_bwd(struct hoff__sb *s, uint32_t l, const char *name, double flops, uint32_t saved, uint64_t bytes,
                      uint64_t dw, enum hoff__sb_dw order, uint32_t gout) {
    uint32_t gin;

    hoff__sb_op(s, l, name, flops);
    hoff__sb_mark(s, saved);
    if (dw && order == HOFF__SB_DW_DEVICE_FIRST)
        hoff__sb_alloc_pool(s, dw, 0);
    gin = hoff__sb_alloc(s, bytes);
    if (dw && order == HOFF__SB_DW_AFTER)
        hoff__sb_alloc(s, dw);
    hoff__sb_free(s, gout);
    hoff__sb_free(s, saved);
    return gin;
}

/* The options both transformer models share.  0 or -EINVAL with a message. */
int hoff__synth_check(const struct hoff__trace *t, const struct hoff__synth_opts *o) {
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
