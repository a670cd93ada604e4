/* nvme.h — the NVMe tier: blocks spilled to one unlinked file through io_uring (O_DIRECT, registered staging
 * buffers), chunk by chunk, each chunk checked by CRC32C on the way back.
 * Threading: every call is thread safe; one mutex per tier serialises them (a call holds it for its whole I/O,
 * and copy callbacks run under it: they must not call back into the tier). */
#ifndef HOFF_TIER_NVME_H
#define HOFF_TIER_NVME_H

#include <stddef.h>
#include <stdint.h>

struct hoff__host_tier;
struct hoff__nvme;
struct hoff__nvme_spill;

/* Failure injection (tests).  Compiled in always; the tier reads it under its mutex, so set it between calls.
 * A "submission" is one I/O request handed to the kernel (an SQE, or a pread/pwrite call in the fallback); a
 * "completion" is its result (a CQE, or the call's return).  Both are counted from 1 since the counters were
 * last zeroed; each armed failure fires once and then disarms itself. */
struct hoff__nvme_inject {
    /* armed by the test */
    unsigned fail_submit;   /* fail the Nth submission (it never reaches the kernel); 0 = never */
    int submit_err;         /* ... with this errno (positive, e.g. ENOSPC) */
    unsigned fail_complete; /* fail the Nth completion (the I/O did happen); 0 = never */
    int complete_err;       /* ... with this errno, or 0: a short count (half the bytes) instead */
    int no_odirect;         /* open: O_DIRECT is refused with EINVAL */
    int no_uring;           /* open: io_uring_queue_init fails (ENOSYS) */
    int no_register;        /* open: io_uring_register_buffers fails (ENOMEM) */
    int no_tmpfile;         /* open: O_TMPFILE is not supported (EOPNOTSUPP) */
    int disk_full;          /* while set: growing the file fails with ENOSPC, as on a full disk (freed
                               extents are still reused); counted in `fired` each time */
    /* counted by the tier */
    unsigned submits, completions; /* seen since the test last zeroed them */
    unsigned fired;                /* armed failures that fired */
};

/* Counters (under the tier's mutex; snapshot with hoff__nvme_stats). */
struct hoff__nvme_stats {
    uint64_t spills, bytes_spilled, spill_ns;      /* successful spills, their bytes, time in them */
    uint64_t restores, bytes_restored, restore_ns; /* successful restores */
    uint64_t failures;                             /* spills + restores that failed (source kept) */
    uint64_t spill_failures, restore_failures;
    uint64_t crc_errors;         /* chunks whose CRC32C did not match */
    uint64_t odirect_off;        /* 1: O_DIRECT was refused, buffered I/O */
    uint64_t uring_off;          /* 1: io_uring unavailable, pread/pwrite */
    uint64_t fixed_off;          /* 1: buffers not registered, plain READ/WRITE ops */
    uint64_t bytes_in_use, peak; /* bytes of live spills (as given), highest seen */
    uint64_t live_spills;        /* spills not yet dropped */
    uint64_t extent_bytes;       /* file bytes held by live spills (4 KiB padded) */
    uint64_t file_bytes;         /* size of the spill file now */
    uint64_t quarantined_bytes;  /* file bytes never reused after a broken ring */
};

/* Copy callbacks: move len bytes between the block at byte `offset` and a staging buffer (page-aligned, from
 * the registered set: the cuda backend may cudaHostRegister hoff__nvme_staging's region and cudaMemcpy).  They
 * must finish the copy before returning.  0 or -errno (which aborts the call, keeping the data where it was). */
typedef int (*hoff__nvme_copy_fn)(void *arg, size_t offset, void *staging, size_t len);

/* Open the tier: ONE file in dir, created unlinked (O_TMPFILE, mode 0600; if the filesystem has no O_TMPFILE,
 * a named 0600 file unlinked at once, said once) with O_DIRECT (where refused with EINVAL: buffered I/O, said
 * once).  chunk_bytes: the I/O size, a multiple of 4096 (65536 .. 1 GiB in production; tests go down to 4096).
 * queue_depth: requests in flight, 8 .. 4096; also the number of staging buffers (chunk_bytes each), bound to
 * the host tier's node when host != NULL.  inject: NULL, or a test's failure hooks (kept, not copied).
 * Without io_uring (liburing missing, io_uring_queue_init failing: old kernel, seccomp): pread/pwrite, said
 * once.  Returns 0, -EINVAL (bad argument; the message names HOFF_SPILL_DIR / HOFF_SPILL_CHUNK /
 * HOFF_IO_DEPTH), -errno from open (ENOENT, EACCES, ...), -ENOMEM. */
