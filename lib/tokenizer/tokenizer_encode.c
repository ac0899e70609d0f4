/*
 * tokenizer_encode.c — text to token ids: the text is cut at the special
 * tokens it contains (llama.cpp's tokenizer_st_partition), and each plain
 * stretch goes to the encoder of the tokenizer's kind (tokenizer_spm.c or
 * tokenizer_bpe.c).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"
#include "lib/tokenizer/tokenizer_internal.h"
#include "lib/base/utf8.h"

/* A stretch of the input: plain text, or a special token found in it. */
typedef struct fragment {
    size_t off, len;
    int32_t token; /* -1: plain text */
} fragment;

typedef struct frag_vec {
    fragment *v;
    size_t n, cap;
} frag_vec;

static int frag_push(frag_vec *f, size_t off, size_t len, int32_t token)
{
    if (!DI_GROW(f->v, f->n, f->cap, 1, 16))
        return 0;
    f->v[f->n++] = (fragment){off, len, token};
    return 1;
}

/* Whether a special token found at bytes [at, at + n) may cut there, given
 * the spans of plain text (sorted, disjoint): anywhere outside them; inside
 * one (whole) only when it is a token that cuts without parse_special (a
 * user-defined one), so that a span is tokenized as if parse_special were
 * off; never across a span's edge. */
static int may_cut(const di_text_span *plain, size_t n_plain, size_t at, size_t n, int cuts_plain_text)
{
    size_t lo = 0, hi = n_plain; /* the first span that ends after at */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (plain[mid].off + plain[mid].len <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n_plain || plain[lo].off >= at + n)
        return 1; /* meets no span */
    return cuts_plain_text && plain[lo].off <= at && at + n <= plain[lo].off + plain[lo].len;
}

/* llama.cpp's tokenizer_st_partition: each special token in turn, longest
 * first, cuts every plain stretch at each of its occurrences, left to right.
 * Without parse_special only user-defined tokens cut (control and unknown
 * ones are skipped, as llama.cpp does). Where an occurrence meets a span of
 * `plain` and may_cut says no, it cuts nothing: the search goes on one byte
 * later. */
static int partition(const di_tokenizer *t, const char *text, size_t len, int parse_special,
                     const di_text_span *plain, size_t n_plain, frag_vec *frags)
{
    frag_vec next = {0};
    if (len > 0 && !frag_push(frags, 0, len, -1))
        return 0;
    /* The byte pairs of the text: a token whose first two bytes are not among
     * them cannot occur (Gemma has 6,400 special tokens, mostly <unusedN>). */
    uint64_t pairs[65536 / 64] = {0};
    for (size_t i = 0; i + 1 < len; i++) {
        unsigned pair = (unsigned char)text[i] << 8 | (unsigned char)text[i + 1];
        pairs[pair / 64] |= UINT64_C(1) << (pair % 64);
    }
    for (uint32_t u = 0; u < t->n_special && frags->n > 0; u++) {
        int32_t id = t->special[u];
        const di_tok_piece *p = &t->pieces[id];
        int cuts_plain_text = !(p->attr & (DI_TOK_CONTROL | DI_TOK_UNKNOWN));
        if (!parse_special && !cuts_plain_text)
            continue;
        if (p->len >= 2) {
            unsigned pair = (unsigned char)p->text[0] << 8 | (unsigned char)p->text[1];
            if (!(pairs[pair / 64] >> (pair % 64) & 1))
                continue;
        }
        next.n = 0;
        for (size_t i = 0; i < frags->n; i++) {
            fragment f = frags->v[i];
            if (f.token >= 0) {
                if (!frag_push(&next, f.off, f.len, f.token))
                    goto oom;
                continue;
            }
            size_t off = f.off, from = f.off, end = f.off + f.len; /* off: the plain stretch's start */
            const char *hit;
            while (from < end && (hit = memmem(text + from, end - from, p->text, p->len)) != NULL) {
                size_t at = (size_t)(hit - text);
                if (!may_cut(plain, n_plain, at, p->len, cuts_plain_text)) {
                    from = at + 1;
                    continue;
                }
                if ((at > off && !frag_push(&next, off, at - off, -1)) ||
                    !frag_push(&next, at, p->len, id))
                    goto oom;
                off = from = at + p->len;
            }
            if (off < end && !frag_push(&next, off, end - off, -1))
                goto oom;
        }
        frag_vec swap = *frags;
        *frags = next;
        next = swap;
    }
    free(next.v);
    return 1;
oom:
    free(next.v);
    return 0;
}

di_status di_tokenizer_encode(const di_tokenizer *t, const char *text, size_t text_len,
                              uint32_t flags, di_tok_vec *out, char *err, size_t err_size)
{
    return di_tokenizer_encode_spans(t, text, text_len, flags, NULL, 0, out, err, err_size);
}

di_status di_tokenizer_encode_spans(const di_tokenizer *t, const char *text, size_t text_len,
                                    uint32_t flags, const di_text_span *plain, size_t n_plain,
                                    di_tok_vec *out, char *err, size_t err_size)
{
    if (t->kind == DI_TOK_KIND_NONE)
        return di_error(err, err_size, DI_ERR_UNSUPPORTED, "%s", t->reason);
    const uint32_t known = DI_TOKENIZE_ADD_BOS | DI_TOKENIZE_PARSE_SPECIAL;
    if (flags & ~known)
        return di_error(err, err_size, DI_ERR_INVALID_ARGUMENT, "unknown tokenize flags 0x%x",
                        flags & ~known);
    if (text_len > DI_TOK_MAX_TEXT)
        return di_error(err, err_size, DI_ERR_INVALID_ARGUMENT,
                        "text of %zu bytes is longer than the %u bytes one call takes", text_len,
                        DI_TOK_MAX_TEXT);
    size_t bad;
    if (!di_utf8_valid(text, text_len, &bad))
        return di_error(err, err_size, DI_ERR_TEXT, "text is not valid UTF-8 at byte %zu (0x%02x)",
                        bad, (unsigned char)text[bad]);
    int add_special = (flags & DI_TOKENIZE_ADD_BOS) != 0;
    frag_vec frags = {0};
    if (!partition(t, text, text_len, (flags & DI_TOKENIZE_PARSE_SPECIAL) != 0, plain, n_plain, &frags)) {
        free(frags.v);
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory splitting the text");
    }
    di_status st = DI_OK;
    if (add_special && t->add_bos && !di_tok_vec_push(out, t->bos))
        st = DI_ERR_OUT_OF_MEMORY;
    int prev_special = 1; /* SPM: the first text gets the space prefix */
    for (size_t i = 0; i < frags.n && !st; i++) {
        const fragment *f = &frags.v[i];
        if (f->token >= 0) {
            if (!di_tok_vec_push(out, f->token))
                st = DI_ERR_OUT_OF_MEMORY;
            prev_special = 1;
        } else if (t->kind == DI_TOK_KIND_SPM) {
            st = di_spm_encode(t, text + f->off, f->len, t->add_space_prefix && prev_special, out,
                               err, err_size);
            prev_special = 0;
        } else {
            st = di_bpe_encode(t, text + f->off, f->len, out, err, err_size);
        }
    }
    if (!st && add_special && t->add_eos && !di_tok_vec_push(out, t->eos))
        st = DI_ERR_OUT_OF_MEMORY;
    free(frags.v);
    if (st == DI_ERR_OUT_OF_MEMORY)
        return di_error(err, err_size, st, "out of memory tokenizing %zu bytes", text_len);
    return st;
}
