/* drive.c — runs a finished trace through the public API of a context step after step, as a framework would
 * (hoff_keep after a kept allocation, hoff_set_phase before op marks), with the recorded compute gaps modelled
 * on sim, stamping every block and checking the stamps (integrity).
 * Threading: one thread drives one context; nothing here is shared. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/context.h"
#include "core/core.h"
#include "trace/drive.h"

/*
 * Stamps.  Every block gets, on each 4 KiB page, a 64-bit value in its first
 * and its last 8 bytes (a page shorter than 16 bytes gets the first only,
 * truncated).  The value is a hash of (block id, step, page, head/tail, write
 * generation): a page that was not brought back, a copy that landed in the
 * wrong place, or stale bytes from another block or step all show.
 *
 * When host code may touch a block.  The driver touches memory only where the
 * framework's kernels would: at the allocation (a write), at an access mark
 * (read or write) and at the free (the last read).  It never adds API calls
 * the trace does not have (hoff_access is recorded and replayed like any other
 * event), so it touches a managed block only while hoff_residency() says it is
 * on the device and no transfer is in flight on it; actions the plan fires
 * right after an event can have taken the block away already, and then the
 * touch is skipped: a skipped write keeps the old expectation (the old bytes
 * must come back), a skipped stamp at the allocation leaves the contents
 * undefined until the next write.  Device-pool blocks are plain memory on sim
 * and are always touched; on the cuda backend they are device memory and are
 * never touched.
 */

#define PAGE 4096u

struct drv {
    hoff_ctx *ctx;
    const struct hoff__trace *t;
    const struct hoff__drive_opts *o;
    struct hoff__drive_result *r;
    int is_sim, model;
    void **ptr;       /* block id -> live pointer (NULL when not live) */
    uint32_t *gen;    /* write generation */
    uint8_t *defined; /* stamps written (contents defined) */
    int step;
    int region_depth;
    int in_step;
    int phase; /* the phase last set (hoff_set_phase) in this step; hoff_step_begin resets it */
    /* time */
    int use_gpu;
    double scale;        /* modelled ns per trace ns */
    uint64_t modelled;   /* modelled ns so far in this step */
    uint64_t compute_ns; /* this step */
};

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t stamp_value(uint32_t block, int step, uint64_t page, uint32_t gen, int tail) {
    uint64_t a = ((uint64_t)block << 32) | gen;
    uint64_t b = ((uint64_t)(uint32_t)step << 41) ^ (page << 1) ^ (uint64_t)tail;

    return mix64(a ^ mix64(b + 0x9E3779B97F4A7C15ull));
}

static const char *res_name(int st) {
    static const char *const names[] = {"device",    "evicting", "host", "prefetching",
                                        "discarded", "spilling", "nvme", "restoring"};
    if (st < 0)
        return "not a block";
    return st < (int)(sizeof names / sizeof names[0]) ? names[st] : "unknown";
}

static const char *kind_text(const struct hoff__tev *e) {
    switch (e->kind) {
    case HOFF__TEV_ALLOC: return "alloc";
    case HOFF__TEV_FREE: return "free";
    case HOFF__TEV_ACCESS: return e->flags & HOFF__TEV_WRITE ? "access write" : "access read";
    default: return "step end";
    }
}

/* May the host touch block id's bytes now?  A kept block is device memory
 * for the plan, but the warmup allocated it managed (and with
 * offload_gradients its hoff_keep did nothing): on sim, touched when on the
 * device; on the cuda backend never, as a replay allocates it from the
 * device pool. */
static int touchable(struct drv *d, uint32_t id) {
    const struct hoff__tblock *b = &d->t->blocks[id];

    if (b->kept)
        return d->is_sim && hoff_residency(d->ctx, d->ptr[id]) == HOFF_RES_DEVICE;
    if (b->pool == 0)
        return d->is_sim;
    return hoff_residency(d->ctx, d->ptr[id]) == HOFF_RES_DEVICE;
}

static void stamp(struct drv *d, uint32_t id) {
    unsigned char *p = d->ptr[id];
    uint64_t size = d->t->blocks[id].size, off, page, v;

    for (page = 0, off = 0; off < size; page++, off += PAGE) {
        uint64_t end = off + PAGE < size ? off + PAGE : size;

        v = stamp_value(id, d->step, page, d->gen[id], 0);
        memcpy(p + off, &v, end - off < 8 ? (size_t)(end - off) : 8);
        if (end - off >= 16) {
            v = stamp_value(id, d->step, page, d->gen[id], 1);
            memcpy(p + end - 8, &v, 8);
        }
    }
    d->defined[id] = 1;
}

