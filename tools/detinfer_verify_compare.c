/*
 * detinfer_verify_compare.c — every finished request's trace compared with
 * the reference position by position, the first divergence kept, the near
 * ties counted, and the verdict.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detinfer_verify_state.h"

static int trace_copy(dt_trace *dst, const dt_trace *src)
{
    if (!dt_trace_init(dst, src->n_prompt, src->max_new))
        return 0;
    dst->prompt = src->prompt;
    dst->slot = src->slot;
    dst->sequence = src->sequence;
    memcpy(dst->digests, src->digests, src->n_pos * sizeof *src->digests);
    memcpy(dst->tokens, src->tokens, src->max_new * sizeof *src->tokens);
    memcpy(dst->runner_up, src->runner_up, src->max_new * sizeof *src->runner_up);
    memcpy(dst->best_logit, src->best_logit, src->max_new * sizeof *src->best_logit);
    memcpy(dst->second_logit, src->second_logit, src->max_new * sizeof *src->second_logit);
    return 1;
}

void verify_keep_reference(void *ctx, uint32_t request, const dt_trace *t)
{
    verify *v = ctx;
    (void)request;
    if (!v->ref[t->prompt].digests && !trace_copy(&v->ref[t->prompt], t))
        fprintf(stderr, "detinfer verify: out of memory keeping the reference\n");
    dt_progress_add(&v->progress, 1, "reference");
}

/* Near ties: a choice counts while the tokens before it matched the reference. */
static void count_ties(verify *v, const dt_trace *ref, const dt_trace *t)
{
    tie_count *tc = &v->ties[(size_t)t->prompt * ref->max_new];
    for (uint32_t k = 0; k < ref->max_new && k < t->max_new; k++) {
        tc[k].reached++;
        if (t->tokens[k] != ref->tokens[k])
            break;
        tc[k].held++;
    }
}

void verify_compare_trace(void *ctx, uint32_t request, const dt_trace *t)
{
    verify *v = ctx;
    vrow *r = &v->rows[v->current];
    const dt_trace *ref = &v->ref[t->prompt];
    char label[48];
    snprintf(label, sizeof label, "%s %s", r->axis, r->value);
    dt_progress_add(&v->progress, 1, label);
    r->requests++;
    r->rows += t->n_pos;
    count_ties(v, ref, t);
    uint32_t pos = 0;
    while (pos < ref->n_pos && di_digest_equal(&ref->digests[pos], &t->digests[pos]))
        pos++;
    if (pos == ref->n_pos && di_digest_equal(&ref->sequence, &t->sequence))
        return;
    r->differing++;
    if (r->status == ROW_OK)
        r->status = ROW_MISMATCH;
    if (v->first.set)
        return;
    mismatch *m = &v->first;
    *m = (mismatch){.set = 1, .row = v->current, .request = request, .prompt = t->prompt, .slot = t->slot,
                    .pos = pos, .choice = -1, .want_sequence = ref->sequence, .got_sequence = t->sequence};
    if (pos < ref->n_pos) {
        m->want = ref->digests[pos];
        m->got = t->digests[pos];
        if (pos + 1 >= ref->n_prompt) {
            m->choice = pos + 1 - ref->n_prompt;
            m->want_token = ref->tokens[m->choice];
            m->got_token = t->tokens[m->choice];
        }
    }
}

int verify_verdict(const verify *v, uint64_t *requests, uint64_t *rows, uint32_t *bad_rows)
{
    *requests = v->prompts.n;
    *rows = 0;
    *bad_rows = 0;
    for (uint32_t p = 0; p < v->prompts.n; p++)
        *rows += v->ref[p].n_pos;
    for (uint32_t i = 0; i < v->n_rows; i++) {
        *requests += v->rows[i].requests;
        *rows += v->rows[i].rows;
        *bad_rows += v->rows[i].status == ROW_MISMATCH || v->rows[i].status == ROW_ERROR;
    }
    return *bad_rows == 0;
}


static int tie_order(const void *a, const void *b)
{
    const tie *x = a, *y = b;
    if (x->gap != y->gap)
        return x->gap < y->gap ? -1 : 1;
    return x->prompt != y->prompt ? (x->prompt < y->prompt ? -1 : 1) : (x->choice < y->choice ? -1 : 1);
}

uint32_t verify_smallest_gaps(const verify *v, tie **out)
{
    uint32_t n = 0, max_new = (uint32_t)v->o.max_new;
    tie *t = malloc((size_t)v->prompts.n * max_new * sizeof *t);
    for (uint32_t p = 0; t && p < v->prompts.n; p++)
        for (uint32_t k = 0; k < max_new && !v->prompts.p[p].sampling.size; k++)
            if (v->ref[p].runner_up[k] >= 0)
                t[n++] = (tie){p, k, (double)v->ref[p].best_logit[k] - (double)v->ref[p].second_logit[k]};
    if (t)
        qsort(t, n, sizeof *t, tie_order);
    *out = t;
    return n < (uint32_t)v->o.ties ? n : (uint32_t)v->o.ties;
}
