/*
 * forward_steps.c — the CPU's steps of the layer recipe (layer_recipe.h),
 * each parallel over independent rows or heads on the session's pool, with
 * the kernels of its CPU path.
 */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "lib/backend/cpu/forward_steps.h"

static float *act(const di_cpu_call *c, di_act a)
{
    return c->f->act[a];
}

typedef struct step_job {
    di_forward *f;
    const di_forward_row *rows;
    const di_layer *ly;
    uint32_t layer;
    int flag;             /* qk_rope_store: QK-norm; glu: DI_GLU_* */
    const float *src, *w; /* norm_rows */
    float *dst;
} step_job;

/* X = the tokens' embedding rows (times embd_scale when it is not 0). */
static void embed(void *ctx)
{
    const di_cpu_call *c = ctx;
    const di_model *m = c->f->model;
    for (uint32_t r = 0; r < c->n_rows; r++) {
        float *x = act(c, DI_ACT_X) + (size_t)r * m->n_embd;
        di_cpu_dequant_row(&m->tok_embd, (uint32_t)c->rows[r].token, x);
        if (m->embd_scale != 0.0f)
            for (uint32_t i = 0; i < m->n_embd; i++)
                x[i] = x[i] * m->embd_scale;
    }
}

static void norm_rows(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const step_job *job = ctx;
    const di_model *m = job->f->model;
    for (uint32_t r = begin; r < end; r++)
        job->f->ops->rmsnorm(job->src + (size_t)r * m->n_embd, job->w, m->n_embd, m->rms_eps,
                             job->dst + (size_t)r * m->n_embd);
}

static void norm(void *ctx, uint32_t il, di_act src, di_tensor_role w, di_act dst)
{
    const di_cpu_call *c = ctx;
    step_job job = {.f = c->f, .src = act(c, src), .w = di_layer_vector(&c->f->model->layers[il], w),
                    .dst = act(c, dst)};
    di_pool_run(c->f->pool, c->n_rows, norm_rows, &job);
}

/* y = W x, then + bias (when there is one) after each dot product. */
static void matmul(void *ctx, uint32_t il, di_tensor_role role, di_tensor_role bias_role, di_act x,
                   di_act y_act)
{
    const di_cpu_call *c = ctx;
    di_forward *f = c->f;
    const di_layer *ly = &f->model->layers[il];
    const di_weight *w = di_layer_matrix(ly, role);
    const float *bias = di_layer_vector(ly, bias_role);
    float *y = act(c, y_act);
    di_cpu_matmul(f->pool, f->ops, w, act(c, x), c->n_rows, y, f->matmul_scratch, f->qa);
    if (!bias)
        return;
    for (uint32_t t = 0; t < c->n_rows; t++)
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
    const di_rope_pairing pairing = m->arch_info->rope_pairing;
    for (uint32_t r = begin; r < end; r++) {
        const di_forward_row *row = &job->rows[r];
        float *q = f->act[DI_ACT_Q] + r * q_dim, *k = f->act[DI_ACT_K] + r * kv_dim;
        if (job->flag) {
            norm_heads(f->ops, q, m->n_head, m->head_dim, ly->q_norm, m->rms_eps);
            norm_heads(f->ops, k, m->n_head_kv, m->head_dim, ly->k_norm, m->rms_eps);
        }
        const float *c = f->rope_cos[ly->rope_set] + (size_t)row->pos * half;
        const float *s = f->rope_sin[ly->rope_set] + (size_t)row->pos * half;
        f->ops->rope(q, m->n_head, m->head_dim, m->n_rot, pairing, c, s);
        f->ops->rope(k, m->n_head_kv, m->head_dim, m->n_rot, pairing, c, s);
        const di_kv_layer *l = &row->kv[job->layer];
        memcpy(l->k + (size_t)row->pos * kv_dim, k, kv_dim * sizeof(float));
        memcpy(l->v + (size_t)row->pos * kv_dim, f->act[DI_ACT_V] + r * kv_dim, kv_dim * sizeof(float));
    }
}

static void qk_rope_store(void *ctx, uint32_t il, int qk_norm)
{
    const di_cpu_call *c = ctx;
    step_job job = {.f = c->f, .rows = c->rows, .ly = &c->f->model->layers[il], .layer = il,
                    .flag = qk_norm};
    di_pool_run(c->f->pool, c->n_rows, qk_rope_store_rows, &job);
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
        f->ops->attention_head(f->act[DI_ACT_Q] + r * q_dim + (size_t)h * hd, l->k + base, l->v + base,
                               (uint32_t)kv_dim, row->pos + 1 - first, hd, m->attn_scale, m->attn_softcap,
                               f->act[DI_ACT_ATT] + r * q_dim + (size_t)h * hd, scratch);
    }
}

static void attention(void *ctx, uint32_t il)
{
    const di_cpu_call *c = ctx;
    step_job job = {.f = c->f, .rows = c->rows, .ly = &c->f->model->layers[il], .layer = il};
    di_pool_run(c->f->pool, c->n_rows * c->f->model->n_head, attention_items, &job);
}

static void glu_rows(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const step_job *job = ctx;
    di_forward *f = job->f;
    const size_t n_ff = f->model->n_ff, at = begin * n_ff, n = (end - begin) * n_ff;
    if (job->flag == DI_GLU_GELU)
        f->ops->gelu_mul(f->act[DI_ACT_GATE] + at, f->act[DI_ACT_UP] + at, n);
    else
        f->ops->silu_mul(f->act[DI_ACT_GATE] + at, f->act[DI_ACT_UP] + at, n);
}

static void glu(void *ctx, di_glu kind)
{
    const di_cpu_call *c = ctx;
    step_job job = {.f = c->f, .flag = kind};
    di_pool_run(c->f->pool, c->n_rows, glu_rows, &job);
}

static void residual(void *ctx, di_act y)
{
    const di_cpu_call *c = ctx;
    float *x = act(c, DI_ACT_X);
    c->f->ops->add(x, x, act(c, y), (size_t)c->n_rows * c->f->model->n_embd);
}

const di_steps di_cpu_steps = {
    .embed = embed,
    .norm = norm,
    .matmul = matmul,
    .qk_rope_store = qk_rope_store,
    .attention = attention,
    .glu = glu,
    .residual = residual,
};
