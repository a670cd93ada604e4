/* test_nvme.c — the NVMe tier on a real disk directory (never tmpfs, except where tmpfs is the point): round
 * trips of many sizes with every byte checked, concurrency, the fallbacks, injected failures at every I/O call,
 * CRC corruption, the unlinked 0600 file and free-space reuse.
 * Threading: single-threaded except the concurrency test. */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "core/core.h"
#include "testutil.h"
#include "tier/crc32c.h"
#include "tier/nvme.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static char dir[512];

static int is_tmpfs(const char *path) {
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == TMPFS_MAGIC;
}

/* A fresh directory on a disk filesystem: $TMPDIR, /var/tmp, the build dir, /tmp; the first that is not tmpfs. */
static void make_dir(void) {
    const char *cands[] = {getenv("TMPDIR"), "/var/tmp", ".", "/tmp"};

    for (size_t i = 0; i < sizeof cands / sizeof *cands; i++) {
        if (!cands[i] || access(cands[i], W_OK) != 0 || is_tmpfs(cands[i]))
            continue;
        snprintf(dir, sizeof dir, "%s/hoff-nvme-XXXXXX", cands[i]);
        if (mkdtemp(dir))
            return;
    }
    snprintf(dir, sizeof dir, "/tmp/hoff-nvme-XXXXXX"); /* all tmpfs: still test something */
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(99);
    }
}

static int dir_is_empty(const char *d) {
    DIR *dp = opendir(d);
    struct dirent *e;
    int n = 0;

    if (!dp)
        return 0;
    while ((e = readdir(dp)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(dp);
    return n == 0;
}

static void fill(unsigned char *p, size_t len, uint64_t seed) {
    hoff_test_fill_rand(p, len, seed * 0x9E3779B97F4A7C15ull + 1); /* seeds 1, 2, ... far apart */
}

static struct hoff__nvme *open_tier(size_t chunk, int depth, struct hoff__nvme_inject *inj) {
    struct hoff__nvme *n = NULL;
    int rc = hoff__nvme_open(&n, dir, chunk, depth, NULL, inj);

    if (rc)
        fprintf(stderr, "hoff__nvme_open: %s\n", hoff_last_error());
    CU_ASSERT_EQUAL(rc, 0);
    return n;
}

static struct hoff__nvme_stats stats(struct hoff__nvme *n) {
    struct hoff__nvme_stats st;
    hoff__nvme_stats(n, &st);
    return st;
}

/* Spill len seeded bytes, check the source is untouched, restore into a poisoned buffer, check every byte. */
static int round_trip(struct hoff__nvme *n, size_t len, uint64_t seed) {
    unsigned char *src = malloc(len), *dst = malloc(len);
    struct hoff__nvme_spill *h = NULL;
    uint32_t before, after;
    int ok = 0, rc;

    if (!src || !dst)
        goto out;
    fill(src, len, seed);
    before = hoff__crc32c(0, src, len);
    rc = hoff__nvme_spill(n, src, len, seed, &h);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) {
        fprintf(stderr, "spill of %zu: %s\n", len, hoff_last_error());
        goto out;
    }
    CU_ASSERT_EQUAL(hoff__nvme_spill_len(h), len);
    CU_ASSERT_EQUAL(hoff__nvme_spill_key(h), seed);
    after = hoff__crc32c(0, src, len);
    CU_ASSERT_EQUAL(before, after);
    memset(dst, 0xDB, len);
    rc = hoff__nvme_restore(n, h, dst, len);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc)
        fprintf(stderr, "restore of %zu: %s\n", len, hoff_last_error());
    ok = rc == 0 && memcmp(src, dst, len) == 0;
    CU_ASSERT(ok);
    if (!ok && rc == 0)
        for (size_t i = 0; i < len; i++)
            if (src[i] != dst[i]) {
                fprintf(stderr, "size %zu: first bad byte at %zu\n", len, i);
                break;
            }
    hoff__nvme_drop(n, h);
out:
    free(src);
    free(dst);
    return ok;
}

static int uring_works(void) {
#ifdef HAVE_LIBURING
    struct io_uring r;
    if (io_uring_queue_init(8, &r, 0) == 0) {
        io_uring_queue_exit(&r);
        return 1;
    }
#endif
    return 0;
}

/* Whether this process may register depth buffers of chunk bytes with io_uring: a user without CAP_IPC_LOCK is held
 * to RLIMIT_MEMLOCK (8 MiB by default on Debian), and the tier then falls back to unregistered buffers. */
