/*
 * serve_request.c — a request body (JSON: serve_json.c) checked field by
 * field into an sv_request (docs/SERVING.md, "API").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/serve.h"

#define MAX_STOPS 4
#define MAX_STOP_BYTES 256

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
    {"response_format", FOR_BOTH}, {"grammar", FOR_BOTH},      {"json_schema", FOR_BOTH},
    {"tools", FOR_CHAT},        {"tool_choice", FOR_CHAT},     {"parallel_tool_calls", FOR_CHAT},
    /* OpenAI fields some clients always send: accepted with their neutral values only. */
    {"logit_bias", FOR_BOTH},   {"suffix", FOR_COMPLETION},    {"best_of", FOR_COMPLETION},
    {"store", FOR_CHAT},        {"metadata", FOR_CHAT},        {"service_tier", FOR_CHAT},
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
            return sv_bad(e, key, "unknown field '%s' for %s", key,
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
        return sv_bad(e, name, "'%s' must be a number", name);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return sv_bad(e, name, "'%s' is %g; it must be in [%g, %g]", name, x, lo, hi);
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
        return sv_bad(e, name, "'%s' must be an integer", name);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return sv_bad(e, name, "'%s' is %lld; it must be in [%lld, %lld]", name, x, lo, hi);
    *out = x;
    return 0;
}

static int get_bool(json_t *root, const char *name, int *out, sv_error *e)
{
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return sv_bad(e, name, "'%s' must be true or false", name);
    *out = json_is_true(v);
    return 0;
}

static int add_stop(sv_request *r, json_t *v, sv_error *e)
{
    if (!json_is_string(v))
        return sv_bad(e, "stop", "'stop' must be a string or an array of strings");
    size_t len = json_string_length(v);
    if (len == 0 || len > MAX_STOP_BYTES)
        return sv_bad(e, "stop", "a stop string must have 1..%d bytes", MAX_STOP_BYTES);
    if (memchr(json_string_value(v), '\0', len))
        return sv_bad(e, "stop", "a stop string must not contain NUL");
    r->stops[r->n_stops] = strdup(json_string_value(v));
    if (!r->stops[r->n_stops])
        return sv_bad(e, "stop", "out of memory");
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
        return sv_bad(e, "stop", "out of memory");
    if (!json_is_array(v))
        return add_stop(r, v, e);
    if (json_array_size(v) > MAX_STOPS)
        return sv_bad(e, "stop", "at most %d stop strings", MAX_STOPS);
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) if (add_stop(r, item, e)) return -1;
    return 0;
}

