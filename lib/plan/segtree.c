/* segtree.c — range add / range max over events for the planners, O(log n) per operation.
 * Threading: a tree belongs to one planner call. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "plan/segtree.h"

/* A perfect binary tree over `size` (a power of two) leaves.  mx[v] is the
 * maximum over v's leaves counting the adds of v and below, ad[v] the add
 * pending on all of v's leaves; the adds of v's ancestors are not in mx[v]
 * (no push-down needed). */

#define SEG_NONE (INT64_MIN / 4) /* padding leaves: never a maximum */

int hoff__segtree_init(struct hoff__segtree *sg, const int64_t *v, uint32_t n) {
    uint32_t size = 1, i;

    while (size < n)
        size *= 2;
    sg->size = size;
    sg->mx = malloc(2 * (size_t)size * sizeof *sg->mx);
    sg->ad = calloc(2 * (size_t)size, sizeof *sg->ad);
    if (!sg->mx || !sg->ad) {
        free(sg->mx);
        free(sg->ad);
        sg->mx = sg->ad = NULL;
        return -ENOMEM;
    }
    for (i = 0; i < size; i++)
        sg->mx[size + i] = i < n ? v[i] : SEG_NONE;
    for (i = size - 1; i >= 1; i--)
        sg->mx[i] = sg->mx[2 * i] > sg->mx[2 * i + 1] ? sg->mx[2 * i] : sg->mx[2 * i + 1];
    return 0;
}

void hoff__segtree_destroy(struct hoff__segtree *sg) {
    free(sg->mx);
    free(sg->ad);
}

/* mx[v] again from its children (v internal). */
static inline void pull(struct hoff__segtree *sg, uint32_t v) {
    int64_t a = sg->mx[2 * v], b = sg->mx[2 * v + 1];

    sg->mx[v] = (a > b ? a : b) + sg->ad[v];
}

static int64_t max(const struct hoff__segtree *sg, uint32_t v, uint32_t lo, uint32_t hi, uint32_t l, uint32_t r) {
    uint32_t mid;
    int64_t m = SEG_NONE, x;

    if (l <= lo && hi <= r)
        return sg->mx[v];
    mid = lo + (hi - lo) / 2;
    if (l <= mid)
        m = max(sg, 2 * v, lo, mid, l, r);
    if (r > mid) {
        x = max(sg, 2 * v + 1, mid + 1, hi, l, r);
        m = x > m ? x : m;
    }
    return m + sg->ad[v];
}

/* acc: the adds of v's ancestors. */
static int last_above(const struct hoff__segtree *sg, uint32_t v, uint32_t lo, uint32_t hi, uint32_t l, uint32_t r,
                      int64_t thr, int64_t acc, uint32_t *pos) {
    uint32_t mid;

    if (hi < l || lo > r || sg->mx[v] + acc <= thr)
        return 0;
    if (lo == hi) {
        *pos = lo;
        return 1;
    }
    mid = lo + (hi - lo) / 2;
    acc += sg->ad[v];
    return last_above(sg, 2 * v + 1, mid + 1, hi, l, r, thr, acc, pos) ||
           last_above(sg, 2 * v, lo, mid, l, r, thr, acc, pos);
}

int hoff__segtree_last_above(const struct hoff__segtree *sg, uint32_t l, uint32_t r, int64_t thr, uint32_t *pos) {
    return last_above(sg, 1, 0, sg->size - 1, l, r, thr, 0, pos);
}

/* The first leaf holding the overall maximum. */
uint32_t hoff__segtree_argmax(const struct hoff__segtree *sg) {
    uint32_t v = 1;

    while (v < sg->size)
        v = sg->mx[2 * v] >= sg->mx[2 * v + 1] ? 2 * v : 2 * v + 1;
    return v - sg->size;
}

/* Bottom up, without recursion (the planners' hottest loop at 10^6
 * events): the nodes that tile [l, r] take the add, then the ancestors of
 * its two ends are pulled again. */
void hoff__segtree_add(struct hoff__segtree *sg, uint32_t l, uint32_t r, int64_t d) {
    uint32_t lo = l + sg->size, hi = r + sg->size + 1, l0 = lo, r0 = hi - 1;

    for (; lo < hi; lo >>= 1, hi >>= 1) {
        if (lo & 1) {
            sg->mx[lo] += d;
            sg->ad[lo++] += d;
        }
        if (hi & 1) {
            sg->mx[--hi] += d;
            sg->ad[hi] += d;
        }
    }
    for (l0 >>= 1; l0; l0 >>= 1)
        pull(sg, l0);
    for (r0 >>= 1; r0; r0 >>= 1)
        pull(sg, r0);
}

int64_t hoff__segtree_max(const struct hoff__segtree *sg, uint32_t l, uint32_t r) {
    return max(sg, 1, 0, sg->size - 1, l, r);
}

int64_t hoff__segtree_top(const struct hoff__segtree *sg) {
    return sg->mx[1];
}
