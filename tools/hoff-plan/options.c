/* options.c — hoff-plan's one option table: every flag of every command, its value's form and range, and the
 * parser each command calls with the flags it takes; the TRACE operand and the budget.
 * Threading: single-threaded (getopt's globals). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/options.h"
#include "hoff-plan.h"

enum kind { K_BOOL, K_CLEAR, K_STR, K_U64, K_U32, K_DOUBLE, K_SIZE, K_BUDGET, K_ONOFF };

/* One flag: its long name, its value and where it goes in struct hp_args.
 * The ranges of the number flags are doc/man/hoff-plan.1's. */
struct flag {
    const char *name;
    char kind;
    char short_name; /* 0: long only */
    size_t off;      /* offsetof(struct hp_args, ...) */
    uint64_t umin, umax;
    double dmin, dmax;
};

#define OFF(field) offsetof(struct hp_args, field)
#define U(min, max) (uint64_t)(min), (uint64_t)(max), 0, 0
#define D(min, max) 0, 0, (min), (max)
#define NONE 0, 0, 0, 0

static const struct flag flags[HP_NFLAGS] = {
    [HP_BUDGET] = {"budget", K_BUDGET, 0, OFF(budget), NONE},
    [HP_HOST_CAP] = {"host-cap", K_SIZE, 0, OFF(host_cap), NONE},
    [HP_SPILL_DIR] = {"spill-dir", K_STR, 0, OFF(spill_dir), NONE},
    [HP_BANDWIDTH] = {"bandwidth", K_DOUBLE, 0, OFF(bandwidth), D(HOFF__GBPS_MIN, HOFF__GBPS_MAX)},
    [HP_PLANNER] = {"planner", K_STR, 0, OFF(planner), NONE},
    [HP_GROUPS] = {"groups", K_ONOFF, 0, OFF(groups), NONE},
    [HP_STEPS] = {"steps", K_U64, 0, OFF(steps), U(2, 1000)},
    [HP_COMPUTE_SCALE] = {"compute-scale", K_DOUBLE, 0, OFF(compute_scale),
                          D(HOFF__COMPUTE_SCALE_MIN, HOFF__COMPUTE_SCALE_MAX)},
    /* --gpu-step MS: 1 ns to the longest step hoff models. */
    [HP_GPU_STEP] = {"gpu-step", K_DOUBLE, 0, OFF(gpu_step_ms), D(1e-6, HOFF__STEP_NS_MAX / 1e6)},
    [HP_NO_MEMORY_CHECK] = {"no-memory-check", K_BOOL, 0, OFF(no_mem_check), NONE},
    [HP_GUARD_AFTER] = {"guard-after-alloc", K_U64, 0, OFF(guard_after), U(0, 1000000)},
    [HP_GUARD_BEFORE] = {"guard-before-free", K_U64, 0, OFF(guard_before), U(0, 1000000)},
    [HP_ACTIONS_ONLY] = {"actions-only", K_BOOL, 0, OFF(actions_only), NONE},
    [HP_JSON] = {"json", K_BOOL, 0, OFF(json), NONE},
    [HP_OUTPUT] = {"output", K_STR, 'o', OFF(output), NONE},
    [HP_WIDTH] = {"width", K_U64, 0, OFF(width), U(400, 20000)},
    [HP_HEIGHT] = {"height", K_U64, 0, OFF(height), U(300, 20000)},
    [HP_PERFETTO] = {"perfetto", K_STR, 0, OFF(perfetto), NONE},
    [HP_MODEL] = {"model", K_STR, 0, OFF(model), NONE},
    [HP_HEADS] = {"heads", K_U32, 0, OFF(synth.heads), U(1, 1u << 16)},
    [HP_DTYPE] = {"dtype", K_STR, 0, OFF(dtype), NONE},
    [HP_ATTENTION] = {"attention", K_STR, 0, OFF(attention), NONE},
    [HP_VOCAB] = {"vocab", K_U64, 0, OFF(synth.vocab), U(1, 1u << 24)},
    [HP_LAYERS] = {"layers", K_U32, 0, OFF(synth.layers), U(1, 100000)},
    [HP_HIDDEN] = {"hidden", K_U64, 0, OFF(synth.hidden), U(1, 1u << 20)},
    [HP_SEQ] = {"seq", K_U64, 0, OFF(synth.seq), U(1, 1u << 24)},
    [HP_BATCH] = {"batch", K_U64, 0, OFF(synth.batch), U(1, 1u << 20)},
    [HP_ELEM_BYTES] = {"elem-bytes", K_U32, 0, OFF(synth.elem_bytes), U(1, 16)},
    [HP_TFLOPS] = {"tflops", K_DOUBLE, 0, OFF(synth.tflops), D(HOFF__SYNTH_TFLOPS_MIN, HOFF__SYNTH_TFLOPS_MAX)},
    [HP_MANAGED_MIN] = {"managed-min", K_SIZE, 0, OFF(synth.managed_min), NONE},
    [HP_NO_ACCESS] = {"no-access", K_CLEAR, 0, OFF(synth.access_marks), NONE},
    [HP_HBM_GBPS] = {"hbm-gbps", K_DOUBLE, 0, OFF(synth.hbm_gbps), D(0, HOFF__SYNTH_HBM_GBPS_MAX)},
    [HP_INPUT_READS] = {"input-reads", K_BOOL, 0, OFF(synth.input_reads), NONE},
    [HP_EVENTS] = {"events", K_U64, 0, OFF(events), U(16, 100000000)},
    [HP_SEED] = {"seed", K_U64, 0, OFF(seed), U(0, UINT64_MAX)},
    [HP_HELP] = {"help", K_BOOL, 'h', 0, NONE},
};

