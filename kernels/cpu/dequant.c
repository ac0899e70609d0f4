/*
 * dequant.c — weight rows of every supported GGUF type to float32.
 *
 * Every quantized type through the one decoder (kernels/common/
 * weight_codes.h), which reads blocks by byte loads (rows inside an mmapped
 * file need not be aligned, and the file is little-endian whatever the
 * host). The float operations are those of docs/QUANTS.md; in every type all
 * products are exact and at most one addition rounds, so the bits do not
 * depend on how a compiler or another backend groups the products, or on
 * fma contraction (QUANTS.md says why).
 */
#include "kernels/cpu/cpu_clones.h"
#include "kernels/cpu/dequant.h"
#include "kernels/common/dequant_blocks.h"

#include <string.h>

#include "kernels/common/numerics.h"
#include "kernels/common/weight_types.h"

/* Sub-block `sub` of the block at blk, of the constant `type`: weight l is
 * (D * k) * v + N (weight_codes.h), D * k and N read once per group. */
static DI_INLINE void convert_sub(uint32_t type, const uint8_t *blk, int sub, float *y)
{
    const int groups = di_int_groups(type), per = DI_SUB_BLOCK / groups;
    float N[2] = {0.0f, 0.0f};
    const int n_min = di_int_mins(type, blk, sub, N);
    const float d = di_int_d(type, blk);
    for (int g = 0; g < groups; g++) {
        const float dk = d * (float)di_int_scale(type, blk, sub, g), n = N[n_min == 2 ? g : 0];
        for (int l = g * per; l < (g + 1) * per; l++) {
            const float w = dk * (float)di_int_code(type, blk, sub, l);
            y[l] = n_min ? w + n : w;
        }
    }
}

/* ---- rows -------------------------------------------------------------------- */

/* The n / 32 sub-blocks of a row of the constant quantized `type`, whose
 * blocks hold `elems` weights in `bytes` bytes: constants, so every switch of
 * the decoder folds away in each clone of di_dequant_row. */
static DI_INLINE void convert_row(uint32_t type, uint32_t elems, uint32_t bytes, const uint8_t *row, uint32_t n,
                                  float *out)
{
    const uint32_t per = elems / DI_SUB_BLOCK;
    for (uint32_t b = 0; b < n / DI_SUB_BLOCK; b++)
        convert_sub(type, row + (size_t)(b / per) * bytes, (int)(b % per), out + (size_t)b * DI_SUB_BLOCK);
}

DI_CLONES void di_dequant_row(uint32_t type, const uint8_t *row, uint32_t n, float *out)
{
    if (type == DI_TYPE_F32 || type == DI_TYPE_F16 || type == DI_TYPE_BF16) {
        for (uint32_t i = 0; i < n; i++)
            out[i] = di_qb_plain(type, row, i);
        return;
    }
    switch (type) { /* a case per quantized type of the table (weight_types.h) */
#define CONVERT_TYPE(name, id, elems, bytes, supported, ...) \
    case id:                                                 \
        if (supported && elems >= DI_SUB_BLOCK) {            \
            convert_row(id, elems, bytes, row, n, out);      \
            return;                                          \
        }                                                    \
        break;
        DI_WEIGHT_TYPES(CONVERT_TYPE)
#undef CONVERT_TYPE
    default: break;
    }
    memset(out, 0, (size_t)n * sizeof(float)); /* a type without a compute path: the loader admits none */
}
