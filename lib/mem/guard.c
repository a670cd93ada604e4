/* guard.c — the oversubscription guard: managed memory is mapped only while the device can hold it.
 * Threading: caller holds the context lock.
 *
 * Two tests, both must pass unless HOFF_OVERSUBSCRIBE=1:
 *  1. hoff's own books: device-pool bytes + managed bytes that hold device
 *     memory (every mapped managed byte that is not known to be on the
 *     host) + the new bytes + the margin <= the device's total.  A fresh
 *     cudaMallocManaged mapping has no pages until first touch, so
 *     cudaMemGetInfo alone would let a burst of mappings through.
 *  2. the device's word: the new bytes + the margin <= what it reports free
 *     (other processes share the GPU). */
#include "config.h"

#include <errno.h>

#include "core/core.h"
#include "mem/block.h"
#include "mem/guard.h"
#include "mem/mem.h"
#include "mem/residency.h"

int hoff__guard_init(struct hoff__mem *mem) {
    uint64_t free_b = 0, total_b = 0;
    char a[32], b[32], c[32];
    int rc;

    rc = mem->be->ops->mem_info(mem->be, &free_b, &total_b);
    if (rc)
        return hoff__error(rc, "cannot read the device's memory size (%s)", hoff_strerror(rc));
    mem->guard.total = total_b;
    if (mem->lim.oversubscribe || !mem->lim.budget_bytes)
        return 0;
    if (mem->lim.budget_bytes + mem->lim.oversub_margin_bytes > total_b)
        return hoff__error(-EINVAL,
                           "HOFF_BUDGET=%s does not fit the device: it has %s in all and %s is kept free "
                           "(HOFF_OVERSUB_MARGIN); lower the budget, or set HOFF_OVERSUBSCRIBE=1 to allow it",
                           hoff__fmt_size(mem->lim.budget_bytes, a, sizeof a), hoff__fmt_size(total_b, b, sizeof b),
                           hoff__fmt_size(mem->lim.oversub_margin_bytes, c, sizeof c));
    return 0;
}

/* Plain device memory hoff holds: the device pool, and the graph pool's
 * blocks (cudaMalloc'd too; kept for captured graphs until shutdown).  Every
 * book below counts device memory through this one sum. */
static uint64_t plain_pools(const struct hoff__mem *mem) {
    return mem->pools[HOFF__POOL_DEVICE].mapped_bytes + mem->graph_pool.mapped_bytes;
}

/* ...and the kept managed blocks (hoff_keep: gradients made before hoff knew
 * them), which hold the device as the device pool does until they are freed
 * and which the budget no longer counts. */
static uint64_t device_pools(const struct hoff__mem *mem) {
    return plain_pools(mem) + mem->res.kept;
}

/* Device memory hoff may hold by its books: the device pools, and every
 * mapped managed byte not known to be on the host. */
static uint64_t on_device(const struct hoff__mem *mem) {
    const struct hoff__pool *mp = &mem->pools[HOFF__POOL_MANAGED];
    uint64_t host = mem->res.host;

    return plain_pools(mem) + (mp->mapped_bytes > host ? mp->mapped_bytes - host : 0);
}

int hoff__guard_check(void *arg, size_t bytes) {
    struct hoff__mem *mem = arg;
    uint64_t free_b = 0, total_b = 0, margin = mem->lim.oversub_margin_bytes;
    uint64_t on_dev;
    char a[32], b[32], c[32];
    int rc;

    if (mem->lim.oversubscribe)
        return 0;
    rc = mem->be->ops->mem_info(mem->be, &free_b, &total_b);
    if (rc)
        return rc;
    on_dev = on_device(mem);
    if (on_dev + bytes + margin > total_b || bytes + margin > free_b) {
        HOFF__STAT_ADD(&mem->st, oversub_refusals, 1);
        return hoff__error(-EOVERFLOW,
                           "refusing to map %s of managed memory: the device has %s free of %s and "
                           "hoff holds %s there, with %s kept free (HOFF_OVERSUB_MARGIN); "
                           "set HOFF_OVERSUBSCRIBE=1 to allow it",
                           hoff__fmt_size(bytes, a, sizeof a), hoff__fmt_size(free_b, b, sizeof b),
                           hoff__fmt_size(total_b, c, sizeof c), hoff__fmt_size(on_dev, (char[32]){0}, 32),
                           hoff__fmt_size(margin, (char[32]){0}, 32));
    }
    return 0;
}

uint64_t hoff__guard_cap(const struct hoff__mem *mem) {
    uint64_t pool = device_pools(mem) + mem->guard.growing;
    uint64_t margin = mem->lim.oversub_margin_bytes;

    if (mem->lim.oversubscribe || !mem->guard.total)
        return 0;
    /* At least one byte: 0 would mean "no limit". */
    return pool + margin < mem->guard.total ? mem->guard.total - pool - margin : 1;
}

