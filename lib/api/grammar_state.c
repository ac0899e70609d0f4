/*
 * grammar_state.c — the grammar state of a session's sequences: the
 * grammars in use and each sequence's automaton state (grammar_state.h).
 * The public calls over it are session_grammar.c's.
 */
#include "lib/api/grammar_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"
#include "lib/base/growable.h"

void di_grammars_init(di_grammars *gs, const di_tokenizer *tok, uint32_t n_vocab)
{
    memset(gs, 0, sizeof *gs);
    gs->tok = tok;
    gs->n_vocab = n_vocab;
}

static void use_free(di_grammar_use *u)
{
    if (!u)
        return;
    di_mask_cache_free(u->masks);
    di_matcher_free(u->m);
    di_grammar_free(u->grammar);
    free(u);
}

void di_grammars_release(di_grammars *gs)
{
    for (size_t i = 0; i < gs->n_uses; i++)
        use_free(gs->uses[i]);
    free(gs->uses);
    di_trie_free(gs->trie);
    memset(gs, 0, sizeof *gs);
}

/* Frees the least recently used grammars no sequence uses, beyond
 * DI_GRAMMAR_KEEP_IDLE. */
static void trim_idle(di_grammars *gs)
{
    for (;;) {
        size_t idle = 0, lru = SIZE_MAX;
        for (size_t i = 0; i < gs->n_uses; i++) {
            if (gs->uses[i]->users)
                continue;
            idle++;
            if (lru == SIZE_MAX || gs->uses[i]->last_use < gs->uses[lru]->last_use)
                lru = i;
        }
        if (idle <= DI_GRAMMAR_KEEP_IDLE)
            return;
        use_free(gs->uses[lru]);
        gs->uses[lru] = gs->uses[--gs->n_uses];
    }
}

void di_seq_grammar_drop(di_grammars *gs, di_seq_grammar *q)
{
    if (q->use) {
        q->use->users--;
        q->use->last_use = ++gs->clock;
        q->use = NULL;
        trim_idle(gs);
    }
    free(q->states);
    q->states = NULL;
    q->n_states = q->cap_states = 0;
    q->n_ends = 0;
}

/* The use of g: one with the same digest (so the same GBNF text), or a new
 * one with its automaton started. */
static di_status find_use(di_grammars *gs, const di_grammar *g, di_grammar_use **out, char *err, size_t err_size)
{
    for (size_t i = 0; i < gs->n_uses; i++)
        if (di_digest_equal(&gs->uses[i]->grammar->digest, &g->digest)) {
            *out = gs->uses[i];
            return DI_OK;
        }
    di_grammar_use *u = calloc(1, sizeof *u);
    if (!u || !DI_GROW(gs->uses, gs->n_uses, gs->cap_uses, 1, 8)) {
        free(u);
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for a grammar's automaton");
    }
    di_grammar_retain(g);
    u->grammar = (di_grammar *)g;
    di_status st = di_matcher_create(g->gram, &u->m);
    if (!st)
        st = di_mask_cache_create(gs->n_vocab, DI_GRAMMAR_MASK_BUDGET, &u->masks);
    if (st) {
        use_free(u);
        return di_error(err, err_size, st, "out of memory for a grammar's automaton");
    }
    if ((st = di_matcher_start(u->m, &u->start))) {
        st = di_error(err, err_size, st, "starting the grammar: %s", u->m->err);
        use_free(u);
        return st;
    }
    gs->uses[gs->n_uses++] = u;
    *out = u;
    return DI_OK;
}

di_status di_seq_grammar_set(di_grammars *gs, di_seq_grammar *q, const di_grammar *g, int32_t eos,
                             const int32_t *ends, size_t n_ends, uint32_t length, char *err, size_t err_size)
{
    if (!g) {
        di_seq_grammar_drop(gs, q);
        return DI_OK;
    }
    if (n_ends > DI_GRAMMAR_MAX_END || (n_ends > 0 && !ends))
        return di_error(err, err_size, DI_ERR_INVALID_ARGUMENT, "%zu end tokens%s: at most %d", n_ends,
                        n_ends > 0 && !ends ? " in a NULL array" : "", DI_GRAMMAR_MAX_END);
    for (size_t i = 0; i < n_ends; i++)
        if (ends[i] < 0 || (uint32_t)ends[i] >= gs->n_vocab)
            return di_error(err, err_size, DI_ERR_TOKEN_RANGE, "end token %zu is %d, outside [0, %u)", i,
                            (int)ends[i], gs->n_vocab);
    di_status st = di_tokenizer_ready(gs->tok, err, err_size);
    if (st)
        return st;
    if (!gs->trie && (st = di_trie_build(gs->tok, gs->n_vocab, &gs->trie, err, err_size)))
        return st;
    uint32_t *states = malloc(16 * sizeof *states);
    if (!states)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for a sequence's grammar");
    di_grammar_use *u = NULL;
    if ((st = find_use(gs, g, &u, err, err_size))) {
        free(states);
        return st;
    }
    u->users++; /* before dropping the old one, which may be the same */
    di_seq_grammar_drop(gs, q);
    q->use = u;
    q->start = length;
    q->states = states;
    q->cap_states = 16;
    q->states[0] = u->start;
    q->n_states = 1;
    q->n_ends = 0;
    if (eos >= 0)
        q->ends[q->n_ends++] = eos;
    for (size_t i = 0; i < n_ends; i++)
        if (!di_seq_grammar_is_end(q, ends[i]))
            q->ends[q->n_ends++] = ends[i];
    return DI_OK;
}

