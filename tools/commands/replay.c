/*
 * replay.c — `detinfer replay --model M RECEIPT...`: a served answer
 * checked by anyone holding the model file.
 *
 * A receipt is a request to `detinfer serve` and its response, saved
 * together ({"request": {...}, "response": {...}}, optionally "endpoint";
 * `verify --url --save DIR` writes them); a file holds one, or one per line
 * (JSONL); "-" is standard input. Each request is parsed and tokenized by the
 * server's own code (tools/serve/serve_request.c) and run by its engine on a
 * local session, alone; then the prompt (count, digest, ids), the sampling
 * parameters as applied, and every choice's token ids, logits digests,
 * sequence digest, text and finish reason are compared with the response;
 * then the rest of the response against the one the server's own code
 * writes for the recomputation (compare_response).
 * Prints matched or DIFFERS per receipt with the first difference; exit
 * status 0 only when every receipt matched (docs/SERVING.md, "Auditing a
 * served answer").
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_commands.h"
#include "cli/cli_digest.h"
#include "cli/cli_fingerprint.h"
#include "cli/cli_json.h"
#include "cli/cli_text.h"
#include "serve/serve.h"

enum { OPT_MODEL, OPT_PROFILE, OPT_THREADS, OPT_CPU_PATH, OPT_BACKEND, OPT_DEVICE };

static const cli_option options[] = {
    [OPT_MODEL] = {"--model", "FILE", "the server's model file (required: its digest must be the receipts')"},
    [OPT_PROFILE] = {"--profile", "NAME", "numerics profile (default: the first receipt's)"},
    [OPT_THREADS] = {"--threads", "N", "worker threads (default 1); results do not depend on it"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_BACKEND] = {"--backend", "NAME", "cpu (default) or cuda"},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    {NULL, NULL, NULL},
};

static const cli_command command = {
    "replay",
    "--model FILE RECEIPT.json|RECEIPTS.jsonl|- ...",
    "Recomputes answers of `detinfer serve` from their receipts (the request and\n"
    "the response saved together; `verify --url --save DIR` writes them): each\n"
    "request is tokenized and run locally, alone, and its tokens, digests, text and\n"
    "sampling parameters compared with the response. Prints matched or DIFFERS\n"
    "per receipt with the first difference; exit status 0 only when all matched.\n"
    "In the portable and integer profiles a match holds on any machine; in the\n"
    "device profile, on the same GPU model.",
    options,
};

typedef struct replay_opts {
    const char *model;
    di_profile profile;
    int profile_given;
    long threads, device;
    di_backend backend;
    di_cpu_path cpu_path;
    char **files; /* the operands, room for argc */
    int n_files;
} replay_opts;

static int apply_option(int k, const char *v, void *opts)
{
    replay_opts *o = opts;
    switch (k) {
    case CLI_OPERAND: o->files[o->n_files++] = (char *)v; return 1;
    case OPT_MODEL: o->model = v; return 1;
    case OPT_PROFILE: o->profile_given = 1; return cli_parse_profile(&command, options[k].name, v, &o->profile);
    case OPT_THREADS: return cli_parse_long(&command, options[k].name, v, 1, 256, &o->threads);
    case OPT_CPU_PATH: return cli_parse_cpu_path(&command, options[k].name, v, &o->cpu_path);
    case OPT_BACKEND: return cli_parse_backend(&command, options[k].name, v, &o->backend);
    case OPT_DEVICE: return cli_parse_device(&command, options[k].name, v, &o->device);
    }
    return 1;
}

/* ---- Receipts --------------------------------------------------------------- */

/* The receipts of a file (one JSON value, or one per line), appended to all. */
static int read_receipts(const char *path, json_t *all)
{
    size_t len = 0;
    char *text = cli_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "detinfer replay: cannot read %s\n", path);
        return -1;
    }
    json_error_t je;
    json_t *one = text ? json_loadb(text, len, JSON_ALLOW_NUL, &je) : NULL;
    if (one) {
        json_array_append_new(all, one);
    } else {
        for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
            if (strspn(line, " \t\r") == strlen(line))
                continue;
            json_t *r = json_loads(line, JSON_ALLOW_NUL, &je);
            if (!r) {
                fprintf(stderr, "detinfer replay: %s: a line is not JSON: %s\n", path, je.text);
                free(text);
                return -1;
            }
            json_array_append_new(all, r);
        }
    }
    free(text);
    return 0;
}

