/* cuda_mem.c — the cuda backend's memory: plain device memory (cudaMalloc), managed mappings
 * (cudaMallocManaged, aligned to 2 MiB, advised and made resident on the device before they are handed
 * out) and the table of them, the device's free memory, memcpy.  The policy: cuda_be.h.
 * Threading: any thread; the mapping table is under b->lock. */
#include "config.h"

#ifdef HAVE_CUDA

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "backend/cuda_be.h"
#include "core/core.h"

/* ---- the mapping table -------------------------------------------------------- */

static size_t map_bucket(const void *p) {
    uint64_t k = (uint64_t)(uintptr_t)p >> 21;

    k *= 0x9E3779B97F4A7C15ull;
    return (size_t)(k >> 54) % MAP_BUCKETS;
}

static int map_insert(struct cuda_be *b, void *p, void *base, size_t size) {
    struct cuda_map *m = malloc(sizeof *m);
    size_t h = map_bucket(p);

    if (!m)
        return hoff__error(-ENOMEM, "cuda: out of host memory for the mapping table");
    m->p = p;
    m->base = base;
    m->size = size;
    pthread_mutex_lock(&b->lock);
    m->next = b->maps[h];
    b->maps[h] = m;
    b->nmaps++;
    b->mapped_bytes += size;
    pthread_mutex_unlock(&b->lock);
    return 0;
}

/* Unlink the mapping at p into *out: 0, -ENOENT (no such mapping) or
 * -ERANGE (it has another size; left in place, its size in *out_size). */
