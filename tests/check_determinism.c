/*
 * check_determinism.c — the invariance axes of docs/DETERMINISM.md, checked
 * on digests: run to run, batch size and composition, chunked prefill,
 * prefill against decode, prefix reuse, thread count, process; the same for
 * sampled sequences in check_sampled_determinism.c.
 *
 * The baseline of every axis is a sequence computed alone, in one session
 * with one thread: its prompt's per-position digests followed by N_DECODE
 * greedy decode steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_builder.h"
#include "kernels/cpu/cpu_ops.h"
#include "test_util.h"

#define MAX_PROMPT 64
#define N_DECODE 6
#define MAX_DIGESTS (MAX_PROMPT + N_DECODE)

typedef struct trace {
    uint32_t n_prompt;
    int32_t prompt[MAX_PROMPT];
    int32_t generated[N_DECODE];
    di_digest digests[MAX_DIGESTS]; /* n_prompt prompt positions, then decode steps */
} trace;

/* Decodes N_DECODE greedy tokens of seq (whose prompt is in) alone. */
static void decode_alone(di_session *s, uint32_t seq, trace *t)
{
    for (int d = 0; d < N_DECODE; d++) {
        ck_assert_int_eq(di_session_greedy_token(s, seq, &t->generated[d]), DI_OK);
        tu_step(s, seq, &t->generated[d], 1, 0);
        t->digests[t->n_prompt + d] = tu_last_digest(s, seq);
    }
}

static void baseline(const di_model *m, const char *name, int threads, const uint32_t *chunks,
                     uint32_t n_chunks, trace *t)
{
    t->n_prompt = tu_read_prompt(name, t->prompt, MAX_PROMPT);
    di_session *s = tu_session(m, threads, 1, 0);
    tu_prompt_digests(s, 0, t->prompt, t->n_prompt, chunks, n_chunks, t->digests);
    decode_alone(s, 0, t);
    di_session_free(s);
}

static void assert_traces_equal(const trace *want, const trace *got, const char *what)
{
    for (uint32_t i = 0; i < want->n_prompt + N_DECODE; i++)
        tu_assert_digest_eq(&want->digests[i], &got->digests[i], what, (int)i);
    for (int d = 0; d < N_DECODE; d++)
        ck_assert_int_eq(want->generated[d], got->generated[d]);
}

START_TEST(test_same_step_50_times)
{
    di_model *m = tu_load(tu_models[_i]);
    trace t;
    t.n_prompt = tu_read_prompt(tu_models[_i], t.prompt, MAX_PROMPT);
    di_session *s = tu_session(m, 2, 1, 0);
    di_digest first = {{0}};
    for (int r = 0; r < 50; r++) {
        ck_assert_int_eq(di_session_seq_reset(s, 0), DI_OK);
        tu_step(s, 0, t.prompt, t.n_prompt, 0);
        di_digest d = tu_last_digest(s, 0);
        if (r == 0)
            first = d;
        tu_assert_digest_eq(&first, &d, "repetition", r);
    }
    di_session_free(s);
    di_model_free(m);
}
END_TEST

START_TEST(test_chunked_prefill_and_decode)
{
    di_model *m = tu_load(tu_models[_i]);
    trace whole, by_token, random_chunks;
    baseline(m, tu_models[_i], 1, NULL, 0, &whole);
    const uint32_t one[] = {1};
    baseline(m, tu_models[_i], 1, one, 1, &by_token);
    assert_traces_equal(&whole, &by_token, "token by token");
    uint64_t rng = 1000 + (uint64_t)_i;
    for (int trial = 0; trial < 4; trial++) {
        uint32_t chunks[8];
        for (int c = 0; c < 8; c++)
            chunks[c] = 1 + (uint32_t)(tu_rand(&rng) % 9);
        baseline(m, tu_models[_i], 1, chunks, 8, &random_chunks);
        assert_traces_equal(&whole, &random_chunks, "random chunks");
    }
    di_model_free(m);
}
END_TEST

