/* nvme.c — benchmark: the NVMe tier's spill writes and restore reads (lib/tier/nvme.c, the calls the tier thread
 * makes for each block) for blocks of 64 MiB .. 1 GiB, against fio (io_uring, O_DIRECT, registered buffers, the
 * same I/O size and queue depth as the tier's) on the same directory in the same run, size by size.  Prints GB/s
 * per size for both and hoff's ratio to fio (target >= 0.9); --json as one object.
 * Threading: single-threaded (fio runs as a child process between hoff's measurements). */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* mkdtemp */
#endif

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchargs.h"
#include "core/core.h"
#include "hoff.h"
#include "tier/host.h"
#include "tier/nvme.h"

#define MAX_SIZES 16
#define MAX_REPS 15
#define TARGET 0.9

struct result {
    uint64_t block, blocks;
    double hoff_w, hoff_r; /* GB/s (1e9 bytes/s) */
    double fio_w, fio_r;   /* GB/s; 0 when fio was not run */
};

struct opts {
    int json, smoke, no_fio, reps;
    const char *parent; /* --dir */
    const char *fio;    /* --fio, else "fio" from PATH */
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    uint64_t total; /* bytes written (and read) per size, per side */
    struct hoff_config cfg;
};

static uint64_t now_ns(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f, const struct bench_args *ba) {
    fprintf(f, "usage: bench/nvme [--json] [--smoke] [--dir DIR] [--sizes LIST] [--total BYTES] [--chunk BYTES]\n"
               "                  [--depth N] [--reps N] [--fio PATH | --no-fio]\n"
               "The NVMe tier's spill write and restore read for blocks of each size in LIST (default\n"
               "64M,128M,256M,512M,1G), each followed by fio (ioengine=io_uring, direct=1, fixedbufs=1, bs = the\n"
               "tier's chunk, iodepth = its queue depth) writing then reading the same number of bytes in the same\n"
               "directory; the two take turns N times (--reps, default 3) and the medians are reported.  Every\n"
               "restored block is checked byte for byte.\n"
               "  --dir DIR      where the spill file and fio's file go: a fresh directory inside DIR, removed at the\n"
               "                 end (default: $TMPDIR, else the current directory)\n"
               "  --total BYTES  written and read per size by each side (default 2G; at least one block)\n"
               "  --chunk BYTES  the tier's I/O size (default: HOFF_SPILL_CHUNK, else 4M; 64K .. 1G, 4K multiples)\n"
               "  --depth N      the tier's queue depth (default: HOFF_IO_DEPTH, else 32; 8 .. 4096)\n"
               "  --fio PATH     the fio to run (default: fio in PATH); without one the benchmark stops with exit 1\n"
               "  --no-fio       measure hoff alone (the JSON says fio was not run; no ratios)\n"
               "  --reps N       turns per size (1 .. 15)\n"
               "  --smoke        one 8 MiB size, 16 MiB in all, 1 MiB chunks, one turn (make check; fio only if\n"
               "                 present)\n"
               "  --json         one JSON object instead of the table\n"
               "Needs about 2 x the largest size of memory and TOTAL + the largest size of free disk.\n"
               "Exit status: 0 ok, 1 a failure (I/O, fio, a restored block that differs), 2 bad usage.\n");
}

static void parse_sizes(const struct bench_args *ba, struct opts *o, const char *arg) {
    char buf[512], *item[MAX_SIZES];
    int n = bench_args_list(ba, "--sizes", arg, buf, sizeof buf, item, MAX_SIZES);

    for (o->nsizes = 0; o->nsizes < n; o->nsizes++)
        o->sizes[o->nsizes] = bench_args_size(ba, "--sizes", item[o->nsizes], 4096, (uint64_t)16 << 30, 4096,
                                              "a list of sizes in bytes, each a multiple of 4 KiB from 4K to 16G "
                                              "(e.g. 64M,1G)");
}

