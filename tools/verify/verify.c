/*
 * verify.c — `detinfer verify`: the determinism contract checked
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
 *   path     the other CPU kernel paths (scalar, avx2, avx512) this CPU runs
 *   mixed    the largest batch, the most threads, the smallest chunk at once
 *
 * Near ties (verify_ties.c): greedy continuations of the greedy
 * prompts and of the search's own prompts, teacher-forced, every position
 * ranked by its top-1/top-2 logit gap in ulp; the --near-ties smallest are
 * kept with their token and logits digest as the reference. Each run of the
 * plan then evaluates every near tie again (its prefix as a prompt, one
 * token, with that run's batch, chunk, threads, path or process) and its
 * token and digest are compared with the reference's.
 *
 * The report is a table of axes x result, the near ties with held/DIFFERS
 * per axis, and on a mismatch the first diverging prompt, position and the
 * two digests. Exit status 0 only when everything matched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verify/verify_state.h"

#define SEARCH_TOKEN_PROMPTS 16       /* token-id starting points of the search (no tokenizer) */
#define POSITIONS_PER_NEAR_TIE 512     /* positions searched per near tie kept, by default */

enum { OPT_MODEL, OPT_PROMPTS, OPT_REPS, OPT_MAX_NEW, OPT_BATCH, OPT_THREADS, OPT_CHUNKS, OPT_PROCESSES,
       OPT_BACKENDS, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE, OPT_CPU_PATH, OPT_NEAR_TIES, OPT_TIE_POSITIONS, OPT_SEED,
       OPT_QUICK, OPT_JSON,
       OPT_NO_PROGRESS, OPT_SAMPLED, N_OPTS };

static const cli_option options[] = {
    [OPT_MODEL] = {"--model", "FILE", "GGUF model file (required; with --url, optional: see below)"},
    [OPT_PROMPTS] = {"--prompts", "FILE", "one prompt per line ('tokens: 1,2,3' for ids; '#' comments)"},
    [OPT_REPS] = {"--reps", "N", "repetitions of each prompt on the repeat axis (default 50)"},
    [OPT_MAX_NEW] = {"--max-new", "N", "tokens generated per prompt (default 16)"},
    [OPT_BATCH] = {"--batch-sizes", "LIST", "batch sizes (default 1,2,4,8,16)"},
    [OPT_THREADS] = {"--threads", "LIST", "thread counts, the first is the reference's (default 1,2,4)"},
    [OPT_CHUNKS] = {"--chunks", "LIST", "prompt tokens per step (default 1,3,7)"},
    [OPT_PROCESSES] = {"--processes", "N", "fresh processes, 0..16 (default 2)"},
    [OPT_BACKENDS] = {"--backends", "LIST", "backends compared with the reference (default cpu,cuda)"},
    [OPT_BACKEND] = {"--backend", "NAME", "backend of the reference run: cpu (default) or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", CLI_PROFILE_HELP},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_NEAR_TIES] = {"--near-ties", "N",
                       "near ties searched for and checked on every axis (default 8, 4 with --quick; 0: none)"},
    [OPT_TIE_POSITIONS] = {"--tie-positions", "N", "positions searched for them (default 512 per near tie)"},
    [OPT_SEED] = {"--seed", "N", "seed of the prompts, slots and entry orders (default 1)"},
    [OPT_QUICK] = {"--quick", NULL,
                   "a short run: --reps 5 --batch-sizes 1,4,16 --threads 1,2 --chunks 3 --processes 1 --near-ties 4"},
    [OPT_JSON] = {"--json", NULL, "the report as one JSON object on stdout"},
    [OPT_NO_PROGRESS] = {"--no-progress", NULL, "no progress bar on stderr"},
    [OPT_SAMPLED] = {"--sampled", "N",
                     "sampled requests added, each with its own seed (default 3; 0: greedy only)"},
    {NULL, NULL, NULL},
};

