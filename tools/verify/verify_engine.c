/*
 * verify_engine.c — the request scheduler of `detinfer verify` (see
 * verify_engine.h). One sequence id per batch slot; each step carries one
 * entry per busy slot: the next prompt chunk, or the last chosen token.
 */
#include "verify/verify_engine.h"

#include "cli/cli_random.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vf_trace_init(vf_trace *t, uint32_t n_prompt, uint32_t max_new)
{
    memset(t, 0, sizeof *t);
    t->n_prompt = n_prompt;
    t->max_new = max_new;
    t->n_pos = n_prompt + max_new - 1;
    t->digests = calloc(t->n_pos, sizeof *t->digests);
    t->tokens = calloc(max_new, sizeof *t->tokens);
    t->runner_up = calloc(max_new, sizeof *t->runner_up);
    t->best_logit = calloc(max_new, sizeof *t->best_logit);
    t->second_logit = calloc(max_new, sizeof *t->second_logit);
    if (!t->digests || !t->tokens || !t->runner_up || !t->best_logit || !t->second_logit) {
        vf_trace_free(t);
        return 0;
    }
    return 1;
}

void vf_trace_free(vf_trace *t)
{
    free(t->digests);
    free(t->tokens);
    free(t->runner_up);
    free(t->best_logit);
    free(t->second_logit);
    memset(t, 0, sizeof *t);
}

void vf_top2(const float *row, int64_t n, int32_t *best, int32_t *second, float *best_value,
             float *second_value)
{
    int32_t b = -1, s = -1;
    for (int64_t i = 0; i < n; i++) {
        float v = row[i];
        if (isnan(v))
            continue;
        if (b < 0 || v > row[b]) {
            s = b;
            b = (int32_t)i;
        } else if (s < 0 || v > row[s]) {
            s = (int32_t)i;
        }
    }
    *best = b < 0 ? 0 : b; /* a row of only NaN: token 0, as the library says */
    *second = s;
    *best_value = b < 0 ? NAN : row[b];
    *second_value = s < 0 ? NAN : row[s];
}

/* Maps a float's bits onto a line where adjacent floats are adjacent integers. */
static int64_t ordered_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

uint64_t vf_ulp_distance(float a, float b)
{
    if (isnan(a) || isnan(b))
        return UINT64_MAX;
    int64_t d = ordered_bits(a) - ordered_bits(b);
    return (uint64_t)(d < 0 ? -d : d);
}

typedef struct slot_state {
    int busy;
    uint32_t request; /* index into the queue */
    const vf_prompt *prompt;
    uint32_t fed;       /* tokens appended to the sequence so far */
    uint32_t generated; /* tokens chosen so far */
    vf_trace trace;
} slot_state;

typedef struct engine {
    di_session *s;
    int64_t n_vocab;
    const vf_engine_cfg *cfg;
    slot_state *slots;
    uint32_t *order, *seq_ids, *n_tokens;
    int32_t *tokens;
    float *scratch; /* a perturbed copy of a row (test only) */
    uint64_t rng;
    char *err;
    size_t err_size;
} engine;

static di_status engine_error(engine *e, di_status st, const char *what)
{
    snprintf(e->err, e->err_size, "%s: %s", what, di_session_errmsg(e->s));
    return st;
}

/* Puts the next request into a random free slot. */
static di_status admit(engine *e, const vf_prompt *prompts, const uint32_t *queue, uint32_t request)
{
    uint32_t n_free = 0, pick;
    for (uint32_t i = 0; i < e->cfg->batch; i++)
        n_free += !e->slots[i].busy;
    pick = (uint32_t)(cli_rand(&e->rng) % n_free);
    for (uint32_t i = 0; i < e->cfg->batch; i++) {
        slot_state *sl = &e->slots[i];
        if (sl->busy || pick--)
            continue;
        const vf_prompt *p = &prompts[queue[request]];
        di_status st = di_session_seq_reset(e->s, i);
        if (!st)
            st = di_session_seq_set_sampling(e->s, i, p->sampling.size ? &p->sampling : NULL);
        if (st)
            return engine_error(e, st, "resetting a sequence");
        sl->busy = 1;
        sl->request = request;
        sl->prompt = p;
        sl->fed = sl->generated = 0;
        if (!vf_trace_init(&sl->trace, sl->prompt->n, e->cfg->max_new)) {
            snprintf(e->err, e->err_size, "out of memory");
            return DI_ERR_OUT_OF_MEMORY;
        }
        sl->trace.prompt = queue[request];
        sl->trace.slot = i;
        return DI_OK;
    }
    return DI_ERR_INTERNAL;
}

