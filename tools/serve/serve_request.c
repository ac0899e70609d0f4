/*
 * serve_request.c — a request body (JSON, parsed by jansson: strict, and it
 * rejects invalid UTF-8) checked field by field into an sv_request, and the
 * JSON of responses, stream chunks and errors in OpenAI's shapes, each with
 * the "detinfer" object (docs/SERVING.md).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

#define MAX_STOPS 4
#define MAX_STOP_BYTES 256
#define MAX_MESSAGES 256

void sv_set_error(sv_error *e, int status, const char *type, const char *param, const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

static int bad(sv_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(sv_error *e, const char *param, const char *fmt, ...)
{
    e->status = 400;
    e->type = "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- The fields each endpoint accepts (one table) ------------------------ */
enum { FOR_COMPLETION = 1, FOR_CHAT = 2, FOR_BOTH = 3 };
static const struct field {
    const char *name;
    int endpoints;
} fields[] = {
    {"model", FOR_BOTH},        {"prompt", FOR_COMPLETION},    {"messages", FOR_CHAT},
    {"max_tokens", FOR_BOTH},   {"max_completion_tokens", FOR_CHAT},
    {"temperature", FOR_BOTH},  {"top_p", FOR_BOTH},           {"top_k", FOR_BOTH},
    {"min_p", FOR_BOTH},        {"seed", FOR_BOTH},            {"stop", FOR_BOTH},
    {"presence_penalty", FOR_BOTH}, {"frequency_penalty", FOR_BOTH}, {"repetition_penalty", FOR_BOTH},
    {"n", FOR_BOTH},            {"logprobs", FOR_BOTH},        {"top_logprobs", FOR_CHAT},
    {"stream", FOR_BOTH},       {"stream_options", FOR_BOTH},  {"echo", FOR_COMPLETION},
    {"user", FOR_BOTH},         {"detinfer", FOR_BOTH},
    /* OpenAI fields some clients always send: accepted with their neutral values only. */
    {"logit_bias", FOR_BOTH},   {"suffix", FOR_COMPLETION},    {"best_of", FOR_COMPLETION},
    {NULL, 0},
};

static int check_known_fields(json_t *root, sv_kind kind, sv_error *e)
{
    const char *key;
    json_t *value;
    int mask = kind == SV_CHAT ? FOR_CHAT : FOR_COMPLETION;
    json_object_foreach(root, key, value)
    {
        const struct field *f = fields;
        while (f->name && strcmp(f->name, key))
            f++;
        if (!f->name || !(f->endpoints & mask))
            return bad(e, key, "unknown field '%s' for %s", key,
                       kind == SV_CHAT ? "/v1/chat/completions" : "/v1/completions");
    }
    return 0;
}

/* A number field in [lo, hi]; absent or null leaves *out. */
static int get_number(json_t *root, const char *name, double lo, double hi, double *out, sv_error *e)
{
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return bad(e, name, "'%s' must be a number", name);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return bad(e, name, "'%s' is %g; it must be in [%g, %g]", name, x, lo, hi);
    *out = x;
    return 0;
}

/* An integer field in [lo, hi]; absent or null leaves *out. */
static int get_int(json_t *root, const char *name, long long lo, long long hi, long long *out, sv_error *e)
{
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return bad(e, name, "'%s' must be an integer", name);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return bad(e, name, "'%s' is %lld; it must be in [%lld, %lld]", name, x, lo, hi);
    *out = x;
    return 0;
}

static int get_bool(json_t *root, const char *name, int *out, sv_error *e)
{
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return bad(e, name, "'%s' must be true or false", name);
    *out = json_is_true(v);
    return 0;
}

static int add_stop(sv_request *r, json_t *v, sv_error *e)
{
    if (!json_is_string(v))
        return bad(e, "stop", "'stop' must be a string or an array of strings");
    size_t len = json_string_length(v);
    if (len == 0 || len > MAX_STOP_BYTES)
        return bad(e, "stop", "a stop string must have 1..%d bytes", MAX_STOP_BYTES);
    if (memchr(json_string_value(v), '\0', len))
        return bad(e, "stop", "a stop string must not contain NUL");
    r->stops[r->n_stops] = strdup(json_string_value(v));
    if (!r->stops[r->n_stops])
        return bad(e, "stop", "out of memory");
    r->n_stops++;
    if (len > r->max_stop_len)
        r->max_stop_len = len;
    return 0;
}

