/* test_timed.c — the timing-aware planner and the replay prediction it ranks schedules by: valid schedules,
 * prefetches early enough, the budget kept, a prediction worked out by hand, never worse than greedy.
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "trace/synth.h"
#include "testutil.h"

#define MiB (1024ull * 1024)

static uint64_t tnow; /* time of the next event, ns */

static void push(struct hoff__trace *t, struct hoff__tev *e, uint64_t dt) {
    tnow += dt;
    e->t_gpu_ns = tnow;
    e->t_cpu_ns = tnow;
    e->name = UINT32_MAX;
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, e), 0);
}
static uint32_t al(struct hoff__trace *t, uint64_t size, uint64_t dt) {
    struct hoff__tev e = {.kind = HOFF__TEV_ALLOC, .pool = 1, .size = size};

    e.block = t->nblocks;
    push(t, &e, dt);
    return e.block;
}
static void fr(struct hoff__trace *t, uint32_t b, uint64_t dt) {
    struct hoff__tev e = {.kind = HOFF__TEV_FREE, .block = b};
    push(t, &e, dt);
}
static void ac(struct hoff__trace *t, uint32_t b, uint64_t dt) {
    struct hoff__tev e = {.kind = HOFF__TEV_ACCESS, .block = b};
    push(t, &e, dt);
}
static void op(struct hoff__trace *t, uint64_t dt) {
    struct hoff__tev e = {.kind = HOFF__TEV_OP};
    push(t, &e, dt);
}

/* The instant-transfer check agrees: actions valid, peak never above what
 * the planner claims, feasible meaning peak <= budget; no block away at its
 * use; traffic adds up. */
static void check(const struct hoff__trace *t, const struct hoff__schedule *s) {
    uint64_t peak = 0, d2h = 0, h2d = 0;
    uint32_t pev = 0;
    uint8_t *st = calloc(t->nblocks + 1, 1);
    size_t i, k = 0;

    CU_ASSERT_STRING_EQUAL(s->planner, "timed");
    CU_ASSERT_EQUAL_FATAL(hoff__schedule_peak(t, s, &peak, &pev), 0);
    CU_ASSERT_EQUAL(peak, s->peak_bytes);
    CU_ASSERT_EQUAL(pev, s->peak_ev);
    CU_ASSERT(s->peak_bytes <= s->nopeak_bytes);
    if (s->budget_bytes) {
        CU_ASSERT_EQUAL(s->feasible, s->peak_bytes <= s->budget_bytes);
        if (s->feasible)
            CU_ASSERT(peak <= s->budget_bytes);
    }
    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];

        for (; k < s->nact && s->act[k].ev == i && s->act[k].when == HOFF__ACT_BEFORE; k++)
            if (s->act[k].kind == HOFF__ACT_PREFETCH)
                st[s->act[k].block] = 0;
        if (e->kind == HOFF__TEV_ACCESS)
            CU_ASSERT_EQUAL(st[e->block], 0);
        for (; k < s->nact && s->act[k].ev == i; k++)
            st[s->act[k].block] = 1;
    }
    for (i = 0; i < s->nact; i++) {
        d2h += s->act[i].kind == HOFF__ACT_EVICT ? t->blocks[s->act[i].block].size : 0;
        h2d += s->act[i].kind == HOFF__ACT_PREFETCH ? t->blocks[s->act[i].block].size : 0;
    }
    CU_ASSERT_EQUAL(d2h, s->bytes_d2h);
    CU_ASSERT_EQUAL(h2d, s->bytes_h2d);
    free(st);
}

static void plan(const struct hoff__trace *t, uint64_t budget, struct hoff__schedule *s) {
    struct hoff__plan_opts o = {.budget_bytes = budget, .h2d_gbps = 50, .d2h_gbps = 50};

    hoff__schedule_init(s);
    CU_ASSERT_EQUAL_FATAL(hoff__planner_timed.build(t, &o, s), 0);
    check(t, s);
}

static const struct hoff__action *find(const struct hoff__schedule *s, int kind, uint32_t block) {
    size_t i;

    for (i = 0; i < s->nact; i++)
        if (s->act[i].kind == kind && s->act[i].block == block)
            return &s->act[i];
    return NULL;
}

/* A 64 MiB block written, then 20 ops of 1 ms, then read; a second block
 * allocated in between makes the peak.  50 GB/s: the copy back takes ~1.35
 * ms, so the prefetch must be issued at least two ops before the read. */
