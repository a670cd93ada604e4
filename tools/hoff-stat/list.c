/* list.c — hoff-stat without -p or --job: the list of the user's hoff processes, the ranks of a job grouped
 * under its id with the job's total, as a table or JSON, and --clean.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoff-stat.h"

/* --- jobs ------------------------------------------------------------------------ */

/* What a job's ranks on this node add up to: resident, budget, host and NVMe bytes and the pools summed; steps
 * the fewest any rank completed (the job's progress); the slowest rank's last step. */
struct job_total {
    size_t ranks;
    uint64_t world_size, steps_min, last_step_max, resident, budget, host, nvme, mapped, evictions, faults;
    int state;               /* the ranks' common plan state, or -1 when they differ */
    struct hoff_stats floor; /* plans, plan_floor_bytes (summed over the ranks with a plan) and plan_floor_phase
                                (their common phase, or FLOOR_PHASE_MIXED): for floor_text */
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
    if (st->plans) {
        t->floor.plan_floor_phase = !t->floor.plans || t->floor.plan_floor_phase == st->plan_floor_phase
                                        ? st->plan_floor_phase
                                        : FLOOR_PHASE_MIXED;
        t->floor.plans++;
        t->floor.plan_floor_bytes += st->plan_floor_bytes;
    }
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

    char fl[32];

