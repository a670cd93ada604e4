/* hoff.h — the public API of hoff, a CUDA allocator that keeps activations
 * inside a device-memory budget. Every function is thread safe unless noted. */
#ifndef HOFF_H
#define HOFF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t (the PyTorch entry points) */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HOFF_API __attribute__((visibility("default")))
#else
#define HOFF_API
#endif

#define HOFF_VERSION_MAJOR 0
#define HOFF_VERSION_MINOR 1
#define HOFF_VERSION_PATCH 0

/* ---------------------------------------------------------------------------
 * Configuration.  One table of options (see hoff-config(7)); each is a field
 * here and an environment variable HOFF_<NAME>.  Sizes accept K/M/G/T.
 * ------------------------------------------------------------------------- */

#define HOFF_CONFIG_VERSION 1

enum hoff_backend_kind {
    HOFF_BACKEND_AUTO = 0, /* cuda where a GPU is present, else sim */
    HOFF_BACKEND_SIM = 1,
    HOFF_BACKEND_CUDA = 2,
};

enum hoff_log_level {
    HOFF_LOG_OFF = 0,
    HOFF_LOG_ERROR = 1,
    HOFF_LOG_WARN = 2,
    HOFF_LOG_INFO = 3,
    HOFF_LOG_DEBUG = 4,
};

enum hoff_sim_protect {
    HOFF_SIM_POISON = 0,  /* non-resident bytes are overwritten with 0xDB */
    HOFF_SIM_PROTECT = 1, /* ...and mprotect()ed: a stray access crashes */
};

/* When a freed device-pool block may be handed out again (HOFF_FREE_FENCE). */
enum hoff_free_fence {
    HOFF_FENCE_STREAM = 0, /* once the free's stream passed the free (streams ordered before it by the
                              caller, or named with hoff_record_stream, are covered) */
    HOFF_FENCE_DEVICE = 1, /* once the whole device passed the free: safe for streams hoff never sees */
};

struct hoff_config {
    uint32_t version;              /* HOFF_CONFIG_VERSION */
    uint32_t size;                 /* sizeof(struct hoff_config) */
    int backend;                   /* enum hoff_backend_kind  (HOFF_BACKEND) */
    int device;                    /* CUDA device ordinal     (HOFF_DEVICE); -1 = LOCAL_RANK when
                                      set, else the calling thread's current device */
    uint64_t budget_bytes;         /* resident offload bytes; 0 = no limit (HOFF_BUDGET) */
    uint64_t host_cap_bytes;       /* host-tier bytes; 0 = no limit (HOFF_HOST_CAP) */
    uint64_t managed_min_bytes;    /* in-step allocations >= this are offload
                                      candidates (HOFF_MANAGED_MIN) */
    uint64_t oversub_margin_bytes; /* device bytes kept free (HOFF_OVERSUB_MARGIN) */
    int oversubscribe;             /* 1 = allow mapping more managed memory than
                                      the device has free (HOFF_OVERSUBSCRIBE) */
    int log_level;                 /* enum hoff_log_level     (HOFF_LOG_LEVEL) */
    uint64_t sim_device_bytes;     /* sim device capacity     (HOFF_SIM_DEVICE) */
    double sim_h2d_gbps;           /* sim H2D copy engine, GB/s (HOFF_SIM_H2D_GBPS) */
    double sim_d2h_gbps;           /* sim D2H copy engine, GB/s (HOFF_SIM_D2H_GBPS) */
    uint64_t sim_latency_ns;       /* sim per-call latency    (HOFF_SIM_LATENCY) */
    double sim_fault_gbps;         /* sim demand-paging rate  (HOFF_SIM_FAULT_GBPS) */
    uint64_t sim_fault_ns;         /* sim cost of one fault   (HOFF_SIM_FAULT_NS) */
    int sim_protect;               /* enum hoff_sim_protect   (HOFF_SIM_PROTECT) */
    int issue_queue_depth;         /* issuing-thread queue slots (HOFF_QUEUE_DEPTH) */
    char planner[16];              /* planner by name: "timed", "greedy" (HOFF_PLANNER) */
    uint32_t guard_after_alloc;    /* blocks without access marks: events after the
                                      alloc before they may be evicted (HOFF_GUARD_AFTER_ALLOC) */
    uint32_t guard_before_free;    /* ...and events before the free by which they are
                                      back (HOFF_GUARD_BEFORE_FREE) */
    uint32_t replan_after;         /* divergent steps before hoff records and plans
                                      again; 0 = never (HOFF_REPLAN_AFTER) */
    double bandwidth_gbps;         /* H2D and D2H GB/s assumed where the backend cannot
                                      measure them (HOFF_BANDWIDTH_GBPS) */
    char trace_path[256];          /* write each recorded step's trace here; "" = don't
                                      (HOFF_TRACE) */
    int stats_publish;             /* publish the stats for hoff-stat (HOFF_STATS) */
    char numa[64];                 /* host-tier placement: "nearest", "interleave" or a
                                      node list "0,2" (HOFF_NUMA) */
    char spill_dir[256];           /* NVMe tier: spill files go here; "" = no NVMe tier
                                      (HOFF_SPILL_DIR) */
    uint64_t spill_chunk_bytes;    /* NVMe I/O chunk (HOFF_SPILL_CHUNK) */
    int io_queue_depth;            /* io_uring queue depth (HOFF_IO_DEPTH) */
    double sim_nvme_read_gbps;     /* sim NVMe read rate, GB/s (HOFF_SIM_NVME_READ_GBPS) */
    double sim_nvme_write_gbps;    /* sim NVMe write rate, GB/s (HOFF_SIM_NVME_WRITE_GBPS) */
    uint64_t sim_call_ns;          /* sim: the issuing thread's own cost per transfer
                                      call (HOFF_SIM_CALL_NS) */
    int groups;                    /* 1 = lay out blocks the plan moves together in one
                                      mapping and move them with one call (HOFF_GROUPS) */
    int plan_thread;               /* 1 = plan on a background thread while the next steps
                                      run under the online policy; 0 = at the recorded
                                      step's end, the training thread waiting (HOFF_PLAN_THREAD) */
    uint64_t plan_time_ns;         /* time budget of one planning: the planner answers within it
                                      with the best schedule found so far; 0 = no limit
                                      (HOFF_PLAN_TIME) */
    int free_fence;                /* enum hoff_free_fence    (HOFF_FREE_FENCE) */
    double budget_pct;             /* the budget as a percentage of this context's device's memory
                                      (each rank's own GPU); 0 = use budget_bytes (HOFF_BUDGET_PCT) */
    int offload_gradients;         /* 1 = hoff_keep does nothing: gradients and the optimizer step's
                                      blocks stay offload candidates (HOFF_OFFLOAD_GRADIENTS) */
};

