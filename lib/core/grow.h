/* grow.h — the one growable-array rule of the tree: an array of elements with a count and a capacity grows by
 * doubling (from a first capacity of 16) when it is full, and a failed growth leaves the array as it was.
 * Threading: pure; the caller guards the array as it guards its count. */
#ifndef HOFF_GROW_H
#define HOFF_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Make room for `need` elements of elem bytes in *arr, whose capacity is *cap: 0 when there is room already or it
 * was made (*arr and *cap updated), -ENOMEM when the memory or the size's arithmetic runs out (*arr and *cap
 * unchanged, so the caller still owns and frees the old array). */
static inline int hoff__grow(void **arr, size_t *cap, size_t need, size_t elem) {
    size_t ncap = *cap ? *cap : 16;
    void *n;

    if (need <= *cap)
        return 0;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return -ENOMEM;
        ncap *= 2;
    }
    if (elem && ncap > SIZE_MAX / elem)
        return -ENOMEM;
    if (!(n = realloc(*arr, ncap * elem)))
        return -ENOMEM;
    *arr = n;
    *cap = ncap;
    return 0;
}

/* hoff__grow on a typed array: HOFF__GROW(a, cap, n + 1) makes room for one more element. */
#define HOFF__GROW(arr, cap, need) hoff__grow((void **)&(arr), &(cap), (need), sizeof *(arr))

#endif
