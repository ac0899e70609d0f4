/*
 * gram_match.c — the stacks, the states and their transitions
 * (gram_match.h).
 *
 * Expanding a position ("closure"): a CHARS position is a top; a RULE
 * position pushes where to continue after the rule (not when that is the
 * end of the alternative: a tail call, so right recursion does not grow a
 * stack) and expands each alternative's first position; the end of an
 * alternative pops to the parent and expands there, or gives the empty
 * stack (or the HOLE) at the bottom. The grammar has no left recursion
 * (gram_build.c refuses it), so this ends; a set of the (position, parent)
 * pairs seen keeps shared work from repeating.
 */
#include "lib/grammar/gram_match.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"
#include "lib/base/utf8.h"

#define POS_EMPTY UINT32_MAX
#define POS_HOLE (UINT32_MAX - 1)
#define ROW_BYTES (256 * sizeof(uint32_t))

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static di_status limit(di_matcher *m, const char *what)
{
    snprintf(m->err, sizeof m->err, "the grammar's automaton exceeds %s", what);
    return DI_ERR_GRAMMAR;
}

static di_status oom(di_matcher *m)
{
    snprintf(m->err, sizeof m->err, "out of memory in the grammar's automaton");
    return DI_ERR_OUT_OF_MEMORY;
}

/* Adds `more` bytes to the account, refusing past the bound. */
static di_status charge(di_matcher *m, size_t more)
{
    if (m->bytes + more > DI_MATCH_MAX_BYTES)
        return limit(m, "its memory bound (512 MiB): a grammar whose parses multiply without end");
    m->bytes += more;
    return DI_OK;
}

/* ---- nodes --------------------------------------------------------------------------- */

static di_status grow_node_table(di_matcher *m)
{
    const size_t cap = m->node_table_cap ? m->node_table_cap * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return oom(m);
    di_status st = charge(m, (cap - m->node_table_cap) * sizeof *t);
    if (st) {
        free(t);
        return st;
    }
    for (size_t id = 0; id < m->n_nodes; id++) {
        size_t i = mix(((uint64_t)m->node_pos[id] << 32) | m->node_parent[id]) & (cap - 1);
        while (t[i])
            i = (i + 1) & (cap - 1);
        t[i] = (uint32_t)id + 1;
    }
    free(m->node_table);
    m->node_table = t;
    m->node_table_cap = cap;
    return DI_OK;
}

static di_status add_node(di_matcher *m, uint32_t pos, uint32_t parent, uint32_t depth)
{
    if (m->n_nodes == m->cap_nodes) {
        const size_t cap = m->cap_nodes ? m->cap_nodes * 2 : 256;
        di_status st = charge(m, (cap - m->cap_nodes) * 3 * sizeof(uint32_t));
        if (st)
            return st;
        uint32_t *p = realloc(m->node_pos, cap * sizeof *p);
        if (p)
            m->node_pos = p;
        uint32_t *q = realloc(m->node_parent, cap * sizeof *q);
        if (q)
            m->node_parent = q;
        uint32_t *d = realloc(m->node_depth, cap * sizeof *d);
        if (d)
            m->node_depth = d;
        if (!p || !q || !d)
            return oom(m);
        m->cap_nodes = cap;
    }
    m->node_pos[m->n_nodes] = pos;
    m->node_parent[m->n_nodes] = parent;
    m->node_depth[m->n_nodes] = depth;
    m->n_nodes++;
    return DI_OK;
}

/* The node (pos, parent), made when new. */
static di_status node(di_matcher *m, uint32_t pos, uint32_t parent, uint32_t *id)
{
    size_t i = mix(((uint64_t)pos << 32) | parent) & (m->node_table_cap - 1);
    for (; m->node_table[i]; i = (i + 1) & (m->node_table_cap - 1)) {
        const uint32_t k = m->node_table[i] - 1;
        if (m->node_pos[k] == pos && m->node_parent[k] == parent) {
            *id = k;
            return DI_OK;
        }
    }
    const uint32_t depth = m->node_depth[parent] + 1;
    if (depth > DI_MATCH_MAX_DEPTH)
        return limit(m, "65536 nested rules in one parse");
    di_status st = add_node(m, pos, parent, depth);
    if (st)
        return st;
    *id = (uint32_t)m->n_nodes - 1;
    m->node_table[i] = *id + 1;
    if (m->n_nodes * 2 > m->node_table_cap)
        return grow_node_table(m);
    return DI_OK;
}

/* ---- states ------------------------------------------------------------------------------ */

