/* report.c — what the demo prints: the run's first lines, a step's line, the plan's line, the summary, or the
 * whole run as one JSON object (sizes and times in words by lib/core's hoff__fmt_size and hoff__fmt_time).
 * Threading: single-threaded. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hoff-demo.h"

const char *res_name(int r) {
    switch (r) {
    case HOFF_RES_DEVICE: return "device";
    case HOFF_RES_EVICTING: return "evicting";
    case HOFF_RES_HOST: return "host";
    case HOFF_RES_PREFETCHING: return "prefetching";
    case HOFF_RES_DISCARDED: return "discarded";
    case HOFF_RES_SPILLING: return "spilling";
    case HOFF_RES_NVME: return "nvme";
    case HOFF_RES_RESTORING: return "restoring";
    default: return "?";
    }
}

const char *mode_name(int m) {
    return m == MODE_MANUAL ? "manual" : "plan";
}

/* MB/s (the stats' unit) as GB/s. */
static double gbps(uint64_t mbps) {
    return (double)mbps / 1000.0;
}

void print_plan(const struct demo *d, const struct hoff_stats *st, const char *planner) {
    printf("plan: %s, %" PRIu64 " actions, ", planner, st->plan_actions);
    if (st->plan_feasible)
        printf("feasible (peak %s, working-set floor %s in the %s pass)", SZ(st->plan_peak_bytes),
               SZ(st->plan_floor_bytes), hoff_phase_name((int)st->plan_floor_phase));
    else if (d->budget && d->budget < st->plan_floor_bytes)
        printf("NOT feasible (the budget %s is below the working-set floor %s in the %s pass: the bytes one op "
               "uses; planned for the floor)",
               SZ(d->budget), SZ(st->plan_floor_bytes), hoff_phase_name((int)st->plan_floor_phase));
    else
        printf("NOT feasible (lowest peak %s, over the budget %s)", SZ(st->plan_peak_bytes), SZ(d->budget));
    printf(", planned in %s, bandwidths %g GB/s H2D and %g GB/s D2H\n", TM(st->plan_ns), gbps(st->h2d_mbps),
           gbps(st->d2h_mbps));
}

