/* test_api.c — the public API end to end on sim: init and config errors, the pool choice rule, malloc/free
 * errors, release on failure, marks, stats struct and JSON.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static void open_ctx(void) {
    struct hoff_config cfg = hoff_test_sim_config(1ull << 30);
    ctx = hoff_test_open(&cfg);
}

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

static void test_pool_choice(void) {
    void *before, *small, *big, *region, *forced;

    open_ctx();
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

    open_ctx();
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

    open_ctx();
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
    c = hoff_malloc(ctx, 4 * MiB, S); /* the step's: a candidate */
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

static void test_malloc_free_errors(void) {
    void *p;

    open_ctx();
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

    open_ctx();
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

static void test_marks(void) {
    struct hoff_stats st;

    open_ctx();
    CU_ASSERT_EQUAL(hoff_step_end(ctx), -EINVAL);
    CU_ASSERT_EQUAL(hoff_region_end(ctx), -EINVAL);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), -EALREADY);
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), -EBUSY); /* regions open */
    CU_ASSERT_EQUAL(hoff_region_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_region_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, 5000), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.steps, 1);
    CU_ASSERT_EQUAL(st.last_step_ns, 5000);
    hoff_shutdown(ctx);
}

/* hoff_sim_wallclock: op marks advance the virtual clock by the CPU time between them, only when on. */
static void test_sim_wallclock(void) {
    struct timespec nap = {0, 3000000}; /* 3 ms */
    struct hoff_stats st;

    open_ctx();
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

static void test_stats(void) {
    struct hoff_stats st;
    char buf[8192], small[16];
    void *a, *b;
    int n;

    open_ctx();
    a = hoff_malloc(ctx, 4096, S);
    hoff_free(ctx, a, S);
    b = hoff_malloc(ctx, 4096, S); /* a hit */
    CU_ASSERT_PTR_EQUAL(a, b);
    hoff_stats_get(ctx, &st);
    CU_ASSERT_EQUAL(st.version, HOFF_STATS_VERSION);
    CU_ASSERT_EQUAL(st.size, sizeof st);
    CU_ASSERT_EQUAL(st.allocs, 2);
    CU_ASSERT_EQUAL(st.frees, 1);
    CU_ASSERT_EQUAL(st.cache_hits, 1);
    CU_ASSERT_EQUAL(st.cache_misses, 1);
    CU_ASSERT_EQUAL(st.live_blocks, 1);
    CU_ASSERT_EQUAL(st.device_in_use_bytes, 4096);
    CU_ASSERT_EQUAL(st.device_pool_bytes, 2 * MiB); /* one slab segment */
    n = hoff_stats_json(ctx, buf, sizeof buf);
    CU_ASSERT(n > 0 && (size_t)n < sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"allocs\":2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"live_blocks\":1"));
    CU_ASSERT_EQUAL(buf[0], '{');
    CU_ASSERT_EQUAL(buf[n - 1], '}');
    CU_ASSERT_EQUAL(hoff_stats_json(ctx, small, sizeof small), n); /* snprintf semantics */
    CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, NULL), -EINVAL);
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

static void test_strerror(void) {
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_strerror(-EOVERFLOW), "oversubscribe"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_strerror(-EPERM), "offload candidate"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_strerror(-ESTALE), "earlier step"));
    CU_ASSERT_STRING_EQUAL(hoff_strerror(0), "success");
    CU_ASSERT_PTR_NOT_NULL(hoff_strerror(-12345));
    CU_ASSERT_PTR_NOT_NULL(hoff_strerror(5));
    /* File and disk errors read as the OS says: a missing file is not "no
     * such option", a full disk not the budget. */
    CU_ASSERT_STRING_EQUAL(hoff_strerror(-ENOENT), strerror(ENOENT));
    CU_ASSERT_STRING_EQUAL(hoff_strerror(-ENOSPC), strerror(ENOSPC));
    CU_ASSERT_STRING_EQUAL(hoff_strerror(-EACCES), strerror(EACCES));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_strerror(-EIO), strerror(EIO)));
    /* hoff's own conditions have codes of their own, above every errno. */
    CU_ASSERT(HOFF_EBUDGET > 4095 && HOFF_EHOSTCAP > 4095 && HOFF_EBUDGET != HOFF_EHOSTCAP);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_strerror(-HOFF_EBUDGET), "budget"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_strerror(-HOFF_EHOSTCAP), "HOFF_HOST_CAP"));
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
    open_ctx();
    CU_ASSERT_PTR_NOT_NULL(hoff_malloc(ctx, 100, S));
    CU_ASSERT_PTR_NOT_NULL(hoff_malloc_flags(ctx, 3 * MiB, S, HOFF_ALLOC_MANAGED));
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0); /* released, no crash, no leak under ASan */
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"init_errors", test_init_errors},
        {"init_from_env", test_init_from_env},
        {"pool_choice", test_pool_choice},
        {"candidate_flag", test_candidate_flag},
        {"step_stream", test_step_stream},
        {"sim_touch", test_sim_touch},
        {"malloc_free_errors", test_malloc_free_errors},
        {"zero_size", test_zero_size},
        {"release_on_failure", test_release_on_failure},
        {"device_pool_squeeze", test_device_pool_squeeze},
        {"marks", test_marks},
        {"sim_wallclock", test_sim_wallclock},
        {"stats", test_stats},
        {"strerror", test_strerror},
        {"cuda_backend_refuses_cleanly", test_cuda_backend_refuses_cleanly},
        {"leak_at_shutdown", test_leak_at_shutdown},
        {NULL, NULL},
    };
    return hoff_test_run("api", tests);
}
