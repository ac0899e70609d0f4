/*
 * dequant.c — weight rows of every supported GGUF type to float32.
 *
 * A plain transcription of docs/QUANTS.md. Each block is read through byte
 * loads (rows inside an mmapped file need not be aligned, and the file is
 * little-endian whatever the host). The float operations are written in the
 * documented order; in every type all products are exact and at most one
 * addition rounds, so the bits do not depend on how a compiler or another
 * backend groups the products, or on fma contraction (QUANTS.md says why).
 */
#include "kernels/cpu/cpu_clones.h"
#include "kernels/cpu/dequant.h"
#include "kernels/common/dequant_blocks.h"

#include <string.h>

#include "kernels/common/numerics.h"
#include "kernels/common/weight_types.h"

/* ---- little-endian loads ------------------------------------------------- */

static inline uint16_t load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* A binary16 scale field, exactly. */
static inline float load_f16(const uint8_t *p)
{
    return di_f16_to_f32(load_u16(p));
}

/* ---- 32-weight blocks ----------------------------------------------------- */
/* In Q4_x and Q5_x, byte j of the nibbles holds weight j (low nibble) and
 * weight j + 16 (high nibble); Q5_x keeps the fifth bits of weight j in bit j
 * of a little-endian u32. */

/* Q4_0, 18 bytes: d, qs[16]. w = d * (q - 8): exact. */
static DI_INLINE void block_q4_0(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q4_0);
    const uint8_t *qs = b + DI_OFF_QS_Q4_0;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 0xf) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

/* Q4_1, 20 bytes: d, m, qs[16]. w = (d * q) + m: the product is exact, the
 * addition rounds once. */
static DI_INLINE void block_q4_1(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q4_1), m = load_f16(b + DI_OFF_M_Q4_1);
    const uint8_t *qs = b + DI_OFF_QS_Q4_1;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 0xf) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

/* Q5_0, 22 bytes: d, qh (u32), qs[16]. w = d * (q - 16): exact. */
static DI_INLINE void block_q5_0(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q5_0);
    const uint32_t qh = load_u32(b + DI_OFF_QH_Q5_0);
    const uint8_t *qs = b + DI_OFF_QS_Q5_0;
    for (int j = 0; j < 16; j++) {
        const int lo = (qs[j] & 0xf) | (int)((qh >> j) & 1u) << 4;
        const int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

/* Q5_1, 24 bytes: d, m, qh (u32), qs[16]. w = (d * q) + m: one rounding. */
static DI_INLINE void block_q5_1(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q5_1), m = load_f16(b + DI_OFF_M_Q5_1);
    const uint32_t qh = load_u32(b + DI_OFF_QH_Q5_1);
    const uint8_t *qs = b + DI_OFF_QS_Q5_1;
    for (int j = 0; j < 16; j++) {
        const int lo = (qs[j] & 0xf) | (int)((qh >> j) & 1u) << 4;
        const int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4;
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

/* Q8_0, 34 bytes: d, int8 qs[32]. w = d * q: exact. */
static DI_INLINE void block_q8_0(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q8_0);
    for (int j = 0; j < DI_BLOCK_ELEMS_Q8_0; j++)
        y[j] = d * (float)(int8_t)b[DI_OFF_QS_Q8_0 + j];
}

/* The values of the 4-bit codes of IQ4_NL and IQ4_XS. */
static const int8_t IQ4NL_VALUES[16] = {DI_IQ4NL_VALUES};

/* IQ4_NL, 18 bytes: d, qs[16] (nibbles as Q4_0). w = d * value(q): exact. */
static DI_INLINE void block_iq4_nl(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_IQ4_NL);
    const uint8_t *qs = b + DI_OFF_QS_IQ4_NL;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)IQ4NL_VALUES[qs[j] & 0xf];
        y[j + 16] = d * (float)IQ4NL_VALUES[qs[j] >> 4];
    }
}

/* ---- 256-weight super-blocks ---------------------------------------------- */

/* Q2_K, 84 bytes: scales[16], qs[64], d, dmin. Byte g of scales holds the
 * 4-bit scale (low nibble) and min (high nibble) of weights 16g..16g+15.
 * Each half of 128 weights uses 32 bytes of qs; its quarter k takes bits
 * 2k..2k+1 of qs[l]. w = (d * sc) * q - (dmin * m): exact products, one
 * rounding. */
