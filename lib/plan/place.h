/* place.h — placing prefetches early (HOFF__PLACE_EARLY, HOFF__PLACE_EARLY_HEADROOM): during the predicted step,
 * each prefetch whose eviction has fired goes as early as the budget lets it, earliest deadline first (place.c).
 * Threading: belongs to one call of hoff__plan_predict; no shared state. */
#ifndef HOFF_PLAN_PLACE_H
#define HOFF_PLAN_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "plan/model.h"
#include "plan/segtree.h"

struct heapent {
    uint32_t p0;  /* the prefetch's original event: its latest */
    uint32_t act; /* its action index */
};

struct hoff__placing {
    int on;
    uint32_t *pf_of;      /* per action: an eviction's prefetch (the action after it), else UINT32_MAX */
    uint32_t *newev;      /* per action: the event it is placed at */
    uint8_t *issued;      /* per action: a prefetch already issued, earlier */
    struct heapent *heap; /* the prefetches whose eviction has fired, earliest deadline first */
    size_t nheap;
    uint32_t blk_act, blk_ev; /* that prefetch cannot go before event blk_ev */
    int64_t *inst;            /* the schedule's instant-transfer resident bytes per event */
    struct hoff__segtree sg;  /* inst plus the early prefetches */
};

/* Link each prefetch to the eviction before it.  0 or -ENOMEM (hoff__place_close frees what was made). */
int hoff__place_open(struct hoff__placing *pl, const struct hoff__pm *p, int place);
/* A new step places afresh.  0 or -ENOMEM. */
int hoff__place_reset(struct hoff__placing *pl, const struct hoff__pm *p);
/* Action k (an eviction) has fired: its prefetch may now go early. */
void hoff__place_evicted(struct hoff__placing *pl, const struct hoff__schedule *s, size_t k);
/* At event i: issue the early prefetches that can go now; each gets the next issue number in seq. */
int hoff__place_early(struct hoff__placing *pl, struct hoff__pm *p, uint32_t i, uint64_t *seq, uint64_t *nseq);
/* Rewrite s with the prefetches where they were placed.  0 or -ENOMEM. */
int hoff__place_finish(const struct hoff__placing *pl, struct hoff__schedule *s, const uint64_t *seq);
void hoff__place_close(struct hoff__placing *pl);

#endif
