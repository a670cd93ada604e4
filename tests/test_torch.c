/* test_torch.c — the PyTorch entry points on sim: alloc/free and their edge cases, one context per device,
 * hoff_torch_configure (pending and live options), the memory-fraction, record-stream, empty-cache and init hooks,
 * hoff_step_abort, and the peaks' reset.  Threading: single-threaded; the torch contexts are process-wide, so tests use their own
 * device numbers and run in order. */
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

static void test_configure(void) {
    char err[512];
    hoff_ctx *ctx;

    /* Before the context of device 5 exists: taken for contexts to come. */
    CU_ASSERT_EQUAL(hoff_torch_configure(-1, "budget", "64M", err, sizeof err), 0);
    ctx = hoff_torch_context(5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, 64 * MiB);
    /* Live: the budget may change, a spill directory may not. */
    CU_ASSERT_EQUAL(hoff_torch_configure(5, "budget", "32M", err, sizeof err), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, 32 * MiB);
    CU_ASSERT_EQUAL(hoff_torch_configure(5, "HOFF_PLANNER", "greedy", err, sizeof err), 0);
    CU_ASSERT_EQUAL(hoff_torch_configure(5, "spill_dir", "/tmp", err, sizeof err), -EBUSY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot change once"));
    CU_ASSERT_EQUAL(hoff_torch_configure(5, "budget", "lots", err, sizeof err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "budget"));
    CU_ASSERT_EQUAL(hoff_torch_configure(5, "no_such_option", "1", err, sizeof err), -ENOENT);
    CU_ASSERT_EQUAL(hoff_torch_configure(99, "budget", "1M", err, sizeof err), -ENODEV);
    CU_ASSERT_EQUAL(hoff_torch_configure(5, NULL, "1M", err, sizeof err), -EINVAL);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, 32 * MiB); /* the failures changed nothing */
    /* Checking changes nothing. */
    CU_ASSERT_EQUAL(hoff_torch_config_check("planner", "nosuch", err, sizeof err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "greedy"));
    CU_ASSERT_EQUAL(hoff_torch_config_check("budget", "1G", err, sizeof err), 0);
    CU_ASSERT_EQUAL(hoff_torch_configure(-1, "budget", "0", err, sizeof err), 0);
    /* Naming a device before its context exists configures that device alone,
     * and a later setting for every device reaches it too. */
    CU_ASSERT_EQUAL(hoff_torch_configure(11, "budget", "48M", err, sizeof err), 0);
    CU_ASSERT_EQUAL(hoff_torch_configure(-1, "host_cap", "1G", err, sizeof err), 0);
    ctx = hoff_torch_context(12);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, 0);
    ctx = hoff_torch_context(11);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_bytes, 48 * MiB);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).host_cap_bytes, 1ull << 30);
    CU_ASSERT_EQUAL(hoff_torch_configure(-1, "host_cap", "0", err, sizeof err), 0);
}

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
    b = hoff_malloc(ctx, 2 * MiB, S); /* over the budget: a is evicted */
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

static void test_init_hook(void) {
    /* PyTorch reports 4 devices: device 9 is refused from now on. */
    hoff_torch_init(4);
    CU_ASSERT_PTR_NULL(hoff_torch_alloc(4096, 9, S));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "does not exist"));
    CU_ASSERT_PTR_NULL(hoff_torch_context(9));
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"alloc_free", test_alloc_free},
        {"devices", test_devices},
        {"configure", test_configure},
        {"memory_fraction", test_memory_fraction},
        {"record_stream", test_record_stream},
        {"step_abort", test_step_abort},
        {"reset_peaks", test_reset_peaks},
        {"init_hook", test_init_hook},
        {NULL, NULL},
    };

    /* The torch contexts read the environment. */
    setenv("HOFF_BACKEND", "sim", 1);
    setenv("HOFF_SIM_DEVICE", "4G", 1);
    setenv("HOFF_LOG_LEVEL", "off", 1);
    setenv("HOFF_PLAN_THREAD", "0", 1); /* plans at the step's end: the counts below are exact */
    unsetenv("HOFF_BUDGET");
    return hoff_test_run("torch", tests);
}
