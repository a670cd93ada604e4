/* plan.c — the planner registry (pick one by name), the schedule container (add, stable sort) and the
 * shared residency check hoff__schedule_peak.  Threading: the registry is constant; a schedule belongs to
 * one thread while it is built, and is read-only afterwards. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "core/grow.h"
#include "mem/hostcap.h"
#include "plan/plan.h"

/* --- registry -------------------------------------------------------------- */

/* Every planner hoff knows, in the order hoff-plan lists them.  A new planner
 * is a const struct hoff__planner in its own file, declared in plan.h and
 * added here. */
static const struct hoff__planner *const planners[] = {
    &hoff__planner_greedy,
    &hoff__planner_timed,
};
#define NPLANNERS ((int)(sizeof planners / sizeof planners[0]))

const struct hoff__planner *hoff__planner_find(const char *name) {
    int i;

    if (!name)
        return NULL;
    for (i = 0; i < NPLANNERS; i++)
        if (strcasecmp(planners[i]->name, name) == 0)
            return planners[i];
    return NULL;
}

const struct hoff__planner *hoff__planner_at(int i) {
    return i >= 0 && i < NPLANNERS ? planners[i] : NULL;
}

/* --- schedule -------------------------------------------------------------- */

void hoff__schedule_init(struct hoff__schedule *s) {
    memset(s, 0, sizeof *s);
    s->feasible = 1;
}

static void *dup(const void *p, size_t n) {
    void *q;

    if (!p || !n)
        return NULL;
    q = malloc(n);
    if (q)
        memcpy(q, p, n);
    return q;
}

int hoff__schedule_copy(struct hoff__schedule *dst, const struct hoff__schedule *src) {
    struct hoff__schedule c = *src;

    c.act = dup(src->act, src->nact * sizeof *src->act);
    c.cap_act = src->nact;
    c.groups = dup(src->groups, src->ngroups * sizeof *src->groups);
    c.gmember = dup(src->gmember, src->ngmember * sizeof *src->gmember);
    c.block_group = dup(src->block_group, src->nblocks_grouped * sizeof *src->block_group);
    c.block_member = dup(src->block_member, src->nblocks_grouped * sizeof *src->block_member);
    if ((src->nact && !c.act) || (src->ngroups && !c.groups) || (src->ngmember && !c.gmember) ||
        (src->nblocks_grouped && (!c.block_group || !c.block_member))) {
        free(c.act);
        free(c.groups);
        free(c.gmember);
        free(c.block_group);
        free(c.block_member);
        return -ENOMEM;
    }
    hoff__schedule_destroy(dst);
    *dst = c;
    return 0;
}

void hoff__schedule_free_groups(struct hoff__schedule *s) {
    free(s->groups);
    free(s->gmember);
    free(s->block_group);
    free(s->block_member);
    s->groups = NULL;
    s->gmember = NULL;
    s->block_group = s->block_member = NULL;
    s->ngroups = s->ngmember = 0;
    s->nblocks_grouped = 0;
}

void hoff__schedule_destroy(struct hoff__schedule *s) {
    free(s->act);
    free(s->groups);
    free(s->gmember);
    free(s->block_group);
    free(s->block_member);
    hoff__schedule_init(s);
}

int hoff__schedule_add(struct hoff__schedule *s, uint32_t ev, int when, int kind, uint32_t block, uint32_t copy_ev) {
    struct hoff__action *a;

    if ((when != HOFF__ACT_BEFORE && when != HOFF__ACT_AFTER) || kind < 0 || kind >= HOFF__ACT_KIND_COUNT)
        return -EINVAL;
    if (HOFF__GROW(s->act, s->cap_act, s->nact + 1))
        return -ENOMEM;
    a = &s->act[s->nact++];
    a->ev = ev;
    a->when = (uint8_t)when;
    a->kind = (uint8_t)kind;
    a->block = block;
    a->copy_ev = copy_ev;
    a->group = 0;
    return 0;
}

/* The sort key: event, then before/after, then evictions and releases ahead
 * of prefetches (a block that comes back and one that leaves at the same
 * point: make room first). */
/* Within one event and timing: evictions and releases, then spills, then
 * restores, then prefetches. */
static inline unsigned kind_rank(int kind) {
    switch (kind) {
    case HOFF__ACT_SPILL: return 1;
    case HOFF__ACT_RESTORE: return 2;
    case HOFF__ACT_PREFETCH: return 3;
    default: return 0;
    }
}

