/* options.c — the one table of options: every struct hoff_config field with its HOFF_* variable,
 * type, default, range and help; the names, the environment, the public calls and validation over it
 * (one value's text forms are optparse.c's, its range, printing and messages optvalue.c's).
 * Threading: the table is constant and each function touches only the caller's struct;
 * hoff_config_from_env reads environ, so do not run it while another thread calls setenv(). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "core/optdefs.h"
#include "core/options.h"
#include "core/optvalue.h"
#include "plan/plan.h"

extern char **environ;

/* offsetof(struct hoff_config, f), and a compile error unless f has type T,
 * so that a field's storage always matches what its option type writes.
 * (Unformatted: clang-format 14 reads _Generic's associations as labels.) */
/* clang-format off */
#define OFF(f, T)                                                              \
    (offsetof(struct hoff_config, f) +                                         \
     0 * sizeof(char[_Generic(((struct hoff_config *)0)->f, T: 1, default: -1)]))

/* A char array field: its offset, and a compile error unless it is one. */
#define FIELD_SIZE(f) sizeof(((struct hoff_config *)0)->f)
#define OFF_STR(f)                                                             \
    (offsetof(struct hoff_config, f) +                                         \
     0 * sizeof(char[_Generic(&((struct hoff_config *)0)->f,                   \
                              char(*)[FIELD_SIZE(f)]: 1, default: -1)]))
/* clang-format on */

#define SIZE_TOP 1125899906842624.0 /* 1024T: larger is surely a typo */
#define NS_PER_S 1e9

static const char *const backend_names[] = {"auto", "sim", "cuda", NULL};
static const char *const log_names[] = {"off", "error", "warn", "info", "debug", NULL};
static const struct hoff__opt_alias log_aliases[] = {{"warning", HOFF_LOG_WARN}, {NULL, 0}};
static const char *const protect_names[] = {"poison", "protect", NULL};
static const char *const fence_names[] = {"stream", "device", NULL};

_Static_assert(HOFF_BACKEND_AUTO == 0 && HOFF_BACKEND_SIM == 1 && HOFF_BACKEND_CUDA == 2,
               "backend_names follows enum hoff_backend_kind");
_Static_assert(HOFF_LOG_OFF == 0 && HOFF_LOG_ERROR == 1 && HOFF_LOG_WARN == 2 && HOFF_LOG_INFO == 3 &&
                   HOFF_LOG_DEBUG == 4,
               "log_names follows enum hoff_log_level");
_Static_assert(HOFF_SIM_POISON == 0 && HOFF_SIM_PROTECT == 1, "protect_names follows enum hoff_sim_protect");
_Static_assert(HOFF_FENCE_STREAM == 0 && HOFF_FENCE_DEVICE == 1, "fence_names follows enum hoff_free_fence");

/* The planners lib/plan/plan.c registers. */
static const char *planner_at(int i) {
    const struct hoff__planner *p = hoff__planner_at(i);

    return p ? p->name : NULL;
}

static int planner_known(const char *s) {
    return hoff__planner_find(s) != NULL;
}

/* numa: a keyword, or a list of node numbers below NUMA_NODES. */
#define NUMA_NODES 1024
#define NUMA_EXPECT                                                        \
    "nearest, interleave, or a comma-separated list of NUMA node numbers " \
    "from 0 to 1023 without repeats (e.g. 0 or 0,2)"

static const char *numa_at(int i) {
    static const char *const names[] = {"nearest", "interleave", NULL};

    return i >= 0 && i < 2 ? names[i] : NULL;
}

/* "0", "0,2", "3,1": digits and commas, no empty item, each node below
 * NUMA_NODES, none twice.  (The keywords are numa_at's.) */
static int numa_check(const char *s, size_t n, char *why, size_t whylen) {
    unsigned char seen[NUMA_NODES / 8];
    size_t i;

    for (i = 0; i < n; i++) {
        if (isdigit((unsigned char)s[i]))
            continue;
        if (s[i] != ',' || i == 0 || i + 1 == n || s[i + 1] == ',') {
            snprintf(why, whylen, "not a placement");
            return -1;
        }
    }
    if (n == 0) {
        snprintf(why, whylen, "not a placement");
        return -1;
    }
    memset(seen, 0, sizeof seen);
    for (i = 0; i < n; i++) {
        size_t start = i;
        unsigned node = 0;

        for (; i < n && s[i] != ','; i++)
            if (node < NUMA_NODES) /* stays below 10 * NUMA_NODES */
                node = node * 10 + (unsigned)(s[i] - '0');
        if (node >= NUMA_NODES) {
            snprintf(why, whylen, "node %.*s is out of range", (int)(i - start), s + start);
            return -1;
        }
        if (seen[node / 8] & (1u << (node % 8))) {
            snprintf(why, whylen, "node %u is listed twice", node);
            return -1;
        }
        seen[node / 8] |= (unsigned char)(1u << (node % 8));
    }
    return 0;
}

