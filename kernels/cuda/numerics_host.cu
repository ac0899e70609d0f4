/*
 * numerics_host.cu — the shared math (numerics.h, dequant_blocks.h,
 * canon_order.h, canon_rows.h) compiled by nvcc as host code of a CUDA
 * translation unit, with the contract's flags, into
 * build/kernels/libnumerics-nvcc.so. tests/check_cuda.c loads it and
 * compares every function with the C compiler's build of the same source,
 * bit for bit: the headers must mean the same thing in both languages.
 */
#include "kernels/common/canon_order.h"
#include "kernels/common/canon_rows.h"
#include "kernels/common/dequant_blocks.h"
#include "kernels/common/numerics.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT float nv_expf(float x) { return di_expf(x); }
EXPORT float nv_silu(float x) { return di_silu(x); }
EXPORT float nv_gelu_tanh(float x) { return di_gelu_tanh(x); }
EXPORT float nv_rsqrt(float x) { return di_rsqrt(x); }
EXPORT float nv_logf(float x) { return di_logf(x); }
EXPORT float nv_tanhf(float x) { return di_tanhf(x); }
EXPORT float nv_f16_to_f32(uint16_t h) { return di_f16_to_f32(h); }
EXPORT float nv_bf16_to_f32(uint16_t h) { return di_bf16_to_f32(h); }
EXPORT float nv_rms_scale(float sum_sq, uint32_t n, float eps) { return di_rms_scale(sum_sq, n, eps); }
EXPORT float nv_lane_tree(float *lanes) { return di_lane_tree(lanes); }
EXPORT float nv_qb_weight(uint32_t type, const uint8_t *row, uint32_t i) { return di_qb_weight(type, row, i); }
EXPORT void nv_philox4x32_10(const uint32_t *counter, const uint32_t *key, uint32_t *out)
{
    di_philox4x32_10(counter, key, out);
}
EXPORT float nv_sample_uniform(uint64_t seed, uint32_t position) { return di_sample_uniform(seed, position); }

/* The warp's dot product as the kernels compute it: every lane's share,
 * then the shuffle tree. */
EXPORT float nv_warp_dot(const float *a, const float *b, uint32_t n)
{
    float lanes[DI_LANES];
    for (uint32_t l = 0; l < DI_LANES; l++)
        lanes[l] = di_lane_dot(a, b, n, l);
    return di_warp_tree_emulate(lanes);
}

EXPORT void nv_warp_row_dots(uint32_t type, const uint8_t *row, uint32_t n, const float *x, uint32_t n_t,
                             float *out)
{
    float lanes[DI_TOKEN_TILE][DI_LANES];
    for (uint32_t l = 0; l < DI_LANES; l++) {
        float total[DI_TOKEN_TILE];
        di_lane_row_dots(type, row, n, x, n_t, l, total);
        for (uint32_t t = 0; t < DI_TOKEN_TILE; t++)
            lanes[t][l] = total[t];
    }
    for (uint32_t t = 0; t < n_t; t++)
        out[t] = di_warp_tree_emulate(lanes[t]);
}
