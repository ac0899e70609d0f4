/*
 * schema_string.c — string schemas: minLength/maxLength (characters, an
 * escape counting as the one it stands for), format (date, time, date-time,
 * uuid, email as fixed patterns) and pattern, a regular-expression subset
 * (docs/STRUCTURED.md): literals, escapes (\d \w \s, \D \W \S as ASCII,
 * \. and other escaped punctuation, \n \t \r \f \v, \xHH, \uHHHH), classes
 * [...] and [^...] with ranges, `.`, groups (...) and (?:...), `|`, and the
 * quantifiers * + ? {m} {m,} {m,n} (a lazy `?` after one changes nothing);
 * `^` only first and `$` only last, a side without its anchor taking any
 * text. Every character of the result is written in JSON: `"`, `\` and
 * control characters as escapes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/hex.h"
#include "lib/grammar/schema_internal.h"
#include "lib/base/utf8.h"

#define RX_MAX_LEN 4096u
#define RX_MAX_DEPTH 16u
#define CP_MAX_RANGES 256u

/* ---- sets of code points ------------------------------------------------------------- */

typedef struct cpset {
    uint32_t lo[CP_MAX_RANGES], hi[CP_MAX_RANGES];
    size_t n;
    int overflow; /* more ranges than fit: refused when written */
} cpset;

/* Always 1 (so that it chains with &&); past CP_MAX_RANGES it marks the set. */
static int cp_add(cpset *s, uint32_t lo, uint32_t hi)
{
    if (s->n == CP_MAX_RANGES) {
        s->overflow = 1;
        return 1;
    }
    s->lo[s->n] = lo;
    s->hi[s->n] = hi;
    s->n++;
    return 1;
}

/* Sorted, merged. */
static void cp_normalize(cpset *s)
{
    for (size_t i = 1; i < s->n; i++) { /* insertion sort: at most a few hundred ranges */
        const uint32_t lo = s->lo[i], hi = s->hi[i];
        size_t j = i;
        while (j > 0 && s->lo[j - 1] > lo) {
            s->lo[j] = s->lo[j - 1];
            s->hi[j] = s->hi[j - 1];
            j--;
        }
        s->lo[j] = lo;
        s->hi[j] = hi;
    }
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (m > 0 && s->lo[i] <= s->hi[m - 1] + 1) {
            if (s->hi[i] > s->hi[m - 1])
                s->hi[m - 1] = s->hi[i];
        } else {
            s->lo[m] = s->lo[i];
            s->hi[m] = s->hi[i];
            m++;
        }
    }
    s->n = m;
}

static void cp_complement(cpset *s)
{
    cp_normalize(s);
    cpset out = {.n = 0, .overflow = s->overflow};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->lo[i] > next)
            cp_add(&out, next, s->lo[i] - 1);
        next = s->hi[i] + 1;
    }
    if (next <= 0x10ffff)
        cp_add(&out, next, 0x10ffff);
    *s = out;
}

static int cp_has(const cpset *s, uint32_t c)
{
    for (size_t i = 0; i < s->n; i++)
        if (c >= s->lo[i] && c <= s->hi[i])
            return 1;
    return 0;
}

/* ---- writing a set in JSON --------------------------------------------------------- */

static int put_class_char(schema_conv *c, sc_text *t, uint32_t cp)
{
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
        return sc_printf(c, t, "%c", (char)cp);
    if (cp < 0x100)
        return sc_printf(c, t, "\\x%02X", cp);
    if (cp < 0x10000)
        return sc_printf(c, t, "\\u%04X", cp);
    return sc_printf(c, t, "\\U%08X", cp);
}

