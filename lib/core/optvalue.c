/* optvalue.c — one option's value: loading and storing it in a struct hoff_config, its range and further checks,
 * printing it and the accepted values, and the messages about a bad one (the interface is optvalue.h).
 * Threading: pure functions of their arguments; hoff__opt_fail sets the calling thread's last error, and
 * printing a double switches the calling thread's LC_NUMERIC for the call. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/optvalue.h"

/* ---- messages ---------------------------------------------------------- */

/* Record msg as the thread's last error, copy it into err, return rc. */
int hoff__opt_fail(int rc, char *err, size_t errlen, const char *fmt, ...) {
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return hoff__error(rc, "%s", msg);
}

/* A user's text, fit to quote in a message: at most 48 characters,
 * unprintable ones as '?'. */
const char *hoff__opt_shown(const char *s, size_t n, char *out, size_t outlen) {
    size_t i, k = 0;

    for (i = 0; i < n && s[i] && k + 4 < outlen; i++) {
        if (i == 48) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        out[k++] = isprint((unsigned char)s[i]) ? s[i] : '?';
    }
    out[k] = '\0';
    return out;
}

/* ---- locale-independent doubles ---------------------------------------- */

/* "12.5" means 12.5 whatever LC_NUMERIC the host program set. */
locale_t hoff__c_numeric_begin(locale_t *old) {
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);

    if (c != (locale_t)0)
        *old = uselocale(c);
    return c;
}

void hoff__c_numeric_end(locale_t c, locale_t old) {
    if (c != (locale_t)0) {
        uselocale(old);
        freelocale(c);
    }
}

/* ---- the table's values -------------------------------------------------- */

union hoff__optval hoff__opt_load(const struct hoff_config *cfg, const struct hoff__opt *o) {
    const char *p = (const char *)cfg + o->offset;
    union hoff__optval v;

    switch (o->type) {
    case HOFF__OPT_SIZE:
    case HOFF__OPT_DURATION: memcpy(&v.u, p, sizeof v.u); break;
    case HOFF__OPT_UINT32: {
        uint32_t x;

        memcpy(&x, p, sizeof x);
        v.u = x;
        break;
    }
    case HOFF__OPT_DOUBLE: memcpy(&v.d, p, sizeof v.d); break;
    case HOFF__OPT_STRING:
        v.s.p = p;
        v.s.n = strnlen(p, o->size);
        break;
    default: memcpy(&v.i, p, sizeof v.i); break;
    }
    return v;
}

void hoff__opt_store(struct hoff_config *cfg, const struct hoff__opt *o, union hoff__optval v) {
    char *p = (char *)cfg + o->offset;

    switch (o->type) {
    case HOFF__OPT_SIZE:
    case HOFF__OPT_DURATION: memcpy(p, &v.u, sizeof v.u); break;
    case HOFF__OPT_UINT32: {
        uint32_t x = (uint32_t)v.u; /* parse_val checked the range */

        memcpy(p, &x, sizeof x);
        break;
    }
    case HOFF__OPT_DOUBLE: memcpy(p, &v.d, sizeof v.d); break;
    case HOFF__OPT_STRING: /* parse_val checked v.s.n < o->size; the rest is zeros */
        memset(p, 0, o->size);
        memcpy(p, v.s.p, v.s.n);
        break;
    default: memcpy(p, &v.i, sizeof v.i); break;
    }
}

static int enum_count(const struct hoff__opt *o) {
    int n = 0;

    while (o->names[n])
        n++;
    return n;
}

static double opt_min(const struct hoff__opt *o) {
    return o->type == HOFF__OPT_BOOL || o->type == HOFF__OPT_ENUM ? 0 : o->min;
}

static double opt_max(const struct hoff__opt *o) {
    if (o->type == HOFF__OPT_BOOL)
        return 1;
    if (o->type == HOFF__OPT_ENUM)
        return enum_count(o) - 1;
    return o->max;
}

/* A string field's value is terminated, fits, and is one of its choices. */
static int string_ok(const struct hoff__opt *o, union hoff__optval v) {
    char tmp[256];

    if (v.s.n >= o->size)
        return 0;
    if (!o->known)
        return 1;
    if (v.s.n >= sizeof tmp)
        return 0;
    memcpy(tmp, v.s.p, v.s.n);
    tmp[v.s.n] = '\0';
    return o->known(tmp);
}

