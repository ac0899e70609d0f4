/*
 * cuda_blas.cu — the device profile's matrix products (cuda_blas.cuh).
 *
 * Layouts: a weight matrix is row-major [n_out][n_in], which cuBLASLt reads
 * as a column-major n_in x n_out matrix A used transposed; the activations
 * [n_tokens][n_in] are the column-major n_in x n_tokens matrix B; the result
 * [n_tokens][n_out] is the column-major n_out x n_tokens matrix D. So
 * D = A^T B with m = n_out, n = n_tokens, k = n_in.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/cuda/cuda_blas.cuh"
#include "lib/base/growable.h"

#define WORKSPACE_BYTES (32u << 20)
#define HEURISTIC_RESULTS 16

typedef struct blas_plan {
    uint32_t n_out, n_in;
    cublasLtMatmulAlgo_t algo;
} blas_plan;

struct dc_blas {
    cublasHandle_t handle;     /* carries the atomics mode and the stream's workspace */
    cublasLtHandle_t lt;
    void *workspace;           /* WORKSPACE_BYTES, this stream's only one */
    uint16_t *x_bf16;          /* [max(max_rows, max_logits)][max n_in] */
    blas_plan *plans;
    uint32_t n_plans;
    size_t cap_plans;
    uint32_t max_tokens;
    cublasStatus_t failure;    /* the first failed call since the last check */
};

#define TRY_BLAS(call, what)                                                             \
    do {                                                                                 \
        cublasStatus_t b_ = (call);                                                      \
        if (b_ != CUBLAS_STATUS_SUCCESS)                                                 \
            return di_error(err, err_size, DI_ERR_INTERNAL, "cuBLAS: %s: %s", what,       \
                           cublasGetStatusString(b_));                                   \
    } while (0)

#define TRY_CUDA(call, what)                                                             \
    do {                                                                                 \
        cudaError_t c_ = (call);                                                         \
        if (c_ != cudaSuccess)                                                           \
            return di_error(err, err_size,                                                \
                           c_ == cudaErrorMemoryAllocation ? DI_ERR_OUT_OF_MEMORY        \
                                                           : DI_ERR_INTERNAL,            \
                           "CUDA: %s: %s", what, cudaGetErrorString(c_));                \
    } while (0)

size_t dc_blas_version(void)
{
    return cublasLtGetVersion();
}

/* ---- descriptors ------------------------------------------------------------------ */

typedef struct gemm_desc {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
} gemm_desc;

static void gemm_desc_free(gemm_desc *g)
{
    if (g->op)
        cublasLtMatmulDescDestroy(g->op);
    if (g->a)
        cublasLtMatrixLayoutDestroy(g->a);
    if (g->b)
        cublasLtMatrixLayoutDestroy(g->b);
    if (g->d)
        cublasLtMatrixLayoutDestroy(g->d);
    memset(g, 0, sizeof *g);
}

static cublasStatus_t gemm_desc_make(gemm_desc *g, uint32_t n_out, uint32_t n_in, uint32_t n_tokens)
{
    memset(g, 0, sizeof *g);
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    cublasStatus_t st = cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&g->a, CUDA_R_16BF, n_in, n_out, n_in);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&g->b, CUDA_R_16BF, n_in, n_tokens, n_in);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutCreate(&g->d, CUDA_R_32F, n_out, n_tokens, n_out);
    if (st != CUBLAS_STATUS_SUCCESS)
        gemm_desc_free(g);
    return st;
}

/* ---- choosing the algorithm of a shape ----------------------------------------------- */

/* No split-K and no reduction scheme: each output is reduced whole by one
 * block, in an order fixed by the algorithm and k alone. */
static cublasStatus_t pin_config(cublasLtMatmulAlgo_t *algo)
{
    const int32_t splitk = 1;
    const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasStatus_t st = cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                                             sizeof splitk);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                  sizeof scheme);
    return st;
}

