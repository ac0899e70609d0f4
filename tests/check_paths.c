/*
 * check_paths.c — every CPU kernel path (scalar, avx2, avx512: those this CPU
 * runs) gives the scalar path's bits for every kernel: random inputs of many
 * lengths (not multiples of the vector width too) with zeros of both signs,
 * denormals, huge values, infinities and ties, every weight type, thread
 * counts 1..8 and token counts on both sides of the direct/tiled switch.
 * NaN compares equal to NaN (payloads are not part of the contract; the
 * session canonicalises NaN logits). Paths the CPU lacks are reported and
 * skipped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/dequant.h"
#include "kernels/common/numerics.h"
#include "test_util.h"
#include "kernels/common/weight_types.h"

static const di_cpu_path PATHS[] = {DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};
#define N_PATHS (sizeof PATHS / sizeof PATHS[0])

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Same bits, or both NaN. */
static int same(float a, float b)
{
    return bits(a) == bits(b) || (isnan(a) && isnan(b));
}

static void assert_same_floats(const float *want, const float *got, size_t n, const char *what,
                               const char *path, uint32_t arg)
{
    for (size_t i = 0; i < n; i++)
        if (!same(want[i], got[i]))
            ck_abort_msg("%s (%s, %u): element %zu is %08x, scalar %08x", what,
                      path, arg, i, bits(got[i]), bits(want[i]));
}

/* The path's table, or NULL with a note when this CPU lacks it. */
static const di_cpu_ops *path_ops(di_cpu_path p)
{
    const di_cpu_ops *ops = di_cpu_ops_for(p);
    if (!ops)
        fprintf(stderr, "paths: CPU path %d is not available on this machine; skipped\n", (int)p);
    return ops;
}

/* Mostly ordinary values; some zeros of both signs, denormals, huge values,
 * infinities and exact ties. */
static float edgy_float(uint64_t *rng)
{
    const uint64_t r = tu_rand(rng);
    switch (r % 32) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return ldexpf((float)(r >> 40) / 16777216.0f, -140);
    case 3: return -ldexpf((float)(r >> 40) / 16777216.0f, -135);
    case 4: return ldexpf((float)(r >> 40) / 16777216.0f, 100);
    case 5: return 1.0f; /* ties */
    case 6: return (r & 64) ? INFINITY : -INFINITY;
    default: return ((float)(int64_t)(r >> 32) / 2147483648.0f) * ((r & 16) ? 4.0f : 0.02f);
    }
}

/* Without infinities: for inputs where inf - inf would only test NaN. */
static float plain_float(uint64_t *rng)
{
    float f;
    do
        f = edgy_float(rng);
    while (isinf(f));
    return f;
}

static const uint32_t LENGTHS[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 100, 255,
                                   640, 1000, 1023, 1024, 1025, 1056, 2047, 2048, 2049, 3333};
#define N_LENGTHS (sizeof LENGTHS / sizeof LENGTHS[0])

START_TEST(test_dot_sum_add_argmax)
{
    enum { MAX = 3333 };
    static float a[MAX], b[MAX], want[MAX], got[MAX];
    uint64_t rng = 7;
    for (size_t p = 0; p < N_PATHS; p++) {
        const di_cpu_ops *ops = path_ops(PATHS[p]);
        if (!ops)
            continue;
        for (size_t li = 0; li < N_LENGTHS; li++) {
            const uint32_t n = LENGTHS[li];
            for (int rep = 0; rep < 4; rep++) {
                for (uint32_t i = 0; i < n; i++) {
                    a[i] = rep == 3 ? plain_float(&rng) : edgy_float(&rng);
                    b[i] = rep == 3 ? plain_float(&rng) : edgy_float(&rng);
                }
                if (!same(di_cpu_dot(a, b, n), ops->dot(a, b, n)))
            ck_abort_msg("dot %s n=%u", ops->name, n);
                if (!same(di_cpu_sum(a, n), ops->sum(a, n)))
            ck_abort_msg("sum %s n=%u", ops->name, n);
                di_cpu_add(want, a, b, n);
                ops->add(got, a, b, n);
                assert_same_floats(want, got, n, "add", ops->name, n);
                if (di_cpu_argmax(a, n) != ops->argmax(a, n))
                    ck_abort_msg("argmax %s n=%u", ops->name, n);
            }
        }
    }
}
END_TEST

