/*
 * tokenizer_load.c — a tokenizer from a GGUF file, assembled from the parts
 * below it: the vocabulary (tokenizer_vocab.c) and, for BPE, the merges and
 * the pre-tokenizer (tokenizer_bpe.c). Sitting above both keeps the
 * vocabulary free of any encoder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/tokenizer/tokenizer_internal.h"

static void set_none(di_tokenizer *t, const char *why, const char *name)
{
    t->kind = DI_TOK_KIND_NONE;
    snprintf(t->reason, sizeof t->reason, why, name);
}

/* llama.cpp's order: the pieces and the kind's defaults, then the BPE
 * pre-tokenizer's defaults, then the file's keys over both. */
static di_status load_kind(di_tokenizer *t, const di_gguf *g, uint32_t n_vocab, char *err, size_t es)
{
    di_status st = di_vocab_load(t, g, n_vocab, err, es);
    if (st)
        return st;
    if (t->kind == DI_TOK_KIND_BPE) {
        if ((st = di_bpe_load(t, g, err, es)))
            return st;
        if (t->kind == DI_TOK_KIND_NONE)
            return DI_OK; /* an unknown pre-tokenizer: reason set */
    }
    return di_vocab_finish(t, g, n_vocab, err, es);
}

static void free_parts(di_tokenizer *t)
{
    di_bpe_free(t);
    di_vocab_free(t);
}

di_status di_tokenizer_load(const di_gguf *g, uint32_t n_vocab, di_tokenizer **out, char *err,
                            size_t err_size)
{
    if (!g || !out)
        return di_error(err, err_size, DI_ERR_INVALID_ARGUMENT, "di_tokenizer_load: NULL argument");
    *out = NULL;
    di_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the tokenizer");
    t->bos = t->eos = -1;
    for (int b = 0; b < 256; b++)
        t->byte_token[b] = -1;

    const di_gguf_kv *kv = di_gguf_find_kv(g, "tokenizer.ggml.model");
    di_status st = DI_OK;
    if (!kv) {
        set_none(t, "the model file has no tokenizer (no %s)", "tokenizer.ggml.model");
    } else if (kv->type != DI_GGUF_STRING) {
        st = di_error(err, err_size, DI_ERR_MODEL, "tokenizer.ggml.model must be a string (has type %u)",
                      kv->type);
    } else {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(kv->v.str.len < 63 ? kv->v.str.len : 63),
                 kv->v.str.ptr);
        if (strcmp(name, "llama") == 0 && kv->v.str.len == 5) {
            t->kind = DI_TOK_KIND_SPM;
        } else if (strcmp(name, "gpt2") == 0 && kv->v.str.len == 4) {
            t->kind = DI_TOK_KIND_BPE;
        } else if (strcmp(name, "no_vocab") == 0 || strcmp(name, "none") == 0) {
            set_none(t, "the model file says it has no vocabulary (tokenizer.ggml.model '%s')", name);
        } else {
            set_none(t, "tokenizer kind '%s' is not supported (supported: llama, gpt2)", name);
        }
        if (t->kind != DI_TOK_KIND_NONE)
            st = load_kind(t, g, n_vocab, err, err_size);
    }
    if (st) {
        di_tokenizer_free(t);
        return st;
    }
    if (t->kind == DI_TOK_KIND_NONE)
        free_parts(t); /* an unknown pre-tokenizer: only the reason stays */
    *out = t;
    return DI_OK;
}

void di_tokenizer_free(di_tokenizer *t)
{
    if (!t)
        return;
    free_parts(t);
    free(t);
}
