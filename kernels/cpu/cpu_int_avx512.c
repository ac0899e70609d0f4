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

/* ---- the weight side and the tile ---------------------------------------------------
 * The kinds of weight, the decoders of the file's blocks and of the packed
 * layout (described above), where a row is read from, and the many-token
 * product's tile of decoded rows and its float stages. */

#define INLINE static inline __attribute__((always_inline))
#define GROUP 16u /* blocks per group */
/* Bytes ahead of the group being read that it asks the caches for: the
 * hardware prefetcher alone leaves one thread at ~40% of DRAM bandwidth
 * (measured on the AMD EPYC, docs/PERFORMANCE-LOG.md). */
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

/* Indices of KINDS, so a kernel for one type reads its row as constants. */
enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0, K_IQ4_NL, K_Q2_K, K_Q3_K, K_Q4_K, K_Q5_K, K_Q6_K, K_IQ4_XS };

static const int_kind KINDS[] = {
    {DI_TYPE_Q4_0, 3, 1, 0, 0, 0},   {DI_TYPE_Q4_1, -1, 1, 1, 0, 0},  {DI_TYPE_Q5_0, 4, 1, 0, 0, 0},
    {DI_TYPE_Q5_1, -1, 1, 1, 0, 0},  {DI_TYPE_Q8_0, 7, 1, 0, 0, 0},   {DI_TYPE_IQ4_NL, 7, 1, 0, 0, 0},
    {DI_TYPE_Q2_K, -1, 2, 2, 1, 0},  {DI_TYPE_Q3_K, 2, 2, 0, 1, 0},   {DI_TYPE_Q4_K, -1, 1, 1, 1, 1},
    {DI_TYPE_Q5_K, -1, 1, 1, 1, 1},  {DI_TYPE_Q6_K, 5, 2, 0, 1, 0},   {DI_TYPE_IQ4_XS, 7, 1, 0, 1, 0},
};

static inline const int_kind *kind_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        if (KINDS[i].type == type)
            return &KINDS[i];
    return NULL;
}

/* Position p of a group holds block pair_order(p) (an involution). */
static inline int pair_order(int p, int order)
{
    return order && (p % 4 == 1 || p % 4 == 2) ? p ^ 3 : p;
}

/* ---- decoders ------------------------------------------------------------------------ */

/* Any type, any count of blocks (the tails, and the types without a
 * vector decoder), through int_dot.h's own field readers. */
static inline void decode_scalar(const int_kind *kd, const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g)
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
    const uint32_t pair = di_qb_u16(sb + at) | (count > 8 ? (uint32_t)di_qb_u16(sb + bytes + at) << 16 : 0u);
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)pair));
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(f));
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

/* The scales, D and mins of the group's one or two Q4_K / Q5_K super-blocks
 * (`bytes` apart: the file's, or the packed layout's 16-byte heads).
 * Each super-block's 12 scale bytes are words w0, w1, w2 (ggml's 6-bit
 * packing, docs/QUANTS.md): sub-blocks 0-3 take sc = w0 & 0x3f.., m = w1 &
 * 0x3f..; sub-blocks 4-7 take sc = (w2 & 0x0f..) | (w0 >> 6 & 0x03..) << 4
 * and m = (w2 >> 4 & 0x0f..) | (w1 >> 6 & 0x03..) << 4. Both super-blocks
 * and both of (sc, m) are the four words of one register. */
INLINE void k_factors(uint32_t type, const uint8_t *sb, uint32_t bytes, uint32_t count, vgroup *g)
{
    const int at_sc = di_weight_field(type, DI_FIELD_SC);
    /* 16 bytes from the scales on stay inside the block (qs follow them) */
    const __m128i x0 = _mm_loadu_si128((const void *)(sb + at_sc));
    const __m128i x1 = count > 8 ? _mm_loadu_si128((const void *)(sb + bytes + at_sc)) : _mm_setzero_si128();
    const __m128i x = _mm_unpacklo_epi64(x0, x1);                                       /* w0 w1 w0' w1' */
    const __m128i y = _mm_shuffle_epi32(_mm_unpackhi_epi64(x0, x1), _MM_SHUFFLE(2, 2, 0, 0)); /* w2 w2 w2' w2' */
    const __m128i lo = _mm_and_si128(x, _mm_set1_epi32(0x3f3f3f3f));
    const __m128i y4 = _mm_and_si128(_mm_srlv_epi32(y, _mm_setr_epi32(0, 4, 0, 4)), _mm_set1_epi32(0x0f0f0f0f));
    const __m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(x, 6), _mm_set1_epi32(0x03030303)), 4);
    const __m128i hi = _mm_or_si128(y4, top);
    const __m128i first = _mm_unpacklo_epi32(lo, hi), second = _mm_unpackhi_epi32(lo, hi); /* sc sc m m */
    g->k[0] = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(first, second));
    const __m512 mf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi64(first, second)));
    g->d = two_halves(sb, bytes, di_weight_field(type, DI_FIELD_D), count);
    const __m512 dmin = two_halves(sb, bytes, di_weight_field(type, DI_FIELD_M), count);
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
    k_factors(DI_TYPE_Q4_K, sb, DI_BLOCK_BYTES_Q4_K, count, g);
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