/* The options into o; a bad one ends the program (benchargs.h).  0, or 2 when the environment's HOFF_* is bad. */
static int parse_args(struct opts *o, int argc, char **argv) {
    struct bench_args ba = {"bench/nvme", usage, argc, argv, 0};
    char err[256];

    hoff_config_init(&o->cfg);
    if (hoff_config_from_env(&o->cfg, err, sizeof err) != 0) {
        fprintf(stderr, "bench/nvme: %s\n", err);
        return 2;
    }
    o->total = (uint64_t)2 << 30;
    o->reps = 3;
    parse_sizes(&ba, o, "64M,128M,256M,512M,1G");
    for (ba.i = 1; ba.i < argc; ba.i++) {
        if (bench_args_is(&ba, "--json")) {
            o->json = 1;
        } else if (bench_args_is(&ba, "--smoke")) {
            o->smoke = 1;
        } else if (bench_args_is(&ba, "--no-fio")) {
            o->no_fio = 1;
        } else if (bench_args_is(&ba, "--help") || bench_args_is(&ba, "-h")) {
            bench_args_help(&ba);
        } else if (bench_args_is(&ba, "--dir")) {
            o->parent = bench_args_value(&ba);
        } else if (bench_args_is(&ba, "--fio")) {
            o->fio = bench_args_value(&ba);
        } else if (bench_args_is(&ba, "--sizes")) {
            parse_sizes(&ba, o, bench_args_value(&ba));
        } else if (bench_args_is(&ba, "--reps")) {
            o->reps = (int)bench_args_uint(&ba, "--reps", bench_args_value(&ba), 1, MAX_REPS);
        } else if (bench_args_is(&ba, "--total")) {
            o->total = bench_args_size(&ba, "--total", bench_args_value(&ba), 1, (uint64_t)1 << 40, 1,
                                       "a size in bytes from 1 to 1T (e.g. 2G)");
        } else if (bench_args_is(&ba, "--chunk") || bench_args_is(&ba, "--depth")) {
            const char *opt = argv[ba.i], *key = bench_args_is(&ba, "--chunk") ? "spill_chunk" : "io_depth";
            const char *v = bench_args_value(&ba);

            if (hoff_config_set(&o->cfg, key, v, err, sizeof err) != 0)
                bench_args_fail(&ba, "%s: %s", opt, err);
        } else {
            bench_args_unknown(&ba, argv[ba.i]);
        }
    }
    if (o->fio && o->no_fio)
        bench_args_fail(&ba, "--fio and --no-fio together");
    if (o->smoke) {
        o->nsizes = 1;
        o->sizes[0] = (uint64_t)8 << 20;
        o->total = (uint64_t)16 << 20;
        o->cfg.spill_chunk_bytes = (uint64_t)1 << 20;
        o->reps = 1;
    }
    return 0;
}

/* --- where the files go ------------------------------------------------ */

static const char *fs_name(long type) {
    switch ((unsigned long)type) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x2FC12FC1: return "zfs";
    case 0xF2F52010: return "f2fs";
    case 0x65735546: return "fuse";
    case 0x794C7630: return "overlayfs";
    case 0x6969: return "nfs";
    default: return "other";
    }
}

/* The mount source of the filesystem holding path (the longest mount point that is a prefix), or "?". */
static void mount_source(const char *path, char *out, size_t len) {
    char real[PATH_MAX], line[4096];
    size_t best = 0;
    FILE *f = fopen("/proc/self/mounts", "r");

    snprintf(out, len, "?");
    if (!f || !realpath(path, real)) {
        if (f)
            fclose(f);
        return;
    }
    while (fgets(line, sizeof line, f)) {
        char src[256], mnt[1024];
        size_t m;

        if (sscanf(line, "%255s %1023s", src, mnt) != 2)
            continue;
        m = strlen(mnt);
        if (strncmp(real, mnt, m) == 0 && (real[m] == '/' || real[m] == 0 || m == 1) && m >= best) {
            best = m;
            snprintf(out, len, "%s", src);
        }
    }
    fclose(f);
}