static void test_prefetch_early_enough(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    const struct hoff__action *p;
    uint32_t a, b, i, use;

    hoff__trace_init(&t);
    tnow = 0;
    a = al(&t, 64 * MiB, 0);
    ac(&t, a, 1000);
    for (i = 0; i < 8; i++)
        op(&t, 1000000);
    b = al(&t, 64 * MiB, 1000);
    fr(&t, b, 1000);
    for (i = 0; i < 12; i++)
        op(&t, 1000000);
    ac(&t, a, 1000);
    use = (uint32_t)t.nev - 1;
    fr(&t, a, 1000);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(&t), 0);

    plan(&t, 64 * MiB, &s);
    CU_ASSERT(s.feasible);
    p = find(&s, HOFF__ACT_PREFETCH, a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT(t.ev[use].t_gpu_ns - t.ev[p->ev].t_gpu_ns >= 10000 + 64 * MiB / 50);
    CU_ASSERT(p->ev > t.blocks[b].free_ev); /* not before the peak it was evicted for */
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* Two blocks used at the same late point: moving both prefetches early would
 * overlap a third allocation and break the budget; the planner keeps it. */
static void test_budget_kept_when_moving_early(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, b, c, i;

    hoff__trace_init(&t);
    tnow = 0;
    a = al(&t, 64 * MiB, 0);
    b = al(&t, 64 * MiB, 1000);
    for (i = 0; i < 4; i++)
        op(&t, 1000000);
    c = al(&t, 128 * MiB, 1000);
    op(&t, 100000);
    fr(&t, c, 100000);
    op(&t, 100000);
    ac(&t, a, 100000);
    ac(&t, b, 1000);
    fr(&t, a, 1000);
    fr(&t, b, 1000);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(&t), 0);

    plan(&t, 128 * MiB, &s);
    CU_ASSERT(s.feasible);
    CU_ASSERT(s.peak_bytes <= 128 * MiB);
    CU_ASSERT_PTR_NOT_NULL(find(&s, HOFF__ACT_PREFETCH, a));
    CU_ASSERT_PTR_NOT_NULL(find(&s, HOFF__ACT_PREFETCH, b));
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_budget_zero_and_infeasible(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint32_t a, b;

    hoff__trace_init(&t);
    tnow = 0;
    a = al(&t, 64 * MiB, 0);
    b = al(&t, 64 * MiB, 1000);
    ac(&t, a, 1000);
    ac(&t, b, 1000);
    fr(&t, a, 1000);
    fr(&t, b, 1000);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(&t), 0);

    plan(&t, 0, &s); /* no limit: nothing to do */
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT_EQUAL(s.peak_bytes, 128 * MiB);
    CU_ASSERT(s.feasible);
    hoff__schedule_destroy(&s);

    plan(&t, 32 * MiB, &s); /* both are used together: cannot be met */
    CU_ASSERT(!s.feasible);
    CU_ASSERT(s.peak_bytes > 32 * MiB);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* A 4-layer synthetic transformer step of the given hidden size. */
static void synth4(struct hoff__trace *t, uint64_t hidden) {
    struct hoff__synth_opts so;

    hoff__synth_defaults(&so);
    so.hidden = hidden;
    so.layers = 4;
    hoff__trace_init(t);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_transformer(t, &so), 0);
}

/* Synthetic transformer steps at several budgets: valid, and within budget
 * wherever greedy is (timed falls back to greedy's intervals). */
static void test_synthetic(void) {
    static const uint64_t hidden[] = {512, 1024, 2048};
    static const int pct[] = {90, 50, 25, 10, 1};
    size_t i, j;

    for (i = 0; i < 3; i++) {
        struct hoff__trace t;

        synth4(&t, hidden[i]);
        for (j = 0; j < 5; j++) {
            struct hoff__schedule s, g;
            struct hoff__plan_opts o = {.h2d_gbps = 50, .d2h_gbps = 50};
            uint64_t budget = hoff__trace_offload_peak(&t, NULL, NULL) * (uint64_t)pct[j] / 100;

            plan(&t, budget, &s);
            o.budget_bytes = budget;
            hoff__schedule_init(&g);
            CU_ASSERT_EQUAL(hoff__planner_greedy.build(&t, &o, &g), 0);
            if (g.feasible && pct[j] >= 25)
                CU_ASSERT(s.feasible);
            hoff__schedule_destroy(&g);
            hoff__schedule_destroy(&s);
        }
        hoff__trace_destroy(&t);
    }
}

/* Random training-shaped traces (no times in some: t_gpu unknown). */
static void test_random(void) {
    uint64_t seed;

    for (seed = 1; seed <= 20; seed++) {
        struct hoff__trace t;
        struct hoff__schedule s;
        uint64_t peak;

        hoff__trace_init(&t);
        CU_ASSERT_EQUAL_FATAL(hoff__synth_events(&t, 2000, seed), 0);
        peak = hoff__trace_offload_peak(&t, NULL, NULL);
        plan(&t, peak / (seed % 5 + 2), &s);
        hoff__schedule_destroy(&s);
        hoff__trace_destroy(&t);
    }
}

/* A (a_bytes) written and later read, B (b_bytes) allocated, used and
 * freed 1 ms after A's last write, tail_ops ops of 1 ms before A's read. */
