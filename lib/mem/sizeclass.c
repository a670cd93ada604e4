/* sizeclass.c — the size classes of the caching pools, computed with bit arithmetic (no tables, no loops).
 * Threading: pure functions, no state. */
#include "config.h"

#include <stdint.h>

#include "backend/backend.h"
#include "mem/sizeclass.h"

/*
 * The classes, in order:
 *   0 .. 15    512, 1024, ..., 8 KiB                    (multiples of 512 B)
 *   16 .. 79   2^k + j * 2^(k-3), k = 13..20, j = 1..8   (9 KiB .. 2 MiB)
 *   80 .. 86   4, 6, 8, 10, 12, 14, 16 MiB               (multiples of 2 MiB)
 *   87 .. 270  2^k + j * 2^(k-3), k = 24..46, j = 1..8   (18 MiB .. 2^47)
 * From 16 MiB on the step 2^(k-3) is itself a multiple of 2 MiB, so the
 * geometric classes are grain multiples as they are.  Between 2 and 16 MiB the
 * geometric classes rounded up to 2 MiB collapse to every other grain, which
 * is what the third band is: there the rounding is below 2 MiB but above 12.5%.
 * Every class is a multiple of 512 B (HOFF__DEVICE_GRAIN).
 */
#define SMALL_STEP_SHIFT 9          /* 512 B */
#define SMALL_MAX ((size_t)8 << 10) /* 8 KiB: last small class */
#define SMALL_COUNT 16
#define GRAIN_SHIFT 21              /* HOFF__MANAGED_GRAIN */
#define GRAIN_LO ((size_t)2 << 20)  /* 2 MiB: last plain geometric class */
#define GRAIN_HI ((size_t)16 << 20) /* 16 MiB: last class of the grain band */
#define GEO_LO_END 80               /* first class of the grain band */
#define GRAIN_END 87                /* first class after the grain band */
#define GRAIN_SKIP 17               /* geometric classes merged in the band */
#define CLASS_COUNT 271

_Static_assert(CLASS_COUNT <= HOFF__SIZECLASS_COUNT, "HOFF__SIZECLASS_COUNT too small");
_Static_assert(((size_t)1 << GRAIN_SHIFT) == HOFF__MANAGED_GRAIN, "grain shift");
_Static_assert(SMALL_MAX >> SMALL_STEP_SHIFT == SMALL_COUNT, "small classes");
_Static_assert(sizeof(size_t) == 8, "64-bit size_t expected");

/* Index of the geometric class holding size (> 8 KiB), counting every
 * geometric class (as if the grain band did not merge any). */
static inline int geo_index(size_t size) {
    uint64_t s = (uint64_t)size - 1;
    int k = 63 - __builtin_clzll(s); /* 2^k <= s < 2^(k+1), k >= 13 */
    return SMALL_COUNT + ((k - 13) << 3) + (int)((s >> (k - 3)) & 7);
}

int hoff__sizeclass(size_t size) {
    if (size - 1 >= HOFF__SIZECLASS_MAX_BYTES) /* size 0 wraps too */
        return -1;
    if (size <= SMALL_MAX)
        return (int)((size - 1) >> SMALL_STEP_SHIFT);
    if (size <= GRAIN_LO)
        return geo_index(size);
    if (size <= GRAIN_HI) /* 80 + ceil(size / 2 MiB) - 2 */
        return GEO_LO_END - 2 + (int)((size + HOFF__MANAGED_GRAIN - 1) >> GRAIN_SHIFT);
    return geo_index(size) - GRAIN_SKIP;
}

static inline size_t geo_bytes(int r) {
    int k = 13 + (r >> 3), j = (r & 7) + 1;
    return ((size_t)1 << k) + ((size_t)j << (k - 3));
}

size_t hoff__sizeclass_bytes(int cls) {
    if (cls < 0 || cls >= CLASS_COUNT)
        return 0;
    if (cls < SMALL_COUNT)
        return (size_t)(cls + 1) << SMALL_STEP_SHIFT;
    if (cls < GEO_LO_END)
        return geo_bytes(cls - SMALL_COUNT);
    if (cls < GRAIN_END)
        return (size_t)(cls - (GEO_LO_END - 2)) << GRAIN_SHIFT;
    return geo_bytes(cls + GRAIN_SKIP - SMALL_COUNT);
}
