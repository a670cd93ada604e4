/* test_greedy.c — the planner registry, the schedule (sort, residency check) and the RFC greedy planner: the
 * RFC's planner test cases, guard margins, pinned/device blocks, and a naive O(M*S) reference on random traces.
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

/* --- building traces ------------------------------------------------------- */

static int depth; /* open regions while building: allocations inside are pinned */

static void tr_begin(struct hoff__trace *t) {
    hoff__trace_init(t);
    depth = 0;
}

static void push(struct hoff__trace *t, struct hoff__tev *e) {
    e->t_gpu_ns = HOFF__TIME_UNKNOWN;
    e->t_cpu_ns = t->nev * 1000;
    e->name = UINT32_MAX;
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, e), 0);
}

static uint32_t al_pool(struct hoff__trace *t, int pool, uint64_t size) {
    struct hoff__tev e = {.kind = HOFF__TEV_ALLOC, .pool = (uint8_t)pool, .size = size};

    e.block = t->nblocks;
    e.flags = depth > 0 ? HOFF__TEV_PINNED : 0;
    push(t, &e);
    return e.block;
}
static uint32_t al(struct hoff__trace *t, uint64_t size) {
    return al_pool(t, 1, size);
}
static void fr(struct hoff__trace *t, uint32_t b) {
    struct hoff__tev e = {.kind = HOFF__TEV_FREE, .block = b};
    push(t, &e);
}
static void ac(struct hoff__trace *t, uint32_t b, int write) {
    struct hoff__tev e = {.kind = HOFF__TEV_ACCESS, .block = b, .flags = write ? HOFF__TEV_WRITE : 0};
    push(t, &e);
}
static void op(struct hoff__trace *t) {
    struct hoff__tev e = {.kind = HOFF__TEV_OP};
    push(t, &e);
}
static void ops(struct hoff__trace *t, int n) {
    while (n-- > 0)
        op(t);
}
static void region(struct hoff__trace *t, int begin) {
    struct hoff__tev e = {.kind = begin ? HOFF__TEV_REGION_BEGIN : HOFF__TEV_REGION_END};
    push(t, &e);
    depth += begin ? 1 : -1;
}
static void fin(struct hoff__trace *t) {
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(t), 0);
}

/* --- checking schedules ---------------------------------------------------- */

static int count(const struct hoff__schedule *s, int kind, uint32_t block) {
    size_t i;
    int n = 0;

    for (i = 0; i < s->nact; i++)
        n += s->act[i].kind == kind && s->act[i].block == block;
    return n;
}

/* The one action of kind on block (the test fails if there is not exactly one). */
static const struct hoff__action *one(const struct hoff__schedule *s, int kind, uint32_t block) {
    size_t i;

    CU_ASSERT_EQUAL_FATAL(count(s, kind, block), 1);
    for (i = 0; i < s->nact; i++)
        if (s->act[i].kind == kind && s->act[i].block == block)
            return &s->act[i];
    return NULL;
}

/* What every schedule must satisfy: sorted; the residency check agrees with
 * the planner's peak; feasible says whether it meets the budget; the traffic
 * adds up; no block is away when it is accessed or freed. */
static void check_schedule(const struct hoff__trace *t, const struct hoff__schedule *s) {
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
        if (a->kind == HOFF__ACT_EVICT) {
            CU_ASSERT(a->when == HOFF__ACT_AFTER);
            CU_ASSERT(a->copy_ev <= a->ev);
        } else {
            CU_ASSERT(a->kind == HOFF__ACT_PREFETCH ? a->when == HOFF__ACT_BEFORE
                                                    : a->when == HOFF__ACT_AFTER);
        }
    }
    CU_ASSERT_EQUAL(d2h, s->bytes_d2h);
    CU_ASSERT_EQUAL(h2d, s->bytes_h2d);
}

static void plan_g(const struct hoff__trace *t, uint64_t budget, uint32_t ga, uint32_t gb,
                   struct hoff__schedule *s) {
    struct hoff__plan_opts o = {.budget_bytes = budget, .guard_after_alloc = ga,
                                .guard_before_free = gb};

    hoff__schedule_init(s);
    CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(t, &o, s), 0);
    check_schedule(t, s);
}
static void plan(const struct hoff__trace *t, uint64_t budget, struct hoff__schedule *s) {
    plan_g(t, budget, 0, 0, s);
}

