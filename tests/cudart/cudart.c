/* cudart.c — the CUDA runtime double's entry points for devices, errors, memory and managed memory,
 * with the exact prototypes of the CUDA 13 cuda_runtime_api.h (legacy default stream names).
 * Streams, events and hoffdbl_launch are in cudart_stream.c.
 * Threading: any thread; each call runs under G.lock (dbl_enter .. dbl_ret) and blocks only where
 * the runtime does (synchronous copies, synchronisations, cudaFree). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbl.h"

/* Every runtime function the double implements (hoffdbl_fail accepts these names). */
const char *const dbl_calls[] = {
    "cudaGetDeviceCount",
    "cudaSetDevice",
    "cudaGetDevice",
    "cudaGetDeviceProperties",
    "cudaDeviceGetAttribute",
    "cudaDeviceGetPCIBusId",
    "cudaDeviceGetStreamPriorityRange",
    "cudaDeviceSynchronize",
    "cudaMalloc",
    "cudaFree",
    "cudaMallocManaged",
    "cudaMallocHost",
    "cudaFreeHost",
    "cudaHostAlloc",
    "cudaMemGetInfo",
    "cudaMemcpy",
    "cudaMemcpyAsync",
    "cudaMemset",
    "cudaMemsetAsync",
    "cudaStreamCreate",
    "cudaStreamCreateWithFlags",
    "cudaStreamCreateWithPriority",
    "cudaStreamDestroy",
    "cudaStreamSynchronize",
    "cudaStreamQuery",
    "cudaStreamWaitEvent",
    "cudaLaunchHostFunc",
    "cudaEventCreate",
    "cudaEventCreateWithFlags",
    "cudaEventDestroy",
    "cudaEventRecord",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaEventElapsedTime",
    "cudaMemPrefetchAsync",
    "cudaMemAdvise",
    "cudaMemRangeGetAttribute",
    "cudaMemDiscardBatchAsync",
    "cudaMemDiscardAndPrefetchBatchAsync",
    "cudaMemPrefetchBatchAsync",
    "hoffdbl_launch",
    "cudaStreamBeginCapture",
    "cudaStreamEndCapture",
    "cudaStreamIsCapturing",
    "cudaThreadExchangeStreamCaptureMode",
    "cudaGraphDestroy",
    NULL,
};

static int dev_ok(int d) {
    return d >= 0 && d < G.ndev;
}

/* ---- devices ------------------------------------------------------------------------------------ */

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count) {
    ENTER("cudaGetDeviceCount");
    if (!count)
        return dbl_ret(cudaErrorInvalidValue);
    *count = G.ndev;
    return dbl_ret(G.ndev ? cudaSuccess : cudaErrorNoDevice);
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
    ENTER("cudaSetDevice");
    if (!dev_ok(device))
        return dbl_ret(G.ndev ? cudaErrorInvalidDevice : cudaErrorNoDevice);
    dbl_set_cur_dev(device);
    dbl_need_ctx(); /* CUDA 12+: cudaSetDevice creates the primary context */
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaGetDevice(int *device) {
    ENTER("cudaGetDevice");
    if (!device)
        return dbl_ret(cudaErrorInvalidValue);
    if (!G.ndev)
        return dbl_ret(cudaErrorNoDevice);
    *device = dbl_cur_dev();
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    ENTER("cudaGetDeviceProperties");
    if (!prop)
        return dbl_ret(cudaErrorInvalidValue);
    if (!dev_ok(device))
        return dbl_ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "hoffdbl CUDA double, device %d", device);
    prop->totalGlobalMem = (size_t)G.cap;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 132;
    prop->warpSize = 32;
    prop->managedMemory = 1;
    prop->concurrentManagedAccess = 1;
    prop->pciBusID = 0x10 + device;
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    ENTER("cudaDeviceGetAttribute");
    if (!value)
        return dbl_ret(cudaErrorInvalidValue);
    if (!dev_ok(device))
        return dbl_ret(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrManagedMemory:
    case cudaDevAttrConcurrentManagedAccess: *value = 1; break;
    case cudaDevAttrHostNumaId: *value = G.numa_nodes > 0 ? 0 : -1; break;
    default: *value = 0; break;
    }
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
    ENTER("cudaDeviceGetPCIBusId");
    if (!pciBusId || len < 13)
        return dbl_ret(cudaErrorInvalidValue);
    if (!dev_ok(device))
        return dbl_ret(cudaErrorInvalidDevice);
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + device);
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
    ENTER("cudaDeviceGetStreamPriorityRange");
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5; /* as on an H100/H200 */
    return dbl_ret(cudaSuccess);
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
    ENTER("cudaDeviceSynchronize");
    dbl_need_ctx();
    if (dbl_capture_unsafe("cudaDeviceSynchronize"))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    dbl_sync_all(dbl_cur_dev());
    return dbl_ret(cudaSuccess);
}

