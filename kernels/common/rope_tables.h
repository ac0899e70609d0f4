/*
 * rope_tables.h — the RoPE tables every backend uses, computed on the host in
 * one place: the CPU backend (lib/forward/forward.c) grows them with its
 * sequences, the CUDA plugin (kernels/cuda/cuda_backend.cu) fills them once
 * for the whole context and uploads them. Plain C that C++ compiles too.
 */
#ifndef DI_ROPE_TABLES_H
#define DI_ROPE_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "numerics.h"

/* cos/sin of (pos * scale) * base^(-2i/n_rot) for positions from..to-1 into
 * tables of [positions][n_rot / 2], computed in double and rounded once, with
 * the library's own functions (numerics.h), never libm's: the tables are the
 * same bits with every C library and compiler, and each entry depends on its
 * position only (so the bits never depend on how a table grew). */
static inline void di_rope_fill_tables(uint32_t n_rot, double base, double scale, uint32_t from,
                                       uint32_t to, float *cos_table, float *sin_table)
{
    const uint32_t half = n_rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        const double inv_freq = di_rope_inv_freq(base, i, n_rot);
        for (uint32_t p = from; p < to; p++) {
            double s, c;
            di_sincos((double)p * scale * inv_freq, &s, &c);
            cos_table[(size_t)p * half + i] = (float)c;
            sin_table[(size_t)p * half + i] = (float)s;
        }
    }
}

#endif /* DI_ROPE_TABLES_H */
