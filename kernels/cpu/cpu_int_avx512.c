/*
 * cpu_int_avx512.c — the integer profile's product on the avx512 path, with
 * AVX-512 VNNI (cpu_int.h; the definition is kernels/common/int_dot.h).
 *
 * A row is read 16 blocks of 32 weights (a "group") at a time. Its decoder
 * gives each weight's code as an unsigned byte u = v + off (off = 8, 16, 32,
 * 128 or 4 for the types with signed codes, else 0), two blocks to a
 * register, and the group's scales, D and mins as vectors over its blocks.
 * vpdpbusd multiplies u by the activation codes (signed bytes) four at a
 * time into 32-bit lanes; a fixed tree of permutes and adds folds the
 * lanes into one sum per 16-weight group and then per block, all exact:
 *   P_b = sum_g k_g (sum_{i in g} u_i c_i - off * S_g)
 * is int_dot.h's P_b. The float part is int_dot.h's, one block per vector
 * lane: a group of blocks b0..b0+15 is lanes b0 % 32 .. +15 of the
 * canonical reduction, and the tree at the end is di_lane_tree's.
 *
 * Q4_K and Q5_K keep two 32-weight blocks in the two nibbles of 32 bytes,
 * so one register holds blocks (0, 2) and the next (1, 3): this path lays
 * the activation codes out in that order (qa->order = 1) and puts the sums
 * back in block order with one permute.
 */
#include "cpu_int.h"

#ifdef DI_HAVE_X86_PATHS
#include <immintrin.h>
#include <string.h>

#include "int_dot.h"

#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif

#define INLINE static inline __attribute__((always_inline))
#define GROUP 16u /* blocks per group */
/* Bytes ahead of the group being read that it asks the caches for: the
 * hardware prefetcher alone leaves one thread at ~40% of DRAM bandwidth
 * (measured on the AMD EPYC, docs/PERFORMANCE.md). */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

/* A decoded group: u[j] holds blocks 2j and 2j + 1 (in the type's order);
 * k[0..1] the group scales, [k0, k1] per block for blocks 0-7 and 8-15
 * (types of two groups per block), or k[0] one scale per block; d the
 * blocks' D; n0, n1 their min factors. */
typedef struct vgroup {
    __m512i u[8];
    __m512i k[2];
    __m512 d, n0, n1;
} vgroup;

/* What the kernel needs to know of a type (one row of KINDS each). */
typedef struct int_kind {
    uint32_t type;
    int off_shift; /* log2 of off, or -1 for off = 0 */
    int groups;    /* 16-weight groups with a scale each: 1 or 2 */
    int mins;      /* min terms per block: 0, 1 or 2 */
    int has_k;     /* 0: every k is 1 */
    int order;     /* 1: the pair order of Q4_K and Q5_K */
} int_kind;

static const int_kind KINDS[] = {
    {DI_TYPE_Q4_0, 3, 1, 0, 0, 0},   {DI_TYPE_Q4_1, -1, 1, 1, 0, 0},  {DI_TYPE_Q5_0, 4, 1, 0, 0, 0},
    {DI_TYPE_Q5_1, -1, 1, 1, 0, 0},  {DI_TYPE_Q8_0, 7, 1, 0, 0, 0},   {DI_TYPE_IQ4_NL, 7, 1, 0, 0, 0},
    {DI_TYPE_Q2_K, -1, 2, 2, 1, 0},  {DI_TYPE_Q3_K, 2, 2, 0, 1, 0},   {DI_TYPE_Q4_K, -1, 1, 1, 1, 1},
    {DI_TYPE_Q5_K, -1, 1, 1, 1, 1},  {DI_TYPE_Q6_K, 5, 2, 0, 1, 0},   {DI_TYPE_IQ4_XS, 7, 1, 0, 1, 0},
};

static const int_kind *kind_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        if (KINDS[i].type == type)
            return &KINDS[i];
    return NULL;
}

/* Position p of a group holds block pair_order(p) (an involution). */
static int pair_order(int p, int order)
{
    return order && (p % 4 == 1 || p % 4 == 2) ? p ^ 3 : p;
}

