/* sim_map.c — the sim's memory: the table of mappings (a hash by address, and the managed ones sorted
 * by address so a range inside one is found), the device's capacity books (device_used), and the
 * memory ops: mem_info, dev_alloc/free, managed_alloc/free, memcpy.  The model: backend/sim.h.
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
#include "core/grow.h"

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

void hoff__sim_used_add(struct sim *s, uint64_t size, int count_over) {
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
    return hoff__error(-ENOMEM, "sim: %s of %s: device memory exhausted (%s free of %s)", what,
                       hoff__fmt_size(size, need, sizeof need), hoff__fmt_size(free_b, avail, sizeof avail),
                       hoff__fmt_size(s->capacity, total, sizeof total));
}

/* The managed mapping (p, size), or an error. */
static int find_managed(struct sim *s, const void *p, size_t size, const char *op, struct mapping **out) {
    struct mapping *m = p ? table_find(s, p) : NULL;

    if (!m || m->kind != MAP_MANAGED)
        return hoff__error(-EINVAL, "sim: %s: %p is not a managed mapping", op, p);
    if (m->size != size)
        return hoff__error(-EINVAL, "sim: %s: %p maps %zu bytes, not %zu", op, p, m->size, size);
    *out = m;
    return 0;
}

/* The sorted index of managed mappings: insert, remove, find the one holding p. */
static int sorted_insert(struct sim *s, struct mapping *m) {
    size_t lo = 0, hi = s->nsorted;

    if (HOFF__GROW(s->sorted, s->cap_sorted, s->nsorted + 1))
        return -ENOMEM;
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
int hoff__sim_find_range(struct sim *s, const void *p, size_t size, const char *op, struct range *r) {
    const unsigned char *q = p;
    size_t grain = HOFF__MANAGED_GRAIN, i;
    struct mapping *m;

    i = q ? sorted_at(s, q) : SIZE_MAX;
    m = i == SIZE_MAX ? NULL : s->sorted[i];
    if (!m || q >= m->p + m->size)
        return hoff__error(-EINVAL, "sim: %s: %p is not in a managed mapping", op, p);
    if ((size_t)(q - m->p) % grain || size == 0 || size % grain || size > m->size - (size_t)(q - m->p))
        return hoff__error(-EINVAL,
                           "sim: %s: (%p, %zu) is not a range of whole 2 MiB pages of the "
                           "mapping (%p, %zu)",
                           op, p, size, (void *)m->p, m->size);
    r->m = m;
    r->first = (size_t)(q - m->p) / grain;
    r->n = size / grain;
    r->p = m->p + r->first * grain;
    r->size = size;
    return 0;
}

/* --- memory ------------------------------------------------------------- */

int hoff__sim_mem_info(struct hoff__backend *be, uint64_t *free_b, uint64_t *total_b) {
    struct sim *s = to_sim(be);

    pthread_mutex_lock(&s->lock);
    if (free_b)
        *free_b = s->c.device_used >= s->capacity ? 0 : s->capacity - s->c.device_used;
    if (total_b)
        *total_b = s->capacity;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int hoff__sim_dev_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc;

    if (!out)
        return hoff__error(-EINVAL, "sim: dev_alloc: out is NULL");
    *out = NULL;
    if (size == 0 || size % HOFF__DEVICE_GRAIN)
        return hoff__error(-EINVAL, "sim: dev_alloc: %zu is not a positive multiple of %zu", size, HOFF__DEVICE_GRAIN);
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
    hoff__sim_used_add(s, size, 0);
    *out = m->p;
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_dev_free(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct mapping *m;
    int rc = 0;

    pthread_mutex_lock(&s->lock);
    m = p ? table_find(s, p) : NULL;
    if (!m || m->kind != MAP_DEVICE) {
        rc = hoff__error(-EINVAL, "sim: dev_free: %p is not a device allocation", p);
    } else if (m->size != size) {
        rc = hoff__error(-EINVAL, "sim: dev_free: %p holds %zu bytes, not %zu", p, m->size, size);
    } else {
        table_remove(s, m);
        s->c.device_used -= m->size;
        free(m->p);
        free(m);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_managed_alloc(struct hoff__backend *be, size_t size, void **out) {
    struct sim *s = to_sim(be);
    struct mapping *m = NULL;
    unsigned char *raw = MAP_FAILED, *p;
    size_t grain = HOFF__MANAGED_GRAIN, head, tail;
    int rc;

    if (!out)
        return hoff__error(-EINVAL, "sim: managed_alloc: out is NULL");
    *out = NULL;
    if (size == 0 || size % grain || size > SIZE_MAX - grain)
        return hoff__error(-EINVAL, "sim: managed_alloc: %zu is not a positive multiple of %zu", size, grain);
    pthread_mutex_lock(&s->lock);
    rc = capacity_check(s, size, "managed_alloc");
    if (rc)
        goto out;
    m = calloc(1, sizeof *m);
    if (m)
        m->pg = calloc(size / grain, 1); /* every page PG_RESIDENT */
    if (m && m->pg)
        raw = mmap(NULL, size + grain, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
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
    hoff__sim_used_add(s, size, 0);
    *out = p;
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void hoff__sim_managed_release(struct sim *s, struct mapping *m) {
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

int hoff__sim_managed_free(struct hoff__backend *be, void *p, size_t size) {
    struct sim *s = to_sim(be);
    struct mapping *m = NULL;
    int rc;

    pthread_mutex_lock(&s->lock);
    rc = find_managed(s, p, size, "managed_free", &m);
    if (rc == 0) {
        table_remove(s, m);
        sorted_remove(s, m);
        hoff__sim_managed_release(s, m);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_memcpy(struct hoff__backend *be, void *dst, const void *src, size_t n) {
    if (n && (!dst || !src))
        return hoff__error(-EINVAL, "sim: memcpy: NULL pointer");
    if (n)
        memcpy(dst, src, n);
    return 0;
}
