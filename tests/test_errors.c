/* test_errors.c — the error contract of hoff.h (hoff_last_error, hoff(3) ERRORS): every HOFF_API call that fails sets
 * the thread's message, and the message names the call (or, for the configuration calls, the option or variable it
 * is about), so hoff_last_error() never shows an older, unrelated message.  Each case plants a sentinel message (a
 * failing hoff_config_set with a unique option name), makes one bad call (NULL context, NULL pointers, invalid
 * values, wrong state) and checks its return value and the message together.  The calls with an err buffer must
 * leave in it a copy of the same message.
 *
 * The test cannot go stale: it reads the HOFF_API declarations of include/hoff.h and fails for a function that is
 * neither walked here nor listed in cannot_fail[] with the reason, and for a name in either list that the header no
 * longer declares.
 * Threading: single-threaded (the message is per thread). */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#ifndef HOFF_INCLUDE_DIR
#define HOFF_INCLUDE_DIR "include"
#endif

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)
#define MAX_FNS 256

/* The functions that cannot fail, and why: a case for them would have nothing to check. */
static const struct {
    const char *fn, *why;
} cannot_fail[] = {
    {"hoff_config_count", "returns the number of options, a constant"},
    {"hoff_last_error", "returns the thread's message (\"no error\" before any failure), never NULL"},
    {"hoff_strerror", "maps any int to a constant text (strerror's for unknown codes)"},
    {"hoff_backend_name", "a getter: the backend's name, \"none\" for a NULL context (an answer, not a failure)"},
    {"hoff_planner_name", "a getter: the planner's name, \"none\" for a NULL context"},
    {"hoff_plan_state_name", "a getter: \"unknown\" for a value outside enum hoff_plan_state"},
    {"hoff_phase_name", "a getter: \"unknown\" for a value outside enum hoff_phase"},
    {"hoff_group_destroy", "NULL is no group and a no-op (as free(NULL)); any group is aborted and freed: returns 0"},
    {"hoff_torch_empty_cache", "void; returns every device's cache (hoff_empty_cache cannot fail on a live context)"},
    {"hoff_torch_graph_pool_use", "void; stores the pool id in a thread-local, any value accepted"},
};

static char covered[MAX_FNS][64];
static int ncovered;
static int sentinel_no;
static hoff_ctx *ctx;

static void cover(const char *fn) {
    int i;

    for (i = 0; i < ncovered; i++)
        if (!strcmp(covered[i], fn))
            return;
    if (ncovered < MAX_FNS)
        snprintf(covered[ncovered++], sizeof covered[0], "%s", fn);
}

/* Plant a sentinel message with a unique token in it; returns the token. */
static const char *plant(void) {
    static char token[32];
    struct hoff_config c;

    hoff_config_init(&c);
    snprintf(token, sizeof token, "zz_sentinel_%d", ++sentinel_no);
    if (hoff_config_set(&c, token, "1", NULL, 0) != -ENOENT || !strstr(hoff_last_error(), token)) {
        CU_FAIL("cannot plant the sentinel message");
    }
    return token;
}

/* 1 if msg names word as a whole word (not the start of a longer name). */
static int names(const char *msg, const char *word) {
    size_t n = strlen(word);
    const char *p;

    for (p = strstr(msg, word); p; p = strstr(p + 1, word)) {
        char c = p[n];

        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return 1;
    }
    return 0;
}

/* After the failing call: its return was as expected (ok), and the message is set, not the sentinel, and names
 * needle (the function, unless the case says otherwise). */
static void verify(const char *fn, const char *token, int ok, const char *needle, const char *expr, int line) {
    const char *msg = hoff_last_error();
    int good = ok && msg && !strstr(msg, token) && strcmp(msg, "no error") && names(msg, needle ? needle : fn);

    cover(fn);
    CU_ASSERT(good);
    if (!good)
        fprintf(stderr, "\n  line %d: %s: %s\n    return %s; message \"%s\" (want a new one naming %s)\n", line, fn,
                expr, ok ? "as expected" : "NOT as expected", msg ? msg : "(NULL)", needle ? needle : fn);
}

