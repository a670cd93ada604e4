/* trace_parse.c — the trace text format's grammar (doc/trace-format.md): the version line, the header keys and
 * the events, read field by field from complete lines with "LINE:COL: expected X, got 'Y'" errors; the input
 * sources (trace_read.c) feed it lines.
 * Threading: each reader state (trace_io.h) is owned by one thread; nothing is shared. */
#include "config.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "trace/trace.h"
#include "trace/trace_io.h"

#define SIZE_LIMIT ((uint64_t)1 << 47) /* sizes are 1 .. 2^47-1, as in trace.c */

const char *const hoff__trace_keys[HOFF__TK_COUNT] = {
    "budget", "host_cap", "h2d_gbps", "d2h_gbps", "step_ns", "step_gpu_ns", "backend", "name",
};

enum { P_VERSION, P_HEADER, P_EVENTS, P_END };

static void set_err(struct hoff__trace_rd *r, int err, const char *msg) {
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
int hoff__trace_rd_fail(struct hoff__trace_rd *r, int err, const char *fmt, ...) {
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_err(r, err, msg);
    return err;
}

/* An error at byte `at` of the current line: "LINE:COL: message". */
static int fail(struct hoff__trace_rd *r, int err, const char *at, const char *fmt, ...) HOFF__PRINTF(4, 5);
static int fail(struct hoff__trace_rd *r, int err, const char *at, const char *fmt, ...) {
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
static const char *got(const struct hoff__trace_rd *r, const char *at, char *out, size_t n) {
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

static int expected(struct hoff__trace_rd *r, int err, const char *at, const char *what) {
    char g[64];

    return fail(r, err, at, "expected %s, got %s", what, got(r, at, g, sizeof g));
}

/* Step over the single space before the next field. */
static int next(struct hoff__trace_rd *r, const char *what) {
    if (r->p >= r->le || *r->p != ' ')
        return expected(r, -EINVAL, r->p, what);
    r->p++;
    if (r->p >= r->le || *r->p == ' ')
        return expected(r, -EINVAL, r->p, what);
    r->tok = r->p;
    return 0;
}

static int num_slow(struct hoff__trace_rd *r, const char *what, uint64_t *out) {
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
static inline __attribute__((always_inline)) int num(struct hoff__trace_rd *r, const char *what, uint64_t *out) {
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

static int eol(struct hoff__trace_rd *r) {
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
static int tnum(struct hoff__trace_rd *r, const char *what, const char *kind, int unknown_ok, uint64_t *out) {
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
static int opt_gpu(struct hoff__trace_rd *r, uint64_t *tg) {
    int e;

    *tg = HOFF__TIME_UNKNOWN;
    if (r->p < r->le && (e = tnum(r, "a gpu time in ns or end of line", "gpu time", 1, tg)) < 0)
        return e;
    return 0;
}

static int is_tok(const struct hoff__trace_rd *r, const char *s) {
    size_t n = strlen(s);

    return (size_t)(r->le - r->p) >= n && memcmp(r->p, s, n) == 0 && (r->p + n == r->le || r->p[n] == ' ');
}

/* At " p" or " k" (an allocation's flag) rather than a number? */
static int is_flag(const struct hoff__trace_rd *r) {
    return r->p + 1 < r->le && (r->p[1] == 'p' || r->p[1] == 'k') && (r->p + 2 == r->le || r->p[2] == ' ');
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
static int text(struct hoff__trace_rd *r, const char *what, char **out, size_t *outlen) {
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
        } else if (hoff__trace_needs_escape(c)) {
            break;
        } else {
            *o++ = (char)c;
        }
    }
    if (p < le && *p != ' ') {
        char g[64], w[200];

        free(s);
        snprintf(w, sizeof w, "%s (bytes 0x21-0x7e and 0x80-0xff as they are, others as \\xHH, never \\x00)", what);
        return fail(r, -EINVAL, p, "expected %s, got %s", w, got(r, p, g, sizeof g));
    }
    *o = 0;
    *outlen = (size_t)(o - s);
    *out = s;
    r->p = p;
    return 0;
}

static int number_double(struct hoff__trace_rd *r, const char *what, double *out) {
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

static int add(struct hoff__trace_rd *r, const struct hoff__tev *e) {
    int err = hoff__trace_append(r->t, e);

    if (err < 0)
        return fail(r, err, r->ls, "%s", hoff_last_error());
    return 0;
}

static int header_line(struct hoff__trace_rd *r, const char *te) {
    struct hoff__trace *t = r->t;
    size_t n = (size_t)(te - r->ls);
    uint64_t v;
    int k, e;

    for (k = 0; k < HOFF__TK_COUNT; k++)
        if (strlen(hoff__trace_keys[k]) == n && memcmp(r->ls, hoff__trace_keys[k], n) == 0)
            break;
    if (k == HOFF__TK_COUNT)
        return expected(r, -EINVAL, r->ls,
                        "a header key (budget, host_cap, h2d_gbps, d2h_gbps, step_ns, step_gpu_ns, backend, "
                        "name) or an event");
    if (k != HOFF__TK_NAME && r->key_line[k])
        return fail(r, -EINVAL, r->ls, "duplicate header key '%s' (first on line %zu)", hoff__trace_keys[k],
                    r->key_line[k]);
    r->key_line[k] = r->line;
    r->p = te;
    switch (k) {
    case HOFF__TK_BUDGET: e = num(r, "a budget in bytes", &t->budget_bytes); break;
    case HOFF__TK_HOST_CAP: e = num(r, "a host cap in bytes", &t->host_cap_bytes); break;
    case HOFF__TK_STEP: e = tnum(r, "a step time in ns", "step time", 0, &t->step_ns); break;
    case HOFF__TK_STEP_GPU: e = tnum(r, "a gpu step time in ns", "gpu step time", 1, &t->step_gpu_ns); break;
    case HOFF__TK_H2D: e = number_double(r, "a bandwidth in GB/s (a decimal number >= 0)", &t->h2d_gbps); break;
    case HOFF__TK_D2H: e = number_double(r, "a bandwidth in GB/s (a decimal number >= 0)", &t->d2h_gbps); break;
    case HOFF__TK_BACKEND: {
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
    case HOFF__TK_NAME: {
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
    default: e = 0;
    }
    if (e < 0)
        return e;
    return eol(r);
}

static int alloc_line(struct hoff__trace_rd *r) {
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
        if ((e = next(r, "a gpu time in ns, 'p', 'k' or end of line")) < 0)
            return e;
        r->p--; /* back onto the space */
        if (!is_flag(r)) {
            if ((e = tnum(r, "a gpu time in ns, 'p', 'k' or end of line", "gpu time", 1, &ev.t_gpu_ns)) < 0)
                return e;
        }
    }
    /* The flags, each at most once, in any order. */
    while (r->p < r->le) {
        uint8_t f;

        if ((e = next(r, "'p', 'k' or end of line")) < 0)
            return e;
        f = is_tok(r, "p") ? HOFF__TEV_PINNED : is_tok(r, "k") ? HOFF__TEV_KEPT : 0;
        if (!f || (ev.flags & f))
            return expected(r, -EINVAL, r->p, f ? "each of 'p' and 'k' at most once" : "'p', 'k' or end of line");
        ev.flags |= f;
        r->p++;
    }
    if ((e = eol(r)) < 0)
        return e;
    return add(r, &ev);
}

static int block_line(struct hoff__trace_rd *r, int kind, uint8_t flags) {
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
    if ((e = num(r, "a stream", &ev.stream)) < 0 ||
        (e = tnum(r, "a cpu time in ns", "cpu time", 0, &ev.t_cpu_ns)) < 0 || (e = opt_gpu(r, &ev.t_gpu_ns)) < 0 ||
        (e = eol(r)) < 0)
        return e;
    return add(r, &ev);
}

static int op_line(struct hoff__trace_rd *r) {
    struct hoff__tev ev;
    char what[64];
    uint64_t v;
    int e, gpu;

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
    if ((e = tnum(r, "a cpu time in ns", "cpu time", 0, &ev.t_cpu_ns)) < 0)
        return e;
    ev.t_gpu_ns = HOFF__TIME_UNKNOWN;
    gpu = r->p + 1 < r->le && r->p[1] >= '0' && r->p[1] <= '9';
    if (gpu && (e = opt_gpu(r, &ev.t_gpu_ns)) < 0)
        return e;
    if (r->p < r->le) { /* the op's phase */
        const char *w, *want = gpu ? "a phase (fwd, bwd, loss, opt) or end of line"
                                   : "a gpu time in ns, a phase (fwd, bwd, loss, opt) or end of line";
        int ph;

        if ((e = next(r, want)) < 0)
            return e;
        for (w = r->p; r->p < r->le && *r->p != ' '; r->p++)
            ;
        ph = hoff__trace_phase_of_word(w, (size_t)(r->p - w));
        if (ph < 0)
            return expected(r, -EINVAL, w, want);
        ev.flags = (uint8_t)((unsigned)ph << HOFF__TEV_PHASE_SHIFT);
    }
    if ((e = eol(r)) < 0)
        return e;
    return add(r, &ev);
}

static int region_line(struct hoff__trace_rd *r, int kind) {
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

static int line(struct hoff__trace_rd *r, const char *ls, const char *le) {
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
        if ((size_t)(te - ls) != HOFF__TRACE_MAGIC_LEN || memcmp(ls, HOFF__TRACE_MAGIC, HOFF__TRACE_MAGIC_LEN) != 0)
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
        return 0; /* blank line or comment */
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

        for (k = 0; k < HOFF__TK_COUNT; k++)
            if (strlen(hoff__trace_keys[k]) == n && memcmp(ls, hoff__trace_keys[k], n) == 0)
                return expected(r, -EINVAL, ls,
                                "an event (a, f, r, w, o, rb, re, end); "
                                "header keys come before the first event");
    }
    return expected(r, -EINVAL, ls, ev_list);

event:
    r->phase = P_EVENTS;
    switch (*ls) {
    case 'a': return alloc_line(r);
    case 'f': return block_line(r, HOFF__TEV_FREE, 0);
    case 'w': return block_line(r, HOFF__TEV_ACCESS, HOFF__TEV_WRITE);
    case 'o': return op_line(r);
    case 'r':
        if (n == 1)
            return block_line(r, HOFF__TEV_ACCESS, 0);
        return region_line(r, ls[1] == 'b' ? HOFF__TEV_REGION_BEGIN : HOFF__TEV_REGION_END);
    default: { /* end */
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
int hoff__trace_rd_lines(struct hoff__trace_rd *r, const char *buf, size_t len, int final, size_t *used) {
    const char *p = buf, *end = buf + len;
    int e;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *le, *nx;

        if (!nl && !final) {
            if ((size_t)(end - p) > HOFF__TRACE_MAX_LINE) {
                r->line++;
                r->ls = p;
                return fail(r, -EINVAL, p + HOFF__TRACE_MAX_LINE, "line longer than %zu bytes", HOFF__TRACE_MAX_LINE);
            }
            break;
        }
        le = nl ? nl : end;
        nx = nl ? nl + 1 : end;
        r->line++;
        if ((size_t)(le - p) > HOFF__TRACE_MAX_LINE) {
            r->ls = p;
            return fail(r, -EINVAL, p + HOFF__TRACE_MAX_LINE, "line longer than %zu bytes", HOFF__TRACE_MAX_LINE);
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

int hoff__trace_rd_eof(struct hoff__trace_rd *r) {
    int e;

    if (r->phase != P_END) {
        r->line++;
        r->ls = r->p = r->le = "";
        if (r->phase == P_VERSION)
            return fail(r, -EINVAL, r->ls, "expected 'hoff-trace 1', got end of file");
        return fail(r, -EINVAL, r->ls, "expected 'end' (the trace is truncated), got end of file");
    }
    if ((e = hoff__trace_finish(r->t)) < 0)
        return hoff__trace_rd_fail(r, e, "%s", hoff_last_error());
    return 0;
}

void hoff__trace_rd_start(struct hoff__trace_rd *r, struct hoff__trace *t, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->t = t;
    r->err = err;
    r->errlen = errlen;
    r->phase = P_VERSION;
    hoff__trace_init(t);
    if (err && errlen)
        err[0] = 0;
}

int hoff__trace_rd_end(struct hoff__trace_rd *r, int e) {
    if (r->cloc)
        freelocale(r->cloc);
    if (e < 0) {
        if (!r->failed)
            hoff__trace_rd_fail(r, e, "%s", strerror(-e));
        hoff__trace_destroy(r->t);
    }
    return e;
}
