/* options.h — the option table's keys (options.c), checking a whole struct hoff_config against the table, and
 * which options may change on a running context.
 * Threading: pure; reads only the caller's structs. */
#ifndef HOFF_OPTIONS_H
#define HOFF_OPTIONS_H

#include <stddef.h>

#include "hoff.h"

struct hoff__opt; /* core/optvalue.h */

/* The options, keyed like mimalloc's option table: option i is opts[i] in options.c, and
 * hoff_config_name(i) of the public API (so the order is part of that API: add at the end). */
enum hoff__option {
    HOFF__OPTION_BACKEND,
    HOFF__OPTION_DEVICE,
    HOFF__OPTION_BUDGET,
    HOFF__OPTION_HOST_CAP,
    HOFF__OPTION_MANAGED_MIN,
    HOFF__OPTION_OVERSUB_MARGIN,
    HOFF__OPTION_OVERSUBSCRIBE,
    HOFF__OPTION_LOG_LEVEL,
    HOFF__OPTION_SIM_DEVICE,
    HOFF__OPTION_SIM_H2D_GBPS,
    HOFF__OPTION_SIM_D2H_GBPS,
    HOFF__OPTION_SIM_LATENCY,
    HOFF__OPTION_SIM_FAULT_GBPS,
    HOFF__OPTION_SIM_FAULT_NS,
    HOFF__OPTION_SIM_PROTECT,
    HOFF__OPTION_QUEUE_DEPTH,
    HOFF__OPTION_PLANNER,
    HOFF__OPTION_GUARD_AFTER_ALLOC,
    HOFF__OPTION_GUARD_BEFORE_FREE,
    HOFF__OPTION_REPLAN_AFTER,
    HOFF__OPTION_BANDWIDTH_GBPS,
    HOFF__OPTION_TRACE,
    HOFF__OPTION_STATS,
    HOFF__OPTION_NUMA,
    HOFF__OPTION_SPILL_DIR,
    HOFF__OPTION_SPILL_CHUNK,
    HOFF__OPTION_IO_DEPTH,
    HOFF__OPTION_SIM_NVME_READ_GBPS,
    HOFF__OPTION_SIM_NVME_WRITE_GBPS,
    HOFF__OPTION_SIM_CALL_NS,
    HOFF__OPTION_GROUPS,
    HOFF__OPTION_PLAN_THREAD,
    HOFF__OPTION_PLAN_TIME,
    HOFF__OPTION_BUDGET_PCT,
    HOFF__OPTION_FREE_FENCE,
    HOFF__OPTION_OFFLOAD_GRADIENTS,
    HOFF__OPTION_COUNT
};

/* Entry i (an enum hoff__option) of the table, NULL out of range: for the
 * tests that walk it (struct hoff__opt is in core/optvalue.h). */
const struct hoff__opt *hoff__option_at(int i);

/* Every GB/s rate hoff takes (the HOFF_*_GBPS options, the tools' --bandwidth):
 * 1 MB/s to 100 TB/s.  Slower would take the virtual clock past the longest
 * step hoff models on ordinary blocks; faster is surely a typo. */
#define HOFF__GBPS_MIN 0.001
#define HOFF__GBPS_MAX 100000.0

/* 0 when cfg has the right version and size, every field is in its range and
 * the fields agree with each other; else -EINVAL with a message naming the
 * field, its variable and the accepted range (into err if non-NULL, and as
 * the thread's last error).  hoff_init calls it on every config. */
int hoff__config_validate(const struct hoff_config *cfg, char *err, size_t errlen);

/* Copy into *cur the options of next that may change on a running context (the
 * table's live column).  0, with *replan 1 when one whose change needs a new
 * plan (the replan column) changed, else 0; -EBUSY, *cur unchanged, when an
 * option that is not live differs, with *fixed (if non-NULL) naming the first
 * such one.
 * Sets no error message: the caller knows what was asked. */
int hoff__config_live_update(struct hoff_config *cur, const struct hoff_config *next, const char **fixed, int *replan);

/* The live options' names, "budget, host_cap, log_level and planner", for
 * messages; returns the length, like snprintf. */
int hoff__config_live_names(char *buf, size_t len);

#endif