START_TEST(test_argmax_ties_nan_and_signed_zeros)
{
    enum { N = 300 };
    static float x[N];
    for (size_t p = 0; p < N_PATHS; p++) {
        const di_cpu_ops *ops = path_ops(PATHS[p]);
        if (!ops)
            continue;
        for (uint32_t n = 1; n < N; n += 7) {
            for (uint32_t i = 0; i < n; i++)
                x[i] = NAN;
            ck_assert_uint_eq(ops->argmax(x, n), 0); /* all NaN */
            for (uint32_t i = 0; i < n; i++)
                x[i] = (i % 3 == 0) ? -0.0f : (i % 3 == 1 ? 0.0f : NAN);
            ck_assert_uint_eq(ops->argmax(x, n), di_cpu_argmax(x, n));
            for (uint32_t i = 0; i < n; i++)
                x[i] = (i % 5 == 0) ? NAN : -INFINITY;
            ck_assert_uint_eq(ops->argmax(x, n), di_cpu_argmax(x, n));
            for (uint32_t i = 0; i < n; i++)
                x[i] = (float)(i % 11); /* ties at the max */
            x[n - 1] = NAN;
            ck_assert_uint_eq(ops->argmax(x, n), di_cpu_argmax(x, n));
            ck_assert_uint_eq(ops->argmax(x, n), n > 11 ? 10 : (n > 1 ? n - 2 : 0));
        }
    }
}
END_TEST

/* silu, gelu, the soft cap and through them e^x and tanh: inputs spread over every float32 exponent
 * (one in every 31 bit patterns, NaNs and infinities included; 60013 under the
 * sanitizers; $DI_TEST_FLOAT_STRIDE when set: make check-baseline, whose scalar
 * reference calls glibc's software fmaf, takes one in 1021). */
START_TEST(test_activations_over_float32)
{
    enum { BATCH = 4096 };
    static float gate[BATCH], gate2[BATCH], up[BATCH];
    for (int i = 0; i < BATCH; i++)
        up[i] = 1.0f;
    const char *given = getenv("DI_TEST_FLOAT_STRIDE");
    uint32_t stride = getenv("DI_TEST_SANITIZE") && *getenv("DI_TEST_SANITIZE") == '1' ? 60013u : 31u;
    if (given && atoi(given) > 0)
        stride = (uint32_t)atoi(given);
    for (size_t p = 0; p < N_PATHS; p++) {
        const di_cpu_ops *ops = path_ops(PATHS[p]);
        if (!ops)
            continue;
        uint64_t pattern = 0;
        while (pattern <= 0xffffffffull) {
            int n = 0;
            for (; n < BATCH && pattern <= 0xffffffffull; n++, pattern += stride)
                gate[n] = di_float_from_bits((uint32_t)pattern);
            for (int act = 0; act < 3; act++) {
                memcpy(gate2, gate, sizeof gate);
                float want[BATCH];
                memcpy(want, gate, sizeof gate);
                if (act == 2) {
                    di_cpu_softcap(want, (size_t)n, 3.0f);
                    ops->softcap(gate2, (size_t)n, 3.0f);
                } else if (act) {
                    di_cpu_gelu_mul(want, up, (size_t)n);
                    ops->gelu_mul(gate2, up, (size_t)n);
                } else {
                    di_cpu_silu_mul(want, up, (size_t)n);
                    ops->silu_mul(gate2, up, (size_t)n);
                }
                for (int i = 0; i < n; i++)
                    if (!same(want[i], gate2[i]))
            ck_abort_msg("%s %s(%08x): %08x, scalar %08x", ops->name,
                                  act == 2 ? "softcap" : act ? "gelu" : "silu", bits(gate[i]), bits(gate2[i]),
                                  bits(want[i]));
            }
        }
    }
}
END_TEST

