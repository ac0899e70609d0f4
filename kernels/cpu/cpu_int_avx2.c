/*
 * cpu_int_avx2.c — the integer profile's product on the avx2 path
 * (cpu_int.h; the definition is kernels/common/int_dot.h), for CPUs without
 * AVX-512 VNNI.
 *
 * A row is read 8 blocks of 32 weights (a "group") at a time, one block to
 * a register of 32 codes v (the decoders below); the group's scales k, D
 * and min factors come as vectors over its blocks. A block's sum against
 * one token's codes c is exact at every step:
 *   vpmaddubsw(|v|, sign(c, v)) for the types with signed codes, else
 *     vpmaddubsw(v, c): 16 sums of two products v_i c_i in int16. |v| <= 128
 *     and |c| <= 127, so each is at most 2 * 128 * 127 = 32,512 in magnitude
 *     and never saturates (an offset byte u = v + 128 would reach
 *     2 * 255 * 127 = 64,770);
 *   vpmaddwd with ones: 8 int32 sums of four products, lanes 0-3 the first
 *     16 weights and 4-7 the other 16;
 *   a fixed tree of horizontal adds over the group's 8 blocks, with the
 *     16-weight groups' k applied before its last step and a block's one k
 *     after it: the 8 blocks' P_b in one register, each within int_dot.h's
 *     bound |P_b| < 2^24 (integers: any order gives the same sums).
 * The float part is int_dot.h's, one block per vector lane: a group of
 * blocks b0..b0+7 (b0 % 8 = 0, a chunk holding 1024 blocks) is lanes
 * b0 % 32 .. +7 of the canonical reduction, four registers of 8 lanes, and
 * the tree at the end is di_lane_tree's.
 */
#include "kernels/cpu/cpu_int.h"

#ifdef DI_HAVE_X86_PATHS
#include "kernels/cpu/x86_avx2.h" /* opens the target region */

#include "kernels/common/int_dot.h"
#include "kernels/cpu/x86_codes.h"

#define INLINE static inline __attribute__((always_inline))
#define GROUP 8u /* blocks per group: one 8-lane register of block terms */
#define NV 4     /* registers of the 32 canonical lanes */

/* ---- the product (the codes v of a sub-block: x86_codes.h) ---------------------- */

/* 1 for the types whose codes can be negative: their products take the
 * sign trick; the others' codes (0..31) are unsigned bytes as they are. */
INLINE int signed_codes(uint32_t type)
{
    return type != DI_TYPE_Q4_1 && type != DI_TYPE_Q5_1 && type != DI_TYPE_Q2_K && type != DI_TYPE_Q4_K &&
           type != DI_TYPE_Q5_K;
}

/* 1 for the types with integer scales k (the 256-weight ones). */
INLINE int has_k(uint32_t type)
{
    return di_weight_block_elems(type) == 256;
}

/* The 8 int32 sums k_g (v c ...) of four products each of one block (v its
 * codes, av = |v| for the signed types, else v; c the token's codes),
 * group 0 in lanes 0-3, group 1 in 4-7; before k. */
INLINE __m256i block_product(uint32_t type, __m256i v, __m256i av, __m256i c)
{
    const __m256i pairs = _mm256_maddubs_epi16(av, signed_codes(type) ? _mm256_sign_epi8(c, v) : c);
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* A group's factors: k, D and the min factors N of its 8 blocks (0 past
 * `count`). k[0] holds one k per block; for the types of two 16-weight
 * groups, k[0] is [k(b, 0) for b = 0-3 | k(b, 1) for b = 0-3] and k[1] the
 * same for blocks 4-7, the order of group_sums's tree. */
typedef struct factors {
    __m256i k[2];
    __m256 d, n0, n1;
} factors;

/* The binary16 field at `first` of `count` (<= 8) blocks `bytes` apart. */
INLINE __m256 f16_of_blocks(const uint8_t *first, uint32_t bytes, uint32_t count)
{
    _Alignas(16) uint16_t h[GROUP] = {0};
    for (uint32_t p = 0; p < count; p++)
        h[p] = di_qb_u16(first + (size_t)p * bytes);
    return _mm256_cvtph_ps(_mm_load_si128((const void *)h));
}

/* k as [k(b, g)] with k(b, g) at 2b + g in `kk`, put in group_sums's order. */
INLINE void two_group_k(const int32_t *kk, factors *f)
{
    const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    f->k[0] = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const void *)kk), order);
    f->k[1] = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const void *)(kk + 8)), order);
}

