/*
 * cpu_simd_body.h — the kernels of a SIMD path, written once over the vector
 * words that cpu_avx2.c and cpu_avx512.c define (vf: VL floats, vi: VL int32)
 * and included by each. Not a normal header: it defines the path's functions.
 *
 * Every kernel performs, lane for lane, the operations of the scalar
 * reference (cpu_kernels.c, dequant.c, numerics.h) in the same order: the 32
 * lanes of the canonical reduction are DI_LANES / VL registers, a weight
 * block of 32 fills them exactly, and each lane adds its terms with one fused
 * multiply-add per term in increasing order. Only the instructions differ,
 * never the arithmetic, so the results are the same bits (NaN payloads
 * aside: the session makes every NaN logit one canonical NaN).
 */
#include <math.h>
#include <string.h>

#include "canon_order.h"
#include "cpu_clones.h"
#include "cpu_kernels.h"
#include "dequant_blocks.h"
#include "numerics.h"
#include "weight_types.h"

#define NV (DI_LANES / VL) /* registers per 32-lane vector */

/* Shapes of the matrix kernels: rows sharing each token load, and tokens
 * sharing each weight load, chosen so the accumulators stay in registers.
 * DIRECT_ROWS for rows converted in registers (few tokens), TILE_ROWS for
 * rows of a converted float32 tile (many tokens): with AVX-512, 3 x 4 x 2
 * accumulators and 3 + 1 operands of the 32 registers (measured against
 * 2 x 5, 2 x 6, 4 x 3 and 1 x 12: all slower). ROWS_MAX bounds both. */
#if VL == 16
#define DIRECT_ROWS 2
#define TILE_ROWS 3
#define ROWS_MAX 3
#define TOKENS_MAX 4
#else
#define DIRECT_ROWS 1
#define TILE_ROWS 1
#define ROWS_MAX 1
#define TOKENS_MAX 3
#endif

#define UNROLL _Pragma("GCC unroll 16")

/* ---- little helpers ---------------------------------------------------------- */

/* A binary16 scale by the F16C instruction: exact, like di_f16_to_f32, for
 * every value but a signalling NaN, which it quiets (NaN stays NaN). */
static inline float load_f16_at(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* A binary16 block scale broadcast to every lane: normal numbers (every
 * real scale) are rebiased with integer operations and broadcast from a
 * general register, which spares the shuffle unit two of its three
 * operations; the rest go through load_f16_at. Exact either way. */
static DI_INLINE vf broadcast_f16_at(const uint8_t *p)
{
    const uint32_t h = (uint32_t)(p[0] | (p[1] << 8)), e = h & 0x7c00u;
    if (e != 0 && e != 0x7c00u)
        return vf_from_bits(vi_set1((int)(((h & 0x8000u) << 16) | (((h & 0x7fffu) << 13) + 0x38000000u))));
    return vf_set1(load_f16_at(p));
}

static inline uint32_t load_u32_at(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v); /* x86 is little-endian, like the file */
    return v;
}

/* dst[i] = a[i] + b[i] */
static void simd_add(float *dst, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL)
        vf_store(dst + i, vf_add(vf_load(a + i), vf_load(b + i)));
    for (; i < n; i++)
        dst[i] = a[i] + b[i];
}

/* e^x lane by lane: di_expf of numerics.h, operation for operation. */
static DI_INLINE vf vf_expf(vf x)
{
    const vf k = vf_rint(vf_mul(x, vf_set1(1.44269504088896341f)));
    const vf nk = vf_neg(k);
    vf r = vf_fma(nk, vf_set1(0.693145751953125f), x);
    r = vf_fma(nk, vf_set1(1.42860682030941723212e-6f), r);
    vf p = vf_set1(1.0f / 5040.0f);
    p = vf_fma(p, r, vf_set1(1.0f / 720.0f));
    p = vf_fma(p, r, vf_set1(1.0f / 120.0f));
    p = vf_fma(p, r, vf_set1(1.0f / 24.0f));
    p = vf_fma(p, r, vf_set1(1.0f / 6.0f));
    p = vf_fma(p, r, vf_set1(0.5f));
    p = vf_fma(p, r, vf_set1(1.0f));
    p = vf_fma(p, r, vf_set1(1.0f));
    const vi ki = vf_to_int(k);
    const vi k1 = vi_srai(vi_add(ki, vi_srli(ki, 31)), 1); /* ki / 2, rounded toward 0 */
    const vi k2 = vi_sub(ki, k1);
    const vf s1 = vf_from_bits(vi_slli(vi_add(k1, vi_set1(127)), 23));
    const vf s2 = vf_from_bits(vi_slli(vi_add(k2, vi_set1(127)), 23));
    vf res = vf_mul(vf_mul(p, s1), s2);
    res = vf_sel_gt(res, x, vf_set1(88.8f), vf_set1(INFINITY));
    res = vf_sel_lt(res, x, vf_set1(-104.0f), vf_zero());
    return vf_sel_nan(res, x);
}

