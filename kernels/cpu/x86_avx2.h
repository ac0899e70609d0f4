/*
 * x86_avx2.h — the AVX2 + FMA mapping, shared by the float path (cpu_avx2.c)
 * and the integer path (cpu_int_avx2.c): the instructions both are compiled
 * for, the vector words simd_path.h's kernels are written over (the 32 lanes
 * of the canonical order are four 8-float registers), and the fixed tree
 * over those 32 lanes. Included at the top of a file's x86 part, it opens
 * the target region; the file closes it with DI_X86_END.
 */
#ifndef DI_X86_AVX2_H
#define DI_X86_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/x86_target.h"

DI_X86_BEGIN("avx2,fma,f16c")

#define VL 8 /* floats per register */

typedef __m256 vf;
typedef __m256i vi;

#define vf_zero() _mm256_setzero_ps()
#define vf_set1(x) _mm256_set1_ps(x)
#define vf_load(p) _mm256_loadu_ps(p)
#define vf_store(p, v) _mm256_storeu_ps((p), (v))
#define vf_add(a, b) _mm256_add_ps((a), (b))
#define vf_sub(a, b) _mm256_sub_ps((a), (b))
#define vf_mul(a, b) _mm256_mul_ps((a), (b))
#define vf_div(a, b) _mm256_div_ps((a), (b))
#define vf_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c)) /* a * b + c, one rounding */
#define vf_rint(a) _mm256_round_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_neg(a) _mm256_xor_ps((a), _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)))
/* select: where the condition holds take b, else a */
#define vf_sel_gt(a, x, lim, b) _mm256_blendv_ps((a), (b), _mm256_cmp_ps((x), (lim), _CMP_GT_OQ))
#define vf_sel_lt(a, x, lim, b) _mm256_blendv_ps((a), (b), _mm256_cmp_ps((x), (lim), _CMP_LT_OQ))
#define vf_sel_nan(a, x) _mm256_blendv_ps((a), (x), _mm256_cmp_ps((x), (x), _CMP_UNORD_Q))
#define vf_from_bits(v) _mm256_castsi256_ps(v)
#define vf_to_int(a) _mm256_cvttps_epi32(a)
#define vf_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define vf_bf16(p) _mm256_castsi256_ps(_mm256_slli_epi32(vi_u16(p), 16))

#define vi_set1(x) _mm256_set1_epi32(x)
#define vi_i8(p) _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p)))
#define vi_u8(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p)))
#define vi_u16(p) _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define vi_add(a, b) _mm256_add_epi32((a), (b))
#define vi_sub(a, b) _mm256_sub_epi32((a), (b))
#define vi_and(a, b) _mm256_and_si256((a), (b))
#define vi_srli(a, n) _mm256_srli_epi32((a), (n))
#define vi_srai(a, n) _mm256_srai_epi32((a), (n))
#define vi_slli(a, n) _mm256_slli_epi32((a), (n))
#define vi_to_float(a) _mm256_cvtepi32_ps(a)
/* bytes j*VL .. j*VL+VL-1 of q (32 int8), sign-extended */
static inline __m256i vi_from_bytes(__m256i q, int j)
{
    const __m128i half = j < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    return _mm256_cvtepi8_epi32(j % 2 ? _mm_srli_si128(half, 8) : half);
}

/* Byte j is 16 where bit j of qh is set, else 0 (the fifth bits of Q5_x):
 * each byte of qh is spread over 8 bytes, which keep one bit each. */
static inline __m256i sixteen_where_bits(uint32_t qh)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(16));
}

/* Horizontal maximum (order-free: max is exact) and the first lane equal to
 * m in p[0..VL), or -1. */
static inline float vf_hmax(vf v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
static inline int vf_first_eq(const float *p, float m)
{
    const int k = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p), _mm256_set1_ps(m), _CMP_EQ_OQ));
    return k ? __builtin_ctz((unsigned)k) : -1;
}
/* max over the lanes of x that are not NaN, folded into running m (MAXPS
 * returns its second operand when either is NaN) */
#define vf_max_ordered(m, x) _mm256_max_ps((x), (m))

/* The fixed tree over 32 lanes in t[0..3] (8 lanes each): l += l + 16
 * (t0 + t2, t1 + t3), then + 8, + 4, + 2, + 1, each a plain add of lane
 * pairs. */
static inline float lanes_tree(const vf *t)
{
    const __m256 b = _mm256_add_ps(_mm256_add_ps(t[0], t[2]), _mm256_add_ps(t[1], t[3]));
    const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

#endif /* DI_X86_AVX2_H */
