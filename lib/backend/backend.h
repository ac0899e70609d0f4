/*
 * backend.h — the interface every backend sits behind: the CPU backend
 * (cpu_backend.c, di_cpu_backend) inside libdetinfer.so, and the CUDA plugin
 * libdetinfer-cuda.so.1 (lib/backend/cuda/cuda_backend.cu). A backend owns its
 * buffers: the forward pass's state, the RoPE tables (rope_tables.h) and the
 * KV caches. The session (lib/api/session.c) keeps the token histories,
 * validates, slices, digests and dispatches every backend the same way.
 *
 * The plugin exports one C function, DI_BACKEND_ENTRY_NAME, returning a
 * di_backend_ops table. Because the plugin reads the library's internal
 * di_model (lib/model/model.h) with its architecture row (arch.h), runs the
 * layer recipe (layer_recipe.h) and reads the structs below, both sides must have been
 * compiled from the same headers: the table carries an ABI number and the
 * sizes of every struct the plugin reads, and the loader refuses a plugin
 * whose numbers differ (backend_loader.c). Change DI_BACKEND_ABI whenever a
 * struct here or in model.h changes meaning without changing size.
 *
 * All calls return a di_status and write a message into err on failure; none
 * exits or aborts. A state is used by one thread at a time (the session's).
 */
#ifndef DI_BACKEND_H
#define DI_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"
#include "lib/model/model.h"

/* 2: di_model.arch_info, the layer recipe's roles; 3: reserve, truncate and
 * kv_bytes; the plugin computes its own RoPE tables; 4: params.profile may be
 * DI_PROFILE_INTEGER, which the plugin runs (kernels/common/int_dot.h) */
#define DI_BACKEND_ABI 4
#define DI_BACKEND_ENTRY_NAME "di_backend_entry"
#define DI_CUDA_PLUGIN_SONAME "libdetinfer-cuda.so.1"

typedef struct di_backend_params {
    uint32_t max_sequences;   /* sequences 0..max_sequences-1, each with a KV cache */
    uint32_t ctx_len;         /* positions per sequence */
    uint32_t max_rows;        /* rows per forward call */
    uint32_t max_logits;      /* logits rows per logits call */
    int profile;              /* DI_PROFILE_* */
    int device;               /* CUDA device ordinal */
    int cpu_path;             /* the CPU backend's kernel path (di_cpu_path) */
    uint32_t threads;         /* the CPU backend's threads */
} di_backend_params;

/* One token of one sequence in a forward call. */
typedef struct di_backend_row {
    int32_t token;
    uint32_t pos;             /* its position: the sequence's cache holds 0..pos-1 */
    uint32_t seq;
} di_backend_row;

typedef struct di_backend_ops {
    uint32_t abi;             /* DI_BACKEND_ABI */
    uint32_t sizeof_ops, sizeof_params, sizeof_row;
    uint32_t sizeof_model, sizeof_layer, sizeof_weight;
    const char *name;         /* "cpu", "cuda" */

    di_status (*create)(const di_model *model, const di_backend_params *params, void **state,
                        char *err, size_t err_size);
    void (*destroy)(void *state);
    /* The environment fingerprint (di_session_backend_info). */
    const char *(*info)(void *state);
    /* Makes room in sequence seq's cache for positions 0..n-1 (n <= ctx_len),
     * keeping the first `keep`. The session calls it for every sequence of a
     * step before the step's first forward call (and for the destination of
     * a copy), so a step runs whole or changes nothing: on failure (with a
     * message) the positions held are unchanged. */
    di_status (*reserve)(void *state, uint32_t seq, uint32_t n, uint32_t keep, char *err,
                         size_t err_size);
    /* Runs rows[0..n_rows) (n_rows <= max_rows) through every layer, writing
     * their keys and values into their sequences' caches at their positions.
     * The final hidden states stay in the state for logits(). */
    di_status (*forward)(void *state, const di_backend_row *rows, uint32_t n_rows, char *err,
                         size_t err_size);
    /* Logits of hidden rows row_idx[0..n) (n <= max_logits) of the last
     * forward call into logits[n][n_vocab] (host memory), and the greedy
     * token of each row (lowest id of the largest logit, NaN never chosen,
     * 0 for an all-NaN row) into greedy[n]. */
    di_status (*logits)(void *state, const uint32_t *row_idx, uint32_t n, float *logits,
                        int32_t *greedy, char *err, size_t err_size);
    /* Copies positions 0..length-1 of every layer's cache of src to dst,
     * which reserve() made room for. */
    di_status (*seq_copy)(void *state, uint32_t src, uint32_t dst, uint32_t length, char *err,
                          size_t err_size);
    /* Sequence seq now holds positions 0..length-1; at 0 it may give its
     * memory back. Cannot fail. */
    void (*truncate)(void *state, uint32_t seq, uint32_t length);
    /* Bytes of keys and values the caches hold now (di_session_kv_bytes). */
    uint64_t (*kv_bytes)(void *state);
} di_backend_ops;

typedef const di_backend_ops *(*di_backend_entry_fn)(void);

/* The CPU backend (cpu_backend.c), linked into the library. */
const di_backend_ops *di_cpu_backend(void);

/* The values a plugin built from these headers reports. */
#define DI_BACKEND_OPS_SIZES                                                              \
    DI_BACKEND_ABI, (uint32_t)sizeof(di_backend_ops), (uint32_t)sizeof(di_backend_params), \
        (uint32_t)sizeof(di_backend_row), (uint32_t)sizeof(struct di_model),               \
        (uint32_t)sizeof(di_layer), (uint32_t)sizeof(di_weight)

/*
 * Loads the CUDA plugin (backend_loader.c). Search order: the file named by
 * the environment variable DETINFER_CUDA_PLUGIN (when set, only that file is
 * tried), then libdetinfer-cuda.so.1 in the directory of the loaded
 * libdetinfer, then the loader's default path. DI_ERR_BACKEND_UNAVAILABLE with
 * a message naming what is missing when no usable plugin is found.
 */
di_status di_backend_load_cuda(const di_backend_ops **out, char *errbuf, size_t errbuf_size);

#endif /* DI_BACKEND_H */
