/* res_fence.c — when a managed block may move: the streams its work was queued on, the fence of a move away after
 * all of them, and its use window (doc/design.md, "Use windows").  Threading: caller holds the context lock. */
#include "config.h"

#include <errno.h>

#include "core/core.h"
#include "mem/res_internal.h"

/* --- the streams a block was used on --------------------------------------- */

/* b's work was (also) queued on s. */
static void note_stream(struct hoff__block *b, hoff_stream s) {
    unsigned i;

    for (i = 0; i < b->nstreams; i++)
        if (b->streams[i] == s)
            return;
    if (b->nstreams < HOFF__BLOCK_STREAMS)
        b->streams[b->nstreams++] = s;
    else
        b->streams_lost = 1;
}

void hoff__res_note_stream(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    (void)mem;
    note_stream(b, s);
}

/* Add b's streams to the fence of the move cmd carries: cmd->after on b's
 * last use stream when the command has none yet, then an event on each
 * other stream not fenced yet (done[0..*ndone), at most 1 + HOFF__CMD_ALSO).
 * *lost: some stream could not be fenced (the caller synchronises). */
static int fence_block(struct hoff__mem *mem, struct hoff__block *b, struct hoff__cmd *cmd, hoff_stream *done,
                       unsigned *ndone, int *lost) {
    struct hoff__backend *be = mem->be;
    unsigned i, j;
    int rc;

    if (b->streams_lost)
        *lost = 1;
    for (i = cmd->after ? 1 : 0; i <= b->nstreams; i++) {
        hoff_stream s = i == 0 ? b->use_stream : b->streams[i - 1];
        hoff__event **ev = i == 0 ? &b->after : &b->fence[i - 1];

        for (j = 0; j < *ndone && done[j] != s; j++)
            ;
        if (j < *ndone)
            continue; /* fenced already: the same point on the same stream */
        if (i && cmd->nalso >= HOFF__CMD_ALSO) {
            *lost = 1;
            continue;
        }
        if (!*ev && (rc = be->ops->event_create(be, ev)) != 0) {
            *ev = NULL;
            return rc;
        }
        if ((rc = be->ops->event_record(be, *ev, s)) != 0)
            return rc;
        if (i == 0)
            cmd->after = *ev;
        else
            cmd->also[cmd->nalso++] = *ev;
        done[(*ndone)++] = s;
    }
    return 0;
}

/* The fence of moving blocks m[0..n) away (evict, discard): after the work
 * queued on every stream they were used on.  A stream that does not fit the
 * command: wait for the whole device now (slow, never unsafe; fence_syncs). */
int hoff__res_fence_move(struct hoff__mem *mem, struct hoff__block *const *m, unsigned n, struct hoff__cmd *cmd) {
    hoff_stream done[1 + HOFF__CMD_ALSO];
    unsigned i, ndone = 0;
    int lost = 0, rc;

    cmd->after = NULL;
    cmd->nalso = 0;
    for (i = 0; i < n; i++)
        if ((rc = fence_block(mem, m[i], cmd, done, &ndone, &lost)) != 0)
            return rc;
    if (lost) {
        HOFF__STAT_ADD(&mem->st, fence_syncs, 1);
        HOFF__LOG_ONCE(HOFF_LOG_WARN,
                       "a block was used on more streams than hoff fences one move after (%d); "
                       "such moves wait for the whole device (counted in fence_syncs)",
                       HOFF__BLOCK_STREAMS);
        if ((rc = mem->be->ops->sync(mem->be)) != 0)
            return rc;
    }
    return 0;
}

/* --- use windows ----------------------------------------------------------- */

void hoff__res_window_open(struct hoff__mem *mem, struct hoff__block *b, hoff_stream s) {
    struct hoff__backend *be = mem->be;

    b->use_stream = s;
    note_stream(b, s);
    if (b->win)
        return;
    b->win = 1;
    b->wprev = NULL;
    b->wnext = mem->res.win_head;
    if (b->wnext)
        b->wnext->wprev = b;
    mem->res.win_head = b;
    if (be->ops->window_open)
        be->ops->window_open(be, b->ptr, b->size, s);
}

void hoff__res_end_use(struct hoff__mem *mem, struct hoff__block *b) {
    struct hoff__backend *be = mem->be;

    if (!b->win)
        return;
    if (b->wprev)
        b->wprev->wnext = b->wnext;
    else
        mem->res.win_head = b->wnext;
    if (b->wnext)
        b->wnext->wprev = b->wprev;
    b->wnext = b->wprev = NULL;
    b->win = 0;
    if (be->ops->window_close)
        be->ops->window_close(be, b->ptr, b->size);
}

void hoff__res_close_windows(struct hoff__mem *mem) {
    if (!mem->res.marks_seen)
        return; /* no access marks: a block's uses are unknown until its free */
    while (mem->res.win_head)
        hoff__res_end_use(mem, mem->res.win_head);
}

/* Nothing moves a block away or drops it inside its use window. */
int hoff__res_window_closed(struct hoff__mem *mem, const struct hoff__block *b, const char *what) {
    if (!b->win)
        return 0;
    HOFF__STAT_ADD(&mem->st, window_refusals, 1);
    return hoff__error(-EBUSY,
                       "cannot %s block %p: it is in use (its use window stays open until the next "
                       "op mark, its free or the step's end)",
                       what, b->ptr);
}
