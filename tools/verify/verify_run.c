/*
 * verify_run.c — running the reference and each run of the plan,
 * the prompts and then the near ties: in this process through the engine,
 * or in a fresh one (the child).
 */
#include <stdio.h>
#include <stdlib.h>

#include "verify/verify_state.h"

static uint32_t *make_queue(uint32_t n_queue, uint32_t n_prompts, uint32_t offset)
{
    uint32_t *q = malloc((n_queue ? n_queue : 1) * sizeof *q);
    for (uint32_t j = 0; q && j < n_queue; j++)
        q[j] = (j + offset) % n_prompts; /* each row starts at another prompt */
    return q;
}

/* The near ties, each once, with the row's settings, for one token each. */
static di_status run_ties_in_process(verify *v, vrow *r, di_session *s, char *err, size_t err_size)
{
    uint32_t *queue = make_queue(v->ties.n, v->ties.n ? v->ties.n : 1, 0);
    vf_perturb none = {0};
    vf_engine_cfg cfg = {r->batch, r->chunk, 1, r->seed ^ 0x7469657321ull, r->perturbable ? v->hooks.batched : none,
                         1, TIE_CHUNK_TAIL, verify_record_tie, v};
    di_status st = queue ? vf_engine_run(s, v->n_vocab, v->tie_prompts, queue, v->ties.n, &cfg, err, err_size)
                         : DI_ERR_OUT_OF_MEMORY;
    free(queue);
    return st;
}

static void run_in_process(verify *v, vrow *r)
{
    cli_session_opts so = {.backend = r->backend, .profile = v->o.profile, .threads = r->threads,
                          .max_sequences = r->batch,
                          .context_length = (int64_t)v->longest + v->o.max_new,
                          .device = v->o.device, .cpu_path = r->cpu_path};
    di_session *s = NULL;
    char err[256] = "";
    di_status st = cli_open_session(v->model, &so, &s, err, sizeof err);
    if (st == DI_ERR_BACKEND_UNAVAILABLE || st == DI_ERR_UNSUPPORTED) {
        r->status = ROW_SKIPPED;
        snprintf(r->detail, sizeof r->detail, "%s: %s", di_status_name(st), err);
        cli_progress_add(&v->progress, r->n_queue + v->ties.n, "");
        return;
    }
    uint32_t *queue = make_queue(r->n_queue, v->prompts.n, v->current);
    vf_perturb none = {0};
    vf_engine_cfg cfg = {r->batch, r->chunk, (uint32_t)v->o.max_new, r->seed,
                         r->perturbable ? v->hooks.batched : none, 0, 0, verify_compare_trace, v};
    if (st == DI_OK)
        st = queue ? vf_engine_run(s, v->n_vocab, v->prompts.p, queue, r->n_queue, &cfg, err, sizeof err)
                   : DI_ERR_OUT_OF_MEMORY;
    double t0 = cli_now();
    if (st == DI_OK && v->ties.n)
        st = run_ties_in_process(v, r, s, err, sizeof err);
    r->tie_seconds = cli_now() - t0;
    if (st) {
        r->status = ROW_ERROR;
        snprintf(r->detail, sizeof r->detail, "%s: %s", di_status_name(st), err);
    }
    free(queue);
    di_session_free(s);
}

/* The prompts, then the near ties, each in a fresh process of their own. */
static void run_fresh(verify *v, vrow *r)
{
    char err[256] = "";
    const cli_session_opts so = {.backend = r->backend, .profile = v->o.profile,
                                .threads = r->threads, .max_sequences = 1, .context_length = 0,
                                .device = v->o.device, .cpu_path = r->cpu_path};
    di_status st = vf_child_traces(v->o.model, (uint32_t)v->o.max_new, 0, &so, v->prompts.p, v->prompts.n,
                                   verify_compare_trace, v, err, sizeof err);
    double t0 = cli_now();
    if (st == DI_OK && v->ties.n)
        st = vf_child_traces(v->o.model, 1, 1, &so, v->tie_prompts, v->ties.n, verify_record_tie, v, err,
                             sizeof err);
    r->tie_seconds = cli_now() - t0;
    if (st) {
        r->status = ROW_ERROR;
        snprintf(r->detail, sizeof r->detail, "%s", err);
    }
}

void verify_run_row(verify *v, uint32_t index)
{
    vrow *r = &v->rows[index];
    v->current = index;
    double t0 = cli_now();
    if (r->fresh)
        run_fresh(v, r);
    else
        run_in_process(v, r);
    r->seconds = cli_now() - t0;
}

/* The reference: every prompt alone, whole prompt, first thread count. */
int verify_run_reference(verify *v)
{
    uint32_t np = v->prompts.n;
    cli_session_opts so = {.backend = v->o.backend, .profile = v->o.profile,
                          .threads = v->o.threads[0], .max_sequences = 1,
                          .context_length = (int64_t)v->longest + v->o.max_new,
                          .device = v->o.device, .cpu_path = v->o.cpu_path};
    di_session *s = NULL;
    char err[256] = "";
    double t0 = cli_now();
    di_status st = cli_open_session(v->model, &so, &s, err, sizeof err);
    uint32_t *queue = make_queue(np, np, 0);
    vf_engine_cfg cfg = {1, 0, (uint32_t)v->o.max_new, (uint64_t)v->o.seed, {0}, 0, 0, verify_keep_reference, v};
    if (st == DI_OK)
        st = queue ? vf_engine_run(s, v->n_vocab, v->prompts.p, queue, np, &cfg, err, sizeof err)
                   : DI_ERR_OUT_OF_MEMORY;
    free(queue);
    di_session_free(s);
    v->ref_seconds = cli_now() - t0;
    for (uint32_t i = 0; st == DI_OK && i < np; i++)
        if (!v->ref[i].digests)
            st = DI_ERR_OUT_OF_MEMORY;
    return st ? cli_fail(&vf_command, "the reference run", st, err) : CLI_EXIT_OK;
}
