/*
 * cuda_forward.cu — the forward pass on the device: the twin of
 * lib/forward/forward.c, lib/forward/forward_llama.c and lib/forward/forward_gemma3.c, step by step
 * in the same order, with the kernels of cuda_kernels.cu.
 */
#include "cuda_blas.cuh"
#include "cuda_state.cuh"

void dc_forward_matmul(dc_state *s, const dc_weight *w, const float *x, uint32_t n_tokens,
                       const float *bias, float *y)
{
    if (s->blas)
        dc_blas_matmul(s, w, x, n_tokens, bias, y);
    else
        dc_matmul(s->stream, *w, x, n_tokens, bias, y);
}

static void norm(dc_state *s, const float *src, const float *w, uint32_t n_rows, float *dst)
{
    const di_model *m = s->model;
    dc_rmsnorm(s->stream, src, NULL, n_rows, w, m->n_embd, m->rms_eps, dst);
}

/* QK-norm (gemma3), RoPE of q and k at each row's position, keys and values
 * into the cache: lib/forward/forward.c qk_rope_store_rows. */
static void qk_rope_store(dc_state *s, const dc_layer *ly, const di_layer *hl, uint32_t n_rows,
                          uint32_t il)
{
    const di_model *m = s->model;
    const size_t q_dim = (size_t)m->n_head * m->head_dim, kv_dim = (size_t)m->n_head_kv * m->head_dim;
    if (ly->q_norm) {
        dc_rmsnorm(s->stream, s->q, NULL, n_rows * m->n_head, ly->q_norm, m->head_dim, m->rms_eps, s->q);
        dc_rmsnorm(s->stream, s->k, NULL, n_rows * m->n_head_kv, ly->k_norm, m->head_dim, m->rms_eps,
                   s->k);
    }
    const int neox = m->arch_info->rope_pairing == DI_ROPE_NEOX;
    const float *c = s->rope_cos[hl->rope_set], *sn = s->rope_sin[hl->rope_set];
    dc_rope(s->stream, s->q, n_rows, q_dim, m->n_head, m->head_dim, m->n_rot, neox, c, sn, s->rows);
    dc_rope(s->stream, s->k, n_rows, kv_dim, m->n_head_kv, m->head_dim, m->n_rot, neox, c, sn, s->rows);
    dc_store_kv(s->stream, s->cache, il, s->rows, n_rows, s->k, s->v);
}

static void attention(dc_state *s, const di_layer *hl, uint32_t n_rows, uint32_t il)
{
    const di_model *m = s->model;
    dc_attention(s->stream, s->cache, il, s->rows, n_rows, s->q, m->n_head, m->n_head_kv, m->head_dim,
                 hl->window, m->attn_scale, s->scores, s->att);
}

/* lib/forward/forward_llama.c: llama and qwen2 (biases). */
static void llama_layer(dc_state *s, uint32_t n_rows, uint32_t il)
{
    const di_model *m = s->model;
    const dc_layer *ly = &s->layers[il];
    const size_t n_x = (size_t)n_rows * m->n_embd, n_ff = (size_t)n_rows * m->n_ff;
    norm(s, s->x, ly->attn_norm, n_rows, s->xn);
    dc_forward_matmul(s, &ly->wq, s->xn, n_rows, ly->bq, s->q);
    dc_forward_matmul(s, &ly->wk, s->xn, n_rows, ly->bk, s->k);
    dc_forward_matmul(s, &ly->wv, s->xn, n_rows, ly->bv, s->v);
    qk_rope_store(s, ly, &m->layers[il], n_rows, il);
    attention(s, &m->layers[il], n_rows, il);
    dc_forward_matmul(s, &ly->wo, s->att, n_rows, NULL, s->tmp);
    dc_add(s->stream, s->x, s->x, s->tmp, n_x);

    norm(s, s->x, ly->ffn_norm, n_rows, s->xn);
    dc_forward_matmul(s, &ly->ffn_gate, s->xn, n_rows, NULL, s->gate);
    dc_forward_matmul(s, &ly->ffn_up, s->xn, n_rows, NULL, s->up);
    dc_glu(s->stream, s->gate, s->up, n_ff, 0);
    dc_forward_matmul(s, &ly->ffn_down, s->gate, n_rows, NULL, s->tmp);
    dc_add(s->stream, s->x, s->x, s->tmp, n_x);
}

/* lib/forward/forward_gemma3.c: QK-norm, post-norms, GeGLU, sliding window. */
static void gemma3_layer(dc_state *s, uint32_t n_rows, uint32_t il)
{
    const di_model *m = s->model;
    const dc_layer *ly = &s->layers[il];
    const size_t n_x = (size_t)n_rows * m->n_embd, n_ff = (size_t)n_rows * m->n_ff;
    norm(s, s->x, ly->attn_norm, n_rows, s->xn);
    dc_forward_matmul(s, &ly->wq, s->xn, n_rows, NULL, s->q);
    dc_forward_matmul(s, &ly->wk, s->xn, n_rows, NULL, s->k);
    dc_forward_matmul(s, &ly->wv, s->xn, n_rows, NULL, s->v);
    qk_rope_store(s, ly, &m->layers[il], n_rows, il);
    attention(s, &m->layers[il], n_rows, il);
    dc_forward_matmul(s, &ly->wo, s->att, n_rows, NULL, s->tmp);
    norm(s, s->tmp, ly->post_attn_norm, n_rows, s->xn);
    dc_add(s->stream, s->x, s->x, s->xn, n_x);

    norm(s, s->x, ly->ffn_norm, n_rows, s->xn);
    dc_forward_matmul(s, &ly->ffn_gate, s->xn, n_rows, NULL, s->gate);
    dc_forward_matmul(s, &ly->ffn_up, s->xn, n_rows, NULL, s->up);
    dc_glu(s->stream, s->gate, s->up, n_ff, 1);
    dc_forward_matmul(s, &ly->ffn_down, s->gate, n_rows, NULL, s->tmp);
    norm(s, s->tmp, ly->post_ffn_norm, n_rows, s->xn);
    dc_add(s->stream, s->x, s->x, s->xn, n_x);
}

void dc_forward_layers(dc_state *s, uint32_t n_rows)
{
    const di_model *m = s->model;
    dc_embed(s->stream, s->tok_embd, s->rows, n_rows, m->embd_scale, s->x);
    for (uint32_t il = 0; il < m->n_layer; il++) {
        if (m->arch_info->features & DI_FEAT_POST_NORMS)
            gemma3_layer(s, n_rows, il);
        else
            llama_layer(s, n_rows, il);
    }
}
