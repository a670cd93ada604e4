/* test_pipeline.c — end to end on sim: synthetic transformer traces driven through the public API for a warmup
 * and two replay steps under budgets of 50%, 25% and 10% of their offload peak; the budget holds, every stamp
 * survives, replay fires exactly the plan.  Single-threaded (the library's issuing thread runs behind the API). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoff.h"
#include "testutil.h"
#include "trace/drive.h"
#include "trace/synth.h"
#include "mem/pool.h"
#include "trace/trace.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static hoff_ctx *open_ctx_planner(uint64_t budget, uint64_t host_cap, const char *planner) {
    struct hoff_config cfg;
    hoff_ctx *ctx = NULL;
    char err[256];

    cfg = hoff_test_replay_config(16 * GiB, budget);
    cfg.sim_h2d_gbps = 50;
    cfg.sim_d2h_gbps = 50;
    cfg.sim_protect = HOFF_SIM_POISON; /* a stray touch of a non-resident page crashes */
    if (host_cap) {
        cfg.host_cap_bytes = host_cap;
        CU_ASSERT_EQUAL(hoff_config_set(&cfg, "spill_dir", hoff_test_spill_dir("pipeline"), err, sizeof err), 0);
    }
    if (planner)
        CU_ASSERT_EQUAL(hoff_config_set(&cfg, "planner", planner, err, sizeof err), 0);
    ctx = hoff_test_open(&cfg);
    return ctx;
}

static hoff_ctx *open_ctx(uint64_t budget, uint64_t host_cap) {
    return open_ctx_planner(budget, host_cap, NULL);
}

static int make_transformer(struct hoff__trace *t, uint32_t layers, uint64_t hidden, uint64_t seq, uint64_t batch,
                            int access) {
    struct hoff__synth_opts o;

    hoff__synth_defaults(&o);
    o.layers = layers;
    o.hidden = hidden;
    o.seq = seq;
    o.batch = batch;
    o.access_marks = access;
    hoff__trace_init(t);
    return hoff__synth_transformer(t, &o);
}

/* Drive t through ctx for 3 steps (a warmup and two replays) on the trace's
 * own times, every stamp checked.  0 or the drive's -errno. */
static int drive3(hoff_ctx *ctx, const struct hoff__trace *t, struct hoff__drive_result *r) {
    struct hoff__drive_opts o;

    memset(&o, 0, sizeof o);
    o.steps = 3;
    o.verify = 1;
    o.compute_scale = 1;
    return hoff__trace_drive(ctx, t, &o, r);
}

/* The planner's prediction (predict.c) is what a replay step costs: it
 * follows the runtime's and the sim's rules on the recorded times, page-ins
 * and refused prefetches included: exact to within a hair (the sim rounds
 * each copy up to the ns; a recorded time can lag the clock by the cost of
 * reading it). */
static void check_predicted(const char *what, uint64_t pred, uint64_t meas) {
    uint64_t diff = meas > pred ? meas - pred : pred - meas;

    if (diff > 20000 + meas / 100)
        fprintf(stderr, "%s: predicted stall %" PRIu64 " ns, replay %" PRIu64 " ns\n", what, pred, meas);
    CU_ASSERT(diff <= 20000 + meas / 100);
}

/* Drive t for 3 steps (warmup + 2 replays) at pct% of its offload peak and
 * check what a replay promises.  aligned: every offload candidate is a
 * multiple of 2 MiB (the managed grain), so that the plan's byte counts are
 * the runtime's and a feasible plan leaves nothing to demand paging.
 * cap_pct: a host cap of that % of the offload peak, with an NVMe tier (0:
 * none); the host tier then stays under it, and the NVMe tier's waits are
 * part of the stall (demand paging is allowed: a spill the replay runs
 * ahead of is left to the runtime). */
