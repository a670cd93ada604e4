/* trace_io.c — the trace text format (doc/trace-format.md): a hand-written streaming reader of plain or gzip
 * input with "LINE:COL: expected X, got 'Y'" errors, and the writer.
 * Threading: each call works on its own trace and buffers; nothing is shared. */
#include "config.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
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

#define SIZE_LIMIT ((uint64_t)1 << 47)  /* sizes are 1 .. 2^47-1, as in trace.c */
#define MAX_LINE ((size_t)1 << 20)      /* longest line accepted (and written), without its newline */
#define CHUNK ((size_t)4 << 20)         /* reader buffer; holds at least one full line */
#define ZIN ((size_t)256 << 10)         /* compressed input buffer */
#define WBUF ((size_t)256 << 10)        /* writer buffer */

/* Header keys, in the order the writer puts them. */
enum { K_BUDGET, K_HOST_CAP, K_H2D, K_D2H, K_STEP, K_STEP_GPU, K_BACKEND, K_NAME, K_COUNT };
static const char *const key_names[K_COUNT] = {
    "budget", "host_cap", "h2d_gbps", "d2h_gbps", "step_ns", "step_gpu_ns", "backend", "name",
};

enum { P_VERSION, P_HEADER, P_EVENTS, P_END };

/* ========================================================================== */
/* reader                                                                     */
/* ========================================================================== */

struct rd {
    struct hoff__trace *t;
    char *err;
    size_t errlen;
    size_t line;                /* number of the current line, from 1 */
    const char *ls, *le;        /* the current line (without its newline) */
    const char *p;              /* cursor in it */
    const char *tok;            /* start of the last field read */
    int phase;
    int failed;
    uint32_t depth;             /* open regions */
    size_t key_line[K_COUNT];   /* line where each header key was seen (0: not yet) */
    locale_t cloc;              /* the "C" locale for strtod, made on first use */
};

static void set_err(struct rd *r, int err, const char *msg) {
    if (r->err && r->errlen) {
        size_t n = strlen(msg);

        if (n >= r->errlen)
            n = r->errlen - 1;
        memcpy(r->err, msg, n);
        r->err[n] = 0;
    }
    hoff__error(err, "%s", msg);
    r->failed = 1;
}

/* An error that is not about one place of a line (I/O, gzip). */
static int fail_plain(struct rd *r, int err, const char *fmt, ...) HOFF__PRINTF(3, 4);
static int fail_plain(struct rd *r, int err, const char *fmt, ...) {
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_err(r, err, msg);
    return err;
}

/* An error at byte `at` of the current line: "LINE:COL: message". */
static int fail(struct rd *r, int err, const char *at, const char *fmt, ...) HOFF__PRINTF(4, 5);
static int fail(struct rd *r, int err, const char *at, const char *fmt, ...) {
    char msg[400], full[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "%zu:%zu: %s", r->line, (size_t)(at - r->ls) + 1, msg);
    set_err(r, err, full);
    return err;
}

/* The token at `at` (up to a space or the end of the line), quoted and
 * escaped, for "got ..." (or "end of line"). */
static const char *got(const struct rd *r, const char *at, char *out, size_t n) {
    const char *e;
    size_t o = 0;

    if (at >= r->le)
        return "end of line";
    e = at;
    if (*e == ' ')
        e++;
    else
        while (e < r->le && *e != ' ')
            e++;
    out[o++] = '\'';
    for (; at < e && o + 8 < n; at++) {
        unsigned char c = (unsigned char)*at;

        if (o + 12 >= n) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\')
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o++] = '\'';
    out[o] = 0;
    return out;
}

static int expected(struct rd *r, int err, const char *at, const char *what) {
    char g[64];

    return fail(r, err, at, "expected %s, got %s", what, got(r, at, g, sizeof g));
}

/* Step over the single space before the next field. */
static int next(struct rd *r, const char *what) {
    if (r->p >= r->le || *r->p != ' ')
        return expected(r, -EINVAL, r->p, what);
    r->p++;
    if (r->p >= r->le || *r->p == ' ')
        return expected(r, -EINVAL, r->p, what);
    r->tok = r->p;
    return 0;
}

