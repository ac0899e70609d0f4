/*
 * check_grammar_determinism.c — a constrained generation (a grammar on the
 * sequence, greedy and sampled) gives the same tokens and logits digests
 * alone and in batches of 1 to 16 with unconstrained neighbours (random
 * prompts, sampling freely, in random slots), with its prompt chunked, on
 * 1 to 4 threads and on every CPU path (docs/DETERMINISM.md, "Grammars").
 * Models: the generated ones with real vocabularies (SentencePiece, BPE).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define N_GEN 16
#define MAX_NEIGHBOURS 15
#define CTX 64

static const char *const MODELS[] = {"tok_spm", "tok_bpe_llama3"};
static const char *const SCHEMA =
    "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 999},"
    " \"tag\": {\"enum\": [\"ab\", \"cd\", \"the fox\"]}, \"name\": {\"type\": \"string\", \"maxLength\": 5}},"
    " \"required\": [\"id\", \"tag\"]}";
static const char *const GBNF = "root ::= (word \" \")* word \".\"\nword ::= [a-z]+ | [0-9]{1,3}";

typedef struct generation {
    int32_t tokens[N_GEN];
    di_digest digests[N_GEN];
    int n;
} generation;

typedef struct neighbour {
    uint32_t seq;
    int32_t prompt[24];
    uint32_t n_prompt, fed, len;
    int32_t next;
} neighbour;

typedef struct setup {
    const char *model;
    di_grammar *grammar;
    int sampled;
} setup;

static di_sampling_params target_params(int sampled)
{
    di_sampling_params p;
    di_sampling_params_init(&p);
    if (sampled) {
        p.temperature = 1.2f;
        p.top_p = 0.9f;
        p.presence_penalty = 0.2f;
        p.seed = 77;
    }
    return p;
}

/* The target's generation in slot `seq` of s, its prompt fed in chunks of
 * `chunk` tokens (0: whole), beside n_nb neighbours (random, unconstrained). */
static generation run(di_session *s, const setup *u, uint32_t seq, uint32_t chunk, uint32_t n_nb, uint64_t seed,
                      const int32_t *prompt, uint32_t n_prompt, uint32_t n_vocab)
{
    generation g = {.n = 0};
    neighbour nb[MAX_NEIGHBOURS];
    uint64_t rng = seed * 2654435761u + 1;
    for (uint32_t i = 0, slot = 0; i < n_nb; i++, slot++) {
        if (slot == seq)
            slot++;
        nb[i].seq = slot;
        nb[i].n_prompt = 1 + (uint32_t)(tu_rand(&rng) % 20);
        for (uint32_t k = 0; k < nb[i].n_prompt; k++)
            nb[i].prompt[k] = (int32_t)(tu_rand(&rng) % n_vocab);
        nb[i].fed = nb[i].len = 0;
        di_sampling_params p;
        di_sampling_params_init(&p);
        p.temperature = (float)(tu_rand(&rng) % 3) * 0.7f;
        p.seed = tu_rand(&rng);
        ck_assert_int_eq(di_session_seq_reset(s, slot), DI_OK);
        ck_assert_int_eq(di_session_seq_set_sampling(s, slot, &p), DI_OK);
    }
    ck_assert_int_eq(di_session_seq_reset(s, seq), DI_OK);
    di_sampling_params tp = target_params(u->sampled);
    ck_assert_int_eq(di_session_seq_set_sampling(s, seq, &tp), DI_OK);
    uint32_t fed = 0;
    int32_t next = -1;
    for (int steps = 0; steps < 200 && g.n < N_GEN; steps++) {
        /* entries: the target and each neighbour (a prompt chunk of 1..4 or
         * one sampled token), in a random order */
        uint32_t ids[MAX_NEIGHBOURS + 1], counts[MAX_NEIGHBOURS + 1], n = 0;
        const int32_t *src[MAX_NEIGHBOURS + 1];
        uint32_t take = fed < n_prompt ? (chunk ? chunk : n_prompt) : 1;
        if (fed < n_prompt && fed + take > n_prompt)
            take = n_prompt - fed;
        ids[n] = seq;
        counts[n] = take;
        src[n++] = fed < n_prompt ? prompt + fed : &next;
        for (uint32_t i = 0; i < n_nb; i++) {
            if (nb[i].len + 4 >= CTX)
                continue;
            uint32_t c = 1;
            if (nb[i].fed < nb[i].n_prompt) {
                c = 1 + (uint32_t)(tu_rand(&rng) % 4);
                if (nb[i].fed + c > nb[i].n_prompt)
                    c = nb[i].n_prompt - nb[i].fed;
            }
            ids[n] = nb[i].seq;
            counts[n] = c;
            src[n++] = nb[i].fed < nb[i].n_prompt ? nb[i].prompt + nb[i].fed : &nb[i].next;
        }
        for (uint32_t k = n; k > 1; k--) {
            const uint32_t j = (uint32_t)(tu_rand(&rng) % k);
            uint32_t ti = ids[k - 1], tc = counts[k - 1];
            const int32_t *ts = src[k - 1];
            ids[k - 1] = ids[j], counts[k - 1] = counts[j], src[k - 1] = src[j];
            ids[j] = ti, counts[j] = tc, src[j] = ts;
        }
        int32_t toks[(MAX_NEIGHBOURS + 1) * 24 + CTX];
        uint32_t nt = 0;
        for (uint32_t k = 0; k < n; k++) {
            memcpy(toks + nt, src[k], counts[k] * sizeof *toks);
            nt += counts[k];
        }
        ck_assert_int_eq(di_session_step(s, n, ids, counts, toks, 0), DI_OK);
        for (uint32_t i = 0; i < n_nb; i++) {
            if (nb[i].len + 4 >= CTX)
                continue;
            uint32_t len;
            di_session_seq_length(s, nb[i].seq, &len);
            nb[i].fed = len < nb[i].n_prompt ? len : nb[i].n_prompt;
            nb[i].len = len;
            if (len >= nb[i].n_prompt)
                ck_assert_int_eq(di_session_sample_token(s, nb[i].seq, &nb[i].next), DI_OK);
        }
        if (fed < n_prompt) {
            fed += take;
            if (fed < n_prompt)
                continue;
            ck_assert_int_eq(di_session_seq_set_grammar(s, seq, u->grammar, NULL, 0), DI_OK);
        } else {
            uint32_t flags;
            di_session_seq_grammar_state(s, seq, &flags);
            if (flags & DI_GRAMMAR_ENDED)
                break;
        }
        ck_assert_int_eq(di_session_sample_token(s, seq, &next), DI_OK);
        ck_assert_int_eq(di_session_logits(s, seq, &(const float *){0}, &g.digests[g.n]), DI_OK);
        g.tokens[g.n++] = next;
    }
    return g;
}

