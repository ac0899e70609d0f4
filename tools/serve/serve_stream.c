/*
 * serve_stream.c — a streamed response: Server-Sent Events in OpenAI's chunk
 * shapes. A chat stream opens each choice with a chunk carrying the role;
 * then every generated token of every choice gets one chunk, with the text
 * that became visible when it was added (text held back while a stop string
 * may still begin comes later) and, with logprobs, its log-probabilities
 * (the token that ends a generation, EOS or the end of the turn, too: its
 * text is empty); a choice's last chunk has no text, finish_reason and its
 * detinfer object. The choices' chunks interleave, each with its index (a greedy
 * request's n equal choices are computed once, each chunk written n times).
 * With stream_options.include_usage a last chunk has no choices and the
 * usage; then "data: [DONE]". The chunks are the same however late the
 * stream reads them. A chat that may call tools sends no chunk per token:
 * its content as it may be sent, then its calls' chunks (tool_chunks).
 * A /v1/responses stream has its own events instead (serve_responses.c).
 */
#include <microhttpd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

typedef struct stream {
    sv_server *srv;
    sv_request *r;
    int fd;
    char *pending; /* SSE bytes not yet handed to MHD */
    size_t pending_len, pending_off;
    int opened;    /* the role chunks are out */
    size_t *text_sent;    /* per computed choice: bytes of its text sent */
    uint32_t *tokens_sent;/* per computed choice: tokens whose chunks went out */
    char *closed;         /* per computed choice: its finish chunk went out */
    int finished;  /* [DONE] queued */
    sv_responses_stream responses; /* /v1/responses: its events instead (serve_responses.c) */
} stream;