/* The table, keyed by enum hoff__option (options.h): an entry per key, which
 * test_options checks, with the default named here once (the sim's transfer
 * clock's in optdefs.h).  Columns beyond the value's: live (may change on a
 * running context, hoff_torch_configure) and replan (a change of it needs a
 * new plan).  doc/man/hoff-config.7 documents each entry and its default, and
 * hoff_torch.3 the live ones (tests/man.sh and test_options check both).
 * Unformatted: clang-format would give each field of an entry its own line. */
/* clang-format off */
static const struct hoff__opt opts[HOFF__OPTION_COUNT] = {
    [HOFF__OPTION_BACKEND] = {.name = "backend", .env = "HOFF_BACKEND", .type = HOFF__OPT_ENUM,
     .offset = OFF(backend, int), .def = "auto", .names = backend_names,
     .help = "backend: auto (cuda where a GPU is present, else sim), sim or cuda"},
    [HOFF__OPTION_DEVICE] = {.name = "device", .env = "HOFF_DEVICE", .type = HOFF__OPT_INT,
     .offset = OFF(device, int), .def = "-1", .min = -1, .max = 1023,
     .help = "CUDA device ordinal to allocate on; -1 = LOCAL_RANK when set, else the calling thread's current device"},
    [HOFF__OPTION_BUDGET] = {.name = "budget", .env = "HOFF_BUDGET", .type = HOFF__OPT_SIZE,
     .offset = OFF(budget_bytes, uint64_t), .def = "0", .min = 0, .max = SIZE_TOP,
     .live = 1, .replan = 1,
     .help = "device budget for resident offload bytes; 0 = no limit"},
    [HOFF__OPTION_HOST_CAP] = {.name = "host_cap", .env = "HOFF_HOST_CAP", .type = HOFF__OPT_SIZE,
     .offset = OFF(host_cap_bytes, uint64_t), .def = "0", .min = 0, .max = SIZE_TOP,
     .live = 1, .replan = 1,
     .help = "most bytes the host tier may hold; 0 = no limit"},
    [HOFF__OPTION_MANAGED_MIN] = {.name = "managed_min", .env = "HOFF_MANAGED_MIN", .type = HOFF__OPT_SIZE,
     .offset = OFF(managed_min_bytes, uint64_t), .def = "1M", .min = 0, .max = SIZE_TOP,
     .help = "in-step allocations of at least this size are offload candidates"},
    [HOFF__OPTION_OVERSUB_MARGIN] = {.name = "oversub_margin", .env = "HOFF_OVERSUB_MARGIN", .type = HOFF__OPT_SIZE,
     .offset = OFF(oversub_margin_bytes, uint64_t), .def = "256M", .min = 0,
     .max = SIZE_TOP,
     .help = "device bytes kept free when mapping managed memory"},
    [HOFF__OPTION_OVERSUBSCRIBE] = {.name = "oversubscribe", .env = "HOFF_OVERSUBSCRIBE", .type = HOFF__OPT_BOOL,
     .offset = OFF(oversubscribe, int), .def = "0",
     .help = "allow mapping more managed memory than the device has free (can hang the GPU)"},
    [HOFF__OPTION_LOG_LEVEL] = {.name = "log_level", .env = "HOFF_LOG_LEVEL", .type = HOFF__OPT_ENUM,
     .offset = OFF(log_level, int), .def = "warn", .names = log_names,
     .aliases = log_aliases,
     .live = 1,
     .help = "log on stderr up to this level: off, error, warn, info or debug"},
    [HOFF__OPTION_SIM_DEVICE] = {.name = "sim_device", .env = "HOFF_SIM_DEVICE", .type = HOFF__OPT_SIZE,
     .offset = OFF(sim_device_bytes, uint64_t), .def = "80G", .min = 4096,
     .max = SIZE_TOP,
     .help = "memory of the simulated device"},
    [HOFF__OPTION_SIM_H2D_GBPS] = {.name = "sim_h2d_gbps", .env = "HOFF_SIM_H2D_GBPS", .type = HOFF__OPT_DOUBLE,
     .offset = OFF(sim_h2d_gbps, double), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_H2D_GBPS),
     .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "bandwidth of the simulated host-to-device copy engine, GB/s"},
    [HOFF__OPTION_SIM_D2H_GBPS] = {.name = "sim_d2h_gbps", .env = "HOFF_SIM_D2H_GBPS", .type = HOFF__OPT_DOUBLE,
     .offset = OFF(sim_d2h_gbps, double), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_D2H_GBPS),
     .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "bandwidth of the simulated device-to-host copy engine, GB/s"},
    [HOFF__OPTION_SIM_LATENCY] = {.name = "sim_latency", .env = "HOFF_SIM_LATENCY", .type = HOFF__OPT_DURATION,
     .offset = OFF(sim_latency_ns, uint64_t), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_LATENCY_NS), .min = 0,
     .max = 60 * NS_PER_S,
     .help = "fixed cost of each simulated transfer call"},
    [HOFF__OPTION_SIM_FAULT_GBPS] = {.name = "sim_fault_gbps", .env = "HOFF_SIM_FAULT_GBPS", .type = HOFF__OPT_DOUBLE,
     .offset = OFF(sim_fault_gbps, double), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_FAULT_GBPS),
     .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "rate at which the simulated device pages in a block on demand, GB/s"},
    [HOFF__OPTION_SIM_FAULT_NS] = {.name = "sim_fault_ns", .env = "HOFF_SIM_FAULT_NS", .type = HOFF__OPT_DURATION,
     .offset = OFF(sim_fault_ns, uint64_t), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_FAULT_NS), .min = 0,
     .max = 60 * NS_PER_S,
     .help = "fixed cost of one simulated page fault"},
    [HOFF__OPTION_SIM_PROTECT] = {.name = "sim_protect", .env = "HOFF_SIM_PROTECT", .type = HOFF__OPT_ENUM,
     .offset = OFF(sim_protect, int), .def = "poison", .names = protect_names,
     .help = "non-resident sim bytes: poison (overwrite with 0xDB) or protect (also mprotect)"},
    [HOFF__OPTION_QUEUE_DEPTH] = {.name = "queue_depth", .env = "HOFF_QUEUE_DEPTH", .type = HOFF__OPT_INT,
     .offset = OFF(issue_queue_depth, int), .def = "1024", .min = 1, .max = 1 << 20,
     .help = "slots in the issuing thread's command queue"},
    [HOFF__OPTION_PLANNER] = {.name = "planner", .env = "HOFF_PLANNER", .type = HOFF__OPT_STRING,
     .offset = OFF_STR(planner), .size = FIELD_SIZE(planner), .def = "timed",
     .unit = "planner", .choice_at = planner_at, .known = planner_known,
     .live = 1, .replan = 1,
     .help = "planner that turns the recorded step into a residency schedule"},
    [HOFF__OPTION_GUARD_AFTER_ALLOC] = {.name = "guard_after_alloc", .env = "HOFF_GUARD_AFTER_ALLOC", .type = HOFF__OPT_UINT32,
     .offset = OFF(guard_after_alloc, uint32_t), .def = "1", .min = 0, .max = 1000000,
     .help = "blocks without access marks: events after the alloc before they may be evicted"},
    [HOFF__OPTION_GUARD_BEFORE_FREE] = {.name = "guard_before_free", .env = "HOFF_GUARD_BEFORE_FREE", .type = HOFF__OPT_UINT32,
     .offset = OFF(guard_before_free, uint32_t), .def = "1", .min = 0, .max = 1000000,
     .help = "blocks without access marks: events before the free by which they are back"},
    [HOFF__OPTION_REPLAN_AFTER] = {.name = "replan_after", .env = "HOFF_REPLAN_AFTER", .type = HOFF__OPT_UINT32,
     .offset = OFF(replan_after, uint32_t), .def = "2", .min = 0, .max = 1000000,
     .help = "divergent steps in a row before hoff records and plans again; 0 = never"},
    [HOFF__OPTION_BANDWIDTH_GBPS] = {.name = "bandwidth_gbps", .env = "HOFF_BANDWIDTH_GBPS", .type = HOFF__OPT_DOUBLE,
     .offset = OFF(bandwidth_gbps, double), .def = "16", .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "H2D and D2H bandwidth the planner assumes where the backend cannot measure it, GB/s"},
    [HOFF__OPTION_TRACE] = {.name = "trace", .env = "HOFF_TRACE", .type = HOFF__OPT_STRING,
     .offset = OFF_STR(trace_path), .size = FIELD_SIZE(trace_path), .def = "",
     .unit = "path",
     .help = "write each recorded step's trace to this file; empty = don't"},
    [HOFF__OPTION_STATS] = {.name = "stats", .env = "HOFF_STATS", .type = HOFF__OPT_BOOL,
     .offset = OFF(stats_publish, int), .def = "1",
     .help = "publish the statistics in shared memory for hoff-stat"},
    [HOFF__OPTION_NUMA] = {.name = "numa", .env = "HOFF_NUMA", .type = HOFF__OPT_STRING,
     .offset = OFF_STR(numa), .size = FIELD_SIZE(numa), .def = "nearest",
     .unit = "placement", .choice_at = numa_at, .check = numa_check,
     .expect = NUMA_EXPECT,
     .help = "host-tier placement: nearest (the GPU's NUMA node), interleave, or a node list like 0,2"},
    [HOFF__OPTION_SPILL_DIR] = {.name = "spill_dir", .env = "HOFF_SPILL_DIR", .type = HOFF__OPT_STRING,
     .offset = OFF_STR(spill_dir), .size = FIELD_SIZE(spill_dir), .def = "",
     .unit = "path",
     .help = "directory for NVMe spill files (created unlinked); empty = no NVMe tier"},
    [HOFF__OPTION_SPILL_CHUNK] = {.name = "spill_chunk", .env = "HOFF_SPILL_CHUNK", .type = HOFF__OPT_SIZE,
     .offset = OFF(spill_chunk_bytes, uint64_t), .def = "4M", .min = 65536,
     .max = (uint64_t)1 << 30, .multiple = 4096,
     .help = "size of one NVMe I/O (a multiple of 4 KiB)"},
    [HOFF__OPTION_IO_DEPTH] = {.name = "io_depth", .env = "HOFF_IO_DEPTH", .type = HOFF__OPT_INT,
     .offset = OFF(io_queue_depth, int), .def = "32", .min = 8, .max = 4096,
     .help = "io_uring queue depth of the NVMe tier"},
    [HOFF__OPTION_SIM_NVME_READ_GBPS] = {.name = "sim_nvme_read_gbps", .env = "HOFF_SIM_NVME_READ_GBPS", .type = HOFF__OPT_DOUBLE,
     .offset = OFF(sim_nvme_read_gbps, double), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_NVME_READ_GBPS),
     .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "read rate of the simulated NVMe tier, GB/s"},
    [HOFF__OPTION_SIM_NVME_WRITE_GBPS] = {.name = "sim_nvme_write_gbps", .env = "HOFF_SIM_NVME_WRITE_GBPS", .type = HOFF__OPT_DOUBLE,
     .offset = OFF(sim_nvme_write_gbps, double), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_NVME_WRITE_GBPS),
     .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "write rate of the simulated NVMe tier, GB/s"},
    [HOFF__OPTION_SIM_CALL_NS] = {.name = "sim_call_ns", .env = "HOFF_SIM_CALL_NS", .type = HOFF__OPT_DURATION,
     .offset = OFF(sim_call_ns, uint64_t), .def = HOFF__DEF_TEXT(HOFF__DEF_SIM_CALL_NS), .min = 0,
     .max = 60 * NS_PER_S,
     .help = "the issuing thread's own cost per simulated transfer call (serial across calls)"},
    [HOFF__OPTION_GROUPS] = {.name = "groups", .env = "HOFF_GROUPS", .type = HOFF__OPT_BOOL,
     .offset = OFF(groups, int), .def = "1",
     .help = "lay out blocks the plan moves together in one mapping and move them with one call"},
    [HOFF__OPTION_PLAN_THREAD] = {.name = "plan_thread", .env = "HOFF_PLAN_THREAD", .type = HOFF__OPT_BOOL,
     .offset = OFF(plan_thread, int), .def = "1",
     .help = "plan on a background thread while the next steps run under the online policy; "
             "0 = plan at the recorded step's end, the training thread waiting"},
    [HOFF__OPTION_PLAN_TIME] = {.name = "plan_time", .env = "HOFF_PLAN_TIME", .type = HOFF__OPT_DURATION,
     .offset = OFF(plan_time_ns, uint64_t), .def = "0", .min = 0, .max = 3600 * NS_PER_S,
     .help = "time budget of one planning (the planner answers with the best schedule found by then); "
             "0 = no limit"},
    [HOFF__OPTION_BUDGET_PCT] = {.name = "budget_pct", .env = "HOFF_BUDGET_PCT", .type = HOFF__OPT_DOUBLE,
     .offset = OFF(budget_pct, double), .def = "0", .min = 0, .max = 100, .unit = "percent",
     .help = "the budget as a percentage of the device's memory (per rank: its own GPU); 0 = HOFF_BUDGET applies"},
    [HOFF__OPTION_FREE_FENCE] = {.name = "free_fence", .env = "HOFF_FREE_FENCE", .type = HOFF__OPT_ENUM,
     .offset = OFF(free_fence, int), .def = "stream", .names = fence_names,
     .help = "a freed device-pool block is reused once its stream (stream) or the whole device (device) passed the free"},
    [HOFF__OPTION_OFFLOAD_GRADIENTS] = {.name = "offload_gradients", .env = "HOFF_OFFLOAD_GRADIENTS",
     .type = HOFF__OPT_BOOL, .offset = OFF(offload_gradients, int), .def = "0", .live = 1, .replan = 1,
     .help = "1 = gradients and the optimizer step's blocks stay offload candidates (hoff_keep does nothing): "
             "they count against the budget, can set the working-set floor, and moving them costs link time"},
};
/* clang-format on */

