/*
 * int_shape_setup.h — the inputs of the integer-product shape benchmarks
 * (int_shape.c): a random matrix of Q4_K or Q6_K weights,
 * packed as a session packs them, and random activations quantized in the
 * avx512 path's layout. The same seed every run, so two builds see the same
 * numbers. Static functions: each benchmark is one file.
 */
#ifndef DI_INT_SHAPE_SETUP_H
#define DI_INT_SHAPE_SETUP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/weight_types.h"
#include "kernels/cpu/cpu_int.h"

/* One product's inputs, every buffer from shape_alloc. */
typedef struct shape_inputs {
    di_weight w;  /* the file's blocks and the packed copy */
    void *qa;     /* the activations, quantized */
    uint8_t *data, *packed;
} shape_inputs;

static uint64_t shape_state = 88172645463325252ull;

static uint32_t shape_random(void) /* xorshift64 */
{
    shape_state ^= shape_state << 13;
    shape_state ^= shape_state >> 7;
    shape_state ^= shape_state << 17;
    return (uint32_t)shape_state;
}

/* 64-byte aligned, or the program ends with a message. */
static void *shape_alloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* n rows of k weights of `type` (Q4_K or Q6_K: k a multiple of 256) whose
 * binary16 fields (d, and dmin where the type has one) are finite, near
 * 2^-7, so no product overflows; and `tokens` rows of activations in
 * [-1, 1], quantized. For the avx512 path (avx2 0) the weights are packed
 * and the activations laid out as that path lays them out; for the avx2
 * path, the file's rows and the scalar layout, which it reads. */
static void shape_make(uint32_t type, uint32_t k, uint32_t n, uint32_t tokens, int avx2, shape_inputs *s)
{
    const size_t block = di_weight_block_bytes(type), blocks = (size_t)k / di_weight_block_elems(type) * n;
    const size_t row_bytes = (size_t)k / di_weight_block_elems(type) * block;
    s->data = shape_alloc(row_bytes * n);
    for (size_t i = 0; i < row_bytes * n; i++)
        s->data[i] = (uint8_t)shape_random();
    const int at_d = di_weight_field(type, DI_FIELD_D), at_m = di_weight_field(type, DI_FIELD_M);
    for (size_t b = 0; b < blocks; b++) {
        const uint16_t h = (uint16_t)(0x2000 | (shape_random() & 0x3ff));
        memcpy(s->data + b * block + at_d, &h, 2);
        if (at_m >= 0)
            memcpy(s->data + b * block + at_m, &h, 2);
    }
    s->w = (di_weight){s->data, type, k, n, row_bytes, NULL, 0};
    s->packed = NULL;
    float *x = shape_alloc(sizeof(float) * k * tokens); /* only its codes are kept */
    for (size_t i = 0; i < (size_t)k * tokens; i++)
        x[i] = (float)((int)(shape_random() % 2001) - 1000) / 1000.0f;
    s->qa = shape_alloc(di_qa_bytes(k, tokens));
    if (avx2) {
        di_int_quantize_scalar(&s->w, x, s->qa, 0, di_int_layout_scalar(&s->w, tokens, s->qa));
        free(x);
        return;
    }
    const size_t packed_row = di_int_packed_row_bytes_avx512(type, k);
    s->packed = shape_alloc(packed_row * n + DI_INT_PACK_SLACK);
    di_int_pack_rows_avx512(&s->w, 0, n, s->packed, packed_row);
    s->w.packed = s->packed, s->w.packed_row_bytes = packed_row;
    di_int_quantize_avx512(&s->w, x, s->qa, 0, di_int_layout_avx512(&s->w, tokens, s->qa));
    free(x);
}

static void shape_free(shape_inputs *s)
{
    free(s->data), free(s->packed), free(s->qa);
}

/* The sum of the outputs, in order: equal bits give equal sums. */
static double shape_checksum(const float *y, size_t n)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += y[i];
    return sum;
}

#endif /* DI_INT_SHAPE_SETUP_H */
