/* test_api_alloc.c — hoff_malloc/hoff_free through the public API on sim: their errors, zero sizes, the cache released
 * when the device is full, and the device pool growing into room that resident offload blocks hold.  Threading:
 * single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static void test_malloc_free_errors(void) {
    void *p;

    ctx = hoff_test_open_sim(1ull << 30);
    CU_ASSERT_PTR_NULL(hoff_malloc_flags(ctx, 64, S, 3));
    CU_ASSERT_EQUAL(errno, EINVAL);
    CU_ASSERT_PTR_NULL(hoff_malloc(ctx, (size_t)1 << 50, S));
    CU_ASSERT_EQUAL(errno, ENOMEM);
    p = hoff_malloc(ctx, 1000, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT(hoff_block_size(ctx, p) >= 1000);
    CU_ASSERT_EQUAL(hoff_block_size(ctx, (char *)p + 8), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, (char *)p + 8, S), -EINVAL);
    CU_ASSERT_EQUAL(hoff_free(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, p, S), -EINVAL); /* double free */
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "double free"));
    CU_ASSERT_EQUAL(hoff_free(ctx, NULL, S), 0);
    CU_ASSERT_PTR_NULL(hoff_malloc(NULL, 10, S));
    CU_ASSERT_EQUAL(hoff_free(NULL, p, S), -EINVAL);
    hoff_shutdown(ctx);
}

static void test_zero_size(void) {
    void *a, *b;

    ctx = hoff_test_open_sim(1ull << 30);
    a = hoff_malloc(ctx, 0, S);
    b = hoff_malloc(ctx, 0, S);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(b);
    CU_ASSERT_PTR_NOT_EQUAL(a, b);
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

/* A device full of cached blocks: the allocation releases the cache and
 * succeeds; only a device full of live blocks returns NULL. */
static void test_release_on_failure(void) {
    struct hoff_config cfg = hoff_test_sim_config(1ull << 30);
    void *p[8], *big;
    struct hoff_stats st;
    int i;

    cfg.sim_device_bytes = 64 * MiB;
    cfg.oversub_margin_bytes = 0;
    ctx = hoff_test_open(&cfg);
    for (i = 0; i < 7; i++) {
        p[i] = hoff_malloc_flags(ctx, 8 * MiB, S, HOFF_ALLOC_DEVICE);
        CU_ASSERT_PTR_NOT_NULL(p[i]);
    }
    for (i = 0; i < 7; i++)
        hoff_free(ctx, p[i], S);
    big = hoff_malloc_flags(ctx, 32 * MiB, S, HOFF_ALLOC_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(big);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.cache_flushes, 1);
    CU_ASSERT_EQUAL(st.device_pool_bytes, 32 * MiB);
    CU_ASSERT_PTR_NULL(hoff_malloc_flags(ctx, 48 * MiB, S, HOFF_ALLOC_DEVICE));
    CU_ASSERT_EQUAL(errno, ENOMEM);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.alloc_failures, 1);
    hoff_free(ctx, big, S);
    CU_ASSERT_EQUAL(hoff_empty_cache(ctx), 0);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.device_pool_bytes, 0);
    hoff_shutdown(ctx);
}

/* The device pool grows into room that resident offload blocks hold: hoff
 * evicts them first and waits, as the driver would otherwise do for
 * cudaMalloc behind hoff's books (the sim's dev_alloc fails instead: it
 * evicts nothing by itself), and its books then match the device. */
static void test_device_pool_squeeze(void) {
    struct hoff_config cfg = hoff_test_sim_config(1ull << 30);
    struct hoff_stats st;
    void *m[6], *d;
    int i;

    cfg.sim_device_bytes = 64 * MiB;
    cfg.oversub_margin_bytes = 0; /* no budget: only the device limits */
    ctx = hoff_test_open(&cfg);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    for (i = 0; i < 6; i++) { /* 48 MiB of offload blocks, used and done with */
        m[i] = hoff_malloc(ctx, 8 * MiB, S);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m[i]);
        CU_ASSERT_EQUAL(hoff_access(ctx, m[i], 1, S), 0);
    }
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "done"), 0);
    d = hoff_malloc_flags(ctx, 32 * MiB, S, HOFF_ALLOC_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(d);
    hoff_stats_get(ctx, &st);
    CU_ASSERT(st.device_squeezes >= 1);
    CU_ASSERT(st.evictions >= 2);
    CU_ASSERT(st.resident_bytes <= 32 * MiB);
    CU_ASSERT_EQUAL(st.budget_overruns, 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.driver_drift_bytes, 0); /* the sim holds what the books say */
    /* A pool that cannot fit the device even with nothing resident: refused
     * before the backend is asked. */
    CU_ASSERT_PTR_NULL(hoff_malloc_flags(ctx, 48 * MiB, S, HOFF_ALLOC_DEVICE));
    CU_ASSERT_EQUAL(errno, ENOMEM);
    for (i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(hoff_free(ctx, m[i], S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, d, S), 0);
    hoff_shutdown(ctx);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"malloc_free_errors", test_malloc_free_errors},
        {"zero_size", test_zero_size},
        {"release_on_failure", test_release_on_failure},
        {"device_pool_squeeze", test_device_pool_squeeze},
        {NULL, NULL},
    };
    return hoff_test_run("api_alloc", tests);
}
