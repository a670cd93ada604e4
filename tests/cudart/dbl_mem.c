/* dbl_mem.c — the CUDA runtime double's memory: allocations (all real host memory), managed
 * residency per 2 MiB page (device / host / discarded), driver-style LRU eviction under pressure
 * (cudaMalloc, prefetch, kernel faults), lazy reclaim of discarded pages, poisoning on discard,
 * the race check of discards against declared accesses (vector-clock epochs per page), and of
 * discards against prefetches of the same bytes on other streams.
 * Threading: called with G.lock held; dbl_run_move / dbl_run_kernel drop it while they sleep for
 * the modelled transfer time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dbl.h"

struct dbl_alloc *dbl_alloc_find(const void *p) {
    return dbl_set_find(&G.allocs, (uintptr_t)p, NULL);
}

/* A phrase for a pointer that is no live allocation: freed, or foreign. */
const char *dbl_ptr_what(const void *p) {
    return dbl_set_find(&G.freed, (uintptr_t)p, NULL) ? "memory already freed (cudaFree)"
                                                      : "not memory the CUDA runtime allocated";
}

size_t dbl_page_bytes(const struct dbl_alloc *a, size_t i) {
    size_t off = i * DBL_PAGE;

    return a->size - off < DBL_PAGE ? a->size - off : DBL_PAGE;
}

struct dbl_alloc *dbl_alloc_new(enum dbl_kind kind, size_t size, int dev) {
    size_t align = kind == DBL_MANAGED ? DBL_PAGE : 4096, map;
    struct dbl_alloc *a;
    char *raw, *base;