/* ---- decoders ------------------------------------------------------------------------ */

/* Any type, any count of blocks (the tails, and the types without a
 * vector decoder), through int_dot.h's own field readers. */
static void decode_scalar(const int_kind *kd, const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g)
{
    _Alignas(64) uint8_t u[GROUP][32];
    _Alignas(64) int32_t k[2 * GROUP];
    _Alignas(64) float d[GROUP], n0[GROUP], n1[GROUP];
    memset(u, 0, sizeof u);
    for (uint32_t j = 0; j < GROUP; j++)
        k[2 * j] = k[2 * j + 1] = 0, d[j] = n0[j] = n1[j] = 0.0f;
    const int off = kd->off_shift < 0 ? 0 : 1 << kd->off_shift;
    for (uint32_t p = 0; p < count; p++) {
        const uint32_t j = (uint32_t)pair_order((int)p, kd->order); /* its block */
        int sub;
        const uint8_t *blk = di_int_block_at(kd->type, row, b0 + j, &sub);
        for (int i = 0; i < 32; i++)
            u[p][i] = (uint8_t)(di_int_code(kd->type, blk, sub, i) + off);
        if (kd->groups == 2) {
            k[2 * j] = di_int_scale(kd->type, blk, sub, 0);
            k[2 * j + 1] = di_int_scale(kd->type, blk, sub, 1);
        } else {
            k[j] = di_int_scale(kd->type, blk, sub, 0);
        }
        d[j] = di_int_d(kd->type, blk);
        float N[2] = {0.0f, 0.0f};
        di_int_mins(kd->type, blk, sub, N);
        n0[j] = N[0], n1[j] = N[1];
    }
    for (int q = 0; q < 8; q++)
        g->u[q] = _mm512_load_si512(u[2 * q]);
    g->k[0] = _mm512_load_si512(k);
    g->k[1] = _mm512_load_si512(k + GROUP);
    g->d = _mm512_load_ps(d);
    g->n0 = _mm512_load_ps(n0);
    g->n1 = _mm512_load_ps(n1);
}

/* A binary16 field as float (exact; F16C's conversion). */
INLINE float f16_at(const uint8_t *p)
{
    return _cvtsh_ss(di_qb_u16(p));
}

/* D of 16 blocks of a 32-weight type, `bytes` apart (a gather of the
 * binary16 field; each block is >= 18 bytes, so the 4-byte reads stay in it),
 * 0 past `count`. */
INLINE __m512 d_of_blocks(const uint8_t *first, uint32_t bytes, uint32_t count)
{
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)bytes));
    const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (__mmask16)((1u << count) - 1), idx,
                                                     (const void *)first, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
}

/* Two super-blocks' binary16 field at `at`: blocks 0-7 and 8-15 (0 for
 * the second when the group has one, `count` 8). */
INLINE __m512 two_halves(const uint8_t *sb, uint32_t bytes, int at, uint32_t count)
{
    const float second = count > 8 ? f16_at(sb + bytes + at) : 0.0f;
    return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(f16_at(sb + at)), _mm512_set1_ps(second));
}

/* The 32-weight types' decoders read only the group's `count` blocks. */
INLINE __m256i load_block(const uint8_t *p, int live)
{
    return live ? _mm256_loadu_si256((const void *)p) : _mm256_setzero_si256();
}

INLINE void decode_q8_0(const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g)
{
    const uint8_t *blk = row + (size_t)b0 * DI_BLOCK_BYTES_Q8_0;
    const __m512i flip = _mm512_set1_epi8((char)0x80); /* v + 128 */
    for (uint32_t q = 0; q < 8; q++) {
        const uint8_t *a = blk + (2 * q) * DI_BLOCK_BYTES_Q8_0 + DI_OFF_QS_Q8_0;
        const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(load_block(a, 2 * q < count)),
                                             load_block(a + DI_BLOCK_BYTES_Q8_0, 2 * q + 1 < count), 1);
        const __mmask8 live = 2 * q + 1 < count ? 0xff : 2 * q < count ? 0x0f : 0; /* 64-bit words of live blocks */
        g->u[q] = _mm512_maskz_xor_epi64(live, v, flip);
    }
    g->d = d_of_blocks(blk + DI_OFF_D_Q8_0, DI_BLOCK_BYTES_Q8_0, count);
}

