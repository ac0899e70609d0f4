/*
 * check_intdot.c — the integer profile (DI_PROFILE_INTEGER, kernels/common/
 * int_dot.h, docs/DETERMINISM.md "The integer profile"):
 *   - the activation codes and the dot product of every quantized type
 *     against known answers computed with exact rationals, the weights
 *     decoded independently and checked against the gguf package
 *     (tests/tools/int_dot_vectors.py), the worst-case block sums of each
 *     type among them (the bounds in int_dot.h);
 *   - every CPU path's integer product gives the definition's bits, for
 *     every type, rows 1..40, token counts on both sides of a token group,
 *     reduction lengths the models use and one past a 1024-term chunk, with
 *     zero, subnormal, huge and non-finite activations;
 *   - the profile in a session: named in the backend info, the float path
 *     for F32/F16/BF16 weights, the integer product for every other type;
 *   - accuracy against the float64 reference (tests/tools/reference.py):
 *     the normwise relative logit error of tests/tools/logit_error.py.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/common/int_dot.h"
#include "test_util.h"

static const di_cpu_path PATHS[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
#define N_PATHS (sizeof PATHS / sizeof PATHS[0])

/* Every type the profile computes in integers. */
static const uint32_t TYPES[] = {DI_TYPE_Q4_0, DI_TYPE_Q4_1, DI_TYPE_Q5_0, DI_TYPE_Q5_1,
                                 DI_TYPE_Q8_0, DI_TYPE_IQ4_NL, DI_TYPE_Q2_K, DI_TYPE_Q3_K,
                                 DI_TYPE_Q4_K, DI_TYPE_Q5_K, DI_TYPE_Q6_K, DI_TYPE_IQ4_XS};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

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

/* y[t * n_out + r] for rows [r0, r1) of w by a path's integer product. */
static void int_matmul(const di_cpu_ops *ops, const di_weight *w, uint32_t r0, uint32_t r1,
                       const float *x, uint32_t n_tokens, float *y)
{
    const size_t qa_bytes = (di_qa_bytes(w->n_in, n_tokens) + 63) / 64 * 64;
    void *qa = aligned_alloc(64, qa_bytes);
    float *scratch = malloc(DI_MATMUL_SCRATCH(w->n_in) * sizeof(float));
    ck_assert_ptr_nonnull(qa);
    ck_assert_ptr_nonnull(scratch);
    /* one unit at a time, as threads would split them */
    const uint32_t units = ops->int_layout(w, n_tokens, qa);
    for (uint32_t u = 0; u < units; u++)
        ops->int_quantize(w, x, qa, u, u + 1);
    ops->int_rows(w, r0, r1, qa, y, scratch);
    free(scratch);
    free(qa);
}