/* Every bound is below 2^53, so comparing as doubles is exact. */
int hoff__opt_in_range(const struct hoff__opt *o, union hoff__optval v) {
    double x;

    switch (o->type) {
    case HOFF__OPT_STRING: return string_ok(o, v);
    case HOFF__OPT_SIZE:
    case HOFF__OPT_DURATION:
    case HOFF__OPT_UINT32: x = (double)v.u; break;
    case HOFF__OPT_DOUBLE: x = v.d; break;
    default: x = v.i; break;
    }
    if (!isfinite(x) || x > opt_max(o))
        return 0;
    return o->min_open ? x > opt_min(o) : x >= opt_min(o);
}

/* v as the largest unit that divides it exactly ("80G", "10us"). */
static void fmt_units(uint64_t v, const char *const *suffix, const uint64_t *unit, char *buf, size_t len) {
    int i;

    for (i = 0; v && suffix[i]; i++) {
        if (v % unit[i] == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(v / unit[i]), suffix[i]);
            return;
        }
    }
    snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* v as text hoff_config_set accepts; returns the length, like snprintf. */
int hoff__opt_format(const struct hoff__opt *o, union hoff__optval v, char *buf, size_t len) {
    static const char *const size_sfx[] = {"T", "G", "M", "K", NULL};
    static const uint64_t size_unit[] = {1ull << 40, 1ull << 30, 1ull << 20, 1ull << 10};
    static const char *const dur_sfx[] = {"s", "ms", "us", "ns", NULL};
    static const uint64_t dur_unit[] = {1000000000, 1000000, 1000, 1};
    char tmp[64];

    switch (o->type) {
    case HOFF__OPT_SIZE: fmt_units(v.u, size_sfx, size_unit, tmp, sizeof tmp); break;
    case HOFF__OPT_DURATION: fmt_units(v.u, dur_sfx, dur_unit, tmp, sizeof tmp); break;
    case HOFF__OPT_UINT32: snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v.u); break;
    case HOFF__OPT_STRING: /* as is: the set form of a string is the string */
        return snprintf(buf, len, "%.*s", (int)v.s.n, v.s.p);
    case HOFF__OPT_DOUBLE: {
        locale_t old = (locale_t)0, c = hoff__c_numeric_begin(&old);

        /* the shortest of %.15g and %.17g that reads back as v */
        snprintf(tmp, sizeof tmp, "%.15g", v.d);
        if (strtod(tmp, NULL) != v.d)
            snprintf(tmp, sizeof tmp, "%.17g", v.d);
        hoff__c_numeric_end(c, old);
        break;
    }
    default: /* an enum by name; an invalid one, and the rest, as a number */
        if (o->type == HOFF__OPT_ENUM && v.i >= 0 && v.i < enum_count(o))
            snprintf(tmp, sizeof tmp, "%s", o->names[v.i]);
        else
            snprintf(tmp, sizeof tmp, "%d", v.i);
        break;
    }
    return snprintf(buf, len, "%s", tmp);
}

static void fmt_bound(const struct hoff__opt *o, double x, char *buf, size_t len) {
    union hoff__optval v;

    if (o->type == HOFF__OPT_SIZE || o->type == HOFF__OPT_DURATION || o->type == HOFF__OPT_UINT32)
        v.u = (uint64_t)x;
    else if (o->type == HOFF__OPT_DOUBLE)
        v.d = x;
    else
        v.i = (int)x;
    hoff__opt_format(o, v, buf, len);
}

/* The accepted values of o, to follow "expected " in a message. */
void hoff__opt_describe(const struct hoff__opt *o, char *buf, size_t len) {
    char lo[32], hi[32];
    size_t k;
    int i;

    if (o->expect) {
        snprintf(buf, len, "%s", o->expect);
        return;
    }
    if (o->type == HOFF__OPT_STRING) {
        if (!o->choice_at) {
            snprintf(buf, len, "a %s of at most %zu characters", o->unit, o->size - 1);
            return;
        }
        k = (size_t)snprintf(buf, len, "one of ");
        for (i = 0; o->choice_at(i) && k < len; i++)
            k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", o->choice_at(i));
        return;
    }
    fmt_bound(o, opt_min(o), lo, sizeof lo);
    fmt_bound(o, opt_max(o), hi, sizeof hi);
    switch (o->type) {
    case HOFF__OPT_SIZE:
        if (o->multiple) {
            char m[32];
            union hoff__optval v;

            v.u = o->multiple;
            hoff__opt_format(o, v, m, sizeof m);
            snprintf(buf, len, "a size from %s to %s that is a multiple of %s", lo, hi, m);
        } else {
            snprintf(buf, len, "a size from %s to %s", lo, hi);
        }
        break;
    case HOFF__OPT_DURATION: snprintf(buf, len, "a duration from %s to %s", lo, hi); break;
    case HOFF__OPT_INT:
    case HOFF__OPT_UINT32: snprintf(buf, len, "an integer from %s to %s", lo, hi); break;
    case HOFF__OPT_BOOL: snprintf(buf, len, "1, 0, yes, no, true, false, on or off"); break;
    case HOFF__OPT_DOUBLE:
        if (o->min_open)
            snprintf(buf, len, "a number of %s greater than %s and at most %s", o->unit, lo, hi);
        else
            snprintf(buf, len, "a number of %s from %s to %s", o->unit, lo, hi);
        break;
    case HOFF__OPT_ENUM:
        k = (size_t)snprintf(buf, len, "one of ");
        for (i = 0; o->names[i] && k < len; i++)
            k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", o->names[i]);
        break;
    case HOFF__OPT_STRING: break; /* above */
    }
}