static int registration_works(size_t chunk, int depth) {
    int ok = 0;
#ifdef HAVE_LIBURING
    struct io_uring r;
    struct iovec *iov = calloc((size_t)depth, sizeof *iov);
    void *mem = mmap(NULL, chunk * (size_t)depth, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (iov && mem != MAP_FAILED && io_uring_queue_init(8, &r, 0) == 0) {
        for (int i = 0; i < depth; i++)
            iov[i] = (struct iovec){(char *)mem + (size_t)i * chunk, chunk};
        ok = io_uring_register_buffers(&r, iov, (unsigned)depth) == 0;
        io_uring_queue_exit(&r);
    }
    if (mem != MAP_FAILED)
        munmap(mem, chunk * (size_t)depth);
    free(iov);
#endif
    return ok;
}

static int tmpfile_works(int extra) {
    int fd = open(dir, O_TMPFILE | O_RDWR | extra, 0600);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

/* --- CRC32C ----------------------------------------------------------- */

static void test_crc32c(void) {
    unsigned char z[32], f[32], a[32], buf[4096 + 16];
    uint64_t s = 42;

    memset(z, 0, 32);
    memset(f, 0xFF, 32);
    for (int i = 0; i < 32; i++)
        a[i] = (unsigned char)i;
    /* RFC 3720 B.4 test vectors */
    CU_ASSERT_EQUAL(hoff__crc32c(0, "123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL(hoff__crc32c(0, z, 32), 0x8A9136AAu);
    CU_ASSERT_EQUAL(hoff__crc32c(0, f, 32), 0x62A8AB43u);
    CU_ASSERT_EQUAL(hoff__crc32c(0, a, 32), 0x46DD794Eu);
    CU_ASSERT_EQUAL(hoff__crc32c_sw(0, "123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL(hoff__crc32c_sw(0, a, 32), 0x46DD794Eu);
    CU_ASSERT_EQUAL(hoff__crc32c(hoff__crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    fill(buf, sizeof buf, 7);
    for (int i = 0; i < 300; i++) {
        size_t off = hoff_test_rand(&s) % 16, len = hoff_test_rand(&s) % 4096;
        CU_ASSERT_EQUAL(hoff__crc32c(0, buf + off, len), hoff__crc32c_sw(0, buf + off, len));
    }
    fprintf(stderr, "(crc32c %s) ", hoff__crc32c_hw() ? "sse4.2" : "table");
}

/* --- round trips ------------------------------------------------------ */

static const size_t sizes[] = {1,   2,          511,         4095,     4096, 4097, 65535, 65536, 65537, 3 * 65536 + 17,
                               MiB, MiB + 4095, 7 * MiB + 3, 64 * MiB, 0};

static void round_trips(size_t chunk, int depth) {
    struct hoff__nvme *n = open_tier(chunk, depth, NULL);
    struct hoff__nvme_stats st;
    uint64_t total = 0;
    unsigned count = 0;
    char mode[128];

    if (!n)
        return;
    hoff__nvme_mode(n, mode, sizeof mode);
    /* where this kernel, this process's memlock limit and the filesystem can, the tier must use them */
    if (registration_works(chunk, depth)) {
        CU_ASSERT_PTR_NOT_NULL(strstr(mode, "io_uring with registered buffers"));
    } else if (uring_works()) {
        CU_ASSERT_PTR_NOT_NULL(strstr(mode, "io_uring"));
    }
    if (tmpfile_works(O_DIRECT))
        CU_ASSERT_PTR_NOT_NULL(strstr(mode, "O_DIRECT, O_TMPFILE"));
    if (tmpfile_works(0))
        CU_ASSERT_PTR_NOT_NULL(strstr(mode, "O_TMPFILE"));
    for (int i = 0; sizes[i]; i++) {
        CU_ASSERT(round_trip(n, sizes[i], 1000 + (uint64_t)i));
        total += sizes[i];
        count++;
    }
    st = stats(n);
    CU_ASSERT_EQUAL(st.spills, count);
    CU_ASSERT_EQUAL(st.restores, count);
    CU_ASSERT_EQUAL(st.bytes_spilled, total);
    CU_ASSERT_EQUAL(st.bytes_restored, total);
    CU_ASSERT_EQUAL(st.failures, 0);
    CU_ASSERT_EQUAL(st.crc_errors, 0);
    CU_ASSERT_EQUAL(st.bytes_in_use, 0);
    CU_ASSERT_EQUAL(st.peak, 64 * MiB);
    CU_ASSERT_EQUAL(st.live_spills, 0);
    CU_ASSERT_EQUAL(st.extent_bytes, 0);
    CU_ASSERT_EQUAL(st.file_bytes, 0); /* a free tail goes back to the filesystem */
    CU_ASSERT(st.spill_ns > 0);
    CU_ASSERT(st.restore_ns > 0);
    hoff__nvme_close(n);
    fprintf(stderr, "(%s) ", mode);
}

static void test_round_trip_sizes_64k(void) {
    round_trips(64 * KiB, 8);
}

static void test_round_trip_sizes_1m(void) {
    round_trips(MiB, 16);
}

/* Many spills alive at once, restored in another order. */
static void test_many_live(void) {
    enum { N = 48 };
    struct hoff__nvme *n = open_tier(16 * KiB, 8, NULL);
    struct hoff__nvme_spill *h[N];
    unsigned char *src[N], *dst;
    size_t len[N];
    uint64_t s = 99, sum = 0;

    if (!n)
        return;
    dst = malloc(300 * KiB);
    for (int i = 0; i < N; i++) {
        len[i] = hoff_test_rand(&s) % (300 * KiB) + 1;
        src[i] = malloc(len[i]);
        fill(src[i], len[i], 5000 + (uint64_t)i);
        CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, src[i], len[i], (uint64_t)i, &h[i]), 0);
        sum += len[i];
    }
    CU_ASSERT_EQUAL(stats(n).bytes_in_use, sum);
    CU_ASSERT_EQUAL(stats(n).live_spills, N);
    for (int k = 0; k < N; k++) {
        int i = (k * 7) % N; /* 7 is coprime with 48 */
        memset(dst, 0, len[i]);
        CU_ASSERT_EQUAL(hoff__nvme_restore(n, h[i], dst, len[i]), 0);
        CU_ASSERT(memcmp(dst, src[i], len[i]) == 0);
    }
    for (int i = 0; i < N; i += 2)
        hoff__nvme_drop(n, h[i]);
    for (int i = 1; i < N; i += 2) { /* the survivors are untouched by the drops */
        CU_ASSERT_EQUAL(hoff__nvme_restore(n, h[i], dst, len[i]), 0);
        CU_ASSERT(memcmp(dst, src[i], len[i]) == 0);
    }
    hoff__nvme_close(n); /* drops the rest */
    for (int i = 0; i < N; i++)
        free(src[i]);
    free(dst);
}

/* --- concurrency ------------------------------------------------------ */

struct worker {
    struct hoff__nvme *n;
    int id;
    unsigned bad;
};

static void *worker_main(void *p) {
    struct worker *w = p;
    uint64_t s = 777 + (uint64_t)w->id;
    struct hoff__nvme_spill *live[4] = {0};
    unsigned char *src[4] = {0};
    size_t len[4] = {0};

    for (int it = 0; it < 40; it++) {
        int k = (int)(hoff_test_rand(&s) % 4);
        unsigned char *dst;

        if (live[k]) { /* restore, check, drop */
            dst = malloc(len[k]);
            if (hoff__nvme_restore(w->n, live[k], dst, len[k]) != 0 || memcmp(dst, src[k], len[k]) != 0)
                w->bad++;
            free(dst);
            hoff__nvme_drop(w->n, live[k]);
            free(src[k]);
            live[k] = NULL;
        }
        len[k] = hoff_test_rand(&s) % (600 * KiB) + 1;
        src[k] = malloc(len[k]);
        fill(src[k], len[k], s);
        if (hoff__nvme_spill(w->n, src[k], len[k], ((uint64_t)w->id << 32) | (uint64_t)it, &live[k]) != 0)
            w->bad++;
    }
    for (int k = 0; k < 4; k++) {
        if (!live[k])
            continue;
        unsigned char *dst = malloc(len[k]);
        if (hoff__nvme_restore(w->n, live[k], dst, len[k]) != 0 || memcmp(dst, src[k], len[k]) != 0)
            w->bad++;
        free(dst);
        hoff__nvme_drop(w->n, live[k]);
        free(src[k]);
    }
    return NULL;
}

static void concurrent(struct hoff__nvme_inject *inj) {
    struct hoff__nvme *n = open_tier(64 * KiB, 8, inj);
    struct worker w[4];
    pthread_t th[4];
    struct hoff__nvme_stats st;

    if (!n)
        return;
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.n = n, .id = i};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(w[i].bad, 0);
    }
    st = stats(n);
    CU_ASSERT_EQUAL(st.spills, 4 * 40);
    CU_ASSERT_EQUAL(st.restores, 4 * 40);
    CU_ASSERT_EQUAL(st.failures, 0);
    CU_ASSERT_EQUAL(st.bytes_in_use, 0);
    CU_ASSERT_EQUAL(st.live_spills, 0);
    CU_ASSERT_EQUAL(st.file_bytes, 0);
    hoff__nvme_close(n);
}

static void test_concurrent(void) {
    concurrent(NULL);
}

static void test_concurrent_pread(void) {
    struct hoff__nvme_inject inj = {.no_uring = 1};
    concurrent(&inj);
}

/* --- fallbacks -------------------------------------------------------- */

static void fallback_round_trips(struct hoff__nvme *n) {
    CU_ASSERT(round_trip(n, 1, 1));
    CU_ASSERT(round_trip(n, 4097, 2));
    CU_ASSERT(round_trip(n, 200 * KiB + 5, 3));
    CU_ASSERT(round_trip(n, 3 * MiB + 1, 4));
}

static void test_odirect_refused(void) {
    struct hoff__nvme_inject inj = {.no_odirect = 1};
    struct hoff__nvme *n = open_tier(64 * KiB, 8, &inj);
    char mode[128];

    if (!n)
        return;
    CU_ASSERT_EQUAL(stats(n).odirect_off, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__nvme_mode(n, mode, sizeof mode), "buffered"));
    CU_ASSERT_EQUAL(fcntl(hoff__nvme_fd(n), F_GETFL) & O_DIRECT, 0);
    fallback_round_trips(n);
    hoff__nvme_close(n);
}

static void test_tmpfs(void) {
    struct hoff__nvme *n = NULL;
    char mode[128];
    char save[512];

    if (!is_tmpfs("/dev/shm") || access("/dev/shm", W_OK) != 0) {
        fprintf(stderr, "(no writable tmpfs at /dev/shm: skipped) ");
        return;
    }
    memcpy(save, dir, sizeof save);
    snprintf(dir, sizeof dir, "/dev/shm");
    n = open_tier(64 * KiB, 8, NULL);
    memcpy(dir, save, sizeof save);
    if (!n)
        return;
    fprintf(stderr, "(tmpfs: %s) ", hoff__nvme_mode(n, mode, sizeof mode));
    fallback_round_trips(n);
    hoff__nvme_close(n);
    /* and tmpfs refusing O_DIRECT, as before Linux 6.6 */
    {
        struct hoff__nvme_inject inj = {.no_odirect = 1};
        snprintf(dir, sizeof dir, "/dev/shm");
        n = open_tier(64 * KiB, 8, &inj);
        memcpy(dir, save, sizeof save);
        if (!n)
            return;
        CU_ASSERT_EQUAL(stats(n).odirect_off, 1);
        fallback_round_trips(n);
        hoff__nvme_close(n);
    }
}

static void test_uring_unavailable(void) {
    struct hoff__nvme_inject inj = {.no_uring = 1};
    struct hoff__nvme *n = open_tier(64 * KiB, 8, &inj);
    char mode[128];

    if (!n)
        return;
    CU_ASSERT_EQUAL(stats(n).uring_off, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__nvme_mode(n, mode, sizeof mode), "pread/pwrite"));
    fallback_round_trips(n);
    hoff__nvme_close(n);
}

static void test_buffers_not_registered(void) {
    struct hoff__nvme_inject inj = {.no_register = 1};
    struct hoff__nvme *n = open_tier(64 * KiB, 8, &inj);
    char mode[128];

    if (!n)
        return;
    hoff__nvme_mode(n, mode, sizeof mode);
    if (uring_works()) {
        CU_ASSERT_EQUAL(stats(n).fixed_off, 1);
        CU_ASSERT_PTR_NULL(strstr(mode, "registered"));
    }
    fallback_round_trips(n);
    hoff__nvme_close(n);
}

static void test_everything_off(void) {
    struct hoff__nvme_inject inj = {.no_uring = 1, .no_odirect = 1};
    struct hoff__nvme *n = open_tier(64 * KiB, 8, &inj);
    char mode[128];

    if (!n)
        return;
    CU_ASSERT_EQUAL(strncmp(hoff__nvme_mode(n, mode, sizeof mode), "pread/pwrite, buffered, ", 24), 0);
    fallback_round_trips(n);
    hoff__nvme_close(n);
}

/* A filesystem without O_TMPFILE: a named file, unlinked at once, still private. */
static void test_no_tmpfile(void) {
    struct hoff__nvme_inject inj = {.no_tmpfile = 1};
    struct hoff__nvme *n = open_tier(64 * KiB, 8, &inj);
    struct stat sb;
    char mode[128];

    if (!n)
        return;
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__nvme_mode(n, mode, sizeof mode), "unlinked named file"));
    if (tmpfile_works(O_DIRECT))
        CU_ASSERT_PTR_NOT_NULL(strstr(mode, "O_DIRECT"));
    CU_ASSERT(dir_is_empty(dir));
    CU_ASSERT_EQUAL(fstat(hoff__nvme_fd(n), &sb), 0);
    CU_ASSERT_EQUAL(sb.st_nlink, 0);
    CU_ASSERT_EQUAL(sb.st_mode & 07777, 0600);
    fallback_round_trips(n);
    hoff__nvme_close(n);
    inj.no_odirect = 1; /* and without O_DIRECT either */
    n = open_tier(64 * KiB, 8, &inj);
    if (!n)
        return;
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff__nvme_mode(n, mode, sizeof mode), "buffered, unlinked named file"));
    CU_ASSERT_EQUAL(stats(n).odirect_off, 1);
    fallback_round_trips(n);
    hoff__nvme_close(n);
}

