/* sim.c — the simulated device: a capacity, one virtual clock, two copy engines
 * with bandwidth and per-call latency, per-mapping residency that really moves
 * the bytes, and demand faults with their stall.  Deterministic.
 * Threading: every op is thread safe (one mutex per backend). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "core/core.h"
#include "core/xfer.h"

/*
 * The model.
 *
 * Time.  One virtual compute timeline, `now` (ns), shared by every stream:
 * streams are opaque values and compute is serial.  compute(s, ns) advances
 * now by ns; clock_ns() returns now.  Time only moves through compute, the
 * waits (event_sync, stream_wait, sync) and faults, so polling event_query
 * never completes a pending event by itself.
 *
 * Copy engines.  D2H (evict, discard) and H2D (prefetch) are two FIFOs, each
 * with a `busy_until`.  A transfer of size bytes issued at `now` starts at
 *     start = max(now, engine busy_until, after->t if after is recorded)
 * and ends at
 *     end = start + sim_latency_ns + ceil(size / gbps)
 * (gbps is GB/s = bytes per ns).  The engine is busy until end and "done", if
 * given, is recorded at end.  A discard costs the latency only, on D2H; a
 * prefetch of a discarded mapping costs the latency only, on H2D (no copy).
 * The two engines overlap with each other; each engine serialises its calls.
 *
 * The issuing thread.  Every transfer call (evict, prefetch, discard) also
 * costs the thread that makes it sim_call_ns of its own time (the page-table
 * work cudaMemPrefetchAsync does in the calling thread), and that thread is
 * one serial resource for both directions: with `issuer_free` the time the
 * thread is done with its previous call, a call made at `now` is issued at
 *     issued = max(now, issuer_free) + sim_call_ns,   issuer_free = issued
 * and its transfer starts at max(issued, engine busy_until, after->t).  One
 * call over a range of several blocks pays it once; so do the tier's NVMe
 * operations not at all (their own thread).  sim_call_ns = 0 gives the model
 * without it.
 *
 * Events are {t, recorded}.  event_record(ev, s) sets t = now.  event_query
 * is 0 for an event never recorded or with t <= now, else -EAGAIN.
 * event_sync and stream_wait both make compute wait: if t > now, now = t and
 * the difference is added to wait_stall_ns.  sync() waits the same way for
 * both engines' busy_until.
 *
 * Memory.  dev_alloc is host memory aligned to 512 bytes.  managed_alloc is an
 * anonymous mmap aligned to 2 MiB, with a state per 2 MiB page (resident,
 * evicted, discarded; and whether an evicted page has a host copy) and a host
 * shadow (an anonymous mmap of the mapping's size) allocated at its first
 * eviction and freed with the mapping.  Every op but managed_free takes any
 * 2 MiB-aligned range of whole pages inside one mapping (a group of blocks
 * laid out in one mapping moves with one call, or block by block); the
 * state tests below apply to every page of the range.  device_used = dev_alloc bytes + resident managed
 * bytes; an allocation that would take device_used above sim_device_bytes
 * fails with -ENOMEM.  Transfers and faults that bring bytes back never fail
 * on capacity (the runtime above enforces its budget); each time one leaves
 * device_used above capacity, over_capacity is counted.
 *
 * Bytes move for real, at the call (made from hoff's issuing thread); virtual
 * time only decides when "done" completes.  evict copies the device view to
 * the shadow, then overwrites the view with 0xDB (HOFF_SIM_POISON) and also
 * mprotect()s it PROT_NONE (HOFF_SIM_PROTECT), so a block used while not
 * resident reads poison or crashes instead of passing by accident.  prefetch
 * unprotects and copies the shadow back.  discard poisons/protects without a
 * copy; its contents stay 0xDB (undefined) when it comes back.  populate
 * makes an evicted or discarded mapping resident with undefined (poisoned)
 * contents, at no time cost.
 *
 * Faults.  fault() on a mapping that is not resident makes it resident at
 * once (copying the shadow back unless it was discarded) and stalls compute:
 * an evicted mapping costs sim_fault_ns + ceil(size / sim_fault_gbps) and
 * counts its bytes in bytes_faulted; a discarded one has nothing to move and
 * costs sim_fault_ns only.  now advances by the stall.  A resident mapping
 * costs nothing (stall 0).
 */

#define SIM_POISON 0xDB

struct hoff__event {
    uint64_t t;
    int recorded;
};

enum map_kind { MAP_DEVICE, MAP_MANAGED };
/* The state of one 2 MiB page of a managed mapping; PG_NOHOST marks an
 * evicted page whose host copy was dropped (spilled to the NVMe tier). */
enum page_state { PG_RESIDENT = 0, PG_EVICTED = 1, PG_DISCARDED = 2, PG_STATE = 3, PG_NOHOST = 4 };

