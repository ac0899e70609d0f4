/*
 * forward_llama.c — the llama forward pass, one screen per layer:
 *
 *   x = embed(token)
 *   for each layer:
 *     h = rmsnorm(x) * attn_norm
 *     q, k, v = Wq h, Wk h, Wv h;  rope(q), rope(k);  append k, v to the cache
 *     x = x + Wo attention(q, cache)          (grouped-query heads)
 *     h = rmsnorm(x) * ffn_norm
 *     x = x + Wdown(silu(Wgate h) * (Wup h))
 *   logits = Wout (rmsnorm(x) * output_norm)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "forward.h"
#include "numerics.h"

static float *alloc_floats(size_t n)
{
    return malloc((n ? n : 1) * sizeof(float));
}

/* cos/sin of pos * base^(-2i/n_rot), computed in double and rounded once. */
static void fill_rope_tables(di_forward *f)
{
    const di_model *m = f->model;
    const uint32_t half = m->n_rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        const double inv_freq = pow((double)m->rope_base, -2.0 * (double)i / (double)m->n_rot);
        for (uint32_t p = 0; p < f->ctx_len; p++) {
            const double theta = (double)p * inv_freq;
            f->rope_cos[(size_t)p * half + i] = (float)cos(theta);
            f->rope_sin[(size_t)p * half + i] = (float)sin(theta);
        }
    }
}

di_status di_forward_init(di_forward *f, const di_model *m, di_pool *pool, uint32_t ctx_len,
                          uint32_t max_rows)
{
    memset(f, 0, sizeof *f);
    f->model = m;
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
    f->attn_scratch_size = ctx_len + 2 * (size_t)DI_LANES * m->head_dim;

    f->rope_cos = alloc_floats((size_t)ctx_len * (m->n_rot / 2));
    f->rope_sin = alloc_floats((size_t)ctx_len * (m->n_rot / 2));
    f->x = alloc_floats(max_rows * (size_t)m->n_embd);
    f->xn = alloc_floats(max_rows * (size_t)m->n_embd);
    f->tmp = alloc_floats(max_rows * (size_t)m->n_embd);
    f->q = alloc_floats(max_rows * q_dim);
    f->att = alloc_floats(max_rows * q_dim);
    f->k = alloc_floats(max_rows * kv_dim);
    f->v = alloc_floats(max_rows * kv_dim);
    f->gate = alloc_floats(max_rows * (size_t)m->n_ff);
    f->up = alloc_floats(max_rows * (size_t)m->n_ff);
    f->matmul_scratch = alloc_floats(threads * max_in);
    f->attn_scratch = alloc_floats(threads * f->attn_scratch_size);
    if (!f->rope_cos || !f->rope_sin || !f->x || !f->xn || !f->tmp || !f->q || !f->att || !f->k ||
        !f->v || !f->gate || !f->up || !f->matmul_scratch || !f->attn_scratch) {
        di_forward_release(f);
        return DI_ERR_OUT_OF_MEMORY;
    }
    fill_rope_tables(f);
    return DI_OK;
}