static int get_stops(json_t *root, sv_request *r, sv_error *e)
{
    json_t *v = json_object_get(root, "stop");
    if (!v || json_is_null(v))
        return 0;
    r->stops = calloc(MAX_STOPS, sizeof *r->stops);
    if (!r->stops)
        return bad(e, "stop", "out of memory");
    if (!json_is_array(v))
        return add_stop(r, v, e);
    if (json_array_size(v) > MAX_STOPS)
        return bad(e, "stop", "at most %d stop strings", MAX_STOPS);
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) if (add_stop(r, item, e)) return -1;
    return 0;
}

/* Sampling fields into r->params; r->sampled when any is not greedy's. */
static int get_sampling(sv_server *s, json_t *root, sv_request *r, sv_error *e)
{
    double temperature = 0, top_p = 1, min_p = 0, presence = 0, frequency = 0, repetition = 1;
    long long top_k = 0, seed = 0;
    if (get_number(root, "temperature", 0, 2, &temperature, e) || get_number(root, "top_p", 0, 1, &top_p, e) ||
        get_number(root, "min_p", 0, 1, &min_p, e) || get_int(root, "top_k", 0, 1 << 30, &top_k, e) ||
        get_number(root, "presence_penalty", -2, 2, &presence, e) ||
        get_number(root, "frequency_penalty", -2, 2, &frequency, e) ||
        get_number(root, "repetition_penalty", 0.01, 10, &repetition, e) ||
        get_int(root, "seed", INT64_MIN, INT64_MAX, &seed, e))
        return -1;
    if (top_p <= 0)
        return bad(e, "top_p", "'top_p' must be in (0, 1]");
    /* below that a float temperature is 0 or denormal: greedy, or infinite logits */
    if (temperature > 0 && temperature < 1e-6)
        return bad(e, "temperature", "'temperature' must be 0 (greedy) or in [1e-6, 2]");
    /* The library's defaults (greedy), then the request's values. */
    di_sampling_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.top_p = 1;
    p.repetition_penalty = 1;
    p.penalty_window = 64;
    if (s->sampling_available)
        di_sampling_params_init(&p);
    p.temperature = (float)temperature;
    p.top_k = (int32_t)top_k;
    p.top_p = (float)top_p;
    p.min_p = (float)min_p;
    p.presence_penalty = (float)presence;
    p.frequency_penalty = (float)frequency;
    p.repetition_penalty = (float)repetition;
    p.seed = (uint64_t)seed;
    r->params = p;
    /* top_p, top_k and min_p do nothing at temperature 0 (argmax), while the
     * penalties change the logits argmax sees. */
    const char *needs = temperature > 0 ? "temperature"
                        : presence != 0 ? "presence_penalty"
                        : frequency != 0 ? "frequency_penalty"
                        : repetition != 1 ? "repetition_penalty"
                                          : NULL;
    r->sampled = needs != NULL;
    if (r->sampled && !s->sampling_available)
        return bad(e, needs,
                   "'%s' asks for sampling, which this build of libdetinfer does not have yet: "
                   "only greedy decoding (temperature 0, no penalties) is served",
                   needs);
    return 0;
}

/* Where a prompt's tokens come from: a text, or a chat (di_chat_tokenize). */
typedef struct token_source {
    const char *text; /* NULL for a chat */
    size_t len;
    const char *const *roles, *const *contents;
    size_t n_messages;
} token_source;

static di_status source_tokens(sv_server *s, const token_source *src, int32_t *tokens, size_t capacity,
                               size_t *n, char *err, size_t es)
{
    if (src->text)
        return di_model_tokenize(s->model, src->text, src->len, DI_TOKENIZE_ADD_BOS, tokens, capacity, n, err, es);
    /* the template's markers are control tokens; no message text becomes one */
    return di_chat_tokenize(s->model, s->chat_template, src->roles, src->contents, src->n_messages, 1,
                            DI_TOKENIZE_ADD_BOS, tokens, capacity, n, err, es);
}