/* The definition's y for rows [0, rows) and n_tokens tokens. */
static void definition(const di_weight *w, const float *x, uint32_t n_tokens, float *y)
{
    const uint32_t n = w->n_in, nb = n / DI_QA_BLOCK;
    int8_t *codes = malloc(n);
    float *scales = malloc(nb * sizeof *scales);
    int16_t *sums = malloc(2 * nb * sizeof *sums);
    for (uint32_t t = 0; t < n_tokens; t++) {
        di_qa_row(x + (size_t)t * n, n, codes, scales, sums);
        for (uint32_t r = 0; r < w->n_out; r++)
            y[(size_t)t * w->n_out + r] = di_int_dot(w->type, w->data + r * w->row_bytes, codes, scales, sums, n);
    }
    free(codes), free(scales), free(sums);
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

static int read_int(FILE *f)
{
    int v;
    ck_assert_int_eq(fscanf(f, "%d", &v), 1);
    return v;
}

START_TEST(test_known_quantization)
{
    FILE *f = open_vectors();
    char word[16];
    int cases = 0;
    while (fscanf(f, "%15s", word) == 1) {
        if (strcmp(word, "quant") != 0) {
            if (fscanf(f, "%*[^\n]") < 0)
                break;
            continue;
        }
        float x[DI_QA_BLOCK];
        int8_t codes[DI_QA_BLOCK];
        int16_t sums[2];
        for (int i = 0; i < DI_QA_BLOCK; i++)
            x[i] = read_float(f);
        const float want_scale = read_float(f);
        const float scale = di_qa_block(x, codes, sums);
        ck_assert_msg(same(scale, want_scale), "case %d: scale %08x, exact %08x", cases, bits(scale), bits(want_scale));
        for (int i = 0; i < DI_QA_BLOCK; i++) {
            const int want = read_int(f);
            ck_assert_msg(codes[i] == want, "case %d code %d: %d, exact %d", cases, i, codes[i], want);
        }
        for (int h = 0; h < 2; h++) {
            const int want = read_int(f);
            ck_assert_msg(sums[h] == want, "case %d sum %d: %d, exact %d", cases, h, sums[h], want);
        }
        cases++;
    }
    fclose(f);
    ck_assert_int_ge(cases, 18);
}
END_TEST

/* The largest |P_b| of each type (int_dot.h's bounds), which the vectors'
 * extreme cases reach. */
static const struct {
    uint32_t type;
    int32_t bound;
} BOUNDS[] = {
    {DI_TYPE_Q4_0, 8 * 127 * 32},          {DI_TYPE_Q4_1, 15 * 127 * 32},
    {DI_TYPE_Q5_0, 16 * 127 * 32},         {DI_TYPE_Q5_1, 31 * 127 * 32},
    {DI_TYPE_Q8_0, 128 * 127 * 32},        {DI_TYPE_IQ4_NL, 127 * 127 * 32},
    {DI_TYPE_Q2_K, 2 * 15 * 3 * 127 * 16}, {DI_TYPE_Q3_K, 2 * 32 * 4 * 127 * 16},
    {DI_TYPE_Q4_K, 63 * 15 * 127 * 32},    {DI_TYPE_Q5_K, 63 * 31 * 127 * 32},
    {DI_TYPE_Q6_K, 2 * 128 * 32 * 127 * 16}, {DI_TYPE_IQ4_XS, 32 * 127 * 127 * 32},
};

static int32_t bound_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof BOUNDS / sizeof BOUNDS[0]; i++)
        if (BOUNDS[i].type == type)
            return BOUNDS[i].bound;
    ck_abort_msg("no bound for type %u", type);
    return 0;
}

