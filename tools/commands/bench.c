/*
 * bench.c — `detinfer bench`: prompt processing and generation
 * speed in the style of llama-bench. "pp N" is one step of N prompt tokens;
 * "tg N" is N decode steps of one token each (after a one-token prompt that
 * is not timed). Tokens per second, mean ± sample standard deviation over
 * the repetitions, per thread count.
 *
 * Decoding one token reads every weight once, so its speed is bounded by
 * memory bandwidth: the tg figure is also given as a fraction of
 * bandwidth / weight bytes, with the bandwidth measured here (a read of a
 * large buffer with the same number of threads) and the weight bytes taken
 * as the model file's size (the token embedding table, read one row per
 * token when the output is untied, makes this an upper bound).
 *
 * "bd B" is batched decode, what a server runs: B sequences each get their
 * own BATCH_PROMPT-token prompt (untimed), then --batch-tokens steps that
 * each advance all B sequences by one token (their greedy tokens) in one
 * di_session_step; the figure is the aggregate, B x steps / time.
 *
 * The sequence digest of every tg run is compared too: all repetitions and
 * thread counts must agree (exit 1 otherwise); so are the digests of the
 * batched runs' sequences.
 *
 * --speculate ngram|FILE adds, per thread count and tg length N, decode with
 * and without speculation (tools/cli/cli_generate.c, the loops of `detinfer
 * run`) after each of the prompts (--prompt, else a generated one), the two
 * alternating prompt by prompt: the tokens per second of each from the first
 * generated token to the last, their ratio, the drafts proposed and
 * accepted. The tokens, the logits digest of each and the sequence digest
 * with speculation must be those without it (the contract of
 * di_session_seq_accept_draft), and every run's those of the first: exit 1
 * otherwise, saying where they differ.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_json.h"
#include "cli/cli_commands.h"
#include "cli/cli_generate.h"
#include "cli/cli_model.h"
#include "cli/cli_progress.h"

#define MAX_LIST 16
#define MAX_REPS 1000
#define BANDWIDTH_BYTES (256u << 20)
#define BATCH_PROMPT 16 /* prompt tokens of each sequence of a batched run */
#define SPEC_PATTERN 16 /* the generated speculation prompt: this many tokens, twice */

enum { OPT_MODEL, OPT_THREADS, OPT_PP, OPT_TG, OPT_BATCH, OPT_BATCH_TOKENS, OPT_REPS, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE, OPT_CPU_PATH, OPT_BANDWIDTH,
       OPT_JSON, OPT_SPECULATE, OPT_DRAFT_MAX, OPT_NGRAM, OPT_PROMPT };

static const cli_option options[] = {
    [OPT_MODEL] = {"--model", "FILE", "GGUF model file (required)"},
    [OPT_THREADS] = {"--threads", "LIST", "thread counts (default 1)"},
    [OPT_PP] = {"--pp", "LIST", "prompt lengths to time, 0 for none (default 128)"},
    [OPT_TG] = {"--tg", "LIST", "generation lengths to time, 0 for none (default 32)"},
    [OPT_BATCH] = {"--batch", "LIST", "batched decode: sequence counts to time, 0 for none (default 0)"},
    [OPT_BATCH_TOKENS] = {"--batch-tokens", "N", "tokens each sequence generates in a batched run (default 64)"},
    [OPT_REPS] = {"--reps", "N", "repetitions of each test (default 3)"},
    [OPT_BACKEND] = {"--backend", "NAME", "cpu (default) or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", CLI_PROFILE_HELP},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_BANDWIDTH] = {"--bandwidth", "GB/S", "memory bandwidth to use instead of measuring it"},
    [OPT_JSON] = {"--json", NULL, "results as one JSON object (llama-bench-like fields)"},
    [OPT_SPECULATE] = {"--speculate", "ngram|FILE", "also time each tg length after the prompts with and without "
                       "speculation (prompt lookup, or a draft model of the same vocabulary); the outputs must be equal"},
    [OPT_DRAFT_MAX] = {"--draft-max", "N", "with --speculate, draft tokens per step at most, 1.." CLI_STR(DI_DRAFT_MAX)
                      " (default " CLI_STR(DI_DRAFT_DEFAULT) ")"},
    [OPT_NGRAM] = {"--ngram", "N", "with --speculate, the longest key the lookup matches, 1.." CLI_STR(DI_DRAFT_MAX_NGRAM)
                  " (default " CLI_STR(DI_DRAFT_NGRAM_DEFAULT) ")"},
    [OPT_PROMPT] = {"--prompt", "TEXT", "with --speculate, a prompt (with BOS; up to " CLI_STR(MAX_LIST)
                   ", repeat the option; default a generated one: " CLI_STR(SPEC_PATTERN) " tokens twice)"},
    {NULL, NULL, NULL},
};

static const cli_command command = {
    "bench",
    "--model FILE [--threads LIST] [--pp LIST] [--tg LIST] [--batch LIST] [--reps N]\n"
    "       [--speculate ngram|FILE [--draft-max N] [--prompt TEXT]...] [--json]",
    "Prompt processing (pp N: N tokens in one step), generation (tg N: N\n"
    "one-token steps) and batched decode (bd B: B sequences, each after its\n"
    "own 16-token prompt, advanced one token each per step for --batch-tokens\n"
    "steps; aggregate tokens) in tokens per second, mean ± std over --reps\n"
    "repetitions, per thread count; generation also as a fraction of the\n"
    "memory-bandwidth limit (measured bandwidth / model bytes read per token).\n"
    "With --speculate, each tg length N is also generated after each prompt\n"
    "without and with speculation, alternating: decode tokens per second of\n"
    "each (the N - 1 tokens after the first over their time), the ratio, the\n"
    "drafts proposed and accepted; greedy, the end-of-sequence token ignored.\n"
    "The tokens and digests with speculation must equal those without (exit 1).",
    options,
};