const cli_command vf_command = {
    "verify",
    "--model FILE [--prompts FILE] [--reps N] [--batch-sizes LIST] [--threads LIST] [options]",
    "Checks that every logits row and chosen token (greedy, and sampled with\n"
    "seeds) is bitwise identical across repetitions, batch sizes (continuous\n"
    "batching with other requests), thread counts, prompt chunk sizes, fresh\n"
    "processes, backends and CPU paths, against the prompt run alone.\n"
    "Near ties: the positions of greedy continuations (teacher-forced) whose two\n"
    "largest logits are fewest ulp apart, each re-run on every axis; the report\n"
    "shows per near tie and axis whether the token and the logits digest held.\n"
    "The built-in prompts are text (with confusable ones) for a model with a\n"
    "tokenizer, token ids otherwise. Exit status 0 only when everything matched.\n"
    "'detinfer verify --url http://HOST:PORT' checks a live `detinfer serve` instead\n"
    "(its options are listed after these).\n"
    "Test only: DETINFER_TEST_PERTURB=SLOT:POS flips the lowest bit of one logit of\n"
    "batch slot SLOT at position POS in the batched runs (child:POS: in the fresh\n"
    "processes) before hashing; tie-token:K / tie-digest:K alter near tie K's token\n"
    "or digest in the batched runs before the comparison: to prove the checks can fail.",
    options,
};

/* ---- Options ------------------------------------------------------------- */

static int parse_backends(const char *text, verify_opts *o)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", text);
    o->n_backends = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (o->n_backends == MAX_LIST ||
            !cli_parse_backend(&vf_command, "--backends", tok, &o->backends[o->n_backends++]))
            return 0;
    return o->n_backends > 0 || cli_usage(&vf_command, "--backends wants a list like cpu,cuda") == 0;
}

static int parse_option(int k, const char *v, void *opts)
{
    verify_opts *o = opts;
    const char *name = options[k].name;
    switch (k) {
    case OPT_MODEL: o->model = v; return 1;
    case OPT_PROMPTS: o->prompts = v; return 1;
    case OPT_REPS: return cli_parse_long(&vf_command, name, v, 1, 100000, &o->reps);
    case OPT_MAX_NEW: return cli_parse_long(&vf_command, name, v, 1, 4096, &o->max_new);
    case OPT_BATCH: return cli_parse_long_list(&vf_command, name, v, 1, 4096, o->batch, MAX_LIST, &o->n_batch);
    case OPT_THREADS: return cli_parse_long_list(&vf_command, name, v, 1, 256, o->threads, MAX_LIST, &o->n_threads);
    case OPT_CHUNKS: return cli_parse_long_list(&vf_command, name, v, 1, 1 << 20, o->chunks, MAX_LIST, &o->n_chunks);
    case OPT_PROCESSES: return cli_parse_long(&vf_command, name, v, 0, MAX_LIST, &o->processes);
    case OPT_BACKENDS: return parse_backends(v, o);
    case OPT_BACKEND: return cli_parse_backend(&vf_command, name, v, &o->backend);
    case OPT_PROFILE: return cli_parse_profile(&vf_command, name, v, &o->profile);
    case OPT_DEVICE: return cli_parse_device(&vf_command, name, v, &o->device);
    case OPT_CPU_PATH: return cli_parse_cpu_path(&vf_command, name, v, &o->cpu_path);
    case OPT_NEAR_TIES: return cli_parse_long(&vf_command, name, v, 0, 256, &o->near_ties);
    case OPT_TIE_POSITIONS: return cli_parse_long(&vf_command, name, v, 0, 1L << 24, &o->tie_positions);
    case OPT_SEED: return cli_parse_long(&vf_command, name, v, 0, 1L << 40, &o->seed);
    case OPT_QUICK: return 1;
    case OPT_JSON: o->json = 1; return 1;
    case OPT_NO_PROGRESS: o->progress = 0; return 1;
    case OPT_SAMPLED: return cli_parse_long(&vf_command, name, v, 0, 1000, &o->sampled);
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
    if (!given[OPT_NEAR_TIES])
        o->near_ties = quick ? 4 : 8;
    if (!given[OPT_TIE_POSITIONS])
        o->tie_positions = POSITIONS_PER_NEAR_TIE * o->near_ties;
    if (!given[OPT_BACKENDS]) {
        o->backends[0] = DI_BACKEND_CPU;
        o->backends[1] = DI_BACKEND_CUDA;
        o->n_backends = 2;
    }
}

static int parse(int argc, char **argv, verify_opts *o)
{
    *o = (verify_opts){.max_new = 16, .seed = 1, .sampled = 3, .backend = DI_BACKEND_CPU,
                       .profile = CLI_DEFAULT_PROFILE, .progress = 1};
    int given[N_OPTS] = {0};
    int rc = cli_parse_options(&vf_command, argc, argv, parse_option, o, given);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!o->model)
        return cli_usage(&vf_command, "--model is required");
    fill_defaults(o, given);
    return CLI_EXIT_OK;
}

