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
#include "mem/hostcap.h"
#include "plan/plan.h"
#include "plan/segtree.h"

/*
 * The rules are the runtime's (lib/mem/residency.c, lib/exec/replay.c) and
 * the sim backend's clock (lib/backend/sim.c), so that a planner can compare
 * schedules by what the replay will cost rather than by a proxy:
 *
 *  - compute advances `now` by T[i] - T[i-1] before event i; only waits add
 *    to it beyond that (the stall);
 *  - at event i, the AFTER actions of i-1 fire, then the BEFORE actions of i,
 *    then the event itself; every call polls the copies that have landed;
 *  - a transfer call is ready at max(now, issuer) + call (the issuing thread
 *    is serial), starts at max(ready, its engine's busy_until) and lands
 *    latency + ceil(bytes / GB/s) later; a release (discard) is a call of
 *    latency only on the D2H engine;
 *  - an eviction or a release holds its bytes until it lands; a prefetch
 *    holds them from its issue;
 *  - room (a prefetch, an allocation, a page-in): while resident + need is
 *    over the budget, evict an unplanned victim if the evictions in flight
 *    cannot free enough (the runtime's: the least recently used resident
 *    block, paged back in at its next use), else wait for the oldest
 *    eviction in flight, else for the prefetch that lands first; with
 *    nothing left to evict or wait for, a prefetch is refused (the block is
 *    paged in at its use) and an allocation or a page-in goes over the
 *    budget, as residency.c does;
 *  - a prefetch of a block whose eviction is still in flight waits for it
 *    (replay.c does the same); a use waits for its prefetch, or pages the
 *    block in on demand (fault_ns + bytes / fault_gbps);
 *  - the host tier (o->host_cap_bytes) counts as residency.c counts it
 *    (mem/hostcap.h holds the rule for both):
 *    bytes on the host, spilling included, plus bytes on their way there
 *    (evictions and restores in flight); an eviction or a restore that would
 *    take it over the cap first makes room: when what is leaving the host
 *    (spills and prefetches in flight) is not enough, with an NVMe tier
 *    (o->nvme) it spills the block that reached the host first; then it
 *    waits for the spill or the prefetch issued first, else (with an NVMe
 *    tier) the eviction or restore issued first, whose block can then be
 *    spilled (a stall, tier_ns); when there is nothing to wait for the
 *    eviction does not happen (the block stays on the device);
 *  - the NVMe tier is one FIFO device for spills (write) and restores
 *    (read), each latency + ceil(bytes / GB/s), with no issuing-thread cost
 *    (the tier thread issues them); a planned spill of a block whose
 *    eviction is in flight starts when that lands (unless the block is
 *    wanted back first), a restore of a block whose spill is
 *    still in flight waits for it, and a prefetch or a use of a block on the
 *    NVMe tier waits for its restore (starting one if none was planned),
 *    over the host cap when no room can be made;
 *  - two steps back to back, the second being the prediction: what the
 *    first leaves in flight holds the engines, the budget and the host tier,
 *    and a group member whose slot is still held by such a copy waits for it
 *    at its allocation (pipeline.c).
 * Not modelled: a spill that fails (the predicted disk never fills; the
 * runtime then spills nothing more for host room until the disk has room
 * again: residency.c's spill_ok), the step's end (the runtime does not wait there), the
 * host-tier bytes of blocks that outlive the step (retained blocks left on
 * the host), and a wait for room on a spill or restore in flight (the
 * runtime may wait on any transfer; this waits on the copy engines').
 */

#define DEF_LAT_NS HOFF__DEF_SIM_LATENCY_NS /* the sim's defaults, named once: core/optdefs.h */
#define DEF_FAULT_NS HOFF__DEF_SIM_FAULT_NS
#define DEF_FAULT_GBPS HOFF__DEF_SIM_FAULT_GBPS
#define DEF_NVME_READ_GBPS HOFF__DEF_SIM_NVME_READ_GBPS
#define DEF_NVME_WRITE_GBPS HOFF__DEF_SIM_NVME_WRITE_GBPS

enum {
    P_NONE = 0, P_DEV, P_EVI, P_HOST, P_PRE, P_DEAD, P_FREED_PRE /* freed with its prefetch in flight */,
    P_SPI, P_NVM, P_RES /* spilling, on the NVMe tier, restoring */
};
enum { Q_EVICT = 0, Q_RELEASE, Q_VICTIM, Q_SPILL, Q_RESTORE };

struct qent {
    uint64_t land, bytes;
    uint64_t seq;      /* issue order (one call: one number) */
    uint32_t block;
    uint8_t kind;
};

/* A list of blocks threaded through per-block links. */
struct blist {
    uint32_t *prev, *next, head, tail;
};

struct heapent {
    uint32_t p0;   /* the prefetch's original event: its latest */
    uint32_t act;  /* its action index */
};

struct pr {
    const struct hoff__trace *t;
    const struct hoff__schedule *s;
    uint64_t *bytes;   /* per block */
    uint8_t *st;       /* per block: P_* */
    uint64_t *pland;   /* per block: landing of its prefetch in flight */
    uint64_t *dland;   /* per block: landing of its last D2H call (eviction, release) */
    uint64_t *busy;    /* per block: freed with a copy in flight, until it lands (its slot too) */
    uint64_t *carry;   /* the same from the step before, on this step's clock */
    struct qent *q;    /* the D2H FIFO */
    size_t qh, qt, qcap;
    struct qent *hq;   /* the H2D FIFO */
    size_t hh, ht, hcap;
    struct blist lru;  /* resident movable blocks, least recently used first */
    struct blist hl;   /* blocks on the host, in the order they got there (spill victims first) */
    struct qent *nq;   /* the NVMe FIFO (spills and restores) */
    size_t nh, nt, ncap;
    uint64_t *nland;   /* per block: landing of its NVMe operation in flight */
    uint8_t *sa;       /* per block: a planned spill waits for its eviction to land */
    uint8_t *hold;     /* per block: coming back, never spilled for host room (residency.c) */
    int err;           /* -ENOMEM met where it could not be returned (a spill at a landing) */
    uint8_t *gst;      /* per group, evict and prefetch: 0 not yet, 1 one call, 2 block by block */
    uint64_t now, issuer, d2h_busy, h2d_busy, nvme_busy;
    uint64_t resident, evicting, budget;
    uint64_t host, to_host, spilling, from_host, cap; /* the host tier, as residency.c counts it */
    uint64_t seq;      /* issue order of the copies in flight (residency.c's in-flight list) */
    uint32_t ev;       /* the event being replayed (use windows open at it are no victims) */
    int nvme;
    int pass;          /* 0: the step before, 1: the predicted step */
    hoff__xfer_observer obs;
    void *obs_arg;
    uint64_t lat, call, fault_ns;
    double h2d, d2h, fault_gbps, nvme_r, nvme_w;
    struct hoff__prediction *out;
};

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

