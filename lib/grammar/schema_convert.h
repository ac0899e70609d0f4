/*
 * schema_convert.h — a JSON Schema (the subset of docs/STRUCTURED.md, close
 * to what OpenAI's strict mode accepts) into GBNF text, which gbnf_parse.c
 * compiles. Anything outside the subset is refused by name and place,
 * never ignored.
 */
#ifndef DI_SCHEMA_CONVERT_H
#define DI_SCHEMA_CONVERT_H

#include <stddef.h>

#include "detinfer.h"

/* Converts len bytes of JSON schema text; *gbnf (malloc'd, NUL-terminated,
 * *gbnf_len bytes) is the grammar of the JSON texts the schema allows, with
 * no whitespace. Errors: DI_ERR_GRAMMAR (malformed JSON, with line and
 * column; a malformed schema, with the JSON pointer of the node),
 * DI_ERR_UNSUPPORTED ("unsupported keyword X at /path"),
 * DI_ERR_OUT_OF_MEMORY. */
di_status di_schema_to_gbnf(const char *text, size_t len, char **gbnf, size_t *gbnf_len, char *err,
                            size_t err_size);

#endif /* DI_SCHEMA_CONVERT_H */