/* The GBNF of one character of s as JSON writes it inside a string. */
static int put_set(schema_conv *c, sc_text *t, const cpset *set)
{
    if (set->overflow)
        return sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: a pattern class of more than %u ranges",
                          CP_MAX_RANGES);
    cpset raw = {.n = 0};
    for (size_t i = 0; i < set->n; i++) { /* set minus controls, '"' and '\' */
        uint32_t lo = set->lo[i] < 0x20 ? 0x20 : set->lo[i];
        const uint32_t hi = set->hi[i];
        for (uint32_t cut = 0; lo <= hi && cut < 2; cut++) {
            const uint32_t skip = cut == 0 ? '"' : '\\';
            if (skip >= lo && skip <= hi) {
                if (skip > lo)
                    cp_add(&raw, lo, skip - 1);
                lo = skip + 1;
            }
        }
        if (lo <= hi)
            cp_add(&raw, lo, hi);
    }
    if (raw.overflow)
        return sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: a pattern class of more than %u ranges",
                          CP_MAX_RANGES);
    size_t parts = 0;
    sc_text alt = {0};
    if (raw.n > 0) {
        sc_puts(c, &alt, "[");
        for (size_t i = 0; i < raw.n; i++) {
            put_class_char(c, &alt, raw.lo[i]);
            if (raw.hi[i] != raw.lo[i]) {
                sc_puts(c, &alt, "-");
                put_class_char(c, &alt, raw.hi[i]);
            }
        }
        sc_puts(c, &alt, "]");
        parts++;
    }
    for (uint32_t cp = 0; cp < 0x20 || cp == '"' || cp == '\\'; cp = cp + 1 == 0x20 ? '"' : cp == '"' ? '\\' : cp + 1) {
        if (!cp_has(set, cp))
            continue;
        const char *short_escape = cp == '"' ? "\\\"" : cp == '\\' ? "\\\\" : cp == '\n' ? "\\n"
                                   : cp == '\t' ? "\\t" : cp == '\r' ? "\\r" : cp == '\b' ? "\\b"
                                   : cp == '\f' ? "\\f" : NULL;
        char esc[8];
        if (!short_escape) {
            snprintf(esc, sizeof esc, "\\u%04x", cp);
            short_escape = esc;
        }
        if (parts++ > 0)
            sc_puts(c, &alt, " | ");
        sc_literal(c, &alt, short_escape, strlen(short_escape));
    }
    if (parts == 0) {
        free(alt.p);
        return sc_fail_at(c, DI_ERR_GRAMMAR, "the pattern has a class that matches no character");
    }
    int ok = (parts == 1 || sc_puts(c, t, "(")) && sc_put(c, t, alt.p, alt.n) && (parts == 1 || sc_puts(c, t, ")"));
    free(alt.p);
    return ok;
}

/* ---- the regular expression --------------------------------------------------------- */

typedef struct rx {
    schema_conv *c;
    const char *s;
    size_t n, i;
    uint32_t depth;
} rx;

static int rx_fail(rx *r, const char *what)
{
    return sc_fail_at(r->c, DI_ERR_UNSUPPORTED, "unsupported pattern: %s at character %zu of the pattern", what,
                      r->i + 1);
}

static uint32_t rx_next_cp(rx *r)
{
    const unsigned char lead = (unsigned char)r->s[r->i];
    const size_t len = di_utf8_len(lead);
    uint32_t v = len == 1 ? lead : len == 2 ? lead & 0x1f : len == 3 ? lead & 0x0f : lead & 0x07;
    for (size_t k = 1; k < len && r->i + k < r->n; k++)
        v = (v << 6) | ((unsigned char)r->s[r->i + k] & 0x3f);
    r->i += len;
    return v;
}

