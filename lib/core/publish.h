/* publish.h — the statistics segment: a context's struct hoff_stats in POSIX shared memory
 * (/dev/shm/hoff.<uid>.<pidns>.<pid>) for hoff-stat, written under a sequence lock, and the reader side that checks
 * a segment before trusting a byte of it.  A writer is identified by its pid namespace (the inode of
 * /proc/self/ns/pid), its pid there, its start time and the boot id: processes of different containers sharing
 * /dev/shm never take or remove each other's segments, and a reader never judges a pid of another namespace by
 * its own.
 * It knows no context: the context's counters and the op of its plan's working-set floor reach it through
 * hoff__publish_write (ctx_stats.c calls it).
 * Threading: one writer per segment, serialised by its caller (the context's lock); readers never block it. */
#ifndef HOFF_PUBLISH_H
#define HOFF_PUBLISH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "hoff.h"

/* "HOFFSTAT" read as a little-endian uint64_t. */
#define HOFF__PUB_MAGIC 0x5441545346464f48ull
/* The layout of struct hoff__pub_segment (its header and what follows the
 * stats); bumped on any change to it.  4: floor_op after the stats. */
#define HOFF__PUB_VERSION 4
/* Bytes of the segment's floor_op, its NUL included. */
#define HOFF__PUB_FLOOR_OP 64
/* Segment names: "hoff.<uid>.<ns>.<pid>" for a process's first context,
 * "hoff.<uid>.<ns>.<pid>.<k>" for the k-th one alive at the same time (or,
 * when another user holds the next name, a random k).  <ns> is the inode of
 * the writer's pid namespace; where /proc/self/ns/pid cannot be read, a
 * random number at or above 2^32 (no namespace inode is that large), which
 * readers treat as another namespace. */
#define HOFF__PUB_PREFIX "hoff."
#define HOFF__PUB_DIR "/dev/shm"
/* The event path writes at most this often (and looks at the clock only
 * every HOFF__PUB_TICK_MASK + 1 events); step marks and hoff_stats_get
 * always write. */
#define HOFF__PUB_INTERVAL_NS 1000000ull
#define HOFF__PUB_TICK_MASK 255u

struct hoff__pub_header {
    uint64_t magic;         /* HOFF__PUB_MAGIC */
    uint32_t version;       /* HOFF__PUB_VERSION */
    uint32_t size;          /* bytes of the whole segment: sizeof(struct hoff__pub_segment) */
    uint32_t header_size;   /* sizeof(struct hoff__pub_header) */
    uint32_t stats_version; /* HOFF_STATS_VERSION */
    uint32_t stats_size;    /* sizeof(struct hoff_stats) */
    int32_t pid;
    uint32_t uid;
    uint32_t reserved;
    uint64_t pid_ns;     /* the writer's pid namespace: as in the name */
    uint8_t boot_id[16]; /* /proc/sys/kernel/random/boot_id (all 0 if unknown) */
    uint64_t start_ns;   /* CLOCK_REALTIME when the context was created */
    uint64_t proc_start; /* the process's start (field 22 of /proc/self/stat, clock ticks after
                            boot; 0 if unknown): tells a reused pid from the writer */
    char planner[16];    /* NUL-terminated */
    char backend[16];
    char comm[16]; /* the program's name (/proc/self/comm) */
    char job[64];  /* the job id (core/rank.h: TORCHELASTIC_RUN_ID, else MASTER_ADDR:MASTER_PORT),
                      NUL-terminated; "" outside a job.  Rank and world size are counters. */
    /* Under the sequence lock, with the stats: */
    uint64_t seq;       /* odd while a write is in progress */
    uint64_t update_ns; /* CLOCK_REALTIME of the last write */
    uint64_t updates;   /* writes so far */
};

/* The whole segment: the header, at header_size the stats (stats_size bytes), and after them, at
 * header_size + stats_size up to size, the figures that are not counters. */
