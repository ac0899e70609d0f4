/*
 * check_kernels.c — the shared numerics and the CPU kernels: accuracy against
 * double precision, exactness where the contract promises it, and bitwise
 * agreement of the optimised reductions with a plain transcription of the
 * canonical order written here independently.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/common/numerics.h"
#include "test_util.h"

/* ---- a second, deliberately naive transcription of the canonical order ---- */

static float naive_reduce(const float *a, const float *b, uint32_t n, int fma_form)
{
    float total[32];
    for (uint32_t c = 0; c * 1024u < n || (n == 0 && c == 0); c++) {
        float lane[32];
        for (int l = 0; l < 32; l++)
            lane[l] = 0.0f;
        for (uint32_t i = c * 1024u; i < n && i < (c + 1) * 1024u; i++)
            lane[i % 32] = fma_form ? fmaf(a[i], b[i], lane[i % 32]) : lane[i % 32] + a[i];
        for (int l = 0; l < 32; l++)
            total[l] = c == 0 ? lane[l] : total[l] + lane[l];
    }
    for (int step = 16; step >= 1; step /= 2)
        for (int l = 0; l < step; l++)
            total[l] += total[l + step];
    return total[0];
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float random_float(uint64_t *rng)
{
    /* mostly ordinary values, some huge, tiny, zero and denormal */
    uint64_t r = tu_rand(rng);
    switch (r % 16) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return ldexpf((float)(r >> 40) / 16777216.0f, -140); /* denormal */
    case 3: return ldexpf((float)(r >> 40) / 16777216.0f, 60);   /* huge */
    default: return ((float)(int64_t)(r >> 32) / 2147483648.0f) * ((r & 16) ? 3.0f : 0.01f);
    }
}

START_TEST(test_dot_and_sum_follow_the_canonical_order)
{
    uint64_t rng = 42;
    static float a[5000], b[5000];
    static const uint32_t lengths[] = {0, 1, 2, 31, 32, 33, 63, 64, 100, 1023, 1024, 1025, 2048, 2049, 4999};
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        for (int trial = 0; trial < 20; trial++) {
            uint32_t n = lengths[k];
            for (uint32_t i = 0; i < n; i++) {
                a[i] = random_float(&rng);
                b[i] = random_float(&rng);
            }
            ck_assert_uint_eq(bits(di_cpu_dot(a, b, n)), bits(naive_reduce(a, b, n, 1)));
            ck_assert_uint_eq(bits(di_cpu_sum(a, n)), bits(naive_reduce(a, b, n, 0)));
        }
    }
}
END_TEST

START_TEST(test_dot_accuracy)
{
    uint64_t rng = 7;
    static float a[3000], b[3000];
    for (int trial = 0; trial < 200; trial++) {
        uint32_t n = 1 + (uint32_t)(tu_rand(&rng) % 3000);
        double exact = 0.0, mag = 0.0;
        for (uint32_t i = 0; i < n; i++) {
            a[i] = (float)((double)(int64_t)tu_rand(&rng) / 9.2e18);
            b[i] = (float)((double)(int64_t)tu_rand(&rng) / 9.2e18);
            exact += (double)a[i] * b[i];
            mag += fabs((double)a[i] * b[i]);
        }
        ck_assert_double_le(fabs(di_cpu_dot(a, b, n) - exact), 1e-6 * mag);
    }
}
END_TEST

START_TEST(test_expf_accuracy_and_specials)
{
    ck_assert_float_eq(di_expf(0.0f), 1.0f);
    ck_assert(isnan(di_expf(NAN)));
    ck_assert(isinf(di_expf(INFINITY)) && di_expf(INFINITY) > 0);
    ck_assert_float_eq(di_expf(-INFINITY), 0.0f);
    ck_assert(isinf(di_expf(89.0f)));
    ck_assert_float_eq(di_expf(-110.0f), 0.0f);
    /* every 997th float pattern in (-87, 88.7): within 3 ulp of exp in double */
    for (uint32_t u = 0; u < 0xffffffffu - 997; u += 997) {
        float x;
        memcpy(&x, &u, sizeof x);
        if (!(x > -87.0f && x < 88.7f))
            continue;
        const double want = exp((double)x);
        const float got = di_expf(x);
        const double ulp = ldexp(1.0, ilogb(want) - 23);
        ck_assert_msg(fabs(got - want) <= 3 * ulp, "exp(%a) = %a, want %a", (double)x, (double)got, want);
    }
    /* gradual underflow: results below FLT_MIN are denormals, not zero */
    ck_assert_float_gt(di_expf(-100.0f), 0.0f);
    ck_assert_float_lt(di_expf(-100.0f), 1.2e-38f);
}
END_TEST

