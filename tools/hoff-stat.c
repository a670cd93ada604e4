/* hoff-stat.c — live statistics of the hoff processes of the calling user, read from their shared-memory segments:
 * a list of processes (the ranks of a multi-process job grouped under their job id, with a job total), or one
 * process, or all ranks of one job on this node, watched a line per interval in the manner of vmstat (or as JSON).
 * Threading: single-threaded.  Never follows a link, reads only the user's own segments, never writes to one. */
#include "config.h"

#include <dirent.h>
#include <stddef.h>
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
    const char *job;       /* --job: a job id */
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

/* The job id of a readable segment ("" outside a job, or unreadable), printable. */
static const char *entry_job(const struct entry *e, char *buf, size_t len) {
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

/* --- jobs ------------------------------------------------------------------------ */

/* What a job's ranks on this node add up to: resident, budget, host and NVMe bytes and the pools summed; steps
 * the fewest any rank completed (the job's progress); the slowest rank's last step. */
struct job_total {
    size_t ranks;
    uint64_t world_size, steps_min, last_step_max, resident, budget, host, nvme, mapped, evictions, faults;
    int state;          /* the ranks' common plan state, or -1 when they differ */
};

static void job_add(struct job_total *t, const struct hoff_stats *st) {
    if (t->ranks == 0) {
        t->steps_min = st->steps;
        t->state = (int)st->plan_state;
    }
    t->ranks++;
    if (st->world_size > t->world_size)
        t->world_size = st->world_size;
    if (st->steps < t->steps_min)
        t->steps_min = st->steps;
    if (st->last_step_ns > t->last_step_max)
        t->last_step_max = st->last_step_ns;
    if ((int)st->plan_state != t->state)
        t->state = -1;
    t->resident += st->resident_bytes;
    t->budget += st->budget_bytes;
    t->host += st->host_bytes;
    t->nvme += st->nvme_bytes;
    t->mapped += st->device_pool_bytes + st->managed_pool_bytes;
    t->evictions += st->evictions;
    t->faults += st->faults;
}

/* The readable entries of v[0..n) of job (sorted: they are together). */
static struct job_total job_sum(const struct entry *v, size_t n, const char *job) {
    struct job_total t;
    char j[80];

    memset(&t, 0, sizeof t);
    for (size_t i = 0; i < n; i++)
        if (strcmp(entry_job(&v[i], j, sizeof j), job) == 0)
            job_add(&t, &v[i].st);
    return t;
}

static void print_job_heading(const struct entry *v, size_t n, const char *job) {
    struct job_total t = job_sum(v, n, job);

    printf("job %s: %zu of %" PRIu64 " rank%s on this node\n", job, t.ranks, t.world_size,
           t.world_size == 1 ? "" : "s");
}

static void print_job_total(const struct entry *v, size_t n, const char *job) {
    struct job_total t = job_sum(v, n, job);

    printf("%7s  %-15.15s %-7s %-8s %-8s %6" PRIu64 " %6s %6s %7s  job total (%zu ranks here; steps: the "
           "fewest; bytes: summed)\n", "total", job, "", "", t.state < 0 ? "mixed" : PSTATE((uint64_t)t.state),
           t.steps_min, HS(t.resident), t.budget ? HS(t.budget) : "none", "", t.ranks);
}

static void print_jobs_json(const struct entry *v, size_t n) {
    size_t i, k, njobs = 0;
    char job[80], pj[80];

    for (i = 0; i < n; i++) {
        struct job_total t;

        if (!entry_job(&v[i], job, sizeof job)[0] || (i && strcmp(entry_job(&v[i - 1], pj, sizeof pj), job) == 0))
            continue;
        t = job_sum(v + i, n - i, job);
        printf("%s{\"job\":", njobs++ ? "," : "");
        json_str(stdout, job);
        printf(",\"world_size\":%" PRIu64 ",\"ranks\":[", t.world_size);
        for (k = i; k < n && strcmp(entry_job(&v[k], pj, sizeof pj), job) == 0; k++)
            printf("%s%" PRIu64, k > i ? "," : "", v[k].st.rank);
        printf("],\"pids\":[");
        for (k = i; k < n && strcmp(entry_job(&v[k], pj, sizeof pj), job) == 0; k++)
            printf("%s%d", k > i ? "," : "", (int)v[k].pid);
        printf("],\"steps_min\":%" PRIu64 ",\"resident_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64
               ",\"host_bytes\":%" PRIu64 ",\"nvme_bytes\":%" PRIu64 ",\"pool_bytes\":%" PRIu64 "}",
               t.steps_min, t.resident, t.budget, t.host, t.nvme, t.mapped);
    }
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
                {
                    char j[80];

                    printf(",\"job\":");
                    if (entry_job(e, j, sizeof j)[0])
                        json_str(stdout, j);
                    else
                        printf("null");
                    printf(",\"rank\":%" PRIu64 ",\"world_size\":%" PRIu64 ",\"local_rank\":%" PRIu64
                           ",\"device\":%" PRIu64, e->st.rank, e->st.world_size, e->st.local_rank, e->st.device);
                }
            } else {
                printf(",\"error\":");
                json_str(stdout, e->why);
            }
            printf("}");
        }
        printf("],\"jobs\":[");
        print_jobs_json(v, n);
        printf("]}\n");
    } else if (n == 0) {
        printf("no hoff processes of uid %u (no %s/" HOFF__PUB_PREFIX "%u.* segments)\n", (unsigned)getuid(), o->dir,
               (unsigned)getuid());
    } else {
        printf("%7s  %-15s %-7s %-8s %-8s %6s %6s %6s %7s  %s\n", "PID", "COMMAND", "BACKEND", "PLANNER", "STATE",
               "STEPS", "RESID", "BUDGET", "UPTIME", "STATUS");
        for (i = 0; i < n; i++) {
            const struct entry *e = &v[i];
            char job[80], pj[80];

            /* A job's first rank: its heading; after its last: its total. */
            if (entry_job(e, job, sizeof job)[0] && (i == 0 || strcmp(entry_job(&v[i - 1], pj, sizeof pj), job)))
                print_job_heading(v + i, n - i, job);
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
            if (job[0]) /* a rank: its rank and device in the status column */
                printf("%7s  %-15.15s %-7.7s %-8.8s %-8s %6" PRIu64 " %6s %6s %7s  rank %" PRIu64 " on GPU %" PRIu64
                       ", %s\n", pidcol, comm, b, p, PSTATE(e->st.plan_state), e->st.steps, HS(e->st.resident_bytes),
                       e->st.budget_bytes ? HS(e->st.budget_bytes) : "none", up, e->st.rank, e->st.device, status);
            else
                printf("%7s  %-15.15s %-7.7s %-8.8s %-8s %6" PRIu64 " %6s %6s %7s  %s\n", pidcol, comm, b, p,
                       PSTATE(e->st.plan_state), e->st.steps, HS(e->st.resident_bytes),
                       e->st.budget_bytes ? HS(e->st.budget_bytes) : "none", up, status);
            if (job[0] && (i + 1 == n || strcmp(entry_job(&v[i + 1], pj, sizeof pj), job)))
                print_job_total(v, i + 1, job);
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

/* "--group-----" over each run of columns of one group, then the names; with lead (--job), a first column. */
static void print_header(const char *lead) {
    char line[512];
    size_t pos = 0;
    int i, j;

    if (lead)
        pos = (size_t)snprintf(line, sizeof line, "%-6s ", "");

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
    if (lead)
        printf("%-6s ", lead);
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

static void print_line(const struct sample *s, const struct sample *prev, const char *lead, const char *state) {
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
    if (lead)
        printf("%-6s ", lead);
    V("%s", state ? state : PSTATE(a->plan_state));
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
                print_header(NULL);
            print_line(&cur, have_prev ? &prev : NULL, NULL, NULL);
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

/* --job ID: every rank of the job on this node, a line each per interval, and the job's total. */
struct rank_slot {
    char name[256];
    struct sample cur, prev;
    int have_prev, seen;
};

static void sum_sample(struct sample *t, const struct sample *s, int first) {
    const uint64_t *a = (const uint64_t *)(const void *)&s->st.budget_bytes;
    uint64_t *z = (uint64_t *)(void *)&t->st.budget_bytes;
    size_t nf = (sizeof s->st - offsetof(struct hoff_stats, budget_bytes)) / sizeof(uint64_t);

    if (first) {
        *t = *s;
        return;
    }
    for (size_t i = 0; i < nf; i++) /* every counter summed; the few that do not add up are set below */
        z[i] += a[i];
    t->st.steps = t->st.steps - s->st.steps; /* undo: the fewest */
    if (s->st.steps < t->st.steps)
        t->st.steps = s->st.steps;
    t->st.last_step_ns -= s->st.last_step_ns;
    if (s->st.last_step_ns > t->st.last_step_ns)
        t->st.last_step_ns = s->st.last_step_ns;
    t->st.plan_state -= s->st.plan_state;
    if (s->update_ns > t->update_ns)
        t->update_ns = s->update_ns;
    if (s->h.start_ns < t->h.start_ns)
        t->h.start_ns = s->h.start_ns;
}

static int cmd_job(const struct opts *o) {
    struct rank_slot *slot = NULL;
    size_t nslot = 0;
    long i;
    int every = rows_per_header(), lines = 0;

    for (i = 0; o->count < 0 || i < o->count; i++) {
        struct entry *v;
        struct sample tot, ptot;
        size_t n, k, found = 0, with_prev = 0, ntot = 0;
        int mixed = 0;
        uint64_t state = 0;
        char j[80];

        if (i)
            sleep_s(o->interval);
        if (scan(o->dir, &v, &n))
            return EXIT_FAIL;
        for (k = 0; k < nslot; k++)
            slot[k].seen = 0;
        for (k = 0; k < n; k++) {
            size_t s;

            if (!v[k].ok || strcmp(entry_job(&v[k], j, sizeof j), o->job) != 0)
                continue;
            for (s = 0; s < nslot && strcmp(slot[s].name, v[k].name) != 0; s++)
                ;
            if (s == nslot) {
                struct rank_slot *ns = realloc(slot, (nslot + 1) * sizeof *slot);

                if (!ns) {
                    free(v);
                    free(slot);
                    fprintf(stderr, "%s: out of memory\n", cmd);
                    return EXIT_FAIL;
                }
                slot = ns;
                memset(&slot[nslot], 0, sizeof slot[nslot]);
                snprintf(slot[nslot].name, sizeof slot[nslot].name, "%s", v[k].name);
                nslot++;
            }
            slot[s].cur.h = v[k].h;
            slot[s].cur.st = v[k].st;
            slot[s].cur.update_ns = v[k].update_ns;
            slot[s].seen = 1;
            found++;
        }
        free(v);
        if (!found) {
            free(slot);
            if (i == 0) {
                fprintf(stderr, "%s: no hoff process of job '%s' of uid %u on this node ('hoff-stat' lists the "
                        "jobs)\n", cmd, o->job, (unsigned)getuid());
                return EXIT_FAIL;
            }
            fprintf(stderr, "%s: job %s has ended (no segment of it is left)\n", cmd, o->job);
            return 0;
        }
        if (!o->json && lines % every == 0)
            print_header("rank");
        memset(&ptot, 0, sizeof ptot);
        for (k = 0; k < nslot; k++) {
            char lead[16];

            if (!slot[k].seen)
                continue;
            if (o->json) {
                print_json(slot[k].name, &slot[k].cur, slot[k].have_prev ? &slot[k].prev : NULL,
                           hoff__pub_writer_alive(&slot[k].cur.h));
            } else {
                snprintf(lead, sizeof lead, "%" PRIu64, slot[k].cur.st.rank);
                print_line(&slot[k].cur, slot[k].have_prev ? &slot[k].prev : NULL, lead, NULL);
            }
            if (ntot == 0)
                state = slot[k].cur.st.plan_state;
            mixed |= slot[k].cur.st.plan_state != state;
            sum_sample(&tot, &slot[k].cur, ntot++ == 0);
            if (slot[k].have_prev)
                sum_sample(&ptot, &slot[k].prev, with_prev++ == 0);
        }
        if (!o->json) {
            tot.st.plan_state = state;
            print_line(&tot, with_prev ? &ptot : NULL, "total", mixed ? "mixed" : NULL);
            lines++;
        }
        fflush(stdout);
        for (k = 0; k < nslot; k++) {
            if (slot[k].seen) {
                slot[k].prev = slot[k].cur;
                slot[k].have_prev = 1;
            }
        }
    }
    free(slot);
    return 0;
}

/* --------------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: hoff-stat [--json] [--clean]          list the hoff processes of this user\n"
            "       hoff-stat -p PID [-i SECONDS] [-c COUNT] [--once] [--json]\n"
            "                                             watch one, a line per interval\n"
            "       hoff-stat --job ID [-i SECONDS] [-c COUNT] [--once] [--json]\n"
            "                                             watch the ranks of a job on this node\n"
            "\n"
            "  -p, --pid PID         the process to watch (PID.K for its K-th context)\n"
            "      --job ID          every rank of job ID on this node (the list names the jobs:\n"
            "                        TORCHELASTIC_RUN_ID, else MASTER_ADDR:MASTER_PORT), a line\n"
            "                        each and the job's total per interval\n"
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
        {"version", no_argument, NULL, 'V'},    {"job", required_argument, NULL, 'J'},
        {NULL, 0, NULL, 0}};
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
        case 'J':
            if (!*optarg || strlen(optarg) >= sizeof((struct hoff__pub_header *)0)->job)
                return usage_error("--job: expected a job id of 1 to %zu characters (as 'hoff-stat' lists them), "
                                   "got '%s'", sizeof((struct hoff__pub_header *)0)->job - 1, optarg);
            o.job = optarg;
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
    if (o.clean && (o.target || o.job))
        return usage_error("--clean works on the list, not with -p or --job");
    if (o.target && o.job)
        return usage_error("-p and --job contradict each other: watch one process or one job");
    if (!o.target && !o.job && (have_count || have_interval || once))
        return usage_error("-i, -c and --once need -p PID or --job ID (the list is printed once)");

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    return o.target ? cmd_watch(&o) : o.job ? cmd_job(&o) : cmd_list(&o);
}