START_TEST(test_thread_counts)
{
    static const int counts[] = {2, 3, 4, 8};
    di_model *m = tu_load(tu_models[_i]);
    trace one, many;
    baseline(m, tu_models[_i], 1, NULL, 0, &one);
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        baseline(m, tu_models[_i], counts[k], NULL, 0, &many);
        assert_traces_equal(&one, &many, "threads");
    }
    di_model_free(m);
}
END_TEST

/* A random other sequence's next chunk: 1..10 random tokens. */
static uint32_t random_chunk(uint64_t *rng, int32_t n_vocab, int32_t *out)
{
    uint32_t n = 1 + (uint32_t)(tu_rand(rng) % 10);
    for (uint32_t i = 0; i < n; i++)
        out[i] = (int32_t)(tu_rand(rng) % (uint64_t)n_vocab);
    return n;
}

/* One step of the target's tokens mixed with chunks of the others, in a
 * random entry order. */
static void mixed_step(di_session *s, uint32_t target, const int32_t *tokens, uint32_t n,
                       const uint32_t *others, uint32_t n_others, uint64_t *rng, int32_t n_vocab,
                       uint32_t flags)
{
    uint32_t ids[9], counts[9];
    int32_t flat[MAX_PROMPT + 8 * 10];
    uint32_t order[9], n_entries = n_others + 1;
    for (uint32_t e = 0; e < n_entries; e++)
        order[e] = e;
    for (uint32_t e = n_entries - 1; e > 0; e--) {
        uint32_t j = (uint32_t)(tu_rand(rng) % (e + 1)), tmp = order[e];
        order[e] = order[j];
        order[j] = tmp;
    }
    uint32_t used = 0;
    for (uint32_t e = 0; e < n_entries; e++) {
        if (order[e] == n_others) {
            ids[e] = target;
            counts[e] = n;
            memcpy(flat + used, tokens, n * sizeof *tokens);
        } else {
            ids[e] = others[order[e]];
            counts[e] = random_chunk(rng, n_vocab, flat + used);
        }
        used += counts[e];
    }
    di_status st = di_session_step(s, n_entries, ids, counts, flat, flags);
    ck_assert_msg(st == DI_OK, "mixed step: %s: %s", di_status_name(st), di_session_errmsg(s));
}

START_TEST(test_batch_size_composition_and_slot)
{
    di_model *m = tu_load(tu_models[_i]);
    int64_t n_vocab;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    trace alone;
    baseline(m, tu_models[_i], 1, NULL, 0, &alone);
    uint64_t rng = 77 + (uint64_t)_i;
    for (int trial = 0; trial < 8; trial++) {
        const uint32_t n_others = 1 + (uint32_t)(tu_rand(&rng) % 8);
        const uint32_t threads = 1 + (uint32_t)(tu_rand(&rng) % 4);
        di_session *s = tu_session(m, (int)threads, 9, 0);
        /* a random slot for the target, the others in the remaining slots */
        uint32_t target = (uint32_t)(tu_rand(&rng) % 9), others[8], k = 0;
        for (uint32_t id = 0; id < 9 && k < n_others; id++)
            if (id != target)
                others[k++] = id;
        /* the others start with histories of their own */
        for (uint32_t o = 0; o < n_others; o++) {
            int32_t pre[10];
            uint32_t n = random_chunk(&rng, (int32_t)n_vocab, pre);
            tu_step(s, others[o], pre, n, 0);
        }
        trace batched = alone;
        mixed_step(s, target, alone.prompt, alone.n_prompt, others, n_others, &rng, (int32_t)n_vocab,
                   DI_STEP_ALL_LOGITS);
        for (uint32_t i = 0; i < alone.n_prompt; i++) {
            const float *row;
            ck_assert_int_eq(di_session_logits_at(s, target, i, &row, &batched.digests[i]), DI_OK);
        }
        for (int d = 0; d < N_DECODE; d++) {
            ck_assert_int_eq(di_session_greedy_token(s, target, &batched.generated[d]), DI_OK);
            uint32_t some = 1 + (uint32_t)(tu_rand(&rng) % n_others);
            mixed_step(s, target, &batched.generated[d], 1, others, some, &rng, (int32_t)n_vocab, 0);
            batched.digests[alone.n_prompt + d] = tu_last_digest(s, target);
        }
        assert_traces_equal(&alone, &batched, "batched");
        di_session_free(s);
    }
    di_model_free(m);
}
END_TEST

