/* test_residency.c — the residency state machine (every legal and illegal transition) and the runtime's
 * accounting on the sim backend: evict, prefetch, discard, faults, late prefetches, budget; the decisions of making
 * room (mem/room.h) that the runtime and the prediction share.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "hoff.h"
#include "mem/residency.h"
#include "mem/room.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)

/* --- the table, written out independently of the implementation ---------- */

/* The spec, one rule per event (st: the state the block is in):
 *  EVICT:   device -> evicting; evicting, or not on the device -> EALREADY;
 *           prefetching -> EBUSY.
 *  PREFETCH: host, discarded -> prefetching; device, prefetching -> EALREADY;
 *           any other transfer in flight, or on NVMe -> EBUSY.
 *  DISCARD: device, host, nvme -> discarded; discarded -> EALREADY; in flight -> EBUSY.
 *  FAULT:   host, discarded -> device; device -> EALREADY; in flight or on NVMe -> EBUSY.
 *  POPULATE: host, discarded -> device; device -> EALREADY; in flight -> EBUSY;
 *           nvme -> EINVAL (a cached block is never on NVMe).
 *  SPILL:   host -> spilling; spilling, nvme -> EALREADY; evicting, prefetching,
 *           restoring -> EBUSY; device, discarded -> EINVAL (no host copy).
 *  RESTORE: nvme -> restoring; restoring, host -> EALREADY; spilling -> EBUSY;
 *           device, evicting, prefetching, discarded -> EINVAL.
 *  *_DONE / *_FAIL: only in the matching in-flight state, else EINVAL. */
enum {
    DEV = HOFF_RES_DEVICE,
    EVI = HOFF_RES_EVICTING,
    HST = HOFF_RES_HOST,
    PRE = HOFF_RES_PREFETCHING,
    DIS = HOFF_RES_DISCARDED,
    SPI = HOFF_RES_SPILLING,
    NVM = HOFF_RES_NVME,
    RES = HOFF_RES_RESTORING
};
#define AL (-EALREADY)
#define BZ (-EBUSY)
#define IV (-EINVAL)

static const int spec[HOFF__RES_STATE_COUNT][HOFF__EV_COUNT] = {
    /*     EVICT E_DONE E_FAIL PREF P_DONE P_FAIL DISC FAULT POPUL SPILL S_DONE S_FAIL REST R_DONE R_FAIL */
    [DEV] = {EVI, IV, IV, AL, IV, IV, DIS, AL, AL, IV, IV, IV, IV, IV, IV},
    [EVI] = {AL, HST, DEV, BZ, IV, IV, BZ, BZ, BZ, BZ, IV, IV, IV, IV, IV},
    [HST] = {AL, IV, IV, PRE, IV, IV, DIS, DEV, DEV, SPI, IV, IV, AL, IV, IV},
    [PRE] = {BZ, IV, IV, AL, DEV, HST, BZ, BZ, BZ, BZ, IV, IV, IV, IV, IV},
    [DIS] = {AL, IV, IV, PRE, IV, IV, AL, DEV, DEV, IV, IV, IV, IV, IV, IV},
    [SPI] = {AL, IV, IV, BZ, IV, IV, BZ, BZ, BZ, AL, NVM, HST, BZ, IV, IV},
    [NVM] = {AL, IV, IV, BZ, IV, IV, DIS, BZ, IV, AL, IV, IV, RES, IV, IV},
    [RES] = {AL, IV, IV, BZ, IV, IV, BZ, BZ, BZ, BZ, IV, IV, AL, HST, NVM},
};

