/* hoff-stat.c — live statistics of the hoff processes of the calling user, read from their shared-memory segments:
 * a list of processes, or one process watched a line per interval in the manner of vmstat (or as JSON).
 * Threading: single-threaded.  Never follows a link, reads only the user's own segments, never writes to one. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/publish.h"
#include "hoff.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2

static const char *cmd = "hoff-stat";

struct opts {
    const char *dir;       /* where the segments are */
    const char *target;    /* -p: "PID" or "PID.K" */
    double interval;       /* seconds */
    long count;            /* samples; -1 = until the process ends */
    int json, clean;
};

/* --- reading a segment without dying on a truncation under our feet --------- */

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;

static void on_sigbus(int sig) {
    if (bus_armed)
        siglongjmp(bus_jmp, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* hoff__pub_read, but a segment truncated after it was checked (SIGBUS on
 * the mapping) is an error, not a crash. */
static int read_guarded(const struct hoff__pub_reader *r, struct hoff_stats *st, uint64_t *un, uint64_t *up) {
    int rc;

    if (sigsetjmp(bus_jmp, 1)) {
        bus_armed = 0;
        return -EFAULT;
    }
    bus_armed = 1;
    rc = hoff__pub_read(r, st, un, up, 10000);
    bus_armed = 0;
    return rc;
}

static const char *read_error(int rc) {
    switch (rc) {
    case -EFAULT:
        return "the segment was truncated while being read";
    case -EAGAIN:
        return "the writer kept the segment busy (no consistent copy after 10000 tries)";
    case -EPROTO:
        return "the counters in the segment are not of this stats version";
    default:
        return strerror(-rc);
    }
}

/* --- formatting ------------------------------------------------------------------ */

/* Bytes in at most 5 characters: 0, 1023, 1.5K, 116M, 1023M, 9.5G. */
static const char *hsize(uint64_t v, char *buf, size_t len) {
    static const char units[] = "KMGTPE";
    double d = (double)v;
    int u = -1;

    if (v < 1024) {
        snprintf(buf, len, "%" PRIu64, v);
        return buf;
    }
    while (d >= 1024.0 && u < 5) {
        d /= 1024.0;
        u++;
    }
    if (d < 9.95)
        snprintf(buf, len, "%.1f%c", d, units[u]);
    else
        snprintf(buf, len, "%.0f%c", d, units[u]);
    return buf;
}

/* A count in at most 5 characters: 0, 9999, 12.3k, 456k, 1.2M. */
static const char *hcount(double v, char *buf, size_t len) {
    if (v < 0)
        v = 0;
    if (v < 10 && v != floor(v))
        snprintf(buf, len, "%.1f", v);
    else if (v < 10000)
        snprintf(buf, len, "%.0f", v);
    else if (v < 1e5)
        snprintf(buf, len, "%.1fk", v / 1e3);
    else if (v < 1e6)
        snprintf(buf, len, "%.0fk", v / 1e3);
    else if (v < 1e7)
        snprintf(buf, len, "%.1fM", v / 1e6);
    else
        snprintf(buf, len, "%.0fM", v / 1e6);
    return buf;
}

/* A duration in at most 6 characters: 850ns, 12us, 18.9ms, 1.25s, 312s. */
static const char *htime(uint64_t ns, char *buf, size_t len) {
    if (ns < 1000)
        snprintf(buf, len, "%" PRIu64 "ns", ns);
    else if (ns < 1000000)
        snprintf(buf, len, "%.0fus", (double)ns / 1e3);
    else if (ns < 100000000)
        snprintf(buf, len, "%.1fms", (double)ns / 1e6);
    else if (ns < 1000000000)
        snprintf(buf, len, "%.0fms", (double)ns / 1e6);
    else if (ns < 100000000000ull)
        snprintf(buf, len, "%.2fs", (double)ns / 1e9);
    else
        snprintf(buf, len, "%.0fs", (double)ns / 1e9);
    return buf;
}

static const char *huptime(uint64_t s, char *buf, size_t len) {
    if (s < 60)
        snprintf(buf, len, "%" PRIu64 "s", s);
    else if (s < 3600)
        snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
    else
        snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s / 3600 % 24);
    return buf;
}

#define HS(x) hsize((x), (char[16]){0}, 16)
/* stats.plan_state read from a segment, named ("unknown" past the enum) */
#define PSTATE(x) hoff_plan_state_name((x) <= HOFF_PLAN_FALLBACK ? (int)(x) : -1)
#define HC(x) hcount((x), (char[16]){0}, 16)
#define HT(x) htime((x), (char[16]){0}, 16)

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* A printable copy of a fixed-size name from the segment. */
static void clean_name(char *dst, size_t len, const char *src, size_t srclen) {
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
static void proc_comm(pid_t pid, const struct hoff__pub_header *h, char *buf, size_t len) {
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

static double now_s(void) {
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- list mode -------------------------------------------------------------------- */

struct entry {
    char name[256];
    pid_t pid;                  /* in the writer's pid namespace */
    uint64_t ns;                /* that namespace (from the name) */
    int ok;                     /* opened and read */
    int alive;                  /* HOFF__PUB_ALIVE, _GONE or _UNKNOWN */
    int rc;                     /* refusal */
    char why[256];
    struct hoff__pub_header h;
    struct hoff_stats st;
    uint64_t update_ns;
};

/* A liveness as JSON: null when it cannot be told (another pid namespace). */
#define ALIVE_JSON(a) ((a) == HOFF__PUB_ALIVE ? "true" : (a) == HOFF__PUB_GONE ? "false" : "null")

static int cmp_entry(const void *a, const void *b) {
    const struct entry *x = a, *y = b;

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
    rc = read_guarded(&r, &e->st, &e->update_ns, NULL);
    hoff__pub_close(&r);
    if (rc) {
        e->rc = rc;
        snprintf(e->why, sizeof e->why, "%s", read_error(rc));
        e->alive = hoff__pub_name_alive(e->ns, e->pid);
        return;
    }
    if (e->h.pid != e->pid || e->h.pid_ns != e->ns) {
        e->rc = -EPROTO;
        snprintf(e->why, sizeof e->why, "written by pid %d of pid namespace %" PRIu64 ", but named for pid %d of %" PRIu64,
                 (int)e->h.pid, e->h.pid_ns, (int)e->pid, e->ns);
        e->alive = hoff__pub_name_alive(e->ns, e->pid);
        return;
    }
    e->ok = 1;
    e->alive = hoff__pub_writer_alive(&e->h);
}

/* Segments of this user in dir: hoff.<uid>.<ns>.<pid>[.<k>]. */
static int scan(const char *dir, struct entry **out, size_t *n) {
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
        if (*n == cap) {
            struct entry *nv;

            cap = cap ? cap * 2 : 16;
            nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                closedir(dp);
                fprintf(stderr, "%s: out of memory\n", cmd);
                return -1;
            }
            v = nv;
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
static int remove_stale(const char *dir, const struct entry *e) {
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

static int cmd_list(const struct opts *o) {
    struct entry *v;
    size_t n, i, stale = 0, removed = 0;
    uint64_t now_ns = (uint64_t)(now_s() * 1e9);

    if (scan(o->dir, &v, &n))
        return EXIT_FAIL;
    for (i = 0; i < n; i++)
        stale += v[i].alive == HOFF__PUB_GONE;
    if (o->json) {
        printf("{\"time\":%.3f,\"uid\":%u,\"processes\":[", now_s(), (unsigned)getuid());
        for (i = 0; i < n; i++) {
            const struct entry *e = &v[i];
            char comm[64];

            proc_comm(e->ns == hoff__pub_self_ns() ? e->pid : 0, e->ok ? &e->h : NULL, comm, sizeof comm);
            printf("%s{\"segment\":", i ? "," : "");
            json_str(stdout, e->name);
            printf(",\"pid\":%d,\"pid_namespace\":%" PRIu64 ",\"same_namespace\":%s,\"command\":", (int)e->pid,
                   e->ns, e->ns == hoff__pub_self_ns() ? "true" : "false");
            json_str(stdout, comm);
            printf(",\"alive\":%s,\"readable\":%s", ALIVE_JSON(e->alive), e->ok ? "true" : "false");
            if (e->ok) {
                char b[32], p[32];

                clean_name(b, sizeof b, e->h.backend, sizeof e->h.backend);
                clean_name(p, sizeof p, e->h.planner, sizeof e->h.planner);
                printf(",\"backend\":");
                json_str(stdout, b);
                printf(",\"planner\":");
                json_str(stdout, p);
                printf(",\"state\":\"%s\",\"steps\":%" PRIu64 ",\"resident_bytes\":%" PRIu64
                       ",\"budget_bytes\":%" PRIu64 ",\"started\":%.3f",
                       PSTATE(e->st.plan_state), e->st.steps, e->st.resident_bytes, e->st.budget_bytes,
                       (double)e->h.start_ns / 1e9);
            } else {
                printf(",\"error\":");
                json_str(stdout, e->why);
            }
            printf("}");
        }
        printf("]}\n");
    } else if (n == 0) {
        printf("no hoff processes of uid %u (no %s/" HOFF__PUB_PREFIX "%u.* segments)\n", (unsigned)getuid(), o->dir,
               (unsigned)getuid());
    } else {
        printf("%7s  %-15s %-7s %-8s %-8s %6s %6s %6s %7s  %s\n", "PID", "COMMAND", "BACKEND", "PLANNER", "STATE",
               "STEPS", "RESID", "BUDGET", "UPTIME", "STATUS");
        for (i = 0; i < n; i++) {
            const struct entry *e = &v[i];
            char comm[64], b[32], p[32], up[32];
            const char *status = e->alive == HOFF__PUB_ALIVE    ? "alive"
                                 : e->alive == HOFF__PUB_UNKNOWN ? "other pid namespace (cannot tell if alive)"
                                                                 : "stale (process gone)";
            char pidcol[32];

            /* A pid of another namespace is not one of ours: marked with its namespace. */
            if (e->ns == hoff__pub_self_ns())
                snprintf(pidcol, sizeof pidcol, "%d", (int)e->pid);
            else
                snprintf(pidcol, sizeof pidcol, "%d@ns", (int)e->pid);
            proc_comm(e->ns == hoff__pub_self_ns() ? e->pid : 0, e->ok ? &e->h : NULL, comm, sizeof comm);
            if (!e->ok) {
                printf("%7s  %-15.15s %-7s %-8s %-8s %6s %6s %6s %7s  refused: %s%s\n", pidcol, comm, "-", "-",
                       "-", "-", "-", "-", "-", e->why,
                       e->alive == HOFF__PUB_GONE ? " (process gone: stale)" : "");
                continue;
            }
            clean_name(b, sizeof b, e->h.backend, sizeof e->h.backend);
            clean_name(p, sizeof p, e->h.planner, sizeof e->h.planner);
            huptime(now_ns > e->h.start_ns ? (now_ns - e->h.start_ns) / 1000000000ull : 0, up, sizeof up);
            printf("%7s  %-15.15s %-7.7s %-8.8s %-8s %6" PRIu64 " %6s %6s %7s  %s\n", pidcol, comm, b, p,
                   PSTATE(e->st.plan_state), e->st.steps, HS(e->st.resident_bytes),
                   e->st.budget_bytes ? HS(e->st.budget_bytes) : "none", up, status);
        }
    }
    if (!o->json && !o->clean && stale)
        printf("%zu stale segment%s (process gone): 'hoff-stat --clean' removes %s\n", stale, stale == 1 ? "" : "s",
               stale == 1 ? "it" : "them");
    for (i = 0; i < n; i++) {
        if (!v[i].ok && v[i].alive != HOFF__PUB_GONE)
            fprintf(stderr, "%s: %s/%s: refused: %s\n", cmd, o->dir, v[i].name, v[i].why);
    }
    if (o->clean) {
        for (i = 0; i < n; i++) {
            int rc;

            if (v[i].alive != HOFF__PUB_GONE)
                continue; /* alive, or of another namespace we cannot see into: never removed */
            rc = remove_stale(o->dir, &v[i]);
            if (rc == 0) {
                removed++;
                fprintf(o->json ? stderr : stdout, "removed %s/%s (process %d is gone)\n", o->dir, v[i].name,
                        (int)v[i].pid);
            } else {
                fprintf(stderr, "%s: %s/%s: not removed: %s\n", cmd, o->dir, v[i].name,
                        rc == -EPERM    ? "owned by another user"
                        : rc == -EINVAL ? "not a regular file or a link"
                        : rc == -EBUSY  ? "its process is running, or cannot be told apart from a running one"
                                        : strerror(-rc));
            }
        }
        if (!o->json && removed == 0 && stale == 0)
            printf("no stale segments\n");
    }
    free(v);
    return 0;
}

/* --- watch mode ------------------------------------------------------------------- */

struct sample {
    struct hoff__pub_header h;
    struct hoff_stats st;
    uint64_t update_ns, updates;
};

static int rows_per_header(void) {
    struct winsize ws;
    const char *l = getenv("LINES");
    int rows = 24;

    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
        rows = ws.ws_row;
    else if (l && atoi(l) > 0)
        rows = atoi(l);
    return rows > 4 ? rows - 2 : 2;
}

/* The columns of a line: group, name, width. */
struct col {
    const char *group, *name;
    int width;
};

static const struct col cols[] = {
    {"plan", "state", -8},   {"plan", "steps", 5},    {"plan", "step", 6},
    {"offload bytes", "budget", 6}, {"offload bytes", "resid", 6}, {"offload bytes", "peak", 6},
    {"offload bytes", "host", 6},   {"offload bytes", "nvme", 6},  {"offload bytes", "cap%", 4},
    {"bytes/s", "d2h", 6},   {"bytes/s", "h2d", 6},   {"bytes/s", "spill", 6}, {"bytes/s", "restor", 6},
    {"interval", "evict", 5}, {"interval", "late", 5}, {"interval", "fault", 5},
    {"pools", "hit%", 5},    {"pools", "mapped", 6},
};
#define NCOLS ((int)(sizeof cols / sizeof cols[0]))

static int col_w(int i) {
    return cols[i].width < 0 ? -cols[i].width : cols[i].width;
}

/* "--group-----" over each run of columns of one group, then the names. */
static void print_header(void) {
    char line[512];
    size_t pos = 0;
    int i, j;

    for (i = 0; i < NCOLS; i = j) {
        int w = 0, k;

        for (j = i; j < NCOLS && strcmp(cols[j].group, cols[i].group) == 0; j++)
            w += col_w(j) + (j > i);
        k = snprintf(line + pos, sizeof line - pos, "%s-%s", i ? " " : "", cols[i].group);
        pos += (size_t)k;
        for (k = (int)strlen(cols[i].group) + 1; k < w && pos + 1 < sizeof line; k++)
            line[pos++] = '-';
        line[pos] = '\0';
    }
    puts(line);
    for (i = 0; i < NCOLS; i++)
        printf("%s%*s", i ? " " : "", cols[i].width, cols[i].name);
    putchar('\n');
}

static void print_row(char v[][16]) {
    int i;

    for (i = 0; i < NCOLS; i++)
        printf("%s%*s", i ? " " : "", cols[i].width, v[i]);
    putchar('\n');
}

/* Per second over the publish times (the counters are as of them). */
static double rate(uint64_t now, uint64_t then, double secs) {
    return secs > 0 && now >= then ? (double)(now - then) / secs : 0.0;
}

static void print_line(const struct sample *s, const struct sample *prev) {
    const struct hoff_stats *a = &s->st, *b = prev ? &prev->st : NULL;
    struct hoff_stats zero;
    uint64_t from_ns = prev ? prev->update_ns : s->h.start_ns;
    double secs = s->update_ns > from_ns ? (double)(s->update_ns - from_ns) / 1e9 : 0.0;
    uint64_t lookups;
    char v[NCOLS][16];
    int i = 0;

    if (!b) {
        memset(&zero, 0, sizeof zero);
        b = &zero;
    }
    lookups = a->cache_hits + a->cache_misses;
#define V(...) snprintf(v[i++], sizeof v[0], __VA_ARGS__)
    V("%s", PSTATE(a->plan_state));
    V("%" PRIu64, a->steps);
    V("%s", a->last_step_ns ? HT(a->last_step_ns) : "-");
    V("%s", a->budget_bytes ? HS(a->budget_bytes) : "none");
    V("%s", HS(a->resident_bytes));
    V("%s", HS(a->peak_resident_bytes));
    V("%s", HS(a->host_bytes));
    V("%s", HS(a->nvme_bytes));
    if (a->host_cap_bytes)
        V("%.0f", 100.0 * (double)a->host_bytes / (double)a->host_cap_bytes);
    else
        V("-");
    V("%s", HS((uint64_t)rate(a->bytes_evicted, b->bytes_evicted, secs)));
    V("%s", HS((uint64_t)rate(a->bytes_prefetched, b->bytes_prefetched, secs)));
    V("%s", HS((uint64_t)rate(a->bytes_spilled, b->bytes_spilled, secs)));
    V("%s", HS((uint64_t)rate(a->bytes_restored, b->bytes_restored, secs)));
    V("%s", HC((double)(a->evictions - b->evictions)));
    V("%s", HC((double)(a->late_prefetches - b->late_prefetches)));
    V("%s", HC((double)(a->faults - b->faults)));
    if (lookups)
        V("%.1f", 100.0 * (double)a->cache_hits / (double)lookups);
    else
        V("-");
    V("%s", HS(a->device_pool_bytes + a->managed_pool_bytes));
#undef V
    print_row(v);
}

static void print_json(const char *name, const struct sample *s, const struct sample *prev, int alive) {
    const struct hoff_stats *a = &s->st, *b = prev ? &prev->st : NULL;
    struct hoff_stats zero;
    uint64_t from_ns = prev ? prev->update_ns : s->h.start_ns;
    double secs = s->update_ns > from_ns ? (double)(s->update_ns - from_ns) / 1e9 : 0.0;
    uint64_t lookups = a->cache_hits + a->cache_misses;
    char comm[64], be[32], pl[32], *js;
    int n;

    if (!b) {
        memset(&zero, 0, sizeof zero);
        b = &zero;
    }
    proc_comm(s->h.pid_ns == hoff__pub_self_ns() ? (pid_t)s->h.pid : 0, &s->h, comm, sizeof comm);
    clean_name(be, sizeof be, s->h.backend, sizeof s->h.backend);
    clean_name(pl, sizeof pl, s->h.planner, sizeof s->h.planner);
    printf("{\"time\":%.6f,\"segment\":", now_s());
    json_str(stdout, name);
    printf(",\"pid\":%d,\"pid_namespace\":%" PRIu64 ",\"uid\":%u,\"command\":", (int)s->h.pid, s->h.pid_ns,
           (unsigned)s->h.uid);
    json_str(stdout, comm);
    printf(",\"backend\":");
    json_str(stdout, be);
    printf(",\"planner\":");
    json_str(stdout, pl);
    printf(",\"state\":\"%s\",\"alive\":%s,\"started\":%.6f,\"updated\":%.6f,\"updates\":%" PRIu64
           ",\"interval_s\":%.6f",
           PSTATE(a->plan_state), ALIVE_JSON(alive), (double)s->h.start_ns / 1e9,
           (double)s->update_ns / 1e9, s->updates, secs);
    printf(",\"rates\":{\"bytes_evicted_per_s\":%.1f,\"bytes_prefetched_per_s\":%.1f,\"bytes_spilled_per_s\":%.1f"
           ",\"bytes_restored_per_s\":%.1f,\"evictions_per_s\":%.3f,\"prefetches_per_s\":%.3f,\"allocs_per_s\":%.3f"
           ",\"frees_per_s\":%.3f,\"steps_per_s\":%.3f}",
           rate(a->bytes_evicted, b->bytes_evicted, secs), rate(a->bytes_prefetched, b->bytes_prefetched, secs),
           rate(a->bytes_spilled, b->bytes_spilled, secs), rate(a->bytes_restored, b->bytes_restored, secs),
           rate(a->evictions, b->evictions, secs), rate(a->prefetches, b->prefetches, secs),
           rate(a->allocs, b->allocs, secs), rate(a->frees, b->frees, secs), rate(a->steps, b->steps, secs));
    printf(",\"interval\":{\"steps\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64
           ",\"late_prefetches\":%" PRIu64 ",\"faults\":%" PRIu64 ",\"divergent_steps\":%" PRIu64 "}",
           a->steps - b->steps, a->evictions - b->evictions, a->prefetches - b->prefetches,
           a->late_prefetches - b->late_prefetches, a->faults - b->faults, a->divergent_steps - b->divergent_steps);
    if (lookups)
        printf(",\"cache_hit_rate\":%.6f", (double)a->cache_hits / (double)lookups);
    else
        printf(",\"cache_hit_rate\":null");
    if (a->host_cap_bytes)
        printf(",\"host_cap_use\":%.6f", (double)a->host_bytes / (double)a->host_cap_bytes);
    else
        printf(",\"host_cap_use\":null");
    n = hoff_stats_format_json(a, NULL, 0);
    js = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (js && hoff_stats_format_json(a, js, (size_t)n + 1) == n)
        printf(",\"stats\":%s}\n", js);
    else
        printf(",\"stats\":null}\n");
    free(js);
}

/* One sample of segment name: 0, or an exit status with the message printed. */
static int take(const struct opts *o, const char *name, struct sample *s, int *alive, int first) {
    struct hoff__pub_reader r;
    char why[256];
    int rc;

    rc = hoff__pub_open(o->dir, name, &r, why, sizeof why);
    if (rc == -ENOENT && !first)
        return -1; /* gone: the process ended */
    if (rc) {
        fprintf(stderr, "%s: %s/%s: refused: %s\n", cmd, o->dir, name, why);
        if (rc == -ENOENT)
            fprintf(stderr, "%s: no hoff process with that pid of uid %u ('hoff-stat' lists them)\n", cmd,
                    (unsigned)getuid());
        return EXIT_FAIL;
    }
    s->h = r.h;
    rc = read_guarded(&r, &s->st, &s->update_ns, &s->updates);
    hoff__pub_close(&r);
    if (rc) {
        fprintf(stderr, "%s: %s/%s: %s\n", cmd, o->dir, name, read_error(rc));
        return EXIT_FAIL;
    }
    *alive = hoff__pub_writer_alive(&s->h);
    return 0;
}

static void sleep_s(double s) {
    struct timespec ts;

    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int cmd_watch(const struct opts *o) {
    struct sample cur, prev;
    char name[128];
    const char *dot = strchr(o->target, '.');
    long i;
    int have_prev = 0, alive = 1, rc, every = rows_per_header(), lines = 0;

    /* PID is a pid of our namespace: the segment named for it there. */
    if (dot)
        snprintf(name, sizeof name, HOFF__PUB_PREFIX "%u.%" PRIu64 ".%.*s.%s", (unsigned)getuid(),
                 hoff__pub_self_ns(), (int)(dot - o->target), o->target, dot + 1);
    else
        snprintf(name, sizeof name, HOFF__PUB_PREFIX "%u.%" PRIu64 ".%s", (unsigned)getuid(), hoff__pub_self_ns(),
                 o->target);
    for (i = 0; o->count < 0 || i < o->count; i++) {
        if (i)
            sleep_s(o->interval);
        rc = take(o, name, &cur, &alive, i == 0);
        if (rc < 0) {
            if (!o->json)
                fflush(stdout);
            fprintf(stderr, "%s: process %s has ended (its segment is gone)\n", cmd, o->target);
            return 0;
        }
        if (rc)
            return rc;
        if (o->json) {
            print_json(name, &cur, have_prev ? &prev : NULL, alive);
        } else {
            if (lines % every == 0)
                print_header();
            print_line(&cur, have_prev ? &prev : NULL);
            lines++;
        }
        fflush(stdout);
        if (alive == HOFF__PUB_GONE) {
            fprintf(stderr,
                    "%s: process %d is gone; its segment is stale (the figures above are its last): "
                    "'hoff-stat --clean' removes it\n",
                    cmd, (int)cur.h.pid);
            return EXIT_FAIL;
        }
        prev = cur;
        have_prev = 1;
    }
    return 0;
}

/* --------------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: hoff-stat [--json] [--clean]          list the hoff processes of this user\n"
            "       hoff-stat -p PID [-i SECONDS] [-c COUNT] [--once] [--json]\n"
            "                                             watch one, a line per interval\n"
            "\n"
            "  -p, --pid PID         the process to watch (PID.K for its K-th context)\n"
            "  -i, --interval SECS   seconds between lines (default 1; fractions allowed)\n"
            "  -c, --count N         stop after N lines (default: until the process ends)\n"
            "      --once            one sample (-c 1)\n"
            "      --json            one JSON object per sample (doc/hoff-stat.schema.json)\n"
            "      --clean           remove the segments of processes that are gone\n"
            "      --dir DIR         where the segments are (default " HOFF__PUB_DIR ")\n"
            "  -h, --help            this text\n"
            "      --version         the version\n"
            "\n"
            "Sizes are in bytes with K, M, G (powers of 1024); d2h, h2d, spill and restor are\n"
            "bytes moved per second; evict, late and fault count the events of the interval.\n"
            "A process publishes unless HOFF_STATS=0.\n"
            "Exit status: 0 ok; 1 the segments cannot be listed, or (-p) the segment is missing,\n"
            "refused or stale; 2 bad usage.  See hoff-stat(1).\n");
}

static int usage_error(const char *fmt, ...) HOFF__PRINTF(1, 2);
static int usage_error(const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "%s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see '%s --help')\n", cmd);
    return EXIT_USAGE;
}

static int valid_target(const char *s) {
    uid_t u;
    pid_t p;
    char name[128];

    if (!s || !*s || strlen(s) > 40)
        return 0;
    snprintf(name, sizeof name, HOFF__PUB_PREFIX "0.1.%s", s);
    return hoff__pub_parse_name(name, &u, NULL, &p);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"pid", required_argument, NULL, 'p'},  {"interval", required_argument, NULL, 'i'},
        {"count", required_argument, NULL, 'c'}, {"once", no_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},       {"clean", no_argument, NULL, 'C'},
        {"dir", required_argument, NULL, 'd'},  {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},    {NULL, 0, NULL, 0}};
    struct opts o;
    struct sigaction sa;
    int opt, once = 0, have_count = 0, have_interval = 0;
    char *end;

    memset(&o, 0, sizeof o);
    o.dir = HOFF__PUB_DIR;
    o.interval = 1.0;
    o.count = -1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":p:i:c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            if (!valid_target(optarg))
                return usage_error("-p: expected a process id (or PID.K), got '%s'", optarg);
            o.target = optarg;
            break;
        case 'i':
            errno = 0;
            o.interval = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o.interval > 0) || o.interval > 86400)
                return usage_error("-i: expected seconds in (0, 86400], got '%s'", optarg);
            have_interval = 1;
            break;
        case 'c':
            errno = 0;
            o.count = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || o.count < 1)
                return usage_error("-c: expected a count >= 1, got '%s'", optarg);
            have_count = 1;
            break;
        case 'o':
            once = 1;
            break;
        case 'j':
            o.json = 1;
            break;
        case 'C':
            o.clean = 1;
            break;
        case 'd':
            o.dir = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("hoff-stat %d.%d.%d\n", HOFF_VERSION_MAJOR, HOFF_VERSION_MINOR, HOFF_VERSION_PATCH);
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (once && have_count && o.count != 1)
        return usage_error("--once and -c %ld contradict each other", o.count);
    if (once)
        o.count = 1;
    if (o.clean && o.target)
        return usage_error("--clean works on the list, not with -p");
    if (!o.target && (have_count || have_interval || once))
        return usage_error("-i, -c and --once need -p PID (the list is printed once)");

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    return o.target ? cmd_watch(&o) : cmd_list(&o);
}
