/*
 * cpu_int.c — the integer profile on the CPU (cpu_int.h): the quantized
 * activations' buffer, the scalar path on int_dot.h's own code, and each
 * path's integer table.
 */
#include "kernels/cpu/cpu_int.h"

#include <pthread.h>
#include <string.h>

#include "kernels/common/int_dot.h"

static size_t align64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* Rows rounded up to whole token groups, so that every layout fits. */
static size_t padded_tokens(uint32_t n_tokens)
{
    return (size_t)di_qa_groups(n_tokens) * DI_QA_TOKENS;
}

size_t di_qa_bytes(uint32_t n, uint32_t n_tokens)
{
    const size_t t = padded_tokens(n_tokens), nb = n / DI_QA_BLOCK;
    return align64(sizeof(di_qa)) + align64(t * n + DI_QA_SLACK) + align64(t * nb * sizeof(float)) +
           align64(t * 2 * nb * sizeof(int16_t)) + align64(t * nb * sizeof(float)) +
           align64(t * 2 * nb * sizeof(float)) + t / DI_QA_TOKENS * nb * sizeof(di_qa_tblock);
}

di_qa *di_qa_layout(void *buf, uint32_t n, uint32_t n_tokens, int grouped)
{
    const size_t t = padded_tokens(n_tokens), nb = n / DI_QA_BLOCK;
    uint8_t *p = buf;
    di_qa *qa = buf;
    p += align64(sizeof(di_qa));
    qa->n = n, qa->nb = (uint32_t)nb, qa->n_tokens = n_tokens, qa->grouped = grouped, qa->order = 0;
    qa->codes = (int8_t *)p, p += align64(t * n + DI_QA_SLACK);
    qa->scales = (float *)(void *)p, p += align64(t * nb * sizeof(float));
    qa->sums = (int16_t *)(void *)p, p += align64(t * 2 * nb * sizeof(int16_t));
    qa->as_full = (float *)(void *)p, p += align64(t * nb * sizeof(float));
    qa->as_half = (float *)(void *)p, p += align64(t * 2 * nb * sizeof(float));
    qa->tok = (di_qa_tblock *)(void *)p;
    return qa;
}

uint32_t di_qa_units(const di_qa *qa)
{
    return qa->grouped ? di_qa_groups(qa->n_tokens) : 1;
}

void di_qa_unit_tokens(const di_qa *qa, uint32_t u0, uint32_t u1, uint32_t *t0, uint32_t *t1)
{
    const uint32_t per = qa->grouped ? DI_QA_TOKENS : qa->n_tokens;
    *t0 = u0 * per;
    *t1 = (size_t)u1 * per < qa->n_tokens ? u1 * per : qa->n_tokens;
}

void di_qa_fill(di_qa *qa, const float *x, uint32_t u0, uint32_t u1, di_qa_row_fn row)
{
    const uint32_t n = qa->n, nb = qa->nb;
    uint32_t t0, t1;
    di_qa_unit_tokens(qa, u0, u1, &t0, &t1);
    for (uint32_t t = t0; t < t1; t++) {
        int8_t *codes = qa->codes + (size_t)t * n;
        float *scales = qa->scales + (size_t)t * nb;
        int16_t *sums = qa->sums + (size_t)t * 2 * nb;
        row(x + (size_t)t * n, n, codes, scales, sums);
        for (uint32_t b = 0; b < nb; b++) {
            const float a = scales[b];
            qa->as_full[(size_t)t * nb + b] = a * (float)(sums[2 * b] + sums[2 * b + 1]);
            qa->as_half[(size_t)t * 2 * nb + b] = a * (float)sums[2 * b];
            qa->as_half[(size_t)t * 2 * nb + nb + b] = a * (float)sums[2 * b + 1];
        }
    }
    if (!qa->grouped)
        return;
    memset(qa->tok + (size_t)u0 * nb, 0, (size_t)(u1 - u0) * nb * sizeof(di_qa_tblock));
    for (uint32_t t = t0; t < t1; t++)
        for (uint32_t b = 0; b < nb; b++) {
            di_qa_tblock *tb = qa->tok + (size_t)(t / DI_QA_TOKENS) * nb + b;
            const uint32_t l = t % DI_QA_TOKENS;
            const int16_t *sums = qa->sums + (size_t)t * 2 * nb + 2 * b;
            for (int i = 0; i < 8; i++)
                memcpy(tb->codes[i][l], qa->codes + (size_t)t * n + (size_t)b * DI_QA_BLOCK + 4 * i, 4);
            tb->a[l] = qa->scales[(size_t)t * nb + b];
            tb->as_full[l] = qa->as_full[(size_t)t * nb + b];
            tb->as_half[0][l] = qa->as_half[(size_t)t * 2 * nb + b];
            tb->as_half[1][l] = qa->as_half[(size_t)t * 2 * nb + nb + b];
            tb->s[l] = sums[0] + sums[1];
            tb->s_half[0][l] = sums[0];
            tb->s_half[1][l] = sums[1];
        }
}

uint32_t di_int_layout_scalar(const di_weight *w, uint32_t n_tokens, void *buf)
{
    return di_qa_units(di_qa_layout(buf, w->n_in, n_tokens, 0));
}

void di_int_quantize_scalar(const di_weight *w, const float *x, void *buf, uint32_t u0, uint32_t u1)
{
    (void)w;
    di_qa_fill(buf, x, u0, u1, di_qa_row);
}

void di_int_rows_scalar(const di_weight *w, uint32_t r0, uint32_t r1, const void *buf, float *y, float *scratch)
{
    (void)scratch;
    const di_qa *qa = buf;
    const uint32_t n = qa->n, nb = qa->nb;
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        for (uint32_t t = 0; t < qa->n_tokens; t++)
            y[(size_t)t * w->n_out + r] = di_int_dot(w->type, row, qa->codes + (size_t)t * n, qa->scales + (size_t)t * nb,
                                                     qa->sums + (size_t)t * 2 * nb, n);
    }
}

/* Each path's integer table: its float table with the integer product set,
 * filled once. */
static di_cpu_ops int_tables[3];
static pthread_once_t int_tables_once = PTHREAD_ONCE_INIT;

static void fill_int_tables(void)
{
    int_tables[0] = di_cpu_ops_scalar;
    int_tables[0].int_layout = di_int_layout_scalar;
    int_tables[0].int_quantize = di_int_quantize_scalar;
    int_tables[0].int_rows = di_int_rows_scalar;
#ifdef DI_HAVE_X86_PATHS
    int_tables[1] = di_cpu_ops_avx2;
    int_tables[1].int_layout = di_int_layout_scalar;
    int_tables[1].int_quantize = di_int_quantize_scalar;
    int_tables[1].int_rows = di_int_rows_avx2;
    int_tables[2] = di_cpu_ops_avx512;
    /* an AVX-512 CPU without VNNI (Skylake-SP) runs the avx2 integer product */
    const int vnni = (di_cpu_features() & DI_CPU_AVX512VNNI) != 0;
    int_tables[2].int_layout = vnni ? di_int_layout_avx512 : di_int_layout_scalar;
    int_tables[2].int_quantize = vnni ? di_int_quantize_avx512 : di_int_quantize_scalar;
    int_tables[2].int_rows = vnni ? di_int_rows_avx512 : di_int_rows_avx2;
    int_tables[2].int_packed_row_bytes = vnni ? di_int_packed_row_bytes_avx512 : NULL;
    int_tables[2].int_pack_rows = vnni ? di_int_pack_rows_avx512 : NULL;
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
