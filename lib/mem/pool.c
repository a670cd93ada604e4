/* pool.c — a caching pool: free lists per (stream, size class), slab segments for small device blocks,
 * and stream-ordered reuse through lazily recorded per-stream fences.  Threading: caller holds the context lock.
 *
 * Reuse rule.  A block freed on stream S may be handed out again at once on
 * S (work on S is ordered after the free).  For another stream it must wait
 * until S has passed the free.  Recording an event on every free would put a
 * backend call on the hot path, so each stream keeps a counter of frees and
 * one fence event: when an allocation on T misses and S has a free block of
 * the class, the fence is recorded on S (covering every free on S so far) if
 * it is not already pending, and the block is taken once the fence has
 * completed.  A miss never waits: it maps new memory instead, and only the
 * out-of-memory path synchronises (hoff__pool_fence_all).
 *
 * Regions.  A group of managed blocks that the plan moves together lives in
 * one mapping (a region), each block at a fixed offset (its slot), so that
 * one transfer call moves the group.  A slot's descriptor stays with the
 * slot across uses (its state and events too, like a cached block), is
 * never on a free list, and follows the reuse rule above through the same
 * per-stream fences.  The region is mapped by its owner (the replay of a
 * plan) and unmapped once the owner has let go and no slot is handed out.
 *
 * Streams hoff never sees.  PyTorch's pluggable allocator cannot pass
 * Tensor.record_stream on, so a block a side stream still uses may be freed
 * on its allocation stream with nothing ordering the two.  With `defer`
 * (HOFF_FREE_FENCE=device) a freed block is reused only after a device-wide
 * synchronisation that began after its free (hoff__pool_fence_all): every
 * kernel enqueued before the free, on any stream, has finished by then.
 *
 * Graphs.  A graph pool serves allocations made during CUDA graph capture:
 * reuse only on the free's own stream within the capture (stream order is
 * graph order; an event on a capturing stream could not be queried), and
 * only for a capture the pool's reuse_ok accepts (the same graph pool: a
 * block freed during one graph's capture is that graph's scratch, which its
 * replays keep writing, so another live pool's capture must not get it); a
 * block freed after the capture is retired: the graph may replay into it, so
 * it is not handed out again while the graph lives.  When the framework says
 * the graphs of a pool are gone (PyTorch's release_pool hook; the block's
 * gpool names its pool, core/ctx_graph.c), its retired blocks are reclaimed:
 * they wait on `deferred` for a device-wide synchronisation that began after
 * the release (a replay launched before it may still run, on any stream),
 * then go back to the free lists, for later captures only.  A block of no
 * named pool ({0, 0}) stays retired until shutdown.
 *
 * Peaks.  The device and managed pools share a struct hoff__pool_sum: every
 * change of in_use_bytes and mapped_bytes goes through in_use_add/sub and
 * map/unmap below, the one place the sums and their peaks move. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "mem/pool.h"

struct hoff__pool_stream {
    hoff_stream s;
    uint64_t free_seq;  /* frees on s so far */
    uint64_t done_seq;  /* frees on s known complete */
    uint64_t fence_seq; /* free_seq when the fence was recorded */
    int fence_pending;  /* fence recorded and not yet seen complete */
    hoff__event *fence;
    struct hoff__block *head[HOFF__SIZECLASS_COUNT]; /* oldest free first */
    struct hoff__block *tail[HOFF__SIZECLASS_COUNT];
    uint32_t nonempty; /* classes with a free block */
};

struct hoff__region_slot {
    uint64_t off, bytes;
    struct hoff__block *b; /* the slot's descriptor, NULL until first handed out */
    int out;               /* handed out and not put back (a block freed while its
                              transfer is in flight comes back when it lands) */
};

struct hoff__region {
    void *base;
    size_t size;
    unsigned nslots, used; /* slots, slots handed out */
    int released;          /* the owner let go: unmap when used drops to 0 */
    struct hoff__region *next;
    struct hoff__region_slot slot[];
};

struct hoff__seg {
    void *base;
    int cls;
    unsigned nslots, carved, used; /* slots, slots cut so far, slots handed out */
    struct hoff__seg *next;
};