static int num_slow(struct rd *r, const char *what, uint64_t *out) {
    const char *p, *le = r->le;
    uint64_t v = 0;
    int e;

    if ((e = next(r, what)) < 0)
        return e;
    for (p = r->p; p < le && *p != ' '; p++) {
        unsigned d = (unsigned)(unsigned char)*p - '0';

        if (d > 9)
            return expected(r, -EINVAL, r->tok, what);
        if (v > (UINT64_MAX - d) / 10) {
            char g[64];

            return fail(r, -ERANGE, r->tok, "number out of range: expected %s, got %s", what,
                        got(r, r->tok, g, sizeof g));
        }
        v = v * 10 + d;
    }
    r->p = p;
    *out = v;
    return 0;
}

/* The next field, a decimal number; the common case inline. */
static inline __attribute__((always_inline)) int num(struct rd *r, const char *what, uint64_t *out) {
    const char *p = r->p, *le = r->le;
    uint64_t v;

    if (p + 1 < le && *p == ' ' && (unsigned)(unsigned char)p[1] - '0' <= 9) {
        v = (unsigned)(unsigned char)p[1] - '0';
        for (p += 2; p < le; p++) {
            unsigned d = (unsigned)(unsigned char)*p - '0';

            if (d > 9 || v >= UINT64_MAX / 10 - 1)
                break;
            v = v * 10 + d;
        }
        if (p == le || *p == ' ') {
            r->tok = r->p + 1;
            r->p = p;
            *out = v;
            return 0;
        }
    }
    return num_slow(r, what, out);
}

static int eol(struct rd *r) {
    const char *at = r->p;

    if (at >= r->le)
        return 0;
    if (*at == ' ' && at + 1 < r->le && at[1] != ' ')
        at++;
    return expected(r, -EINVAL, at, "end of line");
}

/* A time field (kind: "cpu time", "gpu time", "step time") read as num reads
 * what: at most HOFF__STEP_NS_MAX, or, where unknown_ok (device times),
 * HOFF__TIME_UNKNOWN. */
static int tnum(struct rd *r, const char *what, const char *kind, int unknown_ok, uint64_t *out) {
    char g[64];
    int e;

    if ((e = num(r, what, out)) < 0)
        return e;
    if (*out <= HOFF__STEP_NS_MAX || (unknown_ok && *out == HOFF__TIME_UNKNOWN))
        return 0;
    return fail(r, -ERANGE, r->tok, "%s out of range: expected a %s from 0 to %s%s, got %s", kind, kind,
                HOFF__STEP_NS_MAX_TEXT, unknown_ok ? " or 18446744073709551615 (unknown)" : "",
                got(r, r->tok, g, sizeof g));
}

/* Optional last time field. */
static int opt_gpu(struct rd *r, uint64_t *tg) {
    int e;

    *tg = HOFF__TIME_UNKNOWN;
    if (r->p < r->le && (e = tnum(r, "a gpu time in ns or end of line", "gpu time", 1, tg)) < 0)
        return e;
    return 0;
}

