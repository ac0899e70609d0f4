/*
 * simd_matmul.h — the canonical dot products and matrix product of a
 * SIMD path: R rows with T tokens, each output its own canonical reduction.
 *
 * Not a normal header: it defines static functions over the vector words of
 * the path that includes it (simd_path.h says how).
 */

/* Shapes of the matrix kernels: rows sharing each token load, and tokens
 * sharing each weight load, chosen so the accumulators stay in registers.
 * DIRECT_ROWS for rows converted in registers (few tokens), TILE_ROWS for
 * rows of a converted float32 tile (many tokens): with AVX-512, 3 x 4 x 2
 * accumulators and 3 + 1 operands of the 32 registers (measured against
 * 2 x 5, 2 x 6, 4 x 3 and 1 x 12: all slower). ROWS_MAX bounds both. */
#if VL == 16
#define DIRECT_ROWS 2
#define TILE_ROWS 3
#define ROWS_MAX 3
#define TOKENS_MAX 4
#else
#define DIRECT_ROWS 1
#define TILE_ROWS 1
#define ROWS_MAX 1
#define TOKENS_MAX 3
#endif

#define UNROLL _Pragma("GCC unroll 16")

/* acc[r][t] += w[r] * x[t] lane by lane, for one 32-term block. Each token
 * word is loaded once into a register for its R rows (the empty asm keeps
 * the compiler from folding the load into every fma, which made the loads,
 * not the multiply-adds, the bound). */
static DI_INLINE void fma_block(vf w[][NV], int R, const float *x, size_t xs, int T,
                                vf acc[][TOKENS_MAX][NV])
{
    UNROLL for (int t = 0; t < T; t++)
        UNROLL for (int j = 0; j < NV; j++) {
            vf xv = vf_load(x + t * xs + j * VL);
            if (R > 1)
                __asm__("" : "+v"(xv));
            UNROLL for (int r = 0; r < R; r++)
                acc[r][t][j] = vf_fma(w[r][j], xv, acc[r][t][j]);
        }
}

/*
 * acc[r][t] = the lanes of chunk [c0, end) (at most DI_CHUNK terms, from
 * +0, one fma per term in increasing order) of row r (rows[r], of type) with
 * x + t * xs, for r < R, t < T. Weights past the last whole 32-block (float
 * types only) are done lane by lane with fmaf, in the same order. `stream`:
 * the rows come from the model in memory (prefetch them), not from a scratch.
 */
static DI_INLINE void chunk_lanes(uint32_t type, const uint8_t *const *rows, int R, uint32_t c0,
                                  uint32_t end, const float *x, size_t xs, int T, int stream,
                                  vf acc[][TOKENS_MAX][NV])
{
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++)
            UNROLL for (int j = 0; j < NV; j++)
                acc[r][t][j] = vf_zero();
    if (IS_K_TYPE(type)) { /* super-blocks never straddle a chunk (1024 = 4 x 256) */
        const size_t sb_bytes = di_weight_block_bytes(type);
        for (uint32_t sb = c0 / 256; sb < end / 256; sb++) {
            const uint8_t *b[ROWS_MAX];
            sb_factors f[ROWS_MAX];
            UNROLL for (int r = 0; r < R; r++) {
                b[r] = rows[r] + sb * sb_bytes;
                if (stream)
                    prefetch_ahead(b[r], sb_bytes);
                superblock_factors(type, b[r], &f[r]);
            }
            UNROLL for (int sub = 0; sub < 8; sub++) {
                vf w[ROWS_MAX][NV];
                UNROLL for (int r = 0; r < R; r++)
                    dq_k_sub(type, b[r], sub, &f[r], w[r]);
                fma_block(w, R, x + (size_t)sb * 256 + 32 * sub, xs, T, acc);
            }
        }
    } else {
        for (uint32_t blk = c0 / 32; blk < end / 32; blk++) {
            vf w[ROWS_MAX][NV];
            UNROLL for (int r = 0; r < R; r++) {
                if (stream)
                    prefetch_ahead(rows[r] + blk * block32_bytes(type), block32_bytes(type));
                dq32(type, rows[r], blk, w[r]);
            }
            fma_block(w, R, x + (size_t)blk * 32, xs, T, acc);
        }
    }
    if (end % 32) {
        UNROLL for (int r = 0; r < R; r++)
            UNROLL for (int t = 0; t < T; t++) {
                float lane[DI_LANES];
                UNROLL for (int j = 0; j < NV; j++)
                    vf_store(lane + j * VL, acc[r][t][j]);
                for (uint32_t i = end - end % 32; i < end; i++)
                    lane[i % 32] = fmaf(di_qb_plain(type, rows[r], i), x[t * xs + i], lane[i % 32]);
                UNROLL for (int j = 0; j < NV; j++)
                    acc[r][t][j] = vf_load(lane + j * VL);
            }
    }
}