/* Fill cfg with the defaults (no environment). */
HOFF_API void hoff_config_init(struct hoff_config *cfg);

/* Set one option by name ("budget", "sim_h2d_gbps", ... case-insensitive;
 * "HOFF_BUDGET" is accepted too).  On error returns -EINVAL (bad value) or
 * -ENOENT (no such option) with hoff_last_error() naming the option and the
 * accepted form; if err != NULL (deprecated: pass NULL, 0), a copy of that
 * message is written there. */
HOFF_API int hoff_config_set(struct hoff_config *cfg, const char *name, const char *value, char *err, size_t errlen);

/* Apply every HOFF_* variable of the environment.  Same errors as
 * hoff_config_set; an unknown HOFF_* variable is an error too, except the
 * ones other parts of hoff read (HOFF_LIBRARY, HOFF_STATS, ...). */
HOFF_API int hoff_config_from_env(struct hoff_config *cfg, char *err, size_t errlen);

/* Write the value of an option as text (the form hoff_config_set accepts). */
HOFF_API int hoff_config_get(const struct hoff_config *cfg, const char *name, char *buf, size_t len);

/* Check name=value the way hoff_config_set would, on a struct of defaults,
 * changing nothing; if buf is non-NULL, write the value there as
 * hoff_config_get prints it (" Interleave " gives "interleave", "1.5G" gives
 * "1536M").  Returns 0, hoff_config_set's errors with the message in err, or
 * -ERANGE when buf is too small.  Bindings (the Python package) check their
 * values with it, so that a bad one gets hoff's own message. */
HOFF_API int hoff_config_check(const char *name, const char *value, char *buf, size_t len, char *err, size_t errlen);

/* Number of options and the name/description of option i (for tools). */
HOFF_API int hoff_config_count(void);
HOFF_API const char *hoff_config_name(int i);
HOFF_API const char *hoff_config_help(int i);

/* ---------------------------------------------------------------------------
 * Context.
 * ------------------------------------------------------------------------- */

typedef struct hoff_ctx hoff_ctx;

/* A stream: a cudaStream_t on the cuda backend, any value on sim (NULL is the
 * default stream).  Blocks freed on a stream are reused at once on that
 * stream and on others only once the stream has passed the free. */
typedef void *hoff_stream;

/* Create a context.  cfg == NULL means defaults plus the environment; a cfg
 * given is taken as is (call hoff_config_from_env yourself to layer the
 * environment on it).  Returns 0 or -errno (-EINVAL bad config, -ENODEV no
 * usable backend, -ENOMEM). */
HOFF_API int hoff_init(hoff_ctx **ctx, const struct hoff_config *cfg);

/* Wait for every transfer, release all memory and destroy the context.
 * Blocks still allocated are released too (and logged as a leak). */
HOFF_API int hoff_shutdown(hoff_ctx *ctx);

/* The backend in use: "sim" or "cuda". */
HOFF_API const char *hoff_backend_name(const hoff_ctx *ctx);

/* The planner in use, by name ("timed"); hoff-stat(1) shows it too. */
HOFF_API const char *hoff_planner_name(const hoff_ctx *ctx);

/* The message of the last failed call on this thread (never NULL; "no error"
 * before any failure).  The one channel for why a call failed (hoff(3),
 * ERRORS): every function here that fails (a negative return, NULL for a
 * pointer, a void hook that could not do what was asked), for a NULL context
 * too, sets it, naming the call and what was wrong or what is accepted (the
 * configuration calls name the option or HOFF_* variable), so after a failed
 * call it is never an older message.  A successful call does not clear it:
 * read it after a failure, before the next call.  The returned code (errno
 * after a NULL pointer) is the category; the err/errlen parameters of the
 * configuration calls are deprecated and only receive a copy of this message. */
HOFF_API const char *hoff_last_error(void);

/* ---------------------------------------------------------------------------
 * Allocation.
 * ------------------------------------------------------------------------- */

enum hoff_alloc_flags {
    HOFF_ALLOC_AUTO = 0,      /* the pool is chosen by the rules in hoff_malloc(3) */
    HOFF_ALLOC_DEVICE = 1,    /* plain device pool: never offloaded */
    HOFF_ALLOC_MANAGED = 2,   /* managed pool: an offload candidate */
    HOFF_ALLOC_CANDIDATE = 4, /* managed pool if the rules make it an offload
                               * candidate, else NULL with errno EAGAIN (no
                               * failure counted): for interposers that leave
                               * the rest to another allocator */
};

