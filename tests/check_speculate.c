/*
 * check_speculate.c — speculative decoding changes no bit
 * (di_session_seq_accept_draft, di_session_seq_draft_lookup;
 * docs/DETERMINISM.md, "Speculative decoding").
 *
 * The reference is decoding one token at a time: step the chosen token,
 * di_session_sample_token, repeat, recording each token and the digest of
 * the logits it was chosen from. Every speculative run must give the same
 * tokens and digests position by position, and the same sequence digest:
 *   - drafts that are right (the reference's own continuation), wrong at a
 *     random place, found by prompt lookup, or a draft model's; lengths 1..16;
 *   - greedy, seeded sampling with every filter and penalty, a grammar;
 *   - a batch mixing a speculating sequence with an ordinary one;
 *   - every CPU path (the integer profile with DI_TEST_PROFILE=integer).
 * Rollback is checked by continuing after every rejected draft: the later
 * positions' digests depend on the KV cache, the history and the grammar.
 * Negative control: a test-only hook accepts one draft token it should have
 * rejected, and the comparison must catch it.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/speculate.h"
#include "test_util.h"

#define N_GEN 40
#define MAX_K 16

typedef struct run {
    int32_t tokens[N_GEN];
    di_digest digests[N_GEN]; /* of the logits each token was chosen from */
    uint32_t n;
    di_digest sequence;
} run;

typedef struct setup {
    const di_sampling_params *params; /* NULL: greedy */
    const di_grammar *grammar;        /* NULL: none */
    const di_model *draft_model;      /* DRAFT_MODEL's */
} setup;

static void prepare(di_session *s, uint32_t seq, const setup *u)
{
    if (u->params)
        ck_assert_int_eq(di_session_seq_set_sampling(s, seq, u->params), DI_OK);
    if (u->grammar)
        ck_assert_msg(di_session_seq_set_grammar(s, seq, u->grammar, NULL, 0) == DI_OK, "%s", di_session_errmsg(s));
}

/* The sequence digest of the prompt and the n generated tokens, from the
 * session (which may hold the last one stepped, or not). */
static di_digest final_digest(di_session *s, uint32_t n_prompt, const run *r)
{
    uint32_t length;
    ck_assert_int_eq(di_session_seq_length(s, 0, &length), DI_OK);
    ck_assert_uint_ge(length + 1, n_prompt + r->n);
    if (length + 1 > n_prompt + r->n)
        ck_assert_int_eq(di_session_seq_truncate(s, 0, n_prompt + r->n - 1), DI_OK);
    di_digest d;
    ck_assert_int_eq(di_session_seq_digest_extra(s, 0, &r->tokens[r->n - 1], 1, &d), DI_OK);
    return d;
}

/* The reference: one token per step. */
static run decode_alone(di_model *m, const int32_t *prompt, uint32_t n_prompt, const setup *u, di_cpu_path path)
{
    run r = {.n = 0};
    di_session *s = tu_session_on(m, 1, 1, (int)(n_prompt + N_GEN + MAX_K + 1), path);
    tu_step(s, 0, prompt, n_prompt, 0);
    prepare(s, 0, u);
    for (uint32_t i = 0; i < N_GEN; i++) {
        ck_assert_int_eq(di_session_logits(s, 0, &(const float *){NULL}, &r.digests[i]), DI_OK);
        di_status st = di_session_sample_token(s, 0, &r.tokens[i]);
        if (st == DI_ERR_GRAMMAR_REJECTED) /* the grammar ended: nothing more may follow */
            break;
        ck_assert_msg(st == DI_OK, "%s", di_session_errmsg(s));
        r.n++;
        if (i + 1 < N_GEN)
            tu_step(s, 0, &r.tokens[i], 1, 0);
    }
    r.sequence = final_digest(s, n_prompt, &r);
    di_session_free(s);
    return r;
}

/* Where drafts come from. */
enum { DRAFT_RIGHT, DRAFT_WRONG, DRAFT_LOOKUP, DRAFT_MODEL };