static int tokenize(sv_server *s, const token_source *src, sv_request *r, sv_error *e, const char *param)
{
    size_t bytes = src->len; /* of text tokenized as such: a chat's messages */
    for (size_t i = 0; !src->text && i < src->n_messages; i++)
        bytes += strlen(src->contents[i]);
    if (s->max_token_bytes && bytes / s->max_token_bytes > (size_t)s->context)
        return bad(e, param, "the prompt has more than %lld tokens (%zu bytes of text, at most %zu bytes per token); "
                   "the context is %lld", (long long)s->context, bytes, s->max_token_bytes, (long long)s->context);
    char err[256] = "";
    size_t need = 0;
    di_status st = source_tokens(s, src, NULL, 0, &need, err, sizeof err);
    if (st == DI_OK || st == DI_ERR_BUFFER_TOO_SMALL) {
        if (need > (size_t)s->context)
            return bad(e, param, "the prompt has %zu tokens; the context is %lld", need, (long long)s->context);
        r->prompt = malloc((need ? need : 1) * sizeof *r->prompt);
        if (!r->prompt)
            return bad(e, param, "out of memory");
        st = source_tokens(s, src, r->prompt, need, &need, err, sizeof err);
        r->n_prompt = (uint32_t)need;
    }
    if (st == DI_ERR_UNSUPPORTED && src->text)
        return bad(e, param, "this model has no tokenizer: give the prompt as an array of token ids");
    if (st && !src->text)
        return bad(e, param, "the messages cannot be tokenized with the '%s' template: %s: %s", s->chat_template,
                   di_status_name(st), err);
    if (st)
        return bad(e, param, "the prompt cannot be tokenized: %s: %s", di_status_name(st), err);
    return 0;
}

static int get_prompt(sv_server *s, json_t *root, sv_request *r, sv_error *e)
{
    json_t *v = json_object_get(root, "prompt");
    if (!v)
        return bad(e, "prompt", "'prompt' is required");
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)))
        v = json_array_get(v, 0); /* ["text"]: one prompt */
    if (json_is_string(v)) {
        /* a text prompt parses no special tokens: a client that wants them sends ids */
        const token_source src = {json_string_value(v), json_string_length(v), NULL, NULL, 0};
        return tokenize(s, &src, r, e, "prompt");
    }
    if (!json_is_array(v))
        return bad(e, "prompt", "'prompt' must be a string or an array of token ids");
    size_t n = json_array_size(v);
    if (n == 0)
        return bad(e, "prompt", "'prompt' has no tokens");
    if (n > (size_t)s->context)
        return bad(e, "prompt", "the prompt has %zu tokens; the context is %lld", n, (long long)s->context);
    r->prompt = malloc(n * sizeof *r->prompt);
    if (!r->prompt)
        return bad(e, "prompt", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t))
            return bad(e, "prompt", "'prompt' must be a string, or an array of token ids (integers); one prompt only");
        long long id = json_integer_value(t);
        if (id < 0 || id >= s->n_vocab)
            return bad(e, "prompt", "token id %lld at %zu is outside [0, %lld)", id, i, (long long)s->n_vocab);
        r->prompt[i] = (int32_t)id;
    }
    r->n_prompt = (uint32_t)n;
    return 0;
}

static int get_messages(sv_server *s, json_t *root, sv_request *r, sv_error *e)
{
    json_t *v = json_object_get(root, "messages");
    if (!v)
        return bad(e, "messages", "'messages' is required");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return bad(e, "messages", "'messages' must be a non-empty array of {\"role\", \"content\"}");
    size_t n = json_array_size(v);
    if (n > MAX_MESSAGES)
        return bad(e, "messages", "at most %d messages", MAX_MESSAGES);
    if (!s->chat_template)
        return bad(e, "messages",
                   "this model carries no chat template the server recognises (a base model?): "
                   "start the server with --chat-template NAME (docs/SERVING.md), or use /v1/completions");
    const char *roles[MAX_MESSAGES], *contents[MAX_MESSAGES];
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(v, i);
        json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
        json_t *content = json_is_object(m) ? json_object_get(m, "content") : NULL;
        if (!json_is_string(role) || !json_is_string(content))
            return bad(e, "messages", "message %zu must be an object with string 'role' and 'content'", i);
        if (json_object_size(m) != 2 && !(json_object_size(m) == 3 && json_object_get(m, "name")))
            return bad(e, "messages", "message %zu has fields other than 'role', 'content' and 'name'", i);
        if (strlen(json_string_value(content)) != json_string_length(content))
            return bad(e, "messages", "message %zu contains NUL", i);
        roles[i] = json_string_value(role);
        contents[i] = json_string_value(content);
    }
    const token_source src = {NULL, 0, roles, contents, n};
    return tokenize(s, &src, r, e, "messages");
}

