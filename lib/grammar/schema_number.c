/*
 * schema_number.c — integer and number schemas. An integer with minimum,
 * maximum, exclusiveMinimum or exclusiveMaximum becomes the grammar of
 * exactly the decimal integers in that range (digit by digit, the classic
 * construction); without bounds, the shared integer (at most 16 digits).
 * A number with bounds becomes the grammar of exactly the plain decimals
 * -?I(.F)? of at most 15 significant digits (I at most 15 digits, F at most
 * 15 less I's) in the range, compared digit by digit with the bound's
 * shortest decimal (the fewest digits that read back as its double). The
 * comparison is then also the double's: two decimals of at most 15
 * significant digits are distinct doubles, and one equal as a double to the
 * bound would be the bound's shortest decimal; so a validator that reads
 * both as doubles agrees with the grammar (docs/STRUCTURED.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/grammar/schema_internal.h"

#define INT_LIMIT 9999999999999999LL /* 16 digits: the shared integer's reach */

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

/* ---- numbers with bounds ----------------------------------------------------------- */

#define NUM_DIGITS 15 /* significant digits of a bounded number */

/* A bound as a decimal magnitude: integer digits (no leading zeros, "0" when
 * below 1) and fraction digits (no trailing zeros), from the shortest text
 * that reads back as the double. *big: at or past 10^15. */
typedef struct decimal {
    char in[24];
    char frac[400];
    int big;
} decimal;

static void to_decimal(double v, decimal *d)
{
    char text[40];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(text, sizeof text, "%.*e", prec, v);
        if (strtod(text, NULL) == v)
            break;
    }
    /* text: D[.DDD]e[+-]X */
    char digits[24];
    size_t nd = 0;
    const char *p = text;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < sizeof digits - 1)
            digits[nd++] = *p;
    digits[nd] = '\0';
    const int exp = atoi(p + 1); /* the value is 0.digits * 10^(exp + 1) */
    const int point = exp + 1;   /* digits before the decimal point */
    memset(d, 0, sizeof *d);
    if (point > NUM_DIGITS) {
        d->big = 1;
        strcpy(d->in, "0");
        return;
    }
    size_t ni = 0, nf = 0;
    for (int i = 0; i < point; i++)
        d->in[ni++] = i < (int)nd ? digits[i] : '0';
    for (int i = point < 0 ? point : 0; i < 0; i++)
        d->frac[nf++] = '0';
    for (int i = point > 0 ? point : 0; i < (int)nd; i++)
        d->frac[nf++] = digits[i];
    while (nf > 0 && d->frac[nf - 1] == '0')
        nf--;
    d->frac[nf] = '\0';
    size_t lead = 0;
    while (lead + 1 < ni && d->in[lead] == '0')
        lead++;
    if (ni == 0)
        strcpy(d->in, "0");
    else
        memmove(d->in, d->in + lead, ni - lead + 1);
    if (v == 0.0)
        strcpy(d->in, "0");
}

/* One side of a fraction's digits: the bound's remaining digits, strict or
 * not; present 0 for no bound on that side. */
typedef struct side {
    const char *digits;
    int strict, present;
} side;

static int all_zero(const char *s)
{
    for (; *s; s++)
        if (*s != '0')
            return 0;
    return 1;
}

static side advance(side x)
{
    if (x.present && *x.digits)
        x.digits++;
    return x;
}

/* The digits after a prefix may stop here: the value is then the prefix,
 * whose remaining comparison with each bound is 0 against its digits. */
static int may_stop(side lo, side hi)
{
    return (!lo.present || (all_zero(lo.digits) && !lo.strict)) && (!hi.present || !all_zero(hi.digits) || !hi.strict);
}

/* Fraction digits, 1 to k of them, with lo <= 0.F <= hi (or < when
 * strict), into t; 0 when none is (nothing written). */
