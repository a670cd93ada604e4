/* test_greedy.c — the planner registry, the schedule (sort, residency check), use windows (an access holds its
 * block until the next op mark, its free or the step's end: gaps lie between windows, nothing leaves inside
 * one), the working-set floor (where it comes from, kept blocks) and planning below it (hoff__plan_build), and
 * the RFC greedy planner: the RFC's planner test cases, guard margins, pinned/device blocks, and a naive O(M*S)
 * reference on random traces.
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "plan/segtree.h"
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
/* An op mark with a name (hoff__plan_op_at reports it). */
static void op_named(struct hoff__trace *t, const char *name) {
    struct hoff__tev e = {.kind = HOFF__TEV_OP};

    e.t_gpu_ns = HOFF__TIME_UNKNOWN;
    e.t_cpu_ns = t->nev * 1000;
    e.name = hoff__trace_name(t, name);
    CU_ASSERT_NOT_EQUAL_FATAL(e.name, UINT32_MAX);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
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

/* Is block b in use at event x, from the raw events: an alloc or access of b
 * at some e <= x with neither an op mark nor b's free in e+1 .. x (a use
 * window lasts from its access to the next op mark, the free or the step's
 * end, that event excluded). */
static int in_use(const struct hoff__trace *t, uint32_t b, uint32_t x) {
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
        if (a->kind == HOFF__ACT_EVICT || a->kind == HOFF__ACT_RELEASE)
            CU_ASSERT(!in_use(t, a->block, a->ev + (a->when == HOFF__ACT_AFTER)));
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
    uint64_t peak, res[15];
    uint32_t pev, a, d, p, c;

    /* The op marks close the use windows, so that every rejected schedule
     * below is legal but for the one fault it names. */
    tr_begin(&t);
    a = al(&t, 100);           /* 0: a in use 0..4 */
    d = al_pool(&t, 0, 1000);  /* 1 */
    region(&t, 1);             /* 2 */
    p = al(&t, 10);            /* 3 */
    region(&t, 0);             /* 4 */
    op(&t);                    /* 5: closes a's, d's and p's allocs */
    c = al(&t, 50);            /* 6: c in use 6..6 */
    op(&t);                    /* 7 */
    ac(&t, a, 0);              /* 8: a in use 8..9 */
    ac(&t, c, 0);              /* 9: c in use 9..9 */
    op(&t);                    /* 10 */
    fr(&t, a);                 /* 11 */
    fr(&t, c);                 /* 12 */
    fr(&t, d);                 /* 13 */
    fr(&t, p);                 /* 14 */
    fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.blocks[p].pinned, 1);

    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160); /* the device-pool block does not count, the pinned one does */
    CU_ASSERT_EQUAL(pev, 6);

#define REJECT(...)                                                                    \
    do {                                                                               \
        s.nact = 0;                                                                    \
        __VA_ARGS__;                                                                   \
        CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), -EINVAL);            \
    } while (0)
    REJECT(hoff__schedule_add(&s, 2, HOFF__ACT_AFTER, HOFF__ACT_EVICT, c, 0));  /* not born */
    REJECT(hoff__schedule_add(&s, 11, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0)); /* freed */
    REJECT(hoff__schedule_add(&s, 6, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* not away */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, d, 1));  /* device pool */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, p, 3));  /* pinned */
    REJECT(hoff__schedule_add(&s, 15, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0)); /* past the end */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 99, 0)); /* no such block */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
           hoff__schedule_add(&s, 6, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
           hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* twice */
    REJECT(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, a, 0);
           hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0)); /* released */
    REJECT(hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0);
           hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0)); /* unsorted */