static int is_tok(const struct rd *r, const char *s) {
    size_t n = strlen(s);

    return (size_t)(r->le - r->p) >= n && memcmp(r->p, s, n) == 0 && (r->p + n == r->le || r->p[n] == ' ');
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* An escaped text field (names, backend): bytes 0x21..0xff except '\', and
 * \xHH for any byte but NUL.  Decoded into a malloc'd string. */
static int text(struct rd *r, const char *what, char **out, size_t *outlen) {
    const char *p, *le = r->le;
    char *s, *o;
    int e;

    if ((e = next(r, what)) < 0)
        return e;
    for (p = r->p; p < le && *p != ' '; p++)
        ;
    s = o = malloc((size_t)(p - r->p) + 1);
    if (!s)
        return fail(r, -ENOMEM, r->p, "out of memory");
    for (p = r->p; p < le && *p != ' '; p++) {
        unsigned char c = (unsigned char)*p;
        int hi, lo;

        if (c == '\\') {
            if (le - p < 4 || p[1] != 'x' || (hi = hexval(p[2])) < 0 || (lo = hexval(p[3])) < 0 || (hi | lo) == 0)
                break;
            *o++ = (char)(hi * 16 + lo);
            p += 3;
        } else if (c <= 0x20 || c == 0x7f) {
            break;
        } else {
            *o++ = (char)c;
        }
    }
    if (p < le && *p != ' ') {
        char g[64], w[200];

        free(s);
        snprintf(w, sizeof w, "%s (bytes 0x21-0x7e and 0x80-0xff as they are, others as \\xHH, never \\x00)",
                 what);
        return fail(r, -EINVAL, p, "expected %s, got %s", w, got(r, p, g, sizeof g));
    }
    *o = 0;
    *outlen = (size_t)(o - s);
    *out = s;
    r->p = p;
    return 0;
}

static int number_double(struct rd *r, const char *what, double *out) {
    const char *p, *le = r->le;
    char buf[48], *end;
    locale_t old;
    double v;
    size_t n;
    int e;

    if ((e = next(r, what)) < 0)
        return e;
    for (p = r->p; p < le && *p != ' '; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-'))
            return expected(r, -EINVAL, r->tok, what);
    n = (size_t)(p - r->p);
    if (n >= sizeof buf || !(*r->p >= '0' && *r->p <= '9'))
        return expected(r, -EINVAL, r->tok, what);
    memcpy(buf, r->p, n);
    buf[n] = 0;
    if (!r->cloc && !(r->cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0)))
        return fail(r, -ENOMEM, r->tok, "out of memory");
    old = uselocale(r->cloc);
    v = strtod(buf, &end);
    uselocale(old);
    if (end != buf + n)
        return expected(r, -EINVAL, r->tok, what);
    if (!isfinite(v)) {
        char g[64];

        return fail(r, -ERANGE, r->tok, "number out of range: expected %s, got %s", what, got(r, r->tok, g, sizeof g));
    }
    r->p = p;
    *out = v;
    return 0;
}

static int add(struct rd *r, const struct hoff__tev *e) {
    int err = hoff__trace_append(r->t, e);

    if (err < 0)
        return fail(r, err, r->ls, "%s", hoff_last_error());
    return 0;
}

static int header_line(struct rd *r, const char *te) {
    struct hoff__trace *t = r->t;
    size_t n = (size_t)(te - r->ls);
    uint64_t v;
    int k, e;

    for (k = 0; k < K_COUNT; k++)
        if (strlen(key_names[k]) == n && memcmp(r->ls, key_names[k], n) == 0)
            break;
    if (k == K_COUNT)
        return expected(r, -EINVAL, r->ls,
                        "a header key (budget, host_cap, h2d_gbps, d2h_gbps, step_ns, step_gpu_ns, backend, "
                        "name) or an event");
    if (k != K_NAME && r->key_line[k])
        return fail(r, -EINVAL, r->ls, "duplicate header key '%s' (first on line %zu)", key_names[k],
                    r->key_line[k]);
    r->key_line[k] = r->line;
    r->p = te;
    switch (k) {
    case K_BUDGET:
        e = num(r, "a budget in bytes", &t->budget_bytes);
        break;
    case K_HOST_CAP:
        e = num(r, "a host cap in bytes", &t->host_cap_bytes);
        break;
    case K_STEP:
        e = tnum(r, "a step time in ns", "step time", 0, &t->step_ns);
        break;
    case K_STEP_GPU:
        e = tnum(r, "a gpu step time in ns", "gpu step time", 1, &t->step_gpu_ns);
        break;
    case K_H2D:
        e = number_double(r, "a bandwidth in GB/s (a decimal number >= 0)", &t->h2d_gbps);
        break;
    case K_D2H:
        e = number_double(r, "a bandwidth in GB/s (a decimal number >= 0)", &t->d2h_gbps);
        break;
    case K_BACKEND: {
        char *s;
        size_t len;

        if ((e = text(r, "a backend name", &s, &len)) < 0)
            return e;
        if (len >= sizeof t->backend) {
            free(s);
            return expected(r, -EINVAL, r->tok, "a backend name of at most 15 bytes");
        }
        memcpy(t->backend, s, len + 1);
        free(s);
        break;
    }
    case K_NAME: {
        char what[64], *s;
        size_t len;
        uint32_t idx;

        snprintf(what, sizeof what, "name index %u (names are numbered from 0)", t->nnames);
        if ((e = num(r, what, &v)) < 0)
            return e;
        if (v != t->nnames)
            return expected(r, -EINVAL, r->tok, what);
        if (r->p < r->le) {
            if ((e = text(r, "an op name", &s, &len)) < 0)
                return e;
        } else if (!(s = strdup(""))) {
            return fail(r, -ENOMEM, r->ls, "out of memory");
        }
        idx = hoff__trace_name(t, s);
        free(s);
        if (idx == UINT32_MAX)
            return fail(r, -ENOMEM, r->ls, "%s", hoff_last_error());
        if (idx != v)
            return fail(r, -EINVAL, r->ls, "duplicate op name (the same as name %u)", idx);
        e = 0;
        break;
    }
    default:
        e = 0;
    }
    if (e < 0)
        return e;
    return eol(r);
}

static int alloc_line(struct rd *r) {
    struct hoff__tev ev;
    uint64_t v;
    char what[64];
    int e;

    memset(&ev, 0, sizeof ev);
    ev.kind = HOFF__TEV_ALLOC;
    ev.name = UINT32_MAX;
    if ((e = num(r, "a block id", &v)) < 0 || v != r->t->nblocks) {
        snprintf(what, sizeof what, "block id %u (ids are dense, in allocation order)", r->t->nblocks);
        return e < 0 ? e : expected(r, -EINVAL, r->tok, what);
    }
    ev.block = (uint32_t)v;
    if ((e = num(r, "a size in bytes (1 to 2^47-1)", &ev.size)) < 0)
        return e;
    if (ev.size == 0 || ev.size >= SIZE_LIMIT)
        return expected(r, ev.size ? -ERANGE : -EINVAL, r->tok, "a size in bytes (1 to 2^47-1)");
    if ((e = num(r, "a pool (0 device, 1 managed)", &v)) < 0)
        return e;
    if (v > 1)
        return expected(r, -EINVAL, r->tok, "a pool (0 device, 1 managed)");
    ev.pool = (uint8_t)v;
    if ((e = num(r, "a stream", &ev.stream)) < 0 || (e = tnum(r, "a cpu time in ns", "cpu time", 0, &ev.t_cpu_ns)) < 0)
        return e;
    ev.t_gpu_ns = HOFF__TIME_UNKNOWN;
    if (r->p < r->le) {
        if ((e = next(r, "a gpu time in ns, 'p' or end of line")) < 0)
            return e;
        if (!is_tok(r, "p")) {
            r->p--;     /* back onto the space */
            if ((e = tnum(r, "a gpu time in ns, 'p' or end of line", "gpu time", 1, &ev.t_gpu_ns)) < 0)
                return e;
            if (r->p < r->le) {
                if ((e = next(r, "'p' or end of line")) < 0)
                    return e;
                if (!is_tok(r, "p"))
                    return expected(r, -EINVAL, r->p, "'p' or end of line");
            }
        }
        if (r->p < r->le) {
            ev.flags = HOFF__TEV_PINNED;
            r->p++;
        }
    }
    if ((e = eol(r)) < 0)
        return e;
    return add(r, &ev);
}

static int block_line(struct rd *r, int kind, uint8_t flags) {
    struct hoff__trace *t = r->t;
    struct hoff__tev ev;
    uint64_t v;
    int e;

    memset(&ev, 0, sizeof ev);
    ev.kind = (uint8_t)kind;
    ev.flags = flags;
    ev.name = UINT32_MAX;
    if ((e = num(r, "a live block id", &v)) < 0)
        return e;
    if (v >= t->nblocks || t->blocks[v].free_ev != UINT32_MAX) {
        char g[64];

        if (v < t->nblocks)
            return fail(r, -EINVAL, r->tok, "expected a live block id, got %s (freed at event %u)",
                        got(r, r->tok, g, sizeof g), t->blocks[v].free_ev);
        return fail(r, -EINVAL, r->tok, "expected a live block id, got %s (never allocated)",
                    got(r, r->tok, g, sizeof g));
    }
    ev.block = (uint32_t)v;
    if ((e = num(r, "a stream", &ev.stream)) < 0 || (e = tnum(r, "a cpu time in ns", "cpu time", 0, &ev.t_cpu_ns)) < 0 ||
        (e = opt_gpu(r, &ev.t_gpu_ns)) < 0 || (e = eol(r)) < 0)
        return e;
    return add(r, &ev);
}

static int op_line(struct rd *r) {
    struct hoff__tev ev;
    char what[64];
    uint64_t v;
    int e;

    memset(&ev, 0, sizeof ev);
    ev.kind = HOFF__TEV_OP;
    if (r->p + 1 < r->le && r->p[1] == '-' && (r->p + 2 == r->le || r->p[2] == ' ')) {
        ev.name = UINT32_MAX;
        r->p += 2;
    } else {
        e = num(r, "an op name index or '-'", &v);
        if (e == -ERANGE)
            return e;
        if (e < 0 || v >= r->t->nnames) {
            if (r->t->nnames)
                snprintf(what, sizeof what, "an op name index (0 to %u) or '-'", r->t->nnames - 1);
            else
                snprintf(what, sizeof what, "'-' (the header has no names)");
            return expected(r, -EINVAL, e < 0 ? r->p : r->tok, what);
        }
        ev.name = (uint32_t)v;
    }
    if ((e = tnum(r, "a cpu time in ns", "cpu time", 0, &ev.t_cpu_ns)) < 0 || (e = opt_gpu(r, &ev.t_gpu_ns)) < 0 ||
        (e = eol(r)) < 0)
        return e;
    return add(r, &ev);
}

static int region_line(struct rd *r, int kind) {
    struct hoff__tev ev;
    int e;

    memset(&ev, 0, sizeof ev);
    ev.kind = (uint8_t)kind;
    ev.name = UINT32_MAX;
    if (kind == HOFF__TEV_REGION_END && r->depth == 0)
        return fail(r, -EINVAL, r->ls, "expected an open region, got 're' (no 'rb' is open)");
    if ((e = tnum(r, "a cpu time in ns", "cpu time", 0, &ev.t_cpu_ns)) < 0 || (e = opt_gpu(r, &ev.t_gpu_ns)) < 0 ||
        (e = eol(r)) < 0)
        return e;
    if ((e = add(r, &ev)) < 0)
        return e;
    if (kind == HOFF__TEV_REGION_BEGIN)
        r->depth++;
    else
        r->depth--;
    return 0;
}

static const char ev_list[] = "an event (a, f, r, w, o, rb, re, end)";

static int line(struct rd *r, const char *ls, const char *le) {
    const char *te;
    size_t n;

    r->ls = r->p = r->tok = ls;
    r->le = le;
    if (r->phase == P_VERSION) {
        uint64_t v;
        int e;

        te = memchr(ls, ' ', (size_t)(le - ls));
        if (!te)
            te = le;
        if (te - ls != 10 || memcmp(ls, "hoff-trace", 10) != 0)
            return expected(r, -EINVAL, ls, "'hoff-trace' (the first line is 'hoff-trace 1')");
        r->p = te;
        if ((e = num(r, "a version number", &v)) < 0)
            return e;
        if (v != HOFF__TRACE_VERSION)
            return expected(r, -EINVAL, r->tok, "version 1");
        if ((e = eol(r)) < 0)
            return e;
        r->phase = P_HEADER;
        return 0;
    }
    if (ls == le || *ls == '#')
        return 0;       /* blank line or comment */
    te = memchr(ls, ' ', (size_t)(le - ls));
    if (!te)
        te = le;
    n = (size_t)(te - ls);
    r->p = te;
    if (r->phase == P_END)
        return expected(r, -EINVAL, ls, "end of file after 'end'");
    switch (*ls) {
    case 'a':
        if (n == 1)
            goto event;
        break;
    case 'f':
    case 'w':
    case 'o':
        if (n == 1)
            goto event;
        break;
    case 'r':
        if (n == 1 || (n == 2 && (ls[1] == 'b' || ls[1] == 'e')))
            goto event;
        break;
    case 'e':
        if (n == 3 && ls[1] == 'n' && ls[2] == 'd')
            goto event;
        break;
    }
    if (r->phase == P_HEADER)
        return header_line(r, te);
    {
        size_t k;

        for (k = 0; k < K_COUNT; k++)
            if (strlen(key_names[k]) == n && memcmp(ls, key_names[k], n) == 0)
                return expected(r, -EINVAL, ls, "an event (a, f, r, w, o, rb, re, end); "
                                "header keys come before the first event");
    }
    return expected(r, -EINVAL, ls, ev_list);

event:
    r->phase = P_EVENTS;
    switch (*ls) {
    case 'a':
        return alloc_line(r);
    case 'f':
        return block_line(r, HOFF__TEV_FREE, 0);
    case 'w':
        return block_line(r, HOFF__TEV_ACCESS, HOFF__TEV_WRITE);
    case 'o':
        return op_line(r);
    case 'r':
        if (n == 1)
            return block_line(r, HOFF__TEV_ACCESS, 0);
        return region_line(r, ls[1] == 'b' ? HOFF__TEV_REGION_BEGIN : HOFF__TEV_REGION_END);
    default: {     /* end */
        int e = eol(r);

        if (e < 0)
            return e;
        if (r->depth)
            return fail(r, -EINVAL, ls, "expected 're' closing %u open region(s), got 'end'", r->depth);
        r->phase = P_END;
        return 0;
    }
    }
}

/* Parse the complete lines of buf (and, when final, a last line without a
 * newline); *used is what was consumed. */
static int parse_lines(struct rd *r, const char *buf, size_t len, int final, size_t *used) {
    const char *p = buf, *end = buf + len;
    int e;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *le, *nx;

        if (!nl && !final) {
            if ((size_t)(end - p) > MAX_LINE) {
                r->line++;
                r->ls = p;
                return fail(r, -EINVAL, p + MAX_LINE, "line longer than %zu bytes", MAX_LINE);
            }
            break;
        }
        le = nl ? nl : end;
        nx = nl ? nl + 1 : end;
        r->line++;
        if ((size_t)(le - p) > MAX_LINE) {
            r->ls = p;
            return fail(r, -EINVAL, p + MAX_LINE, "line longer than %zu bytes", MAX_LINE);
        }
        if (le > p && le[-1] == '\r')
            le--;
        if ((e = line(r, p, le)) < 0)
            return e;
        p = nx;
    }
    *used = (size_t)(p - buf);
    return 0;
}