#define NOPTS HOFF__OPTION_COUNT

/* Variables other parts of hoff read; hoff_config_from_env lets them pass. */
static const char *const reserved[] = {
    "HOFF_LIBRARY",
    "HOFF_STEP_MARK",
    "HOFF_TEST",
    /* the Python package's C++ shim (python/hoff/shim.py) */
    "HOFF_SHIM",
    "HOFF_SHIM_CACHE",
    /* hoff-record(1) and its preload */
    "HOFF_RECORD_OUTPUT",
    "HOFF_RECORD_THRESHOLD",
    "HOFF_RECORD_STEP",
    "HOFF_RECORD_QUIET",
    "HOFF_RECORD_LIBRARY",
    "HOFF_RECORD_STATUS",
    /* python -m hoff --sim (python/hoff/_sim.py) */
    "HOFF_SIM_LAUNCHED",
    "HOFF_SIM_PRELOAD",
    /* hoff-plan(1)'s simulations */
    "HOFF_PLAN_MEM_AVAILABLE",
    NULL,
};

static int set_opt(struct hoff_config *cfg, const struct hoff__opt *o, const char *value, const char *who, char *err,
                   size_t errlen) {
    union hoff__optval v;
    char why[128], shown_v[64], range[256];
    int rc = hoff__opt_parse(o, value, &v);

    if (rc != HOFF__P_OK)
        return hoff__opt_bad_value(o, who, value, rc, err, errlen);
    if (hoff__opt_check(o, v, why, sizeof why) != 0) {
        hoff__opt_describe(o, range, sizeof range);
        return hoff__opt_fail(-EINVAL, err, errlen, "%s='%s': %s; expected %s", who,
                              hoff__opt_shown(value, (size_t)-1, shown_v, sizeof shown_v), why, range);
    }
    hoff__opt_store(cfg, o, v);
    return 0;
}

