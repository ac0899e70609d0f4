/*
 * generate.c — generation with digests, using only the public API.
 *
 *   generate --model FILE --tokens 1,2,3 [--max-new N] [--threads T]
 *            [--temperature F --top-k N --top-p F --seed N] [--logprobs N]
 *
 * Greedy by default; the sampling options set the sequence's
 * di_sampling_params (the other fields keep their defaults).
 *
 * Prints one line per generated token: "step I token T logits HEX", where HEX
 * is the digest of the logits row the token was chosen from, then the digest
 * of the whole token sequence: the prompt and every generated token
 * (di_session_seq_digest_extra). With --logprobs N, a last line
 * "logprobs top N values HEX ids HEX": the digest of the float32
 * log-probabilities (di_session_logprobs) of every step, each step's chosen
 * token first and then its N most likely tokens', and the digest of those
 * tokens' ids. Exit status 0 on success, 1 on a library error, 2 on bad
 * arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <detinfer.h>

/* Digest-worthy lists of a generation's log-probabilities (--logprobs). */
struct logprob_log {
    long n_top;
    float *values; /* per step: the chosen token's, then the n_top largest */
    int32_t *ids;  /* per step: the n_top most likely tokens */
    size_t n_values, n_ids;
};

#define MAX_PROMPT 4096

static int usage(const char *msg)
{
    fprintf(stderr, "generate: %s\nusage: generate --model FILE --tokens 1,2,3 [--max-new N] [--threads T]\n"
                    "                [--temperature F] [--top-k N] [--top-p F] [--seed N] [--logprobs N]\n",
            msg);
    return 2;
}

static int parse_tokens(const char *text, int32_t *tokens, uint32_t *n)
{
    *n = 0;
    while (*text) {
        char *end;
        errno = 0;
        long v = strtol(text, &end, 10);
        if (end == text || errno || v < INT32_MIN || v > INT32_MAX || *n == MAX_PROMPT)
            return 0;
        tokens[(*n)++] = (int32_t)v;
        text = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return 0;
    }
    return *n > 0;
}

static int parse_count(const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    *out = strtol(text, &end, 10);
    return *text && !*end && !errno && *out >= lo && *out <= hi;
}

static int parse_float(const char *text, float *out)
{
    char *end;
    errno = 0;
    *out = strtof(text, &end);
    return *text && !*end && !errno;
}

