/* log.c — hoff's log lines on stderr, filtered by the process-wide log level.
 * Threading: thread safe; each line is written with one fprintf call. */
#include "config.h"

#include <stdio.h>

#include "core/core.h"

static int log_level = HOFF_LOG_WARN;

void hoff__log_set_level(int level) {
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int hoff__log_get_level(void) {
    return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void hoff__log(int level, const char *fmt, ...) {
    static const char *const names[] = {"off", "error", "warning", "info", "debug"};
    char msg[1024];
    va_list ap;

    if (level > hoff__log_get_level() || level <= HOFF_LOG_OFF)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hoff: %s: %s\n", names[level > 4 ? 4 : level], msg);
}
