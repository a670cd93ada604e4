/* lpbound.c — running bench/bound.py for the benchmarks (lpbound.h).  Threading: single-threaded. */
#include "config.h"

#include "lpbound.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoff.h"
#include "trace/trace.h"

void hoff_bench_lp_none(struct hoff_bench_lp *lp, const int *pct, int n, const char *why) {
    int i;

    for (i = 0; i < n; i++) {
        lp[i].pct = pct[i];
        lp[i].have = 0;
        lp[i].ns = 0;
        snprintf(lp[i].status, sizeof lp[i].status, "%s", why);
    }
}

int hoff_bench_lp_arg(struct bench_args *ba, struct hoff_bench_lp_run *run) {
    const char *opt = ba->argv[ba->i];
    int lp = strcmp(opt, "--lp") == 0;

    if (!lp && strcmp(opt, "--hoff-plan") != 0)
        return 0;
    if (ba->i + 1 >= ba->argc || !*ba->argv[ba->i + 1])
        bench_args_bad(ba, opt, ba->i + 1 < ba->argc ? ba->argv[ba->i + 1] : "",
                       lp ? "the command that runs bench/bound.py (e.g. \"python3 bench/bound.py\")"
                          : "the path of hoff-plan");
    if (lp)
        run->cmd = bench_args_value(ba);
    else
        run->hoff_plan = bench_args_value(ba);
    return 1;
}

/* A string field "key": "value" of one JSON line, into out ("" if absent). */
static void json_str(const char *line, const char *key, char *out, size_t len) {
    const char *p = strstr(line, key);
    size_t n = 0;

    out[0] = 0;
    if (!p || !(p = strchr(p + strlen(key), '"')))
        return;
    for (p++; *p && *p != '"' && n + 1 < len; p++)
        out[n++] = *p;
    out[n] = 0;
}

void hoff_bench_lp_file(const struct hoff_bench_lp_run *run, const char *path, const int *pct, int n,
                        struct hoff_bench_lp *lp) {
    char cmd[8192], line[8192], clock[64] = "";
    FILE *f;
    int i;

    hoff_bench_lp_none(lp, pct, n, run->cmd ? "bound.py gave no line" : "not run (--lp)");
    if (!run->cmd)
        return;
    if (run->gpu_step_ms > 0)
        snprintf(clock, sizeof clock, " --gpu-step %.6g", run->gpu_step_ms);
    snprintf(cmd, sizeof cmd, "%s --hoff-plan '%s' '%s' --budget %d,%d,%d%s --bandwidth %g --milp-max-gaps 0", run->cmd,
             run->hoff_plan, path, pct[0], n > 1 ? pct[1] : pct[0], n > 2 ? pct[2] : pct[0], clock, run->gbps);
    f = popen(cmd, "r");
    if (!f) {
        char why[96];

        snprintf(why, sizeof why, "cannot run bound.py: %s", strerror(errno));
        hoff_bench_lp_none(lp, pct, n, why);
        return;
    }
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"budget_pct\": "), *q = strstr(line, "\"lp_bound_ns\": ");
        double bp = p ? atof(p + 14) : -1;

        for (i = 0; i < n; i++) {
            if (bp != (double)pct[i])
                continue;
            json_str(line, "\"lp_status\":", lp[i].status, sizeof lp[i].status);
            if (q && strncmp(q + 15, "null", 4) != 0) {
                lp[i].have = 1;
                lp[i].ns = strtoull(q + 15, NULL, 10);
            }
        }
    }
    if (pclose(f) != 0)
        for (i = 0; i < n; i++)
            if (!lp[i].have && strcmp(lp[i].status, "bound.py gave no line") == 0)
                snprintf(lp[i].status, sizeof lp[i].status, "bound.py failed (run it by hand: %s)", run->cmd);
}

void hoff_bench_lp_trace(const struct hoff_bench_lp_run *run, const struct hoff__trace *t, const char *tag,
                         const int *pct, int n, struct hoff_bench_lp *lp) {
    const char *td = getenv("TMPDIR");
    char tmp[4096];
    int rc;

    if (!run->cmd) {
        hoff_bench_lp_none(lp, pct, n, "not run (--lp)");
        return;
    }
    snprintf(tmp, sizeof tmp, "%s/hoff-bench-lp.%d.%s.trace", td && *td ? td : "/tmp", (int)getpid(), tag);
    rc = hoff__trace_save(t, tmp);
    if (rc) {
        fprintf(stderr, "bench: cannot write %s for bound.py: %s\n", tmp, hoff_last_error());
        hoff_bench_lp_none(lp, pct, n, "not run: the trace could not be written");
        return;
    }
    hoff_bench_lp_file(run, tmp, pct, n, lp);
    unlink(tmp);
}
