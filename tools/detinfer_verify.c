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
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"
#include "detinfer_verify.h"

#define MAX_LIST 16
#define MAX_ROWS (2 + 5 * MAX_LIST) /* repeat, mixed, and five lists of axes */
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

static const dt_command command = {
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

typedef struct verify_opts {
    const char *model, *prompts;
    long reps, max_new, processes, ties, candidates, seed, sampled;
    long batch[MAX_LIST], threads[MAX_LIST], chunks[MAX_LIST];
    int n_batch, n_threads, n_chunks;
    di_backend backends[MAX_LIST];
    int n_backends;
    di_backend backend;
    di_profile profile;
    long device;
    di_cpu_path cpu_path;
    int json, progress;
} verify_opts;

typedef enum row_status { ROW_OK, ROW_MISMATCH, ROW_SKIPPED, ROW_ERROR } row_status;

/* One run of the plan: one axis changed from the reference. */
typedef struct vrow {
    const char *axis;
    char value[32];
    uint32_t batch, chunk, n_queue;
    long threads;
    di_backend backend;
    int fresh;       /* run in a fresh process */
    int perturbable; /* the test hook may act here (batch > 1) */
    uint64_t seed;
    row_status status;
    uint64_t requests, rows, differing;
    double seconds;
    char detail[320];
} vrow;

typedef struct mismatch {
    int set;
    uint32_t row, request, prompt, slot, pos;
    int64_t choice; /* generated token index at pos, or -1 for a prompt position */
    di_digest want, got, want_sequence, got_sequence;
    int32_t want_token, got_token;
} mismatch;

typedef struct tie_count {
    uint32_t held, reached; /* runs that chose the reference token / reached it with the same history */
} tie_count;

typedef struct verify {
    verify_opts o;
    di_model *model;
    int64_t n_vocab;
    uint32_t longest;
    dt_prompt_set prompts;
    dt_trace *ref;    /* [n prompts] the reference traces */
    tie_count *ties;  /* [n prompts][max_new] */
    vrow rows[MAX_ROWS];
    uint32_t n_rows, current;
    mismatch first;
    dt_progress progress;
    dt_perturb perturb; /* TEST ONLY: batched runs */
    double ref_seconds;
} verify;

/* ---- Options ------------------------------------------------------------- */

static int parse_backends(const char *text, verify_opts *o)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", text);
    o->n_backends = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (o->n_backends == MAX_LIST || !dt_parse_backend(&command, "--backends", tok, &o->backends[o->n_backends++]))
            return 0;
    return o->n_backends > 0 || dt_usage(&command, "--backends wants a list like cpu,cuda") == 0;
}