static int check_unsupported(json_t *root, sv_error *e)
{
    long long n = 1;
    if (get_int(root, "n", 1, 1, &n, e))
        return -1;
    int echo = 0;
    if (get_bool(root, "echo", &echo, e))
        return -1;
    if (echo)
        return bad(e, "echo", "'echo' is not supported");
    json_t *bias = json_object_get(root, "logit_bias");
    if (bias && !json_is_null(bias) && !(json_is_object(bias) && json_object_size(bias) == 0))
        return bad(e, "logit_bias", "'logit_bias' is not supported (only null or {})");
    json_t *suffix = json_object_get(root, "suffix");
    if (suffix && !json_is_null(suffix) && !(json_is_string(suffix) && json_string_length(suffix) == 0))
        return bad(e, "suffix", "'suffix' is not supported");
    long long best_of = 1;
    if (get_int(root, "best_of", 1, 1, &best_of, e))
        return -1;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so) && !json_is_object(so))
        return bad(e, "stream_options", "'stream_options' must be an object");
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_string(model))
        return bad(e, "model", "'model' must be a string");
    json_t *user = json_object_get(root, "user");
    if (user && !json_is_string(user))
        return bad(e, "user", "'user' must be a string");
    return 0;
}

/* OpenAI's two shapes: for completions `logprobs` is the number of
 * alternatives per token (0..5; null: none at all); for chat `logprobs` is a
 * boolean and `top_logprobs` the number of alternatives (0..20), which needs
 * `logprobs` true. */
#define MAX_TOP_COMPLETION 5
#define MAX_TOP_CHAT 20

static int get_logprobs(sv_server *s, json_t *root, sv_kind kind, sv_request *r, sv_error *e)
{
    long long n_top = -1;
    if (kind == SV_COMPLETION) {
        if (get_int(root, "logprobs", 0, MAX_TOP_COMPLETION, &n_top, e))
            return -1;
        r->logprobs = n_top >= 0;
    } else {
        if (get_bool(root, "logprobs", &r->logprobs, e) ||
            get_int(root, "top_logprobs", 0, MAX_TOP_CHAT, &n_top, e))
            return -1;
        if (n_top >= 0 && !r->logprobs)
            return bad(e, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    }
    r->n_top = n_top > 0 ? (uint32_t)(n_top < s->n_vocab ? n_top : s->n_vocab) : 0;
    return 0;
}

static int get_detinfer_options(json_t *root, sv_request *r, sv_error *e)
{
    json_t *d = json_object_get(root, "detinfer");
    if (!d || json_is_null(d))
        return 0;
    if (!json_is_object(d))
        return bad(e, "detinfer", "'detinfer' must be an object, e.g. {\"logits_digests\": true}");
    const char *key;
    json_t *value;
    json_object_foreach(d, key, value) if (strcmp(key, "logits_digests")) return bad(
        e, "detinfer", "unknown field 'detinfer.%s' (known: logits_digests)", key);
    return get_bool(d, "logits_digests", &r->want_logits_digests, e);
}

static void new_id(sv_request *r)
{
    static unsigned long long counter;
    unsigned long long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    r->created = (long long)time(NULL);
    snprintf(r->id, sizeof r->id, "%s-%llx-%llu", r->kind == SV_CHAT ? "chatcmpl" : "cmpl", r->created, n);
}

/* What parsing a body may allocate: jansson has no limit on array lengths
 * or member counts, and a 1 MiB body of small values costs about 16 MiB of
 * its heap, so each parse gets a budget, counted in the allocator jansson
 * calls (a thread's own: each connection parses on its thread). */
#define JSON_BUDGET_FACTOR 8            /* bytes of heap per byte of body */
#define JSON_BUDGET_BASE (64u * 1024u)
#define JSON_ALLOC_OVERHEAD 16u         /* malloc's own bytes per block, counted too */
static __thread size_t json_left;
static __thread int json_limited; /* 1: counting; 2: the budget ran out */

static void *json_budget_malloc(size_t n)
{
    if (json_limited) {
        if (n > json_left || json_left - n < JSON_ALLOC_OVERHEAD) {
            json_limited = 2;
            return NULL;
        }
        json_left -= n + JSON_ALLOC_OVERHEAD;
    }
    return malloc(n);
}

void sv_json_budget_install(void)
{
    json_set_alloc_funcs(json_budget_malloc, free);
}

static json_t *load_budgeted(const char *body, size_t len, json_error_t *jerr, int *over)
{
    json_left = JSON_BUDGET_FACTOR * len + JSON_BUDGET_BASE;
    json_limited = 1;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, jerr);
    *over = json_limited == 2;
    json_limited = 0;
    if (*over && root) { /* a failed allocation jansson recovered from still refuses the body */
        json_decref(root);
        root = NULL;
    }
    return root;
}

