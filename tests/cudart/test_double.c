/* test_double.c — the CUDA runtime double's own suite: every modelled behaviour (devices, contexts,
 * last/sticky errors, injection, streams and the legacy stream, events and generations, managed
 * residency, eviction under pressure, lazy discard, poison, faults) and every check, each both
 * passing and firing (non-strict: counted), plus strict runs in children: one that must abort on a
 * freed pointer, one on a discard racing a prefetch (and its ordered twin, which must not).
 * Threading: the main thread, helper threads for the per-thread device, and the double's workers. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../testutil.h"
#include "hoffdbl.h"

#define MiB ((size_t)1 << 20)
#define DEVMEM (64 * MiB)

static struct hoffdbl_stats st0;

static void snap(void) {
    hoffdbl_stats(&st0);
}

static struct hoffdbl_stats now(void) {
    struct hoffdbl_stats s;

    hoffdbl_stats(&s);
    return s;
}

#define HARD_DELTA() (now().hard_errors - st0.hard_errors)

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* A host function that holds its stream until opened (5 s at most). */
struct gate {
    int open;
};

static void gate_fn(void *arg) {
    struct gate *g = arg;

    for (int i = 0; i < 5000 && !__atomic_load_n(&g->open, __ATOMIC_ACQUIRE); i++)
        nap_ms(1);
}

static void gate_open(struct gate *g) {
    __atomic_store_n(&g->open, 1, __ATOMIC_RELEASE);
}

static void set_flag(void *arg) {
    __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
}

static int flag(int *f) {
    return __atomic_load_n(f, __ATOMIC_ACQUIRE);
}

static cudaStream_t mk_stream(unsigned flags) {
    cudaStream_t s = NULL;

    CU_ASSERT_EQUAL_FATAL(cudaStreamCreateWithFlags(&s, flags), cudaSuccess);
    return s;
}

static void *managed(size_t n) {
    void *p = NULL;

    CU_ASSERT_EQUAL_FATAL(cudaMallocManaged(&p, n, cudaMemAttachGlobal), cudaSuccess);
    return p;
}

static cudaError_t prefetch(void *p, size_t n, int dev, cudaStream_t s) {
    struct cudaMemLocation loc = {.type = dev >= 0 ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost,
                                  .id = dev >= 0 ? dev : 0};

    return cudaMemPrefetchAsync(p, n, loc, 0, s);
}

static cudaError_t discard(void *p, size_t n, cudaStream_t s) {
    return cudaMemDiscardBatchAsync(&p, &n, 1, 0, s);
}

static size_t dev_free(void) {
    size_t f = 0, t = 0;

    CU_ASSERT_EQUAL(cudaMemGetInfo(&f, &t), cudaSuccess);
    CU_ASSERT_EQUAL(t, DEVMEM);
    return f;
}

/* ---- devices, contexts, errors ------------------------------------------------------------------ */

static void *set_dev1_twice(void *arg) {
    int d = -1;

    (void)arg;
    cudaGetDevice(&d);
    CU_ASSERT_EQUAL(d, 0); /* a fresh thread starts on device 0 */
    CU_ASSERT_EQUAL(cudaSetDevice(1), cudaSuccess);
    CU_ASSERT_EQUAL(cudaSetDevice(1), cudaSuccess);
    cudaGetDevice(&d);
    CU_ASSERT_EQUAL(d, 1);
    return NULL;
}

static void test_contexts(void) {
    pthread_t th;
    struct hoffdbl_stats a, b;

    hoffdbl_stats(&a);
    CU_ASSERT_EQUAL(a.contexts_created[1], 0);
    CU_ASSERT_EQUAL(a.device_switches[1], 0);
    pthread_create(&th, NULL, set_dev1_twice, NULL);
    pthread_join(th, NULL);
    hoffdbl_stats(&b);
    CU_ASSERT_EQUAL(b.contexts_created[1], 1);
    CU_ASSERT_EQUAL(b.device_switches[1], 1); /* the second cudaSetDevice(1) changed nothing */
    pthread_create(&th, NULL, set_dev1_twice, NULL);
    pthread_join(th, NULL);
    hoffdbl_stats(&b);
    CU_ASSERT_EQUAL(b.contexts_created[1], 1); /* one primary context per device */
    CU_ASSERT_EQUAL(b.device_switches[1], 2);
    /* A call that needs a context creates device 0's on a thread that never set a device. */
    CU_ASSERT_EQUAL(dev_free(), DEVMEM);
    hoffdbl_stats(&b);
    CU_ASSERT_EQUAL(b.contexts_created[0], 1);
}

static void test_devices(void) {
    struct cudaDeviceProp prop;
    char bus[32];
    int n = 0, v = -7, least = 1, greatest = 1;

    CU_ASSERT_EQUAL(cudaGetDeviceCount(&n), cudaSuccess);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
    CU_ASSERT_EQUAL(prop.totalGlobalMem, DEVMEM);
    CU_ASSERT_EQUAL(prop.concurrentManagedAccess, 1);
    CU_ASSERT_EQUAL(cudaDeviceGetAttribute(&v, cudaDevAttrManagedMemory, 0), cudaSuccess);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, 1), cudaSuccess);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(cudaDeviceGetAttribute(&v, cudaDevAttrHostNumaId, 0), cudaSuccess);
    CU_ASSERT_EQUAL(v, 0);
    CU_ASSERT_EQUAL(cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, 0), cudaSuccess);
    CU_ASSERT_EQUAL(v, 0);
    CU_ASSERT_EQUAL(cudaDeviceGetPCIBusId(bus, sizeof bus, 1), cudaSuccess);
    CU_ASSERT_STRING_EQUAL(bus, "0000:11:00.0");
    CU_ASSERT_EQUAL(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    CU_ASSERT_EQUAL(least, 0);
    CU_ASSERT_EQUAL(greatest, -5);
    CU_ASSERT_STRING_EQUAL(cudaGetErrorName(cudaErrorNotReady), "cudaErrorNotReady");
    CU_ASSERT_STRING_EQUAL(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    /* A failing call sets the last error; peek keeps it, get returns and clears it. */
    CU_ASSERT_EQUAL(cudaSetDevice(2), cudaErrorInvalidDevice);
    CU_ASSERT_EQUAL(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    CU_ASSERT_EQUAL(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorInvalidDevice);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaSuccess);
}

static void test_not_ready_is_last_error(void) {
    struct gate g = {0};
    cudaStream_t s = mk_stream(cudaStreamNonBlocking);
    cudaEvent_t ev;

    CU_ASSERT_EQUAL(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(s, gate_fn, &g), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventRecord(ev, s), cudaSuccess);
    CU_ASSERT_EQUAL(cudaStreamQuery(s), cudaErrorNotReady);
    CU_ASSERT_EQUAL(cudaPeekAtLastError(), cudaErrorNotReady);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorNotReady);
    CU_ASSERT_EQUAL(cudaEventQuery(ev), cudaErrorNotReady);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorNotReady);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaSuccess);
    gate_open(&g);
    CU_ASSERT_EQUAL(cudaEventSynchronize(ev), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventQuery(ev), cudaSuccess);
    CU_ASSERT_EQUAL(cudaStreamQuery(s), cudaSuccess);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaSuccess);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
}

