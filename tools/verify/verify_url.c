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
 * This file holds the options, reads the server's facts, sends the requests
 * and runs the steps in order: the probes and their local references are
 * verify_url_plan.c's, HTTP verify_http.c's (libcurl), the comparison
 * verify_compare.c's and the table verify_report.c's; JSON from jansson.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_digest.h"
#include "verify/verify_url.h"

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

const cli_command vu_command = {
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

static void copy_str(char *dst, size_t n, json_t *v)
{
    const char *s = json_string_value(v);
    snprintf(dst, n, "%s", s ? s : "?");
}

static int read_server_info(vu *v)
{
    char err[512];
    long status;
    json_t *root = vf_http_json(&v->http, "/v1/models", NULL, &status, err, sizeof err);
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
        !cli_parse_profile(&vu_command, "the server's profile", json_string_value(profile), &v->profile)) {
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

static void parse_response(json_t *root, vu_outcome *o)
{
    json_t *d = json_object_get(root, "detinfer");
    json_t *ids = json_object_get(d, "completion_token_ids");
    json_t *digests = json_object_get(d, "logits_digests");
    const char *seq = json_string_value(json_object_get(d, "sequence_digest"));
    if (!json_is_array(ids) || !json_is_array(digests) || !seq || json_array_size(ids) != json_array_size(digests)) {
        snprintf(o->error, sizeof o->error, "the response lacks the detinfer token ids and digests");
        return;
    }
    if (vu_outcome_alloc(o, (uint32_t)json_array_size(ids))) {
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
static void save_receipt(const vu *v, const vu_job *j, const char *req, json_t *response)
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
        vu_probe *p = &v->p[v->jobs[i].probe];
        vu_outcome *o = &p->got[v->jobs[i].rep];
        char *req = vu_request_json(p);
        long status;
        json_t *root = req ? vf_http_json(&v->http, "/v1/completions", req, &status, o->error, sizeof o->error)
                           : NULL;
        if (root && v->o.save_dir)
            save_receipt(v, &v->jobs[i], req, root);
        free(req);
        if (root)
            parse_response(root, o);
        json_decref(root);
    }
}

static int apply_option(int k, const char *val, void *opts)
{
    vu_opts *o = opts;
    switch (k) {
    case OPT_URL: o->url = val; return 1;
    case OPT_MODEL: o->model = val; return 1;
    case OPT_API_KEY_FILE: o->key_file = val; return 1;
    case OPT_REPS: return cli_parse_long(&vu_command, options[k].name, val, 2, 100000, &o->reps);
    case OPT_MAX_NEW: return cli_parse_long(&vu_command, options[k].name, val, 1, 4096, &o->max_new);
    case OPT_CONCURRENCY: return cli_parse_long(&vu_command, options[k].name, val, 1, 1024, &o->concurrency);
    case OPT_TRAFFIC: return cli_parse_long(&vu_command, options[k].name, val, 0, 100000, &o->traffic);
    case OPT_TIES: return cli_parse_long(&vu_command, options[k].name, val, 0, 64, &o->ties);
    case OPT_SEED: return cli_parse_long(&vu_command, options[k].name, val, 0, 1L << 30, &o->seed);
    case OPT_TIMEOUT: return cli_parse_long(&vu_command, options[k].name, val, 1, 86400, &o->timeout);
    case OPT_SAVE: o->save_dir = val; return 1;
    }
    return 1;
}

void vu_print_help(FILE *f)
{
    cli_print_help(&vu_command, f);
}

int cli_cmd_verify_url(int argc, char **argv)
{
    vu v = {0};
    v.o = (vu_opts){.reps = 50, .max_new = 16, .concurrency = 16, .traffic = -1, .ties = 4, .seed = 1, .timeout = 300};
    int rc = cli_parse_options(&vu_command, argc, argv, apply_option, &v.o, NULL);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!v.o.url)
        return cli_usage(&vu_command, "--url is required");
    if (strncmp(v.o.url, "http://", 7) && strncmp(v.o.url, "https://", 8))
        return cli_usage(&vu_command, "--url must start with http:// or https://");
    struct stat sd;
    if (v.o.save_dir && (stat(v.o.save_dir, &sd) || !S_ISDIR(sd.st_mode)))
        return cli_usage(&vu_command, "--save %s: not a directory", v.o.save_dir);
    if (v.o.traffic < 0)
        v.o.traffic = 2 * v.o.reps;
    if (v.o.key_file && !(v.key = vf_http_read_key(v.o.key_file))) {
        fprintf(stderr, "detinfer verify --url: cannot read --api-key-file %s\n", v.o.key_file);
        return CLI_EXIT_USAGE;
    }
    pthread_mutex_init(&v.lock, NULL);
    v.http = (vf_http){.url = v.o.url, .key = v.key, .timeout = v.o.timeout};
    vf_http_global_init();
    if ((rc = read_server_info(&v)))
        goto out;
    printf("server %s: model %s (file digest %s), libdetinfer %s, %s, context %lld, %s\n", v.o.url, v.server_model,
           v.server_digest, v.server_version, v.server_backend, v.context,
           v.sampling ? "samples" : "greedy only");
    if (v.o.model) {
        char local[DI_DIGEST_HEX_SIZE];
        if (cli_file_digest(v.o.model, local)) {
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
        if ((rc = cli_load_model(&vu_command, v.o.model, &v.model)))
            goto out;
        printf("local  %s: the same file; libdetinfer %s\n", v.o.model, di_version_string());
    }
    if ((rc = vu_plan(&v)) || (rc = vu_references(&v)))
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
    uint32_t problems = vu_compare(&v);
    vu_print_report(&v, cli_now() - t0);
    rc = problems ? CLI_EXIT_FAIL : CLI_EXIT_OK;
out:
    vu_plan_free(&v);
    free(v.key);
    di_model_free(v.model);
    vf_http_global_cleanup();
    pthread_mutex_destroy(&v.lock);
    return rc;
}
