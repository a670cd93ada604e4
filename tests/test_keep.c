/* test_keep.c — blocks that are not activations, end to end on sim: hoff_keep (a gradient or an optimizer's block
 * leaves the budget's books at once, is never moved again, is brought back first when it had been moved, and is
 * flagged kept in the recorded trace so that replayed steps allocate it from the device pool, or managed and kept
 * from its allocation with HOFF_ALLOC_CANDIDATE), offload_gradients (hoff_keep does nothing), recorded_peak_bytes
 * (kept blocks not counted), hoff_set_phase / hoff_phase_name, and where the working-set floor comes from
 * (plan_floor_phase, plan_floor_blocks, hoff_floor_json) with and without the big blocks kept.  Every figure is
 * exact: the steps are built by hand from 2 MiB-grain blocks, and plan_thread is 0 so that step 1 replays.
 * Threading: single-threaded (the library's issuing thread runs behind the API). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define S ((hoff_stream)0)

#define NACT 8             /* activations of the step loop (cases 2, 3) */
#define ACT (4 * MiB)      /* one activation: two managed grains */
#define GRAD_REQ (3 * MiB) /* the gradient asked for: its block is 4 MiB (the 2 MiB grain) */
#define OP_NS 200000       /* compute of one op on the sim's clock */

/* A sim context on a 1 GiB device: budget (0: none), plan at the recorded step's end (step 1 replays), and
 * offload_gradients when og. */
static hoff_ctx *open_ctx(uint64_t budget, int og) {
    struct hoff_config cfg = hoff_test_replay_config(GiB, budget);
    char err[256];

    if (og)
        CU_ASSERT_EQUAL_FATAL(hoff_config_set(&cfg, "offload_gradients", "1", err, sizeof err), 0);
    return hoff_test_open(&cfg);
}

/* The whole file at path, NUL-terminated (malloc'd), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

/* The recorded step's trace as text (hoff_trace_save into a temporary file), or NULL (the test fails). */
static char *saved_trace(hoff_ctx *ctx) {
    char path[] = "/tmp/hoff-keep-XXXXXX";
    char *text;
    int fd = mkstemp(path);

    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    CU_ASSERT_EQUAL(hoff_trace_save(ctx, path), 0);
    text = slurp(path);
    unlink(path);
    CU_ASSERT_PTR_NOT_NULL(text);
    return text;
}

/* The lines of text that start with prefix: how many, and how many of those end with suffix. */
static void count_lines(const char *text, const char *prefix, const char *suffix, int *n, int *with) {
    size_t lp = strlen(prefix), ls = strlen(suffix);
    const char *p = text;

    *n = *with = 0;
    while (p && *p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);

        if (len >= lp && memcmp(p, prefix, lp) == 0) {
            ++*n;
            if (len >= ls && memcmp(p + len - ls, suffix, ls) == 0)
                ++*with;
        }
        p = e ? e + 1 : NULL;
    }
}

/* The k-th line (from 0) that starts with prefix, copied into out ("" when there is none). */
static void nth_line(const char *text, const char *prefix, int k, char *out, size_t len) {
    size_t lp = strlen(prefix);
    const char *p = text;

    out[0] = '\0';
    while (p && *p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);

        if (n >= lp && memcmp(p, prefix, lp) == 0 && k-- == 0) {
            snprintf(out, len, "%.*s", (int)n, p);
            return;
        }
        p = e ? e + 1 : NULL;
    }
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* --- 1. keep in a warmup step ---------------------------------------------- */

/* The forward pass of a chain of n activations: op i reads activation i - 1 and writes activation i (ACT bytes),
 * computes OP_NS and is marked "fwd.<i>" after it runs (as the Python package marks an op), in phase forward. */
static void forward(hoff_ctx *ctx, void **a, int n) {
    char name[32];
    int i;

    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_FORWARD), 0);
    for (i = 0; i < n; i++) {
        if (i > 0)
            CU_ASSERT_EQUAL(hoff_access(ctx, a[i - 1], 0, S), 0);
        a[i] = hoff_malloc(ctx, ACT, S);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a[i]);
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 1, S), 0);
        CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, OP_NS), 0);
        snprintf(name, sizeof name, "fwd.%d", i);
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, name), 0);
    }
}

