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
 * Events are {t, recorded}.  event_record(ev, s) sets t = now.  event_query
 * is 0 for an event never recorded or with t <= now, else -EAGAIN.
 * event_sync and stream_wait both make compute wait: if t > now, now = t and
 * the difference is added to wait_stall_ns.  sync() waits the same way for
 * both engines' busy_until.
 *
 * Memory.  dev_alloc is host memory aligned to 512 bytes.  managed_alloc is an
 * anonymous mmap aligned to 2 MiB, with a state (resident, evicted,
 * discarded) and a host shadow buffer allocated at its first eviction and
 * freed with the mapping.  device_used = dev_alloc bytes + resident managed
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
enum map_state { ST_RESIDENT, ST_EVICTED, ST_DISCARDED };

struct mapping {
    struct mapping *next; /* hash chain */
    unsigned char *p;
    size_t size;
    int kind;              /* enum map_kind */
    int state;             /* enum map_state (managed only) */
    unsigned char *shadow; /* host copy, managed only, allocated lazily */
};

struct sim {
    struct hoff__backend be; /* first: the ops table */
    pthread_mutex_t lock;
    uint64_t capacity;
    double h2d_gbps, d2h_gbps, fault_gbps, nvme_read_gbps, nvme_write_gbps;
    uint64_t latency_ns, fault_ns;
    int protect;
    struct mapping **buckets; /* power-of-two hash table keyed by address */
    size_t nbuckets, count;
    struct hoff__sim_counters c; /* now_ns and busy_until live here too */
};

static const struct hoff__backend_ops sim_ops;

