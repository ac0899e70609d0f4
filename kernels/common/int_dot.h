/*
 * int_dot.h — the integer profile's matrix product (DI_PROFILE_INTEGER,
 * docs/DETERMINISM.md "The integer profile"), written once in plain C for
 * every backend: the definition the CPU paths and the CUDA kernels must
 * match bit for bit, and the code the scalar path runs.
 *
 * Activations: each token's row is cut into blocks of DI_QA_BLOCK = 32
 * values, each stored as 32 int8 codes c_i in [-127, 127], a float32 scale
 * a and the two code sums of its halves (di_qa_block says how).
 *
 * Weights of every quantized type: block b (weights 32b..32b+31 of a row;
 * in a 256-weight super-block, its sub-block b % 8) is read as signed
 * integer codes v_i, one or two integer group scales k (a group is 32 or 16
 * weights), the binary16 scale D and, for the types with a minimum, one or
 * two min factors N (di_int_code, or di_int_code_word four at a time;
 * di_int_scale, di_int_mins). The block's
 * integer sum is exact:
 *   P_b = sum over groups g of k_g * sum_{i in g} v_i * c_i,
 * and its term enters lane b % 32 of the canonical fma-form reduction over
 * the n/32 blocks (chunks of DI_CHUNK blocks, the lane tree):
 *   lane = fmaf((float)P_b, D_b * a_b, lane);
 *   then, per min group g in order: lane = fmaf(N_g, a_b * S_g, lane),
 * S_g the sum of the codes of group g (the whole block or its half). The
 * weight's float value is D * k * v + N (docs/QUANTS.md), so the term is
 * that of the float path with the activation replaced by a * c.
 *
 * Bounds, per type (|c| <= 127): |P_b| < 2^24, so (float)P_b is exact and
 * every partial sum fits int32, in any order:
 *   Q8_0 |v| <= 128: 32 * 128 * 127 = 520,192;  Q4_0, Q4_1, Q5_0, Q5_1 and
 *   IQ4_NL below that; Q4_K sc <= 63, v <= 15: 63 * 15 * 127 * 32 =
 *   3,840,480; Q5_K v <= 31: 7,936,992; Q6_K |sc| <= 128, |v| <= 32:
 *   2 * 128 * 32 * 127 * 16 = 16,646,144; IQ4_XS |sc - 32| <= 32, |v| <= 127:
 *   32 * 127 * 127 * 32 = 16,516,096; Q3_K 2 * 32 * 4 * 127 * 16 = 520,192;
 *   Q2_K 2 * 15 * 3 * 127 * 16 = 182,880 (tests/check_intdot.c builds each
 *   worst case and checks the sum).
 * F32, F16 and BF16 weights take the float path of the portable profile.
 */
#ifndef DI_INT_DOT_H
#define DI_INT_DOT_H

#include <stdint.h>

#include "kernels/common/canon_order.h"
#include "kernels/common/weight_codes.h"
#include "kernels/common/numerics.h"
#include "kernels/common/weight_types.h"

#define DI_QA_BLOCK DI_SUB_BLOCK /* activation values per scale: one per sub-block of weights */
#define DI_QA_HALF 16  /* values per code sum */
#define DI_QA_MAX 127  /* the largest code */

/* 1 for the types whose products the profile computes in integers (every
 * quantized type the library supports; F32, F16 and BF16 are not). Every
 * row of such a type holds whole blocks of 32 or 256 weights, so its length
 * is a multiple of DI_QA_BLOCK. */
DI_HD int di_int_type(uint32_t type)
{
    return di_weight_type_supported(type) && di_weight_block_elems(type) >= DI_QA_BLOCK;
}

/* x rounded to the nearest integer, ties to even, for |x| <= 2^22: adding
 * 1.5 * 2^23 leaves no fraction bit (the rounding is the float add's, under
 * the contract's round-to-nearest-even environment). */
DI_HD float di_int_rne(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return (x + magic) - magic;
}

/* floor(log2 m) of a positive finite float given by its bits, subnormals
 * included. */
DI_HD int di_qa_exponent(uint32_t bits)
{
    if (bits >= 0x00800000u)
        return (int)(bits >> 23) - 127;
    int e = -150;
    for (uint32_t b = bits; b; b >>= 1)
        e++;
    return e;
}