/* A page's use windows (window_open/window_close): how many are open, and
 * the virtual time the last one closed. */
struct win {
    uint32_t open;
    uint64_t end;
};

struct mapping {
    struct mapping *next; /* hash chain */
    unsigned char *p;
    size_t size;
    int kind;              /* enum map_kind */
    uint8_t *pg;           /* managed: enum page_state per 2 MiB page */
    struct win *win;       /* managed: per page, allocated at the first window */
    unsigned char *shadow; /* managed: host copy (mmap of size bytes), allocated lazily */
};

/* A range of whole pages inside one managed mapping. */
struct range {
    struct mapping *m;
    size_t first, n;       /* pages */
    unsigned char *p;      /* m->p + first * grain */
    size_t size;           /* n * grain */
};

struct sim {
    struct hoff__backend be; /* first: the ops table */
    pthread_mutex_t lock;
    uint64_t capacity;
    double h2d_gbps, d2h_gbps, fault_gbps, nvme_read_gbps, nvme_write_gbps;
    uint64_t latency_ns, fault_ns;
    int protect;
    uint64_t call_ns;        /* the issuing thread's own cost per transfer call */
    struct mapping **buckets; /* power-of-two hash table keyed by address */
    size_t nbuckets, count;
    struct mapping **sorted; /* managed mappings by address, for ranges inside one */
    size_t nsorted, cap_sorted;
    struct hoff__sim_counters c; /* now_ns and busy_until live here too */
    hoff__xfer_observer observe; /* hoff__sim_observe's, called under lock */
    void *observe_arg;
};

static const struct hoff__backend_ops sim_ops;

static struct sim *to_sim(struct hoff__backend *be) {
    return (struct sim *)be;
}

/* --- the mapping table (lock held) ------------------------------------- */

static size_t hash_ptr(const void *p, size_t nbuckets) {
    uint64_t x = (uint64_t)(uintptr_t)p >> 9;

    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 29) & (nbuckets - 1);
}

static struct mapping *table_find(struct sim *s, const void *p) {
    struct mapping *m = s->buckets[hash_ptr(p, s->nbuckets)];

    while (m && m->p != p)
        m = m->next;
    return m;
}

static void table_grow(struct sim *s) {
    size_t nb = s->nbuckets * 2, i;
    struct mapping **nt = calloc(nb, sizeof *nt);

    if (!nt)
        return; /* keep the old table: slower, still correct */
    for (i = 0; i < s->nbuckets; i++) {
        struct mapping *m = s->buckets[i], *next;

        for (; m; m = next) {
            size_t h = hash_ptr(m->p, nb);

            next = m->next;
            m->next = nt[h];
            nt[h] = m;
        }
    }
    free(s->buckets);
    s->buckets = nt;
    s->nbuckets = nb;
}

static void table_insert(struct sim *s, struct mapping *m) {
    size_t h;

    if (s->count >= s->nbuckets)
        table_grow(s);
    h = hash_ptr(m->p, s->nbuckets);
    m->next = s->buckets[h];
    s->buckets[h] = m;
    s->count++;
}

static void table_remove(struct sim *s, struct mapping *m) {
    struct mapping **pp = &s->buckets[hash_ptr(m->p, s->nbuckets)];

    while (*pp != m)
        pp = &(*pp)->next;
    *pp = m->next;
    s->count--;
}

/* --- helpers (lock held) ------------------------------------------------ */

static void used_add(struct sim *s, uint64_t size, int count_over) {
    s->c.device_used += size;
    if (s->c.device_used > s->c.peak_device_used)
        s->c.peak_device_used = s->c.device_used;
    if (count_over && s->c.device_used > s->capacity)
        s->c.over_capacity++;
}

static int capacity_check(struct sim *s, size_t size, const char *what) {
    char need[32], avail[32], total[32];
    uint64_t free_b;

    if (s->c.device_used < s->capacity && size <= s->capacity - s->c.device_used)
        return 0;
    free_b = s->c.device_used >= s->capacity ? 0 : s->capacity - s->c.device_used;
    return hoff__error(-ENOMEM, "sim: %s of %s: device memory exhausted (%s free of %s)",
                       what, hoff__fmt_size(size, need, sizeof need),
                       hoff__fmt_size(free_b, avail, sizeof avail),
                       hoff__fmt_size(s->capacity, total, sizeof total));
}

/* The managed mapping (p, size), or an error. */
static int find_managed(struct sim *s, const void *p, size_t size,
                        const char *op, struct mapping **out) {
    struct mapping *m = p ? table_find(s, p) : NULL;

    if (!m || m->kind != MAP_MANAGED)
        return hoff__error(-EINVAL, "sim: %s: %p is not a managed mapping", op, p);
    if (m->size != size)
        return hoff__error(-EINVAL, "sim: %s: %p maps %zu bytes, not %zu", op, p,
                           m->size, size);
    *out = m;
    return 0;
}

