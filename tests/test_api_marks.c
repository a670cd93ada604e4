/* test_api_marks.c — the step and region marks through the public API on sim: their order errors and what a step
 * counts.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "hoff.h"
#include "testutil.h"

#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static void test_marks(void) {
    struct hoff_stats st;

    ctx = hoff_test_open_sim(1ull << 30);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), -EINVAL);
    CU_ASSERT_EQUAL(hoff_region_end(ctx), -EINVAL);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), -EALREADY);
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), -EBUSY); /* regions open */
    CU_ASSERT_EQUAL(hoff_region_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_region_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, 5000), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.steps, 1);
    CU_ASSERT_EQUAL(st.last_step_ns, 5000);
    hoff_shutdown(ctx);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"marks", test_marks},
        {NULL, NULL},
    };
    return hoff_test_run("api_marks", tests);
}