/* --- injected failures ------------------------------------------------ */

#define INJ_CHUNK (8 * KiB)
#define INJ_LEN (5 * INJ_CHUNK + 100) /* six chunks, the last one short */

struct kind {
    const char *name;
    int submit; /* 1 = fail a submission, 0 = a completion */
    int err;    /* errno, 0 = short count */
    int expect; /* what the call returns */
};

static const struct kind kinds[] = {
    {"submit ENOSPC", 1, ENOSPC, -ENOSPC}, {"submit EIO", 1, EIO, -EIO},   {"complete ENOSPC", 0, ENOSPC, -ENOSPC},
    {"complete EIO", 0, EIO, -EIO},        {"complete short", 0, 0, -EIO},
};

static void arm(struct hoff__nvme_inject *inj, const struct kind *k, unsigned nth) {
    inj->submits = inj->completions = inj->fired = 0;
    inj->fail_submit = inj->fail_complete = 0;
    if (k->submit) {
        inj->fail_submit = nth;
        inj->submit_err = k->err;
    } else {
        inj->fail_complete = nth;
        inj->complete_err = k->err;
    }
}

static void disarm(struct hoff__nvme_inject *inj) {
    inj->fail_submit = inj->fail_complete = 0;
}

static void inject_every_call(struct hoff__nvme_inject *base) {
    unsigned char *src = malloc(INJ_LEN), *copy = malloc(INJ_LEN), *dst = malloc(INJ_LEN);
    char key_text[32];

    fill(src, INJ_LEN, 31337);
    memcpy(copy, src, INJ_LEN);
    for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++) {
        const struct kind *k = &kinds[ki];
        struct hoff__nvme_inject inj = *base;
        struct hoff__nvme *n = open_tier(INJ_CHUNK, 8, &inj);
        struct hoff__nvme_spill *h;
        unsigned nth, fired_spill = 0, fired_restore = 0;
        uint64_t failures = 0;
        int rc;

        if (!n)
            break;
        /* spills: the Nth call fails; src is never touched, nothing stays allocated */
        for (nth = 1; nth < 100; nth++) {
            uint64_t key = 0xB10C0000u + nth;

            arm(&inj, k, nth);
            h = (struct hoff__nvme_spill *)1;
            rc = hoff__nvme_spill(n, src, INJ_LEN, key, &h);
            disarm(&inj);
            CU_ASSERT(memcmp(src, copy, INJ_LEN) == 0);
            if (!inj.fired) { /* past the last call: the spill went through */
                CU_ASSERT_EQUAL(rc, 0);
                CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, dst, INJ_LEN), 0);
                CU_ASSERT(memcmp(dst, src, INJ_LEN) == 0);
                hoff__nvme_drop(n, h);
                break;
            }
            fired_spill++;
            failures++;
            CU_ASSERT_EQUAL(rc, k->expect);
            if (rc != k->expect)
                fprintf(stderr, "\n  %s, spill call %u: rc %d (%s)\n", k->name, nth, rc, hoff_last_error());
            CU_ASSERT_PTR_NULL(h);
            snprintf(key_text, sizeof key_text, "%#llx", (unsigned long long)key);
            CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), key_text));
            CU_ASSERT_EQUAL(stats(n).extent_bytes, 0);
            CU_ASSERT_EQUAL(stats(n).file_bytes, 0);
            CU_ASSERT_EQUAL(stats(n).live_spills, 0);
            CU_ASSERT_EQUAL(stats(n).bytes_in_use, 0);
            CU_ASSERT_EQUAL(stats(n).spill_failures, failures);
        }
        CU_ASSERT_EQUAL(fired_spill, 6); /* one per chunk: six submissions, six completions */

        /* restores: the Nth call fails; a retry then succeeds with every byte */
        CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, src, INJ_LEN, 0xFEED, &h), 0);
        for (nth = 1; nth < 100; nth++) {
            memset(dst, 0, INJ_LEN);
            arm(&inj, k, nth);
            rc = hoff__nvme_restore(n, h, dst, INJ_LEN);
            disarm(&inj);
            if (!inj.fired) {
                CU_ASSERT_EQUAL(rc, 0);
                CU_ASSERT(memcmp(dst, src, INJ_LEN) == 0);
                break;
            }
            fired_restore++;
            CU_ASSERT_EQUAL(rc, k->expect);
            CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "0xfeed"));
            memset(dst, 0, INJ_LEN);
            rc = hoff__nvme_restore(n, h, dst, INJ_LEN);
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT(memcmp(dst, src, INJ_LEN) == 0);
        }
        CU_ASSERT_EQUAL(fired_restore, 6);
        CU_ASSERT_EQUAL(stats(n).restore_failures, fired_restore);
        CU_ASSERT_EQUAL(stats(n).failures, fired_spill + fired_restore);
        CU_ASSERT_EQUAL(stats(n).crc_errors, 0);
        hoff__nvme_drop(n, h);
        CU_ASSERT_EQUAL(stats(n).file_bytes, 0);
        hoff__nvme_close(n);
    }
    free(src);
    free(copy);
    free(dst);
}

