/* options.c — the one table of options: every struct hoff_config field with its HOFF_* variable,
 * type, default, range and help; parsing, printing, the environment, validation.
 * Threading: the table is constant and each function touches only the caller's struct;
 * hoff_config_from_env reads environ, so do not run it while another thread calls setenv(). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "core/options.h"
#include "plan/plan.h"

extern char **environ;

enum opt_type {
    OPT_SIZE, OPT_BOOL, OPT_INT, OPT_ENUM, OPT_DOUBLE, OPT_DURATION,
    OPT_UINT32, /* a uint32_t field, a decimal integer */
    OPT_STRING, /* a char[size] field: at most size - 1 characters, NUL-padded */
};

struct opt_alias {
    const char *name;
    int value;
};

struct opt {
    const char *name;  /* "budget": lower case, the key of hoff_config_set */
    const char *env;   /* "HOFF_BUDGET": always "HOFF_" + the name in upper case */
    enum opt_type type;
    size_t offset;     /* into struct hoff_config */
    size_t size;       /* OPT_STRING: the field's size, the NUL included */
    const char *def;   /* the default, in the form hoff_config_set accepts */
    double min, max;   /* valid range, inclusive (enum, bool, string: derived) */
    int min_open;      /* min itself is out of range (OPT_DOUBLE) */
    const char *unit;  /* OPT_DOUBLE: what the number counts; OPT_STRING: what the text is */
    const char *const *names;        /* OPT_ENUM: value i is names[i] */
    const struct opt_alias *aliases; /* OPT_ENUM: other accepted spellings */
    /* OPT_STRING whose values are names registered elsewhere: choice_at(i) is
     * the i-th (NULL past the end); known(s) says whether the runtime will
     * accept s.  hoff_config_set stores the registered spelling. */
    const char *(*choice_at)(int i);
    int (*known)(const char *s);
    /* OPT_STRING with a syntax of its own: check(s, n, why, whylen) is 0 when
     * s[0..n) is acceptable, else -1 with the reason in why ("node 2 is listed
     * twice").  With choice_at as well, the choices are accepted too (any case
     * in hoff_config_set, which stores the listed spelling; only as listed in
     * hoff__config_validate) and check judges everything else. */
    int (*check)(const char *s, size_t n, char *why, size_t whylen);
    const char *expect; /* the accepted forms, to follow "expected " (else derived) */
    uint64_t multiple;  /* OPT_SIZE: the value must be a multiple of this (0: any) */
    const char *help;
};

/* offsetof(struct hoff_config, f), and a compile error unless f has type T,
 * so that a field's storage always matches what its option type writes. */
#define OFF(f, T)                                                              \
    (offsetof(struct hoff_config, f) +                                         \
     0 * sizeof(char[_Generic(((struct hoff_config *)0)->f, T: 1, default: -1)]))

/* A char array field: its offset, and a compile error unless it is one. */
#define FIELD_SIZE(f) sizeof(((struct hoff_config *)0)->f)
#define OFF_STR(f)                                                             \
    (offsetof(struct hoff_config, f) +                                         \
     0 * sizeof(char[_Generic(&((struct hoff_config *)0)->f,                   \
                              char(*)[FIELD_SIZE(f)]: 1, default: -1)]))

#define SIZE_TOP 1125899906842624.0 /* 1024T: larger is surely a typo */
#define NS_PER_S 1e9

static const char *const backend_names[] = {"auto", "sim", "cuda", NULL};
static const char *const log_names[] = {"off", "error", "warn", "info", "debug", NULL};
static const struct opt_alias log_aliases[] = {{"warning", HOFF_LOG_WARN}, {NULL, 0}};
static const char *const protect_names[] = {"poison", "protect", NULL};
static const char *const fence_names[] = {"stream", "device", NULL};

_Static_assert(HOFF_BACKEND_AUTO == 0 && HOFF_BACKEND_SIM == 1 && HOFF_BACKEND_CUDA == 2,
               "backend_names follows enum hoff_backend_kind");
_Static_assert(HOFF_LOG_OFF == 0 && HOFF_LOG_ERROR == 1 && HOFF_LOG_WARN == 2 &&
                   HOFF_LOG_INFO == 3 && HOFF_LOG_DEBUG == 4,
               "log_names follows enum hoff_log_level");
_Static_assert(HOFF_SIM_POISON == 0 && HOFF_SIM_PROTECT == 1,
               "protect_names follows enum hoff_sim_protect");
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
#define NUMA_EXPECT                                                            \
    "nearest, interleave, or a comma-separated list of NUMA node numbers "     \
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

/* The table, in the order of struct hoff_config.  doc/man/hoff-config.7
 * documents each entry; keep the two in step. */
