/* nvme_io.c — the NVMe tier's I/O engine: one spill's writes or one restore's reads, chunk by chunk, through
 * io_uring (registered staging buffers, up to queue_depth in flight) or pread/pwrite, with a CRC32C per chunk, the
 * fallbacks when the ring or O_DIRECT fails, and the failure injection the tests arm.
 * Threading: every function runs under the tier's mutex, held by the caller (nvme.c) for the whole call. */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* O_DIRECT */
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/stat.h"
#include "tier/crc32c.h"
#include "tier/host.h"
#include "tier/nvme.h"
#include "tier/nvme_impl.h"

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

/* --- one chunk on its way in or out ----------------------------------- */

static int prep_chunk(struct hoff__nvme *n, struct hoff__nvme_op *op, uint32_t i, unsigned char *buf) {
    size_t clen = hoff__nvme_chunk_len(n, op->h, i);
    int rc;

    if (!op->write)
        return 0;
    rc = op->fn(op->arg, (size_t)i * n->chunk, buf, clen);
    if (rc)
        return hoff__error(rc < 0 ? rc : -EIO,
                           "NVMe tier: spill of block %#" PRIx64 ": copying chunk %u into "
                           "staging failed (%s)",
                           op->h->key, i, hoff_strerror(rc < 0 ? rc : -EIO));
    memset(buf + clen, 0, hoff__nvme_io_len(clen) - clen);
    op->h->c[i].crc = chunk_crc(op->h, i, buf, clen);
    return 0;
}

static int finish_chunk(struct hoff__nvme *n, struct hoff__nvme_op *op, uint32_t i, unsigned char *buf) {
    struct hoff__nvme_spill *h = op->h;
    size_t clen = hoff__nvme_chunk_len(n, h, i);
    uint32_t crc;
    int rc;

    if (op->write)
        return 0;
    crc = chunk_crc(h, i, buf, clen);
    if (crc != h->c[i].crc) {
        HOFF__STAT_ADD(&n->st, crc_errors, 1);
        rc = hoff__error(-EBADMSG,
                         "NVMe tier: restore of block %#" PRIx64 ": chunk %u (block offset %zu, %zu bytes, file "
                         "offset %" PRIu64 ") failed its CRC32C check (stored %08x, read %08x); the spill is kept",
                         h->key, i, (size_t)i * n->chunk, clen, h->c[i].off, h->c[i].crc, crc);
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        return rc;
    }
    rc = op->fn(op->arg, (size_t)i * n->chunk, buf, clen);
    if (rc)
        return hoff__error(rc < 0 ? rc : -EIO,
                           "NVMe tier: restore of block %#" PRIx64 ": copying chunk %u out of "
                           "staging failed (%s)",
                           h->key, i, hoff_strerror(rc < 0 ? rc : -EIO));
    return 0;
}

/* The I/O of chunk i ended with res (bytes or -errno). */
static int check_result(struct hoff__nvme *n, struct hoff__nvme_op *op, uint32_t i, int res, size_t len, int injected) {
    const char *what = op->write ? "write" : "read";

    if (res == -EINVAL && !injected)
        n->io_einval = 1;
    if (res < 0)
        return hoff__error(res,
                           "NVMe tier: %s of block %#" PRIx64 " failed: %s of chunk %u (%zu bytes at file "
                           "offset %" PRIu64 " in %s): %s; %s",
                           op->write ? "spill" : "restore", op->h->key, what, i, len, op->h->c[i].off, n->dir,
                           strerror(-res), op->write ? "the block stays on the host" : "the spill is kept");
    if ((size_t)res != len)
        return hoff__error(-EIO,
                           "NVMe tier: %s of block %#" PRIx64 " failed: short %s of chunk %u (%d of %zu bytes "
                           "at file offset %" PRIu64 " in %s); %s",
                           op->write ? "spill" : "restore", op->h->key, what, i, res, len, op->h->c[i].off, n->dir,
                           op->write ? "the block stays on the host" : "the spill is kept");
    return 0;
}

static int submit_error(struct hoff__nvme *n, struct hoff__nvme_op *op, uint32_t i, int rc) {
    return hoff__error(rc, "NVMe tier: %s of block %#" PRIx64 " failed: submitting the %s of chunk %u: %s; %s",
                       op->write ? "spill" : "restore", op->h->key, op->write ? "write" : "read", i, strerror(-rc),
                       op->write ? "the block stays on the host" : "the spill is kept");
}

/* --- pread/pwrite ----------------------------------------------------- */

static int sync_run(struct hoff__nvme *n, struct hoff__nvme_op *op) {
    unsigned char *buf = n->staging;
    int rc, injected;

    if (!buf)
        return hoff__error(-ENOMEM, "NVMe tier: no staging buffer");
    for (uint32_t i = 0; i < op->h->nchunks; i++) {
        size_t len = hoff__nvme_io_len(hoff__nvme_chunk_len(n, op->h, i));
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
    HOFF__STAT_SET(&n->st, uring_off, 1);
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

static int submit_failed(struct hoff__nvme *n, struct hoff__nvme_op *op, int rc) {
    ring_fail(n, rc);
    return hoff__error(rc, "NVMe tier: io_uring_submit failed (%s); block %#" PRIx64 " %s", strerror(-rc), op->h->key,
                       op->write ? "stays on the host" : "is kept on disk");
}

static int uring_run(struct hoff__nvme *n, struct hoff__nvme_op *op) {
    struct hoff__nvme_spill *h = op->h;
    uint32_t next = 0;
    int nfree = n->nbufs, inflight = 0, err = 0, rc;

    for (int b = 0; b < n->nbufs; b++)
        n->bstack[b] = b;
    for (;;) {
        while (!err && next < h->nchunks && nfree > 0) {
            int b = n->bstack[--nfree];
            unsigned char *buf = n->staging + (size_t)b * n->chunk;
            size_t len = hoff__nvme_io_len(hoff__nvme_chunk_len(n, h, next));
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
            len = hoff__nvme_io_len(hoff__nvme_chunk_len(n, h, i));
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
int hoff__nvme_run_op(struct hoff__nvme *n, struct hoff__nvme_op *op) {
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
        HOFF__STAT_SET(&n->st, odirect_off, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: O_DIRECT I/O refused in %s (EINVAL); using buffered I/O", n->dir);
    }
}

void hoff__nvme_setup_uring(struct hoff__nvme *n) {
#ifdef HAVE_LIBURING
    struct iovec *iov;
    int rc;

    rc = n->inj && n->inj->no_uring ? -ENOSYS : io_uring_queue_init((unsigned)n->depth, &n->ring, 0);
    if (rc < 0) {
        HOFF__STAT_SET(&n->st, uring_off, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "NVMe tier: io_uring is unavailable (%s: an old kernel, or seccomp); "
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
        HOFF__STAT_SET(&n->st, fixed_off, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "NVMe tier: cannot register the staging buffers with io_uring (%s; see "
                       "ulimit -l); using unregistered buffers",
                       strerror(-rc));
        return;
    }
    n->fixed = 1;
#else
    HOFF__STAT_SET(&n->st, uring_off, 1);
    HOFF__LOG_ONCE(HOFF_LOG_INFO, "NVMe tier: built without liburing; using pread/pwrite");
#endif
}