    map = (size + 4095) / 4096 * 4096;
    raw = mmap(NULL, map + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    base = (char *)(((uintptr_t)raw + align - 1) / align * align);
    if (base > raw)
        munmap(raw, (size_t)(base - raw));
    if (raw + map + align > base + map)
        munmap(base + map, (size_t)(raw + map + align - (base + map)));
    a = calloc(1, sizeof *a);
    if (a && kind == DBL_MANAGED) {
        a->npages = (size + DBL_PAGE - 1) / DBL_PAGE;
        a->pages = calloc(a->npages, sizeof *a->pages);
        for (size_t i = 0; a->pages && i < a->npages; i++) {
            a->pages[i].loc = DBL_NONE;
            a->pages[i].hold = -1;
        }
    }
    if (!a || (kind == DBL_MANAGED && !a->pages) || dbl_set_add(&G.allocs, (uintptr_t)base, size, a)) {
        if (a)
            free(a->pages);
        free(a);
        munmap(base, map);
        return NULL;
    }
    a->base = base;
    a->size = size;
    a->map_size = map;
    a->kind = kind;
    a->dev = dev;
    if (kind == DBL_DEVICE)
        G.dev_used[dev] += size;
    return a;
}

static void hold_set(struct dbl_alloc *a, size_t i, int dev) {
    struct dbl_page *pg = &a->pages[i];

    if (pg->hold == dev)
        return;
    if (pg->hold >= 0)
        G.held[pg->hold] -= dbl_page_bytes(a, i);
    pg->hold = (int8_t)dev;
    if (dev >= 0)
        G.held[dev] += dbl_page_bytes(a, i);
}

/* Release an allocation: its device memory, its pages; the range stays reserved (PROT_NONE) so
 * a later use of it is recognised as a use after free, never as someone else's memory. */
int hoffdbl_ptr_kind(const void *p) {
    struct dbl_alloc *a;
    int k;

    pthread_mutex_lock(&G.lock);
    a = dbl_alloc_find(p);
    k = a ? (int)a->kind : 0;
    pthread_mutex_unlock(&G.lock);
    return k;
}

void dbl_dev_access(struct CUstream_st *s, struct dbl_alloc *a, const void *p, size_t n, int write, const char *call) {
    struct dbl_racc me = {.lo = (size_t)((const char *)p - a->base),
                          .e = {.sid = (uint16_t)s->id, .write = (uint8_t)write, .at = (uint32_t)s->enq}};
    size_t k, keep = 0;

    me.hi = me.lo + n;
    for (k = 0; k < a->nracc; k++) {
        struct dbl_racc *r = &a->racc[k];

        if (r->hi <= me.lo || me.hi <= r->lo || r->e.sid == me.e.sid || !(write || r->e.write) ||
            dbl_vc_before(&s->clock, &r->e))
            continue;
        G.st.access_races++;
        G.st.device_races++;
        dbl_hard(CHK_RACE, call, a->base + (r->lo > me.lo ? r->lo : me.lo),
                 "a declared %s on stream %d is not "
                 "ordered after a declared %s of these device bytes on stream %d (op %u there): a data race "
                 "(device memory handed to a new owner before its old owner's streams were done?)",
                 write ? "write" : "read", s->id, r->e.write ? "write" : "read", r->e.sid, r->e.at);
    }
    /* Forget the accesses this one covers on its own stream; keep the rest (the oldest go when full). */
    for (k = 0; k < a->nracc; k++) {
        struct dbl_racc *r = &a->racc[k];

        if (!(r->e.sid == me.e.sid && r->lo >= me.lo && r->hi <= me.hi))
            a->racc[keep++] = *r;
    }
    a->nracc = keep;
    if (a->nracc == DBL_RACC_MAX) {
        memmove(a->racc, a->racc + 1, (DBL_RACC_MAX - 1) * sizeof *a->racc);
        a->nracc--;
    }
    if (!a->racc && !(a->racc = malloc(DBL_RACC_MAX * sizeof *a->racc))) {
        fprintf(stderr, "hoffdbl: out of host memory for the race check\n");
        abort();
    }
    a->racc[a->nracc++] = me;
}

void dbl_alloc_destroy(struct dbl_alloc *a) {
    size_t idx;

    if (a->kind == DBL_DEVICE)
        G.dev_used[a->dev] -= a->size;
    for (size_t i = 0; i < a->npages; i++) {
        hold_set(a, i, -1);
        free(a->pages[i].acc);
        free(a->pages[i].dis);
        free(a->pages[i].mov);
        free(a->pages[i].xop);
    }
    if (dbl_set_find(&G.allocs, (uintptr_t)a->base, &idx) == a)
        dbl_set_del(&G.allocs, idx);
    madvise(a->base, a->map_size, MADV_DONTNEED);
    mprotect(a->base, a->map_size, PROT_NONE);
    if (dbl_set_add(&G.freed, (uintptr_t)a->base, a->map_size, (void *)(uintptr_t)a->kind))
        munmap(a->base, a->map_size); /* no room to remember it: give the range back */
    free(a->pages);
    free(a->racc);
    free(a);
}

int dbl_loc_ok(struct cudaMemLocation loc) {
    switch (loc.type) {
    case cudaMemLocationTypeDevice: return loc.id >= 0 && loc.id < G.ndev;
    case cudaMemLocationTypeHost: return 1;
    case cudaMemLocationTypeHostNuma: return loc.id >= 0 && loc.id < G.numa_nodes;
    case cudaMemLocationTypeHostNumaCurrent: return G.numa_nodes > 0;
    default: return 0;
    }
}

/* (p, n) lies inside one managed allocation; else a hard error (and -1). */
int dbl_managed_range(const char *call, const void *p, size_t n, struct dbl_alloc **out) {
    struct dbl_alloc *a = dbl_alloc_find(p);

    *out = NULL;
    if (!a) {
        dbl_hard(CHK_POINTER, call, p, "%s; this call takes managed memory (cudaMallocManaged)", dbl_ptr_what(p));
        return -1;
    }
    if (a->kind != DBL_MANAGED) {
        dbl_hard(CHK_POINTER, call, p, "%s memory, not managed memory (cudaMallocManaged)",
                 a->kind == DBL_DEVICE ? "cudaMalloc device" : "pinned host");
        return -1;
    }
    if (n > a->size - (size_t)((const char *)p - a->base)) {
        dbl_hard(CHK_RANGE, call, p,
                 "%zu bytes run %zu bytes past the end of the managed "
                 "allocation %p (%zu bytes)",
                 n, n - (a->size - (size_t)((const char *)p - a->base)), (void *)a->base, a->size);
        return -1;
    }
    *out = a;
    return 0;
}

/* ---- room on a device ------------------------------------------------------------------------- */

uint64_t dbl_dev_free(int dev) {
    uint64_t used = G.dev_used[dev] + G.held[dev];

    return used >= G.cap ? 0 : G.cap - used;
}

static int kept(const struct dbl_alloc *a, size_t i, const struct dbl_alloc *ka, size_t lo, size_t hi) {
    return a == ka && i >= lo && i < hi;
}

/* Make `need` bytes free on dev: reclaim discarded pages first (their contents are dead), then
 * evict the least recently used resident managed pages to the host, as the UVM driver does.
 * Pages [keep_lo, keep_hi) of keep_a are never chosen.  0, or -1 (and nothing moved) when even
 * that is not enough. */
int dbl_room(int dev, uint64_t need, const struct dbl_alloc *keep_a, size_t keep_lo, size_t keep_hi) {
    uint64_t movable = 0;

    if (dbl_dev_free(dev) >= need)
        return 0;
    for (size_t k = 0; k < G.allocs.n; k++) { /* fail before evicting anything in vain */
        struct dbl_alloc *a = G.allocs.v[k].item;

        for (size_t i = 0; i < a->npages; i++)
            if (a->pages[i].hold == dev && !kept(a, i, keep_a, keep_lo, keep_hi))
                movable += dbl_page_bytes(a, i);
    }
    if (dbl_dev_free(dev) + movable < need)
        return -1;
    for (size_t k = 0; k < G.allocs.n && dbl_dev_free(dev) < need; k++) {
        struct dbl_alloc *a = G.allocs.v[k].item;

        for (size_t i = 0; i < a->npages && dbl_dev_free(dev) < need; i++) {
            if (a->pages[i].loc == DBL_NONE && a->pages[i].hold == dev && !kept(a, i, keep_a, keep_lo, keep_hi)) {
                G.st.lazy_reclaims++;
                G.st.lazy_reclaimed_bytes += dbl_page_bytes(a, i);
                hold_set(a, i, -1);
            }
        }
    }
    while (dbl_dev_free(dev) < need) {
        struct dbl_alloc *va = NULL;
        size_t vi = 0;

        for (size_t k = 0; k < G.allocs.n; k++) {
            struct dbl_alloc *a = G.allocs.v[k].item;

            for (size_t i = 0; i < a->npages; i++)
                if (a->pages[i].loc == dev && !kept(a, i, keep_a, keep_lo, keep_hi) &&
                    (!va || a->pages[i].lru < va->pages[vi].lru)) {
                    va = a;
                    vi = i;
                }
        }
        if (!va)
            return -1;
        G.st.driver_evictions++;
        G.st.driver_evicted_bytes += dbl_page_bytes(va, vi);
        va->pages[vi].loc = DBL_HOST;
        hold_set(va, vi, -1);
    }
    return 0;
}

/* Put page i on dev (0), making room; -1 (page left where it is) when the device is full of
 * pages that cannot move. */
static int page_to_dev(struct dbl_alloc *a, size_t i, int dev, size_t keep_lo, size_t keep_hi) {
    struct dbl_page *pg = &a->pages[i];

    if (pg->hold != dev && dbl_room(dev, dbl_page_bytes(a, i), a, keep_lo, keep_hi))
        return -1;
    hold_set(a, i, dev);
    pg->loc = (int8_t)dev;
    pg->lru = ++G.tick;
    return 0;
}

static void page_to_host(struct dbl_alloc *a, size_t i) {
    a->pages[i].loc = DBL_HOST;
    hold_set(a, i, -1);
}

/* ---- the race check --------------------------------------------------------------------------- */

static void epoch_put(struct dbl_epoch **v, uint16_t *n, struct dbl_epoch e) {
    struct dbl_epoch *nv;

    for (uint16_t k = 0; k < *n; k++) {
        if ((*v)[k].sid == e.sid) {
            (*v)[k] = e; /* same stream: the later one orders after the earlier */
            return;
        }
    }
    nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) {
        fprintf(stderr, "hoffdbl: out of host memory for the race check\n");
        abort();
    }
    nv[*n] = e;
    *v = nv;
    (*n)++;
}