static int parse_option(int k, const char *v, void *opts)
{
    verify_opts *o = opts;
    const char *name = options[k].name;
    switch (k) {
    case OPT_MODEL: o->model = v; return 1;
    case OPT_PROMPTS: o->prompts = v; return 1;
    case OPT_REPS: return dt_parse_long(&command, name, v, 1, 100000, &o->reps);
    case OPT_MAX_NEW: return dt_parse_long(&command, name, v, 1, 4096, &o->max_new);
    case OPT_BATCH: return dt_parse_long_list(&command, name, v, 1, 4096, o->batch, MAX_LIST, &o->n_batch);
    case OPT_THREADS: return dt_parse_long_list(&command, name, v, 1, 256, o->threads, MAX_LIST, &o->n_threads);
    case OPT_CHUNKS: return dt_parse_long_list(&command, name, v, 1, 1 << 20, o->chunks, MAX_LIST, &o->n_chunks);
    case OPT_PROCESSES: return dt_parse_long(&command, name, v, 0, MAX_LIST, &o->processes);
    case OPT_BACKENDS: return parse_backends(v, o);
    case OPT_BACKEND: return dt_parse_backend(&command, name, v, &o->backend);
    case OPT_PROFILE: return dt_parse_profile(&command, name, v, &o->profile);
    case OPT_DEVICE: return dt_parse_device(&command, name, v, &o->device);
    case OPT_CPU_PATH: return dt_parse_cpu_path(&command, name, v, &o->cpu_path);
    case OPT_TIES: return dt_parse_long(&command, name, v, 0, 1000, &o->ties);
    case OPT_CANDIDATES: return dt_parse_long(&command, name, v, 0, 4096, &o->candidates);
    case OPT_SEED: return dt_parse_long(&command, name, v, 0, 1L << 40, &o->seed);
    case OPT_QUICK: return 1;
    case OPT_JSON: o->json = 1; return 1;
    case OPT_NO_PROGRESS: o->progress = 0; return 1;
    case OPT_SAMPLED: return dt_parse_long(&command, name, v, 0, 1000, &o->sampled);
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
    int rc = dt_parse_options(&command, argc, argv, parse_option, o, given);
    if (rc != DT_EXIT_OK)
        return rc;
    if (!o->model)
        return dt_usage(&command, "--model is required");
    fill_defaults(o, given);
    return DT_EXIT_OK;
}

/* ---- Comparing traces ---------------------------------------------------- */

static int trace_copy(dt_trace *dst, const dt_trace *src)
{
    if (!dt_trace_init(dst, src->n_prompt, src->max_new))
        return 0;
    dst->prompt = src->prompt;
    dst->slot = src->slot;
    dst->sequence = src->sequence;
    memcpy(dst->digests, src->digests, src->n_pos * sizeof *src->digests);
    memcpy(dst->tokens, src->tokens, src->max_new * sizeof *src->tokens);
    memcpy(dst->runner_up, src->runner_up, src->max_new * sizeof *src->runner_up);
    memcpy(dst->best_logit, src->best_logit, src->max_new * sizeof *src->best_logit);
    memcpy(dst->second_logit, src->second_logit, src->max_new * sizeof *src->second_logit);
    return 1;
}

static void keep_reference(void *ctx, uint32_t request, const dt_trace *t)
{
    verify *v = ctx;
    (void)request;
    if (!v->ref[t->prompt].digests && !trace_copy(&v->ref[t->prompt], t))
        fprintf(stderr, "detinfer verify: out of memory keeping the reference\n");
    dt_progress_add(&v->progress, 1, "reference");
}

/* Near ties: a choice counts while the tokens before it matched the reference. */
static void count_ties(verify *v, const dt_trace *ref, const dt_trace *t)
{
    tie_count *tc = &v->ties[(size_t)t->prompt * ref->max_new];
    for (uint32_t k = 0; k < ref->max_new && k < t->max_new; k++) {
        tc[k].reached++;
        if (t->tokens[k] != ref->tokens[k])
            break;
        tc[k].held++;
    }
}

static void compare_trace(void *ctx, uint32_t request, const dt_trace *t)
{
    verify *v = ctx;
    vrow *r = &v->rows[v->current];
    const dt_trace *ref = &v->ref[t->prompt];
    char label[48];
    snprintf(label, sizeof label, "%s %s", r->axis, r->value);
    dt_progress_add(&v->progress, 1, label);
    r->requests++;
    r->rows += t->n_pos;
    count_ties(v, ref, t);
    uint32_t pos = 0;
    while (pos < ref->n_pos && di_digest_equal(&ref->digests[pos], &t->digests[pos]))
        pos++;
    if (pos == ref->n_pos && di_digest_equal(&ref->sequence, &t->sequence))
        return;
    r->differing++;
    if (r->status == ROW_OK)
        r->status = ROW_MISMATCH;
    if (v->first.set)
        return;
    mismatch *m = &v->first;
    *m = (mismatch){.set = 1, .row = v->current, .request = request, .prompt = t->prompt, .slot = t->slot,
                    .pos = pos, .choice = -1, .want_sequence = ref->sequence, .got_sequence = t->sequence};
    if (pos < ref->n_pos) {
        m->want = ref->digests[pos];
        m->got = t->digests[pos];
        if (pos + 1 >= ref->n_prompt) {
            m->choice = pos + 1 - ref->n_prompt;
            m->want_token = ref->tokens[m->choice];
            m->got_token = t->tokens[m->choice];
        }
    }
}

/* ---- Running the plan ---------------------------------------------------- */

static vrow *add_row(verify *v, const char *axis, uint32_t batch, long threads, uint32_t chunk,
                     di_backend backend, uint32_t n_queue)
{
    vrow *r = &v->rows[v->n_rows];
    *r = (vrow){.axis = axis, .batch = batch, .threads = threads, .chunk = chunk, .backend = backend,
                .n_queue = n_queue, .seed = (uint64_t)v->o.seed * 1000003u + v->n_rows};
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

static void plan(verify *v)
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
        snprintf(r->value, sizeof r->value, "%s", dt_backend_name(o->backends[i]));
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

static uint32_t *make_queue(uint32_t n_queue, uint32_t n_prompts, uint32_t offset)
{
    uint32_t *q = malloc((n_queue ? n_queue : 1) * sizeof *q);
    for (uint32_t j = 0; q && j < n_queue; j++)
        q[j] = (j + offset) % n_prompts; /* each row starts at another prompt */
    return q;
}

static void run_in_process(verify *v, vrow *r)
{
    dt_session_opts so = {r->backend, v->o.profile, r->threads, r->batch,
                          (int64_t)v->longest + v->o.max_new, v->o.device, v->o.cpu_path};
    di_session *s = NULL;
    char err[256] = "";
    di_status st = dt_open_session(v->model, &so, &s, err, sizeof err);
    if (st == DI_ERR_BACKEND_UNAVAILABLE || st == DI_ERR_UNSUPPORTED) {
        r->status = ROW_SKIPPED;
        snprintf(r->detail, sizeof r->detail, "%s: %s", di_status_name(st), err);
        dt_progress_add(&v->progress, r->n_queue, "");
        return;
    }
    uint32_t *queue = make_queue(r->n_queue, v->prompts.n, v->current);
    dt_perturb none = {0};
    dt_engine_cfg cfg = {r->batch, r->chunk, (uint32_t)v->o.max_new, r->seed,
                         r->perturbable ? v->perturb : none, compare_trace, v};
    if (st == DI_OK)
        st = queue ? dt_engine_run(s, v->n_vocab, v->prompts.p, queue, r->n_queue, &cfg, err, sizeof err)
                   : DI_ERR_OUT_OF_MEMORY;
    if (st) {
        r->status = ROW_ERROR;
        snprintf(r->detail, sizeof r->detail, "%s: %s", di_status_name(st), err);
    }
    free(queue);
    di_session_free(s);
}

static void run_row(verify *v, uint32_t index)
{
    vrow *r = &v->rows[index];
    v->current = index;
    double t0 = dt_now();
    if (r->fresh) {
        char err[256] = "";
        const dt_session_opts so = {r->backend, v->o.profile, r->threads, 1, 0, v->o.device, v->o.cpu_path};
        di_status st = dt_child_traces(v->o.model, (uint32_t)v->o.max_new, &so, v->prompts.p, v->prompts.n,
                                       compare_trace, v, err, sizeof err);
        if (st) {
            r->status = ROW_ERROR;
            snprintf(r->detail, sizeof r->detail, "%s", err);
        }
    } else {
        run_in_process(v, r);
    }
    r->seconds = dt_now() - t0;
}

/* The reference: every prompt alone, whole prompt, first thread count. */
static int run_reference(verify *v)
{
    uint32_t np = v->prompts.n;
    dt_session_opts so = {v->o.backend, v->o.profile, v->o.threads[0], 1, (int64_t)v->longest + v->o.max_new,
                          v->o.device, v->o.cpu_path};
    di_session *s = NULL;
    char err[256] = "";
    double t0 = dt_now();
    di_status st = dt_open_session(v->model, &so, &s, err, sizeof err);
    uint32_t *queue = make_queue(np, np, 0);
    dt_engine_cfg cfg = {1, 0, (uint32_t)v->o.max_new, (uint64_t)v->o.seed, {0}, keep_reference, v};
    if (st == DI_OK)
        st = queue ? dt_engine_run(s, v->n_vocab, v->prompts.p, queue, np, &cfg, err, sizeof err)
                   : DI_ERR_OUT_OF_MEMORY;
    free(queue);
    di_session_free(s);
    v->ref_seconds = dt_now() - t0;
    for (uint32_t i = 0; st == DI_OK && i < np; i++)
        if (!v->ref[i].digests)
            st = DI_ERR_OUT_OF_MEMORY;
    return st ? dt_fail(&command, "the reference run", st, err) : DT_EXIT_OK;
}

/* ---- Near ties ------------------------------------------------------------ */

typedef struct tie {
    uint32_t prompt, choice;
    double gap;
} tie;

static int tie_order(const void *a, const void *b)
{
    const tie *x = a, *y = b;
    if (x->gap != y->gap)
        return x->gap < y->gap ? -1 : 1;
    return x->prompt != y->prompt ? (x->prompt < y->prompt ? -1 : 1) : (x->choice < y->choice ? -1 : 1);
}

/* The smallest top-2 gaps of the reference run's greedy requests, smallest first. */
static uint32_t smallest_gaps(const verify *v, tie **out)
{
    uint32_t n = 0, max_new = (uint32_t)v->o.max_new;
    tie *t = malloc((size_t)v->prompts.n * max_new * sizeof *t);
    for (uint32_t p = 0; t && p < v->prompts.n; p++)
        for (uint32_t k = 0; k < max_new && !v->prompts.p[p].sampling.size; k++)
            if (v->ref[p].runner_up[k] >= 0)
                t[n++] = (tie){p, k, (double)v->ref[p].best_logit[k] - (double)v->ref[p].second_logit[k]};
    if (t)
        qsort(t, n, sizeof *t, tie_order);
    *out = t;
    return n < (uint32_t)v->o.ties ? n : (uint32_t)v->o.ties;
}

/* ---- Report ------------------------------------------------------------ */

static const char *status_word(row_status s)
{
    return s == ROW_OK ? "ok" : s == ROW_MISMATCH ? "MISMATCH" : s == ROW_SKIPPED ? "skipped" : "ERROR";
}

static void chunk_text(uint32_t chunk, char *buf, size_t n)
{
    if (chunk)
        snprintf(buf, n, "%u", chunk);
    else
        snprintf(buf, n, "whole");
}

static int verdict(const verify *v, uint64_t *requests, uint64_t *rows, uint32_t *bad_rows)
{
    *requests = v->prompts.n;
    *rows = 0;
    *bad_rows = 0;
    for (uint32_t p = 0; p < v->prompts.n; p++)
        *rows += v->ref[p].n_pos;
    for (uint32_t i = 0; i < v->n_rows; i++) {
        *requests += v->rows[i].requests;
        *rows += v->rows[i].rows;
        *bad_rows += v->rows[i].status == ROW_MISMATCH || v->rows[i].status == ROW_ERROR;
    }
    return *bad_rows == 0;
}

static void print_table(const verify *v)
{
    printf("%-8s %-11s %5s %7s %5s %8s %11s %8s  %s\n", "axis", "value", "batch", "threads", "chunk", "requests",
           "logits-rows", "seconds", "result");
    for (uint32_t i = 0; i < v->n_rows; i++) {
        const vrow *r = &v->rows[i];
        char chunk[16];
        chunk_text(r->chunk, chunk, sizeof chunk);
        printf("%-8s %-11s %5u %7ld %5s %8llu %11llu %8.2f  %s", r->axis, r->value, r->batch, r->threads, chunk,
               (unsigned long long)r->requests, (unsigned long long)r->rows, r->seconds, status_word(r->status));
        if (r->status == ROW_MISMATCH)
            printf(" (%llu of %llu requests differ)", (unsigned long long)r->differing,
                   (unsigned long long)r->requests);
        if (r->detail[0])
            printf(": %s", r->detail);
        putchar('\n');
    }
}

static void print_prompt_label(const dt_prompt *p, int width)
{
    char buf[64];
    size_t n = strlen(p->label) < 40 ? strlen(p->label) : 40;
    while (n > 0 && n < strlen(p->label) && ((unsigned char)p->label[n] & 0xc0) == 0x80)
        n--; /* do not cut a UTF-8 sequence */
    int at = 0;
    for (size_t i = 0; i < n && at < (int)sizeof buf - 2; i++)
        buf[at++] = p->label[i] == '\n' || p->label[i] == '\t' ? ' ' : p->label[i];
    buf[at] = '\0';
    printf("%-*s", width, buf);
}

static void print_ties(const verify *v)
{
    tie *t;
    uint32_t n = smallest_gaps(v, &t);
    if (n == 0) {
        free(t);
        return;
    }
    printf("\nnear ties: the smallest top-2 logit gaps of the reference run, and whether every run\n"
           "that reached them with the same tokens chose the same token\n");
    printf("%-40s %8s %7s %9s %-22s %s\n", "prompt", "position", "token", "runner-up", "gap", "held");
    for (uint32_t i = 0; i < n; i++) {
        const dt_trace *r = &v->ref[t[i].prompt];
        const tie_count *tc = &v->ties[(size_t)t[i].prompt * v->o.max_new + t[i].choice];
        char gap[40];
        snprintf(gap, sizeof gap, "%.3g (%llu ulp)", t[i].gap,
                 (unsigned long long)dt_ulp_distance(r->best_logit[t[i].choice], r->second_logit[t[i].choice]));
        print_prompt_label(&v->prompts.p[t[i].prompt], 40);
        printf(" %8u %7d %9d %-22s %s (%u/%u runs)\n", r->n_prompt - 1 + t[i].choice, r->tokens[t[i].choice],
               r->runner_up[t[i].choice], gap, tc->held == tc->reached ? "yes" : "NO", tc->held, tc->reached);
    }
    free(t);
}

static void print_mismatch(const verify *v)
{
    const mismatch *m = &v->first;
    const vrow *r = &v->rows[m->row];
    const dt_prompt *p = &v->prompts.p[m->prompt];
    char chunk[16], want[DI_DIGEST_HEX_SIZE], got[DI_DIGEST_HEX_SIZE];
    chunk_text(r->chunk, chunk, sizeof chunk);
    printf("\nfirst divergence: %s %s (batch %u, %ld thread%s, chunk %s, backend %s%s), request %u in slot %u\n",
           r->axis, r->value, r->batch, r->threads, r->threads == 1 ? "" : "s", chunk, dt_backend_name(r->backend),
           r->fresh ? ", fresh process" : "", m->request, m->slot);
    printf("  prompt %u ", m->prompt);
    dt_print_quoted(stdout, p->label, strlen(p->label));
    if (m->pos < v->ref[m->prompt].n_pos) {
        dt_hex(&m->want, want);
        dt_hex(&m->got, got);
        if (m->choice >= 0)
            printf(", position %u (where generated token %lld of %ld was chosen)\n", m->pos,
                   (long long)m->choice + 1, v->o.max_new);
        else
            printf(", position %u (inside the prompt of %u tokens)\n", m->pos, p->n);
        printf("  logits digest: reference %s, this run %s\n", want, got);
        if (m->choice >= 0)
            printf("  greedy token:  reference %d, this run %d\n", m->want_token, m->got_token);
    } else {
        printf(": every logits row equal, but the sequence digests differ\n");
    }
    dt_hex(&m->want_sequence, want);
    dt_hex(&m->got_sequence, got);
    printf("  sequence digest: reference %s, this run %s\n", want, got);
}

static void print_text(const verify *v)
{
    printf("detinfer verify: %s (%s, vocabulary %lld), libdetinfer %s\n", v->o.model,
           di_model_architecture(v->model), (long long)v->n_vocab, di_version_string());
    printf("reference: backend %s, profile %s, alone (batch 1), %ld thread%s, whole prompt in one step (%.2f s)\n",
           dt_backend_name(v->o.backend), dt_profile_name(v->o.profile), v->o.threads[0],
           v->o.threads[0] == 1 ? "" : "s", v->ref_seconds);
    printf("prompts: %s; %ld new tokens each\n\n", v->prompts.note, v->o.max_new);
    print_table(v);
    print_ties(v);
    uint64_t requests, rows;
    uint32_t bad;
    if (verdict(v, &requests, &rows, &bad)) {
        printf("\nPASS: %llu requests, %llu logits rows, every digest equal to the reference\n",
               (unsigned long long)requests, (unsigned long long)rows);
        return;
    }
    if (v->first.set)
        print_mismatch(v);
    printf("\nFAIL: %u of %u runs differ or failed (%llu requests, %llu logits rows)\n", bad, v->n_rows,
           (unsigned long long)requests, (unsigned long long)rows);
}

static json_t *prompt_json(const verify *v, uint32_t i)
{
    const dt_prompt *p = &v->prompts.p[i];
    json_t *o = json_pack("{s:I, s:s, s:o}", "index", (json_int_t)i, "kind",
                          p->text ? "text" : p->search_gap >= 0 ? "near-tie" : "tokens", "text", dt_json_text(p->text));
    if (p->sampling.size)
        o = dt_json_set(o, "sampling",
                        dt_json_set(dt_json_sampling(&p->sampling), "seed", json_integer((json_int_t)p->sampling.seed)));
    if (p->search_gap >= 0)
        o = dt_json_set(o, "search_gap", dt_json_real(p->search_gap));
    o = dt_json_set(o, "tokens", dt_json_tokens(p->tokens, p->n));
    o = dt_json_set(o, "generated", dt_json_tokens(v->ref[i].tokens, v->ref[i].max_new));
    return dt_json_set(o, "sequence_digest", dt_json_digest(&v->ref[i].sequence));
}

static json_t *row_json(const vrow *r)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:b, s:I, s:I, s:I, s:o, s:s, s:o}", "axis", r->axis, "value",
                     r->value, "batch", (json_int_t)r->batch, "threads", (json_int_t)r->threads, "chunk",
                     (json_int_t)r->chunk, "backend", dt_backend_name(r->backend), "fresh_process", r->fresh,
                     "requests", (json_int_t)r->requests, "logits_rows", (json_int_t)r->rows, "differing_requests",
                     (json_int_t)r->differing, "seconds", dt_json_real(r->seconds), "result",
                     r->status == ROW_OK         ? "ok"
                     : r->status == ROW_MISMATCH ? "mismatch"
                     : r->status == ROW_SKIPPED  ? "skipped"
                                                 : "error",
                     "detail", dt_json_text(r->detail[0] ? r->detail : NULL));
}

