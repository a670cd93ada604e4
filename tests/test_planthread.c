/* test_planthread.c — planning off the training thread on sim: the steps after a recording never wait for the
 * planner (their hoff_step_begin/end take a small part of the planning time), they keep the budget online until
 * the plan is ready, replay starts at a step boundary with every planned action fired, a replan after divergence
 * goes the same way, a plan made for a budget changed meanwhile is dropped, and shutdown during planning stops
 * the planner and joins it.  Single-threaded (the library
 * runs its planning and issuing threads behind the API). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)
#define LAYERS 32
#define BLOCKS 4      /* saved activations per layer, 2 MiB each */
#define OPS 24        /* ops per layer and direction, each reading the layer's blocks */
#define MAX_STEPS 400 /* a plan not ready by then is a failure, not a hang */

static hoff_ctx *ctx;
static uint64_t sync_plan_ns; /* the planning time of the workload on the training thread (test_sync) */

/* The calling thread's CPU time: unlike the wall clock, it does not grow while the thread waits for a core, so a
 * bound on it holds on a loaded machine too. */
static uint64_t cpu_ns(void) {
    return hoff_test_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void open_ctx(int thread, uint32_t replan_after) {
    struct hoff_config cfg;

    cfg = hoff_test_sim_config(4ull << 30);
    cfg.budget_bytes = (uint64_t)LAYERS * BLOCKS * 2 * MiB / 2; /* half the activations */
    cfg.replan_after = replan_after;
    cfg.plan_thread = thread;
    ctx = hoff_test_open(&cfg);
}

static int bad_stamps;

/* The training thread's time in the step marks of one step (what planning
 * on it would add): wall time, and the thread's CPU time (what it spent
 * working there, whatever else the machine ran meanwhile). */
struct marks {
    uint64_t begin_ns, end_ns;
    uint64_t begin_cpu_ns, end_cpu_ns;
};

/* One training step of `layers` layers: forward allocates and writes each
 * layer's activations, then OPS ops read them; backward reads them in OPS
 * ops and frees them.  Compute between ops on the sim clock. */
static void step(int layers, uint64_t k, struct marks *m) {
    static void *act[LAYERS * 2][BLOCKS];
    uint64_t t0, c0;
    int l, j, o;

    t0 = hoff_test_now_ns();
    c0 = cpu_ns();
    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    m->begin_cpu_ns = cpu_ns() - c0;
    m->begin_ns = hoff_test_now_ns() - t0;
    for (l = 0; l < layers; l++) {
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, "forward"), 0);
        for (j = 0; j < BLOCKS; j++) {
            act[l][j] = hoff_malloc(ctx, 2 * MiB, S);
            CU_ASSERT_PTR_NOT_NULL_FATAL(act[l][j]);
            CU_ASSERT_EQUAL(hoff_access(ctx, act[l][j], 1, S), 0);
            hoff_test_stamp(act[l][j], 2 * MiB, 4096, k << 32 | (uint64_t)l << 8 | (uint64_t)j);
        }
        for (o = 0; o < OPS; o++) {
            CU_ASSERT_EQUAL(hoff_mark_op(ctx, "forward op"), 0);
            for (j = 0; j < BLOCKS; j++)
                CU_ASSERT_EQUAL(hoff_access(ctx, act[l][j], 0, S), 0);
            CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, 20000), 0);
        }
    }
    for (l = layers - 1; l >= 0; l--) {
        for (o = 0; o < OPS; o++) {
            CU_ASSERT_EQUAL(hoff_mark_op(ctx, "backward op"), 0);
            for (j = 0; j < BLOCKS; j++) {
                CU_ASSERT_EQUAL(hoff_access(ctx, act[l][j], 0, S), 0);
                if (o == OPS - 1 && /* the last use: its window closes at the next op */
                    !hoff_test_stamped(act[l][j], 2 * MiB, 4096, k << 32 | (uint64_t)l << 8 | (uint64_t)j))
                    bad_stamps++;
            }
            CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, 40000), 0);
        }
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, "backward"), 0);
        for (j = 0; j < BLOCKS; j++)
            CU_ASSERT_EQUAL(hoff_free(ctx, act[l][j], S), 0);
    }
    t0 = hoff_test_now_ns();
    c0 = cpu_ns();
    CU_ASSERT_EQUAL_FATAL(hoff_step_end(ctx), 0);
    m->end_cpu_ns = cpu_ns() - c0;
    m->end_ns = hoff_test_now_ns() - t0;
}

