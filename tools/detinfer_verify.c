/*
 * detinfer_verify.c — `detinfer verify`: the determinism contract checked
 * on this machine, with this build and this model (the seed's validation,
 * automated).
 *
 * Every prompt is first run alone (batch 1, the first thread count, the
 * whole prompt in one step): the reference. Some prompts run again as
 * sampled requests (--sampled: seeded, temperature > 0, filters and
 * penalties), each with a seed of its own, so that their tokens too are
 * checked on every axis. Then each axis is run with one
 * setting changed, every logits row of every request is hashed and
 * compared with the reference position by position:
 *
 *   repeat   the reference settings, N more times per prompt
 *   batch    1, 2, 4, 8, 16 sequences at once, continuous batching: prompt
 *            chunks and decode tokens of other requests in the same step,
 *            random slots, random entry order
 *   threads  other thread counts
 *   chunk    the prompt fed N tokens per step (1: token by token)
 *   process  a fresh process (this program re-executed)
 *   backend  other backends, where the build and the machine have them
 *   mixed    the largest batch, the most threads, the smallest chunk at once
 *
 * The report is a table of axes x result, the positions of the reference
 * run where the top-2 logit gap was smallest (near ties) and whether every
 * run chose the same token there, and on a mismatch the first diverging
 * prompt, position and the two digests. Exit status 0 only when everything
 * matched.
 */
#include <stdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detinfer_verify_state.h"

#define NEAR_TIE_KEEP 4

enum { OPT_MODEL, OPT_PROMPTS, OPT_REPS, OPT_MAX_NEW, OPT_BATCH, OPT_THREADS, OPT_CHUNKS, OPT_PROCESSES,
       OPT_BACKENDS, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE, OPT_CPU_PATH, OPT_TIES, OPT_CANDIDATES, OPT_SEED, OPT_QUICK, OPT_JSON,
       OPT_NO_PROGRESS, OPT_SAMPLED, N_OPTS };

static const dt_option options[] = {
    [OPT_MODEL] = {"--model", "FILE", "GGUF model file (required)"},
    [OPT_PROMPTS] = {"--prompts", "FILE", "one prompt per line ('tokens: 1,2,3' for ids; '#' comments)"},
    [OPT_REPS] = {"--reps", "N", "repetitions of each prompt on the repeat axis (default 50)"},
    [OPT_MAX_NEW] = {"--max-new", "N", "tokens generated per prompt (default 16)"},
    [OPT_BATCH] = {"--batch-sizes", "LIST", "batch sizes (default 1,2,4,8,16)"},
    [OPT_THREADS] = {"--threads", "LIST", "thread counts, the first is the reference's (default 1,2,4)"},
    [OPT_CHUNKS] = {"--chunks", "LIST", "prompt tokens per step (default 1,3,7)"},
    [OPT_PROCESSES] = {"--processes", "N", "fresh processes, 0..16 (default 2)"},
    [OPT_BACKENDS] = {"--backends", "LIST", "backends compared with the reference (default cpu,cuda)"},
    [OPT_BACKEND] = {"--backend", "NAME", "backend of the reference run: cpu (default) or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", "numerics profile: portable (default) or device"},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_TIES] = {"--ties", "N", "near ties to report (default 5)"},
    [OPT_CANDIDATES] = {"--tie-candidates", "N",
                        "random prompts searched for near ties (default 64; 0 with --prompts)"},
    [OPT_SEED] = {"--seed", "N", "seed of the prompts, slots and entry orders (default 1)"},
    [OPT_QUICK] = {"--quick", NULL, "a short run: --reps 5 --batch-sizes 1,4,16 --threads 1,2 --chunks 3 --processes 1"},
    [OPT_JSON] = {"--json", NULL, "the report as one JSON object on stdout"},
    [OPT_NO_PROGRESS] = {"--no-progress", NULL, "no progress bar on stderr"},
    [OPT_SAMPLED] = {"--sampled", "N",
                     "sampled requests added, each with its own seed (default 3; 0: greedy only)"},
    {NULL, NULL, NULL},
};

const dt_command dt_verify_command = {
    "verify",
    "--model FILE [--prompts FILE] [--reps N] [--batch-sizes LIST] [--threads LIST] [options]",
    "Checks that every logits row and chosen token (greedy, and sampled with\n"
    "seeds) is bitwise identical across\n"
    "repetitions, batch sizes (continuous batching with other requests), thread\n"
    "counts, prompt chunk sizes, fresh processes and backends, against the prompt\n"
    "run alone. Reports a table of axes x result, the near ties (smallest top-2\n"
    "logit gaps) and whether they held, and the first divergence if any.\n"
    "The built-in prompts are text (with confusable ones) for a model with a\n"
    "tokenizer, token ids otherwise, plus near-tie prompts found by search.\n"
    "Exit status 0 only when everything matched.\n"
    "'detinfer verify --url http://HOST:PORT' checks a live `detinfer serve` instead.\n"
    "Test only: DETINFER_TEST_PERTURB=SLOT:POS flips the lowest bit of one logit of\n"
    "batch slot SLOT at position POS in the batched runs (child:POS: in the fresh\n"
    "processes) before hashing, to prove that the check can fail.",
    options,
};