static json_t *ties_json(const verify *v)
{
    tie *t;
    uint32_t n = smallest_gaps(v, &t);
    json_t *a = t ? json_array() : NULL;
    for (uint32_t i = 0; i < n; i++) {
        const dt_trace *r = &v->ref[t[i].prompt];
        const tie_count *tc = &v->ties[(size_t)t[i].prompt * v->o.max_new + t[i].choice];
        a = dt_json_push(
            a, json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:b}", "prompt", (json_int_t)t[i].prompt,
                         "position", (json_int_t)(r->n_prompt - 1 + t[i].choice), "generated_index",
                         (json_int_t)t[i].choice, "token", (json_int_t)r->tokens[t[i].choice], "runner_up",
                         (json_int_t)r->runner_up[t[i].choice], "gap", dt_json_real(t[i].gap), "gap_ulps",
                         (json_int_t)dt_ulp_distance(r->best_logit[t[i].choice], r->second_logit[t[i].choice]),
                         "runs_reached", (json_int_t)tc->reached, "runs_held", (json_int_t)tc->held, "held",
                         tc->held == tc->reached));
    }
    free(t);
    return a;
}

static json_t *mismatch_json(const verify *v)
{
    const mismatch *m = &v->first;
    if (!m->set)
        return json_null();
    const vrow *r = &v->rows[m->row];
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o}", "axis", r->axis, "value", r->value, "request",
                          (json_int_t)m->request, "slot", (json_int_t)m->slot, "prompt", (json_int_t)m->prompt,
                          "position", (json_int_t)m->pos, "generated_index",
                          m->choice >= 0 ? json_integer(m->choice) : json_null());
    if (m->pos < v->ref[m->prompt].n_pos) {
        o = dt_json_set(o, "reference_digest", dt_json_digest(&m->want));
        o = dt_json_set(o, "digest", dt_json_digest(&m->got));
    }
    if (m->choice >= 0) {
        o = dt_json_set(o, "reference_token", json_integer(m->want_token));
        o = dt_json_set(o, "token", json_integer(m->got_token));
    }
    o = dt_json_set(o, "reference_sequence_digest", dt_json_digest(&m->want_sequence));
    return dt_json_set(o, "sequence_digest", dt_json_digest(&m->got_sequence));
}

