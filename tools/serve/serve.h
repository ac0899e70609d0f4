/*
 * serve.h — `detinfer serve`: a deterministic HTTP service with OpenAI's
 * completion and chat shapes (docs/SERVING.md). What the files of
 * tools/serve/ share:
 *
 *   serve_main.c     options, start-up, signals, draining shutdown
 *   serve_allow.c    the client allowlist (CIDR) and the API key check
 *   serve_request.c  request JSON -> a checked sv_request; response JSON
 *   serve_engine.c   the engine thread: continuous batching over one session
 *   serve_http.c     libmicrohttpd handlers, routing, SSE streaming
 *   serve_metrics.c  counters and histograms, Prometheus text
 *
 * Built only on the public API (include/detinfer.h).
 */
#ifndef DETINFER_SERVE_H
#define DETINFER_SERVE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>

#include "cli_commands.h"
#include "cli_digest.h"
#include "cli_model.h"
#include "cli_options.h"
#include "cli_progress.h"

/* ---- Allowlist and key (serve_allow.c) ----------------------------------- */
typedef struct sv_cidr {
    int family;              /* AF_INET or AF_INET6 */
    unsigned char addr[16];  /* network address, 4 or 16 bytes */
    int prefix;              /* bits */
} sv_cidr;

typedef struct sv_allowlist {
    sv_cidr *nets;
    int n;
} sv_allowlist;

/* Parses "127.0.0.1/32,::1/128" (a bare address means the host alone) into
 * *out; 0 on success, else -1 with the reason in err. */
int sv_allow_parse(const char *text, sv_allowlist *out, char *err, size_t err_size);
void sv_allow_free(sv_allowlist *a);
/* 1 when addr (IPv4, IPv6, or IPv4-mapped IPv6) is inside one of the nets. */
int sv_allow_match(const sv_allowlist *a, const struct sockaddr *addr);
/* The address's bytes (4 for IPv4 and IPv4-mapped IPv6, else 16) and its
 * family, AF_INET or AF_INET6; 0 for another kind of address. */
int sv_addr_bytes(const struct sockaddr *addr, unsigned char bytes[16]);

/* ---- Open connections (serve_conns.c) ------------------------------------ */
/* The network a client's connections count against: its IPv4 address, or
 * the /64 of its IPv6 one (one host can walk a whole /64). */
typedef struct sv_net_key {
    unsigned char bytes[9]; /* family tag, then 4 or 8 address bytes */
} sv_net_key;
int sv_net_key_of(const struct sockaddr *addr, sv_net_key *key);

typedef struct sv_conns sv_conns;
/* The table of open connections and its watchdog thread, which shuts a
 * connection down once its request deadline passes (request_timeout
 * seconds from accept, or from the end of its previous response, to the
 * end of its request's body). */
sv_conns *sv_conns_start(long request_timeout);
void sv_conns_stop(sv_conns *t);
/* Connections open from addr's network, and in all. */
int sv_conns_count(sv_conns *t, const struct sockaddr *addr);
int sv_conns_total(sv_conns *t);
/* A connection opened (its socket fd and client address) and closed. */
void sv_conns_opened(sv_conns *t, const void *connection, int fd, const struct sockaddr *addr);
void sv_conns_closed(sv_conns *t, const void *connection);
/* Its request's body is in: no deadline while it is answered. */
void sv_conns_received(sv_conns *t, const void *connection);
/* Its response is over: the next request's deadline starts. */
void sv_conns_answered(sv_conns *t, const void *connection);
/* Connections the watchdog shut down since the start. */
uint64_t sv_conns_expired(sv_conns *t);
/* Shuts every connection down (the end of a drain). */
void sv_conns_cut_all(sv_conns *t);
/* 1 when the n bytes of a and b are equal; the time does not depend on where
 * they differ. */
int sv_bytes_equal_ct(const void *a, const void *b, size_t n);

