/* stats.c — struct hoff_stats as one JSON object, a key per HOFF_STATS_FIELDS entry, in order.
 * Threading: pure; formats the caller's snapshot. */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "core/core.h"

/* {"version":1,"budget_bytes":0,...}: snprintf semantics, so a short buffer
 * gets a NUL-terminated prefix and the return value is the full length. */
HOFF_API int hoff_stats_format_json(const struct hoff_stats *st, char *buf, size_t len) {
    size_t pos = 0;
    int n;

    if (!st)
        return hoff__error(-EINVAL, "hoff_stats_format_json: stats is NULL");
    if (st->version != HOFF_STATS_VERSION)
        return hoff__error(-EINVAL, "hoff_stats_format_json: stats version %u, expected %d", (unsigned)st->version,
                           HOFF_STATS_VERSION);
    if (!buf && len)
        return hoff__error(-EINVAL, "hoff_stats_format_json: buf is NULL");
    if (len)
        buf[0] = '\0';

#define HOFF_EMIT_(...)                                                          \
    do {                                                                         \
        size_t room_ = pos < len ? len - pos : 0;                                \
        n = snprintf(room_ ? buf + pos : NULL, room_, __VA_ARGS__);              \
        if (n < 0)                                                               \
            return hoff__error(-EIO, "hoff_stats_format_json: snprintf failed"); \
        pos += (size_t)n;                                                        \
    } while (0)

    HOFF_EMIT_("{\"version\":%u", (unsigned)st->version);
#define HOFF_FIELD_(name, desc) HOFF_EMIT_(",\"" #name "\":%llu", (unsigned long long)st->name);
    HOFF_STATS_FIELDS(HOFF_FIELD_)
#undef HOFF_FIELD_
    HOFF_EMIT_("}");
#undef HOFF_EMIT_
    return (int)pos;
}