static void test_keep_warmup(void) {
    hoff_ctx *ctx = open_ctx(0, 0);
    struct hoff_stats st0, st1, st2;
    void *a[4], *g, *d, *h;
    size_t gsz;
    int i, x = 0;

    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    for (i = 0; i < 4; i++) {
        a[i] = hoff_malloc(ctx, ACT, S);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a[i]);
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 1, S), 0);
    }
    g = hoff_malloc(ctx, GRAD_REQ, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    gsz = hoff_block_size(ctx, g);
    CU_ASSERT_EQUAL(gsz, 4 * MiB); /* the managed grain: its bytes in the budget's books */
    st0 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st0.resident_bytes, 4 * ACT + gsz);
    CU_ASSERT_EQUAL(st0.keep_marks, 0);

    CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    st1 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st1.resident_bytes, st0.resident_bytes - gsz);
    CU_ASSERT_EQUAL(st1.keep_marks, 1);
    CU_ASSERT_EQUAL(st1.kept_bytes, gsz);
    CU_ASSERT_EQUAL(st1.kept_evicted, 0);
    CU_ASSERT_EQUAL(st1.kept_allocs, 0);
    CU_ASSERT_EQUAL(st1.keep_ignored, 0);
    CU_ASSERT_EQUAL(st1.managed_in_use_bytes, st0.managed_in_use_bytes); /* still a managed block */
    CU_ASSERT_EQUAL(hoff_residency(ctx, g), HOFF_RES_DEVICE);

    /* Never moved again. */
    CU_ASSERT_EQUAL(hoff_evict(ctx, g, S), -EPERM);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "hoff_keep"));
    CU_ASSERT_EQUAL(hoff_discard(ctx, g, S), -EPERM);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, g), HOFF_RES_DEVICE);

    /* Keeping again changes nothing. */
    CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    st2 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st2.resident_bytes, st1.resident_bytes);
    CU_ASSERT_EQUAL(st2.keep_marks, 1);
    CU_ASSERT_EQUAL(st2.kept_bytes, gsz);
    CU_ASSERT_EQUAL(st2.evictions, 0);
    CU_ASSERT_EQUAL(st2.discards, 0);

    /* Not a block; no context. */
    CU_ASSERT_EQUAL(hoff_keep(ctx, &x), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "hoff_keep"));
    CU_ASSERT_EQUAL(hoff_keep(NULL, g), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "hoff_keep"));

    /* A manual swap group's member: the group alone moves it, so it is not kept; out of the group it is. */
    {
        hoff_group *grp = NULL;
        void *m = hoff_malloc(ctx, ACT, S);

        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "keep", HOFF_GROUP_COLOCATE, &grp), 0);
        CU_ASSERT_EQUAL(hoff_group_add(grp, m), 0);
        CU_ASSERT_EQUAL(hoff_keep(ctx, m), -EBUSY);
        CU_ASSERT_EQUAL(hoff_test_stats(ctx).keep_marks, 1);
        CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, st1.resident_bytes + ACT);
        CU_ASSERT_EQUAL(hoff_group_remove(grp, m), 0);
        CU_ASSERT_EQUAL(hoff_keep(ctx, m), 0);
        CU_ASSERT_EQUAL(hoff_test_stats(ctx).keep_marks, 2);
        CU_ASSERT_EQUAL(hoff_test_stats(ctx).kept_bytes, gsz + ACT);
        CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, st1.resident_bytes);
        CU_ASSERT_EQUAL(hoff_group_destroy(grp), 0);
        CU_ASSERT_EQUAL(hoff_free(ctx, m, S), 0);
        CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, st1.resident_bytes);
    }

    /* A device-pool block (below managed_min) is there already: 0, nothing counted. */
    d = hoff_malloc(ctx, 4096, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(hoff_keep(ctx, d), 0);
    st2 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st2.keep_marks, 2);
    CU_ASSERT_EQUAL(st2.kept_bytes, gsz + ACT);
    CU_ASSERT_EQUAL(st2.resident_bytes, st1.resident_bytes);
    CU_ASSERT_EQUAL(hoff_free(ctx, d, S), 0);

    /* Freed, its bytes leave the kept books, not the budget's; the block it leaves in the cache is an
     * activation like any other when handed out again. */
    CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
    st2 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st2.resident_bytes, 4 * ACT);
    h = hoff_malloc(ctx, GRAD_REQ, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 4 * ACT + gsz);
    CU_ASSERT_EQUAL(hoff_evict(ctx, h, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, h), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 4 * ACT);
    CU_ASSERT_EQUAL(hoff_free(ctx, h, S), 0);
    for (i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(hoff_free(ctx, a[i], S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    st2 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st2.resident_bytes, 0);
    CU_ASSERT_EQUAL(st2.host_bytes, 0);
    CU_ASSERT_EQUAL(st2.managed_in_use_bytes, 0);
    CU_ASSERT_EQUAL(st2.keep_marks, 2);
    hoff_shutdown(ctx);
}

/* --- 2. and 3. kept from the recording on ----------------------------------- */

/* What one step of the loop saw of its gradient G once every activation was freed (G alive). */
struct probe {
    uint64_t resident, managed_in_use, device_in_use;
    int residency;
    int evict_rc; /* hoff_evict(G) right after its allocation and keep */
};

/* One training step: forward makes NACT activations (an op each: it reads the last one, allocates and writes its
 * own), backward allocates the gradient G with gflags and keeps it at once (unless nokeep), then reads the
 * activations back in reverse (an op each, freeing each after its op), and the optimizer reads G and frees it.
 * With held, G lives on into the next step instead, which frees it right after its hoff_step_begin (as
 * zero_grad(set_to_none=True) does: not an event of that step); *held is G then. */
static void loop_step_ex(hoff_ctx *ctx, unsigned gflags, int nokeep, void **held, struct probe *pr) {
    void *a[NACT], *g;
    char name[32];
    int i;

    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    if (held && *held) {
        CU_ASSERT_EQUAL(hoff_free(ctx, *held, S), 0);
        *held = NULL;
    }
    forward(ctx, a, NACT);
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_BACKWARD), 0);
    g = hoff_malloc_flags(ctx, GRAD_REQ, S, gflags);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    if (!nokeep)
        CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    pr->evict_rc = nokeep ? 0 : hoff_evict(ctx, g, S);
    CU_ASSERT_EQUAL(hoff_access(ctx, g, 1, S), 0);
    for (i = NACT - 1; i >= 0; i--) {
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 0, S), 0);
        CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, OP_NS), 0);
        snprintf(name, sizeof name, "bwd.%d", i);
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, name), 0);
        CU_ASSERT_EQUAL(hoff_free(ctx, a[i], S), 0);
    }
    {
        struct hoff_stats st;

        /* The plan releases each activation at the op mark that ends its last use, right before its free: the
         * block goes back to the pool once that lands. */
        CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
        st = hoff_test_stats(ctx);
        pr->resident = st.resident_bytes;
        pr->managed_in_use = st.managed_in_use_bytes;
        pr->device_in_use = st.device_in_use_bytes;
        pr->residency = hoff_residency(ctx, g);
    }
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_OPTIMIZER), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, g, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, OP_NS), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "opt"), 0);
    if (held)
        *held = g;
    else
        CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_step_end(ctx), 0);
}

