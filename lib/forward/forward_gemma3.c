/*
 * forward_gemma3.c — one layer of Gemma 3 (the embedding was already scaled
 * by sqrt(n_embd) in forward.c):
 *
 *   h = rmsnorm(x) * attn_norm
 *   q, k, v = Wq h, Wk h, Wv h
 *   q, k = rmsnorm per head * q_norm, k_norm                 QK-norm
 *   rope(q), rope(k) with the layer's base (local 10000, global from the file)
 *   append k, v; a = attention(q, cache), over the sliding window on local layers
 *   x = x + rmsnorm(Wo a) * post_attention_norm
 *   h = rmsnorm(x) * ffn_norm
 *   x = x + rmsnorm(Wdown(gelu_tanh(Wgate h) * (Wup h))) * post_ffw_norm   GeGLU
 *
 * The file's norm weights already include Gemma's "+1".
 */
#include "forward_steps.h"
#include "numerics.h"

void di_gemma3_layer(di_forward *f, const di_forward_row *rows, uint32_t n_rows, uint32_t il)
{
    const di_model *m = f->model;
    const di_layer *ly = &m->layers[il];

    di_step_norm(f, f->x, ly->attn_norm, n_rows, f->xn);
    di_step_matmul(f, &ly->wq, NULL, f->xn, n_rows, f->q);
    di_step_matmul(f, &ly->wk, NULL, f->xn, n_rows, f->k);
    di_step_matmul(f, &ly->wv, NULL, f->xn, n_rows, f->v);
    di_step_qk_rope_store(f, rows, n_rows, ly, il);
    di_step_attention(f, rows, n_rows, ly, il);
    di_step_matmul(f, &ly->wo, NULL, f->att, n_rows, f->tmp);
    di_step_norm(f, f->tmp, ly->post_attn_norm, n_rows, f->xn);
    di_step_residual(f, f->xn, n_rows);

    di_step_norm(f, f->x, ly->ffn_norm, n_rows, f->xn);
    di_step_matmul(f, &ly->ffn_gate, NULL, f->xn, n_rows, f->gate);
    di_step_matmul(f, &ly->ffn_up, NULL, f->xn, n_rows, f->up);
    di_step_glu(f, DI_GLU_GELU, n_rows);
    di_step_matmul(f, &ly->ffn_down, NULL, f->gate, n_rows, f->tmp);
    di_step_norm(f, f->tmp, ly->post_ffn_norm, n_rows, f->xn);
    di_step_residual(f, f->xn, n_rows);
}
