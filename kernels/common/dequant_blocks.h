/*
 * dequant_blocks.h — the float32 value of one weight of a GGUF row, for every
 * supported type, in one source compiled by the C compiler and by nvcc.
 *
 * The formulas are those of docs/QUANTS.md (and of kernels/cpu/dequant.c, which
 * converts whole blocks at a time): every product exact, at most one rounding
 * in a final add or subtract. Here the unit is one weight, so that a CUDA lane
 * can convert exactly the terms it accumulates (term i of a row sits in block
 * i / block_elems at index i % block_elems). tests/check_cuda.c checks that
 * di_qb_weight gives the same bits as di_dequant_row for random blocks of
 * every type.
 */
#ifndef DI_DEQUANT_BLOCKS_H
#define DI_DEQUANT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/numerics.h"
#include "kernels/common/weight_types.h"

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

/* ---- 32-weight blocks: weight j (0..31) of block b ------------------------ */
/* Byte j % 16 of the nibbles holds weight j % 16 (low nibble) and weight
 * j % 16 + 16 (high nibble); Q5_x keeps the fifth bit of weight j in bit j of
 * a little-endian u32. */

DI_HD int di_qb_nibble(const uint8_t *qs, int j)
{
    return j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4);
}

/* Q4_0, 18 bytes: d, qs[16]. w = d * (q - 8): exact. */
DI_HD float di_qb_q4_0(const uint8_t *b, int j)
{
    return di_qb_f16(b + DI_OFF_D_Q4_0) * (float)(di_qb_nibble(b + DI_OFF_QS_Q4_0, j) - 8);
}

/* Q4_1, 20 bytes: d, m, qs[16]. w = (d * q) + m: one rounding. */
DI_HD float di_qb_q4_1(const uint8_t *b, int j)
{
    return di_qb_f16(b + DI_OFF_D_Q4_1) * (float)di_qb_nibble(b + DI_OFF_QS_Q4_1, j) + di_qb_f16(b + DI_OFF_M_Q4_1);
}

/* Q5_0, 22 bytes: d, qh (u32), qs[16]. w = d * (q - 16): exact. */
DI_HD float di_qb_q5_0(const uint8_t *b, int j)
{
    const int q = di_qb_nibble(b + DI_OFF_QS_Q5_0, j) | (int)((di_qb_u32(b + DI_OFF_QH_Q5_0) >> j) & 1u) << 4;
    return di_qb_f16(b + DI_OFF_D_Q5_0) * (float)(q - 16);
}

/* Q5_1, 24 bytes: d, m, qh (u32), qs[16]. w = (d * q) + m: one rounding. */
DI_HD float di_qb_q5_1(const uint8_t *b, int j)
{
    const int q = di_qb_nibble(b + DI_OFF_QS_Q5_1, j) | (int)((di_qb_u32(b + DI_OFF_QH_Q5_1) >> j) & 1u) << 4;
    return di_qb_f16(b + DI_OFF_D_Q5_1) * (float)q + di_qb_f16(b + DI_OFF_M_Q5_1);
}

/* Q8_0, 34 bytes: d, int8 qs[32]. w = d * q: exact. */
DI_HD float di_qb_q8_0(const uint8_t *b, int j)
{
    return di_qb_f16(b + DI_OFF_D_Q8_0) * (float)(int8_t)b[DI_OFF_QS_Q8_0 + j];
}

/* The value of a 4-bit IQ4_NL/IQ4_XS code. */
DI_HD int di_qb_iq4nl_value(int code)
{
    const int8_t values[16] = {DI_IQ4NL_VALUES};
    return values[code];
}

/* IQ4_NL, 18 bytes: d, qs[16] (nibbles as Q4_0). w = d * value(q): exact. */
DI_HD float di_qb_iq4_nl(const uint8_t *b, int j)
{
    return di_qb_f16(b + DI_OFF_D_IQ4_NL) * (float)di_qb_iq4nl_value(di_qb_nibble(b + DI_OFF_QS_IQ4_NL, j));
}

/* ---- 256-weight super-blocks: weight j (0..255) of block b ----------------- */

