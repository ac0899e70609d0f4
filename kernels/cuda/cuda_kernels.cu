/*
 * cuda_kernels.cu — the CUDA backend's kernels (declared in cuda_kernels.cuh).
 *
 * The arithmetic comes from the headers the CPU compiles too: numerics.h
 * (exp, silu, gelu, RMSNorm scale, f16/bf16), dequant_blocks.h (the value of
 * every weight) and canon_order.h (which lane takes which term, how chunks
 * combine, the shuffle tree). Built with -fmad=false -ftz=false
 * -prec-div=true -prec-sqrt=true, so every + - * / sqrt is the correctly
 * rounded IEEE operation the CPU performs and fmaf appears only where
 * written. No floating-point atomics: each result is written by one thread.
 */
#include "kernels/cuda/cuda_kernels.cuh"

#include <cuda_bf16.h>

#include "kernels/common/canon_order.h"
#include "kernels/common/canon_rows.h"
#include "kernels/common/dequant_blocks.h"
/* int_dot.h's word reads. A weight word sits at any alignment (Q8_0's
 * blocks are 34 bytes): two aligned loads and a funnel shift, no byte
 * loads and no branch; the second load may reach past the word, so the
 * model file's device copy has DC_FILE_SLACK bytes after its end
 * (cuda_kernels.cuh). An activation code word is aligned: its row and
 * block start at multiples of 32 bytes of a cudaMalloc buffer. */
__host__ __device__ static inline uint32_t dc_u32(const uint8_t *p)
{
#if defined(__CUDA_ARCH__) || !defined(__CUDACC__) /* device code, and tests/cuda_emu's build of it */
    const uintptr_t at = (uintptr_t)p;
    const uint32_t *w = (const uint32_t *)(at & ~(uintptr_t)3);
    return __funnelshift_r(w[0], w[1], 8u * (uint32_t)(at & 3u));
#else
    return di_qb_u32(p);
#endif
}
#define DI_INT_U32(p) dc_u32(p)
#define DI_INT_CODES32(c) (*(const uint32_t *)(const void *)(c))
/* int_dot.h's four-product step is dp4a here (its di_int_dot4) */
#define DI_INT_DP4A 1
#include "kernels/common/int_dot.h"
#include "kernels/common/numerics.h"

#define FULL_MASK 0xffffffffu
#define WARPS_PER_BLOCK 4u
#define WARP_BLOCK (WARPS_PER_BLOCK * DI_LANES)
#define ELEM_BLOCK 256u

static unsigned blocks_for(size_t n, unsigned per_block)
{
    return (unsigned)((n + per_block - 1) / per_block);
}

/* Lane 0 receives the tree fold of the lanes' values (canon_order.h). */
__device__ static float warp_tree(float value)
{
    for (uint32_t k = 0; k < DI_TREE_STEPS; k++)
        value = value + __shfl_down_sync(FULL_MASK, value, di_tree_offset(k));
    return value;
}

/* ---- embedding ---------------------------------------------------------------- */

__global__ static void embed_kernel(dc_weight w, const dc_row *rows, float scale, float *x)
{
    const uint32_t r = blockIdx.y;
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= w.n_in)
        return;
    const uint8_t *row = w.data + (size_t)rows[r].token * w.row_bytes;
    float value = di_qb_weight(w.type, row, i);
    if (scale != 0.0f)
        value = value * scale;
    x[(size_t)r * w.n_in + i] = value;
}

void dc_embed(cudaStream_t stream, dc_weight w, const dc_row *rows, uint32_t n_rows, float scale,
              float *x)
{
    if (n_rows == 0)
        return;
    dim3 grid(blocks_for(w.n_in, ELEM_BLOCK), n_rows);
    embed_kernel<<<grid, ELEM_BLOCK, 0, stream>>>(w, rows, scale, x);
}

/* ---- matrix product ------------------------------------------------------------- */

