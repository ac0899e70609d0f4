/*
 * json_quote.c — a text as a JSON string (json_quote.h).
 */
#include "lib/base/json_quote.h"

size_t di_json_quote(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    out[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const char short_form = c == '"' ? '"' : c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r'
                                : c == '\t' ? 't' : c == '\b' ? 'b' : c == '\f' ? 'f' : 0;
        if (short_form) {
            out[k++] = '\\';
            out[k++] = short_form;
        } else if (c < 0x20) {
            out[k++] = '\\', out[k++] = 'u', out[k++] = '0', out[k++] = '0';
            out[k++] = hex[c >> 4], out[k++] = hex[c & 15];
        } else {
            out[k++] = (char)c;
        }
    }
    out[k++] = '"';
    return k;
}
