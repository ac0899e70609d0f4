/*
 * session_grammar.c — the session's grammar calls on its sequences: the
 * public calls (di_session_seq_set_grammar, di_session_seq_grammar_state,
 * di_session_seq_grammar_allowed), over grammar_state.c, and the choice of
 * a token under a grammar (docs/DETERMINISM.md, "Grammars"):
 *   1. the mask: a token is allowed when its text keeps the grammar alive
 *      (an end token: when the grammar's text is complete);
 *   2. the sampling order over the row with every other token removed (a
 *      removed token is treated as a NaN logit is: never a candidate, weight
 *      +0); greedy: the lowest id among the allowed with the largest logit;
 *   3. when no allowed token has a logit that is not NaN: the lowest allowed id.
 * Greedy first tries the unmasked greedy token: when the grammar allows it,
 * it is the answer (it is the lowest id with the largest logit of all), and
 * no mask is needed.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/base/fpenv.h"
#include "lib/model/model.h"
#include "kernels/common/numerics.h"
#include "lib/api/session_internal.h"

DI_API di_status di_session_seq_set_grammar(di_session *s, uint32_t seq, const di_grammar *grammar,
                                            const int32_t *end_tokens, size_t n_end_tokens)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, s, &q); /* no output pointer */
    if (st)
        return st;
    const int32_t eos = di_tokenizer_eos(s->model->tokenizer);
    return di_seq_grammar_set(&s->grammars, &q->grammar, grammar, eos, end_tokens, n_end_tokens, q->length,
                              s->errmsg, sizeof s->errmsg);
}

DI_API di_status di_session_seq_grammar_state(di_session *s, uint32_t seq, uint32_t *flags)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, flags, &q);
    if (st)
        return st;
    *flags = di_seq_grammar_flags(&q->grammar);
    return DI_OK;
}

static int bit(const uint32_t *bits, uint32_t t)
{
    return (bits[t / 32] >> (t % 32)) & 1;
}

DI_API di_status di_session_seq_grammar_allowed(di_session *s, uint32_t seq, uint32_t *words, size_t n_words)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, words, &q);
    if (st)
        return st;
    const uint32_t n_vocab = s->model->n_vocab, need = (n_vocab + 31) / 32;
    if (n_words < need)
        return di_session_fail(s, DI_ERR_BUFFER_TOO_SMALL, "%zu words hold fewer than the %u tokens", n_words,
                               n_vocab);
    memset(words, 0, n_words * sizeof *words);
    if (!q->grammar.use) {
        for (uint32_t t = 0; t < n_vocab; t++)
            words[t / 32] |= 1u << (t % 32);
        return DI_OK;
    }
    const uint32_t *bits;
    int can_end;
    if ((st = di_seq_grammar_mask(&s->grammars, &q->grammar, &bits, &can_end, s->errmsg, sizeof s->errmsg)))
        return st;
    if (bits)
        memcpy(words, bits, need * sizeof *words);
    for (uint32_t i = 0; i < q->grammar.n_ends; i++) { /* end tokens: by the grammar's end alone */
        const uint32_t t = (uint32_t)q->grammar.ends[i];
        words[t / 32] = (words[t / 32] & ~(1u << (t % 32))) | ((uint32_t)(bits && can_end) << (t % 32));
    }
    return DI_OK;
}

/* 1 when token t is allowed under (bits, can_end). */
static int allowed(const sequence *q, const uint32_t *bits, int can_end, uint32_t t)
{
    return di_seq_grammar_is_end(&q->grammar, (int32_t)t) ? can_end : bit(bits, t);
}

/* The lowest id among the allowed with the largest non-NaN logit; *lowest:
 * the lowest allowed id (-1 when none is). */
static int32_t masked_argmax(const sequence *q, const float *logits, uint32_t n_vocab, const uint32_t *bits,
                             int can_end, int32_t *lowest)
{
    int32_t best = -1;
    *lowest = -1;
    for (uint32_t w = 0; w < (n_vocab + 31) / 32; w++) {
        uint32_t word = bits[w];
        while (word) {
            const uint32_t t = w * 32 + (uint32_t)__builtin_ctz(word);
            word &= word - 1;
            if (di_seq_grammar_is_end(&q->grammar, (int32_t)t))
                continue;
            if (*lowest < 0)
                *lowest = (int32_t)t;
            const float x = logits[t];
            if (x == x && (best < 0 || x > logits[best]))
                best = (int32_t)t;
        }
    }
    for (uint32_t i = 0; can_end && i < q->grammar.n_ends; i++) {
        const int32_t t = q->grammar.ends[i];
        if (*lowest < 0 || t < *lowest)
            *lowest = t;
        const float x = logits[t];
        if (x == x && (best < 0 || x > logits[best] || (x == logits[best] && t < best)))
            best = t;
    }
    return best;
}

di_status di_session_grammar_choose(di_session *s, uint32_t seq, sequence *q, int sample, int32_t *token)
{
    const uint32_t n_vocab = s->model->n_vocab;
    const di_sampling_params *p = &q->sampling;
    const int greedy = !sample || di_sampling_is_greedy(p);
    di_status st;
    if (greedy) { /* the unmasked greedy token, when allowed, is the masked one */
        int ok;
        if ((st = di_seq_grammar_allows(&s->grammars, &q->grammar, q->greedy, &ok, s->errmsg, sizeof s->errmsg)))
            return st;
        if (ok) {
            *token = q->greedy;
            return DI_OK;
        }
    }
    const uint32_t *bits;
    int can_end;
    if ((st = di_seq_grammar_mask(&s->grammars, &q->grammar, &bits, &can_end, s->errmsg, sizeof s->errmsg)))
        return st;
    int32_t lowest = -1, best = -1;
    if (bits)
        best = masked_argmax(q, q->last_logits, n_vocab, bits, can_end, &lowest);
    if (lowest < 0)
        return di_session_fail(s, DI_ERR_GRAMMAR_REJECTED,
                               "the grammar of sequence %u allows no token: %s", seq,
                               bits ? "its text is complete and the sequence has no end token"
                                    : "an end token ended it");
    if (greedy) {
        *token = best >= 0 ? best : lowest;
        return DI_OK;
    }
    /* sampling: the order of sampling.c over the row with the disallowed removed */
    if (!s->masked && !(s->masked = malloc((size_t)n_vocab * sizeof *s->masked)))
        return di_session_fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for a masked row of %u tokens", n_vocab);
    if (!s->sampler.z && di_sampler_init(&s->sampler, n_vocab))
        return di_session_fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for the sampler of %u tokens", n_vocab);
    const float removed = di_float_from_bits(0x7fc00000u);
    for (uint32_t t = 0; t < n_vocab; t++)
        s->masked[t] = bit(bits, t) ? q->last_logits[t] : removed;
    for (uint32_t i = 0; i < q->grammar.n_ends; i++) /* end tokens: by the grammar's end alone */
        s->masked[q->grammar.ends[i]] = can_end ? q->last_logits[q->grammar.ends[i]] : removed;
    const uint32_t window = p->penalty_window == 0 || p->penalty_window > q->length ? q->length : p->penalty_window;
    di_fpenv saved;
    di_fpenv_enter(&saved);
    int32_t t = di_sample(&s->sampler, p, s->masked, q->tokens + (q->length - window), window, q->length);
    di_fpenv_leave(&saved);
    *token = allowed(q, bits, can_end, (uint32_t)t) ? t : lowest; /* no allowed logit but NaN */
    return DI_OK;
}
