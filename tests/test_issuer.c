/* test_issuer.c — the issuing thread against a fake backend that records its calls, can hold them at a
 * gate, sleep, and fail on demand.  Threading: the tests start pushers and stoppers of their own. */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_getname_np */
#endif

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/issuer.h"
#include "testutil.h"

#define MAXLOG (1 << 16)
#define FAIL_SIZE ((size_t)0xFA11) /* the fake backend fails commands of this size */

/* Cookies with a meaning to the done callback. */
#define COOKIE_CHAIN ((void *)(uintptr_t)0xC4A1)    /* push one more, then probe the full queue */
#define COOKIE_TRY_PUSH ((void *)(uintptr_t)0x7E57) /* try a push (during stop) */

/* --- the fake backend ----------------------------------------------------- */

struct rec {
    int op;
    void *ptr;
    size_t size;
    hoff__event *after, *done;
};

struct fake {
    struct hoff__backend be; /* first: the ops get &be */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int gate_closed; /* ops wait while closed */
    int entered;     /* ops started */
    unsigned sleep_us;
    size_t n;
    struct rec log[MAXLOG];
};

static struct fake fk;

static int fake_op(struct hoff__backend *be, int op, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct fake *f = (struct fake *)be;
    unsigned us;

    pthread_mutex_lock(&f->lock);
    f->entered++;
    pthread_cond_broadcast(&f->cond);
    while (f->gate_closed)
        pthread_cond_wait(&f->cond, &f->lock);
    if (f->n < MAXLOG)
        f->log[f->n++] = (struct rec){op, p, size, after, done};
    us = f->sleep_us;
    pthread_mutex_unlock(&f->lock);
    if (us)
        usleep(us);
    return size == FAIL_SIZE ? -EIO : 0;
}

static int fake_evict(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    return fake_op(be, HOFF__CMD_EVICT, p, size, after, done);
}
static int fake_prefetch(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    return fake_op(be, HOFF__CMD_PREFETCH, p, size, after, done);
}
static int fake_discard(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    return fake_op(be, HOFF__CMD_DISCARD, p, size, after, done);
}

static const struct hoff__backend_ops fake_ops = {
    .name = "fake",
    .evict = fake_evict,
    .prefetch = fake_prefetch,
    .discard = fake_discard,
};
static const struct hoff__backend_ops no_transfer_ops = {.name = "none"};

static void fake_reset(unsigned sleep_us) {
    static int inited;
    if (!inited) {
        pthread_mutex_init(&fk.lock, NULL);
        pthread_cond_init(&fk.cond, NULL);
        inited = 1;
    }
    pthread_mutex_lock(&fk.lock);
    fk.be.ops = &fake_ops;
    fk.gate_closed = 0;
    fk.entered = 0;
    fk.sleep_us = sleep_us;
    fk.n = 0;
    pthread_mutex_unlock(&fk.lock);
}

static void gate(int closed) {
    pthread_mutex_lock(&fk.lock);
    fk.gate_closed = closed;
    pthread_cond_broadcast(&fk.cond);
    pthread_mutex_unlock(&fk.lock);
}

/* Wait (up to 5 s) until the fake backend has started n ops. */
static int wait_entered(int n) {
    struct timespec ts;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&fk.lock);
    while (fk.entered < n && rc == 0)
        rc = pthread_cond_timedwait(&fk.cond, &fk.lock, &ts);
    rc = fk.entered >= n;
    pthread_mutex_unlock(&fk.lock);
    return rc;
}

static size_t fake_count(void) {
    size_t n;
    pthread_mutex_lock(&fk.lock);
    n = fk.n;
    pthread_mutex_unlock(&fk.lock);
    return n;
}

/* --- the done callback ------------------------------------------------------ */

struct cbrec {
    void *cookie;
    int op, rc;
};

struct cb {
    pthread_mutex_t lock;
    size_t n;
    struct cbrec recs[MAXLOG];
    struct hoff__issuer *is; /* for the callbacks that push */
    pthread_t thread;        /* the thread of the first callback */
    int other_threads;       /* callbacks on any other thread */
    char name[32];
    int sig_blocked; /* SIGINT, SIGTERM, SIGUSR1 all blocked */
    int chain_push_rc, chain_full_rc, chain_drain_rc, try_push_rc;
};

