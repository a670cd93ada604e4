/* dbl.h — the CUDA runtime double's internal state, shared by its files: devices, allocations and
 * their 2 MiB managed pages, streams with vector clocks, events with record generations, checks.
 * Threading: everything below is guarded by G.lock (one lock for the whole double) unless a field
 * says otherwise; stream workers take it around every state change. */
#ifndef DBL_H
#define DBL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "hoffdbl.h"

/* The entry points are the legacy-default-stream names the header declares without
 * CUDA_API_PER_THREAD_DEFAULT_STREAM (cudaMemcpy, not cudaMemcpy_ptds). */
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error \
    "the CUDA runtime double implements the legacy default stream only: build it without CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

#define DBL_MAXDEV 8
#define DBL_MAXS 2048              /* streams ever created (ids are never reused: clocks) */
#define DBL_PAGE ((size_t)2 << 20) /* the driver's migration unit (UVM_VA_BLOCK_SIZE) */
#define DBL_HOST (-1)
#define DBL_NONE (-2)

/* A vector clock over stream ids (entry i: ops of stream i ordered before). */
struct dbl_vc {
    uint32_t v[DBL_MAXS];
};

/* A declared access or a discard of a page: the stream and its clock entry at enqueue. */
struct dbl_epoch {
    uint16_t sid;
    uint8_t write;
    uint32_t at;
};

/* A prefetch (eviction included) or discard of bytes [lo, hi) of a page, enqueued as op `at` of stream
 * `sid`: what the discard/prefetch rule (cudaMemDiscardBatchAsync: a prefetch concurrent with a discard
 * of any part of the range is undefined) checks, on exact bytes. */
struct dbl_xop {
    uint16_t sid;
    uint8_t kind; /* DBL_X_PREFETCH | DBL_X_DISCARD */
    uint32_t at;
    uint32_t lo, hi;
};

#define DBL_X_PREFETCH 1
#define DBL_X_DISCARD 2
#define DBL_XOP_MAX 32 /* remembered per page (the oldest go: races may be missed, none is invented) */

struct dbl_page {
    int8_t loc;       /* device, DBL_HOST or DBL_NONE (discarded / never populated) */
    int8_t hold;      /* device whose memory the page holds (resident or discarded), or -1 */
    int8_t lp_type;   /* last prefetch location (enum cudaMemLocationType, 0: none) */
    int8_t pref_type; /* preferred location (advice), 0: none */
    int lp_id, pref_id;
    uint64_t lru; /* last use tick on the device */
    uint16_t nacc, ndis, nmov, nxop;
    struct dbl_epoch *acc; /* last declared access per stream */
    struct dbl_epoch *dis; /* last discard per stream */
    struct dbl_epoch *mov; /* last prefetch (eviction or not) per stream */
    struct dbl_xop *xop;   /* prefetches and discards the host has not synchronised with */
};

enum dbl_kind { DBL_DEVICE = 1, DBL_MANAGED, DBL_PINNED };

/* A declared access of a range of plain device memory (cudaMalloc): the race check there works on
 * exact byte ranges, since the allocator carves small blocks out of one mapping. */
struct dbl_racc {
    size_t lo, hi;
    struct dbl_epoch e;
};

/* Accesses remembered per device allocation (the oldest go: races may be missed, none is invented). */
#define DBL_RACC_MAX 64

struct dbl_alloc {
    struct dbl_racc *racc; /* DEVICE: the last accesses */
    size_t nracc;
    char *base;
    size_t size, map_size;
    enum dbl_kind kind;
    int dev;       /* DEVICE: its device */
    size_t npages; /* MANAGED */
    struct dbl_page *pages;
};

enum dbl_opkind { OP_NOP, OP_HOSTFN, OP_RECORD, OP_COPY, OP_SET, OP_MOVE, OP_KERNEL };

struct dbl_range {
    char *p;
    size_t n;
    struct cudaMemLocation loc; /* OP_MOVE: target (type 0: discard only) */
    int discard;                /* OP_MOVE: discard first */
};

struct dbl_wait {
    struct CUstream_st *s;
    uint64_t target;
};

