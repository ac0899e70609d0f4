/*
 * serve_engine.c — the engine thread: one di_session with --max-sequences
 * slots, stepped continuously. Each step holds every running request: a
 * prompt chunk of at most --chunk tokens for requests still reading their
 * prompt, one token for those generating. The library makes each
 * sequence's logits independent of the rest of the step, so a request gets
 * exactly the tokens and digests it would get alone (tests/serve proves it).
 *
 * A new request starts from the longest prefix of its prompt that a slot
 * already holds (another request's, running or finished): di_session_seq_copy
 * (or truncate, for the slot's own leftovers) instead of recomputing it. The
 * library makes the copy's logits equal to a fresh computation's.
 *
 * One mutex guards the queue, the slots and every request's progress; the
 * session itself is used by this thread only. HTTP threads wait on each
 * request's condition variable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

struct sv_engine {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a request arrived, was cancelled, or stop */
    pthread_t thread;
    int thread_started;
    di_session *session;
    uint32_t n_slots;
    sv_request **slots;
    int32_t **held;      /* per slot: the tokens whose KV cache it holds */
    uint32_t *n_held;
    sv_request **queue; /* ring of cap entries */
    int q_head, q_len, q_cap;
    int stop;
    long step_delay_ms; /* TEST ONLY: DETINFER_TEST_STEP_DELAY_MS */
    /* One step's entries. */
    uint32_t *seq_ids, *n_tokens;
    int32_t *tokens;
    sv_request **stepped;
};

static void release_locked(sv_request *r)
{
    if (--r->refs == 0) {
        pthread_cond_destroy(&r->changed);
        sv_request_free(r);
    }
}

/* Marks r done, frees its slot and drops the engine's reference. */
static void finish_locked(sv_engine *g, sv_request *r)
{
    r->state = SV_DONE;
    g->slots[r->slot] = NULL;
    pthread_cond_broadcast(&r->changed);
    release_locked(r);
}

static void fail_locked(sv_engine *g, sv_request *r, const char *what, di_status st, const char *detail)
{
    snprintf(r->error, sizeof r->error, "%s: %s: %s", what, di_status_name(st), detail);
    /* A failed step leaves the sequence undefined: it is reset when the slot
     * is next taken. */
    finish_locked(g, r);
}

/* Detokenizes the generated tokens and looks for the stop strings; sets
 * text_visible to what may be sent: everything up to a stop string, or,
 * while running, all but the bytes that could still begin one. Returns 1
 * when a stop string was found. */
static int update_text_locked(sv_server *s, sv_request *r)
{
    size_t all = 0; /* lengths, not strlen: a token may decode to a NUL byte */
    char *text = dt_detokenize(s->model, r->out, r->n_out, &all);
    if (!text) {
        text = strdup("");
        all = 0;
    }
    if (!text)
        return 0;
    free(r->text);
    r->text = text;
    r->text_len = all;
    size_t len = all;
    for (size_t i = 0; i < r->n_stops; i++) {
        const char *hit = memmem(text, all, r->stops[i], strlen(r->stops[i]));
        if (hit && (size_t)(hit - text) < len)
            len = (size_t)(hit - text);
    }
    if (len < all) {
        r->text_visible = len;
        return 1;
    }
    size_t hold = r->max_stop_len ? r->max_stop_len - 1 : 0;
    size_t visible = len > hold ? len - hold : 0;
    r->text_visible = sv_utf8_complete_prefix(text, visible);
    return 0;
}

/* End of sequence, or, in a chat, the end of the assistant's turn. */
static int is_end_token(const sv_server *s, const sv_request *r, int32_t token)
{
    return (s->eos >= 0 && token == s->eos) || (r->kind == SV_CHAT && s->eot >= 0 && token == s->eot);
}

/* After a step that ended r's prompt or fed its last token: choose the next
 * token, record it, and finish r when it is done. */
