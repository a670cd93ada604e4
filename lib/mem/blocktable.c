/* blocktable.c — pointer -> block lookup: open addressing with linear probing, tombstones and a power-of-two capacity.
 * Threading: not synchronised; the caller holds the context lock. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "mem/blocktable.h"

/* A slot is empty (key NULL, val NULL), a tombstone (key NULL, val TOMB) or
 * live (key != NULL; val may be anything, NULL included). */
struct hoff__bt_slot {
    const void *key;
    void *val;
};

static char tomb_mark;
#define TOMB ((void *)&tomb_mark)

#define MIN_CAPACITY ((size_t)16)
/* Rehash when live + tombstones would exceed 70% of the slots. */
#define LOAD_NUM 7
#define LOAD_DEN 10
#define MAX_CAPACITY (SIZE_MAX / sizeof(struct hoff__bt_slot) / 4)

static inline int slot_empty(const struct hoff__bt_slot *s) {
    return !s->key && s->val != TOMB;
}

/* Block bases are at least 512-aligned: rotate the always-zero bits to the
 * top, then Fibonacci hashing (the high bits of a multiply by an odd
 * constant depend on every input bit). */
static inline size_t bt_hash(const void *key, size_t capacity) {
    uint64_t x = (uint64_t)(uintptr_t)key;
    int bits = __builtin_ctzll((unsigned long long)capacity);

    x = (x >> 9) | (x << 55);
    x *= 0x9E3779B97F4A7C15ull;
    return bits ? (size_t)(x >> (64 - bits)) : 0;
}

static int over_load(size_t used, size_t capacity) {
    return used * LOAD_DEN > capacity * LOAD_NUM;
}

static size_t round_capacity(size_t want) {
    size_t c = MIN_CAPACITY;
    while (c < want && c <= MAX_CAPACITY / 2)
        c <<= 1;
    return c;
}

int hoff__bt_init(struct hoff__blocktable *t, size_t initial_capacity) {
    size_t cap;

    if (!t)
        return -EINVAL;
    t->slots = NULL;
    t->capacity = t->count = t->tombstones = 0;
    if (initial_capacity > MAX_CAPACITY)
        return -ENOMEM;
    cap = round_capacity(initial_capacity);
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots)
        return -ENOMEM;
    t->capacity = cap;
    return 0;
}

void hoff__bt_destroy(struct hoff__blocktable *t) {
    if (!t)
        return;
    free(t->slots);
    t->slots = NULL;
    t->capacity = t->count = t->tombstones = 0;
}

/* Move every live entry into a table of new_cap slots (drops tombstones).
 * On failure the table is unchanged. */
static int bt_rehash(struct hoff__blocktable *t, size_t new_cap) {
    struct hoff__bt_slot *ns;
    size_t i, mask = new_cap - 1;

    if (new_cap > MAX_CAPACITY)
        return -ENOMEM;
    ns = calloc(new_cap, sizeof *ns);
    if (!ns)
        return -ENOMEM;
    for (i = 0; i < t->capacity; i++) {
        const struct hoff__bt_slot *s = &t->slots[i];
        size_t j;

        if (!s->key)
            continue;
        for (j = bt_hash(s->key, new_cap); ns[j].key; j = (j + 1) & mask)
            ;
        ns[j] = *s;
    }
    free(t->slots);
    t->slots = ns;
    t->capacity = new_cap;
    t->tombstones = 0;
    return 0;
}

int hoff__bt_insert(struct hoff__blocktable *t, const void *key, void *val) {
    size_t mask, i, first_tomb = SIZE_MAX;

    if (!t || !key)
        return -EINVAL;
    if (!t->slots) { /* destroyed, or init failed: start again */
        int rc = hoff__bt_init(t, 0);
        if (rc)
            return rc;
    }
    mask = t->capacity - 1;
    for (i = bt_hash(key, t->capacity);; i = (i + 1) & mask) {
        struct hoff__bt_slot *s = &t->slots[i];

        if (s->key == key)
            return -EEXIST;
        if (!s->key) {
            if (s->val != TOMB)
                break; /* empty: key is absent */
            if (first_tomb == SIZE_MAX)
                first_tomb = i;
        }
    }
    if (first_tomb != SIZE_MAX) { /* reuse a tombstone: the load is unchanged */
        t->slots[first_tomb].key = key;
        t->slots[first_tomb].val = val;
        t->tombstones--;
        t->count++;
        return 0;
    }
    if (over_load(t->count + t->tombstones + 1, t->capacity)) {
        /* Grow when live entries alone pass half the limit (35%); otherwise
         * the tombstones are the load and a same-size rehash clears them.
         * Either way at least 35% of the slots are free afterwards. */
        size_t cap = t->capacity;
        int rc;

        while (over_load(2 * (t->count + 1), cap))
            cap <<= 1;
        rc = bt_rehash(t, cap);
        if (rc)
            return rc;
        mask = t->capacity - 1;
        for (i = bt_hash(key, t->capacity); t->slots[i].key; i = (i + 1) & mask)
            ;
    }
    t->slots[i].key = key;
    t->slots[i].val = val;
    t->count++;
    return 0;
}

static struct hoff__bt_slot *bt_find(const struct hoff__blocktable *t, const void *key) {
    size_t mask, i;

    if (!t || !key || !t->slots)
        return NULL;
    mask = t->capacity - 1;
    for (i = bt_hash(key, t->capacity);; i = (i + 1) & mask) {
        struct hoff__bt_slot *s = &t->slots[i];

        if (s->key == key)
            return s;
        if (slot_empty(s))
            return NULL;
    }
}

void *hoff__bt_lookup(const struct hoff__blocktable *t, const void *key) {
    const struct hoff__bt_slot *s = bt_find(t, key);
    return s ? s->val : NULL;
}

void *hoff__bt_remove(struct hoff__blocktable *t, const void *key) {
    struct hoff__bt_slot *s = bt_find(t, key);
    size_t mask, i;
    void *val;

    if (!s)
        return NULL;
    val = s->val;
    t->count--;
    mask = t->capacity - 1;
    i = (size_t)(s - t->slots);
    if (!slot_empty(&t->slots[(i + 1) & mask])) {
        s->key = NULL;
        s->val = TOMB;
        t->tombstones++;
        return val;
    }
    /* The next slot is empty, so no probe sequence runs through this one:
     * empty it, and the tombstones right before it too. */
    s->key = NULL;
    s->val = NULL;
    for (i = (i - 1) & mask; !t->slots[i].key && t->slots[i].val == TOMB; i = (i - 1) & mask) {
        t->slots[i].val = NULL;
        t->tombstones--;
    }
    return val;
}

void hoff__bt_foreach(const struct hoff__blocktable *t, void (*fn)(const void *key, void *val, void *arg), void *arg) {
    size_t i;

    if (!t || !fn || !t->slots)
        return;
    for (i = 0; i < t->capacity; i++)
        if (t->slots[i].key)
            fn(t->slots[i].key, t->slots[i].val, arg);
}
