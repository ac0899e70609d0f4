/*
 * serve_main.c — `detinfer serve`: options, start-up (model, fingerprint,
 * engine, HTTP), and the shutdown on SIGTERM or SIGINT: stop accepting,
 * finish the requests in flight, exit 0. A second signal exits at once.
 */
#include <errno.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "serve.h"

enum { OPT_MODEL, OPT_HOST, OPT_PORT, OPT_ALLOW, OPT_API_KEY_FILE, OPT_THREADS, OPT_MAX_SEQUENCES, OPT_CONTEXT,
       OPT_MAX_TOKENS, OPT_QUEUE, OPT_TIMEOUT, OPT_CHUNK, OPT_MAX_BODY, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE,
       OPT_CPU_PATH, OPT_CHAT_TEMPLATE, OPT_MODEL_NAME, OPT_MAX_CONNECTIONS_PER_IP };

static const dt_option options[] = {
    [OPT_MODEL] = {"--model", "FILE", "GGUF model file (required)"},
    [OPT_HOST] = {"--host", "ADDR", "numeric address to listen on (default 127.0.0.1; :: for every IPv6 and IPv4 one)"},
    [OPT_PORT] = {"--port", "N", "TCP port (default 8080; 0: a free port, printed at start)"},
    [OPT_ALLOW] = {"--allow", "CIDRS", "clients allowed, e.g. 10.0.0.0/8,::1 (default 127.0.0.0/8,::1/128)"},
    [OPT_API_KEY_FILE] = {"--api-key-file", "FILE", "require 'Authorization: Bearer KEY' (first line of FILE)"},
    [OPT_THREADS] = {"--threads", "N", "worker threads, 1..256 (default 1); results do not depend on it"},
    [OPT_MAX_SEQUENCES] = {"--max-sequences", "N", "requests generating at once (default 8)"},
    [OPT_CONTEXT] = {"--context", "N", "tokens per request, prompt and output (default 2048, at most the model's)"},
    [OPT_MAX_TOKENS] = {"--max-tokens", "N", "cap on a request's max_tokens (default 1024)"},
    [OPT_QUEUE] = {"--queue", "N", "requests waiting for a slot before 429 (default 64)"},
    [OPT_TIMEOUT] = {"--timeout", "SECONDS", "close connections idle this long (default 30)"},
    [OPT_CHUNK] = {"--chunk", "N", "prompt tokens a request adds per step (default 64)"},
    [OPT_MAX_BODY] = {"--max-body", "BYTES", "largest request body (default 1048576; larger: 413)"},
    [OPT_BACKEND] = {"--backend", "NAME", "cpu (default) or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", "numerics profile: portable (default), device or integer (experimental)"},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_CHAT_TEMPLATE] = {"--chat-template", "NAME", "chat template (gemma, chatml, llama3) when the model has none"},
    [OPT_MODEL_NAME] = {"--model-name", "NAME", "the model id clients see (default the file's name)"},
    [OPT_MAX_CONNECTIONS_PER_IP] = {"--max-connections-per-ip", "N",
                                    "open connections one client address may hold (default 32; 0: no limit)"},
    {NULL, NULL, NULL},
};

static const dt_command command = {
    "serve",
    "--model FILE [options]",
    "An HTTP service with OpenAI's /v1/completions and /v1/chat/completions (and\n"
    "\"stream\": true), /v1/models, /health and /metrics. Requests are batched\n"
    "continuously and each gets exactly the tokens and digests it would get alone;\n"
    "every response carries a \"detinfer\" object with the sequence digest and the\n"
    "fingerprint. Only clients in --allow may connect. SIGTERM or SIGINT: finish the\n"
    "requests in flight, then exit 0. docs/SERVING.md describes it.",
    options,
};

