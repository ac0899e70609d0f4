/*
 * run.c — `detinfer run`: the greedy (or seeded sampled)
 * continuation of one prompt, with the digest of the logits row each token
 * was chosen from and the digest of the whole sequence (prompt and
 * generated tokens).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_json.h"
#include "cli/cli_commands.h"
#include "cli/cli_generate.h"
#include "cli/cli_model.h"
#include "cli/cli_text.h"

enum { OPT_MODEL, OPT_PROMPT, OPT_TOKENS, OPT_MAX_NEW, OPT_MAX_TOKENS, OPT_THREADS, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE, OPT_CPU_PATH, OPT_NO_BOS,
       OPT_IGNORE_EOS, OPT_JSON, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_MIN_P, OPT_REPEAT_PENALTY,
       OPT_PRESENCE_PENALTY, OPT_FREQUENCY_PENALTY, OPT_PENALTY_WINDOW, OPT_SAMPLING_SEED,
       OPT_ALLOW_LONG_CONTEXT, OPT_GRAMMAR, OPT_JSON_SCHEMA, OPT_SPECULATE, OPT_DRAFT_MAX, OPT_NGRAM };

static const cli_option options[] = {
    [OPT_MODEL] = {"--model", "FILE", "GGUF model file (required)"},
    [OPT_PROMPT] = {"--prompt", "TEXT", "prompt text (needs a model with a tokenizer)"},
    [OPT_TOKENS] = {"--tokens", "LIST", "prompt as token ids, e.g. 1,17,42"},
    [OPT_MAX_NEW] = {"--max-new", "N", "tokens to generate (default 32)"},
    [OPT_MAX_TOKENS] = {"--max-tokens", "N", "the same as --max-new (the name of serve's and OpenAI's max_tokens)"},
    [OPT_THREADS] = {"--threads", "N", "worker threads, 1..256 (default 1); results do not depend on it"},
    [OPT_BACKEND] = {"--backend", "NAME", "cpu (default) or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", CLI_PROFILE_HELP},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_NO_BOS] = {"--no-bos", NULL, "do not prepend BOS to a text prompt"},
    [OPT_IGNORE_EOS] = {"--ignore-eos", NULL, "keep generating after the end-of-sequence token"},
    [OPT_JSON] = {"--json", NULL, "one JSON object on stdout instead of text"},
    [OPT_TEMPERATURE] = {"--temperature", "X", "sample at temperature X (default 0: greedy)"},
    [OPT_TOP_K] = {"--top-k", "N", "sample among the N most likely tokens (default 0: all)"},
    [OPT_TOP_P] = {"--top-p", "X", "... among the most likely ones whose probabilities reach X (default 1)"},
    [OPT_MIN_P] = {"--min-p", "X", "... dropping those below X times the likeliest's probability (default 0)"},
    [OPT_REPEAT_PENALTY] = {"--repeat-penalty", "X", "repetition penalty on the recent tokens (default 1: none)"},
    [OPT_PRESENCE_PENALTY] = {"--presence-penalty", "X", "subtracted from the recent tokens' logits (default 0)"},
    [OPT_FREQUENCY_PENALTY] = {"--frequency-penalty", "X", "subtracted once per occurrence (default 0)"},
    [OPT_PENALTY_WINDOW] = {"--penalty-window", "N", "the recent tokens: the last N of the sequence (default 64; 0: all)"},
    [OPT_SAMPLING_SEED] = {"--seed", "N", "sampling seed, 0..2^64-1 (default 0)"},
    [OPT_ALLOW_LONG_CONTEXT] = {"--allow-long-context", NULL,
                                "accept a prompt plus --max-new longer than the model's training context"},
    [OPT_GRAMMAR] = {"--grammar", "FILE", "generate only text of the GBNF grammar in FILE (docs/STRUCTURED.md)"},
    [OPT_JSON_SCHEMA] = {"--json-schema", "FILE", "generate only JSON the schema in FILE allows"},
    [OPT_SPECULATE] = {"--speculate", "ngram|FILE", "verify drafts several tokens a step, from prompt lookup or a draft model of the same vocabulary: the same output, bit for bit"},
    [OPT_DRAFT_MAX] = {"--draft-max", "N", "with --speculate, draft tokens per step at most, 1.." CLI_STR(DI_DRAFT_MAX)
                      " (default " CLI_STR(DI_DRAFT_DEFAULT) ")"},
    [OPT_NGRAM] = {"--ngram", "N", "with --speculate, the longest key the lookup matches, 1.." CLI_STR(DI_DRAFT_MAX_NGRAM)
                  " (default " CLI_STR(DI_DRAFT_NGRAM_DEFAULT) ")"},
    {NULL, NULL, NULL},
};

static const cli_command command = {
    "run",
    "--model FILE (--prompt TEXT | --tokens LIST) [options]",
    "Greedy generation (temperature 0: argmax, ties to the lowest id), or seeded\n"
    "sampling with --temperature > 0: the tokens depend only on the model, the\n"
    "prompt, the sampling options and --seed (docs/DETERMINISM.md). Prints each\n"
    "generated token with the XXH3-128 digest of the logits row it was chosen from,\n"
    "then the digest of the whole sequence (prompt and generated token ids as\n"
    "little-endian int32). Generation stops after --max-new tokens or at the model's\n"
    "end-of-sequence token. With --grammar or --json-schema every generated token is\n"
    "one the grammar allows (the prompt is not constrained), and the end-of-sequence\n"
    "token comes exactly when the grammar's text is complete.",
    options,
};

typedef struct run_opts {
    const char *model, *prompt_text, *tokens_text;
    long max_new, threads;
    di_backend backend;
    di_profile profile;
    long device;
    di_cpu_path cpu_path;
    int add_bos, stop_at_eos, json, allow_long_context;
    di_sampling_params sampling; /* checked by the library */
    const char *grammar_file, *schema_file;
    int speculate;              /* --speculate: ngram, or draft_model */
    const char *draft_model;    /* --speculate FILE */
    long draft_max, ngram;
} run_opts;

