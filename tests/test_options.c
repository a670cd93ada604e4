/* test_options.c — the option table (defaults, parsing, messages, environment, validation),
 * hoff__parse_size, and hoff_stats_format_json.  Threading: single-threaded; changes environ. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/options.h"
#include "core/optvalue.h"
#include "plan/plan.h"
#include "testutil.h"

extern char **environ;

static char err[512];

/* ---- helpers ------------------------------------------------------------- */

static int set(struct hoff_config *cfg, const char *name, const char *value) {
    err[0] = '\0';
    return hoff_config_set(cfg, name, value, err, sizeof err);
}

static const char *get(const struct hoff_config *cfg, const char *name) {
    static char buf[512]; /* a trace path is up to 255 characters */

    if (hoff_config_get(cfg, name, buf, sizeof buf) != 0)
        return "<get failed>";
    return buf;
}

/* Assert that setting name to value fails with -EINVAL and exactly msg. */
#define CHECK_MSG(cfg, name, value, msg)                               \
    do {                                                               \
        CU_ASSERT_EQUAL(set((cfg), (name), (value)), -EINVAL);         \
        CU_ASSERT_STRING_EQUAL(err, (msg));                            \
        CU_ASSERT_STRING_EQUAL(hoff_last_error(), (msg));              \
        if (strcmp(err, (msg)) != 0)                                   \
            fprintf(stderr, "\n  got:  %s\n  want: %s\n", err, (msg)); \
    } while (0)

/* What the messages about numa say it accepts. */
#define NUMA_FORMS                                                          \
    "expected nearest, interleave, or a comma-separated list of NUMA node " \
    "numbers from 0 to 1023 without repeats (e.g. 0 or 0,2)"

/* The registered planners as "greedy, ..." (what the messages list). */
static const char *planner_list(void) {
    static char buf[512];
    const struct hoff__planner *p;
    size_t k = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; (p = hoff__planner_at(i)) != NULL && k < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", p->name);
    return buf;
}

/* Unset every HOFF_* variable but HOFF_TEST (the runner's own). */
static void clear_hoff_env(void) {
    char names[64][128];
    int n = 0, i;
    char **e;

    for (e = environ; *e && n < 64; e++) {
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);

        if (strncmp(*e, "HOFF_", 5) == 0 && len < sizeof names[0]) {
            memcpy(names[n], *e, len);
            names[n++][len] = '\0';
        }
    }
    for (i = 0; i < n; i++)
        if (strcmp(names[i], "HOFF_TEST") != 0)
            unsetenv(names[i]);
}

/* ---- defaults and the table ---------------------------------------------- */

/* Two values of o are the same. */
static int same(const struct hoff__opt *o, union hoff__optval a, union hoff__optval b) {
    switch (o->type) {
    case HOFF__OPT_SIZE:
    case HOFF__OPT_DURATION:
    case HOFF__OPT_UINT32: return a.u == b.u;
    case HOFF__OPT_DOUBLE: return a.d == b.d;
    case HOFF__OPT_STRING: return a.s.n == b.s.n && !memcmp(a.s.p, b.s.p, a.s.n);
    default: return a.i == b.i;
    }
}

/* Every default, from the table alone (each is named once, there): its text
 * parses and is in range, passes the further checks, is what
 * hoff_config_init stores, and prints as text that reads back as itself. */
static void test_defaults(void) {
    struct hoff_config c, d;
    int i;

    memset(&c, 0xA5, sizeof c);
    hoff_config_init(&c);
    CU_ASSERT_EQUAL(c.version, HOFF_CONFIG_VERSION);
    CU_ASSERT_EQUAL(c.size, sizeof c);
    CU_ASSERT_EQUAL(hoff_config_count(), HOFF__OPTION_COUNT);
    CU_ASSERT_PTR_NULL(hoff__option_at(-1));
    CU_ASSERT_PTR_NULL(hoff__option_at(HOFF__OPTION_COUNT));
    for (i = 0; i < HOFF__OPTION_COUNT; i++) {
        const struct hoff__opt *o = hoff__option_at(i);
        union hoff__optval def, held, back;
        char text[512], why[128];
        size_t k;

        /* an entry for every key, at its key */
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o->def);
        CU_ASSERT_STRING_EQUAL(o->name, hoff_config_name(i));
        CU_ASSERT_EQUAL_FATAL(hoff__opt_parse(o, o->def, &def), HOFF__P_OK);
        CU_ASSERT_EQUAL(hoff__opt_check(o, def, why, sizeof why), 0);
        held = hoff__opt_load(&c, o);
        CU_ASSERT(same(o, def, held));
        CU_ASSERT(hoff__opt_format(o, held, text, sizeof text) < (int)sizeof text);
        CU_ASSERT_STRING_EQUAL(get(&c, o->name), text);
        CU_ASSERT_EQUAL_FATAL(hoff__opt_parse(o, text, &back), HOFF__P_OK);
        CU_ASSERT(same(o, held, back));
        if (o->type == HOFF__OPT_STRING) /* zero-padded: nothing of the 0xA5 left behind the NUL */
            for (k = held.s.n; k < o->size; k++)
                CU_ASSERT_EQUAL(((const char *)&c)[o->offset + k], 0);
        if (!same(o, def, held) || strcmp(get(&c, o->name), text) != 0)
            fprintf(stderr, "\n  option %s: default '%s' stored or printed as '%s'\n", o->name, o->def, text);
    }
    memset(&d, 0x5A, sizeof d);
    hoff_config_init(&d);
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0); /* padding included: no garbage anywhere */
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    hoff_config_init(NULL); /* harmless */
}

/* hoff-config(7) documents each option's default as hoff_config_get prints
 * it: ".BR name \", \" HOFF_NAME \" (...; default \" text )", or "default empty". */
static void test_defaults_documented(void) {
    char line[1024], want[256], *p, *q;
    struct hoff_config c;
    int found[HOFF__OPTION_COUNT] = {0}, i;
    FILE *f = fopen(HOFF_MAN_DIR "/hoff-config.7", "r");

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    hoff_config_init(&c);
    while (fgets(line, sizeof line, f)) {
        for (i = 0; i < HOFF__OPTION_COUNT; i++) {
            const char *name = hoff_config_name(i);
            size_t n = strlen(name);

            if (strncmp(line, ".BR ", 4) != 0 || strncmp(line + 4, name, n) != 0 || strncmp(line + 4 + n, " \", \"", 4))
                continue;
            found[i]++;
            p = strstr(line, "; default ");
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            p += strlen("; default ");
            if (!strncmp(p, "empty)", 6)) {
                want[0] = '\0';
            } else {
                CU_ASSERT_EQUAL_FATAL(strncmp(p, "\" ", 2), 0);
                p += 2;
                for (q = want; *p && *p != ' ' && *p != '\n' && q < want + sizeof want - 1; p++)
                    if (!(p[0] == '\\' && p[1] == '-')) /* \- is a minus */
                        *q++ = *p;
                *q = '\0';
            }
            CU_ASSERT_STRING_EQUAL(get(&c, name), want);
            if (strcmp(get(&c, name), want) != 0)
                fprintf(stderr, "\n  %s: hoff-config(7) says default %s, the table %s\n", name, want, get(&c, name));
        }
    }
    fclose(f);
    for (i = 0; i < HOFF__OPTION_COUNT; i++) {
        CU_ASSERT_EQUAL(found[i], 1);
        if (found[i] != 1)
            fprintf(stderr, "\n  hoff-config(7) has %d entries for %s\n", found[i], hoff_config_name(i));
    }
}