/* Sampling fields into r->params; r->sampled when any is not greedy's. */
static int get_sampling(sv_server *srv, json_t *root, sv_request *r, sv_error *e)
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
        return sv_bad(e, "top_p", "'top_p' must be in (0, 1]");
    /* below that a float temperature is 0 or denormal: greedy, or infinite logits */
    if (temperature > 0 && temperature < 1e-6)
        return sv_bad(e, "temperature", "'temperature' must be 0 (greedy) or in [1e-6, 2]");
    /* The library's defaults (greedy), then the request's values. */
    di_sampling_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.top_p = 1;
    p.repetition_penalty = 1;
    p.penalty_window = 64;
    if (srv->sampling_available)
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
    if (r->sampled && !srv->sampling_available)
        return sv_bad(e, needs,
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

static di_status source_tokens(sv_server *srv, const token_source *src, int32_t *tokens, size_t capacity,
                               size_t *n, char *err, size_t es)
{
    if (src->text)
        return di_model_tokenize(srv->model, src->text, src->len, DI_TOKENIZE_ADD_BOS, tokens, capacity, n, err, es);
    /* the template's markers are control tokens; no message text becomes one */
    return di_chat_tokenize(srv->model, srv->chat_template, src->roles, src->contents, src->n_messages, 1,
                            DI_TOKENIZE_ADD_BOS, tokens, capacity, n, err, es);
}

int sv_text_may_fit(const sv_server *srv, size_t bytes, const char *param, sv_error *e)
{
    if (srv->max_token_bytes && bytes / srv->max_token_bytes > (size_t)srv->context) {
        sv_bad(e, param, "the text has more than %lld tokens (%zu bytes of text, at most %zu bytes per token); "
               "the context is %lld", (long long)srv->context, bytes, srv->max_token_bytes, (long long)srv->context);
        return 0;
    }
    return 1;
}

/* 1 when the source's text (a chat's: its messages) may fit the context. */
static int source_may_fit(const sv_server *srv, const token_source *src, const char *param, sv_error *e)
{
    size_t bytes = src->len;
    for (size_t i = 0; !src->text && i < src->n_messages; i++)
        bytes += strlen(src->contents[i]);
    return sv_text_may_fit(srv, bytes, param, e);
}

static int tokenize(sv_server *srv, const token_source *src, sv_prompt *p, sv_error *e, const char *param)
{
    if (!source_may_fit(srv, src, param, e))
        return -1;
    char err[256] = "";
    size_t need = 0;
    di_status st = source_tokens(srv, src, NULL, 0, &need, err, sizeof err);
    if (st == DI_OK || st == DI_ERR_BUFFER_TOO_SMALL) {
        if (need > (size_t)srv->context)
            return sv_bad(e, param, "the prompt has %zu tokens; the context is %lld", need, (long long)srv->context);
        p->ids = malloc((need ? need : 1) * sizeof *p->ids);
        if (!p->ids)
            return sv_bad(e, param, "out of memory");
        st = source_tokens(srv, src, p->ids, need, &need, err, sizeof err);
        p->n = (uint32_t)need;
    }
    if (st == DI_ERR_UNSUPPORTED && src->text)
        return sv_bad(e, param, "this model has no tokenizer: give the prompt as an array of token ids");
    if (st && !src->text)
        return sv_bad(e, param, "the messages cannot be tokenized with the '%s' template: %s: %s", srv->chat_template,
                   di_status_name(st), err);
    if (st)
        return sv_bad(e, param, "the prompt cannot be tokenized: %s: %s", di_status_name(st), err);
    return 0;
}

/* One prompt: a text, or an array of token ids. */
static int get_one_prompt(sv_server *srv, json_t *v, sv_prompt *p, sv_error *e)
{
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) /* not BOS alone: refused, as `detinfer run` and the bindings do */
            return sv_bad(e, "prompt", "a prompt is empty (\"\"): send text, or the BOS token's id for BOS alone");
        /* a text prompt parses no special tokens: a client that wants them sends ids */
        const token_source src = {json_string_value(v), json_string_length(v), NULL, NULL, 0};
        return tokenize(srv, &src, p, e, "prompt");
    }
    const size_t n = json_array_size(v);
    if (n == 0)
        return sv_bad(e, "prompt", "a prompt has no tokens");
    if (n > (size_t)srv->context)
        return sv_bad(e, "prompt", "the prompt has %zu tokens; the context is %lld", n, (long long)srv->context);
    p->ids = malloc(n * sizeof *p->ids);
    if (!p->ids)
        return sv_bad(e, "prompt", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t))
            return sv_bad(e, "prompt", "a prompt's array must hold token ids (integers) only");
        long long id = json_integer_value(t);
        if (id < 0 || id >= srv->n_vocab)
            return sv_bad(e, "prompt", "token id %lld at %zu is outside [0, %lld)", id, i, (long long)srv->n_vocab);
        p->ids[i] = (int32_t)id;
    }
    p->n = (uint32_t)n;
    return 0;
}

/* OpenAI's four shapes of `prompt`: a string, an array of token ids, an
 * array of strings, an array of token-id arrays (one prompt each). */
