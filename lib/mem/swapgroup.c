/* swapgroup.c — manual swap groups (hoff_group(3)): named sets of offload blocks that the caller evicts and
 * prefetches itself, outside the plan but inside the budget: the mechanism.  The public calls (hoff_group_*) are in
 * core/ctx_group.c, which checks their arguments, takes the context lock and calls the hoff__group_* functions here.
 * Threading: every function here runs with the context lock held (the caller's).
 *
 * The unit is the block (a framework's storage): a block is in at most one
 * group and is moved once however many tensors alias it, and since managed
 * memory keeps every address valid, aliases survive the round trip by
 * construction.  A group's move is all or nothing where it can be refused
 * (the budget, the host tier): it is checked for the whole group before any
 * member moves.  Members that lie next to each other in one mapping (a
 * planner group's region) move with one backend call (hoff__res_group);
 * the others one by one. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/grow.h"
#include "mem/mem.h"
#include "mem/pool.h"
#include "mem/residency.h"
#include "mem/swapgroup.h"

struct hoff_group {
    void *owner;             /* the context that made it (core/ctx_group.c's; opaque here) */
    struct hoff_group *next; /* the context's list */
    char name[HOFF__GROUP_NAME_MAX + 1];
    struct hoff__block **m; /* members; m[i]->mslot == i */
    uint32_t n;
    size_t cap;
    unsigned flags;              /* enum hoff_group_flags */
    int launched;                /* 0, 1 eviction, 2 prefetch: launched and not waited for */
    uint64_t step;               /* the step (mem->pol.step) the members were added in */
    struct hoff_group_info info; /* the counters (adds, duplicates, moved blocks and bytes, calls) */
};

#define LAUNCH_EVICT 1
#define LAUNCH_PREFETCH 2

static const char *launch_name(int l) {
    return l == LAUNCH_EVICT ? "an eviction" : "a prefetch";
}

/* --- membership ------------------------------------------------------------ */

static void drop_member(struct hoff__mem *mem, struct hoff_group *g, struct hoff__block *b) {
    uint32_t i = b->mslot;

    g->m[i] = g->m[--g->n];
    g->m[i]->mslot = i;
    b->mgroup = NULL;
    b->mslot = 0;
    HOFF__STAT_SUB(&mem->st, manual_blocks, 1);
}

void hoff__group_leave(struct hoff__mem *mem, struct hoff__block *b) {
    if (b->mgroup)
        drop_member(mem, b->mgroup, b);
}

/* Every member leaves the group (it stays where it is). */
static void empty(struct hoff__mem *mem, struct hoff_group *g) {
    while (g->n)
        drop_member(mem, g, g->m[g->n - 1]);
    g->launched = 0;
}

/* Wait for every member's transfer in flight: each lands or fails, and
 * either way its bytes are in one valid place. */
static void settle_all(struct hoff__mem *mem, struct hoff_group *g) {
    uint32_t i;

    for (i = 0; i < g->n; i++)
        hoff__res_settle(mem, g->m[i]);
}

/* The live block whose bytes hold p: the block table knows base addresses;
 * an address inside a block is found by looking at every live block. */
struct find_arg {
    const char *p;
    struct hoff__block *found;
};

static void find_containing(const void *key, void *val, void *arg) {
    struct hoff__block *b = val;
    struct find_arg *a = arg;

    (void)key;
    if (!a->found && a->p >= (const char *)b->ptr && a->p < (const char *)b->ptr + b->size)
        a->found = b;
}

static struct hoff__block *lookup(struct hoff__mem *mem, const void *p) {
    struct find_arg a = {p, NULL};

    if (!p)
        return NULL;
    a.found = hoff__bt_lookup(&mem->table, p);
    if (!a.found)
        hoff__bt_foreach(&mem->table, find_containing, &a);
    return a.found;
}

/* --- moves ----------------------------------------------------------------- */

static int by_address(const void *a, const void *b) {
    const char *x = (*(struct hoff__block *const *)a)->ptr, *y = (*(struct hoff__block *const *)b)->ptr;

    return x < y ? -1 : x > y;
}

/* Move the blocks v[0..k) (each where op moves it from) with as few calls as
 * their layout allows: a run of neighbours in one region goes with one call,
 * every other block on its own.  Counts what moved in g's info.  Returns the
 * first error of a block that could not be moved (the others still move). */
