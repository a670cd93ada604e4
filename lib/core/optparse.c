/* optparse.c — parsing an option's text, the forms hoff_config_set and the HOFF_* variables accept ("512M",
 * "10us", "yes", "12.5", a name), into its value (the interface is optvalue.h).
 * Threading: pure functions of their arguments; parsing a double switches the calling thread's LC_NUMERIC for
 * the call. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "core/optvalue.h"

/* ---- parsing ------------------------------------------------------------- */

static int parse_bool(const char *s, int *out) {
    static const char *const yes[] = {"1", "yes", "true", "on", NULL};
    static const char *const no[] = {"0", "no", "false", "off", NULL};
    int i;

    for (i = 0; yes[i]; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = 1;
            return HOFF__P_OK;
        }
        if (!strcasecmp(s, no[i])) {
            *out = 0;
            return HOFF__P_OK;
        }
    }
    return HOFF__P_FORM;
}

/* A decimal integer, optionally signed, within [lo, hi] (else HOFF__P_RANGE). */
static int parse_integer(const char *s, long long lo, long long hi, long long *out) {
    const char *p = s + (*s == '+' || *s == '-');
    char *end;
    long long v;

    if (!isdigit((unsigned char)*p))
        return HOFF__P_FORM;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (*end)
        return HOFF__P_FORM;
    if (errno == ERANGE || v < lo || v > hi)
        return HOFF__P_RANGE;
    *out = v;
    return HOFF__P_OK;
}

static int parse_int(const char *s, int *out) {
    long long v;
    int rc = parse_integer(s, -2147483647LL - 1, 2147483647LL, &v);

    if (rc == HOFF__P_OK)
        *out = (int)v;
    return rc;
}

/* "-1" parses, and is out of range, as for an int. */
static int parse_uint32(const char *s, uint64_t *out) {
    long long v;
    int rc = parse_integer(s, 0, 4294967295LL, &v);

    if (rc == HOFF__P_OK)
        *out = (uint64_t)v;
    return rc;
}

/* s[0..n) as a string option: HOFF__P_RANGE if it does not fit the field, HOFF__P_FORM
 * if o has choices and s is none of them (any case; the registered spelling
 * is what *v points to).  An option with a check takes what is not a choice
 * as it is; check_val judges it. */
static int parse_string(const struct hoff__opt *o, const char *s, size_t n, union hoff__optval *v) {
    const char *c;
    int i;

    if (n >= o->size)
        return HOFF__P_RANGE;
    if (!o->choice_at) {
        v->s.p = s;
        v->s.n = n;
        return HOFF__P_OK;
    }
    for (i = 0; (c = o->choice_at(i)) != NULL; i++) {
        if (strlen(c) == n && !strncasecmp(s, c, n)) {
            v->s.p = c;
            v->s.n = n;
            return HOFF__P_OK;
        }
    }
    if (o->check) {
        v->s.p = s;
        v->s.n = n;
        return HOFF__P_OK;
    }
    return HOFF__P_FORM;
}

static int parse_enum(const struct hoff__opt *o, const char *s, int *out) {
    int i;

    for (i = 0; o->names[i]; i++) {
        if (!strcasecmp(s, o->names[i])) {
            *out = i;
            return HOFF__P_OK;
        }
    }
    for (i = 0; o->aliases && o->aliases[i].name; i++) {
        if (!strcasecmp(s, o->aliases[i].name)) {
            *out = o->aliases[i].value;
            return HOFF__P_OK;
        }
    }
    return HOFF__P_FORM;
}

