/* test_greedy.c — the RFC greedy planner: the RFC's planner test cases (longest gap first, ties, copies moved to the
 * last write, retained blocks, stopping once the budget is met, infeasible budgets reported), guard margins,
 * pinned/device blocks, a naive O(M*S) reference on random traces, and a rebuild replacing the schedule.
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

/* --- registry and schedule ------------------------------------------------- */

/* --- use windows ------------------------------------------------------------- */

/* --- the working-set floor ---------------------------------------------------- */

/* --- the RFC planner's cases ------------------------------------------------ */

/* --- the floor and kept blocks ----------------------------------------------- */

static void test_longest_gap_wins(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, b, c;

    /* Each alloc is its own op: the op mark after it closes its window. */
    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100); /* 0 */
    hoff_test_op(&t);          /* 1 */
    b = hoff_test_al(&t, 100); /* 2 */
    hoff_test_op(&t);          /* 3 */
    c = hoff_test_al(&t, 100); /* 4 */
    hoff_test_ops(&t, 2);      /* 5..6 */
    hoff_test_ac(&t, b, 0);    /* 7: gap 2..7 */
    hoff_test_fr(&t, b);       /* 8 */
    hoff_test_ac(&t, c, 0);    /* 9: gap 4..9 */
    hoff_test_fr(&t, c);       /* 10 */
    hoff_test_ac(&t, a, 0);    /* 11: gap 0..11, the longest */
    hoff_test_fr(&t, a);       /* 12 */
    hoff_test_fin(&t);

    hoff_test_plan(&t, 200, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 300);
    CU_ASSERT_EQUAL(s.candidates, 3);
    CU_ASSERT_EQUAL(s.nact, 2);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, a)->ev, 0);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, a)->when, HOFF__ACT_AFTER);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, a)->ev, 11);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, a)->when, HOFF__ACT_BEFORE);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, b) + hoff_test_count(&s, HOFF__ACT_EVICT, c), 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_ev, 4);
    CU_ASSERT_EQUAL(s.bytes_d2h, 100);
    CU_ASSERT_EQUAL(s.bytes_h2d, 100);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_equal_gaps_larger_first(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t x, y, z;

    /* The gaps run from the op mark closing a window to the next access:
     * x's write closes at 3, y's at 5, so y's read comes two events after
     * x's to make the gaps as long. */
    hoff_test_trace_begin(&t);
    x = hoff_test_al(&t, 100); /* 0 */
    y = hoff_test_al(&t, 200); /* 1 */
    hoff_test_ac(&t, x, 1);    /* 2 */
    hoff_test_op(&t);          /* 3: closes x's window (and y's alloc) */
    hoff_test_ac(&t, y, 1);    /* 4 */
    hoff_test_op(&t);          /* 5: closes y's */
    hoff_test_region(&t, 1);   /* 6 */
    z = hoff_test_al(&t, 100); /* 7: pinned, pushes 7..9 over 350 */
    hoff_test_region(&t, 0);   /* 8 */
    hoff_test_fr(&t, z);       /* 9 */
    hoff_test_op(&t);          /* 10 */
    hoff_test_ac(&t, x, 0);    /* 11: x's gap 2..11, in use 11..11 */
    hoff_test_op(&t);          /* 12: x released from here */
    hoff_test_ac(&t, y, 0);    /* 13: y's gap 4..13, as long, larger; in use 13..13 */
    hoff_test_op(&t);          /* 14: y released from here */
    hoff_test_fr(&t, x);       /* 15 */
    hoff_test_fr(&t, y);       /* 16 */
    hoff_test_fin(&t);

    hoff_test_plan(&t, 350, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 400);
    CU_ASSERT_EQUAL(s.nact, 4);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_RELEASE, x)->ev, 11);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_RELEASE, y)->ev, 13);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, y)->ev, 4);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, y)->copy_ev, 4);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, y)->ev, 13);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, x), 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, z), 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 300);
    CU_ASSERT_EQUAL(s.peak_ev, 1);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* Equal gap and size: the earlier start first; then the lower block id. */
