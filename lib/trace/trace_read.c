/* trace_read.c — the trace reader's input sources: a FILE or a memory buffer, plain or gzip-compressed (every
 * member of a multi-member file), read in growing chunks and fed to the grammar (trace_parse.c) line by line;
 * and the reader's entry points (trace.h: hoff__trace_read, hoff__trace_load, hoff__trace_parse).
 * Threading: each call works on its own trace and buffers; nothing is shared. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

#include "core/core.h"
#include "core/grow.h"
#include "trace/trace.h"
#include "trace/trace_io.h"

#define CHUNK ((size_t)4 << 20) /* reader buffer; holds at least one full line */
#define ZIN ((size_t)256 << 10) /* compressed input buffer */

struct src {
    const unsigned char *mem;
    size_t memlen, mempos;
    FILE *f;
    unsigned char peek[2];
    size_t npeek, peekpos;
    int gz;
#ifdef HAVE_ZLIB
    int zinit, zdone, raw_eof;
    int zerr; /* an error to report on the next read */
    const char *zwhy;
    z_stream z;
    unsigned char *in;
#endif
};

static int raw_read(struct src *s, unsigned char *dst, size_t n, size_t *got) {
    size_t k = 0;

    while (s->peekpos < s->npeek && k < n)
        dst[k++] = s->peek[s->peekpos++];
    if (s->f) {
        size_t m = fread(dst + k, 1, n - k, s->f);

        if (m < n - k && ferror(s->f))
            return -EIO;
        k += m;
    } else if (s->mem) {
        size_t m = s->memlen - s->mempos;

        if (m > n - k)
            m = n - k;
        memcpy(dst + k, s->mem + s->mempos, m);
        s->mempos += m;
        k += m;
    }
    *got = k;
    return 0;
}

#ifdef HAVE_ZLIB
static int gz_fill(struct src *s) {
    size_t k;

    if (raw_read(s, s->in, ZIN, &k) < 0)
        return errno ? -errno : -EIO;
    s->z.next_in = s->in;
    s->z.avail_in = (uInt)k;
    s->raw_eof = k == 0;
    return 0;
}

/* Decompress into dst.  An error is reported on the call after the one that
 * returned the last good bytes, so that the lines before it are read and the
 * message names the right line. */
static int gz_read(struct hoff__trace_rd *r, struct src *s, unsigned char *dst, size_t n, size_t *got) {
    int zr, e;

    *got = 0;
    if (s->zerr)
        goto report;
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    s->z.next_out = dst;
    s->z.avail_out = (uInt)n;
    while (s->z.avail_out > 0 && !s->zdone) {
        if (s->z.avail_in == 0 && !s->raw_eof && (e = gz_fill(s)) < 0) {
            s->zerr = e;
            s->zwhy = strerror(-e);
            break;
        }
        zr = inflate(&s->z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            /* Another gzip member may follow. */
            if (s->z.avail_in == 0 && !s->raw_eof && (e = gz_fill(s)) < 0) {
                s->zerr = e;
                s->zwhy = strerror(-e);
                break;
            }
            if (s->z.avail_in == 0)
                s->zdone = 1;
            else if (inflateReset(&s->z) != Z_OK) {
                s->zerr = -EINVAL;
                s->zwhy = "cannot reset the decompressor";
                break;
            }
        } else if (zr == Z_BUF_ERROR) {
            if (s->z.avail_in == 0 && s->raw_eof) {
                s->zerr = -EINVAL;
                s->zwhy = "the compressed data is truncated";
                break;
            }
        } else if (zr != Z_OK) {
            s->zerr = zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
            s->zwhy = s->z.msg ? s->z.msg : "corrupt compressed data";
            break;
        }
    }
    *got = n - s->z.avail_out;
    if (!s->zerr || *got)
        return 0;
report:
    return hoff__trace_rd_fail(r, s->zerr, "gzip: %s, after line %zu", s->zwhy, r->line);
}
#endif

static int src_read(struct hoff__trace_rd *r, struct src *s, unsigned char *dst, size_t n, size_t *got) {
#ifdef HAVE_ZLIB
    if (s->gz)
        return gz_read(r, s, dst, n, got);
#endif
    if (raw_read(s, dst, n, got) < 0)
        return hoff__trace_rd_fail(r, -EIO, "read error after line %zu: %s", r->line, strerror(errno));
    return 0;
}