void di_forward_release(di_forward *f)
{
    float **bufs[] = {&f->rope_cos, &f->rope_sin, &f->x, &f->xn, &f->tmp, &f->q, &f->att,
                      &f->k, &f->v, &f->gate, &f->up, &f->matmul_scratch, &f->attn_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

/* ---- per-row steps (parallel over rows) --------------------------------- */

typedef struct row_job {
    di_forward *f;
    const di_forward_row *rows;
    const float *norm;   /* for norm_rows */
    uint32_t layer;      /* for rope_and_store */
} row_job;

static void norm_rows(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    row_job *job = ctx;
    const di_model *m = job->f->model;
    for (uint32_t r = begin; r < end; r++)
        di_cpu_rmsnorm(job->f->x + (size_t)r * m->n_embd, job->norm, m->n_embd, m->rms_eps,
                       job->f->xn + (size_t)r * m->n_embd);
}

static void rope_and_store(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    row_job *job = ctx;
    di_forward *f = job->f;
    const di_model *m = f->model;
    const size_t q_dim = (size_t)m->n_head * m->head_dim, kv_dim = (size_t)m->n_head_kv * m->head_dim;
    const uint32_t half = m->n_rot / 2;
    for (uint32_t r = begin; r < end; r++) {
        const di_forward_row *row = &job->rows[r];
        const float *c = f->rope_cos + (size_t)row->pos * half, *s = f->rope_sin + (size_t)row->pos * half;
        float *q = f->q + r * q_dim, *k = f->k + r * kv_dim;
        di_cpu_rope(q, m->n_head, m->head_dim, m->n_rot, c, s);
        di_cpu_rope(k, m->n_head_kv, m->head_dim, m->n_rot, c, s);
        const size_t at = ((size_t)job->layer * f->ctx_len + row->pos) * kv_dim;
        memcpy(row->k_cache + at, k, kv_dim * sizeof(float));
        memcpy(row->v_cache + at, f->v + r * kv_dim, kv_dim * sizeof(float));
    }
}

/* Items are (row, head) pairs: item = row * n_head + head. */
static void attention_items(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    row_job *job = ctx;
    di_forward *f = job->f;
    const di_model *m = f->model;
    const uint32_t hd = m->head_dim, group = m->n_head / m->n_head_kv;
    const size_t q_dim = (size_t)m->n_head * hd, kv_dim = (size_t)m->n_head_kv * hd;
    const float scale = di_rsqrt((float)hd);
    float *scratch = f->attn_scratch + (size_t)thread * f->attn_scratch_size;
    for (uint32_t item = begin; item < end; item++) {
        const uint32_t r = item / m->n_head, h = item % m->n_head, kvh = h / group;
        const di_forward_row *row = &job->rows[r];
        const size_t layer_base = (size_t)job->layer * f->ctx_len * kv_dim + (size_t)kvh * hd;
        di_cpu_attention_head(f->q + r * q_dim + (size_t)h * hd, row->k_cache + layer_base,
                              row->v_cache + layer_base, (uint32_t)kv_dim, row->pos + 1, hd, scale,
                              f->att + r * q_dim + (size_t)h * hd, scratch);
    }
}

static void add_into_x(di_forward *f, uint32_t n_rows)
{
    const size_t n = (size_t)n_rows * f->model->n_embd;
    for (size_t i = 0; i < n; i++)
        f->x[i] = f->x[i] + f->tmp[i];
}

static void swiglu(di_forward *f, uint32_t n_rows)
{
    const size_t n = (size_t)n_rows * f->model->n_ff;
    for (size_t i = 0; i < n; i++)
        f->gate[i] = di_silu(f->gate[i]) * f->up[i];
}

/* ---- the pass ------------------------------------------------------------ */

static void layer_forward(di_forward *f, const di_forward_row *rows, uint32_t n_rows, uint32_t il)
{
    const di_model *m = f->model;
    const di_layer *ly = &m->layers[il];
    row_job job = {f, rows, ly->attn_norm, il};

    di_pool_run(f->pool, n_rows, norm_rows, &job);
    di_cpu_matmul(f->pool, &ly->wq, f->xn, n_rows, f->q, f->matmul_scratch);
    di_cpu_matmul(f->pool, &ly->wk, f->xn, n_rows, f->k, f->matmul_scratch);
    di_cpu_matmul(f->pool, &ly->wv, f->xn, n_rows, f->v, f->matmul_scratch);
    di_pool_run(f->pool, n_rows, rope_and_store, &job);
    di_pool_run(f->pool, n_rows * m->n_head, attention_items, &job);
    di_cpu_matmul(f->pool, &ly->wo, f->att, n_rows, f->tmp, f->matmul_scratch);
    add_into_x(f, n_rows);

    job.norm = ly->ffn_norm;
    di_pool_run(f->pool, n_rows, norm_rows, &job);
    di_cpu_matmul(f->pool, &ly->ffn_gate, f->xn, n_rows, f->gate, f->matmul_scratch);
    di_cpu_matmul(f->pool, &ly->ffn_up, f->xn, n_rows, f->up, f->matmul_scratch);
    swiglu(f, n_rows);
    di_cpu_matmul(f->pool, &ly->ffn_down, f->gate, n_rows, f->tmp, f->matmul_scratch);
    add_into_x(f, n_rows);
}

void di_forward_rows(di_forward *f, const di_forward_row *rows, uint32_t n_rows)
{
    const di_model *m = f->model;
    for (uint32_t r = 0; r < n_rows; r++)
        di_cpu_dequant_row(&m->tok_embd, (uint32_t)rows[r].token, f->x + (size_t)r * m->n_embd);
    for (uint32_t il = 0; il < m->n_layer; il++)
        layer_forward(f, rows, n_rows, il);
}

void di_forward_logits(di_forward *f, const uint32_t *row_idx, uint32_t n, float *logits)
{
    const di_model *m = f->model;
    for (uint32_t i = 0; i < n; i++)
        di_cpu_rmsnorm(f->x + (size_t)row_idx[i] * m->n_embd, m->output_norm, m->n_embd, m->rms_eps,
                       f->xn + (size_t)i * m->n_embd);
    di_cpu_matmul(f->pool, &m->output, f->xn, n, logits, f->matmul_scratch);
}