static void report(struct drv *d, uint32_t id, size_t ev, const char *what, uint64_t off, uint64_t want, uint64_t got,
                   size_t n) {
    struct hoff__drive_result *r = d->r;
    const struct hoff__tblock *b = &d->t->blocks[id];
    char sz[32];

    r->integrity_errors++;
    if (r->first_error[0])
        return;
    if (n < 8) { /* compare only the bytes stamped */
        want &= ((uint64_t)1 << (8 * n)) - 1;
        got &= ((uint64_t)1 << (8 * n)) - 1;
    }
    snprintf(r->first_error, sizeof r->first_error,
             "step %d, event %zu (%s): block %" PRIu32 " (%s, %s) offset %" PRIu64 ": expected %016" PRIx64
             ", found %016" PRIx64 " (%s)",
             d->step, ev, what, id, hoff__fmt_size(b->size, sz, sizeof sz), b->pool ? "managed" : "device", off, want,
             got, res_name(hoff_residency(d->ctx, d->ptr[id])));
}

/* Check every stamp of block id (if its contents are defined). */
static void check(struct drv *d, uint32_t id, size_t ev, const char *what) {
    const unsigned char *p = d->ptr[id];
    uint64_t size = d->t->blocks[id].size, off, page, want, got;

    if (!d->defined[id])
        return;
    for (page = 0, off = 0; off < size; page++, off += PAGE) {
        uint64_t end = off + PAGE < size ? off + PAGE : size;
        size_t n = end - off < 8 ? (size_t)(end - off) : 8;

        want = stamp_value(id, d->step, page, d->gen[id], 0);
        got = 0;
        memcpy(&got, p + off, n);
        if (memcmp(&want, &got, n) != 0)
            report(d, id, ev, what, off, want, got, n);
        if (end - off >= 16) {
            want = stamp_value(id, d->step, page, d->gen[id], 1);
            memcpy(&got, p + end - 8, 8);
            if (want != got)
                report(d, id, ev, what, end - 8, want, got, 8);
        }
    }
    d->r->blocks_verified++;
    d->r->bytes_verified += size;
}

/* --- time ------------------------------------------------------------------ */

static uint64_t ev_time(const struct drv *d, size_t i) {
    const struct hoff__tev *e = &d->t->ev[i];

    return d->use_gpu ? e->t_gpu_ns : e->t_cpu_ns;
}

static uint64_t step_end_time(const struct hoff__trace *t, int use_gpu) {
    uint64_t end = use_gpu ? t->step_gpu_ns : t->step_ns;
    uint64_t last = 0;

    if (t->nev)
        last = use_gpu ? t->ev[t->nev - 1].t_gpu_ns : t->ev[t->nev - 1].t_cpu_ns;
    if (end == HOFF__TIME_UNKNOWN || end < last)
        end = last;
    return end;
}

static void setup_time(struct drv *d) {
    const struct hoff__trace *t = d->t;
    size_t i;
    uint64_t end;

    d->use_gpu = t->nev > 0;
    for (i = 0; i < t->nev && d->use_gpu; i++)
        if (t->ev[i].t_gpu_ns == HOFF__TIME_UNKNOWN)
            d->use_gpu = 0;
    end = step_end_time(t, d->use_gpu);
    if (d->o->gpu_step_ns)
        d->scale = end ? (double)d->o->gpu_step_ns / (double)end : 0.0;
    else
        d->scale = d->o->compute_scale > 0 ? 1.0 / d->o->compute_scale : 1.0;
}

/* Trace time tt on the modelled clock. */
static uint64_t scaled(const struct drv *d, uint64_t tt) {
    double target_d = (double)tt * d->scale;

    return target_d >= 1.8e19 ? UINT64_MAX : (uint64_t)(target_d + 0.5);
}

/* Let modelled compute run until trace time tt. */
static int advance_to(struct drv *d, uint64_t tt) {
    uint64_t target = scaled(d, tt);
    uint64_t gap;
    int rc;

    if (target <= d->modelled)
        return 0;
    gap = target - d->modelled;
    d->modelled = target;
    if (!d->model)
        return 0;
    rc = hoff_sim_compute(d->ctx, NULL, gap);
    if (rc == -ENOTSUP) {
        d->model = 0;
        return 0;
    }
    if (rc)
        return rc;
    d->compute_ns += gap;
    return 0;
}

