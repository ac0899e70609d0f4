/*
 * arch.h — what distinguishes one architecture from another: one row of
 * arch.c's table per architecture, and the table of a layer's tensor roles
 * (their GGUF names and shapes, and the feature that asks for each).
 *
 * Plain C that gcc and nvcc (C++17) both compile: the loader (model.c) reads
 * the row of a file's general.architecture into di_model, the layer recipe
 * (lib/backend/layer_recipe.h) runs on it for every backend, and the CUDA
 * plugin uploads the tensors by the role table.
 *
 * Adding an architecture is one row in arch.c when its layer is made of
 * the steps below; a new operation adds a column or feature here, a step to
 * the recipe and its implementation in each backend.
 */
#ifndef DI_ARCH_H
#define DI_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/numerics.h" /* di_rope_pairing */

/* The gated feed-forward activation: gate = act(gate) * up. */
typedef enum di_glu {
    DI_GLU_SILU = 0, /* SwiGLU */
    DI_GLU_GELU = 1  /* GeGLU, GELU with the tanh approximation */
} di_glu;

/* Features an architecture has or lacks (di_arch.features). */
enum {
    DI_FEAT_QKV_BIAS = 1u << 0,   /* attn_{q,k,v}.bias added after the products */
    DI_FEAT_QK_NORM = 1u << 1,    /* attn_{q,k}_norm: RMSNorm of each head of q and k before RoPE */
    DI_FEAT_POST_NORMS = 1u << 2, /* post_attention_norm, post_ffw_norm: RMSNorm of each block's
                                     output before the residual add */
    DI_FEAT_EMBD_SCALE = 1u << 3, /* embeddings multiplied by sqrtf(n_embd) */
    DI_FEAT_FUSED_QKV = 1u << 4,  /* attn_qkv: the rows of Q, K and V in one tensor (else the
                                     three tensors): DI_FUSED_TENSORS */
    DI_FEAT_FUSED_GATE_UP = 1u << 5, /* ffn_up: the rows of the gate, then of up: DI_FUSED_TENSORS */
    DI_FEAT_ROPE_FREQS = 1u << 6, /* reads rope_freqs.weight, per-frequency RoPE divisors (Llama 3.1) */
    DI_FEAT_LONGROPE = 1u << 7    /* reads rope_factors_{long,short}.weight, LongRoPE's divisors (Phi-3) */
};

typedef struct di_arch {
    const char *name;       /* general.architecture, and the prefix of its keys */
    uint32_t features;      /* DI_FEAT_* */
    di_glu glu;
    di_rope_pairing rope_pairing;
    float rope_base;        /* when the file has no <name>.rope.freq_base */
    /* Sliding window (<name>.attention.sliding_window, required when
     * swa_period > 0): layer il attends to the window when
     * il % swa_period < swa_local, to every earlier key otherwise. */
    uint32_t swa_period, swa_local;
    /* RoPE base of the window layers, with no scaling; 0: the model's. */
    float swa_rope_base;
    /* When n_layer equals this, scores scale by 1/sqrt(n_embd / n_head)
     * instead of 1/sqrt(head_dim) (Gemma's 27B model); 0: never. */
    uint32_t attn_scale_embd_layers;
    /* The window when the file has no <name>.attention.sliding_window;
     * 0: the key is required. */
    uint32_t swa_default;
    /* Soft-capping, x = c * tanh(x / c): of the attention scores after the
     * scale and before the mask and softmax (c read from
     * <name>.attn_logit_softcapping), and of the logits (from
     * <name>.final_logit_softcapping). These are the values when the file
     * has no such key; 0: the architecture has no such step (the key is not
     * read). */
    float attn_softcap, final_softcap;
} di_arch;

/* The row of the architecture called name, or NULL. */
const di_arch *di_arch_find(const char *name);
/* Writes "llama, qwen2, ...", every row's name, into out[size] (cut short
 * when it does not fit). */
void di_arch_names(char *out, size_t size);

/* Lengths a tensor's dimensions are made of. */
typedef enum di_dim {
    DI_DIM_EMBD,  /* n_embd */
    DI_DIM_Q,     /* n_head * head_dim */
    DI_DIM_KV,    /* n_head_kv * head_dim */
    DI_DIM_FF,    /* n_ff */
    DI_DIM_HEAD   /* head_dim */
} di_dim;

typedef enum di_tensor_kind { DI_MATRIX, DI_VECTOR } di_tensor_kind;

/*
 * A layer's tensors: X(ROLE, di_layer field, name after "blk.N.", kind,
 * input length (a vector's length), output length (a vector repeats its
 * length), the feature that asks for it or 0 for every architecture). The loader binds them in this
 * order, so the first missing one is the one reported.
 */