static int rx_hex(rx *r, size_t digits, uint32_t *out)
{
    uint32_t v = 0;
    for (size_t k = 0; k < digits; k++) {
        if (r->i >= r->n)
            return rx_fail(r, "a short hex escape");
        const int d = di_hex_digit(r->s[r->i++]);
        if (d < 0)
            return rx_fail(r, "a bad hex escape");
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 1;
}

/* The set of an escape after its backslash; in_class: inside [...]. */
static int rx_escape(rx *r, cpset *set, int in_class)
{
    if (r->i >= r->n)
        return rx_fail(r, "a backslash at the end");
    const char e = r->s[r->i++];
    uint32_t cp = 0;
    switch (e) {
    case 'd': return cp_add(set, '0', '9');
    case 'w': return cp_add(set, '0', '9') && cp_add(set, 'A', 'Z') && cp_add(set, '_', '_') && cp_add(set, 'a', 'z');
    case 's': return cp_add(set, '\t', '\r') && cp_add(set, ' ', ' ');
    case 'D': case 'W': case 'S': {
        if (in_class)
            return rx_fail(r, "\\D, \\W or \\S inside a class");
        cpset pos = {.n = 0};
        const int ok = e == 'D' ? cp_add(&pos, '0', '9')
                       : e == 'W' ? cp_add(&pos, '0', '9') && cp_add(&pos, 'A', 'Z') && cp_add(&pos, '_', '_') &&
                                        cp_add(&pos, 'a', 'z')
                                  : cp_add(&pos, '\t', '\r') && cp_add(&pos, ' ', ' ');
        cp_complement(&pos); /* then kept to ASCII: Python's \D, \W, \S refuse non-ASCII digits, letters, spaces */
        for (size_t k = 0; ok && k < pos.n; k++)
            if (pos.lo[k] < 0x80)
                cp_add(set, pos.lo[k], pos.hi[k] < 0x7f ? pos.hi[k] : 0x7f);
        return ok;
    }
    case 'n': cp = '\n'; break;
    case 't': cp = '\t'; break;
    case 'r': cp = '\r'; break;
    case 'f': cp = '\f'; break;
    case 'v': cp = '\v'; break;
    case 'x': if (!rx_hex(r, 2, &cp)) return 0; break;
    case 'u': if (!rx_hex(r, 4, &cp)) return 0; break;
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9') || (unsigned char)e >= 0x80)
            return rx_fail(r, "an escape other than \\d \\w \\s \\D \\W \\S \\n \\t \\r \\f \\v \\x \\u "
                              "or punctuation");
        cp = (uint32_t)(unsigned char)e;
    }
    if (cp >= 0xd800 && cp <= 0xdfff)
        return rx_fail(r, "a surrogate code point");
    return cp_add(set, cp, cp);
}

static int rx_class(rx *r, cpset *set)
{
    r->i++; /* [ */
    int negated = 0;
    if (r->i < r->n && r->s[r->i] == '^') {
        negated = 1;
        r->i++;
    }
    int first = 1;
    for (;;) {
        if (r->i >= r->n)
            return rx_fail(r, "an unterminated class [");
        if (r->s[r->i] == ']' && !first)
            break;
        first = 0;
        cpset one = {.n = 0};
        if (r->s[r->i] == '\\') {
            r->i++;
            if (!rx_escape(r, &one, 1))
                return 0;
        } else if (r->s[r->i] == '[') {
            return rx_fail(r, "a nested class");
        } else {
            const uint32_t cp = rx_next_cp(r);
            cp_add(&one, cp, cp);
        }
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']' && one.n == 1 && one.lo[0] == one.hi[0]) {
            r->i++;
            uint32_t hi;
            if (r->s[r->i] == '\\') {
                r->i++;
                cpset h = {.n = 0};
                if (!rx_escape(r, &h, 1))
                    return 0;
                if (h.n != 1 || h.lo[0] != h.hi[0])
                    return rx_fail(r, "a range ending in a class escape");
                hi = h.lo[0];
            } else {
                hi = rx_next_cp(r);
            }
            if (hi < one.lo[0])
                return rx_fail(r, "a backwards range");
            one.hi[0] = hi;
        }
        for (size_t k = 0; k < one.n; k++)
            cp_add(set, one.lo[k], one.hi[k]);
    }
    r->i++; /* ] */
    if (negated)
        cp_complement(set);
    else
        cp_normalize(set);
    return 1;
}

static int rx_alt(rx *r, sc_text *out);

/* {m}, {m,}, {m,n} at r->i; 0 when it is not one (then r->i is unchanged). */
static int rx_braces(rx *r, unsigned long *min, unsigned long *max, int *bounded)
{
    const size_t start = r->i;
    char *end;
    if (r->i + 1 >= r->n || r->s[r->i + 1] < '0' || r->s[r->i + 1] > '9')
        return 0;
    *min = strtoul(r->s + r->i + 1, &end, 10);
    size_t i = (size_t)(end - r->s);
    *bounded = 1;
    *max = *min;
    if (i < r->n && r->s[i] == ',') {
        i++;
        if (i < r->n && r->s[i] >= '0' && r->s[i] <= '9') {
            *max = strtoul(r->s + i, &end, 10);
            i = (size_t)(end - r->s);
        } else {
            *bounded = 0;
        }
    }
    if (i >= r->n || r->s[i] != '}') {
        r->i = start;
        return 0;
    }
    r->i = i + 1;
    return 1;
}

