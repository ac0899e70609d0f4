/*
 * serve_response.c — the JSON of responses, stream chunks and errors in
 * OpenAI's shapes, each with the "detinfer" object (docs/SERVING.md), and
 * OpenAI's log-probabilities of the generated tokens.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_json.h"
#include "serve/serve.h"

/* ---- The detinfer object ------------------------------------------------------ */

static json_t *hex(const di_digest *d)
{
    char h[DI_DIGEST_HEX_SIZE];
    cli_hex(d, h);
    return json_string(h);
}

json_t *sv_fingerprint_object(const sv_server *srv)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:s}", "library_version", di_version_string(), "backend", srv->backend_info,
                     "profile", cli_profile_name(srv->cfg.profile), "numerics", cli_profile_numerics(srv->cfg.profile),
                     "model_digest", srv->model_digest);
}

/* A prompt's facts: its length, digest and (when asked) its ids. */
static void prompt_facts(json_t *o, const sv_request *r, const sv_prompt *p)
{
    json_object_set_new(o, "prompt_tokens", json_integer(p->n));
    di_digest d;
    if (cli_digest_bytes(p->ids, (size_t)p->n * sizeof *p->ids, &d) == DI_OK)
        json_object_set_new(o, "prompt_digest", hex(&d));
    if (r->want_prompt_ids)
        json_object_set_new(o, "prompt_ids", cli_json_tokens(p->ids, p->n));
}

/* What one choice adds: its seed, tokens and digests; with a list of
 * prompts, which one it continues and that prompt's facts. */
static json_t *choice_facts(const sv_server *srv, const sv_request *r, uint32_t index)
{
    const sv_choice *c = sv_choice_of(r, index);
    json_t *o = json_object();
    json_object_set_new(o, "index", json_integer(index));
    if (r->n_prompts > 1) {
        json_object_set_new(o, "prompt_index", json_integer(index / r->n));
        prompt_facts(o, r, c->prompt);
    }
    json_object_set_new(o, "seed", r->sampled ? json_integer((json_int_t)c->seed) : json_null());
    json_object_set_new(o, "sequence_digest", hex(&c->sequence));
    json_object_set_new(o, "completion_token_ids", cli_json_tokens(c->out, c->n_out));
    if (srv->cfg.speculate) /* what it did for the speed; the tokens are the same without it */
        json_object_set_new(o, "speculation",
                            json_pack("{s:s, s:I, s:I}", "draft", srv->cfg.draft_model ? "draft-model" : "ngram",
                                      "drafted", (json_int_t)c->drafted, "accepted", (json_int_t)c->accepted));
    if (r->want_logits_digests) {
        json_t *d = json_array();
        for (uint32_t i = 0; i < c->n_out; i++)
            json_array_append_new(d, hex(&c->digests[i]));
        json_object_set_new(o, "logits_digests", d);
    }
    return o;
}

