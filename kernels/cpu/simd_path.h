/*
 * simd_path.h — a SIMD path assembled: the simd_*.h kernels, written once
 * over the vector words of the path's mapping, x86_avx2.h or x86_avx512.h
 * (vf: VL floats, vi: VL int32), and the path's di_cpu_ops table (SIMD_OPS)
 * over them; included by cpu_avx2.c and cpu_avx512.c. Not a normal header: it defines the
 * path's functions and its table.
 *
 * Every kernel performs, lane for lane, the operations of the scalar
 * reference (cpu_kernels.c, dequant.c, numerics.h) in the same order: the 32
 * lanes of the canonical reduction are DI_LANES / VL registers, a weight
 * block of 32 fills them exactly, and each lane adds its terms with one fused
 * multiply-add per term in increasing order. Only the instructions differ,
 * never the arithmetic, so the results are the same bits (NaN payloads
 * aside: the session makes every NaN logit one canonical NaN).
 */
#include "kernels/cpu/simd_math.h"
#include "kernels/cpu/simd_dequant.h"
#include "kernels/cpu/simd_matmul.h"
#include "kernels/cpu/simd_rowops.h"
#include "kernels/cpu/simd_attention.h"

const di_cpu_ops SIMD_OPS = {
    .path = SIMD_PATH,
    .name = SIMD_NAME,
    .dot = simd_dot,
    .sum = simd_sum,
    .matmul_rows = simd_matmul_rows,
    .rmsnorm = simd_rmsnorm,
    .rope = simd_rope,
    .attention_head = simd_attention_head,
    .attention_tile = simd_attention_tile,
    .silu_mul = simd_silu_mul,
    .gelu_mul = simd_gelu_mul,
    .softcap = simd_softcap,
    .add = simd_add,
    .argmax = simd_argmax,
};