static struct cb cbs;

static void cb_reset(void) {
    static int inited;
    if (!inited) {
        pthread_mutex_init(&cbs.lock, NULL);
        inited = 1;
    }
    pthread_mutex_lock(&cbs.lock);
    cbs.n = 0;
    cbs.is = NULL;
    cbs.other_threads = 0;
    cbs.name[0] = 0;
    cbs.sig_blocked = -1;
    cbs.chain_push_rc = cbs.chain_full_rc = cbs.chain_drain_rc = cbs.try_push_rc = 1;
    pthread_mutex_unlock(&cbs.lock);
}

static void on_done(void *arg, const struct hoff__cmd *cmd, int rc) {
    struct cb *c = arg;
    struct hoff__issuer *is;
    int r1 = 1, r2 = 1, r3 = 1, first;

    pthread_mutex_lock(&c->lock);
    is = c->is;
    pthread_mutex_unlock(&c->lock);
    if (cmd->cookie == COOKIE_CHAIN) { /* depth 1: the first push fits, the second does not */
        struct hoff__cmd next = {.op = HOFF__CMD_PREFETCH, .ptr = cmd->ptr, .size = 2, .cookie = (void *)(uintptr_t)2};
        r1 = hoff__issuer_push(is, &next);
        next.cookie = (void *)(uintptr_t)3;
        r2 = hoff__issuer_push(is, &next);
        r3 = hoff__issuer_drain(is);
    } else if (cmd->cookie == COOKIE_TRY_PUSH) {
        struct hoff__cmd next = {.op = HOFF__CMD_EVICT, .ptr = cmd->ptr, .size = 1};
        r1 = hoff__issuer_push(is, &next);
    }

    pthread_mutex_lock(&c->lock);
    first = c->n == 0;
    if (c->n < MAXLOG)
        c->recs[c->n++] = (struct cbrec){cmd->cookie, cmd->op, rc};
    if (first) {
        sigset_t cur;
        c->thread = pthread_self();
        if (pthread_getname_np(pthread_self(), c->name, sizeof c->name))
            c->name[0] = 0;
        pthread_sigmask(SIG_BLOCK, NULL, &cur);
        c->sig_blocked =
            sigismember(&cur, SIGINT) == 1 && sigismember(&cur, SIGTERM) == 1 && sigismember(&cur, SIGUSR1) == 1;
    } else if (!pthread_equal(c->thread, pthread_self())) {
        c->other_threads++;
    }
    if (cmd->cookie == COOKIE_CHAIN) {
        c->chain_push_rc = r1;
        c->chain_full_rc = r2;
        c->chain_drain_rc = r3;
    } else if (cmd->cookie == COOKIE_TRY_PUSH) {
        c->try_push_rc = r1;
    }
    pthread_mutex_unlock(&c->lock);
}

static size_t cb_count(void) {
    size_t n;
    pthread_mutex_lock(&cbs.lock);
    n = cbs.n;
    pthread_mutex_unlock(&cbs.lock);
    return n;
}

static struct hoff__issuer *start(size_t depth, unsigned sleep_us) {
    struct hoff__issuer *is = NULL;

    fake_reset(sleep_us);
    cb_reset();
    CU_ASSERT_EQUAL(hoff__issuer_start(&is, &fk.be, depth, on_done, &cbs), 0);
    CU_ASSERT_PTR_NOT_NULL(is);
    pthread_mutex_lock(&cbs.lock);
    cbs.is = is;
    pthread_mutex_unlock(&cbs.lock);
    return is;
}

static struct hoff__cmd mkcmd(int op, uintptr_t id, size_t size) {
    return (struct hoff__cmd){
        .op = op,
        .ptr = (void *)(id << 21),
        .size = size,
        .after = (hoff__event *)(id * 16 + 8),
        .done = (hoff__event *)(id * 16 + 0x1000000),
        .cookie = (void *)id,
    };
}

static void msleep(unsigned ms) {
    usleep(ms * 1000u);
}

