/*
 * json_dom.c — the strict JSON parser of json_dom.h: recursive descent with
 * the depth bounded by DI_JSON_MAX_DEPTH, strings decoded to UTF-8 (escapes,
 * surrogate pairs; lone surrogates refused), numbers kept as text and as a
 * double.
 */
#include "lib/grammar/json_dom.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"
#include "lib/base/hex.h"
#include "lib/grammar/text_cursor.h"
#include "lib/base/utf8.h"

typedef struct jparser {
    di_cursor c;      /* the text, the position, the first error */
    uint32_t depth;
    int oom;
} jparser;

#define jfail(p, ...) di_cursor_fail(&(p)->c, __VA_ARGS__)

static int joom(jparser *p)
{
    p->oom = 1;
    return jfail(p, p->c.i, "out of memory");
}

static void skip_ws(jparser *p)
{
    while (p->c.i < p->c.n && strchr(" \t\n\r", p->c.s[p->c.i]) && p->c.s[p->c.i])
        p->c.i++;
}

void di_json_free(di_json *v)
{
    if (!v)
        return;
    for (size_t k = 0; k < v->n; k++) {
        di_json_free(v->items[k]);
        if (v->keys)
            free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    free(v->str);
    free(v);
}

static di_json *parse_value(jparser *p);

/* ---- strings -------------------------------------------------------------------- */

static int put_utf8(char **buf, size_t *n, size_t *cap, uint32_t c)
{
    char tmp[4];
    const size_t k = di_utf8_encode(c, tmp);
    if (!DI_GROW(*buf, *n, *cap, k + 1, 16))
        return 0;
    memcpy(*buf + *n, tmp, k);
    *n += k;
    return 1;
}

static int hex4(jparser *p, uint32_t *out)
{
    if (p->c.n - p->c.i < 4)
        return jfail(p, p->c.i, "expecting 4 hex digits after \\u");
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        const int h = di_hex_digit(p->c.s[p->c.i + k]);
        if (h < 0)
            return jfail(p, p->c.i, "expecting 4 hex digits after \\u");
        v = v * 16 + (uint32_t)h;
    }
    p->c.i += 4;
    *out = v;
    return 1;
}

static int parse_escape(jparser *p, uint32_t *c)
{
    const size_t at = p->c.i;
    p->c.i++; /* the backslash */
    if (p->c.i >= p->c.n)
        return jfail(p, at, "unterminated string");
    const char e = p->c.s[p->c.i++];
    switch (e) {
    case '"': *c = '"'; return 1;
    case '\\': *c = '\\'; return 1;
    case '/': *c = '/'; return 1;
    case 'b': *c = '\b'; return 1;
    case 'f': *c = '\f'; return 1;
    case 'n': *c = '\n'; return 1;
    case 'r': *c = '\r'; return 1;
    case 't': *c = '\t'; return 1;
    case 'u': break;
    default: return jfail(p, at, "unknown escape \\%c", e);
    }
    uint32_t u;
    if (!hex4(p, &u))
        return 0;
    if (u >= 0xdc00 && u <= 0xdfff)
        return jfail(p, at, "a lone low surrogate \\u%04X", u);
    if (u >= 0xd800 && u <= 0xdbff) {
        uint32_t lo;
        if (p->c.n - p->c.i < 2 || p->c.s[p->c.i] != '\\' || p->c.s[p->c.i + 1] != 'u')
            return jfail(p, at, "a high surrogate \\u%04X without its low half", u);
        p->c.i += 2;
        if (!hex4(p, &lo))
            return 0;
        if (lo < 0xdc00 || lo > 0xdfff)
            return jfail(p, at, "a high surrogate \\u%04X without its low half", u);
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
    }
    *c = u;
    return 1;
}

/* A string at p->c.i (its opening quote): the decoded bytes. */
static int parse_string(jparser *p, char **out, size_t *out_len)
{
    const size_t start = p->c.i;
    p->c.i++;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (p->c.i >= p->c.n) {
            free(buf);
            return jfail(p, start, "unterminated string");
        }
        const unsigned char c = (unsigned char)p->c.s[p->c.i];
        if (c == '"')
            break;
        if (c < 0x20) {
            free(buf);
            return jfail(p, p->c.i, "a control character (U+%04X) inside a string", c);
        }
        if (c == '\\') {
            uint32_t cp = 0;
            if (!parse_escape(p, &cp)) {
                free(buf);
                return 0;
            }
            if (!put_utf8(&buf, &n, &cap, cp)) {
                free(buf);
                return joom(p);
            }
            continue;
        }
        const size_t k = di_utf8_len(c); /* the text was checked to be UTF-8 */
        if (!DI_GROW(buf, n, cap, k + 1, 16)) {
            free(buf);
            return joom(p);
        }
        memcpy(buf + n, p->c.s + p->c.i, k);
        n += k;
        p->c.i += k;
    }
    p->c.i++;
    if (!DI_GROW(buf, n, cap, 1, 16)) {
        free(buf);
        return joom(p);
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return 1;
}

