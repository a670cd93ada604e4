/* test_integrity.c — every byte survives: random alloc/evict/prefetch/discard/access/free from several threads,
 * then under a budget that forces evictions, on a sim device that poisons and protects non-resident pages. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hoff.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define THREADS 4
#define SLOTS 8
#define ACTIONS 1500

struct slot {
    uint64_t *p;
    size_t size;
    uint64_t seed; /* pattern word i is seed * K + i; 0 = contents undefined */
    int managed;
};

static hoff_ctx *ctx;

static void fill(struct slot *s, uint64_t seed) {
    hoff_test_fill_seq(s->p, s->size, seed);
    s->seed = seed;
}

/* 0 when every word is right. */
static long check(const struct slot *s) {
    if (!s->seed)
        return 0;
    return (long)hoff_test_seq_bad(s->p, s->size, s->seed);
}

struct worker {
    int id;
    hoff_stream stream;
    uint64_t rng;
    struct slot slots[SLOTS];
    long bad; /* words found wrong */
    long verified_bytes;
    long actions[8];
    int errors; /* unexpected return codes */
};

static void expect(struct worker *w, int ok, const char *what, int rc) {
    if (!ok) {
        w->errors++;
        fprintf(stderr, "worker %d: %s returned %d (%s): %s\n", w->id, what, rc, hoff_strerror(rc), hoff_last_error());
    }
}

/* Touch a block from the host: mark the access first, as the sim demands. */
static void verify(struct worker *w, struct slot *s) {
    long at;
    int rc = hoff_access(ctx, s->p, 0, w->stream);
    expect(w, rc == 0, "hoff_access", rc);
    at = check(s);
    if (at) {
        w->bad++;
        fprintf(stderr, "worker %d: block %p (%zu bytes) wrong at word %ld\n", w->id, (void *)s->p, s->size, at - 1);
    }
    w->verified_bytes += (long)s->size;
}

static void one_action(struct worker *w) {
    struct slot *s = &w->slots[hoff_test_rand(&w->rng) % SLOTS];
    unsigned op = (unsigned)(hoff_test_rand(&w->rng) % 8);
    int rc;

    w->actions[op]++;
    if (!s->p) { /* empty slot: allocate */
        s->managed = hoff_test_rand(&w->rng) % 4 != 0;
        s->size = s->managed ? (size_t)(1 + hoff_test_rand(&w->rng) % 6) * MiB - 8 * (hoff_test_rand(&w->rng) % 64)
                             : (size_t)(64 + hoff_test_rand(&w->rng) % 200000) & ~(size_t)7;
        s->p = hoff_malloc_flags(ctx, s->size, w->stream, s->managed ? HOFF_ALLOC_MANAGED : HOFF_ALLOC_DEVICE);
        expect(w, s->p != NULL, "hoff_malloc", -errno);
        if (!s->p)
            return;
        rc = hoff_access(ctx, s->p, 1, w->stream);
        expect(w, rc == 0, "hoff_access(write)", rc);
        fill(s, hoff_test_rand(&w->rng) | 1);
        return;
    }
    switch (op) {
    case 0: /* free */
        verify(w, s);
        rc = hoff_free(ctx, s->p, w->stream);
        expect(w, rc == 0, "hoff_free", rc);
        s->p = NULL;
        break;
    case 1:
    case 2: /* evict */
        rc = hoff_evict(ctx, s->p, w->stream);
        expect(w, s->managed ? rc == 0 || rc == -EALREADY || rc == -EBUSY : rc == -EPERM, "hoff_evict", rc);
        break;
    case 3: /* prefetch */
        rc = hoff_prefetch(ctx, s->p, w->stream);
        expect(w, s->managed ? rc == 0 || rc == -EALREADY || rc == -EBUSY : rc == -EPERM, "hoff_prefetch", rc);
        break;
    case 4: /* read */ verify(w, s); break;
    case 5: /* rewrite */
        rc = hoff_access(ctx, s->p, 1, w->stream);
        expect(w, rc == 0, "hoff_access(write)", rc);
        fill(s, hoff_test_rand(&w->rng) | 1);
        break;
    case 6: /* discard: the contents are dead until rewritten */
        if (!s->managed || hoff_test_rand(&w->rng) % 4)
            break;
        rc = hoff_discard(ctx, s->p, w->stream);
        expect(w, rc == 0 || rc == -EALREADY || rc == -EBUSY, "hoff_discard", rc);
        if (rc == 0)
            s->seed = 0;
        break;
    case 7: /* compute: time passes, transfers land */
        rc = hoff_sim_compute(ctx, w->stream, 1000 + hoff_test_rand(&w->rng) % 200000);
        expect(w, rc == 0, "hoff_sim_compute", rc);
        break;
    }
}

