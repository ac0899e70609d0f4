/*
 * cpu_int.c — the integer profile's matrix product on every CPU path
 * (cpu_int.h): activations quantized once per call, exact integer block
 * sums by the path's kernel (scalar here, cpu_int_x86.c), and the block
 * terms reduced by the path's canonical dot.
 */
#include "cpu_int.h"

#include <pthread.h>
#include <string.h>

#include "cpu_kernels.h"
#include "dequant_blocks.h"
#include "int_dot.h"

/* Tokens quantized at a time: their limbs (4 bytes per value) and scales,
 * with one row's terms, fit in DI_MATMUL_SCRATCH(n_in) (16 * n_in + 2048
 * floats). */
#define INT_TOKENS 8u

int di_cpu_int_covers(uint32_t type, uint32_t n_in)
{
    return di_int_block_bytes(type) != 0 && n_in % DI_INT_BLOCK == 0 && n_in > 0;
}

void di_int_terms_scalar(uint32_t type, const uint8_t *row, const int16_t *limbs, const float *scales,
                         uint32_t nb, float *q, float *s)
{
    for (uint32_t b = 0; b < nb; b++) {
        const uint8_t *block = row + (size_t)b * di_int_block_bytes(type);
        const int16_t *l = limbs + (size_t)b * 2 * DI_INT_BLOCK;
        int32_t p = 0;
        for (int i = 0; i < DI_INT_BLOCK; i++)
            p += di_int_weight_code(type, block, i) * (256 * l[i] + l[DI_INT_BLOCK + i]);
        q[b] = (float)p;
        s[b] = di_qb_f16(block) * scales[b];
    }
}

/* A token's quantized row: limbs[n * 2] (64 per block) and scales[n / 32]. */
static void quantize_token(const float *x, uint32_t n, int16_t *limbs, float *scales)
{
    int32_t codes[DI_INT_BLOCK];
    for (uint32_t b = 0; b < n / DI_INT_BLOCK; b++) {
        scales[b] = di_int_quantize_block(x + (size_t)b * DI_INT_BLOCK, codes);
        di_int_limbs(codes, limbs + (size_t)b * 2 * DI_INT_BLOCK);
    }
}

/*
 * Rows [r0, r1) of a matrix of a covered type against n_tokens tokens. The terms of each
 * output are laid out as two arrays q[], s[] of nb values, padded with zeros
 * to a multiple of 32: a zero term leaves its lane as it was (a lane is never
 * -0, as it starts at +0 and fmaf gives -0 only from -0 + -0), and the padding
 * never crosses a chunk, so the path's dot over the padded arrays is the
 * canonical reduction of int_dot.h over the nb terms.
 */
static void int_matmul_rows(const di_cpu_ops *base, di_int_terms_fn *terms, const di_weight *w,
                            uint32_t r0, uint32_t r1, const float *x, uint32_t n_tokens, float *y,
                            float *scratch)
{
    if (!di_cpu_int_covers(w->type, w->n_in)) {
        base->matmul_rows(w, r0, r1, x, n_tokens, y, scratch);
        return;
    }
    const uint32_t n = w->n_in, nb = n / DI_INT_BLOCK, nbp = (nb + DI_LANES - 1) / DI_LANES * DI_LANES;
    /* scratch: limbs [INT_TOKENS][2 n] int16, scales [INT_TOKENS][nb], then
     * one row's q[nbp], s[nbp] */
    int16_t *limbs = (int16_t *)(void *)scratch;
    float *scales = scratch + (size_t)INT_TOKENS * n;
    float *q = scales + ((size_t)INT_TOKENS * nb + 15) / 16 * 16, *s = q + nbp;
    for (uint32_t i = nb; i < nbp; i++)
        q[i] = s[i] = 0.0f;
    for (uint32_t t0 = 0; t0 < n_tokens; t0 += INT_TOKENS) {
        const uint32_t nt = n_tokens - t0 < INT_TOKENS ? n_tokens - t0 : INT_TOKENS;
        for (uint32_t t = 0; t < nt; t++)
            quantize_token(x + (size_t)(t0 + t) * n, n, limbs + (size_t)t * 2 * n, scales + (size_t)t * nb);
        for (uint32_t r = r0; r < r1; r++) {
            const uint8_t *row = w->data + (size_t)r * w->row_bytes;
            for (uint32_t t = 0; t < nt; t++) {
                terms(w->type, row, limbs + (size_t)t * 2 * n, scales + (size_t)t * nb, nb, q, s);
                y[(size_t)(t0 + t) * w->n_out + r] = base->dot(q, s, nbp);
            }
        }
    }
}

static void int_rows_scalar(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                            uint32_t n_tokens, float *y, float *scratch)
{
    int_matmul_rows(&di_cpu_ops_scalar, di_int_terms_scalar, w, r0, r1, x, n_tokens, y, scratch);
}

#ifdef DI_HAVE_X86_PATHS
static void int_rows_avx2(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                          uint32_t n_tokens, float *y, float *scratch)
{
    int_matmul_rows(&di_cpu_ops_avx2, di_int_terms_avx2, w, r0, r1, x, n_tokens, y, scratch);
}

static void int_rows_avx512(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                            uint32_t n_tokens, float *y, float *scratch)
{
    int_matmul_rows(&di_cpu_ops_avx512, di_int_terms_avx512, w, r0, r1, x, n_tokens, y, scratch);
}
#endif

/* Each path's integer table: its float table with matmul_rows replaced,
 * filled once. */
static di_cpu_ops int_tables[3];
static pthread_once_t int_tables_once = PTHREAD_ONCE_INIT;

static void fill_int_tables(void)
{
    int_tables[0] = di_cpu_ops_scalar;
    int_tables[0].matmul_rows = int_rows_scalar;
#ifdef DI_HAVE_X86_PATHS
    int_tables[1] = di_cpu_ops_avx2;
    int_tables[1].matmul_rows = int_rows_avx2;
    int_tables[2] = di_cpu_ops_avx512;
    int_tables[2].matmul_rows = int_rows_avx512;
#endif
}

const di_cpu_ops *di_cpu_ops_integer(const di_cpu_ops *base)
{
    pthread_once(&int_tables_once, fill_int_tables);
    if (base == &di_cpu_ops_scalar)
        return &int_tables[0];
#ifdef DI_HAVE_X86_PATHS
    if (base == &di_cpu_ops_avx2)
        return &int_tables[1];
    if (base == &di_cpu_ops_avx512)
        return &int_tables[2];
#endif
    return NULL;
}
