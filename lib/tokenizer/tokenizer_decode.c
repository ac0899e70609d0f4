/*
 * tokenizer_decode.c — token ids to text, as llama.cpp's
 * llama_detokenize(remove_special=false, unparse_special=false) gives it,
 * and the text of one token (its token_to_piece).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"
#include "lib/tokenizer/tokenizer_internal.h"

typedef struct text_buf {
    char *p;
    size_t n, cap;
} text_buf;

static int buf_put(text_buf *b, const char *s, size_t n)
{
    if (!DI_GROW(b->p, b->n, b->cap, n, 64))
        return 0;
    if (n > 0)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    return 1;
}

/* The text of one token (llama.cpp's token_to_piece with special=false):
 * control and unknown tokens give nothing, user-defined tokens their text,
 * byte tokens their byte, normal tokens their text with U+2581 as a space
 * (SPM) or through the GPT-2 byte mapping (BPE). lstrip drops one leading
 * space of the result. */
static int append_piece(const di_tokenizer *t, int32_t id, int lstrip, text_buf *b)
{
    const di_tok_piece *p = &t->pieces[id];
    size_t start = b->n;
    if (p->attr & (DI_TOK_CONTROL | DI_TOK_UNKNOWN)) {
        return 1;
    } else if (p->attr & DI_TOK_USER_DEFINED) {
        if (!buf_put(b, p->text, p->len))
            return 0;
    } else if (p->attr & DI_TOK_NORMAL) {
        if (t->kind == DI_TOK_KIND_BPE) {
            if (!di_bpe_decode_piece(p->text, p->len, &b->p, &b->n, &b->cap))
                return 0;
        } else {
            for (uint32_t i = 0; i < p->len;) {
                int marker = p->len - i >= 3 && memcmp(p->text + i, "\xe2\x96\x81", 3) == 0;
                if (!buf_put(b, marker ? " " : p->text + i, 1))
                    return 0;
                i += marker ? 3 : 1;
            }
        }
    } else if (p->attr & DI_TOK_BYTE) {
        if (!buf_put(b, (const char *)&p->byte, 1))
            return 0;
    }
    if (lstrip && b->n > start && b->p[start] == ' ') {
        memmove(b->p + start, b->p + start + 1, b->n - start - 1);
        b->n--;
    }
    return 1;
}

/* llama.cpp's clean_up_tokenization_spaces, three passes in place over the
 * decoded bytes, kept index for index so that its edge cases agree. */
static size_t clean_spaces(char *text, size_t total)
{
    size_t total1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total1; ++i) { /* " ?", " !", " .", " ," */
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        text[total++] = x;
    }
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; ++i) { /* " ' " */
        char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; ++i) { /* " 's", " 'm", " 're", " 've" */
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--;
            else if (i + 2 < total3 && ((x1 == 'r' && text[i + 2] == 'e') ||
                                        (x1 == 'v' && text[i + 2] == 'e')))
                total--;
        }
        text[total++] = x;
    }
    return total;
}

static di_status check_ids(const di_tokenizer *t, const int32_t *tokens, size_t n, char *err,
                           size_t es)
{
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= t->n_vocab)
            return di_error(err, es, DI_ERR_TOKEN_RANGE,
                            "token %d at position %zu is outside the vocabulary [0, %u)", tokens[i], i,
                            t->n_vocab);
    return DI_OK;
}

di_status di_tokenizer_decode(const di_tokenizer *t, const int32_t *tokens, size_t n_tokens,
                              char **text, size_t *len, char *err, size_t err_size)
{
    *text = NULL;
    *len = 0;
    if (t->kind == DI_TOK_KIND_NONE)
        return di_error(err, err_size, DI_ERR_UNSUPPORTED, "%s", t->reason);
    di_status st = check_ids(t, tokens, n_tokens, err, err_size);
    if (st)
        return st;
    text_buf b = {0};
    /* the space the encoder put in front goes again (first token only) */
    int lstrip = t->add_space_prefix;
    for (size_t i = 0; i < n_tokens; i++) {
        if (!append_piece(t, tokens[i], lstrip, &b))
            goto oom;
        lstrip = 0;
    }
    if (t->clean_spaces)
        b.n = clean_spaces(b.p, b.n);
    if (!DI_GROW(b.p, b.n, b.cap, 1, 64))
        goto oom;
    b.p[b.n] = '\0';
    *text = b.p;
    *len = b.n;
    return DI_OK;
oom:
    free(b.p);
    return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory decoding %zu tokens",
                    n_tokens);
}

di_status di_tokenizer_piece(const di_tokenizer *t, int32_t token, char **text, size_t *len,
                             char *err, size_t err_size)
{
    *text = NULL;
    *len = 0;
    if (t->kind == DI_TOK_KIND_NONE)
        return di_error(err, err_size, DI_ERR_UNSUPPORTED, "%s", t->reason);
    di_status st = check_ids(t, &token, 1, err, err_size);
    if (st)
        return st;
    text_buf b = {0};
    if (!append_piece(t, token, 0, &b) || !DI_GROW(b.p, b.n, b.cap, 1, 64)) {
        free(b.p);
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the text of token %d",
                        token);
    }
    b.p[b.n] = '\0';
    *text = b.p;
    *len = b.n;
    return DI_OK;
}
