/* line.c — one sample of a watched process as hoff-stat prints it: the columns and their header (repeated
 * every screenful), a line of figures and rates, or a JSON object.  Threading: single-threaded. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hoff-stat.h"

int rows_per_header(void) {
    struct winsize ws;
    const char *l = getenv("LINES");
    int rows = 24;

    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
        rows = ws.ws_row;
    else if (l && atoi(l) > 0)
        rows = atoi(l);
    return rows > 4 ? rows - 2 : 2;
}

/* The columns of a line: group, name, width. */
struct col {
    const char *group, *name;
    int width;
};

static const struct col cols[] = {
    {"plan", "state", -8},         {"plan", "steps", 5},         {"plan", "step", 6},
    {"floor", "bytes", 6},         {"floor", "phase", 5},        {"offload bytes", "budget", 6},
    {"offload bytes", "resid", 6}, {"offload bytes", "peak", 6}, {"offload bytes", "host", 6},
    {"offload bytes", "nvme", 6},  {"offload bytes", "cap%", 4}, {"bytes/s", "d2h", 6},
    {"bytes/s", "h2d", 6},         {"bytes/s", "spill", 6},      {"bytes/s", "restor", 6},
    {"interval", "evict", 5},      {"interval", "late", 5},      {"interval", "fault", 5},
    {"pools", "hit%", 5},          {"pools", "mapped", 6},
};
#define NCOLS ((int)(sizeof cols / sizeof cols[0]))

static int col_w(int i) {
    return cols[i].width < 0 ? -cols[i].width : cols[i].width;
}

/* "--group-----" over each run of columns of one group, then the names; with lead (--job), a first column. */
void print_header(const char *lead) {
    char line[512];
    size_t pos = 0;
    int i, j;

    if (lead)
        pos = (size_t)snprintf(line, sizeof line, "%-6s ", "");

    for (i = 0; i < NCOLS; i = j) {
        int w = 0, k;

        for (j = i; j < NCOLS && strcmp(cols[j].group, cols[i].group) == 0; j++)
            w += col_w(j) + (j > i);
        k = snprintf(line + pos, sizeof line - pos, "%s-%s", i ? " " : "", cols[i].group);
        pos += (size_t)k;
        for (k = (int)strlen(cols[i].group) + 1; k < w && pos + 1 < sizeof line; k++)
            line[pos++] = '-';
        line[pos] = '\0';
    }
    puts(line);
    if (lead)
        printf("%-6s ", lead);
    for (i = 0; i < NCOLS; i++)
        printf("%s%*s", i ? " " : "", cols[i].width, cols[i].name);
    putchar('\n');
}

static void print_row(char v[][16]) {
    int i;

    for (i = 0; i < NCOLS; i++)
        printf("%s%*s", i ? " " : "", cols[i].width, v[i]);
    putchar('\n');
}

/* Per second over the publish times (the counters are as of them). */
static double rate(uint64_t now, uint64_t then, double secs) {
    return secs > 0 && now >= then ? (double)(now - then) / secs : 0.0;
}

void print_line(const struct sample *s, const struct sample *prev, const char *lead, const char *state) {
    const struct hoff_stats *a = &s->st, *b = prev ? &prev->st : NULL;
    struct hoff_stats zero;
    uint64_t from_ns = prev ? prev->update_ns : s->h.start_ns;
    double secs = s->update_ns > from_ns ? (double)(s->update_ns - from_ns) / 1e9 : 0.0;
    uint64_t lookups;
    char v[NCOLS][16];
    int i = 0;

    if (!b) {
        memset(&zero, 0, sizeof zero);
        b = &zero;
    }
    lookups = a->cache_hits + a->cache_misses;
#define V(...) snprintf(v[i++], sizeof v[0], __VA_ARGS__)
    if (lead)
        printf("%-6s ", lead);
    V("%s", state ? state : PSTATE(a->plan_state));
    V("%" PRIu64, a->steps);
    V("%s", a->last_step_ns ? HT(a->last_step_ns) : "-");
    V("%s", a->plans ? HS(a->plan_floor_bytes) : "-"); /* the plan's working-set floor and its phase */
    V("%s", a->plans ? floor_phase_word(a->plan_floor_phase) : "-");
    V("%s", a->budget_bytes ? HS(a->budget_bytes) : "none");
    V("%s", HS(a->resident_bytes));
    V("%s", HS(a->peak_resident_bytes));
    V("%s", HS(a->host_bytes));
    V("%s", HS(a->nvme_bytes));
    if (a->host_cap_bytes)
        V("%.0f", 100.0 * (double)a->host_bytes / (double)a->host_cap_bytes);
    else
        V("-");
    V("%s", HS((uint64_t)rate(a->bytes_evicted, b->bytes_evicted, secs)));
    V("%s", HS((uint64_t)rate(a->bytes_prefetched, b->bytes_prefetched, secs)));
    V("%s", HS((uint64_t)rate(a->bytes_spilled, b->bytes_spilled, secs)));
    V("%s", HS((uint64_t)rate(a->bytes_restored, b->bytes_restored, secs)));
    V("%s", HC((double)(a->evictions - b->evictions)));
    V("%s", HC((double)(a->late_prefetches - b->late_prefetches)));
    V("%s", HC((double)(a->faults - b->faults)));
    if (lookups)
        V("%.1f", 100.0 * (double)a->cache_hits / (double)lookups);
    else
        V("-");
    V("%s", HS(a->device_pool_bytes + a->managed_pool_bytes));
#undef V
    print_row(v);
}