/* --- tests --------------------------------------------------------------- */

static void test_bad_args(void) {
    struct hoff__issuer *is = (struct hoff__issuer *)1;
    struct hoff__backend none = {&no_transfer_ops};
    struct hoff__cmd c = mkcmd(HOFF__CMD_EVICT, 1, 1);
    struct hoff__issuer_stats st;

    fake_reset(0);
    CU_ASSERT_EQUAL(hoff__issuer_start(&is, &fk.be, 0, on_done, &cbs), -EINVAL);
    CU_ASSERT_EQUAL(hoff__issuer_start(&is, NULL, 4, on_done, &cbs), -EINVAL);
    CU_ASSERT_EQUAL(hoff__issuer_start(NULL, &fk.be, 4, on_done, &cbs), -EINVAL);
    CU_ASSERT_EQUAL(hoff__issuer_push(NULL, &c), -EINVAL);
    CU_ASSERT_EQUAL(hoff__issuer_drain(NULL), -EINVAL);
    hoff__issuer_stop(NULL);

    /* a backend without transfer ops: -ENOTSUP to the callback */
    cb_reset();
    CU_ASSERT_EQUAL_FATAL(hoff__issuer_start(&is, &none, 4, on_done, &cbs), 0);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, NULL), -EINVAL);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL(cb_count(), 1);
    CU_ASSERT_EQUAL(cbs.recs[0].rc, -ENOTSUP);
    hoff__issuer_stats(is, &st);
    CU_ASSERT_EQUAL(st.failed, 1);
    hoff__issuer_stop(is);

    /* no callback at all */
    CU_ASSERT_EQUAL_FATAL(hoff__issuer_start(&is, &fk.be, 4, NULL, NULL), 0);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL(fake_count(), 1);
    hoff__issuer_stop(is);
}

/* Commands reach the backend and the callback in push order, with every
 * field passed through. */
static void test_fifo(void) {
    enum { N = 1000 };
    struct hoff__issuer *is = start(64, 0);
    struct hoff__issuer_stats st;
    size_t i, bad = 0;

    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0); /* nothing pushed: returns at once */
    for (i = 0; i < N; i++) {
        struct hoff__cmd c = mkcmd(1 + (int)(i % 3), i + 1, i + 1);
        CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    }
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL_FATAL(fake_count(), N);
    CU_ASSERT_EQUAL_FATAL(cb_count(), N);
    for (i = 0; i < N; i++) {
        struct hoff__cmd c = mkcmd(1 + (int)(i % 3), i + 1, i + 1);
        const struct rec *r = &fk.log[i];
        const struct cbrec *b = &cbs.recs[i];
        if (r->op != c.op || r->ptr != c.ptr || r->size != c.size || r->after != c.after || r->done != c.done)
            bad++;
        if (b->cookie != c.cookie || b->op != c.op || b->rc != 0)
            bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    hoff__issuer_stats(is, &st);
    CU_ASSERT_EQUAL(st.pushed, N);
    CU_ASSERT_EQUAL(st.executed, N);
    CU_ASSERT_EQUAL(st.failed, 0);
    CU_ASSERT(st.depth_max >= 1 && st.depth_max <= 64);
    hoff__issuer_stop(is);
}

