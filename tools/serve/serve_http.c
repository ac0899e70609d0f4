/*
 * serve_http.c — HTTP/1.1 with keep-alive from libmicrohttpd, one thread per
 * connection (a handler may wait for the engine). A client outside the
 * allowlist is refused at accept, before a byte is read (the accept policy),
 * and so is any client at the connection cap when no connection can make
 * room (sv_conns_admit). Then, each before any work: the HTTP version (505),
 * the Host and the body's framing (400, closing), the connections of the
 * client's network (429, closing), the Host's name (421), the Origin
 * (403), the route (404/405, and CORS preflights), the API key (401),
 * draining (503), the content type (415), the body size (413, as soon as a
 * body passes it); then the body is parsed (400) and queued (429). A 401,
 * 403, 413 or 421 closes the connection. Streams are serve_stream.c's.
 */
#include <microhttpd.h>
#include <netdb.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "serve/serve.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_Result_t;
#else
typedef enum MHD_Result MHD_Result_t;
#endif

/* ---- Routes (one table) -------------------------------------------------- */
typedef enum route_id {
    R_COMPLETIONS, R_CHAT, R_RESPONSES, R_MODELS, R_MODEL, R_TOKENIZE, R_DETOKENIZE, R_TOKENIZER_INFO, R_HEALTH,
    R_METRICS, R_NONE
} route_id;
static const struct route {
    const char *path;
    const char *method;
    int needs_key;
    int prefix; /* 1: the path is a prefix, the rest an id (/v1/models/{id}) */
} routes[] = {
    [R_COMPLETIONS] = {"/v1/completions", "POST", 1, 0},
    [R_CHAT] = {"/v1/chat/completions", "POST", 1, 0},
    [R_RESPONSES] = {"/v1/responses", "POST", 1, 0},
    [R_MODELS] = {"/v1/models", "GET", 1, 0},
    [R_MODEL] = {"/v1/models/", "GET", 1, 1},
    [R_TOKENIZE] = {"/tokenize", "POST", 1, 0},
    [R_DETOKENIZE] = {"/detokenize", "POST", 1, 0},
    [R_TOKENIZER_INFO] = {"/tokenizer_info", "GET", 1, 0},
    [R_HEALTH] = {"/health", "GET", 0, 0},
    [R_METRICS] = {"/metrics", "GET", 1, 0},
    [R_NONE] = {"other", NULL, 0, 0},
};

typedef struct exchange {
    route_id route;
    char *body;
    size_t len, cap;
    int status;         /* of the response queued; for metrics */
    const char *origin; /* an allowed Origin, echoed in the CORS headers; NULL for none */
    int close;          /* the answer closes the connection (a request whose framing cannot be trusted) */
} exchange;

static int in_flight; /* requests between their first call and completion (atomic) */

static void add_cors(struct MHD_Response *resp, const exchange *ex)
{
    if (!ex->origin)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, ex->origin);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
}

static MHD_Result_t queue_text(struct MHD_Connection *conn, exchange *ex, int status, const char *type, char *body,
                               const char *retry_after)
{
    if (!body) {
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                      "\"code\":null}}");
        status = 500;
        type = "application/json";
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    add_cors(resp, ex);
    if (ex->close || status == 401 || status == 403 || status == 413 || status == 421) /* no second try on this connection */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (retry_after)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, routes[ex->route].method);
    ex->status = status;
    MHD_Result_t ret = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static MHD_Result_t queue_json(struct MHD_Connection *conn, exchange *ex, int status, char *body)
{
    return queue_text(conn, ex, status, "application/json", body, NULL);
}

static MHD_Result_t queue_error(struct MHD_Connection *conn, exchange *ex, const sv_error *e)
{
    const char *retry = e->status == 429 || e->status == 503 ? "1" : NULL;
    return queue_text(conn, ex, e->status, "application/json", sv_error_json(e), retry);
}

static MHD_Result_t fail(struct MHD_Connection *conn, exchange *ex, int status, const char *type, const char *fmt,
                         const char *arg)
{
    sv_error e;
    sv_set_error(&e, status, type, NULL, fmt, arg);
    return queue_error(conn, ex, &e);
}

