/* testutil.c — the CUnit runner every suite uses, and its random numbers.  The sim helpers of testutil.h are in
 * testsim.c: a program that does not link hoff (tests/cudart/test_double) links this file alone.
 * Threading: main thread only. */
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
