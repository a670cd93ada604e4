/* test_swap.c — manual swap groups (hoff_group(3)) on the sim backend: one copy per block however often it is
 * added, round trips that keep every byte, all-or-nothing refusals (budget, host cap), abort mid-transfer,
 * misuse errors, members outside the plan and the online policy, co-located moves.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define S ((hoff_stream)0)

static hoff_ctx *ctx;

static void open_sim(uint64_t budget, uint64_t host_cap) {
    struct hoff_config cfg;

    cfg = hoff_test_replay_config(1ull << 30, budget);
    cfg.sim_latency_ns = 0;
    cfg.sim_call_ns = 0;
    cfg.host_cap_bytes = host_cap;
    cfg.log_level = HOFF_LOG_OFF;
    ctx = hoff_test_open(&cfg);
}

static struct hoff_group_info info(hoff_group *g) {
    struct hoff_group_info in;

    CU_ASSERT_EQUAL(hoff_group_info(g, &in), 0);
    return in;
}

/* A managed block filled with a pattern of seed, added to g first unless g
 * is NULL; its writer's op ends. */
static void *managed_in(hoff_group *g, size_t size, unsigned seed) {
    unsigned char *p = hoff_malloc_flags(ctx, size, S, HOFF_ALLOC_MANAGED);

    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (g) /* before the op ends: nothing planned after it has fired yet */
        CU_ASSERT_EQUAL(hoff_group_add(g, p), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 1, S), 0);
    hoff_test_fill_bytes(p, size, 7, seed);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, NULL), 0);
    return p;
}

static void *managed(size_t size, unsigned seed) {
    return managed_in(NULL, size, seed);
}

/* Read the block back (an access mark first: a block away is paged in) and
 * compare it with its pattern. */
static int intact(void *p, size_t size, unsigned seed) {
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 0, S), 0);
    return hoff_test_bytes_ok(p, size, 7, seed);
}

/* The same block added many times, by its base and by addresses inside it:
 * one member, one D2H copy, one H2D copy, every byte back. */
static void test_one_copy_per_block(void) {
    hoff_group *g;
    struct hoff_stats a, b;
    struct hoff_group_info in;
    char *p, *q;

    open_sim(0, 0);
    p = managed(4 * MiB, 1);
    q = managed(2 * MiB, 2);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "layer0", 0, &g), 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, p), 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, p), 1);               /* an exact duplicate */
    CU_ASSERT_EQUAL(hoff_group_add(g, p + 4096), 1);        /* a view at an offset */
    CU_ASSERT_EQUAL(hoff_group_add(g, p + 4 * MiB - 1), 1); /* its last byte */
    CU_ASSERT_EQUAL(hoff_group_add(g, q), 0);
    in = info(g);
    CU_ASSERT_EQUAL(in.blocks, 2);
    CU_ASSERT_EQUAL(in.duplicates, 3);
    CU_ASSERT_EQUAL(in.bytes, 6 * MiB);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_blocks, 2);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_groups, 1);
    a = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_residency(ctx, q), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_group_prefetch(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_STREAM), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    b = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(b.evictions - a.evictions, 2);
    CU_ASSERT_EQUAL(b.bytes_evicted - a.bytes_evicted, 6 * MiB);
    CU_ASSERT_EQUAL(b.prefetches - a.prefetches, 2);
    CU_ASSERT_EQUAL(b.bytes_prefetched - a.bytes_prefetched, 6 * MiB);
    CU_ASSERT_EQUAL(b.faults - a.faults, 0);
    in = info(g);
    CU_ASSERT_EQUAL(in.evicted_blocks, 2);
    CU_ASSERT_EQUAL(in.evicted_bytes, 6 * MiB);
    CU_ASSERT_EQUAL(in.prefetched_blocks, 2);
    CU_ASSERT_EQUAL(in.on_device, 2);
    CU_ASSERT(intact(p, 4 * MiB, 1));
    CU_ASSERT(intact(q, 2 * MiB, 2));
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).faults - a.faults, 0); /* it was back before the reads */
    /* release on the device drops nothing */
    CU_ASSERT_EQUAL(hoff_group_release(g), 0);
    CU_ASSERT_EQUAL(info(g).blocks, 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_blocks, 0);
    CU_ASSERT(intact(p, 4 * MiB, 1));
    CU_ASSERT_EQUAL(hoff_group_destroy(g), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_groups, 0);
    hoff_free(ctx, p, S);
    hoff_free(ctx, q, S);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* A prefetch the budget cannot hold is refused whole: nothing moves, nothing
 * over-commits; with room made by evicting non-members it goes ahead. */
