/*
 * cpu_int_avx2.c — the integer profile's product on the avx2 path (stub: the scalar code).
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
