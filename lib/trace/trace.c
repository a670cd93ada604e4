/* trace.c — the trace IR: appending and validating events, interning op names, deriving per-block facts
 * (hoff__trace_finish) and the no-offload peak of offload-candidate bytes.
 * Threading: a trace is owned by one thread at a time; nothing here locks. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "trace/trace.h"

/* Sizes of allocations are > 0 and below this (the reader checks the same). */
#define TRACE_SIZE_LIMIT ((uint64_t)1 << 47)
/* Event indices and block ids are uint32 with UINT32_MAX meaning "none". */
#define TRACE_INDEX_LIMIT (UINT32_MAX - 2u)

/*
 * Builder state.  trace.h has no fields for it, so it lives in memory this
 * file owns:
 *
 * - blocks[] is kept current by hoff__trace_append (size, pool, pinned,
 *   alloc_ev, and free_ev: UINT32_MAX while the block is live), so append can
 *   check frees and accesses in O(1), and the reader can say why an id is
 *   wrong.  One scratch entry past the end, blocks[nblocks], holds the number
 *   of open regions (alloc_ev) and the number of entries allocated (naccess).
 *   finish keeps it.
 * - names[] is allocated with cap_names pointers followed by an open-address
 *   hash of 2 * cap_names uint32 slots (index + 1, 0 = empty) so interning is
 *   O(1).
 *
 * So blocks[] and names[] must only be grown by this file (hoff__trace_append,
 * hoff__trace_name, hoff__trace_finish), never by hand.
 */

static struct hoff__tblock *scratch(const struct hoff__trace *t) {
    return t->blocks ? &t->blocks[t->nblocks] : NULL;
}

/* Make room for `more` more blocks and the scratch entry (whose naccess holds the capacity, at most UINT32_MAX:
 * an array grown past that records UINT32_MAX and never uses the rest). */
static int blocks_reserve(struct hoff__trace *t, uint32_t more) {
    struct hoff__tblock *s = scratch(t);
    uint64_t need = (uint64_t)t->nblocks + more + 1;
    size_t cap = s ? s->naccess : 0;

    if (need <= cap)
        return 0;
    if (need > UINT32_MAX)
        return hoff__error(-ERANGE, "trace: too many blocks (%u)", t->nblocks);
    if (HOFF__GROW(t->blocks, cap, (size_t)need))
        return hoff__error(-ENOMEM, "trace: out of memory for %llu blocks", (unsigned long long)need);
    if (!s) /* the first: no scratch entry yet */
        memset(&t->blocks[t->nblocks], 0, sizeof t->blocks[t->nblocks]);
    t->blocks[t->nblocks].naccess = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    return 0;
}

/* Make room for one more event (the caller keeps nev under TRACE_INDEX_LIMIT). */
static int events_reserve(struct hoff__trace *t) {
    if (HOFF__GROW(t->ev, t->cap_ev, t->nev + 1))
        return hoff__error(-ENOMEM, "trace: out of memory for %zu events", t->nev + 1);
    return 0;
}

void hoff__trace_init(struct hoff__trace *t) {
    memset(t, 0, sizeof *t);
    t->version = HOFF__TRACE_VERSION;
}

void hoff__trace_destroy(struct hoff__trace *t) {
    uint32_t i;

    for (i = 0; i < t->nnames; i++)
        free(t->names[i]);
    free(t->names);
    free(t->ev);
    free(t->blocks);
    free(t->acc);
    hoff__trace_init(t);
}

static int block_live(const struct hoff__trace *t, uint32_t b) {
    return b < t->nblocks && t->blocks[b].free_ev == UINT32_MAX;
}

/* Append, first phase: check e against the trace so far and fill *evp with the normalized copy to store; makes
 * room for the block an allocation adds (and the scratch entry).  0 or -errno (the events and blocks as they
 * were). */