static void test_inject_uring(void) {
    struct hoff__nvme_inject inj = {0};
    inject_every_call(&inj);
}

static void test_inject_uring_unregistered(void) {
    struct hoff__nvme_inject inj = {.no_register = 1};
    inject_every_call(&inj);
}

static void test_inject_pread(void) {
    struct hoff__nvme_inject inj = {.no_uring = 1};
    inject_every_call(&inj);
}

static void test_inject_buffered(void) {
    struct hoff__nvme_inject inj = {.no_odirect = 1};
    inject_every_call(&inj);
}

/* A failure in the middle of a long spill, with a full queue in flight. */
static void test_inject_deep_queue(void) {
    struct hoff__nvme_inject inj = {0};
    struct hoff__nvme *n = open_tier(4 * KiB, 8, &inj);
    size_t len = 100 * 4 * KiB + 1;
    unsigned char *src = malloc(len), *copy = malloc(len), *dst = malloc(len);
    struct hoff__nvme_spill *h;

    if (!n)
        return;
    fill(src, len, 4);
    memcpy(copy, src, len);
    for (unsigned nth = 1; nth <= 101; nth += 10) {
        arm(&inj, &kinds[nth % 2 ? 3 : 4], nth);
        CU_ASSERT_EQUAL(hoff__nvme_spill(n, src, len, 9, &h), -EIO);
        CU_ASSERT_EQUAL(inj.fired, 1);
        CU_ASSERT_EQUAL(stats(n).file_bytes, 0);
        CU_ASSERT(memcmp(src, copy, len) == 0);
    }
    disarm(&inj);
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, src, len, 9, &h), 0);
    arm(&inj, &kinds[0], 50);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, dst, len), -ENOSPC);
    disarm(&inj);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, dst, len), 0);
    CU_ASSERT(memcmp(dst, src, len) == 0);
    hoff__nvme_drop(n, h);
    hoff__nvme_close(n);
    free(src);
    free(copy);
    free(dst);
}