/* Tell the observer (hoff__plan_opts.observe) of a copy, page-in or stall
 * in the predicted step (the second pass). */
static void observe(const struct pr *p, int kind, uint32_t block, uint32_t group, uint64_t bytes, uint64_t issued,
                    uint64_t start, uint64_t end) {
    if (p->obs && p->pass)
        p->obs(p->obs_arg, &(struct hoff__xfer_obs){.kind = kind, .block = block, .group = group, .bytes = bytes,
                                                    .issued = issued, .start = start, .end = end});
}

/* A transfer call of the issuing thread made now on the engine whose
 * busy_until is *busy (core/xfer.h's clock); its landing, reported as kind. */
static uint64_t call(struct pr *p, uint64_t *busy, uint64_t dur, int kind, uint32_t block, uint32_t group,
                     uint64_t bytes) {
    uint64_t start, land = hoff__xfer_call(p->now, &p->issuer, p->call, busy, 0, p->lat, dur, &start);

    observe(p, kind, block, group, bytes, p->issuer, start, land);
    return land;
}

#define NIL UINT32_MAX

static int bl_on(const struct blist *l, uint32_t x) {
    return l->prev[x] != NIL || l->head == x;
}

static void bl_remove(struct blist *l, uint32_t x) {
    if (!bl_on(l, x))
        return;
    if (l->prev[x] != NIL)
        l->next[l->prev[x]] = l->next[x];
    else
        l->head = l->next[x];
    if (l->next[x] != NIL)
        l->prev[l->next[x]] = l->prev[x];
    else
        l->tail = l->prev[x];
    l->prev[x] = l->next[x] = NIL;
}

static void bl_append(struct blist *l, uint32_t x) {
    bl_remove(l, x);
    l->prev[x] = l->tail;
    l->next[x] = NIL;
    if (l->tail != NIL)
        l->next[l->tail] = x;
    else
        l->head = x;
    l->tail = x;
}

static void bl_reset(struct blist *l, uint32_t nb) {
    uint32_t i;

    for (i = 0; i < nb; i++)
        l->prev[i] = l->next[i] = NIL;
    l->head = l->tail = NIL;
}

static void lru_remove(struct pr *p, uint32_t x) {
    bl_remove(&p->lru, x);
}

/* x is resident and was just used (or arrived): most recently used. */
static void lru_touch(struct pr *p, uint32_t x) {
    if (p->t->blocks[x].pinned)
        return; /* never a victim */
    bl_append(&p->lru, x);
}

/* x leaves the host (prefetched, paged in, spilled, freed, released). */
static void host_leave(struct pr *p, uint32_t x) {
    bl_remove(&p->hl, x);
}

/* x's host copy is gone now (paged in, freed, released): off the count too. */
static void host_drop(struct pr *p, uint32_t x) {
    p->host -= p->bytes[x];
    host_leave(p, x);
}

static int nvme_push(struct pr *p, uint32_t x, int kind);

static void land(struct pr *p, const struct qent *e) {
    p->resident -= e->bytes;
    p->evicting -= e->bytes;
    if (e->kind == Q_RELEASE)
        return;
    p->to_host -= e->bytes;
    if (e->block != NIL && p->st[e->block] == P_EVI) { /* freed in flight: its host copy is dead */
        p->st[e->block] = P_HOST;
        p->host += e->bytes;
        bl_append(&p->hl, e->block);
        if (p->sa[e->block]) { /* the planned spill, now that it can (residency.c's retire) */
            p->sa[e->block] = 0;
            if (nvme_push(p, e->block, Q_SPILL) != 0)
                p->err = -ENOMEM;
        }
    }
}

/* A spill or a restore has landed (residency.c's retire). */
static void land_nvme(struct pr *p, const struct qent *e) {
    uint32_t x = e->block;

    if (e->kind == Q_SPILL) { /* its host copy is gone, freed in flight or not */
        p->spilling -= e->bytes;
        p->host -= e->bytes;
        if (x != NIL && p->st[x] == P_SPI)
            p->st[x] = P_NVM;
        return;
    }
    p->to_host -= e->bytes;
    if (x != NIL && p->st[x] == P_RES) {
        p->st[x] = P_HOST;
        p->host += e->bytes;
        bl_append(&p->hl, x);
    }
}

static void poll(struct pr *p) {
    while (p->qh < p->qt && p->q[p->qh].land <= p->now)
        land(p, &p->q[p->qh++]);
    while (p->nh < p->nt && p->nq[p->nh].land <= p->now)
        land_nvme(p, &p->nq[p->nh++]);
    while (p->hh < p->ht && p->hq[p->hh].land <= p->now) {
        uint32_t x = p->hq[p->hh].block;
        uint64_t nbytes = p->hq[p->hh++].bytes;

        p->host -= nbytes; /* on the host until it lands, as residency.c counts it */
        p->from_host -= nbytes;
        if (x == NIL) { /* the step before's, freed in flight */
            p->resident -= nbytes;
            continue;
        }
        if (p->st[x] == P_PRE) { /* landed: resident, and a victim like any other */
            p->st[x] = P_DEV;
            lru_touch(p, x);
        } else if (p->st[x] == P_FREED_PRE) { /* freed in flight: its bytes go now */
            p->resident -= p->bytes[x];
            p->st[x] = P_NONE;
        }
    }
}

