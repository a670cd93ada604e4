/* test_torch_alloc.c — the PyTorch allocator's entry points on sim: hoff_torch_alloc/free and their edge cases, and one
 * context per device (devices made on first use, bad device numbers refused).  Threading: single-threaded; the torch
 * contexts are process-wide, so tests use their own device numbers and run in order. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static void test_alloc_free(void) {
    hoff_ctx *ctx;
    void *p;

    p = hoff_torch_alloc(4096, 0, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    ctx = hoff_torch_context(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_STRING_EQUAL(hoff_backend_name(ctx), "sim");
    CU_ASSERT(hoff_block_size(ctx, p) >= 4096);
    hoff_torch_free(p, 4096, 0, S);
    CU_ASSERT_EQUAL(hoff_block_size(ctx, p), 0);
    CU_ASSERT_PTR_NULL(hoff_torch_alloc(0, 0, S)); /* like PyTorch's allocator */
    CU_ASSERT_PTR_NULL(hoff_torch_alloc(-5, 0, S));
    /* A failure PyTorch reports as out of memory says ENOMEM (the shim throws OutOfMemoryError for it). */
    errno = 0;
    CU_ASSERT_PTR_NULL(hoff_torch_alloc((ssize_t)1 << 50, 0, S));
    CU_ASSERT_EQUAL(errno, ENOMEM);
    hoff_torch_free(NULL, 0, 0, S); /* nothing happens */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).allocs, 1);
}

static void test_devices(void) {
    hoff_ctx *c0 = hoff_torch_context(0), *c3;
    void *p;

    CU_ASSERT_PTR_NULL(hoff_torch_alloc(4096, 64, S));
    CU_ASSERT_EQUAL(errno, ENODEV); /* not an out-of-memory error */
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "out of range"));
    CU_ASSERT_PTR_NULL(hoff_torch_context(-1));
    p = hoff_torch_alloc(4096, 3, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    c3 = hoff_torch_context(3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c3);
    CU_ASSERT_PTR_NOT_EQUAL(c0, c3);
    CU_ASSERT(hoff_block_size(c3, p) > 0);
    CU_ASSERT_EQUAL(hoff_block_size(c0, p), 0);
    hoff_torch_free(p, 4096, 3, S);
    CU_ASSERT_EQUAL(hoff_block_size(c3, p), 0);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"alloc_free", test_alloc_free},
        {"devices", test_devices},
        {NULL, NULL},
    };

    hoff_test_torch_env();
    return hoff_test_run("torch_alloc", tests);
}
