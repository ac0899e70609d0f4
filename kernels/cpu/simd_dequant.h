/*
 * simd_dequant.h — weights as float32 on a SIMD path: 32 weights of a
 * row in registers (dq32, dq_k_sub) and whole rows (dequant_row_typed),
 * the same values as dequant.c.
 *
 * Not a normal header: it defines static functions over the vector words of
 * the path that includes it (simd_path.h says how).
 */

/* ---- 32 weights of a row ------------------------------------------------------ */

/* The integer weights of a block are first gathered as 32 bytes (one per
 * weight, in lane order: x86_codes.h, the integer path's decoder too), then
 * widened VL at a time by vi_from_bytes and converted; the float arithmetic
 * that follows is the scalar code's. */
#include "kernels/common/dequant_blocks.h" /* di_qb_plain: the float types' tails */
#include "kernels/cpu/x86_codes.h"

/* What all sub-blocks of a super-block (256 weights) share: its binary16
 * fields d and dmin (0 for the types without one), and for Q4_K, Q5_K and
 * Q6_K the sub-blocks' factors, computed once in plain loops the compiler
 * vectorizes (the same single roundings as per sub-block): dl[g] = d * scale
 * g (Q6_K: 16 int8 scales; Q4_K, Q5_K: 8 six-bit scales), ml[g] = dmin * min g.
 * Per sub-block they then cost a broadcast load instead of a scalar
 * convert, multiply and register broadcast each. */
typedef struct sb_factors {
    float d, dmin;
    float dl[16], ml[8];
} sb_factors;

static DI_INLINE void superblock_factors(uint32_t type, const uint8_t *b, sb_factors *f)
{
    const int d_at = di_weight_field(type, DI_FIELD_D), m_at = di_weight_field(type, DI_FIELD_M);
    f->d = load_f16_at(b + d_at);
    f->dmin = m_at >= 0 ? load_f16_at(b + m_at) : 0.0f;
    const uint8_t *scales = b + di_weight_field(type, DI_FIELD_SC);
    if (type == DI_TYPE_Q6_K) {
        for (int g = 0; g < 16; g++)
            f->dl[g] = f->d * (float)(int8_t)scales[g];
    } else if (type == DI_TYPE_Q4_K || type == DI_TYPE_Q5_K) {
        int sc[8], mn[8]; /* dequant_blocks.h decodes the 12 packed bytes */
        for (int j = 0; j < 8; j++)
            di_qb_k_scale_min(scales, j, &sc[j], &mn[j]);
        for (int j = 0; j < 8; j++) {
            f->dl[j] = f->d * (float)sc[j];
            f->ml[j] = f->dmin * (float)mn[j];
        }
    }
}

/* Sub-block `sub` (32 weights; a constant in every call, so shifts and scale
 * positions are immediates) of the super-block at b, whose shared fields the
 * caller prepared once for all eight (superblock_factors). Register j holds weights
 * j * VL.. of the sub-block; in the types with a scale per 16 weights it
 * takes scale 2 * sub + j * VL / 16. */
