/*
 * cpu_avx2.c — the avx2 kernel path (work in progress: scalar members).
 */
#include "cpu_kernels.h"
#include "cpu_ops.h"

#ifdef DI_HAVE_X86_PATHS
const di_cpu_ops di_cpu_ops_avx2 = {
    .path = DI_CPU_PATH_AVX2,
    .name = "avx2",
    .dot = di_cpu_dot,
    .sum = di_cpu_sum,
    .matmul_rows = di_cpu_matmul_rows,
    .rmsnorm = di_cpu_rmsnorm,
    .rope = di_cpu_rope,
    .attention_head = di_cpu_attention_head,
    .silu_mul = di_cpu_silu_mul,
    .gelu_mul = di_cpu_gelu_mul,
    .add = di_cpu_add,
    .argmax = di_cpu_argmax,
};
#endif
