/* model.c — hoff-plan model: the planner-independent view of a trace under a budget, for bounds
 * (bench/bound.py): event times on the clock simulate drives, resident bytes, the candidate gaps.
 * Threading: single-threaded. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hoff-plan.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-plan model TRACE --budget SIZE|PCT%% [options]\n"
               "Prints what every planner starts from, for lower bounds on the stall (bench/bound.py):\n"
               "each event's time on the clock 'simulate' models, the resident offload bytes at each\n"
               "event with the planned releases and no offload, and every candidate gap (evict after\n"
               "event a, back before event b).\n"
               "\n"
               "  --budget SIZE|PCT%%       resident offload bytes allowed: a size (512M, 2G; 0 = no\n"
               "                           limit) or a percentage of the trace's offload peak\n"
               "  --bandwidth GBPS         the H2D and D2H copy engines, GB/s (default 50)\n"
               "  --compute-scale X        divide the trace's compute gaps by X (default 1)\n"
               "  --gpu-step MS            scale the compute gaps so a step computes for MS ms\n"
               "  --guard-after-alloc N    blocks without access marks: events after the alloc\n"
               "                           before an eviction (default 1)\n"
               "  --guard-before-free N    ...and events before the free by which they are back\n"
               "                           (default 1)\n"
               "  --json                   print the model as one JSON object (default: a summary)\n"
               "  -h, --help               this text\n"
               "\n"
               "JSON fields: trace, budget_bytes, nopeak_bytes, offload_peak_bytes, h2d_gbps, d2h_gbps,\n"
               "latency_ns, fault_gbps, fault_ns, nev, step_ns, t_ns[nev], resident[nev],\n"
               "gaps[[a, b, size, block], ...] (b == nev: away to the step's end, no prefetch) and\n"
               "runtime_gaps[[a, b, size, block], ...] (away on a+1 .. b-1 with no prefetch: what\n"
               "evictions on demand can use besides the gaps).\n"
               "\n"
               "Exit status: 0 ok, 1 unreadable trace or out of memory, 2 bad usage.\n");
}

/* The model of one trace. */
struct model {
    struct hp_args a;
    struct hp_trace ht;
    struct hoff_config defaults; /* the sim's per-call and page-in costs */
    struct hoff__plan_opts po;
    struct hoff__schedule s;
    struct hoff__gap *gaps;
    size_t ngaps;
    uint64_t *t_ns, step_ns;
    int64_t *res;
};

/* What the runtime's evictions on demand can use besides the gaps: a block
 * with no access after its alloc can stay away from its alloc to its free, a
 * retained one after its last access to the step's end; neither comes back
 * in the step. */
static void print_runtime_gaps(const struct model *m) {
    const struct hoff__trace *t = &m->ht.t;
    size_t i;
    int first = 1;

    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];
        uint32_t a, e;

        if (!hoff__plan_movable(b))
            continue;
        if (b->naccess <= 1) {
            a = b->alloc_ev;
            e = b->retained ? (uint32_t)t->nev : b->free_ev + 1;
        } else if (b->retained) {
            a = t->acc[b->first_access + b->naccess - 1].ev;
            e = (uint32_t)t->nev;
        } else {
            continue;
        }
        if (e <= a + 1)
            continue;
        printf("%s[%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%zu]", first ? "" : ",", a, e,
               hoff__plan_bytes(m->po.block_bytes, b), i);
        first = 0;
    }
}

static void print_json(const struct model *m) {
    const struct hoff__trace *t = &m->ht.t;
    size_t i;

    printf("{\"trace\":");
    hp_json_str(stdout, m->a.trace_path);
    printf(",\"budget_bytes\":%" PRIu64 ",\"nopeak_bytes\":%" PRIu64 ",\"offload_peak_bytes\":%" PRIu64
           ",\"h2d_gbps\":%g,\"d2h_gbps\":%g,\"latency_ns\":%" PRIu64 ",\"fault_gbps\":%g,\"fault_ns\":%" PRIu64
           ",\"nev\":%zu,\"step_ns\":%" PRIu64,
           m->po.budget_bytes, m->s.nopeak_bytes, m->ht.offload_peak, m->a.bandwidth, m->a.bandwidth,
           m->defaults.sim_latency_ns, m->defaults.sim_fault_gbps, m->defaults.sim_fault_ns, t->nev, m->step_ns);
    printf(",\"t_ns\":[");
    for (i = 0; i < t->nev; i++)
        printf("%s%" PRIu64, i ? "," : "", m->t_ns[i]);
    printf("],\"resident\":[");
    for (i = 0; i < t->nev; i++)
        printf("%s%" PRId64, i ? "," : "", m->res ? m->res[i] : 0);
    printf("],\"gaps\":[");
    for (i = 0; i < m->ngaps; i++)
        printf("%s[%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%" PRIu32 "]", i ? "," : "", m->gaps[i].a, m->gaps[i].b,
               m->gaps[i].size, m->gaps[i].block);
    printf("],\"runtime_gaps\":[");
    print_runtime_gaps(m);
    printf("]}\n");
}

