/*
 * serve_messages.c — a chat request's messages, as OpenAI's clients send
 * them, into the roles and contents di_chat_tokenize takes (docs/SERVING.md,
 * "Messages"):
 *
 *   content      a string, or an array of text parts joined in order; image,
 *                audio and file parts are refused (the models are text-only);
 *                null only on an assistant message with tool_calls
 *   developer    OpenAI's newer name of the system role
 *   tool         a tool's answer (tool_call_id accepted, not rendered: the
 *                templates do not show it)
 *   tool_calls   an assistant's calls, each the library's "tool_call"
 *                message NAME "\n" ARGUMENTS right after it, the arguments
 *                (a JSON text, or an object) written as the templates' tojson
 *                writes them (sv_python_json)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

#define MAX_MESSAGES 256
#define MAX_CALLS 64 /* per assistant message */
#define MAX_ENTRIES (2 * MAX_MESSAGES)

/* ---- Python's json.dumps ---------------------------------------------------- */

void sv_buf_put(sv_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void sv_buf_puts(sv_buf *b, const char *s)
{
    sv_buf_put(b, s, strlen(s));
}

/* A string as json.dumps(ensure_ascii=False): '"', '\\' and control
 * characters escaped (\uXXXX in lower case but for the five short forms). */
static void put_string(sv_buf *b, const char *s, size_t n)
{
    sv_buf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *short_form = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                                 : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (short_form) {
            sv_buf_puts(b, short_form);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sv_buf_puts(b, esc);
        } else {
            sv_buf_put(b, (const char *)&c, 1);
        }
    }
    sv_buf_puts(b, "\"");
}

/* A double as Python's repr(): the shortest digits that read back to it,
 * positional when the decimal exponent is in [-4, 16), with ".0" when
 * integral; else d.ddde+XX. */
static void put_float(sv_buf *b, double x)
{
    char sci[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec - 1, x);
        if (strtod(sci, NULL) == x)
            break;
    }
    /* sci: [-]D[.DDD]e[+-]XX */
    const char *p = sci;
    char digits[24];
    size_t nd = 0;
    if (*p == '-') {
        sv_buf_puts(b, "-");
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    const int exp10 = atoi(p + 1);
    char out[64];
    size_t o = 0;
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            o += (size_t)snprintf(out, sizeof out, "0.");
            for (int k = -1; k > exp10; k--)
                out[o++] = '0';
            memcpy(out + o, digits, nd);
            o += nd;
        } else {
            for (int k = 0; k <= exp10; k++)
                out[o++] = (size_t)k < nd ? digits[k] : '0';
            out[o++] = '.';
            if ((size_t)exp10 + 1 < nd) {
                memcpy(out + o, digits + exp10 + 1, nd - (size_t)exp10 - 1);
                o += nd - (size_t)exp10 - 1;
            } else {
                out[o++] = '0';
            }
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    sv_buf_put(b, out, o);
}

/* Between the items of a container at depth: ", " (or "," and a new line
 * indented by indent x (depth + 1) spaces when indent > 0: json.dumps(indent=N)). */
static void put_separator(sv_buf *b, int first, int indent, int depth)
{
    sv_buf_puts(b, first ? "" : indent ? "," : ", ");
    for (int k = 0; indent && k <= indent * (depth + 1); k++)
        sv_buf_puts(b, k ? " " : "\n");
}

/* Before a non-empty container's closing bracket (indent > 0 only). */
static void put_close_line(sv_buf *b, int indent, int depth)
{
    for (int k = 0; indent && k <= indent * depth; k++)
        sv_buf_puts(b, k ? " " : "\n");
}

static void put_value(sv_buf *b, const json_t *v, int depth, int indent)
{
    if (depth > 64) { /* jansson's parser stops deeper bodies already */
        b->oom = 1;
        return;
    }
    char num[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *item;
        int first = 1;
        sv_buf_puts(b, "{");
        json_object_foreach((json_t *)v, key, item)
        {
            put_separator(b, first, indent, depth);
            put_string(b, key, strlen(key));
            sv_buf_puts(b, ": ");
            put_value(b, item, depth + 1, indent);
            first = 0;
        }
        if (!first)
            put_close_line(b, indent, depth);
        sv_buf_puts(b, "}");
        break;
    }
    case JSON_ARRAY:
        sv_buf_puts(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            put_separator(b, i == 0, indent, depth);
            put_value(b, json_array_get(v, i), depth + 1, indent);
        }
        if (json_array_size(v))
            put_close_line(b, indent, depth);
        sv_buf_puts(b, "]");
        break;
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        sv_buf_puts(b, num);
        break;
    case JSON_REAL: put_float(b, json_real_value(v)); break;
    case JSON_TRUE: sv_buf_puts(b, "true"); break;
    case JSON_FALSE: sv_buf_puts(b, "false"); break;
    case JSON_NULL: sv_buf_puts(b, "null"); break;
    }
}

