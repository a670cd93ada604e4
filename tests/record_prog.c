/* record_prog.c — a program for tests/record.sh to run under hoff-record: a known pattern of host allocations
 * through every entry point the preload wraps, with step, op, region and access marks found with dlsym.
 * Threading: single-threaded.  Usage: record_prog [--no-marks] [--lax] [--steps N] */
#include "config.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static int (*step_begin)(void);
static int (*step_end)(void);
static int (*mark_op)(const char *);
static int (*region_begin)(void);
static int (*region_end)(void);
static int64_t (*access_mark)(const void *, int);
static int lax; /* --lax: the threshold may leave a out */

static void *sym(const char *name) {
    return dlsym(RTLD_DEFAULT, name);
}

/* Touch the memory so the allocation is real. */
static void *fill(void *p, size_t n) {
    if (!p) {
        fprintf(stderr, "record_prog: allocation of %zu bytes failed\n", n);
        exit(1);
    }
    memset(p, 0xA5, n);
    return p;
}

/* One step: blocks 0..5 of the trace (in order): a (posix_memalign 2M), b (malloc 4M), c (calloc 3M),
 * c2 (realloc of c to 5M: c freed), d (aligned_alloc 1.5M, in a region), e (memalign 1M, retained). */
static void *one_step(int marks) {
    void *a, *b, *c, *d, *e, *small;

    if (marks)
        mark_op("fwd");
    if (posix_memalign(&a, 64, 2 * MiB) != 0)
        a = NULL;
    fill(a, 2 * MiB);
    b = fill(malloc(4 * MiB), 4 * MiB);
    c = calloc(3, MiB);
    fill(c, 3 * MiB);
    small = fill(malloc(100), 100); /* under the threshold: not recorded */
    c = fill(realloc(c, 5 * MiB), 5 * MiB);
    if (marks) {
        if (access_mark(a, 0) < 1 && !lax) {
            fprintf(stderr, "record_prog: hoff_record_access(a) did not find the block\n");
            exit(1);
        }
        if (access_mark(small, 0) >= 0) {
            fprintf(stderr, "record_prog: hoff_record_access(small) found a block\n");
            exit(1);
        }
        region_begin();
    }
    d = fill(aligned_alloc(4096, 3 * MiB / 2), 3 * MiB / 2);
    if (marks) {
        region_end();
        mark_op("bwd");
        access_mark(b, 1);
    }
    free(d);
    free(small);
    free(b);
    free(c);
    free(a);
    e = fill(memalign(256, MiB), MiB);
    return e; /* retained: alive at the step's end */
}

int main(int argc, char **argv) {
    int marks = 1, steps = 3, i;
    void *keep[64];

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-marks") == 0)
            marks = 0;
        else if (strcmp(argv[i], "--lax") == 0)
            lax = 1;
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: record_prog [--no-marks] [--lax] [--steps N]\n");
            return 2;
        }
    }
    if (steps < 1 || steps > 64)
        steps = 3;
    step_begin = (int (*)(void))sym("hoff_record_step_begin");
    step_end = (int (*)(void))sym("hoff_record_step_end");
    mark_op = (int (*)(const char *))sym("hoff_record_mark_op");
    region_begin = (int (*)(void))sym("hoff_record_region_begin");
    region_end = (int (*)(void))sym("hoff_record_region_end");
    access_mark = (int64_t(*)(const void *, int))sym("hoff_record_access");
    if (marks && !(step_begin && step_end && mark_op && region_begin && region_end && access_mark)) {
        fprintf(stderr, "record_prog: not running under hoff-record (no hoff_record_* symbols)\n");
        return 3;
    }
    for (i = 0; i < steps; i++) {
        if (marks)
            step_begin();
        keep[i] = one_step(marks);
        if (marks)
            step_end();
    }
    for (i = 0; i < steps; i++)
        free(keep[i]);
    return 0;
}
