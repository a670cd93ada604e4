/* test_replay.c — the warmup and replay executors on sim: online eviction order in warmup, a plan at the
 * first step's end, replay firing exactly the plan, fallback on a changed step, re-planning.  Single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoff.h"
#include "testutil.h"
#include "trace/trace.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)
#define LAYERS 8

static hoff_ctx *ctx;

static void open_ctx(uint64_t budget, uint32_t replan_after) {
    struct hoff_config cfg;

    cfg = hoff_test_replay_config(1ull << 30, budget);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    cfg.replan_after = replan_after;
    ctx = hoff_test_open(&cfg);
}

static int bad_stamps;

/* A training step: forward allocates and writes each layer's activation,
 * backward reads, checks and frees them in reverse.  `odd` changes one
 * allocation's size (a step with a different shape). */
static void step(size_t act, int odd) {
    void *a[LAYERS];
    int i;

    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    for (i = 0; i < LAYERS; i++) {
        size_t n = act + (odd && i == 3 ? MiB : 0);
        hoff_mark_op(ctx, "forward");
        a[i] = hoff_malloc(ctx, n, S);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a[i]);
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 1, S), 0);
        hoff_test_stamp(a[i], n, 512, (uint64_t)i << 32); /* a stamp a page */
        hoff_sim_compute(ctx, S, 200000);
    }
    for (i = LAYERS - 1; i >= 0; i--) {
        size_t n = act + (odd && i == 3 ? MiB : 0);
        hoff_mark_op(ctx, "backward");
        hoff_sim_compute(ctx, S, 400000);
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 0, S), 0);
        if (!hoff_test_stamped(a[i], n, 512, (uint64_t)i << 32))
            bad_stamps++;
        CU_ASSERT_EQUAL(hoff_free(ctx, a[i], S), 0);
    }
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
}

static void test_warmup_evicts_earliest_allocated(void) {
    void *a[4];
    int i;

    open_ctx(6 * MiB, 2);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_state, HOFF_PLAN_NONE);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_state, HOFF_PLAN_WARMUP);
    for (i = 0; i < 3; i++) {
        a[i] = hoff_malloc(ctx, 2 * MiB, S);
        hoff_access(ctx, a[i], 1, S);
        hoff_mark_op(ctx, NULL); /* its writer is enqueued: its use window closes */
    }
    hoff_access(ctx, a[0], 0, S); /* most recently used, but the earliest allocated */
    hoff_mark_op(ctx, NULL);
    a[3] = hoff_malloc(ctx, 2 * MiB, S);
    /* the allocation waited for the copy to land: the budget is hard */
    CU_ASSERT_EQUAL(hoff_residency(ctx, a[0]), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a[1]), HOFF_RES_DEVICE);
    CU_ASSERT(hoff_test_stats(ctx).peak_resident_bytes <= 6 * MiB);
    for (i = 0; i < 4; i++)
        hoff_free(ctx, a[i], S);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_shutdown(ctx);
}

static void test_plan_then_replay(void) {
    struct hoff_stats st, before;
    int k;

    bad_stamps = 0;
    open_ctx(6 * MiB, 2); /* 8 layers x 2 MiB, a budget of 3 */
    step(2 * MiB, 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT(st.plan_actions > 0);
    CU_ASSERT_EQUAL(st.plan_feasible, 1);
    CU_ASSERT(st.plan_peak_bytes <= 6 * MiB);
    for (k = 0; k < 3; k++) {
        before = hoff_test_stats(ctx);
        step(2 * MiB, 0);
        st = hoff_test_stats(ctx);
        CU_ASSERT_EQUAL(st.actions_fired - before.actions_fired, st.plan_actions);
        CU_ASSERT_EQUAL(st.actions_skipped, 0);
        CU_ASSERT_EQUAL(st.divergent_steps, 0);
        CU_ASSERT(st.step_peak_resident_bytes <= 6 * MiB);
        CU_ASSERT(st.evictions > before.evictions);
    }
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.budget_overruns, 0);
    CU_ASSERT(st.peak_resident_bytes <= 6 * MiB);
    CU_ASSERT_EQUAL(bad_stamps, 0);
    hoff_shutdown(ctx);
}