static MHD_Result_t too_big(sv_server *srv, struct MHD_Connection *conn, exchange *ex)
{
    sv_error e;
    sv_set_error(&e, 413, "invalid_request_error", NULL, "the body is larger than %ld bytes (--max-body)",
                 srv->cfg.max_body);
    return queue_error(conn, ex, &e);
}

/* A body past --max-body while it is still arriving (chunked): this
 * libmicrohttpd takes no response until the body ends, and an endless body
 * never ends. So the 413 is written on the socket here, the write side shut
 * (the client reads it, then the end), and the connection dropped (MHD_NO).
 * No response of libmicrohttpd's is under way on it, and there is no TLS. */
static MHD_Result_t too_big_now(sv_server *srv, struct MHD_Connection *conn, exchange *ex)
{
    sv_error e;
    sv_set_error(&e, 413, "invalid_request_error", NULL, "the body is larger than %ld bytes (--max-body)",
                 srv->cfg.max_body);
    char *body = sv_error_json(&e);
    const int fd = sv_connection_fd(conn);
    if (body && fd >= 0) {
        char head[256];
        const int n = snprintf(head, sizeof head,
                               "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                               "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                               strlen(body));
        if (send(fd, head, (size_t)n, MSG_NOSIGNAL) == n)
            send(fd, body, strlen(body), MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
    }
    free(body);
    ex->status = 413;
    return MHD_NO;
}

static route_id find_route(const char *url)
{
    for (int i = 0; i < R_NONE; i++) {
        const size_t n = strlen(routes[i].path);
        if (routes[i].prefix ? !strncmp(url, routes[i].path, n) && url[n] : !strcmp(url, routes[i].path))
            return (route_id)i;
    }
    return R_NONE;
}

/* "Authorization: Bearer KEY", compared in constant time. */
static int key_ok(sv_server *srv, struct MHD_Connection *conn)
{
    if (!srv->api_key)
        return 1;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncmp(auth, "Bearer ", 7))
        return 0;
    const char *given = auth + 7;
    size_t n = strlen(given);
    /* Compare as many bytes as the key has whatever was given, so the time
     * tells nothing about the key but its length. */
    char *padded = calloc(1, srv->api_key_len + 1);
    if (!padded)
        return 0;
    memcpy(padded, given, n < srv->api_key_len ? n : srv->api_key_len);
    int equal = sv_bytes_equal_ct(padded, srv->api_key, srv->api_key_len);
    explicit_bzero(padded, srv->api_key_len + 1);
    free(padded);
    return equal && n == srv->api_key_len;
}

/* ---- Handlers --------------------------------------------------------------- */

