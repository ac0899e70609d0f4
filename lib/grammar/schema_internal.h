/*
 * schema_internal.h — what the files of the JSON-schema converter share:
 *   schema_convert.c  the driver: keywords, types, objects, arrays, anyOf, $ref
 *   schema_string.c   strings: lengths, formats, patterns (a regex subset)
 *   schema_number.c   integers and numbers within minimum/maximum
 *   schema_emit.c     the GBNF text: rule names, literals, JSON-encoded text
 * The converter writes GBNF (docs/STRUCTURED.md, "JSON Schema"), which
 * gbnf_parse.c then compiles, so a schema's grammar can be read and given
 * to another engine.
 */
#ifndef DI_SCHEMA_INTERNAL_H
#define DI_SCHEMA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/grammar/json_dom.h"

#define SC_MAX_DEPTH 256u   /* schemas inside schemas, $ref targets included */
#define SC_MAX_PATH 1024u   /* bytes of the JSON pointer in a message */
#define SC_MAX_OUTPUT (1u << 20) /* bytes of GBNF */
#define SC_MAX_RULES 4096u       /* rules of GBNF */
#define SC_NAME_SLOTS 16384u     /* the name table: over twice the rules and shared names */

/* A growable text. */
typedef struct sc_text {
    char *p;
    size_t n, cap;
} sc_text;

/* A rule given to a $ref target (converted once, so recursion ends). */
typedef struct sc_ref {
    const di_json *target;
    char *name;
} sc_ref;

typedef struct schema_conv {
    const di_json *root;
    sc_text out;             /* the rules written so far */
    char **names;            /* every rule name given, for uniqueness */
    size_t n_names, cap_names;
    uint32_t *name_table;    /* open addressing: index + 1 into names (SC_NAME_SLOTS, made on first use) */
    sc_ref *refs;
    size_t n_refs, cap_refs;
    uint32_t depth;
    char path[SC_MAX_PATH];  /* JSON pointer of the node being converted */
    size_t path_len;
    int failed;              /* a di_status, 0 while none */
    char err[512];
} schema_conv;

/* ---- schema_emit.c --------------------------------------------------------- */
int sc_put(schema_conv *c, sc_text *t, const char *s, size_t n);
int sc_puts(schema_conv *c, sc_text *t, const char *s);
int sc_printf(schema_conv *c, sc_text *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A GBNF literal "..." of n bytes of UTF-8. */
int sc_literal(schema_conv *c, sc_text *t, const char *s, size_t n);
/* A GBNF literal of the JSON text of value v (compact: no spaces, keys in
 * their order, strings escaped as sc_json_string). */
int sc_json_literal(schema_conv *c, sc_text *t, const di_json *v);
/* JSON text of a string: " and \ escaped, \b \f \n \r \t, other control
 * characters as \u00XX, everything else as it is. */
int sc_json_string(schema_conv *c, sc_text *t, const char *s, size_t n);
/* A new rule name, unique, made of hint's letters, digits and dashes
 * (owned by c); NULL on failure. */
const char *sc_name(schema_conv *c, const char *hint);
/* Writes `name ::= body`; 1, or 0 on failure. */
int sc_rule(schema_conv *c, const char *name, const sc_text *body);
/* The shared rule `name` (string, char, value, ...), written on first use;
 * its name, or NULL on failure. */
const char *sc_shared(schema_conv *c, const char *name);

/* Errors: 0, with c->failed and c->err set (the first error is kept);
 * sc_fail prefixes nothing, sc_fail_at appends " at PATH". */
int sc_fail(schema_conv *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int sc_fail_at(schema_conv *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The non-negative integer keyword `key` of s into *out: 1 (absent: 1,
 * *out untouched), or 0 with the error set. */
int sc_count(schema_conv *c, const di_json *s, const char *key, uint64_t *out);
/* The JSON pointer: push a key or an index (~ and / escaped), pop back. */
size_t sc_path_push(schema_conv *c, const char *key);
size_t sc_path_push_index(schema_conv *c, size_t index);
void sc_path_pop(schema_conv *c, size_t saved);

/* ---- schema_convert.c ---------------------------------------------------- */
/* The rule of schema node s (hint: its name's stem); NULL on failure. */
const char *sc_schema(schema_conv *c, const di_json *s, const char *hint);

/* ---- schema_string.c ----------------------------------------------------- */
/* The rule of a string node (type string, or a type list's string): lengths,
 * format, pattern. */
const char *sc_string(schema_conv *c, const di_json *s, const char *hint);

/* ---- schema_number.c ----------------------------------------------------- */
/* The rule of an integer node and of a number node (minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum). */
const char *sc_integer(schema_conv *c, const di_json *s, const char *hint);
const char *sc_number(schema_conv *c, const di_json *s, const char *hint);

#endif /* DI_SCHEMA_INTERNAL_H */
