/*
 * model.h — the model layer: hyperparameters and tensor roles of one
 * architecture, loaded from the format layer. Weights stay in the mmapped
 * file; only the small norm vectors are converted to float32 at load.
 */
#ifndef DI_MODEL_H
#define DI_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "detinfer.h"
#include "gguf.h"

/* A 2-D weight matrix: n_out rows of n_in elements, row-major in the file. */
typedef struct di_weight {
    const uint8_t *data;
    uint32_t type;      /* DI_TYPE_* */
    uint32_t n_in;      /* ne0: elements per row (the reduction length) */
    uint32_t n_out;     /* ne1: rows */
    size_t row_bytes;
} di_weight;

typedef struct di_layer {
    const float *attn_norm;        /* [n_embd] */
    di_weight wq;                  /* n_embd -> n_head * head_dim */
    di_weight wk;                  /* n_embd -> n_head_kv * head_dim */
    di_weight wv;                  /* n_embd -> n_head_kv * head_dim */
    di_weight wo;                  /* n_head * head_dim -> n_embd */
    const float *ffn_norm;         /* [n_embd] */
    di_weight ffn_gate;            /* n_embd -> n_ff */
    di_weight ffn_up;              /* n_embd -> n_ff */
    di_weight ffn_down;            /* n_ff -> n_embd */
} di_layer;

struct di_model {
    void *map;                     /* the whole file, read-only */
    size_t map_size;
    di_gguf gguf;
    char arch[32];

    uint32_t n_vocab;
    uint32_t n_ctx_train;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;             /* n_embd / n_head */
    uint32_t n_rot;                /* rotated dimensions per head (even, <= head_dim) */
    uint32_t n_ff;
    float rms_eps;
    float rope_base;
    uint64_t n_params;

    di_weight tok_embd;            /* n_embd x n_vocab: row t is token t */
    const float *output_norm;      /* [n_embd] */
    di_weight output;              /* n_embd -> n_vocab (tok_embd when tied) */
    di_layer *layers;              /* [n_layer] */
    float *norm_storage;           /* owns every norm vector above */
};

#endif /* DI_MODEL_H */
