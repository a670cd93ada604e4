/* test_graph_pool.c — PyTorch's graph-pool hooks (hoff_torch_graph_pool_use / _begin / _end / _release) on the
 * strict CUDA runtime double, as the C++ shim drives them around captures: a graph block freed after its capture
 * is retired (a later capture does not get it) until its pool is released; then, after the device-wide
 * synchronisation the next capture's begin makes, a later capture reuses its memory without a new mapping.
 * Blocks of no named pool stay retired; a live block of a released pool is reusable once freed; a pool shared by
 * two graphs is released only with the second release; an unknown id is harmless; empty_cache unmaps the released
 * pools' memory and keeps the rest; a block freed during one pool's capture serves only captures of that pool
 * (or after its release).  hoff must make no call a capture forbids (the double is strict).
 * Plain C, one line per check; exit 0, 1 on a failure.  Threading: the main thread. */
#include "config.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "hoff.h"
#include "hoffdbl.h"
#include "../plaincheck.h"

#define MiB ((size_t)1 << 20)
#define D (4 * MiB) /* the graphs' block size */

static cudaStream_t s;
static cudaGraph_t graphs[16];
static int ngraphs;

static void die(const char *what) {
    printf("FAIL - %s: %s\n", what, hoff_last_error());
    exit(1);
}

static struct hoff_stats stats(void) {
    struct hoff_stats st;

    memset(&st, 0, sizeof st);
    if (hoff_stats_get(hoff_torch_context(0), &st) != 0)
        die("hoff_stats_get");
    return st;
}

/* torch.cuda.graph's capture_begin: the pool hook, then the capture. */
static void begin(uint64_t pool) {
    hoff_torch_graph_pool_begin(0, 0, pool);
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess)
        die("cudaStreamBeginCapture");
}

/* ...and capture_end: the capture, then the pool hook.  The graph lives on (until its release). */
static void end(uint64_t pool) {
    if (cudaStreamEndCapture(s, &graphs[ngraphs]) != cudaSuccess || ngraphs + 1 >= 16)
        die("cudaStreamEndCapture");
    ngraphs++;
    hoff_torch_graph_pool_end(0, 0, pool);
}

/* An allocation the begun pool's filter selects, as the shim makes it (pool 0: the shim names none). */
static void *cap_alloc(uint64_t pool, size_t n) {
    void *p;

    hoff_torch_graph_pool_use(0, pool);
    p = hoff_torch_alloc((ssize_t)n, 0, s);
    hoff_torch_graph_pool_use(0, 0);
    if (!p)
        die("hoff_torch_alloc during a capture");
    return p;
}

static void release(uint64_t pool) {
    hoff_torch_graph_pool_release(0, 0, pool);
}