static const struct opt opts[] = {
    {.name = "backend", .env = "HOFF_BACKEND", .type = OPT_ENUM,
     .offset = OFF(backend, int), .def = "auto", .names = backend_names,
     .help = "backend: auto (cuda where a GPU is present, else sim), sim or cuda"},
    {.name = "device", .env = "HOFF_DEVICE", .type = OPT_INT,
     .offset = OFF(device, int), .def = "-1", .min = -1, .max = 1023,
     .help = "CUDA device ordinal to allocate on; -1 = LOCAL_RANK when set, else the calling thread's current device"},
    {.name = "budget", .env = "HOFF_BUDGET", .type = OPT_SIZE,
     .offset = OFF(budget_bytes, uint64_t), .def = "0", .min = 0, .max = SIZE_TOP,
     .help = "device budget for resident offload bytes; 0 = no limit"},
    {.name = "host_cap", .env = "HOFF_HOST_CAP", .type = OPT_SIZE,
     .offset = OFF(host_cap_bytes, uint64_t), .def = "0", .min = 0, .max = SIZE_TOP,
     .help = "most bytes the host tier may hold; 0 = no limit"},
    {.name = "managed_min", .env = "HOFF_MANAGED_MIN", .type = OPT_SIZE,
     .offset = OFF(managed_min_bytes, uint64_t), .def = "1M", .min = 0, .max = SIZE_TOP,
     .help = "in-step allocations of at least this size are offload candidates"},
    {.name = "oversub_margin", .env = "HOFF_OVERSUB_MARGIN", .type = OPT_SIZE,
     .offset = OFF(oversub_margin_bytes, uint64_t), .def = "256M", .min = 0,
     .max = SIZE_TOP,
     .help = "device bytes kept free when mapping managed memory"},
    {.name = "oversubscribe", .env = "HOFF_OVERSUBSCRIBE", .type = OPT_BOOL,
     .offset = OFF(oversubscribe, int), .def = "0",
     .help = "allow mapping more managed memory than the device has free (can hang the GPU)"},
    {.name = "log_level", .env = "HOFF_LOG_LEVEL", .type = OPT_ENUM,
     .offset = OFF(log_level, int), .def = "warn", .names = log_names,
     .aliases = log_aliases,
     .help = "log on stderr up to this level: off, error, warn, info or debug"},
    {.name = "sim_device", .env = "HOFF_SIM_DEVICE", .type = OPT_SIZE,
     .offset = OFF(sim_device_bytes, uint64_t), .def = "80G", .min = 4096,
     .max = SIZE_TOP,
     .help = "memory of the simulated device"},
    {.name = "sim_h2d_gbps", .env = "HOFF_SIM_H2D_GBPS", .type = OPT_DOUBLE,
     .offset = OFF(sim_h2d_gbps, double), .def = "50", .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "bandwidth of the simulated host-to-device copy engine, GB/s"},
    {.name = "sim_d2h_gbps", .env = "HOFF_SIM_D2H_GBPS", .type = OPT_DOUBLE,
     .offset = OFF(sim_d2h_gbps, double), .def = "50", .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "bandwidth of the simulated device-to-host copy engine, GB/s"},
    {.name = "sim_latency", .env = "HOFF_SIM_LATENCY", .type = OPT_DURATION,
     .offset = OFF(sim_latency_ns, uint64_t), .def = "10us", .min = 0,
     .max = 60 * NS_PER_S,
     .help = "fixed cost of each simulated transfer call"},
    {.name = "sim_fault_gbps", .env = "HOFF_SIM_FAULT_GBPS", .type = OPT_DOUBLE,
     .offset = OFF(sim_fault_gbps, double), .def = "8", .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "rate at which the simulated device pages in a block on demand, GB/s"},
    {.name = "sim_fault_ns", .env = "HOFF_SIM_FAULT_NS", .type = OPT_DURATION,
     .offset = OFF(sim_fault_ns, uint64_t), .def = "20us", .min = 0,
     .max = 60 * NS_PER_S,
     .help = "fixed cost of one simulated page fault"},
    {.name = "sim_protect", .env = "HOFF_SIM_PROTECT", .type = OPT_ENUM,
     .offset = OFF(sim_protect, int), .def = "poison", .names = protect_names,
     .help = "non-resident sim bytes: poison (overwrite with 0xDB) or protect (also mprotect)"},
    {.name = "queue_depth", .env = "HOFF_QUEUE_DEPTH", .type = OPT_INT,
     .offset = OFF(issue_queue_depth, int), .def = "1024", .min = 1, .max = 1 << 20,
     .help = "slots in the issuing thread's command queue"},
    {.name = "planner", .env = "HOFF_PLANNER", .type = OPT_STRING,
     .offset = OFF_STR(planner), .size = FIELD_SIZE(planner), .def = "timed",
     .unit = "planner", .choice_at = planner_at, .known = planner_known,
     .help = "planner that turns the recorded step into a residency schedule"},
    {.name = "guard_after_alloc", .env = "HOFF_GUARD_AFTER_ALLOC", .type = OPT_UINT32,
     .offset = OFF(guard_after_alloc, uint32_t), .def = "1", .min = 0, .max = 1000000,
     .help = "blocks without access marks: events after the alloc before they may be evicted"},
    {.name = "guard_before_free", .env = "HOFF_GUARD_BEFORE_FREE", .type = OPT_UINT32,
     .offset = OFF(guard_before_free, uint32_t), .def = "1", .min = 0, .max = 1000000,
     .help = "blocks without access marks: events before the free by which they are back"},
    {.name = "replan_after", .env = "HOFF_REPLAN_AFTER", .type = OPT_UINT32,
     .offset = OFF(replan_after, uint32_t), .def = "2", .min = 0, .max = 1000000,
     .help = "divergent steps in a row before hoff records and plans again; 0 = never"},
    {.name = "bandwidth_gbps", .env = "HOFF_BANDWIDTH_GBPS", .type = OPT_DOUBLE,
     .offset = OFF(bandwidth_gbps, double), .def = "16", .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "H2D and D2H bandwidth the planner assumes where the backend cannot measure it, GB/s"},
    {.name = "trace", .env = "HOFF_TRACE", .type = OPT_STRING,
     .offset = OFF_STR(trace_path), .size = FIELD_SIZE(trace_path), .def = "",
     .unit = "path",
     .help = "write each recorded step's trace to this file; empty = don't"},
    {.name = "stats", .env = "HOFF_STATS", .type = OPT_BOOL,
     .offset = OFF(stats_publish, int), .def = "1",
     .help = "publish the statistics in shared memory for hoff-stat"},
    {.name = "numa", .env = "HOFF_NUMA", .type = OPT_STRING,
     .offset = OFF_STR(numa), .size = FIELD_SIZE(numa), .def = "nearest",
     .unit = "placement", .choice_at = numa_at, .check = numa_check,
     .expect = NUMA_EXPECT,
     .help = "host-tier placement: nearest (the GPU's NUMA node), interleave, or a node list like 0,2"},
    {.name = "spill_dir", .env = "HOFF_SPILL_DIR", .type = OPT_STRING,
     .offset = OFF_STR(spill_dir), .size = FIELD_SIZE(spill_dir), .def = "",
     .unit = "path",
     .help = "directory for NVMe spill files (created unlinked); empty = no NVMe tier"},
    {.name = "spill_chunk", .env = "HOFF_SPILL_CHUNK", .type = OPT_SIZE,
     .offset = OFF(spill_chunk_bytes, uint64_t), .def = "4M", .min = 65536,
     .max = (uint64_t)1 << 30, .multiple = 4096,
     .help = "size of one NVMe I/O (a multiple of 4 KiB)"},
    {.name = "io_depth", .env = "HOFF_IO_DEPTH", .type = OPT_INT,
     .offset = OFF(io_queue_depth, int), .def = "32", .min = 8, .max = 4096,
     .help = "io_uring queue depth of the NVMe tier"},
    {.name = "sim_nvme_read_gbps", .env = "HOFF_SIM_NVME_READ_GBPS", .type = OPT_DOUBLE,
     .offset = OFF(sim_nvme_read_gbps, double), .def = "6.5", .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "read rate of the simulated NVMe tier, GB/s"},
    {.name = "sim_nvme_write_gbps", .env = "HOFF_SIM_NVME_WRITE_GBPS", .type = OPT_DOUBLE,
     .offset = OFF(sim_nvme_write_gbps, double), .def = "3.5", .min = HOFF__GBPS_MIN,
     .max = HOFF__GBPS_MAX, .unit = "GB/s",
     .help = "write rate of the simulated NVMe tier, GB/s"},
    {.name = "sim_call_ns", .env = "HOFF_SIM_CALL_NS", .type = OPT_DURATION,
     .offset = OFF(sim_call_ns, uint64_t), .def = "5us", .min = 0,
     .max = 60 * NS_PER_S,
     .help = "the issuing thread's own cost per simulated transfer call (serial across calls)"},
    {.name = "groups", .env = "HOFF_GROUPS", .type = OPT_BOOL,
     .offset = OFF(groups, int), .def = "1",
     .help = "lay out blocks the plan moves together in one mapping and move them with one call"},
    {.name = "plan_thread", .env = "HOFF_PLAN_THREAD", .type = OPT_BOOL,
     .offset = OFF(plan_thread, int), .def = "1",
     .help = "plan on a background thread while the next steps run under the online policy; "
             "0 = plan at the recorded step's end, the training thread waiting"},
    {.name = "plan_time", .env = "HOFF_PLAN_TIME", .type = OPT_DURATION,
     .offset = OFF(plan_time_ns, uint64_t), .def = "0", .min = 0, .max = 3600 * NS_PER_S,
     .help = "time budget of one planning (the planner answers with the best schedule found by then); "
             "0 = no limit"},
    {.name = "budget_pct", .env = "HOFF_BUDGET_PCT", .type = OPT_DOUBLE,
     .offset = OFF(budget_pct, double), .def = "0", .min = 0, .max = 100, .unit = "percent",
     .help = "the budget as a percentage of the device's memory (per rank: its own GPU); 0 = HOFF_BUDGET applies"},
    {.name = "free_fence", .env = "HOFF_FREE_FENCE", .type = OPT_ENUM,
     .offset = OFF(free_fence, int), .def = "stream", .names = fence_names,
     .help = "a freed device-pool block is reused once its stream (stream) or the whole device (device) passed the free"},
};