/* tanh lane by lane: di_tanhf of numerics.h, operation for operation (both
 * branches computed, the scalar one's chosen per lane). */
static DI_INLINE vf vf_tanhf(vf x)
{
    const vf a = vf_sel_lt(x, x, vf_zero(), vf_neg(x)); /* |x| (-0 stays -0: only compared) */
    const vf z = vf_mul(x, x);
    vf p = vf_set1(5.9002744094558598e-4f);
    p = vf_fma(p, z, vf_set1(-1.4558343870513183e-3f));
    p = vf_fma(p, z, vf_set1(3.5921280365724810e-3f));
    p = vf_fma(p, z, vf_set1(-8.8632355299021966e-3f));
    p = vf_fma(p, z, vf_set1(2.1869488536155203e-2f));
    p = vf_fma(p, z, vf_set1(-5.3968253968253968e-2f));
    p = vf_fma(p, z, vf_set1(1.3333333333333333e-1f));
    p = vf_fma(p, z, vf_set1(-3.3333333333333333e-1f));
    const vf small = vf_fma(vf_mul(x, z), p, x);
    const vf e = vf_expf(vf_mul(vf_set1(-2.0f), a));
    vf t = vf_div(vf_sub(vf_set1(1.0f), e), vf_add(vf_set1(1.0f), e));
    t = vf_sel_lt(t, x, vf_zero(), vf_neg(t));
    vf res = vf_sel_lt(t, a, vf_set1(0.55f), small);
    res = vf_sel_lt(res, a, vf_set1(1.40129846e-45f), x); /* +-0 unchanged */
    return vf_sel_nan(res, x);
}

/* ---- 32 weights of a row ------------------------------------------------------ */

/* Weight i of a float row (F32, F16, BF16), for the tails those types allow. */
static inline float float_weight(uint32_t type, const uint8_t *row, uint32_t i)
{
    if (type == DI_TYPE_F16)
        return load_f16_at(row + 2 * (size_t)i);
    if (type == DI_TYPE_BF16)
        return di_bf16_to_f32((uint16_t)(row[2 * (size_t)i] | (row[2 * (size_t)i + 1] << 8)));
    return di_float_from_bits(load_u32_at(row + 4 * (size_t)i));
}

/* The integer weights of a block are first gathered as 32 bytes (one per
 * weight, in lane order) with 256-bit byte operations, then widened VL at a
 * time by vi_from_bytes and converted; the float arithmetic that follows is
 * the scalar code's. */

/* 4-bit values of a 32-block whose byte j holds weight j (low nibble) and
 * weight j + 16 (high nibble). */
static DI_INLINE __m256i nibbles32(const uint8_t *qs)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low4), _mm_and_si128(b, low4));
}

/* The bytes of p shifted right by `shift` bits (0..7), masked to `mask`. */
static DI_INLINE __m256i bits_at(const uint8_t *p, int shift, int mask)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8((char)mask));
}