void hoff__pool_init(struct hoff__pool *p, int kind, struct hoff__backend *be, hoff__pool_map_check check,
                     void *check_arg) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->be = be;
    p->check = check;
    p->check_arg = check_arg;
}

void hoff__pool_init_graph(struct hoff__pool *p, struct hoff__backend *be, hoff__pool_map_check check,
                           void *check_arg) {
    hoff__pool_init(p, HOFF__POOL_DEVICE, be, check, check_arg);
    p->graph = 1;
}

int hoff__pool_class(const struct hoff__pool *p, size_t size) {
    if (size == 0)
        size = 1;
    if (p->kind == HOFF__POOL_MANAGED && size < HOFF__MANAGED_GRAIN)
        size = HOFF__MANAGED_GRAIN;
    return hoff__sizeclass(size);
}

uint64_t hoff__pool_block_bytes(int kind, uint64_t size) {
    int cls;

    if (size == 0)
        size = 1;
    if (kind == HOFF__POOL_MANAGED && size < HOFF__MANAGED_GRAIN)
        size = HOFF__MANAGED_GRAIN;
    cls = size <= HOFF__SIZECLASS_MAX_BYTES ? hoff__sizeclass((size_t)size) : -1;
    return cls < 0 ? 0 : hoff__sizeclass_bytes(cls);
}

static int is_slab_class(const struct hoff__pool *p, int cls) {
    return p->kind == HOFF__POOL_DEVICE && !p->graph && hoff__sizeclass_bytes(cls) <= HOFF__SLAB_MAX;
}

/* --- descriptors ---------------------------------------------------------- */

static struct hoff__block *desc_new(struct hoff__pool *p) {
    struct hoff__block *b = p->spare;

    if (b) {
        p->spare = b->next;
    } else {
        b = malloc(sizeof *b);
        if (!b)
            return NULL;
    }
    memset(b, 0, sizeof *b);
    return b;
}

static void desc_free(struct hoff__pool *p, struct hoff__block *b) {
    unsigned i;

    if (b->ev)
        p->be->ops->event_destroy(p->be, b->ev);
    if (b->after)
        p->be->ops->event_destroy(p->be, b->after);
    for (i = 0; i < HOFF__BLOCK_STREAMS; i++) {
        if (b->fence[i])
            p->be->ops->event_destroy(p->be, b->fence[i]);
        b->fence[i] = NULL;
    }
    b->ev = b->after = NULL;
    b->next = p->spare;
    p->spare = b;
}

/* --- streams --------------------------------------------------------------- */

static struct hoff__pool_stream *stream_find(struct hoff__pool *p, hoff_stream s) {
    size_t i;

    if (p->last && p->last->s == s)
        return p->last;
    for (i = 0; i < p->nstreams; i++)
        if (p->streams[i]->s == s)
            return p->last = p->streams[i];
    return NULL;
}

static struct hoff__pool_stream *stream_get(struct hoff__pool *p, hoff_stream s) {
    struct hoff__pool_stream *ps = stream_find(p, s);

    if (ps)
        return ps;
    if (HOFF__GROW(p->streams, p->cap_streams, p->nstreams + 1) != 0)
        return NULL;
    ps = calloc(1, sizeof *ps);
    if (!ps)
        return NULL;
    ps->s = s;
    p->streams[p->nstreams++] = ps;
    return p->last = ps;
}

/* --- free lists ------------------------------------------------------------ */

static void list_push(struct hoff__pool_stream *ps, struct hoff__block *b) {
    int c = b->cls;

    b->next = NULL;
    b->prev = ps->tail[c];
    if (ps->tail[c])
        ps->tail[c]->next = b;
    else
        ps->head[c] = b;
    ps->tail[c] = b;
}

static void list_unlink(struct hoff__pool_stream *ps, struct hoff__block *b) {
    int c = b->cls;

    if (b->prev)
        b->prev->next = b->next;
    else
        ps->head[c] = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        ps->tail[c] = b->prev;
    b->next = b->prev = NULL;
}