/* A real failure: the file may not grow (RLIMIT_FSIZE), so fallocate/write fail with EFBIG. */
static void test_real_file_limit(void) {
    struct hoff__nvme *n = open_tier(64 * KiB, 8, NULL);
    struct rlimit old, lim;
    size_t len = 2 * MiB;
    unsigned char *src = malloc(len), *copy = malloc(len);
    struct hoff__nvme_spill *h, *small;
    void (*oldsig)(int);
    int rc;

    if (!n)
        return;
    fill(src, len, 11);
    memcpy(copy, src, len);
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, src, 300 * KiB, 1, &small), 0);
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = MiB;
    oldsig = signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    rc = hoff__nvme_spill(n, src, len, 0xF00D, &h);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, oldsig);
    CU_ASSERT_EQUAL(rc, -EFBIG);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT(memcmp(src, copy, len) == 0);
    CU_ASSERT_EQUAL(stats(n).spill_failures, 1);
    CU_ASSERT_EQUAL(stats(n).live_spills, 1);
    CU_ASSERT_EQUAL(stats(n).extent_bytes, 300 * KiB); /* the first spill, and only it */
    {
        unsigned char *dst = malloc(300 * KiB);
        CU_ASSERT_EQUAL(hoff__nvme_restore(n, small, dst, 300 * KiB), 0);
        CU_ASSERT(memcmp(dst, src, 300 * KiB) == 0);
        free(dst);
    }
    CU_ASSERT(round_trip(n, len, 12)); /* and once the limit is gone, it works */
    hoff__nvme_drop(n, small);
    hoff__nvme_close(n);
    free(src);
    free(copy);
}

