/* publish_read.c — the reader of statistics segments (hoff-stat): open without following links, check owner, mode,
 * type, size and header before mapping, then copy the counters under the sequence lock with a retry limit.
 * Threading: a reader is used by one thread; it never writes to the segment and never waits on the writer. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/publish.h"

static int fail(int rc, char *err, size_t errlen, const char *fmt, ...) HOFF__PRINTF(4, 5);
static int fail(int rc, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int all_digits(const char *s, size_t n, size_t max) {
    size_t i;

    if (n == 0 || n > max)
        return 0;
    for (i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

int hoff__pub_parse_name(const char *name, uid_t *uid, uint64_t *ns, pid_t *pid) {
    const char *f[4];
    size_t len[4], plen = strlen(HOFF__PUB_PREFIX);
    static const size_t max[4] = {10, 20, 10, 10};
    unsigned long long u, n, q;
    int k = 0;
    const char *p;

    if (!name || strncmp(name, HOFF__PUB_PREFIX, plen) != 0)
        return 0;
    for (p = name + plen; k < 4; k++) {
        const char *dot = strchr(p, '.');

        f[k] = p;
        len[k] = dot ? (size_t)(dot - p) : strlen(p);
        if (!all_digits(p, len[k], max[k]))
            return 0;
        if (!dot)
            break;
        p = dot + 1;
    }
    if (k < 2 || k > 3) /* uid.ns.pid or uid.ns.pid.k */
        return 0;
    errno = 0;
    u = strtoull(f[0], NULL, 10);
    n = strtoull(f[1], NULL, 10);
    q = strtoull(f[2], NULL, 10);
    if (errno || u > UINT32_MAX || n == 0 || q == 0 || q > INT32_MAX)
        return 0;
    if (uid)
        *uid = (uid_t)u;
    if (ns)
        *ns = (uint64_t)n;
    if (pid)
        *pid = (pid_t)q;
    return 1;
}

int hoff__pub_name(char *buf, size_t len, unsigned uid, uint64_t ns, int pid, unsigned k) {
    if (k)
        return snprintf(buf, len, HOFF__PUB_PREFIX "%u.%" PRIu64 ".%d.%u", uid, ns, pid, k);
    return snprintf(buf, len, HOFF__PUB_PREFIX "%u.%" PRIu64 ".%d", uid, ns, pid);
}

/* --- identity: pid namespace and boot ----------------------------------------------- */

static uint64_t self_ns_override;

void hoff__pub_set_self_ns(uint64_t ns) {
    __atomic_store_n(&self_ns_override, ns, __ATOMIC_RELAXED);
}

uint64_t hoff__proc_pid_ns(const char *proc, pid_t pid, int *err) {
    char path[256], link[64];
    unsigned long long v;
    ssize_t n;

    if (pid > 0)
        snprintf(path, sizeof path, "%s/%d/ns/pid", proc, (int)pid);
    else
        snprintf(path, sizeof path, "%s/self/ns/pid", proc);
    n = readlink(path, link, sizeof link - 1);
    if (n < 0) {
        if (err)
            *err = -errno;
        return 0;
    }
    link[n] = '\0';
    if (sscanf(link, "pid:[%llu]", &v) != 1 || v == 0) {
        if (err)
            *err = -EPROTO;
        return 0;
    }
    if (err)
        *err = 0;
    return (uint64_t)v;
}