/* tanh against libm's in double: within 4 ulp of the result over every 997th
 * positive float pattern, odd, and its special values; the soft cap it makes. */
START_TEST(test_tanhf_accuracy_and_specials)
{
    ck_assert(isnan(di_tanhf(NAN)));
    ck_assert_float_eq(di_tanhf(INFINITY), 1.0f);
    ck_assert_float_eq(di_tanhf(-INFINITY), -1.0f);
    ck_assert(di_tanhf(0.0f) == 0.0f && !signbit(di_tanhf(0.0f)));
    ck_assert(di_tanhf(-0.0f) == 0.0f && signbit(di_tanhf(-0.0f)));
    ck_assert_float_eq(di_tanhf(20.0f), 1.0f);
    for (uint32_t u = 0; u < 0x7f800000u; u += 997) {
        float x;
        memcpy(&x, &u, sizeof x);
        const double want = tanh((double)x);
        const float got = di_tanhf(x);
        if (want == 0.0) { /* x = +0 (checked above): ilogb(0) is INT_MIN */
            ck_assert(bits(got) == 0u);
            continue;
        }
        const double ulp = ldexp(1.0, ilogb(want) - 23);
        ck_assert_msg(fabs(got - want) <= 4 * ulp, "tanh(%a) = %a, want %a", (double)x, (double)got, want);
        ck_assert(bits(di_tanhf(-x)) == (bits(got) ^ 0x80000000u));
    }
    /* 4 tanh(x / 4): near x for small x, never beyond the cap */
    ck_assert_double_le(fabs(di_softcap(0.01f, 4.0f) - 4.0 * tanh(0.0025)), 1e-8);
    ck_assert_double_le(fabs(di_softcap(-6.0f, 4.0f) - 4.0 * tanh(-1.5)), 4e-7);
    ck_assert_float_eq(di_softcap(1e30f, 4.0f), 4.0f);
    float row[3] = {-100.0f, 0.5f, 3.0f};
    di_cpu_softcap(row, 3, 2.0f);
    for (int i = 0; i < 3; i++)
        ck_assert_double_le(fabs(row[i] - 2.0 * tanh((i == 0 ? -100.0 : i == 1 ? 0.5 : 3.0) / 2.0)), 3e-7);
}
END_TEST

START_TEST(test_half_conversions_are_exact)
{
    for (uint32_t h = 0; h < 65536; h++) {
        const uint32_t sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
        const float got = di_f16_to_f32((uint16_t)h);
        if (exp == 31) {
            ck_assert(mant ? isnan(got) : isinf(got));
            continue;
        }
        double want = exp == 0 ? ldexp((double)mant, -24) : ldexp(1024.0 + mant, (int)exp - 25);
        if (sign)
            want = -want;
        ck_assert_msg((double)got == want && !!signbit(got) == (int)sign, "half %04x", h);
        /* bfloat16: the top half of a float */
        const float bf = di_bf16_to_f32((uint16_t)h);
        ck_assert_uint_eq(bits(bf), h << 16);
    }
}
END_TEST

START_TEST(test_silu_rsqrt_rms)
{
    for (float x = -30.0f; x < 30.0f; x += 0.37f) {
        const double want = x / (1.0 + exp(-(double)x));
        ck_assert_double_le(fabs(di_silu(x) - want), 4e-7 * fmax(1.0, fabs(want)));
        if (x > 0) {
            ck_assert_float_eq(di_rsqrt(x), 1.0f / sqrtf(x));
        }
    }
    ck_assert_float_eq(di_silu(-200.0f), -0.0f);
    float x[64], w[64], out[64];
    double ss = 0;
    for (int i = 0; i < 64; i++) {
        x[i] = (float)(i - 20) / 7.0f;
        w[i] = 1.0f + (float)i / 100.0f;
        ss += (double)x[i] * x[i];
    }
    di_cpu_rmsnorm(x, w, 64, 1e-5f, out);
    for (int i = 0; i < 64; i++)
        ck_assert_double_le(fabs(out[i] - x[i] / sqrt(ss / 64 + 1e-5) * w[i]), 1e-6);
}
END_TEST

START_TEST(test_argmax_ties_and_nan)
{
    float row[6] = {1.0f, 3.0f, NAN, 3.0f, -1.0f, 2.0f};
    ck_assert_uint_eq(di_cpu_argmax(row, 6), 1);
    float zeros[3] = {-0.0f, 0.0f, -0.0f};
    ck_assert_uint_eq(di_cpu_argmax(zeros, 3), 0);
    float nan_first[3] = {NAN, -5.0f, -5.0f};
    ck_assert_uint_eq(di_cpu_argmax(nan_first, 3), 1);
    float all_nan[2] = {NAN, NAN};
    ck_assert_uint_eq(di_cpu_argmax(all_nan, 2), 0);
    float inf_row[3] = {-INFINITY, INFINITY, INFINITY};
    ck_assert_uint_eq(di_cpu_argmax(inf_row, 3), 1);
}
END_TEST