static void test_ties_earlier_start_first(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t x, y, z, g, v;

    hoff_test_trace_begin(&t);
    x = hoff_test_al(&t, 100); /* 0: gap 0..9 */
    hoff_test_op(&t);          /* 1 */
    y = hoff_test_al(&t, 100); /* 2: gap 2..11 */
    hoff_test_op(&t);          /* 3 */
    hoff_test_region(&t, 1);   /* 4 */
    z = hoff_test_al(&t, 100); /* 5: pinned, pushes 5..8 over 250 */
    hoff_test_region(&t, 0);   /* 6 */
    hoff_test_op(&t);          /* 7 */
    hoff_test_fr(&t, z);       /* 8 */
    hoff_test_ac(&t, x, 0);    /* 9 */
    hoff_test_op(&t);          /* 10 */
    hoff_test_ac(&t, y, 0);    /* 11 */
    hoff_test_fr(&t, x);       /* 12 */
    hoff_test_fr(&t, y);       /* 13 */
    hoff_test_fin(&t);
    hoff_test_plan(&t, 250, &s);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, x)->ev, 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, y), 0);
    CU_ASSERT(s.feasible);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* Same start too: g (no accesses, guard 3 after its alloc at 0, whose
     * window the op at 1 closes) and v (its write at 3 in use until the op
     * at 4) both leave after 3 and come back before 9: the lower block id,
     * g, goes. */
    hoff_test_trace_begin(&t);
    g = hoff_test_al(&t, 100); /* 0 */
    hoff_test_op(&t);          /* 1 */
    v = hoff_test_al(&t, 100); /* 2 */
    hoff_test_ac(&t, v, 1);    /* 3 */
    hoff_test_ops(&t, 5);      /* 4..8 */
    hoff_test_ac(&t, v, 0);    /* 9 */
    hoff_test_fr(&t, v);       /* 10 */
    hoff_test_op(&t);          /* 11 */
    hoff_test_fr(&t, g);       /* 12: guard 3 before: back before 9 */
    hoff_test_fin(&t);
    hoff_test_plan_g(&t, 150, 3, 3, &s);
    CU_ASSERT_EQUAL(s.candidates, 2);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, g)->ev, 3);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, g)->ev, 9);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, v), 0);
    CU_ASSERT_EQUAL(s.feasible, 0); /* 2..3: both */
    CU_ASSERT_EQUAL(s.peak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_ev, 2);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_copy_moves_to_last_write(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, c;

    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100); /* 0 */
    hoff_test_ac(&t, a, 1);    /* 1: the last write */
    hoff_test_ac(&t, a, 0);    /* 2: a read, in the same op: the gap starts after it */
    hoff_test_op(&t);          /* 3: closes the window */
    c = hoff_test_al(&t, 100); /* 4: no accesses; the guards leave it no gap */
    hoff_test_ops(&t, 3);      /* 5..7 */
    hoff_test_fr(&t, c);       /* 8 */
    hoff_test_op(&t);          /* 9 */
    hoff_test_ac(&t, a, 0);    /* 10 */
    hoff_test_fr(&t, a);       /* 11 */
    hoff_test_fin(&t);

    hoff_test_plan_g(&t, 150, 10, 10, &s);
    CU_ASSERT_EQUAL(s.candidates, 1);
    CU_ASSERT_EQUAL(s.nact, 2);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, a)->ev, 2);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, a)->copy_ev, 1);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, a)->ev, 10);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 100);
    CU_ASSERT_EQUAL(s.peak_ev, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_retained_gets_no_release(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t r, n, m;

    hoff_test_trace_begin(&t);
    r = hoff_test_al(&t, 100); /* 0: retained */
    hoff_test_ac(&t, r, 0);    /* 1 */
    n = hoff_test_al(&t, 100); /* 2 */
    hoff_test_ac(&t, n, 0);    /* 3: n's last use, its window closed by the op at 4 */
    hoff_test_ops(&t, 2);      /* 4..5 */
    hoff_test_fr(&t, n);       /* 6 */
    m = hoff_test_al(&t, 100); /* 7 */
    hoff_test_ac(&t, m, 0);    /* 8: m's last use, in use until its free */
    hoff_test_fr(&t, m);       /* 9 */
    hoff_test_fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.blocks[r].retained, 1);

    hoff_test_plan(&t, 1000, &s);
    CU_ASSERT_EQUAL(s.nact, 1);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_RELEASE, n)->ev, 3);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_RELEASE, n)->when, HOFF__ACT_AFTER);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_RELEASE, r), 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_RELEASE, m), 0);
    CU_ASSERT_EQUAL(s.bytes_d2h + s.bytes_h2d, 0);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_ev, 2);
    hoff__schedule_destroy(&s);

    /* The release counts: with n dropped after 3 (at the op mark 4), 4..6
     * hold only r. */
    hoff_test_plan(&t, 150, &s);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_RELEASE, n), 1);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_stops_once_budget_met(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t b[8];
    int i;

    /* Forward: 8 activations, one op each (alloc at 2i, its window closed
     * by the op mark at 2i + 1); backward reads and frees them in reverse
     * (b[i] read at 20 + 2 (7 - i), freed right after: in use until then, so
     * no release).  b[i]'s gap: 2i .. 20 + 2 (7 - i), length 34 - 4i. */
    hoff_test_trace_begin(&t);
    for (i = 0; i < 8; i++) {
        b[i] = hoff_test_al(&t, 100); /* 2i */
        hoff_test_op(&t);             /* 2i + 1 */
    }
    hoff_test_ops(&t, 4); /* 16..19 */
    for (i = 7; i >= 0; i--) {
        hoff_test_ac(&t, b[i], 0);
        hoff_test_fr(&t, b[i]);
    }
    hoff_test_fin(&t);

    hoff_test_plan(&t, 500, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 800);
    CU_ASSERT_EQUAL(s.candidates, 8);
    CU_ASSERT_EQUAL(s.nact, 6);
    for (i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, b[i])->ev, 2u * (uint32_t)i);
        CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, b[i])->ev, 20u + 2u * (7u - (uint32_t)i));
    }
    for (i = 3; i < 8; i++)
        CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, b[i]), 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 500);
    CU_ASSERT_EQUAL(s.peak_ev, 14); /* b[7]'s alloc, with b[3..7] */
    CU_ASSERT_EQUAL(s.bytes_d2h, 300);
    CU_ASSERT_EQUAL(s.bytes_h2d, 300);
    hoff__schedule_destroy(&s);

    /* A budget above the peak: nothing to do. */
    hoff_test_plan(&t, 800, &s);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 800);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_infeasible_reported(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, p, q;

    /* A pinned block the budget cannot hold, and a busy block with no gap. */
    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100); /* 0: in use 0..0 */
    hoff_test_op(&t);          /* 1 */
    hoff_test_region(&t, 1);   /* 2 */
    p = hoff_test_al(&t, 300); /* 3 */
    hoff_test_region(&t, 0);   /* 4 */
    hoff_test_ops(&t, 3);      /* 5..7 */
    hoff_test_ac(&t, a, 0);    /* 8: a's gap 0..8; in use 8..8 */
    hoff_test_op(&t);          /* 9: a released from here */
    q = hoff_test_al(&t, 50);  /* 10 */
    hoff_test_ac(&t, q, 0);    /* 11: in use 10..11 */
    hoff_test_op(&t);          /* 12 */
    hoff_test_ac(&t, q, 0);    /* 13: q's gap 11..13; in use until its free */
    hoff_test_fr(&t, q);       /* 14 */
    hoff_test_fr(&t, a);       /* 15 */
    hoff_test_fr(&t, p);       /* 16 */
    hoff_test_fin(&t);

    hoff_test_plan(&t, 200, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 450);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, p), 0);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, a)->ev, 0);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, a)->ev, 8);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, q)->ev, 11);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, q)->ev, 13);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_RELEASE, a)->ev, 8);
    /* The lowest peak reached: a and p at a's access. */
    CU_ASSERT_EQUAL(s.peak_bytes, 400);
    CU_ASSERT_EQUAL(s.peak_ev, 8);
    hoff__schedule_destroy(&s);

    /* Below the pinned bytes: infeasible even where everything goes. */
    hoff_test_plan(&t, 1, &s);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT(s.peak_bytes >= 300);
    hoff__schedule_destroy(&s);

    /* 400 is the floor (first at 8, a's access with p, when every gap is
     * taken), and no byte moved lowers the peak below it: planned for the
     * floor, the budget moves nothing, and only a's release remains. */
    hoff_test_plan_build(&t, 200, &s);
    CU_ASSERT_EQUAL(s.floor_bytes, 400);
    CU_ASSERT_EQUAL(s.floor_ev, 8);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(s.budget_bytes, 200);
    CU_ASSERT_EQUAL(s.nact, 1);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_RELEASE, a)->ev, 8);
    CU_ASSERT_EQUAL(s.bytes_d2h + s.bytes_h2d, 0);
    CU_ASSERT_EQUAL(s.peak_bytes, 400);
    CU_ASSERT_EQUAL(s.peak_ev, 3); /* a stays, so 3..8 hold a and p */
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_budget_zero_is_empty(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, b;

    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100);
    b = hoff_test_al(&t, 100);
    hoff_test_ac(&t, b, 0);
    hoff_test_ops(&t, 5);
    hoff_test_ac(&t, a, 0);
    hoff_test_ops(&t, 2);
    hoff_test_fr(&t, a);
    hoff_test_fr(&t, b);
    hoff_test_fin(&t);
    hoff_test_plan(&t, 0, &s);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_ev, 1);
    CU_ASSERT_EQUAL(s.budget_bytes, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* An empty trace. */
    hoff_test_trace_begin(&t);
    hoff_test_fin(&t);
    hoff_test_plan(&t, 10, &s);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* --- blocks without access events, pinned and device blocks ---------------- */

static void test_guard_margins(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t g, h, sm;

    hoff_test_trace_begin(&t);
    g = hoff_test_al(&t, 100);  /* 0: in use 0..1 */
    h = hoff_test_al(&t, 100);  /* 1: retained; in use 1..1 */
    hoff_test_ops(&t, 2);       /* 2..3 */
    sm = hoff_test_al(&t, 100); /* 4: in use 4..4 */
    hoff_test_ops(&t, 4);       /* 5..8 */
    hoff_test_fr(&t, sm);       /* 9: 4+2 .. 9-3 is empty */
    hoff_test_ops(&t, 10);      /* 10..19 */
    hoff_test_fr(&t, g);        /* 20 */
    hoff_test_op(&t);           /* 21 */
    /* One access mark in the step (of a device-pool block): the step says
     * when its marked blocks are used, so the op marks close windows and
     * the unmarked blocks get the guard rule.  Without any, every window
     * lasts until the free (no_marks_no_gaps below). */
    hoff_test_ac(&t, hoff_test_al_pool(&t, 0, 64), 0); /* 22, 23 */
    hoff_test_fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.has_access_events, 1);

    hoff_test_plan_g(&t, 1, 2, 3, &s);
    CU_ASSERT_EQUAL(s.candidates, 2);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, g)->ev, 2);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, g)->copy_ev, 0);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, g)->ev, 17);
    /* Retained: away from 4 to the step's end; its first use in the next step
     * pages it back (managed memory), so no prefetch. */
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, h)->ev, 3);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_PREFETCH, h), 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_RELEASE, h), 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, sm), 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_RELEASE, g), 0); /* the free releases */
    CU_ASSERT_EQUAL(s.bytes_d2h, 200);
    CU_ASSERT_EQUAL(s.bytes_h2d, 100);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(s.peak_bytes, 200); /* 1..2: g and h before their guards end */
    CU_ASSERT_EQUAL(s.peak_ev, 1);
    hoff__schedule_destroy(&s);

    /* No guards: the whole lifetime after the alloc's window.  Above, the
     * guards came later than the windows' ends (g: 0 + 2 > 2 - 1); here the
     * window decides: g's alloc is in use until the op mark at 2, so g
     * leaves AFTER 1, not AFTER 0 as a lifetime from the alloc would have
     * it.  h's window ends at the same mark, sm's at the one at 5. */
    hoff_test_plan_g(&t, 1, 0, 0, &s);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, g)->ev, 1);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, g)->ev, 20);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, h)->ev, 1);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, sm)->ev, 4);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, sm)->ev, 9);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_pinned_and_device_never_evicted(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t d, p, m, x;

    hoff_test_trace_begin(&t);
    d = hoff_test_al_pool(&t, 0, 1000); /* 0: device pool: never counts */
    hoff_test_region(&t, 1);            /* 1 */
    p = hoff_test_al(&t, 100);          /* 2: pinned: counts, never moves */
    hoff_test_region(&t, 0);            /* 3 */
    m = hoff_test_al(&t, 100);          /* 4 */
    hoff_test_op(&t);                   /* 5: closes m's window */
    x = hoff_test_al(&t, 500);          /* 6: managed, but in use throughout (no op mark until its free) */
    hoff_test_ac(&t, x, 0);             /* 7 */
    hoff_test_ac(&t, x, 0);             /* 8 */
    hoff_test_fr(&t, x);                /* 9 */
    hoff_test_ops(&t, 5);               /* 10..14 */
    hoff_test_ac(&t, d, 0);             /* 15 */
    hoff_test_ac(&t, p, 0);             /* 16 */
    hoff_test_ac(&t, m, 0);             /* 17 */
    hoff_test_fr(&t, m);                /* 18 */
    hoff_test_fr(&t, p);                /* 19 */
    hoff_test_fr(&t, d);                /* 20 */
    hoff_test_fin(&t);

    hoff_test_plan(&t, 150, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 700);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, d) + hoff_test_count(&s, HOFF__ACT_RELEASE, d), 0);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, p) + hoff_test_count(&s, HOFF__ACT_RELEASE, p), 0);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_EVICT, m)->ev, 4);
    CU_ASSERT_EQUAL(hoff_test_one(&s, HOFF__ACT_PREFETCH, m)->ev, 17);
    CU_ASSERT_EQUAL(hoff_test_count(&s, HOFF__ACT_EVICT, x) + hoff_test_count(&s, HOFF__ACT_RELEASE, x), 0);
    CU_ASSERT_EQUAL(s.feasible, 0); /* 6..9: p and x */
    CU_ASSERT_EQUAL(s.peak_bytes, 600);
    CU_ASSERT_EQUAL(s.peak_ev, 6);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* --- a naive O(M*S) reference on random traces ------------------------------ */

