/* test_sim.c — the sim backend: its clock and copy-engine model with exact
 * times, events, faults, real byte movement with poison and protection,
 * capacity, determinism and thread safety, a protection change failing part-way (injected), and a
 * store racing an eviction in PROTECT mode.
 * Threading: the runner is single-threaded; test_threads and test_evict_race start their own (the
 * latter with a SIGSEGV handler of its own while it runs). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/core.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define GRAIN HOFF__MANAGED_GRAIN
/* 2 MiB at 2 GB/s plus 1000 ns of latency. */
#define LAT 1000u
#define D2MB ((uint64_t)(2 * MiB) / 2 + LAT) /* 1049576 */

static void cfg_base(struct hoff_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->version = HOFF_CONFIG_VERSION;
    cfg->size = sizeof *cfg;
    cfg->backend = HOFF_BACKEND_SIM;
    cfg->sim_device_bytes = 64 * MiB;
    cfg->sim_h2d_gbps = 2.0;
    cfg->sim_d2h_gbps = 2.0;
    cfg->sim_latency_ns = LAT;
    cfg->sim_fault_gbps = 1.0;
    cfg->sim_fault_ns = 20000;
    cfg->sim_protect = HOFF_SIM_POISON;
}

static struct hoff__backend *open_cfg(const struct hoff_config *cfg) {
    struct hoff__backend *be = NULL;

    CU_ASSERT_EQUAL_FATAL(hoff__backend_open_sim(cfg, &be), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(be);
    return be;
}

static struct hoff__backend *open_default(void) {
    struct hoff_config cfg;

    cfg_base(&cfg);
    return open_cfg(&cfg);
}

static struct hoff__sim_counters ctr(struct hoff__backend *be) {
    struct hoff__sim_counters c;

    CU_ASSERT_EQUAL(hoff__sim_counters(be, &c), 0);
    return c;
}

static void *managed(struct hoff__backend *be, size_t size) {
    void *p = NULL;

    CU_ASSERT_EQUAL_FATAL(be->ops->managed_alloc(be, size, &p), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

static hoff__event *event(struct hoff__backend *be) {
    hoff__event *ev = NULL;

    CU_ASSERT_EQUAL_FATAL(be->ops->event_create(be, &ev), 0);
    return ev;
}

static int all_poison(const void *p, size_t n) {
    const unsigned char *b = p;
    size_t i;

    for (i = 0; i < n; i++)
        if (b[i] != 0xDB)
            return 0;
    return 1;
}

/* --- tests -------------------------------------------------------------- */

static void test_open(void) {
    struct hoff_config cfg;
    struct hoff__backend *be = NULL, fake = {0};
    struct hoff__sim_counters c;
    double zero = 0.0;

    CU_ASSERT_EQUAL(hoff__backend_open_sim(NULL, &be), -EINVAL);
    cfg_base(&cfg);
    cfg.sim_device_bytes = 0;
    CU_ASSERT_EQUAL(hoff__backend_open_sim(&cfg, &be), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_SIM_DEVICE"));
    cfg_base(&cfg);
    cfg.sim_h2d_gbps = 0;
    CU_ASSERT_EQUAL(hoff__backend_open_sim(&cfg, &be), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_SIM_H2D_GBPS"));
    cfg_base(&cfg);
    cfg.sim_d2h_gbps = zero / zero; /* NaN */
    CU_ASSERT_EQUAL(hoff__backend_open_sim(&cfg, &be), -EINVAL);
    cfg_base(&cfg);
    cfg.sim_fault_gbps = -1;
    CU_ASSERT_EQUAL(hoff__backend_open_sim(&cfg, &be), -EINVAL);
    cfg_base(&cfg);
    cfg.sim_protect = 2;
    CU_ASSERT_EQUAL(hoff__backend_open_sim(&cfg, &be), -EINVAL);
    CU_ASSERT_PTR_NULL(be);

    be = open_default();
    CU_ASSERT_STRING_EQUAL(be->ops->name, "sim");
    c = ctr(be);
    CU_ASSERT_EQUAL(c.now_ns, 0);
    CU_ASSERT_EQUAL(c.device_used, 0);
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 123), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), 123);

    /* Not a sim backend: -ENOTSUP and zeros. */
    memset(&c, 0xff, sizeof c);
    fake.ops = NULL;
    CU_ASSERT_EQUAL(hoff__sim_counters(&fake, &c), -ENOTSUP);
    CU_ASSERT_EQUAL(c.now_ns, 0);
    CU_ASSERT_EQUAL(c.over_capacity, 0);
    be->ops->close(be);
}

static void test_bandwidth(void) {
    struct hoff_config cfg;
    struct hoff__backend *be;
    struct hoff__sim_counters c;
    hoff__event *done, *done2;
    void *a;

    cfg_base(&cfg);
    cfg.sim_h2d_gbps = 4.0; /* H2D is faster: each direction uses its own rate */
    be = open_cfg(&cfg);
    a = managed(be, 2 * MiB);
    done = event(be);
    done2 = event(be);

    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, done), 0);
    c = ctr(be);
    CU_ASSERT_EQUAL(c.d2h_busy_until, 1049576); /* 1000 + 2 MiB / 2 GB/s */
    CU_ASSERT_EQUAL(c.h2d_busy_until, 0);
    CU_ASSERT_EQUAL(c.bytes_d2h, 2 * MiB);
    CU_ASSERT_EQUAL(c.now_ns, 0); /* issuing a transfer takes no compute time */
    CU_ASSERT_EQUAL(be->ops->event_query(be, done), -EAGAIN);
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 500000), 0);
    CU_ASSERT_EQUAL(be->ops->event_query(be, done), -EAGAIN);
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 549575), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), 1049575);
    CU_ASSERT_EQUAL(be->ops->event_query(be, done), -EAGAIN);
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 1), 0);
    CU_ASSERT_EQUAL(be->ops->event_query(be, done), 0);
    CU_ASSERT_EQUAL(ctr(be).wait_stall_ns, 0);

    /* H2D at 4 GB/s, issued at 1049576: 1000 + 524288. */
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, NULL, done2), 0);
    CU_ASSERT_EQUAL(ctr(be).h2d_busy_until, 1049576 + 525288);
    CU_ASSERT_EQUAL(be->ops->event_sync(be, done2), 0);
    c = ctr(be);
    CU_ASSERT_EQUAL(c.now_ns, 1574864);
    CU_ASSERT_EQUAL(c.wait_stall_ns, 525288);
    CU_ASSERT_EQUAL(c.bytes_h2d, 2 * MiB);
    be->ops->event_destroy(be, done);
    be->ops->event_destroy(be, done2);
    be->ops->close(be);

    /* A rate that does not divide: 2 MiB / 3 GB/s = 699050.67 -> 699051. */
    cfg_base(&cfg);
    cfg.sim_d2h_gbps = 3.0;
    cfg.sim_latency_ns = 0;
    be = open_cfg(&cfg);
    a = managed(be, 2 * MiB);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).d2h_busy_until, 699051);
    CU_ASSERT_EQUAL(be->ops->sync(be), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), 699051);
    CU_ASSERT_EQUAL(ctr(be).wait_stall_ns, 699051);
    be->ops->close(be);
}

