/*
 * int_dot.h — the integer profile's dot product (DI_PROFILE_INTEGER,
 * docs/DETERMINISM.md "The integer profile"), written once in plain C for
 * every backend: the CPU paths' reference, and what a CUDA lane would run.
 *
 * An activation row is quantized per block of DI_INT_BLOCK = 32 values:
 *   m   = max |x_i| of the block (exact: compared as bits);
 *   E   = floor(log2 m) (exact: read from the bits);
 *   e   = max(E - DI_INT_CODE_BITS, -126), so the scale 2^e is a normal float
 *         and m / 2^e lies in [2^17, 2^18) (tiny blocks: below);
 *   c_i = x_i * 2^-e rounded to the nearest integer, ties to even: an integer
 *         of at most 19 bits, |c_i| <= 2^18.
 * The scaling by 2^-e is exact wherever the code can be non-zero, so c_i is
 * the correctly rounded integer; nothing depends on the order of the block's
 * elements. An all-zero block has scale 0 and codes 0; a block holding an
 * infinity or a NaN has scale NaN and codes 0, so its term is NaN.
 *
 * A weight block's integer codes (Q8_0: 32 int8 q_i; Q5_0: 32 five-bit values
 * minus 16; both with a binary16 scale d in the block's first two bytes)
 * meet the codes in an exact integer sum, P = sum q_i * c_i (|P| <= 2^30, in
 * any order: integer addition is exact). Block b of a row contributes
 *   term_b = fmaf((float)P_b, d_b * 2^e_b, lane)
 * i.e. the n/32 terms (float)P_b (one rounding, none when |P_b| <= 2^24) times
 * s_b = d_b * 2^e_b (exact for normal products) are reduced in the canonical
 * fma-form order of numerics.h and canon_order.h over n/32 terms, not n.
 *
 * 18 bits are the most whose block sums stay within int32 (32 * 128 * 2^18 =
 * 2^30); SIMD kernels multiply them as two int16 limbs (di_int_limbs).
 */
#ifndef DI_INT_DOT_H
#define DI_INT_DOT_H

#include <stdint.h>

#include "canon_order.h"
#include "numerics.h"
#include "weight_types.h"

#define DI_INT_BLOCK 32
#define DI_INT_CODE_BITS 17 /* a block's largest |x| becomes a code in [2^17, 2^18] */
/* Bytes of a 32-weight block of a type the profile covers (weight_types.h:
 * Q8_0, binary16 d then 32 int8 codes; Q5_0, d, 4 bytes of fifth bits and
 * 16 of nibbles); 0 for the others. */
DI_HD uint32_t di_int_block_bytes(uint32_t type)
{
    return type == DI_TYPE_Q8_0 ? DI_BLOCK_BYTES_Q8_0 : type == DI_TYPE_Q5_0 ? DI_BLOCK_BYTES_Q5_0 : 0;
}

/* Integer code i (0..31) of a block (docs/QUANTS.md): Q8_0 its int8; Q5_0
 * the five bits lo4(i) | qh bit i << 4, minus 16. */
DI_HD int32_t di_int_weight_code(uint32_t type, const uint8_t *block, int i)
{
    if (type == DI_TYPE_Q8_0)
        return (int32_t)(int8_t)block[2 + i];
    const uint32_t qh = (uint32_t)block[2] | (uint32_t)block[3] << 8 | (uint32_t)block[4] << 16 |
                        (uint32_t)block[5] << 24;
    const uint32_t lo4 = i < 16 ? block[6 + i] & 0x0fu : (uint32_t)block[6 + i - 16] >> 4;
    return (int32_t)(lo4 | ((qh >> i) & 1u) << 4) - 16;
}

/* x rounded to the nearest integer, ties to even, for |x| <= 2^22: adding
 * 1.5 * 2^23 leaves no fraction bit (the rounding is the float add's, under
 * the contract's round-to-nearest-even environment). */
DI_HD float di_int_rne(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return (x + magic) - magic;
}

/*
 * Codes and scale of one block x[0..32): writes codes[0..32) and returns the
 * scale (2^e, 0 for an all-zero block, NaN for a non-finite one).
 */