int hp_usage_error(const char *sub, const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "%s %s: ", hp_cmd, sub);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see '%s %s --help')\n", hp_cmd, sub);
    return EXIT_USAGE;
}

static int parse_u64(const char *sub, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "%s %s: %s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n", hp_cmd, sub, opt,
                min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* A number in [min, max].  Every number flag has a range: beyond it the
 * virtual clock could saturate (rates, scales) or the value is meaningless. */
static int parse_double(const char *sub, const char *opt, const char *s, double min, double max, double *out) {
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "%s %s: %s: expected a number from %g to %g, got '%s'\n", hp_cmd, sub, opt, min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_budget(const char *sub, const char *s, struct budget_arg *b) {
    size_t n = strlen(s);

    b->text = s;
    b->pct = -1;
    b->size = 0;
    if (n > 1 && s[n - 1] == '%') {
        char num[64], *end;
        double v;

        if (n >= sizeof num)
            goto bad;
        memcpy(num, s, n - 1);
        num[n - 1] = '\0';
        errno = 0;
        v = strtod(num, &end);
        if (errno || end == num || *end || !(v > 0) || v > 1000)
            goto bad;
        b->pct = v;
        return 0;
    }
    if (hoff__parse_size(s, &b->size) == 0)
        return 0;
bad:
    fprintf(stderr,
            "%s %s: --budget: expected a size (512M, 2G; 0 = no limit) or a percentage of the trace's "
            "offload peak (25%%, in (0, 1000]), got '%s'\n",
            hp_cmd, sub, s);
    return -1;
}

/* Store flag f's value arg into a.  0 or -1 (reported). */
static int take(const char *sub, int f, const char *arg, struct hp_args *a) {
    const struct flag *d = &flags[f];
    void *at = (char *)a + d->off;
    char opt[40];
    uint64_t v;

    snprintf(opt, sizeof opt, "--%s", d->name);
    switch (d->kind) {
    case K_BOOL: *(int *)at = 1; return 0;
    case K_CLEAR: *(int *)at = 0; return 0;
    case K_STR: *(const char **)at = arg; return 0;
    case K_U64: return parse_u64(sub, opt, arg, d->umin, d->umax, (uint64_t *)at);
    case K_U32:
        if (parse_u64(sub, opt, arg, d->umin, d->umax, &v))
            return -1;
        *(uint32_t *)at = (uint32_t)v;
        return 0;
    case K_DOUBLE: return parse_double(sub, opt, arg, d->dmin, d->dmax, (double *)at);
    case K_SIZE:
        if (hoff__parse_size(arg, (uint64_t *)at) == 0)
            return 0;
        fprintf(stderr, "%s %s: %s: expected a size such as 4096, 512M or 2G, got '%s'\n", hp_cmd, sub, opt, arg);
        return -1;
    case K_BUDGET: return parse_budget(sub, arg, (struct budget_arg *)at);
    case K_ONOFF:
        if (strcmp(arg, "on") == 0 || strcmp(arg, "off") == 0) {
            *(int *)at = arg[1] == 'n';
            return 0;
        }
        fprintf(stderr, "%s %s: %s: expected on or off, not '%s'\n", hp_cmd, sub, opt, arg);
        return -1;
    default: return -1;
    }
}

static void args_init(struct hp_args *a, const char *sub) {
    struct hoff_config defaults;

    hoff_config_init(&defaults);
    memset(a, 0, sizeof *a);
    a->sub = sub;
    a->bandwidth = defaults.sim_h2d_gbps; /* the sim's, both ways */
    a->planner = "timed";
    a->groups = 1;
    a->steps = 3;
    a->compute_scale = 1.0;
    a->guard_after = defaults.guard_after_alloc;
    a->guard_before = defaults.guard_before_free;
    a->width = 1200;
    a->height = 640;
    hoff__synth_defaults(&a->synth);
    a->seed = 1;
}

int hp_parse(const char *sub, int argc, char **argv, uint64_t accepted, void (*usage_fn)(FILE *), struct hp_args *a) {
    struct option longopts[HP_NFLAGS + 1];
    char shorts[8] = ":h";
    int i, n = 0, opt;

    args_init(a, sub);
    for (i = 0; i < HP_NFLAGS; i++) {
        if (!(accepted & (1ull << i)))
            continue;
        longopts[n].name = flags[i].name;
        longopts[n].has_arg = flags[i].kind == K_BOOL || flags[i].kind == K_CLEAR ? no_argument : required_argument;
        longopts[n].flag = NULL;
        longopts[n].val = flags[i].short_name ? flags[i].short_name : 256 + i;
        n++;
        if (flags[i].short_name && flags[i].short_name != 'h')
            snprintf(shorts + strlen(shorts), sizeof shorts - strlen(shorts), "%c:", flags[i].short_name);
    }
    memset(&longopts[n], 0, sizeof longopts[n]);
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        int f = -1;

        if (opt == 'h') {
            usage_fn(stdout);
            return HP_HELP_SHOWN;
        }
        if (opt >= 256)
            f = opt - 256;
        else
            for (i = 0; i < HP_NFLAGS && f < 0; i++)
                if (flags[i].short_name == opt && (accepted & (1ull << i)))
                    f = i;
        if (f < 0) {
            const char *what = argv[optind - 1];

            if (opt == ':')
                return hp_usage_error(sub, "option '%s' needs a value", what);
            return hp_usage_error(sub, "unknown option '%s'", what);
        }
        if (take(sub, f, optarg, a))
            return EXIT_USAGE;
        a->given |= 1ull << f;
    }
    return 0;
}

static int check_planner(const char *sub, const char *name) {
    if (hoff__planner_find(name))
        return 0;
    fprintf(stderr, "%s %s: --planner: unknown planner '%s'; the planners are:\n", hp_cmd, sub, name);
    hp_list_planners(stderr);
    return -1;
}

int hp_trace_operand(struct hp_args *a, int argc, char **argv, int need_budget, int planner) {
    if (optind >= argc)
        return hp_usage_error(a->sub, "no trace file given");
    if (optind + 1 < argc)
        return hp_usage_error(a->sub, "one trace file expected, got also '%s'", argv[optind + 1]);
    if (need_budget && !(a->given & HP_F(BUDGET)))
        return hp_usage_error(a->sub, "--budget is required");
    if (planner && check_planner(a->sub, a->planner))
        return EXIT_USAGE;
    a->trace_path = argv[optind];
    return 0;
}

int hp_resolve_budget(const char *sub, const struct budget_arg *b, uint64_t offload_peak, uint64_t *out) {
    if (b->pct < 0) {
        *out = b->size;
        return 0;
    }
    if (offload_peak == 0) {
        fprintf(stderr,
                "%s %s: --budget %s: the trace has no offload candidates (its offload peak is 0); give a size "
                "instead\n",
                hp_cmd, sub, b->text);
        return -1;
    }
    *out = (uint64_t)((double)offload_peak * b->pct / 100.0);
    if (*out == 0)
        *out = 1;
    return 0;
}

uint64_t hp_gpu_step_ns(double ms) {
    return ms > 0 ? (uint64_t)(ms * 1e6 + 0.5) : 0;
}

void hp_drive_opts(const struct hp_args *a, struct hoff__drive_opts *o) {
    memset(o, 0, sizeof *o);
    o->compute_scale = a->compute_scale;
    o->gpu_step_ns = hp_gpu_step_ns(a->gpu_step_ms);
}

int hp_check_scale(const char *sub, const struct hoff__trace *t, double compute_scale, double gpu_step_ms) {
    struct hoff__drive_opts o;
    char why[256];

    memset(&o, 0, sizeof o);
    o.compute_scale = compute_scale;
    o.gpu_step_ns = hp_gpu_step_ns(gpu_step_ms);
    if (hoff__drive_check(t, &o, why, sizeof why) == 0)
        return 0;
    if (gpu_step_ms > 0)
        fprintf(stderr, "%s %s: --gpu-step %g: %s\n", hp_cmd, sub, gpu_step_ms, why);
    else
        fprintf(stderr, "%s %s: --compute-scale %g: %s; expected a scale that keeps the step within it\n", hp_cmd, sub,
                compute_scale, why);
    return EXIT_USAGE;
}
