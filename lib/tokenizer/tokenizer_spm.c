/*
 * tokenizer_spm.c — the SentencePiece-style tokenizer (tokenizer.ggml.model
 * "llama"), as llama.cpp's llm_tokenizer_spm_session does it:
 *
 *   1. spaces become U+2581 ("▁"), with one in front when asked;
 *   2. the text starts as one symbol per UTF-8 character;
 *   3. repeatedly, of all adjacent pairs whose concatenation is a token, the
 *      one whose token has the highest score is merged (ties: the leftmost);
 *   4. each final symbol is its token, or else its bytes as byte tokens.
 *
 * Steps 2 and 3 are the merge loop the BPE kind shares (tokenizer_merge.c).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/tokenizer/tokenizer_internal.h"

/* A pair merges when its text is a token; the token's score ranks it. */
static int spm_pair(const di_tokenizer *t, const char *s, const di_tok_symbol *sym, int32_t left,
                    int32_t right, di_bigram *b)
{
    int32_t id = di_tok_find(t, s + sym[left].off, sym[left].n + sym[right].n);
    if (id < 0)
        return 0;
    b->score = t->pieces[id].score;
    return 1;
}

/* The text with every space as U+2581, and one in front when asked. */
static char *escape_spaces(const char *text, size_t len, int prefix, size_t *out_len)
{
    size_t spaces = prefix;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    char *s = malloc(len + 2 * spaces + 1);
    if (!s)
        return NULL;
    size_t n = 0;
    if (prefix) {
        memcpy(s, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            s[n++] = text[i];
        }
    }
    *out_len = n;
    return s;
}

di_status di_spm_encode(const di_tokenizer *t, const char *text, size_t len, int prefix_space,
                        di_tok_vec *out, char *err, size_t err_size)
{
    size_t n;
    char *s = escape_spaces(text, len, prefix_space, &n);
    di_tok_symbol *sym = s ? malloc((n ? n : 1) * sizeof *sym) : NULL;
    di_bigram_heap h = {0};
    di_status st = DI_OK;
    if (!sym)
        goto oom;
    if (n > INT32_MAX)
        goto oom;

    const int32_t count = di_tok_merge(t, s, n, sym, &h, spm_pair);
    if (count < 0)
        goto oom;

    for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = sym[i].next) {
        int32_t id = di_tok_find(t, s + sym[i].off, sym[i].n);
        if (id >= 0) {
            if (!di_tok_vec_push(out, id))
                goto oom;
            continue;
        }
        /* not a token: byte fallback, one token per byte */
        for (uint32_t k = 0; k < sym[i].n; k++) {
            unsigned char byte = (unsigned char)s[sym[i].off + k];
            if (t->byte_token[byte] < 0) {
                st = di_error(err, err_size, DI_ERR_UNSUPPORTED,
                              "the vocabulary has no token for byte 0x%02X (no <0x%02X> byte token)",
                              byte, byte);
                goto done;
            }
            if (!di_tok_vec_push(out, t->byte_token[byte]))
                goto oom;
        }
    }
    goto done;
oom:
    st = di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory tokenizing %zu bytes", len);
done:
    free(h.v);
    free(sym);
    free(s);
    return st;
}