static void run_budget_cap(const struct hoff__trace *t, const char *what, int pct, int aligned, int cap_pct) {
    struct hoff__drive_result r;
    struct hoff_stats st;
    uint64_t peak, budget, d2h = 0;
    hoff_ctx *ctx;
    int rc, k;

    peak = hoff__trace_offload_peak(t, hoff__pool_block_bytes, NULL);
    CU_ASSERT_FATAL(peak > 0);
    budget = peak * (uint64_t)pct / 100;
    ctx = open_ctx(budget, peak * (uint64_t)cap_pct / 100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    rc = drive3(ctx, t, &r);
    if (rc)
        fprintf(stderr, "%s at %d%%: drive failed: %s\n", what, pct, hoff_last_error());
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(r.steps, 3);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);

    /* Every stamp intact. */
    if (r.integrity_errors)
        fprintf(stderr, "%s at %d%%: %" PRIu64 " wrong stamps; first: %s\n", what, pct, r.integrity_errors,
                r.first_error);
    CU_ASSERT_EQUAL(r.integrity_errors, 0);
    CU_ASSERT(r.blocks_verified > 0);

    /* The pipeline: one plan, replayed twice without divergence. */
    CU_ASSERT_EQUAL(r.step[0].plan_state, HOFF_PLAN_WARMUP);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.window_violations, 0);
    if (!t->has_access_events) {
        /* Without access marks nothing says when a block is used: every
         * block stays in use until its free, so nothing moves, and a budget
         * below the peak is declared infeasible (the floor is the peak). */
        CU_ASSERT_EQUAL(st.plan_actions, 0);
        CU_ASSERT_EQUAL(st.plan_feasible, budget >= peak);
        CU_ASSERT_EQUAL(st.plan_floor_bytes, peak);
        CU_ASSERT_EQUAL(st.bytes_evicted, 0);
        CU_ASSERT_EQUAL(st.discards, 0);
        hoff__drive_result_free(&r);
        CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
        return;
    }
    CU_ASSERT(st.plan_actions > 0);
    if (budget < st.plan_floor_bytes) {
        /* Below the working-set floor: infeasible, planned for the floor. */
        CU_ASSERT_EQUAL(st.plan_feasible, 0);
        budget = st.plan_floor_bytes;
    } else if (aligned)
        CU_ASSERT_EQUAL(st.plan_feasible, 1);
    for (k = 1; k < r.steps; k++) {
        const struct hoff__drive_step *s = &r.step[k];

        CU_ASSERT_EQUAL(s->plan_state, HOFF_PLAN_REPLAY);
        if (s->peak_resident_bytes > budget)
            fprintf(stderr, "%s at %d%%: step %d peak %" PRIu64 " > budget %" PRIu64 "\n", what, pct, k,
                    s->peak_resident_bytes, budget);
        CU_ASSERT(s->peak_resident_bytes <= budget);
        if (aligned) {
            if (s->faults)
                fprintf(stderr, "%s at %d%%: step %d: %" PRIu64 " faults\n", what, pct, k, s->faults);
            CU_ASSERT_EQUAL(s->faults, 0);
        }
        d2h += s->bytes_d2h;
    }
    CU_ASSERT(d2h > 0); /* below the peak something has to move */
    /* Replay fires exactly the plan: a step fires at most plan_actions (the
     * cursor only moves forward), so 2 replay steps firing 2 * plan_actions
     * with nothing skipped means each fired all of them. */
    if (st.actions_fired != 2 * st.plan_actions || st.actions_skipped != 0)
        fprintf(stderr,
                "%s at %d%%: %" PRIu64 " actions planned, %" PRIu64 " fired, %" PRIu64 " skipped over 2 replays\n",
                what, pct, st.plan_actions, st.actions_fired, st.actions_skipped);
    CU_ASSERT_EQUAL(st.actions_fired, 2 * st.plan_actions);
    CU_ASSERT_EQUAL(st.actions_skipped, 0);
    CU_ASSERT_EQUAL(st.live_blocks, 0);
    if (cap_pct) { /* the host tier stayed under its cap by spilling */
        uint64_t cap = peak * (uint64_t)cap_pct / 100;

        if (st.peak_host_bytes > cap)
            fprintf(stderr, "%s at %d%%: host peak %" PRIu64 " > cap %" PRIu64 "\n", what, pct, st.peak_host_bytes,
                    cap);
        CU_ASSERT(st.peak_host_bytes <= cap);
        CU_ASSERT(st.bytes_spilled > 0);
        CU_ASSERT_EQUAL(st.spill_failures, 0);
    }
    {
        char at[160];

        snprintf(at, sizeof at, "%s at %d%%", what, pct);
        check_predicted(at, st.plan_stall_ns, r.step[2].stall_ns);
    }
    hoff__drive_result_free(&r);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

