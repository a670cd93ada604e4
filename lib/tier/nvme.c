/* nvme.c — the NVMe tier: one unlinked O_TMPFILE spill file, a chunk-granular extent allocator over it, spills
 * and restores through io_uring (registered staging buffers, up to queue_depth in flight) with a CRC32C per chunk,
 * and the fallbacks (buffered I/O, pread/pwrite).  Threading: one mutex per tier, held for a whole call. */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* O_TMPFILE, O_DIRECT, fallocate, mkostemp */
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "core/core.h"
#include "tier/host.h"
#include "tier/nvme.h"

#define ALIGN 4096u

/* ---------------------------------------------------------------------------
 * CRC32C
 * ------------------------------------------------------------------------- */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_have_hw;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xFF];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc_have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* Raw (no pre/post inversion) slice-by-8. */
static uint32_t crc_sw_raw(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = crc_tab[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c; /* little-endian */
        c = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^ crc_tab[5][(lo >> 16) & 0xFF] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xFF] ^ crc_tab[2][(hi >> 8) & 0xFF] ^
            crc_tab[1][(hi >> 16) & 0xFF] ^ crc_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_tab[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_raw(uint32_t c32, const unsigned char *p, size_t n) {
    uint64_t c = c32;

    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

uint32_t hoff__crc32c_sw(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    return ~crc_sw_raw(~crc, p, n);
}

uint32_t hoff__crc32c(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc_have_hw)
        return ~crc_hw_raw(~crc, p, n);
#endif
    return ~crc_sw_raw(~crc, p, n);
}

int hoff__crc32c_hw(void) {
    pthread_once(&crc_once, crc_init);
    return crc_have_hw;
}

/* ---------------------------------------------------------------------------
 * The tier
 * ------------------------------------------------------------------------- */

struct chunk {
    uint64_t off; /* in the file */
    uint32_t crc;
    uint32_t pad_;
};

struct hoff__nvme_spill {
    struct hoff__nvme *owner;
    struct hoff__nvme_spill *prev, *next; /* the tier's live spills */
    uint64_t key, id;
    size_t len;
    uint32_t nchunks;
    struct chunk c[];
};

struct extent {
    uint64_t off, len;
};

struct hoff__nvme {
    pthread_mutex_t mu;
    int fd;
    int odirect;  /* the file is open with O_DIRECT */
    int tmpfile;  /* created with O_TMPFILE (else a named file, unlinked) */
    int uring;    /* the ring is up */
    int fixed;    /* the staging buffers are registered */
    size_t chunk; /* I/O size */
    int depth;
    char dir[256];
    struct hoff__nvme_inject *inj;
    int io_einval; /* the current call failed with a real EINVAL from the I/O itself */
    unsigned char *staging; /* depth * chunk (1 chunk after a ring failure) */
    size_t staging_bytes;
    int nbufs;
    int *bstack;       /* free staging buffers */
    uint32_t *bchunk;  /* chunk each buffer carries */
    unsigned char *retired; /* staging the broken ring may still touch: freed at close */
    size_t retired_bytes;
    int broken_op; /* the ring broke during this call: its file extents are quarantined */
#ifdef HAVE_LIBURING
    struct io_uring ring;
#endif
    struct extent *fr; /* free extents, sorted by offset, coalesced */
    size_t nfr, capfr;
    uint64_t file_end;
    int no_fallocate;
    uint64_t next_id;
    struct hoff__nvme_spill *live;
    struct hoff__nvme_stats st;
};

struct op {
    struct hoff__nvme_spill *h;
    int write;
    hoff__nvme_copy_fn fn;
    void *arg;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t chunk_len(const struct hoff__nvme *n, const struct hoff__nvme_spill *h, uint32_t i) {
    size_t off = (size_t)i * n->chunk;
    return h->len - off < n->chunk ? h->len - off : n->chunk;
}

static size_t io_len(size_t clen) {
    return (size_t)hoff__align_up(clen, ALIGN);
}

/* The CRC of a chunk covers its bytes and, as a seed, the spill's id and the chunk's index: a chunk read from the
 * wrong place or left over from an older spill of the same extent does not pass. */
static uint32_t chunk_crc(const struct hoff__nvme_spill *h, uint32_t i, const void *buf, size_t len) {
    uint64_t seed[2] = {h->id, i};
    return hoff__crc32c(hoff__crc32c(0, seed, sizeof seed), buf, len);
}

/* --- failure injection ------------------------------------------------ */

static int inj_submit(struct hoff__nvme *n) {
    struct hoff__nvme_inject *j = n->inj;

    if (!j)
        return 0;
    j->submits++;
    if (j->fail_submit && j->submits == j->fail_submit) {
        j->fail_submit = 0;
        j->fired++;
        return -(j->submit_err > 0 ? j->submit_err : EIO);
    }
    return 0;
}

static int inj_complete(struct hoff__nvme *n, int res, size_t len, int *injected) {
    struct hoff__nvme_inject *j = n->inj;

    *injected = 0;
    if (!j)
        return res;
    j->completions++;
    if (j->fail_complete && j->completions == j->fail_complete) {
        j->fail_complete = 0;
        j->fired++;
        *injected = 1;
        return j->complete_err > 0 ? -j->complete_err : (int)(len / 2);
    }
    return res;
}

/* --- the extent allocator --------------------------------------------- */

static int ext_alloc(struct hoff__nvme *n, uint64_t len, uint64_t *off) {
    int e = 0;

    for (size_t i = 0; i < n->nfr; i++) {
        if (n->fr[i].len >= len) {
            *off = n->fr[i].off;
            n->fr[i].off += len;
            n->fr[i].len -= len;
            if (!n->fr[i].len) {
                memmove(&n->fr[i], &n->fr[i + 1], (n->nfr - i - 1) * sizeof *n->fr);
                n->nfr--;
            }
            return 0;
        }
    }
    /* grow the file; fallocate finds a full disk now rather than in the middle of the writes */
    if (n->inj && n->inj->disk_full) {
        n->inj->fired++;
        e = ENOSPC;
    } else if (!n->no_fallocate && fallocate(n->fd, 0, (off_t)n->file_end, (off_t)len) != 0) {
        if (errno == EOPNOTSUPP || errno == ENOSYS)
            n->no_fallocate = 1;
        else
            e = errno;
    }
    if (e) {
        char b[32];
        return hoff__error(-e, "NVMe tier: cannot grow the spill file in %s by %s (%s)", n->dir,
                           hoff__fmt_size(len, b, sizeof b), strerror(e));
    }
    *off = n->file_end;
    n->file_end += len;
    return 0;
}

static void ext_free(struct hoff__nvme *n, uint64_t off, uint64_t len) {
    size_t lo = 0, hi = n->nfr;

    while (lo < hi) { /* first extent after off */
        size_t mid = (lo + hi) / 2;
        if (n->fr[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && n->fr[lo - 1].off + n->fr[lo - 1].len == off) {
        n->fr[lo - 1].len += len;
        if (lo < n->nfr && off + len == n->fr[lo].off) {
            n->fr[lo - 1].len += n->fr[lo].len;
            memmove(&n->fr[lo], &n->fr[lo + 1], (n->nfr - lo - 1) * sizeof *n->fr);
            n->nfr--;
        }
        lo--;
    } else if (lo < n->nfr && off + len == n->fr[lo].off) {
        n->fr[lo].off = off;
        n->fr[lo].len += len;
    } else {
        if (n->nfr == n->capfr) {
            size_t cap = n->capfr ? n->capfr * 2 : 64;
            struct extent *fr = realloc(n->fr, cap * sizeof *fr);
            if (!fr) { /* leak the extent rather than fail a free */
                n->st.quarantined_bytes += len;
                return;
            }
            n->fr = fr;
            n->capfr = cap;
        }
        memmove(&n->fr[lo + 1], &n->fr[lo], (n->nfr - lo) * sizeof *n->fr);
        n->fr[lo] = (struct extent){off, len};
        n->nfr++;
    }
    /* a free tail goes back to the filesystem */
    if (n->nfr && n->fr[n->nfr - 1].off + n->fr[n->nfr - 1].len == n->file_end) {
        n->file_end = n->fr[n->nfr - 1].off;
        n->nfr--;
        if (ftruncate(n->fd, (off_t)n->file_end) != 0)
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: cannot shrink the spill file (%s)", strerror(errno));
    }
}

static void spill_free_extents(struct hoff__nvme *n, struct hoff__nvme_spill *h, uint32_t count) {
    for (uint32_t i = count; i-- > 0;)
        ext_free(n, h->c[i].off, io_len(chunk_len(n, h, i)));
}

/* --- one chunk on its way in or out ----------------------------------- */

static int prep_chunk(struct hoff__nvme *n, struct op *op, uint32_t i, unsigned char *buf) {
    size_t clen = chunk_len(n, op->h, i);
    int rc;

    if (!op->write)
        return 0;
    rc = op->fn(op->arg, (size_t)i * n->chunk, buf, clen);
    if (rc)
        return hoff__error(rc < 0 ? rc : -EIO, "NVMe tier: spill of block %#" PRIx64 ": copying chunk %u into "
                                               "staging failed (%s)",
                           op->h->key, i, hoff_strerror(rc < 0 ? rc : -EIO));
    memset(buf + clen, 0, io_len(clen) - clen);
    op->h->c[i].crc = chunk_crc(op->h, i, buf, clen);
    return 0;
}

static int finish_chunk(struct hoff__nvme *n, struct op *op, uint32_t i, unsigned char *buf) {
    struct hoff__nvme_spill *h = op->h;
    size_t clen = chunk_len(n, h, i);
    uint32_t crc;
    int rc;

    if (op->write)
        return 0;
    crc = chunk_crc(h, i, buf, clen);
    if (crc != h->c[i].crc) {
        n->st.crc_errors++;
        rc = hoff__error(-EBADMSG,
                         "NVMe tier: restore of block %#" PRIx64 ": chunk %u (block offset %zu, %zu bytes, file "
                         "offset %" PRIu64 ") failed its CRC32C check (stored %08x, read %08x); the spill is kept",
                         h->key, i, (size_t)i * n->chunk, clen, h->c[i].off, h->c[i].crc, crc);
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        return rc;
    }
    rc = op->fn(op->arg, (size_t)i * n->chunk, buf, clen);
    if (rc)
        return hoff__error(rc < 0 ? rc : -EIO, "NVMe tier: restore of block %#" PRIx64 ": copying chunk %u out of "
                                               "staging failed (%s)",
                           h->key, i, hoff_strerror(rc < 0 ? rc : -EIO));
    return 0;
}

/* The I/O of chunk i ended with res (bytes or -errno). */
static int check_result(struct hoff__nvme *n, struct op *op, uint32_t i, int res, size_t len, int injected) {
    const char *what = op->write ? "write" : "read";

    if (res == -EINVAL && !injected)
        n->io_einval = 1;
    if (res < 0)
        return hoff__error(res, "NVMe tier: %s of block %#" PRIx64 " failed: %s of chunk %u (%zu bytes at file "
                                "offset %" PRIu64 " in %s): %s; %s",
                           op->write ? "spill" : "restore", op->h->key, what, i, len, op->h->c[i].off, n->dir,
                           strerror(-res), op->write ? "the block stays on the host" : "the spill is kept");
    if ((size_t)res != len)
        return hoff__error(-EIO, "NVMe tier: %s of block %#" PRIx64 " failed: short %s of chunk %u (%d of %zu bytes "
                                 "at file offset %" PRIu64 " in %s); %s",
                           op->write ? "spill" : "restore", op->h->key, what, i, res, len, op->h->c[i].off, n->dir,
                           op->write ? "the block stays on the host" : "the spill is kept");
    return 0;
}

static int submit_error(struct hoff__nvme *n, struct op *op, uint32_t i, int rc) {
    return hoff__error(rc, "NVMe tier: %s of block %#" PRIx64 " failed: submitting the %s of chunk %u: %s; %s",
                       op->write ? "spill" : "restore", op->h->key, op->write ? "write" : "read", i, strerror(-rc),
                       op->write ? "the block stays on the host" : "the spill is kept");
}

/* --- pread/pwrite ----------------------------------------------------- */

static int sync_run(struct hoff__nvme *n, struct op *op) {
    unsigned char *buf = n->staging;
    int rc, injected;

    if (!buf)
        return hoff__error(-ENOMEM, "NVMe tier: no staging buffer");
    for (uint32_t i = 0; i < op->h->nchunks; i++) {
        size_t len = io_len(chunk_len(n, op->h, i));
        off_t off = (off_t)op->h->c[i].off;
        ssize_t r;
        int res;

        if ((rc = prep_chunk(n, op, i, buf)) != 0)
            return rc;
        if ((rc = inj_submit(n)) != 0)
            return submit_error(n, op, i, rc);
        do
            r = op->write ? pwrite(n->fd, buf, len, off) : pread(n->fd, buf, len, off);
        while (r < 0 && errno == EINTR);
        res = r < 0 ? -errno : (int)r;
        res = inj_complete(n, res, len, &injected);
        if ((rc = check_result(n, op, i, res, len, injected)) != 0)
            return rc;
        if ((rc = finish_chunk(n, op, i, buf)) != 0)
            return rc;
    }
    return 0;
}

/* --- io_uring --------------------------------------------------------- */

#ifdef HAVE_LIBURING
/* The ring failed for real (not a retryable condition): requests may still be in flight and touch the staging
 * buffers and the file, so the ring goes, its staging is retired until close, the current call's extents are
 * quarantined, and the tier carries on with pread/pwrite. */
static void ring_fail(struct hoff__nvme *n, int rc) {
    hoff__log(HOFF_LOG_WARN, "NVMe tier: io_uring failed (%s); using pread/pwrite from now on", strerror(-rc));
    io_uring_queue_exit(&n->ring);
    n->uring = 0;
    n->fixed = 0;
    n->st.uring_off = 1;
    n->broken_op = 1;
    n->retired = n->staging;
    n->retired_bytes = n->staging_bytes;
    n->staging_bytes = n->chunk;
    n->staging = hoff__host_tier_staging_alloc(NULL, n->staging_bytes, NULL);
}

static int submit_all(struct hoff__nvme *n) {
    int tries = 0;

    while (io_uring_sq_ready(&n->ring) > 0) {
        int r = io_uring_submit(&n->ring);

        if (r > 0)
            continue;
        if ((r == 0 || r == -EINTR || r == -EAGAIN || r == -ENOMEM) && ++tries < 100000) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
            continue;
        }
        return r ? r : -EAGAIN;
    }
    return 0;
}

static int wait_cqe(struct hoff__nvme *n, struct io_uring_cqe **cqe) {
    int r;

    do
        r = io_uring_wait_cqe(&n->ring, cqe);
    while (r == -EINTR || r == -EAGAIN);
    return r;
}

static int submit_failed(struct hoff__nvme *n, struct op *op, int rc) {
    ring_fail(n, rc);
    return hoff__error(rc, "NVMe tier: io_uring_submit failed (%s); block %#" PRIx64 " %s", strerror(-rc), op->h->key,
                       op->write ? "stays on the host" : "is kept on disk");
}

static int uring_run(struct hoff__nvme *n, struct op *op) {
    struct hoff__nvme_spill *h = op->h;
    uint32_t next = 0;
    int nfree = n->nbufs, inflight = 0, err = 0, rc;

    for (int b = 0; b < n->nbufs; b++)
        n->bstack[b] = b;
    for (;;) {
        while (!err && next < h->nchunks && nfree > 0) {
            int b = n->bstack[--nfree];
            unsigned char *buf = n->staging + (size_t)b * n->chunk;
            size_t len = io_len(chunk_len(n, h, next));
            struct io_uring_sqe *sqe;

            if ((rc = prep_chunk(n, op, next, buf)) != 0) {
                err = rc;
                n->bstack[nfree++] = b;
                break;
            }
            if ((rc = inj_submit(n)) != 0) {
                err = submit_error(n, op, next, rc);
                n->bstack[nfree++] = b;
                break;
            }
            sqe = io_uring_get_sqe(&n->ring);
            if (!sqe) { /* cannot happen (depth entries, at most depth pending); be safe */
                if ((rc = submit_all(n)) != 0 || (sqe = io_uring_get_sqe(&n->ring)) == NULL) {
                    err = rc ? rc : -EBUSY;
                    n->bstack[nfree++] = b;
                    ring_fail(n, err);
                    return hoff__error(err, "NVMe tier: io_uring has no room for a request");
                }
            }
            if (op->write) {
                if (n->fixed)
                    io_uring_prep_write_fixed(sqe, n->fd, buf, (unsigned)len, h->c[next].off, b);
                else
                    io_uring_prep_write(sqe, n->fd, buf, (unsigned)len, h->c[next].off);
            } else {
                if (n->fixed)
                    io_uring_prep_read_fixed(sqe, n->fd, buf, (unsigned)len, h->c[next].off, b);
                else
                    io_uring_prep_read(sqe, n->fd, buf, (unsigned)len, h->c[next].off);
            }
            sqe->user_data = (uint64_t)b;
            n->bchunk[b] = next;
            next++;
            inflight++;
            /* A write's chunk costs a copy and a CRC to prepare: start each as soon as it is ready, or the disk
             * would idle while a whole queue of chunks (up to depth x chunk bytes) is prepared at each spill's
             * start.  Reads cost nothing to queue and go in one batch. */
            if (op->write && (rc = submit_all(n)) != 0)
                return submit_failed(n, op, rc);
        }
        if (io_uring_sq_ready(&n->ring) > 0 && (rc = submit_all(n)) != 0)
            return submit_failed(n, op, rc);
        if (inflight == 0)
            break;
        {
            struct io_uring_cqe *cqe;
            int b, res, injected;
            uint32_t i;
            size_t len;

            if ((rc = wait_cqe(n, &cqe)) != 0) {
                ring_fail(n, rc);
                return hoff__error(rc, "NVMe tier: waiting for io_uring failed (%s); block %#" PRIx64 " %s",
                                   strerror(-rc), h->key, op->write ? "stays on the host" : "is kept on disk");
            }
            b = (int)cqe->user_data;
            res = cqe->res;
            io_uring_cqe_seen(&n->ring, cqe);
            inflight--;
            i = n->bchunk[b];
            len = io_len(chunk_len(n, h, i));
            res = inj_complete(n, res, len, &injected);
            if (!err) {
                err = check_result(n, op, i, res, len, injected);
                if (!err)
                    err = finish_chunk(n, op, i, n->staging + (size_t)b * n->chunk);
            }
            n->bstack[nfree++] = b;
        }
    }
    return err;
}
#endif

/* One spill's writes or one restore's reads.  A real EINVAL from an O_DIRECT file (a filesystem that opens
 * with O_DIRECT but refuses the I/O) turns O_DIRECT off and runs the call again, once. */
static int run_op(struct hoff__nvme *n, struct op *op) {
    int rc;

    for (int attempt = 0;; attempt++) {
        n->io_einval = 0;
        n->broken_op = 0;
#ifdef HAVE_LIBURING
        if (n->uring)
            rc = uring_run(n, op);
        else
#endif
            rc = sync_run(n, op);
        if (rc != -EINVAL || !n->io_einval || !n->odirect || n->broken_op || attempt > 0)
            return rc;
        {
            int fl = fcntl(n->fd, F_GETFL);
            if (fl < 0 || fcntl(n->fd, F_SETFL, fl & ~O_DIRECT) < 0)
                return rc;
        }
        n->odirect = 0;
        n->st.odirect_off = 1;
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: O_DIRECT I/O refused in %s (EINVAL); using buffered I/O", n->dir);
    }
}

/* --- open / close ----------------------------------------------------- */

static int open_file(struct hoff__nvme *n, const char *dir) {
    const int flags = O_TMPFILE | O_RDWR | O_CLOEXEC;
    int fd, e;

    if (n->inj && n->inj->no_tmpfile) {
        fd = -1;
        errno = EOPNOTSUPP;
    } else if (n->inj && n->inj->no_odirect) {
        fd = -1;
        errno = EINVAL;
    } else {
        fd = open(dir, flags | O_DIRECT, 0600);
    }
    n->odirect = fd >= 0;
    if (fd < 0 && errno == EINVAL) {
        fd = open(dir, flags, 0600);
        if (fd >= 0) {
            n->st.odirect_off = 1;
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: %s refuses O_DIRECT; spilling through the page cache "
                                          "(buffered I/O)", dir);
        }
    }
    n->tmpfile = fd >= 0;
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        /* no O_TMPFILE here: a named file, unlinked at once */
        char path[512];

        snprintf(path, sizeof path, "%s/.hoff-spill-XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0) {
            unlink(path);
            HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: %s has no O_TMPFILE; the spill file is a named file "
                                          "unlinked right after creation", dir);
            n->odirect = 0;
            if (!(n->inj && n->inj->no_odirect)) {
                int fl = fcntl(fd, F_GETFL);
                n->odirect = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
            }
            if (!n->odirect) {
                n->st.odirect_off = 1;
                HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: %s refuses O_DIRECT; spilling through the page cache "
                                              "(buffered I/O)", dir);
            }
        }
    }
    if (fd < 0) {
        e = errno;
        return hoff__error(-e, "HOFF_SPILL_DIR=%s: cannot create the spill file there (%s)", dir, strerror(e));
    }
    if (fchmod(fd, 0600) != 0) {
        e = errno;
        close(fd);
        return hoff__error(-e, "HOFF_SPILL_DIR=%s: cannot make the spill file private (%s)", dir, strerror(e));
    }
    n->fd = fd;
    return 0;
}

