/*
 * numerics_check.cu — compiles kernels/common/numerics.h with nvcc and the contract's
 * flags (-fmad=false -ftz=false -prec-div=true -prec-sqrt=true), so the shared
 * math cannot drift into host-only code. The CUDA backend proper (issue 5)
 * builds its kernels beside this file.
 */
#include "kernels/common/numerics.h"

__global__ void di_numerics_check(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float lanes[DI_LANES];
        for (int l = 0; l < DI_LANES; l++)
            lanes[l] = in[i] * (float)l;
        out[i] = di_expf(in[i]) + di_silu(in[i]) + di_rsqrt(in[i]) + di_lane_tree(lanes) +
                 di_f16_to_f32((uint16_t)i) + di_bf16_to_f32((uint16_t)i) + di_rms_scale(in[i], 7u, 1e-6f);
    }
}