/* ---- Server settings and shared state ------------------------------------ */
typedef struct sv_config {
    const char *model_path;
    const char *host;
    long port;
    const char *allow_text;
    const char *api_key_file;
    long threads, max_sequences, context, max_tokens, queue, timeout, chunk, max_body;
    long max_connections_per_ip; /* 0: no limit */
    long request_timeout;        /* seconds from accept (or the last response) to a request's whole body */
    long drain_timeout;          /* seconds a drain waits before it cuts what is left */
    const char *allowed_hosts;   /* --allowed-hosts: Host names answered; NULL: the default */
    const char *cors_origins;    /* --cors-origin: origins whose pages may call; NULL: none */
    di_backend backend;
    di_profile profile;
    long device;
    di_cpu_path cpu_path;
    const char *chat_template; /* --chat-template NAME, else the model's */
    const char *model_name;    /* the id /v1/models lists; default the file's base name */
} sv_config;

typedef struct sv_metrics sv_metrics;
typedef struct sv_engine sv_engine;

typedef struct sv_server {
    sv_config cfg;
    sv_allowlist allow;
    char *api_key;       /* NULL: no key required */
    size_t api_key_len;
    di_model *model;
    int64_t n_vocab;
    size_t max_token_bytes; /* the most text bytes one token stands for (sv_max_token_bytes); 0: no tokenizer */
    int64_t context;     /* tokens per sequence */
    int32_t eos;         /* -1 when the model has none */
    int32_t eot;         /* end of a chat turn, -1 when none */
    const char *chat_template; /* NULL: chat answers 400 */
    int sampling_available;
    /* The fingerprint every response carries. */
    char model_digest[DI_DIGEST_HEX_SIZE];
    char backend_info[256];
    sv_engine *engine;
    sv_metrics *metrics;
    sv_conns *conns;
    long connection_cap;       /* open connections at most: max_sequences + queue + 16 */
    int test_sndbuf;           /* TEST ONLY (DETINFER_TEST_SNDBUF): SO_SNDBUF of each connection; 0: the kernel's */
    const char *allowed_hosts; /* the Host names answered (comma-separated); NULL: any */
    int draining;              /* SIGTERM/SIGINT/SIGHUP: refuse new requests; atomic (sv_draining) */
} sv_server;

static inline int sv_draining(const sv_server *s)
{
    return __atomic_load_n(&s->draining, __ATOMIC_SEQ_CST);
}

/* ---- Requests (serve_request.c) ------------------------------------------ */
typedef enum sv_kind { SV_COMPLETION, SV_CHAT } sv_kind;

typedef struct sv_request {
    /* Fixed once parsed. */
    sv_kind kind;
    int stream;
    int want_logits_digests;
    int32_t *prompt;
    uint32_t n_prompt;
    uint32_t max_tokens;
    char **stops;
    size_t n_stops, max_stop_len;
    int sampled; /* 0: greedy */
    di_sampling_params params;
    int logprobs;             /* 1: each token's log-probability (di_session_logprobs) */
    uint32_t n_top;           /* alternatives per token: completions' logprobs, chat's top_logprobs */
    char id[48];
    long long created;

    /* Progress, written by the engine under its lock. */
    int state;                /* SV_QUEUED, SV_RUNNING, SV_DONE */
    uint32_t slot, n_fed;     /* prompt tokens stepped so far */
    int32_t *out;             /* generated tokens (max_tokens) */
    di_digest *digests;       /* logits digest each was chosen from */
    float *token_logprob;     /* with logprobs: each token's, [max_tokens] */
    int32_t *top_tokens;      /* with logprobs: [max_tokens][n_top] */
    float *top_logprobs;      /* [max_tokens][n_top] */
    size_t *text_offset;      /* with logprobs: bytes of text before each token, [max_tokens] */
    size_t *visible_after;    /* with logprobs: text_visible once each token was added, [max_tokens]:
                               * a stream's chunk per token, whenever the stream reads it */
    uint32_t n_out;
    char *text;               /* detokenized generated tokens (text_len bytes, NUL bytes possible), NUL-terminated */
    size_t text_len;
    size_t text_visible;      /* bytes of text that are final (stop strings held back) */
    const char *finish_reason;/* "stop" or "length" when done */
    di_digest sequence;       /* prompt + generated ids, when done */
    int cancelled;            /* the client went away */
    char error[256];          /* non-empty: the engine failed this request */
    double t_queued, t_first_token;
    pthread_cond_t changed;
    int refs;                 /* the HTTP side and the engine */
} sv_request;

