/* test_blocktable.c — the pointer -> block hash: basic operations, growth, tombstone churn, foreach,
 * and random operations checked against a reference array.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/blocktable.h"
#include "testutil.h"

#define KEY(x) ((const void *)(uintptr_t)(x))
#define VAL(x) ((void *)(uintptr_t)(x))

/* The table's own invariants: power-of-two capacity, load <= 70%. */
static int table_ok(const struct hoff__blocktable *t) {
    return t->capacity >= 1 && (t->capacity & (t->capacity - 1)) == 0 &&
           (t->count + t->tombstones) * 10 <= t->capacity * 7;
}

static void test_basic(void) {
    struct hoff__blocktable t;
    int x;

    CU_ASSERT_EQUAL_FATAL(hoff__bt_init(&t, 0), 0);
    CU_ASSERT(table_ok(&t));
    CU_ASSERT_EQUAL(t.count, 0);
    CU_ASSERT_PTR_NULL(hoff__bt_lookup(&t, &x));
    CU_ASSERT_PTR_NULL(hoff__bt_remove(&t, &x));

    CU_ASSERT_EQUAL(hoff__bt_insert(&t, &x, VAL(1)), 0);
    CU_ASSERT_EQUAL(hoff__bt_insert(&t, KEY(0x200000), VAL(2)), 0);
    CU_ASSERT_EQUAL(hoff__bt_insert(&t, KEY(0x400000), NULL), 0); /* NULL value is allowed */
    CU_ASSERT_EQUAL(t.count, 3);
    CU_ASSERT_PTR_EQUAL(hoff__bt_lookup(&t, &x), VAL(1));
    CU_ASSERT_PTR_EQUAL(hoff__bt_lookup(&t, KEY(0x200000)), VAL(2));
    CU_ASSERT_PTR_NULL(hoff__bt_lookup(&t, KEY(0x200001)));
    CU_ASSERT_PTR_NULL(hoff__bt_lookup(&t, KEY(0x400000)));

    /* duplicates are refused and keep the first value */
    CU_ASSERT_EQUAL(hoff__bt_insert(&t, &x, VAL(9)), -EEXIST);
    CU_ASSERT_EQUAL(hoff__bt_insert(&t, KEY(0x400000), VAL(9)), -EEXIST);
    CU_ASSERT_PTR_EQUAL(hoff__bt_lookup(&t, &x), VAL(1));
    CU_ASSERT_EQUAL(t.count, 3);

    /* NULL key */
    CU_ASSERT_EQUAL(hoff__bt_insert(&t, NULL, VAL(1)), -EINVAL);
    CU_ASSERT_PTR_NULL(hoff__bt_lookup(&t, NULL));
    CU_ASSERT_PTR_NULL(hoff__bt_remove(&t, NULL));

    CU_ASSERT_PTR_EQUAL(hoff__bt_remove(&t, &x), VAL(1));
    CU_ASSERT_PTR_NULL(hoff__bt_remove(&t, &x));
    CU_ASSERT_PTR_NULL(hoff__bt_lookup(&t, &x));
    CU_ASSERT_EQUAL(t.count, 2);
    CU_ASSERT_EQUAL(hoff__bt_insert(&t, &x, VAL(3)), 0); /* again after removal */
    CU_ASSERT_PTR_EQUAL(hoff__bt_lookup(&t, &x), VAL(3));
    CU_ASSERT(table_ok(&t));
    hoff__bt_destroy(&t);
    CU_ASSERT_PTR_NULL(t.slots);
    CU_ASSERT_EQUAL(t.count, 0);
    hoff__bt_destroy(&t); /* twice is harmless */

    /* capacities round up to a power of two; an absurd one is -ENOMEM */
    CU_ASSERT_EQUAL_FATAL(hoff__bt_init(&t, 1000), 0);
    CU_ASSERT_EQUAL(t.capacity, 1024);
    hoff__bt_destroy(&t);
    CU_ASSERT_EQUAL(hoff__bt_init(&t, SIZE_MAX), -ENOMEM);
    CU_ASSERT_PTR_NULL(t.slots);
    hoff__bt_destroy(&t);
}

/* 1M entries with keys as the pools make them (512 B and 2 MiB multiples),
 * then as arbitrary addresses; all found, all removed. */