/* --- registry and schedule ------------------------------------------------- */

static void test_registry(void) {
    CU_ASSERT_PTR_EQUAL(hoff__planner_find("greedy"), &hoff__planner_greedy);
    CU_ASSERT_PTR_EQUAL(hoff__planner_find("GrEeDy"), &hoff__planner_greedy);
    CU_ASSERT_PTR_NULL(hoff__planner_find("greed"));
    CU_ASSERT_PTR_NULL(hoff__planner_find(""));
    CU_ASSERT_PTR_NULL(hoff__planner_find(NULL));
    CU_ASSERT_PTR_EQUAL(hoff__planner_at(0), &hoff__planner_greedy);
    CU_ASSERT_PTR_NULL(hoff__planner_at(-1));
    CU_ASSERT_PTR_NULL(hoff__planner_at(1000));
    CU_ASSERT_PTR_NOT_NULL(hoff__planner_greedy.help);
}

static void test_schedule_sort(void) {
    /* (ev, when, kind, block) in a scrambled order; block ids number the
     * insertion order within equal keys. */
    static const uint32_t in[][4] = {
        {5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 1},   {5, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 2},
        {2, HOFF__ACT_AFTER, HOFF__ACT_PREFETCH, 3}, {5, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 4},
        {5, HOFF__ACT_BEFORE, HOFF__ACT_RELEASE, 5}, {5, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 6},
        {0, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 7},   {5, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, 8},
        {2, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, 9},
    };
    static const uint32_t want[] = {7, 9, 3, 4, 5, 8, 2, 6, 1};
    struct hoff__schedule s;
    size_t i;

    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 0, 7, HOFF__ACT_EVICT, 0, 0), -EINVAL);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 0, HOFF__ACT_AFTER, HOFF__ACT_KIND_COUNT, 0, 0), -EINVAL);
    for (i = 0; i < sizeof in / sizeof in[0]; i++)
        CU_ASSERT_EQUAL(hoff__schedule_add(&s, in[i][0], (int)in[i][1], (int)in[i][2], in[i][3], 0), 0);
    hoff__schedule_sort(&s);
    CU_ASSERT_EQUAL_FATAL(s.nact, sizeof want / sizeof want[0]);
    for (i = 0; i < s.nact; i++)
        CU_ASSERT_EQUAL(s.act[i].block, want[i]);
    hoff__schedule_destroy(&s);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT_PTR_NULL(s.act);

    /* Many actions: grows, sorts stably. */
    {
        uint64_t rs = 7;

        for (i = 0; i < 5000; i++)
            CU_ASSERT_EQUAL(hoff__schedule_add(&s, (uint32_t)(hoff_test_rand(&rs) % 100),
                                               (int)(hoff_test_rand(&rs) % 2),
                                               (int)(hoff_test_rand(&rs) % 3), (uint32_t)i, 0), 0);
        hoff__schedule_sort(&s);
        for (i = 1; i < s.nact; i++) {
            const struct hoff__action *p = &s.act[i - 1], *a = &s.act[i];
            int pp = p->kind == HOFF__ACT_PREFETCH, ap = a->kind == HOFF__ACT_PREFETCH;

            CU_ASSERT(p->ev < a->ev || (p->ev == a->ev && (p->when < a->when ||
                      (p->when == a->when && (pp < ap || (pp == ap && p->block < a->block))))));
        }
        hoff__schedule_destroy(&s);
    }
}

static void test_schedule_peak_rejects(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint64_t peak;
    uint32_t pev, a, d, p;

    tr_begin(&t);
    a = al(&t, 100);           /* 0 */
    d = al_pool(&t, 0, 1000);  /* 1 */
    region(&t, 1);             /* 2 */
    p = al(&t, 10);            /* 3 */
    region(&t, 0);             /* 4 */
    op(&t);                    /* 5 */
    fr(&t, a);                 /* 6 */
    fr(&t, d);                 /* 7 */
    fr(&t, p);                 /* 8 */
    fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.blocks[p].pinned, 1);

    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 110); /* the device-pool block does not count, the pinned one does */
    CU_ASSERT_EQUAL(pev, 3);