int sv_request_parse(sv_server *s, sv_kind kind, const char *body, size_t len, sv_request **out, sv_error *e)
{
    *out = NULL;
    json_error_t jerr;
    int over = 0;
    json_t *root = load_budgeted(body, len, &jerr, &over);
    if (over) {
        sv_set_error(e, 413, "invalid_request_error", NULL,
                     "the body's JSON needs more than %zu bytes of memory to hold (%d times its size): send fewer, "
                     "larger values", (size_t)JSON_BUDGET_FACTOR * len + JSON_BUDGET_BASE, JSON_BUDGET_FACTOR);
        return -1;
    }
    if (!root && strstr(jerr.text, "too big")) /* jansson holds integers as long long */
        return bad(e, NULL,
                   "an integer in the body (line %d, column %d) is outside [-2^63, 2^63 - 1]: 'seed' takes "
                   "integers in that range (a negative seed counts modulo 2^64)",
                   jerr.line, jerr.column);
    if (!root)
        return bad(e, NULL, "the body is not valid JSON (line %d, column %d): %s", jerr.line, jerr.column,
                   jerr.text);
    sv_request *r = calloc(1, sizeof *r);
    if (!r) {
        json_decref(root);
        return bad(e, NULL, "out of memory");
    }
    r->kind = kind;
    r->refs = 1;
    /* OpenAI's default for completions; a chat's default is what fits (below). */
    long long max_tokens = kind == SV_CHAT ? -1 : 16;
    int rc = -1;
    if (!json_is_object(root)) {
        bad(e, NULL, "the body must be a JSON object");
        goto out;
    }
    if (check_known_fields(root, kind, e) || check_unsupported(root, e) ||
        get_logprobs(s, root, kind, r, e) ||
        get_bool(root, "stream", &r->stream, e) || get_detinfer_options(root, r, e) || get_stops(root, r, e) ||
        get_sampling(s, root, r, e))
        goto out;
    const char *mt_name = "max_tokens";
    if (kind == SV_CHAT && json_object_get(root, "max_completion_tokens") &&
        !json_is_null(json_object_get(root, "max_completion_tokens")))
        mt_name = "max_completion_tokens";
    if (get_int(root, mt_name, 1, s->cfg.max_tokens, &max_tokens, e)) {
        if (json_is_integer(json_object_get(root, mt_name)) && json_integer_value(json_object_get(root, mt_name)) >= 1)
            bad(e, mt_name, "'%s' is %lld; this server's cap is %ld (--max-tokens)", mt_name,
                json_integer_value(json_object_get(root, mt_name)), s->cfg.max_tokens);
        goto out;
    }
    if ((kind == SV_CHAT ? get_messages(s, root, r, e) : get_prompt(s, root, r, e)))
        goto out;
    if (r->n_prompt == 0) {
        bad(e, kind == SV_CHAT ? "messages" : "prompt", "the prompt gives no tokens");
        goto out;
    }
    /* The cache holds the prompt and every generated token but the last
     * (never fed back): P + M - 1 tokens must fit the context. */
    const long long room = s->context - (long long)r->n_prompt + 1;
    if (max_tokens < 0) /* a chat without max_tokens: up to the cap, within the context */
        max_tokens = room < s->cfg.max_tokens ? room : s->cfg.max_tokens;
    if (max_tokens < 1 || max_tokens > room) {
        bad(e, mt_name, "the prompt's %u tokens and %s %lld exceed the context of %lld tokens", r->n_prompt,
            mt_name, max_tokens, (long long)s->context);
        goto out;
    }
    r->max_tokens = (uint32_t)max_tokens;
    r->out = calloc(r->max_tokens, sizeof *r->out);
    r->digests = calloc(r->max_tokens, sizeof *r->digests);
    if (r->logprobs) {
        r->token_logprob = calloc(r->max_tokens, sizeof *r->token_logprob);
        r->text_offset = calloc(r->max_tokens, sizeof *r->text_offset);
        r->visible_after = calloc(r->max_tokens, sizeof *r->visible_after);
        r->top_tokens = calloc((size_t)r->max_tokens * r->n_top + 1, sizeof *r->top_tokens);
        r->top_logprobs = calloc((size_t)r->max_tokens * r->n_top + 1, sizeof *r->top_logprobs);
    }
    if (!r->out || !r->digests ||
        (r->logprobs && (!r->token_logprob || !r->text_offset || !r->visible_after || !r->top_tokens || !r->top_logprobs))) {
        bad(e, NULL, "out of memory");
        goto out;
    }
    new_id(r);
    rc = 0;
out:
    json_decref(root);
    if (rc)
        sv_request_free(r);
    else
        *out = r;
    return rc;
}

