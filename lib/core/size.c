/* size.c — parsing and printing byte sizes ("64K", "1.5G", "2 MiB").
 * Threading: pure functions. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/core.h"

int hoff__parse_size(const char *s, uint64_t *out) {
    char *end;
    double v;
    uint64_t mult = 1;

    if (!s)
        return -EINVAL;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s) && *s != '.')
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -EINVAL;
    while (isspace((unsigned char)*end))
        end++;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'B': mult = 1; end++; goto tail_done;
    case 'K': mult = 1ull << 10; break;
    case 'M': mult = 1ull << 20; break;
    case 'G': mult = 1ull << 30; break;
    case 'T': mult = 1ull << 40; break;
    default: return -EINVAL;
    }
    if (*end) {
        end++;
        if (toupper((unsigned char)*end) == 'I')
            end++;
        if (toupper((unsigned char)*end) == 'B')
            end++;
    }
tail_done:
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -EINVAL;
    if (v * (double)mult >= 18446744073709551616.0)
        return -ERANGE;
    if (mult == 1 && v != floor(v))
        return -EINVAL; /* fractional bytes */
    *out = (uint64_t)(v * (double)mult + 0.5);
    return 0;
}

const char *hoff__fmt_size(uint64_t bytes, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;

    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}
