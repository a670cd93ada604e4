/* plan.c — benchmark: planning time of a planner (greedy by default) on generated training-shaped traces of
 * 10^4, 10^5 and 10^6 events, and its growth from one size to the next (O(M log S): ~10-15x per 10x).
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchargs.h"
#include "plan/plan.h"
#include "trace/trace.h"

/* --- a training-shaped trace ------------------------------------------------
 * Forward, layer after layer: an op mark, a few saved activations from the
 * managed pool (4-16 MiB; most with a pack access at the end of their
 * layer's forward, some -- dropout masks -- with no access marks at all,
 * which the planner treats with its guard margins), short-lived temporaries
 * (small ones from the device pool, medium ones managed) allocated, used and
 * freed.  Backward, layers in reverse: an op mark, a managed gradient buffer,
 * each saved activation read (unpack) and freed in reverse, temporaries, the
 * layer's parameter gradient (device pool, retained).  A managed loss-scale
 * buffer without accesses is allocated first and retained.  Op marks (the
 * optimizer) fill the trace up to the asked event count.  Deterministic. */

struct gen {
    struct hoff__trace *t;
    uint64_t rs;
    int rc;
};

static uint64_t rnd(struct gen *g) {
    uint64_t x = g->rs;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g->rs = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static void push(struct gen *g, struct hoff__tev *e) {
    if (g->rc)
        return;
    e->t_cpu_ns = g->t->nev * 2000;
    e->t_gpu_ns = HOFF__TIME_UNKNOWN;
    if (e->kind == HOFF__TEV_OP)
        e->block = 0;
    else
        e->name = UINT32_MAX;
    g->rc = hoff__trace_append(g->t, e);
}

static uint32_t g_alloc(struct gen *g, int pool, uint64_t size) {
    struct hoff__tev e = {.kind = HOFF__TEV_ALLOC, .pool = (uint8_t)pool, .size = size, .stream = 1};

    e.block = g->t->nblocks;
    push(g, &e);
    return e.block;
}
static void g_free(struct gen *g, uint32_t b) {
    struct hoff__tev e = {.kind = HOFF__TEV_FREE, .block = b, .stream = 1};
    push(g, &e);
}
static void g_access(struct gen *g, uint32_t b, int write) {
    struct hoff__tev e = {.kind = HOFF__TEV_ACCESS, .block = b, .stream = 1, .flags = write ? HOFF__TEV_WRITE : 0};
    push(g, &e);
}
static void g_op(struct gen *g, uint32_t name) {
    struct hoff__tev e = {.kind = HOFF__TEV_OP, .name = name};
    push(g, &e);
}

/* Temporaries of one op: allocated, used, freed. */
static void g_temps(struct gen *g, int n) {
    while (n-- > 0) {
        int managed = rnd(g) % 3 == 0;
        uint64_t size = managed ? (2u + rnd(g) % 3) << 20 : (64u << 10) << rnd(g) % 4;
        uint32_t b = g_alloc(g, managed, size);

        g_access(g, b, 1);
        g_free(g, b);
    }
}

#define MAXACT 8
#define EV_PER_LAYER 54 /* a little over what one layer emits (~52): op marks pad the rest */

static int gen_trace(struct hoff__trace *t, size_t nev, uint64_t seed) {
    struct gen g = {t, seed | 1, 0};
    uint32_t(*act)[MAXACT], *nact, fwd, bwd, scale;
    size_t layers = nev / EV_PER_LAYER ? nev / EV_PER_LAYER : 1, l;
    int i;

    hoff__trace_init(t);
    act = calloc(layers, sizeof *act);
    nact = calloc(layers, sizeof *nact);
    fwd = hoff__trace_name(t, "forward");
    bwd = hoff__trace_name(t, "backward");
    if (!act || !nact || fwd == UINT32_MAX || bwd == UINT32_MAX) {
        free(act);
        free(nact);
        return -ENOMEM;
    }
    scale = g_alloc(&g, 1, 2u << 20); /* loss scale: managed, no accesses, retained */
    (void)scale;
    for (l = 0; l < layers && !g.rc; l++) {
        g_op(&g, fwd);
        nact[l] = 3 + (uint32_t)(rnd(&g) % 4);
        for (i = 0; i < (int)nact[l]; i++) {
            act[l][i] = g_alloc(&g, 1, (4u + 4u * (rnd(&g) % 4)) << 20);
            g_temps(&g, (int)(rnd(&g) % 2));
        }
        g_temps(&g, 2);
        for (i = 0; i < (int)nact[l]; i++)
            if (rnd(&g) % 4) /* 1 in 4 (dropout masks) has no access marks */
                g_access(&g, act[l][i], 0);
    }
    for (l = layers; l-- > 0 && !g.rc;) {
        uint32_t grad;

        g_op(&g, bwd);
        grad = g_alloc(&g, 1, (4u + 4u * (rnd(&g) % 2)) << 20);
        for (i = (int)nact[l] - 1; i >= 0; i--) {
            g_access(&g, act[l][i], 0);
            g_temps(&g, 1);
            g_access(&g, grad, 1);
            g_free(&g, act[l][i]);
        }
        g_free(&g, grad);
        g_alloc(&g, 0, (1u << 20) << rnd(&g) % 3); /* parameter gradient: retained */
    }
    while (t->nev < nev && !g.rc)
        g_op(&g, UINT32_MAX);
    free(act);
    free(nact);
    return g.rc ? g.rc : hoff__trace_finish(t);
}

/* --- the benchmark ---------------------------------------------------------- */

struct result {
    size_t events;
    uint32_t blocks;
    uint64_t candidates, actions, evictions, budget, offload_peak, peak, d2h, h2d, plan_ns;
    uint64_t stall_ns;  /* the planner's predicted stall per step (UINT64_MAX: it predicts none) */
    uint64_t greedy_ns; /* greedy on the same trace, its runs interleaved with the planner's (0: the
                           planner is greedy): the machine is shared, so the ratio is the figure to compare */
    int feasible;
};

/* --time MS: the planner's time budget (HOFF_PLAN_TIME), 0 = none. */
static uint64_t time_ns;

static int run(const struct hoff__planner *pl, size_t nev, int reps, struct result *r) {
    struct hoff__plan_opts o;
    struct hoff__schedule s;
    struct hoff__trace t;
    size_t peak_ev, i;
    int rc, k;

    rc = gen_trace(&t, nev, 0x6f666670u + nev);
    if (rc) {
        hoff__trace_destroy(&t);
        return rc;
    }
    memset(r, 0, sizeof *r);
    memset(&o, 0, sizeof o);
    r->events = t.nev;
    r->blocks = t.nblocks;
    r->offload_peak = hoff__trace_offload_peak(&t, NULL, &peak_ev);
    o.budget_bytes = r->offload_peak / 4 ? r->offload_peak / 4 : 1;
    o.guard_after_alloc = 2;
    o.guard_before_free = 2;
    o.h2d_gbps = o.d2h_gbps = 50;
    r->budget = o.budget_bytes;
    r->plan_ns = UINT64_MAX;
    hoff__schedule_init(&s);
    r->greedy_ns = pl != &hoff__planner_greedy ? UINT64_MAX : 0;
    for (k = 0; k < reps; k++) {
        if (r->greedy_ns) {
            struct hoff__schedule gs;

            hoff__schedule_init(&gs);
            rc = hoff__plan_build(&hoff__planner_greedy, &t, &o, &gs);
            if (!rc && gs.plan_ns < r->greedy_ns)
                r->greedy_ns = gs.plan_ns;
            hoff__schedule_destroy(&gs);
            if (rc)
                break;
        }
        o.deadline_ns = hoff__plan_deadline(time_ns);
        rc = hoff__plan_build(pl, &t, &o, &s);
        o.deadline_ns = 0;
        if (rc)
            break;
        if (s.plan_ns < r->plan_ns)
            r->plan_ns = s.plan_ns;
    }
    if (!rc) {
        uint64_t peak;
        uint32_t pev;

        /* The plan must achieve what it claims (outside the timing). */
        rc = hoff__schedule_peak(&t, &s, &peak, &pev);
        if (!rc && (peak != s.peak_bytes || pev != s.peak_ev)) {
            fprintf(stderr,
                    "bench/plan: %s claims a peak of %" PRIu64 " at event %" PRIu32 ", the schedule reaches %" PRIu64
                    " at %" PRIu32 "\n",
                    pl->name, s.peak_bytes, s.peak_ev, peak, pev);
            rc = -EPROTO;
        }
    }
    if (!rc) {
        r->candidates = s.candidates;
        r->actions = s.nact;
        for (i = 0; i < s.nact; i++)
            r->evictions += s.act[i].kind == HOFF__ACT_EVICT;
        r->peak = s.peak_bytes;
        r->stall_ns = s.stall_ns;
        r->feasible = s.feasible;
        r->d2h = s.bytes_d2h;
        r->h2d = s.bytes_h2d;
    }
    hoff__schedule_destroy(&s);
    hoff__trace_destroy(&t);
    return rc;
}

static void usage(FILE *f, const struct bench_args *ba) {
    fprintf(f, "usage: bench/plan [--json] [--planner NAME] [--reps N] [--events 10000|100000|1000000] [--time MS]\n"
               "Plans generated training-shaped traces of 10^4, 10^5 and 10^6 events under a\n"
               "budget of 25%% of each trace's offload peak; prints the planning time (best of N\n"
               "runs, default 3), its ratio to greedy's on the same trace (runs interleaved: the\n"
               "machine may be shared) and its growth from one size to the next; --events: that\n"
               "size only; --time: the planner's time budget (HOFF_PLAN_TIME).\n");
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                             {"planner", required_argument, NULL, 'p'},
                                             {"reps", required_argument, NULL, 'r'},
                                             {"events", required_argument, NULL, 'e'},
                                             {"time", required_argument, NULL, 't'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    static const size_t sizes[] = {10000, 100000, 1000000};
    struct result r[3];
    const struct hoff__planner *pl;
    const char *planner = "greedy";
    int json = 0, reps = 3, opt, i, rc, only = -1;
    struct bench_args ba = {"bench/plan", usage, argc, argv, 0};

    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'j': json = 1; break;
        case 'p': planner = optarg; break;
        case 'r': reps = (int)bench_args_uint(&ba, "--reps", optarg, 1, 100); break;
        case 't':
            time_ns = (uint64_t)(bench_args_real(&ba, "--time", optarg, "a time budget in ms", 0, 3600e3) * 1e6 + 0.5);
            break;
        case 'e':
            for (i = 0; i < 3; i++)
                if (strcmp(optarg, i == 0 ? "10000" : i == 1 ? "100000" : "1000000") == 0)
                    only = i;
            if (only < 0)
                bench_args_bad(&ba, "--events", optarg, "10000, 100000 or 1000000");
            break;
        case 'h': bench_args_help(&ba); break;
        default: usage(stderr, &ba); return 2;
        }
    }
    pl = hoff__planner_find(planner);
    if (!pl) {
        char names[256] = "";

        for (i = 0; hoff__planner_at(i); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "one of ",
                     hoff__planner_at(i)->name);
        bench_args_bad(&ba, "--planner", planner, names);
    }
    if (!json)
        printf("%-10s %8s %10s %8s %10s %10s %10s %9s %12s %12s\n", "events", "blocks", "candidates", "actions",
               "budget", "nopeak", "peak", "feasible", "plan_ms", "x_greedy");
    for (i = 0; i < 3; i++) {
        if (only >= 0 && i != only)
            continue;
        rc = run(pl, sizes[i], reps, &r[i]);
        if (rc) {
            fprintf(stderr, "bench/plan: %zu events: %s\n", sizes[i], strerror(-rc));
            return 1;
        }
        if (json)
            printf("{\"bench\":\"plan\",\"planner\":\"%s\",\"events\":%zu,\"blocks\":%" PRIu32
                   ",\"candidates\":%" PRIu64 ",\"actions\":%" PRIu64 ",\"evictions\":%" PRIu64
                   ",\"budget_bytes\":%" PRIu64 ",\"offload_peak_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64
                   ",\"feasible\":%d,\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64 ",\"plan_ns\":%" PRIu64
                   ",\"greedy_plan_ns\":%" PRIu64 ",\"ratio_vs_greedy\":%.2f,\"stall_ns\":%" PRId64
                   ",\"time_budget_ns\":%" PRIu64 "}\n",
                   pl->name, r[i].events, r[i].blocks, r[i].candidates, r[i].actions, r[i].evictions, r[i].budget,
                   r[i].offload_peak, r[i].peak, r[i].feasible, r[i].d2h, r[i].h2d, r[i].plan_ns,
                   r[i].greedy_ns ? r[i].greedy_ns : r[i].plan_ns,
                   (double)r[i].plan_ns / (double)(r[i].greedy_ns ? r[i].greedy_ns : r[i].plan_ns),
                   r[i].stall_ns == UINT64_MAX ? (int64_t)-1 : (int64_t)r[i].stall_ns, time_ns);
        else
            printf("%-10zu %8" PRIu32 " %10" PRIu64 " %8" PRIu64 " %9.1fG %9.1fG %9.1fG %9s %12.3f %12.2f\n",
                   r[i].events, r[i].blocks, r[i].candidates, r[i].actions, r[i].budget / 1073741824.0,
                   r[i].offload_peak / 1073741824.0, r[i].peak / 1073741824.0, r[i].feasible ? "yes" : "no",
                   r[i].plan_ns / 1e6, (double)r[i].plan_ns / (double)(r[i].greedy_ns ? r[i].greedy_ns : r[i].plan_ns));
        fflush(stdout);
    }
    if (only < 0) {
        double g65 = (double)r[2].plan_ns / (double)(r[1].plan_ns ? r[1].plan_ns : 1);
        double g54 = (double)r[1].plan_ns / (double)(r[0].plan_ns ? r[0].plan_ns : 1);

        if (json)
            printf("{\"bench\":\"plan\",\"planner\":\"%s\",\"growth_1e6_1e5\":%.2f,\"growth_1e5_1e4\":%.2f,"
                   "\"plan_ns_1e6\":%" PRIu64 ",\"under_1s_at_1e6\":%s}\n",
                   pl->name, g65, g54, r[2].plan_ns, r[2].plan_ns < 1000000000u ? "true" : "false");
        else
            printf("growth: plan_ns(10^6)/plan_ns(10^5) = %.2f, plan_ns(10^5)/plan_ns(10^4) = %.2f "
                   "(O(M log S): ~10-15; quadratic: ~100)\n",
                   g65, g54);
    }
    return 0;
}
