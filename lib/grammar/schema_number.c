/*
 * schema_number.c — integer and number schemas. An integer with minimum,
 * maximum, exclusiveMinimum or exclusiveMaximum becomes the grammar of
 * exactly the decimal integers in that range (digit by digit, the classic
 * construction); without bounds, the shared integer (at most 16 digits).
 * Bounds on a number (not an integer) are refused: a grammar of decimal
 * fractions between two reals is not written here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/grammar/schema_internal.h"

#define INT_LIMIT 9999999999999999LL /* 16 digits: the shared integer's reach */

const char *sc_number(schema_conv *c, const di_json *s, const char *hint)
{
    (void)hint;
    static const char *const BOUNDS[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    for (size_t i = 0; i < 4; i++)
        if (di_json_get(s, BOUNDS[i])) {
            const size_t saved = sc_path_push(c, BOUNDS[i]);
            sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported keyword %s on type number", BOUNDS[i]);
            sc_path_pop(c, saved);
            return NULL;
        }
    return sc_shared(c, "number");
}

/* Decimal digits of equal length x <= y (both n digits): the grammar of the
 * digit strings between them. */
static int same_length(schema_conv *c, sc_text *t, const char *x, const char *y, size_t n)
{
    if (n == 0)
        return 1;
    if (memcmp(x, y, n) == 0)
        return sc_literal(c, t, x, n);
    if (x[0] == y[0])
        return sc_literal(c, t, x, 1) && sc_puts(c, t, " ") && same_length(c, t, x + 1, y + 1, n - 1);
    const size_t rest = n - 1;
    char zeros[20], nines[20];
    memset(zeros, '0', rest);
    memset(nines, '9', rest);
    int lo = x[0] - '0', hi = y[0] - '0';
    size_t parts = 0;
    sc_puts(c, t, "(");
    if (memcmp(x + 1, zeros, rest) != 0) { /* x[0] then [x+1, 99..9] */
        sc_literal(c, t, x, 1);
        sc_puts(c, t, " ");
        same_length(c, t, x + 1, nines, rest);
        parts++;
        lo++;
    }
    const int upper = memcmp(y + 1, nines, rest) != 0;
    if (upper)
        hi--;
    if (lo <= hi) {
        if (parts++ > 0)
            sc_puts(c, t, " | ");
        sc_printf(c, t, "[%d-%d]", lo, hi);
        if (rest > 0)
            sc_printf(c, t, " [0-9]{%zu}", rest);
    }
    if (upper) { /* y[0] then [00..0, y+1] */
        if (parts++ > 0)
            sc_puts(c, t, " | ");
        sc_literal(c, t, y, 1);
        sc_puts(c, t, " ");
        same_length(c, t, zeros, y + 1, rest);
    }
    return sc_puts(c, t, ")");
}

/* The decimal integers in [a, b], 0 <= a <= b, without leading zeros. */
static int digits_range(schema_conv *c, sc_text *t, long long a, long long b)
{
    char sa[24], sb[24];
    const int la = snprintf(sa, sizeof sa, "%lld", a), lb = snprintf(sb, sizeof sb, "%lld", b);
    sc_puts(c, t, "(");
    long long p = 1; /* 10^(len - 1) */
    for (int len = 1; len < la; len++)
        p *= 10;
    for (int len = la; len <= lb; len++, p *= 10) {
        const long long lo = len == la ? a : p;
        const long long hi = b < p * 10 - 1 ? b : p * 10 - 1;
        char x[24], y[24];
        snprintf(x, sizeof x, "%0*lld", len, lo);
        snprintf(y, sizeof y, "%0*lld", len, hi);
        if (len > la)
            sc_puts(c, t, " | ");
        same_length(c, t, x, y, (size_t)len);
    }
    return sc_puts(c, t, ")");
}

/* A bound keyword as a number, or 0 with the error set; *present 0 when absent. */
static int bound(schema_conv *c, const di_json *s, const char *key, double *out, int *present)
{
    const di_json *v = di_json_get(s, key);
    *present = v != NULL;
    if (!v)
        return 1;
    if (v->kind != DI_JSON_NUMBER || !isfinite(v->num)) {
        const size_t saved = sc_path_push(c, key);
        sc_fail_at(c, v->kind == DI_JSON_TRUE || v->kind == DI_JSON_FALSE ? DI_ERR_UNSUPPORTED : DI_ERR_GRAMMAR,
                   v->kind == DI_JSON_TRUE || v->kind == DI_JSON_FALSE
                       ? "unsupported: %s as a boolean (draft 4); give the bound as a number"
                       : "%s must be a number", key);
        sc_path_pop(c, saved);
        return 0;
    }
    *out = v->num;
    return 1;
}

/* A bound within [-(INT_LIMIT + 1), INT_LIMIT + 1] rounded down or up, with
 * integer arithmetic (the library takes nothing from libm but fmaf and
 * sqrtf: tests/check_rope.c). Beyond the range the result is that end. */
static long long rounded(double v, int up)
{
    const double edge = (double)(INT_LIMIT + 1);
    if (v >= edge)
        return INT_LIMIT + 1;
    if (v <= -edge)
        return -INT_LIMIT - 1;
    const long long t = (long long)v; /* toward zero */
    return up ? t + ((double)t < v) : t - ((double)t > v);
}

const char *sc_integer(schema_conv *c, const di_json *s, const char *hint)
{
    double v;
    int present;
    long long lo = -INT_LIMIT, hi = INT_LIMIT;
    int any = 0;
    if (!bound(c, s, "minimum", &v, &present))
        return NULL;
    if (present && (any = 1) && rounded(v, 1) > lo)
        lo = rounded(v, 1);
    if (!bound(c, s, "exclusiveMinimum", &v, &present))
        return NULL;
    if (present && (any = 1) && rounded(v, 0) + 1 > lo)
        lo = rounded(v, 0) + 1;
    if (!bound(c, s, "maximum", &v, &present))
        return NULL;
    if (present && (any = 1) && rounded(v, 0) < hi)
        hi = rounded(v, 0);
    if (!bound(c, s, "exclusiveMaximum", &v, &present))
        return NULL;
    if (present && (any = 1) && rounded(v, 1) - 1 < hi)
        hi = rounded(v, 1) - 1;
    if (!any)
        return sc_shared(c, "integer");
    if (lo > hi) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "no integer (of at most 16 digits) lies within the bounds");
        return NULL;
    }
    sc_text body = {0};
    size_t parts = 0;
    if (lo < 0) { /* "-" and the magnitudes [max(1, -hi), -lo] */
        const long long mlo = hi < 0 ? -hi : 1, mhi = -lo;
        sc_puts(c, &body, "\"-\" ");
        digits_range(c, &body, mlo, mhi);
        parts++;
    }
    if (hi >= 0) {
        if (parts++ > 0)
            sc_puts(c, &body, " | ");
        digits_range(c, &body, lo > 0 ? lo : 0, hi);
    }
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}
