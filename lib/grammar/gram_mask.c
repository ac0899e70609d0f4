/*
 * gram_mask.c — the allowed-token sets of gram_mask.h: the trie walk, the
 * check of uncertain tokens against the real state, and the cache.
 */
#include "lib/grammar/gram_mask.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"

typedef struct mask_entry {
    uint32_t state;
    uint8_t local;        /* 1: a local state's walk (accepted + uncertain); 0: a state's whole set */
    uint32_t *bits;
    uint32_t *ranges;     /* uncertain subtrees: lo, hi pairs over trie->order */
    uint32_t n_ranges;
    uint64_t last_use;
    size_t bytes;
} mask_entry;

struct di_mask_cache {
    uint32_t n_vocab, words;
    size_t budget, bytes;
    mask_entry *entries;
    size_t n, cap;
    uint32_t *index_full, *index_local; /* by state: entry + 1, 0 none */
    size_t index_cap;
    uint64_t clock;
    uint32_t *st;         /* the walk's state per depth */
    uint8_t *esc;         /* per depth: a prefix reached the HOLE */
    size_t depth_cap;
    uint32_t *ranges;     /* the walk's uncertain subtrees */
    size_t n_ranges, cap_ranges;
};

di_status di_mask_cache_create(uint32_t n_vocab, size_t budget, di_mask_cache **out)
{
    di_mask_cache *c = calloc(1, sizeof *c);
    *out = c;
    if (!c)
        return DI_ERR_OUT_OF_MEMORY;
    c->n_vocab = n_vocab;
    c->words = (n_vocab + 31) / 32;
    c->budget = budget;
    return DI_OK;
}

static void entry_release(mask_entry *e)
{
    free(e->bits);
    free(e->ranges);
}

void di_mask_cache_free(di_mask_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        entry_release(&c->entries[i]);
    free(c->entries);
    free(c->index_full);
    free(c->index_local);
    free(c->st);
    free(c->esc);
    free(c->ranges);
    free(c);
}

size_t di_mask_cache_bytes(const di_mask_cache *c)
{
    return c->bytes;
}

static uint32_t *index_of(di_mask_cache *c, int local)
{
    return local ? c->index_local : c->index_full;
}

/* Index room for every state of m. */
static di_status cover(di_mask_cache *c, const di_matcher *m)
{
    if (m->n_states <= c->index_cap)
        return DI_OK;
    size_t cap = c->index_cap ? c->index_cap : 64;
    while (cap < m->n_states)
        cap *= 2;
    uint32_t *f = realloc(c->index_full, cap * sizeof *f);
    if (f)
        c->index_full = f;
    uint32_t *l = realloc(c->index_local, cap * sizeof *l);
    if (l)
        c->index_local = l;
    if (!f || !l)
        return DI_ERR_OUT_OF_MEMORY;
    memset(c->index_full + c->index_cap, 0, (cap - c->index_cap) * sizeof *f);
    memset(c->index_local + c->index_cap, 0, (cap - c->index_cap) * sizeof *l);
    c->index_cap = cap;
    return DI_OK;
}

static void remove_entry(di_mask_cache *c, size_t i)
{
    mask_entry *e = &c->entries[i];
    index_of(c, e->local)[e->state] = 0;
    c->bytes -= e->bytes;
    entry_release(e);
    if (i + 1 < c->n) {
        c->entries[i] = c->entries[c->n - 1];
        index_of(c, c->entries[i].local)[c->entries[i].state] = (uint32_t)i + 1;
    }
    c->n--;
}

/* Drops the least recently used entries while over budget, never `keep`;
 * returns where `keep` is now. */
static size_t evict(di_mask_cache *c, size_t keep)
{
    while (c->bytes > c->budget && c->n > 1) {
        size_t lru = keep == 0 ? 1 : 0;
        for (size_t i = 0; i < c->n; i++)
            if (i != keep && c->entries[i].last_use < c->entries[lru].last_use)
                lru = i;
        const size_t last = c->n - 1;
        remove_entry(c, lru);
        if (keep == last)
            keep = lru; /* moved into the hole */
    }
    return keep;
}

/* Adds an entry holding bits and ranges (taken over); its index, or -1. */
static int64_t add_entry(di_mask_cache *c, uint32_t state, int local, uint32_t *bits, uint32_t *ranges,
                         uint32_t n_ranges)
{
    if (!DI_GROW(c->entries, c->n, c->cap, 1, 16)) {
        free(bits);
        free(ranges);
        return -1;
    }
    mask_entry *e = &c->entries[c->n];
    e->state = state;
    e->local = (uint8_t)local;
    e->bits = bits;
    e->ranges = ranges;
    e->n_ranges = n_ranges;
    e->last_use = ++c->clock;
    e->bytes = (size_t)c->words * sizeof *bits + (size_t)n_ranges * 2 * sizeof *ranges + sizeof *e;
    c->bytes += e->bytes;
    index_of(c, local)[state] = (uint32_t)c->n + 1;
    return (int64_t)c->n++;
}

static di_status add_range(di_mask_cache *c, uint32_t lo, uint32_t hi)
{
    if (lo == hi)
        return DI_OK;
    if (c->n_ranges > 0 && c->ranges[c->n_ranges - 1] == lo) { /* adjacent subtrees: one range */
        c->ranges[c->n_ranges - 1] = hi;
        return DI_OK;
    }
    if (!DI_GROW(c->ranges, c->n_ranges, c->cap_ranges, 2, 64))
        return DI_ERR_OUT_OF_MEMORY;
    c->ranges[c->n_ranges++] = lo;
    c->ranges[c->n_ranges++] = hi;
    return DI_OK;
}

