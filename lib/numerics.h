/*
 * numerics.h — the arithmetic every backend must agree on, in one source.
 *
 * Compiled by the C compiler (CPU backend) and by nvcc (CUDA kernels, which
 * include this file), so a rule changes in one place. Everything here is
 * built only from IEEE-754 operations that are correctly rounded on every
 * target: + - * / sqrt fmaf rintf, integer and bit manipulation. No libm
 * transcendental is used: expf/tanhf/... differ between glibc and CUDA.
 *
 * The canonical order of reductions (docs/DETERMINISM.md, "Reductions"):
 *   n terms are cut into chunks of DI_CHUNK consecutive terms. Inside a chunk,
 *   term i goes to lane i % DI_LANES, each lane accumulating in increasing i
 *   from +0.0f. The chunks' lane vectors are added lane by lane in chunk
 *   order. The DI_LANES lanes are then folded by the fixed tree
 *   lane[l] += lane[l + 16], then +8, +4, +2, +1; lane 0 is the result.
 * A GPU may give each chunk to its own warp (split at a fixed size, combined
 * in a fixed order) and a SIMD CPU keeps the 32 lanes in registers.
 */
#ifndef DI_NUMERICS_H
#define DI_NUMERICS_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __CUDACC__
#define DI_HD __host__ __device__ static inline
#else
#define DI_HD static inline
#endif

#define DI_LANES 32
#define DI_CHUNK 1024 /* a multiple of DI_LANES */

DI_HD float di_float_from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

DI_HD uint32_t di_bits_from_float(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* IEEE binary16 to binary32: exact for every input (NaN payloads kept). */
DI_HD float di_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in binary32 */
        float mag = (float)mant * 5.9604644775390625e-8f;
        return di_float_from_bits(sign | di_bits_from_float(mag));
    }
    if (exp == 31)
        return di_float_from_bits(sign | 0x7f800000u | (mant << 13));
    return di_float_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* bfloat16 is the top half of a binary32: exact. */
DI_HD float di_bf16_to_f32(uint16_t h)
{
    return di_float_from_bits((uint32_t)h << 16);
}

/* 2^n as a float for n in [-126, 127] (always a normal number). */
DI_HD float di_pow2(int n)
{
    return di_float_from_bits((uint32_t)(n + 127) << 23);
}

/*
 * e^x. Cody–Waite reduction x = k ln2 + r with k = rint(x log2 e) and the
 * product k ln2 taken off in two exact-enough fma steps; e^r by a degree-7
 * Taylor polynomial in Horner form with fmaf; then the result is scaled by
 * 2^k in two multiplications so that only the last one can round (gradual
 * underflow is kept). Accurate to about 2 ulp; what matters is that it is the
 * same bits everywhere.
 */
DI_HD float di_expf(float x)
{
    if (x != x)
        return x;
    if (x > 88.8f)
        return di_float_from_bits(0x7f800000u);
    if (x < -104.0f)
        return 0.0f;
    const float k = rintf(x * 1.44269504088896341f);
    float r = fmaf(-k, 0.693145751953125f, x);     /* ln2, high part */
    r = fmaf(-k, 1.42860682030941723212e-6f, r);  /* ln2, low part */
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    const int ki = (int)k; /* in [-150, 129] */
    const int k1 = ki / 2;
    const int k2 = ki - k1;
    return (p * di_pow2(k1)) * di_pow2(k2);
}

/* SiLU: x / (1 + e^-x). */
DI_HD float di_silu(float x)
{
    return x / (1.0f + di_expf(-x));
}

/* GELU, tanh approximation: 0.5 x (1 + tanh(u)) with
 * u = sqrt(2/pi) (x + 0.044715 x^3), evaluated through the identity
 * 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), which needs only exp:
 *   x3 = (x * x) * x;  v = 1.5957691216057308 * (x + 0.044715 * x3);
 *   gelu = x / (1 + exp(-v)). */
DI_HD float di_gelu_tanh(float x)
{
    const float x3 = (x * x) * x;
    const float v = 1.5957691216057308f * (x + 0.044715f * x3);
    return x / (1.0f + di_expf(-v));
}

/* 1/sqrt(x) from the correctly rounded sqrt and divide. */
DI_HD float di_rsqrt(float x)
{
    return 1.0f / sqrtf(x);
}

/* The fixed tree that folds DI_LANES partial sums into one (destroys lanes). */
DI_HD float di_lane_tree(float *lanes)
{
    for (int step = DI_LANES / 2; step >= 1; step /= 2)
        for (int l = 0; l < step; l++)
            lanes[l] = lanes[l] + lanes[l + step];
    return lanes[0];
}

/*
 * RMSNorm scale for a row whose canonical sum of squares is `sum_sq`
 * (the fma-form reduction of x[i]*x[i]) over n elements:
 *   scale = 1 / sqrt(sum_sq / n + eps)
 * The row is then written as (x[i] * scale) * w[i].
 */
DI_HD float di_rms_scale(float sum_sq, uint32_t n, float eps)
{
    return di_rsqrt(sum_sq / (float)n + eps);
}

/* ---- Philox4x32-10 and the sampling uniform ---------------------------------
 * Philox4x32 with 10 rounds (Salmon, Moraes, Dror, Shaw, "Parallel Random
 * Numbers: As Easy as 1, 2, 3", SC11; Random123's philox4x32): a counter-based
 * generator, a pure function of a 128-bit counter and a 64-bit key, written
 * with 32x32->64-bit products, xor and wrapping adds only. */
#define DI_PHILOX_M0 0xD2511F53u
#define DI_PHILOX_M1 0xCD9E8D57u
#define DI_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define DI_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* out = Philox4x32-10(counter, key); out may be counter. */
DI_HD void di_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += DI_PHILOX_W0;
            k1 += DI_PHILOX_W1;
        }
        const uint64_t p0 = (uint64_t)DI_PHILOX_M0 * c0;
        const uint64_t p1 = (uint64_t)DI_PHILOX_M1 * c2;
        c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        c1 = (uint32_t)p1;
        c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c3 = (uint32_t)p0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The uniform number that chooses the token at sequence position `position`
 * (the sequence's length when it samples) for a seed:
 *   x = Philox4x32-10(counter {position, 0, 0, 0},
 *                     key {seed & 0xffffffff, seed >> 32});
 *   u = (x[0] >> 8) * 2^-24,
 * a multiple of 2^-24 in [0, 1), exact in binary32. Nothing else (slot, step,
 * thread, batch) enters it. */
DI_HD float di_sample_uniform(uint64_t seed, uint32_t position)
{
    const uint32_t counter[4] = {position, 0u, 0u, 0u};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t x[4];
    di_philox4x32_10(counter, key, x);
    return (float)(x[0] >> 8) * 5.9604644775390625e-8f; /* 2^-24 */
}

#endif /* DI_NUMERICS_H */