/* ---- Options ------------------------------------------------------------- */

static int parse_backends(const char *text, verify_opts *o)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", text);
    o->n_backends = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (o->n_backends == MAX_LIST || !dt_parse_backend(&dt_verify_command, "--backends", tok, &o->backends[o->n_backends++]))
            return 0;
    return o->n_backends > 0 || dt_usage(&dt_verify_command, "--backends wants a list like cpu,cuda") == 0;
}

static int parse_option(int k, const char *v, void *opts)
{
    verify_opts *o = opts;
    const char *name = options[k].name;
    switch (k) {
    case OPT_MODEL: o->model = v; return 1;
    case OPT_PROMPTS: o->prompts = v; return 1;
    case OPT_REPS: return dt_parse_long(&dt_verify_command, name, v, 1, 100000, &o->reps);
    case OPT_MAX_NEW: return dt_parse_long(&dt_verify_command, name, v, 1, 4096, &o->max_new);
    case OPT_BATCH: return dt_parse_long_list(&dt_verify_command, name, v, 1, 4096, o->batch, MAX_LIST, &o->n_batch);
    case OPT_THREADS: return dt_parse_long_list(&dt_verify_command, name, v, 1, 256, o->threads, MAX_LIST, &o->n_threads);
    case OPT_CHUNKS: return dt_parse_long_list(&dt_verify_command, name, v, 1, 1 << 20, o->chunks, MAX_LIST, &o->n_chunks);
    case OPT_PROCESSES: return dt_parse_long(&dt_verify_command, name, v, 0, MAX_LIST, &o->processes);
    case OPT_BACKENDS: return parse_backends(v, o);
    case OPT_BACKEND: return dt_parse_backend(&dt_verify_command, name, v, &o->backend);
    case OPT_PROFILE: return dt_parse_profile(&dt_verify_command, name, v, &o->profile);
    case OPT_DEVICE: return dt_parse_device(&dt_verify_command, name, v, &o->device);
    case OPT_CPU_PATH: return dt_parse_cpu_path(&dt_verify_command, name, v, &o->cpu_path);
    case OPT_TIES: return dt_parse_long(&dt_verify_command, name, v, 0, 1000, &o->ties);
    case OPT_CANDIDATES: return dt_parse_long(&dt_verify_command, name, v, 0, 4096, &o->candidates);
    case OPT_SEED: return dt_parse_long(&dt_verify_command, name, v, 0, 1L << 40, &o->seed);
    case OPT_QUICK: return 1;
    case OPT_JSON: o->json = 1; return 1;
    case OPT_NO_PROGRESS: o->progress = 0; return 1;
    case OPT_SAMPLED: return dt_parse_long(&dt_verify_command, name, v, 0, 1000, &o->sampled);
    }
    return 0;
}

