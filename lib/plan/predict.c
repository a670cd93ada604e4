/* predict.c — a replay predicted from the trace's event times: the runtime's budget rule, two FIFO copy
 * engines, the host cap and the NVMe tier, late prefetches and page-ins, and prefetches re-placed as early
 * as they fit (plan.h).
 * Threading: a pure function of (trace, schedule, options); no shared state. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/optdefs.h"
#include "mem/room.h"
#include "plan/model.h"
#include "plan/place.h"
#include "plan/plan.h"

/* The model's rules: model.c. */

#define DEF_LAT_NS HOFF__DEF_SIM_LATENCY_NS /* the sim's defaults, named once: core/optdefs.h */
#define DEF_FAULT_NS HOFF__DEF_SIM_FAULT_NS
#define DEF_FAULT_GBPS HOFF__DEF_SIM_FAULT_GBPS
#define DEF_NVME_READ_GBPS HOFF__DEF_SIM_NVME_READ_GBPS
#define DEF_NVME_WRITE_GBPS HOFF__DEF_SIM_NVME_WRITE_GBPS

uint64_t *hoff__plan_times(const struct hoff__trace *t) {
    uint64_t *T = malloc((t->nev ? t->nev : 1) * sizeof *T), last = 0;
    int gpu = 1;
    size_t i;

    if (!T)
        return NULL;
    for (i = 0; i < t->nev; i++)
        if (t->ev[i].t_gpu_ns == HOFF__TIME_UNKNOWN)
            gpu = 0;
    for (i = 0; i < t->nev; i++) {
        uint64_t v = gpu ? t->ev[i].t_gpu_ns : t->ev[i].t_cpu_ns;

        if (v == HOFF__TIME_UNKNOWN)
            v = last;
        last = v > last ? v : last;
        T[i] = last;
    }
    return T;
}

/* --- the model's state ----------------------------------------------------- */

/* Set p up to replay s over t with o's rates and costs (the sim's defaults
 * where o leaves them 0).  0 or -ENOMEM (pr_close frees what was made). */
static int pr_open(struct hoff__pm *p, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                   const struct hoff__schedule *s, struct hoff__prediction *out) {
    size_t n = t->nblocks ? t->nblocks : 1;
    uint32_t i;

    memset(out, 0, sizeof *out);
    memset(p, 0, sizeof *p);
    p->t = t;
    p->s = s;
    p->out = out;
    p->budget = hoff__room_budget(o->budget_bytes, s->floor_bytes); /* nothing forced below the floor */
    p->h2d = o->h2d_gbps > 0 ? o->h2d_gbps : HOFF__DEF_SIM_H2D_GBPS;
    p->d2h = o->d2h_gbps > 0 ? o->d2h_gbps : HOFF__DEF_SIM_D2H_GBPS;
    p->lat = o->latency_ns ? o->latency_ns : DEF_LAT_NS;
    p->obs = o->observe;
    p->obs_arg = o->observe_arg;
    p->call = o->call_ns;
    p->fault_ns = o->fault_ns ? o->fault_ns : DEF_FAULT_NS;
    p->fault_gbps = o->fault_gbps > 0 ? o->fault_gbps : DEF_FAULT_GBPS;
    p->cap = o->host_cap_bytes;
    p->nvme = o->nvme;
    p->nvme_r = o->nvme_read_gbps > 0 ? o->nvme_read_gbps : DEF_NVME_READ_GBPS;
    p->nvme_w = o->nvme_write_gbps > 0 ? o->nvme_write_gbps : DEF_NVME_WRITE_GBPS;
    p->bytes = malloc(n * sizeof *p->bytes);
    p->st = calloc(n, 1);
    p->pland = calloc(n, sizeof *p->pland);
    p->dland = calloc(n, sizeof *p->dland);
    p->busy = calloc(n, sizeof *p->busy);
    p->carry = calloc(n, sizeof *p->carry);
    p->lru.prev = malloc(n * sizeof *p->lru.prev);
    p->lru.next = malloc(n * sizeof *p->lru.next);
    p->hl.prev = malloc(n * sizeof *p->hl.prev);
    p->hl.next = malloc(n * sizeof *p->hl.next);
    p->nland = calloc(n, sizeof *p->nland);
    p->sa = calloc(n, 1);
    p->hold = calloc(n, 1);
    if (s->ngroups && !(p->gst = calloc(2 * s->ngroups, 1)))
        return -ENOMEM;
    if (!p->bytes || !p->st || !p->pland || !p->dland || !p->busy || !p->carry || !p->lru.prev || !p->lru.next ||
        !p->hl.prev || !p->hl.next || !p->nland || !p->sa || !p->hold)
        return -ENOMEM;
    for (i = 0; i < t->nblocks; i++)
        p->bytes[i] = hoff__plan_bytes(o->block_bytes, &t->blocks[i]);
    hoff__pm_list_reset(&p->lru, t->nblocks);
    hoff__pm_list_reset(&p->hl, t->nblocks);
    return 0;
}

