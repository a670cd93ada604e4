/* simulate.c — hoff-plan simulate: replay a trace on the sim backend under a budget (a warmup that records and
 * plans, replay steps that fire the plan, every block stamped and checked) and without one, and report.
 * Threading: one thread drives the API; the library's issuing thread runs behind it. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hoff-plan.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-plan simulate TRACE --budget SIZE|PCT%% [options]\n"
               "Replays TRACE on the sim backend under a budget: a warmup step that records and plans,\n"
               "then replay steps that fire the plan, every block stamped and checked; and the same\n"
               "trace without a budget for the step time it is compared with.\n"
               "\n"
               "  --budget SIZE|PCT%%  resident offload bytes allowed: a size (512M, 2G; 0 = no limit)\n"
               "                      or a percentage of the trace's offload peak without offload\n"
               "  --host-cap SIZE     host-tier bytes (default: no limit)\n"
               "  --spill-dir DIR     NVMe tier: spill what passes the host cap to files in DIR\n"
               "  --bandwidth GBPS    the sim's H2D and D2H copy engines, and what the planner\n"
               "                      assumes, GB/s (default 50)\n"
               "  --planner NAME      planner (default timed; 'hoff-plan show --help' lists them)\n"
               "  --groups on|off     co-located groups: blocks the plan prefetches together share one\n"
               "                      mapping and move with one call (default on, as HOFF_GROUPS)\n"
               "  --steps N           steps to run, the first being the warmup (default 3, >= 2)\n"
               "  --compute-scale X   divide the trace's compute gaps by X (default 1)\n"
               "  --gpu-step MS       scale the compute gaps so a step computes for MS milliseconds\n"
               "  --no-memory-check   run even when the machine's available memory looks too small\n"
               "                      for the simulation (the sim backs every block with real memory)\n"
               "  --json              print one JSON object instead of the report\n"
               "  -h, --help          this text\n"
               "\n"
               "Exit status: 0 ok, 1 integrity failure, replay peak above the budget, unreadable\n"
               "trace or runtime error, 2 bad usage, 3 refused: the machine has too little memory\n"
               "available now (--no-memory-check).\n");
}

struct sim_run {
    struct hoff__drive_result r;                       /* all steps, merged */
    struct hoff_stats last;                            /* stats after the run */
    uint64_t last_fired, last_skipped, last_divergent; /* the last step's deltas */
    uint64_t divergent_steps;
};

/* A finished simulation: the runs with and without the budget and what the report says of them. */
struct sim {
    struct hp_args a;
    struct hp_trace ht;
    struct sim_size z;
    struct sim_run run, base;
    uint64_t no_offload_ns;
    int integrity_ok, within, below_floor;
};

/* Append src's steps to dst (dst->step has room for all). */
static void merge(struct hoff__drive_result *dst, const struct hoff__drive_result *src) {
    int k;

    for (k = 0; k < src->steps; k++)
        dst->step[dst->steps++] = src->step[k];
    dst->peak_device_bytes =
        src->peak_device_bytes > dst->peak_device_bytes ? src->peak_device_bytes : dst->peak_device_bytes;
    dst->blocks_verified += src->blocks_verified;
    dst->bytes_verified += src->bytes_verified;
    dst->integrity_errors += src->integrity_errors;
    if (!dst->first_error[0] && src->first_error[0])
        memcpy(dst->first_error, src->first_error, sizeof dst->first_error);
}

/* Drive t through ctx for steps steps; the last step is driven on its own
 * so that its action counters are exact. */
static int run_sim(hoff_ctx *ctx, const struct hoff__trace *t, const struct hp_args *a, int steps, int verify,
                   struct sim_run *out) {
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    struct hoff_stats s0;
    int rc, k;

    memset(out, 0, sizeof *out);
    out->r.step = calloc((size_t)steps, sizeof *out->r.step);
    if (!out->r.step)
        return -ENOMEM;
    hp_drive_opts(a, &o);
    o.verify = verify;
    for (k = 0; k < 2; k++) {
        o.steps = k == 0 ? steps - 1 : 1;
        if ((rc = hoff_stats_get(ctx, &s0)) != 0)
            return rc;
        rc = hoff__trace_drive(ctx, t, &o, &r);
        merge(&out->r, &r);
        hoff__drive_result_free(&r);
        if (rc)
            return rc;
        if ((rc = hoff_stats_get(ctx, &out->last)) != 0)
            return rc;
        out->last_fired = out->last.actions_fired - s0.actions_fired;
        out->last_skipped = out->last.actions_skipped - s0.actions_skipped;
        out->last_divergent = out->last.divergent_steps - s0.divergent_steps;
    }
    out->divergent_steps = out->last.divergent_steps;
    for (k = 1; k < out->r.steps; k++)
        if (out->r.step[k].peak_resident_bytes > out->r.peak_resident_bytes)
            out->r.peak_resident_bytes = out->r.step[k].peak_resident_bytes;
    return 0;
}

