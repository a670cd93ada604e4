/* testutil.h — the CUnit runner every suite uses, and small helpers for tests.
 * Threading: call hoff_test_run from main only. */
#ifndef HOFF_TESTUTIL_H
#define HOFF_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stdint.h>

struct hoff_test {
    const char *name;
    void (*fn)(void);
};

/* Run the NULL-terminated list as one suite; returns the process exit code
 * (0 when every assertion passed).  HOFF_TEST=name runs just that test. */
int hoff_test_run(const char *suite, const struct hoff_test *tests);

/* Deterministic pseudo-random numbers (xorshift64*). */
uint64_t hoff_test_rand(uint64_t *state);

#endif
