/* cuda_event.c — the cuda backend's events and stream order: hoff__event is a cudaEvent_t; record,
 * query, wait (host and stream), elapsed time; whether a stream is capturing a graph; sync and the
 * clock.  The policy: cuda_be.h.
 * Threading: any thread (each call makes the device current). */
#include "config.h"

#ifdef HAVE_CUDA

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend/cuda_be.h"
#include "core/core.h"

/* A query found work pending: the runtime keeps cudaErrorNotReady as the
 * thread's last error, which the framework's next launch check would take
 * for its own failure.  Clear it, but only if it is still the last error. */
static void clear_not_ready(void) {
    if (cudaPeekAtLastError() == cudaErrorNotReady)
        (void)cudaGetLastError();
}

/* ---- events --------------------------------------------------------------------- */

static int event_create_flags(struct hoff__backend *be, hoff__event **out, unsigned flags) {
    struct cuda_be *b = cbe(be);
    cudaEvent_t ev = NULL;
    int saved, rc = hoff__cuda_dev_enter(b, &saved);
    cudaError_t e;

    *out = NULL;
    if (rc)
        return rc;
    e = cudaEventCreateWithFlags(&ev, flags);
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaEventCreateWithFlags(%#x)", flags);
    else
        *out = (hoff__event *)(void *)ev;
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

int hoff__cuda_event_create(struct hoff__backend *be, hoff__event **out) {
    return event_create_flags(be, out, cudaEventDisableTiming);
}

/* For the recorder's device-timeline estimate: events with timing. */
int hoff__cuda_event_create_timed(struct hoff__backend *be, hoff__event **out) {
    return event_create_flags(be, out, cudaEventDefault);
}

int hoff__cuda_event_elapsed_ns(struct hoff__backend *be, hoff__event *a, hoff__event *z, uint64_t *ns) {
    struct cuda_be *b = cbe(be);
    float ms = 0;
    int saved, rc;
    cudaError_t e;

    if (!a || !z || !ns)
        return hoff__error(-EINVAL, "cuda: event_elapsed_ns: NULL argument");
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventElapsedTime(&ms, cev(a), cev(z));
    if (e == cudaErrorNotReady) {
        clear_not_ready();
        rc = -EAGAIN;
    } else if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaEventElapsedTime");
    else
        *ns = ms > 0 ? (uint64_t)((double)ms * 1e6 + 0.5) : 0;
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

void hoff__cuda_event_destroy(struct hoff__backend *be, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved;

    if (!ev || hoff__cuda_dev_enter(b, &saved))
        return;
    if (cudaEventDestroy(cev(ev)) != cudaSuccess)
        (void)cudaGetLastError();
    hoff__cuda_dev_leave(b, saved);
}

int hoff__cuda_event_record(struct hoff__backend *be, hoff__event *ev, hoff_stream s) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return hoff__error(-EINVAL, "cuda: event_record of a NULL event");
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventRecord(cev(ev), cstream(s));
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaEventRecord(stream %p)", s);
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

int hoff__cuda_event_query(struct hoff__backend *be, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return hoff__error(-EINVAL, "cuda: event_query of a NULL event");
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventQuery(cev(ev));
    if (e == cudaErrorNotReady) {
        clear_not_ready(); /* pending is no failure, and must not look like one later */
        rc = -EAGAIN;
    } else if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaEventQuery");
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

int hoff__cuda_event_sync(struct hoff__backend *be, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return hoff__error(-EINVAL, "cuda: event_sync of a NULL event");
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaEventSynchronize(cev(ev));
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaEventSynchronize");
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

int hoff__cuda_stream_wait(struct hoff__backend *be, hoff_stream s, hoff__event *ev) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!ev)
        return 0; /* nothing to wait for */
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaStreamWaitEvent(cstream(s), cev(ev), 0);
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaStreamWaitEvent(stream %p)", s);
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

int hoff__cuda_stream_capturing(struct hoff__backend *be, hoff_stream s) {
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e;

    (void)be;
    e = cudaStreamIsCapturing((cudaStream_t)s, &st);
    if (e != cudaSuccess)
        return hoff__cuda_fail(e, "cudaStreamIsCapturing(%p)", s);
    /* Invalidated counts as capturing: the capture is still open and must
     * not see managed memory either. */
    return st != cudaStreamCaptureStatusNone;
}

int hoff__cuda_sync(struct hoff__backend *be) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaDeviceSynchronize(device %d)", b->device);
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

uint64_t hoff__cuda_clock_ns(struct hoff__backend *be) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int hoff__cuda_compute(struct hoff__backend *be, hoff_stream s, uint64_t ns) {
    return hoff__error(-ENOTSUP, "cuda: simulated compute exists only on the sim backend");
}

#else /* !HAVE_CUDA */

typedef int hoff__cuda_unused; /* an empty translation unit is not ISO C */

#endif