json_t *sv_detinfer_object(const sv_server *srv, const sv_request *r, int index)
{
    json_t *o = index >= 0 ? choice_facts(srv, r, (uint32_t)index) : json_object();
    if (index >= 0 && sv_response_choices(r) == 1)
        json_object_del(o, "index");
    if (index < 0) {
        json_t *all = json_array();
        for (uint32_t i = 0; i < sv_response_choices(r); i++)
            json_array_append_new(all, choice_facts(srv, r, i));
        json_object_set_new(o, "choices", all);
    }
    if (r->n_prompts == 1)
        prompt_facts(o, r, &r->prompts[0]);
    else if (index < 0) /* every prompt's own facts are in its choices' */
        json_object_set_new(o, "prompt_tokens", json_integer(r->n_prompt_tokens));
    json_object_set_new(o, "sampling", json_string(r->sampled ? "sampled" : "greedy"));
    /* as applied, defaults included: what replay needs besides the request */
    json_t *applied = cli_json_sampling(&r->params);
    json_object_set_new(applied, "seed", json_integer((json_int_t)r->params.seed));
    json_object_set_new(applied, "max_tokens", json_integer(r->max_tokens));
    json_object_set_new(applied, "n", json_integer(r->n));
    json_object_set_new(o, "sampling_params", applied);
    if (r->kind == SV_CHAT)
        json_object_set_new(o, "chat_template", json_string(srv->chat_template));
    if (r->grammar)
        json_object_set_new(o, "grammar_digest", json_string(sv_grammar_digest(r->grammar)));
    json_object_set_new(o, "fingerprint", sv_fingerprint_object(srv));
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

static token_text token_text_of(const sv_server *srv, int32_t token)
{
    token_text t = {NULL, 0, NULL};
    size_t need = 0;
    di_status st = di_model_token_piece(srv->model, token, NULL, 0, &need);
    if ((st == DI_OK || st == DI_ERR_BUFFER_TOO_SMALL) && (t.bytes = malloc(need + 1)) &&
        di_model_token_piece(srv->model, token, t.bytes, need + 1, &need) == DI_OK)
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
static json_t *chat_entry(const sv_server *srv, int32_t token, float lp)
{
    token_text t = token_text_of(srv, token);
    json_t *bytes = json_array();
    for (size_t i = 0; i < t.len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)t.bytes[i]));
    free(t.bytes);
    return json_pack("{s:o, s:o, s:o}", "token", t.string, "logprob", logprob_number(lp), "bytes", bytes);
}

/* Adds token: lp to a completion's top_logprobs object unless a token of the
 * same text is there already (the higher-ranked one keeps the key). */
static void completion_top_add(const sv_server *srv, json_t *top, int32_t token, float lp)
{
    token_text t = token_text_of(srv, token);
    const char *key = json_string_value(t.string);
    if (!json_object_get(top, key))
        json_object_set_new(top, key, logprob_number(lp));
    json_decref(t.string);
    free(t.bytes);
}

/* The offset, in Unicode code points of the text as the response spells it
 * (cli_json_textn), of byte `at` of text: a token that begins inside a UTF-8
 * sequence gets the offset of that character. */
static size_t text_offset_chars(const char *text, size_t at)
{
    json_t *prefix = cli_json_textn(text, sv_utf8_complete_prefix(text, at));
    const char *p = json_string_value(prefix);
    size_t count = 0, n = json_string_length(prefix);
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)p[i] & 0xC0) != 0x80;
    json_decref(prefix);
    return count;
}

/* One token's entries of a completion's logprobs: its text, its
 * log-probability, its alternatives (the n most likely and the token itself:
 * OpenAI's up to logprobs + 1) and its offset in characters. */
static void completion_entry(const sv_server *srv, const sv_request *r, json_t *lists[4], int32_t token, float lp,
                             const int32_t *top, const float *top_lp, size_t offset)
{
    token_text t = token_text_of(srv, token);
    free(t.bytes);
    json_array_append_new(lists[0], t.string);
    json_array_append_new(lists[1], logprob_number(lp));
    json_t *alternatives = json_object();
    for (uint32_t k = 0; k < r->n_top; k++)
        completion_top_add(srv, alternatives, top[k], top_lp[k]);
    completion_top_add(srv, alternatives, token, lp);
    json_array_append_new(lists[2], alternatives);
    json_array_append_new(lists[3], json_integer((json_int_t)offset));
}

/* Choice c's "logprobs" value for its generated tokens [from, to), in the
 * endpoint's shape, after its prompt's tokens when with_prompt (echo: the
 * first has no log-probability, null, and no alternatives, null); null when
 * the request did not ask or there is nothing to give. */
