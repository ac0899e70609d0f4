/*
 * utf8.h — UTF-8 checks the tokenizer and the chat templates share.
 */
#ifndef DI_UTF8_H
#define DI_UTF8_H

#include <stddef.h>

/* Length of the UTF-8 sequence a lead byte starts (llama.cpp's rule: by the
 * top four bits, 1 for a continuation byte). Input is validated first. */
size_t di_utf8_len(unsigned char lead);

/* Checks strict UTF-8 (no overlong forms, surrogates, values past U+10FFFF
 * or truncated sequences); on failure *bad_offset is the offending byte. */
int di_utf8_valid(const char *s, size_t n, size_t *bad_offset);

#endif /* DI_UTF8_H */
