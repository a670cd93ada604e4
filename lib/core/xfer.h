/* xfer.h — the transfer clock, written once for the sim backend (lib/backend/sim.c), the replay prediction
 * (lib/plan/predict.c), the tier planner (lib/plan/tiers.c) and hoff-plan's timelines, which must agree copy by
 * copy (tests/test_agree.c holds them to it): how long a copy takes, and when a call on a FIFO engine starts and
 * lands.  Threading: pure functions of their arguments. */
#ifndef HOFF_XFER_H
#define HOFF_XFER_H

#include <stdint.h>

static inline uint64_t hoff__sat_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ceil(bytes / gbps) ns (GB/s = bytes per ns), without libm; a quotient
 * within 1e-12 of an integer is taken as that integer, so that exact rates
 * give exact times; 0 for 0 bytes; a quotient past 2^64 saturates at
 * UINT64_MAX / 4 (room for sums).  gbps must be > 0. */
static inline uint64_t hoff__copy_ns(uint64_t bytes, double gbps) {
    double q;
    uint64_t t;

    if (bytes == 0)
        return 0;
    q = (double)bytes / gbps;
    if (!(q < 1.8e19))
        return UINT64_MAX / 4;
    t = (uint64_t)q;
    if ((double)t < q && q - (double)t > q * 1e-12)
        t++;
    return t;
}

/* One call on a FIFO engine (a copy engine, the NVMe device), made at `now`:
 *  - issuer (NULL for calls the issuing thread does not make, such as the
 *    NVMe tier's): the issuing thread is serial and pays call_ns of its own
 *    for each call, so the call is issued at max(now, *issuer) + call_ns,
 *    which becomes *issuer;
 *  - it starts once issued, once the engine is free (*busy) and after
 *    `after` (0: nothing to wait for);
 *  - it lands lat_ns + dur_ns after its start, which becomes *busy.
 * Returns the landing; *start (if not NULL) gets the start. */
static inline uint64_t hoff__xfer_call(uint64_t now, uint64_t *issuer, uint64_t call_ns, uint64_t *busy, uint64_t after,
                                       uint64_t lat_ns, uint64_t dur_ns, uint64_t *start) {
    uint64_t s = now, end;

    if (issuer) {
        if (*issuer > s)
            s = *issuer;
        s = hoff__sat_add(s, call_ns);
        *issuer = s;
    }
    if (*busy > s)
        s = *busy;
    if (after > s)
        s = after;
    end = hoff__sat_add(s, hoff__sat_add(lat_ns, dur_ns));
    *busy = end;
    if (start)
        *start = s;
    return end;
}

/* One transfer, fault or wait as an observer sees it: the sim backend
 * (hoff__sim_observe) and the replay prediction (hoff__plan_opts.observe)
 * report the same kinds on their own clocks. */
enum hoff__xfer_kind {
    HOFF__XF_EVICT = 1, /* device -> host copy (a planned eviction or a victim) */
    HOFF__XF_PREFETCH,  /* host -> device copy */
    HOFF__XF_DISCARD,   /* a release: the device copy dropped, latency only on the D2H engine */
    HOFF__XF_FAULT,     /* a page-in on demand: compute stalls from start to end */
    HOFF__XF_SPILL,     /* host -> NVMe write */
    HOFF__XF_RESTORE,   /* NVMe -> host read */
    HOFF__XF_WAIT,      /* compute waits from start to end (an event sync or a stream wait) */
};

struct hoff__xfer_obs {
    int kind;            /* enum hoff__xfer_kind */
    const void *p;       /* the range moved (sim; NULL for the NVMe tier's and for waits) */
    uint32_t block;      /* the trace's block (prediction; UINT32_MAX where none) */
    uint32_t group;      /* the prediction: the schedule's group moved with one call (0: one block) */
    uint64_t bytes;      /* the bytes the call moves (a discard: its range; a prefetch of released pages: 0) */
    uint64_t issued;     /* when compute made the call (the issuing thread's turn for copies) */
    uint64_t start, end; /* on the engine: latency and copy inside; a fault or a wait: the stall */
};

typedef void (*hoff__xfer_observer)(void *arg, const struct hoff__xfer_obs *x);

#endif
