/*
 * rope_tables.h — the RoPE tables every backend uses, computed on the host in
 * one place: the CPU backend (lib/backend/cpu/forward.c) grows them with its
 * sequences, the CUDA plugin (lib/backend/cuda/cuda_backend.cu) fills them once
 * for the whole context and uploads them. Plain C that C++ compiles too.
 */
#ifndef DI_ROPE_TABLES_H
#define DI_ROPE_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/numerics.h"

/* One RoPE setting (a "set"; a layer uses one): pair i of a head turns by
 * angle (pos * pos_scale) * freq[i] and its cos and sin are multiplied by
 * amplitude. The loader fills it (lib/model/rope_scaling.h): freq[i] is
 * base^(-2i/n_rot), divided by a per-frequency factor and mixed by YaRN when
 * the file asks; pos_scale is linear scaling's 1/factor; amplitude is
 * llama.cpp's attn_factor times YaRN's magnitude correction. Unscaled:
 * pos_scale 1, amplitude 1. */
typedef struct di_rope_set {
    double pos_scale;
    double amplitude;
    double *freq; /* [n_rot / 2], owned by the model */
} di_rope_set;

/* cos/sin of (pos * pos_scale) * freq[i], times amplitude, for positions
 * from..to-1 into tables of [positions][n_rot / 2], computed in double and
 * rounded once, with the library's own functions (numerics.h), never libm's:
 * the tables are the same bits with every C library and compiler, and each
 * entry depends on its position only (so the bits never depend on how a table
 * grew). An amplitude of 1 leaves the bits of the unscaled tables. */
static inline void di_rope_fill_tables(uint32_t n_rot, const di_rope_set *set, uint32_t from, uint32_t to,
                                       float *cos_table, float *sin_table)
{
    const uint32_t half = n_rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        const double freq = set->freq[i];
        for (uint32_t p = from; p < to; p++) {
            double s, c;
            di_sincos((double)p * set->pos_scale * freq, &s, &c);
            cos_table[(size_t)p * half + i] = (float)(c * set->amplitude);
            sin_table[(size_t)p * half + i] = (float)(s * set->amplitude);
        }
    }
}

#endif /* DI_ROPE_TABLES_H */