/* Speculative decoding of seq (seq 1 steps ordinary tokens of its own in
 * the same steps when `mixed`); drafts of at most k tokens. Returns the
 * run; *steps counts the steps, *accepted the draft tokens accepted. */
static run decode_speculating(di_model *m, const int32_t *prompt, uint32_t n_prompt, const setup *u,
                              di_cpu_path path, uint32_t k, int source, const run *ref, int mixed,
                              uint32_t *steps, uint32_t *accepted_total)
{
    run r = {.n = 0};
    di_session *s = tu_session_on(m, 1, 2, (int)(n_prompt + N_GEN + MAX_K + 1), path);
    const uint32_t ids[2] = {0, 1};
    tu_step(s, 0, prompt, n_prompt, 0);
    prepare(s, 0, u);
    if (mixed)
        tu_step(s, 1, prompt + 1, n_prompt - 1, 0);
    *steps = *accepted_total = 0;
    int32_t next;
    ck_assert_int_eq(di_session_logits(s, 0, &(const float *){NULL}, &r.digests[0]), DI_OK);
    ck_assert_msg(di_session_sample_token(s, 0, &next) == DI_OK, "%s", di_session_errmsg(s));
    uint64_t rng = 12345 + k;
    di_drafter *drafter = NULL;
    if (source == DRAFT_MODEL) {
        di_config *c = NULL;
        char err[256];
        ck_assert_int_eq(di_config_create(&c), DI_OK);
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, 2), DI_OK);
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, n_prompt + N_GEN + MAX_K + 1), DI_OK);
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, 1), DI_OK);
        ck_assert_msg(di_drafter_create(m, u->draft_model, c, &drafter, err, sizeof err) == DI_OK, "%s", err);
        di_config_free(c);
    }
    while (r.n < N_GEN) {
        r.tokens[r.n++] = next;
        if (r.n == N_GEN)
            break;
        int32_t entry[MAX_K + 1 + 1];
        uint32_t n_draft = 0;
        entry[0] = next;
        if (source == DRAFT_LOOKUP) {
            ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, next, 3, k, entry + 1, &n_draft), DI_OK);
        } else if (source == DRAFT_MODEL) {
            ck_assert_msg(di_drafter_propose(drafter, s, 0, next, k, entry + 1, &n_draft) == DI_OK, "%s",
                          di_drafter_errmsg(drafter));
            ck_assert_uint_le(n_draft, k);
        } else {
            for (; n_draft < k && r.n + n_draft < ref->n; n_draft++)
                entry[1 + n_draft] = ref->tokens[r.n + n_draft];
            if (source == DRAFT_WRONG && n_draft > 0) { /* one wrong token at a random place */
                const uint32_t at = (uint32_t)(tu_rand(&rng) % n_draft);
                entry[1 + at] = (entry[1 + at] + 1) % 8;
            }
        }
        int32_t other = (int32_t)(r.n % 7);
        int32_t toks[MAX_K + 3];
        memcpy(toks, entry, (n_draft + 1) * sizeof *toks);
        toks[n_draft + 1] = other;
        const uint32_t counts[2] = {n_draft + 1, 1};
        di_status st = di_session_step(s, mixed ? 2 : 1, ids, counts, toks, DI_STEP_ALL_LOGITS);
        if (st == DI_ERR_GRAMMAR_REJECTED) { /* a wrong draft token the grammar refuses: step without it */
            n_draft = 0;
            const uint32_t one[2] = {1, 1};
            toks[1] = other;
            st = di_session_step(s, mixed ? 2 : 1, ids, one, toks, DI_STEP_ALL_LOGITS);
        }
        ck_assert_msg(st == DI_OK, "%s", di_session_errmsg(s));
        (*steps)++;
        di_digest rows[MAX_K + 1];
        uint32_t appended = n_draft + 1;
        for (uint32_t i = 0; i < appended; i++)
            ck_assert_int_eq(di_session_logits_at(s, 0, i, &(const float *){NULL}, &rows[i]), DI_OK);
        uint32_t accepted;
        st = di_session_seq_accept_draft(s, 0, n_draft, &accepted, &next);
        /* GRAMMAR_REJECTED: the grammar ended after the accepted tokens */
        ck_assert_msg(st == DI_OK || st == DI_ERR_GRAMMAR_REJECTED, "%s", di_session_errmsg(s));
        ck_assert(st == DI_OK || next == -1);
        ck_assert_uint_le(accepted, n_draft);
        *accepted_total += accepted;
        for (uint32_t i = 0; i < accepted && r.n < N_GEN; i++) {
            r.digests[r.n] = rows[i];
            r.tokens[r.n++] = entry[1 + i];
        }
        if (r.n < N_GEN)
            r.digests[r.n] = rows[accepted];
        if (st == DI_ERR_GRAMMAR_REJECTED)
            break;
        /* the sequence's results are those of its last accepted position */
        di_digest now;
        ck_assert_int_eq(di_session_logits(s, 0, &(const float *){NULL}, &now), DI_OK);
        ck_assert(di_digest_equal(&now, &rows[accepted]));
        /* the kept positions' rows stay readable, the last one the result's; none past it */
        for (uint32_t i = 0; i <= accepted; i++) {
            di_digest kept;
            ck_assert_int_eq(di_session_logits_at(s, 0, i, &(const float *){NULL}, &kept), DI_OK);
            ck_assert(di_digest_equal(&kept, &rows[i]));
        }
        ck_assert_int_eq(di_session_logits_at(s, 0, accepted + 1, &(const float *){NULL}, &now),
                         DI_ERR_INVALID_ARGUMENT);
        int32_t again;
        ck_assert_int_eq(di_session_sample_token(s, 0, &again), DI_OK);
        ck_assert_int_eq(again, next);
    }
    r.sequence = final_digest(s, n_prompt, &r); /* a last step past N_GEN is cut */
    di_drafter_free(drafter);
    di_session_free(s);
    return r;
}