/* The walk from `from` (a local state, or a state with no cut): the tokens
 * whose text leaves it alive into bits, the subtrees that died after a
 * prefix reached the HOLE into c->ranges. */
static di_status walk(di_mask_cache *c, di_matcher *m, const di_token_trie *t, uint32_t from, uint32_t *bits)
{
    if (c->depth_cap < (size_t)t->max_depth + 1) {
        const size_t cap = (size_t)t->max_depth + 1;
        uint32_t *st = realloc(c->st, cap * sizeof *st);
        if (st)
            c->st = st;
        uint8_t *esc = realloc(c->esc, cap);
        if (esc)
            c->esc = esc;
        if (!st || !esc)
            return DI_ERR_OUT_OF_MEMORY;
        c->depth_cap = cap;
    }
    c->n_ranges = 0;
    c->st[0] = from;
    c->esc[0] = m->states[from].has_hole;
    const uint8_t *byte = t->byte;
    const uint16_t *depth = t->depth;
    for (uint32_t i = 1; i < t->n_nodes;) {
        const uint32_t d = depth[i];
        uint32_t s;
        di_status st = di_matcher_step(m, c->st[d - 1], byte[i], &s);
        if (st)
            return st;
        if (s == DI_MATCH_DEAD) {
            if (c->esc[d - 1] && (st = add_range(c, t->sub_lo[i], di_trie_sub_hi(t, i))))
                return st;
            i = t->end[i];
            continue;
        }
        c->st[d] = s;
        c->esc[d] = c->esc[d - 1] | m->states[s].has_hole;
        if (m->states[s].end_ok)
            for (uint32_t k = t->sub_lo[i], e = k + t->n_here[i]; k < e; k++)
                bits[t->order[k] / 32] |= 1u << (t->order[k] % 32);
        i++;
    }
    return DI_OK;
}

di_status di_mask_token_ok(di_matcher *m, const di_token_trie *t, uint32_t state, uint32_t tok, int *ok)
{
    const uint32_t off = t->piece_off[tok], len = t->piece_off[tok + 1] - off;
    uint32_t s = DI_MATCH_DEAD;
    *ok = 0;
    if (len == 0 || len > DI_TRIE_MAX_PIECE)
        return DI_OK;
    di_status st = di_matcher_step_bytes(m, state, t->piece_bytes + off, len, &s);
    *ok = s != DI_MATCH_DEAD && m->states[s].end_ok;
    return st;
}

/* The entry of local state L (walked now when not cached); its index or -1
 * with *st set. */
static int64_t local_entry(di_mask_cache *c, di_matcher *m, const di_token_trie *t, uint32_t L, di_status *st)
{
    if ((*st = cover(c, m)))
        return -1;
    if (c->index_local[L]) {
        const int64_t i = c->index_local[L] - 1;
        c->entries[i].last_use = ++c->clock;
        return i;
    }
    uint32_t *bits = calloc(c->words, sizeof *bits);
    if (!bits) {
        *st = DI_ERR_OUT_OF_MEMORY;
        return -1;
    }
    if ((*st = walk(c, m, t, L, bits)) || (*st = cover(c, m))) {
        free(bits);
        return -1;
    }
    uint32_t *ranges = NULL;
    if (c->n_ranges > 0) {
        if (!(ranges = malloc(c->n_ranges * sizeof *ranges))) {
            free(bits);
            *st = DI_ERR_OUT_OF_MEMORY;
            return -1;
        }
        memcpy(ranges, c->ranges, c->n_ranges * sizeof *ranges);
    }
    const int64_t i = add_entry(c, L, 1, bits, ranges, (uint32_t)(c->n_ranges / 2));
    if (i < 0)
        *st = DI_ERR_OUT_OF_MEMORY;
    return i;
}

di_status di_mask_get(di_mask_cache *c, di_matcher *m, const di_token_trie *t, uint32_t state, const uint32_t **bits)
{
    di_status st = cover(c, m);
    if (st)
        return st;
    if (c->index_full[state]) {
        mask_entry *e = &c->entries[c->index_full[state] - 1];
        e->last_use = ++c->clock;
        *bits = e->bits;
        return DI_OK;
    }
    uint32_t L;
    if ((st = di_matcher_local(m, state, &L)))
        return st;
    int64_t li = local_entry(c, m, t, L, &st);
    if (li < 0)
        return st;
    if (L == state) { /* no cut: the walk's set is the state's */
        li = (int64_t)evict(c, (size_t)li);
        *bits = c->entries[li].bits;
        return DI_OK;
    }
    uint32_t *full = malloc(c->words * sizeof *full);
    if (!full)
        return DI_ERR_OUT_OF_MEMORY;
    memcpy(full, c->entries[li].bits, c->words * sizeof *full);
    for (uint32_t r = 0; r < c->entries[li].n_ranges && !st; r++) {
        const uint32_t lo = c->entries[li].ranges[2 * r], hi = c->entries[li].ranges[2 * r + 1];
        for (uint32_t k = lo; k < hi && !st; k++) {
            int ok;
            const uint32_t tok = t->order[k];
            if (!(st = di_mask_token_ok(m, t, state, tok, &ok)) && ok)
                full[tok / 32] |= 1u << (tok % 32);
        }
    }
    if (!st)
        st = cover(c, m);
    if (st) {
        free(full);
        return st;
    }
    int64_t fi = add_entry(c, state, 0, full, NULL, 0);
    if (fi < 0)
        return DI_ERR_OUT_OF_MEMORY;
    fi = (int64_t)evict(c, (size_t)fi);
    *bits = c->entries[fi].bits;
    return DI_OK;
}