enum { SV_QUEUED = 0, SV_RUNNING = 1, SV_DONE = 2 };

/* An HTTP error: status, OpenAI's error type and a message. */
typedef struct sv_error {
    int status;
    const char *type; /* "invalid_request_error", ... */
    char param[64];   /* the offending field, or "" (a copy: the request's JSON is gone by then) */
    char message[512];
} sv_error;

/* Parses and checks a request body; on success *out is a new request with
 * refs = 1. On failure fills e (status 400) and returns -1. */
int sv_request_parse(sv_server *s, sv_kind kind, const char *body, size_t len, sv_request **out, sv_error *e);
void sv_request_free(sv_request *r);
/* Routes jansson's allocations through the per-parse budget of
 * sv_request_parse; called once, before any JSON is made. */
void sv_json_budget_install(void);
/* The complete (non-streaming) response body; caller frees. Call with the
 * request done. */
char *sv_response_json(const sv_server *s, const sv_request *r);
/* One SSE chunk's JSON for a text delta and, with logprobs, those of the
 * tokens [tok_from, tok_to) (finish NULL while running); the last one
 * (finish set) carries the detinfer object. Caller frees. */
char *sv_chunk_json(const sv_server *s, const sv_request *r, const char *delta, size_t delta_len,
                    uint32_t tok_from, uint32_t tok_to, const char *finish, int final);
/* {"error": {...}} */
char *sv_error_json(const sv_error *e);
/* The detinfer object of a finished request (new reference). */
json_t *sv_detinfer_object(const sv_server *s, const sv_request *r);
/* Appends to the string a JSON string value of bytes that may end inside a
 * UTF-8 sequence or hold invalid bytes (replaced by U+FFFD). */
json_t *sv_json_text(const char *text, size_t len);
/* Length of the longest prefix of text[0..len) that does not end inside a
 * UTF-8 sequence. */
size_t sv_utf8_complete_prefix(const char *text, size_t len);
void sv_set_error(sv_error *e, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- Engine (serve_engine.c) --------------------------------------------- */
/* Creates the session and starts the engine thread. */
int sv_engine_start(sv_server *s, char *err, size_t err_size);
/* Hands r to the engine (adds a reference). 0, or -1 with e set (429 when
 * the queue is full, 503 while draining). */
int sv_engine_submit(sv_server *s, sv_request *r, sv_error *e);
/* Waits until r changes or `seconds` pass; returns with the lock held for the
 * caller to read r: call sv_engine_unlock after. */
void sv_engine_lock(sv_server *s);
void sv_engine_unlock(sv_server *s);
void sv_engine_wait(sv_server *s, sv_request *r, double seconds);
/* The client went away: the engine frees r's sequence at its next step. */
void sv_engine_cancel(sv_server *s, sv_request *r);
/* Drops the HTTP side's reference. */
void sv_engine_release(sv_server *s, sv_request *r);
/* Requests waiting and running. */
void sv_engine_counts(sv_server *s, int *queued, int *running);
/* Finishes the requests in flight, then stops the thread and frees the session. */
void sv_engine_stop(sv_server *s);

/* ---- Metrics (serve_metrics.c) ------------------------------------------- */
int sv_metrics_create(sv_server *s);
void sv_metrics_free(sv_server *s);
void sv_metrics_request(sv_server *s, const char *endpoint, int status);
void sv_metrics_tokens(sv_server *s, uint64_t prompt, uint64_t completion);
void sv_metrics_step(sv_server *s, uint32_t batch_sequences, uint32_t batch_tokens, double seconds);
/* Prompt tokens a request took from a cached prefix instead of computing. */
void sv_metrics_prefix(sv_server *s, uint32_t tokens);
/* Prometheus text exposition, with the engine's queue counts (sv_engine_counts,
 * taken by the caller before: the metrics never call into the engine); caller frees. */
char *sv_metrics_text(sv_server *s, int queued, int running);

/* ---- HTTP (serve_http.c) ------------------------------------------------- */
struct MHD_Daemon;
struct MHD_Daemon *sv_http_start(sv_server *s, char *err, size_t err_size);
/* Requests received and not yet completed (their response sent or abandoned). */
int sv_http_in_flight(void);

#endif /* DETINFER_SERVE_H */