static void setup_uring(struct hoff__nvme *n) {
#ifdef HAVE_LIBURING
    struct iovec *iov;
    int rc;

    rc = n->inj && n->inj->no_uring ? -ENOSYS : io_uring_queue_init((unsigned)n->depth, &n->ring, 0);
    if (rc < 0) {
        n->st.uring_off = 1;
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: io_uring is unavailable (%s: an old kernel, or seccomp); "
                                      "using pread/pwrite",
                       strerror(-rc));
        return;
    }
    n->uring = 1;
    iov = calloc((size_t)n->nbufs, sizeof *iov);
    if (!iov) {
        rc = -ENOMEM;
    } else {
        for (int b = 0; b < n->nbufs; b++)
            iov[b] = (struct iovec){n->staging + (size_t)b * n->chunk, n->chunk};
        rc = n->inj && n->inj->no_register ? -ENOMEM : io_uring_register_buffers(&n->ring, iov, (unsigned)n->nbufs);
        free(iov);
    }
    if (rc < 0) {
        n->st.fixed_off = 1;
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: cannot register the staging buffers with io_uring (%s; see "
                                      "ulimit -l); using unregistered buffers",
                       strerror(-rc));
        return;
    }
    n->fixed = 1;
#else
    n->st.uring_off = 1;
    HOFF__LOG_ONCE(HOFF_LOG_INFO, "NVMe tier: built without liburing; using pread/pwrite");