#undef REJECT

    /* Legal: away on 6..7 (AFTER 5 .. BEFORE 8), the peak moves to 8. */
    s.nact = 0;
    hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 0);
    hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160);
    CU_ASSERT_EQUAL(pev, 8);
    /* Evicted once its last window has closed, and freed while away
     * (retained-style); released there too. */
    s.nact = 0;
    hoff__schedule_add(&s, 9, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 8);
    CU_ASSERT_EQUAL(hoff__schedule_resident(&t, &s, res, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160);
    CU_ASSERT_EQUAL(pev, 6);
    CU_ASSERT_EQUAL(res[9], 160);
    CU_ASSERT_EQUAL(res[10], 60);
    CU_ASSERT_EQUAL(res[11], 60);
    s.nact = 0;
    hoff__schedule_add(&s, 9, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, a, UINT32_MAX);
    CU_ASSERT_EQUAL(hoff__schedule_resident(&t, &s, res, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, 160);
    CU_ASSERT_EQUAL(pev, 6);
    CU_ASSERT_EQUAL(res[10], 60);
    CU_ASSERT_EQUAL(res[12], 60);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* --- use windows ------------------------------------------------------------- */

/* A trace whose windows the tests below know by heart (b is retained):
 *   a in use on 0..1, 3..5 (the access at 5 lies in the window the access at
 *   3 opened: one window), 8..9 (closed by a's free at 10);
 *   b in use on 1..1, 4..5, 11..12 (open to the step's end). */
static void window_trace(struct hoff__trace *t, uint32_t *a, uint32_t *b) {
    tr_begin(t);
    *a = al(t, 100);      /* 0 */
    *b = al(t, 50);       /* 1 */
    op(t);                /* 2: closes both allocs' windows */
    ac(t, *a, 0);         /* 3 */
    ac(t, *b, 1);         /* 4 */
    ac(t, *a, 0);         /* 5: inside a's open window */
    op(t);                /* 6 */
    op(t);                /* 7 */
    ac(t, *a, 0);         /* 8 */
    al_pool(t, 0, 10);    /* 9: a device-pool block, freed at 12 */
    fr(t, *a);            /* 10: closes a's window */
    ac(t, *b, 0);         /* 11 */
    fr(t, 2);             /* 12 */
    fin(t);
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
        CU_ASSERT_EQUAL(in_use(&t, a, x), win_a[x]); /* the test's own reading agrees */
        CU_ASSERT_EQUAL(in_use(&t, b, x), win_b[x]);
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
                                                     cases[i].act[k][2] == HOFF__ACT_EVICT ? 0 : UINT32_MAX), 0);
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
            {100, 1, 3, a, 0}, {100, 5, 8, a, 0}, {50, 1, 4, b, 1}, {50, 5, 11, b, 4},
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
    plan(&t, 1, &s);
    CU_ASSERT_EQUAL(s.candidates, 4);
    CU_ASSERT_EQUAL(s.nact, 8);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, a), 2);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, b), 2);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_RELEASE, a) + count(&s, HOFF__ACT_RELEASE, b), 0);
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

    tr_begin(&t);
    a = al(&t, 100); /* 0 */
    ops(&t, 6);      /* 1..6 */
    b = al(&t, 200); /* 7 */
    ops(&t, 6);      /* 8..13 */
    fr(&t, b);       /* 14 */
    ops(&t, 6);      /* 15..20 */
    fr(&t, a);       /* 21 */
    fin(&t);
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
    plan_g(&t, 1, 1, 1, &s);
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

    tr_begin(&t);
    a = al(&t, 100); /* 0 */
    b = al(&t, 200); /* 1: retained */
    ac(&t, a, 1);    /* 2 */
    c = al(&t, 50);  /* 3: alloc only */
    ac(&t, b, 0);    /* 4 */
    fr(&t, c);       /* 5 */
    ac(&t, a, 0);    /* 6: a's last access, two events before its free */
    d = al(&t, 300); /* 7: alloc only */
    fr(&t, a);       /* 8 */
    fr(&t, d);       /* 9 */
    fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.has_access_events, 1);
    CU_ASSERT_EQUAL_FATAL(t.has_op_events, 0);

    CU_ASSERT_EQUAL_FATAL(hoff__plan_gaps(&t, &o, &g, &ng), 0);
    CU_ASSERT_EQUAL(ng, 0);
    free(g);
    plan(&t, 1, &s);
    CU_ASSERT_EQUAL(s.candidates, 0);
    CU_ASSERT_EQUAL(s.nact, 0); /* no release of a after 6 either */
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 600);
    CU_ASSERT_EQUAL(s.peak_bytes, 600); /* 7..8: a, b, d */
    CU_ASSERT_EQUAL(s.peak_ev, 7);
    hoff__schedule_destroy(&s);
    /* No guard opens a gap either. */
    plan_g(&t, 1, 0, 0, &s);
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

