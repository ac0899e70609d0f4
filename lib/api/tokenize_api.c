/*
 * tokenize_api.c — the public tokenizer calls of a loaded model
 * (di_model_tokenize, di_model_detokenize, di_model_token_piece,
 * di_model_special_token, di_model_token_lookup, di_model_chat_template,
 * di_chat_tokenize):
 * argument checks and the caller's buffers around the tokenizer layer
 * (lib/tokenizer/tokenizer.h, chat_template.h).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/tokenizer/chat_template.h"
#include "lib/base/errors.h"
#include "lib/model/model.h"
#include "lib/tokenizer/tokenizer.h"

static di_status model_tokenizer(const di_model *model, const di_tokenizer **t, char *err, size_t es)
{
    if (!model)
        return di_error(err, es, DI_ERR_INVALID_ARGUMENT, "model is NULL");
    if (!model->tokenizer)
        return di_error(err, es, DI_ERR_INTERNAL, "the model has no tokenizer object");
    *t = model->tokenizer;
    return di_tokenizer_ready(*t, err, es);
}

/* Copies text into the caller's buffer with its NUL, or says how much is needed. */
static di_status give_text(const char *s, size_t n, char *text, size_t capacity, size_t *text_len,
                           char *err, size_t es)
{
    *text_len = n;
    if (capacity <= n) {
        if (capacity > 0)
            text[0] = '\0';
        return di_error(err, es, DI_ERR_BUFFER_TOO_SMALL,
                        "the text needs %zu bytes and its NUL; the buffer has %zu", n, capacity);
    }
    memcpy(text, s, n);
    text[n] = '\0';
    return DI_OK;
}

/* The ids of out into the caller's buffer (the buffer rules of
 * di_model_tokenize); frees out. `what` names the input in the error. */
static di_status give_tokens(di_tok_vec *out, const char *what, int32_t *tokens, size_t capacity,
                             size_t *n_tokens, char *errbuf, size_t errbuf_size)
{
    di_status st = DI_OK;
    *n_tokens = out->n;
    if (out->n > capacity)
        st = di_error(errbuf, errbuf_size, DI_ERR_BUFFER_TOO_SMALL, "the %s needs %zu tokens; the buffer has room for %zu",
                      what, out->n, capacity);
    else if (out->n > 0)
        memcpy(tokens, out->v, out->n * sizeof *tokens);
    free(out->v);
    return st;
}

DI_API di_status di_model_tokenize(const di_model *model, const char *text, size_t text_len,
                                   uint32_t flags, int32_t *tokens, size_t capacity,
                                   size_t *n_tokens, char *errbuf, size_t errbuf_size)
{
    if (errbuf && errbuf_size > 0)
        errbuf[0] = '\0';
    if (!n_tokens || (!text && text_len > 0) || (!tokens && capacity > 0))
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "NULL n_tokens, text (with text_len > 0) or tokens (with capacity > 0)");
    *n_tokens = 0;
    const di_tokenizer *t = NULL;
    di_status st = model_tokenizer(model, &t, errbuf, errbuf_size);
    if (st)
        return st;
    di_tok_vec out = {0};
    st = di_tokenizer_encode(t, text ? text : "", text_len, flags, &out, errbuf, errbuf_size);
    if (st) {
        free(out.v);
        return st;
    }
    return give_tokens(&out, "text", tokens, capacity, n_tokens, errbuf, errbuf_size);
}

DI_API di_status di_model_detokenize(const di_model *model, const int32_t *tokens, size_t n_tokens,
                                     char *text, size_t capacity, size_t *text_len, char *errbuf,
                                     size_t errbuf_size)
{
    if (errbuf && errbuf_size > 0)
        errbuf[0] = '\0';
    if (!text_len || (!tokens && n_tokens > 0) || (!text && capacity > 0))
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "NULL text_len, tokens (with n_tokens > 0) or text (with capacity > 0)");
    *text_len = 0;
    const di_tokenizer *t = NULL;
    di_status st = model_tokenizer(model, &t, errbuf, errbuf_size);
    if (st)
        return st;
    char *s;
    size_t n;
    if ((st = di_tokenizer_decode(t, tokens, n_tokens, &s, &n, errbuf, errbuf_size)))
        return st;
    st = give_text(s, n, text, capacity, text_len, errbuf, errbuf_size);
    free(s);
    return st;
}

