/* test_api_stats.c — what the public API reports on sim: the statistics struct and its JSON, and the error strings
 * (hoff_strerror).  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static void test_stats(void) {
    struct hoff_stats st;
    char buf[8192], small[16];
    void *a, *b;
    int n;

    ctx = hoff_test_open_sim(1ull << 30);
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

int main(void) {
    static const struct hoff_test tests[] = {
        {"stats", test_stats},
        {"strerror", test_strerror},
        {NULL, NULL},
    };
    return hoff_test_run("api_stats", tests);
}