static void build_pair_trace(struct hoff__trace *t, uint64_t a_bytes, uint64_t b_bytes, uint32_t tail_ops) {
    uint32_t a, b, i;

    hoff__trace_init(t);
    tnow = 0;
    a = al(t, a_bytes, 0);       /* ev 0 at 0 */
    ac(t, a, 1000);              /* ev 1 at 1000: A's last write */
    op(t, 1000);                 /* ev 2 at 2000: A's eviction starts */
    b = al(t, b_bytes, 1000000); /* ev 3 at 1,002,000 */
    ac(t, b, 1000);
    fr(t, b, 1000); /* ev 5 */
    for (i = 0; i < tail_ops; i++)
        op(t, 1000000);
    ac(t, a, 1000);
    fr(t, a, 1000);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(t), 0);
}

/* predict.c on a step worked out by hand: A (64 MiB) written, evicted;
 * B (64 MiB) allocated 1 ms later must wait for A's copy to land; A comes
 * back at its use.  50 GB/s, 10 us a call: a copy takes 1,352,178 ns. */
static void build_wait_trace(struct hoff__trace *t, uint32_t tail_ops) {
    build_pair_trace(t, 64 * MiB, 64 * MiB, tail_ops);
}

static void test_predict_by_hand(void) {
    struct hoff__plan_opts o = {.budget_bytes = 64 * MiB, .h2d_gbps = 50, .d2h_gbps = 50};
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__prediction pr;
    uint64_t *T;

    build_wait_trace(&t, 0);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.nact, 2);
    CU_ASSERT_EQUAL(hoff__plan_predict(&t, &o, T, &s, HOFF__PLACE_KEEP, &pr), 0);
    /* A lands at 2000 + 1,352,178; B's alloc at 1,002,000 waits for it. */
    CU_ASSERT_EQUAL(pr.room_ns, 2000 + 1352178 - 1002000);
    /* A's prefetch is issued at its use and waited for in full. */
    CU_ASSERT_EQUAL(pr.late_ns, 1352178);
    CU_ASSERT_EQUAL(pr.faults, 0);
    CU_ASSERT_EQUAL(pr.stall_ns, pr.room_ns + pr.late_ns);
    CU_ASSERT_EQUAL(s.stall_ns, pr.stall_ns);
    CU_ASSERT_EQUAL(pr.bytes_d2h, 64 * MiB);
    CU_ASSERT_EQUAL(pr.bytes_h2d, 64 * MiB);
    CU_ASSERT_EQUAL(pr.prefetch_calls, 1);
    /* Nowhere earlier to go: B holds the room until its free. */
    CU_ASSERT_EQUAL(hoff__plan_predict(&t, &o, T, &s, HOFF__PLACE_EARLY, &pr), 0);
    CU_ASSERT_EQUAL(pr.late_ns, 1352178);
    hoff__schedule_destroy(&s);
    free(T);
    hoff__trace_destroy(&t);

    /* Three 1 ms ops between B's free and A's use: placed early, A's
     * prefetch goes right after the free and lands before the use. */
    build_wait_trace(&t, 3);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(hoff__plan_predict(&t, &o, T, &s, HOFF__PLACE_EARLY, &pr), 0);
    CU_ASSERT_EQUAL(pr.late_ns, 0);
    CU_ASSERT_EQUAL(pr.room_ns, 2000 + 1352178 - 1002000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(find(&s, HOFF__ACT_PREFETCH, 0));
    CU_ASSERT_EQUAL(find(&s, HOFF__ACT_PREFETCH, 0)->ev, 6); /* the first event after B's free */
    {
        uint64_t peak;
        uint32_t pev;

        CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &pev), 0);
        CU_ASSERT(peak <= 64 * MiB);
    }
    hoff__schedule_destroy(&s);
    /* timed picks that placement on its own and predicts the same */
    plan(&t, 64 * MiB, &s);
    CU_ASSERT_EQUAL(s.stall_ns, 2000 + 1352178 - 1002000);
    hoff__schedule_destroy(&s);
    free(T);
    hoff__trace_destroy(&t);
}

/* Early prefetches and releases, by hand (budget 128 MiB, 64 MiB blocks):
 * A is evicted, R is released after its last use at event 3 (the call fires
 * at event 4 and lands 10 us later), N is allocated at event 4, and A comes
 * back at event 6.  Packed as early as it fits, A's prefetch goes at event
 * 3, and N's allocation must wait for R's release to land; leaving the
 * release its room, it goes at event 5 and nothing waits. */