/* The signed bytes IQ4NL_VALUES[q] of 32 4-bit codes (one a byte). */
static DI_INLINE __m256i iq4nl_values32(__m256i codes)
{
    const __m128i values = _mm_setr_epi8(DI_IQ4NL_VALUES);
    return _mm256_shuffle_epi8(_mm256_set_m128i(values, values), codes);
}

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
    const int h = sub / 4, k = sub % 4; /* the 2-bit and 6-bit types: half, quarter */
    if (type == DI_TYPE_Q6_K) {
        const __m256i lo = bits_at(b + DI_OFF_QS_Q6_K + 64 * h + 32 * (k % 2), 4 * (k / 2), 0xf);
        const __m256i hi = _mm256_slli_epi16(bits_at(b + DI_OFF_QH_Q6_K + 32 * h, 2 * k, 3), 4);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
        UNROLL for (int j = 0; j < NV; j++) {
            const vf dl = vf_set1(f->dl[2 * sub + j * VL / 16]); /* scale 8 h + 2 k + j VL / 16 */
            w[j] = vf_mul(dl, vi_to_float(vi_from_bytes(q, j)));
        }
        return;
    }
    if (type == DI_TYPE_Q2_K) {
        const __m256i q = bits_at(b + DI_OFF_QS_Q2_K + 32 * h, 2 * k, 3);
        UNROLL for (int j = 0; j < NV; j++) {
            const int sm = b[DI_OFF_SC_Q2_K + 2 * sub + j * VL / 16];
            const vf dl = vf_set1(d * (float)(sm & 0xf)), ml = vf_set1(dmin * (float)(sm >> 4));
            w[j] = vf_sub(vf_mul(dl, vi_to_float(vi_from_bytes(q, j))), ml);
        }
        return;
    }
    if (type == DI_TYPE_Q3_K) {
        const __m256i lo = bits_at(b + DI_OFF_QS_Q3_K + 32 * h, 2 * k, 3);
        const __m256i hi = _mm256_slli_epi16(bits_at(b + DI_OFF_QH_Q3_K, sub, 1), 2);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(4));
        UNROLL for (int j = 0; j < NV; j++) {
            const int sc = di_qb_q3_k_scale(b + DI_OFF_SC_Q3_K, 2 * sub + j * VL / 16);
            w[j] = vf_mul(vf_set1(d * (float)(sc - 32)), vi_to_float(vi_from_bytes(q, j)));
        }
        return;
    }
    if (type == DI_TYPE_IQ4_XS) {
        const vf dl = vf_set1(d * (float)(di_qb_iq4_xs_scale(b, sub) - 32));
        const __m256i q = iq4nl_values32(nibbles32(b + DI_OFF_QS_IQ4_XS + 16 * sub));
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
        const __m256i q = _mm256_sub_epi8(nibbles32(b + DI_OFF_QS_Q4_0), _mm256_set1_epi8(8));
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_mul(d, vi_to_float(vi_from_bytes(q, j)));
        break;
    }
    case DI_TYPE_Q4_1: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q4_1 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q4_1), m = broadcast_f16_at(b + DI_OFF_M_Q4_1);
        const __m256i q = nibbles32(b + DI_OFF_QS_Q4_1);
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_add(vf_mul(d, vi_to_float(vi_from_bytes(q, j))), m);
        break;
    }
    case DI_TYPE_Q5_0: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q5_0 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q5_0);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles32(b + DI_OFF_QS_Q5_0),
                                                          sixteen_where_bits(load_u32_at(b + DI_OFF_QH_Q5_0))),
                                          _mm256_set1_epi8(16));
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_mul(d, vi_to_float(vi_from_bytes(q, j)));
        break;
    }
    case DI_TYPE_Q5_1: {
        const uint8_t *b = row + DI_BLOCK_BYTES_Q5_1 * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_Q5_1), m = broadcast_f16_at(b + DI_OFF_M_Q5_1);
        const __m256i q = _mm256_or_si256(nibbles32(b + DI_OFF_QS_Q5_1), sixteen_where_bits(load_u32_at(b + DI_OFF_QH_Q5_1)));
        UNROLL for (int j = 0; j < NV; j++)
            w[j] = vf_add(vf_mul(d, vi_to_float(vi_from_bytes(q, j))), m);
        break;
    }
    case DI_TYPE_IQ4_NL: {
        const uint8_t *b = row + DI_BLOCK_BYTES_IQ4_NL * (size_t)blk;
        const vf d = broadcast_f16_at(b + DI_OFF_D_IQ4_NL);
        const __m256i q = iq4nl_values32(nibbles32(b + DI_OFF_QS_IQ4_NL));
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

/* ---- the canonical dot products of R rows with T tokens ----------------------- */

/* Weights are requested from memory this many bytes ahead of the block being
 * converted. Decode streams every weight once, and the hardware prefetchers
 * alone left a third of the bandwidth unused: Gemma 3 270M's Q8_0 output
 * matrix took 26 ms per token on one core without this, 16 ms with it. */
#define PREFETCH_AHEAD 4096u

/* Requests the cache lines of bytes [p + PREFETCH_AHEAD, + bytes); a
 * prefetch never faults, so running past the matrix is harmless. */
static inline void prefetch_ahead(const uint8_t *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(uintptr_t)((uintptr_t)p + PREFETCH_AHEAD + o), _MM_HINT_T0);
}