#define REJECT(...)                                                                    \
    do {                                                                               \
        s.nact = 0;                                                                    \
        __VA_ARGS__;                                                                   \
        CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), -EINVAL);            \
    } while (0)
    REJECT(hoff__schedule_add(&s, 0, HOFF__ACT_BEFORE, HOFF__ACT_EVICT, a, 0)); /* not born */
    REJECT(hoff__schedule_add(&s, 6, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0));  /* freed */
    REJECT(hoff__schedule_add(&s, 2, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* not away */
    REJECT(hoff__schedule_add(&s, 2, HOFF__ACT_AFTER, HOFF__ACT_EVICT, d, 0));  /* device pool */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, p, 3));  /* pinned */
    REJECT(hoff__schedule_add(&s, 9, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0));  /* past the end */
    REJECT(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 99, 0)); /* no such block */
    REJECT(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
           hoff__schedule_add(&s, 2, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0)); /* twice */
    REJECT(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, a, 0);
           hoff__schedule_add(&s, 2, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* released */
    REJECT(hoff__schedule_add(&s, 4, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
           hoff__schedule_add(&s, 2, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* unsorted */
#undef REJECT

    /* Legal: away on 2..4 (AFTER 1 .. BEFORE 5), the peak moves to 5. */
    s.nact = 0;
    hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
    hoff__schedule_add(&s, 5, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 110);
    CU_ASSERT_EQUAL(pev, 5);
    /* Evicted and freed while away is legal (retained-style); released too. */
    s.nact = 0;
    hoff__schedule_add(&s, 3, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 110);
    CU_ASSERT_EQUAL(pev, 3);
    s.nact = 0;
    hoff__schedule_add(&s, 0, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, a, UINT32_MAX);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 100);
    CU_ASSERT_EQUAL(pev, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* --- the RFC planner's cases ------------------------------------------------ */

static void test_longest_gap_wins(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, b, c;

    tr_begin(&t);
    a = al(&t, 100); /* 0 */
    b = al(&t, 100); /* 1 */
    c = al(&t, 100); /* 2 */
    ops(&t, 3);      /* 3..5 */
    ac(&t, b, 0);    /* 6: gap 1..6 */
    fr(&t, b);       /* 7 */
    ac(&t, c, 0);    /* 8: gap 2..8 */
    fr(&t, c);       /* 9 */
    ac(&t, a, 0);    /* 10: gap 0..10, the longest */
    fr(&t, a);       /* 11 */
    fin(&t);

    plan(&t, 200, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 300);
    CU_ASSERT_EQUAL(s.candidates, 3);
    CU_ASSERT_EQUAL(s.nact, 2);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->ev, 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->when, HOFF__ACT_AFTER);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, a)->ev, 10);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, a)->when, HOFF__ACT_BEFORE);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, b) + count(&s, HOFF__ACT_EVICT, c), 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_ev, 2);
    CU_ASSERT_EQUAL(s.bytes_d2h, 100);
    CU_ASSERT_EQUAL(s.bytes_h2d, 100);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_equal_gaps_larger_first(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t x, y, z;

    tr_begin(&t);
    x = al(&t, 100); /* 0 */
    y = al(&t, 200); /* 1 */
    ac(&t, x, 1);    /* 2 */
    ac(&t, y, 1);    /* 3 */
    op(&t);          /* 4 */
    region(&t, 1);   /* 5 */
    z = al(&t, 100); /* 6: pinned, pushes 6..8 over 350 */
    region(&t, 0);   /* 7 */
    fr(&t, z);       /* 8 */
    op(&t);          /* 9 */
    ac(&t, x, 0);    /* 10: x's gap 2..10 */
    ac(&t, y, 0);    /* 11: y's gap 3..11, as long, larger */
    fr(&t, x);       /* 12 */
    fr(&t, y);       /* 13 */
    fin(&t);

    plan(&t, 350, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 400);
    CU_ASSERT_EQUAL(s.nact, 4);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, x)->ev, 10);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, y)->ev, 11);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, y)->ev, 3);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, y)->ev, 11);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, x), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, z), 0);
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

    tr_begin(&t);
    x = al(&t, 100); /* 0: gap 0..8 */
    y = al(&t, 100); /* 1: gap 1..9 */
    region(&t, 1);   /* 2 */
    z = al(&t, 100); /* 3: pinned, pushes 3..7 over 250 */
    region(&t, 0);   /* 4 */
    op(&t);          /* 5 */
    op(&t);          /* 6 */
    fr(&t, z);       /* 7 */
    ac(&t, x, 0);    /* 8 */
    ac(&t, y, 0);    /* 9 */
    fr(&t, x);       /* 10 */
    fr(&t, y);       /* 11 */
    fin(&t);
    plan(&t, 250, &s);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, x)->ev, 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, y), 0);
    CU_ASSERT(s.feasible);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* Same start too: g (no accesses, guard 3 after its alloc at 0) and v
     * (accessed at 3) both leave after 3 and come back before 9: the lower
     * block id, g, goes. */
    tr_begin(&t);
    g = al(&t, 100); /* 0 */
    op(&t);          /* 1 */
    v = al(&t, 100); /* 2 */
    ac(&t, v, 1);    /* 3 */
    ops(&t, 5);      /* 4..8 */
    ac(&t, v, 0);    /* 9 */
    fr(&t, v);       /* 10 */
    op(&t);          /* 11 */
    fr(&t, g);       /* 12: guard 3 before: back before 9 */
    fin(&t);
    plan_g(&t, 150, 3, 3, &s);
    CU_ASSERT_EQUAL(s.candidates, 2);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, g)->ev, 3);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, g)->ev, 9);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, v), 0);
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

    tr_begin(&t);
    a = al(&t, 100); /* 0 */
    ac(&t, a, 1);    /* 1: the last write */
    ac(&t, a, 0);    /* 2: a read, the gap starts here */
    op(&t);          /* 3 */
    c = al(&t, 100); /* 4: no accesses; the guards leave it no gap */
    ops(&t, 3);      /* 5..7 */
    fr(&t, c);       /* 8 */
    op(&t);          /* 9 */
    ac(&t, a, 0);    /* 10 */
    fr(&t, a);       /* 11 */
    fin(&t);

    plan_g(&t, 150, 10, 10, &s);
    CU_ASSERT_EQUAL(s.candidates, 1);
    CU_ASSERT_EQUAL(s.nact, 2);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->ev, 2);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->copy_ev, 1);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, a)->ev, 10);
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

    tr_begin(&t);
    r = al(&t, 100); /* 0: retained */
    ac(&t, r, 0);    /* 1 */
    n = al(&t, 100); /* 2 */
    ac(&t, n, 0);    /* 3: n's last use */
    ops(&t, 2);      /* 4..5 */
    fr(&t, n);       /* 6 */
    m = al(&t, 100); /* 7 */
    ac(&t, m, 0);    /* 8: m's last use, right before its free */
    fr(&t, m);       /* 9 */
    fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.blocks[r].retained, 1);

    plan(&t, 1000, &s);
    CU_ASSERT_EQUAL(s.nact, 1);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, n)->ev, 3);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, n)->when, HOFF__ACT_AFTER);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_RELEASE, r), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_RELEASE, m), 0);
    CU_ASSERT_EQUAL(s.bytes_d2h + s.bytes_h2d, 0);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_ev, 2);
    hoff__schedule_destroy(&s);

    /* The release counts: with n dropped after 3, 4..6 hold only r. */
    plan(&t, 150, &s);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_RELEASE, n), 1);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_stops_once_budget_met(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t b[8];
    int i;

    /* Forward: 8 activations; backward reads and frees them in reverse. */
    tr_begin(&t);
    for (i = 0; i < 8; i++)
        b[i] = al(&t, 100); /* 0..7 */
    ops(&t, 4);             /* 8..11 */
    for (i = 7; i >= 0; i--) {
        ac(&t, b[i], 0);
        fr(&t, b[i]);
    }
    fin(&t);

    plan(&t, 500, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 800);
    CU_ASSERT_EQUAL(s.candidates, 8);
    CU_ASSERT_EQUAL(s.nact, 6);
    for (i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, b[i])->ev, (uint32_t)i);
        CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, b[i])->ev, 12u + 2u * (7u - (uint32_t)i));
    }
    for (i = 3; i < 8; i++)
        CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, b[i]), 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 500);
    CU_ASSERT_EQUAL(s.bytes_d2h, 300);
    CU_ASSERT_EQUAL(s.bytes_h2d, 300);
    hoff__schedule_destroy(&s);

    /* A budget above the peak: nothing to do. */
    plan(&t, 800, &s);
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
    tr_begin(&t);
    a = al(&t, 100);  /* 0 */
    region(&t, 1);    /* 1 */
    p = al(&t, 300);  /* 2 */
    region(&t, 0);    /* 3 */
    ops(&t, 4);       /* 4..7 */
    ac(&t, a, 0);     /* 8 */
    q = al(&t, 50);   /* 9 */
    ac(&t, q, 0);     /* 10 */
    op(&t);           /* 11 */
    ac(&t, q, 0);     /* 12 */
    fr(&t, q);        /* 13 */
    fr(&t, a);        /* 14 */
    fr(&t, p);        /* 15 */
    fin(&t);

    plan(&t, 200, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 450);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, p), 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->ev, 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, a)->ev, 8);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, q)->ev, 10);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, q)->ev, 12);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, a)->ev, 8);
    /* The lowest peak reached: a and p at a's access. */
    CU_ASSERT_EQUAL(s.peak_bytes, 400);
    CU_ASSERT_EQUAL(s.peak_ev, 8);
    hoff__schedule_destroy(&s);

    /* Below the pinned bytes: infeasible even where everything goes. */
    plan(&t, 1, &s);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT(s.peak_bytes >= 300);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_budget_zero_is_empty(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, b;

    tr_begin(&t);
    a = al(&t, 100);
    b = al(&t, 100);
    ac(&t, b, 0);
    ops(&t, 5);
    ac(&t, a, 0);
    ops(&t, 2);
    fr(&t, a);
    fr(&t, b);
    fin(&t);
    plan(&t, 0, &s);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_bytes, 200);
    CU_ASSERT_EQUAL(s.peak_ev, 1);
    CU_ASSERT_EQUAL(s.budget_bytes, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* An empty trace. */
    tr_begin(&t);
    fin(&t);
    plan(&t, 10, &s);
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

    tr_begin(&t);
    g = al(&t, 100);  /* 0 */
    h = al(&t, 100);  /* 1: retained */
    ops(&t, 2);       /* 2..3 */
    sm = al(&t, 100); /* 4 */
    ops(&t, 4);       /* 5..8 */
    fr(&t, sm);       /* 9: 4+2 .. 9-3 is empty */
    ops(&t, 10);      /* 10..19 */
    fr(&t, g);        /* 20 */
    op(&t);           /* 21 */
    fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.has_access_events, 0);

    plan_g(&t, 1, 2, 3, &s);
    CU_ASSERT_EQUAL(s.candidates, 2);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, g)->ev, 2);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, g)->copy_ev, 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, g)->ev, 17);
    /* Retained: away from 4 to the step's end; its first use in the next step
     * pages it back (managed memory), so no prefetch. */
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, h)->ev, 3);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_PREFETCH, h), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_RELEASE, h), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, sm), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_RELEASE, g), 0); /* the free releases */
    CU_ASSERT_EQUAL(s.bytes_d2h, 200);
    CU_ASSERT_EQUAL(s.bytes_h2d, 100);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(s.peak_bytes, 200); /* 1..2: g and h before their guards end */
    CU_ASSERT_EQUAL(s.peak_ev, 1);
    hoff__schedule_destroy(&s);

    /* No guards: the whole lifetime. */
    plan_g(&t, 1, 0, 0, &s);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, g)->ev, 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, g)->ev, 20);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, h)->ev, 1);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, sm)->ev, 4);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, sm)->ev, 9);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_pinned_and_device_never_evicted(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t d, p, m, x;

    tr_begin(&t);
    d = al_pool(&t, 0, 1000); /* 0: device pool: never counts */
    region(&t, 1);            /* 1 */
    p = al(&t, 100);          /* 2: pinned: counts, never moves */
    region(&t, 0);            /* 3 */
    m = al(&t, 100);          /* 4 */
    x = al(&t, 500);          /* 5: managed, but accessed throughout */
    ac(&t, x, 0);             /* 6 */
    ac(&t, x, 0);             /* 7 */
    fr(&t, x);                /* 8 */
    ops(&t, 6);               /* 9..14 */
    ac(&t, d, 0);             /* 15 */
    ac(&t, p, 0);             /* 16 */
    ac(&t, m, 0);             /* 17 */
    fr(&t, m);                /* 18 */
    fr(&t, p);                /* 19 */
    fr(&t, d);                /* 20 */
    fin(&t);

    plan(&t, 150, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 700);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, d) + count(&s, HOFF__ACT_RELEASE, d), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, p) + count(&s, HOFF__ACT_RELEASE, p), 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, m)->ev, 4);
    CU_ASSERT_EQUAL(s.feasible, 0);       /* 5..8: p and x */
    CU_ASSERT_EQUAL(s.peak_bytes, 600);
    CU_ASSERT_EQUAL(s.peak_ev, 5);
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
    uint64_t copy_sum;                    /* sum of copy_ev over the evictions */
    uint64_t peak;
    uint32_t peak_ev;
};