/* One warp per output row r and tile of DI_TOKEN_TILE tokens: lane l
 * converts its weights i ≡ l (mod 32) once and accumulates them into every
 * token's lane total (canon_rows.h), exactly as di_cpu_dot(weight row, x[t]). */
__global__ static void matmul_kernel(dc_weight w, const float *x, uint32_t n_tokens, const float *bias,
                                     float *y)
{
    const uint32_t lane = threadIdx.x % DI_LANES;
    const uint32_t r = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / DI_LANES;
    const uint32_t t0 = blockIdx.y * DI_TOKEN_TILE;
    if (r >= w.n_out) /* the whole warp leaves together */
        return;
    const uint32_t n_t = n_tokens - t0 < DI_TOKEN_TILE ? n_tokens - t0 : DI_TOKEN_TILE;
    float total[DI_TOKEN_TILE];
    di_lane_row_dots(w.type, w.data + (size_t)r * w.row_bytes, w.n_in, x + (size_t)t0 * w.n_in, n_t,
                     lane, total);
    for (uint32_t t = 0; t < DI_TOKEN_TILE; t++) {
        if (t == n_t) /* the same for the whole warp, so every lane leaves together */
            break;
        const float dot = warp_tree(total[t]);
        if (lane == 0)
            y[(size_t)(t0 + t) * w.n_out + r] = bias ? dot + bias[r] : dot;
    }
}

void dc_matmul(cudaStream_t stream, dc_weight w, const float *x, uint32_t n_tokens,
               const float *bias, float *y)
{
    if (n_tokens == 0 || w.n_out == 0)
        return;
    dim3 grid(blocks_for(w.n_out, WARPS_PER_BLOCK), blocks_for(n_tokens, DI_TOKEN_TILE));
    matmul_kernel<<<grid, WARP_BLOCK, 0, stream>>>(w, x, n_tokens, bias, y);
}

/* ---- the integer profile's product (kernels/common/int_dot.h) ----------------------- */

/* One thread per (token, 32-block): int_dot.h's quantization of the block. */
__global__ static void int_quantize_kernel(const float *x, uint32_t n, uint32_t n_tokens, int8_t *codes,
                                           float *scales, int16_t *sums)
{
    const uint32_t nb = n / DI_QA_BLOCK;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* t * nb + b */
    if (i >= (size_t)n_tokens * nb)
        return;
    const size_t t = i / nb, b = i % nb;
    scales[i] = di_qa_block(x + t * n + b * DI_QA_BLOCK, codes + t * n + b * DI_QA_BLOCK, sums + 2 * i);
}

void dc_int_quantize(cudaStream_t stream, const float *x, uint32_t n, uint32_t n_tokens, dc_qa qa)
{
    const size_t blocks = (size_t)n_tokens * (n / DI_QA_BLOCK);
    if (blocks == 0)
        return;
    int_quantize_kernel<<<blocks_for(blocks, ELEM_BLOCK), ELEM_BLOCK, 0, stream>>>(x, n, n_tokens, qa.codes,
                                                                                  qa.scales, qa.sums);
}

/* One warp per output row r and token t: lane l computes di_int_lane's
 * share (its block sums by dp4a), the warp's tree adds the lanes
 * (di_int_dot's order). */
__global__ static void int_matmul_kernel(dc_weight w, dc_qa qa, const float *bias, float *y)
{
    const uint32_t lane = threadIdx.x % DI_LANES;
    const uint32_t r = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / DI_LANES, t = blockIdx.y;
    if (r >= w.n_out) /* the whole warp leaves together */
        return;
    const uint32_t n = w.n_in, nb = n / DI_QA_BLOCK;
    const float total = di_int_lane(w.type, w.data + (size_t)r * w.row_bytes, qa.codes + (size_t)t * n,
                                    qa.scales + (size_t)t * nb, qa.sums + (size_t)t * 2 * nb, n, lane);
    const float dot = warp_tree(total);
    if (lane == 0)
        y[(size_t)t * w.n_out + r] = bias ? dot + bias[r] : dot;
}