static DI_INLINE void block_q2_k(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q2_K), dmin = load_f16(b + DI_OFF_M_Q2_K);
    const uint8_t *s = b + DI_OFF_SC_Q2_K;
    for (int g = 0; g < 16; g++) {
        const float dl = d * (float)(s[g] & 0xf), ml = dmin * (float)(s[g] >> 4);
        const uint8_t *qs = b + DI_OFF_QS_Q2_K + 32 * (g / 8);
        const int shift = 2 * ((g % 8) / 2);
        for (int l = 16 * (g % 2); l < 16 * (g % 2) + 16; l++)
            y[16 * g + l - 16 * (g % 2)] = dl * (float)((qs[l] >> shift) & 3) - ml;
    }
}

/* Q3_K, 110 bytes: hmask[32], qs[64], scales[12], d. Weights 16g..16g+15
 * share the 6-bit scale g, whose low nibble is nibble g / 8 of scales[g % 8]
 * and top two bits bits 2 (g / 4).. of scales[8 + g % 4]. Weight i's two low
 * bits come from qs as in Q2_K, its third from bit i / 32 of hmask[i % 32];
 * q = (lo | hi << 2) - 4. w = (d * (sc - 32)) * q: exact. */
static DI_INLINE void block_q3_k(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q3_K);
    const uint8_t *s = b + DI_OFF_SC_Q3_K, *hmask = b + DI_OFF_QH_Q3_K;
    for (int g = 0; g < 16; g++) {
        const int sc = ((s[g % 8] >> (4 * (g / 8))) & 0xf) | ((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4;
        const float dl = d * (float)(sc - 32);
        const uint8_t *qs = b + DI_OFF_QS_Q3_K + 32 * (g / 8);
        const int shift = 2 * ((g % 8) / 2), hbit = g / 2;
        for (int l = 16 * (g % 2); l < 16 * (g % 2) + 16; l++) {
            const int q = (((qs[l] >> shift) & 3) | ((hmask[l] >> hbit) & 1) << 2) - 4;
            y[16 * g + l - 16 * (g % 2)] = dl * (float)q;
        }
    }
}

/* Q4_K and Q5_K share everything but the fifth bit: sub-block j (32 weights)
 * takes nibble (j % 2) of bytes qs[32*(j/2) .. +31], and in Q5_K bit j of
 * qh[l] for its weight l. w = (d * sc) * q - (dmin * m): the three products
 * are exact, the subtraction rounds once. qh is NULL for Q4_K. */
static DI_INLINE void block_k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q4_K), dmin = load_f16(b + DI_OFF_M_Q4_K); /* Q5_K: the same */
    for (int j = 0; j < 8; j++) {
        int sc, m;
        di_qb_k_scale_min(b + DI_OFF_SC_Q4_K, j, &sc, &m);
        const float dl = d * (float)sc, ml = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> shift) & 0xf;
            if (qh)
                v |= ((qh[l] >> j) & 1) << 4;
            y[32 * j + l] = dl * (float)v - ml;
        }
    }
}

/* Q4_K, 144 bytes: d, dmin, scales[12], qs[128]. */
static DI_INLINE void block_q4_k(const uint8_t *b, float *y)
{
    block_k(b, NULL, b + DI_OFF_QS_Q4_K, y);
}

/* Q5_K, 176 bytes: d, dmin, scales[12], qh[32], qs[128]. */
static DI_INLINE void block_q5_k(const uint8_t *b, float *y)
{
    block_k(b, b + DI_OFF_QH_Q5_K, b + DI_OFF_QS_Q5_K, y);
}

/* Q6_K, 210 bytes: ql[128], qh[64], int8 scales[16], d. Each half of 128
 * weights uses 64 bytes of ql and 32 of qh; its quarter k (32 weights)
 * takes nibble k / 2 of ql[32 * (k % 2) + l] and bits 2k..2k+1 of qh[l].
 * Weight i has scale scales[i / 16]. w = (d * sc) * (q - 32): exact. */
