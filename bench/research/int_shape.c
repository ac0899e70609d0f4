/*
 * int_shape.c — the integer product of the avx512 path
 * (kernels/cpu/cpu_int_avx512.c) or the avx2 path (cpu_int_avx2.c) on one
 * matrix shape, alone: TSC ticks per 512 multiply-adds, and the file's
 * weight bytes per second that makes, the best of CALLS calls (25 unless
 * given) over all rows on one thread, with the weights as a session gives
 * them to the path (avx512: packed) and the activations quantized once.
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
 *   build/research/int_shape K N TOKENS [TYPE [CALLS [PATH]]]
 *       TYPE q4_k (default) or q6_k; PATH avx512 (default) or avx2
 *
 * The decode step is TOKENS 1. Its weights stream from memory in a model;
 * the rate here, from the caches (a matrix of a few MiB), is what the
 * kernel could keep up with, so a path whose rate here is well above a
 * core's DRAM rate is not what limits decode.
 *
 * The CPU needs the path's instruction sets (avx512: F/BW/VNNI); it is not
 * checked.
 */
#include <time.h>
#include <x86intrin.h>

#include "bench/research/int_shape_setup.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: int_shape K N TOKENS [q4_k|q6_k [CALLS [avx512|avx2]]]\n");
        return 2;
    }
    const uint32_t k = (uint32_t)strtoul(argv[1], NULL, 10), n = (uint32_t)strtoul(argv[2], NULL, 10);
    const uint32_t tokens = (uint32_t)strtoul(argv[3], NULL, 10);
    const uint32_t type = argc > 4 && strcmp(argv[4], "q6_k") == 0 ? DI_TYPE_Q6_K : DI_TYPE_Q4_K;
    const long calls = argc > 5 ? strtol(argv[5], NULL, 10) : 25;
    const int avx2 = argc > 6 && strcmp(argv[6], "avx2") == 0;
    if (k == 0 || k % 256 != 0 || n == 0 || tokens == 0 || tokens > 4096) {
        fprintf(stderr, "int_shape: K a positive multiple of 256, N and TOKENS (at most 4096) positive\n");
        return 2;
    }
    if ((argc > 4 && strcmp(argv[4], "q4_k") != 0 && strcmp(argv[4], "q6_k") != 0) || calls < 1 || calls > 100000 ||
        (argc > 6 && !avx2 && strcmp(argv[6], "avx512") != 0)) {
        fprintf(stderr, "int_shape: TYPE q4_k or q6_k, CALLS 1 to 100000, PATH avx512 or avx2\n");
        return 2;
    }
    shape_inputs s;
    shape_make(type, k, n, tokens, avx2, &s);
    float *y = shape_alloc(sizeof(float) * n * tokens);
    float *scratch = shape_alloc(sizeof(float) * DI_MATMUL_SCRATCH(k));

    double best = 0.0, best_ns = 0.0;
    for (long call = 0; call < calls; call++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        const uint64_t t0 = __rdtsc();
        (avx2 ? di_int_rows_avx2 : di_int_rows_avx512)(&s.w, 0, n, s.qa, y, scratch);
        const double ticks = (double)(__rdtsc() - t0) / ((double)k * n * tokens / 512.0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        const double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
        if (call == 0 || ticks < best)
            best = ticks, best_ns = ns;
    }
    printf("%s %s K %u N %u tokens %u: %.2f TSC ticks per 512 multiply-adds, weights %.1f GB/s (checksum %.9g)\n",
           avx2 ? "avx2" : "avx512", type == DI_TYPE_Q6_K ? "Q6_K" : "Q4_K", k, n, tokens, best,
           (double)s.w.row_bytes * n / best_ns, shape_checksum(y, (size_t)n * tokens));
    shape_free(&s), free(y), free(scratch);
    return 0;
}
