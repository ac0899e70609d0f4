/*
 * schema_convert.c — the converter's driver: each schema node becomes a rule
 * (or a shared one: string, integer, value, ...). Keywords it knows:
 *   type (a name or a list), enum, const, anyOf, $ref with $defs /
 *   definitions (local pointers, recursion included), properties, required,
 *   additionalProperties (absent or false: only the listed properties; true
 *   or a schema: other keys after them), items, prefixItems, items as an
 *   array with additionalItems (tuples), minItems, maxItems, and the string
 *   and number keywords of schema_string.c and schema_number.c;
 * annotations (title, description, default, examples, ...) are ignored;
 * every other keyword is refused with its JSON pointer.
 */
#include "lib/grammar/schema_convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"
#include "lib/grammar/schema_internal.h"

static const char *const ANNOTATIONS[] = {
    "title", "description", "$schema", "$id", "$comment", "examples", "default", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", NULL,
};

static const char *const HANDLED[] = {
    "type", "enum", "const", "anyOf", "$ref", "properties", "required", "additionalProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", NULL,
};

static int in_list(const char *const *list, const char *key)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], key) == 0)
            return 1;
    return 0;
}

/* The first keyword of s that is neither an annotation nor in `allowed`
 * (NULL: every handled keyword), or NULL. */
static const char *other_keyword(const di_json *s, const char *const *allowed)
{
    for (size_t i = 0; i < s->n; i++) {
        const char *k = s->keys[i];
        if (strlen(k) != s->key_lens[i])
            return "(a key holding a NUL character)";
        if (in_list(ANNOTATIONS, k))
            continue;
        if (allowed ? !in_list(allowed, k) : !in_list(HANDLED, k))
            return k;
    }
    return NULL;
}

/* ---- $ref ------------------------------------------------------------------------ */

/* Decodes one token of a pointer in a URI fragment: %XX, then ~1 and ~0. */
static int pointer_token(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%' && i + 2 < n) {
            char hex[3] = {s[i + 1], s[i + 2], '\0'};
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end || v <= 0)
                return 0;
            ch = (char)v;
            i += 2;
        } else if (ch == '~') {
            if (i + 1 >= n || (s[i + 1] != '0' && s[i + 1] != '1'))
                return 0;
            ch = s[i + 1] == '0' ? '~' : '/';
            i++;
        }
        if (k + 1 >= cap)
            return 0;
        out[k++] = ch;
    }
    out[k] = '\0';
    return 1;
}

/* The node a local $ref ("#", "#/$defs/x") points at, or NULL. */
static const di_json *resolve(const di_json *root, const char *ref)
{
    const di_json *node = root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        const char *end = strchr(p, '/');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        char token[256];
        if (!pointer_token(p, n, token, sizeof token))
            return NULL;
        if (node->kind == DI_JSON_OBJECT) {
            node = di_json_get(node, token);
        } else if (node->kind == DI_JSON_ARRAY) {
            char *e;
            unsigned long i = strtoul(token, &e, 10);
            node = *token && !*e && i < node->n ? node->items[i] : NULL;
        } else {
            node = NULL;
        }
        if (!node)
            return NULL;
        p += n;
    }
    return *p == '\0' ? node : NULL;
}

static const char *ref_rule(schema_conv *c, const di_json *s)
{
    const di_json *ref = di_json_get(s, "$ref");
    const char *extra = other_keyword(s, (const char *const[]){"$ref", NULL});
    if (extra) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported keyword %.80s beside $ref", extra);
        return NULL;
    }
    size_t saved = sc_path_push(c, "$ref");
    if (ref->kind != DI_JSON_STRING || strlen(ref->str) != ref->len) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "$ref must be a string");
        return NULL;
    }
    if (ref->str[0] != '#') {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported $ref '%.200s': only local references (#/...)", ref->str);
        return NULL;
    }
    const di_json *target = resolve(c->root, ref->str);
    if (!target) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "bad $ref '%.200s': it points at nothing in the schema", ref->str);
        return NULL;
    }
    sc_path_pop(c, saved);
    if (target == c->root)
        return "root";
    for (size_t i = 0; i < c->n_refs; i++)
        if (c->refs[i].target == target)
            return c->refs[i].name;
    const char *last = strrchr(ref->str, '/');
    char hint[96];
    snprintf(hint, sizeof hint, "def-%.80s", last ? last + 1 : "ref");
    const char *name = sc_name(c, hint);
    if (!name || !DI_GROW(c->refs, c->n_refs, c->cap_refs, 1, 8)) {
        sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
        return NULL;
    }
    c->refs[c->n_refs].target = target; /* before converting it: a recursive $ref finds it */
    c->refs[c->n_refs].name = (char *)name;
    c->n_refs++;
    /* the target's errors name its own place */
    char path[SC_MAX_PATH];
    const size_t path_len = c->path_len;
    memcpy(path, c->path, path_len + 1);
    snprintf(c->path, sizeof c->path, "%s", ref->str + 1);
    c->path_len = strlen(c->path);
    const char *body_rule = sc_schema(c, target, name);
    memcpy(c->path, path, path_len + 1);
    c->path_len = path_len;
    sc_text body = {0};
    int ok = body_rule && sc_puts(c, &body, body_rule) && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}