static MHD_Result_t handle_generation(sv_server *srv, struct MHD_Connection *conn, exchange *ex)
{
    sv_request *r = NULL;
    sv_error e;
    const char *body = ex->body ? ex->body : "";
    const sv_kind kind = ex->route == R_COMPLETIONS ? SV_COMPLETION : SV_CHAT;
    if (ex->route == R_RESPONSES ? sv_responses_parse(srv, body, ex->len, &r, &e)
                                 : sv_request_parse(srv, kind, body, ex->len, &r, &e))
        return queue_error(conn, ex, &e);
    if (sv_engine_submit(srv, r, &e)) {
        sv_request_free(r);
        return queue_error(conn, ex, &e);
    }
    /* Two references now: this side's (from sv_request_parse) and the engine's. */
    if (r->stream) {
        struct MHD_Response *resp = sv_stream_response(srv, conn, r);
        if (!resp)
            return fail(conn, ex, 500, "server_error", "%s", "out of memory");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        add_cors(resp, ex);
        ex->status = 200;
        MHD_Result_t ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    int fd = sv_connection_fd(conn);
    sv_engine_lock(srv);
    while (!sv_request_done(r)) {
        sv_engine_wait(srv, r, 0.1);
        if (!sv_request_done(r) && sv_client_gone(fd)) {
            r->cancelled = 1;
            sv_engine_unlock(srv);
            sv_engine_cancel(srv, r);
            sv_engine_release(srv, r);
            ex->status = 499; /* nginx's "client closed request", for metrics */
            return MHD_NO;
        }
    }
    sv_engine_unlock(srv);
    MHD_Result_t ret;
    const char *error = sv_request_error(r);
    if (error) {
        sv_set_error(&e, 500, "server_error", NULL, "%s", error);
        ret = queue_error(conn, ex, &e);
    } else {
        ret = queue_json(conn, ex, 200, r->responses ? sv_responses_json(srv, r) : sv_response_json(srv, r));
    }
    sv_engine_release(srv, r);
    return ret;
}

/* /v1/models' one model object. */
static json_t *model_object(sv_server *srv)
{
    json_t *model = json_pack("{s:s, s:s, s:I, s:s}", "id", srv->cfg.model_name, "object", "model", "created",
                              (json_int_t)srv->created, "owned_by", "detinfer");
    json_t *d = json_object();
    json_object_set_new(d, "fingerprint", sv_fingerprint_object(srv));
    json_object_set_new(d, "system_fingerprint", json_string(srv->system_fingerprint));
    json_object_set_new(d, "context", json_integer(srv->context));
    json_object_set_new(d, "n_vocab", json_integer(srv->n_vocab));
    int32_t bos;
    json_object_set_new(d, "bos_token",
                        di_model_special_token(srv->model, DI_TOKEN_BOS, &bos) == DI_OK ? json_integer(bos)
                                                                                        : json_null());
    json_object_set_new(d, "max_tokens", json_integer(srv->cfg.max_tokens));
    json_object_set_new(d, "max_tokens_default", json_integer(srv->cfg.max_tokens_default));
    json_object_set_new(d, "max_n", json_integer(srv->cfg.max_n));
    json_object_set_new(d, "max_prompts", json_integer(srv->cfg.max_prompts));
    /* what a request that names none gets: greedy, where OpenAI's temperature is 1 */
    json_object_set_new(d, "defaults", json_pack("{s:f, s:f, s:I}", "temperature", 0.0, "top_p", 1.0, "seed", 0));
    json_object_set_new(d, "chat_template", srv->chat_template ? json_string(srv->chat_template) : json_null());
    json_object_set_new(d, "sampling", json_boolean(srv->sampling_available));
    json_object_set_new(model, "detinfer", d);
    return model;
}

static MHD_Result_t handle_models(sv_server *srv, struct MHD_Connection *conn, exchange *ex, const char *url)
{
    if (ex->route == R_MODEL) {
        const char *id = url + strlen(routes[R_MODEL].path);
        if (strcmp(id, srv->cfg.model_name)) {
            sv_error e;
            sv_set_error(&e, 404, "invalid_request_error", "model", "The model '%.200s' does not exist (this server "
                         "serves '%.200s')", id, srv->cfg.model_name);
            return queue_error(conn, ex, &e);
        }
        return queue_json(conn, ex, 200, sv_json_dump(model_object(srv)));
    }
    return queue_json(conn, ex, 200,
                      sv_json_dump(json_pack("{s:s, s:[o]}", "object", "list", "data", model_object(srv))));
}

static MHD_Result_t handle_tokens(sv_server *srv, struct MHD_Connection *conn, exchange *ex)
{
    sv_error e;
    const char *body = ex->body ? ex->body : "";
    if (ex->route == R_TOKENIZER_INFO) /* a GET: nothing to parse */
        return queue_json(conn, ex, 200, sv_tokenizer_info_json(srv));
    char *out =
        ex->route == R_TOKENIZE ? sv_tokenize_json(srv, body, ex->len, &e) : sv_detokenize_json(srv, body, ex->len, &e);
    return out ? queue_json(conn, ex, 200, out) : queue_error(conn, ex, &e);
}

static MHD_Result_t handle_health(sv_server *srv, struct MHD_Connection *conn, exchange *ex)
{
    int queued = 0, running = 0;
    sv_engine_counts(srv, &queued, &running);
    const int draining = sv_draining(srv);
    json_t *root = json_pack("{s:s, s:i, s:i}", "status", draining ? "draining" : "ok", "queued", queued,
                             "running", running);
    char *body = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return queue_json(conn, ex, draining ? 503 : 200, body);
}

static MHD_Result_t handle_metrics(sv_server *srv, struct MHD_Connection *conn, exchange *ex)
{
    int queued = 0, running = 0;
    sv_engine_counts(srv, &queued, &running); /* before the metrics' lock: the engine takes its own */
    char *text = sv_metrics_text(srv, queued, running);
    if (!text)
        return fail(conn, ex, 500, "server_error", "%s", "out of memory");
    return queue_text(conn, ex, 200, "text/plain; version=0.0.4", text, NULL);
}

/* 1 when `item` (n bytes) is one of the comma-separated entries of list,
 * compared without regard to ASCII case. */
static int list_has(const char *list, const char *item, size_t n)
{
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncasecmp(p, item, n))
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* The host part of a Host header: "[::1]:8080" -> "::1", "a.b:80" -> "a.b". */
static void host_name(const char *host, const char **name, size_t *n)
{
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        *name = host + 1;
        *n = end ? (size_t)(end - host - 1) : strlen(host + 1);
        return;
    }
    const char *colon = strchr(host, ':');
    *name = host;
    *n = colon && !strchr(colon + 1, ':') ? (size_t)(colon - host) : strlen(host);
}

