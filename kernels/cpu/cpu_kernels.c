/*
 * cpu_kernels.c — the CPU backend in portable C.
 *
 * The reduction loops are written lane by lane (32 independent accumulators),
 * which a compiler may turn into SIMD without changing a bit: each lane still
 * adds its terms in increasing order with fmaf, and vectorising independent
 * lanes reorders nothing. On x86-64 the hot reductions are compiled several
 * times (target_clones) so CPUs with FMA use it instead of the libm fmaf
 * call; every clone computes the same correctly rounded operations.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/common/int_dot.h"

#include <string.h>

#include "kernels/cpu/cpu_clones.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/dequant.h"
#include "kernels/common/numerics.h"


/* ---- canonical reductions ----------------------------------------------- */

/* Adds a chunk's lane vector into the running lanes; the first chunk's vector
 * is taken as it is (so a -0 lane stays -0, as the contract says). */
static inline void combine_chunk(float *total, const float *lane, int first)
{
    for (int l = 0; l < DI_LANES; l++)
        total[l] = first ? lane[l] : total[l] + lane[l];
}

/* The full 32-term blocks of one chunk, lane by lane. Kept apart from the
 * tail so the lanes have only constant indexes and can live in registers. */
static inline void dot_blocks(const float *a, const float *b, uint32_t n_blocks, float *lane_out)
{
    float lane[DI_LANES] = {0};
    for (uint32_t k = 0; k < n_blocks; k++, a += DI_LANES, b += DI_LANES)
        for (int l = 0; l < DI_LANES; l++)
            lane[l] = fmaf(a[l], b[l], lane[l]);
    memcpy(lane_out, lane, sizeof lane);
}

DI_CLONES float di_cpu_dot(const float *a, const float *b, uint32_t n)
{
    float total[DI_LANES] = {0};
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        uint32_t end = n - c0 < DI_CHUNK ? n : c0 + DI_CHUNK;
        float lane[DI_LANES];
        const uint32_t n_blocks = (end - c0) / DI_LANES;
        dot_blocks(a + c0, b + c0, n_blocks, lane);
        for (uint32_t i = c0 + n_blocks * DI_LANES, l = 0; i < end; i++, l++)
            lane[l] = fmaf(a[i], b[i], lane[l]);
        combine_chunk(total, lane, c0 == 0);
    }
    return di_lane_tree(total);
}

DI_CLONES float di_cpu_sum(const float *x, uint32_t n)
{
    float total[DI_LANES] = {0};
    for (uint32_t c0 = 0; c0 < n; c0 += DI_CHUNK) {
        uint32_t end = n - c0 < DI_CHUNK ? n : c0 + DI_CHUNK;
        float lane[DI_LANES] = {0};
        uint32_t i = c0;
        for (; i + DI_LANES <= end; i += DI_LANES)
            for (int l = 0; l < DI_LANES; l++)
                lane[l] = lane[l] + x[i + l];
        for (int l = 0; i < end; i++, l++)
            lane[l] = lane[l] + x[i];
        combine_chunk(total, lane, c0 == 0);
    }
    return di_lane_tree(total);
}

/* ---- weights ------------------------------------------------------------ */

void di_cpu_dequant_row(const di_weight *w, uint32_t row, float *out)
{
    di_dequant_row(w->type, w->data + (size_t)row * w->row_bytes, w->n_in, out);
}

/* ---- elementwise and row operations ------------------------------------- */

