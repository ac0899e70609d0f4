/*
 * verify_url.c — `detinfer verify --url http://HOST:PORT`: the
 * determinism contract checked against a live `detinfer serve`.
 *
 * The same request is sent --reps times, concurrently and shuffled among
 * other traffic of varied lengths; so are near-tie prompts (found by search
 * on the local model when --model is given), a request constrained by a JSON
 * schema (structured output) and, when the server samples, a seeded sampled
 * request and a sampled constrained one. Every response's token ids, per-token logits
 * digests and sequence digest are compared with a reference: the local
 * library's run of that request alone when --model is given (the model file
 * must be the server's: same digest), otherwise the first response of that
 * request. A table, then each mismatch naming the request and the position;
 * exit status 1 on any mismatch or failed request.
 *
 * HTTP from libcurl, JSON from jansson.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "verify/verify.h"

enum { OPT_URL, OPT_MODEL, OPT_API_KEY_FILE, OPT_REPS, OPT_MAX_NEW, OPT_CONCURRENCY, OPT_TRAFFIC, OPT_TIES,
       OPT_SEED, OPT_TIMEOUT, OPT_SAVE };

static const cli_option options[] = {
    [OPT_URL] = {"--url", "URL", "the server, e.g. http://127.0.0.1:8080 (required)"},
    [OPT_MODEL] = {"--model", "FILE", "the server's model file: references from the local library, run alone"},
    [OPT_API_KEY_FILE] = {"--api-key-file", "FILE", "send 'Authorization: Bearer KEY' (first line of FILE)"},
    [OPT_REPS] = {"--reps", "N", "times the same request is sent (default 50)"},
    [OPT_MAX_NEW] = {"--max-new", "N", "tokens generated per checked request (default 16)"},
    [OPT_CONCURRENCY] = {"--concurrency", "N", "requests in flight at once (default 16)"},
    [OPT_TRAFFIC] = {"--traffic", "N", "other requests of varied lengths mixed in (default 2 x --reps)"},
    [OPT_TIES] = {"--ties", "N",
                  "near ties as `detinfer verify` finds them, each sent --reps/5 times (default 4; needs --model)"},
    [OPT_SEED] = {"--seed", "N", "seed of the prompts, the order and the sampled request (default 1)"},
    [OPT_TIMEOUT] = {"--timeout", "SECONDS", "per request (default 300)"},
    [OPT_SAVE] = {"--save", "DIR",
                  "write each request and its response as a receipt, DIR/receipt-P-R.json (`detinfer replay` checks them)"},
    {NULL, NULL, NULL},
};

static const cli_command command = {
    "verify",
    "--url http://HOST:PORT [--model FILE] [--reps N] [options]",
    "Checks a live `detinfer serve`: the same request --reps times, concurrently and\n"
    "interleaved with other traffic, near-tie prompts, a request constrained by a\n"
    "JSON schema, and seeded sampled requests (plain and constrained) when the\n"
    "server samples. Every response's tokens, logits digests and sequence\n"
    "digest must equal the reference: the local library run alone with --model,\n"
    "else the first response. Prints a table; on a mismatch names the request and\n"
    "the position. Exit status 0 only when everything matched.",
    options,
};

typedef struct vu_opts {
    const char *url, *model, *key_file, *save_dir;
    long reps, max_new, concurrency, traffic, ties, seed, timeout;
} vu_opts;

/* What one response (or the local reference) gave. */
typedef struct outcome {
    int ok;
    char error[256];
    int32_t *tokens;
    char (*digests)[DI_DIGEST_HEX_SIZE];
    uint32_t n;
    char sequence[DI_DIGEST_HEX_SIZE];
} outcome;

/* One distinct request, sent `reps` times. */
/* The schema of the constrained probes (docs/STRUCTURED.md). */
static const char VERIFY_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9999},"
    "\"word\":{\"type\":\"string\",\"maxLength\":8},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"id\",\"word\",\"ok\"],\"additionalProperties\":false}";