/* Allocate size bytes for use on stream.  Returns NULL on failure (errno and
 * hoff_last_error() say why) after releasing cached memory and retrying. */
HOFF_API void *hoff_malloc(hoff_ctx *ctx, size_t size, hoff_stream stream);
HOFF_API void *hoff_malloc_flags(hoff_ctx *ctx, size_t size, hoff_stream stream, unsigned flags);

/* Free ptr, last used on stream.  -EINVAL if ptr is not a live hoff block. */
HOFF_API int hoff_free(hoff_ctx *ctx, void *ptr, hoff_stream stream);

/* Work on stream (besides the block's own streams) uses ptr, a live block:
 * hoff moves it away or drops it only after the work queued there so far
 * (like PyTorch's record_stream; hoff_torch_record_stream calls it).  Its
 * free still follows the stream given to hoff_free.  -EINVAL if ptr is not a
 * live hoff block. */
HOFF_API int hoff_record_stream(hoff_ctx *ctx, void *ptr, hoff_stream stream);

/* Usable size of a live block (>= the size asked for), 0 if not a block. */
HOFF_API size_t hoff_block_size(hoff_ctx *ctx, const void *ptr);

/* Return every cached, unused block to the backend. */
HOFF_API int hoff_empty_cache(hoff_ctx *ctx);

/* ---------------------------------------------------------------------------
 * Residency: where an offload candidate's bytes are.
 * ------------------------------------------------------------------------- */

enum hoff_residency {
    HOFF_RES_DEVICE = 0,
    HOFF_RES_EVICTING = 1,
    HOFF_RES_HOST = 2,
    HOFF_RES_PREFETCHING = 3,
    HOFF_RES_DISCARDED = 4, /* released: not resident, contents undefined */
    HOFF_RES_SPILLING = 5,  /* NVMe tier (reserved) */
    HOFF_RES_NVME = 6,
    HOFF_RES_RESTORING = 7,
};

/* Queue an eviction (device -> host) of the block holding ptr, ordered after
 * the work already queued on stream.  Never blocks on the transfer.
 * -EALREADY if it is not on the device, -EPERM for a device-pool block or one
 * allocated inside a region, -EINVAL if ptr is not a block, -HOFF_EHOSTCAP
 * if the host tier is at its cap and nothing can be spilled (the block stays
 * on the device; hoff_last_error() says why, a full disk's message included). */
HOFF_API int hoff_evict(hoff_ctx *ctx, void *ptr, hoff_stream stream);

/* Queue a prefetch (host -> device), ordered after the work on stream; work
 * queued on stream afterwards sees the bytes.  -EALREADY if resident,
 * -HOFF_EBUDGET if it would exceed the budget and nothing can be evicted. */
HOFF_API int hoff_prefetch(hoff_ctx *ctx, void *ptr, hoff_stream stream);

/* Release: the block's contents are dead until next written; its device
 * pages are dropped without a copy. */
HOFF_API int hoff_discard(hoff_ctx *ctx, void *ptr, hoff_stream stream);

/* Mark an access (from framework hooks, or before host code touches a block
 * on sim).  A block that is not resident is paged in: a fault, counted,
 * with its stall.  write != 0 for a write. */
HOFF_API int hoff_access(hoff_ctx *ctx, void *ptr, int write, hoff_stream stream);

/* Current residency of the block holding ptr, or -EINVAL. */
HOFF_API int hoff_residency(hoff_ctx *ctx, const void *ptr);

/* The block holding ptr is not an activation (a parameter's gradient, an
 * optimizer's state or temporary): it stays on the device and out of the
 * budget for the rest of its life.  A managed block is brought back first if
 * it is away (counted in kept_evicted when it had been moved), then never
 * moved again; a device-pool block is already there.  The recorded step
 * notes it, so the plan counts the block as device memory from its
 * allocation and later steps allocate it from the device pool.  0 (also for
 * a block already kept), -EINVAL if ptr is not a live block, -EBUSY for a
 * member of a manual swap group.  With offload_gradients set it does nothing
 * and returns 0 (counted in keep_ignored). */
HOFF_API int hoff_keep(hoff_ctx *ctx, void *ptr);

/* Wait until every queued transfer has completed. */
HOFF_API int hoff_sync(hoff_ctx *ctx);

/* ---------------------------------------------------------------------------
 * Manual swap groups (hoff_group(3)): a named set of offload blocks that the
 * caller evicts and prefetches itself, layer by layer (the seeds' SwapGroup).
 * A block is in at most one group.  Members are outside the plan: the planner
 * neither moves them nor counts them as candidates, and the online policy
 * never picks them as victims; the budget still counts them.  A group moves
 * each block (the whole storage) once, however many tensors alias it; blocks
 * laid out together in one mapping move with one call.  Groups belong to
 * their context and go with it.
 * ------------------------------------------------------------------------- */

typedef struct hoff_group hoff_group;

enum hoff_group_flags {
    HOFF_GROUP_COLOCATE = 0,   /* members next to each other in one mapping move with one call */
    HOFF_GROUP_ONE_BY_ONE = 1, /* every member moves with a call of its own */
};
/* Create an empty group named name (1 to 63 printable characters, unique in
 * ctx) with flags (enum hoff_group_flags).  -EINVAL bad name or flags,
 * -EEXIST the name is taken, -ENOMEM. */
