/* fuzz_trace.c — the trace reader's fuzz harness: the libFuzzer entry (built by tests/fuzz/run.sh with
 * -DHOFF_LIBFUZZER), and otherwise a main() that replays files and corpus directories (make check).
 * Threading: single-threaded. */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trace/trace.h"

/* Properties checked on every input, beyond "does not crash":
 * - the in-memory reader and the streaming (FILE) reader agree, to the byte
 *   of the error message;
 * - a trace that reads is written back, and that text reads to the same
 *   trace, and writes to the same text. */

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_trace: property failed: %s\n", what);
        abort();
    }
}

static char *write_mem(const struct hoff__trace *t, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);

    check(f != NULL, "open_memstream");
    check(hoff__trace_write(t, f) == 0, "a trace that was read can be written");
    fclose(f);
    return buf;
}

static int same_events(const struct hoff__trace *a, const struct hoff__trace *b) {
    size_t i;

    for (i = 0; i < a->nev; i++) {
        const struct hoff__tev *x = &a->ev[i], *y = &b->ev[i];

        if (x->kind != y->kind || x->pool != y->pool || x->flags != y->flags || x->block != y->block ||
            x->name != y->name || x->size != y->size || x->stream != y->stream || x->t_cpu_ns != y->t_cpu_ns ||
            x->t_gpu_ns != y->t_gpu_ns)
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct hoff__trace t, u;
    char err[512], err2[512];
    int rc, rc2;

    rc = hoff__trace_parse(&t, (const char *)data, size, err, sizeof err);
    if (size > 0) {
        FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");

        if (f) {
            rc2 = hoff__trace_read(&u, f, err2, sizeof err2);
            fclose(f);
            check(rc == rc2, "parse and read return the same");
            check(strcmp(err, err2) == 0, "parse and read give the same message");
            hoff__trace_destroy(&u);
        }
    }
    if (rc == 0) {
        size_t len1, len2, at;
        char *text1 = write_mem(&t, &len1), *text2;

        (void)hoff__trace_offload_peak(&t, NULL, &at);
        check(at < t.nev || t.nev == 0, "peak event in range");
        check(hoff__trace_parse(&u, text1, len1, err, sizeof err) == 0, "written text reads back");
        check(u.nev == t.nev && u.nblocks == t.nblocks && u.nnames == t.nnames && u.nacc == t.nacc,
              "round trip keeps the counts");
        check(same_events(&t, &u), "round trip keeps the events");
        text2 = write_mem(&u, &len2);
        check(len1 == len2 && memcmp(text1, text2, len1) == 0, "round trip writes the same text");
        free(text1);
        free(text2);
        hoff__trace_destroy(&u);
    } else {
        check(err[0] != 0, "an error has a message");
        check(t.nev == 0 && t.nblocks == 0 && t.nnames == 0, "a failed read leaves the trace empty");
    }
    hoff__trace_destroy(&t);
    return 0;
}

#ifndef HOFF_LIBFUZZER
static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (!f) {
        perror(path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);

            if (!nb) {
                fclose(f);
                free(buf);
                return -1;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int i, count = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        struct stat st;

        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *de;

            if (!d) {
                perror(argv[i]);
                return 2;
            }
            while ((de = readdir(d))) {
                char path[4096];

                if (de->d_name[0] == '.')
                    continue;
                snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
                if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                    continue;
                if (run_file(path) < 0) {
                    closedir(d);
                    return 2;
                }
                count++;
            }
            closedir(d);
        } else {
            if (run_file(argv[i]) < 0)
                return 2;
            count++;
        }
    }
    printf("fuzz_trace: %d inputs, no crash\n", count);
    return 0;
}
#endif
