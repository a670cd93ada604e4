/* test_torch_order.c — PyTorch's allocator entry points (lib/torch/torch.c) driven in autograd's order on the
 * strict CUDA runtime double: a chain of layers whose forward saves its input (pack before the op's kernel),
 * whose kernels really compute on the bytes, and whose backward unpacks, allocates, reads and frees, for
 * several steps (warmup, plan, replay) under a budget and planner given on the command line.  Kernels are the
 * double's declared launches, so it sees any move or discard that races them; the results are compared bit for
 * bit with the same chain computed in plain host memory.  With --streams 2, every other layer's input is also
 * read by a kernel on a side stream (record_stream), joined only at the step's end, as a side computation or a
 * communication stream would.  With --device 1, hoff serves device 1 and no context may appear on device 0.
 * Usage: test_torch_order [--planner P] [--budget-pct N] [--streams 1|2] [--device D] [--layers L] [--steps S]
 * Env: HOFFDBL_* (the double: 2 devices of 256 MiB by default here).  Exit 0, 1 on a failed check, 77 skip.
 * Threading: the main thread drives; the kernels' bodies run on the double's stream threads. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "hoff.h"
#include "hoffdbl.h"

#define MiB ((size_t)1 << 20)
#define MAX_LAYERS 64

static int failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    va_list ap;

    printf("FAIL: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    failures++;
}

/* --- the layers' arithmetic (exact: integers) --------------------------------- */

static uint32_t fwd_word(uint32_t x, uint32_t layer) {
    return x * 2654435761u + layer * 40503u + 1u;
}

static uint32_t bwd_word(uint32_t g, uint32_t x, uint32_t layer) {
    return (g ^ (x >> 7)) * 2246822519u + layer;
}

static uint32_t side_word(uint32_t acc, uint32_t x) {
    return (acc ^ x) * 16777619u;
}

struct kargs { /* one kernel: what it reads and writes, as plain pointers */
    const uint32_t *x, *g;
    uint32_t *out, *acc;
    size_t n;
    uint32_t layer;
    int kind; /* 0 input, 1 forward, 2 seed gradient, 3 backward, 4 side read */
};

static void kernel_body(void *p) {
    struct kargs *k = p;
    size_t i;

    switch (k->kind) {
    case 0:
        for (i = 0; i < k->n; i++)
            k->out[i] = (uint32_t)(i * 2246822519u) ^ 0x9e3779b9u;
        break;
    case 1:
        for (i = 0; i < k->n; i++)
            k->out[i] = fwd_word(k->x[i], k->layer);
        break;
    case 2:
        for (i = 0; i < k->n; i++)
            k->out[i] = k->x[i] ^ 0x5bd1e995u;
        break;
    case 3:
        for (i = 0; i < k->n; i++)
            k->out[i] = bwd_word(k->g[i], k->x[i], k->layer);
        break;
    case 4: { /* a side reduction into acc[layer] */
        uint32_t a = 0;
        for (i = 0; i < k->n; i++)
            a = side_word(a, k->x[i]);
        k->acc[k->layer] = a;
        usleep(200); /* a slower stream: its work is still queued when the main stream moves on */
        break;
    }
    }
}

/* --- the run ---------------------------------------------------------------------- */

struct opts {
    const char *planner;
    int budget_pct; /* of the step's activation bytes; 0 = no budget */
    int streams;
    int device;
    int layers, steps;
    size_t words;
};

struct run {
    struct opts o;
    hoff_ctx *ctx;
    cudaStream_t s, side;
    uint64_t launch_errors;
    uint32_t *acc;       /* side reductions: plain host memory (cudaMallocHost) */
    struct kargs *kargs; /* kept alive until the step's end: kernels read them later */
    size_t nkargs, maxkargs;
};

static struct kargs *kput(struct run *r, struct kargs k) {
    if (r->nkargs == r->maxkargs) {
        fail("harness: too many kernels in a step");
        exit(1);
    }
    r->kargs[r->nkargs] = k;
    return &r->kargs[r->nkargs++];
}