static void test_every_transition(void) {
    int st, ev, checked = 0;

    for (st = 0; st < HOFF__RES_STATE_COUNT; st++)
        for (ev = 0; ev < HOFF__EV_COUNT; ev++) {
            int want = spec[st][ev], got = hoff__res_next(st, ev);
            if (got != want)
                fprintf(stderr, "\n  %s --%s--> got %d want %d\n", hoff__res_state_name(st), hoff__res_event_name(ev),
                        got, want);
            CU_ASSERT_EQUAL(got, want);
            checked++;
        }
    CU_ASSERT_EQUAL(checked, HOFF__RES_STATE_COUNT * HOFF__EV_COUNT);
    CU_ASSERT_EQUAL(HOFF__EV_COUNT, 15);
    CU_ASSERT_EQUAL(hoff__res_next(-1, 0), -EINVAL);
    CU_ASSERT_EQUAL(hoff__res_next(0, HOFF__EV_COUNT), -EINVAL);
    CU_ASSERT_STRING_EQUAL(hoff__res_state_name(HOFF_RES_PREFETCHING), "prefetching");
    CU_ASSERT_STRING_EQUAL(hoff__res_event_name(HOFF__EV_FAULT), "fault");
    CU_ASSERT_STRING_EQUAL(hoff__res_event_name(HOFF__EV_RESTORE_FAIL), "restore-fail");
}

/* --- the runtime on sim ---------------------------------------------------- */

static hoff_ctx *ctx;
#define S ((hoff_stream)0)

static uint64_t host_cap;

static void open_sim(uint64_t budget) {
    struct hoff_config cfg;

    cfg = hoff_test_sim_config(1ull << 30);
    cfg.sim_h2d_gbps = 1.0; /* 1 byte per ns: easy figures */
    cfg.sim_d2h_gbps = 1.0;
    cfg.sim_latency_ns = 0;
    cfg.sim_call_ns = 0; /* the figures below count copies only */
    cfg.sim_fault_gbps = 0.5;
    cfg.sim_fault_ns = 1000;
    cfg.budget_bytes = budget;
    cfg.host_cap_bytes = host_cap;
    cfg.log_level = HOFF_LOG_WARN; /* host_cap_below_block reads the warning */
    ctx = hoff_test_open(&cfg);
}

/* A managed block, filled; the op that fills it ends (its use window closes). */
static void *managed(size_t size, unsigned char fill) {
    void *p = hoff_malloc_flags(ctx, size, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 1, S), 0); /* the access mark of its writer */
    memset(p, fill, size);
    CU_ASSERT_EQUAL(hoff_mark_op(ctx, NULL), 0);
    return p;
}

static int all_bytes(const void *p, size_t n, unsigned char v) {
    const unsigned char *c = p;
    size_t i;
    for (i = 0; i < n; i++)
        if (c[i] != v)
            return 0;
    return 1;
}

static void test_evict_prefetch_round_trip(void) {
    void *p;
    struct hoff_stats st;

    open_sim(0);
    p = managed(4 * MiB, 0x5A);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p, S), -EALREADY);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, p, S), -EBUSY);
    /* The copy takes 4 MiB / 1 GB/s of virtual time: still in flight. */
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_EVICTING);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 4 * MiB); /* until the copy completes */
    CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, 10 * MiB), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_HOST);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(st.evictions, 1);
    CU_ASSERT_EQUAL(st.bytes_evicted, 4 * MiB);
    CU_ASSERT(all_bytes(p, 4 * MiB, 0xDB)); /* the device copy is gone */
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 4 * MiB); /* from the start of the copy */
    CU_ASSERT_EQUAL(hoff_sim_compute(ctx, S, 10 * MiB), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DEVICE);
    CU_ASSERT(all_bytes(p, 4 * MiB, 0x5A));
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.prefetches, 1);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT_EQUAL(st.faults, 0);
    CU_ASSERT_EQUAL(st.stall_ns, 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

static void test_fault_on_access(void) {
    void *p;
    struct hoff_stats st;

    open_sim(0);
    p = managed(2 * MiB, 0x11);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 0, S), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DEVICE);
    CU_ASSERT(all_bytes(p, 2 * MiB, 0x11));
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.faults, 1);
    CU_ASSERT_EQUAL(st.bytes_faulted, 2 * MiB);
    /* 1000 ns per fault + 2 MiB at 0.5 GB/s */
    CU_ASSERT_EQUAL(st.stall_ns, 1000 + 4 * MiB);
    CU_ASSERT_EQUAL(st.resident_bytes, 2 * MiB);
    hoff_free(ctx, p, S);
    hoff_shutdown(ctx);
}