void dc_int_matmul(cudaStream_t stream, dc_weight w, dc_qa qa, uint32_t n_tokens, const float *bias, float *y)
{
    if (n_tokens == 0 || w.n_out == 0)
        return;
    dim3 grid(blocks_for(w.n_out, WARPS_PER_BLOCK), n_tokens);
    int_matmul_kernel<<<grid, WARP_BLOCK, 0, stream>>>(w, qa, bias, y);
}

/* ---- RMSNorm ------------------------------------------------------------------------ */

/* One warp per row: the canonical sum of squares, broadcast from lane 0,
 * then (x * scale) * w. All reads of the row happen before the broadcast, so
 * out may be x. */
__global__ static void rmsnorm_kernel(const float *x, const uint32_t *row_idx, uint32_t n_rows,
                                      const float *w, uint32_t n, float eps, float *out)
{
    const uint32_t lane = threadIdx.x % DI_LANES;
    const uint32_t r = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / DI_LANES;
    if (r >= n_rows)
        return;
    const float *xr = x + (size_t)(row_idx ? row_idx[r] : r) * n;
    const float sum_sq = __shfl_sync(FULL_MASK, warp_tree(di_lane_dot(xr, xr, n, lane)), 0);
    const float scale = di_rms_scale(sum_sq, n, eps);
    float *o = out + (size_t)r * n;
    for (uint32_t i = lane; i < n; i += DI_LANES)
        o[i] = (xr[i] * scale) * w[i];
}

void dc_rmsnorm(cudaStream_t stream, const float *x, const uint32_t *row_idx, uint32_t n_rows,
                const float *w, uint32_t n, float eps, float *out)
{
    if (n_rows == 0)
        return;
    rmsnorm_kernel<<<blocks_for(n_rows, WARPS_PER_BLOCK), WARP_BLOCK, 0, stream>>>(x, row_idx, n_rows,
                                                                                  w, n, eps, out);
}

/* ---- RoPE ----------------------------------------------------------------------------- */

/* One thread per (row, head, pair), as di_cpu_rope. */
__global__ static void rope_kernel(float *v, uint32_t n_rows, size_t row_stride, uint32_t n_heads,
                                   uint32_t head_dim, uint32_t n_rot, int neox, const float *cos_t,
                                   const float *sin_t, const dc_row *rows)
{
    const uint32_t half = n_rot / 2;
    const size_t item = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= (size_t)n_rows * n_heads * half)
        return;
    const uint32_t i = (uint32_t)(item % half);
    const uint32_t h = (uint32_t)(item / half % n_heads);
    const uint32_t r = (uint32_t)(item / half / n_heads);
    float *x = v + (size_t)r * row_stride + (size_t)h * head_dim;
    const uint32_t a = neox ? i : 2 * i;
    const uint32_t b = neox ? i + half : 2 * i + 1;
    const float c = cos_t[(size_t)rows[r].pos * half + i], s = sin_t[(size_t)rows[r].pos * half + i];
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}

void dc_rope(cudaStream_t stream, float *v, uint32_t n_rows, size_t row_stride, uint32_t n_heads,
             uint32_t head_dim, uint32_t n_rot, int neox, const float *cos_t, const float *sin_t,
             const dc_row *rows)
{
    const size_t n = (size_t)n_rows * n_heads * (n_rot / 2);
    if (n == 0)
        return;
    rope_kernel<<<blocks_for(n, ELEM_BLOCK), ELEM_BLOCK, 0, stream>>>(v, n_rows, row_stride, n_heads,
                                                                     head_dim, n_rot, neox, cos_t,
                                                                     sin_t, rows);
}

/* ---- KV cache --------------------------------------------------------------------------- */

__device__ static size_t cache_at(dc_cache c, uint32_t layer, uint32_t seq, uint32_t pos)
{
    return (((size_t)seq * c.n_layer + layer) * c.ctx_len + pos) * c.kv_dim;
}