/* Has stream ps passed the free of b?  Records the fence when needed. */
static int fenced(struct hoff__pool *p, struct hoff__pool_stream *ps, const struct hoff__block *b) {
    struct hoff__backend *be = p->be;

    if (b->free_seq <= ps->done_seq)
        return 1;
    if (ps->fence_pending) {
        int rc = be->ops->event_query(be, ps->fence);
        if (rc == 0) {
            ps->done_seq = ps->fence_seq;
            ps->fence_pending = 0;
            if (b->free_seq <= ps->done_seq)
                return 1;
        } else if (rc != -EAGAIN) {
            ps->fence_pending = 0; /* broken event: fall back to mapping anew */
            return 0;
        } else {
            return 0;
        }
    }
    /* Record a fence covering every free on ps so far. */
    if (!ps->fence && be->ops->event_create(be, &ps->fence) != 0) {
        ps->fence = NULL;
        return 0;
    }
    if (be->ops->event_record(be, ps->fence, ps->s) != 0)
        return 0;
    ps->fence_seq = ps->free_seq;
    ps->fence_pending = 1;
    if (be->ops->event_query(be, ps->fence) == 0) {
        ps->done_seq = ps->fence_seq;
        ps->fence_pending = 0;
        return 1;
    }
    return 0;
}

/* --- the books -------------------------------------------------------------- */

static void in_use_add(struct hoff__pool *p, uint64_t bytes) {
    struct hoff__pool_sum *t = p->sum;

    p->in_use_bytes += bytes;
    if (t && (t->in_use += bytes) > t->peak_in_use)
        t->peak_in_use = t->in_use;
}

static void in_use_sub(struct hoff__pool *p, uint64_t bytes) {
    p->in_use_bytes -= bytes;
    if (p->sum)
        p->sum->in_use -= bytes;
}

static void mapped_add(struct hoff__pool *p, uint64_t bytes) {
    struct hoff__pool_sum *t = p->sum;

    p->mapped_bytes += bytes;
    if (t && (t->mapped += bytes) > t->peak_mapped)
        t->peak_mapped = t->mapped;
}

/* --- mapping --------------------------------------------------------------- */

static int map(struct hoff__pool *p, size_t bytes, void **out) {
    struct hoff__backend *be = p->be;
    int rc;

    if (p->check) {
        rc = p->check(p->check_arg, bytes);
        if (rc)
            return rc;
    }
    rc = p->kind == HOFF__POOL_MANAGED ? be->ops->managed_alloc(be, bytes, out) : be->ops->dev_alloc(be, bytes, out);
    if (rc == 0)
        mapped_add(p, bytes);
    return rc;
}

static void unmap(struct hoff__pool *p, void *ptr, size_t bytes) {
    struct hoff__backend *be = p->be;

    if (p->kind == HOFF__POOL_MANAGED)
        be->ops->managed_free(be, ptr, bytes);
    else
        be->ops->dev_free(be, ptr, bytes);
    p->mapped_bytes -= bytes;
    if (p->sum)
        p->sum->mapped -= bytes;
}

static struct hoff__block *carve(struct hoff__pool *p, int cls, int *err) {
    size_t bytes = hoff__sizeclass_bytes(cls);
    struct hoff__seg *seg = p->cur[cls];
    struct hoff__block *b;

    if (!seg || seg->carved == seg->nslots) {
        seg = calloc(1, sizeof *seg);
        if (!seg) {
            *err = -ENOMEM;
            return NULL;
        }
        *err = map(p, HOFF__SLAB_SEG, &seg->base);
        if (*err) {
            free(seg);
            return NULL;
        }
        seg->cls = cls;
        seg->nslots = (unsigned)(HOFF__SLAB_SEG / bytes);
        seg->next = p->segs;
        p->segs = seg;
        p->cur[cls] = seg;
    }
    b = desc_new(p);
    if (!b) {
        *err = -ENOMEM;
        return NULL;
    }
    b->ptr = (char *)seg->base + (size_t)seg->carved * bytes;
    b->flags = HOFF__BLK_SLAB;
    b->seg = seg;
    seg->carved++;
    return b;
}

/* --- get / put ------------------------------------------------------------- */

