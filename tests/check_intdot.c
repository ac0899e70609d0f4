/*
 * check_intdot.c — the integer profile (DI_PROFILE_INTEGER, kernels/common/
 * int_dot.h, docs/DETERMINISM.md "The integer profile"):
 *   - the quantization and the dot product against known answers computed
 *     by NumPy and exact rationals (tests/tools/int_dot_vectors.py);
 *   - every CPU path's integer matmul gives the definition's bits (Q8_0 and
 *     Q5_0), for rows
 *     1..40, token counts on both sides of the quantization group, and the
 *     reduction lengths the models use (and one past a 1024-term chunk of
 *     block terms), with zero, subnormal, huge and non-finite activations;
 *   - the profile in a session: accepted on the CPU, refused on CUDA, named
 *     in the backend info, float path for the types it does not cover;
 *   - accuracy against the float64 reference (tests/tools/reference.py) on
 *     the generated models and the real one: normwise relative error < 1e-4.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_int.h"
#include "cpu_ops.h"
#include "int_dot.h"
#include "test_util.h"

#define REL_TOL 1e-4

static const di_cpu_path PATHS[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
#define N_PATHS (sizeof PATHS / sizeof PATHS[0])

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Same bits, or both NaN (payloads are not part of the contract). */
static int same(float a, float b)
{
    return bits(a) == bits(b) || (isnan(a) && isnan(b));
}

/* The integer table of a path, or NULL when this CPU lacks it. */
static const di_cpu_ops *int_ops(di_cpu_path path)
{
    const di_cpu_ops *base = di_cpu_ops_for(path);
    return base ? di_cpu_ops_integer(base) : NULL;
}

/* y[t][r] for rows [r0, r1) of w by a path's integer matmul. */
static void int_matmul(const di_cpu_ops *ops, const di_weight *w, uint32_t r0, uint32_t r1,
                       const float *x, uint32_t n_tokens, float *y)
{
    float *scratch = malloc(DI_MATMUL_SCRATCH(w->n_in) * sizeof(float));
    ck_assert_ptr_nonnull(scratch);
    ops->matmul_rows(w, r0, r1, x, n_tokens, y, scratch);
    free(scratch);
}

/* ---- known answers ------------------------------------------------------------ */