/* Q5_0: the 16 nibble bytes of blocks b and b + 1, low nibbles the first 16
 * weights, plus bit i of qh as 16. */
INLINE void decode_q5_0(const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g)
{
    const uint8_t *blk = row + (size_t)b0 * DI_BLOCK_BYTES_Q5_0;
    const __m512i lo4 = _mm512_set1_epi8(0x0f), hi = _mm512_set1_epi8(0x10);
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    for (uint32_t q = 0; q < 8; q++) {
        if (2 * q >= count) {
            g->u[q] = _mm512_setzero_si512();
            continue;
        }
        const int second = 2 * q + 1 < count;
        const uint8_t *a = blk + (2 * q) * DI_BLOCK_BYTES_Q5_0, *b = a + DI_BLOCK_BYTES_Q5_0;
        const __m128i qa = _mm_loadu_si128((const void *)(a + DI_OFF_QS_Q5_0));
        const __m128i qb = second ? _mm_loadu_si128((const void *)(b + DI_OFF_QS_Q5_0)) : _mm_setzero_si128();
        __m512i x = _mm512_castsi128_si512(qa);
        x = _mm512_inserti32x4(x, qa, 1);
        x = _mm512_inserti32x4(x, qb, 2);
        x = _mm512_inserti32x4(x, qb, 3);
        const __m512i nib = _mm512_and_si512(_mm512_srlv_epi64(x, shifts), lo4);
        const __mmask64 bits = (__mmask64)di_qb_u32(a + DI_OFF_QH_Q5_0) |
                               (second ? (__mmask64)di_qb_u32(b + DI_OFF_QH_Q5_0) << 32 : 0);
        g->u[q] = _mm512_or_si512(nib, _mm512_maskz_mov_epi8(bits, hi));
    }
    g->d = d_of_blocks(blk + DI_OFF_D_Q5_0, DI_BLOCK_BYTES_Q5_0, count);
}

/* Q4_K and Q5_K scales (sc) and mins (m) of a super-block, 4 bytes to a
 * word (ggml's 6-bit packing, docs/QUANTS.md): words 0 and 1 of each. */
INLINE void k_scales(const uint8_t *s, uint32_t sc[2], uint32_t m[2])
{
    const uint32_t w0 = di_qb_u32(s), w1 = di_qb_u32(s + 4), w2 = di_qb_u32(s + 8);
    sc[0] = w0 & 0x3f3f3f3fu, m[0] = w1 & 0x3f3f3f3fu;
    sc[1] = (w2 & 0x0f0f0f0fu) | ((w0 >> 6) & 0x03030303u) << 4;
    m[1] = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 6) & 0x03030303u) << 4;
}

/* The scales, D and mins of the group's one or two Q4_K / Q5_K super-blocks
 * (built in registers: a vector load of bytes just stored would stall). */
INLINE void k_factors(uint32_t type, const uint8_t *sb, uint32_t count, vgroup *g)
{
    const uint32_t bytes = di_weight_block_bytes(type);
    const int at_sc = di_weight_field(type, DI_FIELD_SC);
    uint32_t sc[4] = {0, 0, 0, 0}, m[4] = {0, 0, 0, 0};
    k_scales(sb + at_sc, sc, m);
    if (count > 8)
        k_scales(sb + bytes + at_sc, sc + 2, m + 2);
    const __m128i scv = _mm_setr_epi32((int)sc[0], (int)sc[1], (int)sc[2], (int)sc[3]);
    const __m128i mv = _mm_setr_epi32((int)m[0], (int)m[1], (int)m[2], (int)m[3]);
    g->k[0] = _mm512_cvtepu8_epi32(scv);
    g->d = two_halves(sb, bytes, di_weight_field(type, DI_FIELD_D), count);
    const __m512 dmin = two_halves(sb, bytes, di_weight_field(type, DI_FIELD_M), count);
    const __m512 mf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mv));
    g->n0 = _mm512_xor_ps(_mm512_mul_ps(dmin, mf), _mm512_set1_ps(-0.0f));
}

