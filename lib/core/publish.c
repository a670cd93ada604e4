/* publish.c — the writer of the statistics segment: created 0600 with O_EXCL as /dev/shm/hoff.<uid>.<ns>.<pid>,
 * written under a sequence lock at step marks, at hoff_stats_get and (rate-limited) after allocator events, removed
 * at shutdown and at exit (only the file this process created).
 * It knows no context: the caller hands it the names and each snapshot of the counters.
 * Threading: the writes of one segment are serialised by the caller (the context's lock); the process's list of
 * segments (for atexit) has its own lock. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/publish.h"

/* The process's live segments: the atexit handler unlinks them. */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hoff__publisher *list_head;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

/* Unlink p's segment if the file at its name is still the one p created:
 * never another process's. */
static void unlink_own(const struct hoff__publisher *p) {
    struct stat st;
    int fd;

    if (p->pid != getpid())
        return; /* a forked child: the parent's */
    fd = shm_open(p->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && st.st_ino == p->ino && st.st_dev == p->dev)
        shm_unlink(p->name);
    close(fd);
}

static void unlink_all_at_exit(void) {
    struct hoff__publisher *p;

    pthread_mutex_lock(&list_lock);
    for (p = list_head; p; p = p->next)
        unlink_own(p);
    pthread_mutex_unlock(&list_lock);
}

static void register_atexit(void) {
    /* atexit from a shared object runs at exit and when it is unloaded. */
    if (atexit(unlink_all_at_exit) != 0)
        hoff__log(HOFF_LOG_WARN, "stats: cannot register the exit handler; a process that exits without "
                                 "hoff_shutdown leaves its segment behind (hoff-stat --clean removes it)");
}

