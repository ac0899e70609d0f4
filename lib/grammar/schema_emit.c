/*
 * schema_emit.c — the GBNF text the JSON-schema converter writes: rule
 * names, literals, JSON-encoded strings, the shared rules (any JSON value,
 * strings, numbers), errors and the JSON pointer of the node at hand.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"
#include "lib/base/json_quote.h"
#include "lib/grammar/schema_internal.h"

int sc_fail(schema_conv *c, int status, const char *fmt, ...)
{
    if (!c->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
        c->failed = status;
    }
    return 0;
}

int sc_fail_at(schema_conv *c, int status, const char *fmt, ...)
{
    if (!c->failed) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof c->err)
            snprintf(c->err + n, sizeof c->err - (size_t)n, " at %.300s", c->path_len ? c->path : "/ (the root)");
        c->failed = status;
    }
    return 0;
}

/* ---- the JSON pointer ---------------------------------------------------------- */

size_t sc_path_push(schema_conv *c, const char *key)
{
    const size_t saved = c->path_len;
    char *p = c->path;
    size_t n = c->path_len;
    if (n + 2 < SC_MAX_PATH)
        p[n++] = '/';
    for (const char *k = key; *k && n + 3 < SC_MAX_PATH; k++) {
        if (*k == '~' || *k == '/') {
            p[n++] = '~';
            p[n++] = *k == '~' ? '0' : '1';
        } else {
            p[n++] = *k;
        }
    }
    p[n] = '\0';
    c->path_len = n;
    return saved;
}

size_t sc_path_push_index(schema_conv *c, size_t index)
{
    char key[32];
    snprintf(key, sizeof key, "%zu", index);
    return sc_path_push(c, key);
}

void sc_path_pop(schema_conv *c, size_t saved)
{
    c->path_len = saved;
    c->path[saved] = '\0';
}

int sc_count(schema_conv *c, const di_json *s, const char *key, uint64_t *out)
{
    const di_json *v = di_json_get(s, key);
    if (!v)
        return 1;
    if (v->kind != DI_JSON_NUMBER || !v->is_integer || v->integer < 0) {
        const size_t saved = sc_path_push(c, key);
        sc_fail_at(c, DI_ERR_GRAMMAR, "%s must be a non-negative integer", key);
        sc_path_pop(c, saved);
        return 0;
    }
    *out = (uint64_t)v->integer;
    return 1;
}

/* ---- text ------------------------------------------------------------------------ */

int sc_put(schema_conv *c, sc_text *t, const char *s, size_t n)
{
    if (c->failed)
        return 0;
    if (t->n + n > SC_MAX_OUTPUT)
        return sc_fail(c, DI_ERR_GRAMMAR, "the schema's grammar exceeds %u bytes", SC_MAX_OUTPUT);
    if (!DI_GROW(t->p, t->n, t->cap, n + 1, 256))
        return sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
    return 1;
}

int sc_puts(schema_conv *c, sc_text *t, const char *s)
{
    return sc_put(c, t, s, strlen(s));
}

int sc_printf(schema_conv *c, sc_text *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        return sc_fail(c, DI_ERR_INTERNAL, "a grammar fragment longer than %zu bytes", sizeof buf);
    return sc_put(c, t, buf, (size_t)n);
}

int sc_literal(schema_conv *c, sc_text *t, const char *s, size_t n)
{
    if (!sc_put(c, t, "\"", 1))
        return 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            esc[2] = '\0';
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02X", ch);
        } else {
            esc[0] = (char)ch;
            esc[1] = '\0';
        }
        if (!sc_puts(c, t, esc))
            return 0;
    }
    return sc_put(c, t, "\"", 1);
}

int sc_json_string(schema_conv *c, sc_text *t, const char *s, size_t n)
{
    char *q = n < SIZE_MAX / 8 ? malloc(DI_JSON_QUOTED_MAX(n)) : NULL;
    if (!q)
        return sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
    const int ok = sc_put(c, t, q, di_json_quote(s, n, q));
    free(q);
    return ok;
}

/* The compact JSON text of v. */
static int json_text(schema_conv *c, sc_text *t, const di_json *v, uint32_t depth)
{
    if (depth > DI_JSON_MAX_DEPTH)
        return sc_fail_at(c, DI_ERR_GRAMMAR, "a value nested too deeply");
    switch (v->kind) {
    case DI_JSON_NULL: return sc_puts(c, t, "null");
    case DI_JSON_TRUE: return sc_puts(c, t, "true");
    case DI_JSON_FALSE: return sc_puts(c, t, "false");
    case DI_JSON_NUMBER: return sc_put(c, t, v->str, v->len);
    case DI_JSON_STRING: return sc_json_string(c, t, v->str, v->len);
    case DI_JSON_ARRAY:
    case DI_JSON_OBJECT: {
        const int object = v->kind == DI_JSON_OBJECT;
        if (!sc_puts(c, t, object ? "{" : "["))
            return 0;
        for (size_t i = 0; i < v->n; i++) {
            if (i > 0 && !sc_puts(c, t, ","))
                return 0;
            if (object && (!sc_json_string(c, t, v->keys[i], v->key_lens[i]) || !sc_puts(c, t, ":")))
                return 0;
            if (!json_text(c, t, v->items[i], depth + 1))
                return 0;
        }
        return sc_puts(c, t, object ? "}" : "]");
    }
    }
    return 0;
}