/* The K types' decoders: a group is one or two whole super-blocks (count 8
 * or 16). */
INLINE void decode_q4_k(const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g)
{
    const uint8_t *sb = row + (size_t)(b0 / 8) * DI_BLOCK_BYTES_Q4_K;
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    for (int q = 0; q < 8; q++)
        g->u[q] = _mm512_setzero_si512();
    for (uint32_t s = 0; s < count / 8; s++)
        for (int h = 0; h < 2; h++) {
            const __m512i x = _mm512_loadu_si512((const void *)(sb + s * DI_BLOCK_BYTES_Q4_K + DI_OFF_QS_Q4_K + 64 * h));
            g->u[4 * s + 2 * h] = _mm512_and_si512(x, lo4);                           /* blocks 4h, 4h + 2 */
            g->u[4 * s + 2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(x, 4), lo4); /* 4h + 1, 4h + 3 */
        }
    k_factors(DI_TYPE_Q4_K, sb, count, g);
}

/* Q6_K: low nibbles of ql[64h..64h+64) are sub-blocks 4h, 4h + 1, high
 * nibbles 4h + 2, 4h + 3; bits 2k..2k+1 of qh[32h..32h+32) are sub-block
 * 4h + k's high two bits. */
INLINE void decode_q6_k(const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g)
{
    const uint8_t *sb = row + (size_t)(b0 / 8) * DI_BLOCK_BYTES_Q6_K;
    const __m512i lo4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
    const __m512i sh01 = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2); /* left: bits 0-1, 2-3 to 4-5 */
    const __m512i sh23 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2); /* right: bits 4-5, 6-7 to 4-5 */
    for (int q = 0; q < 8; q++)
        g->u[q] = _mm512_setzero_si512();
    g->k[0] = g->k[1] = _mm512_setzero_si512();
    for (uint32_t s = 0; s < count / 8; s++) {
        const uint8_t *b = sb + s * DI_BLOCK_BYTES_Q6_K;
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(b + DI_OFF_QS_Q6_K + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const void *)(b + DI_OFF_QH_Q6_K + 32 * h)));
            const __m512i hi01 = _mm512_and_si512(_mm512_sllv_epi64(qh, sh01), top2);
            const __m512i hi23 = _mm512_and_si512(_mm512_srlv_epi64(qh, sh23), top2);
            g->u[4 * s + 2 * h] = _mm512_or_si512(_mm512_and_si512(ql, lo4), hi01);
            g->u[4 * s + 2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4), hi23);
        }
        g->k[s] = _mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)(b + DI_OFF_SC_Q6_K)));
    }
    g->d = two_halves(sb, DI_BLOCK_BYTES_Q6_K, DI_OFF_D_Q6_K, count);
}

/* ---- the product --------------------------------------------------------------------- */

/* [x's lanes summed in pairs | y's]: the sums of each 2w-lane run of x
 * (then of y) in w lanes, order kept. */
INLINE __m512i fold(__m512i x, __m512i y)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(x, even, y), _mm512_permutex2var_epi32(x, odd, y));
}

/* The 16 block sums P of a decoded group against one token's codes (in the
 * group's order), its code sums s16 (32 int16, block order) and kind. */