static uint64_t state_hash(const uint32_t *tops, uint32_t n, uint64_t key)
{
    uint64_t h = mix(key);
    for (uint32_t i = 0; i < n; i++)
        h = mix(h ^ tops[i]);
    return h;
}

/* A state's partial character as one number: the bits, what is still to
 * come and its length (the key of a state besides its tops). */
static uint64_t partial_key(uint32_t partial, uint32_t remaining, uint32_t length)
{
    return ((uint64_t)partial << 16) | (remaining << 8) | length;
}

static int same_state(const di_matcher *m, uint32_t id, const uint32_t *tops, uint32_t n, uint64_t key)
{
    const di_match_state *s = &m->states[id];
    return s->n == n && partial_key(s->partial, s->remaining, s->length) == key &&
           memcmp(m->stacks + s->first, tops, n * sizeof *tops) == 0;
}

static di_status grow_state_table(di_matcher *m)
{
    const size_t cap = m->state_table_cap ? m->state_table_cap * 2 : 256;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return oom(m);
    di_status st = charge(m, (cap - m->state_table_cap) * sizeof *t);
    if (st) {
        free(t);
        return st;
    }
    for (size_t id = 0; id < m->n_states; id++) {
        const di_match_state *s = &m->states[id];
        size_t i = state_hash(m->stacks + s->first, s->n, partial_key(s->partial, s->remaining, s->length)) &
                   (cap - 1);
        while (t[i])
            i = (i + 1) & (cap - 1);
        t[i] = (uint32_t)id + 1;
    }
    free(m->state_table);
    m->state_table = t;
    m->state_table_cap = cap;
    return DI_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* 1 when a token may end with these tops and partial character: none, or
 * a top whose set, when written negated, holds the whole range of code
 * points the bits may begin (those written plainly passed the filter of
 * partial_range already). */
static int end_ok(const di_matcher *m, const uint32_t *tops, uint32_t n, uint32_t partial, uint32_t remaining)
{
    if (remaining == 0)
        return 1;
    const uint32_t lo = partial << (6 * remaining), hi = lo | ((1u << (6 * remaining)) - 1);
    for (uint32_t t = 0; t < n; t++) {
        const uint32_t set = DI_GRAM_VALUE(m->g->elems[m->node_pos[tops[t]]]);
        if (!m->g->sets[set].negated ||
            di_gram_charset_holds(m->g, set, lo, hi < DI_GRAM_MAX_CODEPOINT ? hi : DI_GRAM_MAX_CODEPOINT))
            return 1;
    }
    return 0;
}

/* The state of n tops (sorted and deduplicated here, in place) and a
 * partial code point; DEAD when there is no top. */
static di_status state(di_matcher *m, uint32_t *tops, uint32_t n, uint32_t partial, uint32_t remaining,
                       uint32_t length, uint32_t *id)
{
    if (n == 0) {
        *id = DI_MATCH_DEAD;
        return DI_OK;
    }
    qsort(tops, n, sizeof *tops, cmp_u32);
    uint32_t k = 1;
    for (uint32_t i = 1; i < n; i++)
        if (tops[i] != tops[k - 1])
            tops[k++] = tops[i];
    n = k;
    if (n > DI_MATCH_MAX_STACKS)
        return limit(m, "1024 parses at once (an ambiguous grammar)");
    const uint64_t key = partial_key(partial, remaining, length);
    size_t i = state_hash(tops, n, key) & (m->state_table_cap - 1);
    for (; m->state_table[i]; i = (i + 1) & (m->state_table_cap - 1))
        if (same_state(m, m->state_table[i] - 1, tops, n, key)) {
            *id = m->state_table[i] - 1;
            return DI_OK;
        }
    if (m->n_states >= UINT32_MAX / 2)
        return limit(m, "2^31 states");
    di_status st = charge(m, sizeof(di_match_state) + sizeof(uint32_t *) + n * sizeof(uint32_t));
    if (st)
        return st;
    if (!DI_GROW(m->stacks, m->n_stacks, m->cap_stacks, n, 1024))
        return oom(m);
    if (m->n_states == m->cap_states) {
        const size_t cap = m->cap_states ? m->cap_states * 2 : 64;
        di_match_state *s = realloc(m->states, cap * sizeof *s);
        if (s)
            m->states = s;
        uint32_t **r = realloc(m->rows, cap * sizeof *r);
        if (r)
            m->rows = r;
        if (!s || !r)
            return oom(m);
        m->cap_states = cap;
    }
    di_match_state *s = &m->states[m->n_states];
    memset(s, 0, sizeof *s);
    s->first = (uint32_t)m->n_stacks;
    s->n = n;
    s->partial = partial;
    s->remaining = (uint8_t)remaining;
    s->length = (uint8_t)length;
    memcpy(m->stacks + m->n_stacks, tops, n * sizeof *tops);
    m->n_stacks += n;
    for (uint32_t t = 0; t < n; t++) {
        s->can_end |= tops[t] == DI_NODE_EMPTY && remaining == 0;
        s->has_hole |= tops[t] == DI_NODE_HOLE;
    }
    s->end_ok = (uint8_t)end_ok(m, tops, n, partial, remaining);
    m->rows[m->n_states] = NULL;
    *id = (uint32_t)m->n_states++;
    m->state_table[i] = *id + 1;
    if (m->n_states * 2 > m->state_table_cap)
        return grow_state_table(m);
    return DI_OK;
}

/* ---- closure ---------------------------------------------------------------------------------- */

static di_status push_work(di_matcher *m, size_t *n, uint32_t pos, uint32_t parent)
{
    if (*n + 2 > m->cap_work && !DI_GROW(m->work, *n, m->cap_work, 2, 256))
        return oom(m);
    m->work[(*n)++] = pos;
    m->work[(*n)++] = parent;
    return DI_OK;
}

static di_status push_out(di_matcher *m, uint32_t top)
{
    if (!DI_GROW(m->out, m->n_out, m->cap_out, 1, 64))
        return oom(m);
    m->out[m->n_out++] = top;
    return DI_OK;
}

/* 1 when (pos, parent) was seen in this closure, marking it otherwise;
 * -1 when out of memory. The set holds 3 words an entry: the pair and the
 * closure it belongs to (m->seen_gen), so that it is never cleared. */
static int seen(di_matcher *m, uint32_t pos, uint32_t parent, size_t *count)
{
    const size_t slots = m->seen_cap / 3;
    if ((*count + 1) * 2 > slots) {
        const size_t cap_slots = slots ? slots * 2 : 256;
        uint32_t *t = calloc(cap_slots * 3, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < slots; i++) {
            const uint32_t *e = m->seen + 3 * i;
            if (e[2] != m->seen_gen)
                continue;
            size_t j = mix(((uint64_t)e[0] << 32) | e[1]) & (cap_slots - 1);
            while (t[3 * j + 2] == m->seen_gen)
                j = (j + 1) & (cap_slots - 1);
            memcpy(t + 3 * j, e, 3 * sizeof *e);
        }
        free(m->seen);
        m->seen = t;
        m->seen_cap = cap_slots * 3;
    }
    const size_t mask = m->seen_cap / 3 - 1;
    size_t j = mix(((uint64_t)pos << 32) | parent) & mask;
    for (; m->seen[3 * j + 2] == m->seen_gen; j = (j + 1) & mask)
        if (m->seen[3 * j] == pos && m->seen[3 * j + 1] == parent)
            return 1;
    m->seen[3 * j] = pos;
    m->seen[3 * j + 1] = parent;
    m->seen[3 * j + 2] = m->seen_gen;
    (*count)++;
    return 0;
}

/* Expands the (position, parent) pairs in m->work[0 .. n) into tops,
 * appended to m->out. */
static di_status closure(di_matcher *m, size_t n)
{
    const di_gram *g = m->g;
    size_t count = 0;
    di_status st = DI_OK;
    if (++m->seen_gen == 0) { /* after 2^32 closures: start the marks again */
        memset(m->seen, 0, m->seen_cap * sizeof *m->seen);
        m->seen_gen = 1;
    }
    while (n > 0 && !st) {
        const uint32_t parent = m->work[--n], pos = m->work[--n];
        const int was = seen(m, pos, parent, &count);
        if (was < 0) {
            st = oom(m);
            break;
        }
        if (was)
            continue;
        const uint32_t e = g->elems[pos];
        if (DI_GRAM_KIND(e) == DI_GRAM_END) {
            if (parent == DI_NODE_EMPTY || parent == DI_NODE_HOLE)
                st = push_out(m, parent);
            else
                st = push_work(m, &n, m->node_pos[parent], m->node_parent[parent]);
        } else if (DI_GRAM_KIND(e) == DI_GRAM_CHARS) {
            uint32_t id;
            if (!(st = node(m, pos, parent, &id)))
                st = push_out(m, id);
        } else {
            const uint32_t r = DI_GRAM_VALUE(e);
            uint32_t next = parent;
            if (DI_GRAM_KIND(g->elems[pos + 1]) != DI_GRAM_END)
                st = node(m, pos + 1, parent, &next);
            for (uint32_t a = g->rule_alts[r]; a < g->rule_alts[r + 1] && !st; a++)
                st = push_work(m, &n, g->alt_start[a], next);
        }
    }
    return st;
}

/* ---- steps --------------------------------------------------------------------------------------- */

di_status di_matcher_create(const di_gram *g, di_matcher **out)
{
    di_matcher *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m)
        return DI_ERR_OUT_OF_MEMORY;
    m->g = g;
    if (grow_node_table(m) || grow_state_table(m) || add_node(m, POS_EMPTY, UINT32_MAX, 0) ||
        add_node(m, POS_HOLE, UINT32_MAX, 0)) {
        di_matcher_free(m);
        return DI_ERR_OUT_OF_MEMORY;
    }
    m->node_depth[DI_NODE_EMPTY] = m->node_depth[DI_NODE_HOLE] = 0;
    *out = m;
    return DI_OK;
}

