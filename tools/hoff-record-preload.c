/* hoff-record-preload.c — libhoff-record.so, the LD_PRELOAD half of hoff-record(1): wraps the C allocator, keeps a
 * table of the live host allocations of at least the threshold, and writes one step of them as a hoff trace.
 * Threading: any thread; one mutex guards the table and the trace; a thread-local flag sends the recorder's own
 * allocations (and anything it calls) straight to glibc, so nothing recurses. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/rank.h"
#include "preload.h"
#include "trace/trace.h"

#define EXPORT __attribute__((visibility("default")))

/* glibc's own entry points: no dlsym, so no bootstrap allocation problem. */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

#define NO_ID UINT32_MAX

/* --- state ------------------------------------------------------------------ */

/* The recorder's own calls (and glibc's from inside them) pass straight through. */
static __thread int in_rec __attribute__((tls_model("initial-exec")));

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

enum { MODE_OFF = 0, MODE_WHOLE, MODE_MARKS };

struct entry {
    void *ptr; /* NULL empty, TOMB deleted */
    uint64_t size;
    uint64_t seq; /* serial of the allocation, from 1, over the process's life */
    uint32_t id;  /* block id in the trace being recorded, or NO_ID */
};
#define TOMB ((void *)1)

static struct {
    int mode;  /* MODE_OFF until the constructor has read the environment */
    int child; /* a fork()ed child: tracks nothing, writes nothing */
    uint64_t threshold;
    long record_step; /* which marked step to record (0-based) */
    char output[4096];
    char status[4096];      /* HOFF_RECORD_STATUS: a line per written trace goes here ("" = none) */
    struct hoff__rank rank; /* RANK / WORLD_SIZE: %r in the output path */
    int quiet;
    /* live tracked allocations */
    struct entry *tab;
    size_t cap, count, tombs;
    uint64_t seq;
    uint64_t live_bytes, peak_live_bytes;
    /* steps */
    long steps_begun, steps_ended;
    int in_step;
    int recording; /* the trace below is being filled */
    int written;   /* the trace has been written */
    int failed;    /* recording failed (out of memory): nothing will be written */
    int regions;   /* open regions in the recording */
    int phase;     /* enum hoff_phase of the op marks to come (hoff_record_set_phase) */
    uint64_t kept; /* blocks of the recording flagged kept (hoff_record_keep) */
    uint64_t t0;
    struct hoff__trace trace;
} R;

static uint64_t now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void say(const char *fmt, ...) HOFF__PRINTF(1, 2);
static void say(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    int n;

    if (R.quiet)
        return;
    n = snprintf(buf, sizeof buf, "hoff-record[%ld]: ", (long)getpid());
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    n = (int)strlen(buf);
    if (n < (int)sizeof buf - 1)
        buf[n++] = '\n';
    if (write(2, buf, (size_t)n) < 0) {
        /* nothing to do */
    }
}

/* --- the table (open addressing over mmap'd memory) --------------------------- */

static size_t slot_of(const void *p, size_t cap) {
    uint64_t v = (uint64_t)(uintptr_t)p;

    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdull;
    v ^= v >> 33;
    return (size_t)v & (cap - 1);
}

