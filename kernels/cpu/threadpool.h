/*
 * threadpool.h — a persistent pool of worker threads for one session.
 *
 * di_pool_run(pool, n_items, fn, ctx) cuts [0, n_items) into one contiguous
 * range per thread (the calling thread takes range 0) and returns when all
 * ranges are done. Work is split over independent outputs only (rows, heads,
 * tokens), so results never depend on the number of threads.
 */
#ifndef DI_THREADPOOL_H
#define DI_THREADPOOL_H

#include <stdint.h>
#include "detinfer.h"

typedef struct di_pool di_pool;

/* Called once per non-empty range [begin, end); `thread` is in [0, n_threads). */
typedef void (*di_pool_fn)(void *ctx, uint32_t begin, uint32_t end, uint32_t thread);

/* n_threads >= 1; n_threads - 1 workers are started. DI_ERR_THREAD or
 * DI_ERR_OUT_OF_MEMORY on failure (*out is then NULL). */
di_status di_pool_create(uint32_t n_threads, di_pool **out);
void di_pool_free(di_pool *pool);
uint32_t di_pool_threads(const di_pool *pool);
void di_pool_run(di_pool *pool, uint32_t n_items, di_pool_fn fn, void *ctx);

#endif /* DI_THREADPOOL_H */