__global__ static void store_kv_kernel(dc_cache c, uint32_t layer, const dc_row *rows, const float *k,
                                       const float *v)
{
    const uint32_t r = blockIdx.y;
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= c.kv_dim)
        return;
    const size_t at = cache_at(c, layer, rows[r].seq, rows[r].pos) + i;
    c.k[at] = k[(size_t)r * c.kv_dim + i];
    c.v[at] = v[(size_t)r * c.kv_dim + i];
}

void dc_store_kv(cudaStream_t stream, dc_cache cache, uint32_t layer, const dc_row *rows,
                 uint32_t n_rows, const float *k, const float *v)
{
    if (n_rows == 0)
        return;
    dim3 grid(blocks_for(cache.kv_dim, ELEM_BLOCK), n_rows);
    store_kv_kernel<<<grid, ELEM_BLOCK, 0, stream>>>(cache, layer, rows, k, v);
}

/* ---- attention ------------------------------------------------------------------------------ */

/* The largest of the block's values m, in every thread: NaN is never taken
 * (it fails every >), and the order does not matter (max is exact). */
__device__ static float block_max(float m, float *reduce)
{
    const uint32_t tid = threadIdx.x;
    reduce[tid] = m;
    __syncthreads();
    for (uint32_t step = WARP_BLOCK / 2; step >= 1; step /= 2) {
        if (tid < step && reduce[tid + step] > reduce[tid])
            reduce[tid] = reduce[tid + step];
        __syncthreads();
    }
    return reduce[0];
}

/* One block of WARPS_PER_BLOCK warps per (row, head), as di_cpu_attention_head:
 *   1. s_j = dot(q, k_j) * scale, one warp per key (canonical dot over head_dim),
 *      then di_softcap(s_j, softcap) unless softcap is 0;
 *   2. m = max s_j (exact in any order; NaN never taken, as on the CPU; a
 *      different choice between -0 and +0 cannot change exp(s_j - m));
 *   3. e_j = di_expf(s_j - m);
 *   4. sum = canonical sum over j, one warp;
 *   5. out[d] = canonical dot over j of (e_j, v_j[d]) / sum, one warp per d.
 * The reductions over keys are split at the contract's fixed chunk size
 * inside each warp (canon_order.h), never by the amount of work in flight. */
__global__ static void attention_kernel(dc_cache c, uint32_t layer, const dc_row *rows, const float *q,
                                        uint32_t n_head, uint32_t group, uint32_t head_dim,
                                        uint32_t window, float scale, float softcap, float *scores,
                                        float *out)
{
    __shared__ float reduce[WARP_BLOCK];
    __shared__ float sum_shared;
    const uint32_t item = blockIdx.x, r = item / n_head, h = item % n_head, kvh = h / group;
    const uint32_t tid = threadIdx.x, lane = tid % DI_LANES, warp = tid / DI_LANES;
    const uint32_t pos = rows[r].pos;
    const uint32_t first = window && pos + 1 > window ? pos + 1 - window : 0;
    const uint32_t n_keys = pos + 1 - first;
    const size_t q_dim = (size_t)n_head * head_dim;
    const size_t base = cache_at(c, layer, rows[r].seq, first) + (size_t)kvh * head_dim;
    const float *k = c.k + base, *v = c.v + base;
    const float *qh = q + (size_t)r * q_dim + (size_t)h * head_dim;
    float *s = scores + (size_t)item * c.ctx_len;

    for (uint32_t j = warp; j < n_keys; j += WARPS_PER_BLOCK) {
        const float dot = warp_tree(di_lane_dot(qh, k + (size_t)j * c.kv_dim, head_dim, lane));
        if (lane == 0)
            s[j] = softcap != 0.0f ? di_softcap(dot * scale, softcap) : dot * scale;
    }
    __syncthreads();

    float m = -INFINITY;
    for (uint32_t j = tid; j < n_keys; j += WARP_BLOCK)
        if (s[j] > m)
            m = s[j];
    m = block_max(m, reduce);

    for (uint32_t j = tid; j < n_keys; j += WARP_BLOCK)
        s[j] = di_expf(s[j] - m);
    __syncthreads();

    if (warp == 0) {
        const float sum = warp_tree(di_lane_sum(s, n_keys, lane));
        if (lane == 0)
            sum_shared = sum;
    }
    __syncthreads();
    const float sum = sum_shared;

    for (uint32_t d = warp; d < head_dim; d += WARPS_PER_BLOCK) {
        const float acc = warp_tree(di_lane_dot_strided(s, v + d, c.kv_dim, n_keys, lane));
        if (lane == 0)
            out[(size_t)r * q_dim + (size_t)h * head_dim + d] = acc / sum;
    }
}

