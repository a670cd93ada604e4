/* test_groups.c — the grouping pass on hand-built traces and schedules (where groups form, where they must not,
 * their layout, bytes unchanged) and groups end to end on sim (HOFF_GROUPS on vs off).  Single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "hoff.h"
#include "mem/pool.h"
#include "plan/plan.h"
#include "testutil.h"
#include "trace/drive.h"
#include "trace/synth.h"
#include "trace/trace.h"

#define MiB ((uint64_t)1 << 20)
#define S ((hoff_stream)0)

/* --- hand-built traces ----------------------------------------------------- */

static void ev(struct hoff__trace *t, int kind, uint32_t block, uint64_t size, int write, uint64_t stream) {
    struct hoff__tev e;

    memset(&e, 0, sizeof e);
    e.kind = (uint8_t)kind;
    e.block = block;
    e.name = UINT32_MAX;
    e.size = size;
    e.pool = 1;
    e.stream = stream;
    e.flags = write ? HOFF__TEV_WRITE : 0;
    e.t_cpu_ns = t->nev * 1000;
    e.t_gpu_ns = HOFF__TIME_UNKNOWN;
    CU_ASSERT_EQUAL_FATAL(hoff__trace_append(t, &e), 0);
}

/* n blocks of 4 MiB, a "layer" each: forward allocates (and writes) block i
 * and reads it once, each in an op of its own; `mid` op marks; backward reads block n-1 .. 0 and frees
 * it.  Block i's stream is streams[i] (NULL: 0). */
static void layer_trace(struct hoff__trace *t, uint32_t n, uint32_t mid, const uint64_t *streams) {
    uint32_t i;

    hoff__trace_init(t);
    for (i = 0; i < n; i++) {
        ev(t, HOFF__TEV_ALLOC, i, 4 * MiB, 1, streams ? streams[i] : 0);
        ev(t, HOFF__TEV_OP, 0, 0, 0, 0);
        ev(t, HOFF__TEV_ACCESS, i, 0, 0, 0);
        ev(t, HOFF__TEV_OP, 0, 0, 0, 0); /* the read's op is over: its use window closes */
    }
    for (i = 0; i < mid; i++)
        ev(t, HOFF__TEV_OP, 0, 0, 0, 0);
    for (i = n; i-- > 0;) {
        ev(t, HOFF__TEV_OP, 0, 0, 0, 0);
        ev(t, HOFF__TEV_ACCESS, i, 0, 0, 0);
        ev(t, HOFF__TEV_FREE, i, 0, 0, 0);
    }
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(t), 0);
}

/* Evict each block after its forward read, prefetch it before its backward read. */
static void jit_schedule(const struct hoff__trace *t, struct hoff__schedule *s, uint64_t budget) {
    uint32_t i;

    hoff__schedule_init(s);
    s->budget_bytes = budget;
    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tacc *a = t->acc + t->blocks[i].first_access;

        CU_ASSERT_EQUAL_FATAL(t->blocks[i].naccess, 3);
        CU_ASSERT_EQUAL(hoff__schedule_add(s, a[1].ev, HOFF__ACT_AFTER, HOFF__ACT_EVICT, i, a[1].ev), 0);
        CU_ASSERT_EQUAL(hoff__schedule_add(s, a[2].ev, HOFF__ACT_BEFORE, HOFF__ACT_PREFETCH, i, UINT32_MAX), 0);
        s->bytes_d2h += t->blocks[i].size;
        s->bytes_h2d += t->blocks[i].size;
    }
    hoff__schedule_sort(s);
}

static void opts(struct hoff__plan_opts *o, uint64_t budget) {
    memset(o, 0, sizeof o[0]);
    o->budget_bytes = budget;
    o->block_bytes = hoff__pool_block_bytes;
    o->d2h_gbps = o->h2d_gbps = 1e6; /* copies land at once: the peak alone decides */
}

/* Every member's actions at its group's points; per block one EVICT and one
 * PREFETCH as before; layouts grain-aligned, in order, non-overlapping. */
