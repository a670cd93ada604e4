/* testutil.h — the CUnit runner every suite uses, and small helpers for tests: the sim context most suites start
 * from, its statistics, a spill directory removed at exit.
 * Threading: call hoff_test_run, hoff_test_open and hoff_test_spill_dir from main (the test) thread only;
 * hoff_test_stats from any thread the context allows. */
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

/* The configuration a suite on the sim starts from: hoff's defaults with the sim backend, a device of device_bytes
 * (a capacity, not an allocation; 0 keeps the sim's default), no oversubscription margin, and only errors logged.
 * The suite then sets what it tests. */
struct hoff_config hoff_test_sim_config(uint64_t device_bytes);

/* hoff_init on cfg.  When it fails, the running test fails (fatally, with hoff's message) and NULL is returned. */
hoff_ctx *hoff_test_open(const struct hoff_config *cfg);

/* The context's statistics (hoff_stats_get); a failure fails the running test. */
struct hoff_stats hoff_test_stats(hoff_ctx *ctx);

/* A directory for spill files, made on the first call as hoff-TAG-XXXXXX on a real disk when there is one (the
 * first of $TMPDIR, /var/tmp, the current directory and /tmp where it can be made) and removed at exit (when the
 * suite left it empty, as every context does at shutdown).  Exits 99 when none can be made. */
const char *hoff_test_spill_dir(const char *tag);

#endif