/* ---- numbers --------------------------------------------------------------------- */

static int parse_number(jparser *p, di_json *v)
{
    const size_t start = p->c.i;
    size_t i = p->c.i;
    int integral = 1;
    if (i < p->c.n && p->c.s[i] == '-')
        i++;
    if (i < p->c.n && p->c.s[i] == '0') {
        i++;
    } else if (i < p->c.n && p->c.s[i] >= '1' && p->c.s[i] <= '9') {
        while (i < p->c.n && p->c.s[i] >= '0' && p->c.s[i] <= '9')
            i++;
    } else {
        return jfail(p, start, "expecting a value");
    }
    if (i < p->c.n && p->c.s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->c.n || p->c.s[i] < '0' || p->c.s[i] > '9')
            return jfail(p, start, "a number with no digit after its '.'");
        while (i < p->c.n && p->c.s[i] >= '0' && p->c.s[i] <= '9')
            i++;
    }
    if (i < p->c.n && (p->c.s[i] == 'e' || p->c.s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->c.n && (p->c.s[i] == '+' || p->c.s[i] == '-'))
            i++;
        if (i >= p->c.n || p->c.s[i] < '0' || p->c.s[i] > '9')
            return jfail(p, start, "a number with no digit in its exponent");
        while (i < p->c.n && p->c.s[i] >= '0' && p->c.s[i] <= '9')
            i++;
    }
    const size_t len = i - start;
    if (!(v->str = malloc(len + 1)))
        return joom(p);
    memcpy(v->str, p->c.s + start, len);
    v->str[len] = '\0';
    v->len = len;
    v->num = strtod(v->str, NULL);
    if (integral && len <= 17 && v->num >= -9007199254740992.0 && v->num <= 9007199254740992.0) {
        v->is_integer = 1;
        v->integer = strtoll(v->str, NULL, 10);
    }
    p->c.i = i;
    return 1;
}

/* ---- arrays and objects ----------------------------------------------------------- */

static int add_item(jparser *p, di_json *v, size_t *cap, di_json *item, char *key, size_t key_len)
{
    if (v->n == *cap) {
        const size_t c = *cap ? *cap * 2 : 4;
        di_json **items = realloc(v->items, c * sizeof *items);
        if (!items)
            return joom(p);
        v->items = items;
        if (v->kind == DI_JSON_OBJECT) {
            char **keys = realloc(v->keys, c * sizeof *keys);
            if (!keys)
                return joom(p);
            v->keys = keys;
            size_t *lens = realloc(v->key_lens, c * sizeof *lens);
            if (!lens)
                return joom(p);
            v->key_lens = lens;
        }
        *cap = c;
    }
    if (v->kind == DI_JSON_OBJECT) {
        v->keys[v->n] = key;
        v->key_lens[v->n] = key_len;
    }
    v->items[v->n++] = item;
    return 1;
}

static int parse_container(jparser *p, di_json *v)
{
    const size_t start = p->c.i;
    const int object = p->c.s[p->c.i] == '{';
    const char close = object ? '}' : ']';
    v->kind = object ? DI_JSON_OBJECT : DI_JSON_ARRAY;
    if (++p->depth > DI_JSON_MAX_DEPTH)
        return jfail(p, start, "arrays and objects nested deeper than %u", DI_JSON_MAX_DEPTH);
    p->c.i++;
    skip_ws(p);
    size_t cap = 0;
    if (p->c.i < p->c.n && p->c.s[p->c.i] == close) {
        p->c.i++;
        p->depth--;
        return 1;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len = 0;
        if (object) {
            const size_t key_at = p->c.i;
            if (p->c.i >= p->c.n || p->c.s[p->c.i] != '"')
                return jfail(p, p->c.i, "expecting a string key");
            if (!parse_string(p, &key, &key_len))
                return 0;
            for (size_t k = 0; k < v->n; k++)
                if (v->key_lens[k] == key_len && memcmp(v->keys[k], key, key_len) == 0) {
                    free(key);
                    return jfail(p, key_at, "duplicate key \"%.60s\"", v->keys[k]);
                }
            skip_ws(p);
            if (p->c.i >= p->c.n || p->c.s[p->c.i] != ':') {
                free(key);
                return jfail(p, p->c.i, "expecting ':' after the key");
            }
            p->c.i++;
            skip_ws(p);
        }
        di_json *item = parse_value(p);
        if (!item || !add_item(p, v, &cap, item, key, key_len)) {
            di_json_free(item);
            free(key);
            return 0;
        }
        skip_ws(p);
        if (p->c.i < p->c.n && p->c.s[p->c.i] == ',') {
            p->c.i++;
            skip_ws(p);
            continue;
        }
        if (p->c.i < p->c.n && p->c.s[p->c.i] == close) {
            p->c.i++;
            p->depth--;
            return 1;
        }
        return jfail(p, p->c.i >= p->c.n ? start : p->c.i, p->c.i >= p->c.n ? "unbalanced %c: no %c closes it"
                                                                  : "expecting ',' or '%c'",
                     p->c.i >= p->c.n ? (object ? '{' : '[') : close, close);
    }
}