/* What one receipt says, read defensively: a receipt is not trusted. */
typedef struct receipt {
    json_t *request, *response, *detinfer;
    sv_kind kind;
    const char *profile, *model_digest, *chat_template;
} receipt;

static const char *get_str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int read_receipt(json_t *j, receipt *rc, char *why, size_t ws)
{
    rc->request = json_object_get(j, "request");
    rc->response = json_object_get(j, "response");
    rc->detinfer = json_object_get(rc->response, "detinfer");
    json_t *fp = json_object_get(rc->detinfer, "fingerprint");
    if (!json_is_object(rc->request) || !json_is_object(rc->detinfer) || !json_is_object(fp) ||
        !json_is_array(json_object_get(rc->response, "choices"))) {
        snprintf(why, ws, "not a receipt: it needs \"request\" and a non-streamed \"response\" with its "
                          "\"choices\" and \"detinfer\" object");
        return -1;
    }
    const char *endpoint = get_str(j, "endpoint");
    rc->kind = (endpoint ? strstr(endpoint, "chat") != NULL : json_object_get(rc->request, "messages") != NULL)
                   ? SV_CHAT : SV_COMPLETION;
    rc->profile = get_str(fp, "profile");
    rc->model_digest = get_str(fp, "model_digest");
    rc->chat_template = get_str(rc->detinfer, "chat_template");
    return 0;
}

/* ---- Comparing ---------------------------------------------------------------- */

/* The detinfer facts of response choice i: its entry in "choices" (n > 1),
 * else the object itself. */
static json_t *choice_facts(json_t *detinfer, uint32_t i)
{
    json_t *all = json_object_get(detinfer, "choices");
    return json_is_array(all) ? json_array_get(all, i) : i == 0 ? detinfer : NULL;
}

static json_t *response_choice(json_t *response, uint32_t i)
{
    json_t *choices = json_object_get(response, "choices");
    for (size_t k = 0; k < json_array_size(choices); k++) {
        json_t *c = json_array_get(choices, k);
        if (json_is_integer(json_object_get(c, "index")) && json_integer_value(json_object_get(c, "index")) == i)
            return c;
    }
    return NULL;
}

/* The first position where ids differs from want[0..n), or -1. */
static long first_difference(json_t *ids, const int32_t *want, uint32_t n)
{
    const size_t got = json_is_array(ids) ? json_array_size(ids) : 0;
    for (size_t i = 0; i < got || i < n; i++) {
        json_t *v = json_array_get(ids, i);
        if (i >= got || i >= n || !json_is_integer(v) || json_integer_value(v) != want[i])
            return (long)i;
    }
    return -1;
}

static int hex_equal(json_t *v, const di_digest *d)
{
    char h[DI_DIGEST_HEX_SIZE];
    cli_hex(d, h);
    return json_is_string(v) && !strcmp(json_string_value(v), h);
}

/* The sampling parameters applied, against the receipt's. */
static int same_params(json_t *given, const sv_request *r, char *why, size_t ws)
{
    json_t *want = cli_json_sampling(&r->params);
    json_object_set_new(want, "seed", json_integer((json_int_t)r->params.seed));
    json_object_set_new(want, "max_tokens", json_integer(r->max_tokens));
    json_object_set_new(want, "n", json_integer(r->n));
    const char *key;
    json_t *value;
    int same = json_is_object(given);
    json_object_foreach(want, key, value)
    {
        json_t *g = json_object_get(given, key);
        const int ok = json_is_integer(value) ? json_is_integer(g) && json_integer_value(g) == json_integer_value(value)
                                              : json_is_number(g) && json_number_value(g) == json_number_value(value);
        if (same && !ok) {
            snprintf(why, ws, "sampling parameter %s: the receipt's differs from the request's as applied here", key);
            same = 0;
        }
    }
    json_decref(want);
    return same;
}