/* ---- decoders of the packed layout (cpu_int.h "Packed weights") ------------------------ */

/* A decoded packed group: u[k] holds word k of each of its blocks (lane j:
 * block b0 + j), k[h] the scale of group h of each block (k[0] alone for
 * the types of one group), d and n0 the blocks' D and min factor. Lanes
 * past the group's blocks are 0. */
typedef struct pgroup {
    __m512i u[8];
    __m512i k[2];
    __m512 d, n0;
} pgroup;

/* c x 4 bytes at p into lanes 0..c-1, 0 in the rest. A short group's
 * registers are read whole and masked in the register: the packed buffer
 * and the activations have slack after their ends, and a masked load whose
 * masked-off part crosses a cache line took an assist costing about 100
 * cycles on the Xeon (a 640-weight row's short group ran 10 times slower). */
INLINE __m512i load_words(const uint8_t *p, __mmask16 live)
{
    const __m512i x = _mm512_loadu_si512((const void *)p);
    return live == 0xffff ? x : _mm512_maskz_mov_epi32(live, x);
}

/* The N region's four registers of nibble pairs into u[0..7]. */
INLINE void packed_nibbles(const uint8_t *n, uint32_t c, __mmask16 live, pgroup *g)
{
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    for (uint32_t p = 0; p < 4; p++) {
        const __m512i x = load_words(n + 4 * c * p, live);
        g->u[p] = _mm512_and_si512(x, lo4);
        g->u[p + 4] = _mm512_and_si512(_mm512_srli_epi16(x, 4), lo4);
    }
}

/* The blocks' binary16 d in the D region. */
INLINE __m512 packed_d(const uint8_t *d, __mmask16 live)
{
    return _mm512_maskz_mov_ps(live, _mm512_cvtph_ps(_mm256_loadu_si256((const void *)d)));
}

/* Where each region of a packed row of nb blocks starts (the head
 * comment), and where the row's bytes end; 0 for a type with no packed
 * layout. */
typedef struct packed_layout {
    size_t u, h, k, d, sb, end;
    uint32_t u_bytes; /* of U (or N) per block */
} packed_layout;

static inline int packed_layout_of(uint32_t type, uint32_t nb, packed_layout *l)
{
    const size_t n = nb, groups = (n + GROUP - 1) / GROUP;
    *l = (packed_layout){0, 0, 0, 0, 0, 0, 16};
    switch (type) {
    case DI_TYPE_Q8_0: l->u_bytes = 32, l->d = 32 * n, l->end = l->d + 2 * n; return 1;
    case DI_TYPE_Q5_0: l->h = 16 * n, l->d = l->h + 64 * groups, l->end = l->d + 2 * n; return 1;
    case DI_TYPE_Q4_K: l->sb = 16 * n, l->end = l->sb + 32 * groups; return 1;
    case DI_TYPE_Q6_K: l->h = 16 * n, l->k = l->h + 8 * n, l->sb = l->k + 2 * n, l->end = l->sb + n / 4; return 1;
    default: return 0;
    }
}

/* A packed row's regions, for reading. */
typedef struct packed_row {
    const uint8_t *u, *h, *k, *d, *sb;
    uint32_t u_bytes;
} packed_row;

INLINE packed_row packed_regions(uint32_t type, const uint8_t *row, uint32_t nb)
{
    packed_layout l;
    packed_layout_of(type, nb, &l);
    return (packed_row){row + l.u, row + l.h, row + l.k, row + l.d, row + l.sb, l.u_bytes};
}