struct nc {
    uint64_t size;
    uint32_t a, b, block, copy;
};

static int nc_cmp(const void *pa, const void *pb) {
    const struct nc *x = pa, *y = pb;

    /* (gap length, size, -start) descending, then the lower block id */
    if (x->b - x->a != y->b - y->a)
        return x->b - x->a > y->b - y->a ? -1 : 1;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    return x->block < y->block ? -1 : x->block > y->block;
}

static int u64_cmp(const void *pa, const void *pb) {
    uint64_t x = *(const uint64_t *)pa, y = *(const uint64_t *)pb;
    return x < y ? -1 : x > y;
}

struct nres {
    uint64_t *evict, *prefetch, *release; /* (block << 32 | ev), sorted */
    size_t nevict, nprefetch, nrelease, ncand;
    uint64_t copy_sum; /* sum of copy_ev over the evictions */
    uint64_t peak;
    uint32_t peak_ev;
    uint64_t floor; /* every gap taken, and the releases */
    uint32_t floor_ev;
};

/* Where the use window of block j's access (or alloc) at event e closes:
 * the first op mark after e, else j's free, else the step's end — but in a
 * trace without any access event, always j's free (or the step's end). */
static uint32_t naive_close(const struct hoff__trace *t, uint32_t j, uint32_t e) {
    uint32_t i;
    int marks = 0;

    for (i = 0; i < t->nev; i++)
        marks |= t->ev[i].kind == HOFF__TEV_ACCESS;
    for (i = e + 1; i < t->nev; i++)
        if ((marks && t->ev[i].kind == HOFF__TEV_OP) || (t->ev[i].kind == HOFF__TEV_FREE && t->ev[i].block == j))
            return i;
    return (uint32_t)t->nev;
}