static void test_injection_and_sticky(void) {
    void *p = NULL;
    size_t f, t;

    CU_ASSERT_EQUAL(hoffdbl_fail("cudaNoSuchCall", cudaErrorInvalidValue, 1), -EINVAL);
    CU_ASSERT_EQUAL(hoffdbl_fail("cudaMalloc", cudaSuccess, 1), -EINVAL);
    CU_ASSERT_EQUAL(hoffdbl_fail("cudaMalloc", cudaErrorMemoryAllocation, 2), 0);
    CU_ASSERT_EQUAL(cudaMalloc(&p, MiB), cudaErrorMemoryAllocation);
    CU_ASSERT_EQUAL(cudaMalloc(&p, MiB), cudaErrorMemoryAllocation);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorMemoryAllocation);
    CU_ASSERT_EQUAL(cudaMalloc(&p, MiB), cudaSuccess);
    CU_ASSERT_EQUAL(cudaFree(p), cudaSuccess);
    /* A sticky error: every later call fails, and cudaGetLastError does not clear it. */
    CU_ASSERT_EQUAL(hoffdbl_fail("cudaMemGetInfo", cudaErrorIllegalAddress, 1), 0);
    CU_ASSERT_EQUAL(cudaMemGetInfo(&f, &t), cudaErrorIllegalAddress);
    CU_ASSERT_EQUAL(cudaMalloc(&p, MiB), cudaErrorIllegalAddress);
    CU_ASSERT_EQUAL(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorIllegalAddress);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorIllegalAddress);
    hoffdbl_reset();
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaSuccess);
    CU_ASSERT_EQUAL(cudaMemGetInfo(&f, &t), cudaSuccess);
}

static void test_stale_launch_check(void) {
    struct gate g = {0};
    cudaStream_t s = mk_stream(cudaStreamNonBlocking);

    snap();
    CU_ASSERT_EQUAL(hoffdbl_launch(s, NULL, 0, NULL, NULL), cudaSuccess); /* passes */
    CU_ASSERT_EQUAL(now().stale_launch_errors, st0.stale_launch_errors);
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(s, gate_fn, &g), cudaSuccess);
    CU_ASSERT_EQUAL(cudaStreamQuery(s), cudaErrorNotReady);                     /* and nobody clears it */
    CU_ASSERT_EQUAL(hoffdbl_launch(s, NULL, 0, NULL, NULL), cudaErrorNotReady); /* fires */
    CU_ASSERT_EQUAL(now().stale_launch_errors, st0.stale_launch_errors + 1);
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaSuccess); /* the launch check consumed it */
    gate_open(&g);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
}

/* ---- streams and events ------------------------------------------------------------------------- */

static int order_log[8], order_n;

static void log_op(void *arg) {
    order_log[order_n++] = (int)(intptr_t)arg;
}

static void test_stream_fifo_async(void) {
    struct gate g = {0};
    cudaStream_t s = mk_stream(cudaStreamDefault);

    order_n = 0;
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(s, gate_fn, &g), cudaSuccess);
    for (intptr_t i = 0; i < 4; i++)
        cudaLaunchHostFunc(s, log_op, (void *)i);
    nap_ms(20);
    CU_ASSERT_EQUAL(__atomic_load_n(&order_n, __ATOMIC_ACQUIRE), 0); /* asynchronous: held */
    gate_open(&g);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(s), cudaSuccess);
    CU_ASSERT_EQUAL(order_n, 4);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(order_log[i], i);
    cudaStreamDestroy(s);
}

static void test_legacy_stream(void) {
    struct gate g = {0};
    cudaStream_t b = mk_stream(cudaStreamDefault), nb = mk_stream(cudaStreamNonBlocking);
    int on_legacy = 0, on_nb = 0, after = 0;

    CU_ASSERT_EQUAL(cudaLaunchHostFunc(b, gate_fn, &g), cudaSuccess);
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(NULL, set_flag, &on_legacy), cudaSuccess);
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(nb, set_flag, &on_nb), cudaSuccess);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(nb), cudaSuccess); /* non-blocking: not held */
    CU_ASSERT_EQUAL(flag(&on_nb), 1);
    /* A blocking stream's later work waits for the legacy stream, which waits for the gate. */
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(b, set_flag, &after), cudaSuccess);
    nap_ms(20);
    CU_ASSERT_EQUAL(flag(&on_legacy), 0);
    gate_open(&g);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(b), cudaSuccess);
    CU_ASSERT_EQUAL(flag(&on_legacy), 1);
    CU_ASSERT_EQUAL(flag(&after), 1);
    cudaStreamDestroy(b);
    cudaStreamDestroy(nb);
}