INLINE void packed_q8_0(const packed_row *r, uint32_t b0, uint32_t c, __mmask16 live, pgroup *g)
{
    for (uint32_t k = 0; k < 8; k++)
        g->u[k] = load_words(r->u + 32 * (size_t)b0 + 4 * c * k, live);
    g->d = packed_d(r->d + 2 * (size_t)b0, live);
}

INLINE void packed_q5_0(const packed_row *r, uint32_t b0, uint32_t c, __mmask16 live, pgroup *g)
{
    packed_nibbles(r->u + 16 * (size_t)b0, c, live, g);
    const uint8_t *h = r->h + 64 * (size_t)(b0 / GROUP);
    const __m512i sixteen = _mm512_set1_epi8(0x10);
    for (uint32_t k = 0; k < 8; k++) {
        uint64_t bits;
        memcpy(&bits, h + 8 * k, 8);
        g->u[k] = _mm512_mask_mov_epi8(g->u[k], (__mmask64)bits, _mm512_or_si512(g->u[k], sixteen));
    }
    g->d = packed_d(r->d + 2 * (size_t)b0, live);
}

/* Q4_K's S region (cpu_int_avx512.c's head comment): 16 bytes k | (m >> 4)
 * << 6, 8 bytes of m's low nibbles, the super-blocks' d and dmin; so the
 * scales are a few byte operations, not the file's 6-bit unpacking. */
INLINE void packed_q4_k(const packed_row *r, uint32_t b0, uint32_t c, __mmask16 live, pgroup *g)
{
    packed_nibbles(r->u + 16 * (size_t)b0, c, live, g);
    const uint8_t *s = r->sb + 2 * (size_t)b0;
    const __m128i lo4 = _mm_set1_epi8(0x0f);
    const __m128i km = _mm_loadu_si128((const void *)s), mn = _mm_loadl_epi64((const void *)(s + 16));
    const __m128i m_low = _mm_unpacklo_epi64(_mm_and_si128(mn, lo4), _mm_and_si128(_mm_srli_epi16(mn, 4), lo4));
    const __m128i m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(km, 2), _mm_set1_epi8(0x30)), m_low);
    g->k[0] = _mm512_cvtepu8_epi32(_mm_and_si128(km, _mm_set1_epi8(0x3f)));
    /* [d, d', dmin, dmin'] of the two super-blocks, to lanes 0-7 and 8-15 */
    const __m512 f = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64((const void *)(s + 24))));
    g->d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), f);
    const __m512 dmin = _mm512_permutexvar_ps(_mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), f);
    g->n0 = _mm512_xor_ps(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m))), _mm512_set1_ps(-0.0f));
}

INLINE void packed_q6_k(const packed_row *r, uint32_t b0, uint32_t c, __mmask16 live, pgroup *g)
{
    packed_nibbles(r->u + 16 * (size_t)b0, c, live, g);
    const __m512i top2 = _mm512_set1_epi8(0x30); /* bits 4, 5 of each byte */
    for (uint32_t p = 0; p < 2; p++) {
        const __m512i h = load_words(r->h + 8 * (size_t)b0 + 4 * c * p, live);
        g->u[4 * p + 0] = _mm512_or_si512(g->u[4 * p + 0], _mm512_and_si512(_mm512_slli_epi16(h, 4), top2));
        g->u[4 * p + 1] = _mm512_or_si512(g->u[4 * p + 1], _mm512_and_si512(_mm512_slli_epi16(h, 2), top2));
        g->u[4 * p + 2] = _mm512_or_si512(g->u[4 * p + 2], _mm512_and_si512(h, top2));
        g->u[4 * p + 3] = _mm512_or_si512(g->u[4 * p + 3], _mm512_and_si512(_mm512_srli_epi16(h, 2), top2));
    }
    const uint8_t *k = r->k + 2 * (size_t)b0;
    g->k[0] = _mm512_maskz_mov_epi32(live, _mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)k)));
    g->k[1] = _mm512_maskz_mov_epi32(live, _mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)(k + c))));
    g->d = two_halves(r->sb + 2 * (size_t)(b0 / 8), 2, 0, c);
}

typedef void (*packed_fn)(const packed_row *r, uint32_t b0, uint32_t c, __mmask16 live, pgroup *g);

