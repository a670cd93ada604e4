/* trace.h — the trace IR: one recorded step of allocator events (alloc, free, access, op and region marks)
 * with times, per-block facts derived from them, and the text file format's reader and writer.
 * Threading: a trace is owned by one thread at a time; nothing here locks. */
#ifndef HOFF_TRACE_H
#define HOFF_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HOFF__TRACE_VERSION 1
#define HOFF__TIME_UNKNOWN UINT64_MAX
/* The longest step a trace may record and a simulation may model: 10^15 ns,
 * about 11.6 days.  A time past it cannot be on a step's clock: the reader
 * refuses it (trace_parse.c), and the driver refuses a scale that would model a
 * step past it (drive.c), so the sim's 64-bit clock never saturates. */
#define HOFF__STEP_NS_MAX 1000000000000000ull
#define HOFF__STEP_NS_MAX_TEXT "10^15 ns (11.6 days, the longest step hoff models)"

enum hoff__tev_kind {
    HOFF__TEV_ALLOC = 0,    /* block, size, pool, stream; a write of the whole block */
    HOFF__TEV_FREE,         /* block, stream */
    HOFF__TEV_ACCESS,       /* block; flags HOFF__TEV_WRITE for a write, else a read */
    HOFF__TEV_OP,           /* an op boundary; name (may be NULL) */
    HOFF__TEV_REGION_BEGIN, /* allocations until the matching end are never evicted */
    HOFF__TEV_REGION_END,
    HOFF__TEV_KIND_COUNT
};

#define HOFF__TEV_WRITE 1u  /* access: a write */
#define HOFF__TEV_PINNED 2u /* alloc: inside a region, never evicted */
/* alloc: kept later in the step (hoff_keep): not an activation; the plan counts it as device memory from its
 * allocation */
#define HOFF__TEV_KEPT 4u
/* op: the phase of the op the mark ends (enum hoff_phase, 0 = not said), in bits 3-5 */
#define HOFF__TEV_PHASE_SHIFT 3
#define HOFF__TEV_PHASE_MASK (7u << HOFF__TEV_PHASE_SHIFT)

/* pool of an allocation, as in block.h: 0 device pool, 1 managed pool */

struct hoff__tev {
    uint8_t kind;      /* enum hoff__tev_kind */
    uint8_t pool;      /* alloc: 0 device, 1 managed */
    uint8_t flags;     /* HOFF__TEV_* */
    uint32_t block;    /* alloc/free/access: block id, dense from 0 in order of allocation */
    uint32_t name;     /* op: index into trace->names, or UINT32_MAX */
    uint64_t size;     /* alloc: bytes asked for */
    uint64_t stream;   /* alloc/free/access: stream (opaque value) */
    uint64_t t_cpu_ns; /* host time since the step began */
    uint64_t t_gpu_ns; /* device-timeline estimate since the step began, or HOFF__TIME_UNKNOWN */
};

static inline unsigned hoff__tev_phase(const struct hoff__tev *e) {
    return (e->flags & HOFF__TEV_PHASE_MASK) >> HOFF__TEV_PHASE_SHIFT;
}

/* Facts about one block, derived by hoff__trace_finish(). */
struct hoff__tblock {
    uint64_t size;         /* bytes asked for */
    uint8_t pool;          /* the pool the plan counts it in: its allocation's, but 0 (device) when
                              kept */
    uint8_t pinned;        /* allocated inside a region */
    uint8_t kept;          /* kept (HOFF__TEV_KEPT): not an activation, never a candidate */
    uint8_t retained;      /* alive at step end (persistent): never freed in the step */
    uint32_t alloc_ev;     /* index of its alloc event */
    uint32_t free_ev;      /* index of its free event, or UINT32_MAX if retained */
    uint32_t first_access; /* index into trace->acc of its first access (its alloc counts) */
    uint32_t naccess;      /* number of accesses (alloc, accesses; the free is not one) */
};

/* One access of a block, in event order per block (built by hoff__trace_finish). */
struct hoff__tacc {
    uint32_t ev;    /* event index */
    uint32_t close; /* the event that closes the access's use window (doc/design.md, "Use
                       windows"): the first op mark after ev, else the block's free, else
                       nev (the step's end).  The block is in use, and must be resident,
                       on events ev .. close - 1. */
    uint8_t write;  /* 1 for a write (the alloc is a write) */
};

