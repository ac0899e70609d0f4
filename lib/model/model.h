/*
 * model.h — the model layer: hyperparameters and tensor roles of one
 * architecture, loaded from the format layer. Weights stay in the mmapped
 * file; only the small norm vectors are converted to float32 at load.
 */
#ifndef DI_MODEL_H
#define DI_MODEL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/model/arch.h"
#include "detinfer.h"
#include "lib/format/gguf.h"
#include "kernels/common/rope_tables.h" /* di_rope_set */
#include "kernels/common/weight_types.h" /* di_weight: a 2-D weight matrix in the file */

#define DI_MAX_ROPE_SETS 2

typedef struct di_layer {
    const float *attn_norm;        /* [n_embd] */
    di_weight wq;                  /* n_embd -> n_head * head_dim */
    di_weight wk;                  /* n_embd -> n_head_kv * head_dim */
    di_weight wv;                  /* n_embd -> n_head_kv * head_dim */
    di_weight wo;                  /* n_head * head_dim -> n_embd */
    const float *bq, *bk, *bv;     /* DI_FEAT_QKV_BIAS: biases of q, k, v; NULL otherwise */
    const float *q_norm, *k_norm;  /* DI_FEAT_QK_NORM: per-head RMSNorm weights [head_dim] */
    const float *post_attn_norm;   /* DI_FEAT_POST_NORMS: [n_embd] */
    const float *ffn_norm;         /* [n_embd] */
    di_weight ffn_gate;            /* n_embd -> n_ff */
    di_weight ffn_up;              /* n_embd -> n_ff */
    di_weight ffn_down;            /* n_ff -> n_embd */
    const float *post_ffn_norm;    /* DI_FEAT_POST_NORMS: [n_embd] */
    uint32_t rope_set;             /* index into the model's RoPE settings */
    uint32_t window;               /* sliding window in keys; 0 = all earlier keys */
} di_layer;

/* Where di_layer keeps the tensor of each role (arch.h's DI_LAYER_TENSORS). */
static inline size_t di_layer_offset(di_tensor_role role)
{
    static const size_t offsets[DI_T_COUNT] = {
#define DI_ROLE_OFFSET(role, field, name, kind, n_in, n_out, feature) offsetof(di_layer, field),
        DI_LAYER_TENSORS(DI_ROLE_OFFSET)
#undef DI_ROLE_OFFSET
    };
    return offsets[role];
}

/* The layer's matrix of a DI_MATRIX role. */
static inline const di_weight *di_layer_matrix(const di_layer *ly, di_tensor_role role)
{
    return (const di_weight *)(const void *)((const char *)ly + di_layer_offset(role));
}

/* The layer's vector of a DI_VECTOR role: NULL when the architecture lacks
 * it, and for DI_T_NONE. */
static inline const float *di_layer_vector(const di_layer *ly, di_tensor_role role)
{
    return role < DI_T_COUNT ? *(const float *const *)(const void *)((const char *)ly + di_layer_offset(role))
                             : NULL;
}

struct di_model {
    void *map;                     /* the whole file, read-only */
    size_t map_size;
    di_gguf gguf;
    char arch[32];
    const di_arch *arch_info;      /* its row of the architecture table (arch.h) */

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
    uint32_t n_rope_sets;          /* 1, or 2 when local layers have their own base */
    float rope_base[DI_MAX_ROPE_SETS];  /* each set's frequency base */
    di_rope_set rope[DI_MAX_ROPE_SETS]; /* each set's frequencies and amplitude (rope_scaling.h) */
    /* LongRoPE (Phi-3 128k): rope[] is built with rope_factors_short.weight,
     * rope_long[] with rope_factors_long.weight; a session whose context per
     * sequence exceeds rope_long_above (the original context) uses rope_long
     * (di_model_rope_set). rope_long_above is 0 without LongRoPE factors. */
    di_rope_set rope_long[DI_MAX_ROPE_SETS];
    uint32_t rope_long_above;
    float embd_scale;              /* DI_FEAT_EMBD_SCALE: sqrtf(n_embd); 0 means none */
    float attn_scale;              /* scores are dot(q, k) * attn_scale */
    float attn_softcap;            /* then c * tanh(score / c) with this c; 0 means none */
    float final_softcap;           /* logits: c * tanh(logit / c) with this c; 0 means none */
    uint64_t n_params;

    di_weight tok_embd;            /* n_embd x n_vocab: row t is token t */
    const float *output_norm;      /* [n_embd] */
    di_weight output;              /* n_embd -> n_vocab (tok_embd when tied) */
    di_layer *layers;              /* [n_layer] */
    float **vectors;               /* every converted norm and bias vector */
    size_t n_vectors;
    struct di_tokenizer *tokenizer;/* never NULL once loaded (may be "none") */

    /* The weights' packed copies (di_weight.packed), made at most once, by
     * the first session whose kernels read them (lib/backend/cpu/weight_pack.c),
     * under pack_lock; a model is otherwise read-only once loaded. */
    pthread_mutex_t pack_lock;
    int pack_tried;
    uint8_t *pack_mem;
    size_t pack_bytes;
};

/* Loads the model file at path (di_model_load's work, under the caller's
 * floating-point environment: lib/api/model_api.c pins it); on failure *out
 * is NULL and errbuf says why. */
di_status di_model_open(const char *path, di_model **out, char *errbuf, size_t errbuf_size);

/* Frees what di_model_open made (NULL is fine). */
void di_model_release(di_model *m);

/* The length a di_dim stands for in this model. */
static inline uint32_t di_model_dim(const struct di_model *m, di_dim dim)
{
    switch (dim) {
    case DI_DIM_EMBD: return m->n_embd;
    case DI_DIM_Q: return m->n_head * m->head_dim;
    case DI_DIM_KV: return m->n_head_kv * m->head_dim;
    case DI_DIM_FF: return m->n_ff;
    case DI_DIM_HEAD: return m->head_dim;
    }
    return 0;
}

/* The RoPE set a session uses whose sequences hold at most ctx_len positions:
 * llama.cpp's rule (get_rope_factors) with its per-sequence context, which
 * depends on the configuration only, never on what a batch holds. */
static inline const di_rope_set *di_model_rope_set(const struct di_model *m, uint32_t set, uint32_t ctx_len)
{
    return m->rope_long_above && ctx_len > m->rope_long_above ? &m->rope_long[set] : &m->rope[set];
}

#endif /* DI_MODEL_H */