DI_API di_status di_model_token_piece(const di_model *model, int32_t token, char *text,
                                      size_t capacity, size_t *text_len)
{
    if (!text_len || (!text && capacity > 0))
        return DI_ERR_INVALID_ARGUMENT;
    *text_len = 0;
    const di_tokenizer *t = NULL;
    di_status st = model_tokenizer(model, &t, NULL, 0);
    if (st)
        return st;
    char *s;
    size_t n;
    if ((st = di_tokenizer_piece(t, token, &s, &n, NULL, 0)))
        return st;
    st = give_text(s, n, text, capacity, text_len, NULL, 0);
    free(s);
    return st;
}

DI_API di_status di_model_special_token(const di_model *model, di_special_token which, int32_t *token)
{
    if (!token)
        return DI_ERR_INVALID_ARGUMENT;
    *token = -1;
    const di_tokenizer *t = NULL;
    di_status st = model_tokenizer(model, &t, NULL, 0);
    if (st)
        return st;
    int32_t id;
    switch (which) {
    case DI_TOKEN_BOS: id = di_tokenizer_bos(t); break;
    case DI_TOKEN_EOS: id = di_tokenizer_eos(t); break;
    default: return DI_ERR_INVALID_ARGUMENT;
    }
    if (id < 0)
        return DI_ERR_UNSUPPORTED;
    *token = id;
    return DI_OK;
}

DI_API di_status di_model_token_lookup(const di_model *model, const char *text, size_t text_len,
                                       int32_t *token)
{
    if (!token || (!text && text_len > 0))
        return DI_ERR_INVALID_ARGUMENT;
    *token = -1;
    const di_tokenizer *t = NULL;
    di_status st = model_tokenizer(model, &t, NULL, 0);
    if (st)
        return st;
    int32_t id = text_len > UINT32_MAX ? -1 : di_tok_find(t, text ? text : "", text_len);
    if (id < 0)
        return DI_ERR_TOKEN_RANGE;
    *token = id;
    return DI_OK;
}

DI_API const char *di_model_chat_template(const di_model *model)
{
    if (!model)
        return NULL;
    const di_gguf_kv *kv = di_gguf_find_kv(&model->gguf, "tokenizer.chat_template");
    if (!kv || kv->type != DI_GGUF_STRING)
        return NULL;
    return di_chat_detect(kv->v.str.ptr, (size_t)kv->v.str.len);
}

DI_API di_status di_chat_tokenize(const di_model *model, const char *template_name, const char *const *roles,
                                  const char *const *contents, size_t n_messages, int add_assistant,
                                  uint32_t flags, int32_t *tokens, size_t capacity, size_t *n_tokens,
                                  char *errbuf, size_t errbuf_size)
{
    if (errbuf && errbuf_size > 0)
        errbuf[0] = '\0';
    if (!template_name || !n_tokens || (!tokens && capacity > 0) || (n_messages > 0 && (!roles || !contents)))
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "NULL template_name, n_tokens, tokens (with capacity > 0), or roles or contents "
                        "(with n_messages > 0)");
    *n_tokens = 0;
    if (flags & ~(uint32_t)DI_TOKENIZE_ADD_BOS)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "flags 0x%x: di_chat_tokenize takes DI_TOKENIZE_ADD_BOS only (the template's "
                        "markers are its control tokens, and message text is never parsed for them)",
                        flags);
    const di_tokenizer *t = NULL;
    di_status st = model_tokenizer(model, &t, errbuf, errbuf_size);
    if (st)
        return st;
    char *text = NULL;
    size_t len = 0, n_content = 0;
    di_text_span *content = NULL;
    st = di_chat_render(template_name, roles, contents, n_messages, add_assistant, &text, &len, &content,
                        &n_content, errbuf, errbuf_size);
    di_tok_vec out = {0};
    if (!st)
        st = di_tokenizer_encode_spans(t, text, len, flags | DI_TOKENIZE_PARSE_SPECIAL, content, n_content, &out,
                                       errbuf, errbuf_size);
    if (!st)
        st = give_tokens(&out, "chat", tokens, capacity, n_tokens, errbuf, errbuf_size);
    else
        free(out.v);
    free(text);
    free(content);
    return st;
}