/* The sorted index of managed mappings: insert, remove, find the one holding p. */
static int sorted_insert(struct sim *s, struct mapping *m) {
    size_t lo = 0, hi = s->nsorted;

    if (s->nsorted == s->cap_sorted) {
        size_t cap = s->cap_sorted ? s->cap_sorted * 2 : 64;
        struct mapping **n = realloc(s->sorted, cap * sizeof *n);

        if (!n)
            return -ENOMEM;
        s->sorted = n;
        s->cap_sorted = cap;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (s->sorted[mid]->p < m->p)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&s->sorted[lo + 1], &s->sorted[lo], (s->nsorted - lo) * sizeof *s->sorted);
    s->sorted[lo] = m;
    s->nsorted++;
    return 0;
}

/* The index of the last mapping starting at or below p, or SIZE_MAX. */
static size_t sorted_at(const struct sim *s, const unsigned char *p) {
    size_t lo = 0, hi = s->nsorted;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (s->sorted[mid]->p <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : SIZE_MAX;
}

static void sorted_remove(struct sim *s, struct mapping *m) {
    size_t i = sorted_at(s, m->p);

    if (i == SIZE_MAX || s->sorted[i] != m)
        return;
    memmove(&s->sorted[i], &s->sorted[i + 1], (s->nsorted - i - 1) * sizeof *s->sorted);
    s->nsorted--;
}

/* The range (p, size): whole 2 MiB pages inside one managed mapping. */
static int find_range(struct sim *s, const void *p, size_t size, const char *op, struct range *r) {
    const unsigned char *q = p;
    size_t grain = HOFF__MANAGED_GRAIN, i;
    struct mapping *m;

    i = q ? sorted_at(s, q) : SIZE_MAX;
    m = i == SIZE_MAX ? NULL : s->sorted[i];
    if (!m || q >= m->p + m->size)
        return hoff__error(-EINVAL, "sim: %s: %p is not in a managed mapping", op, p);
    if ((size_t)(q - m->p) % grain || size == 0 || size % grain || size > m->size - (size_t)(q - m->p))
        return hoff__error(-EINVAL, "sim: %s: (%p, %zu) is not a range of whole 2 MiB pages of the "
                           "mapping (%p, %zu)", op, p, size, (void *)m->p, m->size);
    r->m = m;
    r->first = (size_t)(q - m->p) / grain;
    r->n = size / grain;
    r->p = m->p + r->first * grain;
    r->size = size;
    return 0;
}

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

/* Make page i of r inaccessible: poison, and protect in PROTECT mode. */
static int page_hide(struct sim *s, const struct range *r, size_t i) {
    unsigned char *pp = page_at(r, i);

    memset(pp, SIM_POISON, HOFF__MANAGED_GRAIN);
    if (s->protect == HOFF_SIM_PROTECT && mprotect(pp, HOFF__MANAGED_GRAIN, PROT_NONE) != 0)
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
 * thread) the page is poisoned after the copy. */
static int page_evict(struct sim *s, const struct range *r, size_t i) {
    unsigned char *pp = page_at(r, i);

    if (s->protect != HOFF_SIM_PROTECT) {
        memcpy(shadow_at(r, i), pp, HOFF__MANAGED_GRAIN);
        memset(pp, SIM_POISON, HOFF__MANAGED_GRAIN);
        return 0;
    }
    if (mprotect(pp, HOFF__MANAGED_GRAIN, PROT_READ) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_READ) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    memcpy(shadow_at(r, i), pp, HOFF__MANAGED_GRAIN);
    if (mprotect(pp, HOFF__MANAGED_GRAIN, PROT_NONE) != 0) {
        int e = errno;

        mprotect(pp, HOFF__MANAGED_GRAIN, PROT_READ | PROT_WRITE);
        return hoff__error(-e, "sim: mprotect(PROT_NONE) of %zu bytes failed", HOFF__MANAGED_GRAIN);
    }
    return 0;
}

static int page_show(struct sim *s, const struct range *r, size_t i) {
    if (s->protect == HOFF_SIM_PROTECT &&
        mprotect(page_at(r, i), HOFF__MANAGED_GRAIN, PROT_READ | PROT_WRITE) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_READ|PROT_WRITE) of %zu bytes failed",
                           HOFF__MANAGED_GRAIN);
    return 0;
}

/* Queue a transfer of dur ns on the engine whose busy_until is *busy (the
 * clock of core/xfer.h); call: it is a transfer call of the issuing thread,
 * which pays call_ns first.  Reports it to the observer as kind, over
 * (p, size) (NULL for the NVMe tier's, which has no address). */