static void run_budget(const struct hoff__trace *t, const char *what, int pct, int aligned) {
    run_budget_cap(t, what, pct, aligned, 0);
}

static void run_transformer(uint32_t layers, uint64_t hidden, uint64_t seq, uint64_t batch, int access, int aligned) {
    static const int pcts[] = {50, 25, 10};
    struct hoff__trace t;
    char what[96];
    size_t i;

    snprintf(what, sizeof what, "transformer L%u h%" PRIu64 " s%" PRIu64 " b%" PRIu64 "%s", (unsigned)layers, hidden,
             seq, batch, access ? "" : " (no access marks)");
    CU_ASSERT_EQUAL_FATAL(make_transformer(&t, layers, hidden, seq, batch, access), 0);
    for (i = 0; i < sizeof pcts / sizeof pcts[0]; i++)
        run_budget(&t, what, pcts[i], aligned);
    hoff__trace_destroy(&t);
}

/* The host cap and the NVMe tier: a cap of 20% and of 40% of the offload
 * peak under a budget of 25% of it (about three quarters of the peak must
 * be off the device), so part of what is evicted must go on to NVMe. */
static void test_host_cap(void) {
    static const int caps[] = {20, 40};
    struct hoff__trace t;
    size_t i;

    CU_ASSERT_EQUAL_FATAL(make_transformer(&t, 8, 256, 4096, 1, 1), 0);
    for (i = 0; i < sizeof caps / sizeof caps[0]; i++)
        run_budget_cap(
            &t, caps[i] == 20 ? "transformer L8 h256 s4096, host cap 20%" : "transformer L8 h256 s4096, host cap 40%",
            25, 1, caps[i]);
    hoff__trace_destroy(&t);
}

/* A budget below what one op's blocks need (the plan is infeasible): the
 * runtime keeps what it can with evictions on demand, refuses prefetches
 * that find no room and pages those blocks in at their use (over the
 * budget, counted).  Every byte survives, and the prediction is still the
 * replay's cost. */
static void test_infeasible_predicted(void) {
    struct hoff__drive_result r;
    struct hoff_stats st;
    struct hoff__trace t;
    uint64_t peak;
    hoff_ctx *ctx;

    CU_ASSERT_EQUAL_FATAL(make_transformer(&t, 6, 256, 256, 16, 0), 0);
    peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL);
    ctx = open_ctx(peak * 3 / 100, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL_FATAL(drive3(ctx, &t, &r), 0);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.plan_feasible, 0);
    CU_ASSERT_EQUAL(r.integrity_errors, 0);
    CU_ASSERT(r.blocks_verified > 0);
    CU_ASSERT(r.step[2].faults > 0 || st.budget_overruns > 0);
    check_predicted("infeasible budget", st.plan_stall_ns, r.step[2].stall_ns);
    hoff__drive_result_free(&r);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
    hoff__trace_destroy(&t);
}

/* Random training-shaped steps (hoff__synth_events: regions, blocks with
 * and without access marks, odd sizes) at 50/25/10% of their peak, without
 * and with a host cap of 30% over an NVMe tier, with both planners: every
 * byte survives, the host cap holds, the prediction is the replay's cost,
 * and timed's replay stalls no more than greedy's. */