static void print_summary(const struct model *m) {
    uint64_t max_res = 0, over = 0;
    size_t i;

    for (i = 0; i < m->ht.t.nev && m->res; i++) {
        if ((uint64_t)m->res[i] > max_res)
            max_res = (uint64_t)m->res[i];
        if (m->po.budget_bytes && (uint64_t)m->res[i] > m->po.budget_bytes)
            over++;
    }
    printf("trace: %s (%zu events, %" PRIu32 " blocks)\n", m->a.trace_path, m->ht.t.nev, m->ht.t.nblocks);
    printf("budget: %s; offload peak %s without offload, %s with the releases planned\n",
           m->po.budget_bytes ? SZ(m->po.budget_bytes) : "none", SZ(m->s.nopeak_bytes), SZ(max_res));
    printf("events over the budget: %" PRIu64 "\n", over);
    printf("gaps: %zu\n", m->ngaps);
    printf("clock: step computes for %s; copy engines %g GB/s each way, %s per call\n", TM(m->step_ns), m->a.bandwidth,
           TM(m->defaults.sim_latency_ns));
}

/* The clock, the resident bytes and the gaps.  0 or EXIT_FAIL (reported). */
static int build(struct model *m) {
    struct hoff__drive_opts dopt;
    struct hoff__plan_opts pb = m->po;
    int rc;

    /* The clock 'simulate' drives the trace on (lib/trace/drive.c). */
    hp_drive_opts(&m->a, &dopt);
    m->t_ns = calloc(m->ht.t.nev ? m->ht.t.nev : 1, sizeof *m->t_ns);
    if (!m->t_ns || hoff__drive_clock(&m->ht.t, &dopt, m->t_ns, &m->step_ns) != 0) {
        fprintf(stderr, "%s model: out of memory\n", hp_cmd);
        return EXIT_FAIL;
    }
    /* The resident bytes every planner starts from: with no limit the
     * prologue plans no releases, so ask it with the largest budget. */
    if (pb.budget_bytes == 0)
        pb.budget_bytes = UINT64_MAX;
    rc = hoff__plan_begin("model", &m->ht.t, &pb, &m->s, &m->res);
    if (rc == 0)
        rc = hoff__plan_gaps(&m->ht.t, &m->po, &m->gaps, &m->ngaps);
    if (rc) {
        fprintf(stderr, "%s model: %s: %s\n", hp_cmd, m->a.trace_path,
                hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        return EXIT_FAIL;
    }
    return 0;
}

int hp_cmd_model(int argc, char **argv) {
    const uint64_t accepted = HP_F(BUDGET) | HP_F(BANDWIDTH) | HP_F(COMPUTE_SCALE) | HP_F(GPU_STEP) |
                              HP_F(GUARD_AFTER) | HP_F(GUARD_BEFORE) | HP_F(JSON) | HP_F(HELP);
    struct model m;
    int rc;

    memset(&m, 0, sizeof m);
    rc = hp_parse("model", argc, argv, accepted, usage, &m.a);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    if ((rc = hp_trace_operand(&m.a, argc, argv, 1, 0)) != 0 || (rc = hp_trace_load(&m.a, 1, &m.ht)) != 0)
        return rc;
    hoff_config_init(&m.defaults);
    hp_plan_opts(&m.a, m.ht.budget, &m.po);
    hoff__schedule_init(&m.s);
    if ((rc = build(&m)) == 0) {
        if (m.a.json)
            print_json(&m);
        else
            print_summary(&m);
    }
    free(m.gaps);
    free(m.res);
    free(m.t_ns);
    hoff__schedule_destroy(&m.s);
    hoff__trace_destroy(&m.ht.t);
    return rc;
}
