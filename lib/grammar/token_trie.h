/*
 * token_trie.h — the vocabulary as a trie of its tokens' bytes, for the
 * allowed-token walk (gram_mask.c): the text each token stands for inside
 * decoded text (the tokenizer's piece: SentencePiece's U+2581 as a space,
 * byte tokens as their byte), tokens with no text (control, unknown, unused)
 * or one holding a NUL byte left out. Nodes are in preorder, so a subtree is a run of nodes and its
 * tokens a run of `order`; a walk skips a dead subtree in one jump.
 */
#ifndef DI_TOKEN_TRIE_H
#define DI_TOKEN_TRIE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/tokenizer/tokenizer.h"

#define DI_TRIE_MAX_PIECE 1024u /* a longer token is left out (never allowed by a grammar) */

typedef struct di_token_trie {
    uint32_t n_vocab;
    uint32_t *piece_off;          /* [n_vocab + 1]: token t's text is piece_bytes[off[t] .. off[t + 1]) */
    unsigned char *piece_bytes;
    uint32_t *order;              /* the tokens in the trie, sorted by their bytes */
    uint32_t n_order;
    /* nodes; node 0 is the root (the empty text) */
    uint8_t *byte;                /* the byte of the edge into the node */
    uint16_t *depth;
    uint32_t *end;                /* the node after its subtree */
    uint32_t *sub_lo;             /* its subtree's tokens start at order[sub_lo]; its own come first */
    uint16_t *n_here;             /* tokens whose text ends here */
    uint32_t n_nodes;
    uint32_t max_depth;
} di_token_trie;

/* The trie of t's vocabulary of n_vocab tokens. */
di_status di_trie_build(const di_tokenizer *t, uint32_t n_vocab, di_token_trie **out, char *err, size_t err_size);
void di_trie_free(di_token_trie *trie);

/* The tokens of node i's subtree: order[sub_lo[i] .. di_trie_sub_hi(trie, i)). */
static inline uint32_t di_trie_sub_hi(const di_token_trie *trie, uint32_t i)
{
    return trie->end[i] < trie->n_nodes ? trie->sub_lo[trie->end[i]] : trie->n_order;
}

#endif /* DI_TOKEN_TRIE_H */