/* Backend failures and unknown ops reach the callback and are counted. */
static void test_failures(void) {
    enum { N = 60 };
    struct hoff__issuer *is = start(8, 0);
    struct hoff__issuer_stats st;
    size_t i, bad = 0, want_failed = 0, want_backend = 0;

    for (i = 0; i < N; i++) {
        int op = i % 10 == 5 ? 99 : i % 10 == 7 ? 0 : 1 + (int)(i % 3);
        struct hoff__cmd c = mkcmd(op, i + 1, i % 3 == 0 ? FAIL_SIZE : 4096);
        CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    }
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL_FATAL(cb_count(), N);
    for (i = 0; i < N; i++) {
        int unknown = i % 10 == 5 || i % 10 == 7;
        int want = unknown ? -EINVAL : i % 3 == 0 ? -EIO : 0;
        if (cbs.recs[i].cookie != (void *)(uintptr_t)(i + 1) || cbs.recs[i].rc != want)
            bad++;
        want_failed += want != 0;
        want_backend += !unknown;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(fake_count(), want_backend); /* unknown ops never reach it */
    hoff__issuer_stats(is, &st);
    CU_ASSERT_EQUAL(st.executed, N);
    CU_ASSERT_EQUAL(st.failed, want_failed);
    hoff__issuer_stop(is);
}

static int gate_opened;

static void *opener_main(void *p) {
    msleep(30);
    __atomic_store_n(&gate_opened, 1, __ATOMIC_RELEASE);
    gate(0);
    return NULL;
}

/* drain returns only once every command pushed before it has run, callback
 * included: with the backend held at a gate that another thread opens
 * later, drain cannot return before the gate opens. */
static void test_drain_waits(void) {
    enum { N = 10 };
    struct hoff__issuer *is = start(16, 1000); /* 1 ms per command */
    pthread_t th;
    size_t i;

    gate(1);
    __atomic_store_n(&gate_opened, 0, __ATOMIC_RELEASE);
    for (i = 0; i < N; i++) {
        struct hoff__cmd c = mkcmd(HOFF__CMD_EVICT, i + 1, 1);
        CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    }
    CU_ASSERT_EQUAL(cb_count(), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, opener_main, NULL), 0);
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL(__atomic_load_n(&gate_opened, __ATOMIC_ACQUIRE), 1);
    CU_ASSERT_EQUAL(cb_count(), N);
    CU_ASSERT_EQUAL(fake_count(), N);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0); /* idle: returns at once */
    hoff__issuer_stop(is);
}

struct pusher {
    struct hoff__issuer *is;
    int id, n, rc, done;
};

static void *pusher_main(void *p) {
    struct pusher *pu = p;
    int i;

    pu->rc = 0;
    for (i = 0; i < pu->n && !pu->rc; i++) {
        struct hoff__cmd c = mkcmd(HOFF__CMD_PREFETCH, ((uintptr_t)pu->id << 20) | (uintptr_t)(i + 1), 64);
        pu->rc = hoff__issuer_push(pu->is, &c);
    }
    __atomic_store_n(&pu->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Wait (up to 5 s) for a condition on the stats. */
static int wait_full_waits(struct hoff__issuer *is, uint64_t n) {
    struct hoff__issuer_stats st;
    int i;
    for (i = 0; i < 5000; i++) {
        hoff__issuer_stats(is, &st);
        if (st.full_waits >= n)
            return 1;
        msleep(1);
    }
    return 0;
}

/* With 2 slots and the backend held at a gate, the 4th push waits (one in
 * the backend, two queued) and is counted; it goes through once the gate
 * opens, and order is kept. */
static void test_full_queue(void) {
    struct hoff__issuer *is = start(2, 0);
    struct hoff__issuer_stats st;
    struct hoff__cmd c;
    struct pusher pu = {0};
    pthread_t th;
    size_t i;

    gate(1);
    c = mkcmd(HOFF__CMD_EVICT, 1, 1);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    CU_ASSERT_FATAL(wait_entered(1)); /* the thread holds command 1 */
    c = mkcmd(HOFF__CMD_EVICT, 2, 1);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    c = mkcmd(HOFF__CMD_EVICT, 3, 1);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    hoff__issuer_stats(is, &st);
    CU_ASSERT_EQUAL(st.full_waits, 0);
    CU_ASSERT_EQUAL(st.depth_max, 2);

    pu.is = is;
    pu.id = 0;
    pu.n = 1; /* pushes command id 1 << 20 | 1 */
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, pusher_main, &pu), 0);
    CU_ASSERT(wait_full_waits(is, 1));
    msleep(20);
    CU_ASSERT_EQUAL(__atomic_load_n(&pu.done, __ATOMIC_ACQUIRE), 0); /* still waiting */
    gate(0);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(pu.rc, 0);
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    hoff__issuer_stats(is, &st);
    CU_ASSERT_EQUAL(st.full_waits, 1);
    CU_ASSERT_EQUAL(st.depth_max, 2);
    CU_ASSERT_EQUAL(st.executed, 4);
    CU_ASSERT_EQUAL_FATAL(cb_count(), 4);
    for (i = 0; i < 3; i++)
        CU_ASSERT_PTR_EQUAL(cbs.recs[i].cookie, (void *)(uintptr_t)(i + 1));
    CU_ASSERT_PTR_EQUAL(cbs.recs[3].cookie, (void *)(uintptr_t)1);
    hoff__issuer_stop(is);
}

