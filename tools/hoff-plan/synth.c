/* synth.c — hoff-plan synth: write a synthetic trace: one training step of a decoder-only transformer (the
 * coarse model, or --model gpt: bench/models/gpt.py as eager PyTorch allocates it; lib/trace/synth.c), or a
 * random training-shaped trace for planner benchmarks.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "hoff-plan.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-plan synth [options] -o FILE\n"
               "Writes the trace of one training step of a synthetic decoder-only transformer\n"
               "(or, with --events, a random training-shaped trace for planner benchmarks).\n"
               "\n"
               "  --model NAME        transformer (default: a coarse layer model) or gpt (a GPT step\n"
               "                      as eager PyTorch allocates it, op by op, with its LM head and\n"
               "                      AdamW: bench/models/gpt.py)\n"
               "  --layers N          transformer layers (default 8)\n"
               "  --hidden H          hidden size (default 1024)\n"
               "  --seq S             sequence length (default 2048)\n"
               "  --heads N           attention heads (default hidden / 64)\n"
               "  --batch B           micro-batch size (default 1)\n"
               "  --dtype T           bf16, fp16 (2 bytes) or fp32 (4); default bf16\n"
               "  --elem-bytes N      bytes per element instead of --dtype (default 2)\n"
               "  --attention A       math (scores and softmax saved), flash (log-sum-exp saved) or\n"
               "                      auto (default: math for --seq <= 1024, flash above)\n"
               "  --vocab V           gpt: the LM head's vocabulary (default 8192)\n"
               "  --tflops T          compute rate for the event times, TFLOP/s (default 400)\n"
               "  --managed-min SIZE  tensors of at least SIZE are offload candidates (default 1M)\n"
               "  --no-access         no access marks (saved-tensor pack/unpack)\n"
               "  --hbm-gbps G        transformer: an op takes at least the bytes it reads and\n"
               "                      writes at G GB/s (a roofline: elementwise ops memory-bound);\n"
               "                      default 0, FLOPs only\n"
               "  --input-reads       transformer: also mark each forward op's reads of its inputs,\n"
               "                      so that what recomputing an op needs is in the trace\n"
               "  --events N          instead: a random training-shaped trace of about N events\n"
               "  --seed S            its seed (default 1)\n"
               "  -o, --output FILE   where to write the trace (required)\n"
               "  -h, --help          this text\n"
               "\n"
               "Exit status: 0 ok, 1 the file cannot be written, 2 bad usage.\n");
}

/* One named choice of a flag: its index in names[], else a usage error listing them. */
static int choice(const char *sub, const char *flag, const char *v, const char *const *names, int n, int *out) {
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return 0;
        }
    fprintf(stderr, "%s %s: --%s: expected ", hp_cmd, sub, flag);
    for (i = 0; i < n; i++)
        fprintf(stderr, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
    fprintf(stderr, ", not '%s'\n", v);
    return -1;
}

/* --model, --dtype and --attention into the options; 0 (*gpt set) or EXIT_USAGE. */
static int named_choices(struct hp_args *a, int *gpt) {
    static const char *const models[] = {"transformer", "gpt"};
    static const char *const dtypes[] = {"bf16", "fp16", "fp32"};
    static const char *const attns[] = {"auto", "math", "flash"};
    static const uint32_t dtype_bytes[] = {2, 2, 4};
    int v;

    *gpt = 0;
    if (a->model && choice(a->sub, "model", a->model, models, 2, gpt))
        return EXIT_USAGE;
    if (a->dtype) {
        if (choice(a->sub, "dtype", a->dtype, dtypes, 3, &v))
            return EXIT_USAGE;
        if ((a->given & HP_F(ELEM_BYTES)) && a->synth.elem_bytes != dtype_bytes[v])
            return hp_usage_error(a->sub, "--dtype %s is %u bytes an element, --elem-bytes says %u", a->dtype,
                                  (unsigned)dtype_bytes[v], (unsigned)a->synth.elem_bytes);
        a->synth.elem_bytes = dtype_bytes[v];
    }
    if (a->attention) {
        if (choice(a->sub, "attention", a->attention, attns, 3, &v))
            return EXIT_USAGE;
        a->synth.attention = v == 1 ? HOFF__SYNTH_ATTN_MATH : v == 2 ? HOFF__SYNTH_ATTN_FLASH : HOFF__SYNTH_ATTN_AUTO;
    }
    if (*gpt && (a->given & (HP_F(HBM_GBPS) | HP_F(INPUT_READS))))
        return hp_usage_error(a->sub, "--hbm-gbps and --input-reads apply to the transformer model, not --model gpt");
    if (!*gpt && (a->given & HP_F(VOCAB)))
        return hp_usage_error(a->sub, "--vocab applies to --model gpt (the transformer model has no LM head)");
    return 0;
}

int hp_cmd_synth(int argc, char **argv) {
    const uint64_t accepted = HP_F(MODEL) | HP_F(LAYERS) | HP_F(HIDDEN) | HP_F(SEQ) | HP_F(HEADS) | HP_F(BATCH) |
                              HP_F(DTYPE) | HP_F(ELEM_BYTES) | HP_F(ATTENTION) | HP_F(VOCAB) | HP_F(TFLOPS) |
                              HP_F(MANAGED_MIN) | HP_F(NO_ACCESS) | HP_F(HBM_GBPS) | HP_F(INPUT_READS) | HP_F(EVENTS) |
                              HP_F(SEED) | HP_F(OUTPUT) | HP_F(HELP);
    struct hp_args a;
    struct hoff__trace t;
    int rc, gpt;

    rc = hp_parse("synth", argc, argv, accepted, usage, &a);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    if (optind < argc)
        return hp_usage_error(a.sub, "unexpected argument '%s'", argv[optind]);
    if (!a.output)
        return hp_usage_error(a.sub, "-o FILE is required");
    if ((rc = named_choices(&a, &gpt)) != 0)
        return rc;
    hoff__trace_init(&t);
    rc = a.events ? hoff__synth_events(&t, (size_t)a.events, a.seed)
         : gpt    ? hoff__synth_gpt(&t, &a.synth)
                  : hoff__synth_transformer(&t, &a.synth);
    if (rc) {
        fprintf(stderr, "%s synth: %s\n", hp_cmd, hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        hoff__trace_destroy(&t);
        return rc == -EINVAL || rc == -ERANGE ? EXIT_USAGE : EXIT_FAIL;
    }
    rc = hoff__trace_save(&t, a.output);
    if (rc) {
        fprintf(stderr, "%s synth: %s\n", hp_cmd, hoff_last_error());
        hoff__trace_destroy(&t);
        return EXIT_FAIL;
    }
    hoff__trace_destroy(&t);
    return 0;
}