static void advance_locked(sv_server *s, sv_engine *g, sv_request *r)
{
    uint32_t seq = r->slot;
    const float *logits;
    di_digest digest;
    int32_t token;
    di_status st = di_session_logits(g->session, seq, &logits, &digest);
    if (!st)
        st = r->sampled ? di_session_sample_token(g->session, seq, &token)
                        : di_session_greedy_token(g->session, seq, &token);
    /* the chosen token's log-probability in the model's raw distribution,
     * whatever chose it (greedy or sampled) */
    if (!st && r->logprobs) {
        const size_t at = (size_t)r->n_out * r->n_top;
        st = di_session_logprobs(g->session, seq, token, &r->token_logprob[r->n_out], r->n_top,
                                 r->n_top ? &r->top_tokens[at] : NULL, r->n_top ? &r->top_logprobs[at] : NULL);
        r->text_offset[r->n_out] = r->text ? r->text_len : 0;
    }
    if (st) {
        fail_locked(g, r, "choosing a token", st, di_session_errmsg(g->session));
        return;
    }
    if (r->n_out == 0)
        r->t_first_token = dt_now();
    r->digests[r->n_out] = digest;
    r->out[r->n_out++] = token;
    int stopped = update_text_locked(s, r);
    const char *finish = stopped || is_end_token(s, r, token) ? "stop" : r->n_out == r->max_tokens ? "length" : NULL;
    if (finish) {
        /* The last token was chosen but never stepped. */
        st = di_session_seq_digest_extra(g->session, seq, &r->out[r->n_out - 1], 1, &r->sequence);
        if (st) {
            fail_locked(g, r, "sequence digest", st, di_session_errmsg(g->session));
            return;
        }
        if (!stopped)
            r->text_visible = r->text_len;
        if (r->logprobs)
            r->visible_after[r->n_out - 1] = r->text_visible;
        r->finish_reason = finish;
        sv_metrics_tokens(s, r->n_prompt, r->n_out);
        finish_locked(g, r);
        return;
    }
    if (r->logprobs)
        r->visible_after[r->n_out - 1] = r->text_visible;
    pthread_cond_broadcast(&r->changed);
}