static void test_access_while_evicting_waits(void) {
    void *p;
    struct hoff_stats st;

    open_sim(0);
    p = managed(2 * MiB, 0x22);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p, S), 0);
    /* Used before the eviction landed: wait for it, then page in. */
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DEVICE);
    CU_ASSERT(all_bytes(p, 2 * MiB, 0x22));
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.evictions, 1);
    CU_ASSERT_EQUAL(st.faults, 1);
    CU_ASSERT(st.stall_ns >= 2 * MiB); /* the eviction's copy time at least */
    hoff_free(ctx, p, S);
    hoff_shutdown(ctx);
}

static void test_late_prefetch(void) {
    void *p;
    struct hoff_stats st;

    open_sim(0);
    p = managed(8 * MiB, 0x33);
    hoff_evict(ctx, p, S);
    hoff_sync(ctx);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, p, S), 0);
    hoff_sim_compute(ctx, S, 1 * MiB); /* not long enough for 8 MiB at 1 GB/s */
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 0, S), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.late_prefetches, 1);
    CU_ASSERT_EQUAL(st.faults, 0);
    CU_ASSERT_EQUAL(st.stall_ns, 7 * MiB);
    CU_ASSERT(all_bytes(p, 8 * MiB, 0x33));
    hoff_free(ctx, p, S);
    hoff_shutdown(ctx);
}

static void test_discard(void) {
    void *p;
    struct hoff_stats st;

    open_sim(0);
    p = managed(2 * MiB, 0x44);
    CU_ASSERT_EQUAL(hoff_discard(ctx, p, S), 0);
    /* In flight on the copy engine like an eviction, and counted until it
     * lands (with this config's zero latency it may land at once). */
    if (hoff_residency(ctx, p) == HOFF_RES_EVICTING) {
        CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 2 * MiB);
        CU_ASSERT_EQUAL(hoff_discard(ctx, p, S), -EBUSY);
    } else {
        CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DISCARDED);
    }
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DISCARDED);
    CU_ASSERT_EQUAL(hoff_discard(ctx, p, S), -EALREADY);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT_EQUAL(st.discards, 1);
    CU_ASSERT_EQUAL(st.bytes_evicted, 0); /* no copy */
    CU_ASSERT_EQUAL(hoff_access(ctx, p, 1, S), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), HOFF_RES_DEVICE);
    hoff_free(ctx, p, S);
    hoff_shutdown(ctx);
}

static void test_not_candidates(void) {
    void *d, *r;

    open_sim(0);
    d = hoff_malloc_flags(ctx, 4 * MiB, S, HOFF_ALLOC_DEVICE);
    CU_ASSERT_EQUAL(hoff_evict(ctx, d, S), -EPERM);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, d, S), -EPERM);
    CU_ASSERT_EQUAL(hoff_access(ctx, d, 0, S), 0);
    hoff_region_begin(ctx);
    r = hoff_malloc_flags(ctx, 4 * MiB, S, HOFF_ALLOC_MANAGED);
    hoff_region_end(ctx);
    CU_ASSERT_EQUAL(hoff_evict(ctx, r, S), -EPERM);
    CU_ASSERT_EQUAL(hoff_evict(ctx, (char *)r + 64, S), -EINVAL);
    hoff_free(ctx, d, S);
    hoff_free(ctx, r, S);
    hoff_shutdown(ctx);
}

/* Resident bytes equal the books at every event, and never pass the budget
 * while something can be evicted: LRU order, waits counted as stall. */
static void test_budget_lru(void) {
    void *p[6];
    struct hoff_stats st;
    int i;

    open_sim(8 * MiB);
    for (i = 0; i < 4; i++)
        p[i] = managed(2 * MiB, (unsigned char)(0x60 + i));
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 8 * MiB);
    hoff_access(ctx, p[0], 0, S); /* p[0] is now the most recent */
    p[4] = managed(2 * MiB, 0x64);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, 8 * MiB);
    CU_ASSERT(st.peak_resident_bytes <= 8 * MiB);
    CU_ASSERT_EQUAL(st.budget_evictions, 1);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[1]), HOFF_RES_HOST); /* least recently used */
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[0]), HOFF_RES_DEVICE);
    CU_ASSERT(st.stall_ns >= 2 * MiB); /* the alloc waited for the copy */
    /* A fault of p[1] evicts the next least recent (p[2]). */
    CU_ASSERT_EQUAL(hoff_access(ctx, p[1], 0, S), 0);
    CU_ASSERT(all_bytes(p[1], 2 * MiB, 0x61));
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[2]), HOFF_RES_HOST);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.budget_overruns, 0);
    CU_ASSERT(st.peak_resident_bytes <= 8 * MiB);
    for (i = 0; i < 5; i++) {
        hoff_access(ctx, p[i], 0, S);
        CU_ASSERT(all_bytes(p[i], 2 * MiB, (unsigned char)(0x60 + i)));
        hoff_free(ctx, p[i], S);
    }
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT(st.peak_resident_bytes <= 8 * MiB);
    hoff_shutdown(ctx);
}