/* 1 when the algorithm runs every token count 1..max_tokens within the workspace. */
static int supports_all_counts(struct dc_blas *b, const cublasLtMatmulAlgo_t *algo, uint32_t n_out,
                               uint32_t n_in)
{
    for (uint32_t n = 1; n <= b->max_tokens; n++) {
        gemm_desc g;
        if (gemm_desc_make(&g, n_out, n_in, n) != CUBLAS_STATUS_SUCCESS)
            return 0;
        cublasLtMatmulHeuristicResult_t r;
        memset(&r, 0, sizeof r);
        cublasStatus_t st = cublasLtMatmulAlgoCheck(b->lt, g.op, g.a, g.b, g.d, g.d, algo, &r);
        gemm_desc_free(&g);
        if (st != CUBLAS_STATUS_SUCCESS || r.workspaceSize > WORKSPACE_BYTES)
            return 0;
    }
    return 1;
}

/* The heuristic's algorithms for the largest call of a shape, best first;
 * only_none restricts them to reduction scheme NONE. */
static cublasStatus_t candidates(struct dc_blas *b, uint32_t n_out, uint32_t n_in, int only_none,
                                 cublasLtMatmulHeuristicResult_t *found, int *n_found)
{
    *n_found = 0;
    cublasLtMatmulPreference_t pref = NULL;
    const uint64_t ws = WORKSPACE_BYTES;
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS && only_none)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                  sizeof schemes);
    gemm_desc g;
    memset(&g, 0, sizeof g);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = gemm_desc_make(&g, n_out, n_in, b->max_tokens);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(b->lt, g.op, g.a, g.b, g.d, g.d, pref, HEURISTIC_RESULTS, found,
                                            n_found);
    gemm_desc_free(&g);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) { /* no algorithm at all: not an error here */
        *n_found = 0;
        st = CUBLAS_STATUS_SUCCESS;
    }
    return st;
}

static di_status plan_for(dc_state *s, uint32_t n_out, uint32_t n_in, int *index, char *err,
                          size_t err_size)
{
    struct dc_blas *b = s->blas;
    for (uint32_t i = 0; i < b->n_plans; i++)
        if (b->plans[i].n_out == n_out && b->plans[i].n_in == n_in) {
            *index = (int)i;
            return DI_OK;
        }
    if (!DI_GROW(b->plans, b->n_plans, b->cap_plans, 1, 16))
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory");
    /* Candidates first among the algorithms the heuristic files under reduction
     * scheme NONE, then among all it offers (split-K and the scheme are forced
     * to 1 and NONE on each before it is checked). */
    int n_found = 0;
    for (int only_none = 1; only_none >= 0; only_none--) {
        cublasLtMatmulHeuristicResult_t found[HEURISTIC_RESULTS];
        int n = 0;
        TRY_BLAS(candidates(b, n_out, n_in, only_none, found, &n), "choosing a matrix-product algorithm");
        n_found += n;
        for (int i = 0; i < n; i++) {
            cublasLtMatmulAlgo_t algo = found[i].algo;
            if (found[i].state != CUBLAS_STATUS_SUCCESS || pin_config(&algo) != CUBLAS_STATUS_SUCCESS ||
                !supports_all_counts(b, &algo, n_out, n_in))
                continue;
            b->plans[b->n_plans].n_out = n_out;
            b->plans[b->n_plans].n_in = n_in;
            b->plans[b->n_plans].algo = algo;
            *index = (int)b->n_plans++;
            return DI_OK;
        }
    }
    return di_error(err, err_size, DI_ERR_UNSUPPORTED,
                   "device profile: cuBLASLt offers no algorithm without split-K for a %u x %u weight "
                   "that runs every batch of 1..%u tokens (%d candidates); use the portable profile",
                   n_out, n_in, b->max_tokens, n_found);
}

/* ---- creation ---------------------------------------------------------------------------- */

static di_status prepare_weight(dc_state *s, dc_weight *w, size_t *max_in, char *err, size_t err_size)
{
    uint16_t *copy = NULL;
    TRY_CUDA(cudaMalloc((void **)&copy, (size_t)w->n_out * w->n_in * sizeof(uint16_t)), "bf16 weights");
    s->blas_weights[s->n_blas_weights++] = copy;
    dc_weight_to_bf16(s->stream, *w, copy);
    w->bf16 = copy;
    if (w->n_in > *max_in)
        *max_in = w->n_in;
    return plan_for(s, w->n_out, w->n_in, &w->plan, err, err_size);
}

