/* crc32c.h — CRC32C (Castagnoli), the checksum of every chunk the NVMe tier writes.
 * Threading: thread safe (the tables are built once, under pthread_once). */
#ifndef HOFF_TIER_CRC32C_H
#define HOFF_TIER_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C (Castagnoli), chained: crc32c(crc32c(0, a), b) == crc32c(0, a ++ b); crc32c(0, "123456789") ==
 * 0xE3069283.  The SSE4.2 crc32 instruction where cpuid has it, else slice-by-8 tables. */
uint32_t hoff__crc32c(uint32_t crc, const void *p, size_t n);
uint32_t hoff__crc32c_sw(uint32_t crc, const void *p, size_t n);
int hoff__crc32c_hw(void); /* 1 if the instruction is used */

#endif