typedef void (*decode_fn)(const uint8_t *row, uint32_t b0, uint32_t count, vgroup *g);

/* Decodes the group of `count` blocks at b0 of a row (span bytes for 16
 * blocks) and asks the caches for the bytes `ahead` of it. */
INLINE void decode_group(const int_kind *kd, decode_fn decode, const uint8_t *row, uint32_t b0, uint32_t count,
                         uint32_t span, size_t ahead, vgroup *g)
{
    if (decode)
        decode(row, b0, count, g);
    else
        decode_scalar(kd, row, b0, count, g);
    const uint8_t *here = row + (size_t)b0 * span / GROUP;
    for (uint32_t o = 0; o < span; o += 64)
        _mm_prefetch((const char *)(here + ahead + o), _MM_HINT_T0);
}

/* Row r of w as the kernels read it: the file's blocks (span bytes per
 * group), or, when the kernel has a packed decoder and w a packed copy, the
 * packed row's regions. */
typedef struct row_src {
    const uint8_t *row;
    uint32_t span;
    int packed;
    packed_row pr;
} row_src;

INLINE row_src row_source(const di_weight *w, uint32_t r, packed_fn pdecode)
{
    row_src src = {w->data + (size_t)r * w->row_bytes,
                   GROUP * DI_QA_BLOCK * di_weight_block_bytes(w->type) / di_weight_block_elems(w->type), 0, {0}};
    if (pdecode && w->packed) {
        src.row = w->packed + (size_t)r * w->packed_row_bytes;
        src.packed = 1;
        src.pr = packed_regions(w->type, src.row, w->n_in / DI_QA_BLOCK);
        src.span = GROUP * src.pr.u_bytes;
    }
    return src;
}

/* A packed group: decoded, and the U region asked for `ahead` bytes on
 * (the small regions follow it row by row; the hardware prefetcher keeps
 * up with them). */
INLINE void packed_group(packed_fn pdecode, const row_src *src, uint32_t b0, uint32_t count, __mmask16 live,
                         size_t ahead, pgroup *g)
{
    pdecode(&src->pr, b0, count, live, g);
    const uint8_t *here = src->pr.u + (size_t)b0 * src->pr.u_bytes;
    for (uint32_t o = 0; o < src->span; o += 64)
        _mm_prefetch((const char *)(here + ahead + o), _MM_HINT_T0);
}

/* ---- the many-token product's tile ---------------------------------------------------- */

/* A group's words as decoded from the packed layout (w[k]: word k of block
 * j in lane j) as the blocks' 32 bytes each, two blocks to a register
 * (out[m]: blocks 2m, 2m + 1, as the file's decoders give them): a
 * transposition of 8 x 16 words in three rounds of two-source permutes. */
INLINE void words_to_blocks(const __m512i w[8], __m512i out[8])
{
    const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    __m512i two[2][4]; /* [blocks 0-7 | 8-15][p]: 64-bit unit j: words 2p, 2p + 1 of block j */
    for (int p = 0; p < 4; p++) {
        two[0][p] = _mm512_permutex2var_epi32(w[2 * p], pair_lo, w[2 * p + 1]);
        two[1][p] = _mm512_permutex2var_epi32(w[2 * p], pair_hi, w[2 * p + 1]);
    }
    const __m512i quad_lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i quad_hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    const __m512i half_0 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i half_1 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (int side = 0; side < 2; side++)
        for (int q = 0; q < 2; q++) { /* blocks 8 side + 4 q .. + 3 */
            const __m512i idx = q ? quad_hi : quad_lo;
            /* 128-bit unit j: words 0-3 (w03) or 4-7 (w47) of block 4 q + j */
            const __m512i w03 = _mm512_permutex2var_epi64(two[side][0], idx, two[side][1]);
            const __m512i w47 = _mm512_permutex2var_epi64(two[side][2], idx, two[side][3]);
            out[4 * side + 2 * q] = _mm512_permutex2var_epi64(w03, half_0, w47);
            out[4 * side + 2 * q + 1] = _mm512_permutex2var_epi64(w03, half_1, w47);
        }
}

/* The decoded rows of a tile, whole (in the per-thread scratch): for row q
 * and block b, its 32 code bytes u (u[(q nb + b) 8 + i] is word i), its
 * scales k as floats (k[q 2nb + 2b + g] for the types of two groups, else
 * k[q 2nb + b]; exact: |k| <= 128), D and min factors. */