/* The RFC algorithm straight from the spec, from the raw events. */
static void naive(const struct hoff__trace *t, uint64_t budget, uint32_t ga, uint32_t gb,
                  struct nres *r) {
    uint32_t nev = (uint32_t)t->nev, nb = t->nblocks, i, j, *accev, *naccs, *lastw;
    uint64_t *size;
    uint8_t *pool, *pinned, *accw;
    uint32_t *alloc, *freev;
    int64_t *res, worst;
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
    lastw = calloc(nb + 1, sizeof *lastw);
    accev = calloc((size_t)nev * 1 + 1, sizeof *accev); /* per event: is it an access of its block */
    accw = calloc(nev + 1, 1);
    res = calloc(nev + 1, sizeof *res);
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
            accev[i] = 1;
            accw[i] = 1;
        }
        if (e->kind == HOFF__TEV_FREE)
            freev[e->block] = i;
        if (e->kind == HOFF__TEV_ACCESS) {
            accev[i] = 1;
            accw[i] = (e->flags & HOFF__TEV_WRITE) != 0;
            naccs[e->block]++;
        }
    }
    /* Residency with no offload, then the releases. */
    for (j = 0; j < nb; j++)
        if (pool[j] == 1)
            for (i = alloc[j]; i < nev && i <= freev[j]; i++)
                res[i] += (int64_t)size[j];
    worst = -1;
    for (i = 0; i < nev; i++)
        if (res[i] > worst)
            worst = res[i];
    for (j = 0; j < nb; j++) {
        uint32_t prev = alloc[j];

        if (pool[j] != 1 || pinned[j])
            continue;
        lastw[j] = alloc[j];
        if (naccs[j] == 0) { /* guard margins */
            int64_t a = (int64_t)alloc[j] + ga;
            int64_t b = freev[j] == UINT32_MAX ? (int64_t)nev : (int64_t)freev[j] - gb;

            if (b > a + 1)
                c[nc++] = (struct nc){size[j], (uint32_t)a, (uint32_t)b, j, alloc[j]};
            continue;
        }
        for (i = alloc[j] + 1; i < nev; i++) {
            if (!accev[i] || t->ev[i].block != j || t->ev[i].kind != HOFF__TEV_ACCESS)
                continue;
            if (i > prev + 1)
                c[nc++] = (struct nc){size[j], prev, i, j, lastw[j]};
            if (accw[i])
                lastw[j] = i;
            prev = i;
        }
        if (freev[j] != UINT32_MAX && prev + 1 < freev[j]) {
            for (i = prev + 1; i <= freev[j]; i++)
                res[i] -= (int64_t)size[j];
            r->release[r->nrelease++] = (uint64_t)j << 32 | prev;
        }
    }
    r->ncand = nc;
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
    free(lastw);
    free(accev);
    free(accw);
    free(res);
    free(c);
}