static void test_event_generations(void) {
    struct gate g = {0}, g2 = {0};
    cudaStream_t a = mk_stream(cudaStreamNonBlocking), c = mk_stream(cudaStreamNonBlocking),
                 d = mk_stream(cudaStreamNonBlocking);
    cudaEvent_t ev, t0, t1;
    int ran = 0;
    float ms = -1;

    CU_ASSERT_EQUAL(cudaEventCreate(&ev), cudaSuccess);
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(a, gate_fn, &g), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventRecord(ev, a), cudaSuccess);
    /* d waits for the record made before the wait, even if ev is re-recorded later. */
    CU_ASSERT_EQUAL(cudaStreamWaitEvent(d, ev, 0), cudaSuccess);
    CU_ASSERT_EQUAL(cudaLaunchHostFunc(d, set_flag, &ran), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventQuery(ev), cudaErrorNotReady);
    (void)cudaGetLastError();
    CU_ASSERT_EQUAL(cudaEventRecord(ev, c), cudaSuccess); /* a new generation, on an idle stream */
    CU_ASSERT_EQUAL(cudaStreamSynchronize(c), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventQuery(ev), cudaSuccess);
    nap_ms(20);
    CU_ASSERT_EQUAL(flag(&ran), 0);
    gate_open(&g);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(d), cudaSuccess);
    CU_ASSERT_EQUAL(flag(&ran), 1);
    /* Timing. */
    CU_ASSERT_EQUAL(cudaEventCreate(&t0), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventCreate(&t1), cudaSuccess);
    cudaEventRecord(t0, a);
    cudaLaunchHostFunc(a, gate_fn, &g2);
    cudaEventRecord(t1, a);
    CU_ASSERT_EQUAL(cudaEventElapsedTime(&ms, t0, t1), cudaErrorNotReady);
    (void)cudaGetLastError();
    /* t0 is stamped when the stream's worker reaches it, which on a loaded machine can be after
     * any nap of ours: wait for it, so that the 10 ms below surely lie between the two stamps. */
    CU_ASSERT_EQUAL(cudaEventSynchronize(t0), cudaSuccess);
    nap_ms(10);
    gate_open(&g2);
    CU_ASSERT_EQUAL(cudaEventSynchronize(t1), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventElapsedTime(&ms, t0, t1), cudaSuccess);
    CU_ASSERT(ms >= 9.0f && ms < 5000.0f);
    {
        cudaEvent_t nt;

        cudaEventCreateWithFlags(&nt, cudaEventDisableTiming);
        cudaEventRecord(nt, a);
        cudaEventSynchronize(nt);
        CU_ASSERT_EQUAL(cudaEventElapsedTime(&ms, t0, nt), cudaErrorInvalidResourceHandle);
        (void)cudaGetLastError();
        cudaEventDestroy(nt);
    }
    cudaEventDestroy(ev);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaStreamDestroy(a);
    cudaStreamDestroy(c);
    cudaStreamDestroy(d);
}

static void test_unrecorded_event(void) {
    cudaStream_t s = mk_stream(cudaStreamNonBlocking);
    cudaEvent_t ev;

    CU_ASSERT_EQUAL(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    snap();
    CU_ASSERT_EQUAL(cudaEventQuery(ev), cudaSuccess); /* CUDA's answer, but a hard error */
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    CU_ASSERT_EQUAL(cudaEventSynchronize(ev), cudaSuccess);
    CU_ASSERT_EQUAL(cudaStreamWaitEvent(s, ev, 0), cudaSuccess);
    CU_ASSERT_EQUAL(HARD_DELTA(), 3);
    snap();
    cudaEventRecord(ev, s); /* passes once recorded */
    CU_ASSERT_EQUAL(cudaEventSynchronize(ev), cudaSuccess);
    CU_ASSERT_EQUAL(cudaEventQuery(ev), cudaSuccess);
    CU_ASSERT_EQUAL(cudaStreamWaitEvent(s, ev, 0), cudaSuccess);
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    /* A destroyed event is no handle. */
    cudaEventDestroy(ev);
    CU_ASSERT_EQUAL(cudaEventQuery(ev), cudaErrorInvalidResourceHandle);
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    (void)cudaGetLastError();
    cudaStreamDestroy(s);
}

static void test_handles(void) {
    cudaStream_t s = mk_stream(cudaStreamNonBlocking);
    int x = 0;

    snap();
    CU_ASSERT_EQUAL(cudaStreamSynchronize(s), cudaSuccess); /* passes */
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    CU_ASSERT_EQUAL(cudaStreamDestroy(s), cudaSuccess);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle); /* destroyed */
    CU_ASSERT_EQUAL(cudaLaunchHostFunc((cudaStream_t)(void *)&x, set_flag, &x),
                    cudaErrorInvalidResourceHandle); /* never a stream */
    CU_ASSERT_EQUAL(cudaStreamSynchronize(cudaStreamPerThread), cudaErrorInvalidResourceHandle);
    CU_ASSERT_EQUAL(HARD_DELTA(), 3);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    CU_ASSERT_EQUAL(flag(&x), 0);
}

struct other_dev {
    cudaStream_t s1;
    cudaEvent_t e0;
    cudaError_t rec;
};

/* A thread that never called cudaSetDevice(1) uses device 1's stream. */
static void *use_dev1_stream(void *arg) {
    struct other_dev *o = arg;
    void *p = managed(2 * MiB);

    snap();
    CU_ASSERT_EQUAL(prefetch(p, 2 * MiB, 1, o->s1), cudaSuccess); /* counted (non-strict) */
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    cudaSetDevice(1);
    snap();
    CU_ASSERT_EQUAL(prefetch(p, 2 * MiB, 1, o->s1), cudaSuccess); /* passes */
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    o->rec = cudaEventRecord(o->e0, o->s1); /* event of device 0 on device 1's stream */
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    (void)cudaGetLastError();
    cudaStreamSynchronize(o->s1);
    cudaFree(p);
    return NULL;
}

static void *make_dev1_stream(void *arg) {
    struct other_dev *o = arg;

    cudaSetDevice(1);
    o->s1 = mk_stream(cudaStreamNonBlocking);
    return NULL;
}

static void test_device_mismatch(void) {
    struct other_dev o = {0};
    pthread_t th;

    pthread_create(&th, NULL, make_dev1_stream, &o);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL_FATAL(cudaEventCreate(&o.e0), cudaSuccess);
    pthread_create(&th, NULL, use_dev1_stream, &o);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(o.rec, cudaErrorInvalidResourceHandle);
    snap();
    CU_ASSERT_EQUAL(cudaEventQuery(o.e0), cudaSuccess); /* device 0's thread: never recorded only */
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    cudaEventDestroy(o.e0);
    cudaSetDevice(1);
    cudaStreamDestroy(o.s1);
    cudaSetDevice(0);
}