/* ---- enum, const, anyOf ------------------------------------------------------------ */

static int type_matches(const char *type, const di_json *v)
{
    switch (v->kind) {
    case DI_JSON_NULL: return strcmp(type, "null") == 0;
    case DI_JSON_TRUE:
    case DI_JSON_FALSE: return strcmp(type, "boolean") == 0;
    case DI_JSON_STRING: return strcmp(type, "string") == 0;
    case DI_JSON_ARRAY: return strcmp(type, "array") == 0;
    case DI_JSON_OBJECT: return strcmp(type, "object") == 0;
    case DI_JSON_NUMBER:
        return strcmp(type, "number") == 0 || (strcmp(type, "integer") == 0 && v->is_integer);
    }
    return 0;
}

/* 1 when v has one of the types s names (any, without "type"). */
static int allowed_by_type(const di_json *s, const di_json *v)
{
    const di_json *t = di_json_get(s, "type");
    if (!t)
        return 1;
    if (t->kind == DI_JSON_STRING)
        return type_matches(t->str, v);
    for (size_t i = 0; t->kind == DI_JSON_ARRAY && i < t->n; i++)
        if (t->items[i]->kind == DI_JSON_STRING && type_matches(t->items[i]->str, v))
            return 1;
    return 0;
}

static const char *values_rule(schema_conv *c, const di_json *s, const char *hint)
{
    const int is_const = di_json_get(s, "const") != NULL;
    const char *key = is_const ? "const" : "enum";
    if (is_const && di_json_get(s, "enum")) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: const and enum together");
        return NULL;
    }
    const char *extra = other_keyword(s, (const char *const[]){"const", "enum", "type", NULL});
    if (extra) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported keyword %.80s beside %s", extra, key);
        return NULL;
    }
    const di_json *values = di_json_get(s, key);
    const size_t saved = sc_path_push(c, key);
    if (!is_const && values->kind != DI_JSON_ARRAY) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "enum must be an array");
        return NULL;
    }
    if (!is_const && values->n == 0) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "empty enum: it allows no value");
        return NULL;
    }
    sc_text body = {0};
    size_t written = 0;
    const size_t n = is_const ? 1 : values->n;
    for (size_t i = 0; i < n && !c->failed; i++) {
        const di_json *v = is_const ? values : values->items[i];
        if (!allowed_by_type(s, v))
            continue;
        if (written++ > 0)
            sc_puts(c, &body, " | ");
        sc_json_literal(c, &body, v);
    }
    if (!c->failed && written == 0)
        sc_fail_at(c, DI_ERR_GRAMMAR, "no value of %s has the schema's type", key);
    sc_path_pop(c, saved);
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}

static const char *any_of_rule(schema_conv *c, const di_json *s, const char *hint)
{
    const char *extra = other_keyword(s, (const char *const[]){"anyOf", NULL});
    if (extra) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported keyword %.80s beside anyOf (write it in each branch)", extra);
        return NULL;
    }
    const di_json *list = di_json_get(s, "anyOf");
    const size_t saved = sc_path_push(c, "anyOf");
    if (list->kind != DI_JSON_ARRAY || list->n == 0) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "anyOf must be a non-empty array of schemas");
        return NULL;
    }
    sc_text body = {0};
    for (size_t i = 0; i < list->n && !c->failed; i++) {
        const size_t at = sc_path_push_index(c, i);
        char h[96];
        snprintf(h, sizeof h, "%.60s-%zu", hint, i);
        const char *r = sc_schema(c, list->items[i], h);
        if (r && i > 0)
            sc_puts(c, &body, " | ");
        if (r)
            sc_puts(c, &body, r);
        sc_path_pop(c, at);
    }
    sc_path_pop(c, saved);
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}

/* ---- objects -------------------------------------------------------------------------- */

typedef struct object_plan {
    size_t n;
    const char **value;   /* the rule of each property's value */
    const char **key;     /* its key, and its length */
    size_t *key_len;
    unsigned char *required;
    const char **rest;    /* rest[i]: the rule of properties i.. after one was written (NULL: none left) */
    const char **first;   /* first[i]: the rule of properties i.. when none was written yet */
} object_plan;

