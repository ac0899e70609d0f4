/*
 * serve_main.c — `detinfer serve`: options, start-up (model, fingerprint,
 * engine, HTTP), and the shutdown on SIGTERM, SIGINT or SIGHUP: stop
 * accepting, finish the requests in flight within --drain-timeout, exit 0;
 * past the timeout, or at a second signal, the rest are cut and the exit
 * status is 1.
 */
#include <errno.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_digest.h"
#include "cli/cli_fingerprint.h"
#include "serve/serve.h"

enum { OPT_MODEL, OPT_HOST, OPT_PORT, OPT_ALLOW, OPT_API_KEY_FILE, OPT_THREADS, OPT_MAX_SEQUENCES, OPT_CONTEXT,
       OPT_MAX_TOKENS, OPT_QUEUE, OPT_TIMEOUT, OPT_CHUNK, OPT_MAX_BODY, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE,
       OPT_CPU_PATH, OPT_CHAT_TEMPLATE, OPT_MODEL_NAME, OPT_MAX_CONNECTIONS_PER_IP, OPT_REQUEST_TIMEOUT,
       OPT_DRAIN_TIMEOUT, OPT_ALLOWED_HOSTS, OPT_CORS_ORIGIN, OPT_MAX_N, OPT_MAX_TOKENS_DEFAULT,
       OPT_MAX_PROMPTS, OPT_SPECULATE, OPT_DRAFT_MAX };

static const cli_option options[] = {
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
    [OPT_TIMEOUT] = {"--timeout", "SECONDS", "close connections idle this long, a stream whose reader stops included (default 30)"},
    [OPT_CHUNK] = {"--chunk", "N", "prompt tokens a request adds per step (default 64)"},
    [OPT_MAX_BODY] = {"--max-body", "BYTES", "largest request body (default 1048576; larger: 413)"},
    [OPT_BACKEND] = {"--backend", "NAME", "cpu (default) or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", CLI_PROFILE_HELP},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_CHAT_TEMPLATE] = {"--chat-template", "NAME", "chat template (gemma, chatml, llama3) when the model has none"},
    [OPT_MODEL_NAME] = {"--model-name", "NAME", "the model id clients see (default the file's name)"},
    [OPT_MAX_CONNECTIONS_PER_IP] = {"--max-connections-per-ip", "N",
                                    "open connections one client network (an IPv4 address, an IPv6 /64) may hold; past it a new one takes the place of its oldest idle one, or with none gets 429 (default 32; 0: no limit)"},
    [OPT_REQUEST_TIMEOUT] = {"--request-timeout", "SECONDS",
                             "a request's headers and body must arrive within this, from accept or the last response (default 10)"},
    [OPT_DRAIN_TIMEOUT] = {"--drain-timeout", "SECONDS",
                           "on SIGTERM/SIGINT/SIGHUP, wait this long for requests in flight, then cut them (default 30)"},
    [OPT_ALLOWED_HOSTS] = {"--allowed-hosts", "NAMES",
                           "Host names answered, others 421 (default on loopback: the address, localhost, 127.0.0.1, ::1; "
                           "elsewhere none checked; * for any)"},
    [OPT_CORS_ORIGIN] = {"--cors-origin", "ORIGINS",
                         "web origins whose pages may call, e.g. https://app.example (default none: Origin gets 403)"},
    [OPT_MAX_N] = {"--max-n", "N", "choices a request may ask for with n, 1..64 (default 8)"},
    [OPT_MAX_TOKENS_DEFAULT] = {"--max-tokens-default", "N", "a chat's max_tokens when it gives none (default 256)"},
    [OPT_MAX_PROMPTS] = {"--max-prompts", "N", "prompts one /v1/completions request may list, 1..1024 (default 32)"},
    [OPT_SPECULATE] = {"--speculate", "ngram|FILE",
                       "verify drafts several tokens a step, from prompt lookup or a draft model of the same vocabulary "
                       "(a smaller GGUF): the same answers, bit for bit"},
    [OPT_DRAFT_MAX] = {"--draft-max", "N", "with --speculate, draft tokens per sequence and step at most, 1.." CLI_STR(DI_DRAFT_MAX)
                      " (default " CLI_STR(DI_DRAFT_DEFAULT) ")"},
    {NULL, NULL, NULL},
};

