/*
 * forward.c — the CPU forward pass: its buffers and RoPE tables, the layer
 * recipe (layer_recipe.h) over the CPU's layer ops (layer_ops.c), and the
 * final norm and logits of chosen rows.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/backend/cpu/forward.h"
#include "lib/backend/cpu/layer_ops.h"
#include "lib/backend/cpu/kv_cache.h"
#include "kernels/common/rope_tables.h"

/* 64-byte aligned, so that vector loads of a row never straddle two cache
 * lines (that halves the speed of the SIMD kernels). */
static float *alloc_floats(size_t n)
{
    const size_t bytes = ((n ? n : 1) * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes);
}

/* Floats of one thread's attention scratch for n positions (cpu_ops.h). */
static size_t attn_scratch_floats(const di_model *m, uint32_t n)
{
    return DI_ATTN_SCRATCH(n, m->head_dim);
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
    size_t max_in = m->n_embd;
    if (m->n_ff > max_in)
        max_in = m->n_ff;
    if (q_dim > max_in)
        max_in = q_dim;
    int ok = 1;
    for (int a = 0; a < DI_ACT_COUNT; a++) {
        f->act[a] = alloc_floats(max_rows * (size_t)di_model_dim(m, di_act_width((di_act)a)));
        ok = ok && f->act[a];
    }
    f->matmul_scratch = alloc_floats(threads * DI_MATMUL_SCRATCH(max_in));
    if (ops->int_rows) { /* the integer profile: max_rows rows of the widest input */
        f->qa = aligned_alloc(64, di_qa_bytes((uint32_t)max_in, max_rows));
        ok = ok && f->qa;
    }
    if (!ok || !f->matmul_scratch) {
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
        di_rope_fill_tables(m->n_rot, di_model_rope_set(m, set, f->ctx_len), f->n_pos, n_pos, cos_t[set], sin_t[set]);
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
    float **bufs[] = {&f->rope_cos[0], &f->rope_sin[0], &f->rope_cos[1], &f->rope_sin[1],
                      &f->matmul_scratch, &f->attn_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    for (int a = 0; a < DI_ACT_COUNT; a++) {
        free(f->act[a]);
        f->act[a] = NULL;
    }
    free(f->qa);
    f->qa = NULL;
}

/* ---- the pass ----------------------------------------------------------------- */

void di_forward_rows(di_forward *f, const di_forward_row *rows, uint32_t n_rows)
{
    di_cpu_call call = {f, rows, n_rows};
    f->qa_src = NULL;
    di_forward_recipe(f->model, &di_cpu_layer_ops, &call);
}

void di_forward_logits(di_forward *f, const uint32_t *row_idx, uint32_t n, float *logits)
{
    const di_model *m = f->model;
    for (uint32_t i = 0; i < n; i++)
        f->ops->rmsnorm(f->act[DI_ACT_X] + (size_t)row_idx[i] * m->n_embd, m->output_norm, m->n_embd,
                        m->rms_eps, f->act[DI_ACT_XN] + (size_t)i * m->n_embd);
    f->qa_src = NULL;
    di_cpu_matmul(f->pool, f->ops, &m->output, f->act[DI_ACT_XN], n, logits, f->matmul_scratch, f->qa, 0);
    if (m->final_softcap != 0.0f)
        f->ops->softcap(logits, (size_t)n * m->n_vocab, m->final_softcap);
}