static void loop_step(hoff_ctx *ctx, unsigned gflags, struct probe *pr) {
    loop_step_ex(ctx, gflags, 0, NULL, pr);
}

/* Four steps of the loop under a budget of 12 MiB (the activations reach 32 MiB: they move), G allocated with
 * gflags: the warmup keeps a managed G; the three replays get it kept from its allocation.  held: each G lives
 * until the next step frees it (retained by the recorded step). */
static void run_loop(unsigned gflags, int held) {
    hoff_ctx *ctx = open_ctx(12 * MiB, 0);
    struct hoff_stats st;
    struct probe pr;
    char line[256], *text;
    void *g = NULL;
    int s, n, with;

    /* Step 0, recorded: G was a managed activation until its keep. */
    loop_step_ex(ctx, gflags, 0, held ? &g : NULL, &pr);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.keep_marks, 1);
    CU_ASSERT_EQUAL(st.kept_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(st.kept_allocs, 0);
    CU_ASSERT_EQUAL(pr.evict_rc, -EPERM);
    CU_ASSERT_EQUAL(pr.residency, HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(pr.resident, 0);
    CU_ASSERT_EQUAL(pr.managed_in_use, 4 * MiB);
    CU_ASSERT(st.evictions > 0);
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, NACT * ACT); /* the activations alone */

    /* Steps 1-3 replay: one kept allocation each, the plan followed. */
    for (s = 1; s <= 3; s++) {
        loop_step_ex(ctx, gflags, 0, held ? &g : NULL, &pr);
        st = hoff_test_stats(ctx);
        CU_ASSERT_EQUAL(st.kept_allocs, (uint64_t)s);
        CU_ASSERT_EQUAL(st.divergent_steps, 0);
        CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
        CU_ASSERT_EQUAL(st.keep_marks, 1); /* nothing left to take out of the budget */
        CU_ASSERT_EQUAL(st.kept_bytes, 4 * MiB);
        CU_ASSERT_EQUAL(pr.evict_rc, -EPERM);
        CU_ASSERT_EQUAL(pr.residency, HOFF_RES_DEVICE);
        CU_ASSERT_EQUAL(pr.resident, 0); /* every activation freed, G alive: the budget never counted it */
        if (gflags & HOFF_ALLOC_CANDIDATE) {
            CU_ASSERT_EQUAL(pr.managed_in_use, 4 * MiB); /* managed, kept from its allocation */
        } else {
            CU_ASSERT_EQUAL(pr.managed_in_use, 0); /* the device pool's */
            CU_ASSERT(pr.device_in_use >= GRAD_REQ);
        }
    }
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.steps, 4);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.replans, 0);
    CU_ASSERT(st.actions_fired > 0);
    CU_ASSERT(st.evictions > 0);
    CU_ASSERT(st.prefetches > 0);
    CU_ASSERT(st.discards > 0); /* the plan releases the activations it is done with */
    CU_ASSERT_EQUAL(st.actions_skipped, 0);
    CU_ASSERT_EQUAL(st.budget_overruns, 0); /* G, out of the books, never pushed the activations over */
    CU_ASSERT_EQUAL(st.window_violations, 0);
    CU_ASSERT_EQUAL(st.discard_touches, 0);

    /* The recorded trace flags G's allocation (block 8, after the 8 activations) kept, and nothing else. */
    text = saved_trace(ctx);
    if (text) {
        nth_line(text, "a 8 ", 0, line, sizeof line);
        CU_ASSERT_NSTRING_EQUAL(line, "a 8 3145728 1 0 ", 16);
        CU_ASSERT(ends_with(line, " k"));
        if (!ends_with(line, " k"))
            fprintf(stderr, "\n  G's line: '%s'\n", line);
        count_lines(text, "a ", " k", &n, &with);
        CU_ASSERT_EQUAL(n, NACT + 1);
        CU_ASSERT_EQUAL(with, 1);
        count_lines(text, "f 8 ", "", &n, &with);
        CU_ASSERT_EQUAL(n, held ? 0 : 1); /* held: retained */
        free(text);
    }
    if (g) {
        CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
        st = hoff_test_stats(ctx);
        CU_ASSERT_EQUAL(st.live_blocks, 0);
        CU_ASSERT_EQUAL(st.resident_bytes, 0);
    }
    hoff_shutdown(ctx);
}

