/* test_api_init.c — a context's life through the public API on sim: hoff_init's errors (bad arguments, version and
 * configuration), init from the environment, the cuda backend's clean refusal without a GPU and auto's fallback to sim,
 * and shutdown with blocks still live.  Threading: single-threaded (it sets environment variables). */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static void test_init_errors(void) {
    struct hoff_config cfg = hoff_test_sim_config(1ull << 30);

    CU_ASSERT_EQUAL(hoff_init(NULL, &cfg), -EINVAL);
    cfg.version = 99;
    CU_ASSERT_EQUAL(hoff_init(&ctx, &cfg), -EINVAL);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "version"));
    cfg = hoff_test_sim_config(1ull << 30);
    cfg.sim_h2d_gbps = 0;
    CU_ASSERT_EQUAL(hoff_init(&ctx, &cfg), -EINVAL);
    cfg = hoff_test_sim_config(1ull << 30);
    cfg.backend = 7;
    CU_ASSERT_EQUAL(hoff_init(&ctx, &cfg), -EINVAL);
}

static void test_init_from_env(void) {
    setenv("HOFF_BACKEND", "sim", 1);
    setenv("HOFF_SIM_DEVICE", "2G", 1);
    setenv("HOFF_BUDGET", "256M", 1);
    setenv("HOFF_LOG_LEVEL", "off", 1);
    CU_ASSERT_EQUAL_FATAL(hoff_init(&ctx, NULL), 0);
    CU_ASSERT_STRING_EQUAL(hoff_backend_name(ctx), "sim");
    {
        struct hoff_stats st;
        hoff_stats_get(ctx, &st);
        CU_ASSERT_EQUAL(st.budget_bytes, 256 * MiB);
    }
    hoff_shutdown(ctx);
    setenv("HOFF_BUDGET", "lots", 1);
    CU_ASSERT_EQUAL(hoff_init(&ctx, NULL), -EINVAL);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_BUDGET"));
    unsetenv("HOFF_BUDGET");
    unsetenv("HOFF_BACKEND");
    unsetenv("HOFF_SIM_DEVICE");
    unsetenv("HOFF_LOG_LEVEL");
}

static void test_cuda_backend_refuses_cleanly(void) {
    struct hoff_config cfg = hoff_test_sim_config(1ull << 30);

    cfg.backend = HOFF_BACKEND_CUDA;
    /* Without a GPU (or without CUDA built in) the cuda backend says so. */
    if (hoff_init(&ctx, &cfg) == 0) {
        CU_ASSERT_STRING_EQUAL(hoff_backend_name(ctx), "cuda");
        hoff_shutdown(ctx);
        return;
    }
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "cuda"));
    cfg.backend = HOFF_BACKEND_AUTO; /* ...and auto falls back to sim */
    ctx = hoff_test_open(&cfg);
    CU_ASSERT_STRING_EQUAL(hoff_backend_name(ctx), "sim");
    hoff_shutdown(ctx);
}

static void test_leak_at_shutdown(void) {
    ctx = hoff_test_open_sim(1ull << 30);
    CU_ASSERT_PTR_NOT_NULL(hoff_malloc(ctx, 100, S));
    CU_ASSERT_PTR_NOT_NULL(hoff_malloc_flags(ctx, 3 * MiB, S, HOFF_ALLOC_MANAGED));
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0); /* released, no crash, no leak under ASan */
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"init_errors", test_init_errors},
        {"init_from_env", test_init_from_env},
        {"cuda_backend_refuses_cleanly", test_cuda_backend_refuses_cleanly},
        {"leak_at_shutdown", test_leak_at_shutdown},
        {NULL, NULL},
    };
    return hoff_test_run("api_init", tests);
}