/* The split attention (flash-decoding at the contract's chunk size): the
 * keys of each (row, head) are cut into chunks of DI_CHUNK, the chunks of the
 * canonical order (canon_order.h), and every chunk, and every (lane, d) pair
 * of it, gets threads of its own, so a call of a few rows over many keys
 * fills the device instead of n_rows * n_head blocks. Four kernels:
 *   1. the chunk's scores s_j (one warp per key, as above) and its maximum;
 *   2. m = max of the chunks' maxima (exact in any order), e_j = di_expf(s_j - m)
 *      in place, and the chunk's 32 lane partials of sum_j e_j;
 *   3. the chunk's lane partials of sum_j e_j * v_j[d], one thread per (lane, d);
 *   4. per (row, head): the chunks' lane partials added in chunk order
 *      (di_lane_combine), the lane tree, out[d] = acc / sum.
 * Each lane partial is the very sum di_lane_sum and di_lane_dot_strided form
 * for that chunk and lane, so the bits are the one-block kernel's (and the
 * CPU's); tests/check_cuda.c compares both kernels with the CPU. */
#define DC_SPLIT_Y 8u /* blocks per (row, head) along the chunks */

static __device__ uint32_t attn_keys(const dc_row *rows, uint32_t r, uint32_t window, uint32_t *first)
{
    const uint32_t pos = rows[r].pos;
    *first = window && pos + 1 > window ? pos + 1 - window : 0;
    return pos + 1 - *first;
}

__global__ static void attn_split_scores_kernel(dc_cache c, uint32_t layer, const dc_row *rows, const float *q,
                                                uint32_t n_head, uint32_t group, uint32_t head_dim, uint32_t window,
                                                float scale, float softcap, float *scores, dc_attn_split sp)
{
    __shared__ float reduce[WARP_BLOCK];
    const uint32_t item = blockIdx.x, r = item / n_head, h = item % n_head, kvh = h / group;
    const uint32_t tid = threadIdx.x, lane = tid % DI_LANES, warp = tid / DI_LANES;
    uint32_t first;
    const uint32_t n_keys = attn_keys(rows, r, window, &first);
    const size_t base = cache_at(c, layer, rows[r].seq, first) + (size_t)kvh * head_dim;
    const float *k = c.k + base;
    const float *qh = q + (size_t)r * n_head * head_dim + (size_t)h * head_dim;
    float *s = scores + (size_t)item * c.ctx_len;
    /* the block's chunks (the same for all its threads: every barrier is met) */
    for (uint32_t chunk = blockIdx.y, c0 = chunk * DI_CHUNK; c0 < n_keys; chunk += gridDim.y, c0 = chunk * DI_CHUNK) {
        const uint32_t end = di_chunk_end(n_keys, c0);
        for (uint32_t j = c0 + warp; j < end; j += WARPS_PER_BLOCK) {
            const float dot = warp_tree(di_lane_dot(qh, k + (size_t)j * c.kv_dim, head_dim, lane));
            if (lane == 0)
                s[j] = softcap != 0.0f ? di_softcap(dot * scale, softcap) : dot * scale;
        }
        __syncthreads();
        float m = -INFINITY;
        for (uint32_t j = c0 + tid; j < end; j += WARP_BLOCK)
            if (s[j] > m)
                m = s[j];
        m = block_max(m, reduce);
        if (tid == 0)
            sp.max[(size_t)item * sp.chunks + chunk] = m;
    }
}

