/*
 * simd_attention.h — attention on a SIMD path: one query head
 * (simd_attention_head) and a tile of queries that share their keys and
 * values (simd_attention_tile). Each query's result is that of
 * di_cpu_attention_head, bit for bit: the same canonical dot per score, the
 * same softmax, and per column the same lanes (key j in lane j % 32, in
 * increasing j, chunk by chunk) and lane tree. The tile only changes which
 * loads are shared.
 *
 * Not a normal header: it defines static functions over the vector words of
 * the path that includes it (simd_path.h says how).
 */

/* e[j] = exp(s_j - max s) for the scores s_j = e[j] * scale (soft-capped
 * first when softcap is not 0), j < n; returns their canonical sum. */
static float softmax_weights(float *e, uint32_t n, float scale, float softcap)
{
    uint32_t j = 0;
    for (; j + VL <= n; j += VL)
        vf_store(e + j, vf_mul(vf_load(e + j), vf_set1(scale)));
    for (; j < n; j++)
        e[j] = e[j] * scale;
    if (softcap != 0.0f)
        simd_softcap(e, n, softcap);
    float m = -INFINITY;
    for (j = 0; j < n; j++)
        if (e[j] > m)
            m = e[j];
    for (j = 0; j + VL <= n; j += VL)
        vf_store(e + j, vf_expf(vf_sub(vf_load(e + j), vf_set1(m))));
    for (; j < n; j++)
        e[j] = di_expf(e[j] - m);
    return simd_sum(e, n);
}

static void simd_attention_head(const float *q, const float *k, const float *v, uint32_t kv_stride,
                                uint32_t n_keys, uint32_t head_dim, float scale, float softcap,
                                float *out, float *scratch)
{
    float *e = scratch;                                   /* [n_keys] */
    float *acc = scratch + n_keys;                        /* [DI_LANES][head_dim] */
    float *total = acc + (size_t)DI_LANES * head_dim;     /* [DI_LANES][head_dim] */
    const size_t lanes_size = (size_t)DI_LANES * head_dim;

    for (uint32_t j = 0; j < n_keys; j++)
        e[j] = simd_dot(q, k + (size_t)j * kv_stride, head_dim);
    const float sum = softmax_weights(e, n_keys, scale, softcap);

    for (uint32_t c0 = 0; c0 < n_keys; c0 += DI_CHUNK) {
        const uint32_t end = n_keys - c0 < DI_CHUNK ? n_keys : c0 + DI_CHUNK;
        memset(acc, 0, lanes_size * sizeof(float));
        for (uint32_t jj = c0; jj < end; jj++) {
            float *lane = acc + (size_t)(jj % DI_LANES) * head_dim;
            const float *vj = v + (size_t)jj * kv_stride;
            const vf ej = vf_set1(e[jj]);
            uint32_t d = 0;
            for (; d + VL <= head_dim; d += VL)
                vf_store(lane + d, vf_fma(ej, vf_load(vj + d), vf_load(lane + d)));
            for (; d < head_dim; d++)
                lane[d] = fmaf(e[jj], vj[d], lane[d]);
        }
        if (c0 == 0)
            memcpy(total, acc, lanes_size * sizeof(float));
        else
            simd_add(total, total, acc, lanes_size);
    }
    /* the lane tree for every d at once: lane l += lane l + step */
    for (uint32_t step = DI_LANES / 2; step >= 1; step /= 2)
        for (uint32_t l = 0; l < step; l++)
            simd_add(total + (size_t)l * head_dim, total + (size_t)l * head_dim,
                            total + (size_t)(l + step) * head_dim, head_dim);
    uint32_t d = 0;
    for (; d + VL <= head_dim; d += VL)
        vf_store(out + d, vf_div(vf_load(total + d), vf_set1(sum)));
    for (; d < head_dim; d++)
        out[d] = total[d] / sum;
}

/* ---- a tile of queries ------------------------------------------------------------ */

/* Queries whose value sums are held in registers at once, for a block of
 * ATT_VECS vectors of columns: ATT_QUERIES x ATT_VECS accumulators, the
 * ATT_VECS words of a value row and a weight fit the register file. */
#if VL == 16
#define ATT_QUERIES 12
#else
#define ATT_QUERIES 6
#endif
#define ATT_VECS 2
#define ATT_COLS (ATT_VECS * VL)

/* Key and value rows are a page or more apart (a row of the cache holds every
 * KV head), where the hardware prefetchers stop: rows this far ahead are
 * fetched by hand. */
#define ATT_KEYS_AHEAD 6

/* The cache lines of n floats from p. */
static DI_INLINE void prefetch_floats(const float *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 64 / sizeof(float))
        __builtin_prefetch(p + i);
}