static void run_growth(uintptr_t base, uintptr_t stride, int shuffled) {
    enum { N = 1 << 20 };
    struct hoff__blocktable t;
    uint64_t rng = 42;
    size_t i, miss = 0;

    CU_ASSERT_EQUAL_FATAL(hoff__bt_init(&t, 16), 0);
    for (i = 0; i < N; i++) {
        uintptr_t k = shuffled ? (uintptr_t)(hoff_test_rand(&rng) | 1) : base + i * stride;
        if (hoff__bt_insert(&t, KEY(k), VAL(i + 1)) != 0)
            miss++;
    }
    CU_ASSERT_EQUAL(miss, 0);
    CU_ASSERT_EQUAL(t.count, N);
    CU_ASSERT(table_ok(&t));
    CU_ASSERT(t.capacity <= 4 * (size_t)N);
    rng = 42;
    for (i = 0; i < N; i++) {
        uintptr_t k = shuffled ? (uintptr_t)(hoff_test_rand(&rng) | 1) : base + i * stride;
        if (hoff__bt_lookup(&t, KEY(k)) != VAL(i + 1))
            miss++;
        if (!shuffled && hoff__bt_lookup(&t, KEY(k + stride / 2)) != NULL)
            miss++;
    }
    CU_ASSERT_EQUAL(miss, 0);
    rng = 42;
    for (i = 0; i < N; i++) {
        uintptr_t k = shuffled ? (uintptr_t)(hoff_test_rand(&rng) | 1) : base + i * stride;
        if (hoff__bt_remove(&t, KEY(k)) != VAL(i + 1))
            miss++;
    }
    CU_ASSERT_EQUAL(miss, 0);
    CU_ASSERT_EQUAL(t.count, 0);
    CU_ASSERT(table_ok(&t));
    hoff__bt_destroy(&t);
}

static void test_growth_512(void) {
    run_growth(0x7f0000000000u, 512, 0);
}
static void test_growth_2m(void) {
    run_growth(0x7f0000000000u, (uintptr_t)2 << 20, 0);
}
static void test_growth_random(void) {
    run_growth(0, 0, 1);
}

/* A steady set of 1000 live entries with 1M remove/insert cycles: the table
 * stays within its load, does not grow past what 1000 entries need, and
 * every live entry stays reachable. */
