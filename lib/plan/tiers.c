/* tiers.c — the host and NVMe tiers in a plan: after a planner chose its evictions, keep the host tier under
 * its cap by spilling the blocks that stay away longest and restoring them in time.  Threading: pure function.
 *
 * The model, in events of the trace with their times (t_gpu_ns where known,
 * else t_cpu_ns):
 *  - an evicted block is on the host from the event after its eviction until
 *    the event before its prefetch (or its release, its free, or the step's
 *    end when it never comes back in the step);
 *  - a spill can start once the eviction has landed (size / d2h after the
 *    eviction's event) and frees the host once written (size / nvme_write
 *    later): the block leaves the host tier from the first event at or after
 *    that time;
 *  - a restore must have read the block back (size / nvme_read) before its
 *    prefetch's event: it is fired BEFORE the last event at or before that
 *    time, and the block is on the host again from there;
 *  - candidates are these "away from the host" intervals, taken longest
 *    first (then larger, then earlier) while an event they cover has the host
 *    tier over its cap — the RFC's greedy rule one tier down, with the same
 *    segment tree.
 * Where no candidate helps (the NVMe tier is off, or intervals are too short
 * for the disk), host_feasible is 0 and peak_host_bytes says how far over the
 * cap the plan goes. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/optdefs.h"
#include "plan/plan.h"
#include "plan/segtree.h"

struct away {
    uint32_t block;
    uint32_t from, to; /* on the host over events from..to (inclusive) */
    uint64_t landed;   /* when the eviction's copy lands (the D2H queue) */
    int prefetched;    /* ends with a prefetch BEFORE to+1 (else release/free/end) */
};

struct spill {
    uint64_t bytes;
    uint32_t s_ev, r_ev; /* spill AFTER s_ev, restore BEFORE r_ev (r_ev == UINT32_MAX: none) */
    uint32_t l, r;       /* away from the host over l..r */
    uint32_t block;
};

static int spill_cmp(const void *pa, const void *pb) {
    const struct spill *x = pa, *y = pb;
    uint32_t dx = x->r - x->l, dy = y->r - y->l;

    if (dx != dy)
        return dx > dy ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->l != y->l)
        return x->l < y->l ? -1 : 1;
    return x->block < y->block ? -1 : x->block > y->block;
}

static uint64_t ev_time(const struct hoff__trace *t, uint32_t i) {
    const struct hoff__tev *e = &t->ev[i];

    return e->t_gpu_ns != HOFF__TIME_UNKNOWN ? e->t_gpu_ns : e->t_cpu_ns;
}

/* ns to move bytes at gbps (bytes per ns): core/xfer.h's rule; 0 at no rate. */
static uint64_t xfer_ns(uint64_t bytes, double gbps) {
    return gbps > 0 ? hoff__copy_ns(bytes, gbps) : 0;
}

/* Append x to the intervals a[0 .. *n - 1] (capacity *cap): 0 or -ENOMEM (a unchanged). */
static int push_away(struct away **a, size_t *n, size_t *cap, struct away x) {
    if (HOFF__GROW(*a, *cap, *n + 1))
        return -ENOMEM;
    (*a)[(*n)++] = x;
    return 0;
}

/* The block intervals on the host, from the schedule's actions, and when
 * each eviction lands: the D2H engine is a FIFO (latency + bytes / d2h per
 * copy; a release costs the latency), an AFTER action fires at the next
 * event. */
static int collect_away(const struct hoff__trace *t, const struct hoff__plan_opts *o, const struct hoff__schedule *s,
                        struct away **out, size_t *nout) {
    uint32_t *since = malloc((t->nblocks ? t->nblocks : 1) * sizeof *since);
    uint64_t *landed = malloc((t->nblocks ? t->nblocks : 1) * sizeof *landed), busy = 0;
    uint64_t lat = o->latency_ns ? o->latency_ns : HOFF__DEF_SIM_LATENCY_NS;
    struct away *a = NULL;
    size_t n = 0, cap = 0, k;
    uint32_t i;

    if (!since || !landed) {
        free(since);
        free(landed);
        return -ENOMEM;
    }
    for (i = 0; i < t->nblocks; i++)
        since[i] = UINT32_MAX;
    for (k = 0; k < s->nact; k++) {
        const struct hoff__action *x = &s->act[k];
        uint32_t to;

        if (x->block >= t->nblocks)
            continue;
        if (x->kind == HOFF__ACT_EVICT || x->kind == HOFF__ACT_RELEASE) {
            uint32_t fe = x->when == HOFF__ACT_AFTER && x->ev + 1 < t->nev ? x->ev + 1 : x->ev;
            uint64_t at = ev_time(t, fe);

            busy = (at > busy ? at : busy) + lat;
            if (x->kind == HOFF__ACT_EVICT)
                busy += xfer_ns(hoff__plan_bytes(o->block_bytes, &t->blocks[x->block]), o->d2h_gbps);
        }
        if (x->kind == HOFF__ACT_EVICT) {
            since[x->block] = x->ev;
            landed[x->block] = busy;
            continue;
        }
        if ((x->kind != HOFF__ACT_PREFETCH && x->kind != HOFF__ACT_RELEASE) || since[x->block] == UINT32_MAX)
            continue;
        /* away from since+1; a prefetch BEFORE ev ends it at ev-1, a release
         * AFTER ev at ev */
        to = x->kind == HOFF__ACT_PREFETCH ? x->ev - 1 : x->ev;
        if (to >= since[x->block] + 1 && push_away(&a, &n, &cap,
                                                   (struct away){x->block, since[x->block] + 1, to, landed[x->block],
                                                                 x->kind == HOFF__ACT_PREFETCH}))
            goto nomem;
        since[x->block] = UINT32_MAX;
    }
    /* Still away: until the free, or the step's end for a retained block. */
    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];
        uint32_t to;

        if (since[i] == UINT32_MAX)
            continue;
        to = b->retained ? (uint32_t)t->nev - 1 : b->free_ev;
        if (to < since[i] + 1)
            continue;
        if (push_away(&a, &n, &cap, (struct away){i, since[i] + 1, to, landed[i], 0}))
            goto nomem;
    }
    free(since);
    free(landed);
    *out = a;
    *nout = n;
    return 0;