static int append_check(struct hoff__trace *t, const struct hoff__tev *e, struct hoff__tev *evp) {
    struct hoff__tev ev;
    int err;

    /* Store a normalized copy: fields that do not apply to the kind are zero
     * (name: UINT32_MAX), so a trace round-trips through its file exactly. */
    memset(&ev, 0, sizeof ev);
    ev.kind = e->kind;
    ev.name = UINT32_MAX;
    ev.t_cpu_ns = e->t_cpu_ns;
    ev.t_gpu_ns = e->t_gpu_ns;
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        if (e->block != t->nblocks)
            return hoff__error(-EINVAL, "trace: allocation of block %u, expected id %u (ids are dense)", e->block,
                               t->nblocks);
        if (e->size == 0 || e->size >= TRACE_SIZE_LIMIT)
            return hoff__error(-EINVAL, "trace: allocation of block %u has size %llu (must be 1 to 2^47-1)", e->block,
                               (unsigned long long)e->size);
        if (e->pool > 1)
            return hoff__error(-EINVAL, "trace: allocation of block %u in pool %u (0 or 1)", e->block, e->pool);
        if (t->nblocks >= TRACE_INDEX_LIMIT)
            return hoff__error(-ERANGE, "trace: too many blocks (%u)", t->nblocks);
        ev.block = e->block;
        ev.size = e->size;
        ev.pool = e->pool;
        ev.stream = e->stream;
        ev.flags = e->flags & (HOFF__TEV_PINNED | HOFF__TEV_KEPT);
        if ((err = blocks_reserve(t, 1)) < 0)
            return err;
        if (scratch(t)->alloc_ev > 0)
            ev.flags |= HOFF__TEV_PINNED;
        break;
    case HOFF__TEV_FREE:
    case HOFF__TEV_ACCESS:
        if (!block_live(t, e->block))
            return hoff__error(-EINVAL, "trace: %s of block %u, which is %s",
                               e->kind == HOFF__TEV_FREE ? "free" : "access", e->block,
                               e->block < t->nblocks ? "already freed" : "not allocated");
        ev.block = e->block;
        ev.stream = e->stream;
        if (e->kind == HOFF__TEV_ACCESS)
            ev.flags = e->flags & HOFF__TEV_WRITE;
        break;
    case HOFF__TEV_OP:
        if (e->name != UINT32_MAX && e->name >= t->nnames)
            return hoff__error(-EINVAL, "trace: op name %u out of range (%u names)", e->name, t->nnames);
        if (hoff__tev_phase(e) >= HOFF_PHASE_COUNT)
            return hoff__error(-EINVAL, "trace: op with phase %u (0 to %u)", hoff__tev_phase(e), HOFF_PHASE_COUNT - 1);
        ev.name = e->name;
        ev.flags = e->flags & HOFF__TEV_PHASE_MASK;
        break;
    case HOFF__TEV_REGION_BEGIN:
        if ((err = blocks_reserve(t, 0)) < 0)
            return err;
        if (scratch(t)->alloc_ev >= TRACE_INDEX_LIMIT)
            return hoff__error(-ERANGE, "trace: regions nested too deep");
        break;
    case HOFF__TEV_REGION_END:
        if (!t->blocks || scratch(t)->alloc_ev == 0)
            return hoff__error(-EINVAL, "trace: region end without a region begin");
        break;
    default: return hoff__error(-EINVAL, "trace: unknown event kind %u", e->kind);
    }
    *evp = ev;
    return 0;
}

/* Append, last phase: the checked event ev goes in, and the block facts and region depth it changes with it. */
static void append_commit(struct hoff__trace *t, const struct hoff__tev *ev) {
    struct hoff__tblock *s;

    switch (ev->kind) {
    case HOFF__TEV_ALLOC:
        s = scratch(t);
        t->blocks[t->nblocks + 1] = *s;
        s->size = ev->size;
        s->kept = !!(ev->flags & HOFF__TEV_KEPT);
        s->pool = s->kept ? 0 : ev->pool;
        s->pinned = !!(ev->flags & HOFF__TEV_PINNED);
        s->retained = 0;
        s->alloc_ev = (uint32_t)t->nev;
        s->free_ev = UINT32_MAX;
        s->first_access = 0;
        s->naccess = 0;
        t->nblocks++;
        break;
    case HOFF__TEV_FREE: t->blocks[ev->block].free_ev = (uint32_t)t->nev; break;
    case HOFF__TEV_ACCESS: t->has_access_events = 1; break;
    case HOFF__TEV_REGION_BEGIN: scratch(t)->alloc_ev++; break;
    case HOFF__TEV_REGION_END: scratch(t)->alloc_ev--; break;
    }
    t->ev[t->nev++] = *ev;
}

int hoff__trace_append(struct hoff__trace *t, const struct hoff__tev *e) {
    struct hoff__tev ev;
    int err;

    if (t->nev >= TRACE_INDEX_LIMIT)
        return hoff__error(-ERANGE, "trace: too many events (%zu)", t->nev);
    if ((err = append_check(t, e, &ev)) < 0 || (err = events_reserve(t)) < 0)
        return err;
    append_commit(t, &ev);
    return 0;
}

