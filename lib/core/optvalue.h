/* optvalue.h — one option's value: the table entry that describes an option (its type, range, choices), the
 * value it holds, and the functions over it that options.c (the table and the public calls), optvalue.c (range,
 * printing, messages) and optparse.c (the text forms) share.
 * Threading: pure functions of their arguments; hoff__opt_fail sets the calling thread's last error. */
#ifndef HOFF_OPTVALUE_H
#define HOFF_OPTVALUE_H

#include <locale.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "hoff.h"

enum hoff__opt_type {
    HOFF__OPT_SIZE,
    HOFF__OPT_BOOL,
    HOFF__OPT_INT,
    HOFF__OPT_ENUM,
    HOFF__OPT_DOUBLE,
    HOFF__OPT_DURATION,
    HOFF__OPT_UINT32, /* a uint32_t field, a decimal integer */
    HOFF__OPT_STRING, /* a char[size] field: at most size - 1 characters, NUL-padded */
};

struct hoff__opt_alias {
    const char *name;
    int value;
};

/* One entry of the option table (options.c). */
struct hoff__opt {
    const char *name; /* "budget": lower case, the key of hoff_config_set */
    const char *env;  /* "HOFF_BUDGET": always "HOFF_" + the name in upper case */
    enum hoff__opt_type type;
    size_t offset;            /* into struct hoff_config */
    size_t size;              /* HOFF__OPT_STRING: the field's size, the NUL included */
    const char *def;          /* the default, in the form hoff_config_set accepts */
    double min, max;          /* valid range, inclusive (enum, bool, string: derived) */
    int min_open;             /* min itself is out of range (HOFF__OPT_DOUBLE) */
    const char *unit;         /* HOFF__OPT_DOUBLE: what the number counts; HOFF__OPT_STRING: what the text is */
    const char *const *names; /* HOFF__OPT_ENUM: value i is names[i] */
    const struct hoff__opt_alias *aliases; /* HOFF__OPT_ENUM: other accepted spellings */
    /* HOFF__OPT_STRING whose values are names registered elsewhere: choice_at(i) is
     * the i-th (NULL past the end); known(s) says whether the runtime will
     * accept s.  hoff_config_set stores the registered spelling. */
    const char *(*choice_at)(int i);
    int (*known)(const char *s);
    /* HOFF__OPT_STRING with a syntax of its own: check(s, n, why, whylen) is 0 when
     * s[0..n) is acceptable, else -1 with the reason in why ("node 2 is listed
     * twice").  With choice_at as well, the choices are accepted too (any case
     * in hoff_config_set, which stores the listed spelling; only as listed in
     * hoff__config_validate) and check judges everything else. */
    int (*check)(const char *s, size_t n, char *why, size_t whylen);
    const char *expect;  /* the accepted forms, to follow "expected " (else derived) */
    uint64_t multiple;   /* HOFF__OPT_SIZE: the value must be a multiple of this (0: any) */
    unsigned live : 1;   /* may change on a running context (hoff_torch_configure(3)) */
    unsigned replan : 1; /* ...and a change needs a new plan: the next step records and plans again */
    const char *help;
};

/* A value of one option, as its type holds it. */
union hoff__optval {
    uint64_t u; /* HOFF__OPT_SIZE, HOFF__OPT_DURATION, HOFF__OPT_UINT32 */
    int i;      /* HOFF__OPT_BOOL, HOFF__OPT_INT, HOFF__OPT_ENUM */
    double d;   /* HOFF__OPT_DOUBLE */
    struct {
        const char *p; /* not NUL-terminated: a field, or the user's text */
        size_t n;      /* == the field's size if the field has no NUL */
    } s;               /* HOFF__OPT_STRING */
};

/* HOFF__P_RANGE for a string: too long; HOFF__P_FORM: not one of its choices. */
enum { HOFF__P_OK, HOFF__P_FORM, HOFF__P_RANGE };

/* Record the message as the thread's last error, copy it into err (if non-NULL), return rc. */
int hoff__opt_fail(int rc, char *err, size_t errlen, const char *fmt, ...) HOFF__PRINTF(4, 5);
/* A user's text, fit to quote in a message: at most 48 characters, unprintable ones as '?'. */
const char *hoff__opt_shown(const char *s, size_t n, char *out, size_t outlen);
/* Switch this thread to the C LC_NUMERIC ("12.5" whatever the host program set), and back. */
locale_t hoff__c_numeric_begin(locale_t *old);
void hoff__c_numeric_end(locale_t c, locale_t old);

/* o's field of cfg, and storing v into it (v in range: hoff__opt_parse checked it). */
union hoff__optval hoff__opt_load(const struct hoff_config *cfg, const struct hoff__opt *o);
void hoff__opt_store(struct hoff_config *cfg, const struct hoff__opt *o, union hoff__optval v);
/* 1 when v is within o's range (a string: terminated, fits, one of its choices). */
int hoff__opt_in_range(const struct hoff__opt *o, union hoff__optval v);
/* v as text hoff_config_set accepts; returns the length, like snprintf. */
int hoff__opt_format(const struct hoff__opt *o, union hoff__optval v, char *buf, size_t len);
/* The accepted values of o, to follow "expected " in a message. */
void hoff__opt_describe(const struct hoff__opt *o, char *buf, size_t len);
/* The checks beyond the range, on a value in range: 0, or -1 with the reason in why. */
int hoff__opt_check(const struct hoff__opt *o, union hoff__optval v, char *why, size_t whylen);
/* The -EINVAL message for value, which hoff__opt_parse refused with why (HOFF__P_FORM or HOFF__P_RANGE);
 * who names the option as the user did ("option 'budget'", "HOFF_BUDGET"). */
int hoff__opt_bad_value(const struct hoff__opt *o, const char *who, const char *value, int why, char *err,
                        size_t errlen);

/* s, trimmed, as o's type into *v: HOFF__P_OK, HOFF__P_FORM or HOFF__P_RANGE (range checked). */
int hoff__opt_parse(const struct hoff__opt *o, const char *s, union hoff__optval *v);

#endif
