/* test_schedule.c — a plan's schedule: its actions sorted (hoff__schedule_sort) and the residency check
 * (hoff__schedule_peak) that rejects a schedule using a block while it is away.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

static void test_schedule_sort(void) {
    /* (ev, when, kind, block) in a scrambled order; block ids number the
     * insertion order within equal keys. */
    static const uint32_t in[][4] = {
        {5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 1},    {5, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 2},
        {2, HOFF__ACT_AFTER, HOFF__ACT_PREFETCH, 3}, {5, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 4},
        {5, HOFF__ACT_BEFORE, HOFF__ACT_RELEASE, 5}, {5, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 6},
        {0, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 7},   {5, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 8},
        {2, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, 9},
    };
    static const uint32_t want[] = {7, 9, 3, 4, 5, 8, 2, 6, 1};
    struct hoff__schedule s;
    size_t i;

    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 0, 7, HOFF__ACT_EVICT, 0, 0), -EINVAL);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 0, HOFF__ACT_AFTER, HOFF__ACT_KIND_COUNT, 0, 0), -EINVAL);
    for (i = 0; i < sizeof in / sizeof in[0]; i++)
        CU_ASSERT_EQUAL(hoff__schedule_add(&s, in[i][0], (int)in[i][1], (int)in[i][2], in[i][3], 0), 0);
    hoff__schedule_sort(&s);
    CU_ASSERT_EQUAL_FATAL(s.nact, sizeof want / sizeof want[0]);
    for (i = 0; i < s.nact; i++)
        CU_ASSERT_EQUAL(s.act[i].block, want[i]);
    hoff__schedule_destroy(&s);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT_PTR_NULL(s.act);

    /* Many actions: grows, sorts stably. */
    {
        uint64_t rs = 7;

        for (i = 0; i < 5000; i++)
            CU_ASSERT_EQUAL(hoff__schedule_add(&s, (uint32_t)(hoff_test_rand(&rs) % 100),
                                               (int)(hoff_test_rand(&rs) % 2), (int)(hoff_test_rand(&rs) % 3),
                                               (uint32_t)i, 0),
                            0);
        hoff__schedule_sort(&s);
        for (i = 1; i < s.nact; i++) {
            const struct hoff__action *p = &s.act[i - 1], *a = &s.act[i];
            int pp = p->kind == HOFF__ACT_PREFETCH, ap = a->kind == HOFF__ACT_PREFETCH;

            CU_ASSERT(p->ev < a->ev ||
                      (p->ev == a->ev &&
                       (p->when < a->when || (p->when == a->when && (pp < ap || (pp == ap && p->block < a->block))))));
        }
        hoff__schedule_destroy(&s);
    }
}

static void test_schedule_peak_rejects(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint64_t peak, res[15];
    uint32_t pev, a, d, p, c;

    /* The op marks close the use windows, so that every rejected schedule
     * below is legal but for the one fault it names. */
    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100);          /* 0: a in use 0..4 */
    d = hoff_test_al_pool(&t, 0, 1000); /* 1 */
    hoff_test_region(&t, 1);            /* 2 */
    p = hoff_test_al(&t, 10);           /* 3 */
    hoff_test_region(&t, 0);            /* 4 */
    hoff_test_op(&t);                   /* 5: closes a's, d's and p's allocs */
    c = hoff_test_al(&t, 50);           /* 6: c in use 6..6 */
    hoff_test_op(&t);                   /* 7 */
    hoff_test_ac(&t, a, 0);             /* 8: a in use 8..9 */
    hoff_test_ac(&t, c, 0);             /* 9: c in use 9..9 */
    hoff_test_op(&t);                   /* 10 */
    hoff_test_fr(&t, a);                /* 11 */
    hoff_test_fr(&t, c);                /* 12 */
    hoff_test_fr(&t, d);                /* 13 */
    hoff_test_fr(&t, p);                /* 14 */
    hoff_test_fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.blocks[p].pinned, 1);

    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160); /* the device-pool block does not count, the pinned one does */
    CU_ASSERT_EQUAL(pev, 6);

#define REJECT(...)                                                         \
    do {                                                                    \
        s.nact = 0;                                                         \
        __VA_ARGS__;                                                        \
        CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), -EINVAL); \
    } while (0)
    REJECT(hoff__schedule_add(&s, 2, HOFF__ACT_AFTER, HOFF__ACT_EVICT, c, 0));     /* not born */
    REJECT(hoff__schedule_add(&s, 11, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0));    /* freed */
    REJECT(hoff__schedule_add(&s, 6, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* not away */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, d, 1));     /* device pool */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, p, 3));     /* pinned */
    REJECT(hoff__schedule_add(&s, 15, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0));    /* past the end */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 99, 0));    /* no such block */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
           hoff__schedule_add(&s, 6, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
           hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* twice */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, a, 0);
           hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* released */
    REJECT(hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0);
           hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0)); /* unsorted */
#undef REJECT

    /* Legal: away on 6..7 (AFTER 5 .. BEFORE 8), the peak moves to 8. */
    s.nact = 0;
    hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
    hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160);
    CU_ASSERT_EQUAL(pev, 8);
    /* Evicted once its last window has closed, and freed while away
     * (retained-style); released there too. */
    s.nact = 0;
    hoff__schedule_add(&s, 9, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 8);
    CU_ASSERT_EQUAL(hoff__schedule_resident(&t, &s, res, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160);
    CU_ASSERT_EQUAL(pev, 6);
    CU_ASSERT_EQUAL(res[9], 160);
    CU_ASSERT_EQUAL(res[10], 60);
    CU_ASSERT_EQUAL(res[11], 60);
    s.nact = 0;
    hoff__schedule_add(&s, 9, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, a, UINT32_MAX);
    CU_ASSERT_EQUAL(hoff__schedule_resident(&t, &s, res, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160);
    CU_ASSERT_EQUAL(pev, 6);
    CU_ASSERT_EQUAL(res[10], 60);
    CU_ASSERT_EQUAL(res[12], 60);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"schedule_sort", test_schedule_sort},
        {"schedule_peak_rejects", test_schedule_peak_rejects},
        {NULL, NULL},
    };
    return hoff_test_run("schedule", tests);
}