void di_matcher_free(di_matcher *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_states; i++)
        free(m->rows[i]);
    free(m->rows);
    free(m->node_pos);
    free(m->node_parent);
    free(m->node_depth);
    free(m->node_table);
    free(m->states);
    free(m->stacks);
    free(m->state_table);
    free(m->work);
    free(m->out);
    free(m->seen);
    free(m);
}

di_status di_matcher_start(di_matcher *m, uint32_t *id)
{
    const di_gram *g = m->g;
    size_t n = 0;
    m->n_out = 0;
    di_status st = DI_OK;
    for (uint32_t a = g->rule_alts[g->root]; a < g->rule_alts[g->root + 1] && !st; a++)
        st = push_work(m, &n, g->alt_start[a], DI_NODE_EMPTY);
    if (!st)
        st = closure(m, n);
    if (!st)
        st = state(m, m->out, (uint32_t)m->n_out, 0, 0, 0, id);
    return st;
}

/* The valid code points whose UTF-8 begins with the bits read so far:
 * [lo, hi], minus the surrogates (two ranges, the second possibly empty). */
static void partial_range(uint32_t partial, uint32_t remaining, uint32_t length, uint32_t r[4])
{
    static const uint32_t MIN[5] = {0, 0, 0x80, 0x800, 0x10000}, MAX[5] = {0, 0x7f, 0x7ff, 0xffff, 0x10ffff};
    uint32_t lo = partial << (6 * remaining), hi = lo | ((1u << (6 * remaining)) - 1);
    if (lo < MIN[length])
        lo = MIN[length];
    if (hi > MAX[length])
        hi = MAX[length];
    r[0] = lo;
    r[1] = hi < 0xd7ff ? hi : 0xd7ff;
    r[2] = lo > 0xe000 ? lo : 0xe000;
    r[3] = hi;
}

