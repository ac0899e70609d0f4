/*
 * verify_ties.c — the near-tie search of `detinfer verify` (see
 * verify.h): greedy continuations of the prompts, then every
 * position of every sequence, teacher-forced, ranked by the gap in ulp
 * between its two largest logits.
 *
 * The gap of a position is vf_ulp_distance(top-1 logit, top-2 logit): the
 * number of float32 values x with top2 < x <= top1. A gap of g ulp means
 * that g roundings in the same direction would be needed to swap the two
 * tokens: the smaller it is, the more a determinism bug would show there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify.h"

#define GENERATE_BATCH 16 /* continuations generated at once */

void vf_near_ties_free(vf_near_ties *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->t[i].tokens);
    for (uint32_t i = 0; t->sequences && i < t->n_sources; i++)
        free(t->sequences[i]);
    free(t->t);
    free(t->sequences);
    free(t->lengths);
    memset(t, 0, sizeof *t);
}

typedef struct search {
    vf_near_ties *out;
    const vf_prompt *prompts;
    uint32_t keep;
} search;

/* The engine's callback: a finished continuation becomes a whole sequence. */
static void keep_sequence(void *ctx, uint32_t request, const vf_trace *t)
{
    search *s = ctx;
    (void)request;
    uint32_t n = t->n_prompt + t->max_new;
    int32_t *seq = malloc(n * sizeof *seq);
    if (!seq)
        return; /* noticed by the caller: a source with no sequence */
    memcpy(seq, s->prompts[t->prompt].tokens, t->n_prompt * sizeof *seq);
    memcpy(seq + t->n_prompt, t->tokens, t->max_new * sizeof *seq);
    s->out->sequences[t->prompt] = seq;
    s->out->lengths[t->prompt] = n;
}

/* The order of the kept list: gap, then source, then position. */
static int tie_before(uint64_t gap, uint32_t source, uint32_t position, const vf_near_tie *t)
{
    if (gap != t->gap_ulps)
        return gap < t->gap_ulps;
    return source != t->source ? source < t->source : position < t->position;
}

/* 1 when a kept tie has the same prefix (two prompts that begin alike). */
static int prefix_kept(const vf_near_ties *out, const int32_t *seq, uint32_t position)
{
    for (uint32_t i = 0; i < out->n; i++)
        if (out->t[i].position == position && !memcmp(out->t[i].tokens, seq, (position + 1) * sizeof *seq))
            return 1;
    return 0;
}

/* Puts a position into the kept list (at most keep, smallest gap first). */
static di_status consider(search *s, uint32_t source, uint32_t position, const float *row, int64_t n_vocab,
                          di_session *ses, char *err, size_t err_size)
{
    vf_near_ties *out = s->out;
    int32_t top1, top2;
    float v1, v2;
    vf_top2(row, n_vocab, &top1, &top2, &v1, &v2);
    if (top2 < 0)
        return DI_OK; /* a vocabulary of one, or NaN: no runner-up */
    uint64_t gap = vf_ulp_distance(v1, v2);
    if (gap == UINT64_MAX)
        return DI_OK;
    if (out->n == s->keep && !tie_before(gap, source, position, &out->t[out->n - 1]))
        return DI_OK;
    const int32_t *seq = out->sequences[source];
    if (prefix_kept(out, seq, position))
        return DI_OK;
    vf_near_tie t = {source, position, malloc((position + 1) * sizeof(int32_t)), top1, top2, v1, v2, gap, {{0}}};
    di_status st = t.tokens ? di_session_logits_at(ses, 0, position, &row, &t.digest) : DI_ERR_OUT_OF_MEMORY;
    if (st) {
        free(t.tokens);
        snprintf(err, err_size, "near-tie search: %s", t.tokens ? di_session_errmsg(ses) : "out of memory");
        return st;
    }
    memcpy(t.tokens, seq, (position + 1) * sizeof *seq);
    if (out->n == s->keep) /* the largest gap leaves */
        free(out->t[--out->n].tokens);
    uint32_t at = out->n;
    while (at > 0 && tie_before(gap, source, position, &out->t[at - 1])) {
        out->t[at] = out->t[at - 1];
        at--;
    }
    out->t[at] = t;
    out->n++;
    return DI_OK;
}