static void test_keep_replay_device(void) {
    run_loop(HOFF_ALLOC_AUTO, 0);
}

static void test_keep_replay_candidate(void) {
    run_loop(HOFF_ALLOC_CANDIDATE, 0);
}

/* The gradient outlives its step, as PyTorch's do until the next zero_grad: the recorded step retains it. */
static void test_keep_replay_retained(void) {
    run_loop(HOFF_ALLOC_AUTO, 1);
}

/* The recorded step did not keep G (a candidate in the plan); a replayed step keeps it: the budget lets it go at
 * once, the plan's actions on it are refused, and the next step records again, after which the replays
 * allocate it from the device pool. */
static void test_keep_learnt_in_replay(void) {
    hoff_ctx *ctx = open_ctx(12 * MiB, 0);
    struct hoff_stats st;
    struct probe pr;
    uint64_t skipped;

    loop_step_ex(ctx, HOFF_ALLOC_AUTO, 1, NULL, &pr); /* recorded without a keep */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.keep_marks, 0);
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, NACT * ACT + 4 * MiB); /* G counted: an activation */
    CU_ASSERT_EQUAL(st.actions_skipped, 0);

    loop_step(ctx, HOFF_ALLOC_AUTO, &pr); /* replays, keeps the managed G */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(st.keep_marks, 1);
    CU_ASSERT_EQUAL(st.kept_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(st.kept_allocs, 0);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT(st.actions_skipped > 0); /* the plan's moves of G, refused */
    CU_ASSERT_EQUAL(pr.evict_rc, -EPERM);
    CU_ASSERT_EQUAL(pr.resident, 0);
    CU_ASSERT_EQUAL(pr.managed_in_use, 4 * MiB);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.replans, 0);

    loop_step(ctx, HOFF_ALLOC_AUTO, &pr); /* records again: G managed until its keep, noted */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.replans, 1);
    CU_ASSERT_EQUAL(st.plans, 2);
    CU_ASSERT_EQUAL(st.keep_marks, 2);
    CU_ASSERT_EQUAL(st.kept_allocs, 0);
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, NACT * ACT);
    CU_ASSERT_EQUAL(pr.managed_in_use, 4 * MiB);
    skipped = st.actions_skipped;

    loop_step(ctx, HOFF_ALLOC_AUTO, &pr); /* replays the new plan: G from the device pool */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plan_state, HOFF_PLAN_REPLAY);
    CU_ASSERT_EQUAL(st.kept_allocs, 1);
    CU_ASSERT_EQUAL(st.keep_marks, 2);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.actions_skipped, skipped);
    CU_ASSERT_EQUAL(st.replans, 1);
    CU_ASSERT_EQUAL(pr.resident, 0);
    CU_ASSERT_EQUAL(pr.managed_in_use, 0);
    hoff_shutdown(ctx);
}