/* `"key":` value */
static int put_member(schema_conv *c, sc_text *t, const object_plan *p, size_t i)
{
    sc_text key = {0};
    int ok = sc_json_string(c, &key, p->key[i], p->key_len[i]) && sc_puts(c, &key, ":") &&
             sc_literal(c, t, key.p, key.n) && sc_puts(c, t, " ") && sc_puts(c, t, p->value[i]);
    free(key.p);
    return ok;
}

/* rest[i] ::= "," member_i rest[i+1], the "," member optional when the
 * property is; first[i] ::= member_i rest[i+1] | first[i+1] (the second only
 * when it is optional; first[n] is nothing). Written from the last. */
static int write_chains(schema_conv *c, object_plan *p, const char *hint)
{
    for (size_t k = p->n; k-- > 0;) {
        char h[96];
        sc_text body = {0};
        if (k > 0) {
            sc_puts(c, &body, p->required[k] ? "\",\" " : "(\",\" ");
            put_member(c, &body, p, k);
            sc_puts(c, &body, p->required[k] ? "" : ")?");
            if (p->rest[k + 1]) {
                sc_puts(c, &body, " ");
                sc_puts(c, &body, p->rest[k + 1]);
            }
            snprintf(h, sizeof h, "%.80s-rest", hint);
            p->rest[k] = sc_name(c, h);
            if (!p->rest[k] || !sc_rule(c, p->rest[k], &body)) {
                free(body.p);
                return 0;
            }
            body.n = 0;
        }
        put_member(c, &body, p, k);
        if (p->rest[k + 1]) {
            sc_puts(c, &body, " ");
            sc_puts(c, &body, p->rest[k + 1]);
        }
        if (!p->required[k])
            sc_puts(c, &body, p->first[k + 1] ? " | " : " | \"\"");
        if (!p->required[k] && p->first[k + 1])
            sc_puts(c, &body, p->first[k + 1]);
        snprintf(h, sizeof h, "%.80s-first", hint);
        p->first[k] = sc_name(c, h);
        int ok = p->first[k] && sc_rule(c, p->first[k], &body);
        free(body.p);
        if (!ok)
            return 0;
    }
    return 1;
}

static int plan_properties(schema_conv *c, const di_json *props, const di_json *required, object_plan *p,
                           const char *hint)
{
    p->n = props->n;
    p->value = calloc(p->n + 1, sizeof *p->value);
    p->key = calloc(p->n + 1, sizeof *p->key);
    p->key_len = calloc(p->n + 1, sizeof *p->key_len);
    p->required = calloc(p->n + 1, 1);
    p->rest = calloc(p->n + 1, sizeof *p->rest);
    p->first = calloc(p->n + 1, sizeof *p->first);
    if (!p->value || !p->key || !p->key_len || !p->required || !p->rest || !p->first)
        return sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
    for (size_t i = 0; required && i < required->n; i++) {
        const size_t at = sc_path_push(c, "required"), at2 = sc_path_push_index(c, i);
        const di_json *r = required->items[i];
        size_t k = 0;
        while (r->kind == DI_JSON_STRING && k < props->n &&
               !(props->key_lens[k] == r->len && memcmp(props->keys[k], r->str, r->len) == 0))
            k++;
        if (r->kind != DI_JSON_STRING)
            return sc_fail_at(c, DI_ERR_GRAMMAR, "required must list strings");
        if (k == props->n)
            return sc_fail_at(c, DI_ERR_UNSUPPORTED, "required property \"%.80s\" is not in properties",
                              r->str);
        p->required[k] = 1;
        sc_path_pop(c, at2);
        sc_path_pop(c, at);
    }
    const size_t saved = sc_path_push(c, "properties");
    for (size_t i = 0; i < props->n && !c->failed; i++) {
        const size_t at = sc_path_push(c, props->keys[i]);
        char h[96];
        snprintf(h, sizeof h, "%.40s-%.40s", hint, props->keys[i]);
        p->value[i] = sc_schema(c, props->items[i], h);
        p->key[i] = props->keys[i];
        p->key_len[i] = props->key_lens[i];
        sc_path_pop(c, at);
    }
    sc_path_pop(c, saved);
    return !c->failed;
}

static void plan_free(object_plan *p)
{
    free(p->value);
    free(p->key);
    free(p->key_len);
    free(p->required);
    free(p->rest);
    free(p->first);
}

/* ---- additional properties ------------------------------------------------------------- */

/* The code points of n bytes of UTF-8 (the JSON parser checked it) into cp;
 * their count. */
