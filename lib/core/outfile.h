/* outfile.h — the one way hoff writes a user-named output file (traces, SVG timelines, JSON exports): never
 * through a planted symbolic link, never over a device node, never truncating or unlinking the user's file before
 * the new one is complete.  Rules (doc/design.md, "Output files"):
 *   - no file yet, or a regular file: the data goes to a new temporary file in the same directory (O_CREAT|O_EXCL,
 *     mode 0600), is flushed and fsync'ed, and is renamed over the path only when all of it was written; a failure
 *     removes the temporary file (the only thing hoff created) and leaves the old file as it was.  A replaced file
 *     keeps its permission bits; a new one is 0600.
 *   - a character device or a FIFO (/dev/null, /dev/stdout's target, a pipe): written in place, opened without
 *     O_CREAT or O_TRUNC (a FIFO without a reader is an error, not a wait); never unlinked.
 *   - a symbolic link: followed only when it is owned by the caller or by the owner of its directory (the rule of
 *     fs.protected_symlinks, which these machines do not enforce); the rules above then apply to its target.
 *   - a directory, a block device, a socket, a dangling or untrusted link: an error naming what it is.
 * Threading: one outfile belongs to one thread; nothing is shared. */
#ifndef HOFF_OUTFILE_H
#define HOFF_OUTFILE_H

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>

struct hoff__outfile {
    FILE *f;             /* write here */
    int direct;          /* 1: f is the device or FIFO itself; 0: f is the temporary file */
    mode_t mode;         /* permission bits the file gets on commit */
    char path[PATH_MAX]; /* the file replaced on commit (a trusted link resolved) */
    char tmp[PATH_MAX];  /* the temporary file ("" when direct) */
};

/* Open an output file for path as the rules above say.  0, or -errno with a
 * message (hoff_last_error) that says what path is and what is accepted. */
int hoff__out_open(struct hoff__outfile *o, const char *path);
/* Flush, fsync and close; then rename the temporary file over the path.  On
 * any failure the temporary file is removed and the path left as it was.
 * 0 or -errno with a message.  o is closed either way. */
int hoff__out_commit(struct hoff__outfile *o);
/* Give up: close, remove the temporary file (never the path). */
void hoff__out_abort(struct hoff__outfile *o);

#endif