static struct hoff__block *take(struct hoff__pool *p, struct hoff__pool_stream *ps, struct hoff__block *b) {
    list_unlink(ps, b);
    if (!ps->head[b->cls])
        ps->nonempty--;
    p->cached_bytes -= b->size;
    return b;
}

static void hand_out(struct hoff__pool *p, struct hoff__block *b, hoff_stream s);

void hoff__pool_set_reuse(struct hoff__pool *p, int (*ok)(const struct hoff__block *b, void *arg), void *arg) {
    p->reuse_ok = ok;
    p->reuse_arg = arg;
}

struct hoff__block *hoff__pool_get(struct hoff__pool *p, int cls, hoff_stream s, int *err) {
    struct hoff__pool_stream *ps = stream_find(p, s);
    struct hoff__block *b = NULL;
    size_t i;

    *err = 0;
    if (cls < 0 || cls >= HOFF__SIZECLASS_COUNT) {
        *err = -EINVAL;
        return NULL;
    }
    /* Same stream: the most recently freed block, reusable at once (the
     * newest the pool's reuse_ok takes, when it has one). */
    if (ps && ps->tail[cls]) {
        struct hoff__block *c = ps->tail[cls];

        while (c && p->reuse_ok && !p->reuse_ok(c, p->reuse_arg))
            c = c->prev;
        if (c) {
            b = take(p, ps, c);
            goto hit;
        }
    }
    /* Another stream: its oldest free block, once that stream passed it
     * (never in a graph pool: that would take an event query). */
    for (i = 0; i < p->nstreams && !p->graph; i++) {
        struct hoff__pool_stream *o = p->streams[i];
        if (o == ps || !o->head[cls])
            continue;
        if (fenced(p, o, o->head[cls])) {
            b = take(p, o, o->head[cls]);
            p->cross_stream++;
            goto hit;
        }
    }
    /* Miss: map new memory. */
    p->misses++;
    if (is_slab_class(p, cls)) {
        b = carve(p, cls, err);
        if (!b)
            return NULL;
    } else {
        size_t bytes = hoff__sizeclass_bytes(cls);
        void *ptr;
        *err = map(p, bytes, &ptr);
        if (*err)
            return NULL;
        b = desc_new(p);
        if (!b) {
            unmap(p, ptr, bytes);
            *err = -ENOMEM;
            return NULL;
        }
        b->ptr = ptr;
        b->state = HOFF_RES_DEVICE;
    }
    b->cls = cls;
    b->size = hoff__sizeclass_bytes(cls);
    b->pool = (uint8_t)p->kind;
    goto out;
hit:
    p->hits++;
out:
    if (b->seg)
        b->seg->used++;
    b->flags |= HOFF__BLK_LIVE;
    b->stream = s;
    hand_out(p, b, s);
    in_use_add(p, b->size);
    return b;
}

static void region_unmap(struct hoff__pool *p, struct hoff__region *r);
static void defer_push(struct hoff__pool *p, struct hoff__block *b);

/* The block's work on other streams than its free's (s): a fence on each,
 * which its next owner's stream waits for (hand_out), so the free is
 * never held back and a reuse is never early.  Without a fence for every
 * stream (or an event), wait for the device now (reuse_syncs). */
static void fence_other_streams(struct hoff__pool *p, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = p->be;
    unsigned i, n = 0;
    int lost = b->streams_lost;

    for (i = 0; i < b->nstreams && !lost; i++) {
        if (b->streams[i] == s)
            continue;
        if ((!b->fence[n] && be->ops->event_create(be, &b->fence[n]) != 0) ||
            be->ops->event_record(be, b->fence[n], b->streams[i]) != 0) {
            lost = 1;
            break;
        }
        n++;
    }
    b->nreuse = (uint8_t)n;
    if (lost) {
        p->reuse_syncs++;
        b->nreuse = 0;
        be->ops->sync(be);
    }
}

/* b goes to a new owner on stream s: its work comes after the old owner's
 * on every stream, and its streams are s's alone. */
