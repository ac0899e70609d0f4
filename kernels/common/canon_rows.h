/*
 * canon_rows.h — one warp lane's share of the dot products of a weight row
 * with a tile of token rows, in the canonical order (canon_order.h), each
 * weight converted once by dequant_blocks.h. The CUDA matrix-product kernel
 * calls it as it is; tests/check_cuda.c runs it for all 32 lanes on the host,
 * folds them with di_warp_tree_emulate and compares with the CPU's
 * dequantize-then-di_cpu_dot, bit for bit.
 */
#ifndef DI_CANON_ROWS_H
#define DI_CANON_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/canon_order.h"
#include "kernels/common/dequant_blocks.h"

#define DI_TOKEN_TILE 8u /* token rows per call; any count gives the same bits */

/*
 * total[t] (t < n_t <= DI_TOKEN_TILE) receives lane `lane`'s share of
 * dot(weight row, x + t * n): the row holds n weights of `type`, x holds n_t
 * token rows of n floats.
 */
DI_HD void di_lane_row_dots(uint32_t type, const uint8_t *row, uint32_t n, const float *x,
                            uint32_t n_t, uint32_t lane, float *total)
{
    for (uint32_t t = 0; t < DI_TOKEN_TILE; t++)
        total[t] = 0.0f;
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(n, c0);
        float acc[DI_TOKEN_TILE];
        for (uint32_t t = 0; t < DI_TOKEN_TILE; t++)
            acc[t] = 0.0f;
        for (uint32_t i = di_lane_first(c0, lane); i < end; i = di_lane_next(i)) {
            const float w = di_qb_weight(type, row, i);
            for (uint32_t t = 0; t < DI_TOKEN_TILE; t++)
                if (t < n_t)
                    acc[t] = fmaf(w, x[(size_t)t * n + i], acc[t]);
        }
        for (uint32_t t = 0; t < DI_TOKEN_TILE; t++)
            total[t] = di_lane_combine(total[t], acc[t], c0);
    }
}

#endif /* DI_CANON_ROWS_H */