/* --- 4. kept after it had been evicted -------------------------------------- */

static void test_keep_evicted(void) {
    hoff_ctx *ctx = open_ctx(0, 0);
    struct hoff_stats st0, st;
    unsigned char *g, *k, *f;

    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    g = hoff_malloc(ctx, 4 * MiB, S);
    k = hoff_malloc(ctx, 4 * MiB, S);
    f = hoff_malloc(ctx, 4 * MiB, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    hoff_test_fill_bytes(g, 4 * MiB, 31, 7);
    hoff_test_fill_bytes(k, 4 * MiB, 31, 11);
    hoff_test_fill_bytes(f, 4 * MiB, 31, 13);

    /* G evicted and landed on the host: the sim poisons the device's copy. */
    CU_ASSERT_EQUAL(hoff_evict(ctx, g, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, g), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(g[0], 0xDB);
    st0 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st0.evictions, 1);
    CU_ASSERT_EQUAL(st0.resident_bytes, 8 * MiB);
    CU_ASSERT_EQUAL(st0.host_bytes, 4 * MiB);

    /* hoff_keep brings it back (a fault), then keeps it. */
    CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(hoff_residency(ctx, g), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(st.faults, st0.faults + 1);
    CU_ASSERT_EQUAL(st.bytes_faulted, st0.bytes_faulted + 4 * MiB);
    CU_ASSERT_EQUAL(st.kept_evicted, 1);
    CU_ASSERT_EQUAL(st.keep_marks, 1);
    CU_ASSERT_EQUAL(st.kept_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(st.resident_bytes, 8 * MiB); /* K and F only */
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT(hoff_test_bytes_ok(g, 4 * MiB, 31, 7));

    /* K never moved: not counted in kept_evicted. */
    CU_ASSERT_EQUAL(hoff_keep(ctx, k), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.kept_evicted, 1);
    CU_ASSERT_EQUAL(st.keep_marks, 2);
    CU_ASSERT_EQUAL(st.faults, st0.faults + 1);
    CU_ASSERT_EQUAL(st.resident_bytes, 4 * MiB);
    CU_ASSERT(hoff_test_bytes_ok(k, 4 * MiB, 31, 11));

    /* F kept while its eviction is still queued: the eviction lands first, then F comes back. */
    CU_ASSERT_EQUAL(hoff_evict(ctx, f, S), 0);
    CU_ASSERT_EQUAL(hoff_keep(ctx, f), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(hoff_residency(ctx, f), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(st.kept_evicted, 2);
    CU_ASSERT_EQUAL(st.keep_marks, 3);
    CU_ASSERT_EQUAL(st.kept_bytes, 12 * MiB);
    CU_ASSERT_EQUAL(st.evictions, 2);
    CU_ASSERT_EQUAL(st.faults, st0.faults + 2);
    CU_ASSERT_EQUAL(st.resident_bytes, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT(hoff_test_bytes_ok(f, 4 * MiB, 31, 13));

    CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, k, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, f, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, 0);
    CU_ASSERT_EQUAL(st.managed_in_use_bytes, 0);
    hoff_shutdown(ctx);
}

/* hoff_keep of a block that is away brings it back outside the budget: under a full budget nothing is evicted
 * for it and no overrun is counted (bring_back made room for it, then the keep stopped counting it: A0 was
 * evicted for bytes the budget no longer held). */
static void test_keep_evicted_full_budget(void) {
    hoff_ctx *ctx = open_ctx(8 * MiB, 0);
    struct hoff_stats st0, st;
    void *g, *a0, *a1;

    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    g = hoff_malloc(ctx, 4 * MiB, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(hoff_evict(ctx, g, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    a0 = hoff_malloc(ctx, ACT, S);
    a1 = hoff_malloc(ctx, ACT, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a1);
    CU_ASSERT_EQUAL(hoff_access(ctx, a0, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, a1, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fwd"), 0); /* their windows close: both could be evicted */
    st0 = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st0.resident_bytes, 8 * MiB); /* the budget, full */
    CU_ASSERT_EQUAL(st0.evictions, 1);

    CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(hoff_residency(ctx, g), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(st.kept_evicted, 1);
    CU_ASSERT_EQUAL(st.evictions, st0.evictions); /* was 2: A0 evicted for G */
    CU_ASSERT_EQUAL(st.budget_evictions, st0.budget_evictions);
    CU_ASSERT_EQUAL(st.budget_overruns, st0.budget_overruns);
    CU_ASSERT_EQUAL(st.resident_bytes, 8 * MiB);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a0), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a1), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(hoff_free(ctx, a0, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, a1, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_shutdown(ctx);
}

/* --- 5. offload_gradients ---------------------------------------------------- */

static void test_offload_gradients(void) {
    hoff_ctx *ctx = open_ctx(GiB, 1);
    struct hoff_stats st;
    char line[256], *text;
    void *a, *g;
    int n, with;

    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    a = hoff_malloc(ctx, ACT, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fwd"), 0);
    g = hoff_malloc(ctx, 4 * MiB, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.keep_ignored, 1);
    CU_ASSERT_EQUAL(st.keep_marks, 0);
    CU_ASSERT_EQUAL(st.kept_bytes, 0);
    CU_ASSERT_EQUAL(st.resident_bytes, ACT + 4 * MiB); /* still the budget's */

    /* Still an offload candidate. */
    CU_ASSERT_EQUAL(hoff_evict(ctx, g, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, g), HOFF_RES_HOST);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, ACT);
    CU_ASSERT_EQUAL(st.host_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(hoff_access(ctx, g, 0, S), 0); /* back */
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "bwd"), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.keep_ignored, 1);
    CU_ASSERT_EQUAL(st.kept_evicted, 0);
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, ACT + 4 * MiB); /* G is an activation here */

    /* The trace does not flag it. */
    text = saved_trace(ctx);
    if (text) {
        nth_line(text, "a 1 ", 0, line, sizeof line);
        CU_ASSERT_NSTRING_EQUAL(line, "a 1 4194304 1 0 ", 16);
        count_lines(text, "a ", " k", &n, &with);
        CU_ASSERT_EQUAL(n, 2);
        CU_ASSERT_EQUAL(with, 0);
        free(text);
    }

    /* The next step replays with G a managed candidate: no kept allocation. */
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    a = hoff_malloc(ctx, ACT, S);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fwd"), 0);
    g = hoff_malloc(ctx, 4 * MiB, S);
    CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.keep_ignored, 2);
    CU_ASSERT_EQUAL(st.kept_allocs, 0);
    CU_ASSERT_EQUAL(st.resident_bytes, ACT + 4 * MiB);
    CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    hoff_shutdown(ctx);
}

/* --- 6. the floor's phase and op -------------------------------------------- */

/* One recorded step whose largest working set is the loss: forward ops of 4 MiB activations (each reads the
 * last one and makes its own: 8 MiB at once), the loss op (reads A3, makes the 16 MiB logits L and their 16 MiB
 * gradient DL: 36 MiB at once), backward ops (each reads one activation; the first also DL).  keep_big: L and DL
 * are kept right after their allocation. */
static void floor_step(hoff_ctx *ctx, int keep_big) {
    void *a[4], *l, *dl;
    char name[32];
    int i;

    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    forward(ctx, a, 4);
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_LOSS), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, a[3], 0, S), 0);
    l = hoff_malloc(ctx, 16 * MiB, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    if (keep_big)
        CU_ASSERT_EQUAL(hoff_keep(ctx, l), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, l, 1, S), 0);
    dl = hoff_malloc(ctx, 16 * MiB, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dl);
    if (keep_big)
        CU_ASSERT_EQUAL(hoff_keep(ctx, dl), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, dl, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, OP_NS), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "loss"), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, l, S), 0);
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_BACKWARD), 0);
    for (i = 3; i >= 0; i--) {
        if (i == 3)
            CU_ASSERT_EQUAL(hoff_access(ctx, dl, 0, S), 0);
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 0, S), 0);
        CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, OP_NS), 0);
        snprintf(name, sizeof name, "bwd.%d", i);
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, name), 0);
        if (i == 3)
            CU_ASSERT_EQUAL(hoff_free(ctx, dl, S), 0);
        CU_ASSERT_EQUAL(hoff_free(ctx, a[i], S), 0);
    }
    CU_ASSERT_EQUAL_FATAL(hoff_step_end(ctx), 0);
}

