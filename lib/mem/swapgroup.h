/* swapgroup.h — what the rest of hoff needs from manual swap groups (swapgroup.c, hoff_group(3)).
 * Threading: caller holds the context lock. */
#ifndef HOFF_SWAPGROUP_H
#define HOFF_SWAPGROUP_H

#include "mem/block.h"

struct hoff_ctx;

/* b is being freed: it leaves its manual group, if any. */
void hoff__group_leave(struct hoff_ctx *ctx, struct hoff__block *b);
/* The context is going away: abort and free every group. */
void hoff__groups_destroy_all(struct hoff_ctx *ctx);

#endif