/* One response choice against its recomputation; 0 when equal, else why. */
static int compare_choice(const sv_request *r, uint32_t i, json_t *facts, json_t *choice, char *why, size_t ws)
{
    const sv_choice *c = sv_choice_of(r, i);
    if (!json_is_object(facts) || !json_is_object(choice))
        return snprintf(why, ws, "choice %u: missing from the response", i), -1;
    const long at = first_difference(json_object_get(facts, "completion_token_ids"), c->out, c->n_out);
    if (at >= 0) {
        json_t *v = json_array_get(json_object_get(facts, "completion_token_ids"), (size_t)at);
        char got[32] = "(none)", want[32] = "(none)";
        if (json_is_integer(v))
            snprintf(got, sizeof got, "%lld", (long long)json_integer_value(v));
        if ((uint32_t)at < c->n_out)
            snprintf(want, sizeof want, "%d", c->out[at]);
        return snprintf(why, ws, "choice %u: token %ld: the receipt has %s, recomputed %s", i, at, got, want), -1;
    }
    json_t *digests = json_object_get(facts, "logits_digests");
    for (uint32_t k = 0; digests && k < c->n_out; k++)
        if (!hex_equal(json_array_get(digests, k), &c->digests[k]))
            return snprintf(why, ws, "choice %u: the logits digest of token %u differs", i, k), -1;
    if (!hex_equal(json_object_get(facts, "sequence_digest"), &c->sequence))
        return snprintf(why, ws, "choice %u: the sequence digest differs", i), -1;
    if (r->sampled && !(json_is_integer(json_object_get(facts, "seed")) &&
                        (uint64_t)json_integer_value(json_object_get(facts, "seed")) == c->seed))
        return snprintf(why, ws, "choice %u: the seed differs (recomputed with %llu)", i,
                        (unsigned long long)c->seed), -1;
    json_t *text = r->kind == SV_CHAT ? json_object_get(json_object_get(choice, "message"), "content")
                                      : json_object_get(choice, "text");
    json_t *want = sv_choice_text(r, c);
    const int same_text = json_equal(text, want);
    json_decref(want);
    if (!same_text)
        return snprintf(why, ws, "choice %u: the text differs", i), -1;
    const char *finish = get_str(choice, "finish_reason");
    if (!finish || strcmp(finish, c->finish_reason ? c->finish_reason : "length"))
        return snprintf(why, ws, "choice %u: finish_reason %s, recomputed %s", i, finish ? finish : "(none)",
                        c->finish_reason), -1;
    return 0;
}

/* A prompt as re-tokenized here against the receipt's count, digest and ids
 * (facts: the detinfer object, or with a list of prompts a choice's facts). */
static int compare_one_prompt(const sv_prompt *p, json_t *facts, const char *what, char *why, size_t ws)
{
    di_digest digest;
    if (cli_digest_bytes(p->ids, (size_t)p->n * sizeof *p->ids, &digest) != DI_OK)
        return snprintf(why, ws, "%s: out of memory for its digest", what), -1;
    json_t *ids = json_object_get(facts, "prompt_ids");
    const long at = ids ? first_difference(ids, p->ids, p->n) : -1;
    if (at >= 0)
        return snprintf(why, ws, "%s: its token %ld differs (re-tokenized here: %u tokens)", what, at, p->n), -1;
    json_t *count = json_object_get(facts, "prompt_tokens");
    if (!json_is_integer(count) || json_integer_value(count) != p->n)
        return snprintf(why, ws, "%s: the receipt has %lld tokens, re-tokenized here %u", what,
                        (long long)json_integer_value(count), p->n), -1;
    if (!hex_equal(json_object_get(facts, "prompt_digest"), &digest))
        return snprintf(why, ws, "%s: its digest differs from the %u tokens re-tokenized here", what, p->n), -1;
    return 0;
}

static int compare_prompt(const sv_request *r, json_t *d, char *why, size_t ws)
{
    if (r->n_prompts == 1)
        return compare_one_prompt(&r->prompts[0], d, "the prompt", why, ws);
    for (uint32_t i = 0; i < sv_response_choices(r); i++) {
        char what[48];
        snprintf(what, sizeof what, "prompt %u (choice %u)", i / r->n, i);
        if (compare_one_prompt(sv_choice_of(r, i)->prompt, choice_facts(d, i), what, why, ws))
            return -1;
    }
    return 0;
}

/* The grammar rebuilt from the request against the receipt's digest. */
static int compare_grammar(const sv_request *r, json_t *d, char *why, size_t ws)
{
    const char *want = get_str(d, "grammar_digest");
    const char *got = r->grammar ? sv_grammar_digest(r->grammar) : NULL;
    if (!want && !got)
        return 0;
    if (!want || !got || strcmp(want, got))
        return snprintf(why, ws, "the grammar: the receipt's digest is %s, the request's grammar rebuilt here %s",
                        want ? want : "(none)", got ? got : "(none)"), -1;
    return 0;
}

