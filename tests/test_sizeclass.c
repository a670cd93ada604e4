/* test_sizeclass.c — the size classes: tightest fit, rounding bounds, grain multiples, range.
 * Threading: single-threaded. */
#include "config.h"

#include <stdio.h>
#include <time.h>

#include "backend/backend.h"
#include "mem/sizeclass.h"
#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* Number of classes: the class of the largest size, plus one. */
static int class_count(void) {
    return hoff__sizeclass(HOFF__SIZECLASS_MAX_BYTES) + 1;
}

/* size maps to the smallest class that holds it. */
static int tightest(size_t size) {
    int c = hoff__sizeclass(size);
    if (c < 0 || hoff__sizeclass_bytes(c) < size)
        return 0;
    return c == 0 || hoff__sizeclass_bytes(c - 1) < size;
}

static void test_bounds(void) {
    int n = class_count();

    CU_ASSERT_EQUAL(hoff__sizeclass(0), -1);
    CU_ASSERT_EQUAL(hoff__sizeclass(HOFF__SIZECLASS_MAX_BYTES + 1), -1);
    CU_ASSERT_EQUAL(hoff__sizeclass((size_t)-1), -1);
    CU_ASSERT_EQUAL(hoff__sizeclass((size_t)1 << 63), -1);
    CU_ASSERT_EQUAL(hoff__sizeclass(1), 0);
    CU_ASSERT_EQUAL(hoff__sizeclass(512), 0);
    CU_ASSERT_EQUAL(hoff__sizeclass(513), 1);
    CU_ASSERT_EQUAL(hoff__sizeclass(8 * KiB), 15);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(15), 8 * KiB);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(16), 9 * KiB);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(hoff__sizeclass(2 * MiB)), 2 * MiB);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(hoff__sizeclass(2 * MiB + 1)), 4 * MiB);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(hoff__sizeclass(16 * MiB + 1)), 18 * MiB);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(n - 1), HOFF__SIZECLASS_MAX_BYTES);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(n), 0);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(-1), 0);
    CU_ASSERT_EQUAL(hoff__sizeclass_bytes(HOFF__SIZECLASS_COUNT), 0);
    CU_ASSERT(n <= HOFF__SIZECLASS_COUNT);
    CU_ASSERT_EQUAL(n, 271);
    printf("\n    %d size classes (HOFF__SIZECLASS_COUNT = %d)\n", n, HOFF__SIZECLASS_COUNT);
}

/* Every class: increasing, a 512 B multiple, 2 MiB multiple from 2 MiB on,
 * at most 12.5% above the one below (above 8 KiB, outside the 2..16 MiB band
 * where the grain forces steps of exactly 2 MiB), and its edges map right. */