static void test_engines(void) {
    struct hoff__backend *be = open_default();
    hoff__event *ea = event(be), *eb = event(be), *ec = event(be);
    void *a = managed(be, 2 * MiB), *b = managed(be, 2 * MiB), *c = managed(be, 2 * MiB);
    struct hoff__sim_counters k;
    const uint64_t D = D2MB;

    CU_ASSERT_EQUAL(be->ops->evict(be, b, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->sync(be), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), D);

    /* D2H and H2D run at the same time... */
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, ea), 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, b, 2 * MiB, NULL, eb), 0);
    /* ...while a second D2H waits for the first. */
    CU_ASSERT_EQUAL(be->ops->evict(be, c, 2 * MiB, NULL, ec), 0);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.h2d_busy_until, 2 * D);
    CU_ASSERT_EQUAL(k.d2h_busy_until, 3 * D);
    CU_ASSERT_EQUAL(be->ops->event_sync(be, eb), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), 2 * D);
    CU_ASSERT_EQUAL(be->ops->event_query(be, ea), 0);
    CU_ASSERT_EQUAL(be->ops->event_query(be, ec), -EAGAIN);
    CU_ASSERT_EQUAL(be->ops->sync(be), 0);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.now_ns, 3 * D);
    CU_ASSERT_EQUAL(k.wait_stall_ns, 3 * D);
    CU_ASSERT_EQUAL(be->ops->event_query(be, ec), 0);

    /* An engine idle for a while starts at now, not at its old busy_until. */
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 5000), 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, NULL, ea), 0);
    CU_ASSERT_EQUAL(ctr(be).h2d_busy_until, 3 * D + 5000 + D);
    be->ops->event_destroy(be, ea);
    be->ops->event_destroy(be, eb);
    be->ops->event_destroy(be, ec);
    be->ops->close(be);
}

static void test_after(void) {
    struct hoff__backend *be = open_default();
    hoff__event *ea = event(be), *eb = event(be), *past = event(be), *never = event(be);
    void *a = managed(be, 2 * MiB), *b = managed(be, 2 * MiB);
    const uint64_t D = D2MB;

    CU_ASSERT_EQUAL(be->ops->evict(be, b, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->sync(be), 0); /* now = D */

    /* The H2D engine is idle, but the prefetch waits for the eviction. */
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, ea), 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, b, 2 * MiB, ea, eb), 0);
    CU_ASSERT_EQUAL(ctr(be).d2h_busy_until, 2 * D);
    CU_ASSERT_EQUAL(ctr(be).h2d_busy_until, 3 * D);
    CU_ASSERT_EQUAL(be->ops->event_sync(be, eb), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), 3 * D);

    /* An "after" already passed, or never recorded, does not delay. */
    CU_ASSERT_EQUAL(be->ops->event_record(be, past, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 10), 0);
    CU_ASSERT_EQUAL(be->ops->evict(be, b, 2 * MiB, past, eb), 0);
    CU_ASSERT_EQUAL(ctr(be).d2h_busy_until, 4 * D + 10);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, never, ea), 0);
    CU_ASSERT_EQUAL(ctr(be).h2d_busy_until, 4 * D + 10);

    be->ops->event_destroy(be, ea);
    be->ops->event_destroy(be, eb);
    be->ops->event_destroy(be, past);
    be->ops->event_destroy(be, never);
    be->ops->close(be);
}

static void test_events(void) {
    struct hoff__backend *be = open_default();
    hoff__event *ev = event(be), *done = event(be);
    void *a = managed(be, 2 * MiB);
    hoff_stream s1 = (hoff_stream)(uintptr_t)1;
    const uint64_t D = D2MB;
    struct hoff__sim_counters k;

    /* Never recorded: complete, and waiting on it costs nothing. */
    CU_ASSERT_EQUAL(be->ops->event_query(be, ev), 0);
    CU_ASSERT_EQUAL(be->ops->event_sync(be, ev), 0);
    CU_ASSERT_EQUAL(be->ops->stream_wait(be, s1, ev), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), 0);
    /* Recorded on a stream: at now, so complete at once. */
    CU_ASSERT_EQUAL(be->ops->compute(be, s1, 100), 0);
    CU_ASSERT_EQUAL(be->ops->event_record(be, ev, s1), 0);
    CU_ASSERT_EQUAL(be->ops->event_query(be, ev), 0);

    /* stream_wait on a pending transfer: compute stalls until it ends. */
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, ev, done), 0);
    CU_ASSERT_EQUAL(be->ops->event_query(be, done), -EAGAIN);
    CU_ASSERT_EQUAL(be->ops->compute(be, s1, 1000), 0);
    CU_ASSERT_EQUAL(be->ops->stream_wait(be, s1, done), 0);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.now_ns, 100 + D);
    CU_ASSERT_EQUAL(k.wait_stall_ns, D - 1000);
    CU_ASSERT_EQUAL(be->ops->event_query(be, done), 0);
    /* Waiting again, or on a past event, changes nothing. */
    CU_ASSERT_EQUAL(be->ops->stream_wait(be, NULL, done), 0);
    CU_ASSERT_EQUAL(be->ops->event_sync(be, ev), 0);
    CU_ASSERT_EQUAL(be->ops->sync(be), 0);
    CU_ASSERT_EQUAL(ctr(be).now_ns, 100 + D);
    CU_ASSERT_EQUAL(ctr(be).wait_stall_ns, D - 1000);

    /* event_sync on a pending transfer. */
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, NULL, done), 0);
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 49), 0);
    CU_ASSERT_EQUAL(be->ops->event_sync(be, done), 0);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.now_ns, 100 + 2 * D);
    CU_ASSERT_EQUAL(k.wait_stall_ns, 2 * D - 1000 - 49);
    /* Re-recording moves the event to now. */
    CU_ASSERT_EQUAL(be->ops->compute(be, NULL, 7), 0);
    CU_ASSERT_EQUAL(be->ops->event_record(be, done, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->event_query(be, done), 0);
    CU_ASSERT_EQUAL(be->ops->event_record(be, NULL, NULL), -EINVAL);
    be->ops->event_destroy(be, ev);
    be->ops->event_destroy(be, done);
    be->ops->close(be);
}