/* --- the working-set floor ---------------------------------------------------- */

/* Forward f1 f2 f3, backward b3 b2 b1, with a pinned block p (30) live
 * throughout.  Per op, the blocks in use: f1 {a}, f2 {a, b}, f3 {c},
 * b3 {c, b}, b2 {b, a}. */
static void floor_trace(struct hoff__trace *t, uint32_t *a, uint32_t *b, uint32_t *c) {
    uint32_t p;

    tr_begin(t);
    region(t, 1);         /* 0 */
    p = al(t, 30);        /* 1: pinned */
    region(t, 0);         /* 2 */
    op_named(t, "f1");    /* 3 */
    *a = al(t, 100);      /* 4: a in use 4..5 */
    ac(t, *a, 1);         /* 5 */
    op_named(t, "f2");    /* 6 */
    *b = al(t, 200);      /* 7: b in use 7..8 */
    ac(t, *a, 0);         /* 8: a in use 8..8 */
    op_named(t, "f3");    /* 9 */
    *c = al(t, 50);       /* 10: c in use 10..10 */
    op_named(t, "b3");    /* 11 */
    ac(t, *c, 0);         /* 12: c in use 12..13 */
    ac(t, *b, 0);         /* 13: b in use 13..13 */
    op_named(t, "b2");    /* 14: c released from here */
    fr(t, *c);            /* 15 */
    ac(t, *b, 0);         /* 16: b in use 16..17 */
    ac(t, *a, 0);         /* 17: a in use 17..17 */
    op_named(t, "b1");    /* 18: a and b released from here */
    fr(t, *b);            /* 19 */
    fr(t, *a);            /* 20 */
    fr(t, p);             /* 21 */
    fin(t);
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
    tr_begin(&t);
    fin(&t);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &fev), 0);
    CU_ASSERT_EQUAL(floor, 0);
    CU_ASSERT_EQUAL(fev, 0);
    hoff__trace_destroy(&t);
    (void)a;
    (void)b;
    (void)c;
}

static void build(const struct hoff__trace *t, uint64_t budget, struct hoff__schedule *s) {
    struct hoff__plan_opts o = {.budget_bytes = budget};

    hoff__schedule_init(s);
    CU_ASSERT_EQUAL_FATAL(hoff__plan_build(&hoff__planner_greedy, t, &o, s), 0);
    check_schedule(t, s);
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
    build(&t, 330, &at);
    CU_ASSERT_EQUAL(at.floor_bytes, 330);
    CU_ASSERT_EQUAL(at.floor_ev, 8);
    CU_ASSERT(at.feasible);
    CU_ASSERT_EQUAL(at.budget_bytes, 330);
    CU_ASSERT_EQUAL(at.nopeak_bytes, 380);
    CU_ASSERT_EQUAL(at.peak_bytes, 330);
    CU_ASSERT_EQUAL(at.peak_ev, 7);
    CU_ASSERT_EQUAL(one(&at, HOFF__ACT_EVICT, a)->ev, 8);
    CU_ASSERT_EQUAL(one(&at, HOFF__ACT_PREFETCH, a)->ev, 17);
    CU_ASSERT_EQUAL(count(&at, HOFF__ACT_EVICT, b) + count(&at, HOFF__ACT_EVICT, c), 0);
    CU_ASSERT_EQUAL(one(&at, HOFF__ACT_RELEASE, a)->ev, 17);
    CU_ASSERT_EQUAL(one(&at, HOFF__ACT_RELEASE, b)->ev, 17);
    CU_ASSERT_EQUAL(one(&at, HOFF__ACT_RELEASE, c)->ev, 13);
    CU_ASSERT_EQUAL(at.bytes_d2h, 100);
    CU_ASSERT_EQUAL(at.bytes_h2d, 100);

    build(&t, 200, &below);
    build(&t, 329, &just);
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
    check_schedule(&t, &direct);
    CU_ASSERT_EQUAL(direct.bytes_d2h, 600);
    CU_ASSERT_EQUAL(direct.peak_bytes, 330);
    CU_ASSERT_EQUAL(direct.peak_ev, 8);
    CU_ASSERT_EQUAL(direct.feasible, 0);

    /* No budget: nothing to plan, the floor still reported. */
    hoff__schedule_destroy(&at);
    build(&t, 0, &at);
    CU_ASSERT_EQUAL(at.nact, 0);
    CU_ASSERT_EQUAL(at.floor_bytes, 330);
    CU_ASSERT(at.feasible);

    hoff__schedule_destroy(&at);
    hoff__schedule_destroy(&below);
    hoff__schedule_destroy(&just);
    hoff__schedule_destroy(&direct);
    hoff__trace_destroy(&t);
}