/* The checks beyond the range, on a value in range: 0, or -1 with the reason
 * in why.  A choice counts only as listed (hoff_config_set has stored the
 * listed spelling by then). */
int hoff__opt_check(const struct hoff__opt *o, union hoff__optval v, char *why, size_t whylen) {
    const char *c;
    int i;

    if (o->type == HOFF__OPT_SIZE && o->multiple && v.u % o->multiple) {
        char m[32];
        union hoff__optval mv;

        mv.u = o->multiple;
        hoff__opt_format(o, mv, m, sizeof m);
        snprintf(why, whylen, "not a multiple of %s", m);
        return -1;
    }
    if (o->type != HOFF__OPT_STRING || !o->check)
        return 0;
    for (i = 0; o->choice_at && (c = o->choice_at(i)) != NULL; i++)
        if (strlen(c) == v.s.n && !memcmp(c, v.s.p, v.s.n))
            return 0;
    return o->check(v.s.p, v.s.n, why, whylen);
}

int hoff__opt_bad_value(const struct hoff__opt *o, const char *who, const char *value, int why, char *err,
                        size_t errlen) {
    static const char *const what[] = {
        [HOFF__OPT_SIZE] = "not a size",       [HOFF__OPT_BOOL] = "not a boolean",
        [HOFF__OPT_INT] = "not an integer",    [HOFF__OPT_ENUM] = NULL,
        [HOFF__OPT_DOUBLE] = "not a number",   [HOFF__OPT_DURATION] = "not a duration",
        [HOFF__OPT_UINT32] = "not an integer", [HOFF__OPT_STRING] = NULL,
    };
    char v[64], range[256];

    hoff__opt_shown(value, (size_t)-1, v, sizeof v);
    hoff__opt_describe(o, range, sizeof range);
    if (o->type == HOFF__OPT_STRING) {
        const char *s = value;
        size_t n;

        while (isspace((unsigned char)*s))
            s++;
        n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        if (why == HOFF__P_RANGE)
            return hoff__opt_fail(-EINVAL, err, errlen,
                                  "%s='%s': too long (%zu characters, the limit is %zu); expected %s", who, v, n,
                                  o->size - 1, range);
        return hoff__opt_fail(-EINVAL, err, errlen, "%s='%s': unknown %s; expected %s", who, v, o->unit, range);
    }
    if (o->type == HOFF__OPT_ENUM)
        return hoff__opt_fail(-EINVAL, err, errlen, "%s='%s': expected %s", who, v, range);
    if (why == HOFF__P_RANGE)
        return hoff__opt_fail(-EINVAL, err, errlen, "%s='%s': out of range; expected %s", who, v, range);
    switch (o->type) {
    case HOFF__OPT_SIZE:
        return hoff__opt_fail(-EINVAL, err, errlen,
                              "%s='%s': not a size; expected a byte count with an optional "
                              "K, M, G or T suffix (e.g. 512M, 2G)",
                              who, v);
    case HOFF__OPT_DURATION:
        return hoff__opt_fail(-EINVAL, err, errlen,
                              "%s='%s': not a duration; expected a whole number of nanoseconds, "
                              "or a number with an ns, us, ms or s suffix (e.g. 10us, 2ms)",
                              who, v);
    default: return hoff__opt_fail(-EINVAL, err, errlen, "%s='%s': %s; expected %s", who, v, what[o->type], range);
    }
}
