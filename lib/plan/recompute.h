/* recompute.h — recompute advice: which saved activations to recompute in backward instead of keeping or
 * offloading them, in hoff's model of a step.  The model (recompute.c): a trace's forward ops, each the span of
 * events between two op marks, with the saved activations it allocates, what it reads and its time; a choice of
 * ops rewritten into the trace of the step with those recomputes (the saved tensors freed after their last forward
 * use, made again at their first backward use by an inserted op that takes the recomputed ops' time), which every
 * planner and hoff__plan_predict then take unchanged.  The advice (advise.c): offload only, full activation
 * checkpointing and the best recompute choice combined with offload, each planned and predicted, with a lower bound
 * on the step of any such plan.  Threading: pure functions of their arguments. */
#ifndef HOFF_RECOMPUTE_H
#define HOFF_RECOMPUTE_H

#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"
#include "trace/trace.h"

/* The most forward ops one recompute runs: the op and the producers of the forward temporaries it reads. */
#define HOFF__RC_CHAIN_MAX 16

/* One forward op that allocates saved activations: a recompute candidate. */
struct hoff__rc_unit {
    uint32_t interval;        /* its index among the forward ops (the spans between op marks) */
    uint32_t mark;            /* the op mark that names it (UINT32_MAX: none) */
    uint32_t occurrence;      /* how many forward ops before it have its name */
    uint32_t begin, end;      /* its events: begin .. end - 1 (end: the op mark that ends it, or nev) */
    uint64_t cost_ns;         /* its time: what recomputing it costs */
    uint64_t bytes;           /* the bytes of its saved activations (block bytes) */
    uint32_t regen_ev;        /* where the rewrite makes them again: the first event of the backward op that first uses
                                 one of them */
    uint32_t first_blk, nblk; /* its saved activations: blk[first_blk ..] */
    uint32_t first_in, nin;   /* the blocks its ops read that they did not allocate: in[first_in ..] */
    uint32_t first_op, nop;   /* the forward ops recomputing it runs: ops[first_op ..], itself first, then the
                                 producers of the forward temporaries it reads (HOFF__RC_CHAIN_MAX at most) */
    uint32_t first_tmp, ntmp; /* those temporaries, made again for the recompute and freed after it: tmp[..] */
    uint8_t ok; /* recomputable: every block its ops read is still allocated at regen_ev or made again by them */
};

struct hoff__rc_model {
    uint32_t bwd_ev;         /* the first event of the backward (the first op of phase backward, else the op of the
                                offload peak) */
    uint32_t niv;            /* forward ops (intervals) */
    struct hoff__rc_unit *u; /* candidates, in forward order */
    size_t nu;
    uint32_t *blk, *in, *ops, *tmp; /* block ids and forward ops (see the units) */
    size_t nblk, nin, nops, ntmp;
    uint32_t *fwd_close;  /* per block: where its last forward use window closes (UINT32_MAX: not a candidate) */
    uint32_t *bwd_first;  /* per block: its first backward access (UINT32_MAX: none) */
    uint64_t *iv_ns;      /* per forward op: its time */
    uint32_t *iv_begin;   /* per forward op: its first event */
    uint32_t *iv_mark;    /* per forward op: the mark that names it (UINT32_MAX: none) */
    uint32_t *span_start; /* per event: the first event of the op span that holds it */
    int phases;           /* the trace's op marks say their phases */
    char **iv_key;        /* per forward op: its region key (malloc'd; "" none) */
    uint64_t compute_ns;  /* the step's compute */
};

/* Build the model of finished trace t on event times T (hoff__plan_times), block bytes as bytes counts them.
 * 0, -ENOMEM, -EINVAL (a trace without op marks: no ops to recompute, with a message). */
int hoff__rc_model_build(const struct hoff__trace *t, const uint64_t *T, hoff__block_bytes_fn bytes,
                         struct hoff__rc_model *m);
void hoff__rc_model_destroy(struct hoff__rc_model *m);
/* Forward op j's name ("" none) and its occurrence: how many forward ops before it have its name. */
const char *hoff__rc_op_name(const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t j);
uint32_t hoff__rc_op_occurrence(const struct hoff__trace *t, const struct hoff__rc_model *m, uint32_t j);

/* A recompute: blocks made again at regen_ev by an inserted op of cost_ns, after being freed where their last
 * forward use window closes (m->fwd_close); with the forward temporaries it needs made again there too, and freed
 * when the inserted op ends. */
struct hoff__rc_group {
    uint32_t regen_ev;
    uint64_t cost_ns;
    const uint32_t *blk;
    uint32_t nblk;
    const uint32_t *tmp; /* forward temporaries the recompute makes again and frees once done (may be NULL) */
    uint32_t ntmp;
};

/* out = t with the groups' recomputes (initialised here, finished; destroy it on success and on failure): events
 * from regen_ev on are later by the groups' costs so far; the inserted op is named "hoff.recompute", of phase
 * backward when t has phases.  0, -ENOMEM, -EINVAL (a group that does not fit the model, with a message). */
int hoff__rc_rewrite(const struct hoff__trace *t, const struct hoff__rc_model *m, const struct hoff__rc_group *g,
                     size_t ng, struct hoff__trace *out);

/* --- the advice (advise.c) ------------------------------------------------- */

/* One alternative, planned with timed (or the planner given) under the budget and predicted. */
struct hoff__rc_alt {
    int have;              /* modelled (full checkpointing needs regions) */
    int feasible;          /* the plan holds the budget (the rewritten step's floor is under it) */
    uint64_t step_ns;      /* compute + recompute + the plan's predicted stall */
    uint64_t stall_ns;     /* the plan's predicted stall */
    uint64_t recompute_ns; /* the recomputes' time */
    uint64_t peak_bytes;   /* the rewritten step's offload peak without offload */
    uint64_t floor_bytes;  /* its working-set floor */
    uint64_t bytes_d2h;    /* what the plan moves to the host */
    uint32_t units;        /* recomputed forward ops (combined), checkpoint regions (full) */
};

struct hoff__rc_advice {
    uint64_t peak_bytes, budget_bytes, compute_ns;
    uint64_t bound_ns; /* no plan of the model (keep, offload or recompute each forward op) beats it */
    struct hoff__rc_alt offload_only, full, combined;
    const char *chosen; /* "offload_only", "full_checkpoint" or "combined" (the step combined has) */
    uint32_t *units;    /* the recomputed units of combined (indices into the model's u[]), forward order */
    size_t nunits;
    uint32_t evaluated; /* recompute choices planned */
};

/* Advise on t under po (its budget, link, block bytes) with planner pl (NULL: timed): offload only, full
 * checkpointing of the model's regions (when there are at least two), and recomputing the cheapest forward ops per
 * byte saved, prefix by prefix, with offload; combined is the best of all of them (so never worse than either).
 * 0, -ENOMEM, -EINVAL (a message).  hoff__rc_advice_destroy frees it. */
int hoff__rc_advise(const struct hoff__trace *t, const struct hoff__rc_model *m, const struct hoff__plan_opts *po,
                    const struct hoff__planner *pl, struct hoff__rc_advice *a);
void hoff__rc_advice_destroy(struct hoff__rc_advice *a);
/* out = t rewritten with the recomputes of a's chosen alternative (none for offload only: a copy), as
 * hoff__rc_rewrite; what hoff-plan advise -o writes for a replay of the advice.  0, -ENOMEM, -EINVAL. */
int hoff__rc_advice_rewrite(const struct hoff__trace *t, const struct hoff__rc_model *m,
                            const struct hoff__rc_advice *a, struct hoff__trace *out);

#endif