START_TEST(test_rmsnorm_and_rope)
{
    enum { MAX = 3333 };
    static float x[MAX], w[MAX], want[MAX], got[MAX], cs[MAX], sn[MAX];
    uint64_t rng = 9;
    for (size_t p = 0; p < N_PATHS; p++) {
        const di_cpu_ops *ops = path_ops(PATHS[p]);
        if (!ops)
            continue;
        for (size_t li = 1; li < N_LENGTHS; li++) {
            const uint32_t n = LENGTHS[li];
            for (uint32_t i = 0; i < n; i++) {
                x[i] = plain_float(&rng);
                w[i] = plain_float(&rng);
            }
            di_cpu_rmsnorm(x, w, n, 1e-6f, want);
            ops->rmsnorm(x, w, n, 1e-6f, got);
            assert_same_floats(want, got, n, "rmsnorm", ops->name, n);
            memcpy(got, x, n * sizeof(float));
            ops->rmsnorm(got, w, n, 1e-6f, got); /* in place, as QK-norm calls it */
            assert_same_floats(want, got, n, "rmsnorm in place", ops->name, n);
        }
        static const uint32_t dims[][3] = {{64, 64, 4}, {128, 128, 2}, {256, 256, 4}, {80, 40, 3},
                                           {48, 48, 1}, {96, 64, 5},   {34, 34, 2}};
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const uint32_t hd = dims[di][0], n_rot = dims[di][1], heads = dims[di][2];
            for (uint32_t i = 0; i < n_rot / 2; i++) {
                cs[i] = cosf((float)i * 0.37f + 0.1f);
                sn[i] = sinf((float)i * 0.37f + 0.1f);
            }
            for (int pairing = 0; pairing < 2; pairing++) {
                const di_rope_pairing pr = pairing ? DI_ROPE_NEOX : DI_ROPE_NORMAL;
                for (uint32_t i = 0; i < hd * heads; i++)
                    want[i] = got[i] = plain_float(&rng);
                di_cpu_rope(want, heads, hd, n_rot, pr, cs, sn);
                ops->rope(got, heads, hd, n_rot, pr, cs, sn);
                assert_same_floats(want, got, hd * heads, "rope", ops->name, hd);
            }
        }
    }
}
END_TEST

START_TEST(test_attention_head)
{
    enum { MAX_KEYS = 2100, MAX_HD = 256 };
    static const uint32_t keys[] = {1, 2, 7, 31, 33, 100, 1023, 1024, 1025, 2100};
    static const uint32_t dims[] = {256, 64, 40, 8, 13};
    const uint32_t stride = 2 * MAX_HD;
    float *k = malloc((size_t)MAX_KEYS * stride * sizeof(float));
    float *v = malloc((size_t)MAX_KEYS * stride * sizeof(float));
    float *scratch = malloc((MAX_KEYS + 2 * DI_LANES * MAX_HD) * sizeof(float));
    float q[MAX_HD], want[MAX_HD], got[MAX_HD];
    ck_assert(k && v && scratch);
    uint64_t rng = 5;
    for (size_t i = 0; i < (size_t)MAX_KEYS * stride; i++) {
        k[i] = plain_float(&rng);
        v[i] = plain_float(&rng);
    }
    for (size_t p = 0; p < N_PATHS; p++) {
        const di_cpu_ops *ops = path_ops(PATHS[p]);
        if (!ops)
            continue;
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (size_t ki = 0; ki < sizeof keys / sizeof keys[0]; ki++) {
                const uint32_t hd = dims[di], n = keys[ki];
                for (uint32_t d = 0; d < hd; d++)
                    q[d] = plain_float(&rng) * 0.1f;
                /* without a soft cap, and with one (Gemma 2's scores) */
                for (int capped = 0; capped < 2; capped++) {
                    const float cap = capped ? 0.75f : 0.0f;
                    di_cpu_attention_head(q, k + 3, v + 5, stride, n, hd, 0.125f, cap, want, scratch);
                    ops->attention_head(q, k + 3, v + 5, stride, n, hd, 0.125f, cap, got, scratch);
                    assert_same_floats(want, got, hd, capped ? "attention, capped" : "attention", ops->name, n);
                }
            }
    }
    free(k);
    free(v);
    free(scratch);
}
END_TEST