/* Every sequence alone, whole, in one step with every position's logits. */
static di_status teacher_forced(search *s, const di_model *model, const cli_session_opts *so, uint32_t longest,
                                char *err, size_t err_size)
{
    vf_near_ties *out = s->out;
    int64_t n_vocab = cli_model_int(model, DI_MODEL_N_VOCAB);
    cli_session_opts one = *so;
    one.max_sequences = 1;
    one.context_length = longest;
    di_session *ses = NULL;
    di_status st = cli_open_session(model, &one, &ses, err, err_size);
    for (uint32_t src = 0; st == DI_OK && src < out->n_sources; src++) {
        const int32_t *seq = out->sequences[src];
        uint32_t n = out->lengths[src], seq_id = 0;
        if (!seq)
            continue;
        if ((st = di_session_seq_reset(ses, 0)) ||
            (st = di_session_step(ses, 1, &seq_id, &n, seq, DI_STEP_ALL_LOGITS))) {
            snprintf(err, err_size, "near-tie search: %s", di_session_errmsg(ses));
            break;
        }
        for (uint32_t pos = 0; st == DI_OK && pos < n; pos++) {
            const float *row;
            if ((st = di_session_logits_at(ses, 0, pos, &row, NULL))) {
                snprintf(err, err_size, "near-tie search: %s", di_session_errmsg(ses));
                break;
            }
            st = consider(s, src, pos, row, n_vocab, ses, err, err_size);
        }
        out->positions += n;
    }
    di_session_free(ses);
    return st;
}

di_status vf_near_ties_search(const di_model *model, const cli_session_opts *so, const vf_prompt *prompts,
                              uint32_t n_prompts, uint32_t max_len, uint64_t positions, uint32_t keep,
                              uint64_t seed, vf_near_ties *out, char *err, size_t err_size)
{
    memset(out, 0, sizeof *out);
    double t0 = cli_now();
    uint32_t *queue = malloc((n_prompts ? n_prompts : 1) * sizeof *queue);
    out->t = calloc(keep ? keep : 1, sizeof *out->t);
    out->sequences = calloc(n_prompts ? n_prompts : 1, sizeof *out->sequences);
    out->lengths = calloc(n_prompts ? n_prompts : 1, sizeof *out->lengths);
    out->n_sources = n_prompts;
    if (!queue || !out->t || !out->sequences || !out->lengths) {
        free(queue);
        snprintf(err, err_size, "out of memory");
        return DI_ERR_OUT_OF_MEMORY;
    }
    /* the greedy prompts that leave room for a continuation */
    uint32_t n_queue = 0, longest = 0;
    uint64_t prompt_tokens = 0;
    for (uint32_t i = 0; i < n_prompts; i++)
        if (!prompts[i].sampling.size && prompts[i].n < max_len) {
            queue[n_queue++] = i;
            prompt_tokens += prompts[i].n;
            longest = prompts[i].n > longest ? prompts[i].n : longest;
        }
    di_status st = DI_OK;
    if (n_queue == 0 || keep == 0 || positions == 0) {
        free(queue);
        return DI_OK;
    }
    /* a continuation long enough for about `positions` positions in all */
    uint64_t want = positions > prompt_tokens ? (positions - prompt_tokens + n_queue - 1) / n_queue : 1;
    out->continuation = (uint32_t)(want < max_len - longest ? want : max_len - longest);
    uint32_t batch = n_queue < GENERATE_BATCH ? n_queue : GENERATE_BATCH;
    cli_session_opts gen = *so;
    gen.max_sequences = batch;
    gen.context_length = longest + out->continuation;
    di_session *ses = NULL;
    search s = {out, prompts, keep};
    st = cli_open_session(model, &gen, &ses, err, err_size);
    if (st == DI_OK) {
        /* only the tokens matter here: last position only, no digests */
        vf_engine_cfg cfg = {batch, 0, out->continuation, seed, {0}, 1, 0, keep_sequence, &s};
        st = vf_engine_run(ses, cli_model_int(model, DI_MODEL_N_VOCAB), prompts, queue, n_queue, &cfg, err,
                           err_size);
    }
    di_session_free(ses);
    for (uint32_t i = 0; st == DI_OK && i < n_queue; i++)
        if (!out->sequences[queue[i]]) {
            snprintf(err, err_size, "out of memory");
            st = DI_ERR_OUT_OF_MEMORY;
        }
    if (st == DI_OK)
        st = teacher_forced(&s, model, so, longest + out->continuation, err, err_size);
    free(queue);
    out->seconds = cli_now() - t0;
    return st;
}