/* ---- errors ---------------------------------------------------------------------------------------- */

cudaError_t CUDARTAPI cudaGetLastError(void) {
    return dbl_last_take(1);
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
    return dbl_last_take(0);
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t error) {
    return dbl_err_text(error);
}

const char *CUDARTAPI cudaGetErrorName(cudaError_t error) {
    return dbl_err_name(error);
}

/* ---- allocation ------------------------------------------------------------------------------------ */

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size) {
    struct dbl_alloc *a;
    int d;

    ENTER("cudaMalloc");
    if (!devPtr)
        return dbl_ret(cudaErrorInvalidValue);
    *devPtr = NULL;
    dbl_need_ctx();
    if (dbl_capture_unsafe("cudaMalloc"))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    if (size == 0)
        return dbl_ret(cudaSuccess);
    d = dbl_cur_dev();
    /* The driver evicts managed pages to make room for cudaMalloc. */
    if (size > G.cap || dbl_room(d, size, NULL, 0, 0))
        return dbl_ret(cudaErrorMemoryAllocation);
    a = dbl_alloc_new(DBL_DEVICE, size, d);
    if (!a)
        return dbl_ret(cudaErrorMemoryAllocation);
    *devPtr = a->base;
    return dbl_ret(cudaSuccess);
}

/* cudaFree / cudaFreeHost: the start of a live allocation of one of the kinds in `want`. */
static cudaError_t free_common(const char *call, void *p, int host) {
    struct dbl_alloc *a;

    dbl_need_ctx();
    if (!p)
        return cudaSuccess;
    if (dbl_capture_unsafe(call))
        return cudaErrorStreamCaptureUnsupported;
    dbl_sync_all(-1); /* cudaFree synchronises */
    a = dbl_alloc_find(p);
    if (!a) {
        dbl_hard(CHK_POINTER, call, p, "%s", dbl_ptr_what(p));
        return cudaErrorInvalidValue;
    }
    if (a->base != (char *)p) {
        dbl_hard(CHK_POINTER, call, p, "%zu bytes into the allocation %p, not its start", (size_t)((char *)p - a->base),
                 (void *)a->base);
        return cudaErrorInvalidValue;
    }
    if ((a->kind == DBL_PINNED) != host) {
        dbl_hard(CHK_POINTER, call, p, "%s memory: free it with %s", host ? "device or managed" : "pinned host",
                 host ? "cudaFree" : "cudaFreeHost");
        return cudaErrorInvalidValue;
    }
    dbl_alloc_destroy(a);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFree(void *devPtr) {
    ENTER("cudaFree");
    return dbl_ret(free_common("cudaFree", devPtr, 0));
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr) {
    ENTER("cudaFreeHost");
    return dbl_ret(free_common("cudaFreeHost", ptr, 1));
}

cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
    struct dbl_alloc *a;

    ENTER("cudaMallocManaged");
    if (!devPtr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return dbl_ret(cudaErrorInvalidValue);
    *devPtr = NULL;
    dbl_need_ctx();
    if (dbl_capture_refuses("cudaMallocManaged", NULL, "managed memory allocated"))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    a = dbl_alloc_new(DBL_MANAGED, size, dbl_cur_dev());
    if (!a)
        return dbl_ret(cudaErrorMemoryAllocation);
    *devPtr = a->base;
    return dbl_ret(cudaSuccess);
}

static cudaError_t host_alloc(void **p, size_t size) {
    struct dbl_alloc *a;

    if (!p)
        return cudaErrorInvalidValue;
    *p = NULL;
    dbl_need_ctx();
    if (size == 0)
        return cudaSuccess;
    a = dbl_alloc_new(DBL_PINNED, size, dbl_cur_dev());
    if (!a)
        return cudaErrorMemoryAllocation;
    *p = a->base;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size) {
    ENTER("cudaMallocHost");
    return dbl_ret(host_alloc(ptr, size));
}

cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
    ENTER("cudaHostAlloc");
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return dbl_ret(cudaErrorInvalidValue);
    return dbl_ret(host_alloc(pHost, size));
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free, size_t *total) {
    ENTER("cudaMemGetInfo");
    if (!free || !total)
        return dbl_ret(cudaErrorInvalidValue);
    dbl_need_ctx();
    *free = (size_t)dbl_dev_free(dbl_cur_dev());
    *total = (size_t)G.cap;
    return dbl_ret(cudaSuccess);
}

