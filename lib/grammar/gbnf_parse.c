/*
 * gbnf_parse.c — a recursive-descent parser of GBNF (llama.cpp's
 * grammars/README.md): rules `name ::= alternatives`, alternatives split by
 * `|`, sequences of literals "...", character classes [...] and [^...],
 * `.`, rule names and groups ( ... ), each followed by at most one of `*`,
 * `+`, `?`, `{m}`, `{m,}`, `{,n}`, `{m,n}`; `#` comments. At the top level a
 * newline ends a rule; inside a group and after `|` newlines are spaces.
 * Repetitions are written out as rules here (x* is r ::= x r | ""), so the
 * matcher knows only characters and references.
 *
 * The text is untrusted: its length, the nesting of groups, the repetition
 * counts and the size of the result are bounded (gram_ir.h), and every
 * error names its line and column.
 */
#include "lib/grammar/gbnf_parse.h"

#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/hex.h"
#include "lib/grammar/text_cursor.h"
#include "lib/base/utf8.h"

#define REPEAT_INF UINT32_MAX

typedef struct parser {
    di_cursor c;         /* the text, the position, the first error */
    di_gram_builder *b;
    uint32_t depth;      /* groups open */
} parser;

#define fail_at(p, ...) di_cursor_fail(&(p)->c, __VA_ARGS__)

/* A builder call failed: its message, at the parser's place. */
static int builder_failed(parser *p)
{
    return fail_at(p, p->c.i, "%s", di_gram_build_error(p->b, NULL));
}

static int at_end(const parser *p)
{
    return p->c.i >= p->c.n;
}

static char peek(const parser *p)
{
    return p->c.i < p->c.n ? p->c.s[p->c.i] : '\0';
}

static int is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Spaces, tabs and comments; newlines too when newline_ok. */
static void skip_space(parser *p, int newline_ok)
{
    while (!at_end(p)) {
        const char c = peek(p);
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
            p->c.i++;
        } else if (c == '#') {
            while (!at_end(p) && peek(p) != '\r' && peek(p) != '\n')
                p->c.i++;
        } else {
            break;
        }
    }
}

/* ---- characters ------------------------------------------------------------- */

static int parse_hex(parser *p, size_t digits, uint32_t *out)
{
    const size_t start = p->c.i - 2;
    uint32_t v = 0;
    for (size_t k = 0; k < digits; k++) {
        const int h = di_hex_digit(peek(p));
        if (at_end(p) || h < 0)
            return fail_at(p, p->c.i, "expecting %zu hex digits after \\%c", digits, p->c.s[start + 1]);
        v = v * 16 + (uint32_t)h;
        p->c.i++;
    }
    if (v > DI_GRAM_MAX_CODEPOINT)
        return fail_at(p, start, "\\%c%.*s is past U+10FFFF", p->c.s[start + 1], (int)digits, p->c.s + start + 2);
    *out = v;
    return 1;
}

/* One character of a literal or a class: an escape or a UTF-8 sequence
 * (the text was checked to be valid UTF-8). */
static int parse_char(parser *p, uint32_t *out)
{
    if (at_end(p))
        return fail_at(p, p->c.i, "unexpected end of the grammar");
    const unsigned char c = (unsigned char)p->c.s[p->c.i];
    if (c == '\\') {
        if (p->c.i + 1 >= p->c.n)
            return fail_at(p, p->c.i, "unexpected end of the grammar after \\");
        const char e = p->c.s[p->c.i + 1];
        p->c.i += 2;
        switch (e) {
        case 'x': return parse_hex(p, 2, out);
        case 'u': return parse_hex(p, 4, out);
        case 'U': return parse_hex(p, 8, out);
        case 't': *out = '\t'; return 1;
        case 'r': *out = '\r'; return 1;
        case 'n': *out = '\n'; return 1;
        case '\\': case '"': case '[': case ']': *out = (uint32_t)e; return 1;
        default:
            return fail_at(p, p->c.i - 2, "unknown escape \\%c (known: \\x \\u \\U \\t \\r \\n \\\\ \\\" \\[ \\])",
                           e);
        }
    }
    const size_t len = di_utf8_len(c);
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < len; k++)
        v = (v << 6) | ((unsigned char)p->c.s[p->c.i + k] & 0x3f);
    p->c.i += len;
    *out = v;
    return 1;
}