static void test_budget_overrun_counted(void) {
    void *a, *b;
    struct hoff_stats st;

    open_sim(4 * MiB);
    hoff_region_begin(ctx);
    a = hoff_malloc_flags(ctx, 4 * MiB, S, HOFF_ALLOC_MANAGED); /* pinned */
    hoff_region_end(ctx);
    b = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL(b); /* nothing lost: allocated, and the overrun counted */
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, 6 * MiB);
    CU_ASSERT(st.budget_overruns >= 1);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, b, S), -EALREADY);
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

static void test_prefetch_no_room(void) {
    void *a, *b;

    open_sim(4 * MiB);
    b = managed(2 * MiB, 1);
    hoff_evict(ctx, b, S);
    hoff_sync(ctx);
    hoff_region_begin(ctx);
    a = hoff_malloc_flags(ctx, 4 * MiB, S, HOFF_ALLOC_MANAGED);
    hoff_region_end(ctx);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, b, S), -HOFF_EBUDGET);
    CU_ASSERT_EQUAL(hoff_residency(ctx, b), HOFF_RES_HOST);
    hoff_free(ctx, a, S);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, b, S), 0);
    hoff_free(ctx, b, S);
    hoff_shutdown(ctx);
}

static void test_free_in_flight(void) {
    void *p, *q;
    struct hoff_stats st;

    open_sim(0);
    p = managed(2 * MiB, 0x77);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p, S), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, p, S), 0); /* returns at once */
    CU_ASSERT_EQUAL(hoff_residency(ctx, p), -EINVAL);
    hoff_sync(ctx);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.resident_bytes, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT_EQUAL(st.live_blocks, 0);
    /* The mapping is reused, resident again. */
    q = hoff_malloc_flags(ctx, 2 * MiB, S, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_EQUAL(q, p);
    CU_ASSERT_EQUAL(hoff_residency(ctx, q), HOFF_RES_DEVICE);
    memset(q, 1, 2 * MiB); /* writable: would crash or be poisoned otherwise */
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).resident_bytes, 2 * MiB);
    hoff_free(ctx, q, S);
    hoff_shutdown(ctx);
}

/* Without an NVMe tier the host cap is a hard limit: an eviction that would
 * pass it is refused, the block stays on the device and the refusal counted. */
static void test_host_cap(void) {
    void *p[3];
    struct hoff_stats st;
    int i;

    host_cap = 4 * MiB;
    open_sim(0);
    for (i = 0; i < 3; i++)
        p[i] = managed(2 * MiB, (unsigned char)(0x80 + i));
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[0], S), 0);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[1], S), 0); /* in flight: counted against the cap */
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[2], S), -HOFF_EHOSTCAP);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[2]), HOFF_RES_DEVICE);
    hoff_sync(ctx);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.host_bytes, 4 * MiB);
    CU_ASSERT(st.peak_host_bytes <= 4 * MiB);
    CU_ASSERT_EQUAL(st.host_cap_waits, 1);
    CU_ASSERT_EQUAL(st.host_cap_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, p[0], S), 0);
    hoff_sync(ctx);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[2], S), 0); /* room again */
    hoff_sync(ctx);
    for (i = 0; i < 3; i++) {
        hoff_access(ctx, p[i], 0, S);
        CU_ASSERT(all_bytes(p[i], 2 * MiB, (unsigned char)(0x80 + i)));
        hoff_free(ctx, p[i], S);
    }
    hoff_shutdown(ctx);
    host_cap = 0;
}

