/*
 * serve_tokens.c — /tokenize and /detokenize in llama.cpp server's shapes:
 *
 *   POST /tokenize   {"content": STRING, "add_special": false, "parse_special": false,
 *                     "with_pieces": false} -> {"tokens": [ID, ...]}, or with
 *                     pieces [{"id": ID, "piece": STRING or [BYTE, ...]}, ...]
 *   POST /detokenize {"tokens": [ID, ...]} -> {"content": STRING}
 *
 * parse_special defaults to false (llama.cpp's to true): the ids are those
 * /v1/completions gives the same text prompt (add_special: its BOS).
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

static int flag(json_t *root, const char *name, int *out, sv_error *e)
{
    json_t *v = json_object_get(root, name);
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return sv_bad(e, name, "'%s' must be true or false", name);
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
    json_t *content = json_object_get(root, "content");
    int add_special = 0, parse_special = 0, with_pieces = 0;
    char *out = NULL;
    if (!json_is_object(root)) {
        sv_bad(e, NULL, "the body must be a JSON object");
        goto done;
    }
    if (only_fields(root, "content add_special parse_special with_pieces", "/tokenize", e) ||
        flag(root, "add_special", &add_special, e) || flag(root, "parse_special", &parse_special, e) ||
        flag(root, "with_pieces", &with_pieces, e))
        goto done;
    if (!json_is_string(content) || strlen(json_string_value(content)) != json_string_length(content)) {
        sv_bad(e, "content", "'content' must be a string (without NUL)");
        goto done;
    }
    if (!sv_text_may_fit(srv, json_string_length(content), "content", e))
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
        sv_bad(e, "content", "the text cannot be tokenized: %s: %s", di_status_name(st ? st : DI_ERR_OUT_OF_MEMORY),
               err);
        free(ids);
        goto done;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(tokens, with_pieces
                                          ? json_pack("{s:i, s:o}", "id", ids[i], "piece", piece_json(srv, ids[i]))
                                          : json_integer(ids[i]));
    free(ids);
    out = sv_json_dump(json_pack("{s:o}", "tokens", tokens));
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
    out = sv_json_dump(json_pack("{s:o}", "content", cli_json_textn(text, text_len)));
    free(text);
done:
    free(ids);
    json_decref(root);
    return out;
}
