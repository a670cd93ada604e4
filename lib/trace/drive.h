/* drive.h — run a recorded trace through the public API of a context, step after step, as the framework would
 * (its keeps and op phases too), stamping every block and checking the stamps (integrity).
 * Threading: one thread drives one context. */
#ifndef HOFF_DRIVE_H
#define HOFF_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "hoff.h"
#include "trace/trace.h"

/* The compute scaling a drive accepts (hoff-plan's --compute-scale and
 * --gpu-step): a scale of 10^-6 to 10^6, a step of 1 ns to HOFF__STEP_NS_MAX. */
#define HOFF__COMPUTE_SCALE_MIN 1e-6
#define HOFF__COMPUTE_SCALE_MAX 1e6

struct hoff__drive_opts {
    int steps;            /* steps to run (the first is the warmup) */
    int verify;           /* stamp each block at alloc/write and check at read/free */
    double compute_scale; /* divide the trace's compute gaps by this (1 = as recorded) */
    uint64_t gpu_step_ns; /* if nonzero, scale the gaps so the step's compute takes this */
    /* If set, called after hoff_step_begin (ev = SIZE_MAX), after each event
     * ev of the trace, and after hoff_step_end (ev = the trace's nev), with
     * the step's index (hoff-plan timeline/export sample the context there). */
    void (*on_event)(void *arg, int step, size_t ev);
    /* If set, called after each allocation with the trace's block id and the
     * pointer hoff gave it (on_event_arg too). */
    void (*on_alloc)(void *arg, int step, uint32_t block, const void *p, size_t size);
    void *on_event_arg;
};

struct hoff__drive_step {
    uint64_t step_ns;    /* backend clock over the step */
    uint64_t compute_ns; /* modelled compute in it */
    uint64_t stall_ns;   /* stats delta */
    uint64_t bytes_d2h, bytes_h2d;
    uint64_t evictions, prefetches, faults, late_prefetches;
    uint64_t evict_calls, prefetch_calls; /* backend transfer calls (a group's counts 1) */
    uint64_t peak_resident_bytes;         /* peak of resident offload bytes in this step */
    int plan_state;                       /* enum hoff_plan_state during the step */
};

struct hoff__drive_result {
    int steps;
    struct hoff__drive_step *step; /* steps entries (malloc'd; free with hoff__drive_result_free) */
    uint64_t peak_resident_bytes;  /* over all steps */
    uint64_t peak_device_bytes;    /* sim: peak of every device byte (pools and resident) */
    uint64_t blocks_verified, bytes_verified;
    uint64_t integrity_errors; /* stamps found wrong */
    char first_error[160];     /* the first integrity error, "" if none */
};

/* Drive t through ctx.  Time between events is modelled with
 * hoff_sim_compute on sim (from t_gpu_ns where known, else t_cpu_ns, scaled);
 * on other backends it is not modelled.  An allocation flagged kept
 * (HOFF__TEV_KEPT) is followed by hoff_keep, and each op mark is preceded by
 * hoff_set_phase where its phase differs from the last one set in the step,
 * so that the step each run records keeps the trace's keeps and phases.  0 or -errno (an API call that
 * failed: the message is in hoff_last_error()). */
int hoff__trace_drive(hoff_ctx *ctx, const struct hoff__trace *t, const struct hoff__drive_opts *o,
                      struct hoff__drive_result *r);
void hoff__drive_result_free(struct hoff__drive_result *r);

/* What one step did, from the counters before it (s0) and after its
 * hoff_step_end (s1): the step's time and peak, its stall and its transfers.
 * Sets every field of out but compute_ns and plan_state, the driver's own
 * (hoff__trace_drive, hoff-demo). */
void hoff__drive_step_counters(const struct hoff_stats *s0, const struct hoff_stats *s1, struct hoff__drive_step *out);

/* 0 when o's compute_scale (if > 0; 0 means 1) or gpu_step_ns (if nonzero)
 * is in range and the step it models for t ends within HOFF__STEP_NS_MAX;
 * else -ERANGE with the reason in why.  hoff__trace_drive and
 * hoff__drive_clock refuse what it refuses (the sim's clock would saturate). */
int hoff__drive_check(const struct hoff__trace *t, const struct hoff__drive_opts *o, char *why, size_t len);

/* The clock hoff__trace_drive models for t under o's compute_scale and
 * gpu_step_ns (the other fields are ignored), with no stall: t_ns[i] (nev
 * values, non-decreasing) is when event i comes, *step_ns the compute of the
 * whole step.  0, -EINVAL or -ERANGE (hoff__drive_check). */
int hoff__drive_clock(const struct hoff__trace *t, const struct hoff__drive_opts *o, uint64_t *t_ns, uint64_t *step_ns);

#endif
