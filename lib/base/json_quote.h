/*
 * json_quote.h — a text as a JSON string, the one way the library writes
 * it: as Python's json.dumps(ensure_ascii=False) does (the `tojson` of the
 * chat templates' reference renderings, and the literals of the grammars
 * made from JSON schemas).
 */
#ifndef DI_JSON_QUOTE_H
#define DI_JSON_QUOTE_H

#include <stddef.h>

/* The most bytes di_json_quote writes for n bytes of text. */
#define DI_JSON_QUOTED_MAX(n) (2 + 6 * (size_t)(n))

/* Writes s[0..n) as a JSON string to out (DI_JSON_QUOTED_MAX(n) bytes):
 * the quotes, '"' and '\\' escaped, the control characters as \b \f \n \r
 * \t or \u00xx (lower case), every other byte as it is; returns the bytes
 * written. No terminating zero. */
size_t di_json_quote(const char *s, size_t n, char *out);

#endif /* DI_JSON_QUOTE_H */