/* Record that s's newest op (enqueued just now) accesses, discards or moves pages [lo, hi) of a,
 * and check it against the page's earlier discards / declared accesses. */
void dbl_pages_enqueued(struct CUstream_st *s, struct dbl_alloc *a, size_t lo, size_t hi, int what, int write,
                        const char *call) {
    struct dbl_epoch me = {.sid = (uint16_t)s->id, .write = (uint8_t)write, .at = (uint32_t)s->enq};

    for (size_t i = lo; i < hi && i < a->npages; i++) {
        struct dbl_page *pg = &a->pages[i];
        char *pp = a->base + i * DBL_PAGE;

        if (what == DBL_ACCESS) {
            for (uint16_t k = 0; k < pg->ndis; k++)
                if (!dbl_vc_before(&s->clock, &pg->dis[k])) {
                    G.st.discard_races++;
                    dbl_hard(CHK_RACE, call, pp,
                             "a declared %s on stream %d is not ordered after "
                             "the discard of this page on stream %d (op %u there): it may see the "
                             "discard or not",
                             write ? "write" : "read", s->id, pg->dis[k].sid, pg->dis[k].at);
                }
            for (uint16_t k = 0; k < pg->nmov; k++)
                if (!dbl_vc_before(&s->clock, &pg->mov[k]))
                    G.st.move_races++; /* legal (concurrent managed access): a cost */
            /* Two kernels on different streams, one of them writing, with no
             * order between them: a data race (an allocator that hands a block
             * to a new owner before the old owner's other streams are done).
             * Only each stream's last access is kept, so a write followed by a
             * read on one stream is remembered as the read: races with the
             * write may be missed, none is invented. */
            for (uint16_t k = 0; k < pg->nacc; k++)
                if (pg->acc[k].sid != me.sid && (write || pg->acc[k].write) && !dbl_vc_before(&s->clock, &pg->acc[k])) {
                    G.st.access_races++;
                    dbl_hard(CHK_RACE, call, pp,
                             "a declared %s on stream %d is not ordered after a "
                             "declared %s of this page on stream %d (op %u there): a data race",
                             write ? "write" : "read", s->id, pg->acc[k].write ? "write" : "read", pg->acc[k].sid,
                             pg->acc[k].at);
                }
            epoch_put(&pg->acc, &pg->nacc, me);
            continue;
        }
        for (uint16_t k = 0; k < pg->nacc; k++) {
            if (dbl_vc_before(&s->clock, &pg->acc[k]))
                continue;
            if (what == DBL_MOVE) {
                G.st.move_races++;
                continue;
            }
            G.st.discard_races++;
            dbl_hard(CHK_RACE, call, pp,
                     "the discard on stream %d is not ordered after a declared "
                     "%s of this page on stream %d (op %u there): the kernel may read poisoned "
                     "bytes or its writes may be lost",
                     s->id, pg->acc[k].write ? "write" : "read", pg->acc[k].sid, pg->acc[k].at);
        }
        if (what == DBL_DISCARD)
            epoch_put(&pg->dis, &pg->ndis, me);
        else
            epoch_put(&pg->mov, &pg->nmov, me);
    }
}

