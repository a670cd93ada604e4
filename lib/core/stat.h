/* stat.h — the one way a layer keeps its counters (mimalloc's mi_stat_* is the model): a layer's counters are a
 * struct of uint64_t fields generated from its X-list of hoff_stats field names, written only through these
 * macros, and folded into struct hoff_stats when the counters are read (core/ctx_stats.c).
 *   HOFF__STAT_ADD(st, f, n)      a counter grows by n (a count, bytes, nanoseconds);
 *   HOFF__STAT_SUB(st, f, n)      a counter given back (an undone count);
 *   HOFF__STAT_SET(st, f, v)      a figure set to what it is now (a state, the last plan's size);
 *   HOFF__STAT_PEAK(st, pk, v)    a peak raised to v when v is higher (a second peak of a gauge: a step's);
 *   HOFF__GAUGE_SET(st, f, v, pk) a gauge set to v, with the peak field pk following it.
 * Threading: none of its own; the layer's lock guards its counters. */
#ifndef HOFF_STAT_H
#define HOFF_STAT_H

#include <stdint.h>

/* One uint64_t field of a layer's counter struct, for its X-list. */
#define HOFF__STAT_FIELD(name) uint64_t name;

#define HOFF__STAT_ADD(st, f, n) ((void)((st)->f += (uint64_t)(n)))
#define HOFF__STAT_SUB(st, f, n) ((void)((st)->f -= (uint64_t)(n)))
#define HOFF__STAT_SET(st, f, v) ((void)((st)->f = (uint64_t)(v)))

/* A peak: raised to v when v is higher (kept since the start or the last reset). */
static inline void hoff__stat_peak(uint64_t *peak, uint64_t v) {
    if (v > *peak)
        *peak = v;
}
#define HOFF__STAT_PEAK(st, pk, v) hoff__stat_peak(&(st)->pk, (uint64_t)(v))

/* A gauge: its value now, and its peak field following it. */
#define HOFF__GAUGE_SET(st, f, v, pk)     \
    do {                                  \
        HOFF__STAT_SET(st, f, v);         \
        HOFF__STAT_PEAK(st, pk, (st)->f); \
    } while (0)

#endif