/* One bad call: plant, call, check.  expr is true when the call returned what it must. */
#define FAILS(fn, needle, expr)                          \
    do {                                                 \
        const char *tok_ = plant();                      \
        int ok_ = !!(expr);                              \
        verify(#fn, tok_, ok_, needle, #expr, __LINE__); \
    } while (0)

/* The calls with an err buffer: err holds a copy of the thread's message. */
static char err[512];
#define SAME_ERR() CU_ASSERT_STRING_EQUAL(err, hoff_last_error())

static void open_ctx(void) {
    struct hoff_config cfg = hoff_test_sim_config(256 * MiB);

    ctx = hoff_test_open(&cfg);
}

static void test_config(void) {
    struct hoff_config c, bad;
    char small[2];

    hoff_config_init(&c);
    FAILS(hoff_config_init, NULL, (hoff_config_init(NULL), 1));
    FAILS(hoff_config_set, NULL, hoff_config_set(NULL, "budget", "1G", err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_config_set, NULL, hoff_config_set(&c, NULL, "1G", err, sizeof err) == -EINVAL);
    FAILS(hoff_config_set, "budgte", hoff_config_set(&c, "budgte", "1G", err, sizeof err) == -ENOENT);
    SAME_ERR();
    FAILS(hoff_config_set, "budget", hoff_config_set(&c, "budget", "lots", err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_config_from_env, NULL, hoff_config_from_env(NULL, err, sizeof err) == -EINVAL);
    SAME_ERR();
    setenv("HOFF_BUDGET", "lots", 1);
    FAILS(hoff_config_from_env, "HOFF_BUDGET", hoff_config_from_env(&c, err, sizeof err) == -EINVAL);
    SAME_ERR();
    unsetenv("HOFF_BUDGET");
    FAILS(hoff_config_get, NULL, hoff_config_get(NULL, "budget", small, sizeof small) == -EINVAL);
    FAILS(hoff_config_get, "nosuch", hoff_config_get(&c, "nosuch", small, sizeof small) == -ENOENT);
    FAILS(hoff_config_get, NULL, hoff_config_get(&c, "planner", small, sizeof small) == -ERANGE);
    FAILS(hoff_config_check, NULL, hoff_config_check(NULL, "1G", NULL, 0, err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_config_check, "planner", hoff_config_check("planner", "nosuch", NULL, 0, err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_config_check, "planner",
          hoff_config_check("planner", "timed", small, sizeof small, err, sizeof err) == -ERANGE);
    SAME_ERR();
    FAILS(hoff_config_name, NULL, hoff_config_name(-1) == NULL);
    FAILS(hoff_config_name, NULL, hoff_config_name(hoff_config_count()) == NULL);
    FAILS(hoff_config_help, NULL, hoff_config_help(hoff_config_count()) == NULL);

    /* hoff_init: its own checks, and a failure below it (the config's validation) made its own. */
    bad = hoff_test_sim_config(256 * MiB);
    FAILS(hoff_init, NULL, hoff_init(NULL, &bad) == -EINVAL);
    bad.version = 99;
    FAILS(hoff_init, NULL, hoff_init(&ctx, &bad) == -EINVAL && !ctx);
    bad = hoff_test_sim_config(256 * MiB);
    bad.backend = 7;
    FAILS(hoff_init, NULL, hoff_init(&ctx, &bad) == -EINVAL && !ctx);
    bad = hoff_test_sim_config(256 * MiB);
    bad.sim_h2d_gbps = 0;
    FAILS(hoff_init, NULL, hoff_init(&ctx, &bad) == -EINVAL && !ctx);
    FAILS(hoff_shutdown, NULL, hoff_shutdown(NULL) == -EINVAL);
}

static void test_alloc(void) {
    int x;
    void *dev;

    open_ctx();
    dev = hoff_malloc(ctx, 4 * MiB, S); /* outside a step: the device pool */
    CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
    FAILS(hoff_malloc, NULL, hoff_malloc(NULL, 4096, S) == NULL && errno == EINVAL);
    FAILS(hoff_malloc, NULL, hoff_malloc(ctx, (size_t)1 << 62, S) == NULL && errno == ENOMEM);
    FAILS(hoff_malloc_flags, NULL, hoff_malloc_flags(NULL, 4096, S, HOFF_ALLOC_AUTO) == NULL && errno == EINVAL);
    FAILS(hoff_malloc_flags, NULL, hoff_malloc_flags(ctx, 4096, S, 3) == NULL && errno == EINVAL);
    FAILS(hoff_malloc_flags, NULL, hoff_malloc_flags(ctx, 4096, S, 64) == NULL && errno == EINVAL);
    /* A failure below the entry point (hoff_malloc's own message), made hoff_malloc_flags's. */
    FAILS(hoff_malloc_flags, NULL,
          hoff_malloc_flags(ctx, (size_t)1 << 62, S, HOFF_ALLOC_DEVICE) == NULL && errno == ENOMEM);
    FAILS(hoff_free, NULL, hoff_free(NULL, dev, S) == -EINVAL);
    FAILS(hoff_free, NULL, hoff_free(ctx, &x, S) == -EINVAL);
    FAILS(hoff_record_stream, NULL, hoff_record_stream(NULL, dev, S) == -EINVAL);
    FAILS(hoff_record_stream, NULL, hoff_record_stream(ctx, &x, S) == -EINVAL);
    FAILS(hoff_block_size, NULL, hoff_block_size(NULL, dev) == 0);
    FAILS(hoff_empty_cache, NULL, hoff_empty_cache(NULL) == -EINVAL);
    CU_ASSERT_EQUAL(hoff_free(ctx, dev, S), 0);
    hoff_shutdown(ctx);
}

static void test_residency(void) {
    void *dev, *m;
    int x;

    open_ctx();
    dev = hoff_malloc(ctx, 4 * MiB, S);
    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    m = hoff_malloc(ctx, 8 * MiB, S); /* in a step: a managed offload candidate */
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    FAILS(hoff_evict, NULL, hoff_evict(NULL, m, S) == -EINVAL);
    FAILS(hoff_evict, NULL, hoff_evict(ctx, &x, S) == -EINVAL);
    FAILS(hoff_evict, NULL, hoff_evict(ctx, dev, S) == -EPERM); /* residency's message, made hoff_evict's */
    FAILS(hoff_prefetch, NULL, hoff_prefetch(NULL, m, S) == -EINVAL);
    FAILS(hoff_prefetch, NULL, hoff_prefetch(ctx, &x, S) == -EINVAL);
    FAILS(hoff_prefetch, NULL, hoff_prefetch(ctx, m, S) == -EALREADY);
    FAILS(hoff_discard, NULL, hoff_discard(NULL, m, S) == -EINVAL);
    FAILS(hoff_discard, NULL, hoff_discard(ctx, &x, S) == -EINVAL);
    FAILS(hoff_access, NULL, hoff_access(NULL, m, 0, S) == -EINVAL);
    FAILS(hoff_access, NULL, hoff_access(ctx, &x, 0, S) == -EINVAL);
    FAILS(hoff_residency, NULL, hoff_residency(NULL, m) == -EINVAL);
    FAILS(hoff_residency, NULL, hoff_residency(ctx, &x) == -EINVAL);
    FAILS(hoff_keep, NULL, hoff_keep(NULL, m) == -EINVAL);
    FAILS(hoff_keep, NULL, hoff_keep(ctx, &x) == -EINVAL);
    FAILS(hoff_sync, NULL, hoff_sync(NULL) == -EINVAL);
    FAILS(hoff_sim_touch, NULL, hoff_sim_touch(NULL, m, 0) == -EINVAL);
    FAILS(hoff_sim_touch, NULL, hoff_sim_touch(ctx, &x, 0) == -EINVAL);
    FAILS(hoff_sim_compute, NULL, hoff_sim_compute(NULL, S, 1000) == -EINVAL);
    FAILS(hoff_sim_wallclock, NULL, hoff_sim_wallclock(NULL, 1) == -EINVAL);
    FAILS(hoff_sim_wallclock, NULL, hoff_sim_wallclock(ctx, 5) == -EINVAL);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, m, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, dev, S), 0);
    hoff_shutdown(ctx);
}

static void test_marks(void) {
    open_ctx();
    FAILS(hoff_step_begin, NULL, hoff_step_begin(NULL) == -EINVAL);
    FAILS(hoff_step_end, NULL, hoff_step_end(NULL) == -EINVAL);
    FAILS(hoff_step_end, NULL, hoff_step_end(ctx) == -EINVAL); /* no step open */
    FAILS(hoff_step_abort, NULL, hoff_step_abort(NULL) == -EINVAL);
    FAILS(hoff_step_abort, NULL, hoff_step_abort(ctx) == -EINVAL);
    FAILS(hoff_step_stream, NULL, hoff_step_stream(NULL, S) == -EINVAL);
    FAILS(hoff_mark_op, NULL, hoff_mark_op(NULL, "op") == -EINVAL);
    FAILS(hoff_set_phase, NULL, hoff_set_phase(NULL, HOFF_PHASE_FORWARD) == -EINVAL);
    FAILS(hoff_set_phase, NULL, hoff_set_phase(ctx, 99) == -EINVAL);
    FAILS(hoff_region_begin, NULL, hoff_region_begin(NULL) == -EINVAL);
    FAILS(hoff_region_end, NULL, hoff_region_end(NULL) == -EINVAL);
    FAILS(hoff_region_end, NULL, hoff_region_end(ctx) == -EINVAL); /* none open */
    FAILS(hoff_trace_save, NULL, hoff_trace_save(NULL, "/tmp/x") == -EINVAL);
    FAILS(hoff_trace_save, NULL, hoff_trace_save(ctx, NULL) == -EINVAL);
    FAILS(hoff_trace_save, NULL, hoff_trace_save(ctx, "/tmp/hoff-errors-never.trace") == -ENOENT);
    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    FAILS(hoff_step_begin, NULL, hoff_step_begin(ctx) == -EALREADY);
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    FAILS(hoff_step_end, NULL, hoff_step_end(ctx) == -EBUSY); /* a region open */
    CU_ASSERT_EQUAL(hoff_region_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_shutdown(ctx);
}

static void test_stats(void) {
    struct hoff_stats st;

    open_ctx();
    FAILS(hoff_stats_get, NULL, hoff_stats_get(NULL, &st) == -EINVAL);
    FAILS(hoff_stats_get, NULL, hoff_stats_get(ctx, NULL) == -EINVAL);
    FAILS(hoff_reset_peaks, NULL, hoff_reset_peaks(NULL) == -EINVAL);
    FAILS(hoff_stats_json, NULL, hoff_stats_json(NULL, NULL, 0) == -EINVAL);
    FAILS(hoff_stats_json, NULL, hoff_stats_json(ctx, NULL, 16) == -EINVAL);
    FAILS(hoff_floor_json, NULL, hoff_floor_json(NULL, NULL, 0) == -EINVAL);
    FAILS(hoff_floor_json, NULL, hoff_floor_json(ctx, NULL, 16) == -EINVAL);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    FAILS(hoff_stats_format_json, NULL, hoff_stats_format_json(NULL, NULL, 0) == -EINVAL);
    FAILS(hoff_stats_format_json, NULL, hoff_stats_format_json(&st, NULL, 16) == -EINVAL);
    st.version = 99;
    FAILS(hoff_stats_format_json, NULL, hoff_stats_format_json(&st, NULL, 0) == -EINVAL);
    hoff_shutdown(ctx);
}

static void test_groups(void) {
    struct hoff_group_info in;
    hoff_group *g = NULL, *g2 = NULL, *t = NULL;
    void *dev, *m;
    int x;

    open_ctx();
    dev = hoff_malloc(ctx, 4 * MiB, S);
    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    m = hoff_malloc(ctx, 8 * MiB, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "layer0", HOFF_GROUP_COLOCATE, &g), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "layer1", HOFF_GROUP_COLOCATE, &g2), 0);
    FAILS(hoff_group_create, NULL, hoff_group_create(NULL, "a", 0, &t) == -EINVAL && !t);
    FAILS(hoff_group_create, NULL, hoff_group_create(ctx, "a", 0, NULL) == -EINVAL);
    FAILS(hoff_group_create, NULL, hoff_group_create(ctx, NULL, 0, &t) == -EINVAL);
    FAILS(hoff_group_create, NULL, hoff_group_create(ctx, "", 0, &t) == -EINVAL);
    FAILS(hoff_group_create, NULL, hoff_group_create(ctx, "a\tb", 0, &t) == -EINVAL);
    FAILS(hoff_group_create, NULL, hoff_group_create(ctx, "a", 7, &t) == -EINVAL);
    FAILS(hoff_group_create, NULL, hoff_group_create(ctx, "layer0", 0, &t) == -EEXIST);
    FAILS(hoff_group_find, NULL, hoff_group_find(NULL, "layer0") == NULL);
    FAILS(hoff_group_find, NULL, hoff_group_find(ctx, NULL) == NULL);
    FAILS(hoff_group_find, NULL, hoff_group_find(ctx, "nosuch") == NULL && errno == ENOENT);
    FAILS(hoff_group_add, NULL, hoff_group_add(NULL, m) == -EINVAL);
    FAILS(hoff_group_add, NULL, hoff_group_add(g, &x) == -EINVAL);
    FAILS(hoff_group_add, NULL, hoff_group_add(g, dev) == -EPERM);
    FAILS(hoff_group_remove, NULL, hoff_group_remove(NULL, m) == -EINVAL);
    FAILS(hoff_group_remove, NULL, hoff_group_remove(g, &x) == -EINVAL);
    FAILS(hoff_group_remove, NULL, hoff_group_remove(g, m) == -ENOENT);
    CU_ASSERT_EQUAL(hoff_group_add(g, m), 0);
    FAILS(hoff_group_add, NULL, hoff_group_add(g2, m) == -EBUSY); /* in another group */
    FAILS(hoff_group_wait, NULL, hoff_group_wait(NULL, S, 0) == -EINVAL);
    FAILS(hoff_group_wait, NULL, hoff_group_wait(g, S, 9) == -EINVAL);
    FAILS(hoff_group_wait, NULL, hoff_group_wait(g, S, 0) == -EINVAL); /* nothing launched */
    FAILS(hoff_group_evict, NULL, hoff_group_evict(NULL, S) == -EINVAL);
    FAILS(hoff_group_prefetch, NULL, hoff_group_prefetch(NULL, S) == -EINVAL);
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
    FAILS(hoff_group_evict, NULL, hoff_group_evict(g, S) == -EBUSY); /* launched, not waited for */
    FAILS(hoff_group_prefetch, NULL, hoff_group_prefetch(g, S) == -EBUSY);
    FAILS(hoff_group_remove, NULL, hoff_group_remove(g, m) == -EBUSY);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
    FAILS(hoff_group_release, NULL, hoff_group_release(NULL) == -EINVAL);
    FAILS(hoff_group_clear, NULL, hoff_group_clear(NULL) == -EINVAL);
    FAILS(hoff_group_abort, NULL, hoff_group_abort(NULL) == -EINVAL);
    FAILS(hoff_group_info, NULL, hoff_group_info(NULL, &in) == -EINVAL);
    FAILS(hoff_group_info, NULL, hoff_group_info(g, NULL) == -EINVAL);
    CU_ASSERT_EQUAL(hoff_group_abort(g), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_group_destroy(g), 0);
    CU_ASSERT_EQUAL(hoff_group_destroy(g2), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, m, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, dev, S), 0);
    hoff_shutdown(ctx);
}

/* The PyTorch entry points, on devices that have no context (99 is out of range), so that no context is created
 * from the environment.  hoff_torch_init goes first: the environment is read once per process. */
static void test_torch(void) {
    char buf[64];
    int x;

    setenv("HOFF_BUDGET", "lots", 1);
    FAILS(hoff_torch_init, "HOFF_BUDGET", (hoff_torch_init(-1), 1));
    unsetenv("HOFF_BUDGET");
    /* The environment stays bad for this process: each later call that needs it says so itself. */
    FAILS(hoff_torch_configure, "HOFF_BUDGET", hoff_torch_configure(-1, "budget", "1G", err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_torch_configure, NULL, hoff_torch_configure(-1, NULL, "1G", err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_torch_configure, NULL, hoff_torch_configure(99, "budget", "1G", err, sizeof err) == -ENODEV);
    SAME_ERR();
    FAILS(hoff_torch_config_check, NULL, hoff_torch_config_check(NULL, "1G", err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_torch_config_check, "budget", hoff_torch_config_check("budget", "lots", err, sizeof err) == -EINVAL);
    SAME_ERR();
    FAILS(hoff_torch_alloc, NULL, hoff_torch_alloc(-1, 0, NULL) == NULL);
    FAILS(hoff_torch_alloc, NULL, hoff_torch_alloc(4096, 99, NULL) == NULL && errno == ENODEV);
    FAILS(hoff_torch_free, NULL, (hoff_torch_free(&x, 4, 99, NULL), 1));
    FAILS(hoff_torch_free, NULL, (hoff_torch_free(&x, 4, 5, NULL), 1)); /* no context on device 5 */
    FAILS(hoff_torch_record_stream, NULL, (hoff_torch_record_stream(&x, NULL), 1));
    FAILS(hoff_torch_set_memory_fraction, NULL, (hoff_torch_set_memory_fraction(2.0, 0), 1));
    FAILS(hoff_torch_set_memory_fraction, NULL, (hoff_torch_set_memory_fraction(0.5, 99), 1));
    FAILS(hoff_torch_context, NULL, hoff_torch_context(99) == NULL);
    FAILS(hoff_torch_reset_peaks, NULL, hoff_torch_reset_peaks(99) == -ENODEV);
    FAILS(hoff_torch_graph_pool_begin, NULL, (hoff_torch_graph_pool_begin(99, 1, 1), 1));
    FAILS(hoff_torch_graph_pool_end, NULL, (hoff_torch_graph_pool_end(99, 1, 1), 1));
    FAILS(hoff_torch_graph_pool_release, NULL, (hoff_torch_graph_pool_release(99, 1, 1), 1));
    FAILS(hoff_torch_memory_stats_json, NULL, hoff_torch_memory_stats_json(99, buf, sizeof buf) == -ENODEV);
    FAILS(hoff_torch_reset_accumulated, NULL, hoff_torch_reset_accumulated(99) == -ENODEV);
    FAILS(hoff_torch_oom_text, NULL, hoff_torch_oom_text(0, 4096, NULL, 0) == -EINVAL);
    FAILS(hoff_torch_oom_text, NULL, hoff_torch_oom_text(0, 4096, buf, 0) == -EINVAL);
}

/* Every HOFF_API function of include/hoff.h is walked above or listed in cannot_fail[]; every name in either is
 * one the header declares.  Runs last: it reads what the other tests covered. */
static void test_coverage(void) {
    char line[512], decl[MAX_FNS][64];
    size_t k;
    int n = 0, i, j, found;
    FILE *f;

    if (getenv("HOFF_TEST")) /* one test alone (testutil.h): the others covered nothing */
        return;
    f = fopen(HOFF_INCLUDE_DIR "/hoff.h", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    while (fgets(line, sizeof line, f)) {
        char *paren = strchr(line, '('), *p;

        if (strncmp(line, "HOFF_API ", 9) != 0 || !paren)
            continue;
        for (p = paren; p > line && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= '0' && p[-1] <= '9'));
             p--)
            ;
        if (n < MAX_FNS)
            snprintf(decl[n++], sizeof decl[0], "%.*s", (int)(paren - p), p);
    }
    fclose(f);
    CU_ASSERT(n > 50); /* the parse found the API, not nothing */
    for (i = 0; i < n; i++) {
        found = 0;
        for (j = 0; j < ncovered && !found; j++)
            found = !strcmp(covered[j], decl[i]);
        for (k = 0; k < sizeof cannot_fail / sizeof cannot_fail[0] && !found; k++)
            found = !strcmp(cannot_fail[k].fn, decl[i]);
        CU_ASSERT(found);
        if (!found)
            fprintf(stderr,
                    "\n  %s (include/hoff.h) has no failure case in test_errors.c and is not in "
                    "cannot_fail[]: add one",
                    decl[i]);
    }
    for (j = 0; j < ncovered; j++) {
        for (found = 0, i = 0; i < n && !found; i++)
            found = !strcmp(covered[j], decl[i]);
        CU_ASSERT(found);
        if (!found)
            fprintf(stderr, "\n  test_errors.c walks %s, which include/hoff.h does not declare", covered[j]);
    }
    for (k = 0; k < sizeof cannot_fail / sizeof cannot_fail[0]; k++) {
        for (found = 0, i = 0; i < n && !found; i++)
            found = !strcmp(cannot_fail[k].fn, decl[i]);
        for (j = 0; j < ncovered && found; j++)
            found = strcmp(covered[j], cannot_fail[k].fn) != 0;
        CU_ASSERT(found);
        if (!found)
            fprintf(stderr, "\n  cannot_fail[] lists %s, which include/hoff.h does not declare or a case walks",
                    cannot_fail[k].fn);
    }
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"config", test_config}, {"alloc", test_alloc},       {"residency", test_residency},
        {"marks", test_marks},   {"stats", test_stats},       {"groups", test_groups},
        {"torch", test_torch},   {"coverage", test_coverage}, {NULL, NULL},
    };

    unsetenv("HOFF_BUDGET");
    return hoff_test_run("errors", tests);
}