/* Where got first says something other than want, and the two values. */
typedef struct json_diff {
    char path[256];
    json_t *got, *want;
} json_diff;

/* 1 when got says what want says: equal scalars, arrays of the same length,
 * objects with the same keys, except that got may add keys whose value is
 * null and lack those whose value is null in want (what a client's SDK does
 * when it writes a response back). Else 0, with d filled from d->path on. */
static int same_json(json_t *got, json_t *want, json_diff *d)
{
    const size_t len = strlen(d->path), room = sizeof d->path - len;
    const char *key;
    json_t *v;
    if (json_is_object(want) && json_is_object(got)) {
        json_object_foreach(want, key, v)
        {
            snprintf(d->path + len, room, "%s%s", len ? "." : "", key);
            if (!same_json(json_object_get(got, key), v, d))
                return 0;
        }
        json_object_foreach(got, key, v)
        {
            snprintf(d->path + len, room, "%s%s", len ? "." : "", key);
            if (!json_object_get(want, key) && !json_is_null(v))
                return d->got = v, d->want = NULL, 0;
        }
    } else if (json_is_array(want) && json_is_array(got) && json_array_size(got) == json_array_size(want)) {
        for (size_t i = 0; i < json_array_size(want); i++) {
            snprintf(d->path + len, room, "[%zu]", i);
            if (!same_json(json_array_get(got, i), json_array_get(want, i), d))
                return 0;
        }
    } else if (json_is_null(want) ? got && !json_is_null(got) : !json_equal(got, want)) {
        return d->got = got, d->want = want, 0;
    }
    d->path[len] = '\0';
    return 1;
}

/* A short text of v for a message. */
static const char *brief(json_t *v, char *buf, size_t size)
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(buf, size, "%s", text ? text : "(none)");
    if (text && strlen(text) >= size && size > 4)
        strcpy(buf + size - 4, "...");
    free(text);
    return buf;
}

/* In want, the receipt's value of key (or none, as the receipt has none). */
static void take_receipts(json_t *want, json_t *got, const char *key)
{
    json_t *v = json_object_get(got, key);
    if (v)
        json_object_set(want, key, v);
    else
        json_object_del(want, key);
}

/* Every other field the server computed: the whole response against the one
 * the server's own code writes for the recomputed request (usage,
 * system_fingerprint, each choice's message or text, logprobs and
 * finish_reason, the detinfer object...). Not compared, as they are the
 * server's and not the answer's: id, created and model (a name, a time, its
 * --model-name), what --speculate did (detinfer.speculation, per choice),
 * and the fingerprint's library_version and backend (its
 * build and machine: system_fingerprint stands for the digests they
 * promise, and is compared). */
static int compare_response(const sv_server *srv, const sv_request *r, json_t *response, char *why, size_t ws)
{
    char *text = sv_response_json(srv, r);
    json_error_t je = {.text = "out of memory"};
    json_t *want = text ? json_loads(text, JSON_ALLOW_NUL, &je) : NULL; /* a text may hold NUL bytes */
    free(text);
    if (!want)
        return snprintf(why, ws, "the recomputed response: %s", je.text), -1;
    take_receipts(want, response, "id");
    take_receipts(want, response, "created");
    take_receipts(want, response, "model");
    json_t *fp = json_object_get(json_object_get(response, "detinfer"), "fingerprint");
    json_t *want_fp = json_object_get(json_object_get(want, "detinfer"), "fingerprint");
    if (json_is_object(fp) && json_is_object(want_fp)) {
        take_receipts(want_fp, fp, "library_version");
        take_receipts(want_fp, fp, "backend");
    }
    /* what --speculate did for the speed: the server's, not the answer's
     * (the answer is the same without it) */
    json_t *facts = json_object_get(response, "detinfer"), *want_facts = json_object_get(want, "detinfer");
    if (json_is_object(facts) && json_is_object(want_facts)) {
        take_receipts(want_facts, facts, "speculation");
        json_t *choices = json_object_get(facts, "choices"), *want_choices = json_object_get(want_facts, "choices");
        for (size_t i = 0; i < json_array_size(choices) && i < json_array_size(want_choices); i++)
            if (json_is_object(json_array_get(choices, i)) && json_is_object(json_array_get(want_choices, i)))
                take_receipts(json_array_get(want_choices, i), json_array_get(choices, i), "speculation");
    }
    json_diff d = {"", NULL, NULL};
    int rc = 0;
    if (!same_json(response, want, &d)) {
        char got[96], wanted[96];
        snprintf(why, ws, "%s: the receipt has %s, recomputed %s", d.path, brief(d.got, got, sizeof got),
                 brief(d.want, wanted, sizeof wanted));
        rc = -1;
    }
    json_decref(want);
    return rc;
}

