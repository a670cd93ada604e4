/* sim_page.c — the sim's pages: the state of each 2 MiB page of a managed mapping (resident, evicted,
 * discarded, with or without a host copy), the host shadow and the poison/protection that hides a page
 * that is away, the moves that change them (evict, prefetch, discard, fault, populate, the tiers' host
 * copies) and the use windows every move is checked against.  The model: backend/sim.h.
 * Threading: the ops take s->lock; the helpers expect it held. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/sim.h"
#include "core/core.h"

/* Pages of r in state st (PG_STATE bits), and of those without a host copy. */
static size_t range_count(const struct range *r, int st, size_t *nohost) {
    size_t i, k = 0, nh = 0;

    for (i = 0; i < r->n; i++) {
        uint8_t v = r->m->pg[r->first + i];

        if ((v & PG_STATE) == st) {
            k++;
            nh += (v & PG_NOHOST) != 0;
        }
    }
    if (nohost)
        *nohost = nh;
    return k;
}

static unsigned char *page_at(const struct range *r, size_t i) {
    return r->p + i * HOFF__MANAGED_GRAIN;
}

static unsigned char *shadow_at(const struct range *r, size_t i) {
    return r->m->shadow + (r->first + i) * HOFF__MANAGED_GRAIN;
}

/* -EIO when a page of r has no host copy (spilled to the NVMe tier and not
 * restored): r cannot come back (prefetch, fault). */
static int host_copy_check(const struct range *r, const char *op) {
    size_t nohost = 0;

    range_count(r, PG_EVICTED, &nohost);
    if (nohost)
        return hoff__error(-EIO, "sim: %s: (%p, %zu) has no host copy (spilled and not restored)", op, (void *)r->p,
                           r->size);
    return 0;
}

/* -EINVAL unless every page of r is evicted: the tiers' host copies are of
 * evicted ranges only (host_drop, host_make). */
static int evicted_check(const struct range *r, const char *op) {
    if (range_count(r, PG_EVICTED, NULL) != r->n)
        return hoff__error(-EINVAL, "sim: %s: (%p, %zu) is not evicted", op, (void *)r->p, r->size);
    return 0;
}

static int shadow_get(struct mapping *m) {
    void *sh;

    if (m->shadow)
        return 0;
    sh = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sh == MAP_FAILED)
        return -ENOMEM;
    m->shadow = sh;
    return 0;
}

/* mprotect one page, or fail with ENOMEM where hoff__sim_test_fail_protect asked for it (one test of
 * an int when it did not). */
static int page_protect(struct sim *s, void *pp, int prot) {
    if (s->fail_at && --s->fail_at == 0) {
        if (--s->fail_count)
            s->fail_at = 1; /* the next one fails too */
        errno = ENOMEM;
        return -1;
    }
    return mprotect(pp, HOFF__MANAGED_GRAIN, prot);
}

/* Make page i of r inaccessible: poison, and protect in PROTECT mode. */
static int page_hide(struct sim *s, const struct range *r, size_t i) {
    unsigned char *pp = page_at(r, i);

    memset(pp, SIM_POISON, HOFF__MANAGED_GRAIN);
    if (s->protect == HOFF_SIM_PROTECT && page_protect(s, pp, PROT_NONE) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_NONE) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    return 0;
}

/* Evict page i of r: its bytes to the shadow, then the page inaccessible.
 * In PROTECT mode the page is made read-only before the copy and
 * inaccessible after it, with no poison written in between: a write from
 * another thread (a communication or OpenMP thread the training thread does
 * not know of) either lands before the copy or faults and waits for the page
 * to come back; it can never land after the copy and be lost, nor can a
 * reader see poison while the page comes back (what stays behind the
 * protection is the shadow's bytes).  In POISON mode (no protection, one
 * thread) the page is poisoned after the copy.  On failure the page is as it
 * was, or, where even its unprotection failed, it is away (marked evicted:
 * its bytes are in the shadow, the page read-only; a write faults and brings
 * it back). */
