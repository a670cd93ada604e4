/* test_soak.c — spill-heavy random runs on sim with the NVMe tier failing under them: injected ENOSPC, EIO and
 * short reads/writes, a disk that fills (growth refused) and, with HOFF_SOAK_DIR on a small tmpfs (tests/disk.sh
 * mounts one), a really full disk.  Every run is bounded (a watchdog fails a hang), every block is checked against
 * its pattern across every transition, and every failed call's message must name its real cause, never an error
 * left over from an earlier call.  HOFF_SOAK_RUNS (default 4), HOFF_SOAK_ACTIONS (default 400 per run),
 * HOFF_SOAK_SEED (default 1) size it; the long soak is the same with more runs.  Single-threaded. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/context.h"
#include "hoff.h"
#include "testutil.h"
#include "tier/nvme.h"

#define MiB ((size_t)1 << 20)
#define SLOTS 12
#define STALE "is not a live hoff block" /* the error planted before every call */

struct slot {
    uint64_t *p;
    size_t size;
    uint64_t seed; /* word i is seed * K + i; 0 = contents undefined */
};

static hoff_ctx *ctx;
static struct slot slots[SLOTS];
static uint64_t rng;
static struct hoff__nvme_inject inj[2]; /* armed alternately: the tier never reads the one being changed */
static int cur;
static int run_no;
static uint64_t run_seed;
static char dir[256];
static const char *act; /* what the last action did, for the reports */

/* Figures over all runs. */
static struct {
    unsigned long long actions, errors_ok, wrong_cause, unexpected, mismatches, bytes_verified, fired, spills,
        spill_failures, restores, host_cap_overruns, budget_overruns, cap_breaches;
    double max_run_s;
} tot;

static void on_alarm(int sig) {
    static const char msg[] = "soak: a run hung (watchdog); see the run and seed printed before\n";
    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    _exit(1);
}

static uint64_t rnd(uint64_t n) {
    return hoff_test_rand(&rng) % n;
}

static void fill(struct slot *s, uint64_t seed) {
    hoff_test_fill_seq(s->p, s->size, seed);
    s->seed = seed;
}

static void plant_stale(void) {
    static char bogus;
    hoff_evict(ctx, &bogus, NULL); /* fails: its message must never be reported for another failure */
}

/* A call failed with rc: its message must be its own and name a cause the soak can have produced. */
static void check_cause(const char *what, int rc) {
    const char *m = hoff_last_error();
    static const char *const causes[] = {"No space left on device", "Input/output error", "short", "HOFF_HOST_CAP",
                                         "budget"};
    size_t i;

    for (i = 0; i < sizeof causes / sizeof causes[0] && !strstr(m, causes[i]); i++)
        ;
    if (strstr(m, STALE) || i == sizeof causes / sizeof causes[0]) {
        tot.wrong_cause++;
        fprintf(stderr, "soak: run %d seed %llu: %s returned %d (%s) with the message \"%s\"\n", run_no,
                (unsigned long long)run_seed, what, rc, hoff_strerror(rc), m);
    } else {
        tot.errors_ok++;
    }
}

static void unexpected(const char *what, int rc) {
    tot.unexpected++;
    fprintf(stderr, "soak: run %d seed %llu: %s returned %d (%s): %s\n", run_no, (unsigned long long)run_seed, what, rc,
            hoff_strerror(rc), hoff_last_error());
}

/* Use a block (a restore may fail on an injected read error: retried, the spill is kept), then check it. */
static void verify(struct slot *s) {
    size_t bad;
    int rc, tries;

    for (tries = 0; tries < 4; tries++) {
        plant_stale();
        if ((rc = hoff_access(ctx, s->p, 0, NULL)) == 0)
            break;
        check_cause("hoff_access", rc);
    }
    if (rc) {
        unexpected("hoff_access (4 tries)", rc);
        return;
    }
    tot.bytes_verified += s->size;
    if (!s->seed)
        return;
    if ((bad = hoff_test_seq_bad(s->p, s->size, s->seed)) != 0) {
        tot.mismatches++;
        fprintf(stderr, "soak: run %d seed %llu: block %p (%zu bytes) wrong at word %zu\n", run_no,
                (unsigned long long)run_seed, (void *)s->p, s->size, bad - 1);
    }
}

/* Change what the disk does (the tier idle in between: hoff_sync). */
static void rearm(void) {
    struct hoff__nvme_inject *j = &inj[cur ^ 1];
    static const int errs[] = {ENOSPC, EIO, 0 /* short */};

    hoff_sync(ctx);
    tot.fired += inj[cur].fired;
    memset(j, 0, sizeof *j);
    switch (rnd(5)) {
    case 0: break; /* a healthy disk */
    case 1:
        j->fail_submit = 1 + (unsigned)rnd(8);
        j->submit_err = errs[rnd(2)];
        break;
    case 2:
        j->fail_complete = 1 + (unsigned)rnd(8);
        j->complete_err = errs[rnd(3)];
        break;
    case 3: j->disk_full = 1; break;
    case 4:
        j->fail_complete = 1 + (unsigned)rnd(4);
        j->complete_err = errs[rnd(3)];
        j->disk_full = (int)rnd(2);
        break;
    }
    cur ^= 1;
    hoff__nvme_set_inject(ctx->mem.nvme, j);
}

