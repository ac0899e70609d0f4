/*
 * simd_math.h — the SIMD paths' shared helpers: registers per
 * canonical vector, binary16 scales, e^x and tanh lane by lane, and the
 * prefetch of weights ahead of the kernels.
 *
 * Not a normal header: it defines static functions over the vector words of
 * the path that includes it (simd_path.h says how).
 */

#include <math.h>
#include <string.h>

#include "kernels/common/canon_order.h"
#include "kernels/cpu/cpu_clones.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/common/dequant_blocks.h"
#include "kernels/common/numerics.h"
#include "kernels/common/weight_types.h"

#define NV (DI_LANES / VL) /* registers per 32-lane vector */

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