/* A tile of queries (rows of one sequence x query heads of one KV head) gives
 * each query the reference's bits: keys and values shared, each row's own
 * keys only (a value row that only later rows see holds an infinity), the
 * 1024-key chunk boundary inside a tile (1021 + 4 rows) and at its start
 * (1024), and column counts the tile path cannot split (40, 8: one query at
 * a time). The reference is computed once per tile, for every path. */
START_TEST(test_attention_tile)
{
    enum { MAX_KEYS = 1100, MAX_HD = 256, MAX_Q = DI_ATTN_TILE_QUERIES };
    static const uint32_t shapes[][2] = {{1, 1}, {1, 3}, {4, 3}, {3, 4}, {12, 1}, {1, 12}, {2, 5}};
    static const uint32_t first_keys[] = {1, 5, 33, 1021, 1024};
    static const uint32_t dims[] = {128, 64, 256, 40, 8};
    const uint32_t stride = 2 * MAX_HD;
    const size_t q_stride = MAX_HD * MAX_Q + 7;
    float *k = malloc((size_t)MAX_KEYS * stride * sizeof(float));
    float *v = malloc((size_t)MAX_KEYS * stride * sizeof(float));
    float *q = malloc(MAX_Q * q_stride * sizeof(float));
    float *want = calloc(MAX_Q * q_stride, sizeof(float));
    float *got = calloc(MAX_Q * q_stride, sizeof(float));
    float *scratch = malloc(DI_ATTN_SCRATCH(MAX_KEYS, MAX_HD) * sizeof(float));
    ck_assert(k && v && q && want && got && scratch);
    uint64_t rng = 11;
    for (size_t i = 0; i < (size_t)MAX_KEYS * stride; i++) {
        k[i] = plain_float(&rng);
        v[i] = plain_float(&rng);
    }
    for (size_t i = 0; i < MAX_Q * q_stride; i++)
        q[i] = plain_float(&rng) * 0.1f;
    int compared = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t fi = 0; fi < sizeof first_keys / sizeof first_keys[0]; fi++)
            for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
                for (int capped = 0; capped < 2; capped++) {
                    const uint32_t rows = shapes[si][0], heads = shapes[si][1], hd = dims[di];
                    const uint32_t n0 = first_keys[fi];
                    ck_assert_uint_le(n0 + rows - 1, MAX_KEYS);
                    /* a value that only the rows after the first may see */
                    float *late = &v[(size_t)n0 * stride + 5 + 1];
                    const float keep = *late;
                    if (rows > 1 && n0 < MAX_KEYS)
                        *late = INFINITY;
                    const di_attn_tile t = {.q = q, .out = got, .q_stride = q_stride, .n_rows = rows,
                                            .n_heads = heads, .k = k + 3, .v = v + 5, .kv_stride = stride,
                                            .n_keys0 = n0, .head_dim = hd, .scale = 0.125f,
                                            .softcap = capped ? 0.75f : 0.0f};
                    for (uint32_t r = 0; r < rows; r++)
                        for (uint32_t g = 0; g < heads; g++) {
                            const size_t at = r * q_stride + (size_t)g * hd;
                            di_cpu_attention_head(q + at, t.k, t.v, stride, n0 + r, hd, t.scale, t.softcap,
                                                  want + at, scratch);
                        }
                    for (size_t p = 0; p < N_PATHS; p++) {
                        const di_cpu_ops *ops = path_ops(PATHS[p]);
                        if (!ops)
                            continue;
                        ops->attention_tile(&t, scratch);
                        for (uint32_t r = 0; r < rows; r++)
                            assert_same_floats(want + r * q_stride, got + r * q_stride, (size_t)heads * hd,
                                               capped ? "attention tile, capped" : "attention tile", ops->name,
                                               n0 + r);
                        compared++;
                    }
                    *late = keep;
                }
    ck_assert_int_gt(compared, 0);
    free(k);
    free(v);
    free(q);
    free(want);
    free(got);
    free(scratch);
}
END_TEST

