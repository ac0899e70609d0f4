/*
 * layer_ops.c — the CPU's operations of the layer recipe (layer_recipe.h),
 * each parallel over independent rows or heads on the session's pool, with
 * the kernels of its CPU path.
 */
#include <string.h>

#include "kernels/common/int_dot.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/backend/cpu/layer_ops.h"

static float *act(const di_cpu_call *c, di_act a)
{
    return c->f->act[a];
}

typedef struct op_job {
    di_forward *f;
    const di_forward_row *rows;
    uint32_t n_rows; /* attention */
    const di_layer *ly;
    uint32_t layer;
    int flag;             /* qk_rope_store: QK-norm; glu: DI_GLU_* */
    const float *src, *w; /* norm_rows */
    float *dst;
} op_job;

/* Every operation but matmul begins here: it may write any activation, so the
 * quantized rows the last product left (di_forward.qa_src) are not reused. */
static void op_begins(const di_cpu_call *c)
{
    c->f->qa_src = NULL;
}

/* X = the tokens' embedding rows (times embd_scale when it is not 0). */
static void embed(void *ctx)
{
    const di_cpu_call *c = ctx;
    op_begins(c);
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
    const op_job *job = ctx;
    const di_model *m = job->f->model;
    for (uint32_t r = begin; r < end; r++)
        job->f->ops->rmsnorm(job->src + (size_t)r * m->n_embd, job->w, m->n_embd, m->rms_eps,
                             job->dst + (size_t)r * m->n_embd);
}

static void norm(void *ctx, uint32_t il, di_act src, di_tensor_role w, di_act dst)
{
    const di_cpu_call *c = ctx;
    op_begins(c);
    op_job job = {.f = c->f, .src = act(c, src), .w = di_layer_vector(&c->f->model->layers[il], w),
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
    const float *in = act(c, x);
    di_cpu_matmul(f->pool, f->ops, w, in, c->n_rows, y, f->matmul_scratch, f->qa, f->qa_src == in);
    /* qa now holds `in` quantized, unless w took the float product (then it
     * holds what it held, unless that was y) */
    if (f->qa && di_int_type(w->type))
        f->qa_src = in;
    else if (f->qa_src == y)
        f->qa_src = NULL;
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
    const op_job *job = ctx;
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
    op_begins(c);
    op_job job = {.f = c->f, .rows = c->rows, .ly = &c->f->model->layers[il], .layer = il,
                    .flag = qk_norm};
    di_pool_run(c->f->pool, c->n_rows, qk_rope_store_rows, &job);
}

/*
 * Attention runs in tiles (cpu_ops.h's di_attn_tile): up to tile_rows rows of
 * a slice and tile_heads query heads of one KV head, which share each load of
 * a key and value row. An item is one block of tile_rows rows, one KV head and
 * one set of its query heads; inside a block, a tile is a run of rows of one
 * sequence at consecutive positions whose kept keys start at the same place.
 * Which rows share a tile changes no bit (each query's result is
 * di_cpu_attention_head's). A sliding window keeps the keys at positions
 * pos - window + 1 .. pos; the reduction over keys is indexed from the first
 * key kept.
 */
typedef struct attention_shape {
    uint32_t tile_heads, head_sets, tile_rows, blocks;
} attention_shape;

static attention_shape attention_shape_of(const di_model *m, uint32_t n_rows)
{
    const uint32_t group = m->n_head / m->n_head_kv;
    attention_shape a;
    a.tile_heads = group < DI_ATTN_TILE_QUERIES ? group : DI_ATTN_TILE_QUERIES;
    a.head_sets = (group + a.tile_heads - 1) / a.tile_heads;
    a.tile_rows = DI_ATTN_TILE_QUERIES / a.tile_heads;
    a.blocks = (n_rows + a.tile_rows - 1) / a.tile_rows;
    return a;
}

static uint32_t first_key(const di_forward_row *row, uint32_t window)
{
    return window && row->pos + 1 > window ? row->pos + 1 - window : 0;
}

static void attention_items(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    const op_job *job = ctx;
    di_forward *f = job->f;
    const di_model *m = f->model;
    const uint32_t hd = m->head_dim, group = m->n_head / m->n_head_kv, window = job->ly->window;
    const size_t q_dim = (size_t)m->n_head * hd, kv_dim = (size_t)m->n_head_kv * hd;
    const attention_shape a = attention_shape_of(m, job->n_rows);
    float *scratch = f->attn_scratch + (size_t)thread * f->attn_scratch_size;
    for (uint32_t item = begin; item < end; item++) {
        /* blocks alternate from both ends, so that each thread's contiguous
         * share of items has about as many short rows as long ones */
        const uint32_t p = item / (m->n_head_kv * a.head_sets), rest = item % (m->n_head_kv * a.head_sets);
        const uint32_t block = p % 2 ? a.blocks - 1 - p / 2 : p / 2;
        const uint32_t kvh = rest / a.head_sets, h0 = kvh * group + rest % a.head_sets * a.tile_heads;
        const uint32_t heads = kvh * group + group - h0 < a.tile_heads ? kvh * group + group - h0 : a.tile_heads;
        const uint32_t r_end = (block + 1) * a.tile_rows < job->n_rows ? (block + 1) * a.tile_rows : job->n_rows;
        for (uint32_t r = block * a.tile_rows, n; r < r_end; r += n) {
            const di_forward_row *row = &job->rows[r];
            const uint32_t first = first_key(row, window);
            for (n = 1; r + n < r_end; n++) {
                const di_forward_row *next = &job->rows[r + n];
                if (next->kv != row->kv || next->pos != row->pos + n || first_key(next, window) != first)
                    break;
            }
            const size_t base = (size_t)first * kv_dim + (size_t)kvh * hd, at = r * q_dim + (size_t)h0 * hd;
            const di_kv_layer *l = &row->kv[job->layer];
            const di_attn_tile tile = {
                .q = f->act[DI_ACT_Q] + at, .out = f->act[DI_ACT_ATT] + at, .q_stride = q_dim,
                .n_rows = n, .n_heads = heads, .k = l->k + base, .v = l->v + base,
                .kv_stride = (uint32_t)kv_dim, .n_keys0 = row->pos + 1 - first, .head_dim = hd,
                .scale = m->attn_scale, .softcap = m->attn_softcap};
            f->ops->attention_tile(&tile, scratch);
        }
    }
}

static void attention(void *ctx, uint32_t il)
{
    const di_cpu_call *c = ctx;
    op_begins(c);
    const di_model *m = c->f->model;
    op_job job = {.f = c->f, .rows = c->rows, .n_rows = c->n_rows, .ly = &m->layers[il], .layer = il};
    const attention_shape a = attention_shape_of(m, c->n_rows);
    di_pool_run(c->f->pool, a.blocks * m->n_head_kv * a.head_sets, attention_items, &job);
}

static void glu_rows(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const op_job *job = ctx;
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
    op_begins(c);
    op_job job = {.f = c->f, .flag = kind};
    di_pool_run(c->f->pool, c->n_rows, glu_rows, &job);
}

static void residual(void *ctx, di_act y)
{
    const di_cpu_call *c = ctx;
    op_begins(c);
    float *x = act(c, DI_ACT_X);
    c->f->ops->add(x, x, act(c, y), (size_t)c->n_rows * c->f->model->n_embd);
}

const di_layer_ops di_cpu_layer_ops = {
    .embed = embed,
    .norm = norm,
    .matmul = matmul,
    .qk_rope_store = qk_rope_store,
    .attention = attention,
    .glu = glu,
    .residual = residual,
};