/* ---- Main -------------------------------------------------------------- */

static int load_prompts(verify *v)
{
    char err[512] = "";
    di_status st;
    uint32_t ctx = (uint32_t)cli_model_int(v->model, DI_MODEL_N_CTX_TRAIN);
    uint32_t max_len = ctx > v->o.max_new + 1 ? ctx - (uint32_t)v->o.max_new : 1;
    if (v->o.prompts)
        st = vf_prompts_file(v->model, v->o.prompts, &v->prompts, err, sizeof err);
    else
        st = vf_prompts_builtin(v->model, max_len, (uint64_t)v->o.seed, &v->prompts, err, sizeof err);
    if (st)
        return cli_fail(&vf_command, "preparing the prompts", st, err);
    st = vf_prompts_add_sampled(&v->prompts, (uint32_t)v->o.sampled, (uint64_t)v->o.seed, err, sizeof err);
    if (st)
        return cli_fail(&vf_command, "adding the sampled requests", st, err);
    for (uint32_t i = 0; i < v->prompts.n; i++)
        v->longest = v->prompts.p[i].n > v->longest ? v->prompts.p[i].n : v->longest;
    return CLI_EXIT_OK;
}

/* The near ties: searched from the greedy prompts and the search's own, then
 * each one's prefix made a prompt that the runs of the plan evaluate. */