static DI_INLINE void block_q6_k(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_Q6_K);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + DI_OFF_QS_Q6_K + 64 * h, *qh = b + DI_OFF_QH_Q6_K + 32 * h;
        for (int k = 0; k < 4; k++) {
            const uint8_t *lo = ql + 32 * (k % 2);
            const int shift = 4 * (k / 2);
            for (int half = 0; half < 2; half++) { /* 16 weights share a scale */
                const int i0 = 128 * h + 32 * k + 16 * half;
                const float dl = d * (float)(int8_t)b[DI_OFF_SC_Q6_K + i0 / 16];
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    const int q = ((lo[l] >> shift) & 0xf) | ((qh[l] >> (2 * k)) & 3) << 4;
                    y[128 * h + 32 * k + l] = dl * (float)(q - 32);
                }
            }
        }
    }
}

/* IQ4_XS, 136 bytes: d, scales_h (u16), scales_l[4], qs[128]. Sub-block s
 * (32 weights) has the 6-bit scale nibble s % 2 of scales_l[s / 2] | bits
 * 2s..2s+1 of scales_h << 4, and its nibbles in qs[16s..] as a Q4_0 block.
 * w = (d * (sc - 32)) * value(q): exact. */
static DI_INLINE void block_iq4_xs(const uint8_t *b, float *y)
{
    const float d = load_f16(b + DI_OFF_D_IQ4_XS);
    for (int s = 0; s < 8; s++) {
        const float dl = d * (float)(di_qb_iq4_xs_scale(b, s) - 32);
        const uint8_t *qs = b + DI_OFF_QS_IQ4_XS + 16 * s;
        for (int j = 0; j < 16; j++) {
            y[32 * s + j] = dl * (float)IQ4NL_VALUES[qs[j] & 0xf];
            y[32 * s + j + 16] = dl * (float)IQ4NL_VALUES[qs[j] >> 4];
        }
    }
}

/* ---- rows -------------------------------------------------------------------- */

/* Converts the row block by block, with the layout of type T in the table
 * of weight_types.h. A macro rather than a function taking a function
 * pointer, so each block function is inlined into every clone of
 * di_dequant_row at any optimisation level. */
#define CONVERT_BLOCKS(block_fn, T)                                              \
    for (uint32_t b = 0; b < n / DI_BLOCK_ELEMS_##T; b++)                        \
        block_fn(row + (size_t)b * DI_BLOCK_BYTES_##T, out + (size_t)b * DI_BLOCK_ELEMS_##T)

DI_CLONES void di_dequant_row(uint32_t type, const uint8_t *row, uint32_t n, float *out)
{
    switch (type) {
    case DI_TYPE_F32:
        for (uint32_t i = 0; i < n; i++)
            out[i] = di_float_from_bits(load_u32(row + 4 * (size_t)i));
        break;
    case DI_TYPE_F16:
        for (uint32_t i = 0; i < n; i++)
            out[i] = di_f16_to_f32(load_u16(row + 2 * (size_t)i));
        break;
    case DI_TYPE_BF16:
        for (uint32_t i = 0; i < n; i++)
            out[i] = di_bf16_to_f32(load_u16(row + 2 * (size_t)i));
        break;
    case DI_TYPE_Q4_0: CONVERT_BLOCKS(block_q4_0, Q4_0); break;
    case DI_TYPE_Q4_1: CONVERT_BLOCKS(block_q4_1, Q4_1); break;
    case DI_TYPE_Q5_0: CONVERT_BLOCKS(block_q5_0, Q5_0); break;
    case DI_TYPE_Q5_1: CONVERT_BLOCKS(block_q5_1, Q5_1); break;
    case DI_TYPE_Q8_0: CONVERT_BLOCKS(block_q8_0, Q8_0); break;
    case DI_TYPE_IQ4_NL: CONVERT_BLOCKS(block_iq4_nl, IQ4_NL); break;
    case DI_TYPE_Q2_K: CONVERT_BLOCKS(block_q2_k, Q2_K); break;
    case DI_TYPE_Q3_K: CONVERT_BLOCKS(block_q3_k, Q3_K); break;
    case DI_TYPE_Q4_K: CONVERT_BLOCKS(block_q4_k, Q4_K); break;
    case DI_TYPE_Q5_K: CONVERT_BLOCKS(block_q5_k, Q5_K); break;
    case DI_TYPE_Q6_K: CONVERT_BLOCKS(block_q6_k, Q6_K); break;
    case DI_TYPE_IQ4_XS: CONVERT_BLOCKS(block_iq4_xs, IQ4_XS); break;
    default: /* a type without a compute path: the loader admits none */
        memset(out, 0, (size_t)n * sizeof(float));
        break;
    }
}
