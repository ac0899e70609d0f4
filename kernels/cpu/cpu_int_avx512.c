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
 * From DI_QA_GROUP_MIN tokens on, the lanes are tokens instead
 * (rows_grouped): each 4-byte word of a block's codes is broadcast and
 * multiplied with 16 tokens' codes at that place, so a block's sum for 16
 * tokens is one vector with nothing to fold, and the 32 canonical lanes are
 * 32 vectors over the tokens.
 *
 * Q4_K and Q5_K keep two 32-weight blocks in the two nibbles of 32 bytes,
 * so one register holds blocks (0, 2) and the next (1, 3): this path lays
 * the activation codes out in that order (qa->order = 1) and puts the sums
 * back in block order with one permute.
 *
 * Packed weights (cpu_int.h): a matrix of type Q8_0, Q5_0, Q4_K or Q6_K
 * gets a copy, made once per model (di_int_pack_rows_avx512), in which a
 * group of 16 blocks (in K types, 2 super-blocks) is laid out by word: word
 * k (k = 0..7) of a block is its codes 4k..4k+3, and a group holds word k
 * of all its blocks side by side. vpdpbusd of such a register with the
 * activation codes laid out alike (qa->order = 2) gives the 16 block sums
 * in 16 lanes, with nothing to fold, in block order. The values are the
 * file's, so the sums and every float stage are the same bits.
 * A row of nb blocks is groups of c = min(16, nb - b0) blocks from b0 = 0,
 * 16, ...; each region below holds a group's part at b0 times its bytes
 * per block from its start, c blocks' worth (packed_layout):
 *   Q8_0  U  32: for k = 0..7, c x 4 bytes: word k of each block, as
 *                unsigned bytes u = v + 128;
 *         D   2: each block's binary16 d, in block order.
 *   Q5_0  N  16: for p = 0..3, c x 4 bytes: byte 4j + i holds the low 4
 *                bits of u = v + 16 of byte i of word p of block j, and in
 *                its high nibble those of word p + 4;
 *         H  64 per group (whatever c): for k = 0..7 a little-endian
 *                64-bit mask, bit 4j + i the fifth bit of u of byte i of
 *                word k of block j;
 *         D   2: each block's d.
 *   Q4_K  N  16: as Q5_0's, of the 4-bit codes u = v;
 *         S   2, 32 per group (whatever c): byte j the 6-bit k of block j
 *                and in its top two bits the top two of its 6-bit min m;
 *                byte 16 + j (j < 8) the low 4 bits of m of block j and in
 *                its high nibble those of block j + 8; bytes 24-31 the
 *                binary16 d of the group's two super-blocks, then their
 *                dmin; zeros for a block or super-block past the row's end.
 *   Q6_K  N  16: as Q5_0's, of the low 4 bits of u = v + 32;
 *         H   8: for p = 0, 1, c x 4 bytes: bits 2s, 2s + 1 of byte
 *                4j + i hold bits 4, 5 of u of byte i of word 4p + s of
 *                block j;
 *         K   2: the int8 scales of the blocks' first 16-weight groups,
 *                then (c bytes on) of their second;
 *         D   2 per super-block: its d.
 * A packed row takes its blocks' file bytes (Q5_0: up to 64 more for a
 * short last group), rounded up to 64; every row starts 64-byte aligned.
 */
#include "kernels/cpu/cpu_int.h"

#ifdef DI_HAVE_X86_PATHS
#define DI_X86_VNNI /* the product's vpdpbusd */
#include "kernels/cpu/x86_avx512.h" /* opens the target region */

#include <string.h>

#include "kernels/common/int_dot.h"

#include "kernels/cpu/cpu_int_avx512_common.h" /* under the pragma: it defines functions */

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

/* The 16 block sums P of a packed group against one token's codes in the
 * same layout (act: the group's c x 32 bytes, word k at 4 c k), its code
 * sums s16 (32 int16, block order): one vpdpbusd per word, in four
 * chains of two, no folding. P comes back as floats, exactly (|P| < 2^24,
 * int_dot.h): the scales are applied as float products of integers, each
 * below 2^24 and so exact, which have a shorter latency than vpmulld. */
