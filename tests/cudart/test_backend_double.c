/* test_backend_double.c — the cuda backend's degradations and its watch on the driver, on the strict CUDA
 * runtime double, where errors can be injected and the driver's moves seen: driver drift (a cudaMalloc outside
 * hoff makes the driver evict hoff's blocks, and hoff's measured evictions find exactly those pages), a refused
 * NUMA node (only that node falls back), a refused host drop (asked once, and never waiting for the D2H
 * stream), populate (no dead bytes copied), and a failed transfer (done recorded all the same).  Plain C, one
 * line per check; exit 0, 1 on a failure.
 * Env: HOFFDBL_* set by the test (2 host NUMA nodes, 256 MiB devices).
 * Threading: the main thread; one kernel body (a gate) runs on the double's stream thread. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "hoff.h"
#include "hoffdbl.h"
#include "../plaincheck.h"

#define MiB ((size_t)1 << 20)

static struct hoff__backend *open_be(void) {
    struct hoff_config cfg;
    struct hoff__backend *be = NULL;

    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_CUDA;
    cfg.device = 0;
    if (hoff__backend_open_cuda(&cfg, &be) != 0) {
        printf("FAIL - hoff__backend_open_cuda: %s\n", hoff_last_error());
        exit(1);
    }
    return be;
}

static void *mapping(struct hoff__backend *be, size_t size) {
    void *p = NULL;

    if (be->ops->managed_alloc(be, size, &p) != 0) {
        printf("FAIL - managed_alloc(%zu): %s\n", size, hoff_last_error());
        exit(1);
    }
    return p;
}

static int last_prefetch(const void *p, int *id) {
    int type = -1;

    *id = -1;
    if (cudaMemRangeGetAttribute(&type, sizeof type, cudaMemRangeAttributeLastPrefetchLocationType, p, 2 * MiB) !=
            cudaSuccess ||
        cudaMemRangeGetAttribute(id, sizeof *id, cudaMemRangeAttributeLastPrefetchLocationId, p, 2 * MiB) !=
            cudaSuccess)
        return -1;
    return type;
}

static struct hoff__be_counters counters(struct hoff__backend *be) {
    struct hoff__be_counters c;

    memset(&c, 0, sizeof c);
    be->ops->counters(be, &c);
    return c;
}

/* --- a refused NUMA node: only that node falls back ------------------------------------ */

static void test_numa(void) {
    struct hoff__backend *be = open_be();
    void *a = mapping(be, 2 * MiB), *b = mapping(be, 2 * MiB), *c = mapping(be, 2 * MiB);
    int id;

    printf("# a refused NUMA node\n");
    hoffdbl_fail("cudaMemPrefetchAsync", cudaErrorInvalidValue, 1); /* the driver refuses node 1, once */
    check(be->ops->evict_node(be, a, 2 * MiB, 1, NULL, NULL) == 0, "evict_node(node 1), refused: falls back");
    be->ops->sync(be);
    check(last_prefetch(a, &id) == cudaMemLocationTypeHost, "it went to plain host memory");
    check(counters(be).numa_refusals == 1, "numa_refusals 1 (%" PRIu64 ")", counters(be).numa_refusals);
    check(be->ops->evict_node(be, b, 2 * MiB, 0, NULL, NULL) == 0, "evict_node(node 0)");
    be->ops->sync(be);
    check(last_prefetch(b, &id) == cudaMemLocationTypeHostNuma && id == 0,
          "node 0 is still asked for: it went to host NUMA node 0 (type %d id %d)", last_prefetch(b, &id), id);
    check(be->ops->evict_node(be, c, 2 * MiB, 1, NULL, NULL) == 0, "evict_node(node 1) again");
    be->ops->sync(be);
    check(last_prefetch(c, &id) == cudaMemLocationTypeHost, "node 1 is not asked again: plain host memory");
    check(counters(be).numa_refusals == 1, "no second refusal counted");
    be->ops->managed_free(be, a, 2 * MiB);
    be->ops->managed_free(be, b, 2 * MiB);
    be->ops->managed_free(be, c, 2 * MiB);
    be->ops->close(be);
}

