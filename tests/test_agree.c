/* test_agree.c — the sim and the replay prediction agree transfer by transfer (issue 17): a trace is driven through
 * a sim context for a warmup and two replays while the sim reports every copy, page-in and wait it models
 * (hoff__sim_observe); then hoff__plan_predict replays the context's own schedule on the recorded step with an
 * observer, and the second replay step and the predicted step must list the same calls in the same order: kind,
 * block, bytes, and issue, start and end times on the step's clock, to the ns.  Waits are compared as the step's
 * total (the runtime may wait for two events where the prediction waits once for the later).  On the committed
 * traces (tests/data/traces) and on 100 random training-shaped steps (hoff__synth_events), with and without a host
 * cap (the NVMe tier's spills and restores, which have no address on the sim, are matched by bytes and times).
 * A mismatch prints every differing call, each with the reason the two sides give.
 * Single-threaded but for the library's issuing and tier threads, which report through a mutex. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/context.h"
#include "mem/blocktable.h"
#include "hoff.h"
#include "mem/pool.h"
#include "plan/plan.h"
#include "testutil.h"
#include "trace/drive.h"
#include "trace/synth.h"
#include "trace/trace.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* A list of observed calls; the sim's comes from several threads. */
struct olog {
    pthread_mutex_t mu;
    struct hoff__xfer_obs *v;
    size_t n, cap;
    int on;
};

static void olog_add(void *arg, const struct hoff__xfer_obs *x) {
    struct olog *l = arg;

    pthread_mutex_lock(&l->mu);
    if (l->on) {
        if (l->n == l->cap) {
            size_t c = l->cap ? 2 * l->cap : 256;
            struct hoff__xfer_obs *nv = realloc(l->v, c * sizeof *nv);

            if (!nv) {
                perror("realloc");
                exit(99);
            }
            l->v = nv;
            l->cap = c;
        }
        l->v[l->n++] = *x;
    }
    pthread_mutex_unlock(&l->mu);
}

/* The drive's view: where each block of the observed step lived, and when
 * (on the sim's clock): pools hand an address out again after a free. */
struct life {
    const char *p;
    uint64_t size, born, died;
    uint32_t id; /* the recorded trace's block id */
};

struct run {
    hoff_ctx *ctx;
    const struct hoff__trace *t;
    struct olog sim;
    struct life *life;
    size_t nlife, caplife;
    uint32_t *rec_of; /* the driven trace's block id -> the recorded trace's */
    uint32_t nb;
    uint64_t t0; /* the sim's clock when the observed step began */
    int step;    /* the step observed */
};

static uint64_t sim_now(struct run *r) {
    struct hoff__sim_counters c;

    CU_ASSERT_EQUAL_FATAL(hoff__sim_counters(r->ctx->mem.be, &c), 0);
    return c.now_ns;
}

/* After each event of the observed step: a free ends its block's life. */
static void on_event(void *arg, int step, size_t ev) {
    struct run *r = arg;
    const struct hoff__tev *e;
    size_t k;

    if (step != r->step)
        return;
    if (ev == SIZE_MAX) {
        /* hoff_step_begin has run: the step's clock starts here.  The
         * issuing thread's calls of the step before have all been made
         * (replay drains it at the step's end), so nothing of theirs is
         * logged. */
        r->t0 = sim_now(r);
        pthread_mutex_lock(&r->sim.mu);
        r->sim.on = 1;
        pthread_mutex_unlock(&r->sim.mu);
        return;
    }
    if (ev >= r->t->nev || (e = &r->t->ev[ev])->kind != HOFF__TEV_FREE || e->block >= r->t->nblocks)
        return;
    for (k = r->nlife; k-- > 0;)
        if (r->life[k].id == r->rec_of[e->block] && r->life[k].died == UINT64_MAX) {
            r->life[k].died = sim_now(r);
            break;
        }
}

/* Blocks are named by the recorded trace's ids (the prediction's): the
 * block's tid, which replay set at its allocation. */