START_TEST(test_known_dot)
{
    FILE *f = open_vectors();
    char word[16];
    int cases = 0;
    uint32_t types_seen = 0, bounds_reached = 0;
    while (fscanf(f, "%15s", word) == 1) {
        if (strcmp(word, "dot") != 0) {
            if (fscanf(f, "%*[^\n]") < 0)
                break;
            continue;
        }
        uint32_t type, n;
        ck_assert_int_eq(fscanf(f, "%u %u", &type, &n), 2);
        ck_assert(di_int_type(type));
        const uint32_t nb = n / DI_QA_BLOCK;
        const size_t row_bytes = (size_t)n / di_weight_block_elems(type) * di_weight_block_bytes(type);
        float *x = malloc(n * sizeof *x), *scales = malloc(nb * sizeof *scales);
        int8_t *codes = malloc(n);
        int16_t *sums = malloc(2 * nb * sizeof *sums);
        uint8_t *row = malloc(row_bytes);
        for (uint32_t i = 0; i < n; i++)
            x[i] = read_float(f);
        for (size_t i = 0; i < row_bytes; i++) {
            unsigned byte;
            ck_assert_int_eq(fscanf(f, "%2x", &byte), 1);
            row[i] = (uint8_t)byte;
        }
        di_qa_row(x, n, codes, scales, sums);
        int32_t max_p = 0;
        for (uint32_t b = 0; b < nb; b++) {
            long want;
            ck_assert_int_eq(fscanf(f, "%ld", &want), 1);
            const int32_t p = di_int_block_sum(type, row, b, codes + (size_t)b * DI_QA_BLOCK);
            ck_assert_msg(p == want, "type %u n=%u block %u: P %d, exact %ld", type, n, b, p, want);
            max_p = abs(p) > max_p ? abs(p) : max_p;
        }
        ck_assert_int_le(max_p, bound_of(type));
        if (max_p == bound_of(type))
            bounds_reached |= 1u << type;
        types_seen |= 1u << type;
        const float want = read_float(f);
        const float got = di_int_dot(type, row, codes, scales, sums, n);
        ck_assert_msg(same(got, want), "type %u n=%u: %08x, exact %08x", type, n, bits(got), bits(want));
        const di_weight w = {row, type, n, 1, row_bytes, NULL, 0};
        for (size_t p = 0; p < N_PATHS; p++) {
            const di_cpu_ops *ops = int_ops(PATHS[p]);
            if (!ops)
                continue;
            float y;
            int_matmul(ops, &w, 0, 1, x, 1, &y);
            ck_assert_msg(same(y, want), "%s type %u n=%u: %08x, exact %08x", ops->name, type, n, bits(y), bits(want));
        }
        free(x), free(scales), free(codes), free(sums), free(row);
        cases++;
    }
    fclose(f);
    ck_assert_int_ge(cases, 48);
    for (size_t i = 0; i < N_TYPES; i++) {
        ck_assert_msg(types_seen >> TYPES[i] & 1u, "no known answer for type %u", TYPES[i]);
        ck_assert_msg(bounds_reached >> TYPES[i] & 1u, "type %u: no case reaches its bound %d", TYPES[i],
                      bound_of(TYPES[i]));
    }
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

/* A row of random blocks: random bytes (every bit pattern is a block),
 * with each binary16 scale and min a finite value of either sign. */
static void random_row(uint64_t *rng, uint32_t type, uint8_t *row, size_t row_bytes)
{
    const uint32_t bytes = di_weight_block_bytes(type);
    const di_weight_field_id fields[] = {DI_FIELD_D, DI_FIELD_M};
    for (size_t i = 0; i < row_bytes; i++)
        row[i] = (uint8_t)(tu_rand(rng) >> 24);
    for (uint8_t *blk = row; blk < row + row_bytes; blk += bytes)
        for (size_t k = 0; k < 2; k++) {
            const int at = di_weight_field(type, fields[k]);
            if (at < 0)
                continue;
            const uint64_t r = tu_rand(rng);
            const uint16_t h = (uint16_t)(0x1000 + (r % 0x2000)) | (uint16_t)((r & (1u << 20)) ? 0x8000 : 0);
            blk[at] = (uint8_t)h, blk[at + 1] = (uint8_t)(h >> 8);
        }
}

/* di_int_code_word, the four-at-a-time reader the scalar definition and the
 * CUDA kernels multiply with, gives each weight's di_int_code, for every
 * type, sub-block and place, on random blocks whose every bit pattern
 * occurs (the byte tricks of di_int_sub4 and di_int_bits4 included). */
START_TEST(test_code_words)
{
    uint64_t rng = 0x5eed;
    for (size_t t = 0; t < N_TYPES; t++) {
        const uint32_t type = TYPES[t], bytes = di_weight_block_bytes(type);
        const int subs = (int)(di_weight_block_elems(type) / DI_QA_BLOCK);
        uint8_t blk[512];
        for (int trial = 0; trial < 64; trial++) {
            random_row(&rng, type, blk, bytes);
            for (int sub = 0; sub < subs; sub++)
                for (int i = 0; i < DI_QA_BLOCK; i += 4) {
                    const uint32_t word = di_int_code_word(type, blk, sub, i);
                    for (int k = 0; k < 4; k++)
                        ck_assert_msg((int8_t)(uint8_t)(word >> (8 * k)) == di_int_code(type, blk, sub, i + k),
                                      "type %u sub %d weight %d: word byte %d, code %d", type, sub, i + k,
                                      (int8_t)(uint8_t)(word >> (8 * k)), di_int_code(type, blk, sub, i + k));
                }
        }
    }
}
END_TEST

/* Reduction lengths, in blocks of the type: those of Gemma 3 270M (640,
 * 1024, 2048) and of the 3B shape (3072, 8192), short ones and 33 * 1024
 * (block terms past one chunk); lengths a type's block does not divide are
 * skipped. */
static const uint32_t LENGTHS[] = {32, 96, 256, 640, 768, 1024, 2048, 2304, 3072, 8192, 33792};
#define N_LENGTHS (sizeof LENGTHS / sizeof LENGTHS[0])
#define MAX_ROWS 40u
#define MAX_TOKENS 35u

START_TEST(test_paths_match_definition)
{
    const uint32_t type = TYPES[_i % N_TYPES], n = LENGTHS[_i / N_TYPES];
    if (n % di_weight_block_elems(type) != 0)
        return;
    const uint32_t token_counts[] = {1, 2, 16, 17, MAX_TOKENS};
    const size_t row_bytes = (size_t)n / di_weight_block_elems(type) * di_weight_block_bytes(type);
    uint64_t rng = 0x1234 + n * 31 + type;
    uint8_t *data = malloc((size_t)MAX_ROWS * row_bytes);
    float *x = malloc((size_t)MAX_TOKENS * n * sizeof *x);
    float *want = malloc((size_t)MAX_TOKENS * MAX_ROWS * sizeof *want);
    float *y = malloc((size_t)MAX_TOKENS * MAX_ROWS * sizeof *y);
    random_row(&rng, type, data, (size_t)MAX_ROWS * row_bytes);
    for (size_t i = 0; i < (size_t)MAX_TOKENS * n; i++)
        x[i] = activation(&rng, i >= n); /* token 0 finite, the others with edges */
    const di_weight w = {data, type, n, MAX_ROWS, row_bytes, NULL, 0};
    definition(&w, x, MAX_TOKENS, want);
    ck_assert_msg(!isnan(want[0]), "token 0 has no edge values: its dot is a number");
    int paths = 0;
    for (size_t v = 0; v < 2 * N_PATHS; v++) {
        const di_cpu_ops *ops = int_ops(PATHS[v / 2]);
        const int use_packed = v % 2 == 1;
        if (!ops) {
            if (!use_packed)
                printf("intdot: the %s path is not available here: skipped\n", di_cpu_path_name(PATHS[v / 2]));
            continue;
        }
        /* the packed copy that a path with int_pack_rows reads (cpu_int.h), where the type has one */
        const size_t stride = use_packed && ops->int_pack_rows ? ops->int_packed_row_bytes(type, n) : 0;
        if (use_packed && !stride)
            continue;
        uint8_t *packed = NULL;
        if (stride) {
            packed = aligned_alloc(64, (size_t)MAX_ROWS * stride + DI_INT_PACK_SLACK);
            ck_assert_ptr_nonnull(packed);
            memset(packed + (size_t)MAX_ROWS * stride, 0, DI_INT_PACK_SLACK);
            ops->int_pack_rows(&w, 0, MAX_ROWS, packed, stride);
        }
        const di_weight wp = {data, type, n, MAX_ROWS, row_bytes, packed, stride};
        paths++;
        const di_weight *wv = use_packed ? &wp : &w;
        for (size_t k = 0; k < sizeof token_counts / sizeof token_counts[0]; k++) {
            const uint32_t T = token_counts[k];
            /* rows [40 - R, 40): every R for short rows, some for long ones */
            for (uint32_t R = 1; R <= MAX_ROWS; R += n > 4096 ? 13 : (T > 2 ? 3 : 1)) {
                const uint32_t r0 = MAX_ROWS - R;
                for (size_t i = 0; i < (size_t)T * MAX_ROWS; i++)
                    y[i] = from_bits(0x12345678u);
                int_matmul(ops, wv, r0, MAX_ROWS, x, T, y);
                for (uint32_t t = 0; t < T; t++)
                    for (uint32_t r = 0; r < MAX_ROWS; r++) {
                        const float got = y[t * MAX_ROWS + r];
                        if (r < r0) {
                            ck_assert_uint_eq(bits(got), 0x12345678u); /* untouched */
                            continue;
                        }
                        ck_assert_msg(same(got, want[t * MAX_ROWS + r]),
                                      "%s%s type %u n=%u rows %u..%u tokens %u: token %u row %u: %08x, definition %08x",
                                      ops->name, use_packed ? " (packed)" : "", type, n, r0, MAX_ROWS, T, t, r, bits(got),
                                      bits(want[t * MAX_ROWS + r]));
                    }
            }
        }
        free(packed);
    }
    ck_assert_int_ge(paths, 1);
    free(data), free(x), free(want), free(y);
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
    di_session *s = profile_session(m, DI_PROFILE_INTEGER, DI_BACKEND_CPU, &st);
    ck_assert_int_eq(st, DI_OK);
    ck_assert_ptr_nonnull(strstr(di_session_backend_info(s), "profile=integer"));
    di_session *p = profile_session(m, DI_PROFILE_PORTABLE, DI_BACKEND_CPU, &st);
    ck_assert_int_eq(st, DI_OK);
    ck_assert_ptr_null(strstr(di_session_backend_info(p), "profile=integer"));
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

/* Models of float weights give the portable profile's bits in the integer
 * profile (the float path); every quantized model gets other bits. (No
 * generated model has Q4_K, Q5_K or Q6_K weights: the real model has Q4_K
 * and Q6_K, and test_paths_match_definition covers every type.) */
static const char *const FLOAT_MODELS[] = {"mha_tied_f32", "mha_tied_f16", "mha_tied_bf16", "gemma3_f32"};
static const char *const QUANT_MODELS[] = {"mha_tied_q8_0", "mha_tied_q4_0", "mha_tied_q4_1", "mha_tied_q5_0",
                                           "mha_tied_q5_1", "gemma3_q8_0",   "qwen2_q8_0",    "kq_q2_k",
                                           "kq_q3_k",       "kq_iq4_nl",     "kq_iq4_xs"};
#define N_QUANT_MODELS (sizeof QUANT_MODELS / sizeof QUANT_MODELS[0])

START_TEST(test_profile_covers_its_types)
{
    for (int i = 0; i < (int)(sizeof FLOAT_MODELS / sizeof FLOAT_MODELS[0]); i++) {
        const di_digest port = prompt_digest(FLOAT_MODELS[i], DI_PROFILE_PORTABLE);
        const di_digest in = prompt_digest(FLOAT_MODELS[i], DI_PROFILE_INTEGER);
        tu_assert_digest_eq(&port, &in, FLOAT_MODELS[i], i);
    }
    for (int i = 0; i < (int)N_QUANT_MODELS; i++) {
        const di_digest port = prompt_digest(QUANT_MODELS[i], DI_PROFILE_PORTABLE);
        const di_digest in = prompt_digest(QUANT_MODELS[i], DI_PROFILE_INTEGER);
        ck_assert_msg(memcmp(&port, &in, sizeof port) != 0, "%s: the integer profile did not change its logits",
                      QUANT_MODELS[i]);
    }
}
END_TEST

/* ---- accuracy against float64 ------------------------------------------------------ */

/* The metric of tests/tools/logit_error.py: per position, the normwise
 * relative error ||l - l64||_2 / ||l64||_2; its mean and maximum over the
 * positions, and how many positions' argmax equals float64's. */
typedef struct accuracy {
    double mean, max;
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
        double ss_ref = 0, ss_err = 0;
        uint32_t best = 0, want_best = 0;
        for (uint32_t i = 0; i < ref->n_vocab; i++) {
            const double e = (double)row[i] - want[i];
            ss_ref += want[i] * want[i];
            ss_err += e * e;
            if (row[i] > row[best])
                best = i;
            if (want[i] > want[want_best])
                want_best = i;
        }
        const double rel = sqrt(ss_err / ss_ref);
        a.mean += rel / ref->n_tokens;
        a.max = fmax(a.max, rel);
        a.agree += best == want_best;
    }
    di_session_free(s);
    return a;
}

/* The bounds: a little above what the profile measures (the README's
 * figures; docs/PERFORMANCE.md compares them with llama.cpp's). */
static void check_accuracy(const char *label, const di_model *m, const tu_ref *ref, double max_bound)
{
    const accuracy fp = measure(m, ref, DI_PROFILE_PORTABLE), in = measure(m, ref, DI_PROFILE_INTEGER);
    printf("intdot accuracy %-16s portable: mean %.2e max %.2e argmax %u/%u | integer: mean %.2e max %.2e "
           "argmax %u/%u\n",
           label, fp.mean, fp.max, fp.agree, fp.positions, in.mean, in.max, in.agree, in.positions);
    ck_assert_msg(in.max < max_bound, "%s: integer profile error %.3g, bound %.3g", label, in.max, max_bound);
    ck_assert_msg(fp.max < 1e-5, "%s: portable profile error %.3g", label, fp.max);
}

START_TEST(test_accuracy_generated)
{
    const char *name = QUANT_MODELS[_i];
    di_model *m = tu_load(name);
    tu_ref *ref = tu_read_ref(name);
    check_accuracy(name, m, ref, 0.05);
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
    check_accuracy("gemma-3-270m", m, ref, 0.06);
    tu_free_ref(ref);
    di_model_free(m);
}
END_TEST

Suite *intdot_suite(void)
{
    Suite *s = suite_create("intdot");
    TCase *tc = tcase_create("intdot");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_known_quantization);
    tcase_add_test(tc, test_known_dot);
    tcase_add_test(tc, test_code_words);
    tcase_add_loop_test(tc, test_paths_match_definition, 0, (int)(N_LENGTHS * N_TYPES));
    tcase_add_test(tc, test_profile_in_session);
    tcase_add_test(tc, test_profile_covers_its_types);
    tcase_add_loop_test(tc, test_accuracy_generated, 0, (int)N_QUANT_MODELS);
    tcase_add_test(tc, test_accuracy_real);
    suite_add_tcase(s, tc);
    return s;
}