/* The tops of state s whose set may still take a code point of that range. */
static di_status filter_partial(di_matcher *m, const di_match_state *s, uint32_t partial, uint32_t remaining,
                                uint32_t length)
{
    uint32_t r[4];
    partial_range(partial, remaining, length, r);
    for (uint32_t t = 0; t < s->n; t++) {
        const uint32_t top = m->stacks[s->first + t];
        if (top == DI_NODE_EMPTY || top == DI_NODE_HOLE)
            continue;
        const uint32_t set = DI_GRAM_VALUE(m->g->elems[m->node_pos[top]]);
        if ((r[0] <= r[1] && di_gram_charset_meets(m->g, set, r[0], r[1])) ||
            (r[2] <= r[3] && di_gram_charset_meets(m->g, set, r[2], r[3]))) {
            di_status st = push_out(m, top);
            if (st)
                return st;
        }
    }
    return DI_OK;
}

/* The tops after code point cp. */
static di_status advance(di_matcher *m, uint32_t from, uint32_t cp)
{
    size_t n = 0;
    const di_match_state *s = &m->states[from];
    for (uint32_t t = 0; t < s->n; t++) {
        const uint32_t top = m->stacks[s->first + t];
        if (top == DI_NODE_EMPTY || top == DI_NODE_HOLE)
            continue;
        const uint32_t pos = m->node_pos[top];
        if (di_gram_charset_has(m->g, DI_GRAM_VALUE(m->g->elems[pos]), cp)) {
            di_status st = push_work(m, &n, pos + 1, m->node_parent[top]);
            if (st)
                return st;
        }
    }
    return closure(m, n);
}