INLINE __m512 packed_sums(const int_kind *kd, const pgroup *g, const int8_t *act, const int16_t *s16, uint32_t c,
                          __mmask16 live)
{
    __m512i acc[4];
    for (uint32_t k = 0; k < 8; k++) {
        /* types of two 16-weight groups keep words 0-3 and 4-7 apart */
        const int h = kd->groups == 2 ? (int)(2 * (k / 4) + k % 2) : (int)(k % 4);
        const __m512i x = load_words((const uint8_t *)act + 4 * c * k, live);
        const int first = kd->groups == 2 ? k % 4 < 2 : k < 4;
        acc[h] = _mm512_dpbusd_epi32(first ? _mm512_setzero_si512() : acc[h], g->u[k], x);
    }
    /* lane j: (S_j1 << 16) | S_j0, the code sums of block j's halves */
    const __m512i s = load_words((const uint8_t *)s16, live);
    if (kd->groups == 2) {
        const __m512i half[2] = {_mm512_srai_epi32(_mm512_slli_epi32(s, 16), 16), _mm512_srai_epi32(s, 16)};
        __m512 x[2];
        for (int h = 0; h < 2; h++) {
            __m512i v = _mm512_add_epi32(acc[2 * h], acc[2 * h + 1]);
            if (kd->off_shift >= 0)
                v = _mm512_sub_epi32(v, _mm512_slli_epi32(half[h], (unsigned)kd->off_shift));
            x[h] = _mm512_cvtepi32_ps(v);
        }
        /* k0 x0 + k1 x1, each product and the sum exact */
        return _mm512_fmadd_ps(x[1], _mm512_cvtepi32_ps(g->k[1]), _mm512_mul_ps(x[0], _mm512_cvtepi32_ps(g->k[0])));
    }
    __m512i v = _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
    if (kd->off_shift >= 0)
        v = _mm512_sub_epi32(v, _mm512_slli_epi32(_mm512_madd_epi16(s, _mm512_set1_epi16(1)), (unsigned)kd->off_shift));
    return kd->has_k ? _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_cvtepi32_ps(g->k[0])) : _mm512_cvtepi32_ps(v);
}

/* The definition's float stages for the group's blocks in `live` lanes, with
 * their D and min factors n0, n1, and P (exact, as floats). */
INLINE __m512 block_terms(const int_kind *kd, __m512 d, __m512 n0, __m512 n1, __m512 P, const di_qa *qa, uint32_t t,
                          uint32_t b0, __mmask16 live, __m512 lane)
{
    const uint32_t nb = qa->nb;
    const __m512 a = _mm512_maskz_loadu_ps(live, qa->scales + (size_t)t * nb + b0);
    lane = _mm512_mask3_fmadd_ps(P, _mm512_mul_ps(d, a), lane, live);
    if (kd->mins == 1)
        lane = _mm512_mask3_fmadd_ps(n0, _mm512_maskz_loadu_ps(live, qa->as_full + (size_t)t * nb + b0), lane, live);
    if (kd->mins == 2) {
        const float *h = qa->as_half + (size_t)t * 2 * nb + b0;
        lane = _mm512_mask3_fmadd_ps(n0, _mm512_maskz_loadu_ps(live, h), lane, live);
        lane = _mm512_mask3_fmadd_ps(n1, _mm512_maskz_loadu_ps(live, h + nb), lane, live);
    }
    return lane;
}

/* Per token of a run of at most 16: the running lanes of the chunk and the
 * totals (cpu_int.h's scratch). */
typedef struct token_lanes {
    __m512 acc[2], total[2];
} token_lanes;

/* The dot of one row with tokens t0..t0 + tn of the activations: groups of
 * 16 blocks decoded once for the run (tn <= 16), the lanes in tl[0..tn). */
