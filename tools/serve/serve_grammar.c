/*
 * serve_grammar.c — a request's grammar (docs/SERVING.md, "Structured
 * output"): OpenAI's response_format ({"type": "text"}, {"type":
 * "json_object"}, {"type": "json_schema", "json_schema": {"name", "schema",
 * "strict", "description"}}) and llama.cpp's extensions grammar (GBNF text)
 * and json_schema (a schema alone), at most one of them. A grammar is
 * compiled once per text: the process keeps the compiled grammars by the
 * XXH3-128 of their kind and text (a schema's text is its compact JSON, keys
 * in their order), at most SV_GRAMMAR_CACHE of them, requests holding a
 * reference to the one they use.
 */
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

#define SV_GRAMMAR_CACHE 64
#define MAX_NAME 64

struct sv_grammar {
    di_digest key;       /* of the kind and the text */
    di_grammar *g;
    char digest[DI_DIGEST_HEX_SIZE]; /* di_grammar_digest: what the detinfer object names */
    int refs;            /* requests using it */
    uint64_t last_use;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static sv_grammar *cache[SV_GRAMMAR_CACHE];
static uint64_t cache_clock;

const di_grammar *sv_grammar_handle(const sv_grammar *g)
{
    return g->g;
}

const char *sv_grammar_digest(const sv_grammar *g)
{
    return g->digest;
}

/* 1 when g is in the cache (lock held). */
static int cached_locked(const sv_grammar *g)
{
    for (int i = 0; i < SV_GRAMMAR_CACHE; i++)
        if (cache[i] == g)
            return 1;
    return 0;
}

void sv_grammar_release(sv_grammar *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&cache_lock);
    const int drop = --g->refs == 0 && !cached_locked(g);
    pthread_mutex_unlock(&cache_lock);
    if (drop) { /* it did not fit the cache: its request was its only user */
        di_grammar_free(g->g);
        free(g);
    }
}

void sv_grammar_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < SV_GRAMMAR_CACHE; i++)
        if (cache[i] && cache[i]->refs == 0) {
            di_grammar_free(cache[i]->g);
            free(cache[i]);
            cache[i] = NULL;
        }
    pthread_mutex_unlock(&cache_lock);
}

/* The cached grammar of key with a new reference, or NULL (lock held). */
static sv_grammar *lookup_locked(const di_digest *key)
{
    for (int i = 0; i < SV_GRAMMAR_CACHE; i++)
        if (cache[i] && di_digest_equal(&cache[i]->key, key)) {
            cache[i]->refs++;
            cache[i]->last_use = ++cache_clock;
            return cache[i];
        }
    return NULL;
}

/* Keeps g (which holds one reference) unless a full cache has no unused
 * entry, in which case g lives only as long as its request (refs then
 * drop it: see sv_request_free). Lock held. */
static void insert_locked(sv_grammar *g)
{
    int slot = -1;
    for (int i = 0; i < SV_GRAMMAR_CACHE && slot < 0; i++)
        if (!cache[i])
            slot = i;
    for (int i = 0; i < SV_GRAMMAR_CACHE && slot < 0; i++)
        if (cache[i]->refs == 0 && (slot < 0 || cache[i]->last_use < cache[slot]->last_use))
            slot = i;
    if (slot < 0)
        return;
    if (cache[slot]) {
        di_grammar_free(cache[slot]->g);
        free(cache[slot]);
    }
    cache[slot] = g;
}

/* The compiled grammar of text (kind 'g' GBNF, 's' a JSON schema): cached,
 * or compiled here (outside the lock: a large schema takes a while). */
static int compile(char kind, const char *text, size_t len, const char *param, sv_grammar **out, sv_error *e)
{
    /* the key's bytes: the kind, the text's length (8 bytes, little-endian),
     * the text, zeros up to a multiple of 4 (what cli_digest_bytes takes) */
    const size_t head = 9, size = (head + len + 3) / 4 * 4;
    unsigned char *keyed = len <= SIZE_MAX - head - 3 ? calloc(size, 1) : NULL;
    if (!keyed)
        return sv_bad(e, param, "out of memory");
    keyed[0] = (unsigned char)kind;
    for (int i = 0; i < 8; i++)
        keyed[1 + i] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(keyed + head, text, len);
    di_digest key;
    const di_status kst = cli_digest_bytes(keyed, size, &key);
    free(keyed);
    if (kst) /* a cache keyed by an unwritten digest would mix grammars up */
        return sv_bad(e, param, "out of memory");
    pthread_mutex_lock(&cache_lock);
    *out = lookup_locked(&key);
    pthread_mutex_unlock(&cache_lock);
    if (*out)
        return 0;
    sv_grammar *g = calloc(1, sizeof *g);
    if (!g)
        return sv_bad(e, param, "out of memory");
    char err[512] = "";
    di_status st = kind == 'g' ? di_grammar_from_gbnf(text, len, 0, &g->g, err, sizeof err)
                               : di_grammar_from_json_schema(text, len, 0, &g->g, err, sizeof err);
    if (st) {
        free(g);
        if (st == DI_ERR_OUT_OF_MEMORY)
            return sv_bad(e, param, "out of memory compiling the grammar");
        return sv_bad(e, param, "'%s': %s", param, err);
    }
    di_digest d;
    di_grammar_digest(g->g, &d);
    cli_hex(&d, g->digest);
    g->key = key;
    g->refs = 1;
    pthread_mutex_lock(&cache_lock);
    sv_grammar *again = lookup_locked(&key); /* another request compiled it meanwhile */
    if (again) {
        di_grammar_free(g->g);
        free(g);
        g = again;
    } else {
        g->last_use = ++cache_clock;
        insert_locked(g);
    }
    pthread_mutex_unlock(&cache_lock);
    *out = g;
    return 0;
}

