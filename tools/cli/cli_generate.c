/*
 * cli_generate.c — the generation loops of run and bench (cli_generate.h).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_generate.h"

/* Hands a generated token over; 1 when the generation ends with it (its
 * end-of-sequence token, or max_new). */
static int take(cli_generation *g, int32_t token, const di_digest *digest)
{
    g->take(g->ctx, token, digest);
    g->n_generated++;
    if (token == g->eos)
        g->stopped_at_eos = 1;
    return token == g->eos || g->n_generated == (uint32_t)g->max_new;
}

di_status cli_generate(di_session *s, cli_generation *g)
{
    const uint32_t seq = g->seq;
    uint32_t n = g->n_prompt;
    const int32_t *feed = g->prompt;
    int32_t token;
    for (long step = 0; step < g->max_new; step++) {
        di_status st = di_session_step(s, 1, &seq, &n, feed, 0);
        const float *logits;
        di_digest digest;
        if (!st && step == 0 && g->grammar)
            st = di_session_seq_set_grammar(s, seq, g->grammar, NULL, 0);
        uint32_t flags = 0;
        if (!st)
            st = di_session_seq_grammar_state(s, seq, &flags);
        if (!st && (flags & DI_GRAMMAR_MUST_END) && g->eos < 0) {
            g->stopped_by_grammar = 1; /* complete, and the model has no end token */
            break;
        }
        if (!st)
            st = di_session_logits(s, seq, &logits, &digest);
        if (!st)
            st = di_session_sample_token(s, seq, &token);
        if (st)
            return st;
        if (take(g, token, &digest))
            break;
        n = 1;
        feed = &token;
    }
    return DI_OK;
}

di_status cli_generate_speculating(di_session *s, cli_generation *g)
{
    const uint32_t seq = g->seq;
    int32_t feed[DI_DRAFT_MAX + 1];
    di_digest digest;
    int32_t token;
    di_status st = di_session_step(s, 1, &seq, &g->n_prompt, g->prompt, 0);
    if (!st && g->grammar)
        st = di_session_seq_set_grammar(s, seq, g->grammar, NULL, 0);
    uint32_t flags = 0;
    if (!st)
        st = di_session_seq_grammar_state(s, seq, &flags);
    int done = !st && (flags & DI_GRAMMAR_MUST_END) && g->eos < 0;
    g->stopped_by_grammar = done;
    if (!st && !done)
        st = di_session_logits(s, seq, &(const float *){NULL}, &digest);
    if (!st && !done)
        st = di_session_sample_token(s, seq, &token);
    if (!st && !done)
        done = take(g, token, &digest);
    while (!st && !done) {
        /* drafts past max_new would be stepped for nothing */
        const long room = g->max_new - (long)g->n_generated - 1;
        const uint32_t max = (uint32_t)(room < (long)g->draft_max ? room : (long)g->draft_max);
        uint32_t n_draft = 0;
        feed[0] = token;
        st = g->drafter ? di_drafter_propose(g->drafter, s, seq, token, max, feed + 1, &n_draft)
                        : di_session_seq_draft_lookup(s, seq, token, g->ngram, max, feed + 1, &n_draft);
        if (st && g->drafter) {
            g->drafter_failed = 1;
            return st;
        }
        const uint32_t n = n_draft + 1;
        if (!st)
            st = di_session_step(s, 1, &seq, &n, feed, DI_STEP_ALL_LOGITS);
        di_digest rows[DI_DRAFT_MAX + 1];
        for (uint32_t i = 0; !st && i < n; i++)
            st = di_session_logits_at(s, seq, i, &(const float *){NULL}, &rows[i]);
        uint32_t accepted = 0;
        if (!st)
            st = di_session_seq_accept_draft(s, seq, n_draft, &accepted, &token);
        if (st && st != DI_ERR_GRAMMAR_REJECTED)
            break;
        g->steps++;
        g->drafted += n_draft;
        g->accepted += accepted;
        uint32_t took = 0;
        while (took < accepted && !done) {
            done = take(g, feed[1 + took], &rows[took]);
            took++;
        }
        if (done && took < accepted) { /* ended inside the draft: cli_generate stepped no further */
            st = di_session_seq_truncate(s, seq, g->n_prompt + g->n_generated - 1);
        } else if (!done && st == DI_ERR_GRAMMAR_REJECTED) { /* complete, and the model has no end token */
            g->stopped_by_grammar = done = 1;
            st = DI_OK;
        } else if (!done) {
            done = take(g, token, &rows[accepted]);
        }
    }
    return st;
}

di_status cli_generation_digest(di_session *s, uint32_t seq, const int32_t *prompt, uint32_t n_prompt,
                                const int32_t *generated, uint32_t n_generated, di_digest *out)
{
    uint32_t stepped = 0, n = n_prompt + n_generated;
    di_status st = di_session_seq_length(s, seq, &stepped);
    int32_t *all = malloc((n ? n : 1) * sizeof *all);
    if (!st && !all)
        st = DI_ERR_OUT_OF_MEMORY;
    if (!st && stepped > n)
        st = DI_ERR_INTERNAL;
    if (!st) {
        memcpy(all, prompt, n_prompt * sizeof *all);
        memcpy(all + n_prompt, generated, n_generated * sizeof *all);
        st = di_session_seq_digest_extra(s, seq, all + stepped, n - stepped, out);
    }
    free(all);
    return st;
}