static inline uint64_t act_key(const struct hoff__action *a) {
    return (uint64_t)a->ev << 3 | (uint64_t)(a->when ? 1 : 0) << 2 | (uint64_t)kind_rank(a->kind);
}

/* Bottom-up merge sort: stable, O(n log n), one buffer of n actions. */
static void merge_sort(struct hoff__action *a, struct hoff__action *tmp, size_t n) {
    struct hoff__action *src = a, *dst = tmp, *sw;
    size_t w, lo;

    for (w = 1; w < n; w *= 2) {
        for (lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;

            while (i < mid && j < hi)
                dst[k++] = act_key(&src[j]) < act_key(&src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        sw = src;
        src = dst;
        dst = sw;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

void hoff__schedule_sort(struct hoff__schedule *s) {
    struct hoff__action *tmp;
    size_t i, j;

    for (i = 1; i < s->nact; i++)
        if (act_key(&s->act[i]) < act_key(&s->act[i - 1]))
            break;
    if (i >= s->nact)
        return; /* already sorted: the common case for a planner's output */
    tmp = malloc(s->nact * sizeof *tmp);
    if (tmp) {
        merge_sort(s->act, tmp, s->nact);
        free(tmp);
        return;
    }
    /* No memory for the buffer: insertion sort, also stable (slow, but the
     * function cannot fail). */
    for (i = 1; i < s->nact; i++) {
        struct hoff__action x = s->act[i];
        uint64_t k = act_key(&x);

        for (j = i; j > 0 && act_key(&s->act[j - 1]) > k; j--)
            s->act[j] = s->act[j - 1];
        s->act[j] = x;
    }
}

/* --- the residency check --------------------------------------------------- */

enum { B_UNBORN = 0, B_RESIDENT, B_EVICTED, B_RELEASED, B_FREED, B_SPILLED };

/* Does the window of the last access before `before` (at or before it when
 * inclusive) close after x?  Windows close in access order. */
static int window_covers(const struct hoff__trace *t, uint32_t block, uint32_t before, int inclusive, uint32_t x) {
    const struct hoff__tblock *b = &t->blocks[block];
    const struct hoff__tacc *acc = t->acc + b->first_access;
    uint32_t lo = 0, hi = b->naccess;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (inclusive ? acc[mid].ev <= before : acc[mid].ev < before)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && x < acc[lo - 1].close;
}

int hoff__plan_in_window(const struct hoff__trace *t, uint32_t block, uint32_t x) {
    return window_covers(t, block, x, 1, x);
}

int hoff__plan_window_open(const struct hoff__trace *t, uint32_t block, uint32_t x) {
    return x > 0 && window_covers(t, block, x, 0, x);
}

/* The tier a block in state st holds its bytes on: 0 the device, 1 the host
 * tier, 2 the NVMe tier; -1 none (not yet allocated, released, freed). */
static int tier_of(uint8_t st) {
    switch (st) {
    case B_RESIDENT: return 0;
    case B_EVICTED: return 1;
    case B_SPILLED: return 2;
    default: return -1;
    }
}

/* Move block b from state st[id] to state to, keeping the per-tier sums cur[3]. */
static void move_to(const struct hoff__tblock *b, hoff__block_bytes_fn bytes, uint8_t *st, uint32_t id, uint8_t to,
                    uint64_t *cur) {
    int from = tier_of(st[id]), next = tier_of(to);
    uint64_t n = b->pool == 1 ? hoff__plan_bytes(bytes, b) : 0;

    if (from >= 0)
        cur[from] -= n;
    if (next >= 0)
        cur[next] += n;
    st[id] = to;
}

/* Apply one action to the block states and the running per-tier sums.  An
 * eviction or release takes effect at event x (the action's event, or the
 * next one for an "after" action), which must lie outside every use window
 * of the block. */
static int apply(const struct hoff__trace *t, hoff__block_bytes_fn bytes, uint8_t *st, const struct hoff__action *a,
                 uint64_t *cur) {
#define S(x) (1u << (x))
    /* Per action: the states it applies to (a bit per state) and the state it leaves. */
    static const struct {
        unsigned from;
        uint8_t to;
    } rule[HOFF__ACT_KIND_COUNT] = {
        [HOFF__ACT_EVICT] = {S(B_RESIDENT), B_EVICTED},
        [HOFF__ACT_PREFETCH] = {S(B_EVICTED), B_RESIDENT},
        [HOFF__ACT_RELEASE] = {S(B_RESIDENT) | S(B_EVICTED) | S(B_SPILLED), B_RELEASED},
        [HOFF__ACT_SPILL] = {S(B_EVICTED), B_SPILLED}, /* tiers below the device */
        [HOFF__ACT_RESTORE] = {S(B_SPILLED), B_EVICTED},
    };
    const struct hoff__tblock *b;
    uint32_t x;

    if (a->block >= t->nblocks || a->kind >= HOFF__ACT_KIND_COUNT)
        return -EINVAL;
    b = &t->blocks[a->block];
    if (b->pool != 1 || b->pinned)
        return -EINVAL;
    x = a->ev + (a->when == HOFF__ACT_AFTER);
    if ((a->kind == HOFF__ACT_EVICT || a->kind == HOFF__ACT_RELEASE) && hoff__plan_in_window(t, a->block, x))
        return -EINVAL;
    if (!(rule[a->kind].from & S(st[a->block])))
        return -EINVAL;
#undef S
    move_to(b, bytes, st, a->block, rule[a->kind].to, cur);
    return 0;
}

int hoff__schedule_peak(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *peak,
                        uint32_t *peak_ev) {
    return hoff__schedule_tiers(t, s, NULL, NULL, NULL, peak, peak_ev);
}

int hoff__schedule_resident(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *res, uint64_t *peak,
                            uint32_t *peak_ev) {
    return hoff__schedule_tiers(t, s, res, NULL, NULL, peak, peak_ev);
}

int hoff__schedule_tiers(const struct hoff__trace *t, const struct hoff__schedule *s, uint64_t *dev, uint64_t *host,
                         uint64_t *nvme, uint64_t *peak, uint32_t *peak_ev) {
    uint64_t cur[3] = {0, 0, 0}, best = 0;
    uint32_t best_ev = 0;
    uint8_t *st;
    size_t i, k = 0;
    int rc = 0;

    if (t->nblocks && !t->blocks)
        return -EINVAL; /* not finished */
    for (i = 1; i < s->nact; i++)
        if (act_key(&s->act[i]) < act_key(&s->act[i - 1]))
            return -EINVAL;
    if (s->nact && s->act[s->nact - 1].ev >= t->nev)
        return -EINVAL;
    st = calloc(t->nblocks ? t->nblocks : 1, 1);
    if (!st)
        return -ENOMEM;
    for (i = 0; i < t->nev && rc == 0; i++) {
        const struct hoff__tev *e = &t->ev[i];
        const struct hoff__tblock *b = NULL;

        for (; rc == 0 && k < s->nact && s->act[k].ev == i && s->act[k].when == HOFF__ACT_BEFORE; k++)
            rc = apply(t, s->block_bytes, st, &s->act[k], cur);
        if (rc)
            break;
        if ((e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_FREE) && e->block < t->nblocks)
            b = &t->blocks[e->block];
        if (e->kind == HOFF__TEV_ALLOC && b)
            move_to(b, s->block_bytes, st, e->block, B_RESIDENT, cur);
        /* A use window opens here: the block must be back (a prefetch
         * planned before it), never paged in by the use itself. */
        if (e->kind == HOFF__TEV_ACCESS && e->block < t->nblocks && st[e->block] != B_RESIDENT) {
            rc = -EINVAL;
            break;
        }
        if (cur[0] > best || i == 0) {
            best = cur[0];
            best_ev = (uint32_t)i;
        }
        if (dev)
            dev[i] = cur[0];
        if (host)
            host[i] = cur[1];
        if (nvme)
            nvme[i] = cur[2];
        if (e->kind == HOFF__TEV_FREE && b)
            move_to(b, s->block_bytes, st, e->block, B_FREED, cur);
        for (; rc == 0 && k < s->nact && s->act[k].ev == i; k++)
            rc = apply(t, s->block_bytes, st, &s->act[k], cur);
    }
    free(st);
    if (rc)
        return rc;
    *peak = best;
    *peak_ev = best_ev;
    return 0;
}

const char *hoff__act_kind_name(int kind) {
    static const char *const names[HOFF__ACT_KIND_COUNT] = {
        [HOFF__ACT_EVICT] = "evict", [HOFF__ACT_PREFETCH] = "prefetch", [HOFF__ACT_RELEASE] = "release",
        [HOFF__ACT_SPILL] = "spill", [HOFF__ACT_RESTORE] = "restore",
    };

    return kind >= 0 && kind < HOFF__ACT_KIND_COUNT ? names[kind] : "?";
}

uint64_t hoff__plan_deadline(uint64_t budget_ns) {
    return budget_ns ? hoff__plan_now_ns() + budget_ns : 0;
}

uint64_t hoff__plan_now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Check what planners rely on in a finished trace. */
static int check_trace(const char *name, const struct hoff__trace *t) {
    uint32_t i;

    if (t->nev >= UINT32_MAX)
        return hoff__error(-EINVAL, "%s: %zu events in the trace, at most %u", name, t->nev, UINT32_MAX - 1);
    if (t->nblocks && !t->blocks)
        return hoff__error(-EINVAL, "%s: the trace is not finished (hoff__trace_finish)", name);
    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];

        if (b->alloc_ev >= t->nev || (!b->retained && (b->free_ev >= t->nev || b->free_ev < b->alloc_ev)) ||
            (b->naccess && ((size_t)b->first_access + b->naccess > t->nacc || !t->acc)))
            return hoff__error(-EINVAL, "%s: block %u of the trace is inconsistent", name, i);
    }
    return 0;
}

/* The resident bytes per event with no offload but the releases, as a
 * difference array res[0 .. nev] (zeroed by the caller); *nopeak and *at get
 * the no-offload peak and its first event.  With out, each release is also
 * planned there: after the last access of a non-retained movable block, once
 * its use window has closed (AFTER close - 1: fired at the op mark that
 * closes it), when that comes before its free.  0 or -ENOMEM. */
static int base_resident(const struct hoff__trace *t, const struct hoff__plan_opts *o, int64_t *res, uint64_t *nopeak,
                         uint32_t *at, int releases, struct hoff__schedule *out) {
    uint32_t nev = (uint32_t)t->nev, i;
    int64_t run, best;
    int rc;

    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];

        if (b->pool != 1)
            continue;
        res[b->alloc_ev] += (int64_t)hoff__plan_bytes(o->block_bytes, b);
        if (!b->retained)
            res[b->free_ev + 1] -= (int64_t)hoff__plan_bytes(o->block_bytes, b);
    }
    *nopeak = 0;
    *at = 0;
    for (i = 0, run = 0, best = -1; i < nev; i++) {
        run += res[i];
        if (run > best) {
            best = run;
            *nopeak = (uint64_t)run;
            *at = i;
        }
    }
    for (i = 0; releases && i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];
        uint32_t close;

        if (!hoff__plan_movable(b) || b->retained || b->naccess < 2)
            continue;
        close = t->acc[b->first_access + b->naccess - 1].close;
        if (close >= b->free_ev)
            continue;
        if (out && (rc = hoff__schedule_add(out, close - 1, HOFF__ACT_AFTER, HOFF__ACT_RELEASE, i, UINT32_MAX)) != 0)
            return rc;
        res[close] -= (int64_t)hoff__plan_bytes(o->block_bytes, b);
        res[b->free_ev + 1] += (int64_t)hoff__plan_bytes(o->block_bytes, b);
    }
    return 0;
}