/* --- op names ------------------------------------------------------------ */

static uint32_t *name_hash(const struct hoff__trace *t) {
    return (uint32_t *)(void *)(t->names + t->cap_names);
}

static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void hash_insert(struct hoff__trace *t, uint32_t idx) {
    uint32_t *h = name_hash(t), mask = 2 * t->cap_names - 1, i = hash_str(t->names[idx]) & mask;

    while (h[i])
        i = (i + 1) & mask;
    h[i] = idx + 1;
}

uint32_t hoff__trace_name(struct hoff__trace *t, const char *name) {
    uint32_t i, mask, *h;
    char *copy;

    if (!name)
        return UINT32_MAX;
    if (t->names) {
        h = name_hash(t);
        mask = 2 * t->cap_names - 1;
        for (i = hash_str(name) & mask; h[i]; i = (i + 1) & mask)
            if (strcmp(t->names[h[i] - 1], name) == 0)
                return h[i] - 1;
    }
    if (t->nnames >= TRACE_INDEX_LIMIT) {
        hoff__error(-ERANGE, "trace: too many op names");
        return UINT32_MAX;
    }
    if (t->nnames >= t->cap_names) {
        /* an entry is a pointer and its two hash slots; the hash is rebuilt at the new size */
        size_t ncap = t->cap_names;
        void *nn = t->names;

        if (t->cap_names > (1u << 27)) { /* it would double past 2^28 */
            hoff__error(-ERANGE, "trace: too many op names");
            return UINT32_MAX;
        }
        if (hoff__grow(&nn, &ncap, (size_t)t->nnames + 1, sizeof(char *) + 2 * sizeof(uint32_t))) {
            hoff__error(-ENOMEM, "trace: out of memory for op names");
            return UINT32_MAX;
        }
        t->names = nn;
        t->cap_names = (uint32_t)ncap;
        memset(name_hash(t), 0, ncap * 2 * sizeof(uint32_t));
        for (i = 0; i < t->nnames; i++)
            hash_insert(t, i);
    }
    copy = strdup(name);
    if (!copy) {
        hoff__error(-ENOMEM, "trace: out of memory for op names");
        return UINT32_MAX;
    }
    t->names[t->nnames] = copy;
    hash_insert(t, t->nnames);
    return t->nnames++;
}

/* --- finish ---------------------------------------------------------------- */

/* Finish, pass 1: per-block facts, region nesting, pinning, and the access counts (per block in naccess, the
 * allocation counting as one; *nacc_out their sum).  0 or -EINVAL when the events do not hold together. */
static int finish_blocks(struct hoff__trace *t, size_t *nacc_out) {
    uint32_t nalloc = 0, depth = 0;
    size_t i, nacc = 0, last_begin = 0;

    t->has_access_events = 0;
    t->has_op_events = 0;
    for (i = 0; i < t->nev; i++) {
        struct hoff__tev *e = &t->ev[i];
        struct hoff__tblock *bl;

        switch (e->kind) {
        case HOFF__TEV_ALLOC:
            if (e->block != nalloc || nalloc >= t->nblocks)
                return hoff__error(-EINVAL, "trace: event %zu allocates block %u, expected %u (of %u)", i, e->block,
                                   nalloc, t->nblocks);
            if (depth)
                e->flags |= HOFF__TEV_PINNED;
            bl = &t->blocks[nalloc++];
            bl->size = e->size;
            bl->kept = !!(e->flags & HOFF__TEV_KEPT);
            bl->pool = bl->kept ? 0 : e->pool; /* kept: the plan counts it as device memory */
            bl->pinned = !!(e->flags & HOFF__TEV_PINNED);
            bl->alloc_ev = (uint32_t)i;
            bl->free_ev = UINT32_MAX;
            bl->naccess = 1;
            nacc++;
            break;
        case HOFF__TEV_FREE:
        case HOFF__TEV_ACCESS:
            if (e->block >= nalloc || t->blocks[e->block].free_ev != UINT32_MAX)
                return hoff__error(-EINVAL, "trace: event %zu %s block %u, which is not live", i,
                                   e->kind == HOFF__TEV_FREE ? "frees" : "accesses", e->block);
            if (e->kind == HOFF__TEV_FREE) {
                t->blocks[e->block].free_ev = (uint32_t)i;
            } else {
                t->blocks[e->block].naccess++;
                t->has_access_events = 1;
                nacc++;
            }
            break;
        case HOFF__TEV_OP: t->has_op_events = 1; break;
        case HOFF__TEV_REGION_BEGIN:
            if (depth++ == 0)
                last_begin = i;
            break;
        case HOFF__TEV_REGION_END:
            if (depth == 0)
                return hoff__error(-EINVAL, "trace: event %zu ends a region that was never begun", i);
            depth--;
            break;
        default: break;
        }
    }
    scratch(t)->alloc_ev = depth;
    if (nalloc != t->nblocks)
        return hoff__error(-EINVAL, "trace: %u blocks but %u allocation events", t->nblocks, nalloc);
    if (depth)
        return hoff__error(-EINVAL,
                           "trace: unbalanced regions: %u still open at the end of the step "
                           "(the outermost begins at event %zu)",
                           depth, last_begin);
    *nacc_out = nacc;
    return 0;
}