static void test_early_headroom_by_hand(void) {
    struct hoff__plan_opts o = {.budget_bytes = 128 * MiB, .h2d_gbps = 50, .d2h_gbps = 50};
    struct hoff__trace t;
    struct hoff__schedule s, h;
    struct hoff__prediction pr;
    uint64_t *T;
    uint32_t a, r, n;

    hoff__trace_init(&t);
    tnow = 0;
    a = al(&t, 64 * MiB, 0);    /* ev 0 at 0 */
    ac(&t, a, 1000);            /* ev 1 */
    r = al(&t, 64 * MiB, 1000); /* ev 2 at 2000: A's eviction fires */
    ac(&t, r, 1998000);         /* ev 3 at 2,000,000: R's last use */
    n = al(&t, 64 * MiB, 1000); /* ev 4 at 2,001,000: R's release fires */
    op(&t, 999000);             /* ev 5 at 3,000,000 */
    ac(&t, a, 7000000);         /* ev 6 at 10,000,000 */
    fr(&t, r, 1000);
    fr(&t, n, 1000);
    fr(&t, a, 1000);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(&t), 0);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    hoff__schedule_init(&s);
    hoff__schedule_init(&h);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 1), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 3, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, r, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 6, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, a, UINT32_MAX), 0);
    hoff__schedule_sort(&s);
    CU_ASSERT_EQUAL_FATAL(hoff__schedule_copy(&h, &s), 0);
    CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &s, HOFF__PLACE_EARLY, &pr), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(find(&s, HOFF__ACT_PREFETCH, a));
    CU_ASSERT_EQUAL(find(&s, HOFF__ACT_PREFETCH, a)->ev, 3);
    CU_ASSERT_EQUAL(pr.room_ns, 10000); /* N waits for the release's call */
    CU_ASSERT_EQUAL(pr.late_ns, 0);
    CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &h, HOFF__PLACE_EARLY_HEADROOM, &pr), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(find(&h, HOFF__ACT_PREFETCH, a));
    CU_ASSERT_EQUAL(find(&h, HOFF__ACT_PREFETCH, a)->ev, 5);
    CU_ASSERT_EQUAL(pr.stall_ns, 0);
    /* and the placement holds when replayed where it was put */
    CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &h, HOFF__PLACE_KEEP, &pr), 0);
    CU_ASSERT_EQUAL(pr.stall_ns, 0);
    hoff__schedule_destroy(&s);
    hoff__schedule_destroy(&h);
    free(T);
    hoff__trace_destroy(&t);
}

/* The host cap and the NVMe tier in predict.c, by hand: A and C (64 MiB
 * each) are evicted with a host cap of 64 MiB, then A is used.  D2H copies
 * take 1,352,178 ns (50 GB/s, 10 us a call); an NVMe write 16,787,216 ns
 * (4 GB/s), a read 8,398,608 ns (8 GB/s); a page-in 20 us + 8,388,608 ns. */
static void test_predict_tiers_by_hand(void) {
    struct hoff__plan_opts o = {.budget_bytes = 256 * MiB,
                                .h2d_gbps = 50,
                                .d2h_gbps = 50,
                                .host_cap_bytes = 64 * MiB,
                                .nvme = 1,
                                .nvme_read_gbps = 8,
                                .nvme_write_gbps = 4};
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__prediction pr;
    uint64_t *T;
    uint32_t a, c;

    hoff__trace_init(&t);
    tnow = 0;
    a = al(&t, 64 * MiB, 0);    /* ev 0 at 0 */
    ac(&t, a, 1000);            /* ev 1 */
    c = al(&t, 64 * MiB, 1000); /* ev 2 at 2000: A's eviction fires */
    ac(&t, c, 1000);            /* ev 3 */
    op(&t, 1000);               /* ev 4 at 4000: C's eviction fires */
    ac(&t, a, 1000);            /* ev 5 at 5000 */
    fr(&t, a, 1000);
    fr(&t, c, 1000);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(&t), 0);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, a, 1), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 3, HOFF__ACT_AFTER, HOFF__ACT_EVICT, c, 3), 0);
    hoff__schedule_sort(&s);
    CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &s, HOFF__PLACE_KEEP, &pr), 0);
    /* C's eviction at 4000 finds the host full once A lands: it waits for A
     * (1,354,178 - 4000), spills A and waits for the write (16,787,216).  A's
     * use at 18,142,394 must restore A: the host has C on its way, so it
     * waits for C (19,493,572 - 18,142,394), spills C, waits for that write,
     * then reads A back (8,398,608) and pages it in. */
    CU_ASSERT_EQUAL(pr.tier_ns, 1350178 + 16787216 + 1351178 + 16787216 + 8398608);
    CU_ASSERT_EQUAL(pr.faults, 1);
    CU_ASSERT_EQUAL(pr.fault_ns, 20000 + 8388608);
    CU_ASSERT_EQUAL(pr.room_ns + pr.late_ns, 0);
    CU_ASSERT_EQUAL(pr.stall_ns, pr.tier_ns + pr.fault_ns);
    CU_ASSERT_EQUAL(pr.bytes_spilled, 128 * MiB);
    CU_ASSERT_EQUAL(pr.bytes_restored, 64 * MiB);
    CU_ASSERT_EQUAL(pr.bytes_d2h, 128 * MiB);
    /* Without an NVMe tier C cannot leave the device: nothing waits, and
     * A is paged in from the host. */
    o.nvme = 0;
    CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &s, HOFF__PLACE_KEEP, &pr), 0);
    CU_ASSERT_EQUAL(pr.tier_ns, 0);
    CU_ASSERT_EQUAL(pr.bytes_d2h, 64 * MiB);
    CU_ASSERT_EQUAL(pr.bytes_spilled, 0);
    CU_ASSERT_EQUAL(pr.faults, 1);
    /* No cap: the two evictions simply overlap their copies. */
    o.nvme = 1;
    o.host_cap_bytes = 0;
    CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &s, HOFF__PLACE_KEEP, &pr), 0);
    CU_ASSERT_EQUAL(pr.tier_ns, 0);
    CU_ASSERT_EQUAL(pr.bytes_d2h, 128 * MiB);
    hoff__schedule_destroy(&s);
    free(T);
    hoff__trace_destroy(&t);
}