/* --- copy callbacks ---------------------------------------------------- */

struct cb {
    unsigned char *mem;
    size_t fail_at; /* block offset at which the copy fails; SIZE_MAX = never */
};

static int cb_fill(void *arg, size_t off, void *staging, size_t len) {
    struct cb *c = arg;
    if (off == c->fail_at)
        return -EFAULT;
    memcpy(staging, c->mem + off, len);
    return 0;
}

static int cb_copy(void *arg, size_t off, void *staging, size_t len) {
    struct cb *c = arg;
    if (off == c->fail_at)
        return -EFAULT;
    memcpy(c->mem + off, staging, len);
    return 0;
}

static void test_callbacks(void) {
    struct hoff__nvme *n = open_tier(16 * KiB, 8, NULL);
    size_t len = 10 * 16 * KiB + 3;
    unsigned char *src = malloc(len), *dst = malloc(len);
    struct cb in = {src, 2 * 16 * KiB}, out = {dst, 5 * 16 * KiB};
    struct hoff__nvme_spill *h;
    void *stg;
    size_t stg_bytes;

    if (!n)
        return;
    hoff__nvme_staging(n, &stg, &stg_bytes);
    CU_ASSERT_PTR_NOT_NULL(stg);
    CU_ASSERT_EQUAL(stg_bytes, 8 * 16 * KiB);
    CU_ASSERT_EQUAL(hoff__nvme_chunk_bytes(n), 16 * KiB);
    fill(src, len, 3);
    CU_ASSERT_EQUAL(hoff__nvme_spill_cb(n, len, 77, cb_fill, &in, &h), -EFAULT);
    CU_ASSERT_EQUAL(stats(n).file_bytes, 0);
    in.fail_at = SIZE_MAX;
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill_cb(n, len, 77, cb_fill, &in, &h), 0);
    CU_ASSERT_EQUAL(hoff__nvme_restore_cb(n, h, cb_copy, &out), -EFAULT);
    out.fail_at = SIZE_MAX;
    memset(dst, 0, len);
    CU_ASSERT_EQUAL(hoff__nvme_restore_cb(n, h, cb_copy, &out), 0);
    CU_ASSERT(memcmp(src, dst, len) == 0);
    hoff__nvme_drop(n, h);
    hoff__nvme_close(n);
    free(src);
    free(dst);
}

/* --- writes start while the queue fills --------------------------------- */

struct early {
    int fd;
    size_t chunk;
    unsigned last;      /* the chunk whose fill looks at the file */
    int landed;         /* chunk 0 was on disk by then */
    unsigned char *buf; /* aligned, one chunk */
};

static int early_fill(void *arg, size_t offset, void *staging, size_t len) {
    struct early *e = arg;
    unsigned char *want;

    fill(staging, len, offset + 1);
    if (offset / e->chunk != e->last)
        return 0;
    /* the queue is not full yet (this is its last chunk): chunk 0's write must be under way, or done */
    want = malloc(e->chunk);
    if (!want)
        return -ENOMEM;
    fill(want, e->chunk, 1);
    for (int tries = 0; tries < 2000 && !e->landed; tries++) {
        struct timespec ts = {0, 1000000};
        e->landed = pread(e->fd, e->buf, e->chunk, 0) == (ssize_t)e->chunk && memcmp(e->buf, want, e->chunk) == 0;
        if (!e->landed)
            nanosleep(&ts, NULL);
    }
    free(want);
    return 0;
}

/* A spill's first writes go to the disk while the later chunks are still being copied and checksummed, not after
 * the whole queue has been prepared (that left the disk idle for depth x chunk bytes of copying per spill: the
 * tier wrote 64 MiB blocks at half fio's speed).  The fill of the queue's last chunk waits (up to 2 s) for chunk 0
 * to be on disk. */
static void test_writes_start_early(void) {
    const int depth = 8;
    struct hoff__nvme *n = open_tier(64 * KiB, depth, NULL);
    struct early e = {.chunk = 64 * KiB, .last = (unsigned)depth - 1};
    struct hoff__nvme_spill *h = NULL;
    uint64_t off = 1;
    size_t clen;

    if (!n)
        return;
    e.fd = hoff__nvme_fd(n);
    e.buf = aligned_alloc(4096, e.chunk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e.buf);
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill_cb(n, (size_t)depth * e.chunk, 5, early_fill, &e, &h), 0);
    CU_ASSERT_EQUAL(hoff__nvme_spill_chunk(h, 0, &off, &clen), 0);
    CU_ASSERT_EQUAL(off, 0); /* a fresh tier: chunk 0 is where the fill looked */
    CU_ASSERT(e.landed);
    hoff__nvme_drop(n, h);
    hoff__nvme_close(n);
    free(e.buf);
}

