/*
 * model_api.c — the public calls of a loaded model (di_model_load,
 * di_model_free, di_model_get_int, di_model_architecture,
 * di_model_meta_string): argument checks and the caller's buffers around the
 * model layer (lib/model/model.h).
 */
#include <stdint.h>
#include <string.h>

#include "lib/base/fpenv.h"
#include "lib/model/model.h"

/* Loading computes (scales, conversions of metadata): under the pinned
 * floating-point environment (fpenv.h). */
DI_API di_status di_model_load(const char *path, di_model **out, char *errbuf, size_t errbuf_size)
{
    di_fpenv saved;
    di_fpenv_enter(&saved);
    const di_status st = di_model_open(path, out, errbuf, errbuf_size);
    di_fpenv_leave(&saved);
    return st;
}

DI_API void di_model_free(di_model *m)
{
    di_model_release(m);
}

DI_API di_status di_model_get_int(const di_model *m, di_model_key key, int64_t *out)
{
    if (!m || !out)
        return DI_ERR_INVALID_ARGUMENT;
    switch (key) {
    case DI_MODEL_N_VOCAB: *out = m->n_vocab; return DI_OK;
    case DI_MODEL_N_CTX_TRAIN: *out = m->n_ctx_train; return DI_OK;
    case DI_MODEL_N_EMBD: *out = m->n_embd; return DI_OK;
    case DI_MODEL_N_LAYER: *out = m->n_layer; return DI_OK;
    case DI_MODEL_N_HEAD: *out = m->n_head; return DI_OK;
    case DI_MODEL_N_HEAD_KV: *out = m->n_head_kv; return DI_OK;
    case DI_MODEL_N_FF: *out = m->n_ff; return DI_OK;
    case DI_MODEL_N_PARAMS: *out = (int64_t)m->n_params; return DI_OK;
    case DI_MODEL_FILE_SIZE: *out = (int64_t)m->map_size; return DI_OK;
    case DI_MODEL_BYTES_PER_TOKEN: {
        /* a tied table is also the output matrix, read whole every step */
        const int tied = m->output.data == m->tok_embd.data;
        const uint64_t unread = tied ? 0 : (uint64_t)m->tok_embd.row_bytes * (m->n_vocab - 1);
        *out = (int64_t)(m->map_size - unread);
        return DI_OK;
    }
    }
    return DI_ERR_UNKNOWN_KEY;
}

DI_API const char *di_model_architecture(const di_model *m)
{
    return m ? m->arch : NULL;
}

DI_API di_status di_model_meta_string(const di_model *m, const char *key, char *text,
                                      size_t capacity, size_t *text_len)
{
    if (!m || !key || !text_len || (!text && capacity > 0))
        return DI_ERR_INVALID_ARGUMENT;
    *text_len = 0;
    if (capacity > 0)
        text[0] = '\0';
    const di_gguf_kv *kv = di_gguf_find_kv(&m->gguf, key);
    if (!kv || kv->type != DI_GGUF_STRING)
        return DI_ERR_UNKNOWN_KEY;
    if (kv->v.str.len >= SIZE_MAX)
        return DI_ERR_BUFFER_TOO_SMALL;
    *text_len = (size_t)kv->v.str.len;
    if (capacity <= *text_len)
        return DI_ERR_BUFFER_TOO_SMALL;
    memcpy(text, kv->v.str.ptr, *text_len);
    text[*text_len] = '\0';
    return DI_OK;
}