/* On synthetic transformer steps timed's predicted stall is never above
 * greedy's (greedy's schedule is one of its candidates), and where copies
 * can hide behind compute it is far lower. */
static void test_never_worse_than_greedy(void) {
    static const uint64_t hidden[] = {1024, 4096};
    static const int pct[] = {50, 25, 10};
    uint64_t best_ratio_x10 = 0;
    size_t i, j;

    for (i = 0; i < 2; i++) {
        struct hoff__trace t;

        synth4(&t, hidden[i]);
        for (j = 0; j < 3; j++) {
            struct hoff__schedule s, g;
            struct hoff__plan_opts o = {.h2d_gbps = 50, .d2h_gbps = 50};

            o.budget_bytes = hoff__trace_offload_peak(&t, NULL, NULL) * (uint64_t)pct[j] / 100;
            plan(&t, o.budget_bytes, &s);
            hoff__schedule_init(&g);
            CU_ASSERT_EQUAL(hoff__planner_greedy.build(&t, &o, &g), 0);
            CU_ASSERT(s.stall_ns != UINT64_MAX && g.stall_ns != UINT64_MAX);
            CU_ASSERT(s.stall_ns <= g.stall_ns);
            {
                /* with groups: never above greedy's schedule as the runtime groups it */
                struct hoff__schedule sg, gg;
                struct hoff__prediction pr;
                uint64_t *T = hoff__plan_times(&t);

                o.groups = 1;
                hoff__schedule_init(&sg);
                hoff__schedule_init(&gg);
                CU_ASSERT_EQUAL(hoff__planner_timed.build(&t, &o, &sg), 0);
                CU_ASSERT_EQUAL(hoff__planner_greedy.build(&t, &o, &gg), 0);
                CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &gg), 0);
                CU_ASSERT_PTR_NOT_NULL_FATAL(T);
                CU_ASSERT_EQUAL(hoff__plan_predict(&t, &o, T, &gg, HOFF__PLACE_KEEP, &pr), 0);
                CU_ASSERT(sg.grouped);
                CU_ASSERT(sg.stall_ns <= gg.stall_ns);
                /* and fewer calls cost at most a hair: 2% of the ungrouped
                 * plan's stall, or 0.5% of the step's compute */
                CU_ASSERT(sg.stall_ns <= s.stall_ns + (s.stall_ns / 50 > (T[t.nev - 1] - T[0]) / 200
                                                           ? s.stall_ns / 50
                                                           : (T[t.nev - 1] - T[0]) / 200));
                {
                    struct hoff__prediction pu;
                    struct hoff__schedule su;

                    /* no more calls than the ungrouped plan's */
                    hoff__schedule_init(&su);
                    CU_ASSERT_EQUAL(hoff__schedule_copy(&su, &s), 0);
                    CU_ASSERT_EQUAL(hoff__plan_predict(&t, &o, T, &sg, HOFF__PLACE_KEEP, &pr), 0);
                    CU_ASSERT_EQUAL(hoff__plan_predict(&t, &o, T, &su, HOFF__PLACE_KEEP, &pu), 0);
                    CU_ASSERT(pr.prefetch_calls <= pu.prefetch_calls);
                    hoff__schedule_destroy(&su);
                }
                o.groups = 0;
                free(T);
                hoff__schedule_destroy(&gg);
                hoff__schedule_destroy(&sg);
            }
            if (s.stall_ns && g.stall_ns / s.stall_ns * 10 > best_ratio_x10)
                best_ratio_x10 = g.stall_ns * 10 / s.stall_ns;
            if (!s.stall_ns && g.stall_ns)
                best_ratio_x10 = UINT64_MAX;
            hoff__schedule_destroy(&g);
            hoff__schedule_destroy(&s);
        }
        hoff__trace_destroy(&t);
    }
    CU_ASSERT(best_ratio_x10 >= 30); /* h4096 at 50%: the copies mostly hide */
}

