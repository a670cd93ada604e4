/* test_rank.c — a process in a multi-process job (core/rank.h): RANK / WORLD_SIZE / LOCAL_RANK / job id from the
 * launcher's environment (torchrun's names), bad values refused with the variable named, %r / %p / %% in file names,
 * a name every rank would write refused; and what a context makes of it: the device from LOCAL_RANK, a per-rank spill
 * directory under HOFF_SPILL_DIR, rank / world size / local rank / device in the statistics and the job id in the
 * statistics segment.  Threading: single-threaded (it sets environment variables). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/context.h"
#include "core/core.h"
#include "core/publish.h"
#include "core/rank.h"
#include "hoff.h"
#include "testutil.h"

static const char *const vars[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK", "TORCHELASTIC_RUN_ID",
                                   "MASTER_ADDR", "MASTER_PORT", NULL};

static void clear_env(void) {
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
}

static void torchrun_env(int rank, int world, int local, const char *run) {
    char b[16];

    clear_env();
    snprintf(b, sizeof b, "%d", rank);
    setenv("RANK", b, 1);
    snprintf(b, sizeof b, "%d", world);
    setenv("WORLD_SIZE", b, 1);
    snprintf(b, sizeof b, "%d", local);
    setenv("LOCAL_RANK", b, 1);
    setenv("MASTER_ADDR", "10.0.0.7", 1);
    setenv("MASTER_PORT", "29500", 1);
    if (run)
        setenv("TORCHELASTIC_RUN_ID", run, 1);
}

static void test_env(void) {
    struct hoff__rank r;
    char err[256];

    clear_env();
    CU_ASSERT_EQUAL(hoff__rank_from_env(&r, err, sizeof err), 0);
    CU_ASSERT_EQUAL(r.rank, 0);
    CU_ASSERT_EQUAL(r.world_size, 1);
    CU_ASSERT_EQUAL(r.local_rank, -1);
    CU_ASSERT_STRING_EQUAL(r.job, "");

    torchrun_env(5, 8, 1, "job-42");
    CU_ASSERT_EQUAL(hoff__rank_from_env(&r, err, sizeof err), 0);
    CU_ASSERT_EQUAL(r.rank, 5);
    CU_ASSERT_EQUAL(r.world_size, 8);
    CU_ASSERT_EQUAL(r.local_rank, 1);
    CU_ASSERT_STRING_EQUAL(r.job, "job-42");

    /* torchrun's default --rdzv-id is the word "none": the master names the job. */
    torchrun_env(0, 2, 0, "none");
    CU_ASSERT_EQUAL(hoff__rank_from_env(&r, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(r.job, "10.0.0.7:29500");

    torchrun_env(8, 8, 0, "j");
    CU_ASSERT_EQUAL(hoff__rank_from_env(&r, err, sizeof err), -EINVAL);
    CU_ASSERT(strstr(err, "RANK=8") && strstr(err, "WORLD_SIZE=8"));
    setenv("RANK", "two", 1);
    CU_ASSERT_EQUAL(hoff__rank_from_env(&r, err, sizeof err), -EINVAL);
    CU_ASSERT(strstr(err, "RANK=two") && strstr(err, "non-negative integer"));
    setenv("RANK", "1", 1);
    setenv("LOCAL_RANK", "-1", 1);
    CU_ASSERT_EQUAL(hoff__rank_from_env(&r, err, sizeof err), -EINVAL);
    CU_ASSERT(strstr(err, "LOCAL_RANK=-1") != NULL);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", "0", 1);
    CU_ASSERT_EQUAL(hoff__rank_from_env(&r, err, sizeof err), -EINVAL);
    clear_env();
}

static void test_expand(void) {
    struct hoff__rank r = {.rank = 3, .world_size = 4, .local_rank = 3};
    char out[64], err[256], want[64];

    CU_ASSERT_EQUAL(hoff__path_expand(out, sizeof out, "t.%r.txt", &r, "HOFF_TRACE", err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, "t.3.txt");
    snprintf(want, sizeof want, "t.%ld.100%%.%%x", (long)getpid());
    CU_ASSERT_EQUAL(hoff__path_expand(out, sizeof out, "t.%p.100%%.%x", &r, "HOFF_TRACE", err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(out, want);
    /* Four ranks, one name: refused, never one file the ranks overwrite. */
    CU_ASSERT_EQUAL(hoff__path_expand(out, sizeof out, "t.txt", &r, "HOFF_TRACE", err, sizeof err), -EEXIST);
    CU_ASSERT(strstr(err, "HOFF_TRACE=t.txt") && strstr(err, "4 ranks") && strstr(err, "%r"));
    CU_ASSERT_EQUAL(hoff__path_expand(out, sizeof out, "/dev/null", &r, "HOFF_TRACE", err, sizeof err), 0);
    CU_ASSERT_EQUAL(hoff__path_expand(out, sizeof out, "", &r, "HOFF_TRACE", err, sizeof err), 0);
    r.world_size = 1;
    CU_ASSERT_EQUAL(hoff__path_expand(out, sizeof out, "t.txt", &r, "HOFF_TRACE", err, sizeof err), 0);
    CU_ASSERT_EQUAL(hoff__path_expand(out, 8, "%r%r%r%r%r%r%r%r", &r, "HOFF_TRACE", err, sizeof err), -ENAMETOOLONG);
}

static hoff_ctx *make(const char *spill, const char *trace, int *rc) {
    struct hoff_config c;
    hoff_ctx *ctx = NULL;

    hoff_config_init(&c);
    c.backend = HOFF_BACKEND_SIM;
    c.sim_device_bytes = 1ull << 30;
    c.log_level = HOFF_LOG_OFF;
    snprintf(c.spill_dir, sizeof c.spill_dir, "%s", spill ? spill : "");
    snprintf(c.trace_path, sizeof c.trace_path, "%s", trace ? trace : "");
    *rc = hoff_init(&ctx, &c);
    return ctx;
}

static void test_context(void) {
    char dir[256], sub[300], segpath[300];
    struct hoff_stats st;
    struct stat sb;
    hoff_ctx *ctx;
    int rc;

    snprintf(dir, sizeof dir, "%s/hoff-rank.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);

    torchrun_env(6, 8, 2, "job-ctx");
    ctx = make(dir, "trace.%r.txt", &rc);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.rank, 6);
    CU_ASSERT_EQUAL(st.world_size, 8);
    CU_ASSERT_EQUAL(st.local_rank, 2);
    CU_ASSERT_EQUAL(st.device, 2); /* HOFF_DEVICE -1: LOCAL_RANK */
    CU_ASSERT_STRING_EQUAL(ctx->trace_path, "trace.6.txt");
    snprintf(sub, sizeof sub, "%s/rank.6", dir);
    CU_ASSERT_STRING_EQUAL(ctx->spill_dir, sub);
    CU_ASSERT(stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 077) == 0);
    if (ctx->pub) {
        CU_ASSERT_STRING_EQUAL(ctx->pub->seg->h.job, "job-ctx");
        snprintf(segpath, sizeof segpath, "%s", ctx->pub->name);
    }
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);

    /* A name all 8 ranks would write: hoff_init refuses it. */
    ctx = make(NULL, "trace.txt", &rc);
    CU_ASSERT_EQUAL(rc, -EEXIST);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT(strstr(hoff_last_error(), "HOFF_TRACE=trace.txt") != NULL);

    /* Something planted where the rank's directory goes is refused, not followed. */
    snprintf(sub, sizeof sub, "%s/rank.6", dir);
    CU_ASSERT_EQUAL(rmdir(sub), 0);
    CU_ASSERT_EQUAL(symlink("/tmp", sub), 0);
    ctx = make(dir, NULL, &rc);
    CU_ASSERT_EQUAL(rc, -EPERM);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT(strstr(hoff_last_error(), "rank.6") != NULL);
    CU_ASSERT_EQUAL(unlink(sub), 0);

    /* One process, no launcher: HOFF_SPILL_DIR as it is, device 0 on sim. */
    clear_env();
    ctx = make(dir, NULL, &rc);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(ctx->spill_dir, dir);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.rank, 0);
    CU_ASSERT_EQUAL(st.world_size, 1);
    CU_ASSERT_EQUAL(st.device, 0);
    if (ctx->pub)
        CU_ASSERT_STRING_EQUAL(ctx->pub->seg->h.job, "");
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);

    /* A bad RANK fails hoff_init with the variable named. */
    setenv("RANK", "x", 1);
    ctx = make(NULL, NULL, &rc);
    CU_ASSERT_EQUAL(rc, -EINVAL);
    CU_ASSERT(strstr(hoff_last_error(), "RANK=x") != NULL);
    clear_env();
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

/* HOFF_BUDGET_PCT: a percentage of the rank's own device. */
static void test_budget_pct(void) {
    struct hoff_config c;
    struct hoff_stats st;
    hoff_ctx *ctx = NULL;
    char err[256];

    clear_env();
    hoff_config_init(&c);
    c.backend = HOFF_BACKEND_SIM;
    c.sim_device_bytes = 1ull << 30;
    c.log_level = HOFF_LOG_OFF;
    c.budget_pct = 25;
    CU_ASSERT_EQUAL_FATAL(hoff_init(&ctx, &c), 0);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    CU_ASSERT_EQUAL(st.budget_bytes, 256ull << 20);
    CU_ASSERT_EQUAL(hoff_shutdown(ctx), 0);
    c.budget_bytes = 1 << 20; /* both: refused, with both named */
    CU_ASSERT_EQUAL(hoff_init(&ctx, &c), -EINVAL);
    CU_ASSERT(strstr(hoff_last_error(), "HOFF_BUDGET") && strstr(hoff_last_error(), "HOFF_BUDGET_PCT"));
    hoff_config_init(&c);
    CU_ASSERT_EQUAL(hoff_config_set(&c, "HOFF_BUDGET_PCT", "101", err, sizeof err), -EINVAL);
    CU_ASSERT(strstr(err, "HOFF_BUDGET_PCT") != NULL);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"env", test_env}, {"expand", test_expand}, {"context", test_context}, {"budget_pct", test_budget_pct},
        {NULL, NULL},
    };

    return hoff_test_run("rank", tests);
}