static void nres_free(struct nres *r) {
    free(r->evict);
    free(r->prefetch);
    free(r->release);
}

/* A random trace: allocations in both pools, frees, accesses (or none at
 * all), ops, regions; whatever is live at the end is retained. */
static void random_trace(struct hoff__trace *t, uint64_t *rs) {
    uint32_t live[256], nlive = 0;
    size_t n = 10 + hoff_test_rand(rs) % 250;
    int with_access = hoff_test_rand(rs) % 4 != 0;
    uint64_t pool0 = hoff_test_rand(rs) % 4; /* device-pool share: pool0 / 8 */

    tr_begin(t);
    while (t->nev < n) {
        unsigned r = (unsigned)(hoff_test_rand(rs) % 100);

        if ((r < 30 || nlive == 0) && nlive < 256) {
            int pool = hoff_test_rand(rs) % 8 < pool0 ? 0 : 1;
            /* half from a few sizes, so that ties in (gap, size) decide */
            uint64_t size = hoff_test_rand(rs) % 2 ? 16u << hoff_test_rand(rs) % 3
                                                  : 1 + hoff_test_rand(rs) % 1000;

            live[nlive++] = al_pool(t, pool, size);
        } else if (r < 50 && nlive) {
            uint32_t k = (uint32_t)(hoff_test_rand(rs) % nlive);

            fr(t, live[k]);
            live[k] = live[--nlive];
        } else if (r < 85 && nlive && with_access) {
            ac(t, live[hoff_test_rand(rs) % nlive], hoff_test_rand(rs) % 3 == 0);
        } else if (r < 96) {
            op(t);
        } else if (depth == 0) {
            region(t, 1);
        } else {
            region(t, 0);
        }
    }
    while (depth > 0)
        region(t, 0);
    while (nlive > 2) { /* most blocks end, a few stay */
        uint32_t k = (uint32_t)(hoff_test_rand(rs) % nlive);

        if (hoff_test_rand(rs) % 4 == 0)
            break;
        fr(t, live[k]);
        live[k] = live[--nlive];
    }
    fin(t);
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

static void test_matches_naive_reference(void) {
    uint64_t rs = 0x5eed, *k;
    int iter, infeasible = 0, evicting = 0;

    for (iter = 0; iter < 400; iter++) {
        struct hoff__trace t;
        struct hoff__schedule s, s0;
        struct nres r;
        uint64_t budget, copy_sum = 0;
        uint32_t ga = (uint32_t)(hoff_test_rand(&rs) % 4), gb = (uint32_t)(hoff_test_rand(&rs) % 4);
        size_t i, n;

        random_trace(&t, &rs);
        plan_g(&t, 0, ga, gb, &s0); /* the no-offload peak */
        budget = 1 + hoff_test_rand(&rs) % (s0.nopeak_bytes + s0.nopeak_bytes / 4 + 1);
        plan_g(&t, budget, ga, gb, &s);
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

        free(k);
        nres_free(&r);
        hoff__schedule_destroy(&s);
        hoff__schedule_destroy(&s0);
        hoff__trace_destroy(&t);
    }
    /* The mix covered both outcomes. */
    CU_ASSERT(infeasible > 20);
    CU_ASSERT(evicting > 100);
    CU_ASSERT(iter - infeasible > 20);
}

/* A schedule built over an old one replaces it. */
static void test_rebuild_replaces(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o = {.budget_bytes = 150};
    uint32_t a, b;

    tr_begin(&t);
    a = al(&t, 100);
    b = al(&t, 100);
    ops(&t, 4);
    ac(&t, a, 0);
    ac(&t, b, 0);
    fr(&t, a);
    fr(&t, b);
    fin(&t);
    plan(&t, 150, &s);
    CU_ASSERT(s.nact > 0);
    CU_ASSERT(s.plan_ns > 0);
    o.budget_bytes = 0;
    CU_ASSERT_EQUAL(hoff__planner_find("greedy")->build(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT_EQUAL(s.bytes_d2h, 0);
    CU_ASSERT(s.feasible);
    check_schedule(&t, &s);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"registry", test_registry},
        {"schedule_sort", test_schedule_sort},
        {"schedule_peak_rejects", test_schedule_peak_rejects},
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