/* The local search on prefetch points (refine): on synthetic transformer
 * steps, timed without groups stalls no more than the best of the rules it
 * starts from (greedy's two selections, each placed at the use, early, or
 * early with headroom: recomputed here), keeps the budget at every event
 * in instant-transfer terms, and beats the rules somewhere. */
static void test_refine_beats_rules(void) {
    static const uint64_t hidden[] = {1024, 4096};
    static const int pct[] = {50, 25, 10};
    static const int place[3] = {HOFF__PLACE_KEEP, HOFF__PLACE_EARLY, HOFF__PLACE_EARLY_HEADROOM};
    int gained = 0;
    size_t i, j, k;

    for (i = 0; i < 2; i++) {
        struct hoff__trace t;
        uint64_t *T;

        synth4(&t, hidden[i]);
        T = hoff__plan_times(&t);
        CU_ASSERT_PTR_NOT_NULL_FATAL(T);
        for (j = 0; j < 3; j++) {
            struct hoff__plan_opts o = {.h2d_gbps = 50, .d2h_gbps = 50};
            struct hoff__schedule s, base, c;
            struct hoff__prediction pr;
            uint64_t rules = UINT64_MAX;
            int64_t *res = NULL;

            o.budget_bytes = hoff__trace_offload_peak(&t, NULL, NULL) * (uint64_t)pct[j] / 100;
            hoff__schedule_init(&base);
            hoff__schedule_init(&c);
            CU_ASSERT_EQUAL_FATAL(hoff__plan_begin("timed", &t, &o, &base, &res), 0);
            CU_ASSERT_PTR_NOT_NULL_FATAL(res);
            for (k = 0; k < 6; k++) {
                CU_ASSERT_EQUAL_FATAL(hoff__schedule_copy(&c, &base), 0);
                CU_ASSERT_EQUAL_FATAL(hoff__plan_greedy_select(&t, &o, res, k < 3 ? NULL : T, &c), 0);
                CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &c, place[k % 3], &pr), 0);
                if (c.stall_ns < rules)
                    rules = c.stall_ns;
            }
            plan(&t, o.budget_bytes, &s); /* check(): valid, within budget when feasible */
            {
                uint64_t floor;
                uint32_t at;

                /* feasible wherever the working-set floor allows (at 10% the
                 * blocks in use in one op can be more than the budget) */
                CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &at), 0);
                CU_ASSERT(s.feasible || o.budget_bytes < floor);
                CU_ASSERT(!s.feasible || o.budget_bytes >= floor);
            }
            CU_ASSERT(s.stall_ns <= rules);
            gained += s.stall_ns < rules;
            free(res);
            hoff__schedule_destroy(&c);
            hoff__schedule_destroy(&base);
            hoff__schedule_destroy(&s);
        }
        free(T);
        hoff__trace_destroy(&t);
    }
    CU_ASSERT(gained >= 1);
}

/* Budget overruns are predicted as the runtime counts them: A (128 MiB)
 * does not fit a 64 MiB budget at its allocation, nor at its page-in after
 * B (48 MiB) made it leave, and the planners' schedules say so
 * (overruns); within a budget that holds A there are none. */
static void test_overruns_predicted(void) {
    static const struct {
        uint64_t budget;
        uint64_t overruns;
    } want[] = {{64 * MiB, 2}, {192 * MiB, 0}};
    size_t k;

    for (k = 0; k < sizeof want / sizeof want[0]; k++) {
        struct hoff__plan_opts o = {.budget_bytes = want[k].budget, .h2d_gbps = 50, .d2h_gbps = 50};
        struct hoff__trace t;
        struct hoff__schedule s, g;
        struct hoff__prediction pr;
        uint64_t *T;

        build_pair_trace(&t, 128 * MiB, 48 * MiB, 1);
        T = hoff__plan_times(&t);
        CU_ASSERT_PTR_NOT_NULL_FATAL(T);
        hoff__schedule_init(&s);
        hoff__schedule_init(&g);
        CU_ASSERT_EQUAL_FATAL(hoff__planner_timed.build(&t, &o, &s), 0);
        CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(&t, &o, &g), 0);
        CU_ASSERT_EQUAL(hoff__plan_predict(&t, &o, T, &g, HOFF__PLACE_KEEP, &pr), 0);
        CU_ASSERT_EQUAL(pr.overruns, g.overruns);
        CU_ASSERT_EQUAL(g.overruns, want[k].overruns);
        CU_ASSERT_EQUAL(s.overruns, want[k].overruns); /* timed: never more than greedy's */
        CU_ASSERT_EQUAL(s.feasible, want[k].overruns == 0);
        free(T);
        hoff__schedule_destroy(&g);
        hoff__schedule_destroy(&s);
        hoff__trace_destroy(&t);
    }
}

