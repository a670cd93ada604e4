/* spill.h — the work the NVMe tier's thread does for residency: write a block's host copy to the spill file
 * (then drop the host pages), or read it back.  Threading: run on hoff's tier thread, one command at a time. */
#ifndef HOFF_TIER_SPILL_H
#define HOFF_TIER_SPILL_H

#include "exec/issuer.h"

/* HOFF__CMD_RUN bodies; arg is the context, cmd->cookie the block.  0 or
 * -errno; on failure the bytes stay where they were (host copy, or spill). */
int hoff__spill_run(void *arg, const struct hoff__cmd *cmd);
int hoff__restore_run(void *arg, const struct hoff__cmd *cmd);

#endif