static uint64_t realtime_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t coarse_ns(void) {
    struct timespec ts;

#ifdef CLOCK_MONOTONIC_COARSE
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void copy_name(char *dst, size_t len, const char *src) {
    size_t n = src ? strnlen(src, len - 1) : 0;

    memset(dst, 0, len);
    if (n)
        memcpy(dst, src, n);
}

static void read_comm(char *dst, size_t len) {
    char buf[64] = "";
    FILE *f = fopen("/proc/self/comm", "re");

    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    copy_name(dst, len, buf[0] ? buf : "?");
}

void hoff__pub_header_init(struct hoff__pub_segment *seg, const char *planner, const char *backend, const char *job) {
    struct hoff__pub_header *h = &seg->h;

    memset(seg, 0, sizeof *seg);
    h->version = HOFF__PUB_VERSION;
    h->size = (uint32_t)sizeof *seg;
    h->header_size = (uint32_t)sizeof *h;
    h->stats_version = HOFF_STATS_VERSION;
    h->stats_size = (uint32_t)sizeof(struct hoff_stats);
    h->pid = (int32_t)getpid();
    h->uid = (uint32_t)getuid();
    h->pid_ns = hoff__pub_self_ns();
    hoff__pub_boot_id(h->boot_id);
    h->start_ns = realtime_ns();
    h->proc_start = hoff__proc_start(getpid());
    copy_name(h->planner, sizeof h->planner, planner);
    copy_name(h->backend, sizeof h->backend, backend);
    read_comm(h->comm, sizeof h->comm);
    snprintf(h->job, sizeof h->job, "%s", job ? job : "");
    seg->st.version = HOFF_STATS_VERSION;
    seg->st.size = (uint32_t)sizeof seg->st;
    /* The magic goes last: a reader that sees it sees a filled header. */
    __atomic_store_n(&h->magic, HOFF__PUB_MAGIC, __ATOMIC_RELEASE);
}

/* The layout the header describes: the stats at header_size, floor_op at header_size + stats_size, nothing
 * after it; and both payloads copied as whole words. */
_Static_assert(offsetof(struct hoff__pub_segment, st) == sizeof(struct hoff__pub_header), "stats at header_size");
_Static_assert(offsetof(struct hoff__pub_segment, floor_op) ==
                   sizeof(struct hoff__pub_header) + sizeof(struct hoff_stats),
               "floor_op right after the stats");
_Static_assert(sizeof(struct hoff__pub_segment) == offsetof(struct hoff__pub_segment, floor_op) + HOFF__PUB_FLOOR_OP,
               "floor_op ends the segment");
_Static_assert(offsetof(struct hoff__pub_segment, floor_op) % sizeof(uint64_t) == 0 &&
                   HOFF__PUB_FLOOR_OP % sizeof(uint64_t) == 0 && sizeof(struct hoff_stats) % sizeof(uint64_t) == 0,
               "the payloads are whole words");

/* src cut to HOFF__PUB_FLOOR_OP - 1 bytes (or fewer: never inside a UTF-8 character), NUL-padded. */
static void floor_op_words(uint64_t out[HOFF__PUB_FLOOR_OP / sizeof(uint64_t)], const char *src) {
    size_t n = src ? strnlen(src, HOFF__PUB_FLOOR_OP) : 0;

    memset(out, 0, HOFF__PUB_FLOOR_OP);
    if (n >= HOFF__PUB_FLOOR_OP) {
        n = HOFF__PUB_FLOOR_OP - 1;
        /* src[n], the first byte dropped, continues a character: drop that character whole. */
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(out, src, n);
}

/* The sequence lock's writer: seq odd, the payload word by word, seq even.
 * Readers copy with the same word size and retry while seq is odd or moved. */
void hoff__pub_store(struct hoff__pub_segment *seg, const struct hoff_stats *st, const char *floor_op,
                     uint64_t update_ns) {
    struct hoff__pub_header *h = &seg->h;
    uint64_t seq = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
    const uint64_t *src = (const uint64_t *)(const void *)st;
    uint64_t *dst = (uint64_t *)(void *)&seg->st, op[HOFF__PUB_FLOOR_OP / sizeof(uint64_t)];
    uint64_t *op_dst = (uint64_t *)(void *)seg->floor_op;
    size_t i, n = sizeof *st / sizeof(uint64_t);

    floor_op_words(op, floor_op);
    __atomic_store_n(&h->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (i = 0; i < n; i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    for (i = 0; i < HOFF__PUB_FLOOR_OP / sizeof(uint64_t); i++)
        __atomic_store_n(&op_dst[i], op[i], __ATOMIC_RELAXED);
    __atomic_store_n(&h->update_ns, update_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&h->updates, __atomic_load_n(&h->updates, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, seq + 2, __ATOMIC_RELEASE);
}

static uint32_t random_k(void) {
    uint32_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, &r, sizeof r) != (ssize_t)sizeof r)
        r = (uint32_t)(coarse_ns() ^ (uint64_t)getpid() * 2654435761u);
    if (fd >= 0)
        close(fd);
    return 64 + r % 4000000000u;
}

/* Is the segment at name (not one of this process's) stale, ours to
 * replace: our uid, a regular file, and either no readable header (killed
 * while creating it; only a process with our namespace and pid can have
 * made this name) or a header of ours whose writer is gone?  Else
 * *owner is set to the file's owner, for the warning. */
static int stale_own(const char *name, uid_t *owner) {
    struct hoff__pub_header h;
    struct stat st;
    int fd, stale = 0;

    *owner = (uid_t)-1;
    fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0) {
        *owner = st.st_uid;
        if (st.st_uid == getuid() && S_ISREG(st.st_mode) && !(st.st_mode & 077)) {
            if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || h.magic != HOFF__PUB_MAGIC ||
                h.version != HOFF__PUB_VERSION)
                stale = 1;
            else
                stale = h.pid_ns == hoff__pub_self_ns() && h.pid == (int32_t)getpid() &&
                        hoff__pub_writer_alive(&h) == HOFF__PUB_GONE;
        }
    }
    close(fd);
    return stale;
}

/* Create "/hoff.<uid>.<ns>.<pid>[.<k>]" exclusively.  A name held by a live
 * context of this process moves us to the next k; one left by a dead process
 * with our namespace and pid (pid reuse) is replaced; one that someone else
 * holds (another user can create names in /dev/shm) is warned about once and
 * we take a random k, which nobody can have prepared. */
static int create_segment(struct hoff__publisher *p, int *fd_out) {
    unsigned uid = (unsigned)getuid();
    uint64_t ns = hoff__pub_self_ns();
    int pid = (int)getpid();
    uint32_t k = 0;
    int tries, fd, replaced = 0;

    for (tries = 0; tries < 64; tries++) {
        struct hoff__publisher *q;
        int mine = 0;
        uid_t owner = (uid_t)-1;

        p->name[0] = '/';
        hoff__pub_name(p->name + 1, sizeof p->name - 1, uid, ns, pid, k);
        fd = shm_open(p->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            *fd_out = fd;
            return 0;
        }
        if (errno != EEXIST)
            return -errno;
        pthread_mutex_lock(&list_lock);
        for (q = list_head; q; q = q->next)
            mine |= strcmp(q->name, p->name) == 0;
        pthread_mutex_unlock(&list_lock);
        if (mine) {
            k = k < 63 ? k + 1 : random_k();
            continue;
        }
        if (!replaced && stale_own(p->name, &owner) && shm_unlink(p->name) == 0) {
            hoff__log(HOFF_LOG_INFO, "stats: replaced %s, left by an earlier process with this pid", p->name);
            replaced = 1;
            continue;
        }
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "stats: %s%s is held by %s (uid %d); publishing under a random name instead "
                       "(hoff-stat lists it)",
                       HOFF__PUB_DIR, p->name, owner == getuid() ? "another file of yours" : "another user",
                       (int)owner);
        k = random_k();
    }
    return -EEXIST;
}

