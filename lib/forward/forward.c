/*
 * forward.c — what every architecture's forward pass shares: buffers, RoPE
 * tables, the steps a layer is made of (forward_steps.h), and the pass
 * itself: embed, run the layers of the model's family, final norm, logits.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "forward.h"
#include "forward_steps.h"
#include "kv_cache.h"
#include "numerics.h"

/* 64-byte aligned, so that vector loads of a row never straddle two cache
 * lines (that halves the speed of the SIMD kernels). */
static float *alloc_floats(size_t n)
{
    const size_t bytes = ((n ? n : 1) * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes);
}

/* cos/sin of (pos * scale) * base^(-2i/n_rot) for positions from..to-1,
 * computed in double and rounded once, with the library's own functions
 * (numerics.h), never libm's: the tables are the same bits with every C
 * library, and each entry depends on its position only. */
static void fill_rope_tables(const di_model *m, uint32_t set, uint32_t from, uint32_t to,
                             float *cos_table, float *sin_table)
{
    const uint32_t half = m->n_rot / 2;
    const double base = m->rope_base[set], scale = m->rope_scale[set];
    for (uint32_t i = 0; i < half; i++) {
        const double inv_freq = di_rope_inv_freq(base, i, m->n_rot);
        for (uint32_t p = from; p < to; p++) {
            double s, c;
            di_sincos((double)p * scale * inv_freq, &s, &c);
            cos_table[(size_t)p * half + i] = (float)c;
            sin_table[(size_t)p * half + i] = (float)s;
        }
    }
}

/* Floats of one thread's attention scratch for n positions: the scores, then
 * DI_LANES partial sums of a head (cpu_kernels.h). */
static size_t attn_scratch_floats(const di_model *m, uint32_t n)
{
    return n + 2 * (size_t)DI_LANES * m->head_dim;
}

di_status di_forward_init(di_forward *f, const di_model *m, const di_cpu_ops *ops, di_pool *pool,
                          uint32_t ctx_len, uint32_t max_rows)
{
    memset(f, 0, sizeof *f);
    f->model = m;
    f->ops = ops;
    f->pool = pool;
    f->ctx_len = ctx_len;
    f->max_rows = max_rows;
    const size_t threads = di_pool_threads(pool);
    const size_t q_dim = (size_t)m->n_head * m->head_dim;
    const size_t kv_dim = (size_t)m->n_head_kv * m->head_dim;
    size_t max_in = m->n_embd;
    if (m->n_ff > max_in)
        max_in = m->n_ff;
    if (q_dim > max_in)
        max_in = q_dim;
    f->x = alloc_floats(max_rows * (size_t)m->n_embd);
    f->xn = alloc_floats(max_rows * (size_t)m->n_embd);
    f->tmp = alloc_floats(max_rows * (size_t)m->n_embd);
    f->q = alloc_floats(max_rows * q_dim);
    f->att = alloc_floats(max_rows * q_dim);
    f->k = alloc_floats(max_rows * kv_dim);
    f->v = alloc_floats(max_rows * kv_dim);
    f->gate = alloc_floats(max_rows * (size_t)m->n_ff);
    f->up = alloc_floats(max_rows * (size_t)m->n_ff);
    f->matmul_scratch = alloc_floats(threads * DI_MATMUL_SCRATCH(max_in));
    if (!f->x || !f->xn || !f->tmp || !f->q || !f->att || !f->k || !f->v || !f->gate || !f->up ||
        !f->matmul_scratch) {
        di_forward_release(f);
        return DI_ERR_OUT_OF_MEMORY;
    }
    return DI_OK;
}

