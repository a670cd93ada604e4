/* test_api_pool.c — the pool choice rule through the public API on sim: which allocations are offload candidates
 * (inside a step, above managed_min, outside regions, not forced to the device), HOFF_ALLOC_CANDIDATE, and the step's
 * stream (hoff_step_stream).  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static void test_pool_choice(void) {
    void *before, *small, *big, *region, *forced;

    ctx = hoff_test_open_sim(1ull << 30);
    before = hoff_malloc(ctx, 8 * MiB, S); /* outside a step: parameters */
    CU_ASSERT_EQUAL(hoff_evict(ctx, before, S), -EPERM);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    small = hoff_malloc(ctx, 64 * 1024, S); /* below managed_min */
    big = hoff_malloc(ctx, 8 * MiB, S);     /* an offload candidate */
    CU_ASSERT_EQUAL(hoff_evict(ctx, small, S), -EPERM);
    CU_ASSERT_EQUAL(hoff_evict(ctx, big, S), 0);
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    region = hoff_malloc(ctx, 8 * MiB, S);
    CU_ASSERT_EQUAL(hoff_region_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_evict(ctx, region, S), -EPERM);
    forced = hoff_malloc_flags(ctx, 4 * MiB, S, HOFF_ALLOC_DEVICE);
    CU_ASSERT_EQUAL(hoff_evict(ctx, forced, S), -EPERM);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, before, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, small, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, big, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, region, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, forced, S), 0);
    hoff_shutdown(ctx);
}

/* HOFF_ALLOC_CANDIDATE: the AUTO rule's managed blocks, EAGAIN for the rest, nothing counted as a failure. */
static void test_candidate_flag(void) {
    struct hoff_stats st;
    void *p;

    ctx = hoff_test_open_sim(1ull << 30);
    errno = 0;
    CU_ASSERT_PTR_NULL(hoff_malloc_flags(ctx, 8 * MiB, S, HOFF_ALLOC_CANDIDATE)); /* outside a step */
    CU_ASSERT_EQUAL(errno, EAGAIN);
    CU_ASSERT_PTR_NULL(hoff_malloc_flags(ctx, 8 * MiB, S, HOFF_ALLOC_CANDIDATE | HOFF_ALLOC_MANAGED));
    CU_ASSERT_EQUAL(errno, EINVAL);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    errno = 0;
    CU_ASSERT_PTR_NULL(hoff_malloc_flags(ctx, 64 * 1024, S, HOFF_ALLOC_CANDIDATE)); /* below managed_min */
    CU_ASSERT_EQUAL(errno, EAGAIN);
    p = hoff_malloc_flags(ctx, 3 * MiB, S, HOFF_ALLOC_CANDIDATE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL((uintptr_t)p % (2 * MiB), 0);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p, S), 0); /* managed: evictable */
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.alloc_failures, 0);
    CU_ASSERT_EQUAL(st.allocs, 1);
    CU_ASSERT_EQUAL(hoff_free(ctx, p, S), 0);
    hoff_shutdown(ctx);
}

/* hoff_step_stream: once the step's stream is named, a step's allocation on another stream (FSDP's and NCCL's
 * collective buffers) is device memory, counted; on the step's stream it is a candidate as before; unnamed, any
 * stream's is. */
static void test_step_stream(void) {
    hoff_stream side = (hoff_stream)(uintptr_t)0x5151;
    struct hoff_stats st;
    void *a, *b, *c;

    ctx = hoff_test_open_sim(1ull << 30);
    CU_ASSERT_EQUAL(hoff_step_stream(NULL, S), -EINVAL);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    a = hoff_malloc(ctx, 4 * MiB, side); /* no stream named yet: a candidate */
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(hoff_evict(ctx, a, side), 0);
    CU_ASSERT_EQUAL(hoff_step_stream(ctx, S), 0);
    b = hoff_malloc(ctx, 4 * MiB, side); /* the side stream's: device pool */
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.managed_in_use_bytes, 4 * MiB); /* a's only */
    c = hoff_malloc(ctx, 4 * MiB, S);                  /* the step's: a candidate */
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(hoff_evict(ctx, c, S), 0);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.side_stream_allocs, 1);
    CU_ASSERT_EQUAL(st.managed_in_use_bytes, 8 * MiB);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, side), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, b, side), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, c, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_shutdown(ctx);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"pool_choice", test_pool_choice},
        {"candidate_flag", test_candidate_flag},
        {"step_stream", test_step_stream},
        {NULL, NULL},
    };
    return hoff_test_run("api_pool", tests);
}