/* The three factors of a block whose m = max |x_i| has the bits max_bits
 * (positive and finite), as di_qa_block below defines them:
 * c_i = rint(((x_i * p[0]) * p[1]) * p[2]). SIMD paths take them from here
 * and do the multiplications in vectors. */
DI_HD void di_qa_factors(uint32_t max_bits, float p[3])
{
    const float m = di_float_from_bits(max_bits);
    const int e = di_qa_exponent(max_bits), h1 = (-e) >= 0 ? (-e) / 2 : -((e + 1) / 2), h2 = -e - h1;
    p[0] = di_pow2(h1);
    p[1] = di_pow2(h2);
    p[2] = 127.0f / ((m * p[0]) * p[1]);
}

/* The scale a = m / 127 of the same block. */
DI_HD float di_qa_scale(uint32_t max_bits)
{
    return di_float_from_bits(max_bits) / 127.0f;
}

/*
 * The codes of one block x[0..32), its two code sums and its scale:
 *   m = max |x_i|, compared as bits (exact, order-free);
 *   m = 0: scale 0, codes and sums 0; m infinite or NaN: scale NaN, codes and
 *   sums 0 (the block's terms, and the output, are NaN);
 *   otherwise E = floor(log2 m), h1 = floor(-E / 2), h2 = -E - h1 (powers
 *   2^h1, 2^h2 are normal floats), r = 127 / (m * 2^-E) (m * 2^-E in [1, 2)
 *   is exact, so r in (63.5, 127]), and
 *     c_i = rint((x_i * 2^h1) * 2^h2 * r), ties to even,
 *   three float multiplications in that order; the scale is a = m / 127.
 * |x_i * 2^-E| <= m * 2^-E, so |c_i| <= 127 (127 * (1 + 2^-24) rounds to
 * 127). Scaling by 2^h1 and 2^h2 is exact unless the result is subnormal,
 * and then its code is 0 either way.
 */
DI_HD float di_qa_block(const float *x, int8_t *codes, int16_t *sums)
{
    uint32_t max_bits = 0;
    for (int i = 0; i < DI_QA_BLOCK; i++) {
        const uint32_t a = di_bits_from_float(x[i]) & 0x7fffffffu;
        max_bits = a > max_bits ? a : max_bits;
    }
    sums[0] = sums[1] = 0;
    if (max_bits == 0 || max_bits >= 0x7f800000u) {
        for (int i = 0; i < DI_QA_BLOCK; i++)
            codes[i] = 0;
        return max_bits == 0 ? 0.0f : di_float_from_bits(0x7fc00000u);
    }
    float f[3];
    di_qa_factors(max_bits, f);
    const float p1 = f[0], p2 = f[1], r = f[2];
    int s[2] = {0, 0};
    for (int i = 0; i < DI_QA_BLOCK; i++) {
        const int c = (int)di_int_rne(((x[i] * p1) * p2) * r);
        codes[i] = (int8_t)c;
        s[i / DI_QA_HALF] += c;
    }
    sums[0] = (int16_t)s[0];
    sums[1] = (int16_t)s[1];
    return di_qa_scale(max_bits);
}

/* A row of n values (n a multiple of 32): codes[n], scales[n / 32],
 * sums[n / 16]. */
DI_HD void di_qa_row(const float *x, uint32_t n, int8_t *codes, float *scales, int16_t *sums)
{
    for (uint32_t b = 0; b < n / DI_QA_BLOCK; b++)
        scales[b] = di_qa_block(x + (size_t)b * DI_QA_BLOCK, codes + (size_t)b * DI_QA_BLOCK, sums + 2 * (size_t)b);
}

/* ---- the weights' side ------------------------------------------------------- */
/* Each weight's code, its group's scale, D and the min terms: weight_codes.h. */

/* Four signed bytes as one 32-bit word, byte k in bits 8k..8k+7. */
DI_HD int di_int_pack4(int b0, int b1, int b2, int b3)
{
    return (int)((uint32_t)(uint8_t)b0 | (uint32_t)(uint8_t)b1 << 8 | (uint32_t)(uint8_t)b2 << 16 |
                 (uint32_t)(uint8_t)b3 << 24);
}

