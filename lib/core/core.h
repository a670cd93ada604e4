/* core.h — logging, the thread's last error, and size parsing shared by every module.
 * Threading: all functions are thread safe; the last error is thread-local. */
#ifndef HOFF_CORE_H
#define HOFF_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hoff.h"

#if defined(__GNUC__)
#define HOFF__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HOFF__PRINTF(a, b)
#endif

/* Process-wide log level (the last context created sets it). */
void hoff__log_set_level(int level);
int hoff__log_get_level(void);
/* Log to stderr as "hoff: LEVEL: message\n" when level <= the log level. */
void hoff__log(int level, const char *fmt, ...) HOFF__PRINTF(2, 3);
/* Log once per call site: pass a static int flag. */
#define HOFF__LOG_ONCE(level, ...)                                   \
    do {                                                             \
        static int hoff__once_;                                      \
        if (!__atomic_exchange_n(&hoff__once_, 1, __ATOMIC_RELAXED)) \
            hoff__log((level), __VA_ARGS__);                         \
    } while (0)

/* Record the thread's last error message (read by hoff_last_error) and
 * return err (a -errno) so callers can write: return hoff__error(-EINVAL, ...). */
int hoff__error(int err, const char *fmt, ...) HOFF__PRINTF(2, 3);
/* Forget the thread's last error (a thread that runs commands for others
 * starts each one clean, so a failure reports its own message). */
void hoff__error_clear(void);
/* A malloc'd copy of the thread's last error, NULL if there is none (or no
 * memory); the error is cleared.  Hands a failure's message from the thread
 * where it happened to the thread that reports it. */
char *hoff__error_take(void);
/* The error contract of the public calls (hoff.h, hoff_last_error): a call that fails has set the thread's
 * message, and the message names the call.  An entry point whose failure may come from below (a layer that does
 * not know which public call it serves) brackets its work: seq = hoff__error_seq() first, then
 * return hoff__error_since(seq, rc, "hoff_x").  For rc < 0 it makes sure the message is this call's: none set
 * since seq gives "hoff_x: <hoff_strerror(rc)>"; one set that does not name hoff_x gets "hoff_x: " in front.
 * Returns rc. */
unsigned hoff__error_seq(void);
int hoff__error_since(unsigned seq, int rc, const char *fn);

/* "4096", "64K", "1.5G", "2MiB", "3 GB" -> bytes (powers of 1024).  -EINVAL
 * on anything else, -ERANGE on overflow. */
int hoff__parse_size(const char *s, uint64_t *out);
/* Bytes as a short human string ("1.5 GiB") into buf. */
const char *hoff__fmt_size(uint64_t bytes, char *buf, size_t len);
/* Nanoseconds as a short human string ("3.4 us", "1.25 ms") into buf (duration.c). */
const char *hoff__fmt_time(uint64_t ns, char *buf, size_t len);

static inline uint64_t hoff__align_up(uint64_t v, uint64_t a) {
    return (v + a - 1) / a * a;
}

#endif
