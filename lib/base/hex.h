/*
 * hex.h — the value of a hexadecimal digit, for the parsers that read
 * escapes (byte-token names, GBNF, JSON, regular expressions).
 */
#ifndef DI_HEX_H
#define DI_HEX_H

/* 0..15 for 0-9, a-f, A-F; -1 for any other character. */
static inline int di_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif /* DI_HEX_H */
