/*
 * cuda_backend.cu — the plugin's entry (lib/backend/backend.h): device selection,
 * uploads, the RoPE tables, the KV caches, and the forward, logits and copy
 * calls the session makes. Linked with the static CUDA runtime, so the plugin needs
 * only the driver (libcuda.so.1) at run time; without a driver or a device,
 * create() reports DI_ERR_BACKEND_UNAVAILABLE and nothing else happens.
 * The device profile differs only in its matrix products (cuda_blas.cu).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/cuda/cuda_blas.cuh"
#include "lib/backend/cuda/cuda_state.cuh"
#include "kernels/common/dequant_blocks.h"
#include "lib/base/growable.h"
#include "kernels/common/int_dot.h"
#include "kernels/common/rope_tables.h"

/* The session's rows are copied to the device as they are. */
static_assert(sizeof(dc_row) == sizeof(di_backend_row) && offsetof(dc_row, token) == offsetof(di_backend_row, token) &&
                  offsetof(dc_row, pos) == offsetof(di_backend_row, pos) &&
                  offsetof(dc_row, seq) == offsetof(di_backend_row, seq),
              "dc_row must have di_backend_row's layout");

/* ---- errors ------------------------------------------------------------------ */

/* A CUDA error as a status: out of memory, or a device failure. */
static di_status cuda_fail(char *err, size_t err_size, cudaError_t e, const char *what)
{
    return di_error(err, err_size, e == cudaErrorMemoryAllocation ? DI_ERR_OUT_OF_MEMORY : DI_ERR_INTERNAL,
                   "CUDA: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define TRY(call, what)                                          \
    do {                                                         \
        cudaError_t e_ = (call);                                 \
        if (e_ != cudaSuccess)                                   \
            return cuda_fail(err, err_size, e_, what);           \
    } while (0)

/* ---- allocations --------------------------------------------------------------- */

static cudaError_t dev_alloc(dc_state *s, size_t bytes, void **out)
{
    *out = NULL;
    if (!DI_GROW(s->allocations, s->n_allocations, s->cap_allocations, 1, 64))
        return cudaErrorMemoryAllocation;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e == cudaSuccess)
        s->allocations[s->n_allocations++] = *out;
    return e;
}

static cudaError_t dev_floats(dc_state *s, size_t n, float **out)
{
    return dev_alloc(s, n * sizeof(float), (void **)out);
}

/* A host vector of n floats in device memory; NULL stays NULL. */
static cudaError_t upload_floats(dc_state *s, const float *host, size_t n, const float **out)
{
    *out = NULL;
    if (!host)
        return cudaSuccess;
    float *d = NULL;
    cudaError_t e = dev_floats(s, n, &d);
    if (e == cudaSuccess)
        e = cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
    *out = d;
    return e;
}

/* The weight's bytes are at the same offset in the device copy of the file. */
static dc_weight device_weight(const dc_state *s, const di_weight *w)
{
    dc_weight d;
    d.data = s->file + (w->data - (const uint8_t *)s->model->map);
    d.type = w->type;
    d.n_in = w->n_in;
    d.n_out = w->n_out;
    d.row_bytes = w->row_bytes;
    return d;
}

/* ---- creation ---------------------------------------------------------------------- */

static di_status pick_device(dc_state *s, int ordinal, char *err, size_t err_size)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return di_error(err, err_size, DI_ERR_BACKEND_UNAVAILABLE,
                       "the CUDA backend found no usable driver or device: cudaGetDeviceCount: %s (%s); "
                       "it needs the NVIDIA driver (libcuda.so.1) and a GPU of compute capability 8.0 or newer",
                       cudaGetErrorString(e), cudaGetErrorName(e));
    if (count == 0)
        return di_error(err, err_size, DI_ERR_BACKEND_UNAVAILABLE, "the CUDA backend found no CUDA device");
    if (ordinal >= count)
        return di_error(err, err_size, DI_ERR_BACKEND_UNAVAILABLE,
                       "CUDA device %d does not exist (%d device%s found)", ordinal, count, count == 1 ? "" : "s");
    cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
    if (prop.major < 8)
        return di_error(err, err_size, DI_ERR_BACKEND_UNAVAILABLE,
                       "CUDA device %d (%s) has compute capability %d.%d; the plugin is built for 8.0 and newer",
                       ordinal, prop.name, prop.major, prop.minor);
    TRY(cudaSetDevice(ordinal), "cudaSetDevice");
    s->device = ordinal;
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    char cublas[32] = "unused";
    if (s->params.profile == DI_PROFILE_DEVICE)
        snprintf(cublas, sizeof cublas, "%zu", dc_blas_version());
    snprintf(s->info, sizeof s->info,
             "backend=cuda profile=%s gpu=%.100s sm_count=%d cc=%d.%d driver=%d runtime=%d "
             "cublas=%s cudnn=unused",
             s->params.profile == DI_PROFILE_DEVICE    ? "device"
             : s->params.profile == DI_PROFILE_INTEGER ? "integer"
                                                       : "portable",
             prop.name,
             prop.multiProcessorCount, prop.major, prop.minor, driver, runtime, cublas);
    return DI_OK;
}

