/* nvme.c — the NVMe tier's spill file and its space: one unlinked O_TMPFILE file (O_DIRECT where allowed), a
 * chunk-granular extent allocator over it, the spill / restore / drop calls with their counters, and open/close.
 * The chunks' I/O is nvme_io.c's.  Threading: one mutex per tier, held for a whole call. */
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
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/grow.h"
#include "core/stat.h"
#include "tier/host.h"
#include "tier/nvme.h"
#include "tier/nvme_impl.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
        if (HOFF__GROW(n->fr, n->capfr, n->nfr + 1)) { /* leak the extent rather than fail a free */
            HOFF__STAT_ADD(&n->st, quarantined_bytes, len);
            return;
        }
        memmove(&n->fr[lo + 1], &n->fr[lo], (n->nfr - lo) * sizeof *n->fr);
        n->fr[lo] = (struct hoff__nvme_extent){off, len};
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
        ext_free(n, h->c[i].off, hoff__nvme_io_len(hoff__nvme_chunk_len(n, h, i)));
}

/* --- open / close ----------------------------------------------------- */

/* The file system at dir refused O_DIRECT for the new spill file: it is
 * buffered, counted (odirect_off) and said once. */
static void odirect_refused(struct hoff__nvme *n, const char *dir) {
    HOFF__STAT_SET(&n->st, odirect_off, 1);
    HOFF__LOG_ONCE(HOFF_LOG_WARN, "NVMe tier: %s refuses O_DIRECT; spilling through the page cache (buffered I/O)",
                   dir);
}

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
        if (fd >= 0)
            odirect_refused(n, dir);
    }
    n->tmpfile = fd >= 0;
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        /* no O_TMPFILE here: a named file, unlinked at once */
        char path[512];

        snprintf(path, sizeof path, "%s/.hoff-spill-XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0) {
            unlink(path);
            HOFF__LOG_ONCE(HOFF_LOG_WARN,
                           "NVMe tier: %s has no O_TMPFILE; the spill file is a named file "
                           "unlinked right after creation",
                           dir);
            n->odirect = 0;
            if (!(n->inj && n->inj->no_odirect)) {
                int fl = fcntl(fd, F_GETFL);
                n->odirect = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
            }
            if (!n->odirect)
                odirect_refused(n, dir);
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
    if (chunk_bytes == 0 || chunk_bytes % HOFF__NVME_ALIGN || chunk_bytes > ((size_t)1 << 30))
        return hoff__error(-EINVAL,
                           "HOFF_SPILL_CHUNK=%zu: the NVMe chunk must be a multiple of 4096 between 4K "
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
        rc = hoff__error(-ENOMEM,
                         "NVMe tier: cannot allocate %s of staging buffers (HOFF_IO_DEPTH x "
                         "HOFF_SPILL_CHUNK)",
                         hoff__fmt_size(n->staging_bytes, b, sizeof b));
        goto fail;
    }
    hoff__nvme_setup_uring(n);
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
    struct hoff__nvme_op op;
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
        uint64_t l = hoff__nvme_io_len(hoff__nvme_chunk_len(n, h, i));
        if ((rc = ext_alloc(n, l, &h->c[i].off)) != 0) {
            spill_free_extents(n, h, i);
            goto fail;
        }
        ext += l;
    }
    t0 = now_ns();
    op = (struct hoff__nvme_op){.h = h, .write = 1, .fn = fill, .arg = arg};
    rc = hoff__nvme_run_op(n, &op);
    if (rc) {
        if (n->broken_op)
            HOFF__STAT_ADD(&n->st, quarantined_bytes, ext);
        else
            spill_free_extents(n, h, h->nchunks);
        goto fail;
    }
    HOFF__STAT_ADD(&n->st, spills, 1);
    HOFF__STAT_ADD(&n->st, bytes_spilled, len);
    HOFF__STAT_ADD(&n->st, spill_ns, now_ns() - t0);
    HOFF__STAT_ADD(&n->st, bytes_in_use, len);
    if (n->st.bytes_in_use > n->st.peak)
        HOFF__STAT_SET(&n->st, peak, n->st.bytes_in_use);
    HOFF__STAT_ADD(&n->st, live_spills, 1);
    HOFF__STAT_ADD(&n->st, extent_bytes, ext);
    h->next = n->live;
    if (n->live)
        n->live->prev = h;
    n->live = h;
    pthread_mutex_unlock(&n->mu);
    *out = h;
    return 0;
fail:
    HOFF__STAT_ADD(&n->st, failures, 1);
    HOFF__STAT_ADD(&n->st, spill_failures, 1);
    pthread_mutex_unlock(&n->mu);
    HOFF__LOG_ONCE(HOFF_LOG_WARN, "%s (this is said once; failures are counted)", hoff_last_error());
    free(h);
    return rc;
}

int hoff__nvme_spill(struct hoff__nvme *n, const void *src, size_t len, uint64_t key, struct hoff__nvme_spill **out) {
    if (!src) {
        *out = NULL;
        return hoff__error(-EINVAL, "NVMe tier: spill of block %#" PRIx64 ": no source", key);
    }
    return hoff__nvme_spill_cb(n, len, key, copy_in, (void *)src, out);
}

int hoff__nvme_restore_cb(struct hoff__nvme *n, struct hoff__nvme_spill *h, hoff__nvme_copy_fn copy, void *arg) {
    struct hoff__nvme_op op;
    uint64_t t0;
    int rc;

    if (!h || h->owner != n || !copy)
        return hoff__error(-EINVAL, "NVMe tier: restore of a spill this tier does not hold");
    pthread_mutex_lock(&n->mu);
    t0 = now_ns();
    op = (struct hoff__nvme_op){.h = h, .write = 0, .fn = copy, .arg = arg};
    rc = hoff__nvme_run_op(n, &op);
    if (rc) {
        HOFF__STAT_ADD(&n->st, failures, 1);
        HOFF__STAT_ADD(&n->st, restore_failures, 1);
    } else {
        HOFF__STAT_ADD(&n->st, restores, 1);
        HOFF__STAT_ADD(&n->st, bytes_restored, h->len);
        HOFF__STAT_ADD(&n->st, restore_ns, now_ns() - t0);
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
        ext += hoff__nvme_io_len(hoff__nvme_chunk_len(n, h, i));
    spill_free_extents(n, h, h->nchunks);
    if (h->prev)
        h->prev->next = h->next;
    else
        n->live = h->next;
    if (h->next)
        h->next->prev = h->prev;
    HOFF__STAT_SUB(&n->st, bytes_in_use, h->len);
    HOFF__STAT_SUB(&n->st, live_spills, 1);
    HOFF__STAT_SUB(&n->st, extent_bytes, ext);
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
    *len = hoff__nvme_chunk_len(h->owner, h, i);
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
    snprintf(buf, len, "%s, %s, %s",
             n->uring ? (n->fixed ? "io_uring with registered buffers" : "io_uring") : "pread/pwrite",
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
