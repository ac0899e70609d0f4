/*
 * cuda_state.cuh — what the CUDA backend keeps per session: the device, the
 * model's bytes and vectors in device memory, the KV caches of every
 * sequence and the activations of one forward call.
 */
#ifndef DC_CUDA_STATE_CUH
#define DC_CUDA_STATE_CUH

#include <cuda_runtime.h>

#include "lib/backend/backend.h"
#include "lib/base/errors.h"
#include "kernels/cuda/cuda_kernels.cuh"
#include "lib/backend/layer_recipe.h"
#include "lib/model/model.h"

/* A layer's tensors on the device, indexed by role (arch.h): mat[] for the
 * DI_MATRIX roles, vec[] (device pointers, NULL when the architecture lacks
 * one) for the DI_VECTOR roles. */
typedef struct dc_layer {
    dc_weight mat[DI_T_COUNT];
    const float *vec[DI_T_COUNT];
} dc_layer;

/* Forward graphs a session keeps: decode steps of 1 to 16 sequences and the
 * usual prefill chunks fit; other row counts run without one. */
#define DC_GRAPHS 24u
/* Calls of up to this many rows (decoding sequences, small chunks) run the
 * attention split over its keys' chunks (dc_attn_split): its scratch grows
 * with rows * n_head * ctx_len * head_dim / 32 floats. */
#define DC_SPLIT_ROWS 16u

typedef struct dc_state {
    const di_model *model;
    di_backend_params params;
    int device;
    cudaStream_t stream;
    uint8_t *file;             /* the model file's bytes, as mapped on the host: the copy
                                  the sessions of this model on this device share */
    int own_file;              /* 1: a copy of this session's own (cuda_backend.cu) */
    void **allocations;        /* every other cudaMalloc, freed at destroy */
    size_t n_allocations, cap_allocations;
    dc_layer *layers;          /* [n_layer], host array of device pointers */
    dc_weight tok_embd, output;
    const float *output_norm;
    float *rope_cos[DI_MAX_ROPE_SETS], *rope_sin[DI_MAX_ROPE_SETS];
    dc_cache cache;            /* [max_sequences][n_layer][ctx_len][kv_dim] */
    float *act[DI_ACT_COUNT];  /* activations, max_rows rows each (layer_recipe.h) */
    float *scores;             /* [max_rows * n_head][ctx_len] */
    dc_attn_split attn_split;  /* the split attention's scratch (cuda_kernels.cuh) */
    dc_row *rows;              /* [max_rows] */
    uint32_t n_rows;           /* rows of the last forward call */
    uint32_t *logit_idx;       /* [max_logits] */
    float *logits;             /* [max_logits][n_vocab] */
    int32_t *greedy;           /* [max_logits] */
    /* integer profile: the quantized activations (NULL codes in the others) */
    dc_qa qa;
    /* the forward pass as CUDA graphs, one per row count (cuda_backend.cu) */
    struct {
        uint32_t n_rows;
        cudaGraphExec_t exec;
    } graphs[DC_GRAPHS];
    uint32_t n_graphs;
    /* device profile (cuda_blas.cu); NULL in the portable profile */
    struct dc_blas *blas;
    void **blas_weights;       /* the bf16 copies of the weight matrices */
    size_t n_blas_weights;
    char info[256];
} dc_state;

/* The layer recipe (layer_recipe.h) over the device's layer ops for the
 * state's current rows (cuda_forward.cu), enqueued on the state's stream. */
void dc_forward_layers(dc_state *s, uint32_t n_rows);

/* y = W x for n_tokens rows: the portable kernel, the integer product of a
 * quantized weight in the integer profile, or cuBLASLt in the device
 * profile (cuda_forward.cu). */
void dc_forward_matmul(dc_state *s, const dc_weight *w, const float *x, uint32_t n_tokens,
                       const float *bias, float *y);

#endif /* DC_CUDA_STATE_CUH */