static void test_floor_phase(void) {
    hoff_ctx *ctx = open_ctx(40 * MiB, 0);
    struct hoff_stats st;
    char buf[2048], want[256];
    int n;

    /* Before any plan: every field 0 or empty. */
    n = hoff_floor_json(ctx, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "{\"bytes\":0,\"blocks\":0,\"op\":\"\",\"phase\":\"none\",\"advice\":\"\"}");
    CU_ASSERT_EQUAL(n, (int)strlen(buf));
    CU_ASSERT_EQUAL(hoff_floor_json(NULL, buf, sizeof buf), -EINVAL);

    floor_step(ctx, 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.plan_floor_bytes, 36 * MiB); /* A3 + L + DL */
    CU_ASSERT_EQUAL(st.plan_floor_blocks, 3);
    CU_ASSERT_EQUAL(st.plan_floor_phase, HOFF_PHASE_LOSS);
    CU_ASSERT_EQUAL(st.plan_feasible, 1);              /* 40 MiB is above the floor */
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, 48 * MiB); /* A0-A3 + L + DL */
    n = hoff_floor_json(ctx, buf, sizeof buf);
    CU_ASSERT_EQUAL(n, (int)strlen(buf));
    snprintf(want, sizeof want, "{\"bytes\":%" PRIu64 ",\"blocks\":3,\"op\":\"loss\",\"phase\":\"loss\",\"advice\":\"",
             36 * MiB);
    CU_ASSERT_NSTRING_EQUAL(buf, want, strlen(want));
    if (strncmp(buf, want, strlen(want)) != 0)
        fprintf(stderr, "\n  hoff_floor_json: %s\n", buf);
    CU_ASSERT(strlen(buf) > strlen(want) + 2); /* advice non-empty */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf + strlen(want), "cross-entropy"));
    CU_ASSERT(ends_with(buf, "\"}"));
    /* snprintf semantics: the full length whatever fits. */
    CU_ASSERT_EQUAL(hoff_floor_json(ctx, NULL, 0), n);
    CU_ASSERT_EQUAL(hoff_floor_json(ctx, want, 8), n);
    CU_ASSERT_EQUAL(strlen(want), 7);
    hoff_shutdown(ctx);

    /* The same step with L and DL kept: the loss is no longer the floor; the forward's two activations are. */
    ctx = open_ctx(40 * MiB, 0);
    floor_step(ctx, 1);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.keep_marks, 2);
    CU_ASSERT_EQUAL(st.plan_floor_bytes, 8 * MiB);
    CU_ASSERT_EQUAL(st.plan_floor_blocks, 2);
    CU_ASSERT_EQUAL(st.plan_floor_phase, HOFF_PHASE_FORWARD);
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, 16 * MiB); /* the activations alone */
    hoff_floor_json(ctx, buf, sizeof buf);
    snprintf(want, sizeof want, "{\"bytes\":%" PRIu64 ",\"blocks\":2,\"op\":\"fwd.1\",\"phase\":\"forward\",", 8 * MiB);
    CU_ASSERT_NSTRING_EQUAL(buf, want, strlen(want));
    if (strncmp(buf, want, strlen(want)) != 0)
        fprintf(stderr, "\n  hoff_floor_json (kept): %s\n", buf);
    CU_ASSERT_PTR_NULL(strstr(buf, "cross-entropy"));
    hoff_shutdown(ctx);
}

