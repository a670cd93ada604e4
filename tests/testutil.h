/* testutil.h — the CUnit runner every suite uses, and small helpers for tests.
 * Threading: call hoff_test_run from main only. */
#ifndef HOFF_TESTUTIL_H
#define HOFF_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stdint.h>

#include "hoff.h"

struct hoff_test {
    const char *name;
    void (*fn)(void);
};

/* Run the NULL-terminated list as one suite; returns the process exit code
 * (0 when every assertion passed).  HOFF_TEST=name runs just that test. */
int hoff_test_run(const char *suite, const struct hoff_test *tests);

/* Deterministic pseudo-random numbers (xorshift64*). */
uint64_t hoff_test_rand(uint64_t *state);

/* The configuration of a quiet sim context with a 1 GiB device, for tests
 * that want a context and nothing particular about it.  (Inline: test
 * programs that link no hoff library include this header too.) */
static inline struct hoff_config hoff_test_sim_config(void) {
    struct hoff_config cfg;

    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_SIM;
    cfg.sim_device_bytes = 1ull << 30;
    cfg.log_level = HOFF_LOG_OFF;
    return cfg;
}

#endif
