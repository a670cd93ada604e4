/* test_floor.c — the working-set floor: where it comes from (its op, bytes and blocks), planning below it
 * (hoff__plan_build plans for the floor and reports the budget infeasible), and kept blocks (outside the floor, and
 * where the floor then lies).  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

/* Forward f1 f2 f3, backward b3 b2 b1, with a pinned block p (30) live
 * throughout.  Per op, the blocks in use: f1 {a}, f2 {a, b}, f3 {c},
 * b3 {c, b}, b2 {b, a}. */
static void floor_trace(struct hoff__trace *t, uint32_t *a, uint32_t *b, uint32_t *c) {
    uint32_t p;

    hoff_test_trace_begin(t);
    hoff_test_region(t, 1);      /* 0 */
    p = hoff_test_al(t, 30);     /* 1: pinned */
    hoff_test_region(t, 0);      /* 2 */
    hoff_test_op_named(t, "f1"); /* 3 */
    *a = hoff_test_al(t, 100);   /* 4: a in use 4..5 */
    hoff_test_ac(t, *a, 1);      /* 5 */
    hoff_test_op_named(t, "f2"); /* 6 */
    *b = hoff_test_al(t, 200);   /* 7: b in use 7..8 */
    hoff_test_ac(t, *a, 0);      /* 8: a in use 8..8 */
    hoff_test_op_named(t, "f3"); /* 9 */
    *c = hoff_test_al(t, 50);    /* 10: c in use 10..10 */
    hoff_test_op_named(t, "b3"); /* 11 */
    hoff_test_ac(t, *c, 0);      /* 12: c in use 12..13 */
    hoff_test_ac(t, *b, 0);      /* 13: b in use 13..13 */
    hoff_test_op_named(t, "b2"); /* 14: c released from here */
    hoff_test_fr(t, *c);         /* 15 */
    hoff_test_ac(t, *b, 0);      /* 16: b in use 16..17 */
    hoff_test_ac(t, *a, 0);      /* 17: a in use 17..17 */
    hoff_test_op_named(t, "b1"); /* 18: a and b released from here */
    hoff_test_fr(t, *b);         /* 19 */
    hoff_test_fr(t, *a);         /* 20 */
    hoff_test_fr(t, p);          /* 21 */
    hoff_test_fin(t);
    CU_ASSERT_EQUAL_FATAL(t->nev, 22);
}

static void test_floor(void) {
    struct hoff__trace t;
    struct hoff__plan_opts o = {0};
    uint64_t floor;
    uint32_t a, b, c, fev;

    /* Gaps: a 6..7, 9..16; b 9..12, 14..15; c 11.  Every gap taken and the
     * releases, the resident bytes per event are
     *   0:0  1-3:30  4-5:130  6:30  7:230  8:330  9:30  10:80  11:30  12:80
     *   13:280  14-15:30  16:230  17:330  18-21:30
     * so the floor is 330 (p, a, b), first at 8, in op f2 (b2 holds as much
     * at 17). */
    floor_trace(&t, &a, &b, &c);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 330);
    CU_ASSERT_EQUAL(fev, 8);
    CU_ASSERT_STRING_EQUAL(hoff__plan_op_at(&t, fev), "f2");
    CU_ASSERT_STRING_EQUAL(hoff__plan_op_at(&t, 17), "b2");
    CU_ASSERT_STRING_EQUAL(hoff__plan_op_at(&t, 2), "(before the first op mark)");

    /* Guards change nothing here: every block has accesses. */
    o.guard_after_alloc = o.guard_before_free = 3;
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 330);
    hoff__trace_destroy(&t);

    /* An empty trace has no floor. */
    hoff_test_trace_begin(&t);
    hoff_test_fin(&t);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 0);
    CU_ASSERT_EQUAL(fev, 0);
    hoff__trace_destroy(&t);
    (void)a;
    (void)b;
    (void)c;
}