#define NOPTS ((int)(sizeof opts / sizeof opts[0]))

/* Variables other parts of hoff read; hoff_config_from_env lets them pass. */
static const char *const reserved[] = {
    "HOFF_LIBRARY", "HOFF_STEP_MARK", "HOFF_TEST",
    /* hoff-record(1) and its preload */
    "HOFF_RECORD_OUTPUT", "HOFF_RECORD_THRESHOLD", "HOFF_RECORD_STEP", "HOFF_RECORD_QUIET",
    "HOFF_RECORD_LIBRARY",
    /* python -m hoff --sim (python/hoff/_sim.py) */
    "HOFF_SIM_LAUNCHED", "HOFF_SIM_PRELOAD", NULL,
};

union val {
    uint64_t u; /* OPT_SIZE, OPT_DURATION, OPT_UINT32 */
    int i;      /* OPT_BOOL, OPT_INT, OPT_ENUM */
    double d;   /* OPT_DOUBLE */
    struct {
        const char *p; /* not NUL-terminated: a field, or the user's text */
        size_t n;      /* == the field's size if the field has no NUL */
    } s;        /* OPT_STRING */
};

/* P_RANGE for a string: too long; P_FORM: not one of its choices. */
enum { P_OK, P_FORM, P_RANGE };

/* ---- messages ---------------------------------------------------------- */

