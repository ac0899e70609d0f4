/*
 * speculate.c — speculative decoding that changes no bit
 * (docs/DETERMINISM.md, "Speculative decoding").
 *
 * A position's logits are the same bits whether it is stepped alone or
 * inside a chunk, and the token chosen at a position is a function of those
 * logits, the sequence's tokens before it (penalties), its length (the
 * sampling counter) and its grammar state there. So a step that appends the
 * chosen token t0 and draft tokens d1..dk with all logits kept gives, at
 * row i, exactly what decoding without speculation would have seen after
 * t0 d1..di: accepting while the choice equals the next draft token, and
 * truncating the rest, leaves the sequence as decoding would have left it.
 */
#include "lib/api/speculate.h"

#include <string.h>

#include "lib/base/growable.h"
#include "lib/backend/cpu/host_ops.h"
#include "lib/model/model.h"
#include "lib/api/session_internal.h"

int di_speculate_test_accept_one_wrong;

/* Makes row `row` of the last all-logits step q's current result, as a step
 * that ended there would have: logits, digest, greedy token. */
static void take_row(di_session *s, sequence *q, size_t row)
{
    const uint32_t n_vocab = s->model->n_vocab;
    const float *logits = s->all_logits + row * n_vocab;
    memcpy(q->last_logits, logits, (size_t)n_vocab * sizeof *logits);
    q->last_digest = s->all_digests[row];
    q->greedy = (int32_t)di_host_argmax(logits, n_vocab);
    q->has_result = 1;
}

DI_API di_status di_session_seq_accept_draft(di_session *s, uint32_t seq, uint32_t n_draft, uint32_t *n_accepted,
                                             int32_t *next)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, n_accepted, &q);
    if (st)
        return st;
    if (!next)
        return di_session_fail(s, DI_ERR_INVALID_ARGUMENT, "an output pointer is NULL");
    if (q->all_serial == 0 || q->all_serial != s->serial)
        return di_session_fail(s, DI_ERR_STATE,
                               "sequence %u was not stepped with DI_STEP_ALL_LOGITS in the session's last step", seq);
    if (n_draft >= q->all_count)
        return di_session_fail(s, DI_ERR_INVALID_ARGUMENT,
                               "a draft of %u tokens needs a step of at least %u tokens; sequence %u's appended %u",
                               n_draft, n_draft + 1, seq, q->all_count);
    const uint32_t full = q->length, base = full - n_draft; /* tokens before the first draft token */
    if (q->grammar.use && q->grammar.start > base)
        return di_session_fail(s, DI_ERR_STATE, "sequence %u's grammar was set after its draft was stepped", seq);
    const size_t first_row = q->all_first + (q->all_count - n_draft - 1);
    const size_t full_states = q->grammar.n_states;
    uint32_t accepted = 0;
    int32_t chosen = 0;
    /* Row i as the sequence's result at length base + i, then the choice of
     * di_session_sample_token there (greedy with the default parameters). */
    for (uint32_t i = 0; i <= n_draft; i++) {
        q->length = base + i;
        if (q->grammar.use)
            q->grammar.n_states = base + i - q->grammar.start + 1;
        take_row(s, q, first_row + i);
        st = di_session_sample_token(s, seq, &chosen);
        if (st == DI_ERR_GRAMMAR_REJECTED) { /* the grammar ended: nothing may follow these */
            accepted = i;
            chosen = -1;
            break;
        }
        if (st) { /* nothing changed: the step's sequence as it was */
            q->length = full;
            q->grammar.n_states = full_states;
            take_row(s, q, first_row + n_draft);
            return st;
        }
        accepted = i;
        if (i == n_draft)
            break;
        if (chosen != q->tokens[base + i]) {
            if (!di_speculate_test_accept_one_wrong)
                break;
            di_speculate_test_accept_one_wrong = 0; /* TEST ONLY: a wrong acceptance */
        }
    }
    q->length = full;
    q->grammar.n_states = full_states;
    const size_t all_first = q->all_first;
    const uint32_t kept = q->all_count - n_draft + accepted;
    di_session_set_length(s, seq, base + accepted);
    take_row(s, q, first_row + accepted);
    /* the rows of the positions kept stay readable (di_session_logits_at,
     * di_session_logprobs_at) until the next step */
    q->all_serial = s->serial;
    q->all_first = all_first;
    q->all_count = kept;
    *n_accepted = accepted;
    *next = chosen;
    return st; /* DI_OK, or DI_ERR_GRAMMAR_REJECTED with its message */
}