static int apply_option(int k, const char *v, void *opts)
{
    sv_config *o = opts;
    switch (k) {
    case OPT_MODEL: o->model_path = v; return 1;
    case OPT_HOST: o->host = v; return 1;
    case OPT_PORT: return dt_parse_long(&command, options[k].name, v, 0, 65535, &o->port);
    case OPT_ALLOW: o->allow_text = v; return 1;
    case OPT_API_KEY_FILE: o->api_key_file = v; return 1;
    case OPT_THREADS: return dt_parse_long(&command, options[k].name, v, 1, 256, &o->threads);
    case OPT_MAX_SEQUENCES: return dt_parse_long(&command, options[k].name, v, 1, 4096, &o->max_sequences);
    case OPT_CONTEXT: return dt_parse_long(&command, options[k].name, v, 2, 1 << 24, &o->context);
    case OPT_MAX_TOKENS: return dt_parse_long(&command, options[k].name, v, 1, 1 << 24, &o->max_tokens);
    case OPT_QUEUE: return dt_parse_long(&command, options[k].name, v, 1, 1 << 20, &o->queue);
    case OPT_TIMEOUT: return dt_parse_long(&command, options[k].name, v, 1, 86400, &o->timeout);
    case OPT_CHUNK: return dt_parse_long(&command, options[k].name, v, 1, 1 << 16, &o->chunk);
    case OPT_MAX_BODY: return dt_parse_long(&command, options[k].name, v, 1024, 1L << 30, &o->max_body);
    case OPT_BACKEND: return dt_parse_backend(&command, options[k].name, v, &o->backend);
    case OPT_PROFILE: return dt_parse_profile(&command, options[k].name, v, &o->profile);
    case OPT_DEVICE: return dt_parse_device(&command, options[k].name, v, &o->device);
    case OPT_CPU_PATH: return dt_parse_cpu_path(&command, options[k].name, v, &o->cpu_path);
    case OPT_CHAT_TEMPLATE: o->chat_template = v; return 1;
    case OPT_MODEL_NAME: o->model_name = v; return 1;
    case OPT_MAX_CONNECTIONS_PER_IP:
        return dt_parse_long(&command, options[k].name, v, 0, 1 << 16, &o->max_connections_per_ip);
    }
    return 1;
}

/* The token that ends an assistant turn in each built-in template. */
static const struct {
    const char *template_name;
    const char *end_of_turn;
} turn_ends[] = {
    {"gemma", "<end_of_turn>"},
    {"chatml", "<|im_end|>"},
    {"llama3", "<|eot_id|>"},
    {NULL, NULL},
};

/* XXH3-128 of the file's bytes: what `xxh128sum FILE` prints. */
static int file_digest(const char *path, char out[DI_DIGEST_HEX_SIZE])
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    XXH3_state_t *st = XXH3_createState();
    char *buf = malloc(1 << 20);
    int rc = -1;
    if (st && buf && XXH3_128bits_reset(st) == XXH_OK) {
        size_t n;
        while ((n = fread(buf, 1, 1 << 20, f)) > 0)
            XXH3_128bits_update(st, buf, n);
        if (!ferror(f)) {
            XXH128_canonical_t c;
            XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
            for (int i = 0; i < 16; i++)
                snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
            rc = 0;
        }
    }
    free(buf);
    XXH3_freeState(st);
    fclose(f);
    return rc;
}

static int read_key(sv_server *s)
{
    FILE *f = fopen(s->cfg.api_key_file, "r");
    if (!f) {
        fprintf(stderr, "detinfer serve: --api-key-file %s: %s\n", s->cfg.api_key_file, strerror(errno));
        return -1;
    }
    char line[4096];
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (strlen(line) < 8) {
        fprintf(stderr, "detinfer serve: --api-key-file %s: the key (first line) must have at least 8 characters\n",
                s->cfg.api_key_file);
        return -1;
    }
    s->api_key = strdup(line);
    s->api_key_len = strlen(line);
    explicit_bzero(line, sizeof line);
    return s->api_key ? 0 : -1;
}

static int set_up_model(sv_server *s)
{
    int rc = dt_load_model(&command, s->cfg.model_path, &s->model);
    if (rc)
        return rc;
    s->n_vocab = dt_model_int(s->model, DI_MODEL_N_VOCAB);
    int64_t train = dt_model_int(s->model, DI_MODEL_N_CTX_TRAIN);
    s->context = s->cfg.context;
    if (train > 0 && s->context > train)
        s->context = train;
    if (di_model_special_token(s->model, DI_TOKEN_EOS, &s->eos) != DI_OK)
        s->eos = -1;
    s->chat_template = s->cfg.chat_template ? s->cfg.chat_template : di_model_chat_template(s->model);
    if (s->cfg.chat_template) { /* an unknown name is an error now, not at the first chat */
        const char *role = "user", *content = "hi";
        char err[256] = "";
        size_t need = 0;
        di_status st = di_chat_format(s->cfg.chat_template, &role, &content, 1, 1, NULL, 0, &need, err, sizeof err);
        if (st != DI_OK && st != DI_ERR_BUFFER_TOO_SMALL)
            return dt_usage(&command, "--chat-template %s: %s", s->cfg.chat_template, err[0] ? err : di_status_name(st));
    }
    s->eot = -1;
    for (int i = 0; s->chat_template && turn_ends[i].template_name; i++)
        if (!strcmp(turn_ends[i].template_name, s->chat_template) &&
            di_model_token_lookup(s->model, turn_ends[i].end_of_turn, strlen(turn_ends[i].end_of_turn), &s->eot))
            s->eot = -1;
    di_sampling_params p;
    s->sampling_available = di_sampling_params_init(&p) == DI_OK;
    if (file_digest(s->cfg.model_path, s->model_digest)) {
        fprintf(stderr, "detinfer serve: cannot read %s to digest it\n", s->cfg.model_path);
        return DT_EXIT_FAIL;
    }
    if (!s->cfg.model_name) {
        const char *base = strrchr(s->cfg.model_path, '/');
        static char name[256];
        snprintf(name, sizeof name, "%s", base ? base + 1 : s->cfg.model_path);
        size_t n = strlen(name);
        if (n > 5 && !strcmp(name + n - 5, ".gguf"))
            name[n - 5] = '\0';
        s->cfg.model_name = name;
    }
    return DT_EXIT_OK;
}