static void hand_out(struct hoff__pool *p, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = p->be;
    unsigned i;

    for (i = 0; i < b->nreuse; i++)
        if (be->ops->stream_wait(be, s, b->fence[i]) != 0) {
            p->reuse_syncs++;
            be->ops->sync(be);
            break;
        }
    b->nreuse = 0;
    b->streams[0] = s;
    b->nstreams = 1;
    b->streams_lost = 0;
}

int hoff__pool_put(struct hoff__pool *p, struct hoff__block *b, hoff_stream s) {
    struct hoff__pool_stream *ps = stream_get(p, s);

    fence_other_streams(p, b, s);

    if (b->region) { /* back to its slot */
        struct hoff__region *r = b->region;

        b->flags &= (uint8_t)(~(HOFF__BLK_LIVE | HOFF__BLK_PINNED | HOFF__BLK_FREED));
        b->stream = s;
        /* Without memory for the stream's record the slot is taken back
         * fenced by a device-wide wait only (hoff__pool_fence_all). */
        b->free_seq = ps ? ++ps->free_seq : UINT64_MAX;
        in_use_sub(p, b->size);
        r->slot[b->slot].out = 0;
        r->used--;
        if (r->released && r->used == 0)
            region_unmap(p, r);
        return 0;
    }
    if (!ps)
        return -ENOMEM;
    b->flags &= (uint8_t)(~(HOFF__BLK_LIVE | HOFF__BLK_PINNED | HOFF__BLK_FREED));
    b->stream = s;
    if (p->defer) { /* until the whole device passed the free (its slab slot stays counted as used) */
        defer_push(p, b);
        in_use_sub(p, b->size);
        return 0;
    }
    if (b->seg)
        b->seg->used--;
    b->free_seq = ++ps->free_seq;
    if (!ps->head[b->cls])
        ps->nonempty++;
    list_push(ps, b);
    in_use_sub(p, b->size);
    p->cached_bytes += b->size;
    return 0;
}

/* --- regions --------------------------------------------------------------- */

int hoff__pool_region_map(struct hoff__pool *p, size_t size, unsigned nslots, const uint64_t *off,
                          const uint64_t *bytes, struct hoff__region **out) {
    struct hoff__region *r;
    unsigned i;
    int rc;

    *out = NULL;
    if (p->kind != HOFF__POOL_MANAGED || !nslots || !size || size % HOFF__MANAGED_GRAIN)
        return -EINVAL;
    for (i = 0; i < nslots; i++)
        if (off[i] % HOFF__MANAGED_GRAIN || !bytes[i] || bytes[i] % HOFF__MANAGED_GRAIN || off[i] > size ||
            bytes[i] > size - off[i] || (i && off[i] < off[i - 1] + bytes[i - 1]))
            return -EINVAL; /* slots in address order, inside, not overlapping */
    r = calloc(1, sizeof *r + nslots * sizeof r->slot[0]);
    if (!r)
        return -ENOMEM;
    rc = map(p, size, &r->base);
    if (rc) {
        free(r);
        return rc;
    }
    r->size = size;
    r->nslots = nslots;
    for (i = 0; i < nslots; i++) {
        r->slot[i].off = off[i];
        r->slot[i].bytes = bytes[i];
    }
    r->next = p->regions;
    p->regions = r;
    *out = r;
    return 0;
}

struct hoff__block *hoff__pool_region_get(struct hoff__pool *p, struct hoff__region *r, unsigned i, int cls,
                                          hoff_stream s, int *err) {
    struct hoff__block *b;

    *err = 0;
    if (!r || r->released || i >= r->nslots || cls < 0 || cls >= HOFF__SIZECLASS_COUNT ||
        hoff__sizeclass_bytes(cls) != r->slot[i].bytes) {
        *err = -EINVAL;
        return NULL;
    }
    b = r->slot[i].b;
    if (r->slot[i].out) {
        *err = -EBUSY;
        return NULL;
    }
    if (b && b->stream != s) { /* freed on another stream: once that one passed the free */
        struct hoff__pool_stream *ps = stream_find(p, b->stream);

        if (!ps || !fenced(p, ps, b)) {
            *err = -EAGAIN;
            return NULL;
        }
        p->cross_stream++;
    }
    if (!b) {
        b = desc_new(p);
        if (!b) {
            *err = -ENOMEM;
            return NULL;
        }
        b->ptr = (char *)r->base + r->slot[i].off;
        b->state = HOFF_RES_DEVICE;
        b->cls = cls;
        b->size = r->slot[i].bytes;
        b->pool = (uint8_t)p->kind;
        b->flags = HOFF__BLK_REGION;
        b->region = r;
        b->slot = i;
        r->slot[i].b = b;
        p->misses++;
    } else {
        p->hits++;
    }
    b->flags |= HOFF__BLK_LIVE;
    b->stream = s;
    hand_out(p, b, s);
    r->slot[i].out = 1;
    r->used++;
    in_use_add(p, b->size);
    return b;
}

