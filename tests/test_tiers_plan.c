/* test_tiers_plan.c — the tier pass of the planners: the host cap kept by spilling to NVMe, restores in time
 * before prefetches, and honest reports when it cannot be kept.  Single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"
#include "trace/trace.h"

#define MB 1000000ull

/* An op boundary at `now`: each allocation and each read below is an op of
 * its own, so its use window closes at the next one. */
static void op_mark(struct hoff__trace *t, uint64_t now) {
    struct hoff__tev e;

    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_OP;
    e.name = UINT32_MAX;
    e.t_cpu_ns = e.t_gpu_ns = now;
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
}

/* A forward/backward step: n blocks of `size` allocated `gap` ns apart, then
 * (`mid` ns later) read back and freed in reverse, `gap` ns apart, with
 * access marks and an op mark before each allocation and read. */
static void make_step_gap(struct hoff__trace *t, int n, uint64_t size, uint64_t gap, uint64_t mid) {
    struct hoff__tev e;
    uint64_t now = 0;
    int i;

    hoff__trace_init(t);
    for (i = 0; i < n; i++) {
        op_mark(t, now);
        memset(&e, 0, sizeof e);
        e.kind = HOFF__TEV_ALLOC;
        e.pool = 1;
        e.block = (uint32_t)i;
        e.size = size;
        e.name = UINT32_MAX;
        e.t_cpu_ns = e.t_gpu_ns = now;
        CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
        now += gap;
    }
    now += mid;
    for (i = n - 1; i >= 0; i--) {
        op_mark(t, now);
        memset(&e, 0, sizeof e);
        e.kind = HOFF__TEV_ACCESS;
        e.block = (uint32_t)i;
        e.name = UINT32_MAX;
        e.t_cpu_ns = e.t_gpu_ns = now;
        CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
        now += gap;
        e.kind = HOFF__TEV_FREE;
        e.t_cpu_ns = e.t_gpu_ns = now;
        CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
    }
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(t), 0);
}

static void make_step(struct hoff__trace *t, int n, uint64_t size) {
    make_step_gap(t, n, size, 1000000, 0);
}

static void opts(struct hoff__plan_opts *o, uint64_t budget, uint64_t cap, int nvme) {
    memset(o, 0, sizeof *o);
    o->budget_bytes = budget;
    o->host_cap_bytes = cap;
    o->nvme = nvme;
    o->h2d_gbps = o->d2h_gbps = 50;
    o->nvme_read_gbps = 6.5;
    o->nvme_write_gbps = 3.5;
}

static size_t count(const struct hoff__schedule *s, int kind) {
    size_t i, n = 0;
    for (i = 0; i < s->nact; i++)
        n += s->act[i].kind == kind;
    return n;
}

static const struct hoff__action *find(const struct hoff__schedule *s, int kind, uint32_t block) {
    size_t i;
    for (i = 0; i < s->nact; i++)
        if (s->act[i].kind == kind && s->act[i].block == block)
            return &s->act[i];
    return NULL;
}

static void test_no_cap_no_spill(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;

    make_step(&t, 16, 10 * MB);
    opts(&o, 40 * MB, 0, 1);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__planner_greedy.build(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_SPILL), 0);
    CU_ASSERT(s.host_feasible);
    CU_ASSERT(s.peak_host_bytes > 0);
    CU_ASSERT_EQUAL(s.peak_nvme_bytes, 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_cap_kept_by_spilling(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    uint64_t peak;
    uint32_t at, b;
    size_t i;

    make_step(&t, 16, 10 * MB);
    opts(&o, 40 * MB, 50 * MB, 1);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__planner_greedy.build(&t, &o, &s), 0);
    CU_ASSERT(s.feasible);
    CU_ASSERT(s.host_feasible);
    CU_ASSERT(s.peak_host_bytes <= 50 * MB);
    CU_ASSERT(count(&s, HOFF__ACT_SPILL) > 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_SPILL), count(&s, HOFF__ACT_RESTORE));
    CU_ASSERT(s.peak_nvme_bytes > 0);
    CU_ASSERT_EQUAL(s.bytes_spilled, s.bytes_restored);
    /* Each spill comes after its eviction has landed, each restore before
     * its prefetch with time for the read (10 MB at 6.5 GB/s = 1.54 ms). */
    for (b = 0; b < t.nblocks; b++) {
        const struct hoff__action *ev = find(&s, HOFF__ACT_EVICT, b), *sp = find(&s, HOFF__ACT_SPILL, b),
                                  *rs = find(&s, HOFF__ACT_RESTORE, b), *pf = find(&s, HOFF__ACT_PREFETCH, b);
        if (!sp)
            continue;
        CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
        CU_ASSERT(sp->ev > ev->ev);
        CU_ASSERT(rs->ev > sp->ev);
        CU_ASSERT(rs->ev <= pf->ev);
        CU_ASSERT(t.ev[pf->ev].t_gpu_ns - t.ev[rs->ev].t_gpu_ns >= 1538461);
    }
    /* The device side is unchanged, and the schedule stays consistent. */
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &at), 0);
    CU_ASSERT(peak <= 40 * MB);
    for (i = 1; i < s.nact; i++)
        CU_ASSERT(s.act[i - 1].ev <= s.act[i].ev);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* Evictions queue on one D2H engine: 100 MB blocks allocated 0.5 ms apart
 * take 2 ms each to copy at 50 GB/s, so the k-th lands about 2k ms after
 * the first starts; a spill is planned only once its block has landed
 * (a second between forward and backward leaves the disk the time). */
