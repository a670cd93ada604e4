/* dbl_sched.c — the CUDA runtime double's streams: one FIFO worker thread per stream, ops with
 * waits (stream positions), the legacy default stream's implicit synchronisation with blocking
 * streams, vector clocks for happens-before (stream clocks, the host clock), and host waits.
 * Threading: every function here is called with G.lock held; workers hold it except while an op
 * copies bytes, sleeps for its modelled time or runs a host function / kernel body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbl.h"

uint64_t dbl_now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep for what moving `bytes` takes at HOFFDBL_GBPS (called without the lock). */
void dbl_model_time(size_t bytes) {
    double ns = (double)bytes / G.gbps;
    struct timespec ts;

    if (ns < 1000)
        return;
    ts.tv_sec = (time_t)(ns / 1e9);
    ts.tv_nsec = (long)(ns - (double)ts.tv_sec * 1e9);
    nanosleep(&ts, NULL);
}

static void vc_join(struct dbl_vc *into, const struct dbl_vc *from) {
    for (int i = 0; i < G.nstreams; i++)
        if (from->v[i] > into->v[i])
            into->v[i] = from->v[i];
}

/* The host has synchronised with a point whose clock is v[0..n). */
void dbl_host_join(const uint32_t *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] > G.host.v[i])
            G.host.v[i] = v[i];
}

void dbl_event_free(struct CUevent_st *ev) {
    free(ev->vc);
    free(ev);
}

int dbl_vc_before(const struct dbl_vc *c, const struct dbl_epoch *e) {
    return c->v[e->sid] >= e->at;
}

struct dbl_op *dbl_op_new(enum dbl_opkind k) {
    struct dbl_op *op = calloc(1, sizeof *op);

    if (!op) {
        fprintf(stderr, "hoffdbl: out of host memory for a stream op\n");
        abort();
    }
    op->kind = k;
    return op;
}

static void op_free(struct dbl_op *op) {
    free(op->waits);
    free(op->ranges);
    free(op->use);
    free(op);
}

static void add_wait(struct dbl_op *op, struct CUstream_st *s, uint64_t target) {
    struct dbl_wait *w;

    if (s->done >= target)
        return;
    w = realloc(op->waits, (size_t)(op->nwait + 1) * sizeof *w);
    if (!w) {
        fprintf(stderr, "hoffdbl: out of host memory for a stream wait\n");
        abort();
    }
    op->waits = w;
    w[op->nwait].s = s;
    w[op->nwait].target = target;
    op->nwait++;
}

/* Append op to s: it inherits the host clock and, by the legacy default stream's rule, the
 * blocking streams' work (legacy stream) or the legacy stream's work (a blocking stream). */
void dbl_enqueue(struct CUstream_st *s, struct dbl_op *op) {
    vc_join(&s->clock, &G.host);
    if (s->legacy) {
        for (int i = 0; i < G.nstreams; i++) {
            struct CUstream_st *t = G.streams[i];

            if (t != s && t->dev == s->dev && !t->legacy && !(t->flags & cudaStreamNonBlocking)) {
                add_wait(op, t, t->enq);
                vc_join(&s->clock, &t->clock);
            }
        }
    } else if (!(s->flags & cudaStreamNonBlocking) && G.legacy[s->dev]) {
        struct CUstream_st *l = G.legacy[s->dev];

        add_wait(op, l, l->enq);
        vc_join(&s->clock, &l->clock);
    }
    s->enq++;
    s->clock.v[s->id] = (uint32_t)s->enq;
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_broadcast(&G.cv);
}

static int waits_done(const struct dbl_op *op) {
    for (int i = 0; i < op->nwait; i++)
        if (op->waits[i].s->done < op->waits[i].target)
            return 0;
    return 1;
}

static void run_op(struct CUstream_st *s, struct dbl_op *op) {
    struct CUevent_st *ev;

    switch (op->kind) {
    case OP_NOP: break;
    case OP_HOSTFN:
        pthread_mutex_unlock(&G.lock);
        op->fn(op->arg);
        pthread_mutex_lock(&G.lock);
        break;
    case OP_RECORD:
        ev = op->ev;
        if (op->gen == ev->gen)
            ev->t_ns = dbl_now_ns();
        if (--ev->pending == 0 && ev->dead)
            dbl_event_free(ev);
        break;
    case OP_COPY:
    case OP_SET:
        dbl_touch_copy(op->dst, op->n, s->dev);
        /* The bytes move under the lock, as a move's (a discard's poison) and a kernel's do: a copy that the
         * race checks flag as unordered with a discard (counted, not aborted, outside strict mode) must still
         * not race it in this process, or ThreadSanitizer reports the double itself.  Only the modelled
         * transfer time runs unlocked. */
        if (op->kind == OP_COPY)
            memmove(op->dst, op->src, op->n);
        else
            memset(op->dst, op->value, op->n);
        pthread_mutex_unlock(&G.lock);
        dbl_model_time(op->n);
        pthread_mutex_lock(&G.lock);
        break;
    case OP_MOVE: dbl_run_move(op, s->dev); break;
    case OP_KERNEL:
        dbl_run_kernel(op, s->dev);
        if (op->fn) {
            pthread_mutex_unlock(&G.lock);
            op->fn(op->arg);
            pthread_mutex_lock(&G.lock);
        }
        break;
    }
}

