/*
 * dequant.h — one row of GGUF weights, in any supported storage type, to
 * float32.
 *
 * Types are numbered as in ggml (the `type` field of a GGUF tensor):
 *   F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8,
 *   Q4_K 12, Q5_K 13, Q6_K 14, BF16 30.
 * docs/QUANTS.md gives each block layout and the exact float32 operations
 * that produce every weight, so that any backend reproduces the same bits.
 * Every weight depends only on its own block: a row may be converted whole
 * or block range by block range with the same result.
 */
#ifndef DI_DEQUANT_H
#define DI_DEQUANT_H

#include <stdint.h>

/* 1 if di_dequant_row converts this ggml type, 0 otherwise. */
int di_dequant_supported(uint32_t type);

/*
 * Converts the n weights stored in `row` (little-endian, any alignment) to
 * float32 in out[0..n). n must be a multiple of the type's block size (the
 * GGUF parser refuses tensors whose rows are not); only whole blocks are
 * read. An unsupported type writes n zeros.
 */
void di_dequant_row(uint32_t type, const uint8_t *row, uint32_t n, float *out);

#endif /* DI_DEQUANT_H */