/*
 * out[r * out_stride + t * out_tstride] = canonical dot of row r (rows[r], of
 * type, n weights) with x + t * xs, for r < R, t < T: per chunk its lanes
 * (chunk_lanes), which go into the running totals (the first chunk's as they
 * are); the tree of lanes_tree ends it.
 */
static DI_INLINE void dot_tile(uint32_t type, const uint8_t *const *rows, int R, uint32_t n,
                               const float *x, size_t xs, int T, float *out, size_t out_stride,
                               size_t out_tstride, int stream)
{
    vf acc[ROWS_MAX][TOKENS_MAX][NV], tot[ROWS_MAX][TOKENS_MAX][NV];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++)
            UNROLL for (int j = 0; j < NV; j++)
                tot[r][t][j] = vf_zero(); /* n == 0 gives +0 */
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        chunk_lanes(type, rows, R, c0, di_chunk_end(n, c0), x, xs, T, stream, acc);
        UNROLL for (int r = 0; r < R; r++)
            UNROLL for (int t = 0; t < T; t++)
                UNROLL for (int j = 0; j < NV; j++)
                    tot[r][t][j] = c0 == 0 ? acc[r][t][j] : vf_add(tot[r][t][j], acc[r][t][j]);
    }
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++)
            out[r * out_stride + t * out_tstride] = lanes_tree(tot[r][t]);
}

static float simd_dot(const float *a, const float *b, uint32_t n)
{
    const uint8_t *row = (const uint8_t *)a;
    float out;
    dot_tile(DI_TYPE_F32, &row, 1, n, b, 0, 1, &out, 0, 0, 0);
    return out;
}

static float simd_sum(const float *x, uint32_t n)
{
    float tot[DI_LANES] = {0};
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = n - c0 < DI_CHUNK ? n : c0 + DI_CHUNK;
        vf acc[NV];
        UNROLL for (int j = 0; j < NV; j++)
            acc[j] = vf_zero();
        uint32_t i = c0;
        for (; i + DI_LANES <= end; i += DI_LANES)
            UNROLL for (int j = 0; j < NV; j++)
                acc[j] = vf_add(acc[j], vf_load(x + i + j * VL));
        float lane[DI_LANES];
        UNROLL for (int j = 0; j < NV; j++)
            vf_store(lane + j * VL, acc[j]);
        for (int l = 0; i < end; i++, l++)
            lane[l] = lane[l] + x[i];
        for (int l = 0; l < DI_LANES; l++)
            tot[l] = c0 == 0 ? lane[l] : tot[l] + lane[l];
    }
    return di_lane_tree(tot);
}

/* ---- matrix product ------------------------------------------------------------ */

/* A matrix as the product kernels read it: row r of output column col0 + r
 * starts at data + r * row_bytes. */
typedef struct rows_view {
    const uint8_t *data;
    size_t row_bytes;
    uint32_t n_in, n_out, col0;
    int stream; /* the model's weights (prefetched), not a converted tile */
} rows_view;

/* Rows [0, n_rows) of v against tokens t0..t0+T-1 (few tokens: each weight
 * block is converted once for all T), DIRECT_ROWS rows at a time. */
