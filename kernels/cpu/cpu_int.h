/*
 * cpu_int.h — the integer profile on the CPU (DI_PROFILE_INTEGER,
 * kernels/common/int_dot.h, docs/DETERMINISM.md "The integer profile").
 *
 * A session of that profile runs the table di_cpu_ops_integer gives for its
 * path: the path's own table with matmul_rows replaced by one that takes the
 * integer dot product for the weight types int_dot.h defines (Q8_0, Q5_0) and the
 * float path for the others. Every path gives the same bits: the integer
 * block sums are exact in any order, and the block terms are reduced by the
 * path's canonical dot.
 */
#ifndef DI_CPU_INT_H
#define DI_CPU_INT_H

#include <stdint.h>

#include "cpu_ops.h"

/* The integer-profile table of the path `base` is the float table of. */
const di_cpu_ops *di_cpu_ops_integer(const di_cpu_ops *base);

/* 1 when the integer profile computes products with weights of this type
 * and reduction length (the others take the float path). */
int di_cpu_int_covers(uint32_t type, uint32_t n_in);

/* The factors of the block terms of int_dot.h for blocks b < nb of `row`
 * (of a covered type) against one token (its codes as limbs: di_int_limbs,
 * 64 int16 per block; its block scales): q[b] = (float)P_b,
 * s[b] = d_b * scales[b]. One function per path. */
typedef void di_int_terms_fn(uint32_t type, const uint8_t *row, const int16_t *limbs, const float *scales,
                             uint32_t nb, float *q, float *s);
di_int_terms_fn di_int_terms_scalar;
#ifdef DI_HAVE_X86_PATHS
di_int_terms_fn di_int_terms_avx2;
di_int_terms_fn di_int_terms_avx512;
#endif

#endif /* DI_CPU_INT_H */