typedef struct bench_opts {
    const char *model;
    long threads[MAX_LIST], pp[MAX_LIST], tg[MAX_LIST], batch[MAX_LIST];
    int n_threads, n_pp, n_tg, n_batch;
    long batch_tokens;
    long reps;
    double bandwidth; /* GB/s; 0: measure */
    di_backend backend;
    di_profile profile;
    long device;
    di_cpu_path cpu_path;
    int json;
    int speculate;           /* --speculate: ngram, or draft_model */
    const char *draft_model; /* --speculate FILE */
    long draft_max, ngram;
    const char *prompts[MAX_LIST]; /* --prompt */
    int n_prompts;
} bench_opts;

typedef struct result {
    long threads, n_prompt, n_gen, n_seq; /* n_seq: batched decode's sequences, else 0 */
    double mean, std, bandwidth; /* t/s, t/s, GB/s */
    double samples[MAX_REPS];
    int n_samples;
} result;

/* Decode of one tg length with and without speculation, at one thread count. */
typedef struct spec_result {
    long threads, n_gen;
    double without[MAX_REPS], with[MAX_REPS]; /* t/s per repetition, all prompts */
    int n_samples;
    double without_mean, without_std, with_mean, with_std;
    uint64_t steps, drafted, accepted; /* over the repetitions and prompts */
} spec_result;

/* One prompt of the speculation comparison. */
typedef struct spec_prompt {
    int32_t *tokens;
    uint32_t n;
    di_digest reference[MAX_LIST]; /* per tg length: the first run's sequence digest */
    int have_reference[MAX_LIST];
} spec_prompt;

/* What cli_generate hands over: the tokens, their logits digests, the time of the first. */
typedef struct spec_output {
    int32_t *tokens;
    di_digest *digests;
    uint32_t n;
    double first; /* cli_now() when the first token came */
} spec_output;

typedef struct bench {
    bench_opts o;
    di_model *model;
    int64_t n_vocab, file_size, n_params, bytes_per_token;
    int32_t *prompt;
    long max_pp, max_tg, max_batch;
    result results[3 * MAX_LIST * MAX_LIST];
    int n_results;
    di_digest tg_digest[MAX_LIST]; /* per tg length: the first run's sequence digest */
    int have_digest[MAX_LIST], tg_equal, tg_runs;
    di_digest *bd_digest[MAX_LIST]; /* per batch size: the first run's digest of each sequence */
    int bd_equal, bd_runs;
    di_model *draft;      /* --speculate FILE */
    spec_prompt sp_prompts[MAX_LIST];
    int n_sp_prompts;
    uint32_t max_sp_prompt;
    spec_result sp[MAX_LIST * MAX_LIST];
    int n_sp, sp_equal, sp_runs; /* sp_runs: runs with speculation compared */
    int drafter_failed;   /* the last failure was the drafter's */
    di_drafter *drafter;  /* the draft model's, for sessions of drafter_threads threads */
    long drafter_threads;
    spec_output out[2];   /* without, with */
} bench;

static int apply_option(int k, const char *v, void *opts)
{
    bench_opts *o = opts;
    const char *name = options[k].name;
    long bw;
    switch (k) {
    case OPT_MODEL: o->model = v; return 1;
    case OPT_THREADS: return cli_parse_long_list(&command, name, v, 1, 256, o->threads, MAX_LIST, &o->n_threads);
    case OPT_PP: return cli_parse_long_list(&command, name, v, 0, 1 << 16, o->pp, MAX_LIST, &o->n_pp);
    case OPT_TG: return cli_parse_long_list(&command, name, v, 0, 1 << 16, o->tg, MAX_LIST, &o->n_tg);
    case OPT_BATCH: return cli_parse_long_list(&command, name, v, 0, 256, o->batch, MAX_LIST, &o->n_batch);
    case OPT_BATCH_TOKENS: return cli_parse_long(&command, name, v, 1, 1 << 16, &o->batch_tokens);
    case OPT_REPS: return cli_parse_long(&command, name, v, 1, MAX_REPS, &o->reps);
    case OPT_BACKEND: return cli_parse_backend(&command, name, v, &o->backend);
    case OPT_PROFILE: return cli_parse_profile(&command, name, v, &o->profile);
    case OPT_DEVICE: return cli_parse_device(&command, name, v, &o->device);
    case OPT_CPU_PATH: return cli_parse_cpu_path(&command, name, v, &o->cpu_path);
    case OPT_BANDWIDTH:
        if (!cli_parse_long(&command, name, v, 1, 1000000, &bw))
            return 0;
        o->bandwidth = (double)bw;
        return 1;
    case OPT_JSON: o->json = 1; return 1;
    case OPT_SPECULATE:
        o->speculate = 1;
        o->draft_model = strcmp(v, "ngram") ? v : NULL;
        return 1;
    case OPT_DRAFT_MAX: return cli_parse_long(&command, name, v, 1, DI_DRAFT_MAX, &o->draft_max);
    case OPT_NGRAM: return cli_parse_long(&command, name, v, 1, DI_DRAFT_MAX_NGRAM, &o->ngram);
    case OPT_PROMPT:
        if (!*v)
            return cli_usage(&command, "--prompt is empty"), 0;
        if (o->n_prompts == MAX_LIST)
            return cli_usage(&command, "--prompt: at most %d prompts", MAX_LIST), 0;
        o->prompts[o->n_prompts++] = v;
        return 1;
    }
    return 1;
}