INLINE void row_run(const int_kind *kd, decode_fn decode, packed_fn pdecode, const row_src *src, const di_qa *qa,
                    uint32_t t0, uint32_t tn, token_lanes *tl, float *out, uint32_t stride)
{
    const uint32_t n = qa->n, nb = qa->nb;
    for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(nb, c0);
        for (uint32_t k = 0; k < tn; k++)
            tl[k].acc[0] = tl[k].acc[1] = _mm512_setzero_ps();
        /* groups in pairs: lanes 0-15 take the even group, 16-31 the odd one */
        for (uint32_t p0 = c0; p0 < end; p0 += 2 * GROUP)
#pragma GCC unroll 2
            for (int half = 0; half < 2; half++) {
                const uint32_t b0 = p0 + (uint32_t)half * GROUP;
                if (b0 >= end)
                    break;
                const uint32_t count = end - b0 < GROUP ? end - b0 : GROUP;
                const __mmask16 live = (__mmask16)((1u << count) - 1);
                /* rows follow each other in memory: fetch ahead across their ends too */
                if (src->packed) {
                    pgroup g;
                    packed_group(pdecode, src, b0, count, live, PREFETCH_AHEAD, &g);
                    for (uint32_t k = 0; k < tn; k++) {
                        const uint32_t t = t0 + k;
                        const __m512 P = packed_sums(kd, &g, qa->codes + (size_t)t * n + (size_t)b0 * DI_QA_BLOCK,
                                                      qa->sums + (size_t)t * 2 * nb + 2 * (size_t)b0, count, live);
                        tl[k].acc[half] = block_terms(kd, g.d, g.n0, _mm512_setzero_ps(), P, qa, t, b0, live,
                                                      tl[k].acc[half]);
                    }
                    continue;
                }
                vgroup g;
                decode_group(kd, decode, src->row, b0, count, src->span, PREFETCH_AHEAD, &g);
                for (uint32_t k = 0; k < tn; k++) {
                    const uint32_t t = t0 + k;
                    const __m512i P = block_sums(kd, &g, qa->codes + (size_t)t * n + (size_t)b0 * DI_QA_BLOCK,
                                                 qa->sums + (size_t)t * 2 * nb + 2 * (size_t)b0, count);
                    tl[k].acc[half] = block_terms(kd, g.d, g.n0, g.n1, _mm512_cvtepi32_ps(P), qa, t, b0, live,
                                                  tl[k].acc[half]);
                }
            }
        for (uint32_t k = 0; k < tn; k++)
            for (int h = 0; h < 2; h++)
                tl[k].total[h] = c0 == 0 ? tl[k].acc[h] : _mm512_add_ps(tl[k].total[h], tl[k].acc[h]);
    }
    for (uint32_t k = 0; k < tn; k++)
        out[(size_t)k * stride] = lanes_tree(tl[k].total);
}

/* The decode step: one token, the lanes in registers. A group's term (its
 * decode, sums and float stages, added to `lane`), with c and live
 * constants for the full groups, so that the compiler drops the masks and
 * offsets that the general loop (row_run) computes per group. */
INLINE __m512 group_term(const int_kind *kd, decode_fn decode, packed_fn pdecode, const row_src *src, int packed,
                         const di_qa *qa, uint32_t b0, uint32_t c, __mmask16 live, __m512 lane)
{
    const int8_t *codes = qa->codes + (size_t)b0 * DI_QA_BLOCK;
    const int16_t *sums = qa->sums + 2 * (size_t)b0;
    if (!packed) {
        vgroup g;
        decode_group(kd, decode, src->row, b0, c, src->span, PREFETCH_AHEAD, &g);
        return block_terms(kd, g.d, g.n0, g.n1, _mm512_cvtepi32_ps(block_sums(kd, &g, codes, sums, c)), qa, 0, b0,
                           live, lane);
    }
    pgroup g;
    pdecode(&src->pr, b0, c, live, &g);
    /* the U region, PREFETCH_AHEAD on; its span is the type's */
    const uint32_t span = GROUP * (kd->type == DI_TYPE_Q8_0 ? 32u : 16u);
    const uint8_t *here = src->pr.u + (size_t)b0 * (span / GROUP) + PREFETCH_AHEAD;
    for (uint32_t o = 0; o < span; o += 64)
        _mm_prefetch((const char *)(here + o), _MM_HINT_T0);
    return block_terms(kd, g.d, g.n0, _mm512_setzero_ps(), packed_sums(kd, &g, codes, sums, c, live), qa, 0, b0,
                       live, lane);
}

/* The same lanes, order and sums as row_run with one token: within a chunk
 * the groups go in pairs, lanes 0-15 the even one, 16-31 the odd one. */
