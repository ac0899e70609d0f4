/*
 * check_real.c — the real model (Gemma 3 270M, Q4_K_M, fetched from PyPI by
 * tools/scripts/fetch-model.sh): logits against the float64 reference, and greedy
 * generation of 5 prompts checked along the determinism axes on digests.
 *
 * $DI_TEST_REAL_MODEL names the file and $DI_TEST_REAL_REF its float64
 * reference (tests/tools/reference.py over a short prompt). When the model
 * could not be fetched, make check says so and this suite has no tests.
 * Also: the peak resident memory of a long prefill stays within budget.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/model/model.h"
#include "test_util.h"

#define REL_TOL 1e-4
#define N_PROMPTS 5
#define MAX_NEW 32
#define MAX_TOKENS 64

static const char *const prompts[N_PROMPTS] = {
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
    "Water boils at a temperature of",
};

/* 32 new tokens normally; 8 under the sanitizers, which make each step many
 * times slower and find memory errors on the first tokens as well. */
static int n_new(void)
{
    const char *san = getenv("DI_TEST_SANITIZE");
    return san && *san ? 8 : MAX_NEW;
}

static di_model *load_real(void)
{
    char err[512];
    di_model *m = NULL;
    di_status st = di_model_load(getenv("DI_TEST_REAL_MODEL"), &m, err, sizeof err);
    ck_assert_msg(st == DI_OK, "loading the real model: %s: %s", di_status_name(st), err);
    return m;
}