static void test_random_traces(void) {
    static const int pcts[] = {50, 25, 10}, caps[] = {0, 30};
    static const char *const planners[] = {"greedy", "timed"};
    uint64_t seed;

    for (seed = 1; seed <= 2; seed++) {
        struct hoff__trace t;
        uint64_t peak;
        size_t b, c, k;

        hoff__trace_init(&t);
        CU_ASSERT_EQUAL_FATAL(hoff__synth_events(&t, 300 + 150 * (size_t)seed, seed), 0);
        peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL);
        for (b = 0; b < sizeof pcts / sizeof pcts[0]; b++)
            for (c = 0; c < sizeof caps / sizeof caps[0]; c++) {
                uint64_t stall[2] = {0, 0}, cap = peak * (uint64_t)caps[c] / 100;

                for (k = 0; k < 2; k++) {
                    struct hoff__drive_result r;
                    struct hoff_stats st;
                    char what[128];
                    hoff_ctx *ctx = open_ctx_planner(peak * (uint64_t)pcts[b] / 100, cap, planners[k]);

                    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
                    CU_ASSERT_EQUAL_FATAL(drive3(ctx, &t, &r), 0);
                    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
                    CU_ASSERT_EQUAL(r.integrity_errors, 0);
                    CU_ASSERT_EQUAL(st.divergent_steps, 0);
                    if (cap)
                        CU_ASSERT(st.peak_host_bytes <= cap);
                    if (st.plan_feasible)
                        CU_ASSERT(r.step[2].peak_resident_bytes <= peak * (uint64_t)pcts[b] / 100);
                    snprintf(what, sizeof what, "random seed %" PRIu64 " at %d%%, cap %d%%, %s", seed, pcts[b], caps[c],
                             planners[k]);
                    check_predicted(what, st.plan_stall_ns, r.step[2].stall_ns);
                    stall[k] = r.step[2].stall_ns;
                    hoff__drive_result_free(&r);
                    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
                }
                if (stall[1] > stall[0] + 20000 + stall[0] / 100)
                    fprintf(stderr,
                            "random seed %" PRIu64 " at %d%%, cap %d%%: timed %" PRIu64 " ns > greedy %" PRIu64 " ns\n",
                            seed, pcts[b], caps[c], stall[1], stall[0]);
                CU_ASSERT(stall[1] <= stall[0] + 20000 + stall[0] / 100);
            }
        hoff__trace_destroy(&t);
    }
}

/* Flash attention (s > 1024): 8 layers, b*s*h*2 = 2 MiB. */
static void test_flash_access(void) {
    run_transformer(8, 256, 4096, 1, 1, 1);
}

static void test_flash_no_access(void) {
    run_transformer(8, 256, 4096, 1, 0, 1);
}

/* Saved attention probabilities (s <= 1024), 6 layers, short sequences. */
static void test_probs_access(void) {
    run_transformer(6, 256, 256, 16, 1, 1);
}

static void test_probs_no_access(void) {
    run_transformer(6, 256, 256, 16, 0, 1);
}

/* Activations of 1 MiB, under the 2 MiB managed grain: each takes a 2 MiB
 * block, so the runtime holds more bytes than the trace says; the budget,
 * integrity and the plan still hold (demand paging is allowed). */
static void test_small_blocks(void) {
    struct hoff__trace t;

    CU_ASSERT_EQUAL_FATAL(make_transformer(&t, 6, 512, 1024, 1, 1), 0);
    run_budget(&t, "transformer L6 h512 s1024 (1 MiB activations)", 25, 0);
    hoff__trace_destroy(&t);
}

/* --- the synthetic traces themselves --------------------------------------- */