static void test_budget_refusal(void) {
    hoff_group *g;
    void *m[3], *other;
    struct hoff_stats a, b;
    int i;

    open_sim(12 * MiB, 0);
    for (i = 0; i < 3; i++)
        m[i] = managed(4 * MiB, (unsigned)(10 + i));
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "g", 0, &g), 0);
    for (i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(hoff_group_add(g, m[i]), 0);
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
    /* a non-member takes 8 MiB, in use (its window open): it cannot be evicted */
    CU_ASSERT_EQUAL(hoff_region_begin(ctx), 0);
    other = hoff_malloc_flags(ctx, 8 * MiB, S, HOFF_ALLOC_MANAGED); /* pinned: never evicted */
    CU_ASSERT_EQUAL(hoff_region_end(ctx), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(other);
    a = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(hoff_group_prefetch(g, S), -HOFF_EBUDGET);
    CU_ASSERT(strstr(hoff_last_error(), "'g'") != NULL);
    CU_ASSERT(strstr(hoff_last_error(), "budget") != NULL);
    CU_ASSERT(strstr(hoff_last_error(), "nothing moved") != NULL);
    b = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(b.manual_refusals - a.manual_refusals, 1);
    CU_ASSERT_EQUAL(b.prefetches + b.prefetch_calls, a.prefetches + a.prefetch_calls);
    CU_ASSERT_EQUAL(b.resident_bytes, 8 * MiB);
    CU_ASSERT_EQUAL(b.budget_overruns, 0);
    for (i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(hoff_residency(ctx, m[i]), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(info(g).launched, 0);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), -EINVAL); /* nothing was launched */
    hoff_free(ctx, other, S);
    /* room now: an unpinned non-member on the device is evicted for it */
    other = managed(4 * MiB, 99);
    CU_ASSERT_EQUAL(hoff_group_prefetch(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, other), HOFF_RES_HOST);
    CU_ASSERT(hoff_test_stats(ctx).peak_resident_bytes <= 12 * MiB);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_overruns, 0);
    for (i = 0; i < 3; i++)
        CU_ASSERT(intact(m[i], 4 * MiB, (unsigned)(10 + i)));
    CU_ASSERT(intact(other, 4 * MiB, 99));
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0); /* frees the group and the blocks */
}

/* An eviction the host tier cannot take whole is refused whole. */
static void test_host_cap_refusal(void) {
    hoff_group *g;
    void *m[3];
    int i;

    open_sim(0, 8 * MiB);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "big", 0, &g), 0);
    for (i = 0; i < 3; i++) {
        m[i] = managed(4 * MiB, (unsigned)(20 + i));
        CU_ASSERT_EQUAL(hoff_group_add(g, m[i]), 0);
    }
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), -HOFF_EHOSTCAP);
    CU_ASSERT(strstr(hoff_last_error(), "nothing moved") != NULL);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_refusals, 1);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).evictions, 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    for (i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(hoff_residency(ctx, m[i]), HOFF_RES_DEVICE);
        CU_ASSERT(intact(m[i], 4 * MiB, (unsigned)(20 + i)));
    }
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Abort while the eviction is in flight (slow copy engine): every byte is in
 * one valid place afterwards, nothing is in flight, the group is empty. */
