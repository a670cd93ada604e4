/* step.c — one training step of the demo: forward allocates and writes each activation under its op mark,
 * backward reads it back (checking every byte), frees it, and in manual mode prefetches the next layers by
 * hand; the sim models the compute.  Threading: single-threaded (the library's issuing thread runs behind
 * the API). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hoff-demo.h"

int fail_call(const char *what, int rc) {
    fprintf(stderr, "hoff-demo: %s: %s (%s)\n", what, hoff_strerror(rc), hoff_last_error());
    return 1;
}

static void compute(struct demo *d, uint64_t ns, uint64_t *acc) {
    int rc;

    if (!d->compute_modelled)
        return;
    rc = hoff_sim_compute(d->ctx, d->stream, ns);
    if (rc == -ENOTSUP) {
        d->compute_modelled = 0;
        return;
    }
    if (rc == 0)
        *acc += ns;
}

/* An op boundary: the previous op's work is enqueued, so the use windows of
 * the blocks it used close here (hoff_mark_op(3)); the plan's actions are
 * attached to these marks, the allocations and the accesses. */
static int mark_op(struct demo *d, unsigned l, const char *phase) {
    char name[64];
    int rc;

    snprintf(name, sizeof name, "L%u.%s", l, phase);
    rc = hoff_mark_op(d->ctx, name);
    return rc ? fail_call("hoff_mark_op", rc) : 0;
}

/* The compute of one of a layer's nspec ops: an equal share of the layer's
 * time (the last op takes the remainder). */
static uint64_t op_ns(const struct demo *d, uint64_t layer_ns, int j) {
    uint64_t share = layer_ns / (uint64_t)d->nspec;

    return j == d->nspec - 1 ? layer_ns - share * (uint64_t)(d->nspec - 1) : share;
}

/* Forward: each activation is the output of an op of its own, marked before
 * the op allocates it (the op boundaries a framework reports), so that its
 * use window closes when the next op begins. */
int forward(struct demo *d, int step, struct step_report *r) {
    int rc0 = hoff_set_phase(d->ctx, HOFF_PHASE_FORWARD); /* recorded with the marks: where a floor comes from */

    if (rc0)
        return fail_call("hoff_set_phase", rc0);
    for (unsigned l = 0; l < d->layers; l++) {
        for (int j = 0; j < d->nspec; j++) {
            struct act *a = &d->acts[l * d->nspec + j];
            char phase[40];
            int rc;

            snprintf(phase, sizeof phase, "fwd.%s", d->spec[j].name);
            if (mark_op(d, l, phase))
                return 1;
            a->p = hoff_malloc(d->ctx, d->spec[j].bytes, d->stream);
            if (!a->p)
                return fail_call("hoff_malloc", errno ? -errno : -ENOMEM);
            a->seed = seed_of(step, (int)l, j);
            rc = hoff_access(d->ctx, a->p, 1, d->stream);
            if (rc)
                return fail_call("hoff_access (write)", rc);
            fill(a->p, d->spec[j].bytes, a->seed);
            if (d->corrupt && step == (int)d->steps - 1 && l == d->layers / 2 && j == 1)
                ((unsigned char *)a->p)[d->spec[j].bytes / 3] ^= 0x5a;
            compute(d, op_ns(d, d->fwd_ns, j), &r->c.compute_ns);
        }
    }
    return 0;
}

/* Bytes of layer l's offload candidates that are off the device. */
static uint64_t away_bytes(struct demo *d, unsigned l) {
    uint64_t n = 0;

    for (int j = 0; j < d->nspec; j++) {
        int res;
        if (!d->spec[j].candidate)
            continue;
        res = hoff_residency(d->ctx, d->acts[l * d->nspec + j].p);
        if (res == HOFF_RES_HOST || res == HOFF_RES_DISCARDED || res == HOFF_RES_EVICTING)
            n += d->spec[j].usable;
    }
    return n;
}

/* Prefetch layer l's candidates that are on the host.  fit_only: only those
 * that fit in the budget's free room now, so that the prefetch never evicts
 * the blocks the current layer is computing with. */
static void prefetch_layer(struct demo *d, unsigned l, struct step_report *r, int fit_only) {
    for (int j = 0; j < d->nspec; j++) {
        void *p = d->acts[l * d->nspec + j].p;
        struct hoff_stats st;
        int rc, res;

        if (!d->spec[j].candidate)
            continue;
        res = hoff_residency(d->ctx, p);
        if (res == HOFF_RES_DEVICE || res == HOFF_RES_PREFETCHING) {
            r->prefetch_resident++;
            continue;
        }
        if (res != HOFF_RES_HOST && res != HOFF_RES_DISCARDED)
            continue; /* still evicting: a later pass or the access brings it back */
        if (fit_only && d->budget &&
            (hoff_stats_get(d->ctx, &st) != 0 || st.resident_bytes + d->spec[j].usable > d->budget)) {
            r->prefetch_nospace++;
            continue;
        }
        rc = hoff_prefetch(d->ctx, p, d->stream);
        if (rc == 0)
            r->prefetch_issued++;
        else if (rc == -EALREADY)
            r->prefetch_resident++;
        else if (rc == -HOFF_EBUDGET)
            r->prefetch_nospace++; /* comes back on demand instead */
        else if (d->prefetch_errors++ == 0)
            fprintf(stderr, "hoff-demo: warning: hoff_prefetch: %s (%s)\n", hoff_strerror(rc), hoff_last_error());
    }
}

