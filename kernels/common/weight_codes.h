/*
 * weight_codes.h — the one decoder of every quantized weight type, in one
 * source compiled by the C compiler and by nvcc: where each weight's signed
 * integer code v sits in its block, its group's integer scale k, the block's
 * binary16 scale D and its min terms N (docs/QUANTS.md). A weight's value is
 *
 *     w = (D * k) * v + N    (no N: w = (D * k) * v)
 *
 * every product exact, at most the one addition rounding. The float path
 * (dequant_blocks.h, kernels/cpu/dequant.c) and the integer profile
 * (int_dot.h) both read the bits through these functions, so a type's bit
 * rules are written here once; a new type is a row of weight_types.h and its
 * cases here (tests/check_quants.c fails for a supported type without them).
 * With a constant type every switch folds away.
 */
#ifndef DI_WEIGHT_CODES_H
#define DI_WEIGHT_CODES_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/numerics.h"
#include "kernels/common/weight_types.h"

/* Weights per sub-block: the unit of the codes, scales and min terms (a
 * 32-weight block, or an eighth of a 256-weight super-block). */
#define DI_SUB_BLOCK 32

/* Little-endian loads from any byte address. */
DI_HD uint16_t di_qb_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

DI_HD uint32_t di_qb_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

DI_HD float di_qb_f16(const uint8_t *p)
{
    return di_f16_to_f32(di_qb_u16(p));
}

DI_HD int di_qb_nibble(const uint8_t *qs, int j)
{
    return j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
}

/* The value of a 4-bit IQ4_NL/IQ4_XS code. */
DI_HD int di_qb_iq4nl_value(int code)
{
    const int8_t values[16] = {DI_IQ4NL_VALUES};
    return values[code];
}

/* The 6-bit scale (0..63, before the -32) of group g (0..15, 16 weights
 * each) of a Q3_K block, packed in 12 bytes: low nibble in byte g % 8 at bit
 * 4 (g / 8), top two bits in byte 8 + g % 4 at bit 2 (g / 4). */