/* ---- matrix products over every weight type -------------------------------------- */

typedef struct wtype {
    uint32_t id, elems, bytes;
    int half_at[3]; /* byte offsets of binary16 scales inside a block, -1 ends */
} wtype;

/* id and layout of type T from the table of weight_types.h */
#define TYPE(T) DI_TYPE_##T, DI_BLOCK_ELEMS_##T, DI_BLOCK_BYTES_##T

/* Every supported type (test_every_supported_type_listed checks it). */
static const wtype WTYPES[] = {
    {TYPE(F32), {-1}},          {TYPE(F16), {-1}},          {TYPE(BF16), {-1}},
    {TYPE(Q4_0), {0, -1}},      {TYPE(Q4_1), {0, 2, -1}},   {TYPE(Q5_0), {0, -1}},
    {TYPE(Q5_1), {0, 2, -1}},   {TYPE(Q8_0), {0, -1}},      {TYPE(Q4_K), {0, 2, -1}},
    {TYPE(Q5_K), {0, 2, -1}},   {TYPE(Q6_K), {208, -1}},    {TYPE(IQ4_NL), {0, -1}},
    {TYPE(Q2_K), {80, 82, -1}}, {TYPE(Q3_K), {108, -1}},    {TYPE(IQ4_XS), {0, -1}},
};
#define N_WTYPES ((int)(sizeof WTYPES / sizeof WTYPES[0]))

/* A type added to weight_types.h gets its paths compared here too. */
START_TEST(test_every_supported_type_listed)
{
    for (uint32_t id = 0; id < 64; id++) {
        int listed = 0;
        for (int k = 0; k < N_WTYPES; k++)
            listed |= WTYPES[k].id == id;
        ck_assert_msg(listed == di_weight_type_supported(id), "type %u (%s): listed %d, supported %d",
                      id, di_weight_type_name(id), listed, di_weight_type_supported(id));
    }
}
END_TEST

/* Random bytes, with binary16 scales that are mostly ordinary numbers (the
 * rest zeros, subnormals, infinities and NaNs), float types mostly ordinary
 * values too. */
static void random_rows(const wtype *t, uint8_t *data, size_t n_blocks, uint64_t *rng)
{
    for (size_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = data + b * t->bytes;
        for (uint32_t i = 0; i < t->bytes; i++)
            blk[i] = (uint8_t)tu_rand(rng);
        if (t->id == DI_TYPE_F32) {
            const float f = plain_float(rng);
            memcpy(blk, &f, 4);
        } else if (t->id == DI_TYPE_F16 || t->id == DI_TYPE_BF16) {
            /* keep random halves but avoid exponent all-ones most of the time */
            if (blk[1] % 8 != 0)
                blk[1] &= t->id == DI_TYPE_F16 ? 0xbb : 0xbf;
        }
        static const uint16_t odd_scales[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e00, 0x7c01};
        for (int h = 0; h < 3 && t->half_at[h] >= 0; h++) {
            /* mostly ~2^-8 .. 2^-4; one block in 16: zero, subnormal, infinite or NaN */
            const uint64_t r = tu_rand(rng);
            const uint16_t scale = r % 16 == 0 ? odd_scales[(r >> 8) % 8] : (uint16_t)(0x1c00 + (r >> 16) % 0x1000);
            blk[t->half_at[h]] = (uint8_t)scale;
            blk[t->half_at[h] + 1] = (uint8_t)(scale >> 8);
        }
    }
}