static void check_groups_n(const struct hoff__trace *t, const struct hoff__schedule *s, size_t nevict,
                           size_t nprefetch) {
    size_t g, k, nev_ = 0, npf = 0;

    for (k = 0; k < s->nact; k++) {
        const struct hoff__action *a = &s->act[k];

        nev_ += a->kind == HOFF__ACT_EVICT;
        npf += a->kind == HOFF__ACT_PREFETCH;
        if (!a->group)
            continue;
        CU_ASSERT_FATAL(a->group <= s->ngroups);
        CU_ASSERT_EQUAL(s->block_group[a->block], a->group);
        if (a->kind == HOFF__ACT_EVICT) {
            CU_ASSERT_EQUAL(a->ev, s->groups[a->group - 1].evict_ev);
            CU_ASSERT_EQUAL(a->when, s->groups[a->group - 1].evict_when);
        } else {
            CU_ASSERT_EQUAL(a->kind, HOFF__ACT_PREFETCH);
            CU_ASSERT_EQUAL(a->ev, s->groups[a->group - 1].prefetch_ev);
            CU_ASSERT_EQUAL(a->when, s->groups[a->group - 1].prefetch_when);
        }
    }
    CU_ASSERT_EQUAL(nev_, nevict);
    CU_ASSERT_EQUAL(npf, nprefetch);
    for (g = 0; g < s->ngroups; g++) {
        const struct hoff__group *G = &s->groups[g];
        uint64_t end = 0;

        CU_ASSERT(G->n >= 2);
        for (k = 0; k < G->n; k++) {
            const struct hoff__gmember *m = &s->gmember[G->first + k];

            CU_ASSERT_EQUAL(m->off % HOFF__MANAGED_GRAIN, 0);
            CU_ASSERT_EQUAL(m->bytes % HOFF__MANAGED_GRAIN, 0);
            CU_ASSERT(m->bytes >= hoff__pool_block_bytes(1, t->blocks[m->block].size));
            CU_ASSERT(m->off >= end); /* in order, not overlapping */
            end = m->off + m->bytes;
            CU_ASSERT_EQUAL(s->block_group[m->block], g + 1);
            CU_ASSERT_EQUAL(s->block_member[m->block], G->first + k);
        }
        CU_ASSERT(end <= G->bytes);
    }
}

/* The same, for jit_schedule's one EVICT and one PREFETCH per block. */
static void check_groups(const struct hoff__trace *t, const struct hoff__schedule *s) {
    check_groups_n(t, s, t->nblocks, t->nblocks);
}

static size_t count_kind(const struct hoff__schedule *s, int kind) {
    size_t k, n = 0;

    for (k = 0; k < s->nact; k++)
        n += s->act[k].kind == kind;
    return n;
}

static void test_group_forms(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    uint64_t peak, d2h, h2d;
    uint32_t at;

    layer_trace(&t, 6, 10, NULL);
    opts(&o, 24 * MiB); /* no pressure: one group of all six */
    jit_schedule(&t, &s, o.budget_bytes);
    d2h = s.bytes_d2h;
    h2d = s.bytes_h2d;
    CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.ngroups, 1);
    CU_ASSERT_EQUAL(s.groups[0].n, 6);
    CU_ASSERT_EQUAL(s.groups[0].bytes, 24 * MiB);
    /* in the order they come back: block 5 first */
    CU_ASSERT_EQUAL(s.gmember[0].block, 5);
    CU_ASSERT_EQUAL(s.gmember[5].block, 0);
    CU_ASSERT_EQUAL(s.bytes_d2h, d2h);
    CU_ASSERT_EQUAL(s.bytes_h2d, h2d);
    check_groups(&t, &s);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &at), 0);
    CU_ASSERT(peak <= o.budget_bytes);
    CU_ASSERT_EQUAL(s.peak_bytes, peak);
    /* again on the grouped schedule: the same groups */
    CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.ngroups, 1);
    check_groups(&t, &s);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_peak_never_rises(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    uint64_t before, after, budget;
    uint32_t at;

    layer_trace(&t, 6, 10, NULL);
    /* At the schedule's own peak (one block): delaying any eviction or moving
     * any prefetch up would hold two at once. */
    jit_schedule(&t, &s, 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &before, &at), 0);
    CU_ASSERT_EQUAL(before, 4 * MiB);
    opts(&o, before);
    CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.ngroups, 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &after, &at), 0);
    CU_ASSERT_EQUAL(after, before);
    hoff__schedule_destroy(&s);

    /* Room for three: groups, never over the budget. */
    for (budget = 8 * MiB; budget <= 16 * MiB; budget += 4 * MiB) {
        jit_schedule(&t, &s, 0);
        opts(&o, budget);
        CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
        CU_ASSERT(s.ngroups >= 1);
        check_groups(&t, &s);
        CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &after, &at), 0);
        CU_ASSERT(after <= budget);
        hoff__schedule_destroy(&s);
    }
    /* An infeasible schedule (budget below its peak): the peak does not rise. */
    jit_schedule(&t, &s, 0);
    opts(&o, 2 * MiB);
    CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &after, &at), 0);
    CU_ASSERT(after <= before);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