static void launch(struct run *r, cudaStream_t s, const struct hoffdbl_use *u, int nu, struct kargs *k) {
    cudaError_t e = hoffdbl_launch(s, u, nu, kernel_body, k);

    if (e != cudaSuccess) { /* what C10_CUDA_KERNEL_LAUNCH_CHECK would raise */
        r->launch_errors++;
        printf("# launch check failed: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
        (void)cudaGetLastError();
    }
}

static void *talloc(struct run *r, size_t bytes) {
    void *p = hoff_torch_alloc((ssize_t)bytes, r->o.device, r->s);

    if (!p) {
        fail("hoff_torch_alloc(%zu) failed: %s", bytes, hoff_last_error());
        exit(1);
    }
    return p;
}

/* One training step in autograd's order; the loss word and a hash of every
 * gradient come back through *loss and *ghash (read after a sync). */
static void step(struct run *r, uint32_t *loss, uint64_t *ghash) {
    size_t n = r->o.words, bytes = n * sizeof(uint32_t);
    uint32_t *x[MAX_LAYERS + 1], *g, *gin;
    int L = r->o.layers, i;
    uint32_t *host = malloc(bytes);
    uint64_t h = 1469598103934665603ull;
    cudaEvent_t ev, join;

    if (!host || cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&join, cudaEventDisableTiming) != cudaSuccess) {
        fail("harness: out of memory or events");
        exit(1);
    }
    r->nkargs = 0;
    if (hoff_step_begin(r->ctx) != 0)
        fail("hoff_step_begin: %s", hoff_last_error());
    /* the input */
    x[0] = talloc(r, bytes);
    {
        struct hoffdbl_use u[] = {{x[0], bytes, 1}};
        launch(r, r->s, u, 1, kput(r, (struct kargs){.out = x[0], .n = n, .kind = 0}));
        hoff_mark_op(r->ctx, "input");
    }
    /* forward: each layer saves its input (pack: an access mark before the
     * kernel), allocates its output, runs, and ends its op */
    for (i = 0; i < L; i++) {
        struct hoffdbl_use u[] = {{x[i], bytes, 0}, {NULL, bytes, 1}};

        hoff_access(r->ctx, x[i], 0, r->s);
        x[i + 1] = talloc(r, bytes);
        u[1].p = x[i + 1];
        launch(r, r->s, u, 2,
               kput(r, (struct kargs){.x = x[i], .out = x[i + 1], .n = n, .layer = (uint32_t)i, .kind = 1}));
        if (r->o.streams > 1 && i % 2 == 1) {
            /* A side stream reads the saved input too, after it is ready on
             * the main stream, and is joined only at the step's end. */
            struct hoffdbl_use su[] = {{x[i], bytes, 0}};

            cudaEventRecord(ev, r->s);
            cudaStreamWaitEvent(r->side, ev, 0);
            hoff_access(r->ctx, x[i], 0, r->side);
            launch(r, r->side, su, 1,
                   kput(r, (struct kargs){.x = x[i], .acc = r->acc, .n = n, .layer = (uint32_t)i, .kind = 4}));
            hoff_torch_record_stream(x[i], r->side);
            hoff_access(r->ctx, x[i], 0, r->s); /* the main stream's use is the last mark */
        }
        hoff_mark_op(r->ctx, "forward");
    }
    /* the loss's gradient */
    g = talloc(r, bytes);
    {
        struct hoffdbl_use u[] = {{x[L], bytes, 0}, {g, bytes, 1}};
        hoff_access(r->ctx, x[L], 0, r->s);
        launch(r, r->s, u, 2, kput(r, (struct kargs){.x = x[L], .out = g, .n = n, .kind = 2}));
        if (cudaMemcpyAsync(host, x[L], sizeof(uint32_t), cudaMemcpyDefault, r->s) != cudaSuccess ||
            cudaStreamSynchronize(r->s) != cudaSuccess) /* .item(): inside the op */
            fail("cudaMemcpyAsync(loss)");
        *loss = host[0];
        hoff_mark_op(r->ctx, "loss");
    }
    hoff_torch_free(x[L], (ssize_t)bytes, r->o.device, r->s);
    /* backward: unpack the saved input, allocate the input's gradient, run,
     * end the op, free what this node held */
    for (i = L - 1; i >= 0; i--) {
        struct hoffdbl_use u[] = {{x[i], bytes, 0}, {g, bytes, 0}, {NULL, bytes, 1}};

        hoff_access(r->ctx, x[i], 0, r->s);
        hoff_access(r->ctx, g, 0, r->s);
        gin = talloc(r, bytes);
        u[2].p = gin;
        launch(r, r->s, u, 3,
               kput(r, (struct kargs){.x = x[i], .g = g, .out = gin, .n = n, .layer = (uint32_t)i, .kind = 3}));
        /* the gradient's hash: copied out stream-ordered inside the op (its
         * window is open), hashed after a sync */
        if (cudaMemcpyAsync(host, gin, bytes, cudaMemcpyDefault, r->s) != cudaSuccess ||
            cudaStreamSynchronize(r->s) != cudaSuccess)
            fail("cudaMemcpyAsync(gradient %d)", i);
        for (size_t k = 0; k < n; k++)
            h = (h ^ host[k]) * 1099511628211ull;
        hoff_mark_op(r->ctx, "backward");
        /* The saved input last: the next node's output reuses it at once
         * (the pool's most recent free), while a side stream may still read
         * it unless the pool orders its new owner after that stream. */
        hoff_torch_free(g, (ssize_t)bytes, r->o.device, r->s);
        hoff_torch_free(x[i], (ssize_t)bytes, r->o.device, r->s);
        g = gin;
    }
    hoff_torch_free(g, (ssize_t)bytes, r->o.device, r->s);
    if (r->o.streams > 1) { /* join the side stream */
        cudaEventRecord(join, r->side);
        cudaStreamWaitEvent(r->s, join, 0);
    }
    if (hoff_step_end(r->ctx) != 0)
        fail("hoff_step_end: %s", hoff_last_error());
    if (cudaStreamSynchronize(r->s) != cudaSuccess)
        fail("cudaStreamSynchronize");
    *ghash = h;
    cudaEventDestroy(ev);
    cudaEventDestroy(join);
    free(host);
}

