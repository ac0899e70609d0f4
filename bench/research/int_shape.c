/*
 * int_shape.c — the avx512 integer product (kernels/cpu/cpu_int_avx512.c)
 * on one matrix shape, alone: TSC ticks per 512 multiply-adds, the best of
 * CALLS calls (25 unless given) of di_int_rows_avx512 over all rows on one
 * thread, with the weights packed as a session packs them and the
 * activations quantized once.
 * Weights and activations are random (valid binary16 scales); the figure is
 * the kernel's speed on data that the previous calls left in the caches, so
 * it tells shapes and kernel variants apart, not what a model step costs
 * (docs/PERFORMANCE-LOG.md). Prints a checksum of the outputs: two builds of the
 * kernel that give the same bits print the same one.
 *
 * The best of 25 drifts by up to 8% between runs on a shared machine, more
 * than many kernel changes are worth. To compare two builds, run each with
 * CALLS 200 (then the products are most of the process's time) in turn, A B
 * A B ..., and compare the whole runs' times pair by pair.
 *
 *   make research (build/research/int_shape)
 *   build/research/int_shape K N TOKENS [TYPE [CALLS]]    TYPE q4_k (default) or q6_k
 *
 * The CPU needs AVX-512 F/BW/VNNI (the kernel's target); it is not checked.
 */
#include <x86intrin.h>

#include "bench/research/int_shape_setup.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: int_shape K N TOKENS [q4_k|q6_k [CALLS]]\n");
        return 2;
    }
    const uint32_t k = (uint32_t)strtoul(argv[1], NULL, 10), n = (uint32_t)strtoul(argv[2], NULL, 10);
    const uint32_t tokens = (uint32_t)strtoul(argv[3], NULL, 10);
    const uint32_t type = argc > 4 && strcmp(argv[4], "q6_k") == 0 ? DI_TYPE_Q6_K : DI_TYPE_Q4_K;
    const long calls = argc > 5 ? strtol(argv[5], NULL, 10) : 25;
    if (k == 0 || k % 256 != 0 || n == 0 || tokens == 0 || tokens > 4096) {
        fprintf(stderr, "int_shape: K a positive multiple of 256, N and TOKENS (at most 4096) positive\n");
        return 2;
    }
    if ((argc > 4 && strcmp(argv[4], "q4_k") != 0 && strcmp(argv[4], "q6_k") != 0) || calls < 1 || calls > 100000) {
        fprintf(stderr, "int_shape: TYPE q4_k or q6_k, CALLS 1 to 100000\n");
        return 2;
    }
    shape_inputs s;
    shape_make(type, k, n, tokens, &s);
    float *y = shape_alloc(sizeof(float) * n * tokens);
    float *scratch = shape_alloc(sizeof(float) * DI_MATMUL_SCRATCH(k));

    double best = 0.0;
    for (long call = 0; call < calls; call++) {
        const uint64_t t0 = __rdtsc();
        di_int_rows_avx512(&s.w, 0, n, s.qa, y, scratch);
        const double ticks = (double)(__rdtsc() - t0) / ((double)k * n * tokens / 512.0);
        if (call == 0 || ticks < best)
            best = ticks;
    }
    printf("%s K %u N %u tokens %u: %.2f TSC ticks per 512 multiply-adds (checksum %.9g)\n",
           type == DI_TYPE_Q6_K ? "Q6_K" : "Q4_K", k, n, tokens, best, shape_checksum(y, (size_t)n * tokens));
    shape_free(&s), free(y), free(scratch);
    return 0;
}
