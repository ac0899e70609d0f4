/*
 * gbnf_parse.h — GBNF, llama.cpp's grammar text, into a compiled grammar
 * (gram_ir.h). docs/STRUCTURED.md describes the format.
 */
#ifndef DI_GBNF_PARSE_H
#define DI_GBNF_PARSE_H

#include <stddef.h>

#include "lib/grammar/gram_ir.h"

/* Parses len bytes of GBNF. Errors: DI_ERR_GRAMMAR with "line L, column C:
 * what" (columns count characters from 1), DI_ERR_OUT_OF_MEMORY. */
di_status di_gbnf_parse(const char *text, size_t len, di_gram **out, char *err, size_t err_size);

#endif /* DI_GBNF_PARSE_H */
