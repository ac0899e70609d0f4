/*
 * cli_json.h — the JSON the detinfer subcommands write (--json), built with
 * jansson, the one JSON library of the project (tools/serve/ uses it too).
 *
 * A report is a json_t tree; these helpers make the values whose rules are
 * the tool's own, and cli_json_emit writes the tree: two-space indent, keys
 * in the order they were set (JSON_PRESERVE_ORDER), reals with 9
 * significant digits, a final newline.
 */
#ifndef CLI_JSON_H
#define CLI_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <detinfer.h>
#include <jansson.h>

#include "cli/cli_digest.h"
#include "cli/cli_options.h"
#include "cli/cli_text.h"

/* Builders that carry a failure along, so a whole tree is built before one
 * check: each takes ownership of value, and when container or value is NULL
 * or the insertion fails, frees both and returns NULL; else container. */
json_t *cli_json_push(json_t *array, json_t *value);
json_t *cli_json_set(json_t *object, const char *key, json_t *value);

/* A string value: NULL gives null; bytes that are not UTF-8 (a token piece
 * may be part of a character) become U+FFFD, so every text can be written.
 * NULL only when out of memory. */
json_t *cli_json_text(const char *s);
json_t *cli_json_textn(const char *s, size_t n);
/* A number; NaN and the infinities (which JSON lacks) give null. */
json_t *cli_json_real(double v);
/* A digest as its 32 lowercase hex digits. */
json_t *cli_json_digest(const di_digest *d);
/* An array of token ids. */
json_t *cli_json_tokens(const int32_t *tokens, size_t n);

/* A request's sampling parameters, from temperature to penalty_window (the
 * caller adds the seed, which it writes its own way). */
json_t *cli_json_sampling(const di_sampling_params *p);

/* Writes root to f and releases it. When root is NULL (building it failed:
 * out of memory) or writing fails, prints "detinfer CMD: cannot write the
 * JSON report" and returns CLI_EXIT_FAIL; else CLI_EXIT_OK. */
int cli_json_emit(const cli_command *cmd, json_t *root, FILE *f);

#endif /* CLI_JSON_H */