/* The same chain in plain host memory. */
static void reference(const struct opts *o, uint32_t *loss, uint64_t *ghash, uint32_t *acc) {
    size_t n = o->words, k;
    uint32_t **x = calloc((size_t)o->layers + 1, sizeof *x), *g = malloc(n * 4), *gin = malloc(n * 4);
    uint64_t h = 1469598103934665603ull;
    int i;

    for (i = 0; i <= o->layers; i++)
        x[i] = malloc(n * 4);
    for (k = 0; k < n; k++)
        x[0][k] = (uint32_t)(k * 2246822519u) ^ 0x9e3779b9u;
    for (i = 0; i < o->layers; i++) {
        uint32_t a = 0;
        for (k = 0; k < n; k++) {
            x[i + 1][k] = fwd_word(x[i][k], (uint32_t)i);
            a = side_word(a, x[i][k]);
        }
        acc[i] = a;
    }
    *loss = x[o->layers][0];
    for (k = 0; k < n; k++)
        g[k] = x[o->layers][k] ^ 0x5bd1e995u;
    for (i = o->layers - 1; i >= 0; i--) {
        for (k = 0; k < n; k++)
            gin[k] = bwd_word(g[k], x[i][k], (uint32_t)i);
        memcpy(g, gin, n * 4);
        for (k = 0; k < n; k++)
            h = (h ^ g[k]) * 1099511628211ull;
    }
    *ghash = h;
    for (i = 0; i <= o->layers; i++)
        free(x[i]);
    free(x);
    free(g);
    free(gin);
}