    printf("%7s  %-15.15s %-7s %-8s %-8s %6" PRIu64 " %6s %6s %10s %7s  job total (%zu ranks here; steps: the "
           "fewest; bytes: summed)\n",
           "total", job, "", "", t.state < 0 ? "mixed" : PSTATE((uint64_t)t.state), t.steps_min, HS(t.resident),
           t.budget ? HS(t.budget) : "none", floor_text(&t.floor, fl, sizeof fl), "", t.ranks);
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

/* The JSON form of the list: every segment's process, then the jobs. */
static void print_list_json(const struct entry *v, size_t n) {
    size_t i;

    printf("{\"time\":%.3f,\"uid\":%u,\"processes\":[", now_s(), (unsigned)getuid());
    for (i = 0; i < n; i++) {
        const struct entry *e = &v[i];
        char comm[64];

        proc_comm(e->ns == hoff__pub_self_ns() ? e->pid : 0, e->ok ? &e->h : NULL, comm, sizeof comm);
        printf("%s{\"segment\":", i ? "," : "");
        json_str(stdout, e->name);
        printf(",\"pid\":%d,\"pid_namespace\":%" PRIu64 ",\"same_namespace\":%s,\"command\":", (int)e->pid, e->ns,
               e->ns == hoff__pub_self_ns() ? "true" : "false");
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
            printf(",\"state\":\"%s\",\"steps\":%" PRIu64 ",\"resident_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64
                   ",\"started\":%.3f",
                   PSTATE(e->st.plan_state), e->st.steps, e->st.resident_bytes, e->st.budget_bytes,
                   (double)e->h.start_ns / 1e9);
            print_floor_json(stdout, &e->st, e->floor_op);
            {
                char j[80];

                printf(",\"job\":");
                if (entry_job(e, j, sizeof j)[0])
                    json_str(stdout, j);
                else
                    printf("null");
                printf(",\"rank\":%" PRIu64 ",\"world_size\":%" PRIu64 ",\"local_rank\":%" PRIu64
                       ",\"device\":%" PRIu64,
                       e->st.rank, e->st.world_size, e->st.local_rank, e->st.device);
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
}

/* The table's row of v[i], with its job's heading before it when it is the job's first rank and the job's total
 * after it when it is the last. */
static void print_list_row(const struct entry *v, size_t n, size_t i, uint64_t now_ns) {
    const struct entry *e = &v[i];
    char job[80], pj[80];

    /* A job's first rank: its heading; after its last: its total. */
    if (entry_job(e, job, sizeof job)[0] && (i == 0 || strcmp(entry_job(&v[i - 1], pj, sizeof pj), job)))
        print_job_heading(v + i, n - i, job);
    char comm[64], b[32], p[32], up[32], fl[32];
    const char *status = e->alive == HOFF__PUB_ALIVE     ? "alive"
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
        printf("%7s  %-15.15s %-7s %-8s %-8s %6s %6s %6s %10s %7s  refused: %s%s\n", pidcol, comm, "-", "-", "-", "-",
               "-", "-", "-", "-", e->why, e->alive == HOFF__PUB_GONE ? " (process gone: stale)" : "");
        return;
    }
    clean_name(b, sizeof b, e->h.backend, sizeof e->h.backend);
    clean_name(p, sizeof p, e->h.planner, sizeof e->h.planner);
    huptime(now_ns > e->h.start_ns ? (now_ns - e->h.start_ns) / 1000000000ull : 0, up, sizeof up);
    floor_text(&e->st, fl, sizeof fl);
    if (job[0]) /* a rank: its rank and device in the status column */
        printf("%7s  %-15.15s %-7.7s %-8.8s %-8s %6" PRIu64 " %6s %6s %10s %7s  rank %" PRIu64 " on GPU %" PRIu64
               ", %s\n",
               pidcol, comm, b, p, PSTATE(e->st.plan_state), e->st.steps, HS(e->st.resident_bytes),
               e->st.budget_bytes ? HS(e->st.budget_bytes) : "none", fl, up, e->st.rank, e->st.device, status);
    else
        printf("%7s  %-15.15s %-7.7s %-8.8s %-8s %6" PRIu64 " %6s %6s %10s %7s  %s\n", pidcol, comm, b, p,
               PSTATE(e->st.plan_state), e->st.steps, HS(e->st.resident_bytes),
               e->st.budget_bytes ? HS(e->st.budget_bytes) : "none", fl, up, status);
    if (job[0] && (i + 1 == n || strcmp(entry_job(&v[i + 1], pj, sizeof pj), job)))
        print_job_total(v, i + 1, job);
}

/* --clean: remove the stale segments (their process gone), saying which; stale is how many there are. */
static void clean_stale(const struct opts *o, struct entry *v, size_t n, size_t stale) {
    size_t i, removed = 0;

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

int cmd_list(const struct opts *o) {
    struct entry *v;
    size_t n, i, stale = 0;
    uint64_t now_ns = (uint64_t)(now_s() * 1e9);

    if (scan(o->dir, &v, &n))
        return EXIT_FAIL;
    for (i = 0; i < n; i++)
        stale += v[i].alive == HOFF__PUB_GONE;
    if (o->json) {
        print_list_json(v, n);
    } else if (n == 0) {
        printf("no hoff processes of uid %u (no %s/" HOFF__PUB_PREFIX "%u.* segments)\n", (unsigned)getuid(), o->dir,
               (unsigned)getuid());
    } else {
        printf("%7s  %-15s %-7s %-8s %-8s %6s %6s %6s %10s %7s  %s\n", "PID", "COMMAND", "BACKEND", "PLANNER", "STATE",
               "STEPS", "RESID", "BUDGET", "FLOOR", "UPTIME", "STATUS");
        for (i = 0; i < n; i++)
            print_list_row(v, n, i, now_ns);
    }
    if (!o->json && !o->clean && stale)
        printf("%zu stale segment%s (process gone): 'hoff-stat --clean' removes %s\n", stale, stale == 1 ? "" : "s",
               stale == 1 ? "it" : "them");
    for (i = 0; i < n; i++) {
        if (!v[i].ok && v[i].alive != HOFF__PUB_GONE)
            fprintf(stderr, "%s: %s/%s: refused: %s\n", cmd, o->dir, v[i].name, v[i].why);
    }
    if (o->clean)
        clean_stale(o, v, n, stale);
    free(v);
    return 0;
}