static void on_alloc(void *arg, int step, uint32_t block, const void *p, size_t size) {
    struct run *r = arg;
    const struct hoff__block *b;
    uint32_t id;

    if (step != r->step)
        return;
    pthread_mutex_lock(&r->ctx->lock);
    b = hoff__bt_lookup(&r->ctx->mem.table, p);
    id = b && b->tstep ? b->tid : UINT32_MAX;
    pthread_mutex_unlock(&r->ctx->lock);
    if (block < r->t->nblocks)
        r->rec_of[block] = id;
    if (r->nlife == r->caplife) {
        size_t c = r->caplife ? 2 * r->caplife : 256;
        struct life *nl = realloc(r->life, c * sizeof *nl);

        CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
        r->life = nl;
        r->caplife = c;
    }
    r->life[r->nlife++] =
        (struct life){.p = p, .size = size ? size : 1, .born = sim_now(r), .died = UINT64_MAX, .id = id};
}

/* The block whose range held p when the call was issued (sim clock), else
 * UINT32_MAX; of two lives that touch at that instant, the one alive after. */
static uint32_t block_of(const struct run *r, const void *p, uint64_t when) {
    size_t k;
    uint32_t id = UINT32_MAX;

    if (!p)
        return id;
    for (k = 0; k < r->nlife; k++) {
        const struct life *l = &r->life[k];

        if ((const char *)p >= l->p && (const char *)p < l->p + l->size && l->born <= when && when <= l->died) {
            id = l->id;
            if (when < l->died)
                break;
        }
    }
    return id;
}

static const char *kind_name(int k) {
    static const char *const n[] = {"?", "evict", "prefetch", "discard", "fault", "spill", "restore", "wait"};

    return k > 0 && k <= HOFF__XF_WAIT ? n[k] : "?";
}

/* The calls are compared per FIFO, each in its own order: the D2H engine
 * (evictions, discards), the H2D engine (prefetches), the NVMe device (its
 * calls come from the tier thread, which makes them at its own pace but
 * starts each at its issue on the virtual clock) and the page-ins. */
enum { F_D2H, F_H2D, F_NVME, F_FAULT, F_N };

static int fifo_of(int k) {
    switch (k) {
    case HOFF__XF_EVICT:
    case HOFF__XF_DISCARD: return F_D2H;
    case HOFF__XF_PREFETCH: return F_H2D;
    case HOFF__XF_SPILL:
    case HOFF__XF_RESTORE: return F_NVME;
    case HOFF__XF_FAULT: return F_FAULT;
    default: return -1;
    }
}

static void print_obs(const char *side, const struct hoff__xfer_obs *x) {
    fprintf(stderr,
            "    %s %-8s block %-6" PRId64 " %10" PRIu64 " B  issued %" PRIu64 " start %" PRIu64 " end %" PRIu64 "\n",
            side, kind_name(x->kind), x->block == UINT32_MAX ? (int64_t)-1 : (int64_t)x->block, x->bytes, x->issued,
            x->start, x->end);
}

/* Why two calls at the same position differ, in words; NULL when they
 * agree.  Where the two cannot agree by construction, *named gets the reason
 * and the call counts as agreeing: an NVMe call's issue time (the sim
 * models a tier call from the event it waits for, when hoff's tier thread
 * makes it; the moment residency queued it never reaches the sim, while the
 * prediction knows it), and its block (the sim's NVMe calls carry no address). */
static const char *why_differ(const struct hoff__xfer_obs *s, uint32_t sb, const struct hoff__xfer_obs *p,
                              const char **named) {
    int nvme = s->kind == HOFF__XF_SPILL || s->kind == HOFF__XF_RESTORE;

    *named = NULL;
    if (nvme && s->kind == p->kind && s->bytes == p->bytes && s->start == p->start && s->end == p->end) {
        if (s->issued != p->issued)
            *named = "NVMe call issued at another time: the sim sees a tier call only when the tier thread makes it, "
                     "from the event it waits for";
        return NULL;
    }
    if (s->kind != p->kind)
        return "a different kind of call: the runtime and the prediction decided differently here";
    if (!nvme && sb != p->block)
        return "a different block: the victim or the order of calls differs";
    if (s->bytes != p->bytes)
        return "a different size";
    if (s->issued != p->issued)
        return "issued at a different time: compute or the issuing thread differs before this call";
    if (s->start != p->start)
        return "started at a different time: an engine was busy differently before this call";
    if (s->end != p->end)
        return "landed at a different time: the copy-time rule differs";
    return NULL;
}