/* ---- the discard/prefetch rule ---------------------------------------------------------------- */

/* cudaMemDiscardBatchAsync: "any reads, writes or prefetches to any part of the memory range that occur
 * simultaneously with the discard operation result in undefined behavior".  Reads and writes are the
 * declared accesses above (per page); here a discard against a prefetch or eviction, either way round,
 * on exact bytes.  Ordered: the same stream; an event recorded after the earlier op and waited on by
 * the later op's stream (stream clocks); a host synchronisation with the earlier op before the later
 * is enqueued (the host clock every enqueue inherits: a stream or event synchronize, a successful
 * query, a device synchronisation).  Completion nobody synchronised with orders nothing: the decision
 * is made at enqueue, whatever the timing, as for every race check of the double. */

static const char *xop_name(int kind) {
    return kind == (DBL_X_DISCARD | DBL_X_PREFETCH) ? "discard-and-prefetch"
           : kind == DBL_X_DISCARD                  ? "discard"
                                                    : "prefetch";
}

void dbl_xop_enqueued(struct CUstream_st *s, struct dbl_alloc *a, const char *p, size_t n, int kind, const char *call) {
    size_t off = (size_t)(p - a->base), end = off + n;

    for (size_t i = off / DBL_PAGE; i < a->npages && i * DBL_PAGE < end; i++) {
        struct dbl_page *pg = &a->pages[i];
        size_t ps = i * DBL_PAGE;
        struct dbl_xop me = {.sid = (uint16_t)s->id,
                             .kind = (uint8_t)kind,
                             .at = (uint32_t)s->enq,
                             .lo = (uint32_t)(off > ps ? off - ps : 0),
                             .hi = (uint32_t)(end < ps + DBL_PAGE ? end - ps : DBL_PAGE)};
        uint16_t k, keep = 0;

        for (k = 0; k < pg->nxop; k++) {
            const struct dbl_xop *x = &pg->xop[k];
            uint32_t lo = x->lo > me.lo ? x->lo : me.lo, hi = x->hi < me.hi ? x->hi : me.hi;

            if (x->sid == me.sid || lo >= hi || s->clock.v[x->sid] >= x->at)
                continue; /* same stream, no byte in common, or ordered before */
            if (!((me.kind & DBL_X_DISCARD) && (x->kind & DBL_X_PREFETCH)) &&
                !((me.kind & DBL_X_PREFETCH) && (x->kind & DBL_X_DISCARD)))
                continue; /* two prefetches, or two discards */
            G.st.discard_prefetch_races++;
            dbl_hard(CHK_RACE, call, a->base + ps + lo,
                     "the %s on stream %d and a %s of %u of these "
                     "bytes on stream %d (op %u there) are not ordered, so they may run concurrently: "
                     "undefined (cudaMemDiscardBatchAsync); order them with one stream, an event "
                     "recorded after the %s and waited on by stream %d, or a host synchronisation",
                     xop_name(me.kind), s->id, xop_name(x->kind), hi - lo, x->sid, x->at, xop_name(x->kind), s->id);
        }
        /* Forget what every later enqueue is ordered after anyway (the host synchronised with it), and
         * this stream's earlier ops that this one covers (bytes and kinds): a later op racing one of
         * them races this one too. */
        for (k = 0; k < pg->nxop; k++) {
            const struct dbl_xop *x = &pg->xop[k];

            if (G.host.v[x->sid] >= x->at ||
                (x->sid == me.sid && x->lo >= me.lo && x->hi <= me.hi && !(x->kind & ~me.kind)))
                continue;
            pg->xop[keep++] = *x;
        }
        pg->nxop = keep;
        if (pg->nxop == DBL_XOP_MAX) {
            memmove(pg->xop, pg->xop + 1, (DBL_XOP_MAX - 1) * sizeof *pg->xop);
            pg->nxop--;
        }
        if (!pg->xop && !(pg->xop = malloc(DBL_XOP_MAX * sizeof *pg->xop))) {
            fprintf(stderr, "hoffdbl: out of host memory for the race check\n");
            abort();
        }
        pg->xop[pg->nxop++] = me;
    }
}