static void test_table(void) {
    int n = hoff_config_count(), i, j;

    CU_ASSERT_EQUAL(n, HOFF__OPTION_COUNT);
    CU_ASSERT_PTR_NULL(hoff_config_name(-1));
    CU_ASSERT_PTR_NULL(hoff_config_name(n));
    CU_ASSERT_PTR_NULL(hoff_config_help(n));
    for (i = 0; i < n; i++) {
        const char *name = hoff_config_name(i), *help = hoff_config_help(i), *p;
        char env[64], v1[64], v2[64], *q;
        struct hoff_config a, b;

        CU_ASSERT_PTR_NOT_NULL_FATAL(name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(help);
        CU_ASSERT(strlen(help) > 10 && strchr(help, '\n') == NULL);
        for (p = name; *p; p++)
            CU_ASSERT((*p >= 'a' && *p <= 'z') || *p == '_' || (*p >= '0' && *p <= '9'));
        for (j = 0; j < i; j++)
            CU_ASSERT(strcmp(name, hoff_config_name(j)) != 0);
        /* the variable is HOFF_ + NAME, and both reach the same field */
        snprintf(env, sizeof env, "HOFF_%s", name);
        for (q = env; *q; q++)
            *q = (char)toupper((unsigned char)*q);
        hoff_config_init(&a);
        hoff_config_init(&b);
        CU_ASSERT_EQUAL(hoff_config_get(&a, name, v1, sizeof v1), 0);
        CU_ASSERT_EQUAL(hoff_config_get(&a, env, v2, sizeof v2), 0);
        CU_ASSERT_STRING_EQUAL(v1, v2);
        /* the default's text reads back as the default */
        CU_ASSERT_EQUAL(set(&b, env, v1), 0);
        CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
    }
}

/* ---- round trips ------------------------------------------------------------ */

static const struct {
    const char *name, *in, *out;
} roundtrips[] = {
    {"backend", "cuda", "cuda"},
    {"device", "3", "3"},
    {"budget", "12G", "12G"},
    {"host_cap", "1.5G", "1536M"},
    {"managed_min", "4097", "4097"},
    {"oversub_margin", "1T", "1T"},
    {"oversubscribe", "yes", "1"},
    {"log_level", "debug", "debug"},
    {"sim_device", "141G", "141G"},
    {"sim_h2d_gbps", "55.5", "55.5"},
    {"sim_d2h_gbps", "0.1", "0.1"},
    {"sim_latency", "1500", "1500ns"},
    {"sim_fault_gbps", "12.25", "12.25"},
    {"sim_fault_ns", "2ms", "2ms"},
    {"sim_protect", "protect", "protect"},
    {"queue_depth", "4096", "4096"},
    {"planner", " GREEDY ", "greedy"}, /* test_planners covers every registered one */
    {"guard_after_alloc", "0", "0"},
    {"guard_before_free", "1000000", "1000000"},
    {"replan_after", "0", "0"},
    {"bandwidth_gbps", "24.5", "24.5"},
    {"trace", " /tmp/hoff step.trace ", "/tmp/hoff step.trace"},
    {"stats", "off", "0"},
    {"numa", " Interleave ", "interleave"},
    {"numa", "0,2", "0,2"},
    {"numa", "1023,0,511", "1023,0,511"},
    {"spill_dir", " /mnt/nvme 0/hoff ", "/mnt/nvme 0/hoff"},
    {"spill_chunk", "64K", "64K"},
    {"spill_chunk", "1G", "1G"},
    {"spill_chunk", "69632", "68K"},
    {"io_depth", "4096", "4096"},
    {"sim_nvme_read_gbps", "7.25", "7.25"},
    {"sim_nvme_write_gbps", "0.5", "0.5"},
    {"sim_call_ns", "1500", "1500ns"},
    {"groups", "off", "0"},
    {"plan_thread", "no", "0"},
    {"plan_time", "250ms", "250ms"},
    {"free_fence", "device", "device"},
    {"budget_pct", "12.5", "12.5"},
    {"offload_gradients", "yes", "1"},
};
#define NRT ((int)(sizeof roundtrips / sizeof roundtrips[0]))

static void test_roundtrip(void) {
    int i, j;

    /* every option of the table is covered here */
    for (i = 0; i < hoff_config_count(); i++) {
        int found = 0;

        for (j = 0; j < NRT; j++)
            found |= !strcmp(roundtrips[j].name, hoff_config_name(i));
        CU_ASSERT(found);
        if (!found)
            fprintf(stderr, "\n  option %s has no round-trip case\n", hoff_config_name(i));
    }
    for (j = 0; j < NRT; j++) {
        struct hoff_config a, b, d;
        char text[512];

        hoff_config_init(&a);
        hoff_config_init(&d);
        CU_ASSERT_EQUAL(set(&a, roundtrips[j].name, roundtrips[j].in), 0);
        /* a value other than the default (planner: where a second one is registered) */
        if (strcmp(roundtrips[j].out, get(&d, roundtrips[j].name)) != 0)
            CU_ASSERT(memcmp(&a, &d, sizeof a) != 0);
        snprintf(text, sizeof text, "%s", get(&a, roundtrips[j].name));
        CU_ASSERT_STRING_EQUAL(text, roundtrips[j].out);
        hoff_config_init(&b);
        CU_ASSERT_EQUAL(set(&b, roundtrips[j].name, text), 0);
        CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
    }
}

/* The live and replan columns: what hoff_torch_configure(3) may change on a
 * running context, and which of those changes need a new plan. */
#define LIVE_NAMES "budget, host_cap, log_level, planner and offload_gradients"

static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    const char *p;

    for (p = strstr(list, name); p; p = strstr(p + 1, name))
        if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

static void test_live(void) {
    struct hoff_config cur, next, before;
    char live[256], small[8];
    const char *fixed;
    int j, replan, seen = 0;

    CU_ASSERT_EQUAL(hoff__config_live_names(live, sizeof live), (int)strlen(LIVE_NAMES));
    CU_ASSERT_STRING_EQUAL(live, LIVE_NAMES);
    CU_ASSERT_EQUAL(hoff__config_live_names(small, sizeof small), (int)strlen(LIVE_NAMES));
    CU_ASSERT_STRING_EQUAL(small, "budget,");
    CU_ASSERT_EQUAL(hoff__config_live_names(NULL, 0), (int)strlen(LIVE_NAMES));
    for (j = 0; j < NRT; j++) {
        const char *name = roundtrips[j].name;

        hoff_config_init(&cur);
        next = cur;
        CU_ASSERT_EQUAL_FATAL(set(&next, name, roundtrips[j].in), 0);
        if (memcmp(&cur, &next, sizeof cur) == 0)
            continue; /* the default itself */
        before = cur;
        fixed = NULL;
        replan = -1;
        if (listed(LIVE_NAMES, name)) {
            seen++;
            CU_ASSERT_EQUAL(hoff__config_live_update(&cur, &next, &fixed, &replan), 0);
            CU_ASSERT_EQUAL(memcmp(&cur, &next, sizeof cur), 0);
            CU_ASSERT_EQUAL(replan, strcmp(name, "log_level") != 0); /* the log level needs no new plan */
            CU_ASSERT_PTR_NULL(fixed);
            /* ...and with an option that is not live changed too, nothing changes */
            cur = before;
            CU_ASSERT_EQUAL(set(&next, "io_depth", "4096"), 0);
            CU_ASSERT_EQUAL(hoff__config_live_update(&cur, &next, &fixed, &replan), -EBUSY);
            CU_ASSERT_STRING_EQUAL(fixed, "io_depth");
        } else {
            CU_ASSERT_EQUAL(hoff__config_live_update(&cur, &next, &fixed, &replan), -EBUSY);
            CU_ASSERT_PTR_NOT_NULL_FATAL(fixed);
            CU_ASSERT_STRING_EQUAL(fixed, name);
        }
        CU_ASSERT_EQUAL(memcmp(&cur, &before, sizeof cur), 0);
    }
    CU_ASSERT_EQUAL(seen, 5);
    /* nothing changed: nothing to do, no new plan */
    hoff_config_init(&cur);
    next = cur;
    CU_ASSERT_EQUAL(hoff__config_live_update(&cur, &next, NULL, &replan), 0);
    CU_ASSERT_EQUAL(replan, 0);
}

/* hoff_config_check: hoff_config_set's verdict and messages on a struct of
 * defaults, and the value as hoff_config_get prints it. */
static void test_check(void) {
    char buf[64], small[4];
    struct hoff_config a;
    int j;

    for (j = 0; j < NRT; j++) {
        char e2[512];

        err[0] = '\0';
        CU_ASSERT_EQUAL(hoff_config_check(roundtrips[j].name, roundtrips[j].in, buf, sizeof buf, err, sizeof err),
                        strlen(roundtrips[j].out) < sizeof buf ? 0 : -ERANGE);
        if (strlen(roundtrips[j].out) < sizeof buf)
            CU_ASSERT_STRING_EQUAL(buf, roundtrips[j].out);
        CU_ASSERT_EQUAL(hoff_config_check(roundtrips[j].name, roundtrips[j].in, NULL, 0, e2, sizeof e2), 0);
    }
    CU_ASSERT_EQUAL(hoff_config_check("numa", " Interleave ", buf, sizeof buf, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(buf, "interleave");
    CU_ASSERT_EQUAL(hoff_config_check("HOFF_HOST_CAP", "1.5G", buf, sizeof buf, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(buf, "1536M");
    /* a bad value: exactly hoff_config_set's message */
    hoff_config_init(&a);
    CU_ASSERT_EQUAL(hoff_config_check("numa", "1,1", buf, sizeof buf, err, sizeof err), -EINVAL);
    {
        char want[512];

        CU_ASSERT_EQUAL(hoff_config_set(&a, "numa", "1,1", want, sizeof want), -EINVAL);
        CU_ASSERT_STRING_EQUAL(err, want);
    }
    CU_ASSERT_EQUAL(hoff_config_check("budgte", "1G", NULL, 0, err, sizeof err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "did you mean 'budget'"));
    CU_ASSERT_EQUAL(hoff_config_check(NULL, "1G", NULL, 0, err, sizeof err), -EINVAL);
    CU_ASSERT_EQUAL(hoff_config_check("budget", "1.5G", small, sizeof small, err, sizeof err), -ERANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "needs"));
    CU_ASSERT_STRING_EQUAL(err, hoff_last_error());
}

static void test_set_fields(void) {
    struct hoff_config c;

    hoff_config_init(&c);
    CU_ASSERT_EQUAL(set(&c, "BACKEND", "Sim"), 0);
    CU_ASSERT_EQUAL(c.backend, HOFF_BACKEND_SIM);
    CU_ASSERT_EQUAL(set(&c, "hoff_device", "2"), 0);
    CU_ASSERT_EQUAL(c.device, 2);
    CU_ASSERT_EQUAL(set(&c, "HOFF_BUDGET", "2G"), 0);
    CU_ASSERT_EQUAL(c.budget_bytes, 2ull << 30);
    CU_ASSERT_EQUAL(set(&c, "Host_Cap", " 64 GiB "), 0);
    CU_ASSERT_EQUAL(c.host_cap_bytes, 64ull << 30);
    CU_ASSERT_EQUAL(set(&c, "managed_min", "0"), 0);
    CU_ASSERT_EQUAL(c.managed_min_bytes, 0);
    CU_ASSERT_EQUAL(set(&c, "oversub_margin", "512K"), 0);
    CU_ASSERT_EQUAL(c.oversub_margin_bytes, 512ull << 10);
    CU_ASSERT_EQUAL(set(&c, "oversubscribe", "on"), 0);
    CU_ASSERT_EQUAL(c.oversubscribe, 1);
    CU_ASSERT_EQUAL(set(&c, "log_level", "warning"), 0);
    CU_ASSERT_EQUAL(c.log_level, HOFF_LOG_WARN);
    CU_ASSERT_EQUAL(set(&c, "sim_device", "16G"), 0);
    CU_ASSERT_EQUAL(c.sim_device_bytes, 16ull << 30);
    CU_ASSERT_EQUAL(set(&c, "sim_h2d_gbps", "25"), 0);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_h2d_gbps, 25.0, 0.0);
    CU_ASSERT_EQUAL(set(&c, "sim_d2h_gbps", "1e2"), 0);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_d2h_gbps, 100.0, 0.0);
    CU_ASSERT_EQUAL(set(&c, "sim_latency", "3us"), 0);
    CU_ASSERT_EQUAL(c.sim_latency_ns, 3000);
    CU_ASSERT_EQUAL(set(&c, "sim_fault_gbps", "0.5"), 0);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_fault_gbps, 0.5, 0.0);
    CU_ASSERT_EQUAL(set(&c, "sim_fault_ns", "1s"), 0);
    CU_ASSERT_EQUAL(c.sim_fault_ns, 1000000000);
    CU_ASSERT_EQUAL(set(&c, "sim_protect", "PROTECT"), 0);
    CU_ASSERT_EQUAL(c.sim_protect, HOFF_SIM_PROTECT);
    CU_ASSERT_EQUAL(set(&c, "queue_depth", "1"), 0);
    CU_ASSERT_EQUAL(c.issue_queue_depth, 1);
    CU_ASSERT_EQUAL(set(&c, "HOFF_PLANNER", "Greedy"), 0);
    CU_ASSERT_STRING_EQUAL(c.planner, "greedy");
    CU_ASSERT_EQUAL(set(&c, "guard_after_alloc", "7"), 0);
    CU_ASSERT_EQUAL(c.guard_after_alloc, 7);
    CU_ASSERT_EQUAL(set(&c, "GUARD_BEFORE_FREE", "+3"), 0);
    CU_ASSERT_EQUAL(c.guard_before_free, 3);
    CU_ASSERT_EQUAL(set(&c, "hoff_replan_after", " 5 "), 0);
    CU_ASSERT_EQUAL(c.replan_after, 5);
    CU_ASSERT_EQUAL(set(&c, "bandwidth_gbps", "12.5"), 0);
    CU_ASSERT_DOUBLE_EQUAL(c.bandwidth_gbps, 12.5, 0.0);
    CU_ASSERT_EQUAL(set(&c, "HOFF_TRACE", "/tmp/step0.trace"), 0);
    CU_ASSERT_STRING_EQUAL(c.trace_path, "/tmp/step0.trace");
    CU_ASSERT_EQUAL(set(&c, "HOFF_STATS", "no"), 0);
    CU_ASSERT_EQUAL(c.stats_publish, 0);
    CU_ASSERT_EQUAL(set(&c, "NUMA", "3,1"), 0);
    CU_ASSERT_STRING_EQUAL(c.numa, "3,1");
    CU_ASSERT_EQUAL(set(&c, "hoff_spill_dir", "/scratch/hoff"), 0);
    CU_ASSERT_STRING_EQUAL(c.spill_dir, "/scratch/hoff");
    CU_ASSERT_EQUAL(set(&c, "spill_chunk", "256K"), 0);
    CU_ASSERT_EQUAL(c.spill_chunk_bytes, 256ull << 10);
    CU_ASSERT_EQUAL(set(&c, "IO_DEPTH", "8"), 0);
    CU_ASSERT_EQUAL(c.io_queue_depth, 8);
    CU_ASSERT_EQUAL(set(&c, "sim_nvme_read_gbps", "12"), 0);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_nvme_read_gbps, 12.0, 0.0);
    CU_ASSERT_EQUAL(set(&c, "HOFF_SIM_NVME_WRITE_GBPS", "1e1"), 0);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_nvme_write_gbps, 10.0, 0.0);
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(set(&c, "trace", ""), 0); /* back to "don't write" */
    CU_ASSERT_STRING_EQUAL(c.trace_path, "");
    CU_ASSERT_EQUAL(set(&c, "spill_dir", ""), 0); /* back to "no NVMe tier" */
    CU_ASSERT_STRING_EQUAL(c.spill_dir, "");
}

