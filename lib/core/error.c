/* error.c — error texts (hoff_strerror) and the calling thread's last error message.
 * Threading: the last error is thread-local; everything else is constant. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char last_error[512];
static _Thread_local unsigned error_seq; /* messages set on this thread (hoff__error_since) */

int hoff__error(int err, const char *fmt, ...) {
    va_list ap;

    char msg[sizeof last_error];

    /* Formatted aside first: an argument may be hoff_last_error() itself
     * (a message that wraps the one before it). */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    error_seq++;
    hoff__log(HOFF_LOG_DEBUG, "%s (%s)", last_error, hoff_strerror(err));
    return err;
}

void hoff__error_clear(void) {
    last_error[0] = '\0';
}

char *hoff__error_take(void) {
    char *s = last_error[0] ? strdup(last_error) : NULL;

    last_error[0] = '\0';
    return s;
}

unsigned hoff__error_seq(void) {
    return error_seq;
}

/* 1 if msg names fn: fn as a whole word (not the start of a longer name, hoff_free in hoff_free_x). */
static int names(const char *msg, const char *fn) {
    size_t n = strlen(fn);
    const char *p;

    for (p = strstr(msg, fn); p; p = strstr(p + 1, fn)) {
        char c = p[n];

        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return 1;
    }
    return 0;
}

int hoff__error_since(unsigned seq, int rc, const char *fn) {
    if (rc >= 0)
        return rc;
    if (seq == error_seq || !last_error[0])
        return hoff__error(rc, "%s: %s", fn, hoff_strerror(rc));
    if (!names(last_error, fn))
        hoff__error(rc, "%s: %s", fn, last_error);
    return rc;
}

HOFF_API const char *hoff_last_error(void) {
    return last_error[0] ? last_error : "no error";
}

HOFF_API const char *hoff_strerror(int err) {
    switch (err) {
    case 0: return "success";
    case -EINVAL: return "invalid argument (see hoff_last_error() for which)";
    case -ENOMEM: return "out of memory (device, host or a pool limit)";
    case -ENODEV: return "backend unavailable (no GPU, or built without CUDA)";
    case -EALREADY: return "block already in the requested residency";
    case -EPERM: return "block is not an offload candidate (device pool or region)";
    case -EBUSY:
        return "busy: a transfer of the block is in flight, or the block or its swap group is in use "
               "(see hoff_last_error() for which)";
    case -ESTALE: return "the swap group still holds blocks of an earlier step (release or abort it)";
    case -ENOTSUP: return "not supported by this backend";
    case -ESHUTDOWN: return "context is shutting down";
    case -EOVERFLOW: return "refused: would oversubscribe device memory";
    case -EIO: return "Input/output error (a transfer or the disk); the data stayed where it was";
    case -HOFF_EBUDGET: return "the device budget cannot hold this block and nothing can be evicted";
    case -HOFF_EHOSTCAP: return "the host tier is at its cap (HOFF_HOST_CAP) and nothing can be spilled";
    default:
        if (err < 0)
            return strerror(-err);
        return "unknown error";
    }
}