HOFF_API int hoff_group_create(hoff_ctx *ctx, const char *name, unsigned flags, hoff_group **out);
/* The group of ctx named name, or NULL (errno ENOENT). */
HOFF_API hoff_group *hoff_group_find(hoff_ctx *ctx, const char *name);
/* Abort the group (hoff_group_abort) and free it. */
HOFF_API int hoff_group_destroy(hoff_group *g);
/* Add the block holding ptr (any address inside it).  Returns 0 when added,
 * 1 when it was a member already (a duplicate, folded).  -EINVAL not inside a
 * live block, -EPERM a device-pool block or one allocated inside a region,
 * -EBUSY a member of another group, or the group has a transfer launched and
 * not waited for; -ESTALE the group holds blocks added in an earlier step
 * (release or abort it first). */
HOFF_API int hoff_group_add(hoff_group *g, const void *ptr);
/* Take the block holding ptr out of the group (it stays where it is).
 * -ENOENT not a member, -EBUSY a transfer of the group is launched and not
 * waited for, -EINVAL not inside a live block. */
HOFF_API int hoff_group_remove(hoff_group *g, const void *ptr);
/* Queue the eviction of every member on the device, after the work queued so
 * far on stream and on every stream the members were used on (the caller says
 * that work is enqueued: their use windows close).  All or nothing:
 * -HOFF_EHOSTCAP if the host tier cannot take the whole group (nothing moved).
 * -EBUSY if a transfer of the group is launched and not waited for. */
HOFF_API int hoff_group_evict(hoff_group *g, hoff_stream stream);
/* Queue the prefetch of every member not on the device, ordered after the
 * work on stream.  All or nothing: -HOFF_EBUDGET if the budget cannot hold the
 * whole group even after evicting other (unpinned, unused, non-member)
 * blocks; nothing is moved and nothing over-commits.  -EBUSY as above. */
HOFF_API int hoff_group_prefetch(hoff_group *g, hoff_stream stream);

enum hoff_group_wait_flags {
    HOFF_GROUP_WAIT_STREAM = 0, /* work queued on stream afterwards waits (no host wait) */
    HOFF_GROUP_WAIT_HOST = 1,   /* the host waits until every transfer has landed */
};
/* Wait for the group's launched eviction or prefetch.  -EINVAL if nothing
 * was launched since the last wait. */
HOFF_API int hoff_group_wait(hoff_group *g, hoff_stream stream, unsigned flags);
/* The group's contents are dead: wait for its evictions, drop the host
 * copies of members not on the device or on their way back (discarded: their
 * contents are lost), and empty the group.  Members on the device, or being
 * prefetched, keep their bytes; nothing waits for a prefetch. */
HOFF_API int hoff_group_release(hoff_group *g);
/* Empty the group: every member leaves it where it is, with its bytes;
 * nothing waits and nothing moves (a transfer in flight lands as any other).
 * For a group whose cycle is over (its load waited for). */
HOFF_API int hoff_group_clear(hoff_group *g);
/* Wait for every transfer of the group (each lands or fails; either way each
 * byte is in one valid place: the device or the host, paged in on use) and
 * empty the group.  Counted in manual_aborts. */
HOFF_API int hoff_group_abort(hoff_group *g);

struct hoff_group_info {
    uint32_t version;        /* 1 */
    uint32_t size;           /* sizeof(struct hoff_group_info) */
    uint64_t blocks;         /* members now */
    uint64_t bytes;          /* their bytes */
    uint64_t on_device;      /* members resident (DEVICE) */
    uint64_t on_host;        /* members on the host or the NVMe tier, or discarded */
    uint64_t in_flight;      /* members with a transfer in flight */
    uint64_t launched;       /* 0, 1 an eviction or 2 a prefetch launched and not waited for */
    uint64_t adds;           /* blocks added since created */
    uint64_t duplicates;     /* adds of a block that was a member already (folded) */
    uint64_t evicted_blocks; /* blocks this group's launches evicted */
    uint64_t evicted_bytes;
    uint64_t prefetched_blocks; /* blocks this group's launches prefetched */
    uint64_t prefetched_bytes;
    uint64_t calls; /* backend transfer calls its launches made */
    uint64_t step;  /* the step its members were added in */
};
/* Snapshot the group's state into *out. */
HOFF_API int hoff_group_info(hoff_group *g, struct hoff_group_info *out);

/* ---------------------------------------------------------------------------
 * Step and region marks.
 * ------------------------------------------------------------------------- */

/* A training step.  Without marks hoff is a plain caching allocator.  The
 * first step is recorded (warmup: the budget is kept by evicting online); at
 * its end the planner turns the trace into a schedule — on a planning thread
 * (plan_thread, the default: the steps meanwhile keep the budget online, and
 * the first step to begin once the plan is ready replays it; hoff_step_end
 * never waits for the planner) or inside hoff_step_end (plan_thread 0) —
 * which every later step replays.  A step that does not match the plan fires no planned action for
 * the rest of the step (counted as divergent; the budget is still kept, by
 * evicting on demand); after replan_after divergent steps in a row, hoff
 * records and plans again. */
HOFF_API int hoff_step_begin(hoff_ctx *ctx);
HOFF_API int hoff_step_end(hoff_ctx *ctx);
/* The step's compute stream: once named, an allocation inside a step on any
 * other stream goes to the device pool and is never an offload candidate
 * (counted in side_stream_allocs).  Collective buffers live there: FSDP
 * allocates its all-gather and reduce-scatter outputs on its communication
 * streams, and NCCL does not work on managed memory.  Unnamed (the default),
 * every stream's allocations may be candidates.  Any time; 0, or -EINVAL
 * for a NULL context. */