static int parse(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.threads = {1}, .n_threads = 1, .pp = {128}, .n_pp = 1, .tg = {32}, .n_tg = 1,
                      .batch_tokens = 64, .reps = 3, .backend = DI_BACKEND_CPU, .profile = CLI_DEFAULT_PROFILE,
                      .draft_max = DI_DRAFT_DEFAULT, .ngram = DI_DRAFT_NGRAM_DEFAULT};
    int given[sizeof options / sizeof options[0]] = {0};
    int rc = cli_parse_options(&command, argc, argv, apply_option, o, given);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!o->model)
        return cli_usage(&command, "--model is required");
    if (!o->speculate && (given[OPT_DRAFT_MAX] || given[OPT_NGRAM] || given[OPT_PROMPT]))
        return cli_usage(&command, "--draft-max, --ngram and --prompt go with --speculate");
    int timed = 0;
    for (int i = 0; i < o->n_tg; i++) {
        if (o->speculate && o->tg[i] == 1)
            return cli_usage(&command, "with --speculate, a --tg length of 1 times no decode step (give 0 or 2 and more)");
        timed |= o->tg[i] > 0;
    }
    if (o->speculate && !timed)
        return cli_usage(&command, "--speculate times generation: give a --tg length of 2 or more");
    return CLI_EXIT_OK;
}

/* ---- Memory bandwidth ------------------------------------------------------ */

typedef struct reader {
    const uint64_t *words;
    size_t n;
    uint64_t sum;
} reader;

static void *read_words(void *arg)
{
    reader *r = arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* four sums: independent loads in flight */
    size_t i = 0;
    for (; i + 4 <= r->n; i += 4) {
        /* requested 4 KiB ahead, as the library's kernels request weights:
         * the hardware prefetchers alone reach only about two thirds of
         * the bandwidth here */
        if (i % 8 == 0)
            __builtin_prefetch(r->words + i + 512);
        s0 += r->words[i];
        s1 += r->words[i + 1];
        s2 += r->words[i + 2];
        s3 += r->words[i + 3];
    }
    for (; i < r->n; i++)
        s0 += r->words[i];
    r->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* GB/s reading `bytes` with `threads` threads, best of three. */
static double measure_bandwidth(const uint64_t *buf, size_t bytes, long threads)
{
    pthread_t tid[256];
    reader r[256];
    size_t words = bytes / sizeof *buf, per = words / (size_t)threads;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = cli_now();
        long started = 0;
        for (long t = 0; t < threads; t++) {
            r[t] = (reader){buf + per * (size_t)t, t == threads - 1 ? words - per * (size_t)t : per, 0};
            if (t > 0 && pthread_create(&tid[t], NULL, read_words, &r[t]) == 0)
                started = t;
            else if (t > 0)
                read_words(&r[t]); /* no thread: read it here */
        }
        read_words(&r[0]);
        for (long t = 1; t <= started; t++)
            pthread_join(tid[t], NULL);
        double dt = cli_now() - t0;
        volatile uint64_t sink = 0;
        for (long t = 0; t < threads; t++)
            sink += r[t].sum; /* keeps the reads */
        (void)sink;
        if (dt > 0 && (double)bytes / dt / 1e9 > best)
            best = (double)bytes / dt / 1e9;
    }
    return best;
}

/* ---- Timing -------------------------------------------------------------- */

static void mean_std(const double *x, int n, double *mean, double *std)
{
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    *mean = sum / n;
    for (int i = 0; i < n; i++)
        sq += (x[i] - *mean) * (x[i] - *mean);
    *std = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
}

static di_status time_pp(di_session *s, const int32_t *prompt, uint32_t n, double *tps)
{
    const uint32_t seq = 0;
    di_status st = di_session_seq_reset(s, seq);
    double t0 = cli_now();
    if (!st)
        st = di_session_step(s, 1, &seq, &n, prompt, 0);
    double dt = cli_now() - t0;
    *tps = n / dt;
    return st;
}

/* One untimed prompt token, then n timed decode steps; the sequence digest. */
static di_status time_tg(di_session *s, int32_t first, uint32_t n, double *tps, di_digest *digest)
{
    const uint32_t seq = 0, one = 1;
    di_status st = di_session_seq_reset(s, seq);
    if (!st)
        st = di_session_step(s, 1, &seq, &one, &first, 0);
    double t0 = cli_now();
    for (uint32_t i = 0; i < n && !st; i++) {
        int32_t next;
        st = di_session_greedy_token(s, seq, &next);
        if (!st)
            st = di_session_step(s, 1, &seq, &one, &next, 0);
    }
    double dt = cli_now() - t0;
    *tps = n / dt;
    if (!st)
        st = di_session_seq_digest(s, seq, digest);
    return st;
}

/* The bench's prompt token k: spread over the vocabulary, the same every run. */
static int32_t bench_token(const bench *b, long k)
{
    return (int32_t)((k * 7919 + 13) % b->n_vocab);
}

/* Sequences 0..n_seq-1 each get their own BATCH_PROMPT-token prompt in one
 * untimed step, then n timed steps advance every one of them by its greedy
 * token; the aggregate tokens per second and each sequence's digest. */