/* The RFC algorithm on use windows straight from the rules, from the raw
 * events: a block's accesses (its alloc the first, a write) each hold it on
 * e .. close - 1; a gap lies between the windows of consecutive accesses p,
 * q when q comes after p's close (EVICT AFTER close - 1, PREFETCH BEFORE q,
 * copied from p's last write); a block with only its alloc is away from
 * max(alloc + ga, close - 1) to free - gb (the step's end, retained); a
 * non-retained block with access marks is released AFTER close - 1 of its
 * last access when that close comes before its free. */
static void naive(const struct hoff__trace *t, uint64_t budget, uint32_t ga, uint32_t gb, struct nres *r) {
    uint32_t nev = (uint32_t)t->nev, nb = t->nblocks, i, j, *naccs;
    uint64_t *size;
    uint8_t *pool, *pinned;
    uint32_t *alloc, *freev;
    int64_t *res, *fl;
    struct nc *c;
    size_t nc = 0, k;
    int dep = 0;

    memset(r, 0, sizeof *r);
    size = calloc(nb + 1, sizeof *size);
    pool = calloc(nb + 1, 1);
    pinned = calloc(nb + 1, 1);
    alloc = calloc(nb + 1, sizeof *alloc);
    freev = calloc(nb + 1, sizeof *freev);
    naccs = calloc(nb + 1, sizeof *naccs);
    res = calloc(nev + 1, sizeof *res);
    fl = calloc(nev + 1, sizeof *fl);
    c = calloc(nev + 1, sizeof *c);
    r->evict = calloc(nev + 1, sizeof *r->evict);
    r->prefetch = calloc(nev + 1, sizeof *r->prefetch);
    r->release = calloc(nev + 1, sizeof *r->release);
    for (j = 0; j < nb; j++)
        freev[j] = UINT32_MAX;
    for (i = 0; i < nev; i++) {
        const struct hoff__tev *e = &t->ev[i];

        if (e->kind == HOFF__TEV_REGION_BEGIN)
            dep++;
        if (e->kind == HOFF__TEV_REGION_END)
            dep--;
        if (e->kind == HOFF__TEV_ALLOC) {
            size[e->block] = e->size;
            pool[e->block] = e->pool;
            pinned[e->block] = dep > 0;
            alloc[e->block] = i;
        }
        if (e->kind == HOFF__TEV_FREE)
            freev[e->block] = i;
        if (e->kind == HOFF__TEV_ACCESS)
            naccs[e->block]++;
    }
    /* Residency with no offload, then the releases. */
    for (j = 0; j < nb; j++)
        if (pool[j] == 1)
            for (i = alloc[j]; i < nev && i <= freev[j]; i++)
                res[i] += (int64_t)size[j];
    for (j = 0; j < nb; j++) {
        uint32_t prev = alloc[j], lastw = alloc[j], cl;

        if (pool[j] != 1 || pinned[j])
            continue;
        if (naccs[j] == 0) { /* guard margins, and the alloc's window */
            int64_t a = (int64_t)alloc[j] + ga;
            int64_t b = freev[j] == UINT32_MAX ? (int64_t)nev : (int64_t)freev[j] - gb;

            if (a < (int64_t)naive_close(t, j, alloc[j]) - 1)
                a = (int64_t)naive_close(t, j, alloc[j]) - 1;
            if (b > a + 1)
                c[nc++] = (struct nc){size[j], (uint32_t)a, (uint32_t)b, j, alloc[j]};
            continue;
        }
        for (i = alloc[j] + 1; i < nev; i++) {
            if (t->ev[i].kind != HOFF__TEV_ACCESS || t->ev[i].block != j)
                continue;
            cl = naive_close(t, j, prev);
            if (i > cl)
                c[nc++] = (struct nc){size[j], cl - 1, i, j, lastw};
            if (t->ev[i].flags & HOFF__TEV_WRITE)
                lastw = i;
            prev = i;
        }
        cl = naive_close(t, j, prev);
        if (freev[j] != UINT32_MAX && cl < freev[j]) {
            for (i = cl; i <= freev[j]; i++)
                res[i] -= (int64_t)size[j];
            r->release[r->nrelease++] = (uint64_t)j << 32 | (cl - 1);
        }
    }
    r->ncand = nc;
    /* The floor: every gap taken. */
    memcpy(fl, res, (nev + 1) * sizeof *fl);
    for (k = 0; k < nc; k++)
        for (i = c[k].a + 1; i < c[k].b; i++)
            fl[i] -= (int64_t)c[k].size;
    for (i = 0; i < nev; i++)
        if (fl[i] > (int64_t)r->floor) {
            r->floor = (uint64_t)fl[i];
            r->floor_ev = i;
        }
    qsort(c, nc, sizeof *c, nc_cmp);
    for (k = 0; k < nc; k++) {
        int64_t m = 0;

        for (i = c[k].a + 1; i < c[k].b; i++)
            m = res[i] > m ? res[i] : m;
        if (m <= (int64_t)budget)
            continue;
        for (i = c[k].a + 1; i < c[k].b; i++)
            res[i] -= (int64_t)c[k].size;
        r->evict[r->nevict++] = (uint64_t)c[k].block << 32 | c[k].a;
        r->copy_sum += c[k].copy;
        if (c[k].b < nev)
            r->prefetch[r->nprefetch++] = (uint64_t)c[k].block << 32 | c[k].b;
    }
    r->peak = 0;
    r->peak_ev = 0;
    for (i = 0; i < nev; i++)
        if (res[i] > (int64_t)r->peak || i == 0) {
            r->peak = (uint64_t)res[i];
            r->peak_ev = i;
        }
    qsort(r->evict, r->nevict, sizeof *r->evict, u64_cmp);
    qsort(r->prefetch, r->nprefetch, sizeof *r->prefetch, u64_cmp);
    qsort(r->release, r->nrelease, sizeof *r->release, u64_cmp);
    free(size);
    free(pool);
    free(pinned);
    free(alloc);
    free(freev);
    free(naccs);
    free(res);
    free(fl);
    free(c);
}