/* ---- pointers and ranges ------------------------------------------------------------------------ */

static void test_pointers(void) {
    int local = 0;
    void *d = NULL, *h = NULL, *m = managed(4 * MiB);
    char host[64];

    CU_ASSERT_EQUAL_FATAL(cudaMalloc(&d, MiB), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cudaMallocHost(&h, MiB), cudaSuccess);
    snap();
    CU_ASSERT_EQUAL(cudaMemcpy(d, host, sizeof host, cudaMemcpyDefault), cudaSuccess);
    CU_ASSERT_EQUAL(prefetch(m, 4 * MiB, 0, NULL), cudaSuccess);
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);                                  /* all passing */
    CU_ASSERT_EQUAL(cudaFree(&local), cudaErrorInvalidValue);          /* foreign */
    CU_ASSERT_EQUAL(cudaFree((char *)d + 512), cudaErrorInvalidValue); /* interior */
    CU_ASSERT_EQUAL(cudaFreeHost(d), cudaErrorInvalidValue);           /* wrong kind */
    CU_ASSERT_EQUAL(prefetch(d, MiB, 0, NULL), cudaErrorInvalidValue); /* not managed */
    CU_ASSERT_EQUAL(HARD_DELTA(), 4);
    CU_ASSERT_EQUAL(cudaFree(d), cudaSuccess);
    snap();
    CU_ASSERT_EQUAL(cudaFree(d), cudaErrorInvalidValue); /* freed */
    CU_ASSERT_EQUAL(cudaMemcpy(host, d, sizeof host, cudaMemcpyDefault), cudaErrorInvalidValue);
    CU_ASSERT_EQUAL(cudaMemset(&local, 0, sizeof local), cudaErrorInvalidValue); /* foreign */
    CU_ASSERT_EQUAL(HARD_DELTA(), 3);
    /* Ranges past the end of a managed allocation. */
    snap();
    CU_ASSERT_EQUAL(prefetch((char *)m + 2 * MiB, 4 * MiB, 0, NULL), cudaErrorInvalidValue);
    CU_ASSERT_EQUAL(discard((char *)m + MiB, 4 * MiB, NULL), cudaErrorInvalidValue);
    {
        struct cudaMemLocation loc = {.type = cudaMemLocationTypeDevice, .id = 0};

        CU_ASSERT_EQUAL(cudaMemAdvise(m, 4 * MiB + 1, cudaMemAdviseSetPreferredLocation, loc), cudaErrorInvalidValue);
        CU_ASSERT_EQUAL(cudaMemAdvise(m, 4 * MiB, cudaMemAdviseSetPreferredLocation, loc), cudaSuccess);
    }
    CU_ASSERT_EQUAL(cudaMemcpy((char *)m + 4 * MiB - 8, host, sizeof host, cudaMemcpyDefault), cudaErrorInvalidValue);
    CU_ASSERT_EQUAL(HARD_DELTA(), 4);
    (void)cudaGetLastError();
    CU_ASSERT_EQUAL(cudaFreeHost(h), cudaSuccess);
    CU_ASSERT_EQUAL(cudaFree(m), cudaSuccess);
}

/* ---- managed residency ----------------------------------------------------------------------------- */

static int attr(void *p, size_t n, enum cudaMemRangeAttribute a) {
    int v = -99;

    CU_ASSERT_EQUAL(cudaMemRangeGetAttribute(&v, sizeof v, a, p, n), cudaSuccess);
    return v;
}

static void test_residency_and_meminfo(void) {
    char *m = managed(32 * MiB);
    struct cudaMemLocation dev0 = {.type = cudaMemLocationTypeDevice, .id = 0};

    CU_ASSERT_EQUAL(hoffdbl_page_location(m), -2); /* not populated */
    CU_ASSERT_EQUAL(hoffdbl_page_location(&dev0), -3);
    CU_ASSERT_EQUAL(dev_free(), DEVMEM);
    CU_ASSERT_EQUAL(attr(m, 32 * MiB, cudaMemRangeAttributeLastPrefetchLocationType), cudaMemLocationTypeInvalid);
    CU_ASSERT_EQUAL(prefetch(m, 32 * MiB, 0, NULL), cudaSuccess);
    CU_ASSERT_EQUAL(cudaDeviceSynchronize(), cudaSuccess);
    CU_ASSERT_EQUAL(hoffdbl_page_location(m + 31 * MiB), 0);
    CU_ASSERT_EQUAL(hoffdbl_device_resident(0), 32 * MiB);
    CU_ASSERT_EQUAL(dev_free(), DEVMEM - 32 * MiB);
    CU_ASSERT_EQUAL(attr(m, 32 * MiB, cudaMemRangeAttributeLastPrefetchLocation), 0);
    CU_ASSERT_EQUAL(attr(m, 32 * MiB, cudaMemRangeAttributeLastPrefetchLocationType), cudaMemLocationTypeDevice);
    CU_ASSERT_EQUAL(prefetch(m + 16 * MiB, 16 * MiB, -1, NULL), cudaSuccess);
    CU_ASSERT_EQUAL(cudaDeviceSynchronize(), cudaSuccess);
    CU_ASSERT_EQUAL(hoffdbl_page_location(m + 16 * MiB), -1);
    CU_ASSERT_EQUAL(dev_free(), DEVMEM - 16 * MiB);
    CU_ASSERT_EQUAL(attr(m + 16 * MiB, 16 * MiB, cudaMemRangeAttributeLastPrefetchLocation), cudaCpuDeviceId);
    CU_ASSERT_EQUAL(attr(m, 32 * MiB, cudaMemRangeAttributeLastPrefetchLocation), cudaInvalidDeviceId);
    CU_ASSERT_EQUAL(cudaMemAdvise(m, 32 * MiB, cudaMemAdviseSetPreferredLocation, dev0), cudaSuccess);
    CU_ASSERT_EQUAL(attr(m, 32 * MiB, cudaMemRangeAttributePreferredLocation), 0);
    CU_ASSERT_EQUAL(attr(m, 2 * MiB, cudaMemRangeAttributePreferredLocationType), cudaMemLocationTypeDevice);
    /* A batch: range 0 to the device, range 1 to the host. */
    {
        void *ptrs[2] = {m, m + 16 * MiB};
        size_t sizes[2] = {16 * MiB, 16 * MiB}, idx[2] = {0, 1}, bad[2] = {1, 0};
        struct cudaMemLocation locs[2] = {{.type = cudaMemLocationTypeHost},
                                          {.type = cudaMemLocationTypeDevice, .id = 0}};

        CU_ASSERT_EQUAL(cudaMemPrefetchBatchAsync(ptrs, sizes, 2, locs, bad, 2, 0, NULL), cudaErrorInvalidValue);
        (void)cudaGetLastError();
        CU_ASSERT_EQUAL(cudaMemPrefetchBatchAsync(ptrs, sizes, 2, locs, idx, 2, 0, NULL), cudaSuccess);
        cudaDeviceSynchronize();
        CU_ASSERT_EQUAL(hoffdbl_page_location(m), -1);
        CU_ASSERT_EQUAL(hoffdbl_page_location(m + 16 * MiB), 0);
    }
    CU_ASSERT_EQUAL(cudaFree(m), cudaSuccess);
    CU_ASSERT_EQUAL(dev_free(), DEVMEM);
}

