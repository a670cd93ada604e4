/* blocktable.h — pointer -> block lookup in O(1): an open-addressing hash on the block's base address.
 * Threading: not synchronised; the caller holds the context lock. */
#ifndef HOFF_BLOCKTABLE_H
#define HOFF_BLOCKTABLE_H

#include <stddef.h>
#include <stdint.h>

struct hoff__blocktable {
    struct hoff__bt_slot *slots; /* capacity entries; capacity a power of two */
    size_t capacity;
    size_t count; /* live entries */
    size_t tombstones;
};

int hoff__bt_init(struct hoff__blocktable *t, size_t initial_capacity);
void hoff__bt_destroy(struct hoff__blocktable *t);
/* Insert key -> val.  -EEXIST if key is present, -ENOMEM. */
int hoff__bt_insert(struct hoff__blocktable *t, const void *key, void *val);
/* The value for key, or NULL. */
void *hoff__bt_lookup(const struct hoff__blocktable *t, const void *key);
/* Remove key and return its value, or NULL if absent. */
void *hoff__bt_remove(struct hoff__blocktable *t, const void *key);
/* Call fn(key, val, arg) for each entry (no insert/remove meanwhile). */
void hoff__bt_foreach(const struct hoff__blocktable *t, void (*fn)(const void *key, void *val, void *arg), void *arg);

#endif