/* Bytes of 32 weights of a type whose blocks hold 1 or 32 (weight_types.h). */
static inline size_t block32_bytes(uint32_t type)
{
    return (size_t)di_weight_block_bytes(type) * 32 / di_weight_block_elems(type);
}

/* acc[r][t] += w[r] * x[t] lane by lane, for one 32-term block. Each token
 * word is loaded once into a register for its R rows (the empty asm keeps
 * the compiler from folding the load into every fma, which made the loads,
 * not the multiply-adds, the bound). */
static DI_INLINE void fma_block(vf w[][NV], int R, const float *x, size_t xs, int T,
                                vf acc[][TOKENS_MAX][NV])
{
    UNROLL for (int t = 0; t < T; t++)
        UNROLL for (int j = 0; j < NV; j++) {
            vf xv = vf_load(x + t * xs + j * VL);
            if (R > 1)
                __asm__("" : "+v"(xv));
            UNROLL for (int r = 0; r < R; r++)
                acc[r][t][j] = vf_fma(w[r][j], xv, acc[r][t][j]);
        }
}

/*
 * acc[r][t] = the lanes of chunk [c0, end) (at most DI_CHUNK terms, from
 * +0, one fma per term in increasing order) of row r (rows[r], of type) with
 * x + t * xs, for r < R, t < T. Weights past the last whole 32-block (float
 * types only) are done lane by lane with fmaf, in the same order. `stream`:
 * the rows come from the model in memory (prefetch them), not from a scratch.
 */
static DI_INLINE void chunk_lanes(uint32_t type, const uint8_t *const *rows, int R, uint32_t c0,
                                  uint32_t end, const float *x, size_t xs, int T, int stream,
                                  vf acc[][TOKENS_MAX][NV])
{
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++)
            UNROLL for (int j = 0; j < NV; j++)
                acc[r][t][j] = vf_zero();
    if (IS_K_TYPE(type)) { /* super-blocks never straddle a chunk (1024 = 4 x 256) */
        const size_t sb_bytes = di_weight_block_bytes(type);
        for (uint32_t sb = c0 / 256; sb < end / 256; sb++) {
            const uint8_t *b[ROWS_MAX];
            sb_factors f[ROWS_MAX];
            UNROLL for (int r = 0; r < R; r++) {
                b[r] = rows[r] + sb * sb_bytes;
                if (stream)
                    prefetch_ahead(b[r], sb_bytes);
                superblock_factors(type, b[r], &f[r]);
            }
            UNROLL for (int sub = 0; sub < 8; sub++) {
                vf w[ROWS_MAX][NV];
                UNROLL for (int r = 0; r < R; r++)
                    dq_k_sub(type, b[r], sub, &f[r], w[r]);
                fma_block(w, R, x + (size_t)sb * 256 + 32 * sub, xs, T, acc);
            }
        }
    } else {
        for (uint32_t blk = c0 / 32; blk < end / 32; blk++) {
            vf w[ROWS_MAX][NV];
            UNROLL for (int r = 0; r < R; r++) {
                if (stream)
                    prefetch_ahead(rows[r] + blk * block32_bytes(type), block32_bytes(type));
                dq32(type, rows[r], blk, w[r]);
            }
            fma_block(w, R, x + (size_t)blk * 32, xs, T, acc);
        }
    }
    if (end % 32) {
        UNROLL for (int r = 0; r < R; r++)
            UNROLL for (int t = 0; t < T; t++) {
                float lane[DI_LANES];
                UNROLL for (int j = 0; j < NV; j++)
                    vf_store(lane + j * VL, acc[r][t][j]);
                for (uint32_t i = end - end % 32; i < end; i++)
                    lane[i % 32] = fmaf(float_weight(type, rows[r], i), x[t * xs + i], lane[i % 32]);
                UNROLL for (int j = 0; j < NV; j++)
                    acc[r][t][j] = vf_load(lane + j * VL);
            }
    }
}

/*
 * out[r * out_stride + t * out_tstride] = canonical dot of row r (rows[r], of
 * type, n weights) with x + t * xs, for r < R, t < T: per chunk its lanes
 * (chunk_lanes), which go into the running totals (the first chunk's as they
 * are); the tree of lanes_tree ends it.
 */
