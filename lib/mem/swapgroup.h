/* swapgroup.h — manual swap groups' mechanism (swapgroup.c, hoff_group(3)): what core/ctx_group.c (the public
 * hoff_group_* calls) and the rest of hoff call.  Each function says its failure with hoff__error, naming the public
 * call it serves.
 * Threading: caller holds the context lock. */
#ifndef HOFF_SWAPGROUP_H
#define HOFF_SWAPGROUP_H

#include "hoff.h"

#include "mem/block.h"

struct hoff__mem;
struct hoff_group;

#define HOFF__GROUP_NAME_MAX 63 /* characters of a group's name */

/* b is being freed: it leaves its manual group, if any. */
void hoff__group_leave(struct hoff__mem *mem, struct hoff__block *b);
/* The context is going away: abort and free every group. */
void hoff__groups_destroy_all(struct hoff__mem *mem);

/* The owner g was made for (the context: constant for g's life, readable without the lock). */
void *hoff__group_owner(const struct hoff_group *g);
/* A new empty group (name and flags already checked): 0 and *out, -EEXIST, -ENOMEM. */
int hoff__group_create(struct hoff__mem *mem, void *owner, const char *name, unsigned flags, struct hoff_group **out);
/* The group of ctx named name, or NULL (nothing said). */
struct hoff_group *hoff__group_find(struct hoff__mem *mem, const char *name);
/* hoff_group_add / hoff_group_remove on g: their return values; a block that joins g (0) is *added (the
 * caller takes it out of the plan). */
int hoff__group_add(struct hoff__mem *mem, struct hoff_group *g, const void *ptr, const struct hoff__block **added);
int hoff__group_remove(struct hoff__mem *mem, struct hoff_group *g, const void *ptr);
/* Launch g's eviction (op HOFF__CMD_EVICT) or prefetch (HOFF__CMD_PREFETCH) on s, all or nothing; what names the
 * public call in the messages. */
int hoff__group_launch(struct hoff__mem *mem, struct hoff_group *g, int op, hoff_stream s, const char *what);
/* hoff_group_wait (flags checked), hoff_group_release: their return values. */
int hoff__group_wait(struct hoff__mem *mem, struct hoff_group *g, hoff_stream stream, unsigned flags);
int hoff__group_release(struct hoff__mem *mem, struct hoff_group *g);
/* Empty g (hoff_group_clear); wait for its transfers and empty it (hoff_group_abort, counted). */
void hoff__group_clear(struct hoff__mem *mem, struct hoff_group *g);
void hoff__group_abort(struct hoff__mem *mem, struct hoff_group *g);
/* Abort g and free it (hoff_group_destroy). */
void hoff__group_destroy(struct hoff__mem *mem, struct hoff_group *g);
/* Snapshot g's state (hoff_group_info). */
void hoff__group_info(struct hoff__mem *mem, const struct hoff_group *g, struct hoff_group_info *out);

#endif