/* Four threads push 5000 commands each through 8 slots: none is lost or
 * duplicated, each thread's commands keep their order. */
static void test_many_pushers(void) {
    enum { T = 4, N = 5000 };
    struct hoff__issuer *is = start(8, 0);
    struct hoff__issuer_stats st;
    struct pusher pu[T];
    pthread_t th[T];
    int next[T] = {0};
    size_t i, bad = 0;
    int t;

    for (t = 0; t < T; t++) {
        pu[t] = (struct pusher){.is = is, .id = t + 1, .n = N};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, pusher_main, &pu[t]), 0);
    }
    for (t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        CU_ASSERT_EQUAL(pu[t].rc, 0);
    }
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL_FATAL(cb_count(), (size_t)T * N);
    for (i = 0; i < (size_t)T * N; i++) {
        uintptr_t id = (uintptr_t)cbs.recs[i].cookie;
        int who = (int)(id >> 20) - 1;
        if (who < 0 || who >= T || (int)(id & 0xfffff) != next[who] + 1)
            bad++;
        else
            next[who]++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (t = 0; t < T; t++)
        CU_ASSERT_EQUAL(next[t], N);
    hoff__issuer_stats(is, &st);
    CU_ASSERT_EQUAL(st.pushed, (uint64_t)T * N);
    CU_ASSERT_EQUAL(st.executed, (uint64_t)T * N);
    CU_ASSERT(st.depth_max <= 8);
    printf("\n    full_waits %llu, depth_max %zu\n", (unsigned long long)st.full_waits, st.depth_max);
    hoff__issuer_stop(is);
}

/* stop runs what is queued before it returns. */
static void test_stop_pending(void) {
    enum { N = 20 };
    struct hoff__issuer *is = start(32, 1000);
    size_t i;

    for (i = 0; i < N; i++) {
        struct hoff__cmd c = mkcmd(HOFF__CMD_DISCARD, i + 1, 1);
        CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    }
    hoff__issuer_stop(is);
    CU_ASSERT_EQUAL(cb_count(), N);
    CU_ASSERT_EQUAL(fake_count(), N);
    for (i = 0; i < N && i < cb_count(); i++)
        CU_ASSERT_PTR_EQUAL(cbs.recs[i].cookie, (void *)(uintptr_t)(i + 1));
}

static void *stopper_main(void *p) {
    hoff__issuer_stop(p);
    return NULL;
}

/* Once stop has begun, pushes fail with -ESHUTDOWN: from another thread,
 * from a done callback, and a push that was waiting on a full queue; what
 * was queued before still runs. */