struct hoff__pub_segment {
    struct hoff__pub_header h;
    struct hoff_stats st;
    /* Under the sequence lock, with the stats: the op mark that ends the plan's working-set floor (as
     * hoff_floor_json's "op"; its bytes, blocks and phase are stats.plan_floor_*), NUL-terminated, cut to
     * HOFF__PUB_FLOOR_OP - 1 bytes at the start of a UTF-8 character; "" before the first plan.  A reader
     * terminates its copy itself. */
    char floor_op[HOFF__PUB_FLOOR_OP];
};

/* --- writer (publish.c) ------------------------------------------------------ */

struct hoff__publisher {
    struct hoff__pub_segment *seg;
    char name[80]; /* "/hoff.<uid>.<ns>.<pid>[.<k>]" */
    ino_t ino;     /* the file created: only it is ever unlinked */
    dev_t dev;
    pid_t pid;                    /* the creator: a forked child never unlinks it */
    uint32_t tick;                /* events without a counter of their own (hoff__publish_tick) */
    uint64_t last_ns;             /* CLOCK_MONOTONIC_COARSE of the last write */
    uint64_t interval_ns;         /* HOFF__PUB_INTERVAL_NS; 0 = at every tick (bench) */
    struct hoff__publisher *next; /* the process's live segments (for the atexit handler) */
};

/* Create this process's segment, its header naming planner, backend and job
 * (the job id, "" or NULL for none).  NULL when it cannot: the failure is
 * logged once, and publishing never fails hoff_init. */
struct hoff__publisher *hoff__publish_open(const char *planner, const char *backend, const char *job);
/* Remove the segment and free p (NULL: nothing).  hoff_shutdown calls it; the
 * atexit handler covers processes that never shut down. */
void hoff__publish_close(struct hoff__publisher *p);
/* Write st (a snapshot of the context's counters) and floor_op (the op mark
 * of the plan's working-set floor, ctx->pipe.floor_op; NULL or "" for none)
 * now (p NULL: nothing).  The caller serialises the writes of one segment. */
void hoff__publish_write(struct hoff__publisher *p, const struct hoff_stats *st, const char *floor_op);
/* The event path's slow half: has interval_ns passed since the last write? */
int hoff__publish_due(const struct hoff__publisher *p);

/* Write the stats and the floor's op (NULL: "") into a segment under its
 * sequence lock (the writer's core; tests drive it on a plain mapping).  An
 * op longer than HOFF__PUB_FLOOR_OP - 1 bytes is cut there, or before, at
 * the start of a UTF-8 character. */
void hoff__pub_store(struct hoff__pub_segment *seg, const struct hoff_stats *st, const char *floor_op,
                     uint64_t update_ns);
/* Fill a segment's header for this process (job: its job id, "" or NULL for none). */
void hoff__pub_header_init(struct hoff__pub_segment *seg, const char *planner, const char *backend, const char *job);

/* --- reader (publish_read.c) --------------------------------------------------- */

/* Is name "hoff.<uid>.<ns>.<pid>" or "hoff.<uid>.<ns>.<pid>.<k>" (digits
 * only)?  1 and *uid, *ns, *pid set (each may be NULL), else 0. */
int hoff__pub_parse_name(const char *name, uid_t *uid, uint64_t *ns, pid_t *pid);

/* The segment name "hoff.<uid>.<ns>.<pid>[.<k>]" (k 0: none) into buf:
 * the one place the form is written.  snprintf's return. */
int hoff__pub_name(char *buf, size_t len, unsigned uid, uint64_t ns, int pid, unsigned k);

/* This process's pid namespace id (the inode of /proc/self/ns/pid, read
 * once), or a random id >= 2^32 when it cannot be read. */
uint64_t hoff__pub_self_ns(void);
/* Tests: pretend to be in namespace ns (0: the real one again). */
void hoff__pub_set_self_ns(uint64_t ns);
/* The boot id (16 bytes, all 0 when /proc/sys/kernel/random/boot_id cannot
 * be read). */
void hoff__pub_boot_id(uint8_t out[16]);
/* The inode of PROC's PID's pid namespace ("/proc/PID/ns/pid"); 0 when it
 * cannot be read, -errno in *err (EACCES: not ours to inspect). */
uint64_t hoff__proc_pid_ns(const char *proc, pid_t pid, int *err);