HOFF_API int hoff_step_stream(hoff_ctx *ctx, hoff_stream stream);
/* End the open step without using it: for a step that failed (an exception
 * in the framework).  Waits for every queued transfer and closes open
 * regions.  A warmup's recording is dropped (the next step records again);
 * a replay's remaining planned actions are counted as skipped and the plan
 * is kept.  -EINVAL if no step is open. */
HOFF_API int hoff_step_abort(hoff_ctx *ctx);

/* An op boundary (from the framework): recorded in the trace, and a point
 * the plan can attach actions to.  name may be NULL. */
HOFF_API int hoff_mark_op(hoff_ctx *ctx, const char *name);

/* The phase of a training step the next op marks belong to; recorded with
 * each op mark, so that a plan's figures (the working-set floor) say where
 * they come from.  A phase is no boundary: it closes no use window. */
enum hoff_phase {
    HOFF_PHASE_NONE = 0, /* not said */
    HOFF_PHASE_FORWARD = 1,
    HOFF_PHASE_BACKWARD = 2,
    HOFF_PHASE_LOSS = 3,      /* the loss and its gradient (forward or backward) */
    HOFF_PHASE_OPTIMIZER = 4, /* the optimizer's step */
    HOFF_PHASE_COUNT
};

/* Set the phase of the op marks that follow (until the next call): 0 or
 * -EINVAL for a phase outside enum hoff_phase. */
HOFF_API int hoff_set_phase(hoff_ctx *ctx, int phase);
/* "none", "forward", "backward", "loss", "optimizer"; "unknown" otherwise. */
HOFF_API const char *hoff_phase_name(int phase);

/* Where the pipeline is. */
enum hoff_plan_state {
    HOFF_PLAN_NONE = 0,     /* no step seen: plain caching allocator */
    HOFF_PLAN_WARMUP = 1,   /* recording a step */
    HOFF_PLAN_REPLAY = 2,   /* replaying the schedule */
    HOFF_PLAN_FALLBACK = 3, /* this step diverged: no more evictions in it */
};

/* The state's name ("none", "warmup", "replay", "fallback"; "unknown" for
 * any other value), for tools that print stats.plan_state. */
HOFF_API const char *hoff_plan_state_name(int state);

/* Write the last recorded step's trace (doc/trace-format.md) to path.
 * -ENOENT if no step has been recorded yet. */
HOFF_API int hoff_trace_save(hoff_ctx *ctx, const char *path);

/* A region: allocations inside are never offloaded (RFC skip_offload).
 * Regions nest. */
HOFF_API int hoff_region_begin(hoff_ctx *ctx);
HOFF_API int hoff_region_end(hoff_ctx *ctx);

/* sim only: the compute stream runs for ns of virtual time.  -ENOTSUP on a
 * real backend. */
HOFF_API int hoff_sim_compute(hoff_ctx *ctx, hoff_stream stream, uint64_t ns);

/* sim only: with enable 1, every hoff_mark_op inside a step first advances
 * the compute stream (as hoff_sim_compute(ctx, NULL, ns)) by the CPU time,
 * CLOCK_MONOTONIC, since the previous op mark or the step's begin: the host
 * runs the model's kernels, and the virtual device computes as long as they
 * took (python -m hoff --sim).  0 turns it off.  -ENOTSUP on a real backend,
 * -EINVAL for another enable. */
HOFF_API int hoff_sim_wallclock(hoff_ctx *ctx, int enable);

/* sim only: host code touched the live block at ptr (its address) without an
 * access mark, as a page fault reports (python -m hoff --sim's fault handler):
 * it is paged in on demand and counted (faults, touch_faults), and a use
 * window opens as for hoff_access.  A block released by the plan (discarded)
 * is an error: counted in discard_touches, made resident with undefined
 * contents, and -ENODATA is returned.  -ENOTSUP on a real backend, -EINVAL if
 * ptr is not a live block. */
HOFF_API int hoff_sim_touch(hoff_ctx *ctx, void *ptr, int write);

/* ---------------------------------------------------------------------------
 * Statistics: one versioned struct (hoff_stats(3)).
 * ------------------------------------------------------------------------- */

#define HOFF_STATS_VERSION 4