di_status dc_blas_create(dc_state *s, char *err, size_t err_size)
{
    const di_model *m = s->model;
    struct dc_blas *b = (struct dc_blas *)calloc(1, sizeof *b);
    if (!b)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory");
    s->blas = b;
    b->max_tokens = s->params.max_rows > s->params.max_logits ? s->params.max_rows : s->params.max_logits;
    size_t per_layer = 0; /* matrices per layer */
    for (int r = 0; r < DI_T_COUNT; r++)
        per_layer += di_tensor_specs()[r].kind == DI_MATRIX;
    s->blas_weights = (void **)calloc((size_t)m->n_layer * per_layer + 1, sizeof(void *));
    if (!s->blas_weights)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory");

    TRY_BLAS(cublasCreate(&b->handle), "cublasCreate");
    TRY_BLAS(cublasSetStream(b->handle, s->stream), "cublasSetStream");
    TRY_BLAS(cublasSetAtomicsMode(b->handle, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
    TRY_CUDA(cudaMalloc(&b->workspace, WORKSPACE_BYTES), "cuBLAS workspace");
    TRY_BLAS(cublasSetWorkspace(b->handle, b->workspace, WORKSPACE_BYTES), "cublasSetWorkspace");
    TRY_BLAS(cublasLtCreate(&b->lt), "cublasLtCreate");

    size_t max_in = 0;
    di_status st = prepare_weight(s, &s->output, &max_in, err, err_size);
    for (uint32_t il = 0; !st && il < m->n_layer; il++) {
        dc_layer *ly = &s->layers[il];
        for (int r = 0; !st && r < DI_T_COUNT; r++)
            if (di_tensor_specs()[r].kind == DI_MATRIX)
                st = prepare_weight(s, &ly->mat[r], &max_in, err, err_size);
    }
    if (st)
        return st;
    TRY_CUDA(cudaMalloc((void **)&b->x_bf16, (size_t)b->max_tokens * max_in * sizeof(uint16_t)),
             "bf16 activations");
    TRY_CUDA(cudaStreamSynchronize(s->stream), "converting the weights to bf16");
    return DI_OK;
}

void dc_blas_destroy(dc_state *s)
{
    struct dc_blas *b = s->blas;
    for (size_t i = 0; i < s->n_blas_weights; i++)
        cudaFree(s->blas_weights[i]);
    free(s->blas_weights);
    s->blas_weights = NULL;
    if (!b)
        return;
    if (b->lt)
        cublasLtDestroy(b->lt);
    if (b->handle)
        cublasDestroy(b->handle);
    cudaFree(b->workspace);
    cudaFree(b->x_bf16);
    free(b->plans);
    free(b);
    s->blas = NULL;
}

/* ---- calls ---------------------------------------------------------------------------------- */

void dc_blas_matmul(dc_state *s, const dc_weight *w, const float *x, uint32_t n_tokens, const float *bias,
                    float *y)
{
    struct dc_blas *b = s->blas;
    if (n_tokens == 0 || b->failure != CUBLAS_STATUS_SUCCESS)
        return;
    if (n_tokens > b->max_tokens) { /* the caller's limits make this impossible */
        b->failure = CUBLAS_STATUS_INVALID_VALUE;
        return;
    }
    dc_floats_to_bf16(s->stream, x, (size_t)n_tokens * w->n_in, b->x_bf16);
    gemm_desc g;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = gemm_desc_make(&g, w->n_out, w->n_in, n_tokens);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(b->lt, g.op, &one, w->bf16, g.a, b->x_bf16, g.b, &zero, y, g.d, y, g.d,
                            &b->plans[w->plan].algo, b->workspace, WORKSPACE_BYTES, s->stream);
    gemm_desc_free(&g);
    if (st != CUBLAS_STATUS_SUCCESS)
        b->failure = st;
    else if (bias)
        dc_add_bias(s->stream, y, bias, n_tokens, w->n_out);
}

di_status dc_blas_check(dc_state *s, char *err, size_t err_size)
{
    struct dc_blas *b = s->blas;
    if (!b || b->failure == CUBLAS_STATUS_SUCCESS)
        return DI_OK;
    const cublasStatus_t st = b->failure;
    b->failure = CUBLAS_STATUS_SUCCESS;
    return di_error(err, err_size, DI_ERR_INTERNAL, "cuBLASLt matrix product: %s", cublasGetStatusString(st));
}
