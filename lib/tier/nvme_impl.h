/* nvme_impl.h — the NVMe tier's internals shared by its two halves: the spill file and its space (nvme.c: open,
 * close, the extent allocator, spill/restore/drop and their counters) and the I/O engine that moves one call's
 * chunks (nvme_io.c: io_uring or pread/pwrite, CRC32C per chunk, failure injection).
 * Threading: everything here is used under the tier's mutex (struct hoff__nvme's mu). */
#ifndef HOFF_TIER_NVME_IMPL_H
#define HOFF_TIER_NVME_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include "core/core.h"
#include "tier/nvme.h"

#define HOFF__NVME_ALIGN 4096u

struct hoff__nvme_chunk {
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
    struct hoff__nvme_chunk c[];
};

struct hoff__nvme_extent {
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
    int io_einval;          /* the current call failed with a real EINVAL from the I/O itself */
    unsigned char *staging; /* depth * chunk (1 chunk after a ring failure) */
    size_t staging_bytes;
    int nbufs;
    int *bstack;            /* free staging buffers */
    uint32_t *bchunk;       /* chunk each buffer carries */
    unsigned char *retired; /* staging the broken ring may still touch: freed at close */
    size_t retired_bytes;
    int broken_op; /* the ring broke during this call: its file extents are quarantined */
#ifdef HAVE_LIBURING
    struct io_uring ring;
#endif
    struct hoff__nvme_extent *fr; /* free extents, sorted by offset, coalesced */
    size_t nfr, capfr;
    uint64_t file_end;
    int no_fallocate;
    uint64_t next_id;
    struct hoff__nvme_spill *live;
    struct hoff__nvme_stats st;
};

struct hoff__nvme_op {
    struct hoff__nvme_spill *h;
    int write;
    hoff__nvme_copy_fn fn;
    void *arg;
};

static inline size_t hoff__nvme_chunk_len(const struct hoff__nvme *n, const struct hoff__nvme_spill *h, uint32_t i) {
    size_t off = (size_t)i * n->chunk;
    return h->len - off < n->chunk ? h->len - off : n->chunk;
}

static inline size_t hoff__nvme_io_len(size_t clen) {
    return (size_t)hoff__align_up(clen, HOFF__NVME_ALIGN);
}

/* One spill's writes (op->write) or one restore's reads, chunk by chunk through the staging buffers, each chunk
 * checked on the way back.  A real EINVAL from an O_DIRECT file turns O_DIRECT off and runs the call again,
 * once.  0 or -errno with the message set; n->broken_op says the ring broke during the call. */
int hoff__nvme_run_op(struct hoff__nvme *n, struct hoff__nvme_op *op);
/* Bring up the io_uring ring and register the staging buffers; what is unavailable is said once and counted
 * (uring_off, fixed_off), and the tier falls back to pread/pwrite or unregistered buffers. */
void hoff__nvme_setup_uring(struct hoff__nvme *n);

#endif