INLINE float token_dot(const int_kind *kd, decode_fn decode, packed_fn pdecode, const row_src *src, int packed,
                       const di_qa *qa)
{
    const uint32_t nb = qa->nb;
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(nb, c0);
        __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        uint32_t b0 = c0;
        for (; b0 + 2 * GROUP <= end; b0 += 2 * GROUP) {
            acc[0] = group_term(kd, decode, pdecode, src, packed, qa, b0, GROUP, 0xffff, acc[0]);
            acc[1] = group_term(kd, decode, pdecode, src, packed, qa, b0 + GROUP, GROUP, 0xffff, acc[1]);
        }
        /* the last one or two groups, the second one short (constant
         * indexes: acc stays in registers) */
        if (b0 < end) {
            const uint32_t c = end - b0 < GROUP ? end - b0 : GROUP;
            acc[0] = group_term(kd, decode, pdecode, src, packed, qa, b0, c, (__mmask16)((1u << c) - 1), acc[0]);
            b0 += GROUP;
        }
        if (b0 < end)
            acc[1] = group_term(kd, decode, pdecode, src, packed, qa, b0, end - b0, (__mmask16)((1u << (end - b0)) - 1),
                                acc[1]);
        for (int h = 0; h < 2; h++)
            total[h] = c0 == 0 ? acc[h] : _mm512_add_ps(total[h], acc[h]);
    }
    return lanes_tree(total);
}

/* The many-token product (qa grouped), lanes = tokens: block b's sum for 16
 * tokens is one vector: vpdpbusd of each 4-byte word of the weight codes,
 * broadcast, with the tokens' 4 codes at that place (di_qa_tblock), so no
 * lane folding; the 32 canonical lanes are 32 vectors over tokens. Two
 * chains: a 16-weight group is 4 words; one group's words alternate. */
INLINE __m512 token_sums(const int_kind *kd, const uint32_t *u, const float *k, uint32_t j, const di_qa_tblock *tb)
{
    __m512i x[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int i = 0; i < 8; i++) {
        const int h = kd->groups == 2 ? i / 4 : i % 2;
        x[h] = _mm512_dpbusd_epi32(x[h], _mm512_set1_epi32((int)u[i]), _mm512_load_si512(tb->codes[i]));
    }
    return token_P(kd, x, k, j, tb);
}

#define TILE_ROWS 4u /* rows sharing each load of the tokens' codes */

/* Block b of the tile's nr rows against a group of 16 tokens, added to
 * their lanes b % 32 (first: the lanes' first block, added to +0). */
INLINE void tile_block(const int_kind *kd, const tile_rows *t, uint32_t nr, uint32_t nb, uint32_t b,
                       const di_qa_tblock *tb, __m512 (*acc)[DI_LANES], int first)
{
    for (uint32_t q = 0; q < nr; q++) {
        const size_t at = (size_t)q * nb + b;
        const __m512 P = token_sums(kd, t->u + at * 8, t->k + (size_t)q * 2 * nb, b, tb);
        acc[q][b % DI_LANES] = token_step(kd, t, at, P, tb, first ? _mm512_setzero_ps() : acc[q][b % DI_LANES]);
    }
}

/* Rows r..r + nr (nr <= TILE_ROWS), decoded once, against every token
 * group: the rows share each load of the tokens' codes, so those are read
 * from L2 once per TILE_ROWS rows (a block of 16 tokens is 960 bytes). */