static json_t *logprobs_json(const sv_server *srv, const sv_request *r, const sv_choice *c, uint32_t from,
                             uint32_t to, int with_prompt)
{
    if (!r->logprobs || (from >= to && !with_prompt))
        return json_null();
    if (r->kind == SV_CHAT) {
        json_t *content = json_array();
        for (uint32_t i = from; i < to; i++) {
            json_t *entry = chat_entry(srv, c->out[i], c->token_logprob[i]);
            json_t *top = json_array();
            for (uint32_t k = 0; k < r->n_top; k++)
                json_array_append_new(top, chat_entry(srv, c->top_tokens[(size_t)i * r->n_top + k],
                                                      c->top_logprobs[(size_t)i * r->n_top + k]));
            json_object_set_new(entry, "top_logprobs", top);
            json_array_append_new(content, entry);
        }
        return json_pack("{s:o, s:n}", "content", content, "refusal");
    }
    json_t *lists[4] = {json_array(), json_array(), json_array(), json_array()};
    size_t prompt_chars = 0; /* the echoed prompt's length: the completion's offsets start there */
    if (with_prompt) {
        const sv_prompt *p = c->prompt;
        for (uint32_t i = 0; i < p->n; i++) {
            const size_t at = (size_t)i * r->n_top;
            completion_entry(srv, r, lists, p->ids[i], p->token_logprob[i], &p->top_tokens[at],
                             &p->top_logprobs[at], text_offset_chars(p->text, p->text_offset[i]));
            if (i == 0) { /* nothing before the first token to predict it */
                json_array_set_new(lists[1], 0, json_null());
                json_array_set_new(lists[2], 0, json_null());
            }
        }
        prompt_chars = text_offset_chars(p->text, p->text_len);
    }
    for (uint32_t i = from; i < to; i++) {
        const size_t at = (size_t)i * r->n_top;
        completion_entry(srv, r, lists, c->out[i], c->token_logprob[i], &c->top_tokens[at], &c->top_logprobs[at],
                         prompt_chars + (c->text ? text_offset_chars(c->text, c->text_offset[i]) : 0));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", lists[0], "token_logprobs", lists[1], "top_logprobs",
                     lists[2], "text_offset", lists[3]);
}

/* A completion's text: with echo, its prompt's text before it. */
static json_t *choice_text(const sv_request *r, const sv_choice *c, const char *text, size_t len, int with_prompt)
{
    if (!with_prompt || !r->echo)
        return cli_json_textn(text, len);
    const sv_prompt *p = c->prompt;
    char *both = malloc(p->text_len + len + 1);
    if (!both)
        return cli_json_textn(text, len);
    memcpy(both, p->text, p->text_len);
    memcpy(both + p->text_len, text, len);
    json_t *j = cli_json_textn(both, p->text_len + len);
    free(both);
    return j;
}

json_t *sv_choice_text(const sv_request *r, const sv_choice *c)
{
    if (c->tool_calls) /* the text before the calls, null when none (OpenAI's content beside calls) */
        return c->calls_at ? cli_json_textn(c->text, c->calls_at) : json_null();
    return choice_text(r, c, c->text ? c->text : "", c->text_visible, 1);
}

static json_t *usage(const sv_request *r)
{
    json_int_t completion = 0;
    for (uint32_t i = 0; i < sv_response_choices(r); i++)
        completion += sv_choice_of(r, i)->n_out;
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)r->n_prompt_tokens, "completion_tokens",
                     completion, "total_tokens", (json_int_t)r->n_prompt_tokens + completion);
}

static json_t *envelope(const sv_server *srv, const sv_request *r, const char *object)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", r->id, "object", object, "created", (json_int_t)r->created,
                     "model", srv->cfg.model_name, "system_fingerprint", srv->system_fingerprint);
}