static void finish_worker(struct worker *w) {
    int i;
    for (i = 0; i < SLOTS; i++) {
        struct slot *s = &w->slots[i];
        if (!s->p)
            continue;
        verify(w, s);
        expect(w, hoff_free(ctx, s->p, w->stream) == 0, "hoff_free", 0);
        s->p = NULL;
    }
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    int i;
    for (i = 0; i < ACTIONS; i++) {
        one_action(w);
        /* Each action is one op: its use window closes here (without op
         * marks every touched block stays in use until its free). */
        expect(w, hoff_mark_op(ctx, NULL) == 0, "hoff_mark_op", 0);
    }
    finish_worker(w);
    return NULL;
}

static void open_ctx(uint64_t budget) {
    struct hoff_config cfg;
    cfg = hoff_test_sim_config(4ull << 30);
    cfg.sim_protect = HOFF_SIM_PROTECT; /* a missing transfer crashes */
    cfg.budget_bytes = budget;
    cfg.issue_queue_depth = 16; /* small: the full-queue path runs too */
    ctx = hoff_test_open(&cfg);
}

static void report(struct worker *ws, int n) {
    struct hoff_stats st;
    long bytes = 0;
    int i;

    hoff_stats_get(ctx, &st);
    for (i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(ws[i].bad, 0);
        CU_ASSERT_EQUAL(ws[i].errors, 0);
        bytes += ws[i].verified_bytes;
    }
    printf("\n    verified %.1f MiB; evictions %llu prefetches %llu faults %llu late %llu discards %llu "
           "budget_evictions %llu peak %.1f MiB\n",
           (double)bytes / MiB, (unsigned long long)st.evictions, (unsigned long long)st.prefetches,
           (unsigned long long)st.faults, (unsigned long long)st.late_prefetches, (unsigned long long)st.discards,
           (unsigned long long)st.budget_evictions, (double)st.peak_resident_bytes / MiB);
    CU_ASSERT(st.evictions > 0);
    CU_ASSERT(st.prefetches > 0);
    CU_ASSERT(st.faults > 0);
    CU_ASSERT_EQUAL(st.live_blocks, 0);
    CU_ASSERT_EQUAL(st.resident_bytes, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT_EQUAL(st.transfer_errors, 0);
    CU_ASSERT_EQUAL(st.allocs, st.frees);
}

static void test_threads(void) {
    struct worker ws[THREADS];
    pthread_t th[THREADS];
    int i;

    open_ctx(0);
    memset(ws, 0, sizeof ws);
    for (i = 0; i < THREADS; i++) {
        ws[i].id = i;
        ws[i].stream = (hoff_stream)(uintptr_t)(i % 2 + 1); /* two streams shared by the threads */
        ws[i].rng = 0x1234567ull * (uint64_t)(i + 1);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, run_worker, &ws[i]), 0);
    }
    for (i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    report(ws, THREADS);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* One thread under a budget: the runtime evicts by itself, and every page-in
 * must bring the right bytes back. */
static void test_budget(void) {
    struct worker w;
    struct hoff_stats st;
    const uint64_t budget = 12 * MiB;

    open_ctx(budget);
    memset(&w, 0, sizeof w);
    w.rng = 42;
    run_worker(&w);
    report(&w, 1);
    hoff_stats_get(ctx, &st);
    CU_ASSERT(st.budget_evictions > 0);
    /* Every block fits the budget alone: it is never exceeded. */
    CU_ASSERT_EQUAL(st.budget_overruns, 0);
    CU_ASSERT(st.peak_resident_bytes <= budget);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"threads", test_threads},
        {"budget", test_budget},
        {NULL, NULL},
    };
    return hoff_test_run("integrity", tests);
}