/* Finish, pass 2's last part: the accesses in acc (each block's range set up, its naccess 0), in event order,
 * each with its use window's close: the first op mark after it, or the block's free, or the step's end
 * (doc/design.md, "Use windows").  0 or -ENOMEM. */
static int finish_windows(struct hoff__trace *t, struct hoff__tacc *acc, size_t nacc) {
    uint32_t *pend, npend = 0;
    size_t i;

    /* pend holds the accesses whose window is still open. */
    pend = nacc ? malloc(nacc * sizeof *pend) : NULL;
    if (nacc && !pend)
        return hoff__error(-ENOMEM, "trace: out of memory for %zu accesses", nacc);
    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];
        struct hoff__tblock *bl;
        struct hoff__tacc *a;
        uint32_t j;

        if (e->kind == HOFF__TEV_OP) {
            for (j = 0; j < npend; j++)
                if (acc[pend[j]].close == UINT32_MAX)
                    acc[pend[j]].close = (uint32_t)i;
            npend = 0;
            continue;
        }
        if (e->kind == HOFF__TEV_FREE) {
            bl = &t->blocks[e->block];
            for (j = bl->naccess; j-- > 0 && acc[bl->first_access + j].close == UINT32_MAX;)
                acc[bl->first_access + j].close = (uint32_t)i;
            continue;
        }
        if (e->kind != HOFF__TEV_ALLOC && e->kind != HOFF__TEV_ACCESS)
            continue;
        bl = &t->blocks[e->block];
        a = &acc[bl->first_access + bl->naccess];
        a->ev = (uint32_t)i;
        a->write = e->kind == HOFF__TEV_ALLOC || (e->flags & HOFF__TEV_WRITE);
        a->close = UINT32_MAX;
        pend[npend++] = bl->first_access + bl->naccess;
        bl->naccess++;
    }
    for (i = 0; i < npend; i++)
        if (acc[pend[i]].close == UINT32_MAX)
            acc[pend[i]].close = (uint32_t)t->nev; /* retained: open to the step's end */
    free(pend);
    return 0;
}

int hoff__trace_finish(struct hoff__trace *t) {
    uint32_t b;
    size_t nacc = 0;
    struct hoff__tacc *acc;
    int err;

    if ((err = blocks_reserve(t, 0)) < 0 || (err = finish_blocks(t, &nacc)) < 0)
        return err;

    /* Pass 2: retained blocks, access ranges, and the accesses themselves. */
    acc = nacc ? realloc(t->acc, nacc * sizeof *acc) : (free(t->acc), NULL);
    if (nacc && !acc)
        return hoff__error(-ENOMEM, "trace: out of memory for %zu accesses", nacc);
    t->acc = acc;
    t->nacc = nacc;
    nacc = 0;
    for (b = 0; b < t->nblocks; b++) {
        struct hoff__tblock *bl = &t->blocks[b];

        bl->retained = bl->free_ev == UINT32_MAX;
        bl->first_access = (uint32_t)nacc;
        nacc += bl->naccess;
        bl->naccess = 0;
    }
    if ((err = finish_windows(t, acc, nacc)) < 0)
        return err;
    /* A step without any access mark says nothing of when its blocks are
     * used: every allocation's window lasts until the free (or the step's
     * end), as the runtime keeps it (residency.c). */
    if (!t->has_access_events)
        for (b = 0; b < t->nblocks; b++)
            acc[t->blocks[b].first_access].close = t->blocks[b].retained ? (uint32_t)t->nev : t->blocks[b].free_ev;
    return 0;
}

