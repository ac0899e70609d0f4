/*
 * cuda_blas.cuh — the device profile's matrix products: cuBLASLt on tensor
 * cores, bf16 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F).
 *
 * What keeps them run-to-run and batch invariant on one GPU model and
 * library version: one stream, one cuBLAS handle with
 * CUBLAS_ATOMICS_NOT_ALLOWED and one workspace for it; one cuBLASLt
 * algorithm per weight shape, chosen once at session creation with split-K
 * 1 and reduction scheme NONE, checked (cublasLtMatmulAlgoCheck) for every
 * token count a call can have, and then used for every call whatever its
 * token count. A shape with no such algorithm refuses the session.
 */
#ifndef DC_CUDA_BLAS_CUH
#define DC_CUDA_BLAS_CUH

#include "lib/backend/cuda/cuda_state.cuh"

/* Creates the handles and workspace, converts every weight matrix to bf16
 * and pins an algorithm per shape. On failure the state is left for destroy. */
di_status dc_blas_create(dc_state *s, char *err, size_t err_size);
void dc_blas_destroy(dc_state *s);

/* y[t][r] = dot(row r of w, x[t]) for t < n_tokens through cuBLASLt
 * (+ bias[r] by the portable bias kernel). A failure is kept for
 * dc_blas_check. */
void dc_blas_matmul(dc_state *s, const dc_weight *w, const float *x, uint32_t n_tokens,
                    const float *bias, float *y);

/* DI_OK, or the first cuBLAS failure since the last check (then cleared). */
di_status dc_blas_check(dc_state *s, char *err, size_t err_size);

/* cuBLASLt's version number, e.g. 130100. */
size_t dc_blas_version(void);

#endif /* DC_CUDA_BLAS_CUH */