static int push(struct qent **q, size_t *qt, size_t *cap) {
    if (*qt == *cap) {
        size_t n = *cap ? *cap * 2 : 64;
        struct qent *nq = realloc(*q, n * sizeof *nq);

        if (!nq)
            return -ENOMEM;
        *q = nq;
        *cap = n;
    }
    return 0;
}

/* Compute waits until `when` (a stall, added to *to). */
static void wait_until(struct pr *p, uint64_t when, uint64_t *to) {
    if (when > p->now) {
        observe(p, HOFF__XF_WAIT, NIL, 0, 0, p->now, p->now, when);
        *to += when - p->now;
        p->now = when;
    }
    poll(p);
}

/* Wait for the oldest copy on the D2H FIFO; 0 if there is none. */
static int wait_oldest(struct pr *p) {
    if (p->qh == p->qt)
        return 0;
    wait_until(p, p->q[p->qh].land, &p->out->room_ns);
    return 1;
}

static int d2h_push(struct pr *p, uint64_t bytes, uint32_t block, int kind) {
    struct qent *e;

    if (push(&p->q, &p->qt, &p->qcap))
        return -ENOMEM;
    e = &p->q[p->qt++];
    e->land = call(p, &p->d2h_busy, kind == Q_RELEASE ? 0 : hoff__copy_ns(bytes, p->d2h),
                   kind == Q_RELEASE ? HOFF__XF_DISCARD : HOFF__XF_EVICT, block, 0, bytes);
    e->bytes = bytes;
    e->block = block;
    e->kind = (uint8_t)kind;
    e->seq = p->seq++;
    if (block != NIL)
        p->dland[block] = e->land;
    p->evicting += bytes;
    if (kind != Q_RELEASE) {
        p->out->bytes_d2h += bytes;
        p->out->evict_calls++;
    }
    if (kind == Q_VICTIM)
        p->out->victim_bytes += bytes;
    if (block != NIL)
        lru_remove(p, block);
    return 0;
}

/* Would `bytes` more take the host tier over its cap (residency.c's host_full)? */
static int host_full(const struct pr *p, uint64_t bytes) {
    return hoff__host_full(p->cap, p->host, p->to_host, bytes);
}

/* Queue an operation on the NVMe device: a spill of a block on the host or
 * a restore of a block on the NVMe tier. */
static int nvme_push(struct pr *p, uint32_t x, int kind) {
    uint64_t start;

    if (push(&p->nq, &p->nt, &p->ncap))
        return -ENOMEM;
    hoff__xfer_call(p->now, NULL, 0, &p->nvme_busy, 0, p->lat,
                    hoff__copy_ns(p->bytes[x], kind == Q_SPILL ? p->nvme_w : p->nvme_r), &start);
    observe(p, kind == Q_SPILL ? HOFF__XF_SPILL : HOFF__XF_RESTORE, x, 0, p->bytes[x], p->now, start, p->nvme_busy);
    p->nq[p->nt++] =
        (struct qent){.land = p->nvme_busy, .bytes = p->bytes[x], .seq = p->seq++, .block = x, .kind = (uint8_t)kind};
    p->nland[x] = p->nvme_busy;
    if (kind == Q_SPILL) {
        p->spilling += p->bytes[x];
        p->st[x] = P_SPI;
        host_leave(p, x);
        p->out->bytes_spilled += p->bytes[x];
    } else {
        p->to_host += p->bytes[x];
        p->st[x] = P_RES;
        p->out->bytes_restored += p->bytes[x];
    }
    return 0;
}

/* The runtime's host_room: keep the host tier under its cap for `bytes`
 * more.  When what is leaving the host (spills and prefetches in flight)
 * is not enough, spill the block that reached the host first (never keep,
 * nor a block held while it comes back); then wait for the spill or the
 * prefetch issued first, else (with an NVMe tier) the eviction or restore
 * issued first.  0 when the bytes fit (at once when the host has room),
 * 1 when they cannot (nothing to spill or wait for), -ENOMEM. */
static int host_room(struct pr *p, uint64_t bytes, uint32_t keep) {
    while (host_full(p, bytes)) {
        size_t k;
        uint32_t v;
        int rc;

        if (p->nvme && hoff__host_spill_more(p->cap, p->host, p->to_host, p->spilling, p->from_host, bytes)) {
            for (v = p->hl.head; v != NIL && (v == keep || p->hold[v]); v = p->hl.next[v])
                ;
            if (v != NIL) {
                if ((rc = nvme_push(p, v, Q_SPILL)) != 0)
                    return rc;
                continue;
            }
        }
        /* the spill or the prefetch issued first, else an eviction */
        for (k = p->nh; k < p->nt && p->nq[k].kind != Q_SPILL; k++)
            ;
        if (p->hh < p->ht && (k == p->nt || p->hq[p->hh].seq < p->nq[k].seq)) {
            wait_until(p, p->hq[p->hh].land, &p->out->tier_ns);
            continue;
        }
        if (k < p->nt) {
            wait_until(p, p->nq[k].land, &p->out->tier_ns);
            continue;
        }
        if (!p->nvme)
            break;
        /* the eviction or restore issued first: its block can then be spilled */
        {
            size_t r;

            for (k = p->qh; k < p->qt && p->q[k].kind == Q_RELEASE; k++)
                ;
            for (r = p->nh; r < p->nt && p->nq[r].kind != Q_RESTORE; r++)
                ;
            if (k == p->qt && r == p->nt)
                break;
            if (k < p->qt && (r == p->nt || p->q[k].seq < p->nq[r].seq))
                wait_until(p, p->q[k].land, &p->out->tier_ns);
            else
                wait_until(p, p->nq[r].land, &p->out->tier_ns);
        }
    }
    return host_full(p, bytes) ? 1 : 0;
}