/* ---- ops on the stream workers ------------------------------------------------------------------- */

static void page_span(const struct dbl_alloc *a, const char *p, size_t n, size_t *lo, size_t *hi) {
    size_t off = (size_t)(p - a->base);

    *lo = off / DBL_PAGE;
    *hi = n ? (off + n + DBL_PAGE - 1) / DBL_PAGE : *lo;
}

static size_t move_range(struct dbl_range *r, int dev) {
    struct dbl_alloc *a = dbl_alloc_find(r->p);
    size_t lo, hi, moved = 0;
    int host = r->loc.type != cudaMemLocationTypeDevice;

    if (!a || a->kind != DBL_MANAGED)
        return 0; /* checked at enqueue; freed since only after a synchronisation */
    page_span(a, r->p, r->n, &lo, &hi);
    if (r->discard) {
        memset(r->p, HOFFDBL_POISON, r->n);
        G.st.poisoned_bytes += r->n;
        for (size_t i = lo; i < hi; i++) {
            size_t off = i * DBL_PAGE;

            if ((char *)r->p <= a->base + off && (char *)r->p + r->n >= a->base + off + dbl_page_bytes(a, i))
                a->pages[i].loc = DBL_NONE; /* its device memory stays held until needed */
        }
    }
    if (r->loc.type == 0)
        return 0;
    for (size_t i = lo; i < hi; i++) {
        struct dbl_page *pg = &a->pages[i];
        int was = pg->loc;

        pg->lp_type = (int8_t)r->loc.type;
        pg->lp_id = r->loc.id;
        if (host) {
            if (was != DBL_HOST && was != DBL_NONE) {
                moved += dbl_page_bytes(a, i);
                G.st.migrated_d2h_bytes += dbl_page_bytes(a, i);
            }
            page_to_host(a, i);
        } else if (page_to_dev(a, i, r->loc.id, lo, hi) == 0 && was != r->loc.id && was != DBL_NONE) {
            moved += dbl_page_bytes(a, i);
            G.st.migrated_h2d_bytes += dbl_page_bytes(a, i);
        }
    }
    (void)dev;
    return moved;
}

