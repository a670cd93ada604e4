/* test_outfile.c — user-named output files (core/outfile.h) through the trace writer: a failed write leaves the old
 * file, new files are 0600, a replaced file keeps its mode, planted links are not followed, device nodes and FIFOs
 * are written in place and never removed, directories and readerless FIFOs are clear errors (no hang), and no
 * temporary file is left behind.  Every target lives in a scratch directory of the test.
 * Threading: single-threaded. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/core.h"
#include "core/outfile.h"
#include "testutil.h"
#include "trace/synth.h"
#include "trace/trace.h"

static char dir[256];

static void scratch(void) {
    snprintf(dir, sizeof dir, "%s/hoff-outfile.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
}

static void rm_rf(const char *d) {
    char cmd[600];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* Entries of d whose name starts with '.' other than . and ..: leftovers. */
static int hidden_files(const char *d) {
    DIR *dp = opendir(d);
    struct dirent *e;
    int n = 0;

    if (!dp)
        return -1;
    while ((e = readdir(dp)) != NULL)
        n += e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(dp);
    return n;
}

static void put(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    CU_ASSERT_EQUAL(fchmod(fd, mode), 0);
    close(fd);
}

static int holds(const char *path, const char *text) {
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

static void make_trace(struct hoff__trace *t) {
    hoff__trace_init(t);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_events(t, 20000, 7), 0); /* several hundred KiB of text */
}

/* A write that fails half way (the file size limit) leaves the old file as it
 * was and no temporary file; plain and gzip. */
static void test_failed_write_keeps_old(void) {
    static const char *const names[] = {"old.trace", "old.trace.gz"};
    struct hoff__trace t;
    struct rlimit old, lim;
    char path[512];
    size_t i;

    scratch();
    make_trace(&t);
    signal(SIGXFSZ, SIG_IGN);
    CU_ASSERT_EQUAL(getrlimit(RLIMIT_FSIZE, &old), 0);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
#ifndef HAVE_ZLIB
        if (strstr(names[i], ".gz"))
            continue;
#endif
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        put(path, "the user's old trace\n", 0644);
        lim = old;
        lim.rlim_cur = 4096;
        CU_ASSERT_EQUAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
        CU_ASSERT(hoff__trace_save(&t, path) < 0);
        CU_ASSERT_EQUAL(setrlimit(RLIMIT_FSIZE, &old), 0);
        CU_ASSERT(holds(path, "the user's old trace\n"));
        CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), names[i]));
        CU_ASSERT_EQUAL(hidden_files(dir), 0);
    }
    signal(SIGXFSZ, SIG_DFL);
    hoff__trace_destroy(&t);
    rm_rf(dir);
}

/* A new file is 0600 whatever the umask; a replaced one keeps its mode and is
 * a new inode (renamed over, never truncated in place). */
static void test_modes_and_replace(void) {
    struct hoff__trace t;
    char path[512];
    struct stat a, b;
    mode_t um = umask(022);

    scratch();
    make_trace(&t);
    snprintf(path, sizeof path, "%s/new.trace", dir);
    CU_ASSERT_EQUAL(hoff__trace_save(&t, path), 0);
    CU_ASSERT_EQUAL(stat(path, &a), 0);
    CU_ASSERT_EQUAL(a.st_mode & 07777, 0600);
    CU_ASSERT_EQUAL(chmod(path, 0640), 0);
    CU_ASSERT_EQUAL(stat(path, &a), 0);
    CU_ASSERT_EQUAL(hoff__trace_save(&t, path), 0);
    CU_ASSERT_EQUAL(stat(path, &b), 0);
    CU_ASSERT_EQUAL(b.st_mode & 07777, 0640);
    CU_ASSERT_NOT_EQUAL(a.st_ino, b.st_ino);
    CU_ASSERT_EQUAL(b.st_size, a.st_size);
    CU_ASSERT_EQUAL(hidden_files(dir), 0);
    umask(um);
    hoff__trace_destroy(&t);
    rm_rf(dir);
}

/* A link planted by another user in a sticky world-writable directory is not
 * followed: the file it points at stays as it was.  Our own link is followed
 * and its target replaced, the link kept. */