/* ---- copies and memsets ------------------------------------------------------------------------------ */

/* (p, n) is inside a live allocation (*a) or is memory the runtime never saw (*a = NULL, allowed
 * only when `foreign_ok`): else a hard error. */
static cudaError_t span_ok(const char *call, const void *p, size_t n, int foreign_ok, struct dbl_alloc **a) {
    size_t off;

    *a = dbl_alloc_find(p);
    if (!*a) {
        if (foreign_ok && !dbl_set_find(&G.freed, (uintptr_t)p, NULL))
            return cudaSuccess;
        dbl_hard(CHK_POINTER, call, p, "%s", dbl_ptr_what(p));
        return cudaErrorInvalidValue;
    }
    off = (size_t)((const char *)p - (*a)->base);
    if (n > (*a)->size - off) {
        dbl_hard(CHK_RANGE, call, p,
                 "%zu bytes run %zu bytes past the end of the allocation %p "
                 "(%zu bytes)",
                 n, n - ((*a)->size - off), (void *)(*a)->base, (*a)->size);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

/* A copy or memset op on s touching managed pages or device memory counts as an access for the
 * race check (not when s captures: the op is recorded, not run). */
static void note_access(struct CUstream_st *s, struct dbl_alloc *a, const void *p, size_t n, int write,
                        const char *call) {
    size_t off;

    if (!a || n == 0 || s->cap)
        return;
    if (a->kind == DBL_DEVICE) {
        dbl_dev_access(s, a, p, n, write, call);
        return;
    }
    if (a->kind != DBL_MANAGED)
        return;
    off = (size_t)((const char *)p - a->base);
    dbl_pages_enqueued(s, a, off / DBL_PAGE, (off + n + DBL_PAGE - 1) / DBL_PAGE, DBL_ACCESS, write, call);
}

/* Enqueue a copy or (kind -1) a memset on s; wait for it when `sync`. */
static cudaError_t copy_common(const char *call, void *dst, const void *src, int value, size_t n, int kind,
                               cudaStream_t h, int sync) {
    int is_copy = kind != -1;
    struct dbl_alloc *ad = NULL, *as = NULL;
    struct CUstream_st *s;
    struct dbl_op *op;
    cudaError_t e;

    if (is_copy && (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault))
        return cudaErrorInvalidMemcpyDirection;
    s = dbl_stream_get(h, call, &e);
    if (!s)
        return e;
    if (sync && (dbl_capture_refuses(call, s, NULL) || dbl_capture_unsafe(call)))
        return cudaErrorStreamCaptureUnsupported;
    if (n == 0)
        return cudaSuccess;
    if (!dst || (is_copy && !src) || (e = span_ok(call, dst, n, is_copy, &ad)) != cudaSuccess ||
        (src && (e = span_ok(call, src, n, 1, &as)) != cudaSuccess))
        return e ? e : cudaErrorInvalidValue;
    if (s->cap) { /* a node of the capture: recorded, not run */
        G.st.captured_ops++;
        return cudaSuccess;
    }
    op = dbl_op_new(is_copy ? OP_COPY : OP_SET);
    op->dst = dst;
    op->src = src;
    op->value = value;
    op->n = n;
    dbl_enqueue(s, op);
    note_access(s, ad, dst, n, 1, call);
    note_access(s, as, src, n, 0, call);
    if (sync) {
        struct dbl_vc *c = malloc(sizeof *c);
        uint64_t target = s->enq;

        if (c)
            memcpy(c, &s->clock, sizeof *c);
        dbl_wait_stream(s, target);
        if (c)
            dbl_host_join(c->v, G.nstreams);
        free(c);
    }
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    ENTER("cudaMemcpy");
    return dbl_ret(copy_common("cudaMemcpy", dst, src, 0, count, (int)kind, NULL, 1));
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
    ENTER("cudaMemcpyAsync");
    return dbl_ret(copy_common("cudaMemcpyAsync", dst, src, 0, count, (int)kind, stream, 0));
}

cudaError_t CUDARTAPI cudaMemset(void *devPtr, int value, size_t count) {
    ENTER("cudaMemset");
    return dbl_ret(copy_common("cudaMemset", devPtr, NULL, value, count, -1, NULL, 1));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    ENTER("cudaMemsetAsync");
    return dbl_ret(copy_common("cudaMemsetAsync", devPtr, NULL, value, count, -1, stream, 0));
}

/* ---- managed memory: prefetch, discard, advice, attributes -------------------------------------------- */

/* Enqueue one move op of n ranges (validated first) on stream h. */
static cudaError_t move_common(const char *call, void **ptrs, size_t *sizes, size_t count,
                               const struct cudaMemLocation *locs, const size_t *idx, size_t nlocs, int discard,
                               unsigned long long flags, cudaStream_t h) {
    struct dbl_alloc **as;
    struct CUstream_st *s;
    struct dbl_op *op;
    cudaError_t e;
    size_t i, li = 0;

    if (!ptrs || !sizes || count == 0 || flags != 0 || (locs && (!idx || nlocs == 0 || nlocs > count)))
        return cudaErrorInvalidValue;
    for (i = 0; locs && i < nlocs; i++)
        if (!dbl_loc_ok(locs[i]) || (i == 0 && idx[0] != 0) || (i > 0 && idx[i] <= idx[i - 1]) || idx[i] >= count)
            return cudaErrorInvalidValue;
    s = dbl_stream_get(h, call, &e);
    if (!s)
        return e;
    if (dbl_capture_refuses(call, s, "managed memory prefetched or discarded"))
        return cudaErrorStreamCaptureUnsupported;
    as = calloc(count, sizeof *as);
    op = dbl_op_new(OP_MOVE);
    op->ranges = calloc(count, sizeof *op->ranges);
    if (!as || !op->ranges) {
        free(as);
        free(op->ranges);
        free(op);
        return cudaErrorMemoryAllocation;
    }
    for (i = 0; i < count; i++) {
        if (sizes[i] == 0 || dbl_managed_range(call, ptrs[i], sizes[i], &as[i])) {
            free(as);
            free(op->ranges);
            free(op);
            return cudaErrorInvalidValue;
        }
        while (locs && li + 1 < nlocs && idx[li + 1] <= i)
            li++;
        op->ranges[i].p = ptrs[i];
        op->ranges[i].n = sizes[i];
        op->ranges[i].discard = discard;
        if (locs)
            op->ranges[i].loc = locs[li];
    }
    op->nrange = (int)count;
    dbl_enqueue(s, op);
    for (i = 0; i < count; i++) {
        size_t off = (size_t)((char *)ptrs[i] - as[i]->base);

        dbl_pages_enqueued(s, as[i], off / DBL_PAGE, (off + sizes[i] + DBL_PAGE - 1) / DBL_PAGE,
                           discard ? DBL_DISCARD : DBL_MOVE, 0, call);
        dbl_xop_enqueued(s, as[i], ptrs[i], sizes[i], (discard ? DBL_X_DISCARD : 0) | (locs ? DBL_X_PREFETCH : 0),
                         call);
    }
    free(as);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
                                           unsigned int flags, cudaStream_t stream) {
    void *p = (void *)(uintptr_t)devPtr;
    size_t idx = 0;

    ENTER("cudaMemPrefetchAsync");
    return dbl_ret(move_common("cudaMemPrefetchAsync", &p, &count, 1, &location, &idx, 1, 0, flags, stream));
}

cudaError_t CUDARTAPI cudaMemPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                                struct cudaMemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                                size_t numPrefetchLocs, unsigned long long flags, cudaStream_t stream) {
    ENTER("cudaMemPrefetchBatchAsync");
    if (!prefetchLocs)
        return dbl_ret(cudaErrorInvalidValue);
    return dbl_ret(move_common("cudaMemPrefetchBatchAsync", dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                               numPrefetchLocs, 0, flags, stream));
}

cudaError_t CUDARTAPI cudaMemDiscardBatchAsync(void **dptrs, size_t *sizes, size_t count, unsigned long long flags,
                                               cudaStream_t stream) {
    ENTER("cudaMemDiscardBatchAsync");
    return dbl_ret(move_common("cudaMemDiscardBatchAsync", dptrs, sizes, count, NULL, NULL, 0, 1, flags, stream));
}

cudaError_t CUDARTAPI cudaMemDiscardAndPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                                          struct cudaMemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                                          size_t numPrefetchLocs, unsigned long long flags,
                                                          cudaStream_t stream) {
    ENTER("cudaMemDiscardAndPrefetchBatchAsync");
    if (!prefetchLocs)
        return dbl_ret(cudaErrorInvalidValue);
    return dbl_ret(move_common("cudaMemDiscardAndPrefetchBatchAsync", dptrs, sizes, count, prefetchLocs,
                               prefetchLocIdxs, numPrefetchLocs, 1, flags, stream));
}

