/* test_torch_abort.c — hoff_step_abort on a sim context: an aborted warmup or replay step and what the next step does.
 * Threading: single-threaded; the torch contexts are process-wide, so tests use their own device numbers and run in
 * order. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static void test_step_abort(void) {
    struct hoff_config cfg;
    struct hoff_stats st, before;
    hoff_ctx *ctx;
    void *a, *b;

    cfg = hoff_test_replay_config((uint64_t)1 << 30, 2 * MiB);
    cfg.log_level = HOFF_LOG_OFF;
    ctx = hoff_test_open(&cfg);
    CU_ASSERT_EQUAL(hoff_step_abort(ctx), -EINVAL); /* no step */
    /* Warmup aborted: nothing planned, the next step records. */
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    a = hoff_malloc(ctx, 2 * MiB, S);
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_abort(ctx), 0);
    CU_ASSERT_EQUAL(hoff_region_end(ctx), -EINVAL); /* the abort closed it */
    CU_ASSERT_EQUAL(hoff_free(ctx, a, S), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 0);
    CU_ASSERT_EQUAL(st.steps, 0);
    /* A full step plans; an aborted replay skips the rest and keeps the plan. */
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_state, HOFF_PLAN_WARMUP);
    a = hoff_malloc(ctx, 2 * MiB, S);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fill a"), 0); /* a's use window closes */
    b = hoff_malloc(ctx, 2 * MiB, S);                /* over the budget: a is evicted */
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fill b"), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, b, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, b, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    before = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(before.plans, 1);
    CU_ASSERT_FATAL(before.plan_actions > 0);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_state, HOFF_PLAN_REPLAY);
    a = hoff_malloc(ctx, 2 * MiB, S);
    CU_ASSERT_EQUAL(hoff_step_abort(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.actions_fired + st.actions_skipped,
                    before.actions_fired + before.actions_skipped + before.plan_actions);
    CU_ASSERT(st.actions_skipped > before.actions_skipped);
    CU_ASSERT_EQUAL(st.steps, 1);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT(hoff_residency(ctx, a) != HOFF_RES_EVICTING && hoff_residency(ctx, a) != HOFF_RES_PREFETCHING);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, S), 0);
    /* The plan is kept: the next step replays it to the end. */
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plan_state, HOFF_PLAN_REPLAY);
    a = hoff_malloc(ctx, 2 * MiB, S);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fill a"), 0);
    b = hoff_malloc(ctx, 2 * MiB, S);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fill b"), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, b, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, b, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.steps, 2);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"step_abort", test_step_abort},
        {NULL, NULL},
    };

    hoff_test_torch_env();
    return hoff_test_run("torch_abort", tests);
}
