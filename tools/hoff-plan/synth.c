/* synth.c — hoff-plan synth: write a synthetic trace, one training step of a decoder-only transformer
 * (lib/trace/synth.c) or a random training-shaped trace for planner benchmarks.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "hoff-plan.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: hoff-plan synth [options] -o FILE\n"
            "Writes the trace of one training step of a synthetic decoder-only transformer\n"
            "(or, with --events, a random training-shaped trace for planner benchmarks).\n"
            "\n"
            "  --layers N          transformer layers (default 8)\n"
            "  --hidden H          hidden size (default 1024)\n"
            "  --seq S             sequence length (default 2048; <= 1024 saves the attention\n"
            "                      probabilities, longer ones model flash attention)\n"
            "  --batch B           micro-batch size (default 1)\n"
            "  --elem-bytes N      bytes per element (default 2, bf16)\n"
            "  --tflops T          compute rate for the event times, TFLOP/s (default 400)\n"
            "  --managed-min SIZE  tensors of at least SIZE are offload candidates (default 1M)\n"
            "  --no-access         no access marks (saved-tensor pack/unpack)\n"
            "  --events N          instead: a random training-shaped trace of about N events\n"
            "  --seed S            its seed (default 1)\n"
            "  -o, --output FILE   where to write the trace (required)\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 ok, 1 the file cannot be written, 2 bad usage.\n");
}

int hp_cmd_synth(int argc, char **argv) {
    const uint64_t accepted = HP_F(LAYERS) | HP_F(HIDDEN) | HP_F(SEQ) | HP_F(BATCH) | HP_F(ELEM_BYTES) |
                              HP_F(TFLOPS) | HP_F(MANAGED_MIN) | HP_F(NO_ACCESS) | HP_F(EVENTS) | HP_F(SEED) |
                              HP_F(OUTPUT) | HP_F(HELP);
    struct hp_args a;
    struct hoff__trace t;
    int rc;

    rc = hp_parse("synth", argc, argv, accepted, usage, &a);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    if (optind < argc)
        return hp_usage_error(a.sub, "unexpected argument '%s'", argv[optind]);
    if (!a.output)
        return hp_usage_error(a.sub, "-o FILE is required");
    hoff__trace_init(&t);
    rc = a.events ? hoff__synth_events(&t, (size_t)a.events, a.seed) : hoff__synth_transformer(&t, &a.synth);
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
