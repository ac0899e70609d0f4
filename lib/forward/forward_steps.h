/*
 * forward_steps.h — the steps the architectures' layers are made of
 * (forward.c), each parallel over independent rows or heads.
 */
#ifndef DI_FORWARD_STEPS_H
#define DI_FORWARD_STEPS_H

#include "forward.h"

/* dst[r] = rmsnorm(src[r]) * w for n_rows rows of n_embd. */
void di_step_norm(di_forward *f, const float *src, const float *w, uint32_t n_rows, float *dst);
/* y = W x (+ bias, when bias is not NULL, added after each dot product). */
void di_step_matmul(di_forward *f, const di_weight *w, const float *bias, const float *x,
                    uint32_t n_rows, float *y);
/* Per-head RMSNorm of q and k (QK-norm), when q_norm/k_norm are given; then
 * RoPE at each row's position with the layer's tables; then k and v are
 * written to the rows' caches. */
void di_step_qk_rope_store(di_forward *f, const di_forward_row *rows, uint32_t n_rows,
                           const di_layer *ly, uint32_t il);
/* att = attention of every (row, head) over its sequence's cache. */
void di_step_attention(di_forward *f, const di_forward_row *rows, uint32_t n_rows,
                       const di_layer *ly, uint32_t il);
/* x = x + y over n_rows rows of n_embd. */
void di_step_residual(di_forward *f, const float *y, uint32_t n_rows);

/* gate = act(gate) * up over n_rows rows of n_ff (SwiGLU or GeGLU). */

void di_step_glu(di_forward *f, di_glu kind, uint32_t n_rows);

/* One layer of each family. */
void di_llama_layer(di_forward *f, const di_forward_row *rows, uint32_t n_rows, uint32_t il);
void di_gemma3_layer(di_forward *f, const di_forward_row *rows, uint32_t n_rows, uint32_t il);

#endif /* DI_FORWARD_STEPS_H */