/* Below the floor hoff__plan_build plans for the floor: infeasible, the
 * caller's budget kept, and exactly the floor plan's actions and bytes —
 * while greedy asked for the budget itself moves bytes that cannot lower
 * the peak. */
static void test_build_below_floor(void) {
    struct hoff__trace t;
    struct hoff__schedule at, below, just, direct;
    struct hoff__plan_opts o = {.budget_bytes = 200};
    uint32_t a, b, c;
    size_t i;

    floor_trace(&t, &a, &b, &c);
    /* At the floor: the resident bytes with the releases are
     *   1-3:30  4-6:130  7-9:330  10-13:380  14-17:330  18-21:30
     * and a's gap 8..17 (the longest) brings 10..13 to 280: one eviction. */
    hoff_test_plan_build(&t, 330, &at);
    CU_ASSERT_EQUAL(at.floor_bytes, 330);
    CU_ASSERT_EQUAL(at.floor_ev, 8);
    CU_ASSERT(at.feasible);
    CU_ASSERT_EQUAL(at.budget_bytes, 330);
    CU_ASSERT_EQUAL(at.nopeak_bytes, 380);
    CU_ASSERT_EQUAL(at.peak_bytes, 330);
    CU_ASSERT_EQUAL(at.peak_ev, 7);
    CU_ASSERT_EQUAL(hoff_test_one(&at, HOFF__ACT_EVICT, a)->ev, 8);
    CU_ASSERT_EQUAL(hoff_test_one(&at, HOFF__ACT_PREFETCH, a)->ev, 17);
    CU_ASSERT_EQUAL(hoff_test_count(&at, HOFF__ACT_EVICT, b) + hoff_test_count(&at, HOFF__ACT_EVICT, c), 0);
    CU_ASSERT_EQUAL(hoff_test_one(&at, HOFF__ACT_RELEASE, a)->ev, 17);
    CU_ASSERT_EQUAL(hoff_test_one(&at, HOFF__ACT_RELEASE, b)->ev, 17);
    CU_ASSERT_EQUAL(hoff_test_one(&at, HOFF__ACT_RELEASE, c)->ev, 13);
    CU_ASSERT_EQUAL(at.bytes_d2h, 100);
    CU_ASSERT_EQUAL(at.bytes_h2d, 100);

    hoff_test_plan_build(&t, 200, &below);
    hoff_test_plan_build(&t, 329, &just);
    CU_ASSERT_EQUAL(below.feasible, 0);
    CU_ASSERT_EQUAL(below.budget_bytes, 200);
    CU_ASSERT_EQUAL(below.floor_bytes, 330);
    CU_ASSERT_EQUAL(below.floor_ev, 8);
    CU_ASSERT_EQUAL(below.peak_bytes, 330);
    CU_ASSERT_EQUAL(just.feasible, 0);
    CU_ASSERT_EQUAL(just.budget_bytes, 329);
    CU_ASSERT_EQUAL(just.bytes_d2h, 100);
    CU_ASSERT_EQUAL(below.bytes_d2h, at.bytes_d2h);
    CU_ASSERT_EQUAL(below.bytes_h2d, at.bytes_h2d);
    CU_ASSERT_EQUAL_FATAL(below.nact, at.nact);
    for (i = 0; i < at.nact; i++) {
        CU_ASSERT_EQUAL(below.act[i].ev, at.act[i].ev);
        CU_ASSERT_EQUAL(below.act[i].when, at.act[i].when);
        CU_ASSERT_EQUAL(below.act[i].kind, at.act[i].kind);
        CU_ASSERT_EQUAL(below.act[i].block, at.act[i].block);
        CU_ASSERT_EQUAL(below.act[i].copy_ev, at.act[i].copy_ev);
    }

    /* The planner asked for 200 directly also takes b's gaps 8..13 and
     * 13..16 and a's 5..8: 600 bytes out, and the peak is still the floor. */
    hoff__schedule_init(&direct);
    CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(&t, &o, &direct), 0);
    hoff_test_check_schedule(&t, &direct);
    CU_ASSERT_EQUAL(direct.bytes_d2h, 600);
    CU_ASSERT_EQUAL(direct.peak_bytes, 330);
    CU_ASSERT_EQUAL(direct.peak_ev, 8);
    CU_ASSERT_EQUAL(direct.feasible, 0);

    /* No budget: nothing to plan, the floor still reported. */
    hoff__schedule_destroy(&at);
    hoff_test_plan_build(&t, 0, &at);
    CU_ASSERT_EQUAL(at.nact, 0);
    CU_ASSERT_EQUAL(at.floor_bytes, 330);
    CU_ASSERT(at.feasible);

    hoff__schedule_destroy(&at);
    hoff__schedule_destroy(&below);
    hoff__schedule_destroy(&just);
    hoff__schedule_destroy(&direct);
    hoff__trace_destroy(&t);
}