INLINE void grouped_tile(const int_kind *kd, decode_fn decode, packed_fn pdecode, const di_weight *w, uint32_t r,
                         uint32_t nr, const di_qa *qa, float *y, const tile_rows *t)
{
    const uint32_t nb = qa->nb, groups = di_qa_groups(qa->n_tokens);
    tile_decode(kd, decode, pdecode, w, r, nr, TILE_ROWS, nb, t);
    __m512 lane[TILE_ROWS][DI_LANES], total[TILE_ROWS][DI_LANES];
    for (uint32_t gi = 0; gi < groups; gi++) {
        const di_qa_tblock *tok = qa->tok + (size_t)gi * nb;
        for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
            const uint32_t end = di_chunk_end(nb, c0);
            /* the first chunk's lanes are the totals (di_lane_combine), so no copy */
            __m512(*acc)[DI_LANES] = c0 == 0 ? total : lane;
            /* a lane's first block adds to +0 from a register: only the lanes
             * no block reaches are stored as zeros (a memset of every lane
             * was 7% of the Q4_K product) */
            const uint32_t first_end = end - c0 < DI_LANES ? end : c0 + DI_LANES;
            for (uint32_t q = 0; q < nr; q++)
                for (uint32_t l = first_end - c0; l < DI_LANES; l++)
                    acc[q][l] = _mm512_setzero_ps();
            for (uint32_t b = c0; b < first_end; b++)
                tile_block(kd, t, nr, nb, b, tok + b, acc, 1);
            for (uint32_t b = first_end; b < end; b++)
                tile_block(kd, t, nr, nb, b, tok + b, acc, 0);
            for (uint32_t q = 0; q < nr && c0 > 0; q++)
                for (uint32_t l = 0; l < DI_LANES; l++)
                    total[q][l] = _mm512_add_ps(total[q][l], lane[q][l]);
        }
        const uint32_t tn = qa->n_tokens - gi * DI_QA_TOKENS < DI_QA_TOKENS ? qa->n_tokens - gi * DI_QA_TOKENS
                                                                             : DI_QA_TOKENS;
        for (uint32_t q = 0; q < nr; q++)
            tile_row_out(total[q], tn, y, w->n_out, gi * DI_QA_TOKENS, r + q);
    }
}

INLINE void rows_grouped(const int_kind *kd, decode_fn decode, packed_fn pdecode, const di_weight *w, uint32_t r0,
                         uint32_t r1, const di_qa *qa, float *y, float *scratch)
{
    const tile_rows t = tile_layout(scratch, qa->nb, TILE_ROWS);
    uint32_t r = r0;
    for (; r + TILE_ROWS <= r1; r += TILE_ROWS)
        grouped_tile(kd, decode, pdecode, w, r, TILE_ROWS, qa, y, &t);
    if (r < r1) /* the rest in one tile: the tokens' codes are read once for them too */
        grouped_tile(kd, decode, pdecode, w, r, r1 - r, qa, y, &t);
}

/* Rows [r0, r1) for every token: one token's lanes stay in registers (the
 * decode step), runs of up to 16 keep theirs in the scratch. */
INLINE void rows_body(const int_kind *kd, decode_fn decode, packed_fn pdecode, const di_weight *w, uint32_t r0,
                      uint32_t r1, const di_qa *qa, float *y, float *scratch)
{
    if (qa->grouped) {
        rows_grouped(kd, decode, pdecode, w, r0, r1, qa, y, scratch);
        return;
    }
    token_lanes *tl = (token_lanes *)(void *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    for (uint32_t r = r0; r < r1; r++) {
        const row_src src = row_source(w, r, pdecode);
        if (qa->n_tokens == 1) {
            /* packed a constant in each call: two loops, no test per group */
            y[r] = src.packed ? token_dot(kd, decode, pdecode, &src, 1, qa)
                              : token_dot(kd, decode, pdecode, &src, 0, qa);
            continue;
        }
        for (uint32_t t0 = 0; t0 < qa->n_tokens; t0 += DI_QA_TOKENS) {
            const uint32_t tn = qa->n_tokens - t0 < DI_QA_TOKENS ? qa->n_tokens - t0 : DI_QA_TOKENS;
            row_run(kd, decode, pdecode, &src, qa, t0, tn, tl, y + (size_t)t0 * w->n_out + r, w->n_out);
        }
    }
}

#define ROWS_OF(name, kind, decoder, packed_decoder)                                                       \
    static void rows_##name(const di_weight *w, uint32_t r0, uint32_t r1, const di_qa *qa, float *y,   \
                            float *scratch)                                                            \
    {                                                                                                  \
        rows_body(&KINDS[kind], decoder, packed_decoder, w, r0, r1, qa, y, scratch);                   \
    }
ROWS_OF(q8_0, K_Q8_0, decode_q8_0, packed_q8_0)
ROWS_OF(q5_0, K_Q5_0, decode_q5_0, packed_q5_0)
ROWS_OF(q4_k, K_Q4_K, decode_q4_k, packed_q4_k)
ROWS_OF(q6_k, K_Q6_K, decode_q6_k, packed_q6_k)

