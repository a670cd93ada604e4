/* replay.c — the replay executor: checks every event of a step against the recorded one and fires the actions
 * planned around it; on a mismatch it stops firing for the rest of the step (fallback).  Threading: the context lock
 * held. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "core/core.h"
#include "exec/executor.h"
#include "mem/residency.h"

/* Does the event match event i of the trace? */
static int matches(const struct hoff__pipeline *p, const struct hoff__event_info *e) {
    const struct hoff__tev *t;

    if (p->ev >= p->trace.nev)
        return 0;
    t = &p->trace.ev[p->ev];
    if (t->kind != e->kind)
        return 0;
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        /* A block the recorded step kept may come from the device pool now (ctx_alloc.c). */
        return t->size == (e->size ? e->size : 1) &&
               (t->pool == e->pool || ((t->flags & HOFF__TEV_KEPT) && e->pool == HOFF__POOL_DEVICE)) &&
               t->block == p->nalloc;
    case HOFF__TEV_FREE: return t->block == e->b->tid;
    case HOFF__TEV_ACCESS: return t->block == e->b->tid && !!(t->flags & HOFF__TEV_WRITE) == !!e->write;
    default: return 1; /* op names are informative: the order of kinds is what the plan needs */
    }
}

static void diverge(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__event_info *e) {
    p->diverged = 1;
    hoff__pipe_set_state(p, &mem->pol, HOFF_PLAN_FALLBACK);
    if (p->ev < p->trace.nev)
        hoff__log(HOFF_LOG_INFO,
                  "step %llu diverged from the plan at event %u (a %s where the plan has a %s); "
                  "no planned actions for the rest of the step",
                  (unsigned long long)p->step, p->ev,
                  e->kind == HOFF__TEV_ALLOC ? "different allocation" : "different event",
                  p->trace.ev[p->ev].kind == HOFF__TEV_ALLOC ? "allocation" : "another event");
    else
        hoff__log(HOFF_LOG_INFO,
                  "step %llu has more events than the recorded one (%zu); "
                  "no planned actions for the rest of the step",
                  (unsigned long long)p->step, p->trace.nev);
}

/* A member's part of a group EVICT or PREFETCH: the first member's action of
 * the step moves every member with one call over the region when each is
 * live in its slot and where the call moves it from; the other members'
 * actions are then covered (1).  Otherwise, and for every member of a group
 * that fell back, 0: the member's action fires on its own. */
static int fire_group(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__action *a, hoff_stream s) {
    const struct hoff__schedule *sc = &p->sched;
    const struct hoff__group *g;
    struct hoff__rgroup *rg;
    uint64_t *step;
    uint8_t *one;
    uint32_t k;
    int evict = a->kind == HOFF__ACT_EVICT;

    if (!a->group || a->group > sc->ngroups || !p->rg || (a->kind != HOFF__ACT_EVICT && a->kind != HOFF__ACT_PREFETCH))
        return 0;
    g = &sc->groups[a->group - 1];
    rg = &p->rg[a->group - 1];
    step = evict ? &rg->evict_step : &rg->prefetch_step;
    one = evict ? &rg->evict_one : &rg->prefetch_one;
    if (*step == p->step)
        return *one;
    *step = p->step;
    *one = 0;
    for (k = 0; k < g->n && rg->region; k++) {
        struct hoff__block *b;
        uint32_t id = sc->gmember[g->first + k].block;

        b = id < p->map_len ? p->map[id] : NULL;
        if (!b || b->region != rg->region || b->slot != k)
            break;
        p->gm[k] = b;
    }
    if (k == g->n && hoff__res_group(mem, evict ? HOFF__CMD_EVICT : HOFF__CMD_PREFETCH, p->gm, g->n,
                                     hoff__pool_region_base(rg->region), hoff__pool_region_size(rg->region), s) == 0)
        *one = 1;
    else
        HOFF__STAT_ADD(&p->st, group_fallbacks, 1);
    return *one;
}

