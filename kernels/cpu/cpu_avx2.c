/*
 * cpu_avx2.c — the AVX2 + FMA kernel path: the 32 lanes of the canonical
 * order are four 8-float registers. The kernels themselves are written once
 * in simd_path.h over the vector words of x86_avx2.h.
 */
#include "kernels/cpu/cpu_ops.h"

#ifdef DI_HAVE_X86_PATHS
#include "kernels/cpu/x86_avx2.h" /* opens the target region */

#define SIMD_NAME "avx2"
#define SIMD_PATH DI_CPU_PATH_AVX2
#define SIMD_OPS di_cpu_ops_avx2

#include "kernels/cpu/simd_path.h"

DI_X86_END
#endif /* DI_HAVE_X86_PATHS */