/* The checks on a segment's fstat: a regular file (not a link, FIFO, ...),
 * owned by uid, no permission for group or others, exactly the size of a
 * segment.  0, or -EPERM / -EINVAL / -EMSGSIZE with why in err. */
int hoff__pub_check_stat(const struct stat *st, uid_t uid, char *err, size_t errlen);
/* The checks on a header read from a file of file_size bytes: magic, layout
 * version, sizes, stats version, owner.  0 or -EPROTO / -EMSGSIZE / -EPERM
 * with why in err. */
int hoff__pub_check_header(const struct hoff__pub_header *h, uint64_t file_size, uid_t uid, char *err, size_t errlen);

struct hoff__pub_reader {
    const struct hoff__pub_segment *seg; /* mapped read-only */
    size_t len;
    struct hoff__pub_header h; /* the fixed part, checked */
    ino_t ino;
    dev_t dev;
};

/* Open segment `name` (a file name in dir, e.g. "hoff.1000.4242") without
 * following a link (O_NOFOLLOW, O_NONBLOCK), check it (hoff__pub_check_stat,
 * then the header read with pread) and map it read-only.  0, or -errno with
 * a message in err that names the problem: -ENOENT, -ELOOP (a symbolic
 * link), -EPERM (another owner, or group/other permissions), -EINVAL (not a
 * regular file), -EMSGSIZE (truncated or the wrong size), -EPROTO (not a
 * segment, or another layout or stats version). */
int hoff__pub_open(const char *dir, const char *name, struct hoff__pub_reader *r, char *err, size_t errlen);
void hoff__pub_close(struct hoff__pub_reader *r);

/* A consistent copy of the counters and the sequenced header fields:
 * retries while a write is in progress, up to `tries` times.  0 or -EAGAIN
 * (the writer kept it busy), -EPROTO (the stats in it are not a struct
 * hoff_stats of this version). */
int hoff__pub_read(const struct hoff__pub_reader *r, struct hoff_stats *st, uint64_t *update_ns, uint64_t *updates,
                   int tries);
/* The same with the floor's op, copied in the same consistent read into
 * floor_op (HOFF__PUB_FLOOR_OP bytes; NULL: not copied), NUL-terminated
 * whatever the segment holds. */
int hoff__pub_read_floor(const struct hoff__pub_reader *r, struct hoff_stats *st, char *floor_op, uint64_t *update_ns,
                         uint64_t *updates, int tries);
/* The same on a segment in memory (tests). */
int hoff__pub_read_seg(const struct hoff__pub_segment *seg, struct hoff_stats *st, char *floor_op, uint64_t *update_ns,
                       uint64_t *updates, int tries);

/* Is the writer of a segment still running?
 *   HOFF__PUB_ALIVE    yes;
 *   HOFF__PUB_GONE     no: written before this boot; or in our namespace, no
 *                      such pid or one that started at another time; or in
 *                      another namespace that we can see whole (a process
 *                      of it in our /proc, or we are in the initial
 *                      namespace and see every process) with no such pid;
 *   HOFF__PUB_UNKNOWN  another namespace we cannot see into (a sibling
 *                      container, a parent): never to be treated as gone.
 * A pid of another namespace is looked up through the NSpid line of each
 * /proc/N/status whose /proc/N/ns/pid is that namespace, never as a bare
 * pid of ours. */
enum { HOFF__PUB_GONE = 0, HOFF__PUB_ALIVE = 1, HOFF__PUB_UNKNOWN = 2 };
int hoff__pub_writer_alive(const struct hoff__pub_header *h);
/* The same with the /proc to look in (tests pass a crafted one). */
int hoff__pub_writer_alive_in(const struct hoff__pub_header *h, const char *proc);
/* Liveness of a segment known only by name (its header cannot be read):
 * HOFF__PUB_GONE only when ns is ours and pid is gone. */
int hoff__pub_name_alive(uint64_t ns, pid_t pid);
/* The process start time of pid (field 22 of /proc/PID/stat), 0 if unknown. */
uint64_t hoff__proc_start(pid_t pid);

#endif