static int fail(int rc, char *err, size_t errlen, const char *fmt, ...) HOFF__PRINTF(4, 5);

/* Record msg as the thread's last error, copy it into err, return rc. */
static int fail(int rc, char *err, size_t errlen, const char *fmt, ...) {
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return hoff__error(rc, "%s", msg);
}

/* A user's text, fit to quote in a message: at most 48 characters,
 * unprintable ones as '?'. */
static const char *shown(const char *s, size_t n, char *out, size_t outlen) {
    size_t i, k = 0;

    for (i = 0; i < n && s[i] && k + 4 < outlen; i++) {
        if (i == 48) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        out[k++] = isprint((unsigned char)s[i]) ? s[i] : '?';
    }
    out[k] = '\0';
    return out;
}

/* ---- locale-independent doubles ---------------------------------------- */

/* "12.5" means 12.5 whatever LC_NUMERIC the host program set. */
static locale_t c_numeric_begin(locale_t *old) {
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);

    if (c != (locale_t)0)
        *old = uselocale(c);
    return c;
}

static void c_numeric_end(locale_t c, locale_t old) {
    if (c != (locale_t)0) {
        uselocale(old);
        freelocale(c);
    }
}

/* ---- the table's values -------------------------------------------------- */

static union val load(const struct hoff_config *cfg, const struct opt *o) {
    const char *p = (const char *)cfg + o->offset;
    union val v;

    switch (o->type) {
    case OPT_SIZE:
    case OPT_DURATION: memcpy(&v.u, p, sizeof v.u); break;
    case OPT_UINT32: {
        uint32_t x;

        memcpy(&x, p, sizeof x);
        v.u = x;
        break;
    }
    case OPT_DOUBLE: memcpy(&v.d, p, sizeof v.d); break;
    case OPT_STRING:
        v.s.p = p;
        v.s.n = strnlen(p, o->size);
        break;
    default: memcpy(&v.i, p, sizeof v.i); break;
    }
    return v;
}

static void store(struct hoff_config *cfg, const struct opt *o, union val v) {
    char *p = (char *)cfg + o->offset;

    switch (o->type) {
    case OPT_SIZE:
    case OPT_DURATION: memcpy(p, &v.u, sizeof v.u); break;
    case OPT_UINT32: {
        uint32_t x = (uint32_t)v.u; /* parse_val checked the range */

        memcpy(p, &x, sizeof x);
        break;
    }
    case OPT_DOUBLE: memcpy(p, &v.d, sizeof v.d); break;
    case OPT_STRING: /* parse_val checked v.s.n < o->size; the rest is zeros */
        memset(p, 0, o->size);
        memcpy(p, v.s.p, v.s.n);
        break;
    default: memcpy(p, &v.i, sizeof v.i); break;
    }
}

static int enum_count(const struct opt *o) {
    int n = 0;

    while (o->names[n])
        n++;
    return n;
}

static double opt_min(const struct opt *o) {
    return o->type == OPT_BOOL || o->type == OPT_ENUM ? 0 : o->min;
}

static double opt_max(const struct opt *o) {
    if (o->type == OPT_BOOL)
        return 1;
    if (o->type == OPT_ENUM)
        return enum_count(o) - 1;
    return o->max;
}

/* A string field's value is terminated, fits, and is one of its choices. */
static int string_ok(const struct opt *o, union val v) {
    char tmp[256];

    if (v.s.n >= o->size)
        return 0;
    if (!o->known)
        return 1;
    if (v.s.n >= sizeof tmp)
        return 0;
    memcpy(tmp, v.s.p, v.s.n);
    tmp[v.s.n] = '\0';
    return o->known(tmp);
}

/* Every bound is below 2^53, so comparing as doubles is exact. */
static int in_range(const struct opt *o, union val v) {
    double x;

    switch (o->type) {
    case OPT_STRING: return string_ok(o, v);
    case OPT_SIZE:
    case OPT_DURATION:
    case OPT_UINT32: x = (double)v.u; break;
    case OPT_DOUBLE: x = v.d; break;
    default: x = v.i; break;
    }
    if (!isfinite(x) || x > opt_max(o))
        return 0;
    return o->min_open ? x > opt_min(o) : x >= opt_min(o);
}

/* v as the largest unit that divides it exactly ("80G", "10us"). */
static void fmt_units(uint64_t v, const char *const *suffix, const uint64_t *unit,
                      char *buf, size_t len) {
    int i;

    for (i = 0; v && suffix[i]; i++) {
        if (v % unit[i] == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(v / unit[i]), suffix[i]);
            return;
        }
    }
    snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* v as text hoff_config_set accepts; returns the length, like snprintf. */