/* Start evicting resident block x (planned, or a victim): host room first;
 * 1 when the host tier has none (the block stays on the device). */
static int start_evict(struct pr *p, uint32_t x, int kind) {
    int rc = host_room(p, p->bytes[x], x);

    if (rc)
        return rc;
    if ((rc = d2h_push(p, p->bytes[x], x, kind)) != 0)
        return rc;
    p->to_host += p->bytes[x];
    p->st[x] = P_EVI;
    return 0;
}

/* A block on the NVMe tier (or on its way there or back) back on the host,
 * waiting for it: a use or a prefetch needs the bytes (residency.c's
 * to_host_now).  When no host room can be made the block comes back over
 * the cap, as residency.c's start_restore does for a use.  0, -ENOMEM. */
static int to_host_now(struct pr *p, uint32_t x) {
    int rc;

    if (p->st[x] == P_SPI || p->st[x] == P_RES)
        wait_until(p, p->nland[x], &p->out->tier_ns);
    if (p->st[x] == P_NVM) {
        if ((rc = host_room(p, p->bytes[x], x)) < 0)
            return rc;
        if ((rc = nvme_push(p, x, Q_RESTORE)) != 0)
            return rc;
        wait_until(p, p->nland[x], &p->out->tier_ns);
    }
    return 0;
}

static int do_spill(struct pr *p, uint32_t x) {
    poll(p);
    if (p->st[x] == P_EVI) /* once the eviction lands (land()) */
        p->sa[x] = 1;
    return p->st[x] == P_HOST ? nvme_push(p, x, Q_SPILL) : 0; /* else skipped, as the runtime does */
}

static int do_restore(struct pr *p, uint32_t x) {
    int rc;

    poll(p);
    if (p->st[x] == P_SPI) /* its spill must land first (replay.c waits) */
        wait_until(p, p->nland[x], &p->out->tier_ns);
    if (p->st[x] != P_NVM)
        return 0;
    if ((rc = host_room(p, p->bytes[x], x)) != 0)
        return rc < 0 ? rc : 0;
    return nvme_push(p, x, Q_RESTORE);
}

static int make_room_once(struct pr *p, uint64_t need, uint32_t keep);

/* The runtime's make_room: victims least recently used first (never keep),
 * else the oldest eviction in flight, else the prefetch that lands first;
 * keep is held on the host meanwhile (never spilled for a victim's room).
 * 0, 1 when there is no room to be made (an allocation or a page-in then
 * overruns the budget, a prefetch is refused), -ENOMEM. */
static int make_room(struct pr *p, uint64_t need, uint32_t keep) {
    uint8_t held;
    int rc;

    if (keep == NIL)
        return make_room_once(p, need, keep);
    held = p->hold[keep];
    p->hold[keep] = 1;
    rc = make_room_once(p, need, keep);
    p->hold[keep] = held;
    return rc;
}

static int make_room_once(struct pr *p, uint64_t need, uint32_t keep) {
    if (!p->budget)
        return 0;
    for (;;) {
        uint64_t over;
        uint32_t v;
        int rc;

        poll(p);
        if (p->resident + need <= p->budget)
            return 0;
        over = p->resident + need - p->budget;
        if (p->evicting < over) {
            /* residency.c's pick_victim */
            for (v = p->lru.head;
                 v != NIL && (v == keep || hoff__plan_window_open(p->t, v, p->ev) || !hoff__host_takes(p->cap, p->bytes[v]));
                 v = p->lru.next[v])
                ; /* never keep, one in its use window, or one the host tier can never take */
            if (v != NIL) {
                if ((rc = start_evict(p, v, Q_VICTIM)) != 0)
                    return rc; /* 1: the host tier is full, no room */
                continue;
            }
        }
        if (wait_oldest(p))
            continue;
        if (p->hh < p->ht) { /* a prefetch in flight: wait for it to land */
            wait_until(p, p->hq[p->hh].land, &p->out->room_ns);
            continue;
        }
        return 1; /* nothing left to evict or wait for: no room */
    }
}

static int do_evict(struct pr *p, uint32_t x) {
    int rc;

    poll(p);
    if (p->st[x] != P_DEV)
        return 0; /* the runtime skips it too (not resident: a victim already, or in flight) */
    rc = start_evict(p, x, Q_EVICT);
    return rc < 0 ? rc : 0; /* 1: the host tier is full, the block stays */
}

static int do_release(struct pr *p, uint32_t x) {
    int rc = 0;

    p->sa[x] = 0;
    poll(p);
    if (p->st[x] == P_DEV)
        rc = d2h_push(p, p->bytes[x], x, Q_RELEASE);
    else if (p->st[x] == P_PRE) /* a prefetch in flight: cannot happen in a valid schedule */
        p->resident -= p->bytes[x];
    else if (p->st[x] == P_HOST) /* the host copy is simply dead */
        host_drop(p, x);
    else if (p->st[x] == P_SPI || p->st[x] == P_RES || p->st[x] == P_EVI)
        return 0; /* busy: the runtime skips it */
    p->st[x] = P_DEAD;
    return rc;
}

static int do_prefetch(struct pr *p, uint32_t x) {
    int rc;

    p->sa[x] = 0; /* wanted back: no spill when its eviction lands */
    poll(p);
    while (p->st[x] == P_EVI && wait_oldest(p))
        ;
    if ((p->st[x] == P_SPI || p->st[x] == P_NVM || p->st[x] == P_RES) && (rc = to_host_now(p, x)) != 0)
        return rc;
    if (p->st[x] != P_HOST)
        return 0;
    if ((rc = make_room(p, p->bytes[x], x)) != 0)
        return rc < 0 ? rc : 0; /* refused (residency.c): paged in at its use */
    if ((rc = push(&p->hq, &p->ht, &p->hcap)) != 0)
        return rc;
    host_leave(p, x); /* counted on the host until the copy lands */
    p->pland[x] = call(p, &p->h2d_busy, hoff__copy_ns(p->bytes[x], p->h2d), HOFF__XF_PREFETCH, x, 0, p->bytes[x]);
    p->hq[p->ht].land = p->pland[x];
    p->hq[p->ht].block = x;
    p->hq[p->ht].bytes = p->bytes[x];
    p->hq[p->ht].seq = p->seq++;
    p->hq[p->ht++].kind = 0;
    p->resident += p->bytes[x];
    p->from_host += p->bytes[x];
    p->st[x] = P_PRE;
    p->out->bytes_h2d += p->bytes[x];
    p->out->prefetch_calls++;
    return 0;
}