START_TEST(test_prefix_reuse_and_truncate)
{
    di_model *m = tu_load(tu_models[_i]);
    trace cold;
    baseline(m, tu_models[_i], 1, NULL, 0, &cold);
    di_session *s = tu_session(m, 2, 3, 0);
    tu_step(s, 0, cold.prompt, cold.n_prompt, 0);
    for (uint32_t keep = 1; keep < cold.n_prompt; keep += 5) {
        /* seq 1 reuses seq 0's cached prefix and computes the rest */
        ck_assert_int_eq(di_session_seq_copy(s, 0, 1, keep), DI_OK);
        tu_step(s, 1, cold.prompt + keep, cold.n_prompt - keep, 0);
        di_digest d = tu_last_digest(s, 1);
        tu_assert_digest_eq(&cold.digests[cold.n_prompt - 1], &d, "prefix reuse", (int)keep);
        /* seq 2: a truncated copy refilled */
        ck_assert_int_eq(di_session_seq_copy(s, 0, 2, cold.n_prompt), DI_OK);
        ck_assert_int_eq(di_session_seq_truncate(s, 2, keep), DI_OK);
        tu_step(s, 2, cold.prompt + keep, cold.n_prompt - keep, 0);
        d = tu_last_digest(s, 2);
        tu_assert_digest_eq(&cold.digests[cold.n_prompt - 1], &d, "truncate", (int)keep);
    }
    /* the token digests of equal histories are equal */
    di_digest a, b;
    ck_assert_int_eq(di_session_seq_digest(s, 0, &a), DI_OK);
    ck_assert_int_eq(di_session_seq_digest(s, 1, &b), DI_OK);
    tu_assert_digest_eq(&a, &b, "token digest", 0);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* Attention over more than DI_CHUNK (1024) keys takes the chunked path of the
 * canonical order; chunked prefill must still agree with the whole prompt. */
START_TEST(test_long_context_chunking)
{
    const uint32_t n = 1100;
    di_model *m = tu_load("mha_tied_f32");
    int64_t n_vocab;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    int32_t *prompt = malloc(n * sizeof *prompt);
    di_digest *whole = malloc(n * sizeof *whole), *parts = malloc(n * sizeof *parts);
    uint64_t rng = 5;
    for (uint32_t i = 0; i < n; i++)
        prompt[i] = (int32_t)(tu_rand(&rng) % (uint64_t)n_vocab);
    di_session *s = tu_session(m, 2, 2, 2048);
    tu_prompt_digests(s, 0, prompt, n, NULL, 0, whole);
    const uint32_t chunks[] = {500, 37, 300, 1, 262};
    tu_prompt_digests(s, 1, prompt, n, chunks, 5, parts);
    for (uint32_t i = 0; i < n; i++)
        tu_assert_digest_eq(&whole[i], &parts[i], "long context", (int)i);
    di_session_free(s);
    free(prompt);
    free(whole);
    free(parts);
    di_model_free(m);
}
END_TEST

/* A digest computed by another process (the example program, linked against
 * the shared library) equals the one computed here. */
START_TEST(test_digest_across_processes)
{
    const char *example = getenv("DI_TEST_EXAMPLE");
    ck_assert_msg(example != NULL, "DI_TEST_EXAMPLE is not set (run the suite with make check)");
    const char *profile = getenv("DI_TEST_PROFILE");
    if (profile && !strcmp(profile, "device")) {
        /* the example runs on the CPU: the device profile promises nothing across devices */
        if (_i == 0)
            fprintf(stderr, "determinism: device profile: the cross-process test (a CPU process) is skipped\n");
        return;
    }
    if (profile && !strcmp(profile, "integer")) {
        /* the example runs the portable profile: other bits */
        if (_i == 0)
            fprintf(stderr, "determinism: integer profile: the cross-process test is skipped\n");
        return;
    }
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    trace here;
    baseline(m, name, 1, NULL, 0, &here);

    char cmd[8192], list[1024] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < here.n_prompt; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? "," : "", here.prompt[i]);
    snprintf(cmd, sizeof cmd, "'%s' --model '%s' --tokens %s --max-new %d --threads 3", example,
             tu_model_path(name, ".gguf"), list, N_DECODE);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    char line[512];
    int steps = 0;
    while (fgets(line, sizeof line, p)) {
        long step;
        int token;
        char hex[64];
        if (sscanf(line, "step %ld token %d logits %63s", &step, &token, hex) != 3)
            continue;
        ck_assert_int_lt(step, N_DECODE);
        /* step 0 is the prompt's last position, step d the d-th decode step */
        char want[DI_DIGEST_HEX_SIZE];
        di_digest_format(&here.digests[here.n_prompt - 1 + step], want);
        ck_assert_str_eq(hex, want);
        ck_assert_int_eq(token, here.generated[step]);
        steps++;
    }
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_int_eq(steps, N_DECODE);
    di_model_free(m);
}
END_TEST

