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
#include <sys/stat.h>
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

static int all_digits(const char *s, size_t n) {
    size_t i;

    if (n == 0 || n > 10)
        return 0;
    for (i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

int hoff__pub_parse_name(const char *name, uid_t *uid, pid_t *pid) {
    const char *p, *dot1, *dot2;
    size_t plen = strlen(HOFF__PUB_PREFIX);
    unsigned long long u, q;

    if (!name || strncmp(name, HOFF__PUB_PREFIX, plen) != 0)
        return 0;
    p = name + plen;
    dot1 = strchr(p, '.');
    if (!dot1 || !all_digits(p, (size_t)(dot1 - p)))
        return 0;
    dot2 = strchr(dot1 + 1, '.');
    if (!all_digits(dot1 + 1, dot2 ? (size_t)(dot2 - dot1 - 1) : strlen(dot1 + 1)))
        return 0;
    if (dot2 && !all_digits(dot2 + 1, strlen(dot2 + 1)))
        return 0;
    u = strtoull(p, NULL, 10);
    q = strtoull(dot1 + 1, NULL, 10);
    if (u > UINT32_MAX || q == 0 || q > INT32_MAX)
        return 0;
    if (uid)
        *uid = (uid_t)u;
    if (pid)
        *pid = (pid_t)q;
    return 1;
}

int hoff__pub_check_stat(const struct stat *st, uid_t uid, char *err, size_t errlen) {
    if (S_ISLNK(st->st_mode))
        return fail(-ELOOP, err, errlen, "a symbolic link, not a segment (never followed)");
    if (!S_ISREG(st->st_mode))
        return fail(-EINVAL, err, errlen, "not a regular file (mode %06o)", (unsigned)st->st_mode);
    if (st->st_uid != uid)
        return fail(-EPERM, err, errlen, "owned by uid %u, not by you (uid %u)", (unsigned)st->st_uid,
                    (unsigned)uid);
    if (st->st_mode & 077)
        return fail(-EPERM, err, errlen, "mode %04o: group or others may access it (a segment is 0600)",
                    (unsigned)(st->st_mode & 07777));
    if ((uint64_t)st->st_size != sizeof(struct hoff__pub_segment))
        return fail(-EMSGSIZE, err, errlen, "%" PRIu64 " bytes, a segment of this hoff version has %zu%s",
                    (uint64_t)st->st_size, sizeof(struct hoff__pub_segment),
                    (uint64_t)st->st_size < sizeof(struct hoff__pub_segment) ? " (truncated?)" : "");
    return 0;
}

int hoff__pub_check_header(const struct hoff__pub_header *h, uint64_t file_size, uid_t uid, char *err,
                           size_t errlen) {
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
                    "segment of %u bytes with a %u-byte header; this hoff-stat reads %zu with %zu",
                    (unsigned)h->size, (unsigned)h->header_size, sizeof(struct hoff__pub_segment), sizeof *h);
    if (h->stats_version != HOFF_STATS_VERSION || h->stats_size != sizeof(struct hoff_stats))
        return fail(-EPROTO, err, errlen,
                    "stats version %u size %u; this hoff-stat reads version %d size %zu (use the hoff-stat of "
                    "the writer's hoff)",
                    (unsigned)h->stats_version, (unsigned)h->stats_size, HOFF_STATS_VERSION,
                    sizeof(struct hoff_stats));
    if (h->uid != (uint32_t)uid)
        return fail(-EPERM, err, errlen, "written for uid %u, not for you (uid %u)", (unsigned)h->uid,
                    (unsigned)uid);
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
        return fail(-errno, err, errlen, "%s", errno == ENOENT ? "no such segment (the process has exited?)"
                                                                : strerror(errno));
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

int hoff__pub_read_seg(const struct hoff__pub_segment *seg, struct hoff_stats *out, uint64_t *update_ns,
                       uint64_t *updates, int tries) {
    const uint64_t *src = (const uint64_t *)(const void *)&seg->st;
    uint64_t *dst = (uint64_t *)(void *)out;
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
        un = __atomic_load_n(&seg->h.update_ns, __ATOMIC_RELAXED);
        up = __atomic_load_n(&seg->h.updates, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = __atomic_load_n(&seg->h.seq, __ATOMIC_RELAXED);
        if (s1 == s2) {
            if (out->version != HOFF_STATS_VERSION || out->size != sizeof *out)
                return -EPROTO;
            if (update_ns)
                *update_ns = un;
            if (updates)
                *updates = up;
            return 0;
        }
    }
    return -EAGAIN;
}

int hoff__pub_read(const struct hoff__pub_reader *r, struct hoff_stats *st, uint64_t *update_ns, uint64_t *updates,
                   int tries) {
    if (!r || !r->seg)
        return -EINVAL;
    return hoff__pub_read_seg(r->seg, st, update_ns, updates, tries);
}

uint64_t hoff__proc_start(pid_t pid) {
    char path[64], buf[1024], *p;
    unsigned long long v = 0;
    size_t n;
    FILE *f;
    int field;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
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
    /* p is at field 3 (state) preceded by a space; starttime is field 22. */
    for (field = 3; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
    }
    if (!p || sscanf(p, " %llu", &v) != 1)
        return 0;
    return (uint64_t)v;
}

int hoff__pub_writer_alive(const struct hoff__pub_header *h) {
    uint64_t start;

    if (h->pid <= 0)
        return 0;
    if (kill((pid_t)h->pid, 0) != 0 && errno == ESRCH)
        return 0;
    if (h->proc_start) {
        start = hoff__proc_start((pid_t)h->pid);
        if (start && start != h->proc_start)
            return 0; /* the pid was reused */
    }
    return 1;
}