static void test_not_members(void) {
    static const uint64_t streams[6] = {0, 7, 0, 7, 0, 7};
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    size_t g, k;

    /* Alternating streams: a group never mixes them. */
    layer_trace(&t, 6, 10, streams);
    jit_schedule(&t, &s, 0);
    opts(&o, 24 * MiB);
    CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
    for (g = 0; g < s.ngroups; g++)
        for (k = 1; k < s.groups[g].n; k++)
            CU_ASSERT_EQUAL(streams[s.gmember[s.groups[g].first + k].block],
                            streams[s.gmember[s.groups[g].first].block]);
    check_groups(&t, &s);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);

    /* A block the tiers spill is left alone. */
    layer_trace(&t, 4, 10, NULL);
    jit_schedule(&t, &s, 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 13, HOFF__ACT_AFTER, HOFF__ACT_SPILL, 1, UINT32_MAX), 0);
    CU_ASSERT_EQUAL(hoff__schedule_add(&s, 16, HOFF__ACT_AFTER, HOFF__ACT_RESTORE, 1, UINT32_MAX), 0);
    hoff__schedule_sort(&s);
    opts(&o, 16 * MiB);
    CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.ngroups, 1);
    CU_ASSERT_EQUAL(s.block_group[1], 0);
    CU_ASSERT_EQUAL(s.groups[0].n, 3);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* The pass on a training-shaped trace of 10^5 events after greedy: fast, and
 * the plan's bytes and feasibility unchanged. */
static void test_large(void) {
    struct hoff__trace t;
    struct hoff__schedule s;
    struct hoff__plan_opts o;
    uint64_t d2h, h2d, peak;
    uint32_t at;
    size_t ne, np;
    int feasible;

    hoff__trace_init(&t);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_events(&t, 100000, 3), 0);
    opts(&o, hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL) / 3);
    o.d2h_gbps = o.h2d_gbps = 50;
    hoff__schedule_init(&s);
    CU_ASSERT_EQUAL_FATAL(hoff__planner_greedy.build(&t, &o, &s), 0);
    d2h = s.bytes_d2h;
    h2d = s.bytes_h2d;
    feasible = s.feasible;
    ne = count_kind(&s, HOFF__ACT_EVICT);
    np = count_kind(&s, HOFF__ACT_PREFETCH);
    CU_ASSERT_EQUAL(hoff__plan_groups(&t, &o, &s), 0);
    CU_ASSERT_EQUAL(s.bytes_d2h, d2h);
    CU_ASSERT_EQUAL(s.bytes_h2d, h2d);
    CU_ASSERT_EQUAL(s.feasible, feasible);
    CU_ASSERT_EQUAL(hoff__schedule_peak(&t, &s, &peak, &at), 0);
    CU_ASSERT(peak <= o.budget_bytes || !feasible);
    check_groups_n(&t, &s, ne, np);
    fprintf(stderr, "\n  10^5 events: %zu groups of %zu blocks, pass %.2f ms (greedy %.2f ms) ", s.ngroups, s.ngmember,
            (double)s.group_ns / 1e6, (double)s.plan_ns / 1e6);
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
}

/* --- end to end on sim ------------------------------------------------------ */

struct e2e {
    struct hoff_stats d; /* the last step's counters */
    uint64_t integrity_errors, plan_groups;
};