/* --- the RFC planner's cases ------------------------------------------------ */

/* --- the floor and kept blocks ----------------------------------------------- */

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
    push(t, &e);
    return e.block;
}

/* Two layers' forward and backward and the optimizer's step, op marks ending
 * their op (as the Python package's do): activations a (100) and b (150);
 * the gradients gb (300) and ga (200), made in backward, read by the
 * optimizer and retained; an optimizer temporary tmp (60).  With kept, the
 * gradients were kept (hoff_keep), as the recorded step notes it.  Gaps: a
 * 1..5 and 5..12, b 4..7, gb 9..17 (every window closes at the next mark). */
static void grad_trace(struct hoff__trace *t, int kept, uint32_t *id) {
    tr_begin(t);
    id[0] = al(t, 100);                          /* 0: a */
    ac(t, id[0], 1);                             /* 1 */
    op_phase(t, "fwd.l0", HOFF_PHASE_FORWARD);   /* 2 */
    id[1] = al(t, 150);                          /* 3: b */
    ac(t, id[1], 1);                             /* 4 */
    ac(t, id[0], 0);                             /* 5: a and b in use: 250 */
    op_phase(t, "fwd.l1", HOFF_PHASE_FORWARD);   /* 6 */
    ac(t, id[1], 0);                             /* 7 */
    id[2] = al_kept(t, 300, kept);               /* 8: gb; b and gb: 450 */
    ac(t, id[2], 1);                             /* 9 */
    op_phase(t, "bwd.l1", HOFF_PHASE_BACKWARD);  /* 10 */
    fr(t, id[1]);                                /* 11 */
    ac(t, id[0], 0);                             /* 12 */
    id[3] = al_kept(t, 200, kept);               /* 13: ga; a and ga: 300 */
    ac(t, id[3], 1);                             /* 14 */
    op_phase(t, "bwd.l0", HOFF_PHASE_BACKWARD);  /* 15 */
    fr(t, id[0]);                                /* 16 */
    ac(t, id[2], 0);                             /* 17 */
    ac(t, id[3], 0);                             /* 18 */
    id[4] = al(t, 60);                           /* 19: tmp; gb, ga and tmp: 560 */
    ac(t, id[4], 1);                             /* 20 */
    op_phase(t, "adam", HOFF_PHASE_OPTIMIZER);   /* 21 */
    fr(t, id[4]);                                /* 22: no op mark after it */
    fin(t);
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
    build(&t, 300, &s);
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
    build(&t, 300, &s);
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
    build(&t, 100, &s);
    CU_ASSERT_EQUAL(s.floor_bytes, 250);
    CU_ASSERT_EQUAL(s.feasible, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* What each phase's floor is: the optimizer's names the option that
     * makes gradients candidates; none has nothing to say. */
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__plan_floor_advice(HOFF_PHASE_OPTIMIZER), "HOFF_OFFLOAD_GRADIENTS"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__plan_floor_advice(HOFF_PHASE_LOSS), "cross-entropy"));
    CU_ASSERT(hoff__plan_floor_advice(HOFF_PHASE_FORWARD)[0] != '\0');
    CU_ASSERT_STRING_EQUAL(hoff__plan_floor_advice(HOFF_PHASE_BACKWARD),
                           hoff__plan_floor_advice(HOFF_PHASE_FORWARD));
    CU_ASSERT_STRING_EQUAL(hoff__plan_floor_advice(HOFF_PHASE_NONE), "");
    CU_ASSERT_STRING_EQUAL(hoff__plan_floor_advice(HOFF_PHASE_COUNT), "");
}