static int remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[PATH_MAX];

    if (!d)
        return -errno;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p); /* only what this run made: the directory is its own */
    }
    closedir(d);
    return rmdir(dir) == 0 ? 0 : -errno;
}

/* A copy of s that can go into a JSON string as it is: quotes, backslashes and control characters become '?'
 * (the strings are for people: a directory, a device, fio's version). */
static const char *clean(const char *s, char *out, size_t len) {
    size_t i;

    for (i = 0; i + 1 < len && s[i]; i++)
        out[i] = s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20 ? '?' : s[i];
    out[i] = 0;
    return out;
}

/* --- hoff's side ---------------------------------------------------------- */

static void fill(unsigned char *p, size_t len, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

    for (size_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
}

/* Spill `blocks` blocks of `size` bytes (all live at once, as under a host cap), then restore each and compare.
 * GB/s of the calls alone (filling and checking the buffers is outside the timing). */
static int hoff_side(const struct opts *o, const char *dir, struct hoff__host_tier *host, uint64_t size,
                     uint64_t blocks, unsigned char *src, unsigned char *dst, double *w, double *r, char *mode,
                     size_t modelen) {
    struct hoff__nvme *n = NULL;
    struct hoff__nvme_spill **h = calloc(blocks, sizeof *h);
    uint64_t tw = 0, tr = 0, t0;
    int rc;

    if (!h)
        return -ENOMEM;
    rc = hoff__nvme_open(&n, dir, (size_t)o->cfg.spill_chunk_bytes, o->cfg.io_queue_depth, host, NULL);
    if (rc) {
        fprintf(stderr, "bench/nvme: %s\n", hoff_last_error());
        free(h);
        return rc;
    }
    hoff__nvme_mode(n, mode, modelen);
    for (uint64_t b = 0; b < blocks && !rc; b++) {
        fill(src, size, b + 1);
        t0 = now_ns();
        rc = hoff__nvme_spill(n, src, size, b, &h[b]);
        tw += now_ns() - t0;
    }
    for (uint64_t b = 0; b < blocks && !rc; b++) {
        memset(dst, 0, size);
        t0 = now_ns();
        rc = hoff__nvme_restore(n, h[b], dst, size);
        tr += now_ns() - t0;
        if (!rc) {
            fill(src, size, b + 1);
            if (memcmp(src, dst, size) != 0) {
                fprintf(stderr, "bench/nvme: block %" PRIu64 " of %" PRIu64 " bytes came back different\n", b, size);
                rc = -EIO;
            }
        }
    }
    if (rc && rc != -EIO)
        fprintf(stderr, "bench/nvme: %s\n", hoff_last_error());
    for (uint64_t b = 0; b < blocks; b++)
        hoff__nvme_drop(n, h[b]);
    hoff__nvme_close(n);
    free(h);
    *w = tw ? (double)(size * blocks) / (double)tw : 0;
    *r = tr ? (double)(size * blocks) / (double)tr : 0;
    return rc;
}

/* --- fio's side ----------------------------------------------------------- */

/* Run argv with stdout into `out`; 0 when it exited 0. */
static int run_capture(char *const argv[], const char *out) {
    pid_t pid;
    int st;

    fflush(stdout); /* or the child's freopen would write what is buffered */
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        FILE *f = freopen(out, "w", stdout);

        if (!f)
            _exit(126);
        execvp(argv[0], argv);
        fprintf(stderr, "bench/nvme: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    return WIFEXITED(st) ? -WEXITSTATUS(st) : -EINTR;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t cap = 0, len = 0, got;

    if (!f)
        return NULL;
    do {
        if (cap - len < 65536) {
            char *nb = realloc(buf, cap + 262144);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
            cap += 262144;
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
    } while (got > 0);
    fclose(f);
    buf[len] = 0;
    return buf;
}

/* The "bw_bytes" of the job's "read" or "write" section in fio's JSON output; -1 if absent. */
static double fio_bw(const char *json, const char *dir) {
    char key[24];
    const char *p, *b;

    snprintf(key, sizeof key, "\"%s\" : {", dir); /* the section, not "rw" : "write" */
    p = strstr(json, "\"jobs\"");
    if (!p || !(p = strstr(p, key)) || !(b = strstr(p, "\"bw_bytes\"")) || !(b = strchr(b, ':')))
        return -1;
    return strtod(b + 1, NULL);
}

/* fio writes then reads `bytes` in one file of dir, at the tier's I/O size and queue depth.  GB/s from fio's own
 * bandwidth figures. */
static int fio_side(const struct opts *o, const char *fio, const char *dir, uint64_t bytes, double *w, double *r) {
    char file[PATH_MAX + 16], out[PATH_MAX + 16], bs[32], depth[32], size[48], fname[PATH_MAX + 48];
    const char *rw[2] = {"write", "read"};
    double *res[2] = {w, r};
    int rc = 0;

    snprintf(file, sizeof file, "%s/fio.dat", dir);
    snprintf(out, sizeof out, "%s/fio.json", dir);
    snprintf(fname, sizeof fname, "--filename=%s", file);
    snprintf(bs, sizeof bs, "--bs=%" PRIu64, o->cfg.spill_chunk_bytes);
    snprintf(depth, sizeof depth, "--iodepth=%d", o->cfg.io_queue_depth);
    snprintf(size, sizeof size, "--size=%" PRIu64, bytes);
    for (int k = 0; k < 2 && !rc; k++) {
        char name[32], mode[32];
        char *argv[] = {
            (char *)fio, name, fname, "--ioengine=io_uring", "--direct=1", "--fixedbufs=1", bs,
            depth,       size, mode,  "--numjobs=1",         "--thread",   "--end_fsync=0", "--output-format=json",
            NULL};
        char *json;

        snprintf(name, sizeof name, "--name=hoff-%s", rw[k]);
        snprintf(mode, sizeof mode, "--rw=%s", rw[k]);
        rc = run_capture(argv, out);
        json = slurp(out);
        if (rc == 0 && json && (*res[k] = fio_bw(json, rw[k])) > 0) {
            *res[k] /= 1e9;
        } else {
            fprintf(stderr, "bench/nvme: %s --rw=%s in %s failed (exit %d)%s\n%.4000s\n", fio, rw[k], dir, -rc,
                    json && *json ? "; its output (up to 4000 characters):" : "", json ? json : "");
            rc = rc ? rc : -EIO;
        }
        free(json);
    }
    unlink(file);
    unlink(out);
    return rc;
}

/* fio's version line, or "" when it cannot be run. */
static void fio_version(const char *fio, const char *dir, char *out, size_t len) {
    char path[PATH_MAX + 16], *v;
    char *argv[] = {(char *)fio, "--version", NULL};

    out[0] = 0;
    snprintf(path, sizeof path, "%s/fio.version", dir);
    if (run_capture(argv, path) == 0 && (v = slurp(path)) != NULL) {
        v[strcspn(v, "\n")] = 0;
        snprintf(out, len, "%s", v);
        free(v);
    }
    unlink(path);
}

/* --- main ----------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double min_ratio(const struct result *res, int n, int write) {
    double m = -1;

    for (int i = 0; i < n; i++) {
        double f = write ? res[i].fio_w : res[i].fio_r, h = write ? res[i].hoff_w : res[i].hoff_r;
        if (f > 0 && (m < 0 || h / f < m))
            m = h / f;
    }
    return m;
}

static void print_ratio(double x) {
    if (x < 0)
        printf("null");
    else
        printf("%.3f", x);
}

int main(int argc, char **argv) {
    struct opts o = {0};
    struct result res[MAX_SIZES];
    struct hoff__host_tier *host = NULL;
    struct statvfs vfs;
    struct statfs sfs;
    char dir[PATH_MAX], mode[128] = "", version[128] = "", dev[256], date[32], sz[32], c1[PATH_MAX], c2[256];
    const char *parent, *fio;
    uint64_t maxsize = 0, need;
    unsigned char *src = NULL, *dst = NULL;
    double wr, rr, hw[MAX_REPS], hr[MAX_REPS], fw[MAX_REPS], fr[MAX_REPS];
    time_t now = time(NULL);
    int rc, fail = 0, have_fio;

    if ((rc = parse_args(&o, argc, argv)) != 0)
        return rc;
    hoff__log_set_level(HOFF_LOG_WARN);
    parent = o.parent ? o.parent : getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : ".";
    snprintf(dir, sizeof dir, "%s/hoff-nvme-bench.XXXXXX", parent);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench/nvme: cannot make a directory in %s: %s (--dir DIR picks another place)\n", parent,
                strerror(errno));
        return 1;
    }
    fio = o.fio ? o.fio : "fio";
    have_fio = 0;
    if (!o.no_fio) {
        fio_version(fio, dir, version, sizeof version);
        have_fio = version[0] != 0;
        if (!have_fio && !o.smoke) {
            fprintf(stderr,
                    "bench/nvme: fio not found or not runnable (%s); install it (Debian: apt-get install fio), "
                    "give --fio PATH, or --no-fio to measure hoff alone\n",
                    fio);
            remove_dir(dir);
            return 1;
        }
    }
    for (int i = 0; i < o.nsizes; i++)
        maxsize = o.sizes[i] > maxsize ? o.sizes[i] : maxsize;
    need = (o.total > maxsize ? o.total : maxsize) + maxsize + ((uint64_t)64 << 20);
    if (statvfs(dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < need) {
        char a[32], b[32];
        fprintf(stderr, "bench/nvme: %s has %s free, the run needs %s (--total, --sizes or --dir)\n", parent,
                hoff__fmt_size((uint64_t)vfs.f_bavail * vfs.f_frsize, a, sizeof a), hoff__fmt_size(need, b, sizeof b));
        remove_dir(dir);
        return 1;
    }
    if (posix_memalign((void **)&src, 4096, (size_t)maxsize) != 0)
        src = NULL;
    if (posix_memalign((void **)&dst, 4096, (size_t)maxsize) != 0)
        dst = NULL;
    if (!src || !dst) {
        char a[32];
        fprintf(stderr, "bench/nvme: cannot allocate 2 x %s of memory\n", hoff__fmt_size(maxsize, a, sizeof a));
        fail = 1;
        goto out;
    }
    if (hoff__host_tier_open(&host, o.cfg.numa, NULL, NULL, 0) != 0)
        host = NULL;                 /* staging not bound: as without hwloc */
    memset(src, 1, (size_t)maxsize); /* fault the pages in before any timing */
    memset(dst, 1, (size_t)maxsize);

    for (int i = 0; i < o.nsizes && !fail; i++) {
        struct result *x = &res[i];

        memset(x, 0, sizeof *x);
        x->block = o.sizes[i];
        x->blocks = o.total > x->block ? (o.total + x->block - 1) / x->block : 1;
        /* the two sides take turns, so that a disk whose speed drifts during the run favours neither */
        for (int k = 0; k < o.reps && !fail; k++) {
            for (int side = 0; side < 2 && !fail; side++) {
                if ((side ^ (k & 1)) == 0)
                    fail =
                        hoff_side(&o, dir, host, x->block, x->blocks, src, dst, &hw[k], &hr[k], mode, sizeof mode) != 0;
                else if (have_fio)
                    fail = fio_side(&o, fio, dir, x->block * x->blocks, &fw[k], &fr[k]) != 0;
            }
        }
        if (fail)
            break;
        x->hoff_w = median(hw, o.reps);
        x->hoff_r = median(hr, o.reps);
        x->fio_w = have_fio ? median(fw, o.reps) : 0;
        x->fio_r = have_fio ? median(fr, o.reps) : 0;
        if (!o.json) {
            if (i == 0)
                printf("%-10s %7s %12s %12s %12s %12s %8s %8s\n", "block", "blocks", "hoff write", "fio write",
                       "hoff read", "fio read", "w ratio", "r ratio");
            printf("%-10s %7" PRIu64 " %7.2f GB/s %7.2f GB/s %7.2f GB/s %7.2f GB/s %8.3f %8.3f\n",
                   hoff__fmt_size(x->block, sz, sizeof sz), x->blocks, x->hoff_w, x->fio_w, x->hoff_r, x->fio_r,
                   x->fio_w > 0 ? x->hoff_w / x->fio_w : 0, x->fio_r > 0 ? x->hoff_r / x->fio_r : 0);
        }
    }
    if (fail)
        goto out;

    mount_source(dir, dev, sizeof dev);
    if (statfs(dir, &sfs) != 0)
        sfs.f_type = 0;
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    wr = min_ratio(res, o.nsizes, 1);
    rr = min_ratio(res, o.nsizes, 0);
    if (o.json) {
        printf("{\"bench\":\"nvme\",\"date\":\"%s\",\"dir\":\"%s\",\"filesystem\":\"%s\",\"device\":\"%s\",", date,
               clean(parent, c1, sizeof c1), fs_name((long)sfs.f_type), clean(dev, c2, sizeof c2));
        printf("\"hoff\":{\"mode\":\"%s\",\"chunk_bytes\":%" PRIu64 ",\"queue_depth\":%d},", mode,
               o.cfg.spill_chunk_bytes, o.cfg.io_queue_depth);
        if (have_fio)
            printf("\"fio\":{\"run\":true,\"version\":\"%s\",\"ioengine\":\"io_uring\",\"direct\":1,\"fixedbufs\":1,"
                   "\"bs\":%" PRIu64 ",\"iodepth\":%d},",
                   clean(version, c2, sizeof c2), o.cfg.spill_chunk_bytes, o.cfg.io_queue_depth);
        else
            printf("\"fio\":{\"run\":false,\"why\":\"%s\"},", o.no_fio ? "--no-fio" : "fio not found");
        printf("\"total_bytes_per_size\":%" PRIu64 ",\"reps\":%d,\"statistic\":\"median\",\"sizes\":[", o.total,
               o.reps);
        for (int i = 0; i < o.nsizes; i++) {
            const struct result *x = &res[i];
            printf("%s{\"block_bytes\":%" PRIu64 ",\"blocks\":%" PRIu64
                   ",\"hoff_write_gbps\":%.3f,\"hoff_read_gbps\":%.3f,",
                   i ? "," : "", x->block, x->blocks, x->hoff_w, x->hoff_r);
            if (have_fio)
                printf("\"fio_write_gbps\":%.3f,\"fio_read_gbps\":%.3f,\"write_ratio_vs_fio\":%.3f,"
                       "\"read_ratio_vs_fio\":%.3f}",
                       x->fio_w, x->fio_r, x->hoff_w / x->fio_w, x->hoff_r / x->fio_r);
            else
                printf("\"fio_write_gbps\":null,\"fio_read_gbps\":null,\"write_ratio_vs_fio\":null,"
                       "\"read_ratio_vs_fio\":null}");
        }
        printf("],\"write_ratio_vs_fio\":");
        print_ratio(wr);
        printf(",\"read_ratio_vs_fio\":");
        print_ratio(rr);
        printf(",\"target\":%.1f,\"meets_target\":%s,\"integrity\":\"OK\"}\n", TARGET,
               wr < 0                         ? "null"
               : wr >= TARGET && rr >= TARGET ? "true"
                                              : "false");
    } else {
        printf("hoff: %s, %" PRIu64 "-byte chunks, queue depth %d; %s on %s (%s)\n", mode, o.cfg.spill_chunk_bytes,
               o.cfg.io_queue_depth, parent, dev, fs_name((long)sfs.f_type));
        if (have_fio)
            printf("fio: %s; lowest ratios: write %.3f, read %.3f (target %.1f)\n", version, wr, rr, TARGET);
        else
            printf("fio: not run (%s)\n", o.no_fio ? "--no-fio" : "fio not found");
        printf("integrity: OK\n");
    }
out:
    free(src);
    free(dst);
    if (host)
        hoff__host_tier_close(host);
    remove_dir(dir);
    return fail;
}
