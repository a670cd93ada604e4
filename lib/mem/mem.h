/* mem.h — struct hoff__mem, the memory layer's own state: the backend, the issuers, the host and NVMe tiers, the
 * block table and pools, residency, the guard, the manual swap groups, the live limits, the policy the pipeline
 * pushes down, and the layer's counters.  lib/mem, lib/tier and the residency half of lib/exec take this struct (or
 * a part of it), never the context: the context (core/context.h) embeds one and keeps the API's lock, the options,
 * the pipeline and publishing.
 * Threading: the context lock guards everything here, except the issuers (their own locks) and done_lock/done_cond
 * (transfer completions: the issuing thread signals there and never takes the context lock, so a thread that holds
 * it may wait on done_cond). */
#ifndef HOFF_MEM_H
#define HOFF_MEM_H

#include <pthread.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/stat.h"
#include "exec/issuer.h"
#include "mem/blocktable.h"
#include "mem/guard.h"
#include "mem/pool.h"
#include "mem/residency.h"

struct hoff__host_tier;
struct hoff__nvme;
struct hoff_group;

/* The limits the memory layer keeps, as the options set them now (the context copies them in at start and on
 * every live change: core/context.c hoff__ctx_push_limits). */
struct hoff__mem_limits {
    uint64_t budget_bytes;         /* resident offload bytes allowed on the device (0: no budget) */
    uint64_t host_cap_bytes;       /* offload bytes allowed on the host tier (0: no cap) */
    uint64_t oversub_margin_bytes; /* device memory the guard leaves to others */
    int oversubscribe;             /* map beyond the device's memory (no guard) */
};

/* What the memory layer needs to know of the pipeline of steps, pushed down by it (exec/executor.h
 * hoff__pipe_push_policy) whenever one of these changes: the memory layer never reads the pipeline. */
struct hoff__mem_policy {
    int in_step;          /* between a step's begin and its end */
    int warmup;           /* the pipeline records this step (no plan yet, or planning again) */
    int replaying;        /* a plan is replayed and this step still follows it */
    uint64_t floor_bytes; /* that plan's working-set floor (room for it is not taken from the budget) */
    uint64_t step;        /* steps begun: the current one while in a step (manual groups' step) */
    uint64_t steps;       /* steps completed: the clock of a refused spill's retry */
};

/* The hoff_stats fields the memory layer keeps (core/stat.h); core/ctx_stats.c folds them in on read. */
#define HOFF__MEM_STATS(X)      \
    X(resident_bytes)           \
    X(peak_resident_bytes)      \
    X(step_peak_resident_bytes) \
    X(host_bytes)               \
    X(peak_host_bytes)          \
    X(nvme_bytes)               \
    X(peak_nvme_bytes)          \
    X(spills)                   \
    X(bytes_spilled)            \
    X(restores)                 \
    X(bytes_restored)           \
    X(spill_failures)           \
    X(host_cap_waits)           \
    X(host_cap_overruns)        \
    X(host_cap_unevictable)     \
    X(evictions)                \
    X(bytes_evicted)            \
    X(evict_ns)                 \
    X(prefetches)               \
    X(bytes_prefetched)         \
    X(prefetch_ns)              \
    X(discards)                 \
    X(faults)                   \
    X(bytes_faulted)            \
    X(late_prefetches)          \
    X(stall_ns)                 \
    X(budget_evictions)         \
    X(budget_overruns)          \
    X(oversub_refusals)         \
    X(transfer_errors)          \
    X(evict_calls)              \
    X(prefetch_calls)           \
    X(group_calls_saved)        \
    X(window_refusals)          \
    X(fence_syncs)              \
    X(device_squeezes)          \
    X(driver_drift_samples)     \
    X(driver_drift_moves)       \
    X(driver_drift_bytes)       \
    X(device_foreign_bytes)     \
    X(manual_groups)            \
    X(manual_blocks)            \
    X(manual_refusals)          \
    X(manual_aborts)            \
    X(keep_marks)               \
    X(kept_bytes)               \
    X(kept_evicted)

struct hoff__mem_stats {
#define HOFF__MEM_STAT_(name) HOFF__STAT_FIELD(name)
    HOFF__MEM_STATS(HOFF__MEM_STAT_)
#undef HOFF__MEM_STAT_
};

struct hoff__mem {
    struct hoff__backend *be;
    /* The issuing thread signals finished commands here; it never takes the context lock. */
    pthread_mutex_t done_lock;
    pthread_cond_t done_cond;
    struct hoff__issuer *issuer;
    /* The tiers below the device: placement of evictions, and the NVMe tier (NULL without HOFF_SPILL_DIR) with
     * its own thread, so disk I/O never holds up a transfer. */
    struct hoff__host_tier *host_tier;
    struct hoff__nvme *nvme;
    struct hoff__issuer *tier_issuer;
    struct hoff__blocktable table;  /* live blocks by address */
    struct hoff__pool pools[2];     /* indexed by enum hoff__pool_kind */
    struct hoff__pool graph_pool;   /* device blocks allocated during CUDA graph capture (mem/pool.h) */
    struct hoff__pool_sum pool_sum; /* pools[0] and pools[1] together, with peaks (mem/pool.h) */
    struct hoff__residency res;
    struct hoff__guard guard;  /* the device's size and the drift baseline (mem/guard.h) */
    struct hoff_group *groups; /* manual swap groups (mem/swapgroup.c) */
    struct hoff__mem_limits lim;
    struct hoff__mem_policy pol;
    struct hoff__mem_stats st;
};

#endif
