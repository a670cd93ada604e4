/* test_windows.c — use windows in autograd's real order, on the sim with every page that is not resident
 * poisoned and protected (PROT_NONE): the marks come before the kernels that use the blocks, and those
 * kernels run late (after everything queued before them).  No read may see a wrong byte or hit a protected
 * page, with greedy and timed, budgets of none, 100, 50, 25 and 10% of the step's peak, access marks on and
 * off; and the runtime's own use-window books (residency.c) refuse moves inside a window.
 * Threading: single-threaded (the sim's issuing thread runs beside it). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define LAYERS 6
#define ACT (4 * MiB)
#define STEPS 4
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

/* --- reads that survive a protected page ---------------------------------- */

static sigjmp_buf jump;
static volatile sig_atomic_t reading;

static void on_segv(int sig) {
    if (!reading) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    siglongjmp(jump, 1);
}

struct tally {
    uint64_t reads, wrong, faults;
};

static unsigned char pat(uint64_t seed, size_t i) {
    return (unsigned char)((seed * 0x9E3779B97F4A7C15ull + i * 131u) >> 29);
}

static void fill(void *p, size_t n, uint64_t seed) {
    unsigned char *c = p;
    size_t i;

    for (i = 0; i < n; i += 4096)
        c[i] = pat(seed, i);
    c[n - 1] = pat(seed, n - 1);
}

/* The kernel's read of p: counts a wrong byte or a protected page. */
static void kernel_read(struct tally *t, const void *p, size_t n, uint64_t seed) {
    const volatile unsigned char *c = p;
    size_t i;

    t->reads++;
    reading = 1;
    if (sigsetjmp(jump, 1)) {
        reading = 0;
        t->faults++;
        return;
    }
    for (i = 0; i < n; i += 4096)
        if (c[i] != pat(seed, i))
            break;
    if (i < n || c[n - 1] != pat(seed, n - 1))
        t->wrong++;
    reading = 0;
}

/* The kernels of the op run now, after everything queued before them: the
 * worst case of "later, asynchronously". */
static void kernels_run_late(void) {
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, 200000), 0);
}

/* --- one training step in autograd's order -------------------------------- */

static void mark(void *p, int write, int marks) {
    if (marks)
        CU_ASSERT_EQUAL(hoff_access(ctx, p, write, S), 0);
}

/* Forward, op l: its input is packed (saved for backward) BEFORE the op's
 * kernel is launched, then the op allocates its output, then the kernel
 * reads the input and writes the output, then the output is packed.
 * Backward, op l: unpack the saved activation, allocate the gradient, the
 * kernel reads the activation late, then the activation and gradient die. */
static void step(int marks, uint64_t k, struct tally *t) {
    void *act[LAYERS + 1], *grad;
    int l;

    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "input"), 0);
    act[0] = hoff_malloc(ctx, ACT, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(act[0]);
    fill(act[0], ACT, k << 8);
    mark(act[0], 1, marks);
    for (l = 1; l <= LAYERS; l++) {
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, "forward"), 0);
        mark(act[l - 1], 0, marks); /* pack the input: before the kernel */
        act[l] = hoff_malloc(ctx, ACT, S);
        CU_ASSERT_PTR_NOT_NULL_FATAL(act[l]);
        kernels_run_late();
        kernel_read(t, act[l - 1], ACT, k << 8 | (uint64_t)(l - 1));
        fill(act[l], ACT, k << 8 | (uint64_t)l);
        mark(act[l], 1, marks); /* pack the output: after the kernel */
    }
    for (l = LAYERS; l >= 0; l--) {
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, "backward"), 0);
        mark(act[l], 0, marks);          /* unpack */
        grad = hoff_malloc(ctx, ACT, S); /* the backward formula's output */
        CU_ASSERT_PTR_NOT_NULL_FATAL(grad);
        kernels_run_late();
        kernel_read(t, act[l], ACT, k << 8 | (uint64_t)l);
        fill(grad, ACT, 0);
        CU_ASSERT_EQUAL(hoff_free(ctx, act[l], S), 0);
        CU_ASSERT_EQUAL(hoff_free(ctx, grad, S), 0);
    }
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
}

