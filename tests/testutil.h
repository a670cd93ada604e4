/* testutil.h — the CUnit runner every suite uses, and small helpers for tests: random numbers, the clock, the byte
 * patterns a test writes into a block and checks later, the sim context most suites start from, its statistics, a
 * spill directory removed at exit; and the trace builders and schedule checks of the planner suites (testplan.c).
 * Threading: call hoff_test_run, hoff_test_open(_sim) and hoff_test_spill_dir from main (the test) thread only;
 * hoff_test_stats from any thread the context allows; the clock and the patterns from any thread (the patterns
 * touch only the memory they are given); the planner suites' helpers from the main thread only. */
#ifndef HOFF_TESTUTIL_H
#define HOFF_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hoff.h"

struct hoff_test {
    const char *name;
    void (*fn)(void);
};

/* Run the NULL-terminated list as one suite; returns the process exit code
 * (0 when every assertion passed).  HOFF_TEST=name runs just that test. */
int hoff_test_run(const char *suite, const struct hoff_test *tests);

/* Deterministic pseudo-random numbers (xorshift64*).  A state of 0 starts from a fixed nonzero one. */
uint64_t hoff_test_rand(uint64_t *state);

/* The clock id's time in ns (clock_gettime); hoff_test_now_ns and hoff_test_now_s are CLOCK_MONOTONIC's, in ns and
 * in seconds. */
uint64_t hoff_test_clock_ns(clockid_t id);
uint64_t hoff_test_now_ns(void);
double hoff_test_now_s(void);

/* Patterns: each fill writes one into n bytes at p, and its check (0 or 1 but for hoff_test_seq_bad) says whether
 * they still hold it.  Suites pick the one whose cost and coverage they need; the seed makes blocks differ.
 *
 * bytes: byte i is (unsigned char)(i * mul + seed), every byte written and checked. */
void hoff_test_fill_bytes(void *p, size_t n, unsigned mul, unsigned seed);
int hoff_test_bytes_ok(const void *p, size_t n, unsigned mul, unsigned seed);

/* rand: hoff_test_rand's stream from the given state, 8 bytes a number (native byte order), then one byte a number
 * for the last n % 8 bytes; p need not be aligned. */
void hoff_test_fill_rand(void *p, size_t n, uint64_t state);
int hoff_test_rand_ok(const void *p, size_t n, uint64_t state);

/* seq: 64-bit word i of the n / 8 words at p (8-byte aligned) is seed * 0x9E3779B97F4A7C15 + i; a trailing n % 8
 * bytes are left alone.  hoff_test_seq_bad returns 0 when every word holds, else the first wrong word's index + 1. */
void hoff_test_fill_seq(void *p, size_t n, uint64_t seed);
size_t hoff_test_seq_bad(const void *p, size_t n, uint64_t seed);

/* stamps: cheap and sparse; only every stride-th 64-bit word i of the n / 8 words at p (8-byte aligned) is written,
 * with v + i (stride 512 stamps each 4 KiB page once). */
void hoff_test_stamp(void *p, size_t n, size_t stride, uint64_t v);
int hoff_test_stamped(const void *p, size_t n, size_t stride, uint64_t v);

/* The configuration a suite on the sim starts from: hoff's defaults with the sim backend, a device of device_bytes
 * (a capacity, not an allocation; 0 keeps the sim's default), no oversubscription margin, and only errors logged.
 * The suite then sets what it tests. */
struct hoff_config hoff_test_sim_config(uint64_t device_bytes);

/* hoff_test_sim_config(device_bytes) for a suite that records a step and replays the next: a budget of budget_bytes
 * (0: none) and plan_thread 0, so that the plan is made inside the recorded step's hoff_step_end and the next step
 * replays it (with the planning thread, steps would keep the budget online until the plan is ready). */
struct hoff_config hoff_test_replay_config(uint64_t device_bytes, uint64_t budget_bytes);

/* hoff_init on cfg.  When it fails, the running test fails (fatally, with hoff's message) and NULL is returned. */
hoff_ctx *hoff_test_open(const struct hoff_config *cfg);