struct hoff__block *hoff__pool_region_slot(const struct hoff__region *r, unsigned i) {
    return r && i < r->nslots ? r->slot[i].b : NULL;
}

void *hoff__pool_region_base(const struct hoff__region *r) {
    return r->base;
}

size_t hoff__pool_region_size(const struct hoff__region *r) {
    return r->size;
}

static void region_unmap(struct hoff__pool *p, struct hoff__region *r) {
    struct hoff__region **rp;
    unsigned i;

    for (rp = &p->regions; *rp && *rp != r; rp = &(*rp)->next)
        ;
    if (*rp)
        *rp = r->next;
    for (i = 0; i < r->nslots; i++)
        if (r->slot[i].b)
            desc_free(p, r->slot[i].b);
    unmap(p, r->base, r->size);
    free(r);
}

void hoff__pool_region_release(struct hoff__pool *p, struct hoff__region *r) {
    if (!r)
        return;
    r->released = 1;
    if (r->used == 0)
        region_unmap(p, r);
}

void hoff__pool_retire(struct hoff__pool *p, struct hoff__block *b) {
    b->flags &= (uint8_t)(~(HOFF__BLK_LIVE | HOFF__BLK_PINNED | HOFF__BLK_FREED));
    b->next = p->retired;
    p->retired = b;
    p->retired_bytes += b->size;
    in_use_sub(p, b->size);
}

static void defer_push(struct hoff__pool *p, struct hoff__block *b) {
    b->next = p->deferred;
    p->deferred = b;
    p->deferred_bytes += b->size;
    p->deferred_frees++;
}

uint64_t hoff__pool_reclaim(struct hoff__pool *p, const uint64_t id[2]) {
    struct hoff__block **bp = &p->retired;
    uint64_t bytes = 0;

    if (!id[0] && !id[1])
        return 0; /* no pool named: nobody can say when its graphs are gone */
    while (*bp) {
        struct hoff__block *b = *bp;

        if (b->gpool[0] != id[0] || b->gpool[1] != id[1]) {
            bp = &b->next;
            continue;
        }
        *bp = b->next;
        p->retired_bytes -= b->size;
        b->nreuse = 0; /* the device-wide synchronisation orders its reuse after everything */
        defer_push(p, b);
        bytes += b->size;
    }
    return bytes;
}

void hoff__pool_put_deferred(struct hoff__pool *p, struct hoff__block *b, hoff_stream s) {
    b->flags &= (uint8_t)(~(HOFF__BLK_LIVE | HOFF__BLK_PINNED | HOFF__BLK_FREED));
    b->stream = s;
    b->nreuse = 0;
    defer_push(p, b);
    in_use_sub(p, b->size);
}

void hoff__pool_fence_all(struct hoff__pool *p) {
    size_t i;

    while (p->deferred) { /* the device passed their frees: onto the free lists */
        struct hoff__block *b = p->deferred;
        struct hoff__pool_stream *ps = stream_get(p, b->stream);

        if (!ps)
            break; /* no memory for the stream's record: they wait for the next fence */
        p->deferred = b->next;
        p->deferred_bytes -= b->size;
        b->free_seq = ++ps->free_seq;
        if (b->seg)
            b->seg->used--;
        if (!ps->head[b->cls])
            ps->nonempty++;
        list_push(ps, b);
        p->cached_bytes += b->size;
    }

    for (i = 0; i < p->nstreams; i++) {
        p->streams[i]->done_seq = p->streams[i]->free_seq;
        p->streams[i]->fence_pending = 0;
    }
}