DI_HD float di_int_quantize_block(const float *x, int32_t *codes)
{
    uint32_t max_bits = 0;
    for (int i = 0; i < DI_INT_BLOCK; i++) {
        const uint32_t a = di_bits_from_float(x[i]) & 0x7fffffffu;
        max_bits = a > max_bits ? a : max_bits;
    }
    if (max_bits == 0 || max_bits >= 0x7f800000u) {
        for (int i = 0; i < DI_INT_BLOCK; i++)
            codes[i] = 0;
        return max_bits == 0 ? 0.0f : di_float_from_bits(0x7fc00000u);
    }
    int exp_m; /* floor(log2 m) */
    if (max_bits >= 0x00800000u) {
        exp_m = (int)(max_bits >> 23) - 127;
    } else { /* subnormal m: its highest set bit */
        exp_m = -149;
        for (uint32_t b = max_bits >> 1; b; b >>= 1)
            exp_m++;
    }
    int e = exp_m - DI_INT_CODE_BITS;
    if (e < -126)
        e = -126;
    const float inv = di_pow2(-e); /* -e in [-110, 126]: normal, exact */
    for (int i = 0; i < DI_INT_BLOCK; i++)
        codes[i] = (int32_t)di_int_rne(x[i] * inv); /* |x * inv| < 2^18 */
    return di_pow2(e);
}

/* A row of n values (n a multiple of 32): codes[n] and scales[n / 32]. */
DI_HD void di_int_quantize_row(const float *x, uint32_t n, int32_t *codes, float *scales)
{
    for (uint32_t b = 0; b < n / DI_INT_BLOCK; b++)
        scales[b] = di_int_quantize_block(x + (size_t)b * DI_INT_BLOCK, codes + (size_t)b * DI_INT_BLOCK);
}

/* P = sum of q_i * c_i over one weight block (exact). */
DI_HD int32_t di_int_block_sum(uint32_t type, const uint8_t *block, const int32_t *codes)
{
    int32_t p = 0;
    for (int i = 0; i < DI_INT_BLOCK; i++)
        p += di_int_weight_code(type, block, i) * codes[i];
    return p;
}

/* A block's codes as two int16 limbs, c = 256 * hi + lo with lo in [0, 255]:
 * limbs[0..32) = hi, limbs[32..64) = lo. Then q * c = (256 q) * hi + q * lo,
 * where 256 q fits int16 for every int8 q: two int16 products per code. */
DI_HD void di_int_limbs(const int32_t *codes, int16_t *limbs)
{
    for (int i = 0; i < DI_INT_BLOCK; i++) {
        const int32_t hi = (codes[i] - (codes[i] & 255)) / 256; /* floor(c / 256), exact */
        limbs[i] = (int16_t)hi;
        limbs[DI_INT_BLOCK + i] = (int16_t)(codes[i] & 255);
    }
}

/* Block b's two factors: (float)P_b and s_b = d_b * 2^e_b. */
DI_HD void di_int_term(uint32_t type, const uint8_t *row, const int32_t *codes, const float *scales,
                       uint32_t b, float *q, float *s)
{
    const uint8_t *block = row + (size_t)b * di_int_block_bytes(type);
    *q = (float)di_int_block_sum(type, block, codes + (size_t)b * DI_INT_BLOCK);
    *s = di_f16_to_f32((uint16_t)(block[0] | (block[1] << 8))) * scales[b];
}

/* Lane `lane`'s share (canon_order.h) of the n / 32 block terms. */
DI_HD float di_int_lane(uint32_t type, const uint8_t *row, const int32_t *codes, const float *scales,
                        uint32_t n, uint32_t lane)
{
    const uint32_t nb = n / DI_INT_BLOCK;
    float total = 0.0f;
    for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(nb, c0);
        float acc = 0.0f;
        for (uint32_t b = di_lane_first(c0, lane); b < end; b = di_lane_next(b)) {
            float q, s;
            di_int_term(type, row, codes, scales, b, &q, &s);
            acc = fmaf(q, s, acc);
        }
        total = di_lane_combine(total, acc, c0);
    }
    return total;
}

/* The integer profile's dot of a row of n weights of a covered type (n a
 * multiple of 32) with a quantized activation row: the reference every path
 * must match. */
DI_HD float di_int_dot(uint32_t type, const uint8_t *row, const int32_t *codes, const float *scales, uint32_t n)
{
    float lanes[DI_LANES];
    for (uint32_t l = 0; l < DI_LANES; l++)
        lanes[l] = di_int_lane(type, row, codes, scales, n, l);
    return di_lane_tree(lanes);
}

#endif /* DI_INT_DOT_H */