static void test_changed_step_falls_back(void) {
    struct hoff_stats st;

    bad_stamps = 0;
    open_ctx(6 * MiB, 0); /* never re-plan */
    step(2 * MiB, 0);
    step(2 * MiB, 1); /* layer 3 is bigger: the plan no longer fits */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.divergent_steps, 1);
    CU_ASSERT(st.actions_skipped > 0);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(bad_stamps, 0);               /* nothing lost */
    CU_ASSERT(st.peak_resident_bytes <= 6 * MiB); /* the budget still holds, online */
    step(2 * MiB, 0);                             /* back to the recorded shape: replays again */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).divergent_steps, 1);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(bad_stamps, 0);
    hoff_shutdown(ctx);
}

static void test_replan_after_divergence(void) {
    struct hoff_stats st, before;

    bad_stamps = 0;
    open_ctx(6 * MiB, 2);
    step(2 * MiB, 0);
    step(2 * MiB, 1);
    step(2 * MiB, 1); /* two in a row: the next step records */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.divergent_steps, 2);
    CU_ASSERT_EQUAL(st.replans, 0);
    step(2 * MiB, 1); /* recorded again */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).replans, 1);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plans, 2);
    before = hoff_test_stats(ctx);
    step(2 * MiB, 1); /* the new shape replays */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.replans, 1);
    CU_ASSERT_EQUAL(st.divergent_steps - before.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.actions_fired - before.actions_fired, st.plan_actions);
    CU_ASSERT_EQUAL(bad_stamps, 0);
    hoff_shutdown(ctx);
}

static void test_trace_save(void) {
    char path[] = "/tmp/hoff-test-trace-XXXXXX";
    struct hoff__trace t;
    char err[256];
    int fd;

    open_ctx(6 * MiB, 2);
    CU_ASSERT_EQUAL(hoff_trace_save(ctx, "/tmp/never"), -ENOENT);
    step(2 * MiB, 0);
    fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    CU_ASSERT_EQUAL(hoff_trace_save(ctx, path), 0);
    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(hoff__trace_load(&t, path, err, sizeof err), 0);
    /* 16 op marks, 8 allocs, 16 accesses, 8 frees */
    CU_ASSERT_EQUAL(t.nev, 48);
    CU_ASSERT_EQUAL(t.nblocks, LAYERS);
    CU_ASSERT_EQUAL(t.budget_bytes, 6 * MiB);
    CU_ASSERT(t.has_access_events);
    CU_ASSERT_STRING_EQUAL(t.backend, "sim");
    hoff__trace_destroy(&t);
    unlink(path);
    hoff_shutdown(ctx);
}

static void test_region_blocks_stay(void) {
    void *r, *a[6];
    struct hoff_stats st;
    int k, i;

    open_ctx(8 * MiB, 2);
    for (k = 0; k < 3; k++) {
        hoff_step_begin(ctx);
        hoff_region_begin(ctx);
        r = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED); /* pinned */
        hoff_region_end(ctx);
        for (i = 0; i < 6; i++) {
            hoff_mark_op(ctx, NULL);
            a[i] = hoff_malloc(ctx, 2 * MiB, S);
            hoff_access(ctx, a[i], 1, S); /* its writer's access mark */
            hoff_sim_compute(ctx, S, 100000);
        }
        hoff_mark_op(ctx, NULL);
        CU_ASSERT_EQUAL(hoff_residency(ctx, r), HOFF_RES_DEVICE);
        for (i = 5; i >= 0; i--) {
            hoff_access(ctx, a[i], 0, S);
            hoff_free(ctx, a[i], S);
        }
        hoff_free(ctx, r, S);
        hoff_step_end(ctx);
    }
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT(st.peak_resident_bytes <= 8 * MiB);
    hoff_shutdown(ctx);
}

static void test_infeasible_reported(void) {
    struct hoff_stats st;

    open_ctx(1 * MiB, 2); /* less than one block: cannot be met */
    step(2 * MiB, 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.plan_feasible, 0);
    CU_ASSERT(st.plan_peak_bytes > 1 * MiB);
    step(2 * MiB, 0); /* still runs, every byte intact */
    CU_ASSERT_EQUAL(bad_stamps, 0);
    hoff_shutdown(ctx);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"warmup_evicts_earliest_allocated", test_warmup_evicts_earliest_allocated},
        {"plan_then_replay", test_plan_then_replay},
        {"changed_step_falls_back", test_changed_step_falls_back},
        {"replan_after_divergence", test_replan_after_divergence},
        {"trace_save", test_trace_save},
        {"region_blocks_stay", test_region_blocks_stay},
        {"infeasible_reported", test_infeasible_reported},
        {NULL, NULL},
    };
    return hoff_test_run("replay", tests);
}
