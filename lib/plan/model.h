/* model.h — the prediction's model of a replayed step (model.c): its state (per-block states, the copy engines'
 * FIFOs, the budget's and the host tier's books) and what one planned action or trace event does to it; shared by
 * the event loop (predict.c) and the early placement of prefetches (place.c).
 * Threading: a model belongs to one call of hoff__plan_predict; no shared state. */
#ifndef HOFF_PLAN_MODEL_H
#define HOFF_PLAN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"

/* No block (a list's end, a copy whose block is gone). */
#define HOFF__PM_NIL UINT32_MAX

enum {
    P_NONE = 0,
    P_DEV,
    P_EVI,
    P_HOST,
    P_PRE,
    P_DEAD,
    P_FREED_PRE /* freed with its prefetch in flight */,
    P_SPI,
    P_NVM,
    P_RES /* spilling, on the NVMe tier, restoring */
};
enum { Q_EVICT = 0, Q_RELEASE, Q_VICTIM, Q_SPILL, Q_RESTORE };

struct hoff__pm_q {
    uint64_t land, bytes;
    uint64_t seq; /* issue order (one call: one number) */
    uint32_t block;
    uint8_t kind;
};

/* A list of blocks threaded through per-block links. */
struct hoff__pm_list {
    uint32_t *prev, *next, head, tail;
};

struct hoff__pm {
    const struct hoff__trace *t;
    const struct hoff__schedule *s;
    uint64_t *bytes;      /* per block */
    uint8_t *st;          /* per block: P_* */
    uint64_t *pland;      /* per block: landing of its prefetch in flight */
    uint64_t *dland;      /* per block: landing of its last D2H call (eviction, release) */
    uint64_t *busy;       /* per block: freed with a copy in flight, until it lands (its slot too) */
    uint64_t *carry;      /* the same from the step before, on this step's clock */
    struct hoff__pm_q *q; /* the D2H FIFO */
    size_t qh, qt, qcap;
    struct hoff__pm_q *hq; /* the H2D FIFO */
    size_t hh, ht, hcap;
    struct hoff__pm_list lru; /* resident movable blocks, least recently used first */
    struct hoff__pm_list hl;  /* blocks on the host, in the order they got there (spill victims first) */
    struct hoff__pm_q *nq;    /* the NVMe FIFO (spills and restores) */
    size_t nh, nt, ncap;
    uint64_t *nland; /* per block: landing of its NVMe operation in flight */
    uint8_t *sa;     /* per block: a planned spill waits for its eviction to land */
    uint8_t *hold;   /* per block: coming back, never spilled for host room (residency.c) */
    int err;         /* -ENOMEM met where it could not be returned (a spill at a landing) */
    uint8_t *gst;    /* per group, evict and prefetch: 0 not yet, 1 one call, 2 block by block */
    uint64_t now, issuer, d2h_busy, h2d_busy, nvme_busy;
    uint64_t resident, evicting, budget;
    uint64_t host, to_host, spilling, from_host, cap; /* the host tier, as residency.c counts it */
    uint64_t seq; /* issue order of the copies in flight (residency.c's in-flight list) */
    uint32_t ev;  /* the event being replayed (use windows open at it are no victims) */
    int nvme;
    int pass; /* 0: the step before, 1: the predicted step */
    hoff__xfer_observer obs;
    void *obs_arg;
    uint64_t lat, call, fault_ns;
    double h2d, d2h, fault_gbps, nvme_r, nvme_w;
    struct hoff__prediction *out;
};

/* Land what has landed by p->now. */
void hoff__pm_poll(struct hoff__pm *p);
/* One planned action, as replay.c fires it.  0 or -ENOMEM. */
int hoff__pm_fire(struct hoff__pm *p, const struct hoff__action *a);
/* Prefetch block x now (replay.c's, a group member one by one).  0 or -ENOMEM. */
int hoff__pm_prefetch(struct hoff__pm *p, uint32_t x);
/* The trace event e (an allocation, a free or an access of a managed block).  0 or -ENOMEM. */
int hoff__pm_event(struct hoff__pm *p, const struct hoff__tev *e);
/* Empty list l over nb blocks. */
void hoff__pm_list_reset(struct hoff__pm_list *l, uint32_t nb);

#endif