static di_status time_bd(const bench *b, di_session *s, uint32_t n_seq, uint32_t n, double *tps,
                         di_digest *digests)
{
    uint32_t ids[256], lens[256];
    int32_t toks[256 * BATCH_PROMPT];
    di_status st = DI_OK;
    for (uint32_t q = 0; q < n_seq && !st; q++) {
        ids[q] = q;
        lens[q] = BATCH_PROMPT;
        for (uint32_t i = 0; i < BATCH_PROMPT; i++)
            toks[q * BATCH_PROMPT + i] = bench_token(b, (long)q * BATCH_PROMPT + i);
        st = di_session_seq_reset(s, q);
    }
    if (!st)
        st = di_session_step(s, n_seq, ids, lens, toks, 0);
    for (uint32_t q = 0; q < n_seq; q++)
        lens[q] = 1;
    double t0 = cli_now();
    for (uint32_t k = 0; k < n && !st; k++) {
        for (uint32_t q = 0; q < n_seq && !st; q++)
            st = di_session_greedy_token(s, q, &toks[q]);
        if (!st)
            st = di_session_step(s, n_seq, ids, lens, toks, 0);
    }
    double dt = cli_now() - t0;
    *tps = (double)n_seq * n / dt;
    for (uint32_t q = 0; q < n_seq && !st; q++)
        st = di_session_seq_digest(s, q, &digests[q]);
    return st;
}

/* ---- Speculation ---------------------------------------------------------- */

static void take_spec(void *ctx, int32_t token, const di_digest *digest)
{
    spec_output *out = ctx;
    if (out->n == 0)
        out->first = cli_now();
    out->tokens[out->n] = token;
    out->digests[out->n++] = *digest;
}

/* Prompt p, then n tokens, without (speculate 0) or with speculation into
 * b->out[speculate]; its decode tokens per second and sequence digest. */
static di_status spec_generate(bench *b, di_session *s, di_drafter *drafter, const spec_prompt *p, uint32_t n,
                               int speculate, double *tps, di_digest *digest, cli_generation *g)
{
    spec_output *out = &b->out[speculate];
    out->n = 0;
    *g = (cli_generation){.seq = 0, .prompt = p->tokens, .n_prompt = p->n, .eos = -1, .max_new = n,
                          .take = take_spec, .ctx = out, .drafter = drafter,
                          .draft_max = (uint32_t)b->o.draft_max, .ngram = (uint32_t)b->o.ngram};
    di_status st = di_session_seq_reset(s, 0);
    if (!st)
        st = speculate ? cli_generate_speculating(s, g) : cli_generate(s, g);
    b->drafter_failed = g->drafter_failed;
    double t1 = cli_now();
    if (!st && out->n != n)
        st = DI_ERR_INTERNAL;
    *tps = (n - 1) / (t1 - out->first);
    if (!st)
        st = cli_generation_digest(s, 0, p->tokens, p->n, out->tokens, out->n, digest);
    return st;
}

/* Says loudly where the output with speculation differs from the one without. */
static void spec_mismatch(bench *b, long threads, uint32_t n, int prompt, const di_digest *plain,
                          const di_digest *spec, const char *against)
{
    const spec_output *x = &b->out[0], *y = &b->out[1];
    char hx[DI_DIGEST_HEX_SIZE], hy[DI_DIGEST_HEX_SIZE];
    b->sp_equal = 0;
    for (uint32_t i = 0; i < n; i++)
        if (x->tokens[i] != y->tokens[i] || !di_digest_equal(&x->digests[i], &y->digests[i])) {
            cli_hex(&x->digests[i], hx);
            cli_hex(&y->digests[i], hy);
            fprintf(stderr,
                    "detinfer bench: SPECULATION CHANGED THE OUTPUT (threads %ld, tg%u, prompt %d): generated "
                    "token %u is %d (logits %s) without it, %d (logits %s) with it; the contract of "
                    "di_session_seq_accept_draft is broken\n",
                    threads, n, prompt + 1, i, x->tokens[i], hx, y->tokens[i], hy);
            return;
        }
    cli_hex(plain, hx);
    cli_hex(spec, hy);
    fprintf(stderr,
            "detinfer bench: %s (threads %ld, tg%u, prompt %d): sequence digest %s against %s; the contract of "
            "di_session_seq_accept_draft is broken\n",
            against, threads, n, prompt + 1, hy, hx);
}

/* Tg length n after every prompt, without and with speculation, alternating
 * prompt by prompt, --reps times; each run checked against the other and
 * against the first run of that prompt and length (any thread count). */
static di_status run_speculation(bench *b, di_session *s, di_drafter *drafter, long threads, int tg_index)
{
    const uint32_t n = (uint32_t)b->o.tg[tg_index];
    spec_result *r = &b->sp[b->n_sp++];
    *r = (spec_result){.threads = threads, .n_gen = n};
    di_status st = DI_OK;
    for (long rep = 0; rep < b->o.reps && !st; rep++) {
        double time[2] = {0, 0};
        for (int p = 0; p < b->n_sp_prompts && !st; p++) {
            spec_prompt *sp = &b->sp_prompts[p];
            di_digest dg[2];
            cli_generation g;
            double tps;
            for (int k = 0; k < 2 && !st; k++) {
                st = spec_generate(b, s, drafter, sp, n, k, &tps, &dg[k], &g);
                time[k] += (n - 1) / tps;
            }
            if (st)
                break;
            r->steps += g.steps;
            r->drafted += g.drafted;
            r->accepted += g.accepted;
            b->sp_runs++;
            if (!sp->have_reference[tg_index]) {
                sp->reference[tg_index] = dg[0];
                sp->have_reference[tg_index] = 1;
            }
            if (!di_digest_equal(&dg[0], &dg[1]) ||
                memcmp(b->out[0].tokens, b->out[1].tokens, n * sizeof *b->out[0].tokens) ||
                memcmp(b->out[0].digests, b->out[1].digests, n * sizeof *b->out[0].digests))
                spec_mismatch(b, threads, n, p, &dg[0], &dg[1], "SPECULATION CHANGED THE OUTPUT");
            else if (!di_digest_equal(&dg[0], &sp->reference[tg_index]))
                spec_mismatch(b, threads, n, p, &sp->reference[tg_index], &dg[0],
                              "THE OUTPUT DIFFERS FROM THE FIRST RUN'S");
        }
        if (st)
            break;
        const double tokens = (double)b->n_sp_prompts * (n - 1);
        r->without[r->n_samples] = tokens / time[0];
        r->with[r->n_samples++] = tokens / time[1];
    }
    if (r->n_samples) {
        mean_std(r->without, r->n_samples, &r->without_mean, &r->without_std);
        mean_std(r->with, r->n_samples, &r->with_mean, &r->with_std);
    }
    return st;
}