/* hoff_test_open on hoff_test_sim_config(device_bytes) as it is. */
hoff_ctx *hoff_test_open_sim(uint64_t device_bytes);

/* The context's statistics (hoff_stats_get); a failure fails the running test. */
struct hoff_stats hoff_test_stats(hoff_ctx *ctx);

/* A directory for spill files, made on the first call as hoff-TAG-XXXXXX on a real disk when there is one (the
 * first of $TMPDIR, /var/tmp, the current directory and /tmp where it can be made) and removed at exit (when the
 * suite left it empty, as every context does at shutdown).  Exits 99 when none can be made. */
const char *hoff_test_spill_dir(const char *tag);

/* The environment the torch entry points' contexts read (they take no config): the sim with a 4 GiB device, no
 * log, plans made at the step's end (so a suite's counts are exact), no budget.  Call from main before the tests. */
void hoff_test_torch_env(void);

/* --- the planner suites (testplan.c; a program that uses these links it) -------------------------------------
 * Steps built event by event, as the recorder would write them: hoff_test_trace_begin starts an empty trace (and
 * closes every region), hoff_test_al / hoff_test_al_pool append an allocation (pool 1, the managed pool, for
 * hoff_test_al; pinned while a region is open) and return its block, hoff_test_fr a free, hoff_test_ac an access
 * (write: 1), hoff_test_op / hoff_test_ops one or n op marks, hoff_test_op_named a named op mark, hoff_test_region
 * a region's begin (1) or end (0) (hoff_test_region_depth: how many are open), hoff_test_push any event
 * (timestamps and name filled in), hoff_test_fin finishes the trace.  Any failure fails the running test fatally. */
struct hoff__trace;
struct hoff__tev;
struct hoff__schedule;
struct hoff__action;
void hoff_test_trace_begin(struct hoff__trace *t);
void hoff_test_push(struct hoff__trace *t, struct hoff__tev *e);
uint32_t hoff_test_al_pool(struct hoff__trace *t, int pool, uint64_t size);
uint32_t hoff_test_al(struct hoff__trace *t, uint64_t size);
void hoff_test_fr(struct hoff__trace *t, uint32_t b);
void hoff_test_ac(struct hoff__trace *t, uint32_t b, int write);
void hoff_test_op(struct hoff__trace *t);
void hoff_test_ops(struct hoff__trace *t, int n);
void hoff_test_op_named(struct hoff__trace *t, const char *name);
void hoff_test_region(struct hoff__trace *t, int begin);
int hoff_test_region_depth(void);
void hoff_test_fin(struct hoff__trace *t);

/* Schedules: hoff_test_count counts the actions of kind on block, hoff_test_one returns the only one (fatal when
 * there is not exactly one), hoff_test_in_use says whether block b is in a use window at event x (from the raw
 * events).  hoff_test_check_schedule checks what every greedy schedule must satisfy (sorted, the residency check
 * agrees with the planner's peak, feasibility, traffic, nothing away when used, nothing leaving inside a use
 * window).  hoff_test_plan_g plans t with the greedy planner for budget and guard margins ga (after an
 * allocation) and gb (before a free) into s (initialised here) and checks it; hoff_test_plan is it without guard
 * margins; hoff_test_plan_build plans through hoff__plan_build (below the working-set floor it plans for the
 * floor). */
int hoff_test_count(const struct hoff__schedule *s, int kind, uint32_t block);
const struct hoff__action *hoff_test_one(const struct hoff__schedule *s, int kind, uint32_t block);
int hoff_test_in_use(const struct hoff__trace *t, uint32_t b, uint32_t x);
void hoff_test_check_schedule(const struct hoff__trace *t, const struct hoff__schedule *s);
void hoff_test_plan_g(const struct hoff__trace *t, uint64_t budget, uint32_t ga, uint32_t gb, struct hoff__schedule *s);
void hoff_test_plan(const struct hoff__trace *t, uint64_t budget, struct hoff__schedule *s);
void hoff_test_plan_build(const struct hoff__trace *t, uint64_t budget, struct hoff__schedule *s);

#endif