/* ---- elements ----------------------------------------------------------------- */

static int parse_alternates(parser *p, uint32_t rule, int nested);

static int parse_literal(parser *p, uint32_t rule)
{
    const size_t start = p->c.i;
    p->c.i++; /* the quote */
    while (peek(p) != '"') {
        if (at_end(p) || peek(p) == '\n' || peek(p) == '\r')
            return fail_at(p, start, "unterminated literal: no closing \" on its line");
        uint32_t c;
        if (!parse_char(p, &c))
            return 0;
        const uint32_t range[2] = {c, c};
        if (!di_gram_build_chars(p->b, rule, range, 1, 0))
            return builder_failed(p);
    }
    p->c.i++;
    return 1;
}

/* [abc], [a-z], [^...]: its ranges, then one charset element. */
static int parse_class(parser *p, uint32_t rule)
{
    const size_t start = p->c.i;
    p->c.i++;
    int negated = 0;
    if (peek(p) == '^') {
        negated = 1;
        p->c.i++;
    }
    uint32_t ranges[2 * 256];
    size_t n = 0;
    while (peek(p) != ']') {
        if (at_end(p))
            return fail_at(p, start, "unterminated character class: no closing ]");
        if (n == 256)
            return fail_at(p, start, "a character class of more than 256 items");
        uint32_t lo = 0, hi;
        if (!parse_char(p, &lo))
            return 0;
        hi = lo;
        if (peek(p) == '-' && p->c.i + 1 < p->c.n && p->c.s[p->c.i + 1] != ']') {
            const size_t dash = p->c.i;
            p->c.i++;
            if (!parse_char(p, &hi))
                return 0;
            if (hi < lo)
                return fail_at(p, dash, "the range U+%04X-U+%04X is backwards", lo, hi);
        }
        ranges[2 * n] = lo;
        ranges[2 * n + 1] = hi;
        n++;
    }
    p->c.i++;
    if (!di_gram_build_chars(p->b, rule, ranges, n, negated))
        return builder_failed(p);
    return 1;
}

static int parse_count(parser *p, uint32_t *out)
{
    const size_t start = p->c.i;
    uint64_t v = 0;
    while (peek(p) >= '0' && peek(p) <= '9' && !at_end(p)) {
        v = v * 10 + (uint64_t)(peek(p) - '0');
        if (v > DI_GRAM_MAX_REPEAT)
            return fail_at(p, start, "a repetition count over %u", DI_GRAM_MAX_REPEAT);
        p->c.i++;
    }
    *out = (uint32_t)v;
    return p->c.i > start;
}

/* {m}, {m,}, {,n}, {m,n} after an item. */
static int parse_braces(parser *p, uint32_t *min, uint32_t *max)
{
    const size_t start = p->c.i;
    p->c.i++;
    skip_space(p, 0);
    int has_min = parse_count(p, min);
    if (p->c.failed)
        return 0;
    if (!has_min)
        *min = 0;
    skip_space(p, 0);
    if (peek(p) == ',') {
        p->c.i++;
        skip_space(p, 0);
        if (!parse_count(p, max)) {
            if (p->c.failed)
                return 0;
            *max = REPEAT_INF;
        }
        skip_space(p, 0);
    } else if (has_min) {
        *max = *min;
    } else {
        return fail_at(p, start, "expecting a count in {m}, {m,}, {,n} or {m,n}");
    }
    if (peek(p) != '}')
        return fail_at(p, start, "unbalanced {: expecting }");
    p->c.i++;
    if (*max != REPEAT_INF && *max < *min)
        return fail_at(p, start, "the repetition {%u,%u} has its maximum below its minimum", *min, *max);
    return 1;
}

/* Replaces the item that starts at element `from` of rule's alternative by
 * min copies of it followed by the optional rest: r ::= x r | "" when
 * unbounded, else max - min nested optional rules. */
