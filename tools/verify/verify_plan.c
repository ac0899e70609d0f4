/*
 * verify_plan.c — the runs of `detinfer verify`: one per value of
 * each axis (repeat, batch, threads, chunk, process, backend, CPU path), each with
 * one setting changed from the reference, and a mixed one with the largest
 * batch, the most threads and the smallest chunk at once.
 */
#include <stdio.h>

#include "verify/verify_state.h"

static vrow *add_row(verify *v, const char *axis, uint32_t batch, long threads, uint32_t chunk,
                     di_backend backend, uint32_t n_queue)
{
    vrow *r = &v->rows[v->n_rows];
    *r = (vrow){.axis = axis, .batch = batch, .threads = threads, .chunk = chunk, .backend = backend,
                .cpu_path = v->o.cpu_path, .n_queue = n_queue, .seed = (uint64_t)v->o.seed * 1000003u + v->n_rows};
    v->n_rows++;
    return r;
}

static long list_max(const long *x, int n)
{
    long m = x[0];
    for (int i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

void verify_plan(verify *v)
{
    const verify_opts *o = &v->o;
    uint32_t np = v->prompts.n;
    long t0 = o->threads[0];
    vrow *r = add_row(v, "repeat", 1, t0, 0, o->backend, np * (uint32_t)o->reps);
    snprintf(r->value, sizeof r->value, "%ldx", o->reps);
    for (int i = 0; i < o->n_batch; i++) {
        uint32_t b = (uint32_t)o->batch[i];
        r = add_row(v, "batch", b, t0, 0, o->backend, np > 2 * b ? np : 2 * b);
        snprintf(r->value, sizeof r->value, "%u", b);
        r->perturbable = b > 1;
    }
    for (int i = 1; i < o->n_threads; i++) {
        r = add_row(v, "threads", 1, o->threads[i], 0, o->backend, np);
        snprintf(r->value, sizeof r->value, "%ld", o->threads[i]);
    }
    for (int i = 0; i < o->n_chunks; i++) {
        r = add_row(v, "chunk", 1, t0, (uint32_t)o->chunks[i], o->backend, np);
        snprintf(r->value, sizeof r->value, "%ld", o->chunks[i]);
    }
    for (long k = 1; k <= o->processes; k++) {
        r = add_row(v, "process", 1, t0, 0, o->backend, np);
        snprintf(r->value, sizeof r->value, "fresh #%ld", k);
        r->fresh = 1;
    }
    for (int i = 0; i < o->n_backends; i++) {
        if (o->backends[i] == o->backend)
            continue;
        r = add_row(v, "backend", 1, t0, 0, o->backends[i], np);
        snprintf(r->value, sizeof r->value, "%s", cli_backend_name(o->backends[i]));
    }
    /* the other CPU paths (a path this CPU lacks: skipped when its session is refused) */
    di_cpu_path ref_path;
    if (o->backend == DI_BACKEND_CPU && di_cpu_path_resolve(o->cpu_path, &ref_path, NULL, 0) == DI_OK)
        for (int p = DI_CPU_PATH_SCALAR; p <= DI_CPU_PATH_AVX512; p++) {
            if (p == (int)ref_path)
                continue;
            r = add_row(v, "path", 1, t0, 0, o->backend, np);
            r->cpu_path = (di_cpu_path)p;
            snprintf(r->value, sizeof r->value, "%s", di_cpu_path_name(r->cpu_path));
        }
    uint32_t bmax = (uint32_t)list_max(o->batch, o->n_batch);
    long cmin = 0; /* the smallest chunk size; 0 (whole prompt) when none */
    for (int i = 0; i < o->n_chunks; i++)
        cmin = i == 0 || o->chunks[i] < cmin ? o->chunks[i] : cmin;
    r = add_row(v, "mixed", bmax, list_max(o->threads, o->n_threads), (uint32_t)cmin, o->backend,
                np > 2 * bmax ? np : 2 * bmax);
    snprintf(r->value, sizeof r->value, "all at once");
    r->perturbable = bmax > 1;
}