static int get_prompts(sv_server *srv, json_t *root, sv_request *r, sv_error *e)
{
    json_t *v = json_object_get(root, "prompt");
    if (!v)
        return sv_bad(e, "prompt", "'prompt' is required");
    if (!json_is_string(v) && !json_is_array(v))
        return sv_bad(e, "prompt", "'prompt' must be a string, an array of token ids, an array of strings or an "
                                   "array of token-id arrays");
    json_t *first = json_is_array(v) ? json_array_get(v, 0) : NULL;
    const int list = first && (json_is_string(first) || json_is_array(first));
    const size_t n = list ? json_array_size(v) : 1;
    if (json_is_array(v) && json_array_size(v) == 0)
        return sv_bad(e, "prompt", "'prompt' is an empty array");
    if (n > (size_t)srv->cfg.max_prompts)
        return sv_bad(e, "prompt", "'prompt' holds %zu prompts; this server's cap is %ld (--max-prompts)", n,
                      srv->cfg.max_prompts);
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts)
        return sv_bad(e, "prompt", "out of memory");
    r->n_prompts = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        json_t *one = list ? json_array_get(v, i) : v;
        if (list && !(json_is_string(one) == json_is_string(first) && (json_is_string(one) || json_is_array(one))))
            return sv_bad(e, "prompt", "prompt %zu: a list of prompts must be all strings or all token-id arrays", i);
        if (get_one_prompt(srv, one, &r->prompts[i], e)) {
            if (n > 1) { /* name the prompt */
                char msg[sizeof e->message];
                snprintf(msg, sizeof msg, "%s", e->message);
                sv_bad(e, "prompt", "prompt %zu: %s", i, msg);
            }
            return -1;
        }
        if (r->prompts[i].n == 0)
            return sv_bad(e, "prompt", n > 1 ? "prompt %zu gives no tokens" : "the prompt gives no tokens", i);
        r->n_prompt_tokens += r->prompts[i].n;
    }
    return 0;
}

static int get_messages(sv_server *srv, json_t *root, sv_request *r, sv_error *e)
{
    json_t *v = json_object_get(root, "messages");
    if (!v)
        return sv_bad(e, "messages", "'messages' is required");
    if (!srv->chat_template)
        return sv_bad(e, "messages",
                   "this model carries no chat template the server recognises (a base model?): "
                   "start the server with --chat-template NAME (docs/SERVING.md), or use /v1/completions");
    sv_chat chat;
    if (sv_chat_messages(v, &chat, e))
        return -1;
    if (sv_tools_messages(srv, r, &chat, e)) {
        sv_chat_free(&chat);
        return -1;
    }
    const token_source src = {NULL, 0, chat.roles, (const char *const *)chat.contents, chat.n};
    r->prompts = calloc(1, sizeof *r->prompts);
    int rc = r->prompts ? 0 : sv_bad(e, "messages", "out of memory");
    if (!rc) {
        r->n_prompts = 1;
        if (r->tools && r->tool_format == SV_TOOL_FORMAT_MISTRAL) /* written and tokenized by serve_tools.c */
            rc = source_may_fit(srv, &src, "messages", e)
                     ? sv_tools_mistral_prompt(srv, r, v, &chat, &r->prompts[0], e)
                     : -1;
        else
            rc = tokenize(srv, &src, &r->prompts[0], e, "messages");
    }
    sv_chat_free(&chat);
    if (!rc && r->prompts[0].n == 0)
        rc = sv_bad(e, "messages", "the prompt gives no tokens");
    r->n_prompt_tokens = r->prompts[0].n;
    return rc;
}

