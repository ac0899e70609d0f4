/*
 * api_pending.c — DETINFER_1.2 calls whose implementation is still being
 * written: each answers DI_ERR_UNSUPPORTED. Every function here moves to its
 * own file (sampling.c, tokenizer, chat_template.c) as it is implemented, and
 * this file goes away.
 */
#include <stdio.h>

#include "detinfer.h"
#include "errors.h"

DI_API di_status di_model_token_lookup(const di_model *model, const char *text, size_t text_len,
                                       int32_t *token)
{
    (void)model, (void)text, (void)text_len, (void)token;
    return DI_ERR_UNSUPPORTED;
}

DI_API di_status di_model_meta_string(const di_model *model, const char *key, char *text,
                                      size_t capacity, size_t *text_len)
{
    (void)model, (void)key, (void)text, (void)capacity, (void)text_len;
    return DI_ERR_UNSUPPORTED;
}

DI_API const char *di_model_chat_template(const di_model *model)
{
    (void)model;
    return NULL;
}

DI_API di_status di_chat_format(const char *template_name, const char *const *roles,
                                const char *const *contents, size_t n_messages, int add_assistant,
                                char *text, size_t capacity, size_t *text_len, char *errbuf,
                                size_t errbuf_size)
{
    (void)template_name, (void)roles, (void)contents, (void)n_messages, (void)add_assistant;
    (void)text, (void)capacity, (void)text_len;
    return di_error(errbuf, errbuf_size, DI_ERR_UNSUPPORTED, "di_chat_format is not implemented yet");
}