/* Planning on the training thread (HOFF_PLAN_THREAD=0): the step after the
 * recording replays, and the recording's hoff_step_end waited for all of
 * the planning (counted in plan_wait_ns). */
static void test_sync(void) {
    struct hoff_stats st;
    struct marks m;

    open_ctx(0, 2);
    bad_stamps = 0;
    step(LAYERS, 1, &m);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.plan_pending, 0);
    CU_ASSERT(st.plan_wait_ns >= st.plan_ns);
    CU_ASSERT(m.end_ns >= st.plan_ns);
    CU_ASSERT_EQUAL(st.plan_lag_steps, 0);
    sync_plan_ns = st.plan_ns;
    printf("\n    planning on the training thread: %.1f ms (step end waited %.1f ms)\n", (double)st.plan_ns / 1e6,
           (double)m.end_ns / 1e6);
    step(LAYERS, 2, &m);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(st.actions_fired, st.plan_actions);
    CU_ASSERT_EQUAL(bad_stamps, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Steps until the plan is in use; returns how many ran while it was made
 * and checks each: online (warmup state, nothing fired); *worst_cpu_ns is
 * raised to the longest step mark's CPU time on the training thread. */
static int until_replay(int layers, uint64_t k0, uint64_t *worst_cpu_ns) {
    struct hoff_stats st, before = hoff_test_stats(ctx);
    struct marks m;
    int n = 0;

    for (;;) {
        step(layers, k0 + (uint64_t)n, &m);
        st = hoff_test_stats(ctx);
        *worst_cpu_ns = m.begin_cpu_ns > *worst_cpu_ns ? m.begin_cpu_ns : *worst_cpu_ns;
        *worst_cpu_ns = m.end_cpu_ns > *worst_cpu_ns ? m.end_cpu_ns : *worst_cpu_ns;
        if (st.plans > before.plans)
            return n; /* this step took the plan at its start */
        CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_WARMUP);
        CU_ASSERT_EQUAL(st.plan_pending, 1);
        CU_ASSERT_EQUAL(st.actions_fired, before.actions_fired);
        if (++n >= MAX_STEPS) {
            CU_FAIL("the plan was not ready after MAX_STEPS steps");
            return n;
        }
    }
}

/* The default: the recording's hoff_step_end hands the trace to the planning
 * thread and returns; the next steps run online until the plan is ready, at
 * a step's start, and no step mark waits for the planner. */