cudaError_t CUDARTAPI cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                                    struct cudaMemLocation location) {
    struct dbl_alloc *a;
    size_t off, i;

    ENTER("cudaMemAdvise");
    dbl_need_ctx();
    if (dbl_capture_refuses("cudaMemAdvise", NULL, "managed memory advised"))
        return dbl_ret(cudaErrorStreamCaptureUnsupported);
    if (count == 0 || advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy)
        return dbl_ret(cudaErrorInvalidValue);
    if ((advice == cudaMemAdviseSetPreferredLocation || advice == cudaMemAdviseSetAccessedBy ||
         advice == cudaMemAdviseUnsetAccessedBy) &&
        !dbl_loc_ok(location))
        return dbl_ret(cudaErrorInvalidValue);
    if (dbl_managed_range("cudaMemAdvise", devPtr, count, &a))
        return dbl_ret(cudaErrorInvalidValue);
    off = (size_t)((const char *)devPtr - a->base);
    for (i = off / DBL_PAGE; i < (off + count + DBL_PAGE - 1) / DBL_PAGE; i++) {
        if (advice == cudaMemAdviseSetPreferredLocation) {
            a->pages[i].pref_type = (int8_t)location.type;
            a->pages[i].pref_id = location.id;
        } else if (advice == cudaMemAdviseUnsetPreferredLocation) {
            a->pages[i].pref_type = 0;
            a->pages[i].pref_id = 0;
        }
    }
    return dbl_ret(cudaSuccess);
}