/* ---- names ------------------------------------------------------------- */

/* Case-insensitive edit distance, for "did you mean". */
static int distance(const char *a, size_t la, const char *b) {
    int prev[64], cur[64];
    size_t lb = strlen(b), i, j;

    la = la > 63 ? 63 : la;
    lb = lb > 63 ? 63 : lb;
    for (j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int del = prev[j] + 1, ins = cur[j - 1] + 1;

            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

/* "budget", "BUDGET" or "HOFF_BUDGET" (any case); *is_env for the last. */
static const struct hoff__opt *lookup(const char *name, int *is_env) {
    const char *key = name;
    int i;

    *is_env = strncasecmp(name, "HOFF_", 5) == 0;
    if (*is_env)
        key += 5;
    for (i = 0; i < NOPTS; i++)
        if (!strcasecmp(key, opts[i].name))
            return &opts[i];
    return NULL;
}

static const char *reserved_match(const char *name, size_t n, int any_case) {
    int i;

    for (i = 0; reserved[i]; i++) {
        if (strlen(reserved[i]) != n)
            continue;
        if (any_case ? !strncasecmp(name, reserved[i], n) : !memcmp(name, reserved[i], n))
            return reserved[i];
    }
    return NULL;
}

static void who_of(const struct hoff__opt *o, int is_env, char *buf, size_t len) {
    if (is_env)
        snprintf(buf, len, "%s", o->env);
    else
        snprintf(buf, len, "option '%s'", o->name);
}

/* The error for a name hoff_config_set/get does not know. */
static int unknown_name(const char *name, int is_env, char *err, size_t errlen) {
    const char *best = NULL, *res;
    char v[64];
    int i, d, bestd = 1 << 30;

    hoff__opt_shown(name, (size_t)-1, v, sizeof v);
    res = is_env ? reserved_match(name, strlen(name), 1) : NULL;
    if (res)
        return hoff__opt_fail(-ENOENT, err, errlen,
                              "%s is not a configuration option: it is read by another part "
                              "of hoff (see hoff-config(7))",
                              res);
    for (i = 0; i < NOPTS; i++) {
        d = is_env ? distance(name, strlen(name), opts[i].env) : distance(name, strlen(name), opts[i].name);
        if (d < bestd) {
            bestd = d;
            best = is_env ? opts[i].env : opts[i].name;
        }
    }
    if (is_env)
        return hoff__opt_fail(-ENOENT, err, errlen, "unknown option %s; did you mean %s? (hoff-config(7) lists them)",
                              v, best);
    return hoff__opt_fail(-ENOENT, err, errlen, "unknown option '%s'; did you mean '%s'? (hoff-config(7) lists them)",
                          v, best);
}

/* The error for a HOFF_* variable that is neither an option nor reserved. */
static int unknown_env(const char *var, size_t n, char *err, size_t errlen) {
    const char *best = NULL;
    char v[64];
    int i, d, bestd = 1 << 30;

    hoff__opt_shown(var, n, v, sizeof v);
    for (i = 0; i < NOPTS; i++) {
        d = distance(var, n, opts[i].env);
        if (d < bestd) {
            bestd = d;
            best = opts[i].env;
        }
    }
    for (i = 0; reserved[i]; i++) {
        d = distance(var, n, reserved[i]);
        if (d < bestd) {
            bestd = d;
            best = reserved[i];
        }
    }
    return hoff__opt_fail(-ENOENT, err, errlen,
                          "unknown variable %s in the environment; did you mean %s? "
                          "(hoff-config(7) lists hoff's variables; unset the others)",
                          v, best);
}

/* ---- the public functions ------------------------------------------------ */

HOFF_API void hoff_config_init(struct hoff_config *cfg) {
    union hoff__optval v;
    int i;

    if (!cfg) {
        hoff__error(-EINVAL, "hoff_config_init: cfg is NULL");
        return;
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->version = HOFF_CONFIG_VERSION;
    cfg->size = sizeof *cfg;
    for (i = 0; i < NOPTS; i++)
        if (hoff__opt_parse(&opts[i], opts[i].def, &v) == HOFF__P_OK) /* tests check each one */
            hoff__opt_store(cfg, &opts[i], v);
}

HOFF_API int hoff_config_set(struct hoff_config *cfg, const char *name, const char *value, char *err, size_t errlen) {
    const struct hoff__opt *o;
    char who[64];
    int is_env;

    if (!cfg || !name)
        return hoff__opt_fail(-EINVAL, err, errlen, "hoff_config_set: %s is NULL", cfg ? "name" : "cfg");
    o = lookup(name, &is_env);
    if (!o)
        return unknown_name(name, is_env, err, errlen);
    who_of(o, is_env, who, sizeof who);
    return set_opt(cfg, o, value ? value : "", who, err, errlen);
}

HOFF_API int hoff_config_from_env(struct hoff_config *cfg, char *err, size_t errlen) {
    struct hoff_config tmp;
    char **e;
    int i, rc;

    if (!cfg)
        return hoff__opt_fail(-EINVAL, err, errlen, "hoff_config_from_env: cfg is NULL");
    tmp = *cfg; /* all or nothing: cfg changes only if every variable is good */
    for (e = environ; e && *e; e++) {
        const char *var = *e, *eq = strchr(var, '=');
        const struct hoff__opt *o = NULL;
        size_t n;

        if (strncmp(var, "HOFF_", 5) != 0 || !eq)
            continue;
        n = (size_t)(eq - var);
        for (i = 0; i < NOPTS && !o; i++)
            if (strlen(opts[i].env) == n && !memcmp(var, opts[i].env, n))
                o = &opts[i];
        if (o) {
            if (!eq[1])
                continue; /* HOFF_X= (empty) counts as unset */
            rc = set_opt(&tmp, o, eq + 1, o->env, err, errlen);
            if (rc)
                return rc;
        } else if (!reserved_match(var, n, 0)) {
            return unknown_env(var, n, err, errlen);
        }
    }
    *cfg = tmp;
    return 0;
}

HOFF_API int hoff_config_get(const struct hoff_config *cfg, const char *name, char *buf, size_t len) {
    const struct hoff__opt *o;
    int is_env, n;

    if (!cfg || !name || (!buf && len))
        return hoff__opt_fail(-EINVAL, NULL, 0, "hoff_config_get: %s is NULL", !cfg ? "cfg" : !name ? "name" : "buf");
    o = lookup(name, &is_env);
    if (!o)
        return unknown_name(name, is_env, NULL, 0);
    n = hoff__opt_format(o, hoff__opt_load(cfg, o), buf, len);
    if ((size_t)n >= len)
        return hoff__opt_fail(-ERANGE, NULL, 0, "hoff_config_get: the value of %s needs %d bytes; the buffer has %zu",
                              o->name, n + 1, len);
    return 0;
}

const struct hoff__opt *hoff__option_at(int i) {
    return i >= 0 && i < NOPTS ? &opts[i] : NULL;
}

/* ---- a running context ------------------------------------------------------ */

/* The bytes of o's field in struct hoff_config. */
static size_t field_size(const struct hoff__opt *o) {
    switch (o->type) {
    case HOFF__OPT_SIZE:
    case HOFF__OPT_DURATION: return sizeof(uint64_t);
    case HOFF__OPT_UINT32: return sizeof(uint32_t);
    case HOFF__OPT_DOUBLE: return sizeof(double);
    case HOFF__OPT_STRING: return o->size;
    default: return sizeof(int);
    }
}

int hoff__config_live_update(struct hoff_config *cur, const struct hoff_config *next, const char **fixed, int *replan) {
    int i, changed = 0;

    for (i = 0; i < NOPTS; i++) {
        const struct hoff__opt *o = &opts[i];

        if (!o->live && memcmp((const char *)cur + o->offset, (const char *)next + o->offset, field_size(o))) {
            if (fixed)
                *fixed = o->name;
            return -EBUSY;
        }
    }
    for (i = 0; i < NOPTS; i++) {
        const struct hoff__opt *o = &opts[i];
        char *to = (char *)cur + o->offset;
        const char *from = (const char *)next + o->offset;

        if (!o->live || !memcmp(to, from, field_size(o)))
            continue;
        changed |= o->replan;
        memcpy(to, from, field_size(o));
    }
    *replan = changed;
    return 0;
}

int hoff__config_live_names(char *buf, size_t len) {
    int i, k = 0, last = -1;

    for (i = 0; i < NOPTS; i++)
        if (opts[i].live)
            last = i;
    if (len)
        buf[0] = '\0';
    for (i = 0; i <= last; i++) {
        size_t at = (size_t)k < len ? (size_t)k : len;

        if (opts[i].live)
            k += snprintf(buf ? buf + at : NULL, len - at, "%s%s",
                          k == 0      ? ""
                          : i == last ? " and "
                                      : ", ",
                          opts[i].name);
    }
    return k;
}

HOFF_API int hoff_config_check(const char *name, const char *value, char *buf, size_t len, char *err, size_t errlen) {
    struct hoff_config cfg;
    int rc;

    if (!name)
        return hoff__opt_fail(-EINVAL, err, errlen, "hoff_config_check: name is NULL");
    hoff_config_init(&cfg);
    rc = hoff_config_set(&cfg, name, value, err, errlen);
    if (rc || !buf)
        return rc;
    rc = hoff_config_get(&cfg, name, buf, len);
    if (rc && err && errlen)
        snprintf(err, errlen, "%s", hoff_last_error());
    return rc;
}

HOFF_API int hoff_config_count(void) {
    return NOPTS;
}

HOFF_API const char *hoff_config_name(int i) {
    if (i < 0 || i >= NOPTS) {
        hoff__error(-EINVAL, "hoff_config_name: option index %d: expected 0 to %d (hoff_config_count() - 1)", i,
                    NOPTS - 1);
        return NULL;
    }
    return opts[i].name;
}

HOFF_API const char *hoff_config_help(int i) {
    if (i < 0 || i >= NOPTS) {
        hoff__error(-EINVAL, "hoff_config_help: option index %d: expected 0 to %d (hoff_config_count() - 1)", i,
                    NOPTS - 1);
        return NULL;
    }
    return opts[i].help;
}

int hoff__config_validate(const struct hoff_config *cfg, char *err, size_t errlen) {
    char a[64], b[64], range[256], why[128];
    int i;

    if (!cfg)
        return hoff__opt_fail(-EINVAL, err, errlen, "config: the struct hoff_config pointer is NULL");
    if (cfg->version != HOFF_CONFIG_VERSION)
        return hoff__opt_fail(-EINVAL, err, errlen,
                              "config: version is %u, expected HOFF_CONFIG_VERSION (%d); "
                              "fill the struct with hoff_config_init() first",
                              (unsigned)cfg->version, HOFF_CONFIG_VERSION);
    if (cfg->size != sizeof *cfg)
        return hoff__opt_fail(-EINVAL, err, errlen,
                              "config: size is %u, expected sizeof(struct hoff_config) (%zu); "
                              "fill the struct with hoff_config_init() from this hoff.h",
                              (unsigned)cfg->size, sizeof *cfg);
    for (i = 0; i < NOPTS; i++) {
        const struct hoff__opt *o = &opts[i];
        union hoff__optval v = hoff__opt_load(cfg, o);

        if (hoff__opt_in_range(o, v)) {
            if (hoff__opt_check(o, v, why, sizeof why) == 0)
                continue;
            hoff__opt_describe(o, range, sizeof range);
            if (o->type == HOFF__OPT_STRING)
                return hoff__opt_fail(-EINVAL, err, errlen, "config: %s (%s) is '%s': %s; expected %s", o->name, o->env,
                                      hoff__opt_shown(v.s.p, v.s.n, a, sizeof a), why, range);
            hoff__opt_format(o, v, a, sizeof a);
            return hoff__opt_fail(-EINVAL, err, errlen, "config: %s (%s) is %s: %s; expected %s", o->name, o->env, a,
                                  why, range);
        }
        if (o->type == HOFF__OPT_STRING) {
            hoff__opt_describe(o, range, sizeof range);
            if (v.s.n >= o->size)
                return hoff__opt_fail(-EINVAL, err, errlen,
                                      "config: %s (%s) has no NUL within its %zu bytes; expected %s", o->name, o->env,
                                      o->size, range);
            return hoff__opt_fail(-EINVAL, err, errlen,
                                  "config: %s (%s) is '%s', not a known %s; "
                                  "expected %s",
                                  o->name, o->env, hoff__opt_shown(v.s.p, v.s.n, a, sizeof a), o->unit, range);
        }
        hoff__opt_format(o, v, a, sizeof a);
        if (o->type == HOFF__OPT_BOOL)
            snprintf(range, sizeof range, "0 or 1");
        else
            hoff__opt_describe(o, range, sizeof range);
        return hoff__opt_fail(-EINVAL, err, errlen, "config: %s (%s) is %s; expected %s", o->name, o->env, a, range);
    }
    if (cfg->budget_pct > 0 && cfg->budget_bytes > 0)
        return hoff__opt_fail(-EINVAL, err, errlen,
                              "config: both budget (HOFF_BUDGET) and budget_pct (HOFF_BUDGET_PCT) are set; set one: a "
                              "size, or a percentage of each rank's device memory");
    /* Across fields: a budget larger than the simulated device never binds,
     * which is always a mistake (HOFF_SIM_DEVICE was probably forgotten). */
    if (cfg->backend == HOFF_BACKEND_SIM && cfg->budget_bytes > cfg->sim_device_bytes) {
        const struct hoff__opt *size_opt = lookup("budget", &i);
        union hoff__optval v;

        v.u = cfg->budget_bytes;
        hoff__opt_format(size_opt, v, a, sizeof a);
        v.u = cfg->sim_device_bytes;
        hoff__opt_format(size_opt, v, b, sizeof b);
        return hoff__opt_fail(-EINVAL, err, errlen,
                              "config: budget (HOFF_BUDGET) is %s, more than the simulated device "
                              "holds (sim_device, HOFF_SIM_DEVICE, is %s); lower the budget or "
                              "raise HOFF_SIM_DEVICE",
                              a, b);
    }
    return 0;
}
