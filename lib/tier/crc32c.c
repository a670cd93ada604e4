/* crc32c.c — CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 crc32 instruction where cpuid has
 * it, else slice-by-8 tables built on first use.  Threading: thread safe (pthread_once builds the tables). */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tier/crc32c.h"

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_have_hw;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xFF];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc_have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* Raw (no pre/post inversion) slice-by-8. */
static uint32_t crc_sw_raw(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = crc_tab[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c; /* little-endian */
        c = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^ crc_tab[5][(lo >> 16) & 0xFF] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xFF] ^ crc_tab[2][(hi >> 8) & 0xFF] ^
            crc_tab[1][(hi >> 16) & 0xFF] ^ crc_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_tab[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_raw(uint32_t c32, const unsigned char *p, size_t n) {
    uint64_t c = c32;

    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

uint32_t hoff__crc32c_sw(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    return ~crc_sw_raw(~crc, p, n);
}

uint32_t hoff__crc32c(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc_have_hw)
        return ~crc_hw_raw(~crc, p, n);
#endif
    return ~crc_sw_raw(~crc, p, n);
}

int hoff__crc32c_hw(void) {
    pthread_once(&crc_once, crc_init);
    return crc_have_hw;
}