struct dbl_op {
    enum dbl_opkind kind;
    struct dbl_op *next;
    int nwait;
    struct dbl_wait *waits;
    void (*fn)(void *);
    void *arg;
    void *dst;
    const void *src;
    size_t n;
    int value;
    struct CUevent_st *ev;
    uint64_t gen;
    int nrange;
    struct dbl_range *ranges;
    struct hoffdbl_use *use;
    int nuse;
};

struct CUstream_st {
    uint32_t magic;
    int id, dev, legacy, prio, dead;
    unsigned flags;
    uint64_t enq, done; /* ops enqueued / completed; clock.v[id] == enq */
    int cap;            /* being captured into a graph: its ops are recorded, never run */
    enum cudaStreamCaptureMode capmode;
    uint64_t capid; /* the capture's id (unique per BeginCapture) */
    struct dbl_op *head, *tail;
    pthread_t th;
    struct dbl_vc clock;
};

struct CUevent_st {
    uint32_t magic;
    int dev, dead, pending; /* pending: record ops not yet run (a destroyed event lives on) */
    unsigned flags;
    uint64_t gen;          /* records so far; the last one is what calls refer to */
    struct CUstream_st *s; /* stream of the last record (NULL: never recorded) */
    uint64_t target;       /* its position on s */
    uint64_t t_ns;         /* when the record of generation `gen` ran (0: not yet) */
    uint64_t capid;        /* recorded into that capture (0: a real record) */
    uint32_t *vc;          /* s's clock at the last record (nvc entries: the streams then) */
    int nvc;
};

#define DBL_SMAGIC 0x5354524du
#define DBL_EMAGIC 0x45564e54u

/* A sorted set of (start, length, item): allocations, freed ranges, events. */
struct dbl_item {
    uintptr_t lo, len;
    void *item;
};
struct dbl_set {
    size_t n, cap;
    struct dbl_item *v;
};

struct dbl_inject {
    char call[48];
    cudaError_t e;
    int times;
};

struct dbl_state {
    pthread_mutex_t lock;
    pthread_cond_t cv; /* broadcast on every enqueue and completion */
    int ready;
    int ndev, numa_nodes, strict;
    uint64_t cap;
    double gbps;
    int ctx[DBL_MAXDEV];
    uint64_t dev_used[DBL_MAXDEV]; /* cudaMalloc bytes */
    uint64_t held[DBL_MAXDEV];     /* managed page bytes held (resident + discarded) */
    int nstreams;
    struct CUstream_st *streams[DBL_MAXS];
    struct CUstream_st *legacy[DBL_MAXDEV];
    struct dbl_vc host; /* what every host thread has synchronised with */
    struct dbl_set allocs, freed, events;
    uint64_t tick;
    cudaError_t sticky;
    struct dbl_inject inj[32];
    int allow[8]; /* per check kind: failures that only count */
    struct hoffdbl_stats st;
    uint64_t ncalls[64];   /* entries per runtime function (dbl_calls' index) */
    int ncap, ncap_global; /* streams capturing now; of them in cudaStreamCaptureModeGlobal */
    uint64_t next_capid;
};

extern struct dbl_state G;

/* Check kinds (HOFFDBL_ALLOW=kind:n,... lets n of a kind count without aborting). */
enum dbl_check {
    CHK_POINTER,    /* freed or foreign pointer */
    CHK_RANGE,      /* range outside a managed allocation */
    CHK_RACE,       /* discard racing a declared access, or a prefetch of the same bytes */
    CHK_DEVICE,     /* stream/event of another device than the current one */
    CHK_UNRECORDED, /* query, sync or wait on an event never recorded */
    CHK_STALE,      /* a launch check found a stale error */
    CHK_HANDLE,     /* destroyed or unknown stream/event handle */
    CHK_CAPTURE,    /* a call CUDA refuses during stream capture (managed memory, a sync, ...) */
    CHK_N
};

/* dbl_check.c */
void dbl_init_locked(void);
cudaError_t dbl_enter(const char *call); /* locks G.lock; returns an injected/sticky error */
cudaError_t dbl_ret(cudaError_t e);      /* records e as the thread's last error, unlocks */
/* The first statement of every runtime entry point: dbl_enter, and return its error if it has one. */
#define ENTER(name)                       \
    do {                                  \
        cudaError_t e_ = dbl_enter(name); \
        if (e_ != cudaSuccess)            \
            return dbl_ret(e_);           \
    } while (0)