static void pr_close(struct hoff__pm *p) {
    free(p->q);
    free(p->hq);
    free(p->nq);
    free(p->gst);
    free(p->lru.prev);
    free(p->lru.next);
    free(p->hl.prev);
    free(p->hl.next);
    free(p->nland);
    free(p->sa);
    free(p->hold);
    free(p->pland);
    free(p->dland);
    free(p->busy);
    free(p->carry);
    free(p->st);
    free(p->bytes);
}

/* The step ended `tail` after its last event: the next one starts.  What is
 * still in flight goes on, on the new step's clock, holding the engines, the
 * budget and the host tier; its blocks are gone (freed, or retained past
 * the step), and every block starts the step unallocated. */
static void next_step(struct hoff__pm *p, uint64_t tail) {
    uint64_t end = p->now + tail, q0 = p->qh, n;
    uint32_t nb = p->t->nblocks, i;

    /* the D2H FIFO: evictions hold the budget and the host until they land */
    for (n = 0; q0 < p->qt; q0++)
        if (p->q[q0].land > end) {
            p->q[n] = p->q[q0];
            p->q[n].land -= end;
            p->q[n].block = HOFF__PM_NIL;
            if (p->q[n].kind != Q_RELEASE)
                p->q[n].kind = Q_VICTIM;
            n++;
        }
    p->qh = 0;
    p->qt = n;
    p->resident = p->evicting = p->host = p->to_host = p->spilling = p->from_host = 0;
    for (q0 = 0; q0 < n; q0++) {
        p->resident += p->q[q0].bytes, p->evicting += p->q[q0].bytes;
        if (p->q[q0].kind != Q_RELEASE)
            p->to_host += p->q[q0].bytes;
    }
    /* the NVMe device's queue likewise: a spill holds the host until it
     * lands, a restore is on its way there */
    for (n = 0, q0 = p->nh; q0 < p->nt; q0++)
        if (p->nq[q0].land > end) {
            p->nq[n] = p->nq[q0];
            p->nq[n].land -= end;
            p->nq[n].block = HOFF__PM_NIL;
            if (p->nq[n].kind == Q_SPILL)
                p->host += p->nq[n].bytes, p->spilling += p->nq[n].bytes;
            else
                p->to_host += p->nq[n].bytes;
            n++;
        }
    p->nh = 0;
    p->nt = n;
    p->nvme_busy = p->nvme_busy > end ? p->nvme_busy - end : 0;
    /* prefetches still in flight: their blocks are freed (at the free,
     * or after the step for retained ones), their bytes count until
     * they land */
    for (n = 0, q0 = p->hh; q0 < p->ht; q0++)
        if (p->hq[q0].land > end && (p->st[p->hq[q0].block] == P_PRE || p->st[p->hq[q0].block] == P_FREED_PRE)) {
            p->hq[n] = p->hq[q0];
            p->hq[n].land -= end;
            p->hq[n].block = HOFF__PM_NIL;
            p->host += p->hq[n].bytes; /* counted on the host until it lands */
            p->from_host += p->hq[n].bytes;
            p->resident += p->hq[n++].bytes;
        }
    p->hh = 0;
    p->ht = n;
    for (i = 0; i < nb; i++) {
        p->carry[i] = p->busy[i] > end ? p->busy[i] - end : 0;
        p->busy[i] = p->dland[i] = p->nland[i] = 0;
    }
    p->d2h_busy = p->d2h_busy > end ? p->d2h_busy - end : 0;
    p->h2d_busy = p->h2d_busy > end ? p->h2d_busy - end : 0;
    p->issuer = p->issuer > end ? p->issuer - end : 0;
    p->now = 0;
    memset(p->st, 0, nb ? nb : 1);
    memset(p->sa, 0, nb ? nb : 1);
    hoff__pm_list_reset(&p->lru, nb);
    hoff__pm_list_reset(&p->hl, nb);
    if (p->gst)
        memset(p->gst, 0, 2 * p->s->ngroups);
    memset(p->out, 0, sizeof *p->out);
}

