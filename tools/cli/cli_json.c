/*
 * cli_json.c — jansson glue for the tool's JSON reports (see cli_json.h).
 */
#include "cli/cli_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

json_t *cli_json_push(json_t *array, json_t *value)
{
    if (array && value && json_array_append_new(array, value) == 0)
        return array;
    if (array && value) /* append_new released value */
        value = NULL;
    json_decref(array);
    json_decref(value);
    return NULL;
}

json_t *cli_json_set(json_t *object, const char *key, json_t *value)
{
    if (object && value && json_object_set_new(object, key, value) == 0)
        return object;
    if (object && value) /* set_new released value */
        value = NULL;
    json_decref(object);
    json_decref(value);
    return NULL;
}

json_t *cli_json_textn(const char *s, size_t n)
{
    if (!s)
        return json_null();
    json_t *v = json_stringn(s, n);
    if (v)
        return v; /* valid UTF-8: taken as it is */
    /* Not UTF-8: each byte outside a valid sequence becomes U+FFFD (3 bytes). */
    char *clean = malloc(3 * n + 1);
    size_t at = 0;
    if (!clean)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t len = cli_utf8_length((const unsigned char *)s + i, n - i);
        if (len == 0) {
            memcpy(clean + at, "\xef\xbf\xbd", 3);
            at += 3;
            i++;
        } else {
            memcpy(clean + at, s + i, len);
            at += len;
            i += len;
        }
    }
    v = json_stringn(clean, at);
    free(clean);
    return v;
}

json_t *cli_json_text(const char *s)
{
    return cli_json_textn(s, s ? strlen(s) : 0);
}

json_t *cli_json_real(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *cli_json_digest(const di_digest *d)
{
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(d, hex);
    return json_string(hex);
}

json_t *cli_json_tokens(const int32_t *tokens, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        a = cli_json_push(a, json_integer(tokens[i]));
    return a;
}

json_t *cli_json_sampling(const di_sampling_params *p)
{
    return json_pack("{s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:I}", "temperature", cli_json_real(p->temperature),
                     "top_k", (json_int_t)p->top_k, "top_p", cli_json_real(p->top_p), "min_p",
                     cli_json_real(p->min_p), "repetition_penalty", cli_json_real(p->repetition_penalty),
                     "presence_penalty", cli_json_real(p->presence_penalty), "frequency_penalty",
                     cli_json_real(p->frequency_penalty), "penalty_window", (json_int_t)p->penalty_window);
}

int cli_json_emit(const cli_command *cmd, json_t *root, FILE *f)
{
    const size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9);
    int ok = root && json_dumpf(root, f, flags) == 0 && fputc('\n', f) != EOF && fflush(f) == 0;
    json_decref(root);
    if (!ok)
        fprintf(stderr, "detinfer %s: cannot write the JSON report%s\n", cmd->name,
                root ? "" : " (out of memory)");
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