static int print_json(const verify *v)
{
    uint64_t requests, rows;
    uint32_t bad;
    int pass = verdict(v, &requests, &rows, &bad);
    json_t *prompts = json_array(), *axes = json_array();
    for (uint32_t i = 0; i < v->prompts.n; i++)
        prompts = dt_json_push(prompts, prompt_json(v, i));
    for (uint32_t i = 0; i < v->n_rows; i++)
        axes = dt_json_push(axes, row_json(&v->rows[i]));
    json_t *reference = json_pack("{s:s, s:s, s:I, s:o}", "backend", dt_backend_name(v->o.backend), "profile",
                                  dt_profile_name(v->o.profile), "threads", (json_int_t)v->o.threads[0], "seconds",
                                  dt_json_real(v->ref_seconds));
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:I, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:s}", "command",
        "verify", "library_version", di_version_string(), "build_info", di_build_info(), "model",
        dt_json_text(v->o.model), "architecture", dt_json_text(di_model_architecture(v->model)), "n_vocab",
        (json_int_t)v->n_vocab, "reference", reference, "max_new", (json_int_t)v->o.max_new, "reps",
        (json_int_t)v->o.reps, "seed", (json_int_t)v->o.seed, "prompt_source", dt_json_text(v->prompts.note),
        "prompts", prompts, "axes", axes, "near_ties", ties_json(v), "first_mismatch", mismatch_json(v),
        "requests", (json_int_t)requests, "logits_rows", (json_int_t)rows, "result", pass ? "pass" : "fail");
    return dt_json_emit(&command, root, stdout);
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
        return dt_fail(&command, "preparing the prompts", st, err);
    dt_session_opts so = {v->o.backend, v->o.profile, v->o.threads[0], 1, 0, v->o.device, v->o.cpu_path};
    st = dt_prompts_near_ties(v->model, &so, (uint32_t)v->o.candidates, NEAR_TIE_KEEP, (uint64_t)v->o.seed,
                              &v->prompts, err, sizeof err);
    if (st)
        return dt_fail(&command, "searching near-tie prompts", st, err);
    st = dt_prompts_add_sampled(&v->prompts, (uint32_t)v->o.sampled, (uint64_t)v->o.seed, err, sizeof err);
    if (st)
        return dt_fail(&command, "adding the sampled requests", st, err);
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
    return st ? dt_fail(&command, what, st, err) : DT_EXIT_OK;
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
        return dt_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    int rc = parse(argc, argv, &v->o);
    char err[256] = "";
    if (rc == DT_EXIT_OK && !dt_perturb_from_env(&v->perturb, &(dt_perturb){0}, err, sizeof err))
        rc = dt_usage(&command, "%s", err);
    if (rc == DT_EXIT_OK)
        rc = dt_load_model(&command, v->o.model, &v->model);
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
            rc = dt_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    }
    if (rc == DT_EXIT_OK) {
        plan(v);
        uint64_t total = v->prompts.n;
        for (uint32_t i = 0; i < v->n_rows; i++)
            total += v->rows[i].n_queue;
        dt_progress_init(&v->progress, total, v->o.progress);
        rc = run_reference(v);
    }
    if (rc == DT_EXIT_OK) {
        for (uint32_t i = 0; i < v->n_rows; i++)
            run_row(v, i);
        dt_progress_end(&v->progress);
        uint64_t requests, rows;
        uint32_t bad;
        rc = verdict(v, &requests, &rows, &bad) ? DT_EXIT_OK : DT_EXIT_FAIL;
        if (!v->o.json)
            print_text(v);
        else if (print_json(v) != DT_EXIT_OK)
            rc = DT_EXIT_FAIL;
    }
    free_verify(v);
    return rc < 0 ? DT_EXIT_OK : rc;
}