void di_cpu_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out)
{
    const float scale = di_rms_scale(di_cpu_dot(x, x, n), n, eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = (x[i] * scale) * w[i];
}

void di_cpu_rope(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot,
                 di_rope_pairing pairing, const float *cos_t, const float *sin_t)
{
    const uint32_t half = n_rot / 2;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * head_dim;
        for (uint32_t i = 0; i < half; i++) {
            const uint32_t a = pairing == DI_ROPE_NEOX ? i : 2 * i;
            const uint32_t b = pairing == DI_ROPE_NEOX ? i + half : 2 * i + 1;
            const float x0 = x[a], x1 = x[b];
            const float c = cos_t[i], s = sin_t[i];
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

/* ---- matrix product ------------------------------------------------------ */

/* Scalar path: each row is converted to float32 once, then dotted with every
 * token. */
void di_cpu_matmul_rows(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                        uint32_t n_tokens, float *y, float *scratch)
{
    const uint32_t n_in = w->n_in, n_out = w->n_out;
    for (uint32_t r = r0; r < r1; r++) {
        di_cpu_dequant_row(w, r, scratch);
        for (uint32_t t = 0; t < n_tokens; t++)
            y[(size_t)t * n_out + r] = di_cpu_dot(scratch, x + (size_t)t * n_in, n_in);
    }
}

typedef struct matmul_job {
    const di_cpu_ops *ops;
    const di_weight *w;
    const float *x;
    uint32_t n_tokens;
    float *y;
    float *scratch;
    void *qa; /* the quantized activations of an integer product */
} matmul_job;

static void matmul_range(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    const matmul_job *job = ctx;
    float *scratch = job->scratch + (size_t)thread * DI_MATMUL_SCRATCH(job->w->n_in);
    if (job->qa)
        job->ops->int_rows(job->w, begin, end, job->qa, job->y, scratch);
    else
        job->ops->matmul_rows(job->w, begin, end, job->x, job->n_tokens, job->y, scratch);
}

static void quantize_range(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const matmul_job *job = ctx;
    job->ops->int_quantize(job->w, job->x, job->qa, begin, end);
}

void di_cpu_matmul(di_pool *pool, const di_cpu_ops *ops, const di_weight *w, const float *x,
                   uint32_t n_tokens, float *y, float *scratch, void *qa, int qa_holds_x)
{
    matmul_job job = {ops, w, x, n_tokens, y, scratch, NULL};
    if (qa && ops->int_rows && di_int_type(w->type)) { /* the integer profile (cpu_int.h) */
        job.qa = qa;
        di_qa held = {0};
        if (qa_holds_x)
            held = *(const di_qa *)qa;
        const uint32_t units = ops->int_layout(w, n_tokens, qa);
        /* x quantized in the same layout already: quantizing it again would
         * write the same bits */
        const di_qa *now = qa;
        const int same = qa_holds_x && held.n == now->n && held.n_tokens == now->n_tokens &&
                         held.grouped == now->grouped && held.order == now->order;
        /* its units (token groups; fewer tokens are one) on the threads: each writes its own */
        if (!same)
            di_pool_run(pool, units, quantize_range, &job);
    }
    di_pool_run(pool, w->n_out, matmul_range, &job);
}

/* ---- attention ------------------------------------------------------------ */

/* acc[l][d] += e_j * v_j[d] for the keys of one chunk; lane l = j % 32. */
DI_CLONES static void accumulate_values(const float *e, const float *v, uint32_t kv_stride,
                                        uint32_t j0, uint32_t j1, uint32_t head_dim, float *acc)
{
    for (uint32_t j = j0; j < j1; j++) {
        float *lane = acc + (size_t)(j % DI_LANES) * head_dim;
        const float *vj = v + (size_t)j * kv_stride;
        const float ej = e[j];
        for (uint32_t d = 0; d < head_dim; d++)
            lane[d] = fmaf(ej, vj[d], lane[d]);
    }
}

void di_cpu_attention_head(const float *q, const float *k, const float *v, uint32_t kv_stride,
                           uint32_t n_keys, uint32_t head_dim, float scale, float softcap,
                           float *out, float *scratch)
{
    float *e = scratch;                                   /* [n_keys] */
    float *acc = scratch + n_keys;                        /* [DI_LANES][head_dim] */
    float *total = acc + (size_t)DI_LANES * head_dim;     /* [DI_LANES][head_dim] */

    float m = -INFINITY;
    for (uint32_t j = 0; j < n_keys; j++) {
        e[j] = di_cpu_dot(q, k + (size_t)j * kv_stride, head_dim) * scale;
        if (softcap != 0.0f)
            e[j] = di_softcap(e[j], softcap);
        if (e[j] > m)
            m = e[j];
    }
    for (uint32_t j = 0; j < n_keys; j++)
        e[j] = di_expf(e[j] - m);
    const float sum = di_cpu_sum(e, n_keys);

    for (uint32_t c0 = 0; c0 < n_keys; c0 += DI_CHUNK) {
        uint32_t end = n_keys - c0 < DI_CHUNK ? n_keys : c0 + DI_CHUNK;
        memset(acc, 0, (size_t)DI_LANES * head_dim * sizeof(float));
        accumulate_values(e, v, kv_stride, c0, end, head_dim, acc);
        for (size_t i = 0; i < (size_t)DI_LANES * head_dim; i++)
            total[i] = c0 == 0 ? acc[i] : total[i] + acc[i];
    }
    for (uint32_t d = 0; d < head_dim; d++) {
        float lanes[DI_LANES];
        for (int l = 0; l < DI_LANES; l++)
            lanes[l] = total[(size_t)l * head_dim + d];
        out[d] = di_lane_tree(lanes) / sum;
    }
}

void di_cpu_attention_tile(const di_attn_tile *t, float *scratch)
{
    for (uint32_t qi = 0; qi < t->n_rows * t->n_heads; qi++) {
        const size_t at = di_attn_query_at(t, qi);
        di_cpu_attention_head(t->q + at, t->k, t->v, t->kv_stride, t->n_keys0 + qi / t->n_heads, t->head_dim,
                              t->scale, t->softcap, t->out + at, scratch);
    }
}

/* ---- greedy ---------------------------------------------------------------- */

uint32_t di_cpu_argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    int found = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            continue; /* NaN */
        if (!found || x[i] > x[best]) {
            best = i;
            found = 1;
        }
    }
    return best;
}

/* ---- elementwise ------------------------------------------------------------ */

DI_CLONES void di_cpu_silu_mul(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gate[i] = di_silu(gate[i]) * up[i];
}

DI_CLONES void di_cpu_gelu_mul(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gate[i] = di_gelu_tanh(gate[i]) * up[i];
}

void di_cpu_softcap(float *x, size_t n, float cap)
{
    for (size_t i = 0; i < n; i++)
        x[i] = di_softcap(x[i], cap);
}

void di_cpu_add(float *dst, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] + b[i];
}

const di_cpu_ops di_cpu_ops_scalar = {
    .path = DI_CPU_PATH_SCALAR,
    .name = "scalar",
    .dot = di_cpu_dot,
    .sum = di_cpu_sum,
    .matmul_rows = di_cpu_matmul_rows,
    .rmsnorm = di_cpu_rmsnorm,
    .rope = di_cpu_rope,
    .attention_head = di_cpu_attention_head,
    .attention_tile = di_cpu_attention_tile,
    .silu_mul = di_cpu_silu_mul,
    .gelu_mul = di_cpu_gelu_mul,
    .softcap = di_cpu_softcap,
    .add = di_cpu_add,
    .argmax = di_cpu_argmax,
};