static int fail(const char *what, di_status st, const char *detail)
{
    fprintf(stderr, "generate: %s: %s: %s\n", what, di_status_name(st), detail);
    return 1;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL;
    static int32_t prompt[MAX_PROMPT];
    uint32_t n_prompt = 0;
    long max_new = 16, threads = 1, top_k = 0, n_top = -1;
    float temperature = 0.0f, top_p = 1.0f;
    unsigned long long seed = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage("missing value");
        if (!strcmp(argv[i], "--model"))
            model_path = argv[++i];
        else if (!strcmp(argv[i], "--tokens")) {
            if (!parse_tokens(argv[++i], prompt, &n_prompt))
                return usage("--tokens wants a comma-separated list of token ids");
        } else if (!strcmp(argv[i], "--max-new")) {
            if (!parse_count(argv[++i], 0, 1 << 20, &max_new))
                return usage("--max-new wants a count");
        } else if (!strcmp(argv[i], "--threads")) {
            if (!parse_count(argv[++i], 1, 256, &threads))
                return usage("--threads wants 1..256");
        } else if (!strcmp(argv[i], "--temperature")) {
            if (!parse_float(argv[++i], &temperature))
                return usage("--temperature wants a number");
        } else if (!strcmp(argv[i], "--top-p")) {
            if (!parse_float(argv[++i], &top_p))
                return usage("--top-p wants a number");
        } else if (!strcmp(argv[i], "--top-k")) {
            if (!parse_count(argv[++i], 0, INT32_MAX, &top_k))
                return usage("--top-k wants a count");
        } else if (!strcmp(argv[i], "--logprobs")) {
            if (!parse_count(argv[++i], 0, 1 << 20, &n_top))
                return usage("--logprobs wants a count");
        } else if (!strcmp(argv[i], "--seed")) {
            char *end;
            errno = 0;
            seed = strtoull(argv[++i], &end, 10);
            if (!*argv[i] || *end || errno)
                return usage("--seed wants a number");
        } else
            return usage("unknown argument");
    }
    if (!model_path || n_prompt == 0)
        return usage("--model and --tokens are required");

    char err[512];
    di_model *model = NULL;
    di_config *config = NULL;
    di_session *session = NULL;
    struct logprob_log lp = {.n_top = n_top};
    int rc = 1;
    di_status st = di_model_load(model_path, &model, err, sizeof err);
    if (st)
        return fail("loading the model", st, err);
    int64_t n_vocab = 0, n_layer = 0;
    di_model_get_int(model, DI_MODEL_N_VOCAB, &n_vocab);
    di_model_get_int(model, DI_MODEL_N_LAYER, &n_layer);
    printf("model %s: %s, %lld layers, vocabulary %lld; libdetinfer %s\n", model_path,
           di_model_architecture(model), (long long)n_layer, (long long)n_vocab, di_version_string());

    if ((st = di_config_create(&config)) ||
        (st = di_config_set_int(config, DI_CONFIG_THREADS, threads)) ||
        (st = di_config_set_int(config, DI_CONFIG_CONTEXT_LENGTH, (int64_t)n_prompt + max_new))) {
        fail("configuring", st, config ? di_config_errmsg(config) : "out of memory");
        goto out;
    }
    if ((st = di_session_create(model, config, &session, err, sizeof err))) {
        fail("creating the session", st, err);
        goto out;
    }
    if (n_top >= 0) {
        lp.values = malloc((size_t)max_new * (size_t)(n_top + 1) * sizeof *lp.values + 1);
        lp.ids = malloc((size_t)max_new * (size_t)n_top * sizeof *lp.ids + 1);
        if (!lp.values || !lp.ids) {
            fail("--logprobs", DI_ERR_OUT_OF_MEMORY, "out of memory");
            goto out;
        }
    }

    /* the sampling parameters: the defaults (greedy) and the options given */
    const uint32_t seq = 0;
    di_sampling_params sampling;
    di_sampling_params_init(&sampling);
    sampling.temperature = temperature;
    sampling.top_k = (int32_t)top_k;
    sampling.top_p = top_p;
    sampling.seed = seed;
    if ((st = di_session_seq_set_sampling(session, seq, &sampling))) {
        fail("sampling parameters", st, di_session_errmsg(session));
        goto out;
    }

    /* the prompt in one step, then one token per step */
    uint32_t n = n_prompt;
    const int32_t *feed = prompt;
    for (long step = 0; step < max_new; step++) {
        if ((st = di_session_step(session, 1, &seq, &n, feed, 0))) {
            fail("step", st, di_session_errmsg(session));
            goto out;
        }
        const float *logits;
        di_digest digest;
        static int32_t next;
        char hex[DI_DIGEST_HEX_SIZE];
        di_session_logits(session, seq, &logits, &digest);
        di_session_sample_token(session, seq, &next);
        di_digest_format(&digest, hex);
        printf("step %ld token %d logits %s\n", step, next, hex);
        if (n_top >= 0) {
            float *values = lp.values + lp.n_values;
            if ((st = di_session_logprobs(session, seq, next, &values[0], (uint32_t)n_top, lp.ids + lp.n_ids,
                                          &values[1]))) {
                fail("log-probabilities", st, di_session_errmsg(session));
                goto out;
            }
            lp.n_values += (size_t)n_top + 1;
            lp.n_ids += (size_t)n_top;
        }
        n = 1;
        feed = &next;
    }
    /* The sequence digest of the generation: the prompt and every generated
     * token, the last of which was chosen but never stepped (with --max-new 0,
     * nothing was stepped: the prompt alone). */
    di_digest seq_digest;
    uint32_t length = 0;
    char hex[DI_DIGEST_HEX_SIZE];
    di_session_seq_length(session, seq, &length);
    const uint32_t n_extra = max_new > 0 ? 1 : n_prompt;
    if ((st = di_session_seq_digest_extra(session, seq, feed, n_extra, &seq_digest))) {
        fail("sequence digest", st, di_session_errmsg(session));
        goto out;
    }
    di_digest_format(&seq_digest, hex);
    printf("sequence %u tokens digest %s\n", length + n_extra, hex);
    if (n_top >= 0) {
        di_digest values_digest, ids_digest;
        char ids_hex[DI_DIGEST_HEX_SIZE];
        di_digest_floats(lp.values, lp.n_values, &values_digest);
        di_digest_tokens(lp.ids, lp.n_ids, &ids_digest);
        di_digest_format(&values_digest, hex);
        di_digest_format(&ids_digest, ids_hex);
        printf("logprobs top %ld values %s ids %s\n", n_top, hex, ids_hex);
    }
    rc = 0;
out:
    free(lp.values);
    free(lp.ids);
    di_session_free(session);
    di_config_free(config);
    di_model_free(model);
    return rc;
}