int dbl_hard(enum dbl_check k, const char *call, const void *p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int dbl_cur_dev(void);
void dbl_set_cur_dev(int d);
void dbl_need_ctx(void);
const char *dbl_err_name(cudaError_t e);
const char *dbl_err_text(cudaError_t e);
cudaError_t dbl_last_take(int clear);

/* dbl_set (dbl_check.c) */
int dbl_set_add(struct dbl_set *s, uintptr_t lo, uintptr_t len, void *item);
void *dbl_set_find(const struct dbl_set *s, uintptr_t p, size_t *idx);
void dbl_set_del(struct dbl_set *s, size_t idx);

/* dbl_sched.c */
struct CUstream_st *dbl_stream_get(cudaStream_t s, const char *call, cudaError_t *e);
struct CUstream_st *dbl_stream_new(int dev, unsigned flags, int prio, int legacy);
struct dbl_op *dbl_op_new(enum dbl_opkind k);
void dbl_enqueue(struct CUstream_st *s, struct dbl_op *op);
void dbl_host_join(const uint32_t *v, int n);
void dbl_event_free(struct CUevent_st *ev);
void dbl_wait_stream(struct CUstream_st *s, uint64_t target);
void dbl_sync_all(int dev); /* dev < 0: every device */
int dbl_vc_before(const struct dbl_vc *c, const struct dbl_epoch *e);
uint64_t dbl_now_ns(void);
void dbl_model_time(size_t bytes);

/* cudart_graph.c */
/* A call that CUDA refuses while a stream captures in the global mode (it may synchronise: cudaMalloc,
 * cudaFree, device synchronisation) unless this thread switched to the relaxed mode: a hard error
 * and 1 (the call returns cudaErrorStreamCaptureUnsupported), else 0. */
int dbl_capture_unsafe(const char *call);
/* A call that CUDA refuses on a capturing stream, or (managed memory) during any capture: a hard
 * error and 1, else 0.  s may be NULL (not stream-ordered). */
int dbl_capture_refuses(const char *call, const struct CUstream_st *s, const char *what);

/* dbl_mem.c */
/* Declared access of [p, p+n) of device allocation a by s's newest op: the race check. */
void dbl_dev_access(struct CUstream_st *s, struct dbl_alloc *a, const void *p, size_t n, int write, const char *call);
struct dbl_alloc *dbl_alloc_find(const void *p);
struct dbl_alloc *dbl_alloc_new(enum dbl_kind kind, size_t size, int dev);
const char *dbl_ptr_what(const void *p);
int dbl_managed_range(const char *call, const void *p, size_t n, struct dbl_alloc **out);
int dbl_room(int dev, uint64_t need, const struct dbl_alloc *keep_a, size_t keep_lo, size_t keep_hi);
size_t dbl_page_bytes(const struct dbl_alloc *a, size_t i);
void dbl_pages_enqueued(struct CUstream_st *s, struct dbl_alloc *a, size_t lo, size_t hi, int what, int write,
                        const char *call);
/* Record that s's newest op prefetches and/or discards (kind: DBL_X_*) bytes [p, p+n) of managed
 * allocation a, and check it against the prefetches and discards of overlapping bytes on other
 * streams not ordered before it (a hard error: a discard and a prefetch of the same bytes must not
 * run concurrently). */
void dbl_xop_enqueued(struct CUstream_st *s, struct dbl_alloc *a, const char *p, size_t n, int kind, const char *call);
void dbl_run_move(struct dbl_op *op, int dev);
void dbl_run_kernel(struct dbl_op *op, int dev);
void dbl_touch_copy(void *p, size_t n, int dev);
void dbl_alloc_destroy(struct dbl_alloc *a);
int dbl_loc_ok(struct cudaMemLocation loc);
uint64_t dbl_dev_free(int dev);

/* What dbl_pages_enqueued records. */
#define DBL_ACCESS 1
#define DBL_DISCARD 2
#define DBL_MOVE 3

#endif
