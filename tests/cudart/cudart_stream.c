/* cudart_stream.c — the CUDA runtime double's entry points for streams, events and host functions,
 * and hoffdbl_launch (a declared kernel): record generations, happens-before through events and
 * host synchronisation, the "never recorded" and "other device" checks, NotReady as a last error.
 * Threading: any thread; each call runs under G.lock (dbl_enter .. dbl_ret). */
#include <stdlib.h>
#include <string.h>

#include "dbl.h"

/* ---- streams ------------------------------------------------------------------------------------ */

static cudaError_t stream_create(cudaStream_t *pStream, unsigned int flags, int priority) {
    struct CUstream_st *s;

    if (!pStream || (flags != cudaStreamDefault && flags != cudaStreamNonBlocking))
        return cudaErrorInvalidValue;
    dbl_need_ctx();
    /* The runtime clamps a priority outside [greatest, least] = [-5, 0]. */
    s = dbl_stream_new(dbl_cur_dev(), flags, priority < -5 ? -5 : priority > 0 ? 0 : priority, 0);
    if (!s)
        return cudaErrorMemoryAllocation;
    *pStream = s;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority) {
    ENTER("cudaStreamCreateWithPriority");
    return dbl_ret(stream_create(pStream, flags, priority));
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    ENTER("cudaStreamCreateWithFlags");
    return dbl_ret(stream_create(pStream, flags, 0));
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream) {
    ENTER("cudaStreamCreate");
    return dbl_ret(stream_create(pStream, cudaStreamDefault, 0));
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
    struct CUstream_st *s;
    cudaError_t e;

    ENTER("cudaStreamDestroy");
    if (!stream || stream == cudaStreamLegacy)
        return dbl_ret(cudaErrorInvalidResourceHandle);
    s = dbl_stream_get(stream, "cudaStreamDestroy", &e);
    if (!s)
        return dbl_ret(e);
    s->dead = 1; /* its queued work still runs; then the worker exits */
    pthread_cond_broadcast(&G.cv);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
    struct CUstream_st *s;
    struct dbl_vc *c;
    uint64_t target;
    cudaError_t e;

    ENTER("cudaStreamSynchronize");
    s = dbl_stream_get(stream, "cudaStreamSynchronize", &e);
    if (!s)
        return dbl_ret(e);
    if (dbl_capture_refuses("cudaStreamSynchronize", s, NULL) ||
        (s->legacy && dbl_capture_unsafe("cudaStreamSynchronize")))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    c = malloc(sizeof *c);
    if (!c)
        return dbl_ret(cudaErrorMemoryAllocation);
    memcpy(c, &s->clock, sizeof *c);
    target = s->enq;
    dbl_wait_stream(s, target);
    dbl_host_join(c->v, G.nstreams);
    free(c);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) {
    struct CUstream_st *s;
    cudaError_t e;

    ENTER("cudaStreamQuery");
    s = dbl_stream_get(stream, "cudaStreamQuery", &e);
    if (!s)
        return dbl_ret(e);
    if (dbl_capture_refuses("cudaStreamQuery", s, NULL))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    if (s->done < s->enq)
        return dbl_ret(cudaErrorNotReady); /* a last error too, as PyTorch assumes */
    dbl_host_join(s->clock.v, G.nstreams);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
    struct CUstream_st *s;
    struct dbl_op *op;
    cudaError_t e;

    ENTER("cudaLaunchHostFunc");
    if (!fn)
        return dbl_ret(cudaErrorInvalidValue);
    s = dbl_stream_get(stream, "cudaLaunchHostFunc", &e);
    if (!s)
        return dbl_ret(e);
    if (s->cap) {
        G.st.captured_ops++;
        return dbl_ret(cudaSuccess);
    }
    op = dbl_op_new(OP_HOSTFN);
    op->fn = fn;
    op->arg = userData;
    dbl_enqueue(s, op);
    return dbl_ret(cudaSuccess);
}

/* ---- events --------------------------------------------------------------------------------------- */

static struct CUevent_st *event_get(cudaEvent_t h, const char *call, cudaError_t *e) {
    struct CUevent_st *ev = dbl_set_find(&G.events, (uintptr_t)h, NULL);

