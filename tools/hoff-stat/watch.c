/* watch.c — hoff-stat -p PID and --job ID: one process, or every rank of one job on this node, sampled every
 * interval until the count is reached or the process (the job) ends.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/grow.h"
#include "hoff-stat.h"

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
    rc = read_guarded(&r, &s->st, s->floor_op, &s->update_ns, &s->updates);
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

int cmd_watch(const struct opts *o) {
    struct sample cur, prev;
    char name[128];
    const char *dot = strchr(o->target, '.');
    long i;
    int have_prev = 0, alive = 1, rc, every = rows_per_header(), lines = 0;

    /* PID is a pid of our namespace: the segment named for it there. */
    if (dot)
        snprintf(name, sizeof name, HOFF__PUB_PREFIX "%u.%" PRIu64 ".%.*s.%s", (unsigned)getuid(), hoff__pub_self_ns(),
                 (int)(dot - o->target), o->target, dot + 1);
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
    /* undo: the floor's phase is the common one of the ranks with a plan, or mixed (its bytes are summed) */
    t->st.plan_floor_phase -= s->st.plan_floor_phase;
    if (s->st.plans) {
        int first_plan = t->st.plans == s->st.plans; /* no rank before this one had a plan */

        if (first_plan)
            t->st.plan_floor_phase = s->st.plan_floor_phase;
        else if (t->st.plan_floor_phase != s->st.plan_floor_phase)
            t->st.plan_floor_phase = FLOOR_PHASE_MIXED;
    }
    if (s->update_ns > t->update_ns)
        t->update_ns = s->update_ns;
    if (s->h.start_ns < t->h.start_ns)
        t->h.start_ns = s->h.start_ns;
}

int cmd_job(const struct opts *o) {
    struct rank_slot *slot = NULL;
    size_t nslot = 0, cap_slot = 0;
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
                if (HOFF__GROW(slot, cap_slot, nslot + 1)) {
                    free(v);
                    free(slot);
                    fprintf(stderr, "%s: out of memory\n", cmd);
                    return EXIT_FAIL;
                }
                memset(&slot[nslot], 0, sizeof slot[nslot]);
                snprintf(slot[nslot].name, sizeof slot[nslot].name, "%s", v[k].name);
                nslot++;
            }
            slot[s].cur.h = v[k].h;
            slot[s].cur.st = v[k].st;
            memcpy(slot[s].cur.floor_op, v[k].floor_op, sizeof slot[s].cur.floor_op);
            slot[s].cur.update_ns = v[k].update_ns;
            slot[s].seen = 1;
            found++;
        }
        free(v);
        if (!found) {
            free(slot);
            if (i == 0) {
                fprintf(stderr,
                        "%s: no hoff process of job '%s' of uid %u on this node ('hoff-stat' lists the "
                        "jobs)\n",
                        cmd, o->job, (unsigned)getuid());
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
