/* test_multi_double.c — hoff's multi-GPU rules on the strict CUDA runtime double (issue 20), one mode per run:
 *   streams FENCE  a device-pool block freed on its allocation stream while a kernel on a second stream still
 *                  reads it (no record_stream: PyTorch's pluggable allocator cannot pass it on), then allocated
 *                  again on the first stream and written.  FENCE=device (HOFF_FREE_FENCE) must never hand the
 *                  block out early; FENCE=stream shows what the race checker sees without that rule (the script
 *                  runs it non-strict and expects the race).
 *   side           FSDP's and NCCL's collective buffers: once the step's compute stream is named (hoff_step_stream,
 *                  as the Python package does at each step), a step's large allocation on another stream (FSDP2's
 *                  all-gather and reduce-scatter streams) is a device-pool block (cudaMalloc), never managed, never
 *                  evicted, counted in side_stream_allocs; the same size on the compute stream is managed.
 *   capture        allocations made while the stream captures a CUDA graph come from the device pool (never
 *                  managed memory, which the double refuses during a capture, as CUDA does), are reused within
 *                  the capture, retired after it; frees of other blocks during the capture wait for its end;
 *                  hoff makes no call a capture forbids (the double is strict).
 *   rank K         one rank of an 8-GPU job as torchrun starts it (LOCAL_RANK=K ...): the context is on device K
 *                  and touches no other device; its host tier is on its GPU's socket (with HWLOC_XMLFILE, the
 *                  8-GPU node of tests/data/topologies/eight-gpus.xml); its spill file is under
 *                  HOFF_SPILL_DIR/rank.K; its statistics
 *                  carry the rank; it then waits for the file HOLD (if set) to vanish, so that a script can
 *                  watch all ranks with hoff-stat.
 * Plain C, one line per check; exit 0, 1 on a failure, 2 on bad usage.
 * Threading: the main thread; kernel bodies run on the double's stream threads. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "core/context.h"
#include "hoff.h"
#include "hoffdbl.h"
#include "../plaincheck.h"
#include "tier/host.h"

#define MiB ((size_t)1 << 20)

static void die(const char *what) {
    printf("FAIL - %s: %s\n", what, hoff_last_error());
    exit(1);
}

static hoff_ctx *open_ctx(int fence) {
    struct hoff_config cfg;
    hoff_ctx *ctx = NULL;
    char err[256];

    hoff_config_init(&cfg);
    if (hoff_config_from_env(&cfg, err, sizeof err) != 0) {
        printf("FAIL - config: %s\n", err);
        exit(1);
    }
    cfg.backend = HOFF_BACKEND_CUDA;
    if (fence >= 0)
        cfg.free_fence = fence;
    if (hoff_init(&ctx, &cfg) != 0)
        die("hoff_init");
    return ctx;
}

static cudaStream_t new_stream(void) {
    cudaStream_t s;

    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        die("cudaStreamCreateWithFlags");
    return s;
}

/* The end of a two-stream mode: the context shut down (a failure is fatal), then its streams. */
static int close_two(hoff_ctx *ctx, cudaStream_t a, cudaStream_t b) {
    if (hoff_shutdown(ctx) != 0)
        die("hoff_shutdown");
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    return 0;
}

/* --- kernels ------------------------------------------------------------------ */

struct fill {
    unsigned char *p;
    size_t n;
    unsigned char v;
};

static void k_fill(void *arg) {
    struct fill *f = arg;

    memset(f->p, f->v, f->n);
}

struct slow_read {
    const unsigned char *p;
    size_t n;
    unsigned char want;
    int bad; /* bytes that were not `want` when read: another owner wrote them */
};

static void k_slow_read(void *arg) {
    struct slow_read *r = arg;
    struct timespec ts = {0, 100 * 1000 * 1000};

    nanosleep(&ts, NULL); /* the read takes a while: the second stream is still on it */
    for (size_t i = 0; i < r->n; i++)
        if (r->p[i] != r->want)
            r->bad++;
}