static FILE *open_vectors(void)
{
    const char *root = getenv("DI_TEST_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/int_dot/vectors.txt", root ? root : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    return f;
}

static float read_float(FILE *f)
{
    unsigned u;
    ck_assert_int_eq(fscanf(f, "%x", &u), 1);
    return from_bits(u);
}

START_TEST(test_known_quantization)
{
    FILE *f = open_vectors();
    char word[16];
    int cases = 0;
    while (fscanf(f, "%15s", word) == 1) {
        if (strcmp(word, "quant") != 0) {
            fscanf(f, "%*[^\n]");
            continue;
        }
        float x[DI_INT_BLOCK];
        int32_t codes[DI_INT_BLOCK];
        for (int i = 0; i < DI_INT_BLOCK; i++)
            x[i] = read_float(f);
        const float want_scale = read_float(f);
        const float scale = di_int_quantize_block(x, codes);
        ck_assert_msg(same(scale, want_scale), "case %d: scale %08x, NumPy %08x", cases, bits(scale),
                      bits(want_scale));
        for (int i = 0; i < DI_INT_BLOCK; i++) {
            int want;
            ck_assert_int_eq(fscanf(f, "%d", &want), 1);
            ck_assert_msg(codes[i] == want, "case %d code %d: %d, NumPy %d", cases, i, codes[i], want);
        }
        cases++;
    }
    fclose(f);
    ck_assert_int_ge(cases, 15);
}
END_TEST

START_TEST(test_known_dot)
{
    FILE *f = open_vectors();
    char word[16];
    int cases = 0;
    while (fscanf(f, "%15s", word) == 1) {
        if (strcmp(word, "dot") != 0) {
            fscanf(f, "%*[^\n]");
            continue;
        }
        uint32_t type, n;
        ck_assert_int_eq(fscanf(f, "%u %u", &type, &n), 2);
        const uint32_t nb = n / DI_INT_BLOCK, bytes = di_int_block_bytes(type);
        ck_assert_uint_gt(bytes, 0);
        float *x = malloc(n * sizeof *x), *scales = malloc(nb * sizeof *scales);
        int32_t *codes = malloc(n * sizeof *codes);
        uint8_t *row = malloc((size_t)nb * bytes);
        int32_t *P = malloc(nb * sizeof *P);
        for (uint32_t i = 0; i < n; i++)
            x[i] = read_float(f);
        for (size_t i = 0; i < (size_t)nb * bytes; i++) {
            unsigned byte;
            ck_assert_int_eq(fscanf(f, "%2x", &byte), 1);
            row[i] = (uint8_t)byte;
        }
        di_int_quantize_row(x, n, codes, scales);
        for (uint32_t b = 0; b < nb; b++) {
            long want;
            ck_assert_int_eq(fscanf(f, "%ld", &want), 1);
            ck_assert_int_eq(di_int_block_sum(type, row + (size_t)b * bytes, codes + (size_t)b * DI_INT_BLOCK), want);
        }
        const float want = read_float(f);
        const float got = di_int_dot(type, row, codes, scales, n);
        ck_assert_msg(same(got, want), "type %u n=%u: %08x, NumPy %08x", type, n, bits(got), bits(want));
        const di_weight w = {row, type, n, 1, (size_t)nb * bytes};
        for (size_t p = 0; p < N_PATHS; p++) {
            const di_cpu_ops *ops = int_ops(PATHS[p]);
            if (!ops)
                continue;
            float y;
            int_matmul(ops, &w, 0, 1, x, 1, &y);
            ck_assert_msg(same(y, want), "%s type %u n=%u: %08x, NumPy %08x", ops->name, type, n, bits(y), bits(want));
        }
        free(x), free(scales), free(codes), free(row), free(P);
        cases++;
    }
    fclose(f);
    ck_assert_int_ge(cases, 12);
}
END_TEST

/* ---- every path gives the definition's bits ---------------------------------------- */

/* Activations: mostly ordinary values with a few large features, and now and
 * then an edge (zeros, subnormals, huge values, an infinity or a NaN). */
static float activation(uint64_t *rng, int edges)
{
    const uint64_t r = tu_rand(rng);
    const float plain = ((float)(int64_t)(r >> 32) / 2147483648.0f) * ((r & 48) == 48 ? 40.0f : 1.5f);
    if (!edges || r % 61 > 6)
        return plain;
    switch (r % 61) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return ldexpf(plain, -140);
    case 3: return ldexpf(plain, 120);
    case 4: return (r & 64) ? INFINITY : -INFINITY;
    case 5: return NAN;
    default: return 1.0f;
    }
}

/* nb random blocks of a covered type: a binary16 scale of either sign,
 * random bytes for the rest (every bit pattern is a valid block). */
static void random_blocks(uint64_t *rng, uint32_t type, uint8_t *row, uint32_t nb)
{
    const uint32_t bytes = di_int_block_bytes(type);
    for (uint32_t b = 0; b < nb; b++, row += bytes) {
        const uint64_t r = tu_rand(rng);
        const uint16_t d = (uint16_t)(0x1000 + (r % 0x2000)) | (uint16_t)((r & (1u << 20)) ? 0x8000 : 0);
        row[0] = (uint8_t)d, row[1] = (uint8_t)(d >> 8);
        for (uint32_t i = 2; i < bytes; i++)
            row[i] = (uint8_t)(tu_rand(rng) >> 24);
    }
}

static const uint32_t TYPES[] = {DI_TYPE_Q8_0, DI_TYPE_Q5_0};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

/* Reduction lengths: those of the generated models' Q8_0 and Q5_0 matrices
 * (64, 96, 128, 160, 1120) and Gemma 3 270M's (640, 1024, 2048), others, and
 * 33 * 1024 (block terms past one chunk). */
static const uint32_t LENGTHS[] = {32, 64, 96, 128, 160, 256, 288, 512, 640, 1024, 1120, 2048, 4096, 33792};
#define N_LENGTHS (sizeof LENGTHS / sizeof LENGTHS[0])
#define MAX_ROWS 40u

