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
#include "numerics.h"     /* di_rope_pairing */
#include "weight_types.h" /* di_weight: a 2-D weight matrix in the file */

/* Architectures with a forward pass (forward_llama.c, forward_gemma3.c). */
typedef enum di_arch {
    DI_ARCH_LLAMA = 1,  /* Llama 2/3, TinyLlama, SmolLM, Mistral */
    DI_ARCH_QWEN2 = 2,  /* llama + Q/K/V biases, NEOX RoPE */
    DI_ARCH_GEMMA3 = 3  /* scaled embedding, QK-norm, post-norms, GeGLU, sliding window */
} di_arch;

#define DI_MAX_ROPE_SETS 2

typedef struct di_layer {
    const float *attn_norm;        /* [n_embd] */
    di_weight wq;                  /* n_embd -> n_head * head_dim */
    di_weight wk;                  /* n_embd -> n_head_kv * head_dim */
    di_weight wv;                  /* n_embd -> n_head_kv * head_dim */
    di_weight wo;                  /* n_head * head_dim -> n_embd */
    const float *bq, *bk, *bv;     /* qwen2: biases of q, k, v; NULL otherwise */
    const float *q_norm, *k_norm;  /* gemma3: per-head RMSNorm weights [head_dim] */
    const float *post_attn_norm;   /* gemma3: [n_embd] */
    const float *ffn_norm;         /* [n_embd] */
    di_weight ffn_gate;            /* n_embd -> n_ff */
    di_weight ffn_up;              /* n_embd -> n_ff */
    di_weight ffn_down;            /* n_ff -> n_embd */
    const float *post_ffn_norm;    /* gemma3: [n_embd] */
    uint32_t rope_set;             /* index into the model's RoPE settings */
    uint32_t window;               /* sliding window in keys; 0 = all earlier keys */
} di_layer;

struct di_model {
    void *map;                     /* the whole file, read-only */
    size_t map_size;
    di_gguf gguf;
    char arch[32];
    di_arch arch_id;

    uint32_t n_vocab;
    uint32_t n_ctx_train;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;             /* per head, for keys and values */
    uint32_t n_rot;                /* rotated dimensions per head (even, <= head_dim) */
    uint32_t n_ff;
    float rms_eps;
    di_rope_pairing rope_pairing;
    uint32_t n_rope_sets;          /* 1, or 2 when local layers have their own base */
    float rope_base[DI_MAX_ROPE_SETS];
    float rope_scale[DI_MAX_ROPE_SETS]; /* positions are multiplied by this */
    float embd_scale;              /* gemma3: sqrtf(n_embd); 0 means none */
    float attn_scale;              /* scores are dot(q, k) * attn_scale */
    uint64_t n_params;

    di_weight tok_embd;            /* n_embd x n_vocab: row t is token t */
    const float *output_norm;      /* [n_embd] */
    di_weight output;              /* n_embd -> n_vocab (tok_embd when tied) */
    di_layer *layers;              /* [n_layer] */
    float **vectors;               /* every converted norm and bias vector */
    size_t n_vectors;
    struct di_tokenizer *tokenizer;/* never NULL once loaded (may be "none") */
};

#endif /* DI_MODEL_H */
