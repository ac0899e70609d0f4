/*
 * cpu_kernels.h — the CPU backend's operations, each in the canonical order
 * of docs/DETERMINISM.md. Parallel calls split work over independent outputs
 * only, so a result never depends on the thread count.
 */
#ifndef DI_CPU_KERNELS_H
#define DI_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/common/numerics.h"     /* di_rope_pairing */
#include "kernels/common/weight_types.h" /* di_weight */
#include "kernels/cpu/threadpool.h"

/* Canonical reductions (numerics.h): fma form sum(a[i] * b[i]) and plain
 * sum(x[i]). n == 0 gives +0. */
float di_cpu_dot(const float *a, const float *b, uint32_t n);
float di_cpu_sum(const float *x, uint32_t n);

/* Row `row` of w as n_in float32 values (exact for every supported type). */
void di_cpu_dequant_row(const di_weight *w, uint32_t row, float *out);

/* out = (x * scale) * w with scale = di_rms_scale(dot(x, x), n, eps). */
void di_cpu_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out);

/* y[t][r] = dot(row r of w, x[t]) for t < n_tokens, r < w->n_out, with the
 * path's matmul_rows, parallel over r. scratch holds n_threads *
 * DI_MATMUL_SCRATCH(w->n_in) floats. With qa (di_qa_bytes(w->n_in, n_tokens)
 * bytes, 64-byte aligned) and an integer table (cpu_int.h), a quantized w
 * takes the integer product: x quantized once into qa, then the path's
 * int_rows; NULL qa, or a float table, always the float product.
 * qa_holds_x: qa holds these n_tokens rows of x quantized by an earlier call
 * (x unchanged since), so they are quantized again only if w needs another
 * layout. */
struct di_cpu_ops;
void di_cpu_matmul(di_pool *pool, const struct di_cpu_ops *ops, const di_weight *w, const float *x,
                   uint32_t n_tokens, float *y, float *scratch, void *qa, int qa_holds_x);
/* The scalar path's matmul_rows (cpu_ops.h). */
void di_cpu_matmul_rows(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                        uint32_t n_tokens, float *y, float *scratch);

/* Rotates the first n_rot dims of each of n_heads heads of head_dim values,
 * pair i being (2i, 2i+1) (DI_ROPE_NORMAL) or (i, i + n_rot/2) (DI_ROPE_NEOX),
 * with cos/sin tables of n_rot/2 entries for this position. */
void di_cpu_rope(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot,
                 di_rope_pairing pairing, const float *cos_t, const float *sin_t);

/* Attention of one query head over keys 0..n_keys-1 of a KV cache whose rows
 * are kv_stride floats apart (the head's columns start at k and v):
 *   s_j = dot(q, k_j) * scale, then s_j = di_softcap(s_j, softcap) unless
 *   softcap is 0; m = max s; e_j = exp(s_j - m);
 *   out[d] = sum_j(e_j * v_j[d]) / sum_j(e_j), both sums canonical over j.
 * scratch holds n_keys + 2 * DI_LANES * head_dim floats. */
void di_cpu_attention_head(const float *q, const float *k, const float *v, uint32_t kv_stride,
                           uint32_t n_keys, uint32_t head_dim, float scale, float softcap,
                           float *out, float *scratch);

/* Each query of a tile (cpu_ops.h's di_attn_tile), as di_cpu_attention_head
 * gives it: the scalar path's attention_tile. */
struct di_attn_tile;
void di_cpu_attention_tile(const struct di_attn_tile *t, float *scratch);

/* x[i] = di_softcap(x[i], cap) (cap > 0): the logits' soft cap. */
void di_cpu_softcap(float *x, size_t n, float cap);

/* Index of the largest value, lowest index on ties; NaN never chosen; 0 for
 * an all-NaN row. */
uint32_t di_cpu_argmax(const float *x, uint32_t n);

/* gate[i] = silu(gate[i]) * up[i]; gate[i] = gelu_tanh(gate[i]) * up[i];
 * dst[i] = a[i] + b[i]. */
void di_cpu_silu_mul(float *gate, const float *up, size_t n);
void di_cpu_gelu_mul(float *gate, const float *up, size_t n);
void di_cpu_add(float *dst, const float *a, const float *b, size_t n);

#endif /* DI_CPU_KERNELS_H */
