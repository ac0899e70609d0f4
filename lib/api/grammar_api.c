/*
 * grammar_api.c — di_grammar_from_gbnf, di_grammar_from_json_schema,
 * di_grammar_free, di_grammar_gbnf, di_grammar_digest: the public handle
 * over lib/grammar's parser and schema converter.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/api/digest.h"
#include "lib/base/errors.h"
#include "lib/grammar/gbnf_parse.h"
#include "lib/api/grammar_api.h"
#include "lib/grammar/schema_convert.h"

/* Takes over gbnf (malloc'd, NUL-terminated) and compiles it. */
static di_status make(char *gbnf, size_t len, di_grammar **out, char *errbuf, size_t errbuf_size)
{
    di_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        free(gbnf);
        return di_error(errbuf, errbuf_size, DI_ERR_OUT_OF_MEMORY, "out of memory for a grammar");
    }
    g->gbnf = gbnf;
    g->gbnf_len = len;
    g->refs = 1;
    di_status st = di_gbnf_parse(gbnf, len, &g->gram, errbuf, errbuf_size);
    if (st) {
        free(g->gbnf);
        free(g);
        return st;
    }
    di_digest_bytes(gbnf, len, &g->digest);
    *out = g;
    return DI_OK;
}

static di_status check_args(const char *text, size_t len, uint32_t flags, di_grammar **out, char *errbuf,
                            size_t errbuf_size)
{
    if (errbuf && errbuf_size > 0)
        errbuf[0] = '\0';
    if (!out)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!text && len > 0)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "the text is NULL");
    if (flags)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "unknown flags 0x%x", flags);
    return DI_OK;
}

DI_API di_status di_grammar_from_gbnf(const char *text, size_t text_len, uint32_t flags, di_grammar **out,
                                      char *errbuf, size_t errbuf_size)
{
    di_status st = check_args(text, text_len, flags, out, errbuf, errbuf_size);
    if (st)
        return st;
    if (text_len > DI_GRAM_MAX_TEXT)
        return di_error(errbuf, errbuf_size, DI_ERR_GRAMMAR, "the grammar text has %zu bytes; at most %u",
                        text_len, DI_GRAM_MAX_TEXT);
    char *copy = malloc(text_len + 1);
    if (!copy)
        return di_error(errbuf, errbuf_size, DI_ERR_OUT_OF_MEMORY, "out of memory for a grammar");
    if (text_len > 0)
        memcpy(copy, text, text_len);
    copy[text_len] = '\0';
    return make(copy, text_len, out, errbuf, errbuf_size);
}

DI_API di_status di_grammar_from_json_schema(const char *schema, size_t schema_len, uint32_t flags,
                                             di_grammar **out, char *errbuf, size_t errbuf_size)
{
    di_status st = check_args(schema, schema_len, flags, out, errbuf, errbuf_size);
    if (st)
        return st;
    char *gbnf;
    size_t len;
    if ((st = di_schema_to_gbnf(schema ? schema : "", schema_len, &gbnf, &len, errbuf, errbuf_size)))
        return st;
    return make(gbnf, len, out, errbuf, errbuf_size);
}

void di_grammar_retain(const di_grammar *g)
{
    __atomic_fetch_add(&((di_grammar *)g)->refs, 1, __ATOMIC_RELAXED);
}

DI_API void di_grammar_free(di_grammar *g)
{
    if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    di_gram_free(g->gram);
    free(g->gbnf);
    free(g);
}

DI_API di_status di_grammar_gbnf(const di_grammar *g, char *text, size_t capacity, size_t *text_len)
{
    if (!g || !text_len || (!text && capacity > 0))
        return DI_ERR_INVALID_ARGUMENT;
    *text_len = g->gbnf_len;
    if (capacity <= g->gbnf_len)
        return DI_ERR_BUFFER_TOO_SMALL;
    memcpy(text, g->gbnf, g->gbnf_len + 1);
    return DI_OK;
}

DI_API di_status di_grammar_digest(const di_grammar *g, di_digest *digest)
{
    if (!g || !digest)
        return DI_ERR_INVALID_ARGUMENT;
    *digest = g->digest;
    return DI_OK;
}
