/* test_pool.c — the caching pool: size classes in use, slab segments, stream-ordered reuse, trimming.
 * Threading: single-threaded; a fake backend whose events complete only when the test says so. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "mem/pool.h"
#include "testutil.h"

/* --- a fake backend -------------------------------------------------------- */

struct hoff__event {
    int recorded;
    int complete;
    hoff_stream s;
};

static struct {
    struct hoff__backend be;
    uint64_t mapped, maps, unmaps, records;
    uint64_t limit; /* refuse maps above this many bytes */
    struct hoff__event *evs[64];
    int nevs;
} fk;

static int fk_mem_info(struct hoff__backend *be, uint64_t *f, uint64_t *t) {
    *t = fk.limit;
    *f = fk.limit - fk.mapped;
    return 0;
}
static int fk_alloc(struct hoff__backend *be, size_t size, void **out) {
    if (fk.mapped + size > fk.limit)
        return -ENOMEM;
    *out = aligned_alloc(HOFF__MANAGED_GRAIN, hoff__align_up(size, HOFF__MANAGED_GRAIN));
    if (!*out)
        return -ENOMEM;
    fk.mapped += size;
    fk.maps++;
    return 0;
}
static int fk_free(struct hoff__backend *be, void *p, size_t size) {
    free(p);
    fk.mapped -= size;
    fk.unmaps++;
    return 0;
}
static int fk_ev_create(struct hoff__backend *be, hoff__event **out) {
    *out = calloc(1, sizeof **out);
    fk.evs[fk.nevs++] = *out;
    return *out ? 0 : -ENOMEM;
}
static void fk_ev_destroy(struct hoff__backend *be, hoff__event *ev) {
    int i;
    for (i = 0; i < fk.nevs; i++)
        if (fk.evs[i] == ev)
            fk.evs[i] = fk.evs[--fk.nevs];
    free(ev);
}
static int fk_ev_record(struct hoff__backend *be, hoff__event *ev, hoff_stream s) {
    ev->recorded = 1;
    ev->complete = 0;
    ev->s = s;
    fk.records++;
    return 0;
}
static int fk_ev_query(struct hoff__backend *be, hoff__event *ev) {
    return !ev->recorded || ev->complete ? 0 : -EAGAIN;
}

static const struct hoff__backend_ops fk_ops = {
    .name = "fake",
    .mem_info = fk_mem_info,
    .dev_alloc = fk_alloc,
    .dev_free = fk_free,
    .managed_alloc = fk_alloc,
    .managed_free = fk_free,
    .event_create = fk_ev_create,
    .event_destroy = fk_ev_destroy,
    .event_record = fk_ev_record,
    .event_query = fk_ev_query,
};

/* Complete every event recorded on stream s. */
static void complete_stream(hoff_stream s) {
    int i;
    for (i = 0; i < fk.nevs; i++)
        if (fk.evs[i]->recorded && fk.evs[i]->s == s)
            fk.evs[i]->complete = 1;
}

static struct hoff__pool pool;
#define S1 ((hoff_stream)0x1)
#define S2 ((hoff_stream)0x2)

static void setup(int kind) {
    memset(&fk, 0, sizeof fk);
    fk.be.ops = &fk_ops;
    fk.limit = (uint64_t)1 << 32;
    hoff__pool_init(&pool, kind, &fk.be, NULL, NULL);
}

static void teardown(void) {
    hoff__pool_destroy(&pool);
    CU_ASSERT_EQUAL(fk.mapped, 0);
}