static void nres_free(struct nres *r) {
    free(r->evict);
    free(r->prefetch);
    free(r->release);
}

/* A random trace: allocations in both pools, frees, accesses (or none at
 * all), ops (or none at all), regions; whatever is live at the end is
 * retained. */
static void random_trace(struct hoff__trace *t, uint64_t *rs) {
    uint32_t live[256], nlive = 0;
    size_t n = 10 + hoff_test_rand(rs) % 250;
    int with_access = hoff_test_rand(rs) % 4 != 0;
    int with_ops = hoff_test_rand(rs) % 6 != 0;
    uint64_t pool0 = hoff_test_rand(rs) % 4; /* device-pool share: pool0 / 8 */

    hoff_test_trace_begin(t);
    while (t->nev < n) {
        unsigned r = (unsigned)(hoff_test_rand(rs) % 100);

        if ((r < 30 || nlive == 0) && nlive < 256) {
            int pool = hoff_test_rand(rs) % 8 < pool0 ? 0 : 1;
            /* half from a few sizes, so that ties in (gap, size) decide */
            uint64_t size = hoff_test_rand(rs) % 2 ? 16u << hoff_test_rand(rs) % 3 : 1 + hoff_test_rand(rs) % 1000;

            live[nlive++] = hoff_test_al_pool(t, pool, size);
        } else if (r < 50 && nlive) {
            uint32_t k = (uint32_t)(hoff_test_rand(rs) % nlive);

            hoff_test_fr(t, live[k]);
            live[k] = live[--nlive];
        } else if (r < 85 && nlive && with_access) {
            hoff_test_ac(t, live[hoff_test_rand(rs) % nlive], hoff_test_rand(rs) % 3 == 0);
        } else if (r < 96) {
            if (with_ops)
                hoff_test_op(t);
        } else if (hoff_test_region_depth() == 0) {
            hoff_test_region(t, 1);
        } else {
            hoff_test_region(t, 0);
        }
    }
    while (hoff_test_region_depth() > 0)
        hoff_test_region(t, 0);
    while (nlive > 2) { /* most blocks end, a few stay */
        uint32_t k = (uint32_t)(hoff_test_rand(rs) % nlive);

        if (hoff_test_rand(rs) % 4 == 0)
            break;
        hoff_test_fr(t, live[k]);
        live[k] = live[--nlive];
    }
    hoff_test_fin(t);
}