static void test_fault(void) {
    struct hoff__backend *be = open_default();
    void *a = managed(be, 2 * MiB);
    struct hoff__sim_counters k;
    uint64_t stall = 99, t0;
    const uint64_t F = 20000 + 2 * MiB; /* fault_ns + 2 MiB / 1 GB/s */

    hoff_test_fill_rand(a, 2 * MiB, 7);
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 2 * MiB, NULL, &stall), 0);
    CU_ASSERT_EQUAL(stall, 0); /* resident: no fault */
    CU_ASSERT_EQUAL(ctr(be).faults, 0);

    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->sync(be), 0);
    t0 = be->ops->clock_ns(be);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 2 * MiB, NULL, &stall), 0);
    CU_ASSERT_EQUAL(stall, F);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.now_ns, t0 + F);
    CU_ASSERT_EQUAL(k.faults, 1);
    CU_ASSERT_EQUAL(k.bytes_faulted, 2 * MiB);
    CU_ASSERT_EQUAL(k.fault_stall_ns, F);
    CU_ASSERT_EQUAL(k.device_used, 2 * MiB);
    CU_ASSERT_EQUAL(k.bytes_h2d, 0); /* not a copy-engine transfer */
    CU_ASSERT(hoff_test_rand_ok(a, 2 * MiB, 7));
    /* Paged in: a second use is free, and prefetch finds it resident. */
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 2 * MiB, NULL, &stall), 0);
    CU_ASSERT_EQUAL(stall, 0);
    CU_ASSERT_EQUAL(ctr(be).faults, 1);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, NULL, NULL), -EALREADY);

    /* A discarded mapping has nothing to move: fault_ns only. */
    CU_ASSERT_EQUAL(be->ops->discard(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 2 * MiB, NULL, NULL), 0);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.faults, 2);
    CU_ASSERT_EQUAL(k.fault_stall_ns, F + 20000);
    CU_ASSERT_EQUAL(k.bytes_faulted, 2 * MiB);
    CU_ASSERT(all_poison(a, 2 * MiB));

    CU_ASSERT_EQUAL(be->ops->fault(be, (char *)a + GRAIN * 64, 2 * MiB, NULL, &stall), -EINVAL);
    CU_ASSERT_EQUAL(stall, 0);
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 4 * MiB, NULL, &stall), -EINVAL);
    be->ops->close(be);
}

static void test_bytes_move(void) {
    struct hoff__backend *be = open_default();
    unsigned char *a = managed(be, 4 * MiB), *host = malloc(4 * MiB);

    CU_ASSERT_PTR_NOT_NULL_FATAL(host);
    CU_ASSERT_EQUAL((uintptr_t)a % GRAIN, 0);
    hoff_test_fill_rand(a, 4 * MiB, 42);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT(all_poison(a, 4 * MiB));
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * MiB, NULL, NULL), -EALREADY);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT(hoff_test_rand_ok(a, 4 * MiB, 42));

    /* A second round trip carries new contents (the shadow is reused). */
    hoff_test_fill_rand(a, 4 * MiB, 43);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT(all_poison(a, 4 * MiB));
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->memcpy(be, host, a, 4 * MiB), 0);
    CU_ASSERT(hoff_test_rand_ok(host, 4 * MiB, 43));
    hoff_test_fill_rand(host, 4 * MiB, 44);
    CU_ASSERT_EQUAL(be->ops->memcpy(be, a, host, 4 * MiB), 0);
    CU_ASSERT(hoff_test_rand_ok(a, 4 * MiB, 44));
    CU_ASSERT_EQUAL(be->ops->memcpy(be, NULL, host, 8), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->memcpy(be, NULL, NULL, 0), 0);

    CU_ASSERT_EQUAL(ctr(be).bytes_d2h, 8 * MiB);
    CU_ASSERT_EQUAL(ctr(be).bytes_h2d, 8 * MiB);
    CU_ASSERT_EQUAL(be->ops->managed_free(be, a, 4 * MiB), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    free(host);
    be->ops->close(be);
}