static result *new_result(bench *b, long threads, long pp, long tg, double bandwidth)
{
    result *r = &b->results[b->n_results++];
    *r = (result){.threads = threads, .n_prompt = pp, .n_gen = tg, .bandwidth = bandwidth};
    return r;
}

/* The batched runs of one thread count; every run's sequence digests must
 * equal the first run's (any thread count). */
static di_status run_batches(bench *b, di_session *s, long threads)
{
    di_status st = DI_OK;
    di_digest dg[256];
    for (int i = 0; i < b->o.n_batch && !st; i++) {
        const uint32_t n_seq = (uint32_t)b->o.batch[i];
        if (n_seq == 0)
            continue;
        result *r = new_result(b, threads, BATCH_PROMPT, b->o.batch_tokens, 0);
        r->n_seq = n_seq;
        for (long rep = 0; rep < b->o.reps && !st; rep++) {
            st = time_bd(b, s, n_seq, (uint32_t)b->o.batch_tokens, &r->samples[r->n_samples++], dg);
            if (st)
                break;
            b->bd_runs++;
            if (!b->bd_digest[i]) {
                if (!(b->bd_digest[i] = malloc(n_seq * sizeof dg[0])))
                    return DI_ERR_OUT_OF_MEMORY;
                memcpy(b->bd_digest[i], dg, n_seq * sizeof dg[0]);
            }
            for (uint32_t q = 0; q < n_seq; q++)
                if (!di_digest_equal(&b->bd_digest[i][q], &dg[q]))
                    b->bd_equal = 0;
        }
        mean_std(r->samples, r->n_samples, &r->mean, &r->std);
    }
    return st;
}

/* The session of one thread count (and the draft model's, the same). */
static cli_session_opts session_opts(const bench *b, long threads)
{
    /* room for the longest pp, or the 8-token warm-up, and the longest tg;
     * for the largest batch, and each of its prompts and generations */
    long ctx = (b->max_pp > 8 ? b->max_pp : 8) + b->max_tg + 2;
    if (b->max_batch > 0 && BATCH_PROMPT + b->o.batch_tokens + 1 > ctx)
        ctx = BATCH_PROMPT + b->o.batch_tokens + 1;
    if (b->o.speculate && (long)b->max_sp_prompt + b->max_tg > ctx)
        ctx = (long)b->max_sp_prompt + b->max_tg; /* the last token is never stepped */
    cli_session_opts so = {.backend = b->o.backend, .profile = b->o.profile, .threads = threads,
                          .max_sequences = b->max_batch > 1 ? b->max_batch : 1,
                          .context_length = ctx,
                          .device = b->o.device, .cpu_path = b->o.cpu_path};
    return so;
}

/* The drafter of the draft model for this thread count's sessions; the one
 * made before (prepare_speculation's, the first thread count) when it fits. */
static di_status open_drafter(bench *b, long threads, char *err, size_t err_size)
{
    if (b->drafter && b->drafter_threads == threads)
        return DI_OK;
    di_drafter_free(b->drafter);
    b->drafter = NULL;
    cli_session_opts so = session_opts(b, threads);
    di_status st = cli_open_drafter(b->model, b->draft, &so, &b->drafter, err, err_size);
    b->drafter_threads = st ? 0 : threads;
    return st;
}