typedef struct tile_rows {
    uint32_t *u;      /* [rows][nb][8] */
    float *k;         /* [rows][2 nb] */
    float *d, *n0, *n1; /* [rows][nb] each */
} tile_rows;

/* A tile takes 52 bytes per row and block of 32 weights, plus alignment;
 * DI_MATMUL_SCRATCH gives DI_MATMUL_TILE_ROWS (16) rows of 32 floats per
 * block and 64 x 32 floats more. */
_Static_assert(32 + 2 * 4 + 3 * 4 <= 32 * sizeof(float), "a tile of up to 16 rows fits the matmul scratch");

static inline tile_rows tile_layout(void *scratch, uint32_t nb, uint32_t rows)
{
    uint8_t *p = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    tile_rows t;
    t.u = (uint32_t *)(void *)p, p += (size_t)rows * nb * 32;
    t.k = (float *)(void *)p, p += (size_t)rows * 2 * nb * 4;
    t.d = (float *)(void *)p, p += (size_t)rows * nb * 4;
    t.n0 = (float *)(void *)p, p += (size_t)rows * nb * 4;
    t.n1 = (float *)(void *)p;
    return t;
}

/* Stores a group's decoded codes (u[m]: blocks 2m, 2m + 1 in the order
 * `order` gives them) and factors (k: [k0, k1] of blocks 0-7 in k[0] and
 * 8-15 in k[1] for two groups, else one per block in k[0]) as tile row q's
 * blocks b0.. b0 + count. */
INLINE void tile_store_group(const int_kind *kd, const tile_rows *t, uint32_t nb, uint32_t q, uint32_t b0,
                             uint32_t count, const __m512i u[8], int order, const __m512i k[2], __m512 d, __m512 n0,
                             __m512 n1)
{
    /* straight from the registers: through a copy on the stack, each block's
     * reload missed store forwarding */
    uint32_t *row = t->u + ((size_t)q * nb + b0) * 8;
    for (uint32_t m = 0; m < 8 && 2 * m < count; m++) { /* position p holds block pair_order(p) */
        _mm256_storeu_si256((void *)(row + 8 * (uint32_t)pair_order((int)(2 * m), order)), _mm512_castsi512_si256(u[m]));
        if (2 * m + 1 < count)
            _mm256_storeu_si256((void *)(row + 8 * (uint32_t)pair_order((int)(2 * m + 1), order)),
                                _mm512_extracti64x4_epi64(u[m], 1));
    }
    const size_t at = (size_t)q * nb + b0;
    const __mmask16 live = (__mmask16)((1u << count) - 1);
    _mm512_mask_storeu_ps(t->d + at, live, d);
    if (kd->mins >= 1) /* the decoders set only the fields their type has */
        _mm512_mask_storeu_ps(t->n0 + at, live, n0);
    if (kd->mins == 2)
        _mm512_mask_storeu_ps(t->n1 + at, live, n1);
    /* straight from the registers too (a copy through the stack missed store forwarding) */
    float *kq = t->k + (size_t)q * 2 * nb;
    if (kd->has_k && kd->groups == 1)
        _mm512_mask_storeu_ps(kq + b0, live, _mm512_cvtepi32_ps(k[0]));
    if (kd->groups == 2) { /* [k0, k1] of blocks 0-7, then 8-15: 2 count floats */
        const uint32_t lo = count < 8 ? 2 * count : 16, hi = count > 8 ? 2 * (count - 8) : 0;
        _mm512_mask_storeu_ps(kq + 2 * b0, (__mmask16)((1u << lo) - 1), _mm512_cvtepi32_ps(k[0]));
        if (hi)
            _mm512_mask_storeu_ps(kq + 2 * b0 + 16, (__mmask16)((1u << hi) - 1), _mm512_cvtepi32_ps(k[1]));
    }
}

/* Rows r..r + nr of w decoded once into the tile, every block in block
 * order, from the packed copy where the kernel has a packed decoder and w
 * one, else from the file's blocks; the next `rows` rows are asked for. */