static int at_eof(struct rd *r) {
    int e;

    if (r->phase != P_END) {
        r->line++;
        r->ls = r->p = r->le = "";
        if (r->phase == P_VERSION)
            return fail(r, -EINVAL, r->ls, "expected 'hoff-trace 1', got end of file");
        return fail(r, -EINVAL, r->ls, "expected 'end' (the trace is truncated), got end of file");
    }
    if ((e = hoff__trace_finish(r->t)) < 0)
        return fail_plain(r, e, "%s", hoff_last_error());
    return 0;
}

/* --- input sources: memory or FILE, plain or gzip ---------------------------- */

struct src {
    const unsigned char *mem;
    size_t memlen, mempos;
    FILE *f;
    unsigned char peek[2];
    size_t npeek, peekpos;
    int gz;
#ifdef HAVE_ZLIB
    int zinit, zdone, raw_eof;
    int zerr;                   /* an error to report on the next read */
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
static int gz_read(struct rd *r, struct src *s, unsigned char *dst, size_t n, size_t *got) {
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
    return fail_plain(r, s->zerr, "gzip: %s, after line %zu", s->zwhy, r->line);
}
#endif

static int src_read(struct rd *r, struct src *s, unsigned char *dst, size_t n, size_t *got) {
#ifdef HAVE_ZLIB
    if (s->gz)
        return gz_read(r, s, dst, n, got);
#endif
    if (raw_read(s, dst, n, got) < 0)
        return fail_plain(r, -EIO, "read error after line %zu: %s", r->line, strerror(errno));
    return 0;
}

static int src_open(struct rd *r, struct src *s) {
    size_t k;

    if (raw_read(s, s->peek, 2, &k) < 0)
        return fail_plain(r, -EIO, "read error: %s", strerror(errno));
    s->npeek = k;
    if (k < 2 || s->peek[0] != 0x1f || s->peek[1] != 0x8b)
        return 0;
#ifdef HAVE_ZLIB
    s->gz = 1;
    s->in = malloc(ZIN);
    if (!s->in)
        return fail_plain(r, -ENOMEM, "out of memory");
    memset(&s->z, 0, sizeof s->z);
    if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK)
        return fail_plain(r, -ENOMEM, "gzip: cannot start the decompressor");
    s->zinit = 1;
    return 0;
#else
    return fail_plain(r, -ENOTSUP, "the trace is gzip-compressed and hoff was built without zlib "
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
 * needs the room; a partial line left over is at most MAX_LINE <= CHUNK / 4,
 * and at most half the buffer before it doubles, so every read has room. */
static int drive(struct rd *r, struct src *s) {
    unsigned char *buf, *nb;
    size_t cap = (size_t)64 << 10, have = 0, got, used;
    int e = 0, eof = 0;

    if ((e = src_open(r, s)) < 0)
        return e;
    if (!(buf = malloc(cap)))
        return fail_plain(r, -ENOMEM, "out of memory");
    while (!eof) {
        if ((e = src_read(r, s, buf + have, cap - have, &got)) < 0)
            break;
        eof = got == 0;
        have += got;
        if ((e = parse_lines(r, (const char *)buf, have, eof, &used)) < 0)
            break;
        memmove(buf, buf + used, have - used);
        if (cap < CHUNK && (have == cap || have - used > cap / 2)) {
            if (!(nb = realloc(buf, cap * 2))) {
                e = fail_plain(r, -ENOMEM, "out of memory");
                break;
            }
            buf = nb;
            cap *= 2;
        }
        have -= used;
    }
    free(buf);
    if (e < 0)
        return e;
    return at_eof(r);
}

static void rd_start(struct rd *r, struct hoff__trace *t, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->t = t;
    r->err = err;
    r->errlen = errlen;
    r->phase = P_VERSION;
    hoff__trace_init(t);
    if (err && errlen)
        err[0] = 0;
}

static int rd_end(struct rd *r, int e) {
    if (r->cloc)
        freelocale(r->cloc);
    if (e < 0) {
        if (!r->failed)
            fail_plain(r, e, "%s", strerror(-e));
        hoff__trace_destroy(r->t);
    }
    return e;
}

int hoff__trace_parse(struct hoff__trace *t, const char *buf, size_t len, char *err, size_t errlen) {
    struct rd r;
    size_t used;
    int e;

    rd_start(&r, t, err, errlen);
    if (len >= 2 && (unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b) {
        struct src s;

        memset(&s, 0, sizeof s);
        s.mem = (const unsigned char *)buf;
        s.memlen = len;
        e = drive(&r, &s);
        src_close(&s);
        return rd_end(&r, e);
    }
    e = parse_lines(&r, buf, len, 1, &used);
    if (e == 0)
        e = at_eof(&r);
    return rd_end(&r, e);
}

int hoff__trace_read(struct hoff__trace *t, FILE *f, char *err, size_t errlen) {
    struct rd r;
    struct src s;
    int e;

    rd_start(&r, t, err, errlen);
    memset(&s, 0, sizeof s);
    s.f = f;
    e = drive(&r, &s);
    src_close(&s);
    return rd_end(&r, e);
}

int hoff__trace_load(struct hoff__trace *t, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    int e;

    if (!f) {
        struct rd r;

        e = -errno;
        rd_start(&r, t, err, errlen);
        fail_plain(&r, e, "cannot open '%s': %s", path, strerror(-e));
        return rd_end(&r, e);
    }
    e = hoff__trace_read(t, f, err, errlen);
    fclose(f);
    return e;
}

/* ========================================================================== */
/* writer                                                                     */
/* ========================================================================== */

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

static int needs_escape(unsigned char c) {
    return c <= 0x20 || c == 0x7f || c == '\\';
}

static size_t escaped_len(const char *s, size_t n) {
    size_t i, k = n;

    for (i = 0; i < n; i++)
        k += needs_escape((unsigned char)s[i]) ? 3 : 0;
    return k;
}

/* Escaped text (see text() in the reader). */
static void w_text(struct wr *w, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        w_need(w, 4);

        if (needs_escape(c)) {
            w->buf[w->n++] = '\\';
            w->buf[w->n++] = 'x';
            w->buf[w->n++] = hex[c >> 4];
            w->buf[w->n++] = hex[c & 15];
        } else {
            w->buf[w->n++] = (char)c;
        }
    }
}

static void w_key_u64(struct wr *w, const char *key, uint64_t v) {
    w_need(w, 64);
    w_str(w, key, strlen(key));
    w_sp_u64(w, v);
    w->buf[w->n++] = '\n';
}

static void w_key_double(struct wr *w, const char *key, double v, locale_t cloc) {
    locale_t old;
    char tmp[48];
    int n;

    old = uselocale(cloc);
    n = snprintf(tmp, sizeof tmp, "%.17g", v);
    uselocale(old);
    w_need(w, 96);
    w_str(w, key, strlen(key));
    w->buf[w->n++] = ' ';
    w_str(w, tmp, (size_t)n);
    w->buf[w->n++] = '\n';
}

static int write_all(const struct hoff__trace *t, struct wr *w) {
    size_t i, blen = strnlen(t->backend, sizeof t->backend - 1);
    uint32_t k;
    locale_t cloc;

    for (k = 0; k < t->nnames; k++)
        if (t->names[k] && escaped_len(t->names[k], strlen(t->names[k])) + 16 > MAX_LINE)
            return hoff__error(-ENAMETOOLONG, "trace: op name %u is too long to write", k);
    if (!isfinite(t->h2d_gbps) || signbit(t->h2d_gbps) || !isfinite(t->d2h_gbps) || signbit(t->d2h_gbps))
        return hoff__error(-EINVAL, "trace: bandwidths must be finite and >= 0 (h2d %g, d2h %g GB/s)",
                           t->h2d_gbps, t->d2h_gbps);
    for (k = 0; k < blen; k++)
        if (t->backend[k] == 0)
            blen = k;
    if (!(cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0)))
        return hoff__error(-ENOMEM, "trace: out of memory");
    if (!(w->buf = malloc(WBUF))) {
        freelocale(cloc);
        return hoff__error(-ENOMEM, "trace: out of memory");
    }
    w_need(w, 16);
    w_str(w, "hoff-trace 1\n", 13);
    w_key_u64(w, "budget", t->budget_bytes);
    w_key_u64(w, "host_cap", t->host_cap_bytes);
    w_key_double(w, "h2d_gbps", t->h2d_gbps, cloc);
    w_key_double(w, "d2h_gbps", t->d2h_gbps, cloc);
    w_key_u64(w, "step_ns", t->step_ns);
    w_key_u64(w, "step_gpu_ns", t->step_gpu_ns);
    freelocale(cloc);
    if (blen) {
        w_need(w, 16);
        w_str(w, "backend ", 8);
        w_text(w, t->backend, blen);
        w->buf[w->n++] = '\n';
    }
    for (k = 0; k < t->nnames; k++) {
        const char *s = t->names[k] ? t->names[k] : "";
        size_t n = strlen(s);

        w_need(w, 32);
        w_str(w, "name", 4);
        w_sp_u64(w, k);
        if (n) {
            w->buf[w->n++] = ' ';
            w_text(w, s, n);
        }
        w->buf[w->n++] = '\n';
    }
    for (i = 0; i < t->nev && !w->err; i++) {
        const struct hoff__tev *e = &t->ev[i];

        w_need(w, 128);
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
            break;
        case HOFF__TEV_REGION_BEGIN:
        case HOFF__TEV_REGION_END:
            w_str(w, e->kind == HOFF__TEV_REGION_BEGIN ? "rb" : "re", 2);
            w_sp_u64(w, e->t_cpu_ns);
            if (e->t_gpu_ns != HOFF__TIME_UNKNOWN)
                w_sp_u64(w, e->t_gpu_ns);
            break;
        default:
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
        return hoff__error(-ENOTSUP, "trace: cannot write '%s' compressed: hoff was built without zlib "
                           "(use a path without .gz)", path);
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