/* The model files on the devices: one copy per model and device, which
 * every session of that model on that device reads; the first session
 * uploads it, the last one frees it. Beyond FILE_COPIES pairs a session
 * keeps a copy of its own. */
#define FILE_COPIES 16
static struct file_copy {
    const di_model *model;
    int device;
    uint8_t *bytes;
    unsigned sessions;
} file_copies[FILE_COPIES];
static pthread_mutex_t file_copies_lock = PTHREAD_MUTEX_INITIALIZER;

/* The file's bytes on the device, then DC_FILE_SLACK zero bytes (read past
 * a word near the end, never used). */
static cudaError_t copy_file(const di_model *m, uint8_t **out)
{
    static const uint8_t zeros[DC_FILE_SLACK] = {0};
    *out = NULL;
    cudaError_t e = cudaMalloc((void **)out, m->map_size + DC_FILE_SLACK);
    if (e == cudaSuccess)
        e = cudaMemcpy(*out + m->map_size, zeros, DC_FILE_SLACK, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(*out, m->map, m->map_size, cudaMemcpyHostToDevice);
    if (e != cudaSuccess && *out) {
        cudaFree(*out);
        *out = NULL;
    }
    return e;
}

/* s->file: the shared copy of s's model on s's device, made when there is
 * none; a copy of s's own (s->own_file) when the table is full. */
static cudaError_t share_file(dc_state *s)
{
    pthread_mutex_lock(&file_copies_lock);
    struct file_copy *free_slot = NULL;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < FILE_COPIES && !s->file; i++) {
        struct file_copy *c = &file_copies[i];
        if (c->sessions && c->model == s->model && c->device == s->device) {
            c->sessions++;
            s->file = c->bytes;
        } else if (!c->sessions && !free_slot) {
            free_slot = c;
        }
    }
    if (!s->file) {
        e = copy_file(s->model, &s->file);
        if (e == cudaSuccess && free_slot)
            *free_slot = (struct file_copy){s->model, s->device, s->file, 1};
        s->own_file = e == cudaSuccess && !free_slot;
    }
    pthread_mutex_unlock(&file_copies_lock);
    return e;
}

/* Lets go of s->file: the copy goes when its last session does. */
static void release_file(dc_state *s)
{
    if (!s->file)
        return;
    if (s->own_file) {
        cudaFree(s->file);
        return;
    }
    pthread_mutex_lock(&file_copies_lock);
    for (int i = 0; i < FILE_COPIES; i++) {
        struct file_copy *c = &file_copies[i];
        if (c->sessions && c->bytes == s->file && --c->sessions == 0) {
            cudaFree(c->bytes);
            *c = (struct file_copy){NULL, 0, NULL, 0};
        }
    }
    pthread_mutex_unlock(&file_copies_lock);
}

static di_status upload_model(dc_state *s, char *err, size_t err_size)
{
    const di_model *m = s->model;
    TRY(share_file(s), "model file");
    s->tok_embd = device_weight(s, &m->tok_embd);
    s->output = device_weight(s, &m->output);
    TRY(upload_floats(s, m->output_norm, m->n_embd, &s->output_norm), "output norm");
    s->layers = (dc_layer *)calloc(m->n_layer, sizeof *s->layers);
    if (!s->layers)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory");
    const di_tensor_spec *specs = di_tensor_specs();
    for (uint32_t il = 0; il < m->n_layer; il++) {
        const di_layer *h = &m->layers[il];
        dc_layer *d = &s->layers[il];
        for (int r = 0; r < DI_T_COUNT; r++) {
            const di_tensor_role role = (di_tensor_role)r;
            if (specs[r].kind == DI_MATRIX)
                d->mat[r] = device_weight(s, di_layer_matrix(h, role));
            else
                TRY(upload_floats(s, di_layer_vector(h, role), di_model_dim(m, specs[r].n_in), &d->vec[r]),
                    "norm weights and biases");
        }
    }
    return DI_OK;
}