int hoff__plan_begin(const char *name, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                     struct hoff__schedule *out, int64_t **resp) {
    uint32_t nev = (uint32_t)t->nev, i;
    int64_t *res, run;
    int rc;

    *resp = NULL;
    out->nact = 0;
    hoff__schedule_free_groups(out); /* a schedule built before: its groups are gone with its actions */
    out->budget_bytes = o->budget_bytes;
    out->peak_bytes = out->nopeak_bytes = out->bytes_d2h = out->bytes_h2d = 0;
    out->peak_ev = 0;
    out->feasible = 1;
    out->candidates = 0;
    out->stall_ns = UINT64_MAX;
    out->overruns = 0;
    memset(out->planner, 0, sizeof out->planner);
    out->block_bytes = o->block_bytes;
    strncpy(out->planner, name, sizeof out->planner - 1);
    if ((rc = check_trace(name, t)) != 0)
        return rc;

    res = calloc((size_t)nev + 1, sizeof *res);
    if (!res)
        return -ENOMEM;
    rc = base_resident(t, o, res, &out->nopeak_bytes, &out->peak_ev, o->budget_bytes != 0 && nev != 0, out);
    out->peak_bytes = out->nopeak_bytes;
    if (rc || o->budget_bytes == 0 || nev == 0) {
        free(res);
        return rc;
    }
    for (i = 0, run = 0; i < nev; i++) {
        run += res[i];
        res[i] = run;
    }
    *resp = res;
    return 0;
}