static void test_cudamalloc_evicts(void) {
    char *m = managed(48 * MiB);
    void *d = NULL, *d2 = NULL;

    CU_ASSERT_EQUAL(prefetch(m, 48 * MiB, 0, NULL), cudaSuccess);
    cudaDeviceSynchronize();
    snap();
    CU_ASSERT_EQUAL(cudaMalloc(&d, 32 * MiB), cudaSuccess); /* room made by the "driver" */
    CU_ASSERT_EQUAL(now().driver_evictions - st0.driver_evictions, 8);
    CU_ASSERT_EQUAL(now().driver_evicted_bytes - st0.driver_evicted_bytes, 16 * MiB);
    CU_ASSERT_EQUAL(hoffdbl_device_resident(0), 32 * MiB);
    CU_ASSERT_EQUAL(hoffdbl_page_location(m), -1); /* least recently used first */
    CU_ASSERT_EQUAL(dev_free(), 0);
    /* Device memory is never evicted: this needs more than every managed page gives back. */
    CU_ASSERT_EQUAL(cudaMalloc(&d2, 40 * MiB), cudaErrorMemoryAllocation);
    CU_ASSERT_EQUAL(cudaGetLastError(), cudaErrorMemoryAllocation);
    CU_ASSERT_EQUAL(hoffdbl_device_resident(0), 32 * MiB);   /* nothing evicted in vain */
    CU_ASSERT_EQUAL(cudaMalloc(&d2, 32 * MiB), cudaSuccess); /* evicting all of them is enough */
    CU_ASSERT_EQUAL(hoffdbl_device_resident(0), 0);
    cudaFree(d);
    cudaFree(d2);
    cudaFree(m);
}

static void test_prefetch_evicts_lru(void) {
    char *a = managed(40 * MiB), *b = managed(40 * MiB);

    CU_ASSERT_EQUAL(prefetch(a, 40 * MiB, 0, NULL), cudaSuccess);
    snap();
    CU_ASSERT_EQUAL(prefetch(b, 40 * MiB, 0, NULL), cudaSuccess);
    cudaDeviceSynchronize();
    CU_ASSERT_EQUAL(now().driver_evicted_bytes - st0.driver_evicted_bytes, 16 * MiB);
    CU_ASSERT_EQUAL(hoffdbl_page_location(b + 38 * MiB), 0);
    CU_ASSERT_EQUAL(hoffdbl_page_location(a), -1);
    CU_ASSERT_EQUAL(hoffdbl_page_location(a + 39 * MiB), 0);
    CU_ASSERT_EQUAL(hoffdbl_device_resident(0), DEVMEM);
    cudaFree(a);
    cudaFree(b);
}