static void expect_same(const generation *want, const generation *got, const char *what)
{
    ck_assert_msg(want->n == got->n, "%s: %d tokens, alone %d", what, got->n, want->n);
    for (int i = 0; i < want->n; i++) {
        ck_assert_msg(want->tokens[i] == got->tokens[i], "%s: token %d is %d, alone %d", what, i, got->tokens[i],
                      want->tokens[i]);
        tu_assert_digest_eq(&want->digests[i], &got->digests[i], what, i);
    }
}

static void check_axes(const char *model, di_grammar *grammar, int sampled)
{
    di_model *m = tu_load(model);
    int64_t nv;
    di_model_get_int(m, DI_MODEL_N_VOCAB, &nv);
    int32_t prompt[16];
    size_t n_prompt;
    const char *text = "the quick brown fox";
    ck_assert_int_eq(di_model_tokenize(m, text, strlen(text), DI_TOKENIZE_ADD_BOS, prompt, 16, &n_prompt, NULL, 0),
                     DI_OK);
    setup u = {model, grammar, sampled};
    di_session *alone = tu_session(m, 1, 1, CTX);
    const generation base = run(alone, &u, 0, 0, 0, 1, prompt, (uint32_t)n_prompt, (uint32_t)nv);
    ck_assert_msg(base.n >= 4, "%s: only %d tokens", model, base.n);
    di_session_free(alone);
    char what[160];
    /* batches of 1..16: the target in varying slots, chunked or not */
    di_session *batch = tu_session(m, 2, MAX_NEIGHBOURS + 1, CTX);
    for (uint32_t size = 1; size <= MAX_NEIGHBOURS + 1; size += 3) {
        const uint32_t slot = (uint32_t)((size * 2654435761u) >> 8) % size, chunk = size % 2 ? 0 : 1 + size % 3;
        snprintf(what, sizeof what, "%s %s: batch of %u, slot %u, chunk %u", model, sampled ? "sampled" : "greedy",
                 size, slot, chunk);
        const generation g = run(batch, &u, slot, chunk, size - 1, size, prompt, (uint32_t)n_prompt, (uint32_t)nv);
        expect_same(&base, &g, what);
    }
    di_session_free(batch);
    /* threads and CPU paths */
    const di_cpu_path paths[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
    for (int threads = 1; threads <= 4; threads++)
        for (int p = 0; p < 3; p++) {
            if (!tu_cpu_path_available(paths[p]))
                continue;
            di_session *s = tu_session_on(m, threads, 4, CTX, paths[p]);
            snprintf(what, sizeof what, "%s %s: %d threads, %s, 3 neighbours", model,
                     sampled ? "sampled" : "greedy", threads, di_cpu_path_name(paths[p]));
            const generation g = run(s, &u, 1, threads == 2 ? 3 : 0, 3, 100 + (uint64_t)threads, prompt,
                                     (uint32_t)n_prompt, (uint32_t)nv);
            expect_same(&base, &g, what);
            di_session_free(s);
        }
    di_model_free(m);
}

START_TEST(test_constrained_generations_are_invariant)
{
    const char *texts[2] = {SCHEMA, GBNF};
    for (int t = 0; t < 2; t++) {
        di_grammar *g = NULL;
        char err[256];
        di_status st = t == 0 ? di_grammar_from_json_schema(texts[t], strlen(texts[t]), 0, &g, err, sizeof err)
                              : di_grammar_from_gbnf(texts[t], strlen(texts[t]), 0, &g, err, sizeof err);
        ck_assert_msg(st == DI_OK, "%s", err);
        check_axes(MODELS[_i], g, 0);
        check_axes(MODELS[_i], g, 1);
        di_grammar_free(g);
    }
}
END_TEST

Suite *grammar_determinism_suite(void)
{
    Suite *s = suite_create("grammar-determinism");
    TCase *tc = tcase_create("axes");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_constrained_generations_are_invariant, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