/* --- host_drop: its own stream, asked once ------------------------------------------------ */

static volatile int gate_open;

static void gate(void *arg) {
    struct timespec t0, t;

    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { /* held until the test opens it, 3 s at most (a test that fails must not hang) */
        usleep(1000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (!__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE) && t.tv_sec - t0.tv_sec < 3);
}

static void test_host_drop(void) {
    struct hoff__backend *be = open_be();
    void *a = mapping(be, 2 * MiB), *b = mapping(be, 2 * MiB), *c = mapping(be, 2 * MiB), *d = mapping(be, 2 * MiB);
    hoff__event *held, *done;
    cudaStream_t s;
    uint64_t calls;

    printf("# host_drop\n");
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    be->ops->event_create(be, &held);
    be->ops->event_create(be, &done);
    be->ops->evict(be, a, 2 * MiB, NULL, NULL);
    be->ops->evict(be, b, 2 * MiB, NULL, NULL);
    be->ops->evict(be, c, 2 * MiB, NULL, NULL);
    be->ops->sync(be);
    /* An eviction queued on the D2H stream behind a held gate. */
    hoffdbl_launch(s, NULL, 0, gate, NULL);
    be->ops->event_record(be, held, s);
    be->ops->evict(be, d, 2 * MiB, held, done);
    check(be->ops->host_drop(be, a, 2 * MiB) == 0, "host_drop of a spilled block's host pages");
    check(be->ops->event_query(be, done) == -EAGAIN,
          "it returned while an unrelated eviction still waits on the D2H stream (it waits only for itself)");
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
    be->ops->sync(be);
    check(hoffdbl_page_location(a) == -2, "the host pages are dropped (location %d)", hoffdbl_page_location(a));
    /* A driver that refuses it: asked once. */
    hoffdbl_fail("cudaMemDiscardBatchAsync", cudaErrorNotSupported, 1);
    check(be->ops->host_drop(be, b, 2 * MiB) == 0, "a refused host_drop is no failure: the NVMe copy is good");
    check(counters(be).drop_refusals == 1, "host_drop_refusals 1");
    calls = hoffdbl_calls("cudaMemDiscardBatchAsync");
    check(be->ops->host_drop(be, c, 2 * MiB) == 0, "the next host_drop");
    check(hoffdbl_calls("cudaMemDiscardBatchAsync") == calls,
          "the driver is not asked again (%" PRIu64 " calls, %" PRIu64 " before)",
          hoffdbl_calls("cudaMemDiscardBatchAsync"), calls);
    check(counters(be).drop_refusals == 2, "each spill that keeps its host pages is counted (%" PRIu64 ")",
          counters(be).drop_refusals);
    be->ops->event_destroy(be, held);
    be->ops->event_destroy(be, done);
    be->ops->managed_free(be, a, 2 * MiB);
    be->ops->managed_free(be, b, 2 * MiB);
    be->ops->managed_free(be, c, 2 * MiB);
    be->ops->managed_free(be, d, 2 * MiB);
    cudaStreamDestroy(s);
    be->ops->close(be);
}

/* --- populate copies no dead bytes ---------------------------------------------------------- */

static void test_populate(void) {
    struct hoff__backend *be = open_be();
    void *a = mapping(be, 8 * MiB);
    struct hoffdbl_stats d0, d1;
    cudaStream_t s;

    printf("# populate\n");
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    hoffdbl_fail("cudaMemDiscardBatchAsync", cudaErrorNotSupported, 1); /* the discard becomes an eviction */
    check(be->ops->discard(be, a, 8 * MiB, NULL, NULL) == 0, "discard, refused by the driver: evicted instead");
    be->ops->sync(be);
    check(counters(be).discard_fallbacks == 1, "discard_fallbacks 1");
    check(hoffdbl_page_location(a) == -1, "the dead bytes are on the host");
    hoffdbl_stats(&d0);
    check(be->ops->populate(be, a, 8 * MiB, s) == 0, "populate");
    cudaStreamSynchronize(s);
    be->ops->sync(be);
    hoffdbl_stats(&d1);
    check(hoffdbl_page_location(a) == 0, "resident again");
    check(d1.migrated_h2d_bytes == d0.migrated_h2d_bytes, "no dead bytes copied to the device (%" PRIu64 " bytes)",
          d1.migrated_h2d_bytes - d0.migrated_h2d_bytes);
    be->ops->managed_free(be, a, 8 * MiB);
    cudaStreamDestroy(s);
    be->ops->close(be);
}

/* --- a failed transfer still records done ------------------------------------------------ */

/* op on (p, 2 MiB) with done, the next `times` calls of `call` failing: -EIO, done recorded on the copy stream
 * all the same (the point where the transfer would have been, so a waiter is not left on an event recorded long
 * ago), and `never` (a call the failure must keep from being made) not called. */
static void failed_transfer(struct hoff__backend *be, const char *what, void *p, int node, hoff__event *after,
                            const char *call, int times, const char *never) {
    hoff__event *done = NULL;
    uint64_t rec, nev;
    int rc;

    if (!check(be->ops->event_create(be, &done) == 0, "%s: event_create", what))
        return;
    rec = hoffdbl_calls("cudaEventRecord");
    nev = never ? hoffdbl_calls(never) : 0;
    hoffdbl_fail(call, cudaErrorInvalidValue, times);
    if (!strcmp(what, "evict"))
        rc = be->ops->evict(be, p, 2 * MiB, after, done);
    else if (!strcmp(what, "evict_node"))
        rc = be->ops->evict_node(be, p, 2 * MiB, node, after, done);
    else if (!strcmp(what, "prefetch"))
        rc = be->ops->prefetch(be, p, 2 * MiB, after, done);
    else
        rc = be->ops->discard(be, p, 2 * MiB, after, done);
    check(rc == -EIO, "%s, %s failing %d time(s): -EIO (%d)", what, call, times, rc);
    check(hoffdbl_calls("cudaEventRecord") == rec + 1, "%s: done recorded all the same", what);
    if (never)
        check(hoffdbl_calls(never) == nev, "%s: %s not called", what, never);
    check(be->ops->event_sync(be, done) == 0 && be->ops->event_query(be, done) == 0, "%s: done completes", what);
    be->ops->event_destroy(be, done);
}

static void test_failed_transfer(void) {
    struct hoff__backend *be = open_be();
    void *a = mapping(be, 2 * MiB);
    hoff__event *after = NULL;

    printf("# a failed transfer\n");
    /* The NUMA node and the plain host fallback both refused. */
    failed_transfer(be, "evict", a, -1, NULL, "cudaMemPrefetchAsync", 2, NULL);
    failed_transfer(be, "evict_node", a, 1, NULL, "cudaMemPrefetchAsync", 2, NULL);
    check(counters(be).numa_refusals == 0, "no NUMA refusal counted: the fallback failed too");
    check(hoffdbl_page_location(a) == 0, "still on the device");
    check(be->ops->evict(be, a, 2 * MiB, NULL, NULL) == 0, "evict");
    be->ops->sync(be);
    failed_transfer(be, "prefetch", a, -1, NULL, "cudaMemPrefetchAsync", 1, NULL);
    check(hoffdbl_page_location(a) == -1, "still on the host");
    /* The wait for after fails: nothing is moved. */
    check(be->ops->event_create(be, &after) == 0 && be->ops->event_record(be, after, NULL) == 0, "after recorded");
    failed_transfer(be, "discard", a, -1, after, "cudaStreamWaitEvent", 1, "cudaMemDiscardBatchAsync");
    failed_transfer(be, "prefetch", a, -1, after, "cudaStreamWaitEvent", 1, "cudaMemPrefetchAsync");
    check(counters(be).discard_fallbacks == 0, "no discard fallback counted");
    be->ops->event_destroy(be, after);
    be->ops->managed_free(be, a, 2 * MiB);
    be->ops->close(be);
}

/* --- driver drift: a cudaMalloc outside hoff -------------------------------------------- */

static void test_drift(void) {
    struct hoff_config cfg;
    hoff_ctx *ctx = NULL;
    struct hoff_stats st;
    cudaStream_t s;
    size_t f = 0, t = 0, blk = 16 * MiB, k;
    uint64_t want = 0, moves = 0;
    void *p[4], *ballast = NULL;
    int i, rc;

    printf("# driver drift\n");
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_CUDA;
    cfg.budget_bytes = 96 * MiB;
    cfg.oversub_margin_bytes = 16 * MiB;
    cfg.log_level = HOFF_LOG_ERROR;
    rc = hoff_init(&ctx, &cfg); /* first: check's arguments are evaluated in no set order */
    if (!check(rc == 0, "hoff_init on the double%s%s", rc ? ": " : "", rc ? hoff_last_error() : ""))
        return;
    hoff_step_begin(ctx);
    for (i = 0; i < 4; i++) {
        p[i] = hoff_malloc(ctx, blk, s);
        hoff_access(ctx, p[i], 1, s);
    }
    hoff_mark_op(ctx, "filled");
    hoff_sync(ctx);
    /* A library's cudaMalloc (NCCL's buffers) takes more than is free: the
     * driver evicts managed pages, hoff's, behind its books. */
    cudaMemGetInfo(&f, &t);
    check(cudaMalloc(&ballast, f + 24 * MiB) == cudaSuccess, "a cudaMalloc outside hoff of %zu MiB (%zu MiB free)",
          (f + 24 * MiB) >> 20, f >> 20);
    for (i = 0; i < 4; i++) {
        uint64_t gone = 0;
        for (k = 0; k < blk; k += 2 * MiB)
            gone += hoffdbl_page_location((char *)p[i] + k) != 0 ? 2 * MiB : 0;
        want += gone;
        moves += gone != 0;
    }
    check(want >= 24 * MiB, "the double's driver evicted %" PRIu64 " MiB of hoff's blocks", want >> 20);
    for (i = 0; i < 4; i++) { /* one lone eviction at a time, a millisecond apart */
        check(hoff_evict(ctx, p[i], s) == 0, "hoff_evict(block %d)", i);
        hoff_sync(ctx);
        usleep(2000);
    }
    hoff_stats_get(ctx, &st);
    check(st.driver_drift_samples == 4, "4 evictions measured (%" PRIu64 ")", st.driver_drift_samples);
    check(st.driver_drift_bytes == want, "they found the %" PRIu64 " MiB the driver had evicted (%" PRIu64 " MiB)",
          want >> 20, st.driver_drift_bytes >> 20);
    check(st.driver_drift_moves == moves, "in %" PRIu64 " blocks (%" PRIu64 ")", moves, st.driver_drift_moves);
    cudaFree(ballast);
    for (i = 0; i < 4; i++)
        hoff_free(ctx, p[i], s);
    hoff_step_end(ctx);
    hoff_stats_get(ctx, &st);
    check(st.device_foreign_bytes < t, "device_foreign_bytes %" PRIu64 " MiB", st.device_foreign_bytes >> 20);
    hoff_shutdown(ctx);
    cudaStreamDestroy(s);
}

int main(void) {
    int n = 0;

    setenv("HOFFDBL_NUMA_NODES", "2", 0);
    setenv("HOFFDBL_MEM", "268435456", 0);
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("SKIP: the double has no device\n");
        return 77;
    }
    cudaSetDevice(0);
    test_numa();
    test_host_drop();
    test_populate();
    test_failed_transfer();
    test_drift();
    printf("# %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
