/*
 * weight_pack.c — the model's packed weights (kernels/cpu/cpu_int.h "Packed
 * weights"), made once, for the sessions whose kernels read them.
 *
 * Every matrix of a type with a packed layout gets a copy in one buffer
 * owned by the model (freed by di_model_free); its di_weight then points to
 * it. The values are the file's, so the results are the same bits with or
 * without the copy: if the memory for it cannot be had, the kernels read
 * the file as before. The copy costs about the size of those matrices in
 * memory; the file's pages of the packed matrices are released afterwards
 * (they stay in the page cache, for whatever else reads them).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cpu/cpu_int.h"
#include "lib/backend/cpu/weight_pack.h"

/* Calls fn for each matrix of the model a session multiplies with (the
 * output matrix and each layer's), in a fixed order. */
static void each_matrix(di_model *m, void (*fn)(di_weight *w, void *ctx), void *ctx)
{
    const di_tensor_spec *specs = di_tensor_specs();
    for (uint32_t il = 0; il < m->n_layer; il++)
        for (int role = 0; role < DI_T_COUNT; role++) {
            di_weight *w = (di_weight *)(uintptr_t)di_layer_matrix(&m->layers[il], (di_tensor_role)role);
            if (specs[role].kind == DI_MATRIX && w->data)
                fn(w, ctx);
        }
    fn(&m->output, ctx);
}

static size_t padded(size_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

typedef struct pack_job {
    const di_cpu_ops *ops;
    di_pool *pool;
    size_t bytes;  /* the copies' total, first */
    uint8_t *next; /* then where the next matrix's copy goes */
} pack_job;

static void add_size(di_weight *w, void *ctx)
{
    pack_job *job = ctx;
    job->bytes += padded((size_t)w->n_out * job->ops->int_packed_row_bytes(w->type, w->n_in));
}

typedef struct rows_job {
    const di_cpu_ops *ops;
    const di_weight *w;
    uint8_t *dst;
    size_t stride;
} rows_job;

static void pack_range(void *ctx, uint32_t begin, uint32_t end, uint32_t thread)
{
    (void)thread;
    const rows_job *job = ctx;
    job->ops->int_pack_rows(job->w, begin, end, job->dst, job->stride);
}

/* The file's pages under [p, p + n), whole pages only, out of this
 * process's memory (a private mapping never written: they come back from
 * the file if read again). */
static void release_pages(const uint8_t *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = ((uintptr_t)p + page - 1) / page * page, last = ((uintptr_t)p + n) / page * page;
    if (last > first)
        madvise((void *)first, last - first, MADV_DONTNEED);
}

static void pack_one(di_weight *w, void *ctx)
{
    pack_job *job = ctx;
    const size_t stride = job->ops->int_packed_row_bytes(w->type, w->n_in);
    if (!stride)
        return; /* a type without a packed layout: read from the file */
    rows_job rows = {job->ops, w, job->next, stride};
    di_pool_run(job->pool, w->n_out, pack_range, &rows);
    w->packed = job->next;
    w->packed_row_bytes = stride;
    job->next += padded((size_t)w->n_out * stride);
    release_pages(w->data, (size_t)w->n_out * w->row_bytes);
}

size_t di_weights_pack(const di_model *model, const di_cpu_ops *ops, di_pool *pool)
{
    /* The one place a model changes after loading: before the first
     * session that reads the copies runs, under the model's lock. */
    di_model *m = (di_model *)(uintptr_t)model;
    pthread_mutex_lock(&m->pack_lock);
    if (!m->pack_tried) {
        m->pack_tried = 1;
        pack_job job = {ops, pool, 0, NULL};
        each_matrix(m, add_size, &job);
        m->pack_mem = job.bytes ? aligned_alloc(64, job.bytes + DI_INT_PACK_SLACK) : NULL;
        if (m->pack_mem) {
            memset(m->pack_mem + job.bytes, 0, DI_INT_PACK_SLACK);
            job.next = m->pack_mem;
            each_matrix(m, pack_one, &job);
            m->pack_bytes = job.bytes;
        }
    }
    const size_t bytes = m->pack_bytes;
    pthread_mutex_unlock(&m->pack_lock);
    return bytes;
}