static size_t code_points(const char *s, size_t n, uint32_t *cp)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        const size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        uint32_t v = len == 1 ? c : len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
        for (size_t j = 1; j < len && i + j < n; j++)
            v = (v << 6) | ((unsigned char)s[i + j] & 0x3fu);
        cp[k++] = v;
        i += len;
    }
    return k;
}

/* A trie of the listed keys, by code point: node 0 is the empty prefix. */
typedef struct key_trie {
    uint32_t *cp, *child, *sibling; /* a node's code point, first child, next sibling (0: none) */
    unsigned char *terminal;         /* a listed key ends here */
    const char **rule;
    size_t n, cap;
} key_trie;

static int trie_node(key_trie *t, uint32_t cp)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        uint32_t *a = realloc(t->cp, cap * sizeof *a), *b2, *c2;
        if (!a)
            return -1;
        t->cp = a;
        if (!(b2 = realloc(t->child, cap * sizeof *b2)))
            return -1;
        t->child = b2;
        if (!(c2 = realloc(t->sibling, cap * sizeof *c2)))
            return -1;
        t->sibling = c2;
        unsigned char *d = realloc(t->terminal, cap);
        if (!d)
            return -1;
        t->terminal = d;
        const char **e = realloc(t->rule, cap * sizeof *e);
        if (!e)
            return -1;
        t->rule = e;
        t->cap = cap;
    }
    t->cp[t->n] = cp;
    t->child[t->n] = t->sibling[t->n] = 0;
    t->terminal[t->n] = 0;
    t->rule[t->n] = NULL;
    return (int)t->n++;
}

/* The rule of an additional property's key: a string whose characters are
 * written as themselves (no escapes, so its text is its value) and whose
 * value is none of the listed keys.
 * One rule per node of the keys' trie: at a node, end (when no key ends
 * there), a character no key continues with then any, or a key's next
 * character and its node's rule. */
static const char *extra_key_rule(schema_conv *c, const object_plan *p, const char *hint)
{
    key_trie t = {0};
    uint32_t *cp = NULL;
    size_t cap_cp = 0;
    int ok = trie_node(&t, 0) == 0;
    for (size_t i = 0; ok && i < p->n; i++) {
        if (p->key_len[i] + 1 > cap_cp) {
            cap_cp = p->key_len[i] + 1;
            uint32_t *grown = realloc(cp, cap_cp * sizeof *cp);
            if (!(ok = grown != NULL))
                break;
            cp = grown;
        }
        const size_t m = code_points(p->key[i], p->key_len[i], cp);
        uint32_t at = 0;
        for (size_t j = 0; ok && j < m; j++) {
            uint32_t ch = t.child[at];
            while (ch && t.cp[ch] != cp[j])
                ch = t.sibling[ch];
            if (!ch) {
                const int nn = trie_node(&t, cp[j]);
                if (!(ok = nn >= 0))
                    break;
                ch = (uint32_t)nn;
                t.sibling[ch] = t.child[at];
                t.child[at] = ch;
            }
            at = ch;
        }
        if (ok)
            t.terminal[at] = 1;
    }
    free(cp);
    if (!ok) {
        sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
    } else {
        for (size_t k = 0; k < t.n && !c->failed; k++) { /* named by node: no long probe for a free name */
            char h[96];
            snprintf(h, sizeof h, "%.60s-other-key-%zu", hint, k);
            t.rule[k] = sc_name(c, h);
        }
        const char *kchar = c->failed ? NULL : sc_shared(c, "key-char");
        sc_text body = {0};
        for (size_t k = t.n; kchar && k-- > 0 && !c->failed;) {
            body.n = 0;
            size_t parts = 0;
            for (uint32_t ch = t.child[k]; ch; ch = t.sibling[ch])
                if (t.cp[ch] >= 0x20 && t.cp[ch] != '"' && t.cp[ch] != '\\')
                    sc_printf(c, &body, "%s[\\U%08X] %s", parts++ ? " | " : "", (unsigned)t.cp[ch], t.rule[ch]);
            sc_printf(c, &body, "%s[^\"\\\\\\x00-\\x1F", parts++ ? " | " : "");
            for (uint32_t ch = t.child[k]; ch; ch = t.sibling[ch])
                sc_printf(c, &body, "\\U%08X", (unsigned)t.cp[ch]);
            sc_printf(c, &body, "] %s*", kchar);
            if (!t.terminal[k])
                sc_puts(c, &body, " | \"\"");
            sc_rule(c, t.rule[k], &body);
        }
        free(body.p);
    }
    const char *name = NULL;
    if (!c->failed) {
        char h[96];
        snprintf(h, sizeof h, "%.80s-other", hint);
        sc_text body = {0};
        name = sc_name(c, h);
        if (!(name && sc_printf(c, &body, "\"\\\"\" %s \"\\\"\"", t.rule[0]) && sc_rule(c, name, &body)))
            name = NULL;
        free(body.p);
    }
    free(t.cp);
    free(t.child);
    free(t.sibling);
    free(t.terminal);
    free(t.rule);
    return name;
}

