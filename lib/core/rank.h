/* rank.h — who this process is in a multi-process job (torchrun and friends): rank, world size, local rank and a
 * job id read from the launcher's environment, and the one expansion of %r / %p / %% in the file names hoff writes.
 * Threading: hoff__rank_from_env reads the environment (call it before starting threads that change it);
 * the rest is pure. */
#ifndef HOFF_RANK_H
#define HOFF_RANK_H

#include <stddef.h>

#define HOFF__JOB_MAX 64 /* bytes of a job id, the NUL included */

struct hoff__rank {
    int rank;                /* RANK (0 without one) */
    int world_size;          /* WORLD_SIZE (1 without one) */
    int local_rank;          /* LOCAL_RANK (-1 without one) */
    char job[HOFF__JOB_MAX]; /* TORCHELASTIC_RUN_ID, else MASTER_ADDR:MASTER_PORT, else "" (no job) */
};

/* Read RANK, WORLD_SIZE, LOCAL_RANK, TORCHELASTIC_RUN_ID, MASTER_ADDR and
 * MASTER_PORT.  torchrun sets all of them in every rank; TORCHELASTIC_RUN_ID
 * is its --rdzv-id, whose default is the literal "none" (taken as no run id:
 * then MASTER_ADDR:MASTER_PORT, which every rank of a job shares, names the
 * job).  0, or -EINVAL with a message in err naming the variable and the
 * accepted form (a number that is not a non-negative integer, RANK not below
 * WORLD_SIZE). */
int hoff__rank_from_env(struct hoff__rank *r, char *err, size_t errlen);

/* pattern with %r -> the rank, %p -> the process id, %% -> %; any other %
 * is kept as it is.  what names the setting in messages ("HOFF_TRACE").
 * When the job has several ranks (world_size > 1) and pattern has neither
 * %r nor %p, every rank would write the same file: -EEXIST with a message
 * saying to put %r in it (no rank may overwrite another's file).  0, or
 * -ENAMETOOLONG / -EEXIST with a message in err. */
int hoff__path_expand(char *out, size_t len, const char *pattern, const struct hoff__rank *r, const char *what,
                      char *err, size_t errlen);

#endif
