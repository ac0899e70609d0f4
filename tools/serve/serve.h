/*
 * serve.h — `detinfer serve`: a deterministic HTTP service with OpenAI's
 * completion and chat shapes (docs/SERVING.md). What the files of
 * tools/serve/ share:
 *
 *   serve_main.c     options, start-up, signals, draining shutdown
 *   serve_allow.c    the client allowlist (CIDR) and the API key check
 *   serve_conns.c    open connections by network, the request deadline watchdog
 *   serve_json.c     a body's JSON under a memory budget; where a text may be cut in a character
 *   serve_request.c  request JSON -> a checked sv_request
 *   serve_messages.c a chat's messages -> roles and contents for di_chat_tokenize
 *   serve_grammar.c  response_format, grammar, json_schema -> a compiled grammar (cached)
 *   serve_tools.c    tools and tool_choice: their prompt text, their grammar, the calls parsed back
 *   serve_response.c response, stream chunk and error JSON; the detinfer object
 *   serve_responses.c /v1/responses (OpenAI's Responses API) as a chat request; its JSON and events
 *   serve_tokens.c   /tokenize, /detokenize and /tokenizer_info
 *   serve_engine.c   the engine thread: continuous batching over one session,
 *                    the prefix cache of its slots
 *   serve_http.c     libmicrohttpd handlers, routing
 *   serve_stream.c   Server-Sent Events: a stream's chunks
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

#include "cli/cli_commands.h"
#include "cli/cli_digest.h"
#include "cli/cli_model.h"
#include "cli/cli_options.h"
#include "cli/cli_progress.h"

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
/* The accept policy's question: 1 when a connection from addr may be taken.
 * When addr's network holds per_net open connections (0: no limit), its
 * oldest one still receiving its request is shut down to make room. Below
 * `cap` open connections it may; at the cap, room is made by shutting down
 * the oldest connection still receiving of the network that holds the most
 * of those, when it holds at least two more than addr's network
 * (serve_conns.c says why). */
int sv_conns_admit(sv_conns *t, const struct sockaddr *addr, int cap, int per_net);
/* Open connections of its network, itself included, when it opened: past
 * --max-connections-per-ip its requests are answered 429. 0: unknown. */
int sv_conns_rank(sv_conns *t, const void *connection);
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
    long max_n;                /* --max-n: choices a request may ask for */
    long max_prompts;          /* --max-prompts: prompts in one /v1/completions request */
    int speculate;             /* --speculate: drafts verified several tokens a step */
    const char *draft_model;   /* --speculate FILE: drafts from this model (same vocabulary); NULL: prompt lookup */
    long draft_max;            /* --draft-max: draft tokens per sequence and step */
    long max_tokens_default;   /* --max-tokens-default: a chat's max_tokens when it gives none */
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
    char system_fingerprint[DI_DIGEST_HEX_SIZE]; /* `detinfer doctor --profile P`'s digest */
    long long created;         /* the model file's modification time, else the start time */
    sv_engine *engine;
    sv_metrics *metrics;
    sv_conns *conns;
    long connection_cap;       /* open connections at most: max_sequences + queue + 16 */
    int test_sndbuf;           /* TEST ONLY (DETINFER_TEST_SNDBUF): SO_SNDBUF of each connection; 0: the kernel's */
    const char *allowed_hosts; /* the Host names answered (comma-separated); NULL: any */
    int draining;              /* SIGTERM/SIGINT/SIGHUP: refuse new requests; atomic (sv_draining) */
} sv_server;

static inline int sv_draining(const sv_server *srv)
{
    return __atomic_load_n(&srv->draining, __ATOMIC_SEQ_CST);
}

/* ---- Requests (serve_request.c) ------------------------------------------ */
typedef enum sv_kind { SV_COMPLETION, SV_CHAT } sv_kind;

struct sv_request;

/* One prompt of a request (a completion's prompt may be a list of them) and,
 * with echo and logprobs, the log-probability of each of its tokens given
 * those before it (the engine fills them from one all-logits prefill). */
