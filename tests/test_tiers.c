/* test_tiers.c — the host and NVMe tiers end to end on sim with a real spill file on disk: a trace whose
 * offload volume exceeds the host cap replays with the host tier never above it, the NVMe tier used, every
 * byte intact; and the online path (explicit evictions past the cap).  Single-threaded caller. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "core/context.h"
#include "hoff.h"
#include "mem/pool.h"
#include "tier/nvme.h"
#include "testutil.h"
#include "trace/drive.h"
#include "trace/synth.h"
#include "trace/trace.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static const char *dir; /* the spill directory (hoff_test_spill_dir) */

static hoff_ctx *open_ctx(uint64_t budget, uint64_t host_cap, int nvme) {
    struct hoff_config cfg;
    hoff_ctx *ctx = NULL;

    cfg = hoff_test_replay_config(16 * GiB, budget);
    cfg.sim_protect = HOFF_SIM_PROTECT;
    cfg.host_cap_bytes = host_cap;
    cfg.spill_chunk_bytes = 1 * MiB;
    if (nvme)
        snprintf(cfg.spill_dir, sizeof cfg.spill_dir, "%s", dir);
    ctx = hoff_test_open(&cfg);
    return ctx;
}

/* Planned: budget 25% and a host cap of 25% of the offload peak, so half
 * of what is evicted must go to NVMe at the worst point. */
static void test_planned_spills(void) {
    struct hoff__synth_opts so;
    struct hoff__trace t;
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    struct hoff_stats st;
    uint64_t peak, budget, cap;
    hoff_ctx *ctx;

    hoff__synth_defaults(&so);
    so.layers = 6;
    so.hidden = 512;
    so.seq = 2048;
    hoff__trace_init(&t);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_transformer(&t, &so), 0);
    peak = hoff__trace_offload_peak(&t, hoff__pool_block_bytes, NULL);
    budget = peak / 4;
    cap = peak / 4;
    ctx = open_ctx(budget, cap, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    memset(&o, 0, sizeof o);
    o.steps = 3;
    o.verify = 1;
    o.compute_scale = 1;
    memset(&r, 0, sizeof r);
    CU_ASSERT_EQUAL(hoff__trace_drive(ctx, &t, &o, &r), 0);
    st = hoff_test_stats(ctx);
    printf("\n    peak %.1f MiB, budget %.1f, host cap %.1f: resident peak %.1f, host peak %.1f, nvme peak %.1f, "
           "spilled %.1f, restored %.1f, crc errors %llu, integrity errors %llu\n",
           (double)peak / MiB, (double)budget / MiB, (double)cap / MiB, (double)st.peak_resident_bytes / MiB,
           (double)st.peak_host_bytes / MiB, (double)st.peak_nvme_bytes / MiB, (double)st.bytes_spilled / MiB,
           (double)st.bytes_restored / MiB, (unsigned long long)st.crc_errors, (unsigned long long)r.integrity_errors);
    CU_ASSERT_EQUAL(r.integrity_errors, 0);
    CU_ASSERT(st.peak_host_bytes <= cap);
    CU_ASSERT(st.peak_resident_bytes <= budget);
    CU_ASSERT(st.bytes_spilled > 0);
    CU_ASSERT(st.peak_nvme_bytes > 0);
    CU_ASSERT(st.restores > 0);
    CU_ASSERT_EQUAL(st.crc_errors, 0);
    CU_ASSERT_EQUAL(st.spill_failures, 0);
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    hoff__drive_result_free(&r);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
    hoff__trace_destroy(&t);
}

/* Online: evicting past the cap spills the oldest host block; using a
 * spilled block restores it; freeing one drops its spill. */
