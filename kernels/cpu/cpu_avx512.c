/*
 * cpu_avx512.c — the AVX-512 kernel path: the 32 lanes of the canonical
 * order are two 16-float registers. The kernels themselves are written once
 * in simd_path.h over the vector words of x86_avx512.h.
 */
#include "kernels/cpu/cpu_ops.h"

#ifdef DI_HAVE_X86_PATHS
#include "kernels/cpu/x86_avx512.h" /* opens the target region */

#define SIMD_NAME "avx512"
#define SIMD_PATH DI_CPU_PATH_AVX512
#define SIMD_OPS di_cpu_ops_avx512

#include "kernels/cpu/simd_path.h"

DI_X86_END
#endif /* DI_HAVE_X86_PATHS */
