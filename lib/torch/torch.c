/* torch.c — the PyTorch entry points: CUDAPluggableAllocator's alloc/free and its optional hooks over one
 * process-wide hoff context per CUDA device, created on first use from the environment (hoff_torch(3)).
 * Threading: any thread; `torch_lock` guards the table of contexts and the pending config; contexts lock
 * themselves. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/core.h"
#include "core/options.h"
#include "torch/memstats.h"

#define MAX_DEVICES HOFF__TORCH_MAX_DEVICES /* devices 0..63: a context each */
struct device {
    struct hoff_ctx *ctx;   /* written once under torch_lock; read with an atomic load */
    double fraction;        /* memory fraction asked for before the context existed; 0 = none */
    int own;                /* hoff_torch_configure named this device before its context existed: */
    struct hoff_config cfg; /* ...its context is created with this, not `pending` */
};

static pthread_mutex_t torch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct device devices[MAX_DEVICES];
static struct hoff_config pending; /* the config of contexts created from now on */
static int pending_state;          /* 0 not read yet, 1 ready, -errno the environment is bad */
static char pending_err[512];      /* why, when pending_state < 0 */
static int device_count = -1;      /* from hoff_torch_init, -1 unknown */

/* --- the context of a device ------------------------------------------------ */

/* Caller holds torch_lock. */
static int load_pending(void) {
    if (pending_state != 0)
        return pending_state < 0 ? pending_state : 0;
    hoff_config_init(&pending);
    pending_state = hoff_config_from_env(&pending, pending_err, sizeof pending_err);
    if (pending_state == 0) {
        pending_state = 1;
        return 0;
    }
    hoff__log(HOFF_LOG_ERROR, "PyTorch allocator: %s", pending_err);
    return pending_state;
}

static int check_device(int device, const char *what) {
    if (device < 0 || device >= MAX_DEVICES)
        return hoff__error(-ENODEV,
                           "%s: device %d is out of range: hoff's PyTorch allocator serves CUDA devices "
                           "0 to %d",
                           what, device, MAX_DEVICES - 1);
    if (device_count >= 0 && device >= device_count)
        return hoff__error(-ENODEV, "%s: device %d does not exist (PyTorch reported %d device(s))", what, device,
                           device_count);
    return 0;
}

static uint64_t fraction_bytes(struct hoff_ctx *ctx, double fraction) {
    uint64_t free_b = 0, total_b = 0;

    if (ctx->mem.be->ops->mem_info(ctx->mem.be, &free_b, &total_b) != 0 || total_b == 0)
        return 0;
    return (uint64_t)(fraction * (double)total_b);
}

/* A live change of budget, host cap or planner: the plan was made for the
 * old values, so the next step records and plans again.  Caller holds ctx->lock. */
static void replan_live(struct hoff_ctx *ctx) {
    HOFF__STAT_SET(&ctx->st, budget_bytes, ctx->cfg.budget_bytes);
    hoff__pipe_replan(&ctx->pipe);
}