void dbl_run_move(struct dbl_op *op, int dev) {
    size_t moved = 0;

    for (int k = 0; k < op->nrange; k++)
        moved += move_range(&op->ranges[k], dev);
    pthread_mutex_unlock(&G.lock);
    dbl_model_time(moved);
    pthread_mutex_lock(&G.lock);
}

void dbl_run_kernel(struct dbl_op *op, int dev) {
    size_t faulted = 0;

    for (int k = 0; k < op->nuse; k++) {
        struct dbl_alloc *a = dbl_alloc_find(op->use[k].p);
        size_t lo, hi;

        if (!a || a->kind != DBL_MANAGED)
            continue;
        page_span(a, op->use[k].p, op->use[k].n, &lo, &hi);
        for (size_t i = lo; i < hi; i++) {
            struct dbl_page *pg = &a->pages[i];

            if (pg->loc == dev) {
                pg->lru = ++G.tick;
                continue;
            }
            G.st.faults++;
            G.st.fault_bytes += dbl_page_bytes(a, i);
            if (pg->loc != DBL_NONE)
                faulted += dbl_page_bytes(a, i);
            /* No room: the page stays where it is and is accessed remotely. */
            (void)page_to_dev(a, i, dev, lo, hi);
        }
    }
    pthread_mutex_unlock(&G.lock);
    dbl_model_time(faulted);
    pthread_mutex_lock(&G.lock);
}

/* A copy or memset touches (p, n): pages never populated (or discarded) get populated, on the
 * preferred device if advice names one and it has room, else on the host. */
void dbl_touch_copy(void *p, size_t n, int dev) {
    struct dbl_alloc *a = dbl_alloc_find(p);
    size_t lo, hi;

    if (!a || a->kind != DBL_MANAGED)
        return;
    page_span(a, p, n, &lo, &hi);
    for (size_t i = lo; i < hi && i < a->npages; i++) {
        struct dbl_page *pg = &a->pages[i];

        if (pg->loc != DBL_NONE)
            continue;
        if (pg->pref_type == cudaMemLocationTypeDevice && page_to_dev(a, i, pg->pref_id, lo, hi) == 0)
            continue;
        page_to_host(a, i);
    }
    (void)dev;
}

/* ---- the harness's residency queries ------------------------------------------------------------- */

int hoffdbl_page_location(const void *p) {
    struct dbl_alloc *a;
    int loc = -3;

    pthread_mutex_lock(&G.lock);
    a = dbl_alloc_find(p);
    if (a && a->kind == DBL_MANAGED)
        loc = a->pages[(size_t)((const char *)p - a->base) / DBL_PAGE].loc;
    pthread_mutex_unlock(&G.lock);
    return loc;
}

static uint64_t sum_pages(int dev, int discarded) {
    uint64_t sum = 0;

    pthread_mutex_lock(&G.lock);
    for (size_t k = 0; k < G.allocs.n; k++) {
        struct dbl_alloc *a = G.allocs.v[k].item;

        for (size_t i = 0; i < a->npages; i++)
            if (discarded ? a->pages[i].loc == DBL_NONE && a->pages[i].hold == dev : a->pages[i].loc == dev)
                sum += dbl_page_bytes(a, i);
    }
    pthread_mutex_unlock(&G.lock);
    return sum;
}

uint64_t hoffdbl_device_resident(int device) {
    return sum_pages(device, 0);
}

uint64_t hoffdbl_device_discarded(int device) {
    return sum_pages(device, 1);
}