static int tab_grow(void) {
    size_t ncap = R.cap ? R.cap * 2 : 4096, i;
    struct entry *n;

    if (R.cap && (R.count + 1) * 4 < R.cap) /* mostly tombstones: rebuild at the same size */
        ncap = R.cap;
    n = mmap(NULL, ncap * sizeof *n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (n == MAP_FAILED)
        return -ENOMEM;
    for (i = 0; i < R.cap; i++) {
        struct entry *e = &R.tab[i];
        size_t s;

        if (!e->ptr || e->ptr == TOMB)
            continue;
        for (s = slot_of(e->ptr, ncap); n[s].ptr; s = (s + 1) & (ncap - 1))
            ;
        n[s] = *e;
    }
    if (R.tab)
        munmap(R.tab, R.cap * sizeof *R.tab);
    R.tab = n;
    R.cap = ncap;
    R.tombs = 0;
    return 0;
}

static struct entry *tab_find(const void *p) {
    size_t s;

    if (!R.count)
        return NULL;
    for (s = slot_of(p, R.cap); R.tab[s].ptr; s = (s + 1) & (R.cap - 1))
        if (R.tab[s].ptr == p)
            return &R.tab[s];
    return NULL;
}

static struct entry *tab_insert(void *p) {
    size_t s;

    if ((R.count + R.tombs + 1) * 2 > R.cap && tab_grow() != 0)
        return NULL;
    for (s = slot_of(p, R.cap); R.tab[s].ptr && R.tab[s].ptr != TOMB; s = (s + 1) & (R.cap - 1))
        ;
    if (R.tab[s].ptr == TOMB)
        R.tombs--;
    R.tab[s].ptr = p;
    R.count++;
    return &R.tab[s];
}

static void tab_remove(struct entry *e) {
    e->ptr = TOMB;
    R.count--;
    R.tombs++;
}

/* --- events -------------------------------------------------------------------- */

static void fail(int rc) {
    if (!R.failed)
        say("recording failed (%s: %s); no trace will be written", hoff_strerror(rc), hoff_last_error());
    R.failed = 1;
    R.recording = 0;
}

static void append(struct hoff__tev *ev) {
    int rc;

    ev->t_cpu_ns = now_ns() - R.t0;
    ev->t_gpu_ns = HOFF__TIME_UNKNOWN;
    rc = hoff__trace_append(&R.trace, ev);
    if (rc)
        fail(rc);
}

static void start_recording(void) {
    size_t i;

    hoff__trace_destroy(&R.trace);
    hoff__trace_init(&R.trace);
    R.kept = 0;
    snprintf(R.trace.backend, sizeof R.trace.backend, "record");
    for (i = 0; i < R.cap; i++)
        if (R.tab[i].ptr && R.tab[i].ptr != TOMB)
            R.tab[i].id = NO_ID; /* blocks from before the step are not its events */
    R.regions = 0;
    R.t0 = now_ns();
    R.recording = 1;
}

static void on_alloc(void *p, size_t size) {
    struct entry *e = tab_insert(p);

    if (!e) {
        fail(-ENOMEM);
        return;
    }
    e->size = size;
    e->seq = ++R.seq;
    e->id = NO_ID;
    R.live_bytes += size;
    if (R.live_bytes > R.peak_live_bytes)
        R.peak_live_bytes = R.live_bytes;
    if (R.recording) {
        struct hoff__tev ev;

        memset(&ev, 0, sizeof ev);
        ev.kind = HOFF__TEV_ALLOC;
        ev.block = R.trace.nblocks;
        ev.name = UINT32_MAX;
        ev.size = size;
        /* Every recorded block is an offload candidate (hoff-record(1)), but inside a region, where
         * hoff_malloc's rule puts it in the device pool (the optimizer's step: hoff.grads). */
        ev.pool = R.regions ? 0 : 1;
        e->id = ev.block;
        append(&ev);
    }
}

static void on_free(struct entry *e) {
    if (R.recording && e->id != NO_ID) {
        struct hoff__tev ev;

        memset(&ev, 0, sizeof ev);
        ev.kind = HOFF__TEV_FREE;
        ev.block = e->id;
        ev.name = UINT32_MAX;
        append(&ev);
    }
    R.live_bytes -= e->size;
    tab_remove(e);
}

static int active(void) {
    return R.mode != MODE_OFF && !R.child && !in_rec;
}

/* After glibc allocated p (size bytes asked for). */
static void track(void *p, size_t size) {
    if (!p || size < R.threshold || !active())
        return;
    in_rec = 1;
    pthread_mutex_lock(&lock);
    on_alloc(p, size);
    pthread_mutex_unlock(&lock);
    in_rec = 0;
}

/* Before glibc frees p. */
static void untrack(void *p) {
    struct entry *e;

    if (!p || !active() || !R.count || malloc_usable_size(p) < R.threshold)
        return; /* below the threshold: cannot be a tracked block */
    in_rec = 1;
    pthread_mutex_lock(&lock);
    if ((e = tab_find(p)) != NULL)
        on_free(e);
    pthread_mutex_unlock(&lock);
    in_rec = 0;
}

/* --- the allocator ------------------------------------------------------------- */

EXPORT void *malloc(size_t size) {
    void *p = __libc_malloc(size);

    track(p, size);
    return p;
}

EXPORT void free(void *p) {
    untrack(p);
    __libc_free(p);
}

EXPORT void *calloc(size_t n, size_t size) {
    void *p = __libc_calloc(n, size);

    if (p && (size == 0 || n <= SIZE_MAX / size))
        track(p, n * size);
    return p;
}

EXPORT void *realloc(void *old, size_t size) {
    void *p;

    if (old && size == 0) { /* glibc frees it */
        untrack(old);
        return __libc_realloc(old, size);
    }
    untrack(old); /* a moved or resized block is a new block */
    p = __libc_realloc(old, size);
    if (!p && old && size) {
        /* old is still valid and unchanged; it is just no longer tracked */
        return p;
    }
    track(p, size);
    return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    void *p;

    if (!hoff_preload_memalign_ok(align))
        return EINVAL;
    p = __libc_memalign(align, size);
    if (!p)
        return ENOMEM;
    track(p, size);
    *out = p;
    return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t size) {
    void *p;

    if (!hoff_preload_align_ok(align)) {
        errno = EINVAL;
        return NULL;
    }
    p = __libc_memalign(align, size);
    track(p, size);
    return p;
}

EXPORT void *memalign(size_t align, size_t size) {
    void *p = __libc_memalign(align, size);

    track(p, size);
    return p;
}

EXPORT void *valloc(size_t size) {
    void *p = __libc_valloc(size);

    track(p, size);
    return p;
}

EXPORT void *pvalloc(size_t size) {
    void *p = __libc_pvalloc(size);

    track(p, size);
    return p;
}

/* --- writing the trace ----------------------------------------------------------- */

/* The output path with %r replaced by the rank, %p by the pid and %% by %
 * (core/rank.h: the rule HOFF_TRACE follows too).  rec_init has checked the
 * pattern, so this cannot fail but for a path too long (then "" and a
 * message). */
static void output_path(char *buf, size_t len) {
    char err[512];

    if (hoff__path_expand(buf, len, R.output, &R.rank, "hoff-record -o", err, sizeof err) != 0) {
        say("%s", err);
        buf[0] = '\0';
    }
}

/* Tell the launcher (HOFF_RECORD_STATUS) that path was written: one line,
 * appended with a single write so that processes sharing the file do not mix
 * their lines.  hoff-record's exit status comes from this, not from looking
 * at the output path (which may be a device, a FIFO, or an older trace). */
static void report_written(const char *path) {
    char line[sizeof R.output + 64];
    int fd, n;

    if (!R.status[0])
        return;
    errno = 0;
    n = snprintf(line, sizeof line, "%ld %s\n", (long)getpid(), path);
    fd = open(R.status, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || n <= 0 || n >= (int)sizeof line || write(fd, line, (size_t)n) != n)
        say("cannot report the written trace to %s: %s", R.status, strerror(errno ? errno : EIO));
    if (fd >= 0)
        close(fd);
}

/* Close and write the recording.  Caller holds the lock with in_rec set. */
static void finish_recording(const char *what) {
    char path[sizeof R.output + 32];
    int rc;

    R.recording = 0;
    while (R.regions > 0) {
        struct hoff__tev ev;

        memset(&ev, 0, sizeof ev);
        ev.kind = HOFF__TEV_REGION_END;
        ev.block = NO_ID;
        ev.name = UINT32_MAX;
        append(&ev);
        R.regions--;
    }
    if (R.failed)
        return;
    R.trace.step_ns = now_ns() - R.t0;
    rc = hoff__trace_finish(&R.trace);
    if (rc) {
        fail(rc);
        return;
    }
    output_path(path, sizeof path);
    rc = hoff__trace_save(&R.trace, path);
    if (rc) {
        say("cannot write the trace to %s: %s", path, hoff_last_error());
        R.failed = 1;
        return;
    }
    R.written = 1;
    report_written(path);
    say("%s: %zu events, %u blocks of at least %" PRIu64 " bytes, %.3f s -> %s", what, R.trace.nev, R.trace.nblocks,
        R.threshold, (double)R.trace.step_ns / 1e9, path);
    hoff__trace_destroy(&R.trace);
    hoff__trace_init(&R.trace);
}

/* --- marks from the framework (the Python package finds these with dlsym) ----------- */

/* Run fn under the lock with the recorder's allocations passing through. */
#define MARK_BEGIN()                   \
    int saved_in_rec_ = in_rec;        \
    if (R.mode == MODE_OFF || R.child) \
        return -ENODEV;                \
    in_rec = 1;                        \
    pthread_mutex_lock(&lock)
#define MARK_END()               \
    pthread_mutex_unlock(&lock); \
    in_rec = saved_in_rec_

EXPORT int hoff_record_active(void) {
    return R.mode != MODE_OFF && !R.child;
}

EXPORT int hoff_record_step_begin(void) {
    int rc = 0;

    MARK_BEGIN();
    if (R.mode == MODE_WHOLE) { /* the first mark: from now on only the chosen step is recorded */
        R.mode = MODE_MARKS;
        R.recording = 0;
        hoff__trace_destroy(&R.trace);
        hoff__trace_init(&R.trace);
    }
    if (R.in_step) {
        rc = -EALREADY; /* a step is open: take this as the next one */
        if (R.recording)
            finish_recording("step recorded (its end was not marked)");
        R.steps_ended++;
    }
    R.in_step = 1;
    R.phase = HOFF_PHASE_NONE; /* said again by the framework, as hoff_step_begin resets it */
    if (R.steps_begun == R.record_step && !R.written && !R.failed)
        start_recording();
    R.steps_begun++;
    MARK_END();
    return rc;
}

/* Close the open step: it ended (a step being recorded is written), or it failed (aborted: a step being
 * recorded is dropped, and the next one is recorded instead).  0, -EINVAL outside a step, -ENODEV when off. */
static int close_step(int aborted) {
    int rc = 0;

    MARK_BEGIN();
    if (!R.in_step) {
        rc = -EINVAL;
    } else {
        R.in_step = 0;
        R.steps_ended++;
        if (R.recording && !aborted) {
            char what[64];
            snprintf(what, sizeof what, "step %ld recorded", R.steps_begun - 1);
            finish_recording(what);
        } else if (R.recording) {
            R.recording = 0;
            R.regions = 0;
            hoff__trace_destroy(&R.trace);
            hoff__trace_init(&R.trace);
            R.record_step = R.steps_begun; /* the next step */
            say("step %ld aborted while being recorded; recording step %ld instead", R.steps_begun - 1, R.record_step);
        }
    }
    MARK_END();
    return rc;
}

EXPORT int hoff_record_step_end(void) {
    return close_step(0);
}

/* The open step failed: if it was being recorded, record the next one instead. */
EXPORT int hoff_record_step_abort(void) {
    return close_step(1);
}

EXPORT int hoff_record_mark_op(const char *name) {
    MARK_BEGIN();
    if (R.recording) {
        struct hoff__tev ev;

        memset(&ev, 0, sizeof ev);
        ev.kind = HOFF__TEV_OP;
        ev.block = NO_ID;
        ev.name = name && *name ? hoff__trace_name(&R.trace, name) : UINT32_MAX;
        ev.flags = (uint8_t)((unsigned)R.phase << HOFF__TEV_PHASE_SHIFT);
        append(&ev);
    }
    MARK_END();
    return 0;
}

/* hoff_set_phase's counterpart: the phase of the op marks to come.  0, -EINVAL
 * for a phase outside enum hoff_phase, -ENODEV when off. */
EXPORT int hoff_record_set_phase(int phase) {
    if (phase < 0 || phase >= HOFF_PHASE_COUNT)
        return -EINVAL;
    MARK_BEGIN();
    R.phase = phase;
    MARK_END();
    return 0;
}

/* hoff_keep's counterpart: the block starting at ptr is not an activation;
 * a block of the recording gets its allocation flagged kept (the planner
 * counts it as device memory).  0, -ENOENT for a pointer that is not a
 * tracked block, -ENODEV when off. */
EXPORT int hoff_record_keep(const void *ptr) {
    struct entry *e;
    int rc = 0;

    MARK_BEGIN();
    e = tab_find(ptr);
    if (!e) {
        rc = -ENOENT;
    } else if (R.recording && e->id != NO_ID && e->id < R.trace.nblocks && !R.trace.blocks[e->id].kept) {
        struct hoff__tblock *b = &R.trace.blocks[e->id];

        b->kept = 1;
        b->pool = 0; /* as hoff__trace_finish derives it */
        R.trace.ev[b->alloc_ev].flags |= HOFF__TEV_KEPT;
        R.kept++;
    }
    MARK_END();
    return rc;
}

static int region_mark(int begin) {
    int rc = 0;

    MARK_BEGIN();
    if (R.recording) {
        if (!begin && R.regions == 0) {
            rc = -EINVAL;
        } else {
            struct hoff__tev ev;

            memset(&ev, 0, sizeof ev);
            ev.kind = begin ? HOFF__TEV_REGION_BEGIN : HOFF__TEV_REGION_END;
            ev.block = NO_ID;
            ev.name = UINT32_MAX;
            append(&ev);
            R.regions += begin ? 1 : -1;
        }
    }
    MARK_END();
    return rc;
}

EXPORT int hoff_record_region_begin(void) {
    return region_mark(1);
}

EXPORT int hoff_record_region_end(void) {
    return region_mark(0);
}

/* An access of the block that starts at ptr (a storage's base address).
 * Returns the block's serial (>= 1), or -ENOENT when ptr is not a tracked
 * block (smaller than the threshold, or not from the C allocator). */
EXPORT int64_t hoff_record_access(const void *ptr, int write) {
    struct entry *e;
    int64_t rc;

    MARK_BEGIN();
    e = tab_find(ptr);
    rc = e ? (int64_t)e->seq : -ENOENT;
    if (e && R.recording && e->id != NO_ID) {
        struct hoff__tev ev;

        memset(&ev, 0, sizeof ev);
        ev.kind = HOFF__TEV_ACCESS;
        ev.block = e->id;
        ev.name = UINT32_MAX;
        ev.flags = write ? HOFF__TEV_WRITE : 0;
        append(&ev);
    }
    MARK_END();
    return rc;
}

/* The serial of the tracked block starting at ptr, or -ENOENT; records nothing. */
EXPORT int64_t hoff_record_block_of(const void *ptr) {
    struct entry *e;
    int64_t rc;

    MARK_BEGIN();
    e = tab_find(ptr);
    rc = e ? (int64_t)e->seq : -ENOENT;
    MARK_END();
    return rc;
}

/* The trace block id the block starting at ptr has in the recording, or -ENOENT. */
EXPORT int64_t hoff_record_trace_id(const void *ptr) {
    struct entry *e;
    int64_t rc;

    MARK_BEGIN();
    e = tab_find(ptr);
    rc = e && e->id != NO_ID ? (int64_t)e->id : -ENOENT;
    MARK_END();
    return rc;
}

/* The recorder's state as one JSON object (snprintf semantics). */
EXPORT int hoff_record_stats_json(char *buf, size_t len) {
    char path[sizeof R.output + 32];
    int n;

    MARK_BEGIN();
    output_path(path, sizeof path);
    n = snprintf(buf, len,
                 "{\"source\":\"record\",\"threshold_bytes\":%" PRIu64 ",\"tracked_blocks\":%zu,"
                 "\"tracked_bytes\":%" PRIu64 ",\"peak_tracked_bytes\":%" PRIu64 ",\"allocations\":%" PRIu64
                 ",\"steps_begun\":%ld,\"steps_ended\":%ld,\"record_step\":%ld,\"recording\":%d,"
                 "\"events\":%zu,\"kept_blocks\":%" PRIu64 ",\"written\":%d,\"failed\":%d,\"mode\":\"%s\"}",
                 R.threshold, R.count, R.live_bytes, R.peak_live_bytes, R.seq, R.steps_begun, R.steps_ended,
                 R.record_step, R.recording, R.trace.nev, R.kept, R.written, R.failed,
                 R.mode == MODE_WHOLE ? "whole" : "marks");
    MARK_END();
    return n;
}

/* --- life cycle ------------------------------------------------------------------ */

static void atfork_prepare(void) {
    pthread_mutex_lock(&lock);
}

static void atfork_parent(void) {
    pthread_mutex_unlock(&lock);
}

static void atfork_child(void) {
    /* A forked child (a data-loader worker, say) is another process: it must
     * not write the parent's trace. */
    R.child = 1;
    R.recording = 0;
    pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void rec_init(void) {
    const char *out = getenv("HOFF_RECORD_OUTPUT");
    const char *thr = getenv("HOFF_RECORD_THRESHOLD");
    const char *step = getenv("HOFF_RECORD_STEP");
    const char *quiet = getenv("HOFF_RECORD_QUIET");
    const char *status = getenv("HOFF_RECORD_STATUS");
    char *end;

    in_rec = 1;
    hoff__trace_init(&R.trace);
    R.quiet = quiet && *quiet && strcmp(quiet, "0") != 0;
    if (!out || !*out) {
        say("HOFF_RECORD_OUTPUT is not set: recording nothing (run the program with hoff-record -o TRACE)");
        goto out;
    }
    if (strlen(out) >= sizeof R.output) {
        say("HOFF_RECORD_OUTPUT is longer than %zu bytes: recording nothing", sizeof R.output - 1);
        goto out;
    }
    snprintf(R.output, sizeof R.output, "%s", out);
    {
        /* Every rank of a torchrun job inherits the same -o: refuse a name
         * they would all write (one trace would silently replace the others). */
        char err[512], path[sizeof R.output + 32];

        if (hoff__rank_from_env(&R.rank, err, sizeof err) != 0 ||
            hoff__path_expand(path, sizeof path, R.output, &R.rank, "hoff-record -o", err, sizeof err) != 0) {
            say("%s: recording nothing", err);
            goto out;
        }
    }
    if (status && strlen(status) < sizeof R.status)
        snprintf(R.status, sizeof R.status, "%s", status);
    R.threshold = (uint64_t)1 << 20;
    if (thr && *thr && (hoff__parse_size(thr, &R.threshold) != 0 || R.threshold == 0)) {
        say("HOFF_RECORD_THRESHOLD='%s': expected a size of at least 1 byte (4096, 64K, 1M): recording nothing", thr);
        goto out;
    }
    R.record_step = 1;
    if (step && *step) {
        errno = 0;
        R.record_step = strtol(step, &end, 10);
        if (errno || *end || R.record_step < 0) {
            say("HOFF_RECORD_STEP='%s': expected a step number, 0 or more: recording nothing", step);
            goto out;
        }
    }
    if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0) {
        say("pthread_atfork failed: recording nothing");
        goto out;
    }
    /* Until the program marks a step, the whole run is one step. */
    R.t0 = now_ns();
    snprintf(R.trace.backend, sizeof R.trace.backend, "record");
    R.recording = 1;
    __atomic_store_n(&R.mode, MODE_WHOLE, __ATOMIC_RELEASE);
out:
    in_rec = 0;
}

__attribute__((destructor)) static void rec_fini(void) {
    if (R.mode == MODE_OFF || R.child)
        return;
    in_rec = 1;
    pthread_mutex_lock(&lock);
    if (R.mode == MODE_WHOLE && R.recording) {
        if (R.trace.nblocks > 0)
            finish_recording("whole run recorded (no step marks)");
        else
            R.recording = 0; /* a helper process (a shell, say) with nothing to record */
    } else if (R.mode == MODE_MARKS && !R.written && !R.failed) {
        if (R.recording)
            say("the process exited inside step %ld, the one being recorded: no trace written", R.record_step);
        else
            say("the process marked %ld step(s); step %ld (HOFF_RECORD_STEP) never came: no trace written",
                R.steps_begun, R.record_step);
        R.recording = 0;
    }
    R.mode = MODE_OFF; /* frees after this point (other destructors) pass through */
    pthread_mutex_unlock(&lock);
    in_rec = 0;
}