uint64_t hoff__pub_self_ns(void) {
    static uint64_t cached;
    uint64_t v = __atomic_load_n(&self_ns_override, __ATOMIC_RELAXED);

    if (v)
        return v;
    v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v)
        return v;
    v = hoff__proc_pid_ns("/proc", 0, NULL);
    if (!v) {
        /* No /proc: an id no namespace has, so that nobody takes our names
         * and readers treat them as another namespace's. */
        uint64_t r = 0;
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

        if (fd < 0 || read(fd, &r, sizeof r) != (ssize_t)sizeof r)
            r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
        if (fd >= 0)
            close(fd);
        v = (r % 9000000000000000000ull) + ((uint64_t)1 << 32);
    }
    /* One value for the life of the process, whoever reads it first. */
    if (!__atomic_compare_exchange_n(&cached, &(uint64_t){0}, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    return v;
}

void hoff__pub_boot_id(uint8_t out[16]) {
    char buf[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    int i = 0;
    const char *p;

    memset(out, 0, 16);
    if (!f)
        return;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    fclose(f);
    for (p = buf; *p && i < 32; p++) {
        int d;

        if (*p == '-')
            continue;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else
            break;
        out[i / 2] = (uint8_t)(out[i / 2] << 4 | d);
        i++;
    }
    if (i != 32)
        memset(out, 0, 16);
}

int hoff__pub_check_stat(const struct stat *st, uid_t uid, char *err, size_t errlen) {
    if (S_ISLNK(st->st_mode))
        return fail(-ELOOP, err, errlen, "a symbolic link, not a segment (never followed)");
    if (!S_ISREG(st->st_mode))
        return fail(-EINVAL, err, errlen, "not a regular file (mode %06o)", (unsigned)st->st_mode);
    if (st->st_uid != uid)
        return fail(-EPERM, err, errlen, "owned by uid %u, not by you (uid %u)", (unsigned)st->st_uid, (unsigned)uid);
    if (st->st_mode & 077)
        return fail(-EPERM, err, errlen, "mode %04o: group or others may access it (a segment is 0600)",
                    (unsigned)(st->st_mode & 07777));
    if ((uint64_t)st->st_size != sizeof(struct hoff__pub_segment))
        return fail(-EMSGSIZE, err, errlen, "%" PRIu64 " bytes, a segment of this hoff version has %zu%s",
                    (uint64_t)st->st_size, sizeof(struct hoff__pub_segment),
                    (uint64_t)st->st_size < sizeof(struct hoff__pub_segment) ? " (truncated?)" : "");
    return 0;
}

int hoff__pub_check_header(const struct hoff__pub_header *h, uint64_t file_size, uid_t uid, char *err, size_t errlen) {
    if (h->magic != HOFF__PUB_MAGIC)
        return fail(-EPROTO, err, errlen, "not a hoff statistics segment (bad magic %016" PRIx64 ")", h->magic);
    if (h->version != HOFF__PUB_VERSION)
        return fail(-EPROTO, err, errlen,
                    "segment layout version %u; this hoff-stat reads version %d (use the hoff-stat of the "
                    "writer's hoff)",
                    (unsigned)h->version, HOFF__PUB_VERSION);
    if (h->size != file_size)
        return fail(-EMSGSIZE, err, errlen, "the header says %u bytes but the segment has %" PRIu64 " (truncated?)",
                    (unsigned)h->size, file_size);
    if (h->header_size != sizeof *h || h->size != sizeof(struct hoff__pub_segment))
        return fail(-EMSGSIZE, err, errlen,
                    "segment of %u bytes with a %u-byte header; this hoff-stat reads %zu with %zu", (unsigned)h->size,
                    (unsigned)h->header_size, sizeof(struct hoff__pub_segment), sizeof *h);
    if (h->stats_version != HOFF_STATS_VERSION || h->stats_size != sizeof(struct hoff_stats))
        return fail(-EPROTO, err, errlen,
                    "stats version %u size %u; this hoff-stat reads version %d size %zu (use the hoff-stat of "
                    "the writer's hoff)",
                    (unsigned)h->stats_version, (unsigned)h->stats_size, HOFF_STATS_VERSION, sizeof(struct hoff_stats));
    if (h->uid != (uint32_t)uid)
        return fail(-EPERM, err, errlen, "written for uid %u, not for you (uid %u)", (unsigned)h->uid, (unsigned)uid);
    if (h->pid <= 0)
        return fail(-EPROTO, err, errlen, "bad pid %d in the header", (int)h->pid);
    return 0;
}

int hoff__pub_open(const char *dir, const char *name, struct hoff__pub_reader *r, char *err, size_t errlen) {
    char path[4096];
    struct stat st;
    ssize_t n;
    void *m;
    int fd, rc, tries;

    memset(r, 0, sizeof *r);
    if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return fail(-EINVAL, err, errlen, "'%s' is not a segment name", name ? name : "");
    if (snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : HOFF__PUB_DIR, name) >= (int)sizeof path)
        return fail(-ENAMETOOLONG, err, errlen, "path too long");
    /* lstat first for a clear message; O_NOFOLLOW is what makes it safe. */
    if (lstat(path, &st) != 0)
        return fail(-errno, err, errlen, "%s",
                    errno == ENOENT ? "no such segment (the process has exited?)" : strerror(errno));
    if (S_ISLNK(st.st_mode))
        return fail(-ELOOP, err, errlen, "a symbolic link, not a segment (never followed)");
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ELOOP)
            return fail(-ELOOP, err, errlen, "a symbolic link, not a segment (never followed)");
        return fail(-errno, err, errlen, "cannot open: %s", strerror(errno));
    }
    /* A writer fills the header right after creating the segment: give it a
     * moment before calling an empty or unmarked file garbage. */
    for (tries = 0;; tries++) {
        if (fstat(fd, &st) != 0) {
            rc = fail(-errno, err, errlen, "cannot stat: %s", strerror(errno));
            goto out;
        }
        if (S_ISREG(st.st_mode) && st.st_uid == getuid() && st.st_size == 0 && tries < 20) {
            usleep(1000);
            continue;
        }
        if ((rc = hoff__pub_check_stat(&st, getuid(), err, errlen)) != 0 &&
            !(rc == -EMSGSIZE && (uint64_t)st.st_size >= sizeof r->h))
            goto out;
        /* Read the header with pread: a wrong version or a truncation is told
         * apart before anything is mapped. */
        n = pread(fd, &r->h, sizeof r->h, 0);
        if (n != (ssize_t)sizeof r->h) {
            rc = fail(-EMSGSIZE, err, errlen, "cannot read the header (%zd of %zu bytes): truncated", n, sizeof r->h);
            goto out;
        }
        if (r->h.magic == 0 && tries < 20) {
            usleep(1000);
            continue;
        }
        break;
    }
    rc = hoff__pub_check_header(&r->h, (uint64_t)st.st_size, getuid(), err, errlen);
    if (rc)
        goto out;
    if ((rc = hoff__pub_check_stat(&st, getuid(), err, errlen)) != 0)
        goto out;
    m = mmap(NULL, sizeof *r->seg, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        rc = fail(-errno, err, errlen, "cannot map: %s", strerror(errno));
        goto out;
    }
    r->seg = m;
    r->len = sizeof *r->seg;
    r->ino = st.st_ino;
    r->dev = st.st_dev;
    rc = 0;