/* A POST body must say it is JSON: a form or text/plain POST is what a web
 * page can send across origins without asking (CSRF). */
static int json_content_type(const char *type)
{
    static const char want[] = "application/json";
    if (!type || strncasecmp(type, want, sizeof want - 1))
        return 0;
    const char next = type[sizeof want - 1];
    return next == '\0' || next == ';' || next == ' ' || next == '\t';
}

/* A CORS preflight (OPTIONS from an allowed origin) answered: 204. */
static MHD_Result_t queue_preflight(struct MHD_Connection *conn, exchange *ex)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    add_cors(resp, ex);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, routes[ex->route].method);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    ex->status = 204;
    MHD_Result_t ret = MHD_queue_response(conn, 204, resp);
    MHD_destroy_response(resp);
    return ret;
}

typedef struct header_count {
    const char *name;
    int n;
} header_count;

static MHD_Result_t count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind, (void)value;
    header_count *c = cls;
    c->n += !strcasecmp(key, c->name);
    return MHD_YES;
}

/* How many times the request has the header `name`. */
static int headers_named(struct MHD_Connection *conn, const char *name)
{
    header_count c = {name, 0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &c);
    return c.n;
}

/* What libmicrohttpd lets through and a proxy in front may read otherwise
 * (request smuggling): the HTTP version, the Host, and the body's framing,
 * each given once and unambiguous. libmicrohttpd reads the first of repeated
 * Content-Length headers and prefers chunked to Content-Length, so the rest
 * of a body could be read as another request; these are refused with the
 * connection closed. 1 when a response was queued. */