typedef struct sv_prompt {
    int32_t *ids;
    uint32_t n;
    float *token_logprob;     /* echo with logprobs: [n]; [0] has none (NaN) */
    int32_t *top_tokens;      /* [n][n_top] */
    float *top_logprobs;      /* [n][n_top] */
    char *text;               /* echo: the prompt's tokens detokenized (text_len bytes) */
    size_t text_len;
    size_t *text_offset;      /* echo with logprobs: bytes of text before each token, [n] */
} sv_prompt;

/* One computed choice: a sequence of the session while it runs. */
typedef struct sv_choice {
    struct sv_request *req;
    sv_prompt *prompt;        /* the prompt it continues */
    int scores_prompt;        /* it computes its prompt's log-probabilities (echo with logprobs) */
    uint32_t n_draft;         /* draft tokens after its last token in the step being run */
    uint32_t drafted, accepted; /* --speculate: draft tokens stepped and accepted so far */
    uint32_t index;           /* among the request's computed choices */
    uint64_t seed;            /* a sampled request's seed + index */
    /* Progress, written by the engine under its lock. */
    int state;                /* SV_QUEUED, SV_RUNNING, SV_DONE */
    uint32_t slot, n_fed;     /* prompt tokens stepped so far */
    int32_t *out;             /* generated tokens (max_tokens) */
    di_digest *digests;       /* logits digest each was chosen from */
    float *token_logprob;     /* with logprobs: each token's, [max_tokens] */
    int32_t *top_tokens;      /* with logprobs: [max_tokens][n_top] */
    float *top_logprobs;      /* [max_tokens][n_top] */
    size_t *text_offset;      /* with logprobs: bytes of text before each token, [max_tokens] */
    size_t *visible_after;    /* text_visible once each token was added, [max_tokens]: a stream's
                               * chunk per token, whenever the stream reads it */
    uint32_t n_out;
    char *text;               /* detokenized generated tokens (text_len bytes, NUL bytes possible), NUL-terminated */
    size_t text_len;
    size_t text_visible;      /* bytes of text that are final (stop strings held back) */
    const char *finish_reason;/* "stop" or "length" when done; "length" for max_tokens 0 */
    di_digest sequence;       /* prompt + generated ids, when done */
    json_t *tool_calls;       /* done with tool calls (finish_reason "tool_calls"): OpenAI's list; else NULL */
    size_t calls_at;          /* with tool_calls: bytes of text before the first call (the content) */
    char error[256];          /* non-empty: the engine failed this choice */
    double t_first_token;
} sv_choice;

typedef struct sv_request {
    /* Fixed once parsed. */
    sv_kind kind;
    int stream;
    int include_usage;        /* stream_options.include_usage: a last chunk with the usage */
    int want_logits_digests, want_prompt_ids;
    sv_prompt *prompts;       /* [n_prompts] */
    uint32_t n_prompts;
    uint32_t n_prompt_tokens; /* over every prompt (usage) */
    int echo;                 /* completions: the prompt before the completion, in text and logprobs */
    uint32_t max_tokens;      /* 0 only with echo: the prompt scored, nothing generated */
    char **stops;
    size_t n_stops, max_stop_len;
    int sampled; /* 0: greedy */
    di_sampling_params params; /* choice i samples with seed params.seed + i */
    struct sv_grammar *grammar; /* response_format, grammar or json_schema, or the tools'; NULL: none */
    json_t *tools;            /* chat: the request's tools (non-empty array), rendered into the prompt; NULL: none */
    int tool_mode;            /* SV_TOOLS_*: whether calls are generated and parsed back */
    int parallel_calls;       /* parallel_tool_calls (default true); false: at most one call */
    int tool_format;          /* SV_TOOL_FORMAT_*: how the template's model family writes calls */
    int logprobs;             /* 1: each token's log-probability (di_session_logprobs) */
    uint32_t n_top;           /* alternatives per token: completions' logprobs, chat's top_logprobs */
    uint32_t n;               /* choices per prompt in the response */
    uint32_t n_computed;      /* choices computed: per prompt n when sampled, 1 when greedy (the n are
                               * equal), so n_prompts x that */
    sv_choice *choices;       /* [n_computed], prompt by prompt; response choice i (prompt i / n,
                               * choice i % n) is sv_choice_of(r, i) */
    uint32_t n_admitted;      /* engine: choices given a slot so far */
    char id[48];
    long long created;
    int cancelled;            /* the client went away */
    double t_queued;
    pthread_cond_t changed;   /* any choice changed */
    int refs;                 /* the HTTP side and the engine */
    json_t *responses;        /* /v1/responses: the Response object's fields the request fixes; NULL for others */
} sv_request;