/* --- peak ------------------------------------------------------------------ */

/* A block counts from its alloc event through its free event (inclusive), so
 * the peak can only rise at an allocation; *at_ev is the first event where it
 * is reached (0 when there are no counted bytes). */
uint64_t hoff__trace_peak(const struct hoff__trace *t, uint64_t (*bytes)(int pool, uint64_t size), unsigned pools,
                          size_t *at_ev) {
    uint64_t cur = 0, peak = 0;
    size_t i, at = 0;

    for (i = 0; i < t->nev; i++) {
        const struct hoff__tev *e = &t->ev[i];

        if (e->kind == HOFF__TEV_ALLOC && e->block < t->nblocks) {
            unsigned pool = t->blocks[e->block].pool; /* a kept block counts as device memory */

            if (pools & (1u << pool)) {
                cur += bytes ? bytes(pool, e->size) : e->size;
                if (cur > peak) {
                    peak = cur;
                    at = i;
                }
            }
        } else if (e->kind == HOFF__TEV_FREE && e->block < t->nblocks) {
            const struct hoff__tev *a = &t->ev[t->blocks[e->block].alloc_ev];
            unsigned pool = t->blocks[e->block].pool;

            if (pools & (1u << pool))
                cur -= bytes ? bytes(pool, a->size) : a->size;
        }
    }
    if (at_ev)
        *at_ev = at;
    return peak;
}

uint64_t hoff__trace_offload_peak(const struct hoff__trace *t, uint64_t (*bytes)(int pool, uint64_t size),
                                  size_t *at_ev) {
    return hoff__trace_peak(t, bytes, HOFF__POOLS_MANAGED, at_ev);
}

/* --- names and copies ------------------------------------------------------ */

const char *hoff__tev_kind_name(const struct hoff__tev *e) {
    static const char *const names[HOFF__TEV_KIND_COUNT] = {
        [HOFF__TEV_ALLOC] = "alloc",
        [HOFF__TEV_FREE] = "free",
        [HOFF__TEV_ACCESS] = "read",
        [HOFF__TEV_OP] = "op",
        [HOFF__TEV_REGION_BEGIN] = "region_begin",
        [HOFF__TEV_REGION_END] = "region_end",
    };

    if (e->kind == HOFF__TEV_ACCESS && (e->flags & HOFF__TEV_WRITE))
        return "write";
    return e->kind < HOFF__TEV_KIND_COUNT ? names[e->kind] : "?";
}

const char *hoff__tev_op_name(const struct hoff__trace *t, const struct hoff__tev *e) {
    return e->name != UINT32_MAX && e->name < t->nnames ? t->names[e->name] : "";
}

int hoff__trace_copy_header(struct hoff__trace *dst, const struct hoff__trace *src) {
    uint32_t i;

    for (i = 0; i < src->nnames; i++)
        if (hoff__trace_name(dst, src->names[i]) != i)
            return -ENOMEM;
    dst->budget_bytes = src->budget_bytes;
    dst->host_cap_bytes = src->host_cap_bytes;
    dst->h2d_gbps = src->h2d_gbps;
    dst->d2h_gbps = src->d2h_gbps;
    dst->step_ns = src->step_ns;
    dst->step_gpu_ns = src->step_gpu_ns;
    memcpy(dst->backend, src->backend, sizeof dst->backend);
    return 0;
}

int hoff__trace_copy(struct hoff__trace *dst, const struct hoff__trace *src) {
    size_t i;
    int rc;

    hoff__trace_init(dst);
    if ((rc = hoff__trace_copy_header(dst, src)) != 0)
        return rc;
    for (i = 0; i < src->nev; i++)
        if ((rc = hoff__trace_append(dst, &src->ev[i])) != 0)
            return rc;
    return hoff__trace_finish(dst);
}

/* --- phases ---------------------------------------------------------------- */

static const char *const phase_words[HOFF_PHASE_COUNT] = {"", "fwd", "bwd", "loss", "opt"};

const char *hoff__trace_phase_word(unsigned phase) {
    return phase < HOFF_PHASE_COUNT ? phase_words[phase] : "";
}

int hoff__trace_phase_of_word(const char *w, size_t n) {
    int i;

    for (i = 1; i < HOFF_PHASE_COUNT; i++)
        if (strlen(phase_words[i]) == n && memcmp(phase_words[i], w, n) == 0)
            return i;
    return -1;
}