static void schedule(struct sim *s, uint64_t *busy, uint64_t dur, int call, hoff__event *after,
                     hoff__event *done, int kind, const void *p, uint64_t size) {
    uint64_t start, end, issued = s->c.now_ns;

    end = hoff__xfer_call(s->c.now_ns, call ? &s->c.issuer_busy_until : NULL, s->call_ns, busy,
                          after && after->recorded ? after->t : 0, s->latency_ns, dur, &start);
    if (call) {
        issued = s->c.issuer_busy_until;
        s->c.transfer_calls++;
    }
    if (done) {
        done->t = end;
        done->recorded = 1;
    }
    if (s->observe)
        s->observe(s->observe_arg, &(struct hoff__xfer_obs){.kind = kind, .p = p, .block = UINT32_MAX, .bytes = size,
                                                            .issued = issued, .start = start, .end = end});
}

/* Compute waits until t (counted as a wait stall). */
static void wait_until(struct sim *s, uint64_t t) {
    if (t > s->c.now_ns) {
        if (s->observe)
            s->observe(s->observe_arg, &(struct hoff__xfer_obs){.kind = HOFF__XF_WAIT, .block = UINT32_MAX,
                                                                .issued = s->c.now_ns, .start = s->c.now_ns, .end = t});
        s->c.wait_stall_ns += t - s->c.now_ns;
        s->c.now_ns = t;
    }
}

/* --- memory ------------------------------------------------------------- */

