/*
 * kv_cache.h — one sequence's keys and values of every layer on the CPU
 * backend (cpu_backend.c). Nothing is allocated until the sequence holds a
 * token; then the storage grows with
 * the sequence, doubling (from DI_KV_MIN_POSITIONS) up to the context length,
 * so a session's memory follows its sequences' lengths, not
 * max_sequences x context_length.
 *
 * Each layer's keys and values are a block of their own, grown one layer at
 * a time: while a cache doubles, the memory in use exceeds the new size by
 * one layer's old block at most (not by the whole old cache). Growth moves
 * the positions held unchanged: the bits a forward pass reads never depend
 * on the capacity.
 */
#ifndef DI_KV_CACHE_H
#define DI_KV_CACHE_H

#include <stdint.h>
#include "detinfer.h"

#define DI_KV_MIN_POSITIONS 64u

typedef struct di_kv_shape {
    uint32_t n_layer;
    uint32_t kv_dim;          /* n_head_kv * head_dim */
    uint32_t ctx_len;         /* the most positions a sequence may hold */
} di_kv_shape;

/* One layer's keys and values: [capacity][kv_dim] each, 64-byte aligned. */
typedef struct di_kv_layer {
    float *k, *v;
    uint32_t capacity;
} di_kv_layer;

typedef struct di_kv_cache {
    uint32_t capacity;        /* positions every layer holds, 0..ctx_len */
    di_kv_layer *layers;      /* [n_layer]; NULL before the first token */
} di_kv_cache;

/* Makes room for n <= ctx_len positions, keeping the first `keep` (keys and
 * values of every layer). On DI_ERR_OUT_OF_MEMORY the positions held
 * are unchanged (some layers may have grown; a later call grows the rest). */
di_status di_kv_reserve(di_kv_cache *c, const di_kv_shape *shape, uint32_t n, uint32_t keep);

/* Frees everything; c holds nothing afterwards. */
void di_kv_release(di_kv_cache *c, const di_kv_shape *shape);

/* Copies positions 0..length-1 of src into dst, which has room for them. */
void di_kv_copy(di_kv_cache *dst, const di_kv_cache *src, const di_kv_shape *shape, uint32_t length);

/* Bytes of keys and values c holds. */
uint64_t di_kv_bytes(const di_kv_cache *c, const di_kv_shape *shape);

/* The capacity a store of `capacity` positions grows to when it needs n
 * (n <= limit): at least double, at least DI_KV_MIN_POSITIONS, at most limit. */
uint32_t di_kv_grown_capacity(uint32_t capacity, uint32_t n, uint32_t limit);

#endif /* DI_KV_CACHE_H */