void sv_request_free(sv_request *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    free(r->stops);
    free(r->prompt);
    free(r->out);
    free(r->digests);
    free(r->token_logprob);
    free(r->top_tokens);
    free(r->top_logprobs);
    free(r->text_offset);
    free(r->visible_after);
    free(r->text);
    free(r);
}

/* ---- Text ------------------------------------------------------------------ */

static size_t utf8_seq_len(unsigned char c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
}

size_t sv_utf8_complete_prefix(const char *text, size_t len)
{
    /* Look back at most 3 bytes for a lead byte whose sequence runs past len. */
    for (size_t back = 1; back <= 4 && back <= len; back++) {
        unsigned char c = (unsigned char)text[len - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte */
        size_t need = utf8_seq_len(c);
        return need > back ? len - back : len;
    }
    return len;
}

json_t *sv_json_text(const char *text, size_t len)
{
    json_t *v = json_stringn(text, len);
    if (v)
        return v;
    /* Not valid UTF-8 (a byte token, or a stop cut inside a character): each
     * bad byte becomes U+FFFD. */
    char *clean = malloc(len * 3 + 1);
    if (!clean)
        return json_string("");
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq_len((unsigned char)text[i]);
        json_t *probe = n && i + n <= len ? json_stringn(text + i, n) : NULL;
        if (probe) {
            memcpy(clean + o, text + i, n);
            o += n;
            i += n;
            json_decref(probe);
        } else {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    v = json_stringn(clean, o);
    free(clean);
    return v ? v : json_string("");
}

/* ---- Responses -------------------------------------------------------------- */

static json_t *hex(const di_digest *d)
{
    char h[DI_DIGEST_HEX_SIZE];
    dt_hex(d, h);
    return json_string(h);
}

json_t *sv_detinfer_object(const sv_server *s, const sv_request *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "sequence_digest", hex(&r->sequence));
    json_object_set_new(o, "prompt_tokens", json_integer(r->n_prompt));
    json_t *toks = json_array();
    for (uint32_t i = 0; i < r->n_out; i++)
        json_array_append_new(toks, json_integer(r->out[i]));
    json_object_set_new(o, "completion_token_ids", toks);
    if (r->want_logits_digests) {
        json_t *d = json_array();
        for (uint32_t i = 0; i < r->n_out; i++)
            json_array_append_new(d, hex(&r->digests[i]));
        json_object_set_new(o, "logits_digests", d);
    }
    json_object_set_new(o, "sampling", json_string(r->sampled ? "sampled" : "greedy"));
    json_t *fp = json_object();
    json_object_set_new(fp, "library_version", json_string(di_version_string()));
    json_object_set_new(fp, "backend", json_string(s->backend_info));
    json_object_set_new(fp, "profile", json_string(dt_profile_name(s->cfg.profile)));
    json_object_set_new(fp, "model_digest", json_string(s->model_digest));
    json_object_set_new(o, "fingerprint", fp);
    return o;
}

/* ---- Log-probabilities ------------------------------------------------------ */

/* A log-probability as a JSON number; null for one that is not finite (a
 * NaN logit), which JSON cannot spell. */
static json_t *logprob_number(float lp)
{
    return isfinite(lp) ? json_real((double)lp) : json_null();
}

/* A token's text: its bytes (di_model_token_piece) as a string when they are
 * valid UTF-8, else OpenAI's spelling of raw bytes, "bytes:\xNN...". */
typedef struct token_text {
    char *bytes;
    size_t len;
    json_t *string;
} token_text;

static token_text token_text_of(const sv_server *s, int32_t token)
{
    token_text t = {NULL, 0, NULL};
    size_t need = 0;
    di_status st = di_model_token_piece(s->model, token, NULL, 0, &need);
    if ((st == DI_OK || st == DI_ERR_BUFFER_TOO_SMALL) && (t.bytes = malloc(need + 1)) &&
        di_model_token_piece(s->model, token, t.bytes, need + 1, &need) == DI_OK)
        t.len = need;
    t.string = memchr(t.bytes ? t.bytes : "", '\0', t.len) ? NULL : json_stringn(t.bytes ? t.bytes : "", t.len);
    if (!t.string) {
        char *spelled = malloc(6 + 4 * t.len + 1);
        if (spelled) {
            size_t o = (size_t)sprintf(spelled, "bytes:");
            for (size_t i = 0; i < t.len; i++)
                o += (size_t)sprintf(spelled + o, "\\x%02x", (unsigned char)t.bytes[i]);
            t.string = json_string(spelled);
            free(spelled);
        }
        if (!t.string)
            t.string = json_string("");
    }
    return t;
}

/* {"token", "logprob", "bytes"}: one entry of chat's logprobs. */
static json_t *chat_entry(const sv_server *s, int32_t token, float lp)
{
    token_text t = token_text_of(s, token);
    json_t *bytes = json_array();
    for (size_t i = 0; i < t.len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)t.bytes[i]));
    free(t.bytes);
    return json_pack("{s:o, s:o, s:o}", "token", t.string, "logprob", logprob_number(lp), "bytes", bytes);
}