/* Defaults for what was not given; --quick shrinks them. */
static void fill_defaults(verify_opts *o, const int *given)
{
    static const long batch[] = {1, 2, 4, 8, 16}, quick_batch[] = {1, 4, 16};
    static const long threads[] = {1, 2, 4}, quick_threads[] = {1, 2};
    static const long chunks[] = {1, 3, 7}, quick_chunks[] = {3};
    int quick = given[OPT_QUICK];
#define DEFAULT_LIST(field, count, full, short_)                                              \
    if (!given[count]) {                                                                      \
        const long *src = quick ? short_ : full;                                              \
        o->n_##field = quick ? (int)(sizeof short_ / sizeof *short_) : (int)(sizeof full / sizeof *full); \
        memcpy(o->field, src, (size_t)o->n_##field * sizeof *src);                            \
    }
    DEFAULT_LIST(batch, OPT_BATCH, batch, quick_batch)
    DEFAULT_LIST(threads, OPT_THREADS, threads, quick_threads)
    DEFAULT_LIST(chunks, OPT_CHUNKS, chunks, quick_chunks)
#undef DEFAULT_LIST
    if (!given[OPT_REPS])
        o->reps = quick ? 5 : 50;
    if (!given[OPT_PROCESSES])
        o->processes = quick ? 1 : 2;
    if (!given[OPT_CANDIDATES])
        o->candidates = o->prompts ? 0 : 64;
    if (!given[OPT_BACKENDS]) {
        o->backends[0] = DI_BACKEND_CPU;
        o->backends[1] = DI_BACKEND_CUDA;
        o->n_backends = 2;
    }
}

static int parse(int argc, char **argv, verify_opts *o)
{
    *o = (verify_opts){.max_new = 16, .ties = 5, .seed = 1, .sampled = 3, .backend = DI_BACKEND_CPU,
                       .profile = DI_PROFILE_PORTABLE, .progress = 1};
    int given[N_OPTS] = {0};
    int rc = dt_parse_options(&dt_verify_command, argc, argv, parse_option, o, given);
    if (rc != DT_EXIT_OK)
        return rc;
    if (!o->model)
        return dt_usage(&dt_verify_command, "--model is required");
    fill_defaults(o, given);
    return DT_EXIT_OK;
}

/* ---- Main -------------------------------------------------------------- */

static int load_prompts(verify *v)
{
    char err[512] = "";
    di_status st;
    uint32_t ctx = (uint32_t)dt_model_int(v->model, DI_MODEL_N_CTX_TRAIN);
    uint32_t max_len = ctx > v->o.max_new + 1 ? ctx - (uint32_t)v->o.max_new : 1;
    if (v->o.prompts)
        st = dt_prompts_file(v->model, v->o.prompts, &v->prompts, err, sizeof err);
    else
        st = dt_prompts_builtin(v->model, max_len, (uint64_t)v->o.seed, &v->prompts, err, sizeof err);
    if (st)
        return dt_fail(&dt_verify_command, "preparing the prompts", st, err);
    dt_session_opts so = {v->o.backend, v->o.profile, v->o.threads[0], 1, 0, v->o.device, v->o.cpu_path};
    st = dt_prompts_near_ties(v->model, &so, (uint32_t)v->o.candidates, NEAR_TIE_KEEP, (uint64_t)v->o.seed,
                              &v->prompts, err, sizeof err);
    if (st)
        return dt_fail(&dt_verify_command, "searching near-tie prompts", st, err);
    st = dt_prompts_add_sampled(&v->prompts, (uint32_t)v->o.sampled, (uint64_t)v->o.seed, err, sizeof err);
    if (st)
        return dt_fail(&dt_verify_command, "adding the sampled requests", st, err);
    for (uint32_t i = 0; i < v->prompts.n; i++)
        v->longest = v->prompts.p[i].n > v->longest ? v->prompts.p[i].n : v->longest;
    return DT_EXIT_OK;
}

/* Fails early, with a plain message, when the reference settings cannot run. */
static int check_reference_settings(const verify *v)
{
    dt_session_opts so = {v->o.backend, v->o.profile, v->o.threads[0], 1, 0, v->o.device, v->o.cpu_path};
    di_session *s = NULL;
    char err[256] = "", what[128];
    di_status st = dt_open_session(v->model, &so, &s, err, sizeof err);
    di_session_free(s);
    snprintf(what, sizeof what, "cannot run the reference (backend %s, profile %s, %ld threads)",
             dt_backend_name(v->o.backend), dt_profile_name(v->o.profile), v->o.threads[0]);
    return st ? dt_fail(&dt_verify_command, what, st, err) : DT_EXIT_OK;
}

static void free_verify(verify *v)
{
    if (v->ref)
        for (uint32_t i = 0; i < v->prompts.n; i++)
            dt_trace_free(&v->ref[i]);
    free(v->ref);
    free(v->ties);
    dt_prompts_free(&v->prompts);
    di_model_free(v->model);
    free(v);
}

int dt_cmd_verify(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* a live server: tools/detinfer_verify_url.c */
        if (!strcmp(argv[i], "--url") || !strncmp(argv[i], "--url=", 6))
            return dt_cmd_verify_url(argc, argv);
    verify *v = calloc(1, sizeof *v);
    if (!v)
        return dt_fail(&dt_verify_command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    int rc = parse(argc, argv, &v->o);
    char err[256] = "";
    if (rc == DT_EXIT_OK && !dt_perturb_from_env(&v->perturb, &(dt_perturb){0}, err, sizeof err))
        rc = dt_usage(&dt_verify_command, "%s", err);
    if (rc == DT_EXIT_OK)
        rc = dt_load_model(&dt_verify_command, v->o.model, &v->model);
    if (rc == DT_EXIT_OK) {
        v->n_vocab = dt_model_int(v->model, DI_MODEL_N_VOCAB);
        rc = check_reference_settings(v);
    }
    if (rc == DT_EXIT_OK) {
        rc = load_prompts(v);
    }
    if (rc == DT_EXIT_OK) {
        v->ref = calloc(v->prompts.n, sizeof *v->ref);
        v->ties = calloc((size_t)v->prompts.n * v->o.max_new, sizeof *v->ties);
        if (!v->ref || !v->ties)
            rc = dt_fail(&dt_verify_command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    }
    if (rc == DT_EXIT_OK) {
        verify_plan(v);
        uint64_t total = v->prompts.n;
        for (uint32_t i = 0; i < v->n_rows; i++)
            total += v->rows[i].n_queue;
        dt_progress_init(&v->progress, total, v->o.progress);
        rc = verify_run_reference(v);
    }
    if (rc == DT_EXIT_OK) {
        for (uint32_t i = 0; i < v->n_rows; i++)
            verify_run_row(v, i);
        dt_progress_end(&v->progress);
        uint64_t requests, rows;
        uint32_t bad;
        rc = verify_verdict(v, &requests, &rows, &bad) ? DT_EXIT_OK : DT_EXIT_FAIL;
        if (!v->o.json)
            verify_print_text(v);
        else if (verify_print_json(v) != DT_EXIT_OK)
            rc = DT_EXIT_FAIL;
    }
    free_verify(v);
    return rc < 0 ? DT_EXIT_OK : rc;
}