int hoff__plan_floor(const struct hoff__trace *t, const struct hoff__plan_opts *o, uint64_t *floor,
                     uint32_t *floor_ev) {
    uint32_t nev = (uint32_t)t->nev, i, at;
    struct hoff__gap *g = NULL;
    size_t ng = 0, k;
    int64_t *res, run, best = 0;
    uint64_t nopeak;
    int rc;

    *floor = 0;
    *floor_ev = 0;
    if (t->nblocks && !t->blocks)
        return -EINVAL;
    if (nev == 0)
        return 0;
    res = calloc((size_t)nev + 1, sizeof *res);
    if (!res)
        return -ENOMEM;
    if ((rc = base_resident(t, o, res, &nopeak, &at, 1, NULL)) != 0 || (rc = hoff__plan_gaps(t, o, &g, &ng)) != 0) {
        free(res);
        return rc;
    }
    /* Every gap taken: what stays is what some use window (or a guard, or
     * a pin) holds on the device. */
    for (k = 0; k < ng; k++) {
        res[g[k].a + 1] -= (int64_t)g[k].size;
        res[g[k].b] += (int64_t)g[k].size;
    }
    for (i = 0, run = 0; i < nev; i++) {
        run += res[i];
        if (run > best) {
            best = run;
            *floor_ev = i;
        }
    }
    *floor = (uint64_t)best;
    free(g);
    free(res);
    return 0;
}

