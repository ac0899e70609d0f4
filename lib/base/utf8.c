/*
 * utf8.c — UTF-8 lengths, strict validation and the encoder (utf8.h).
 */
#include "lib/base/utf8.h"

#include <stdint.h>

size_t di_utf8_len(unsigned char lead)
{
    static const unsigned char by_top_bits[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return by_top_bits[lead >> 4];
}

size_t di_utf8_lead_len(unsigned char b)
{
    return b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
}

size_t di_utf8_encode(unsigned long cpt, char out[4])
{
    if (cpt < 0x80) {
        out[0] = (char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (char)(0xc0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3f));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (char)(0xe0 | (cpt >> 12));
        out[1] = (char)(0x80 | ((cpt >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cpt & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | ((cpt >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cpt >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cpt >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cpt & 0x3f));
    return 4;
}

int di_utf8_valid(const char *s, size_t n, size_t *bad_offset)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        uint32_t cpt, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cpt = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cpt = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cpt = c & 0x07, min = 0x10000;
        } else {
            *bad_offset = i; /* a stray continuation byte, or 0xF8..0xFF */
            return 0;
        }
        if (len > n - i) {
            *bad_offset = i;
            return 0;
        }
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) {
                *bad_offset = i;
                return 0;
            }
            cpt = (cpt << 6) | (p[i + k] & 0x3F);
        }
        if (cpt < min || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) {
            *bad_offset = i;
            return 0;
        }
        i += len;
    }
    return 1;
}

