/*
 * forward_llama.c — one layer of the llama family (llama, qwen2):
 *
 *   h = rmsnorm(x) * attn_norm
 *   q, k, v = Wq h (+ bq), Wk h (+ bk), Wv h (+ bv)     biases: qwen2 only
 *   rope(q), rope(k); append k, v to the cache
 *   x = x + Wo attention(q, cache)                       grouped-query heads
 *   h = rmsnorm(x) * ffn_norm
 *   x = x + Wdown(silu(Wgate h) * (Wup h))               SwiGLU
 */
#include "forward_steps.h"
#include "numerics.h"

void di_llama_layer(di_forward *f, const di_forward_row *rows, uint32_t n_rows, uint32_t il)
{
    const di_model *m = f->model;
    const di_layer *ly = &m->layers[il];

    di_step_norm(f, f->x, ly->attn_norm, n_rows, f->xn);
    di_step_matmul(f, &ly->wq, ly->bq, f->xn, n_rows, f->q);
    di_step_matmul(f, &ly->wk, ly->bk, f->xn, n_rows, f->k);
    di_step_matmul(f, &ly->wv, ly->bv, f->xn, n_rows, f->v);
    di_step_qk_rope_store(f, rows, n_rows, ly, il);
    di_step_attention(f, rows, n_rows, ly, il);
    di_step_matmul(f, &ly->wo, NULL, f->att, n_rows, f->tmp);
    di_step_residual(f, f->tmp, n_rows);

    di_step_norm(f, f->x, ly->ffn_norm, n_rows, f->xn);
    di_step_matmul(f, &ly->ffn_gate, NULL, f->xn, n_rows, f->gate);
    di_step_matmul(f, &ly->ffn_up, NULL, f->xn, n_rows, f->up);
    di_step_glu(f, DI_GLU_SILU, n_rows);
    di_step_matmul(f, &ly->ffn_down, NULL, f->gate, n_rows, f->tmp);
    di_step_residual(f, f->tmp, n_rows);
}