/* ---- Running ---------------------------------------------------------------- */

/* The request as the server applied it: the max_tokens it chose when the
 * request gave none, and not streamed (the receipt holds the whole answer). */
static char *request_body(const receipt *rc)
{
    json_t *req = json_deep_copy(rc->request);
    json_object_del(req, "stream");
    json_object_del(req, "stream_options");
    json_t *applied = json_object_get(json_object_get(rc->detinfer, "sampling_params"), "max_tokens");
    if (!json_object_get(req, "max_tokens") && !json_object_get(req, "max_completion_tokens") && applied)
        json_object_set(req, "max_tokens", applied);
    return sv_json_dump(req);
}

/* Runs one receipt; 0 matched, 1 differs (why says where). */
static int replay_one(sv_server *srv, const receipt *rc, char *why, size_t ws)
{
    if (!rc->model_digest || strcmp(rc->model_digest, srv->model_digest))
        return snprintf(why, ws, "model digest %s; this file's is %s", rc->model_digest ? rc->model_digest : "(none)",
                        srv->model_digest), 1;
    if (!rc->profile || strcmp(rc->profile, cli_profile_name(srv->cfg.profile)))
        return snprintf(why, ws, "profile %s; this replay runs %s (--profile)", rc->profile ? rc->profile : "(none)",
                        cli_profile_name(srv->cfg.profile)), 1;
    sv_engine_lock(srv); /* the engine reads the end of turn while it steps */
    srv->chat_template = rc->chat_template ? rc->chat_template : di_model_chat_template(srv->model);
    srv->eot = sv_turn_end_token(srv->model, srv->chat_template);
    sv_engine_unlock(srv);
    char *body = request_body(rc);
    sv_request *r = NULL;
    sv_error e;
    if (!body || sv_request_parse(srv, rc->kind, body, strlen(body), &r, &e)) {
        free(body);
        return snprintf(why, ws, "the request is refused here: %.400s", body ? e.message : "out of memory"), 1;
    }
    free(body);
    int rcode = compare_prompt(r, rc->detinfer, why, ws) || compare_grammar(r, rc->detinfer, why, ws) ||
                !same_params(json_object_get(rc->detinfer, "sampling_params"), r, why, ws);
    if (!rcode && sv_engine_submit(srv, r, &e)) {
        snprintf(why, ws, "%s", e.message);
        rcode = 1;
    } else if (!rcode) {
        sv_engine_lock(srv);
        while (!sv_request_done(r))
            sv_engine_wait(srv, r, 1.0);
        sv_engine_unlock(srv);
        const char *error = sv_request_error(r);
        if (error)
            rcode = snprintf(why, ws, "recomputing failed: %s", error) > 0;
        const uint32_t n_choices = sv_response_choices(r);
        for (uint32_t i = 0; !rcode && i < n_choices; i++)
            rcode = compare_choice(r, i, choice_facts(rc->detinfer, i), response_choice(rc->response, i), why, ws) != 0;
        if (!rcode && json_array_size(json_object_get(rc->response, "choices")) != n_choices)
            rcode = snprintf(why, ws, "the response has %zu choices, the request asks for %u",
                             json_array_size(json_object_get(rc->response, "choices")), n_choices) > 0;
        if (!rcode)
            rcode = compare_response(srv, r, rc->response, why, ws) != 0;
        sv_engine_release(srv, r);
        return rcode;
    }
    sv_request_free(r);
    return rcode;
}