static void test_discard(void) {
    struct hoff__backend *be = open_default();
    unsigned char *a = managed(be, 2 * MiB);
    hoff__event *done = event(be);
    struct hoff__sim_counters k;
    uint64_t t;

    hoff_test_fill_rand(a, 2 * MiB, 5);
    CU_ASSERT_EQUAL(be->ops->discard(be, a, 2 * MiB, NULL, done), 0);
    CU_ASSERT(all_poison(a, 2 * MiB));
    k = ctr(be);
    CU_ASSERT_EQUAL(k.device_used, 0);
    CU_ASSERT_EQUAL(k.bytes_d2h, 0);
    CU_ASSERT_EQUAL(k.d2h_busy_until, LAT); /* latency only */
    CU_ASSERT_EQUAL(be->ops->discard(be, a, 2 * MiB, NULL, NULL), -EALREADY);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), -EALREADY);
    /* Coming back there is nothing to copy: the bytes stay undefined. */
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, NULL, done), 0);
    CU_ASSERT(all_poison(a, 2 * MiB));
    k = ctr(be);
    CU_ASSERT_EQUAL(k.bytes_h2d, 0);
    CU_ASSERT_EQUAL(k.h2d_busy_until, LAT);
    CU_ASSERT_EQUAL(k.device_used, 2 * MiB);

    /* Discarding an evicted mapping drops the host copy too. */
    hoff_test_fill_rand(a, 2 * MiB, 6);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->discard(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT(all_poison(a, 2 * MiB));

    /* populate: resident again at once, at no time cost, contents undefined. */
    hoff_test_fill_rand(a, 2 * MiB, 8);
    CU_ASSERT_EQUAL(be->ops->discard(be, a, 2 * MiB, NULL, NULL), 0);
    t = be->ops->clock_ns(be);
    CU_ASSERT_EQUAL(be->ops->populate(be, a, 2 * MiB, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->clock_ns(be), t);
    CU_ASSERT_EQUAL(ctr(be).device_used, 2 * MiB);
    CU_ASSERT(all_poison(a, 2 * MiB));
    CU_ASSERT_EQUAL(be->ops->populate(be, a, 2 * MiB, NULL), 0); /* resident: no-op */
    CU_ASSERT_EQUAL(ctr(be).device_used, 2 * MiB);
    hoff_test_fill_rand(a, 2 * MiB, 9);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->populate(be, a, 2 * MiB, NULL), 0);
    CU_ASSERT(all_poison(a, 2 * MiB));
    CU_ASSERT_EQUAL(ctr(be).faults, 0);
    be->ops->event_destroy(be, done);
    be->ops->close(be);
}

static void segv_exit(int sig) {
    _exit(42);
}

/* Run a read of p in a child: 42 when it faulted, 0 when it read fine. */
static int child_reads(const volatile unsigned char *p) {
    pid_t pid;
    int status = 0;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        struct sigaction sa;

        memset(&sa, 0, sizeof sa);
        sa.sa_handler = segv_exit;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        (void)p[0];
        (void)p[12345];
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    if (WIFSIGNALED(status))
        return WTERMSIG(status) == SIGSEGV ? 42 : -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_protect(void) {
    struct hoff_config cfg;
    struct hoff__backend *be;
    unsigned char *a, *b;
    uint64_t stall;

    cfg_base(&cfg);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    be = open_cfg(&cfg);
    a = managed(be, 2 * MiB);
    b = managed(be, 2 * MiB);
    hoff_test_fill_rand(a, 2 * MiB, 11);
    hoff_test_fill_rand(b, 2 * MiB, 12);
    CU_ASSERT_EQUAL(child_reads(a), 0);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(child_reads(a), 42);
    CU_ASSERT_EQUAL(child_reads(b), 0); /* the neighbour stays usable */
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(child_reads(a), 0);
    CU_ASSERT(hoff_test_rand_ok(a, 2 * MiB, 11));

    CU_ASSERT_EQUAL(be->ops->discard(be, b, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(child_reads(b), 42);
    CU_ASSERT_EQUAL(be->ops->populate(be, b, 2 * MiB, NULL), 0);
    CU_ASSERT_EQUAL(child_reads(b), 0);
    CU_ASSERT(all_poison(b, 2 * MiB));

    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(child_reads(a), 42);
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 2 * MiB, NULL, &stall), 0);
    CU_ASSERT(stall > 0);
    CU_ASSERT(hoff_test_rand_ok(a, 2 * MiB, 11));
    /* Freeing and closing work on protected mappings too. */
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 2 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->managed_free(be, a, 2 * MiB), 0);
    CU_ASSERT_EQUAL(be->ops->evict(be, b, 2 * MiB, NULL, NULL), 0);
    be->ops->close(be);
}

/* A protection change that fails part-way through a range (mprotect's ENOMEM at vm.max_map_count,
 * injected): the call fails, and the pages it already moved are booked as moved, so device_used stays
 * the bytes resident and later moves balance.  The counts name the mprotect calls of PROTECT mode:
 * evict makes two per page (read-only, then none), prefetch and fault of an evicted page two (read-only, then
 * writable), populate one, discard one to hide a page (and one before, to show an evicted one). */