static void one_action(void) {
    struct slot *s = &slots[rnd(SLOTS)];
    int rc;

    tot.actions++;
    act = "allocate";
    if (!s->p) {
        s->size = (1 + rnd(4)) * MiB - 8 * rnd(64);
        s->p = hoff_malloc_flags(ctx, s->size, NULL, HOFF_ALLOC_MANAGED);
        if (!s->p) {
            unexpected("hoff_malloc", -errno);
            return;
        }
        if ((rc = hoff_access(ctx, s->p, 1, NULL)) != 0)
            unexpected("hoff_access(write)", rc);
        fill(s, hoff_test_rand(&rng) | 1);
        return;
    }
    plant_stale();
    switch (rnd(10)) {
    case 0: /* free, checked first */
        act = "free";
        verify(s);
        if ((rc = hoff_free(ctx, s->p, NULL)) != 0)
            unexpected("hoff_free", rc);
        s->p = NULL;
        break;
    case 1:
    case 2:
    case 3: /* evict (spill-heavy: the host cap is small) */
        act = "evict";
        rc = hoff_evict(ctx, s->p, NULL);
        if (rc == -HOFF_EHOSTCAP)
            check_cause("hoff_evict", rc);
        else if (rc && rc != -EALREADY && rc != -EBUSY)
            unexpected("hoff_evict", rc);
        break;
    case 4: /* prefetch */
        act = "prefetch";
        rc = hoff_prefetch(ctx, s->p, NULL);
        if (rc == -HOFF_EBUDGET || rc == -HOFF_EHOSTCAP || rc == -EIO)
            check_cause("hoff_prefetch", rc);
        else if (rc && rc != -EALREADY && rc != -EBUSY)
            unexpected("hoff_prefetch", rc);
        break;
    case 5:
    case 6: /* read */
        act = "read";
        verify(s);
        break;
    case 7: /* rewrite */
        act = "rewrite";
        verify(s);
        fill(s, hoff_test_rand(&rng) | 1);
        break;
    case 8: /* discard now and then: dead until rewritten */
        if (rnd(4))
            break;
        act = "discard";
        rc = hoff_discard(ctx, s->p, NULL);
        if (rc == 0)
            s->seed = 0;
        else if (rc != -EALREADY && rc != -EBUSY)
            unexpected("hoff_discard", rc);
        break;
    case 9: /* time passes, transfers land */
        act = "compute";
        hoff_sim_compute(ctx, NULL, 1000 + rnd(2000000));
        break;
    }
}

/* The host cap holds after every action: host_bytes (and any new peak) at most the cap, unless a use brought a
 * spilled block back over it (host_cap_overruns grew since the tier was last within its cap).  Read from the
 * context's own stats, as hoff_stats_get would retire transfers and so change the run. */
static struct {
    uint64_t cap, peak;
    unsigned long long overruns; /* host_cap_overruns when host_bytes was last within the cap */
    int action;
} capw;

static void check_cap(void) {
    const struct hoff__mem_stats *st = &ctx->mem.st;
    int over = st->host_bytes > capw.cap || (st->peak_host_bytes > capw.peak && st->peak_host_bytes > capw.cap);

    if (over && st->host_cap_overruns == capw.overruns) {
        tot.cap_breaches++;
        fprintf(stderr,
                "soak: run %d seed %llu action %d (%s): host %llu bytes (peak %llu) over the cap %llu "
                "with no host_cap_overruns counted\n",
                run_no, (unsigned long long)run_seed, capw.action, act, (unsigned long long)st->host_bytes,
                (unsigned long long)st->peak_host_bytes, (unsigned long long)capw.cap);
    }
    if (st->host_bytes <= capw.cap)
        capw.overruns = st->host_cap_overruns;
    capw.peak = st->peak_host_bytes;
    capw.action++;
}