static void test_tombstone_churn(void) {
    enum { LIVE = 1000, CYCLES = 1000000 };
    struct hoff__blocktable t;
    uintptr_t keys[LIVE];
    uint64_t rng = 99;
    uintptr_t next = 1;
    size_t i, bad = 0, max_cap;

    CU_ASSERT_EQUAL_FATAL(hoff__bt_init(&t, 0), 0);
    for (i = 0; i < LIVE; i++) {
        keys[i] = (next++) << 9;
        CU_ASSERT_EQUAL(hoff__bt_insert(&t, KEY(keys[i]), VAL(keys[i])), 0);
    }
    max_cap = t.capacity;
    for (i = 0; i < CYCLES; i++) {
        size_t j = (size_t)(hoff_test_rand(&rng) % LIVE);
        if (hoff__bt_remove(&t, KEY(keys[j])) != VAL(keys[j]))
            bad++;
        /* new keys scattered over a wide range, as freed and reused blocks are */
        keys[j] = (uintptr_t)((hoff_test_rand(&rng) >> 20) | 1) << 9;
        if (hoff__bt_lookup(&t, KEY(keys[j])))
            keys[j] = (next++) << 9; /* rare collision with a live key */
        if (hoff__bt_insert(&t, KEY(keys[j]), VAL(keys[j])) != 0)
            bad++;
        if (t.capacity > max_cap)
            max_cap = t.capacity;
        if (!table_ok(&t) || t.count != LIVE)
            bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(max_cap <= 4096); /* 1000 live at <= 35% after a rehash */
    for (i = 0; i < LIVE; i++)
        if (hoff__bt_lookup(&t, KEY(keys[i])) != VAL(keys[i]))
            bad++;
    CU_ASSERT_EQUAL(bad, 0);
    printf("\n    capacity %zu, tombstones %zu after churn\n", t.capacity, t.tombstones);
    hoff__bt_destroy(&t);
}

struct visit {
    unsigned char *seen;
    size_t n, calls, bad;
};

static void visit_fn(const void *key, void *val, void *arg) {
    struct visit *v = arg;
    size_t i = (size_t)(uintptr_t)val;

    v->calls++;
    if (i >= v->n || (uintptr_t)key != (i + 1) * 4096)
        v->bad++;
    else
        v->seen[i]++;
}

static void test_foreach(void) {
    enum { N = 50000 };
    struct hoff__blocktable t;
    struct visit v = {0};
    size_t i, once = 0, never = 0;

    CU_ASSERT_EQUAL_FATAL(hoff__bt_init(&t, 0), 0);
    v.seen = calloc(N, 1);
    v.n = N;
    CU_ASSERT_PTR_NOT_NULL_FATAL(v.seen);
    hoff__bt_foreach(&t, visit_fn, &v);
    CU_ASSERT_EQUAL(v.calls, 0);
    for (i = 0; i < N; i++)
        CU_ASSERT_EQUAL(hoff__bt_insert(&t, KEY((i + 1) * 4096), VAL(i)), 0);
    for (i = 0; i < N; i += 3) /* leave tombstones behind */
        hoff__bt_remove(&t, KEY((i + 1) * 4096));
    hoff__bt_foreach(&t, visit_fn, &v);
    for (i = 0; i < N; i++) {
        if (i % 3 == 0)
            never += v.seen[i] == 0;
        else
            once += v.seen[i] == 1;
    }
    CU_ASSERT_EQUAL(v.bad, 0);
    CU_ASSERT_EQUAL(v.calls, t.count);
    CU_ASSERT_EQUAL(never, (N + 2) / 3);
    CU_ASSERT_EQUAL(once, N - (N + 2) / 3);
    free(v.seen);
    hoff__bt_destroy(&t);
}

/* Random inserts, removes and lookups over a small key universe, checked
 * against an array indexed by key id. */
static void test_random_vs_reference(void) {
    enum { KEYS = 4096, OPS = 2000000 };
    struct hoff__blocktable t;
    static uintptr_t key_of[KEYS];
    static void *ref[KEYS];
    static unsigned char present[KEYS];
    uint64_t rng = 2024;
    size_t i, live = 0, bad = 0;

    for (i = 0; i < KEYS; i++) /* three shapes: small blocks, 2 MiB blocks, odd */
        key_of[i] = i % 3 == 0   ? 0x10000000u + i * 512
                    : i % 3 == 1 ? 0x7f0000000000u + i * ((uintptr_t)2 << 20)
                                 : (uintptr_t)(hoff_test_rand(&rng) >> 8) | 1;
    for (i = 0; i < KEYS; i++) { /* make the random ones distinct */
        size_t j;
        for (j = 0; j < i; j++)
            if (key_of[j] == key_of[i])
                key_of[i] += 8;
    }
    memset(present, 0, sizeof present);
    CU_ASSERT_EQUAL_FATAL(hoff__bt_init(&t, 0), 0);
    for (i = 0; i < OPS; i++) {
        uint64_t r = hoff_test_rand(&rng);
        size_t k = (size_t)(r >> 32) % KEYS;
        /* bias the mix over time so the table grows, shrinks and churns */
        unsigned op = (unsigned)(r % 100), ins = (i / 200000) % 2 ? 30 : 60;
        void *v = VAL((r & 0xffff) + 1);

        if (op < ins) {
            int rc = hoff__bt_insert(&t, KEY(key_of[k]), v);
            if (present[k] ? rc != -EEXIST : rc != 0)
                bad++;
            if (!present[k]) {
                present[k] = 1;
                ref[k] = v;
                live++;
            }
        } else if (op < 85) {
            void *got = hoff__bt_remove(&t, KEY(key_of[k]));
            if (got != (present[k] ? ref[k] : NULL))
                bad++;
            if (present[k]) {
                present[k] = 0;
                live--;
            }
        } else {
            if (hoff__bt_lookup(&t, KEY(key_of[k])) != (present[k] ? ref[k] : NULL))
                bad++;
        }
        if (t.count != live || !table_ok(&t))
            bad++;
    }
    for (i = 0; i < KEYS; i++)
        if (hoff__bt_lookup(&t, KEY(key_of[i])) != (present[i] ? ref[i] : NULL))
            bad++;
    CU_ASSERT_EQUAL(bad, 0);
    hoff__bt_destroy(&t);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"basic", test_basic},
        {"growth_512", test_growth_512},
        {"growth_2m", test_growth_2m},
        {"growth_random", test_growth_random},
        {"tombstone_churn", test_tombstone_churn},
        {"foreach", test_foreach},
        {"random_vs_reference", test_random_vs_reference},
        {NULL, NULL},
    };
    return hoff_test_run("blocktable", tests);
}