/* The entries of one step, busy slots in shuffled order; returns their number. */
static uint32_t build_step(engine *e)
{
    uint32_t n = 0, at = 0;
    for (uint32_t i = 0; i < e->cfg->batch; i++)
        if (e->slots[i].busy)
            e->order[n++] = i;
    for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates */
        uint32_t j = (uint32_t)(cli_rand(&e->rng) % i), t = e->order[i - 1];
        e->order[i - 1] = e->order[j];
        e->order[j] = t;
    }
    for (uint32_t k = 0; k < n; k++) {
        slot_state *sl = &e->slots[e->order[k]];
        uint32_t left = sl->prompt->n - (sl->fed < sl->prompt->n ? sl->fed : sl->prompt->n);
        e->seq_ids[k] = e->order[k];
        if (left > 0) {
            uint32_t plen = sl->prompt->n, tail = e->cfg->chunk_tail;
            uint32_t head = tail && plen > tail ? plen - tail : 0; /* fed in one step before the chunks */
            uint32_t len = sl->fed < head                          ? head - sl->fed
                           : e->cfg->chunk && e->cfg->chunk < left ? e->cfg->chunk
                                                                   : left;
            memcpy(e->tokens + at, sl->prompt->tokens + sl->fed, len * sizeof *e->tokens);
            e->n_tokens[k] = len;
        } else {
            e->tokens[at] = sl->trace.tokens[sl->generated - 1];
            e->n_tokens[k] = 1;
        }
        at += e->n_tokens[k];
    }
    return n;
}

/* The digest of one row, perturbed first when the test hook asks for it. */
static di_status row_digest(engine *e, uint32_t slot, uint32_t pos, const float *row, di_digest *d)
{
    const vf_perturb *pt = &e->cfg->perturb;
    if (!pt->enabled || pt->slot != slot || pt->pos != pos)
        return DI_OK; /* keep the library's digest */
    int32_t best, second;
    float bv, sv;
    uint32_t bits;
    vf_top2(row, e->n_vocab, &best, &second, &bv, &sv);
    memcpy(e->scratch, row, (size_t)e->n_vocab * sizeof *row);
    memcpy(&bits, &e->scratch[best], sizeof bits);
    bits ^= 1u; /* TEST ONLY: one ulp off in one logit */
    memcpy(&e->scratch[best], &bits, sizeof bits);
    return di_digest_floats(e->scratch, (size_t)e->n_vocab, d);
}

/* Records the choice (greedy, or sampled) that ends an entry past the prompt. */
static di_status record_choice(engine *e, uint32_t slot, const float *row)
{
    slot_state *sl = &e->slots[slot];
    vf_trace *t = &sl->trace;
    const int sampled = sl->prompt->sampling.size != 0;
    int32_t lib_token, best;
    di_status st = sampled ? di_session_sample_token(e->s, slot, &lib_token)
                           : di_session_greedy_token(e->s, slot, &lib_token);
    if (st)
        return engine_error(e, st, sampled ? "sampling a token" : "reading the greedy token");
    uint32_t k = sl->generated++;
    vf_top2(row, e->n_vocab, &best, &t->runner_up[k], &t->best_logit[k], &t->second_logit[k]);
    if (!sampled && best != lib_token) {
        snprintf(e->err, e->err_size,
                 "the library's greedy token %d is not the argmax %d of the logits it returned", lib_token,
                 best);
        return DI_ERR_INTERNAL;
    }
    t->tokens[k] = lib_token;
    return DI_OK;
}

