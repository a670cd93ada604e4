/* test_guard.c — the oversubscription guard on a small sim device: refusals, the margin, the opt-in, and the
 * budget check at start-up.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((uint64_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static int open_dev(uint64_t capacity, uint64_t margin, int oversub, uint64_t budget) {
    struct hoff_config cfg;

    cfg = hoff_test_sim_config(capacity);
    cfg.oversub_margin_bytes = margin;
    cfg.oversubscribe = oversub;
    cfg.budget_bytes = budget;
    cfg.log_level = HOFF_LOG_OFF;
    return hoff_init(&ctx, &cfg);
}

static void test_refuses_past_free_minus_margin(void) {
    void *a, *b;

    CU_ASSERT_EQUAL_FATAL(open_dev(64 * MiB, 16 * MiB, 0, 0), 0);
    a = hoff_malloc_flags(ctx, 40 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL(a);
    /* 40 + 16 margin: 8 MiB more fits, 10 does not. */
    b = hoff_malloc_flags(ctx, 10 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_EQUAL(errno, EOVERFLOW);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_OVERSUBSCRIBE"));
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).oversub_refusals, 2); /* the try and the retry after the flush */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).alloc_failures, 1);
    b = hoff_malloc_flags(ctx, 8 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL(b);
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

static void test_device_pool_counts(void) {
    void *d, *m;

    CU_ASSERT_EQUAL_FATAL(open_dev(64 * MiB, 8 * MiB, 0, 0), 0);
    d = hoff_malloc_flags(ctx, 40 * MiB, S, HOFF_ALLOC_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(d);
    m = hoff_malloc_flags(ctx, 20 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NULL(m); /* 40 + 20 + 8 > 64 */
    m = hoff_malloc_flags(ctx, 16 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL(m);
    hoff_free(ctx, d, S);
    hoff_free(ctx, m, S);
    hoff_shutdown(ctx);
}

static void test_evicted_bytes_make_room(void) {
    void *a, *b;

    CU_ASSERT_EQUAL_FATAL(open_dev(64 * MiB, 8 * MiB, 0, 0), 0);
    a = hoff_malloc_flags(ctx, 48 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NULL(hoff_malloc_flags(ctx, 16 * MiB, S, HOFF_ALLOC_MANAGED));
    CU_ASSERT_EQUAL(hoff_evict(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    b = hoff_malloc_flags(ctx, 16 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL(b); /* a's pages are on the host now */
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

static void test_opt_in(void) {
    void *a, *b;

    CU_ASSERT_EQUAL_FATAL(open_dev(64 * MiB, 16 * MiB, 1, 0), 0);
    a = hoff_malloc_flags(ctx, 40 * MiB, S, HOFF_ALLOC_MANAGED);
    b = hoff_malloc_flags(ctx, 20 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(b); /* inside the margin: allowed when opted in */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).oversub_refusals, 0);
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

static void test_cache_flushed_before_refusal(void) {
    void *a, *b;

    CU_ASSERT_EQUAL_FATAL(open_dev(64 * MiB, 8 * MiB, 0, 0), 0);
    a = hoff_malloc_flags(ctx, 40 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    hoff_free(ctx, a, S); /* cached, still mapped */
    b = hoff_malloc_flags(ctx, 50 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL(b); /* the cache was released to make room */
    CU_ASSERT(hoff_test_stats(ctx).cache_flushes >= 1);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).managed_pool_bytes, hoff_block_size(ctx, b));
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

static void test_budget_must_fit(void) {
    CU_ASSERT_EQUAL(open_dev(64 * MiB, 16 * MiB, 0, 56 * MiB), -EINVAL);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_BUDGET"));
    CU_ASSERT_EQUAL(open_dev(64 * MiB, 16 * MiB, 0, 48 * MiB), 0);
    hoff_shutdown(ctx);
    CU_ASSERT_EQUAL(open_dev(64 * MiB, 16 * MiB, 1, 56 * MiB), 0);
    hoff_shutdown(ctx);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"refuses_past_free_minus_margin", test_refuses_past_free_minus_margin},
        {"device_pool_counts", test_device_pool_counts},
        {"evicted_bytes_make_room", test_evicted_bytes_make_room},
        {"opt_in", test_opt_in},
        {"cache_flushed_before_refusal", test_cache_flushed_before_refusal},
        {"budget_must_fit", test_budget_must_fit},
        {NULL, NULL},
    };
    return hoff_test_run("guard", tests);
}