/* additionalProperties true or a schema: the rules of the properties after
 * the listed ones, p->rest[n] (after a member: ("," key ":" value)*) and
 * p->first[n] (none written yet: the same without the first comma, or
 * nothing). */
static int plan_extra(schema_conv *c, const di_json *extra, object_plan *p, const char *hint)
{
    const char *value;
    if (extra->kind == DI_JSON_TRUE) {
        value = sc_shared(c, "value");
    } else {
        const size_t saved = sc_path_push(c, "additionalProperties");
        char h[96];
        snprintf(h, sizeof h, "%.60s-additional", hint);
        value = sc_schema(c, extra, h);
        sc_path_pop(c, saved);
    }
    const char *key = value ? extra_key_rule(c, p, hint) : NULL;
    if (!key)
        return 0;
    char h[96];
    sc_text body = {0};
    snprintf(h, sizeof h, "%.60s-additional-kv", hint);
    const char *kv = sc_name(c, h);
    int ok = kv && sc_printf(c, &body, "%s \":\" %s", key, value) && sc_rule(c, kv, &body);
    body.n = 0;
    snprintf(h, sizeof h, "%.60s-additional-rest", hint);
    ok = ok && (p->rest[p->n] = sc_name(c, h)) && sc_printf(c, &body, "(\",\" %s)*", kv) &&
         sc_rule(c, p->rest[p->n], &body);
    body.n = 0;
    snprintf(h, sizeof h, "%.60s-additional-first", hint);
    ok = ok && (p->first[p->n] = sc_name(c, h)) && sc_printf(c, &body, "(%s (\",\" %s)*)?", kv, kv) &&
         sc_rule(c, p->first[p->n], &body);
    free(body.p);
    return ok;
}

static const char *object_rule(schema_conv *c, const di_json *s, const char *hint)
{
    const di_json *props = di_json_get(s, "properties");
    const di_json *required = di_json_get(s, "required");
    const di_json *extra = di_json_get(s, "additionalProperties");
    if (props && props->kind != DI_JSON_OBJECT) {
        const size_t saved = sc_path_push(c, "properties");
        sc_fail_at(c, DI_ERR_GRAMMAR, "properties must be an object");
        sc_path_pop(c, saved);
        return NULL;
    }
    if (required && required->kind != DI_JSON_ARRAY) {
        const size_t saved = sc_path_push(c, "required");
        sc_fail_at(c, DI_ERR_GRAMMAR, "required must be an array");
        sc_path_pop(c, saved);
        return NULL;
    }
    if (extra && extra->kind != DI_JSON_TRUE && extra->kind != DI_JSON_FALSE && extra->kind != DI_JSON_OBJECT) {
        const size_t saved = sc_path_push(c, "additionalProperties");
        sc_fail_at(c, DI_ERR_GRAMMAR, "additionalProperties must be a schema (an object or a boolean)");
        sc_path_pop(c, saved);
        return NULL;
    }
    const int open = extra && extra->kind != DI_JSON_FALSE; /* properties beyond the listed ones */
    if (!props || props->n == 0) {
        if (required && required->n > 0) {
            const size_t saved = sc_path_push(c, "required");
            sc_fail_at(c, DI_ERR_UNSUPPORTED, "required properties without properties");
            sc_path_pop(c, saved);
            return NULL;
        }
        if (extra && extra->kind == DI_JSON_FALSE) {
            const char *name = sc_name(c, hint);
            sc_text body = {0};
            int ok = name && sc_puts(c, &body, "\"{}\"") && sc_rule(c, name, &body);
            free(body.p);
            return ok ? name : NULL;
        }
        if (!extra || extra->kind == DI_JSON_TRUE)
            return sc_shared(c, "object"); /* any object: json_object */
    }
    object_plan p = {0};
    const char *name = NULL;
    const di_json none = {.kind = DI_JSON_OBJECT};
    if (plan_properties(c, props ? props : &none, required, &p, hint) && (!open || plan_extra(c, extra, &p, hint)) &&
        write_chains(c, &p, hint)) {
        sc_text body = {0};
        name = sc_name(c, hint);
        if (!(name && sc_puts(c, &body, "\"{\" ") && sc_puts(c, &body, p.first[0]) &&
              sc_puts(c, &body, " \"}\"") && sc_rule(c, name, &body)))
            name = NULL;
        free(body.p);
    }
    plan_free(&p);
    return name;
}

