/*
 * threadpool.c — workers wait for a new generation of work, run their range,
 * and report back; the caller runs range 0 itself.
 *
 * A forward pass is a few hundred short jobs on the pool, so waking a sleeping
 * thread for each (a futex round trip of several microseconds) would cost a
 * large share of a decode step. Both sides therefore spin for a while on the
 * atomic counters before they sleep on the condition variables; an idle
 * session's workers sleep. The generation is bumped and the last worker
 * signals under the lock, and each side checks the counter under the lock
 * before sleeping, so no wake-up is lost.
 *
 * Workers run under the canonical floating-point environment (fpenv.h), set
 * once when they start: they inherit their creator's, which is the host's
 * choice, not ours. The calling thread's share runs under the environment its
 * public entry point pinned.
 */
#include "kernels/cpu/threadpool.h"
#include "lib/base/fpenv.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Polls before sleeping: a few tens of microseconds, longer than the gap
 * between two jobs of a forward pass. */
#define SPIN_POLLS 4000

int di_fpenv_test_unpinned;

struct di_pool {
    uint32_t n_threads;
    pthread_t *workers;
    uint32_t n_started;
    pthread_mutex_t lock;
    pthread_cond_t work_ready;
    pthread_cond_t work_done;
    _Atomic uint64_t generation; /* bumped for each di_pool_run */
    _Atomic uint32_t pending;    /* workers still running this generation */
    _Atomic int stopping;
    /* the current job */
    di_pool_fn fn;
    void *ctx;
    uint32_t n_items;
};

typedef struct worker_arg {
    di_pool *pool;
    uint32_t index;
} worker_arg;

static void range_of(uint32_t n_items, uint32_t n_threads, uint32_t t, uint32_t *begin, uint32_t *end)
{
    uint64_t b = (uint64_t)n_items * t / n_threads;
    uint64_t e = (uint64_t)n_items * (t + 1) / n_threads;
    *begin = (uint32_t)b;
    *end = (uint32_t)e;
}

static void run_range(di_pool *p, uint32_t t)
{
    uint32_t begin, end;
    range_of(p->n_items, p->n_threads, t, &begin, &end);
    if (begin < end)
        p->fn(p->ctx, begin, end, t);
}

/* Waits until the generation differs from `seen` or the pool stops. */
static void wait_for_work(di_pool *p, uint64_t seen)
{
    for (int i = 0; i < SPIN_POLLS; i++) {
        if (atomic_load_explicit(&p->generation, memory_order_acquire) != seen ||
            atomic_load_explicit(&p->stopping, memory_order_acquire))
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    while (!atomic_load(&p->stopping) && atomic_load(&p->generation) == seen)
        pthread_cond_wait(&p->work_ready, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    di_pool *p = wa->pool;
    uint32_t index = wa->index;
    free(wa);
    if (!di_fpenv_test_unpinned)
        di_fpenv_set_canonical();
    uint64_t seen = 0;
    for (;;) {
        wait_for_work(p, seen);
        if (atomic_load(&p->stopping))
            break;
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
        run_range(p, index);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->work_done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

di_status di_pool_create(uint32_t n_threads, di_pool **out)
{
    *out = NULL;
    if (n_threads < 1)
        return DI_ERR_INVALID_ARGUMENT;
    di_pool *p = calloc(1, sizeof *p);
    if (!p)
        return DI_ERR_OUT_OF_MEMORY;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work_ready, NULL);
    pthread_cond_init(&p->work_done, NULL);
    if (n_threads > 1) {
        p->workers = calloc(n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            di_pool_free(p);
            return DI_ERR_OUT_OF_MEMORY;
        }
    }
    for (uint32_t i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            di_pool_free(p);
            return DI_ERR_OUT_OF_MEMORY;
        }
        wa->pool = p;
        wa->index = i;
        if (pthread_create(&p->workers[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            di_pool_free(p);
            return DI_ERR_THREAD;
        }
        p->n_started++;
    }
    *out = p;
    return DI_OK;
}

void di_pool_free(di_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stopping, 1);
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->work_done);
    pthread_cond_destroy(&p->work_ready);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

uint32_t di_pool_threads(const di_pool *p)
{
    return p->n_threads;
}

void di_pool_run(di_pool *p, uint32_t n_items, di_pool_fn fn, void *ctx)
{
    if (p->n_threads == 1 || n_items < 2) {
        if (n_items > 0)
            fn(ctx, 0, n_items, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);

    run_range(p, 0);

    for (int i = 0; i < SPIN_POLLS; i++) {
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->pending) > 0)
        pthread_cond_wait(&p->work_done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