__global__ static void attn_split_exp_kernel(const dc_row *rows, uint32_t n_head, uint32_t window, uint32_t ctx_len,
                                             float *scores, dc_attn_split sp)
{
    const uint32_t item = blockIdx.x, r = item / n_head, tid = threadIdx.x;
    uint32_t first;
    const uint32_t n_keys = attn_keys(rows, r, window, &first), n_chunks = (n_keys + DI_CHUNK - 1) / DI_CHUNK;
    float m = -INFINITY;
    for (uint32_t c = 0; c < n_chunks; c++)
        if (sp.max[(size_t)item * sp.chunks + c] > m)
            m = sp.max[(size_t)item * sp.chunks + c];
    float *s = scores + (size_t)item * ctx_len;
    for (uint32_t chunk = blockIdx.y, c0 = chunk * DI_CHUNK; c0 < n_keys; chunk += gridDim.y, c0 = chunk * DI_CHUNK) {
        const uint32_t end = di_chunk_end(n_keys, c0);
        for (uint32_t j = c0 + tid; j < end; j += WARP_BLOCK)
            s[j] = di_expf(s[j] - m);
        __syncthreads();
        if (tid < DI_LANES) { /* lane tid's partial of sum_j e_j in this chunk */
            float acc = 0.0f;
            for (uint32_t j = di_lane_first(c0, tid); j < end; j = di_lane_next(j))
                acc = acc + s[j];
            sp.sum[((size_t)item * sp.chunks + chunk) * DI_LANES + tid] = acc;
        }
    }
}

__global__ static void attn_split_values_kernel(dc_cache c, uint32_t layer, const dc_row *rows, uint32_t n_head,
                                                uint32_t group, uint32_t head_dim, uint32_t window,
                                                const float *scores, dc_attn_split sp)
{
    const uint32_t item = blockIdx.x, r = item / n_head, kvh = (item % n_head) / group;
    const uint32_t pair = blockIdx.z * blockDim.x + threadIdx.x; /* lane-major: d is the fast index */
    uint32_t first;
    const uint32_t n_keys = attn_keys(rows, r, window, &first);
    if (pair >= DI_LANES * head_dim)
        return; /* no barrier below */
    const uint32_t lane = pair / head_dim, d = pair % head_dim;
    const float *v = c.v + cache_at(c, layer, rows[r].seq, first) + (size_t)kvh * head_dim + d;
    const float *e = scores + (size_t)item * c.ctx_len;
    for (uint32_t chunk = blockIdx.y, c0 = chunk * DI_CHUNK; c0 < n_keys; chunk += gridDim.y, c0 = chunk * DI_CHUNK) {
        const uint32_t end = di_chunk_end(n_keys, c0);
        float acc = 0.0f;
        for (uint32_t j = di_lane_first(c0, lane); j < end; j = di_lane_next(j))
            acc = fmaf(e[j], v[(size_t)j * c.kv_dim], acc);
        sp.out[((size_t)item * sp.chunks + chunk) * DI_LANES * head_dim + pair] = acc;
    }
}