static int repeat(parser *p, uint32_t rule, uint32_t from, uint32_t min, uint32_t max)
{
    di_gram_builder *b = p->b;
    if (!di_gram_build_wrap(b, rule, from))
        return builder_failed(p);
    const uint32_t unit = di_gram_build_pop(b, rule);
    for (uint32_t k = 0; k < min; k++)
        if (!di_gram_build_elem(b, rule, unit))
            return builder_failed(p);
    if (max == REPEAT_INF) {
        int64_t r = di_gram_build_new_rule(b, "repeat", p->c.i);
        if (r < 0 || !di_gram_build_elem(b, (uint32_t)r, unit) || !di_gram_build_ref(b, (uint32_t)r, (uint32_t)r) ||
            !di_gram_build_end_alt(b, (uint32_t)r) || !di_gram_build_end_alt(b, (uint32_t)r) ||
            !di_gram_build_ref(b, rule, (uint32_t)r))
            return builder_failed(p);
        return 1;
    }
    int64_t prev = -1;
    for (uint32_t k = min; k < max; k++) {
        int64_t r = di_gram_build_new_rule(b, "repeat", p->c.i);
        if (r < 0 || !di_gram_build_elem(b, (uint32_t)r, unit) ||
            (prev >= 0 && !di_gram_build_ref(b, (uint32_t)r, (uint32_t)prev)) ||
            !di_gram_build_end_alt(b, (uint32_t)r) || !di_gram_build_end_alt(b, (uint32_t)r))
            return builder_failed(p);
        prev = r;
    }
    if (prev >= 0 && !di_gram_build_ref(b, rule, (uint32_t)prev))
        return builder_failed(p);
    return 1;
}

static int parse_group(parser *p, uint32_t rule)
{
    const size_t start = p->c.i;
    if (p->depth >= DI_GRAM_MAX_NESTING)
        return fail_at(p, start, "groups nested deeper than %u", DI_GRAM_MAX_NESTING);
    int64_t g = di_gram_build_new_rule(p->b, "group", start);
    if (g < 0)
        return builder_failed(p);
    p->c.i++;
    skip_space(p, 1);
    p->depth++;
    if (!parse_alternates(p, (uint32_t)g, 1))
        return 0;
    p->depth--;
    if (peek(p) != ')' || at_end(p))
        return fail_at(p, start, "unbalanced (: no ) closes it");
    p->c.i++;
    if (!di_gram_build_ref(p->b, rule, (uint32_t)g))
        return builder_failed(p);
    return 1;
}

/* Items until something that is not one (|, ), a newline at the top level,
 * the end). */
static int parse_sequence(parser *p, uint32_t rule, int nested)
{
    int64_t last = -1; /* the element index where the last item starts */
    for (;;) {
        const char c = peek(p);
        const uint32_t here = di_gram_build_alt_len(p->b, rule);
        if (at_end(p)) {
            break;
        } else if (c == '"') {
            last = here;
            if (!parse_literal(p, rule))
                return 0;
        } else if (c == '[') {
            last = here;
            if (!parse_class(p, rule))
                return 0;
        } else if (c == '.') {
            last = here;
            p->c.i++;
            const uint32_t any[2] = {0, DI_GRAM_MAX_CODEPOINT};
            if (!di_gram_build_chars(p->b, rule, any, 1, 0))
                return builder_failed(p);
        } else if (is_word_char(c)) {
            last = here;
            const size_t start = p->c.i;
            while (!at_end(p) && is_word_char(peek(p)))
                p->c.i++;
            int64_t ref = di_gram_build_rule(p->b, p->c.s + start, p->c.i - start, start);
            if (ref < 0 || !di_gram_build_ref(p->b, rule, (uint32_t)ref))
                return builder_failed(p);
        } else if (c == '(') {
            last = here;
            if (!parse_group(p, rule))
                return 0;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0)
                return fail_at(p, p->c.i, "%c repeats nothing: expecting an item before it", c);
            uint32_t min = 0, max = REPEAT_INF;
            if (c == '{') {
                if (!parse_braces(p, &min, &max))
                    return 0;
            } else {
                min = c == '+';
                max = c == '?' ? 1 : REPEAT_INF;
                p->c.i++;
            }
            if (!repeat(p, rule, (uint32_t)last, min, max))
                return 0;
            last = -1; /* x** is refused, as llama.cpp does */
        } else if (c == '<') {
            return fail_at(p, p->c.i, "token references (<...>) are not supported; write the token's text");
        } else {
            break;
        }
        skip_space(p, nested);
    }
    return 1;
}

