/* issuer.h — the issuing thread: a bounded FIFO of transfer commands executed on a thread of hoff's own,
 * so the training thread never blocks in a transfer call.  Threading: push/drain from any thread. */
#ifndef HOFF_ISSUER_H
#define HOFF_ISSUER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* At most this many extra fences per command (struct hoff__cmd.also). */
#define HOFF__CMD_ALSO 8

enum hoff__cmd_op {
    HOFF__CMD_EVICT = 1,
    HOFF__CMD_PREFETCH = 2,
    HOFF__CMD_DISCARD = 3,
    HOFF__CMD_RUN = 4, /* call cmd->run(cmd->run_arg, cmd): work that is not a backend op */
};

struct hoff__cmd {
    int op;    /* enum hoff__cmd_op */
    void *ptr; /* managed mapping */
    size_t size;
    hoff__event *after; /* recorded on the compute stream at push time (may be NULL) */
    /* More points the transfer waits for, on other streams that used the
     * range (the backend's transfer_wait, just before the transfer). */
    hoff__event *also[HOFF__CMD_ALSO];
    unsigned nalso;
    hoff__event *done;                                  /* recorded by the backend when the transfer completes */
    void *cookie;                                       /* the caller's (the block) */
    int node;                                           /* evict: host NUMA node to target, -1 = the backend's choice */
    int (*run)(void *arg, const struct hoff__cmd *cmd); /* HOFF__CMD_RUN */
    void *run_arg;
};

/* Called on the issuing thread after each command ran, with the backend's
 * return code (0 or -errno). */
typedef void (*hoff__issuer_done_fn)(void *arg, const struct hoff__cmd *cmd, int rc);

struct hoff__issuer;

/* Start the thread.  depth: queue slots (>= 1). */
int hoff__issuer_start(struct hoff__issuer **out, struct hoff__backend *be, size_t depth, hoff__issuer_done_fn done,
                       void *arg);
/* Enqueue a command; waits for a slot only when the queue is full (counted
 * in full_waits).  -ESHUTDOWN when it races with hoff__issuer_stop (after
 * stop has returned the issuer is gone); from inside a callback, a push on a
 * full queue returns -EDEADLK instead of waiting on itself. */
int hoff__issuer_push(struct hoff__issuer *is, const struct hoff__cmd *cmd);
/* Wait until every command pushed before the call has run and its callback
 * returned.  -EDEADLK from inside a callback. */
int hoff__issuer_drain(struct hoff__issuer *is);
/* Drain, stop and join the thread, free everything. */
void hoff__issuer_stop(struct hoff__issuer *is);

struct hoff__issuer_stats {
    uint64_t pushed, executed, failed, full_waits;
    size_t depth_max; /* deepest the queue has been */
};
void hoff__issuer_stats(struct hoff__issuer *is, struct hoff__issuer_stats *out);

#endif