int sc_json_literal(schema_conv *c, sc_text *t, const di_json *v)
{
    sc_text json = {0};
    int ok = json_text(c, &json, v, 0) && sc_literal(c, t, json.p, json.n);
    free(json.p);
    return ok;
}

/* ---- rule names -------------------------------------------------------------------- */

static size_t name_slot(const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return (size_t)(h & (SC_NAME_SLOTS - 1));
}

/* A hash table, not a scan: a schema may give thousands of rules one stem
 * (a long key's trie, a tuple's positions), each probing -2, -3, ... */
static int name_used(const schema_conv *c, const char *name)
{
    if (!c->name_table)
        return 0;
    for (size_t i = name_slot(name); c->name_table[i]; i = (i + 1) & (SC_NAME_SLOTS - 1))
        if (strcmp(c->names[c->name_table[i] - 1], name) == 0)
            return 1;
    return 0;
}

/* Records a new name (owned by c from here on); 0 when out of memory (the name is freed). */
static int add_name(schema_conv *c, char *copy)
{
    if (!c->name_table && !(c->name_table = calloc(SC_NAME_SLOTS, sizeof *c->name_table))) {
        free(copy);
        return 0;
    }
    if (!copy || c->n_names + 1 >= SC_NAME_SLOTS / 2 || !DI_GROW(c->names, c->n_names, c->cap_names, 1, 32)) {
        free(copy);
        return 0;
    }
    size_t i = name_slot(copy);
    while (c->name_table[i])
        i = (i + 1) & (SC_NAME_SLOTS - 1);
    c->names[c->n_names++] = copy;
    c->name_table[i] = (uint32_t)c->n_names;
    return 1;
}

const char *sc_name(schema_conv *c, const char *hint)
{
    if (c->failed)
        return NULL;
    if (c->n_names >= SC_MAX_RULES) {
        sc_fail(c, DI_ERR_GRAMMAR, "the schema's grammar needs more than %u rules", SC_MAX_RULES);
        return NULL;
    }
    char base[64];
    size_t n = 0;
    for (const char *h = hint; *h && n < 48; h++) {
        const char ch = *h;
        const int word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (word)
            base[n++] = ch;
        else if (n > 0 && base[n - 1] != '-')
            base[n++] = '-';
    }
    while (n > 0 && base[n - 1] == '-')
        n--;
    base[n] = '\0';
    if (n == 0)
        strcpy(base, "rule");
    char name[80];
    snprintf(name, sizeof name, "%s", base);
    for (unsigned k = 2; name_used(c, name); k++)
        snprintf(name, sizeof name, "%s-%u", base, k);
    char *copy = strdup(name);
    if (!add_name(c, copy)) {
        sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
        return NULL;
    }
    return copy;
}

int sc_rule(schema_conv *c, const char *name, const sc_text *body)
{
    return sc_puts(c, &c->out, name) && sc_puts(c, &c->out, " ::= ") &&
           sc_put(c, &c->out, body->p ? body->p : "", body->n) && sc_puts(c, &c->out, "\n");
}

/* ---- the shared rules -------------------------------------------------------------- */

typedef struct shared_rule {
    const char *name;
    const char *body;
    const char *needs[3]; /* rules it references */
} shared_rule;

/* JSON's texts with no whitespace; numbers of at most 16 integral digits,
 * 16 fraction digits and 2 exponent digits (docs/STRUCTURED.md). */
static const shared_rule SHARED[] = {
    {"hex", "[0-9a-fA-F]", {NULL}},
    {"char",
     "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] hex hex hex | [dD] [0-7] hex hex))",
     {"hex", NULL}},
    {"string", "\"\\\"\" char* \"\\\"\"", {"char", NULL}},
    {"key-char", "[^\"\\\\\\x00-\\x1F]", {NULL}}, /* a string's character written as itself */
    {"integer", "\"-\"? (\"0\" | [1-9] [0-9]{0,15})", {NULL}},
    {"number", "\"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?", {NULL}},
    {"boolean", "\"true\" | \"false\"", {NULL}},
    {"null", "\"null\"", {NULL}},
    {"value", "object | array | string | number | boolean | null",
     {"object", "array", NULL}},
    {"object", "\"{\" (string \":\" value (\",\" string \":\" value)*)? \"}\"", {"string", "value", NULL}},
    {"array", "\"[\" (value (\",\" value)*)? \"]\"", {"value", NULL}},
};

const char *sc_shared(schema_conv *c, const char *name)
{
    if (c->failed)
        return NULL;
    for (size_t i = 0; i < sizeof SHARED / sizeof *SHARED; i++) {
        const shared_rule *r = &SHARED[i];
        if (strcmp(r->name, name) != 0)
            continue;
        if (name_used(c, r->name))
            return r->name;
        char *copy = strdup(r->name);
        if (!add_name(c, copy)) { /* before its needs: value and object need each other */
            sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
            return NULL;
        }
        sc_text body = {0};
        int ok = sc_puts(c, &body, r->body) && sc_rule(c, r->name, &body);
        free(body.p);
        for (size_t k = 0; ok && k < 3 && r->needs[k]; k++)
            ok = sc_shared(c, r->needs[k]) != NULL;
        if (strcmp(name, "value") == 0) /* the types value names */
            ok = ok && sc_shared(c, "string") && sc_shared(c, "number") && sc_shared(c, "boolean") &&
                 sc_shared(c, "null");
        return ok ? r->name : NULL;
    }
    sc_fail(c, DI_ERR_INTERNAL, "no shared rule %s", name);
    return NULL;
}
