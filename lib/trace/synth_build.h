/* synth_build.h — the builder the synthetic steps share (synth.c's transformer and random traces, synth_gpt.c's
 * GPT step): a step's trace appended event by event on a clock that ops advance, with the rules of the pools
 * (managed_min, regions), the access marks, kept gradients and the op times (FLOPs at tflops, the roofline).
 * Threading: a builder is owned by one thread. */
#ifndef HOFF_SYNTH_BUILD_H
#define HOFF_SYNTH_BUILD_H

#include <stdint.h>

#include "trace/synth.h"
#include "trace/trace.h"

/* Non-flash attention (softmax probabilities saved) for short sequences. */
#define HOFF__SYNTH_FLASH_FROM_SEQ 1024

struct hoff__sb {
    struct hoff__trace *t;
    const struct hoff__synth_opts *o;
    uint64_t now, pending; /* start of the current op, its duration */
    uint64_t rw;           /* bytes the next op reads and writes (hoff__sb_rw), for the roofline; 0: not said */
    int region;            /* inside a region */
    int rc;
};

/* Where a model's backward puts a weight gradient (retained: the optimizer reads it after the step's
 * backward): before the input's gradient in the device pool (the coarse transformer), or after it in the pool
 * managed_min picks, as PyTorch's eager autograd does (the GPT step). */
enum hoff__sb_dw { HOFF__SB_DW_AFTER = 0, HOFF__SB_DW_DEVICE_FIRST = 1 };

/* Start building the step's trace t under options o (t's backend "synth" unless it names one). */
void hoff__sb_init(struct hoff__sb *s, struct hoff__trace *t, const struct hoff__synth_opts *o);
/* The step's time (the clock where the builder stands) into t, which is finished.  0 or -errno (the builder's
 * first error, or hoff__trace_finish's). */
int hoff__sb_finish(struct hoff__sb *s);
/* Append e at the builder's clock (the first error sticks). */
void hoff__sb_append(struct hoff__sb *s, struct hoff__tev *e);
/* Allocate a block of size bytes in pool; returns its id. */
uint32_t hoff__sb_alloc_pool(struct hoff__sb *s, uint64_t size, int pool);
/* An in-step tensor: the pool follows hoff_malloc's rule (managed_min; a region's are device-pool blocks). */
uint32_t hoff__sb_alloc(struct hoff__sb *s, uint64_t size);
/* Block id is not an activation (a parameter's gradient): its allocation is flagged kept, as the Python
 * package's hoff_keep makes the recorded step flag it (the planner counts it as device memory). */
void hoff__sb_keep(struct hoff__sb *s, uint32_t id);
/* A free or access event of block id (UINT32_MAX: none); write for an access that writes. */
void hoff__sb_block_ev(struct hoff__sb *s, int kind, uint32_t id, int write);
/* Free block id. */
void hoff__sb_free(struct hoff__sb *s, uint32_t id);
/* A saved-tensor hook's mark (only with access marks). */
void hoff__sb_mark(struct hoff__sb *s, uint32_t id);
/* Begin (1) or end (0) a region: its allocations are pinned device-pool blocks. */
void hoff__sb_region(struct hoff__sb *s, int begin);
/* The previous op's time passes.  A step past HOFF__STEP_NS_MAX cannot be on
 * a step's clock (the reader would refuse the trace): an error, and the
 * clock stops there (pending is at most HOFF__STEP_NS_MAX + 1: no wrap). */
void hoff__sb_advance(struct hoff__sb *s);
/* Start an op that runs for ns: the previous op's time passes first. */
void hoff__sb_op_ns(struct hoff__sb *s, const char *name, uint64_t ns);
/* ns for flops at o->tflops (at least 1 ns). */
uint64_t hoff__sb_flops_ns(const struct hoff__sb *s, double flops);
/* The bytes the next op (hoff__sb_op) reads and writes: with hbm_gbps, its time is at least their time at that rate. */
void hoff__sb_rw(struct hoff__sb *s, uint64_t bytes);
/* An op's time: its FLOPs at tflops, or with hbm_gbps and hoff__sb_rw's bytes, the longer of that and the bytes' time
 * (the roofline); hoff__sb_rw's bytes are used once. */
uint64_t hoff__sb_time_ns(struct hoff__sb *s, double flops);
/* Start op "L<layer>.<what>" of flops (its time: hoff__sb_time_ns). */
void hoff__sb_op(struct hoff__sb *s, uint32_t layer, const char *what, double flops);
/* With input_reads: a read of block id by the op now running (an input no saved-tensor hook marks). */
void hoff__sb_input(struct hoff__sb *s, uint32_t id);
/* The backward of an op of layer l that saved `saved`: it reads it, makes its input's gradient of bytes (the id
 * returned) and its weight gradient of dw bytes (0: no weight) where `order` says, then frees its output's
 * gradient gout (UINT32_MAX: the residual stream's, which a later op frees) and the saved tensor. */
uint32_t hoff__sb_bwd(struct hoff__sb *s, uint32_t l, const char *name, double flops, uint32_t saved, uint64_t bytes,
                      uint64_t dw, enum hoff__sb_dw order, uint32_t gout);
/* The options both transformer models share.  0 or -EINVAL with a message. */
int hoff__synth_check(const struct hoff__trace *t, const struct hoff__synth_opts *o);

#endif