/* ---- each type's parser -------------------------------------------------- */

static void good(const char *name, const char *value, const char *want) {
    struct hoff_config c;

    hoff_config_init(&c);
    CU_ASSERT_EQUAL(set(&c, name, value), 0);
    CU_ASSERT_STRING_EQUAL(get(&c, name), want);
    if (strcmp(get(&c, name), want) != 0)
        fprintf(stderr, "\n  %s='%s' reads back as '%s', want '%s' (%s)\n", name, value, get(&c, name), want, err);
}

static void bad(const char *name, const char *value) {
    struct hoff_config c;

    hoff_config_init(&c);
    CU_ASSERT_EQUAL(set(&c, name, value), -EINVAL);
    CU_ASSERT(strstr(err, "expected") != NULL);
    if (set(&c, name, value) != -EINVAL)
        fprintf(stderr, "\n  %s='%s' was accepted as '%s'\n", name, value, get(&c, name));
}

static void test_parse_size(void) {
    good("budget", "0", "0");
    good("budget", "4096", "4K");
    good("budget", "4097", "4097");
    good("budget", "64K", "64K");
    good("budget", "64k", "64K");
    good("budget", "512M", "512M");
    good("budget", "1.5G", "1536M");
    good("budget", "2MiB", "2M");
    good("budget", "2MB", "2M");
    good("budget", "3 GB", "3G");
    good("budget", "1024T", "1024T");
    good("budget", "7B", "7");
    bad("budget", "12X");
    bad("budget", "-1");
    bad("budget", "");
    bad("budget", "   ");
    bad("budget", "K");
    bad("budget", "1.5");
    bad("budget", "2G extra");
    bad("budget", "1025T");
    bad("budget", "99999999T");
    good("sim_device", "4K", "4K");
    bad("sim_device", "4095");
    bad("sim_device", "0");
    /* spill_chunk: 64K to 1G, whole 4K pages */
    good("spill_chunk", "64K", "64K");
    good("spill_chunk", "65536", "64K");
    good("spill_chunk", "68K", "68K");
    good("spill_chunk", "1.5M", "1536K");
    good("spill_chunk", "1G", "1G");
    bad("spill_chunk", "60K");
    bad("spill_chunk", "0");
    bad("spill_chunk", "65537");
    bad("spill_chunk", "66K");
    bad("spill_chunk", "1048575");
    bad("spill_chunk", "1025M");
    bad("spill_chunk", "1.1G");
    bad("spill_chunk", "4M!");
}

static void test_parse_bool(void) {
    static const char *const yes[] = {"1", "yes", "YES", "true", "True", "on", " on "};
    static const char *const no[] = {"0", "no", "false", "FALSE", "off", "Off"};
    size_t i;

    for (i = 0; i < sizeof yes / sizeof yes[0]; i++)
        good("oversubscribe", yes[i], "1");
    for (i = 0; i < sizeof no / sizeof no[0]; i++)
        good("oversubscribe", no[i], "0");
    good("stats", "off", "0");
    good("stats", "YES", "1");
    bad("stats", "2");
    bad("stats", "");
    bad("oversubscribe", "maybe");
    bad("oversubscribe", "2");
    bad("oversubscribe", "y");
    bad("oversubscribe", "");
}

static void test_parse_int(void) {
    good("device", "0", "0");
    good("device", "+7", "7");
    good("device", "1023", "1023");
    good("queue_depth", "1048576", "1048576");
    bad("device", "-2");
    bad("device", "1024");
    bad("device", "x");
    bad("device", "3x");
    bad("device", "0x10");
    bad("device", "1.0");
    bad("device", "");
    bad("device", "99999999999999999999");
    bad("queue_depth", "0");
    bad("queue_depth", "1048577");
    good("io_depth", "8", "8");
    good("io_depth", "4096", "4096");
    bad("io_depth", "7");
    bad("io_depth", "0");
    bad("io_depth", "4097");
    bad("io_depth", "-32");
    bad("io_depth", "32x");
}

static void test_parse_uint32(void) {
    static const char *const names[] = {"guard_after_alloc", "guard_before_free", "replan_after"};
    size_t i;

    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        good(names[i], "0", "0");
        good(names[i], "+12", "12");
        good(names[i], " 42 ", "42");
        good(names[i], "1000000", "1000000");
        bad(names[i], "1000001");
        bad(names[i], "-1");
        bad(names[i], "4294967295");
        bad(names[i], "4294967296");
        bad(names[i], "99999999999999999999");
        bad(names[i], "1e3");
        bad(names[i], "0x10");
        bad(names[i], "2.0");
        bad(names[i], "x");
        bad(names[i], "");
    }
}

