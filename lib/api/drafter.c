/*
 * drafter.c — a draft model for speculative decoding (di_drafter): a smaller
 * model with the same vocabulary, in a session of its own, proposes the
 * tokens it would choose greedily after a sequence of the model's session.
 * What it proposes changes only the speed: di_session_seq_accept_draft keeps
 * the output that of decoding without speculation (docs/DETERMINISM.md,
 * "Speculative decoding").
 */
#include <stdlib.h>
#include <string.h>

#include "lib/model/model.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/api/session_internal.h"

struct di_drafter {
    const di_model *draft;
    di_session *session; /* of the draft model; its sequence i shadows sequence i of the model's */
};

/* 1 when the two vocabularies give every id the same text (or neither has
 * a tokenizer and their sizes agree); else the first id that differs. */
static di_status same_vocabulary(const di_model *a, const di_model *b, char *err, size_t es)
{
    if (a->n_vocab != b->n_vocab)
        return di_error(err, es, DI_ERR_MODEL, "the draft model's vocabulary has %u tokens, the model's %u: "
                        "a draft model must share the model's vocabulary", b->n_vocab, a->n_vocab);
    const int with_a = di_tokenizer_ready(a->tokenizer, NULL, 0) == DI_OK;
    const int with_b = di_tokenizer_ready(b->tokenizer, NULL, 0) == DI_OK;
    if (with_a != with_b)
        return di_error(err, es, DI_ERR_MODEL, "one model has a tokenizer and the other has none: a draft model "
                        "must share the model's vocabulary");
    for (uint32_t t = 0; with_a && t < a->n_vocab; t++) {
        char *pa = NULL, *pb = NULL;
        size_t la = 0, lb = 0;
        di_status st = di_tokenizer_piece(a->tokenizer, (int32_t)t, &pa, &la, err, es);
        if (!st)
            st = di_tokenizer_piece(b->tokenizer, (int32_t)t, &pb, &lb, err, es);
        const int differ = !st && (la != lb || memcmp(pa, pb, la));
        free(pa);
        free(pb);
        if (st)
            return st;
        if (differ)
            return di_error(err, es, DI_ERR_MODEL, "token %u has another text in the draft model: a draft model "
                            "must share the model's vocabulary", t);
    }
    return DI_OK;
}

DI_API di_status di_drafter_create(const di_model *model, const di_model *draft, const di_config *config,
                                   di_drafter **out, char *errbuf, size_t errbuf_size)
{
    if (errbuf && errbuf_size)
        errbuf[0] = '\0';
    if (!out)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!model || !draft || !config)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "model, draft or config is NULL");
    di_status st = same_vocabulary(model, draft, errbuf, errbuf_size);
    if (st)
        return st;
    di_drafter *d = calloc(1, sizeof *d);
    if (!d)
        return di_error(errbuf, errbuf_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the drafter");
    d->draft = draft;
    if ((st = di_session_create(draft, config, &d->session, errbuf, errbuf_size))) {
        free(d);
        return st;
    }
    *out = d;
    return DI_OK;
}

DI_API void di_drafter_free(di_drafter *d)
{
    if (!d)
        return;
    di_session_free(d->session);
    free(d);
}

DI_API const char *di_drafter_errmsg(const di_drafter *d)
{
    return d ? di_session_errmsg(d->session) : "drafter is NULL";
}

DI_API di_status di_drafter_propose(di_drafter *d, di_session *s, uint32_t seq, int32_t next, uint32_t max_draft,
                                    int32_t *draft, uint32_t *n_draft)
{
    if (!d)
        return DI_ERR_INVALID_ARGUMENT;
    di_session *ds = d->session;
    ds->errmsg[0] = '\0';
    if (!s || !n_draft || (!draft && max_draft > 0))
        return di_session_fail(ds, DI_ERR_INVALID_ARGUMENT, "session, draft or n_draft is NULL");
    *n_draft = 0;
    if (max_draft > DI_DRAFT_MAX)
        return di_session_fail(ds, DI_ERR_INVALID_ARGUMENT, "max_draft %u is over %u", max_draft, DI_DRAFT_MAX);
    if (s->model->n_vocab != d->draft->n_vocab)
        return di_session_fail(ds, DI_ERR_INVALID_ARGUMENT, "the session's model is not the drafter's model");
    if (seq >= s->max_sequences || seq >= ds->max_sequences)
        return di_session_fail(ds, DI_ERR_SEQUENCE, "sequence %u is outside the session's or the drafter's", seq);
    if (next < 0 || (uint32_t)next >= s->model->n_vocab)
        return di_session_fail(ds, DI_ERR_TOKEN_RANGE, "next token %d is outside [0, %u)", (int)next,
                               s->model->n_vocab);
    /* the history the draft continues: the sequence's tokens, then next */
    const sequence *q = &s->seqs[seq];
    const uint32_t len = q->length + 1;
    if (len + max_draft > s->ctx_len) /* the step of next and the draft must fit the model's context */
        max_draft = s->ctx_len > len ? s->ctx_len - len : 0;
    if (len + max_draft > ds->ctx_len) /* and the draft model's */
        max_draft = ds->ctx_len > len ? ds->ctx_len - len : 0;
    if (max_draft == 0)
        return DI_OK;
    int32_t *h = malloc((size_t)len * sizeof *h);
    if (!h)
        return di_session_fail(ds, DI_ERR_OUT_OF_MEMORY, "out of memory for %u tokens", len);
    memcpy(h, q->tokens, (size_t)q->length * sizeof *h);
    h[len - 1] = next;
    /* the drafter's sequence keeps what it holds of the history (at least
     * one token is stepped, for the logits) and steps the rest */
    const sequence *dq = &ds->seqs[seq];
    uint32_t keep = 0;
    while (keep < dq->length && keep + 1 < len && dq->tokens[keep] == h[keep])
        keep++;
    di_status st = di_session_seq_truncate(ds, seq, keep);
    const uint32_t rest = len - keep;
    if (!st)
        st = di_session_step(ds, 1, &seq, &rest, h + keep, 0);
    free(h);
    uint32_t n = 0;
    while (!st && n < max_draft) {
        st = di_session_greedy_token(ds, seq, &draft[n]);
        if (!st && ++n < max_draft) {
            const uint32_t one = 1;
            st = di_session_step(ds, 1, &seq, &one, &draft[n - 1], 0);
        }
    }
    if (st)
        return st; /* the drafter's message says why; its sequence is rebuilt next time */
    /* a grammar: the draft ends before the first token it would refuse */
    if ((st = di_session_draft_fit_grammar(s, seq, next, draft, &n)))
        return di_session_fail(ds, st, "%s", di_session_errmsg(s));
    *n_draft = n;
    return DI_OK;
}