static int src_open(struct hoff__trace_rd *r, struct src *s) {
    size_t k;

    if (raw_read(s, s->peek, 2, &k) < 0)
        return hoff__trace_rd_fail(r, -EIO, "read error: %s", strerror(errno));
    s->npeek = k;
    if (k < 2 || s->peek[0] != 0x1f || s->peek[1] != 0x8b)
        return 0;
#ifdef HAVE_ZLIB
    s->gz = 1;
    s->in = malloc(ZIN);
    if (!s->in)
        return hoff__trace_rd_fail(r, -ENOMEM, "out of memory");
    memset(&s->z, 0, sizeof s->z);
    if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK)
        return hoff__trace_rd_fail(r, -ENOMEM, "gzip: cannot start the decompressor");
    s->zinit = 1;
    return 0;
#else
    return hoff__trace_rd_fail(r, -ENOTSUP,
                               "the trace is gzip-compressed and hoff was built without zlib "
                               "(gunzip it first)");
#endif
}

static void src_close(struct src *s) {
#ifdef HAVE_ZLIB
    if (s->zinit)
        inflateEnd(&s->z);
    free(s->in);
#else
    (void)s;
#endif
}

/* Read everything from s, in chunks.  The buffer starts small (small
 * inputs are common) and doubles up to CHUNK when reads fill it or a line
 * needs the room; a partial line left over is at most HOFF__TRACE_MAX_LINE <= CHUNK / 4,
 * and at most half the buffer before it doubles, so every read has room. */
static int drive(struct hoff__trace_rd *r, struct src *s) {
    unsigned char *buf;
    size_t cap = (size_t)64 << 10, have = 0, got, used;
    int e = 0, eof = 0;

    if ((e = src_open(r, s)) < 0)
        return e;
    if (!(buf = malloc(cap)))
        return hoff__trace_rd_fail(r, -ENOMEM, "out of memory");
    while (!eof) {
        if ((e = src_read(r, s, buf + have, cap - have, &got)) < 0)
            break;
        eof = got == 0;
        have += got;
        if ((e = hoff__trace_rd_lines(r, (const char *)buf, have, eof, &used)) < 0)
            break;
        memmove(buf, buf + used, have - used);
        if (cap < CHUNK && (have == cap || have - used > cap / 2) && HOFF__GROW(buf, cap, cap * 2)) {
            e = hoff__trace_rd_fail(r, -ENOMEM, "out of memory");
            break;
        }
        have -= used;
    }
    free(buf);
    if (e < 0)
        return e;
    return hoff__trace_rd_eof(r);
}

int hoff__trace_parse(struct hoff__trace *t, const char *buf, size_t len, char *err, size_t errlen) {
    struct hoff__trace_rd r;
    size_t used;
    int e;

    hoff__trace_rd_start(&r, t, err, errlen);
    if (len >= 2 && (unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b) {
        struct src s;

        memset(&s, 0, sizeof s);
        s.mem = (const unsigned char *)buf;
        s.memlen = len;
        e = drive(&r, &s);
        src_close(&s);
        return hoff__trace_rd_end(&r, e);
    }
    e = hoff__trace_rd_lines(&r, buf, len, 1, &used);
    if (e == 0)
        e = hoff__trace_rd_eof(&r);
    return hoff__trace_rd_end(&r, e);
}

int hoff__trace_read(struct hoff__trace *t, FILE *f, char *err, size_t errlen) {
    struct hoff__trace_rd r;
    struct src s;
    int e;

    hoff__trace_rd_start(&r, t, err, errlen);
    memset(&s, 0, sizeof s);
    s.f = f;
    e = drive(&r, &s);
    src_close(&s);
    return hoff__trace_rd_end(&r, e);
}

int hoff__trace_load(struct hoff__trace *t, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    int e;

    if (!f) {
        struct hoff__trace_rd r;

        e = -errno;
        hoff__trace_rd_start(&r, t, err, errlen);
        hoff__trace_rd_fail(&r, e, "cannot open '%s': %s", path, strerror(-e));
        return hoff__trace_rd_end(&r, e);
    }
    e = hoff__trace_read(t, f, err, errlen);
    fclose(f);
    return e;
}
