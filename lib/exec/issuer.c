/* issuer.c — the issuing thread: a bounded ring of transfer commands, run in FIFO order on a thread of hoff's own.
 * Threading: push/drain/stats from any thread (one mutex, two condition variables); the backend op and the
 * done callback run on the issuing thread, outside the lock. */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_setname_np */
#endif

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/core.h"
#include "exec/issuer.h"

struct hoff__issuer {
    pthread_mutex_t lock;
    pthread_cond_t work;     /* the thread waits here for commands or stop */
    pthread_cond_t progress; /* pushers wait for a slot, drainers for completion */

    struct hoff__cmd *ring;
    size_t depth, head, count; /* head: oldest command */

    uint64_t pushed, executed, failed, full_waits;
    size_t depth_max;
    size_t push_waiters, drain_waiters; /* threads sleeping on progress */
    int stopping;

    struct hoff__backend *be;
    hoff__issuer_done_fn done;
    void *arg;
    pthread_t thread;
};

/* The issuer whose thread this is (NULL on every other thread): a push on a
 * full queue or a drain from a done callback would wait for itself. */
static __thread struct hoff__issuer *current_issuer;

/* The command's extra fences: the transfer waits for each. */
static int wait_also(struct hoff__backend *be, const struct hoff__cmd *c) {
    unsigned i;
    int rc;

    for (i = 0; i < c->nalso && i < HOFF__CMD_ALSO; i++) {
        if (!be->ops->transfer_wait)
            return hoff__error(-ENOTSUP, "backend %s cannot order a transfer after several streams", be->ops->name);
        if ((rc = be->ops->transfer_wait(be, c->op == HOFF__CMD_PREFETCH ? HOFF__XFER_H2D : HOFF__XFER_D2H,
                                         c->also[i])) != 0)
            return rc;
    }
    return 0;
}

static int run_cmd(struct hoff__backend *be, const struct hoff__cmd *c) {
    const struct hoff__backend_ops *ops = be->ops;
    int (*fn)(struct hoff__backend *, void *, size_t, hoff__event *, hoff__event *);
    int rc;

    switch (c->op) {
    case HOFF__CMD_RUN: return c->run ? c->run(c->run_arg, c) : -EINVAL;
    case HOFF__CMD_EVICT:
        if (c->node >= 0 && ops->evict_node)
            return (rc = wait_also(be, c)) != 0 ? rc : ops->evict_node(be, c->ptr, c->size, c->node, c->after, c->done);
        fn = ops->evict;
        break;
    case HOFF__CMD_PREFETCH: fn = ops->prefetch; break;
    case HOFF__CMD_DISCARD: fn = ops->discard; break;
    default: return -EINVAL;
    }
    if (!fn)
        return -ENOTSUP;
    if ((rc = wait_also(be, c)) != 0)
        return rc;
    return fn(be, c->ptr, c->size, c->after, c->done);
}

static void *issuer_main(void *p) {
    struct hoff__issuer *is = p;

    current_issuer = is;
    (void)pthread_setname_np(pthread_self(), "hoff-issue");
    if (is->be->ops->bind_thread && is->be->ops->bind_thread(is->be) != 0)
        hoff__log(HOFF_LOG_WARN, "issuing thread: %s; its calls switch devices each time instead", hoff_last_error());
    pthread_mutex_lock(&is->lock);
    for (;;) {
        struct hoff__cmd cmd;
        int rc;

        while (!is->count && !is->stopping)
            pthread_cond_wait(&is->work, &is->lock);
        if (!is->count)
            break; /* stopping, and everything queued has run */
        cmd = is->ring[is->head];
        is->head = (is->head + 1) % is->depth;
        is->count--;
        if (is->push_waiters)
            pthread_cond_broadcast(&is->progress);
        pthread_mutex_unlock(&is->lock);

        rc = run_cmd(is->be, &cmd);
        if (is->done)
            is->done(is->arg, &cmd, rc);

        pthread_mutex_lock(&is->lock);
        is->executed++;
        if (rc)
            is->failed++;
        if (is->drain_waiters)
            pthread_cond_broadcast(&is->progress);
    }
    pthread_mutex_unlock(&is->lock);
    return NULL;
}