void print_json(const char *name, const struct sample *s, const struct sample *prev, int alive) {
    const struct hoff_stats *a = &s->st, *b = prev ? &prev->st : NULL;
    struct hoff_stats zero;
    uint64_t from_ns = prev ? prev->update_ns : s->h.start_ns;
    double secs = s->update_ns > from_ns ? (double)(s->update_ns - from_ns) / 1e9 : 0.0;
    uint64_t lookups = a->cache_hits + a->cache_misses;
    char comm[64], be[32], pl[32], *js;
    int n;

    if (!b) {
        memset(&zero, 0, sizeof zero);
        b = &zero;
    }
    proc_comm(s->h.pid_ns == hoff__pub_self_ns() ? (pid_t)s->h.pid : 0, &s->h, comm, sizeof comm);
    clean_name(be, sizeof be, s->h.backend, sizeof s->h.backend);
    clean_name(pl, sizeof pl, s->h.planner, sizeof s->h.planner);
    printf("{\"time\":%.6f,\"segment\":", now_s());
    json_str(stdout, name);
    printf(",\"pid\":%d,\"pid_namespace\":%" PRIu64 ",\"uid\":%u,\"command\":", (int)s->h.pid, s->h.pid_ns,
           (unsigned)s->h.uid);
    json_str(stdout, comm);
    printf(",\"backend\":");
    json_str(stdout, be);
    printf(",\"planner\":");
    json_str(stdout, pl);
    printf(",\"state\":\"%s\",\"alive\":%s,\"started\":%.6f,\"updated\":%.6f,\"updates\":%" PRIu64
           ",\"interval_s\":%.6f",
           PSTATE(a->plan_state), ALIVE_JSON(alive), (double)s->h.start_ns / 1e9, (double)s->update_ns / 1e9,
           s->updates, secs);
    printf(",\"rates\":{\"bytes_evicted_per_s\":%.1f,\"bytes_prefetched_per_s\":%.1f,\"bytes_spilled_per_s\":%.1f"
           ",\"bytes_restored_per_s\":%.1f,\"evictions_per_s\":%.3f,\"prefetches_per_s\":%.3f,\"allocs_per_s\":%.3f"
           ",\"frees_per_s\":%.3f,\"steps_per_s\":%.3f}",
           rate(a->bytes_evicted, b->bytes_evicted, secs), rate(a->bytes_prefetched, b->bytes_prefetched, secs),
           rate(a->bytes_spilled, b->bytes_spilled, secs), rate(a->bytes_restored, b->bytes_restored, secs),
           rate(a->evictions, b->evictions, secs), rate(a->prefetches, b->prefetches, secs),
           rate(a->allocs, b->allocs, secs), rate(a->frees, b->frees, secs), rate(a->steps, b->steps, secs));
    printf(",\"interval\":{\"steps\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64
           ",\"late_prefetches\":%" PRIu64 ",\"faults\":%" PRIu64 ",\"divergent_steps\":%" PRIu64 "}",
           a->steps - b->steps, a->evictions - b->evictions, a->prefetches - b->prefetches,
           a->late_prefetches - b->late_prefetches, a->faults - b->faults, a->divergent_steps - b->divergent_steps);
    if (lookups)
        printf(",\"cache_hit_rate\":%.6f", (double)a->cache_hits / (double)lookups);
    else
        printf(",\"cache_hit_rate\":null");
    if (a->host_cap_bytes)
        printf(",\"host_cap_use\":%.6f", (double)a->host_bytes / (double)a->host_cap_bytes);
    else
        printf(",\"host_cap_use\":null");
    print_floor_json(stdout, a, s->floor_op);
    n = hoff_stats_format_json(a, NULL, 0);
    js = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (js && hoff_stats_format_json(a, js, (size_t)n + 1) == n)
        printf(",\"stats\":%s}\n", js);
    else
        printf(",\"stats\":null}\n");
    free(js);
}
