/*
 * verify_compare.c — every finished request's trace compared with
 * the reference position by position, the first divergence kept; each near
 * tie's result on each run compared with its reference; the verdict.
 * For verify --url: each response compared with its request's reference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify_state.h"
#include "verify/verify_url.h"

static int trace_copy(vf_trace *dst, const vf_trace *src)
{
    if (!vf_trace_init(dst, src->n_prompt, src->max_new))
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

void verify_keep_reference(void *ctx, uint32_t request, const vf_trace *t)
{
    verify *v = ctx;
    (void)request;
    if (!v->ref[t->prompt].digests && !trace_copy(&v->ref[t->prompt], t))
        fprintf(stderr, "detinfer verify: out of memory keeping the reference\n");
    cli_progress_add(&v->progress, 1, "reference");
}

void verify_compare_trace(void *ctx, uint32_t request, const vf_trace *t)
{
    verify *v = ctx;
    vrow *r = &v->rows[v->current];
    const vf_trace *ref = &v->ref[t->prompt];
    char label[48];
    snprintf(label, sizeof label, "%s %s", r->axis, r->value);
    cli_progress_add(&v->progress, 1, label);
    r->requests++;
    r->rows += t->n_pos;
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

int verify_tie_held(const vf_near_tie *tie, int32_t token, const di_digest *digest)
{
    return token == tie->top1 && di_digest_equal(digest, &tie->digest);
}

/* TEST ONLY: the alteration DETINFER_TEST_PERTURB=tie-token:K / tie-digest:K
 * asks for, on the batched runs. */
static void test_alter(const verify *v, uint32_t tie, int32_t *token, di_digest *digest)
{
    const vf_test_hooks *h = &v->hooks;
    if (h->tie_alter == VF_TIE_ALTER_NONE || h->tie != tie || !v->rows[v->current].perturbable)
        return;
    if (h->tie_alter == VF_TIE_ALTER_TOKEN)
        *token = v->ties.t[tie].top2;
    else
        digest->bytes[0] ^= 1u;
}

void verify_record_tie(void *ctx, uint32_t request, const vf_trace *t)
{
    verify *v = ctx;
    (void)request;
    const vf_near_tie *tie = &v->ties.t[t->prompt];
    tie_result *res = &v->tie_results[(size_t)t->prompt * MAX_ROWS + v->current];
    int32_t token = t->tokens[0];
    di_digest digest = t->digests[t->n_prompt - 1];
    test_alter(v, t->prompt, &token, &digest);
    int held = verify_tie_held(tie, token, &digest);
    if (res->runs == 0 || (res->held && !held)) { /* keep the first result, or the first that differs */
        res->token = token;
        res->digest = digest;
    }
    res->held = (res->runs == 0 || res->held) && held;
    res->runs++;
    cli_progress_add(&v->progress, 1, "near ties");
}

uint32_t verify_ties_differing(const verify *v)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < v->ties.n; k++)
        for (uint32_t r = 0; r < v->n_rows; r++) {
            const tie_result *res = &v->tie_results[(size_t)k * MAX_ROWS + r];
            n += res->runs > 0 && !res->held;
        }
    return n;
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
    return *bad_rows == 0 && verify_ties_differing(v) == 0;
}

/* ---- verify --url ------------------------------------------------------------ */

/* -1 when equal, else the first differing generated position (n when only
 * the lengths or the sequence digests differ). */
static long first_difference(const vu_outcome *a, const vu_outcome *b)
{
    uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++)
        if (a->tokens[i] != b->tokens[i] || strcmp(a->digests[i], b->digests[i]))
            return i;
    if (a->n != b->n || strcmp(a->sequence, b->sequence))
        return n;
    return -1;
}

uint32_t vu_compare(vu *v)
{
    uint32_t problems = 0;
    for (uint32_t i = 0; i < v->n_probes; i++) {
        vu_probe *p = &v->p[i];
        p->reference = p->ref.ok ? &p->ref : NULL;
        for (uint32_t r = 0; r < p->reps; r++) {
            vu_outcome *o = &p->got[r];
            if (!o->ok) {
                problems++;
                continue;
            }
            if (!p->reference) {
                p->reference = o; /* the first response is the reference */
                p->ref_source = "first response";
            }
            o->difference = first_difference(p->reference, o);
            if (o->difference < 0)
                p->matched++;
            else
                problems++;
        }
    }
    return problems;
}