static int do_access(struct pr *p, uint32_t x) {
    uint64_t c;
    int rc;

    p->sa[x] = 0;
    poll(p);
    switch (p->st[x]) {
    case P_DEV:
        lru_touch(p, x);
        return 0;
    case P_PRE:
        wait_until(p, p->pland[x], &p->out->late_ns);
        p->st[x] = P_DEV;
        lru_touch(p, x);
        return 0;
    case P_EVI:
        while (p->st[x] == P_EVI && wait_oldest(p))
            ;
        break;
    case P_SPI:
    case P_NVM:
    case P_RES:
        if ((rc = to_host_now(p, x)) != 0) /* off the disk first */
            return rc;
        break;
    case P_HOST:
        break;
    default:
        return 0;
    }
    if ((rc = make_room(p, p->bytes[x], x)) < 0) /* 1: paged in over the budget */
        return rc;
    p->out->overruns += rc == 1;
    if (p->st[x] == P_HOST)
        host_drop(p, x);
    c = hoff__sat_add(p->fault_ns, hoff__copy_ns(p->bytes[x], p->fault_gbps));
    observe(p, HOFF__XF_FAULT, x, 0, p->bytes[x], p->now, p->now, p->now + c);
    p->now += c;
    p->out->fault_ns += c;
    p->out->faults++;
    p->resident += p->bytes[x];
    p->st[x] = P_DEV;
    lru_touch(p, x);
    return 0;
}

static int do_event(struct pr *p, const struct hoff__tev *e) {
    uint32_t x = e->block;
    int rc;

    if (e->kind != HOFF__TEV_ALLOC && e->kind != HOFF__TEV_FREE && e->kind != HOFF__TEV_ACCESS)
        return 0;
    if (x >= p->t->nblocks || p->t->blocks[x].pool != 1)
        return 0;
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        /* A group member whose slot is still held by the step before's copy
         * in flight waits for it to land (pipeline.c): a stall. */
        if (p->carry[x] > p->now && p->s->block_group && x < p->s->nblocks_grouped && p->s->block_group[x])
            wait_until(p, p->carry[x], &p->out->room_ns);
        if ((rc = make_room(p, p->bytes[x], x)) < 0) /* 1: allocated over the budget */
            return rc;
        p->out->overruns += rc == 1;
        p->resident += p->bytes[x];
        p->st[x] = P_DEV;
        lru_touch(p, x);
        return 0;
    case HOFF__TEV_ACCESS:
        return do_access(p, x);
    default: /* free */
        p->sa[x] = 0;
        poll(p);
        lru_remove(p, x);
        if (p->st[x] == P_PRE) { /* residency.c counts it until its copy lands */
            p->st[x] = P_FREED_PRE;
            p->busy[x] = p->pland[x];
            return 0;
        }
        if ((p->st[x] == P_EVI || p->st[x] == P_DEAD) && p->dland[x] > p->now)
            p->busy[x] = p->dland[x];
        if ((p->st[x] == P_SPI || p->st[x] == P_RES) && p->nland[x] > p->now)
            p->busy[x] = p->nland[x];
        if (p->st[x] == P_DEV)
            p->resident -= p->bytes[x];
        if (p->st[x] == P_HOST) /* the host copy is dead */
            host_drop(p, x);
        /* an eviction, a spill or a restore in flight still lands (and gives
         * its bytes back) */
        p->st[x] = P_NONE;
        return 0;
    }
}

/* A group's EVICT or PREFETCH (plan.h): the first member's action moves
 * every member with one call when each is where the call moves it from
 * (for a prefetch, after waiting for members whose own eviction is still in
 * flight), as replay.c and hoff__res_group do; else block by block.
 * Returns 1 when the action is covered by the group's call. */