static int map_take(struct cuda_be *b, const void *p, size_t size, struct cuda_map **out, size_t *out_size) {
    struct cuda_map **pp, *m;
    int rc = -ENOENT;

    *out = NULL;
    pthread_mutex_lock(&b->lock);
    for (pp = &b->maps[map_bucket(p)]; *pp; pp = &(*pp)->next) {
        m = *pp;
        if (m->p != p)
            continue;
        if (m->size != size) {
            *out_size = m->size;
            rc = -ERANGE;
            break;
        }
        *pp = m->next;
        b->nmaps--;
        b->mapped_bytes -= m->size;
        *out = m;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* ---- memory ------------------------------------------------------------------- */

int hoff__cuda_mem_info(struct hoff__backend *be, uint64_t *free_b, uint64_t *total_b) {
    struct cuda_be *b = cbe(be);
    size_t f = 0, t = 0;
    int saved, rc = hoff__cuda_dev_enter(b, &saved);
    cudaError_t e;

    if (rc)
        return rc;
    e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaMemGetInfo(device %d)", b->device);
    hoff__cuda_dev_leave(b, saved);
    if (rc)
        return rc;
    if (free_b)
        *free_b = f;
    if (total_b)
        *total_b = t;
    return 0;
}

int hoff__cuda_dev_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct cuda_be *b = cbe(be);
    void *p = NULL;
    int saved, rc;
    cudaError_t e;

    *out = NULL;
    if (size == 0)
        return hoff__error(-EINVAL, "cuda: dev_alloc of 0 bytes");
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    {
        /* A stream of this thread may be capturing a graph (the pool serves
         * its allocations): in the global or thread-local capture mode
         * cudaMalloc, a call that may synchronise, would fail and invalidate
         * the capture.  The relaxed mode lets it through, as PyTorch's own
         * allocator does (CUDAStreamCaptureModeGuard). */
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        int swapped = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;

        if (!swapped)
            (void)cudaGetLastError();
        e = cudaMalloc(&p, size);
        if (swapped && cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess)
            (void)cudaGetLastError();
    }
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaMalloc(%zu)", size);
    else
        *out = p;
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

int hoff__cuda_dev_free(struct hoff__backend *be, void *p, size_t size) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (!p)
        return 0;
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaFree(p);
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaFree(%p, %zu bytes)", p, size);
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

void hoff__cuda_managed_release(void *base) {
    if (cudaFree(base) != cudaSuccess)
        (void)cudaGetLastError();
}

int hoff__cuda_managed_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct cuda_be *b = cbe(be);
    void *base = NULL, *p;
    int saved, rc;
    cudaError_t e;

    *out = NULL;
    if (size == 0 || size % HOFF__MANAGED_GRAIN)
        return hoff__error(-EINVAL, "cuda: managed_alloc(%zu): not a positive multiple of 2 MiB", size);
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaMallocManaged(&base, size, cudaMemAttachGlobal);
    if (e != cudaSuccess) {
        rc = hoff__cuda_fail(e, "cudaMallocManaged(%zu)", size);
        goto out;
    }
    p = base;
    if ((uintptr_t)base % HOFF__MANAGED_GRAIN) {
        /* Separate 2 MiB blocks migrate separately only if the mapping
         * starts on a grain: over-allocate and hand out the aligned part
         * (the slack is never touched, so it never gets pages). */
        hoff__cuda_managed_release(base);
        base = NULL;
        if (size > SIZE_MAX - HOFF__MANAGED_GRAIN) {
            rc = hoff__error(-ENOMEM, "cuda: managed_alloc(%zu): too large", size);
            goto out;
        }
        e = cudaMallocManaged(&base, size + HOFF__MANAGED_GRAIN, cudaMemAttachGlobal);
        if (e != cudaSuccess) {
            rc = hoff__cuda_fail(e, "cudaMallocManaged(%zu)", size + HOFF__MANAGED_GRAIN);
            goto out;
        }
        p = (void *)(uintptr_t)hoff__align_up((uint64_t)(uintptr_t)base, HOFF__MANAGED_GRAIN);
        HOFF__LOG_ONCE(HOFF_LOG_DEBUG, "cuda: cudaMallocManaged returned an address off the "
                                       "2 MiB grain; over-allocating managed mappings by 2 MiB to align them");
    }
    e = cuda_advise_(p, size, cudaMemAdviseSetPreferredLocation, b->dev_loc);
    if (e != cudaSuccess) {
        /* Advice is only a hint: keep going without it. */
        (void)cudaGetLastError();
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "cuda: cudaMemAdvise(SetPreferredLocation, device %d) "
                       "failed: %s; managed memory works without it",
                       b->device, cudaGetErrorString(e));
    }
    e = cuda_prefetch_(p, size, b->dev_loc, 0, b->pop);
    if (e != cudaSuccess) {
        rc = hoff__cuda_fail(e, "cudaMemPrefetchAsync(%p, %zu, device %d)", p, size, b->device);
        hoff__cuda_managed_release(base);
        goto out;
    }
    e = cudaStreamSynchronize(b->pop);
    if (e != cudaSuccess) {
        rc = hoff__cuda_fail(e, "cudaStreamSynchronize(initial prefetch of %zu bytes)", size);
        hoff__cuda_managed_release(base);
        goto out;
    }
    rc = map_insert(b, p, base, size);
    if (rc) {
        hoff__cuda_managed_release(base);
        goto out;
    }
    *out = p;
out:
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

int hoff__cuda_managed_free(struct hoff__backend *be, void *p, size_t size) {
    struct cuda_be *b = cbe(be);
    struct cuda_map *m;
    size_t have = 0;
    int saved, rc;
    cudaError_t e;

    if (!p)
        return 0;
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    rc = map_take(b, p, size, &m, &have);
    if (rc == -ENOENT) {
        rc = hoff__error(-EINVAL, "cuda: managed_free(%p): not a managed mapping of this backend", p);
    } else if (rc == -ERANGE) {
        rc = hoff__error(-EINVAL, "cuda: managed_free(%p, %zu): the mapping has %zu bytes", p, size, have);
    } else {
        e = cudaFree(m->base);
        if (e != cudaSuccess)
            rc = hoff__cuda_fail(e, "cudaFree(managed %p, %zu bytes)", p, size);
        free(m);
    }
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

/* ---- the rest ------------------------------------------------------------------------- */

int hoff__cuda_memcpy(struct hoff__backend *be, void *dst, const void *src, size_t n) {
    struct cuda_be *b = cbe(be);
    int saved, rc;
    cudaError_t e;

    if (n == 0)
        return 0;
    rc = hoff__cuda_dev_enter(b, &saved);
    if (rc)
        return rc;
    e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    if (e != cudaSuccess)
        rc = hoff__cuda_fail(e, "cudaMemcpy(%p <- %p, %zu)", dst, src, n);
    hoff__cuda_dev_leave(b, saved);
    return rc;
}

#else /* !HAVE_CUDA */

typedef int hoff__cuda_unused; /* an empty translation unit is not ISO C */

#endif