DI_HD int di_qb_q3_k_scale(const uint8_t *s, int g)
{
    return ((s[g % 8] >> (4 * (g / 8))) & 0xf) | ((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4;
}

/* The 6-bit scale (0..63, before the -32) of sub-block s (0..7) of an IQ4_XS
 * block: low nibble s % 2 of scales_l[s / 2], top bits 2s..2s+1 of scales_h. */
DI_HD int di_qb_iq4_xs_scale(const uint8_t *b, int s)
{
    return ((b[DI_OFF_SC_IQ4_XS + s / 2] >> (4 * (s % 2))) & 0xf) | ((di_qb_u16(b + DI_OFF_SCH_IQ4_XS) >> (2 * s)) & 3) << 4;
}

/* The 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block. */
DI_HD void di_qb_k_scale_min(const uint8_t *sc_bytes, int s, int *sc, int *m)
{
    if (s < 4) {
        *sc = sc_bytes[s] & 63;
        *m = sc_bytes[s + 4] & 63;
    } else {
        *sc = (sc_bytes[s + 4] & 0xf) | (sc_bytes[s - 4] >> 6) << 4;
        *m = (sc_bytes[s + 4] >> 4) | (sc_bytes[s] >> 6) << 4;
    }
}

/* The block of `type` that holds 32-block b of a row, and b's place in it
 * (its sub-block, 0 for the 32-weight types). */
DI_HD const uint8_t *di_int_block_at(uint32_t type, const uint8_t *row, uint32_t b, int *sub)
{
    const uint32_t per = di_weight_block_elems(type) / DI_SUB_BLOCK;
    *sub = (int)(b % per);
    return row + (size_t)(b / per) * di_weight_block_bytes(type);
}

/* Signed integer code v of weight i (0..31) of sub-block `sub` of block blk
 * (its index in the block j = 32 sub + i). The layouts (docs/QUANTS.md):
 *   Q4_0, Q4_1, IQ4_NL: byte i % 16 of qs holds weight i % 16 (low nibble)
 *     and i % 16 + 16 (high); Q5_0, Q5_1 add bit i of the u32 qh as bit 4;
 *     IQ4_NL's nibble indexes DI_IQ4NL_VALUES. Q8_0: int8 qs[i].
 *   Q2_K, Q3_K: half h = j / 128 = sub / 4, quarter k = (j % 128) / 32 =
 *     sub % 4: bits 2k..2k+1 of qs[32h + i]; Q3_K's third bit is bit `sub`
 *     of hmask[i].
 *   Q4_K, Q5_K: nibble sub % 2 of qs[32 (sub / 2) + i]; Q5_K's fifth bit is
 *     bit `sub` of qh[i]. IQ4_XS: sub-block s's nibbles as a Q4_0 block's,
 *     in qs[16 s ..], through DI_IQ4NL_VALUES.
 *   Q6_K: nibble k / 2 of ql[64h + 32 (k % 2) + i], bits 2k..2k+1 of
 *     qh[32h + i] on top, less 32. */
DI_HD_FOLD int di_int_code(uint32_t type, const uint8_t *blk, int sub, int i)
{
    const int h = sub / 4, k = sub % 4; /* the K types' half (128 weights) and quarter of it */
    switch (type) {
    case DI_TYPE_Q4_0: return di_qb_nibble(blk + DI_OFF_QS_Q4_0, i) - 8;
    case DI_TYPE_Q4_1: return di_qb_nibble(blk + DI_OFF_QS_Q4_1, i);
    case DI_TYPE_Q5_0:
        return (di_qb_nibble(blk + DI_OFF_QS_Q5_0, i) | (int)((di_qb_u32(blk + DI_OFF_QH_Q5_0) >> i) & 1u) << 4) - 16;
    case DI_TYPE_Q5_1:
        return di_qb_nibble(blk + DI_OFF_QS_Q5_1, i) | (int)((di_qb_u32(blk + DI_OFF_QH_Q5_1) >> i) & 1u) << 4;
    case DI_TYPE_Q8_0: return (int8_t)blk[DI_OFF_QS_Q8_0 + i];
    case DI_TYPE_IQ4_NL: return di_qb_iq4nl_value(di_qb_nibble(blk + DI_OFF_QS_IQ4_NL, i));
    case DI_TYPE_Q2_K: return (blk[DI_OFF_QS_Q2_K + 32 * h + i] >> (2 * k)) & 3;
    case DI_TYPE_Q3_K: {
        const int lo = (blk[DI_OFF_QS_Q3_K + 32 * h + i] >> (2 * k)) & 3, hi = (blk[DI_OFF_QH_Q3_K + i] >> sub) & 1;
        return (lo | hi << 2) - 4;
    }
    case DI_TYPE_Q4_K: return (blk[DI_OFF_QS_Q4_K + 32 * (sub / 2) + i] >> (4 * (sub % 2))) & 0xf;
    case DI_TYPE_Q5_K:
        return ((blk[DI_OFF_QS_Q5_K + 32 * (sub / 2) + i] >> (4 * (sub % 2))) & 0xf) |
               ((blk[DI_OFF_QH_Q5_K + i] >> sub) & 1) << 4;
    case DI_TYPE_Q6_K: {
        const int lo = (blk[DI_OFF_QS_Q6_K + 64 * h + 32 * (k % 2) + i] >> (4 * (k / 2))) & 0xf;
        const int hi = (blk[DI_OFF_QH_Q6_K + 32 * h + i] >> (2 * k)) & 3;
        return (lo | hi << 4) - 32;
    }
    case DI_TYPE_IQ4_XS: return di_qb_iq4nl_value(di_qb_nibble(blk + DI_OFF_QS_IQ4_XS + 16 * sub, i));
    default: return 0;
    }
}

/* Groups of a 32-block: 2 (16 weights each, a scale each) for Q2_K, Q3_K
 * and Q6_K, else 1. */
DI_HD int di_int_groups(uint32_t type)
{
    return type == DI_TYPE_Q2_K || type == DI_TYPE_Q3_K || type == DI_TYPE_Q6_K ? 2 : 1;
}

/* The integer scale k of group g (0..di_int_groups - 1) of sub-block `sub`:
 * 1 for the 32-weight types. */
DI_HD_FOLD int di_int_scale(uint32_t type, const uint8_t *blk, int sub, int g)
{
    const int group16 = 2 * sub + g; /* Q2_K, Q3_K, Q6_K: its 16-weight group in the block */
    switch (type) {
    case DI_TYPE_Q2_K: return blk[DI_OFF_SC_Q2_K + group16] & 0xf;
    case DI_TYPE_Q3_K: return di_qb_q3_k_scale(blk + DI_OFF_SC_Q3_K, group16) - 32;
    case DI_TYPE_Q6_K: return (int8_t)blk[DI_OFF_SC_Q6_K + group16];
    case DI_TYPE_Q4_K:
    case DI_TYPE_Q5_K: {
        int sc, m;
        di_qb_k_scale_min(blk + di_weight_field(type, DI_FIELD_SC), sub, &sc, &m);
        return sc;
    }
    case DI_TYPE_IQ4_XS: return di_qb_iq4_xs_scale(blk, sub) - 32;
    default: return 1;
    }
}

/* The block's binary16 scale D. */
DI_HD_FOLD float di_int_d(uint32_t type, const uint8_t *blk)
{
    return di_qb_f16(blk + di_weight_field(type, DI_FIELD_D));
}

/* Min terms per 32-block: 1 (the whole block) for Q4_1, Q5_1, Q4_K and
 * Q5_K, 2 (its halves) for Q2_K, else 0. */
DI_HD int di_int_min_count(uint32_t type)
{
    switch (type) {
    case DI_TYPE_Q4_1:
    case DI_TYPE_Q5_1:
    case DI_TYPE_Q4_K:
    case DI_TYPE_Q5_K: return 1;
    case DI_TYPE_Q2_K: return 2;
    default: return 0;
    }
}

/* The min factors of sub-block `sub`: their count (di_int_min_count), and
 * N[0..count): Q4_1, Q5_1 the binary16
 * m; Q4_K, Q5_K -(dmin * m) with the 6-bit min; Q2_K -(dmin * m) per 16
 * weights with the 4-bit min. dmin * m is exact (11 by at most 6 bits). */
DI_HD_FOLD int di_int_mins(uint32_t type, const uint8_t *blk, int sub, float *N)
{
    switch (type) {
    case DI_TYPE_Q4_1:
    case DI_TYPE_Q5_1: N[0] = di_qb_f16(blk + di_weight_field(type, DI_FIELD_M)); break;
    case DI_TYPE_Q4_K:
    case DI_TYPE_Q5_K: {
        int sc, m;
        di_qb_k_scale_min(blk + di_weight_field(type, DI_FIELD_SC), sub, &sc, &m);
        N[0] = -(di_qb_f16(blk + di_weight_field(type, DI_FIELD_M)) * (float)m);
        break;
    }
    case DI_TYPE_Q2_K: {
        const float dmin = di_qb_f16(blk + DI_OFF_M_Q2_K);
        for (int g = 0; g < 2; g++)
            N[g] = -(dmin * (float)(blk[DI_OFF_SC_Q2_K + 2 * sub + g] >> 4));
        break;
    }
    default: break;
    }
    return di_int_min_count(type);
}

#endif /* DI_WEIGHT_CODES_H */