static uint32_t common_prefix(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
    uint32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Gives r's slot the longest prefix of r's prompt held by any slot (at least
 * one prompt token is left to step, for the logits), or empties it. */
static di_status start_from_prefix(sv_server *s, sv_engine *g, sv_request *r)
{
    uint32_t slot = r->slot, best = 0, donor = slot;
    for (uint32_t i = 0; i < g->n_slots; i++) {
        uint32_t n = common_prefix(r->prompt, r->n_prompt - 1, g->held[i], g->n_held[i]);
        if (n > best || (n == best && i == slot)) {
            best = n;
            donor = i;
        }
    }
    di_status st;
    if (best == 0)
        st = di_session_seq_reset(g->session, slot);
    else if (donor == slot)
        st = di_session_seq_truncate(g->session, slot, best);
    else
        st = di_session_seq_copy(g->session, donor, slot, best);
    if (st) {
        g->n_held[slot] = 0;
        return st;
    }
    memcpy(g->held[slot], r->prompt, best * sizeof *r->prompt);
    g->n_held[slot] = best;
    r->n_fed = best;
    if (best)
        sv_metrics_prefix(s, best);
    return DI_OK;
}

static void admit_locked(sv_server *s, sv_engine *g)
{
    for (uint32_t slot = 0; slot < g->n_slots && g->q_len > 0; slot++) {
        if (g->slots[slot])
            continue;
        sv_request *r = g->queue[g->q_head];
        g->q_head = (g->q_head + 1) % g->q_cap;
        g->q_len--;
        if (r->cancelled) {
            r->state = SV_DONE;
            pthread_cond_broadcast(&r->changed);
            release_locked(r);
            slot--; /* try the slot again */
            continue;
        }
        r->slot = slot;
        r->state = SV_RUNNING;
        g->slots[slot] = r;
        di_status st = start_from_prefix(s, g, r);
        if (!st && s->sampling_available)
            st = di_session_seq_set_sampling(g->session, slot, r->sampled ? &r->params : NULL);
        if (st)
            fail_locked(g, r, "preparing the sequence", st, di_session_errmsg(g->session));
    }
}

static void *engine_main(void *arg)
{
    sv_server *s = arg;
    sv_engine *g = s->engine;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        for (uint32_t i = 0; i < g->n_slots; i++)
            if (g->slots[i] && g->slots[i]->cancelled)
                finish_locked(g, g->slots[i]);
        admit_locked(s, g);
        uint32_t n = 0, n_tok = 0;
        for (uint32_t i = 0; i < g->n_slots; i++) {
            sv_request *r = g->slots[i];
            if (!r)
                continue;
            uint32_t take;
            if (r->n_fed < r->n_prompt) {
                take = r->n_prompt - r->n_fed;
                if (take > (uint32_t)s->cfg.chunk)
                    take = (uint32_t)s->cfg.chunk;
                memcpy(&g->tokens[n_tok], &r->prompt[r->n_fed], take * sizeof *g->tokens);
            } else {
                take = 1;
                g->tokens[n_tok] = r->out[r->n_out - 1];
            }
            g->seq_ids[n] = i;
            g->n_tokens[n] = take;
            g->stepped[n] = r;
            n_tok += take;
            n++;
        }
        if (n == 0) {
            if (g->stop && g->q_len == 0)
                break;
            pthread_cond_wait(&g->work, &g->lock);
            continue;
        }
        pthread_mutex_unlock(&g->lock);
        double t0 = dt_now();
        di_status st = di_session_step(g->session, n, g->seq_ids, g->n_tokens, g->tokens, 0);
        double elapsed = dt_now() - t0;
        sv_metrics_step(s, n, n_tok, elapsed);
        if (g->step_delay_ms > 0) {
            struct timespec ts = {g->step_delay_ms / 1000, (g->step_delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&g->lock);
        uint32_t at = 0;
        for (uint32_t k = 0; k < n; k++) { /* what each slot's cache now holds */
            uint32_t slot = g->seq_ids[k];
            if (st)
                g->n_held[slot] = 0; /* undefined after a failed step */
            else if (g->n_held[slot] + g->n_tokens[k] <= (uint32_t)s->context) {
                memcpy(g->held[slot] + g->n_held[slot], &g->tokens[at], g->n_tokens[k] * sizeof *g->tokens);
                g->n_held[slot] += g->n_tokens[k];
            }
            at += g->n_tokens[k];
        }
        for (uint32_t k = 0; k < n; k++) {
            sv_request *r = g->stepped[k];
            if (st) {
                fail_locked(g, r, "step", st, di_session_errmsg(g->session));
                continue;
            }
            if (r->n_fed < r->n_prompt) {
                r->n_fed += g->n_tokens[k];
                if (r->n_fed < r->n_prompt)
                    continue; /* more prompt to read */
            }
            advance_locked(s, g, r);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int sv_engine_start(sv_server *s, char *err, size_t err_size)
{
    sv_engine *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    s->engine = g;
    g->n_slots = (uint32_t)s->cfg.max_sequences;
    /* TEST ONLY: a pause after every step, so the lifecycle tests (a client
     * leaving mid-stream, SIGTERM during load, a full queue) can act while
     * requests are in flight on a tiny model. Results do not change. */
    const char *delay = getenv("DETINFER_TEST_STEP_DELAY_MS");
    if (delay && *delay) {
        g->step_delay_ms = strtol(delay, NULL, 10);
        if (g->step_delay_ms < 0 || g->step_delay_ms > 10000)
            g->step_delay_ms = 0;
        fprintf(stderr, "detinfer serve: TEST ONLY: DETINFER_TEST_STEP_DELAY_MS=%ld pauses after every step\n",
                g->step_delay_ms);
    }
    g->q_cap = (int)s->cfg.queue;
    size_t max_tokens = (size_t)g->n_slots * (size_t)s->cfg.chunk;
    g->slots = calloc(g->n_slots, sizeof *g->slots);
    g->held = calloc(g->n_slots, sizeof *g->held);
    g->n_held = calloc(g->n_slots, sizeof *g->n_held);
    for (uint32_t i = 0; g->held && i < g->n_slots; i++)
        if (!(g->held[i] = calloc((size_t)s->context, sizeof **g->held))) {
            snprintf(err, err_size, "out of memory");
            return -1;
        }
    g->queue = calloc((size_t)g->q_cap, sizeof *g->queue);
    g->seq_ids = calloc(g->n_slots, sizeof *g->seq_ids);
    g->n_tokens = calloc(g->n_slots, sizeof *g->n_tokens);
    g->stepped = calloc(g->n_slots, sizeof *g->stepped);
    g->tokens = calloc(max_tokens, sizeof *g->tokens);
    if (!g->slots || !g->held || !g->n_held || !g->queue || !g->seq_ids || !g->n_tokens || !g->stepped || !g->tokens) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    dt_session_opts so = {.backend = s->cfg.backend, .profile = s->cfg.profile,
                          .threads = s->cfg.threads, .max_sequences = s->cfg.max_sequences,
                          .context_length = s->context, .device = s->cfg.device,
                          .cpu_path = s->cfg.cpu_path};
    char detail[512] = "";
    di_status st = dt_open_session(s->model, &so, &g->session, detail, sizeof detail);
    if (st) {
        snprintf(err, err_size, "creating the session: %s: %s", di_status_name(st), detail);
        return -1;
    }
    snprintf(s->backend_info, sizeof s->backend_info, "%s", di_session_backend_info(g->session));
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->work, NULL);
    if (pthread_create(&g->thread, NULL, engine_main, s)) {
        snprintf(err, err_size, "cannot start the engine thread");
        return -1;
    }
    g->thread_started = 1;
    return 0;
}

int sv_engine_submit(sv_server *s, sv_request *r, sv_error *e)
{
    sv_engine *g = s->engine;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->changed, &attr);
    pthread_condattr_destroy(&attr);
    r->t_queued = dt_now();
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    if (sv_draining(s) || g->stop) {
        sv_set_error(e, 503, "server_error", NULL, "the server is shutting down");
        rc = -1;
    } else if (g->q_len >= g->q_cap) {
        sv_set_error(e, 429, "rate_limit_error", NULL,
                     "the queue is full (%d requests waiting; --queue); retry later", g->q_len);
        rc = -1;
    } else {
        r->refs++;
        r->state = SV_QUEUED;
        g->queue[(g->q_head + g->q_len) % g->q_cap] = r;
        g->q_len++;
        pthread_cond_signal(&g->work);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void sv_engine_lock(sv_server *s) { pthread_mutex_lock(&s->engine->lock); }
void sv_engine_unlock(sv_server *s) { pthread_mutex_unlock(&s->engine->lock); }

void sv_engine_wait(sv_server *s, sv_request *r, double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)(seconds * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&r->changed, &s->engine->lock, &ts);
}

void sv_engine_cancel(sv_server *s, sv_request *r)
{
    sv_engine *g = s->engine;
    pthread_mutex_lock(&g->lock);
    if (r->state != SV_DONE) {
        r->cancelled = 1;
        pthread_cond_signal(&g->work);
    }
    pthread_mutex_unlock(&g->lock);
}

void sv_engine_release(sv_server *s, sv_request *r)
{
    pthread_mutex_lock(&s->engine->lock);
    release_locked(r);
    pthread_mutex_unlock(&s->engine->lock);
}

void sv_engine_counts(sv_server *s, int *queued, int *running)
{
    sv_engine *g = s->engine;
    pthread_mutex_lock(&g->lock);
    *queued = g->q_len;
    *running = 0;
    for (uint32_t i = 0; i < g->n_slots; i++)
        *running += g->slots[i] != NULL;
    pthread_mutex_unlock(&g->lock);
}

void sv_engine_stop(sv_server *s)
{
    sv_engine *g = s->engine;
    if (!g)
        return;
    if (g->thread_started) {
        pthread_mutex_lock(&g->lock);
        g->stop = 1;
        pthread_cond_signal(&g->work);
        pthread_mutex_unlock(&g->lock);
        pthread_join(g->thread, NULL);
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->work);
    }
    di_session_free(g->session);
    for (uint32_t i = 0; g->held && i < g->n_slots; i++)
        free(g->held[i]);
    free(g->held);
    free(g->n_held);
    free(g->slots);
    free(g->queue);
    free(g->seq_ids);
    free(g->n_tokens);
    free(g->stepped);
    free(g->tokens);
    free(g);
    s->engine = NULL;
}
