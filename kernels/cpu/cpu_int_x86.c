/*
 * cpu_int_x86.c — the integer profile's block sums (cpu_int.h) with AVX2 and
 * AVX-512 integer instructions.
 *
 * A Q8_0 block's 32 int8 codes are sign-extended to int16 (vpmovsxbw) and
 * multiplied with the block's 32 int16 activation codes by vpmaddwd, which
 * adds adjacent products into int32 lanes exactly (|q c| <= 2^22). The lanes
 * of each block are then added together for 16 (AVX-512) or 8 (AVX2) blocks
 * at once by a transpose-and-add tree, so one vector ends holding one block
 * sum per lane. Integer addition is exact, so the sums are the scalar
 * reference's whatever the order. (With int16 activations one 32-block is
 * one 512-bit vpmaddwd, so VNNI's vpdpwssd, which only fuses the add of an
 * accumulator, would save nothing here.)
 */
#include "cpu_int.h"

#ifdef DI_HAVE_X86_PATHS
#include <immintrin.h>

#include "int_dot.h"

#define INLINE static inline __attribute__((always_inline))
/* Weights are requested this far ahead of the block being read (the float
 * path's cpu_simd_body.h PREFETCH_AHEAD: decode streams every weight once). */
#define AHEAD 4096u

/* ---- AVX-512 -------------------------------------------------------------------- */

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* The 16 int32 lanes of one block's pair products. */
T512 INLINE __m512i block512(const uint8_t *row, const int16_t *codes, uint32_t b)
{
    const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(row + (size_t)b * DI_INT_Q8_0_BYTES + 2)));
    const __m512i c = _mm512_loadu_si512((const void *)(codes + (size_t)b * DI_INT_BLOCK));
    return _mm512_madd_epi16(w, c);
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

/* v[k] (16 lanes each) -> lane k = sum of v[k]'s lanes. */
T512 INLINE __m512i reduce16(const __m512i *v)
{
    __m512i p[8], q[4];
    for (int k = 0; k < 8; k++)
        p[k] = fold32_512(v[2 * k], v[2 * k + 1]);
    for (int k = 0; k < 4; k++)
        q[k] = fold64_512(p[2 * k], p[2 * k + 1]);
    return fold128_512(fold128_512(q[0], q[1]), fold128_512(q[2], q[3]));
}

T512 void di_int_q8_0_sums_avx512(const uint8_t *row, const int16_t *codes, uint32_t nb, int32_t *P)
{
    uint32_t g = 0;
    for (; g + 16 <= nb; g += 16) {
        const uint8_t *at = row + (size_t)g * DI_INT_Q8_0_BYTES;
        for (uint32_t o = 0; o < 16 * DI_INT_Q8_0_BYTES; o += 64)
            _mm_prefetch((const char *)(uintptr_t)((uintptr_t)at + AHEAD + o), _MM_HINT_T0);
        __m512i v[16];
        for (int k = 0; k < 16; k++)
            v[k] = block512(row, codes, g + (uint32_t)k);
        _mm512_storeu_si512((void *)(P + g), reduce16(v));
    }
    if (g < nb) { /* the last blocks, the missing ones zero */
        __m512i v[16];
        for (uint32_t k = 0; k < 16; k++)
            v[k] = g + k < nb ? block512(row, codes, g + k) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(P + g, (__mmask16)((1u << (nb - g)) - 1u), reduce16(v));
    }
}

/* ---- AVX2 ----------------------------------------------------------------------- */

#define T256 __attribute__((target("avx2,fma,f16c")))

/* The 8 int32 lanes of one block's pair products (two halves of 16). */
T256 INLINE __m256i block256(const uint8_t *row, const int16_t *codes, uint32_t b)
{
    const uint8_t *q = row + (size_t)b * DI_INT_Q8_0_BYTES + 2;
    const int16_t *c = codes + (size_t)b * DI_INT_BLOCK;
    const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)q));
    const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(q + 16)));
    const __m256i c0 = _mm256_loadu_si256((const __m256i *)(const void *)c);
    const __m256i c1 = _mm256_loadu_si256((const __m256i *)(const void *)(c + 16));
    return _mm256_add_epi32(_mm256_madd_epi16(w0, c0), _mm256_madd_epi16(w1, c1));
}

T256 INLINE __m256i fold32_256(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

T256 INLINE __m256i fold64_256(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

/* v[k] (8 lanes each) -> lane k = sum of v[k]'s lanes. */
T256 INLINE __m256i reduce8(const __m256i *v)
{
    const __m256i a = fold64_256(fold32_256(v[0], v[1]), fold32_256(v[2], v[3]));
    const __m256i b = fold64_256(fold32_256(v[4], v[5]), fold32_256(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

T256 void di_int_q8_0_sums_avx2(const uint8_t *row, const int16_t *codes, uint32_t nb, int32_t *P)
{
    uint32_t g = 0;
    for (; g + 8 <= nb; g += 8) {
        const uint8_t *at = row + (size_t)g * DI_INT_Q8_0_BYTES;
        for (uint32_t o = 0; o < 8 * DI_INT_Q8_0_BYTES; o += 64)
            _mm_prefetch((const char *)(uintptr_t)((uintptr_t)at + AHEAD + o), _MM_HINT_T0);
        __m256i v[8];
        for (int k = 0; k < 8; k++)
            v[k] = block256(row, codes, g + (uint32_t)k);
        _mm256_storeu_si256((__m256i *)(void *)(P + g), reduce8(v));
    }
    for (; g < nb; g++)
        P[g] = di_int_q8_0_block_sum(row + (size_t)g * DI_INT_Q8_0_BYTES, codes + (size_t)g * DI_INT_BLOCK);
}

#endif /* DI_HAVE_X86_PATHS */