static DI_INLINE void dot_tile(uint32_t type, const uint8_t *const *rows, int R, uint32_t n,
                               const float *x, size_t xs, int T, float *out, size_t out_stride,
                               size_t out_tstride, int stream)
{
    vf acc[ROWS_MAX][TOKENS_MAX][NV], tot[ROWS_MAX][TOKENS_MAX][NV];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++)
            UNROLL for (int j = 0; j < NV; j++)
                tot[r][t][j] = vf_zero(); /* n == 0 gives +0 */
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        chunk_lanes(type, rows, R, c0, di_chunk_end(n, c0), x, xs, T, stream, acc);
        UNROLL for (int r = 0; r < R; r++)
            UNROLL for (int t = 0; t < T; t++)
                UNROLL for (int j = 0; j < NV; j++)
                    tot[r][t][j] = c0 == 0 ? acc[r][t][j] : vf_add(tot[r][t][j], acc[r][t][j]);
    }
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++)
            out[r * out_stride + t * out_tstride] = lanes_tree(tot[r][t]);
}

static float simd_dot(const float *a, const float *b, uint32_t n)
{
    const uint8_t *row = (const uint8_t *)a;
    float out;
    dot_tile(DI_TYPE_F32, &row, 1, n, b, 0, 1, &out, 0, 0, 0);
    return out;
}

static float simd_sum(const float *x, uint32_t n)
{
    float tot[DI_LANES] = {0};
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = n - c0 < DI_CHUNK ? n : c0 + DI_CHUNK;
        vf acc[NV];
        UNROLL for (int j = 0; j < NV; j++)
            acc[j] = vf_zero();
        uint32_t i = c0;
        for (; i + DI_LANES <= end; i += DI_LANES)
            UNROLL for (int j = 0; j < NV; j++)
                acc[j] = vf_add(acc[j], vf_load(x + i + j * VL));
        float lane[DI_LANES];
        UNROLL for (int j = 0; j < NV; j++)
            vf_store(lane + j * VL, acc[j]);
        for (int l = 0; i < end; i++, l++)
            lane[l] = lane[l] + x[i];
        for (int l = 0; l < DI_LANES; l++)
            tot[l] = c0 == 0 ? lane[l] : tot[l] + lane[l];
    }
    return di_lane_tree(tot);
}

/* ---- matrix product ------------------------------------------------------------ */

/* A matrix as the product kernels read it: row r of output column col0 + r
 * starts at data + r * row_bytes. */
typedef struct rows_view {
    const uint8_t *data;
    size_t row_bytes;
    uint32_t n_in, n_out, col0;
    int stream; /* the model's weights (prefetched), not a converted tile */
} rows_view;

/* Rows [0, n_rows) of v against tokens t0..t0+T-1 (few tokens: each weight
 * block is converted once for all T), DIRECT_ROWS rows at a time. */
static DI_INLINE void rows_direct(uint32_t type, const rows_view *v, uint32_t n_rows,
                                  const float *x, uint32_t t0, int T, float *y)
{
    const float *xt = x + (size_t)t0 * v->n_in;
    float *yt = y + (size_t)t0 * v->n_out + v->col0;
    const int R = DIRECT_ROWS;
    uint32_t r = 0;
    for (; R > 1 && r + (uint32_t)R <= n_rows; r += (uint32_t)R) {
        const uint8_t *rows[ROWS_MAX];
        UNROLL for (int i = 0; i < R; i++)
            rows[i] = v->data + (size_t)(r + (uint32_t)i) * v->row_bytes;
        dot_tile(type, rows, R, v->n_in, xt, v->n_in, T, yt + r, 1, v->n_out, v->stream);
    }
    for (; r < n_rows; r++) {
        const uint8_t *row = v->data + (size_t)r * v->row_bytes;
        dot_tile(type, &row, 1, v->n_in, xt, v->n_in, T, yt + r, 1, v->n_out, v->stream);
    }
}

/* For t0 = 0, TOKENS_MAX, ... below n_tokens: CALL(t0, T) with T =
 * min(TOKENS_MAX, n_tokens - t0) a constant in each expansion, so the
 * kernels' loops over T unroll and their accumulators stay in registers. */
#if TOKENS_MAX >= 4
#define TOKEN_GROUP_CASES(CALL, t0) case 3: CALL(t0, 3); break; case 4: CALL(t0, 4); break;
#else
#define TOKEN_GROUP_CASES(CALL, t0) case 3: CALL(t0, 3); break;
#endif
#define FOR_EACH_TOKEN_GROUP(n_tokens, CALL)                                                  \
    for (uint32_t t0_ = 0; t0_ < (n_tokens); t0_ += TOKENS_MAX) {                            \
        switch ((n_tokens) - t0_ < TOKENS_MAX ? (n_tokens) - t0_ : TOKENS_MAX) {             \
        case 1: CALL(t0_, 1); break;                                                         \
        case 2: CALL(t0_, 2); break;                                                         \
        TOKEN_GROUP_CASES(CALL, t0_)                                                         \
        default: break;                                                                      \
        }                                                                                    \
    }