/* X(name, description) for every counter, all uint64_t. */
#define HOFF_STATS_FIELDS(X)                                                                                          \
    X(budget_bytes, "device budget for resident offload bytes (0 = none)")                                            \
    X(resident_bytes, "offload bytes resident on the device now")                                                     \
    X(peak_resident_bytes, "highest resident_bytes seen")                                                             \
    X(step_peak_resident_bytes, "highest resident_bytes in this (or the last) step")                                  \
    X(device_pool_bytes, "bytes mapped by the plain device pool")                                                     \
    X(managed_pool_bytes, "bytes mapped by the managed pool")                                                         \
    X(device_in_use_bytes, "device-pool bytes handed out")                                                            \
    X(managed_in_use_bytes, "managed-pool bytes handed out")                                                          \
    X(host_bytes, "offload bytes on the host tier now")                                                               \
    X(peak_host_bytes, "highest host_bytes seen")                                                                     \
    X(host_cap_bytes, "cap of the host tier (0 = none)")                                                              \
    X(nvme_bytes, "offload bytes on the NVMe tier now")                                                               \
    X(peak_nvme_bytes, "highest nvme_bytes seen")                                                                     \
    X(spills, "blocks written to the NVMe tier")                                                                      \
    X(bytes_spilled, "bytes written to the NVMe tier")                                                                \
    X(spill_ns, "time spent writing spills")                                                                          \
    X(restores, "blocks read back from the NVMe tier")                                                                \
    X(bytes_restored, "bytes read back from the NVMe tier")                                                           \
    X(restore_ns, "time spent reading restores")                                                                      \
    X(spill_failures, "spills that failed; the block stayed on the host")                                             \
    X(crc_errors, "spilled chunks whose CRC32C did not match on restore")                                             \
    X(host_cap_waits, "evictions held back because the host tier was full")                                           \
    X(host_cap_overruns, "restores let over the host cap: the NVMe tier refused spills")                              \
    X(allocs, "successful allocations")                                                                               \
    X(frees, "frees")                                                                                                 \
    X(cache_hits, "allocations served from the cache")                                                                \
    X(cache_misses, "allocations that mapped new memory")                                                             \
    X(cross_stream_reuses, "blocks reused on a stream other than their free's")                                       \
    X(alloc_failures, "allocations that returned NULL")                                                               \
    X(cache_flushes, "times cached memory was released")                                                              \
    X(evictions, "evictions completed")                                                                               \
    X(bytes_evicted, "bytes moved device -> host")                                                                    \
    X(evict_ns, "time evictions took, issue to completion")                                                           \
    X(prefetches, "prefetches completed")                                                                             \
    X(bytes_prefetched, "bytes moved host -> device")                                                                 \
    X(prefetch_ns, "time prefetches took, issue to completion")                                                       \
    X(discards, "blocks released without a copy")                                                                     \
    X(faults, "blocks paged in on demand")                                                                            \
    X(bytes_faulted, "bytes paged in on demand")                                                                      \
    X(late_prefetches, "blocks used before their prefetch completed")                                                 \
    X(stall_ns, "time compute waited on transfers (sim, or measured)")                                                \
    X(budget_evictions, "evictions forced to stay within the budget")                                                 \
    X(budget_overruns, "events at which resident bytes exceeded the budget")                                          \
    X(oversub_refusals, "managed maps refused by the oversubscription guard")                                         \
    X(transfer_errors, "transfers that failed and kept the data in place")                                            \
    X(queue_depth_max, "deepest the issuing queue has been")                                                          \
    X(steps, "completed steps")                                                                                       \
    X(plan_state, "enum hoff_plan_state")                                                                             \
    X(plans, "schedules built")                                                                                       \
    X(plan_actions, "actions in the current schedule")                                                                \
    X(plan_feasible, "1 if the schedule meets the budget (transfers instant)")                                        \
    X(plan_peak_bytes, "resident peak the schedule reaches")                                                          \
    X(plan_ns, "time the last planning took")                                                                         \
    X(plan_stall_ns, "exposed stall per step the planner predicts for its plan")                                      \
    X(actions_fired, "planned actions carried out")                                                                   \
    X(actions_skipped, "planned actions not carried out (divergence, state)")                                         \
    X(divergent_steps, "steps that did not match the plan")                                                           \
    X(replans, "times hoff recorded and planned again")                                                               \
    X(h2d_mbps, "H2D bandwidth the planner uses, in MB/s")                                                            \
    X(d2h_mbps, "D2H bandwidth the planner uses, in MB/s")                                                            \
    X(last_step_ns, "duration of the last step")                                                                      \
    X(live_blocks, "blocks allocated now")                                                                            \
    X(evict_calls, "backend eviction calls issued (a group's counts 1)")                                              \
    X(prefetch_calls, "backend prefetch calls issued (a group's counts 1)")                                           \
    X(group_calls_saved, "transfer calls saved by moving groups with one call")                                       \
    X(group_fallbacks, "group actions carried out block by block instead")                                            \
    X(plan_groups, "groups of blocks in the current schedule")                                                        \
    X(window_refusals, "moves of a block refused because its use window was open")                                    \
    X(window_violations, "sim: blocks moved or dropped inside an open use window (0 when correct)")                   \
    X(plan_floor_bytes, "working-set floor: no plan of the step goes below it")                                       \
    X(host_cap_unevictable, "offload blocks allocated larger than the host cap (never evictable)")                    \
    X(fence_syncs, "moves that waited for the whole device: a block used on more streams than fit a fence")           \
    X(numa_refusals, "evictions the driver refused at a host NUMA node (that node gets plain host memory)")           \
    X(discard_fallbacks, "discards done as evictions: the driver refused the discard, or has none")                   \
    X(host_drop_refusals, "host copies of spilled blocks the driver would not drop (they keep host pages)")           \
    X(device_squeezes, "times the device pool left less room than the budget, so hoff kept less resident")            \
    X(driver_drift_samples, "evictions measured against the device's free memory")                                    \
    X(driver_drift_moves, "measured evictions that found pages the driver had already evicted behind hoff's books")   \
    X(driver_drift_bytes, "bytes those evictions found the driver had already evicted")                               \
    X(device_foreign_bytes, "at the last step's end: device memory in use that is not a live hoff block")             \
    X(plan_pending, "1 while a plan is being made on the planning thread")                                            \
    X(plan_online_steps, "steps run under the online policy while a plan was made")                                   \
    X(plan_lag_steps, "steps that ran between the last plan's recording and its first use")                           \
    X(plan_lag_ns, "time from the last plan's recording to its being ready for use")                                  \
    X(plan_wait_ns, "time the training thread waited for planning (0 with the planning thread)")                      \
    X(plans_dropped, "plans made in the background and thrown away (config changed, shutdown)")                       \
    X(manual_groups, "manual swap groups that exist now (hoff_group(3))")                                             \
    X(manual_blocks, "blocks in manual swap groups now: outside the plan, inside the budget")                         \
    X(manual_refusals, "manual group moves refused whole: the budget or the host tier could not take the group")      \
    X(manual_aborts, "manual groups aborted (their transfers waited for, nothing lost)")                              \
    X(touch_faults, "sim: blocks paged in because host code touched them while away (hoff_sim_touch)")                \
    X(discard_touches, "uses of a live block hoff released (a read mark; on sim also a fault): its bytes are lost")   \
    X(rank, "this process's rank in its job (RANK; 0 without one)")                                                   \
    X(world_size, "ranks in the job (WORLD_SIZE; 1 without one)")                                                     \
    X(local_rank, "rank on this node (LOCAL_RANK; 0 without one)")                                                    \
    X(device, "the CUDA device (ordinal) this context allocates on")                                                  \
    X(capture_allocs, "allocations made while their stream was capturing a CUDA graph (device pool, graph-private)")  \
    X(graph_private_bytes, "device-pool bytes held for captured CUDA graphs (never reused outside a capture)")        \
    X(deferred_frees, "device-pool frees held until the whole device passed them (HOFF_FREE_FENCE=device)")           \
    X(deferred_bytes, "device-pool bytes freed and waiting for the device to pass the free")                          \
    X(free_fence_syncs, "device-wide synchronisations that released deferred frees")                                  \
    X(side_stream_allocs,                                                                                             \
      "allocations inside steps on another stream than the step's (hoff_step_stream): device pool")                   \
    X(plan_floor_phase, "enum hoff_phase of the op that sets the working-set floor")                                  \
    X(plan_floor_blocks, "blocks in use on the device at the working-set floor")                                      \
    X(keep_marks, "hoff_keep calls that took a managed block out of the budget (gradients, optimizer blocks)")        \
    X(kept_bytes, "bytes those calls took out of the budget")                                                         \
    X(kept_evicted, "kept blocks that had been moved before hoff_keep named them (brought back first)")               \
    X(kept_allocs, "allocations of blocks the recorded step kept: device pool, outside the budget")                   \
    X(keep_ignored, "hoff_keep calls ignored because offload_gradients is set")                                       \
    X(recorded_peak_bytes, "the last recorded step's peak of offload bytes with no offload, kept blocks not counted") \
    X(graph_pool_begins, "captures begun into a named graph pool (PyTorch's beginAllocateToPool)")                    \
    X(graph_pool_releases, "graph pool releases (PyTorch's releasePool: a graph of the pool destroyed)")              \
    X(graph_released_bytes, "graph-private bytes made reusable because their pool's graphs were all released")        \
    X(peak_in_use_bytes, "highest device_in_use_bytes + managed_in_use_bytes (since start or hoff_reset_peaks)")      \
    X(peak_pool_bytes, "highest device_pool_bytes + managed_pool_bytes (since start or hoff_reset_peaks)")

