/* outfile.c — safe creation and atomic replacement of user-named output files (the rules are in outfile.h):
 * a temporary file beside the target renamed over it on success, devices and FIFOs written in place, symbolic
 * links followed only when trusted, and nothing unlinked that this file did not create.
 * Threading: each call works on its own struct hoff__outfile; nothing is shared. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* mkostemp */
#endif
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core/outfile.h"

#define MAX_LINKS 40

/* The directory part of path into dir ("." when there is none). */
static void dir_of(const char *path, char *dir, size_t len) {
    const char *slash = strrchr(path, '/');

    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* May a link owned by link_uid in dir be followed?  The kernel's
 * fs.protected_symlinks rule: yes unless dir is sticky and world-writable and
 * the link belongs neither to us nor to the directory's owner. */
static int link_trusted(const char *dir, uid_t link_uid, uid_t *dir_uid) {
    struct stat ds;

    if (stat(dir, &ds) != 0)
        return 0;
    *dir_uid = ds.st_uid;
    if (!((ds.st_mode & S_ISVTX) && (ds.st_mode & S_IWOTH)))
        return 1;
    return link_uid == geteuid() || link_uid == ds.st_uid;
}

/* Follow trusted links from path to what they name: *st is its lstat (or
 * *exists = 0).  0 or -errno with a message. */
static int resolve(const char *path, char *out, size_t len, struct stat *st, int *exists) {
    char cur[PATH_MAX], target[PATH_MAX], dir[PATH_MAX];
    int hops;

    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur)
        return hoff__error(-ENAMETOOLONG, "cannot write '%s': the path is too long", path);
    for (hops = 0;; hops++) {
        ssize_t n;
        uid_t dir_uid = 0;

        if (lstat(cur, st) != 0) {
            if (errno != ENOENT)
                return hoff__error(-errno, "cannot write '%s': %s", cur, strerror(errno));
            if (hops)
                return hoff__error(-ENOENT,
                                   "cannot write '%s': it is a symbolic link to '%s', which does not exist "
                                   "(dangling links are not followed; give the file's own path)",
                                   path, cur);
            *exists = 0;
            break;
        }
        *exists = 1;
        if (!S_ISLNK(st->st_mode))
            break;
        if (hops == MAX_LINKS)
            return hoff__error(-ELOOP, "cannot write '%s': too many levels of symbolic links", path);
        dir_of(cur, dir, sizeof dir);
        if (!link_trusted(dir, st->st_uid, &dir_uid))
            return hoff__error(-ELOOP,
                               "cannot write '%s': '%s' is a symbolic link owned by uid %u in the sticky, "
                               "world-writable directory '%s' (owned by uid %u); such a link is not followed "
                               "(give the target's own path)",
                               path, cur, (unsigned)st->st_uid, dir, (unsigned)dir_uid);
        n = readlink(cur, target, sizeof target - 1);
        if (n < 0)
            return hoff__error(-errno, "cannot write '%s': cannot read the link '%s': %s", path, cur, strerror(errno));
        target[n] = '\0';
        if (target[0] == '/') {
            memcpy(cur, target, (size_t)n + 1);
        } else {
            char next[PATH_MAX];

            if (snprintf(next, sizeof next, "%s/%s", dir, target) >= (int)sizeof next)
                return hoff__error(-ENAMETOOLONG, "cannot write '%s': the link's target path is too long", path);
            memcpy(cur, next, strlen(next) + 1);
        }
    }
    if (snprintf(out, len, "%s", cur) >= (int)len)
        return hoff__error(-ENAMETOOLONG, "cannot write '%s': the path is too long", path);
    return 0;
}

/* A device or FIFO, written in place: no O_CREAT, no O_TRUNC, no wait for a reader. */
static int open_direct(struct hoff__outfile *o, const char *path, const struct stat *st) {
    int fd, fl;

    fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENXIO && S_ISFIFO(st->st_mode))
            return hoff__error(-ENXIO, "cannot write '%s': it is a FIFO with no reader (start the reader first)", path);
        return hoff__error(-errno, "cannot write '%s': %s", path, strerror(errno));
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno ? errno : ENOMEM;

        close(fd);
        return hoff__error(-e, "cannot write '%s': %s", path, strerror(e));
    }
    o->direct = 1;
    return 0;
}