/* ---- arrays ------------------------------------------------------------------------------ */

/* A tuple: prefixItems (or items as an array, with additionalItems), the
 * array's first items in order, then items (or additionalItems) for the rest
 * (any value when absent, none when false), with minItems and maxItems over
 * them all. A rule per position j of the prefix: tuple_j ::= sep item_j
 * tuple_{j+1}, and | "" when j >= minItems (an array may stop before the
 * prefix ends, as the schema allows); after the prefix, the rest repeated
 * max(0, min - n) to max - n times. */
static const char *tuple_rule(schema_conv *c, const di_json *prefix, const char *prefix_key,
                              const di_json *rest, const char *rest_key, uint64_t min, uint64_t max,
                              const char *hint)
{
    const size_t n = prefix->n;
    const char **item = calloc(n + 1, sizeof *item);
    if (!item) {
        sc_fail(c, DI_ERR_OUT_OF_MEMORY, "out of memory converting the schema");
        return NULL;
    }
    const size_t saved = sc_path_push(c, prefix_key);
    for (size_t j = 0; j < n && !c->failed; j++) {
        const size_t at = sc_path_push_index(c, j);
        char h[96];
        snprintf(h, sizeof h, "%.60s-tuple-%zu", hint, j);
        item[j] = sc_schema(c, prefix->items[j], h);
        sc_path_pop(c, at);
    }
    sc_path_pop(c, saved);
    const char *rest_item = NULL; /* NULL: no item after the prefix */
    if (!c->failed && (!rest || rest->kind != DI_JSON_FALSE)) {
        if (!rest) {
            rest_item = sc_shared(c, "value");
        } else {
            const size_t at = sc_path_push(c, rest_key);
            char h[96];
            snprintf(h, sizeof h, "%.80s-item", hint);
            rest_item = sc_schema(c, rest, h);
            sc_path_pop(c, at);
        }
    }
    if (!c->failed && !rest_item && min > n) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "minItems %llu is above the %zu items the tuple allows",
                   (unsigned long long)min, n);
    }
    /* after the prefix, from the last position back */
    const char *next = NULL; /* the rule of the positions after j, NULL: nothing */
    sc_text body = {0};
    const uint64_t end = max < n ? max : n; /* positions of the prefix that may be written */
    if (!c->failed && rest_item && max > n) {
        const uint64_t lo = min > n ? min - n : 0;
        char h[96];
        snprintf(h, sizeof h, "%.80s-tail", hint);
        const char *tail = sc_name(c, h);
        const unsigned long long top = max == UINT64_MAX ? 0 : (unsigned long long)(max - n);
        char count[64];
        if (max == UINT64_MAX)
            snprintf(count, sizeof count, "{%llu,}", (unsigned long long)(n == 0 && lo > 0 ? lo - 1 : lo));
        else
            snprintf(count, sizeof count, "{%llu,%llu}", (unsigned long long)(n == 0 && lo > 0 ? lo - 1 : lo),
                     n == 0 ? top - 1 : top);
        if (n > 0) /* after the prefix's last item */
            sc_printf(c, &body, "(\",\" %s)%s", rest_item, count);
        else if (lo == 0) /* the array's first item has no comma */
            sc_printf(c, &body, "(%s (\",\" %s)%s)?", rest_item, rest_item, count);
        else
            sc_printf(c, &body, "%s (\",\" %s)%s", rest_item, rest_item, count);
        if (tail && sc_rule(c, tail, &body))
            next = tail;
    }
    for (uint64_t j = end; j-- > 0 && !c->failed;) {
        body.n = 0;
        char h[96];
        snprintf(h, sizeof h, "%.60s-from-%llu", hint, (unsigned long long)j);
        const char *name = sc_name(c, h);
        sc_printf(c, &body, j > 0 ? "\",\" %s" : "%s", item[j]);
        if (next)
            sc_printf(c, &body, " %s", next);
        if (j >= min)
            sc_puts(c, &body, " | \"\"");
        if (name && sc_rule(c, name, &body))
            next = name;
    }
    free(body.p);
    free(item);
    if (c->failed)
        return NULL;
    const char *name = sc_name(c, hint);
    sc_text whole = {0};
    int ok = name && (next ? sc_printf(c, &whole, "\"[\" %s \"]\"", next) : sc_puts(c, &whole, "\"[]\"")) &&
             sc_rule(c, name, &whole);
    free(whole.p);
    return ok ? name : NULL;
}