/* The schedule's actions of kind as sorted (block << 32 | ev) keys. */
static size_t keys(const struct hoff__schedule *s, int kind, uint64_t *out) {
    size_t i, n = 0;

    for (i = 0; i < s->nact; i++)
        if (s->act[i].kind == kind)
            out[n++] = (uint64_t)s->act[i].block << 32 | s->act[i].ev;
    qsort(out, n, sizeof *out, u64_cmp);
    return n;
}

/* Two schedules with the same actions, in the same order. */
static int same_actions(const struct hoff__schedule *x, const struct hoff__schedule *y) {
    size_t i;

    if (x->nact != y->nact)
        return 0;
    for (i = 0; i < x->nact; i++)
        if (x->act[i].ev != y->act[i].ev || x->act[i].when != y->act[i].when || x->act[i].kind != y->act[i].kind ||
            x->act[i].block != y->act[i].block || x->act[i].copy_ev != y->act[i].copy_ev)
            return 0;
    return 1;
}

static void test_matches_naive_reference(void) {
    uint64_t rs = 0x5eed, *k;
    int iter, infeasible = 0, evicting = 0, no_ops = 0, below_floor = 0, floor_moves = 0;

    for (iter = 0; iter < 400; iter++) {
        struct hoff__trace t;
        struct hoff__schedule s, s0, sb, sf;
        struct hoff__plan_opts o;
        struct nres r;
        uint64_t budget, copy_sum = 0, floor;
        uint32_t ga = (uint32_t)(hoff_test_rand(&rs) % 4), gb = (uint32_t)(hoff_test_rand(&rs) % 4), fev;
        size_t i, n;

        random_trace(&t, &rs);
        hoff_test_plan_g(&t, 0, ga, gb, &s0); /* the no-offload peak */
        budget = 1 + hoff_test_rand(&rs) % (s0.nopeak_bytes + s0.nopeak_bytes / 4 + 1);
        hoff_test_plan_g(&t, budget, ga, gb, &s);
        naive(&t, budget, ga, gb, &r);
        k = calloc(s.nact + 1, sizeof *k);

        CU_ASSERT_EQUAL(s.candidates, r.ncand);
        CU_ASSERT_EQUAL(s.peak_bytes, r.peak);
        CU_ASSERT_EQUAL(s.peak_ev, r.peak_ev);
        CU_ASSERT_EQUAL(s.feasible, r.peak <= budget);
        CU_ASSERT_EQUAL(s.nopeak_bytes, s0.peak_bytes);
        n = keys(&s, HOFF__ACT_EVICT, k);
        CU_ASSERT(n == r.nevict && memcmp(k, r.evict, n * sizeof *k) == 0);
        n = keys(&s, HOFF__ACT_PREFETCH, k);
        CU_ASSERT(n == r.nprefetch && memcmp(k, r.prefetch, n * sizeof *k) == 0);
        n = keys(&s, HOFF__ACT_RELEASE, k);
        CU_ASSERT(n == r.nrelease && memcmp(k, r.release, n * sizeof *k) == 0);
        for (i = 0; i < s.nact; i++)
            if (s.act[i].kind == HOFF__ACT_EVICT)
                copy_sum += s.act[i].copy_ev;
        CU_ASSERT_EQUAL(copy_sum, r.copy_sum);
        infeasible += !s.feasible;
        evicting += s.bytes_d2h > 0;

        /* No op marks: every window lasts to the free, nothing moves. */
        if (!t.has_op_events) {
            CU_ASSERT_EQUAL(r.ncand, 0);
            CU_ASSERT_EQUAL(r.nrelease, 0);
            CU_ASSERT_EQUAL(s.nact, 0);
            no_ops++;
        }

        /* The floor, and planning through hoff__plan_build: no plan goes
         * below the floor; below it, the floor's plan, marked infeasible. */
        o = (struct hoff__plan_opts){.budget_bytes = budget, .guard_after_alloc = ga, .guard_before_free = gb};
        CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
        CU_ASSERT_EQUAL(floor, r.floor);
        CU_ASSERT_EQUAL(fev, r.floor_ev);
        CU_ASSERT(s.peak_bytes >= floor);
        /* Greedy takes every gap over an event above the budget, so it
         * fails a budget only below the floor. */
        CU_ASSERT_EQUAL(s.feasible, budget >= floor);
        hoff__schedule_init(&sb);
        CU_ASSERT_EQUAL_FATAL(hoff__plan_build(&hoff__planner_greedy, &t, &o, &sb), 0);
        hoff_test_check_schedule(&t, &sb);
        CU_ASSERT_EQUAL(sb.floor_bytes, floor);
        CU_ASSERT_EQUAL(sb.floor_ev, fev);
        CU_ASSERT_EQUAL(sb.budget_bytes, budget);
        if (budget >= floor) {
            CU_ASSERT(same_actions(&sb, &s));
            CU_ASSERT_EQUAL(sb.feasible, s.feasible);
        } else {
            o.budget_bytes = floor;
            hoff_test_plan_g(&t, floor, ga, gb, &sf);
            CU_ASSERT_EQUAL(sb.feasible, 0);
            CU_ASSERT(sf.feasible); /* greedy reaches the floor */
            CU_ASSERT(same_actions(&sb, &sf));
            CU_ASSERT_EQUAL(sb.bytes_d2h, sf.bytes_d2h);
            CU_ASSERT_EQUAL(sb.bytes_h2d, sf.bytes_h2d);
            CU_ASSERT_EQUAL(sb.peak_bytes, floor);
            CU_ASSERT(sb.bytes_d2h <= s.bytes_d2h);
            below_floor++;
            floor_moves += sb.bytes_d2h > 0;
            hoff__schedule_destroy(&sf);
        }

        free(k);
        nres_free(&r);
        hoff__schedule_destroy(&s);
        hoff__schedule_destroy(&sb);
        hoff__schedule_destroy(&s0);
        hoff__trace_destroy(&t);
    }
    /* The mix covered both outcomes, traces without op marks, and budgets
     * below the floor whose floor plan still moves bytes. */
    CU_ASSERT(infeasible > 20);
    CU_ASSERT(evicting > 100);
    CU_ASSERT(iter - infeasible > 20);
    CU_ASSERT(no_ops > 20);
    CU_ASSERT(below_floor > 20);
    CU_ASSERT(floor_moves > 10);
    printf("\n    naive: %d infeasible, %d evicting, %d without op marks, %d below the floor (%d moving)\n", infeasible,
           evicting, no_ops, below_floor, floor_moves);
}