static int fraction_digits(schema_conv *c, sc_text *t, side lo, side hi, int k)
{
    if (k <= 0)
        return 0;
    if (lo.present && !lo.strict && all_zero(lo.digits))
        lo.present = 0; /* at least 0: no bound */
    /* the first digit: a bound's own digit goes on comparing; the digits
     * strictly between the bounds' (-1 and 10 for no bound) take any rest */
    const int l0 = lo.present ? (*lo.digits ? *lo.digits - '0' : 0) : -1;
    const int h0 = hi.present ? (*hi.digits ? *hi.digits - '0' : 0) : 10;
    if (l0 > h0)
        return 0;
    sc_text alt = {0};
    size_t parts = 0;
    sc_puts(c, t, "(");
    if (l0 + 1 <= h0 - 1) {
        sc_printf(c, t, "[%d-%d]", l0 + 1, h0 - 1);
        if (k > 1)
            sc_printf(c, t, " [0-9]{0,%d}", k - 1);
        parts++;
    }
    for (int pass = 0; pass < 2; pass++) { /* pass 0: l0; 1: h0 when not l0 */
        side nlo = lo, nhi = hi;
        const int digit = pass == 0 ? l0 : h0;
        if (pass == 0 && !lo.present)
            continue;
        if (pass == 1 && (!hi.present || h0 == l0))
            continue;
        if (pass == 0) {
            nlo = advance(lo);
            if (l0 == h0)
                nhi = advance(hi);
            else
                nhi.present = 0;
        } else {
            nhi = advance(hi);
            nlo.present = 0;
        }
        alt.n = 0;
        const int more = fraction_digits(c, &alt, nlo, nhi, k - 1);
        const int stop = may_stop(nlo, nhi);
        if (!more && !stop)
            continue;
        sc_printf(c, t, "%s\"%d\"", parts++ ? " | " : "", digit);
        if (more) {
            sc_puts(c, t, " ");
            sc_put(c, t, alt.p, alt.n);
            sc_puts(c, t, stop ? "?" : "");
        }
    }
    free(alt.p);
    if (parts == 0) {
        t->n--; /* the "(" */
        return 0;
    }
    sc_puts(c, t, ")");
    return 1;
}

/* After integer digits that equal both bounds' (or one's): "." and the
 * fraction, optional when the integer alone is in the range; 0 when
 * nothing is. */
static int fraction(schema_conv *c, sc_text *t, side lo, side hi, int k)
{
    sc_text f = {0};
    const int some = fraction_digits(c, &f, lo, hi, k);
    const int stop = may_stop(lo, hi);
    if (some) {
        sc_puts(c, t, stop ? " (\".\" " : " \".\" ");
        sc_put(c, t, f.p, f.n);
        sc_puts(c, t, stop ? ")?" : "");
    }
    free(f.p);
    return some || stop;
}

static int budget(const char *in)
{
    return strcmp(in, "0") == 0 ? NUM_DIGITS : NUM_DIGITS - (int)strlen(in);
}

/* Magnitudes m, lo <= m <= hi (strict or not; hi absent: below 10^15), of
 * the plain decimal form, into t as alternatives; the count written. */
static size_t magnitudes(schema_conv *c, sc_text *t, const decimal *lo, int lo_strict, const decimal *hi,
                         int hi_strict)
{
    const long long a = atoll(lo->in), b = hi ? atoll(hi->in) : 999999999999999LL;
    size_t parts = 0;
    if (a > b)
        return 0;
    side slo = {lo->frac, lo_strict, 1}, shi = {hi ? hi->frac : "", hi_strict, hi != NULL};
    sc_text alt = {0};
    /* the integer part a */
    sc_literal(c, &alt, lo->in, strlen(lo->in));
    side top = shi;
    if (a != b || !hi)
        top.present = 0;
    if (fraction(c, &alt, slo, top, budget(lo->in))) {
        sc_put(c, t, alt.p, alt.n);
        parts++;
    }
    /* a < I < b (I <= b when no upper bound): any fraction */
    const long long from = a + 1, to = hi ? b - 1 : b;
    long long p = 1;
    int len = 1;
    for (; p * 10 <= from && len < NUM_DIGITS; len++)
        p *= 10;
    for (; from <= to && len <= NUM_DIGITS; len++, p *= 10) {
        const long long x = from > p ? from : p, y = to < p * 10 - 1 ? to : p * 10 - 1;
        if (x > y)
            continue;
        char sx[24], sy[24];
        snprintf(sx, sizeof sx, "%lld", x);
        snprintf(sy, sizeof sy, "%lld", y);
        sc_puts(c, t, parts++ ? " | " : "");
        same_length(c, t, sx, sy, (size_t)len);
        if (NUM_DIGITS - len > 0)
            sc_printf(c, t, " (\".\" [0-9]{1,%d})?", NUM_DIGITS - len);
    }
    /* the integer part b */
    if (hi && b > a) {
        alt.n = 0;
        sc_literal(c, &alt, hi->in, strlen(hi->in));
        side none = {"", 0, 0};
        if (fraction(c, &alt, none, shi, budget(hi->in))) {
            sc_puts(c, t, parts++ ? " | " : "");
            sc_put(c, t, alt.p, alt.n);
        }
    }
    free(alt.p);
    return parts;
}

