/*
 * cuda_kernels.cuh — the CUDA backend's operations, each the twin of the CPU
 * operation of the same name in kernels/cpu/cpu_kernels.c and in the same canonical
 * order (docs/DETERMINISM.md; kernels/common/canon_order.h maps it onto one warp). Every
 * launcher enqueues on `stream` and returns at once; errors surface at the
 * next synchronisation. Work is split over outputs only (rows, heads, output
 * columns): a reduction is always evaluated whole by one warp.
 */
#ifndef DC_CUDA_KERNELS_CUH
#define DC_CUDA_KERNELS_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* A weight matrix in device memory: n_out rows of n_in weights of a ggml
 * type, row_bytes apart (the file's bytes, unchanged). */
typedef struct dc_weight {
    const uint8_t *data;
    uint32_t type;
    uint32_t n_in;
    uint32_t n_out;
    size_t row_bytes;
    /* device profile: the weights rounded to bf16, row-major, and the index
     * of the pinned cuBLASLt algorithm of this shape (cuda_blas.cu) */
    const uint16_t *bf16;
    int plan;
} dc_weight;

/* Bytes the device copy of the model file has after its end: a weight word
 * read near the end loads the aligned word after it too (cuda_kernels.cu). */
#define DC_FILE_SLACK 16u

/* A row of a forward call on the device (di_backend_row). */
typedef struct dc_row {
    int32_t token;
    uint32_t pos;
    uint32_t seq;
} dc_row;

/* Where a layer's keys and values live: cache[seq][layer][pos][kv_dim]. */
typedef struct dc_cache {
    float *k, *v;
    uint32_t n_layer, ctx_len, kv_dim;
} dc_cache;

/* x[r] = row rows[r].token of w, times scale unless scale is 0. */
void dc_embed(cudaStream_t stream, dc_weight w, const dc_row *rows, uint32_t n_rows, float scale,
              float *x);

/* y[t][r] = dot(row r of w, x[t]) (+ bias[r] when bias is not NULL). */
void dc_matmul(cudaStream_t stream, dc_weight w, const float *x, uint32_t n_tokens,
               const float *bias, float *y);

/* The integer profile's quantized activations (kernels/common/int_dot.h) of
 * up to max_rows tokens of the widest input: codes [t][n], scales [t][n / 32],
 * sums [t][n / 16], the layout of di_qa_row. */
typedef struct dc_qa {
    int8_t *codes;
    float *scales;
    int16_t *sums;
} dc_qa;

/* qa = the quantization of n_tokens rows of n values of x (n a multiple of 32). */
void dc_int_quantize(cudaStream_t stream, const float *x, uint32_t n, uint32_t n_tokens, dc_qa qa);

/* y[t][r] = int_dot.h's product of row r of w (a quantized type) with token t
 * of qa (+ bias[r] when bias is not NULL): the integer profile's dc_matmul. */
void dc_int_matmul(cudaStream_t stream, dc_weight w, dc_qa qa, uint32_t n_tokens, const float *bias, float *y);

/* out[i] = RMSNorm of row i of x (n values per row, rows n apart) with
 * weights w; row i is x's row row_idx[i] when row_idx is not NULL. out may
 * be x (then row_idx must be NULL). */
void dc_rmsnorm(cudaStream_t stream, const float *x, const uint32_t *row_idx, uint32_t n_rows,
                const float *w, uint32_t n, float eps, float *out);

/* RoPE of the n_heads heads of each row of v (row_stride floats apart) at
 * position rows[r].pos, with tables [ctx_len][n_rot / 2]; neox selects the
 * (i, i + n_rot/2) pairing, else (2i, 2i+1). */
void dc_rope(cudaStream_t stream, float *v, uint32_t n_rows, size_t row_stride, uint32_t n_heads,
             uint32_t head_dim, uint32_t n_rot, int neox, const float *cos_t, const float *sin_t,
             const dc_row *rows);

/* Writes k[r] and v[r] (kv_dim each) into the cache at layer, rows[r].seq,
 * rows[r].pos. */
void dc_store_kv(cudaStream_t stream, dc_cache cache, uint32_t layer, const dc_row *rows,
                 uint32_t n_rows, const float *k, const float *v);

/* The split attention's scratch (cuda_kernels.cu, "attention"): for calls
 * of up to `rows` rows, the keys of each (row, head) cut into at most
 * `chunks` chunks of DI_CHUNK keys (ceil(ctx_len / DI_CHUNK)). max NULL: no
 * split, every call takes the one-block kernel (the same bits). */
typedef struct dc_attn_split {
    float *max;    /* [rows * n_head][chunks]: each chunk's largest score */
    float *sum;    /* [rows * n_head][chunks][DI_LANES]: lane partials of sum e_j */
    float *out;    /* [rows * n_head][chunks][DI_LANES][head_dim]: of sum e_j v_j[d] */
    uint32_t rows, chunks;
} dc_attn_split;

/* Attention of every (row, head): q [n_rows][n_head * head_dim] over the
 * row's own sequence's keys first..pos (a sliding window when window > 0),
 * scores soft-capped unless softcap is 0, into out with q's layout. scores
 * holds n_rows * n_head * ctx_len floats. A call of at most split.rows rows
 * runs split over its keys' chunks, a larger one a block per (row, head). */
void dc_attention(cudaStream_t stream, dc_cache cache, uint32_t layer, const dc_row *rows,
                  uint32_t n_rows, const float *q, uint32_t n_head, uint32_t n_head_kv,
                  uint32_t head_dim, uint32_t window, float scale, float softcap, float *scores,
                  dc_attn_split split, float *out);

/* x[i] = di_softcap(x[i], cap): the logits' soft cap (cap > 0). */
void dc_softcap(cudaStream_t stream, float *x, size_t n, float cap);

/* y[t][r] = y[t][r] + bias[r] for t < n_tokens, r < n_out. */
void dc_add_bias(cudaStream_t stream, float *y, const float *bias, uint32_t n_tokens, uint32_t n_out);

/* out[r][i] = bf16 (round to nearest even) of weight i of row r of w. */
void dc_weight_to_bf16(cudaStream_t stream, dc_weight w, uint16_t *out);

/* out[i] = bf16 (round to nearest even) of x[i]. */
void dc_floats_to_bf16(cudaStream_t stream, const float *x, size_t n, uint16_t *out);

/* gate[i] = act(gate[i]) * up[i] with act = di_gelu_tanh (gelu) or di_silu. */
void dc_glu(cudaStream_t stream, float *gate, const float *up, size_t n, int gelu);

/* dst[i] = a[i] + b[i]. */
void dc_add(cudaStream_t stream, float *dst, const float *a, const float *b, size_t n);

/* out[r] = lowest index of the largest non-NaN value of row r of x (n values
 * per row); 0 for an all-NaN row. */
void dc_argmax(cudaStream_t stream, const float *x, uint32_t n_rows, uint32_t n, int32_t *out);

#endif /* DC_CUDA_KERNELS_CUH */
