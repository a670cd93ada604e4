/* ctx_group.c — the public calls of manual swap groups (hoff_group(3)): each checks its arguments, takes the context
 * lock and calls the mechanism in mem/swapgroup.c (hoff__group_*).  Every failure sets the thread's message, naming
 * the call (hoff_last_error).
 * Threading: any thread; every call takes the lock of the group's context (a group belongs to one context). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "core/context.h"
#include "core/core.h"
#include "core/ctx_impl.h"
#include "exec/issuer.h"
#include "mem/swapgroup.h"

/* A group's name: 1 to HOFF__GROUP_NAME_MAX printable characters.  0 or -EINVAL said. */
static int check_name(const char *name) {
    size_t len = name ? strlen(name) : 0, i;

    if (!name || !len || len > HOFF__GROUP_NAME_MAX)
        return hoff__error(-EINVAL, "hoff_group_create: a group name has 1 to %d characters, got %s",
                           HOFF__GROUP_NAME_MAX, name ? (len ? "a longer one" : "\"\"") : "NULL");
    for (i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] == 0x7f)
            return hoff__error(-EINVAL,
                               "hoff_group_create: a group name is printable text; character %zu is "
                               "a control character",
                               i);
    return 0;
}

HOFF_API int hoff_group_create(hoff_ctx *ctx, const char *name, unsigned flags, hoff_group **out) {
    int rc;

    if (out)
        *out = NULL;
    if (!ctx || !out)
        return hoff__error(-EINVAL, "hoff_group_create: NULL %s", ctx ? "out" : "context");
    if ((rc = check_name(name)) != 0)
        return rc;
    if (flags & ~(unsigned)HOFF_GROUP_ONE_BY_ONE)
        return hoff__error(-EINVAL,
                           "hoff_group_create: flags 0x%x: accepted are HOFF_GROUP_COLOCATE (0) and "
                           "HOFF_GROUP_ONE_BY_ONE (1)",
                           flags);
    LOCK(ctx);
    rc = hoff__group_create(&ctx->mem, ctx, name, flags, out);
    UNLOCK(ctx);
    return rc;
}

HOFF_API hoff_group *hoff_group_find(hoff_ctx *ctx, const char *name) {
    struct hoff_group *g = NULL;

    if (!ctx || !name) {
        errno = ENOENT;
        hoff__error(-EINVAL, "hoff_group_find: NULL %s", ctx ? "name" : "context");
        return NULL;
    }
    LOCK(ctx);
    g = hoff__group_find(&ctx->mem, name);
    UNLOCK(ctx);
    if (!g) {
        errno = ENOENT;
        hoff__error(-ENOENT, "hoff_group_find: no group named '%s'", name);
    }
    return g;
}

/* The context g was made for. */
static struct hoff_ctx *group_ctx(const struct hoff_group *g) {
    return hoff__group_owner(g);
}

/* The lock of g's context, taken: 0, or -EINVAL ("<what>: NULL group") without it. */
static int lock_group(struct hoff_group *g, const char *what) {
    if (!g)
        return hoff__error(-EINVAL, "%s: NULL group", what);
    LOCK(group_ctx(g));
    return 0;
}

HOFF_API int hoff_group_add(hoff_group *g, const void *ptr) {
    const struct hoff__block *b = NULL;
    int rc;

    if ((rc = lock_group(g, "hoff_group_add")) != 0)
        return rc;
    rc = hoff__group_add(&group_ctx(g)->mem, g, ptr, &b);
    if (rc == 0 && b)
        hoff__record_exclude(&group_ctx(g)->pipe, &group_ctx(g)->mem, b); /* outside the plan from now on */
    UNLOCK(group_ctx(g));
    return rc;
}

HOFF_API int hoff_group_remove(hoff_group *g, const void *ptr) {
    int rc;

    if ((rc = lock_group(g, "hoff_group_remove")) != 0)
        return rc;
    rc = hoff__group_remove(&group_ctx(g)->mem, g, ptr);
    UNLOCK(group_ctx(g));
    return rc;
}

static int launch(struct hoff_group *g, int op, hoff_stream stream, const char *what) {
    unsigned seq = hoff__error_seq();
    int rc;

    if ((rc = lock_group(g, what)) != 0)
        return rc;
    rc = hoff__group_launch(&group_ctx(g)->mem, g, op, stream, what);
    UNLOCK(group_ctx(g));
    return hoff__error_since(seq, rc, what);
}

HOFF_API int hoff_group_evict(hoff_group *g, hoff_stream stream) {
    return launch(g, HOFF__CMD_EVICT, stream, "hoff_group_evict");
}

HOFF_API int hoff_group_prefetch(hoff_group *g, hoff_stream stream) {
    return launch(g, HOFF__CMD_PREFETCH, stream, "hoff_group_prefetch");
}

HOFF_API int hoff_group_wait(hoff_group *g, hoff_stream stream, unsigned flags) {
    int rc;

    if (!g)
        return hoff__error(-EINVAL, "hoff_group_wait: NULL group");
    if (flags & ~(unsigned)HOFF_GROUP_WAIT_HOST)
        return hoff__error(-EINVAL,
                           "hoff_group_wait: flags 0x%x: accepted are HOFF_GROUP_WAIT_STREAM (0) and "
                           "HOFF_GROUP_WAIT_HOST (1)",
                           flags);
    LOCK(group_ctx(g));
    rc = hoff__group_wait(&group_ctx(g)->mem, g, stream, flags);
    UNLOCK(group_ctx(g));
    return rc; /* every failure of hoff__group_wait names hoff_group_wait */
}

HOFF_API int hoff_group_release(hoff_group *g) {
    unsigned seq = hoff__error_seq();
    int rc;

    if ((rc = lock_group(g, "hoff_group_release")) != 0)
        return rc;
    rc = hoff__group_release(&group_ctx(g)->mem, g);
    UNLOCK(group_ctx(g));
    return hoff__error_since(seq, rc, "hoff_group_release");
}

HOFF_API int hoff_group_clear(hoff_group *g) {
    int rc;

    if ((rc = lock_group(g, "hoff_group_clear")) != 0)
        return rc;
    hoff__group_clear(&group_ctx(g)->mem, g);
    UNLOCK(group_ctx(g));
    return 0;
}

HOFF_API int hoff_group_abort(hoff_group *g) {
    int rc;

    if ((rc = lock_group(g, "hoff_group_abort")) != 0)
        return rc;
    hoff__group_abort(&group_ctx(g)->mem, g);
    UNLOCK(group_ctx(g));
    return 0;
}

/* NULL is no group: nothing to do, as free(NULL). */
HOFF_API int hoff_group_destroy(hoff_group *g) {
    struct hoff_ctx *ctx;

    if (!g)
        return 0;
    ctx = group_ctx(g);
    LOCK(ctx);
    hoff__group_destroy(&ctx->mem, g);
    UNLOCK(ctx);
    return 0;
}

HOFF_API int hoff_group_info(hoff_group *g, struct hoff_group_info *out) {
    if (!g || !out)
        return hoff__error(-EINVAL, "hoff_group_info: NULL %s", g ? "out" : "group");
    LOCK(group_ctx(g));
    hoff__group_info(&group_ctx(g)->mem, g, out);
    UNLOCK(group_ctx(g));
    return 0;
}