int hoff__drive_check(const struct hoff__trace *t, const struct hoff__drive_opts *o, char *why, size_t len) {
    struct drv d;
    uint64_t end;
    double modelled;

    if (o->gpu_step_ns > HOFF__STEP_NS_MAX) {
        snprintf(why, len, "a step of %.3g s is past %s", (double)o->gpu_step_ns / 1e9, HOFF__STEP_NS_MAX_TEXT);
        return -ERANGE;
    }
    if (!o->gpu_step_ns && o->compute_scale > 0 &&
        !(o->compute_scale >= HOFF__COMPUTE_SCALE_MIN && o->compute_scale <= HOFF__COMPUTE_SCALE_MAX)) {
        snprintf(why, len, "a compute scale of %g is outside %g to %g", o->compute_scale, HOFF__COMPUTE_SCALE_MIN,
                 HOFF__COMPUTE_SCALE_MAX);
        return -ERANGE;
    }
    memset(&d, 0, sizeof d);
    d.t = t;
    d.o = o;
    setup_time(&d);
    end = step_end_time(t, d.use_gpu);
    modelled = (double)end * d.scale;
    if (modelled > (double)HOFF__STEP_NS_MAX) {
        snprintf(why, len, "the trace's step of %.3g s would be modelled as %.3g s, past %s", (double)end / 1e9,
                 modelled / 1e9, HOFF__STEP_NS_MAX_TEXT);
        return -ERANGE;
    }
    return 0;
}

int hoff__drive_clock(const struct hoff__trace *t, const struct hoff__drive_opts *o, uint64_t *t_ns,
                      uint64_t *step_ns) {
    struct drv d;
    uint64_t now = 0, target;
    size_t i;
    char why[256];

    if (!t || !o || (t->nev && !t_ns) || !step_ns)
        return -EINVAL;
    if (hoff__drive_check(t, o, why, sizeof why) != 0)
        return hoff__error(-ERANGE, "drive: %s", why);
    memset(&d, 0, sizeof d);
    d.t = t;
    d.o = o;
    setup_time(&d);
    /* advance_to's clock: the modelled time only moves forward. */
    for (i = 0; i < t->nev; i++) {
        target = scaled(&d, ev_time(&d, i));
        if (target > now)
            now = target;
        t_ns[i] = now;
    }
    target = scaled(&d, step_end_time(t, d.use_gpu));
    *step_ns = target > now ? target : now;
    return 0;
}

/* --- one event ------------------------------------------------------------- */

static hoff_stream ev_stream(const struct drv *d, const struct hoff__tev *e) {
    /* Streams are opaque on sim; a real backend gets the default stream. */
    return d->is_sim ? (hoff_stream)(uintptr_t)e->stream : NULL;
}

static int api_error(int rc, const char *what, const struct drv *d, size_t i) {
    return hoff__error(rc < 0 ? rc : -EIO, "drive: step %d, event %zu: %s failed: %s", d->step, i, what,
                       hoff_last_error());
}