struct hoff_stats {
    uint32_t version; /* HOFF_STATS_VERSION */
    uint32_t size;    /* sizeof(struct hoff_stats) */
#define HOFF_STATS_X_(name, desc) uint64_t name;
    HOFF_STATS_FIELDS(HOFF_STATS_X_)
#undef HOFF_STATS_X_
};

/* Snapshot the counters. */
HOFF_API int hoff_stats_get(hoff_ctx *ctx, struct hoff_stats *out);

/* Set the peaks (peak_resident_bytes, peak_host_bytes, peak_nvme_bytes,
 * peak_in_use_bytes, peak_pool_bytes) to the current figures, as
 * torch.cuda.reset_peak_memory_stats does; step_peak_resident_bytes is the
 * step's own and restarts at each step.  0, or -EINVAL for a NULL context. */
HOFF_API int hoff_reset_peaks(hoff_ctx *ctx);

/* Write the counters as one JSON object into buf (NUL-terminated).  Returns
 * the length the full object needs (excluding the NUL), like snprintf, or
 * -errno. */
HOFF_API int hoff_stats_json(hoff_ctx *ctx, char *buf, size_t len);

/* Where the current plan's working-set floor comes from, as one JSON object
 * into buf (snprintf semantics, like hoff_stats_json): {"bytes":N,
 * "blocks":N,"op":"...","phase":"forward|backward|loss|optimizer|none",
 * "advice":"..."}: the floor's bytes and blocks on the device, the op mark
 * that ends the use windows open there (the op that reached the floor when
 * marks follow their op, as the Python package's do), its phase, and what
 * the floor is and what would lower it.  Before the first plan every field
 * is 0 or empty.  Returns the full length, or -errno. */
HOFF_API int hoff_floor_json(hoff_ctx *ctx, char *buf, size_t len);

/* Format a stats struct as JSON without a context (for tools). */
HOFF_API int hoff_stats_format_json(const struct hoff_stats *st, char *buf, size_t len);

/* ---------------------------------------------------------------------------
 * PyTorch entry points (hoff_torch(3)).
 *
 * For torch.cuda.memory.CUDAPluggableAllocator(libhoff.so, "hoff_torch_alloc",
 * "hoff_torch_free") and the optional hooks of its C++ class (set_init_fn,
 * set_reset_fn, set_memory_fraction_fn, set_record_stream_fn and the graph
 * pool hooks).  They share
 * one process-wide context per CUDA device (0 to 63), created on first use
 * with the configuration from the HOFF_* environment and hoff_torch_configure.
 * A stream is a cudaStream_t (void * here, so this header needs no CUDA).
 * ------------------------------------------------------------------------- */

/* alloc_fn: size bytes on device for stream; NULL for size 0 and on failure
 * (hoff logs why once, hoff_last_error() says it): errno ENOMEM for a failure
 * PyTorch should report as out of memory (counted in num_ooms), ENODEV when
 * the device has no context. */
