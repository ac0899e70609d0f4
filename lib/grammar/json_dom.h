/*
 * json_dom.h — a small strict JSON parser (RFC 8259) for the JSON schemas
 * the library converts: untrusted text in, a tree out, with bounded depth
 * and size and errors that name a line and column.
 */
#ifndef DI_JSON_DOM_H
#define DI_JSON_DOM_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"

#define DI_JSON_MAX_DEPTH 64u         /* arrays and objects inside each other */
#define DI_JSON_MAX_TEXT (1u << 20)   /* bytes */

typedef enum di_json_kind {
    DI_JSON_NULL, DI_JSON_FALSE, DI_JSON_TRUE, DI_JSON_NUMBER, DI_JSON_STRING, DI_JSON_ARRAY, DI_JSON_OBJECT
} di_json_kind;

typedef struct di_json di_json;
struct di_json {
    di_json_kind kind;
    char *str;           /* STRING: the decoded UTF-8 (len bytes, NUL-terminated, may hold NUL);
                            NUMBER: the number's text as written */
    size_t len;
    double num;          /* NUMBER */
    int is_integer;      /* NUMBER written without fraction or exponent, within +-2^53 */
    int64_t integer;     /* that integer */
    di_json **items;     /* ARRAY: elements; OBJECT: values */
    char **keys;         /* OBJECT: decoded keys (NUL-terminated) */
    size_t *key_lens;
    size_t n;
};

/* Parses len bytes; duplicate keys in an object are an error. Errors:
 * DI_ERR_GRAMMAR with "line L, column C: what", DI_ERR_OUT_OF_MEMORY. */
di_status di_json_parse(const char *text, size_t len, di_json **out, char *err, size_t err_size);
void di_json_free(di_json *v);

/* The value of key in object v, or NULL (also when v is not an object). */
const di_json *di_json_get(const di_json *v, const char *key);
/* 1 when the two values are equal as JSON (numbers by value, objects
 * regardless of key order). */
int di_json_equal(const di_json *a, const di_json *b);

#endif /* DI_JSON_DOM_H */