static int check_unsupported(json_t *root, sv_error *e)
{
    json_t *bias = json_object_get(root, "logit_bias");
    if (bias && !json_is_null(bias) && !(json_is_object(bias) && json_object_size(bias) == 0))
        return sv_bad(e, "logit_bias", "'logit_bias' is not supported (only null or {})");
    json_t *suffix = json_object_get(root, "suffix");
    if (suffix && !json_is_null(suffix) && !(json_is_string(suffix) && json_string_length(suffix) == 0))
        return sv_bad(e, "suffix", "'suffix' is not supported");
    long long best_of = 1;
    if (get_int(root, "best_of", 1, 1, &best_of, e))
        return -1;
    /* Chat fields that change nothing here: nothing is stored, and there is
     * one tier. */
    json_t *store = json_object_get(root, "store"), *meta = json_object_get(root, "metadata");
    if (store && !json_is_null(store) && !json_is_false(store))
        return sv_bad(e, "store", "'store' is not supported (only false or null: this server stores nothing)");
    if (meta && !json_is_null(meta) && !(json_is_object(meta) && json_object_size(meta) == 0))
        return sv_bad(e, "metadata", "'metadata' is not supported (only null or {}: it goes with 'store')");
    json_t *tier = json_object_get(root, "service_tier");
    if (tier && !json_is_null(tier) &&
        !(json_is_string(tier) && (!strcmp(json_string_value(tier), "auto") || !strcmp(json_string_value(tier), "default"))))
        return sv_bad(e, "service_tier", "'service_tier' is not supported (only null, \"auto\" or \"default\")");
    json_t *parallel = json_object_get(root, "parallel_tool_calls");
    if (parallel && !json_is_null(parallel) && !json_is_boolean(parallel))
        return sv_bad(e, "parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_string(model))
        return sv_bad(e, "model", "'model' must be a string");
    json_t *user = json_object_get(root, "user");
    if (user && !json_is_string(user))
        return sv_bad(e, "user", "'user' must be a string");
    return 0;
}

/* OpenAI's two shapes: for completions `logprobs` is the number of
 * alternatives per token (0..5; null: none at all); for chat `logprobs` is a
 * boolean and `top_logprobs` the number of alternatives (0..20), which needs
 * `logprobs` true. */
#define MAX_TOP_COMPLETION 5
#define MAX_TOP_CHAT 20

static int get_logprobs(sv_server *srv, json_t *root, sv_kind kind, sv_request *r, sv_error *e)
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
            return sv_bad(e, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    }
    r->n_top = n_top > 0 ? (uint32_t)(n_top < srv->n_vocab ? n_top : srv->n_vocab) : 0;
    return 0;
}

/* {"logits_digests": bool, "prompt_ids": bool} */
static int get_detinfer_options(json_t *root, sv_request *r, sv_error *e)
{
    json_t *d = json_object_get(root, "detinfer");
    if (!d || json_is_null(d))
        return 0;
    if (!json_is_object(d))
        return sv_bad(e, "detinfer", "'detinfer' must be an object, e.g. {\"logits_digests\": true}");
    const char *key;
    json_t *value;
    json_object_foreach(d, key, value) if (strcmp(key, "logits_digests") && strcmp(key, "prompt_ids")) return sv_bad(
        e, "detinfer", "unknown field 'detinfer.%s' (known: logits_digests, prompt_ids)", key);
    if (get_bool(d, "logits_digests", &r->want_logits_digests, e) || get_bool(d, "prompt_ids", &r->want_prompt_ids, e))
    {
        char field[sizeof e->param];
        snprintf(field, sizeof field, "%s", e->param);
        return sv_bad(e, "detinfer", "'detinfer.%s' must be true or false", field);
    }
    return 0;
}

/* stream_options: {"include_usage": bool}, only with "stream": true. */
static int get_stream_options(json_t *root, sv_request *r, sv_error *e)
{
    json_t *so = json_object_get(root, "stream_options");
    if (!so || json_is_null(so))
        return 0;
    if (!json_is_object(so))
        return sv_bad(e, "stream_options", "'stream_options' must be an object");
    if (!r->stream)
        return sv_bad(e, "stream_options", "'stream_options' is only allowed with \"stream\": true");
    const char *key;
    json_t *value;
    json_object_foreach(so, key, value) if (strcmp(key, "include_usage")) return sv_bad(
        e, "stream_options", "unknown field 'stream_options.%s' (known: include_usage)", key);
    return get_bool(so, "include_usage", &r->include_usage, e);
}

static void new_id(sv_request *r)
{
    static unsigned long long counter;
    unsigned long long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    r->created = (long long)time(NULL);
    snprintf(r->id, sizeof r->id, "%s-%llx-%llu", r->kind == SV_CHAT ? "chatcmpl" : "cmpl", r->created, n);
}

/* With echo: the prompt's text and, with logprobs, room for its tokens'
 * log-probabilities and their offsets in that text. */
