/* memstats.c — the figures behind torch.cuda.memory_stats under hoff, counted where PyTorch meets hoff (the
 * alloc/free entry points of torch.c): per device, the allocations (a count), the bytes of the blocks handed out
 * (hoff's block sizes: PyTorch's allocated_bytes) and the bytes PyTorch asked for (requested_bytes), each as
 * PyTorch's Stat (current, peak, allocated, freed), and the out-of-memory errors.  hoff's own counters (pools,
 * residency) stay in struct hoff_stats; python/hoff/patches.py puts both under PyTorch's keys.
 * Threading: any thread; every figure is a relaxed atomic (a peak is raised by compare-and-swap), so a reader
 * sees each figure exact and the set nearly simultaneous, as PyTorch's own (per-device locked) stats are. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "torch/memstats.h"

enum { T_ALLOCATION, T_ALLOCATED_BYTES, T_REQUESTED_BYTES, T_COUNT };
static const char *const names[T_COUNT] = {"allocation", "allocated_bytes", "requested_bytes"};

struct tstat {
    uint64_t current, peak, allocated, freed;
};

static struct tstat stats[HOFF__TORCH_MAX_DEVICES][T_COUNT];
static uint64_t ooms[HOFF__TORCH_MAX_DEVICES];

static int bad(int device) {
    return device < 0 || device >= HOFF__TORCH_MAX_DEVICES;
}

static void raise_peak(uint64_t *peak, uint64_t v) {
    uint64_t p = __atomic_load_n(peak, __ATOMIC_RELAXED);

    while (v > p && !__atomic_compare_exchange_n(peak, &p, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void add(struct tstat *s, uint64_t n) {
    uint64_t cur = __atomic_add_fetch(&s->current, n, __ATOMIC_RELAXED);

    __atomic_add_fetch(&s->allocated, n, __ATOMIC_RELAXED);
    raise_peak(&s->peak, cur);
}

static void sub(struct tstat *s, uint64_t n) {
    __atomic_sub_fetch(&s->current, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->freed, n, __ATOMIC_RELAXED);
}

void hoff__torch_stats_alloc(int device, size_t requested, size_t block) {
    if (bad(device))
        return;
    add(&stats[device][T_ALLOCATION], 1);
    add(&stats[device][T_ALLOCATED_BYTES], block);
    add(&stats[device][T_REQUESTED_BYTES], requested);
}

void hoff__torch_stats_free(int device, size_t requested, size_t block) {
    if (bad(device))
        return;
    sub(&stats[device][T_ALLOCATION], 1);
    sub(&stats[device][T_ALLOCATED_BYTES], block);
    sub(&stats[device][T_REQUESTED_BYTES], requested);
}

void hoff__torch_stats_oom(int device) {
    if (!bad(device))
        __atomic_add_fetch(&ooms[device], 1, __ATOMIC_RELAXED);
}

void hoff__torch_stats_reset_peaks(int device) {
    int i;

    if (bad(device))
        return;
    for (i = 0; i < T_COUNT; i++)
        __atomic_store_n(&stats[device][i].peak, __atomic_load_n(&stats[device][i].current, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
}

HOFF_API int hoff_torch_reset_accumulated(int device) {
    int i;

    if (bad(device))
        return hoff__error(-ENODEV, "hoff_torch_reset_accumulated: device %d is out of range (0 to %d)", device,
                           HOFF__TORCH_MAX_DEVICES - 1);
    for (i = 0; i < T_COUNT; i++) {
        __atomic_store_n(&stats[device][i].allocated, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&stats[device][i].freed, 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&ooms[device], 0, __ATOMIC_RELAXED);
    return 0;
}

HOFF_API int hoff_torch_memory_stats_json(int device, char *buf, size_t len) {
    size_t n = 0;
    int i, w;

    if (bad(device))
        return hoff__error(-ENODEV, "hoff_torch_memory_stats_json: device %d is out of range (0 to %d)", device,
                           HOFF__TORCH_MAX_DEVICES - 1);
#define PUT(...)                                                                                  \
    do {                                                                                          \
        w = snprintf(buf && n < len ? buf + n : NULL, buf && n < len ? len - n : 0, __VA_ARGS__); \
        if (w < 0)                                                                                \
            return hoff__error(-EIO, "hoff_torch_memory_stats_json: snprintf failed");            \
        n += (size_t)w;                                                                           \
    } while (0)
    PUT("{");
    for (i = 0; i < T_COUNT; i++) {
        const struct tstat *s = &stats[device][i];

        PUT("\"%s\": {\"current\": %llu, \"peak\": %llu, \"allocated\": %llu, \"freed\": %llu}, ", names[i],
            (unsigned long long)__atomic_load_n(&s->current, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->peak, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->allocated, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->freed, __ATOMIC_RELAXED));
    }
    PUT("\"num_ooms\": %llu}", (unsigned long long)__atomic_load_n(&ooms[device], __ATOMIC_RELAXED));
#undef PUT
    if (n > (size_t)INT32_MAX)
        return hoff__error(-EOVERFLOW, "hoff_torch_memory_stats_json: %zu bytes do not fit the int it returns", n);
    return (int)n;
}