uint64_t hoff__pool_trim(struct hoff__pool *p) {
    return hoff__pool_trim_if(p, NULL, NULL);
}

uint64_t hoff__pool_trim_if(struct hoff__pool *p, int (*may_unmap)(const struct hoff__block *b, void *arg), void *arg) {
    uint64_t released = 0;
    struct hoff__seg **sp;
    size_t i;
    int c;

    /* Whole-mapping blocks that are fenced go back to the backend; slab
     * slots stay until their whole segment is free. */
    for (i = 0; i < p->nstreams; i++) {
        struct hoff__pool_stream *ps = p->streams[i];
        for (c = 0; c < HOFF__SIZECLASS_COUNT; c++) {
            struct hoff__block *b = ps->head[c], *next;
            for (; b; b = next) {
                next = b->next;
                if (b->seg || b->free_seq > ps->done_seq || (may_unmap && !may_unmap(b, arg)))
                    continue;
                take(p, ps, b);
                unmap(p, b->ptr, b->size);
                released += b->size;
                desc_free(p, b);
            }
        }
    }
    /* Segments with no slot handed out and every carved slot fenced (no
     * filter says which slots may go: whole mappings only then). */
    for (sp = &p->segs; *sp && !may_unmap;) {
        struct hoff__seg *seg = *sp;
        int all_fenced = seg->used == 0;
        if (all_fenced) {
            for (i = 0; i < p->nstreams && all_fenced; i++) {
                struct hoff__block *b = p->streams[i]->head[seg->cls];
                for (; b; b = b->next)
                    if (b->seg == seg && b->free_seq > p->streams[i]->done_seq) {
                        all_fenced = 0;
                        break;
                    }
            }
        }
        if (!all_fenced) {
            sp = &seg->next;
            continue;
        }
        for (i = 0; i < p->nstreams; i++) {
            struct hoff__block *b = p->streams[i]->head[seg->cls], *next;
            for (; b; b = next) {
                next = b->next;
                if (b->seg == seg) {
                    take(p, p->streams[i], b);
                    desc_free(p, b);
                }
            }
        }
        if (p->cur[seg->cls] == seg)
            p->cur[seg->cls] = NULL;
        unmap(p, seg->base, HOFF__SLAB_SEG);
        released += HOFF__SLAB_SEG;
        *sp = seg->next;
        free(seg);
    }
    if (released)
        p->flushes++;
    return released;
}

void hoff__pool_destroy(struct hoff__pool *p) {
    struct hoff__block *b, *next;
    struct hoff__seg *seg, *snext;
    size_t i;
    int c;

    for (i = 0; i < p->nstreams; i++) {
        struct hoff__pool_stream *ps = p->streams[i];
        for (c = 0; c < HOFF__SIZECLASS_COUNT; c++)
            for (b = ps->head[c]; b; b = next) {
                next = b->next;
                if (!b->seg)
                    unmap(p, b->ptr, b->size);
                desc_free(p, b);
            }
        if (ps->fence)
            p->be->ops->event_destroy(p->be, ps->fence);
        free(ps);
    }
    free(p->streams);
    for (int k = 0; k < 2; k++) /* deferred frees, retired graph blocks */
        for (b = k ? p->retired : p->deferred; b; b = next) {
            next = b->next;
            if (!b->seg)
                unmap(p, b->ptr, b->size);
            desc_free(p, b);
        }
    while (p->regions) /* live slots are released with their region */
        region_unmap(p, p->regions);
    for (seg = p->segs; seg; seg = snext) {
        snext = seg->next;
        unmap(p, seg->base, HOFF__SLAB_SEG);
        free(seg);
    }
    for (b = p->spare; b; b = next) {
        next = b->next;
        free(b);
    }
    memset(p, 0, sizeof *p);
}

/* Live blocks are owned by the context, which hands them back with
 * hoff__pool_put (or unmaps them) before hoff__pool_destroy. */
