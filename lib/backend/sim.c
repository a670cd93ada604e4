/* sim.c — the simulated device's function table, open and close, and its entry points of its own
 * (hoff__sim_observe, hoff__sim_counters, and for tests hoff__sim_test_fail_protect).  The model, and
 * the files that implement it: backend/sim.h.
 * Threading: every op is thread safe (one mutex per backend). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim.h"
#include "core/optdefs.h"
#include "core/core.h"

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
                hoff__sim_managed_release(s, m);
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

static const struct hoff__backend_ops sim_ops = {
    .evict_node = hoff__sim_evict_node,
    .host_bytes = hoff__sim_host_bytes,
    .host_drop = hoff__sim_host_drop,
    .host_make = hoff__sim_host_make,
    .nvme_model = hoff__sim_nvme_model,
    .name = "sim",
    .close = sim_close,
    .mem_info = hoff__sim_mem_info,
    .dev_alloc = hoff__sim_dev_alloc,
    .dev_free = hoff__sim_dev_free,
    .managed_alloc = hoff__sim_managed_alloc,
    .managed_free = hoff__sim_managed_free,
    .event_create = hoff__sim_event_create,
    .event_create_timed = hoff__sim_event_create, /* every sim event carries its time */
    .event_elapsed_ns = hoff__sim_event_elapsed_ns,
    .event_destroy = hoff__sim_event_destroy,
    .event_record = hoff__sim_event_record,
    .event_query = hoff__sim_event_query,
    .event_sync = hoff__sim_event_sync,
    .stream_wait = hoff__sim_stream_wait,
    .evict = hoff__sim_evict,
    .prefetch = hoff__sim_prefetch,
    .discard = hoff__sim_discard,
    .fault = hoff__sim_fault,
    .populate = hoff__sim_populate,
    .memcpy = hoff__sim_memcpy,
    .sync = hoff__sim_sync,
    .clock_ns = hoff__sim_clock_ns,
    .compute = hoff__sim_compute,
    .transfer_wait = hoff__sim_transfer_wait,
    .window_open = hoff__sim_window_open,
    .window_close = hoff__sim_window_close,
};

static int check_rate(double v, const char *env, const char *field) {
    if (!(v > 0))
        return hoff__error(-EINVAL, "%s (%s) must be a rate in GB/s greater than 0", env, field);
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
    s->nvme_read_gbps = cfg->sim_nvme_read_gbps > 0 ? cfg->sim_nvme_read_gbps : HOFF__DEF_SIM_NVME_READ_GBPS;
    s->nvme_write_gbps = cfg->sim_nvme_write_gbps > 0 ? cfg->sim_nvme_write_gbps : HOFF__DEF_SIM_NVME_WRITE_GBPS;
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

int hoff__sim_test_fail_protect(struct hoff__backend *be, unsigned n, unsigned count) {
    struct sim *s;

    if (!be || be->ops != &sim_ops)
        return -ENOTSUP;
    s = to_sim(be);
    pthread_mutex_lock(&s->lock);
    s->fail_at = count ? n : 0;
    s->fail_count = count;
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