static void test_discard_lazy_and_poison(void) {
    char *m = managed(16 * MiB), *h = malloc(16 * MiB);
    void *d = NULL;
    struct cudaMemLocation dev0 = {.type = cudaMemLocationTypeDevice, .id = 0};
    size_t idx = 0, n = 8 * MiB;
    void *p = m + 8 * MiB;

    CU_ASSERT_EQUAL(cudaMemset(m, 0x11, 16 * MiB), cudaSuccess);
    CU_ASSERT_EQUAL(prefetch(m, 16 * MiB, 0, NULL), cudaSuccess);
    CU_ASSERT_EQUAL(discard(m, 8 * MiB, NULL), cudaSuccess);
    cudaDeviceSynchronize();
    CU_ASSERT_EQUAL(cudaMemcpy(h, m, 16 * MiB, cudaMemcpyDefault), cudaSuccess);
    CU_ASSERT_EQUAL((unsigned char)h[0], HOFFDBL_POISON);
    CU_ASSERT_EQUAL((unsigned char)h[8 * MiB - 1], HOFFDBL_POISON);
    CU_ASSERT_EQUAL(h[8 * MiB], 0x11);
    CU_ASSERT_EQUAL(hoffdbl_page_location(m), -2);
    /* The discard freed no device memory: the pages are reclaimed when pressure needs them. */
    CU_ASSERT_EQUAL(dev_free(), DEVMEM - 16 * MiB);
    CU_ASSERT_EQUAL(hoffdbl_device_discarded(0), 8 * MiB);
    snap();
    CU_ASSERT_EQUAL(cudaMalloc(&d, 52 * MiB), cudaSuccess);
    CU_ASSERT_EQUAL(now().lazy_reclaimed_bytes - st0.lazy_reclaimed_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(now().driver_evictions, st0.driver_evictions); /* dead pages went first */
    CU_ASSERT_EQUAL(hoffdbl_device_discarded(0), 4 * MiB);
    cudaFree(d);
    /* Discard-and-prefetch: populated on the device, no bytes moved, contents poisoned. */
    CU_ASSERT_EQUAL(prefetch(p, n, -1, NULL), cudaSuccess);
    CU_ASSERT_EQUAL(cudaMemDiscardAndPrefetchBatchAsync(&p, &n, 1, &dev0, &idx, 1, 0, NULL), cudaSuccess);
    cudaDeviceSynchronize();
    CU_ASSERT_EQUAL(hoffdbl_page_location(p), 0);
    CU_ASSERT_EQUAL(((unsigned char *)p)[12345], HOFFDBL_POISON);
    cudaFree(m);
    free(h);
}

static void fill_byte(void *arg) {
    memset(arg, 0x5A, 4 * MiB);
}

static void test_kernel_faults(void) {
    char *m = managed(8 * MiB);
    cudaStream_t s = mk_stream(cudaStreamNonBlocking);
    struct hoffdbl_use use = {m, 4 * MiB, 1};

    CU_ASSERT_EQUAL(prefetch(m, 8 * MiB, -1, s), cudaSuccess);
    snap();
    CU_ASSERT_EQUAL(hoffdbl_launch(s, &use, 1, fill_byte, m), cudaSuccess);
    cudaStreamSynchronize(s);
    CU_ASSERT_EQUAL(now().faults - st0.faults, 2);
    CU_ASSERT_EQUAL(now().fault_bytes - st0.fault_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(hoffdbl_page_location(m), 0);
    CU_ASSERT_EQUAL(hoffdbl_page_location(m + 4 * MiB), -1);
    CU_ASSERT_EQUAL(m[4 * MiB - 1], 0x5A);
    snap();
    CU_ASSERT_EQUAL(hoffdbl_launch(s, &use, 1, NULL, NULL), cudaSuccess); /* resident: no fault */
    cudaStreamSynchronize(s);
    CU_ASSERT_EQUAL(now().faults, st0.faults);
    cudaStreamDestroy(s);
    cudaFree(m);
}

/* ---- the race check ----------------------------------------------------------------------------- */

static void test_discard_races(void) {
    char *m = managed(4 * MiB);
    cudaStream_t s1 = mk_stream(cudaStreamNonBlocking), s2 = mk_stream(cudaStreamNonBlocking),
                 b = mk_stream(cudaStreamDefault);
    struct hoffdbl_use use = {m, 4 * MiB, 1};
    cudaEvent_t ev;
    struct gate g = {0};

    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    snap();
    /* Ordered: same stream; an event; a host sync; the legacy stream after a blocking one. */
    hoffdbl_launch(s1, &use, 1, NULL, NULL);
    discard(m, 4 * MiB, s1);
    hoffdbl_launch(s1, &use, 1, NULL, NULL);
    cudaEventRecord(ev, s1);
    cudaStreamWaitEvent(s2, ev, 0);
    discard(m, 4 * MiB, s2);
    cudaEventRecord(ev, s2);
    cudaStreamWaitEvent(s1, ev, 0);
    hoffdbl_launch(s1, &use, 1, NULL, NULL);
    cudaStreamSynchronize(s1);
    discard(m, 4 * MiB, s2);
    cudaStreamSynchronize(s2);
    hoffdbl_launch(b, &use, 1, NULL, NULL);
    discard(m, 4 * MiB, NULL);
    cudaDeviceSynchronize();
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    CU_ASSERT_EQUAL(now().discard_races, st0.discard_races);
    /* Unordered, whatever the timing (the gate holds s1's kernel until after the discard ran). */
    snap();
    cudaLaunchHostFunc(s1, gate_fn, &g);
    hoffdbl_launch(s1, &use, 1, NULL, NULL);
    discard(m, 4 * MiB, s2); /* 2 pages, each racing the kernel */
    CU_ASSERT_EQUAL(now().discard_races - st0.discard_races, 2);
    CU_ASSERT_EQUAL(HARD_DELTA(), 2);
    gate_open(&g);
    cudaDeviceSynchronize();
    snap();
    discard(m, 2 * MiB, s2);
    hoffdbl_launch(s1, &use, 1, NULL, NULL); /* a later access not ordered after the discard */
    CU_ASSERT_EQUAL(now().discard_races - st0.discard_races, 1);
    cudaDeviceSynchronize();
    snap();
    hoffdbl_launch(s1, &use, 1, NULL, NULL);
    discard(m, 4 * MiB, NULL); /* legacy stream: s1 is non-blocking, so not ordered */
    CU_ASSERT_EQUAL(now().discard_races - st0.discard_races, 2);
    cudaDeviceSynchronize();
    /* A prefetch racing a declared access is legal: counted, no hard error; either way round. */
    snap();
    hoffdbl_launch(s1, &use, 1, NULL, NULL);
    prefetch(m, 4 * MiB, -1, s2);
    CU_ASSERT_EQUAL(now().move_races - st0.move_races, 2);
    hoffdbl_launch(s1, &use, 1, NULL, NULL); /* not ordered after the prefetch either */
    CU_ASSERT_EQUAL(now().move_races - st0.move_races, 4);
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    cudaDeviceSynchronize();
    snap();
    prefetch(m, 4 * MiB, 0, s2);
    cudaEventRecord(ev, s2);
    cudaStreamWaitEvent(s1, ev, 0);
    hoffdbl_launch(s1, &use, 1, NULL, NULL); /* ordered: not counted */
    cudaEventRecord(ev, s1);
    cudaStreamWaitEvent(s2, ev, 0);
    prefetch(m, 4 * MiB, -1, s2);
    CU_ASSERT_EQUAL(now().move_races, st0.move_races);
    cudaDeviceSynchronize();
    cudaEventDestroy(ev);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
    cudaStreamDestroy(b);
    cudaFree(m);
}

/* A discard and a prefetch (or eviction) of overlapping bytes on two streams, neither ordered before the
 * other: undefined (cudaMemDiscardBatchAsync), a hard error; ordered (one stream, an event recorded after
 * the earlier op and waited on, a host synchronisation), two prefetches, or disjoint bytes: none. */
#define XRACES() (now().discard_prefetch_races - st0.discard_prefetch_races)

static void test_discard_prefetch_races(void) {
    char *m = managed(8 * MiB), *src = calloc(1, MiB);
    cudaStream_t s1 = mk_stream(cudaStreamNonBlocking), s2 = mk_stream(cudaStreamNonBlocking),
                 b = mk_stream(cudaStreamDefault);
    struct cudaMemLocation dev0 = {.type = cudaMemLocationTypeDevice, .id = 0};
    void *ptrs[2] = {m, m + 4 * MiB}, *p0 = m;
    size_t sizes[2] = {2 * MiB, 2 * MiB}, n0 = 2 * MiB, idx[1] = {0};
    struct gate g = {0}, g2 = {0}, g3 = {0}, g4 = {0}, g5 = {0}, g6 = {0};
    cudaEvent_t ev;
    cudaError_t q;

    CU_ASSERT_FATAL(src != NULL);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    /* Unordered, whatever the timing (the gate holds s1's prefetch until after the discard ran). */
    snap();
    cudaLaunchHostFunc(s1, gate_fn, &g);
    CU_ASSERT_EQUAL(prefetch(m, 4 * MiB, 0, s1), cudaSuccess);
    CU_ASSERT_EQUAL(discard(m, 4 * MiB, s2), cudaSuccess); /* 2 pages, each racing the prefetch */
    CU_ASSERT_EQUAL(XRACES(), 2);
    CU_ASSERT_EQUAL(HARD_DELTA(), 2);
    CU_ASSERT_EQUAL(now().discard_races, st0.discard_races); /* no declared access in it */
    gate_open(&g);
    cudaDeviceSynchronize();
    /* The other way round: a prefetch (an eviction to the host) not ordered after a discard. */
    snap();
    cudaLaunchHostFunc(s2, gate_fn, &g2);
    discard(m, 2 * MiB, s2);
    prefetch(m, 2 * MiB, -1, s1);
    CU_ASSERT_EQUAL(XRACES(), 1);
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    gate_open(&g2);
    cudaDeviceSynchronize();
    /* Done by now, but nothing synchronised with it: still not ordered (the double decides at
     * enqueue, never by timing; on a GPU this is the flaky case). */
    snap();
    prefetch(m, 2 * MiB, 0, s1);
    nap_ms(50);
    discard(m, 2 * MiB, s2);
    CU_ASSERT_EQUAL(XRACES(), 1);
    cudaDeviceSynchronize();
    /* Ordered: the same stream; a stream synchronize; a query that found it complete; an event
     * recorded after the prefetch and waited on by the discard's stream (the prefetch still held). */
    snap();
    prefetch(m, 4 * MiB, 0, s1);
    discard(m, 4 * MiB, s1);
    prefetch(m, 4 * MiB, 0, s1);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(s1), cudaSuccess);
    discard(m, 4 * MiB, s2);
    prefetch(m, 4 * MiB, 0, s2);
    while ((q = cudaStreamQuery(s2)) == cudaErrorNotReady)
        nap_ms(1);
    CU_ASSERT_EQUAL(q, cudaSuccess);
    (void)cudaGetLastError();
    discard(m, 4 * MiB, s1);
    cudaLaunchHostFunc(s1, gate_fn, &g3);
    prefetch(m, 4 * MiB, 0, s1);
    cudaEventRecord(ev, s1);
    cudaStreamWaitEvent(s2, ev, 0);
    discard(m, 4 * MiB, s2);
    cudaEventRecord(ev, s2);
    cudaStreamWaitEvent(s1, ev, 0);
    prefetch(m, 4 * MiB, 0, s1); /* after the discard, through the event */
    CU_ASSERT_EQUAL(XRACES(), 0);
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    gate_open(&g3);
    cudaDeviceSynchronize();
    /* An event recorded before the prefetch orders nothing after it. */
    snap();
    cudaLaunchHostFunc(s1, gate_fn, &g4);
    cudaEventRecord(ev, s1);
    prefetch(m, 4 * MiB, 0, s1);
    cudaStreamWaitEvent(s2, ev, 0);
    discard(m, 4 * MiB, s2);
    CU_ASSERT_EQUAL(XRACES(), 2);
    gate_open(&g4);
    cudaDeviceSynchronize();
    /* Exact bytes: other pages, and other bytes of the same page, are no race; one byte in common is. */
    snap();
    cudaLaunchHostFunc(s1, gate_fn, &g5);
    prefetch(m, 2 * MiB, 0, s1);
    discard(m + 2 * MiB, 2 * MiB, s2);
    prefetch(m + 4 * MiB, MiB, 0, s1);
    discard(m + 5 * MiB, MiB, s2);
    CU_ASSERT_EQUAL(XRACES(), 0);
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    discard(m + 5 * MiB - 1, 2, s2);
    CU_ASSERT_EQUAL(XRACES(), 1);
    /* Two prefetches, or two discards, of the same bytes: no race of this kind. */
    snap();
    prefetch(m + 6 * MiB, 2 * MiB, -1, s2);
    prefetch(m + 6 * MiB, 2 * MiB, 0, s1);
    discard(m + 2 * MiB, 2 * MiB, s1);
    CU_ASSERT_EQUAL(XRACES(), 0);
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    gate_open(&g5);
    cudaDeviceSynchronize();
    /* The legacy stream waits for a blocking stream (ordered), not for a non-blocking one. */
    snap();
    prefetch(m, 2 * MiB, 0, b);
    discard(m, 2 * MiB, NULL);
    CU_ASSERT_EQUAL(XRACES(), 0);
    cudaDeviceSynchronize(); /* else the prefetch below races that discard too */
    prefetch(m, 2 * MiB, 0, s1);
    discard(m, 2 * MiB, NULL);
    CU_ASSERT_EQUAL(XRACES(), 1);
    cudaDeviceSynchronize();
    /* The batch calls: a batch prefetch against a discard; a discard-and-prefetch is both. */
    snap();
    cudaLaunchHostFunc(s1, gate_fn, &g6);
    CU_ASSERT_EQUAL(cudaMemPrefetchBatchAsync(ptrs, sizes, 2, &dev0, idx, 1, 0, s1), cudaSuccess);
    discard(m + 5 * MiB, MiB, s2); /* inside the batch's second range */
    CU_ASSERT_EQUAL(XRACES(), 1);
    CU_ASSERT_EQUAL(cudaMemDiscardAndPrefetchBatchAsync(&p0, &n0, 1, &dev0, idx, 1, 0, s2), cudaSuccess);
    CU_ASSERT_EQUAL(XRACES(), 2); /* its discard against the batch's first range */
    prefetch(m, 2 * MiB, -1, s1); /* s1 is not ordered after s2's discard-and-prefetch */
    CU_ASSERT_EQUAL(XRACES(), 3);
    CU_ASSERT_EQUAL(HARD_DELTA(), 3);
    gate_open(&g6);
    cudaDeviceSynchronize();
    /* A copy into managed memory is a declared access: a discard racing it is a race (per page),
     * and one ordered after it by an event is not. */
    snap();
    memset(&g, 0, sizeof g);
    cudaLaunchHostFunc(s1, gate_fn, &g);
    CU_ASSERT_EQUAL(cudaMemcpyAsync(m + MiB, src, MiB, cudaMemcpyDefault, s1), cudaSuccess);
    discard(m, 2 * MiB, s2);
    CU_ASSERT_EQUAL(now().discard_races - st0.discard_races, 1);
    CU_ASSERT_EQUAL(HARD_DELTA(), 1);
    snap();
    cudaEventRecord(ev, s1);
    cudaStreamWaitEvent(s2, ev, 0);
    discard(m, 2 * MiB, s2);
    CU_ASSERT_EQUAL(HARD_DELTA(), 0);
    gate_open(&g);
    cudaDeviceSynchronize();
    cudaEventDestroy(ev);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
    cudaStreamDestroy(b);
    cudaFree(m);
    free(src);
}

/* ---- strict mode --------------------------------------------------------------------------------- */

/* The child: a fresh process in the default (strict) mode; a freed-pointer free must abort it. */
static int strict_child(void) {
    int local = 0;

    alarm(10);
    (void)cudaFree(&local);
    return 0; /* not reached: strict mode aborts */
}

static void test_strict_aborts(void) {
    pid_t pid;
    int status = 0;

    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        /* exec, not just fork: the double's workers do not survive a fork */
        unsetenv("HOFFDBL_STRICT");
        execl("/proc/self/exe", "test_double", "strict-child", (char *)NULL);
        _exit(127);
    }
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

/* The child: strict mode; a prefetch on one stream, then a discard of the same bytes on another, ordered
 * by an event only when `ordered`.  The race must abort it; the ordered run must exit 0. */
static int discard_prefetch_child(int ordered) {
    cudaStream_t s1 = NULL, s2 = NULL;
    cudaEvent_t ev = NULL;
    void *m = NULL;

    alarm(10);
    if (cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
        cudaMallocManaged(&m, 4 * MiB, cudaMemAttachGlobal) != cudaSuccess ||
        prefetch(m, 4 * MiB, 0, s1) != cudaSuccess)
        return 3;
    if (ordered && (cudaEventRecord(ev, s1) != cudaSuccess || cudaStreamWaitEvent(s2, ev, 0) != cudaSuccess))
        return 4;
    if (discard((char *)m + MiB, MiB, s2) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        return 5;
    return 0;
}

/* Run this program as `discard-prefetch-child MODE` (exec: the double's workers do not survive a
 * fork), strict, its stderr in *err (malloc'd); returns its wait status. */
static int run_child(const char *mode, char **err) {
    char path[] = "/tmp/hoffdbl-child.XXXXXX";
    int fd = mkstemp(path), status = -1;
    pid_t pid;
    off_t len;

    *err = NULL;
    CU_ASSERT_FATAL(fd >= 0);
    unlink(path);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        unsetenv("HOFFDBL_STRICT");
        unsetenv("HOFFDBL_ALLOW");
        dup2(fd, 2);
        execl("/proc/self/exe", "test_double", "discard-prefetch-child", mode, (char *)NULL);
        _exit(127);
    }
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    len = lseek(fd, 0, SEEK_END);
    *err = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
    if (*err && len > 0 && pread(fd, *err, (size_t)len, 0) != len)
        (*err)[0] = 0;
    close(fd);
    return status;
}

static void test_strict_discard_prefetch(void) {
    char *err = NULL;
    int status = run_child("race", &err);

    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "HARD ERROR [race] in cudaMemDiscardBatchAsync"));
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "the discard on stream"));
    free(err);
    status = run_child("ordered", &err);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT_PTR_NULL(err ? strstr(err, "HARD ERROR") : "no stderr");
    free(err);
}