out:
    close(fd);
    return rc;
}

void hoff__pub_close(struct hoff__pub_reader *r) {
    if (r && r->seg)
        munmap((void *)r->seg, r->len);
    if (r)
        r->seg = NULL;
}

int hoff__pub_read_seg(const struct hoff__pub_segment *seg, struct hoff_stats *out, char *floor_op, uint64_t *update_ns,
                       uint64_t *updates, int tries) {
    const uint64_t *src = (const uint64_t *)(const void *)&seg->st;
    const uint64_t *op_src = (const uint64_t *)(const void *)seg->floor_op;
    uint64_t *dst = (uint64_t *)(void *)out, op[HOFF__PUB_FLOOR_OP / sizeof(uint64_t)];
    size_t i, n = sizeof *out / sizeof(uint64_t);
    uint64_t s1, s2, un = 0, up = 0;
    int t;

    for (t = 0; t < tries; t++) {
        s1 = __atomic_load_n(&seg->h.seq, __ATOMIC_ACQUIRE);
        if (s1 & 1) {
            if (t > 16)
                sched_yield();
            continue;
        }
        for (i = 0; i < n; i++)
            dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
        if (floor_op)
            for (i = 0; i < HOFF__PUB_FLOOR_OP / sizeof(uint64_t); i++)
                op[i] = __atomic_load_n(&op_src[i], __ATOMIC_RELAXED);
        un = __atomic_load_n(&seg->h.update_ns, __ATOMIC_RELAXED);
        up = __atomic_load_n(&seg->h.updates, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = __atomic_load_n(&seg->h.seq, __ATOMIC_RELAXED);
        if (s1 == s2) {
            if (out->version != HOFF_STATS_VERSION || out->size != sizeof *out)
                return -EPROTO;
            if (floor_op) { /* terminated here: the writer's NUL is not to be trusted */
                memcpy(floor_op, op, HOFF__PUB_FLOOR_OP);
                floor_op[HOFF__PUB_FLOOR_OP - 1] = '\0';
            }
            if (update_ns)
                *update_ns = un;
            if (updates)
                *updates = up;
            return 0;
        }
    }
    return -EAGAIN;
}

int hoff__pub_read_floor(const struct hoff__pub_reader *r, struct hoff_stats *st, char *floor_op, uint64_t *update_ns,
                         uint64_t *updates, int tries) {
    if (!r || !r->seg)
        return -EINVAL;
    return hoff__pub_read_seg(r->seg, st, floor_op, update_ns, updates, tries);
}

int hoff__pub_read(const struct hoff__pub_reader *r, struct hoff_stats *st, uint64_t *update_ns, uint64_t *updates,
                   int tries) {
    return hoff__pub_read_floor(r, st, NULL, update_ns, updates, tries);
}

/* The start time (field 22 of PROC/PID/stat), 0 if unknown; *state (if not
 * NULL) the state letter of field 3 ('Z': a zombie, exited), 0 if unknown. */
static uint64_t proc_stat_in(const char *proc, pid_t pid, char *state) {
    char path[256], buf[1024], *p;
    unsigned long long v = 0;
    size_t n;
    FILE *f;
    int field;

    if (state)
        *state = 0;
    snprintf(path, sizeof path, "%s/%d/stat", proc, (int)pid);
    f = fopen(path, "re");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* comm may hold spaces and parentheses: the fields start after the last ')'. */
    p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    if (state && p[0] == ' ')
        *state = p[1];
    /* p is at field 3 (state) preceded by a space; starttime is field 22. */
    for (field = 3; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
    }
    if (!p || sscanf(p, " %llu", &v) != 1)
        return 0;
    return (uint64_t)v;
}

uint64_t hoff__proc_start(pid_t pid) {
    return proc_stat_in("/proc", pid, NULL);
}

/* The pid of PROC's process N in its own (innermost) namespace: the last
 * field of the NSpid line of PROC/N/status; 0 if unknown. */
static pid_t inner_pid(const char *proc, pid_t n) {
    char path[256], line[256];
    long last = 0;
    FILE *f;

    snprintf(path, sizeof path, "%s/%d/status", proc, (int)n);
    f = fopen(path, "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "NSpid:", 6) == 0) {
            char *p = line + 6, *end;

            for (;;) {
                long v = strtol(p, &end, 10);

                if (end == p)
                    break;
                last = v;
                p = end;
            }
            break;
        }
    }
    fclose(f);
    return last > 0 && last <= INT32_MAX ? (pid_t)last : 0;
}

