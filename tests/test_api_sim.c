/* test_api_sim.c — the public API's sim hooks: hoff_sim_touch (a touch fault pages a block in with its bytes, a
 * released block's touch is counted) and hoff_sim_wallclock (op marks advance the virtual clock by the CPU time between
 * them).  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

/* hoff_sim_touch pages an evicted block in with its bytes (a touch fault); a released block's touch, and a read
 * mark of it, are counted in discard_touches; a write mark is not. */
static void test_sim_touch(void) {
    struct hoff_config cfg = hoff_test_sim_config(1ull << 30);
    struct hoff_stats st;
    unsigned char *p;

    cfg.sim_protect = HOFF_SIM_PROTECT;
    ctx = hoff_test_open(&cfg);
    CU_ASSERT_EQUAL(hoff_sim_touch(ctx, (void *)&cfg, 0), -EINVAL);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    p = hoff_malloc(ctx, 4 * MiB, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hoff_test_fill_bytes(p, 4 * MiB, 7, 0);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_sim_touch(ctx, p, 0), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DEVICE);
    CU_ASSERT(hoff_test_bytes_ok(p, 4 * MiB, 7, 0));
    CU_ASSERT_EQUAL(hoff_sim_touch(ctx, p, 0), 0); /* resident: nothing to do, no fault */
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.touch_faults, 1);
    CU_ASSERT_EQUAL(st.faults, 1);
    CU_ASSERT_EQUAL(st.discard_touches, 0);

    CU_ASSERT_EQUAL(hoff_discard(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_sim_touch(ctx, p, 0), -ENODATA);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(p[1], 0xDB); /* poison, and counted: never taken for data silently */
    CU_ASSERT_EQUAL(hoff_discard(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 0, S), 0); /* a read mark of a released block */
    CU_ASSERT_EQUAL(hoff_discard(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 1, S), 0); /* a write makes it anew: not counted */
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.discard_touches, 2);
    CU_ASSERT_EQUAL(st.touch_faults, 1);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, p, S), 0);
    hoff_shutdown(ctx);
}

/* hoff_sim_wallclock: op marks advance the virtual clock by the CPU time between them, only when on. */
static void test_sim_wallclock(void) {
    struct timespec nap = {0, 3000000}; /* 3 ms */
    struct hoff_stats st;

    ctx = hoff_test_open_sim(1ull << 30);
    CU_ASSERT_EQUAL(hoff_sim_wallclock(ctx, 2), -EINVAL);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    nanosleep(&nap, NULL);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "off"), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.last_step_ns, 0); /* off: the virtual clock stood still */
    CU_ASSERT_EQUAL(hoff_sim_wallclock(ctx, 1), 0);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    nanosleep(&nap, NULL);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "a"), 0);
    nanosleep(&nap, NULL);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "b"), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_stats_get(ctx, &st);
    CU_ASSERT(st.last_step_ns >= 6000000); /* both gaps, at least as long as the sleeps */
    CU_ASSERT_EQUAL(hoff_sim_wallclock(ctx, 0), 0);
    hoff_shutdown(ctx);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"sim_touch", test_sim_touch},
        {"sim_wallclock", test_sim_wallclock},
        {NULL, NULL},
    };
    return hoff_test_run("api_sim", tests);
}