static const char *array_rule(schema_conv *c, const di_json *s, const char *hint)
{
    uint64_t min = 0, max = UINT64_MAX;
    if (!sc_count(c, s, "minItems", &min) || !sc_count(c, s, "maxItems", &max))
        return NULL;
    if (max != UINT64_MAX && max < min) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "minItems %llu is above maxItems %llu", (unsigned long long)min,
                   (unsigned long long)max);
        return NULL;
    }
    if (min > 10000 || (max != UINT64_MAX && max > 10000)) {
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: minItems or maxItems above 10000");
        return NULL;
    }
    const di_json *items = di_json_get(s, "items");
    const di_json *prefix = di_json_get(s, "prefixItems");
    const di_json *additional = di_json_get(s, "additionalItems");
    if ((prefix && (prefix->kind != DI_JSON_ARRAY || prefix->n == 0)) ||
        (items && items->kind == DI_JSON_ARRAY && items->n == 0)) {
        const char *key = prefix ? "prefixItems" : "items";
        const size_t saved = sc_path_push(c, key);
        sc_fail_at(c, DI_ERR_GRAMMAR, "%s must be a non-empty array of schemas", key);
        sc_path_pop(c, saved);
        return NULL;
    }
    if (prefix && items && items->kind == DI_JSON_ARRAY) {
        const size_t saved = sc_path_push(c, "items");
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: items as an array beside prefixItems");
        sc_path_pop(c, saved);
        return NULL;
    }
    if (additional && !(items && items->kind == DI_JSON_ARRAY)) {
        const size_t saved = sc_path_push(c, "additionalItems");
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: additionalItems without items as an array");
        sc_path_pop(c, saved);
        return NULL;
    }
    if (prefix)
        return tuple_rule(c, prefix, "prefixItems", items, "items", min, max, hint);
    if (items && items->kind == DI_JSON_ARRAY)
        return tuple_rule(c, items, "items", additional, "additionalItems", min, max, hint);
    const char *item;
    if (!items) {
        item = sc_shared(c, "value");
    } else {
        const size_t saved = sc_path_push(c, "items");
        char h[96];
        snprintf(h, sizeof h, "%.80s-item", hint);
        item = items->kind == DI_JSON_FALSE ? "" : sc_schema(c, items, h);
        sc_path_pop(c, saved);
    }
    if (!item)
        return NULL;
    if (!*item && min > 0) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "minItems %llu with items false: no array is valid", (unsigned long long)min);
        return NULL;
    }
    sc_text body = {0};
    if (max == 0 || !*item) {
        sc_puts(c, &body, "\"[]\"");
    } else {
        char rest[160];
        const uint64_t lo = min > 0 ? min - 1 : 0;
        if (max == UINT64_MAX)
            snprintf(rest, sizeof rest, "(\",\" %s){%llu,}", item, (unsigned long long)lo);
        else
            snprintf(rest, sizeof rest, "(\",\" %s){%llu,%llu}", item, (unsigned long long)lo,
                     (unsigned long long)(max - 1));
        sc_printf(c, &body, min == 0 ? "\"[\" (%s %s)? \"]\"" : "\"[\" %s %s \"]\"", item, rest);
    }
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}

/* ---- types ---------------------------------------------------------------------------------- */

static const char *type_rule(schema_conv *c, const di_json *s, const char *type, const char *hint)
{
    if (strcmp(type, "string") == 0)
        return sc_string(c, s, hint);
    if (strcmp(type, "integer") == 0)
        return sc_integer(c, s, hint);
    if (strcmp(type, "number") == 0)
        return sc_number(c, s, hint);
    if (strcmp(type, "boolean") == 0)
        return sc_shared(c, "boolean");
    if (strcmp(type, "null") == 0)
        return sc_shared(c, "null");
    if (strcmp(type, "object") == 0)
        return object_rule(c, s, hint);
    if (strcmp(type, "array") == 0)
        return array_rule(c, s, hint);
    const size_t saved = sc_path_push(c, "type");
    sc_fail_at(c, DI_ERR_GRAMMAR, "unknown type \"%.60s\" (object, array, string, number, integer, boolean, null)",
               type);
    sc_path_pop(c, saved);
    return NULL;
}