/* Q4_K and Q5_K: the 12 scale bytes are words w0, w1, w2 (ggml's 6-bit
 * packing, di_qb_k_scale_min): sub-blocks 0-3 take sc = w0 & 0x3f.., m =
 * w1 & 0x3f..; 4-7 take sc = (w2 & 0x0f..) | (w0 >> 6 & 0x03..) << 4 and
 * m = (w2 >> 4 & 0x0f..) | (w1 >> 6 & 0x03..) << 4. */
INLINE void k_scale_min(uint32_t type, const uint8_t *sb, factors *f)
{
    /* 16 bytes from the scales on stay inside the block (qs follow them) */
    const __m128i x = _mm_loadu_si128((const void *)(sb + di_weight_field(type, DI_FIELD_SC)));
    const __m128i lo = _mm_and_si128(x, _mm_set1_epi32(0x3f3f3f3f));
    const __m128i y = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 2, 2));
    const __m128i y4 = _mm_and_si128(_mm_srlv_epi32(y, _mm_setr_epi32(0, 4, 0, 4)), _mm_set1_epi32(0x0f0f0f0f));
    const __m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(x, 6), _mm_set1_epi32(0x03030303)), 4);
    const __m128i sm = _mm_unpacklo_epi32(lo, _mm_or_si128(y4, top)); /* sc 0-7, then m 0-7 */
    f->k[0] = _mm256_cvtepu8_epi32(sm);
    const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8)));
    const __m256 dmin = _mm256_set1_ps(di_qb_f16(sb + di_weight_field(type, DI_FIELD_M)));
    f->n0 = _mm256_xor_ps(_mm256_mul_ps(dmin, m), _mm256_set1_ps(-0.0f)); /* -(dmin * m) */
}

INLINE void group_factors(uint32_t type, const uint8_t *row, uint32_t b0, uint32_t count, factors *f)
{
    const uint32_t bytes = di_weight_block_bytes(type);
    if (!has_k(type)) { /* 32-weight blocks: D (and m) per block */
        const uint8_t *blk = row + (size_t)b0 * bytes;
        f->d = f16_of_blocks(blk + di_weight_field(type, DI_FIELD_D), bytes, count);
        if (di_int_min_count(type) == 1)
            f->n0 = f16_of_blocks(blk + di_weight_field(type, DI_FIELD_M), bytes, count);
        return;
    }
    /* 256-weight blocks: the group is one whole super-block (count 8) */
    const uint8_t *sb = row + (size_t)(b0 / GROUP) * bytes;
    f->d = _mm256_set1_ps(di_int_d(type, sb));
    if (type == DI_TYPE_Q4_K || type == DI_TYPE_Q5_K) {
        k_scale_min(type, sb, f);
        return;
    }
    _Alignas(32) int32_t kk[2 * GROUP];
    if (type == DI_TYPE_Q6_K) {
        const __m128i sc = _mm_loadu_si128((const void *)(sb + DI_OFF_SC_Q6_K));
        _mm256_store_si256((void *)kk, _mm256_cvtepi8_epi32(sc));
        _mm256_store_si256((void *)(kk + GROUP), _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)));
        two_group_k(kk, f);
        return;
    }
    /* Q2_K, Q3_K, IQ4_XS: int_dot.h's readers, block by block */
    _Alignas(32) float n0[GROUP], n1[GROUP];
    for (int p = 0; p < (int)GROUP; p++) {
        for (int g = 0; g < di_int_groups(type); g++)
            kk[di_int_groups(type) * p + g] = di_int_scale(type, sb, p, g);
        float N[2] = {0.0f, 0.0f};
        di_int_mins(type, sb, p, N);
        n0[p] = N[0], n1[p] = N[1];
    }
    if (di_int_groups(type) == 2)
        two_group_k(kk, f);
    else
        f->k[0] = _mm256_load_si256((const void *)kk);
    f->n0 = _mm256_load_ps(n0);
    f->n1 = _mm256_load_ps(n1);
}

/* The 8 block sums P from the blocks' products x (integers: any order of
 * adds gives the same sums). */
INLINE __m256i group_sums(uint32_t type, const __m256i *x, const factors *f)
{
    const __m256i s01 = _mm256_hadd_epi32(x[0], x[1]), s23 = _mm256_hadd_epi32(x[2], x[3]);
    const __m256i s45 = _mm256_hadd_epi32(x[4], x[5]), s67 = _mm256_hadd_epi32(x[6], x[7]);
    /* t0: [group 0 of blocks 0-3 | group 1 of blocks 0-3] (lanes 0-3 and 4-7 of
     * each x are its groups), t1 the same for blocks 4-7 */
    __m256i t0 = _mm256_hadd_epi32(s01, s23), t1 = _mm256_hadd_epi32(s45, s67);
    if (di_int_groups(type) == 2) {
        t0 = _mm256_mullo_epi32(t0, f->k[0]);
        t1 = _mm256_mullo_epi32(t1, f->k[1]);
    }
    const __m256i P =
        _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t0, t1, 0x31));
    return has_k(type) && di_int_groups(type) == 1 ? _mm256_mullo_epi32(P, f->k[0]) : P;
}

