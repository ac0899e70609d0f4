/*
 * chat_template.h — recognition of a chat template text (internal; the
 * public calls are di_chat_format, in chat_template.c, and
 * di_model_chat_template, in lib/api/tokenize_api.c). The Check
 * suite and the fuzz target call it on raw text.
 */
#ifndef DI_CHAT_TEMPLATE_H
#define DI_CHAT_TEMPLATE_H

#include <stddef.h>

/* The built-in template a tokenizer.chat_template text (Jinja source, or a
 * template name) is recognised as, by llama.cpp's llm_chat_detect_template
 * rules; NULL when llama.cpp would recognise none, or one this library does
 * not build in. text need not be NUL-terminated. */
const char *di_chat_detect(const char *text, size_t len);

#endif /* DI_CHAT_TEMPLATE_H */