struct hoff__publisher *hoff__publish_open(const char *planner, const char *backend, const char *job) {
    struct hoff__publisher *p;
    struct stat st;
    void *m;
    int fd = -1, rc;

    p = calloc(1, sizeof *p);
    if (!p) {
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "stats: out of memory; statistics are not published");
        return NULL;
    }
    p->pid = getpid();
    p->interval_ns = HOFF__PUB_INTERVAL_NS;
    rc = create_segment(p, &fd);
    if (rc) {
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "stats: cannot create %s in %s: %s; statistics are not published "
                       "(HOFF_STATS=0 turns publishing off)",
                       p->name, HOFF__PUB_DIR, strerror(-rc));
        free(p);
        return NULL;
    }
    /* The umask cannot widen 0600, but a file system might: check. */
    if (fchmod(fd, 0600) != 0 || fstat(fd, &st) != 0 || st.st_uid != getuid() || !S_ISREG(st.st_mode) ||
        (st.st_mode & 077) || ftruncate(fd, (off_t)sizeof *p->seg) != 0) {
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "stats: cannot set up %s: %s; statistics are not published", p->name,
                       strerror(errno ? errno : EPERM));
        close(fd);
        shm_unlink(p->name);
        free(p);
        return NULL;
    }
    p->ino = st.st_ino;
    p->dev = st.st_dev;
    m = mmap(NULL, sizeof *p->seg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "stats: cannot map %s: %s; statistics are not published", p->name,
                       strerror(errno));
        shm_unlink(p->name);
        free(p);
        return NULL;
    }
    p->seg = m;
    hoff__pub_header_init(p->seg, planner, backend, job);
    pthread_once(&atexit_once, register_atexit);
    pthread_mutex_lock(&list_lock);
    p->next = list_head;
    list_head = p;
    pthread_mutex_unlock(&list_lock);
    hoff__log(HOFF_LOG_INFO, "stats: published in %s%s", HOFF__PUB_DIR, p->name);
    return p;
}

void hoff__publish_close(struct hoff__publisher *p) {
    struct hoff__publisher **pp;

    if (!p)
        return;
    pthread_mutex_lock(&list_lock);
    for (pp = &list_head; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    pthread_mutex_unlock(&list_lock);
    unlink_own(p);
    munmap(p->seg, sizeof *p->seg);
    free(p);
}

void hoff__publish_write(struct hoff__publisher *p, const struct hoff_stats *st, const char *floor_op) {
    if (!p)
        return;
    p->tick = 0;
    p->last_ns = coarse_ns();
    hoff__pub_store(p->seg, st, floor_op, realtime_ns());
}

int hoff__publish_due(const struct hoff__publisher *p) {
    return !p->interval_ns || coarse_ns() - p->last_ns >= p->interval_ns;
}