static void test_links(void) {
    struct hoff__trace t;
    char sticky[512], victim[512], link[600], own[512], target[512];
    struct stat st;

    scratch();
    make_trace(&t);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    put(victim, "root-only data\n", 0600);
    snprintf(own, sizeof own, "%s/own.trace", dir);
    snprintf(target, sizeof target, "%s/target.trace", dir);
    put(target, "old\n", 0600);
    CU_ASSERT_EQUAL(symlink("target.trace", own), 0);
    CU_ASSERT_EQUAL(hoff__trace_save(&t, own), 0);
    CU_ASSERT_EQUAL(lstat(own, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    CU_ASSERT_EQUAL(stat(target, &st), 0);
    CU_ASSERT(st.st_size > 1000);

    snprintf(sticky, sizeof sticky, "%s/tmp", dir);
    CU_ASSERT_EQUAL(mkdir(sticky, 0777), 0);
    CU_ASSERT_EQUAL(chmod(sticky, 01777), 0);
    snprintf(link, sizeof link, "%s/trace", sticky);
    CU_ASSERT_EQUAL(symlink(victim, link), 0);
    if (lchown(link, 65534, 65534) == 0) {
        int rc = hoff__trace_save(&t, link);

        CU_ASSERT_EQUAL(rc, -ELOOP);
        CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "not followed"));
        CU_ASSERT(holds(victim, "root-only data\n"));
        CU_ASSERT_EQUAL(lstat(link, &st), 0);
        CU_ASSERT(S_ISLNK(st.st_mode));
    } else {
        printf("\n  (not root: the planted-link case needs lchown to another uid; skipped)\n");
    }
    /* A dangling link: an error, nothing created where it points. */
    snprintf(link, sizeof link, "%s/dangling", dir);
    CU_ASSERT_EQUAL(symlink("nowhere/x", link), 0);
    CU_ASSERT_EQUAL(hoff__trace_save(&t, link), -ENOENT);
    CU_ASSERT_EQUAL(hidden_files(dir), 0);
    hoff__trace_destroy(&t);
    rm_rf(dir);
}

/* Device nodes: /dev/full's twin fails and stays; /dev/null's twin takes the
 * trace and stays.  (mknod needs root: skipped otherwise.) */
static void test_devices(void) {
    struct hoff__trace t;
    char full[512], null[512];
    struct stat st;

    scratch();
    make_trace(&t);
    snprintf(full, sizeof full, "%s/full", dir);
    snprintf(null, sizeof null, "%s/null", dir);
    if (mknod(full, S_IFCHR | 0666, makedev(1, 7)) != 0 || mknod(null, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        printf("\n  (mknod: %s; the device-node cases need root: skipped)\n", strerror(errno));
    } else {
        CU_ASSERT_EQUAL(hoff__trace_save(&t, full), -ENOSPC);
        CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "No space left"));
        CU_ASSERT_EQUAL(lstat(full, &st), 0);
        CU_ASSERT(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 7));
        CU_ASSERT_EQUAL(hoff__trace_save(&t, null), 0);
        CU_ASSERT_EQUAL(lstat(null, &st), 0);
        CU_ASSERT(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
        CU_ASSERT_EQUAL(hidden_files(dir), 0);
    }
    hoff__trace_destroy(&t);
    rm_rf(dir);
}

/* A directory and a FIFO without a reader: clear errors at once, nothing
 * removed or created. */
static void test_refusals(void) {
    struct hoff__trace t;
    char fifo[512], sub[512];
    struct stat st;

    scratch();
    make_trace(&t);
    CU_ASSERT_EQUAL(hoff__trace_save(&t, dir), -EISDIR);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "directory"));
    snprintf(sub, sizeof sub, "%s/", dir);
    CU_ASSERT_EQUAL(hoff__trace_save(&t, sub), -EISDIR);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    alarm(20); /* the old writer blocked here for ever */
    CU_ASSERT_EQUAL(hoff__trace_save(&t, fifo), -ENXIO);
    alarm(0);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "no reader"));
    CU_ASSERT_EQUAL(lstat(fifo, &st), 0);
    CU_ASSERT(S_ISFIFO(st.st_mode));
    snprintf(sub, sizeof sub, "%s/missing/x.trace", dir);
    CU_ASSERT_EQUAL(hoff__trace_save(&t, sub), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "missing"));
    CU_ASSERT_EQUAL(hidden_files(dir), 0);
    hoff__trace_destroy(&t);
    rm_rf(dir);
}

/* The helper itself: abort leaves the old file and no temporary. */
static void test_abort(void) {
    struct hoff__outfile o;
    char path[512];

    scratch();
    snprintf(path, sizeof path, "%s/out.json", dir);
    put(path, "{}\n", 0600);
    CU_ASSERT_EQUAL_FATAL(hoff__out_open(&o, path), 0);
    fputs("{\"half\":", o.f);
    hoff__out_abort(&o);
    CU_ASSERT(holds(path, "{}\n"));
    CU_ASSERT_EQUAL(hidden_files(dir), 0);
    CU_ASSERT_EQUAL_FATAL(hoff__out_open(&o, path), 0);
    fputs("{\"whole\":1}\n", o.f);
    CU_ASSERT_EQUAL(hoff__out_commit(&o), 0);
    CU_ASSERT(holds(path, "{\"whole\":1}\n"));
    CU_ASSERT_EQUAL(hidden_files(dir), 0);
    rm_rf(dir);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"failed_write_keeps_old", test_failed_write_keeps_old},
        {"modes_and_replace", test_modes_and_replace},
        {"links", test_links},
        {"devices", test_devices},
        {"refusals", test_refusals},
        {"abort", test_abort},
        {NULL, NULL},
    };

    return hoff_test_run("outfile", tests);
}