void print_json(struct demo *d, const struct hoff_stats *st, int within_budget, int params_ok, const char *planner) {
    char *stats_json = NULL;
    int n = hoff_stats_json(d->ctx, NULL, 0);

    if (n > 0 && (stats_json = malloc((size_t)n + 1)) != NULL &&
        hoff_stats_json(d->ctx, stats_json, (size_t)n + 1) < 0) {
        free(stats_json);
        stats_json = NULL;
    }
    printf("{\"backend\":\"%s\",\"mode\":\"%s\",\"layers\":%u,\"hidden\":%u,\"seq\":%u,"
           "\"batch\":%u,\"steps\":%u,\"lookahead\":%u,\"tflops\":%g,",
           hoff_backend_name(d->ctx), mode_name(d->mode), d->layers, d->hidden, d->seq, d->batch, d->steps,
           d->lookahead, d->tflops);
    printf("\"param_bytes\":%" PRIu64 ",\"activation_bytes_per_step\":%" PRIu64 ",\"activation_peak_bytes\":%" PRIu64
           ",\"budget_bytes\":%" PRIu64 ",",
           d->param_bytes, d->act_bytes_layer * d->layers, d->act_peak, d->budget);
    if (d->budget_pct >= 0)
        printf("\"budget_percent\":%.4g,", d->budget_pct);
    printf("\"compute_modelled\":%s,\"step_reports\":[", d->compute_modelled ? "true" : "false");
    for (unsigned s = 0; s < d->steps; s++) {
        const struct step_report *r = &d->rep[s];
        printf("%s{\"step\":%u,\"state\":\"%s\",\"planning\":%s,\"planned\":%s,\"time_ns\":%" PRIu64
               ",\"host_ns\":%" PRIu64 ",\"plan_wait_ns\":%" PRIu64 ",\"compute_ns\":%" PRIu64 ",\"stall_ns\":%" PRIu64
               ",\"bytes_evicted\":%" PRIu64 ",\"bytes_prefetched\":%" PRIu64 ",\"faults\":%" PRIu64
               ",\"bytes_faulted\":%" PRIu64 ",\"late_prefetches\":%" PRIu64 ",\"prefetches_issued\":%" PRIu64
               ",\"prefetches_already_resident\":%" PRIu64 ",\"prefetches_no_space\":%" PRIu64
               ",\"actions_fired\":%" PRIu64 ",\"actions_skipped\":%" PRIu64 ",\"step_peak_resident_bytes\":%" PRIu64
               "}",
               s ? "," : "", s, hoff_plan_state_name((int)r->state), r->planning ? "true" : "false",
               r->planned ? "true" : "false", r->c.step_ns, r->host_ns, r->plan_wait_ns, r->c.compute_ns, r->c.stall_ns,
               r->c.bytes_d2h, r->c.bytes_h2d, r->c.faults, r->bytes_faulted, r->c.late_prefetches, r->prefetch_issued,
               r->prefetch_resident, r->prefetch_nospace, r->fired, r->skipped, r->c.peak_resident_bytes);
    }
    printf("],\"peak_resident_bytes\":%" PRIu64 ",\"within_budget\":%s,"
           "\"bytes_evicted\":%" PRIu64 ",\"bytes_prefetched\":%" PRIu64 ",\"faults\":%" PRIu64
           ",\"bytes_faulted\":%" PRIu64 ",\"stall_ns\":%" PRIu64 ",\"late_prefetches\":%" PRIu64
           ",\"params_on_device\":%s,",
           st->peak_resident_bytes, within_budget ? "true" : "false", st->bytes_evicted, st->bytes_prefetched,
           st->faults, st->bytes_faulted, st->stall_ns, st->late_prefetches, params_ok ? "true" : "false");
    printf("\"plan\":{\"planner\":\"%s\",\"plans\":%" PRIu64 ",\"actions\":%" PRIu64
           ",\"feasible\":%s,\"peak_bytes\":%" PRIu64 ",\"floor_bytes\":%" PRIu64 ",\"floor_phase\":\"%s\""
           ",\"plan_ns\":%" PRIu64 ",\"h2d_mbps\":%" PRIu64 ",\"d2h_mbps\":%" PRIu64
           ",\"thread\":%s,\"lag_steps\":%" PRIu64 ",\"lag_ns\":%" PRIu64 ",\"wait_ns\":%" PRIu64 ",\"pending\":%s},",
           planner, st->plans, st->plan_actions, st->plan_feasible ? "true" : "false", st->plan_peak_bytes,
           st->plan_floor_bytes, hoff_phase_name((int)st->plan_floor_phase), st->plan_ns, st->h2d_mbps, st->d2h_mbps,
           d->plan_thread ? "true" : "false", st->plan_lag_steps, st->plan_lag_ns, st->plan_wait_ns,
           st->plan_pending ? "true" : "false");
    printf("\"divergent_steps\":%" PRIu64 ",\"replans\":%" PRIu64 ",\"actions_fired\":%" PRIu64
           ",\"actions_skipped\":%" PRIu64 ",",
           st->divergent_steps, st->replans, st->actions_fired, st->actions_skipped);
    printf("\"integrity\":{\"ok\":%s,\"blocks\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"first_bad\":",
           d->bad.found ? "false" : "true", d->verified_blocks, d->verified_bytes);
    if (d->bad.found)
        printf("{\"step\":%d,\"layer\":%d,\"block\":\"%s\",\"offset\":%zu,\"expected\":%u,"
               "\"got\":%u,\"residency\":\"%s\"}}",
               d->bad.step, d->bad.layer, d->bad.name, d->bad.offset, d->bad.expected, d->bad.got,
               res_name(d->bad.residency));
    else
        printf("null}");
    printf(",\"stats\":%s}\n", stats_json ? stats_json : "null");
    free(stats_json);
}

void print_step(struct demo *d, unsigned s) {
    const struct step_report *r = &d->rep[s];

    printf("step %u (%s%s): %s", s, hoff_plan_state_name((int)r->state), r->planning ? ", planning" : "",
           TM(r->c.step_ns));
    if (d->compute_modelled)
        printf(" (compute %s, stall %s)", TM(r->c.compute_ns), TM(r->c.stall_ns));
    else
        printf(" (stall %s)", TM(r->c.stall_ns));
    printf(", evicted %s, prefetched %s, faults %" PRIu64, SZ(r->c.bytes_d2h), SZ(r->c.bytes_h2d), r->c.faults);
    if (r->c.faults)
        printf(" (%s)", SZ(r->bytes_faulted));
    printf(", late prefetches %" PRIu64 ", actions fired %" PRIu64 " skipped %" PRIu64 ", peak resident %s\n",
           r->c.late_prefetches, r->fired, r->skipped, SZ(r->c.peak_resident_bytes));
}