/* The definition's float stages for the group's `count` blocks. */
INLINE __m256 block_terms(uint32_t type, const factors *f, __m256i P, const di_qa *qa, uint32_t t, uint32_t b0,
                          uint32_t count, __m256 lane)
{
    const uint32_t nb = qa->nb;
    const int mins = di_int_min_count(type);
    const float *a_at = qa->scales + (size_t)t * nb + b0, *full = qa->as_full + (size_t)t * nb + b0,
                *half = qa->as_half + (size_t)t * 2 * nb + b0;
    if (count == GROUP) {
        __m256 x = _mm256_fmadd_ps(_mm256_cvtepi32_ps(P), _mm256_mul_ps(f->d, _mm256_loadu_ps(a_at)), lane);
        if (mins == 1)
            x = _mm256_fmadd_ps(f->n0, _mm256_loadu_ps(full), x);
        if (mins == 2) {
            x = _mm256_fmadd_ps(f->n0, _mm256_loadu_ps(half), x);
            x = _mm256_fmadd_ps(f->n1, _mm256_loadu_ps(half + nb), x);
        }
        return x;
    }
    /* a row's last group (32-weight types): its live lanes only */
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 x = _mm256_fmadd_ps(_mm256_cvtepi32_ps(P), _mm256_mul_ps(f->d, _mm256_maskload_ps(a_at, live)), lane);
    if (mins == 1)
        x = _mm256_fmadd_ps(f->n0, _mm256_maskload_ps(full, live), x);
    return _mm256_blendv_ps(lane, x, _mm256_castsi256_ps(live));
}

/* The lanes of one token of a run (at most DI_QA_TOKENS). */
typedef struct token_lanes {
    __m256 acc[NV], total[NV];
} token_lanes;

/* Bytes ahead of the group being read that it asks the caches for (as the
 * avx512 path does: the hardware prefetcher alone leaves one thread short
 * of the DRAM bandwidth). */
#define PREFETCH_AHEAD 2048

/* Group b0 (count blocks) of a row against tokens t0..t0 + tn, added to
 * their lanes: decoded once for the run (for one token, straight into its
 * products). */
INLINE void group_run(uint32_t type, const uint8_t *row, uint32_t span, const di_qa *qa, uint32_t t0, uint32_t tn,
                      uint32_t b0, uint32_t count, token_lanes *tl)
{
    const uint8_t *here = row + (size_t)b0 * span / GROUP;
    for (uint32_t o = 0; o < span; o += 64) /* rows follow each other: across their ends too */
        _mm_prefetch((const char *)(here + PREFETCH_AHEAD + o), _MM_HINT_T0);
    factors f;
    group_factors(type, row, b0, count, &f);
    const uint32_t j = (b0 % DI_LANES) / GROUP; /* its register of lanes */
    /* blocks past count are zero: their codes are not read */
    __m256i v[GROUP], av[GROUP], x[GROUP];
    for (uint32_t p = 0; p < GROUP; p++) {
        int sub;
        const uint8_t *blk = di_int_block_at(type, row, b0 + p, &sub);
        v[p] = p < count ? x86_codes32(type, blk, sub) : _mm256_setzero_si256();
        av[p] = signed_codes(type) ? _mm256_abs_epi8(v[p]) : v[p]; /* -128 becomes the byte 128 */
    }
    for (uint32_t k = 0; k < tn; k++) {
        const uint32_t t = t0 + k;
        /* past count: codes beyond the row (the next token's, or DI_QA_SLACK), times 0 */
        const int8_t *c = qa->codes + (size_t)t * qa->n + (size_t)b0 * DI_QA_BLOCK;
        for (uint32_t p = 0; p < GROUP; p++)
            x[p] = block_product(type, v[p], av[p], _mm256_loadu_si256((const void *)(c + 32 * p)));
        tl[k].acc[j] = block_terms(type, &f, group_sums(type, x, &f), qa, t, b0, count, tl[k].acc[j]);
    }
}

/* The dot of one row with tokens t0..t0 + tn, out[k * stride] token t0 +
 * k's. The full groups apart from a short last one, so that their count
 * is a constant. */