INLINE void tile_decode(const int_kind *kd, decode_fn decode, packed_fn pdecode, const di_weight *w, uint32_t r,
                        uint32_t nr, uint32_t rows, uint32_t nb, const tile_rows *t)
{
    for (uint32_t q = 0; q < nr; q++) {
        const row_src src = row_source(w, r + q, pdecode);
        for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK) {
            const uint32_t end = di_chunk_end(nb, c0);
            for (uint32_t b0 = c0; b0 < end; b0 += GROUP) {
                const uint32_t count = end - b0 < GROUP ? end - b0 : GROUP;
                if (src.packed) {
                    const __mmask16 live = (__mmask16)((1u << count) - 1);
                    pgroup g;
                    packed_group(pdecode, &src, b0, count, live, rows * w->packed_row_bytes, &g);
                    __m512i u[8], k[2] = {g.k[0], g.k[1]};
                    words_to_blocks(g.u, u);
                    if (kd->groups == 2) { /* [k0 of blocks 0-15], [k1 ...] as [k0, k1] per block */
                        const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
                        const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
                        k[0] = _mm512_permutex2var_epi32(g.k[0], lo, g.k[1]);
                        k[1] = _mm512_permutex2var_epi32(g.k[0], hi, g.k[1]);
                    }
                    tile_store_group(kd, t, nb, q, b0, count, u, 0, k, g.d, g.n0, _mm512_setzero_ps());
                } else {
                    vgroup g;
                    decode_group(kd, decode, src.row, b0, count, src.span, rows * w->row_bytes, &g);
                    tile_store_group(kd, t, nb, q, b0, count, g.u, kd->order, g.k, g.d, g.n0, g.n1);
                }
            }
        }
    }
}

/* The float P_b of 16 tokens from their exact int32 sums x[h] over the
 * block's 16-weight groups (one group: x[0] + x[1] is the block's sum, as
 * two chains leave it): less the offset times the code sums, times the
 * integer scale. A group sum times its k is below 2^24 (int_dot.h's bounds),
 * so converting and multiplying by (float)k is exact, and so is adding the
 * two groups' products. */
INLINE __m512 token_P(const int_kind *kd, const __m512i x[2], const float *k, uint32_t j, const di_qa_tblock *tb)
{
    if (kd->groups == 2) {
        __m512 P = _mm512_setzero_ps();
        for (int h = 0; h < 2; h++) {
            __m512i s = x[h];
            if (kd->off_shift >= 0)
                s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_load_si512(tb->s_half[h]), (unsigned)kd->off_shift));
            P = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(k[2 * j + (uint32_t)h]), P);
        }
        return P;
    }
    __m512i s = _mm512_add_epi32(x[0], x[1]);
    if (kd->off_shift >= 0)
        s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_load_si512(tb->s), (unsigned)kd->off_shift));
    return kd->has_k ? _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(k[j])) : _mm512_cvtepi32_ps(s);
}

/* The definition's float stages of block b of tile row q for 16 tokens,
 * added to their lane x (vectors over the tokens). */
INLINE __m512 token_step(const int_kind *kd, const tile_rows *t, size_t at, __m512 P, const di_qa_tblock *tb, __m512 x)
{
    x = _mm512_fmadd_ps(P, _mm512_mul_ps(_mm512_set1_ps(t->d[at]), _mm512_load_ps(tb->a)), x);
    if (kd->mins == 1)
        x = _mm512_fmadd_ps(_mm512_set1_ps(t->n0[at]), _mm512_load_ps(tb->as_full), x);
    if (kd->mins == 2) {
        x = _mm512_fmadd_ps(_mm512_set1_ps(t->n0[at]), _mm512_load_ps(tb->as_half[0]), x);
        x = _mm512_fmadd_ps(_mm512_set1_ps(t->n1[at]), _mm512_load_ps(tb->as_half[1]), x);
    }
    return x;
}

/* di_lane_tree of one row's 32 lanes (vectors over tokens), token by token,
 * and its tn outputs, output column `col` of token rows t0.. t0 + tn. */
INLINE void tile_row_out(__m512 *lane, uint32_t tn, float *y, uint32_t n_out, uint32_t t0, uint32_t col)
{
    for (uint32_t s = DI_LANES / 2; s >= 1; s /= 2)
        for (uint32_t l = 0; l < s; l++)
            lane[l] = _mm512_add_ps(lane[l], lane[l + s]);
    _Alignas(64) float out[DI_QA_TOKENS];
    _mm512_store_ps(out, lane[0]);
    for (uint32_t i = 0; i < tn; i++)
        y[(size_t)(t0 + i) * n_out + col] = out[i];
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