enum { SV_QUEUED = 0, SV_RUNNING = 1, SV_DONE = 2 };
/* tool_choice: none (or no tools): plain text; auto: text, or calls from
 * the call marker on; required (or one named function): calls only. */
enum { SV_TOOLS_OFF = 0, SV_TOOLS_AUTO = 1, SV_TOOLS_REQUIRED = 2 };
/* <tool_call> blocks (chatml: Qwen; the generic fallback), Llama 3.1's
 * message that is one JSON call (llama3), or Mistral's [TOOL_CALLS] list
 * (mistral-v3-tekken: Mistral Nemo). */
enum { SV_TOOL_FORMAT_HERMES = 0, SV_TOOL_FORMAT_LLAMA3 = 1, SV_TOOL_FORMAT_MISTRAL = 2 };

/* Choices in the response: n for each prompt. */
static inline uint32_t sv_response_choices(const sv_request *r)
{
    return r->n_prompts * r->n;
}

/* Choices computed for each prompt: n when sampled, 1 when greedy (its n
 * response choices are equal). Computed choice k continues prompt k / that. */
static inline uint32_t sv_computed_per_prompt(const sv_request *r)
{
    return r->sampled ? r->n : 1;
}

/* The computed choice behind response choice i (index = prompt x n + choice). */
static inline sv_choice *sv_choice_of(const sv_request *r, uint32_t i)
{
    const uint32_t per = sv_computed_per_prompt(r);
    return &r->choices[(i / r->n) * per + (r->sampled ? i % r->n : 0)];
}

/* 1 when every computed choice is done (engine lock held). */
int sv_request_done(const sv_request *r);
/* The first choice's error, or NULL when none failed. */
const char *sv_request_error(const sv_request *r);

/* An HTTP error: status, OpenAI's error type and a message. */
typedef struct sv_error {
    int status;
    const char *type; /* "invalid_request_error", ... */
    char param[64];   /* the offending field, or "" (a copy: the request's JSON is gone by then) */
    char message[512];
} sv_error;