START_TEST(test_paths_match_definition)
{
    const uint32_t type = TYPES[_i % N_TYPES], bytes = di_int_block_bytes(type);
    const uint32_t n = LENGTHS[_i / N_TYPES], nb = n / DI_INT_BLOCK;
    const uint32_t token_counts[] = {1, 3, 17};
    const uint32_t max_tokens = 17;
    uint64_t rng = 0x1234 + n;
    uint8_t *data = malloc((size_t)MAX_ROWS * nb * bytes);
    float *x = malloc((size_t)max_tokens * n * sizeof *x);
    int32_t *codes = malloc(n * sizeof *codes);
    float *scales = malloc(nb * sizeof *scales);
    float *want = malloc((size_t)max_tokens * MAX_ROWS * sizeof *want);
    random_blocks(&rng, type, data, MAX_ROWS * nb);
    for (size_t i = 0; i < (size_t)max_tokens * n; i++)
        x[i] = activation(&rng, i >= n); /* token 0 finite, the others with edges */
    const di_weight w = {data, type, n, MAX_ROWS, (size_t)nb * bytes};
    for (uint32_t t = 0; t < max_tokens; t++) {
        di_int_quantize_row(x + (size_t)t * n, n, codes, scales);
        for (uint32_t r = 0; r < MAX_ROWS; r++)
            want[t * MAX_ROWS + r] = di_int_dot(type, data + r * w.row_bytes, codes, scales, n);
    }
    ck_assert_msg(!isnan(want[0]), "token 0 has no edge values: its dot is a number");
    int paths = 0;
    for (size_t p = 0; p < N_PATHS; p++) {
        const di_cpu_ops *ops = int_ops(PATHS[p]);
        if (!ops) {
            printf("intdot: the %s path is not available here: skipped\n", di_cpu_path_name(PATHS[p]));
            continue;
        }
        paths++;
        for (size_t k = 0; k < sizeof token_counts / sizeof token_counts[0]; k++) {
            const uint32_t T = token_counts[k];
            /* rows [40 - R, 40) for R = 1..40; long rows: fewer counts */
            for (uint32_t R = 1; R <= MAX_ROWS; R += n > 4096 ? 13 : 1) {
                const uint32_t r0 = MAX_ROWS - R;
                float *y = malloc((size_t)T * MAX_ROWS * sizeof *y);
                for (size_t i = 0; i < (size_t)T * MAX_ROWS; i++)
                    y[i] = from_bits(0x12345678u);
                int_matmul(ops, &w, r0, MAX_ROWS, x, T, y);
                for (uint32_t t = 0; t < T; t++)
                    for (uint32_t r = r0; r < MAX_ROWS; r++)
                        ck_assert_msg(same(y[t * MAX_ROWS + r], want[t * MAX_ROWS + r]),
                                      "%s type %u n=%u rows %u..%u tokens %u: token %u row %u: %08x, definition %08x",
                                      ops->name, type, n, r0, MAX_ROWS, T, t, r, bits(y[t * MAX_ROWS + r]),
                                      bits(want[t * MAX_ROWS + r]));
                for (uint32_t t = 0; t < T; t++)
                    for (uint32_t r = 0; r < r0; r++)
                        ck_assert_uint_eq(bits(y[t * MAX_ROWS + r]), 0x12345678u); /* untouched */
                free(y);
            }
        }
    }
    ck_assert_int_ge(paths, 1);
    free(data), free(x), free(codes), free(scales), free(want);
}
END_TEST

/* The padded dot every path runs equals the lane-wise definition also where
 * the terms are not multiples of 32 blocks and the sums are the largest
 * possible (every code +-2^18 against +-128): checked on each block count. */
START_TEST(test_block_counts_and_extreme_sums)
{
    uint64_t rng = 99;
    for (uint32_t nb = 1; nb <= 70; nb++) {
        const uint32_t n = nb * DI_INT_BLOCK;
        uint8_t *row = malloc((size_t)nb * DI_BLOCK_BYTES_Q8_0);
        float *x = malloc(n * sizeof *x), *scales = malloc(nb * sizeof *scales);
        int32_t *codes = malloc(n * sizeof *codes);
        random_blocks(&rng, DI_TYPE_Q8_0, row, nb);
        for (uint32_t i = 0; i < n; i++) {
            x[i] = (i % 2) ? -1.99999988f : 1.99999988f; /* codes round to -+2^18, the largest */
            row[(i / DI_INT_BLOCK) * DI_BLOCK_BYTES_Q8_0 + 2 + i % DI_INT_BLOCK] = (i % 2) ? 0x80 : 0x7f;
        }
        di_int_quantize_row(x, n, codes, scales);
        ck_assert_int_eq(codes[0], 262144);
        ck_assert_int_eq(codes[1], -262144);
        const int32_t P0 = di_int_block_sum(DI_TYPE_Q8_0, row, codes);
        ck_assert_int_eq(P0, 16 * (127 + 128) * 262144);
        const float want = di_int_dot(DI_TYPE_Q8_0, row, codes, scales, n);
        const di_weight w = {row, DI_TYPE_Q8_0, n, 1, (size_t)nb * DI_BLOCK_BYTES_Q8_0};
        for (size_t p = 0; p < N_PATHS; p++) {
            const di_cpu_ops *ops = int_ops(PATHS[p]);
            if (!ops)
                continue;
            float y;
            int_matmul(ops, &w, 0, 1, x, 1, &y);
            ck_assert_msg(same(y, want), "%s blocks %u: %08x, definition %08x", ops->name, nb, bits(y), bits(want));
        }
        free(row), free(x), free(scales), free(codes);
    }
}
END_TEST