static void test_longest_gap_wins(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, b, c;

    /* Each alloc is its own op: the op mark after it closes its window. */
    tr_begin(&t);
    a = al(&t, 100); /* 0 */
    op(&t);          /* 1 */
    b = al(&t, 100); /* 2 */
    op(&t);          /* 3 */
    c = al(&t, 100); /* 4 */
    ops(&t, 2);      /* 5..6 */
    ac(&t, b, 0);    /* 7: gap 2..7 */
    fr(&t, b);       /* 8 */
    ac(&t, c, 0);    /* 9: gap 4..9 */
    fr(&t, c);       /* 10 */
    ac(&t, a, 0);    /* 11: gap 0..11, the longest */
    fr(&t, a);       /* 12 */
    fin(&t);

    plan(&t, 200, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 300);
    CU_ASSERT_EQUAL(s.candidates, 3);
    CU_ASSERT_EQUAL(s.nact, 2);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->ev, 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->when, HOFF__ACT_AFTER);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, a)->ev, 11);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, a)->when, HOFF__ACT_BEFORE);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, b) + count(&s, HOFF__ACT_EVICT, c), 0);
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
    tr_begin(&t);
    x = al(&t, 100); /* 0 */
    y = al(&t, 200); /* 1 */
    ac(&t, x, 1);    /* 2 */
    op(&t);          /* 3: closes x's window (and y's alloc) */
    ac(&t, y, 1);    /* 4 */
    op(&t);          /* 5: closes y's */
    region(&t, 1);   /* 6 */
    z = al(&t, 100); /* 7: pinned, pushes 7..9 over 350 */
    region(&t, 0);   /* 8 */
    fr(&t, z);       /* 9 */
    op(&t);          /* 10 */
    ac(&t, x, 0);    /* 11: x's gap 2..11, in use 11..11 */
    op(&t);          /* 12: x released from here */
    ac(&t, y, 0);    /* 13: y's gap 4..13, as long, larger; in use 13..13 */
    op(&t);          /* 14: y released from here */
    fr(&t, x);       /* 15 */
    fr(&t, y);       /* 16 */
    fin(&t);

    plan(&t, 350, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 400);
    CU_ASSERT_EQUAL(s.nact, 4);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, x)->ev, 11);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, y)->ev, 13);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, y)->ev, 4);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, y)->copy_ev, 4);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, y)->ev, 13);
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
    x = al(&t, 100); /* 0: gap 0..9 */
    op(&t);          /* 1 */
    y = al(&t, 100); /* 2: gap 2..11 */
    op(&t);          /* 3 */
    region(&t, 1);   /* 4 */
    z = al(&t, 100); /* 5: pinned, pushes 5..8 over 250 */
    region(&t, 0);   /* 6 */
    op(&t);          /* 7 */
    fr(&t, z);       /* 8 */
    ac(&t, x, 0);    /* 9 */
    op(&t);          /* 10 */
    ac(&t, y, 0);    /* 11 */
    fr(&t, x);       /* 12 */
    fr(&t, y);       /* 13 */
    fin(&t);
    plan(&t, 250, &s);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, x)->ev, 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, y), 0);
    CU_ASSERT(s.feasible);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* Same start too: g (no accesses, guard 3 after its alloc at 0, whose
     * window the op at 1 closes) and v (its write at 3 in use until the op
     * at 4) both leave after 3 and come back before 9: the lower block id,
     * g, goes. */
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
    ac(&t, a, 0);    /* 2: a read, in the same op: the gap starts after it */
    op(&t);          /* 3: closes the window */
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
    ac(&t, n, 0);    /* 3: n's last use, its window closed by the op at 4 */
    ops(&t, 2);      /* 4..5 */
    fr(&t, n);       /* 6 */
    m = al(&t, 100); /* 7 */
    ac(&t, m, 0);    /* 8: m's last use, in use until its free */
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

    /* The release counts: with n dropped after 3 (at the op mark 4), 4..6
     * hold only r. */
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

    /* Forward: 8 activations, one op each (alloc at 2i, its window closed
     * by the op mark at 2i + 1); backward reads and frees them in reverse
     * (b[i] read at 20 + 2 (7 - i), freed right after: in use until then, so
     * no release).  b[i]'s gap: 2i .. 20 + 2 (7 - i), length 34 - 4i. */
    tr_begin(&t);
    for (i = 0; i < 8; i++) {
        b[i] = al(&t, 100); /* 2i */
        op(&t);             /* 2i + 1 */
    }
    ops(&t, 4);             /* 16..19 */
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
        CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, b[i])->ev, 2u * (uint32_t)i);
        CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, b[i])->ev, 20u + 2u * (7u - (uint32_t)i));
    }
    for (i = 3; i < 8; i++)
        CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, b[i]), 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT_EQUAL(s.peak_bytes, 500);
    CU_ASSERT_EQUAL(s.peak_ev, 14); /* b[7]'s alloc, with b[3..7] */
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
    a = al(&t, 100);  /* 0: in use 0..0 */
    op(&t);           /* 1 */
    region(&t, 1);    /* 2 */
    p = al(&t, 300);  /* 3 */
    region(&t, 0);    /* 4 */
    ops(&t, 3);       /* 5..7 */
    ac(&t, a, 0);     /* 8: a's gap 0..8; in use 8..8 */
    op(&t);           /* 9: a released from here */
    q = al(&t, 50);   /* 10 */
    ac(&t, q, 0);     /* 11: in use 10..11 */
    op(&t);           /* 12 */
    ac(&t, q, 0);     /* 13: q's gap 11..13; in use until its free */
    fr(&t, q);        /* 14 */
    fr(&t, a);        /* 15 */
    fr(&t, p);        /* 16 */
    fin(&t);

    plan(&t, 200, &s);
    CU_ASSERT_EQUAL(s.nopeak_bytes, 450);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, p), 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, a)->ev, 0);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, a)->ev, 8);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, q)->ev, 11);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, q)->ev, 13);
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

    /* 400 is the floor (first at 8, a's access with p, when every gap is
     * taken), and no byte moved lowers the peak below it: planned for the
     * floor, the budget moves nothing, and only a's release remains. */
    build(&t, 200, &s);
    CU_ASSERT_EQUAL(s.floor_bytes, 400);
    CU_ASSERT_EQUAL(s.floor_ev, 8);
    CU_ASSERT_EQUAL(s.feasible, 0);
    CU_ASSERT_EQUAL(s.budget_bytes, 200);
    CU_ASSERT_EQUAL(s.nact, 1);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_RELEASE, a)->ev, 8);
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
    g = al(&t, 100);  /* 0: in use 0..1 */
    h = al(&t, 100);  /* 1: retained; in use 1..1 */
    ops(&t, 2);       /* 2..3 */
    sm = al(&t, 100); /* 4: in use 4..4 */
    ops(&t, 4);       /* 5..8 */
    fr(&t, sm);       /* 9: 4+2 .. 9-3 is empty */
    ops(&t, 10);      /* 10..19 */
    fr(&t, g);        /* 20 */
    op(&t);           /* 21 */
    /* One access mark in the step (of a device-pool block): the step says
     * when its marked blocks are used, so the op marks close windows and
     * the unmarked blocks get the guard rule.  Without any, every window
     * lasts until the free (no_marks_no_gaps below). */
    ac(&t, al_pool(&t, 0, 64), 0); /* 22, 23 */
    fin(&t);
    CU_ASSERT_EQUAL_FATAL(t.has_access_events, 1);

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

    /* No guards: the whole lifetime after the alloc's window.  Above, the
     * guards came later than the windows' ends (g: 0 + 2 > 2 - 1); here the
     * window decides: g's alloc is in use until the op mark at 2, so g
     * leaves AFTER 1, not AFTER 0 as a lifetime from the alloc would have
     * it.  h's window ends at the same mark, sm's at the one at 5. */
    plan_g(&t, 1, 0, 0, &s);
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_EVICT, g)->ev, 1);
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
    op(&t);                   /* 5: closes m's window */
    x = al(&t, 500);          /* 6: managed, but in use throughout (no op mark until its free) */
    ac(&t, x, 0);             /* 7 */
    ac(&t, x, 0);             /* 8 */
    fr(&t, x);                /* 9 */
    ops(&t, 5);               /* 10..14 */
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
    CU_ASSERT_EQUAL(one(&s, HOFF__ACT_PREFETCH, m)->ev, 17);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_EVICT, x) + count(&s, HOFF__ACT_RELEASE, x), 0);
    CU_ASSERT_EQUAL(s.feasible, 0);       /* 6..9: p and x */
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
    uint64_t copy_sum;                    /* sum of copy_ev over the evictions */
    uint64_t peak;
    uint32_t peak_ev;
    uint64_t floor;                       /* every gap taken, and the releases */
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
static void naive(const struct hoff__trace *t, uint64_t budget, uint32_t ga, uint32_t gb,
                  struct nres *r) {
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
            if (with_ops)
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
        check_schedule(&t, &sb);
        CU_ASSERT_EQUAL(sb.floor_bytes, floor);
        CU_ASSERT_EQUAL(sb.floor_ev, fev);
        CU_ASSERT_EQUAL(sb.budget_bytes, budget);
        if (budget >= floor) {
            CU_ASSERT(same_actions(&sb, &s));
            CU_ASSERT_EQUAL(sb.feasible, s.feasible);
        } else {
            o.budget_bytes = floor;
            plan_g(&t, floor, ga, gb, &sf);
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
    printf("\n    naive: %d infeasible, %d evicting, %d without op marks, %d below the floor (%d moving)\n",
           infeasible, evicting, no_ops, below_floor, floor_moves);
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

/* The planners' segment tree against a plain array: random range adds (of
 * both signs), range maxima, the last leaf above a threshold, the top and
 * its first leaf, on sizes that are and are not powers of two. */
static void test_segtree(void) {
    static const uint32_t sizes[] = {1, 2, 3, 7, 8, 9, 64, 100, 1000};
    uint64_t rs = 0x5e97ee;
    size_t z;

    for (z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        uint32_t n = sizes[z], i, k;
        int64_t *v = malloc(n * sizeof *v);
        struct hoff__segtree sg;

        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        for (i = 0; i < n; i++)
            v[i] = (int64_t)(hoff_test_rand(&rs) % 1000);
        CU_ASSERT_EQUAL_FATAL(hoff__segtree_init(&sg, v, n), 0);
        for (k = 0; k < 2000; k++) {
            uint32_t l = (uint32_t)(hoff_test_rand(&rs) % n), r = (uint32_t)(hoff_test_rand(&rs) % n), x, pos;
            int64_t d = (int64_t)(hoff_test_rand(&rs) % 200) - 100, m = INT64_MIN, thr, top = INT64_MIN;
            uint32_t want = UINT32_MAX, arg = 0;
            int found;

            if (l > r)
                x = l, l = r, r = x;
            if (k % 2) {
                hoff__segtree_add(&sg, l, r, d);
                for (x = l; x <= r; x++)
                    v[x] += d;
            }
            for (x = l; x <= r; x++)
                m = v[x] > m ? v[x] : m;
            CU_ASSERT_EQUAL(hoff__segtree_max(&sg, l, r), m);
            thr = m - (int64_t)(hoff_test_rand(&rs) % 50) + (k % 7 == 0 ? 10 : 0);
            for (x = l; x <= r; x++)
                if (v[x] > thr)
                    want = x;
            found = hoff__segtree_last_above(&sg, l, r, thr, &pos);
            CU_ASSERT_EQUAL(found, want != UINT32_MAX);
            if (found && want != UINT32_MAX)
                CU_ASSERT_EQUAL(pos, want);
            for (x = 0; x < n; x++)
                if (v[x] > top)
                    top = v[x], arg = x;
            CU_ASSERT_EQUAL(hoff__segtree_top(&sg), top);
            CU_ASSERT_EQUAL(hoff__segtree_argmax(&sg), arg);
        }
        hoff__segtree_destroy(&sg);
        free(v);
    }
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"segtree", test_segtree},
        {"registry", test_registry},
        {"schedule_sort", test_schedule_sort},
        {"schedule_peak_rejects", test_schedule_peak_rejects},
        {"use_windows", test_use_windows},
        {"schedule_peak_windows", test_schedule_peak_windows},
        {"gaps_between_windows", test_gaps_between_windows},
        {"no_op_marks_no_gaps", test_no_op_marks_no_gaps},
        {"no_access_marks_no_gaps", test_no_access_marks_no_gaps},
        {"floor", test_floor},
        {"build_below_floor", test_build_below_floor},
        {"floor_kept", test_floor_kept},
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