int hoff__guard_check_device(void *arg, size_t bytes) {
    struct hoff__mem *mem = arg;
    uint64_t pool = device_pools(mem);
    char a[32], b[32], c[32];
    int rc;

    if (!mem->guard.total)
        return 0;
    if (pool + bytes > mem->guard.total) /* no driver can map that: say so before asking */
        return hoff__error(-ENOMEM,
                           "cannot grow the device pool by %s: hoff's device pools (graph-private blocks "
                           "included) hold %s of the device's %s",
                           hoff__fmt_size(bytes, a, sizeof a), hoff__fmt_size(pool, b, sizeof b),
                           hoff__fmt_size(mem->guard.total, c, sizeof c));
    if (mem->lim.oversubscribe)
        return 0; /* the user lets the driver share the device as it likes */
    /* Make the room now, and wait for it, rather than leave the driver to
     * evict hoff's blocks for cudaMalloc, behind hoff's books. */
    mem->guard.growing = bytes;
    rc = hoff__res_fit_device(mem);
    mem->guard.growing = 0;
    if (rc)
        hoff__log(HOFF_LOG_DEBUG,
                  "the device pool grows by %s while offload blocks that cannot move hold "
                  "the room; the driver may evict some (driver_drift_bytes)",
                  hoff__fmt_size(bytes, a, sizeof a));
    return 0;
}

void hoff__guard_sample(struct hoff__mem *mem) {
    uint64_t free_b = 0, total_b = 0, used, mine;

    if (mem->be->ops->mem_info(mem->be, &free_b, &total_b) != 0 || free_b > total_b)
        return;
    used = total_b - free_b;
    mine = device_pools(mem) + mem->res.resident;
    HOFF__STAT_SET(&mem->st, device_foreign_bytes, used > mine ? used - mine : 0);
}

/* --- driver drift, measured on moves ---------------------------------------- */

#define PROBE_EVERY_NS 1000000ull /* one measured move a millisecond at most */

/* What both pools hold from the backend: a new managed mapping is made
 * resident at once (cuda), a device-pool one is device memory, an unmap
 * gives memory back; any of these during a measure changes the free memory
 * by more than the eviction. */
static uint64_t mapped(const struct hoff__mem *mem) {
    return device_pools(mem) + mem->pools[HOFF__POOL_MANAGED].mapped_bytes;
}

void hoff__guard_probe_issue(struct hoff__mem *mem, const struct hoff__block *b, int evict) {
    struct hoff__guard *g = &mem->guard;
    uint64_t free_b = 0, total_b = 0, now;

    if (g->probe) {
        if (b != g->probe)
            g->probe_spoiled = 1;
        return;
    }
    /* Only a lone eviction of one block says something: a prefetch may
     * take memory the driver still holds for discarded pages (freed lazily),
     * so taking less than the block would not mean drift. */
    if (evict != 1 || mem->res.inf_head)
        return;
    if (g->fault_recorded && mem->be->ops->event_query(mem->be, g->fault_ev) != 0)
        return; /* a page-in is still moving pages */
    now = mem->be->ops->clock_ns(mem->be);
    if (g->probe_last_ns && now - g->probe_last_ns < PROBE_EVERY_NS)
        return;
    if (mem->be->ops->mem_info(mem->be, &free_b, &total_b) != 0)
        return;
    g->probe = b;
    g->probe_evict = evict;
    g->probe_spoiled = 0;
    g->probe_free0 = free_b;
    g->probe_mapped0 = mapped(mem);
    g->probe_last_ns = now;
}

void hoff__guard_fault(struct hoff__mem *mem, hoff_stream s) {
    struct hoff__guard *g = &mem->guard;

    g->probe_spoiled = 1;
    if (!g->fault_ev && mem->be->ops->event_create(mem->be, &g->fault_ev) != 0)
        g->fault_ev = NULL;
    if (g->fault_ev && mem->be->ops->event_record(mem->be, g->fault_ev, s) == 0)
        g->fault_recorded = 1;
    else /* cannot tell when it is done: measure nothing more */
        g->probe_last_ns = UINT64_MAX - PROBE_EVERY_NS;
}

void hoff__guard_close(struct hoff__mem *mem) {
    if (mem->guard.fault_ev)
        mem->be->ops->event_destroy(mem->be, mem->guard.fault_ev);
    mem->guard.fault_ev = NULL;
    mem->guard.fault_recorded = 0;
}

void hoff__guard_probe_cancel(struct hoff__mem *mem, const struct hoff__block *b) {
    if (mem->guard.probe == b)
        mem->guard.probe = NULL;
}

void hoff__guard_probe_retire(struct hoff__mem *mem, const struct hoff__block *b, int rc) {
    struct hoff__guard *g = &mem->guard;
    uint64_t free_b = 0, total_b = 0, moved;

    if (g->probe != b)
        return;
    g->probe = NULL;
    if (rc || g->probe_spoiled || mapped(mem) != g->probe_mapped0 ||
        mem->be->ops->mem_info(mem->be, &free_b, &total_b) != 0)
        return;
    if (g->probe_evict)
        moved = free_b > g->probe_free0 ? free_b - g->probe_free0 : 0;
    else
        moved = g->probe_free0 > free_b ? g->probe_free0 - free_b : 0;
    HOFF__STAT_ADD(&mem->st, driver_drift_samples, 1);
    if (moved < b->size) {
        HOFF__STAT_ADD(&mem->st, driver_drift_moves, 1);
        HOFF__STAT_ADD(&mem->st, driver_drift_bytes, b->size - moved);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "the driver moved offload blocks behind hoff's books: %s of a %s block "
                       "was not where hoff had it (cudaMalloc outside hoff, or kernels touching evicted blocks "
                       "without an access mark; counted in driver_drift_bytes)",
                       hoff__fmt_size(b->size - moved, (char[32]){0}, 32), hoff__fmt_size(b->size, (char[32]){0}, 32));
    }
}