/* An op mark with a name and a phase (enum hoff_phase). */
static void op_phase(struct hoff__trace *t, const char *name, unsigned phase) {
    struct hoff__tev e = {.kind = HOFF__TEV_OP};

    e.t_gpu_ns = HOFF__TIME_UNKNOWN;
    e.t_cpu_ns = t->nev * 1000;
    e.name = hoff__trace_name(t, name);
    e.flags = (uint8_t)(phase << HOFF__TEV_PHASE_SHIFT);
    CU_ASSERT_NOT_EQUAL_FATAL(e.name, UINT32_MAX);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
}

/* A managed allocation, kept (hoff_keep named it) when kept is set. */
static uint32_t al_kept(struct hoff__trace *t, uint64_t size, int kept) {
    struct hoff__tev e = {.kind = HOFF__TEV_ALLOC, .pool = 1, .size = size};

    e.block = t->nblocks;
    e.flags = kept ? HOFF__TEV_KEPT : 0;
    hoff_test_push(t, &e);
    return e.block;
}

/* Two layers' forward and backward and the optimizer's step, op marks ending
 * their op (as the Python package's do): activations a (100) and b (150);
 * the gradients gb (300) and ga (200), made in backward, read by the
 * optimizer and retained; an optimizer temporary tmp (60).  With kept, the
 * gradients were kept (hoff_keep), as the recorded step notes it.  Gaps: a
 * 1..5 and 5..12, b 4..7, gb 9..17 (every window closes at the next mark). */
static void grad_trace(struct hoff__trace *t, int kept, uint32_t *id) {
    hoff_test_trace_begin(t);
    id[0] = hoff_test_al(t, 100);               /* 0: a */
    hoff_test_ac(t, id[0], 1);                  /* 1 */
    op_phase(t, "fwd.l0", HOFF_PHASE_FORWARD);  /* 2 */
    id[1] = hoff_test_al(t, 150);               /* 3: b */
    hoff_test_ac(t, id[1], 1);                  /* 4 */
    hoff_test_ac(t, id[0], 0);                  /* 5: a and b in use: 250 */
    op_phase(t, "fwd.l1", HOFF_PHASE_FORWARD);  /* 6 */
    hoff_test_ac(t, id[1], 0);                  /* 7 */
    id[2] = al_kept(t, 300, kept);              /* 8: gb; b and gb: 450 */
    hoff_test_ac(t, id[2], 1);                  /* 9 */
    op_phase(t, "bwd.l1", HOFF_PHASE_BACKWARD); /* 10 */
    hoff_test_fr(t, id[1]);                     /* 11 */
    hoff_test_ac(t, id[0], 0);                  /* 12 */
    id[3] = al_kept(t, 200, kept);              /* 13: ga; a and ga: 300 */
    hoff_test_ac(t, id[3], 1);                  /* 14 */
    op_phase(t, "bwd.l0", HOFF_PHASE_BACKWARD); /* 15 */
    hoff_test_fr(t, id[0]);                     /* 16 */
    hoff_test_ac(t, id[2], 0);                  /* 17 */
    hoff_test_ac(t, id[3], 0);                  /* 18 */
    id[4] = hoff_test_al(t, 60);                /* 19: tmp; gb, ga and tmp: 560 */
    hoff_test_ac(t, id[4], 1);                  /* 20 */
    op_phase(t, "adam", HOFF_PHASE_OPTIMIZER);  /* 21 */
    hoff_test_fr(t, id[4]);                     /* 22: no op mark after it */
    hoff_test_fin(t);
    CU_ASSERT_EQUAL_FATAL(t->nev, 23);
}

