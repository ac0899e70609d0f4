/*
 * utf8.h — UTF-8 for the whole library, in one place: the lengths a lead
 * byte starts (two rules, each named for its use), strict validation and
 * the encoder.
 */
#ifndef DI_UTF8_H
#define DI_UTF8_H

#include <stddef.h>

/* Length of the UTF-8 sequence a lead byte starts (llama.cpp's rule: by the
 * top four bits, 1 for a continuation byte). Input is validated first. */
size_t di_utf8_len(unsigned char lead);

/* Length of the sequence a byte may start in strict UTF-8: 1 for ASCII, 2,
 * 3 or 4 for a lead byte that some valid sequence starts with (C2..DF,
 * E0..EF, F0..F4), 0 for any other byte (a continuation byte, C0, C1,
 * F5..FF): for reading bytes that nothing has validated. */
size_t di_utf8_lead_len(unsigned char b);

/* Writes code point cpt (at most U+10FFFF) as 1 to 4 bytes to out; returns
 * their count. */
size_t di_utf8_encode(unsigned long cpt, char out[4]);

/* Checks strict UTF-8 (no overlong forms, surrogates, values past U+10FFFF
 * or truncated sequences); on failure *bad_offset is the offending byte. */
int di_utf8_valid(const char *s, size_t n, size_t *bad_offset);

#endif /* DI_UTF8_H */