static cudaError_t launch1(cudaStream_t s, void *p, size_t n, int write, void (*fn)(void *), void *arg) {
    struct hoffdbl_use u = {p, n, write};

    return hoffdbl_launch(s, &u, 1, fn, arg);
}

/* --- streams -------------------------------------------------------------------- */

static int mode_streams(int fence) {
    cudaStream_t a = new_stream(), b = new_stream();
    struct fill w1, w2;
    struct slow_read r;
    struct hoff_stats st;
    struct hoffdbl_stats ds;
    cudaEvent_t ev;
    hoff_ctx *ctx = open_ctx(fence);
    unsigned char *p, *q;

    p = hoff_malloc_flags(ctx, 4 * MiB, a, HOFF_ALLOC_DEVICE);
    if (!p)
        die("hoff_malloc");
    w1 = (struct fill){p, 4 * MiB, 1};
    launch1(a, p, 4 * MiB, 1, k_fill, &w1);
    /* The side stream reads what stream a wrote (ordered by an event, as NCCL's streams are). */
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    cudaEventRecord(ev, a);
    cudaStreamWaitEvent(b, ev, 0);
    r = (struct slow_read){p, 4 * MiB, 1, 0};
    launch1(b, p, 4 * MiB, 0, k_slow_read, &r);
    /* Freed on a while b still reads it, with no record_stream. */
    hoff_free(ctx, p, a);
    q = hoff_malloc_flags(ctx, 4 * MiB, a, HOFF_ALLOC_DEVICE);
    if (!q)
        die("hoff_malloc (second)");
    w2 = (struct fill){q, 4 * MiB, 2};
    launch1(a, q, 4 * MiB, 1, k_fill, &w2);
    cudaDeviceSynchronize();
    hoffdbl_stats(&ds);
    hoff_stats_get(ctx, &st);
    printf("# fence=%s: first block %p, second %p; side-stream read saw %d foreign bytes; double: %llu device "
           "races; hoff: %llu deferred frees\n",
           fence ? "device" : "stream", (void *)p, (void *)q, r.bad, (unsigned long long)ds.device_races,
           (unsigned long long)st.deferred_frees);
    if (fence == HOFF_FENCE_DEVICE) {
        check(q != p, "HOFF_FREE_FENCE=device: the block the side stream still reads is not handed out again");
        check(r.bad == 0, "the side stream's read saw only its own bytes (%d foreign)", r.bad);
        check(ds.device_races == 0, "the double saw no race on device memory (%llu)",
              (unsigned long long)ds.device_races);
        check(st.deferred_frees == 1 && st.deferred_bytes == 4 * MiB, "the free is deferred (%llu frees, %llu bytes)",
              (unsigned long long)st.deferred_frees, (unsigned long long)st.deferred_bytes);
        hoff_free(ctx, q, a);
        hoff_empty_cache(ctx); /* a device-wide synchronisation: the deferred frees are safe now */
        hoff_stats_get(ctx, &st);
        check(st.free_fence_syncs >= 1 && st.deferred_bytes == 0,
              "a device synchronisation released them (%llu "
              "syncs, %llu bytes left)",
              (unsigned long long)st.free_fence_syncs, (unsigned long long)st.deferred_bytes);
        /* In a step, the step's end releases them. */
        hoff_step_begin(ctx);
        p = hoff_malloc_flags(ctx, 4 * MiB, a, HOFF_ALLOC_DEVICE);
        hoff_free(ctx, p, a);
        hoff_step_end(ctx);
        hoff_stats_get(ctx, &st);
        check(st.deferred_bytes == 0 && st.free_fence_syncs >= 2,
              "the step's end released the step's deferred "
              "frees (%llu syncs)",
              (unsigned long long)st.free_fence_syncs);
    } else {
        check(q == p, "HOFF_FREE_FENCE=stream: the block is reused on its free's stream at once (%p)", (void *)q);
        check(ds.device_races >= 1, "...and the double's race checker finds the early reuse (%llu races)",
              (unsigned long long)ds.device_races);
        hoff_free(ctx, q, a);
    }
    cudaEventDestroy(ev);
    return close_two(ctx, a, b);
}