static int literal(jparser *p, const char *word)
{
    const size_t k = strlen(word);
    if (p->c.n - p->c.i < k || memcmp(p->c.s + p->c.i, word, k) != 0)
        return jfail(p, p->c.i, "expecting a value");
    p->c.i += k;
    return 1;
}

static di_json *parse_value(jparser *p)
{
    di_json *v = calloc(1, sizeof *v);
    if (!v) {
        joom(p);
        return NULL;
    }
    int ok;
    const char c = p->c.i < p->c.n ? p->c.s[p->c.i] : '\0';
    if (p->c.i >= p->c.n) {
        ok = jfail(p, p->c.i, "expecting a value, found the end of the text");
    } else if (c == '{' || c == '[') {
        ok = parse_container(p, v);
    } else if (c == '"') {
        v->kind = DI_JSON_STRING;
        ok = parse_string(p, &v->str, &v->len);
    } else if (c == 't') {
        v->kind = DI_JSON_TRUE;
        ok = literal(p, "true");
    } else if (c == 'f') {
        v->kind = DI_JSON_FALSE;
        ok = literal(p, "false");
    } else if (c == 'n') {
        v->kind = DI_JSON_NULL;
        ok = literal(p, "null");
    } else if (c == ']' || c == '}') {
        ok = jfail(p, p->c.i, "expecting a value, found '%c'", c);
    } else {
        v->kind = DI_JSON_NUMBER;
        ok = parse_number(p, v);
    }
    if (!ok) {
        di_json_free(v);
        return NULL;
    }
    return v;
}

di_status di_json_parse(const char *text, size_t len, di_json **out, char *err, size_t err_size)
{
    *out = NULL;
    if (len > DI_JSON_MAX_TEXT)
        return di_error(err, err_size, DI_ERR_GRAMMAR, "the JSON text has %zu bytes; at most %u", len,
                        DI_JSON_MAX_TEXT);
    size_t bad;
    if (!di_utf8_valid(text, len, &bad))
        return di_text_error(text, len, bad, DI_ERR_GRAMMAR, "invalid UTF-8", err, err_size);
    jparser p = {.c = {.s = text, .n = len}};
    skip_ws(&p);
    di_json *v = parse_value(&p);
    if (v) {
        skip_ws(&p);
        if (p.c.i < p.c.n) {
            jfail(&p, p.c.i, "text after the JSON value");
            di_json_free(v);
            v = NULL;
        }
    }
    if (!v)
        return di_text_error(text, len, p.c.err_at, p.oom ? DI_ERR_OUT_OF_MEMORY : DI_ERR_GRAMMAR, p.c.err, err,
                             err_size);
    *out = v;
    return DI_OK;
}

/* ---- queries ------------------------------------------------------------------------ */

const di_json *di_json_get(const di_json *v, const char *key)
{
    if (!v || v->kind != DI_JSON_OBJECT)
        return NULL;
    const size_t k = strlen(key);
    for (size_t i = 0; i < v->n; i++)
        if (v->key_lens[i] == k && memcmp(v->keys[i], key, k) == 0)
            return v->items[i];
    return NULL;
}

int di_json_equal(const di_json *a, const di_json *b)
{
    if (a->kind != b->kind || a->n != b->n)
        return 0;
    switch (a->kind) {
    case DI_JSON_NUMBER:
        return a->num == b->num;
    case DI_JSON_STRING:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case DI_JSON_ARRAY:
        for (size_t i = 0; i < a->n; i++)
            if (!di_json_equal(a->items[i], b->items[i]))
                return 0;
        return 1;
    case DI_JSON_OBJECT:
        for (size_t i = 0; i < a->n; i++) {
            const di_json *other = NULL;
            for (size_t j = 0; j < b->n && !other; j++)
                if (b->key_lens[j] == a->key_lens[i] && memcmp(b->keys[j], a->keys[i], a->key_lens[i]) == 0)
                    other = b->items[j];
            if (!other || !di_json_equal(a->items[i], other))
                return 0;
        }
        return 1;
    default:
        return 1;
    }
}