static int framing_checks(struct MHD_Connection *conn, exchange *ex, const char *version, MHD_Result_t *ret)
{
    const int v11 = !strcmp(version, MHD_HTTP_VERSION_1_1);
    ex->close = 1; /* every refusal here */
    if (!v11 && strcmp(version, MHD_HTTP_VERSION_1_0)) {
        *ret = fail(conn, ex, 505, "invalid_request_error", "HTTP version %.16s is not supported (HTTP/1.1 or 1.0)",
                    version);
        return 1;
    }
    const int hosts = headers_named(conn, MHD_HTTP_HEADER_HOST);
    if (hosts > 1 || (v11 && !hosts)) {
        *ret = fail(conn, ex, 400, "invalid_request_error", "%s",
                    hosts ? "more than one Host header" : "an HTTP/1.1 request needs a Host header");
        return 1;
    }
    const int lengths = headers_named(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const int codings = headers_named(conn, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *why = NULL;
    if (lengths > 1)
        why = "more than one Content-Length header";
    else if (codings > 1)
        why = "more than one Transfer-Encoding header";
    else if (lengths && codings)
        why = "both Content-Length and Transfer-Encoding";
    else if (te && strcasecmp(te, "chunked"))
        why = "a Transfer-Encoding other than chunked";
    if (why) {
        *ret = fail(conn, ex, 400, "invalid_request_error", "the request's framing is ambiguous: %s", why);
        return 1;
    }
    ex->close = 0;
    return 0;
}

/* The first call of a request: every check that needs no body. Returns 1
 * when it queued a response. */
static int first_checks(sv_server *srv, struct MHD_Connection *conn, exchange *ex, const char *method,
                        const char *version, MHD_Result_t *ret)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !sv_allow_match(&srv->allow, ci->client_addr)) { /* the accept policy refused it already */
        *ret = fail(conn, ex, 403, "permission_error", "%s", "this client's address is not in the server's allowlist");
        return 1;
    }
    if (framing_checks(conn, ex, version, ret))
        return 1;
    if (srv->cfg.max_connections_per_ip > 0 && sv_conns_rank(srv->conns, conn) > srv->cfg.max_connections_per_ip) {
        sv_error e; /* answered, then closed: the network's other connections keep their places */
        sv_set_error(&e, 429, "rate_limit_error", NULL,
                     "this client's network holds more than %ld connections (--max-connections-per-ip)",
                     srv->cfg.max_connections_per_ip);
        ex->close = 1;
        *ret = queue_error(conn, ex, &e);
        return 1;
    }
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (host && srv->allowed_hosts) { /* a DNS-rebound page names its own host */
        const char *name;
        size_t n;
        host_name(host, &name, &n);
        if (!list_has(srv->allowed_hosts, name, n)) {
            *ret = fail(conn, ex, 421, "invalid_request_error", "%s",
                        "this Host is not one the server answers for (--allowed-hosts)");
            return 1;
        }
    }
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
    if (origin) { /* a browser's request: only from the origins --cors-origin names */
        if (!srv->cfg.cors_origins || !list_has(srv->cfg.cors_origins, origin, strlen(origin))) {
            *ret = fail(conn, ex, 403, "permission_error", "%s",
                        "requests from web pages are refused unless their origin is in --cors-origin");
            return 1;
        }
        ex->origin = origin;
    }
    if (ex->route == R_NONE) {
        *ret = fail(conn, ex, 404, "invalid_request_error", "%s", "no such endpoint");
        return 1;
    }
    if (!strcmp(method, "OPTIONS") && ex->origin) {
        *ret = queue_preflight(conn, ex);
        return 1;
    }
    if (strcmp(method, routes[ex->route].method)) {
        *ret = fail(conn, ex, 405, "invalid_request_error", "this endpoint takes %s", routes[ex->route].method);
        return 1;
    }
    if (routes[ex->route].needs_key && !key_ok(srv, conn)) {
        *ret = fail(conn, ex, 401, "authentication_error", "%s",
                    "a valid API key is required (Authorization: Bearer KEY)");
        return 1;
    }
    if (sv_draining(srv) && (ex->route == R_COMPLETIONS || ex->route == R_CHAT || ex->route == R_RESPONSES)) {
        sv_error e;
        sv_set_error(&e, 503, "server_error", NULL, "the server is shutting down");
        *ret = queue_error(conn, ex, &e);
        return 1;
    }
    if (!strcmp(method, "POST") &&
        !json_content_type(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        *ret = fail(conn, ex, 415, "invalid_request_error", "%s",
                    "the body must be JSON (Content-Type: application/json)");
        return 1;
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)srv->cfg.max_body) {
        *ret = too_big(srv, conn, ex);
        return 1;
    }
    return 0;
}