di_status di_session_draft_fit_grammar(di_session *s, uint32_t seq, int32_t next, const int32_t *draft, uint32_t *n)
{
    sequence *q = &s->seqs[seq];
    if (!q->grammar.use || *n == 0)
        return DI_OK;
    int32_t path[DI_DRAFT_MAX + 1];
    path[0] = next;
    memcpy(path + 1, draft, *n * sizeof *draft);
    /* the states are written past the sequence's and not committed */
    for (uint32_t j = 0; j <= *n; j++) {
        di_status st = di_seq_grammar_check(&s->grammars, &q->grammar, path, j + 1, 0, seq, s->errmsg,
                                            sizeof s->errmsg);
        if (st == DI_ERR_GRAMMAR_REJECTED) {
            s->errmsg[0] = '\0';
            *n = j == 0 ? 0 : j - 1;
            return DI_OK;
        }
        if (st)
            return st;
    }
    return DI_OK;
}

/* The longest-key match: the latest earlier place where the last n tokens
 * of h (n = ngram down to 1) occur with a token after them; the tokens
 * after it, at most max. */
static uint32_t lookup(const int32_t *h, uint32_t len, uint32_t ngram, uint32_t max, const int32_t **from)
{
    for (uint32_t n = ngram < len ? ngram : len - 1; n >= 1; n--) {
        const int32_t *key = h + len - n;
        for (uint32_t end = len - 1; end-- > n - 1;) { /* the match is h[end-n+1 .. end] */
            if (memcmp(h + end + 1 - n, key, n * sizeof *key))
                continue;
            const uint32_t avail = len - 1 - end;
            *from = h + end + 1;
            return avail < max ? avail : max;
        }
    }
    return 0;
}

DI_API di_status di_session_seq_draft_lookup(di_session *s, uint32_t seq, int32_t next, uint32_t ngram,
                                             uint32_t max_draft, int32_t *draft, uint32_t *n_draft)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, n_draft, &q);
    if (st)
        return st;
    if (!draft && max_draft > 0)
        return di_session_fail(s, DI_ERR_INVALID_ARGUMENT, "draft is NULL with max_draft %u", max_draft);
    if (ngram < 1 || ngram > DI_DRAFT_MAX_NGRAM)
        return di_session_fail(s, DI_ERR_INVALID_ARGUMENT, "ngram %u is outside [1, %u]", ngram, DI_DRAFT_MAX_NGRAM);
    if (max_draft > DI_DRAFT_MAX)
        return di_session_fail(s, DI_ERR_INVALID_ARGUMENT, "max_draft %u is over %u", max_draft, DI_DRAFT_MAX);
    if (next < 0 || (uint32_t)next >= s->model->n_vocab)
        return di_session_fail(s, DI_ERR_TOKEN_RANGE, "next token %d is outside [0, %u)", (int)next,
                               s->model->n_vocab);
    *n_draft = 0;
    /* the step will hold next and the draft: both within the context */
    if (q->length + 1 >= s->ctx_len)
        return DI_OK;
    if (max_draft > s->ctx_len - q->length - 1)
        max_draft = s->ctx_len - q->length - 1;
    /* the history with next after it, written past the sequence's length
     * (not part of it: the next step writes its own tokens there) */
    if (!DI_GROW(q->tokens, q->length, q->tokens_capacity, q->length + 1, 64))
        return di_session_fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for the history of sequence %u", seq);
    q->tokens[q->length] = next; /* past the length: not part of the sequence */
    const int32_t *from = NULL;
    uint32_t n = lookup(q->tokens, q->length + 1, ngram, max_draft, &from);
    if (n == 0)
        return DI_OK;
    memmove(draft, from, n * sizeof *draft);
    if ((st = di_session_draft_fit_grammar(s, seq, next, draft, &n)))
        return st;
    *n_draft = n;
    return DI_OK;
}