/* One atom and its quantifier, written into out. */
static int rx_piece(rx *r, sc_text *out)
{
    sc_text atom = {0};
    const char ch = r->s[r->i];
    int ok = 1;
    if (ch == '(') {
        if (++r->depth > RX_MAX_DEPTH)
            return rx_fail(r, "groups nested too deeply");
        r->i++;
        if (r->i + 1 < r->n && r->s[r->i] == '?') {
            if (r->s[r->i + 1] != ':')
                return rx_fail(r, "a group (?...) other than (?:...)");
            r->i += 2;
        }
        ok = rx_alt(r, &atom);
        if (ok && (r->i >= r->n || r->s[r->i] != ')'))
            ok = rx_fail(r, "an unbalanced (");
        r->i++;
        r->depth--;
    } else {
        cpset set = {.n = 0};
        if (ch == '[') {
            ok = rx_class(r, &set);
        } else if (ch == '.') {
            r->i++;
            ok = cp_add(&set, 0, '\n' - 1) && cp_add(&set, '\n' + 1, 0x10ffff);
        } else if (ch == '\\') {
            r->i++;
            ok = rx_escape(r, &set, 0);
            cp_normalize(&set);
        } else if (ch == '^' || ch == '$') {
            ok = rx_fail(r, "an anchor other than ^ first or $ last");
        } else if (ch == '*' || ch == '+' || ch == '?' || ch == ')') {
            ok = rx_fail(r, "a quantifier or ) with nothing before it");
        } else {
            const uint32_t cp = rx_next_cp(r);
            ok = cp_add(&set, cp, cp);
        }
        ok = ok && put_set(r->c, &atom, &set);
    }
    if (!ok) {
        free(atom.p);
        return 0;
    }
    /* the quantifier */
    unsigned long min = 1, max = 1;
    int bounded = 1, has = 0;
    if (r->i < r->n) {
        const char q = r->s[r->i];
        if (q == '*' || q == '+' || q == '?') {
            has = 1;
            min = q == '+';
            bounded = q == '?';
            max = 1;
            r->i++;
        } else if (q == '{') {
            has = rx_braces(r, &min, &max, &bounded);
            if (!has)
                ok = rx_fail(r, "a { that is not a quantifier {m}, {m,} or {m,n}");
        }
        if (has && r->i < r->n && r->s[r->i] == '?')
            r->i++; /* lazy: the same language */
        if (has && r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '+' || r->s[r->i] == '?' || r->s[r->i] == '{'))
            ok = rx_fail(r, "a quantifier after a quantifier");
    }
    if (ok && has && (min > 10000 || (bounded && (max > 10000 || max < min))))
        ok = rx_fail(r, "a repetition count over 10000 or below its minimum");
    if (ok) {
        sc_puts(r->c, out, "(");
        sc_put(r->c, out, atom.p, atom.n);
        sc_puts(r->c, out, ")");
        if (has && bounded)
            sc_printf(r->c, out, "{%lu,%lu}", min, max);
        else if (has)
            sc_printf(r->c, out, "{%lu,}", min);
        sc_puts(r->c, out, " ");
    }
    free(atom.p);
    return ok && !r->c->failed;
}

static int rx_seq(rx *r, sc_text *out)
{
    size_t pieces = 0;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (r->s[r->i] == '$' && r->i + 1 == r->n && r->depth == 0)
            break;
        if (!rx_piece(r, out))
            return 0;
        pieces++;
    }
    return pieces > 0 || sc_puts(r->c, out, "\"\" ");
}

static int rx_alt(rx *r, sc_text *out)
{
    sc_puts(r->c, out, "(");
    if (!rx_seq(r, out))
        return 0;
    while (r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        sc_puts(r->c, out, "| ");
        if (!rx_seq(r, out))
            return 0;
    }
    return sc_puts(r->c, out, ")");
}

static const char *pattern_rule(schema_conv *c, const di_json *pattern, const char *hint)
{
    const size_t saved = sc_path_push(c, "pattern");
    if (pattern->kind != DI_JSON_STRING || strlen(pattern->str) != pattern->len) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "pattern must be a string");
        return NULL;
    }
    if (pattern->len > RX_MAX_LEN) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: a pattern longer than %u bytes", RX_MAX_LEN);
        return NULL;
    }
    rx r = {.c = c, .s = pattern->str, .n = pattern->len};
    const int head = r.n > 0 && r.s[0] == '^';
    r.i = head;
    sc_text body = {0};
    sc_puts(c, &body, "\"\\\"\" ");
    const char *any = head ? NULL : sc_shared(c, "char");
    if (!head && any)
        sc_printf(c, &body, "%s* ", any);
    int ok = rx_alt(&r, &body);
    if (!ok && !c->failed)
        rx_fail(&r, "an expression");
    const int tail = ok && r.i < r.n && r.s[r.i] == '$';
    if (ok && r.i + tail != r.n)
        ok = rx_fail(&r, r.s[r.i] == ')' ? "an unbalanced )" : "an unexpected character");
    if (ok && !tail && (any = sc_shared(c, "char")))
        sc_printf(c, &body, " %s*", any);
    sc_puts(c, &body, " \"\\\"\"");
    sc_path_pop(c, saved);
    const char *name = ok && !c->failed ? sc_name(c, hint) : NULL;
    ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}