START_TEST(test_real_logits_match_float64_reference)
{
    di_model *m = load_real();
    FILE *f = fopen(getenv("DI_TEST_REAL_REF"), "rb");
    ck_assert_msg(f != NULL, "cannot open $DI_TEST_REAL_REF");
    char magic[8];
    uint32_t n_tokens, n_vocab;
    ck_assert_int_eq(fread(magic, 1, 8, f), 8);
    ck_assert_int_eq(fread(&n_tokens, 4, 1, f), 1);
    ck_assert_int_eq(fread(&n_vocab, 4, 1, f), 1);
    ck_assert(memcmp(magic, "DIREF001", 8) == 0 && n_tokens <= MAX_TOKENS);
    int32_t tokens[MAX_TOKENS];
    ck_assert_int_eq(fread(tokens, 4, n_tokens, f), n_tokens);
    double *ref = malloc((size_t)n_vocab * sizeof *ref);
    di_session *s = tu_session(m, 2, 1, 256);
    tu_step(s, 0, tokens, n_tokens, DI_STEP_ALL_LOGITS);
    double worst = 0;
    for (uint32_t t = 0; t < n_tokens; t++) {
        ck_assert_int_eq(fread(ref, sizeof *ref, n_vocab, f), n_vocab);
        const float *row;
        ck_assert_int_eq(di_session_logits_at(s, 0, t, &row, NULL), DI_OK);
        double max_ref = 0, max_err = 0;
        for (uint32_t i = 0; i < n_vocab; i++) {
            max_ref = fmax(max_ref, fabs(ref[i]));
            max_err = fmax(max_err, fabs(row[i] - ref[i]));
        }
        ck_assert_msg(max_err <= REL_TOL * max_ref, "position %u: error %.3g of %.3g", t, max_err, max_ref);
        worst = fmax(worst, max_err / max_ref);
    }
    printf("real model: max relative error %.3e over %u positions against float64\n", worst, n_tokens);
    fclose(f);
    free(ref);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

typedef struct generation {
    int32_t tokens[MAX_NEW];
    di_digest digests[MAX_NEW]; /* digest of the logits each token came from */
} generation;

/* Greedy generation of every prompt at once in one session: the prompts go
 * in together, in chunks of `chunk` tokens (0: whole), then one decode step
 * advances all of them. */
static void generate_all(const di_model *m, int threads, uint32_t chunk, generation *out)
{
    int32_t ids[N_PROMPTS][MAX_TOKENS];
    size_t n_ids[N_PROMPTS];
    char err[256];
    for (int p = 0; p < N_PROMPTS; p++) {
        di_status st = di_model_tokenize(m, prompts[p], strlen(prompts[p]), DI_TOKENIZE_ADD_BOS,
                                         ids[p], MAX_TOKENS, &n_ids[p], err, sizeof err);
        ck_assert_msg(st == DI_OK, "tokenize: %s: %s", di_status_name(st), err);
    }
    di_session *s = tu_session(m, threads, N_PROMPTS, 128);
    size_t done[N_PROMPTS] = {0};
    for (int busy = 1; busy;) {
        uint32_t seqs[N_PROMPTS], counts[N_PROMPTS], n = 0;
        int32_t flat[N_PROMPTS * MAX_TOKENS];
        size_t used = 0;
        busy = 0;
        for (int p = 0; p < N_PROMPTS; p++) {
            size_t left = n_ids[p] - done[p];
            if (left == 0)
                continue;
            uint32_t take = chunk && left > chunk ? chunk : (uint32_t)left;
            seqs[n] = (uint32_t)p;
            counts[n] = take;
            memcpy(flat + used, ids[p] + done[p], take * sizeof(int32_t));
            used += take;
            done[p] += take;
            n++;
            busy = 1;
        }
        if (n)
            ck_assert_int_eq(di_session_step(s, n, seqs, counts, flat, 0), DI_OK);
    }
    for (int k = 0; k < n_new(); k++) {
        uint32_t seqs[N_PROMPTS], ones[N_PROMPTS];
        int32_t next[N_PROMPTS];
        for (int p = 0; p < N_PROMPTS; p++) {
            const float *row;
            ck_assert_int_eq(di_session_logits(s, (uint32_t)p, &row, &out[p].digests[k]), DI_OK);
            ck_assert_int_eq(di_session_greedy_token(s, (uint32_t)p, &next[p]), DI_OK);
            out[p].tokens[k] = next[p];
            seqs[p] = (uint32_t)p;
            ones[p] = 1;
        }
        ck_assert_int_eq(di_session_step(s, N_PROMPTS, seqs, ones, next, 0), DI_OK);
    }
    di_session_free(s);
}

/* Each prompt alone, whole, one thread: the baseline. */
static void generate_alone(const di_model *m, int p, generation *out)
{
    int32_t ids[MAX_TOKENS];
    size_t n;
    char err[256];
    ck_assert_int_eq(di_model_tokenize(m, prompts[p], strlen(prompts[p]), DI_TOKENIZE_ADD_BOS, ids,
                                       MAX_TOKENS, &n, err, sizeof err),
                     DI_OK);
    di_session *s = tu_session(m, 1, 1, 128);
    tu_step(s, 0, ids, (uint32_t)n, 0);
    for (int k = 0; k < n_new(); k++) {
        const float *row;
        ck_assert_int_eq(di_session_logits(s, 0, &row, &out->digests[k]), DI_OK);
        ck_assert_int_eq(di_session_greedy_token(s, 0, &out->tokens[k]), DI_OK);
        tu_step(s, 0, &out->tokens[k], 1, 0);
    }
    di_session_free(s);
}

START_TEST(test_real_generation_is_invariant)
{
    di_model *m = load_real();
    static generation alone[N_PROMPTS], batched[N_PROMPTS], chunked[N_PROMPTS];
    for (int p = 0; p < N_PROMPTS; p++)
        generate_alone(m, p, &alone[p]);
    generate_all(m, 2, 0, batched);  /* batched, 2 threads */
    generate_all(m, 2, 3, chunked);  /* batched, prompts in chunks of 3, 2 threads */
    for (int p = 0; p < N_PROMPTS; p++) {
        for (int k = 0; k < n_new(); k++) {
            tu_assert_digest_eq(&alone[p].digests[k], &batched[p].digests[k], prompts[p], k);
            tu_assert_digest_eq(&alone[p].digests[k], &chunked[p].digests[k], prompts[p], k);
            ck_assert_int_eq(alone[p].tokens[k], batched[p].tokens[k]);
        }
        char text[1024];
        size_t len;
        ck_assert_int_eq(di_model_detokenize(m, alone[p].tokens, (size_t)n_new(), text, sizeof text, &len,
                                             NULL, 0),
                         DI_OK);
        printf("real model: %s|%s\n", prompts[p], text);
    }
    di_model_free(m);
}
END_TEST

/* Peak resident memory of this process in KiB (VmHWM), or 0 if unknown. */
static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The weights stay mapped from the file (no second copy): a 512-token prefill
 * and 16 decode steps with 2 threads keep the peak resident memory within the
 * file size + the KV cache + 64 MiB (the CPU budget of issue 6). Skipped under
 * the sanitizers, whose shadow memory is not ours. */
START_TEST(test_real_resident_memory)
{
    const char *san = getenv("DI_TEST_SANITIZE");
    if (san && *san == '1') {
        printf("real model: resident-memory check skipped under the sanitizers\n");
        return;
    }
    const long before = peak_rss_kib();
    struct stat st;
    ck_assert_int_eq(stat(getenv("DI_TEST_REAL_MODEL"), &st), 0);
    di_model *m = load_real();
    const uint32_t ctx = 1024;
    di_session *s = tu_session(m, 2, 1, (int)ctx);
    int32_t tokens[512];
    uint64_t rng = 3;
    for (int i = 0; i < 512; i++)
        tokens[i] = (int32_t)(1000 + tu_rand(&rng) % 20000);
    tu_step(s, 0, tokens, 512, 0);
    for (int i = 0; i < 16; i++) {
        int32_t t;
        ck_assert_int_eq(di_session_greedy_token(s, 0, &t), DI_OK);
        tu_step(s, 0, &t, 1, 0);
    }
    const long peak = peak_rss_kib();
    const double kv_mib = (double)m->n_layer * ctx * m->n_head_kv * m->head_dim * 2 * sizeof(float) / 1048576.0;
    const double file_mib = (double)st.st_size / 1048576.0;
    const double used_mib = (double)(peak - before) / 1024.0;
    printf("real model: peak resident memory %.1f MiB above the start; budget %.1f MiB (file %.1f + KV "
           "cache %.1f + 64)\n", used_mib, file_mib + kv_mib + 64.0, file_mib, kv_mib);
    ck_assert_msg(before > 0 && peak > 0, "VmHWM not readable");
    ck_assert_msg(used_mib <= file_mib + kv_mib + 64.0, "peak %.1f MiB over the budget", used_mib);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

Suite *real_suite(void)
{
    Suite *s = suite_create("real-model");
    const char *model = getenv("DI_TEST_REAL_MODEL");
    if (!model || !*model) {
        printf("real-model: no real model (tools/scripts/fetch-model.sh could not fetch it): suite skipped\n");
        return s;
    }
    TCase *tc = tcase_create("gemma3-270m");
    tcase_set_timeout(tc, 900);
    if (getenv("DI_TEST_REAL_REF") && *getenv("DI_TEST_REAL_REF"))
        tcase_add_test(tc, test_real_logits_match_float64_reference);
    tcase_add_test(tc, test_real_generation_is_invariant);
    tcase_add_test(tc, test_real_resident_memory);
    suite_add_tcase(s, tc);
    return s;
}