/* One run of the trace on a fresh sim context (budget 0: none).  0 or -1 (reported). */
static int run_once(struct sim *m, uint64_t budget, int steps, int verify, struct sim_run *out) {
    hoff_ctx *ctx = NULL;
    int rc;

    if (hp_make_ctx(&m->a, budget, m->z.device_bytes, &ctx))
        return -1;
    rc = run_sim(ctx, &m->ht.t, &m->a, steps, verify, out);
    hoff_shutdown(ctx);
    if (rc) {
        fprintf(stderr, "%s simulate: %s%s: %s\n", hp_cmd, m->a.trace_path, budget ? "" : " (no budget)",
                hoff_last_error());
        return -1;
    }
    return 0;
}

static void json_step(FILE *f, const struct hoff__drive_step *s) {
    fprintf(f,
            "{\"state\":\"%s\",\"step_ns\":%" PRIu64 ",\"compute_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64
            ",\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64
            ",\"faults\":%" PRIu64 ",\"late_prefetches\":%" PRIu64 ",\"peak_resident_bytes\":%" PRIu64 "}",
            hoff_plan_state_name((int)s->plan_state), s->step_ns, s->compute_ns, s->stall_ns, s->bytes_d2h,
            s->bytes_h2d, s->evictions, s->prefetches, s->faults, s->late_prefetches, s->peak_resident_bytes);
}