static void test_online(void) {
    hoff_ctx *ctx = open_ctx(0, 4 * MiB, 1);
    unsigned char *p[4];
    struct hoff_stats st;
    int i;
    size_t k;

    for (i = 0; i < 4; i++) {
        p[i] = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
        memset(p[i], 0x30 + i, 2 * MiB);
    }
    for (i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(hoff_evict(ctx, p[i], NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.peak_host_bytes <= 4 * MiB);
    CU_ASSERT_EQUAL(st.nvme_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[0]), HOFF_RES_NVME);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[1]), HOFF_RES_NVME);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[3]), HOFF_RES_HOST);
    /* A use of a spilled block restores it (making host room first). */
    CU_ASSERT_EQUAL(hoff_access(ctx, p[0], 0, NULL), 0);
    for (k = 0; k < 2 * MiB; k++)
        if (p[0][k] != 0x30)
            break;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, p[1], NULL), 0); /* restore, then prefetch */
    CU_ASSERT_EQUAL(hoff_access(ctx, p[1], 0, NULL), 0);
    for (k = 0; k < 2 * MiB; k++)
        if (p[1][k] != 0x31)
            break;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.peak_host_bytes <= 4 * MiB);
    CU_ASSERT(st.restores >= 2);
    for (i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(hoff_free(ctx, p[i], NULL), 0);
    hoff_sync(ctx);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.nvme_bytes, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* A block on the NVMe tier that is discarded is dead, not lost: its next use
 * pages it in with undefined contents, and a write makes it whole again. */
static void test_discard_on_nvme(void) {
    hoff_ctx *ctx = open_ctx(0, 2 * MiB, 1);
    unsigned char *p[2];
    size_t k;
    int i;

    for (i = 0; i < 2; i++) {
        p[i] = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
        memset(p[i], 0x50 + i, 2 * MiB);
        CU_ASSERT_EQUAL(hoff_evict(ctx, p[i], NULL), 0);
    }
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_residency(ctx, p[0]), HOFF_RES_NVME);
    CU_ASSERT_EQUAL(hoff_discard(ctx, p[0], NULL), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[0]), HOFF_RES_DISCARDED);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).nvme_bytes, 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, p[0], 1, NULL), 0); /* was -EIO: no copy anywhere */
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[0]), HOFF_RES_DEVICE);
    memset(p[0], 0x5a, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[0], NULL), 0); /* around the tiers once more */
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_access(ctx, p[0], 0, NULL), 0);
    for (k = 0; k < 2 * MiB; k++)
        if (p[0][k] != 0x5a)
            break;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_access(ctx, p[1], 0, NULL), 0);
    for (k = 0; k < 2 * MiB; k++)
        if (p[1][k] != 0x51)
            break;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    for (i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(hoff_free(ctx, p[i], NULL), 0);
    CU_ASSERT_EQUAL(hoff_test_stats(ctx).transfer_errors, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* A discarded block has no bytes on the host: its prefetch moves none, so it takes no host room and the host
 * tier stays within its cap (the soak saw 8 MiB against a 6 MiB cap, no overrun counted: the prefetch of a
 * discarded block was counted on the host without a cap check, and an eviction landing while it was in flight
 * pushed the count over too).  Cap of one block, A on the host filling it, D discarded: prefetching D neither
 * takes the host over the cap nor spills A to make room for dead bytes, and an eviction landing while D's
 * prefetch is in flight finds the host as it left it. */
static void test_discarded_prefetch_no_host(void) {
    hoff_ctx *ctx = open_ctx(0, 2 * MiB, 1);
    unsigned char *a, *d, *e;
    struct hoff_stats st;
    size_t k;

    a = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
    d = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
    e = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    memset(a, 0x41, 2 * MiB);
    memset(d, 0x44, 2 * MiB);
    memset(e, 0x45, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_evict(ctx, a, NULL), 0);
    CU_ASSERT_EQUAL(hoff_discard(ctx, d, NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_residency(ctx, a), HOFF_RES_HOST);
    CU_ASSERT_EQUAL_FATAL(hoff_residency(ctx, d), HOFF_RES_DISCARDED);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, d, NULL), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.host_bytes, 2 * MiB); /* A only */
    CU_ASSERT_EQUAL(hoff_residency(ctx, a), HOFF_RES_HOST);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, d), HOFF_RES_DEVICE);
    /* D discarded and prefetched again, and E evicted to the host while D's prefetch is in flight: A is spilled
     * to make room for E (the one real copy), never for D. */
    CU_ASSERT_EQUAL(hoff_discard(ctx, d, NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_prefetch(ctx, d, NULL), 0);
    CU_ASSERT_EQUAL(hoff_evict(ctx, e, NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.peak_host_bytes <= 2 * MiB);
    CU_ASSERT_EQUAL(st.host_cap_overruns, 0);
    CU_ASSERT_EQUAL(st.host_bytes, 2 * MiB); /* E */
    CU_ASSERT_EQUAL(st.spills, 1);           /* A, for E */
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 0, NULL), 0);
    for (k = 0; k < 2 * MiB; k++)
        if (a[k] != 0x41)
            break;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_access(ctx, e, 0, NULL), 0);
    for (k = 0; k < 2 * MiB; k++)
        if (e[k] != 0x45)
            break;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_access(ctx, d, 1, NULL), 0);
    memset(d, 0x64, 2 * MiB); /* dead until rewritten */
    CU_ASSERT_EQUAL(hoff_free(ctx, a, NULL), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, d, NULL), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, e, NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.peak_host_bytes <= 2 * MiB);
    CU_ASSERT_EQUAL(st.host_bytes, 0);
    CU_ASSERT_EQUAL(st.nvme_bytes, 0);
    CU_ASSERT_EQUAL(st.transfer_errors, 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* A block coming back from the host is never spilled to make host room for
 * the victim that makes device room for it: budget and host cap of one
 * block each, A on the host, V resident; using A must evict V, which finds
 * the host full.  The host tier may not spill A (it would then be paged in
 * from nothing): V stays (the budget overrun is counted) and A comes back
 * intact. */
static void test_returning_block_not_spilled(void) {
    hoff_ctx *ctx = open_ctx(2 * MiB, 2 * MiB, 1);
    unsigned char *a, *v;
    struct hoff_stats st;
    size_t k;

    a = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    memset(a, 0x41, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_evict(ctx, a, NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a), HOFF_RES_HOST);
    v = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    memset(v, 0x56, 2 * MiB);
    CU_ASSERT_EQUAL(hoff_access(ctx, a, 0, NULL), 0);
    CU_ASSERT_EQUAL(hoff_residency(ctx, a), HOFF_RES_DEVICE);
    for (k = 0; k < 2 * MiB; k++)
        if (a[k] != 0x41)
            break;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.peak_host_bytes <= 2 * MiB);
    CU_ASSERT_EQUAL(st.spills, 0);
    CU_ASSERT(st.budget_overruns > 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, a, NULL), 0);
    CU_ASSERT_EQUAL(hoff_free(ctx, v, NULL), 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* A failure on the tier thread is reported with its own message, not with
 * whatever the reporting thread failed on last: a restore whose read fails
 * (injected EIO) makes hoff_access fail naming the NVMe tier's read, though
 * this thread's last error was an unrelated one; the retry restores the
 * bytes intact. */
static void test_tier_error_carried(void) {
    hoff_ctx *ctx = open_ctx(0, 4 * MiB, 1);
    struct hoff__nvme_inject inj;
    unsigned char *p[3];
    int i, rc;
    size_t k;

    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    for (i = 0; i < 3; i++) {
        p[i] = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
        memset(p[i], 0x60 + i, 2 * MiB);
        CU_ASSERT_EQUAL(hoff_evict(ctx, p[i], NULL), 0);
    }
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_residency(ctx, p[0]), HOFF_RES_NVME);
    CU_ASSERT_EQUAL(hoff_free(ctx, p[2], NULL), 0); /* host room for the restore: no spill needed */
    /* An unrelated failure on this thread: its message must not come back. */
    CU_ASSERT_EQUAL(hoff_evict(ctx, (char *)p[0] + 64 * MiB, NULL), -EINVAL);
    CU_ASSERT_PTR_NULL(strstr(hoff_last_error(), "NVMe"));
    memset(&inj, 0, sizeof inj);
    inj.fail_complete = 1; /* the restore's first read */
    inj.complete_err = EIO;
    hoff__nvme_set_inject(ctx->mem.nvme, &inj);
    rc = hoff_access(ctx, p[0], 0, NULL);
    CU_ASSERT_EQUAL(inj.fired, 1);
    CU_ASSERT(rc < 0);
    printf("\n    access of a block whose restore failed: %d, \"%s\"\n", rc, hoff_last_error());
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "NVMe tier: restore of block"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), strerror(EIO)));
    CU_ASSERT_PTR_NULL(strstr(hoff_last_error(), "not a"));
    hoff__nvme_set_inject(ctx->mem.nvme, NULL);
    CU_ASSERT_EQUAL(hoff_access(ctx, p[0], 0, NULL), 0); /* the spill was kept: read again */
    for (k = 0; k < 2 * MiB && p[0][k] == 0x60; k++)
        ;
    CU_ASSERT_EQUAL(k, 2 * MiB);
    for (i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(hoff_free(ctx, p[i], NULL), 0);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

/* A full disk ends in bounded time (the watchdog in main fails a hang):
 * with the host tier at its cap and every spill refused (injected ENOSPC
 * on the file's growth), an eviction that needs host room is refused with
 * the disk's own words and the block stays on the device; a use of a
 * spilled block brings it back over the cap (counted); every byte stays
 * intact; once the disk has room again spills resume. */
static void test_full_disk(void) {
    hoff_ctx *ctx = open_ctx(0, 4 * MiB, 1);
    struct hoff__nvme_inject inj;
    struct hoff_stats st;
    unsigned char *p[5];
    int i, rc;
    size_t k;

    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    for (i = 0; i < 5; i++) {
        p[i] = hoff_malloc_flags(ctx, 2 * MiB, NULL, HOFF_ALLOC_MANAGED);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[i]);
        memset(p[i], 0x70 + i, 2 * MiB);
    }
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[0], NULL), 0); /* p[0] will be on the NVMe tier */
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[1], NULL), 0);
    CU_ASSERT_EQUAL(hoff_evict(ctx, p[2], NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    CU_ASSERT_EQUAL_FATAL(hoff_residency(ctx, p[0]), HOFF_RES_NVME);
    memset(&inj, 0, sizeof inj);
    inj.disk_full = 1;
    hoff__nvme_set_inject(ctx->mem.nvme, &inj);
    /* The host is full (p[1], p[2]); spilling p[1] fails: p[3] stays. */
    rc = hoff_evict(ctx, p[3], NULL);
    printf("\n    eviction with the host full and the disk full: %d, \"%s\"\n", rc, hoff_last_error());
    CU_ASSERT_EQUAL(rc, -HOFF_EHOSTCAP);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), strerror(ENOSPC)));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_HOST_CAP"));
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[3]), HOFF_RES_DEVICE);
    /* Refused again without another write: the disk said no. */
    CU_ASSERT(hoff_evict(ctx, p[4], NULL) < 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.spill_failures, 1);
    CU_ASSERT(st.peak_host_bytes <= 4 * MiB);
    CU_ASSERT_EQUAL(hoff_residency(ctx, p[1]), HOFF_RES_HOST);
    /* A use of p[0] needs host room that cannot be made: over the cap. */
    CU_ASSERT_EQUAL(hoff_access(ctx, p[0], 0, NULL), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.host_cap_overruns, 1);
    for (i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(hoff_access(ctx, p[i], 0, NULL), 0);
        for (k = 0; k < 2 * MiB && p[i][k] == 0x70 + i; k++)
            ;
        CU_ASSERT_EQUAL(k, 2 * MiB);
    }
    /* Room again on the disk: a refused spill is retried (next step). */
    inj.disk_full = 0;
    CU_ASSERT_EQUAL(hoff_step_begin(ctx), 0);
    CU_ASSERT_EQUAL(hoff_step_end(ctx), 0);
    for (i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(hoff_evict(ctx, p[i], NULL), 0);
    CU_ASSERT_EQUAL(hoff_sync(ctx), 0);
    st = hoff_test_stats(ctx);
    CU_ASSERT(st.spills >= 2);
    CU_ASSERT_EQUAL(st.spill_failures, 1);
    for (i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(hoff_access(ctx, p[i], 0, NULL), 0);
        for (k = 0; k < 2 * MiB && p[i][k] == 0x70 + i; k++)
            ;
        CU_ASSERT_EQUAL(k, 2 * MiB);
        CU_ASSERT_EQUAL(hoff_free(ctx, p[i], NULL), 0);
    }
    hoff__nvme_set_inject(ctx->mem.nvme, NULL);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
}

static void test_bad_spill_dir(void) {
    struct hoff_config cfg;
    hoff_ctx *ctx = NULL;

    cfg = hoff_test_replay_config(0, 0);
    cfg.log_level = HOFF_LOG_OFF;
    snprintf(cfg.spill_dir, sizeof cfg.spill_dir, "%.200s/does-not-exist", dir);
    CU_ASSERT(hoff_init(&ctx, &cfg) < 0);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "does-not-exist"));
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"planned_spills", test_planned_spills},
        {"online", test_online},
        {"discard_on_nvme", test_discard_on_nvme},
        {"discarded_prefetch_no_host", test_discarded_prefetch_no_host},
        {"returning_block_not_spilled", test_returning_block_not_spilled},
        {"tier_error_carried", test_tier_error_carried},
        {"full_disk", test_full_disk},
        {"bad_spill_dir", test_bad_spill_dir},
        {NULL, NULL},
    };
    int rc;

    dir = hoff_test_spill_dir("tiers");
    alarm(120); /* a hang (a full disk spinning) fails the suite rather than stalling make check */
    rc = hoff_test_run("tiers", tests);
    return rc;
}