static int u32_cmp(const void *pa, const void *pb) {
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

    return a < b ? -1 : a > b;
}

/* hoff__plan_floor_where at the floor: its bytes are the floor's, the op is
 * the first op mark at or after the floor's event, and the ids are want's
 * (nwant of them, ascending). */
static void check_where(const struct hoff__trace *t, const struct hoff__plan_opts *o, uint32_t ev, uint64_t floor,
                        uint32_t op_ev, unsigned phase, const uint32_t *want, uint32_t nwant) {
    struct hoff__floor_where w;
    uint32_t *ids = NULL, i;

    CU_ASSERT_EQUAL_FATAL(hoff__plan_floor_where(t, o, ev, &w, &ids), 0);
    CU_ASSERT_EQUAL(w.bytes, floor);
    CU_ASSERT_EQUAL(w.op_ev, op_ev);
    CU_ASSERT_EQUAL(w.phase, phase);
    CU_ASSERT_EQUAL_FATAL(w.blocks, nwant);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    qsort(ids, w.blocks, sizeof *ids, u32_cmp);
    for (i = 0; i < nwant; i++)
        CU_ASSERT_EQUAL(ids[i], want[i]);
    free(ids);
    /* Without ids: the same figures. */
    CU_ASSERT_EQUAL(hoff__plan_floor_where(t, o, ev, &w, NULL), 0);
    CU_ASSERT_EQUAL(w.bytes, floor);
    CU_ASSERT_EQUAL(w.blocks, nwant);
}

/* The optimizer's step sets the floor while the gradients are activations
 * (gb, ga and tmp in use at once); kept, they are device memory: that floor
 * is gone, the floor is forward's a and b, and a budget between the two is
 * feasible.  hoff__plan_floor_where says where each comes from. */