static int sim_mem_info(struct hoff__backend *be, uint64_t *free_b, uint64_t *total_b) {
    struct sim *s = to_sim(be);

    pthread_mutex_lock(&s->lock);
    if (free_b)
        *free_b = s->c.device_used >= s->capacity ? 0 : s->capacity - s->c.device_used;
    if (total_b)
        *total_b = s->capacity;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int sim_dev_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    if (!out)
        return hoff__error(-EINVAL, "sim: dev_alloc: out is NULL");
    *out = NULL;
    if (size == 0 || size % HOFF__DEVICE_GRAIN)
        return hoff__error(-EINVAL, "sim: dev_alloc: %zu is not a positive multiple of %zu",
                           size, HOFF__DEVICE_GRAIN);
    pthread_mutex_lock(&s->lock);
    rc = capacity_check(s, size, "dev_alloc");
    if (rc)
        goto out;
    m = calloc(1, sizeof *m);
    if (m)
        m->p = aligned_alloc(HOFF__DEVICE_GRAIN, size);
    if (!m || !m->p) {
        free(m);
        rc = hoff__error(-ENOMEM, "sim: dev_alloc: out of host memory for %zu bytes", size);
        goto out;
    }
    m->size = size;
    m->kind = MAP_DEVICE;
    table_insert(s, m);
    used_add(s, size, 0);
    *out = m->p;
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_dev_free(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc = 0;

    pthread_mutex_lock(&s->lock);
    m = p ? table_find(s, p) : NULL;
    if (!m || m->kind != MAP_DEVICE) {
        rc = hoff__error(-EINVAL, "sim: dev_free: %p is not a device allocation", p);
    } else if (m->size != size) {
        rc = hoff__error(-EINVAL, "sim: dev_free: %p holds %zu bytes, not %zu", p,
                         m->size, size);
    } else {
        table_remove(s, m);
        s->c.device_used -= m->size;
        free(m->p);
        free(m);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_managed_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct sim *s = to_sim(be);
    struct mapping *m = NULL;
    unsigned char *raw = MAP_FAILED, *p;
    size_t grain = HOFF__MANAGED_GRAIN, head, tail;
    int rc;

    if (!out)
        return hoff__error(-EINVAL, "sim: managed_alloc: out is NULL");
    *out = NULL;
    if (size == 0 || size % grain || size > SIZE_MAX - grain)
        return hoff__error(-EINVAL, "sim: managed_alloc: %zu is not a positive multiple of %zu",
                           size, grain);
    pthread_mutex_lock(&s->lock);
    rc = capacity_check(s, size, "managed_alloc");
    if (rc)
        goto out;
    m = calloc(1, sizeof *m);
    if (m)
        m->pg = calloc(size / grain, 1); /* every page PG_RESIDENT */
    if (m && m->pg)
        raw = mmap(NULL, size + grain, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!m || !m->pg || raw == MAP_FAILED) {
        if (m)
            free(m->pg);
        free(m);
        rc = hoff__error(-ENOMEM, "sim: managed_alloc: cannot map %zu bytes", size);
        goto out;
    }
    /* Trim the over-mapping to a grain-aligned window. */
    p = (unsigned char *)hoff__align_up((uint64_t)(uintptr_t)raw, grain);
    head = (size_t)(p - raw);
    tail = grain - head;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap(p + size, tail);
    m->p = p;
    m->size = size;
    m->kind = MAP_MANAGED;
    if (sorted_insert(s, m) != 0) {
        munmap(p, size);
        free(m->pg);
        free(m->win);
        free(m);
        rc = hoff__error(-ENOMEM, "sim: managed_alloc: out of memory");
        goto out;
    }
    table_insert(s, m);
    used_add(s, size, 0);
    *out = p;
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void managed_release(struct sim *s, struct mapping *m) {
    size_t i;

    for (i = 0; i < m->size / HOFF__MANAGED_GRAIN; i++)
        if ((m->pg[i] & PG_STATE) == PG_RESIDENT)
            s->c.device_used -= HOFF__MANAGED_GRAIN;
    munmap(m->p, m->size);
    if (m->shadow)
        munmap(m->shadow, m->size);
    free(m->pg);
    free(m->win);
    free(m);
}

static int sim_managed_free(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct mapping *m = NULL;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "managed_free", &m);
    if (rc == 0) {
        table_remove(s, m);
        sorted_remove(s, m);
        managed_release(s, m);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* --- events ------------------------------------------------------------- */

static int sim_event_create(struct hoff__backend *be, hoff__event **out) {
    if (!out)
        return hoff__error(-EINVAL, "sim: event_create: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? 0 : hoff__error(-ENOMEM, "sim: event_create: out of memory");
}

static int sim_event_elapsed_ns(struct hoff__backend *be, hoff__event *a, hoff__event *b, uint64_t *ns) {
    struct sim *s = to_sim(be);
    int rc = 0;

    if (!a || !b || !ns)
        return hoff__error(-EINVAL, "sim: event_elapsed_ns: NULL argument");
    pthread_mutex_lock(&s->lock);
    if (!a->recorded || !b->recorded)
        rc = hoff__error(-EINVAL, "sim: event_elapsed_ns: an event was never recorded");
    else if (a->t > s->c.now_ns || b->t > s->c.now_ns)
        rc = -EAGAIN;
    else
        *ns = b->t >= a->t ? b->t - a->t : 0;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void sim_event_destroy(struct hoff__backend *be, hoff__event *ev) {
    free(ev);
}

static int sim_event_record(struct hoff__backend *be, hoff__event *ev, hoff_stream st) {
    struct sim *s = to_sim(be);

    if (!ev)
        return hoff__error(-EINVAL, "sim: event_record: event is NULL");
    pthread_mutex_lock(&s->lock);
    ev->t = s->c.now_ns;
    ev->recorded = 1;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int sim_event_query(struct hoff__backend *be, hoff__event *ev) {
    struct sim *s = to_sim(be);
    int rc;

    if (!ev)
        return hoff__error(-EINVAL, "sim: event_query: event is NULL");
    pthread_mutex_lock(&s->lock);
    rc = (!ev->recorded || ev->t <= s->c.now_ns) ? 0 : -EAGAIN;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_event_sync(struct hoff__backend *be, hoff__event *ev) {
    struct sim *s = to_sim(be);

    if (!ev)
        return hoff__error(-EINVAL, "sim: event_sync: event is NULL");
    pthread_mutex_lock(&s->lock);
    if (ev->recorded)
        wait_until(s, ev->t);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int sim_stream_wait(struct hoff__backend *be, hoff_stream st, hoff__event *ev) {
    /* Compute is one timeline: a stream waiting is compute waiting. */
    if (!ev)
        return hoff__error(-EINVAL, "sim: stream_wait: event is NULL");
    return sim_event_sync(be, ev);
}

/* The next transfer in direction dir waits for ev: its copy engine starts
 * no earlier (the engine is FIFO, as a CUDA stream is).  An event never
 * recorded is no wait, as cudaStreamWaitEvent has it. */
static int sim_transfer_wait(struct hoff__backend *be, int dir, hoff__event *ev) {
    struct sim *s = to_sim(be);
    uint64_t *busy;

    if (!ev)
        return hoff__error(-EINVAL, "sim: transfer_wait: event is NULL");
    if (dir != HOFF__XFER_D2H && dir != HOFF__XFER_H2D)
        return hoff__error(-EINVAL, "sim: transfer_wait: direction %d (expected D2H 0 or H2D 1)", dir);
    pthread_mutex_lock(&s->lock);
    busy = dir == HOFF__XFER_H2D ? &s->c.h2d_busy_until : &s->c.d2h_busy_until;
    if (ev->recorded && ev->t > *busy)
        *busy = ev->t;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* --- use windows --------------------------------------------------------- */

static int sim_window_open(struct hoff__backend *be, void *p, size_t size, hoff_stream st) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i, npg;
    int rc;

    (void)st; /* one compute timeline */
    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "window_open", &r);
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

static int sim_window_close(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "window_close", &r);
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
                           "window_violations)", what, (void *)r->p, r->size,
                           w->open ? "inside an open use window" : "ordered before its use window closed");
            return;
        }
    }
}

/* --- transfers ---------------------------------------------------------- */

static int sim_evict(struct hoff__backend *be, void *p, size_t size,
                     hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "evict", &r);
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
    for (i = 0; i < r.n; i++) {
        rc = page_evict(s, &r, i);
        if (rc) { /* keep the data where it was (page i is as it was: page_evict undoes itself) */
            while (i-- > 0) {
                page_show(s, &r, i);
                memcpy(page_at(&r, i), shadow_at(&r, i), HOFF__MANAGED_GRAIN);
            }
            goto out;
        }
    }
    for (i = 0; i < r.n; i++)
        r.m->pg[r.first + i] = PG_EVICTED;
    s->c.device_used -= size;
    s->c.bytes_d2h += size;
    schedule(s, &s->c.d2h_busy_until, hoff__copy_ns(size, s->d2h_gbps), 1, after, done, HOFF__XF_EVICT, p, size);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_prefetch(struct hoff__backend *be, void *p, size_t size,
                        hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct range r;
    uint64_t moved = 0;
    size_t i, nohost = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "prefetch", &r);
    if (rc)
        goto out;
    if (range_count(&r, PG_RESIDENT, NULL) != 0) {
        rc = hoff__error(-EALREADY, "sim: prefetch: (%p, %zu) is already resident", p, size);
        goto out;
    }
    range_count(&r, PG_EVICTED, &nohost);
    if (nohost) {
        rc = hoff__error(-EIO, "sim: prefetch: (%p, %zu) has no host copy (spilled and not restored)", p, size);
        goto out;
    }
    for (i = 0; i < r.n; i++) {
        rc = page_show(s, &r, i);
        if (rc)
            goto out; /* pages shown so far hold poison or their bytes: nothing is lost */
    }
    for (i = 0; i < r.n; i++) {
        if ((r.m->pg[r.first + i] & PG_STATE) == PG_EVICTED) {
            memcpy(page_at(&r, i), shadow_at(&r, i), HOFF__MANAGED_GRAIN);
            moved += HOFF__MANAGED_GRAIN;
        }
        r.m->pg[r.first + i] = PG_RESIDENT;
    }
    s->c.bytes_h2d += moved;
    used_add(s, size, 1);
    schedule(s, &s->c.h2d_busy_until, hoff__copy_ns(moved, s->h2d_gbps), 1, after, done, HOFF__XF_PREFETCH, p, moved);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_discard(struct hoff__backend *be, void *p, size_t size,
                       hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "discard", &r);
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
            if (rc)
                goto out;
            if (st == PG_RESIDENT)
                s->c.device_used -= HOFF__MANAGED_GRAIN;
        }
        r.m->pg[r.first + i] = PG_DISCARDED;
    }
    schedule(s, &s->c.d2h_busy_until, 0, 1, after, done, HOFF__XF_DISCARD, p, size);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream st,
                     uint64_t *stall_ns) {
    struct sim *s = to_sim(be);
    struct range r;
    uint64_t stall = 0, moved = 0, shown = 0;
    size_t i, nohost = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "fault", &r);
    if (rc || range_count(&r, PG_RESIDENT, NULL) == r.n)
        goto out;
    range_count(&r, PG_EVICTED, &nohost);
    if (nohost) {
        rc = hoff__error(-EIO, "sim: fault: (%p, %zu) has no host copy (spilled and not restored)", p, size);
        goto out;
    }
    for (i = 0; i < r.n; i++) {
        uint8_t v = r.m->pg[r.first + i] & PG_STATE;

        if (v == PG_RESIDENT)
            continue;
        rc = page_show(s, &r, i);
        if (rc)
            goto out;
        if (v == PG_EVICTED) {
            memcpy(page_at(&r, i), shadow_at(&r, i), HOFF__MANAGED_GRAIN);
            moved += HOFF__MANAGED_GRAIN;
        }
        r.m->pg[r.first + i] = PG_RESIDENT;
        shown += HOFF__MANAGED_GRAIN;
    }
    stall = hoff__sat_add(s->fault_ns, hoff__copy_ns(moved, s->fault_gbps));
    s->c.bytes_faulted += moved;
    used_add(s, shown, 1);
    s->c.faults++;
    s->c.fault_stall_ns += stall;
    if (s->observe)
        s->observe(s->observe_arg, &(struct hoff__xfer_obs){.kind = HOFF__XF_FAULT, .p = p, .block = UINT32_MAX,
                                                            .bytes = size, .issued = s->c.now_ns, .start = s->c.now_ns,
                                                            .end = hoff__sat_add(s->c.now_ns, stall)});
    s->c.now_ns = hoff__sat_add(s->c.now_ns, stall);
out:
    pthread_mutex_unlock(&s->lock);
    if (stall_ns)
        *stall_ns = stall;
    return rc;
}

static int sim_populate(struct hoff__backend *be, void *p, size_t size, hoff_stream st) {
    /* st: one compute timeline, and the pages are shown now */
    struct sim *s = to_sim(be);
    struct range r;
    uint64_t shown = 0;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "populate", &r);
    for (i = 0; rc == 0 && i < r.n; i++) {
        if ((r.m->pg[r.first + i] & PG_STATE) == PG_RESIDENT)
            continue;
        rc = page_show(s, &r, i);
        if (rc)
            break;
        r.m->pg[r.first + i] = PG_RESIDENT; /* the view still holds poison: undefined */
        shown += HOFF__MANAGED_GRAIN;
    }
    if (shown)
        used_add(s, shown, 1);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* --- the rest ----------------------------------------------------------- */

static int sim_memcpy(struct hoff__backend *be, void *dst, const void *src, size_t n) {
    if (n && (!dst || !src))
        return hoff__error(-EINVAL, "sim: memcpy: NULL pointer");
    if (n)
        memcpy(dst, src, n);
    return 0;
}

static int sim_sync(struct hoff__backend *be) {
    struct sim *s = to_sim(be);

    pthread_mutex_lock(&s->lock);
    wait_until(s, s->c.d2h_busy_until > s->c.h2d_busy_until ? s->c.d2h_busy_until
                                                             : s->c.h2d_busy_until);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static uint64_t sim_clock_ns(struct hoff__backend *be) {
    struct sim *s = to_sim(be);
    uint64_t t;

    pthread_mutex_lock(&s->lock);
    t = s->c.now_ns;
    pthread_mutex_unlock(&s->lock);
    return t;
}

static int sim_compute(struct hoff__backend *be, hoff_stream st, uint64_t ns) {
    struct sim *s = to_sim(be);

    pthread_mutex_lock(&s->lock);
    s->c.now_ns = hoff__sat_add(s->c.now_ns, ns);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void sim_close(struct hoff__backend *be) {
    struct sim *s = to_sim(be);
    size_t i, left = 0;

    if (!be)
        return;
    for (i = 0; i < s->nbuckets; i++) {
        struct mapping *m = s->buckets[i], *next;

        for (; m; m = next) {
            next = m->next;
            left++;
            if (m->kind == MAP_MANAGED) {
                managed_release(s, m);
            } else {
                free(m->p);
                free(m);
            }
        }
    }
    if (left)
        hoff__log(HOFF_LOG_DEBUG, "sim: close released %zu mappings still held", left);
    free(s->buckets);
    free(s->sorted);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* --- tiers ---------------------------------------------------------------- */

static int sim_host_bytes(struct hoff__backend *be, void *p, size_t size, void **host) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t nohost = 1;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "host_bytes", &r);
    if (rc == 0 && (range_count(&r, PG_EVICTED, &nohost) != r.n || nohost || !r.m->shadow))
        rc = hoff__error(-EINVAL, "sim: host_bytes: (%p, %zu) has no host copy", p, size);
    if (rc == 0)
        *host = shadow_at(&r, 0);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_host_drop(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "host_drop", &r);
    if (rc == 0 && range_count(&r, PG_EVICTED, NULL) != r.n)
        rc = hoff__error(-EINVAL, "sim: host_drop: (%p, %zu) is not evicted", p, size);
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

static int sim_host_make(struct hoff__backend *be, void *p, size_t size, void **host) {
    struct sim *s = to_sim(be);
    struct range r;
    size_t i;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_range(s, p, size, "host_make", &r);
    if (rc == 0 && range_count(&r, PG_EVICTED, NULL) != r.n)
        rc = hoff__error(-EINVAL, "sim: host_make: (%p, %zu) is not evicted", p, size);
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

/* One simulated NVMe device: reads and writes share it.  The tier thread
 * runs the real I/O whenever it gets to it, so the virtual clock may have
 * moved on since the operation was issued; it starts in virtual time at its
 * issue (after, recorded then) or when the device is free, not when the
 * thread got there, so the simulation stays deterministic. */
static int sim_nvme_model(struct hoff__backend *be, uint64_t bytes, int write, hoff__event *after,
                          hoff__event *done) {
    struct sim *s = to_sim(be);
    uint64_t now;

    pthread_mutex_lock(&s->lock);
    now = s->c.now_ns;
    if (after && after->recorded && after->t < now)
        s->c.now_ns = after->t; /* schedule() starts from now: from the issue instead */
    schedule(s, &s->c.nvme_busy_until, hoff__copy_ns(bytes, write ? s->nvme_write_gbps : s->nvme_read_gbps), 0,
             after, done, write ? HOFF__XF_SPILL : HOFF__XF_RESTORE, NULL, bytes);
    s->c.now_ns = now;
    if (write)
        s->c.bytes_nvme_written += bytes;
    else
        s->c.bytes_nvme_read += bytes;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* The node is only a label on sim: one host memory. */
static int sim_evict_node(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after,
                          hoff__event *done) {
    (void)node;
    return sim_evict(be, p, size, after, done);
}

static const struct hoff__backend_ops sim_ops = {
    .evict_node = sim_evict_node,
    .host_bytes = sim_host_bytes,
    .host_drop = sim_host_drop,
    .host_make = sim_host_make,
    .nvme_model = sim_nvme_model,
    .name = "sim",
    .close = sim_close,
    .mem_info = sim_mem_info,
    .dev_alloc = sim_dev_alloc,
    .dev_free = sim_dev_free,
    .managed_alloc = sim_managed_alloc,
    .managed_free = sim_managed_free,
    .event_create = sim_event_create,
    .event_create_timed = sim_event_create, /* every sim event carries its time */
    .event_elapsed_ns = sim_event_elapsed_ns,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .stream_wait = sim_stream_wait,
    .evict = sim_evict,
    .prefetch = sim_prefetch,
    .discard = sim_discard,
    .fault = sim_fault,
    .populate = sim_populate,
    .memcpy = sim_memcpy,
    .sync = sim_sync,
    .clock_ns = sim_clock_ns,
    .compute = sim_compute,
    .transfer_wait = sim_transfer_wait,
    .window_open = sim_window_open,
    .window_close = sim_window_close,
};

static int check_rate(double v, const char *env, const char *field) {
    if (!(v > 0))
        return hoff__error(-EINVAL, "%s (%s) must be a rate in GB/s greater than 0",
                           env, field);
    return 0;
}

int hoff__backend_open_sim(const struct hoff_config *cfg, struct hoff__backend **out) {
    struct sim *s;
    int rc;

    if (!cfg || !out)
        return hoff__error(-EINVAL, "sim: open: NULL argument");
    *out = NULL;
    if (cfg->sim_device_bytes == 0)
        return hoff__error(-EINVAL, "HOFF_SIM_DEVICE (sim_device_bytes) must be greater than 0");
    if ((rc = check_rate(cfg->sim_h2d_gbps, "HOFF_SIM_H2D_GBPS", "sim_h2d_gbps")) ||
        (rc = check_rate(cfg->sim_d2h_gbps, "HOFF_SIM_D2H_GBPS", "sim_d2h_gbps")) ||
        (rc = check_rate(cfg->sim_fault_gbps, "HOFF_SIM_FAULT_GBPS", "sim_fault_gbps")))
        return rc;
    if (cfg->sim_protect != HOFF_SIM_POISON && cfg->sim_protect != HOFF_SIM_PROTECT)
        return hoff__error(-EINVAL, "HOFF_SIM_PROTECT (sim_protect) must be 0 (poison) or 1 (protect)");

    s = calloc(1, sizeof *s);
    if (!s)
        return hoff__error(-ENOMEM, "sim: open: out of memory");
    s->nbuckets = 64;
    s->buckets = calloc(s->nbuckets, sizeof *s->buckets);
    if (!s->buckets || pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s->buckets);
        free(s);
        return hoff__error(-ENOMEM, "sim: open: out of memory");
    }
    s->be.ops = &sim_ops;
    s->capacity = cfg->sim_device_bytes;
    s->h2d_gbps = cfg->sim_h2d_gbps;
    s->d2h_gbps = cfg->sim_d2h_gbps;
    s->fault_gbps = cfg->sim_fault_gbps;
    s->nvme_read_gbps = cfg->sim_nvme_read_gbps > 0 ? cfg->sim_nvme_read_gbps : 6.5;
    s->nvme_write_gbps = cfg->sim_nvme_write_gbps > 0 ? cfg->sim_nvme_write_gbps : 3.5;
    s->latency_ns = cfg->sim_latency_ns;
    s->call_ns = cfg->sim_call_ns;
    s->fault_ns = cfg->sim_fault_ns;
    s->protect = cfg->sim_protect;
    *out = &s->be;
    return 0;
}

int hoff__sim_observe(struct hoff__backend *be, hoff__xfer_observer fn, void *arg) {
    struct sim *s;

    if (!be || be->ops != &sim_ops)
        return -ENOTSUP;
    s = to_sim(be);
    pthread_mutex_lock(&s->lock);
    s->observe = fn;
    s->observe_arg = fn ? arg : NULL;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int hoff__sim_counters(struct hoff__backend *be, struct hoff__sim_counters *out) {
    struct sim *s;

    if (!out)
        return hoff__error(-EINVAL, "sim: counters: out is NULL");
    /* A copy of the table with some ops wrapped (hoff-plan's recorder) is
     * still the sim: its close is the sim's. */
    if (!be || !be->ops || be->ops->close != sim_close) {
        memset(out, 0, sizeof *out);
        return -ENOTSUP;
    }
    s = to_sim(be);
    pthread_mutex_lock(&s->lock);
    *out = s->c;
    pthread_mutex_unlock(&s->lock);
    return 0;
}
