/*
 * cuda_forward.cu — the forward pass on the device: the layer recipe of
 * lib/backend/layer_recipe.h (the one the CPU runs) over the device's layer ops,
 * the twins of lib/backend/cpu/layer_ops.c, with the kernels of
 * cuda_kernels.cu.
 */
#include "lib/backend/cuda/cuda_blas.cuh"
#include "lib/backend/cuda/cuda_state.cuh"
#include "kernels/common/int_dot.h"
#include "lib/backend/layer_recipe.h"

void dc_forward_matmul(dc_state *s, const dc_weight *w, const float *x, uint32_t n_tokens,
                       const float *bias, float *y)
{
    if (s->blas) {
        dc_blas_matmul(s, w, x, n_tokens, bias, y);
    } else if (s->qa.codes && di_int_type(w->type)) {
        dc_int_quantize(s->stream, x, w->n_in, n_tokens, s->qa);
        dc_int_matmul(s->stream, *w, s->qa, n_tokens, bias, y);
    } else
        dc_matmul(s->stream, *w, x, n_tokens, bias, y);
}

/* One forward call on the device: the ctx of cuda_layer_ops. */
typedef struct dc_call {
    dc_state *s;
    uint32_t n_rows;
} dc_call;

static void op_embed(void *ctx)
{
    const dc_call *c = (const dc_call *)ctx;
    dc_state *s = c->s;
    dc_embed(s->stream, s->tok_embd, s->rows, c->n_rows, s->model->embd_scale, s->act[DI_ACT_X]);
}

static void op_norm(void *ctx, uint32_t il, di_act src, di_tensor_role w, di_act dst)
{
    const dc_call *c = (const dc_call *)ctx;
    dc_state *s = c->s;
    const di_model *m = s->model;
    dc_rmsnorm(s->stream, s->act[src], NULL, c->n_rows, s->layers[il].vec[w], m->n_embd, m->rms_eps,
               s->act[dst]);
}

static void op_matmul(void *ctx, uint32_t il, di_tensor_role w, di_tensor_role bias, di_act x, di_act y)
{
    const dc_call *c = (const dc_call *)ctx;
    dc_state *s = c->s;
    const dc_layer *ly = &s->layers[il];
    dc_forward_matmul(s, &ly->mat[w], s->act[x], c->n_rows, bias == DI_T_NONE ? NULL : ly->vec[bias],
                      s->act[y]);
}

/* QK-norm, RoPE of q and k at each row's position, keys and values into the
 * cache: layer_ops.c qk_rope_store_rows. */
static void op_qk_rope_store(void *ctx, uint32_t il, int qk_norm)
{
    const dc_call *c = (const dc_call *)ctx;
    dc_state *s = c->s;
    const di_model *m = s->model;
    const dc_layer *ly = &s->layers[il];
    const uint32_t n_rows = c->n_rows, rope_set = m->layers[il].rope_set;
    const size_t q_dim = (size_t)m->n_head * m->head_dim, kv_dim = (size_t)m->n_head_kv * m->head_dim;
    float *q = s->act[DI_ACT_Q], *k = s->act[DI_ACT_K];
    if (qk_norm) {
        dc_rmsnorm(s->stream, q, NULL, n_rows * m->n_head, ly->vec[DI_T_Q_NORM], m->head_dim, m->rms_eps, q);
        dc_rmsnorm(s->stream, k, NULL, n_rows * m->n_head_kv, ly->vec[DI_T_K_NORM], m->head_dim, m->rms_eps,
                   k);
    }
    const int neox = m->arch_info->rope_pairing == DI_ROPE_NEOX;
    const float *cs = s->rope_cos[rope_set], *sn = s->rope_sin[rope_set];
    dc_rope(s->stream, q, n_rows, q_dim, m->n_head, m->head_dim, m->n_rot, neox, cs, sn, s->rows);
    dc_rope(s->stream, k, n_rows, kv_dim, m->n_head_kv, m->head_dim, m->n_rot, neox, cs, sn, s->rows);
    dc_store_kv(s->stream, s->cache, il, s->rows, n_rows, k, s->act[DI_ACT_V]);
}

static void op_attention(void *ctx, uint32_t il)
{
    const dc_call *c = (const dc_call *)ctx;
    dc_state *s = c->s;
    const di_model *m = s->model;
    dc_attention(s->stream, s->cache, il, s->rows, c->n_rows, s->act[DI_ACT_Q], m->n_head, m->n_head_kv,
                 m->head_dim, m->layers[il].window, m->attn_scale, m->attn_softcap, s->scores,
                 s->attn_split, s->act[DI_ACT_ATT]);
}

static void op_glu(void *ctx, di_glu kind)
{
    const dc_call *c = (const dc_call *)ctx;
    dc_state *s = c->s;
    dc_glu(s->stream, s->act[DI_ACT_GATE], s->act[DI_ACT_UP], (size_t)c->n_rows * s->model->n_ff,
           kind == DI_GLU_GELU);
}

static void op_residual(void *ctx, di_act y)
{
    const dc_call *c = (const dc_call *)ctx;
    dc_state *s = c->s;
    float *x = s->act[DI_ACT_X];
    dc_add(s->stream, x, x, s->act[y], (size_t)c->n_rows * s->model->n_embd);
}

static const di_layer_ops cuda_layer_ops = {
    op_embed, op_norm, op_matmul, op_qk_rope_store, op_attention, op_glu, op_residual,
};

void dc_forward_layers(dc_state *s, uint32_t n_rows)
{
    dc_call call = {s, n_rows};
    di_forward_recipe(s->model, &cuda_layer_ops, &call);
}