static DI_INLINE void rows_direct(uint32_t type, const rows_view *v, uint32_t n_rows,
                                  const float *x, uint32_t t0, int T, float *y)
{
    const float *xt = x + (size_t)t0 * v->n_in;
    float *yt = y + (size_t)t0 * v->n_out + v->col0;
    const int R = DIRECT_ROWS;
    uint32_t r = 0;
    for (; R > 1 && r + (uint32_t)R <= n_rows; r += (uint32_t)R) {
        const uint8_t *rows[ROWS_MAX];
        UNROLL for (int i = 0; i < R; i++)
            rows[i] = v->data + (size_t)(r + (uint32_t)i) * v->row_bytes;
        dot_tile(type, rows, R, v->n_in, xt, v->n_in, T, yt + r, 1, v->n_out, v->stream);
    }
    for (; r < n_rows; r++) {
        const uint8_t *row = v->data + (size_t)r * v->row_bytes;
        dot_tile(type, &row, 1, v->n_in, xt, v->n_in, T, yt + r, 1, v->n_out, v->stream);
    }
}

/* For t0 = 0, TOKENS_MAX, ... below n_tokens: CALL(t0, T) with T =
 * min(TOKENS_MAX, n_tokens - t0) a constant in each expansion, so the
 * kernels' loops over T unroll and their accumulators stay in registers. */
#if TOKENS_MAX >= 4
#define TOKEN_GROUP_CASES(CALL, t0) case 3: CALL(t0, 3); break; case 4: CALL(t0, 4); break;
#else
#define TOKEN_GROUP_CASES(CALL, t0) case 3: CALL(t0, 3); break;
#endif
#define FOR_EACH_TOKEN_GROUP(n_tokens, CALL)                                                  \
    for (uint32_t t0_ = 0; t0_ < (n_tokens); t0_ += TOKENS_MAX) {                            \
        switch ((n_tokens) - t0_ < TOKENS_MAX ? (n_tokens) - t0_ : TOKENS_MAX) {             \
        case 1: CALL(t0_, 1); break;                                                         \
        case 2: CALL(t0_, 2); break;                                                         \
        TOKEN_GROUP_CASES(CALL, t0_)                                                         \
        default: break;                                                                      \
        }                                                                                    \
    }

/* All tokens, TOKENS_MAX at a time. */
static DI_INLINE void matmul_direct(uint32_t type, const rows_view *v, uint32_t n_rows,
                                    const float *x, uint32_t n_tokens, float *y)
{
#define DIRECT_GROUP(t0, T) rows_direct(type, v, n_rows, x, t0, T, y)
    FOR_EACH_TOKEN_GROUP(n_tokens, DIRECT_GROUP)
#undef DIRECT_GROUP
}

/* Rows [r, r + R) of a converted tile (float32 rows of n) against T tokens
 * over chunk [c0, end): their lanes go into the running totals tot[r..]. */
static DI_INLINE void tile_chunk(const float *tile, uint32_t r, int R, uint32_t n, uint32_t c0,
                                 uint32_t end, const float *xt, int T, vf tot[][TOKENS_MAX][NV])
{
    const uint8_t *rows[ROWS_MAX];
    vf acc[ROWS_MAX][TOKENS_MAX][NV];
    UNROLL for (int i = 0; i < R; i++)
        rows[i] = (const uint8_t *)(tile + (size_t)(r + (uint32_t)i) * n);
    chunk_lanes(DI_TYPE_F32, rows, R, c0, end, xt, n, T, 0, acc);
    UNROLL for (int i = 0; i < R; i++)
        UNROLL for (int t = 0; t < T; t++)
            UNROLL for (int j = 0; j < NV; j++)
                tot[r + (uint32_t)i][t][j] = c0 == 0 ? acc[i][t][j] : vf_add(tot[r + (uint32_t)i][t][j], acc[i][t][j]);
}