static struct hoff__block *get(size_t size, hoff_stream s) {
    int err = 0;
    struct hoff__block *b = hoff__pool_get(&pool, hoff__pool_class(&pool, size), s, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(err, 0);
    CU_ASSERT(b->size >= size);
    return b;
}

/* --- tests ----------------------------------------------------------------- */

static void test_same_stream_reuse(void) {
    struct hoff__block *a, *b;

    setup(HOFF__POOL_DEVICE);
    a = get(3 << 20, S1);
    CU_ASSERT_EQUAL(pool.misses, 1);
    hoff__pool_put(&pool, a, S1);
    b = get(3 << 20, S1);
    CU_ASSERT_PTR_EQUAL(b, a); /* at once, no event needed */
    CU_ASSERT_EQUAL(pool.hits, 1);
    CU_ASSERT_EQUAL(fk.records, 0);
    hoff__pool_put(&pool, b, S1);
    teardown();
}

static void test_class_rounding(void) {
    struct hoff__block *a, *b;

    setup(HOFF__POOL_DEVICE);
    a = get(5 << 20, S1);
    hoff__pool_put(&pool, a, S1);
    b = get((5 << 20) - 1000, S1); /* same class: reused */
    CU_ASSERT_PTR_EQUAL(b, a);
    hoff__pool_put(&pool, b, S1);
    b = get(9 << 20, S1); /* another class: a new mapping */
    CU_ASSERT_PTR_NOT_EQUAL(b, a);
    CU_ASSERT_EQUAL(pool.misses, 2);
    hoff__pool_put(&pool, b, S1);
    teardown();
}

static void test_cross_stream_waits_for_fence(void) {
    struct hoff__block *a, *b, *c;

    setup(HOFF__POOL_DEVICE);
    a = get(4 << 20, S1);
    hoff__pool_put(&pool, a, S1);
    /* S2 may not take it before S1 has passed the free: a fence is recorded
     * on S1 and, while it is pending, S2 gets new memory. */
    b = get(4 << 20, S2);
    CU_ASSERT_PTR_NOT_EQUAL(b, a);
    CU_ASSERT_EQUAL(fk.records, 1);
    c = get(4 << 20, S2);
    CU_ASSERT_PTR_NOT_EQUAL(c, a);
    CU_ASSERT_EQUAL(fk.records, 1); /* the pending fence is not recorded again */
    complete_stream(S1);
    hoff__pool_put(&pool, b, S2);
    hoff__pool_put(&pool, c, S2);
    /* S2 prefers its own frees... */
    b = get(4 << 20, S2);
    CU_ASSERT(b != a);
    c = get(4 << 20, S2);
    CU_ASSERT(c != a);
    /* ...and then takes S1's block once the fence completed. */
    a = get(4 << 20, S2);
    CU_ASSERT_EQUAL(pool.cross_stream, 1);
    hoff__pool_put(&pool, a, S2);
    hoff__pool_put(&pool, b, S2);
    hoff__pool_put(&pool, c, S2);
    teardown();
}

static void test_fence_covers_only_earlier_frees(void) {
    struct hoff__block *a, *b, *x;

    setup(HOFF__POOL_DEVICE);
    a = get(4 << 20, S1);
    b = get(4 << 20, S1);
    hoff__pool_put(&pool, a, S1);
    x = get(4 << 20, S2); /* records a fence covering a's free */
    complete_stream(S1);
    hoff__pool_put(&pool, b, S1); /* freed after the fence */
    {
        struct hoff__block *y = get(4 << 20, S2);
        CU_ASSERT_PTR_EQUAL(y, a); /* the oldest, fenced */
        hoff__pool_put(&pool, y, S2);
    }
    hoff__pool_put(&pool, x, S2);
    teardown();
}

static void test_slab_small_blocks(void) {
    struct hoff__block *bs[5000];
    int i;

    setup(HOFF__POOL_DEVICE);
    for (i = 0; i < 5000; i++) {
        bs[i] = get(700, S1); /* class 1 KiB: 2048 per segment */
        CU_ASSERT(bs[i]->flags & HOFF__BLK_SLAB);
    }
    CU_ASSERT_EQUAL(fk.maps, 3);
    CU_ASSERT_EQUAL(pool.mapped_bytes, 3 * HOFF__SLAB_SEG);
    for (i = 0; i < 5000; i++)
        hoff__pool_put(&pool, bs[i], S1);
    /* Slots are fenced on their own stream only after a fence_all. */
    hoff__pool_fence_all(&pool);
    CU_ASSERT_EQUAL(hoff__pool_trim(&pool), 3 * HOFF__SLAB_SEG);
    CU_ASSERT_EQUAL(pool.mapped_bytes, 0);
    CU_ASSERT_EQUAL(pool.cached_bytes, 0);
    teardown();
}

static void test_trim_keeps_live_segments(void) {
    struct hoff__block *a, *b, *big;

    setup(HOFF__POOL_DEVICE);
    a = get(4096, S1);
    b = get(4096, S1);
    big = get(64 << 20, S1);
    hoff__pool_put(&pool, a, S1);
    hoff__pool_put(&pool, big, S1);
    hoff__pool_fence_all(&pool);
    CU_ASSERT_EQUAL(hoff__pool_trim(&pool), hoff__sizeclass_bytes(hoff__sizeclass(64 << 20)));
    CU_ASSERT_EQUAL(pool.mapped_bytes, HOFF__SLAB_SEG); /* b still lives there */
    hoff__pool_put(&pool, b, S1);
    hoff__pool_fence_all(&pool);
    CU_ASSERT_EQUAL(hoff__pool_trim(&pool), HOFF__SLAB_SEG);
    teardown();
}

static void test_trim_skips_unfenced(void) {
    struct hoff__block *a;

    setup(HOFF__POOL_DEVICE);
    a = get(8 << 20, S1);
    hoff__pool_put(&pool, a, S1);
    CU_ASSERT_EQUAL(hoff__pool_trim(&pool), 0); /* S1 has not passed the free */
    hoff__pool_fence_all(&pool);
    CU_ASSERT(hoff__pool_trim(&pool) > 0);
    teardown();
}

static void test_managed_grain(void) {
    struct hoff__block *a;

    setup(HOFF__POOL_MANAGED);
    a = get(1 << 20, S1); /* below the grain: a whole 2 MiB block */
    CU_ASSERT_EQUAL(a->size, HOFF__MANAGED_GRAIN);
    CU_ASSERT_EQUAL((uintptr_t)a->ptr % HOFF__MANAGED_GRAIN, 0);
    CU_ASSERT(!(a->flags & HOFF__BLK_SLAB));
    hoff__pool_put(&pool, a, S1);
    a = get((6 << 20) + 1, S1);
    CU_ASSERT_EQUAL(a->size % HOFF__MANAGED_GRAIN, 0);
    hoff__pool_put(&pool, a, S1);
    teardown();
}

static int refuse_calls;
static int refuse(void *arg, size_t bytes) {
    refuse_calls++;
    return bytes > *(size_t *)arg ? -EOVERFLOW : 0;
}

static void test_map_check_refuses(void) {
    size_t max = 8 << 20;
    struct hoff__block *a;
    int err = 0;

    setup(HOFF__POOL_MANAGED);
    pool.check = refuse;
    pool.check_arg = &max;
    a = get(8 << 20, S1);
    CU_ASSERT_PTR_NULL(hoff__pool_get(&pool, hoff__pool_class(&pool, 16 << 20), S1, &err));
    CU_ASSERT_EQUAL(err, -EOVERFLOW);
    CU_ASSERT_EQUAL(refuse_calls, 2);
    hoff__pool_put(&pool, a, S1);
    teardown();
}

static void test_backend_oom(void) {
    struct hoff__block *a;
    int err = 0;

    setup(HOFF__POOL_DEVICE);
    fk.limit = 16 << 20;
    a = get(12 << 20, S1);
    CU_ASSERT_PTR_NULL(hoff__pool_get(&pool, hoff__pool_class(&pool, 8 << 20), S1, &err));
    CU_ASSERT_EQUAL(err, -ENOMEM);
    CU_ASSERT_EQUAL(pool.in_use_bytes, a->size);
    hoff__pool_put(&pool, a, S1);
    teardown();
}

static void test_accounting(void) {
    struct hoff__block *bs[64];
    uint64_t want = 0;
    int i;

    setup(HOFF__POOL_DEVICE);
    for (i = 0; i < 64; i++) {
        bs[i] = get((size_t)(i + 1) * 100000, i & 1 ? S1 : S2);
        want += bs[i]->size;
    }
    CU_ASSERT_EQUAL(pool.in_use_bytes, want);
    for (i = 0; i < 64; i++)
        hoff__pool_put(&pool, bs[i], S1);
    CU_ASSERT_EQUAL(pool.in_use_bytes, 0);
    CU_ASSERT_EQUAL(pool.cached_bytes, want);
    teardown();
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"same_stream_reuse", test_same_stream_reuse},
        {"class_rounding", test_class_rounding},
        {"cross_stream_waits_for_fence", test_cross_stream_waits_for_fence},
        {"fence_covers_only_earlier_frees", test_fence_covers_only_earlier_frees},
        {"slab_small_blocks", test_slab_small_blocks},
        {"trim_keeps_live_segments", test_trim_keeps_live_segments},
        {"trim_skips_unfenced", test_trim_skips_unfenced},
        {"managed_grain", test_managed_grain},
        {"map_check_refuses", test_map_check_refuses},
        {"backend_oom", test_backend_oom},
        {"accounting", test_accounting},
        {NULL, NULL},
    };
    return hoff_test_run("pool", tests);
}