static int run_threads(bench *b, long threads, double bandwidth)
{
    cli_session_opts so = session_opts(b, threads);
    di_session *s = NULL;
    char err[512] = "";
    di_status st = b->draft ? open_drafter(b, threads, err, sizeof err) : DI_OK;
    if (st)
        return cli_fail(&command, "the draft model", st, err);
    di_drafter *drafter = b->drafter;
    if ((st = cli_open_session(b->model, &so, &s, err, sizeof err)))
        return cli_fail(&command, "creating the session", st, err);
    if (!b->o.json)
        printf("session (%ld thread%s): %s\n", threads, threads == 1 ? "" : "s", di_session_backend_info(s));
    double tps;
    di_digest dg;
    st = time_pp(s, b->prompt, 8, &tps); /* warm-up: page the weights in */
    for (int i = 0; i < b->o.n_pp && !st; i++) {
        if (b->o.pp[i] == 0)
            continue;
        result *r = new_result(b, threads, b->o.pp[i], 0, bandwidth);
        for (long rep = 0; rep < b->o.reps && !st; rep++)
            st = time_pp(s, b->prompt, (uint32_t)b->o.pp[i], &r->samples[r->n_samples++]);
        mean_std(r->samples, r->n_samples, &r->mean, &r->std);
    }
    for (int i = 0; i < b->o.n_tg && !st; i++) {
        if (b->o.tg[i] == 0)
            continue;
        result *r = new_result(b, threads, 0, b->o.tg[i], bandwidth);
        for (long rep = 0; rep < b->o.reps && !st; rep++) {
            st = time_tg(s, b->prompt[0], (uint32_t)b->o.tg[i], &r->samples[r->n_samples++], &dg);
            if (st)
                break;
            b->tg_runs++;
            if (!b->have_digest[i]) {
                b->tg_digest[i] = dg;
                b->have_digest[i] = 1;
            } else if (!di_digest_equal(&b->tg_digest[i], &dg)) {
                b->tg_equal = 0;
            }
        }
        mean_std(r->samples, r->n_samples, &r->mean, &r->std);
    }
    if (!st)
        st = run_batches(b, s, threads);
    for (int i = 0; b->o.speculate && i < b->o.n_tg && !st; i++)
        if (b->o.tg[i] > 0)
            st = run_speculation(b, s, drafter, threads, i);
    if (st && b->drafter_failed)
        cli_fail(&command, "the draft model", st, di_drafter_errmsg(drafter));
    else if (st)
        cli_fail(&command, "step", st, di_session_errmsg(s));
    di_session_free(s);
    return st ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ---- Output -------------------------------------------------------------- */

static double limit_tps(const bench *b, const result *r)
{
    return r->bandwidth * 1e9 / (double)b->bytes_per_token;
}

static const char *spec_draft(const bench *b)
{
    return b->o.draft_model ? "draft-model" : "ngram";
}

static double ratio(double x, double y)
{
    return y > 0 ? x / y : 0;
}

static void print_speculation(const bench *b)
{
    printf("\nspeculation %s%s%s (draft-max %ld", spec_draft(b), b->o.draft_model ? " " : "",
           b->o.draft_model ? b->o.draft_model : "", b->o.draft_max);
    if (!b->o.draft_model)
        printf(", ngram %ld", b->o.ngram);
    printf("): %d prompt%s (", b->n_sp_prompts, b->n_sp_prompts == 1 ? "" : "s");
    if (!b->o.n_prompts)
        printf("generated: %d tokens twice", SPEC_PATTERN);
    for (int p = 0; p < b->o.n_prompts; p++)
        printf("%s%u", p ? ", " : "", b->sp_prompts[p].n);
    printf("%s), greedy, end-of-sequence ignored; decode t/s without and with it, alternating; steps (after\n"
           "the prompt's) and draft tokens summed over the prompts and repetitions\n",
           b->o.n_prompts ? " tokens" : "");
    printf("| %7s | %7s | %18s | %18s | %8s | %7s | %8s | %8s | %10s |\n", "threads", "test", "without t/s",
           "with t/s", "with/out", "steps", "drafted", "accepted", "acceptance");
    printf("| ------: | ------: | -----------------: | -----------------: | -------: | ------: | -------: | "
           "-------: | ---------: |\n");
    for (int i = 0; i < b->n_sp; i++) {
        const spec_result *r = &b->sp[i];
        char test[32];
        snprintf(test, sizeof test, "tg%ld", r->n_gen);
        printf("| %7ld | %7s | %9.2f ± %6.2f | %9.2f ± %6.2f | %7.2f× | %7llu | %8llu | %8llu | %9.1f%% |\n",
               r->threads, test, r->without_mean, r->without_std, r->with_mean, r->with_std,
               ratio(r->with_mean, r->without_mean), (unsigned long long)r->steps,
               (unsigned long long)r->drafted, (unsigned long long)r->accepted,
               100.0 * ratio((double)r->accepted, (double)r->drafted));
    }
    printf("outputs with speculation: %s across %d runs (tokens, logits digests, sequence digests)\n",
           b->sp_equal ? "equal to those without" : "DIFFERENT from those without (the contract is broken)",
           b->sp_runs);
}

static void print_text(const bench *b)
{
    printf("| %-10s | %10s | %9s | %-7s | %7s | %7s | %18s | %-24s |\n", "model", "size", "params", "backend",
           "threads", "test", "t/s", "of the bandwidth limit");
    printf("| ---------- | ---------: | --------: | ------- | ------: | ------: | -----------------: | "
           "------------------------ |\n");
    for (int i = 0; i < b->n_results; i++) {
        const result *r = &b->results[i];
        char test[32], frac[64] = "";
        if (r->n_seq)
            snprintf(test, sizeof test, "bd%ldx%ld", r->n_seq, r->n_gen);
        else
            snprintf(test, sizeof test, r->n_gen ? "tg%ld" : "pp%ld", r->n_gen ? r->n_gen : r->n_prompt);
        if (r->n_gen && !r->n_seq && r->bandwidth > 0)
            snprintf(frac, sizeof frac, "%.1f%% of %.1f t/s", 100.0 * r->mean / limit_tps(b, r), limit_tps(b, r));
        printf("| %-10.10s | %6.2f MiB | %7.2f M | %-7s | %7ld | %7s | %9.2f ± %6.2f | %-24s |\n",
               di_model_architecture(b->model), (double)b->file_size / 1048576.0, (double)b->n_params / 1e6,
               cli_backend_name(b->o.backend), r->threads, test, r->mean, r->std, frac);
    }
    if (b->tg_runs || b->bd_runs)
        printf("\n");
    if (b->tg_runs)
        printf("sequence digests of the tg runs: %s across %d runs\n",
               b->tg_equal ? "equal" : "DIFFERENT (determinism broken)", b->tg_runs);
    if (b->bd_runs)
        printf("sequence digests of the batched runs: %s across %d runs\n"
               "bdBxN: B sequences, each after its own %d-token prompt, N one-token steps of all B; "
               "aggregate t/s\n",
               b->bd_equal ? "equal" : "DIFFERENT (determinism broken)", b->bd_runs, BATCH_PROMPT);
    if (b->o.speculate)
        print_speculation(b);
}

static json_t *result_json(const bench *b, const result *r)
{
    json_t *samples = json_array();
    for (int k = 0; k < r->n_samples; k++)
        samples = cli_json_push(samples, cli_json_real(r->samples[k]));
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "n_threads", (json_int_t)r->threads, "n_prompt",
                          (json_int_t)r->n_prompt, "n_gen", (json_int_t)r->n_gen, "n_seq", (json_int_t)r->n_seq,
                          "avg_ts", cli_json_real(r->mean),
                          "stddev_ts", cli_json_real(r->std), "samples_ts", samples);
    if (r->n_gen && !r->n_seq && r->bandwidth > 0) {
        o = cli_json_set(o, "bandwidth_gbs", cli_json_real(r->bandwidth));
        o = cli_json_set(o, "weight_bytes_per_token", json_integer(b->bytes_per_token));
        o = cli_json_set(o, "bandwidth_limit_ts", cli_json_real(limit_tps(b, r)));
        o = cli_json_set(o, "bandwidth_fraction", cli_json_real(r->mean / limit_tps(b, r)));
    }
    return o;
}