/* --- allocations on a stream other than the step's ------------------------------------- */

static int mode_side(void) {
    cudaStream_t compute = new_stream(), comm = new_stream();
    struct hoff_stats st;
    struct fill w;
    hoff_ctx *ctx = open_ctx(-1);
    void *act, *coll, *flagged;
    int e;

    hoff_step_begin(ctx);
    if (hoff_step_stream(ctx, compute) != 0)
        die("hoff_step_stream");
    act = hoff_malloc(ctx, 8 * MiB, compute);
    coll = hoff_malloc(ctx, 8 * MiB, comm); /* an all-gather output on FSDP's all-gather stream */
    if (!act || !coll)
        die("hoff_malloc");
    check(hoffdbl_ptr_kind(act) == 2, "an 8 MiB block on the step's compute stream is managed (an offload candidate)");
    check(hoffdbl_ptr_kind(coll) == 1, "an 8 MiB block on another stream in the step is device memory (cudaMalloc)");
    w = (struct fill){coll, 8 * MiB, 7};
    launch1(comm, coll, 8 * MiB, 1, k_fill, &w); /* the collective writes it on its own stream */
    check(hoff_evict(ctx, coll, comm) != 0, "hoff_evict refuses the other stream's block (not an offload candidate)");
    hoff_sync(ctx);
    check(hoff_residency(ctx, coll) != HOFF_RES_HOST, "...which stays on the device");
    errno = 0;
    flagged = hoff_malloc_flags(ctx, 8 * MiB, comm, HOFF_ALLOC_CANDIDATE);
    e = errno;
    check(!flagged && e == EAGAIN, "HOFF_ALLOC_CANDIDATE on the other stream: not a candidate (EAGAIN)");
    check(hoff_evict(ctx, act, compute) == 0, "the compute stream's block is evictable");
    hoff_stats_get(ctx, &st);
    check(st.side_stream_allocs == 2, "side_stream_allocs counts the two allocations on the other stream (%llu)",
          (unsigned long long)st.side_stream_allocs);
    check(st.managed_in_use_bytes == 8 * MiB, "managed bytes in use: the compute stream's block only (%llu MiB)",
          (unsigned long long)(st.managed_in_use_bytes >> 20));
    hoff_free(ctx, coll, comm);
    hoff_free(ctx, act, compute);
    hoff_step_end(ctx);
    return close_two(ctx, compute, comm);
}

/* --- capture ------------------------------------------------------------------------ */