/* Every CPU path this machine runs gives the scalar path's digests and
 * tokens, here with 2 threads and the prompt in chunks of 3 and 17 (17 rows
 * reach the tiled many-token matrix kernels of every SIMD path). */
START_TEST(test_cpu_paths_agree)
{
    static const di_cpu_path paths[] = {DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
    static const uint32_t chunks[] = {3, 17};
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    trace want, got;
    want.n_prompt = tu_read_prompt(name, want.prompt, MAX_PROMPT);
    di_session *s = tu_session_on(m, 1, 1, 0, DI_CPU_PATH_SCALAR);
    tu_prompt_digests(s, 0, want.prompt, want.n_prompt, NULL, 0, want.digests);
    decode_alone(s, 0, &want);
    di_session_free(s);
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (!tu_cpu_path_available(paths[p])) {
            fprintf(stderr, "determinism: this CPU cannot run CPU path %d; skipped\n", (int)paths[p]);
            continue;
        }
        got.n_prompt = want.n_prompt;
        memcpy(got.prompt, want.prompt, sizeof want.prompt);
        s = tu_session_on(m, 2, 1, 0, paths[p]);
        tu_prompt_digests(s, 0, got.prompt, got.n_prompt, chunks, 2, got.digests);
        decode_alone(s, 0, &got);
        di_session_free(s);
        assert_traces_equal(&want, &got, paths[p] == DI_CPU_PATH_AVX2 ? "avx2 vs scalar" : "avx512 vs scalar");
    }
    di_model_free(m);
}
END_TEST

/* NaN logits come back as the one quiet NaN 0x7fc00000 on every path, with
 * equal digests: a tiny llama whose tied output rows 5 and 7 (token
 * embeddings) hold NaNs with different payloads, a signalling one among them. */
START_TEST(test_nan_logits_are_canonical)
{
    static const di_cpu_path paths[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
    gb_model gm;
    gb_llama_params lp = gb_llama_defaults();
    gb_model_llama(&gm, &lp);
    gb_tensor *emb = gb_tensor_find(&gm, "token_embd.weight");
    ck_assert_ptr_nonnull(emb);
    const uint32_t nan_a = 0x7fa12345u, nan_b = 0xffc00001u;
    memcpy(emb->data.data + (5 * lp.n_embd + 3) * sizeof(float), &nan_a, sizeof nan_a);
    memcpy(emb->data.data + (7 * lp.n_embd + 30) * sizeof(float), &nan_b, sizeof nan_b);
    char dir[4096], path[4200];
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    gb_path(path, sizeof path, dir, "nan.gguf");
    ck_assert_int_eq(gb_model_write(&gm, path, NULL), 0);
    gb_model_free(&gm);
    di_model *m = NULL;
    char err[512];
    ck_assert_msg(di_model_load(path, &m, err, sizeof err) == DI_OK, "%s", err);
    gb_rmdir(dir);

    di_digest first;
    const int32_t prompt[] = {1, 2, 3};
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (!tu_cpu_path_available(paths[p]))
            continue;
        di_session *s = tu_session_on(m, 2, 1, 0, paths[p]);
        tu_step(s, 0, prompt, 3, 0);
        const float *logits = NULL;
        di_digest d;
        ck_assert_int_eq(di_session_logits(s, 0, &logits, &d), DI_OK);
        for (uint32_t i = 0; i < lp.n_vocab; i++) {
            uint32_t bits;
            memcpy(&bits, &logits[i], sizeof bits);
            if (i == 5 || i == 7)
                ck_assert_msg(bits == 0x7fc00000u, "path %d logit %u: %08x", (int)paths[p], i, bits);
            else
                ck_assert_msg(logits[i] == logits[i], "path %d logit %u is NaN", (int)paths[p], i);
        }
        int32_t greedy;
        ck_assert_int_eq(di_session_greedy_token(s, 0, &greedy), DI_OK);
        ck_assert(greedy != 5 && greedy != 7);
        if (p == 0)
            first = d;
        else
            tu_assert_digest_eq(&first, &d, "NaN row digest against the scalar path", (int)p);
        di_session_free(s);
    }
    di_model_free(m);
}
END_TEST