static void one_run(int actions) {
    struct hoff_config cfg;
    struct hoff_stats st;
    double t0, secs;
    int i;

    t0 = hoff_test_now_s();
    cfg = hoff_test_sim_config(4ull << 30);
    cfg.sim_protect = HOFF_SIM_PROTECT; /* a byte read off the device unannounced crashes */
    cfg.budget_bytes = rnd(3) ? (4 + rnd(12)) * MiB : 0;
    cfg.host_cap_bytes = (4 + rnd(8)) * MiB;
    cfg.spill_chunk_bytes = rnd(2) ? 65536 : MiB;
    cfg.log_level = HOFF_LOG_OFF;
    snprintf(cfg.spill_dir, sizeof cfg.spill_dir, "%s", dir);
    if (hoff_init(&ctx, &cfg) != 0) {
        unexpected("hoff_init", -1);
        return;
    }
    memset(inj, 0, sizeof inj);
    cur = 0;
    memset(&capw, 0, sizeof capw);
    capw.cap = cfg.host_cap_bytes;
    for (i = 0; i < actions; i++) {
        if (i % 25 == 0)
            rearm();
        if (i % 100 == 50 && hoff_step_begin(ctx) == 0) {
            int k;
            for (k = 0; k < 30; k++, i++) {
                one_action();
                check_cap();
            }
            hoff_step_end(ctx);
        }
        one_action();
        check_cap();
    }
    for (i = 0; i < SLOTS; i++) {
        if (!slots[i].p)
            continue;
        act = "final read";
        verify(&slots[i]);
        check_cap();
        hoff_free(ctx, slots[i].p, NULL);
        slots[i].p = NULL;
    }
    hoff_sync(ctx);
    tot.fired += inj[cur].fired;
    hoff__nvme_set_inject(ctx->mem.nvme, NULL);
    hoff_stats_get(ctx, &st);
    tot.spills += st.spills;
    tot.spill_failures += st.spill_failures;
    tot.restores += st.restores;
    tot.host_cap_overruns += st.host_cap_overruns;
    tot.budget_overruns += st.budget_overruns;
    if (!st.host_cap_overruns && st.peak_host_bytes > cfg.host_cap_bytes) {
        tot.unexpected++;
        fprintf(stderr, "soak: run %d: host peak %llu over the cap %llu with no overrun counted\n", run_no,
                (unsigned long long)st.peak_host_bytes, (unsigned long long)cfg.host_cap_bytes);
    }
    if (st.nvme_bytes || st.host_bytes)
        unexpected("books after freeing everything (nvme/host bytes left)", 0);
    if (hoff_shutdown(ctx) != 0)
        unexpected("hoff_shutdown", -1);
    ctx = NULL;
    secs = hoff_test_now_s() - t0;
    if (secs > tot.max_run_s)
        tot.max_run_s = secs;
}

static long env_long(const char *name, long def) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : def;
}

static void test_soak(void) {
    long runs = env_long("HOFF_SOAK_RUNS", 4), actions = env_long("HOFF_SOAK_ACTIONS", 400);
    uint64_t seed = (uint64_t)env_long("HOFF_SOAK_SEED", 1);
    long watchdog = env_long("HOFF_SOAK_RUN_LIMIT", 60);

    signal(SIGALRM, on_alarm);
    for (run_no = 0; run_no < runs; run_no++) {
        run_seed = seed * 1000003u + (uint64_t)run_no;
        rng = run_seed | 1;
        alarm((unsigned)watchdog); /* each run bounded */
        one_run((int)actions);
    }
    alarm(0);
    printf(
        "\n    soak in %s: %ld runs x %ld actions (seed %llu): 0 hangs (longest run %.2f s), %llu faults fired, "
        "%llu spills, %llu spill failures, %llu restores, %llu host-cap overruns, %llu over the host cap uncounted, %llu budget overruns, "
        "%llu failed calls with their own cause, %llu with a wrong cause, %llu unexpected, %.1f MiB verified, "
        "%llu mismatches\n",
        dir, runs, actions, (unsigned long long)seed, tot.max_run_s, tot.fired, tot.spills, tot.spill_failures,
        tot.restores, tot.host_cap_overruns, tot.cap_breaches, tot.budget_overruns, tot.errors_ok, tot.wrong_cause,
        tot.unexpected, (double)tot.bytes_verified / (double)MiB, tot.mismatches);
    CU_ASSERT_EQUAL(tot.mismatches, 0);
    CU_ASSERT_EQUAL(tot.wrong_cause, 0);
    CU_ASSERT_EQUAL(tot.unexpected, 0);
    CU_ASSERT_EQUAL(tot.cap_breaches, 0);
    CU_ASSERT(tot.spills > 0);
    CU_ASSERT(tot.spill_failures > 0); /* the faults did happen */
    CU_ASSERT(tot.bytes_verified > 0);
}

int main(void) {
    static const struct hoff_test tests[] = {{"soak", test_soak}, {NULL, NULL}};
    const char *d = getenv("HOFF_SOAK_DIR");
    int rc, made = 0;

    if (d && *d) {
        snprintf(dir, sizeof dir, "%s", d);
    } else {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/hoff-soak-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir)) {
            perror("soak: mkdtemp");
            return 1;
        }
        made = 1;
    }
    rc = hoff_test_run("soak", tests);
    if (made)
        rmdir(dir);
    return rc;
}