/* ---- the profile in a session ---------------------------------------------------- */

static di_session *profile_session(const di_model *m, int profile, int backend, di_status *st)
{
    di_config *c = NULL;
    di_session *s = NULL;
    char err[512];
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_PROFILE, profile), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_BACKEND, backend), DI_OK);
    *st = di_session_create(m, c, &s, err, sizeof err);
    di_config_free(c);
    return s;
}

START_TEST(test_profile_in_session)
{
    di_model *m = tu_load("mha_tied_q8_0");
    di_status st;
    di_session *cuda = profile_session(m, DI_PROFILE_INTEGER, DI_BACKEND_CUDA, &st);
    ck_assert_int_eq(st, DI_ERR_UNSUPPORTED);
    ck_assert_ptr_null(cuda);
    di_session *s = profile_session(m, DI_PROFILE_INTEGER, DI_BACKEND_CPU, &st);
    ck_assert_int_eq(st, DI_OK);
    ck_assert_ptr_nonnull(strstr(di_session_backend_info(s), "profile=integer"));
    di_session *p = profile_session(m, DI_PROFILE_PORTABLE, DI_BACKEND_CPU, &st);
    ck_assert_ptr_null(strstr(di_session_backend_info(p), "profile="));
    di_session_free(s);
    di_session_free(p);
    di_model_free(m);
}
END_TEST

/* Digest of a model's prompt in a profile. */
static di_digest prompt_digest(const char *name, int profile)
{
    di_model *m = tu_load(name);
    int32_t tokens[512];
    const uint32_t n = tu_read_prompt(name, tokens, 512);
    di_status st;
    di_session *s = profile_session(m, profile, DI_BACKEND_CPU, &st);
    ck_assert_int_eq(st, DI_OK);
    tu_step(s, 0, tokens, n, 0);
    const di_digest d = tu_last_digest(s, 0);
    di_session_free(s);
    di_model_free(m);
    return d;
}

/* A model without Q8_0 or Q5_0 weights runs the float path in both
 * profiles; a Q8_0 model runs the integer product (other bits). */
START_TEST(test_profile_covers_its_types)
{
    const char *const float_only[] = {"mha_tied_f32", "mha_tied_q4_0", "mha_tied_q5_1", "kq_q3_k",
                                      "kq_q2_k",      "kq_iq4_nl",     "kq_iq4_xs"};
    for (int i = 0; i < (int)(sizeof float_only / sizeof float_only[0]); i++) {
        const di_digest port = prompt_digest(float_only[i], DI_PROFILE_PORTABLE);
        const di_digest in = prompt_digest(float_only[i], DI_PROFILE_INTEGER);
        tu_assert_digest_eq(&port, &in, float_only[i], i);
    }
    const di_digest q_port = prompt_digest("mha_tied_q8_0", DI_PROFILE_PORTABLE);
    const di_digest q_int = prompt_digest("mha_tied_q8_0", DI_PROFILE_INTEGER);
    ck_assert_msg(memcmp(&q_port, &q_int, sizeof q_port) != 0, "the integer profile did not change a Q8_0 model's logits");
}
END_TEST

/* ---- accuracy against float64 ------------------------------------------------------ */

/* Errors of every position's logits against the reference: the largest
 * max|err| / max|ref| (the metric of check_reference.c), the largest
 * ||err||_2 / ||ref||_2, and how many greedy tokens equal the reference's. */
typedef struct accuracy {
    double max_inf, max_two;
    uint32_t agree, positions;
} accuracy;