/* The axes run once per CPU path, the path forced through DETINFER_CPU_PATH
 * (set by the suite's unchecked fixture, before Check forks each test). A
 * path this CPU lacks is reported and its suite left empty. */
static void force_scalar(void) { setenv("DETINFER_CPU_PATH", "scalar", 1); }
static void force_avx2(void) { setenv("DETINFER_CPU_PATH", "avx2", 1); }
static void force_avx512(void) { setenv("DETINFER_CPU_PATH", "avx512", 1); }
static void unforce(void) { unsetenv("DETINFER_CPU_PATH"); }

/* The same axes for sampled sequences (check_sampled_determinism.c). */
void sampled_determinism_cases(TCase *tc, int paths_agree);

Suite *determinism_suite(di_cpu_path path)
{
    static const char *const names[] = {"determinism", "determinism-scalar", "determinism-avx2",
                                        "determinism-avx512"};
    Suite *s = suite_create(names[path]);
    TCase *tc = tcase_create("axes"), *sampled = tcase_create("sampled");
    tcase_set_timeout(tc, 300);
    tcase_set_timeout(sampled, 300);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, sampled);
    if (path == DI_CPU_PATH_AUTO) {
        tcase_add_loop_test(tc, test_cpu_paths_agree, 0, tu_n_models());
        tcase_add_test(tc, test_nan_logits_are_canonical);
        sampled_determinism_cases(sampled, 1);
        return s;
    }
    if (!tu_cpu_path_available(path)) {
        fprintf(stderr, "%s: this CPU cannot run that path; suite skipped\n", names[path]);
        return s;
    }
    /* Under ASan + UBSan the axes run only on the path a session picks by itself
     * (di_cpu_ops_select, the widest this CPU runs): the axes' own code (batches,
     * chunks, prefixes, threads) is the same on every path, and the paths suite
     * runs every path's kernels under the sanitizers over their shapes; the
     * scalar path alone took 13 of the run's minutes. */
    const char *san = getenv("DI_TEST_SANITIZE");
    const di_cpu_ops *best = NULL;
    char err[256];
    if (san && !strcmp(san, "1") && di_cpu_ops_select(DI_CPU_PATH_AUTO, &best, err, sizeof err) == DI_OK &&
        best != di_cpu_ops_for(path)) {
        fprintf(stderr, "%s: under the sanitizers the axes run on the best path only; suite skipped\n",
                names[path]);
        return s;
    }
    void (*force)(void) = path == DI_CPU_PATH_SCALAR ? force_scalar
                          : path == DI_CPU_PATH_AVX2 ? force_avx2 : force_avx512;
    tcase_add_unchecked_fixture(tc, force, unforce);
    tcase_add_unchecked_fixture(sampled, force, unforce);
    tcase_add_loop_test(tc, test_same_step_50_times, 0, tu_n_models());
    tcase_add_loop_test(tc, test_chunked_prefill_and_decode, 0, tu_n_models());
    tcase_add_loop_test(tc, test_thread_counts, 0, tu_n_models());
    tcase_add_loop_test(tc, test_batch_size_composition_and_slot, 0, tu_n_models());
    tcase_add_loop_test(tc, test_prefix_reuse_and_truncate, 0, tu_n_models());
    tcase_add_loop_test(tc, test_digest_across_processes, 0, tu_n_models());
    tcase_add_test(tc, test_long_context_chunking);
    sampled_determinism_cases(sampled, 0);
    return s;
}