/* --- CRC on restore ---------------------------------------------------- */

static void test_corrupt_chunk(void) {
    struct hoff__nvme *n = open_tier(64 * KiB, 8, NULL);
    size_t len = 3 * 64 * KiB - 1000;
    unsigned char *src = malloc(len), *dst = malloc(len), *blk = aligned_alloc(4096, 4096), *orig;
    struct hoff__nvme_spill *h;
    uint64_t off;
    size_t clen;
    int fd;

    if (!n)
        return;
    orig = aligned_alloc(4096, 4096);
    fill(src, len, 8);
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, src, len, 0xB10C, &h), 0);
    CU_ASSERT_EQUAL(hoff__nvme_spill_chunk(h, 3, &off, &clen), -ERANGE);
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill_chunk(h, 1, &off, &clen), 0);
    CU_ASSERT_EQUAL(clen, 64 * KiB);
    fd = hoff__nvme_fd(n);
    /* flip one byte in the middle of chunk 1 (aligned I/O: the fd may be O_DIRECT) */
    CU_ASSERT_EQUAL_FATAL(pread(fd, blk, 4096, (off_t)(off + 8192)), 4096);
    memcpy(orig, blk, 4096);
    blk[123] ^= 0x10;
    CU_ASSERT_EQUAL_FATAL(pwrite(fd, blk, 4096, (off_t)(off + 8192)), 4096);
    memset(dst, 0, len);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, dst, len), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "0xb10c"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "chunk 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "CRC32C"));
    CU_ASSERT_EQUAL(stats(n).crc_errors, 1);
    CU_ASSERT_EQUAL(stats(n).restore_failures, 1);
    CU_ASSERT_EQUAL(stats(n).restores, 0);
    /* the corrupt chunk's bytes never reach dst */
    CU_ASSERT(memcmp(dst + 64 * KiB, src + 64 * KiB, 64 * KiB) != 0);
    /* again: still detected (never silent), still counted */
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, dst, len), -EBADMSG);
    CU_ASSERT_EQUAL(stats(n).crc_errors, 2);
    /* the spill was kept: repair the disk and it restores */
    CU_ASSERT_EQUAL_FATAL(pwrite(fd, orig, 4096, (off_t)(off + 8192)), 4096);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, dst, len), 0);
    CU_ASSERT(memcmp(dst, src, len) == 0);
    /* a chunk swapped with another (same bytes elsewhere) fails too: the CRC is seeded with the chunk */
    hoff__nvme_drop(n, h);
    hoff__nvme_close(n);
    free(src);
    free(dst);
    free(blk);
    free(orig);
}

/* The CRC covers where a chunk belongs: two spills of identical bytes, the file extents swapped. */
static void test_swapped_chunks(void) {
    struct hoff__nvme *n = open_tier(4 * KiB, 8, NULL);
    unsigned char src[8192], dst[8192], *a = aligned_alloc(4096, 4096), *b = aligned_alloc(4096, 4096);
    struct hoff__nvme_spill *h;
    uint64_t o0, o1;
    size_t l;
    int fd;

    if (!n)
        return;
    fd = hoff__nvme_fd(n);
    fill(src, sizeof src, 1);
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, src, sizeof src, 0x5A, &h), 0);
    hoff__nvme_spill_chunk(h, 0, &o0, &l);
    hoff__nvme_spill_chunk(h, 1, &o1, &l);
    CU_ASSERT_EQUAL(pread(fd, a, 4096, (off_t)o0), 4096);
    CU_ASSERT_EQUAL(pread(fd, b, 4096, (off_t)o1), 4096);
    CU_ASSERT_EQUAL(pwrite(fd, b, 4096, (off_t)o0), 4096);
    CU_ASSERT_EQUAL(pwrite(fd, a, 4096, (off_t)o1), 4096);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, dst, sizeof dst), -EBADMSG);
    hoff__nvme_drop(n, h);
    hoff__nvme_close(n);
    free(a);
    free(b);
}

/* --- the file ---------------------------------------------------------- */

static void test_unlinked_and_private(void) {
    struct hoff__nvme *n;
    struct stat sb;
    char link[64], target[1024];
    ssize_t l;
    mode_t old = umask(0); /* a permissive umask must not widen the mode */

    n = open_tier(64 * KiB, 8, NULL);
    umask(old);
    if (!n)
        return;
    CU_ASSERT(round_trip(n, 100 * KiB, 5));
    CU_ASSERT_EQUAL(fstat(hoff__nvme_fd(n), &sb), 0);
    CU_ASSERT(S_ISREG(sb.st_mode));
    CU_ASSERT_EQUAL(sb.st_mode & 07777, 0600);
    CU_ASSERT_EQUAL(sb.st_nlink, 0); /* never linked into the directory */
    CU_ASSERT_EQUAL(sb.st_uid, geteuid());
    snprintf(link, sizeof link, "/proc/self/fd/%d", hoff__nvme_fd(n));
    l = readlink(link, target, sizeof target - 1);
    CU_ASSERT(l > 0);
    if (l > 0) {
        target[l] = '\0';
        CU_ASSERT_PTR_NOT_NULL(strstr(target, "(deleted)"));
    }
    CU_ASSERT(dir_is_empty(dir));
    CU_ASSERT(fcntl(hoff__nvme_fd(n), F_GETFD) & FD_CLOEXEC);
    hoff__nvme_close(n);
    CU_ASSERT(dir_is_empty(dir));
}