di_status di_forward_reserve(di_forward *f, uint32_t n)
{
    if (n <= f->n_pos)
        return DI_OK;
    const di_model *m = f->model;
    const uint32_t n_pos = di_kv_grown_capacity(f->n_pos, n, f->ctx_len);
    const size_t half = m->n_rot / 2, threads = di_pool_threads(f->pool);
    const size_t scratch_size = attn_scratch_floats(m, n_pos);
    /* everything new first, so that a failure changes nothing */
    float *cos_t[DI_MAX_ROPE_SETS] = {0}, *sin_t[DI_MAX_ROPE_SETS] = {0};
    float *scratch = alloc_floats(threads * scratch_size);
    int ok = scratch != NULL;
    for (uint32_t set = 0; set < m->n_rope_sets; set++) {
        cos_t[set] = alloc_floats((size_t)n_pos * half);
        sin_t[set] = alloc_floats((size_t)n_pos * half);
        ok = ok && cos_t[set] && sin_t[set];
    }
    if (!ok) {
        free(scratch);
        for (uint32_t set = 0; set < DI_MAX_ROPE_SETS; set++) {
            free(cos_t[set]);
            free(sin_t[set]);
        }
        return DI_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t set = 0; set < m->n_rope_sets; set++) {
        if (f->n_pos > 0) {
            memcpy(cos_t[set], f->rope_cos[set], (size_t)f->n_pos * half * sizeof(float));
            memcpy(sin_t[set], f->rope_sin[set], (size_t)f->n_pos * half * sizeof(float));
        }
        fill_rope_tables(m, set, f->n_pos, n_pos, cos_t[set], sin_t[set]);
        free(f->rope_cos[set]);
        free(f->rope_sin[set]);
        f->rope_cos[set] = cos_t[set];
        f->rope_sin[set] = sin_t[set];
    }
    free(f->attn_scratch);
    f->attn_scratch = scratch;
    f->attn_scratch_size = scratch_size;
    f->n_pos = n_pos;
    return DI_OK;
}

