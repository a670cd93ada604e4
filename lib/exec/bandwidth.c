/* bandwidth.c — the bandwidth estimator: D2H and H2D GB/s for the planner, measured at start-up with a
 * 16 MiB probe (the RFC's size) on a real device.  Threading: called once from hoff_init, before other threads. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "exec/executor.h"
#include "tier/nvme.h"

#define PROBE_BYTES ((size_t)16 << 20)
#define PROBE_ROUNDS 3

/* Evict and prefetch the (resident) probe a few times, keeping the best
 * rate of each direction in GB/s (bytes per ns).  -errno on failure. */
static int probe(struct hoff__backend *be, void *p, double *d2h, double *h2d) {
    hoff__event *done = NULL;
    int i, rc = 0;

    *d2h = *h2d = 0;
    if ((rc = be->ops->event_create(be, &done)) != 0)
        return rc;
    for (i = 0; i < PROBE_ROUNDS * 2 && rc == 0; i++) {
        int evict = i % 2 == 0; /* the probe starts on the device */
        uint64_t t0 = be->ops->clock_ns(be), t1;
        double gbps;

        rc = evict ? be->ops->evict(be, p, PROBE_BYTES, NULL, done) : be->ops->prefetch(be, p, PROBE_BYTES, NULL, done);
        if (rc == 0)
            rc = be->ops->event_sync(be, done);
        t1 = be->ops->clock_ns(be);
        gbps = t1 > t0 ? (double)PROBE_BYTES / (double)(t1 - t0) : 0;
        if (evict && gbps > *d2h)
            *d2h = gbps;
        if (!evict && gbps > *h2d)
            *h2d = gbps;
    }
    be->ops->event_destroy(be, done);
    return rc;
}

void hoff__bandwidth_measure(struct hoff__backend *be, const struct hoff_config *cfg, double *h2d, double *d2h) {
    void *p = NULL;

    *h2d = *d2h = cfg->bandwidth_gbps;
    if (strcmp(be->ops->name, "sim") == 0) {
        /* The model's own figures: measuring them would only move the clock. */
        *h2d = cfg->sim_h2d_gbps;
        *d2h = cfg->sim_d2h_gbps;
        return;
    }
    if (be->ops->managed_alloc(be, PROBE_BYTES, &p) != 0) {
        hoff__log(HOFF_LOG_INFO, "bandwidth probe: no managed memory for it; assuming %.1f GB/s (HOFF_BANDWIDTH_GBPS)",
                  cfg->bandwidth_gbps);
        return;
    }
    {
        double d, h;
        int rc = probe(be, p, &d, &h);
        if (rc == 0 && d > 0 && h > 0) {
            *d2h = d;
            *h2d = h;
            hoff__log(HOFF_LOG_INFO, "bandwidth probe: D2H %.1f GB/s, H2D %.1f GB/s", d, h);
        } else {
            hoff__log(HOFF_LOG_WARN, "bandwidth probe failed (%s); assuming %.1f GB/s (HOFF_BANDWIDTH_GBPS)",
                      hoff_strerror(rc), cfg->bandwidth_gbps);
        }
    }
    be->ops->managed_free(be, p, PROBE_BYTES);
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hoff__nvme_bandwidth_measure(struct hoff__backend *be, struct hoff__nvme *nvme, const struct hoff_config *cfg,
                                  double *rd, double *wr) {
    struct hoff__nvme_spill *sp = NULL;
    unsigned char *buf;
    uint64_t t0, t1, t2;

    *rd = cfg->sim_nvme_read_gbps;
    *wr = cfg->sim_nvme_write_gbps;
    if (!nvme || strcmp(be->ops->name, "sim") == 0)
        return; /* no tier, or the model's own figures */
    buf = malloc(PROBE_BYTES);
    if (!buf)
        return;
    memset(buf, 0x5A, PROBE_BYTES);
    t0 = mono_ns();
    if (hoff__nvme_spill(nvme, buf, PROBE_BYTES, 0, &sp) == 0) {
        t1 = mono_ns();
        if (hoff__nvme_restore(nvme, sp, buf, PROBE_BYTES) == 0) {
            t2 = mono_ns();
            if (t1 > t0 && t2 > t1) {
                *wr = (double)PROBE_BYTES / (double)(t1 - t0);
                *rd = (double)PROBE_BYTES / (double)(t2 - t1);
                hoff__log(HOFF_LOG_INFO, "NVMe probe: write %.2f GB/s, read %.2f GB/s", *wr, *rd);
            }
        }
        hoff__nvme_drop(nvme, sp);
    } else {
        hoff__log(HOFF_LOG_WARN, "NVMe probe failed (%s); the planner assumes %.1f GB/s read, %.1f GB/s write",
                  hoff_last_error(), *rd, *wr);
    }
    free(buf);
}