int hoff__plan_floor_where(const struct hoff__trace *t, const struct hoff__plan_opts *o, uint32_t ev,
                           struct hoff__floor_where *w, uint32_t **ids) {
    struct hoff__gap *g = NULL;
    uint32_t i, n = 0, *out = NULL;
    uint8_t *away;
    size_t ng = 0, k;
    int rc;

    memset(w, 0, sizeof *w);
    w->op_ev = UINT32_MAX;
    if (ids)
        *ids = NULL;
    if (ev >= t->nev || (t->nblocks && !t->blocks))
        return 0;
    for (i = ev; i < t->nev; i++)
        if (t->ev[i].kind == HOFF__TEV_OP) {
            w->op_ev = i;
            w->phase = hoff__tev_phase(&t->ev[i]);
            break;
        }
    if ((rc = hoff__plan_gaps(t, o, &g, &ng)) != 0)
        return rc;
    away = calloc(t->nblocks ? t->nblocks : 1, 1);
    out = ids ? malloc((t->nblocks ? t->nblocks : 1) * sizeof *out) : NULL;
    if (!away || (ids && !out)) {
        free(g);
        free(away);
        free(out);
        return -ENOMEM;
    }
    /* A gap takes its block off the device on events a + 1 .. b - 1, as
     * hoff__plan_floor counts it; a release after the last use, from its
     * close on (base_resident). */
    for (k = 0; k < ng; k++)
        if (g[k].a + 1 <= ev && ev < g[k].b && g[k].block < t->nblocks)
            away[g[k].block] = 1;
    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];

        if (b->pool != 1 || away[i] || ev < b->alloc_ev || (!b->retained && ev > b->free_ev))
            continue;
        if (hoff__plan_movable(b) && !b->retained && b->naccess >= 2) {
            uint32_t close = t->acc[b->first_access + b->naccess - 1].close;

            if (close < b->free_ev && ev >= close)
                continue;
        }
        w->blocks++;
        w->bytes += hoff__plan_bytes(o->block_bytes, b);
        if (out)
            out[n++] = i;
    }
    free(g);
    free(away);
    if (ids)
        *ids = out;
    return 0;
}

const char *hoff__plan_op_name(const struct hoff__trace *t, uint32_t ev) {
    if (ev >= t->nev || t->ev[ev].kind != HOFF__TEV_OP)
        return "(the step's end)";
    return t->ev[ev].name < t->nnames && t->names[t->ev[ev].name] && t->names[t->ev[ev].name][0]
               ? t->names[t->ev[ev].name]
               : "(unnamed op)";
}

