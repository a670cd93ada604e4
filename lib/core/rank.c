/* rank.c — the job identity of this process (rank, world size, local rank, job id from the launcher's environment)
 * and the %r / %p expansion of output file names (rank.h).  Threading: reads the environment; otherwise pure. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rank.h"

/* A non-negative decimal integer below 2^31 from variable name: 0 and *out
 * (def when unset or empty), or -EINVAL with a message. */
static int env_int(const char *name, int def, int *out, char *err, size_t errlen) {
    const char *s = getenv(name);
    char *end;
    long v;

    *out = def;
    if (!s || !*s)
        return 0;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT_MAX || s[0] == '-' || s[0] == '+' || s[0] == ' ') {
        snprintf(err, errlen, "%s=%.64s: expected a non-negative integer (as torchrun sets it)", name, s);
        return -EINVAL;
    }
    *out = (int)v;
    return 0;
}

int hoff__rank_from_env(struct hoff__rank *r, char *err, size_t errlen) {
    const char *run, *addr, *port;
    int rc;

    memset(r, 0, sizeof *r);
    if ((rc = env_int("RANK", 0, &r->rank, err, errlen)) ||
        (rc = env_int("WORLD_SIZE", 1, &r->world_size, err, errlen)) ||
        (rc = env_int("LOCAL_RANK", -1, &r->local_rank, err, errlen)))
        return rc;
    if (r->world_size == 0) {
        snprintf(err, errlen, "WORLD_SIZE=0: a job has at least one rank");
        return -EINVAL;
    }
    if (r->rank >= r->world_size) {
        snprintf(err, errlen, "RANK=%d with WORLD_SIZE=%d: the rank must be below the world size", r->rank,
                 r->world_size);
        return -EINVAL;
    }
    run = getenv("TORCHELASTIC_RUN_ID");
    addr = getenv("MASTER_ADDR");
    port = getenv("MASTER_PORT");
    if (run && *run && strcmp(run, "none") != 0)
        snprintf(r->job, sizeof r->job, "%s", run);
    else if (addr && *addr && port && *port)
        snprintf(r->job, sizeof r->job, "%s:%s", addr, port);
    return 0;
}

int hoff__path_expand(char *out, size_t len, const char *pattern, const struct hoff__rank *r, const char *what,
                      char *err, size_t errlen) {
    size_t n = 0;
    int per_rank = 0;

    for (const char *s = pattern; *s; s++) {
        char num[24];
        const char *piece = num;
        size_t k;

        if (s[0] == '%' && s[1] == 'r') {
            snprintf(num, sizeof num, "%d", r->rank);
            per_rank = 1;
            s++;
        } else if (s[0] == '%' && s[1] == 'p') {
            snprintf(num, sizeof num, "%ld", (long)getpid());
            per_rank = 1;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            piece = "%";
            s++;
        } else {
            num[0] = *s;
            num[1] = '\0';
        }
        k = strlen(piece);
        if (n + k >= len) {
            snprintf(err, errlen, "%s=%.64s...: the expanded path is longer than %zu bytes", what, pattern, len - 1);
            return -ENAMETOOLONG;
        }
        memcpy(out + n, piece, k);
        n += k;
    }
    out[n] = '\0';
    /* A device (/dev/null, /dev/stdout) is not a file the ranks overwrite. */
    if (r->world_size > 1 && !per_rank && pattern[0] && strncmp(pattern, "/dev/", 5) != 0) {
        snprintf(err, errlen,
                 "%s=%.128s: the %d ranks of this job would all write that one file; put %%r (the "
                 "rank) or %%p (the process id) in its name, e.g. trace.%%r.txt",
                 what, pattern, r->world_size);
        return -EEXIST;
    }
    return 0;
}