static void test_parse_string(void) {
    char path[300], want[310];

    /* a path: taken as is but for the blanks around it, at most 255 characters */
    good("trace", "", "");
    good("trace", "   ", "");
    good("trace", "rel/step.trace", "rel/step.trace");
    good("trace", "\t/tmp/a b.trace\n", "/tmp/a b.trace");
    good("trace", "/tmp/UPPER.trace", "/tmp/UPPER.trace");
    memset(path, 'p', sizeof path);
    path[255] = '\0';
    good("trace", path, path);
    snprintf(want, sizeof want, "  %s  ", path); /* the blanks do not count */
    good("trace", want, path);
    path[255] = 'p';
    path[256] = '\0';
    bad("trace", path);
    path[299] = '\0';
    bad("trace", path);

    /* a planner: a registered name, any case; stored as registered */
    good("planner", "greedy", "greedy");
    good("planner", "GREEDY", "greedy");
    good("planner", " greedy\t", "greedy");
    bad("planner", "");
    bad("planner", "gredy");
    bad("planner", "greedy2");
    bad("planner", "greedy greedy");
    bad("planner", "123456789012345"); /* 15: fits, but no such planner */
    bad("planner", "1234567890123456");
    bad("planner", "greedygreedygreedygreedy");

    /* spill_dir: a path like trace, not looked at until the NVMe tier opens it */
    good("spill_dir", "", "");
    good("spill_dir", " /nonexistent/dir ", "/nonexistent/dir");
    good("spill_dir", "relative", "relative");
    memset(path, 'd', sizeof path);
    path[255] = '\0';
    good("spill_dir", path, path);
    path[255] = 'd';
    path[256] = '\0';
    bad("spill_dir", path);

    /* numa: a keyword (any case, stored in lower case) or a list of nodes */
    good("numa", "nearest", "nearest");
    good("numa", "NEAREST", "nearest");
    good("numa", "interleave", "interleave");
    good("numa", "\tInterLeave ", "interleave");
    good("numa", "0", "0");
    good("numa", "1023", "1023");
    good("numa", " 0,2 ", "0,2");
    good("numa", "7,3,5", "7,3,5");
    good("numa", "00,01", "00,01"); /* nodes 0 and 1, kept as written */
    good("numa", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23",
         "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23");
    bad("numa", "");
    bad("numa", "near");
    bad("numa", "nearest,0");
    bad("numa", "interleave,1");
    bad("numa", "0,0");
    bad("numa", "1,2,1");
    bad("numa", "0,00");
    bad("numa", "1024");
    bad("numa", "0,99999999999999999999");
    bad("numa", "-1");
    bad("numa", "+1");
    bad("numa", "0,");
    bad("numa", ",0");
    bad("numa", "0,,1");
    bad("numa", "0, 2");
    bad("numa", "0;2");
    bad("numa", "0x1");
    bad("numa", "1-3");
    bad("numa", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24");
}

static void test_parse_enum(void) {
    good("backend", "auto", "auto");
    good("backend", "SIM", "sim");
    good("backend", "Cuda", "cuda");
    good("log_level", "off", "off");
    good("log_level", "error", "error");
    good("log_level", "warn", "warn");
    good("log_level", "WARNING", "warn");
    good("log_level", "info", "info");
    good("log_level", "debug", "debug");
    good("sim_protect", "poison", "poison");
    bad("backend", "gpu");
    bad("backend", "1");
    bad("backend", "");
    bad("log_level", "4");
    bad("log_level", "trace");
    bad("sim_protect", "mprotect");
}

static void test_parse_double(void) {
    good("sim_h2d_gbps", "12.5", "12.5");
    good("sim_h2d_gbps", "1e2", "100");
    good("sim_h2d_gbps", ".25", "0.25");
    good("sim_h2d_gbps", "100000", "100000");
    good("sim_h2d_gbps", "0.1", "0.1");
    good("sim_fault_gbps", "0.001", "0.001");
    bad("sim_fault_gbps", "1e-9"); /* slower than 1 MB/s: the sim's clock would saturate */
    bad("sim_h2d_gbps", "0");
    bad("sim_h2d_gbps", "-1");
    bad("sim_h2d_gbps", "100001");
    bad("sim_h2d_gbps", "inf");
    bad("sim_h2d_gbps", "nan");
    bad("sim_h2d_gbps", "0x10");
    bad("sim_h2d_gbps", "fast");
    bad("sim_h2d_gbps", "1e400");
    bad("sim_h2d_gbps", "1e-400");
    bad("sim_h2d_gbps", "12.5GB/s");
    bad("sim_h2d_gbps", ".");
    bad("sim_h2d_gbps", "");
    good("sim_nvme_read_gbps", "100000", "100000");
    good("sim_nvme_write_gbps", "0.001", "0.001");
    bad("sim_nvme_read_gbps", "0");
    bad("sim_nvme_write_gbps", "-3.5");
    bad("sim_nvme_write_gbps", "100000.1");
    bad("sim_nvme_read_gbps", "nan");
}

static void test_parse_duration(void) {
    good("sim_latency", "0", "0");
    good("sim_latency", "10", "10ns");
    good("sim_latency", "10ns", "10ns");
    good("sim_latency", "10us", "10us");
    good("sim_latency", "10US", "10us");
    good("sim_latency", "2ms", "2ms");
    good("sim_latency", "1s", "1s");
    good("sim_latency", "1.5ms", "1500us");
    good("sim_latency", " 5 us ", "5us");
    good("sim_latency", "0.000000001s", "1ns");
    good("sim_latency", "60s", "60s");
    good("sim_fault_ns", "1000", "1us");
    bad("sim_latency", "1.5ns");
    bad("sim_latency", "1.5");
    bad("sim_latency", "0.0000000001s");
    bad("sim_latency", "5min");
    bad("sim_latency", "-1");
    bad("sim_latency", "us");
    bad("sim_latency", "");
    bad("sim_latency", "1e3");
    bad("sim_latency", "61s");
    bad("sim_latency", "60000000001");
    bad("sim_latency", "99999999999999999999");
    bad("sim_latency", "18446744073709551615s");
}

/* ---- messages --------------------------------------------------------------- */

static void test_messages(void) {
    struct hoff_config c;
    char small[10];

    hoff_config_init(&c);
    CHECK_MSG(&c, "HOFF_BUDGET", "12X",
              "HOFF_BUDGET='12X': not a size; expected a byte count with an optional "
              "K, M, G or T suffix (e.g. 512M, 2G)");
    CHECK_MSG(&c, "budget", "12X",
              "option 'budget'='12X': not a size; expected a byte count with an optional "
              "K, M, G or T suffix (e.g. 512M, 2G)");
    CHECK_MSG(&c, "budget", "99999999T", "option 'budget'='99999999T': out of range; expected a size from 0 to 1024T");
    CHECK_MSG(&c, "HOFF_SIM_DEVICE", "1K", "HOFF_SIM_DEVICE='1K': out of range; expected a size from 4K to 1024T");
    CHECK_MSG(&c, "HOFF_BACKEND", "gpu", "HOFF_BACKEND='gpu': expected one of auto, sim, cuda");
    CHECK_MSG(&c, "log_level", "loud", "option 'log_level'='loud': expected one of off, error, warn, info, debug");
    CHECK_MSG(&c, "HOFF_OVERSUBSCRIBE", "maybe",
              "HOFF_OVERSUBSCRIBE='maybe': not a boolean; expected 1, 0, yes, no, true, "
              "false, on or off");
    CHECK_MSG(&c, "HOFF_DEVICE", "one", "HOFF_DEVICE='one': not an integer; expected an integer from -1 to 1023");
    CHECK_MSG(&c, "HOFF_QUEUE_DEPTH", "0", "HOFF_QUEUE_DEPTH='0': out of range; expected an integer from 1 to 1048576");
    CHECK_MSG(&c, "HOFF_SIM_H2D_GBPS", "fast",
              "HOFF_SIM_H2D_GBPS='fast': not a number; expected a number of GB/s from "
              "0.001 to 100000");
    CHECK_MSG(&c, "HOFF_SIM_H2D_GBPS", "0",
              "HOFF_SIM_H2D_GBPS='0': out of range; expected a number of GB/s from "
              "0.001 to 100000");
    CHECK_MSG(&c, "HOFF_SIM_LATENCY", "5min",
              "HOFF_SIM_LATENCY='5min': not a duration; expected a whole number of "
              "nanoseconds, or a number with an ns, us, ms or s suffix (e.g. 10us, 2ms)");
    CHECK_MSG(&c, "sim_latency", "61s", "option 'sim_latency'='61s': out of range; expected a duration from 0 to 60s");
    CHECK_MSG(&c, "HOFF_GUARD_AFTER_ALLOC", "-1",
              "HOFF_GUARD_AFTER_ALLOC='-1': out of range; expected an integer from 0 to 1000000");
    CHECK_MSG(&c, "HOFF_GUARD_BEFORE_FREE", "many",
              "HOFF_GUARD_BEFORE_FREE='many': not an integer; expected an integer from 0 to "
              "1000000");
    CHECK_MSG(&c, "replan_after", "1000001",
              "option 'replan_after'='1000001': out of range; expected an integer from 0 to "
              "1000000");
    CHECK_MSG(&c, "HOFF_REPLAN_AFTER", "4294967296",
              "HOFF_REPLAN_AFTER='4294967296': out of range; expected an integer from 0 to "
              "1000000");
    CHECK_MSG(&c, "HOFF_BANDWIDTH_GBPS", "0",
              "HOFF_BANDWIDTH_GBPS='0': out of range; expected a number of GB/s from "
              "0.001 to 100000");
    CHECK_MSG(&c, "bandwidth_gbps", "16GB/s",
              "option 'bandwidth_gbps'='16GB/s': not a number; expected a number of GB/s "
              "from 0.001 to 100000");
    {
        char want[512], path[300];

        snprintf(want, sizeof want, "HOFF_PLANNER='gredy': unknown planner; expected one of %s", planner_list());
        CHECK_MSG(&c, "HOFF_PLANNER", "gredy", want);
        snprintf(want, sizeof want, "option 'planner'='': unknown planner; expected one of %s", planner_list());
        CHECK_MSG(&c, "planner", "", want);
        snprintf(want, sizeof want,
                 "HOFF_PLANNER='greedygreedygreedy': too long (18 characters, the limit is "
                 "15); expected one of %s",
                 planner_list());
        CHECK_MSG(&c, "HOFF_PLANNER", "greedygreedygreedy", want);
        memset(path, 'a', sizeof path);
        path[256] = '\0';
        CHECK_MSG(&c, "HOFF_TRACE", path,
                  "HOFF_TRACE='aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...': too long "
                  "(256 characters, the limit is 255); expected a path of at most 255 "
                  "characters");
        /* the count is of the text without the blanks around it */
        memset(path, 'a', sizeof path);
        path[0] = ' ';
        path[257] = ' ';
        path[258] = '\0';
        CHECK_MSG(&c, "trace", path,
                  "option 'trace'=' aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...': too "
                  "long (256 characters, the limit is 255); expected a path of at most 255 "
                  "characters");
        path[256] = ' '; /* 255 characters between blanks: they fit */
        CU_ASSERT_EQUAL(set(&c, "trace", path), 0);
        CU_ASSERT_EQUAL(strlen(c.trace_path), 255);
        CU_ASSERT_EQUAL(c.trace_path[0], 'a');
        CU_ASSERT_EQUAL(set(&c, "trace", ""), 0);
    }
    /* the new tiers' options */
    CHECK_MSG(&c, "HOFF_STATS", "maybe",
              "HOFF_STATS='maybe': not a boolean; expected 1, 0, yes, no, true, false, on "
              "or off");
    CHECK_MSG(&c, "HOFF_IO_DEPTH", "4097", "HOFF_IO_DEPTH='4097': out of range; expected an integer from 8 to 4096");
    CHECK_MSG(&c, "HOFF_SIM_NVME_READ_GBPS", "0",
              "HOFF_SIM_NVME_READ_GBPS='0': out of range; expected a number of GB/s from "
              "0.001 to 100000");
    CHECK_MSG(&c, "sim_nvme_write_gbps", "fast",
              "option 'sim_nvme_write_gbps'='fast': not a number; expected a number of GB/s "
              "from 0.001 to 100000");
    CHECK_MSG(&c, "HOFF_SPILL_CHUNK", "65537",
              "HOFF_SPILL_CHUNK='65537': not a multiple of 4K; expected a size from 64K to 1G "
              "that is a multiple of 4K");
    CHECK_MSG(&c, "spill_chunk", " 66K ",
              "option 'spill_chunk'=' 66K ': not a multiple of 4K; expected a size from 64K "
              "to 1G that is a multiple of 4K");
    CHECK_MSG(&c, "HOFF_SPILL_CHUNK", "32K",
              "HOFF_SPILL_CHUNK='32K': out of range; expected a size from 64K to 1G that is "
              "a multiple of 4K");
    CHECK_MSG(&c, "HOFF_SPILL_CHUNK", "2G",
              "HOFF_SPILL_CHUNK='2G': out of range; expected a size from 64K to 1G that is "
              "a multiple of 4K");
    CHECK_MSG(&c, "HOFF_SPILL_CHUNK", "4MB/s",
              "HOFF_SPILL_CHUNK='4MB/s': not a size; expected a byte count with an optional "
              "K, M, G or T suffix (e.g. 512M, 2G)");
    CHECK_MSG(&c, "HOFF_NUMA", "0,2,0", "HOFF_NUMA='0,2,0': node 0 is listed twice; " NUMA_FORMS);
    CHECK_MSG(&c, "numa", "5,005", "option 'numa'='5,005': node 5 is listed twice; " NUMA_FORMS);
    CHECK_MSG(&c, "HOFF_NUMA", "0,1024", "HOFF_NUMA='0,1024': node 1024 is out of range; " NUMA_FORMS);
    CHECK_MSG(&c, "HOFF_NUMA", "99999999999999999999",
              "HOFF_NUMA='99999999999999999999': node 99999999999999999999 is out of range; " NUMA_FORMS);
    CHECK_MSG(&c, "HOFF_NUMA", "closest", "HOFF_NUMA='closest': not a placement; " NUMA_FORMS);
    CHECK_MSG(&c, "HOFF_NUMA", "0, 2", "HOFF_NUMA='0, 2': not a placement; " NUMA_FORMS);
    CHECK_MSG(&c, "HOFF_NUMA", "0,", "HOFF_NUMA='0,': not a placement; " NUMA_FORMS);
    CHECK_MSG(&c, "HOFF_NUMA", "-1", "HOFF_NUMA='-1': not a placement; " NUMA_FORMS);
    CHECK_MSG(&c, "numa", "", "option 'numa'='': not a placement; " NUMA_FORMS);
    CHECK_MSG(&c, "HOFF_NUMA", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24",
              "HOFF_NUMA='0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,1...': too long (64 "
              "characters, the limit is 63); " NUMA_FORMS);
    {
        char path[300];

        memset(path, 's', sizeof path);
        path[256] = '\0';
        CHECK_MSG(&c, "HOFF_SPILL_DIR", path,
                  "HOFF_SPILL_DIR='ssssssssssssssssssssssssssssssssssssssssssssssss...': too "
                  "long (256 characters, the limit is 255); expected a path of at most 255 "
                  "characters");
    }
    {
        struct hoff_config d;

        hoff_config_init(&d);
        CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0); /* none of the above changed anything */
    }
    /* the variable's canonical spelling, whatever case was given */
    CHECK_MSG(&c, "hoff_backend", "gpu", "HOFF_BACKEND='gpu': expected one of auto, sim, cuda");
    CHECK_MSG(&c, "BACKEND", "gpu", "option 'backend'='gpu': expected one of auto, sim, cuda");
    /* a NULL value is an empty one */
    CHECK_MSG(&c, "backend", NULL, "option 'backend'='': expected one of auto, sim, cuda");
    /* the user's text is quoted at most 48 characters long, unprintables as '?' */
    CHECK_MSG(&c, "backend", "0123456789012345678901234567890123456789012345678901234567890",
              "option 'backend'='012345678901234567890123456789012345678901234567...': "
              "expected one of auto, sim, cuda");
    CHECK_MSG(&c, "backend", "a\tb\n", "option 'backend'='a?b?': expected one of auto, sim, cuda");
    /* err is optional and truncated to errlen */
    CU_ASSERT_EQUAL(hoff_config_set(&c, "budget", "12X", NULL, 0), -EINVAL);
    CU_ASSERT(strncmp(hoff_last_error(), "option 'budget'='12X'", 21) == 0);
    CU_ASSERT_EQUAL(hoff_config_set(&c, "budget", "12X", small, sizeof small), -EINVAL);
    CU_ASSERT_STRING_EQUAL(small, "option 'b");
    CU_ASSERT_EQUAL(hoff_config_set(NULL, "budget", "1", err, sizeof err), -EINVAL);
    CU_ASSERT_EQUAL(hoff_config_set(&c, NULL, "1", err, sizeof err), -EINVAL);
}