static void report_json(const struct sim *m) {
    const struct sim_run *run = &m->run;
    const struct hoff_stats *st = &run->last;
    const struct hoff__drive_step *ls = &run->r.step[run->r.steps - 1];
    int k;

    printf("{\"trace\":");
    hp_json_str(stdout, m->a.trace_path);
    printf(",\"planner\":");
    hp_json_str(stdout, m->a.planner);
    printf(",\"events\":%zu,\"blocks\":%" PRIu32 ",\"steps\":%d,\"bandwidth_gbps\":%g", m->ht.t.nev, m->ht.t.nblocks,
           run->r.steps, m->a.bandwidth);
    printf(",\"offload_peak_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64, m->ht.offload_peak, m->ht.budget);
    if (m->a.budget.pct >= 0)
        printf(",\"budget_pct\":%g", m->a.budget.pct);
    printf(",\"host_cap_bytes\":%" PRIu64 ",\"peak_resident_bytes\":%" PRIu64 ",\"within_budget\":%s"
           ",\"peak_device_bytes\":%" PRIu64,
           m->a.host_cap, run->r.peak_resident_bytes, hp_yes(m->within), run->r.peak_device_bytes);
    printf(",\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64,
           ls->bytes_d2h, ls->bytes_h2d, ls->evictions, ls->prefetches);
    printf(",\"evict_calls\":%" PRIu64 ",\"prefetch_calls\":%" PRIu64 ",\"groups\":%s,\"plan_groups\":%" PRIu64
           ",\"group_calls_saved\":%" PRIu64 ",\"group_fallbacks\":%" PRIu64 ",\"plan_stall_ns\":%" PRIu64,
           ls->evict_calls, ls->prefetch_calls, hp_yes(m->a.groups), st->plan_groups, st->group_calls_saved,
           st->group_fallbacks, st->plan_stall_ns);
    /* the tiers, over the whole run */
    printf(",\"peak_host_bytes\":%" PRIu64 ",\"peak_nvme_bytes\":%" PRIu64 ",\"bytes_spilled\":%" PRIu64
           ",\"bytes_restored\":%" PRIu64 ",\"spill_failures\":%" PRIu64 ",\"crc_errors\":%" PRIu64
           ",\"host_cap_waits\":%" PRIu64,
           st->peak_host_bytes, st->peak_nvme_bytes, st->bytes_spilled, st->bytes_restored, st->spill_failures,
           st->crc_errors, st->host_cap_waits);
    printf(",\"actions\":%" PRIu64 ",\"actions_fired\":%" PRIu64 ",\"actions_skipped\":%" PRIu64, st->plan_actions,
           run->last_fired, run->last_skipped);
    printf(",\"faults\":%" PRIu64 ",\"late_prefetches\":%" PRIu64 ",\"stall_ns\":%" PRIu64 ",\"compute_ns\":%" PRIu64
           ",\"step_ns\":%" PRIu64 ",\"step_ns_no_offload\":%" PRIu64,
           ls->faults, ls->late_prefetches, ls->stall_ns, ls->compute_ns, ls->step_ns, m->no_offload_ns);
    printf(",\"floor_bytes\":%" PRIu64 ",\"plan_feasible\":%s,\"window_violations\":%" PRIu64
           ",\"window_refusals\":%" PRIu64,
           st->plan_floor_bytes, hp_yes(st->plan_feasible != 0), st->window_violations, st->window_refusals);
    printf(",\"plan_ns\":%" PRIu64 ",\"feasible\":%s,\"plan_peak_bytes\":%" PRIu64 ",\"plans\":%" PRIu64
           ",\"replans\":%" PRIu64 ",\"divergent_steps\":%" PRIu64 ",\"state\":\"%s\"",
           st->plan_ns, hp_yes(st->plan_feasible != 0), st->plan_peak_bytes, st->plans, st->replans,
           run->divergent_steps, hoff_plan_state_name((int)ls->plan_state));
    printf(",\"integrity_ok\":%s,\"integrity_errors\":%" PRIu64 ",\"blocks_verified\":%" PRIu64
           ",\"bytes_verified\":%" PRIu64 ",\"first_error\":",
           hp_yes(m->integrity_ok), run->r.integrity_errors, run->r.blocks_verified, run->r.bytes_verified);
    hp_json_str(stdout, run->r.first_error);
    printf(",\"warmup\":");
    json_step(stdout, &run->r.step[0]);
    printf(",\"per_step\":[");
    for (k = 0; k < run->r.steps; k++) {
        if (k)
            putchar(',');
        json_step(stdout, &run->r.step[k]);
    }
    printf("]}\n");
}

static void human_step(int k, const struct hoff__drive_step *s) {
    printf("step %d (%s): %s (compute %s, stall %s), evicted %s, prefetched %s, faults %" PRIu64
           ", late prefetches %" PRIu64 ", peak resident %s\n",
           k, hoff_plan_state_name((int)s->plan_state), TM(s->step_ns), TM(s->compute_ns), TM(s->stall_ns),
           SZ(s->bytes_d2h), SZ(s->bytes_h2d), s->faults, s->late_prefetches, SZ(s->peak_resident_bytes));
}

/* The report's head: the trace, the sim, the budget and the plan. */
static void report_head(const struct sim *m) {
    const struct hoff_stats *st = &m->run.last;
    uint64_t budget = m->ht.budget;

    printf("trace: %s (%zu events, %" PRIu32 " blocks, backend %s)\n", m->a.trace_path, m->ht.t.nev, m->ht.t.nblocks,
           m->ht.t.backend[0] ? m->ht.t.backend : "?");
    printf("sim: copy engines %g GB/s H2D and D2H, device %s; planner %s; %d steps (warmup + %d replays); "
           "memory about %s (%s available)\n",
           m->a.bandwidth, SZ(m->z.device_bytes), m->a.planner, m->run.r.steps, m->run.r.steps - 1, SZ(m->z.mem_bytes),
           m->z.avail_bytes ? SZ(m->z.avail_bytes) : "unknown");
    printf("offload peak without offload: %s (event %zu)\n", SZ(m->ht.offload_peak), m->ht.peak_ev);
    if (budget == 0)
        printf("budget: none\n");
    else if (m->a.budget.pct >= 0)
        printf("budget: %s (%g%% of the offload peak)\n", SZ(budget), m->a.budget.pct);
    else
        printf("budget: %s\n", SZ(budget));
    printf("plan: %" PRIu64 " actions, %s, plan peak %s, planned in %s; predicted stall %s a step; "
           "%" PRIu64 " co-located groups\n",
           st->plan_actions, st->plan_feasible ? "feasible" : "NOT feasible", SZ(st->plan_peak_bytes), TM(st->plan_ns),
           TM(st->plan_stall_ns), st->plan_groups);
    printf("working-set floor: %s (the blocks one op uses and the ones that cannot move; no plan goes "
           "below it)%s\n",
           SZ(st->plan_floor_bytes), m->below_floor ? ": the budget is infeasible" : "");
}

static void report_text(const struct sim *m) {
    const struct sim_run *run = &m->run;
    const struct hoff_stats *st = &run->last;
    int last = run->r.steps - 1, k;
    const struct hoff__drive_step *ls = &run->r.step[last];
    double slow =
        m->no_offload_ns ? 100.0 * ((double)ls->step_ns - (double)m->no_offload_ns) / (double)m->no_offload_ns : 0.0;

    report_head(m);
    for (k = 0; k < run->r.steps; k++)
        human_step(k, &run->r.step[k]);
    printf("last replay step (step %d):\n", last);
    printf("  peak resident offload bytes: %s over the replay steps (%s)\n", SZ(run->r.peak_resident_bytes),
           m->within ? (m->ht.budget ? "within budget" : "no budget") : "OVER BUDGET");
    printf("  peak device bytes: %s (both pools and resident offload bytes, whole run)\n",
           SZ(run->r.peak_device_bytes));
    printf("  evicted: %s in %" PRIu64 " evictions\n", SZ(ls->bytes_d2h), ls->evictions);
    printf("  host tier: peak %s%s%s; NVMe tier: peak %s, spilled %s, restored %s (whole run)\n",
           SZ(st->peak_host_bytes), m->a.host_cap ? " of a cap of " : "", m->a.host_cap ? SZ(m->a.host_cap) : "",
           SZ(st->peak_nvme_bytes), SZ(st->bytes_spilled), SZ(st->bytes_restored));
    printf("  prefetched: %s in %" PRIu64 " prefetches, %" PRIu64 " calls\n", SZ(ls->bytes_h2d), ls->prefetches,
           ls->prefetch_calls);
    printf("  actions: %" PRIu64 " planned, %" PRIu64 " fired, %" PRIu64 " skipped\n", st->plan_actions,
           run->last_fired, run->last_skipped);
    printf("  faults: %" PRIu64 "\n", ls->faults);
    printf("  late prefetches: %" PRIu64 "\n", ls->late_prefetches);
    printf("  exposed stall: %s\n", TM(ls->stall_ns));
    printf("  step time: %s vs %s without offload (%+.1f%%)\n", TM(ls->step_ns), TM(m->no_offload_ns), slow);
    printf("  divergent steps: %" PRIu64 " (whole run)\n", run->divergent_steps);
    printf("  use-window violations: %" PRIu64 " (whole run; 0 when correct)\n", st->window_violations);
    if (m->integrity_ok)
        printf("integrity: OK (%" PRIu64 " block checks, %s verified)\n", run->r.blocks_verified,
               SZ(run->r.bytes_verified));
    else
        printf("integrity: FAILED (%" PRIu64 " wrong stamps; first: %s)\n", run->r.integrity_errors,
               run->r.first_error);
}

/* Judge the run (the exit status) and say what failed on stderr. */
static int judge(struct sim *m) {
    const struct hoff_stats *st = &m->run.last;
    uint64_t budget = m->ht.budget, peak = m->run.r.peak_resident_bytes;

    m->no_offload_ns = m->base.r.step[m->base.r.steps - 1].step_ns;
    m->integrity_ok = m->run.r.integrity_errors == 0;
    m->within = budget == 0 || peak <= budget;
    /* A budget below the working-set floor is declared infeasible (the
     * plan's figures say so); the run then keeps the floor, not the budget. */
    m->below_floor = budget != 0 && budget < st->plan_floor_bytes;
    if (m->below_floor)
        fprintf(stderr,
                "%s simulate: the budget of %s is infeasible: below the working-set floor of %s "
                "(the blocks one op uses and the ones that cannot move); planned and checked at the floor\n",
                hp_cmd, SZ(budget), SZ(st->plan_floor_bytes));
    if (st->window_violations)
        fprintf(stderr, "%s simulate: %" PRIu64 " blocks moved or dropped inside an open use window\n", hp_cmd,
                st->window_violations);
    return m->integrity_ok && st->window_violations == 0 &&
                   (m->within || (m->below_floor && peak <= st->plan_floor_bytes))
               ? 0
               : EXIT_FAIL;
}

int hp_cmd_simulate(int argc, char **argv) {
    struct sim m;
    int rc, exit_code = EXIT_FAIL;

    memset(&m, 0, sizeof m);
    rc = hp_parse("simulate", argc, argv, HP_SIM_FLAGS | HP_F(GROUPS) | HP_F(JSON), usage, &m.a);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    if ((rc = hp_trace_operand(&m.a, argc, argv, 1, 1)) != 0)
        return rc;
    if ((rc = hp_trace_load(&m.a, 1, &m.ht)) != 0)
        return rc;
    if ((rc = hp_sim_size("simulate", &m.ht.t, m.ht.budget, m.ht.offload_peak, 0, m.a.no_mem_check, &m.z)) != 0) {
        hoff__trace_destroy(&m.ht.t);
        return rc;
    }
    /* The run under the budget, and the same trace without one: the step
     * time offloading is compared with. */
    if (run_once(&m, m.ht.budget, (int)m.a.steps, 1, &m.run) == 0 && run_once(&m, 0, 2, 0, &m.base) == 0) {
        exit_code = judge(&m);
        if (m.a.json)
            report_json(&m);
        else
            report_text(&m);
    }
    free(m.run.r.step);
    free(m.base.r.step);
    hoff__trace_destroy(&m.ht.t);
    return exit_code;
}