typedef struct probe {
    char label[96];
    const char *kind; /* greedy, near-tie, sampled, json, traffic */
    int constrained;  /* generated under VERIFY_SCHEMA */
    int32_t *prompt;
    uint32_t n_prompt, max_new, reps;
    int sampled;
    double temperature, top_p;
    long long seed;
    outcome ref;
    const char *ref_source;
    outcome *got; /* reps of them */
    uint32_t matched;
} probe;

typedef struct job {
    uint32_t probe, rep;
} job;

typedef struct vu {
    vu_opts o;
    char *key;
    probe *p;
    uint32_t n_probes;
    job *jobs;
    uint32_t n_jobs, next_job;
    pthread_mutex_t lock;
    di_model *model;
    /* From GET /v1/models. */
    char server_model[128], server_digest[64], server_version[64], server_backend[256];
    di_profile profile; /* the server's (its fingerprint): the local references run it */
    long long n_vocab, context, bos;
    int sampling;
} vu;

/* ---- HTTP ----------------------------------------------------------------- */

typedef struct body {
    char *p;
    size_t len;
} body;

static size_t collect(char *data, size_t size, size_t n, void *userp)
{
    body *b = userp;
    size_t add = size * n;
    char *p = realloc(b->p, b->len + add + 1);
    if (!p)
        return 0;
    memcpy(p + b->len, data, add);
    b->p = p;
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

/* GET (post NULL) or POST JSON; the parsed body, or NULL with err set. */
static json_t *http(const vu *v, const char *path, const char *post, long *status, char *err, size_t err_size)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, err_size, "libcurl cannot start");
        return NULL;
    }
    char url[1024], auth[4200];
    snprintf(url, sizeof url, "%s%s", v->o.url, path);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (v->key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", v->key);
        headers = curl_slist_append(headers, auth);
    }
    body b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, v->o.timeout);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (post)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    json_t *root = NULL;
    if (rc != CURLE_OK) {
        snprintf(err, err_size, "%s: %s", path, curl_easy_strerror(rc));
    } else {
        json_error_t je;
        /* generated text may hold a NUL byte (\u0000): the server keeps its length */
        root = json_loadb(b.p ? b.p : "", b.len, JSON_ALLOW_NUL, &je);
        if (!root)
            snprintf(err, err_size, "%s: HTTP %ld, the body is not JSON: %s", path, *status, je.text);
        else if (*status != 200) {
            const char *msg = json_string_value(json_object_get(json_object_get(root, "error"), "message"));
            snprintf(err, err_size, "%s: HTTP %ld: %s", path, *status, msg ? msg : "(no message)");
            json_decref(root);
            root = NULL;
        }
    }
    free(b.p);
    return root;
}

static void copy_str(char *dst, size_t n, json_t *v)
{
    const char *s = json_string_value(v);
    snprintf(dst, n, "%s", s ? s : "?");
}