static const cli_command command = {
    "serve",
    "--model FILE [options]",
    "An HTTP service with OpenAI's /v1/completions, /v1/chat/completions and\n"
    "/v1/responses (and \"stream\": true), /v1/models, /tokenize, /detokenize and\n"
    "/tokenizer_info (llama.cpp's and vLLM's shapes), /health and /metrics. Requests are batched\n"
    "continuously and each gets exactly the tokens and digests it would get alone;\n"
    "every response carries a \"detinfer\" object with the sequence digest and the\n"
    "fingerprint. Only clients in --allow may connect. SIGTERM, SIGINT or SIGHUP:\n"
    "finish the requests in flight, then exit 0; after --drain-timeout, or at a second\n"
    "signal, cut the rest and exit 1. docs/SERVING.md describes it.",
    options,
};

static int apply_option(int k, const char *v, void *opts)
{
    sv_config *o = opts;
    switch (k) {
    case OPT_MODEL: o->model_path = v; return 1;
    case OPT_HOST: o->host = v; return 1;
    case OPT_PORT: return cli_parse_long(&command, options[k].name, v, 0, 65535, &o->port);
    case OPT_ALLOW: o->allow_text = v; return 1;
    case OPT_API_KEY_FILE: o->api_key_file = v; return 1;
    case OPT_THREADS: return cli_parse_long(&command, options[k].name, v, 1, 256, &o->threads);
    case OPT_MAX_SEQUENCES: return cli_parse_long(&command, options[k].name, v, 1, 4096, &o->max_sequences);
    case OPT_CONTEXT: return cli_parse_long(&command, options[k].name, v, 2, 1 << 24, &o->context);
    case OPT_MAX_TOKENS: return cli_parse_long(&command, options[k].name, v, 1, 1 << 24, &o->max_tokens);
    case OPT_MAX_TOKENS_DEFAULT:
        return cli_parse_long(&command, options[k].name, v, 1, 1 << 24, &o->max_tokens_default);
    case OPT_MAX_N: return cli_parse_long(&command, options[k].name, v, 1, 64, &o->max_n);
    case OPT_MAX_PROMPTS: return cli_parse_long(&command, options[k].name, v, 1, 1024, &o->max_prompts);
    case OPT_SPECULATE:
        o->speculate = 1;
        o->draft_model = strcmp(v, "ngram") ? v : NULL; /* a file: loaded with the engine */
        return 1;
    case OPT_DRAFT_MAX: return cli_parse_long(&command, options[k].name, v, 1, DI_DRAFT_MAX, &o->draft_max);
    case OPT_QUEUE: return cli_parse_long(&command, options[k].name, v, 1, 1 << 20, &o->queue);
    case OPT_TIMEOUT: return cli_parse_long(&command, options[k].name, v, 1, 86400, &o->timeout);
    case OPT_CHUNK: return cli_parse_long(&command, options[k].name, v, 1, 1 << 16, &o->chunk);
    case OPT_MAX_BODY: return cli_parse_long(&command, options[k].name, v, 1024, 1L << 30, &o->max_body);
    case OPT_BACKEND: return cli_parse_backend(&command, options[k].name, v, &o->backend);
    case OPT_PROFILE: return cli_parse_profile(&command, options[k].name, v, &o->profile);
    case OPT_DEVICE: return cli_parse_device(&command, options[k].name, v, &o->device);
    case OPT_CPU_PATH: return cli_parse_cpu_path(&command, options[k].name, v, &o->cpu_path);
    case OPT_CHAT_TEMPLATE: o->chat_template = v; return 1;
    case OPT_MODEL_NAME: o->model_name = v; return 1;
    case OPT_MAX_CONNECTIONS_PER_IP:
        return cli_parse_long(&command, options[k].name, v, 0, 1 << 16, &o->max_connections_per_ip);
    case OPT_REQUEST_TIMEOUT: return cli_parse_long(&command, options[k].name, v, 1, 86400, &o->request_timeout);
    case OPT_DRAIN_TIMEOUT: return cli_parse_long(&command, options[k].name, v, 0, 86400, &o->drain_timeout);
    case OPT_ALLOWED_HOSTS: o->allowed_hosts = v; return 1;
    case OPT_CORS_ORIGIN: o->cors_origins = v; return 1;
    }
    return 1;
}

#define KEY_MAX 4095 /* bytes of a key */