#define DI_LAYER_TENSORS(X)                                                                   \
    X(ATTN_NORM, attn_norm, "attn_norm.weight", DI_VECTOR, DI_DIM_EMBD, DI_DIM_EMBD, 0)       \
    X(WQ, wq, "attn_q.weight", DI_MATRIX, DI_DIM_EMBD, DI_DIM_Q, 0)                           \
    X(WK, wk, "attn_k.weight", DI_MATRIX, DI_DIM_EMBD, DI_DIM_KV, 0)                          \
    X(WV, wv, "attn_v.weight", DI_MATRIX, DI_DIM_EMBD, DI_DIM_KV, 0)                          \
    X(WO, wo, "attn_output.weight", DI_MATRIX, DI_DIM_Q, DI_DIM_EMBD, 0)                      \
    X(FFN_NORM, ffn_norm, "ffn_norm.weight", DI_VECTOR, DI_DIM_EMBD, DI_DIM_EMBD, 0)          \
    X(FFN_GATE, ffn_gate, "ffn_gate.weight", DI_MATRIX, DI_DIM_EMBD, DI_DIM_FF, 0)            \
    X(FFN_UP, ffn_up, "ffn_up.weight", DI_MATRIX, DI_DIM_EMBD, DI_DIM_FF, 0)                  \
    X(FFN_DOWN, ffn_down, "ffn_down.weight", DI_MATRIX, DI_DIM_FF, DI_DIM_EMBD, 0)            \
    X(BQ, bq, "attn_q.bias", DI_VECTOR, DI_DIM_Q, DI_DIM_Q, DI_FEAT_QKV_BIAS)                 \
    X(BK, bk, "attn_k.bias", DI_VECTOR, DI_DIM_KV, DI_DIM_KV, DI_FEAT_QKV_BIAS)               \
    X(BV, bv, "attn_v.bias", DI_VECTOR, DI_DIM_KV, DI_DIM_KV, DI_FEAT_QKV_BIAS)               \
    X(Q_NORM, q_norm, "attn_q_norm.weight", DI_VECTOR, DI_DIM_HEAD, DI_DIM_HEAD, DI_FEAT_QK_NORM) \
    X(K_NORM, k_norm, "attn_k_norm.weight", DI_VECTOR, DI_DIM_HEAD, DI_DIM_HEAD, DI_FEAT_QK_NORM) \
    X(POST_ATTN_NORM, post_attn_norm, "post_attention_norm.weight", DI_VECTOR, DI_DIM_EMBD,   \
      DI_DIM_EMBD, DI_FEAT_POST_NORMS)                                                         \
    X(POST_FFN_NORM, post_ffn_norm, "post_ffw_norm.weight", DI_VECTOR, DI_DIM_EMBD,           \
      DI_DIM_EMBD, DI_FEAT_POST_NORMS)

typedef enum di_tensor_role {
#define DI_ROLE_ENUM(role, field, name, kind, n_in, n_out, feature) DI_T_##role,
    DI_LAYER_TENSORS(DI_ROLE_ENUM)
#undef DI_ROLE_ENUM
    DI_T_COUNT,
    DI_T_NONE = DI_T_COUNT /* no tensor (a product without bias) */
} di_tensor_role;

typedef struct di_tensor_spec {
    const char *name;
    di_tensor_kind kind;
    di_dim n_in, n_out;
    uint32_t feature;
} di_tensor_spec;

/* The role table as data, indexed by di_tensor_role. */
static inline const di_tensor_spec *di_tensor_specs(void)
{
    static const di_tensor_spec specs[DI_T_COUNT] = {
#define DI_ROLE_SPEC(role, field, name, kind, n_in, n_out, feature) {name, kind, n_in, n_out, feature},
        DI_LAYER_TENSORS(DI_ROLE_SPEC)
#undef DI_ROLE_SPEC
    };
    return specs;
}

/*
 * Tensors that hold the rows of consecutive roles of DI_LAYER_TENSORS one
 * after another (Phi-3's): X(name after "blk.N.", the feature that reads it,
 * 1 when the file must have it (0: when it is absent, the roles are read by
 * their own names), first role, number of roles). The roles take the same
 * input; the loader binds each one as a view of its rows, so neither the
 * recipe nor a backend knows that a tensor was fused.
 */
#define DI_FUSED_TENSORS(X)                                                   \
    X("attn_qkv.weight", DI_FEAT_FUSED_QKV, 0, DI_T_WQ, 3)                     \
    X("ffn_up.weight", DI_FEAT_FUSED_GATE_UP, 1, DI_T_FFN_GATE, 2)

typedef struct di_fused_spec {
    const char *name;
    uint32_t feature;
    int required;
    di_tensor_role first;
    uint32_t n_roles;
} di_fused_spec;

enum {
#define DI_FUSED_COUNT_ONE(name, feature, required, first, n_roles) +1
    DI_N_FUSED = 0 DI_FUSED_TENSORS(DI_FUSED_COUNT_ONE)
#undef DI_FUSED_COUNT_ONE
};

/* The fused tensors as data, DI_N_FUSED of them. */
static inline const di_fused_spec *di_fused_specs(void)
{
    static const di_fused_spec specs[DI_N_FUSED] = {
#define DI_FUSED_SPEC(name, feature, required, first, n_roles) {name, feature, required, first, n_roles},
        DI_FUSED_TENSORS(DI_FUSED_SPEC)
#undef DI_FUSED_SPEC
    };
    return specs;
}

#endif /* DI_ARCH_H */