static void test_unknown(void) {
    struct hoff_config c, d;
    char buf[32];

    hoff_config_init(&c);
    d = c;
    CU_ASSERT_EQUAL(set(&c, "bugdet", "1G"), -ENOENT);
    CU_ASSERT_STRING_EQUAL(err, "unknown option 'bugdet'; did you mean 'budget'? "
                                "(hoff-config(7) lists them)");
    CU_ASSERT_EQUAL(set(&c, "HOFF_SIM_LATENCYY", "1"), -ENOENT);
    CU_ASSERT_STRING_EQUAL(err, "unknown option HOFF_SIM_LATENCYY; did you mean "
                                "HOFF_SIM_LATENCY? (hoff-config(7) lists them)");
    CU_ASSERT_EQUAL(set(&c, "", "1"), -ENOENT);
    CU_ASSERT_EQUAL(set(&c, "HOFF_", "1"), -ENOENT);
    CU_ASSERT_EQUAL(set(&c, "budget_bytes", "1"), -ENOENT); /* the field, not the option */
    CU_ASSERT(strstr(err, "did you mean 'budget") != NULL); /* budget or budget_pct */
    /* reserved variables are not options */
    CU_ASSERT_EQUAL(set(&c, "HOFF_LIBRARY", "1"), -ENOENT);
    CU_ASSERT_STRING_EQUAL(err, "HOFF_LIBRARY is not a configuration option: it is read by "
                                "another part of hoff (see hoff-config(7))");
    CU_ASSERT_EQUAL(set(&c, "hoff_step_mark", "1"), -ENOENT);
    CU_ASSERT(strncmp(err, "HOFF_STEP_MARK is not a configuration option", 44) == 0);
    CU_ASSERT_EQUAL(set(&c, "step_mark", "1"), -ENOENT); /* only the variable is reserved */
    CU_ASSERT(strncmp(err, "unknown option 'step_mark'", 26) == 0);
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    /* HOFF_STATS, HOFF_NUMA and HOFF_SPILL_DIR were reserved; they are options now */
    CU_ASSERT_EQUAL(set(&c, "HOFF_STATS", "0"), 0);
    CU_ASSERT_EQUAL(c.stats_publish, 0);
    CU_ASSERT_EQUAL(set(&c, "HOFF_NUMA", "interleave"), 0);
    CU_ASSERT_EQUAL(set(&c, "HOFF_SPILL_DIR", "/tmp"), 0);
    CU_ASSERT_EQUAL(hoff_config_get(&c, "nope", buf, sizeof buf), -ENOENT);
    CU_ASSERT(strstr(hoff_last_error(), "nope") != NULL);
}

static void test_failed_set_unchanged(void) {
    static const struct {
        const char *name, *value;
    } cases[] = {
        {"backend", "gpu"},
        {"device", "-3"},
        {"budget", "12X"},
        {"budget", "99999999T"},
        {"host_cap", "-1"},
        {"oversubscribe", "maybe"},
        {"log_level", "loud"},
        {"sim_device", "0"},
        {"sim_h2d_gbps", "0"},
        {"sim_d2h_gbps", "nan"},
        {"sim_latency", "1h"},
        {"sim_fault_gbps", "-8"},
        {"sim_fault_ns", "1.5"},
        {"sim_protect", "x"},
        {"queue_depth", "0"},
        {"managed_min", "1.5"},
        {"oversub_margin", "lots"},
        {"planner", "nope"},
        {"planner", "greedygreedygreedy"},
        {"guard_after_alloc", "-1"},
        {"guard_before_free", "1000001"},
        {"replan_after", "x"},
        {"bandwidth_gbps", "0"},
        {"stats", "2"},
        {"numa", "0,0"},
        {"numa", "1024"},
        {"numa", "near"},
        {"numa", "NEAREST,1"},
        {"spill_chunk", "65537"},
        {"spill_chunk", "32K"},
        {"io_depth", "7"},
        {"sim_nvme_read_gbps", "0"},
        {"sim_nvme_write_gbps", "inf"},
        {"spill_dir", "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
                      "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
                      "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
                      "yyyyyyyyyyyyyyyy"},
        {"trace", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                  "xxxxxxxxxxxxxxxx"},
    };
    struct hoff_config c, d;
    size_t i;

    hoff_config_init(&c);
    CU_ASSERT_EQUAL(set(&c, "budget", "3G"), 0);
    CU_ASSERT_EQUAL(set(&c, "sim_h2d_gbps", "33"), 0);
    CU_ASSERT_EQUAL(set(&c, "trace", "/tmp/kept.trace"), 0);
    CU_ASSERT_EQUAL(set(&c, "replan_after", "9"), 0);
    CU_ASSERT_EQUAL(set(&c, "numa", "1,3"), 0);
    CU_ASSERT_EQUAL(set(&c, "spill_dir", "/tmp/kept"), 0);
    CU_ASSERT_EQUAL(set(&c, "spill_chunk", "8M"), 0);
    d = c;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CU_ASSERT_EQUAL(set(&c, cases[i].name, cases[i].value), -EINVAL);
        CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    }
}

static void test_get_errors(void) {
    struct hoff_config c;
    char buf[8];

    hoff_config_init(&c);
    memset(buf, 'x', sizeof buf);
    CU_ASSERT_EQUAL(hoff_config_get(&c, "backend", buf, 3), -ERANGE);
    CU_ASSERT_STRING_EQUAL(buf, "au");
    CU_ASSERT_EQUAL(hoff_config_get(&c, "backend", buf, 5), 0);
    CU_ASSERT_STRING_EQUAL(buf, "auto");
    CU_ASSERT_EQUAL(hoff_config_get(&c, "backend", NULL, 0), -ERANGE);
    CU_ASSERT_EQUAL(hoff_config_get(&c, "backend", NULL, 4), -EINVAL);
    CU_ASSERT_EQUAL(hoff_config_get(NULL, "backend", buf, sizeof buf), -EINVAL);
    CU_ASSERT_EQUAL(hoff_config_get(&c, NULL, buf, sizeof buf), -EINVAL);
}

/* ---- the environment ---------------------------------------------------- */

static void test_env(void) {
    struct hoff_config c, d;

    clear_hoff_env();
    hoff_config_init(&c);
    hoff_config_init(&d); /* the defaults */
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    setenv("HOFF_BUDGET", "12G", 1);
    setenv("HOFF_BACKEND", "sim", 1);
    setenv("HOFF_SIM_DEVICE", "16G", 1);
    setenv("HOFF_SIM_H2D_GBPS", "25.5", 1);
    setenv("HOFF_SIM_LATENCY", "2us", 1);
    setenv("HOFF_OVERSUBSCRIBE", "true", 1);
    setenv("HOFF_PLANNER", "GREEDY", 1);
    setenv("HOFF_GUARD_AFTER_ALLOC", "4", 1);
    setenv("HOFF_GUARD_BEFORE_FREE", "0", 1);
    setenv("HOFF_REPLAN_AFTER", "0", 1);
    setenv("HOFF_BANDWIDTH_GBPS", "25", 1);
    setenv("HOFF_TRACE", "/tmp/step.trace", 1);
    setenv("HOFF_STATS", "off", 1);
    setenv("HOFF_NUMA", "Interleave", 1);
    setenv("HOFF_SPILL_DIR", "/mnt/nvme0", 1);
    setenv("HOFF_SPILL_CHUNK", "1M", 1);
    setenv("HOFF_IO_DEPTH", "128", 1);
    setenv("HOFF_SIM_NVME_READ_GBPS", "7", 1);
    setenv("HOFF_SIM_NVME_WRITE_GBPS", "", 1); /* empty: unset */
    setenv("HOFF_LOG_LEVEL", "", 1);           /* empty: unset */
    setenv("hoff_budget", "1", 1);             /* not HOFF_: not ours */
    setenv("HOFFMAN", "1", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.budget_bytes, 12ull << 30);
    CU_ASSERT_EQUAL(c.backend, HOFF_BACKEND_SIM);
    CU_ASSERT_EQUAL(c.sim_device_bytes, 16ull << 30);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_h2d_gbps, 25.5, 0.0);
    CU_ASSERT_EQUAL(c.sim_latency_ns, 2000);
    CU_ASSERT_EQUAL(c.oversubscribe, 1);
    CU_ASSERT_EQUAL(c.log_level, HOFF_LOG_WARN);
    CU_ASSERT_STRING_EQUAL(c.planner, "greedy");
    CU_ASSERT_EQUAL(c.guard_after_alloc, 4);
    CU_ASSERT_EQUAL(c.guard_before_free, 0);
    CU_ASSERT_EQUAL(c.replan_after, 0);
    CU_ASSERT_DOUBLE_EQUAL(c.bandwidth_gbps, 25.0, 0.0);
    CU_ASSERT_STRING_EQUAL(c.trace_path, "/tmp/step.trace");
    CU_ASSERT_EQUAL(c.stats_publish, 0);
    CU_ASSERT_STRING_EQUAL(c.numa, "interleave");
    CU_ASSERT_STRING_EQUAL(c.spill_dir, "/mnt/nvme0");
    CU_ASSERT_EQUAL(c.spill_chunk_bytes, 1ull << 20);
    CU_ASSERT_EQUAL(c.io_queue_depth, 128);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_nvme_read_gbps, 7.0, 0.0);
    CU_ASSERT_DOUBLE_EQUAL(c.sim_nvme_write_gbps, d.sim_nvme_write_gbps, 0.0); /* HOFF_X= is unset */
    CU_ASSERT_EQUAL(c.issue_queue_depth, d.issue_queue_depth);                 /* untouched */
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    unsetenv("hoff_budget");
    unsetenv("HOFFMAN");
    clear_hoff_env();
}