/* The tighter of minimum and exclusiveMinimum (or of the maxima): 1 with
 * *v, *strict, *present set, or 0 with the error set. */
static int tighter(schema_conv *c, const di_json *s, const char *incl, const char *excl, int upper, double *v,
                   int *strict, int *present)
{
    double x = 0, y = 0;
    int has_x, has_y;
    if (!bound(c, s, incl, &x, &has_x) || !bound(c, s, excl, &y, &has_y))
        return 0;
    *present = has_x || has_y;
    if (has_x && has_y) {
        const int y_tighter = upper ? y <= x : y >= x;
        *v = y_tighter ? y : x;
        *strict = y_tighter;
    } else {
        *v = has_y ? y : x;
        *strict = has_y;
    }
    return 1;
}

const char *sc_number(schema_conv *c, const di_json *s, const char *hint)
{
    double lo = 0, hi = 0;
    int lo_strict = 0, hi_strict = 0, has_lo, has_hi;
    if (!tighter(c, s, "minimum", "exclusiveMinimum", 0, &lo, &lo_strict, &has_lo) ||
        !tighter(c, s, "maximum", "exclusiveMaximum", 1, &hi, &hi_strict, &has_hi))
        return NULL;
    if (!has_lo && !has_hi)
        return sc_shared(c, "number");
    sc_text body = {0};
    size_t parts = 0;
    decimal dl, dh;
    /* negative numbers: "-" and magnitudes in (max(0, -hi), -lo], never -0 */
    if (!has_lo || lo < 0) {
        decimal zero;
        to_decimal(0.0, &zero);
        const decimal *mlo = &zero;
        int mlo_strict = 1;
        if (has_hi && hi < 0) {
            to_decimal(-hi, &dh);
            mlo = &dh;
            mlo_strict = hi_strict;
        }
        if (has_lo)
            to_decimal(-lo, &dl);
        if (!mlo->big) {
            sc_text neg = {0};
            const size_t n = magnitudes(c, &neg, mlo, mlo_strict, has_lo && !dl.big ? &dl : NULL, lo_strict);
            if (n > 0) {
                sc_puts(c, &body, "\"-\" (");
                sc_put(c, &body, neg.p, neg.n);
                sc_puts(c, &body, ")");
                parts++;
            }
            free(neg.p);
        }
    }
    /* zero and positive numbers: magnitudes in [max(0, lo), hi] */
    if (!has_hi || hi > 0 || (hi == 0 && !hi_strict)) {
        decimal zero;
        to_decimal(0.0, &zero);
        const decimal *plo = &zero;
        int plo_strict = 0;
        if (has_lo && lo >= 0) {
            to_decimal(lo, &dl);
            plo = &dl;
            plo_strict = lo_strict;
        }
        if (has_hi)
            to_decimal(hi, &dh);
        if (!plo->big) {
            sc_text pos = {0};
            const size_t n = magnitudes(c, &pos, plo, plo_strict, has_hi && !dh.big ? &dh : NULL, hi_strict);
            if (n > 0) {
                sc_puts(c, &body, parts ? " | " : "");
                sc_put(c, &body, pos.p, pos.n);
                parts++;
            }
            free(pos.p);
        }
    }
    if (!c->failed && parts == 0) {
        free(body.p);
        sc_fail_at(c, DI_ERR_GRAMMAR, "no number (a decimal of at most 15 significant digits, below 10^15 in "
                                      "magnitude) lies within the bounds");
        return NULL;
    }
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}