int sv_connection_fd(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

int sv_client_gone(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Appends "data: EVENT\n\n" (and frees event). */
static void stream_append(stream *st, char *event)
{
    if (!event)
        return;
    size_t n = strlen(event);
    char *p = realloc(st->pending, st->pending_len + n + 8);
    if (p) {
        st->pending = p;
        memcpy(p + st->pending_len, "data: ", 6);
        memcpy(p + st->pending_len + 6, event, n);
        memcpy(p + st->pending_len + 6 + n, "\n\n", 2);
        st->pending_len += n + 8;
    }
    free(event);
}

/* Appends SSE bytes as they are (and frees them). */
static void stream_append_raw(stream *st, char *bytes)
{
    if (!bytes)
        return;
    size_t n = strlen(bytes);
    char *p = realloc(st->pending, st->pending_len + n);
    if (p) {
        st->pending = p;
        memcpy(p + st->pending_len, bytes, n);
        st->pending_len += n;
    }
    free(bytes);
}

/* choice_chunks when tool calls may come (no logprobs then): a chunk only
 * when content may be sent (a call, or what may begin one, is held back);
 * at the finish the content left, each call's chunks (its id and name,
 * then its arguments), and the finish chunk. */
static void tool_chunks(stream *st, uint32_t k, uint32_t first, uint32_t i, int finish)
{
    sv_request *r = st->r;
    const sv_choice *c = &r->choices[k];
    const size_t upto = sv_tools_sendable(c, finish ? c->text_visible : c->visible_after[i]);
    const size_t from = st->text_sent[k];
    for (uint32_t j = first; j < first + (r->sampled ? 1 : r->n); j++) {
        if (upto > from)
            stream_append(st, sv_chunk_json(st->srv, r, j, c->text + from, upto - from, 0, 0, NULL, 0));
        for (size_t call = 0; finish && call < json_array_size(c->tool_calls); call++) {
            stream_append(st, sv_tool_call_chunk_json(st->srv, r, j, call, 0));
            stream_append(st, sv_tool_call_chunk_json(st->srv, r, j, call, 1));
        }
        if (finish)
            stream_append(st, sv_chunk_json(st->srv, r, j, "", 0, 0, 0, c->finish_reason, 0));
    }
    if (upto > st->text_sent[k])
        st->text_sent[k] = upto;
}

/* The chunks of computed choice k's token i (finish: its finish chunk
 * instead), for each response choice it stands for. */
static void choice_chunks(stream *st, uint32_t k, uint32_t i, int finish)
{
    sv_request *r = st->r;
    const sv_choice *c = &r->choices[k];
    /* computed choice k continues prompt k / per: response choices p x n + ... */
    const uint32_t per = sv_computed_per_prompt(r), first = (k / per) * r->n + (r->sampled ? k % per : 0);
    if (r->tool_mode != SV_TOOLS_OFF) {
        tool_chunks(st, k, first, i, finish);
        return;
    }
    const size_t upto = finish ? st->text_sent[k] : c->visible_after[i];
    const size_t from = st->text_sent[k] < upto ? st->text_sent[k] : upto;
    for (uint32_t j = first; j < first + (r->sampled ? 1 : r->n); j++)
        stream_append(st, sv_chunk_json(st->srv, r, j, c->text ? c->text + from : "", upto - from, finish ? 0 : i,
                                        finish ? 0 : i + 1, finish ? c->finish_reason : NULL, 0));
    if (upto > st->text_sent[k])
        st->text_sent[k] = upto;
}

/* Builds the next events from r's progress; 0 when nothing new yet. Called
 * with the engine lock held. */
static int stream_collect_locked(stream *st)
{
    sv_request *r = st->r;
    const size_t before = st->pending_len;
    if (r->responses) { /* the Responses API's events, and no [DONE] */
        stream_append_raw(st, sv_responses_events(st->srv, r, &st->responses));
        st->finished = sv_request_done(r);
        return st->pending_len > before || st->finished;
    }
    const char *error = sv_request_error(r);
    if (!st->opened && !error && r->kind == SV_CHAT)
        for (uint32_t j = 0; j < sv_response_choices(r); j++)
            stream_append(st, sv_chunk_json(st->srv, r, j, "", 0, 0, 0, NULL, 1));
    st->opened = 1;
    /* round by round, a token of each choice: the choices' chunks interleave */
    for (int more = !error; more;) {
        more = 0;
        for (uint32_t k = 0; k < r->n_computed; k++) {
            if (st->tokens_sent[k] < r->choices[k].n_out) {
                choice_chunks(st, k, st->tokens_sent[k]++, 0);
                more = 1;
            } else if (r->choices[k].state == SV_DONE && !st->closed[k]) {
                choice_chunks(st, k, 0, 1);
                st->closed[k] = 1;
            }
        }
    }
    if (sv_request_done(r)) {
        if (error) {
            sv_error e;
            sv_set_error(&e, 500, "server_error", NULL, "%s", error);
            stream_append(st, sv_error_json(&e));
        } else if (r->include_usage) {
            stream_append(st, sv_usage_chunk_json(st->srv, r));
        }
        char *p = realloc(st->pending, st->pending_len + 16);
        if (p) {
            st->pending = p;
            memcpy(st->pending + st->pending_len, "data: [DONE]\n\n", 14);
            st->pending_len += 14;
        }
        st->finished = 1;
    }
    return st->pending_len > before || st->finished;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    stream *st = cls;
    while (st->pending_off == st->pending_len) {
        if (st->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        st->pending_len = st->pending_off = 0;
        sv_engine_lock(st->srv);
        while (!stream_collect_locked(st)) {
            sv_engine_wait(st->srv, st->r, 0.1);
            if (!sv_request_done(st->r) && sv_client_gone(st->fd)) {
                sv_engine_unlock(st->srv);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        sv_engine_unlock(st->srv);
        if (!st->pending)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->pending_len - st->pending_off;
    if (n > max)
        n = max;
    memcpy(out, st->pending + st->pending_off, n);
    st->pending_off += n;
    return (ssize_t)n;
}

/* The response is over (sent, or the client went away): the engine frees
 * the sequences still running. */
static void stream_free(void *cls)
{
    stream *st = cls;
    sv_engine_cancel(st->srv, st->r);
    sv_engine_release(st->srv, st->r);
    free(st->pending);
    free(st->text_sent);
    free(st->tokens_sent);
    free(st->closed);
    free(st);
}

struct MHD_Response *sv_stream_response(sv_server *srv, struct MHD_Connection *conn, sv_request *r)
{
    stream *st = calloc(1, sizeof *st);
    if (st) {
        st->text_sent = calloc(r->n_computed, sizeof *st->text_sent);
        st->tokens_sent = calloc(r->n_computed, sizeof *st->tokens_sent);
        st->closed = calloc(r->n_computed, 1);
    }
    if (!st || !st->text_sent || !st->tokens_sent || !st->closed) {
        if (st) {
            free(st->text_sent);
            free(st->tokens_sent);
            free(st->closed);
            free(st);
        }
        sv_engine_cancel(srv, r);
        sv_engine_release(srv, r);
        return NULL;
    }
    st->srv = srv, st->r = r, st->fd = sv_connection_fd(conn);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!resp)
        stream_free(st);
    return resp;
}
