/*
 * dequant.h — one row of GGUF weights, in any supported storage type, to
 * float32.
 *
 * Types are those of weight_types.h whose `supported` column is 1.
 * docs/QUANTS.md gives each block layout and the exact float32 operations
 * that produce every weight, so that any backend reproduces the same bits.
 * Every weight depends only on its own block: a row may be converted whole
 * or block range by block range with the same result.
 */
#ifndef DI_DEQUANT_H
#define DI_DEQUANT_H

#include <stdint.h>

/*
 * Converts the n weights stored in `row` (little-endian, any alignment) to
 * float32 in out[0..n). n must be a multiple of the type's block size (the
 * GGUF parser refuses tensors whose rows are not); only whole blocks are
 * read. A type not supported writes n zeros.
 */
void di_dequant_row(uint32_t type, const uint8_t *row, uint32_t n, float *out);

#endif /* DI_DEQUANT_H */