/* The first position where a and b differ (token or digest); -1: none. */
static int first_difference(const run *a, const run *b)
{
    const uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++)
        if (a->tokens[i] != b->tokens[i] || !di_digest_equal(&a->digests[i], &b->digests[i]))
            return (int)i;
    return a->n == b->n && di_digest_equal(&a->sequence, &b->sequence) ? -1 : (int)n;
}

static void check_equal_runs(di_model *m, const char *name, const int32_t *prompt, uint32_t n, const setup *u,
                             di_cpu_path path, const uint32_t *ks, size_t n_ks)
{
    const run ref = decode_alone(m, prompt, n, u, path);
    for (size_t i = 0; i < n_ks; i++)
        for (int source = DRAFT_RIGHT; source <= (u->draft_model ? DRAFT_MODEL : DRAFT_LOOKUP); source++)
            for (int mixed = 0; mixed <= 1; mixed++) {
                uint32_t steps, accepted;
                run got = decode_speculating(m, prompt, n, u, path, ks[i], source, &ref, mixed, &steps, &accepted);
                const int at = first_difference(&ref, &got);
                ck_assert_msg(at < 0, "%s path %d k %u source %d mixed %d: differs at generated token %d", name,
                              (int)path, ks[i], source, mixed, at);
                if (source == DRAFT_RIGHT && ref.n == N_GEN && !u->grammar)
                    ck_assert_msg(steps < N_GEN - 1 || ks[i] == 0, "%s: right drafts of %u saved no step", name,
                                  ks[i]);
                if (source == DRAFT_MODEL && u->draft_model == m && !u->params) /* greedy drafting itself */
                    ck_assert_msg(accepted > 0, "%s: a model drafting for itself had nothing accepted", name);
            }
}

static const uint32_t all_ks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint32_t some_ks[] = {1, 4, 16};