static void test_env_layers_on_struct(void) {
    struct hoff_config c;

    clear_hoff_env();
    hoff_config_init(&c);
    c.issue_queue_depth = 77;
    c.device = 1;
    setenv("HOFF_DEVICE", "2", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.device, 2);             /* the environment wins where set */
    CU_ASSERT_EQUAL(c.issue_queue_depth, 77); /* the struct's values stay elsewhere */
    clear_hoff_env();
}

static void test_env_unknown(void) {
    struct hoff_config c, d;

    clear_hoff_env();
    hoff_config_init(&c);
    d = c;
    setenv("HOFF_BUDGET", "1G", 1);
    setenv("HOFF_FOO", "1", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -ENOENT);
    CU_ASSERT(strncmp(err, "unknown variable HOFF_FOO in the environment; did you mean ", 59) == 0);
    CU_ASSERT_STRING_EQUAL(hoff_last_error(), err);
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0); /* all or nothing */
    unsetenv("HOFF_FOO");

    setenv("HOFF_BUGDET", "1G", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -ENOENT);
    CU_ASSERT_STRING_EQUAL(err, "unknown variable HOFF_BUGDET in the environment; did you "
                                "mean HOFF_BUDGET? (hoff-config(7) lists hoff's variables; "
                                "unset the others)");
    unsetenv("HOFF_BUGDET");

    /* variables are matched exactly: HOFF_budget is not HOFF_BUDGET */
    setenv("HOFF_budget", "1G", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -ENOENT);
    CU_ASSERT(strstr(err, "HOFF_budget") != NULL && strstr(err, "mean HOFF_BUDGET?") != NULL);
    unsetenv("HOFF_budget");

    setenv("HOFF_STAT", "1", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -ENOENT);
    CU_ASSERT(strstr(err, "mean HOFF_STATS?") != NULL);
    unsetenv("HOFF_STAT");

    /* a reserved name is suggested too */
    setenv("HOFF_STEP_MRK", "1", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -ENOENT);
    CU_ASSERT(strstr(err, "mean HOFF_STEP_MARK?") != NULL);
    unsetenv("HOFF_STEP_MRK");

    setenv("HOFF_SPILLDIR", "/tmp", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -ENOENT);
    CU_ASSERT(strstr(err, "mean HOFF_SPILL_DIR?") != NULL);
    clear_hoff_env();
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
}

static void test_env_bad_value(void) {
    struct hoff_config c, d;

    clear_hoff_env();
    hoff_config_init(&c);
    d = c;
    setenv("HOFF_QUEUE_DEPTH", "64", 1);
    setenv("HOFF_BUDGET", "12X", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "HOFF_BUDGET='12X': not a size; expected a byte count with "
                                "an optional K, M, G or T suffix (e.g. 512M, 2G)");
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    setenv("HOFF_BUDGET", "12G", 1);
    setenv("HOFF_BACKEND", "gpu", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "HOFF_BACKEND='gpu': expected one of auto, sim, cuda");
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    CU_ASSERT_EQUAL(hoff_config_from_env(NULL, err, sizeof err), -EINVAL);
    clear_hoff_env();
}

/* HOFF_PLANNER and HOFF_TRACE were reserved names; they are options now. */
static void test_env_planner_trace(void) {
    struct hoff_config c, d;
    char want[512];

    clear_hoff_env();
    hoff_config_init(&c);
    d = c;
    setenv("HOFF_TRACE", "/tmp/t.trace", 1);
    setenv("HOFF_PLANNER", "gredy", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -EINVAL);
    snprintf(want, sizeof want, "HOFF_PLANNER='gredy': unknown planner; expected one of %s", planner_list());
    CU_ASSERT_STRING_EQUAL(err, want);
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    setenv("HOFF_PLANNER", "greedy", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.planner, "greedy");
    CU_ASSERT_STRING_EQUAL(c.trace_path, "/tmp/t.trace");
    /* an empty variable is unset: it leaves a path set in code */
    setenv("HOFF_TRACE", "", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.trace_path, "/tmp/t.trace");
    /* hoff_config_set calls them options, not reserved names */
    CU_ASSERT_EQUAL(set(&c, "HOFF_TRACE", ""), 0);
    CU_ASSERT_STRING_EQUAL(c.trace_path, "");
    CU_ASSERT_EQUAL(set(&c, "HOFF_PLANNER", "greedy"), 0);
    /* a misspelling is matched against them */
    setenv("HOFF_PLANER", "greedy", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -ENOENT);
    CU_ASSERT(strstr(err, "did you mean HOFF_PLANNER?") != NULL);
    clear_hoff_env();
}

static void test_env_reserved(void) {
    static const char *const names[] = {"HOFF_LIBRARY", "HOFF_STEP_MARK", "HOFF_TEST", "HOFF_RECORD_STATUS",
                                        "HOFF_PLAN_MEM_AVAILABLE"};
    int had_test = getenv("HOFF_TEST") != NULL;
    struct hoff_config c, d;
    size_t i;

    clear_hoff_env();
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        setenv(names[i], "whatever", 0); /* keeps the runner's HOFF_TEST */
    hoff_config_init(&c);
    d = c;
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    clear_hoff_env();
    if (!had_test)
        unsetenv("HOFF_TEST");
}

/* HOFF_STATS, HOFF_NUMA and HOFF_SPILL_DIR were reserved names (read, but
 * not checked); they are options now, and a bad value is an error. */