static json_t *samples_json(const double *x, int n)
{
    json_t *a = json_array();
    for (int k = 0; k < n; k++)
        a = cli_json_push(a, cli_json_real(x[k]));
    return a;
}

static json_t *speculation_json(const bench *b)
{
    json_t *results = json_array(), *prompts = json_array();
    for (int i = 0; i < b->n_sp; i++) {
        const spec_result *r = &b->sp[i];
        results = cli_json_push(
            results,
            json_pack("{s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:o}", "n_threads",
                      (json_int_t)r->threads, "n_gen", (json_int_t)r->n_gen, "without_avg_ts",
                      cli_json_real(r->without_mean), "without_stddev_ts", cli_json_real(r->without_std),
                      "without_samples_ts", samples_json(r->without, r->n_samples), "with_avg_ts",
                      cli_json_real(r->with_mean), "with_stddev_ts", cli_json_real(r->with_std),
                      "with_samples_ts", samples_json(r->with, r->n_samples), "speedup",
                      cli_json_real(ratio(r->with_mean, r->without_mean)), "steps", (json_int_t)r->steps,
                      "drafted", (json_int_t)r->drafted, "accepted", (json_int_t)r->accepted, "acceptance_rate",
                      cli_json_real(ratio((double)r->accepted, (double)r->drafted))));
    }
    for (int p = 0; p < b->n_sp_prompts; p++)
        prompts = cli_json_push(prompts, json_integer(b->sp_prompts[p].n));
    return json_pack("{s:s, s:o, s:I, s:I, s:b, s:o, s:i, s:b, s:o}", "draft", spec_draft(b), "draft_model",
                     b->o.draft_model ? cli_json_text(b->o.draft_model) : json_null(), "draft_max",
                     (json_int_t)b->o.draft_max, "ngram", (json_int_t)b->o.ngram, "generated_prompt",
                     !b->o.n_prompts, "prompt_tokens", prompts, "runs", b->sp_runs, "outputs_equal",
                     b->sp_equal, "results", results);
}

static int print_json(const bench *b)
{
    json_t *results = json_array();
    for (int i = 0; i < b->n_results; i++)
        results = cli_json_push(results, result_json(b, &b->results[i]));
    json_t *root = json_pack("{s:s, s:s, s:s, s:o, s:o, s:I, s:I, s:s, s:s, s:i, s:I, s:o, s:b, s:b}", "command", "bench",
                             "library_version", di_version_string(), "build_info", di_build_info(),
                             "model_filename", cli_json_text(b->o.model), "model_type",
                             cli_json_text(di_model_architecture(b->model)), "model_size", (json_int_t)b->file_size,
                             "model_n_params", (json_int_t)b->n_params, "backend", cli_backend_name(b->o.backend),
                             "profile", cli_profile_name(b->o.profile), "numerics",
                             cli_profile_numerics(b->o.profile), "repetitions", (json_int_t)b->o.reps,
                             "results", results, "tg_digests_equal", b->tg_equal, "bd_digests_equal",
                             b->bd_equal);
    if (b->o.speculate)
        root = cli_json_set(root, "speculation", speculation_json(b));
    return cli_json_emit(&command, root, stdout);
}