/* After the first signal: nothing new is accepted; wait until every request
 * received has been answered. A second signal stops waiting. */
static void drain(sv_server *s, struct MHD_Daemon *d, const sigset_t *signals)
{
    s->draining = 1;
    MHD_socket listen_fd = MHD_quiesce_daemon(d);
    if (listen_fd != MHD_INVALID_SOCKET)
        close(listen_fd);
    fprintf(stderr, "detinfer serve: draining: finishing the requests in flight\n");
    for (;;) {
        int queued = 0, running = 0;
        sv_engine_counts(s, &queued, &running);
        if (queued == 0 && running == 0 && sv_http_in_flight() == 0)
            return;
        struct timespec ts = {0, 50 * 1000 * 1000};
        if (sigtimedwait(signals, NULL, &ts) > 0) {
            fprintf(stderr, "detinfer serve: second signal: stopping now\n");
            return;
        }
    }
}

int dt_cmd_serve(int argc, char **argv)
{
    sv_server s = {0};
    s.cfg = (sv_config){.host = "127.0.0.1", .port = 8080, .allow_text = "127.0.0.0/8,::1/128", .threads = 1,
                        .max_sequences = 8, .context = 2048, .max_tokens = 1024, .queue = 64, .timeout = 30,
                        .chunk = 64, .max_body = 1 << 20, .max_connections_per_ip = 32, .backend = DI_BACKEND_CPU,
                        .profile = DI_PROFILE_PORTABLE};
    int rc = dt_parse_options(&command, argc, argv, apply_option, &s.cfg, NULL);
    if (rc)
        return rc < 0 ? DT_EXIT_OK : rc;
    if (!s.cfg.model_path)
        return dt_usage(&command, "--model is required");
    char err[512] = "";
    if (sv_allow_parse(s.cfg.allow_text, &s.allow, err, sizeof err))
        return dt_usage(&command, "--allow: %s", err);
    if (s.cfg.api_key_file && read_key(&s)) {
        rc = DT_EXIT_USAGE;
        goto out;
    }
    /* Signals are taken by sigwait in this thread only; SIGPIPE is ignored
     * so a client that goes away is an error on its write, not an exit. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = set_up_model(&s)))
        goto out;
    /* a one-token prompt leaves room for context tokens (the last is never fed back) */
    if (s.cfg.max_tokens > s.context)
        s.cfg.max_tokens = s.context;
    if (sv_metrics_create(&s) || sv_engine_start(&s, err, sizeof err)) {
        rc = dt_fail(&command, "starting the engine", DI_ERR_INTERNAL, err[0] ? err : "out of memory");
        goto out;
    }
    struct MHD_Daemon *d = sv_http_start(&s, err, sizeof err);
    if (!d) {
        fprintf(stderr, "detinfer serve: %s\n", err);
        rc = DT_EXIT_FAIL;
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int v6 = strchr(s.cfg.host, ':') != NULL;
    fprintf(stderr,
            "detinfer serve: listening on http://%s%s%s:%u (model %s, digest %s; libdetinfer %s; %s; "
            "%ld sequences, context %lld; chat template %s; sampling %s)\n",
            v6 ? "[" : "", s.cfg.host, v6 ? "]" : "", info ? (unsigned)info->port : (unsigned)s.cfg.port,
            s.cfg.model_name, s.model_digest, di_version_string(), s.backend_info, s.cfg.max_sequences,
            (long long)s.context, s.chat_template ? s.chat_template : "none",
            s.sampling_available ? "available" : "greedy only");
    int sig = 0;
    sigwait(&signals, &sig);
    fprintf(stderr, "detinfer serve: %s received\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    drain(&s, d, &signals);
    MHD_stop_daemon(d);
    fprintf(stderr, "detinfer serve: stopped\n");
    rc = DT_EXIT_OK;
out:
    sv_engine_stop(&s);
    sv_metrics_free(&s);
    sv_allow_free(&s.allow);
    if (s.api_key)
        explicit_bzero(s.api_key, s.api_key_len);
    free(s.api_key);
    di_model_free(s.model);
    return rc;
}