static void test_free_space_reuse(void) {
    struct hoff__nvme *n = open_tier(64 * KiB, 8, NULL);
    struct hoff__nvme_spill *live[3] = {0};
    unsigned char *src = malloc(MiB);
    uint64_t s = 5, max_file = 0;
    struct stat sb;

    if (!n)
        return;
    fill(src, MiB, 6);
    for (int it = 0; it < 300; it++) {
        int k = it % 3;
        size_t len = hoff_test_rand(&s) % MiB + 1;

        hoff__nvme_drop(n, live[k]);
        CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, src, len, (uint64_t)it, &live[k]), 0);
        if (stats(n).file_bytes > max_file)
            max_file = stats(n).file_bytes;
    }
    /* three live spills of at most 1 MiB: first fit keeps the file within a small multiple of that */
    CU_ASSERT(max_file <= 6 * MiB);
    fprintf(stderr, "(file peak %.2f MiB for 3 live MiB) ", (double)max_file / MiB);
    for (int k = 0; k < 3; k++)
        hoff__nvme_drop(n, live[k]);
    CU_ASSERT_EQUAL(stats(n).file_bytes, 0);
    CU_ASSERT_EQUAL(stats(n).extent_bytes, 0);
    CU_ASSERT_EQUAL(fstat(hoff__nvme_fd(n), &sb), 0);
    CU_ASSERT_EQUAL(sb.st_size, 0);
    CU_ASSERT_EQUAL(sb.st_blocks, 0);
    hoff__nvme_close(n);
    free(src);
}

static void test_bad_arguments(void) {
    struct hoff__nvme *n;
    struct hoff__nvme_spill *h;
    char file[600];
    unsigned char b[16] = {0};
    int fd;

    CU_ASSERT_EQUAL(hoff__nvme_open(&n, dir, 1000, 8, NULL, NULL), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_SPILL_CHUNK"));
    CU_ASSERT_EQUAL(hoff__nvme_open(&n, dir, 0, 8, NULL, NULL), -EINVAL);
    CU_ASSERT_EQUAL(hoff__nvme_open(&n, dir, 64 * KiB, 4, NULL, NULL), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_IO_DEPTH"));
    CU_ASSERT_EQUAL(hoff__nvme_open(&n, "", 64 * KiB, 8, NULL, NULL), -EINVAL);
    CU_ASSERT_EQUAL(hoff__nvme_open(&n, "/nonexistent/hoff", 64 * KiB, 8, NULL, NULL), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "HOFF_SPILL_DIR"));
    CU_ASSERT_PTR_NULL(n);
    snprintf(file, sizeof file, "%s/plain-file", dir);
    fd = open(file, O_CREAT | O_WRONLY, 0600);
    close(fd);
    CU_ASSERT_EQUAL(hoff__nvme_open(&n, file, 64 * KiB, 8, NULL, NULL), -ENOTDIR);
    unlink(file);

    n = open_tier(64 * KiB, 8, NULL);
    if (!n)
        return;
    CU_ASSERT_EQUAL(hoff__nvme_spill(n, b, 0, 1, &h), -EINVAL);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_EQUAL(hoff__nvme_spill(n, NULL, 16, 1, &h), -EINVAL);
    CU_ASSERT_EQUAL_FATAL(hoff__nvme_spill(n, b, 16, 1, &h), 0);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, b, 15), -EINVAL);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, h, NULL, 16), -EINVAL);
    CU_ASSERT_EQUAL(hoff__nvme_restore(n, NULL, b, 16), -EINVAL);
    CU_ASSERT_EQUAL(stats(n).failures, 0); /* misuse is not an I/O failure */
    hoff__nvme_drop(n, h);
    hoff__nvme_drop(n, NULL);
    hoff__nvme_close(n);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"crc32c", test_crc32c},
        {"round_trip_sizes_64k", test_round_trip_sizes_64k},
        {"round_trip_sizes_1m", test_round_trip_sizes_1m},
        {"many_live", test_many_live},
        {"concurrent", test_concurrent},
        {"concurrent_pread", test_concurrent_pread},
        {"odirect_refused", test_odirect_refused},
        {"tmpfs", test_tmpfs},
        {"uring_unavailable", test_uring_unavailable},
        {"buffers_not_registered", test_buffers_not_registered},
        {"everything_off", test_everything_off},
        {"no_tmpfile", test_no_tmpfile},
        {"inject_uring", test_inject_uring},
        {"inject_uring_unregistered", test_inject_uring_unregistered},
        {"inject_pread", test_inject_pread},
        {"inject_buffered", test_inject_buffered},
        {"inject_deep_queue", test_inject_deep_queue},
        {"real_file_limit", test_real_file_limit},
        {"callbacks", test_callbacks},
        {"writes_start_early", test_writes_start_early},
        {"corrupt_chunk", test_corrupt_chunk},
        {"swapped_chunks", test_swapped_chunks},
        {"unlinked_and_private", test_unlinked_and_private},
        {"free_space_reuse", test_free_space_reuse},
        {"bad_arguments", test_bad_arguments},
        {NULL, NULL},
    };
    int rc;

    hoff__log_set_level(HOFF_LOG_OFF);
    make_dir();
    rc = hoff_test_run("nvme", tests);
    if (!dir_is_empty(dir)) {
        fprintf(stderr, "test_nvme: %s is not empty: the tier left something behind\n", dir);
        rc = rc ? rc : 1;
    }
    rmdir(dir);
    return rc;
}