/* A schedule built over an old one replaces it. */
static void test_rebuild_replaces(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o = {.budget_bytes = 150};
    uint32_t a, b;

    hoff_test_trace_begin(&t);
    a = hoff_test_al(&t, 100);
    b = hoff_test_al(&t, 100);
    hoff_test_ops(&t, 4);
    hoff_test_ac(&t, a, 0);
    hoff_test_ac(&t, b, 0);
    hoff_test_fr(&t, a);
    hoff_test_fr(&t, b);
    hoff_test_fin(&t);
    hoff_test_plan(&t, 150, &s);
    CU_ASSERT(s.nact > 0);
    CU_ASSERT(s.plan_ns > 0);
    o.budget_bytes = 0;
    CU_ASSERT_EQUAL(hoff__planner_find("greedy")->build(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT_EQUAL(s.bytes_d2h, 0);
    CU_ASSERT(s.feasible);
    hoff_test_check_schedule(&t, &s);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"longest_gap_wins", test_longest_gap_wins},
        {"equal_gaps_larger_first", test_equal_gaps_larger_first},
        {"ties_earlier_start_first", test_ties_earlier_start_first},
        {"copy_moves_to_last_write", test_copy_moves_to_last_write},
        {"retained_gets_no_release", test_retained_gets_no_release},
        {"stops_once_budget_met", test_stops_once_budget_met},
        {"infeasible_reported", test_infeasible_reported},
        {"budget_zero_is_empty", test_budget_zero_is_empty},
        {"guard_margins", test_guard_margins},
        {"pinned_and_device_never_evicted", test_pinned_and_device_never_evicted},
        {"matches_naive_reference", test_matches_naive_reference},
        {"rebuild_replaces", test_rebuild_replaces},
        {NULL, NULL},
    };
    return hoff_test_run("greedy", tests);
}