typedef struct run_result {
    int32_t *prompt;
    uint32_t n_prompt;
    int32_t *generated;
    di_digest *digests;
    uint32_t n_generated;
    int stopped_at_eos;
    int stopped_by_grammar;   /* its text was complete and nothing could follow: no end token */
    di_digest sequence;
    di_grammar *grammar;
    uint32_t steps, drafted, accepted; /* with --speculate: steps after the prompt's, draft tokens */
    di_drafter *drafter;        /* --speculate FILE */
} run_result;

typedef struct run_context { /* what take_token needs */
    const run_opts *o;
    const di_model *model;
    run_result *r;
} run_context;

/* A number for a sampling option; its range is the library's to check. */
static int parse_float(const char *opt, const char *text, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end) {
        cli_usage(&command, "%s wants a number, not '%s'", opt, text);
        return 0;
    }
    *out = v > FLT_MAX ? INFINITY : v < -FLT_MAX ? -INFINITY : (float)v;
    return 1;
}

static int parse_seed(const char *opt, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!*text || *end || errno || text[0] == '-') {
        cli_usage(&command, "%s wants an integer in 0..18446744073709551615, not '%s'", opt, text);
        return 0;
    }
    *out = v;
    return 1;
}

static int apply_option(int k, const char *v, void *opts)
{
    run_opts *o = opts;
    di_sampling_params *sp = &o->sampling;
    long n;
    switch (k) {
    case OPT_MODEL: o->model = v; return 1;
    case OPT_PROMPT: o->prompt_text = v; return 1;
    case OPT_TOKENS: o->tokens_text = v; return 1;
    case OPT_MAX_NEW:
    case OPT_MAX_TOKENS: return cli_parse_long(&command, options[k].name, v, 1, 1 << 20, &o->max_new);
    case OPT_THREADS: return cli_parse_long(&command, options[k].name, v, 1, 256, &o->threads);
    case OPT_BACKEND: return cli_parse_backend(&command, options[k].name, v, &o->backend);
    case OPT_PROFILE: return cli_parse_profile(&command, options[k].name, v, &o->profile);
    case OPT_DEVICE: return cli_parse_device(&command, options[k].name, v, &o->device);
    case OPT_CPU_PATH: return cli_parse_cpu_path(&command, options[k].name, v, &o->cpu_path);
    case OPT_NO_BOS: o->add_bos = 0; return 1;
    case OPT_IGNORE_EOS: o->stop_at_eos = 0; return 1;
    case OPT_JSON: o->json = 1; return 1;
    case OPT_TEMPERATURE: return parse_float(options[k].name, v, &sp->temperature);
    case OPT_TOP_K:
        if (!cli_parse_long(&command, options[k].name, v, 0, INT32_MAX, &n))
            return 0;
        sp->top_k = (int32_t)n;
        return 1;
    case OPT_TOP_P: return parse_float(options[k].name, v, &sp->top_p);
    case OPT_MIN_P: return parse_float(options[k].name, v, &sp->min_p);
    case OPT_REPEAT_PENALTY: return parse_float(options[k].name, v, &sp->repetition_penalty);
    case OPT_PRESENCE_PENALTY: return parse_float(options[k].name, v, &sp->presence_penalty);
    case OPT_FREQUENCY_PENALTY: return parse_float(options[k].name, v, &sp->frequency_penalty);
    case OPT_PENALTY_WINDOW:
        if (!cli_parse_long(&command, options[k].name, v, 0, UINT32_MAX, &n))
            return 0;
        sp->penalty_window = (uint32_t)n;
        return 1;
    case OPT_SAMPLING_SEED: return parse_seed(options[k].name, v, &sp->seed);
    case OPT_ALLOW_LONG_CONTEXT: o->allow_long_context = 1; return 1;
    case OPT_GRAMMAR: o->grammar_file = v; return 1;
    case OPT_JSON_SCHEMA: o->schema_file = v; return 1;
    case OPT_SPECULATE:
        o->speculate = 1;
        o->draft_model = strcmp(v, "ngram") ? v : NULL;
        return 1;
    case OPT_DRAFT_MAX: return cli_parse_long(&command, options[k].name, v, 1, DI_DRAFT_MAX, &o->draft_max);
    case OPT_NGRAM: return cli_parse_long(&command, options[k].name, v, 1, DI_DRAFT_MAX_NGRAM, &o->ngram);
    }
    return 1;
}

