/*
 * forward.h — one forward pass over a set of rows (tokens of any sequences at
 * any positions) on the CPU: the layer recipe (layer_recipe.h) over the CPU's
 * layer ops (layer_ops.c). Every row is computed on its own, in the
 * canonical order, so a row's result never depends on which other rows share
 * the call.
 */
#ifndef DI_FORWARD_H
#define DI_FORWARD_H

#include <stdint.h>
#include "kernels/cpu/cpu_ops.h"
#include "lib/backend/cpu/kv_cache.h"
#include "lib/backend/layer_recipe.h"
#include "lib/model/model.h"
#include "kernels/cpu/threadpool.h"

typedef struct di_forward_row {
    int32_t token;
    uint32_t pos;          /* position in its sequence */
    const di_kv_layer *kv; /* its sequence's caches: [n_layer], each holding pos */
} di_forward_row;

typedef struct di_forward {
    const di_model *model;
    const di_cpu_ops *ops;  /* the session's CPU kernel path */
    di_pool *pool;
    uint32_t ctx_len;      /* the most positions a sequence may hold */
    uint32_t n_pos;        /* positions the tables and scratch hold now (di_forward_reserve) */
    uint32_t max_rows;     /* rows per di_forward_rows call */
    float *rope_cos[DI_MAX_ROPE_SETS]; /* [n_pos][n_rot / 2] per RoPE setting */
    float *rope_sin[DI_MAX_ROPE_SETS];
    float *act[DI_ACT_COUNT]; /* activations, max_rows rows each (layer_recipe.h) */
    /* per-thread scratch */
    float *matmul_scratch; /* [threads][DI_MATMUL_SCRATCH(max reduction length)] */
    float *attn_scratch;   /* [threads][attn_scratch_size] */
    size_t attn_scratch_size;
    void *qa;              /* the integer profile's quantized activations (cpu_int.h), else NULL */
    /* The activation rows qa holds quantized, as the last product left them,
     * so that products of the same input (Q, K and V; gate and up) quantize
     * it once; NULL once any other operation has run (layer_ops.c). */
    const float *qa_src;
} di_forward;

/* Allocates the activations and the per-thread scratch of the matrix
 * products; the RoPE tables and the attention scratch, whose sizes follow the
 * positions, come with di_forward_reserve. DI_ERR_OUT_OF_MEMORY on failure. */
di_status di_forward_init(di_forward *f, const di_model *model, const di_cpu_ops *ops,
                          di_pool *pool, uint32_t ctx_len, uint32_t max_rows);
void di_forward_release(di_forward *f);

/* Makes the RoPE tables and the attention scratch hold positions 0..n-1
 * (n <= ctx_len), growing them geometrically; every entry of a table is
 * computed on its own, so the tables' bits do not depend on how they grew.
 * DI_ERR_OUT_OF_MEMORY leaves f as it was. */
di_status di_forward_reserve(di_forward *f, uint32_t n);

/* Runs rows[0..n_rows) (n_rows <= max_rows, every pos < n_pos) through every
 * layer, appending their keys and values to the caches. The final hidden
 * states stay in f. */
void di_forward_rows(di_forward *f, const di_forward_row *rows, uint32_t n_rows);

/* Logits of hidden rows row_idx[0..n) of the last di_forward_rows call into
 * logits[n][n_vocab]. */
void di_forward_logits(di_forward *f, const uint32_t *row_idx, uint32_t n, float *logits);

#endif /* DI_FORWARD_H */
