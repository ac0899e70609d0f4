/*
 * token_trie.c — building the trie of token_trie.h: every token's piece,
 * the tokens sorted by their bytes, then one pass that opens a node for
 * each byte past the common prefix with the previous token and closes the
 * nodes deeper than it.
 */
#include "lib/grammar/token_trie.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"

void di_trie_free(di_token_trie *t)
{
    if (!t)
        return;
    free(t->piece_off);
    free(t->piece_bytes);
    free(t->order);
    free(t->byte);
    free(t->depth);
    free(t->end);
    free(t->sub_lo);
    free(t->n_here);
    free(t);
}

typedef struct sort_item {
    const unsigned char *p;
    uint32_t len, id;
} sort_item;

static int cmp_item(const void *a, const void *b)
{
    const sort_item *x = a, *y = b;
    const uint32_t n = x->len < y->len ? x->len : y->len;
    const int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Every token's piece, concatenated. */
static di_status collect_pieces(const di_tokenizer *tok, di_token_trie *t, char *err, size_t err_size)
{
    size_t n = 0, cap = 0;
    t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->piece_off);
    if (!t->piece_off)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary's texts");
    for (uint32_t id = 0; id < t->n_vocab; id++) {
        char *text;
        size_t len;
        di_status st = di_tokenizer_piece(tok, (int32_t)id, &text, &len, err, err_size);
        if (st)
            return st;
        if (n + len > UINT32_MAX || !DI_GROW(t->piece_bytes, n, cap, len + 1, 1 << 16)) {
            free(text);
            return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary's texts");
        }
        t->piece_off[id] = (uint32_t)n;
        if (memchr(text, '\0', len))
            len = 0; /* a text holding a NUL byte counts as none (llama.cpp refuses it too) */
        memcpy(t->piece_bytes + n, text, len);
        n += len;
        free(text);
    }
    t->piece_off[t->n_vocab] = (uint32_t)n;
    return DI_OK;
}

static int add_node(di_token_trie *t, size_t *cap, uint8_t byte, uint32_t depth, uint32_t sub_lo)
{
    if (t->n_nodes == *cap) {
        const size_t c = *cap ? *cap * 2 : 4096;
        uint8_t *b = realloc(t->byte, c);
        if (b)
            t->byte = b;
        uint16_t *d = realloc(t->depth, c * sizeof *d);
        if (d)
            t->depth = d;
        uint32_t *e = realloc(t->end, c * sizeof *e);
        if (e)
            t->end = e;
        uint32_t *s = realloc(t->sub_lo, c * sizeof *s);
        if (s)
            t->sub_lo = s;
        uint16_t *h = realloc(t->n_here, c * sizeof *h);
        if (h)
            t->n_here = h;
        if (!b || !d || !e || !s || !h || c > UINT32_MAX)
            return 0;
        *cap = c;
    }
    const uint32_t i = t->n_nodes++;
    t->byte[i] = byte;
    t->depth[i] = (uint16_t)depth;
    t->end[i] = 0;
    t->sub_lo[i] = sub_lo;
    t->n_here[i] = 0;
    return 1;
}

di_status di_trie_build(const di_tokenizer *tok, uint32_t n_vocab, di_token_trie **out, char *err, size_t err_size)
{
    *out = NULL;
    di_token_trie *t = calloc(1, sizeof *t);
    if (!t)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary's trie");
    t->n_vocab = n_vocab;
    di_status st = collect_pieces(tok, t, err, err_size);
    sort_item *items = st ? NULL : malloc((size_t)n_vocab * sizeof *items);
    uint32_t path[DI_TRIE_MAX_PIECE + 1];
    size_t cap = 0;
    if (!st && (!items || !(t->order = malloc((size_t)n_vocab * sizeof *t->order)) || !add_node(t, &cap, 0, 0, 0)))
        st = di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary's trie");
    size_t n_items = 0;
    for (uint32_t id = 0; !st && id < n_vocab; id++) {
        const uint32_t len = t->piece_off[id + 1] - t->piece_off[id];
        if (len == 0 || len > DI_TRIE_MAX_PIECE)
            continue;
        items[n_items++] = (sort_item){t->piece_bytes + t->piece_off[id], len, id};
    }
    if (!st)
        qsort(items, n_items, sizeof *items, cmp_item);
    uint32_t open = 0; /* depth of the deepest open node */
    path[0] = 0;
    for (size_t k = 0; !st && k < n_items; k++) {
        const sort_item *it = &items[k];
        uint32_t common = 0;
        if (k > 0) {
            const sort_item *prev = &items[k - 1];
            const uint32_t n = prev->len < it->len ? prev->len : it->len;
            while (common < n && prev->p[common] == it->p[common])
                common++;
        }
        for (; open > common; open--)
            t->end[path[open]] = t->n_nodes;
        for (uint32_t d = common + 1; d <= it->len; d++) {
            if (!add_node(t, &cap, it->p[d - 1], d, t->n_order)) {
                st = di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary's trie");
                break;
            }
            path[d] = t->n_nodes - 1;
            open = d;
        }
        if (st)
            break;
        if (t->n_here[path[it->len]] == UINT16_MAX)
            continue; /* 65535 tokens of one text already: the rest left out */
        if (it->len > t->max_depth)
            t->max_depth = it->len;
        t->n_here[path[it->len]]++;
        t->order[t->n_order++] = it->id;
    }
    for (; !st && open > 0; open--)
        t->end[path[open]] = t->n_nodes;
    if (!st)
        t->end[0] = t->n_nodes;
    free(items);
    if (st) {
        di_trie_free(t);
        return st;
    }
    *out = t;
    return DI_OK;
}
