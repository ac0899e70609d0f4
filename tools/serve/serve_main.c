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
#include <xxhash.h>

#include "commands/doctor.h"
#include "serve/serve.h"

enum { OPT_MODEL, OPT_HOST, OPT_PORT, OPT_ALLOW, OPT_API_KEY_FILE, OPT_THREADS, OPT_MAX_SEQUENCES, OPT_CONTEXT,
       OPT_MAX_TOKENS, OPT_QUEUE, OPT_TIMEOUT, OPT_CHUNK, OPT_MAX_BODY, OPT_BACKEND, OPT_PROFILE, OPT_DEVICE,
       OPT_CPU_PATH, OPT_CHAT_TEMPLATE, OPT_MODEL_NAME, OPT_MAX_CONNECTIONS_PER_IP, OPT_REQUEST_TIMEOUT,
       OPT_DRAIN_TIMEOUT, OPT_ALLOWED_HOSTS, OPT_CORS_ORIGIN, OPT_MAX_N, OPT_MAX_TOKENS_DEFAULT };

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
    [OPT_TIMEOUT] = {"--timeout", "SECONDS", "close connections idle this long, a stream whose reader stops included (default 30)"},
    [OPT_CHUNK] = {"--chunk", "N", "prompt tokens a request adds per step (default 64)"},
    [OPT_MAX_BODY] = {"--max-body", "BYTES", "largest request body (default 1048576; larger: 413)"},
    [OPT_BACKEND] = {"--backend", "NAME", "cpu (default) or cuda"},
    [OPT_PROFILE] = {"--profile", "NAME", "numerics profile: portable (default), device or integer (experimental)"},
    [OPT_DEVICE] = {"--device", "N", "CUDA device ordinal (default 0)"},
    [OPT_CPU_PATH] = {"--cpu-path", "NAME", "CPU kernels: auto (default), scalar, avx2 or avx512"},
    [OPT_CHAT_TEMPLATE] = {"--chat-template", "NAME", "chat template (gemma, chatml, llama3) when the model has none"},
    [OPT_MODEL_NAME] = {"--model-name", "NAME", "the model id clients see (default the file's name)"},
    [OPT_MAX_CONNECTIONS_PER_IP] = {"--max-connections-per-ip", "N",
                                    "open connections one client network (an IPv4 address, an IPv6 /64) may hold (default 32; 0: no limit)"},
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
    {NULL, NULL, NULL},
};

static const dt_command command = {
    "serve",
    "--model FILE [options]",
    "An HTTP service with OpenAI's /v1/completions and /v1/chat/completions (and\n"
    "\"stream\": true), /v1/models, llama.cpp's /tokenize and /detokenize, /health\n"
    "and /metrics. Requests are batched\n"
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
    case OPT_PORT: return dt_parse_long(&command, options[k].name, v, 0, 65535, &o->port);
    case OPT_ALLOW: o->allow_text = v; return 1;
    case OPT_API_KEY_FILE: o->api_key_file = v; return 1;
    case OPT_THREADS: return dt_parse_long(&command, options[k].name, v, 1, 256, &o->threads);
    case OPT_MAX_SEQUENCES: return dt_parse_long(&command, options[k].name, v, 1, 4096, &o->max_sequences);
    case OPT_CONTEXT: return dt_parse_long(&command, options[k].name, v, 2, 1 << 24, &o->context);
    case OPT_MAX_TOKENS: return dt_parse_long(&command, options[k].name, v, 1, 1 << 24, &o->max_tokens);
    case OPT_MAX_TOKENS_DEFAULT:
        return dt_parse_long(&command, options[k].name, v, 1, 1 << 24, &o->max_tokens_default);
    case OPT_MAX_N: return dt_parse_long(&command, options[k].name, v, 1, 64, &o->max_n);
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
    case OPT_REQUEST_TIMEOUT: return dt_parse_long(&command, options[k].name, v, 1, 86400, &o->request_timeout);
    case OPT_DRAIN_TIMEOUT: return dt_parse_long(&command, options[k].name, v, 0, 86400, &o->drain_timeout);
    case OPT_ALLOWED_HOSTS: o->allowed_hosts = v; return 1;
    case OPT_CORS_ORIGIN: o->cors_origins = v; return 1;
    }
    return 1;
}

int sv_file_digest(const char *path, char out[DI_DIGEST_HEX_SIZE])
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

#define KEY_MAX 4095 /* bytes of a key */