static int echo_prompt(sv_server *srv, const sv_request *r, sv_prompt *p, sv_error *e)
{
    p->text = cli_detokenize(srv->model, p->ids, p->n, &p->text_len);
    if (!p->text) { /* no tokenizer: token-id prompts echo no text */
        p->text = strdup("");
        p->text_len = 0;
    }
    if (!p->text)
        return sv_bad(e, "echo", "out of memory");
    if (!r->logprobs)
        return 0;
    p->token_logprob = malloc(p->n * sizeof *p->token_logprob);
    p->top_tokens = calloc((size_t)p->n * r->n_top + 1, sizeof *p->top_tokens);
    p->top_logprobs = calloc((size_t)p->n * r->n_top + 1, sizeof *p->top_logprobs);
    p->text_offset = calloc(p->n, sizeof *p->text_offset);
    if (!p->token_logprob || !p->top_tokens || !p->top_logprobs || !p->text_offset)
        return sv_bad(e, "echo", "out of memory");
    for (uint32_t i = 0; i < p->n; i++)
        p->token_logprob[i] = NAN; /* filled by the engine; the first token has none */
    /* each token's offset: the length of the text of the tokens before it */
    for (uint32_t i = 1; i < p->n; i++) {
        size_t len = 0;
        char *before = cli_detokenize(srv->model, p->ids, i, &len);
        p->text_offset[i] = before ? len : 0;
        free(before);
    }
    return 0;
}

/* The choices: for each prompt, n of them in the response, computed n times
 * when sampled (choice i with seed + i), once when greedy (they are equal).
 * With echo and logprobs the first computed choice of each prompt scores it. */
static int make_choices(sv_server *srv, json_t *root, sv_request *r, sv_error *e)
{
    long long n = 1;
    if (get_int(root, "n", 1, srv->cfg.max_n, &n, e)) {
        if (json_is_integer(json_object_get(root, "n")) &&
            json_integer_value(json_object_get(root, "n")) > srv->cfg.max_n)
            sv_bad(e, "n", "'n' is %lld; this server's cap is %ld (--max-n)", json_integer_value(json_object_get(root, "n")),
                   srv->cfg.max_n);
        return -1;
    }
    r->n = (uint32_t)n;
    const uint32_t per = sv_computed_per_prompt(r);
    r->n_computed = r->n_prompts * per;
    r->choices = calloc(r->n_computed, sizeof *r->choices);
    if (!r->choices)
        return sv_bad(e, NULL, "out of memory");
    const size_t slots = r->max_tokens ? r->max_tokens : 1;
    for (uint32_t i = 0; i < r->n_computed; i++) {
        sv_choice *c = &r->choices[i];
        c->req = r;
        c->prompt = &r->prompts[i / per];
        c->scores_prompt = r->echo && r->logprobs && i % per == 0;
        c->index = i;
        c->seed = r->params.seed + i % per; /* modulo 2^64 */
        c->out = calloc(slots, sizeof *c->out);
        c->digests = calloc(slots, sizeof *c->digests);
        c->visible_after = calloc(slots, sizeof *c->visible_after);
        if (r->logprobs) {
            c->token_logprob = calloc(slots, sizeof *c->token_logprob);
            c->text_offset = calloc(slots, sizeof *c->text_offset);
            c->top_tokens = calloc(slots * r->n_top + 1, sizeof *c->top_tokens);
            c->top_logprobs = calloc(slots * r->n_top + 1, sizeof *c->top_logprobs);
        }
        if (!c->out || !c->digests || !c->visible_after ||
            (r->logprobs && (!c->token_logprob || !c->text_offset || !c->top_tokens || !c->top_logprobs)))
            return sv_bad(e, NULL, "out of memory");
    }
    for (uint32_t p = 0; r->echo && p < r->n_prompts; p++)
        if (echo_prompt(srv, r, &r->prompts[p], e))
            return -1;
    return 0;
}

/* max_tokens (or a chat's max_completion_tokens): at most --max-tokens; when
 * absent 16 for completions (OpenAI's) and --max-tokens-default for chats;
 * the prompt and all generated tokens but the last (never fed back) must fit
 * the context. */