nomem:
    free(a);
    free(since);
    free(landed);
    return -ENOMEM;
}

/* First event in [lo, hi] whose time is >= when (hi+1 if none); times are
 * treated as non-decreasing (a running maximum). */
static uint32_t first_at(const uint64_t *tmax, uint32_t lo, uint32_t hi, uint64_t when) {
    uint32_t l = lo, r = hi + 1;

    while (l < r) {
        uint32_t m = l + (r - l) / 2;
        if (tmax[m] >= when)
            r = m;
        else
            l = m + 1;
    }
    return l;
}

/* The host tier's profile without spills: host[i] the bytes away on the host at event i (host has nev + 1
 * entries, zeroed), and tmax[i] the running maximum of the event times. */
static void host_profile(const struct hoff__trace *t, const struct hoff__plan_opts *o, const struct away *aw,
                         size_t naw, int64_t *host, uint64_t *tmax) {
    uint32_t nev = (uint32_t)t->nev, i;
    size_t k;

    for (k = 0; k < naw; k++) {
        uint64_t bytes = hoff__plan_bytes(o->block_bytes, &t->blocks[aw[k].block]);
        host[aw[k].from] += (int64_t)bytes;
        host[aw[k].to + 1] -= (int64_t)bytes;
    }
    for (i = 1; i < nev; i++)
        host[i] += host[i - 1];
    for (i = 0; i < nev; i++)
        tmax[i] = i && tmax[i - 1] > ev_time(t, i) ? tmax[i - 1] : ev_time(t, i);
}

/* The spills the intervals allow, into sp (naw entries): each interval's, when the disk can write the block
 * after its eviction has landed and (for one that ends with a prefetch) read it back before the prefetch. */
static size_t spill_candidates(const struct hoff__trace *t, const struct hoff__plan_opts *o, const struct away *aw,
                               size_t naw, const uint64_t *tmax, struct spill *sp) {
    size_t nsp = 0, k;

    for (k = 0; k < naw; k++) {
        const struct away *x = &aw[k];
        uint64_t bytes = hoff__plan_bytes(o->block_bytes, &t->blocks[x->block]);
        /* Spill AFTER the first event by which the eviction has landed;
         * the host is free from the first event after the write. */
        uint32_t s_ev = first_at(tmax, x->from, x->to, x->landed), l, r = x->to, rev = UINT32_MAX;

        if (s_ev > x->to)
            continue; /* back before the eviction could even land */
        l = first_at(tmax, s_ev + 1, x->to, tmax[s_ev] + xfer_ns(bytes, o->nvme_write_gbps));
        if (x->prefetched) {
            /* Read back before the prefetch (BEFORE event x->to + 1):
             * restore BEFORE the last event that leaves time for the
             * read; the block is on the host again from there. */
            uint64_t need = xfer_ns(bytes, o->nvme_read_gbps), at = ev_time(t, x->to + 1);
            uint32_t e = at >= need ? first_at(tmax, 0, x->to + 1, at - need + 1) : 0;

            if (e > 0)
                e--; /* the last event whose time is <= at - need */
            if (e <= l)
                e = l + 1; /* too short to hide the read: restore as late as it can be */
            if (e > x->to + 1)
                continue;
            rev = e;
            r = e - 1;
        }
        if (l > r)
            continue;
        sp[nsp++] = (struct spill){bytes, s_ev, rev, l, r, x->block};
    }
    return nsp;
}

/* Choose spills from sp (sorted) into chosen while the host tier on sg is over cap, then drop the ones the later
 * choices made redundant; sg ends with the chosen spills taken off. */