/* Drive t for 3 steps at pct% of its offload peak (a host cap of cap_pct%
 * with an NVMe tier, 0: none) and hold step 2 to the prediction. */
static void agree(const struct hoff__trace *t, const char *what, int pct, int cap_pct, size_t *ncalls) {
    struct hoff_config cfg;
    struct hoff__drive_opts o;
    struct hoff__drive_result res;
    struct hoff__plan_opts po;
    struct hoff__prediction pr;
    struct olog pred = {.mu = PTHREAD_MUTEX_INITIALIZER, .on = 1};
    struct run r = {.sim = {.mu = PTHREAD_MUTEX_INITIALIZER}, .step = 2};
    uint64_t peak, *T, swait = 0, pwait = 0;
    char err[256];
    size_t i, j, nbad = 0, ns = 0, np = 0, nnamed = 0;
    int rc, f;
    static const char *const fifo_name[F_N] = {"D2H", "H2D", "NVMe", "page-in"};

    peak = hoff__trace_offload_peak(t, hoff__pool_block_bytes, NULL);
    CU_ASSERT_FATAL(peak > 0);
    cfg = hoff_test_replay_config(16 * GiB, peak * (uint64_t)pct / 100);
    cfg.sim_h2d_gbps = 50;
    cfg.sim_d2h_gbps = 50;
    if (cap_pct) {
        cfg.host_cap_bytes = peak * (uint64_t)cap_pct / 100;
        CU_ASSERT_EQUAL_FATAL(hoff_config_set(&cfg, "spill_dir", hoff_test_spill_dir("agree"), err, sizeof err), 0);
    }
    r.ctx = hoff_test_open(&cfg);
    r.t = t;
    r.rec_of = malloc((t->nblocks ? t->nblocks : 1) * sizeof *r.rec_of);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.rec_of);
    for (i = 0; i < t->nblocks; i++)
        r.rec_of[i] = UINT32_MAX;
    CU_ASSERT_EQUAL_FATAL(hoff__sim_observe(r.ctx->mem.be, olog_add, &r.sim), 0);

    memset(&o, 0, sizeof o);
    o.steps = 3;
    o.verify = 1;
    o.compute_scale = 1;
    o.on_event = on_event;
    o.on_alloc = on_alloc;
    o.on_event_arg = &r;
    rc = hoff__trace_drive(r.ctx, t, &o, &res);
    if (rc)
        fprintf(stderr, "%s: drive failed: %s\n", what, hoff_last_error());
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(res.integrity_errors, 0);
    CU_ASSERT_EQUAL(res.step[2].plan_state, HOFF_PLAN_REPLAY);
    /* Everything the step issued has been made: the issuing threads are idle. */
    CU_ASSERT_EQUAL(hoff_sync(r.ctx), 0);
    CU_ASSERT_EQUAL(hoff__sim_observe(r.ctx->mem.be, NULL, NULL), 0);

    /* The prediction of the context's own plan, on the recorded step. */
    CU_ASSERT_FATAL(r.ctx->pipe.have_trace);
    hoff__record_plan_opts(&r.ctx->pipe, &po);
    po.observe = olog_add;
    po.observe_arg = &pred;
    T = hoff__plan_times(&r.ctx->pipe.trace);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    CU_ASSERT_EQUAL_FATAL(hoff__plan_predict(&r.ctx->pipe.trace, &po, T, &r.ctx->pipe.sched, HOFF__PLACE_KEEP, &pr), 0);
    free(T);

    /* The sim's calls on the step's clock, the copies in call order. */
    for (i = 0; i < r.sim.n; i++) {
        struct hoff__xfer_obs *x = &r.sim.v[i];

        x->block = block_of(&r, x->p, x->issued);
        x->issued -= r.t0;
        x->start -= r.t0;
        x->end -= r.t0;
        if (x->kind == HOFF__XF_WAIT)
            swait += x->end - x->start;
    }
    for (i = 0; i < pred.n; i++)
        if (pred.v[i].kind == HOFF__XF_WAIT)
            pwait += pred.v[i].end - pred.v[i].start;
    for (f = 0; f < F_N; f++)
        for (i = j = 0;;) {
            const struct hoff__xfer_obs *x, *y;
            const char *why, *named = NULL;

            while (i < r.sim.n && fifo_of(r.sim.v[i].kind) != f)
                i++;
            while (j < pred.n && fifo_of(pred.v[j].kind) != f)
                j++;
            if (i == r.sim.n && j == pred.n)
                break;
            x = i < r.sim.n ? &r.sim.v[i] : NULL;
            y = j < pred.n ? &pred.v[j] : NULL;
            why = !x   ? "the prediction has a call the sim did not make"
                  : !y ? "the sim made a call the prediction does not have"
                       : why_differ(x, x->block, y, &named);
            if (named && nnamed++ < 3) {
                printf("%s at %d%% (cap %d%%), %s call %zu agrees but for what cannot: %s (sim %" PRIu64
                       " ns, prediction %" PRIu64 " ns)\n",
                       what, pct, cap_pct, fifo_name[f], ns, named, x->issued, y->issued);
            }
            if (why && nbad++ < 8) {
                fprintf(stderr, "%s at %d%% (cap %d%%), %s call %zu: %s\n", what, pct, cap_pct, fifo_name[f],
                        x ? ns : np, why);
                if (x)
                    print_obs("sim:       ", x);
                if (y)
                    print_obs("prediction:", y);
            }
            if (x)
                i++, ns++, ncalls[f]++;
            if (y)
                j++, np++;
        }
    if (nbad > 8)
        fprintf(stderr, "%s at %d%% (cap %d%%): %zu calls differ in all\n", what, pct, cap_pct, nbad);
    CU_ASSERT_EQUAL(nbad, 0);
    if (swait != pwait)
        fprintf(stderr, "%s at %d%% (cap %d%%): the sim waited %" PRIu64 " ns, the prediction %" PRIu64 " ns\n", what,
                pct, cap_pct, swait, pwait);
    CU_ASSERT_EQUAL(swait, pwait);

    hoff__drive_result_free(&res);
    CU_ASSERT_EQUAL(hoff_shutdown(r.ctx), 0);
    free(r.sim.v);
    free(pred.v);
    free(r.life);
    free(r.rec_of);
}

