/* pattern.c — the bytes the demo writes into every activation and checks when backward reads it back: a
 * pattern of the block's seed, so that any lost, stale, swapped or shifted page shows.  Threading: pure
 * functions. */
#include <string.h>

#include "hoff-demo.h"

/* The pattern: 64-bit words seed ^ k*golden, little-endian in memory, so any
 * lost, stale, swapped or shifted page shows. */
static inline uint64_t pat_word(uint64_t seed, size_t k) {
    return seed ^ ((uint64_t)k * 0x9E3779B97F4A7C15ull);
}

unsigned pat_byte(uint64_t seed, size_t i) {
    return (unsigned)(pat_word(seed, i / 8) >> (8 * (i % 8))) & 0xff;
}

void fill(void *p, size_t n, uint64_t seed) {
    unsigned char *b = p;
    size_t words = n / 8;

    for (size_t k = 0; k < words; k++) {
        uint64_t w = pat_word(seed, k);
        memcpy(b + 8 * k, &w, 8);
    }
    for (size_t i = words * 8; i < n; i++)
        b[i] = (unsigned char)pat_byte(seed, i);
}

/* Returns the offset of the first bad byte, or (size_t)-1. */
size_t check(const void *p, size_t n, uint64_t seed) {
    const unsigned char *b = p;
    size_t words = n / 8;

    for (size_t k = 0; k < words; k++) {
        uint64_t w, want = pat_word(seed, k);
        memcpy(&w, b + 8 * k, 8);
        if (w != want) {
            for (size_t i = 8 * k; i < 8 * k + 8; i++)
                if (b[i] != pat_byte(seed, i))
                    return i;
        }
    }
    for (size_t i = words * 8; i < n; i++)
        if (b[i] != pat_byte(seed, i))
            return i;
    return (size_t)-1;
}

uint64_t seed_of(int step, int layer, int j) {
    uint64_t x = ((uint64_t)step << 40) ^ ((uint64_t)layer << 16) ^ (uint64_t)j;
    x ^= 0xD1B54A32D192ED03ull;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return x;
}