/* out[t * ne] = canonical dot of key rows[0..R) with x + t * hd, t < T, one
 * dot_tile call with R and T as constants. */
#define SCORES_T(RR)                                                                   \
    switch (T) {                                                                       \
    case 1: dot_tile(DI_TYPE_F32, rows, RR, hd, x, hd, 1, out, 1, ne, 0); break;       \
    case 2: dot_tile(DI_TYPE_F32, rows, RR, hd, x, hd, 2, out, 1, ne, 0); break;       \
    default: dot_tile(DI_TYPE_F32, rows, RR, hd, x, hd, 3, out, 1, ne, 0); break;      \
    }

static void score_block(const uint8_t *const *rows, int R, uint32_t hd, const float *x, int T,
                        float *out, size_t ne)
{
#if ROWS_MAX >= 3
    if (R == 3) {
        SCORES_T(3)
    } else if (R == 2) {
        SCORES_T(2)
    } else
#endif
    {
        (void)R;
        SCORES_T(1)
    }
}

/* e[qi * ne + j] = dot(query qi, key j) for every query qi = row * n_heads
 * + head of the tile and every key j < n_keys (a row's keys past its own are
 * computed too and never read). Keys three at a time (ROWS_MAX), each read
 * once for every query of the tile. */
static void tile_scores(const di_attn_tile *t, uint32_t n_keys, float *e, size_t ne)
{
    const uint32_t hd = t->head_dim;
    for (uint32_t j = 0; j < n_keys; j += ROWS_MAX) {
        const int R = n_keys - j < ROWS_MAX ? (int)(n_keys - j) : ROWS_MAX;
        for (uint32_t a = j + ATT_KEYS_AHEAD; a < j + ATT_KEYS_AHEAD + (uint32_t)R && a < n_keys; a++)
            prefetch_floats(t->k + (size_t)a * t->kv_stride, hd);
        const uint8_t *rows[ROWS_MAX];
        for (int r = 0; r < R; r++)
            rows[r] = (const uint8_t *)(t->k + (size_t)(j + (uint32_t)r) * t->kv_stride);
        for (uint32_t row = 0; row < t->n_rows; row++)
            for (uint32_t g = 0; g < t->n_heads; g += 3) {
                const int T = t->n_heads - g < 3 ? (int)(t->n_heads - g) : 3;
                score_block(rows, R, hd, t->q + row * t->q_stride + (size_t)g * hd, T,
                            e + (size_t)(row * t->n_heads + g) * ne + j, ne);
            }
    }
}

/*
 * lanes[(l * Q + q) * ATT_COLS + c] = lane l of column d0 + c of query q's
 * value sum (its total over the chunks), for the Q queries whose weights are
 * e_q[j] for keys j < nk[q]. Every key below nk_lo counts for every query;
 * keys from nk_lo to nk_hi for those whose nk is above them. Per lane, its
 * keys (j = l, l + 32, ... of each chunk) are in increasing order, each one
 * fma per query and column, as in di_cpu_attention_head.
 */
static DI_INLINE void value_lanes(const di_attn_tile *t, const int Q, float *const *e_q,
                                  const uint32_t *nk, uint32_t nk_lo, uint32_t nk_hi, uint32_t d0,
                                  float *lanes)
{
    for (uint32_t l = 0; l < DI_LANES; l++) {
        float *lane = lanes + (size_t)l * Q * ATT_COLS;
        for (uint32_t c0 = 0; c0 < nk_hi; c0 += DI_CHUNK) {
            const uint32_t end = di_chunk_end(nk_hi, c0), all = end < nk_lo ? end : nk_lo;
            vf acc[ATT_QUERIES][ATT_VECS];
            UNROLL for (int q = 0; q < Q; q++)
                UNROLL for (int c = 0; c < ATT_VECS; c++)
                    acc[q][c] = vf_zero();
            uint32_t j = c0 + l;
            for (; j < all; j += DI_LANES) {
                const float *vj = t->v + (size_t)j * t->kv_stride + d0;
                if (j + 2 * DI_LANES < end)
                    prefetch_floats(vj + (size_t)2 * DI_LANES * t->kv_stride, ATT_COLS);
                vf vv[ATT_VECS];
                UNROLL for (int c = 0; c < ATT_VECS; c++)
                    vv[c] = vf_load(vj + c * VL);
                UNROLL for (int q = 0; q < Q; q++) {
                    const vf w = vf_set1(e_q[q][j]);
                    UNROLL for (int c = 0; c < ATT_VECS; c++)
                        acc[q][c] = vf_fma(w, vv[c], acc[q][c]);
                }
            }
            for (; j < end; j += DI_LANES) {
                const float *vj = t->v + (size_t)j * t->kv_stride + d0;
                UNROLL for (int q = 0; q < Q; q++)
                    if (j < nk[q]) {
                        const vf w = vf_set1(e_q[q][j]);
                        UNROLL for (int c = 0; c < ATT_VECS; c++)
                            acc[q][c] = vf_fma(w, vf_load(vj + c * VL), acc[q][c]);
                    }
            }
            /* A query without keys in this chunk adds +0: no lane total is -0
             * (each starts from +0 and adds terms), so its bits stay. */
            UNROLL for (int q = 0; q < Q; q++)
                UNROLL for (int c = 0; c < ATT_VECS; c++) {
                    float *p = lane + (size_t)q * ATT_COLS + c * VL;
                    vf_store(p, c0 == 0 ? acc[q][c] : vf_add(vf_load(p), acc[q][c]));
                }
        }
    }
}