static int get_max_tokens(sv_server *srv, json_t *root, sv_request *r, sv_error *e)
{
    const char *name = "max_tokens";
    if (r->kind == SV_CHAT && json_object_get(root, "max_completion_tokens") &&
        !json_is_null(json_object_get(root, "max_completion_tokens")))
        name = "max_completion_tokens";
    long long max_tokens = -1;
    if (get_int(root, name, 0, srv->cfg.max_tokens, &max_tokens, e)) {
        json_t *v = json_object_get(root, name);
        if (json_is_integer(v) && json_integer_value(v) >= 1)
            sv_bad(e, name, "'%s' is %lld; this server's cap is %ld (--max-tokens)", name, json_integer_value(v),
                   srv->cfg.max_tokens);
        return -1;
    }
    if (max_tokens == 0 && !r->echo)
        return sv_bad(e, name, "'%s' is 0: that generates nothing; it is allowed only with \"echo\": true, "
                               "which scores the prompt", name);
    if (max_tokens == 0 && r->stream)
        return sv_bad(e, name, "'%s' 0 (the prompt scored alone) is not served as a stream", name);
    uint32_t longest = 0; /* every prompt must fit with the completion */
    for (uint32_t p = 0; p < r->n_prompts; p++)
        if (r->prompts[p].n > longest)
            longest = r->prompts[p].n;
    const long long room = srv->context - (long long)longest + 1;
    if (max_tokens < 0) { /* the default, within the context */
        max_tokens = r->kind == SV_CHAT ? srv->cfg.max_tokens_default : 16;
        if (max_tokens > room && r->kind == SV_CHAT)
            max_tokens = room;
    }
    if ((max_tokens < 1 && !r->echo) || max_tokens > room)
        return sv_bad(e, name, "the prompt's %u tokens and %s %lld exceed the context of %lld tokens", longest,
                      name, max_tokens, (long long)srv->context);
    r->max_tokens = (uint32_t)max_tokens;
    return 0;
}

int sv_request_parse(sv_server *srv, sv_kind kind, const char *body, size_t len, sv_request **out, sv_error *e)
{
    *out = NULL;
    json_t *root = sv_json_load(body, len, e);
    if (!root)
        return -1;
    sv_request *r = calloc(1, sizeof *r);
    if (!r) {
        json_decref(root);
        return sv_bad(e, NULL, "out of memory");
    }
    r->kind = kind;
    r->refs = 1;
    int rc = -1;
    if (!json_is_object(root)) {
        sv_bad(e, NULL, "the body must be a JSON object");
        goto out;
    }
    if (check_known_fields(root, kind, e) || check_unsupported(root, e) || get_logprobs(srv, root, kind, r, e) ||
        get_bool(root, "stream", &r->stream, e) || get_stream_options(root, r, e) ||
        get_detinfer_options(root, r, e) || get_stops(root, r, e) || get_sampling(srv, root, r, e) ||
        get_bool(root, "echo", &r->echo, e) || sv_request_grammar(root, r, e) ||
        (kind == SV_CHAT && sv_request_tools(srv, root, r, e)))
        goto out;
    if ((kind == SV_CHAT ? get_messages(srv, root, r, e) : get_prompts(srv, root, r, e)))
        goto out;
    if (get_max_tokens(srv, root, r, e) || make_choices(srv, root, r, e))
        goto out;
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

int sv_request_done(const sv_request *r)
{
    for (uint32_t i = 0; i < r->n_computed; i++)
        if (r->choices[i].state != SV_DONE)
            return 0;
    return 1;
}

const char *sv_request_error(const sv_request *r)
{
    for (uint32_t i = 0; i < r->n_computed; i++)
        if (r->choices[i].error[0])
            return r->choices[i].error;
    return NULL;
}

void sv_request_free(sv_request *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    free(r->stops);
    for (uint32_t p = 0; r->prompts && p < r->n_prompts; p++) {
        sv_prompt *q = &r->prompts[p];
        free(q->ids);
        free(q->token_logprob);
        free(q->top_tokens);
        free(q->top_logprobs);
        free(q->text);
        free(q->text_offset);
    }
    free(r->prompts);
    for (uint32_t i = 0; r->choices && i < r->n_computed; i++) {
        sv_choice *c = &r->choices[i];
        free(c->out);
        free(c->digests);
        free(c->token_logprob);
        free(c->top_tokens);
        free(c->top_logprobs);
        free(c->text_offset);
        free(c->visible_after);
        free(c->text);
        json_decref(c->tool_calls);
    }
    free(r->choices);
    sv_grammar_release(r->grammar);
    json_decref(r->tools);
    json_decref(r->responses);
    free(r);
}