static int do_event(struct drv *d, size_t i) {
    const struct hoff__tev *e = &d->t->ev[i];
    hoff_stream s = ev_stream(d, e);
    const char *name;
    unsigned flags;
    int rc;

    if ((e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_FREE || e->kind == HOFF__TEV_ACCESS) &&
        e->block >= d->t->nblocks)
        return hoff__error(-EINVAL, "drive: event %zu names block %u of %u", i, (unsigned)e->block,
                           (unsigned)d->t->nblocks);
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        flags = e->pool == 1 ? HOFF_ALLOC_MANAGED : HOFF_ALLOC_DEVICE;
        d->ptr[e->block] = hoff_malloc_flags(d->ctx, e->size ? (size_t)e->size : 1, s, flags);
        if (!d->ptr[e->block])
            return api_error(-errno, "hoff_malloc", d, i);
        /* Kept (a gradient or an optimizer block): the framework says so
         * right after allocating it, as the recorded step did. */
        if ((e->flags & HOFF__TEV_KEPT) && (rc = hoff_keep(d->ctx, d->ptr[e->block])) != 0)
            return api_error(rc, "hoff_keep", d, i);
        d->gen[e->block] = 0;
        d->defined[e->block] = 0;
        if (d->o->on_alloc)
            d->o->on_alloc(d->o->on_event_arg, d->step, e->block, d->ptr[e->block], (size_t)e->size);
        if (d->o->verify && touchable(d, e->block))
            stamp(d, e->block);
        return 0;
    case HOFF__TEV_FREE:
        if (!d->ptr[e->block])
            return 0;
        if (d->o->verify && touchable(d, e->block))
            check(d, e->block, i, "free");
        rc = hoff_free(d->ctx, d->ptr[e->block], s);
        d->ptr[e->block] = NULL;
        return rc ? api_error(rc, "hoff_free", d, i) : 0;
    case HOFF__TEV_ACCESS:
        if (!d->ptr[e->block])
            return 0;
        rc = hoff_access(d->ctx, d->ptr[e->block], !!(e->flags & HOFF__TEV_WRITE), s);
        if (rc)
            return api_error(rc, "hoff_access", d, i);
        if (!d->o->verify || !touchable(d, e->block))
            return 0;
        if (e->flags & HOFF__TEV_WRITE) {
            /* No check first: the plan may have released the old contents. */
            d->gen[e->block]++;
            stamp(d, e->block);
        } else {
            check(d, e->block, i, kind_text(e));
        }
        return 0;
    case HOFF__TEV_OP:
        /* The op's phase, said again only where it changes (as a framework's
         * hooks say it at each phase's start). */
        if ((int)hoff__tev_phase(e) != d->phase) {
            if ((rc = hoff_set_phase(d->ctx, (int)hoff__tev_phase(e))) != 0)
                return api_error(rc, "hoff_set_phase", d, i);
            d->phase = (int)hoff__tev_phase(e);
        }
        name = e->name != UINT32_MAX && e->name < d->t->nnames ? d->t->names[e->name] : NULL;
        rc = hoff_mark_op(d->ctx, name);
        return rc ? api_error(rc, "hoff_mark_op", d, i) : 0;
    case HOFF__TEV_REGION_BEGIN:
        rc = hoff_region_begin(d->ctx);
        if (rc)
            return api_error(rc, "hoff_region_begin", d, i);
        d->region_depth++;
        return 0;
    case HOFF__TEV_REGION_END:
        rc = hoff_region_end(d->ctx);
        if (rc)
            return api_error(rc, "hoff_region_end", d, i);
        d->region_depth--;
        return 0;
    default: return 0;
    }
}

/* Free every live block (retained at the step's end, or left by an error). */
static int free_live(struct drv *d, int check_first) {
    uint32_t id;
    int rc, first = 0;

    for (id = 0; id < d->t->nblocks; id++) {
        if (!d->ptr[id])
            continue;
        if (check_first && d->o->verify && touchable(d, id))
            check(d, id, d->t->nev, "retained at the step's end");
        rc = hoff_free(d->ctx, d->ptr[id], NULL);
        d->ptr[id] = NULL;
        if (rc && !first)
            first = rc;
    }
    return first;
}

/* Leave the context as it was after an error: close the regions and the
 * step, release the blocks. */
static void unwind(struct drv *d) {
    while (d->region_depth > 0) {
        hoff_region_end(d->ctx);
        d->region_depth--;
    }
    if (d->in_step) {
        hoff_step_end(d->ctx);
        d->in_step = 0;
    }
    free_live(d, 0);
}

void hoff__drive_step_counters(const struct hoff_stats *s0, const struct hoff_stats *s1, struct hoff__drive_step *out) {
    out->step_ns = s1->last_step_ns;
    out->stall_ns = s1->stall_ns - s0->stall_ns;
    out->bytes_d2h = s1->bytes_evicted - s0->bytes_evicted;
    out->bytes_h2d = s1->bytes_prefetched - s0->bytes_prefetched;
    out->evictions = s1->evictions - s0->evictions;
    out->prefetches = s1->prefetches - s0->prefetches;
    out->faults = s1->faults - s0->faults;
    out->late_prefetches = s1->late_prefetches - s0->late_prefetches;
    out->evict_calls = s1->evict_calls - s0->evict_calls;
    out->prefetch_calls = s1->prefetch_calls - s0->prefetch_calls;
    out->peak_resident_bytes = s1->step_peak_resident_bytes;
}

