/* testsim.c — the sim helpers of testutil.h: the configuration and context a suite on the sim starts from, its
 * statistics, a spill directory removed at exit.  Its own object in libtestutil, so that only the programs that
 * use hoff pull it in.
 * Threading: main thread only (hoff_test_stats: any thread the context allows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

struct hoff_config hoff_test_sim_config(uint64_t device_bytes) {
    struct hoff_config cfg;

    hoff_config_init(&cfg);
    cfg.backend = HOFF_BACKEND_SIM;
    if (device_bytes)
        cfg.sim_device_bytes = device_bytes;
    cfg.oversub_margin_bytes = 0;
    cfg.log_level = HOFF_LOG_ERROR;
    return cfg;
}

struct hoff_config hoff_test_replay_config(uint64_t device_bytes, uint64_t budget_bytes) {
    struct hoff_config cfg = hoff_test_sim_config(device_bytes);

    cfg.plan_thread = 0;
    cfg.budget_bytes = budget_bytes;
    return cfg;
}

hoff_ctx *hoff_test_open(const struct hoff_config *cfg) {
    hoff_ctx *ctx = NULL;
    int rc = hoff_init(&ctx, cfg);

    if (rc)
        fprintf(stderr, "\n  hoff_init: %s (%d)\n", hoff_last_error(), rc);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return ctx;
}

hoff_ctx *hoff_test_open_sim(uint64_t device_bytes) {
    struct hoff_config cfg = hoff_test_sim_config(device_bytes);

    return hoff_test_open(&cfg);
}

struct hoff_stats hoff_test_stats(hoff_ctx *ctx) {
    struct hoff_stats st;

    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL(hoff_stats_get(ctx, &st), 0);
    return st;
}

static char spill_dir[256];

static void spill_dir_remove(void) {
    if (spill_dir[0])
        rmdir(spill_dir);
}

const char *hoff_test_spill_dir(const char *tag) {
    const char *bases[] = {getenv("TMPDIR"), "/var/tmp", ".", "/tmp"};
    size_t i;

    for (i = 0; !spill_dir[0] && i < sizeof bases / sizeof bases[0]; i++) {
        if (!bases[i] || !*bases[i])
            continue;
        snprintf(spill_dir, sizeof spill_dir, "%.200s/hoff-%.32s-XXXXXX", bases[i], tag);
        if (mkdtemp(spill_dir))
            atexit(spill_dir_remove);
        else
            spill_dir[0] = 0;
    }
    if (!spill_dir[0]) {
        fprintf(stderr, "hoff_test_spill_dir: no temporary directory could be made (TMPDIR, /var/tmp, ., /tmp)\n");
        exit(99);
    }
    return spill_dir;
}
