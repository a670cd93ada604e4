/* test_torch_peaks.c — the peaks' reset on sim (hoff_torch_reset_peaks, hoff_reset_peaks): what a reset keeps and what
 * it brings down, with empty-cache.  Threading: single-threaded; the torch contexts are process-wide, so tests use
 * their own device numbers and run in order. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

/* torch.cuda.reset_peak_memory_stats (hoff_torch_reset_peaks, hoff_reset_peaks): the peaks of bytes handed out
 * (PyTorch's allocated bytes) and mapped (reserved), and of resident, host and NVMe bytes, restart from the
 * current figures; the next high is the new peak even when it is lower than the old one. */
static void test_reset_peaks(void) {
    struct hoff_stats st;
    hoff_ctx *ctx;
    void *a, *b, *c, *m;
    uint64_t high;

    CU_ASSERT_EQUAL(hoff_torch_reset_peaks(64), -ENODEV);
    CU_ASSERT_EQUAL(hoff_torch_reset_peaks(-1), -ENODEV);
    CU_ASSERT_EQUAL(hoff_torch_reset_peaks(2), 0); /* no context on device 2 yet: nothing to do */
    CU_ASSERT_EQUAL(hoff_reset_peaks(NULL), -EINVAL);
    a = hoff_torch_alloc(8 * MiB, 2, S);
    b = hoff_torch_alloc(8 * MiB, 2, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    ctx = hoff_torch_context(2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    st = hoff_test_stats(ctx);
    high = st.device_in_use_bytes + st.managed_in_use_bytes;
    CU_ASSERT(high >= 16 * MiB);
    CU_ASSERT_EQUAL(st.peak_in_use_bytes, high);
    CU_ASSERT_EQUAL(st.peak_pool_bytes, st.device_pool_bytes + st.managed_pool_bytes);
    hoff_torch_free(a, 8 * MiB, 2, S);
    hoff_torch_free(b, 8 * MiB, 2, S);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.device_in_use_bytes + st.managed_in_use_bytes, 0);
    CU_ASSERT_EQUAL(st.peak_in_use_bytes, high); /* a peak stays after the frees */
    /* A step's offload candidate: resident bytes and their peak. */
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    m = hoff_torch_alloc(4 * MiB, 2, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(hoff_test_stats(ctx).peak_resident_bytes >= 4 * MiB);
    hoff_torch_free(m, 4 * MiB, 2, S);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.peak_resident_bytes >= 4 * MiB);
    CU_ASSERT(st.peak_in_use_bytes >= high);

    CU_ASSERT_EQUAL(hoff_torch_reset_peaks(2), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.peak_in_use_bytes, st.device_in_use_bytes + st.managed_in_use_bytes);
    CU_ASSERT_EQUAL(st.peak_in_use_bytes, 0);
    CU_ASSERT_EQUAL(st.peak_pool_bytes, st.device_pool_bytes + st.managed_pool_bytes);
    CU_ASSERT_EQUAL(st.peak_resident_bytes, st.resident_bytes);
    CU_ASSERT_EQUAL(st.peak_host_bytes, st.host_bytes);
    CU_ASSERT_EQUAL(st.peak_nvme_bytes, st.nvme_bytes);
    /* A smaller high after the reset is the new peak. */
    c = hoff_torch_alloc(2 * MiB, 2, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.peak_in_use_bytes, st.device_in_use_bytes + st.managed_in_use_bytes);
    CU_ASSERT(st.peak_in_use_bytes >= 2 * MiB && st.peak_in_use_bytes < high);
    hoff_torch_free(c, 2 * MiB, 2, S);
    /* empty_cache lowers the pools' bytes, not their peak; a reset then brings the peak down to them. */
    high = hoff_test_stats(ctx).peak_pool_bytes;
    hoff_torch_empty_cache();
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.device_pool_bytes + st.managed_pool_bytes < high);
    CU_ASSERT_EQUAL(st.peak_pool_bytes, high);
    CU_ASSERT_EQUAL(hoff_reset_peaks(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.peak_pool_bytes, st.device_pool_bytes + st.managed_pool_bytes);
    CU_ASSERT_EQUAL(st.peak_in_use_bytes, 0);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"reset_peaks", test_reset_peaks},
        {NULL, NULL},
    };

    hoff_test_torch_env();
    return hoff_test_run("torch_peaks", tests);
}