/* One of the page's (type, id) pairs, the same over [lo, hi) or none (type 0). */
static void range_loc(const struct dbl_alloc *a, size_t lo, size_t hi, int pref, int *type, int *id) {
    for (size_t i = lo; i < hi; i++) {
        int t = pref ? a->pages[i].pref_type : a->pages[i].lp_type;
        int d = pref ? a->pages[i].pref_id : a->pages[i].lp_id;

        if (i == lo) {
            *type = t;
            *id = d;
        } else if (t != *type || d != *id) {
            *type = 0;
            *id = 0;
            return;
        }
    }
}

cudaError_t CUDARTAPI cudaMemRangeGetAttribute(void *data, size_t dataSize, enum cudaMemRangeAttribute attribute,
                                               const void *devPtr, size_t count) {
    struct dbl_alloc *a;
    size_t off;
    int type = 0, id = 0, *out = data;

    ENTER("cudaMemRangeGetAttribute");
    if (!data || count == 0 || dataSize < sizeof(int) || dataSize % sizeof(int))
        return dbl_ret(cudaErrorInvalidValue);
    if (dbl_managed_range("cudaMemRangeGetAttribute", devPtr, count, &a))
        return dbl_ret(cudaErrorInvalidValue);
    off = (size_t)((const char *)devPtr - a->base);
    range_loc(a, off / DBL_PAGE, (off + count + DBL_PAGE - 1) / DBL_PAGE,
              attribute == cudaMemRangeAttributePreferredLocation ||
                  attribute == cudaMemRangeAttributePreferredLocationType ||
                  attribute == cudaMemRangeAttributePreferredLocationId,
              &type, &id);
    switch (attribute) {
    case cudaMemRangeAttributeReadMostly: *out = 0; break;
    case cudaMemRangeAttributeAccessedBy:
        for (size_t i = 0; i < dataSize / sizeof(int); i++)
            out[i] = cudaInvalidDeviceId;
        break;
    case cudaMemRangeAttributePreferredLocation:
    case cudaMemRangeAttributeLastPrefetchLocation:
        *out = type == cudaMemLocationTypeDevice ? id : type ? cudaCpuDeviceId : cudaInvalidDeviceId;
        break;
    case cudaMemRangeAttributePreferredLocationType:
    case cudaMemRangeAttributeLastPrefetchLocationType: *out = type; break;
    case cudaMemRangeAttributePreferredLocationId:
    case cudaMemRangeAttributeLastPrefetchLocationId: *out = type ? id : cudaInvalidDeviceId; break;
    default: return dbl_ret(cudaErrorInvalidValue);
    }
    return dbl_ret(cudaSuccess);
}
