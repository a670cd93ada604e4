/* testutil.c — the CUnit runner every suite uses, its random numbers, the clock and the byte patterns of
 * testutil.h.  The sim helpers of testutil.h are in testsim.c: a program that does not link hoff
 * (tests/cudart/test_double) links this file alone.
 * Threading: hoff_test_run from the main thread only; the rest from any thread. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int hoff_test_run(const char *suite, const struct hoff_test *tests) {
    const char *only = getenv("HOFF_TEST");
    CU_pSuite s;
    unsigned failed;

    if (CU_initialize_registry() != CUE_SUCCESS)
        return 99;
    s = CU_add_suite(suite, NULL, NULL);
    if (!s)
        return 99;
    for (; tests->name; tests++) {
        if (only && strcmp(only, tests->name) != 0)
            continue;
        if (!CU_add_test(s, tests->name, tests->fn))
            return 99;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

uint64_t hoff_test_rand(uint64_t *state) {
    uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

uint64_t hoff_test_clock_ns(clockid_t id) {
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hoff_test_now_ns(void) {
    return hoff_test_clock_ns(CLOCK_MONOTONIC);
}

double hoff_test_now_s(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void hoff_test_fill_bytes(void *p, size_t n, unsigned mul, unsigned seed) {
    unsigned char *c = p;
    size_t i;

    for (i = 0; i < n; i++)
        c[i] = (unsigned char)(i * mul + seed);
}

int hoff_test_bytes_ok(const void *p, size_t n, unsigned mul, unsigned seed) {
    const unsigned char *c = p;
    size_t i;

    for (i = 0; i < n; i++)
        if (c[i] != (unsigned char)(i * mul + seed))
            return 0;
    return 1;
}

void hoff_test_fill_rand(void *p, size_t n, uint64_t state) {
    unsigned char *c = p;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t v = hoff_test_rand(&state);
        memcpy(c + i, &v, 8);
    }
    for (; i < n; i++)
        c[i] = (unsigned char)hoff_test_rand(&state);
}

int hoff_test_rand_ok(const void *p, size_t n, uint64_t state) {
    const unsigned char *c = p;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t v = hoff_test_rand(&state);
        if (memcmp(c + i, &v, 8) != 0)
            return 0;
    }
    for (; i < n; i++)
        if (c[i] != (unsigned char)hoff_test_rand(&state))
            return 0;
    return 1;
}

void hoff_test_fill_seq(void *p, size_t n, uint64_t seed) {
    uint64_t *w = p;
    size_t i;

    for (i = 0; i < n / 8; i++)
        w[i] = seed * 0x9E3779B97F4A7C15ull + i;
}

size_t hoff_test_seq_bad(const void *p, size_t n, uint64_t seed) {
    const uint64_t *w = p;
    size_t i;

    for (i = 0; i < n / 8; i++)
        if (w[i] != seed * 0x9E3779B97F4A7C15ull + i)
            return i + 1;
    return 0;
}

void hoff_test_stamp(void *p, size_t n, size_t stride, uint64_t v) {
    uint64_t *w = p;
    size_t i;

    for (i = 0; i < n / 8; i += stride)
        w[i] = v + i;
}

int hoff_test_stamped(const void *p, size_t n, size_t stride, uint64_t v) {
    const uint64_t *w = p;
    size_t i;

    for (i = 0; i < n / 8; i += stride)
        if (w[i] != v + i)
            return 0;
    return 1;
}

void hoff_test_torch_env(void) {
    setenv("HOFF_BACKEND", "sim", 1);
    setenv("HOFF_SIM_DEVICE", "4G", 1);
    setenv("HOFF_LOG_LEVEL", "off", 1);
    setenv("HOFF_PLAN_THREAD", "0", 1);
    unsetenv("HOFF_BUDGET");
}