static int page_evict(struct sim *s, const struct range *r, size_t i) {
    unsigned char *pp = page_at(r, i);

    if (s->protect != HOFF_SIM_PROTECT) {
        memcpy(shadow_at(r, i), pp, HOFF__MANAGED_GRAIN);
        memset(pp, SIM_POISON, HOFF__MANAGED_GRAIN);
        return 0;
    }
    if (page_protect(s, pp, PROT_READ) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_READ) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    memcpy(shadow_at(r, i), pp, HOFF__MANAGED_GRAIN);
    if (page_protect(s, pp, PROT_NONE) != 0) {
        int e = errno;

        if (page_protect(s, pp, PROT_READ | PROT_WRITE) != 0)
            r->m->pg[r->first + i] = PG_EVICTED;
        return hoff__error(-e, "sim: mprotect(PROT_NONE) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    }
    return 0;
}

static int page_show(struct sim *s, const struct range *r, size_t i) {
    if (s->protect == HOFF_SIM_PROTECT && page_protect(s, page_at(r, i), PROT_READ | PROT_WRITE) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_READ|PROT_WRITE) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    return 0;
}

/* Evicted page i of r gets its bytes back from the shadow and is shown.  In
 * PROTECT mode the view still holds them behind the protection (page_evict
 * copies without poisoning, and nothing can store into a hidden page): the
 * page is made readable, compared with the shadow, and writable only then,
 * so that a store from another thread (one that finds the page shown before
 * it faults on it) can never land before the copy and be overwritten by it.
 * The two differ only when the NVMe tier restored other bytes into the
 * shadow (a tier fault, which the stamps report): those are copied in once
 * the page is writable.  In POISON mode (one thread) the copy is direct. */
static int page_restore(struct sim *s, const struct range *r, size_t i) {
    unsigned char *pp = page_at(r, i);
    int same;

    if (s->protect != HOFF_SIM_PROTECT) {
        memcpy(pp, shadow_at(r, i), HOFF__MANAGED_GRAIN);
        return 0;
    }
    if (page_protect(s, pp, PROT_READ) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_READ) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    same = memcmp(pp, shadow_at(r, i), HOFF__MANAGED_GRAIN) == 0;
    if (page_protect(s, pp, PROT_READ | PROT_WRITE) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_READ|PROT_WRITE) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    if (!same)
        memcpy(pp, shadow_at(r, i), HOFF__MANAGED_GRAIN);
    return 0;
}

/* Bring the pages of r that are not resident back, in order: an evicted one
 * gets its bytes back (copy: page_restore), another is shown with what its
 * view holds (a discarded page's poison, or !copy: populate's undefined
 * contents); each is then resident.  *shown: the bytes made resident, *moved: those copied, both
 * counting the pages done before a failure, so that the caller books them
 * (they are resident whether the call succeeds or not). */
static int range_back(struct sim *s, const struct range *r, int copy, uint64_t *shown, uint64_t *moved) {
    size_t i;
    int rc;

    *shown = *moved = 0;
    for (i = 0; i < r->n; i++) {
        int st = r->m->pg[r->first + i] & PG_STATE, back = copy && st == PG_EVICTED;

        if (st == PG_RESIDENT)
            continue;
        rc = back ? page_restore(s, r, i) : page_show(s, r, i);
        if (rc)
            return rc;
        r->m->pg[r->first + i] = PG_RESIDENT;
        *moved += back ? HOFF__MANAGED_GRAIN : 0;
        *shown += HOFF__MANAGED_GRAIN;
    }
    return 0;
}

/* --- use windows --------------------------------------------------------- */

int hoff__sim_window_open(struct hoff__backend *be, void *p, size_t size, hoff_stream st) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i, npg;
    int rc;

    (void)st; /* one compute timeline */
    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "window_open", &r);
    if (!rc && !r.m->win) {
        npg = r.m->size / HOFF__MANAGED_GRAIN;
        r.m->win = calloc(npg, sizeof *r.m->win);
        if (!r.m->win)
            rc = hoff__error(-ENOMEM, "sim: window_open: out of memory");
    }
    for (i = 0; !rc && i < r.n; i++)
        r.m->win[r.first + i].open++;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_window_close(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "window_close", &r);
    for (i = 0; !rc && r.m->win && i < r.n; i++) {
        struct win *w = &r.m->win[r.first + i];

        if (w->open)
            w->open--;
        w->end = s->c.now_ns;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* A move (evict, discard) of r ordered after `after`: a breach when a page
 * is in an open use window, or when the move is ordered before the last
 * window's close (its kernels may still run).  Counted, and said once. */
static void window_check(struct sim *s, const struct range *r, const hoff__event *after, const char *what) {
    size_t i;

    for (i = 0; r->m->win && i < r->n; i++) {
        const struct win *w = &r->m->win[r->first + i];

        if (w->open || (after && after->recorded && after->t < w->end) || (!after && w->end)) {
            s->c.window_violations++;
            HOFF__LOG_ONCE(HOFF_LOG_ERROR,
                           "sim: %s of (%p, %zu) %s: work that uses it may still run (counted in "
                           "window_violations)",
                           what, (void *)r->p, r->size,
                           w->open ? "inside an open use window" : "ordered before its use window closed");
            return;
        }
    }
}

/* --- transfers ---------------------------------------------------------- */

int hoff__sim_evict(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct range r;
    uint64_t away;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "evict", &r);
    if (rc)
        goto out;
    window_check(s, &r, after, "evict");
    if (range_count(&r, PG_RESIDENT, NULL) != r.n) {
        rc = hoff__error(-EALREADY, "sim: evict: (%p, %zu) is not resident", p, size);
        goto out;
    }
    if (shadow_get(r.m) != 0) {
        rc = hoff__error(-ENOMEM, "sim: evict: no host memory for %zu bytes", r.m->size);
        goto out;
    }
    for (i = 0; i < r.n && rc == 0; i++)
        rc = page_evict(s, &r, i);
    if (rc) {
        /* Keep the data where it was: the pages before the failed one shown again (page_evict leaves the
         * bytes in the view: it fails in PROTECT mode only).  A page that stays hidden (its unprotection
         * failed too) is away, its bytes in the shadow: booked as evicted, a touch brings it back. */
        for (i--; i-- > 0;)
            if (page_show(s, &r, i) != 0)
                r.m->pg[r.first + i] = PG_EVICTED;
        away = range_count(&r, PG_EVICTED, NULL) * HOFF__MANAGED_GRAIN;
        s->c.device_used -= away;
        s->c.bytes_d2h += away;
        goto out;
    }
    for (i = 0; i < r.n; i++)
        r.m->pg[r.first + i] = PG_EVICTED;
    s->c.device_used -= size;
    s->c.bytes_d2h += size;
    hoff__sim_schedule(s, &s->c.d2h_busy_until, hoff__copy_ns(size, s->d2h_gbps), 1, after, done, HOFF__XF_EVICT, p,
                       size);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_prefetch(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct range r;
    uint64_t moved = 0, shown = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "prefetch", &r);
    if (rc)
        goto out;
    if (range_count(&r, PG_RESIDENT, NULL) != 0) {
        rc = hoff__error(-EALREADY, "sim: prefetch: (%p, %zu) is already resident", p, size);
        goto out;
    }
    rc = host_copy_check(&r, "prefetch");
    if (rc)
        goto out;
    rc = range_back(s, &r, 1, &shown, &moved);
    if (rc && !shown)
        goto out;
    /* the pages back before a failure are resident: booked, their copy timed */
    s->c.bytes_h2d += moved;
    hoff__sim_used_add(s, shown, 1);
    hoff__sim_schedule(s, &s->c.h2d_busy_until, hoff__copy_ns(moved, s->h2d_gbps), 1, after, done, HOFF__XF_PREFETCH, p,
                       moved);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_discard(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "discard", &r);
    if (rc)
        goto out;
    if (range_count(&r, PG_DISCARDED, NULL) == r.n) {
        rc = hoff__error(-EALREADY, "sim: discard: (%p, %zu) is already discarded", p, size);
        goto out;
    }
    window_check(s, &r, after, "discard");
    for (i = 0; i < r.n; i++) {
        uint8_t st = r.m->pg[r.first + i] & PG_STATE;

        /* resident pages, and in PROTECT mode evicted ones (page_evict left
         * their bytes behind the protection): poisoned and hidden */
        if (st == PG_RESIDENT || (st == PG_EVICTED && s->protect == HOFF_SIM_PROTECT)) {
            if (st == PG_EVICTED && (rc = page_show(s, &r, i)) != 0)
                goto out;
            rc = page_hide(s, &r, i);
            if (rc) { /* shown and not hidden again: in view (its poison), so resident */
                if (st == PG_EVICTED) {
                    r.m->pg[r.first + i] = PG_RESIDENT;
                    hoff__sim_used_add(s, HOFF__MANAGED_GRAIN, 1);
                }
                goto out;
            }
            if (st == PG_RESIDENT)
                s->c.device_used -= HOFF__MANAGED_GRAIN;
        }
        r.m->pg[r.first + i] = PG_DISCARDED;
    }
    hoff__sim_schedule(s, &s->c.d2h_busy_until, 0, 1, after, done, HOFF__XF_DISCARD, p, size);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream st, uint64_t *stall_ns) {
    struct sim *s = to_sim(be);
    struct range r;
    uint64_t stall = 0, moved = 0, shown = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "fault", &r);
    if (rc || range_count(&r, PG_RESIDENT, NULL) == r.n)
        goto out;
    rc = host_copy_check(&r, "fault");
    if (rc)
        goto out;
    rc = range_back(s, &r, 1, &shown, &moved);
    if (rc && !shown)
        goto out;
    /* the pages back before a failure are resident: booked, their stall paid */
    stall = hoff__sat_add(s->fault_ns, hoff__copy_ns(moved, s->fault_gbps));
    s->c.bytes_faulted += moved;
    hoff__sim_used_add(s, shown, 1);
    s->c.faults++;
    s->c.fault_stall_ns += stall;
    if (s->observe)
        s->observe(s->observe_arg, &(struct hoff__xfer_obs){.kind = HOFF__XF_FAULT,
                                                            .p = p,
                                                            .block = UINT32_MAX,
                                                            .bytes = size,
                                                            .issued = s->c.now_ns,
                                                            .start = s->c.now_ns,
                                                            .end = hoff__sat_add(s->c.now_ns, stall)});
    s->c.now_ns = hoff__sat_add(s->c.now_ns, stall);
out:
    pthread_mutex_unlock(&s->lock);
    if (stall_ns)
        *stall_ns = stall;
    return rc;
}

