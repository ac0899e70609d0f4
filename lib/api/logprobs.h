/*
 * logprobs.h — log-probabilities of one logits row (the log-softmax at
 * temperature 1, no filter), in the order of docs/DETERMINISM.md,
 * "Log-probabilities". di_session_logprobs checks the arguments and pins the
 * floating-point environment; this computes.
 */
#ifndef DI_LOGPROBS_H
#define DI_LOGPROBS_H

#include <stdint.h>

#include "lib/api/sampling.h"

/* With token >= 0, *token_logprob gets token's log-probability; the n_top
 * most likely tokens, ordered by (log-probability descending, id ascending,
 * NaN last), go to top_tokens and top_logprobs. logits: scratch->n_vocab
 * values, left unchanged; scratch: the session's sampler arrays (z, p, heap
 * and ord are overwritten). token < n_vocab and n_top <= n_vocab. */
void di_logprobs(di_sampler *scratch, const float *logits, int32_t token, float *token_logprob, uint32_t n_top,
                 int32_t *top_tokens, float *top_logprobs);

#endif /* DI_LOGPROBS_H */
