/* testplan.c — the planner suites' trace builders and schedule checks (testutil.h): steps built event by event
 * (allocations, frees, accesses, op marks, regions) and the rules every greedy schedule must satisfy, checked on
 * each plan made through hoff_test_plan_g, hoff_test_plan and hoff_test_plan_build.
 * Threading: main (the test) thread only; the builders share the open-region depth of the trace being built. */
#include "config.h"

#include <stdlib.h>

#include "plan/plan.h"
#include "testutil.h"

/* --- building traces ------------------------------------------------------- */

static int depth; /* open regions while building: allocations inside are pinned */

void hoff_test_trace_begin(struct hoff__trace *t) {
    hoff__trace_init(t);
    depth = 0;
}

void hoff_test_push(struct hoff__trace *t, struct hoff__tev *e) {
    e->t_gpu_ns = HOFF__TIME_UNKNOWN;
    e->t_cpu_ns = t->nev * 1000;
    e->name = UINT32_MAX;
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, e), 0);
}

uint32_t hoff_test_al_pool(struct hoff__trace *t, int pool, uint64_t size) {
    struct hoff__tev e = {.kind = HOFF__TEV_ALLOC, .pool = (uint8_t)pool, .size = size};

    e.block = t->nblocks;
    e.flags = depth > 0 ? HOFF__TEV_PINNED : 0;
    hoff_test_push(t, &e);
    return e.block;
}
uint32_t hoff_test_al(struct hoff__trace *t, uint64_t size) {
    return hoff_test_al_pool(t, 1, size);
}
void hoff_test_fr(struct hoff__trace *t, uint32_t b) {
    struct hoff__tev e = {.kind = HOFF__TEV_FREE, .block = b};
    hoff_test_push(t, &e);
}
void hoff_test_ac(struct hoff__trace *t, uint32_t b, int write) {
    struct hoff__tev e = {.kind = HOFF__TEV_ACCESS, .block = b, .flags = write ? HOFF__TEV_WRITE : 0};
    hoff_test_push(t, &e);
}
void hoff_test_op(struct hoff__trace *t) {
    struct hoff__tev e = {.kind = HOFF__TEV_OP};
    hoff_test_push(t, &e);
}
void hoff_test_ops(struct hoff__trace *t, int n) {
    while (n-- > 0)
        hoff_test_op(t);
}
/* An op mark with a name (hoff__plan_op_at reports it). */
void hoff_test_op_named(struct hoff__trace *t, const char *name) {
    struct hoff__tev e = {.kind = HOFF__TEV_OP};

    e.t_gpu_ns = HOFF__TIME_UNKNOWN;
    e.t_cpu_ns = t->nev * 1000;
    e.name = hoff__trace_name(t, name);
    CU_ASSERT_NOT_EQUAL_FATAL(e.name, UINT32_MAX);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
}
void hoff_test_region(struct hoff__trace *t, int begin) {
    struct hoff__tev e = {.kind = begin ? HOFF__TEV_REGION_BEGIN : HOFF__TEV_REGION_END};
    hoff_test_push(t, &e);
    depth += begin ? 1 : -1;
}
int hoff_test_region_depth(void) {
    return depth;
}
void hoff_test_fin(struct hoff__trace *t) {
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(t), 0);
}

/* --- checking schedules ---------------------------------------------------- */

int hoff_test_count(const struct hoff__schedule *s, int kind, uint32_t block) {
    size_t i;
    int n = 0;

    for (i = 0; i < s->nact; i++)
        n += s->act[i].kind == kind && s->act[i].block == block;
    return n;
}

/* The one action of kind on block (the test fails if there is not exactly one). */
const struct hoff__action *hoff_test_one(const struct hoff__schedule *s, int kind, uint32_t block) {
    size_t i;

    CU_ASSERT_EQUAL_FATAL(hoff_test_count(s, kind, block), 1);
    for (i = 0; i < s->nact; i++)
        if (s->act[i].kind == kind && s->act[i].block == block)
            return &s->act[i];
    return NULL;
}

/* Is block b in use at event x, from the raw events: an alloc or access of b
 * at some e <= x with neither an op mark nor b's free in e+1 .. x (a use
 * window lasts from its access to the next op mark, the free or the step's
 * end, that event excluded). */
int hoff_test_in_use(const struct hoff__trace *t, uint32_t b, uint32_t x) {
    uint32_t i;

    if (x >= t->nev)
        return 0;
    for (i = x + 1; i-- > 0;) {
        const struct hoff__tev *e = &t->ev[i];

        if ((e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_ACCESS) && e->block == b)
            return 1;
        if (e->kind == HOFF__TEV_OP || (e->kind == HOFF__TEV_FREE && e->block == b))
            return 0;
    }
    return 0;
}