static void test_protect_fail(void) {
    struct hoff_config cfg;
    struct hoff__backend *be;
    struct hoff__sim_counters k;
    unsigned char *a;
    uint64_t stall = 0;
    const uint64_t F2 = 20000 + 2 * GRAIN; /* fault_ns + 2 pages at 1 GB/s */

    cfg_base(&cfg);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    be = open_cfg(&cfg);
    a = managed(be, 4 * GRAIN);
    hoff_test_fill_rand(a, 4 * GRAIN, 21);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * GRAIN, NULL, NULL), 0);

    /* fault: the third page cannot be shown; the first two are back, and booked */
    CU_ASSERT_EQUAL(hoff__sim_test_fail_protect(be, 5, 1), 0);
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 4 * GRAIN, NULL, &stall), -ENOMEM);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.device_used, 2 * GRAIN);
    CU_ASSERT_EQUAL(k.faults, 1);
    CU_ASSERT_EQUAL(k.bytes_faulted, 2 * GRAIN);
    CU_ASSERT_EQUAL(k.fault_stall_ns, F2);
    CU_ASSERT_EQUAL(stall, F2);
    CU_ASSERT(hoff_test_rand_ok(a, 2 * GRAIN, 21));
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 4 * GRAIN, NULL, &stall), 0); /* the other two */
    k = ctr(be);
    CU_ASSERT_EQUAL(k.device_used, 4 * GRAIN);
    CU_ASSERT_EQUAL(k.bytes_faulted, 4 * GRAIN);
    CU_ASSERT(hoff_test_rand_ok(a, 4 * GRAIN, 21));

    /* evict: page 1 cannot be hidden; it and page 0 are shown again, nothing moved */
    CU_ASSERT_EQUAL(hoff__sim_test_fail_protect(be, 4, 1), 0);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * GRAIN, NULL, NULL), -ENOMEM);
    CU_ASSERT_EQUAL(ctr(be).device_used, 4 * GRAIN);
    CU_ASSERT_EQUAL(child_reads(a), 0);
    CU_ASSERT_EQUAL(child_reads(a + GRAIN), 0);
    /* ... and where showing them fails too, the two stay away (their bytes in the shadow) and are
     * booked as evicted: a fault brings them back */
    CU_ASSERT_EQUAL(hoff__sim_test_fail_protect(be, 4, 3), 0);
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * GRAIN, NULL, NULL), -ENOMEM);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.device_used, 2 * GRAIN);
    CU_ASSERT_EQUAL(k.bytes_d2h, 4 * GRAIN + 2 * GRAIN);
    CU_ASSERT_EQUAL(child_reads(a), 42);
    CU_ASSERT_EQUAL(child_reads(a + 2 * GRAIN), 0);
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 4 * GRAIN, NULL, &stall), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 4 * GRAIN);
    CU_ASSERT(hoff_test_rand_ok(a, 4 * GRAIN, 21));

    /* prefetch: the second page cannot be shown; the first is back, and booked */
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * GRAIN, NULL, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    k = ctr(be);
    CU_ASSERT_EQUAL(hoff__sim_test_fail_protect(be, 3, 1), 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 4 * GRAIN, NULL, NULL), -ENOMEM);
    CU_ASSERT_EQUAL(ctr(be).device_used, GRAIN);
    CU_ASSERT_EQUAL(ctr(be).bytes_h2d, k.bytes_h2d + GRAIN);
    CU_ASSERT(hoff_test_rand_ok(a, GRAIN, 21));
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 4 * GRAIN, NULL, &stall), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 4 * GRAIN);
    CU_ASSERT(hoff_test_rand_ok(a, 4 * GRAIN, 21));
    /* evict and prefetch balance afterwards */
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * GRAIN, NULL, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 4 * GRAIN, NULL, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 4 * GRAIN);
    CU_ASSERT(hoff_test_rand_ok(a, 4 * GRAIN, 21));

    /* discard of an evicted range: page 0 shown, then cannot be hidden: in view, so booked resident */
    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * GRAIN, NULL, NULL), 0);
    CU_ASSERT_EQUAL(hoff__sim_test_fail_protect(be, 2, 1), 0);
    CU_ASSERT_EQUAL(be->ops->discard(be, a, 4 * GRAIN, NULL, NULL), -ENOMEM);
    CU_ASSERT_EQUAL(ctr(be).device_used, GRAIN);
    CU_ASSERT_EQUAL(child_reads(a), 0);
    CU_ASSERT_EQUAL(be->ops->discard(be, a, 4 * GRAIN, NULL, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    /* populate: the third page cannot be shown; the first two are resident */
    CU_ASSERT_EQUAL(hoff__sim_test_fail_protect(be, 3, 1), 0);
    CU_ASSERT_EQUAL(be->ops->populate(be, a, 4 * GRAIN, NULL), -ENOMEM);
    CU_ASSERT_EQUAL(ctr(be).device_used, 2 * GRAIN);
    CU_ASSERT_EQUAL(be->ops->populate(be, a, 4 * GRAIN, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 4 * GRAIN);
    CU_ASSERT_EQUAL(ctr(be).over_capacity, 0);

    CU_ASSERT_EQUAL(hoff__sim_test_fail_protect(NULL, 1, 1), -ENOTSUP);
    CU_ASSERT_EQUAL(be->ops->managed_free(be, a, 4 * GRAIN), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    be->ops->close(be);
}

static void test_capacity(void) {
    struct hoff_config cfg;
    struct hoff__backend *be;
    void *d1 = NULL, *d2 = NULL, *m = NULL, *x = (void *)1;
    uint64_t fr, tot;
    struct hoff__sim_counters k;

    cfg_base(&cfg);
    cfg.sim_device_bytes = 8 * MiB;
    be = open_cfg(&cfg);
    CU_ASSERT_EQUAL(be->ops->mem_info(be, &fr, &tot), 0);
    CU_ASSERT_EQUAL(fr, 8 * MiB);
    CU_ASSERT_EQUAL(tot, 8 * MiB);
    CU_ASSERT_EQUAL(be->ops->dev_alloc(be, 4 * MiB, &d1), 0);
    CU_ASSERT_EQUAL((uintptr_t)d1 % HOFF__DEVICE_GRAIN, 0);
    CU_ASSERT_EQUAL(be->ops->managed_alloc(be, 4 * MiB, &m), 0);
    CU_ASSERT_EQUAL((uintptr_t)m % GRAIN, 0);
    CU_ASSERT_EQUAL(be->ops->mem_info(be, &fr, &tot), 0);
    CU_ASSERT_EQUAL(fr, 0);
    CU_ASSERT_EQUAL(be->ops->managed_alloc(be, 2 * MiB, &x), -ENOMEM);
    CU_ASSERT_PTR_NULL(x);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "exhausted"));
    CU_ASSERT_EQUAL(be->ops->dev_alloc(be, 512, &x), -ENOMEM);

    /* An eviction frees device memory; bringing it back may overshoot. */
    CU_ASSERT_EQUAL(be->ops->evict(be, m, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->mem_info(be, &fr, NULL), 0);
    CU_ASSERT_EQUAL(fr, 4 * MiB);
    CU_ASSERT_EQUAL(be->ops->dev_alloc(be, 2 * MiB, &d2), 0);
    CU_ASSERT_EQUAL(ctr(be).over_capacity, 0);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, m, 4 * MiB, NULL, NULL), 0);
    k = ctr(be);
    CU_ASSERT_EQUAL(k.device_used, 10 * MiB);
    CU_ASSERT_EQUAL(k.peak_device_used, 10 * MiB);
    CU_ASSERT_EQUAL(k.over_capacity, 1);
    CU_ASSERT_EQUAL(be->ops->mem_info(be, &fr, &tot), 0);
    CU_ASSERT_EQUAL(fr, 0);
    CU_ASSERT_EQUAL(tot, 8 * MiB);
    CU_ASSERT_EQUAL(be->ops->evict(be, m, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(be->ops->fault(be, m, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL(ctr(be).over_capacity, 2);

    /* Wrong sizes and pointers. */
    CU_ASSERT_EQUAL(be->ops->dev_alloc(be, 0, &x), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->dev_alloc(be, 100, &x), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->managed_alloc(be, MiB, &x), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->dev_free(be, d2, 512), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->dev_free(be, m, 4 * MiB), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->managed_free(be, d2, 2 * MiB), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->managed_free(be, m, 2 * MiB), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->evict(be, d1, 4 * MiB, NULL, NULL), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->evict(be, NULL, 4 * MiB, NULL, NULL), -EINVAL);
    /* a range inside a mapping is whole 2 MiB pages of it */
    CU_ASSERT_EQUAL(be->ops->discard(be, (char *)m + 4096, 2 * MiB, NULL, NULL), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->discard(be, (char *)m + GRAIN, 4 * MiB, NULL, NULL), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->discard(be, (char *)m + GRAIN, 0, NULL, NULL), -EINVAL);

    CU_ASSERT_EQUAL(be->ops->dev_free(be, d2, 2 * MiB), 0);
    CU_ASSERT_EQUAL(be->ops->dev_free(be, d2, 2 * MiB), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->managed_free(be, m, 4 * MiB), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 4 * MiB);
    CU_ASSERT_EQUAL(be->ops->dev_free(be, d1, 4 * MiB), 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    CU_ASSERT_EQUAL(ctr(be).peak_device_used, 10 * MiB);
    be->ops->close(be);
}

/* Many mappings: the table grows, every one is found, close frees leftovers. */
static void test_many(void) {
    struct hoff_config cfg;
    struct hoff__backend *be;
    enum { N = 300 };
    void **m = calloc(N, sizeof *m), **d = calloc(N, sizeof *d);
    int i;

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    cfg_base(&cfg);
    cfg.sim_device_bytes = (uint64_t)N * (GRAIN + 1024);
    be = open_cfg(&cfg);
    for (i = 0; i < N; i++) {
        m[i] = managed(be, GRAIN);
        CU_ASSERT_EQUAL_FATAL(be->ops->dev_alloc(be, 1024, &d[i]), 0);
    }
    CU_ASSERT_EQUAL(ctr(be).device_used, (uint64_t)N * (GRAIN + 1024));
    for (i = 0; i < N; i += 2) {
        CU_ASSERT_EQUAL(be->ops->managed_free(be, m[i], 2 * GRAIN), -EINVAL);
        CU_ASSERT_EQUAL(be->ops->managed_free(be, m[i], GRAIN), 0);
        CU_ASSERT_EQUAL(be->ops->dev_free(be, d[i], 1024), 0);
    }
    CU_ASSERT_EQUAL(ctr(be).device_used, (uint64_t)(N / 2) * (GRAIN + 1024));
    for (i = 1; i < N; i += 2)
        CU_ASSERT_EQUAL(be->ops->populate(be, m[i], GRAIN, NULL), 0);
    be->ops->close(be); /* the odd ones are released here (ASan checks) */
    free(m);
    free(d);
}

/* One scripted run: its counters and a fold of every result and event time. */
static void script(uint64_t seed, struct hoff__sim_counters *out, uint64_t *fold) {
    struct hoff__backend *be = open_default();
    enum { N = 6 };
    void *m[N];
    hoff__event *ev[N];
    uint64_t st = seed, h = 1469598103934665603ull, stall;
    int i, rc = 0;

    for (i = 0; i < N; i++) {
        m[i] = managed(be, GRAIN);
        ev[i] = event(be);
    }
    for (i = 0; i < 150; i++) {
        uint64_t r = hoff_test_rand(&st);
        int j = (int)(r % N), k = (int)((r >> 8) % N);

        switch ((r >> 16) % 8) {
        case 0: rc = be->ops->compute(be, NULL, (r >> 24) % 300000); break;
        case 1: rc = be->ops->evict(be, m[j], GRAIN, ev[k], ev[j]); break;
        case 2: rc = be->ops->prefetch(be, m[j], GRAIN, ev[k], ev[j]); break;
        case 3: rc = be->ops->discard(be, m[j], GRAIN, NULL, ev[j]); break;
        case 4:
            rc = be->ops->fault(be, m[j], GRAIN, NULL, &stall);
            h = (h ^ stall) * 1099511628211ull;
            break;
        case 5: rc = be->ops->event_sync(be, ev[j]); break;
        case 6: rc = be->ops->stream_wait(be, NULL, ev[j]); break;
        default: rc = be->ops->event_query(be, ev[j]); break;
        }
        h = (h ^ (uint64_t)(int64_t)rc) * 1099511628211ull;
        h = (h ^ be->ops->clock_ns(be)) * 1099511628211ull;
    }
    CU_ASSERT_EQUAL(be->ops->sync(be), 0);
    CU_ASSERT_EQUAL(hoff__sim_counters(be, out), 0);
    for (i = 0; i < N; i++)
        be->ops->event_destroy(be, ev[i]);
    be->ops->close(be);
    *fold = h;
}

static void test_determinism(void) {
    struct hoff__sim_counters a, b, c;
    uint64_t ha, hb, hc;

    script(1234, &a, &ha);
    script(1234, &b, &hb);
    script(99, &c, &hc);
    CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
    CU_ASSERT_EQUAL(ha, hb);
    CU_ASSERT(a.now_ns > 0 && a.bytes_d2h > 0 && a.faults > 0);
    /* A different script gives a different history (the check can fail). */
    CU_ASSERT(ha != hc || memcmp(&a, &c, sizeof a) != 0);
}

/* --- threads ------------------------------------------------------------ */

enum { NTHREADS = 4, PER_THREAD = 3, ROUNDS = 20 };

struct worker {
    struct hoff__backend *be;
    int id;
    uint64_t evicts, faults, errors;
};

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct hoff__backend *be = w->be;
    void *m[PER_THREAD];
    uint64_t seed[PER_THREAD], st = 1000 + (uint64_t)w->id, stall;
    hoff__event *ev = NULL;
    int i, r;

    if (be->ops->event_create(be, &ev))
        w->errors++;
    for (i = 0; i < PER_THREAD; i++) {
        if (be->ops->managed_alloc(be, GRAIN, &m[i])) {
            w->errors++;
            return NULL;
        }
        seed[i] = (uint64_t)w->id * 100 + (uint64_t)i + 1;
        hoff_test_fill_rand(m[i], GRAIN, seed[i]);
    }
    for (r = 0; r < ROUNDS; r++) {
        uint64_t x = hoff_test_rand(&st);
        int j = (int)(x % PER_THREAD);

        be->ops->compute(be, (hoff_stream)(uintptr_t)(w->id + 1), x % 5000);
        if (be->ops->evict(be, m[j], GRAIN, NULL, ev))
            w->errors++;
        w->evicts++;
        if (be->ops->event_query(be, ev) < -EAGAIN)
            w->errors++;
        switch ((x >> 8) % 3) {
        case 0:
            if (be->ops->prefetch(be, m[j], GRAIN, ev, ev) || be->ops->stream_wait(be, NULL, ev))
                w->errors++;
            break;
        case 1:
            if (be->ops->fault(be, m[j], GRAIN, NULL, &stall) || stall == 0)
                w->errors++;
            w->faults++;
            break;
        default:
            if (be->ops->discard(be, m[j], GRAIN, NULL, NULL) || be->ops->populate(be, m[j], GRAIN, NULL))
                w->errors++;
            seed[j] += 1000;
            hoff_test_fill_rand(m[j], GRAIN, seed[j]);
            break;
        }
        for (i = 0; i < PER_THREAD; i++)
            if (!hoff_test_rand_ok(m[i], GRAIN, seed[i]))
                w->errors++;
    }
    be->ops->event_destroy(be, ev);
    /* Leave the mappings to close(), except the first. */
    if (be->ops->managed_free(be, m[0], GRAIN))
        w->errors++;
    return NULL;
}

static void test_threads(void) {
    struct hoff_config cfg;
    struct hoff__backend *be;
    struct worker w[NTHREADS];
    pthread_t th[NTHREADS];
    struct hoff__sim_counters k;
    uint64_t evicts = 0, faults = 0;
    int i;

    cfg_base(&cfg);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    be = open_cfg(&cfg);
    for (i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){.be = be, .id = i};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(w[i].errors, 0);
        evicts += w[i].evicts;
        faults += w[i].faults;
    }
    k = ctr(be);
    CU_ASSERT_EQUAL(k.bytes_d2h, evicts * GRAIN);
    CU_ASSERT_EQUAL(k.faults, faults);
    CU_ASSERT_EQUAL(k.bytes_faulted, faults * GRAIN);
    CU_ASSERT_EQUAL(k.device_used, (uint64_t)NTHREADS * (PER_THREAD - 1) * GRAIN);
    CU_ASSERT(k.peak_device_used <= (uint64_t)NTHREADS * PER_THREAD * GRAIN);
    be->ops->close(be);
}

/* The tiers' host copies: host_bytes reads an evicted range's shadow, host_drop gives it up (spilled:
 * the range can then come back neither by prefetch nor by fault, -EIO), host_make gives a place to
 * restore into, after which it comes back with the restored bytes.  Only evicted ranges have a host
 * copy (-EINVAL otherwise).  Each error names the op. */
static void test_host_copy(void) {
    struct hoff__backend *be = open_default();
    unsigned char *a = managed(be, 4 * MiB), *save = malloc(4 * MiB);
    void *host = NULL;
    uint64_t stall = 99;

    CU_ASSERT_PTR_NOT_NULL_FATAL(save);
    hoff_test_fill_rand(a, 4 * MiB, 11);
    CU_ASSERT_EQUAL(be->ops->host_bytes(be, a, 4 * MiB, &host), -EINVAL); /* resident */
    CU_ASSERT_EQUAL(be->ops->host_drop(be, a, 4 * MiB), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "host_drop: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "is not evicted"));
    CU_ASSERT_EQUAL(be->ops->host_make(be, a, 4 * MiB, &host), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "host_make: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "is not evicted"));

    CU_ASSERT_EQUAL(be->ops->evict(be, a, 4 * MiB, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(be->ops->host_bytes(be, a, 4 * MiB, &host), 0);
    CU_ASSERT(hoff_test_rand_ok(host, 4 * MiB, 11));
    memcpy(save, host, 4 * MiB); /* the NVMe tier's copy */
    /* The second page alone: spilled, so the whole range cannot come back. */
    CU_ASSERT_EQUAL(be->ops->host_drop(be, a + GRAIN, GRAIN), 0);
    CU_ASSERT_EQUAL(be->ops->host_bytes(be, a, 4 * MiB, &host), -EINVAL);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a, 4 * MiB, NULL, NULL), -EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "prefetch: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "has no host copy"));
    CU_ASSERT_EQUAL(be->ops->fault(be, a, 4 * MiB, NULL, &stall), -EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "fault: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "has no host copy"));
    CU_ASSERT_EQUAL(stall, 0);
    CU_ASSERT_EQUAL(ctr(be).faults, 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 0);
    /* The first page still has its copy: it comes back alone, by fault. */
    CU_ASSERT_EQUAL(be->ops->fault(be, a, GRAIN, NULL, &stall), 0);
    CU_ASSERT(hoff_test_rand_ok(a, GRAIN, 11));
    CU_ASSERT_EQUAL(ctr(be).device_used, GRAIN);

    /* Restored into host_make's place, the second page comes back by prefetch. */
    CU_ASSERT_EQUAL_FATAL(be->ops->host_make(be, a + GRAIN, GRAIN, &host), 0);
    memcpy(host, save + GRAIN, GRAIN);
    CU_ASSERT_EQUAL(be->ops->prefetch(be, a + GRAIN, GRAIN, NULL, NULL), 0);
    CU_ASSERT(hoff_test_rand_ok(a, GRAIN, 11) && memcmp(a + GRAIN, save + GRAIN, GRAIN) == 0);
    CU_ASSERT_EQUAL(ctr(be).device_used, 2 * GRAIN);
    CU_ASSERT_EQUAL(ctr(be).bytes_h2d, GRAIN);
    free(save);
    be->ops->close(be);
}

/* --- the eviction race (PROTECT mode) -------------------------------------------------------------
 * A writer thread stores an incrementing value into every 8-byte slot of a 4-page block (each pass in a
 * scattered order, so that it meets every page at once), over and over,
 * while the main thread evicts the block and brings it back (prefetch, or a fault of the whole range when
 * the writer's own faults brought some pages back first).  A store to a page that is away faults: the
 * SIGSEGV handler hands the page to a pager thread, which pages it in with the backend's fault (as
 * hoff --sim's preload does with hoff_sim_touch), and waits; the store is then retried.  page_evict's
 * promise: no completed store is lost.  The writer records each value after storing it; after each round
 * every slot must hold at least the value recorded (values only grow: less is a lost store), and at
 * the end exactly the last one. */
#define RACE_PAGES 4
#define RACE_SLOTS (RACE_PAGES * GRAIN / 8)

static struct race {
    struct hoff__backend *be;
    volatile uint64_t *blk;
    uint64_t *mine; /* the writer's record: the last value stored in each slot */
    void *req;      /* the page a fault waits for (0: none), handler to pager */
    int started, stop, writer_done;
    uint64_t faults, fault_errors, passes;
} race;

static void race_segv(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr, base = (uintptr_t)race.blk;

    (void)uc;
    if (a < base || a >= base + RACE_PAGES * GRAIN) {
        signal(sig, SIG_DFL); /* not ours: die of it */
        return;
    }
    __atomic_store_n(&race.req, (void *)(base + (a - base) / GRAIN * GRAIN), __ATOMIC_RELEASE);
    while (__atomic_load_n(&race.req, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void *race_pager(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&race.writer_done, __ATOMIC_ACQUIRE)) {
        void *p = __atomic_load_n(&race.req, __ATOMIC_ACQUIRE);

        if (!p) {
            sched_yield();
            continue;
        }
        if (race.be->ops->fault(race.be, p, GRAIN, NULL, NULL) != 0)
            race.fault_errors++;
        __atomic_add_fetch(&race.faults, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&race.req, NULL, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *race_writer(void *arg) {
    uint64_t v = 0;
    size_t i, k;

    (void)arg;
    __atomic_store_n(&race.started, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&race.stop, __ATOMIC_ACQUIRE)) {
        v++;
        for (k = 0; k < RACE_SLOTS; k++) { /* every slot, in a scattered order: all the pages at once */
            i = (k * 0x9E3779B1u) & (RACE_SLOTS - 1);
            race.blk[i] = v;
            __atomic_store_n(&race.mine[i], v, __ATOMIC_RELEASE); /* after the store to the block */
        }
        race.passes++;
    }
    __atomic_store_n(&race.writer_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_evict_race(void) {
    struct hoff_config cfg;
    struct sigaction sa, old;
    pthread_t writer, pager;
    size_t i, lost = 0;
    int round, rc, errors = 0;
    double t0;

    cfg_base(&cfg);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    memset(&race, 0, sizeof race);
    race.be = open_cfg(&cfg);
    race.blk = managed(race.be, RACE_PAGES * GRAIN);
    race.mine = calloc(RACE_SLOTS, sizeof *race.mine);
    CU_ASSERT_PTR_NOT_NULL_FATAL(race.mine);
    memset((void *)race.blk, 0, RACE_PAGES * GRAIN);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = race_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CU_ASSERT_EQUAL_FATAL(sigaction(SIGSEGV, &sa, &old), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&pager, NULL, race_pager, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&writer, NULL, race_writer, NULL), 0);
    while (!__atomic_load_n(&race.started, __ATOMIC_ACQUIRE))
        sched_yield();
    /* 150 rounds, and more until the writer has faulted 20 times (a loaded machine), for at most 4 s */
    t0 = hoff_test_now_s();
    for (round = 0; round < 150 || (__atomic_load_n(&race.faults, __ATOMIC_RELAXED) < 20 && hoff_test_now_s() - t0 < 4);
         round++) {
        rc = race.be->ops->evict(race.be, (void *)race.blk, RACE_PAGES * GRAIN, NULL, NULL);
        errors += rc != 0;
        sched_yield();
        rc = race.be->ops->prefetch(race.be, (void *)race.blk, RACE_PAGES * GRAIN, NULL, NULL);
        if (rc == -EALREADY) /* the writer's faults brought pages back first: the rest by a fault */
            rc = race.be->ops->fault(race.be, (void *)race.blk, RACE_PAGES * GRAIN, NULL, NULL);
        errors += rc != 0;
        for (i = 0; i < RACE_SLOTS; i++) { /* the record first: the block's value was stored before it */
            uint64_t m = __atomic_load_n(&race.mine[i], __ATOMIC_ACQUIRE);

            lost += race.blk[i] < m;
        }
    }
    __atomic_store_n(&race.stop, 1, __ATOMIC_RELEASE);
    pthread_join(writer, NULL);
    pthread_join(pager, NULL);
    sigaction(SIGSEGV, &old, NULL);
    for (i = 0; i < RACE_SLOTS; i++)
        lost += race.blk[i] != race.mine[i];
    CU_ASSERT_EQUAL(errors, 0);
    CU_ASSERT_EQUAL(race.fault_errors, 0);
    CU_ASSERT_EQUAL(lost, 0);
    CU_ASSERT(race.faults > 0);
    CU_ASSERT(race.passes > 0);
    CU_ASSERT_EQUAL(ctr(race.be).device_used, RACE_PAGES * GRAIN);
    if (lost || !race.faults)
        fprintf(stderr, "evict_race: %zu lost stores seen, %llu faults, %llu passes\n", lost,
                (unsigned long long)race.faults, (unsigned long long)race.passes);
    free(race.mine);
    race.be->ops->close(race.be);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"open", test_open},
        {"bandwidth", test_bandwidth},
        {"engines", test_engines},
        {"after", test_after},
        {"events", test_events},
        {"fault", test_fault},
        {"bytes_move", test_bytes_move},
        {"discard", test_discard},
        {"host_copy", test_host_copy},
        {"protect", test_protect},
        {"protect_fail", test_protect_fail},
        {"capacity", test_capacity},
        {"many", test_many},
        {"determinism", test_determinism},
        {"threads", test_threads},
        {"evict_race", test_evict_race},
        {NULL, NULL},
    };

    return hoff_test_run("sim", tests);
}