    *e = cudaSuccess;
    if (!h || !ev || ev != h) {
        dbl_hard(CHK_HANDLE, call, h, "not a live event (destroyed, or never created)");
        *e = cudaErrorInvalidResourceHandle;
        return NULL;
    }
    return ev;
}

/* The event was recorded (else a hard error: CUDA treats it as complete, which hides a missing
 * record) and, when `same_dev`, belongs to the calling thread's current device. */
static int event_usable(struct CUevent_st *ev, const char *call, int same_dev) {
    if (same_dev && ev->dev != dbl_cur_dev())
        dbl_hard(CHK_DEVICE, call, ev,
                 "the event belongs to device %d but this thread's current "
                 "device is %d (a thread that never called cudaSetDevice(%d)?)",
                 ev->dev, dbl_cur_dev(), ev->dev);
    if (!ev->s) {
        dbl_hard(CHK_UNRECORDED, call, ev,
                 "the event was never recorded (CUDA reports it "
                 "complete, so whatever this waits for is not ordered)");
        return 0;
    }
    return 1;
}

static cudaError_t event_create(cudaEvent_t *event, unsigned int flags) {
    struct CUevent_st *ev;

    if (!event || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)) ||
        ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
        return cudaErrorInvalidValue;
    dbl_need_ctx();
    ev = calloc(1, sizeof *ev);
    if (!ev || dbl_set_add(&G.events, (uintptr_t)ev, 1, ev)) {
        free(ev);
        return cudaErrorMemoryAllocation;
    }
    ev->magic = DBL_EMAGIC;
    ev->dev = dbl_cur_dev();
    ev->flags = flags;
    *event = ev;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    ENTER("cudaEventCreateWithFlags");
    return dbl_ret(event_create(event, flags));
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *event) {
    ENTER("cudaEventCreate");
    return dbl_ret(event_create(event, cudaEventDefault));
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
    struct CUevent_st *ev;
    size_t idx;
    cudaError_t e;

    ENTER("cudaEventDestroy");
    ev = event_get(event, "cudaEventDestroy", &e);
    if (!ev)
        return dbl_ret(e);
    if (dbl_set_find(&G.events, (uintptr_t)ev, &idx))
        dbl_set_del(&G.events, idx);
    ev->dead = 1;
    ev->magic = 0;
    if (ev->pending == 0)
        dbl_event_free(ev); /* else the last pending record frees it */
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    struct CUevent_st *ev;
    struct CUstream_st *s;
    struct dbl_op *op;
    cudaError_t e;

    ENTER("cudaEventRecord");
    ev = event_get(event, "cudaEventRecord", &e);
    if (!ev)
        return dbl_ret(e);
    s = dbl_stream_get(stream, "cudaEventRecord", &e);
    if (!s)
        return dbl_ret(e);
    if (ev->dev != s->dev) {
        dbl_hard(CHK_DEVICE, "cudaEventRecord", ev,
                 "the event belongs to device %d, the stream "
                 "to device %d",
                 ev->dev, s->dev);
        return dbl_ret(cudaErrorInvalidResourceHandle);
    }
    if (s->cap) { /* a node of the capture: never runs here */
        ev->capid = s->capid;
        ev->s = s;
        ev->gen++;
        G.st.captured_ops++;
        return dbl_ret(cudaSuccess);
    }
    ev->capid = 0;
    if (ev->nvc < G.nstreams) {
        uint32_t *vc = realloc(ev->vc, (size_t)G.nstreams * sizeof *vc);

        if (!vc)
            return dbl_ret(cudaErrorMemoryAllocation);
        ev->vc = vc;
    }
    op = dbl_op_new(OP_RECORD);
    op->ev = ev;
    op->gen = ++ev->gen;
    ev->pending++;
    ev->t_ns = 0;
    dbl_enqueue(s, op);
    ev->s = s;
    ev->target = s->enq;
    ev->nvc = G.nstreams;
    memcpy(ev->vc, s->clock.v, (size_t)ev->nvc * sizeof *ev->vc);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
    struct CUevent_st *ev;
    cudaError_t e;

    ENTER("cudaEventQuery");
    ev = event_get(event, "cudaEventQuery", &e);
    if (!ev)
        return dbl_ret(e);
    if (!event_usable(ev, "cudaEventQuery", 1))
        return dbl_ret(cudaSuccess);
    if (ev->capid && dbl_capture_refuses("cudaEventQuery", ev->s, "an event recorded into a capture queried"))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    if (ev->s->done < ev->target)
        return dbl_ret(cudaErrorNotReady); /* a last error too, as PyTorch assumes */
    dbl_host_join(ev->vc, ev->nvc);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
    struct CUevent_st *ev;
    struct CUstream_st *s;
    uint32_t *c;
    uint64_t target;
    cudaError_t e;
    int n;

    ENTER("cudaEventSynchronize");
    ev = event_get(event, "cudaEventSynchronize", &e);
    if (!ev)
        return dbl_ret(e);
    if (!event_usable(ev, "cudaEventSynchronize", 0))
        return dbl_ret(cudaSuccess);
    if (ev->capid && dbl_capture_refuses("cudaEventSynchronize", ev->s, "an event recorded into a capture waited for"))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    n = ev->nvc;
    c = malloc((size_t)n * sizeof *c);
    if (!c)
        return dbl_ret(cudaErrorMemoryAllocation);
    memcpy(c, ev->vc, (size_t)n * sizeof *c);
    s = ev->s;
    target = ev->target; /* the record made before this call; ev may be re-recorded meanwhile */
    dbl_wait_stream(s, target);
    dbl_host_join(c, n);
    free(c);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    struct CUevent_st *a, *z;
    cudaError_t e;

    ENTER("cudaEventElapsedTime");
    if (!ms)
        return dbl_ret(cudaErrorInvalidValue);
    if (!(a = event_get(start, "cudaEventElapsedTime", &e)) || !(z = event_get(end, "cudaEventElapsedTime", &e)))
        return dbl_ret(e);
    if ((a->flags | z->flags) & cudaEventDisableTiming)
        return dbl_ret(cudaErrorInvalidResourceHandle);
    if (!event_usable(a, "cudaEventElapsedTime", 0) || !event_usable(z, "cudaEventElapsedTime", 0))
        return dbl_ret(cudaErrorInvalidResourceHandle);
    if (a->s->done < a->target || z->s->done < z->target)
        return dbl_ret(cudaErrorNotReady);
    *ms = (float)(((double)z->t_ns - (double)a->t_ns) / 1e6);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    struct CUevent_st *ev;
    struct CUstream_st *s;
    struct dbl_op *op;
    cudaError_t e;

    ENTER("cudaStreamWaitEvent");
    if (flags != 0)
        return dbl_ret(cudaErrorInvalidValue);
    ev = event_get(event, "cudaStreamWaitEvent", &e);
    if (!ev)
        return dbl_ret(e);
    s = dbl_stream_get(stream, "cudaStreamWaitEvent", &e);
    if (!s)
        return dbl_ret(e);
    if (!event_usable(ev, "cudaStreamWaitEvent", 0))
        return dbl_ret(cudaSuccess); /* CUDA: waiting on a never-recorded event is a no-op */
    if (s->cap || ev->capid) {
        /* Inside one capture: an edge of the graph.  A capturing stream waiting on work outside its
         * capture, or a stream outside waiting on captured work: refused. */
        if (s->cap && ev->capid == s->capid) {
            G.st.captured_ops++;
            return dbl_ret(cudaSuccess);
        }
        G.st.capture_refusals++;
        dbl_hard(
            CHK_CAPTURE, "cudaStreamWaitEvent", ev, "%s",
            s->cap
                ? "a capturing stream waits on an event recorded outside its capture (cudaErrorStreamCaptureIsolation)"
                : "a stream outside any capture waits on an event recorded into a capture");
        return dbl_ret(s->cap ? cudaErrorStreamCaptureIsolation : cudaErrorStreamCaptureUnsupported);
    }
    op = dbl_op_new(OP_NOP);
    op->waits = malloc(sizeof *op->waits);
    if (!op->waits) {
        free(op);
        return dbl_ret(cudaErrorMemoryAllocation);
    }
    op->waits[0].s = ev->s;
    op->waits[0].target = ev->target;
    op->nwait = 1;
    for (int i = 0; i < ev->nvc; i++)
        if (ev->vc[i] > s->clock.v[i])
            s->clock.v[i] = ev->vc[i];
    dbl_enqueue(s, op);
    return dbl_ret(cudaSuccess);
}