/* All tokens, TOKENS_MAX at a time. */
static DI_INLINE void matmul_direct(uint32_t type, const rows_view *v, uint32_t n_rows,
                                    const float *x, uint32_t n_tokens, float *y)
{
#define DIRECT_GROUP(t0, T) rows_direct(type, v, n_rows, x, t0, T, y)
    FOR_EACH_TOKEN_GROUP(n_tokens, DIRECT_GROUP)
#undef DIRECT_GROUP
}

/* Rows [r, r + R) of a converted tile (float32 rows of n) against T tokens
 * over chunk [c0, end): their lanes go into the running totals tot[r..]. */
static DI_INLINE void tile_chunk(const float *tile, uint32_t r, int R, uint32_t n, uint32_t c0,
                                 uint32_t end, const float *xt, int T, vf tot[][TOKENS_MAX][NV])
{
    const uint8_t *rows[ROWS_MAX];
    vf acc[ROWS_MAX][TOKENS_MAX][NV];
    UNROLL for (int i = 0; i < R; i++)
        rows[i] = (const uint8_t *)(tile + (size_t)(r + (uint32_t)i) * n);
    chunk_lanes(DI_TYPE_F32, rows, R, c0, end, xt, n, T, 0, acc);
    UNROLL for (int i = 0; i < R; i++)
        UNROLL for (int t = 0; t < T; t++)
            UNROLL for (int j = 0; j < NV; j++)
                tot[r + (uint32_t)i][t][j] = c0 == 0 ? acc[i][t][j] : vf_add(tot[r + (uint32_t)i][t][j], acc[i][t][j]);
}

/*
 * yt[t * n_out + r] = canonical dot of tile row r (float32 rows of n, r <
 * rows) with token t of xt (T tokens of n), the arithmetic of dot_tile, in
 * another loop order: chunk by chunk, every row of the tile passes over the
 * tokens' slice of the chunk (T * 4 KiB), which stays in the L1 cache, and
 * the rows' running totals wait in tot between chunks. dot_tile's order
 * (each row pair over the whole length) read the tokens from L2 again for
 * every row pair: prefill ran at about 30% of the multiply-add rate.
 */
static DI_INLINE void tile_tokens(const float *tile, uint32_t rows, uint32_t n, const float *xt, int T,
                                  float *yt, size_t n_out)
{
    vf tot[DI_MATMUL_TILE_ROWS][TOKENS_MAX][NV];
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(n, c0);
        uint32_t r = 0;
        for (; TILE_ROWS > 1 && r + TILE_ROWS <= rows; r += TILE_ROWS)
            tile_chunk(tile, r, TILE_ROWS, n, c0, end, xt, T, tot);
        for (; r < rows; r++)
            tile_chunk(tile, r, 1, n, c0, end, xt, T, tot);
    }
    for (uint32_t r = 0; r < rows; r++)
        UNROLL for (int t = 0; t < T; t++)
            yt[(size_t)t * n_out + r] = n == 0 ? 0.0f : lanes_tree(tot[r][t]);
}

/* The tile's rows against all tokens, TOKENS_MAX at a time:
 * y[t * n_out + col0 + r]. */
static void tile_product(const float *tile, uint32_t rows, uint32_t n, const float *x, uint32_t n_tokens,
                         float *y, uint32_t n_out, uint32_t col0)
{
#define TILE_GROUP(t0, T) tile_tokens(tile, rows, n, x + (size_t)(t0) * n, T, y + (size_t)(t0) * n_out + col0, n_out)
    FOR_EACH_TOKEN_GROUP(n_tokens, TILE_GROUP)
#undef TILE_GROUP
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
        out[i] = float_weight(type, row, i);
}

/* A switch on `type` whose case for each supported row of weight_types.h is
 * TYPE_BODY(that type as a constant); the caller defines TYPE_BODY. */
