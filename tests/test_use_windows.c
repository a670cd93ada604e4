/* test_use_windows.c — use windows: an access holds its block until the next op mark, its free or the step's end;
 * the residency check counts a block in use inside its window, the greedy planner's gaps lie between windows (nothing
 * leaves inside one), and a trace without access or op marks has no gaps.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

/* A trace whose windows the tests below know by heart (b is retained):
 *   a in use on 0..1, 3..5 (the access at 5 lies in the window the access at
 *   3 opened: one window), 8..9 (closed by a's free at 10);
 *   b in use on 1..1, 4..5, 11..12 (open to the step's end). */
static void window_trace(struct hoff__trace *t, uint32_t *a, uint32_t *b) {
    hoff_test_trace_begin(t);
    *a = hoff_test_al(t, 100);   /* 0 */
    *b = hoff_test_al(t, 50);    /* 1 */
    hoff_test_op(t);             /* 2: closes both allocs' windows */
    hoff_test_ac(t, *a, 0);      /* 3 */
    hoff_test_ac(t, *b, 1);      /* 4 */
    hoff_test_ac(t, *a, 0);      /* 5: inside a's open window */
    hoff_test_op(t);             /* 6 */
    hoff_test_op(t);             /* 7 */
    hoff_test_ac(t, *a, 0);      /* 8 */
    hoff_test_al_pool(t, 0, 10); /* 9: a device-pool block, freed at 12 */
    hoff_test_fr(t, *a);         /* 10: closes a's window */
    hoff_test_ac(t, *b, 0);      /* 11 */
    hoff_test_fr(t, 2);          /* 12 */
    hoff_test_fin(t);
    CU_ASSERT_EQUAL_FATAL(t->nev, 13);
    CU_ASSERT_EQUAL_FATAL(t->blocks[*b].retained, 1);
}

static void test_use_windows(void) {
    static const uint32_t close_a[][2] = {{0, 2}, {3, 6}, {5, 6}, {8, 10}}, close_b[][2] = {{1, 2}, {4, 6}, {11, 13}};
    static const int win_a[13] = {1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0};
    static const int win_b[13] = {0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1};
    struct hoff__trace t;
    uint32_t a, b, i, x;

    window_trace(&t, &a, &b);
    CU_ASSERT_EQUAL_FATAL(t.blocks[a].naccess, 4);
    CU_ASSERT_EQUAL_FATAL(t.blocks[b].naccess, 3);
    for (i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(t.acc[t.blocks[a].first_access + i].ev, close_a[i][0]);
        CU_ASSERT_EQUAL(t.acc[t.blocks[a].first_access + i].close, close_a[i][1]);
    }
    for (i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(t.acc[t.blocks[b].first_access + i].ev, close_b[i][0]);
        CU_ASSERT_EQUAL(t.acc[t.blocks[b].first_access + i].close, close_b[i][1]);
    }
    for (x = 0; x < 13; x++) {
        CU_ASSERT_EQUAL(hoff__plan_in_window(&t, a, x), win_a[x]);
        CU_ASSERT_EQUAL(hoff__plan_in_window(&t, b, x), win_b[x]);
        CU_ASSERT_EQUAL(hoff_test_in_use(&t, a, x), win_a[x]); /* the test's own reading agrees */
        CU_ASSERT_EQUAL(hoff_test_in_use(&t, b, x), win_b[x]);
    }
    hoff__trace_destroy(&t);
}

/* hoff__schedule_peak refuses an eviction or release taking effect inside a
 * use window, and a schedule leaving a block away at one of its accesses;
 * each refused schedule differs from an accepted one by that fault alone. */