/* --- 7. recorded_peak_bytes ------------------------------------------------- */

static void peak_step(hoff_ctx *ctx, uint64_t *resident_before_keep) {
    void *a[4], *g;
    int i;

    CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
    for (i = 0; i < 4; i++) {
        a[i] = hoff_malloc(ctx, ACT, S);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a[i]);
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 1, S), 0);
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, "fwd"), 0);
    }
    g = hoff_malloc(ctx, GRAD_REQ, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    *resident_before_keep = hoff_test_stats(ctx).resident_bytes;
    CU_ASSERT_EQUAL(hoff_keep(ctx, g), 0);
    for (i = 3; i >= 0; i--) {
        CU_ASSERT_EQUAL(hoff_access(ctx, a[i], 0, S), 0);
        CU_ASSERT_EQUAL(hoff_mark_op(ctx, "bwd"), 0);
        CU_ASSERT_EQUAL(hoff_free(ctx, a[i], S), 0);
    }
    CU_ASSERT_EQUAL(hoff_free(ctx, g, S), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_step_end(ctx), 0);
}

static void test_recorded_peak(void) {
    hoff_ctx *ctx = open_ctx(GiB, 0); /* a budget that moves nothing: the plan is made, every figure exact */
    struct hoff_stats st;
    uint64_t before;

    peak_step(ctx, &before);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(before, 4 * ACT + 4 * MiB);
    CU_ASSERT_EQUAL(st.step_peak_resident_bytes, 4 * ACT + 4 * MiB); /* the warmup counted G until its keep */
    CU_ASSERT_EQUAL(st.peak_resident_bytes, 4 * ACT + 4 * MiB);
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, 4 * ACT); /* the trace knows G was kept */
    CU_ASSERT_EQUAL(st.plans, 1);
    CU_ASSERT_EQUAL(st.evictions, 0);

    /* The replay allocates G from the device pool: the budget never sees it. */
    peak_step(ctx, &before);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(before, 4 * ACT);
    CU_ASSERT_EQUAL(st.step_peak_resident_bytes, 4 * ACT);
    CU_ASSERT_EQUAL(st.kept_allocs, 1);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.recorded_peak_bytes, 4 * ACT);
    hoff_shutdown(ctx);
}