/* Adds token: lp to a completion's top_logprobs object unless a token of the
 * same text is there already (the higher-ranked one keeps the key). */
static void completion_top_add(const sv_server *s, json_t *top, int32_t token, float lp)
{
    token_text t = token_text_of(s, token);
    const char *key = json_string_value(t.string);
    if (!json_object_get(top, key))
        json_object_set_new(top, key, logprob_number(lp));
    json_decref(t.string);
    free(t.bytes);
}

/* The offset, in Unicode code points of the text as the response spells it
 * (sv_json_text), of byte `at` of text: a token that begins inside a UTF-8
 * sequence gets the offset of that character. */
static size_t text_offset_chars(const char *text, size_t at)
{
    json_t *prefix = sv_json_text(text, sv_utf8_complete_prefix(text, at));
    const char *p = json_string_value(prefix);
    size_t count = 0, n = json_string_length(prefix);
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)p[i] & 0xC0) != 0x80;
    json_decref(prefix);
    return count;
}

/* The choice's "logprobs" value for the generated tokens [from, to), in the
 * endpoint's shape; null when the request did not ask or the range is empty. */
static json_t *logprobs_json(const sv_server *s, const sv_request *r, uint32_t from, uint32_t to)
{
    if (!r->logprobs || from >= to)
        return json_null();
    if (r->kind == SV_CHAT) {
        json_t *content = json_array();
        for (uint32_t i = from; i < to; i++) {
            json_t *entry = chat_entry(s, r->out[i], r->token_logprob[i]);
            json_t *top = json_array();
            for (uint32_t k = 0; k < r->n_top; k++)
                json_array_append_new(top, chat_entry(s, r->top_tokens[(size_t)i * r->n_top + k],
                                                      r->top_logprobs[(size_t)i * r->n_top + k]));
            json_object_set_new(entry, "top_logprobs", top);
            json_array_append_new(content, entry);
        }
        return json_pack("{s:o, s:n}", "content", content, "refusal");
    }
    json_t *tokens = json_array(), *values = json_array(), *tops = json_array(), *offsets = json_array();
    for (uint32_t i = from; i < to; i++) {
        token_text t = token_text_of(s, r->out[i]);
        free(t.bytes);
        json_array_append_new(tokens, t.string);
        json_array_append_new(values, logprob_number(r->token_logprob[i]));
        /* the n most likely, and the chosen token (OpenAI: up to logprobs + 1) */
        json_t *top = json_object();
        for (uint32_t k = 0; k < r->n_top; k++)
            completion_top_add(s, top, r->top_tokens[(size_t)i * r->n_top + k],
                               r->top_logprobs[(size_t)i * r->n_top + k]);
        completion_top_add(s, top, r->out[i], r->token_logprob[i]);
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer((json_int_t)(r->text ? text_offset_chars(r->text, r->text_offset[i]) : 0)));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", values, "top_logprobs", tops,
                     "text_offset", offsets);
}