static void fire(struct hoff__pipeline *p, struct hoff__mem *mem, const struct hoff__action *a, hoff_stream s) {
    struct hoff__block *b = a->block < p->map_len ? p->map[a->block] : NULL;
    int rc;

    if (!b || b->mgroup) { /* not allocated yet or freed already: the plan does not fit; or in a manual group,
                              which alone moves it */
        p->skipped++;
        return;
    }
    if (fire_group(p, mem, a, s)) { /* moved with its group */
        p->fired++;
        return;
    }
    switch (a->kind) {
    case HOFF__ACT_EVICT: rc = hoff__res_evict(mem, b, s); break;
    case HOFF__ACT_PREFETCH:
        /* Its eviction, spill or restore has not landed yet (the replay
         * runs ahead of the recorded timing): the bytes are needed back, so
         * wait for it, a counted stall, rather than skip the prefetch and
         * page the block in at its use (a block left on the NVMe tier is
         * restored first, waiting).  predict.c assumes the same. */
        if (b->state == HOFF_RES_EVICTING || b->state == HOFF_RES_SPILLING || b->state == HOFF_RES_RESTORING)
            hoff__res_settle(mem, b);
        rc = hoff__res_prefetch(mem, b, s);
        break;
    case HOFF__ACT_RELEASE: rc = hoff__res_discard(mem, b, s); break;
    case HOFF__ACT_SPILL:
        /* Its eviction still in flight: it spills once that lands. */
        rc = hoff__res_spill(mem, b, s);
        break;
    case HOFF__ACT_RESTORE:
        /* Its spill has not landed yet: wait for it (a counted stall) and
         * restore, rather than leave the read to the prefetch. */
        if (b->state == HOFF_RES_SPILLING)
            hoff__res_settle(mem, b);
        rc = hoff__res_restore(mem, b, s);
        break;
    default: rc = -EINVAL; break;
    }
    /* A spill of a block the host tier already spilled for room, a restore
     * of one that never left the host: where the plan wants it already. */
    if (rc == -EALREADY && (a->kind == HOFF__ACT_SPILL || a->kind == HOFF__ACT_RESTORE))
        rc = 0;
    if (rc == 0)
        p->fired++;
    else
        p->skipped++;
}

/* Fire the actions of event ev with the given timing. */
static void fire_at(struct hoff__pipeline *p, struct hoff__mem *mem, uint32_t ev, int when, hoff_stream s) {
    const struct hoff__schedule *sc = &p->sched;

    while (p->next_act < sc->nact && sc->act[p->next_act].ev == ev && sc->act[p->next_act].when == when)
        fire(p, mem, &sc->act[p->next_act++], s);
}

/* Actions planned "after" event i fire when the next event comes (or the
 * step ends): only then is the work of event i done or queued — the caller
 * fills a block after hoff_malloc returns and uses it after hoff_access
 * returns, so an eviction fired at once would race that work. */
static void fire_pending_after(struct hoff__pipeline *p, struct hoff__mem *mem) {
    if (p->ev > 0)
        fire_at(p, mem, p->ev - 1, HOFF__ACT_AFTER, p->last_stream);
}

void hoff__replay_before(struct hoff__pipeline *p, struct hoff__mem *mem, struct hoff__event_info *e) {
    if (p->diverged)
        return;
    fire_pending_after(p, mem);
    if (!matches(p, e)) {
        diverge(p, mem, e);
        return;
    }
    /* Actions of earlier events never fired (an earlier event had none of
     * its own, cannot happen with a sorted schedule) are skipped here. */
    while (p->next_act < p->sched.nact && p->sched.act[p->next_act].ev < p->ev) {
        p->next_act++;
        p->skipped++;
    }
    fire_at(p, mem, p->ev, HOFF__ACT_BEFORE, e->stream ? e->stream : p->last_stream);
}

void hoff__replay_after(struct hoff__pipeline *p, struct hoff__mem *mem, struct hoff__event_info *e) {
    if (e->b && e->b->tid < p->map_len) {
        if (e->kind == HOFF__TEV_ALLOC)
            p->map[e->b->tid] = e->b;
        else if (e->kind == HOFF__TEV_FREE)
            p->map[e->b->tid] = NULL; /* back in the pool: no action may touch it */
    }
    /* Its "after" actions wait for the next event: fire_pending_after(). */
}

void hoff__replay_finish(struct hoff__pipeline *p, struct hoff__mem *mem) {
    if (!p->diverged)
        fire_pending_after(p, mem);
    if (!p->diverged && p->ev != p->trace.nev) {
        hoff__log(HOFF_LOG_INFO, "step %llu ended after %u events; the recorded step had %zu",
                  (unsigned long long)p->step, p->ev, p->trace.nev);
        p->diverged = 1;
        hoff__pipe_push_policy(p, &mem->pol);
    }
    p->skipped += p->sched.nact - p->next_act;
    p->next_act = p->sched.nact;
    HOFF__STAT_ADD(&p->st, actions_fired, p->fired);
    HOFF__STAT_ADD(&p->st, actions_skipped, p->skipped);
}