const char *hoff__plan_floor_advice(unsigned phase) {
    switch (phase) {
    case HOFF_PHASE_FORWARD:
    case HOFF_PHASE_BACKWARD:
        return "the blocks one op of the model uses at once: its inputs, its outputs and what autograd keeps "
               "for it are in use together; checkpointing that op's module, a smaller micro-batch or a shorter "
               "sequence lowers it";
    case HOFF_PHASE_LOSS:
        return "the model's own: the loss holds the logits, their gradient and its own result at once (at a "
               "large vocabulary more than any layer); a chunked cross-entropy (the loss over slices of the "
               "sequence) or a fused linear-cross-entropy kernel lowers it, no offload can";
    case HOFF_PHASE_OPTIMIZER:
        return "the optimizer's step: gradients and optimizer temporaries are offload candidates here (HOFF_"
               "OFFLOAD_GRADIENTS=1, or blocks the optimizer made outside its step); by default they stay on the "
               "device, outside the budget";
    default: return "";
    }
}

const char *hoff__plan_op_at(const struct hoff__trace *t, uint32_t ev) {
    uint32_t i;

    for (i = ev + 1; i-- > 0;)
        if (i < t->nev && t->ev[i].kind == HOFF__TEV_OP)
            return t->ev[i].name < t->nnames && t->names[t->ev[i].name] ? t->names[t->ev[i].name] : "(unnamed op)";
    return "(before the first op mark)";
}

int hoff__plan_build(const struct hoff__planner *pl, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                     struct hoff__schedule *out) {
    struct hoff__plan_opts at_floor;
    uint64_t floor;
    uint32_t floor_ev;
    int rc;

    if ((rc = check_trace(pl->name, t)) != 0 || (rc = hoff__plan_floor(t, o, &floor, &floor_ev)) != 0)
        return rc;
    if (!o->budget_bytes || o->budget_bytes >= floor) {
        rc = pl->build(t, o, out);
    } else {
        /* No plan can go below the floor: plan for the floor, so that no
         * byte moves that cannot lower the peak, and say it is infeasible. */
        at_floor = *o;
        at_floor.budget_bytes = floor;
        rc = pl->build(t, &at_floor, out);
        out->budget_bytes = o->budget_bytes;
        out->feasible = 0;
    }
    out->floor_bytes = floor;
    out->floor_ev = floor_ev;
    out->floor_op_ev = UINT32_MAX;
    out->floor_phase = 0;
    out->floor_blocks = 0;
    if (rc == 0 && floor) {
        struct hoff__floor_where w;

        if ((rc = hoff__plan_floor_where(t, o, floor_ev, &w, NULL)) == 0) {
            out->floor_op_ev = w.op_ev;
            out->floor_phase = w.phase;
            out->floor_blocks = w.blocks;
        }
    }
    return rc;
}

int hoff__plan_gaps(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__gap **out,
                    size_t *nout) {
    uint32_t nev = (uint32_t)t->nev, i, p;
    struct hoff__gap *c = NULL;
    size_t nc = 0, cap = 0;

    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];
        const struct hoff__tacc *acc = t->acc + b->first_access;
        uint32_t lw = b->alloc_ev;
        int64_t ga, gb;

        if (!hoff__plan_movable(b))
            continue;
        if (!hoff__host_takes(o->host_cap_bytes, hoff__plan_bytes(o->block_bytes, b)))
            continue; /* it can never leave the device */
        if (HOFF__GROW(c, cap, nc + (b->naccess > 1 ? b->naccess : 1))) {
            free(c);
            return -ENOMEM;
        }
        if (b->naccess > 1) {
            /* Between use windows: evicted once the window of access p has
             * closed (AFTER close - 1: fired at the op mark that closes it),
             * back before access p + 1 opens the next; an access inside the
             * open window extends it (no gap). */
            for (p = 0; p + 1 < b->naccess; p++) {
                if (acc[p].write)
                    lw = acc[p].ev;
                if (acc[p + 1].ev > acc[p].close)
                    c[nc++] =
                        (struct hoff__gap){hoff__plan_bytes(o->block_bytes, b), acc[p].close - 1, acc[p + 1].ev, i, lw};
            }
            continue;
        }
        /* Only its alloc is marked: no earlier than the alloc's window
         * closes and the guard allows. */
        ga = (int64_t)b->alloc_ev + o->guard_after_alloc;
        if (ga < (int64_t)acc[0].close - 1)
            ga = (int64_t)acc[0].close - 1;
        gb = b->retained ? (int64_t)nev : (int64_t)b->free_ev - o->guard_before_free;
        if (gb > ga + 1)
            c[nc++] =
                (struct hoff__gap){hoff__plan_bytes(o->block_bytes, b), (uint32_t)ga, (uint32_t)gb, i, b->alloc_ev};
    }
    *out = c;
    *nout = nc;
    return 0;
}

/* Check what the planner relies on in a finished trace. */