/* Q2_K, 84 bytes: scales[16] (scale low nibble, min high nibble, one byte per
 * 16 weights), qs[64], d, dmin. Half h = j / 128, quarter k = (j % 128) / 32,
 * l = j % 32: bits 2k..2k+1 of qs[32h + l].
 * w = (d * sc) * q - (dmin * m): exact products, one rounding. */
DI_HD float di_qb_q2_k(const uint8_t *b, int j)
{
    const int h = j / 128, k = (j % 128) / 32, l = j % 32;
    const int sm = b[DI_OFF_SC_Q2_K + j / 16], q = (b[DI_OFF_QS_Q2_K + 32 * h + l] >> (2 * k)) & 3;
    const float dl = di_qb_f16(b + DI_OFF_D_Q2_K) * (float)(sm & 0xf), ml = di_qb_f16(b + DI_OFF_M_Q2_K) * (float)(sm >> 4);
    return dl * (float)q - ml;
}

/* The 6-bit scale (0..63, before the -32) of group g (0..15, 16 weights
 * each) of a Q3_K block, packed in 12 bytes: low nibble in byte g % 8 at bit
 * 4 (g / 8), top two bits in byte 8 + g % 4 at bit 2 (g / 4). */
DI_HD int di_qb_q3_k_scale(const uint8_t *s, int g)
{
    return ((s[g % 8] >> (4 * (g / 8))) & 0xf) | ((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4;
}

/* Q3_K, 110 bytes: hmask[32], qs[64], scales[12], d. Half h = j / 128,
 * quarter k = (j % 128) / 32, l = j % 32: low bits 2k..2k+1 of qs[32h + l],
 * third bit (j / 32) of hmask[l]; q = (lo | hi << 2) - 4.
 * w = (d * (sc - 32)) * q: exact. */
DI_HD float di_qb_q3_k(const uint8_t *b, int j)
{
    const int h = j / 128, k = (j % 128) / 32, l = j % 32;
    const int lo = (b[DI_OFF_QS_Q3_K + 32 * h + l] >> (2 * k)) & 3, hi = (b[DI_OFF_QH_Q3_K + l] >> (j / 32)) & 1;
    const float dl = di_qb_f16(b + DI_OFF_D_Q3_K) * (float)(di_qb_q3_k_scale(b + DI_OFF_SC_Q3_K, j / 16) - 32);
    return dl * (float)((lo | hi << 2) - 4);
}

/* The 6-bit scale (0..63, before the -32) of sub-block s (0..7) of an IQ4_XS
 * block: low nibble s % 2 of scales_l[s / 2], top bits 2s..2s+1 of scales_h. */
DI_HD int di_qb_iq4_xs_scale(const uint8_t *b, int s)
{
    return ((b[DI_OFF_SC_IQ4_XS + s / 2] >> (4 * (s % 2))) & 0xf) | ((di_qb_u16(b + DI_OFF_SCH_IQ4_XS) >> (2 * s)) & 3) << 4;
}

/* IQ4_XS, 136 bytes: d, scales_h (u16), scales_l[4], qs[128]. Sub-block
 * s = j / 32 holds its nibbles in qs[16s ..] as a Q4_0 block does.
 * w = (d * (sc - 32)) * value(q): exact. */
DI_HD float di_qb_iq4_xs(const uint8_t *b, int j)
{
    const int s = j / 32;
    const float dl = di_qb_f16(b + DI_OFF_D_IQ4_XS) * (float)(di_qb_iq4_xs_scale(b, s) - 32);
    return dl * (float)di_qb_iq4nl_value(di_qb_nibble(b + DI_OFF_QS_IQ4_XS + 16 * s, j % 32));
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

/* Q4_K (qh NULL) and Q5_K: sub-block s = j / 32 takes nibble s % 2 of
 * qs[32 * (s / 2) + j % 32] and, in Q5_K, bit s of qh[j % 32].
 * w = (d * sc) * q - (dmin * m): exact products, one rounding. */
DI_HD float di_qb_k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int j)
{
    const int s = j / 32, l = j % 32;
    int sc, m;
    di_qb_k_scale_min(b + DI_OFF_SC_Q4_K, s, &sc, &m); /* Q5_K: the same offsets */
    const float dl = di_qb_f16(b + DI_OFF_D_Q4_K) * (float)sc, ml = di_qb_f16(b + DI_OFF_M_Q4_K) * (float)m;
    int v = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
    if (qh)
        v |= ((qh[l] >> s) & 1) << 4;
    return dl * (float)v - ml;
}

/* Q4_K, 144 bytes: d, dmin, scales[12], qs[128]. */
DI_HD float di_qb_q4_k(const uint8_t *b, int j)
{
    return di_qb_k(b, NULL, b + DI_OFF_QS_Q4_K, j);
}

/* Q5_K, 176 bytes: d, dmin, scales[12], qh[32], qs[128]. */
DI_HD float di_qb_q5_k(const uint8_t *b, int j)
{
    return di_qb_k(b, b + DI_OFF_QH_Q5_K, b + DI_OFF_QS_Q5_K, j);
}

/* Q6_K, 210 bytes: ql[128], qh[64], int8 scales[16], d. Half h = j / 128,
 * quarter k = (j % 128) / 32, l = j % 32: nibble k / 2 of
 * ql[64h + 32 (k % 2) + l], bits 2k..2k+1 of qh[32h + l], scale scales[j / 16].
 * w = (d * sc) * (q - 32): exact. */
DI_HD float di_qb_q6_k(const uint8_t *b, int j)
{
    const int h = j / 128, k = (j % 128) / 32, l = j % 32;
    const int lo = (b[DI_OFF_QS_Q6_K + 64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xf;
    const int hi = (b[DI_OFF_QH_Q6_K + 32 * h + l] >> (2 * k)) & 3;
    const float dl = di_qb_f16(b + DI_OFF_D_Q6_K) * (float)(int8_t)b[DI_OFF_SC_Q6_K + j / 16];
    return dl * (float)((lo | hi << 4) - 32);
}

/* ---- rows -------------------------------------------------------------------- */

/* Weight i of a row of `type` starting at `row`; 0 for an unsupported type
 * (the loader admits none). */
DI_HD float di_qb_weight(uint32_t type, const uint8_t *row, uint32_t i)
{
    switch (type) {
    case DI_TYPE_F32: return di_float_from_bits(di_qb_u32(row + 4 * (size_t)i));
    case DI_TYPE_F16: return di_f16_to_f32(di_qb_u16(row + 2 * (size_t)i));
    case DI_TYPE_BF16: return di_bf16_to_f32(di_qb_u16(row + 2 * (size_t)i));
/* weight i % elems of block i / elems */
#define DI_QB_IN_BLOCK(T, fn) \
    fn(row + (size_t)(i / DI_BLOCK_ELEMS_##T) * DI_BLOCK_BYTES_##T, (int)(i % DI_BLOCK_ELEMS_##T))
    case DI_TYPE_Q4_0: return DI_QB_IN_BLOCK(Q4_0, di_qb_q4_0);
    case DI_TYPE_Q4_1: return DI_QB_IN_BLOCK(Q4_1, di_qb_q4_1);
    case DI_TYPE_Q5_0: return DI_QB_IN_BLOCK(Q5_0, di_qb_q5_0);
    case DI_TYPE_Q5_1: return DI_QB_IN_BLOCK(Q5_1, di_qb_q5_1);
    case DI_TYPE_Q8_0: return DI_QB_IN_BLOCK(Q8_0, di_qb_q8_0);
    case DI_TYPE_IQ4_NL: return DI_QB_IN_BLOCK(IQ4_NL, di_qb_iq4_nl);
    case DI_TYPE_Q2_K: return DI_QB_IN_BLOCK(Q2_K, di_qb_q2_k);
    case DI_TYPE_Q3_K: return DI_QB_IN_BLOCK(Q3_K, di_qb_q3_k);
    case DI_TYPE_Q4_K: return DI_QB_IN_BLOCK(Q4_K, di_qb_q4_k);
    case DI_TYPE_Q5_K: return DI_QB_IN_BLOCK(Q5_K, di_qb_q5_k);
    case DI_TYPE_Q6_K: return DI_QB_IN_BLOCK(Q6_K, di_qb_q6_k);
    case DI_TYPE_IQ4_XS: return DI_QB_IN_BLOCK(IQ4_XS, di_qb_iq4_xs);
#undef DI_QB_IN_BLOCK
    default: return 0.0f;
    }
}

#endif /* DI_DEQUANT_BLOCKS_H */
