/*
 * cpu_int.h — the integer profile on the CPU (DI_PROFILE_INTEGER,
 * kernels/common/int_dot.h, docs/DETERMINISM.md "The integer profile").
 *
 * A session of that profile runs the table di_cpu_ops_integer gives for its
 * path: the path's own table with int_layout, int_quantize and int_rows set
 * (cpu_ops.h). di_cpu_matmul then quantizes the activations once per
 * product of a quantized weight (int_layout, then int_quantize with its
 * units split over the threads) and splits the rows over the threads
 * (int_rows); F32, F16 and BF16 weights keep the float path. Every path
 * gives the definition's bits: the block sums are exact integers in any
 * order, and every float operation is int_dot.h's, in its order.
 */
#ifndef DI_CPU_INT_H
#define DI_CPU_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_ops.h"

/* Tokens per group of the many-token product: one 16-lane vector of them. */
#define DI_QA_TOKENS 16u
/* Groups of DI_QA_TOKENS that hold n_tokens, the last one padded. */
static inline uint32_t di_qa_groups(uint32_t n_tokens)
{
    return (n_tokens + DI_QA_TOKENS - 1) / DI_QA_TOKENS;
}
/* The fewest tokens for which a SIMD path lays the token groups out (and
 * runs the many-token product); below it each token is a row of its own. */
#define DI_QA_GROUP_MIN 8u

/* One block of a group of 16 tokens, token t in lane t of every array: its
 * codes four at a time (codes[i][t] = codes 4i..4i+3 of token t, the
 * operand of vpdpbusd), the scale a, a * (S0 + S1) and a * S_h, and the
 * code sums S0 + S1 and S_h. 960 bytes, 64-byte aligned. */
typedef struct di_qa_tblock {
    int8_t codes[8][DI_QA_TOKENS][4];
    float a[DI_QA_TOKENS], as_full[DI_QA_TOKENS], as_half[2][DI_QA_TOKENS];
    int32_t s[DI_QA_TOKENS], s_half[2][DI_QA_TOKENS];
} di_qa_tblock;

/*
 * Quantized activations of n_tokens rows of n values (n a multiple of 32,
 * nb = n / 32 blocks), as int_dot.h defines them, laid out for the kernels:
 *   codes   [n_tokens][n]          int8, in weight order
 *   scales  [n_tokens][nb]         a_b
 *   sums    [n_tokens][2 nb]       S of each half block
 *   as_full [n_tokens][nb]         a_b * (S_b0 + S_b1), rounded once (the
 *                                  min terms of the one-min types)
 *   as_half [n_tokens][2][nb]      a_b * S_bh, rounded once (Q2_K): half 0
 *                                  of every block, then half 1
 *   tok     [groups][nb]           the same per group of 16 tokens
 *                                  (di_qa_tblock; only when `grouped`),
 *                                  tokens past n_tokens all zero
 * in one buffer of di_qa_bytes(n, n_tokens) bytes. `order` says how a SIMD
 * path laid the codes out for its weight type (0: weight order; see
 * cpu_int_avx512.c); the scalar path's is 0. The codes array is followed by
 * DI_QA_SLACK bytes a kernel may read (and multiply by zero weights).
 */
#define DI_QA_SLACK 512u

typedef struct di_qa {
    uint32_t n, nb, n_tokens;
    int grouped, order;
    int8_t *codes;
    float *scales;
    int16_t *sums;
    float *as_full, *as_half;
    di_qa_tblock *tok;
} di_qa;

/* Bytes of the buffer for n_tokens rows of n (any path, any layout). */
size_t di_qa_bytes(uint32_t n, uint32_t n_tokens);

/* Lays the arrays out in buf (di_qa_bytes of it, 64-byte aligned), the
 * di_qa itself first, and returns it. */
di_qa *di_qa_layout(void *buf, uint32_t n, uint32_t n_tokens, int grouped);

/* A row's quantization: int_dot.h's di_qa_row (the scalar path's, and any
 * path's reference) or a path's own with the same bits. */
typedef void (*di_qa_row_fn)(const float *x, uint32_t n, int8_t *codes, float *scales, int16_t *sums);

/* The units of a laid-out qa that int_quantize splits over: its token
 * groups when it is grouped (each group's tok blocks are one unit's), else
 * one, all its tokens (a few: not worth waking the threads for); and the
 * tokens [*t0, *t1) of units [u0, u1). */
uint32_t di_qa_units(const di_qa *qa);
void di_qa_unit_tokens(const di_qa *qa, uint32_t u0, uint32_t u1, uint32_t *t0, uint32_t *t1);

/* Fills codes, scales, sums, as_full and as_half of qa's units [u0, u1)
 * from x, each row by `row`; then their tok blocks when qa is grouped. */
void di_qa_fill(di_qa *qa, const float *x, uint32_t u0, uint32_t u1, di_qa_row_fn row);

/* Packed weights: a path's own copy of a weight matrix, laid out for its
 * kernel and made once per model (di_cpu_ops.int_pack_rows;
 * lib/backend/cpu/weight_pack.c). Only the avx512 path has one (its layout is
 * in cpu_int_avx512.c's head comment). A packed buffer has
 * DI_INT_PACK_SLACK bytes after its last row, which the kernel may read. */
#define DI_INT_PACK_SLACK 64u

/* The integer-profile table of the path `base` is the float table of. */
const di_cpu_ops *di_cpu_ops_integer(const di_cpu_ops *base);

/* The scalar path's functions (cpu_ops.h), on int_dot.h's code; the avx2
 * path lays out and quantizes as it does. */
uint32_t di_int_layout_scalar(const di_weight *w, uint32_t n_tokens, void *qa);
void di_int_quantize_scalar(const di_weight *w, const float *x, void *qa, uint32_t u0, uint32_t u1);
void di_int_rows_scalar(const di_weight *w, uint32_t r0, uint32_t r1, const void *qa, float *y,
                        float *scratch);

/* The SIMD paths' (cpu_int_avx2.c, cpu_int_avx512.c). */
#ifdef DI_HAVE_X86_PATHS
void di_int_rows_avx2(const di_weight *w, uint32_t r0, uint32_t r1, const void *qa, float *y, float *scratch);
uint32_t di_int_layout_avx512(const di_weight *w, uint32_t n_tokens, void *qa);
void di_int_quantize_avx512(const di_weight *w, const float *x, void *qa, uint32_t u0, uint32_t u1);
void di_int_rows_avx512(const di_weight *w, uint32_t r0, uint32_t r1, const void *qa, float *y, float *scratch);
size_t di_int_packed_row_bytes_avx512(uint32_t type, uint32_t n_in);
void di_int_pack_rows_avx512(const di_weight *w, uint32_t r0, uint32_t r1, uint8_t *dst, size_t stride);
#endif

#endif /* DI_CPU_INT_H */