char *sv_response_json(const sv_server *srv, const sv_request *r)
{
    int chat = r->kind == SV_CHAT;
    json_t *root = envelope(srv, r, chat ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    for (uint32_t i = 0; i < sv_response_choices(r); i++) {
        const sv_choice *c = sv_choice_of(r, i);
        json_t *choice = json_object();
        json_object_set_new(choice, "index", json_integer(i));
        json_t *text = sv_choice_text(r, c);
        if (chat) {
            json_t *message = json_pack("{s:s, s:o, s:n}", "role", "assistant", "content", text, "refusal");
            if (c->tool_calls)
                json_object_set(message, "tool_calls", c->tool_calls);
            json_object_set_new(choice, "message", message);
        } else
            json_object_set_new(choice, "text", text);
        json_object_set_new(choice, "logprobs", logprobs_json(srv, r, c, 0, c->n_out, r->echo));
        json_object_set_new(choice, "finish_reason", json_string(c->finish_reason ? c->finish_reason : "length"));
        json_array_append_new(choices, choice);
    }
    json_object_set_new(root, "choices", choices);
    json_object_set_new(root, "usage", usage(r));
    json_object_set_new(root, "detinfer", sv_detinfer_object(srv, r, sv_response_choices(r) == 1 ? 0 : -1));
    return sv_json_dump(root);
}

char *sv_chunk_json(const sv_server *srv, const sv_request *r, uint32_t index, const char *delta, size_t delta_len,
                    uint32_t tok_from, uint32_t tok_to, const char *finish, int role)
{
    int chat = r->kind == SV_CHAT;
    const sv_choice *c = sv_choice_of(r, index);
    json_t *root = envelope(srv, r, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(index));
    /* echo: the prompt comes with the choice's first token */
    const int with_prompt = r->echo && !finish && tok_from == 0 && tok_to > 0;
    json_t *text = choice_text(r, c, delta, delta_len, with_prompt);
    if (chat) {
        json_t *d = json_object();
        if (role)
            json_object_set_new(d, "role", json_string("assistant"));
        json_object_set_new(d, "content", text);
        json_object_set_new(choice, "delta", d);
    } else {
        json_object_set_new(choice, "text", text);
    }
    json_object_set_new(choice, "logprobs", logprobs_json(srv, r, c, tok_from, tok_to, with_prompt));
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    if (finish)
        json_object_set_new(root, "detinfer", sv_detinfer_object(srv, r, (int)index));
    return sv_json_dump(root);
}

char *sv_tool_call_chunk_json(const sv_server *srv, const sv_request *r, uint32_t index, size_t k, int part)
{
    const sv_choice *c = sv_choice_of(r, index);
    json_t *call = json_array_get(c->tool_calls, k), *fn = json_object_get(call, "function");
    json_t *delta = part == 0 ? json_pack("{s:I, s:O, s:s, s:{s:O, s:s}}", "index", (json_int_t)k, "id",
                                          json_object_get(call, "id"), "type", "function", "function", "name",
                                          json_object_get(fn, "name"), "arguments", "")
                              : json_pack("{s:I, s:{s:O}}", "index", (json_int_t)k, "function", "arguments",
                                          json_object_get(fn, "arguments"));
    json_t *root = envelope(srv, r, "chat.completion.chunk");
    json_t *choice = json_pack("{s:I, s:{s:o}, s:n, s:n}", "index", (json_int_t)index, "delta", "tool_calls",
                               json_pack("[o]", delta), "logprobs", "finish_reason");
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    return sv_json_dump(root);
}

char *sv_usage_chunk_json(const sv_server *srv, const sv_request *r)
{
    json_t *root = envelope(srv, r, r->kind == SV_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(root, "choices", json_array());
    json_object_set_new(root, "usage", usage(r));
    return sv_json_dump(root);
}

char *sv_error_json(const sv_error *e)
{
    /* The message and param may quote the request, cut to fit: cli_json_textn
     * keeps them valid UTF-8. */
    json_t *err = json_object();
    json_object_set_new(err, "message", cli_json_textn(e->message, strlen(e->message)));
    json_object_set_new(err, "type", json_string(e->type ? e->type : "error"));
    json_object_set_new(err, "param", e->param[0] ? cli_json_textn(e->param, strlen(e->param)) : json_null());
    json_object_set_new(err, "code", json_null());
    return sv_json_dump(json_pack("{s:o}", "error", err));
}