static int parse_alternates(parser *p, uint32_t rule, int nested)
{
    if (!parse_sequence(p, rule, nested))
        return 0;
    if (!di_gram_build_end_alt(p->b, rule))
        return builder_failed(p);
    while (peek(p) == '|' && !at_end(p)) {
        p->c.i++;
        skip_space(p, 1);
        if (!parse_sequence(p, rule, nested))
            return 0;
        if (!di_gram_build_end_alt(p->b, rule))
            return builder_failed(p);
    }
    return 1;
}

static int parse_rule(parser *p)
{
    const size_t start = p->c.i;
    while (!at_end(p) && is_word_char(peek(p)))
        p->c.i++;
    if (p->c.i == start)
        return fail_at(p, start, "expecting a rule name");
    const size_t name_end = p->c.i;
    skip_space(p, 0);
    if (p->c.n - p->c.i < 3 || memcmp(p->c.s + p->c.i, "::=", 3) != 0)
        return fail_at(p, p->c.i, "expecting ::= after the rule name %.*s", (int)(name_end - start), p->c.s + start);
    p->c.i += 3;
    skip_space(p, 1);
    int64_t r = di_gram_build_rule(p->b, p->c.s + start, name_end - start, start);
    if (r < 0)
        return builder_failed(p);
    if (!di_gram_build_define(p->b, (uint32_t)r, start))
        return fail_at(p, start, "rule %.*s is defined twice", (int)(name_end - start), p->c.s + start);
    if (!parse_alternates(p, (uint32_t)r, 0))
        return 0;
    const char c = peek(p);
    if (c == ')' && !at_end(p))
        return fail_at(p, p->c.i, "unbalanced ): no ( before it");
    if (c == ']' && !at_end(p))
        return fail_at(p, p->c.i, "unbalanced ]: no [ before it");
    if (c == '}' && !at_end(p))
        return fail_at(p, p->c.i, "unbalanced }: no { before it");
    if (!at_end(p) && c != '\r' && c != '\n')
        return fail_at(p, p->c.i, "unexpected '%c': expecting the end of the rule", c);
    skip_space(p, 1);
    return 1;
}

di_status di_gbnf_parse(const char *text, size_t len, di_gram **out, char *err, size_t err_size)
{
    *out = NULL;
    if (len > DI_GRAM_MAX_TEXT)
        return di_error(err, err_size, DI_ERR_GRAMMAR, "the grammar text has %zu bytes; at most %u", len,
                        DI_GRAM_MAX_TEXT);
    size_t bad;
    if (!di_utf8_valid(text, len, &bad))
        return di_text_error(text, len, bad, DI_ERR_GRAMMAR, "invalid UTF-8", err, err_size);
    if (memchr(text, '\0', len))
        return di_text_error(text, len, (size_t)((const char *)memchr(text, '\0', len) - text), DI_ERR_GRAMMAR,
                             "a NUL byte", err, err_size);
    parser p = {.c = {.s = text, .n = len}};
    if (!(p.b = di_gram_build_new()))
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory parsing the grammar");
    skip_space(&p, 1);
    while (!at_end(&p) && !p.c.failed)
        parse_rule(&p);
    di_status st;
    if (p.c.failed) {
        di_gram_build_error(p.b, &st);
        if (st != DI_ERR_OUT_OF_MEMORY)
            st = DI_ERR_GRAMMAR;
        st = di_text_error(text, len, p.c.err_at, st, p.c.err, err, err_size);
    } else {
        int64_t at = -1;
        char what[256];
        st = di_gram_build_finish(p.b, out, &at, what, sizeof what);
        if (st && at >= 0)
            st = di_text_error(text, len, (size_t)at, st, what, err, err_size);
        else if (st)
            di_error(err, err_size, st, "%s", what);
    }
    di_gram_build_free(p.b);
    return st;
}
