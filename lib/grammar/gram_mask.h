/*
 * gram_mask.h — the tokens a grammar state allows, as a bit set over the
 * vocabulary, computed by walking the token trie against the automaton and
 * kept per state (docs/STRUCTURED.md, "Speed").
 *
 * For a state S and its local state L (gram_match.h): the walk from L gives
 * the tokens accepted whatever lies below the cut, and the subtrees of
 * tokens that reached the cut before their end ("uncertain"); S's set is L's
 * accepted tokens plus the uncertain ones S itself accepts, each checked by
 * stepping its bytes. Both L's result and S's set are cached: states that
 * share a local state (every string of a JSON schema) walk the trie once.
 * The cache holds at most its budget of bytes, dropping the least recently
 * used sets (a dropped set is computed again when needed: the same bits).
 */
#ifndef DI_GRAM_MASK_H
#define DI_GRAM_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "lib/grammar/gram_match.h"
#include "lib/grammar/token_trie.h"

typedef struct di_mask_cache di_mask_cache;

di_status di_mask_cache_create(uint32_t n_vocab, size_t budget, di_mask_cache **out);
void di_mask_cache_free(di_mask_cache *c);
size_t di_mask_cache_bytes(const di_mask_cache *c);

/* The allowed tokens of `state` among the trie's ones (tokens with text):
 * bit t % 32 of (*bits)[t / 32]. Valid until the next call on c. Errors are
 * the matcher's (m->err). */
di_status di_mask_get(di_mask_cache *c, di_matcher *m, const di_token_trie *trie, uint32_t state,
                      const uint32_t **bits);

/* 1 when token t's text is accepted from `state` (stepping its bytes). */
di_status di_mask_token_ok(di_matcher *m, const di_token_trie *trie, uint32_t state, uint32_t t, int *ok);

#endif /* DI_GRAM_MASK_H */
