/* planjob.c — planning a recorded step: the work itself (save the trace, plan, group, predict), run either
 * inline or on a background thread of its own so that the training thread never waits for a planner.
 * Threading: a job's thread reads only the trace and options it was given (the caller leaves both unchanged
 * until the job is collected) and writes only the job; `done` is the one field both threads touch, atomically. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "exec/executor.h"

struct hoff__planjob {
    pthread_t th;
    const struct hoff__planner *pl;
    const struct hoff__trace *t;
    struct hoff__plan_opts o;
    uint64_t time_ns;
    char trace_path[256];
    int stop; /* atomic: the caller gave up on the result */
    int done; /* atomic: the thread has finished; the fields below are final */
    struct hoff__plan_result res;
};

/* The plan changed after its planner predicted it (groups): predict again. */
static void repredict(const struct hoff__trace *t, const struct hoff__plan_opts *o, struct hoff__schedule *s) {
    struct hoff__prediction pr;
    uint64_t *T = hoff__plan_times(t);

    if (!T || hoff__plan_predict(t, o, T, s, HOFF__PLACE_KEEP, &pr) != 0)
        s->stall_ns = UINT64_MAX; /* not known: reported as 0 */
    free(T);
}

void hoff__plan_make(const struct hoff__planner *pl, const struct hoff__trace *t, const struct hoff__plan_opts *opts,
                     uint64_t time_ns, const char *trace_path, struct hoff__plan_result *r) {
    struct hoff__plan_opts oc = *opts, *o = &oc;
    int rc;

    memset(r, 0, sizeof *r);
    hoff__schedule_init(&r->sched);
    if (trace_path && trace_path[0]) {
        rc = hoff__trace_save(t, trace_path);
        if (rc)
            snprintf(r->save_err, sizeof r->save_err, "%s: %s", hoff_strerror(rc), hoff_last_error());
    }
    o->deadline_ns = hoff__plan_deadline(time_ns); /* from here: the trace is written */
    rc = hoff__plan_build(pl, t, o, &r->sched);
    if (rc) {
        r->rc = rc;
        snprintf(r->err, sizeof r->err, "%s", hoff_last_error());
        hoff__schedule_destroy(&r->sched);
        hoff__schedule_init(&r->sched);
        return;
    }
    if (o->groups && !r->sched.grouped) {
        rc = hoff__plan_groups(t, o, &r->sched);
        if (rc) {
            r->group_rc = rc;
            snprintf(r->group_err, sizeof r->group_err, "%s", hoff_last_error());
        } else if (r->sched.ngroups) {
            repredict(t, o, &r->sched);
        }
    }
}

static void *job_main(void *arg) {
    struct hoff__planjob *j = arg;

    hoff__plan_make(j->pl, j->t, &j->o, j->time_ns, j->trace_path, &j->res);
    j->res.done_ns = hoff__plan_now_ns();
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

int hoff__planjob_start(struct hoff__planjob **out, const struct hoff__planner *pl, const struct hoff__trace *t,
                        const struct hoff__plan_opts *o, uint64_t time_ns, const char *trace_path) {
    struct hoff__planjob *j = calloc(1, sizeof *j);
    int rc;

    *out = NULL;
    if (!j)
        return hoff__error(-ENOMEM, "no memory for a planning job");
    j->pl = pl;
    j->t = t;
    j->o = *o;
    j->o.stop = &j->stop;
    j->time_ns = time_ns;
    snprintf(j->trace_path, sizeof j->trace_path, "%s", trace_path ? trace_path : "");
    rc = pthread_create(&j->th, NULL, job_main, j);
    if (rc) {
        free(j);
        return hoff__error(-rc, "cannot start the planning thread: %s", hoff_strerror(-rc));
    }
    *out = j;
    return 0;
}

int hoff__planjob_done(const struct hoff__planjob *j) {
    return __atomic_load_n(&j->done, __ATOMIC_ACQUIRE);
}

const struct hoff__plan_opts *hoff__planjob_opts(const struct hoff__planjob *j) {
    return &j->o;
}

const struct hoff__planner *hoff__planjob_planner(const struct hoff__planjob *j) {
    return j->pl;
}

void hoff__planjob_collect(struct hoff__planjob *j, struct hoff__plan_result *r) {
    pthread_join(j->th, NULL); /* done: the thread has returned or is returning */
    *r = j->res;
    free(j);
}

void hoff__planjob_cancel(struct hoff__planjob *j) {
    if (!j)
        return;
    __atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
    pthread_join(j->th, NULL);
    hoff__schedule_destroy(&j->res.sched);
    free(j);
}