static void test_abort_mid_transfer(void) {
    struct hoff_config cfg;
    hoff_group *g;
    void *m[4];
    struct hoff_group_info in;
    int i, away = 0;

    cfg = hoff_test_replay_config(1ull << 30, 0);
    cfg.sim_d2h_gbps = 0.001; /* 4 MiB take 4 ms of virtual time */
    cfg.log_level = HOFF_LOG_OFF;
    ctx = hoff_test_open(&cfg);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "abort", 0, &g), 0);
    for (i = 0; i < 4; i++) {
        m[i] = managed(4 * MiB, (unsigned)(30 + i));
        CU_ASSERT_EQUAL(hoff_group_add(g, m[i]), 0);
    }
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
    in = info(g);
    CU_ASSERT(in.in_flight > 0); /* mid-transfer */
    CU_ASSERT_EQUAL(hoff_group_abort(g), 0);
    in = info(g);
    CU_ASSERT_EQUAL(in.blocks, 0);
    CU_ASSERT_EQUAL(in.launched, 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_aborts, 1);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_blocks, 0);
    for (i = 0; i < 4; i++) {
        int r = hoff_residency(ctx, m[i]);

        CU_ASSERT(r == HOFF_RES_DEVICE || r == HOFF_RES_HOST);
        away += r == HOFF_RES_HOST;
    }
    CU_ASSERT_EQUAL(away, 4); /* the copies landed */
    for (i = 0; i < 4; i++)
        CU_ASSERT(intact(m[i], 4 * MiB, (unsigned)(30 + i)));
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).transfer_errors, 0);
    /* the group is usable again, in the same step */
    CU_ASSERT_EQUAL(hoff_group_add(g, m[0]), 0);
    CU_ASSERT_EQUAL(hoff_group_destroy(g), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_blocks, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Misuse: a clear error naming what was wrong, and nothing lost. */
static void test_misuse(void) {
    hoff_group *g, *h, *x;
    void *p, *q, *dev;
    char longname[80];

    open_sim(0, 0);
    p = managed(2 * MiB, 40);
    q = managed(2 * MiB, 41);
    dev = hoff_malloc_flags(ctx, 4096, S, HOFF_ALLOC_DEVICE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
    /* names */
    CU_ASSERT_EQUAL(hoff_group_create(ctx, "", 0, &x), -EINVAL);
    CU_ASSERT_PTR_NULL(x);
    CU_ASSERT_EQUAL(hoff_group_create(ctx, NULL, 0, &x), -EINVAL);
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CU_ASSERT_EQUAL(hoff_group_create(ctx, longname, 0, &x), -EINVAL);
    CU_ASSERT(strstr(hoff_last_error(), "1 to 63") != NULL);
    CU_ASSERT_EQUAL(hoff_group_create(ctx, "a\nb", 0, &x), -EINVAL);
    CU_ASSERT_EQUAL(hoff_group_create(ctx, "flags", 2, &x), -EINVAL);
    CU_ASSERT(strstr(hoff_last_error(), "HOFF_GROUP_ONE_BY_ONE") != NULL);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "g", 0, &g), 0);
    CU_ASSERT_EQUAL(hoff_group_create(ctx, "g", 0, &x), -EEXIST);
    CU_ASSERT(strstr(hoff_last_error(), "'g'") != NULL);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "h", 0, &h), 0);
    /* an unknown group */
    CU_ASSERT_PTR_NULL(hoff_group_find(ctx, "nope"));
    CU_ASSERT(strstr(hoff_last_error(), "'nope'") != NULL);
    CU_ASSERT_PTR_EQUAL(hoff_group_find(ctx, "h"), h);
    /* a wait without a launch */
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), -EINVAL);
    CU_ASSERT(strstr(hoff_last_error(), "no eviction or prefetch launched") != NULL);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, 7), -EINVAL);
    /* pointers that are no offload block */
    CU_ASSERT_EQUAL(hoff_group_add(g, NULL), -EINVAL);
    CU_ASSERT_EQUAL(hoff_group_add(g, longname), -EINVAL);
    CU_ASSERT(strstr(hoff_last_error(), "not inside a live hoff block") != NULL);
    CU_ASSERT_EQUAL(hoff_group_add(g, dev), -EPERM);
    CU_ASSERT(strstr(hoff_last_error(), "device pool") != NULL);
    /* one group per block */
    CU_ASSERT_EQUAL(hoff_group_add(g, p), 0);
    CU_ASSERT_EQUAL(hoff_group_add(h, p), -EBUSY);
    CU_ASSERT(strstr(hoff_last_error(), "already in group 'g'") != NULL);
    /* remove */
    CU_ASSERT_EQUAL(hoff_group_remove(h, p), -ENOENT);
    CU_ASSERT_EQUAL(hoff_group_remove(g, p), 0);
    CU_ASSERT_EQUAL(info(g).blocks, 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, p), 0);
    /* a launch not waited for */
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), -EBUSY);
    CU_ASSERT_EQUAL(hoff_group_prefetch(g, S), -EBUSY);
    CU_ASSERT_EQUAL(hoff_group_add(g, q), -EBUSY);
    CU_ASSERT_EQUAL(hoff_group_remove(g, p), -EBUSY);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
    CU_ASSERT_EQUAL(hoff_group_prefetch(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
    CU_ASSERT_EQUAL(hoff_group_release(g), 0);
    /* a group used across two steps (each step allocates something: a step without a block is another
     * matter) */
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_group_add(h, q), 0);
    hoff_free(ctx, managed(2 * MiB, 42), S);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_group_add(h, p), -ESTALE);
    CU_ASSERT(strstr(hoff_last_error(), "filled within one step") != NULL);
    hoff_free(ctx, managed(2 * MiB, 42), S);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    CU_ASSERT_EQUAL(hoff_group_release(h), 0);
    CU_ASSERT_EQUAL(hoff_group_add(h, p), 0); /* released: usable again */
    /* NULL handles */
    CU_ASSERT_EQUAL(hoff_group_evict(NULL, S), -EINVAL);
    CU_ASSERT_EQUAL(hoff_group_info(NULL, NULL), -EINVAL);
    CU_ASSERT_EQUAL(hoff_group_destroy(NULL), 0);
    /* nothing lost */
    CU_ASSERT(intact(p, 2 * MiB, 40));
    CU_ASSERT(intact(q, 2 * MiB, 41));
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).transfer_errors, 0);
    /* a freed member leaves its group */
    CU_ASSERT_EQUAL(info(h).blocks, 1);
    hoff_free(ctx, p, S);
    CU_ASSERT_EQUAL(info(h).blocks, 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_blocks, 0);
    hoff_free(ctx, q, S);
    hoff_free(ctx, dev, S);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Members are outside the plan and the online policy: the warmup's budget
 * evictions pass them over (the budget still counts them), the plan built
 * from the step has no action on them, and the replay leaves them alone. */
