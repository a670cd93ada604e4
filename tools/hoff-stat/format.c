/* format.c — hoff-stat's short figures for the columns (bytes, counts, durations, uptimes in at most 5 or 6
 * characters), JSON strings and the wall clock.  Threading: pure functions (now_s reads the clock). */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "hoff-stat.h"
#include "trace/trace.h"

/* --- formatting ------------------------------------------------------------------ */

/* Bytes in at most 5 characters: 0, 1023, 1.5K, 116M, 1023M, 9.5G. */
const char *hsize(uint64_t v, char *buf, size_t len) {
    static const char units[] = "KMGTPE";
    double d = (double)v;
    int u = -1;

    if (v < 1024) {
        snprintf(buf, len, "%" PRIu64, v);
        return buf;
    }
    while (d >= 1024.0 && u < 5) {
        d /= 1024.0;
        u++;
    }
    if (d < 9.95)
        snprintf(buf, len, "%.1f%c", d, units[u]);
    else
        snprintf(buf, len, "%.0f%c", d, units[u]);
    return buf;
}

/* A count in at most 5 characters: 0, 9999, 12.3k, 456k, 1.2M. */
const char *hcount(double v, char *buf, size_t len) {
    if (v < 0)
        v = 0;
    if (v < 10 && v != floor(v))
        snprintf(buf, len, "%.1f", v);
    else if (v < 10000)
        snprintf(buf, len, "%.0f", v);
    else if (v < 1e5)
        snprintf(buf, len, "%.1fk", v / 1e3);
    else if (v < 1e6)
        snprintf(buf, len, "%.0fk", v / 1e3);
    else if (v < 1e7)
        snprintf(buf, len, "%.1fM", v / 1e6);
    else
        snprintf(buf, len, "%.0fM", v / 1e6);
    return buf;
}

/* A duration in at most 6 characters: 850ns, 12us, 18.9ms, 1.25s, 312s. */
const char *htime(uint64_t ns, char *buf, size_t len) {
    if (ns < 1000)
        snprintf(buf, len, "%" PRIu64 "ns", ns);
    else if (ns < 1000000)
        snprintf(buf, len, "%.0fus", (double)ns / 1e3);
    else if (ns < 100000000)
        snprintf(buf, len, "%.1fms", (double)ns / 1e6);
    else if (ns < 1000000000)
        snprintf(buf, len, "%.0fms", (double)ns / 1e6);
    else if (ns < 100000000000ull)
        snprintf(buf, len, "%.2fs", (double)ns / 1e9);
    else
        snprintf(buf, len, "%.0fs", (double)ns / 1e9);
    return buf;
}

const char *huptime(uint64_t s, char *buf, size_t len) {
    if (s < 60)
        snprintf(buf, len, "%" PRIu64 "s", s);
    else if (s < 3600)
        snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
    else
        snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s / 3600 % 24);
    return buf;
}

void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

double now_s(void) {
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- the working-set floor ---------------------------------------------------------- */

const char *floor_phase_word(uint64_t phase) {
    if (phase == FLOOR_PHASE_MIXED)
        return "mixed";
    if (phase == HOFF_PHASE_NONE)
        return "-";
    if (phase >= HOFF_PHASE_COUNT)
        return "?";
    return hoff__trace_phase_word((unsigned)phase);
}

const char *floor_text(const struct hoff_stats *st, char *buf, size_t len) {
    if (!st->plans)
        snprintf(buf, len, "-");
    else if (st->plan_floor_phase == HOFF_PHASE_NONE)
        snprintf(buf, len, "%s", HS(st->plan_floor_bytes));
    else
        snprintf(buf, len, "%s %s", HS(st->plan_floor_bytes), floor_phase_word(st->plan_floor_phase));
    return buf;
}

void print_floor_json(FILE *f, const struct hoff_stats *st, const char *floor_op) {
    char op[HOFF__PUB_FLOOR_OP];
    size_t i;

    for (i = 0; i + 1 < sizeof op && floor_op && floor_op[i]; i++)
        op[i] = floor_op[i] >= 0x20 && floor_op[i] < 0x7f ? floor_op[i] : '?';
    op[i] = '\0';
    fprintf(f,
            ",\"floor\":{\"bytes\":%" PRIu64 ",\"blocks\":%" PRIu64 ",\"phase\":\"%s\",\"op\":", st->plan_floor_bytes,
            st->plan_floor_blocks,
            hoff_phase_name(st->plan_floor_phase < HOFF_PHASE_COUNT ? (int)st->plan_floor_phase : -1));
    json_str(f, op);
    fputc('}', f);
}
