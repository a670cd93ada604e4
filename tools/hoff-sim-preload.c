/* hoff-sim-preload.c — libhoff-sim.so, the LD_PRELOAD half of `python -m hoff --sim`: PyTorch's CPU storages
 * (posix_memalign) that hoff's rules make offload candidates become managed blocks of a sim context, and a touch
 * of one that is away (a protected page) is paged in on demand by a pager thread the SIGSEGV handler wakes.
 * Threading: any thread allocates and frees; the granule map is read without a lock (atomics); the fault handler
 * only uses async-signal-safe operations (atomics, futex, write) and hands the page-in to the pager thread, which
 * calls hoff under hoff's own locks. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "hoff.h"
#include "preload.h"

#define EXPORT __attribute__((visibility("default")))

/* glibc's own entry points (no dlsym bootstrap). */
extern void *__libc_malloc(size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);

/*
 * The granule map.  Every hoff block handed out here is a whole number of
 * 2 MiB granules, 2 MiB aligned (hoff's managed pool).  gmap[addr >> 21]
 * holds the base address of the live block that covers the granule, or 0:
 * one relaxed load tells free() and the fault handler whether an address is
 * hoff's.  It spans the 47-bit user address space (2^26 entries, 512 MiB of
 * NORESERVE address space; only the pages that hold entries are ever backed,
 * a read of any other maps the zero page).
 */
#define GRAIN_SHIFT 21
#define GRAIN ((uintptr_t)1 << GRAIN_SHIFT)
#define MAP_ENTRIES ((size_t)1 << (47 - GRAIN_SHIFT))

static uintptr_t *gmap;
static hoff_ctx *ctx;   /* set by hoff_simload_arm; NULL: everything goes to glibc */
static pid_t owner_pid; /* a fork()ed child routes nothing and frees no hoff block */
static pthread_t pager;
static int pager_tid; /* the pager's own faults are never its to handle */
static struct sigaction prev_segv;

/* Counters (atomics): what this layer did. */
static uint64_t n_blocks, n_fallbacks, n_touches, n_touch_errors, n_leaked_in_child, n_io_touches, n_io_retries;

static uintptr_t map_get(uintptr_t a) {
    if (!gmap || (a >> GRAIN_SHIFT) >= MAP_ENTRIES)
        return 0;
    return __atomic_load_n(&gmap[a >> GRAIN_SHIFT], __ATOMIC_ACQUIRE);
}

static void map_set(uintptr_t base, size_t size, uintptr_t v) {
    uintptr_t g;

    for (g = base >> GRAIN_SHIFT; g < (base + size + GRAIN - 1) >> GRAIN_SHIFT; g++)
        __atomic_store_n(&gmap[g], v, __ATOMIC_RELEASE);
}

/* This thread is inside hoff_malloc already (a library hoff calls asked for
 * aligned memory): glibc serves it, hoff's lock is held. */
static __thread int inside __attribute__((tls_model("initial-exec")));

static int routing(void) {
    return !inside && __atomic_load_n(&ctx, __ATOMIC_ACQUIRE) != NULL && getpid() == owner_pid;
}

/* --- the fault path ------------------------------------------------------------------------------ */

/* One page-in request, on the faulting thread's (signal) stack.  done: 0 while
 * pending, 1 when the pager answered; rc its answer. */
struct req {
    struct req *next;
    uintptr_t base;
    int write;
    int done;
    int rc;
};

static struct req *queue; /* a lock-free stack of pending requests */
static int queue_seq;     /* futex word: bumped at every push */

