/*
 * cpu_int_x86.c — the integer profile's block terms (cpu_int.h) with AVX2
 * and AVX-512 integer instructions.
 *
 * A block's 32 integer weights (Q8_0: its int8 bytes; Q5_0: nibbles and
 * fifth bits, minus 16) are gathered as 32 bytes, sign-extended to int16
 * (vpmovsxbw); vpmaddwd multiplies them with the activation codes' limbs
 * (di_int_limbs: c = 256 hi + lo) and adds adjacent products into int32 lanes
 * exactly: AVX-512 multiplies the high limbs by a copy of the weights
 * shifted left by 8 (256 q fits int16), AVX2 shifts the high limbs' int32
 * sums; either way (256 q) hi + q lo = q c.
 * The lanes of each block are then added together for 16 (AVX-512) or 8
 * (AVX2) blocks at once by a transpose-and-add tree, so one vector ends
 * holding one block sum per lane, which is converted to float; the block
 * scales d are gathered and multiplied by the token's. Integer addition is
 * exact, so the sums are the scalar reference's whatever the order, and the
 * conversions and products are the same single roundings.
 */
#include "cpu_int.h"

#ifdef DI_HAVE_X86_PATHS
#include <immintrin.h>
#include <string.h>

#include "int_dot.h"

#define INLINE static inline __attribute__((always_inline))

static inline uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v); /* x86 is little-endian, like the file */
    return v;
}

/* The nibbles of a 32-block whose byte j holds weight j (low nibble) and
 * weight j + 16 (high nibble), one per byte in weight order. */
__attribute__((target("avx2"))) INLINE __m256i nibbles32(const uint8_t *qs)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low4), _mm_and_si128(b, low4));
}
/* Weights are requested this far ahead of the block being read (the float
 * path's cpu_simd_body.h PREFETCH_AHEAD: decode streams every weight once). */
#define AHEAD 4096u

/* ---- AVX-512 -------------------------------------------------------------------- */

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* A block's 32 integer weights as int8, in weight order. */
T512 INLINE __m256i weights512(uint32_t type, const uint8_t *block)
{
    if (type == DI_TYPE_Q8_0)
        return _mm256_loadu_si256((const __m256i *)(const void *)(block + 2));
    const __m256i fifth = _mm256_maskz_mov_epi8((__mmask32)load_u32(block + 2), _mm256_set1_epi8(16));
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(block + 6), fifth), _mm256_set1_epi8(16));
}

/* The 16 int32 lanes of one block's products: (256 q) * hi + q * lo. */
T512 INLINE __m512i block512(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t b)
{
    const __m512i w = _mm512_cvtepi8_epi16(weights512(type, row + (size_t)b * di_int_block_bytes(type)));
    const int16_t *l = limbs + (size_t)b * 2 * DI_INT_BLOCK;
    const __m512i hi = _mm512_loadu_si512((const void *)l), lo = _mm512_loadu_si512((const void *)(l + DI_INT_BLOCK));
    return _mm512_add_epi32(_mm512_madd_epi16(_mm512_slli_epi16(w, 8), hi), _mm512_madd_epi16(w, lo));
}

/* q = (float)P and s = d * scales for the 16 blocks from g (the first `count`
 * of them are stored). */
T512 INLINE void terms512(uint32_t type, const uint8_t *row, __m512i P, const float *scales, uint32_t g,
                          uint32_t count, float *q, float *s)
{
    const int bytes = (int)di_int_block_bytes(type);
    const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(bytes));
    const __mmask16 k = (__mmask16)(count >= 16 ? 0xffffu : (1u << count) - 1u);
    /* each lane reads 4 bytes at its block's start: d, then 2 code bytes */
    const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, at, row + (size_t)g * (size_t)bytes, 1);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
    _mm512_mask_storeu_ps(q + g, k, _mm512_cvtepi32_ps(P));
    _mm512_mask_storeu_ps(s + g, k, _mm512_mul_ps(d, _mm512_maskz_loadu_ps(k, scales + g)));
}

/* Lanes a0 a1 a2 a3 of each 128-bit quarter of a and b -> a0+a2, b0+b2, a1+a3, b1+b3. */
T512 INLINE __m512i fold32_512(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}