/* What every schedule must satisfy: sorted; the residency check agrees with
 * the planner's peak; feasible says whether it meets the budget; the traffic
 * adds up; no block is away when it is accessed or freed; no eviction or
 * release takes effect (at ev, or ev + 1 for an AFTER action) while the
 * block is in a use window. */
void hoff_test_check_schedule(const struct hoff__trace *t, const struct hoff__schedule *s) {
    uint64_t peak = 0, d2h = 0, h2d = 0;
    uint32_t peak_ev = 0;
    uint8_t *st;
    size_t i, k = 0;

    for (i = 1; i < s->nact; i++) {
        const struct hoff__action *p = &s->act[i - 1], *a = &s->act[i];

        CU_ASSERT(p->ev < a->ev || (p->ev == a->ev && p->when <= a->when));
        if (p->ev == a->ev && p->when == a->when)
            CU_ASSERT(!(p->kind == HOFF__ACT_PREFETCH && a->kind != HOFF__ACT_PREFETCH));
    }
    CU_ASSERT_EQUAL_FATAL(hoff__schedule_peak(t, s, &peak, &peak_ev), 0);
    CU_ASSERT_EQUAL(peak, s->peak_bytes);
    CU_ASSERT_EQUAL(peak_ev, s->peak_ev);
    if (s->budget_bytes)
        CU_ASSERT_EQUAL(s->feasible, s->peak_bytes <= s->budget_bytes);
    CU_ASSERT(s->peak_bytes <= s->nopeak_bytes);
    CU_ASSERT_STRING_EQUAL(s->planner, "greedy");

    /* 0 unborn, 1 resident, 2 away, 3 released */
    st = calloc(t->nblocks + 1, 1);
    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];

        for (; k < s->nact && s->act[k].ev == i && s->act[k].when == HOFF__ACT_BEFORE; k++)
            if (s->act[k].kind == HOFF__ACT_PREFETCH)
                st[s->act[k].block] = 1;
        if (e->kind == HOFF__TEV_ALLOC)
            st[e->block] = 1;
        if (e->kind == HOFF__TEV_ACCESS)
            CU_ASSERT_EQUAL(st[e->block], 1);
        if (e->kind == HOFF__TEV_FREE)
            CU_ASSERT(st[e->block] == 1 || st[e->block] == 3);
        for (; k < s->nact && s->act[k].ev == i; k++)
            st[s->act[k].block] = s->act[k].kind == HOFF__ACT_EVICT ? 2 : 3;
    }
    free(st);
    for (i = 0; i < s->nact; i++) {
        const struct hoff__action *a = &s->act[i];

        if (a->kind == HOFF__ACT_EVICT)
            d2h += t->blocks[a->block].size;
        if (a->kind == HOFF__ACT_PREFETCH)
            h2d += t->blocks[a->block].size;
        if (a->kind == HOFF__ACT_EVICT || a->kind == HOFF__ACT_RELEASE)
            CU_ASSERT(!hoff_test_in_use(t, a->block, a->ev + (a->when == HOFF__ACT_AFTER)));
        if (a->kind == HOFF__ACT_EVICT) {
            CU_ASSERT(a->when == HOFF__ACT_AFTER);
            CU_ASSERT(a->copy_ev <= a->ev);
        } else {
            CU_ASSERT(a->kind == HOFF__ACT_PREFETCH ? a->when == HOFF__ACT_BEFORE : a->when == HOFF__ACT_AFTER);
        }
    }
    CU_ASSERT_EQUAL(d2h, s->bytes_d2h);
    CU_ASSERT_EQUAL(h2d, s->bytes_h2d);
}

void hoff_test_plan_g(const struct hoff__trace *t, uint64_t budget, uint32_t ga, uint32_t gb,
                      struct hoff__schedule *s) {
    struct hoff__plan_opts o = {.budget_bytes = budget, .guard_after_alloc = ga, .guard_before_free = gb};

    hoff__schedule_init(s);
    CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(t, &o, s), 0);
    hoff_test_check_schedule(t, s);
}
void hoff_test_plan(const struct hoff__trace *t, uint64_t budget, struct hoff__schedule *s) {
    hoff_test_plan_g(t, budget, 0, 0, s);
}

void hoff_test_plan_build(const struct hoff__trace *t, uint64_t budget, struct hoff__schedule *s) {
    struct hoff__plan_opts o = {.budget_bytes = budget};

    hoff__schedule_init(s);
    CU_ASSERT_EQUAL_FATAL(hoff__plan_build(&hoff__planner_greedy, t, &o, s), 0);
    hoff_test_check_schedule(t, s);
}
