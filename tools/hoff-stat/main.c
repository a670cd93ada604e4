/* main.c — hoff-stat's entry: the options, the usage and the choice of list, watch (-p) or job (--job) mode.
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoff-stat.h"

const char *cmd = "hoff-stat";

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-stat [--json] [--clean]          list the hoff processes of this user\n"
               "       hoff-stat -p PID [-i SECONDS] [-c COUNT] [--once] [--json]\n"
               "                                             watch one, a line per interval\n"
               "       hoff-stat --job ID [-i SECONDS] [-c COUNT] [--once] [--json]\n"
               "                                             watch the ranks of a job on this node\n"
               "\n"
               "  -p, --pid PID         the process to watch (PID.K for its K-th context)\n"
               "      --job ID          every rank of job ID on this node (the list names the jobs:\n"
               "                        TORCHELASTIC_RUN_ID, else MASTER_ADDR:MASTER_PORT), a line\n"
               "                        each and the job's total per interval\n"
               "  -i, --interval SECS   seconds between lines (default 1; fractions allowed)\n"
               "  -c, --count N         stop after N lines (default: until the process ends)\n"
               "      --once            one sample (-c 1)\n"
               "      --json            one JSON object per sample (doc/hoff-stat.schema.json)\n"
               "      --clean           remove the segments of processes that are gone\n"
               "      --dir DIR         where the segments are (default " HOFF__PUB_DIR ")\n"
               "  -h, --help            this text\n"
               "      --version         the version\n"
               "\n"
               "Sizes are in bytes with K, M, G (powers of 1024); d2h, h2d, spill and restor are\n"
               "bytes moved per second; evict, late and fault count the events of the interval.\n"
               "floor: the plan's working-set floor and the phase it is in (fwd, bwd, loss, opt;\n"
               "its op in --json).\n"
               "A process publishes unless HOFF_STATS=0.\n"
               "Exit status: 0 ok; 1 the segments cannot be listed, or (-p) the segment is missing,\n"
               "refused or stale; 2 bad usage.  See hoff-stat(1).\n");
}

static int usage_error(const char *fmt, ...) HOFF__PRINTF(1, 2);
static int usage_error(const char *fmt, ...) {
    va_list ap;

    fprintf(stderr, "%s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see '%s --help')\n", cmd);
    return EXIT_USAGE;
}

static int valid_target(const char *s) {
    uid_t u;
    pid_t p;
    char name[128];

    if (!s || !*s || strlen(s) > 40)
        return 0;
    snprintf(name, sizeof name, HOFF__PUB_PREFIX "0.1.%s", s);
    return hoff__pub_parse_name(name, &u, NULL, &p);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {{"pid", required_argument, NULL, 'p'},
                                             {"interval", required_argument, NULL, 'i'},
                                             {"count", required_argument, NULL, 'c'},
                                             {"once", no_argument, NULL, 'o'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"clean", no_argument, NULL, 'C'},
                                             {"dir", required_argument, NULL, 'd'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {"job", required_argument, NULL, 'J'},
                                             {NULL, 0, NULL, 0}};
    struct opts o;
    struct sigaction sa;
    int opt, once = 0, have_count = 0, have_interval = 0;
    char *end;

    memset(&o, 0, sizeof o);
    o.dir = HOFF__PUB_DIR;
    o.interval = 1.0;
    o.count = -1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":p:i:c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            if (!valid_target(optarg))
                return usage_error("-p: expected a process id (or PID.K), got '%s'", optarg);
            o.target = optarg;
            break;
        case 'i':
            errno = 0;
            o.interval = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o.interval > 0) || o.interval > 86400)
                return usage_error("-i: expected seconds in (0, 86400], got '%s'", optarg);
            have_interval = 1;
            break;
        case 'c':
            errno = 0;
            o.count = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || o.count < 1)
                return usage_error("-c: expected a count >= 1, got '%s'", optarg);
            have_count = 1;
            break;
        case 'o': once = 1; break;
        case 'j': o.json = 1; break;
        case 'C': o.clean = 1; break;
        case 'J':
            if (!*optarg || strlen(optarg) >= sizeof((struct hoff__pub_header *)0)->job)
                return usage_error("--job: expected a job id of 1 to %zu characters (as 'hoff-stat' lists them), "
                                   "got '%s'",
                                   sizeof((struct hoff__pub_header *)0)->job - 1, optarg);
            o.job = optarg;
            break;
        case 'd': o.dir = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("hoff-stat %d.%d.%d\n", HOFF_VERSION_MAJOR, HOFF_VERSION_MINOR, HOFF_VERSION_PATCH); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (once && have_count && o.count != 1)
        return usage_error("--once and -c %ld contradict each other", o.count);
    if (once)
        o.count = 1;
    if (o.clean && (o.target || o.job))
        return usage_error("--clean works on the list, not with -p or --job");
    if (o.target && o.job)
        return usage_error("-p and --job contradict each other: watch one process or one job");
    if (!o.target && !o.job && (have_count || have_interval || once))
        return usage_error("-i, -c and --once need -p PID or --job ID (the list is printed once)");

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    return o.target ? cmd_watch(&o) : o.job ? cmd_job(&o) : cmd_list(&o);
}
