/* simrun.c — what a simulated run of a trace needs: the sim device's size and this machine's memory for it, and
 * the sim context built from the command's flags.  Threading: single-threaded. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "hoff-plan.h"
#include "mem/pool.h"

/* Memory a new allocation can get now: HOFF_PLAN_MEM_AVAILABLE when set (a
 * container's share, or a test's figure), else MemAvailable from
 * /proc/meminfo, else sysinfo's free and buffer RAM; 0 when none says.  -1
 * (said) when HOFF_PLAN_MEM_AVAILABLE is not a size. */
static int mem_available(const char *sub, const char **source, uint64_t *out) {
    const char *env = getenv("HOFF_PLAN_MEM_AVAILABLE");
    FILE *f;
    char line[256];
    struct sysinfo si;

    if (env) {
        *source = "HOFF_PLAN_MEM_AVAILABLE";
        if (hoff__parse_size(env, out) == 0 && *out > 0)
            return 0;
        fprintf(stderr, "%s %s: HOFF_PLAN_MEM_AVAILABLE: expected a size above 0 such as 512M or 16G, got '%s'\n",
                hp_cmd, sub, env);
        return -1;
    }
    f = fopen("/proc/meminfo", "re");
    if (f) {
        unsigned long long kb;

        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                *source = "MemAvailable";
                *out = (uint64_t)kb * 1024;
                return 0;
            }
        fclose(f);
    }
    if (sysinfo(&si) == 0) {
        *source = "free and buffer RAM";
        *out = ((uint64_t)si.freeram + si.bufferram) * si.mem_unit;
        return 0;
    }
    *source = "unknown";
    *out = 0;
    return 0;
}

/* The sim backs every device byte with real memory (and the stamps touch
 * every page of every block), and each evicted block's host copy as well.
 * With L the peak of live blocks in block bytes (size classes, the 2 MiB
 * managed grain), a run needs about 2L with no budget (the pool's cache maps
 * more than is live at once) and 3L plus the offload peak under one (the
 * plan's group layouts are mappings of their own; evicted blocks have host
 * copies), plus `extra` (the caller's own tables).  Measured maximum RSS
 * against the estimate, 25% budget: gpt.trace.gz 3.1 GiB (3.8), wide 3.1
 * (4.3), cnn 1.6 (1.6); no budget: gpt 1.2 (1.9), cnn 0.6 (0.8).  Refuses (a
 * message, EXIT_MEMORY: the machine is short of memory now, not the trace
 * wrong) when that passes what the machine has available, unless no_check;
 * EXIT_USAGE for a bad HOFF_PLAN_MEM_AVAILABLE; 0 otherwise. */
int hp_sim_size(const char *sub, const struct hoff__trace *t, uint64_t budget, uint64_t offload_peak, uint64_t extra,
                int no_check, struct sim_size *z) {
    uint64_t live = hoff__trace_peak(t, hoff__pool_block_bytes, HOFF__POOLS_ALL, NULL),
             asked = hoff__trace_peak(t, NULL, HOFF__POOLS_ALL, NULL);
    const char *source;
    char grain[160] = "";

    z->device_bytes = 80 * GiB;
    if (live > z->device_bytes / 2)
        z->device_bytes = live > UINT64_MAX / 2 ? UINT64_MAX : live * 2;
    if (budget > z->device_bytes)
        z->device_bytes = budget; /* a budget above every peak never binds */
    z->mem_bytes = (budget ? 3 * live + offload_peak : 2 * live) + extra;
    if (mem_available(sub, &source, &z->avail_bytes) != 0)
        return EXIT_USAGE;
    if (no_check || z->avail_bytes == 0 || z->mem_bytes <= z->avail_bytes)
        return 0;
    if (live / 2 > asked)
        snprintf(grain, sizeof grain,
                 " (%s asked for: every offload block takes whole 2 MiB grains, and small "
                 "ones take size classes)",
                 SZ(asked));
    fprintf(stderr,
            "%s %s: this simulation needs about %s of memory and the machine has %s available (%s): the sim "
            "backs the trace's blocks with real memory, %s a peak of %s of live blocks%s%s%s; refusing.  "
            "Simulate a smaller trace, or pass --no-memory-check to run anyway.\n",
            hp_cmd, sub, SZ(z->mem_bytes), SZ(z->avail_bytes), source, budget ? "three times" : "twice", SZ(live),
            grain, budget ? ", plus host copies of evicted blocks up to " : "", budget ? SZ(offload_peak) : "");
    return EXIT_MEMORY;
}

int hp_make_ctx(const struct hp_args *a, uint64_t budget, uint64_t device_bytes, hoff_ctx **ctx) {
    struct hoff_config cfg;
    char err[256];
    int rc;

    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_SIM;
    cfg.sim_device_bytes = device_bytes;
    cfg.sim_h2d_gbps = a->bandwidth;
    cfg.sim_d2h_gbps = a->bandwidth;
    cfg.bandwidth_gbps = a->bandwidth;
    cfg.sim_protect = HOFF_SIM_POISON;
    cfg.oversub_margin_bytes = 0;
    cfg.budget_bytes = budget;
    cfg.host_cap_bytes = a->host_cap;
    cfg.groups = a->groups;
    /* The plan is in use from the step after the recording, as on a step
     * long enough to hide the planning thread: what a budget costs in the
     * steady state, the same on every run. */
    cfg.plan_thread = 0;
    err[0] = '\0';
    if ((rc = hoff_config_set(&cfg, "planner", a->planner, err, sizeof err)) != 0) {
        fprintf(stderr, "%s %s: --planner: %s\n", hp_cmd, a->sub, err[0] ? err : hoff_strerror(rc));
        return rc;
    }
    if (a->spill_dir && (rc = hoff_config_set(&cfg, "spill_dir", a->spill_dir, err, sizeof err)) != 0) {
        fprintf(stderr, "%s: --spill-dir: %s\n", hp_cmd, err[0] ? err : hoff_strerror(rc));
        return rc;
    }
    if ((rc = hoff_init(ctx, &cfg)) != 0) {
        fprintf(stderr, "%s %s: cannot create the sim context: %s\n", hp_cmd, a->sub, hoff_last_error());
        return rc;
    }
    return 0;
}