void di_int_rows_avx512(const di_weight *w, uint32_t r0, uint32_t r1, const void *buf, float *y, float *scratch)
{
    const di_qa *qa = buf;
    switch (w->type) {
    case DI_TYPE_Q8_0: rows_q8_0(w, r0, r1, qa, y, scratch); return;
    case DI_TYPE_Q5_0: rows_q5_0(w, r0, r1, qa, y, scratch); return;
    case DI_TYPE_Q4_K: rows_q4_k(w, r0, r1, qa, y, scratch); return;
    case DI_TYPE_Q6_K: rows_q6_k(w, r0, r1, qa, y, scratch); return;
    default: rows_body(kind_of(w->type), NULL, NULL, w, r0, r1, qa, y, scratch); return;
    }
}

/* ---- packing (the head comment's layout) ------------------------------------------------- */

size_t di_int_packed_row_bytes_avx512(uint32_t type, uint32_t n_in)
{
    packed_layout l;
    if (!di_int_type(type) || n_in % di_weight_block_elems(type) != 0 || !packed_layout_of(type, n_in / DI_QA_BLOCK, &l))
        return 0;
    return (l.end + 63) / 64 * 64;
}

/* c x 4 bytes of x (lanes 0..c-1) to p. */
INLINE void store_words(uint8_t *p, __mmask16 live, __m512i x)
{
    if (live == 0xffff)
        _mm512_storeu_si512((void *)p, x);
    else
        _mm512_mask_storeu_epi32((void *)p, live, x);
}

/* A group of a row from the file's blocks, through this kernel's decoder
 * of the type (so the packed codes are the ones it multiplies unpacked). */
INLINE void pack_group(const int_kind *kd, decode_fn decode, const uint8_t *row, uint32_t b0, uint32_t c,
                       const packed_layout *l, uint8_t *dst)
{
    vgroup g;
    decode(row, b0, c, &g);
    _Alignas(64) uint8_t u[GROUP][32]; /* block j's 32 codes u */
    for (int q = 0; q < 8; q++) {
        _mm256_store_si256((void *)u[pair_order(2 * q, kd->order)], _mm512_castsi512_si256(g.u[q]));
        _mm256_store_si256((void *)u[pair_order(2 * q + 1, kd->order)], _mm512_extracti64x4_epi64(g.u[q], 1));
    }
    const __mmask16 live = (__mmask16)((1u << c) - 1);
    const __m512i first = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(8)); /* word 0 of each block, in words */
    __m512i w[8]; /* word k of each block */
    for (int k = 0; k < 8; k++)
        w[k] = _mm512_i32gather_epi32(_mm512_add_epi32(first, _mm512_set1_epi32(k)), (const void *)u, 4);
    uint8_t *out = dst + l->u + (size_t)l->u_bytes * b0;
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    if (kd->type == DI_TYPE_Q8_0) {
        for (uint32_t k = 0; k < 8; k++)
            store_words(out + 4 * c * k, live, w[k]);
    } else {
        for (uint32_t p = 0; p < 4; p++)
            store_words(out + 4 * c * p, live,
                        _mm512_or_si512(_mm512_and_si512(w[p], lo4), _mm512_slli_epi16(_mm512_and_si512(w[p + 4], lo4), 4)));
    }
    if (kd->type == DI_TYPE_Q5_0)
        for (uint32_t k = 0; k < 8; k++) {
            const uint64_t bits = _mm512_test_epi8_mask(w[k], _mm512_set1_epi8(0x10));
            memcpy(dst + l->h + 64 * (size_t)(b0 / GROUP) + 8 * k, &bits, 8);
        }
    if (kd->type == DI_TYPE_Q6_K) {
        for (uint32_t p = 0; p < 2; p++) {
            __m512i h = _mm512_setzero_si512();
            for (uint32_t q = 0; q < 4; q++) {
                const __m512i top = _mm512_and_si512(_mm512_srli_epi16(w[4 * p + q], 4), _mm512_set1_epi8(3));
                h = _mm512_or_si512(h, _mm512_slli_epi16(top, 2 * q));
            }
            store_words(dst + l->h + 8 * (size_t)b0 + 4 * c * p, live, h);
        }
        _Alignas(64) int32_t k[2 * GROUP]; /* [k0, k1] of blocks 0-7, then 8-15 */
        _mm512_store_si512(k, g.k[0]);
        _mm512_store_si512(k + GROUP, g.k[1]);
        uint8_t *kk = dst + l->k + 2 * (size_t)b0;
        for (uint32_t j = 0; j < c; j++)
            kk[j] = (uint8_t)(int8_t)k[2 * j], kk[c + j] = (uint8_t)(int8_t)k[2 * j + 1];
    }
}