/* cnn (tests/data/traces) on an H200's clock: its step's compute scaled
 * to 0.44 ms, as bench/planners puts it. */
static void load_cnn(struct hoff__trace *t) {
    char err[256];
    uint64_t end;
    double f;
    size_t i;

    hoff__trace_init(t);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_load(t, HOFF_TRACE_DIR "/cnn.trace.gz", err, sizeof err), 0);
    CU_ASSERT_FATAL(t->nev > 0);
    end = t->ev[t->nev - 1].t_cpu_ns;
    CU_ASSERT_FATAL(end > 0);
    f = 0.44e6 / (double)end;
    for (i = 0; i < t->nev; i++)
        t->ev[i].t_gpu_ns = (uint64_t)((double)t->ev[i].t_cpu_ns * f);
}

/* A host cap that never binds changes nothing: the same schedule and the
 * same predicted stall as without one, no spills.  cnn at 50% is a case
 * where the selection search changes what the rules chose (timed moves
 * fewer bytes than greedy): under a cap the tiers pass then runs again on
 * the new selection, and on the final schedule, whose host peak is the
 * figure the plan reports. */
static void test_loose_host_cap_changes_nothing(void) {
    static const int pct[] = {50, 25, 10};
    size_t n, j;

    for (n = 0; n < 2; n++) {
        struct hoff__trace t;

        if (n == 0)
            synth4(&t, 1024);
        else
            load_cnn(&t);
        for (j = 0; j < 3; j++) {
            struct hoff__plan_opts o = {.h2d_gbps = 50, .d2h_gbps = 50};
            struct hoff__schedule s0, s1, g;
            size_t i;

            o.budget_bytes = hoff__trace_offload_peak(&t, NULL, NULL) * (uint64_t)pct[j] / 100;
            hoff__schedule_init(&s0);
            hoff__schedule_init(&s1);
            hoff__schedule_init(&g);
            CU_ASSERT_EQUAL_FATAL(hoff__planner_timed.build(&t, &o, &s0), 0);
            CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(&t, &o, &g), 0);
            if (n == 1 && j == 0)
                CU_ASSERT(s0.bytes_d2h < g.bytes_d2h);
            o.host_cap_bytes = 4 * hoff__trace_offload_peak(&t, NULL, NULL);
            o.nvme = 1;
            o.nvme_read_gbps = 6.5;
            o.nvme_write_gbps = 3.5;
            CU_ASSERT_EQUAL_FATAL(hoff__planner_timed.build(&t, &o, &s1), 0);
            CU_ASSERT_EQUAL(s1.stall_ns, s0.stall_ns);
            CU_ASSERT_EQUAL(s1.overruns, s0.overruns);
            CU_ASSERT_EQUAL_FATAL(s1.nact, s0.nact);
            for (i = 0; i < s1.nact; i++) {
                const struct hoff__action *a = &s0.act[i], *b = &s1.act[i];

                CU_ASSERT(a->ev == b->ev && a->when == b->when && a->kind == b->kind && a->block == b->block &&
                          a->group == b->group);
                CU_ASSERT(b->kind != HOFF__ACT_SPILL && b->kind != HOFF__ACT_RESTORE);
            }
            CU_ASSERT(s1.host_feasible);
            CU_ASSERT(s1.peak_host_bytes <= o.host_cap_bytes);
            CU_ASSERT_EQUAL(s1.peak_host_bytes, s0.peak_host_bytes); /* for the final schedule */
            CU_ASSERT_EQUAL(s1.bytes_spilled, 0);
            hoff__schedule_destroy(&g);
            hoff__schedule_destroy(&s0);
            hoff__schedule_destroy(&s1);
        }
        hoff__trace_destroy(&t);
    }
}

/* The plan is not tuned to the nanosecond of its own model: predicted on
 * a device whose copy engines are 20% slower or faster and whose compute
 * is 20% shorter or 25% longer than planned for, timed's schedule (local
 * searches included) still stalls no more than greedy's (as the runtime
 * groups it), on synthetic transformer steps at 50/25/10%. */
