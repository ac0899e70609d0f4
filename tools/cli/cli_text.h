/*
 * cli_text.h — text for a terminal: bounded copies, UTF-8 validation,
 * quoting with escapes.
 */
#ifndef CLI_TEXT_H
#define CLI_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Copies src into dst[n], cut to fit; dst is always NUL-terminated. */
void cli_copy(char *dst, size_t n, const char *src);
/* Writes s (n bytes) between double quotes with C-style escapes for
 * control characters, quotes, backslashes and bytes that are not UTF-8. */
void cli_print_quoted(FILE *f, const char *s, size_t n);
/* The length of the UTF-8 sequence a lead byte begins (1 to 4); 0 for a
 * byte no valid sequence begins with (a continuation byte, C0, C1, F5 to FF). */
size_t cli_utf8_lead_length(unsigned char lead);
/* Length of the valid UTF-8 sequence at s (n >= 1 bytes); 0 when it is not
 * UTF-8 (cut short, overlong forms, surrogates and values past U+10FFFF are not). */
size_t cli_utf8_length(const unsigned char *s, size_t n);
/* The whole of a file ("-": standard input) in a malloc'd buffer, NUL
 * terminated, *len bytes (it may hold NUL bytes); NULL when it cannot be
 * read. */
char *cli_read_file(const char *path, size_t *len);

#endif /* CLI_TEXT_H */