/* Q4_K's S region of the group at b0 (the head comment), from the file's
 * super-blocks. */
static void pack_q4_k_scales(const uint8_t *row, uint32_t b0, uint32_t nb, uint8_t *s)
{
    memset(s, 0, 32);
    for (uint32_t j = 0; j < GROUP && b0 + j < nb; j++) {
        int k, m;
        const uint8_t *blk = row + (size_t)((b0 + j) / 8) * DI_BLOCK_BYTES_Q4_K;
        di_qb_k_scale_min(blk + DI_OFF_SC_Q4_K, (int)((b0 + j) % 8), &k, &m);
        s[j] = (uint8_t)(k | (m >> 4) << 6);
        s[16 + j % 8] |= (uint8_t)((m & 15) << (4 * (j / 8)));
    }
    for (uint32_t h = 0; h < 2 && b0 + 8 * h < nb; h++) {
        const uint8_t *blk = row + (size_t)((b0 + 8 * h) / 8) * DI_BLOCK_BYTES_Q4_K;
        memcpy(s + 24 + 2 * h, blk + DI_OFF_D_Q4_K, 2);
        memcpy(s + 28 + 2 * h, blk + DI_OFF_M_Q4_K, 2);
    }
}

void di_int_pack_rows_avx512(const di_weight *w, uint32_t r0, uint32_t r1, uint8_t *dst, size_t stride)
{
    const uint32_t nb = w->n_in / DI_QA_BLOCK, bytes = di_weight_block_bytes(w->type);
    decode_fn decode = w->type == DI_TYPE_Q8_0   ? decode_q8_0
                       : w->type == DI_TYPE_Q5_0 ? decode_q5_0
                       : w->type == DI_TYPE_Q4_K ? decode_q4_k
                       : w->type == DI_TYPE_Q6_K ? decode_q6_k
                                                 : NULL;
    packed_layout l;
    if (!decode || !packed_layout_of(w->type, nb, &l))
        return;
    const int_kind *kd = kind_of(w->type);
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        uint8_t *out = dst + (size_t)r * stride;
        memset(out + l.end, 0, stride - l.end);
        for (uint32_t b0 = 0; b0 < nb; b0 += GROUP)
            pack_group(kd, decode, row, b0, nb - b0 < GROUP ? nb - b0 : GROUP, &l, out);
        for (uint32_t b = 0; b < nb && (w->type == DI_TYPE_Q8_0 || w->type == DI_TYPE_Q5_0); b++)
            memcpy(out + l.d + 2 * (size_t)b, row + (size_t)b * bytes + di_weight_field(w->type, DI_FIELD_D), 2);
        for (uint32_t b0 = 0; b0 < nb && w->type == DI_TYPE_Q4_K; b0 += GROUP)
            pack_q4_k_scales(row, b0, nb, out + l.sb + 2 * (size_t)b0);
        for (uint32_t sb = 0; sb < nb / 8 && w->type == DI_TYPE_Q6_K; sb++)
            memcpy(out + l.sb + 2 * (size_t)sb, row + (size_t)sb * bytes + DI_OFF_D_Q6_K, 2);
    }
}

/* ---- the activations ------------------------------------------------------------------ */

/* int_dot.h's di_qa_row in vectors: a block is two registers; its max by
 * bits, its factors from di_qa_factors, the same three multiplications and
 * the rounding by adding and taking off 1.5 * 2^23, all in the contract's
 * rounding; a block whose max is 0, subnormal, infinite or NaN takes
 * di_qa_block itself. */