/* --- 8. phases -------------------------------------------------------------- */

static void test_phases(void) {
    hoff_ctx *ctx = open_ctx(GiB, 0);
    char line[256], *text;
    void *a;

    CU_ASSERT_STRING_EQUAL(hoff_phase_name(HOFF_PHASE_NONE), "none");
    CU_ASSERT_STRING_EQUAL(hoff_phase_name(HOFF_PHASE_FORWARD), "forward");
    CU_ASSERT_STRING_EQUAL(hoff_phase_name(HOFF_PHASE_BACKWARD), "backward");
    CU_ASSERT_STRING_EQUAL(hoff_phase_name(HOFF_PHASE_LOSS), "loss");
    CU_ASSERT_STRING_EQUAL(hoff_phase_name(HOFF_PHASE_OPTIMIZER), "optimizer");
    CU_ASSERT_STRING_EQUAL(hoff_phase_name(HOFF_PHASE_COUNT), "unknown");
    CU_ASSERT_STRING_EQUAL(hoff_phase_name(-1), "unknown");
    CU_ASSERT_STRING_EQUAL(hoff_phase_name(99), "unknown");

    CU_ASSERT_EQUAL(hoff_set_phase(ctx, 99), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "hoff_set_phase"));
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, -1), -EINVAL);
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_COUNT), -EINVAL);
    CU_ASSERT_EQUAL(hoff_set_phase(NULL, HOFF_PHASE_FORWARD), -EINVAL);
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_OPTIMIZER), 0);

    /* Set before the step: hoff_step_begin forgets it.  A refused phase changes nothing. */
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_FORWARD), 0);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    a = hoff_malloc(ctx, ACT, S);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "a"), 0); /* none */
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_BACKWARD), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "b"), 0); /* backward */
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, 7), -EINVAL);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "c"), 0); /* still backward */
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_LOSS), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "d"), 0); /* loss */
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_OPTIMIZER), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, NULL), 0); /* optimizer, unnamed */
    CU_ASSERT_EQUAL(hoff_set_phase(ctx, HOFF_PHASE_NONE), 0);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, "e"), 0); /* none */
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, S), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);

    text = saved_trace(ctx);
    if (text) {
        static const char *const words[] = {NULL, " bwd", " bwd", " loss", " opt", NULL};
        static const char *const all[] = {" fwd", " bwd", " loss", " opt"};
        int i, j;

        for (i = 0; i < 6; i++) {
            nth_line(text, "o ", i, line, sizeof line);
            CU_ASSERT(line[0] == 'o');
            if (words[i]) {
                CU_ASSERT(ends_with(line, words[i]));
            } else {
                for (j = 0; j < 4; j++)
                    CU_ASSERT(!ends_with(line, all[j]));
            }
            if (i == 4)
                CU_ASSERT_NSTRING_EQUAL(line, "o - ", 4);
        }
        nth_line(text, "o ", 6, line, sizeof line);
        CU_ASSERT_STRING_EQUAL(line, "");
        free(text);
    }
    hoff_shutdown(ctx);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"keep_warmup", test_keep_warmup},
        {"keep_replay_device", test_keep_replay_device},
        {"keep_replay_candidate", test_keep_replay_candidate},
        {"keep_replay_retained", test_keep_replay_retained},
        {"keep_learnt_in_replay", test_keep_learnt_in_replay},
        {"keep_evicted", test_keep_evicted},
        {"keep_evicted_full_budget", test_keep_evicted_full_budget},
        {"offload_gradients", test_offload_gradients},
        {"floor_phase", test_floor_phase},
        {"recorded_peak", test_recorded_peak},
        {"phases", test_phases},
        {NULL, NULL},
    };

    return hoff_test_run("keep", tests);
}