/* Attention against a double-precision softmax, with and without a soft cap
 * of the scores, over up to 1500 keys. */
START_TEST(test_attention_head)
{
    enum { HD = 16, N = 1500 };
    static float q[HD], k[N * HD], v[N * HD], out[HD], scratch[N + 2 * 32 * HD];
    uint64_t rng = 3;
    for (int i = 0; i < HD; i++)
        q[i] = (float)((double)(int64_t)tu_rand(&rng) / 4e18);
    for (int i = 0; i < N * HD; i++) {
        k[i] = (float)((double)(int64_t)tu_rand(&rng) / 4e18);
        v[i] = (float)((double)(int64_t)tu_rand(&rng) / 4e18);
    }
    const uint32_t counts[] = {1, 5, 32, 33, 1024, 1025, N};
    /* without a soft cap, then with one small enough to bend the scores */
    for (size_t c = 0; c < 2 * sizeof counts / sizeof counts[0]; c++) {
        const uint32_t n = counts[c % (sizeof counts / sizeof counts[0])];
        const float cap = c < sizeof counts / sizeof counts[0] ? 0.0f : 1.5f;
        di_cpu_attention_head(q, k, v, HD, n, HD, 0.25f, cap, out, scratch);
        static double s[N];
        double mx = -1e300, sum = 0;
        for (uint32_t j = 0; j < n; j++) {
            s[j] = 0;
            for (int d = 0; d < HD; d++)
                s[j] += (double)q[d] * k[j * HD + d];
            s[j] *= 0.25;
            if (cap != 0.0f)
                s[j] = cap * tanh(s[j] / cap);
            mx = fmax(mx, s[j]);
        }
        for (uint32_t j = 0; j < n; j++)
            sum += (s[j] = exp(s[j] - mx));
        for (int d = 0; d < HD; d++) {
            double want = 0;
            for (uint32_t j = 0; j < n; j++)
                want += s[j] * v[j * HD + d];
            want /= sum;
            ck_assert_msg(fabs(out[d] - want) <= 1e-5, "n %u d %d: %g vs %g", n, d, out[d], want);
        }
    }
}
END_TEST

START_TEST(test_matmul_thread_invariance)
{
    enum { IN = 1100, OUT = 37, T = 5 };
    static float w[OUT * IN], x[T * IN], y1[T * OUT], yn[T * OUT];
    float *scratch = malloc(8 * DI_MATMUL_SCRATCH(IN) * sizeof(float));
    ck_assert_ptr_nonnull(scratch);
    uint64_t rng = 11;
    for (int i = 0; i < OUT * IN; i++)
        w[i] = random_float(&rng);
    for (int i = 0; i < T * IN; i++)
        x[i] = random_float(&rng);
    di_weight wt = {(const uint8_t *)w, 0 /* F32 */, IN, OUT, IN * sizeof(float), NULL, 0};
    for (uint32_t threads = 1; threads <= 8; threads++) {
        di_pool *pool;
        ck_assert_int_eq(di_pool_create(threads, &pool), DI_OK);
        di_cpu_matmul(pool, &di_cpu_ops_scalar, &wt, x, T, threads == 1 ? y1 : yn, scratch, NULL, 0);
        di_pool_free(pool);
        if (threads > 1)
            ck_assert_int_eq(memcmp(y1, yn, sizeof y1), 0);
    }
    free(scratch);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < OUT; r++)
            ck_assert_uint_eq(bits(y1[t * OUT + r]), bits(naive_reduce(w + r * IN, x + t * IN, IN, 1)));
}
END_TEST

Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("numerics");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dot_and_sum_follow_the_canonical_order);
    tcase_add_test(tc, test_dot_accuracy);
    tcase_add_test(tc, test_expf_accuracy_and_specials);
    tcase_add_test(tc, test_tanhf_accuracy_and_specials);
    tcase_add_test(tc, test_half_conversions_are_exact);
    tcase_add_test(tc, test_silu_rsqrt_rms);
    tcase_add_test(tc, test_argmax_ties_and_nan);
    tcase_add_test(tc, test_attention_head);
    tcase_add_test(tc, test_matmul_thread_invariance);
    suite_add_tcase(s, tc);
    return s;
}
