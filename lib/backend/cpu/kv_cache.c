/*
 * kv_cache.c — a sequence's KV cache on the CPU backend, grown as the
 * sequence grows (kv_cache.h).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/backend/cpu/kv_cache.h"

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

/* One layer to cap positions, keeping the first `keep`: the new block, the
 * copy, then the old block freed. */
static di_status grow_layer(di_kv_layer *l, const di_kv_shape *shape, uint32_t cap, uint32_t keep)
{
    if (l->capacity >= cap)
        return DI_OK;
    const uint64_t floats = (uint64_t)cap * shape->kv_dim;
    float *k = alloc_floats(floats), *v = k ? alloc_floats(floats) : NULL;
    if (!k || !v) {
        free(k);
        return DI_ERR_OUT_OF_MEMORY;
    }
    const size_t kept = (size_t)keep * shape->kv_dim * sizeof(float);
    if (kept > 0) {
        memcpy(k, l->k, kept);
        memcpy(v, l->v, kept);
    }
    free(l->k);
    free(l->v);
    *l = (di_kv_layer){k, v, cap};
    return DI_OK;
}

di_status di_kv_reserve(di_kv_cache *c, const di_kv_shape *shape, uint32_t n, uint32_t keep)
{
    if (n <= c->capacity)
        return DI_OK;
    const uint32_t cap = di_kv_grown_capacity(c->capacity, n, shape->ctx_len);
    if (!c->layers && !(c->layers = calloc(shape->n_layer, sizeof *c->layers)))
        return DI_ERR_OUT_OF_MEMORY;
    di_status st = DI_OK;
    for (uint32_t il = 0; !st && il < shape->n_layer; il++)
        st = grow_layer(&c->layers[il], shape, cap, keep);
    if (!st)
        c->capacity = cap;
    return st;
}

void di_kv_release(di_kv_cache *c, const di_kv_shape *shape)
{
    for (uint32_t il = 0; c->layers && il < shape->n_layer; il++) {
        free(c->layers[il].k);
        free(c->layers[il].v);
    }
    free(c->layers);
    memset(c, 0, sizeof *c);
}

void di_kv_copy(di_kv_cache *dst, const di_kv_cache *src, const di_kv_shape *shape, uint32_t length)
{
    if (length == 0)
        return;
    const size_t bytes = (size_t)length * shape->kv_dim * sizeof(float);
    for (uint32_t il = 0; il < shape->n_layer; il++) {
        memcpy(dst->layers[il].k, src->layers[il].k, bytes);
        memcpy(dst->layers[il].v, src->layers[il].v, bytes);
    }
}

uint64_t di_kv_bytes(const di_kv_cache *c, const di_kv_shape *shape)
{
    uint64_t positions = 0;
    for (uint32_t il = 0; c->layers && il < shape->n_layer; il++)
        positions += c->layers[il].capacity;
    return 2 * positions * shape->kv_dim * sizeof(float);
}