static void test_outside_the_plan(void) {
    hoff_group *g;
    void *p[6];
    struct hoff_stats st;
    int step, i;
    unsigned moved_members = 0, moved_others = 0;

    open_sim(12 * MiB, 0);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "manual", 0, &g), 0);
    for (step = 0; step < 3; step++) {
        CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
        for (i = 0; i < 6; i++) {
            p[i] = managed(4 * MiB, (unsigned)(50 + i + step));
            if (i < 2) /* blocks 0 and 1 are the manual group's */
                CU_ASSERT_EQUAL(hoff_group_add(g, p[i]), 0);
        }
        for (i = 0; i < 6; i++) {
            int r = hoff_residency(ctx, p[i]);

            if (i < 2)
                moved_members += r != HOFF_RES_DEVICE;
            else
                moved_others += r != HOFF_RES_DEVICE;
        }
        for (i = 6; i-- > 0;) {
            CU_ASSERT(intact(p[i], 4 * MiB, (unsigned)(50 + i + step)));
            CU_ASSERT_EQUAL(hoff_mark_op(ctx, NULL), 0);
            hoff_free(ctx, p[i], S);
        }
        CU_ASSERT_EQUAL(info(g).blocks, 0); /* freed members left */
        CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
        st = hoff_test_stats(ctx);
        if (step == 0) { /* the plan: the members' 8 MiB are not its candidates */
            CU_ASSERT_EQUAL(st.plans, 1);
            CU_ASSERT(st.plan_actions > 0);
        }
    }
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(moved_members, 0);
    CU_ASSERT(moved_others > 0);
    /* the budget counts the members: with their 8 MiB the others had 4 MiB, never more */
    CU_ASSERT(st.peak_resident_bytes <= 12 * MiB);
    CU_ASSERT_EQUAL(st.budget_overruns, 0);
    CU_ASSERT(st.budget_evictions > 0);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.replans, 0);
    CU_ASSERT_EQUAL(st.actions_skipped, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Members that lie in one region (a planner group's slots) move with one
 * call: the group's calls are fewer than its blocks (one per block with
 * HOFF_GROUP_ONE_BY_ONE), and bytes survive. */
static void run_colocated(unsigned flags) {
    struct hoff_config cfg;
    struct hoff_group_info in;
    struct hoff_stats a, b;
    hoff_group *g;
    void *p[8];
    int step, i;

    cfg = hoff_test_replay_config(1ull << 30, 24 * MiB);
    cfg.replan_after = 0;
    cfg.log_level = HOFF_LOG_OFF;
    CU_ASSERT_EQUAL_FATAL(hoff_config_set(&cfg, "planner", "greedy", NULL, 0), 0);
    ctx = hoff_test_open(&cfg);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "colocated", flags, &g), 0);
    for (step = 0; step < 2; step++) {
        CU_ASSERT_EQUAL_FATAL(hoff_step_begin(ctx), 0);
        for (i = 0; i < 8; i++) {
            /* step 1: the replay lays them out in the plan's regions */
            p[i] = managed_in(step == 1 ? g : NULL, 4 * MiB, (unsigned)(60 + i));
            hoff_sim_compute(ctx, S, 100000);
        }
        for (i = 0; i < 20; i++) {
            hoff_mark_op(ctx, "mid");
            hoff_sim_compute(ctx, S, 100000);
        }
        if (step == 1) {
            a = hoff_test_stats(ctx);
            /* the plan's own evictions of them were skipped: all on the device */
            CU_ASSERT_EQUAL(info(g).on_device, 8);
            CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
            CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
            in = info(g);
            CU_ASSERT_EQUAL(in.on_host, 8);
            CU_ASSERT_EQUAL(in.evicted_blocks, 8);
            fprintf(stderr, " [%s: %llu calls for 8 blocks]", flags ? "one by one" : "co-located",
                    (unsigned long long)in.calls);
            if (flags)
                CU_ASSERT_EQUAL(in.calls, 8)
            else
                CU_ASSERT(in.calls < 8);
            CU_ASSERT_EQUAL(hoff_group_prefetch(g, S), -HOFF_EBUDGET); /* 32 MiB > 24 MiB: refused whole */
            CU_ASSERT_EQUAL(info(g).on_host, 8);
            CU_ASSERT_EQUAL(hoff_group_abort(g), 0); /* they leave the group, on the host */
            b = hoff_test_stats(ctx);
            CU_ASSERT_EQUAL(b.group_calls_saved > a.group_calls_saved, !flags);
            CU_ASSERT_EQUAL(b.evict_calls - a.evict_calls, in.calls);
            CU_ASSERT_EQUAL(b.evictions - a.evictions, 8);
        }
        for (i = 8; i-- > 0;) {
            hoff_mark_op(ctx, "bwd");
            CU_ASSERT(intact(p[i], 4 * MiB, (unsigned)(60 + i)));
            hoff_free(ctx, p[i], S);
        }
        CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    }
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* Clear: members leave where they are with their bytes; nothing waits. */
static void test_clear(void) {
    hoff_group *g;
    void *p, *q;

    open_sim(0, 0);
    p = managed(4 * MiB, 80);
    q = managed(4 * MiB, 81);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "clear", 0, &g), 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, p), 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, q), 0);
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_HOST), 0);
    CU_ASSERT_EQUAL(hoff_group_prefetch(g, S), 0); /* q comes back, p stays away */
    CU_ASSERT_EQUAL(hoff_group_remove(g, p), -EBUSY);
    CU_ASSERT_EQUAL(hoff_group_clear(g), 0);
    CU_ASSERT_EQUAL(info(g).blocks, 0);
    CU_ASSERT_EQUAL(info(g).launched, 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).manual_blocks, 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).discards, 0);
    CU_ASSERT(intact(p, 4 * MiB, 80));
    CU_ASSERT(intact(q, 4 * MiB, 81));
    CU_ASSERT_EQUAL(hoff_group_clear(NULL), -EINVAL);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