static void drive(const struct hoff__trace *t, const char *planner, uint64_t budget, int groups, struct e2e *out) {
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    struct hoff_stats a, b;
    struct hoff_config cfg;
    hoff_ctx *ctx;
    int k;

    memset(out, 0, sizeof *out);
    cfg = hoff_test_replay_config(16ull << 30, budget);
    cfg.sim_protect = HOFF_SIM_PROTECT; /* a non-resident byte touched crashes */
    cfg.groups = groups;
    CU_ASSERT_EQUAL_FATAL(hoff_config_set(&cfg, "planner", planner, NULL, 0), 0);
    ctx = hoff_test_open(&cfg);
    memset(&o, 0, sizeof o);
    o.verify = 1;
    o.compute_scale = 1.0;
    for (k = 0; k < 2; k++) {
        o.steps = k == 0 ? 3 : 1;
        hoff_stats_get(ctx, &a);
        CU_ASSERT_EQUAL_FATAL(hoff__trace_drive(ctx, t, &o, &r), 0);
        hoff_stats_get(ctx, &b);
        out->integrity_errors += r.integrity_errors;
        hoff__drive_result_free(&r);
    }
#define DIFF_(name, desc) out->d.name = b.name - a.name;
    HOFF_STATS_FIELDS(DIFF_)
#undef DIFF_
    out->plan_groups = b.plan_groups;
    CU_ASSERT_EQUAL(b.divergent_steps, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

static void test_sim_on_off(void) {
    static const char *const planners[] = {"greedy", "timed"};
    struct hoff__synth_opts so;
    struct hoff__trace t;
    uint64_t peak;
    int i;

    hoff__synth_defaults(&so);
    so.layers = 6;
    so.hidden = 1024;
    so.seq = 1024;
    hoff__trace_init(&t);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_transformer(&t, &so), 0);
    peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL);
    for (i = 0; i < 2; i++) {
        struct e2e on, off;

        drive(&t, planners[i], peak / 2, 1, &on);
        drive(&t, planners[i], peak / 2, 0, &off);
        fprintf(stderr, "\n  %s, budget 50%%: prefetch calls %llu -> %llu, evict calls %llu -> %llu, %llu groups ",
                planners[i], (unsigned long long)off.d.prefetch_calls, (unsigned long long)on.d.prefetch_calls,
                (unsigned long long)off.d.evict_calls, (unsigned long long)on.d.evict_calls,
                (unsigned long long)on.plan_groups);
        CU_ASSERT_EQUAL(on.integrity_errors, 0);
        CU_ASSERT_EQUAL(off.integrity_errors, 0);
        CU_ASSERT_EQUAL(on.d.bytes_evicted, off.d.bytes_evicted);
        CU_ASSERT_EQUAL(on.d.bytes_prefetched, off.d.bytes_prefetched);
        CU_ASSERT_EQUAL(on.d.evictions, off.d.evictions);
        CU_ASSERT_EQUAL(on.d.prefetches, off.d.prefetches);
        CU_ASSERT_EQUAL(on.d.faults, off.d.faults);
        CU_ASSERT_EQUAL(off.plan_groups, 0);
        CU_ASSERT_EQUAL(off.d.group_calls_saved, 0);
        CU_ASSERT_EQUAL(on.d.group_fallbacks, 0);
        CU_ASSERT_EQUAL(off.d.prefetch_calls, off.d.prefetches);
        CU_ASSERT_EQUAL(on.d.prefetch_calls + on.d.evict_calls + on.d.group_calls_saved,
                        off.d.prefetch_calls + off.d.evict_calls);
        if (i == 0) { /* greedy leaves room: it must group */
            CU_ASSERT(on.plan_groups > 0);
            CU_ASSERT(on.d.prefetch_calls < off.d.prefetch_calls);
            CU_ASSERT(on.d.group_calls_saved > 0);
        }
    }
    hoff__trace_destroy(&t);
}

/* A replayed step that leaves the plan after some members are in their
 * slots, then steps that follow it again: every byte intact, nothing leaks. */