static void test_env_stats_numa_spill(void) {
    struct hoff_config c, d;

    clear_hoff_env();
    hoff_config_init(&c);
    d = c;
    setenv("HOFF_STATS", "whatever", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "HOFF_STATS='whatever': not a boolean; expected 1, 0, yes, no, "
                                "true, false, on or off");
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    setenv("HOFF_STATS", "0", 1);
    setenv("HOFF_NUMA", "2,3,2", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "HOFF_NUMA='2,3,2': node 2 is listed twice; " NUMA_FORMS);
    CU_ASSERT_STRING_EQUAL(hoff_last_error(), err);
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    setenv("HOFF_NUMA", "2,3", 1);
    setenv("HOFF_SPILL_CHUNK", "100000", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "HOFF_SPILL_CHUNK='100000': not a multiple of 4K; expected a "
                                "size from 64K to 1G that is a multiple of 4K");
    CU_ASSERT_EQUAL(memcmp(&c, &d, sizeof c), 0);
    setenv("HOFF_SPILL_CHUNK", "128K", 1);
    /* the directory is the NVMe tier's to check, when it opens it */
    setenv("HOFF_SPILL_DIR", "/no/such/directory", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.stats_publish, 0);
    CU_ASSERT_STRING_EQUAL(c.numa, "2,3");
    CU_ASSERT_EQUAL(c.spill_chunk_bytes, 128ull << 10);
    CU_ASSERT_STRING_EQUAL(c.spill_dir, "/no/such/directory");
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    /* an empty variable is unset: it leaves what the struct has */
    setenv("HOFF_SPILL_DIR", "", 1);
    setenv("HOFF_NUMA", "", 1);
    CU_ASSERT_EQUAL(hoff_config_from_env(&c, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.spill_dir, "/no/such/directory");
    CU_ASSERT_STRING_EQUAL(c.numa, "2,3");
    clear_hoff_env();
}

/* ---- validation ------------------------------------------------------------ */

static int validate_fails(const struct hoff_config *c, const char *want) {
    int rc = hoff__config_validate(c, err, sizeof err);

    if (rc != -EINVAL || !strstr(err, want))
        fprintf(stderr, "\n  validate: rc %d, '%s', want '%s'\n", rc, err, want);
    return rc == -EINVAL && strstr(err, want) != NULL;
}

static void test_validate(void) {
    struct hoff_config c;

    hoff_config_init(&c);
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(hoff__config_validate(&c, NULL, 0), 0);
    CU_ASSERT_EQUAL(hoff__config_validate(NULL, err, sizeof err), -EINVAL);

    c.version = 7;
    CU_ASSERT(validate_fails(&c, "version is 7, expected HOFF_CONFIG_VERSION (1)"));
    hoff_config_init(&c);
    c.size = 12;
    CU_ASSERT(validate_fails(&c, "size is 12, expected sizeof(struct hoff_config)"));
    hoff_config_init(&c);
    c.backend = 7;
    CU_ASSERT(validate_fails(&c, "backend (HOFF_BACKEND) is 7; expected one of auto, sim, cuda"));
    hoff_config_init(&c);
    c.device = -2;
    CU_ASSERT(validate_fails(&c, "device (HOFF_DEVICE) is -2; expected an integer from -1 to 1023"));
    hoff_config_init(&c);
    c.budget_bytes = 1ull << 60;
    CU_ASSERT(validate_fails(&c, "budget (HOFF_BUDGET) is 1048576T; expected a size from 0 to 1024T"));
    hoff_config_init(&c);
    c.host_cap_bytes = UINT64_MAX;
    CU_ASSERT(validate_fails(&c, "host_cap (HOFF_HOST_CAP) is 18446744073709551615;"));
    hoff_config_init(&c);
    c.oversubscribe = 2;
    CU_ASSERT(validate_fails(&c, "oversubscribe (HOFF_OVERSUBSCRIBE) is 2; expected 0 or 1"));
    hoff_config_init(&c);
    c.log_level = 5;
    CU_ASSERT(validate_fails(&c, "log_level (HOFF_LOG_LEVEL) is 5;"));
    hoff_config_init(&c);
    c.sim_device_bytes = 0;
    CU_ASSERT(validate_fails(&c, "sim_device (HOFF_SIM_DEVICE) is 0; expected a size from 4K to 1024T"));
    hoff_config_init(&c);
    c.sim_h2d_gbps = 0;
    CU_ASSERT(validate_fails(&c, "sim_h2d_gbps (HOFF_SIM_H2D_GBPS) is 0; expected a number of "
                                 "GB/s from 0.001 to 100000"));
    hoff_config_init(&c);
    c.sim_d2h_gbps = NAN;
    CU_ASSERT(validate_fails(&c, "sim_d2h_gbps (HOFF_SIM_D2H_GBPS) is nan;"));
    hoff_config_init(&c);
    c.sim_fault_gbps = INFINITY;
    CU_ASSERT(validate_fails(&c, "sim_fault_gbps (HOFF_SIM_FAULT_GBPS) is inf;"));
    hoff_config_init(&c);
    c.sim_latency_ns = 61000000000ull;
    CU_ASSERT(validate_fails(&c, "sim_latency (HOFF_SIM_LATENCY) is 61s; expected a duration from 0 to 60s"));
    hoff_config_init(&c);
    c.sim_fault_ns = UINT64_MAX;
    CU_ASSERT(validate_fails(&c, "sim_fault_ns (HOFF_SIM_FAULT_NS) is"));
    hoff_config_init(&c);
    c.sim_protect = -1;
    CU_ASSERT(validate_fails(&c, "sim_protect (HOFF_SIM_PROTECT) is -1; expected one of poison, protect"));
    hoff_config_init(&c);
    c.issue_queue_depth = 0;
    CU_ASSERT(validate_fails(&c, "queue_depth (HOFF_QUEUE_DEPTH) is 0; expected an integer from 1 to 1048576"));
    c.issue_queue_depth = (1 << 20) + 1;
    CU_ASSERT(validate_fails(&c, "queue_depth (HOFF_QUEUE_DEPTH) is 1048577;"));
    CU_ASSERT_STRING_EQUAL(hoff_last_error(), err);
    hoff_config_init(&c);
    c.guard_after_alloc = 1000001;
    CU_ASSERT(validate_fails(&c, "config: guard_after_alloc (HOFF_GUARD_AFTER_ALLOC) is 1000001; "
                                 "expected an integer from 0 to 1000000"));
    hoff_config_init(&c);
    c.guard_before_free = UINT32_MAX;
    CU_ASSERT(validate_fails(&c, "config: guard_before_free (HOFF_GUARD_BEFORE_FREE) is "
                                 "4294967295; expected an integer from 0 to 1000000"));
    hoff_config_init(&c);
    c.replan_after = 1000001;
    CU_ASSERT(validate_fails(&c, "config: replan_after (HOFF_REPLAN_AFTER) is 1000001;"));
    c.replan_after = 1000000;
    c.guard_after_alloc = 0;
    c.guard_before_free = 0;
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    hoff_config_init(&c);
    c.bandwidth_gbps = 0;
    CU_ASSERT(validate_fails(&c, "config: bandwidth_gbps (HOFF_BANDWIDTH_GBPS) is 0; expected a "
                                 "number of GB/s from 0.001 to 100000"));
    c.bandwidth_gbps = 100000.5;
    CU_ASSERT(validate_fails(&c, "bandwidth_gbps (HOFF_BANDWIDTH_GBPS) is 100000.5;"));
    /* Below 1 MB/s a transfer would take the sim's clock past any step. */
    c.bandwidth_gbps = 1e-300;
    CU_ASSERT(validate_fails(&c, "bandwidth_gbps (HOFF_BANDWIDTH_GBPS) is 1e-300; expected a number of "
                                 "GB/s from 0.001 to 100000"));
    c.bandwidth_gbps = 0.001;
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    hoff_config_init(&c);
    c.sim_fault_gbps = 0.0009;
    CU_ASSERT(validate_fails(&c, "sim_fault_gbps (HOFF_SIM_FAULT_GBPS) is 0.0009;"));
    hoff_config_init(&c);
    c.bandwidth_gbps = NAN;
    CU_ASSERT(validate_fails(&c, "bandwidth_gbps (HOFF_BANDWIDTH_GBPS) is nan;"));
    hoff_config_init(&c);
    memset(c.trace_path, 'x', sizeof c.trace_path);
    CU_ASSERT(validate_fails(&c, "config: trace (HOFF_TRACE) has no NUL within its 256 bytes; "
                                 "expected a path of at most 255 characters"));
    c.trace_path[sizeof c.trace_path - 1] = '\0'; /* 255 characters and the NUL */
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    hoff_config_init(&c);
    memset(c.planner, 'g', sizeof c.planner);
    CU_ASSERT(validate_fails(&c, "config: planner (HOFF_PLANNER) has no NUL within its 16 bytes; "
                                 "expected one of "));
    CU_ASSERT(strstr(err, planner_list()) != NULL);

    /* the new tiers' options */
    hoff_config_init(&c);
    c.stats_publish = -1;
    CU_ASSERT(validate_fails(&c, "config: stats (HOFF_STATS) is -1; expected 0 or 1"));
    hoff_config_init(&c);
    c.io_queue_depth = 7;
    CU_ASSERT(validate_fails(&c, "config: io_depth (HOFF_IO_DEPTH) is 7; expected an integer "
                                 "from 8 to 4096"));
    c.io_queue_depth = 4097;
    CU_ASSERT(validate_fails(&c, "config: io_depth (HOFF_IO_DEPTH) is 4097;"));
    hoff_config_init(&c);
    c.sim_nvme_read_gbps = 0;
    CU_ASSERT(validate_fails(&c, "config: sim_nvme_read_gbps (HOFF_SIM_NVME_READ_GBPS) is 0; "
                                 "expected a number of GB/s from 0.001 to 100000"));
    hoff_config_init(&c);
    c.sim_nvme_write_gbps = NAN;
    CU_ASSERT(validate_fails(&c, "config: sim_nvme_write_gbps (HOFF_SIM_NVME_WRITE_GBPS) is nan;"));
    hoff_config_init(&c);
    c.spill_chunk_bytes = 65537;
    CU_ASSERT(validate_fails(&c, "config: spill_chunk (HOFF_SPILL_CHUNK) is 65537: not a multiple "
                                 "of 4K; expected a size from 64K to 1G that is a multiple of 4K"));
    c.spill_chunk_bytes = 4096;
    CU_ASSERT(validate_fails(&c, "config: spill_chunk (HOFF_SPILL_CHUNK) is 4K; expected a size "
                                 "from 64K to 1G that is a multiple of 4K"));
    c.spill_chunk_bytes = 2ull << 30;
    CU_ASSERT(validate_fails(&c, "config: spill_chunk (HOFF_SPILL_CHUNK) is 2G;"));
    c.spill_chunk_bytes = (1ull << 30) - 4096;
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    hoff_config_init(&c);
    memset(c.spill_dir, 'd', sizeof c.spill_dir);
    CU_ASSERT(validate_fails(&c, "config: spill_dir (HOFF_SPILL_DIR) has no NUL within its 256 "
                                 "bytes; expected a path of at most 255 characters"));
    c.spill_dir[sizeof c.spill_dir - 1] = '\0';
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);

    /* numa: what hoff_config_set stores, nothing else (the keywords only in lower case) */
    {
        static const char *const ok[] = {"nearest", "interleave", "0", "0,2", "1023,5"};
        static const struct {
            const char *value, *want;
        } ko[] = {
            {"", "config: numa (HOFF_NUMA) is '': not a placement; " NUMA_FORMS},
            {"Nearest", "config: numa (HOFF_NUMA) is 'Nearest': not a placement; " NUMA_FORMS},
            {" 0", "config: numa (HOFF_NUMA) is ' 0': not a placement; " NUMA_FORMS},
            {"0,0", "config: numa (HOFF_NUMA) is '0,0': node 0 is listed twice; " NUMA_FORMS},
            {"4,1024", "config: numa (HOFF_NUMA) is '4,1024': node 1024 is out of range; " NUMA_FORMS},
            {"n\001", "config: numa (HOFF_NUMA) is 'n?': not a placement; " NUMA_FORMS},
        };
        size_t i;

        for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
            hoff_config_init(&c);
            snprintf(c.numa, sizeof c.numa, "%s", ok[i]);
            CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
        }
        for (i = 0; i < sizeof ko / sizeof ko[0]; i++) {
            hoff_config_init(&c);
            snprintf(c.numa, sizeof c.numa, "%s", ko[i].value);
            CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), -EINVAL);
            CU_ASSERT_STRING_EQUAL(err, ko[i].want);
            CU_ASSERT_STRING_EQUAL(hoff_last_error(), ko[i].want);
        }
        hoff_config_init(&c);
        memset(c.numa, '1', sizeof c.numa);
        CU_ASSERT(validate_fails(&c, "config: numa (HOFF_NUMA) has no NUL within its 64 bytes; " NUMA_FORMS));
    }

    /* across fields: a sim budget beyond the sim device */
    hoff_config_init(&c);
    c.backend = HOFF_BACKEND_SIM;
    c.budget_bytes = 100ull << 30;
    CU_ASSERT(validate_fails(&c, "budget (HOFF_BUDGET) is 100G, more than the simulated device "
                                 "holds (sim_device, HOFF_SIM_DEVICE, is 80G)"));
    c.sim_device_bytes = 100ull << 30;
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
    c.backend = HOFF_BACKEND_AUTO; /* the backend is not known yet: not checked */
    c.sim_device_bytes = 1ull << 30;
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
}

/* Every registered planner is accepted by set and validate; anything else is
 * rejected by both, with the list of planners. */
static void test_planners(void) {
    const struct hoff__planner *p;
    struct hoff_config c;
    char want[512], upper[16];
    int i, n = 0;

    for (i = 0; (p = hoff__planner_at(i)) != NULL; i++, n++) {
        size_t k;

        CU_ASSERT_PTR_NOT_NULL_FATAL(p->name);
        CU_ASSERT(strlen(p->name) > 0 && strlen(p->name) < sizeof c.planner);
        CU_ASSERT_PTR_EQUAL(hoff__planner_find(p->name), p);
        hoff_config_init(&c);
        CU_ASSERT_EQUAL(set(&c, "planner", p->name), 0);
        CU_ASSERT_STRING_EQUAL(c.planner, p->name);
        CU_ASSERT_STRING_EQUAL(get(&c, "planner"), p->name);
        CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), 0);
        for (k = 0; p->name[k] && k + 1 < sizeof upper; k++)
            upper[k] = (char)toupper((unsigned char)p->name[k]);
        upper[k] = '\0';
        hoff_config_init(&c);
        CU_ASSERT_EQUAL(set(&c, "HOFF_PLANNER", upper), 0);
        CU_ASSERT_STRING_EQUAL(c.planner, p->name); /* the registered spelling */
    }
    CU_ASSERT(n >= 1);
    CU_ASSERT_PTR_NULL(hoff__planner_at(-1));
    CU_ASSERT_PTR_NULL(hoff__planner_find("no-such-planner"));

    /* validate: a struct filled by hand */
    snprintf(want, sizeof want,
             "config: planner (HOFF_PLANNER) is 'gredy', not a known "
             "planner; expected one of %s",
             planner_list());
    hoff_config_init(&c);
    snprintf(c.planner, sizeof c.planner, "gredy");
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, want);
    CU_ASSERT_STRING_EQUAL(hoff_last_error(), want);
    snprintf(want, sizeof want,
             "config: planner (HOFF_PLANNER) is '', not a known "
             "planner; expected one of %s",
             planner_list());
    memset(c.planner, 0, sizeof c.planner);
    CU_ASSERT_EQUAL(hoff__config_validate(&c, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, want);
    /* the runtime looks the name up as is: validate does too */
    snprintf(c.planner, sizeof c.planner, "GREEDY");
    if (!hoff__planner_find("GREEDY"))
        CU_ASSERT(validate_fails(&c, "config: planner (HOFF_PLANNER) is 'GREEDY', not a known "
                                     "planner; expected one of "));
    snprintf(c.planner, sizeof c.planner, "gr\001edy");
    CU_ASSERT(validate_fails(&c, "config: planner (HOFF_PLANNER) is 'gr?edy', not a known "));
}