/* Compute after the last event, to the step's end (the next step's first
 * event comes T[0] after that). */
static uint64_t step_tail(const struct hoff__trace *t, const uint64_t *T) {
    uint32_t nev = (uint32_t)t->nev;
    uint64_t send;

    if (!nev)
        return 0;
    send = t->step_gpu_ns != HOFF__TIME_UNKNOWN && T[nev - 1] == t->ev[nev - 1].t_gpu_ns ? t->step_gpu_ns : t->step_ns;
    return send != HOFF__TIME_UNKNOWN && send > T[nev - 1] ? send - T[nev - 1] : 0;
}

/* --- the event loop --------------------------------------------------------- */

int hoff__plan_predict(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                       struct hoff__schedule *s, int place, struct hoff__prediction *out) {
    uint32_t nev = (uint32_t)t->nev, nb = t->nblocks, i;
    struct hoff__pm p;
    struct hoff__placing pl;
    uint64_t *seq = NULL, nseq = 0, tprev = 0, tail;
    size_t k = 0, j;
    int rc, pass;

    rc = pr_open(&p, t, o, s, out);
    if (!rc)
        rc = hoff__place_open(&pl, &p, place);
    else
        memset(&pl, 0, sizeof pl);
    seq = malloc((s->nact ? s->nact : 1) * sizeof *seq);
    if (!rc && !seq)
        rc = -ENOMEM;
    if (rc)
        goto done;
    tail = step_tail(t, T);
    for (j = 0; j < s->nact; j++)
        if (s->act[j].ev >= nev || s->act[j].block >= nb || (j && s->act[j].ev < s->act[j - 1].ev)) {
            rc = hoff__error(-EINVAL,
                             "predict: the schedule is unsorted or names an event or block the trace "
                             "does not have (action %zu)",
                             j);
            goto done;
        }

    /* Two steps back to back: the copies still in flight when a step ends
     * (its last evictions, of retained blocks too) hold the engines and the
     * budget into the next one, as they do in a replayed run.  The second
     * step is the prediction (and, placing early, the placement). */
    for (pass = 0; pass < 2; pass++) {
        p.pass = pass;
        if (pass) {
            next_step(&p, tail);
            k = 0;
            nseq = 0;
            tprev = 0;
            if ((rc = hoff__place_reset(&pl, &p)) != 0)
                goto done;
        }
        for (i = 0; i <= nev; i++) {
            p.ev = i;
            /* compute up to event i, then what has landed */
            if (i < nev) {
                p.now += T[i] - tprev;
                tprev = T[i];
            }
            hoff__pm_poll(&p);
            /* the AFTER actions of i - 1 */
            for (; k < s->nact && i > 0 && s->act[k].ev == i - 1; k++) {
                seq[k] = nseq++;
                if ((rc = hoff__pm_fire(&p, &s->act[k])) != 0)
                    goto done;
                hoff__place_evicted(&pl, s, k);
            }
            if (i == nev)
                break;
            /* the BEFORE actions of i: what the schedule has there first (in
             * its order), then the early ones, earliest deadline first */
            for (; k < s->nact && s->act[k].ev == i && s->act[k].when == HOFF__ACT_BEFORE; k++) {
                const struct hoff__action *a = &s->act[k];

                if (pl.on && pl.issued[k])
                    continue; /* already issued, earlier: its seq is set */
                seq[k] = nseq++;
                if (pl.on && a->kind == HOFF__ACT_PREFETCH)
                    pl.issued[k] = 1;
                if ((rc = hoff__pm_fire(&p, a)) != 0)
                    goto done;
            }
            if ((rc = hoff__place_early(&pl, &p, i, seq, &nseq)) != 0)
                goto done;
            if ((rc = hoff__pm_event(&p, &t->ev[i])) != 0)
                goto done;
        }
    }
    if (p.err) {
        rc = p.err;
        goto done;
    }
    out->stall_ns = out->room_ns + out->late_ns + out->fault_ns + out->tier_ns;
    s->stall_ns = out->stall_ns;
    s->overruns = out->overruns;
    rc = hoff__place_finish(&pl, s, seq);

done:
    hoff__place_close(&pl);
    free(seq);
    pr_close(&p);
    return rc;
}
