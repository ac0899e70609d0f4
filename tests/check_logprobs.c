/*
 * check_logprobs.c — di_session_logprobs and the log it needs
 * (docs/DETERMINISM.md, "Log-probabilities"):
 *   - di_logf against the correctly rounded ln of 1.39M binary32 inputs
 *     (tests/tools/logprobs_reference.py: NumPy float64, mpmath near
 *     midpoints), bit for bit, and its special values;
 *   - the ordering rule on fixed logits (ties by id, ties that only the
 *     rounding of the log-probabilities makes, NaN and infinities);
 *   - every bad argument: a status and a message;
 *   - the values against an independent float64 NumPy log-softmax of the
 *     same logits (generated models and the real one), and the top-n order;
 *   - bitwise equality across CPU paths, threads and batch composition;
 *   - a prompt's log-probabilities (di_session_logprobs_at): the bits of the
 *     prompt stepped one token at a time, whatever the chunks, path and
 *     threads; float64 log-softmax of the reference logits; bad arguments.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/api/logprobs.h"
#include "kernels/common/numerics.h"
#include "test_util.h"

/* Bound of |library - float64 reference| on every token of every row here
 * (docs/DETERMINISM.md states it); the measured maximum is printed. */
#define MAX_ABS_ERROR 2e-5

