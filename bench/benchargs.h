/* benchargs.h — the command-line rules every program in bench/ shares: take an option's value, parse it as a whole
 * number, a real number, a size in bytes, a percentage or a comma-separated list, and print the usage.  A bad
 * argument always ends the program the same way: one line on stderr, "TOOL: OPTION: expected WHAT IS ACCEPTED,
 * got 'WHAT WAS GIVEN' (TOOL --help)", and exit status 2; -h/--help prints the usage on stdout and exits 0.
 * All functions are static inline (each program uses a few; none of the others is emitted), and a program that
 * parses sizes links libhoff_internal (hoff__parse_size).
 * Threading: single-threaded; call them from main before any other thread starts (they may call exit). */
#ifndef HOFF_BENCH_BENCHARGS_H
#define HOFF_BENCH_BENCHARGS_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* One program's argument vector and how it describes itself. */
struct bench_args {
    const char *tool;                                    /* the prefix of every message, e.g. "bench/alloc" */
    void (*usage)(FILE *f, const struct bench_args *ba); /* prints the usage text */
    int argc;
    char **argv;
    int i; /* the argument being parsed */
};

/* Prints "TOOL: MESSAGE (TOOL --help)" on stderr and exits with status 2. */
static inline void bench_args_fail(const struct bench_args *ba, const char *fmt, ...) HOFF__PRINTF(2, 3);
static inline void bench_args_fail(const struct bench_args *ba, const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "%s: ", ba->tool);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (%s --help)\n", ba->tool);
    exit(2);
}

/* A bad value of option opt: "TOOL: OPT: expected ACCEPTED, got 'GIVEN'", exit 2. */
static inline void bench_args_bad(const struct bench_args *ba, const char *opt, const char *given,
                                  const char *accepted) {
    bench_args_fail(ba, "%s: expected %s, got '%s'", opt, accepted, given);
}

/* The usage on stdout and exit 0 (-h, --help). */
static inline void bench_args_help(const struct bench_args *ba) {
    ba->usage(stdout, ba);
    exit(0);
}

/* An argument the program does not know (or an operand too many): said on stderr with the usage, exit 2. */
static inline void bench_args_unknown(const struct bench_args *ba, const char *arg) {
    fprintf(stderr, "%s: unknown argument '%s'\n", ba->tool, arg);
    ba->usage(stderr, ba);
    exit(2);
}

/* 1 when the current argument is opt (ba->i is left where it is). */
static inline int bench_args_is(const struct bench_args *ba, const char *opt) {
    return strcmp(ba->argv[ba->i], opt) == 0;
}

/* The value of the current option (the next argument; ba->i steps onto it); a missing or empty value fails. */
static inline const char *bench_args_value(struct bench_args *ba) {
    const char *opt = ba->argv[ba->i];

    if (ba->i + 1 >= ba->argc || !*ba->argv[ba->i + 1])
        bench_args_fail(ba, "%s needs a value", opt);
    return ba->argv[++ba->i];
}

/* s as a whole number in [lo, hi] (decimal, no sign, nothing after it), else fails naming opt. */
static inline unsigned long long bench_args_uint(const struct bench_args *ba, const char *opt, const char *s,
                                                 unsigned long long lo, unsigned long long hi) {
    char *end, what[96];
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || s[0] == '+' || s[0] == ' ' || v < lo || v > hi) {
        snprintf(what, sizeof what, "a whole number from %llu to %llu", lo, hi);
        bench_args_bad(ba, opt, s, what);
    }
    return v;
}

/* s as a finite real number in (lo, hi] (more than lo, at most hi), else fails naming opt with what (the unit,
 * e.g. "a time budget in ms"). */
static inline double bench_args_real(const struct bench_args *ba, const char *opt, const char *s, const char *what,
                                     double lo, double hi) {
    char *end, acc[160];
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || !(v > lo) || !(v <= hi)) {
        if (isinf(hi))
            snprintf(acc, sizeof acc, "%s (more than %.15g)", what, lo);
        else
            snprintf(acc, sizeof acc, "%s (more than %.15g, at most %.15g)", what, lo, hi);
        bench_args_bad(ba, opt, s, acc);
    }
    return v;
}

/* s as a percentage: a real number in (lo, hi], with or without a '%' after it. */
static inline double bench_args_pct(const struct bench_args *ba, const char *opt, const char *s, double lo, double hi) {
    char buf[64], *end;
    size_t n = strlen(s);
    double v;

    if (n == 0 || n >= sizeof buf)
        bench_args_bad(ba, opt, s, "a percentage");
    memcpy(buf, s, n + 1);
    if (buf[n - 1] == '%')
        buf[n - 1] = '\0';
    errno = 0;
    v = strtod(buf, &end);
    if (errno || end == buf || *end || !isfinite(v) || !(v > lo) || !(v <= hi)) {
        char acc[96];

        if (isinf(hi))
            snprintf(acc, sizeof acc, "a percentage (more than %.15g)", lo);
        else
            snprintf(acc, sizeof acc, "a percentage (more than %.15g, at most %.15g)", lo, hi);
        bench_args_bad(ba, opt, s, acc);
    }
    return v;
}

/* s as a size in bytes (hoff__parse_size: "4096", "64K", "1.5G", "2MiB") in [lo, hi] and a multiple of align (1:
 * any), else fails naming opt with accepted (e.g. "a size in bytes from 1 to 1T (e.g. 2G)"). */
static inline uint64_t bench_args_size(const struct bench_args *ba, const char *opt, const char *s, uint64_t lo,
                                       uint64_t hi, uint64_t align, const char *accepted) {
    uint64_t v;

    if (hoff__parse_size(s, &v) != 0 || v < lo || v > hi || v % align != 0)
        bench_args_bad(ba, opt, s, accepted);
    return v;
}

/* Splits the comma-separated list s into items[] (at most max, each non-empty), in buf (len bytes); returns the
 * count.  Fails naming opt when the list is too long for buf, has more than max items or an empty one. */
static inline int bench_args_list(const struct bench_args *ba, const char *opt, const char *s, char *buf, size_t len,
                                  char **items, int max) {
    char *p = buf;
    int n = 0;

    if (strlen(s) >= len)
        bench_args_fail(ba, "%s: expected a list of at most %zu characters, got '%.40s...'", opt, len - 1, s);
    strcpy(buf, s);
    for (;;) {
        char *comma = strchr(p, ',');

        if (comma)
            *comma = '\0';
        if (!*p || n == max)
            bench_args_fail(ba, "%s: expected at most %d non-empty items separated by commas, got '%s'", opt, max, s);
        items[n++] = p;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

#endif