static MHD_Result_t on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    sv_server *srv = cls;
    exchange *ex = *con_cls;
    if (!ex) {
        ex = calloc(1, sizeof *ex);
        if (!ex)
            return MHD_NO;
        *con_cls = ex;
        __atomic_add_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
        ex->route = find_route(url);
        MHD_Result_t ret;
        if (first_checks(srv, conn, ex, method, version, &ret))
            return ret;
        return MHD_YES;
    }
    if (ex->status) { /* answered already (a body past the limit): the rest is not read */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (ex->len + n > (size_t)srv->cfg.max_body) /* a chunked body: answered as soon as it passes the limit */
            return too_big_now(srv, conn, ex);
        if (ex->len + n + 1 > ex->cap) {
            size_t cap = (ex->len + n + 1) * 2; /* doubling, up to the largest body and its NUL */
            if (cap > (size_t)srv->cfg.max_body + 1)
                cap = (size_t)srv->cfg.max_body + 1;
            char *p = realloc(ex->body, cap);
            if (!p)
                return MHD_NO;
            ex->body = p;
            ex->cap = cap;
        }
        memcpy(ex->body + ex->len, upload, n);
        ex->len += n;
        ex->body[ex->len] = '\0';
        return MHD_YES;
    }
    sv_conns_received(srv->conns, conn); /* the request is in: its deadline is met */
    switch (ex->route) {
    case R_COMPLETIONS:
    case R_CHAT:
    case R_RESPONSES: return handle_generation(srv, conn, ex);
    case R_MODELS:
    case R_MODEL: return handle_models(srv, conn, ex, url);
    case R_TOKENIZE:
    case R_DETOKENIZE:
    case R_TOKENIZER_INFO: return handle_tokens(srv, conn, ex);
    case R_HEALTH: return handle_health(srv, conn, ex);
    case R_METRICS: return handle_metrics(srv, conn, ex);
    default: return MHD_NO;
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode why)
{
    sv_server *srv = cls;
    exchange *ex = *con_cls;
    if (!ex)
        return;
    /* A response cut short (the client went away mid-stream, a timeout)
     * counts as 499, nginx's "client closed request" (a 413 written by
     * too_big_now ends its connection too, and counts as 413). */
    int status = ex->status && (why == MHD_REQUEST_TERMINATED_COMPLETED_OK || ex->status == 413) ? ex->status : 499;
    sv_metrics_request(srv, routes[ex->route].path, status);
    sv_conns_answered(srv->conns, conn); /* the next request on this connection has its own deadline */
    free(ex->body);
    free(ex);
    *con_cls = NULL;
    __atomic_sub_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
}

int sv_http_in_flight(void) { return __atomic_load_n(&in_flight, __ATOMIC_SEQ_CST); }

/* Before a connection is taken, from its address alone: the allowlist, and
 * the connection cap and the share of its network, where a connection still
 * receiving its request may be shut to make room (sv_conns_admit). A
 * refused client gets no byte (docs/SERVING.md, "Security"); a connection
 * past its network's share is answered 429 once its request's headers are
 * in (first_checks). */
static MHD_Result_t accept_policy(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)len;
    sv_server *srv = cls;
    if (!sv_allow_match(&srv->allow, addr) ||
        !sv_conns_admit(srv->conns, addr, (int)srv->connection_cap, (int)srv->cfg.max_connections_per_ip))
        return MHD_NO;
    return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)socket_context;
    sv_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const int fd = sv_connection_fd(conn);
        if (srv->test_sndbuf > 0 && fd >= 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &srv->test_sndbuf, sizeof srv->test_sndbuf);
        sv_conns_opened(srv->conns, conn, fd, ci ? ci->client_addr : NULL);
    } else {
        sv_conns_closed(srv->conns, conn);
    }
}

struct MHD_Daemon *sv_http_start(sv_server *srv, char *err, size_t err_size)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%ld", srv->cfg.port);
    int gai = getaddrinfo(srv->cfg.host, port, &hints, &ai);
    if (gai) {
        snprintf(err, err_size, "--host %s: %s (give a numeric IPv4 or IPv6 address)", srv->cfg.host,
                 gai_strerror(gai));
        return NULL;
    }
    srv->connection_cap = srv->cfg.max_sequences + srv->cfg.queue + 16;
    /* TEST ONLY: a small send buffer, so that a test's client that stops
     * reading a stream blocks the server's writes within a few chunks. */
    const char *sndbuf = getenv("DETINFER_TEST_SNDBUF");
    if (sndbuf && *sndbuf) {
        const long v = strtol(sndbuf, NULL, 10);
        srv->test_sndbuf = v > 0 && v <= (1 << 20) ? (int)v : 0;
        fprintf(stderr, "detinfer serve: TEST ONLY: DETINFER_TEST_SNDBUF=%d bytes per connection\n", srv->test_sndbuf);
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) /* "::" listens for IPv4 clients too (as ::ffff:a.b.c.d) */
        flags |= IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr) ? MHD_USE_DUAL_STACK
                                                                                          : MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)srv->cfg.port, accept_policy, srv, on_request, srv, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg.timeout,
        /* the accept policy holds the cap; connections it shut may still be closing */
        MHD_OPTION_CONNECTION_LIMIT, 2 * (unsigned)srv->connection_cap + 1,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d)
        snprintf(err, err_size, "cannot listen on %s port %ld (in use, or not an address of this machine?)",
                 srv->cfg.host, srv->cfg.port);
    return d;
}