/* The little-endian 32-bit word of the weights at p, at any alignment, and
 * the word of four activation codes at c (a multiple of 4 bytes into its
 * row). A translation unit may define faster reads before including this
 * header (the CUDA kernels do: kernels/cuda/cuda_kernels.cu). */
#ifndef DI_INT_U32
#define DI_INT_U32(p) di_qb_u32(p)
#endif
#ifndef DI_INT_CODES32
#define DI_INT_CODES32(c) di_qb_u32((const uint8_t *)(c))
#endif

/* Bytes x - off, off = 2^k <= 64 (x of each byte below 2 off): no byte
 * carries into the next, and the top bit flipped is the sign. */
DI_HD uint32_t di_int_sub4(uint32_t x, uint32_t off)
{
    return (x + (0x80u - off) * 0x01010101u) ^ 0x80808080u;
}

/* Bit j of x's low four bits as bit 0 of byte j (the four bits' shifted
 * copies at 0, 7, 14 and 21 do not overlap, so nothing carries). */
DI_HD uint32_t di_int_bits4(uint32_t x)
{
    return ((x & 0xfu) * 0x00204081u) & 0x01010101u;
}

/* The codes v of weights i..i+3 (i a multiple of 4) of sub-block `sub` of
 * block blk as the four signed bytes of one word (byte k: weight i + k):
 * the same integers as di_int_code, read a word at a time. */
DI_HD uint32_t di_int_code_word(uint32_t type, const uint8_t *blk, int sub, int i)
{
    const int j = 32 * sub + i, h = j / 128, k = (j % 128) / 32; /* the K types' places */
    const uint32_t lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
    switch (type) {
    case DI_TYPE_Q4_0: return di_int_sub4((DI_INT_U32(blk + DI_OFF_QS_Q4_0 + i % 16) >> (4 * (i / 16))) & lo4, 8);
    case DI_TYPE_Q4_1: return (DI_INT_U32(blk + DI_OFF_QS_Q4_1 + i % 16) >> (4 * (i / 16))) & lo4;
    case DI_TYPE_Q5_0:
        return di_int_sub4(((DI_INT_U32(blk + DI_OFF_QS_Q5_0 + i % 16) >> (4 * (i / 16))) & lo4) |
                               di_int_bits4(DI_INT_U32(blk + DI_OFF_QH_Q5_0) >> i) << 4,
                           16);
    case DI_TYPE_Q5_1:
        return ((DI_INT_U32(blk + DI_OFF_QS_Q5_1 + i % 16) >> (4 * (i / 16))) & lo4) |
               di_int_bits4(DI_INT_U32(blk + DI_OFF_QH_Q5_1) >> i) << 4;
    case DI_TYPE_Q8_0: return DI_INT_U32(blk + DI_OFF_QS_Q8_0 + i);
    case DI_TYPE_Q2_K: return (DI_INT_U32(blk + DI_OFF_QS_Q2_K + 32 * h + i) >> (2 * k)) & lo2;
    case DI_TYPE_Q3_K:
        return di_int_sub4(((DI_INT_U32(blk + DI_OFF_QS_Q3_K + 32 * h + i) >> (2 * k)) & lo2) |
                               ((DI_INT_U32(blk + DI_OFF_QH_Q3_K + i) >> sub) & 0x01010101u) << 2,
                           4);
    case DI_TYPE_Q4_K: return (DI_INT_U32(blk + DI_OFF_QS_Q4_K + 32 * (sub / 2) + i) >> (4 * (sub % 2))) & lo4;
    case DI_TYPE_Q5_K:
        return ((DI_INT_U32(blk + DI_OFF_QS_Q5_K + 32 * (sub / 2) + i) >> (4 * (sub % 2))) & lo4) |
               ((DI_INT_U32(blk + DI_OFF_QH_Q5_K + i) >> sub) & 0x01010101u) << 4;
    case DI_TYPE_Q6_K:
        return di_int_sub4(((DI_INT_U32(blk + DI_OFF_QS_Q6_K + 64 * h + 32 * (k % 2) + i) >> (4 * (k / 2))) & lo4) |
                               ((DI_INT_U32(blk + DI_OFF_QH_Q6_K + 32 * h + i) >> (2 * k)) & lo2) << 4,
                           32);
    default: /* IQ4_NL, IQ4_XS: a table per code */
        return (uint32_t)di_int_pack4(di_int_code(type, blk, sub, i), di_int_code(type, blk, sub, i + 1),
                                      di_int_code(type, blk, sub, i + 2), di_int_code(type, blk, sub, i + 3));
    }
}