int main(void) {
    struct hoffdbl_stats ds;
    struct hoff_stats st0, st;
    void *u, *a, *b, *c, *c2, *x, *d, *e1, *e2, *p, *y, *z;
    char err[256];
    int n;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("SKIP: the double has no device\n");
        return 77;
    }
    if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        die("the double's device 0");
    if (hoff_torch_configure(-1, "backend", "cuda", err, sizeof err) != 0) {
        printf("FAIL - hoff_torch_configure: %s\n", err);
        return 1;
    }
    hoff_torch_init(n);
    /* Hooks on a device with no context yet, and out of range: nothing happens. */
    hoff_torch_graph_pool_end(0, 0, 77);
    hoff_torch_graph_pool_release(0, 0, 77);
    hoff_torch_graph_pool_release(64, 0, 77);
    if (!hoff_torch_context(0))
        die("hoff_torch_context(0)");

    /* 1. A capture for no named pool, and one for pool 1: both blocks retired once freed after the capture. */
    begin(0);
    u = cap_alloc(0, D);
    end(0);
    begin(1);
    a = cap_alloc(1, D);
    end(1);
    check(u != a, "two captures' blocks are two mappings");
    hoff_torch_free(u, (ssize_t)D, 0, s);
    hoff_torch_free(a, (ssize_t)D, 0, s);
    st = stats();
    check(st.graph_private_bytes == 2 * D, "graph_private_bytes holds both retired blocks (%" PRIu64 " MiB)",
          st.graph_private_bytes >> 20);
    check(st.graph_pool_begins == 2, "graph_pool_begins counts the begins (%" PRIu64 ")", st.graph_pool_begins);

    /* 2. Before the release, a later capture (pool 2) does not get the retired blocks. */
    begin(2);
    b = cap_alloc(2, D);
    end(2);
    check(b != a && b != u, "a capture before the release maps anew (%p; retired %p %p)", b, a, u);

    /* 3. Pool 1's graph is destroyed: its block is reused by the next capture, with no new mapping. */
    st0 = stats();
    release(1);
    st = stats();
    check(st.graph_pool_releases == st0.graph_pool_releases + 1, "graph_pool_releases counts the release");
    check(st.graph_released_bytes == D, "graph_released_bytes: pool 1's block (%" PRIu64 " MiB)",
          st.graph_released_bytes >> 20);
    begin(3); /* no capture open: the begin synchronises the device for the released block */
    c = cap_alloc(3, D);
    st = stats();
    check(c == a, "after the release a later capture reuses pool 1's block (%p, was %p)", c, a);
    check(st.graph_private_bytes == st0.graph_private_bytes,
          "...with no new mapping (%" PRIu64 " MiB, was %" PRIu64 " MiB)", st.graph_private_bytes >> 20,
          st0.graph_private_bytes >> 20);
    check(st.free_fence_syncs == st0.free_fence_syncs + 1, "...after one device-wide synchronisation (%" PRIu64 ")",
          st.free_fence_syncs - st0.free_fence_syncs);
    c2 = cap_alloc(3, D);
    check(c2 != u, "the unnamed capture's block stays retired (%p)", c2);
    x = cap_alloc(3, 2 * MiB); /* freed within its capture: pool 3's graph uses it */
    hoff_torch_free(x, (ssize_t)(2 * MiB), 0, s);
    end(3);

    /* 4. A live block of a released pool is reusable once freed. */
    st0 = stats();
    release(2); /* b is still live: nothing retired to reclaim */
    st = stats();
    check(st.graph_released_bytes == st0.graph_released_bytes, "a release with its block live reclaims nothing yet");
    hoff_torch_free(b, (ssize_t)D, 0, s);
    st = stats();
    check(st.graph_released_bytes == st0.graph_released_bytes + D,
          "the block of a released pool freed later counts in graph_released_bytes");
    begin(4);
    d = cap_alloc(4, D);
    check(d == b, "...and a later capture reuses it (%p, was %p)", d, b);
    end(4);

    /* 5. Releases of unknown pools, and of no pool: harmless. */
    st0 = stats();
    release(999);
    release(0);
    hoff_torch_graph_pool_release(0, 5, 5);
    st = stats();
    check(st.graph_pool_releases == st0.graph_pool_releases + 3 &&
              st.graph_released_bytes == st0.graph_released_bytes && st.graph_private_bytes == st0.graph_private_bytes,
          "releases of unknown ids and of (0, 0) change nothing but the count");

    /* 6. Two graphs captured into one pool (pool 5): released only with the second release. */
    begin(5);
    e1 = cap_alloc(5, D);
    end(5);
    begin(5);
    e2 = cap_alloc(5, D);
    end(5);
    hoff_torch_free(e1, (ssize_t)D, 0, s);
    hoff_torch_free(e2, (ssize_t)D, 0, s);
    st0 = stats();
    release(5);
    st = stats();
    check(st.graph_released_bytes == st0.graph_released_bytes, "the first of a shared pool's two releases "
                                                               "reclaims nothing (its other graph lives)");
    begin(6);
    p = cap_alloc(6, D);
    check(p != e1 && p != e2, "...and a capture does not get its blocks (%p)", p);
    end(6);
    release(5);
    st = stats();
    check(st.graph_released_bytes == st0.graph_released_bytes + 2 * D, "the second release reclaims both blocks");

    /* 7. empty_cache gives the released pools' memory back, and no block a live graph may use (x). */
    st0 = stats();
    hoff_torch_empty_cache();
    st = stats();
    check(st.graph_private_bytes == st0.graph_private_bytes - 2 * D,
          "empty_cache unmaps pool 5's two blocks and no other (%" PRIu64 " -> %" PRIu64 " MiB)",
          st0.graph_private_bytes >> 20, st.graph_private_bytes >> 20);
    /* 8. x, freed during pool 3's capture, is the scratch pool 3's graph replays write: a capture of another
     * live pool on the same stream must not get it; a capture into pool 3 again may. */
    begin(7);
    y = cap_alloc(7, 2 * MiB);
    check(y != x, "a capture of another live pool does not get a block freed during pool 3's capture (%p)", y);
    end(7);
    begin(3);
    z = cap_alloc(3, 2 * MiB);
    check(z == x, "a capture into pool 3 again reuses its own scratch (%p, was %p)", z, x);
    hoff_torch_free(z, (ssize_t)(2 * MiB), 0, s);
    end(3);

    hoffdbl_stats(&ds);
    check(ds.capture_refusals == 0 && ds.hard_errors == 0,
          "hoff made no call a capture forbids (%" PRIu64 " refusals, %" PRIu64 " hard errors)", ds.capture_refusals,
          ds.hard_errors);
    for (n = 0; n < ngraphs; n++)
        cudaGraphDestroy(graphs[n]);
    printf("# %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