static uint32_t bits_of(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* A fresh directory for the files exchanged with the reference script. */
static void temp_dir(char *dir, size_t size)
{
    snprintf(dir, size, "%s/di_logprobs_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void run_reference(const char *args)
{
    const char *root = getenv("DI_TEST_ROOT");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set (run the suite with make check)");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/tools/logprobs_reference.py' %s", root, args);
    int status = system(cmd);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s failed (status %d)", cmd, status);
}

/* ---- di_logf ------------------------------------------------------------------- */

START_TEST(test_logf_special_values)
{
    ck_assert_uint_eq(bits_of(di_logf(1.0f)), 0u);
    ck_assert(isinf(di_logf(0.0f)) && di_logf(0.0f) < 0);
    ck_assert(isinf(di_logf(-0.0f)) && di_logf(-0.0f) < 0);
    ck_assert(isinf(di_logf(INFINITY)) && di_logf(INFINITY) > 0);
    ck_assert(isnan(di_logf(-1.0f)));
    ck_assert(isnan(di_logf(-INFINITY)));
    ck_assert(isnan(di_logf(NAN)));
    /* ln 2 and ln of the largest and smallest floats, correctly rounded
     * (the binary32 nearest to mpmath's values) */
    ck_assert_float_eq(di_logf(2.0f), 0.693147182f);
    ck_assert_float_eq(di_logf(3.40282347e38f), 88.7228394f);
    ck_assert_float_eq(di_logf(1.40129846e-45f), -103.278931f);
    ck_assert_float_eq(di_logf(262144.0f), 12.4766493f); /* a vocabulary's uniform sum */
}
END_TEST

START_TEST(test_logf_correctly_rounded)
{
    char dir[4096], path[4200], args[8500];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/log.bin", dir);
    snprintf(args, sizeof args, "log '%s' > /dev/null", path);
    run_reference(args);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    float pair[2];
    size_t n = 0, below_one = 0;
    while (fread(pair, sizeof pair, 1, f) == 1) {
        const float got = di_logf(pair[0]);
        ck_assert_msg(bits_of(got) == bits_of(pair[1]), "ln %a: %a, the correctly rounded value is %a", pair[0],
                      got, pair[1]);
        n++;
        below_one += pair[0] < 1.0f;
    }
    fclose(f);
    unlink(path);
    rmdir(dir);
    ck_assert_uint_gt(n, 1000000);
    ck_assert_uint_gt(below_one, 10000); /* the random part covers (0, 1) too */
    printf("logprobs: di_logf correctly rounded on %zu inputs\n", n);
}
END_TEST

/* ---- the ordering rule on fixed logits --------------------------------------- */

static di_sampler scratch_for(uint32_t n)
{
    di_sampler s;
    ck_assert_int_eq(di_sampler_init(&s, n), DI_OK);
    return s;
}

START_TEST(test_order_ties_by_id)
{
    /* ids:                 0     1     2     3     4    5     6 */
    const float logits[] = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, NAN, -INFINITY};
    const int32_t want[] = {1, 2, 4, 3, 0, 6, 5};
    di_sampler s = scratch_for(7);
    int32_t top[7];
    float lp[7], one;
    di_logprobs(&s, logits, 2, &one, 7, top, lp);
    for (int j = 0; j < 7; j++)
        ck_assert_msg(top[j] == want[j], "rank %d: token %d, want %d", j, top[j], want[j]);
    ck_assert_uint_eq(bits_of(lp[0]), bits_of(lp[1]));
    ck_assert_uint_eq(bits_of(lp[1]), bits_of(one));
    ck_assert(isinf(lp[5]) && lp[5] < 0);
    ck_assert(isnan(lp[6]));
    /* float64: 3 - log(3 e^3 + e^2 + e) */
    const double ref = 3.0 - log(3 * exp(3.0) + exp(2.0) + exp(1.0));
    ck_assert_double_le(fabs(lp[0] - ref), 1e-6);
    di_sampler_release(&s);
}
END_TEST

/* Logits that differ only below the rounding of the log-probabilities: the
 * order is by log-probability, so the lower id comes first although its
 * logit is smaller. */
START_TEST(test_order_ties_made_by_rounding)
{
    enum { N = 1024 };
    float logits[N];
    for (int i = 0; i < N; i++)
        logits[i] = 0.0f;
    logits[0] = -0x1p-23f; /* L = ln(~1024) ~ 6.93, ulp 2^-21: -2^-23 - L rounds to -L */
    di_sampler s = scratch_for(N);
    int32_t top[3];
    float lp[3], lp0, lp1;
    di_logprobs(&s, logits, 0, &lp0, 0, NULL, NULL);
    di_logprobs(&s, logits, 1, &lp1, 3, top, lp);
    ck_assert_msg(bits_of(lp0) == bits_of(lp1), "the case does not tie: %a %a", lp0, lp1);
    ck_assert_int_eq(top[0], 0);
    ck_assert_int_eq(top[1], 1);
    ck_assert_int_eq(top[2], 2);
    di_sampler_release(&s);
}
END_TEST

START_TEST(test_infinite_and_nan_logits)
{
    di_sampler s = scratch_for(4);
    int32_t top[4];
    float lp[4];
    const float with_inf[] = {1.0f, INFINITY, -INFINITY, INFINITY};
    di_logprobs(&s, with_inf, -1, NULL, 4, top, lp);
    /* two +inf share the mass: -ln 2 each; the finite ones -inf */
    ck_assert_int_eq(top[0], 1);
    ck_assert_int_eq(top[1], 3);
    ck_assert_float_eq(lp[0], -0.693147182f);
    ck_assert(isinf(lp[2]) && isinf(lp[3]));
    ck_assert_int_eq(top[2], 0);
    ck_assert_int_eq(top[3], 2);
    const float all_nan[] = {NAN, NAN, NAN, NAN};
    float one = 0;
    di_logprobs(&s, all_nan, 3, &one, 4, top, lp);
    ck_assert(isnan(one));
    for (int j = 0; j < 4; j++)
        ck_assert(top[j] == j && isnan(lp[j]));
    di_sampler_release(&s);
}
END_TEST

/* ---- the public call: bad arguments -------------------------------------------- */

START_TEST(test_bad_arguments)
{
    di_model *m = tu_load("mha_tied_f32");
    int64_t n_vocab = 0;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    di_session *s = tu_session(m, 1, 2, 32);
    int32_t top[4];
    float lp[4], one;
    ck_assert_int_eq(di_session_logprobs(NULL, 0, 0, &one, 0, NULL, NULL), DI_ERR_INVALID_ARGUMENT);
    /* no logits yet */
    ck_assert_int_eq(di_session_logprobs(s, 0, 0, &one, 1, top, lp), DI_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(di_session_errmsg(s), "no logits"));
    const int32_t prompt[] = {1, 2, 3};
    tu_step(s, 0, prompt, 3, 0);
    const struct {
        uint32_t seq;
        int32_t token;
        float *token_logprob;
        uint32_t n_top;
        int32_t *top_tokens;
        float *top_logprobs;
        di_status want;
        const char *words;
    } bad[] = {
        {2, 0, &one, 0, NULL, NULL, DI_ERR_SEQUENCE, "outside"},
        {0, 0, NULL, 0, NULL, NULL, DI_ERR_INVALID_ARGUMENT, "token_logprob"},
        {0, (int32_t)n_vocab, &one, 0, NULL, NULL, DI_ERR_TOKEN_RANGE, "vocabulary"},
        {0, 0, &one, (uint32_t)n_vocab + 1, top, lp, DI_ERR_INVALID_ARGUMENT, "n_top"},
        {0, -1, NULL, 2, NULL, lp, DI_ERR_INVALID_ARGUMENT, "NULL"},
        {0, -1, NULL, 2, top, NULL, DI_ERR_INVALID_ARGUMENT, "NULL"},
        {1, 0, &one, 0, NULL, NULL, DI_ERR_STATE, "no logits"}, /* never stepped */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        di_status st = di_session_logprobs(s, bad[i].seq, bad[i].token, bad[i].token_logprob, bad[i].n_top,
                                           bad[i].top_tokens, bad[i].top_logprobs);
        ck_assert_msg(st == bad[i].want, "case %zu: %s, want %s", i, di_status_name(st), di_status_name(bad[i].want));
        ck_assert_msg(strstr(di_session_errmsg(s), bad[i].words), "case %zu: message '%s' lacks '%s'", i,
                      di_session_errmsg(s), bad[i].words);
    }
    /* the allowed NULLs: no token, no top; then a good call clears the message */
    ck_assert_int_eq(di_session_logprobs(s, 0, -1, NULL, 0, NULL, NULL), DI_OK);
    ck_assert_int_eq(di_session_logprobs(s, 0, 5, &one, 4, top, lp), DI_OK);
    ck_assert_str_eq(di_session_errmsg(s), "");
    /* a truncation drops the logits */
    ck_assert_int_eq(di_session_seq_truncate(s, 0, 2), DI_OK);
    ck_assert_int_eq(di_session_logprobs(s, 0, 0, &one, 0, NULL, NULL), DI_ERR_STATE);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* ---- against float64 NumPy ------------------------------------------------------ */

/* Greedy generation of n_steps tokens after the prompt; at each step the
 * logits row and the library's full order (n_top = n_vocab) with its values,
 * and each token's own value through the token argument. */
typedef struct run_rows {
    uint32_t n_rows, n_vocab;
    float *logits;    /* [n_rows][n_vocab] */
    int32_t *order;   /* [n_rows][n_vocab] */
    float *ordered;   /* [n_rows][n_vocab], the values in that order */
} run_rows;

static void collect(di_session *s, uint32_t seq, run_rows *r, uint32_t row, int check_each_token)
{
    const uint32_t n = r->n_vocab;
    const float *logits;
    ck_assert_int_eq(di_session_logits(s, seq, &logits, NULL), DI_OK);
    memcpy(r->logits + (size_t)row * n, logits, n * sizeof *logits);
    int32_t *order = r->order + (size_t)row * n;
    float *values = r->ordered + (size_t)row * n;
    ck_assert_int_eq(di_session_logprobs(s, seq, -1, NULL, n, order, values), DI_OK);
    for (uint32_t j = 0; check_each_token && j < n; j += n > 4096 ? 997 : 1) {
        float one;
        ck_assert_int_eq(di_session_logprobs(s, seq, order[j], &one, 0, NULL, NULL), DI_OK);
        ck_assert_uint_eq(bits_of(one), bits_of(values[j]));
    }
}

static run_rows generate_rows(di_model *m, const int32_t *prompt, uint32_t n_prompt, uint32_t n_steps)
{
    int64_t n_vocab = 0;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    run_rows r = {n_steps, (uint32_t)n_vocab, NULL, NULL, NULL};
    r.logits = malloc((size_t)n_steps * r.n_vocab * sizeof *r.logits);
    r.order = malloc((size_t)n_steps * r.n_vocab * sizeof *r.order);
    r.ordered = malloc((size_t)n_steps * r.n_vocab * sizeof *r.ordered);
    ck_assert(r.logits && r.order && r.ordered);
    di_session *s = tu_session(m, 2, 1, (int)(n_prompt + n_steps));
    tu_step(s, 0, prompt, n_prompt, 0);
    for (uint32_t k = 0; k < n_steps; k++) {
        collect(s, 0, &r, k, k < 2);
        int32_t next;
        ck_assert_int_eq(di_session_greedy_token(s, 0, &next), DI_OK);
        ck_assert_int_eq(next, r.order[(size_t)k * r.n_vocab]); /* greedy is the top log-probability */
        if (k + 1 < n_steps)
            tu_step(s, 0, &next, 1, 0);
    }
    di_session_free(s);
    return r;
}

static void free_rows(run_rows *r)
{
    free(r->logits);
    free(r->order);
    free(r->ordered);
}

/* Writes the logits for the script, reads its float64 log-softmax back, and
 * checks every value within MAX_ABS_ERROR and the order: strictly by (value
 * descending, id ascending) in the library's own values, and never against
 * the reference by more than the error bound. Returns the largest error. */
static double check_against_numpy(const run_rows *r, const char *what)
{
    char dir[4096], in[4200], out[4200], args[8500];
    temp_dir(dir, sizeof dir);
    snprintf(in, sizeof in, "%s/logits.bin", dir);
    snprintf(out, sizeof out, "%s/logsoftmax.bin", dir);
    FILE *f = fopen(in, "wb");
    ck_assert_ptr_nonnull(f);
    const uint32_t head[2] = {r->n_rows, r->n_vocab};
    const size_t n_all = (size_t)r->n_rows * r->n_vocab;
    ck_assert_int_eq(fwrite(head, sizeof head, 1, f), 1);
    ck_assert_int_eq(fwrite(r->logits, sizeof *r->logits, n_all, f), n_all);
    fclose(f);
    snprintf(args, sizeof args, "softmax '%s' '%s'", in, out);
    run_reference(args);
    double *ref = malloc(n_all * sizeof *ref);
    f = fopen(out, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fread(ref, sizeof *ref, n_all, f), n_all);
    fclose(f);
    unlink(in);
    unlink(out);
    rmdir(dir);
    double worst = 0;
    for (uint32_t row = 0; row < r->n_rows; row++) {
        const size_t base = (size_t)row * r->n_vocab;
        const int32_t *order = r->order + base;
        const float *values = r->ordered + base;
        const double *want = ref + base;
        for (uint32_t j = 0; j < r->n_vocab; j++) {
            const double err = fabs((double)values[j] - want[order[j]]);
            ck_assert_msg(err <= MAX_ABS_ERROR, "%s row %u token %d: %.9g, float64 reference %.12g", what, row,
                          order[j], values[j], want[order[j]]);
            if (err > worst)
                worst = err;
            if (j == 0)
                continue;
            ck_assert_msg(values[j - 1] > values[j] || (values[j - 1] == values[j] && order[j - 1] < order[j]),
                          "%s row %u: rank %u (token %d, %a) before rank %u (token %d, %a)", what, row, j - 1,
                          order[j - 1], values[j - 1], j, order[j], values[j]);
            ck_assert_msg(want[order[j - 1]] >= want[order[j]] - 2 * MAX_ABS_ERROR,
                          "%s row %u: the reference puts token %d above token %d", what, row, order[j],
                          order[j - 1]);
        }
        /* a permutation of the vocabulary */
        char *seen = calloc(r->n_vocab, 1);
        for (uint32_t j = 0; j < r->n_vocab; j++) {
            ck_assert(order[j] >= 0 && (uint32_t)order[j] < r->n_vocab && !seen[order[j]]);
            seen[order[j]] = 1;
        }
        free(seen);
    }
    free(ref);
    return worst;
}

START_TEST(test_against_numpy_generated_models)
{
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    int32_t prompt[256];
    uint32_t n = tu_read_prompt(name, prompt, 256);
    run_rows r = generate_rows(m, prompt, n, 12);
    double worst = check_against_numpy(&r, name);
    printf("logprobs: %s: max |error| %.3g over %u rows of %u\n", name, worst, r.n_rows, r.n_vocab);
    free_rows(&r);
    di_model_free(m);
}
END_TEST

START_TEST(test_against_numpy_real_model)
{
    const char *path = getenv("DI_TEST_REAL_MODEL");
    if (!path || !*path) {
        printf("logprobs: the real model is not available; its comparison is skipped\n");
        return;
    }
    char err[512];
    di_model *m = NULL;
    ck_assert_int_eq(di_model_load(path, &m, err, sizeof err), DI_OK);
    const int32_t prompt[] = {2, 818, 5279, 529, 7001, 563}; /* BOS "The capital of France is" */
    /* the sanitizers make each step of the real model minutes long: one row then */
    const char *san = getenv("DI_TEST_SANITIZE");
    run_rows r = generate_rows(m, prompt, 6, san && *san ? 1 : 3);
    double worst = check_against_numpy(&r, "real");
    printf("logprobs: real model: max |error| %.3g over %u rows of %u\n", worst, r.n_rows, r.n_vocab);
    free_rows(&r);
    di_model_free(m);
}
END_TEST

/* ---- bitwise across paths, threads and batch -------------------------------- */

/* The full order and values of seq after the prompt, into order/values. */
static void logprobs_of(di_session *s, uint32_t seq, uint32_t n_vocab, int32_t *order, float *values)
{
    ck_assert_int_eq(di_session_logprobs(s, seq, -1, NULL, n_vocab, order, values), DI_OK);
}

START_TEST(test_bitwise_across_paths_threads_batch)
{
    const char *name = "gemma3_q8_0";
    di_model *m = tu_load(name);
    int64_t nv = 0;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &nv), DI_OK);
    const uint32_t n_vocab = (uint32_t)nv;
    int32_t prompt[256];
    uint32_t n = tu_read_prompt(name, prompt, 256);
    int32_t *want_order = malloc(n_vocab * sizeof *want_order), *order = malloc(n_vocab * sizeof *order);
    float *want = malloc(n_vocab * sizeof *want), *got = malloc(n_vocab * sizeof *got);
    di_session *ref = tu_session_on(m, 1, 1, (int)n, DI_CPU_PATH_SCALAR);
    tu_step(ref, 0, prompt, n, 0);
    logprobs_of(ref, 0, n_vocab, want_order, want);
    di_session_free(ref);
    const di_cpu_path paths[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
    int compared = 0;
    for (size_t p = 0; p < 3; p++) {
        if (!tu_cpu_path_available(paths[p]))
            continue;
        for (int threads = 1; threads <= 3; threads += 2) {
            /* seq 1 carries the prompt in two chunks next to another sequence
             * in the same steps */
            di_session *s = tu_session_on(m, threads, 3, (int)n, paths[p]);
            const uint32_t ids[2] = {0, 1}, half = n / 2;
            const uint32_t counts1[2] = {3, half};
            int32_t toks[512];
            memcpy(toks, prompt + 3, 3 * sizeof *toks);
            memcpy(toks + 3, prompt, half * sizeof *toks);
            ck_assert_int_eq(di_session_step(s, 2, ids, counts1, toks, 0), DI_OK);
            const uint32_t counts2[2] = {2, n - half};
            memcpy(toks, prompt + 7, 2 * sizeof *toks);
            memcpy(toks + 2, prompt + half, (n - half) * sizeof *toks);
            ck_assert_int_eq(di_session_step(s, 2, ids, counts2, toks, 0), DI_OK);
            logprobs_of(s, 1, n_vocab, order, got);
            for (uint32_t j = 0; j < n_vocab; j++) {
                ck_assert_msg(order[j] == want_order[j] && bits_of(got[j]) == bits_of(want[j]),
                              "path %d, %d threads: rank %u differs", (int)paths[p], threads, j);
            }
            di_session_free(s);
            compared++;
        }
    }
    ck_assert_int_ge(compared, 2);
    free(want_order);
    free(order);
    free(want);
    free(got);
    di_model_free(m);
}
END_TEST

/* ---- a prompt's log-probabilities (di_session_logprobs_at) -------------------- */

/* PROMPT_TOP alternatives per position, and the prompt token's own value. */
#define PROMPT_TOP 4
typedef struct prompt_rows {
    uint32_t n;       /* positions 0..n-2 score tokens 1..n-1 */
    float *token;     /* [n - 1] */
    int32_t *top;     /* [n - 1][PROMPT_TOP] */
    float *top_lp;    /* [n - 1][PROMPT_TOP] */
} prompt_rows;

static prompt_rows prompt_rows_new(uint32_t n)
{
    prompt_rows r = {n, calloc(n, sizeof(float)), calloc((size_t)n * PROMPT_TOP, sizeof(int32_t)),
                     calloc((size_t)n * PROMPT_TOP, sizeof(float))};
    ck_assert(r.token && r.top && r.top_lp);
    return r;
}

static void prompt_rows_free(prompt_rows *r)
{
    free(r->token);
    free(r->top);
    free(r->top_lp);
}

/* The reference: the prompt stepped one token at a time, di_session_logprobs
 * after each (no all-logits step). */
static prompt_rows prompt_one_at_a_time(di_model *m, const int32_t *prompt, uint32_t n)
{
    prompt_rows r = prompt_rows_new(n);
    di_session *s = tu_session_on(m, 1, 1, (int)n, DI_CPU_PATH_SCALAR);
    for (uint32_t t = 0; t + 1 < n; t++) {
        tu_step(s, 0, &prompt[t], 1, 0);
        ck_assert_int_eq(di_session_logprobs(s, 0, prompt[t + 1], &r.token[t], PROMPT_TOP,
                                             &r.top[(size_t)t * PROMPT_TOP], &r.top_lp[(size_t)t * PROMPT_TOP]),
                         DI_OK);
    }
    di_session_free(s);
    return r;
}

/* The prompt in all-logits chunks of `chunk` tokens as seq 1, beside seq 0
 * stepping another text in the same steps; positions 0..n-2 read with
 * di_session_logprobs_at after each step. */
static prompt_rows prompt_in_chunks(di_model *m, const int32_t *prompt, uint32_t n, uint32_t chunk, int threads,
                                    di_cpu_path path)
{
    prompt_rows r = prompt_rows_new(n);
    di_session *s = tu_session_on(m, threads, 2, (int)(2 * n), path);
    const uint32_t ids[2] = {0, 1};
    int32_t toks[1024];
    for (uint32_t at = 0; at < n; at += chunk) {
        const uint32_t take = at + chunk < n ? chunk : n - at;
        const uint32_t counts[2] = {2, take};
        toks[0] = prompt[(at + 3) % n]; /* the other sequence: two tokens of its own */
        toks[1] = prompt[(at + 5) % n];
        memcpy(toks + 2, prompt + at, take * sizeof *toks);
        ck_assert_int_eq(di_session_step(s, 2, ids, counts, toks, DI_STEP_ALL_LOGITS), DI_OK);
        for (uint32_t k = 0; k < take && at + k + 1 < n; k++) {
            const uint32_t t = at + k;
            ck_assert_int_eq(di_session_logprobs_at(s, 1, k, prompt[t + 1], &r.token[t], PROMPT_TOP,
                                                    &r.top[(size_t)t * PROMPT_TOP],
                                                    &r.top_lp[(size_t)t * PROMPT_TOP]),
                             DI_OK);
        }
    }
    di_session_free(s);
    return r;
}

/* The first position where a and b differ in any bit (n - 1 when none);
 * `shift` compares a's position t with b's position t + shift. */
static uint32_t prompt_rows_differ(const prompt_rows *a, const prompt_rows *b, uint32_t shift)
{
    for (uint32_t t = 0; t + shift + 1 < a->n; t++) {
        const uint32_t u = t + shift;
        if (bits_of(a->token[t]) != bits_of(b->token[u]))
            return t;
        for (uint32_t k = 0; k < PROMPT_TOP; k++)
            if (a->top[(size_t)t * PROMPT_TOP + k] != b->top[(size_t)u * PROMPT_TOP + k] ||
                bits_of(a->top_lp[(size_t)t * PROMPT_TOP + k]) != bits_of(b->top_lp[(size_t)u * PROMPT_TOP + k]))
                return t;
    }
    return a->n - 1;
}

/* Bitwise: one prefill (in chunks of 1, 5 and the whole prompt, beside
 * another sequence) gives every position the bits of the prompt stepped one
 * token at a time, on every path and thread count. Negative control: the
 * same rows compared one position apart must differ. */
START_TEST(test_prompt_logprobs_bitwise)
{
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    int32_t prompt[256];
    const uint32_t n = tu_read_prompt(name, prompt, 256);
    ck_assert_uint_ge(n, 4);
    prompt_rows want = prompt_one_at_a_time(m, prompt, n);
    const di_cpu_path paths[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
    const uint32_t chunks[] = {1, 5, n};
    int compared = 0;
    for (size_t p = 0; p < 3; p++) {
        if (!tu_cpu_path_available(paths[p]))
            continue;
        for (size_t c = 0; c < 3; c++) {
            const int threads = c == 1 ? 3 : 1;
            prompt_rows got = prompt_in_chunks(m, prompt, n, chunks[c], threads, paths[p]);
            const uint32_t at = prompt_rows_differ(&want, &got, 0);
            ck_assert_msg(at == n - 1, "%s path %d chunk %u threads %d: position %u differs", name, (int)paths[p],
                          chunks[c], threads, at);
            if (compared++ == 0)
                ck_assert_msg(prompt_rows_differ(&want, &got, 1) < n - 2,
                              "%s: the comparison cannot tell positions apart", name);
            prompt_rows_free(&got);
        }
    }
    ck_assert_int_ge(compared, 6);
    prompt_rows_free(&want);
    di_model_free(m);
}
END_TEST

/* Against float64: the log-softmax of tests/tools/reference.py's logits at
 * each prompt position, in double. Its logits differ from ours by at most
 * the reference suite's normwise bound (tol x max |ref|), which moves a
 * log-softmax value by at most twice that; the library's log-softmax adds
 * at most MAX_ABS_ERROR. */
START_TEST(test_prompt_logprobs_against_float64)
{
    const char *name = tu_models[_i];
    const char *profile = getenv("DI_TEST_PROFILE");
    const double tol = profile && !strcmp(profile, "integer") ? 5e-2 : 1e-4; /* check_reference.c's */
    di_model *m = tu_load(name);
    tu_ref *ref = tu_read_ref(name);
    di_session *s = tu_session(m, 2, 1, 0);
    tu_step(s, 0, ref->tokens, ref->n_tokens, DI_STEP_ALL_LOGITS);
    double worst = 0;
    for (uint32_t t = 0; t + 1 < ref->n_tokens; t++) {
        const double *z = ref->logits + (size_t)t * ref->n_vocab;
        double max = z[0], max_abs = 0, sum = 0;
        for (uint32_t v = 0; v < ref->n_vocab; v++) {
            max = fmax(max, z[v]);
            max_abs = fmax(max_abs, fabs(z[v]));
        }
        for (uint32_t v = 0; v < ref->n_vocab; v++)
            sum += exp(z[v] - max);
        const int32_t next = ref->tokens[t + 1];
        const double want = z[next] - max - log(sum);
        float got;
        ck_assert_int_eq(di_session_logprobs_at(s, 0, t, next, &got, 0, NULL, NULL), DI_OK);
        const double err = fabs((double)got - want), bound = 2 * tol * max_abs + MAX_ABS_ERROR;
        ck_assert_msg(err <= bound, "%s position %u: logprob %.9g, float64 %.12g (bound %.3g)", name, t, got, want,
                      bound);
        worst = fmax(worst, err);
    }
    printf("prompt logprobs: %s: max |error| %.3g over %u positions\n", name, worst, ref->n_tokens - 1);
    di_session_free(s);
    tu_free_ref(ref);
    di_model_free(m);
}
END_TEST

START_TEST(test_prompt_logprobs_bad_arguments)
{
    di_model *m = tu_load("mha_tied_f32");
    int64_t n_vocab = 0;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    di_session *s = tu_session(m, 1, 2, 32);
    const int32_t prompt[] = {1, 2, 3};
    float one;
    int32_t top[2];
    float lp[2];
    ck_assert_int_eq(di_session_logprobs_at(NULL, 0, 0, 0, &one, 0, NULL, NULL), DI_ERR_INVALID_ARGUMENT);
    tu_step(s, 0, prompt, 3, 0); /* not an all-logits step */
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 0, 1, &one, 0, NULL, NULL), DI_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(di_session_errmsg(s), "DI_STEP_ALL_LOGITS"));
    tu_step(s, 0, prompt, 3, DI_STEP_ALL_LOGITS);
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 3, 1, &one, 0, NULL, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(di_session_errmsg(s), "outside"));
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 0, (int32_t)n_vocab, &one, 0, NULL, NULL), DI_ERR_TOKEN_RANGE);
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 0, 1, NULL, 0, NULL, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 0, -1, NULL, 2, top, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_logprobs_at(s, 1, 0, 1, &one, 0, NULL, NULL), DI_ERR_STATE); /* not stepped */
    ck_assert_int_eq(di_session_logprobs_at(s, 2, 0, 1, &one, 0, NULL, NULL), DI_ERR_SEQUENCE);
    /* the last position is di_session_logprobs's row, bit for bit */
    float last_at, last;
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 2, -1, NULL, 2, top, lp), DI_OK);
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 2, 7, &last_at, 0, NULL, NULL), DI_OK);
    ck_assert_int_eq(di_session_logprobs(s, 0, 7, &last, 0, NULL, NULL), DI_OK);
    ck_assert_uint_eq(bits_of(last_at), bits_of(last));
    ck_assert_str_eq(di_session_errmsg(s), "");
    /* another step of the session (without all logits) ends the rows */
    tu_step(s, 1, prompt, 2, 0);
    ck_assert_int_eq(di_session_logprobs_at(s, 0, 0, 1, &one, 0, NULL, NULL), DI_ERR_STATE);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

Suite *logprobs_suite(void)
{
    Suite *s = suite_create("logprobs");
    TCase *tc = tcase_create("log");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_logf_special_values);
    tcase_add_test(tc, test_logf_correctly_rounded);
    suite_add_tcase(s, tc);
    tc = tcase_create("order");
    tcase_add_test(tc, test_order_ties_by_id);
    tcase_add_test(tc, test_order_ties_made_by_rounding);
    tcase_add_test(tc, test_infinite_and_nan_logits);
    suite_add_tcase(s, tc);
    tc = tcase_create("api");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_loop_test(tc, test_against_numpy_generated_models, 0, tu_n_models());
    tcase_add_test(tc, test_bitwise_across_paths_threads_batch);
    suite_add_tcase(s, tc);
    tc = tcase_create("prompt");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_prompt_logprobs_bad_arguments);
    tcase_add_loop_test(tc, test_prompt_logprobs_bitwise, 0, tu_n_models());
    tcase_add_loop_test(tc, test_prompt_logprobs_against_float64, 0, tu_n_models());
    suite_add_tcase(s, tc);
    tc = tcase_create("real");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_against_numpy_real_model);
    suite_add_tcase(s, tc);
    return s;
}