/* What was compared: every kind of FIFO must have been exercised, or the
 * comparison proved less than it claims. */
static void report(const char *what, const size_t *calls) {
    printf("\n%s: %zu D2H, %zu H2D, %zu NVMe calls and %zu page-ins agree\n", what, calls[F_D2H], calls[F_H2D],
           calls[F_NVME], calls[F_FAULT]);
    CU_ASSERT(calls[F_D2H] > 0);
    CU_ASSERT(calls[F_H2D] > 0);
    CU_ASSERT(calls[F_NVME] > 0);
}

static void test_committed(void) {
    static const char *const names[] = {"gpt", "wide", "cnn"};
    static const int pcts[] = {50, 25};
    size_t n, k;

    for (n = 0; n < sizeof names / sizeof *names; n++) {
        struct hoff__trace t;
        char path[512], err[256];
        size_t calls[F_N] = {0};
        int rc;

        snprintf(path, sizeof path, "%s/%s.trace.gz", HOFF_TRACE_DIR, names[n]);
        hoff__trace_init(&t);
        rc = hoff__trace_load(&t, path, err, sizeof err);
        if (rc)
            fprintf(stderr, "%s: %s\n", path, err);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        for (k = 0; k < sizeof pcts / sizeof *pcts; k++) {
            agree(&t, names[n], pcts[k], 0, calls);
            agree(&t, names[n], pcts[k], 30, calls);
        }
        report(names[n], calls);
        hoff__trace_destroy(&t);
    }
}

static void test_random(void) {
    uint64_t seed;
    size_t calls[F_N] = {0};

    for (seed = 1; seed <= 100; seed++) {
        struct hoff__trace t;
        char what[64];

        hoff__trace_init(&t);
        CU_ASSERT_EQUAL_FATAL(hoff__synth_events(&t, 200, seed), 0);
        snprintf(what, sizeof what, "random step %" PRIu64, seed);
        agree(&t, what, 50, 0, calls);
        agree(&t, what, 40, 35, calls);
        hoff__trace_destroy(&t);
    }
    report("100 random steps", calls);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"committed", test_committed},
        {"random", test_random},
        {NULL, NULL},
    };
    return hoff_test_run("agree", tests);
}
