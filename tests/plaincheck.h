/* plaincheck.h — one line per check for the cuda backend's plain-C suites, which run without CUnit
 * (tests/gpu/test_cuda.c on a GPU and on the CUDA runtime double, tests/cudart/test_*_double.c):
 * "ok   - what" or "FAIL - what", numbered ("ok    12 - what") where PLAINCHECK_NUMBERED is defined
 * before the include, counted in n_pass and n_fail for the suite's own summary line.  Header only:
 * tests/gpu/run.sh builds test_cuda.c by itself on a GPU machine.
 * Threading: the main thread only (plain counters). */
#ifndef HOFF_TESTS_PLAINCHECK_H
#define HOFF_TESTS_PLAINCHECK_H

#include <stdarg.h>
#include <stdio.h>

static int n_pass, n_fail;

/* Print the check's line and count it; returns ok, so that a caller can stop on a failed check. */
static inline int check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int check(int ok, const char *fmt, ...) {
    va_list ap;

#ifdef PLAINCHECK_NUMBERED
    printf("%s %3d - ", ok ? "ok  " : "FAIL", n_pass + n_fail + 1);
#else
    printf("%s - ", ok ? "ok  " : "FAIL");
#endif
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (ok)
        n_pass++;
    else
        n_fail++;
    return ok;
}

#endif