static void test_transformer_shape(void) {
    struct hoff__trace t, u;
    uint64_t h = 256, e = 2, grads = 0, bsh = 2 * MiB;
    uint32_t layers = 3, i, retained = 0, probs = 0;
    size_t acc = 0;

    CU_ASSERT_EQUAL_FATAL(make_transformer(&t, layers, h, 4096, 1, 1), 0);
    CU_ASSERT(t.has_access_events);
    for (i = 0; i < t.nblocks; i++) {
        const struct hoff__tblock *b = &t.blocks[i];

        if (b->retained) {
            retained++;
            grads += b->size;
            CU_ASSERT_EQUAL(b->pool, 0); /* gradients: the device pool */
        }
        if (b->pool == 1) {
            CU_ASSERT(b->size >= MiB);
        } else {
            CU_ASSERT(b->size < MiB || b->retained);
        }
    }
    /* 4 weight gradients and 1 of biases and norms per layer: 12h^2 + 13h elements. */
    CU_ASSERT_EQUAL(retained, 5 * layers);
    CU_ASSERT_EQUAL(grads, layers * (12 * h * h + 13 * h) * e);
    /* Forward saves 16 b*s*h units per layer (x, ln1 out, qkv 3, ctx, ln2 in and
     * out, up 4, act 4); the peak is at the end of forward, plus the next
     * layer's input and the loss gradient. */
    CU_ASSERT(hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL) >= layers * 16 * bsh);
    CU_ASSERT(hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL) <= layers * 16 * bsh + 8 * bsh);
    CU_ASSERT(t.step_ns > 0);
    CU_ASSERT_EQUAL(t.step_ns, t.step_gpu_ns);
    for (i = 0; i < t.nev; i++) {
        acc += t.ev[i].kind == HOFF__TEV_ACCESS;
        CU_ASSERT(t.ev[i].t_gpu_ns == t.ev[i].t_cpu_ns);
        CU_ASSERT(i == 0 || t.ev[i].t_cpu_ns >= t.ev[i - 1].t_cpu_ns);
    }
    CU_ASSERT(acc > 0);

    /* Without access marks: the same allocations, no access events. */
    CU_ASSERT_EQUAL_FATAL(make_transformer(&u, layers, h, 4096, 1, 0), 0);
    CU_ASSERT_FALSE(u.has_access_events);
    CU_ASSERT_EQUAL(u.nblocks, t.nblocks);
    CU_ASSERT_EQUAL(u.nev + acc, t.nev);
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&u, hoff__pool_block_bytes, NULL),
                    hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL));
    hoff__trace_destroy(&u);

    /* Short sequences save the s x s probabilities. */
    CU_ASSERT_EQUAL_FATAL(make_transformer(&u, 1, 256, 512, 8, 1), 0);
    for (i = 0; i < u.nblocks; i++)
        probs += u.blocks[i].size == 8ull * 4 * 512 * 512 * 2; /* b * heads * s^2 * 2 */
    CU_ASSERT_EQUAL(probs, 1);
    hoff__trace_destroy(&u);
    hoff__trace_destroy(&t);
}

static void test_transformer_bad_options(void) {
    struct hoff__synth_opts o;
    struct hoff__trace t;

    hoff__synth_defaults(&o);
    CU_ASSERT_EQUAL(o.layers, 8);
    CU_ASSERT_EQUAL(o.hidden, 1024);
    CU_ASSERT_EQUAL(o.elem_bytes, 2);
    o.layers = 0;
    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(hoff__synth_transformer(&t, &o), -EINVAL);
    hoff__trace_destroy(&t);
}

static int same_trace(const struct hoff__trace *a, const struct hoff__trace *b) {
    size_t i;

    if (a->nev != b->nev || a->nblocks != b->nblocks)
        return 0;
    for (i = 0; i < a->nev; i++)
        if (a->ev[i].kind != b->ev[i].kind || a->ev[i].block != b->ev[i].block || a->ev[i].size != b->ev[i].size ||
            a->ev[i].pool != b->ev[i].pool || a->ev[i].t_cpu_ns != b->ev[i].t_cpu_ns)
            return 0;
    return 1;
}

