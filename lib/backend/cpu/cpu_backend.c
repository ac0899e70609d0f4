/*
 * cpu_backend.c — the CPU as a backend (backend.h): the forward pass's state
 * (forward.c) with its thread pool and RoPE tables, and one KV cache per
 * sequence (kv_cache.c), grown as the sequence grows.
 */
#include <stdio.h>
#include <stdlib.h>

#include "lib/backend/backend.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/base/errors.h"
#include "lib/backend/cpu/forward.h"
#include "lib/backend/cpu/kv_cache.h"
#include "kernels/cpu/threadpool.h"
#include "lib/backend/cpu/weight_pack.h"

typedef struct cpu_backend {
    di_backend_params params;
    const di_cpu_ops *ops;   /* the kernel path */
    di_pool *pool;
    di_forward fwd;
    di_kv_shape shape;       /* of every sequence's cache */
    di_kv_cache *caches;     /* [max_sequences] */
    di_forward_row *rows;    /* [max_rows] */
    char info[256];
} cpu_backend;

static void destroy(void *state)
{
    cpu_backend *b = state;
    if (!b)
        return;
    for (uint32_t i = 0; b->caches && i < b->params.max_sequences; i++)
        di_kv_release(&b->caches[i], &b->shape);
    free(b->caches);
    free(b->rows);
    di_forward_release(&b->fwd);
    di_pool_free(b->pool);
    free(b);
}

static di_status create(const di_model *m, const di_backend_params *p, void **out, char *err,
                        size_t err_size)
{
    *out = NULL;
    const di_cpu_ops *ops = NULL;
    di_status st = di_cpu_ops_select((di_cpu_path)p->cpu_path, &ops, err, err_size);
    if (st)
        return st;
    if (p->profile == DI_PROFILE_INTEGER)
        ops = di_cpu_ops_integer(ops);
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory");
    b->params = *p;
    b->ops = ops;
    b->shape = (di_kv_shape){m->n_layer, m->n_head_kv * m->head_dim, p->ctx_len};
    if ((st = di_pool_create(p->threads, &b->pool))) {
        destroy(b);
        return di_error(err, err_size, st, "cannot start %u threads", p->threads);
    }
    if (ops->int_pack_rows)
        di_weights_pack(m, ops, b->pool);
    snprintf(b->info, sizeof b->info, "backend=cpu path=%s%s threads=%u", ops->name,
             p->profile == DI_PROFILE_INTEGER ? " profile=integer" : "", p->threads);
    st = di_forward_init(&b->fwd, m, ops, b->pool, p->ctx_len, p->max_rows);
    b->caches = calloc(p->max_sequences, sizeof *b->caches);
    b->rows = calloc(p->max_rows, sizeof *b->rows);
    if (st || !b->caches || !b->rows) {
        destroy(b);
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for %u sequences of context %u",
                        p->max_sequences, p->ctx_len);
    }
    *out = b;
    return DI_OK;
}

static const char *info(void *state)
{
    return ((cpu_backend *)state)->info;
}

/* The sequence's cache, then the RoPE tables and attention scratch of the
 * forward pass: each grows keeping what it holds, so a failure part way
 * changes no position held. */
static di_status reserve(void *state, uint32_t seq, uint32_t n, uint32_t keep, char *err,
                         size_t err_size)
{
    cpu_backend *b = state;
    if (di_kv_reserve(&b->caches[seq], &b->shape, n, keep))
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY,
                        "out of memory for the KV cache of sequence %u at %u tokens", seq, n);
    if (di_forward_reserve(&b->fwd, n))
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY,
                        "out of memory for the RoPE tables of %u positions", n);
    return DI_OK;
}

static di_status forward(void *state, const di_backend_row *rows, uint32_t n_rows, char *err,
                         size_t err_size)
{
    cpu_backend *b = state;
    if (n_rows > b->params.max_rows)
        return di_error(err, err_size, DI_ERR_INTERNAL, "forward: %u rows, more than %u", n_rows,
                        b->params.max_rows);
    for (uint32_t r = 0; r < n_rows; r++)
        b->rows[r] = (di_forward_row){rows[r].token, rows[r].pos, b->caches[rows[r].seq].layers};
    di_forward_rows(&b->fwd, b->rows, n_rows);
    return DI_OK;
}

static di_status logits(void *state, const uint32_t *row_idx, uint32_t n, float *out, int32_t *greedy,
                        char *err, size_t err_size)
{
    cpu_backend *b = state;
    if (n > b->params.max_logits)
        return di_error(err, err_size, DI_ERR_INTERNAL, "logits: %u rows, more than %u", n,
                        b->params.max_logits);
    const uint32_t n_vocab = b->fwd.model->n_vocab;
    di_forward_logits(&b->fwd, row_idx, n, out);
    for (uint32_t i = 0; i < n; i++)
        greedy[i] = (int32_t)b->ops->argmax(out + (size_t)i * n_vocab, n_vocab);
    return DI_OK;
}

static di_status seq_copy(void *state, uint32_t src, uint32_t dst, uint32_t length, char *err,
                          size_t err_size)
{
    (void)err;
    (void)err_size;
    cpu_backend *b = state;
    di_kv_copy(&b->caches[dst], &b->caches[src], &b->shape, length);
    return DI_OK;
}

static void truncate_seq(void *state, uint32_t seq, uint32_t length)
{
    cpu_backend *b = state;
    if (length == 0) /* an empty sequence gives its memory back */
        di_kv_release(&b->caches[seq], &b->shape);
}

static uint64_t kv_bytes(void *state)
{
    const cpu_backend *b = state;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < b->params.max_sequences; i++)
        sum += di_kv_bytes(&b->caches[i], &b->shape);
    return sum;
}

static const di_backend_ops cpu_backend_ops = {
    DI_BACKEND_OPS_SIZES, "cpu", create, destroy, info, reserve, forward, logits, seq_copy,
    truncate_seq, kv_bytes,
};

const di_backend_ops *di_cpu_backend(void)
{
    return &cpu_backend_ops;
}
