/* trace_write.c — the trace text format's writer (doc/trace-format.md): the header and every event, buffered,
 * to a FILE or through gzip, and hoff__trace_save's write-then-rename so that a failure leaves the file at the
 * path as it was.
 * Threading: each call works on its own buffer; the trace is only read. */
#include "config.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

#include "core/core.h"
#include "core/outfile.h"
#include "trace/trace.h"
#include "trace/trace_io.h"

#define WBUF ((size_t)256 << 10) /* writer buffer */

struct wr {
    char *buf;
    size_t n;
    FILE *f;
#ifdef HAVE_ZLIB
    gzFile gz;
#endif
    int err;
};

static void w_flush(struct wr *w) {
    if (w->n && !w->err) {
#ifdef HAVE_ZLIB
        if (w->gz) {
            if (gzwrite(w->gz, w->buf, (unsigned)w->n) != (int)w->n)
                w->err = -EIO;
        } else
#endif
            if (fwrite(w->buf, 1, w->n, w->f) != w->n)
            w->err = errno ? -errno : -EIO;
    }
    w->n = 0;
}

static inline void w_need(struct wr *w, size_t k) {
    if (w->n + k > WBUF)
        w_flush(w);
}

static inline void w_str(struct wr *w, const char *s, size_t n) {
    memcpy(w->buf + w->n, s, n);
    w->n += n;
}

static inline void w_u64(struct wr *w, uint64_t v) {
    char tmp[20];
    int i = 20;

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    w_str(w, tmp + i, (size_t)(20 - i));
}

static inline void w_sp_u64(struct wr *w, uint64_t v) {
    w->buf[w->n++] = ' ';
    w_u64(w, v);
}

static size_t escaped_len(const char *s, size_t n) {
    size_t i, k = n;

    for (i = 0; i < n; i++)
        k += hoff__trace_needs_escape((unsigned char)s[i]) ? 3 : 0;
    return k;
}

/* Escaped text (see text() in the reader). */
static void w_text(struct wr *w, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        w_need(w, 4);

        if (hoff__trace_needs_escape(c)) {
            w->buf[w->n++] = '\\';
            w->buf[w->n++] = 'x';
            w->buf[w->n++] = hex[c >> 4];
            w->buf[w->n++] = hex[c & 15];
        } else {
            w->buf[w->n++] = (char)c;
        }
    }
}

/* A header key's name (hoff__trace_keys, the reader's table).  The caller has made room for it. */
static void w_key(struct wr *w, int key) {
    w_str(w, hoff__trace_keys[key], strlen(hoff__trace_keys[key]));
}

static void w_key_u64(struct wr *w, int key, uint64_t v) {
    w_need(w, 64);
    w_key(w, key);
    w_sp_u64(w, v);
    w->buf[w->n++] = '\n';
}

static void w_key_double(struct wr *w, int key, double v, locale_t cloc) {
    locale_t old;
    char tmp[48];
    int n;

    old = uselocale(cloc);
    n = snprintf(tmp, sizeof tmp, "%.17g", v);
    uselocale(old);
    w_need(w, 96);
    w_key(w, key);
    w->buf[w->n++] = ' ';
    w_str(w, tmp, (size_t)n);
    w->buf[w->n++] = '\n';
}

/* One event's line, without its newline, into w (room for 128 bytes made): 0, or -EINVAL for an unknown kind
 * (nothing written). */