static void test_no_wait(void) {
    struct hoff_stats st, before;
    uint64_t worst = 0;
    struct marks m;
    int online;

    open_ctx(1, 2);
    bad_stamps = 0;
    step(LAYERS, 1, &m);
    worst = m.end_cpu_ns;
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 0); /* handed to the planning thread */
    online = until_replay(LAYERS, 2, &worst);
    st = hoff_test_stats(ctx);
    printf("\n    planning thread: %.1f ms planning, ready %.1f ms after the recording, %d steps online, "
           "longest step mark %.3f ms of CPU\n",
           (double)st.plan_ns / 1e6, (double)st.plan_lag_ns / 1e6, online, (double)worst / 1e6);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(st.plan_pending, 0);
    CU_ASSERT_EQUAL(st.plan_wait_ns, 0);
    CU_ASSERT_EQUAL(st.plan_lag_steps, (uint64_t)online);
    CU_ASSERT_EQUAL(st.plan_online_steps, (uint64_t)online);
    CU_ASSERT(st.plan_lag_ns >= st.plan_ns);
    /* The training thread never held the planning time: the slowest step
     * mark took a small part of it (on today's code the recording's
     * hoff_step_end took all of it).  Its CPU time, not its wall time: on a
     * loaded machine a mark's wall time includes the time the thread waited
     * for a core (17.9 ms against 56.6 ms of planning under two busy loops). */
    CU_ASSERT(worst < st.plan_ns / 4);
    /* The replay fires the whole plan, step after step. */
    CU_ASSERT_EQUAL(st.actions_fired, st.plan_actions);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    before = hoff_test_stats(ctx);
    step(LAYERS, 1000, &m);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(st.actions_fired - before.actions_fired, st.plan_actions);
    CU_ASSERT(st.peak_resident_bytes <= st.budget_bytes);
    CU_ASSERT_EQUAL(bad_stamps, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* A replan after divergence: the divergent steps, then a recording of the
 * new shape, then online steps until its plan is ready, then its replay,
 * and never a wait for the planner. */
static void test_replan(void) {
    struct hoff_stats st;
    uint64_t worst = 0;
    struct marks m;
    int online;

    open_ctx(1, 2);
    bad_stamps = 0;
    step(LAYERS, 1, &m);
    until_replay(LAYERS, 2, &worst);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plans, 1);
    /* a longer step: diverges twice, then the next one records again */
    step(LAYERS + LAYERS / 2, 500, &m);
    step(LAYERS + LAYERS / 2, 501, &m);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.divergent_steps, 2);
    worst = 0;
    step(LAYERS + LAYERS / 2, 502, &m); /* recorded */
    worst = m.end_cpu_ns;
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.replans, 1);
    CU_ASSERT_EQUAL(st.plan_pending, 1);
    online = until_replay(LAYERS + LAYERS / 2, 503, &worst);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 2);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(st.plan_lag_steps, (uint64_t)online);
    CU_ASSERT_EQUAL(st.plan_wait_ns, 0);
    CU_ASSERT(worst < st.plan_ns / 4);
    CU_ASSERT_EQUAL(st.divergent_steps, 2);
    CU_ASSERT_EQUAL(bad_stamps, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Shutting down while the planner runs: the planning thread is told to
 * stop (its searches end early), joined, and its plan and the trace it
 * reads are freed with the context (ASan and TSan builds check that). */
static void test_shutdown_while_planning(void) {
    struct marks m;
    uint64_t t0, took;

    open_ctx(1, 2);
    step(LAYERS, 1, &m);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_pending, 1);
    t0 = hoff_test_now_ns();
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
    took = hoff_test_now_ns() - t0;
    printf("\n    shutdown while planning: %.1f ms (planning on the training thread took %.1f ms)\n",
           (double)took / 1e6, (double)sync_plan_ns / 1e6);
}

/* A live change of the budget (the PyTorch memory-fraction hook) while the
 * planning thread plans: the plan it brings back was made for the old
 * budget, so it is dropped and the step that finds it records again; the
 * plan of that recording is the one used. */
static void test_live_change_drops_plan(void) {
    char err[256];
    struct hoff_stats st;
    struct marks m;
    int n;

    CU_ASSERT_EQUAL_FATAL(hoff_torch_configure(9, "plan_thread", "1", err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_torch_configure(9, "budget", "128M", err, sizeof err), 0);
    ctx = hoff_torch_context(9);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    step(LAYERS, 1, &m); /* recorded: planned for 128M */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_pending, 1);
    CU_ASSERT_EQUAL_FATAL(hoff_torch_configure(9, "budget", "96M", err, sizeof err), 0);
    for (n = 0; n < MAX_STEPS && hoff_test_stats(ctx).plans_dropped == 0; n++)
        step(LAYERS, 2 + (uint64_t)n, &m);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans_dropped, 1);
    CU_ASSERT_EQUAL(st.plans, 0);
    CU_ASSERT_EQUAL(st.plan_pending, 1); /* the step that dropped it recorded again */
    CU_ASSERT_EQUAL(st.budget_bytes, 96 * MiB);
    n = until_replay(LAYERS, 100, &(uint64_t){0});
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.plans_dropped, 1);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT(st.plan_peak_bytes <= 96 * MiB);
    CU_ASSERT_EQUAL(bad_stamps, 0);
    (void)n;
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"sync", test_sync},
        {"no_wait", test_no_wait},
        {"replan", test_replan},
        {"shutdown_while_planning", test_shutdown_while_planning},
        {"live_change_drops_plan", test_live_change_drops_plan},
        {NULL, NULL},
    };
    /* hoff_torch_context reads the environment */
    setenv("HOFF_BACKEND", "sim", 1);
    setenv("HOFF_SIM_DEVICE", "4G", 1);
    setenv("HOFF_LOG_LEVEL", "error", 1);
    unsetenv("HOFF_BUDGET");
    unsetenv("HOFF_PLAN_THREAD");
    return hoff_test_run("planthread", tests);
}