INLINE __m512i block_sums(const int_kind *kd, const vgroup *g, const int8_t *codes, const int16_t *s16,
                          uint32_t count)
{
    __m512i acc[8];
    for (int q = 0; q < 8; q++)
        acc[q] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g->u[q], _mm512_loadu_si512((const void *)(codes + 64 * q)));
    /* per 16-weight group: [g0, g1] of blocks 0-7, then of 8-15 */
    __m512i l1[4], l2[2];
    for (int q = 0; q < 4; q++)
        l1[q] = fold(acc[2 * q], acc[2 * q + 1]);
    l2[0] = fold(l1[0], l1[1]);
    l2[1] = fold(l1[2], l1[3]);
    const __mmask32 live = count >= GROUP ? 0xffffffffu : (__mmask32)((1ull << (2 * count)) - 1);
    const __m512i sums = _mm512_maskz_loadu_epi16(live, s16);
    if (kd->groups == 2) {
        for (int h = 0; h < 2; h++) {
            __m512i s = _mm512_cvtepi16_epi32(h ? _mm512_extracti64x4_epi64(sums, 1) : _mm512_castsi512_si256(sums));
            __m512i x = l2[h];
            if (kd->off_shift >= 0)
                x = _mm512_sub_epi32(x, _mm512_slli_epi32(s, (unsigned)kd->off_shift));
            l2[h] = _mm512_mullo_epi32(x, g->k[h]);
        }
        return fold(l2[0], l2[1]);
    }
    __m512i u = fold(l2[0], l2[1]);
    if (kd->order) {
        const __m512i back = _mm512_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15);
        u = _mm512_permutexvar_epi32(back, u);
    }
    if (kd->off_shift >= 0) {
        const __m512i s = _mm512_madd_epi16(sums, _mm512_set1_epi16(1)); /* S0 + S1 per block */
        u = _mm512_sub_epi32(u, _mm512_slli_epi32(s, (unsigned)kd->off_shift));
    }
    return kd->has_k ? _mm512_mullo_epi32(u, g->k[0]) : u;
}

/* The definition's float steps for the group's blocks in `live` lanes. */
INLINE __m512 block_terms(const int_kind *kd, const vgroup *g, __m512i P, const di_qa *qa, uint32_t t, uint32_t b0,
                          __mmask16 live, __m512 lane)
{
    const uint32_t nb = qa->nb;
    const __m512 a = _mm512_maskz_loadu_ps(live, qa->scales + (size_t)t * nb + b0);
    lane = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(P), _mm512_mul_ps(g->d, a), lane, live);
    if (kd->mins == 1)
        lane = _mm512_mask3_fmadd_ps(g->n0, _mm512_maskz_loadu_ps(live, qa->as_full + (size_t)t * nb + b0), lane, live);
    if (kd->mins == 2) {
        const float *h = qa->as_half + (size_t)t * 2 * nb + b0;
        lane = _mm512_mask3_fmadd_ps(g->n0, _mm512_maskz_loadu_ps(live, h), lane, live);
        lane = _mm512_mask3_fmadd_ps(g->n1, _mm512_maskz_loadu_ps(live, h + nb), lane, live);
    }
    return lane;
}

/* di_lane_tree of 32 lanes held as lo (0-15) and hi (16-31). */
static float lane_tree(__m512 lo, __m512 hi)
{
    const __m512 s16 = _mm512_add_ps(lo, hi);
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(s16), _mm512_extractf32x8_ps(s16, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

typedef void (*decode_fn)(const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g);

/* Per token of a run of at most 16: the running lanes of the chunk and the
 * totals (cpu_int.h's scratch). */
typedef struct token_lanes {
    __m512 acc[2], total[2];
} token_lanes;

/* Rows [r0, r1) for every token, groups of 16 blocks decoded once for up to
 * 16 tokens. */
INLINE void rows_body(const int_kind *kd, decode_fn decode, const di_weight *w, uint32_t r0, uint32_t r1,
                      const di_qa *qa, float *y, float *scratch)
{
    const uint32_t n = qa->n, nb = qa->nb;
    token_lanes *tl = (token_lanes *)(void *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const uint32_t span = GROUP * DI_QA_BLOCK * di_weight_block_bytes(w->type) / di_weight_block_elems(w->type);
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        for (uint32_t t0 = 0; t0 < qa->n_tokens; t0 += DI_QA_TOKENS) {
            const uint32_t tn = qa->n_tokens - t0 < DI_QA_TOKENS ? qa->n_tokens - t0 : DI_QA_TOKENS;
            for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
                const uint32_t end = di_chunk_end(nb, c0);
                for (uint32_t k = 0; k < tn; k++)
                    tl[k].acc[0] = tl[k].acc[1] = _mm512_setzero_ps();
                for (uint32_t b0 = c0; b0 < end; b0 += GROUP) {
                    const uint32_t count = end - b0 < GROUP ? end - b0 : GROUP;
                    vgroup g;
                    if (decode)
                        decode(row, b0, count, &g);
                    else
                        decode_scalar(kd, row, b0, count, &g);
                    /* rows follow each other in memory: fetch ahead across their ends too */
                    const uint8_t *here = row + (size_t)b0 * span / GROUP;
                    for (uint32_t o = 0; o < span; o += 64)
                        _mm_prefetch((const char *)(here + PREFETCH_AHEAD + o), _MM_HINT_T0);
                    const __mmask16 live = (__mmask16)((1u << count) - 1);
                    const int half = (b0 / GROUP) % 2;
                    for (uint32_t k = 0; k < tn; k++) {
                        const uint32_t t = t0 + k;
                        const __m512i P = block_sums(kd, &g, qa->codes + (size_t)t * n + (size_t)b0 * DI_QA_BLOCK,
                                                     qa->sums + (size_t)t * 2 * nb + 2 * (size_t)b0, count);
                        tl[k].acc[half] = block_terms(kd, &g, P, qa, t, b0, live, tl[k].acc[half]);
                    }
                }
                for (uint32_t k = 0; k < tn; k++)
                    for (int h = 0; h < 2; h++)
                        tl[k].total[h] = c0 == 0 ? tl[k].acc[h] : _mm512_add_ps(tl[k].total[h], tl[k].acc[h]);
            }
            for (uint32_t k = 0; k < tn; k++)
                y[(size_t)(t0 + k) * w->n_out + r] = lane_tree(tl[k].total[0], tl[k].total[1]);
        }
    }
}

#define ROWS_OF(name, type, decoder)                                                                     \
    static void rows_##name(const di_weight *w, uint32_t r0, uint32_t r1, const di_qa *qa, float *y, \
                            float *scratch)                                                          \
    {                                                                                                \
        rows_body(kind_of(type), decoder, w, r0, r1, qa, y, scratch);                                \
    }
