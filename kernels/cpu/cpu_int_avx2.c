/*
 * cpu_int_avx2.c — the integer profile's product on the avx2 path: for now
 * the definition's plain C (int_dot.h through cpu_int.c), so its bits are
 * the definition's by construction. An AVX2 kernel (vpmaddubsw with the
 * sign trick: |v| * sign(c, v) keeps every pair sum within int16) is
 * docs/PERFORMANCE.md's next step for CPUs without AVX-512 VNNI.
 */
#include "cpu_int.h"

#ifdef DI_HAVE_X86_PATHS
void di_int_quantize_avx2(const di_weight *w, const float *x, uint32_t n_tokens, void *qa)
{
    di_int_quantize_scalar(w, x, n_tokens, qa);
}

void di_int_rows_avx2(const di_weight *w, uint32_t r0, uint32_t r1, const void *qa, float *y, float *scratch)
{
    di_int_rows_scalar(w, r0, r1, qa, y, scratch);
}
#endif
