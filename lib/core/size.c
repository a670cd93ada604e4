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
    uint64_t ip = 0, frac = 0, scale = 1, mult = 1, v, f;
    int digits = 0, overflow = 0;

    if (!s)
        return -EINVAL;
    while (isspace((unsigned char)*s))
        s++;
    for (; isdigit((unsigned char)*s); s++, digits++) {
        uint64_t d = (uint64_t)(*s - '0');

        if (ip > UINT64_MAX / 10 || (ip == UINT64_MAX / 10 && d > UINT64_MAX % 10))
            overflow = 1;
        else
            ip = ip * 10 + d;
    }
    if (*s == '.') {
        for (s++; isdigit((unsigned char)*s); s++, digits++) {
            if (scale < 1000000000000000ull) { /* 15 digits are plenty */
                frac = frac * 10 + (uint64_t)(*s - '0');
                scale *= 10;
            }
        }
    }
    if (!digits)
        return -EINVAL;
    while (isspace((unsigned char)*s))
        s++;
    switch (toupper((unsigned char)*s)) {
    case '\0': break;
    case 'B': s++; break;
    case 'K': mult = 1ull << 10; break;
    case 'M': mult = 1ull << 20; break;
    case 'G': mult = 1ull << 30; break;
    case 'T': mult = 1ull << 40; break;
    default: return -EINVAL;
    }
    if (mult > 1) {
        s++;
        if (toupper((unsigned char)*s) == 'I')
            s++;
        if (toupper((unsigned char)*s) == 'B')
            s++;
    }
    while (isspace((unsigned char)*s))
        s++;
    if (*s)
        return -EINVAL;
    if (mult == 1 && frac)
        return -EINVAL; /* fractional bytes */
    if (overflow || ip > UINT64_MAX / mult)
        return -ERANGE;
    v = ip * mult;
    /* the fraction is below one unit (< 2^40): a double holds it exactly enough */
    f = (uint64_t)((double)frac / (double)scale * (double)mult + 0.5);
    if (f > UINT64_MAX - v)
        return -ERANGE;
    *out = v + f;
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
