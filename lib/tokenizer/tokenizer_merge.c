/*
 * tokenizer_heap.c — the priority queue of candidate merges that both
 * tokenizer kinds use (SentencePiece by score, BPE by merge rank).
 */
#include <stdlib.h>

#include "tokenizer_internal.h"

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
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        di_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return 0;
        h->v = v;
        h->cap = cap;
    }
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