static int schema_grammar(json_t *schema, const char *param, sv_grammar **out, sv_error *e)
{
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return sv_bad(e, param, "'%s' must be a JSON schema (an object)", param);
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return sv_bad(e, param, "out of memory");
    const int rc = compile('s', text, strlen(text), param, out, e);
    free(text);
    return rc;
}

/* Every key of o is one of the NULL-ended names; else 400 naming it. */
static int only_keys(json_t *o, const char *const *names, const char *param, sv_error *e)
{
    const char *key = sv_unknown_key(o, names);
    return key ? sv_bad(e, param, "unknown field '%s.%s'", param, key) : 0;
}

static int json_schema_format(json_t *js, sv_grammar **out, sv_error *e)
{
    const char *const known[] = {"name", "schema", "strict", "description", NULL};
    const char *param = "response_format.json_schema";
    if (!json_is_object(js))
        return sv_bad(e, param, "'%s' must be an object {\"name\", \"schema\", \"strict\"}", param);
    if (only_keys(js, known, param, e))
        return -1;
    json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict");
    json_t *description = json_object_get(js, "description");
    if (name && (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > MAX_NAME ||
                 strspn(json_string_value(name), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                     json_string_length(name)))
        return sv_bad(e, "response_format.json_schema.name",
                      "'response_format.json_schema.name' must be 1 to %d letters, digits, _ or -", MAX_NAME);
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return sv_bad(e, "response_format.json_schema.strict",
                      "'response_format.json_schema.strict' must be true or false");
    if (description && !json_is_string(description))
        return sv_bad(e, "response_format.json_schema.description",
                      "'response_format.json_schema.description' must be a string");
    json_t *schema = json_object_get(js, "schema");
    if (!schema)
        return sv_bad(e, "response_format.json_schema.schema", "'response_format.json_schema.schema' is required");
    return schema_grammar(schema, "response_format.json_schema.schema", out, e);
}

/* response_format into *out (NULL for text). */
static int response_format(json_t *rf, sv_grammar **out, sv_error *e)
{
    if (!json_is_object(rf))
        return sv_bad(e, "response_format", "'response_format' must be an object with a \"type\"");
    json_t *type = json_object_get(rf, "type");
    if (!json_is_string(type))
        return sv_bad(e, "response_format.type", "'response_format.type' must be \"text\", \"json_object\" or "
                      "\"json_schema\"");
    const char *t = json_string_value(type);
    if (!strcmp(t, "text") || !strcmp(t, "json_object")) {
        if (only_keys(rf, (const char *const[]){"type", NULL}, "response_format", e))
            return -1;
        if (!strcmp(t, "text"))
            return 0;
        json_t *any_object = json_pack("{s:s}", "type", "object");
        const int rc = any_object ? schema_grammar(any_object, "response_format", out, e)
                                  : sv_bad(e, "response_format", "out of memory");
        json_decref(any_object);
        return rc;
    }
    if (!strcmp(t, "json_schema")) {
        if (only_keys(rf, (const char *const[]){"type", "json_schema", NULL}, "response_format", e))
            return -1;
        return json_schema_format(json_object_get(rf, "json_schema"), out, e);
    }
    return sv_bad(e, "response_format.type", "unknown response_format type \"%s\" (text, json_object, json_schema)", t);
}

int sv_request_grammar(json_t *root, sv_request *r, sv_error *e)
{
    json_t *rf = json_object_get(root, "response_format"), *gbnf = json_object_get(root, "grammar");
    json_t *schema = json_object_get(root, "json_schema");
    rf = json_is_null(rf) ? NULL : rf;
    gbnf = json_is_null(gbnf) ? NULL : gbnf;
    schema = json_is_null(schema) ? NULL : schema;
    if ((rf != NULL) + (gbnf != NULL) + (schema != NULL) > 1)
        return sv_bad(e, gbnf ? "grammar" : "json_schema",
                      "give at most one of 'response_format', 'grammar' and 'json_schema'");
    if (rf)
        return response_format(rf, &r->grammar, e);
    if (schema)
        return schema_grammar(schema, "json_schema", &r->grammar, e);
    if (gbnf) {
        if (!json_is_string(gbnf))
            return sv_bad(e, "grammar", "'grammar' must be a string of GBNF");
        return compile('g', json_string_value(gbnf), json_string_length(gbnf), "grammar", &r->grammar, e);
    }
    return 0;
}

int sv_grammar_from_gbnf(const char *text, size_t len, const char *param, sv_grammar **out, sv_error *e)
{
    return compile('g', text, len, param, out, e);
}