static int mode_capture(void) {
    cudaStream_t a = new_stream();
    struct hoffdbl_stats d0, d1;
    struct hoff_stats st;
    static const size_t sizes[] = {4 * MiB, 64 << 10, 16 * MiB, 2 * MiB};
    void *blk[4], *pre, *again, *after;
    struct fill w[4];
    cudaGraph_t g = NULL;
    hoff_ctx *ctx = open_ctx(-1);
    int all_device = 1, n;

    /* The double itself: managed memory during a capture is refused, as CUDA does. */
    hoffdbl_set_strict(0);
    hoffdbl_stats(&d0);
    if (cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal) != cudaSuccess)
        die("cudaStreamBeginCapture");
    {
        void *m = NULL;
        cudaError_t e = cudaMallocManaged(&m, 2 * MiB, cudaMemAttachGlobal);

        check(e == cudaErrorStreamCaptureUnsupported, "the double refuses cudaMallocManaged during a capture (%d)", e);
        (void)cudaGetLastError();
    }
    cudaStreamEndCapture(a, &g);
    cudaGraphDestroy(g);
    hoffdbl_stats(&d1);
    check(d1.capture_refusals == d0.capture_refusals + 1, "...and counts the refusal");
    hoffdbl_set_strict(1);
    hoffdbl_reset();

    hoff_step_begin(ctx);
    pre = hoff_malloc(ctx, 8 * MiB, a); /* in a step, 8 MiB: an offload candidate (managed) */
    check(pre && hoffdbl_ptr_kind(pre) == 2, "outside the capture an 8 MiB block in a step is managed");
    if (cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal) != cudaSuccess)
        die("cudaStreamBeginCapture");
    for (n = 0; n < 4; n++) {
        blk[n] = hoff_malloc(ctx, sizes[n], a);
        if (!blk[n])
            die("hoff_malloc during capture");
        all_device &= hoffdbl_ptr_kind(blk[n]) == 1;
        w[n] = (struct fill){blk[n], sizes[n], (unsigned char)n};
        launch1(a, blk[n], sizes[n], 1, k_fill, &w[n]);
    }
    check(all_device, "every allocation of the captured region is device-pool memory (cudaMalloc)");
    {
        void *m;
        int e;

        errno = 0;
        m = hoff_malloc_flags(ctx, 4 * MiB, a, HOFF_ALLOC_MANAGED);
        e = errno;
        check(!m && e == ENOTSUP, "asking for managed memory during the capture is refused (ENOTSUP: %s)",
              hoff_last_error());
        errno = 0;
        m = hoff_malloc_flags(ctx, 4 * MiB, a, HOFF_ALLOC_CANDIDATE);
        e = errno;
        check(!m && e == EAGAIN, "no offload candidate during the capture (EAGAIN)");
    }
    hoff_free(ctx, blk[0], a);
    again = hoff_malloc(ctx, sizes[0], a);
    check(again == blk[0], "a block freed in the capture is reused in it, on its stream (%p %p)", again, blk[0]);
    blk[0] = again;
    hoff_free(ctx, pre, a); /* a managed block freed during the capture: done once it is over */
    if (cudaStreamEndCapture(a, &g) != cudaSuccess)
        die("cudaStreamEndCapture");
    hoff_stats_get(ctx, &st);
    check(st.capture_allocs == 5, "capture_allocs counts the 5 allocations (%llu)",
          (unsigned long long)st.capture_allocs);
    for (n = 0; n < 4; n++)
        hoff_free(ctx, blk[n], a);
    after = hoff_malloc(ctx, 4 * MiB, a);
    check(after && hoffdbl_ptr_kind(after) == 2, "after the capture a large block in a step is managed again");
    for (n = 0; n < 4; n++)
        check(after != blk[n], "the graph's block %d is not handed out after the capture", n);
    again = hoff_malloc_flags(ctx, sizes[0], a, HOFF_ALLOC_DEVICE);
    for (n = 0; n < 4; n++)
        check(again != blk[n], "...nor to a device allocation (block %d)", n);
    hoff_stats_get(ctx, &st);
    check(st.graph_private_bytes >= 4 * MiB + (64 << 10) + 16 * MiB + 2 * MiB,
          "graph_private_bytes holds the graph's blocks (%llu)", (unsigned long long)st.graph_private_bytes);
    hoff_free(ctx, after, a);
    hoff_free(ctx, again, a);
    hoff_step_end(ctx);
    /* The graph's blocks are hoff's device memory, not another process's: the
     * step's end sample must count them as hoff's (the guard's books too). */
    hoff_stats_get(ctx, &st);
    check(st.device_foreign_bytes <= st.managed_pool_bytes - st.managed_in_use_bytes,
          "the graph-private blocks are hoff's own device memory: device_foreign_bytes %llu, at most the cached "
          "managed mappings' %llu (graph_private_bytes %llu)",
          (unsigned long long)st.device_foreign_bytes,
          (unsigned long long)(st.managed_pool_bytes - st.managed_in_use_bytes),
          (unsigned long long)st.graph_private_bytes);
    hoffdbl_stats(&d1);
    check(d1.capture_refusals == 0 && d1.hard_errors == 0, "hoff made no call the capture forbids (%llu refusals)",
          (unsigned long long)d1.capture_refusals);
    cudaGraphDestroy(g);
    if (hoff_shutdown(ctx) != 0)
        die("hoff_shutdown");
    cudaStreamDestroy(a);
    return 0;
}

/* --- one rank of an 8-GPU job ------------------------------------------------------------ */