static void test_spill_after_queued_eviction(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    uint64_t busy = 0;
    size_t i;
    int spills = 0;

    make_step_gap(&t, 12, 100 * MB, 500000, 1000000000);
    opts(&o, 200 * MB, 300 * MB, 1);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__planner_greedy.build(&t, &o, &s), 0);
    CU_ASSERT(s.bytes_spilled > 0); /* the forward is too quick for the cap: the tier does what it can */
    for (i = 0; i < s.nact; i++) {
        const struct hoff__action *a = &s.act[i];

        if (a->kind == HOFF__ACT_EVICT) { /* fired at the next event; 10 us + 2 ms on the queue */
            uint64_t at = t.ev[a->ev + 1].t_gpu_ns;

            busy = (at > busy ? at : busy) + 10000 + 2000000;
        }
        if (a->kind == HOFF__ACT_SPILL) {
            const struct hoff__action *ev = find(&s, HOFF__ACT_EVICT, a->block);
            uint64_t land = 0, b2 = 0;
            size_t j;

            /* its eviction's landing on the queue */
            for (j = 0; j < s.nact; j++) {
                const struct hoff__action *x = &s.act[j];

                if (x->kind != HOFF__ACT_EVICT)
                    continue;
                b2 = (t.ev[x->ev + 1].t_gpu_ns > b2 ? t.ev[x->ev + 1].t_gpu_ns : b2) + 10000 + 2000000;
                if (x == ev) {
                    land = b2;
                    break;
                }
            }
            CU_ASSERT(land > 0);
            CU_ASSERT(t.ev[a->ev].t_gpu_ns >= land);
            spills++;
        }
    }
    CU_ASSERT(spills > 0);
    CU_ASSERT(busy > 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* The longest interval is taken first, and can turn out redundant once the
 * shorter ones it did not suffice without are in: on the host A (5 MB) is
 * away over events 6-199, B (30 MB) over 6-119, C (30 MB) over 81-200;
 * with a cap of 35 MB only 81-119 is over it.  Longest first takes A, C,
 * then B, after which A alone keeps nothing over the cap: it is dropped,
 * and the disk moves 60 MB, not 65. */
static void test_redundant_spill_dropped(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    struct hoff__tev e;
    uint32_t i;

    hoff__trace_init(&t);
    for (i = 0; i < 205; i++) {
        memset(&e, 0, sizeof e);
        e.name = UINT32_MAX;
        e.t_cpu_ns = e.t_gpu_ns = (uint64_t)i * 1000000;
        e.kind = HOFF__TEV_OP;
        if (i < 3) {
            e.kind = HOFF__TEV_ALLOC;
            e.pool = 1;
            e.block = i;
            e.size = i == 0 ? 5 * MB : 30 * MB;
        } else if (i < 6 || i == 120 || i == 200 || i == 201) {
            e.kind = HOFF__TEV_ACCESS;
            e.block = i < 6 ? i - 3 : i == 120 ? 1 : i == 200 ? 0 : 2;
        } else if (i >= 202) {
            e.kind = HOFF__TEV_FREE;
            e.block = i - 202;
        }
        CU_ASSERT_EQUAL_FATAL(hoff__trace_append(&t, &e), 0);
    }
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(&t), 0);
    opts(&o, 0, 35 * MB, 1);
    o.d2h_gbps = o.nvme_read_gbps = o.nvme_write_gbps = 1e6; /* transfers all but instant */
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0, 3), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 5, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 1, 4), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 120, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 1, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 80, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 2, 5), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 200, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 201, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 2, UINT32_MAX), 0);
    hoff__schedule_sort(&s);
    CU_ASSERT_EQUAL(hoff__plan_tiers(&t, &o, &s), 0);
    CU_ASSERT(s.host_feasible);
    CU_ASSERT(s.peak_host_bytes <= 35 * MB);
    CU_ASSERT_PTR_NULL(find(&s, HOFF__ACT_SPILL, 0));
    CU_ASSERT_PTR_NOT_NULL(find(&s, HOFF__ACT_SPILL, 1));
    CU_ASSERT_PTR_NOT_NULL(find(&s, HOFF__ACT_SPILL, 2));
    CU_ASSERT_EQUAL(s.bytes_spilled, 60 * MB);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_no_nvme_reports_host_peak(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;

    make_step(&t, 16, 10 * MB);
    opts(&o, 40 * MB, 50 * MB, 0);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__planner_greedy.build(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(count(&s, HOFF__ACT_SPILL), 0);
    CU_ASSERT_FALSE(s.host_feasible);
    CU_ASSERT(s.peak_host_bytes > 50 * MB);
    CU_ASSERT(s.peak_host_ev < t.nev);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* A block larger than the host cap can never be evicted (an eviction lands
 * on the host tier first): it is no candidate, and the floor counts it, so
 * the plan says the budget cannot be met instead of planning evictions the
 * runtime refuses. */
static void test_block_over_cap_stays(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    uint64_t floor;
    uint32_t at;

    make_step(&t, 16, 10 * MB);
    opts(&o, 40 * MB, 5 * MB, 1);
    CU_ASSERT_EQUAL(hoff__plan_floor(&t, &o, &floor, &at), 0);
    CU_ASSERT_EQUAL(floor, 160 * MB); /* nothing can move: the floor is the peak */
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__plan_build(&hoff__planner_greedy, &t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.nact, 0);
    CU_ASSERT_FALSE(s.feasible);
    CU_ASSERT_EQUAL(s.floor_bytes, 160 * MB);
    hoff__schedule_destroy(&s);
    /* A cap that fits one block: they are candidates again. */
    opts(&o, 40 * MB, 10 * MB, 1);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__plan_build(&hoff__planner_greedy, &t, &o, &s), 0);
    CU_ASSERT(s.nact > 0);
    CU_ASSERT(s.feasible);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_schedule_peak_checks_tiers(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    uint64_t peak;
    uint32_t at;

    make_step(&t, 2, 10 * MB); /* op, alloc 0, op, alloc 1, op, read 1, free 1, op, read 0 (8), free 0 */
    hoff__schedule_init(&s);
    /* A restore of a block never spilled is refused, as is a prefetch of a
     * spilled block that was not restored. */
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0, 1), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 2, HOFF__ACT_BEFORE, HOFF__ACT_RESTORE, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &at), -EINVAL);
    hoff__schedule_destroy(&s);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0, 1), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 2, HOFF__ACT_AFTER, HOFF__ACT_SPILL, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &at), -EINVAL);
    hoff__schedule_destroy(&s);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0, 1), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 2, HOFF__ACT_AFTER, HOFF__ACT_SPILL, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_RESTORE, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0, UINT32_MAX), 0);
    hoff__schedule_sort(&s);
    CU_ASSERT_EQUAL(s.act[2].kind, HOFF__ACT_RESTORE); /* restore before prefetch in one event */
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &at), 0);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* The one walk of resident bytes, per tier: a block evicted after event 1,
 * spilled after event 2, restored and prefetched before event 8. */