/* The key is the first line of the file, surrounding whitespace stripped. */
static int read_key(sv_server *srv)
{
    const char *path = srv->cfg.api_key_file;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "detinfer serve: --api-key-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)))
        fprintf(stderr, "detinfer serve: warning: --api-key-file %s can be read by its group or others "
                        "(chmod 600 it)\n", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    fclose(f);
    if (n < 0)
        n = 0;
    int rc = -1;
    size_t start = 0, end = (size_t)n;
    while (start < end && strchr(" \t\r\n\v\f", line[start]))
        start++;
    while (end > start && strchr(" \t\r\n\v\f", line[end - 1]))
        end--;
    if (end - start > KEY_MAX)
        fprintf(stderr, "detinfer serve: --api-key-file %s: the key (first line) is longer than %d bytes\n", path,
                KEY_MAX);
    else if (end - start < 8)
        fprintf(stderr, "detinfer serve: --api-key-file %s: the key (first line) must have at least 8 characters\n",
                path);
    else if (memchr(line + start, '\0', end - start))
        fprintf(stderr, "detinfer serve: --api-key-file %s: the key holds a NUL byte\n", path);
    else if ((srv->api_key = malloc(end - start + 1))) {
        memcpy(srv->api_key, line + start, end - start);
        srv->api_key[end - start] = '\0';
        srv->api_key_len = end - start;
        rc = 0;
    }
    if (line)
        explicit_bzero(line, cap);
    free(line);
    return rc;
}

/* The most bytes of text one token can stand for: its longest piece, and 4
 * for an unknown token standing for one UTF-8 character. This library's
 * tokenizers (SentencePiece, byte-level BPE) neither drop nor merge input
 * bytes, so a text of more than context x this many bytes cannot fit the
 * context, and is refused before it is tokenized (a 1 MiB text costs the
 * tokenizer about 30 MiB). 0 when the model has no tokenizer. */
size_t sv_max_token_bytes(const di_model *model, int64_t n_vocab)
{
    size_t most = 0;
    char piece[512];
    for (int64_t id = 0; id < n_vocab; id++) {
        size_t len = 0;
        const di_status st = di_model_token_piece(model, (int32_t)id, piece, sizeof piece, &len);
        if (st != DI_OK && st != DI_ERR_BUFFER_TOO_SMALL)
            return 0;
        if (len > most)
            most = len;
    }
    return most > 4 ? most : 4;
}

int32_t sv_turn_end_token(const di_model *model, const char *chat_template)
{
    int32_t id = -1;
    const char *turn_end = chat_template ? di_chat_turn_end(chat_template) : NULL;
    if (!turn_end || di_model_token_lookup(model, turn_end, strlen(turn_end), &id))
        return -1;
    return id;
}

static int set_up_model(sv_server *srv)
{
    int rc = cli_load_model(&command, srv->cfg.model_path, &srv->model);
    if (rc)
        return rc;
    srv->n_vocab = cli_model_int(srv->model, DI_MODEL_N_VOCAB);
    srv->max_token_bytes = sv_max_token_bytes(srv->model, srv->n_vocab);
    int64_t train = cli_model_int(srv->model, DI_MODEL_N_CTX_TRAIN);
    srv->context = srv->cfg.context;
    if (train > 0 && srv->context > train)
        srv->context = train;
    if (di_model_special_token(srv->model, DI_TOKEN_EOS, &srv->eos) != DI_OK)
        srv->eos = -1;
    srv->chat_template = srv->cfg.chat_template ? srv->cfg.chat_template : di_model_chat_template(srv->model);
    if (srv->cfg.chat_template) { /* an unknown name is an error now, not at the first chat */
        const char *role = "user", *content = "hi";
        char err[256] = "";
        size_t need = 0;
        di_status st = di_chat_format(srv->cfg.chat_template, &role, &content, 1, 1, NULL, 0, &need, err, sizeof err);
        if (st != DI_OK && st != DI_ERR_BUFFER_TOO_SMALL)
            return cli_usage(&command, "--chat-template %s: %s", srv->cfg.chat_template,
                             err[0] ? err : di_status_name(st));
    }
    srv->eot = sv_turn_end_token(srv->model, srv->chat_template);
    di_sampling_params p;
    srv->sampling_available = di_sampling_params_init(&p) == DI_OK;
    if (cli_file_digest(srv->cfg.model_path, srv->model_digest)) {
        fprintf(stderr, "detinfer serve: cannot read %s to digest it\n", srv->cfg.model_path);
        return CLI_EXIT_FAIL;
    }
    struct stat st;
    srv->created = stat(srv->cfg.model_path, &st) == 0 ? (long long)st.st_mtime : (long long)time(NULL);
    di_digest fp;
    if (cli_fingerprint(srv->cfg.profile, &fp) != DI_OK) {
        fprintf(stderr, "detinfer serve: cannot compute the environment fingerprint (out of memory)\n");
        return CLI_EXIT_FAIL;
    }
    cli_hex(&fp, srv->system_fingerprint);
    if (!srv->cfg.model_name) {
        const char *base = strrchr(srv->cfg.model_path, '/');
        static char name[256];
        snprintf(name, sizeof name, "%s", base ? base + 1 : srv->cfg.model_path);
        size_t n = strlen(name);
        if (n > 5 && !strcmp(name + n - 5, ".gguf"))
            name[n - 5] = '\0';
        srv->cfg.model_name = name;
    }
    return CLI_EXIT_OK;
}

static const char *signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP";
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* After the first signal: nothing new is accepted; wait until every request
 * received has been answered, for --drain-timeout at most. Past it, or at a
 * second signal, every connection is cut. Returns the requests cut. */
static int drain(sv_server *srv, struct MHD_Daemon *d, const sigset_t *signals)
{
    __atomic_store_n(&srv->draining, 1, __ATOMIC_SEQ_CST);
    MHD_socket listen_fd = MHD_quiesce_daemon(d);
    if (listen_fd != MHD_INVALID_SOCKET)
        close(listen_fd);
    fprintf(stderr, "detinfer serve: draining: finishing the requests in flight (at most %ld s)\n",
            srv->cfg.drain_timeout);
    const double deadline = monotonic_s() + (double)srv->cfg.drain_timeout;
    for (;;) {
        int queued = 0, running = 0;
        sv_engine_counts(srv, &queued, &running);
        const int left = sv_http_in_flight();
        if (queued == 0 && running == 0 && left == 0)
            return 0;
        struct timespec ts = {0, 50 * 1000 * 1000};
        int sig = sigtimedwait(signals, NULL, &ts);
        if (sig > 0 || monotonic_s() > deadline) {
            const int cut = left > queued + running ? left : queued + running;
            fprintf(stderr, "detinfer serve: %s: cutting %d request(s) still in flight\n",
                    sig > 0 ? "second signal" : "drain timeout", cut);
            sv_conns_cut_all(srv->conns);
            return cut > 0 ? cut : 1;
        }
    }
}

/* 1 when the listen address is a loopback one (127.0.0.0/8, ::1). */
static int loopback_host(const char *host)
{
    return !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

/* srv->allowed_hosts: --allowed-hosts as given ("*": none checked), else on
 * loopback the listen address, localhost, 127.0.0.1 and ::1, else none
 * checked. 0 when the default does not fit buf. */
static int allowed_hosts(sv_server *srv, char *buf, size_t size)
{
    if (srv->cfg.allowed_hosts) {
        srv->allowed_hosts = strcmp(srv->cfg.allowed_hosts, "*") ? srv->cfg.allowed_hosts : NULL;
        return 1;
    }
    if (!loopback_host(srv->cfg.host))
        return 1;
    const int listed = !strcmp(srv->cfg.host, "127.0.0.1") || !strcmp(srv->cfg.host, "::1"); /* named once */
    const int n = snprintf(buf, size, "%s%slocalhost,127.0.0.1,::1", listed ? "" : srv->cfg.host, listed ? "" : ",");
    srv->allowed_hosts = buf;
    return n > 0 && (size_t)n < size;
}

int cli_cmd_serve(int argc, char **argv)
{
    sv_server srv = {0};
    srv.cfg = (sv_config){.host = "127.0.0.1", .port = 8080, .allow_text = "127.0.0.0/8,::1/128", .threads = 1,
                          .max_sequences = 8, .context = 2048, .max_tokens = 1024, .queue = 64, .timeout = 30,
                          .chunk = 64, .max_body = 1 << 20, .max_connections_per_ip = 32, .request_timeout = 10,
                          .drain_timeout = 30, .backend = DI_BACKEND_CPU, .profile = CLI_DEFAULT_PROFILE,
                          .max_n = 8, .max_tokens_default = 256, .max_prompts = 32,
                          .draft_max = DI_DRAFT_DEFAULT};
    int rc = cli_parse_options(&command, argc, argv, apply_option, &srv.cfg, NULL);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!srv.cfg.model_path)
        return cli_usage(&command, "--model is required");
    char err[512] = "";
    if (sv_allow_parse(srv.cfg.allow_text, &srv.allow, err, sizeof err))
        return cli_usage(&command, "--allow: %s", err);
    if (srv.cfg.api_key_file && read_key(&srv)) {
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    /* Signals are taken by sigwait in this thread only; SIGPIPE is ignored
     * so a client that goes away is an error on its write, not an exit. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP); /* drains as SIGTERM does (no reload) */
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = set_up_model(&srv)))
        goto out;
    /* a one-token prompt leaves room for context tokens (the last is never fed back) */
    if (srv.cfg.max_tokens > srv.context)
        srv.cfg.max_tokens = srv.context;
    char hosts[512];
    if (!allowed_hosts(&srv, hosts, sizeof hosts)) {
        rc = cli_usage(&command, "--allowed-hosts: the list is longer than %zu bytes", sizeof hosts - 1);
        goto out;
    }
    if (!(srv.conns = sv_conns_start(srv.cfg.request_timeout))) {
        rc = cli_fail(&command, "starting the connection watchdog", DI_ERR_INTERNAL, "out of memory");
        goto out;
    }
    if (sv_metrics_create(&srv)) {
        rc = cli_fail(&command, "starting the engine", DI_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    di_status est = sv_engine_start(&srv, err, sizeof err);
    if (est) { /* a draft model of another vocabulary: DI_ERR_MODEL */
        rc = cli_fail(&command, "starting the engine", est, err);
        goto out;
    }
    struct MHD_Daemon *d = sv_http_start(&srv, err, sizeof err);
    if (!d) {
        fprintf(stderr, "detinfer serve: %s\n", err);
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int v6 = strchr(srv.cfg.host, ':') != NULL;
    fprintf(stderr,
            "detinfer serve: listening on http://%s%s%s:%u (model %s, digest %s; libdetinfer %s; %s; profile %s "
            "(numerics %d); %ld sequences, context %lld; chat template %s; sampling %s)\n",
            v6 ? "[" : "", srv.cfg.host, v6 ? "]" : "", info ? (unsigned)info->port : (unsigned)srv.cfg.port,
            srv.cfg.model_name, srv.model_digest, di_version_string(), srv.backend_info,
            cli_profile_name(srv.cfg.profile), cli_profile_numerics(srv.cfg.profile), srv.cfg.max_sequences,
            (long long)srv.context, srv.chat_template ? srv.chat_template : "none",
            srv.sampling_available ? "available" : "greedy only");
    if (srv.cfg.speculate)
        fprintf(stderr, "detinfer serve: speculation: %s%s, drafts of %ld tokens at most\n",
                srv.cfg.draft_model ? "draft model " : "prompt lookup",
                srv.cfg.draft_model ? srv.cfg.draft_model : "", srv.cfg.draft_max);
    fprintf(stderr, "detinfer serve: Host header %s%s; requests from web pages (Origin) %s%s\n",
            srv.allowed_hosts ? "checked against " : "not checked (bound beyond loopback: set --allowed-hosts)",
            srv.allowed_hosts ? srv.allowed_hosts : "", srv.cfg.cors_origins ? "allowed from " : "refused",
            srv.cfg.cors_origins ? srv.cfg.cors_origins : "");
    int sig = 0;
    sigwait(&signals, &sig);
    fprintf(stderr, "detinfer serve: %s received\n", signal_name(sig));
    const int cut = drain(&srv, d, &signals);
    MHD_stop_daemon(d);
    fprintf(stderr, "detinfer serve: stopped%s\n", cut ? " (requests were cut: exit status 1)" : "");
    rc = cut ? CLI_EXIT_FAIL : CLI_EXIT_OK;
out:
    sv_engine_stop(&srv);
    sv_conns_stop(srv.conns);
    sv_metrics_free(&srv);
    sv_grammar_cache_clear();
    sv_allow_free(&srv.allow);
    if (srv.api_key)
        explicit_bzero(srv.api_key, srv.api_key_len);
    free(srv.api_key);
    di_model_free(srv.model);
    return rc;
}