/* A block larger than the host cap can never be evicted (an eviction lands on
 * the host tier first).  The budget's room comes from the blocks that fit,
 * the big one stays on the device, and its allocation is counted and warned
 * about once, naming the block size and the cap. */
static void test_host_cap_below_block(void) {
    void *a, *b, *c;
    struct hoff_stats st;
    char log[4096];
    FILE *f;
    int saved, n;

    f = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fflush(stderr);
    saved = dup(2);
    dup2(fileno(f), 2);
    host_cap = 4 * MiB;
    open_sim(10 * MiB);
    a = managed(8 * MiB, 0x31);
    b = managed(2 * MiB, 0x32);
    c = managed(2 * MiB, 0x33); /* 12 MiB > 10: room must come from b, not a */
    hoff_sync(ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.budget_overruns, 0);
    CU_ASSERT(st.peak_resident_bytes <= 10 * MiB);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a), HOFF_RES_DEVICE);
    CU_ASSERT_EQUAL(hoff_residency(ctx, b), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(st.host_cap_unevictable, 1);
    rewind(f);
    n = (int)fread(log, 1, sizeof log - 1, f);
    log[n > 0 ? n : 0] = '\0';
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "HOFF_HOST_CAP 4.0 MiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "8.0 MiB offload block"));
    CU_ASSERT_PTR_NULL(strstr(log, "in use or pinned"));
    CU_ASSERT(all_bytes(a, 8 * MiB, 0x31));
    hoff_access(ctx, b, 0, S); /* evicts c (a cannot go) */
    CU_ASSERT(all_bytes(b, 2 * MiB, 0x32));
    hoff_mark_op(ctx, NULL); /* b's op is enqueued: it may go for c */
    hoff_access(ctx, c, 0, S);
    CU_ASSERT(all_bytes(c, 2 * MiB, 0x33));
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).budget_overruns, 0);
    hoff_free(ctx, a, S);
    hoff_free(ctx, b, S);
    hoff_free(ctx, c, S);
    hoff_shutdown(ctx);
    host_cap = 0;
}

/* --- the decisions of making room (mem/room.h), each rule by hand ---------- */

static void test_room_device(void) {
    /* no budget: always fits */
    CU_ASSERT_EQUAL(hoff__room_device(100, 0, 50, 0), HOFF__ROOM_FITS);
    /* resident + need within the budget, to the byte */
    CU_ASSERT_EQUAL(hoff__room_device(60, 0, 40, 100), HOFF__ROOM_FITS);
    /* one byte over, nothing in flight: evict */
    CU_ASSERT_EQUAL(hoff__room_device(61, 0, 40, 100), HOFF__ROOM_EVICT);
    /* over by 30 with 29 evicting: not enough in flight, evict another */
    CU_ASSERT_EQUAL(hoff__room_device(90, 29, 40, 100), HOFF__ROOM_EVICT);
    /* over by 30 with 30 evicting: enough once they land, wait */
    CU_ASSERT_EQUAL(hoff__room_device(90, 30, 40, 100), HOFF__ROOM_WAIT);
    CU_ASSERT_EQUAL(hoff__room_device(90, 80, 40, 100), HOFF__ROOM_WAIT);
}

static void test_room_budget_floor(void) {
    CU_ASSERT_EQUAL(hoff__room_budget(0, 500), 0);     /* no budget stays none */
    CU_ASSERT_EQUAL(hoff__room_budget(100, 0), 100);   /* no plan replaying */
    CU_ASSERT_EQUAL(hoff__room_budget(100, 80), 100);  /* a floor below the budget changes nothing */
    CU_ASSERT_EQUAL(hoff__room_budget(100, 150), 150); /* a plan below its floor: kept at the floor */
}

