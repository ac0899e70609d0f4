/*
 * tokenizer_merge.c — the bigram merge loop both tokenizer kinds run, and
 * its priority queue of candidate merges (SentencePiece by score, BPE by
 * merge rank).
 */
#include <stdlib.h>

#include "lib/base/growable.h"
#include "lib/tokenizer/tokenizer_internal.h"

/* a goes before b: higher score, then lower rank, then the leftmost pair.
 * SPM pairs all have rank 0 and BPE pairs score 0, so each kind's own order
 * decides. */
static int before(const di_bigram *a, const di_bigram *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    if (a->rank != b->rank)
        return a->rank < b->rank;
    return a->left < b->left;
}

int di_bigram_push(di_bigram_heap *h, di_bigram x)
{
    if (!DI_GROW(h->v, h->n, h->cap, 1, 64))
        return 0;
    size_t i = h->n++;
    while (i > 0 && before(&x, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = x;
    return 1;
}

di_bigram di_bigram_pop(di_bigram_heap *h)
{
    di_bigram top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &x))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = x;
    return top;
}

/* Queues the pair (left, right) when `pair` accepts it. */
static int try_pair(const di_tokenizer *t, const char *s, const di_tok_symbol *sym, int32_t left,
                    int32_t right, di_bigram_heap *h, di_tok_pair_fn pair)
{
    if (left < 0 || right < 0)
        return 1;
    di_bigram b = {left, right, 0.0f, 0, sym[left].n + sym[right].n};
    if (!pair(t, s, sym, left, right, &b))
        return 1;
    return di_bigram_push(h, b);
}

int32_t di_tok_merge(const di_tokenizer *t, const char *s, size_t n, di_tok_symbol *sym,
                     di_bigram_heap *h, di_tok_pair_fn pair)
{
    int32_t count = 0;
    for (size_t off = 0; off < n; count++) {
        size_t clen = di_utf8_len((unsigned char)s[off]);
        if (clen > n - off)
            clen = n - off;
        sym[count] = (di_tok_symbol){count - 1, -1, (uint32_t)off, (uint32_t)clen};
        off += clen;
        if (off < n)
            sym[count].next = count + 1;
    }
    h->n = 0;
    for (int32_t i = 1; i < count; i++)
        if (!try_pair(t, s, sym, i - 1, i, h, pair))
            return -1;
    while (h->n > 0) {
        di_bigram b = di_bigram_pop(h);
        di_tok_symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* one side changed since the pair was queued */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        if (!try_pair(t, s, sym, l->prev, b.left, h, pair) ||
            !try_pair(t, s, sym, b.left, l->next, h, pair))
            return -1;
    }
    return count;
}