static int fire_group(struct pr *p, const struct hoff__action *a, int *rc) {
    const struct hoff__schedule *s = p->s;
    const struct hoff__group *g;
    uint8_t *st;
    uint64_t total = 0, land;
    uint32_t k, want;
    int evict = a->kind == HOFF__ACT_EVICT;

    *rc = 0;
    if (!a->group || a->group > s->ngroups || !p->gst || (a->kind != HOFF__ACT_EVICT && a->kind != HOFF__ACT_PREFETCH))
        return 0;
    g = &s->groups[a->group - 1];
    st = &p->gst[2 * (a->group - 1) + (evict ? 0 : 1)];
    if (*st)
        return *st == 1;
    poll(p);
    want = evict ? P_DEV : P_HOST;
    for (k = 0; k < g->n && !evict; k++) {
        uint32_t x = s->gmember[g->first + k].block;

        p->sa[x] = 0;
        while (p->st[x] == P_EVI && wait_oldest(p))
            ;
    }
    for (k = 0; k < g->n; k++) {
        uint32_t x = s->gmember[g->first + k].block;

        if (p->st[x] != want)
            break;
        total += p->bytes[x];
    }
    if (k < g->n || (evict && host_full(p, total))) { /* block by block (the host tier makes room) */
        *st = 2;
        return 0;
    }
    if (!evict) {
        for (k = 0; k < g->n; k++) /* the members stay on the host while room is made */
            p->hold[s->gmember[g->first + k].block] = 1;
        *rc = make_room(p, total, s->gmember[g->first].block);
        for (k = 0; k < g->n; k++)
            p->hold[s->gmember[g->first + k].block] = 0;
        if (*rc == 1) { /* no room for the whole group: block by block */
            *rc = 0;
            *st = 2;
            return 0;
        }
        if (*rc)
            return 0;
        for (k = 0; k < g->n; k++) /* still where they were (residency.c checks) */
            if (p->st[s->gmember[g->first + k].block] != P_HOST) {
                *st = 2;
                return 0;
            }
    }
    if (evict) {
        land = call(p, &p->d2h_busy, hoff__copy_ns(total, p->d2h), HOFF__XF_EVICT, s->gmember[g->first].block,
                    a->group, total);
        for (k = 0; k < g->n; k++) {
            uint32_t x = s->gmember[g->first + k].block;

            if ((*rc = push(&p->q, &p->qt, &p->qcap)) != 0)
                return 0;
            p->q[p->qt++] = (struct qent){.land = land, .bytes = p->bytes[x], .seq = p->seq, .block = x, .kind = Q_EVICT};
            p->evicting += p->bytes[x];
            p->to_host += p->bytes[x];
            p->dland[x] = land;
            p->st[x] = P_EVI;
            lru_remove(p, x);
        }
        p->out->bytes_d2h += total;
        p->out->evict_calls++;
        p->seq++;
    } else {
        land = call(p, &p->h2d_busy, hoff__copy_ns(total, p->h2d), HOFF__XF_PREFETCH, s->gmember[g->first].block,
                    a->group, total);
        for (k = 0; k < g->n; k++) {
            uint32_t x = s->gmember[g->first + k].block;

            if ((*rc = push(&p->hq, &p->ht, &p->hcap)) != 0)
                return 0;
            p->hq[p->ht++] = (struct qent){.land = land, .bytes = p->bytes[x], .seq = p->seq, .block = x, .kind = 0};
            p->pland[x] = land;
            p->resident += p->bytes[x];
            p->from_host += p->bytes[x];
            p->st[x] = P_PRE;
            host_leave(p, x);
        }
        p->out->bytes_h2d += total;
        p->out->prefetch_calls++;
        p->seq++;
    }
    *st = 1;
    return 1;
}

/* One planned action, as replay.c fires it. */
static int fire(struct pr *p, const struct hoff__action *a) {
    int rc;

    if (fire_group(p, a, &rc) || rc)
        return rc;
    switch (a->kind) {
    case HOFF__ACT_EVICT:
        return do_evict(p, a->block);
    case HOFF__ACT_PREFETCH:
        return do_prefetch(p, a->block);
    case HOFF__ACT_RELEASE:
        return do_release(p, a->block);
    case HOFF__ACT_SPILL:
        return do_spill(p, a->block);
    case HOFF__ACT_RESTORE:
        return do_restore(p, a->block);
    default:
        return 0;
    }
}

/* The instant-transfer resident bytes per event under s (hoff__schedule_peak's semantics). */
static int64_t *instant_resident(const struct hoff__trace *t, const struct hoff__schedule *s, const uint64_t *bytes,
                                 int hold_releases) {
    uint32_t nev = (uint32_t)t->nev, i;
    int64_t *v = malloc((nev ? nev : 1) * sizeof *v), cur = 0, later = 0;
    uint8_t *away = calloc(t->nblocks ? t->nblocks : 1, 1);
    size_t k = 0;

    if (!v || !away) {
        free(v);
        free(away);
        return NULL;
    }
    for (i = 0; i < nev; i++) {
        const struct hoff__tev *e = &t->ev[i];
        int managed = (e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_FREE) && e->block < t->nblocks &&
                      t->blocks[e->block].pool == 1;

        for (; k < s->nact && s->act[k].ev == i && s->act[k].when == HOFF__ACT_BEFORE; k++)
            if (s->act[k].kind == HOFF__ACT_PREFETCH && away[s->act[k].block]) {
                away[s->act[k].block] = 0;
                cur += (int64_t)bytes[s->act[k].block];
            }
        if (managed && e->kind == HOFF__TEV_ALLOC) {
            cur += (int64_t)bytes[e->block];
            away[e->block] = 0;
        }
        v[i] = cur;
        cur -= later; /* the releases of the event before have landed by now */
        later = 0;
        if (managed && e->kind == HOFF__TEV_FREE && !away[e->block])
            cur -= (int64_t)bytes[e->block];
        if (managed && e->kind == HOFF__TEV_FREE)
            away[e->block] = 1; /* gone: nothing more to count */
        for (; k < s->nact && s->act[k].ev == i; k++) {
            const struct hoff__action *a = &s->act[k];

            if ((a->kind == HOFF__ACT_EVICT || a->kind == HOFF__ACT_RELEASE) && !away[a->block]) {
                away[a->block] = 1;
                /* (hold_releases) A release fires at the next event and
                 * holds its bytes until its call lands: count it there
                 * too, so that an early prefetch does not take the room an
                 * allocation at that event is about to need. */
                if (hold_releases && a->kind == HOFF__ACT_RELEASE && a->when == HOFF__ACT_AFTER)
                    later += (int64_t)bytes[a->block];
                else
                    cur -= (int64_t)bytes[a->block];
            }
        }
    }
    free(away);
    return v;
}

static void heap_push(struct heapent *h, size_t *n, struct heapent x) {
    size_t i = (*n)++;

    while (i > 0) {
        size_t up = (i - 1) / 2;

        if (h[up].p0 < x.p0 || (h[up].p0 == x.p0 && h[up].act < x.act))
            break;
        h[i] = h[up];
        i = up;
    }
    h[i] = x;
}