static di_status finish(engine *e, uint32_t slot)
{
    slot_state *sl = &e->slots[slot];
    vf_trace *t = &sl->trace;
    uint32_t n = t->n_prompt + t->max_new;
    int32_t *all = malloc(n * sizeof *all);
    if (!all) {
        snprintf(e->err, e->err_size, "out of memory");
        return DI_ERR_OUT_OF_MEMORY;
    }
    memcpy(all, sl->prompt->tokens, t->n_prompt * sizeof *all);
    memcpy(all + t->n_prompt, t->tokens, t->max_new * sizeof *all);
    di_status st = di_digest_tokens(all, n, &t->sequence);
    free(all);
    if (st)
        return st;
    if (e->cfg->done)
        e->cfg->done(e->cfg->ctx, sl->request, t);
    vf_trace_free(t);
    sl->busy = 0;
    return DI_OK;
}

/* Hashes every row an entry produced and advances its slot. */
static di_status harvest(engine *e, uint32_t slot, uint32_t n_tokens)
{
    slot_state *sl = &e->slots[slot];
    const float *row = NULL;
    for (uint32_t i = e->cfg->last_only ? n_tokens - 1 : 0; i < n_tokens; i++) {
        uint32_t pos = sl->fed + i;
        di_digest d;
        di_status st = e->cfg->last_only ? di_session_logits(e->s, slot, &row, &d)
                                         : di_session_logits_at(e->s, slot, i, &row, &d);
        if (st)
            return engine_error(e, st, "reading logits");
        if ((st = row_digest(e, slot, pos, row, &d)))
            return st;
        sl->trace.digests[pos] = d;
    }
    sl->fed += n_tokens;
    if (sl->fed < sl->prompt->n)
        return DI_OK; /* mid-prompt: no choice yet */
    di_status st = record_choice(e, slot, row);
    if (st == DI_OK && sl->generated == sl->trace.max_new)
        st = finish(e, slot);
    return st;
}

static void engine_free(engine *e)
{
    if (e->slots)
        for (uint32_t i = 0; i < e->cfg->batch; i++)
            vf_trace_free(&e->slots[i].trace);
    free(e->slots);
    free(e->order);
    free(e->seq_ids);
    free(e->n_tokens);
    free(e->tokens);
    free(e->scratch);
}

di_status vf_engine_run(di_session *s, int64_t n_vocab, const vf_prompt *prompts, const uint32_t *queue,
                        uint32_t n_queue, const vf_engine_cfg *cfg, char *err, size_t err_size)
{
    engine e = {.s = s, .n_vocab = n_vocab, .cfg = cfg, .rng = cfg->seed, .err = err, .err_size = err_size};
    uint32_t longest = 1;
    for (uint32_t i = 0; i < n_queue; i++)
        longest = prompts[queue[i]].n > longest ? prompts[queue[i]].n : longest;
    e.slots = calloc(cfg->batch, sizeof *e.slots);
    e.order = calloc(cfg->batch, sizeof *e.order);
    e.seq_ids = calloc(cfg->batch, sizeof *e.seq_ids);
    e.n_tokens = calloc(cfg->batch, sizeof *e.n_tokens);
    e.tokens = calloc((size_t)cfg->batch * longest, sizeof *e.tokens);
    e.scratch = cfg->perturb.enabled ? calloc((size_t)n_vocab, sizeof *e.scratch) : NULL;
    di_status st = DI_OK;
    if (!e.slots || !e.order || !e.seq_ids || !e.n_tokens || !e.tokens ||
        (cfg->perturb.enabled && !e.scratch)) {
        snprintf(err, err_size, "out of memory");
        st = DI_ERR_OUT_OF_MEMORY;
    }
    uint32_t next = 0, busy = 0;
    while (st == DI_OK && (next < n_queue || busy > 0)) {
        /* one admission per step, so prompts start while others decode */
        if (next < n_queue && busy < cfg->batch) {
            if ((st = admit(&e, prompts, queue, next)))
                break;
            next++;
        }
        uint32_t n = build_step(&e);
        if ((st = di_session_step(s, n, e.seq_ids, e.n_tokens, e.tokens, cfg->last_only ? 0 : DI_STEP_ALL_LOGITS))) {
            engine_error(&e, st, "step");
            break;
        }
        for (uint32_t k = 0; k < n && st == DI_OK; k++)
            st = harvest(&e, e.seq_ids[k], e.n_tokens[k]);
        busy = 0;
        for (uint32_t i = 0; i < cfg->batch; i++)
            busy += e.slots[i].busy;
    }
    engine_free(&e);
    return st;
}
