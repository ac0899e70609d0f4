/*
 * dequant_blocks.h — the float32 value of one weight of a GGUF row, for every
 * supported type, in one source compiled by the C compiler and by nvcc.
 *
 * The bits come from the one decoder of weight_codes.h: w = (D * k) * v + N,
 * every product exact, at most one rounding in the final add (docs/QUANTS.md;
 * kernels/cpu/dequant.c converts whole blocks with the same decoder). Here
 * the unit is one weight, so that a CUDA lane can convert exactly the terms
 * it accumulates (term i of a row sits in block i / block_elems at index
 * i % block_elems). tests/check_cuda.c checks that di_qb_weight gives the
 * same bits as di_dequant_row for random blocks of every type, and
 * tests/check_quants.c both against float64 NumPy's reading of the format.
 */
#ifndef DI_DEQUANT_BLOCKS_H
#define DI_DEQUANT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/numerics.h"
#include "kernels/common/weight_codes.h"
#include "kernels/common/weight_types.h"

/* Weight i of a row of F32, F16 or BF16 (exact). */
DI_HD float di_qb_plain(uint32_t type, const uint8_t *row, uint32_t i)
{
    if (type == DI_TYPE_F32)
        return di_float_from_bits(di_qb_u32(row + 4 * (size_t)i));
    const uint16_t h = di_qb_u16(row + 2 * (size_t)i);
    return type == DI_TYPE_F16 ? di_f16_to_f32(h) : di_bf16_to_f32(h);
}

/* Weight i (0..elems - 1) of a quantized block of the constant `type` at
 * blk: (D * k) * v + N. */
DI_HD_FOLD float di_qb_coded(uint32_t type, const uint8_t *blk, int i)
{
    const int sub = i / DI_SUB_BLOCK, l = i % DI_SUB_BLOCK, g = l / (DI_SUB_BLOCK / di_int_groups(type));
    const float w = (di_int_d(type, blk) * (float)di_int_scale(type, blk, sub, g)) * (float)di_int_code(type, blk, sub, l);
    float N[2] = {0.0f, 0.0f};
    const int n_min = di_int_mins(type, blk, sub, N);
    return n_min ? w + N[n_min == 2 ? g : 0] : w;
}

/* Weight i of a row of `type` starting at `row`; 0 for an unsupported type
 * (the loader admits none). A case per quantized type of the table, each
 * with its constant type. */
DI_HD float di_qb_weight(uint32_t type, const uint8_t *row, uint32_t i)
{
    if (type == DI_TYPE_F32 || type == DI_TYPE_F16 || type == DI_TYPE_BF16)
        return di_qb_plain(type, row, i);
    switch (type) {
#define DI_QB_CASE(name, id, elems, bytes, supported, ...) \
    case id:                                               \
        if (supported && elems >= DI_SUB_BLOCK)            \
            return di_qb_coded(id, row + (size_t)(i / elems) * bytes, (int)(i % elems)); \
        break;
        DI_WEIGHT_TYPES(DI_QB_CASE)
#undef DI_QB_CASE
    default: break;
    }
    return 0.0f;
}

#endif /* DI_DEQUANT_BLOCKS_H */
