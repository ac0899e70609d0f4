/*
 * chat_template.h — recognition of a chat template text and the formatted
 * text with its message spans (internal; the public calls are
 * di_chat_format and di_chat_turn_end, in lib/api/chat_api.c, and
 * di_model_chat_template and di_chat_tokenize, in lib/api/tokenize_api.c). The Check
 * suite and the fuzz target call it on raw text.
 */
#ifndef DI_CHAT_TEMPLATE_H
#define DI_CHAT_TEMPLATE_H

#include <stddef.h>

#include "lib/tokenizer/tokenizer.h"

/* The built-in template a tokenizer.chat_template text (Jinja source, or a
 * template name) is recognised as, by llama.cpp's llm_chat_detect_template
 * rules; NULL when llama.cpp would recognise none, or one this library does
 * not build in. text need not be NUL-terminated. */
const char *di_chat_detect(const char *text, size_t len);

/* di_chat_format's text in a malloc'd buffer (NUL-terminated, *text_len
 * bytes), with the malloc'd spans of it that are message contents, in
 * order (di_chat_tokenize parses no control token in them). On failure
 * both are NULL; template_name is not NULL. */
di_status di_chat_render(const char *template_name, const char *const *roles, const char *const *contents,
                         size_t n_messages, int add_assistant, char **text, size_t *text_len,
                         di_text_span **content, size_t *n_content, char *errbuf, size_t errbuf_size);

/* The end-of-turn marker of the built-in template template_name (di_chat_turn_end's
 * answer); NULL for an unknown name or NULL. */
const char *di_chat_template_turn_end(const char *template_name);

#endif /* DI_CHAT_TEMPLATE_H */