static int move(struct hoff__mem *mem, struct hoff_group *g, int op, struct hoff__block **v, uint32_t k,
                hoff_stream s) {
    uint32_t i = 0, j, moved;
    int rc, first = 0;

    qsort(v, k, sizeof *v, by_address);
    while (i < k) {
        size_t size = v[i]->size;

        for (j = i + 1; j < k && v[j]->region && v[j]->region == v[i]->region &&
                        (char *)v[j]->ptr == (char *)v[j - 1]->ptr + v[j - 1]->size;
             j++)
            size += v[j]->size;
        moved = 0;
        if (g->flags & HOFF_GROUP_ONE_BY_ONE)
            j = i + 1;
        if (j - i > 1 && hoff__res_group(mem, op, v + i, j - i, v[i]->ptr, size, s) == 0) {
            moved = j - i;
            g->info.calls++;
        } else {
            j = i + 1;
            rc = op == HOFF__CMD_EVICT ? hoff__res_evict(mem, v[i], s) : hoff__res_prefetch(mem, v[i], s);
            if (rc == 0) {
                moved = 1;
                g->info.calls++;
            } else if (!first) {
                first = rc;
            }
            size = v[i]->size;
        }
        if (moved && op == HOFF__CMD_EVICT) {
            g->info.evicted_blocks += moved;
            g->info.evicted_bytes += size;
        } else if (moved) {
            g->info.prefetched_blocks += moved;
            g->info.prefetched_bytes += size;
        }
        i = j;
    }
    return first;
}

/* The members to move for op, in a scratch array (the caller frees it). */
static int pick(struct hoff__mem *mem, struct hoff_group *g, int op, hoff_stream s, struct hoff__block ***out,
                uint32_t *k, uint64_t *bytes) {
    struct hoff__block **v;
    uint32_t i;

    *out = NULL;
    *k = 0;
    *bytes = 0;
    if (!g->n)
        return 0;
    if (!(v = malloc(g->n * sizeof *v)))
        return hoff__error(-ENOMEM, "hoff_group: no memory for group '%s'", g->name);
    for (i = 0; i < g->n; i++) {
        struct hoff__block *b = g->m[i];

        if (op == HOFF__CMD_EVICT) {
            /* A transfer of the block still in flight (a prefetch): it lands first. */
            if (b->state == HOFF_RES_PREFETCHING)
                hoff__res_settle(mem, b);
            if (b->state != HOFF_RES_DEVICE)
                continue;              /* already away */
            hoff__res_end_use(mem, b); /* the caller says its work is enqueued */
        } else {
            if (b->state == HOFF_RES_EVICTING || b->state == HOFF_RES_SPILLING || b->state == HOFF_RES_RESTORING)
                hoff__res_settle(mem, b); /* wanted back: its move away lands first */
            if (b->state == HOFF_RES_DEVICE || b->state == HOFF_RES_PREFETCHING)
                continue; /* there already, or on its way */
        }
        v[(*k)++] = b;
        *bytes += b->size;
    }
    (void)s;
    *out = v;
    return 0;
}

int hoff__group_launch(struct hoff__mem *mem, struct hoff_group *g, int op, hoff_stream s, const char *what) {
    struct hoff__block **v;
    uint32_t k;
    uint64_t bytes;
    int rc;

    if (g->launched)
        return hoff__error(-EBUSY, "%s: group '%s' has %s launched and not waited for (hoff_group_wait first)", what,
                           g->name, launch_name(g->launched));
    hoff__res_poll(mem);
    if ((rc = pick(mem, g, op, s, &v, &k, &bytes)) != 0)
        return rc;
    /* All or nothing: room for the whole group, or nothing moves. */
    if (k && op == HOFF__CMD_EVICT && (rc = hoff__res_host_room(mem, bytes, s)) != 0) {
        rc = hoff__error(rc, "%s: group '%s' (%u blocks) cannot be evicted whole, nothing moved: %s", what, g->name,
                         (unsigned)k, hoff_last_error());
        HOFF__STAT_ADD(&mem->st, manual_refusals, 1);
    } else if (k && op == HOFF__CMD_PREFETCH) {
        char why[128];

        snprintf(why, sizeof why, "%s of group '%s'", what, g->name);
        if ((rc = hoff__res_budget_room(mem, bytes, s, why)) != 0) {
            hoff__error(rc, "%s; nothing moved", hoff_last_error());
            HOFF__STAT_ADD(&mem->st, manual_refusals, 1);
        }
    }
    if (rc == 0) {
        g->launched = op == HOFF__CMD_EVICT ? LAUNCH_EVICT : LAUNCH_PREFETCH;
        if (k && (rc = move(mem, g, op, v, k, s)) != 0)
            hoff__error(rc, "%s: group '%s': a block could not be moved (it stays where it was): %s", what, g->name,
                        hoff_last_error());
    }
    free(v);
#ifdef HOFF_DEBUG
    hoff__res_check(mem);
#endif
    return rc;
}

