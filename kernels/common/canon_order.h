/*
 * canon_order.h — the canonical reduction order (numerics.h,
 * docs/DETERMINISM.md "Reductions") as one warp evaluates it, written once for
 * the CUDA kernels and for the host-side emulation the CPU tests run.
 *
 * Lane l of a warp of DI_LANES threads owns the terms i ≡ l (mod 32) of every
 * chunk of DI_CHUNK terms and accumulates them in increasing i from +0.0f
 * (di_lane_first / di_lane_next / di_chunk_end give its indexes). Its chunk
 * results are combined in chunk order, the first taken as it is
 * (di_lane_combine). The lanes are then folded by the fixed tree
 * lane[l] += lane[l + s], s = 16, 8, 4, 2, 1: on a GPU, s = di_tree_offset(k)
 * for k = 0..4 with __shfl_down_sync and a plain add; lane 0 holds the result.
 * (Lanes l + s >= 32 read their own value in __shfl_down_sync; no such lane
 * feeds lane 0.)
 *
 * di_lane_dot and di_lane_sum are one lane's share for float32 operands; the
 * weight-row kernels run the same loop with the weight converted by
 * dequant_blocks.h in place of a[i].
 */
#ifndef DI_CANON_ORDER_H
#define DI_CANON_ORDER_H

#include <stdint.h>

#include "kernels/common/numerics.h"

#define DI_TREE_STEPS 5 /* log2(DI_LANES) */

/* One past the last term of the chunk that starts at c0. */
DI_HD uint32_t di_chunk_end(uint32_t n, uint32_t c0)
{
    return n - c0 < DI_CHUNK ? n : c0 + DI_CHUNK;
}

/* The first term of lane `lane` in the chunk starting at c0, and its next. */
DI_HD uint32_t di_lane_first(uint32_t c0, uint32_t lane)
{
    return c0 + lane;
}

DI_HD uint32_t di_lane_next(uint32_t i)
{
    return i + DI_LANES;
}

/* The running lane total after a chunk: the first chunk's value as it is,
 * later ones added in chunk order. */
DI_HD float di_lane_combine(float total, float chunk_value, uint32_t c0)
{
    return c0 == 0 ? chunk_value : total + chunk_value;
}

/* Shuffle distance of tree step k (0..DI_TREE_STEPS-1): 16, 8, 4, 2, 1. */
DI_HD uint32_t di_tree_offset(uint32_t k)
{
    return (uint32_t)DI_LANES >> (k + 1);
}

/* Lane `lane`'s share of the fma-form reduction of a[i] * b[i], i < n. */
DI_HD float di_lane_dot(const float *a, const float *b, uint32_t n, uint32_t lane)
{
    float total = 0.0f;
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(n, c0);
        float acc = 0.0f;
        for (uint32_t i = di_lane_first(c0, lane); i < end; i = di_lane_next(i))
            acc = fmaf(a[i], b[i], acc);
        total = di_lane_combine(total, acc, c0);
    }
    return total;
}

/* The same with a stride between the terms of b (a column of a matrix). */
DI_HD float di_lane_dot_strided(const float *a, const float *b, size_t b_stride, uint32_t n,
                                uint32_t lane)
{
    float total = 0.0f;
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(n, c0);
        float acc = 0.0f;
        for (uint32_t i = di_lane_first(c0, lane); i < end; i = di_lane_next(i))
            acc = fmaf(a[i], b[(size_t)i * b_stride], acc);
        total = di_lane_combine(total, acc, c0);
    }
    return total;
}

/* Lane `lane`'s share of the sum-form reduction of x[i], i < n. */
DI_HD float di_lane_sum(const float *x, uint32_t n, uint32_t lane)
{
    float total = 0.0f;
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(n, c0);
        float acc = 0.0f;
        for (uint32_t i = di_lane_first(c0, lane); i < end; i = di_lane_next(i))
            acc = acc + x[i];
        total = di_lane_combine(total, acc, c0);
    }
    return total;
}

/* Host emulation of the warp's shuffle tree: value[l] is lane l's total;
 * each step reads every lane's value before any is changed, as one
 * __shfl_down_sync does (a source past the warp gives the lane's own value).
 * Returns lane 0. Destroys value[]. */
static inline float di_warp_tree_emulate(float *value)
{
    for (uint32_t k = 0; k < DI_TREE_STEPS; k++) {
        const uint32_t off = di_tree_offset(k);
        float shuffled[DI_LANES];
        for (uint32_t l = 0; l < DI_LANES; l++)
            shuffled[l] = l + off < DI_LANES ? value[l + off] : value[l];
        for (uint32_t l = 0; l < DI_LANES; l++)
            value[l] = value[l] + shuffled[l];
    }
    return value[0];
}

#endif /* DI_CANON_ORDER_H */