static void test_diverge(void) {
    struct hoff_config cfg;
    struct hoff_stats st;
    hoff_ctx *ctx;
    void *p[8], *extra = NULL;
    int step, i;
    size_t j;

    cfg = hoff_test_replay_config(1ull << 30, 24 * MiB);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    cfg.replan_after = 0; /* keep the plan */
    CU_ASSERT_EQUAL_FATAL(hoff_config_set(&cfg, "planner", "greedy", NULL, 0), 0);
    ctx = hoff_test_open(&cfg);
    for (step = 0; step < 6; step++) {
        CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
        for (i = 0; i < 8; i++) {
            if (step == 3 && i == 4) /* leave the plan halfway through the forward */
                extra = hoff_malloc(ctx, 6 * MiB, S);
            p[i] = hoff_malloc(ctx, 4 * MiB, S);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
            hoff_access(ctx, p[i], 1, S);
            for (j = 0; j < 4 * MiB; j += 4096)
                ((unsigned char *)p[i])[j] = (unsigned char)(i * 31 + step);
            hoff_mark_op(ctx, "fwd");
            hoff_sim_compute(ctx, S, 100000);
            hoff_access(ctx, p[i], 0, S);
        }
        for (i = 0; i < 20; i++) {
            hoff_mark_op(ctx, "mid");
            hoff_sim_compute(ctx, S, 100000);
        }
        for (i = 8; i-- > 0;) {
            int ok = 1;

            hoff_mark_op(ctx, "bwd");
            hoff_sim_compute(ctx, S, 100000);
            hoff_access(ctx, p[i], 0, S);
            for (j = 0; j < 4 * MiB; j += 4096)
                ok &= ((unsigned char *)p[i])[j] == (unsigned char)(i * 31 + step);
            CU_ASSERT(ok);
            hoff_free(ctx, p[i], S);
        }
        if (extra)
            hoff_free(ctx, extra, S);
        extra = NULL;
        CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    }
    hoff_stats_get(ctx, &st);
    CU_ASSERT(st.plan_groups > 0);
    CU_ASSERT(st.group_calls_saved > 0);
    CU_ASSERT_EQUAL(st.divergent_steps, 1);
    CU_ASSERT_EQUAL(st.live_blocks, 0);
    CU_ASSERT_EQUAL(st.managed_in_use_bytes, 0);
    CU_ASSERT(st.peak_resident_bytes <= 24 * MiB);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* --- the sim: ranges and the issuing thread's cost ------------------------- */

static void test_sim_ranges(void) {
    struct hoff_config cfg;
    struct hoff__backend *be;
    struct hoff__sim_counters c;
    hoff__event *done;
    unsigned char *m;
    void *x;
    size_t i;

    hoff_config_init(&cfg);
    cfg.plan_thread = 0; /* plan at the recorded step's end: the next step replays */
    cfg.sim_device_bytes = 1ull << 30;
    cfg.sim_protect = HOFF_SIM_PROTECT;
    cfg.sim_latency_ns = 0;
    cfg.sim_call_ns = 1000;
    cfg.sim_d2h_gbps = cfg.sim_h2d_gbps = 1.0;
    CU_ASSERT_EQUAL_FATAL(hoff__backend_open_sim(&cfg, &be), 0);
    CU_ASSERT_EQUAL_FATAL(be->ops->managed_alloc(be, 8 * MiB, &x), 0);
    CU_ASSERT_EQUAL_FATAL(be->ops->event_create(be, &done), 0);
    m = x;
    memset(m, 0x5A, 8 * MiB);
    /* evict the middle two pages: the others stay usable */
    CU_ASSERT_EQUAL(be->ops->evict(be, m + 2 * MiB, 4 * MiB, NULL, done), 0);
    CU_ASSERT_EQUAL(be->ops->evict(be, m + 2 * MiB, 2 * MiB, NULL, NULL), -EALREADY);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, m, 4 * MiB, NULL, NULL), -EALREADY); /* page 0 resident */
    hoff__sim_counters(be, &c);
    CU_ASSERT_EQUAL(c.device_used, 4 * MiB);
    CU_ASSERT_EQUAL(c.transfer_calls, 1);
    CU_ASSERT_EQUAL(c.issuer_busy_until, 1000);
    m[0] = 1; /* resident: fine */
    m[7 * MiB] = 2;
    /* one call for the two pages, one per page: the thread's cost counts per call */
    CU_ASSERT_EQUAL(be->ops->prefetch(be, m + 2 * MiB, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, m + 4 * MiB, 2 * MiB, NULL, done), 0);
    hoff__sim_counters(be, &c);
    CU_ASSERT_EQUAL(c.transfer_calls, 3);
    CU_ASSERT_EQUAL(c.issuer_busy_until, 3000);
    CU_ASSERT_EQUAL(c.device_used, 8 * MiB);
    for (i = 2 * MiB; i < 6 * MiB; i += 4096)
        CU_ASSERT_EQUAL_FATAL(m[i], 0x5A);
    /* discard, fault and populate on a page */
    CU_ASSERT_EQUAL(be->ops->discard(be, m + 6 * MiB, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->populate(be, m + 6 * MiB, 2 * MiB, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->evict(be, m, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->fault(be, m, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(m[0], 1);
    CU_ASSERT_EQUAL(be->ops->managed_free(be, m + 2 * MiB, 6 * MiB), -EINVAL); /* whole mappings only */
    CU_ASSERT_EQUAL(be->ops->managed_free(be, m, 8 * MiB), 0);
    hoff__sim_counters(be, &c);
    CU_ASSERT_EQUAL(c.device_used, 0);
    be->ops->event_destroy(be, done);
    be->ops->close(be);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"group_forms", test_group_forms}, {"peak_never_rises", test_peak_never_rises},
        {"not_members", test_not_members}, {"large", test_large},
        {"sim_ranges", test_sim_ranges},   {"sim_on_off", test_sim_on_off},
        {"diverge", test_diverge},         {NULL, NULL},
    };

    return hoff_test_run("groups", tests);
}
