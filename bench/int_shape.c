/*
 * int_shape.c — the avx512 integer product (kernels/cpu/cpu_int_avx512.c)
 * on one matrix shape, alone: TSC ticks per 512 multiply-adds, the best of
 * 25 calls of di_int_rows_avx512 over all rows on one thread, with the
 * weights packed as a session packs them and the activations quantized once.
 * Weights and activations are random (valid binary16 scales); the figure is
 * the kernel's speed on data that the previous calls left in the caches, so
 * it tells shapes and kernel variants apart, not what a model step costs
 * (docs/PERFORMANCE.md). Prints a checksum of the outputs: two builds of the
 * kernel that give the same bits print the same one.
 *
 *   make build/libdetinfer.a
 *   cc -O2 -std=c11 -I. -Iinclude -o build/int_shape bench/int_shape.c build/libdetinfer.a -lpthread -lm
 *   build/int_shape K N TOKENS [TYPE]    TYPE q4_k (default) or q6_k
 *
 * The CPU needs AVX-512 F/BW/VNNI (the kernel's target); it is not checked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "kernels/common/weight_types.h"
#include "kernels/cpu/cpu_int.h"

#define CALLS 25

static uint64_t state = 88172645463325252ull;

static uint32_t next_random(void) /* xorshift64 */
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)state;
}

static void *aligned(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "int_shape: out of memory\n");
        exit(1);
    }
    return p;
}

/* Random blocks whose binary16 fields (d, and dmin for Q4_K) are finite,
 * near 2^-7, so no product overflows. */
static uint8_t *random_rows(uint32_t type, uint32_t k, uint32_t n, size_t *row_bytes)
{
    const size_t block = di_weight_block_bytes(type), blocks = k / di_weight_block_elems(type);
    *row_bytes = blocks * block;
    uint8_t *data = aligned(*row_bytes * n);
    for (size_t i = 0; i < *row_bytes * n; i++)
        data[i] = (uint8_t)next_random();
    const int at_d = di_weight_field(type, DI_FIELD_D), at_m = di_weight_field(type, DI_FIELD_M);
    for (size_t b = 0; b < blocks * n; b++) {
        const uint16_t h = (uint16_t)(0x2000 | (next_random() & 0x3ff));
        memcpy(data + b * block + at_d, &h, 2);
        if (at_m >= 0)
            memcpy(data + b * block + at_m, &h, 2);
    }
    return data;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: int_shape K N TOKENS [q4_k|q6_k]\n");
        return 2;
    }
    const uint32_t k = (uint32_t)strtoul(argv[1], NULL, 10), n = (uint32_t)strtoul(argv[2], NULL, 10);
    const uint32_t tokens = (uint32_t)strtoul(argv[3], NULL, 10);
    const uint32_t type = argc > 4 && strcmp(argv[4], "q6_k") == 0 ? DI_TYPE_Q6_K : DI_TYPE_Q4_K;
    if (k == 0 || k % 256 != 0 || n == 0 || tokens == 0 || tokens > 4096) {
        fprintf(stderr, "int_shape: K a positive multiple of 256, N and TOKENS (at most 4096) positive\n");
        return 2;
    }
    size_t row_bytes;
    uint8_t *data = random_rows(type, k, n, &row_bytes);
    di_weight w = {data, type, k, n, row_bytes, NULL, 0};
    const size_t packed_row = di_int_packed_row_bytes_avx512(type, k);
    uint8_t *packed = aligned(packed_row * n + DI_INT_PACK_SLACK);
    di_int_pack_rows_avx512(&w, 0, n, packed, packed_row);
    w.packed = packed, w.packed_row_bytes = packed_row;

    float *x = aligned(sizeof(float) * k * tokens);
    for (size_t i = 0; i < (size_t)k * tokens; i++)
        x[i] = (float)((int)(next_random() % 2001) - 1000) / 1000.0f;
    void *qa = aligned(di_qa_bytes(k, tokens));
    di_int_quantize_avx512(&w, x, qa, 0, di_int_layout_avx512(&w, tokens, qa));
    float *y = aligned(sizeof(float) * n * tokens);
    float *scratch = aligned(sizeof(float) * DI_MATMUL_SCRATCH(k));

    double best = 0.0;
    for (int call = 0; call < CALLS; call++) {
        const uint64_t t0 = __rdtsc();
        di_int_rows_avx512(&w, 0, n, qa, y, scratch);
        const double ticks = (double)(__rdtsc() - t0) / ((double)k * n * tokens / 512.0);
        if (call == 0 || ticks < best)
            best = ticks;
    }
    double sum = 0.0;
    for (size_t i = 0; i < (size_t)n * tokens; i++)
        sum += y[i];
    printf("%s K %u N %u tokens %u: %.2f TSC ticks per 512 multiply-adds (checksum %.9g)\n",
           type == DI_TYPE_Q6_K ? "Q6_K" : "Q4_K", k, n, tokens, best, sum);
    free(data), free(packed), free(x), free(qa), free(y), free(scratch);
    return 0;
}