static void test_room_victim(void) {
    CU_ASSERT_EQUAL(hoff__room_victim(0, 0, 0, 0, 4 * MiB), HOFF__VICTIM_OK);
    CU_ASSERT_EQUAL(hoff__room_victim(1, 0, 0, 0, 4 * MiB), HOFF__VICTIM_SKIP); /* the block room is for */
    CU_ASSERT_EQUAL(hoff__room_victim(0, 1, 0, 0, 4 * MiB), HOFF__VICTIM_SKIP); /* in its use window */
    CU_ASSERT_EQUAL(hoff__room_victim(0, 0, 1, 0, 4 * MiB), HOFF__VICTIM_SKIP); /* a manual group's */
    CU_ASSERT_EQUAL(hoff__room_victim(0, 0, 0, 4 * MiB, 4 * MiB), HOFF__VICTIM_OK);
    CU_ASSERT_EQUAL(hoff__room_victim(0, 0, 0, 2 * MiB, 4 * MiB), HOFF__VICTIM_OVER_CAP);
    /* a skipped block is skipped before its size is looked at */
    CU_ASSERT_EQUAL(hoff__room_victim(0, 1, 0, 2 * MiB, 4 * MiB), HOFF__VICTIM_SKIP);
}

static void test_room_host(void) {
    /* cap 100: 60 on the host, 20 arriving */
    struct hoff__host_books h = {.cap = 100, .host = 60, .to_host = 20};
    struct hoff__host_cands all = {.can_spill = 1, .victim = 1, .leaving = 1, .arriving = 1};
    struct hoff__host_cands c;

    CU_ASSERT_EQUAL(hoff__room_host(&h, 20, &all), HOFF__HOST_FITS); /* 100: at the cap, not over */
    CU_ASSERT_EQUAL(hoff__room_host(&h, 21, &all), HOFF__HOST_SPILL);
    h.cap = 0; /* no cap: always fits */
    CU_ASSERT_EQUAL(hoff__room_host(&h, 1000, &(struct hoff__host_cands){0}), HOFF__HOST_FITS);
    h.cap = 100;
    /* what is leaving covers it (60 - 15 + 20 + 21 = 86 <= 100): wait, do not spill */
    h.spilling = 10;
    h.from_host = 5;
    CU_ASSERT_EQUAL(hoff__room_host(&h, 21, &all), HOFF__HOST_WAIT_LEAVING);
    /* it does not (60 - 15 + 20 + 36 = 101): spill */
    CU_ASSERT_EQUAL(hoff__room_host(&h, 36, &all), HOFF__HOST_SPILL);
    /* no victim, or no spilling: wait for what leaves */
    c = all;
    c.victim = 0;
    CU_ASSERT_EQUAL(hoff__room_host(&h, 36, &c), HOFF__HOST_WAIT_LEAVING);
    c = all;
    c.can_spill = 0;
    CU_ASSERT_EQUAL(hoff__room_host(&h, 36, &c), HOFF__HOST_WAIT_LEAVING);
    /* nothing leaving: with an NVMe tier, wait for an arrival (then spill it); without one, stuck */
    c = all;
    c.victim = c.leaving = 0;
    CU_ASSERT_EQUAL(hoff__room_host(&h, 36, &c), HOFF__HOST_WAIT_ARRIVING);
    c.can_spill = 0;
    CU_ASSERT_EQUAL(hoff__room_host(&h, 36, &c), HOFF__HOST_STUCK);
    c.can_spill = 1;
    c.arriving = 0;
    CU_ASSERT_EQUAL(hoff__room_host(&h, 36, &c), HOFF__HOST_STUCK);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"host_cap", test_host_cap},
        {"host_cap_below_block", test_host_cap_below_block},
        {"every_transition", test_every_transition},
        {"evict_prefetch_round_trip", test_evict_prefetch_round_trip},
        {"fault_on_access", test_fault_on_access},
        {"access_while_evicting_waits", test_access_while_evicting_waits},
        {"late_prefetch", test_late_prefetch},
        {"discard", test_discard},
        {"not_candidates", test_not_candidates},
        {"budget_lru", test_budget_lru},
        {"budget_overrun_counted", test_budget_overrun_counted},
        {"prefetch_no_room", test_prefetch_no_room},
        {"free_in_flight", test_free_in_flight},
        {"room_device", test_room_device},
        {"room_budget_floor", test_room_budget_floor},
        {"room_victim", test_room_victim},
        {"room_host", test_room_host},
        {NULL, NULL},
    };
    return hoff_test_run("residency", tests);
}