static long futex(int *w, int op, int val) {
    return syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

static void say_raw(const char *a, uintptr_t addr, const char *b) {
    char buf[256], hex[19];
    size_t n = 0, i;
    int k;

    for (k = 15; k >= 0; k--)
        hex[15 - k] = "0123456789abcdef"[(addr >> (4 * k)) & 15];
    hex[16] = 0;
    for (i = 0; a[i] && n < sizeof buf - 40; i++)
        buf[n++] = a[i];
    buf[n++] = '0';
    buf[n++] = 'x';
    for (i = 0; hex[i]; i++)
        buf[n++] = hex[i];
    for (i = 0; b[i] && n < sizeof buf - 2; i++)
        buf[n++] = b[i];
    buf[n++] = '\n';
    if (write(2, buf, n) < 0) {
        /* nothing to do */
    }
}

static void chain(int sig, siginfo_t *si, void *uc) {
    if (prev_segv.sa_flags & SA_SIGINFO) {
        if (prev_segv.sa_sigaction) {
            prev_segv.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (prev_segv.sa_handler != SIG_DFL && prev_segv.sa_handler != SIG_IGN) {
        prev_segv.sa_handler(sig);
        return;
    }
    /* The default action: restore it and return; the access faults again and
     * the process dies of SIGSEGV, as it would have without hoff. */
    signal(sig, SIG_DFL);
}

static void on_segv(int sig, siginfo_t *si, void *ucv) {
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr, base = map_get(a);
    struct req r;

    if (!base || si->si_code != SEGV_ACCERR || (int)syscall(SYS_gettid) == pager_tid || getpid() != owner_pid) {
        if (base)
            say_raw("hoff --sim: a fault on hoff block ", base,
                    " that hoff cannot page in here (its own thread, or a forked child)");
        errno = saved;
        chain(sig, si, ucv);
        return;
    }
    memset(&r, 0, sizeof r);
    r.base = base;
#if defined(__x86_64__) && defined(REG_ERR)
    r.write = (((ucontext_t *)ucv)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
    r.next = __atomic_load_n(&queue, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&queue, &r.next, &r, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
    __atomic_add_fetch(&queue_seq, 1, __ATOMIC_RELEASE);
    futex(&queue_seq, FUTEX_WAKE_PRIVATE, 1);
    while (!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE))
        futex(&r.done, FUTEX_WAIT_PRIVATE, 0);
    if (r.rc != 0 && r.rc != -ENODATA) {
        /* Not paged in: returning would fault again forever.  Die with the reason. */
        say_raw("hoff --sim: cannot page in block ", base, " (see the log above); stopping");
        signal(sig, SIG_DFL);
    }
    errno = saved;
}

static void *pager_main(void *arg) {
    (void)arg;
    __atomic_store_n(&pager_tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
    for (;;) {
        int seq = __atomic_load_n(&queue_seq, __ATOMIC_ACQUIRE);
        struct req *r = __atomic_exchange_n(&queue, NULL, __ATOMIC_ACQUIRE), *next;

        if (!r) {
            futex(&queue_seq, FUTEX_WAIT_PRIVATE, seq);
            continue;
        }
        for (; r; r = next) {
            int rc = hoff_sim_touch(ctx, (void *)r->base, r->write);

            next = r->next; /* r lives on the faulter's stack: read it before answering */
            __atomic_add_fetch(&n_touches, 1, __ATOMIC_RELAXED);
            if (rc)
                __atomic_add_fetch(&n_touch_errors, 1, __ATOMIC_RELAXED);
            if (rc && rc != -ENODATA)
                fprintf(stderr, "hoff --sim: paging in block %p failed: %s\n", (void *)r->base, hoff_last_error());
            r->rc = rc;
            __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
            futex(&r->done, FUTEX_WAKE_PRIVATE, 1);
        }
    }
    return NULL;
}

/* --- arming --------------------------------------------------------------------------------------- */

/* Route candidates to c (a sim context) from now on, and page in on faults.
 * 0, or -errno with the reason on stderr.  Once per process. */
EXPORT int hoff_simload_arm(hoff_ctx *c) {
    struct sigaction sa;
    sigset_t all, old;
    int rc;

    if (!c || strcmp(hoff_backend_name(c), "sim") != 0) {
        fprintf(stderr, "hoff --sim: the context is not on the sim backend (HOFF_BACKEND=sim)\n");
        return -EINVAL;
    }
    if (ctx)
        return -EALREADY;
    gmap = mmap(NULL, MAP_ENTRIES * sizeof *gmap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1, 0);
    if (gmap == MAP_FAILED) {
        gmap = NULL;
        fprintf(stderr, "hoff --sim: cannot reserve the granule map: %s\n", strerror(errno));
        return -ENOMEM;
    }
    owner_pid = getpid();
    /* The pager takes no signals: the faulting threads are the ones that wait. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&pager, NULL, pager_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fprintf(stderr, "hoff --sim: cannot start the pager thread: %s\n", strerror(rc));
        return -rc;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &prev_segv) != 0) {
        fprintf(stderr, "hoff --sim: cannot install the SIGSEGV handler: %s\n", strerror(errno));
        return -errno;
    }
    __atomic_store_n(&ctx, c, __ATOMIC_RELEASE);
    return 0;
}

/* This layer's counters as JSON into buf; the length needed, like snprintf. */
EXPORT int hoff_simload_stats_json(char *buf, size_t len) {
    return snprintf(buf, len,
                    "{\"blocks\": %llu, \"fallbacks\": %llu, \"touches\": %llu, \"touch_errors\": %llu, "
                    "\"leaked_in_child\": %llu, \"io_touches\": %llu, \"io_retries\": %llu}",
                    (unsigned long long)__atomic_load_n(&n_blocks, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&n_fallbacks, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&n_touches, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&n_touch_errors, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&n_leaked_in_child, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&n_io_touches, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&n_io_retries, __ATOMIC_RELAXED));
}

/* --- the allocator ----------------------------------------------------------------------------- */

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    void *p;

    if (!hoff_preload_memalign_ok(align))
        return EINVAL;
    if (size && align <= GRAIN && routing()) {
        inside = 1;
        p = hoff_malloc_flags(ctx, size, NULL, HOFF_ALLOC_CANDIDATE);
        if (p)
            map_set((uintptr_t)p, hoff_block_size(ctx, p), (uintptr_t)p);
        inside = 0;
        if (p) {
            __atomic_add_fetch(&n_blocks, 1, __ATOMIC_RELAXED);
            *out = p;
            return 0;
        }
        if (errno != EAGAIN) /* a candidate hoff could not take: glibc holds it, counted */
            __atomic_add_fetch(&n_fallbacks, 1, __ATOMIC_RELAXED);
    }
    p = __libc_memalign(align, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

/* 1 if p is a hoff block (freed here), else 0. */
static int hoff_release(void *p) {
    uintptr_t a = (uintptr_t)p;

    if (!p || map_get(a) != a)
        return 0;
    if (getpid() != owner_pid) { /* a fork()ed child: the block is the parent's */
        __atomic_add_fetch(&n_leaked_in_child, 1, __ATOMIC_RELAXED);
        return 1;
    }
    inside = 1;
    map_set(a, hoff_block_size(ctx, p), 0);
    hoff_free(ctx, p, NULL);
    inside = 0;
    return 1;
}

EXPORT void free(void *p) {
    if (!hoff_release(p))
        __libc_free(p);
}

EXPORT void *realloc(void *old, size_t size) {
    uintptr_t a = (uintptr_t)old;
    size_t have;
    void *p;

    if (!old || map_get(a) != a)
        return __libc_realloc(old, size);
    if (size == 0) {
        hoff_release(old);
        return NULL;
    }
    p = __libc_malloc(size); /* a hoff block moves out to glibc memory */
    if (!p)
        return NULL;
    have = hoff_block_size(ctx, old);
    memcpy(p, old, have < size ? have : size); /* may fault the block back in: no lock is held */
    hoff_release(old);
    return p;
}

/* --- system calls on blocks ------------------------------------------------------------------------
 * The kernel does not raise SIGSEGV when a system call meets a protected page: read, write and the socket calls
 * fail with EFAULT instead (gloo's writev of a DDP bucket that is away, a torch.save of one).  So the I/O calls
 * touch the hoff blocks their buffers lie in first (paged in, a use window opened, as a fault would), and retry
 * a few times if an eviction still got in between (a window closes at the next op mark of another thread). */

/* Touch every hoff block that [p, p + n) overlaps; 1 if there was one. */
static int touch_range(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p, end, g;
    int any = 0;

    if (!p || !n || !__atomic_load_n(&ctx, __ATOMIC_ACQUIRE) || getpid() != owner_pid || inside)
        return 0;
    end = a + n < a ? UINTPTR_MAX : a + n;
    for (g = a & ~(GRAIN - 1); g < end; g += GRAIN) {
        uintptr_t base = map_get(g);

        if (!base)
            continue;
        any = 1;
        __atomic_add_fetch(&n_io_touches, 1, __ATOMIC_RELAXED);
        hoff_sim_touch(ctx, (void *)base, 1);
        g = base + hoff_block_size(ctx, (void *)base) - GRAIN; /* the next granule after the block */
        if (!hoff_block_size(ctx, (void *)base))
            g = base;
    }
    return any;
}

static int touch_iov(const struct iovec *iov, int cnt) {
    int i, any = 0;

    for (i = 0; iov && i < cnt; i++)
        any |= touch_range(iov[i].iov_base, iov[i].iov_len);
    return any;
}

#define REAL(name)                        \
    static __typeof__(name) *real_##name; \
    if (!real_##name)                     \
    real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

/* Run call after touch; again (at most 8 times) while it fails with EFAULT on a hoff buffer. */
#define IO(T, touch, call)                                           \
    do {                                                             \
        int any_, tries_ = 0;                                        \
        T r_;                                                        \
        for (;;) {                                                   \
            any_ = (touch);                                          \
            r_ = (call);                                             \
            if (r_ >= 0 || errno != EFAULT || !any_ || ++tries_ > 8) \
                return r_;                                           \
            __atomic_add_fetch(&n_io_retries, 1, __ATOMIC_RELAXED);  \
        }                                                            \
    } while (0)

EXPORT ssize_t read(int fd, void *buf, size_t n) {
    REAL(read);
    IO(ssize_t, touch_range(buf, n), real_read(fd, buf, n));
}

EXPORT ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write);
    IO(ssize_t, touch_range(buf, n), real_write(fd, buf, n));
}

EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    REAL(pread);
    IO(ssize_t, touch_range(buf, n), real_pread(fd, buf, n, off));
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite);
    IO(ssize_t, touch_range(buf, n), real_pwrite(fd, buf, n, off));
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt) {
    REAL(readv);
    IO(ssize_t, touch_iov(iov, cnt), real_readv(fd, iov, cnt));
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL(writev);
    IO(ssize_t, touch_iov(iov, cnt), real_writev(fd, iov, cnt));
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags) {
    REAL(recv);
    IO(ssize_t, touch_range(buf, n), real_recv(fd, buf, n, flags));
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags) {
    REAL(send);
    IO(ssize_t, touch_range(buf, n), real_send(fd, buf, n, flags));
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags) {
    REAL(recvmsg);
    IO(ssize_t, m ? touch_iov(m->msg_iov, (int)m->msg_iovlen) : 0, real_recvmsg(fd, m, flags));
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags) {
    REAL(sendmsg);
    IO(ssize_t, m ? touch_iov(m->msg_iov, (int)m->msg_iovlen) : 0, real_sendmsg(fd, m, flags));
}