int hoff__nvme_open(struct hoff__nvme **out, const char *dir, size_t chunk_bytes, int queue_depth,
                    struct hoff__host_tier *host, struct hoff__nvme_inject *inject);
/* Close the file (its space goes back to the filesystem) and free everything.  Live spills are dropped (their
 * handles freed too: do not use them afterwards). */
void hoff__nvme_close(struct hoff__nvme *n);

/* Spill len bytes (len >= 1) from src, tagged key (the block: named in error messages).  Chunk by chunk:
 * copy into staging, CRC32C, write; up to queue_depth writes in flight.  On success *out is the handle.  On any
 * failure (ENOSPC, EIO, a short write, a failed submission) returns -errno with src untouched (the caller keeps
 * the block on the host), nothing left allocated in the file, and the failure counted; *out is NULL. */
int hoff__nvme_spill(struct hoff__nvme *n, const void *src, size_t len, uint64_t key, struct hoff__nvme_spill **out);
/* The same with a callback that fills each chunk's staging buffer (offset, len within the block). */
int hoff__nvme_spill_cb(struct hoff__nvme *n, size_t len, uint64_t key, hoff__nvme_copy_fn fill, void *arg,
                        struct hoff__nvme_spill **out);

/* Read a spill back into dst (len must be the spilled length: -EINVAL otherwise).  Every chunk is read into
 * staging and its CRC32C verified before it is copied into dst; only verified bytes are ever copied.  Returns
 * 0, or -errno (EIO, a short read, ...) or -EBADMSG (a CRC mismatch: the message names the key, the chunk and
 * its file offset; crc_errors counted).  On failure the spill stays intact, so the call can be retried, and
 * dst's contents are undefined (some verified chunks may have been copied). */
int hoff__nvme_restore(struct hoff__nvme *n, struct hoff__nvme_spill *h, void *dst, size_t len);
/* The same with a callback that takes each verified chunk out of staging (in completion order). */
int hoff__nvme_restore_cb(struct hoff__nvme *n, struct hoff__nvme_spill *h, hoff__nvme_copy_fn copy, void *arg);

/* Free a spill's extents and its handle (h may be NULL). */
void hoff__nvme_drop(struct hoff__nvme *n, struct hoff__nvme_spill *h);

/* A spill's key and length. */
uint64_t hoff__nvme_spill_key(const struct hoff__nvme_spill *h);
size_t hoff__nvme_spill_len(const struct hoff__nvme_spill *h);
/* Chunk i of a spill: where it is in the file and how many bytes of the block it holds (tests).  -ERANGE if
 * there is no chunk i. */
int hoff__nvme_spill_chunk(const struct hoff__nvme_spill *h, unsigned i, uint64_t *file_off, size_t *len);

/* Arm (or, with NULL, disarm) failure injection on an open tier (tests: the tier of a live context); the
 * pointer is kept, not copied, and read under the tier's mutex. */
void hoff__nvme_set_inject(struct hoff__nvme *n, struct hoff__nvme_inject *inject);

void hoff__nvme_stats(struct hoff__nvme *n, struct hoff__nvme_stats *out);
/* "io_uring, O_DIRECT, registered buffers", "pread/pwrite, buffered", ... */
const char *hoff__nvme_mode(struct hoff__nvme *n, char *buf, size_t len);
/* The spill file's descriptor (tests: fstat, corrupt a chunk, /proc/self/fd). */
int hoff__nvme_fd(const struct hoff__nvme *n);
/* The staging region (queue_depth * chunk_bytes bytes), for a backend that pins it. */
void hoff__nvme_staging(const struct hoff__nvme *n, void **ptr, size_t *bytes);
size_t hoff__nvme_chunk_bytes(const struct hoff__nvme *n);

#endif