struct hoff__trace {
    uint32_t version;     /* HOFF__TRACE_VERSION */
    struct hoff__tev *ev; /* events in order */
    size_t nev, cap_ev;
    char **names; /* op names */
    uint32_t nnames, cap_names;
    uint32_t nblocks;      /* block ids are 0..nblocks-1 */
    uint64_t budget_bytes; /* the budget when recorded (0 = none) */
    uint64_t host_cap_bytes;
    double h2d_gbps, d2h_gbps; /* measured or configured bandwidths */
    uint64_t step_ns;          /* duration of the recorded step (cpu clock; gpu below if known) */
    uint64_t step_gpu_ns;
    char backend[16]; /* "sim", "cuda", "record" (hoff-record), ... */
    /* Derived by hoff__trace_finish(): */
    struct hoff__tblock *blocks; /* nblocks entries */
    struct hoff__tacc *acc;      /* every block's accesses, grouped by block */
    size_t nacc;
    int has_access_events; /* the trace carries explicit HOFF__TEV_ACCESS events */
    int has_op_events;     /* ...and op marks (without them every window lasts to the free) */
};

void hoff__trace_init(struct hoff__trace *t);
void hoff__trace_destroy(struct hoff__trace *t);
/* Append an event (the caller fills it; block ids of allocs must be nblocks,
 * then nblocks grows).  -ENOMEM, -EINVAL for a bad event (a free or access of
 * an unknown or freed block, a second alloc of an id, a region end without a
 * begin). */
int hoff__trace_append(struct hoff__trace *t, const struct hoff__tev *e);
/* Intern an op name, returning its index (or UINT32_MAX on -ENOMEM). */
uint32_t hoff__trace_name(struct hoff__trace *t, const char *name);
/* Close the step: blocks never freed are retained; build blocks[] and acc[]
 * (with each access's use window).
 * -EINVAL with a message if the trace is inconsistent (unbalanced regions). */
int hoff__trace_finish(struct hoff__trace *t);

/* The pools hoff__trace_peak counts (bit pool). */
#define HOFF__POOLS_DEVICE 1u
#define HOFF__POOLS_MANAGED 2u
#define HOFF__POOLS_ALL 3u

/* The one walk of live bytes over a trace without a schedule: the peak of
 * the bytes of the live blocks of the given pools, and the first event where
 * it is reached.  A block counts from its alloc through its free event.
 * bytes(pool, size) gives what a block holds (hoff__pool_block_bytes for
 * hoff's size classes and the 2 MiB managed grain: what the runtime and the
 * budget count); NULL counts the size asked for. */
uint64_t hoff__trace_peak(const struct hoff__trace *t, uint64_t (*bytes)(int pool, uint64_t size), unsigned pools,
                          size_t *at_ev);
/* The managed pool's peak (the no-offload peak of resident offload bytes,
 * pinned ones included, as the budget counts them). */
uint64_t hoff__trace_offload_peak(const struct hoff__trace *t, uint64_t (*bytes)(int pool, uint64_t size),
                                  size_t *at_ev);

/* An event kind's name as tools print it: alloc, free, read, write, op,
 * region_begin, region_end ("?" for anything else). */
const char *hoff__tev_kind_name(const struct hoff__tev *e);
/* An op event's name, "" when it has none. */
const char *hoff__tev_op_name(const struct hoff__trace *t, const struct hoff__tev *e);
/* dst = a finished copy of the finished trace src (events, names, header).
 * dst is initialised here; on failure it holds what was copied (destroy it).
 * 0 or -ENOMEM, -EINVAL. */
int hoff__trace_copy(struct hoff__trace *dst, const struct hoff__trace *src);
/* dst's header (budget, host cap, bandwidths, step times, backend) and op names as src's, with the same name
 * indices, into an empty dst (hoff__trace_init), before its events.  0 or -ENOMEM. */
int hoff__trace_copy_header(struct hoff__trace *dst, const struct hoff__trace *src);

/* The word an op line carries for a phase (enum hoff_phase 1..4: "fwd", "bwd",
 * "loss", "opt"; "" for 0 or out of range), and the phase of a word (-1 if none). */
const char *hoff__trace_phase_word(unsigned phase);
int hoff__trace_phase_of_word(const char *w, size_t n);

/* Text format (doc/trace-format.md).  write: 0 or -errno.  read: 0, or
 * -EINVAL with "LINE:COL: expected ..." in err (and hoff_last_error), -EIO,
 * -ENOMEM.  The reader takes a plain or gzip-compressed file when built with
 * zlib.  read calls hoff__trace_finish. */
int hoff__trace_write(const struct hoff__trace *t, FILE *f);
int hoff__trace_save(const struct hoff__trace *t, const char *path);
int hoff__trace_read(struct hoff__trace *t, FILE *f, char *err, size_t errlen);
int hoff__trace_load(struct hoff__trace *t, const char *path, char *err, size_t errlen);
/* Parse from memory (for the fuzzer). */
int hoff__trace_parse(struct hoff__trace *t, const char *buf, size_t len, char *err, size_t errlen);

#endif