/* The run's first lines: the model, the backend and the workload. */
void print_intro(const struct demo *d, const struct hoff_config *cfg) {
    unsigned ncand = 0;

    printf("hoff-demo: %u layers, hidden %u, seq %u, batch %u, %u steps, mode %s\n", d->layers, d->hidden, d->seq,
           d->batch, d->steps, mode_name(d->mode));
    printf("backend: %s\n", hoff_backend_name(d->ctx));
    if (d->compute_modelled && strcmp(hoff_backend_name(d->ctx), "sim") == 0)
        printf("sim model: compute at %g TFLOP/s (forward %s, backward %s per layer), "
               "copy engines %g GB/s H2D and %g GB/s D2H\n",
               d->tflops, TM(d->fwd_ns), TM(d->bwd_ns), cfg->sim_h2d_gbps, cfg->sim_d2h_gbps);
    printf("parameters: %s in %" PRIu64 " blocks (device pool, never offloaded)\n", SZ(d->param_bytes), d->nparams);
    for (int j = 0; j < d->nspec; j++)
        ncand += (unsigned)d->spec[j].candidate;
    printf("activations per step: %s in %u blocks (%u offload candidates of >= %s)\n",
           SZ(d->act_bytes_layer * d->layers), d->layers * (unsigned)d->nspec, d->layers * ncand,
           SZ(cfg->managed_min_bytes));
}

/* The run's last lines: the budget, the traffic, the plans and the integrity. */
void print_summary(const struct demo *d, const struct hoff_stats *st, int within_budget, int params_ok) {
    printf("activation peak without offload: %s\n", SZ(d->act_peak));
    if (d->budget == 0)
        printf("budget: none (no limit)\n");
    else if (d->budget_pct >= 0)
        printf("budget: %s (%.4g%% of the peak)\n", SZ(d->budget), d->budget_pct);
    else
        printf("budget: %s\n", SZ(d->budget));
    printf("peak resident offload bytes: %s (%s)\n", SZ(st->peak_resident_bytes),
           within_budget ? "within budget" : "OVER BUDGET");
    printf("evicted: %s in %" PRIu64 " evictions (%" PRIu64 " forced by the budget)\n", SZ(st->bytes_evicted),
           st->evictions, st->budget_evictions);
    printf("prefetched: %s in %" PRIu64 " prefetches\n", SZ(st->bytes_prefetched), st->prefetches);
    printf("faults: %" PRIu64 " (%s paged in on demand)\n", st->faults, SZ(st->bytes_faulted));
    if (d->compute_modelled) {
        uint64_t comp = 0;
        for (unsigned s = 0; s < d->steps; s++)
            comp += d->rep[s].c.compute_ns;
        printf("stall: %s (on %s of modelled compute, %.1f%%)\n", TM(st->stall_ns), TM(comp),
               comp ? 100.0 * (double)st->stall_ns / (double)comp : 0.0);
    } else {
        printf("stall: %s\n", TM(st->stall_ns));
    }
    printf("late prefetches: %" PRIu64 "\n", st->late_prefetches);
    printf("plans: %" PRIu64 " (%" PRIu64 " replans), divergent steps: %" PRIu64 "\n", st->plans, st->replans,
           st->divergent_steps);
    printf("planning: %s; steps run under the online policy while planning: %" PRIu64 " (the last plan: %" PRIu64
           ", ready %s after its recording); the training thread waited %s for it\n",
           d->plan_thread ? "on the planning thread" : "on the training thread (HOFF_PLAN_THREAD=0)",
           st->plan_online_steps, st->plan_lag_steps, TM(st->plan_lag_ns), TM(st->plan_wait_ns));
    printf("actions: %" PRIu64 " fired, %" PRIu64 " skipped\n", st->actions_fired, st->actions_skipped);
    printf("parameters: %s\n", params_ok ? "stayed on the device" : "MOVED (unexpected)");
    if (d->bad.found)
        printf("integrity: FAILED (step %d, layer %d, block %s, byte %zu: expected 0x%02x, "
               "got 0x%02x, residency %s)\n",
               d->bad.step, d->bad.layer, d->bad.name, d->bad.offset, d->bad.expected, d->bad.got,
               res_name(d->bad.residency));
    else
        printf("integrity: OK (%" PRIu64 " blocks, %s verified)\n", d->verified_blocks, SZ(d->verified_bytes));
}
