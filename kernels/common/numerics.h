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

#include "kernels/common/host_device.h"

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

/* tanh(x). Near 0 (|x| < 0.55) the odd Taylor series through x^17 in Horner
 * form with fmaf (its first omitted term is below 6e-9 of the result);
 * elsewhere (1 - e) / (1 + e) with e = exp(-2|x|) in (0, 0.34], where
 * nothing cancels, and the sign of x. Within a few ulp; the same bits on
 * every target. tanh(+-0) = +-0, tanh(+-inf) = +-1, NaN for NaN. */
DI_HD float di_tanhf(float x)
{
    const float a = x < 0.0f ? -x : x;
    if (x != x || a == 0.0f)
        return x;
    if (a < 0.55f) {
        const float z = x * x;
        /* the coefficients of x^17 down to x^3: 2^2n (2^2n - 1) B_2n / (2n)! */
        float p = 5.9002744094558598e-4f;
        p = fmaf(p, z, -1.4558343870513183e-3f);
        p = fmaf(p, z, 3.5921280365724810e-3f);
        p = fmaf(p, z, -8.8632355299021966e-3f);
        p = fmaf(p, z, 2.1869488536155203e-2f);
        p = fmaf(p, z, -5.3968253968253968e-2f);
        p = fmaf(p, z, 1.3333333333333333e-1f);
        p = fmaf(p, z, -3.3333333333333333e-1f);
        return fmaf(x * z, p, x);                /* x + x^3 p(x^2) */
    }
    const float e = di_expf(-2.0f * a);
    const float t = (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}

/* Soft-capping (Gemma 2's attention scores and logits): cap * tanh(x / cap),
 * cap > 0. */
DI_HD float di_softcap(float x, float cap)
{
    return cap * di_tanhf(x / cap);
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

/* Which dimensions RoPE rotates together within a head (the model picks one
 * per architecture; the kernels apply it). */
typedef enum di_rope_pairing {
    DI_ROPE_NORMAL = 0, /* (2i, 2i + 1): llama */
    DI_ROPE_NEOX = 1    /* (i, i + n_rot / 2): qwen2, gemma3 */
} di_rope_pairing;

/* ---- RoPE: frequencies and angles without libm ----------------------------------
 *
 * The RoPE tables are cos/sin of theta = (pos * scale) * base^(-2i/n_rot),
 * computed in double and rounded once to float. libm's pow, sin and cos
 * differ between C libraries (glibc, musl, macOS, CUDA's host build) by an
 * ulp here and there, and one ulp of pow moves table entries at long
 * contexts, so these come from the functions below instead: only + - * /,
 * comparisons and bit manipulation on binary64, no fma (Veltkamp splitting
 * gives exact products), so every IEEE-754 machine computes the same bits
 * under round-to-nearest (fpenv.h pins it; the compiler must not contract,
 * -ffp-contract=off).
 *
 *   di_rope_inv_freq  base^(-2i/n) in double-double (ln by the atanh series,
 *                     exp by Taylor after reduction by ln 2), rounded once:
 *                     correctly rounded except for a result within ~2^-100
 *                     of a rounding midpoint.
 *   di_sincos         sin and cos of a double |x| < 2^30: x - k pi/2 in
 *                     double-double (pi/2 to 159 bits), then fdlibm's
 *                     minimax kernels: error below 1 ulp, like libm.
 * tests/check_rope.c compares them with mpmath at 200 bits and with the
 * tables glibc's libm gave (docs/DETERMINISM.md, "RoPE tables").
 */

typedef struct di_dd { double hi, lo; } di_dd;

/* A double as a double-double (no compound literal: nvcc compiles C++). */
DI_HD di_dd di_dd_of(double x)
{
    const di_dd r = {x, 0.0};
    return r;
}

/* a + b exactly (Knuth's two-sum). */
DI_HD di_dd di_dd_two_sum(double a, double b)
{
    const double s = a + b, bb = s - a;
    const di_dd r = {s, (a - (s - bb)) + (b - bb)};
    return r;
}

/* a * b exactly (Dekker's product, Veltkamp's split: no fma needed). */
DI_HD di_dd di_dd_two_prod(double a, double b)
{
    const double split = 134217729.0; /* 2^27 + 1 */
    const double ca = split * a, ah = ca - (ca - a), al = a - ah;
    const double cb = split * b, bh = cb - (cb - b), bl = b - bh;
    const double p = a * b;
    const di_dd r = {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
    return r;
}

DI_HD di_dd di_dd_add(di_dd a, di_dd b)
{
    di_dd s = di_dd_two_sum(a.hi, b.hi);
    const di_dd t = di_dd_two_sum(a.lo, b.lo);
    s.lo += t.hi;
    s = di_dd_two_sum(s.hi, s.lo);
    s.lo += t.lo;
    return di_dd_two_sum(s.hi, s.lo);
}

DI_HD di_dd di_dd_mul(di_dd a, di_dd b)
{
    di_dd p = di_dd_two_prod(a.hi, b.hi);
    p.lo += a.hi * b.lo + a.lo * b.hi;
    return di_dd_two_sum(p.hi, p.lo);
}

DI_HD di_dd di_dd_div(di_dd a, di_dd b)
{
    const double q1 = a.hi / b.hi;
    di_dd r = di_dd_add(a, di_dd_mul(b, di_dd_of(-q1)));
    const double q2 = r.hi / b.hi;
    r = di_dd_add(r, di_dd_mul(b, di_dd_of(-q2)));
    const double q3 = r.hi / b.hi;
    const di_dd q = di_dd_two_sum(q1, q2);
    return di_dd_add(q, di_dd_of(q3));
}

DI_HD double di_double_from_bits(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

DI_HD uint64_t di_bits_from_double(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return bits;
}

/* ln 2 = DI_LN2_HI + DI_LN2_LO (17 digits: each converts to one exact binary64) */
#define DI_LN2_HI 0.69314718055994529
#define DI_LN2_LO 2.3190468138462996e-17

/* ln(x) for a finite x > 0 of normal range, in double-double:
 * x = 2^m f with f in [sqrt(1/2), sqrt(2)), ln f = 2 atanh(u), u = (f-1)/(f+1). */
DI_HD di_dd di_dd_log(double x)
{
    const uint64_t bits = di_bits_from_double(x);
    int m = (int)((bits >> 52) & 0x7ff) - 1023;
    double f = di_double_from_bits((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    if (f > 1.4142135623730951) {
        f = f * 0.5; /* exact */
        m += 1;
    }
    const di_dd u = di_dd_div(di_dd_two_sum(f, -1.0), di_dd_two_sum(f, 1.0));
    const di_dd u2 = di_dd_mul(u, u);
    /* sum_{k>=0} u^(2k+1) / (2k+1), |u| < 0.172: 25 terms reach 2^-128 */
    di_dd term = u, sum = di_dd_of(0.0);
    for (int k = 0; k < 25; k++) {
        sum = di_dd_add(sum, di_dd_div(term, di_dd_of((double)(2 * k + 1))));
        term = di_dd_mul(term, u2);
    }
    sum = di_dd_add(sum, sum); /* exact doubling */
    const di_dd mln2 = di_dd_add(di_dd_two_prod((double)m, DI_LN2_HI), di_dd_two_prod((double)m, DI_LN2_LO));
    return di_dd_add(mln2, sum);
}

/* e^y for a double-double |y| < 700, rounded once to double (results in the
 * normal range: y > -708). y = k ln2 + r, |r| <= 0.35, e^r by Taylor. */
DI_HD double di_dd_exp_to_double(di_dd y)
{
    const double k = (double)(int64_t)(y.hi * 1.4426950408889634 + (y.hi < 0 ? -0.5 : 0.5));
    di_dd r = di_dd_add(y, di_dd_two_prod(-k, DI_LN2_HI));
    r = di_dd_add(r, di_dd_two_prod(-k, DI_LN2_LO));
    /* sum r^n / n!, n <= 27: 0.35^28 / 28! < 2^-140 */
    di_dd term = di_dd_of(1.0), sum = di_dd_of(1.0);
    for (int n = 1; n <= 27; n++) {
        term = di_dd_div(di_dd_mul(term, r), di_dd_of((double)n));
        sum = di_dd_add(sum, term);
    }
    /* round to double once, then scale by 2^k exactly (normal range) */
    const double v = sum.hi + sum.lo;
    return v * di_double_from_bits((uint64_t)((int64_t)k + 1023) << 52);
}

/* hi + lo (|lo| at most half an ulp of hi) rounded once to the nearest
 * binary32, for results in binary32's normal range. (float)hi is that
 * rounding unless hi lies exactly halfway between two binary32 values (its
 * 29 low mantissa bits 1000...0); then lo decides, so hi is first moved one
 * binary64 ulp toward it. */
DI_HD float di_dd_to_float(di_dd y)
{
    uint64_t bits = di_bits_from_double(y.hi);
    if ((bits & 0x1fffffffull) == 0x10000000ull && y.lo != 0.0)
        bits = (y.lo > 0.0) == (y.hi > 0.0) ? bits + 1 : bits - 1;
    return (float)di_double_from_bits(bits);
}

/* ln(x) of a binary32, for the log-probabilities (docs/DETERMINISM.md,
 * "Log-probabilities"): di_dd_log of the exact binary64 value of x (relative
 * error below 2^-100), rounded once by di_dd_to_float: correctly rounded
 * unless ln x lies within ~2^-100 of a binary32 rounding midpoint.
 * ln 1 = +0, ln(+-0) = -inf, ln(+inf) = +inf, NaN for NaN and x < 0.
 * A subnormal x is a normal binary64, so it needs no special case. */
DI_HD float di_logf(float x)
{
    if (x != x || x < 0.0f)
        return di_float_from_bits(0x7fc00000u);
    if (x == 0.0f)
        return di_float_from_bits(0xff800000u);
    if (x == 1.0f)
        return 0.0f;
    if (x > 3.4028234663852886e38f)
        return x;
    return di_dd_to_float(di_dd_log((double)x));
}

/* base^(-2i/n_rot), the inverse frequency of RoPE pair i; the exponent is
 * the double quotient (-2.0 * i) / n_rot. base > 0, finite. */
DI_HD double di_rope_inv_freq(double base, uint32_t i, uint32_t n_rot)
{
    const double e = -2.0 * (double)i / (double)n_rot;
    const di_dd l = di_dd_log(base);
    return di_dd_exp_to_double(di_dd_mul(l, di_dd_of(e)));
}

/* fdlibm's kernels (k_sin.c, k_cos.c: Sun Microsystems, freely usable):
 * sin and cos of x + y, |x| <= pi/4, |y| tiny; error below 1 ulp. */
DI_HD double di_kernel_sin(double x, double y)
{
    const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
                 S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
                 S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
    const double z = x * x, v = z * x;
    const double r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
    return x - ((z * (0.5 * y - v * r) - y) - v * S1);
}

DI_HD double di_kernel_cos(double x, double y)
{
    const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
                 C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
                 C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
    const double z = x * x;
    const double r = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
    const double hz = 0.5 * z, w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + (z * r - x * y));
}

/* pi/2 = P1 + P2 + P3 to 159 bits (17 digits: exact binary64 each) */
#define DI_PIO2_1 1.5707963267948966
#define DI_PIO2_2 6.123233995736766e-17
#define DI_PIO2_3 -1.4973849048591698e-33

/* sin and cos of x, |x| < 2^30 (a RoPE angle: position times frequency).
 * x - k pi/2 is formed in double-double: k*P1 exactly, x - hi(k*P1) exactly
 * (Sterbenz), the rest by exact products and two-sums. */
DI_HD void di_sincos(double x, double *s, double *c)
{
    const double k = (double)(int64_t)(x * 0.63661977236758134 + (x < 0 ? -0.5 : 0.5));
    di_dd r = di_dd_of(x);
    if (k != 0.0) {
        const di_dd p1 = di_dd_two_prod(k, DI_PIO2_1);
        r = di_dd_two_sum(x - p1.hi, -p1.lo);
        r = di_dd_add(r, di_dd_two_prod(-k, DI_PIO2_2));
        r = di_dd_add(r, di_dd_two_prod(-k, DI_PIO2_3));
    }
    const double sr = di_kernel_sin(r.hi, r.lo), cr = di_kernel_cos(r.hi, r.lo);
    switch ((int64_t)k & 3) {
    case 0: *s = sr; *c = cr; break;
    case 1: *s = cr; *c = -sr; break;
    case 2: *s = -sr; *c = -cr; break;
    default: *s = -cr; *c = sr; break;
    }
}

#endif /* DI_NUMERICS_H */