static json_t *usage(const sv_request *r)
{
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)r->n_prompt, "completion_tokens",
                     (json_int_t)r->n_out, "total_tokens", (json_int_t)(r->n_prompt + r->n_out));
}

static json_t *envelope(const sv_server *s, const sv_request *r, const char *object)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "id", r->id, "object", object, "created", (json_int_t)r->created,
                     "model", s->cfg.model_name);
}

static char *dump(json_t *root)
{
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

char *sv_response_json(const sv_server *s, const sv_request *r)
{
    int chat = r->kind == SV_CHAT;
    json_t *root = envelope(s, r, chat ? "chat.completion" : "text_completion");
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_t *text = sv_json_text(r->text ? r->text : "", r->text_visible);
    if (chat)
        json_object_set_new(choice, "message", json_pack("{s:s, s:o}", "role", "assistant", "content", text));
    else
        json_object_set_new(choice, "text", text);
    json_object_set_new(choice, "logprobs", logprobs_json(s, r, 0, r->n_out));
    json_object_set_new(choice, "finish_reason", json_string(r->finish_reason ? r->finish_reason : "length"));
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    json_object_set_new(root, "usage", usage(r));
    json_object_set_new(root, "detinfer", sv_detinfer_object(s, r));
    return dump(root);
}

char *sv_chunk_json(const sv_server *s, const sv_request *r, const char *delta, size_t delta_len,
                    uint32_t tok_from, uint32_t tok_to, const char *finish, int final)
{
    int chat = r->kind == SV_CHAT;
    json_t *root = envelope(s, r, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_t *text = sv_json_text(delta, delta_len);
    if (chat) {
        json_t *d = json_object();
        if (!final)
            json_object_set_new(d, "role", json_string("assistant"));
        if (delta_len || !final)
            json_object_set_new(d, "content", text);
        else
            json_decref(text);
        json_object_set_new(choice, "delta", d);
    } else {
        json_object_set_new(choice, "text", text);
    }
    json_object_set_new(choice, "logprobs", logprobs_json(s, r, tok_from, tok_to));
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    if (final) {
        json_object_set_new(root, "usage", usage(r));
        json_object_set_new(root, "detinfer", sv_detinfer_object(s, r));
    }
    return dump(root);
}

char *sv_error_json(const sv_error *e)
{
    /* The message and param may quote the request, cut to fit: sv_json_text
     * keeps them valid UTF-8. */
    json_t *err = json_object();
    json_object_set_new(err, "message", sv_json_text(e->message, strlen(e->message)));
    json_object_set_new(err, "type", json_string(e->type ? e->type : "error"));
    json_object_set_new(err, "param", e->param[0] ? sv_json_text(e->param, strlen(e->param)) : json_null());
    json_object_set_new(err, "code", json_null());
    return dump(json_pack("{s:o}", "error", err));
}