static int read_server_info(vu *v)
{
    char err[512];
    long status;
    json_t *root = http(v, "/v1/models", NULL, &status, err, sizeof err);
    if (!root) {
        fprintf(stderr, "detinfer verify --url: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    json_t *m = json_array_get(json_object_get(root, "data"), 0);
    json_t *d = json_object_get(m, "detinfer");
    json_t *fp = json_object_get(d, "fingerprint");
    if (!json_is_object(fp)) {
        fprintf(stderr, "detinfer verify --url: %s is not a detinfer server (no fingerprint in /v1/models)\n",
                v->o.url);
        json_decref(root);
        return CLI_EXIT_FAIL;
    }
    copy_str(v->server_model, sizeof v->server_model, json_object_get(m, "id"));
    copy_str(v->server_digest, sizeof v->server_digest, json_object_get(fp, "model_digest"));
    copy_str(v->server_version, sizeof v->server_version, json_object_get(fp, "library_version"));
    copy_str(v->server_backend, sizeof v->server_backend, json_object_get(fp, "backend"));
    json_t *profile = json_object_get(fp, "profile");
    if (!json_is_string(profile) ||
        !cli_parse_profile(&command, "the server's profile", json_string_value(profile), &v->profile)) {
        json_decref(root);
        return CLI_EXIT_FAIL;
    }
    v->n_vocab = json_integer_value(json_object_get(d, "n_vocab"));
    v->context = json_integer_value(json_object_get(d, "context"));
    json_t *bos = json_object_get(d, "bos_token");
    v->bos = json_is_integer(bos) ? json_integer_value(bos) : -1;
    v->sampling = json_is_true(json_object_get(d, "sampling"));
    json_decref(root);
    if (v->n_vocab <= 0 || v->context < 16) {
        fprintf(stderr, "detinfer verify --url: the server reports no vocabulary size or a context under 16\n");
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* ---- Requests and responses ------------------------------------------------ */

static char *request_json(const probe *p)
{
    json_t *ids = json_array();
    for (uint32_t i = 0; i < p->n_prompt; i++)
        json_array_append_new(ids, json_integer(p->prompt[i]));
    json_t *root = json_pack("{s:s, s:o, s:i, s:{s:b}}", "model", "verify", "prompt", ids, "max_tokens",
                             (int)p->max_new, "detinfer", "logits_digests", 1);
    if (p->sampled) {
        json_object_set_new(root, "temperature", json_real(p->temperature));
        json_object_set_new(root, "top_p", json_real(p->top_p));
        json_object_set_new(root, "seed", json_integer(p->seed));
    }
    if (p->constrained)
        json_object_set_new(root, "json_schema", json_loads(VERIFY_SCHEMA, 0, NULL));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static void outcome_free(outcome *o)
{
    free(o->tokens);
    free(o->digests);
    memset(o, 0, sizeof *o);
}

static int outcome_alloc(outcome *o, uint32_t n)
{
    o->tokens = calloc(n ? n : 1, sizeof *o->tokens);
    o->digests = calloc(n ? n : 1, sizeof *o->digests);
    o->n = n;
    return o->tokens && o->digests ? 0 : -1;
}

static void parse_response(json_t *root, outcome *o)
{
    json_t *d = json_object_get(root, "detinfer");
    json_t *ids = json_object_get(d, "completion_token_ids");
    json_t *digests = json_object_get(d, "logits_digests");
    const char *seq = json_string_value(json_object_get(d, "sequence_digest"));
    if (!json_is_array(ids) || !json_is_array(digests) || !seq || json_array_size(ids) != json_array_size(digests)) {
        snprintf(o->error, sizeof o->error, "the response lacks the detinfer token ids and digests");
        return;
    }
    if (outcome_alloc(o, (uint32_t)json_array_size(ids))) {
        snprintf(o->error, sizeof o->error, "out of memory");
        return;
    }
    for (uint32_t i = 0; i < o->n; i++) {
        o->tokens[i] = (int32_t)json_integer_value(json_array_get(ids, i));
        copy_str(o->digests[i], DI_DIGEST_HEX_SIZE, json_array_get(digests, i));
    }
    snprintf(o->sequence, sizeof o->sequence, "%s", seq);
    o->ok = 1;
}

/* A receipt: the request and its response together (`detinfer replay`). */
static void save_receipt(const vu *v, const job *j, const char *req, json_t *response)
{
    json_error_t je;
    json_t *request = json_loads(req, 0, &je);
    json_t *receipt = json_pack("{s:s, s:o, s:O}", "endpoint", "/v1/completions", "request", request, "response",
                                response);
    char path[4096];
    snprintf(path, sizeof path, "%s/receipt-%u-%u.json", v->o.save_dir, j->probe, j->rep);
    if (!receipt || json_dump_file(receipt, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17)))
        fprintf(stderr, "detinfer verify --url: cannot write the receipt %s\n", path);
    json_decref(receipt);
}

static void *worker(void *arg)
{
    vu *v = arg;
    for (;;) {
        pthread_mutex_lock(&v->lock);
        uint32_t i = v->next_job++;
        pthread_mutex_unlock(&v->lock);
        if (i >= v->n_jobs)
            return NULL;
        probe *p = &v->p[v->jobs[i].probe];
        outcome *o = &p->got[v->jobs[i].rep];
        char *req = request_json(p);
        long status;
        json_t *root = req ? http(v, "/v1/completions", req, &status, o->error, sizeof o->error) : NULL;
        if (root && v->o.save_dir)
            save_receipt(v, &v->jobs[i], req, root);
        free(req);
        if (root)
            parse_response(root, o);
        json_decref(root);
    }
}

/* ---- The local reference: the request alone on a fresh sequence ---------- */

static int local_reference(vu *v, di_session *s, probe *p)
{
    di_grammar *g = NULL;
    di_status st = p->constrained ? di_grammar_from_json_schema(VERIFY_SCHEMA, strlen(VERIFY_SCHEMA), 0, &g, NULL, 0)
                                  : DI_OK;
    if (!st)
        st = di_session_seq_reset(s, 0);
    if (!st && p->sampled) {
        di_sampling_params sp;
        st = di_sampling_params_init(&sp);
        sp.temperature = (float)p->temperature;
        sp.top_p = (float)p->top_p;
        sp.seed = (uint64_t)p->seed;
        if (!st)
            st = di_session_seq_set_sampling(s, 0, &sp);
        if (st == DI_ERR_UNSUPPORTED) {
            di_grammar_free(g);
            return 0; /* this library does not sample: the first response is the reference */
        }
    } else if (!st && v->sampling) {
        st = di_session_seq_set_sampling(s, 0, NULL);
        if (st == DI_ERR_UNSUPPORTED)
            st = DI_OK;
    }
    if (st || outcome_alloc(&p->ref, p->max_new)) {
        di_grammar_free(g);
        return -1;
    }
    int32_t eos = -1;
    if (di_model_special_token(v->model, DI_TOKEN_EOS, &eos) != DI_OK)
        eos = -1;
    const uint32_t seq = 0;
    uint32_t n = p->n_prompt;
    const int32_t *feed = p->prompt;
    p->ref.n = 0;
    for (uint32_t t = 0; t < p->max_new && !st; t++) {
        const float *logits;
        di_digest d;
        int32_t tok;
        st = di_session_step(s, 1, &seq, &n, feed, 0);
        if (!st && t == 0 && g) /* the prompt is in: the grammar starts here, as the server's */
            st = di_session_seq_set_grammar(s, seq, g, NULL, 0);
        if (!st)
            st = di_session_logits(s, seq, &logits, &d);
        if (!st)
            st = p->sampled ? di_session_sample_token(s, seq, &tok) : di_session_greedy_token(s, seq, &tok);
        if (st)
            break;
        cli_hex(&d, p->ref.digests[t]);
        p->ref.tokens[p->ref.n++] = tok;
        if (tok == eos)
            break;
        n = 1;
        feed = &p->ref.tokens[t];
    }
    di_grammar_free(g);
    di_digest seqd;
    if (!st)
        st = di_session_seq_digest_extra(s, seq, &p->ref.tokens[p->ref.n - 1], 1, &seqd);
    if (st) {
        fprintf(stderr, "detinfer verify --url: local reference of %s: %s: %s\n", p->label, di_status_name(st),
                di_session_errmsg(s));
        return -1;
    }
    cli_hex(&seqd, p->ref.sequence);
    p->ref.ok = 1;
    p->ref_source = "local library";
    return 0;
}

static int file_digest(const char *path, char out[DI_DIGEST_HEX_SIZE])
{
    FILE *f = fopen(path, "rb");
    XXH3_state_t *st = XXH3_createState();
    char *buf = malloc(1 << 20);
    int rc = -1;
    if (f && st && buf && XXH3_128bits_reset(st) == XXH_OK) {
        size_t n;
        while ((n = fread(buf, 1, 1 << 20, f)) > 0)
            XXH3_128bits_update(st, buf, n);
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
        for (int i = 0; i < 16; i++)
            snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
        rc = ferror(f) ? -1 : 0;
    }
    free(buf);
    XXH3_freeState(st);
    if (f)
        fclose(f);
    return rc;
}

/* ---- The plan --------------------------------------------------------------- */

static int32_t *random_prompt(vu *v, uint64_t *rng, uint32_t n)
{
    int32_t *t = malloc(n * sizeof *t);
    for (uint32_t i = 0; t && i < n; i++)
        t[i] = i == 0 && v->bos >= 0 ? (int32_t)v->bos : (int32_t)(cli_rand(rng) % (uint64_t)v->n_vocab);
    return t;
}

static probe *add_probe(vu *v, const char *kind, int32_t *prompt, uint32_t n, uint32_t max_new, uint32_t reps)
{
    probe *p = &v->p[v->n_probes++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->prompt = prompt;
    p->n_prompt = n;
    p->max_new = max_new;
    p->reps = reps;
    p->got = calloc(reps, sizeof *p->got);
    p->ref_source = "first response";
    int at = snprintf(p->label, sizeof p->label, "%s [", kind);
    for (uint32_t i = 0; i < n && at < 36; i++)
        at += snprintf(p->label + at, sizeof p->label - (size_t)at, "%s%d", i ? "," : "", prompt[i]);
    snprintf(p->label + at, sizeof p->label - (size_t)at, "%s]", at >= 36 ? ",..." : "");
    return p->got && prompt ? p : NULL;
}

static int plan(vu *v)
{
    uint64_t rng = (uint64_t)v->o.seed * 0x9e3779b97f4a7c15ull + 1;
    uint32_t max_new = (uint32_t)v->o.max_new;
    uint32_t max_prompt = (uint32_t)(v->context - 2 * max_new > 48 ? 48 : v->context - 2 * max_new);
    if (max_prompt < 4) {
        fprintf(stderr, "detinfer verify --url: the server's context (%lld) is too small for --max-new %u\n",
                v->context, max_new);
        return CLI_EXIT_USAGE;
    }
    /* near ties, as `detinfer verify` finds them (needs the model file);
     * each prefix at most max_prompt tokens, so that it fits the server */
    vf_prompt_set sources = {0};
    vf_near_ties ties = {0};
    if (v->model && v->o.ties > 0) {
        char err[256] = "";
        cli_session_opts so = {.backend = DI_BACKEND_CPU, .profile = v->profile,
                              .threads = 1, .max_sequences = 1, .context_length = 0, .device = 0,
                              .cpu_path = DI_CPU_PATH_AUTO};
        di_status st = vf_prompts_builtin(v->model, max_prompt, (uint64_t)v->o.seed, &sources, err, sizeof err);
        if (st == DI_OK)
            st = vf_prompts_search(v->model, max_prompt, 16, (uint64_t)v->o.seed, &sources, err, sizeof err);
        if (st == DI_OK)
            st = vf_near_ties_search(v->model, &so, sources.p, sources.n, max_prompt, 512 * (uint64_t)v->o.ties,
                                     (uint32_t)v->o.ties, (uint64_t)v->o.seed, &ties, err, sizeof err);
        vf_prompts_free(&sources);
        if (st) {
            vf_near_ties_free(&ties);
            return cli_fail(&command, "searching near ties", st, err);
        }
    }
    uint32_t cap = 4 + ties.n + (uint32_t)v->o.traffic;
    v->p = calloc(cap, sizeof *v->p);
    if (!v->p)
        return CLI_EXIT_FAIL;
    uint32_t reps = (uint32_t)v->o.reps, tie_reps = reps / 5 > 2 ? (uint32_t)reps / 5 : 2;
    if (!add_probe(v, "greedy", random_prompt(v, &rng, max_prompt < 12 ? max_prompt : 12), 12 < max_prompt ? 12 : max_prompt,
                   max_new, reps))
        return CLI_EXIT_FAIL;
    for (uint32_t i = 0; i < ties.n; i++) { /* the probe takes the tie's prefix */
        uint32_t n = ties.t[i].position + 1;
        int32_t *t = ties.t[i].tokens;
        ties.t[i].tokens = NULL;
        if (!add_probe(v, "near-tie", t, n, max_new, tie_reps)) {
            vf_near_ties_free(&ties);
            return CLI_EXIT_FAIL;
        }
    }
    vf_near_ties_free(&ties);
    if (v->sampling) {
        probe *p = add_probe(v, "sampled", random_prompt(v, &rng, 8), 8, max_new, reps);
        if (!p)
            return CLI_EXIT_FAIL;
        p->sampled = 1;
        p->temperature = 0.8;
        p->top_p = 0.95;
        p->seed = v->o.seed * 7919 + 17;
        snprintf(p->label, sizeof p->label, "sampled seed %lld [%d,%d,%d,...]", p->seed, p->prompt[0], p->prompt[1],
                 p->prompt[2]);
    }
    for (int sampled = 0; sampled <= v->sampling; sampled++) { /* structured output: a JSON schema */
        probe *p = add_probe(v, "json", random_prompt(v, &rng, 8), 8, max_new, sampled ? reps / 2 : reps);
        if (!p)
            return CLI_EXIT_FAIL;
        p->constrained = 1;
        p->sampled = sampled;
        p->temperature = 0.9;
        p->top_p = 1.0;
        p->seed = v->o.seed * 104729 + 3;
        snprintf(p->label, sizeof p->label, "json schema%s [%d,%d,%d,...]", sampled ? ", sampled" : "", p->prompt[0],
                 p->prompt[1], p->prompt[2]);
    }
    for (long i = 0; i < v->o.traffic; i++) {
        uint32_t n = 1 + (uint32_t)(cli_rand(&rng) % max_prompt);
        uint32_t m = 1 + (uint32_t)(cli_rand(&rng) % (2 * max_new));
        if (!add_probe(v, "traffic", random_prompt(v, &rng, n), n, m, 1))
            return CLI_EXIT_FAIL;
    }
    for (uint32_t i = 0; i < v->n_probes; i++)
        v->n_jobs += v->p[i].reps;
    v->jobs = calloc(v->n_jobs, sizeof *v->jobs);
    if (!v->jobs)
        return CLI_EXIT_FAIL;
    uint32_t k = 0;
    for (uint32_t i = 0; i < v->n_probes; i++)
        for (uint32_t r = 0; r < v->p[i].reps; r++)
            v->jobs[k++] = (job){i, r};
    for (uint32_t i = v->n_jobs; i > 1; i--) { /* shuffled: the checked requests among the traffic */
        uint32_t j = (uint32_t)(cli_rand(&rng) % i);
        job t = v->jobs[i - 1];
        v->jobs[i - 1] = v->jobs[j];
        v->jobs[j] = t;
    }
    return CLI_EXIT_OK;
}

static int references(vu *v)
{
    if (!v->model)
        return CLI_EXIT_OK;
    di_session *s = NULL;
    char err[512] = "";
    cli_session_opts so = {.backend = DI_BACKEND_CPU, .profile = v->profile, .threads = 1,
                          .max_sequences = 1, .context_length = v->context, .device = 0,
                          .cpu_path = DI_CPU_PATH_AUTO};
    di_status st = cli_open_session(v->model, &so, &s, err, sizeof err);
    if (st)
        return cli_fail(&command, "creating the local session", st, err);
    int rc = CLI_EXIT_OK;
    for (uint32_t i = 0; i < v->n_probes && rc == CLI_EXIT_OK; i++)
        if (local_reference(v, s, &v->p[i]))
            rc = CLI_EXIT_FAIL;
    di_session_free(s);
    return rc;
}

/* ---- Comparison and report ------------------------------------------------ */

/* -1 when equal, else the first differing generated position (n when only
 * the lengths or the sequence digests differ). */
static long first_difference(const outcome *a, const outcome *b)
{
    uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++)
        if (a->tokens[i] != b->tokens[i] || strcmp(a->digests[i], b->digests[i]))
            return i;
    if (a->n != b->n || strcmp(a->sequence, b->sequence))
        return n;
    return -1;
}

static int compare(vu *v)
{
    int problems = 0;
    for (uint32_t i = 0; i < v->n_probes; i++) {
        probe *p = &v->p[i];
        const outcome *ref = p->ref.ok ? &p->ref : NULL;
        for (uint32_t r = 0; r < p->reps; r++) {
            outcome *o = &p->got[r];
            if (!o->ok) {
                printf("FAILED %s, request %u of %u: %s\n", p->label, r + 1, p->reps, o->error);
                problems++;
                continue;
            }
            if (!ref) {
                ref = o; /* the first response is the reference */
                p->ref_source = "first response";
            }
            long pos = first_difference(ref, o);
            if (pos < 0) {
                p->matched++;
                continue;
            }
            problems++;
            printf("MISMATCH %s, request %u of %u, generated position %ld (sequence position %ld):\n", p->label,
                   r + 1, p->reps, pos, pos + (long)p->n_prompt);
            if ((uint32_t)pos < o->n && (uint32_t)pos < ref->n)
                printf("  token %d logits %s, reference (%s) token %d logits %s\n", o->tokens[pos], o->digests[pos],
                       p->ref_source, ref->tokens[pos], ref->digests[pos]);
            printf("  sequence %s (%u tokens), reference %s (%u tokens)\n", o->sequence, o->n, ref->sequence, ref->n);
        }
    }
    return problems;
}

static void report(vu *v, double seconds)
{
    printf("\n%-48s %-9s %8s %8s  %-15s %s\n", "request", "kind", "sent", "matched", "reference", "result");
    uint32_t traffic = 0, traffic_ok = 0, total = 0, ok = 0;
    for (uint32_t i = 0; i < v->n_probes; i++) {
        probe *p = &v->p[i];
        total += p->reps;
        ok += p->matched;
        if (!strcmp(p->kind, "traffic")) {
            traffic += p->reps;
            traffic_ok += p->matched;
            continue;
        }
        printf("%-48s %-9s %8u %8u  %-15s %s\n", p->label, p->kind, p->reps, p->matched, p->ref_source,
               p->matched == p->reps ? "OK" : "MISMATCH");
    }
    if (traffic)
        printf("%-48s %-9s %8u %8u  %-15s %s\n", "other traffic (varied lengths, each once)", "traffic", traffic,
               traffic_ok, v->model ? "local library" : "itself", traffic_ok == traffic ? "OK" : "MISMATCH");
    printf("\n%u requests in %.1f s, %ld at once: %u matched, %u did not. %s\n", total, seconds, v->o.concurrency, ok,
           total - ok, ok == total ? "OK: every response equals its reference." : "FAILED.");
}

static int apply_option(int k, const char *val, void *opts)
{
    vu_opts *o = opts;
    switch (k) {
    case OPT_URL: o->url = val; return 1;
    case OPT_MODEL: o->model = val; return 1;
    case OPT_API_KEY_FILE: o->key_file = val; return 1;
    case OPT_REPS: return cli_parse_long(&command, options[k].name, val, 2, 100000, &o->reps);
    case OPT_MAX_NEW: return cli_parse_long(&command, options[k].name, val, 1, 4096, &o->max_new);
    case OPT_CONCURRENCY: return cli_parse_long(&command, options[k].name, val, 1, 1024, &o->concurrency);
    case OPT_TRAFFIC: return cli_parse_long(&command, options[k].name, val, 0, 100000, &o->traffic);
    case OPT_TIES: return cli_parse_long(&command, options[k].name, val, 0, 64, &o->ties);
    case OPT_SEED: return cli_parse_long(&command, options[k].name, val, 0, 1L << 30, &o->seed);
    case OPT_TIMEOUT: return cli_parse_long(&command, options[k].name, val, 1, 86400, &o->timeout);
    case OPT_SAVE: o->save_dir = val; return 1;
    }
    return 1;
}

static char *read_key(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[4096];
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    return strdup(line);
}

void vu_print_help(FILE *f)
{
    cli_print_help(&command, f);
}

int cli_cmd_verify_url(int argc, char **argv)
{
    vu v = {0};
    v.o = (vu_opts){.reps = 50, .max_new = 16, .concurrency = 16, .traffic = -1, .ties = 4, .seed = 1, .timeout = 300};
    int rc = cli_parse_options(&command, argc, argv, apply_option, &v.o, NULL);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!v.o.url)
        return cli_usage(&command, "--url is required");
    if (strncmp(v.o.url, "http://", 7) && strncmp(v.o.url, "https://", 8))
        return cli_usage(&command, "--url must start with http:// or https://");
    struct stat sd;
    if (v.o.save_dir && (stat(v.o.save_dir, &sd) || !S_ISDIR(sd.st_mode)))
        return cli_usage(&command, "--save %s: not a directory", v.o.save_dir);
    if (v.o.traffic < 0)
        v.o.traffic = 2 * v.o.reps;
    if (v.o.key_file && !(v.key = read_key(v.o.key_file))) {
        fprintf(stderr, "detinfer verify --url: cannot read --api-key-file %s\n", v.o.key_file);
        return CLI_EXIT_USAGE;
    }
    pthread_mutex_init(&v.lock, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if ((rc = read_server_info(&v)))
        goto out;
    printf("server %s: model %s (file digest %s), libdetinfer %s, %s, context %lld, %s\n", v.o.url, v.server_model,
           v.server_digest, v.server_version, v.server_backend, v.context,
           v.sampling ? "samples" : "greedy only");
    if (v.o.model) {
        char local[DI_DIGEST_HEX_SIZE];
        if (file_digest(v.o.model, local)) {
            fprintf(stderr, "detinfer verify --url: cannot read %s\n", v.o.model);
            rc = CLI_EXIT_FAIL;
            goto out;
        }
        if (strcmp(local, v.server_digest)) {
            fprintf(stderr, "detinfer verify --url: %s (digest %s) is not the server's model file (digest %s)\n",
                    v.o.model, local, v.server_digest);
            rc = CLI_EXIT_FAIL;
            goto out;
        }
        if ((rc = cli_load_model(&command, v.o.model, &v.model)))
            goto out;
        printf("local  %s: the same file; libdetinfer %s\n", v.o.model, di_version_string());
    }
    if ((rc = plan(&v)) || (rc = references(&v)))
        goto out;
    printf("sending %u requests, %ld at once...\n", v.n_jobs, v.o.concurrency);
    fflush(stdout);
    double t0 = cli_now();
    long n_threads = v.o.concurrency < (long)v.n_jobs ? v.o.concurrency : (long)v.n_jobs;
    pthread_t *threads = calloc((size_t)n_threads, sizeof *threads);
    long started = 0;
    for (; threads && started < n_threads; started++)
        if (pthread_create(&threads[started], NULL, worker, &v))
            break;
    if (started == 0)
        worker(&v);
    for (long i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    int problems = compare(&v);
    report(&v, cli_now() - t0);
    rc = problems ? CLI_EXIT_FAIL : CLI_EXIT_OK;
out:
    for (uint32_t i = 0; i < v.n_probes; i++) {
        for (uint32_t r = 0; r < v.p[i].reps && v.p[i].got; r++)
            outcome_free(&v.p[i].got[r]);
        free(v.p[i].got);
        outcome_free(&v.p[i].ref);
        free(v.p[i].prompt);
    }
    free(v.p);
    free(v.jobs);
    free(v.key);
    di_model_free(v.model);
    curl_global_cleanup();
    pthread_mutex_destroy(&v.lock);
    return rc;
}