static void set_budget_live(struct hoff_ctx *ctx, uint64_t budget) {
    pthread_mutex_lock(&ctx->lock);
    if (ctx->cfg.budget_bytes != budget) {
        ctx->cfg.budget_bytes = budget;
        hoff__ctx_push_limits(ctx);
        replan_live(ctx);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* The context of device, created on first use.  NULL with the reason as the
 * thread's last error. */
static struct hoff_ctx *get_ctx(int device, int create, const char *what) {
    struct hoff_config cfg;
    struct hoff_ctx *ctx;
    int rc;

    if (check_device(device, what) != 0)
        return NULL;
    ctx = __atomic_load_n(&devices[device].ctx, __ATOMIC_ACQUIRE);
    if (ctx || !create)
        return ctx;
    pthread_mutex_lock(&torch_lock);
    ctx = devices[device].ctx;
    if (ctx)
        goto out;
    if (load_pending() != 0) {
        hoff__error(pending_state, "%s: %s", what, pending_err);
        goto out;
    }
    cfg = devices[device].own ? devices[device].cfg : pending;
    cfg.device = device;
    rc = hoff_init(&ctx, &cfg);
    if (rc) {
        HOFF__LOG_ONCE(HOFF_LOG_ERROR, "PyTorch allocator: cannot create the context of device %d: %s", device,
                       hoff_last_error());
        ctx = NULL;
        goto out;
    }
    if (devices[device].fraction > 0) {
        uint64_t b = fraction_bytes(ctx, devices[device].fraction);
        if (b)
            set_budget_live(ctx, b);
    }
    hoff__log(HOFF_LOG_INFO, "PyTorch allocator: device %d uses the %s backend", device, hoff_backend_name(ctx));
    __atomic_store_n(&devices[device].ctx, ctx, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&torch_lock);
    return ctx;
}

HOFF_API hoff_ctx *hoff_torch_context(int device) {
    unsigned seq = hoff__error_seq();
    struct hoff_ctx *ctx = get_ctx(device, 1, "hoff_torch_context");

    if (!ctx) /* hoff_init's message, made this call's */
        hoff__error_since(seq, -ENODEV, "hoff_torch_context");
    return ctx;
}

/* --- record-stream -------------------------------------------------------------- */

/* ptr is also used on stream: hoff fences its moves and its reuse after the
 * work queued there (hoff_record_stream); its free is not held back, so the
 * frees land where the program makes them, step after step, as the plan
 * recorded them. */
HOFF_API void hoff_torch_record_stream(void *ptr, void *stream) {
    int i;

    if (!ptr)
        return;
    for (i = 0; i < MAX_DEVICES; i++) {
        struct hoff_ctx *c = __atomic_load_n(&devices[i].ctx, __ATOMIC_ACQUIRE);

        if (c && hoff_record_stream(c, ptr, stream) == 0)
            return;
    }
    hoff__error(-EINVAL, "hoff_torch_record_stream: %p is not a live hoff block", ptr);
    hoff__log(HOFF_LOG_WARN, "%s", hoff_last_error());
}

/* --- allocation ---------------------------------------------------------------- */

HOFF_API void *hoff_torch_alloc(ssize_t size, int device, void *stream) {
    unsigned seq = hoff__error_seq();
    struct hoff_ctx *ctx;
    size_t block;
    void *p;
    int e, oom;

    if (size <= 0) {
        if (size < 0)
            hoff__error(-EINVAL, "hoff_torch_alloc: negative size %zd", size);
        return NULL; /* like PyTorch's own allocator: no memory for 0 bytes */
    }
    ctx = get_ctx(device, 1, "hoff_torch_alloc");
    if (!ctx) {
        hoff__error_since(seq, -ENODEV, "hoff_torch_alloc");
        HOFF__LOG_ONCE(HOFF_LOG_ERROR, "%s", hoff_last_error());
        errno = ENODEV;
        return NULL;
    }
    p = hoff__malloc_sized(ctx, (size_t)size, stream, HOFF_ALLOC_AUTO, &block);
    if (p) {
        hoff__torch_stats_alloc(device, (size_t)size, block);
        return p;
    }
    /* The one rule of what PyTorch reports as out of memory (the shim throws
     * OutOfMemoryError for ENOMEM, and num_ooms counts it): every failure but
     * a refused request. */
    e = errno;
    oom = e != EINVAL && e != ENOTSUP;
    if (oom)
        hoff__torch_stats_oom(device);
    hoff__error_since(seq, -e, "hoff_torch_alloc");
    HOFF__LOG_ONCE(HOFF_LOG_WARN,
                   "hoff_torch_alloc: %zd bytes on device %d: %s (PyTorch reports it as out "
                   "of memory; later failures are logged at level info)",
                   size, device, hoff_last_error());
    hoff__log(HOFF_LOG_INFO, "hoff_torch_alloc: %zd bytes on device %d: %s", size, device, hoff_last_error());
    errno = oom ? ENOMEM : e; /* after the logging, which may change it */
    return NULL;
}

HOFF_API void hoff_torch_free(void *ptr, ssize_t size, int device, void *stream) {
    unsigned seq = hoff__error_seq();
    struct hoff_ctx *ctx;
    size_t block;
    int rc;

    if (!ptr)
        return;
    ctx = get_ctx(device, 0, "hoff_torch_free");
    if (!ctx) {
        hoff__error(-ENODEV, "hoff_torch_free: %p on device %d: no hoff context there (%s)", ptr, device,
                    check_device(device, "hoff_torch_free") ? hoff_last_error() : "never allocated");
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        return;
    }
    rc = hoff__free_sized(ctx, ptr, stream, &block);
    if (rc)
        hoff__log(HOFF_LOG_ERROR, "hoff_torch_free: %p: %s", ptr, hoff_last_error());
    if (rc)
        hoff__error_since(seq, rc, "hoff_torch_free");
    else
        hoff__torch_stats_free(device, size > 0 ? (size_t)size : 0, block);
}

/* --- the other hooks ----------------------------------------------------------- */

HOFF_API void hoff_torch_init(int count) {
    pthread_mutex_lock(&torch_lock);
    if (count >= 0)
        device_count = count;
    if (load_pending() != 0) /* a bad HOFF_* variable is reported now, not at the first allocation */
        hoff__error(pending_state, "hoff_torch_init: %s", pending_err);
    pthread_mutex_unlock(&torch_lock);
}

HOFF_API void hoff_torch_empty_cache(void) {
    int i;

    for (i = 0; i < MAX_DEVICES; i++) {
        struct hoff_ctx *ctx = __atomic_load_n(&devices[i].ctx, __ATOMIC_ACQUIRE);

        if (!ctx)
            continue;
        hoff_empty_cache(ctx);
    }
}

HOFF_API void hoff_torch_set_memory_fraction(double fraction, int device) {
    struct hoff_ctx *ctx;

    if (!(fraction > 0.0 && fraction <= 1.0)) {
        hoff__error(-EINVAL, "hoff_torch_set_memory_fraction: fraction %g: expected more than 0 and at most 1",
                    fraction);
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        return;
    }
    if (check_device(device, "hoff_torch_set_memory_fraction") != 0) {
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        return;
    }
    pthread_mutex_lock(&torch_lock);
    ctx = devices[device].ctx;
    if (!ctx)
        devices[device].fraction = fraction;
    pthread_mutex_unlock(&torch_lock);
    if (ctx) {
        uint64_t b = fraction_bytes(ctx, fraction);
        if (b)
            set_budget_live(ctx, b);
    }
}

HOFF_API int hoff_torch_reset_peaks(int device) {
    struct hoff_ctx *ctx;
    int rc = check_device(device, "hoff_torch_reset_peaks");

    if (rc)
        return rc;
    hoff__torch_stats_reset_peaks(device); /* PyTorch's figures (memstats.c) */
    ctx = get_ctx(device, 0, "hoff_torch_reset_peaks");
    return ctx ? hoff_reset_peaks(ctx) : 0; /* no context: no peaks yet */
}

/* --- CUDA graph pools (the graph-pool hooks; core/ctx_graph.c does the work) ---- */

HOFF_API void hoff_torch_graph_pool_use(uint64_t id0, uint64_t id1) {
    hoff__graph_pool_use(id0, id1);
}

/* The context of device for a graph-pool hook: NULL (said at level debug)
 * when the device has none yet: nothing was allocated there to act on. */
static struct hoff_ctx *pool_ctx(int device, const char *what) {
    struct hoff_ctx *ctx;

    if (check_device(device, what) != 0) {
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        return NULL;
    }
    ctx = get_ctx(device, 0, what);
    if (!ctx)
        hoff__log(HOFF_LOG_DEBUG, "%s: device %d has no hoff context yet: nothing to do", what, device);
    return ctx;
}

HOFF_API void hoff_torch_graph_pool_begin(int device, uint64_t id0, uint64_t id1) {
    unsigned seq = hoff__error_seq();
    struct hoff_ctx *ctx = get_ctx(device, 1, "hoff_torch_graph_pool_begin"); /* its captures will allocate */
    int rc;

    if (!ctx) {
        hoff__error_since(seq, -ENODEV, "hoff_torch_graph_pool_begin");
        hoff__log(HOFF_LOG_ERROR, "%s", hoff_last_error());
        return;
    }
    if ((rc = hoff__ctx_graph_pool_begin(ctx, id0, id1)) != 0) {
        hoff__error_since(seq, rc, "hoff_torch_graph_pool_begin");
        hoff__log(HOFF_LOG_WARN, "%s", hoff_last_error());
    }
}

HOFF_API void hoff_torch_graph_pool_end(int device, uint64_t id0, uint64_t id1) {
    struct hoff_ctx *ctx = pool_ctx(device, "hoff_torch_graph_pool_end");

    if (ctx)
        hoff__ctx_graph_pool_end(ctx, id0, id1);
}

HOFF_API void hoff_torch_graph_pool_release(int device, uint64_t id0, uint64_t id1) {
    unsigned seq = hoff__error_seq();
    struct hoff_ctx *ctx = pool_ctx(device, "hoff_torch_graph_pool_release");
    int rc;

    if (ctx && (rc = hoff__ctx_graph_pool_release(ctx, id0, id1)) != 0) {
        hoff__error_since(seq, rc, "hoff_torch_graph_pool_release");
        hoff__log(HOFF_LOG_WARN, "%s", hoff_last_error());
    }
}

/* --- configuration ------------------------------------------------------------- */

HOFF_API int hoff_torch_config_check(const char *name, const char *value, char *err, size_t errlen) {
    if (!name) {
        hoff__error(-EINVAL, "hoff_torch_config_check: name is NULL");
        if (err && errlen)
            snprintf(err, errlen, "%s", hoff_last_error());
        return -EINVAL;
    }
    return hoff_config_check(name, value, NULL, 0, err, errlen);
}

/* Apply name=value to a live context: only the options of the table's live
 * column (budget, host cap, planner, log level) may change once it exists.
 * Caller holds nothing. */
static int configure_live(struct hoff_ctx *ctx, int device, const char *name, const char *value, char *err,
                          size_t errlen) {
    struct hoff_config c, d;
    char live[128];
    int rc, replan = 0;

    pthread_mutex_lock(&ctx->lock);
    c = ctx->cfg;
    rc = hoff_config_set(&c, name, value, err, errlen);
    if (rc == 0)
        rc = hoff__config_validate(&c, err, errlen);
    if (rc) {
        pthread_mutex_unlock(&ctx->lock);
        return rc;
    }
    d = ctx->cfg;
    if (hoff__config_live_update(&d, &c, NULL, &replan) != 0) {
        pthread_mutex_unlock(&ctx->lock);
        hoff__config_live_names(live, sizeof live);
        return hoff__error(-EBUSY,
                           "option '%s' cannot change once device %d's context exists (only %s can); "
                           "set it before the first CUDA allocation (hoff.install(config) or its HOFF_* variable)",
                           name, device, live);
    }
    if (memcmp(&d, &ctx->cfg, sizeof d) != 0) {
        ctx->cfg = d;
        hoff__ctx_push_limits(ctx);
        hoff__log_set_level(d.log_level);
        if (replan)
            replan_live(ctx);
    }
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

/* hoff_torch_configure's work: every failure sets the thread's message (err is filled from it). */
static int configure(int device, const char *name, const char *value, char *err, size_t errlen) {
    struct hoff_config c;
    int i, rc, first, last;

    if (!name || !value)
        return hoff__error(-EINVAL, "hoff_torch_configure: name and value must not be NULL");
    if (device != -1 && (rc = check_device(device, "hoff_torch_configure")) != 0)
        return rc;
    pthread_mutex_lock(&torch_lock);
    rc = load_pending();
    if (rc) {
        hoff__error(rc, "%s", pending_err);
        pthread_mutex_unlock(&torch_lock);
        return rc;
    }
    /* Check the value once, against the config it would change. */
    c = device != -1 && devices[device].own ? devices[device].cfg : pending;
    rc = hoff_config_set(&c, name, value, err, errlen);
    if (rc) {
        pthread_mutex_unlock(&torch_lock);
        return rc;
    }
    first = device == -1 ? 0 : device;
    last = device == -1 ? MAX_DEVICES - 1 : device;
    for (i = first; i <= last && rc == 0; i++)
        if (devices[i].ctx)
            rc = configure_live(devices[i].ctx, i, name, value, err, errlen);
    if (rc == 0 && device == -1) {
        pending = c; /* every context created from now on */
        for (i = 0; i < MAX_DEVICES; i++)
            if (devices[i].own && !devices[i].ctx)
                hoff_config_set(&devices[i].cfg, name, value, NULL, 0);
    } else if (rc == 0 && !devices[device].ctx) {
        devices[device].cfg = c; /* that device's context alone, when it is created */
        devices[device].own = 1;
    }
    pthread_mutex_unlock(&torch_lock);
    return rc;
}

HOFF_API int hoff_torch_configure(int device, const char *name, const char *value, char *err, size_t errlen) {
    int rc;

    if (err && errlen)
        err[0] = '\0';
    rc = configure(device, name, value, err, errlen);
    if (rc && err && errlen) /* a copy of the one message (hoff_last_error) */
        snprintf(err, errlen, "%s", hoff_last_error());
    return rc;
}