static int fmt_val(const struct opt *o, union val v, char *buf, size_t len) {
    static const char *const size_sfx[] = {"T", "G", "M", "K", NULL};
    static const uint64_t size_unit[] = {1ull << 40, 1ull << 30, 1ull << 20, 1ull << 10};
    static const char *const dur_sfx[] = {"s", "ms", "us", "ns", NULL};
    static const uint64_t dur_unit[] = {1000000000, 1000000, 1000, 1};
    char tmp[64];

    switch (o->type) {
    case OPT_SIZE: fmt_units(v.u, size_sfx, size_unit, tmp, sizeof tmp); break;
    case OPT_DURATION: fmt_units(v.u, dur_sfx, dur_unit, tmp, sizeof tmp); break;
    case OPT_UINT32: snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v.u); break;
    case OPT_STRING: /* as is: the set form of a string is the string */
        return snprintf(buf, len, "%.*s", (int)v.s.n, v.s.p);
    case OPT_DOUBLE: {
        locale_t old = (locale_t)0, c = c_numeric_begin(&old);

        /* the shortest of %.15g and %.17g that reads back as v */
        snprintf(tmp, sizeof tmp, "%.15g", v.d);
        if (strtod(tmp, NULL) != v.d)
            snprintf(tmp, sizeof tmp, "%.17g", v.d);
        c_numeric_end(c, old);
        break;
    }
    default: /* an enum by name; an invalid one, and the rest, as a number */
        if (o->type == OPT_ENUM && v.i >= 0 && v.i < enum_count(o))
            snprintf(tmp, sizeof tmp, "%s", o->names[v.i]);
        else
            snprintf(tmp, sizeof tmp, "%d", v.i);
        break;
    }
    return snprintf(buf, len, "%s", tmp);
}

static void fmt_bound(const struct opt *o, double x, char *buf, size_t len) {
    union val v;

    if (o->type == OPT_SIZE || o->type == OPT_DURATION || o->type == OPT_UINT32)
        v.u = (uint64_t)x;
    else if (o->type == OPT_DOUBLE)
        v.d = x;
    else
        v.i = (int)x;
    fmt_val(o, v, buf, len);
}

/* The accepted values of o, to follow "expected " in a message. */
static void describe_range(const struct opt *o, char *buf, size_t len) {
    char lo[32], hi[32];
    size_t k;
    int i;

    if (o->expect) {
        snprintf(buf, len, "%s", o->expect);
        return;
    }
    if (o->type == OPT_STRING) {
        if (!o->choice_at) {
            snprintf(buf, len, "a %s of at most %zu characters", o->unit, o->size - 1);
            return;
        }
        k = (size_t)snprintf(buf, len, "one of ");
        for (i = 0; o->choice_at(i) && k < len; i++)
            k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", o->choice_at(i));
        return;
    }
    fmt_bound(o, opt_min(o), lo, sizeof lo);
    fmt_bound(o, opt_max(o), hi, sizeof hi);
    switch (o->type) {
    case OPT_SIZE:
        if (o->multiple) {
            char m[32];
            union val v;

            v.u = o->multiple;
            fmt_val(o, v, m, sizeof m);
            snprintf(buf, len, "a size from %s to %s that is a multiple of %s", lo, hi, m);
        } else {
            snprintf(buf, len, "a size from %s to %s", lo, hi);
        }
        break;
    case OPT_DURATION: snprintf(buf, len, "a duration from %s to %s", lo, hi); break;
    case OPT_INT:
    case OPT_UINT32: snprintf(buf, len, "an integer from %s to %s", lo, hi); break;
    case OPT_BOOL: snprintf(buf, len, "1, 0, yes, no, true, false, on or off"); break;
    case OPT_DOUBLE:
        if (o->min_open)
            snprintf(buf, len, "a number of %s greater than %s and at most %s", o->unit, lo, hi);
        else
            snprintf(buf, len, "a number of %s from %s to %s", o->unit, lo, hi);
        break;
    case OPT_ENUM:
        k = (size_t)snprintf(buf, len, "one of ");
        for (i = 0; o->names[i] && k < len; i++)
            k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", o->names[i]);
        break;
    case OPT_STRING: break; /* above */
    }
}

/* The checks beyond the range, on a value in range: 0, or -1 with the reason
 * in why.  A choice counts only as listed (hoff_config_set has stored the
 * listed spelling by then). */
static int check_val(const struct opt *o, union val v, char *why, size_t whylen) {
    const char *c;
    int i;

    if (o->type == OPT_SIZE && o->multiple && v.u % o->multiple) {
        char m[32];
        union val mv;

        mv.u = o->multiple;
        fmt_val(o, mv, m, sizeof m);
        snprintf(why, whylen, "not a multiple of %s", m);
        return -1;
    }
    if (o->type != OPT_STRING || !o->check)
        return 0;
    for (i = 0; o->choice_at && (c = o->choice_at(i)) != NULL; i++)
        if (strlen(c) == v.s.n && !memcmp(c, v.s.p, v.s.n))
            return 0;
    return o->check(v.s.p, v.s.n, why, whylen);
}

/* ---- parsing ------------------------------------------------------------- */

static int parse_bool(const char *s, int *out) {
    static const char *const yes[] = {"1", "yes", "true", "on", NULL};
    static const char *const no[] = {"0", "no", "false", "off", NULL};
    int i;

    for (i = 0; yes[i]; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = 1;
            return P_OK;
        }
        if (!strcasecmp(s, no[i])) {
            *out = 0;
            return P_OK;
        }
    }
    return P_FORM;
}

/* A decimal integer, optionally signed, within [lo, hi] (else P_RANGE). */
static int parse_integer(const char *s, long long lo, long long hi, long long *out) {
    const char *p = s + (*s == '+' || *s == '-');
    char *end;
    long long v;

    if (!isdigit((unsigned char)*p))
        return P_FORM;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (*end)
        return P_FORM;
    if (errno == ERANGE || v < lo || v > hi)
        return P_RANGE;
    *out = v;
    return P_OK;
}