/* The key is the first line of the file, surrounding whitespace stripped. */
static int read_key(sv_server *s)
{
    const char *path = s->cfg.api_key_file;
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
    else if ((s->api_key = malloc(end - start + 1))) {
        memcpy(s->api_key, line + start, end - start);
        s->api_key[end - start] = '\0';
        s->api_key_len = end - start;
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

static int set_up_model(sv_server *s)
{
    int rc = dt_load_model(&command, s->cfg.model_path, &s->model);
    if (rc)
        return rc;
    s->n_vocab = dt_model_int(s->model, DI_MODEL_N_VOCAB);
    s->max_token_bytes = sv_max_token_bytes(s->model, s->n_vocab);
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
    s->eot = sv_turn_end_token(s->model, s->chat_template);
    di_sampling_params p;
    s->sampling_available = di_sampling_params_init(&p) == DI_OK;
    if (sv_file_digest(s->cfg.model_path, s->model_digest)) {
        fprintf(stderr, "detinfer serve: cannot read %s to digest it\n", s->cfg.model_path);
        return DT_EXIT_FAIL;
    }
    struct stat st;
    s->created = stat(s->cfg.model_path, &st) == 0 ? (long long)st.st_mtime : (long long)time(NULL);
    di_digest fp;
    if (dt_doctor_fingerprint(s->cfg.profile, &fp) != DI_OK) {
        fprintf(stderr, "detinfer serve: cannot compute the environment fingerprint (out of memory)\n");
        return DT_EXIT_FAIL;
    }
    dt_hex(&fp, s->system_fingerprint);
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
static int drain(sv_server *s, struct MHD_Daemon *d, const sigset_t *signals)
{
    __atomic_store_n(&s->draining, 1, __ATOMIC_SEQ_CST);
    MHD_socket listen_fd = MHD_quiesce_daemon(d);
    if (listen_fd != MHD_INVALID_SOCKET)
        close(listen_fd);
    fprintf(stderr, "detinfer serve: draining: finishing the requests in flight (at most %ld s)\n",
            s->cfg.drain_timeout);
    const double deadline = monotonic_s() + (double)s->cfg.drain_timeout;
    for (;;) {
        int queued = 0, running = 0;
        sv_engine_counts(s, &queued, &running);
        const int left = sv_http_in_flight();
        if (queued == 0 && running == 0 && left == 0)
            return 0;
        struct timespec ts = {0, 50 * 1000 * 1000};
        int sig = sigtimedwait(signals, NULL, &ts);
        if (sig > 0 || monotonic_s() > deadline) {
            const int cut = left > queued + running ? left : queued + running;
            fprintf(stderr, "detinfer serve: %s: cutting %d request(s) still in flight\n",
                    sig > 0 ? "second signal" : "drain timeout", cut);
            sv_conns_cut_all(s->conns);
            return cut > 0 ? cut : 1;
        }
    }
}

/* 1 when the listen address is a loopback one (127.0.0.0/8, ::1). */
static int loopback_host(const char *host)
{
    return !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

/* s->allowed_hosts: --allowed-hosts as given ("*": none checked), else on
 * loopback the listen address, localhost, 127.0.0.1 and ::1, else none
 * checked. 0 when the default does not fit buf. */
static int allowed_hosts(sv_server *s, char *buf, size_t size)
{
    if (s->cfg.allowed_hosts) {
        s->allowed_hosts = strcmp(s->cfg.allowed_hosts, "*") ? s->cfg.allowed_hosts : NULL;
        return 1;
    }
    if (!loopback_host(s->cfg.host))
        return 1;
    const int n = snprintf(buf, size, "%s,localhost,127.0.0.1,::1", s->cfg.host);
    s->allowed_hosts = buf;
    return n > 0 && (size_t)n < size;
}

int dt_cmd_serve(int argc, char **argv)
{
    sv_server s = {0};
    s.cfg = (sv_config){.host = "127.0.0.1", .port = 8080, .allow_text = "127.0.0.0/8,::1/128", .threads = 1,
                        .max_sequences = 8, .context = 2048, .max_tokens = 1024, .queue = 64, .timeout = 30,
                        .chunk = 64, .max_body = 1 << 20, .max_connections_per_ip = 32, .request_timeout = 10,
                        .drain_timeout = 30, .backend = DI_BACKEND_CPU, .profile = DI_PROFILE_PORTABLE,
                        .max_n = 8, .max_tokens_default = 256};
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
    sigaddset(&signals, SIGHUP); /* drains as SIGTERM does (no reload) */
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = set_up_model(&s)))
        goto out;
    /* a one-token prompt leaves room for context tokens (the last is never fed back) */
    if (s.cfg.max_tokens > s.context)
        s.cfg.max_tokens = s.context;
    char hosts[512];
    if (!allowed_hosts(&s, hosts, sizeof hosts)) {
        rc = dt_usage(&command, "--allowed-hosts: the list is longer than %zu bytes", sizeof hosts - 1);
        goto out;
    }
    if (!(s.conns = sv_conns_start(s.cfg.request_timeout))) {
        rc = dt_fail(&command, "starting the connection watchdog", DI_ERR_INTERNAL, "out of memory");
        goto out;
    }
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
    fprintf(stderr, "detinfer serve: Host header %s%s; requests from web pages (Origin) %s%s\n",
            s.allowed_hosts ? "checked against " : "not checked (bound beyond loopback: set --allowed-hosts)",
            s.allowed_hosts ? s.allowed_hosts : "", s.cfg.cors_origins ? "allowed from " : "refused",
            s.cfg.cors_origins ? s.cfg.cors_origins : "");
    int sig = 0;
    sigwait(&signals, &sig);
    fprintf(stderr, "detinfer serve: %s received\n", signal_name(sig));
    const int cut = drain(&s, d, &signals);
    MHD_stop_daemon(d);
    fprintf(stderr, "detinfer serve: stopped%s\n", cut ? " (requests were cut: exit status 1)" : "");
    rc = cut ? DT_EXIT_FAIL : DT_EXIT_OK;
out:
    sv_engine_stop(&s);
    sv_conns_stop(s.conns);
    sv_metrics_free(&s);
    sv_grammar_cache_clear();
    sv_allow_free(&s.allow);
    if (s.api_key)
        explicit_bzero(s.api_key, s.api_key_len);
    free(s.api_key);
    di_model_free(s.model);
    return rc;
}