/* The type a schema without "type" has by its keywords, or NULL for any value. */
static const char *implied_type(schema_conv *c, const di_json *s)
{
    static const struct { const char *key, *type; } BY_KEY[] = {
        {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
        {"items", "array"}, {"prefixItems", "array"}, {"additionalItems", "array"}, {"minItems", "array"}, {"maxItems", "array"},
        {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"}, {"format", "string"},
        {"minimum", "integer"}, {"maximum", "integer"}, {"exclusiveMinimum", "integer"},
        {"exclusiveMaximum", "integer"},
    };
    const char *type = NULL;
    for (size_t i = 0; i < sizeof BY_KEY / sizeof *BY_KEY; i++) {
        if (!di_json_get(s, BY_KEY[i].key))
            continue;
        if (type && strcmp(type, BY_KEY[i].type) != 0) {
            sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported: keywords of several types (%s, %s) without a type",
                       type, BY_KEY[i].type);
            return NULL;
        }
        type = BY_KEY[i].type;
    }
    return type;
}

static const char *typed_rule(schema_conv *c, const di_json *s, const char *hint)
{
    const di_json *t = di_json_get(s, "type");
    if (!t) {
        const char *type = implied_type(c, s);
        if (c->failed)
            return NULL;
        return type ? type_rule(c, s, type, hint) : sc_shared(c, "value");
    }
    if (t->kind == DI_JSON_STRING)
        return type_rule(c, s, t->str, hint);
    const size_t saved = sc_path_push(c, "type");
    if (t->kind != DI_JSON_ARRAY || t->n == 0) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "type must be a type name or a non-empty list of them");
        return NULL;
    }
    sc_path_pop(c, saved);
    sc_text body = {0};
    for (size_t i = 0; i < t->n && !c->failed; i++) {
        if (t->items[i]->kind != DI_JSON_STRING) {
            const size_t at = sc_path_push(c, "type");
            sc_fail_at(c, DI_ERR_GRAMMAR, "type must list type names");
            sc_path_pop(c, at);
            break;
        }
        char h[96];
        snprintf(h, sizeof h, "%.60s-%.20s", hint, t->items[i]->str);
        const char *r = type_rule(c, s, t->items[i]->str, h);
        if (r && i > 0)
            sc_puts(c, &body, " | ");
        if (r)
            sc_puts(c, &body, r);
    }
    const char *name = c->failed ? NULL : sc_name(c, hint);
    int ok = name && sc_rule(c, name, &body);
    free(body.p);
    return ok ? name : NULL;
}

static const char *convert(schema_conv *c, const di_json *s, const char *hint)
{
    if (s->kind == DI_JSON_TRUE)
        return sc_shared(c, "value");
    if (s->kind == DI_JSON_FALSE) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "the schema false allows no value");
        return NULL;
    }
    if (s->kind != DI_JSON_OBJECT) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "a schema must be an object or a boolean");
        return NULL;
    }
    const char *unknown = other_keyword(s, NULL);
    if (unknown) {
        const size_t saved = sc_path_push(c, unknown);
        sc_fail_at(c, DI_ERR_UNSUPPORTED, "unsupported keyword %.80s", unknown);
        sc_path_pop(c, saved);
        return NULL;
    }
    if (di_json_get(s, "$ref"))
        return ref_rule(c, s);
    if (di_json_get(s, "anyOf"))
        return any_of_rule(c, s, hint);
    if (di_json_get(s, "enum") || di_json_get(s, "const"))
        return values_rule(c, s, hint);
    return typed_rule(c, s, hint);
}

const char *sc_schema(schema_conv *c, const di_json *s, const char *hint)
{
    if (c->failed)
        return NULL;
    if (c->depth >= SC_MAX_DEPTH) {
        sc_fail_at(c, DI_ERR_GRAMMAR, "schemas nested deeper than %u", SC_MAX_DEPTH);
        return NULL;
    }
    c->depth++;
    const char *r = convert(c, s, hint);
    c->depth--;
    if (!r && !c->failed)
        sc_fail_at(c, DI_ERR_INTERNAL, "the schema converter failed without a reason");
    return r;
}

di_status di_schema_to_gbnf(const char *text, size_t len, char **gbnf, size_t *gbnf_len, char *err,
                            size_t err_size)
{
    *gbnf = NULL;
    *gbnf_len = 0;
    di_json *root = NULL;
    di_status st = di_json_parse(text, len, &root, err, err_size);
    if (st)
        return st;
    schema_conv c = {.root = root};
    sc_text out = {0};
    const char *reserved = sc_name(&c, "root"); /* "root" is the grammar's start */
    const char *r = reserved ? sc_schema(&c, root, "root") : NULL;
    if (r)
        sc_printf(&c, &out, "root ::= %s\n", r);
    if (!c.failed)
        sc_put(&c, &out, c.out.p ? c.out.p : "", c.out.n);
    if (c.failed) {
        st = di_error(err, err_size, (di_status)c.failed, "%s", c.err);
        free(out.p);
    } else {
        *gbnf = out.p;
        *gbnf_len = out.n;
    }
    for (size_t i = 0; i < c.n_names; i++)
        free(c.names[i]);
    free(c.names);
    free(c.name_table);
    free(c.refs);
    free(c.out.p);
    di_json_free(root);
    return st;
}