static int run_step(struct drv *d, struct hoff__drive_step *out) {
    struct hoff_stats s0, s1, mid;
    size_t i;
    int rc;

    memset(out, 0, sizeof *out);
    d->modelled = 0;
    d->compute_ns = 0;
    if ((rc = hoff_stats_get(d->ctx, &s0)) != 0)
        return rc;
    if ((rc = hoff_step_begin(d->ctx)) != 0)
        return api_error(rc, "hoff_step_begin", d, 0);
    d->in_step = 1;
    d->phase = HOFF_PHASE_NONE; /* hoff_step_begin forgets the phase */
    if (d->o->on_event)
        d->o->on_event(d->o->on_event_arg, d->step, SIZE_MAX);
    if ((rc = hoff_stats_get(d->ctx, &mid)) != 0)
        return rc;
    out->plan_state = (int)mid.plan_state;
    for (i = 0; i < d->t->nev; i++) {
        if ((rc = advance_to(d, ev_time(d, i))) != 0)
            return api_error(rc, "hoff_sim_compute", d, i);
        if ((rc = do_event(d, i)) != 0)
            return rc;
        if (d->o->on_event)
            d->o->on_event(d->o->on_event_arg, d->step, i);
    }
    if ((rc = advance_to(d, step_end_time(d->t, d->use_gpu))) != 0)
        return api_error(rc, "hoff_sim_compute", d, d->t->nev);
    if ((rc = hoff_stats_get(d->ctx, &mid)) != 0)
        return rc;
    if (mid.plan_state == HOFF_PLAN_FALLBACK)
        out->plan_state = HOFF_PLAN_FALLBACK;
    if ((rc = hoff_step_end(d->ctx)) != 0)
        return api_error(rc, "hoff_step_end", d, d->t->nev);
    d->in_step = 0;
    if (d->o->on_event)
        d->o->on_event(d->o->on_event_arg, d->step, d->t->nev);
    if ((rc = hoff_stats_get(d->ctx, &s1)) != 0)
        return rc;
    hoff__drive_step_counters(&s0, &s1, out);
    out->compute_ns = d->compute_ns;
    /* Retained blocks (gradients) would stay across steps in training; here
     * they go now so that every step has the same shape. */
    rc = free_live(d, 1);
    return rc ? api_error(rc, "hoff_free (retained block)", d, d->t->nev) : 0;
}

int hoff__trace_drive(hoff_ctx *ctx, const struct hoff__trace *t, const struct hoff__drive_opts *o,
                      struct hoff__drive_result *r) {
    struct hoff__sim_counters c;
    struct drv d;
    int k, rc = 0;

    if (!r)
        return -EINVAL;
    memset(r, 0, sizeof *r);
    if (!ctx || !t || !o || o->steps < 0)
        return hoff__error(-EINVAL, "drive: NULL context, trace or options, or negative steps");
    if (t->nblocks && !t->blocks)
        return hoff__error(-EINVAL, "drive: the trace is not finished (hoff__trace_finish)");
    memset(&d, 0, sizeof d);
    d.ctx = ctx;
    d.t = t;
    d.o = o;
    d.r = r;
    d.is_sim = strcmp(hoff_backend_name(ctx), "sim") == 0;
    d.model = 1;
    {
        char why[256];

        if (hoff__drive_check(t, o, why, sizeof why) != 0)
            return hoff__error(-ERANGE, "drive: %s", why);
    }
    setup_time(&d);
    r->step = calloc(o->steps ? (size_t)o->steps : 1, sizeof *r->step);
    d.ptr = calloc(t->nblocks ? t->nblocks : 1, sizeof *d.ptr);
    d.gen = calloc(t->nblocks ? t->nblocks : 1, sizeof *d.gen);
    d.defined = calloc(t->nblocks ? t->nblocks : 1, 1);
    if (!r->step || !d.ptr || !d.gen || !d.defined) {
        rc = hoff__error(-ENOMEM, "drive: out of memory");
        goto out;
    }
    for (k = 0; k < o->steps; k++) {
        d.step = k;
        rc = run_step(&d, &r->step[k]);
        if (rc) {
            unwind(&d);
            break;
        }
        r->steps = k + 1;
        if (r->step[k].peak_resident_bytes > r->peak_resident_bytes)
            r->peak_resident_bytes = r->step[k].peak_resident_bytes;
    }
    if (d.is_sim && hoff__sim_counters(ctx->mem.be, &c) == 0)
        r->peak_device_bytes = c.peak_device_used;
out:
    free(d.ptr);
    free(d.gen);
    free(d.defined);
    return rc;
}

void hoff__drive_result_free(struct hoff__drive_result *r) {
    if (!r)
        return;
    free(r->step);
    r->step = NULL;
    r->steps = 0;
}
