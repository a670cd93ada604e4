/* place.c — placing prefetches early (place.h): the schedule's instant-transfer resident bytes per event, a
 * segment tree over them, and a heap of the prefetches whose eviction has fired, earliest deadline first.
 * Threading: a pure function of its placement and model; no shared state. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/place.h"

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

/* Link each prefetch to the eviction before it (blocks with a tier action
 * keep their prefetches where they are: their restore must come first).
 * 0 or -ENOMEM (place_close frees what was made). */
int hoff__place_open(struct hoff__placing *pl, const struct hoff__pm *p, int place) {
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
    return nev ? hoff__segtree_init(&pl->sg, pl->inst, nev) : 0;
}

/* A new step places afresh.  0 or -ENOMEM. */
int hoff__place_reset(struct hoff__placing *pl, const struct hoff__pm *p) {
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
        hoff__segtree_destroy(&pl->sg);
    memset(&pl->sg, 0, sizeof pl->sg);
    return p->t->nev ? hoff__segtree_init(&pl->sg, pl->inst, (uint32_t)p->t->nev) : 0;
}

/* Action k (an eviction) has fired: its prefetch may now go early. */
void hoff__place_evicted(struct hoff__placing *pl, const struct hoff__schedule *s, size_t k) {
    if (pl->on && s->act[k].kind == HOFF__ACT_EVICT && pl->pf_of[k] != UINT32_MAX)
        heap_push(pl->heap, &pl->nheap, (struct heapent){s->act[pl->pf_of[k]].ev, pl->pf_of[k]});
}

/* At event i, after the schedule's BEFORE actions: issue the early
 * prefetches that can go now, earliest deadline first; each gets the next
 * issue number in seq.  0 or -ENOMEM. */
int hoff__place_early(struct hoff__placing *pl, struct hoff__pm *p, uint32_t i, uint64_t *seq, uint64_t *nseq) {
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
        hoff__pm_poll(p);
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
            if (hoff__segtree_last_above(&pl->sg, i, h.p0 - 1, (int64_t)p->budget - (int64_t)p->bytes[x], &e)) {
                pl->blk_act = h.act;
                pl->blk_ev = e + 1;
                break;
            }
        }
        heap_pop(pl->heap, &pl->nheap);
        hoff__segtree_add(&pl->sg, i, h.p0 - 1, (int64_t)p->bytes[x]);
        pl->issued[h.act] = 1;
        pl->newev[h.act] = i;
        seq[h.act] = (*nseq)++;
        if ((rc = hoff__pm_prefetch(p, x)) != 0)
            return rc;
    }
    return 0;
}

/* Rewrite s with the prefetches where they were placed, each action at its
 * event in the order it was issued.  0 or -ENOMEM. */
int hoff__place_finish(const struct hoff__placing *pl, struct hoff__schedule *s, const uint64_t *seq) {
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

void hoff__place_close(struct hoff__placing *pl) {
    if (pl->sg.mx)
        hoff__segtree_destroy(&pl->sg);
    free(pl->inst);
    free(pl->heap);
    free(pl->issued);
    free(pl->newev);
    free(pl->pf_of);
}