static int write_event(struct wr *w, const struct hoff__tev *e) {
    switch (e->kind) {
    case HOFF__TEV_ALLOC:
        w->buf[w->n++] = 'a';
        w_sp_u64(w, e->block);
        w_sp_u64(w, e->size);
        w_sp_u64(w, e->pool);
        w_sp_u64(w, e->stream);
        w_sp_u64(w, e->t_cpu_ns);
        if (e->t_gpu_ns != HOFF__TIME_UNKNOWN)
            w_sp_u64(w, e->t_gpu_ns);
        if (e->flags & HOFF__TEV_PINNED)
            w_str(w, " p", 2);
        if (e->flags & HOFF__TEV_KEPT)
            w_str(w, " k", 2);
        break;
    case HOFF__TEV_FREE:
    case HOFF__TEV_ACCESS:
        w->buf[w->n++] = e->kind == HOFF__TEV_FREE ? 'f' : (e->flags & HOFF__TEV_WRITE) ? 'w' : 'r';
        w_sp_u64(w, e->block);
        w_sp_u64(w, e->stream);
        w_sp_u64(w, e->t_cpu_ns);
        if (e->t_gpu_ns != HOFF__TIME_UNKNOWN)
            w_sp_u64(w, e->t_gpu_ns);
        break;
    case HOFF__TEV_OP:
        w->buf[w->n++] = 'o';
        if (e->name == UINT32_MAX)
            w_str(w, " -", 2);
        else
            w_sp_u64(w, e->name);
        w_sp_u64(w, e->t_cpu_ns);
        if (e->t_gpu_ns != HOFF__TIME_UNKNOWN)
            w_sp_u64(w, e->t_gpu_ns);
        if (hoff__tev_phase(e)) {
            const char *ph = hoff__trace_phase_word(hoff__tev_phase(e));

            w->buf[w->n++] = ' ';
            w_str(w, ph, strlen(ph));
        }
        break;
    case HOFF__TEV_REGION_BEGIN:
    case HOFF__TEV_REGION_END:
        w_str(w, e->kind == HOFF__TEV_REGION_BEGIN ? "rb" : "re", 2);
        w_sp_u64(w, e->t_cpu_ns);
        if (e->t_gpu_ns != HOFF__TIME_UNKNOWN)
            w_sp_u64(w, e->t_gpu_ns);
        break;
    default: return -EINVAL;
    }
    return 0;
}

/* The header: the magic and version, the step's keys, the backend, and the op names, each a line into w. */
static void write_header(const struct hoff__trace *t, struct wr *w, locale_t cloc, size_t blen) {
    uint32_t k;

    w_need(w, 16);
    w_str(w, HOFF__TRACE_MAGIC, HOFF__TRACE_MAGIC_LEN);
    w_sp_u64(w, HOFF__TRACE_VERSION);
    w->buf[w->n++] = '\n';
    w_key_u64(w, HOFF__TK_BUDGET, t->budget_bytes);
    w_key_u64(w, HOFF__TK_HOST_CAP, t->host_cap_bytes);
    w_key_double(w, HOFF__TK_H2D, t->h2d_gbps, cloc);
    w_key_double(w, HOFF__TK_D2H, t->d2h_gbps, cloc);
    w_key_u64(w, HOFF__TK_STEP, t->step_ns);
    w_key_u64(w, HOFF__TK_STEP_GPU, t->step_gpu_ns);
    if (blen) {
        w_need(w, 16);
        w_key(w, HOFF__TK_BACKEND);
        w->buf[w->n++] = ' ';
        w_text(w, t->backend, blen);
        w->buf[w->n++] = '\n';
    }
    for (k = 0; k < t->nnames; k++) {
        const char *s = t->names[k] ? t->names[k] : "";
        size_t n = strlen(s);

        w_need(w, 32);
        w_key(w, HOFF__TK_NAME);
        w_sp_u64(w, k);
        if (n) {
            w->buf[w->n++] = ' ';
            w_text(w, s, n);
        }
        w->buf[w->n++] = '\n';
    }
}

