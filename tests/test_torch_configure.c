/* test_torch_configure.c — hoff_torch_configure on sim: options set before a device's context exists (pending) and on a
 * live context, and its refusals.  Threading: single-threaded; the torch contexts are process-wide, so tests use their
 * own device numbers and run in order. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

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

int main(void) {
    static const struct hoff_test tests[] = {
        {"configure", test_configure},
        {NULL, NULL},
    };

    hoff_test_torch_env();
    return hoff_test_run("torch_configure", tests);
}