static struct sim *to_sim(struct hoff__backend *be) {
    return (struct sim *)be;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ceil(bytes / gbps) in ns, without libm; a quotient within 1e-12 of an
 * integer is taken as that integer so that exact rates give exact times. */
static uint64_t xfer_ns(uint64_t bytes, double gbps) {
    double q;
    uint64_t t;

    if (bytes == 0)
        return 0;
    q = (double)bytes / gbps;
    if (!(q < 1.8e19))
        return UINT64_MAX / 4;
    t = (uint64_t)q;
    if ((double)t < q && q - (double)t > q * 1e-12)
        t++;
    return t;
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

/* Make the device view inaccessible: poison, and protect in PROTECT mode. */
static int view_hide(struct sim *s, struct mapping *m) {
    memset(m->p, SIM_POISON, m->size);
    if (s->protect == HOFF_SIM_PROTECT && mprotect(m->p, m->size, PROT_NONE) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_NONE) of %zu bytes failed",
                           m->size);
    return 0;
}

static int view_show(struct sim *s, struct mapping *m) {
    if (s->protect == HOFF_SIM_PROTECT &&
        mprotect(m->p, m->size, PROT_READ | PROT_WRITE) != 0)
        return hoff__error(-errno, "sim: mprotect(PROT_READ|PROT_WRITE) of %zu bytes failed",
                           m->size);
    return 0;
}

/* Queue a transfer of dur ns on the engine whose busy_until is *busy. */
static void schedule(struct sim *s, uint64_t *busy, uint64_t dur,
                     hoff__event *after, hoff__event *done) {
    uint64_t start = s->c.now_ns, end;

    if (*busy > start)
        start = *busy;
    if (after && after->recorded && after->t > start)
        start = after->t;
    end = sat_add(start, sat_add(s->latency_ns, dur));
    *busy = end;
    if (done) {
        done->t = end;
        done->recorded = 1;
    }
}

/* Compute waits until t (counted as a wait stall). */
static void wait_until(struct sim *s, uint64_t t) {
    if (t > s->c.now_ns) {
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
        raw = mmap(NULL, size + grain, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!m || raw == MAP_FAILED) {
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
    m->state = ST_RESIDENT;
    table_insert(s, m);
    used_add(s, size, 0);
    *out = p;
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void managed_release(struct sim *s, struct mapping *m) {
    if (m->state == ST_RESIDENT)
        s->c.device_used -= m->size;
    munmap(m->p, m->size);
    free(m->shadow);
    free(m);
}

static int sim_managed_free(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "managed_free", &m);
    if (rc == 0) {
        table_remove(s, m);
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

/* --- transfers ---------------------------------------------------------- */

static int sim_evict(struct hoff__backend *be, void *p, size_t size,
                     hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "evict", &m);
    if (rc)
        goto out;
    if (m->state != ST_RESIDENT) {
        rc = hoff__error(-EALREADY, "sim: evict: %p is not resident", p);
        goto out;
    }
    if (!m->shadow && !(m->shadow = malloc(size))) {
        rc = hoff__error(-ENOMEM, "sim: evict: no host memory for %zu bytes", size);
        goto out;
    }
    memcpy(m->shadow, m->p, size);
    rc = view_hide(s, m);
    if (rc) {
        memcpy(m->p, m->shadow, size); /* keep the data where it was */
        goto out;
    }
    m->state = ST_EVICTED;
    s->c.device_used -= size;
    s->c.bytes_d2h += size;
    schedule(s, &s->c.d2h_busy_until, xfer_ns(size, s->d2h_gbps), after, done);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_prefetch(struct hoff__backend *be, void *p, size_t size,
                        hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    uint64_t dur = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "prefetch", &m);
    if (rc)
        goto out;
    if (m->state == ST_RESIDENT) {
        rc = hoff__error(-EALREADY, "sim: prefetch: %p is already resident", p);
        goto out;
    }
    if (m->state == ST_EVICTED && !m->shadow) {
        rc = hoff__error(-EIO, "sim: prefetch: %p has no host copy (spilled and not restored)", p);
        goto out;
    }
    rc = view_show(s, m);
    if (rc)
        goto out;
    if (m->state == ST_EVICTED) {
        memcpy(m->p, m->shadow, size);
        s->c.bytes_h2d += size;
        dur = xfer_ns(size, s->h2d_gbps);
    }
    m->state = ST_RESIDENT;
    used_add(s, size, 1);
    schedule(s, &s->c.h2d_busy_until, dur, after, done);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_discard(struct hoff__backend *be, void *p, size_t size,
                       hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "discard", &m);
    if (rc)
        goto out;
    if (m->state == ST_DISCARDED) {
        rc = hoff__error(-EALREADY, "sim: discard: %p is already discarded", p);
        goto out;
    }
    if (m->state == ST_RESIDENT) {
        rc = view_hide(s, m);
        if (rc)
            goto out;
        s->c.device_used -= size;
    }
    m->state = ST_DISCARDED;
    schedule(s, &s->c.d2h_busy_until, 0, after, done);
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream st,
                     uint64_t *stall_ns) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    uint64_t stall = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "fault", &m);
    if (rc || m->state == ST_RESIDENT)
        goto out;
    stall = s->fault_ns;
    if (m->state == ST_EVICTED && !m->shadow) {
        rc = hoff__error(-EIO, "sim: fault: %p has no host copy (spilled and not restored)", p);
        goto out;
    }
    rc = view_show(s, m);
    if (rc)
        goto out;
    if (m->state == ST_EVICTED) {
        memcpy(m->p, m->shadow, size);
        stall = sat_add(stall, xfer_ns(size, s->fault_gbps));
        s->c.bytes_faulted += size;
    }
    m->state = ST_RESIDENT;
    used_add(s, size, 1);
    s->c.faults++;
    s->c.fault_stall_ns += stall;
    s->c.now_ns = sat_add(s->c.now_ns, stall);
out:
    pthread_mutex_unlock(&s->lock);
    if (stall_ns)
        *stall_ns = stall;
    return rc;
}

static int sim_populate(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "populate", &m);
    if (rc || m->state == ST_RESIDENT)
        goto out;
    rc = view_show(s, m);
    if (rc)
        goto out;
    m->state = ST_RESIDENT; /* the view still holds poison: undefined */
    used_add(s, size, 1);
out:
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
    s->c.now_ns = sat_add(s->c.now_ns, ns);
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
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* --- tiers ---------------------------------------------------------------- */

static int sim_host_bytes(struct hoff__backend *be, void *p, size_t size, void **host) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "host_bytes", &m);
    if (rc == 0 && (m->state != ST_EVICTED || !m->shadow))
        rc = hoff__error(-EINVAL, "sim: host_bytes: %p has no host copy", p);
    if (rc == 0)
        *host = m->shadow;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_host_drop(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "host_drop", &m);
    if (rc == 0 && m->state != ST_EVICTED)
        rc = hoff__error(-EINVAL, "sim: host_drop: %p is not evicted", p);
    if (rc == 0) {
        free(m->shadow); /* the bytes live on the NVMe tier now */
        m->shadow = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_host_make(struct hoff__backend *be, void *p, size_t size, void **host) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "host_make", &m);
    if (rc == 0 && m->state != ST_EVICTED)
        rc = hoff__error(-EINVAL, "sim: host_make: %p is not evicted", p);
    if (rc == 0 && !m->shadow && !(m->shadow = malloc(size)))
        rc = hoff__error(-ENOMEM, "sim: host_make: no host memory for %zu bytes", size);
    if (rc == 0)
        *host = m->shadow;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* One simulated NVMe device: reads and writes share it. */
static int sim_nvme_model(struct hoff__backend *be, uint64_t bytes, int write, hoff__event *after,
                          hoff__event *done) {
    struct sim *s = to_sim(be);

    pthread_mutex_lock(&s->lock);
    schedule(s, &s->c.nvme_busy_until, xfer_ns(bytes, write ? s->nvme_write_gbps : s->nvme_read_gbps),
             after, done);
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
    s->fault_ns = cfg->sim_fault_ns;
    s->protect = cfg->sim_protect;
    *out = &s->be;
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