static void heap_pop(struct heapent *h, size_t *n) {
    struct heapent x = h[--(*n)];
    size_t i = 0;

    for (;;) {
        size_t c = 2 * i + 1;

        if (c >= *n)
            break;
        if (c + 1 < *n && (h[c + 1].p0 < h[c].p0 || (h[c + 1].p0 == h[c].p0 && h[c + 1].act < h[c].act)))
            c++;
        if (x.p0 < h[c].p0 || (x.p0 == h[c].p0 && x.act < h[c].act))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = x;
}

struct seqact {
    struct hoff__action a;
    uint64_t seq;
};

static int by_key_seq(const void *pa, const void *pb) {
    const struct seqact *x = pa, *y = pb;
    uint64_t kx = (uint64_t)x->a.ev << 1 | x->a.when, ky = (uint64_t)y->a.ev << 1 | y->a.when;

    if (kx != ky)
        return kx < ky ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* --- the model's state ----------------------------------------------------- */

/* Set p up to replay s over t with o's rates and costs (the sim's defaults
 * where o leaves them 0).  0 or -ENOMEM (pr_close frees what was made). */
static int pr_open(struct pr *p, const struct hoff__trace *t, const struct hoff__plan_opts *o,
                   const struct hoff__schedule *s, struct hoff__prediction *out) {
    size_t n = t->nblocks ? t->nblocks : 1;
    uint32_t i;

    memset(out, 0, sizeof *out);
    memset(p, 0, sizeof *p);
    p->t = t;
    p->s = s;
    p->out = out;
    p->budget = o->budget_bytes;
    if (p->budget && s->floor_bytes > p->budget)
        p->budget = s->floor_bytes; /* residency.c's room_budget: nothing forced below the floor */
    p->h2d = o->h2d_gbps > 0 ? o->h2d_gbps : 50.0;
    p->d2h = o->d2h_gbps > 0 ? o->d2h_gbps : 50.0;
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
    bl_reset(&p->lru, t->nblocks);
    bl_reset(&p->hl, t->nblocks);
    return 0;
}

static void pr_close(struct pr *p) {
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
static void next_step(struct pr *p, uint64_t tail) {
    uint64_t end = p->now + tail, q0 = p->qh, n;
    uint32_t nb = p->t->nblocks, i;

    /* the D2H FIFO: evictions hold the budget and the host until they land */
    for (n = 0; q0 < p->qt; q0++)
        if (p->q[q0].land > end) {
            p->q[n] = p->q[q0];
            p->q[n].land -= end;
            p->q[n].block = NIL;
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
            p->nq[n].block = NIL;
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
            p->hq[n].block = NIL;
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
    bl_reset(&p->lru, nb);
    bl_reset(&p->hl, nb);
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
    send = t->step_gpu_ns != HOFF__TIME_UNKNOWN && T[nev - 1] == t->ev[nev - 1].t_gpu_ns ? t->step_gpu_ns
                                                                                         : t->step_ns;
    return send != HOFF__TIME_UNKNOWN && send > T[nev - 1] ? send - T[nev - 1] : 0;
}

/* --- placing prefetches early (HOFF__PLACE_EARLY*) ------------------------- */

struct place {
    int on;
    uint32_t *pf_of;        /* per action: an eviction's prefetch (the action after it), else UINT32_MAX */
    uint32_t *newev;        /* per action: the event it is placed at */
    uint8_t *issued;        /* per action: a prefetch already issued, earlier */
    struct heapent *heap;   /* the prefetches whose eviction has fired, earliest deadline first */
    size_t nheap;
    uint32_t blk_act, blk_ev; /* that prefetch cannot go before event blk_ev */
    int64_t *inst;          /* the schedule's instant-transfer resident bytes per event */
    struct hoff__seg sg;    /* inst plus the early prefetches */
};

/* Link each prefetch to the eviction before it (blocks with a tier action
 * keep their prefetches where they are: their restore must come first).
 * 0 or -ENOMEM (place_close frees what was made). */
static int place_open(struct place *pl, const struct pr *p, int place) {
    const struct hoff__schedule *s = p->s;
    uint32_t nb = p->t->nblocks, nev = (uint32_t)p->t->nev, i, *last_ev;
    uint8_t *tiered;
    size_t na = s->nact ? s->nact : 1, j;

    memset(pl, 0, sizeof *pl);
    pl->on = place == HOFF__PLACE_EARLY || place == HOFF__PLACE_EARLY_HEADROOM;
    pl->blk_act = UINT32_MAX;
    if (!pl->on)
        return 0;
    tiered = calloc(nb ? nb : 1, 1);
    last_ev = malloc((nb ? nb : 1) * sizeof *last_ev);
    pl->pf_of = malloc(na * sizeof *pl->pf_of);
    pl->newev = malloc(na * sizeof *pl->newev);
    pl->issued = calloc(na, 1);
    pl->heap = malloc(na * sizeof *pl->heap);
    pl->inst = instant_resident(p->t, s, p->bytes, place == HOFF__PLACE_EARLY_HEADROOM);
    if (!tiered || !last_ev || !pl->pf_of || !pl->newev || !pl->issued || !pl->heap || !pl->inst) {
        free(tiered);
        free(last_ev);
        return -ENOMEM;
    }
    for (j = 0; j < s->nact; j++)
        if (s->act[j].kind == HOFF__ACT_SPILL || s->act[j].kind == HOFF__ACT_RESTORE)
            tiered[s->act[j].block] = 1;
    for (i = 0; i < nb; i++)
        last_ev[i] = UINT32_MAX;
    for (j = 0; j < s->nact; j++) {
        const struct hoff__action *a = &s->act[j];

        pl->pf_of[j] = UINT32_MAX;
        pl->newev[j] = a->ev;
        if (a->kind == HOFF__ACT_EVICT)
            last_ev[a->block] = (uint32_t)j;
        else if (a->kind == HOFF__ACT_PREFETCH && last_ev[a->block] != UINT32_MAX) {
            if (!tiered[a->block] && !a->group && a->when == HOFF__ACT_BEFORE)
                pl->pf_of[last_ev[a->block]] = (uint32_t)j;
            last_ev[a->block] = UINT32_MAX;
        }
    }
    free(tiered);
    free(last_ev);
    return nev ? hoff__seg_init(&pl->sg, pl->inst, nev) : 0;
}

/* A new step places afresh.  0 or -ENOMEM. */
static int place_reset(struct place *pl, const struct pr *p) {
    const struct hoff__schedule *s = p->s;
    size_t j;

    if (!pl->on)
        return 0;
    memset(pl->issued, 0, s->nact ? s->nact : 1);
    for (j = 0; j < s->nact; j++)
        pl->newev[j] = s->act[j].ev;
    pl->nheap = 0;
    pl->blk_act = UINT32_MAX;
    if (pl->sg.mx)
        hoff__seg_destroy(&pl->sg);
    memset(&pl->sg, 0, sizeof pl->sg);
    return p->t->nev ? hoff__seg_init(&pl->sg, pl->inst, (uint32_t)p->t->nev) : 0;
}

/* Action k (an eviction) has fired: its prefetch may now go early. */
static void place_evicted(struct place *pl, const struct hoff__schedule *s, size_t k) {
    if (pl->on && s->act[k].kind == HOFF__ACT_EVICT && pl->pf_of[k] != UINT32_MAX)
        heap_push(pl->heap, &pl->nheap, (struct heapent){s->act[pl->pf_of[k]].ev, pl->pf_of[k]});
}

/* At event i, after the schedule's BEFORE actions: issue the early
 * prefetches that can go now, earliest deadline first; each gets the next
 * issue number in seq.  0 or -ENOMEM. */
static int place_early(struct place *pl, struct pr *p, uint32_t i, uint64_t *seq, uint64_t *nseq) {
    const struct hoff__schedule *s = p->s;

    while (pl->on && pl->nheap) {
        struct heapent h = pl->heap[0];
        uint32_t x = s->act[h.act].block;
        int rc;

        if (pl->issued[h.act]) {
            heap_pop(pl->heap, &pl->nheap);
            continue;
        }
        if (h.p0 <= i)
            break; /* cannot happen: fired in the schedule's place */
        poll(p);
        if (p->st[x] != P_HOST || (p->budget && p->resident + p->bytes[x] > p->budget))
            break;
        if (p->budget) {
            /* The plan's resident bytes only grow while placing (each
             * early prefetch adds), so a prefetch that would pass the
             * budget at event e cannot go before e + 1: no need to ask
             * the tree again until then (at 10^6 events, asking at every
             * event was most of the placement's time). */
            uint32_t e;

            if (h.act == pl->blk_act && i < pl->blk_ev)
                break;
            if (hoff__seg_last_above(&pl->sg, i, h.p0 - 1, (int64_t)p->budget - (int64_t)p->bytes[x], &e)) {
                pl->blk_act = h.act;
                pl->blk_ev = e + 1;
                break;
            }
        }
        heap_pop(pl->heap, &pl->nheap);
        hoff__seg_add(&pl->sg, i, h.p0 - 1, (int64_t)p->bytes[x]);
        pl->issued[h.act] = 1;
        pl->newev[h.act] = i;
        seq[h.act] = (*nseq)++;
        if ((rc = do_prefetch(p, x)) != 0)
            return rc;
    }
    return 0;
}

/* Rewrite s with the prefetches where they were placed, each action at its
 * event in the order it was issued.  0 or -ENOMEM. */
static int place_finish(const struct place *pl, struct hoff__schedule *s, const uint64_t *seq) {
    struct seqact *v;
    size_t j;

    if (!pl->on)
        return 0;
    if (!(v = malloc((s->nact ? s->nact : 1) * sizeof *v)))
        return -ENOMEM;
    for (j = 0; j < s->nact; j++) {
        v[j].a = s->act[j];
        v[j].a.ev = pl->newev[j];
        v[j].seq = seq[j];
    }
    qsort(v, s->nact, sizeof *v, by_key_seq);
    for (j = 0; j < s->nact; j++)
        s->act[j] = v[j].a;
    free(v);
    hoff__schedule_sort(s); /* a no-op unless a kind rank needs it */
    return 0;
}

static void place_close(struct place *pl) {
    if (pl->sg.mx)
        hoff__seg_destroy(&pl->sg);
    free(pl->inst);
    free(pl->heap);
    free(pl->issued);
    free(pl->newev);
    free(pl->pf_of);
}

/* --- the event loop --------------------------------------------------------- */

int hoff__plan_predict(const struct hoff__trace *t, const struct hoff__plan_opts *o, const uint64_t *T,
                       struct hoff__schedule *s, int place, struct hoff__prediction *out) {
    uint32_t nev = (uint32_t)t->nev, nb = t->nblocks, i;
    struct pr p;
    struct place pl;
    uint64_t *seq = NULL, nseq = 0, tprev = 0, tail;
    size_t k = 0, j;
    int rc, pass;

    rc = pr_open(&p, t, o, s, out);
    if (!rc)
        rc = place_open(&pl, &p, place);
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
            rc = hoff__error(-EINVAL, "predict: the schedule is unsorted or names an event or block the trace "
                             "does not have (action %zu)", j);
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
            if ((rc = place_reset(&pl, &p)) != 0)
                goto done;
        }
        for (i = 0; i <= nev; i++) {
            p.ev = i;
            /* compute up to event i, then what has landed */
            if (i < nev) {
                p.now += T[i] - tprev;
                tprev = T[i];
            }
            poll(&p);
            /* the AFTER actions of i - 1 */
            for (; k < s->nact && i > 0 && s->act[k].ev == i - 1; k++) {
                seq[k] = nseq++;
                if ((rc = fire(&p, &s->act[k])) != 0)
                    goto done;
                place_evicted(&pl, s, k);
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
                if ((rc = fire(&p, a)) != 0)
                    goto done;
            }
            if ((rc = place_early(&pl, &p, i, seq, &nseq)) != 0)
                goto done;
            if ((rc = do_event(&p, &t->ev[i])) != 0)
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
    rc = place_finish(&pl, s, seq);

done:
    place_close(&pl);
    free(seq);
    pr_close(&p);
    return rc;
}