static int parse(int argc, char **argv, struct opts *o) {
    int i;

    *o = (struct opts){.planner = "timed",
                       .budget_pct = 50,
                       .streams = 1,
                       .device = 0,
                       .layers = 12,
                       .steps = 4,
                       .words = MiB}; /* 4 MiB activations */
    for (i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];

        if (!strcmp(k, "--planner"))
            o->planner = v;
        else if (!strcmp(k, "--budget-pct"))
            o->budget_pct = atoi(v);
        else if (!strcmp(k, "--streams"))
            o->streams = atoi(v);
        else if (!strcmp(k, "--device"))
            o->device = atoi(v);
        else if (!strcmp(k, "--layers"))
            o->layers = atoi(v);
        else if (!strcmp(k, "--steps"))
            o->steps = atoi(v);
        else
            return -1;
    }
    if (i != argc || o->budget_pct < 0 || o->budget_pct > 100 || o->streams < 1 || o->streams > 2 || o->device < 0 ||
        o->device > 7 || o->layers < 1 || o->layers > MAX_LAYERS || o->steps < 1)
        return -1;
    return 0;
}

int main(int argc, char **argv) {
    struct run r;
    struct hoffdbl_stats ds;
    struct hoff_stats st;
    uint32_t want_loss, loss, *want_acc;
    uint64_t want_h, h;
    char err[256], val[64];
    int n = 0, i;

    memset(&r, 0, sizeof r);
    if (parse(argc, argv, &r.o) != 0) {
        fprintf(stderr,
                "usage: %s [--planner greedy|timed] [--budget-pct 0..100] [--streams 1|2] [--device D] "
                "[--layers 1..%d] [--steps N]\n",
                argv[0], MAX_LAYERS);
        return 2;
    }
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= r.o.device) {
        printf("SKIP: the double has %d device(s); device %d asked for\n", n, r.o.device);
        return 77;
    }
    printf("# planner %s, budget %d%% of the activations, %d stream(s), device %d, %d layers of %zu KiB, %d steps\n",
           r.o.planner, r.o.budget_pct, r.o.streams, r.o.device, r.o.layers, r.o.words * 4 / 1024, r.o.steps);
    /* Like PyTorch: the thread's device is set before anything else. */
    if (cudaSetDevice(r.o.device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&r.s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&r.side, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMallocHost((void **)&r.acc, MAX_LAYERS * sizeof(uint32_t)) != cudaSuccess) {
        fail("cannot set up device %d of the double", r.o.device);
        return 1;
    }
    memset(r.acc, 0, MAX_LAYERS * sizeof(uint32_t));
    r.maxkargs = (size_t)r.o.layers * 3 + 8;
    r.kargs = calloc(r.maxkargs, sizeof *r.kargs);
    want_acc = calloc(MAX_LAYERS, sizeof *want_acc);
    if (!r.kargs || !want_acc)
        return 1;
    if (hoff_torch_configure(-1, "backend", "cuda", err, sizeof err) != 0 ||
        hoff_torch_configure(-1, "planner", r.o.planner, err, sizeof err) != 0 ||
        hoff_torch_configure(-1, "managed_min", "1M", err, sizeof err) != 0 ||
        hoff_torch_configure(-1, "oversub_margin", "16M", err, sizeof err) != 0) {
        fail("hoff_torch_configure: %s", err);
        return 1;
    }
    if (r.o.budget_pct) {
        snprintf(val, sizeof val, "%zu", (size_t)r.o.layers * r.o.words * 4 * (size_t)r.o.budget_pct / 100);
        if (hoff_torch_configure(-1, "budget", val, err, sizeof err) != 0) {
            fail("hoff_torch_configure(budget %s): %s", val, err);
            return 1;
        }
    }
    hoff_torch_init(n);
    r.ctx = hoff_torch_context(r.o.device);
    if (!r.ctx) {
        fail("hoff_torch_context(%d): %s", r.o.device, hoff_last_error());
        return 1;
    }
    reference(&r.o, &want_loss, &want_h, want_acc);
    for (i = 0; i < r.o.steps; i++) {
        step(&r, &loss, &h);
        if (cudaDeviceSynchronize() != cudaSuccess)
            fail("cudaDeviceSynchronize after step %d", i + 1);
        if (loss != want_loss || h != want_h)
            fail("step %d: loss %08" PRIx32 " gradients %016" PRIx64 "; plain host memory gives %08" PRIx32
                 " %016" PRIx64,
                 i + 1, loss, h, want_loss, want_h);
        if (r.o.streams > 1) {
            int k;
            for (k = 1; k < r.o.layers; k += 2)
                if (r.acc[k] != want_acc[k])
                    fail("step %d: the side stream's read of layer %d's input saw other bytes", i + 1, k);
        }
    }
    hoff_stats_get(r.ctx, &st);
    hoff_torch_empty_cache();
    hoffdbl_stats(&ds);
    printf("# hoff: %" PRIu64 " evictions, %" PRIu64 " prefetches, %" PRIu64 " discards, %" PRIu64 " faults, "
           "peak resident %" PRIu64 " MiB (budget %" PRIu64 " MiB), %" PRIu64 " replans, plan state %" PRIu64
           ", fence_syncs %" PRIu64 ", driver_drift_bytes %" PRIu64 "\n",
           st.evictions, st.prefetches, st.discards, st.faults, st.peak_resident_bytes >> 20, st.budget_bytes >> 20,
           st.replans, st.plan_state, st.fence_syncs, st.driver_drift_bytes);
    printf("# double: hard errors %" PRIu64 ", access races %" PRIu64 ", discard races %" PRIu64 ", move races %" PRIu64
           ", faults %" PRIu64 ", driver evictions %" PRIu64 ", stale launch errors %" PRIu64
           ", contexts on device 0: %" PRIu64 ", device 1: %" PRIu64 "\n",
           ds.hard_errors, ds.access_races, ds.discard_races, ds.move_races, ds.faults, ds.driver_evictions,
           ds.stale_launch_errors, ds.contexts_created[0], ds.contexts_created[1]);
    if (ds.hard_errors)
        fail("the double found %" PRIu64 " hard error(s) (see above)", ds.hard_errors);
    if (ds.access_races)
        fail("%" PRIu64 " kernel(s) raced another stream's use of the same block: reused early", ds.access_races);
    if (ds.discard_races)
        fail("%" PRIu64 " discard(s) raced a kernel that used the range", ds.discard_races);
    if (ds.move_races)
        fail("%" PRIu64 " eviction(s)/prefetch(es) raced a kernel that used the range: a move not fenced after "
             "every stream that used the block",
             ds.move_races);
    if (r.launch_errors || ds.stale_launch_errors)
        fail("%" PRIu64 " kernel launch check(s) failed on a stale error left by hoff (cudaErrorNotReady)",
             r.launch_errors);
    if (r.o.device != 0 && ds.contexts_created[0])
        fail("hoff serves device %d, yet %" PRIu64 " context(s) were created on device 0", r.o.device,
             ds.contexts_created[0]);
    if (r.o.budget_pct && r.o.budget_pct < 100 && st.evictions == 0)
        fail("a budget of %d%% moved nothing: the run tested nothing", r.o.budget_pct);
    if (st.driver_drift_bytes)
        fail("hoff's books and the double's device disagree by %" PRIu64 " bytes", st.driver_drift_bytes);
    free(r.kargs);
    free(want_acc);
    cudaFreeHost(r.acc);
    cudaStreamDestroy(r.side);
    cudaStreamDestroy(r.s);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