/* Is a descriptor of this process open on a file under dir (the spill file, unlinked)? */
static int fd_under(const char *dir) {
    char path[320], target[PATH_MAX];
    struct dirent *de;
    DIR *d = opendir("/proc/self/fd");
    int found = 0;
    size_t n = strlen(dir);

    while (d && (de = readdir(d))) {
        ssize_t len;

        snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
        len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (strncmp(target, dir, n) == 0 && target[n] == '/')
            found = 1;
    }
    if (d)
        closedir(d);
    return found;
}

static int mode_rank(int k) {
    const char *spill = getenv("HOFF_SPILL_DIR"), *hold = getenv("HOLD");
    char mine[PATH_MAX];
    struct hoff_stats st;
    cudaStream_t s;
    hoff_ctx *ctx;
    void *p[6];

    /* As a torchrun script does: torch.cuda.set_device(LOCAL_RANK) before any work. */
    if (cudaSetDevice(k) != cudaSuccess)
        die("cudaSetDevice");
    s = new_stream();
    ctx = open_ctx(-1); /* HOFF_DEVICE unset: LOCAL_RANK */
    hoff_stats_get(ctx, &st);
    check(st.device == (uint64_t)k && st.rank == (uint64_t)k && st.world_size == 8 && st.local_rank == (uint64_t)k,
          "rank %d: device %llu, rank %llu of %llu, local rank %llu", k, (unsigned long long)st.device,
          (unsigned long long)st.rank, (unsigned long long)st.world_size, (unsigned long long)st.local_rank);
    for (int step = 0; step < 3; step++) {
        hoff_step_begin(ctx);
        for (int i = 0; i < 6; i++) {
            p[i] = hoff_malloc(ctx, i % 2 ? 64 << 10 : 4 * MiB, s);
            if (!p[i])
                die("hoff_malloc");
            launch1(s, p[i], i % 2 ? 64 << 10 : 4 * MiB, 1, NULL, NULL);
        }
        for (int i = 5; i >= 0; i--) {
            launch1(s, p[i], i % 2 ? 64 << 10 : 4 * MiB, 0, NULL, NULL);
            hoff_free(ctx, p[i], s);
        }
        hoff_step_end(ctx);
    }
    if (getenv("HWLOC_XMLFILE")) { /* the 8-GPU, 2-socket node of tests/data/topologies/eight-gpus.xml */
        int node = hoff__host_tier_nearest(ctx->mem.host_tier);

        check(node == k / 4, "rank %d: the host tier is on NUMA node %d, its GPU's socket's (want %d)", k, node, k / 4);
    }
    if (spill && *spill) {
        snprintf(mine, sizeof mine, "%s/rank.%d", spill, k);
        check(fd_under(mine), "rank %d: its spill file is open under %s", k, mine);
    }
    if (hold && *hold) { /* the script watches the job meanwhile */
        for (int i = 0; i < 600 && access(hold, F_OK) == 0; i++) {
            struct timespec ts = {0, 50 * 1000 * 1000};

            nanosleep(&ts, NULL);
        }
    }
    if (hoff_shutdown(ctx) != 0)
        die("hoff_shutdown");
    cudaStreamDestroy(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "streams") == 0 &&
        (strcmp(argv[2], "device") == 0 || strcmp(argv[2], "stream") == 0))
        mode_streams(strcmp(argv[2], "device") == 0 ? HOFF_FENCE_DEVICE : HOFF_FENCE_STREAM);
    else if (argc >= 2 && strcmp(argv[1], "capture") == 0)
        mode_capture();
    else if (argc >= 2 && strcmp(argv[1], "side") == 0)
        mode_side();
    else if (argc >= 3 && strcmp(argv[1], "rank") == 0 && atoi(argv[2]) >= 0 && atoi(argv[2]) < 8)
        mode_rank(atoi(argv[2]));
    else {
        fprintf(stderr, "usage: test_multi_double streams device|stream | capture | side | rank K (0..7)\n");
        return 2;
    }
    printf("# %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
