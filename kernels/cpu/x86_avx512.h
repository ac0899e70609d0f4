/*
 * x86_avx512.h — the AVX-512 mapping, shared by the float path
 * (cpu_avx512.c) and the integer path (cpu_int_avx512.c, which defines
 * DI_X86_VNNI first: it needs AVX-512 VNNI too): the instructions both are
 * compiled for, the vector words simd_path.h's kernels are written over (the
 * 32 lanes of the canonical order are two 16-float registers), and the fixed
 * tree over those 32 lanes. Included at the top of a file's x86 part, it
 * opens the target region; the file closes it with DI_X86_END.
 */
#ifndef DI_X86_AVX512_H
#define DI_X86_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/x86_target.h"

#ifdef DI_X86_VNNI
DI_X86_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#else
DI_X86_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

#define VL 16 /* floats per register */

typedef __m512 vf;
typedef __m512i vi;

#define vf_zero() _mm512_setzero_ps()
#define vf_set1(x) _mm512_set1_ps(x)
#define vf_load(p) _mm512_loadu_ps(p)
#define vf_store(p, v) _mm512_storeu_ps((p), (v))
#define vf_add(a, b) _mm512_add_ps((a), (b))
#define vf_sub(a, b) _mm512_sub_ps((a), (b))
#define vf_mul(a, b) _mm512_mul_ps((a), (b))
#define vf_div(a, b) _mm512_div_ps((a), (b))
#define vf_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c)) /* a * b + c, one rounding */
#define vf_rint(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_neg(a) _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)))
/* select: where the condition holds take b, else a */
#define vf_sel_gt(a, x, lim, b) _mm512_mask_mov_ps((a), _mm512_cmp_ps_mask((x), (lim), _CMP_GT_OQ), (b))
#define vf_sel_lt(a, x, lim, b) _mm512_mask_mov_ps((a), _mm512_cmp_ps_mask((x), (lim), _CMP_LT_OQ), (b))
#define vf_sel_nan(a, x) _mm512_mask_mov_ps((a), _mm512_cmp_ps_mask((x), (x), _CMP_UNORD_Q), (x))
#define vf_from_bits(v) _mm512_castsi512_ps(v)
#define vf_to_int(a) _mm512_cvttps_epi32(a)
#define vf_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define vf_bf16(p) _mm512_castsi512_ps(_mm512_slli_epi32(vi_u16(p), 16))

#define vi_set1(x) _mm512_set1_epi32(x)
#define vi_i8(p) _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define vi_u8(p) _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define vi_u16(p) _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define vi_add(a, b) _mm512_add_epi32((a), (b))
#define vi_sub(a, b) _mm512_sub_epi32((a), (b))
#define vi_and(a, b) _mm512_and_si512((a), (b))
#define vi_srli(a, n) _mm512_srli_epi32((a), (n))
#define vi_srai(a, n) _mm512_srai_epi32((a), (n))
#define vi_slli(a, n) _mm512_slli_epi32((a), (n))
#define vi_to_float(a) _mm512_cvtepi32_ps(a)
/* bytes j*VL .. j*VL+VL-1 of q (32 int8), sign-extended */
#define vi_from_bytes(q, j) \
    _mm512_cvtepi8_epi32((j) == 0 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256((q), 1))

/* Byte j is 16 where bit j of qh is set, else 0 (the fifth bits of Q5_x):
 * qh is the byte mask itself. */
#define sixteen_where_bits(qh) _mm256_maskz_mov_epi8((__mmask32)(qh), _mm256_set1_epi8(16))

/* Horizontal maximum (order-free: max is exact) and the first lane equal to
 * m in p[0..VL), or -1. */
static inline float vf_hmax(vf v)
{
    return _mm512_reduce_max_ps(v);
}
static inline int vf_first_eq(const float *p, float m)
{
    const __mmask16 k = _mm512_cmp_ps_mask(_mm512_loadu_ps(p), _mm512_set1_ps(m), _CMP_EQ_OQ);
    return k ? __builtin_ctz(k) : -1;
}
/* max over the lanes of x that are not NaN, folded into running m */
#define vf_max_ordered(m, x) _mm512_mask_max_ps((m), _mm512_cmp_ps_mask((x), (x), _CMP_ORD_Q), (m), (x))

/* The fixed tree over 32 lanes in t[0] (lanes 0-15) and t[1] (16-31):
 * l += l + 16, then + 8, + 4, + 2, + 1, each a plain add of lane pairs. */
static inline float lanes_tree(const vf *t)
{
    const __m512 a = _mm512_add_ps(t[0], t[1]);
    const __m256 b = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

#endif /* DI_X86_AVX512_H */
