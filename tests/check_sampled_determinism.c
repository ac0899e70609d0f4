/*
 * check_sampled_determinism.c — the invariance axes of docs/DETERMINISM.md
 * for sampled sequences (di_session_sample_token at temperature > 0, with
 * filters and penalties): 50 repetitions, batch size and composition with
 * neighbours that sample with other seeds and parameters, the slot, chunked
 * prefill, prefix copy, truncate-and-refeed (also in the middle of a
 * generation), thread counts and the CPU paths. They run inside the
 * determinism suites, so once per CPU path (determinism_suite forces it);
 * a fresh process (the detinfer command) samples the same tokens too; the
 * CUDA emulation is in check_cuda.c.
 *
 * The baseline of every axis: the model's prompt in one step, alone, one
 * thread, then N_GEN sampled tokens; its tokens, the logits digest of every
 * prompt position and decode step, and the generation's sequence digest
 * (di_session_seq_digest_extra of prompt + generated).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define MAX_PROMPT 64
#define N_GEN 10
#define N_PARAMS 3

/* Models covering the architectures and several weight types. */
static const char *const MODELS[] = {"mha_tied_q8_0", "gqa_untied_f16", "odd_f32", "qwen2_q8_0",
                                     "gemma3_q8_0"};
#define N_MODELS (int)(sizeof MODELS / sizeof MODELS[0])

/* Three parameter sets: plain temperature, every filter and penalty, and a
 * hot one with the whole-sequence window. */
static di_sampling_params params_of(int k, uint64_t seed)
{
    di_sampling_params p;
    ck_assert_int_eq(di_sampling_params_init(&p), DI_OK);
    p.seed = seed;
    switch (k % N_PARAMS) {
    case 0:
        p.temperature = 0.8f;
        break;
    case 1:
        p.temperature = 1.3f;
        p.top_k = 20;
        p.top_p = 0.9f;
        p.min_p = 0.05f;
        p.repetition_penalty = 1.2f;
        p.presence_penalty = 0.3f;
        p.frequency_penalty = 0.1f;
        p.penalty_window = 8;
        break;
    default:
        p.temperature = 2.0f;
        p.top_p = 0.97f;
        p.frequency_penalty = 0.2f;
        p.penalty_window = 0;
        break;
    }
    return p;
}

typedef struct strace {
    uint32_t n_prompt;
    int32_t prompt[MAX_PROMPT];
    int32_t generated[N_GEN];
    di_digest digests[MAX_PROMPT + N_GEN]; /* prompt positions, then decode steps */
    di_digest sequence;                    /* prompt + generated */
} strace;

static void set_params(di_session *s, uint32_t seq, const di_sampling_params *p)
{
    di_status st = di_session_seq_set_sampling(s, seq, p);
    ck_assert_msg(st == DI_OK, "set_sampling: %s: %s", di_status_name(st), di_session_errmsg(s));
}

static int32_t sample(di_session *s, uint32_t seq)
{
    int32_t t = -1;
    di_status st = di_session_sample_token(s, seq, &t);
    ck_assert_msg(st == DI_OK, "sample: %s: %s", di_status_name(st), di_session_errmsg(s));
    return t;
}

/* Samples the tokens of decode steps `from`.. of seq (its prompt and the
 * tokens before `from` are in), alone; then the sequence digest. */
static void generate_alone(di_session *s, uint32_t seq, strace *t, int from)
{
    for (int d = from; d < N_GEN; d++) {
        t->generated[d] = sample(s, seq);
        if (d + 1 < N_GEN) {
            tu_step(s, seq, &t->generated[d], 1, 0);
            t->digests[t->n_prompt + d] = tu_last_digest(s, seq);
        }
    }
    ck_assert_int_eq(di_session_seq_digest_extra(s, seq, &t->generated[N_GEN - 1], 1, &t->sequence), DI_OK);
}

static void read_prompt(const char *name, strace *t)
{
    t->n_prompt = tu_read_prompt(name, t->prompt, MAX_PROMPT);
}

static void baseline(const di_model *m, const char *name, int threads, const uint32_t *chunks,
                     uint32_t n_chunks, const di_sampling_params *p, strace *t)
{
    read_prompt(name, t);
    di_session *s = tu_session(m, threads, 1, 0);
    set_params(s, 0, p);
    tu_prompt_digests(s, 0, t->prompt, t->n_prompt, chunks, n_chunks, t->digests);
    generate_alone(s, 0, t, 0);
    di_session_free(s);
}