int hoff__out_open(struct hoff__outfile *o, const char *path) {
    char dir[PATH_MAX];
    const char *base;
    struct stat st;
    int rc, exists = 0, fd;

    memset(o, 0, sizeof *o);
    if (!path || !*path)
        return hoff__error(-EINVAL, "no output path given (a file name is expected)");
    if ((rc = resolve(path, o->path, sizeof o->path, &st, &exists)) < 0)
        return rc;
    o->mode = 0600;
    if (exists) {
        if (S_ISDIR(st.st_mode))
            return hoff__error(-EISDIR, "cannot write '%s': it is a directory (give a file name)", path);
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            return open_direct(o, path, &st);
        if (S_ISBLK(st.st_mode))
            return hoff__error(-EINVAL,
                               "cannot write '%s': it is a block device; hoff writes its output only to "
                               "a regular file, a character device or a FIFO",
                               path);
        if (!S_ISREG(st.st_mode))
            return hoff__error(-EINVAL,
                               "cannot write '%s': it is a socket or another special file; hoff writes "
                               "its output only to a regular file, a character device or a FIFO",
                               path);
        o->mode = st.st_mode & 0777;
    }
    dir_of(o->path, dir, sizeof dir);
    base = strrchr(o->path, '/');
    base = base ? base + 1 : o->path;
    if (!*base)
        return hoff__error(-EISDIR, "cannot write '%s': it names a directory (give a file name)", path);
    /* ".NAME.XXXXXX" beside the target, the name cut to stay under NAME_MAX. */
    if (snprintf(o->tmp, sizeof o->tmp, "%s/.%.200s.XXXXXX", dir, base) >= (int)sizeof o->tmp)
        return hoff__error(-ENAMETOOLONG, "cannot write '%s': the path is too long", path);
    fd = mkostemp(o->tmp, O_CLOEXEC); /* O_CREAT|O_EXCL, mode 0600: never follows a link */
    if (fd < 0) {
        int e = errno;

        o->tmp[0] = '\0';
        return hoff__error(-e, "cannot write '%s': cannot create a file in '%s': %s", path, dir, strerror(e));
    }
    if (!(o->f = fdopen(fd, "w"))) {
        int e = errno;

        close(fd);
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return hoff__error(-e, "cannot write '%s': %s", path, strerror(e));
    }
    return 0;
}

void hoff__out_abort(struct hoff__outfile *o) {
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->tmp[0])
        unlink(o->tmp);
    o->tmp[0] = '\0';
}

int hoff__out_commit(struct hoff__outfile *o) {
    int fd, e = 0, dfd;
    char dir[PATH_MAX];

    if (!o->f)
        return hoff__error(-EBADF, "output '%s' is not open", o->path);
    fd = fileno(o->f);
    if (fflush(o->f) != 0)
        e = errno ? errno : EIO;
    else if (!o->direct && o->mode != 0600 && fchmod(fd, o->mode) != 0)
        e = errno;
    else if (!o->direct && fsync(fd) != 0)
        e = errno;
    if (fclose(o->f) != 0 && !e)
        e = errno ? errno : EIO;
    o->f = NULL;
    if (e) {
        hoff__out_abort(o);
        return hoff__error(-e, "write error on '%s': %s%s", o->path, strerror(e),
                           o->direct ? "" : " (the file there, if any, is left as it was)");
    }
    if (o->direct)
        return 0;
    if (rename(o->tmp, o->path) != 0) {
        e = errno;
        hoff__out_abort(o);
        return hoff__error(-e, "cannot replace '%s': %s (it is left as it was)", o->path, strerror(e));
    }
    o->tmp[0] = '\0';
    /* The rename itself durable: best effort (some file systems refuse). */
    dir_of(o->path, dir, sizeof dir);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}