#endif
}

int hoff__nvme_open(struct hoff__nvme **out, const char *dir, size_t chunk_bytes, int queue_depth,
                    struct hoff__host_tier *host, struct hoff__nvme_inject *inject) {
    struct hoff__nvme *n;
    struct stat sb;
    int rc;

    *out = NULL;
    if (!dir || !*dir)
        return hoff__error(-EINVAL, "HOFF_SPILL_DIR is empty: no NVMe tier");
    if (strlen(dir) >= sizeof n->dir)
        return hoff__error(-EINVAL, "HOFF_SPILL_DIR=%.64s...: the path is too long", dir);
    if (chunk_bytes == 0 || chunk_bytes % ALIGN || chunk_bytes > ((size_t)1 << 30))
        return hoff__error(-EINVAL, "HOFF_SPILL_CHUNK=%zu: the NVMe chunk must be a multiple of 4096 between 4K "
                                    "and 1G",
                           chunk_bytes);
    if (queue_depth < 8 || queue_depth > 4096)
        return hoff__error(-EINVAL, "HOFF_IO_DEPTH=%d: the io_uring queue depth must be between 8 and 4096",
                           queue_depth);
    if (stat(dir, &sb) != 0)
        return hoff__error(-errno, "HOFF_SPILL_DIR=%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return hoff__error(-ENOTDIR, "HOFF_SPILL_DIR=%s: not a directory", dir);

    n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    pthread_mutex_init(&n->mu, NULL);
    strcpy(n->dir, dir);
    n->fd = -1;
    n->chunk = chunk_bytes;
    n->depth = queue_depth;
    n->nbufs = queue_depth;
    n->inj = inject;
    if ((rc = open_file(n, dir)) != 0)
        goto fail;
    n->staging_bytes = (size_t)n->nbufs * n->chunk;
    n->staging = hoff__host_tier_staging_alloc(host, n->staging_bytes, NULL);
    n->bstack = calloc((size_t)n->nbufs, sizeof *n->bstack);
    n->bchunk = calloc((size_t)n->nbufs, sizeof *n->bchunk);
    if (!n->staging || !n->bstack || !n->bchunk) {
        char b[32];
        rc = hoff__error(-ENOMEM, "NVMe tier: cannot allocate %s of staging buffers (HOFF_IO_DEPTH x "
                                  "HOFF_SPILL_CHUNK)",
                         hoff__fmt_size(n->staging_bytes, b, sizeof b));
        goto fail;
    }
    setup_uring(n);
    *out = n;
    return 0;
fail:
    hoff__nvme_close(n);
    return rc;
}

void hoff__nvme_close(struct hoff__nvme *n) {
    if (!n)
        return;
    while (n->live) {
        struct hoff__nvme_spill *h = n->live;
        n->live = h->next;
        free(h);
    }
#ifdef HAVE_LIBURING
    if (n->uring)
        io_uring_queue_exit(&n->ring); /* unregisters the buffers too */
#endif
    if (n->fd >= 0)
        close(n->fd);
    hoff__host_tier_staging_free(NULL, n->staging, n->staging_bytes);
    hoff__host_tier_staging_free(NULL, n->retired, n->retired_bytes);
    free(n->bstack);
    free(n->bchunk);
    free(n->fr);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

/* --- spill / restore / drop ------------------------------------------- */

static int copy_in(void *arg, size_t offset, void *staging, size_t len) {
    memcpy(staging, (const unsigned char *)arg + offset, len);
    return 0;
}

static int copy_out(void *arg, size_t offset, void *staging, size_t len) {
    memcpy((unsigned char *)arg + offset, staging, len);
    return 0;
}

int hoff__nvme_spill_cb(struct hoff__nvme *n, size_t len, uint64_t key, hoff__nvme_copy_fn fill, void *arg,
                        struct hoff__nvme_spill **out) {
    struct hoff__nvme_spill *h;
    struct op op;
    uint64_t nch, t0, ext = 0;
    uint32_t i;
    int rc;

    *out = NULL;
    if (!len || !fill)
        return hoff__error(-EINVAL, "NVMe tier: spill of block %#" PRIx64 ": nothing to spill", key);
    nch = (len + n->chunk - 1) / n->chunk;
    if (nch > UINT32_MAX)
        return hoff__error(-EFBIG, "NVMe tier: block %#" PRIx64 " is too large to spill", key);
    h = calloc(1, sizeof *h + (size_t)nch * sizeof h->c[0]);
    if (!h)
        return -ENOMEM;
    h->owner = n;
    h->key = key;
    h->len = len;
    h->nchunks = (uint32_t)nch;

    pthread_mutex_lock(&n->mu);
    h->id = ++n->next_id;
    for (i = 0; i < h->nchunks; i++) {
        uint64_t l = io_len(chunk_len(n, h, i));
        if ((rc = ext_alloc(n, l, &h->c[i].off)) != 0) {
            spill_free_extents(n, h, i);
            goto fail;
        }
        ext += l;
    }
    t0 = now_ns();
    op = (struct op){.h = h, .write = 1, .fn = fill, .arg = arg};
    rc = run_op(n, &op);
    if (rc) {
        if (n->broken_op)
            n->st.quarantined_bytes += ext;
        else
            spill_free_extents(n, h, h->nchunks);
        goto fail;
    }
    n->st.spills++;
    n->st.bytes_spilled += len;
    n->st.spill_ns += now_ns() - t0;
    n->st.bytes_in_use += len;
    if (n->st.bytes_in_use > n->st.peak)
        n->st.peak = n->st.bytes_in_use;
    n->st.live_spills++;
    n->st.extent_bytes += ext;
    h->next = n->live;
    if (n->live)
        n->live->prev = h;
    n->live = h;
    pthread_mutex_unlock(&n->mu);
    *out = h;
    return 0;
fail:
    n->st.failures++;
    n->st.spill_failures++;
    pthread_mutex_unlock(&n->mu);
    HOFF__LOG_ONCE(HOFF_LOG_WARN, "%s (this is said once; failures are counted)", hoff_last_error());
    free(h);
    return rc;
}

int hoff__nvme_spill(struct hoff__nvme *n, const void *src, size_t len, uint64_t key,
                     struct hoff__nvme_spill **out) {
    if (!src) {
        *out = NULL;
        return hoff__error(-EINVAL, "NVMe tier: spill of block %#" PRIx64 ": no source", key);
    }
    return hoff__nvme_spill_cb(n, len, key, copy_in, (void *)src, out);
}

int hoff__nvme_restore_cb(struct hoff__nvme *n, struct hoff__nvme_spill *h, hoff__nvme_copy_fn copy, void *arg) {
    struct op op;
    uint64_t t0;
    int rc;

    if (!h || h->owner != n || !copy)
        return hoff__error(-EINVAL, "NVMe tier: restore of a spill this tier does not hold");
    pthread_mutex_lock(&n->mu);
    t0 = now_ns();
    op = (struct op){.h = h, .write = 0, .fn = copy, .arg = arg};
    rc = run_op(n, &op);
    if (rc) {
        n->st.failures++;
        n->st.restore_failures++;
    } else {
        n->st.restores++;
        n->st.bytes_restored += h->len;
        n->st.restore_ns += now_ns() - t0;
    }
    pthread_mutex_unlock(&n->mu);
    if (rc)
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "%s (this is said once; failures are counted)", hoff_last_error());
    return rc;
}

int hoff__nvme_restore(struct hoff__nvme *n, struct hoff__nvme_spill *h, void *dst, size_t len) {
    if (!h || !dst || len != h->len)
        return hoff__error(-EINVAL, "NVMe tier: restore of block %#" PRIx64 ": %zu bytes asked, %zu spilled",
                           h ? h->key : 0, len, h ? h->len : 0);
    return hoff__nvme_restore_cb(n, h, copy_out, dst);
}

void hoff__nvme_drop(struct hoff__nvme *n, struct hoff__nvme_spill *h) {
    uint64_t ext = 0;

    if (!h)
        return;
    if (h->owner != n) {
        HOFF__LOG_ONCE(HOFF_LOG_ERROR, "NVMe tier: drop of a spill this tier does not hold (a bug in hoff)");
        return;
    }
    pthread_mutex_lock(&n->mu);
    for (uint32_t i = 0; i < h->nchunks; i++)
        ext += io_len(chunk_len(n, h, i));
    spill_free_extents(n, h, h->nchunks);
    if (h->prev)
        h->prev->next = h->next;
    else
        n->live = h->next;
    if (h->next)
        h->next->prev = h->prev;
    n->st.bytes_in_use -= h->len;
    n->st.live_spills--;
    n->st.extent_bytes -= ext;
    pthread_mutex_unlock(&n->mu);
    free(h);
}

/* --- accessors -------------------------------------------------------- */

uint64_t hoff__nvme_spill_key(const struct hoff__nvme_spill *h) {
    return h->key;
}

size_t hoff__nvme_spill_len(const struct hoff__nvme_spill *h) {
    return h->len;
}

int hoff__nvme_spill_chunk(const struct hoff__nvme_spill *h, unsigned i, uint64_t *file_off, size_t *len) {
    if (i >= h->nchunks)
        return -ERANGE;
    *file_off = h->c[i].off;
    *len = chunk_len(h->owner, h, i);
    return 0;
}

void hoff__nvme_set_inject(struct hoff__nvme *n, struct hoff__nvme_inject *inject) {
    pthread_mutex_lock(&n->mu);
    n->inj = inject;
    pthread_mutex_unlock(&n->mu);
}

void hoff__nvme_stats(struct hoff__nvme *n, struct hoff__nvme_stats *out) {
    pthread_mutex_lock(&n->mu);
    *out = n->st;
    out->file_bytes = n->file_end;
    pthread_mutex_unlock(&n->mu);
}

const char *hoff__nvme_mode(struct hoff__nvme *n, char *buf, size_t len) {
    pthread_mutex_lock(&n->mu);
    snprintf(buf, len, "%s, %s, %s", n->uring ? (n->fixed ? "io_uring with registered buffers" : "io_uring")
                                              : "pread/pwrite",
             n->odirect ? "O_DIRECT" : "buffered", n->tmpfile ? "O_TMPFILE" : "unlinked named file");
    pthread_mutex_unlock(&n->mu);
    return buf;
}

int hoff__nvme_fd(const struct hoff__nvme *n) {
    return n->fd;
}

void hoff__nvme_staging(const struct hoff__nvme *n, void **ptr, size_t *bytes) {
    *ptr = n->staging;
    *bytes = n->staging_bytes;
}

size_t hoff__nvme_chunk_bytes(const struct hoff__nvme *n) {
    return n->chunk;
}