static void test_robust_to_misjudged_timing(void) {
    static const uint64_t hidden[] = {1024, 4096};
    static const int pct[] = {50, 25, 10};
    static const double bw[] = {0.8, 1.2}, cf[] = {0.8, 1.25};
    size_t i, j, a, b, n;

    for (i = 0; i < 2; i++) {
        struct hoff__trace t;
        uint64_t *T0, *T;

        synth4(&t, hidden[i]);
        T0 = hoff__plan_times(&t);
        T = malloc(t.nev * sizeof *T);
        CU_ASSERT_PTR_NOT_NULL_FATAL(T0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(T);
        for (j = 0; j < 3; j++) {
            struct hoff__plan_opts o = {.h2d_gbps = 50, .d2h_gbps = 50, .groups = 1};
            struct hoff__schedule s, g;

            o.budget_bytes = hoff__trace_offload_peak(&t, NULL, NULL) * (uint64_t)pct[j] / 100;
            hoff__schedule_init(&s);
            hoff__schedule_init(&g);
            CU_ASSERT_EQUAL_FATAL(hoff__planner_timed.build(&t, &o, &s), 0);
            CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(&t, &o, &g), 0);
            CU_ASSERT_EQUAL_FATAL(hoff__plan_groups(&t, &o, &g), 0);
            for (a = 0; a < 2; a++)
                for (b = 0; b < 2; b++) {
                    struct hoff__plan_opts q = o;
                    struct hoff__prediction ps, pg;

                    q.h2d_gbps = q.d2h_gbps = 50 * bw[a];
                    for (n = 0; n < t.nev; n++)
                        T[n] = (uint64_t)((double)T0[n] * cf[b]);
                    CU_ASSERT_EQUAL(hoff__plan_predict(&t, &q, T, &s, HOFF__PLACE_KEEP, &ps), 0);
                    CU_ASSERT_EQUAL(hoff__plan_predict(&t, &q, T, &g, HOFF__PLACE_KEEP, &pg), 0);
                    CU_ASSERT(ps.stall_ns <= pg.stall_ns);
                    CU_ASSERT(ps.overruns <= pg.overruns);
                }
            hoff__schedule_destroy(&g);
            hoff__schedule_destroy(&s);
        }
        free(T);
        free(T0);
        hoff__trace_destroy(&t);
    }
}

/* Anytime: with its time spent before it starts, timed answers greedy's
 * schedule (valid, predicted: the stall of greedy's selection with its
 * prefetches at the use) and leaves the groups to the runtime; with time
 * it does at least as well.  On the synthetic step where the searches gain
 * (test_refine_beats_rules), at 50% and 25%. */
static void test_anytime(void) {
    static const int pct[] = {50, 25};
    struct hoff__trace t;
    uint64_t *T;
    size_t j;

    synth4(&t, 4096);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    for (j = 0; j < 2; j++) {
        struct hoff__plan_opts o = {.h2d_gbps = 50, .d2h_gbps = 50, .groups = 1};
        struct hoff__schedule full, any, g;
        struct hoff__prediction pr;

        o.budget_bytes = hoff__trace_offload_peak(&t, NULL, NULL) * (uint64_t)pct[j] / 100;
        hoff__schedule_init(&full);
        hoff__schedule_init(&any);
        hoff__schedule_init(&g);
        CU_ASSERT_EQUAL_FATAL(hoff__plan_build(&hoff__planner_timed, &t, &o, &full), 0);
        o.deadline_ns = 1; /* long past */
        CU_ASSERT_EQUAL_FATAL(hoff__plan_build(&hoff__planner_timed, &t, &o, &any), 0);
        o.deadline_ns = 0;
        check(&t, &any);
        CU_ASSERT_EQUAL(any.grouped, 0);
        CU_ASSERT_EQUAL(any.ngroups, 0);
        CU_ASSERT_EQUAL_FATAL(hoff__plan_build(&hoff__planner_greedy, &t, &o, &g), 0);
        CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&t, &o, T, &g, HOFF__PLACE_KEEP, &pr), 0);
        CU_ASSERT_EQUAL(any.nact, g.nact);
        CU_ASSERT_EQUAL(any.stall_ns, g.stall_ns);
        CU_ASSERT(full.stall_ns <= any.stall_ns);
        CU_ASSERT(full.plan_ns > any.plan_ns);
        hoff__schedule_destroy(&full);
        hoff__schedule_destroy(&any);
        hoff__schedule_destroy(&g);
    }
    free(T);
    hoff__trace_destroy(&t);
}

static void test_registered(void) {
    CU_ASSERT_PTR_EQUAL(hoff__planner_find("timed"), &hoff__planner_timed);
    CU_ASSERT_PTR_EQUAL(hoff__planner_find("greedy"), &hoff__planner_greedy);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"registered", test_registered},
        {"prefetch_early_enough", test_prefetch_early_enough},
        {"budget_kept_when_moving_early", test_budget_kept_when_moving_early},
        {"budget_zero_and_infeasible", test_budget_zero_and_infeasible},
        {"synthetic", test_synthetic},
        {"random", test_random},
        {"predict_by_hand", test_predict_by_hand},
        {"predict_tiers_by_hand", test_predict_tiers_by_hand},
        {"early_headroom_by_hand", test_early_headroom_by_hand},
        {"never_worse_than_greedy", test_never_worse_than_greedy},
        {"refine_beats_rules", test_refine_beats_rules},
        {"overruns_predicted", test_overruns_predicted},
        {"loose_host_cap_changes_nothing", test_loose_host_cap_changes_nothing},
        {"robust_to_misjudged_timing", test_robust_to_misjudged_timing},
        {"anytime", test_anytime},
        {NULL, NULL},
    };
    return hoff_test_run("timed", tests);
}