static int parse_int(const char *s, int *out) {
    long long v;
    int rc = parse_integer(s, -2147483647LL - 1, 2147483647LL, &v);

    if (rc == P_OK)
        *out = (int)v;
    return rc;
}

/* "-1" parses, and is out of range, as for an int. */
static int parse_uint32(const char *s, uint64_t *out) {
    long long v;
    int rc = parse_integer(s, 0, 4294967295LL, &v);

    if (rc == P_OK)
        *out = (uint64_t)v;
    return rc;
}

/* s[0..n) as a string option: P_RANGE if it does not fit the field, P_FORM
 * if o has choices and s is none of them (any case; the registered spelling
 * is what *v points to).  An option with a check takes what is not a choice
 * as it is; check_val judges it. */
static int parse_string(const struct opt *o, const char *s, size_t n, union val *v) {
    const char *c;
    int i;

    if (n >= o->size)
        return P_RANGE;
    if (!o->choice_at) {
        v->s.p = s;
        v->s.n = n;
        return P_OK;
    }
    for (i = 0; (c = o->choice_at(i)) != NULL; i++) {
        if (strlen(c) == n && !strncasecmp(s, c, n)) {
            v->s.p = c;
            v->s.n = n;
            return P_OK;
        }
    }
    if (o->check) {
        v->s.p = s;
        v->s.n = n;
        return P_OK;
    }
    return P_FORM;
}

static int parse_enum(const struct opt *o, const char *s, int *out) {
    int i;

    for (i = 0; o->names[i]; i++) {
        if (!strcasecmp(s, o->names[i])) {
            *out = i;
            return P_OK;
        }
    }
    for (i = 0; o->aliases && o->aliases[i].name; i++) {
        if (!strcasecmp(s, o->aliases[i].name)) {
            *out = o->aliases[i].value;
            return P_OK;
        }
    }
    return P_FORM;
}

/* A decimal number ("50", "12.5", "1e2"); no hex, inf or nan. */
static int parse_double(const char *s, double *out) {
    locale_t old = (locale_t)0, c;
    const char *p;
    char *end;
    int digits = 0, saved;
    double v;

    for (p = s; *p; p++) {
        if (isdigit((unsigned char)*p))
            digits = 1;
        else if (!strchr(".eE+-", *p))
            return P_FORM;
    }
    if (!digits)
        return P_FORM;
    c = c_numeric_begin(&old);
    errno = 0;
    v = strtod(s, &end);
    saved = errno;
    c_numeric_end(c, old);
    if (end == s || *end)
        return P_FORM;
    if (saved == ERANGE || !isfinite(v))
        return P_RANGE;
    *out = v;
    return P_OK;
}

/* "250" (ns), "10us", "1.5ms", "2 s": a whole number of nanoseconds. */
static int parse_duration(const char *s, uint64_t *out) {
    static const struct {
        const char *sfx;
        uint64_t mult;
    } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}, {NULL, 0}};
    uint64_t ip = 0, frac = 0, scale = 1, mult = 0, v;
    const char *p = s;
    int digits = 0, has_frac = 0, i;

    for (; isdigit((unsigned char)*p); p++, digits++) {
        if (ip > (UINT64_MAX - 9) / 10)
            return P_RANGE;
        ip = ip * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        has_frac = 1;
        for (p++; isdigit((unsigned char)*p); p++, digits++) {
            if (scale < 1000000000) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            } else if (*p != '0') {
                return P_FORM; /* finer than a nanosecond */
            }
        }
    }
    if (!digits)
        return P_FORM;
    while (isspace((unsigned char)*p))
        p++;
    if (!*p) {
        if (has_frac)
            return P_FORM; /* a fraction of a nanosecond */
        mult = 1;
    }
    for (i = 0; !mult && units[i].sfx; i++)
        if (!strcasecmp(p, units[i].sfx))
            mult = units[i].mult;
    if (!mult)
        return P_FORM;
    if (ip > UINT64_MAX / mult)
        return P_RANGE;
    v = ip * mult;
    /* frac < 1e9 and mult <= 1e9: the product fits */
    if (frac * mult % scale)
        return P_FORM;
    if (v > UINT64_MAX - frac * mult / scale)
        return P_RANGE;
    *out = v + frac * mult / scale;
    return P_OK;
}

/* s, trimmed, as o's type into *v: P_OK, P_FORM or P_RANGE (range checked). */
static int parse_val(const struct opt *o, const char *s, union val *v) {
    char buf[128];
    size_t n;
    int rc = P_FORM;

    while (isspace((unsigned char)*s))
        s++;
    n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (o->type == OPT_STRING) {
        rc = parse_string(o, s, n, v);
        return rc == P_OK && !in_range(o, *v) ? P_FORM : rc;
    }
    if (n >= sizeof buf)
        return P_FORM;
    memcpy(buf, s, n);
    buf[n] = '\0';

    switch (o->type) {
    case OPT_SIZE:
        rc = hoff__parse_size(buf, &v->u);
        rc = rc == 0 ? P_OK : rc == -ERANGE ? P_RANGE : P_FORM;
        break;
    case OPT_BOOL: rc = parse_bool(buf, &v->i); break;
    case OPT_INT: rc = parse_int(buf, &v->i); break;
    case OPT_ENUM: rc = parse_enum(o, buf, &v->i); break;
    case OPT_DOUBLE: rc = parse_double(buf, &v->d); break;
    case OPT_DURATION: rc = parse_duration(buf, &v->u); break;
    case OPT_UINT32: rc = parse_uint32(buf, &v->u); break;
    case OPT_STRING: break; /* above */
    }
    if (rc == P_OK && !in_range(o, *v))
        rc = P_RANGE;
    return rc;
}