__global__ static void attn_split_combine_kernel(const dc_row *rows, uint32_t n_head, uint32_t head_dim,
                                                 uint32_t window, dc_attn_split sp, float *out)
{
    __shared__ float sum_shared;
    const uint32_t item = blockIdx.x, r = item / n_head, h = item % n_head;
    const uint32_t tid = threadIdx.x, lane = tid % DI_LANES, warp = tid / DI_LANES;
    uint32_t first;
    const uint32_t n_keys = attn_keys(rows, r, window, &first);
    const size_t at = (size_t)item * sp.chunks;
    if (warp == 0) {
        float total = 0.0f;
        for (uint32_t c0 = 0, c = 0; c0 < n_keys; c0 += DI_CHUNK, c++)
            total = di_lane_combine(total, sp.sum[(at + c) * DI_LANES + lane], c0);
        const float sum = warp_tree(total);
        if (lane == 0)
            sum_shared = sum;
    }
    __syncthreads();
    const float sum = sum_shared;
    for (uint32_t d = warp; d < head_dim; d += WARPS_PER_BLOCK) {
        float total = 0.0f;
        for (uint32_t c0 = 0, c = 0; c0 < n_keys; c0 += DI_CHUNK, c++)
            total = di_lane_combine(total, sp.out[(at + c) * DI_LANES * head_dim + (size_t)lane * head_dim + d], c0);
        const float acc = warp_tree(total);
        if (lane == 0)
            out[(size_t)r * n_head * head_dim + (size_t)h * head_dim + d] = acc / sum;
    }
}

void dc_attention(cudaStream_t stream, dc_cache cache, uint32_t layer, const dc_row *rows,
                  uint32_t n_rows, const float *q, uint32_t n_head, uint32_t n_head_kv,
                  uint32_t head_dim, uint32_t window, float scale, float softcap, float *scores,
                  dc_attn_split split, float *out)
{
    if (n_rows == 0)
        return;
    const uint32_t items = n_rows * n_head, group = n_head / n_head_kv;
    if (!split.max || n_rows > split.rows) { /* many rows: n_rows * n_head blocks are work enough */
        attention_kernel<<<items, WARP_BLOCK, 0, stream>>>(cache, layer, rows, q, n_head, group, head_dim, window,
                                                           scale, softcap, scores, out);
        return;
    }
    /* a fixed grid (a graph replays it at every length): blocks take chunks
     * y, y + DC_SPLIT_Y, ... of their row's keys; which block computes a
     * chunk's partials changes no bit */
    const dim3 chunks(items, split.chunks < DC_SPLIT_Y ? split.chunks : DC_SPLIT_Y);
    attn_split_scores_kernel<<<chunks, WARP_BLOCK, 0, stream>>>(cache, layer, rows, q, n_head, group, head_dim,
                                                                window, scale, softcap, scores, split);
    attn_split_exp_kernel<<<chunks, WARP_BLOCK, 0, stream>>>(rows, n_head, window, cache.ctx_len, scores, split);
    const dim3 pairs(items, chunks.y, blocks_for((size_t)DI_LANES * head_dim, ELEM_BLOCK));
    attn_split_values_kernel<<<pairs, ELEM_BLOCK, 0, stream>>>(cache, layer, rows, n_head, group, head_dim, window,
                                                               scores, split);
    attn_split_combine_kernel<<<items, WARP_BLOCK, 0, stream>>>(rows, n_head, head_dim, window, split, out);
}

/* ---- elementwise --------------------------------------------------------------------------------- */

__global__ static void glu_kernel(float *gate, const float *up, size_t n, int gelu)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        gate[i] = (gelu ? di_gelu_tanh(gate[i]) : di_silu(gate[i])) * up[i];
}

void dc_glu(cudaStream_t stream, float *gate, const float *up, size_t n, int gelu)
{
    if (n)
        glu_kernel<<<blocks_for(n, ELEM_BLOCK), ELEM_BLOCK, 0, stream>>>(gate, up, n, gelu);
}

__global__ static void softcap_kernel(float *x, size_t n, float cap)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = di_softcap(x[i], cap);
}

void dc_softcap(cudaStream_t stream, float *x, size_t n, float cap)
{
    if (n)
        softcap_kernel<<<blocks_for(n, ELEM_BLOCK), ELEM_BLOCK, 0, stream>>>(x, n, cap);
}

__global__ static void add_kernel(float *dst, const float *a, const float *b, size_t n)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = a[i] + b[i];
}

void dc_add(cudaStream_t stream, float *dst, const float *a, const float *b, size_t n)
{
    if (n)
        add_kernel<<<blocks_for(n, ELEM_BLOCK), ELEM_BLOCK, 0, stream>>>(dst, a, b, n);
}