/* The pid namespace of the initial process (PROC_PID_INIT_INO). */
#define INIT_PID_NS 0xEFFFFFFCull

static int alive_same_ns(const struct hoff__pub_header *h, const char *proc) {
    uint64_t start;
    char state;

    if (kill((pid_t)h->pid, 0) != 0 && errno == ESRCH)
        return HOFF__PUB_GONE;
    start = proc_stat_in(proc, (pid_t)h->pid, &state);
    if (state == 'Z' || state == 'X')
        return HOFF__PUB_GONE; /* exited, not yet reaped */
    if (h->proc_start && start && start != h->proc_start)
        return HOFF__PUB_GONE; /* the pid was reused */
    return HOFF__PUB_ALIVE;
}

/* Another namespace: look for it in proc. */
static int alive_other_ns(const struct hoff__pub_header *h, const char *proc) {
    DIR *dp = opendir(proc);
    struct dirent *d;
    int seen_ns = 0, blind = 0, found = HOFF__PUB_GONE;

    if (!dp)
        return HOFF__PUB_UNKNOWN;
    while ((d = readdir(dp)) != NULL) {
        char *end;
        long n = strtol(d->d_name, &end, 10);
        uint64_t ns;
        int err = 0;

        /* Process 1 of this /proc is the init of its own namespace, ours
         * (and often one we may not inspect). */
        if (*end || n <= 1 || n > INT32_MAX)
            continue;
        ns = hoff__proc_pid_ns(proc, (pid_t)n, &err);
        if (!ns) {
            blind |= err != -ENOENT && err != -ESRCH; /* a process we may not inspect */
            continue;
        }
        if (ns != h->pid_ns)
            continue;
        seen_ns = 1;
        if (inner_pid(proc, (pid_t)n) == (pid_t)h->pid) {
            char state;
            uint64_t start = proc_stat_in(proc, (pid_t)n, &state);

            /* The start time, where both are known, tells a reused pid; a
             * zombie has exited. */
            if ((!h->proc_start || !start || start == h->proc_start) && state != 'Z' && state != 'X') {
                found = HOFF__PUB_ALIVE;
                break;
            }
        }
    }
    closedir(dp);
    if (found == HOFF__PUB_ALIVE)
        return found;
    if (blind)
        return HOFF__PUB_UNKNOWN;
    /* We see the namespace and the pid is not in it; or we are in the
     * initial namespace and see every process, and none is in it. */
    if (seen_ns || hoff__pub_self_ns() == INIT_PID_NS)
        return HOFF__PUB_GONE;
    return HOFF__PUB_UNKNOWN;
}

int hoff__pub_writer_alive_in(const struct hoff__pub_header *h, const char *proc) {
    static const uint8_t zero[16];
    uint8_t boot[16];

    if (h->pid <= 0)
        return HOFF__PUB_GONE;
    hoff__pub_boot_id(boot);
    if (memcmp(boot, zero, 16) != 0 && memcmp(h->boot_id, zero, 16) != 0 && memcmp(boot, h->boot_id, 16) != 0)
        return HOFF__PUB_GONE; /* written before this boot */
    if (h->pid_ns == hoff__pub_self_ns())
        return alive_same_ns(h, proc);
    return alive_other_ns(h, proc);
}

int hoff__pub_writer_alive(const struct hoff__pub_header *h) {
    return hoff__pub_writer_alive_in(h, "/proc");
}

int hoff__pub_name_alive(uint64_t ns, pid_t pid) {
    if (ns != hoff__pub_self_ns())
        return HOFF__PUB_UNKNOWN;
    return kill(pid, 0) != 0 && errno == ESRCH ? HOFF__PUB_GONE : HOFF__PUB_ALIVE;
}