static void test_push_after_stop(void) {
    struct hoff__issuer *is = start(8, 0);
    struct hoff__cmd c;
    pthread_t stopper, th;
    struct pusher pu = {0};
    int rc = 0, tries, ok_probes = 0;

    gate(1);
    c = mkcmd(HOFF__CMD_EVICT, 1, 1);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    CU_ASSERT_FATAL(wait_entered(1));
    c = mkcmd(HOFF__CMD_EVICT, 2, 1);
    c.cookie = COOKIE_TRY_PUSH;
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&stopper, NULL, stopper_main, is), 0);
    /* stop cannot return while the gate is closed: the issuer is alive */
    for (tries = 0; tries < 5000; tries++) {
        c = mkcmd(HOFF__CMD_PREFETCH, 100 + (uintptr_t)tries, 1);
        rc = hoff__issuer_push(is, &c);
        if (rc == -ESHUTDOWN)
            break;
        CU_ASSERT_EQUAL(rc, 0);
        ok_probes++;
        msleep(1);
    }
    CU_ASSERT_EQUAL(rc, -ESHUTDOWN);
    gate(0);
    pthread_join(stopper, NULL);
    CU_ASSERT_EQUAL(cbs.try_push_rc, -ESHUTDOWN);
    CU_ASSERT_EQUAL(cb_count(), 2 + (size_t)ok_probes);

    /* a pusher waiting on a full queue when stop begins */
    is = start(1, 0);
    gate(1);
    c = mkcmd(HOFF__CMD_EVICT, 1, 1);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    CU_ASSERT_FATAL(wait_entered(1));
    c = mkcmd(HOFF__CMD_EVICT, 2, 1);
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0); /* fills the one slot */
    pu.is = is;
    pu.id = 1;
    pu.n = 1;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, pusher_main, &pu), 0);
    CU_ASSERT(wait_full_waits(is, 1));
    CU_ASSERT_EQUAL_FATAL(pthread_create(&stopper, NULL, stopper_main, is), 0);
    pthread_join(th, NULL); /* released by stop, with the gate still closed */
    CU_ASSERT_EQUAL(pu.rc, -ESHUTDOWN);
    gate(0);
    pthread_join(stopper, NULL);
    CU_ASSERT_EQUAL(cb_count(), 2);
}

/* The callback runs on one thread that is not the pusher's, named
 * hoff-issue, with signals blocked; the pusher's mask is left alone. */
static void test_callback_thread(void) {
    struct hoff__issuer *is;
    sigset_t before, after;
    size_t i;

    pthread_sigmask(SIG_BLOCK, NULL, &before);
    is = start(4, 0);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    CU_ASSERT_EQUAL(sigismember(&before, SIGUSR1), sigismember(&after, SIGUSR1));
    CU_ASSERT_EQUAL(sigismember(&after, SIGINT), 0);
    for (i = 0; i < 20; i++) {
        struct hoff__cmd c = mkcmd(HOFF__CMD_EVICT, i + 1, 1);
        CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    }
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL(cb_count(), 20);
    CU_ASSERT(!pthread_equal(cbs.thread, pthread_self()));
    CU_ASSERT_EQUAL(cbs.other_threads, 0);
    CU_ASSERT_STRING_EQUAL(cbs.name, "hoff-issue");
    CU_ASSERT_EQUAL(cbs.sig_blocked, 1);
    hoff__issuer_stop(is);
}

/* From a done callback: a push with room works, a push on a full queue and a
 * drain fail with -EDEADLK instead of waiting on themselves. */
static void test_callback_reentry(void) {
    struct hoff__issuer *is = start(1, 0);
    struct hoff__cmd c = mkcmd(HOFF__CMD_EVICT, 1, 1);
    int i;

    c.cookie = COOKIE_CHAIN;
    CU_ASSERT_EQUAL(hoff__issuer_push(is, &c), 0);
    for (i = 0; i < 5000 && cb_count() < 2; i++)
        msleep(1);
    CU_ASSERT_EQUAL(hoff__issuer_drain(is), 0);
    CU_ASSERT_EQUAL_FATAL(cb_count(), 2);
    CU_ASSERT_PTR_EQUAL(cbs.recs[0].cookie, COOKIE_CHAIN);
    CU_ASSERT_PTR_EQUAL(cbs.recs[1].cookie, (void *)(uintptr_t)2); /* after the callback */
    CU_ASSERT_EQUAL(cbs.chain_push_rc, 0);
    CU_ASSERT_EQUAL(cbs.chain_full_rc, -EDEADLK);
    CU_ASSERT_EQUAL(cbs.chain_drain_rc, -EDEADLK);
    hoff__issuer_stop(is);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"bad_args", test_bad_args},
        {"fifo", test_fifo},
        {"failures", test_failures},
        {"drain_waits", test_drain_waits},
        {"full_queue", test_full_queue},
        {"many_pushers", test_many_pushers},
        {"stop_pending", test_stop_pending},
        {"push_after_stop", test_push_after_stop},
        {"callback_thread", test_callback_thread},
        {"callback_reentry", test_callback_reentry},
        {NULL, NULL},
    };
    return hoff_test_run("issuer", tests);
}