static accuracy measure(const di_model *m, const tu_ref *ref, int profile)
{
    di_status st;
    di_session *s = profile_session(m, profile, DI_BACKEND_CPU, &st);
    ck_assert_int_eq(st, DI_OK);
    tu_step(s, 0, ref->tokens, ref->n_tokens, DI_STEP_ALL_LOGITS);
    accuracy a = {0, 0, 0, ref->n_tokens};
    for (uint32_t t = 0; t < ref->n_tokens; t++) {
        const float *row;
        ck_assert_int_eq(di_session_logits_at(s, 0, t, &row, NULL), DI_OK);
        const double *want = ref->logits + (size_t)t * ref->n_vocab;
        double max_ref = 0, max_err = 0, ss_ref = 0, ss_err = 0;
        uint32_t best = 0, want_best = 0;
        for (uint32_t i = 0; i < ref->n_vocab; i++) {
            const double e = (double)row[i] - want[i];
            max_ref = fmax(max_ref, fabs(want[i]));
            max_err = fmax(max_err, fabs(e));
            ss_ref += want[i] * want[i];
            ss_err += e * e;
            if (row[i] > row[best])
                best = i;
            if (want[i] > want[want_best])
                want_best = i;
        }
        a.max_inf = fmax(a.max_inf, max_err / max_ref);
        a.max_two = fmax(a.max_two, sqrt(ss_err / ss_ref));
        a.agree += best == want_best;
    }
    di_session_free(s);
    return a;
}

static void check_accuracy(const char *label, const di_model *m, const tu_ref *ref)
{
    const accuracy fp = measure(m, ref, DI_PROFILE_PORTABLE), in = measure(m, ref, DI_PROFILE_INTEGER);
    printf("intdot accuracy %-14s portable: max %.2e, 2-norm %.2e, argmax %u/%u | integer: max %.2e, "
           "2-norm %.2e, argmax %u/%u\n",
           label, fp.max_inf, fp.max_two, fp.agree, fp.positions, in.max_inf, in.max_two, in.agree,
           in.positions);
    ck_assert_msg(in.max_inf < REL_TOL && in.max_two < REL_TOL, "%s: integer profile error %.3g / %.3g", label,
                  in.max_inf, in.max_two);
}

/* The generated models with Q8_0 or Q5_0 weights (the others run the float path). */
static const char *const INT_MODELS[] = {"mha_tied_q8_0", "gqa_untied_q8_0", "qwen2_q8_0", "gemma3_q8_0",
                                        "mha_tied_q5_0", "qwen3_q8_0", "phi3_q8_0",
                                        "gemma2_q8_0"};

START_TEST(test_accuracy_generated)
{
    const char *name = INT_MODELS[_i];
    di_model *m = tu_load(name);
    tu_ref *ref = tu_read_ref(name);
    check_accuracy(name, m, ref);
    tu_free_ref(ref);
    di_model_free(m);
}
END_TEST

START_TEST(test_accuracy_real)
{
    const char *path = getenv("DI_TEST_REAL_MODEL"), *ref_path = getenv("DI_TEST_REAL_REF");
    if (!path || !*path || !ref_path) {
        printf("intdot: no real model: its accuracy is not measured\n");
        return;
    }
    di_model *m = NULL;
    char err[512];
    ck_assert_int_eq(di_model_load(path, &m, err, sizeof err), DI_OK);
    tu_ref *ref = tu_read_ref("real"); /* $DI_TEST_MODELS/real.ref */
    check_accuracy("gemma-3-270m", m, ref);
    tu_free_ref(ref);
    di_model_free(m);
}
END_TEST

Suite *intdot_suite(void)
{
    Suite *s = suite_create("intdot");
    TCase *tc = tcase_create("intdot");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_known_quantization);
    tcase_add_test(tc, test_known_dot);
    tcase_add_loop_test(tc, test_paths_match_definition, 0, (int)(N_LENGTHS * N_TYPES));
    tcase_add_test(tc, test_block_counts_and_extreme_sums);
    tcase_add_test(tc, test_profile_in_session);
    tcase_add_test(tc, test_profile_covers_its_types);
    tcase_add_loop_test(tc, test_accuracy_generated, 0, (int)(sizeof INT_MODELS / sizeof INT_MODELS[0]));
    tcase_add_test(tc, test_accuracy_real);
    suite_add_tcase(s, tc);
    return s;
}
