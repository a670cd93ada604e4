/* main.c — hoff-plan's entry: the command table (HOFF_PLAN_COMMANDS, the one list of the commands), the top
 * usage and the dispatch.  Threading: single-threaded. */
#include "config.h"

#include <string.h>

#include "hoff-plan.h"

const char *const hp_cmd = "hoff-plan";

static const struct command {
    const char *name, *synopsis, *what;
    int (*run)(int argc, char **argv);
} commands[] = {
#define HP_ROW(name, synopsis, what) {#name, synopsis, what, hp_cmd_##name},
    HOFF_PLAN_COMMANDS(HP_ROW)
#undef HP_ROW
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    size_t i;

    fprintf(f, "usage: hoff-plan COMMAND [options]\n"
               "Works on hoff traces (one recorded training step) and the plans built from them.\n"
               "\n");
    for (i = 0; i < NCOMMANDS; i++) {
        char head[96];

        snprintf(head, sizeof head, "%s %s", commands[i].name, commands[i].synopsis);
        if (strlen(head) <= 35)
            fprintf(f, "  %-35s %s\n", head, commands[i].what);
        else
            fprintf(f, "  %s\n%38s%s\n", head, "", commands[i].what);
    }
    fprintf(f, "\n'hoff-plan COMMAND --help' describes a command's options; hoff-plan(1) has the rest.\n");
}

int main(int argc, char **argv) {
    size_t i;

    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("hoff-plan %d.%d.%d\n", HOFF_VERSION_MAJOR, HOFF_VERSION_MINOR, HOFF_VERSION_PATCH);
        return 0;
    }
    for (i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s' (", hp_cmd, argv[1]);
    for (i = 0; i < NCOMMANDS; i++)
        fprintf(stderr, "%s%s", i == 0 ? "" : i + 1 == NCOMMANDS ? " or " : ", ", commands[i].name);
    fprintf(stderr, "; see '%s --help')\n", hp_cmd);
    return EXIT_USAGE;
}