INLINE void row_run(uint32_t type, const uint8_t *row, const di_qa *qa, uint32_t t0, uint32_t tn, float *out,
                    uint32_t stride)
{
    const uint32_t nb = qa->nb;
    const uint32_t span = GROUP * DI_QA_BLOCK * di_weight_block_bytes(type) / di_weight_block_elems(type);
    token_lanes tl[DI_QA_TOKENS];
    for (uint32_t k = 0; k < tn; k++)
        for (int j = 0; j < NV; j++)
            tl[k].total[j] = _mm256_setzero_ps(); /* the first chunk replaces it */
    for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(nb, c0);
        for (uint32_t k = 0; k < tn; k++)
            for (int j = 0; j < NV; j++)
                tl[k].acc[j] = _mm256_setzero_ps();
        uint32_t b0 = c0;
        for (; b0 + GROUP <= end; b0 += GROUP)
            group_run(type, row, span, qa, t0, tn, b0, GROUP, tl);
        if (b0 < end)
            group_run(type, row, span, qa, t0, tn, b0, end - b0, tl);
        for (uint32_t k = 0; k < tn; k++)
            for (int j = 0; j < NV; j++)
                tl[k].total[j] = c0 == 0 ? tl[k].acc[j] : _mm256_add_ps(tl[k].total[j], tl[k].acc[j]);
    }
    for (uint32_t k = 0; k < tn; k++)
        out[(size_t)k * stride] = lanes_tree(tl[k].total);
}

INLINE void rows_body(uint32_t type, const di_weight *w, uint32_t r0, uint32_t r1, const di_qa *qa, float *y)
{
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        if (qa->n_tokens == 1) { /* the decode step: its run of one, inlined */
            row_run(type, row, qa, 0, 1, y + r, 0);
            continue;
        }
        for (uint32_t t0 = 0; t0 < qa->n_tokens; t0 += DI_QA_TOKENS) {
            const uint32_t tn = qa->n_tokens - t0 < DI_QA_TOKENS ? qa->n_tokens - t0 : DI_QA_TOKENS;
            row_run(type, row, qa, t0, tn, y + (size_t)t0 * w->n_out + r, w->n_out);
        }
    }
}

/* One body per type, so that its decoder and counts are constants. */
#define ROWS_OF(name)                                                                                        \
    static void rows_##name(const di_weight *w, uint32_t r0, uint32_t r1, const di_qa *qa, float *y)     \
    {                                                                                                    \
        rows_body(DI_TYPE_##name, w, r0, r1, qa, y);                                                     \
    }
ROWS_OF(Q4_0)
ROWS_OF(Q4_1)
ROWS_OF(Q5_0)
ROWS_OF(Q5_1)
ROWS_OF(Q8_0)
ROWS_OF(IQ4_NL)
ROWS_OF(Q2_K)
ROWS_OF(Q3_K)
ROWS_OF(Q4_K)
ROWS_OF(Q5_K)
ROWS_OF(Q6_K)
ROWS_OF(IQ4_XS)

void di_int_rows_avx2(const di_weight *w, uint32_t r0, uint32_t r1, const void *buf, float *y, float *scratch)
{
    (void)scratch;
    const di_qa *qa = buf;
    switch (w->type) {
    case DI_TYPE_Q4_0: rows_Q4_0(w, r0, r1, qa, y); return;
    case DI_TYPE_Q4_1: rows_Q4_1(w, r0, r1, qa, y); return;
    case DI_TYPE_Q5_0: rows_Q5_0(w, r0, r1, qa, y); return;
    case DI_TYPE_Q5_1: rows_Q5_1(w, r0, r1, qa, y); return;
    case DI_TYPE_Q8_0: rows_Q8_0(w, r0, r1, qa, y); return;
    case DI_TYPE_IQ4_NL: rows_IQ4_NL(w, r0, r1, qa, y); return;
    case DI_TYPE_Q2_K: rows_Q2_K(w, r0, r1, qa, y); return;
    case DI_TYPE_Q3_K: rows_Q3_K(w, r0, r1, qa, y); return;
    case DI_TYPE_Q4_K: rows_Q4_K(w, r0, r1, qa, y); return;
    case DI_TYPE_Q5_K: rows_Q5_K(w, r0, r1, qa, y); return;
    case DI_TYPE_Q6_K: rows_Q6_K(w, r0, r1, qa, y); return;
    case DI_TYPE_IQ4_XS: rows_IQ4_XS(w, r0, r1, qa, y); return;
    default: di_int_rows_scalar(w, r0, r1, buf, y, scratch); return; /* no other type reaches here */
    }
}

DI_X86_END
#endif /* DI_HAVE_X86_PATHS */