START_TEST(test_greedy_every_model)
{
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    int32_t prompt[256];
    const uint32_t n = tu_read_prompt(name, prompt, 256);
    const setup u = {NULL, NULL, NULL};
    check_equal_runs(m, name, prompt, n, &u, DI_CPU_PATH_AUTO, some_ks, 3);
    di_model_free(m);
}
END_TEST

START_TEST(test_every_draft_length_and_path)
{
    di_model *m = tu_load("gemma3_q8_0");
    int32_t prompt[256];
    const uint32_t n = tu_read_prompt("gemma3_q8_0", prompt, 256);
    const setup u = {NULL, NULL, NULL};
    const di_cpu_path paths[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
    for (size_t p = 0; p < 3; p++)
        if (tu_cpu_path_available(paths[p]))
            check_equal_runs(m, "gemma3_q8_0", prompt, n, &u, paths[p], p == 0 ? all_ks : some_ks, p == 0 ? 16 : 3);
    di_model_free(m);
}
END_TEST

START_TEST(test_seeded_sampling_with_every_parameter)
{
    di_model *m = tu_load("qwen2_q8_0");
    int32_t prompt[256];
    const uint32_t n = tu_read_prompt("qwen2_q8_0", prompt, 256);
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.temperature = 0.9f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.02f;
    p.repetition_penalty = 1.1f;
    p.presence_penalty = 0.3f;
    p.frequency_penalty = 0.2f;
    p.penalty_window = 8;
    p.seed = 77;
    const setup u = {&p, NULL, NULL};
    check_equal_runs(m, "qwen2_q8_0 sampled", prompt, n, &u, DI_CPU_PATH_AUTO, some_ks, 3);
    p.temperature = 0; /* greedy with penalties: the history matters */
    check_equal_runs(m, "qwen2_q8_0 penalties", prompt, n, &u, DI_CPU_PATH_AUTO, some_ks, 3);
    di_model_free(m);
}
END_TEST

START_TEST(test_with_a_grammar)
{
    di_model *m = tu_load("tok_spm");
    const char *gbnf = "root ::= [a-z ]+ \".\"\n";
    di_grammar *g = NULL;
    char err[256];
    ck_assert_msg(di_grammar_from_gbnf(gbnf, strlen(gbnf), 0, &g, err, sizeof err) == DI_OK, "%s", err);
    int32_t prompt[16];
    size_t n = 0;
    ck_assert_int_eq(di_model_tokenize(m, "the cat sat on the", 18, DI_TOKENIZE_ADD_BOS, prompt, 16, &n, err,
                                       sizeof err), DI_OK);
    di_model *draft = tu_load("tok_spm_draft");
    const setup u = {NULL, g, draft};
    check_equal_runs(m, "tok_spm grammar", prompt, (uint32_t)n, &u, DI_CPU_PATH_AUTO, some_ks, 3);
    const setup free_text = {NULL, NULL, draft};
    check_equal_runs(m, "tok_spm draft model", prompt, (uint32_t)n, &free_text, DI_CPU_PATH_AUTO, some_ks, 3);
    const setup itself = {NULL, NULL, m}; /* its own draft model: every greedy draft right */
    check_equal_runs(m, "tok_spm drafting itself", prompt, (uint32_t)n, &itself, DI_CPU_PATH_AUTO, some_ks, 3);
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.temperature = 1.0f;
    p.seed = 5;
    const setup v = {&p, g, draft};
    check_equal_runs(m, "tok_spm grammar sampled", prompt, (uint32_t)n, &v, DI_CPU_PATH_AUTO, some_ks, 3);
    di_model_free(draft);
    di_grammar_free(g);
    di_model_free(m);
}
END_TEST

/* The hook accepts one wrong draft token: the comparison must see it. */
START_TEST(test_negative_control)
{
    di_model *m = tu_load("gemma3_q8_0");
    int32_t prompt[256];
    const uint32_t n = tu_read_prompt("gemma3_q8_0", prompt, 256);
    const setup u = {NULL, NULL, NULL};
    const run ref = decode_alone(m, prompt, n, &u, DI_CPU_PATH_AUTO);
    uint32_t steps, accepted;
    di_speculate_test_accept_one_wrong = 1;
    run got = decode_speculating(m, prompt, n, &u, DI_CPU_PATH_AUTO, 4, DRAFT_WRONG, &ref, 0, &steps, &accepted);
    ck_assert_int_eq(di_speculate_test_accept_one_wrong, 0); /* it did accept one */
    ck_assert_msg(first_difference(&ref, &got) >= 0, "a wrongly accepted token went unseen");
    di_model_free(m);
}
END_TEST

START_TEST(test_lookup_known_answers)
{
    di_model *m = tu_load("mha_tied_f32");
    di_session *s = tu_session(m, 1, 1, 64);
    const int32_t hist[] = {5, 6, 7, 8, 9, 5, 6};
    tu_step(s, 0, hist, 7, 0);
    int32_t d[DI_DRAFT_MAX];
    uint32_t n = 99;
    /* history 5 6 7 8 9 5 6 | 7: the key "5 6 7" occurred at 0, followed by 8 9 5 6 7 */
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 7, 3, 4, d, &n), DI_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert(d[0] == 8 && d[1] == 9 && d[2] == 5 && d[3] == 6);
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 7, 3, 32, d, &n), DI_OK);
    ck_assert_uint_eq(n, 5); /* up to the end of the history, next included */
    /* no key of any length occurs earlier */
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 11, 3, 4, d, &n), DI_OK);
    ck_assert_uint_eq(n, 0);
    /* only a shorter key matches: "9" -> 5 6 */
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 9, 3, 4, d, &n), DI_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert(d[0] == 5 && d[1] == 6 && d[2] == 9);
    /* the latest earlier place wins: history 5 6 7 8 9 5 6 | 5 -> key "6 5"? no; "5" at 5 -> 6 5 */
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 5, 1, 4, d, &n), DI_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert(d[0] == 6 && d[1] == 5);
    /* the context: 64 - 7 - 1 = 56 room; a session of 9 leaves one */
    di_session *t = tu_session(m, 1, 1, 9);
    tu_step(t, 0, hist, 7, 0);
    ck_assert_int_eq(di_session_seq_draft_lookup(t, 0, 7, 3, 4, d, &n), DI_OK);
    ck_assert_uint_eq(n, 1);
    di_session_free(t);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

