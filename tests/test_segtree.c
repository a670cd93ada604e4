/* test_segtree.c — the planner's segment tree (plan/segtree.h) against a plain array.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "plan/segtree.h"
#include "testutil.h"

/* The planners' segment tree against a plain array: random range adds (of
 * both signs), range maxima, the last leaf above a threshold, the top and
 * its first leaf, on sizes that are and are not powers of two. */
static void test_segtree(void) {
    static const uint32_t sizes[] = {1, 2, 3, 7, 8, 9, 64, 100, 1000};
    uint64_t rs = 0x5e97ee;
    size_t z;

    for (z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        uint32_t n = sizes[z], i, k;
        int64_t *v = malloc(n * sizeof *v);
        struct hoff__segtree sg;

        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        for (i = 0; i < n; i++)
            v[i] = (int64_t)(hoff_test_rand(&rs) % 1000);
        CU_ASSERT_EQUAL_FATAL(hoff__segtree_init(&sg, v, n), 0);
        for (k = 0; k < 2000; k++) {
            uint32_t l = (uint32_t)(hoff_test_rand(&rs) % n), r = (uint32_t)(hoff_test_rand(&rs) % n), x, pos;
            int64_t d = (int64_t)(hoff_test_rand(&rs) % 200) - 100, m = INT64_MIN, thr, top = INT64_MIN;
            uint32_t want = UINT32_MAX, arg = 0;
            int found;

            if (l > r)
                x = l, l = r, r = x;
            if (k % 2) {
                hoff__segtree_add(&sg, l, r, d);
                for (x = l; x <= r; x++)
                    v[x] += d;
            }
            for (x = l; x <= r; x++)
                m = v[x] > m ? v[x] : m;
            CU_ASSERT_EQUAL(hoff__segtree_max(&sg, l, r), m);
            thr = m - (int64_t)(hoff_test_rand(&rs) % 50) + (k % 7 == 0 ? 10 : 0);
            for (x = l; x <= r; x++)
                if (v[x] > thr)
                    want = x;
            found = hoff__segtree_last_above(&sg, l, r, thr, &pos);
            CU_ASSERT_EQUAL(found, want != UINT32_MAX);
            if (found && want != UINT32_MAX)
                CU_ASSERT_EQUAL(pos, want);
            for (x = 0; x < n; x++)
                if (v[x] > top)
                    top = v[x], arg = x;
            CU_ASSERT_EQUAL(hoff__segtree_top(&sg), top);
            CU_ASSERT_EQUAL(hoff__segtree_argmax(&sg), arg);
        }
        hoff__segtree_destroy(&sg);
        free(v);
    }
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"segtree", test_segtree},
        {NULL, NULL},
    };
    return hoff_test_run("segtree", tests);
}