void di_forward_release(di_forward *f)
{
    float **bufs[] = {&f->rope_cos[0], &f->rope_sin[0], &f->rope_cos[1], &f->rope_sin[1], &f->x,
                      &f->xn, &f->tmp, &f->q, &f->att, &f->k, &f->v, &f->gate, &f->up,
                      &f->matmul_scratch, &f->attn_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

/* ---- steps ------------------------------------------------------------------ */

typedef struct step_job {
    di_forward *f;
    const di_forward_row *rows;
    const di_layer *ly;
    uint32_t layer;
    const float *src, *w; /* norm_rows */
    float *dst;
} step_job;

static void norm_rows(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const step_job *job = ctx;
    const di_model *m = job->f->model;
    for (uint32_t r = begin; r < end; r++)
        job->f->ops->rmsnorm(job->src + (size_t)r * m->n_embd, job->w, m->n_embd, m->rms_eps,
                             job->dst + (size_t)r * m->n_embd);
}

void di_step_norm(di_forward *f, const float *src, const float *w, uint32_t n_rows, float *dst)
{
    step_job job = {.f = f, .src = src, .w = w, .dst = dst};
    di_pool_run(f->pool, n_rows, norm_rows, &job);
}

void di_step_matmul(di_forward *f, const di_weight *w, const float *bias, const float *x,
                    uint32_t n_rows, float *y)
{
    di_cpu_matmul(f->pool, f->ops, w, x, n_rows, y, f->matmul_scratch);
    if (!bias)
        return;
    for (uint32_t t = 0; t < n_rows; t++)
        for (uint32_t r = 0; r < w->n_out; r++)
            y[(size_t)t * w->n_out + r] = y[(size_t)t * w->n_out + r] + bias[r];
}

/* RMSNorm of each head of head_dim values in place (QK-norm). */
static void norm_heads(const di_cpu_ops *ops, float *v, uint32_t n_heads, uint32_t head_dim,
                       const float *w, float eps)
{
    for (uint32_t h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * head_dim;
        ops->rmsnorm(x, w, head_dim, eps, x); /* reads x[i] before writing it */
    }
}

static void qk_rope_store_rows(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const step_job *job = ctx;
    di_forward *f = job->f;
    const di_model *m = f->model;
    const di_layer *ly = job->ly;
    const size_t q_dim = (size_t)m->n_head * m->head_dim, kv_dim = (size_t)m->n_head_kv * m->head_dim;
    const uint32_t half = m->n_rot / 2;
    for (uint32_t r = begin; r < end; r++) {
        const di_forward_row *row = &job->rows[r];
        float *q = f->q + r * q_dim, *k = f->k + r * kv_dim;
        if (ly->q_norm) {
            norm_heads(f->ops, q, m->n_head, m->head_dim, ly->q_norm, m->rms_eps);
            norm_heads(f->ops, k, m->n_head_kv, m->head_dim, ly->k_norm, m->rms_eps);
        }
        const float *c = f->rope_cos[ly->rope_set] + (size_t)row->pos * half;
        const float *s = f->rope_sin[ly->rope_set] + (size_t)row->pos * half;
        f->ops->rope(q, m->n_head, m->head_dim, m->n_rot, m->rope_pairing, c, s);
        f->ops->rope(k, m->n_head_kv, m->head_dim, m->n_rot, m->rope_pairing, c, s);
        const di_kv_layer *l = &row->kv[job->layer];
        memcpy(l->k + (size_t)row->pos * kv_dim, k, kv_dim * sizeof(float));
        memcpy(l->v + (size_t)row->pos * kv_dim, f->v + r * kv_dim, kv_dim * sizeof(float));
    }
}

void di_step_qk_rope_store(di_forward *f, const di_forward_row *rows, uint32_t n_rows,
                           const di_layer *ly, uint32_t il)
{
    step_job job = {.f = f, .rows = rows, .ly = ly, .layer = il};
    di_pool_run(f->pool, n_rows, qk_rope_store_rows, &job);
}

/* Items are (row, head) pairs: item = row * n_head + head. A sliding window
 * keeps the keys at positions pos - window + 1 .. pos; the reduction over
 * keys is indexed from the first key kept. */
static void attention_items(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    const step_job *job = ctx;
    di_forward *f = job->f;
    const di_model *m = f->model;
    const uint32_t hd = m->head_dim, group = m->n_head / m->n_head_kv, window = job->ly->window;
    const size_t q_dim = (size_t)m->n_head * hd, kv_dim = (size_t)m->n_head_kv * hd;
    float *scratch = f->attn_scratch + (size_t)thread * f->attn_scratch_size;
    for (uint32_t item = begin; item < end; item++) {
        const uint32_t r = item / m->n_head, h = item % m->n_head, kvh = h / group;
        const di_forward_row *row = &job->rows[r];
        const uint32_t first = window && row->pos + 1 > window ? row->pos + 1 - window : 0;
        const size_t base = (size_t)first * kv_dim + (size_t)kvh * hd;
        const di_kv_layer *l = &row->kv[job->layer];
        f->ops->attention_head(f->q + r * q_dim + (size_t)h * hd, l->k + base, l->v + base,
                               (uint32_t)kv_dim, row->pos + 1 - first, hd, m->attn_scale,
                               f->att + r * q_dim + (size_t)h * hd, scratch);
    }
}

void di_step_attention(di_forward *f, const di_forward_row *rows, uint32_t n_rows,
                       const di_layer *ly, uint32_t il)
{
    step_job job = {.f = f, .rows = rows, .ly = ly, .layer = il};
    di_pool_run(f->pool, n_rows * f->model->n_head, attention_items, &job);
}

void di_step_residual(di_forward *f, const float *y, uint32_t n_rows)
{
    f->ops->add(f->x, f->x, y, (size_t)n_rows * f->model->n_embd);
}

static void glu_rows(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const step_job *job = ctx;
    di_forward *f = job->f;
    const size_t n_ff = f->model->n_ff, at = begin * n_ff, n = (end - begin) * n_ff;
    if (job->layer == DI_GLU_GELU)
        f->ops->gelu_mul(f->gate + at, f->up + at, n);
    else
        f->ops->silu_mul(f->gate + at, f->up + at, n);
}

void di_step_glu(di_forward *f, di_glu kind, uint32_t n_rows)
{
    step_job job = {.f = f, .layer = kind};
    di_pool_run(f->pool, n_rows, glu_rows, &job);
}

/* ---- the pass ----------------------------------------------------------------- */

void di_forward_rows(di_forward *f, const di_forward_row *rows, uint32_t n_rows)
{
    const di_model *m = f->model;
    for (uint32_t r = 0; r < n_rows; r++) {
        float *x = f->x + (size_t)r * m->n_embd;
        di_cpu_dequant_row(&m->tok_embd, (uint32_t)rows[r].token, x);
        if (m->embd_scale != 0.0f)
            for (uint32_t i = 0; i < m->n_embd; i++)
                x[i] = x[i] * m->embd_scale;
    }
    for (uint32_t il = 0; il < m->n_layer; il++) {
        if (m->arch_id == DI_ARCH_GEMMA3)
            di_gemma3_layer(f, rows, n_rows, il);
        else
            di_llama_layer(f, rows, n_rows, il);
    }
}

void di_forward_logits(di_forward *f, const uint32_t *row_idx, uint32_t n, float *logits)
{
    const di_model *m = f->model;
    for (uint32_t i = 0; i < n; i++)
        f->ops->rmsnorm(f->x + (size_t)row_idx[i] * m->n_embd, m->output_norm, m->n_embd, m->rms_eps,
                        f->xn + (size_t)i * m->n_embd);
    di_cpu_matmul(f->pool, f->ops, &m->output, f->xn, n, logits, f->matmul_scratch);
}