/* The RoPE tables of every position of the context, computed on the host as
 * the CPU backend computes them (rope_tables.h), then uploaded. */
static di_status upload_rope_tables(dc_state *s, char *err, size_t err_size)
{
    const di_model *m = s->model;
    const uint32_t ctx_len = s->params.ctx_len;
    const size_t table = (size_t)ctx_len * (m->n_rot / 2);
    float *host_cos = (float *)malloc((table ? table : 1) * sizeof(float));
    float *host_sin = (float *)malloc((table ? table : 1) * sizeof(float));
    cudaError_t e = host_cos && host_sin ? cudaSuccess : cudaErrorMemoryAllocation;
    for (uint32_t set = 0; e == cudaSuccess && set < m->n_rope_sets; set++) {
        di_rope_fill_tables(m->n_rot, di_model_rope_set(m, set, ctx_len), 0, ctx_len, host_cos, host_sin);
        const float *c = NULL, *sn = NULL;
        e = upload_floats(s, host_cos, table, &c);
        if (e == cudaSuccess)
            e = upload_floats(s, host_sin, table, &sn);
        s->rope_cos[set] = (float *)c;
        s->rope_sin[set] = (float *)sn;
    }
    free(host_cos);
    free(host_sin);
    TRY(e, "RoPE tables");
    return DI_OK;
}

static di_status alloc_buffers(dc_state *s, char *err, size_t err_size)
{
    const di_model *m = s->model;
    const di_backend_params *p = &s->params;
    const size_t rows = p->max_rows;
    const size_t kv_dim = (size_t)m->n_head_kv * m->head_dim;
    const size_t cache = (size_t)p->max_sequences * m->n_layer * p->ctx_len * kv_dim;
    s->cache.n_layer = m->n_layer;
    s->cache.ctx_len = p->ctx_len;
    s->cache.kv_dim = (uint32_t)kv_dim;
    TRY(dev_floats(s, cache, &s->cache.k), "KV cache");
    TRY(dev_floats(s, cache, &s->cache.v), "KV cache");
    size_t widest = 0; /* every product's input is an activation row */
    for (int a = 0; a < DI_ACT_COUNT; a++) {
        const size_t width = di_model_dim(m, di_act_width((di_act)a));
        widest = width > widest ? width : widest;
        TRY(dev_floats(s, rows * width, &s->act[a]), "activations");
    }
    if (p->profile == DI_PROFILE_INTEGER) {
        TRY(dev_alloc(s, rows * widest, (void **)&s->qa.codes), "quantized activations");
        TRY(dev_floats(s, rows * (widest / DI_QA_BLOCK), &s->qa.scales), "quantized activations");
        TRY(dev_alloc(s, rows * (widest / DI_QA_HALF) * sizeof(int16_t), (void **)&s->qa.sums),
            "quantized activations");
    }
    TRY(dev_floats(s, rows * m->n_head * p->ctx_len, &s->scores), "attention scores");
    dc_attn_split *sp = &s->attn_split;
    sp->rows = rows < DC_SPLIT_ROWS ? (uint32_t)rows : DC_SPLIT_ROWS;
    sp->chunks = (p->ctx_len + DI_CHUNK - 1) / DI_CHUNK;
    const size_t split_items = (size_t)sp->rows * m->n_head * sp->chunks;
    TRY(dev_floats(s, split_items, &sp->max), "attention scratch");
    TRY(dev_floats(s, split_items * DI_LANES, &sp->sum), "attention scratch");
    TRY(dev_floats(s, split_items * DI_LANES * m->head_dim, &sp->out), "attention scratch");
    TRY(dev_alloc(s, rows * sizeof(dc_row), (void **)&s->rows), "rows");
    TRY(dev_alloc(s, p->max_logits * sizeof(uint32_t), (void **)&s->logit_idx), "logits");
    TRY(dev_floats(s, (size_t)p->max_logits * m->n_vocab, &s->logits), "logits");
    TRY(dev_alloc(s, p->max_logits * sizeof(int32_t), (void **)&s->greedy), "logits");
    return DI_OK;
}