START_TEST(test_matmul_every_type_threads_and_tokens)
{
    const wtype *t = &WTYPES[_i];
    static const uint32_t ins_float[] = {40, 1056, 2080};
    static const uint32_t ins_k[] = {256, 1280, 2304};
    static const uint32_t ins_32[] = {32, 1056, 2080};
    const uint32_t *ins = t->elems == 256 ? ins_k : (t->elems == 32 ? ins_32 : ins_float);
    const uint32_t n_out = 37, max_tok = 40; /* 1..40 tokens: every tile shape and remainder */
    uint64_t rng = 100 + (uint64_t)_i;
    for (int ii = 0; ii < 3; ii++) {
        const uint32_t n_in = ins[ii];
        const size_t row_bytes = (size_t)n_in / t->elems * t->bytes;
        uint8_t *data = malloc(row_bytes * n_out + 1);
        float *x = malloc((size_t)max_tok * n_in * sizeof(float));
        float *want = malloc((size_t)max_tok * n_out * sizeof(float));
        float *got = malloc((size_t)max_tok * n_out * sizeof(float));
        float *scratch = malloc(8 * DI_MATMUL_SCRATCH(n_in) * sizeof(float));
        ck_assert(data && x && want && got && scratch);
        random_rows(t, data + 1, (size_t)n_out * (n_in / t->elems), &rng); /* odd alignment */
        for (size_t i = 0; i < (size_t)max_tok * n_in; i++)
            x[i] = plain_float(&rng);
        const di_weight w = {data + 1, t->id, n_in, n_out, row_bytes, NULL, 0};
        for (uint32_t nt = 1; nt <= max_tok; nt++) {
            di_pool *pool1;
            ck_assert_int_eq(di_pool_create(1, &pool1), DI_OK);
            di_cpu_matmul(pool1, &di_cpu_ops_scalar, &w, x, nt, want, scratch, NULL, 0);
            di_pool_free(pool1);
            for (size_t p = 0; p < N_PATHS; p++) {
                const di_cpu_ops *ops = path_ops(PATHS[p]);
                if (!ops)
                    continue;
                /* threads 1, 2, 3, 8 for up to 9 tokens, then 1 and 3 */
                for (uint32_t threads = 1; threads <= (nt <= 9 ? 8 : 3);
                     threads += (threads < 3 ? (nt <= 9 ? 1 : 2) : 5)) {
                    di_pool *pool;
                    ck_assert_int_eq(di_pool_create(threads, &pool), DI_OK);
                    memset(got, 0xff, (size_t)nt * n_out * sizeof(float));
                    di_cpu_matmul(pool, ops, &w, x, nt, got, scratch, NULL, 0);
                    di_pool_free(pool);
                    for (size_t i = 0; i < (size_t)nt * n_out; i++)
                        if (!same(want[i], got[i]))
            ck_abort_msg("type %u n_in %u tokens %u %s threads %u: out %zu is %08x, scalar %08x",
                                      t->id, n_in, nt, ops->name, threads, i, bits(got[i]), bits(want[i]));
                }
            }
        }
        free(data);
        free(x);
        free(want);
        free(got);
        free(scratch);
    }
}
END_TEST

/* ---- selection ---------------------------------------------------------------------- */

START_TEST(test_path_selection)
{
    char err[256];
    const di_cpu_ops *ops = NULL;
    ck_assert_int_eq(di_cpu_ops_select(DI_CPU_PATH_SCALAR, &ops, err, sizeof err), DI_OK);
    ck_assert_str_eq(ops->name, "scalar");
    unsetenv("DETINFER_CPU_PATH");
    ck_assert_int_eq(di_cpu_ops_select(DI_CPU_PATH_AUTO, &ops, err, sizeof err), DI_OK);
    const char *widest = di_cpu_ops_for(DI_CPU_PATH_AVX512) ? "avx512"
                         : di_cpu_ops_for(DI_CPU_PATH_AVX2) ? "avx2" : "scalar";
    ck_assert_str_eq(ops->name, widest);
    setenv("DETINFER_CPU_PATH", "scalar", 1);
    ck_assert_int_eq(di_cpu_ops_select(DI_CPU_PATH_AUTO, &ops, err, sizeof err), DI_OK);
    ck_assert_str_eq(ops->name, "scalar");
    setenv("DETINFER_CPU_PATH", "sse9", 1);
    ck_assert_int_eq(di_cpu_ops_select(DI_CPU_PATH_AUTO, &ops, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err, "sse9"));
    /* an explicit configuration wins over the variable */
    ck_assert_int_eq(di_cpu_ops_select(DI_CPU_PATH_SCALAR, &ops, err, sizeof err), DI_OK);
    unsetenv("DETINFER_CPU_PATH");
    for (size_t p = 0; p < N_PATHS; p++) {
        const di_status st = di_cpu_ops_select(PATHS[p], &ops, err, sizeof err);
        if (di_cpu_ops_for(PATHS[p]))
            ck_assert_int_eq(st, DI_OK);
        else {
            ck_assert_int_eq(st, DI_ERR_UNSUPPORTED);
            ck_assert_ptr_nonnull(strstr(err, "cannot run"));
        }
    }
}
END_TEST