static void test_floor_kept(void) {
    struct hoff__trace t;
    struct hoff__plan_opts o = {0};
    struct hoff__schedule s;
    struct hoff__floor_where w;
    uint64_t floor;
    uint32_t id[5], fev, k;

    /* Not kept: 560 at 19, in adam (its mark, 21, closes the windows). */
    grad_trace(&t, 0, id);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 560);
    CU_ASSERT_EQUAL(fev, 19);
    check_where(&t, &o, fev, floor, 21, HOFF_PHASE_OPTIMIZER, (const uint32_t[]){id[2], id[3], id[4]}, 3);
    CU_ASSERT_STRING_EQUAL(hoff__plan_op_name(&t, 21), "adam");
    /* Elsewhere: at 8, b and gb (450) in bwd.l1; at 22, after the last op
     * mark, the step's end closes the windows. */
    check_where(&t, &o, 8, 450, 10, HOFF_PHASE_BACKWARD, (const uint32_t[]){id[1], id[2]}, 2);
    CU_ASSERT_EQUAL(hoff__plan_floor_where(&t, &o, 22, &w, NULL), 0);
    CU_ASSERT_EQUAL(w.op_ev, UINT32_MAX);
    CU_ASSERT_EQUAL(w.phase, HOFF_PHASE_NONE);
    CU_ASSERT_STRING_EQUAL(hoff__plan_op_name(&t, w.op_ev), "(the step's end)");
    /* At an op mark: that mark. */
    CU_ASSERT_EQUAL(hoff__plan_floor_where(&t, &o, 10, &w, NULL), 0);
    CU_ASSERT_EQUAL(w.op_ev, 10);
    CU_ASSERT_EQUAL(w.phase, HOFF_PHASE_BACKWARD);
    hoff_test_plan_build(&t, 300, &s);
    CU_ASSERT_EQUAL(s.floor_bytes, 560);
    CU_ASSERT_EQUAL(s.floor_ev, 19);
    CU_ASSERT_EQUAL(s.floor_op_ev, 21);
    CU_ASSERT_EQUAL(s.floor_phase, HOFF_PHASE_OPTIMIZER);
    CU_ASSERT_EQUAL(s.floor_blocks, 3);
    CU_ASSERT_EQUAL(s.feasible, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* Kept: 250 at 5, in fwd.l1; the gradients are never candidates. */
    grad_trace(&t, 1, id);
    CU_ASSERT(t.blocks[id[2]].kept && t.blocks[id[2]].pool == 0);
    CU_ASSERT(t.blocks[id[3]].kept && t.blocks[id[3]].pool == 0);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 250);
    CU_ASSERT_EQUAL(fev, 5);
    check_where(&t, &o, fev, floor, 6, HOFF_PHASE_FORWARD, (const uint32_t[]){id[0], id[1]}, 2);
    CU_ASSERT_STRING_EQUAL(hoff__plan_op_name(&t, 6), "fwd.l1");
    /* At the old floor's event only tmp is an activation in use. */
    check_where(&t, &o, 19, 60, 21, HOFF_PHASE_OPTIMIZER, (const uint32_t[]){id[4]}, 1);
    hoff_test_plan_build(&t, 300, &s);
    CU_ASSERT_EQUAL(s.floor_bytes, 250);
    CU_ASSERT_EQUAL(s.floor_ev, 5);
    CU_ASSERT_EQUAL(s.floor_op_ev, 6);
    CU_ASSERT_EQUAL(s.floor_phase, HOFF_PHASE_FORWARD);
    CU_ASSERT_EQUAL(s.floor_blocks, 2);
    CU_ASSERT(s.feasible);
    CU_ASSERT(s.peak_bytes <= 300);
    for (k = 0; k < s.nact; k++)
        CU_ASSERT(s.act[k].block != id[2] && s.act[k].block != id[3]);
    hoff__schedule_destroy(&s);
    /* Below the floor: planned for it. */
    hoff_test_plan_build(&t, 100, &s);
    CU_ASSERT_EQUAL(s.floor_bytes, 250);
    CU_ASSERT_EQUAL(s.feasible, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* What each phase's floor is: the optimizer's names the option that
     * makes gradients candidates; none has nothing to say. */
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__plan_floor_advice(HOFF_PHASE_OPTIMIZER), "HOFF_OFFLOAD_GRADIENTS"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__plan_floor_advice(HOFF_PHASE_LOSS), "cross-entropy"));
    CU_ASSERT(hoff__plan_floor_advice(HOFF_PHASE_FORWARD)[0] != '\0');
    CU_ASSERT_STRING_EQUAL(hoff__plan_floor_advice(HOFF_PHASE_BACKWARD), hoff__plan_floor_advice(HOFF_PHASE_FORWARD));
    CU_ASSERT_STRING_EQUAL(hoff__plan_floor_advice(HOFF_PHASE_NONE), "");
    CU_ASSERT_STRING_EQUAL(hoff__plan_floor_advice(HOFF_PHASE_COUNT), "");
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"floor", test_floor},
        {"build_below_floor", test_build_below_floor},
        {"floor_kept", test_floor_kept},
        {NULL, NULL},
    };
    return hoff_test_run("floor", tests);
}