#define TYPE_CASE(name, id, elems, bytes, supported, ...) \
    DI_WT_IF_SUPPORTED(supported, case DI_TYPE_##name: TYPE_BODY(DI_TYPE_##name); break;)
#define FOR_EACH_TYPE(type)                                                              \
    switch (type) {                                                                      \
    DI_WEIGHT_TYPES(TYPE_CASE)                                                           \
    default: break;                                                                      \
    }

/*
 * Few tokens: every weight block is converted in registers and used by all
 * of them at once. Many tokens (prefill): tiles of DI_MATMUL_TILE_ROWS rows
 * are converted once into scratch, then multiplied as float32 rows against
 * the tokens TOKENS_MAX at a time, so each weight is read from memory once
 * per step. Both give every output its own canonical reduction.
 */
static void simd_matmul_rows(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                             uint32_t n_tokens, float *y, float *scratch)
{
    if (n_tokens <= TOKENS_MAX) {
        const rows_view v = {w->data + (size_t)r0 * w->row_bytes, w->row_bytes, w->n_in, w->n_out, r0, 1};
#define TYPE_BODY(T_) matmul_direct(T_, &v, r1 - r0, x, n_tokens, y)
        FOR_EACH_TYPE(w->type)
#undef TYPE_BODY
        return;
    }
    const uint32_t n_in = w->n_in;
    for (uint32_t tile = r0; tile < r1; tile += DI_MATMUL_TILE_ROWS) {
        const uint32_t rows = r1 - tile < DI_MATMUL_TILE_ROWS ? r1 - tile : DI_MATMUL_TILE_ROWS;
        for (uint32_t i = 0; i < rows; i++) {
            const uint8_t *row = w->data + (size_t)(tile + i) * w->row_bytes;
            float *out = scratch + (size_t)i * n_in;
#define TYPE_BODY(T_) dequant_row_typed(T_, row, n_in, out)
            FOR_EACH_TYPE(w->type)
#undef TYPE_BODY
        }
        tile_product(scratch, rows, n_in, x, n_tokens, y, w->n_out, tile);
    }
}

/* ---- row operations ---------------------------------------------------------------- */

static void simd_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out)
{
    const float s = di_rms_scale(simd_dot(x, x, n), n, eps);
    const vf scale = vf_set1(s);
    uint32_t i = 0;
    for (; i + VL <= n; i += VL)
        vf_store(out + i, vf_mul(vf_mul(vf_load(x + i), scale), vf_load(w + i)));
    for (; i < n; i++)
        out[i] = (x[i] * s) * w[i];
}

static void simd_rope(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot,
                      di_rope_pairing pairing, const float *cos_t, const float *sin_t)
{
    if (pairing != DI_ROPE_NEOX) { /* interleaved pairs: a negligible cost, left scalar */
        di_cpu_rope(v, n_heads, head_dim, n_rot, pairing, cos_t, sin_t);
        return;
    }
    const uint32_t half = n_rot / 2;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * head_dim;
        uint32_t i = 0;
        for (; i + VL <= half; i += VL) {
            const vf x0 = vf_load(x + i), x1 = vf_load(x + i + half);
            const vf c = vf_load(cos_t + i), s = vf_load(sin_t + i);
            vf_store(x + i, vf_sub(vf_mul(x0, c), vf_mul(x1, s)));
            vf_store(x + i + half, vf_add(vf_mul(x0, s), vf_mul(x1, c)));
        }
        for (; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            x[i] = x0 * cos_t[i] - x1 * sin_t[i];
            x[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
        }
    }
}

/* x[i] = di_softcap(x[i], cap) */
static void simd_softcap(float *x, size_t n, float cap)
{
    const vf c = vf_set1(cap);
    size_t i = 0;
    for (; i + VL <= n; i += VL)
        vf_store(x + i, vf_mul(c, vf_tanhf(vf_div(vf_load(x + i), c))));
    for (; i < n; i++)
        x[i] = di_softcap(x[i], cap);
}