void sv_set_error(sv_error *e, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* sv_set_error with status 400 and invalid_request_error; returns -1. */
int sv_bad(sv_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parses and checks a request body; on success *out is a new request with
 * refs = 1. On failure fills e (status 400) and returns -1. */
int sv_request_parse(sv_server *srv, sv_kind kind, const char *body, size_t len, sv_request **out, sv_error *e);
void sv_request_free(sv_request *r);
/* 1 when a text of `bytes` bytes may fit the context (each token stands for
 * at most max_token_bytes bytes); else e is set for param and 0. */
int sv_text_may_fit(const sv_server *srv, size_t bytes, const char *param, sv_error *e);

/* ---- A chat's messages (serve_messages.c) -------------------------------- */
/* What di_chat_tokenize takes: roles (static strings) and contents
 * (malloc'd). */
typedef struct sv_chat {
    const char **roles;
    char **contents;
    size_t n, cap;
} sv_chat;
/* OpenAI's messages (content as a string or text parts; developer as system;
 * tool answers; assistant tool calls, arguments written as the templates'
 * tojson writes them) into *out; 0, or -1 with e set (400). */
int sv_chat_messages(json_t *messages, sv_chat *out, sv_error *e);
void sv_chat_free(sv_chat *c);
/* A growing NUL-terminated text; oom set (and the text kept) when an
 * append failed. */
typedef struct sv_buf {
    char *p;
    size_t n, cap;
    int oom;
} sv_buf;
void sv_buf_put(sv_buf *b, const char *s, size_t n);
void sv_buf_puts(sv_buf *b, const char *s);
/* OpenAI's function names: [a-zA-Z0-9_-]{1,64} (so never a newline). */
int sv_function_name_ok(const char *name);
/* A JSON value as Python's json.dumps(v, ensure_ascii=False) writes it: ", "
 * and ": " separators, keys in order, floats as repr(). malloc'd; NULL when
 * out of memory. */
char *sv_python_json(const json_t *v);
/* The same with json.dumps(v, indent=indent): "," and a new line between
 * items, nested items indented; indent 0 is sv_python_json. */
char *sv_python_json_indent(const json_t *v, int indent);

/* ---- A request's grammar (serve_grammar.c) ------------------------------- */
typedef struct sv_grammar sv_grammar;
/* response_format, grammar or json_schema of the request into r->grammar
 * (left NULL for none and for {"type": "text"}); 0, or -1 with e set (400
 * naming the field, the library's message naming the place in it). */
int sv_request_grammar(json_t *root, sv_request *r, sv_error *e);
const di_grammar *sv_grammar_handle(const sv_grammar *g);
/* di_grammar_digest in hex: what the detinfer object names. */
const char *sv_grammar_digest(const sv_grammar *g);
/* Drops a request's reference. */
void sv_grammar_release(sv_grammar *g);
/* Frees the cached grammars no request uses (at exit). */
void sv_grammar_cache_clear(void);
/* The compiled grammar of a GBNF text (cached like the request's own); 0, or
 * -1 with e set for param. */
int sv_grammar_from_gbnf(const char *text, size_t len, const char *param, sv_grammar **out, sv_error *e);

/* ---- Tool calls (serve_tools.c) ------------------------------------------ */
/* A chat's tools, tool_choice and parallel_tool_calls into r->tools,
 * r->tool_mode and (when calls are generated) r->grammar; 0, or -1 with e
 * set (400 naming the tool or the field). After sv_request_grammar. */
int sv_request_tools(const sv_server *srv, json_t *root, sv_request *r, sv_error *e);
/* The tools into the prompt as the template's model family expects them
 * (chatml: Qwen's <tools> in the system turn; llama3: Llama 3.1's in the
 * first user message; others: a generic statement of the tools and of the
 * call format in the system turn, and the history's calls and answers as
 * text in that format). 0, or -1 with e set. */
int sv_tools_messages(const sv_server *srv, const sv_request *r, sv_chat *chat, sv_error *e);
/* Mistral with tools: the whole prompt (chat: as sv_chat_messages made it
 * of messages) written as Mistral Nemo's template writes it and tokenized,
 * its markers as control tokens, into p; 0, or -1 with e set. The caller
 * has checked that the messages' text may fit (sv_text_may_fit). */
int sv_tools_mistral_prompt(const sv_server *srv, const sv_request *r, json_t *messages, const sv_chat *chat,
                            sv_prompt *p, sv_error *e);
/* A finished choice's text parsed back into c->tool_calls (and its
 * finish_reason "tool_calls") when it ends with calls; cut by length after
 * whole calls, those calls (the finish_reason stays "length"). Engine lock
 * held. */
void sv_tools_finish(sv_choice *c);
/* Of choice c's first `upto` bytes of text, how many a stream may send as
 * content now: all but a call, or what may begin one, while tool calls may
 * come (engine lock held). */
size_t sv_tools_sendable(const sv_choice *c, size_t upto);

/* ---- JSON in and out (serve_json.c) -------------------------------------- */
/* A body's JSON, parsed strictly (duplicate keys refused) within the memory
 * budget (8 x its size + 64 KiB, checked before parsing on an upper bound of
 * what its values cost): NULL with e set (413 past the budget, 400 otherwise). */
json_t *sv_json_load(const char *body, size_t len, sv_error *e);
/* A JSON text inside the body (a tool call's arguments), parsed within what
 * is left of the body's budget (same thread, after sv_json_load); NULL with
 * e set, naming `what`. */
json_t *sv_json_load_inner(const char *text, size_t len, const char *what, sv_error *e);
/* The first key of object o that is not one of the NULL-ended names, or
 * NULL when every key is. */
const char *sv_unknown_key(json_t *o, const char *const *names);
/* Length of the longest prefix of text[0..len) that does not end inside a
 * UTF-8 sequence. */
size_t sv_utf8_complete_prefix(const char *text, size_t len);
/* The compact text of root, which it releases; caller frees. */
char *sv_json_dump(json_t *root);

/* ---- Responses (serve_response.c) ---------------------------------------- */
/* The complete (non-streaming) response body; caller frees. Call with the
 * request done. */
char *sv_response_json(const sv_server *srv, const sv_request *r);
/* One SSE chunk's JSON for response choice `index` (computed choice c): a
 * text delta and, with logprobs, those of the tokens [tok_from, tok_to);
 * finish set on the choice's last chunk, which carries its detinfer object.
 * role: the chat's first chunk of the choice, {"role", "content": ""}.
 * Caller frees. */
char *sv_chunk_json(const sv_server *srv, const sv_request *r, uint32_t index, const char *delta, size_t delta_len,
                    uint32_t tok_from, uint32_t tok_to, const char *finish, int role);
/* A chat chunk of response choice `index`'s tool call k: part 0 its index,
 * id, type and name (arguments ""), part 1 its arguments. Caller frees. */
char *sv_tool_call_chunk_json(const sv_server *srv, const sv_request *r, uint32_t index, size_t k, int part);
/* A whole response choice's text as the response gives it (with echo, its
 * prompt's text first). New reference. */
json_t *sv_choice_text(const sv_request *r, const sv_choice *c);
/* The last chunk with stream_options.include_usage: no choices, the usage. */
char *sv_usage_chunk_json(const sv_server *srv, const sv_request *r);
/* {"error": {...}} */
char *sv_error_json(const sv_error *e);
/* The detinfer object: the request's facts, and response choice `index`'s
 * (index < 0: every choice's, in "choices"). New reference. */
json_t *sv_detinfer_object(const sv_server *srv, const sv_request *r, int index);
/* The fingerprint object (/v1/models and every detinfer object). */
json_t *sv_fingerprint_object(const sv_server *srv);

/* ---- The Responses API (serve_responses.c) ------------------------------- */
/* A /v1/responses body, checked and parsed as the chat request it means
 * (sv_request_parse, SV_CHAT), with r->responses set; on failure e is set
 * (400 naming the Responses field) and -1 returned. */
int sv_responses_parse(sv_server *srv, const char *body, size_t len, sv_request **out, sv_error *e);
/* The Response object of a done request; caller frees. */
char *sv_responses_json(const sv_server *srv, const sv_request *r);
/* A stream's progress through the Responses events. */
typedef struct sv_responses_stream {
    uint32_t events;      /* sent: the next one's sequence_number */
    uint32_t tokens_sent; /* generated tokens looked at */
    size_t text_sent;     /* bytes of the text sent in deltas */
    int opened, closed;
    int message_open;     /* the message item's added events are sent */
} sv_responses_stream;
/* The Server-Sent Events ("event: TYPE\ndata: {...}\n\n") that r's progress
 * adds since st's last call, or NULL for none; caller frees. Engine lock held. */
char *sv_responses_events(const sv_server *srv, const sv_request *r, sv_responses_stream *st);

/* ---- Token endpoints (serve_tokens.c) ------------------------------------ */
/* /tokenize and /detokenize: the response body (caller frees), or NULL with
 * e set. */
char *sv_tokenize_json(sv_server *srv, const char *body, size_t len, sv_error *e);
char *sv_detokenize_json(sv_server *srv, const char *body, size_t len, sv_error *e);
/* GET /tokenizer_info (vLLM's): the special tokens' texts, the context, the
 * chat template; caller frees; NULL when out of memory. */
char *sv_tokenizer_info_json(sv_server *srv);

/* ---- The model's facts (serve_main.c) ------------------------------------ */
/* The most text bytes one token stands for (at least 4); 0 without a tokenizer. */
size_t sv_max_token_bytes(const di_model *model, int64_t n_vocab);
/* The id of the template's end of turn (the library's table), -1 when the
 * vocabulary lacks it or there is no template. */
int32_t sv_turn_end_token(const di_model *model, const char *chat_template);

/* ---- Engine (serve_engine.c) --------------------------------------------- */
/* Creates the session (and, with --speculate FILE, loads the draft model
 * and its drafter) and starts the engine thread. DI_OK, or the status with
 * err set. */
int sv_engine_start(sv_server *srv, char *err, size_t err_size);
/* Hands r to the engine (adds a reference). 0, or -1 with e set (429 when
 * the queue is full, 503 while draining). The engine gives each computed
 * choice a slot: the one whose whole cache is the longest prefix of the
 * prompt, else the least recently used idle one; it starts from the longest
 * prefix of the prompt any slot holds (choices after the first, once the
 * first has read the prompt: theirs). */
int sv_engine_submit(sv_server *srv, sv_request *r, sv_error *e);
/* Waits until r changes or `seconds` pass; returns with the lock held for the
 * caller to read r: call sv_engine_unlock after. */
void sv_engine_lock(sv_server *srv);
void sv_engine_unlock(sv_server *srv);
void sv_engine_wait(sv_server *srv, sv_request *r, double seconds);
/* The client went away: the engine frees r's sequence at its next step. */
void sv_engine_cancel(sv_server *srv, sv_request *r);
/* Drops the HTTP side's reference. */
void sv_engine_release(sv_server *srv, sv_request *r);
/* Requests waiting and running. */
void sv_engine_counts(sv_server *srv, int *queued, int *running);
/* Finishes the requests in flight, then stops the thread and frees the session. */
void sv_engine_stop(sv_server *srv);

/* ---- Metrics (serve_metrics.c) ------------------------------------------- */
int sv_metrics_create(sv_server *srv);
void sv_metrics_free(sv_server *srv);
void sv_metrics_request(sv_server *srv, const char *endpoint, int status);
void sv_metrics_tokens(sv_server *srv, uint64_t prompt, uint64_t completion);
void sv_metrics_step(sv_server *srv, uint32_t batch_sequences, uint32_t batch_tokens, double seconds);
/* Prompt tokens a request took from a cached prefix instead of computing. */
void sv_metrics_prefix(sv_server *srv, uint32_t tokens);
/* Prometheus text exposition, with the engine's queue counts (sv_engine_counts,
 * taken by the caller before: the metrics never call into the engine); caller frees. */
char *sv_metrics_text(sv_server *srv, int queued, int running);

/* ---- HTTP (serve_http.c, serve_stream.c) -------------------------------- */
struct MHD_Daemon;
struct MHD_Connection;
struct MHD_Response;
/* A streaming response for r (whose reference it takes over), or NULL. */
struct MHD_Response *sv_stream_response(sv_server *srv, struct MHD_Connection *conn, sv_request *r);
/* The connection's socket, or -1. */
int sv_connection_fd(struct MHD_Connection *conn);
/* 1 when the client has closed its end (checked without reading). */
int sv_client_gone(int fd);
struct MHD_Daemon *sv_http_start(sv_server *srv, char *err, size_t err_size);
/* Requests received and not yet completed (their response sent or abandoned). */
int sv_http_in_flight(void);

#endif /* DETINFER_SERVE_H */