static void test_schedule_tiers_walk(void) {
    static const uint64_t want_dev[10] = {0, 10, 0, 10, 10, 10, 10, 0, 10, 10};
    static const uint64_t want_host[10] = {0, 0, 10, 0, 0, 0, 0, 0, 0, 0};
    static const uint64_t want_nvme[10] = {0, 0, 0, 10, 10, 10, 10, 10, 0, 0};
    struct hoff__trace t;
    struct hoff__schedule s;
    uint64_t dev[10], host[10], nvme[10], res[10], peak;
    uint32_t at;
    int i;

    make_step(&t, 2, 10 * MB);
    CU_ASSERT_EQUAL_FATAL(t.nev, 10);
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 1, HOFF__ACT_AFTER, HOFF__ACT_EVICT, 0, 1), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 2, HOFF__ACT_AFTER, HOFF__ACT_SPILL, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_RESTORE, 0, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 8, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, 0, UINT32_MAX), 0);
    hoff__schedule_sort(&s);
    CU_ASSERT_EQUAL_FATAL(hoff__schedule_tiers(&t, &s, dev, host, nvme, &peak, &at), 0);
    CU_ASSERT_EQUAL_FATAL(hoff__schedule_resident(&t, &s, res, &peak, &at), 0);
    for (i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL(dev[i], want_dev[i] * MB);
        CU_ASSERT_EQUAL(host[i], want_host[i] * MB);
        CU_ASSERT_EQUAL(nvme[i], want_nvme[i] * MB);
        CU_ASSERT_EQUAL(res[i], dev[i]); /* the same walk */
    }
    CU_ASSERT_EQUAL(peak, 10 * MB);
    CU_ASSERT_EQUAL(at, 1);
    CU_ASSERT_STRING_EQUAL(hoff__act_kind_name(HOFF__ACT_SPILL), "spill");
    CU_ASSERT_STRING_EQUAL(hoff__act_kind_name(HOFF__ACT_KIND_COUNT), "?");
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"schedule_tiers_walk", test_schedule_tiers_walk},
        {"no_cap_no_spill", test_no_cap_no_spill},
        {"cap_kept_by_spilling", test_cap_kept_by_spilling},
        {"spill_after_queued_eviction", test_spill_after_queued_eviction},
        {"redundant_spill_dropped", test_redundant_spill_dropped},
        {"no_nvme_reports_host_peak", test_no_nvme_reports_host_peak},
        {"schedule_peak_checks_tiers", test_schedule_peak_checks_tiers},
        {"block_over_cap_stays", test_block_over_cap_stays},
        {NULL, NULL},
    };
    return hoff_test_run("tiers_plan", tests);
}
