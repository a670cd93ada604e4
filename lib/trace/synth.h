/* synth.h — synthetic traces: a training-shaped transformer step, and random training-like traces of a given
 * size for benchmarks.  Threading: pure functions of their options. */
#ifndef HOFF_SYNTH_H
#define HOFF_SYNTH_H

#include <stdint.h>

#include "trace/trace.h"

/* The compute rates a model of a step takes (synth's tflops, hoff-demo's
 * --tflops), TFLOP/s: 1 GFLOP/s to 1 EFLOP/s. */
#define HOFF__SYNTH_TFLOPS_MIN 0.001
#define HOFF__SYNTH_TFLOPS_MAX 1e6
/* The memory bandwidths a roofline may take (hbm_gbps), GB/s: up to 1 PB/s. */
#define HOFF__SYNTH_HBM_GBPS_MAX 1e6

struct hoff__synth_opts {
    uint32_t layers;      /* transformer layers */
    uint64_t hidden;      /* hidden size h */
    uint64_t seq;         /* sequence length s */
    uint64_t batch;       /* batch b */
    uint32_t elem_bytes;  /* 2 for bf16 */
    int access_marks;     /* emit HOFF__TEV_ACCESS events (saved-tensor pack/unpack) */
    double tflops;        /* compute rate for the event times (e.g. 400) */
    uint64_t managed_min; /* in-step allocations of at least this go to the managed pool */
    /* hoff__synth_transformer only: */
    double hbm_gbps; /* > 0: an op takes max(FLOPs / tflops, bytes it reads and writes / hbm_gbps) (a roofline:
                        elementwise ops are memory-bound); 0: FLOPs only */
    int input_reads; /* mark a read of every forward input an op takes (not only the saved-tensor hooks' marks):
                        what a recompute needs is then in the trace (hoff-plan advise) */
    /* hoff__synth_gpt only: */
    uint32_t heads; /* attention heads (0: hidden / 64) */
    int attention;  /* HOFF__SYNTH_ATTN_* */
    uint64_t vocab; /* the LM head's vocabulary (default 8192) */
};

enum {
    HOFF__SYNTH_ATTN_AUTO = 0, /* materialised for seq <= 1024, flash above */
    HOFF__SYNTH_ATTN_MATH,     /* scores, mask and softmax materialised (PyTorch's math path) */
    HOFF__SYNTH_ATTN_FLASH     /* flash attention: output and log-sum-exp saved */
};

/* Defaults: 8 layers, h 1024, s 2048, b 1, bf16, access marks on, 400 TFLOP/s, 1 MiB; hbm_gbps 0 (FLOPs only),
 * input_reads off; heads 0 (h/64), attention auto, vocab 8192. */
void hoff__synth_defaults(struct hoff__synth_opts *o);

/* One step of a decoder-only transformer: per layer in forward, the saved
 * activations (attention input, q/k/v, scores when s is small, attention
 * output, MLP input and its 4h intermediate, ...) and short-lived temporaries,
 * op marks per layer; backward in reverse, each layer reading and freeing its
 * activations and allocating its parameter gradients (retained at step end).
 * Times from FLOPs at tflops.  The trace is finished.  0 or -errno. */
int hoff__synth_transformer(struct hoff__trace *t, const struct hoff__synth_opts *o);

/* One step of bench/models/gpt.py's decoder as eager PyTorch allocates it,
 * op by op (synth.c says which tensors, in which order, saved or freed when),
 * with the LM head, the loss in a region and foreach AdamW's temporaries;
 * layers, hidden, seq, batch, heads, elem_bytes (the dtype), attention,
 * vocab, tflops, managed_min, access_marks apply.  0 or -errno (-EINVAL
 * with a message for a bad shape). */
int hoff__synth_gpt(struct hoff__trace *t, const struct hoff__synth_opts *o);

/* A training-shaped trace of about nev events (forward allocations freed in
 * reverse, interleaved temporaries and accesses), deterministic in seed; for
 * planner benchmarks.  The trace is finished. */
int hoff__synth_events(struct hoff__trace *t, size_t nev, uint64_t seed);

#endif