/* ---- a declared kernel ------------------------------------------------------------------------------ */

static cudaError_t launch(cudaStream_t h, const struct hoffdbl_use *use, int nuse, void (*fn)(void *), void *arg) {
    struct CUstream_st *s;
    struct dbl_alloc **as;
    struct dbl_op *op;
    cudaError_t e;

    if (nuse < 0 || (nuse > 0 && !use))
        return cudaErrorInvalidValue;
    s = dbl_stream_get(h, "hoffdbl_launch", &e);
    if (!s)
        return e;
    as = calloc((size_t)nuse + 1, sizeof *as);
    op = dbl_op_new(OP_KERNEL);
    op->use = malloc(((size_t)nuse + 1) * sizeof *op->use);
    if (!as || !op->use) {
        free(as);
        free(op->use);
        free(op);
        return cudaErrorMemoryAllocation;
    }
    for (int k = 0; k < nuse; k++) {
        struct dbl_alloc *a = dbl_alloc_find(use[k].p);
        size_t off = a ? (size_t)((const char *)use[k].p - a->base) : 0;

        if (!a || use[k].n > a->size - off) {
            if (!a)
                dbl_hard(CHK_POINTER, "hoffdbl_launch", use[k].p, "%s (use %d of the kernel)", dbl_ptr_what(use[k].p),
                         k);
            else
                dbl_hard(CHK_RANGE, "hoffdbl_launch", use[k].p,
                         "%zu bytes run past the end of "
                         "the allocation %p (%zu bytes; use %d of the kernel)",
                         use[k].n, (void *)a->base, a->size, k);
            free(as);
            free(op->use);
            free(op);
            return cudaErrorInvalidValue;
        }
        as[k] = a;
        op->use[k] = use[k];
    }
    op->nuse = nuse;
    op->fn = fn;
    op->arg = arg;
    if (s->cap) { /* recorded into the graph, not run */
        G.st.captured_ops++;
        free(as);
        free(op->use);
        free(op);
        return cudaSuccess;
    }
    dbl_enqueue(s, op);
    for (int k = 0; k < nuse; k++) {
        size_t off = (size_t)((const char *)use[k].p - as[k]->base);

        if (as[k]->kind == DBL_DEVICE && use[k].n)
            dbl_dev_access(s, as[k], use[k].p, use[k].n, use[k].write, "hoffdbl_launch");
        if (as[k]->kind == DBL_MANAGED && use[k].n)
            dbl_pages_enqueued(s, as[k], off / DBL_PAGE, (off + use[k].n + DBL_PAGE - 1) / DBL_PAGE, DBL_ACCESS,
                               use[k].write, "hoffdbl_launch");
    }
    free(as);
    return cudaSuccess;
}

cudaError_t hoffdbl_launch(cudaStream_t s, const struct hoffdbl_use *use, int nuse, void (*fn)(void *), void *arg) {
    cudaError_t e = dbl_enter("hoffdbl_launch"), after;

    if (e == cudaSuccess)
        e = launch(s, use, nuse, fn, arg);
    dbl_ret(e);
    after = cudaGetLastError(); /* C10_CUDA_KERNEL_LAUNCH_CHECK */
    if (e == cudaSuccess && after != cudaSuccess) {
        pthread_mutex_lock(&G.lock);
        G.st.stale_launch_errors++;
        dbl_hard(CHK_STALE, "hoffdbl_launch", s,
                 "the launch check found a stale %s (%s) left in "
                 "this thread's last error by an earlier call: PyTorch would raise here",
                 dbl_err_name(after), dbl_err_text(after));
        pthread_mutex_unlock(&G.lock);
    }
    return after;
}
