/* segment.c — hoff-stat's reading of the statistics segments: a read that survives a segment truncated under
 * it (SIGBUS), the scan of a directory for the user's segments with each one probed, printable names, and the
 * removal of a stale segment.  Threading: single-threaded (the SIGBUS jump buffer is the process's).  Never
 * follows a link, reads only the user's own segments, never writes to one. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/grow.h"
#include "hoff-stat.h"

/* --- reading a segment without dying on a truncation under our feet --------- */

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;

void on_sigbus(int sig) {
    if (bus_armed)
        siglongjmp(bus_jmp, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* hoff__pub_read_floor, but a segment truncated after it was checked (SIGBUS on
 * the mapping) is an error, not a crash. */
int read_guarded(const struct hoff__pub_reader *r, struct hoff_stats *st, char *floor_op, uint64_t *un, uint64_t *up) {
    int rc;

    if (sigsetjmp(bus_jmp, 1)) {
        bus_armed = 0;
        return -EFAULT;
    }
    bus_armed = 1;
    rc = hoff__pub_read_floor(r, st, floor_op, un, up, 10000);
    bus_armed = 0;
    return rc;
}

const char *read_error(int rc) {
    switch (rc) {
    case -EFAULT: return "the segment was truncated while being read";
    case -EAGAIN: return "the writer kept the segment busy (no consistent copy after 10000 tries)";
    case -EPROTO: return "the counters in the segment are not of this stats version";
    default: return strerror(-rc);
    }
}

/* A printable copy of a fixed-size name from the segment. */
void clean_name(char *dst, size_t len, const char *src, size_t srclen) {
    size_t i;

    for (i = 0; i + 1 < len && i < srclen && src[i]; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[i] = '\0';
    if (!dst[0] && len > 1) {
        dst[0] = '?';
        dst[1] = '\0';
    }
}

/* The process's name: /proc/PID/comm when readable, else the segment's. */
void proc_comm(pid_t pid, const struct hoff__pub_header *h, char *buf, size_t len) {
    char path[64], line[64] = "";
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    f = fopen(path, "re");
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    if (line[0])
        clean_name(buf, len, line, sizeof line);
    else if (h)
        clean_name(buf, len, h->comm, sizeof h->comm);
    else
        snprintf(buf, len, "?");
}

/* The job id of a readable segment ("" outside a job, or unreadable), printable. */
const char *entry_job(const struct entry *e, char *buf, size_t len) {
    if (!e->ok || !e->h.job[0]) {
        buf[0] = '\0';
        return buf;
    }
    clean_name(buf, len, e->h.job, sizeof e->h.job);
    return buf;
}

/* Processes outside a job first (by pid), then each job's ranks together, by rank. */
static int cmp_entry(const void *a, const void *b) {
    const struct entry *x = a, *y = b;
    char jx[80], jy[80];
    int c = strcmp(entry_job(x, jx, sizeof jx), entry_job(y, jy, sizeof jy));

    if (c)
        return c;
    if (jx[0] && x->st.rank != y->st.rank)
        return x->st.rank < y->st.rank ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void probe(const char *dir, struct entry *e) {
    struct hoff__pub_reader r;
    int rc;

    rc = hoff__pub_open(dir, e->name, &r, e->why, sizeof e->why);
    if (rc) {
        e->rc = rc;
        /* A segment of ours that cannot be read, whose process is gone
         * (killed while creating it, say), is stale as well. */
        e->alive = hoff__pub_name_alive(e->ns, e->pid);
        return;
    }
    e->h = r.h;
    rc = read_guarded(&r, &e->st, e->floor_op, &e->update_ns, NULL);
    hoff__pub_close(&r);
    if (rc) {
        e->rc = rc;
        snprintf(e->why, sizeof e->why, "%s", read_error(rc));
        e->alive = hoff__pub_name_alive(e->ns, e->pid);
        return;
    }
    if (e->h.pid != e->pid || e->h.pid_ns != e->ns) {
        e->rc = -EPROTO;
        snprintf(e->why, sizeof e->why,
                 "written by pid %d of pid namespace %" PRIu64 ", but named for pid %d of %" PRIu64, (int)e->h.pid,
                 e->h.pid_ns, (int)e->pid, e->ns);
        e->alive = hoff__pub_name_alive(e->ns, e->pid);
        return;
    }
    e->ok = 1;
    e->alive = hoff__pub_writer_alive(&e->h);
}

/* Segments of this user in dir: hoff.<uid>.<ns>.<pid>[.<k>]. */
int scan(const char *dir, struct entry **out, size_t *n) {
    char prefix[64];
    struct dirent *d;
    struct entry *v = NULL;
    size_t cap = 0;
    DIR *dp;

    *out = NULL;
    *n = 0;
    snprintf(prefix, sizeof prefix, HOFF__PUB_PREFIX "%u.", (unsigned)getuid());
    dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "%s: cannot read %s: %s\n", cmd, dir, strerror(errno));
        return -1;
    }
    while ((d = readdir(dp)) != NULL) {
        uid_t uid;
        pid_t pid;
        uint64_t ns;

        if (strncmp(d->d_name, prefix, strlen(prefix)) != 0 || !hoff__pub_parse_name(d->d_name, &uid, &ns, &pid) ||
            uid != getuid())
            continue;
        if (HOFF__GROW(v, cap, *n + 1)) {
            free(v);
            closedir(dp);
            fprintf(stderr, "%s: out of memory\n", cmd);
            return -1;
        }
        memset(&v[*n], 0, sizeof v[*n]);
        snprintf(v[*n].name, sizeof v[*n].name, "%s", d->d_name);
        v[*n].pid = pid;
        v[*n].ns = ns;
        (*n)++;
    }
    closedir(dp);
    for (size_t i = 0; i < *n; i++)
        probe(dir, &v[i]);
    if (*n)
        qsort(v, *n, sizeof *v, cmp_entry);
    *out = v;
    return 0;
}

/* Remove a stale segment: only a regular file or a symbolic link (never
 * followed) of ours, whose process is known to be gone (never one of
 * another pid namespace whose liveness cannot be told from here). */
int remove_stale(const char *dir, const struct entry *e) {
    char path[4096];
    struct stat st;

    snprintf(path, sizeof path, "%s/%s", dir, e->name);
    if (lstat(path, &st) != 0)
        return -errno;
    if (st.st_uid != getuid())
        return -EPERM;
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return -EINVAL;
    if ((e->ok ? hoff__pub_writer_alive(&e->h) : hoff__pub_name_alive(e->ns, e->pid)) != HOFF__PUB_GONE)
        return -EBUSY;
    return unlink(path) == 0 ? 0 : -errno;
}