static void assert_equal(const strace *want, const strace *got, const char *what)
{
    for (int d = 0; d < N_GEN; d++)
        ck_assert_msg(want->generated[d] == got->generated[d], "%s: token %d: %d, want %d", what, d,
                      got->generated[d], want->generated[d]);
    for (uint32_t i = 0; i < want->n_prompt + N_GEN - 1; i++)
        tu_assert_digest_eq(&want->digests[i], &got->digests[i], what, (int)i);
    tu_assert_digest_eq(&want->sequence, &got->sequence, what, -1);
}

/* The loop index picks the model and the parameter set. */
#define CASE_MODEL (MODELS[_i % N_MODELS])
#define CASE_PARAMS(seed) params_of(_i / N_MODELS, seed)
#define N_CASES (N_MODELS * N_PARAMS)

/* Once per model, the parameter set rotating with it. */
START_TEST(test_sampled_50_repetitions)
{
    di_model *m = tu_load(CASE_MODEL);
    const di_sampling_params p = params_of(_i, 1234);
    strace want, got;
    baseline(m, CASE_MODEL, 1, NULL, 0, &p, &want);
    di_session *s = tu_session(m, 2, 1, 0);
    set_params(s, 0, &p);
    got = want;
    for (int r = 0; r < 50; r++) {
        ck_assert_int_eq(di_session_seq_reset(s, 0), DI_OK);
        tu_step(s, 0, want.prompt, want.n_prompt, 0);
        generate_alone(s, 0, &got, 0);
        assert_equal(&want, &got, "repetition");
    }
    di_session_free(s);
    di_model_free(m);
}
END_TEST

START_TEST(test_sampled_chunked_prefill_and_threads)
{
    di_model *m = tu_load(CASE_MODEL);
    const di_sampling_params p = CASE_PARAMS(77);
    strace whole, other;
    baseline(m, CASE_MODEL, 1, NULL, 0, &p, &whole);
    const uint32_t one[] = {1}, mixed[] = {3, 1, 7, 2};
    baseline(m, CASE_MODEL, 1, one, 1, &p, &other);
    assert_equal(&whole, &other, "token by token");
    baseline(m, CASE_MODEL, 3, mixed, 4, &p, &other);
    assert_equal(&whole, &other, "chunks, 3 threads");
    static const int threads[] = {2, 4, 8};
    for (int k = 0; k < 3; k++) {
        baseline(m, CASE_MODEL, threads[k], NULL, 0, &p, &other);
        assert_equal(&whole, &other, "threads");
    }
    di_model_free(m);
}
END_TEST

/* The target decodes inside steps with up to 8 neighbours in random slots,
 * which prefill chunks and decode their own tokens, each sampling with its
 * own seed and parameters (some greedy), in random entry order. */
START_TEST(test_sampled_batch_composition_and_slot)
{
    di_model *m = tu_load(CASE_MODEL);
    int64_t n_vocab;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    const di_sampling_params p = CASE_PARAMS(2024);
    strace alone;
    baseline(m, CASE_MODEL, 1, NULL, 0, &p, &alone);
    uint64_t rng = 31 + (uint64_t)_i;
    for (int trial = 0; trial < 6; trial++) {
        const uint32_t n_seq = 9, threads = 1 + (uint32_t)(tu_rand(&rng) % 4);
        di_session *s = tu_session(m, (int)threads, (int)n_seq, 0);
        const uint32_t target = (uint32_t)(tu_rand(&rng) % n_seq);
        set_params(s, target, &p);
        for (uint32_t q = 0; q < n_seq; q++) {
            if (q == target)
                continue;
            di_sampling_params other = params_of((int)(tu_rand(&rng) % (N_PARAMS + 1)), tu_rand(&rng));
            if (tu_rand(&rng) % 4 == 0)
                di_sampling_params_init(&other); /* greedy */
            set_params(s, q, &other);
        }
        strace got = alone;
        int32_t next[9]; /* each sequence's next token; -1: none yet */
        for (uint32_t q = 0; q < n_seq; q++)
            next[q] = -1;
        /* step 0: the target's prompt; then one step per generated token */
        for (int d = -1; d < N_GEN - 1; d++) {
            uint32_t ids[9], counts[9], n_entries = 0, used = 0;
            int32_t flat[MAX_PROMPT + 9 * 10];
            /* entries in a random order: the target and a random subset of the others */
            uint32_t order[9];
            for (uint32_t q = 0; q < n_seq; q++)
                order[q] = q;
            for (uint32_t q = n_seq - 1; q > 0; q--) {
                uint32_t j = (uint32_t)(tu_rand(&rng) % (q + 1)), tmp = order[q];
                order[q] = order[j];
                order[j] = tmp;
            }
            for (uint32_t k = 0; k < n_seq; k++) {
                const uint32_t q = order[k];
                if (q == target) {
                    if (d < 0) {
                        memcpy(flat + used, alone.prompt, alone.n_prompt * sizeof(int32_t));
                        counts[n_entries] = alone.n_prompt;
                    } else {
                        flat[used] = got.generated[d];
                        counts[n_entries] = 1;
                    }
                } else if (tu_rand(&rng) % 3 == 0) {
                    continue; /* sits this step out */
                } else if (next[q] < 0 || tu_rand(&rng) % 5 == 0) {
                    /* a prompt chunk of random tokens */
                    counts[n_entries] = 1 + (uint32_t)(tu_rand(&rng) % 10);
                    for (uint32_t i = 0; i < counts[n_entries]; i++)
                        flat[used + i] = (int32_t)(tu_rand(&rng) % (uint64_t)n_vocab);
                } else {
                    flat[used] = next[q]; /* its own sampled token */
                    counts[n_entries] = 1;
                }
                ids[n_entries] = q;
                used += counts[n_entries++];
            }
            di_status st = di_session_step(s, n_entries, ids, counts, flat, d < 0 ? DI_STEP_ALL_LOGITS : 0);
            ck_assert_msg(st == DI_OK, "step: %s: %s", di_status_name(st), di_session_errmsg(s));
            if (d < 0)
                for (uint32_t i = 0; i < alone.n_prompt; i++) {
                    const float *row;
                    ck_assert_int_eq(di_session_logits_at(s, target, i, &row, &got.digests[i]), DI_OK);
                }
            else
                got.digests[alone.n_prompt + d] = tu_last_digest(s, target);
            got.generated[d + 1] = sample(s, target);
            for (uint32_t e = 0; e < n_entries; e++)
                if (ids[e] != target)
                    next[ids[e]] = sample(s, ids[e]);
        }
        ck_assert_int_eq(di_session_seq_digest_extra(s, target, &got.generated[N_GEN - 1], 1, &got.sequence),
                         DI_OK);
        assert_equal(&alone, &got, "batched");
        di_session_free(s);
    }
    di_model_free(m);
}
END_TEST