static void destroy(void *state)
{
    dc_state *s = (dc_state *)state;
    if (!s)
        return;
    cudaSetDevice(s->device);
    for (uint32_t i = 0; i < s->n_graphs; i++)
        cudaGraphExecDestroy(s->graphs[i].exec);
    release_file(s);
    dc_blas_destroy(s);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    for (size_t i = 0; i < s->n_allocations; i++)
        cudaFree(s->allocations[i]);
    free(s->allocations);
    free(s->layers);
    free(s);
}

static di_status create(const di_model *m, const di_backend_params *p, void **out, char *err,
                        size_t err_size)
{
    *out = NULL;
    for (uint32_t il = 0; il < m->n_layer; il++)
        if (!di_weight_type_supported(m->layers[il].wq.type) || !di_weight_type_supported(m->layers[il].ffn_down.type))
            return di_error(err, err_size, DI_ERR_UNSUPPORTED, "layer %u: a weight type the CUDA backend lacks", il);
    dc_state *s = (dc_state *)calloc(1, sizeof *s);
    if (!s)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory");
    s->model = m;
    s->params = *p;
    di_status st = pick_device(s, p->device, err, err_size);
    if (!st) {
        cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
        st = e == cudaSuccess ? DI_OK : cuda_fail(err, err_size, e, "cudaStreamCreate");
    }
    if (!st)
        st = upload_model(s, err, err_size);
    if (!st)
        st = upload_rope_tables(s, err, err_size);
    if (!st)
        st = alloc_buffers(s, err, err_size);
    if (!st && p->profile == DI_PROFILE_DEVICE)
        st = dc_blas_create(s, err, err_size);
    if (st) {
        destroy(s);
        return st;
    }
    *out = s;
    return DI_OK;
}

static const char *info(void *state)
{
    return ((dc_state *)state)->info;
}

/* ---- calls --------------------------------------------------------------------------- */

/* Waits for the stream and turns a launch or execution error into a status. */
static di_status finish(dc_state *s, const char *what, char *err, size_t err_size)
{
    TRY(cudaGetLastError(), what);
    TRY(cudaStreamSynchronize(s->stream), what);
    return dc_blas_check(s, err, err_size);
}

/* The layers for n_rows rows: every launch of the forward pass depends on
 * the row count alone (positions and sequences are read on the device from
 * s->rows, every buffer is made at creation), so the pass is captured once
 * per row count as a CUDA graph and replayed: one launch per step instead
 * of some 20 per layer, the same kernels on the same arguments, the same
 * bits. The device profile's cuBLASLt calls run without a graph. */