static int search_near_ties(verify *v)
{
    char err[512] = "";
    di_status st = DI_OK;
    if (v->o.near_ties == 0)
        return CLI_EXIT_OK;
    /* room for --max-new after the longest prefix, as for the prompts */
    uint32_t ctx = (uint32_t)cli_model_int(v->model, DI_MODEL_N_CTX_TRAIN);
    uint32_t max_len = ctx > v->o.max_new + 1 ? ctx - (uint32_t)v->o.max_new : 1;
    for (uint32_t i = 0; i < v->prompts.n && st == DI_OK; i++)
        if (!v->prompts.p[i].sampling.size)
            st = vf_prompts_add_copy(&v->search, &v->prompts.p[i], err, sizeof err);
    if (st == DI_OK)
        st = vf_prompts_search(v->model, max_len, SEARCH_TOKEN_PROMPTS, (uint64_t)v->o.seed, &v->search, err,
                               sizeof err);
    cli_session_opts so = {.backend = v->o.backend, .profile = v->o.profile,
                          .threads = v->o.threads[0], .max_sequences = 1, .context_length = 0,
                          .device = v->o.device, .cpu_path = v->o.cpu_path};
    if (st == DI_OK) {
        if (v->o.progress && isatty(STDERR_FILENO))
            fprintf(stderr, "searching near ties...\r");
        st = vf_near_ties_search(v->model, &so, v->search.p, v->search.n, max_len, (uint64_t)v->o.tie_positions,
                                 (uint32_t)v->o.near_ties, (uint64_t)v->o.seed, &v->ties, err, sizeof err);
    }
    if (st)
        return cli_fail(&vf_command, "searching near ties", st, err);
    v->tie_prompts = calloc(v->ties.n ? v->ties.n : 1, sizeof *v->tie_prompts);
    v->tie_results = calloc((size_t)(v->ties.n ? v->ties.n : 1) * MAX_ROWS, sizeof *v->tie_results);
    if (!v->tie_prompts || !v->tie_results)
        return cli_fail(&vf_command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    for (uint32_t k = 0; k < v->ties.n; k++) {
        const vf_near_tie *t = &v->ties.t[k];
        v->tie_prompts[k] = (vf_prompt){NULL, NULL, t->tokens, t->position + 1, {0}}; /* tokens: the tie's */
        v->longest = t->position + 1 > v->longest ? t->position + 1 : v->longest;
    }
    return CLI_EXIT_OK;
}

/* Fails early, with a plain message, when the reference settings cannot run. */
static int check_reference_settings(const verify *v)
{
    cli_session_opts so = {.backend = v->o.backend, .profile = v->o.profile,
                          .threads = v->o.threads[0], .max_sequences = 1, .context_length = 0,
                          .device = v->o.device, .cpu_path = v->o.cpu_path};
    di_session *s = NULL;
    char err[256] = "", what[128];
    di_status st = cli_open_session(v->model, &so, &s, err, sizeof err);
    di_session_free(s);
    snprintf(what, sizeof what, "cannot run the reference (backend %s, profile %s, %ld threads)",
             cli_backend_name(v->o.backend), cli_profile_name(v->o.profile), v->o.threads[0]);
    return st ? cli_fail(&vf_command, what, st, err) : CLI_EXIT_OK;
}

static void free_verify(verify *v)
{
    if (v->ref)
        for (uint32_t i = 0; i < v->prompts.n; i++)
            vf_trace_free(&v->ref[i]);
    free(v->ref);
    free(v->tie_prompts); /* their tokens are the near ties' */
    free(v->tie_results);
    vf_near_ties_free(&v->ties);
    vf_prompts_free(&v->search);
    vf_prompts_free(&v->prompts);
    di_model_free(v->model);
    free(v);
}

int cli_cmd_verify(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* a live server: tools/verify/verify_url.c */
        if (!strcmp(argv[i], "--url") || !strncmp(argv[i], "--url=", 6))
            return cli_cmd_verify_url(argc, argv);
    for (int i = 1; i < argc; i++) /* both modes' options */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            cli_print_help(&vf_command, stdout);
            printf("\n");
            vu_print_help(stdout);
            return CLI_EXIT_OK;
        }
    verify *v = calloc(1, sizeof *v);
    if (!v)
        return cli_fail(&vf_command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    int rc = parse(argc, argv, &v->o);
    char err[256] = "";
    if (rc == CLI_EXIT_OK && !vf_test_hooks_from_env(&v->hooks, err, sizeof err))
        rc = cli_usage(&vf_command, "%s", err);
    if (rc == CLI_EXIT_OK)
        rc = cli_load_model(&vf_command, v->o.model, &v->model);
    if (rc == CLI_EXIT_OK) {
        v->n_vocab = cli_model_int(v->model, DI_MODEL_N_VOCAB);
        rc = check_reference_settings(v);
    }
    if (rc == CLI_EXIT_OK)
        rc = load_prompts(v);
    if (rc == CLI_EXIT_OK)
        rc = search_near_ties(v);
    if (rc == CLI_EXIT_OK) {
        v->ref = calloc(v->prompts.n, sizeof *v->ref);
        if (!v->ref)
            rc = cli_fail(&vf_command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    }
    if (rc == CLI_EXIT_OK) {
        verify_plan(v);
        uint64_t total = v->prompts.n;
        for (uint32_t i = 0; i < v->n_rows; i++)
            total += v->rows[i].n_queue + v->ties.n;
        cli_progress_init(&v->progress, total, v->o.progress);
        rc = verify_run_reference(v);
    }
    if (rc == CLI_EXIT_OK) {
        for (uint32_t i = 0; i < v->n_rows; i++)
            verify_run_row(v, i);
        cli_progress_end(&v->progress);
        uint64_t requests, rows;
        uint32_t bad;
        rc = verify_verdict(v, &requests, &rows, &bad) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
        if (!v->o.json)
            verify_print_text(v);
        else if (verify_print_json(v) != CLI_EXIT_OK)
            rc = CLI_EXIT_FAIL;
    }
    free_verify(v);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
