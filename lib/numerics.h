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

#endif /* DI_NUMERICS_H */