static void simd_attention_head(const float *q, const float *k, const float *v, uint32_t kv_stride,
                                uint32_t n_keys, uint32_t head_dim, float scale, float softcap,
                                float *out, float *scratch)
{
    float *e = scratch;                                   /* [n_keys] */
    float *acc = scratch + n_keys;                        /* [DI_LANES][head_dim] */
    float *total = acc + (size_t)DI_LANES * head_dim;     /* [DI_LANES][head_dim] */
    const size_t lanes_size = (size_t)DI_LANES * head_dim;

    for (uint32_t j = 0; j < n_keys; j++)
        e[j] = simd_dot(q, k + (size_t)j * kv_stride, head_dim) * scale;
    if (softcap != 0.0f)
        simd_softcap(e, n_keys, softcap);
    float m = -INFINITY;
    for (uint32_t j = 0; j < n_keys; j++)
        if (e[j] > m)
            m = e[j];
    uint32_t j = 0;
    for (; j + VL <= n_keys; j += VL)
        vf_store(e + j, vf_expf(vf_sub(vf_load(e + j), vf_set1(m))));
    for (; j < n_keys; j++)
        e[j] = di_expf(e[j] - m);
    const float sum = simd_sum(e, n_keys);

    for (uint32_t c0 = 0; c0 < n_keys; c0 += DI_CHUNK) {
        const uint32_t end = n_keys - c0 < DI_CHUNK ? n_keys : c0 + DI_CHUNK;
        memset(acc, 0, lanes_size * sizeof(float));
        for (uint32_t jj = c0; jj < end; jj++) {
            float *lane = acc + (size_t)(jj % DI_LANES) * head_dim;
            const float *vj = v + (size_t)jj * kv_stride;
            const vf ej = vf_set1(e[jj]);
            uint32_t d = 0;
            for (; d + VL <= head_dim; d += VL)
                vf_store(lane + d, vf_fma(ej, vf_load(vj + d), vf_load(lane + d)));
            for (; d < head_dim; d++)
                lane[d] = fmaf(e[jj], vj[d], lane[d]);
        }
        if (c0 == 0)
            memcpy(total, acc, lanes_size * sizeof(float));
        else
            simd_add(total, total, acc, lanes_size);
    }
    /* the lane tree for every d at once: lane l += lane l + step */
    for (uint32_t step = DI_LANES / 2; step >= 1; step /= 2)
        for (uint32_t l = 0; l < step; l++)
            simd_add(total + (size_t)l * head_dim, total + (size_t)l * head_dim,
                            total + (size_t)(l + step) * head_dim, head_dim);
    uint32_t d = 0;
    for (; d + VL <= head_dim; d += VL)
        vf_store(out + d, vf_div(vf_load(total + d), vf_set1(sum)));
    for (; d < head_dim; d++)
        out[d] = total[d] / sum;
}

/* ---- elementwise -------------------------------------------------------------------- */

static void simd_silu_mul(float *gate, const float *up, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const vf x = vf_load(gate + i);
        const vf act = vf_div(x, vf_add(vf_set1(1.0f), vf_expf(vf_neg(x))));
        vf_store(gate + i, vf_mul(act, vf_load(up + i)));
    }
    for (; i < n; i++)
        gate[i] = di_silu(gate[i]) * up[i];
}

static void simd_gelu_mul(float *gate, const float *up, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const vf x = vf_load(gate + i);
        const vf x3 = vf_mul(vf_mul(x, x), x);
        const vf u = vf_mul(vf_set1(1.5957691216057308f), vf_add(x, vf_mul(vf_set1(0.044715f), x3)));
        const vf act = vf_div(x, vf_add(vf_set1(1.0f), vf_expf(vf_neg(u))));
        vf_store(gate + i, vf_mul(act, vf_load(up + i)));
    }
    for (; i < n; i++)
        gate[i] = di_gelu_tanh(gate[i]) * up[i];
}

/* Two passes: the largest non-NaN value, then its first index. Equal values
 * (+0 and -0 too) resolve to the lowest index, as in the scalar loop. */
static uint32_t simd_argmax(const float *x, uint32_t n)
{
    vf mv = vf_set1(-INFINITY);
    uint32_t i = 0;
    for (; i + VL <= n; i += VL)
        mv = vf_max_ordered(mv, vf_load(x + i));
    float m = vf_hmax(mv);
    for (; i < n; i++)
        if (x[i] > m)
            m = x[i];
    for (i = 0; i + VL <= n; i += VL) {
        const int l = vf_first_eq(x + i, m);
        if (l >= 0)
            return i + (uint32_t)l;
    }
    for (; i < n; i++)
        if (x[i] == m)
            return i;
    return 0; /* every value is NaN */
}

const di_cpu_ops SIMD_OPS = {
    .path = SIMD_PATH,
    .name = SIMD_NAME,
    .dot = simd_dot,
    .sum = simd_sum,
    .matmul_rows = simd_matmul_rows,
    .rmsnorm = simd_rmsnorm,
    .rope = simd_rope,
    .attention_head = simd_attention_head,
    .silu_mul = simd_silu_mul,
    .gelu_mul = simd_gelu_mul,
    .softcap = simd_softcap,
    .add = simd_add,
    .argmax = simd_argmax,
};
