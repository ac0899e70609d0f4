/*
 * layer_recipe.h — the forward pass of every architecture, written once over
 * a table of layer operations (di_layer_ops) that each backend implements:
 * lib/backend/cpu/layer_ops.c on the CPU, lib/backend/cuda/cuda_forward.cu
 * on the device. The architecture's row (lib/model/arch.h) chooses the
 * operations; no operation knows an architecture and the recipe knows no
 * backend.
 *
 * Plain C that gcc and nvcc both compile, so the CPU and the CUDA plugin
 * run the same recipe (the plugin cannot call into libdetinfer).
 *
 * One layer, each operation over every row of the call:
 *
 *   h = rmsnorm(x) * attn_norm
 *   q, k, v = Wq h (+ bq), Wk h (+ bk), Wv h (+ bv)      DI_FEAT_QKV_BIAS
 *   q, k = rmsnorm per head * q_norm, k_norm             DI_FEAT_QK_NORM
 *   rope(q), rope(k) with the layer's setting; append k, v to the cache
 *   a = attention(q, cache), over the layer's window when it has one; the
 *       scores dot(q, k) * attn_scale, soft-capped (c * tanh(s / c)) when
 *       the model's attn_softcap is not 0, then the softmax
 *   o = Wo a;  o = rmsnorm(o) * post_attention_norm      DI_FEAT_POST_NORMS
 *   x = x + o
 *   h = rmsnorm(x) * ffn_norm
 *   f = Wdown(act(Wgate h) * (Wup h))                    act: the row's glu
 *   f = rmsnorm(f) * post_ffw_norm                       DI_FEAT_POST_NORMS
 *   x = x + f
 */
#ifndef DI_LAYER_RECIPE_H
#define DI_LAYER_RECIPE_H

#include <stdint.h>

#include "lib/model/arch.h"
#include "lib/model/model.h"

/* The activations the operations pass between them, max_rows rows each, of
 * these widths: ACT(name, width). */
#define DI_ACTIVATIONS(ACT) \
    ACT(X, DI_DIM_EMBD)       \
    ACT(XN, DI_DIM_EMBD)      \
    ACT(TMP, DI_DIM_EMBD)     \
    ACT(Q, DI_DIM_Q)          \
    ACT(ATT, DI_DIM_Q)        \
    ACT(K, DI_DIM_KV)         \
    ACT(V, DI_DIM_KV)         \
    ACT(GATE, DI_DIM_FF)      \
    ACT(UP, DI_DIM_FF)

typedef enum di_act {
#define DI_ACT_ENUM(act, width) DI_ACT_##act,
    DI_ACTIVATIONS(DI_ACT_ENUM)
#undef DI_ACT_ENUM
    DI_ACT_COUNT
} di_act;

/* The width of each activation's rows, indexed by di_act. */
static inline di_dim di_act_width(di_act act)
{
    static const di_dim widths[DI_ACT_COUNT] = {
#define DI_ACT_WIDTH(act, width) width,
        DI_ACTIVATIONS(DI_ACT_WIDTH)
#undef DI_ACT_WIDTH
    };
    return widths[act];
}

/*
 * What a backend implements: its layer operations. ctx is the backend's
 * own: it holds the rows of the call (tokens, positions, sequences) and the
 * activations. Weights are named by their role (arch.h) in layer il.
 */
typedef struct di_layer_ops {
    /* X = the tokens' embedding rows, times the model's embd_scale when
     * that is not 0. */
    void (*embed)(void *ctx);
    /* dst = rmsnorm(src) * w, over rows of n_embd. */
    void (*norm)(void *ctx, uint32_t il, di_act src, di_tensor_role w, di_act dst);
    /* y = W x, plus the bias after each dot product unless it is DI_T_NONE. */
    void (*matmul)(void *ctx, uint32_t il, di_tensor_role w, di_tensor_role bias, di_act x, di_act y);
    /* When qk_norm, RMSNorm of each head of Q and K with Q_NORM and K_NORM;
     * then RoPE of Q and K at each row's position with the layer's setting;
     * then K and V into the rows' caches. */
    void (*qk_rope_store)(void *ctx, uint32_t il, int qk_norm);
    /* ATT = attention of every (row, head) of Q over its sequence's cache,
     * over the layer's window when it has one; scores scaled by the model's
     * attn_scale, then soft-capped unless its attn_softcap is 0. */
    void (*attention)(void *ctx, uint32_t il);
    /* GATE = act(GATE) * UP. */
    void (*glu)(void *ctx, di_glu kind);
    /* X = X + y. */
    void (*residual)(void *ctx, di_act y);
} di_layer_ops;

static inline void di_layer_recipe(const di_arch *a, const di_layer_ops *ops, void *ctx, uint32_t il)
{
    const int bias = (a->features & DI_FEAT_QKV_BIAS) != 0;
    const int post_norms = (a->features & DI_FEAT_POST_NORMS) != 0;

    ops->norm(ctx, il, DI_ACT_X, DI_T_ATTN_NORM, DI_ACT_XN);
    ops->matmul(ctx, il, DI_T_WQ, bias ? DI_T_BQ : DI_T_NONE, DI_ACT_XN, DI_ACT_Q);
    ops->matmul(ctx, il, DI_T_WK, bias ? DI_T_BK : DI_T_NONE, DI_ACT_XN, DI_ACT_K);
    ops->matmul(ctx, il, DI_T_WV, bias ? DI_T_BV : DI_T_NONE, DI_ACT_XN, DI_ACT_V);
    ops->qk_rope_store(ctx, il, (a->features & DI_FEAT_QK_NORM) != 0);
    ops->attention(ctx, il);
    ops->matmul(ctx, il, DI_T_WO, DI_T_NONE, DI_ACT_ATT, DI_ACT_TMP);
    if (post_norms) {
        ops->norm(ctx, il, DI_ACT_TMP, DI_T_POST_ATTN_NORM, DI_ACT_XN);
        ops->residual(ctx, DI_ACT_XN);
    } else {
        ops->residual(ctx, DI_ACT_TMP);
    }

    ops->norm(ctx, il, DI_ACT_X, DI_T_FFN_NORM, DI_ACT_XN);
    ops->matmul(ctx, il, DI_T_FFN_GATE, DI_T_NONE, DI_ACT_XN, DI_ACT_GATE);
    ops->matmul(ctx, il, DI_T_FFN_UP, DI_T_NONE, DI_ACT_XN, DI_ACT_UP);
    ops->glu(ctx, a->glu);
    ops->matmul(ctx, il, DI_T_FFN_DOWN, DI_T_NONE, DI_ACT_GATE, DI_ACT_TMP);
    if (post_norms) {
        ops->norm(ctx, il, DI_ACT_TMP, DI_T_POST_FFN_NORM, DI_ACT_XN);
        ops->residual(ctx, DI_ACT_XN);
    } else {
        ops->residual(ctx, DI_ACT_TMP);
    }
}

/* The embedding and every layer; the final norm and the logits are the
 * backend's (they run on chosen rows only), and so is the logits' soft cap
 * when the model's final_softcap is not 0. */
static inline void di_forward_recipe(const struct di_model *m, const di_layer_ops *ops, void *ctx)
{
    ops->embed(ctx);
    for (uint32_t il = 0; il < m->n_layer; il++)
        di_layer_recipe(m->arch_info, ops, ctx, il);
}

#endif /* DI_LAYER_RECIPE_H */
