/*
 * chat_api.c — the public chat-template calls that need no model
 * (di_chat_format, di_chat_turn_end): argument checks and the caller's buffer
 * around the tokenizer layer's templates (lib/tokenizer/chat_template.h).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/tokenizer/chat_template.h"

DI_API di_status di_chat_format(const char *template_name, const char *const *roles,
                                const char *const *contents, size_t n_messages, int add_assistant,
                                char *text, size_t capacity, size_t *text_len, char *errbuf,
                                size_t errbuf_size)
{
    if (errbuf && errbuf_size > 0)
        errbuf[0] = '\0';
    if (!template_name || !text_len || (!text && capacity > 0) ||
        (n_messages > 0 && (!roles || !contents)))
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "NULL template_name, text_len, text (with capacity > 0), or roles or "
                        "contents (with n_messages > 0)");
    *text_len = 0;
    if (capacity > 0)
        text[0] = '\0';
    char *out = NULL;
    size_t n = 0, n_content = 0;
    di_text_span *content = NULL;
    di_status st = di_chat_render(template_name, roles, contents, n_messages, add_assistant, &out, &n,
                                  &content, &n_content, errbuf, errbuf_size);
    if (!st) {
        *text_len = n;
        if (capacity <= n)
            st = di_error(errbuf, errbuf_size, DI_ERR_BUFFER_TOO_SMALL,
                          "the prompt needs %zu bytes and its NUL; the buffer has %zu", n, capacity);
        else
            memcpy(text, out, n + 1);
    }
    free(out);
    free(content);
    return st;
}

DI_API const char *di_chat_turn_end(const char *template_name)
{
    return di_chat_template_turn_end(template_name);
}
