/* trace_io.h — the internal interface between the pieces of the trace text format (doc/trace-format.md): the
 * line grammar (trace_parse.c) and its reader state, which the input sources (trace_read.c) feed, and the header
 * keys and the line limit the writer (trace_write.c) shares with the reader.
 * Threading: a reader state is owned by one thread; nothing here locks. */
#ifndef HOFF_TRACE_IO_H
#define HOFF_TRACE_IO_H

#include <locale.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "trace/trace.h"

#define HOFF__TRACE_MAGIC "hoff-trace" /* the first line: the magic, a space, HOFF__TRACE_VERSION */
#define HOFF__TRACE_MAGIC_LEN (sizeof HOFF__TRACE_MAGIC - 1)
#define HOFF__TRACE_MAX_LINE ((size_t)1 << 20) /* longest line accepted (and written), without its newline */

/* Header keys, in the order the writer puts them. */
enum {
    HOFF__TK_BUDGET,
    HOFF__TK_HOST_CAP,
    HOFF__TK_H2D,
    HOFF__TK_D2H,
    HOFF__TK_STEP,
    HOFF__TK_STEP_GPU,
    HOFF__TK_BACKEND,
    HOFF__TK_NAME,
    HOFF__TK_COUNT
};
extern const char *const hoff__trace_keys[HOFF__TK_COUNT];

/* The one escaping rule of text fields (names, backend): these bytes are
 * written as \xHH, and the reader stops a field at an unescaped one. */
static inline int hoff__trace_needs_escape(unsigned char c) {
    return c <= 0x20 || c == 0x7f || c == '\\';
}

/* The reader's state: the trace being built, where the errors go, the line and field being read. */
struct hoff__trace_rd {
    struct hoff__trace *t;
    char *err;
    size_t errlen;
    size_t line;         /* number of the current line, from 1 */
    const char *ls, *le; /* the current line (without its newline) */
    const char *p;       /* cursor in it */
    const char *tok;     /* start of the last field read */
    int phase;
    int failed;
    uint32_t depth;                  /* open regions */
    size_t key_line[HOFF__TK_COUNT]; /* line where each header key was seen (0: not yet) */
    locale_t cloc;                   /* the "C" locale for strtod, made on first use */
};

/* Start reading into t (initialised here; err, if any, emptied). */
void hoff__trace_rd_start(struct hoff__trace_rd *r, struct hoff__trace *t, char *err, size_t errlen);
/* Parse the complete lines of buf (and, when final, a last line without a
 * newline); *used is what was consumed.  0, or -errno with the message set. */
int hoff__trace_rd_lines(struct hoff__trace_rd *r, const char *buf, size_t len, int final, size_t *used);
/* The input is over: it must have ended with 'end'; finishes the trace.  0 or -errno, the message set. */
int hoff__trace_rd_eof(struct hoff__trace_rd *r);
/* Finish reading with result e: on failure, the message is set (strerror when nothing said more) and the trace
 * destroyed.  Returns e. */
int hoff__trace_rd_end(struct hoff__trace_rd *r, int e);
/* An error that is not about one place of a line (I/O, gzip): sets the message, returns err. */
int hoff__trace_rd_fail(struct hoff__trace_rd *r, int err, const char *fmt, ...) HOFF__PRINTF(3, 4);

#endif