/* acc + the four products of the signed bytes of x and y, exact. A
 * translation unit that defines DI_INT_DP4A (the CUDA kernels) computes it
 * with dp4a, one instruction, in its device code (and in tests/cuda_emu's
 * host build of it); the integers are the same. */
DI_HD int32_t di_int_dot4(int32_t acc, uint32_t x, uint32_t y)
{
#if defined(DI_INT_DP4A) && (defined(__CUDA_ARCH__) || !defined(__CUDACC__))
    return __dp4a((int)x, (int)y, acc);
#else
    for (int k = 0; k < 4; k++)
        acc += (int32_t)(int8_t)(uint8_t)(x >> (8 * k)) * (int32_t)(int8_t)(uint8_t)(y >> (8 * k));
    return acc;
#endif
}

/* P_b of 32-block b of a row against one block of codes (exact). */
DI_HD int32_t di_int_block_sum(uint32_t type, const uint8_t *row, uint32_t b, const int8_t *codes)
{
    int sub;
    const uint8_t *blk = di_int_block_at(type, row, b, &sub);
    const int groups = di_int_groups(type), per = DI_QA_BLOCK / groups;
    int32_t p = 0;
    for (int g = 0; g < groups; g++) {
        int32_t q = 0;
        for (int i = g * per; i < (g + 1) * per; i += 4)
            q = di_int_dot4(q, di_int_code_word(type, blk, sub, i), DI_INT_CODES32(codes + i));
        p += di_int_scale(type, blk, sub, g) * q;
    }
    return p;
}

/* One block's terms added to `lane` (the order of the head comment). */
DI_HD float di_int_block_step(uint32_t type, const uint8_t *row, uint32_t b, const int8_t *codes,
                              const int16_t *sums, float a, float lane)
{
    int sub;
    const uint8_t *blk = di_int_block_at(type, row, b, &sub);
    lane = fmaf((float)di_int_block_sum(type, row, b, codes), di_int_d(type, blk) * a, lane);
    float N[2];
    const int mins = di_int_mins(type, blk, sub, N);
    for (int g = 0; g < mins; g++) {
        const int s = mins == 2 ? sums[g] : sums[0] + sums[1];
        lane = fmaf(N[g], a * (float)s, lane);
    }
    return lane;
}

/* Lane `lane`'s share of the n / 32 block terms of a row with one token's
 * codes[n], scales[n / 32] and sums[n / 16]. */
DI_HD float di_int_lane(uint32_t type, const uint8_t *row, const int8_t *codes, const float *scales,
                        const int16_t *sums, uint32_t n, uint32_t lane)
{
    const uint32_t nb = n / DI_QA_BLOCK;
    float total = 0.0f;
    for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(nb, c0);
        float acc = 0.0f;
        for (uint32_t b = di_lane_first(c0, lane); b < end; b = di_lane_next(b))
            acc = di_int_block_step(type, row, b, codes + (size_t)b * DI_QA_BLOCK, sums + 2 * (size_t)b, scales[b], acc);
        total = di_lane_combine(total, acc, c0);
    }
    return total;
}

/* The profile's dot of a row of n weights (di_int_type(type), n a multiple
 * of 32) with a quantized activation row: the reference every path matches. */
DI_HD float di_int_dot(uint32_t type, const uint8_t *row, const int8_t *codes, const float *scales,
                       const int16_t *sums, uint32_t n)
{
    float lanes[DI_LANES];
    for (uint32_t l = 0; l < DI_LANES; l++)
        lanes[l] = di_int_lane(type, row, codes, scales, sums, n, l);
    return di_lane_tree(lanes);
}

#endif /* DI_INT_DOT_H */
