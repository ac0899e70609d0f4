/*
 * serve_tokens.c — the tokenizer endpoints, in llama.cpp server's shapes and
 * in vLLM's (what lm-evaluation-harness's tokenizer_backend=remote reads):
 *
 *   POST /tokenize   {"content": STRING, "add_special": false, "parse_special": false,
 *                     "with_pieces": false}  (llama.cpp), or
 *                    {"prompt": STRING, "add_special_tokens": true}  (vLLM)
 *                    -> {"tokens": [ID, ...], "count": N, "max_model_len": CONTEXT}; with
 *                    pieces the tokens are [{"id": ID, "piece": STRING or [BYTE, ...]}, ...]
 *   POST /detokenize {"tokens": [ID, ...]} -> {"content": STRING, "prompt": STRING}
 *   GET  /tokenizer_info -> {"eos_token", "bos_token", "pad_token", "chat_template",
 *                    "model_max_length", ...}
 *
 * Each request shape keeps its own client's defaults. "content": no BOS, and
 * the text of control tokens is text (llama.cpp's parse_special defaults to
 * true; here false, so the ids are those /v1/completions gives the same text
 * prompt, BOS aside). "prompt": as vLLM's Hugging Face tokenizers, the BOS is
 * added unless add_special_tokens is false, and the text of a special token
 * is that token (lm-eval finds the EOS id by tokenizing its text).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_json.h"
#include "serve/serve.h"

/* Each key of root is one of the space-separated names. */
static int only_fields(json_t *root, const char *names, const char *endpoint, sv_error *e)
{
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value)
    {
        const size_t n = strlen(key);
        const char *p = n ? names : NULL; /* an empty key is no field */
        while (p && (p = strstr(p, key)) && !((p == names || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')))
            p += n;
        if (!p)
            return sv_bad(e, key, "unknown field '%.40s' for %s (known: %s)", key, endpoint, names);
    }
    return 0;
}

/* A boolean field; *out keeps its default when the field is absent or null. */
static int flag(json_t *root, const char *name, int *out, sv_error *e)
{
    json_t *v = json_object_get(root, name);
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return sv_bad(e, name, "'%s' must be true or false", name);
    if (json_is_boolean(v))
        *out = json_is_true(v);
    return 0;
}

/* A token's piece: a string when it is valid UTF-8 without NUL, else its bytes. */
static json_t *piece_json(const sv_server *srv, int32_t id)
{
    size_t need = 0;
    char small[64], *buf = small;
    di_status st = di_model_token_piece(srv->model, id, small, sizeof small, &need);
    if (st == DI_ERR_BUFFER_TOO_SMALL && (buf = malloc(need + 1)))
        st = di_model_token_piece(srv->model, id, buf, need + 1, &need);
    json_t *v = NULL;
    if (st == DI_OK && !memchr(buf, '\0', need))
        v = json_stringn(buf, need);
    if (!v && st == DI_OK) {
        v = json_array();
        for (size_t i = 0; i < need; i++)
            json_array_append_new(v, json_integer((unsigned char)buf[i]));
    }
    if (buf != small)
        free(buf);
    return v ? v : json_null();
}

char *sv_tokenize_json(sv_server *srv, const char *body, size_t len, sv_error *e)
{
    json_t *root = sv_json_load(body, len, e);
    if (!root)
        return NULL;
    char *out = NULL;
    if (!json_is_object(root)) {
        sv_bad(e, NULL, "the body must be a JSON object");
        goto done;
    }
    if (only_fields(root, "content prompt add_special add_special_tokens parse_special with_pieces", "/tokenize", e))
        goto done;
    /* The text: llama.cpp's "content" or vLLM's "prompt", whose defaults differ (above). */
    const int vllm = json_object_get(root, "prompt") != NULL;
    const char *field = vllm ? "prompt" : "content";
    json_t *content = json_object_get(root, field);
    if (vllm && json_object_get(root, "content")) {
        sv_bad(e, "prompt", "give the text as 'content' (llama.cpp) or as 'prompt' (vLLM), not both");
        goto done;
    }
    if (json_object_get(root, "add_special") && json_object_get(root, "add_special_tokens")) {
        sv_bad(e, "add_special_tokens", "give 'add_special' (llama.cpp) or 'add_special_tokens' (vLLM), not both");
        goto done;
    }
    int add_special = vllm, parse_special = vllm, with_pieces = 0;
    const char *add_name = json_object_get(root, "add_special_tokens") ? "add_special_tokens" : "add_special";
    if (flag(root, add_name, &add_special, e) || flag(root, "parse_special", &parse_special, e) ||
        flag(root, "with_pieces", &with_pieces, e))
        goto done;
    if (!json_is_string(content) || strlen(json_string_value(content)) != json_string_length(content)) {
        sv_bad(e, field, "'%s' must be a string (without NUL)%s", field,
               content ? "" : ": give the text as 'content' (llama.cpp) or as 'prompt' (vLLM)");
        goto done;
    }
    if (!sv_text_may_fit(srv, json_string_length(content), field, e))
        goto done;
    const uint32_t flags = (add_special ? DI_TOKENIZE_ADD_BOS : 0) | (parse_special ? DI_TOKENIZE_PARSE_SPECIAL : 0);
    size_t n = 0;
    char err[256] = "";
    di_status st = di_model_tokenize(srv->model, json_string_value(content), json_string_length(content), flags, NULL,
                                     0, &n, err, sizeof err);
    int32_t *ids = (st == DI_OK || st == DI_ERR_BUFFER_TOO_SMALL) ? malloc((n ? n : 1) * sizeof *ids) : NULL;
    if (ids)
        st = di_model_tokenize(srv->model, json_string_value(content), json_string_length(content), flags, ids, n, &n,
                               err, sizeof err);
    if (st || !ids) {
        sv_bad(e, field, "the text cannot be tokenized: %s: %s", di_status_name(st ? st : DI_ERR_OUT_OF_MEMORY), err);
        free(ids);
        goto done;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(tokens, with_pieces
                                          ? json_pack("{s:i, s:o}", "id", ids[i], "piece", piece_json(srv, ids[i]))
                                          : json_integer(ids[i]));
    free(ids);
    out = sv_json_dump(json_pack("{s:o, s:I, s:I}", "tokens", tokens, "count", (json_int_t)n, "max_model_len",
                                 (json_int_t)srv->context));
done:
    json_decref(root);
    return out;
}

char *sv_detokenize_json(sv_server *srv, const char *body, size_t len, sv_error *e)
{
    json_t *root = sv_json_load(body, len, e);
    if (!root)
        return NULL;
    json_t *tokens = json_object_get(root, "tokens");
    char *out = NULL;
    int32_t *ids = NULL;
    if (!json_is_object(root)) {
        sv_bad(e, NULL, "the body must be a JSON object");
        goto done;
    }
    if (only_fields(root, "tokens", "/detokenize", e))
        goto done;
    if (!json_is_array(tokens) || json_array_size(tokens) > (size_t)srv->context) {
        sv_bad(e, "tokens", "'tokens' must be an array of at most %lld token ids (the context)",
               (long long)srv->context);
        goto done;
    }
    const size_t n = json_array_size(tokens);
    ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        sv_bad(e, "tokens", "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tokens, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= srv->n_vocab) {
            sv_bad(e, "tokens", "token %zu is not an id in [0, %lld)", i, (long long)srv->n_vocab);
            goto done;
        }
        ids[i] = (int32_t)json_integer_value(t);
    }
    size_t text_len = 0;
    char *text = cli_detokenize(srv->model, ids, n, &text_len);
    if (!text) {
        sv_bad(e, "tokens", "this model has no tokenizer");
        goto done;
    }
    out = sv_json_dump(json_pack("{s:o, s:o}", "content", cli_json_textn(text, text_len), "prompt",
                                 cli_json_textn(text, text_len)));
    free(text);
done:
    free(ids);
    json_decref(root);
    return out;
}

/* The vocabulary text of a special token, which the public API does not give
 * (di_model_token_piece gives a control token's text in decoded text: "").
 * So: its piece when that names it, else the first of the usual spellings
 * that names exactly this id (di_model_token_lookup); NULL when none does. */
static json_t *special_text(const sv_server *srv, int32_t id)
{
    static const char *const spellings[] = {
        "<eos>", "<bos>", "</s>", "<s>", "<|endoftext|>", "<|end_of_text|>", "<|begin_of_text|>", "<|im_end|>",
        "<|im_start|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|startoftext|>",
    };
    int32_t found;
    char *piece = cli_token_piece(srv->model, id);
    if (piece && *piece && di_model_token_lookup(srv->model, piece, strlen(piece), &found) == DI_OK && found == id) {
        json_t *v = json_string(piece);
        free(piece);
        return v;
    }
    free(piece);
    for (size_t i = 0; i < sizeof spellings / sizeof *spellings; i++)
        if (di_model_token_lookup(srv->model, spellings[i], strlen(spellings[i]), &found) == DI_OK && found == id)
            return json_string(spellings[i]);
    return NULL;
}

/* The file's tokenizer.chat_template (a Jinja text, what vLLM's clients render),
 * when the server formats chats with the file's own template; else null. */
static json_t *chat_template_text(const sv_server *srv)
{
    const char *own = di_model_chat_template(srv->model);
    if (srv->cfg.chat_template && (!own || strcmp(own, srv->cfg.chat_template)))
        return json_null();
    size_t n = 0;
    di_status st = di_model_meta_string(srv->model, "tokenizer.chat_template", NULL, 0, &n);
    char *text = st == DI_ERR_BUFFER_TOO_SMALL ? malloc(n + 1) : NULL;
    json_t *v = text && di_model_meta_string(srv->model, "tokenizer.chat_template", text, n + 1, &n) == DI_OK
                    ? cli_json_textn(text, n)
                    : NULL;
    free(text);
    return v ? v : json_null();
}

char *sv_tokenizer_info_json(sv_server *srv)
{
    int32_t bos = -1, eos = -1, ids[2];
    size_t n = 0;
    if (di_model_special_token(srv->model, DI_TOKEN_BOS, &bos) != DI_OK)
        bos = -1;
    if (di_model_special_token(srv->model, DI_TOKEN_EOS, &eos) != DI_OK)
        eos = -1;
    /* Whether "add_special_tokens" adds the BOS: the file says (tokenizer.ggml.add_bos_token). */
    const int adds_bos = di_model_tokenize(srv->model, "", 0, DI_TOKENIZE_ADD_BOS, ids, 2, &n, NULL, 0) == DI_OK &&
                         n > 0 && ids[0] == bos;
    json_t *bos_text = bos >= 0 ? special_text(srv, bos) : NULL;
    json_t *eos_text = eos >= 0 ? special_text(srv, eos) : NULL;
    json_t *root = json_object();
    root = cli_json_set(root, "bos_token", bos_text ? bos_text : json_null());
    root = cli_json_set(root, "eos_token", eos_text ? eos_text : json_null());
    root = cli_json_set(root, "pad_token", json_null()); /* the public API names no padding token */
    root = cli_json_set(root, "bos_token_id", bos >= 0 ? json_integer(bos) : json_null());
    root = cli_json_set(root, "eos_token_id", eos >= 0 ? json_integer(eos) : json_null());
    root = cli_json_set(root, "add_bos_token", json_boolean(adds_bos));
    root = cli_json_set(root, "model_max_length", json_integer(srv->context));
    root = cli_json_set(root, "chat_template", chat_template_text(srv));
    root = cli_json_set(root, "chat_template_name",
                        srv->chat_template ? json_string(srv->chat_template) : json_null());
    return root ? sv_json_dump(root) : NULL;
}