static int write_all(const struct hoff__trace *t, struct wr *w) {
    size_t i, blen = strnlen(t->backend, sizeof t->backend - 1);
    uint32_t k;
    locale_t cloc;

    for (k = 0; k < t->nnames; k++)
        if (t->names[k] && escaped_len(t->names[k], strlen(t->names[k])) + 16 > HOFF__TRACE_MAX_LINE)
            return hoff__error(-ENAMETOOLONG, "trace: op name %u is too long to write", k);
    if (!isfinite(t->h2d_gbps) || signbit(t->h2d_gbps) || !isfinite(t->d2h_gbps) || signbit(t->d2h_gbps))
        return hoff__error(-EINVAL, "trace: bandwidths must be finite and >= 0 (h2d %g, d2h %g GB/s)", t->h2d_gbps,
                           t->d2h_gbps);
    for (k = 0; k < blen; k++)
        if (t->backend[k] == 0)
            blen = k;
    if (!(cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0)))
        return hoff__error(-ENOMEM, "trace: out of memory");
    if (!(w->buf = malloc(WBUF))) {
        freelocale(cloc);
        return hoff__error(-ENOMEM, "trace: out of memory");
    }
    write_header(t, w, cloc, blen);
    freelocale(cloc);
    for (i = 0; i < t->nev && !w->err; i++) {
        const struct hoff__tev *e = &t->ev[i];

        w_need(w, 128);
        if (write_event(w, e) < 0) {
            free(w->buf);
            return hoff__error(-EINVAL, "trace: event %zu has unknown kind %u", i, e->kind);
        }
        w->buf[w->n++] = '\n';
    }
    w_need(w, 8);
    w_str(w, "end\n", 4);
    w_flush(w);
    free(w->buf);
    w->buf = NULL;
    if (w->err)
        return hoff__error(w->err, "trace: write error: %s", strerror(-w->err));
    return 0;
}

int hoff__trace_write(const struct hoff__trace *t, FILE *f) {
    struct wr w;
    int e;

    memset(&w, 0, sizeof w);
    w.f = f;
    errno = 0;
    if ((e = write_all(t, &w)) < 0)
        return e;
    if (fflush(f) != 0)
        return hoff__error(errno ? -errno : -EIO, "trace: write error: %s", strerror(errno ? errno : EIO));
    return 0;
}

int hoff__trace_save(const struct hoff__trace *t, const char *path) {
    struct hoff__outfile o;
    size_t pl = strlen(path);
    int e;

#ifndef HAVE_ZLIB
    if (pl >= 3 && strcmp(path + pl - 3, ".gz") == 0)
        return hoff__error(-ENOTSUP,
                           "trace: cannot write '%s' compressed: hoff was built without zlib "
                           "(use a path without .gz)",
                           path);
#endif
    /* A temporary file renamed over path on success (core/outfile.h): a
     * failure leaves whatever was at path as it was. */
    if ((e = hoff__out_open(&o, path)) < 0)
        return hoff__error(e, "trace: %s", hoff_last_error());
#ifdef HAVE_ZLIB
    if (pl >= 3 && strcmp(path + pl - 3, ".gz") == 0) {
        struct wr w;
        int fd = dup(fileno(o.f)), zr;

        memset(&w, 0, sizeof w);
        if (fd < 0 || !(w.gz = gzdopen(fd, "wb"))) {
            e = errno ? -errno : -ENOMEM;
            if (fd >= 0)
                close(fd);
            hoff__out_abort(&o);
            return hoff__error(e, "trace: cannot write '%s': %s", path, strerror(-e));
        }
        e = write_all(t, &w);
        zr = gzclose(w.gz);
        if (e == 0 && zr != Z_OK)
            e = hoff__error(zr == Z_ERRNO && errno ? -errno : -EIO, "trace: write error: %s",
                            zr == Z_ERRNO && errno ? strerror(errno) : "gzip failed");
    } else
#endif
    {
        e = hoff__trace_write(t, o.f);
    }
    if (e < 0) {
        hoff__out_abort(&o);
        const char *why = hoff_last_error();

        if (strncmp(why, "trace: ", 7) == 0)
            why += 7;
        return hoff__error(e, "trace: '%s' not written (the file there, if any, is left as it was): %s", path, why);
    }
    if ((e = hoff__out_commit(&o)) < 0)
        return hoff__error(e, "trace: %s", hoff_last_error());
    return 0;
}
