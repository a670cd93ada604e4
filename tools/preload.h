/* preload.h — what hoff's two LD_PRELOAD shims (hoff-record-preload.c, hoff-sim-preload.c) share: the alignments
 * the C library's aligned entry points accept, so that a shim refuses what glibc refuses.
 * Threading: pure functions. */
#ifndef HOFF_PRELOAD_H
#define HOFF_PRELOAD_H

#include <stddef.h>

/* aligned_alloc and memalign: a power of two. */
static inline int hoff_preload_align_ok(size_t align) {
    return align && !(align & (align - 1));
}

/* posix_memalign: a power of two and a multiple of sizeof(void *) (else EINVAL). */
static inline int hoff_preload_memalign_ok(size_t align) {
    return hoff_preload_align_ok(align) && align % sizeof(void *) == 0;
}

#endif