static DI_INLINE void dq_k_sub(uint32_t type, const uint8_t *b, int sub, const sb_factors *f, vf *w)
{
    const float d = f->d, dmin = f->dmin;
    if (type == DI_TYPE_Q6_K) {
        const __m256i q = x86_codes_Q6_K(b, sub);
        UNROLL for (int j = 0; j < NV; j++) {
            const vf dl = vf_set1(f->dl[2 * sub + j * VL / 16]);
            w[j] = vf_mul(dl, vi_to_float(vi_from_bytes(q, j)));
        }
        return;
    }
    if (type == DI_TYPE_Q2_K) {
        const __m256i q = x86_codes_Q2_K(b, sub);
        UNROLL for (int j = 0; j < NV; j++) {
            const int sm = b[DI_OFF_SC_Q2_K + 2 * sub + j * VL / 16];
            const vf dl = vf_set1(d * (float)(sm & 0xf)), ml = vf_set1(dmin * (float)(sm >> 4));
            w[j] = vf_sub(vf_mul(dl, vi_to_float(vi_from_bytes(q, j))), ml);
        }
        return;
    }
    if (type == DI_TYPE_Q3_K) {
        const __m256i q = x86_codes_Q3_K(b, sub);
        UNROLL for (int j = 0; j < NV; j++) {
            const int sc = di_qb_q3_k_scale(b + DI_OFF_SC_Q3_K, 2 * sub + j * VL / 16);
            w[j] = vf_mul(vf_set1(d * (float)(sc - 32)), vi_to_float(vi_from_bytes(q, j)));
        }
        return;
    }
    if (type == DI_TYPE_IQ4_XS) {
        const vf dl = vf_set1(d * (float)(di_qb_iq4_xs_scale(b, sub) - 32));
        const __m256i q = x86_codes_IQ4_XS(b, sub);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_mul(dl, vi_to_float(vi_from_bytes(q, j)));
        return;
    }
    /* Q4_K, Q5_K: the nibbles are read VL at a time straight into int32
     * lanes (one zero-extending load each), not gathered as 32 bytes and
     * widened: decode, which converts every weight for one token, spends
     * most of its instructions here */
    const int is_q5 = type == DI_TYPE_Q5_K;
    const vf dl = vf_set1(f->dl[sub]), ml = vf_set1(f->ml[sub]);
    const uint8_t *qs = b + (is_q5 ? DI_OFF_QS_Q5_K : DI_OFF_QS_Q4_K) + 32 * (sub / 2);
#if VL == 16
    if (!is_q5) {
        /* Q4_K with 16 lanes: the sub-block's 16 possible weights, computed
         * once as (dl * q) - ml for q = 0..15, are picked by the nibbles
         * (vpermps reads an index's low 4 bits, so the low nibble needs no
         * mask): the same values as computing each, in fewer instructions */
        const vf table = vf_sub(vf_mul(dl, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)), ml);
        UNROLL for (int j = 0; j < NV; j++) {
            const vi bytes = vi_u8(qs + j * VL);
            w[j] = _mm512_permutexvar_ps(sub % 2 ? vi_srli(bytes, 4) : bytes, table);
        }
        return;
    }
#endif
    UNROLL for (int j = 0; j < NV; j++) {
        const vi bytes = vi_u8(qs + j * VL);
        vi q = sub % 2 ? vi_srli(bytes, 4) : vi_and(bytes, vi_set1(0xf));
        if (is_q5)
            q = vi_add(q, vi_slli(vi_and(vi_srli(vi_u8(b + DI_OFF_QH_Q5_K + j * VL), sub), vi_set1(1)), 4));
        w[j] = vf_sub(vf_mul(dl, vi_to_float(q)), ml);
    }
}

/* 1 for the types stored in 256-weight super-blocks (weight_types.h). */
#define IS_K_TYPE(type) (di_weight_block_elems(type) == 256)

/* 32-block `blk` of a quantized or float row as float32 in w[0..NV), the
 * same values dequant.c produces (docs/QUANTS.md). */