static long list_max(const long *x, int n)
{
    long m = 0;
    for (int i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* The speculation comparison's prompts (tokenized, with BOS, or the
 * generated one), its draft model and room for its outputs. */
static int prepare_speculation(bench *b)
{
    b->n_sp_prompts = b->o.n_prompts ? b->o.n_prompts : 1;
    for (int p = 0; p < b->o.n_prompts; p++) {
        char err[512] = "";
        spec_prompt *sp = &b->sp_prompts[p];
        di_status st = cli_tokenize(b->model, b->o.prompts[p], 1, &sp->tokens, &sp->n, err, sizeof err);
        if (st == DI_ERR_UNSUPPORTED)
            return cli_fail(&command, "this model cannot take a text prompt (leave --prompt out)", st, err);
        if (st)
            return cli_fail(&command, "tokenizing --prompt", st, err);
        if (sp->n == 0) {
            fprintf(stderr, "detinfer bench: --prompt '%s' gives no tokens\n", b->o.prompts[p]);
            return CLI_EXIT_FAIL;
        }
    }
    if (!b->o.n_prompts) { /* a pattern twice: the lookup finds its drafts in it */
        spec_prompt *sp = &b->sp_prompts[0];
        if (!(sp->tokens = malloc(2 * SPEC_PATTERN * sizeof *sp->tokens)))
            return cli_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
        sp->n = 2 * SPEC_PATTERN;
        for (uint32_t i = 0; i < sp->n; i++)
            sp->tokens[i] = bench_token(b, i % SPEC_PATTERN);
    }
    for (int p = 0; p < b->n_sp_prompts; p++)
        if (b->sp_prompts[p].n > b->max_sp_prompt)
            b->max_sp_prompt = b->sp_prompts[p].n;
    if (b->o.draft_model) { /* refused now, before anything is timed, when its vocabulary differs */
        char err[512] = "";
        int rc = cli_load_model(&command, b->o.draft_model, &b->draft);
        if (rc)
            return rc;
        di_status st = open_drafter(b, b->o.threads[0], err, sizeof err);
        if (st)
            return cli_fail(&command, "the draft model", st, err);
    }
    for (int k = 0; k < 2; k++) {
        b->out[k].tokens = malloc((size_t)b->max_tg * sizeof *b->out[k].tokens);
        b->out[k].digests = malloc((size_t)b->max_tg * sizeof *b->out[k].digests);
        if (!b->out[k].tokens || !b->out[k].digests)
            return cli_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    }
    return CLI_EXIT_OK;
}

/* Bandwidth per thread count: given, or measured on a large buffer. */
static void bandwidths(const bench *b, double *bw)
{
    uint64_t *buf = NULL;
    size_t bytes = BANDWIDTH_BYTES;
    if (b->o.bandwidth <= 0 && b->max_tg > 0) {
        while (bytes >= (16u << 20) && !(buf = malloc(bytes)))
            bytes /= 2;
        if (buf)
            memset(buf, 1, bytes); /* touch every page before timing */
    }
    for (int k = 0; k < b->o.n_threads; k++)
        bw[k] = b->o.bandwidth > 0 ? b->o.bandwidth : buf ? measure_bandwidth(buf, bytes, b->o.threads[k]) : 0;
    if (!b->o.json && b->o.bandwidth <= 0 && buf) {
        printf("memory bandwidth (a read of %zu MiB, best of 3):", bytes >> 20);
        for (int k = 0; k < b->o.n_threads; k++)
            printf("%s %ld thread%s %.1f GB/s", k ? "," : "", b->o.threads[k], b->o.threads[k] == 1 ? "" : "s",
                   bw[k]);
        printf("\n\n");
    }
    free(buf);
}

int cli_cmd_bench(int argc, char **argv)
{
    bench *b = calloc(1, sizeof *b);
    if (!b)
        return cli_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
    int rc = parse(argc, argv, &b->o);
    if (rc == CLI_EXIT_OK)
        rc = cli_load_model(&command, b->o.model, &b->model);
    if (rc == CLI_EXIT_OK) {
        b->n_vocab = cli_model_int(b->model, DI_MODEL_N_VOCAB);
        b->file_size = cli_model_int(b->model, DI_MODEL_FILE_SIZE);
        b->bytes_per_token = cli_model_int(b->model, DI_MODEL_BYTES_PER_TOKEN);
        b->n_params = cli_model_int(b->model, DI_MODEL_N_PARAMS);
        b->max_pp = list_max(b->o.pp, b->o.n_pp);
        b->max_tg = list_max(b->o.tg, b->o.n_tg);
        b->max_batch = list_max(b->o.batch, b->o.n_batch);
        b->tg_equal = b->bd_equal = b->sp_equal = 1;
        b->prompt = malloc((size_t)(b->max_pp > 8 ? b->max_pp : 8) * sizeof *b->prompt);
        if (!b->prompt)
            rc = cli_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
        for (long i = 0; b->prompt && i < (b->max_pp > 8 ? b->max_pp : 8); i++)
            b->prompt[i] = bench_token(b, i);
    }
    if (rc == CLI_EXIT_OK && b->o.speculate)
        rc = prepare_speculation(b);
    if (rc == CLI_EXIT_OK) {
        double bw[MAX_LIST];
        if (!b->o.json)
            printf("model %s: %s, %.1fM parameters, %.1f MiB; libdetinfer %s; backend %s, profile %s (numerics %d); "
                   "%ld repetitions\n",
                   b->o.model, di_model_architecture(b->model), (double)b->n_params / 1e6,
                   (double)b->file_size / 1048576.0, di_version_string(), cli_backend_name(b->o.backend),
                   cli_profile_name(b->o.profile), cli_profile_numerics(b->o.profile), b->o.reps);
        bandwidths(b, bw);
        for (int k = 0; k < b->o.n_threads && rc == CLI_EXIT_OK; k++)
            rc = run_threads(b, b->o.threads[k], bw[k]);
    }
    if (rc == CLI_EXIT_OK) {
        if (b->o.json)
            rc = print_json(b);
        else
            print_text(b);
        if (rc == CLI_EXIT_OK && !(b->tg_equal && b->bd_equal && b->sp_equal))
            rc = CLI_EXIT_FAIL;
    }
    for (int p = 0; p < MAX_LIST; p++)
        free(b->sp_prompts[p].tokens);
    for (int k = 0; k < 2; k++) {
        free(b->out[k].tokens);
        free(b->out[k].digests);
    }
    di_drafter_free(b->drafter);
    di_model_free(b->draft);
    free(b->prompt);
    for (int i = 0; i < MAX_LIST; i++)
        free(b->bd_digest[i]);
    di_model_free(b->model);
    free(b);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