static void *worker(void *arg) {
    struct CUstream_st *s = arg;

    pthread_mutex_lock(&G.lock);
    for (;;) {
        struct dbl_op *op;

        while (!s->head && !s->dead)
            pthread_cond_wait(&G.cv, &G.lock);
        if (!s->head)
            break; /* destroyed and drained */
        op = s->head;
        while (!waits_done(op))
            pthread_cond_wait(&G.cv, &G.lock);
        run_op(s, op);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->done++;
        op_free(op);
        pthread_cond_broadcast(&G.cv);
    }
    pthread_mutex_unlock(&G.lock);
    return NULL;
}

struct CUstream_st *dbl_stream_new(int dev, unsigned flags, int prio, int legacy) {
    struct CUstream_st *s;
    pthread_attr_t at;
    int rc;

    if (G.nstreams >= DBL_MAXS) {
        fprintf(stderr,
                "hoffdbl: more than %d streams created in this process (the double never "
                "reuses a stream id); raise DBL_MAXS\n",
                DBL_MAXS);
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->magic = DBL_SMAGIC;
    s->id = G.nstreams;
    s->dev = dev;
    s->flags = flags;
    s->prio = prio;
    s->legacy = legacy;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&s->th, &at, worker, s);
    pthread_attr_destroy(&at);
    if (rc) {
        free(s);
        return NULL;
    }
    G.streams[G.nstreams++] = s;
    if (legacy)
        G.legacy[dev] = s;
    return s;
}

/* The stream a call names (NULL / cudaStreamLegacy: the current device's legacy stream),
 * checked: a known, live stream of the current device.  NULL with *e set when unusable. */
struct CUstream_st *dbl_stream_get(cudaStream_t h, const char *call, cudaError_t *e) {
    int d = dbl_cur_dev(), i;

    *e = cudaSuccess;
    dbl_need_ctx();
    if (h == cudaStreamPerThread) {
        dbl_hard(CHK_HANDLE, call, h,
                 "cudaStreamPerThread: the double models the legacy default "
                 "stream only (NULL or cudaStreamLegacy)");
        *e = cudaErrorInvalidResourceHandle;
        return NULL;
    }
    if (h == NULL || h == cudaStreamLegacy) {
        if (!G.legacy[d] && !dbl_stream_new(d, 0, 0, 1)) {
            *e = cudaErrorMemoryAllocation;
            return NULL;
        }
        return G.legacy[d];
    }
    for (i = 0; i < G.nstreams; i++)
        if (G.streams[i] == h)
            break;
    if (i == G.nstreams) {
        dbl_hard(CHK_HANDLE, call, h, "not a stream this process created");
        *e = cudaErrorInvalidResourceHandle;
        return NULL;
    }
    if (h->dead) {
        dbl_hard(CHK_HANDLE, call, h, "stream %d was destroyed", h->id);
        *e = cudaErrorInvalidResourceHandle;
        return NULL;
    }
    if (h->dev != d)
        dbl_hard(CHK_DEVICE, call, h,
                 "the stream belongs to device %d but this thread's current "
                 "device is %d (a thread that never called cudaSetDevice(%d)?)",
                 h->dev, d, h->dev);
    return h;
}

/* Host waits until s has run `target` ops. */
void dbl_wait_stream(struct CUstream_st *s, uint64_t target) {
    while (s->done < target)
        pthread_cond_wait(&G.cv, &G.lock);
}

/* cudaDeviceSynchronize (dev >= 0) or every device (cudaFree's implicit synchronisation). */
void dbl_sync_all(int dev) {
    int n = G.nstreams;
    uint64_t *targets = calloc((size_t)n + 1, sizeof *targets);
    struct dbl_vc *c = malloc(sizeof *c);

    if (!targets || !c) {
        fprintf(stderr, "hoffdbl: out of host memory for a device synchronisation\n");
        abort();
    }
    memset(c, 0, sizeof *c);
    for (int i = 0; i < n; i++) {
        targets[i] = G.streams[i]->enq;
        if (dev < 0 || G.streams[i]->dev == dev)
            vc_join(c, &G.streams[i]->clock);
    }
    for (int i = 0; i < n; i++)
        if (dev < 0 || G.streams[i]->dev == dev)
            dbl_wait_stream(G.streams[i], targets[i]);
    dbl_host_join(c->v, G.nstreams);
    free(c);
    free(targets);
}
