/*
 * serve_json.c — a request body's JSON, parsed by jansson (strict: it
 * rejects invalid UTF-8, and duplicate keys are refused) within a memory
 * budget; where a text may be cut inside a UTF-8 sequence.
 */
#include <string.h>

#include "cli/cli_text.h"
#include "serve/serve.h"

/* What parsing a body may allocate: jansson has no limit on array lengths
 * or member counts, and a 1 MiB body of small values costs about 16 MiB of
 * its heap, so each request gets a budget. jansson 2.14 does not survive an
 * allocation that fails inside its lexer (it reads past its buffer: found by
 * fuzz_request), so the budget is not enforced by failing allocations: the
 * text is scanned first for the most its values can cost, and refused before
 * jansson sees it when that is more than the budget left. */
#define JSON_BUDGET_FACTOR 8            /* bytes of heap per byte of body */
#define JSON_BUDGET_BASE (64u * 1024u)
#define JSON_VALUE_COST 96u             /* the most one value costs: its json_t, its slot in an array or table */
#define JSON_OBJECT_COST 512u           /* an object's hash table */
static __thread size_t json_left;       /* the budget left of the request this thread parses */

/* At most what jansson allocates to hold text: each value, each object's
 * table, and twice the bytes (the strings, and the lexer's copy). */
static size_t json_need(const char *text, size_t len)
{
    size_t values = 1, objects = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
            continue;
        }
        in_string = c == '"';
        values += c == ',' || c == ':' || c == '[' || c == '{';
        objects += c == '{';
    }
    return values * JSON_VALUE_COST + objects * JSON_OBJECT_COST + 2 * len;
}

/* Parses within what is left of the thread's budget; *over when it would not fit. */
static json_t *load_counted(const char *text, size_t len, size_t flags, json_error_t *jerr, int *over)
{
    const size_t need = json_need(text, len);
    *over = need > json_left;
    if (*over)
        return NULL;
    json_left -= need;
    return json_loadb(text, len, flags | JSON_REJECT_DUPLICATES, jerr);
}

json_t *sv_json_load(const char *body, size_t len, sv_error *e)
{
    json_error_t jerr;
    int over;
    json_left = JSON_BUDGET_FACTOR * len + JSON_BUDGET_BASE;
    json_t *root = load_counted(body, len, 0, &jerr, &over);
    if (over) {
        sv_set_error(e, 413, "invalid_request_error", NULL,
                     "the body's JSON may need more than %zu bytes of memory to hold (%d times its size): send "
                     "fewer, larger values", (size_t)JSON_BUDGET_FACTOR * len + JSON_BUDGET_BASE, JSON_BUDGET_FACTOR);
        return NULL;
    }
    if (!root && strstr(jerr.text, "too big")) { /* jansson holds integers as long long */
        sv_bad(e, NULL,
               "an integer in the body (line %d, column %d) is outside [-2^63, 2^63 - 1]: 'seed' takes "
               "integers in that range (a negative seed counts modulo 2^64)",
               jerr.line, jerr.column);
        return NULL;
    }
    if (!root)
        sv_bad(e, NULL, "the body is not valid JSON (line %d, column %d): %s", jerr.line, jerr.column, jerr.text);
    return root;
}

json_t *sv_json_load_inner(const char *text, size_t len, const char *what, sv_error *e)
{
    json_error_t jerr;
    int over;
    json_t *v = load_counted(text, len, JSON_DECODE_ANY, &jerr, &over);
    if (over)
        sv_set_error(e, 413, "invalid_request_error", "messages",
                     "%s needs more memory to hold than the body's JSON budget leaves", what);
    else if (!v)
        sv_bad(e, "messages", "%s is not valid JSON: %s", what, jerr.text);
    return v;
}

size_t sv_utf8_complete_prefix(const char *text, size_t len)
{
    /* Look back at most 3 bytes for a lead byte whose sequence runs past len. */
    for (size_t back = 1; back <= 4 && back <= len; back++) {
        unsigned char c = (unsigned char)text[len - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte */
        size_t need = cli_utf8_lead_length(c);
        return need > back ? len - back : len;
    }
    return len;
}

char *sv_json_dump(json_t *root)
{
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

const char *sv_unknown_key(json_t *o, const char *const *names)
{
    const char *key;
    json_t *value;
    json_object_foreach(o, key, value)
    {
        size_t i = 0;
        while (names[i] && strcmp(names[i], key))
            i++;
        if (!names[i])
            return key;
    }
    return NULL;
}