static int start(sv_server *srv, const replay_opts *o, const char *profile)
{
    srv->cfg = (sv_config){.model_path = o->model, .threads = o->threads, .max_sequences = 64, .queue = 1, .chunk = 64,
                         .backend = o->backend, .device = o->device, .cpu_path = o->cpu_path, .max_n = 64,
                         .max_tokens_default = 256, .max_prompts = 1024, .model_name = "replay",
                         .profile = o->profile}; /* unless the first receipt names one and --profile did not */
    if (!o->profile_given && profile && cli_parse_profile(&command, "--profile", profile, &srv->cfg.profile) != 1)
        return CLI_EXIT_FAIL;
    int rc = cli_load_model(&command, o->model, &srv->model);
    if (rc)
        return rc;
    srv->n_vocab = cli_model_int(srv->model, DI_MODEL_N_VOCAB);
    srv->max_token_bytes = sv_max_token_bytes(srv->model, srv->n_vocab);
    int64_t train = cli_model_int(srv->model, DI_MODEL_N_CTX_TRAIN);
    srv->context = train > 0 && train < (1 << 20) ? train : 1 << 20;
    srv->cfg.context = (long)srv->context;
    srv->cfg.max_tokens = (long)srv->context;
    if (di_model_special_token(srv->model, DI_TOKEN_EOS, &srv->eos) != DI_OK)
        srv->eos = -1;
    srv->eot = -1;
    di_sampling_params p;
    srv->sampling_available = di_sampling_params_init(&p) == DI_OK;
    if (cli_file_digest(o->model, srv->model_digest)) {
        fprintf(stderr, "detinfer replay: cannot read %s to digest it\n", o->model);
        return CLI_EXIT_FAIL;
    }
    di_digest fp; /* the server's system_fingerprint, as this machine computes it for the profile */
    if (cli_fingerprint(srv->cfg.profile, &fp) != DI_OK)
        return cli_fail(&command, "the environment fingerprint", DI_ERR_OUT_OF_MEMORY, "out of memory");
    cli_hex(&fp, srv->system_fingerprint);
    char err[512] = "";
    if (sv_metrics_create(srv) || sv_engine_start(srv, err, sizeof err))
        return cli_fail(&command, "starting the engine", DI_ERR_INTERNAL, err[0] ? err : "out of memory");
    return CLI_EXIT_OK;
}

int cli_cmd_replay(int argc, char **argv)
{
    replay_opts o = {.threads = 1, .backend = DI_BACKEND_CPU, .profile = DI_PROFILE_PORTABLE};
    if (!(o.files = calloc((size_t)argc + 1, sizeof *o.files)))
        return cli_fail(&command, "reading the arguments", DI_ERR_OUT_OF_MEMORY, "");
    int rc = cli_parse_with_operands(&command, argc, argv, apply_option, &o, NULL);
    if (!rc && !o.model)
        rc = cli_usage(&command, "--model is required");
    else if (!rc && !o.n_files)
        rc = cli_usage(&command, "a receipt file (or - for standard input) is required");
    json_t *all = json_array();
    for (int i = 0; !rc && i < o.n_files; i++)
        if (read_receipts(o.files[i], all))
            rc = CLI_EXIT_USAGE;
    free(o.files);
    if (rc) {
        json_decref(all);
        return rc < 0 ? CLI_EXIT_OK : rc;
    }
    sv_server srv = {0};
    receipt head;
    char why[512] = "";
    const char *profile = read_receipt(json_array_get(all, 0), &head, why, sizeof why) ? NULL : head.profile;
    rc = start(&srv, &o, profile);
    size_t matched = 0, n = json_array_size(all);
    for (size_t i = 0; rc == CLI_EXIT_OK && i < n; i++) {
        receipt r;
        why[0] = '\0';
        const int differs =
            read_receipt(json_array_get(all, i), &r, why, sizeof why) || replay_one(&srv, &r, why, sizeof why);
        printf("receipt %zu: %s%s%s\n", i + 1, differs ? "DIFFERS: " : "matched", why,
               differs ? "" : (r.kind == SV_CHAT ? " (chat)" : " (completion)"));
        matched += !differs;
    }
    if (rc == CLI_EXIT_OK) {
        printf("replay: %zu of %zu receipts matched (%s profile). %s\n", matched, n, cli_profile_name(srv.cfg.profile),
               srv.cfg.profile == DI_PROFILE_DEVICE
                   ? "In the device profile a match holds on the same GPU model (detinfer doctor --compare)."
                   : "In the portable and integer profiles a match holds on any machine.");
        rc = matched == n ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    }
    sv_engine_stop(&srv);
    sv_metrics_free(&srv);
    sv_grammar_cache_clear();
    di_model_free(srv.model);
    json_decref(all);
    return rc;
}