/* Backward: the op that needs activation j (read, in the reverse of their
 * order) runs, then releases it, as autograd frees a node's saved tensors
 * once the node has run. */
int backward(struct demo *d, int step, struct step_report *r) {
    int rc0 = hoff_set_phase(d->ctx, HOFF_PHASE_BACKWARD);

    if (rc0)
        return fail_call("hoff_set_phase", rc0);
    for (int l = (int)d->layers - 1; l >= 0; l--) {
        for (int j = d->nspec - 1; j >= 0; j--) {
            struct act *a = &d->acts[l * d->nspec + j];
            char phase[40];
            size_t bad;
            int rc;

            snprintf(phase, sizeof phase, "bwd.%s", d->spec[j].name);
            if (mark_op(d, (unsigned)l, phase))
                return 1;
            rc = hoff_access(d->ctx, a->p, 0, d->stream);
            if (rc)
                return fail_call("hoff_access (read)", rc);
            bad = check(a->p, d->spec[j].bytes, a->seed);
            if (bad != (size_t)-1) {
                if (!d->bad.found) {
                    const unsigned char *b = a->p;
                    d->bad.found = 1;
                    d->bad.step = step;
                    d->bad.layer = l;
                    d->bad.name = d->spec[j].name;
                    d->bad.offset = bad;
                    d->bad.expected = pat_byte(a->seed, bad);
                    d->bad.got = b[bad];
                    d->bad.residency = hoff_residency(d->ctx, a->p);
                }
            } else {
                d->verified_blocks++;
                d->verified_bytes += d->spec[j].bytes;
            }
            /* Manual mode, at the layer's first op: bring the next layer
             * back while this one computes, as far as the budget has room
             * without evicting this layer, then the layers after it while
             * there is room... (plan mode leaves it to the replayed
             * schedule) */
            if (d->mode == MODE_MANUAL && j == d->nspec - 1) {
                if (l > 0)
                    prefetch_layer(d, (unsigned)l - 1, r, 1);
                for (int k = l - 2; k >= 0 && (d->lookahead == 0 || l - k <= (int)d->lookahead); k--) {
                    uint64_t need = away_bytes(d, (unsigned)k);
                    struct hoff_stats st;

                    if (need == 0)
                        continue;
                    if (d->budget == 0 || hoff_stats_get(d->ctx, &st) != 0 || st.resident_bytes + need > d->budget)
                        break; /* no room: it would only evict what is needed sooner */
                    prefetch_layer(d, (unsigned)k, r, 1);
                }
            }
            compute(d, op_ns(d, d->bwd_ns, j), &r->c.compute_ns);
            rc = hoff_free(d->ctx, a->p, d->stream);
            if (rc)
                return fail_call("hoff_free", rc);
            a->p = NULL;
        }
        /* ...and what did not fit before now that this layer is gone. */
        if (d->mode == MODE_MANUAL && l > 0)
            prefetch_layer(d, (unsigned)l - 1, r, 0);
    }
    return 0;
}

static uint64_t mono_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Step s: begin, forward, backward, end; its report in d->rep[s] from the
 * counters before it (*st0, then advanced to the step's end), printed unless
 * --json.  0 or 1 (reported). */
int run_step(struct demo *d, unsigned s, struct hoff_stats *st0, const char *planner) {
    struct step_report *r = &d->rep[s];
    struct hoff_stats st, sb;
    int rc;

    uint64_t h0 = mono_ns();

    if ((rc = hoff_step_begin(d->ctx)) != 0)
        return fail_call("hoff_step_begin", rc);
    /* Where the pipeline is: warmup (recording) or replay. */
    if ((rc = hoff_stats_get(d->ctx, &sb)) != 0)
        return fail_call("hoff_stats_get", rc);
    r->state = (int)sb.plan_state;
    r->planning = sb.plan_pending != 0;
    if (forward(d, (int)s, r) || backward(d, (int)s, r))
        return 1;
    /* A replay that diverged is in fallback by now. */
    if ((rc = hoff_stats_get(d->ctx, &sb)) != 0)
        return fail_call("hoff_stats_get", rc);
    if (sb.plan_state == HOFF_PLAN_FALLBACK)
        r->state = HOFF_PLAN_FALLBACK;
    if ((rc = hoff_step_end(d->ctx)) != 0)
        return fail_call("hoff_step_end", rc);
    r->host_ns = mono_ns() - h0;
    if ((rc = hoff_stats_get(d->ctx, &st)) != 0)
        return fail_call("hoff_stats_get", rc);
    r->plan_after = st.plan_pending && !r->planning;
    r->plan_wait_ns = st.plan_wait_ns - st0->plan_wait_ns;
    /* ...or diverged at its end (fewer events than the recorded step). */
    if (st.divergent_steps > st0->divergent_steps)
        r->state = HOFF_PLAN_FALLBACK;
    r->planned = st.plans > st0->plans;
    r->fired = st.actions_fired - st0->actions_fired;
    r->skipped = st.actions_skipped - st0->actions_skipped;
    hoff__drive_step_counters(st0, &st, &r->c);
    r->bytes_faulted = st.bytes_faulted - st0->bytes_faulted;
    *st0 = st;
    if (!d->json) {
        print_step(d, s);
        if (r->planned)
            print_plan(d, &st, planner);
        else if (r->plan_after)
            printf("plan: being made on the planning thread; the next steps keep the budget online "
                   "until it is ready\n");
        else if (r->state == HOFF_PLAN_WARMUP && !r->planning)
            printf("plan: none (the planner did not produce a schedule; recording again)\n");
    }
    return 0;
}