int di_seq_grammar_is_end(const di_seq_grammar *q, int32_t token)
{
    for (uint32_t i = 0; i < q->n_ends; i++)
        if (q->ends[i] == token)
            return 1;
    return 0;
}

static uint32_t current(const di_seq_grammar *q)
{
    return q->states[q->n_states - 1];
}

/* The state after token t from state `from`: DEAD when refused. */
static di_status next_state(di_grammars *gs, di_seq_grammar *q, uint32_t from, int32_t t, uint32_t *next, char *err,
                            size_t err_size)
{
    di_matcher *m = q->use->m;
    *next = DI_MATCH_DEAD;
    if (from == DI_GSTATE_ENDED)
        return DI_OK;
    if (di_seq_grammar_is_end(q, t)) {
        if (m->states[from].can_end)
            *next = DI_GSTATE_ENDED;
        return DI_OK;
    }
    const di_token_trie *trie = gs->trie;
    const uint32_t off = trie->piece_off[t], len = trie->piece_off[t + 1] - off;
    if (len == 0 || len > DI_TRIE_MAX_PIECE)
        return DI_OK;
    di_status st = di_matcher_step_bytes(m, from, trie->piece_bytes + off, len, next);
    if (st)
        return di_error(err, err_size, st, "the grammar: %s", m->err);
    if (*next != DI_MATCH_DEAD && !m->states[*next].end_ok)
        *next = DI_MATCH_DEAD; /* it ends inside a character the grammar may refuse */
    return DI_OK;
}

di_status di_seq_grammar_check(di_grammars *gs, di_seq_grammar *q, const int32_t *tokens, uint32_t n,
                               uint32_t entry, uint32_t seq, char *err, size_t err_size)
{
    if (!DI_GROW(q->states, q->n_states, q->cap_states, n, 16))
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the grammar states of sequence %u",
                        seq);
    uint32_t s = current(q);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t next;
        di_status st = next_state(gs, q, s, tokens[i], &next, err, err_size);
        if (st)
            return st;
        if (next == DI_MATCH_DEAD) {
            const di_token_trie *t = gs->trie;
            const uint32_t off = t->piece_off[tokens[i]], len = t->piece_off[tokens[i] + 1] - off;
            return di_error(err, err_size, DI_ERR_GRAMMAR_REJECTED,
                            "entry %u: token %u (%d, \"%.*s\") is not allowed by the grammar of sequence %u "
                            "after %zu of its tokens%s", entry, i, (int)tokens[i], (int)(len < 40 ? len : 40),
                            (const char *)t->piece_bytes + off, seq, q->n_states - 1 + i,
                            s == DI_GSTATE_ENDED ? " (an end token ended it)" : "");
        }
        q->states[q->n_states + i] = s = next;
    }
    return DI_OK;
}

void di_seq_grammar_commit(di_seq_grammar *q, uint32_t n)
{
    q->n_states += n;
}

void di_seq_grammar_truncate(di_grammars *gs, di_seq_grammar *q, uint32_t length)
{
    if (!q->use)
        return;
    if (length < q->start)
        di_seq_grammar_drop(gs, q);
    else
        q->n_states = length - q->start + 1;
}

uint32_t di_seq_grammar_flags(const di_seq_grammar *q)
{
    if (!q->use)
        return 0;
    const uint32_t s = current(q);
    if (s == DI_GSTATE_ENDED)
        return DI_GRAMMAR_ACTIVE | DI_GRAMMAR_ENDED;
    const di_matcher *m = q->use->m;
    return DI_GRAMMAR_ACTIVE | (m->states[s].can_end ? DI_GRAMMAR_CAN_END : 0) |
           (di_matcher_must_end(m, s) ? DI_GRAMMAR_MUST_END : 0);
}

di_status di_seq_grammar_allows(di_grammars *gs, di_seq_grammar *q, int32_t token, int *ok, char *err,
                                size_t err_size)
{
    uint32_t next;
    di_status st = next_state(gs, q, current(q), token, &next, err, err_size);
    *ok = !st && next != DI_MATCH_DEAD;
    return st;
}

di_status di_seq_grammar_mask(di_grammars *gs, di_seq_grammar *q, const uint32_t **bits, int *can_end, char *err,
                              size_t err_size)
{
    const uint32_t s = current(q);
    *bits = NULL;
    *can_end = 0;
    if (s == DI_GSTATE_ENDED)
        return DI_OK;
    di_grammar_use *u = q->use;
    u->last_use = ++gs->clock;
    *can_end = u->m->states[s].can_end;
    di_status st = di_mask_get(u->masks, u->m, gs->trie, s, bits);
    if (st)
        return di_error(err, err_size, st, "the grammar's allowed tokens: %s",
                        st == DI_ERR_OUT_OF_MEMORY ? "out of memory" : u->m->err);
    return DI_OK;
}