static void test_classes(void) {
    int n = class_count(), c, bad = 0;

    for (c = 0; c < n; c++) {
        size_t b = hoff__sizeclass_bytes(c);
        size_t prev = c ? hoff__sizeclass_bytes(c - 1) : 0;

        if (b <= prev || b % HOFF__DEVICE_GRAIN)
            bad++;
        if (b >= 2 * MiB && b % HOFF__MANAGED_GRAIN)
            bad++;
        if (c < 16 && b != (size_t)(c + 1) * 512)
            bad++;
        if (prev >= 8 * KiB) {
            if (b > 2 * MiB && b <= 16 * MiB) {
                if (b - prev != HOFF__MANAGED_GRAIN)
                    bad++;
            } else if (b * 8 > prev * 9) {
                bad++;
            }
        }
        if (hoff__sizeclass(b) != c || hoff__sizeclass(prev + 1) != c)
            bad++;
        if (c + 1 < n && hoff__sizeclass(b + 1) != c + 1)
            bad++;
        if (bad) {
            CU_FAIL("bad class");
            printf("\n    class %d: %zu (previous %zu)\n", c, b, prev);
            return;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* Every size from 1 B to 16 MiB maps to its tightest class, the rounding
 * above 8 KiB is at most 12.5% (below 2 MiB of waste in the grain band),
 * and the class is non-decreasing in the size. */
static void test_exhaustive(void) {
    size_t s, worst_waste = 0;
    double worst_ratio = 0;
    int prev = 0, bad = 0;

    for (s = 1; s <= 16 * MiB; s++) {
        int c = hoff__sizeclass(s);
        size_t b = hoff__sizeclass_bytes(c);

        if (c < prev || c > prev + 1 || b < s || (c > 0 && hoff__sizeclass_bytes(c - 1) >= s)) {
            if (!bad++)
                printf("\n    size %zu -> class %d (%zu B)\n", s, c, b);
        }
        prev = c;
        if (s > 8 * KiB) {
            if (s > 2 * MiB) {
                if (b - s > worst_waste)
                    worst_waste = b - s;
            } else if ((b - s) * 8 > s) {
                bad++;
            } else if ((double)(b - s) / (double)s > worst_ratio) {
                worst_ratio = (double)(b - s) / (double)s;
            }
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(worst_waste < HOFF__MANAGED_GRAIN);
    CU_ASSERT(worst_ratio <= 0.125);
    printf("\n    worst rounding 8K..2M: %.4f; worst waste 2M..16M: %zu B\n", worst_ratio, worst_waste);
}

/* Above 16 MiB: every power of two and its neighbours, then random sizes
 * (uniform in log scale) up to the maximum. */
static void test_sampled_large(void) {
    uint64_t rng = 12345;
    int k, i, bad = 0;
    double worst = 0;

    for (k = 24; k <= 47; k++) {
        size_t p = (size_t)1 << k;
        for (i = -3; i <= 3; i++) {
            size_t s = p + (size_t)(ptrdiff_t)i;
            if (s > HOFF__SIZECLASS_MAX_BYTES) {
                CU_ASSERT_EQUAL(hoff__sizeclass(s), -1);
            } else if (!tightest(s)) {
                bad++;
            }
        }
    }
    for (i = 0; i < 2000000; i++) {
        uint64_t r = hoff_test_rand(&rng);
        int bits = 25 + (int)(r % 23); /* 2^24 < s <= 2^47 */
        size_t s = (size_t)(hoff_test_rand(&rng) >> (64 - bits));
        size_t b;

        if (s <= 16 * MiB || s > HOFF__SIZECLASS_MAX_BYTES)
            continue;
        if (!tightest(s)) {
            if (!bad++)
                printf("\n    size %zu -> class %d\n", s, hoff__sizeclass(s));
            continue;
        }
        b = hoff__sizeclass_bytes(hoff__sizeclass(s));
        if (b % HOFF__MANAGED_GRAIN)
            bad++;
        if ((double)(b - s) / (double)s > worst)
            worst = (double)(b - s) / (double)s;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(worst <= 0.125);
}

/* Not an assertion: the cost of one lookup (sanitizer builds are slower). */
static void test_speed(void) {
    uint64_t t0, t1;
    uint64_t rng = 7;
    size_t sizes[1024];
    volatile int sink = 0;
    int i, rep;
    double ns;

    for (i = 0; i < 1024; i++)
        sizes[i] = 1 + (size_t)(hoff_test_rand(&rng) >> (64 - 10 - (int)(i % 28)));
    t0 = hoff_test_now_ns();
    for (rep = 0; rep < 4096; rep++)
        for (i = 0; i < 1024; i++)
            sink += hoff__sizeclass(sizes[i]);
    t1 = hoff_test_now_ns();
    ns = (double)(t1 - t0) / (4096.0 * 1024.0);
    printf("\n    hoff__sizeclass: %.2f ns per call\n", ns);
    CU_ASSERT(sink != 0);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"bounds", test_bounds},
        {"classes", test_classes},
        {"exhaustive_16M", test_exhaustive},
        {"sampled_large", test_sampled_large},
        {"speed", test_speed},
        {NULL, NULL},
    };
    return hoff_test_run("sizeclass", tests);
}