char *sv_python_json_indent(const json_t *v, int indent)
{
    sv_buf b = {0};
    put_value(&b, v, 0, indent);
    if (b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

char *sv_python_json(const json_t *v)
{
    return sv_python_json_indent(v, 0);
}

/* ---- Messages ------------------------------------------------------------------ */

/* The fields a message may have, by role (one table). */
static const struct role_rule {
    const char *role;    /* as sent */
    const char *as;      /* the library's role */
    const char *fields;  /* allowed besides role and content, space-separated */
} role_rules[] = {
    {"system", "system", "name"},
    {"developer", "system", "name"}, /* OpenAI's newer name of the system role */
    {"user", "user", "name"},
    {"assistant", "assistant", "name tool_calls refusal"},
    {"tool", "tool", "tool_call_id"},
    {NULL, NULL, NULL},
};

static int field_allowed(const struct role_rule *rule, const char *key)
{
    if (!strcmp(key, "role") || !strcmp(key, "content"))
        return 1;
    const size_t n = strlen(key);
    for (const char *p = rule->fields; n && (p = strstr(p, key)); p += n)
        if ((p == rule->fields || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

/* A content: a string, or text parts joined; *text is malloc'd. */
static int content_text(json_t *content, size_t i, char **text, sv_error *e)
{
    if (json_is_string(content)) {
        if (strlen(json_string_value(content)) != json_string_length(content))
            return sv_bad(e, "messages", "message %zu contains NUL", i);
        *text = strdup(json_string_value(content));
        return *text ? 0 : sv_bad(e, "messages", "out of memory");
    }
    if (!json_is_array(content))
        return sv_bad(e, "messages", "message %zu: 'content' must be a string or an array of content parts", i);
    sv_buf b = {0};
    sv_buf_put(&b, "", 0);
    size_t k;
    json_t *part;
    json_array_foreach(content, k, part)
    {
        json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
        if (!json_is_string(type)) {
            free(b.p);
            return sv_bad(e, "messages", "message %zu: content part %zu must be an object with a string 'type'", i, k);
        }
        const char *t = json_string_value(type);
        json_t *part_text = json_object_get(part, "text");
        if (strcmp(t, "text")) {
            free(b.p);
            return sv_bad(e, "messages", "message %zu: content part %zu has type '%.40s': the models this server "
                          "runs are text-only (only 'text' parts)", i, k, t);
        }
        if (!json_is_string(part_text) || json_object_size(part) != 2 ||
            strlen(json_string_value(part_text)) != json_string_length(part_text)) {
            free(b.p);
            return sv_bad(e, "messages", "message %zu: content part %zu must be {\"type\": \"text\", \"text\": "
                          "STRING} (no NUL)", i, k);
        }
        sv_buf_put(&b, json_string_value(part_text), json_string_length(part_text));
    }
    if (b.oom) {
        free(b.p);
        return sv_bad(e, "messages", "out of memory");
    }
    *text = b.p;
    return 0;
}

int sv_function_name_ok(const char *name)
{
    const size_t n = strlen(name);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(name[i] == '_' || name[i] == '-' || (name[i] >= '0' && name[i] <= '9') ||
              ((name[i] | 32) >= 'a' && (name[i] | 32) <= 'z')))
            return 0;
    return 1;
}

/* One tool call: NAME "\n" ARGUMENTS into *out (malloc'd). */
static int tool_call_text(json_t *call, size_t i, size_t k, char **out, sv_error *e)
{
    json_t *type = json_object_get(call, "type"), *fn = json_object_get(call, "function");
    json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
    if (!json_is_object(call) || (type && !(json_is_string(type) && !strcmp(json_string_value(type), "function"))) ||
        !json_is_object(fn) || !json_is_string(name) || !(json_is_string(args) || json_is_object(args)))
        return sv_bad(e, "messages", "message %zu: tool call %zu must be {\"id\", \"type\": \"function\", "
                      "\"function\": {\"name\": STRING, \"arguments\": JSON TEXT}}", i, k);
    if (!sv_function_name_ok(json_string_value(name)))
        return sv_bad(e, "messages", "message %zu: tool call %zu: a function name has 1 to 64 letters, digits, "
                      "'_' or '-'", i, k);
    json_t *parsed = NULL;
    if (json_is_string(args)) {
        char what[96];
        snprintf(what, sizeof what, "message %zu: tool call %zu: 'arguments'", i, k);
        if (!(parsed = sv_json_load_inner(json_string_value(args), json_string_length(args), what, e)))
            return -1;
    }
    char *json = sv_python_json(parsed ? parsed : args);
    json_decref(parsed);
    const size_t nn = strlen(json_string_value(name));
    *out = json ? malloc(nn + 1 + strlen(json) + 1) : NULL;
    if (*out)
        sprintf(*out, "%s\n%s", json_string_value(name), json);
    free(json);
    return *out ? 0 : sv_bad(e, "messages", "out of memory");
}

static int add_entry(sv_chat *c, const char *role, char *content, sv_error *e)
{
    if (c->n == MAX_ENTRIES) {
        free(content);
        return sv_bad(e, "messages", "at most %d messages and tool calls", MAX_ENTRIES);
    }
    c->roles[c->n] = role;
    c->contents[c->n++] = content;
    return 0;
}

static int one_message(json_t *m, size_t i, sv_chat *out, sv_error *e)
{
    json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
    if (!json_is_string(role))
        return sv_bad(e, "messages", "message %zu must be an object with a string 'role'", i);
    const struct role_rule *rule = role_rules;
    while (rule->role && strcmp(rule->role, json_string_value(role)))
        rule++;
    if (!rule->role)
        return sv_bad(e, "messages", "message %zu: unknown role '%.40s' (system, developer, user, assistant, tool)",
                      i, json_string_value(role));
    const char *key;
    json_t *value;
    json_object_foreach(m, key, value) if (!field_allowed(rule, key)) return sv_bad(
        e, "messages", "message %zu: a %s message has no field '%.40s'", i, rule->role, key);
    json_t *calls = json_object_get(m, "tool_calls"), *content = json_object_get(m, "content");
    json_t *refusal = json_object_get(m, "refusal");
    if (refusal && !json_is_null(refusal))
        return sv_bad(e, "messages", "message %zu: 'refusal' is accepted only as null", i);
    if (calls && !json_is_null(calls) && (!json_is_array(calls) || json_array_size(calls) > MAX_CALLS))
        return sv_bad(e, "messages", "message %zu: 'tool_calls' must be an array of at most %d calls", i, MAX_CALLS);
    const size_t n_calls = json_is_array(calls) ? json_array_size(calls) : 0;
    char *text = NULL;
    if (!content || json_is_null(content)) {
        if (!n_calls)
            return sv_bad(e, "messages", "message %zu: 'content' is required (null only on an assistant message "
                          "with tool_calls)", i);
        text = strdup("");
    } else if (content_text(content, i, &text, e)) {
        return -1;
    }
    if (!text)
        return sv_bad(e, "messages", "out of memory");
    if (add_entry(out, rule->as, text, e))
        return -1;
    for (size_t k = 0; k < n_calls; k++) {
        char *call = NULL;
        if (tool_call_text(json_array_get(calls, k), i, k, &call, e) || add_entry(out, "tool_call", call, e))
            return -1;
    }
    return 0;
}

int sv_chat_messages(json_t *messages, sv_chat *out, sv_error *e)
{
    memset(out, 0, sizeof *out);
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return sv_bad(e, "messages", "'messages' must be a non-empty array of {\"role\", \"content\"}");
    if (json_array_size(messages) > MAX_MESSAGES)
        return sv_bad(e, "messages", "at most %d messages", MAX_MESSAGES);
    out->roles = calloc(MAX_ENTRIES, sizeof *out->roles);
    out->contents = calloc(MAX_ENTRIES, sizeof *out->contents);
    out->cap = MAX_ENTRIES;
    if (!out->roles || !out->contents) {
        sv_chat_free(out);
        return sv_bad(e, "messages", "out of memory");
    }
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) if (one_message(m, i, out, e))
    {
        sv_chat_free(out);
        return -1;
    }
    return 0;
}

void sv_chat_free(sv_chat *c)
{
    for (size_t i = 0; c->contents && i < c->n; i++)
        free(c->contents[i]);
    free(c->contents);
    free(c->roles);
    memset(c, 0, sizeof *c);
}
