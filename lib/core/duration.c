/* duration.c — printing durations for reports and messages ("812 ns", "3.4 us", "1.25 ms", "2.00 s").
 * Threading: pure functions. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "core/core.h"

const char *hoff__fmt_time(uint64_t ns, char *buf, size_t len) {
    if (ns < 1000)
        snprintf(buf, len, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, len, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.2f s", (double)ns / 1e9);
    return buf;
}