static int parse(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){.max_new = 32, .threads = 1, .backend = DI_BACKEND_CPU, .profile = CLI_DEFAULT_PROFILE,
                    .add_bos = 1, .stop_at_eos = 1, .draft_max = DI_DRAFT_DEFAULT, .ngram = DI_DRAFT_NGRAM_DEFAULT};
    di_sampling_params_init(&o->sampling);
    int rc = cli_parse_options(&command, argc, argv, apply_option, o, NULL);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!o->model)
        return cli_usage(&command, "--model is required");
    if (!o->prompt_text == !o->tokens_text)
        return cli_usage(&command, "give the prompt as exactly one of --prompt TEXT or --tokens LIST");
    if (o->grammar_file && o->schema_file)
        return cli_usage(&command, "give at most one of --grammar and --json-schema");
    if ((o->grammar_file || o->schema_file) && !o->stop_at_eos)
        return cli_usage(&command, "--ignore-eos cannot go with a grammar: the end-of-sequence token ends its text");
    return CLI_EXIT_OK;
}

static int read_prompt(const run_opts *o, const di_model *model, run_result *r)
{
    if (o->tokens_text)
        return cli_parse_tokens(&command, "--tokens", o->tokens_text, &r->prompt, &r->n_prompt)
                   ? CLI_EXIT_OK
                   : CLI_EXIT_USAGE;
    if (!*o->prompt_text) /* not BOS alone: refused, as the server and the bindings do */
        return cli_usage(&command, "--prompt is empty (give --tokens with the BOS id for BOS alone)");
    char err[512] = "";
    di_status st = cli_tokenize(model, o->prompt_text, o->add_bos, &r->prompt, &r->n_prompt, err, sizeof err);
    if (st == DI_ERR_UNSUPPORTED)
        return cli_fail(&command, "this model cannot take a text prompt (give it as --tokens)", st, err);
    if (st)
        return cli_fail(&command, "tokenizing the prompt", st, err);
    if (r->n_prompt == 0) {
        fprintf(stderr, "detinfer run: the prompt gives no tokens\n");
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static void print_piece(const di_model *model, int32_t token)
{
    char *piece = cli_token_piece(model, token);
    if (piece) {
        putchar(' ');
        cli_print_quoted(stdout, piece, strlen(piece));
        free(piece);
    }
}

/* The grammar of --grammar or --json-schema, when given. */
static int load_grammar(const run_opts *o, run_result *r)
{
    const char *path = o->grammar_file ? o->grammar_file : o->schema_file;
    if (!path)
        return CLI_EXIT_OK;
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "detinfer run: cannot read %s\n", path);
        return CLI_EXIT_FAIL;
    }
    char err[512] = "";
    di_status st = o->grammar_file ? di_grammar_from_gbnf(text, len, 0, &r->grammar, err, sizeof err)
                                   : di_grammar_from_json_schema(text, len, 0, &r->grammar, err, sizeof err);
    free(text);
    if (st) {
        fprintf(stderr, "detinfer run: %s: %s: %s\n", path, di_status_name(st), err);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* Records generated token `token`, chosen from logits with `digest`, and
 * prints it (cli_generate's callback). */
static void take_token(void *ctx, int32_t token, const di_digest *digest)
{
    run_context *c = ctx;
    run_result *r = c->r;
    const uint32_t i = r->n_generated++;
    r->generated[i] = token;
    r->digests[i] = *digest;
    if (!c->o->json) {
        char hex[DI_DIGEST_HEX_SIZE];
        cli_hex(digest, hex);
        printf("step %u token %d logits %s", i, token, hex);
        print_piece(c->model, token);
        putchar('\n');
        fflush(stdout);
    }
}

/* The prompt in one step, then one token per step, printing as it goes (the
 * grammar, if any, from the first generated token on); with --speculate,
 * several tokens a step, the same tokens and digests (cli_generate.h). */
static int generate(const run_opts *o, const di_model *model, di_session *s, run_result *r)
{
    run_context c = {o, model, r};
    cli_generation g = {.seq = 0, .prompt = r->prompt, .n_prompt = r->n_prompt, .grammar = r->grammar,
                        .eos = -1, .max_new = o->max_new, .take = take_token, .ctx = &c,
                        .drafter = r->drafter, .draft_max = (uint32_t)o->draft_max, .ngram = (uint32_t)o->ngram};
    if (o->stop_at_eos && di_model_special_token(model, DI_TOKEN_EOS, &g.eos) != DI_OK)
        g.eos = -1;
    di_status st = o->speculate ? cli_generate_speculating(s, &g) : cli_generate(s, &g);
    r->stopped_at_eos = g.stopped_at_eos;
    r->stopped_by_grammar = g.stopped_by_grammar;
    r->steps = g.steps;
    r->drafted = g.drafted;
    r->accepted = g.accepted;
    if (st && g.drafter_failed) /* the drafter's failure, in its own words */
        return cli_fail(&command, "the draft model", st, di_drafter_errmsg(r->drafter));
    if (st)
        return cli_fail(&command, "step", st, di_session_errmsg(s));
    return CLI_EXIT_OK;
}

/* The sequence digest of the generation (cli_generation_digest). */
static di_status sequence_digest(di_session *s, run_result *r)
{
    return cli_generation_digest(s, 0, r->prompt, r->n_prompt, r->generated, r->n_generated, &r->sequence);
}

static void print_header(const run_opts *o, const di_model *model, const run_result *r)
{
    printf("model %s: %s, %lld layers, vocabulary %lld; libdetinfer %s; backend %s, profile %s (numerics %d), "
           "%ld thread%s\n",
           o->model, di_model_architecture(model), (long long)cli_model_int(model, DI_MODEL_N_LAYER),
           (long long)cli_model_int(model, DI_MODEL_N_VOCAB), di_version_string(), cli_backend_name(o->backend),
           cli_profile_name(o->profile), cli_profile_numerics(o->profile), o->threads, o->threads == 1 ? "" : "s");
    const di_sampling_params *p = &o->sampling;
    if (p->temperature > 0)
        printf("sampling temperature %g top-k %d top-p %g min-p %g repeat-penalty %g presence-penalty %g "
               "frequency-penalty %g penalty-window %u seed %llu\n",
               (double)p->temperature, (int)p->top_k, (double)p->top_p, (double)p->min_p,
               (double)p->repetition_penalty, (double)p->presence_penalty, (double)p->frequency_penalty,
               (unsigned)p->penalty_window, (unsigned long long)p->seed);
    printf("prompt %u tokens:", r->n_prompt);
    for (uint32_t i = 0; i < r->n_prompt; i++)
        printf(" %d", r->prompt[i]);
    putchar('\n');
}

static void print_footer(const di_model *model, const run_result *r)
{
    char hex[DI_DIGEST_HEX_SIZE];
    cli_hex(&r->sequence, hex);
    printf("sequence %u tokens digest %s\n", r->n_prompt + r->n_generated, hex);
    char *text = cli_detokenize(model, r->generated, r->n_generated, NULL);
    if (text) {
        printf("text ");
        cli_print_quoted(stdout, text, strlen(text));
        putchar('\n');
        free(text);
    }
    if (r->stopped_at_eos)
        printf("stopped at the end-of-sequence token\n");
    if (r->stopped_by_grammar)
        printf("stopped: the grammar's text is complete\n");
    if (r->grammar) {
        di_digest d;
        di_grammar_digest(r->grammar, &d);
        cli_hex(&d, hex);
        printf("grammar digest %s\n", hex);
    }
}

static json_t *steps_json(const di_model *model, const run_result *r)
{
    json_t *steps = json_array();
    for (uint32_t i = 0; steps && i < r->n_generated; i++) {
        char *piece = cli_token_piece(model, r->generated[i]);
        json_t *step = json_pack("{s:I, s:I, s:o, s:o}", "step", (json_int_t)i, "token",
                                 (json_int_t)r->generated[i], "logits_digest", cli_json_digest(&r->digests[i]),
                                 "piece", cli_json_text(piece));
        free(piece);
        steps = cli_json_push(steps, step);
    }
    return steps;
}

static int print_json(const run_opts *o, const di_model *model, const run_result *r)
{
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->sampling.seed); /* exact beyond 2^53 */
    json_t *sampling = cli_json_set(cli_json_sampling(&o->sampling), "seed", json_string(seed));
    char *text = cli_detokenize(model, r->generated, r->n_generated, NULL);
    di_digest gd;
    json_t *grammar = r->grammar && !di_grammar_digest(r->grammar, &gd) ? cli_json_digest(&gd) : json_null();
    json_t *root = json_pack(
        "{s:o, s:o, s:s, s:s, s:s, s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:I, s:o, s:o}", "model",
        cli_json_text(o->model), "architecture", cli_json_text(di_model_architecture(model)), "library_version",
        di_version_string(), "backend", cli_backend_name(o->backend), "profile", cli_profile_name(o->profile),
        "numerics", cli_profile_numerics(o->profile), "threads", (json_int_t)o->threads, "sampling", sampling, "prompt_text", cli_json_text(o->prompt_text),
        "prompt_tokens", cli_json_tokens(r->prompt, r->n_prompt), "steps", steps_json(model, r), "tokens",
        cli_json_tokens(r->generated, r->n_generated), "text", cli_json_text(text), "stopped",
        r->stopped_at_eos ? "eos" : r->stopped_by_grammar ? "grammar" : "max_new", "sequence_length",
        (json_int_t)(r->n_prompt + r->n_generated), "sequence_digest", cli_json_digest(&r->sequence),
        "grammar_digest", grammar);
    if (o->speculate)
        json_object_set_new(root, "speculation", json_pack("{s:s, s:I, s:I, s:I}", "draft",
                                                           o->draft_model ? "draft-model" : "ngram", "steps",
                                                           (json_int_t)r->steps, "drafted", (json_int_t)r->drafted,
                                                           "accepted", (json_int_t)r->accepted));
    free(text);
    return cli_json_emit(&command, root, stdout);
}

/* The session of cli_open_session; a context beyond the training context is
 * refused here, naming the option, unless --allow-long-context insists. */
static di_status open_session(const run_opts *o, const di_model *model, cli_session_opts *so,
                              di_session **s, char *err, size_t err_size)
{
    const int64_t trained = cli_model_int(model, DI_MODEL_N_CTX_TRAIN);
    if (so->context_length > trained && !o->allow_long_context) {
        snprintf(err, err_size,
                 "the prompt and --max-new need a context of %lld tokens, beyond the model's training "
                 "context of %lld; give --allow-long-context to run it anyway",
                 (long long)so->context_length, (long long)trained);
        return DI_ERR_INVALID_ARGUMENT;
    }
    so->allow_long_context = o->allow_long_context;
    return cli_open_session(model, so, s, err, err_size);
}

int cli_cmd_run(int argc, char **argv)
{
    run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    di_model *model = NULL, *draft = NULL;
    di_session *s = NULL;
    run_result r = {0};
    if ((rc = cli_load_model(&command, o.model, &model)))
        return rc;
    if ((rc = read_prompt(&o, model, &r)) || (rc = load_grammar(&o, &r)))
        goto out;
    r.generated = calloc((size_t)o.max_new, sizeof *r.generated);
    r.digests = calloc((size_t)o.max_new, sizeof *r.digests);
    if (!r.generated || !r.digests) {
        rc = cli_fail(&command, "allocating", DI_ERR_OUT_OF_MEMORY, "");
        goto out;
    }
    /* the last generated token is never fed back: P + N - 1 positions */
    cli_session_opts so = {.backend = o.backend, .profile = o.profile, .threads = o.threads,
                          .max_sequences = 1, .context_length = (int64_t)r.n_prompt + o.max_new - 1,
                          .device = o.device, .cpu_path = o.cpu_path};
    char err[512] = "";
    di_status st = open_session(&o, model, &so, &s, err, sizeof err);
    if (st) {
        rc = cli_fail(&command, "creating the session", st, err);
        goto out;
    }
    if ((st = di_session_seq_set_sampling(s, 0, &o.sampling))) {
        rc = cli_fail(&command, "the sampling options", st, di_session_errmsg(s));
        goto out;
    }
    if (o.draft_model) { /* --speculate FILE: its session as the model's */
        if ((rc = cli_load_model(&command, o.draft_model, &draft)))
            goto out;
        so.allow_long_context = o.allow_long_context;
        if ((st = cli_open_drafter(model, draft, &so, &r.drafter, err, sizeof err))) {
            rc = cli_fail(&command, "the draft model", st, err);
            goto out;
        }
    }
    if (!o.json)
        print_header(&o, model, &r);
    if ((rc = generate(&o, model, s, &r)))
        goto out;
    if ((st = sequence_digest(s, &r))) {
        rc = cli_fail(&command, "sequence digest", st, di_session_errmsg(s));
        goto out;
    }
    if (o.json)
        rc = print_json(&o, model, &r);
    else
        print_footer(model, &r);
    if (o.speculate && !o.json) /* what speculation did: the lines above are the same without it */
        printf("speculation %s: %u steps after the prompt for %u tokens, %u drafted, %u accepted (%.0f%%)\n",
               o.draft_model ? "draft-model" : "ngram", r.steps, r.n_generated, r.drafted, r.accepted,
               r.drafted ? 100.0 * r.accepted / r.drafted : 0.0);
out:
    free(r.prompt);
    free(r.generated);
    free(r.digests);
    di_session_free(s);
    di_grammar_free(r.grammar);
    di_drafter_free(r.drafter);
    di_model_free(draft);
    di_model_free(model);
    return rc;
}