/* --- life cycle and membership (the caller checked the arguments) ---------- */

void *hoff__group_owner(const struct hoff_group *g) {
    return g->owner;
}

int hoff__group_create(struct hoff__mem *mem, void *owner, const char *name, unsigned flags, struct hoff_group **out) {
    struct hoff_group *g;

    for (g = mem->groups; g; g = g->next)
        if (!strcmp(g->name, name))
            return hoff__error(-EEXIST, "hoff_group_create: context already has a group named '%s'", name);
    if (!(g = calloc(1, sizeof *g)))
        return hoff__error(-ENOMEM, "hoff_group_create: no memory");
    g->owner = owner;
    g->flags = flags;
    snprintf(g->name, sizeof g->name, "%s", name);
    g->info.version = 1;
    g->info.size = sizeof g->info;
    g->step = mem->pol.step;
    g->next = mem->groups;
    mem->groups = g;
    HOFF__STAT_ADD(&mem->st, manual_groups, 1);
    *out = g;
    return 0;
}

struct hoff_group *hoff__group_find(struct hoff__mem *mem, const char *name) {
    struct hoff_group *g;

    for (g = mem->groups; g && strcmp(g->name, name); g = g->next)
        ;
    return g;
}

/* The checks of hoff_group_add, in its order: 0 when b may join g, else the refusal said. */
static int add_refusal(struct hoff__mem *mem, struct hoff_group *g, const struct hoff__block *b, const void *ptr) {
    if (!b)
        return hoff__error(-EINVAL, "hoff_group_add: %p is not inside a live hoff block (group '%s')", ptr, g->name);
    if (b->pool != HOFF__POOL_MANAGED)
        return hoff__error(-EPERM,
                           "hoff_group_add: block %p is in the device pool (parameters, small or "
                           "out-of-step allocations): not an offload candidate, it cannot join group '%s'",
                           b->ptr, g->name);
    if (b->flags & HOFF__BLK_PINNED)
        return hoff__error(-EPERM,
                           "hoff_group_add: block %p was allocated inside a region (skip_offload): never "
                           "offloaded, it cannot join group '%s'",
                           b->ptr, g->name);
    if (b->mgroup == g)
        return 0;
    if (b->mgroup)
        return hoff__error(-EBUSY,
                           "hoff_group_add: block %p is already in group '%s' (a block is in one group); "
                           "not added to '%s'",
                           b->ptr, b->mgroup->name, g->name);
    if (g->launched)
        return hoff__error(-EBUSY,
                           "hoff_group_add: group '%s' has %s launched and not waited for: add blocks "
                           "before launching it",
                           g->name, launch_name(g->launched));
    if (g->n && g->step != mem->pol.step)
        return hoff__error(-ESTALE,
                           "hoff_group_add: group '%s' holds %u blocks added in step %llu and this is "
                           "step %llu: a group is filled within one step (release or abort it when its step is "
                           "done)",
                           g->name, (unsigned)g->n, (unsigned long long)g->step, (unsigned long long)mem->pol.step);
    return 0;
}

int hoff__group_add(struct hoff__mem *mem, struct hoff_group *g, const void *ptr, const struct hoff__block **added) {
    struct hoff__block *b = lookup(mem, ptr);
    int rc;

    if ((rc = add_refusal(mem, g, b, ptr)) != 0)
        return rc;
    if (b->mgroup == g) {
        g->info.duplicates++;
        return 1; /* the same storage again: one block, one copy */
    }
    if (HOFF__GROW(g->m, g->cap, (size_t)g->n + 1) != 0)
        return hoff__error(-ENOMEM, "hoff_group_add: no memory for group '%s'", g->name);
    if (!g->n)
        g->step = mem->pol.step;
    b->mgroup = g;
    b->mslot = g->n;
    g->m[g->n++] = b;
    g->info.adds++;
    HOFF__STAT_ADD(&mem->st, manual_blocks, 1);
    *added = b;
    return 0;
}