HOFF_API void *hoff_torch_alloc(ssize_t size, int device, void *stream);
/* free_fn: ptr as returned by hoff_torch_alloc; size, the size PyTorch
 * allocated, only feeds hoff_torch_memory_stats_json's requested bytes. */
HOFF_API void hoff_torch_free(void *ptr, ssize_t size, int device, void *stream);
/* init_fn: PyTorch's device count; reports a bad HOFF_* variable now. */
HOFF_API void hoff_torch_init(int device_count);
/* reset_fn (torch.cuda.empty_cache): return cached blocks of every device. */
HOFF_API void hoff_torch_empty_cache(void);
/* memory_fraction_fn: the budget of device becomes fraction (0 < f <= 1) of
 * its memory; the next step records and plans again. */
HOFF_API void hoff_torch_set_memory_fraction(double fraction, int device);
/* record_stream_fn: ptr is also used on stream; its free waits until the
 * work queued there by then is done (checked at later allocations/frees). */
HOFF_API void hoff_torch_record_stream(void *ptr, void *stream);
/* The context of device (created if needed), for step, region and access
 * marks; NULL with hoff_last_error() when it cannot be created. */
HOFF_API hoff_ctx *hoff_torch_context(int device);
/* Set an option (hoff_config_set's names and forms) for device, or every
 * device if -1: it applies to the device's context when it is created (-1:
 * every context created later) and, for budget, host_cap, planner and
 * log_level, to a live context at once (after a change of budget, host_cap
 * or planner the next step records and plans again).  Other options: -EBUSY
 * once the context exists.
 * -EINVAL/-ENOENT with the message in err as hoff_config_set. */
HOFF_API int hoff_torch_configure(int device, const char *name, const char *value, char *err, size_t errlen);
/* Check name=value the way hoff_torch_configure would, changing nothing.
 * Both write into err (deprecated) a copy of hoff_last_error()'s message. */
HOFF_API int hoff_torch_config_check(const char *name, const char *value, char *err, size_t errlen);
/* torch.cuda.reset_peak_memory_stats: hoff_reset_peaks on device's context.
 * 0 (also when the device has no context yet), -ENODEV for a device out of
 * range. */
HOFF_API int hoff_torch_reset_peaks(int device);

/* CUDA graph pools, for the hooks set_begin_allocate_to_pool,
 * set_end_allocate_to_pool_fn and set_release_pool (a pool id is PyTorch's
 * MempoolId_t: {first, second}; {0, 0} names no pool).  The caller (a C++
 * shim) evaluates the begin hook's stream filter itself and, around each
 * allocation the filter selects, calls hoff_torch_graph_pool_use(id0, id1)
 * before hoff_torch_alloc and hoff_torch_graph_pool_use(0, 0) after, on the
 * same thread.
 *
 * use: the calling thread's allocations made during a capture belong to pool
 * {id0, id1} from now on (thread-local; any context). */
HOFF_API void hoff_torch_graph_pool_use(uint64_t id0, uint64_t id1);
/* begin / end: a capture into the pool starts / ends on device (counted;
 * each begin is one more graph the pool's memory serves until a release). */
HOFF_API void hoff_torch_graph_pool_begin(int device, uint64_t id0, uint64_t id1);
HOFF_API void hoff_torch_graph_pool_end(int device, uint64_t id0, uint64_t id1);
/* release: a graph of the pool was destroyed.  Once every graph captured into
 * it is (as many releases as begins), its graph-private blocks freed after
 * their capture are reused by later captures, after a device-wide
 * synchronisation, and torch.cuda.empty_cache gives them back.  An unknown
 * pool is harmless. */
HOFF_API void hoff_torch_graph_pool_release(int device, uint64_t id0, uint64_t id1);
/* torch.cuda.memory_stats's figures that hoff counts at these entry points,
 * for device: {"allocation": S, "allocated_bytes": S, "requested_bytes": S,
 * "num_ooms": n}, each S {"current", "peak", "allocated", "freed"} as
 * PyTorch's Stat (allocations; hoff's block bytes; the bytes PyTorch asked
 * for, the size it passes to free_fn).  Into buf (len bytes, NUL-terminated
 * when len > 0) as snprintf: returns the full length, or -errno (-ENODEV for
 * a device outside 0..63). */
HOFF_API int hoff_torch_memory_stats_json(int device, char *buf, size_t len);
/* torch.cuda.reset_accumulated_memory_stats: the "allocated" and "freed"
 * figures above and num_ooms become 0.  0, or -ENODEV. */
HOFF_API int hoff_torch_reset_accumulated(int device);
/* The message of PyTorch's out-of-memory error for a failed allocation of
 * size bytes on device, in PyTorch's shape ("CUDA out of memory. Tried to
 * allocate ...", the device's capacity and free memory), then why hoff
 * failed (hoff_last_error: call it on the failing thread) and hoff's figures.
 * Into buf (NUL-terminated, truncated to len).  0, or -EINVAL. */
HOFF_API int hoff_torch_oom_text(int device, size_t size, char *buf, size_t len);

/* ---------------------------------------------------------------------------
 * Errors.
 * ------------------------------------------------------------------------- */

/* hoff's own error codes, returned negated like a -errno (above any errno
 * value, so never confused with what the OS says). */
#define HOFF_EBUDGET 10001  /* the device budget cannot hold the block and nothing can be evicted */
#define HOFF_EHOSTCAP 10002 /* the host tier is at its cap (HOFF_HOST_CAP) and nothing can be spilled */

/* Text for a -errno or -HOFF_E* returned by hoff: hoff's own meaning where
 * it has one, else what the OS says (strerror). */
HOFF_API const char *hoff_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* HOFF_H */