static void test_schedule_peak_windows(void) {
    struct {
        int rc;
        uint32_t n, act[3][4]; /* ev, when, kind, block (0 a, 1 b) */
        uint32_t at;           /* accepted: res[at] == want */
        uint64_t want;
    } cases[] = {
        /* a's alloc window is 0..1: evicting AFTER 0 takes effect at 1 */
        {-EINVAL, 2, {{0, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}, {3, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0}}, 0, 0},
        {-EINVAL, 2, {{1, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 0}, {3, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0}}, 0, 0},
        {0, 2, {{1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}, {3, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0}}, 2, 50},
        {0, 2, {{2, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 0}, {3, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0}}, 2, 50},
        /* b's window 4..5 holds no access of b at 5: the window alone refuses */
        {-EINVAL, 2, {{4, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 1}, {11, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 1}}, 0, 0},
        {-EINVAL, 2, {{5, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 1}, {11, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 1}}, 0, 0},
        {0, 2, {{5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 1}, {11, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 1}}, 6, 100},
        {0, 2, {{6, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 1}, {11, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 1}}, 6, 100},
        /* a's window 3..5 (two accesses): not between them, once it closes */
        {-EINVAL, 2, {{3, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}, {5, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0}}, 0, 0},
        {0, 2, {{5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}, {8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0}}, 7, 50},
        /* a release inside a's last window (8..9), and at its close */
        {-EINVAL, 1, {{8, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, 0}}, 0, 0},
        {0, 1, {{9, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, 0}}, 10, 50},
        {-EINVAL, 1, {{8, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}}, 0, 0},
        {0, 1, {{9, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}}, 10, 50},
        /* away at an access: no prefetch, or one that comes too late */
        {-EINVAL, 1, {{6, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}}, 0, 0},
        {-EINVAL, 2, {{6, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}, {8, HOFF__ACT_AFTER, HOFF__ACT_PREFETCH, 0}}, 0, 0},
        {0, 2, {{6, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0}, {8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0}}, 7, 50},
        {-EINVAL, 1, {{9, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 1}}, 0, 0}, /* b's access at 11 */
        {0, 2, {{9, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 1}, {11, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 1}}, 10, 100},
    };
    struct hoff__trace t;
    struct hoff__schedule s;
    uint64_t peak, res[13];
    uint32_t blk[2], pev;
    size_t i, k;

    window_trace(&t, &blk[0], &blk[1]);
    hoff__schedule_init(&s);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s.nact = 0;
        for (k = 0; k < cases[i].n; k++)
            CU_ASSERT_EQUAL_FATAL(hoff__schedule_add(&s, cases[i].act[k][0], (int)cases[i].act[k][1],
                                                     (int)cases[i].act[k][2], blk[cases[i].act[k][3]],
                                                     cases[i].act[k][2] == HOFF__ACT_EVICT ? 0 : UINT32_MAX),
                                  0);
        CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), cases[i].rc);
        if (cases[i].rc == 0) {
            CU_ASSERT_EQUAL(hoff__schedule_resident(&t, &s, res, &peak, &pev), 0);
            CU_ASSERT_EQUAL(res[cases[i].at], cases[i].want);
            CU_ASSERT_EQUAL(peak, 150); /* 1: both allocs, in their windows */
            CU_ASSERT_EQUAL(pev, 1);
        }
    }
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* Gaps lie between windows: an access inside an open window extends it (no
 * gap between a's accesses at 3 and 5); the eviction is after the window's
 * last event, the prefetch before the next access. */
static void test_gaps_between_windows(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o = {0};
    struct hoff__gap *g = NULL;
    size_t ng = 0, i;
    uint32_t a, b;

    window_trace(&t, &a, &b);
    CU_ASSERT_EQUAL_FATAL(hoff__plan_gaps(&t, &o, &g, &ng), 0);
    /* (size, a, b, block, copy_ev) in block order: a away 2 and 6..7; b away
     * 2..3 and 6..10, no tail after 11 (retained). */
    {
        const struct hoff__gap want[] = {
            {100, 1, 3, a, 0},
            {100, 5, 8, a, 0},
            {50, 1, 4, b, 1},
            {50, 5, 11, b, 4},
        };

        CU_ASSERT_EQUAL_FATAL(ng, 4);
        for (i = 0; i < 4; i++) {
            CU_ASSERT_EQUAL(g[i].size, want[i].size);
            CU_ASSERT_EQUAL(g[i].a, want[i].a);
            CU_ASSERT_EQUAL(g[i].b, want[i].b);
            CU_ASSERT_EQUAL(g[i].block, want[i].block);
            CU_ASSERT_EQUAL(g[i].copy_ev, want[i].copy_ev);
        }
    }
    free(g);

    /* A budget nothing meets: every gap taken, none inside a window; a has
     * no release (its last window closes at its free), b none (retained). */
    hoff_test_plan(&t, 1, &s);
    CU_ASSERT_EQUAL(s.candidates, 4);
    CU_ASSERT_EQUAL(s.nact, 8);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, a), 2);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, b), 2);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_RELEASE, a) + hoff_test_count(&s, HOFF__ACT_RELEASE, b), 0);
    for (i = 0; i < s.nact; i++)
        if (s.act[i].kind == HOFF__ACT_EVICT)
            CU_ASSERT(s.act[i].ev == 1 || s.act[i].ev == 5);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(s.peak_bytes, 150); /* 1, and 4..5: the windows hold a and b */
    CU_ASSERT_EQUAL(s.peak_ev, 1);
    CU_ASSERT_EQUAL(s.bytes_d2h, 300);
    CU_ASSERT_EQUAL(s.bytes_h2d, 300);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* Without any access mark (op marks only) nothing says when a block is
 * used: every allocation's window lasts until its free, so not even the
 * guards open a gap, and the floor is the peak. */