/* ---- hoff__parse_size ------------------------------------------------------ */

static int psize(const char *s, uint64_t *v) {
    *v = 0xDEADBEEF;
    return hoff__parse_size(s, v);
}

static void test_parse_size_edges(void) {
    uint64_t v;

    CU_ASSERT_EQUAL(psize("0", &v), 0);
    CU_ASSERT_EQUAL(v, 0);
    CU_ASSERT_EQUAL(psize("0K", &v), 0);
    CU_ASSERT_EQUAL(v, 0);
    CU_ASSERT_EQUAL(psize("4096", &v), 0);
    CU_ASSERT_EQUAL(v, 4096);
    CU_ASSERT_EQUAL(psize("64K", &v), 0);
    CU_ASSERT_EQUAL(v, 65536);
    CU_ASSERT_EQUAL(psize("1.5G", &v), 0);
    CU_ASSERT_EQUAL(v, 3ull << 29);
    CU_ASSERT_EQUAL(psize("2MiB", &v), 0);
    CU_ASSERT_EQUAL(v, 2ull << 20);
    CU_ASSERT_EQUAL(psize("3 GB", &v), 0);
    CU_ASSERT_EQUAL(v, 3ull << 30);
    CU_ASSERT_EQUAL(psize("1t", &v), 0);
    CU_ASSERT_EQUAL(v, 1ull << 40);
    CU_ASSERT_EQUAL(psize("10B", &v), 0);
    CU_ASSERT_EQUAL(v, 10);
    CU_ASSERT_EQUAL(psize(".5K", &v), 0);
    CU_ASSERT_EQUAL(v, 512);
    CU_ASSERT_EQUAL(psize("16777215T", &v), 0); /* the largest whole T below 2^64 */
    CU_ASSERT_EQUAL(v, 16777215ull << 40);

    CU_ASSERT_EQUAL(psize("-1", &v), -EINVAL);
    CU_ASSERT_EQUAL(v, 0xDEADBEEF); /* untouched on error */
    CU_ASSERT_EQUAL(psize("", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("K", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("G5", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("12X", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("1.5", &v), -EINVAL); /* fractional bytes */
    CU_ASSERT_EQUAL(psize("2KK", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("2 K B x", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("nan", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("inf", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize(NULL, &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("99999999T", &v), -ERANGE);
    CU_ASSERT_EQUAL(psize("16777216T", &v), -ERANGE); /* exactly 2^64 */
    CU_ASSERT_EQUAL(psize("99999999999999999999", &v), -ERANGE);
    CU_ASSERT_EQUAL(v, 0xDEADBEEF);
}

/* The contract in core.h: those forms, "-EINVAL on anything else, -ERANGE on
 * overflow".  These cases fail against the strtod-based size.c of the first
 * commit (see the report): exponents and hex are read as numbers, and plain
 * byte counts above 2^53 are rounded. */
static void test_parse_size_strict(void) {
    uint64_t v;

    CU_ASSERT_EQUAL(psize("1e3", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("1e3K", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("0x10", &v), -EINVAL);
    CU_ASSERT_EQUAL(psize("9007199254740993", &v), 0);
    CU_ASSERT_EQUAL(v, 9007199254740993ull);
    CU_ASSERT_EQUAL(psize("18446744073709551615", &v), 0);
    CU_ASSERT_EQUAL(v, UINT64_MAX);
    CU_ASSERT_EQUAL(psize("18446744073709551616", &v), -ERANGE);
}

/* ---- hoff_stats_format_json ------------------------------------------------ */

static const char *const stat_names[] = {
#define X_(name, desc) #name,
    HOFF_STATS_FIELDS(X_)
#undef X_
};
#define NSTATS (sizeof stat_names / sizeof stat_names[0])

static void fill_stats(struct hoff_stats *st) {
    uint64_t k = 0;

    memset(st, 0, sizeof *st);
    st->version = HOFF_STATS_VERSION;
    st->size = sizeof *st;
#define X_(name, desc) st->name = (k++ == 0) ? UINT64_MAX : k * 1000003;
    HOFF_STATS_FIELDS(X_)
#undef X_
}

/* A strict reader for the one shape we write: {"key":uint,...}.  Returns the
 * number of pairs, or -1; keys and values land in the arrays. */
static int read_json(const char *s, char keys[][64], uint64_t *vals, int max) {
    int n = 0;

    if (*s++ != '{')
        return -1;
    if (*s == '}')
        return s[1] ? -1 : 0;
    for (;;) {
        const char *q;
        char *end;

        if (n == max || *s++ != '"')
            return -1;
        q = strchr(s, '"');
        if (!q || q == s || q - s >= 64)
            return -1;
        memcpy(keys[n], s, (size_t)(q - s));
        keys[n][q - s] = '\0';
        s = q + 1;
        if (*s++ != ':' || *s < '0' || *s > '9')
            return -1;
        if (*s == '0' && s[1] >= '0' && s[1] <= '9')
            return -1; /* JSON has no leading zeros */
        errno = 0;
        vals[n++] = strtoull(s, &end, 10);
        if (errno)
            return -1;
        s = end;
        if (*s == '}')
            return s[1] ? -1 : n;
        if (*s++ != ',')
            return -1;
    }
}

static void test_stats_json(void) {
    struct hoff_stats st;
    char buf[8192], keys[NSTATS + 2][64];
    uint64_t vals[NSTATS + 2];
    int len, n;
    size_t i;

    fill_stats(&st);
    len = hoff_stats_format_json(&st, buf, sizeof buf);
    CU_ASSERT(len > 0 && (size_t)len < sizeof buf);
    CU_ASSERT_EQUAL((size_t)len, strlen(buf));
    n = read_json(buf, keys, vals, (int)NSTATS + 2);
    CU_ASSERT_EQUAL_FATAL(n, (int)NSTATS + 1);
    CU_ASSERT_STRING_EQUAL(keys[0], "version");
    CU_ASSERT_EQUAL(vals[0], HOFF_STATS_VERSION);
    for (i = 0; i < NSTATS; i++) {
        CU_ASSERT_STRING_EQUAL(keys[i + 1], stat_names[i]);
        CU_ASSERT_EQUAL(vals[i + 1], i == 0 ? UINT64_MAX : (i + 1) * 1000003);
    }
    /* zeros */
    memset(&st, 0, sizeof st);
    st.version = HOFF_STATS_VERSION;
    len = hoff_stats_format_json(&st, buf, sizeof buf);
    CU_ASSERT_EQUAL(read_json(buf, keys, vals, (int)NSTATS + 2), (int)NSTATS + 1);
    CU_ASSERT(strncmp(buf, "{\"version\":4,\"budget_bytes\":0,", 30) == 0);
}

static void test_stats_json_truncation(void) {
    struct hoff_stats st;
    char full[8192], buf[8192];
    int len;
    size_t n;

    fill_stats(&st);
    len = hoff_stats_format_json(&st, full, sizeof full);
    CU_ASSERT_FATAL(len > 0);
    CU_ASSERT_EQUAL(hoff_stats_format_json(&st, NULL, 0), len); /* a size query */
    for (n = 1; n <= (size_t)len + 1; n++) {
        memset(buf, '#', sizeof buf);
        CU_ASSERT_EQUAL(hoff_stats_format_json(&st, buf, n), len);
        CU_ASSERT_EQUAL(buf[n - 1], '\0');
        CU_ASSERT_EQUAL(strlen(buf), n - 1);
        CU_ASSERT_EQUAL(strncmp(buf, full, n - 1), 0);
        CU_ASSERT_EQUAL(buf[n], '#'); /* nothing written past len */
    }
    memset(buf, '#', sizeof buf);
    CU_ASSERT_EQUAL(hoff_stats_format_json(&st, buf, 0), len);
    CU_ASSERT_EQUAL(buf[0], '#');

    CU_ASSERT_EQUAL(hoff_stats_format_json(NULL, buf, sizeof buf), -EINVAL);
    CU_ASSERT_EQUAL(hoff_stats_format_json(&st, NULL, 10), -EINVAL);
    st.version = HOFF_STATS_VERSION + 1;
    CU_ASSERT_EQUAL(hoff_stats_format_json(&st, buf, sizeof buf), -EINVAL);
    CU_ASSERT(strstr(hoff_last_error(), "version") != NULL);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"defaults", test_defaults},
        {"defaults_documented", test_defaults_documented},
        {"table", test_table},
        {"roundtrip", test_roundtrip},
        {"live", test_live},
        {"check", test_check},
        {"set_fields", test_set_fields},
        {"parse_size", test_parse_size},
        {"parse_bool", test_parse_bool},
        {"parse_int", test_parse_int},
        {"parse_uint32", test_parse_uint32},
        {"parse_string", test_parse_string},
        {"parse_enum", test_parse_enum},
        {"parse_double", test_parse_double},
        {"parse_duration", test_parse_duration},
        {"messages", test_messages},
        {"unknown", test_unknown},
        {"failed_set_unchanged", test_failed_set_unchanged},
        {"get_errors", test_get_errors},
        {"env", test_env},
        {"env_layers_on_struct", test_env_layers_on_struct},
        {"env_unknown", test_env_unknown},
        {"env_bad_value", test_env_bad_value},
        {"env_reserved", test_env_reserved},
        {"env_planner_trace", test_env_planner_trace},
        {"env_stats_numa_spill", test_env_stats_numa_spill},
        {"validate", test_validate},
        {"planners", test_planners},
        {"parse_size_edges", test_parse_size_edges},
        {"parse_size_strict", test_parse_size_strict},
        {"stats_json", test_stats_json},
        {"stats_json_truncation", test_stats_json_truncation},
        {NULL, NULL},
    };

    return hoff_test_run("options", tests);
}
