/*
 * cli_text.c — text for a terminal: bounded copies, UTF-8 validation and
 * quoting with escapes (see cli_text.h).
 */
#include "cli/cli_text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void cli_copy(char *dst, size_t n, const char *src)
{
    if (n == 0)
        return;
    size_t len = strlen(src);
    len = len < n - 1 ? len : n - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

size_t cli_utf8_lead_length(unsigned char lead)
{
    return lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3
         : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
}

size_t cli_utf8_length(const unsigned char *s, size_t n)
{
    size_t len = cli_utf8_lead_length(s[0]);
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (len == 1)
        return 1;
    uint32_t cp = len == 2 ? (s[0] & 0x1fu) : len == 3 ? (s[0] & 0x0fu) : (s[0] & 0x07u);
    for (size_t i = 1; i < len; i++)
        cp = cp << 6 | (s[i] & 0x3fu);
    /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* C-style escapes for a terminal. */
void cli_print_quoted(FILE *f, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t len = cli_utf8_length(u + i, n - i);
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\x%02x", c);
        } else if (len == 0) {
            fprintf(f, "\\x%02x", c); /* not UTF-8: the byte's value */
            len = 1;
        } else {
            fwrite(u + i, 1, len, f);
        }
        i += len ? len : 1;
    }
    fputc('"', f);
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return NULL;
    char *text = NULL, buf[65536];
    size_t cap = 0, n;
    *len = 0;
    int ok = 1;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (*len + n + 1 > cap) {
            char *p = realloc(text, cap = (*len + n + 1) * 2);
            if (!p)
                ok = 0;
            else
                text = p;
        }
        if (ok) {
            memcpy(text + *len, buf, n);
            *len += n;
        }
    }
    ok = ok && !ferror(f);
    if (f != stdin)
        fclose(f);
    if (ok && !text)
        text = calloc(1, 1);
    if (!ok || !text) {
        free(text);
        return NULL;
    }
    text[*len] = '\0';
    return text;
}