int hoff__sim_populate(struct hoff__backend *be, void *p, size_t size, hoff_stream st) {
    /* st: one compute timeline, and the pages are shown now */
    struct sim *s = to_sim(be);
    struct range r;
    uint64_t shown = 0, moved;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "populate", &r);
    if (rc == 0) /* no copy: the view still holds poison, undefined */
        rc = range_back(s, &r, 0, &shown, &moved);
    if (shown)
        hoff__sim_used_add(s, shown, 1);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* --- tiers ---------------------------------------------------------------- */

int hoff__sim_host_bytes(struct hoff__backend *be, void *p, size_t size, void **host) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t nohost = 1;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "host_bytes", &r);
    if (rc == 0 && (range_count(&r, PG_EVICTED, &nohost) != r.n || nohost || !r.m->shadow))
        rc = hoff__error(-EINVAL, "sim: host_bytes: (%p, %zu) has no host copy", p, size);
    if (rc == 0)
        *host = shadow_at(&r, 0);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_host_drop(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "host_drop", &r);
    if (rc == 0)
        rc = evicted_check(&r, "host_drop");
    if (rc == 0) {
        /* the bytes live on the NVMe tier now: give the shadow's pages back */
        if (r.m->shadow)
            madvise(shadow_at(&r, 0), size, MADV_DONTNEED);
        for (i = 0; i < r.n; i++)
            r.m->pg[r.first + i] |= PG_NOHOST;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_host_make(struct hoff__backend *be, void *p, size_t size, void **host) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = hoff__sim_find_range(s, p, size, "host_make", &r);
    if (rc == 0)
        rc = evicted_check(&r, "host_make");
    if (rc == 0 && shadow_get(r.m) != 0)
        rc = hoff__error(-ENOMEM, "sim: host_make: no host memory for %zu bytes", r.m->size);
    if (rc == 0) {
        for (i = 0; i < r.n; i++)
            r.m->pg[r.first + i] &= (uint8_t)~PG_NOHOST;
        *host = shadow_at(&r, 0);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* The node is only a label on sim: one host memory. */
int hoff__sim_evict_node(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after,
                         hoff__event *done) {
    (void)node;
    return hoff__sim_evict(be, p, size, after, done);
}