/*
 * yt[t * n_out + r] = canonical dot of tile row r (float32 rows of n, r <
 * rows) with token t of xt (T tokens of n), the arithmetic of dot_tile, in
 * another loop order: chunk by chunk, every row of the tile passes over the
 * tokens' slice of the chunk (T * 4 KiB), which stays in the L1 cache, and
 * the rows' running totals wait in tot between chunks. dot_tile's order
 * (each row pair over the whole length) read the tokens from L2 again for
 * every row pair: prefill ran at about 30% of the multiply-add rate.
 */
static DI_INLINE void tile_tokens(const float *tile, uint32_t rows, uint32_t n, const float *xt, int T,
                                  float *yt, size_t n_out)
{
    vf tot[DI_MATMUL_TILE_ROWS][TOKENS_MAX][NV];
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        const uint32_t end = di_chunk_end(n, c0);
        uint32_t r = 0;
        for (; TILE_ROWS > 1 && r + TILE_ROWS <= rows; r += TILE_ROWS)
            tile_chunk(tile, r, TILE_ROWS, n, c0, end, xt, T, tot);
        for (; r < rows; r++)
            tile_chunk(tile, r, 1, n, c0, end, xt, T, tot);
    }
    for (uint32_t r = 0; r < rows; r++)
        UNROLL for (int t = 0; t < T; t++)
            yt[(size_t)t * n_out + r] = n == 0 ? 0.0f : lanes_tree(tot[r][t]);
}

/* The tile's rows against all tokens, TOKENS_MAX at a time:
 * y[t * n_out + col0 + r]. */
static void tile_product(const float *tile, uint32_t rows, uint32_t n, const float *x, uint32_t n_tokens,
                         float *y, uint32_t n_out, uint32_t col0)
{
#define TILE_GROUP(t0, T) tile_tokens(tile, rows, n, x + (size_t)(t0) * n, T, y + (size_t)(t0) * n_out + col0, n_out)
    FOR_EACH_TOKEN_GROUP(n_tokens, TILE_GROUP)
#undef TILE_GROUP
}

/* A switch on `type` whose case for each supported row of weight_types.h is
 * TYPE_BODY(that type as a constant); the caller defines TYPE_BODY. */
#define TYPE_CASE(name, id, elems, bytes, supported, ...) \
    DI_WT_IF_SUPPORTED(supported, case DI_TYPE_##name: TYPE_BODY(DI_TYPE_##name); break;)
#define FOR_EACH_TYPE(type)                                                              \
    switch (type) {                                                                      \
    DI_WEIGHT_TYPES(TYPE_CASE)                                                           \
    default: break;                                                                      \
    }

/*
 * Few tokens: every weight block is converted in registers and used by all
 * of them at once. Many tokens (prefill): tiles of DI_MATMUL_TILE_ROWS rows
 * are converted once into scratch, then multiplied as float32 rows against
 * the tokens TOKENS_MAX at a time, so each weight is read from memory once
 * per step. Both give every output its own canonical reduction.
 */
static void simd_matmul_rows(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                             uint32_t n_tokens, float *y, float *scratch)
{
    if (n_tokens <= TOKENS_MAX) {
        const rows_view v = {w->data + (size_t)r0 * w->row_bytes, w->row_bytes, w->n_in, w->n_out, r0, 1};
#define TYPE_BODY(T_) matmul_direct(T_, &v, r1 - r0, x, n_tokens, y)
        FOR_EACH_TYPE(w->type)
#undef TYPE_BODY
        return;
    }
    const uint32_t n_in = w->n_in;
    for (uint32_t tile = r0; tile < r1; tile += DI_MATMUL_TILE_ROWS) {
        const uint32_t rows = r1 - tile < DI_MATMUL_TILE_ROWS ? r1 - tile : DI_MATMUL_TILE_ROWS;
        for (uint32_t i = 0; i < rows; i++) {
            const uint8_t *row = w->data + (size_t)(tile + i) * w->row_bytes;
            float *out = scratch + (size_t)i * n_in;
#define TYPE_BODY(T_) dequant_row_typed(T_, row, n_in, out)
            FOR_EACH_TYPE(w->type)
#undef TYPE_BODY
        }
        tile_product(scratch, rows, n_in, x, n_tokens, y, w->n_out, tile);
    }
}