int hoff__issuer_start(struct hoff__issuer **out, struct hoff__backend *be, size_t depth, hoff__issuer_done_fn done,
                       void *arg) {
    struct hoff__issuer *is;
    sigset_t all, old;
    int rc;

    if (!out || !be || !be->ops || depth < 1)
        return -EINVAL;
    *out = NULL;
    is = calloc(1, sizeof *is);
    if (!is)
        return -ENOMEM;
    is->ring = depth <= SIZE_MAX / sizeof *is->ring ? calloc(depth, sizeof *is->ring) : NULL;
    if (!is->ring) {
        free(is);
        return -ENOMEM;
    }
    is->depth = depth;
    is->be = be;
    is->done = done;
    is->arg = arg;
    pthread_mutex_init(&is->lock, NULL);
    pthread_cond_init(&is->work, NULL);
    pthread_cond_init(&is->progress, NULL);

    /* The thread inherits a mask with every signal blocked, so the user's
     * handlers keep running on the user's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&is->thread, NULL, issuer_main, is);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        pthread_cond_destroy(&is->progress);
        pthread_cond_destroy(&is->work);
        pthread_mutex_destroy(&is->lock);
        free(is->ring);
        free(is);
        return hoff__error(-rc, "cannot start the issuing thread");
    }
    *out = is;
    return 0;
}

int hoff__issuer_push(struct hoff__issuer *is, const struct hoff__cmd *cmd) {
    if (!is || !cmd)
        return -EINVAL;
    pthread_mutex_lock(&is->lock);
    if (!is->stopping && is->count == is->depth) {
        if (current_issuer == is) { /* from a done callback: would wait forever */
            pthread_mutex_unlock(&is->lock);
            return -EDEADLK;
        }
        is->full_waits++;
        is->push_waiters++;
        while (!is->stopping && is->count == is->depth)
            pthread_cond_wait(&is->progress, &is->lock);
        is->push_waiters--;
        if (is->stopping && !is->push_waiters && !is->drain_waiters)
            pthread_cond_broadcast(&is->progress); /* stop may wait for us */
    }
    if (is->stopping) {
        pthread_mutex_unlock(&is->lock);
        return -ESHUTDOWN;
    }
    is->ring[(is->head + is->count) % is->depth] = *cmd;
    is->count++;
    is->pushed++;
    if (is->count > is->depth_max)
        is->depth_max = is->count;
    if (is->count == 1)
        pthread_cond_signal(&is->work);
    pthread_mutex_unlock(&is->lock);
    return 0;
}

int hoff__issuer_drain(struct hoff__issuer *is) {
    uint64_t target;

    if (!is)
        return -EINVAL;
    pthread_mutex_lock(&is->lock);
    target = is->pushed;
    if (is->executed < target) {
        if (current_issuer == is) {
            pthread_mutex_unlock(&is->lock);
            return -EDEADLK;
        }
        is->drain_waiters++;
        while (is->executed < target)
            pthread_cond_wait(&is->progress, &is->lock);
        is->drain_waiters--;
        if (is->stopping && !is->push_waiters && !is->drain_waiters)
            pthread_cond_broadcast(&is->progress); /* stop may wait for us */
    }
    pthread_mutex_unlock(&is->lock);
    return 0;
}

void hoff__issuer_stop(struct hoff__issuer *is) {
    if (!is)
        return;
    if (current_issuer == is) { /* from a done callback: cannot join itself */
        HOFF__LOG_ONCE(HOFF_LOG_ERROR, "hoff__issuer_stop called on the issuing thread; ignored");
        return;
    }
    /* From now on pushes fail with -ESHUTDOWN (pushers waiting on a full
     * queue too); the thread runs everything already queued, then exits. */
    pthread_mutex_lock(&is->lock);
    is->stopping = 1;
    pthread_cond_signal(&is->work);
    pthread_cond_broadcast(&is->progress);
    pthread_mutex_unlock(&is->lock);
    pthread_join(is->thread, NULL);

    /* Drainers and woken pushers still hold references: let them leave. */
    pthread_mutex_lock(&is->lock);
    while (is->push_waiters || is->drain_waiters)
        pthread_cond_wait(&is->progress, &is->lock);
    pthread_mutex_unlock(&is->lock);

    pthread_cond_destroy(&is->progress);
    pthread_cond_destroy(&is->work);
    pthread_mutex_destroy(&is->lock);
    free(is->ring);
    free(is);
}

void hoff__issuer_stats(struct hoff__issuer *is, struct hoff__issuer_stats *out) {
    if (!out)
        return;
    *out = (struct hoff__issuer_stats){0};
    if (!is)
        return;
    pthread_mutex_lock(&is->lock);
    out->pushed = is->pushed;
    out->executed = is->executed;
    out->failed = is->failed;
    out->full_waits = is->full_waits;
    out->depth_max = is->depth_max;
    pthread_mutex_unlock(&is->lock);
}