ROWS_OF(q8_0, DI_TYPE_Q8_0, decode_q8_0)
ROWS_OF(q5_0, DI_TYPE_Q5_0, decode_q5_0)
ROWS_OF(q4_k, DI_TYPE_Q4_K, decode_q4_k)
ROWS_OF(q6_k, DI_TYPE_Q6_K, decode_q6_k)

void di_int_rows_avx512(const di_weight *w, uint32_t r0, uint32_t r1, const void *buf, float *y, float *scratch)
{
    const di_qa *qa = buf;
    switch (w->type) {
    case DI_TYPE_Q8_0: rows_q8_0(w, r0, r1, qa, y, scratch); return;
    case DI_TYPE_Q5_0: rows_q5_0(w, r0, r1, qa, y, scratch); return;
    case DI_TYPE_Q4_K: rows_q4_k(w, r0, r1, qa, y, scratch); return;
    case DI_TYPE_Q6_K: rows_q6_k(w, r0, r1, qa, y, scratch); return;
    default: rows_body(kind_of(w->type), NULL, w, r0, r1, qa, y, scratch); return;
    }
}

/* ---- the activations ------------------------------------------------------------------ */

void di_int_quantize_avx512(const di_weight *w, const float *x, uint32_t n_tokens, void *buf)
{
    di_qa *qa = di_qa_layout(buf, w->n_in, n_tokens, 0);
    di_qa_fill_scalar(qa, x);
    const int_kind *kd = kind_of(w->type);
    if (kd && kd->order) { /* blocks 1 and 2 of every 4 swap places */
        qa->order = 1;
        for (uint32_t t = 0; t < n_tokens; t++)
            for (uint32_t b = 0; b + 4 <= qa->nb; b += 4) {
                int8_t *c = qa->codes + (size_t)t * qa->n + (size_t)b * DI_QA_BLOCK;
                int8_t tmp[DI_QA_BLOCK];
                memcpy(tmp, c + DI_QA_BLOCK, DI_QA_BLOCK);
                memcpy(c + DI_QA_BLOCK, c + 2 * DI_QA_BLOCK, DI_QA_BLOCK);
                memcpy(c + 2 * DI_QA_BLOCK, tmp, DI_QA_BLOCK);
            }
    }
}

#ifdef __clang__
#pragma clang attribute pop
#endif
#endif /* DI_HAVE_X86_PATHS */
