/* sizeclass.h — the size classes of the caching pools.
 * Threading: pure functions, no state. */
#ifndef HOFF_SIZECLASS_H
#define HOFF_SIZECLASS_H

#include <stddef.h>

/* Classes: multiples of 512 B up to 8 KiB, then 8 classes per power of two
 * (at most 12.5% rounding) up to 2 MiB; from 2 MiB up every class is a
 * multiple of HOFF__MANAGED_GRAIN (2 MiB), so between 2 and 16 MiB the
 * classes are 4, 6, ... 16 MiB (less than 2 MiB of rounding, up to ~100% for
 * 2 MiB + 1), then again 8 per power of two, up to 2^47 bytes: 271 classes. */
#define HOFF__SIZECLASS_MAX_BYTES ((size_t)1 << 47)
#define HOFF__SIZECLASS_COUNT 271

/* Class for a request of size bytes (size > 0, <= HOFF__SIZECLASS_MAX_BYTES);
 * -1 when out of range. */
int hoff__sizeclass(size_t size);
/* Bytes a block of class cls holds (>= every request mapped to it). */
size_t hoff__sizeclass_bytes(int cls);

#endif
