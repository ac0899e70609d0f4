/*
 * gram_match.h — running a compiled grammar over bytes: a lazily built
 * deterministic automaton whose states are sets of parse stacks.
 *
 * A stack is a chain of nodes (position, parent), interned, so equal stacks
 * are one node id and stacks share their tails. Node 0 is the empty stack
 * (the grammar's text is complete), node 1 the HOLE: a stack's unknown rest,
 * used by the local states below. A stack's top is a CHARS position (the
 * next code point must be in its set), or the empty stack, or the HOLE; the
 * nodes below it are the positions to continue at after each rule
 * completes.
 *
 * A state is a sorted set of stack tops plus a partial UTF-8 sequence (the
 * bytes of a code point not complete yet), interned too. A byte moves a
 * state to another one or to DEAD; transitions are cached in a table per
 * state, so a byte string the automaton has seen costs one lookup per byte.
 * The text is read as UTF-8: a byte sequence that is not valid UTF-8
 * (overlong, a surrogate, past U+10FFFF, a stray continuation) is DEAD.
 * A token may end inside a character (a state with a partial one) when some
 * stack's set holds a valid completion of it and, when that set was written
 * negated ([^...]), every code point its bits may begin: the range from the
 * bits followed by zeros to the bits followed by ones (llama.cpp's rule for
 * such a token, so that what is allowed here llama.cpp allows too).
 *
 * The local state of a state: its stacks with the deepest node that lies
 * below every top replaced by the HOLE. Two states that differ only below
 * that node (a string inside one object or another) share their local
 * state, and so the work of the allowed-token walk (gram_mask.c). A byte
 * string from a local state whose stacks all reach the HOLE before it ends
 * depends on the rest, and is checked against the real state.
 *
 * Everything is bounded (DI_MATCH_MAX_*): past a bound a call gives
 * DI_ERR_GRAMMAR with the reason, never a crash.
 */
#ifndef DI_GRAM_MATCH_H
#define DI_GRAM_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "lib/grammar/gram_ir.h"

#define DI_MATCH_DEAD UINT32_MAX
#define DI_NODE_EMPTY 0u
#define DI_NODE_HOLE 1u

#define DI_MATCH_MAX_STACKS 1024u        /* stacks in one state (parses at once) */
#define DI_MATCH_MAX_DEPTH 65536u        /* nodes in one stack */
#define DI_MATCH_MAX_BYTES (512u << 20)  /* nodes, states and transitions together */

typedef struct di_match_state {
    uint32_t first, n;       /* its tops: stacks[first .. first + n) */
    uint32_t partial;        /* bits of the code point read so far */
    uint8_t remaining;       /* continuation bytes still to come (0: none) */
    uint8_t length;          /* bytes of that code point */
    uint8_t can_end;         /* the empty stack is a top, no partial code point */
    uint8_t has_hole;        /* the HOLE is a top */
    uint8_t end_ok;          /* a token may end here (see the partial character above) */
} di_match_state;

typedef struct di_matcher {
    const di_gram *g;
    /* nodes */
    uint32_t *node_pos, *node_parent, *node_depth;
    size_t n_nodes, cap_nodes;
    uint32_t *node_table;    /* open addressing: node id + 1, 0 empty */
    size_t node_table_cap;
    /* states */
    di_match_state *states;
    size_t n_states, cap_states;
    uint32_t *stacks;        /* the tops of every state, state by state */
    size_t n_stacks, cap_stacks;
    uint32_t *state_table;
    size_t state_table_cap;
    uint32_t **rows;         /* [n_states]: 256 cached transitions (next + 2; 1 dead; 0 unknown), or NULL */
    size_t bytes;            /* memory held, against DI_MATCH_MAX_BYTES */
    /* scratch of one closure */
    uint32_t *work, *out, *seen;
    size_t cap_work, n_out, cap_out, seen_cap;
    uint32_t seen_gen;       /* the closure the entries of `seen` marked now belong to */
    char err[256];
} di_matcher;

di_status di_matcher_create(const di_gram *g, di_matcher **out);
void di_matcher_free(di_matcher *m);

/* The state before any byte: the root rule's expansion. */
di_status di_matcher_start(di_matcher *m, uint32_t *state);

/* The state after byte b (DI_MATCH_DEAD when the grammar refuses it). A
 * failure (a bound, out of memory) has m->err. */
di_status di_matcher_step_slow(di_matcher *m, uint32_t state, uint8_t b, uint32_t *next);

static inline di_status di_matcher_step(di_matcher *m, uint32_t state, uint8_t b, uint32_t *next)
{
    const uint32_t *row = m->rows[state];
    if (row && row[b]) {
        *next = row[b] == 1 ? DI_MATCH_DEAD : row[b] - 2;
        return DI_OK;
    }
    return di_matcher_step_slow(m, state, b, next);
}

/* The state after n bytes (DEAD as soon as one is refused). */
di_status di_matcher_step_bytes(di_matcher *m, uint32_t state, const unsigned char *bytes, size_t n,
                                uint32_t *next);

/* The local state of state (itself when no node lies below every top: a
 * top is the empty stack, or the tops share nothing but the bottom). */
di_status di_matcher_local(di_matcher *m, uint32_t state, uint32_t *local);

/* 1 when only the empty stack is left: the text is complete and nothing
 * may follow it. */
int di_matcher_must_end(const di_matcher *m, uint32_t state);

#endif /* DI_GRAM_MATCH_H */
