/* hoffdbl.h — the harness API of the strict CUDA runtime double (tests/cudart/): declared kernel
 * launches, the double's counters, strictness, error injection and residency queries.
 * Threading: every function may be called from any thread (the double has one global lock). */
#ifndef HOFFDBL_H
#define HOFFDBL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* One range a kernel touches. */
struct hoffdbl_use {
    const void *p;
    size_t n;
    int write;
};

/* Enqueue a "kernel" on stream s: when it runs on the stream's worker it faults in any of its
 * ranges that are not on s's device (counting faults and migrated bytes, evicting others under
 * pressure), runs fn(arg) (which may read/write the memory for real; fn may be NULL), and counts
 * as a declared access of every range for the race check.  Returns what cudaGetLastError()
 * returns after the enqueue (a launch check, like C10_CUDA_KERNEL_LAUNCH_CHECK). */
cudaError_t hoffdbl_launch(cudaStream_t s, const struct hoffdbl_use *use, int nuse, void (*fn)(void *), void *arg);

struct hoffdbl_stats {
    uint64_t hard_errors;                            /* checks that failed (non-strict mode, or allowed) */
    uint64_t discard_races;                          /* discards racing a declared access */
    uint64_t move_races;                             /* evictions/prefetches racing a declared access */
    uint64_t faults, fault_bytes;                    /* kernel faults on non-resident pages */
    uint64_t driver_evictions, driver_evicted_bytes; /* evictions the "driver" made under pressure */
    uint64_t contexts_created[8];                    /* primary contexts created, per device */
    uint64_t device_switches[8];                     /* cudaSetDevice that changed a thread's device, per target */
    uint64_t stale_launch_errors;                    /* hoffdbl_launch calls that found a stale last error */
    /* additions */
    uint64_t lazy_reclaims, lazy_reclaimed_bytes; /* discarded pages whose memory pressure freed */
    uint64_t poisoned_bytes;                      /* bytes filled with HOFFDBL_POISON by discards */
    uint64_t migrated_d2h_bytes;     /* bytes prefetches moved device -> host (what a copy engine carries) */
    uint64_t migrated_h2d_bytes;     /* bytes prefetches moved host -> device (a discarded page carries none) */
    uint64_t access_races;           /* declared accesses on two streams, one a write, with no order between */
    uint64_t device_races;           /* ...of them on plain device memory (cudaMalloc) */
    uint64_t captured_ops;           /* ops recorded into a capture (not run) */
    uint64_t capture_refusals;       /* calls refused because of a capture (hard errors too) */
    uint64_t device_calls[8];        /* calls that needed device d's context (made with d current) */
    uint64_t discard_prefetch_races; /* a discard and a prefetch (or eviction) of overlapping bytes on two
                                        streams, neither ordered before the other (hard errors too) */
};

void hoffdbl_stats(struct hoffdbl_stats *out);
/* 1: a failed check prints its message and abort()s (the default; env HOFFDBL_STRICT=0 clears
 * it); 0: it prints and counts only. */
void hoffdbl_set_strict(int strict);
/* The next `times` calls of the runtime function `call` (e.g. "cudaMalloc") fail with e.  A
 * sticky e (cudaErrorIllegalAddress, cudaErrorLaunchFailure, ...) then makes every later call
 * fail, as the runtime does.  Returns 0, or -EINVAL for an unknown call name, e == cudaSuccess
 * or times <= 0, or -ENOSPC when too many injections are pending. */
int hoffdbl_fail(const char *call, cudaError_t e, int times);
/* Where the driver has page p: 0..N-1 device, -1 host, -2 discarded/none; -3 not managed. */
int hoffdbl_page_location(const void *p);
uint64_t hoffdbl_device_resident(int device); /* managed bytes resident on device */

/* Additions for the double's own tests. */
/* Forget injections, a sticky error and the counters (not the allocations or streams). */
void hoffdbl_reset(void);
/* Bytes of device memory held by discarded managed pages not yet reclaimed (lazy free). */
uint64_t hoffdbl_device_discarded(int device);

/* How many times the runtime function `call` was entered (hoffdbl_fail's names), including calls
 * that failed; 0 for an unknown name. */
uint64_t hoffdbl_calls(const char *call);

/* What p is: 1 device (cudaMalloc), 2 managed, 3 pinned host, 0 none. */
int hoffdbl_ptr_kind(const void *p);

/* The byte a discard fills the discarded range with. */
#define HOFFDBL_POISON 0xDB

#endif