static void test_colocated(void) {
    run_colocated(HOFF_GROUP_COLOCATE);
    run_colocated(HOFF_GROUP_ONE_BY_ONE);
}

/* Release: members away lose their host copies (as asked), members on the
 * device keep their bytes, the group is empty. */
static void test_release(void) {
    hoff_group *g;
    void *p, *q;
    struct hoff_stats a, b;

    open_sim(0, 0);
    p = managed(4 * MiB, 70);
    q = managed(4 * MiB, 71);
    CU_ASSERT_EQUAL_FATAL(hoff_group_create(ctx, "rel", 0, &g), 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, p), 0);
    CU_ASSERT_EQUAL(hoff_group_evict(g, S), 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, q), -EBUSY);
    CU_ASSERT_EQUAL(hoff_group_wait(g, S, HOFF_GROUP_WAIT_STREAM), 0);
    CU_ASSERT_EQUAL(hoff_group_add(g, q), 0);
    a = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(hoff_group_release(g), 0);
    b = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(b.discards - a.discards, 1);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DISCARDED);
    CU_ASSERT_EQUAL(b.host_bytes, 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, q), HOFF_RES_DEVICE);
    CU_ASSERT(intact(q, 4 * MiB, 71));
    CU_ASSERT_EQUAL(info(g).blocks, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"one_copy_per_block", test_one_copy_per_block},
        {"budget_refusal", test_budget_refusal},
        {"host_cap_refusal", test_host_cap_refusal},
        {"abort_mid_transfer", test_abort_mid_transfer},
        {"misuse", test_misuse},
        {"outside_the_plan", test_outside_the_plan},
        {"colocated", test_colocated},
        {"release", test_release},
        {"clear", test_clear},
        {NULL, NULL},
    };
    return hoff_test_run("swap", tests);
}