/* A decimal number ("50", "12.5", "1e2"); no hex, inf or nan. */
static int parse_double(const char *s, double *out) {
    locale_t old = (locale_t)0, c;
    const char *p;
    char *end;
    int digits = 0, saved;
    double v;

    for (p = s; *p; p++) {
        if (isdigit((unsigned char)*p))
            digits = 1;
        else if (!strchr(".eE+-", *p))
            return HOFF__P_FORM;
    }
    if (!digits)
        return HOFF__P_FORM;
    c = hoff__c_numeric_begin(&old);
    errno = 0;
    v = strtod(s, &end);
    saved = errno;
    hoff__c_numeric_end(c, old);
    if (end == s || *end)
        return HOFF__P_FORM;
    if (saved == ERANGE || !isfinite(v))
        return HOFF__P_RANGE;
    *out = v;
    return HOFF__P_OK;
}

/* "250" (ns), "10us", "1.5ms", "2 s": a whole number of nanoseconds. */
static int parse_duration(const char *s, uint64_t *out) {
    static const struct {
        const char *sfx;
        uint64_t mult;
    } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}, {NULL, 0}};
    uint64_t ip = 0, frac = 0, scale = 1, mult = 0, v;
    const char *p = s;
    int digits = 0, has_frac = 0, i;

    for (; isdigit((unsigned char)*p); p++, digits++) {
        if (ip > (UINT64_MAX - 9) / 10)
            return HOFF__P_RANGE;
        ip = ip * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        has_frac = 1;
        for (p++; isdigit((unsigned char)*p); p++, digits++) {
            if (scale < 1000000000) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            } else if (*p != '0') {
                return HOFF__P_FORM; /* finer than a nanosecond */
            }
        }
    }
    if (!digits)
        return HOFF__P_FORM;
    while (isspace((unsigned char)*p))
        p++;
    if (!*p) {
        if (has_frac)
            return HOFF__P_FORM; /* a fraction of a nanosecond */
        mult = 1;
    }
    for (i = 0; !mult && units[i].sfx; i++)
        if (!strcasecmp(p, units[i].sfx))
            mult = units[i].mult;
    if (!mult)
        return HOFF__P_FORM;
    if (ip > UINT64_MAX / mult)
        return HOFF__P_RANGE;
    v = ip * mult;
    /* frac < 1e9 and mult <= 1e9: the product fits */
    if (frac * mult % scale)
        return HOFF__P_FORM;
    if (v > UINT64_MAX - frac * mult / scale)
        return HOFF__P_RANGE;
    *out = v + frac * mult / scale;
    return HOFF__P_OK;
}

/* s, trimmed, as o's type into *v: HOFF__P_OK, HOFF__P_FORM or HOFF__P_RANGE (range checked). */
int hoff__opt_parse(const struct hoff__opt *o, const char *s, union hoff__optval *v) {
    char buf[128];
    size_t n;
    int rc = HOFF__P_FORM;

    while (isspace((unsigned char)*s))
        s++;
    n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (o->type == HOFF__OPT_STRING) {
        rc = parse_string(o, s, n, v);
        return rc == HOFF__P_OK && !hoff__opt_in_range(o, *v) ? HOFF__P_FORM : rc;
    }
    if (n >= sizeof buf)
        return HOFF__P_FORM;
    memcpy(buf, s, n);
    buf[n] = '\0';

    switch (o->type) {
    case HOFF__OPT_SIZE:
        rc = hoff__parse_size(buf, &v->u);
        rc = rc == 0 ? HOFF__P_OK : rc == -ERANGE ? HOFF__P_RANGE : HOFF__P_FORM;
        break;
    case HOFF__OPT_BOOL: rc = parse_bool(buf, &v->i); break;
    case HOFF__OPT_INT: rc = parse_int(buf, &v->i); break;
    case HOFF__OPT_ENUM: rc = parse_enum(o, buf, &v->i); break;
    case HOFF__OPT_DOUBLE: rc = parse_double(buf, &v->d); break;
    case HOFF__OPT_DURATION: rc = parse_duration(buf, &v->u); break;
    case HOFF__OPT_UINT32: rc = parse_uint32(buf, &v->u); break;
    case HOFF__OPT_STRING: break; /* above */
    }
    if (rc == HOFF__P_OK && !hoff__opt_in_range(o, *v))
        rc = HOFF__P_RANGE;
    return rc;
}