/* Prefix copy, truncate-and-refeed of the prompt, and a generation rewound
 * to each of its positions and continued: the same tokens (the random number
 * belongs to the position, not to how the sequence got there). */
START_TEST(test_sampled_prefix_copy_and_truncate)
{
    di_model *m = tu_load(CASE_MODEL);
    const di_sampling_params p = CASE_PARAMS(99);
    strace want, got;
    baseline(m, CASE_MODEL, 1, NULL, 0, &p, &want);
    di_session *s = tu_session(m, 2, 3, 0);
    for (uint32_t q = 0; q < 3; q++)
        set_params(s, q, &p);
    tu_step(s, 0, want.prompt, want.n_prompt, 0);
    for (uint32_t keep = 1; keep < want.n_prompt; keep += 6) {
        got = want;
        ck_assert_int_eq(di_session_seq_copy(s, 0, 1, keep), DI_OK);
        tu_step(s, 1, want.prompt + keep, want.n_prompt - keep, 0);
        generate_alone(s, 1, &got, 0);
        assert_equal(&want, &got, "prefix copy");
        ck_assert_int_eq(di_session_seq_copy(s, 0, 2, want.n_prompt), DI_OK);
        ck_assert_int_eq(di_session_seq_truncate(s, 2, keep), DI_OK);
        tu_step(s, 2, want.prompt + keep, want.n_prompt - keep, 0);
        generate_alone(s, 2, &got, 0);
        assert_equal(&want, &got, "truncate and refeed");
    }
    /* seq 1 holds prompt + generated[0..N_GEN-2]: rewind to prompt + d
     * tokens, refeed generated[d - 1] and sample on */
    for (int d = 1; d < N_GEN - 1; d++) {
        got = want;
        ck_assert_int_eq(di_session_seq_truncate(s, 1, want.n_prompt + (uint32_t)d - 1), DI_OK);
        tu_step(s, 1, &want.generated[d - 1], 1, 0);
        generate_alone(s, 1, &got, d);
        assert_equal(&want, &got, "rewound generation");
    }
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* Every CPU path this machine runs samples the scalar path's tokens. */
START_TEST(test_sampled_cpu_paths_agree)
{
    static const di_cpu_path paths[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
    di_model *m = tu_load(CASE_MODEL);
    const di_sampling_params p = CASE_PARAMS(5150);
    strace want, got;
    int compared = 0;
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        if (!tu_cpu_path_available(paths[k]))
            continue;
        strace *t = compared == 0 ? &want : &got;
        read_prompt(CASE_MODEL, t);
        di_session *s = tu_session_on(m, 2, 1, 0, paths[k]);
        set_params(s, 0, &p);
        tu_prompt_digests(s, 0, t->prompt, t->n_prompt, NULL, 0, t->digests);
        generate_alone(s, 0, t, 0);
        di_session_free(s);
        if (compared++ > 0)
            assert_equal(&want, &got, paths[k] == DI_CPU_PATH_AVX2 ? "avx2 vs scalar" : "avx512 vs scalar");
    }
    ck_assert_int_ge(compared, 1);
    di_model_free(m);
}
END_TEST

/* Same seed, same tokens in other sessions; other seeds, other tokens. */
START_TEST(test_sampled_seeds_matter)
{
    di_model *m = tu_load(CASE_MODEL);
    strace a, b;
    int differ = 0;
    for (uint64_t seed = 0; seed < 12; seed++) {
        const di_sampling_params p = CASE_PARAMS(seed * 0x100000001ull);
        baseline(m, CASE_MODEL, 1, NULL, 0, &p, &a);
        if (seed > 0)
            differ += memcmp(a.generated, b.generated, sizeof a.generated) != 0;
        baseline(m, CASE_MODEL, 2, NULL, 0, &p, &b);
        assert_equal(&a, &b, "same seed");
    }
    ck_assert_int_ge(differ, 10);
    di_model_free(m);
}
END_TEST

/* A fresh process (`detinfer run` with the sampling options, 3 threads)
 * samples the tokens and logits digests computed here. */
START_TEST(test_sampled_fresh_process)
{
    const char *name = CASE_MODEL;
    const di_sampling_params p = params_of(_i, 0x123456789abcdefull);
    di_model *m = tu_load(name);
    strace want;
    baseline(m, name, 1, NULL, 0, &p, &want);
    char tool[4096], list[1024] = "", cmd[8192];
    tu_tool_path(tool, sizeof tool);
    size_t used = 0;
    for (uint32_t i = 0; i < want.n_prompt; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? "," : "", want.prompt[i]);
    snprintf(cmd, sizeof cmd,
             "'%s' run --model '%s' --tokens %s --max-new %d --threads 3 --ignore-eos --temperature %.9g "
             "--top-k %d --top-p %.9g --min-p %.9g --repeat-penalty %.9g --presence-penalty %.9g "
             "--frequency-penalty %.9g --penalty-window %u --seed %llu",
             tool, tu_model_path(name, ".gguf"), list, N_GEN, (double)p.temperature, (int)p.top_k,
             (double)p.top_p, (double)p.min_p, (double)p.repetition_penalty, (double)p.presence_penalty,
             (double)p.frequency_penalty, (unsigned)p.penalty_window, (unsigned long long)p.seed);
    const char *profile = getenv("DI_TEST_PROFILE"); /* the suite's profile in the fresh process too */
    strncat(cmd, profile && !strcmp(profile, "integer") ? " --profile integer" : " --profile portable",
            sizeof cmd - strlen(cmd) - 1);
    FILE *f = popen(cmd, "r");
    ck_assert_msg(f != NULL, "cannot run %s", cmd);
    char line[512], hex[64], want_hex[DI_DIGEST_HEX_SIZE];
    int steps = 0, sequence = 0;
    while (fgets(line, sizeof line, f)) {
        long step;
        int token;
        unsigned n;
        if (sscanf(line, "step %ld token %d logits %63s", &step, &token, hex) == 3) {
            ck_assert_int_lt(step, N_GEN);
            di_digest_format(&want.digests[want.n_prompt - 1 + step], want_hex);
            ck_assert_str_eq(hex, want_hex);
            ck_assert_int_eq(token, want.generated[step]);
            steps++;
        } else if (sscanf(line, "sequence %u tokens digest %63s", &n, hex) == 2) {
            di_digest_format(&want.sequence, want_hex);
            ck_assert_str_eq(hex, want_hex);
            ck_assert_uint_eq(n, want.n_prompt + N_GEN);
            sequence = 1;
        }
    }
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_int_eq(steps, N_GEN);
    ck_assert(sequence);
    di_model_free(m);
}
END_TEST

/* Adds the sampled axes to a determinism suite's case. */
void sampled_determinism_cases(TCase *tc, int paths_agree)
{
    if (paths_agree) {
        tcase_add_loop_test(tc, test_sampled_cpu_paths_agree, 0, N_CASES);
        return;
    }
    tcase_add_loop_test(tc, test_sampled_50_repetitions, 0, N_MODELS);
    tcase_add_loop_test(tc, test_sampled_chunked_prefill_and_threads, 0, N_CASES);
    tcase_add_loop_test(tc, test_sampled_batch_composition_and_slot, 0, N_CASES);
    tcase_add_loop_test(tc, test_sampled_prefix_copy_and_truncate, 0, N_CASES);
    tcase_add_loop_test(tc, test_sampled_seeds_matter, 0, N_CASES);
    tcase_add_loop_test(tc, test_sampled_fresh_process, 0, N_MODELS);
}