static void test_synth_events(void) {
    struct hoff__trace a, b, c;
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    struct hoff_stats st;
    hoff_ctx *ctx;
    size_t i, regions = 0;

    hoff__trace_init(&a);
    hoff__trace_init(&b);
    hoff__trace_init(&c);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_events(&a, 600, 7), 0);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_events(&b, 600, 7), 0);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_events(&c, 600, 8), 0);
    CU_ASSERT(a.nev >= 600 && a.nev < 700);
    CU_ASSERT(same_trace(&a, &b));
    CU_ASSERT_FALSE(same_trace(&a, &c));
    CU_ASSERT(a.has_access_events);
    for (i = 0; i < a.nev; i++)
        regions += a.ev[i].kind == HOFF__TEV_REGION_BEGIN;
    CU_ASSERT(regions > 0);

    /* It replays like a real step: integrity, no divergence, the plan fired. */
    ctx = open_ctx(hoff__trace_offload_peak(&a, hoff__pool_block_bytes, NULL) / 2, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    memset(&o, 0, sizeof o);
    o.steps = 3;
    o.verify = 1;
    o.gpu_step_ns = 20000000; /* 20 ms of compute per step */
    CU_ASSERT_EQUAL_FATAL(hoff__trace_drive(ctx, &a, &o, &r), 0);
    if (r.integrity_errors)
        fprintf(stderr, "synth_events: %s\n", r.first_error);
    CU_ASSERT_EQUAL(r.integrity_errors, 0);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.actions_fired, 2 * st.plan_actions);
    CU_ASSERT_EQUAL(st.actions_skipped, 0);
    CU_ASSERT_EQUAL(r.step[2].plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(r.step[2].compute_ns, 20000000);
    hoff__drive_result_free(&r);
    hoff_shutdown(ctx);
    hoff__trace_destroy(&a);
    hoff__trace_destroy(&b);
    hoff__trace_destroy(&c);
}

/* Without a budget nothing moves, and a step lasts exactly its compute. */
static void test_drive_no_budget(void) {
    struct hoff__trace t;
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    hoff_ctx *ctx;
    int k;

    CU_ASSERT_EQUAL_FATAL(make_transformer(&t, 2, 256, 4096, 1, 1), 0);
    ctx = open_ctx(0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    memset(&o, 0, sizeof o);
    o.steps = 2;
    o.verify = 1;
    o.compute_scale = 2; /* twice as fast as the trace */
    CU_ASSERT_EQUAL_FATAL(hoff__trace_drive(ctx, &t, &o, &r), 0);
    CU_ASSERT_EQUAL(r.integrity_errors, 0);
    for (k = 0; k < r.steps; k++) {
        uint64_t want = (t.step_gpu_ns + 1) / 2;

        CU_ASSERT(r.step[k].compute_ns + 1 >= want && r.step[k].compute_ns <= want + 1);
        CU_ASSERT_EQUAL(r.step[k].step_ns, r.step[k].compute_ns);
        CU_ASSERT_EQUAL(r.step[k].bytes_d2h, 0);
        CU_ASSERT_EQUAL(r.step[k].stall_ns, 0);
        CU_ASSERT_EQUAL(r.step[k].peak_resident_bytes, hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL));
    }
    CU_ASSERT(r.peak_device_bytes >= hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL));
    hoff__drive_result_free(&r);
    hoff_shutdown(ctx);
    hoff__trace_destroy(&t);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"transformer_shape", test_transformer_shape},
        {"transformer_bad_options", test_transformer_bad_options},
        {"synth_events", test_synth_events},
        {"drive_no_budget", test_drive_no_budget},
        {"flash_access", test_flash_access},
        {"flash_no_access", test_flash_no_access},
        {"probs_access", test_probs_access},
        {"probs_no_access", test_probs_no_access},
        {"small_blocks", test_small_blocks},
        {"host_cap", test_host_cap},
        {"infeasible_predicted", test_infeasible_predicted},
        {"random_traces", test_random_traces},
        {NULL, NULL},
    };
    return hoff_test_run("pipeline", tests);
}
