/* test_torch_hooks.c — PyTorch's allocator hooks on sim: the memory fraction (before and after the context exists),
 * record-stream with empty-cache, and the init hook (the device count PyTorch reports).  Threading: single-threaded;
 * the torch contexts are process-wide, so tests use their own device numbers and run in order. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

/* One marked step on ctx: two 2 MiB offload candidates, written and read. */
static void one_step(hoff_ctx *ctx, int device) {
    void *a, *b;

    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    a = hoff_torch_alloc(2 * MiB, device, S);
    b = hoff_torch_alloc(2 * MiB, device, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, b, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, b, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 0, S), 0);
    hoff_torch_free(b, 2 * MiB, device, S);
    hoff_torch_free(a, 2 * MiB, device, S);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
}

static void test_memory_fraction(void) {
    hoff_ctx *ctx;
    struct hoff_stats st;
    uint64_t total = (uint64_t)4 << 30; /* HOFF_SIM_DEVICE, set in main */

    hoff_torch_set_memory_fraction(0.25, 6); /* before the context exists */
    ctx = hoff_torch_context(6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, total / 4);
    one_step(ctx, 6);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).plans, 1);
    hoff_torch_set_memory_fraction(0.5, 6); /* live: the next step records again */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, total / 2);
    one_step(ctx, 6);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 2);
    CU_ASSERT_EQUAL(st.replans, 1);
    hoff_torch_set_memory_fraction(1.5, 6); /* refused */
    hoff_torch_set_memory_fraction(0.0, 6);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, total / 2);
}

/* record_stream: the free lands where the program makes it (so a recorded
 * step replays the same way every step); the block's next owner waits for
 * the recorded streams' work on the device instead (pool.c; the CUDA
 * double's torch_order.sh checks that order, the sim has one timeline). */
static void test_record_stream(void) {
    hoff_stream s1 = (hoff_stream)1, s2 = (hoff_stream)2;
    hoff_ctx *ctx;
    void *p, *q;

    p = hoff_torch_alloc(2 * MiB, 7, s1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    ctx = hoff_torch_context(7);
    hoff_torch_record_stream(p, s2);
    hoff_torch_record_stream(p, s2); /* once is enough */
    hoff_torch_record_stream(p, s1); /* its own stream */
    hoff_torch_free(p, 2 * MiB, 7, s1);
    CU_ASSERT_EQUAL(hoff_block_size(ctx, p), 0); /* freed at once */
    q = hoff_torch_alloc(2 * MiB, 7, s1);        /* the same block, for an owner ordered after s2 */
    CU_ASSERT_PTR_EQUAL(q, p);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).fence_syncs, 0);
    hoff_torch_free(q, 2 * MiB, 7, s1);
    /* More streams than a block remembers: the free waits for the device. */
    p = hoff_torch_alloc(2 * MiB, 7, s1);
    for (uintptr_t k = 2; k < 10; k++)
        hoff_torch_record_stream(p, (hoff_stream)k);
    hoff_torch_free(p, 2 * MiB, 7, s1);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).fence_syncs, 1);
    hoff_torch_empty_cache();
    CU_ASSERT(hoff_test_stats(ctx).cache_flushes >= 1);
    hoff_torch_record_stream(p, s2); /* not a live block: logged, ignored */
}

static void test_init_hook(void) {
    /* PyTorch reports 4 devices: device 9 is refused from now on. */
    hoff_torch_init(4);
    CU_ASSERT_PTR_NULL(hoff_torch_alloc(4096, 9, S));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "does not exist"));
    CU_ASSERT_PTR_NULL(hoff_torch_context(9));
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"memory_fraction", test_memory_fraction},
        {"record_stream", test_record_stream},
        {"init_hook", test_init_hook},
        {NULL, NULL},
    };

    hoff_test_torch_env();
    return hoff_test_run("torch_hooks", tests);
}
