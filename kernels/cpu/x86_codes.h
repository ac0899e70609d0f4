/*
 * x86_codes.h — the one x86 decoder of the quantized types: the 32 signed
 * integer codes v of a sub-block (kernels/common/weight_codes.h's
 * di_int_code for all 32 weights at once) as the bytes of one 256-bit
 * register, with AVX2 byte operations. The float paths (simd_dequant.h)
 * widen them and apply D * k and N; the avx2 integer path multiplies them
 * with the activations' codes. Not a normal header: static functions,
 * compiled in the target region of the mapping (x86_avx2.h or x86_avx512.h,
 * whose sixteen_where_bits it uses) included before it.
 */
#ifndef DI_X86_CODES_H
#define DI_X86_CODES_H

#include <stdint.h>

#include "kernels/common/weight_codes.h"

#define X86_INLINE static inline __attribute__((always_inline))

/* 16 bytes of nibbles: the low nibbles are weights 0-15, the high ones
 * 16-31 (di_qb_nibble). */
X86_INLINE __m256i x86_nibbles(const uint8_t *qs)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)qs), lo4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), lo4), _mm_and_si128(q, lo4));
}

/* Bits s..s+width-1 of every byte of the 32 bytes at p, as 0..mask
 * (shifting 16-bit words by s, s <= 7, moves no kept bit across bytes). */
X86_INLINE __m256i x86_byte_bits(const uint8_t *p, int s, int mask)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(s)), _mm256_set1_epi8((char)mask));
}

/* The signed bytes DI_IQ4NL_VALUES[q] of 32 4-bit codes (one a byte). */
X86_INLINE __m256i x86_iq4_values(__m256i nib)
{
    const __m128i table = _mm_setr_epi8(DI_IQ4NL_VALUES);
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nib);
}

/* The codes v of the 32 weights of sub-block `sub` of the block at blk
 * (sub 0 for the 32-weight types), one function per type: a caller that
 * knows its type calls its own, so that an unoptimised build (-O0, where
 * always_inline still inlines but nothing folds) does not get every type's
 * code at every call. */
X86_INLINE __m256i x86_codes_Q4_0(const uint8_t *blk, int sub)
{
    (void)sub;
    return _mm256_sub_epi8(x86_nibbles(blk + DI_OFF_QS_Q4_0), _mm256_set1_epi8(8));
}
X86_INLINE __m256i x86_codes_Q4_1(const uint8_t *blk, int sub)
{
    (void)sub;
    return x86_nibbles(blk + DI_OFF_QS_Q4_1);
}
X86_INLINE __m256i x86_codes_Q5_0(const uint8_t *blk, int sub)
{
    (void)sub;
    return _mm256_sub_epi8(_mm256_or_si256(x86_nibbles(blk + DI_OFF_QS_Q5_0),
                                           sixteen_where_bits(di_qb_u32(blk + DI_OFF_QH_Q5_0))),
                           _mm256_set1_epi8(16));
}
X86_INLINE __m256i x86_codes_Q5_1(const uint8_t *blk, int sub)
{
    (void)sub;
    return _mm256_or_si256(x86_nibbles(blk + DI_OFF_QS_Q5_1), sixteen_where_bits(di_qb_u32(blk + DI_OFF_QH_Q5_1)));
}
X86_INLINE __m256i x86_codes_Q8_0(const uint8_t *blk, int sub)
{
    (void)sub;
    return _mm256_loadu_si256((const __m256i *)(const void *)(blk + DI_OFF_QS_Q8_0));
}
X86_INLINE __m256i x86_codes_IQ4_NL(const uint8_t *blk, int sub)
{
    (void)sub;
    return x86_iq4_values(x86_nibbles(blk + DI_OFF_QS_IQ4_NL));
}
/* Q2_K, Q3_K, Q6_K: sub-block `sub` is quarter sub % 4 of half sub / 4. */
X86_INLINE __m256i x86_codes_Q2_K(const uint8_t *blk, int sub)
{
    return x86_byte_bits(blk + DI_OFF_QS_Q2_K + 32 * (sub / 4), 2 * (sub % 4), 3);
}
X86_INLINE __m256i x86_codes_Q3_K(const uint8_t *blk, int sub)
{
    const __m256i lo = x86_byte_bits(blk + DI_OFF_QS_Q3_K + 32 * (sub / 4), 2 * (sub % 4), 3);
    const __m256i hi = x86_byte_bits(blk + DI_OFF_QH_Q3_K, sub, 1);
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 2)), _mm256_set1_epi8(4));
}
X86_INLINE __m256i x86_codes_Q4_K(const uint8_t *blk, int sub)
{
    return x86_byte_bits(blk + DI_OFF_QS_Q4_K + 32 * (sub / 2), 4 * (sub % 2), 0x0f);
}
X86_INLINE __m256i x86_codes_Q5_K(const uint8_t *blk, int sub)
{
    const __m256i lo = x86_byte_bits(blk + DI_OFF_QS_Q5_K + 32 * (sub / 2), 4 * (sub % 2), 0x0f);
    return _mm256_or_si256(lo, _mm256_slli_epi16(x86_byte_bits(blk + DI_OFF_QH_Q5_K, sub, 1), 4));
}
X86_INLINE __m256i x86_codes_Q6_K(const uint8_t *blk, int sub)
{
    const int h = sub / 4, k = sub % 4;
    const __m256i lo = x86_byte_bits(blk + DI_OFF_QS_Q6_K + 64 * h + 32 * (k % 2), 4 * (k / 2), 0x0f);
    const __m256i hi = x86_byte_bits(blk + DI_OFF_QH_Q6_K + 32 * h, 2 * k, 3);
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
}
X86_INLINE __m256i x86_codes_IQ4_XS(const uint8_t *blk, int sub)
{
    return x86_iq4_values(x86_nibbles(blk + DI_OFF_QS_IQ4_XS + 16 * sub));
}

/* The same for a type known at run time. */
X86_INLINE __m256i x86_codes32(uint32_t type, const uint8_t *blk, int sub)
{
    switch (type) {
    case DI_TYPE_Q4_0: return x86_codes_Q4_0(blk, sub);
    case DI_TYPE_Q4_1: return x86_codes_Q4_1(blk, sub);
    case DI_TYPE_Q5_0: return x86_codes_Q5_0(blk, sub);
    case DI_TYPE_Q5_1: return x86_codes_Q5_1(blk, sub);
    case DI_TYPE_Q8_0: return x86_codes_Q8_0(blk, sub);
    case DI_TYPE_IQ4_NL: return x86_codes_IQ4_NL(blk, sub);
    case DI_TYPE_Q2_K: return x86_codes_Q2_K(blk, sub);
    case DI_TYPE_Q3_K: return x86_codes_Q3_K(blk, sub);
    case DI_TYPE_Q4_K: return x86_codes_Q4_K(blk, sub);
    case DI_TYPE_Q5_K: return x86_codes_Q5_K(blk, sub);
    case DI_TYPE_Q6_K: return x86_codes_Q6_K(blk, sub);
    case DI_TYPE_IQ4_XS: return x86_codes_IQ4_XS(blk, sub);
    default: return _mm256_setzero_si256();
    }
}

#endif /* DI_X86_CODES_H */