static void run(const char *planner, int pct, int marks) {
    /* the step's peak: every activation and one gradient, 2 MiB-aligned */
    const uint64_t peak = (uint64_t)(LAYERS + 2) * ACT;
    struct hoff_config cfg;
    struct hoff_stats st;
    struct tally t;
    char err[256];
    uint64_t k;

    cfg = hoff_test_replay_config(1ull << 30, pct ? peak * (uint64_t)pct / 100 : 0);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    cfg.log_level = HOFF_LOG_OFF;
    CU_ASSERT_EQUAL_FATAL(hoff_config_set(&cfg, "planner", planner, err, sizeof err), 0);
    ctx = hoff_test_open(&cfg);
    memset(&t, 0, sizeof t);
    for (k = 0; k < STEPS; k++)
        step(marks, k + 1, &t);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    if (t.wrong || t.faults || st.window_violations)
        fprintf(stderr,
                "\n  %s at %d%%, marks %s: %" PRIu64 " reads, %" PRIu64 " wrong, %" PRIu64
                " on protected pages, %" PRIu64 " window violations\n",
                planner, pct, marks ? "on" : "off", t.reads, t.wrong, t.faults, st.window_violations);
    CU_ASSERT_EQUAL(t.reads, (uint64_t)STEPS * (2 * LAYERS + 1));
    CU_ASSERT_EQUAL(t.wrong, 0);
    CU_ASSERT_EQUAL(t.faults, 0);
    CU_ASSERT_EQUAL(st.window_violations, 0);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    if (marks && pct && pct < 100)
        CU_ASSERT(st.bytes_evicted > 0); /* below the peak something moved */
    if (!marks)
        CU_ASSERT_EQUAL(st.bytes_evicted, 0); /* nothing says when a block is unused */
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

static void test_autograd_order(void) {
    static const char *const planners[] = {"greedy", "timed"};
    static const int pcts[] = {0, 100, 50, 25, 10};
    size_t p, b;
    int marks;

    for (p = 0; p < 2; p++)
        for (b = 0; b < sizeof pcts / sizeof pcts[0]; b++)
            for (marks = 1; marks >= 0; marks--)
                run(planners[p], pcts[b], marks);
}

/* --- the runtime's books ---------------------------------------------------- */

static void open_plain(uint64_t budget) {
    struct hoff_config cfg;

    cfg = hoff_test_replay_config(1ull << 30, budget);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    cfg.log_level = HOFF_LOG_OFF;
    ctx = hoff_test_open(&cfg);
}

/* The online policy never picks a block in its use window: with every
 * resident block in use, an allocation goes over the budget (counted)
 * rather than move one; once the op ends, the least recently used goes. */
static void test_online_skips_windows(void) {
    struct hoff_stats st;
    void *a, *b, *c;

    open_plain(4 * MiB);
    a = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 1, S), 0);
    b = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_EQUAL(hoff_access(ctx, b, 1, S), 0);
    c = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED); /* a and b in use: over */
    CU_ASSERT_EQUAL(hoff_residency(ctx, a), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(hoff_residency(ctx, b), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT(st.budget_overruns > 0);
    CU_ASSERT_EQUAL(st.budget_evictions, 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, c, S), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "next"), 0); /* a's and b's uses are enqueued */
    c = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.budget_evictions, 1);
    CU_ASSERT_EQUAL(st.window_violations, 0);
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_free(ctx, c, S);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Without any access mark the op marks close nothing: the context cannot
 * know when a block is used, so it moves none (and counts the overrun). */
static void test_no_access_marks_nothing_moves(void) {
    struct hoff_stats st;
    void *a, *b, *c;

    open_plain(4 * MiB);
    a = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, NULL), 0);
    b = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, NULL), 0);
    c = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.budget_evictions, 0);
    CU_ASSERT(st.budget_overruns > 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a), HOFF_RES_DEVICE);
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_free(ctx, c, S);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* The explicit calls close the block's window (the caller says its work is
 * enqueued); the sim sees a move inside an open window as a violation. */
static void test_explicit_calls_close_the_window(void) {
    struct hoff_stats st;
    void *a;

    open_plain(0);
    a = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 1, S), 0);
    memset(a, 0x3c, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_evict(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 0, S), 0); /* paged back in; a window again */
    CU_ASSERT_EQUAL(((unsigned char *)a)[12345], 0x3c);
    CU_ASSERT_EQUAL(hoff_discard(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.window_violations, 0);
    CU_ASSERT_EQUAL(st.window_refusals, 0);
    hoff_free(ctx, a, S);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"autograd_order", test_autograd_order},
        {"online_skips_windows", test_online_skips_windows},
        {"no_access_marks_nothing_moves", test_no_access_marks_nothing_moves},
        {"explicit_calls_close_the_window", test_explicit_calls_close_the_window},
        {NULL, NULL},
    };
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    return hoff_test_run("windows", tests);
}
