/*
 * kv_cache.c — a sequence's token history and KV cache, grown as the
 * sequence grows (kv_cache.h).
 */
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"

uint32_t di_kv_grown_capacity(uint32_t capacity, uint32_t n, uint32_t limit)
{
    uint64_t grown = (uint64_t)capacity * 2;
    if (grown < DI_KV_MIN_POSITIONS)
        grown = DI_KV_MIN_POSITIONS;
    if (grown > limit)
        grown = limit;
    return grown > n ? (uint32_t)grown : n;
}

/* n floats at a 64-byte boundary (vector loads of a cache row then never
 * straddle cache lines); NULL when they do not fit. */
static float *alloc_floats(uint64_t n)
{
    if (n > SIZE_MAX / sizeof(float) - 64)
        return NULL;
    const size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* Layer by layer: positions 0..n-1 of each layer of src (stride src_cap)
 * into dst (stride dst_cap). */
static void copy_layers(float *dst, uint32_t dst_cap, const float *src, uint32_t src_cap,
                        const di_kv_shape *shape, uint32_t n)
{
    const size_t kv = shape->kv_dim;
    for (uint32_t il = 0; il < shape->n_layer && n > 0; il++)
        memcpy(dst + (size_t)il * dst_cap * kv, src + (size_t)il * src_cap * kv, (size_t)n * kv * sizeof(float));
}

di_status di_kv_reserve(di_kv_cache *c, const di_kv_shape *shape, uint32_t n, uint32_t keep)
{
    if (n <= c->capacity)
        return DI_OK;
    const uint32_t cap = di_kv_grown_capacity(c->capacity, n, shape->ctx_len);
    const uint64_t floats = (uint64_t)shape->n_layer * cap * shape->kv_dim;
    int32_t *tokens = malloc((size_t)cap * sizeof *tokens);
    float *k = NULL, *v = NULL;
    if (tokens && shape->with_caches) {
        k = alloc_floats(floats);
        v = k ? alloc_floats(floats) : NULL;
    }
    if (!tokens || (shape->with_caches && (!k || !v))) {
        free(tokens);
        free(k);
        free(v);
        return DI_ERR_OUT_OF_MEMORY;
    }
    if (keep > 0)
        memcpy(tokens, c->tokens, (size_t)keep * sizeof *tokens);
    if (shape->with_caches) {
        copy_layers(k, cap, c->k, c->capacity, shape, keep);
        copy_layers(v, cap, c->v, c->capacity, shape, keep);
    }
    di_kv_release(c);
    c->capacity = cap;
    c->tokens = tokens;
    c->k = k;
    c->v = v;
    return DI_OK;
}

void di_kv_release(di_kv_cache *c)
{
    free(c->tokens);
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

void di_kv_copy(di_kv_cache *dst, const di_kv_cache *src, const di_kv_shape *shape, uint32_t length)
{
    if (length == 0)
        return;
    memcpy(dst->tokens, src->tokens, (size_t)length * sizeof *dst->tokens);
    if (shape->with_caches) {
        copy_layers(dst->k, dst->capacity, src->k, src->capacity, shape, length);
        copy_layers(dst->v, dst->capacity, src->v, src->capacity, shape, length);
    }
}

uint64_t di_kv_bytes(const di_kv_cache *c, const di_kv_shape *shape)
{
    if (!shape->with_caches)
        return 0;
    return 2 * (uint64_t)shape->n_layer * c->capacity * shape->kv_dim * sizeof(float);
}