static void qa_row(const float *x, uint32_t n, int8_t *codes, float *scales, int16_t *sums)
{
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    for (uint32_t b = 0; b < n / DI_QA_BLOCK; b++) {
        const float *xb = x + (size_t)b * DI_QA_BLOCK;
        const __m512 half[2] = {_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16)};
        const uint32_t max_bits = _mm512_reduce_max_epu32(
            _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(half[0]), magnitude),
                             _mm512_and_si512(_mm512_castps_si512(half[1]), magnitude)));
        if (max_bits < 0x00800000u || max_bits >= 0x7f800000u) {
            scales[b] = di_qa_block(xb, codes + (size_t)b * DI_QA_BLOCK, sums + 2 * (size_t)b);
            continue;
        }
        float f[3];
        di_qa_factors(max_bits, f);
        for (int h = 0; h < 2; h++) {
            __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(half[h], _mm512_set1_ps(f[0])), _mm512_set1_ps(f[1])),
                                     _mm512_set1_ps(f[2]));
            v = _mm512_sub_ps(_mm512_add_ps(v, magic), magic);
            const __m512i c = _mm512_cvttps_epi32(v); /* an integer already: exact */
            _mm_storeu_si128((__m128i *)(void *)(codes + (size_t)b * DI_QA_BLOCK + 16 * h), _mm512_cvtepi32_epi8(c));
            sums[2 * (size_t)b + (size_t)h] = (int16_t)_mm512_reduce_add_epi32(c);
        }
        scales[b] = di_qa_scale(max_bits);
    }
}

/* Grouped from DI_QA_GROUP_MIN tokens on; else the codes in the order the
 * kernel reads them with w: word k of a group's blocks side by side for
 * packed weights (order 2), blocks 1 and 2 of every 4 swapped for Q4_K and
 * Q5_K read from the file (order 1). */
uint32_t di_int_layout_avx512(const di_weight *w, uint32_t n_tokens, void *buf)
{
    di_qa *qa = di_qa_layout(buf, w->n_in, n_tokens, n_tokens >= DI_QA_GROUP_MIN);
    const int_kind *kd = kind_of(w->type);
    if (!qa->grouped)
        qa->order = w->packed ? 2 : kd && kd->order ? 1 : 0;
    return di_qa_units(qa);
}

void di_int_quantize_avx512(const di_weight *w, const float *x, void *buf, uint32_t u0, uint32_t u1)
{
    (void)w;
    di_qa *qa = buf;
    di_qa_fill(qa, x, u0, u1, qa_row);
    uint32_t t0, t1;
    di_qa_unit_tokens(qa, u0, u1, &t0, &t1);
    if (qa->order == 2)
        for (uint32_t t = t0; t < t1; t++)
            for (uint32_t b0 = 0; b0 < qa->nb; b0 += GROUP) {
                const uint32_t c = qa->nb - b0 < GROUP ? qa->nb - b0 : GROUP;
                int8_t *codes = qa->codes + (size_t)t * qa->n + (size_t)b0 * DI_QA_BLOCK;
                int8_t tmp[GROUP * DI_QA_BLOCK];
                memcpy(tmp, codes, c * DI_QA_BLOCK);
                for (uint32_t k = 0; k < 8; k++)
                    for (uint32_t j = 0; j < c; j++)
                        memcpy(codes + 4 * c * k + 4 * j, tmp + DI_QA_BLOCK * j + 4 * k, 4);
            }
    if (qa->order == 1)
        for (uint32_t t = t0; t < t1; t++)
            for (uint32_t b = 0; b + 4 <= qa->nb; b += 4) {
                int8_t *c = qa->codes + (size_t)t * qa->n + (size_t)b * DI_QA_BLOCK;
                int8_t tmp[DI_QA_BLOCK];
                memcpy(tmp, c + DI_QA_BLOCK, DI_QA_BLOCK);
                memcpy(c + DI_QA_BLOCK, c + 2 * DI_QA_BLOCK, DI_QA_BLOCK);
                memcpy(c + 2 * DI_QA_BLOCK, tmp, DI_QA_BLOCK);
            }
}

DI_X86_END
#endif /* DI_HAVE_X86_PATHS */
