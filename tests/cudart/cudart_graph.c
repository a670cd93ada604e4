/* cudart_graph.c — the CUDA runtime double's stream capture: cudaStreamBeginCapture / EndCapture /
 * IsCapturing, cudaThreadExchangeStreamCaptureMode and cudaGraphDestroy, and the refusals CUDA makes
 * while a capture is open: managed memory (allocation, prefetch, advice) during any capture; calls that
 * may synchronise (cudaMalloc, cudaFree, device synchronisation) under a global-mode capture unless the
 * thread switched to the relaxed mode; synchronising with or querying a capturing stream or an event
 * recorded into a capture; a capturing stream waiting on work outside its capture.  Ops enqueued on a
 * capturing stream are recorded (counted), never run.
 * Threading: any thread; each call runs under G.lock; the capture mode is per thread (TLS). */
#include <stdlib.h>

#include "dbl.h"

static __thread enum cudaStreamCaptureMode tls_mode = cudaStreamCaptureModeGlobal;

/* What cudaStreamEndCapture hands back: a graph nothing can launch (the double runs no graphs). */
struct CUgraph_st {
    uint64_t capid;
    uint64_t nops;
};

int dbl_capture_unsafe(const char *call) {
    if (G.ncap_global == 0 || tls_mode == cudaStreamCaptureModeRelaxed)
        return 0;
    G.st.capture_refusals++;
    dbl_hard(CHK_CAPTURE, call, NULL,
             "called while a stream captures in cudaStreamCaptureModeGlobal, from a "
             "thread not in the relaxed mode: CUDA refuses it (cudaErrorStreamCaptureUnsupported) and "
             "invalidates the capture (cudaThreadExchangeStreamCaptureMode(relaxed) around it)");
    return 1;
}

int dbl_capture_refuses(const char *call, const struct CUstream_st *s, const char *what) {
    if (!(s && s->cap) && !(what && G.ncap > 0))
        return 0;
    G.st.capture_refusals++;
    dbl_hard(CHK_CAPTURE, call, s, "%s during stream capture: CUDA refuses it (cudaErrorStreamCaptureUnsupported)",
             what ? what : "a synchronising or querying call on a capturing stream");
    return 1;
}

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    struct CUstream_st *s;
    cudaError_t e;

    ENTER("cudaStreamBeginCapture");
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return dbl_ret(cudaErrorInvalidValue);
    s = dbl_stream_get(stream, "cudaStreamBeginCapture", &e);
    if (!s)
        return dbl_ret(e);
    if (s->legacy)
        return dbl_ret(cudaErrorStreamCaptureUnsupported); /* the legacy stream cannot be captured */
    if (s->cap)
        return dbl_ret(cudaErrorIllegalState);
    s->cap = 1;
    s->capmode = mode;
    s->capid = ++G.next_capid;
    G.ncap++;
    if (mode == cudaStreamCaptureModeGlobal)
        G.ncap_global++;
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
    struct CUstream_st *s;
    struct CUgraph_st *g;
    cudaError_t e;

    ENTER("cudaStreamEndCapture");
    if (!pGraph)
        return dbl_ret(cudaErrorInvalidValue);
    s = dbl_stream_get(stream, "cudaStreamEndCapture", &e);
    if (!s)
        return dbl_ret(e);
    if (!s->cap)
        return dbl_ret(cudaErrorStreamCaptureUnmatched);
    g = calloc(1, sizeof *g);
    if (!g)
        return dbl_ret(cudaErrorMemoryAllocation);
    g->capid = s->capid;
    s->cap = 0;
    G.ncap--;
    if (s->capmode == cudaStreamCaptureModeGlobal)
        G.ncap_global--;
    *pGraph = g;
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
    ENTER("cudaGraphDestroy");
    if (!graph)
        return dbl_ret(cudaErrorInvalidValue);
    free(graph);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus) {
    struct CUstream_st *s;
    cudaError_t e;

    ENTER("cudaStreamIsCapturing");
    if (!pCaptureStatus)
        return dbl_ret(cudaErrorInvalidValue);
    s = dbl_stream_get(stream, "cudaStreamIsCapturing", &e);
    if (!s)
        return dbl_ret(e);
    /* Asking about the legacy stream while a blocking stream of its device captures: CUDA answers
     * with an error (the query would join the legacy stream to the capture). */
    if (s->legacy)
        for (int i = 0; i < G.nstreams; i++)
            if (G.streams[i]->cap && G.streams[i]->dev == s->dev && !(G.streams[i]->flags & cudaStreamNonBlocking))
                return dbl_ret(cudaErrorStreamCaptureImplicit);
    *pCaptureStatus = s->cap ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
    enum cudaStreamCaptureMode old;

    ENTER("cudaThreadExchangeStreamCaptureMode");
    if (!mode || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                  *mode != cudaStreamCaptureModeRelaxed))
        return dbl_ret(cudaErrorInvalidValue);
    old = tls_mode;
    tls_mode = *mode;
    *mode = old;
    return dbl_ret(cudaSuccess);
}