/* A path is offered only when the CPU has every feature its instructions
 * use and the OS saves their registers: hiding any one of them (the
 * detection's test hook) takes the path away, and AUTO falls back. */
START_TEST(test_dispatch_needs_every_feature)
{
#ifdef DI_HAVE_X86_PATHS
    /* AUTO is asked what the CPU offers: a DETINFER_CPU_PATH of the run (make
     * check-baseline sets scalar) would answer instead. The test runs in its
     * own process (CK_FORK). */
    unsetenv("DETINFER_CPU_PATH");
    __builtin_cpu_init();
    /* the detection agrees with the compiler's own where both know the feature */
    ck_assert_int_eq(!!(di_cpu_features() & DI_CPU_AVX2), !!__builtin_cpu_supports("avx2"));
    ck_assert_int_eq(!!(di_cpu_features() & DI_CPU_FMA), !!__builtin_cpu_supports("fma"));
    ck_assert_int_eq(!!(di_cpu_features() & DI_CPU_AVX512F), !!__builtin_cpu_supports("avx512f"));
    static const struct { di_cpu_path path; uint32_t needs; } paths[] = {
        {DI_CPU_PATH_AVX2, DI_CPU_NEEDS_AVX2}, {DI_CPU_PATH_AVX512, DI_CPU_NEEDS_AVX512}};
    char err[256];
    int checked = 0;
    for (size_t p = 0; p < 2; p++) {
        if (!di_cpu_ops_for(paths[p].path))
            continue; /* this CPU lacks the path: nothing to take away */
        for (uint32_t bit = 1; bit; bit <<= 1) {
            if (!(paths[p].needs & bit))
                continue;
            di_cpu_test_hidden_features = bit;
            const di_cpu_ops *ops = NULL;
            ck_assert_msg(di_cpu_ops_for(paths[p].path) == NULL, "path %d offered without feature %#x",
                          (int)paths[p].path, bit);
            ck_assert_int_eq(di_cpu_ops_select(paths[p].path, &ops, err, sizeof err), DI_ERR_UNSUPPORTED);
            ck_assert_int_eq(di_cpu_ops_select(DI_CPU_PATH_AUTO, &ops, err, sizeof err), DI_OK);
            ck_assert_int_lt((int)ops->path, (int)paths[p].path);
            /* AVX-512's own features leave AVX2 in place */
            if (paths[p].path == DI_CPU_PATH_AVX512 && !(DI_CPU_NEEDS_AVX2 & bit))
                ck_assert_str_eq(ops->name, "avx2");
            checked++;
        }
        di_cpu_test_hidden_features = 0;
    }
    di_cpu_test_hidden_features = 0;
    if (!checked)
        printf("paths: this CPU has no SIMD path: the dispatch test had nothing to hide\n");
#endif
}
END_TEST

Suite *paths_suite(void)
{
    Suite *s = suite_create("paths");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_dot_sum_add_argmax);
    tcase_add_test(tc, test_argmax_ties_nan_and_signed_zeros);
    tcase_add_test(tc, test_activations_over_float32);
    tcase_add_test(tc, test_rmsnorm_and_rope);
    tcase_add_test(tc, test_attention_head);
    tcase_add_test(tc, test_attention_tile);
    tcase_add_test(tc, test_every_supported_type_listed);
    tcase_add_loop_test(tc, test_matmul_every_type_threads_and_tokens, 0, N_WTYPES);
    tcase_add_test(tc, test_path_selection);
    tcase_add_test(tc, test_dispatch_needs_every_feature);
    suite_add_tcase(s, tc);
    return s;
}