static DI_INLINE void dq32(uint32_t type, const uint8_t *row, uint32_t blk, vf *w)
{
    switch (type) {
    case DI_TYPE_F32:
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_load((const float *)(const void *)(row + 128 * (size_t)blk) + j * VL);
        break;
    case DI_TYPE_F16:
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_f16(row + 64 * (size_t)blk + 2 * j * VL);
        break;
    case DI_TYPE_BF16:
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_bf16(row + 64 * (size_t)blk + 2 * j * VL);
        break;
    case DI_TYPE_Q8_0: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q8_0 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q8_0);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_mul(d, vi_to_float(vi_i8(b + DI_OFF_QS_Q8_0 + j * VL)));
        break;
    }
    case DI_TYPE_Q4_0: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q4_0 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q4_0);
        const __m256i q = x86_codes_Q4_0(b, 0);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_mul(d, vi_to_float(vi_from_bytes(q, j)));
        break;
    }
    case DI_TYPE_Q4_1: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q4_1 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q4_1), m = broadcast_f16_at(b + DI_OFF_M_Q4_1);
        const __m256i q = x86_codes_Q4_1(b, 0);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_add(vf_mul(d, vi_to_float(vi_from_bytes(q, j))), m);
        break;
    }
    case DI_TYPE_Q5_0: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q5_0 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q5_0);
        const __m256i q = x86_codes_Q5_0(b, 0);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_mul(d, vi_to_float(vi_from_bytes(q, j)));
        break;
    }
    case DI_TYPE_Q5_1: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q5_1 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q5_1), m = broadcast_f16_at(b + DI_OFF_M_Q5_1);
        const __m256i q = x86_codes_Q5_1(b, 0);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_add(vf_mul(d, vi_to_float(vi_from_bytes(q, j))), m);
        break;
    }
    case DI_TYPE_IQ4_NL: {
        const uint8_t *b = row + DI_BLOCK_BYTES_IQ4_NL * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_IQ4_NL);
        const __m256i q = x86_codes_IQ4_NL(b, 0);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_mul(d, vi_to_float(vi_from_bytes(q, j)));
        break;
    }
    case DI_TYPE_Q2_K:
    case DI_TYPE_Q3_K:
    case DI_TYPE_Q4_K:
    case DI_TYPE_Q5_K:
    case DI_TYPE_Q6_K:
    case DI_TYPE_IQ4_XS: {
        const uint8_t *b = row + di_weight_block_bytes(type) * (size_t)(blk / 8);
        sb_factors f;
        superblock_factors(type, b, &f);
        dq_k_sub(type, b, (int)(blk % 8), &f, w);
        break;
    }
    default:
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_zero(); /* the loader admits no other type */
        break;
    }
}

/* Bytes of 32 weights of a type whose blocks hold 1 or 32 (weight_types.h). */
static inline size_t block32_bytes(uint32_t type)
{
    return (size_t)di_weight_block_bytes(type) * 32 / di_weight_block_elems(type);
}

/* Converts a whole row to float32, the same values dq32 gives, with `type`
 * a constant in each call (TYPE_BODY below). A K-type super-block is
 * converted as dot_tile converts it: its binary16 scales once, its eight
 * sub-blocks unrolled so that their shifts and scale positions are
 * immediates; block by block through dq32, a batched step spent a third of
 * its instructions here. The row is requested ahead like dot_tile's. */
static DI_INLINE void dequant_row_typed(uint32_t type, const uint8_t *row, uint32_t n, float *out)
{
    if (IS_K_TYPE(type)) { /* n is a multiple of 256, as dot_tile assumes */
        const size_t sb_bytes = di_weight_block_bytes(type);
        for (uint32_t sb = 0; sb < n / 256; sb++) {
            const uint8_t *b = row + sb * sb_bytes;
            sb_factors f;
            prefetch_ahead(b, sb_bytes);
            superblock_factors(type, b, &f);
            UNROLL for (int sub = 0; sub < 8; sub++) {
                vf w[NV];
                dq_k_sub(type, b, sub, &f, w);
                UNROLL for (int j = 0; j < NV; j++)
                    vf_store(out + (size_t)sb * 256 + 32 * sub + j * VL, w[j]);
            }
        }
        return;
    }
    for (uint32_t blk = 0; blk < n / 32; blk++) {
        vf w[NV];
        prefetch_ahead(row + blk * block32_bytes(type), block32_bytes(type));
        dq32(type, row, blk, w);
        UNROLL for (int j = 0; j < NV; j++)
            vf_store(out + (size_t)blk * 32 + j * VL, w[j]);
    }
    for (uint32_t i = n - n % 32; i < n; i++)
        out[i] = di_qb_plain(type, row, i);
}