static void test_no_access_marks_no_gaps(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o = {.budget_bytes = 1, .guard_after_alloc = 1, .guard_before_free = 1};
    struct hoff__gap *g = NULL;
    size_t ng = 1;
    uint64_t floor;
    uint32_t a, b, fev;

    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100); /* 0 */
    hoff_test_ops(&t, 6);      /* 1..6 */
    b = hoff_test_al(&t, 200); /* 7 */
    hoff_test_ops(&t, 6);      /* 8..13 */
    hoff_test_fr(&t, b);       /* 14 */
    hoff_test_ops(&t, 6);      /* 15..20 */
    hoff_test_fr(&t, a);       /* 21 */
    hoff_test_fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.has_access_events, 0);
    CU_ASSERT_EQUAL(t.acc[t.blocks[a].first_access].close, 21);
    CU_ASSERT_EQUAL(t.acc[t.blocks[b].first_access].close, 14);
    CU_ASSERT(hoff__plan_in_window(&t, a, 10));
    CU_ASSERT_EQUAL_FATAL(hoff__plan_gaps(&t, &o, &g, &ng), 0);
    CU_ASSERT_EQUAL(ng, 0);
    free(g);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 300);
    CU_ASSERT_EQUAL(fev, 7);
    hoff_test_plan_g(&t, 1, 1, 1, &s);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT_EQUAL(s.feasible, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* Without op marks every window lasts until the free (or the step's end):
 * nothing can move, nothing is released, and the floor is the peak. */
static void test_no_op_marks_no_gaps(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o = {.budget_bytes = 1};
    struct hoff__gap *g = NULL;
    size_t ng = 1;
    uint64_t floor;
    uint32_t a, b, c, d, fev;

    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100); /* 0 */
    b = hoff_test_al(&t, 200); /* 1: retained */
    hoff_test_ac(&t, a, 1);    /* 2 */
    c = hoff_test_al(&t, 50);  /* 3: alloc only */
    hoff_test_ac(&t, b, 0);    /* 4 */
    hoff_test_fr(&t, c);       /* 5 */
    hoff_test_ac(&t, a, 0);    /* 6: a's last access, two events before its free */
    d = hoff_test_al(&t, 300); /* 7: alloc only */
    hoff_test_fr(&t, a);       /* 8 */
    hoff_test_fr(&t, d);       /* 9 */
    hoff_test_fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.has_access_events, 1);
    CU_ASSERT_EQUAL_FATAL(t.has_op_events, 0);

    CU_ASSERT_EQUAL_FATAL(hoff__plan_gaps(&t, &o, &g, &ng), 0);
    CU_ASSERT_EQUAL(ng, 0);
    free(g);
    hoff_test_plan(&t, 1, &s);
    CU_ASSERT_EQUAL(s.candidates, 0);
    CU_ASSERT_EQUAL(s.nact, 0); /* no release of a after 6 either */
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 600);
    CU_ASSERT_EQUAL(s.peak_bytes, 600); /* 7..8: a, b, d */
    CU_ASSERT_EQUAL(s.peak_ev, 7);
    hoff__schedule_destroy(&s);
    /* No guard opens a gap either. */
    hoff_test_plan_g(&t, 1, 0, 0, &s);
    CU_ASSERT_EQUAL(s.nact, 0);
    hoff__schedule_destroy(&s);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 600);
    CU_ASSERT_EQUAL(fev, 7);
    (void)b;
    (void)c;
    (void)d;
    hoff__trace_destroy(&t);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"use_windows", test_use_windows},
        {"schedule_peak_windows", test_schedule_peak_windows},
        {"gaps_between_windows", test_gaps_between_windows},
        {"no_op_marks_no_gaps", test_no_op_marks_no_gaps},
        {"no_access_marks_no_gaps", test_no_access_marks_no_gaps},
        {NULL, NULL},
    };
    return hoff_test_run("use_windows", tests);
}
