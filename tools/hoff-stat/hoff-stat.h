/* hoff-stat.h — what the files of hoff-stat share: the options, a probed segment of the list (struct entry) and a
 * sample of a watched one (struct sample), the short formatters and the functions each mode calls.
 * hoff-stat shows live statistics of the hoff processes of the calling user, read from their shared-memory
 * segments: a list of processes (the ranks of a multi-process job grouped under their job id, with a job total),
 * or one process, or all ranks of one job on this node, watched a line per interval in the manner of vmstat (or
 * as JSON).  Threading: single-threaded.  Never follows a link, reads only the user's own segments, never writes
 * to one. */
#ifndef HOFF_STAT_TOOL_H
#define HOFF_STAT_TOOL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/core.h"
#include "core/publish.h"
#include "hoff.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2

extern const char *cmd; /* "hoff-stat", for messages (main.c) */

struct opts {
    const char *dir;    /* where the segments are */
    const char *target; /* -p: "PID" or "PID.K" */
    const char *job;    /* --job: a job id */
    double interval;    /* seconds */
    long count;         /* samples; -1 = until the process ends */
    int json, clean;
};

/* --- reading the segments (segment.c) ------------------------------------------ */

/* The SIGBUS handler main installs: a read under read_guarded jumps back. */
void on_sigbus(int sig);
/* hoff__pub_read_floor, but a segment truncated after it was checked
 * (SIGBUS on the mapping) is an error (-EFAULT), not a crash.  floor_op:
 * HOFF__PUB_FLOOR_OP bytes, or NULL. */
int read_guarded(const struct hoff__pub_reader *r, struct hoff_stats *st, char *floor_op, uint64_t *un, uint64_t *up);
/* What a read_guarded error means, in words. */
const char *read_error(int rc);
/* A printable copy of a fixed-size name from the segment. */
void clean_name(char *dst, size_t len, const char *src, size_t srclen);
/* The process's name: /proc/PID/comm when readable, else the segment's. */
void proc_comm(pid_t pid, const struct hoff__pub_header *h, char *buf, size_t len);

struct entry {
    char name[256];
    pid_t pid;   /* in the writer's pid namespace */
    uint64_t ns; /* that namespace (from the name) */
    int ok;      /* opened and read */
    int alive;   /* HOFF__PUB_ALIVE, _GONE or _UNKNOWN */
    int rc;      /* refusal */
    char why[256];
    struct hoff__pub_header h;
    struct hoff_stats st;
    char floor_op[HOFF__PUB_FLOOR_OP]; /* the floor's op, NUL-terminated */
    uint64_t update_ns;
};

/* A liveness as JSON: null when it cannot be told (another pid namespace). */
#define ALIVE_JSON(a) ((a) == HOFF__PUB_ALIVE ? "true" : (a) == HOFF__PUB_GONE ? "false" : "null")

/* The job id of a readable segment ("" outside a job, or unreadable), printable. */
const char *entry_job(const struct entry *e, char *buf, size_t len);
/* Segments of this user in dir, each probed, sorted: processes outside a job
 * first (by pid), then each job's ranks together, by rank.  0 (*out to free)
 * or -1 (reported). */
int scan(const char *dir, struct entry **out, size_t *n);
/* Remove a stale segment (its process known to be gone).  0 or -errno. */
int remove_stale(const char *dir, const struct entry *e);

/* --- formatting (format.c) ------------------------------------------------------ */

const char *hsize(uint64_t v, char *buf, size_t len);   /* bytes in at most 5 characters */
const char *hcount(double v, char *buf, size_t len);    /* a count in at most 5 characters */
const char *htime(uint64_t ns, char *buf, size_t len);  /* a duration in at most 6 characters */
const char *huptime(uint64_t s, char *buf, size_t len); /* seconds as 12s, 3m05s, 2h10m, 4d03h */
void json_str(FILE *f, const char *s);                  /* a JSON string, quotes included */
/* stats.plan_floor_phase in the trace format's word: fwd, bwd, loss, opt; "-" for none (not said, or no plan),
 * "mixed" for FLOOR_PHASE_MIXED (a job's total over ranks whose floors are in different phases), "?" past the
 * enum. */
const char *floor_phase_word(uint64_t phase);
#define FLOOR_PHASE_MIXED UINT64_MAX
/* The floor as the list shows it: "8.0M fwd", "8.0M" (no phase said), "-" (no plan yet). */
const char *floor_text(const struct hoff_stats *st, char *buf, size_t len);
/* ',"floor":{"bytes":N,"blocks":N,"phase":"forward","op":"..."}' for a process's JSON: the op printable ASCII
 * (other bytes as '?'), "" before the first plan. */
void print_floor_json(FILE *f, const struct hoff_stats *st, const char *floor_op);
double now_s(void); /* the wall clock, seconds */

#define HS(x) hsize((x), (char[16]){0}, 16)
/* stats.plan_state read from a segment, named ("unknown" past the enum) */
#define PSTATE(x) hoff_plan_state_name((x) <= HOFF_PLAN_FALLBACK ? (int)(x) : -1)
#define HC(x) hcount((x), (char[16]){0}, 16)
#define HT(x) htime((x), (char[16]){0}, 16)

/* --- the list (list.c) ------------------------------------------------------------ */

int cmd_list(const struct opts *o);

/* --- a sample and its line (line.c) ------------------------------------------------- */

struct sample {
    struct hoff__pub_header h;
    struct hoff_stats st;
    char floor_op[HOFF__PUB_FLOOR_OP]; /* the floor's op, NUL-terminated */
    uint64_t update_ns, updates;
};

/* Lines between headers: the terminal's height (LINES when not a terminal). */
int rows_per_header(void);
/* The column groups and names; with lead (--job), a first column. */
void print_header(const char *lead);
/* s as a line (rates over the interval since prev, or since the start); state replaces the plan state. */
void print_line(const struct sample *s, const struct sample *prev, const char *lead, const char *state);
/* s as one JSON object of the sample schema (doc/hoff-stat.schema.json). */
void print_json(const char *name, const struct sample *s, const struct sample *prev, int alive);

/* --- watching (watch.c) ------------------------------------------------------------- */

int cmd_watch(const struct opts *o);
int cmd_job(const struct opts *o);

#endif