static di_status compute_step(di_matcher *m, uint32_t from, uint8_t b, uint32_t *next)
{
    const di_match_state s = m->states[from];
    m->n_out = 0;
    *next = DI_MATCH_DEAD;
    di_status st = DI_OK;
    if (s.remaining == 0) {
        if (b < 0x80) {
            st = advance(m, from, b);
            return st ? st : state(m, m->out, (uint32_t)m->n_out, 0, 0, 0, next);
        }
        const uint32_t len = (uint32_t)di_utf8_lead_len(b); /* b >= 0x80: 2, 3, 4 or 0 */
        if (len == 0)
            return DI_OK;
        const uint32_t bits = b & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
        st = filter_partial(m, &s, bits, len - 1, len);
        return st ? st : state(m, m->out, (uint32_t)m->n_out, bits, len - 1, len, next);
    }
    if ((b & 0xc0) != 0x80)
        return DI_OK;
    const uint32_t bits = (s.partial << 6) | (b & 0x3f), remaining = s.remaining - 1u;
    if (remaining > 0) {
        st = filter_partial(m, &s, bits, remaining, s.length);
        return st ? st : state(m, m->out, (uint32_t)m->n_out, bits, remaining, s.length, next);
    }
    uint32_t r[4];
    partial_range(bits, 0, s.length, r); /* overlong, surrogate, past U+10FFFF: dead */
    if (!((r[0] <= r[1] && bits >= r[0] && bits <= r[1]) || (r[2] <= r[3] && bits >= r[2] && bits <= r[3])))
        return DI_OK;
    st = advance(m, from, bits);
    return st ? st : state(m, m->out, (uint32_t)m->n_out, 0, 0, 0, next);
}

di_status di_matcher_step_slow(di_matcher *m, uint32_t from, uint8_t b, uint32_t *next)
{
    di_status st = compute_step(m, from, b, next);
    if (st)
        return st;
    if (!m->rows[from]) {
        if ((st = charge(m, ROW_BYTES)))
            return st;
        if (!(m->rows[from] = calloc(256, sizeof(uint32_t))))
            return oom(m);
    }
    m->rows[from][b] = *next == DI_MATCH_DEAD ? 1 : *next + 2;
    return DI_OK;
}

di_status di_matcher_step_bytes(di_matcher *m, uint32_t from, const unsigned char *bytes, size_t n, uint32_t *next)
{
    uint32_t s = from;
    for (size_t i = 0; i < n && s != DI_MATCH_DEAD; i++) {
        di_status st = di_matcher_step(m, s, bytes[i], &s);
        if (st)
            return st;
    }
    *next = s;
    return DI_OK;
}

int di_matcher_must_end(const di_matcher *m, uint32_t id)
{
    const di_match_state *s = &m->states[id];
    return s->n == 1 && s->remaining == 0 && m->stacks[s->first] == DI_NODE_EMPTY;
}

/* ---- local states --------------------------------------------------------------------------------- */

static uint32_t lowest_common(const di_matcher *m, uint32_t a, uint32_t b)
{
    while (m->node_depth[a] > m->node_depth[b])
        a = m->node_parent[a];
    while (m->node_depth[b] > m->node_depth[a])
        b = m->node_parent[b];
    while (a != b) {
        if (m->node_depth[a] == 0) /* chains with different bottoms (the empty stack, the HOLE) */
            return DI_NODE_EMPTY;
        a = m->node_parent[a];
        b = m->node_parent[b];
    }
    return a;
}

di_status di_matcher_local(di_matcher *m, uint32_t id, uint32_t *local)
{
    *local = id;
    const di_match_state s = m->states[id];
    uint32_t cut = DI_NODE_EMPTY;
    for (uint32_t t = 0; t < s.n; t++) {
        const uint32_t top = m->stacks[s.first + t];
        if (top == DI_NODE_EMPTY || top == DI_NODE_HOLE)
            return DI_OK;
        const uint32_t below = m->node_parent[top];
        cut = t == 0 ? below : lowest_common(m, cut, below);
    }
    if (cut == DI_NODE_EMPTY)
        return DI_OK;
    /* each top's chain above the cut, rebuilt on the HOLE */
    uint32_t *tops = malloc(s.n * sizeof *tops), *chain = NULL;
    size_t cap_chain = 0;
    di_status st = tops ? DI_OK : oom(m);
    for (uint32_t t = 0; t < s.n && !st; t++) {
        size_t k = 0;
        for (uint32_t x = m->stacks[s.first + t]; x != cut && !st; x = m->node_parent[x]) {
            if (!DI_GROW(chain, k, cap_chain, 1, 16))
                st = oom(m);
            else
                chain[k++] = x;
        }
        uint32_t rebuilt = DI_NODE_HOLE;
        while (k > 0 && !st)
            st = node(m, m->node_pos[chain[--k]], rebuilt, &rebuilt);
        tops[t] = rebuilt;
    }
    if (!st)
        st = state(m, tops, s.n, s.partial, s.remaining, s.length, local);
    free(tops);
    free(chain);
    return st;
}
