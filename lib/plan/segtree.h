/* segtree.h — a segment tree over events with range add and range max (lazy adds, no push-down): the
 * planners' per-event resident bytes.  Threading: a tree belongs to one planner call. */
#ifndef HOFF_SEGTREE_H
#define HOFF_SEGTREE_H

#include <stdint.h>

struct hoff__segtree {
    int64_t *mx, *ad;
    uint32_t size; /* leaves: a power of two >= n */
};

/* Build over v[0..n-1].  0 or -ENOMEM. */
int hoff__segtree_init(struct hoff__segtree *sg, const int64_t *v, uint32_t n);
void hoff__segtree_destroy(struct hoff__segtree *sg);
/* Add d to every leaf in [l, r] (l <= r < n). */
void hoff__segtree_add(struct hoff__segtree *sg, uint32_t l, uint32_t r, int64_t d);
/* Maximum over [l, r]. */
int64_t hoff__segtree_max(const struct hoff__segtree *sg, uint32_t l, uint32_t r);
/* The last leaf in [l, r] whose value is above thr, into *pos: 1, or 0
 * when none is.  O(log n). */
int hoff__segtree_last_above(const struct hoff__segtree *sg, uint32_t l, uint32_t r, int64_t thr, uint32_t *pos);
/* Maximum over every leaf, and the first leaf holding it. */
int64_t hoff__segtree_top(const struct hoff__segtree *sg);
uint32_t hoff__segtree_argmax(const struct hoff__segtree *sg);

#endif