static int bad_value(const struct opt *o, const char *who, const char *value,
                     int why, char *err, size_t errlen) {
    static const char *const what[] = {
        [OPT_SIZE] = "not a size", [OPT_BOOL] = "not a boolean",
        [OPT_INT] = "not an integer", [OPT_ENUM] = NULL,
        [OPT_DOUBLE] = "not a number", [OPT_DURATION] = "not a duration",
        [OPT_UINT32] = "not an integer", [OPT_STRING] = NULL,
    };
    char v[64], range[256];

    shown(value, (size_t)-1, v, sizeof v);
    describe_range(o, range, sizeof range);
    if (o->type == OPT_STRING) {
        const char *s = value;
        size_t n;

        while (isspace((unsigned char)*s))
            s++;
        n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        if (why == P_RANGE)
            return fail(-EINVAL, err, errlen,
                        "%s='%s': too long (%zu characters, the limit is %zu); expected %s",
                        who, v, n, o->size - 1, range);
        return fail(-EINVAL, err, errlen, "%s='%s': unknown %s; expected %s", who, v,
                    o->unit, range);
    }
    if (o->type == OPT_ENUM)
        return fail(-EINVAL, err, errlen, "%s='%s': expected %s", who, v, range);
    if (why == P_RANGE)
        return fail(-EINVAL, err, errlen, "%s='%s': out of range; expected %s", who, v, range);
    switch (o->type) {
    case OPT_SIZE:
        return fail(-EINVAL, err, errlen,
                    "%s='%s': not a size; expected a byte count with an optional "
                    "K, M, G or T suffix (e.g. 512M, 2G)", who, v);
    case OPT_DURATION:
        return fail(-EINVAL, err, errlen,
                    "%s='%s': not a duration; expected a whole number of nanoseconds, "
                    "or a number with an ns, us, ms or s suffix (e.g. 10us, 2ms)", who, v);
    default:
        return fail(-EINVAL, err, errlen, "%s='%s': %s; expected %s", who, v,
                    what[o->type], range);
    }
}