__global__ static void add_bias_kernel(float *y, const float *bias, uint32_t n_tokens, uint32_t n_out)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)n_tokens * n_out)
        y[i] = y[i] + bias[i % n_out];
}

void dc_add_bias(cudaStream_t stream, float *y, const float *bias, uint32_t n_tokens, uint32_t n_out)
{
    const size_t n = (size_t)n_tokens * n_out;
    if (n)
        add_bias_kernel<<<blocks_for(n, ELEM_BLOCK), ELEM_BLOCK, 0, stream>>>(y, bias, n_tokens, n_out);
}

/* ---- bf16 copies (device profile) ------------------------------------------------------------------- */

__global__ static void weight_to_bf16_kernel(dc_weight w, uint16_t *out)
{
    const uint32_t r = blockIdx.x; /* rows on x: n_out can pass the 65535 blocks of y */
    const uint32_t i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i < w.n_in)
        out[(size_t)r * w.n_in + i] =
            __bfloat16_as_ushort(__float2bfloat16_rn(di_qb_weight(w.type, w.data + (size_t)r * w.row_bytes, i)));
}

void dc_weight_to_bf16(cudaStream_t stream, dc_weight w, uint16_t *out)
{
    if (w.n_out == 0 || w.n_in == 0)
        return;
    dim3 grid(w.n_out, blocks_for(w.n_in, ELEM_BLOCK));
    weight_to_bf16_kernel<<<grid, ELEM_BLOCK, 0, stream>>>(w, out);
}

__global__ static void floats_to_bf16_kernel(const float *x, size_t n, uint16_t *out)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}

void dc_floats_to_bf16(cudaStream_t stream, const float *x, size_t n, uint16_t *out)
{
    if (n)
        floats_to_bf16_kernel<<<blocks_for(n, ELEM_BLOCK), ELEM_BLOCK, 0, stream>>>(x, n, out);
}

/* ---- greedy ------------------------------------------------------------------------------------------ */

/* The better of two candidates: found beats not found, a larger value beats
 * a smaller one, and between equal values (-0 == +0) the lower index. This
 * choice is associative and commutative, so any reduction tree gives the
 * sequential scan's answer. */
__device__ static void better(int *found, float *value, uint32_t *index, int o_found, float o_value,
                              uint32_t o_index)
{
    if (!o_found)
        return;
    if (!*found || o_value > *value || (o_value == *value && o_index < *index)) {
        *found = 1;
        *value = o_value;
        *index = o_index;
    }
}

__global__ static void argmax_kernel(const float *x, uint32_t n, int32_t *out)
{
    __shared__ int found_s[ELEM_BLOCK];
    __shared__ float value_s[ELEM_BLOCK];
    __shared__ uint32_t index_s[ELEM_BLOCK];
    const uint32_t tid = threadIdx.x;
    const float *row = x + (size_t)blockIdx.x * n;
    int found = 0;
    float value = 0.0f;
    uint32_t index = 0;
    for (uint32_t i = tid; i < n; i += ELEM_BLOCK)
        if (row[i] == row[i]) /* NaN never chosen */
            better(&found, &value, &index, 1, row[i], i);
    found_s[tid] = found;
    value_s[tid] = value;
    index_s[tid] = index;
    __syncthreads();
    for (uint32_t step = ELEM_BLOCK / 2; step >= 1; step /= 2) {
        if (tid < step) {
            better(&found, &value, &index, found_s[tid + step], value_s[tid + step], index_s[tid + step]);
            found_s[tid] = found;
            value_s[tid] = value;
            index_s[tid] = index;
        }
        __syncthreads();
    }
    if (tid == 0)
        out[blockIdx.x] = found ? (int32_t)index : 0;
}

void dc_argmax(cudaStream_t stream, const float *x, uint32_t n_rows, uint32_t n, int32_t *out)
{
    if (n_rows)
        argmax_kernel<<<n_rows, ELEM_BLOCK, 0, stream>>>(x, n, out);
}