/* value_lanes with Q as a constant, 1 <= Q <= ATT_QUERIES */
static void value_lanes_q(const di_attn_tile *t, int Q, float *const *e_q, const uint32_t *nk,
                          uint32_t nk_lo, uint32_t nk_hi, uint32_t d0, float *lanes)
{
#define VALUE_Q(QQ) \
    case QQ: value_lanes(t, QQ, e_q, nk, nk_lo, nk_hi, d0, lanes); break;
    switch (Q) {
        VALUE_Q(1) VALUE_Q(2) VALUE_Q(3) VALUE_Q(4) VALUE_Q(5)
#if ATT_QUERIES > 6
        VALUE_Q(6) VALUE_Q(7) VALUE_Q(8) VALUE_Q(9) VALUE_Q(10) VALUE_Q(11)
#endif
    default: value_lanes(t, ATT_QUERIES, e_q, nk, nk_lo, nk_hi, d0, lanes); break;
    }
#undef VALUE_Q
}

static void simd_attention_tile(const di_attn_tile *t, float *scratch)
{
    const uint32_t hd = t->head_dim, n_q = t->n_rows * t->n_heads;
    if (hd % ATT_COLS) { /* column blocks would not be whole: one query at a time */
        for (uint32_t qi = 0; qi < n_q; qi++) {
            const size_t at = di_attn_query_at(t, qi);
            simd_attention_head(t->q + at, t->k, t->v, t->kv_stride, t->n_keys0 + qi / t->n_heads,
                                hd, t->scale, t->softcap, t->out + at, scratch);
        }
        return;
    }
    const uint32_t n_keys = t->n_keys0 + t->n_rows - 1;
    const size_t ne = n_keys;
    float *e = scratch;                                          /* [n_q][ne] */
    float *lanes = scratch + (size_t)DI_ATTN_TILE_QUERIES * ne; /* [DI_LANES][Q][ATT_COLS] */
    float sum[DI_ATTN_TILE_QUERIES];
    uint32_t nk[DI_ATTN_TILE_QUERIES];
    float *e_q[DI_ATTN_TILE_QUERIES];

    tile_scores(t, n_keys, e, ne);
    for (uint32_t qi = 0; qi < n_q; qi++) {
        e_q[qi] = e + qi * ne;
        nk[qi] = t->n_keys0 + qi / t->n_heads;
        sum[qi] = softmax_weights(e_q[qi], nk[qi], t->scale, t->softcap);
    }
    for (uint32_t q0 = 0; q0 < n_q; q0 += ATT_QUERIES) {
        const uint32_t Q = n_q - q0 < ATT_QUERIES ? n_q - q0 : ATT_QUERIES;
        for (uint32_t d0 = 0; d0 < hd; d0 += ATT_COLS) {
            value_lanes_q(t, (int)Q, e_q + q0, nk + q0, nk[q0], nk[q0 + Q - 1], d0, lanes);
            /* the lane tree for every query and column at once: lane l += lane l + step */
            const size_t lane_size = (size_t)Q * ATT_COLS;
            for (uint32_t step = DI_LANES / 2; step >= 1; step /= 2)
                for (uint32_t l = 0; l < step; l++)
                    simd_add(lanes + l * lane_size, lanes + l * lane_size, lanes + (l + step) * lane_size,
                             lane_size);
            for (uint32_t q = 0; q < Q; q++) {
                const uint32_t qi = q0 + q;
                float *out = t->out + di_attn_query_at(t, qi) + d0;
                for (int c = 0; c < ATT_VECS; c++)
                    vf_store(out + c * VL, vf_div(vf_load(lanes + q * ATT_COLS + c * VL), vf_set1(sum[qi])));
            }
        }
    }
}