/* ---- formats and lengths ------------------------------------------------------------- */

/* Fixed grammars of the formats, inside the quotes. Subsets of RFC 3339 and
 * RFC 4122 that Python's parsers accept: years 0001-9999, days valid in every
 * year (February to 28), no leap second. */
static const struct { const char *name, *body; } FORMATS[] = {
    {"date", "([1-9] [0-9]{3} | \"0\" ([1-9] [0-9]{2} | \"0\" ([1-9] [0-9] | \"0\" [1-9]))) \"-\" "
             "((\"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\") \"-\" "
             "(\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
             "(\"04\" | \"06\" | \"09\" | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | "
             "\"02\" \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))"},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
             "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
    {"uuid", "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}"},
    {"email", "[a-zA-Z0-9_+-]{1,32} (\".\" [a-zA-Z0-9_+-]{1,32}){0,2} \"@\" [a-z0-9]{1,32} "
              "(\".\" [a-z0-9]{1,32}){0,2} \".\" [a-z]{2,8}"},
};

static const char *format_rule(schema_conv *c, const di_json *format, const char *hint)
{
    const size_t saved = sc_path_push(c, "format");
    if (format->kind != DI_JSON_STRING) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "format must be a string");
        return NULL;
    }
    const char *body_text = NULL;
    const int date_time = strcmp(format->str, "date-time") == 0;
    for (size_t i = 0; i < sizeof FORMATS / sizeof *FORMATS; i++)
        if (strcmp(format->str, FORMATS[i].name) == 0 || (date_time && i < 2))
            body_text = FORMATS[i].name;
    if (!body_text) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported format \"%.60s\"", format->str);
        return NULL;
    }
    sc_path_pop(c, saved);
    sc_text body = {0};
    sc_puts(c, &body, "\"\\\"\" ");
    if (date_time) {
        sc_printf(c, &body, "%s \"T\" %s", FORMATS[0].body, FORMATS[1].body);
    } else {
        for (size_t i = 0; i < sizeof FORMATS / sizeof *FORMATS; i++)
            if (strcmp(format->str, FORMATS[i].name) == 0)
                sc_puts(c, &body, FORMATS[i].body);
    }
    sc_puts(c, &body, " \"\\\"\"");
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}

const char *sc_string(schema_conv *c, const di_json *s, const char *hint)
{
    const di_json *pattern = di_json_get(s, "pattern"), *format = di_json_get(s, "format");
    uint64_t min = 0, max = UINT64_MAX;
    if (!sc_count(c, s, "minLength", &min) || !sc_count(c, s, "maxLength", &max))
        return NULL;
    const int lengths = di_json_get(s, "minLength") || di_json_get(s, "maxLength");
    if ((pattern != NULL) + (format != NULL) + lengths > 1) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: more than one of pattern, format and minLength/maxLength");
        return NULL;
    }
    if (pattern)
        return pattern_rule(c, pattern, hint);
    if (format)
        return format_rule(c, format, hint);
    if (!lengths)
        return sc_shared(c, "string");
    if (max != UINT64_MAX && max < min) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "minLength %llu is above maxLength %llu", (unsigned long long)min,
                   (unsigned long long)max);
        return NULL;
    }
    if (min > 10000 || (max != UINT64_MAX && max > 10000)) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: minLength or maxLength above 10000");
        return NULL;
    }
    const char *ch = sc_shared(c, "char");
    sc_text body = {0};
    if (ch && max == UINT64_MAX)
        sc_printf(c, &body, "\"\\\"\" %s{%llu,} \"\\\"\"", ch, (unsigned long long)min);
    else if (ch)
        sc_printf(c, &body, "\"\\\"\" %s{%llu,%llu} \"\\\"\"", ch, (unsigned long long)min, (unsigned long long)max);
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}