START_TEST(test_bad_arguments_change_nothing)
{
    di_model *m = tu_load("mha_tied_f32");
    int64_t n_vocab;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    di_session *s = tu_session(m, 1, 2, 64);
    const int32_t toks[] = {1, 2, 3, 4};
    uint32_t acc, n, length;
    int32_t next, d[4];
    ck_assert_int_eq(di_session_seq_accept_draft(NULL, 0, 0, &acc, &next), DI_ERR_INVALID_ARGUMENT);
    tu_step(s, 0, toks, 4, 0); /* not an all-logits step */
    ck_assert_int_eq(di_session_seq_accept_draft(s, 0, 1, &acc, &next), DI_ERR_STATE);
    tu_step(s, 0, toks, 4, DI_STEP_ALL_LOGITS);
    ck_assert_int_eq(di_session_seq_accept_draft(s, 0, 4, &acc, &next), DI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(di_session_errmsg(s), "needs a step of at least 5"));
    ck_assert_int_eq(di_session_seq_accept_draft(s, 0, 1, NULL, &next), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_accept_draft(s, 0, 1, &acc, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_accept_draft(s, 1, 0, &acc, &next), DI_ERR_STATE); /* not stepped */
    ck_assert_int_eq(di_session_seq_accept_draft(s, 2, 0, &acc, &next), DI_ERR_SEQUENCE);
    ck_assert_int_eq(di_session_seq_length(s, 0, &length), DI_OK);
    ck_assert_uint_eq(length, 8); /* nothing changed */
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 1, 0, 4, d, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 1, DI_DRAFT_MAX_NGRAM + 1, 4, d, &n),
                     DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 1, 3, DI_DRAFT_MAX + 1, d, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, 1, 3, 4, NULL, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, (int32_t)n_vocab, 3, 4, d, &n), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 0, -1, 3, 4, d, &n), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(di_session_seq_draft_lookup(s, 5, 1, 3, 4, d, &n), DI_ERR_SEQUENCE);
    ck_assert_int_eq(di_session_seq_length(s, 0, &length), DI_OK);
    ck_assert_uint_eq(length, 8);
    /* a whole draft accepted is an ordinary resolution: n_draft 0 */
    ck_assert_int_eq(di_session_seq_accept_draft(s, 0, 0, &acc, &next), DI_OK);
    ck_assert_uint_eq(acc, 0);
    ck_assert_str_eq(di_session_errmsg(s), "");
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* A draft model must share the vocabulary; bad arguments are refused. */
START_TEST(test_drafter_refusals)
{
    di_model *m = tu_load("tok_spm"), *other = tu_load("tok_bpe_llama3"), *bare = tu_load("gqa_untied_q8_0");
    di_model *draft = tu_load("tok_spm_draft");
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    di_drafter *d = (di_drafter *)1;
    char err[256];
    ck_assert_int_eq(di_drafter_create(m, other, c, &d, err, sizeof err), DI_ERR_MODEL);
    ck_assert_ptr_null(d);
    ck_assert_ptr_nonnull(strstr(err, "vocabulary"));
    ck_assert_int_eq(di_drafter_create(m, bare, c, &d, err, sizeof err), DI_ERR_MODEL);
    ck_assert_int_eq(di_drafter_create(m, NULL, c, &d, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_drafter_create(m, draft, c, NULL, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_drafter_create(m, draft, c, &d, err, sizeof err), DI_OK);
    di_session *s = tu_session(m, 1, 1, 32);
    const int32_t toks[] = {1, 5, 9};
    tu_step(s, 0, toks, 3, 0);
    int32_t out[4];
    uint32_t n = 9;
    ck_assert_int_eq(di_drafter_propose(d, s, 0, 5, DI_DRAFT_MAX + 1, out, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_drafter_propose(d, s, 0, -1, 4, out, &n), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(di_drafter_propose(d, s, 3, 5, 4, out, &n), DI_ERR_SEQUENCE);
    ck_assert_int_eq(di_drafter_propose(d, s, 0, 5, 4, NULL, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_drafter_propose(NULL, s, 0, 5, 4, out, &n), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_drafter_propose(d, s, 0, 5, 4, out, &n), DI_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(di_drafter_errmsg(d), "");
    /* the same call twice: the same draft (its sequence keeps what it shares) */
    int32_t again[4];
    ck_assert_int_eq(di_drafter_propose(d, s, 0, 5, 4, again, &n), DI_OK);
    ck_assert(!memcmp(out, again, sizeof out));
    uint32_t length;
    ck_assert_int_eq(di_session_seq_length(s, 0, &length), DI_OK);
    ck_assert_uint_eq(length, 3); /* the model's session is unchanged */
    di_session_free(s);
    di_drafter_free(d);
    di_drafter_free(NULL);
    di_config_free(c);
    di_model_free(draft);
    di_model_free(bare);
    di_model_free(other);
    di_model_free(m);
}
END_TEST

Suite *speculate_suite(void)
{
    Suite *s = suite_create("speculate");
    TCase *tc = tcase_create("equivalence");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_greedy_every_model, 0, tu_n_models());
    tcase_add_test(tc, test_every_draft_length_and_path);
    tcase_add_test(tc, test_seeded_sampling_with_every_parameter);
    tcase_add_test(tc, test_with_a_grammar);
    tcase_add_test(tc, test_negative_control);
    suite_add_tcase(s, tc);
    tc = tcase_create("api");
    tcase_add_test(tc, test_lookup_known_answers);
    tcase_add_test(tc, test_bad_arguments_change_nothing);
    tcase_add_test(tc, test_drafter_refusals);
    suite_add_tcase(s, tc);
    return s;
}