static int set_opt(struct hoff_config *cfg, const struct opt *o, const char *value,
                   const char *who, char *err, size_t errlen) {
    union val v;
    char why[128], shown_v[64], range[256];
    int rc = parse_val(o, value, &v);

    if (rc != P_OK)
        return bad_value(o, who, value, rc, err, errlen);
    if (check_val(o, v, why, sizeof why) != 0) {
        describe_range(o, range, sizeof range);
        return fail(-EINVAL, err, errlen, "%s='%s': %s; expected %s", who,
                    shown(value, (size_t)-1, shown_v, sizeof shown_v), why, range);
    }
    store(cfg, o, v);
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
            int sub = prev[j - 1] +
                      (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int del = prev[j] + 1, ins = cur[j - 1] + 1;

            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

/* "budget", "BUDGET" or "HOFF_BUDGET" (any case); *is_env for the last. */
static const struct opt *lookup(const char *name, int *is_env) {
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

static void who_of(const struct opt *o, int is_env, char *buf, size_t len) {
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

    shown(name, (size_t)-1, v, sizeof v);
    res = is_env ? reserved_match(name, strlen(name), 1) : NULL;
    if (res)
        return fail(-ENOENT, err, errlen,
                    "%s is not a configuration option: it is read by another part "
                    "of hoff (see hoff-config(7))", res);
    for (i = 0; i < NOPTS; i++) {
        d = is_env ? distance(name, strlen(name), opts[i].env)
                   : distance(name, strlen(name), opts[i].name);
        if (d < bestd) {
            bestd = d;
            best = is_env ? opts[i].env : opts[i].name;
        }
    }
    if (is_env)
        return fail(-ENOENT, err, errlen,
                    "unknown option %s; did you mean %s? (hoff-config(7) lists them)", v, best);
    return fail(-ENOENT, err, errlen,
                "unknown option '%s'; did you mean '%s'? (hoff-config(7) lists them)", v, best);
}

/* The error for a HOFF_* variable that is neither an option nor reserved. */
static int unknown_env(const char *var, size_t n, char *err, size_t errlen) {
    const char *best = NULL;
    char v[64];
    int i, d, bestd = 1 << 30;

    shown(var, n, v, sizeof v);
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
    return fail(-ENOENT, err, errlen,
                "unknown variable %s in the environment; did you mean %s? "
                "(hoff-config(7) lists hoff's variables; unset the others)", v, best);
}

/* ---- the public functions ------------------------------------------------ */

HOFF_API void hoff_config_init(struct hoff_config *cfg) {
    union val v;
    int i;

    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->version = HOFF_CONFIG_VERSION;
    cfg->size = sizeof *cfg;
    for (i = 0; i < NOPTS; i++)
        if (parse_val(&opts[i], opts[i].def, &v) == P_OK) /* tests check each one */
            store(cfg, &opts[i], v);
}

HOFF_API int hoff_config_set(struct hoff_config *cfg, const char *name,
                             const char *value, char *err, size_t errlen) {
    const struct opt *o;
    char who[64];
    int is_env;

    if (!cfg || !name)
        return fail(-EINVAL, err, errlen, "hoff_config_set: %s is NULL", cfg ? "name" : "cfg");
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
        return fail(-EINVAL, err, errlen, "hoff_config_from_env: cfg is NULL");
    tmp = *cfg; /* all or nothing: cfg changes only if every variable is good */
    for (e = environ; e && *e; e++) {
        const char *var = *e, *eq = strchr(var, '=');
        const struct opt *o = NULL;
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

HOFF_API int hoff_config_get(const struct hoff_config *cfg, const char *name,
                             char *buf, size_t len) {
    const struct opt *o;
    int is_env, n;

    if (!cfg || !name || (!buf && len))
        return fail(-EINVAL, NULL, 0, "hoff_config_get: %s is NULL",
                    !cfg ? "cfg" : !name ? "name" : "buf");
    o = lookup(name, &is_env);
    if (!o)
        return unknown_name(name, is_env, NULL, 0);
    n = fmt_val(o, load(cfg, o), buf, len);
    if ((size_t)n >= len)
        return fail(-ERANGE, NULL, 0,
                    "hoff_config_get: the value of %s needs %d bytes; the buffer has %zu",
                    o->name, n + 1, len);
    return 0;
}

HOFF_API int hoff_config_count(void) {
    return NOPTS;
}

HOFF_API const char *hoff_config_name(int i) {
    return i >= 0 && i < NOPTS ? opts[i].name : NULL;
}

HOFF_API const char *hoff_config_help(int i) {
    return i >= 0 && i < NOPTS ? opts[i].help : NULL;
}

int hoff__config_validate(const struct hoff_config *cfg, char *err, size_t errlen) {
    char a[64], b[64], range[256], why[128];
    int i;

    if (!cfg)
        return fail(-EINVAL, err, errlen, "config: the struct hoff_config pointer is NULL");
    if (cfg->version != HOFF_CONFIG_VERSION)
        return fail(-EINVAL, err, errlen,
                    "config: version is %u, expected HOFF_CONFIG_VERSION (%d); "
                    "fill the struct with hoff_config_init() first",
                    (unsigned)cfg->version, HOFF_CONFIG_VERSION);
    if (cfg->size != sizeof *cfg)
        return fail(-EINVAL, err, errlen,
                    "config: size is %u, expected sizeof(struct hoff_config) (%zu); "
                    "fill the struct with hoff_config_init() from this hoff.h",
                    (unsigned)cfg->size, sizeof *cfg);
    for (i = 0; i < NOPTS; i++) {
        const struct opt *o = &opts[i];
        union val v = load(cfg, o);

        if (in_range(o, v)) {
            if (check_val(o, v, why, sizeof why) == 0)
                continue;
            describe_range(o, range, sizeof range);
            if (o->type == OPT_STRING)
                return fail(-EINVAL, err, errlen, "config: %s (%s) is '%s': %s; expected %s",
                            o->name, o->env, shown(v.s.p, v.s.n, a, sizeof a), why, range);
            fmt_val(o, v, a, sizeof a);
            return fail(-EINVAL, err, errlen, "config: %s (%s) is %s: %s; expected %s",
                        o->name, o->env, a, why, range);
        }
        if (o->type == OPT_STRING) {
            describe_range(o, range, sizeof range);
            if (v.s.n >= o->size)
                return fail(-EINVAL, err, errlen,
                            "config: %s (%s) has no NUL within its %zu bytes; expected %s",
                            o->name, o->env, o->size, range);
            return fail(-EINVAL, err, errlen, "config: %s (%s) is '%s', not a known %s; "
                        "expected %s", o->name, o->env, shown(v.s.p, v.s.n, a, sizeof a),
                        o->unit, range);
        }
        fmt_val(o, v, a, sizeof a);
        if (o->type == OPT_BOOL)
            snprintf(range, sizeof range, "0 or 1");
        else
            describe_range(o, range, sizeof range);
        return fail(-EINVAL, err, errlen, "config: %s (%s) is %s; expected %s",
                    o->name, o->env, a, range);
    }
    if (cfg->budget_pct > 0 && cfg->budget_bytes > 0)
        return fail(-EINVAL, err, errlen,
                    "config: both budget (HOFF_BUDGET) and budget_pct (HOFF_BUDGET_PCT) are set; set one: a "
                    "size, or a percentage of each rank's device memory");
    /* Across fields: a budget larger than the simulated device never binds,
     * which is always a mistake (HOFF_SIM_DEVICE was probably forgotten). */
    if (cfg->backend == HOFF_BACKEND_SIM && cfg->budget_bytes > cfg->sim_device_bytes) {
        const struct opt *size_opt = lookup("budget", &i);
        union val v;

        v.u = cfg->budget_bytes;
        fmt_val(size_opt, v, a, sizeof a);
        v.u = cfg->sim_device_bytes;
        fmt_val(size_opt, v, b, sizeof b);
        return fail(-EINVAL, err, errlen,
                    "config: budget (HOFF_BUDGET) is %s, more than the simulated device "
                    "holds (sim_device, HOFF_SIM_DEVICE, is %s); lower the budget or "
                    "raise HOFF_SIM_DEVICE", a, b);
    }
    return 0;
}