static cudaError_t forward_layers(dc_state *s, uint32_t n_rows)
{
    if (s->blas) {
        dc_forward_layers(s, n_rows);
        return cudaSuccess;
    }
    for (uint32_t i = 0; i < s->n_graphs; i++)
        if (s->graphs[i].n_rows == n_rows)
            return cudaGraphLaunch(s->graphs[i].exec, s->stream);
    if (s->n_graphs == DC_GRAPHS) {
        dc_forward_layers(s, n_rows);
        return cudaSuccess;
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaError_t e = cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return e;
    dc_forward_layers(s, n_rows);
    e = cudaStreamEndCapture(s->stream, &graph);
    if (e != cudaSuccess)
        return e;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
        return e;
    s->graphs[s->n_graphs].n_rows = n_rows;
    s->graphs[s->n_graphs++].exec = exec;
    return cudaGraphLaunch(exec, s->stream);
}

static di_status forward(void *state, const di_backend_row *rows, uint32_t n_rows, char *err,
                         size_t err_size)
{
    dc_state *s = (dc_state *)state;
    if (n_rows > s->params.max_rows)
        return di_error(err, err_size, DI_ERR_INTERNAL, "forward: %u rows, more than %u", n_rows,
                       s->params.max_rows);
    TRY(cudaSetDevice(s->device), "cudaSetDevice");
    TRY(cudaMemcpyAsync(s->rows, rows, n_rows * sizeof(dc_row), cudaMemcpyHostToDevice, s->stream),
        "forward: rows");
    TRY(forward_layers(s, n_rows), "forward: graph");
    s->n_rows = n_rows;
    return finish(s, "forward", err, err_size);
}

static di_status logits(void *state, const uint32_t *row_idx, uint32_t n, float *out, int32_t *greedy,
                        char *err, size_t err_size)
{
    dc_state *s = (dc_state *)state;
    const di_model *m = s->model;
    if (n > s->params.max_logits)
        return di_error(err, err_size, DI_ERR_INTERNAL, "logits: %u rows, more than %u", n,
                       s->params.max_logits);
    for (uint32_t i = 0; i < n; i++)
        if (row_idx[i] >= s->n_rows)
            return di_error(err, err_size, DI_ERR_INTERNAL, "logits: row %u of a call of %u rows",
                           row_idx[i], s->n_rows);
    TRY(cudaSetDevice(s->device), "cudaSetDevice");
    TRY(cudaMemcpyAsync(s->logit_idx, row_idx, n * sizeof(uint32_t), cudaMemcpyHostToDevice, s->stream),
        "logits: rows");
    dc_rmsnorm(s->stream, s->act[DI_ACT_X], s->logit_idx, n, s->output_norm, m->n_embd, m->rms_eps,
               s->act[DI_ACT_XN]);
    dc_forward_matmul(s, &s->output, s->act[DI_ACT_XN], n, NULL, s->logits);
    if (m->final_softcap != 0.0f)
        dc_softcap(s->stream, s->logits, (size_t)n * m->n_vocab, m->final_softcap);
    dc_argmax(s->stream, s->logits, n, m->n_vocab, s->greedy);
    TRY(cudaMemcpyAsync(out, s->logits, (size_t)n * m->n_vocab * sizeof(float), cudaMemcpyDeviceToHost,
                        s->stream), "logits: copy");
    TRY(cudaMemcpyAsync(greedy, s->greedy, n * sizeof(int32_t), cudaMemcpyDeviceToHost, s->stream),
        "logits: greedy");
    return finish(s, "logits", err, err_size);
}

static di_status seq_copy(void *state, uint32_t src, uint32_t dst, uint32_t length, char *err,
                          size_t err_size)
{
    dc_state *s = (dc_state *)state;
    const dc_cache *c = &s->cache;
    const size_t per_layer = (size_t)c->ctx_len * c->kv_dim, per_seq = per_layer * c->n_layer;
    const size_t bytes = (size_t)length * c->kv_dim * sizeof(float);
    TRY(cudaSetDevice(s->device), "cudaSetDevice");
    for (uint32_t il = 0; il < c->n_layer && bytes; il++) {
        const size_t from = src * per_seq + il * per_layer, to = dst * per_seq + il * per_layer;
        TRY(cudaMemcpyAsync(c->k + to, c->k + from, bytes, cudaMemcpyDeviceToDevice, s->stream), "seq_copy");
        TRY(cudaMemcpyAsync(c->v + to, c->v + from, bytes, cudaMemcpyDeviceToDevice, s->stream), "seq_copy");
    }
    return finish(s, "seq_copy", err, err_size);
}

/* The caches hold every position of every sequence from creation on: nothing
 * to grow, nothing to give back. */
static di_status reserve(void *state, uint32_t seq, uint32_t n, uint32_t keep, char *err, size_t err_size)
{
    (void)state, (void)seq, (void)n, (void)keep, (void)err, (void)err_size;
    return DI_OK;
}

static void truncate_seq(void *state, uint32_t seq, uint32_t length)
{
    (void)state, (void)seq, (void)length;
}

static uint64_t kv_bytes(void *state)
{
    const dc_cache *c = &((dc_state *)state)->cache;
    return 2 * (uint64_t)((dc_state *)state)->params.max_sequences * c->n_layer * c->ctx_len * c->kv_dim *
           sizeof(float);
}

/* ---- entry --------------------------------------------------------------------------- */

static const di_backend_ops cuda_backend_ops = {
    DI_BACKEND_OPS_SIZES, "cuda", create, destroy, info, reserve, forward, logits, seq_copy,
    truncate_seq, kv_bytes,
};

extern "C" __attribute__((visibility("default"))) const di_backend_ops *di_backend_entry(void)
{
    return &cuda_backend_ops;
}