/* Two folded pairs -> each quarter holds four blocks' partial sums. */
T512 INLINE __m512i fold64_512(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

/* Quarters 0+1 and 2+3 of a, then of b. */
T512 INLINE __m512i fold128_512(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Block g + k's lanes, or zeros for k >= count. */
T512 INLINE __m512i block_or_zero512(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t g,
                                     uint32_t k, uint32_t count)
{
    return k < count ? block512(type, row, limbs, g + k) : _mm512_setzero_si512();
}

/* Four blocks from g + k, folded: each 128-bit quarter holds partial sums
 * of the four. */
T512 INLINE __m512i four512(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t g, uint32_t k,
                            uint32_t count)
{
    return fold64_512(fold32_512(block_or_zero512(type, row, limbs, g, k, count),
                                 block_or_zero512(type, row, limbs, g, k + 1, count)),
                      fold32_512(block_or_zero512(type, row, limbs, g, k + 2, count),
                                 block_or_zero512(type, row, limbs, g, k + 3, count)));
}

/* The sums of blocks g..g+15 (zero past count), lane k for block g + k:
 * blocks are folded as they are read, so few registers stay live. */
T512 INLINE __m512i sums16(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t g, uint32_t count)
{
    const __m512i a = fold128_512(four512(type, row, limbs, g, 0, count), four512(type, row, limbs, g, 4, count));
    const __m512i b = fold128_512(four512(type, row, limbs, g, 8, count), four512(type, row, limbs, g, 12, count));
    return fold128_512(a, b);
}

T512 INLINE void terms_avx512(uint32_t type, const uint8_t *row, const int16_t *limbs, const float *scales,
                              uint32_t nb, float *q, float *s)
{
    const uint32_t bytes = di_int_block_bytes(type);
    uint32_t g = 0;
    for (; g + 16 <= nb; g += 16) {
        const uint8_t *at = row + (size_t)g * bytes;
        for (uint32_t o = 0; o < 16 * bytes; o += 64)
            _mm_prefetch((const char *)(uintptr_t)((uintptr_t)at + AHEAD + o), _MM_HINT_T0);
        terms512(type, row, sums16(type, at, limbs + (size_t)g * 2 * DI_INT_BLOCK, 0, 16), scales, g, 16, q, s);
    }
    if (g < nb) /* the last blocks, the missing ones zero */
        terms512(type, row, sums16(type, row + (size_t)g * bytes, limbs + (size_t)g * 2 * DI_INT_BLOCK, 0, nb - g),
                 scales, g, nb - g, q, s);
}

T512 void di_int_terms_avx512(uint32_t type, const uint8_t *row, const int16_t *limbs, const float *scales,
                              uint32_t nb, float *q, float *s)
{
    if (type == DI_TYPE_Q8_0) /* a constant type in each copy */
        terms_avx512(DI_TYPE_Q8_0, row, limbs, scales, nb, q, s);
    else
        terms_avx512(DI_TYPE_Q5_0, row, limbs, scales, nb, q, s);
}

/* ---- AVX2 ----------------------------------------------------------------------- */

#define T256 __attribute__((target("avx2,fma,f16c")))

/* Byte j is 16 where bit j of qh is set, else 0 (cpu_avx2.c's
 * sixteen_where_bits): each byte of qh is spread over 8 bytes, which keep
 * one bit each. */
T256 INLINE __m256i sixteen_where_bits(uint32_t qh)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(16));
}

/* A block's 32 integer weights as int8, in weight order. */
T256 INLINE __m256i weights256(uint32_t type, const uint8_t *block)
{
    if (type == DI_TYPE_Q8_0)
        return _mm256_loadu_si256((const __m256i *)(const void *)(block + 2));
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(block + 6), sixteen_where_bits(load_u32(block + 2))),
                           _mm256_set1_epi8(16));
}