static void choose_spills(struct hoff__segtree *sg, const struct spill *sp, size_t nsp, uint8_t *chosen, uint64_t cap) {
    size_t k;

    for (k = 0; k < nsp && hoff__segtree_top(sg) > (int64_t)cap; k++) {
        const struct spill *x = &sp[k];

        if (hoff__segtree_max(sg, x->l, x->r) <= (int64_t)cap)
            continue;
        hoff__segtree_add(sg, x->l, x->r, -(int64_t)x->bytes);
        chosen[k] = 1;
    }
    /* A spill taken early may be redundant once later ones are in (the
     * host stays within the cap over its interval without it): drop
     * those, last taken first, so the disk moves no more than needed. */
    for (k = nsp; k-- > 0;) {
        const struct spill *x = &sp[k];

        if (chosen[k] && hoff__segtree_max(sg, x->l, x->r) + (int64_t)x->bytes <= (int64_t)cap) {
            hoff__segtree_add(sg, x->l, x->r, (int64_t)x->bytes);
            chosen[k] = 0;
        }
    }
}

/* Add the chosen spills (and their restores) to the schedule and their bytes on the NVMe tier to nvme (a
 * difference array, nev + 1 entries); the schedule is sorted after.  0 or -errno. */
static int add_spills(struct hoff__schedule *s, const struct spill *sp, size_t nsp, const uint8_t *chosen,
                      int64_t *nvme) {
    size_t k;
    int rc;

    for (k = 0; k < nsp; k++) {
        const struct spill *x = &sp[k];

        if (!chosen[k])
            continue;
        if ((rc = hoff__schedule_add(s, x->s_ev, HOFF__ACT_AFTER, HOFF__ACT_SPILL, x->block, UINT32_MAX)) != 0)
            return rc;
        s->bytes_spilled += x->bytes;
        if (x->r_ev != UINT32_MAX) {
            if ((rc = hoff__schedule_add(s, x->r_ev, HOFF__ACT_BEFORE, HOFF__ACT_RESTORE, x->block, UINT32_MAX)) != 0)
                return rc;
            s->bytes_restored += x->bytes;
        }
        nvme[x->l] += (int64_t)x->bytes;
        nvme[x->r + 1] -= (int64_t)x->bytes;
    }
    hoff__schedule_sort(s);
    return 0;
}

int hoff__plan_tiers(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s) {
    uint32_t nev = (uint32_t)t->nev, i;
    struct away *aw = NULL;
    struct spill *sp = NULL;
    uint8_t *chosen = NULL;
    uint64_t *tmax = NULL;
    int64_t *host = NULL, *nvme = NULL;
    struct hoff__segtree sg = {0};
    size_t naw = 0, nsp = 0;
    int rc;

    s->host_cap_bytes = o->host_cap_bytes;
    s->peak_host_bytes = s->peak_nvme_bytes = 0;
    s->peak_host_ev = 0;
    s->bytes_spilled = s->bytes_restored = 0;
    s->host_feasible = 1;
    if (nev == 0 || s->nact == 0)
        return 0;
    rc = collect_away(t, o, s, &aw, &naw);
    if (rc)
        return rc;
    host = calloc((size_t)nev + 1, sizeof *host);
    nvme = calloc((size_t)nev + 1, sizeof *nvme);
    tmax = malloc((size_t)nev * sizeof *tmax);
    if (!host || !nvme || !tmax) {
        rc = -ENOMEM;
        goto out;
    }
    host_profile(t, o, aw, naw, host, tmax);
    if ((rc = hoff__segtree_init(&sg, host, nev)) != 0)
        goto out;
    if (o->host_cap_bytes && o->nvme && hoff__segtree_top(&sg) > (int64_t)o->host_cap_bytes) {
        sp = malloc((naw ? naw : 1) * sizeof *sp);
        if (!sp) {
            rc = -ENOMEM;
            goto out;
        }
        nsp = spill_candidates(t, o, aw, naw, tmax, sp);
        qsort(sp, nsp, sizeof *sp, spill_cmp);
        chosen = calloc(nsp ? nsp : 1, 1);
        if (!chosen) {
            rc = -ENOMEM;
            goto out;
        }
        choose_spills(&sg, sp, nsp, chosen, o->host_cap_bytes);
        if ((rc = add_spills(s, sp, nsp, chosen, nvme)) != 0)
            goto out;
    }
    s->peak_host_bytes = (uint64_t)(hoff__segtree_top(&sg) > 0 ? hoff__segtree_top(&sg) : 0);
    s->peak_host_ev = hoff__segtree_argmax(&sg);
    s->host_feasible = !o->host_cap_bytes || s->peak_host_bytes <= o->host_cap_bytes;
    {
        int64_t run = 0;
        for (i = 0; i < nev; i++) {
            run += nvme[i];
            if (run > (int64_t)s->peak_nvme_bytes)
                s->peak_nvme_bytes = (uint64_t)run;
        }
    }
out:
    if (sg.mx)
        hoff__segtree_destroy(&sg);
    free(chosen);
    free(sp);
    free(tmax);
    free(nvme);
    free(host);
    free(aw);
    return rc;
}
