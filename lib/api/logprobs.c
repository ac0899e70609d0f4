/*
 * logprobs.c — the log-softmax of a logits row (docs/DETERMINISM.md,
 * "Log-probabilities"):
 *   1. max = the largest non-NaN logit;
 *   2. weights exp(z - max) (1 at the max, +0 for NaN) and their canonical
 *      sum S in token-id order: step 4 of sampling, shared (sampling.c);
 *   3. L = di_logf(S) (numerics.h: no libm);
 *   4. logprob(v) = d - L, d = 0 where z == max, z - max elsewhere (NaN
 *      for a NaN logit);
 *   5. the top n in the candidate order of sampling over the logprobs
 *      (descending, id ascending), NaN entries after them by id.
 * Every value is a function of the logits alone, so it has their bits'
 * determinism.
 */
#include "lib/api/logprobs.h"

#include "kernels/common/numerics.h"

void di_logprobs(di_sampler *s, const float *logits, int32_t token, float *token_logprob, uint32_t n_top,
                 int32_t *top_tokens, float *top_logprobs)
{
    const uint32_t n = s->n_vocab;
    float max = 0.0f;
    int have_max = 0;
    for (uint32_t v = 0; v < n; v++)
        if (logits[v] == logits[v] && (!have_max || logits[v] > max)) {
            max = logits[v];
            have_max = 1;
        }
    const float nan = di_float_from_bits(0x7fc00000u);
    float *lp = s->z;
    if (!have_max) { /* every logit NaN */
        for (uint32_t v = 0; v < n; v++)
            lp[v] = nan;
    } else {
        const float log_sum = di_logf(di_softmax_weights(logits, n, max, s->p));
        for (uint32_t v = 0; v < n; v++) {
            const float z = logits[v];
            lp[v] = z != z ? nan : (z == max ? 0.0f : z - max) - log_sum;
        }
    }
    if (token >= 0)
        *token_logprob = lp[token];
    if (n_top == 0)
        return;
    uint32_t got = di_candidate_head(lp, n, n_top, s->heap, s->ord);
    for (uint32_t j = 0; j < got; j++) {
        top_tokens[j] = (int32_t)s->ord[j];
        top_logprobs[j] = lp[s->ord[j]];
    }
    for (uint32_t v = 0; v < n && got < n_top; v++) /* NaN entries, by id */
        if (lp[v] != lp[v]) {
            top_tokens[got] = (int32_t)v;
            top_logprobs[got++] = nan;
        }
}