/* The 8 int32 lanes of one block's products (two halves of 16 weights). */
T256 INLINE __m256i block256(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t b)
{
    const __m256i q8 = weights256(type, row + (size_t)b * di_int_block_bytes(type));
    const int16_t *l = limbs + (size_t)b * 2 * DI_INT_BLOCK;
    const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q8));
    const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q8, 1));
    const __m256i *v = (const __m256i *)(const void *)l; /* hi[0..16) hi[16..32) lo[0..16) lo[16..32) */
    /* the high limbs' sums shifted once, after the multiplication (exact: below 2^19 before) */
    const __m256i hi = _mm256_add_epi32(_mm256_madd_epi16(w0, _mm256_loadu_si256(v)),
                                        _mm256_madd_epi16(w1, _mm256_loadu_si256(v + 1)));
    const __m256i lo = _mm256_add_epi32(_mm256_madd_epi16(w0, _mm256_loadu_si256(v + 2)),
                                        _mm256_madd_epi16(w1, _mm256_loadu_si256(v + 3)));
    return _mm256_add_epi32(_mm256_slli_epi32(hi, 8), lo);
}

/* q = (float)P and s = d * scales for the 8 blocks from g (the first
 * `count` of them are stored). */
T256 INLINE void terms256(uint32_t type, const uint8_t *row, __m256i P, const float *scales, uint32_t g,
                          uint32_t count, float *q, float *s)
{
    const int bytes = (int)di_int_block_bytes(type);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i at = _mm256_mullo_epi32(iota, _mm256_set1_epi32(bytes));
    const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), iota); /* lanes < count */
    const __m256i raw = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                                    (const int *)(const void *)(row + (size_t)g * (size_t)bytes), at, k, 1);
    const __m256i h16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_and_si256(raw, _mm256_set1_epi32(0xffff)),
                                                                     _mm256_setzero_si256()), 0x08);
    const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(h16));
    _mm256_maskstore_ps(q + g, k, _mm256_cvtepi32_ps(P));
    _mm256_maskstore_ps(s + g, k, _mm256_mul_ps(d, _mm256_maskload_ps(scales + g, k)));
}

T256 INLINE __m256i fold32_256(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

T256 INLINE __m256i fold64_256(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

T256 INLINE __m256i block_or_zero256(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t g,
                                     uint32_t k, uint32_t count)
{
    return k < count ? block256(type, row, limbs, g + k) : _mm256_setzero_si256();
}

/* Four blocks from g + k, folded: each 128-bit half holds partial sums of
 * the four. */
T256 INLINE __m256i four256(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t g, uint32_t k,
                            uint32_t count)
{
    return fold64_256(fold32_256(block_or_zero256(type, row, limbs, g, k, count),
                                 block_or_zero256(type, row, limbs, g, k + 1, count)),
                      fold32_256(block_or_zero256(type, row, limbs, g, k + 2, count),
                                 block_or_zero256(type, row, limbs, g, k + 3, count)));
}

/* The sums of blocks g..g+7 (zero past count), lane k for block g + k. */
T256 INLINE __m256i sums8(uint32_t type, const uint8_t *row, const int16_t *limbs, uint32_t g, uint32_t count)
{
    const __m256i a = four256(type, row, limbs, g, 0, count), b = four256(type, row, limbs, g, 4, count);
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

T256 INLINE void terms_avx2(uint32_t type, const uint8_t *row, const int16_t *limbs, const float *scales,
                            uint32_t nb, float *q, float *s)
{
    const uint32_t bytes = di_int_block_bytes(type);
    uint32_t g = 0;
    for (; g + 8 <= nb; g += 8) {
        const uint8_t *at = row + (size_t)g * bytes;
        for (uint32_t o = 0; o < 8 * bytes; o += 64)
            _mm_prefetch((const char *)(uintptr_t)((uintptr_t)at + AHEAD + o), _MM_HINT_T0);
        terms256(type, row, sums8(type, at, limbs + (size_t)g * 2 * DI_INT_BLOCK, 0, 8), scales, g, 8, q, s);
    }
    if (g < nb) /* the last blocks, the missing ones zero */
        terms256(type, row, sums8(type, row + (size_t)g * bytes, limbs + (size_t)g * 2 * DI_INT_BLOCK, 0, nb - g),
                 scales, g, nb - g, q, s);
}

T256 void di_int_terms_avx2(uint32_t type, const uint8_t *row, const int16_t *limbs, const float *scales,
                            uint32_t nb, float *q, float *s)
{
    if (type == DI_TYPE_Q8_0) /* a constant type in each copy */
        terms_avx2(DI_TYPE_Q8_0, row, limbs, scales, nb, q, s);
    else
        terms_avx2(DI_TYPE_Q5_0, row, limbs, scales, nb, q, s);
}

#endif /* DI_HAVE_X86_PATHS */