int main(int argc, char **argv) {
    static const struct hoff_test tests[] = {
        {"contexts", test_contexts},
        {"devices", test_devices},
        {"not_ready_is_last_error", test_not_ready_is_last_error},
        {"injection_and_sticky", test_injection_and_sticky},
        {"stale_launch_check", test_stale_launch_check},
        {"stream_fifo_async", test_stream_fifo_async},
        {"legacy_stream", test_legacy_stream},
        {"event_generations", test_event_generations},
        {"unrecorded_event", test_unrecorded_event},
        {"handles", test_handles},
        {"device_mismatch", test_device_mismatch},
        {"pointers", test_pointers},
        {"residency_and_meminfo", test_residency_and_meminfo},
        {"cudamalloc_evicts", test_cudamalloc_evicts},
        {"prefetch_evicts_lru", test_prefetch_evicts_lru},
        {"discard_lazy_and_poison", test_discard_lazy_and_poison},
        {"kernel_faults", test_kernel_faults},
        {"discard_races", test_discard_races},
        {"discard_prefetch_races", test_discard_prefetch_races},
        {"strict_aborts", test_strict_aborts},
        {"strict_discard_prefetch", test_strict_discard_prefetch},
        {NULL, NULL},
    };

    if (argc > 1 && strcmp(argv[1], "strict-child") == 0)
        return strict_child();
    if (argc > 2 && strcmp(argv[1], "discard-prefetch-child") == 0)
        return discard_prefetch_child(strcmp(argv[2], "ordered") == 0);
    setenv("HOFFDBL_DEVICES", "2", 1);
    setenv("HOFFDBL_MEM", "67108864", 1);
    setenv("HOFFDBL_GBPS", "20", 1);
    unsetenv("HOFFDBL_ALLOW");
    unsetenv("HOFFDBL_REPORT");
    hoffdbl_set_strict(0); /* every check is made to fire here: count, do not abort */
    return hoff_test_run("cudart_double", tests);
}