int hoff__group_remove(struct hoff__mem *mem, struct hoff_group *g, const void *ptr) {
    struct hoff__block *b = lookup(mem, ptr);

    if (!b)
        return hoff__error(-EINVAL, "hoff_group_remove: %p is not inside a live hoff block (group '%s')", ptr, g->name);
    if (b->mgroup != g)
        return hoff__error(-ENOENT, "hoff_group_remove: block %p is not in group '%s'", b->ptr, g->name);
    if (g->launched)
        return hoff__error(-EBUSY, "hoff_group_remove: group '%s' has %s launched and not waited for", g->name,
                           launch_name(g->launched));
    drop_member(mem, g, b);
    return 0;
}

int hoff__group_wait(struct hoff__mem *mem, struct hoff_group *g, hoff_stream stream, unsigned flags) {
    uint32_t i;
    int rc = 0, r;

    if (!g->launched)
        return hoff__error(-EINVAL,
                           "hoff_group_wait: group '%s' has no eviction or prefetch launched to wait for "
                           "(hoff_group_evict or hoff_group_prefetch first)",
                           g->name);
    for (i = 0; i < g->n; i++) {
        if (flags & HOFF_GROUP_WAIT_HOST)
            hoff__res_settle(mem, g->m[i]);
        else if ((r = hoff__res_stream_wait(mem, g->m[i], stream)) != 0 && !rc)
            rc = hoff__error(r, "hoff_group_wait: group '%s': the stream cannot wait for block %p", g->name,
                             g->m[i]->ptr);
    }
    g->launched = 0;
    return rc;
}

int hoff__group_release(struct hoff__mem *mem, struct hoff_group *g) {
    uint32_t i;
    int rc = 0, r;

    hoff__res_poll(mem);
    for (i = 0; i < g->n; i++) {
        struct hoff__block *b = g->m[i];

        if (b->state == HOFF_RES_DEVICE || b->state == HOFF_RES_PREFETCHING || b->state == HOFF_RES_DISCARDED)
            continue;             /* on the device or on its way: nothing to drop, nothing to wait for */
        hoff__res_settle(mem, b); /* an eviction, spill or restore in flight lands first */
        if (b->state != HOFF_RES_DEVICE && (r = hoff__res_discard(mem, b, NULL)) != 0 && !rc)
            rc = r; /* its host copy stays: nothing is lost that was not asked for */
    }
    empty(mem, g);
    return rc;
}

void hoff__group_clear(struct hoff__mem *mem, struct hoff_group *g) {
    empty(mem, g);
}

void hoff__group_abort(struct hoff__mem *mem, struct hoff_group *g) {
    settle_all(mem, g);
    empty(mem, g);
    HOFF__STAT_ADD(&mem->st, manual_aborts, 1);
}

void hoff__group_destroy(struct hoff__mem *mem, struct hoff_group *g) {
    struct hoff_group **pp;

    settle_all(mem, g);
    empty(mem, g);
    for (pp = &mem->groups; *pp && *pp != g; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = g->next;
    HOFF__STAT_SUB(&mem->st, manual_groups, 1);
    free(g->m);
    free(g);
}

void hoff__groups_destroy_all(struct hoff__mem *mem) {
    while (mem->groups)
        hoff__group_destroy(mem, mem->groups);
}

void hoff__group_info(struct hoff__mem *mem, const struct hoff_group *g, struct hoff_group_info *out) {
    uint32_t i;

    hoff__res_poll(mem);
    *out = g->info;
    out->blocks = g->n;
    out->bytes = out->on_device = out->on_host = out->in_flight = 0;
    for (i = 0; i < g->n; i++) {
        const struct hoff__block *b = g->m[i];

        out->bytes += b->size;
        if (b->state == HOFF_RES_DEVICE)
            out->on_device++;
        else if (b->state == HOFF_RES_EVICTING || b->state == HOFF_RES_PREFETCHING || b->state == HOFF_RES_SPILLING ||
                 b->state == HOFF_RES_RESTORING)
            out->in_flight++;
        else
            out->on_host++;
    }
    out->launched = (uint64_t)g->launched;
    out->step = g->step;
}
