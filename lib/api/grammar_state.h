/*
 * grammar_state.h — the grammar state of a session: each grammar in use
 * has its automaton and allowed-token cache (shared by the sequences that
 * use it, and kept a while after), and each sequence the grammar's state
 * after every token since its start (so that truncate restores it exactly).
 */
#ifndef DI_GRAMMAR_STATE_H
#define DI_GRAMMAR_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"
#include "lib/grammar/gram_mask.h"
#include "lib/grammar/gram_match.h"
#include "lib/api/grammar_api.h"
#include "lib/grammar/token_trie.h"

#define DI_GRAMMAR_MAX_END 8             /* end tokens a caller may give */
#define DI_GRAMMAR_KEEP_IDLE 4           /* grammars kept warm with no sequence using them */
#define DI_GRAMMAR_MASK_BUDGET (32u << 20) /* bytes of allowed-token sets per grammar */
#define DI_GSTATE_ENDED (UINT32_MAX - 1) /* after an end token: nothing more */

typedef struct di_grammar_use {
    di_grammar *grammar;     /* a reference */
    di_matcher *m;
    di_mask_cache *masks;
    uint32_t start;          /* the automaton's first state */
    uint32_t users;          /* sequences using it */
    uint64_t last_use;
} di_grammar_use;

/* A session's grammars. */
typedef struct di_grammars {
    const di_tokenizer *tok;
    uint32_t n_vocab;
    di_token_trie *trie;     /* the vocabulary's, built with the first grammar */
    di_grammar_use **uses;
    size_t n_uses, cap_uses;
    uint64_t clock;
} di_grammars;

/* A sequence's grammar. */
typedef struct di_seq_grammar {
    di_grammar_use *use;     /* NULL: none */
    uint32_t start;          /* the sequence's length when it was set */
    uint32_t *states;        /* states[k]: after the first k tokens past start */
    size_t n_states, cap_states;
    int32_t ends[DI_GRAMMAR_MAX_END + 1];
    uint32_t n_ends;
} di_seq_grammar;

void di_grammars_init(di_grammars *gs, const di_tokenizer *tok, uint32_t n_vocab);
void di_grammars_release(di_grammars *gs);

/* Gives q grammar g (NULL: none), starting at `length` tokens; the model's
 * EOS (eos >= 0) and ends[0..n_ends) end it. */
di_status di_seq_grammar_set(di_grammars *gs, di_seq_grammar *q, const di_grammar *g, int32_t eos,
                             const int32_t *ends, size_t n_ends, uint32_t length, char *err, size_t err_size);
void di_seq_grammar_drop(di_grammars *gs, di_seq_grammar *q);

/* Checks the n tokens of one step entry (seq's) against q's grammar and
 * writes their states past the current ones, which do not change until
 * di_seq_grammar_commit: DI_ERR_GRAMMAR_REJECTED naming the token. */
di_status di_seq_grammar_check(di_grammars *gs, di_seq_grammar *q, const int32_t *tokens, uint32_t n,
                               uint32_t entry, uint32_t seq, char *err, size_t err_size);
void di_seq_grammar_commit(di_seq_grammar *q, uint32_t n);
/* The sequence now holds `length` tokens: the state of that length, or no
 * grammar when it is shorter than the start. */
void di_seq_grammar_truncate(di_grammars *gs, di_seq_grammar *q, uint32_t length);

/* DI_GRAMMAR_* flags of q's current state. */
uint32_t di_seq_grammar_flags(const di_seq_grammar *q);
int di_seq_grammar_is_end(const di_seq_grammar *q, int32_t token);
/* Whether token is allowed next. */
di_status di_seq_grammar_allows(di_grammars *gs, di_seq_grammar *q, int32_t token, int *ok, char *err,
                                size_t err_size);
/* The allowed tokens with text (end tokens aside: allowed when *can_end),
 * valid until the next call on gs; *bits NULL after an end token. */
di_status di_seq_grammar_mask(di_grammars *gs, di_seq_grammar *q, const uint32_t **bits, int *can_end,
                              char *err, size_t err_size);

#endif /* DI_GRAMMAR_STATE_H */
