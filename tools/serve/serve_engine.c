/*
 * serve_engine.c — the engine thread: one di_session with --max-sequences
 * slots, stepped continuously. Each step holds every running request: a
 * prompt chunk of at most --chunk tokens for requests still reading their
 * prompt, one token for those generating. The library makes each
 * sequence's logits independent of the rest of the step, so a request gets
 * exactly the tokens and digests it would get alone (tests/serve proves it).
 *
 * Each computed choice of a request runs in a slot of its own. Idle slots
 * keep their caches: a choice takes the idle slot whose whole cache is the
 * longest prefix of its prompt (nothing is lost when it is overwritten),
 * else the least recently used idle slot, and starts from the longest prefix
 * of its prompt that any slot holds (another request's, running or
 * finished): di_session_seq_copy (or truncate, for the slot's own) instead
 * of recomputing it. The library makes the copy's logits equal to a fresh
 * computation's. A request's later choices are given slots once its first
 * has read the prompt, so they copy it.
 *
 * One mutex guards the queue, the slots and every request's progress; the
 * session itself is used by this thread only. HTTP threads wait on each
 * request's condition variable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/serve.h"

/* --speculate: a step's tokens in all that drafts may bring it to, and the
 * longest key of the prompt lookup (docs/SERVING.md, "Speculation"). With
 * --speculate FILE the drafts come from a draft model's drafter instead: it
 * shadows each slot with a sequence of its own session, which keeps what it
 * shares with the slot's tokens and steps the rest at each proposal, so a
 * slot reset, truncated, copied or given to another request needs no call
 * (di_drafter_propose). */
#define SV_DRAFT_STEP_TOKENS 16
#define SV_DRAFT_NGRAM DI_DRAFT_NGRAM_DEFAULT

struct sv_engine {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a request arrived, was cancelled, or stop */
    pthread_t thread;
    int thread_started;
    di_session *session;
    di_model *draft;     /* --speculate FILE */
    di_drafter *drafter; /* its drafts; used by this thread only, outside the lock */
    int drafter_failed;  /* a proposal failed (said once; that step drafts nothing) */
    uint32_t n_slots;
    sv_choice **slots;
    int32_t **held;      /* per slot: the tokens whose KV cache it holds */
    uint32_t *n_held;
    uint64_t *last_use;  /* per slot: when it was last taken or freed (use_clock) */
    uint64_t use_clock;
    sv_request **queue; /* ring of cap entries; a request leaves it when its last choice has a slot */
    int q_head, q_len, q_cap;
    int stop;
    long step_delay_ms; /* TEST ONLY: DETINFER_TEST_STEP_DELAY_MS */
    int score_turn;     /* prompts to score and others both wait: whose prompt chunks step next */
    /* One step's entries. */
    uint32_t *seq_ids, *n_tokens;
    int32_t *tokens;
    sv_choice **stepped;
    uint32_t *draft_room; /* --speculate FILE: per entry, the draft tokens it may take (tokens reserves them) */
};

static void release_locked(sv_request *r)
{
    if (--r->refs == 0) {
        pthread_cond_destroy(&r->changed);
        sv_request_free(r);
    }
}

/* Marks choice c done, frees its slot, and drops the engine's reference to
 * its request once every choice is done. */
static void finish_locked(sv_engine *g, sv_choice *c)
{
    sv_request *r = c->req;
    if (!c->error[0])
        sv_tools_finish(c); /* tool calls: finish_reason "tool_calls" */
    if (c->state == SV_RUNNING) {
        g->slots[c->slot] = NULL;
        g->last_use[c->slot] = ++g->use_clock;
        /* the idle slot keeps its cache, not the grammar: the session then
         * keeps only the few most recent grammars no request uses */
        if (r->grammar)
            di_session_seq_set_grammar(g->session, c->slot, NULL, NULL, 0);
    }
    c->state = SV_DONE;
    pthread_cond_broadcast(&r->changed);
    if (sv_request_done(r))
        release_locked(r);
}

static void fail_locked(sv_engine *g, sv_choice *c, const char *what, di_status st, const char *detail)
{
    snprintf(c->error, sizeof c->error, "%s: %s: %s", what, di_status_name(st), detail);
    /* A failed step leaves the sequence undefined: it is reset when the slot
     * is next taken. */
    finish_locked(g, c);
}

/* Detokenizes the generated tokens and looks for the stop strings; sets
 * text_visible to what may be sent: everything up to a stop string, or,
 * while running, all but the bytes that could still begin one. Returns 1
 * when a stop string was found. */
static int update_text_locked(sv_server *srv, const sv_request *r, sv_choice *c)
{
    size_t all = 0; /* lengths, not strlen: a token may decode to a NUL byte */
    char *text = cli_detokenize(srv->model, c->out, c->n_out, &all);
    if (!text) {
        text = strdup("");
        all = 0;
    }
    if (!text)
        return 0;
    free(c->text);
    c->text = text;
    c->text_len = all;
    size_t len = all;
    for (size_t i = 0; i < r->n_stops; i++) {
        const char *hit = memmem(text, all, r->stops[i], strlen(r->stops[i]));
        if (hit && (size_t)(hit - text) < len)
            len = (size_t)(hit - text);
    }
    if (len < all) {
        c->text_visible = len;
        return 1;
    }
    size_t hold = r->max_stop_len ? r->max_stop_len - 1 : 0;
    size_t visible = len > hold ? len - hold : 0;
    c->text_visible = sv_utf8_complete_prefix(text, visible);
    return 0;
}

/* End of sequence, or, in a chat, the end of the assistant's turn. */
static int is_end_token(const sv_server *srv, const sv_request *r, int32_t token)
{
    return (srv->eos >= 0 && token == srv->eos) || (r->kind == SV_CHAT && srv->eot >= 0 && token == srv->eot);
}

/* The first computed choice of its prompt (the one whose prompt tokens the
 * usage metrics count, and which scores the prompt). */
static int first_of_prompt(const sv_choice *c)
{
    const sv_request *r = c->req;
    return c->index % sv_computed_per_prompt(r) == 0;
}

/* max_tokens 0 (echo): the prompt is scored and in; nothing is generated. */
static void finish_prompt_only_locked(sv_server *srv, sv_engine *g, sv_choice *c)
{
    di_status st = di_session_seq_digest(g->session, c->slot, &c->sequence);
    if (st) {
        fail_locked(g, c, "sequence digest", st, di_session_errmsg(g->session));
        return;
    }
    c->finish_reason = "length";
    sv_metrics_tokens(srv, first_of_prompt(c) ? c->prompt->n : 0, 0);
    finish_locked(g, c);
}

/* After an all-logits step that fed c's prompt tokens [from, from + count):
 * the log-probability of each prompt token after them, given those before. */
static di_status score_prompt_locked(sv_engine *g, sv_choice *c, uint32_t from, uint32_t count)
{
    const sv_request *r = c->req;
    sv_prompt *p = c->prompt;
    for (uint32_t k = 0; k < count && from + k + 1 < p->n; k++) {
        const uint32_t t = from + k + 1; /* the token position k's logits predict */
        const size_t at = (size_t)t * r->n_top;
        di_status st = di_session_logprobs_at(g->session, c->slot, k, p->ids[t], &p->token_logprob[t], r->n_top,
                                              r->n_top ? &p->top_tokens[at] : NULL,
                                              r->n_top ? &p->top_logprobs[at] : NULL);
        if (st)
            return st;
    }
    return DI_OK;
}

/* The grammar's text is complete and nothing may follow, but the model has
 * no end token to choose: c finishes ("stop") with the tokens it has, all
 * of them stepped. */
static void finish_complete_locked(sv_server *srv, sv_engine *g, sv_choice *c)
{
    di_status st = di_session_seq_digest_extra(g->session, c->slot, NULL, 0, &c->sequence);
    if (st) {
        fail_locked(g, c, "sequence digest", st, di_session_errmsg(g->session));
        return;
    }
    c->text_visible = c->text_len;
    if (c->n_out > 0)
        c->visible_after[c->n_out - 1] = c->text_visible;
    c->finish_reason = "stop";
    sv_metrics_tokens(srv, first_of_prompt(c) ? c->prompt->n : 0, c->n_out);
    finish_locked(g, c);
}

/* The prompt is in: c's grammar starts here (its end tokens: the model's
 * end of sequence, which the library adds, and a chat's end of turn). */
static di_status start_grammar(const sv_server *srv, sv_engine *g, sv_choice *c)
{
    const sv_request *r = c->req;
    const int turn = r->kind == SV_CHAT && srv->eot >= 0;
    return di_session_seq_set_grammar(g->session, c->slot, sv_grammar_handle(r->grammar), turn ? &srv->eot : NULL,
                                      turn ? 1 : 0);
}

/* After a step that ended c's prompt or fed its last token: choose the next
 * token, record it, and finish c when it is done. The token that ends the
 * generation (EOS, the end of the turn) counts as a generated token:
 * completion_token_ids, usage, the sequence digest and the stream's chunks
 * (one per token) all hold it. */
static int record_locked(sv_server *srv, sv_engine *g, sv_choice *c, int32_t token, const di_digest *digest,
                         int row);

static void advance_locked(sv_server *srv, sv_engine *g, sv_choice *c)
{
    sv_request *r = c->req;
    uint32_t seq = c->slot;
    const float *logits;
    di_digest digest;
    int32_t token;
    uint32_t flags = 0;
    di_status st = r->grammar ? di_session_seq_grammar_state(g->session, seq, &flags) : DI_OK;
    if (!st && (flags & DI_GRAMMAR_MUST_END) && srv->eos < 0 && !(r->kind == SV_CHAT && srv->eot >= 0)) {
        finish_complete_locked(srv, g, c);
        return;
    }
    if (!st)
        st = di_session_logits(g->session, seq, &logits, &digest);
    if (!st)
        st = r->sampled ? di_session_sample_token(g->session, seq, &token)
                        : di_session_greedy_token(g->session, seq, &token);
    if (st) {
        fail_locked(g, c, "choosing a token", st, di_session_errmsg(g->session));
        return;
    }
    record_locked(srv, g, c, token, &digest, -1);
}

/* Records c's next generated token, chosen from the logits with `digest`:
 * those of the sequence's last position (row < 0), or row `row` of its entry
 * in the last step (an accepted draft token, before the sequence's last
 * position). Finishes c when it is done; 1 when it did (or failed). */
static int record_locked(sv_server *srv, sv_engine *g, sv_choice *c, int32_t token, const di_digest *digest,
                         int row)
{
    sv_request *r = c->req;
    const uint32_t seq = c->slot;
    di_status st = DI_OK;
    /* the chosen token's log-probability in the model's raw distribution,
     * whatever chose it (greedy or sampled) */
    if (r->logprobs) {
        const size_t at = (size_t)c->n_out * r->n_top;
        int32_t *top = r->n_top ? &c->top_tokens[at] : NULL;
        float *top_lp = r->n_top ? &c->top_logprobs[at] : NULL;
        st = row < 0 ? di_session_logprobs(g->session, seq, token, &c->token_logprob[c->n_out], r->n_top, top, top_lp)
                     : di_session_logprobs_at(g->session, seq, (uint32_t)row, token, &c->token_logprob[c->n_out],
                                              r->n_top, top, top_lp);
        c->text_offset[c->n_out] = c->text ? c->text_len : 0;
    }
    if (st) {
        fail_locked(g, c, "choosing a token", st, di_session_errmsg(g->session));
        return 1;
    }
    if (c->n_out == 0)
        c->t_first_token = cli_now();
    c->digests[c->n_out] = *digest;
    c->out[c->n_out++] = token;
    int stopped = update_text_locked(srv, r, c);
    const char *finish = stopped || is_end_token(srv, r, token) ? "stop" : c->n_out == r->max_tokens ? "length" : NULL;
    if (finish) {
        /* The last token was chosen but never stepped: a draft token the
         * sequence holds, and those after it, are cut first. */
        if (row >= 0)
            st = di_session_seq_truncate(g->session, seq, c->prompt->n + c->n_out - 1);
        if (!st)
            st = di_session_seq_digest_extra(g->session, seq, &c->out[c->n_out - 1], 1, &c->sequence);
        if (st) {
            fail_locked(g, c, "sequence digest", st, di_session_errmsg(g->session));
            return 1;
        }
        if (!stopped)
            c->text_visible = c->text_len;
        c->visible_after[c->n_out - 1] = c->text_visible;
        c->finish_reason = finish;
        sv_metrics_tokens(srv, first_of_prompt(c) ? c->prompt->n : 0, c->n_out);
        finish_locked(g, c);
        return 1;
    }
    c->visible_after[c->n_out - 1] = c->text_visible;
    pthread_cond_broadcast(&r->changed);
    return 0;
}

/* After an all-logits step that fed c its last token and a draft of
 * c->n_draft tokens: di_session_seq_accept_draft, then each accepted draft
 * token and the token chosen after them recorded as decoding one token per
 * step would have (docs/DETERMINISM.md, "Speculative decoding"). */
static void resolve_draft_locked(sv_server *srv, sv_engine *g, sv_choice *c, const int32_t *draft)
{
    const uint32_t seq = c->slot, n_draft = c->n_draft;
    c->n_draft = 0;
    uint32_t accepted = 0;
    int32_t next = -1;
    di_status st = di_session_seq_accept_draft(g->session, seq, n_draft, &accepted, &next);
    if (st && st != DI_ERR_GRAMMAR_REJECTED) {
        fail_locked(g, c, "resolving a draft", st, di_session_errmsg(g->session));
        return;
    }
    c->drafted += n_draft;
    c->accepted += accepted;
    for (uint32_t i = 0; i <= accepted; i++) {
        di_digest digest;
        di_status dst = di_session_logits_at(g->session, seq, i, &(const float *){NULL}, &digest);
        if (dst) {
            fail_locked(g, c, "resolving a draft", dst, di_session_errmsg(g->session));
            return;
        }
        if (i == accepted && st == DI_ERR_GRAMMAR_REJECTED) { /* complete: nothing may follow */
            finish_complete_locked(srv, g, c);
            return;
        }
        if (record_locked(srv, g, c, i < accepted ? draft[i] : next, &digest, i < accepted ? (int)i : -1))
            return;
    }
}

static uint32_t common_prefix(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
    uint32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* The idle slot for a prompt of n tokens: the one whose whole cache is the
 * longest prefix of the prompt (an empty one counts), else the least
 * recently used; -1 when every slot is busy. */
static int choose_slot(const sv_engine *g, const int32_t *prompt, uint32_t n)
{
    int slot = -1, lru = -1;
    uint32_t best = 0;
    for (uint32_t i = 0; i < g->n_slots; i++) {
        if (g->slots[i])
            continue;
        if (lru < 0 || g->last_use[i] < g->last_use[lru])
            lru = (int)i;
        const int whole = common_prefix(prompt, n, g->held[i], g->n_held[i]) == g->n_held[i];
        if (whole && (slot < 0 || g->n_held[i] > best ||
                      (g->n_held[i] == best && g->last_use[i] < g->last_use[slot]))) {
            slot = (int)i;
            best = g->n_held[i];
        }
    }
    return slot >= 0 ? slot : lru;
}

/* Gives c's slot the longest prefix of the prompt held by any slot (at least
 * one prompt token is left to step, for the logits), or empties it. A choice
 * that scores its prompt needs the logits of every position: it starts empty. */
static di_status start_from_prefix(sv_server *srv, sv_engine *g, sv_choice *c)
{
    const sv_prompt *p = c->prompt;
    uint32_t slot = c->slot, best = 0, donor = slot;
    for (uint32_t i = 0; i < g->n_slots && !c->scores_prompt; i++) {
        uint32_t n = common_prefix(p->ids, p->n - 1, g->held[i], g->n_held[i]);
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
    memcpy(g->held[slot], p->ids, best * sizeof *p->ids);
    g->n_held[slot] = best;
    c->n_fed = best;
    if (best)
        sv_metrics_prefix(srv, best);
    return DI_OK;
}

/* Marks the choices of a cancelled request that have no slot yet done. */
static void drop_unadmitted_locked(sv_engine *g, sv_request *r)
{
    r->refs++; /* held while its choices finish */
    for (uint32_t i = r->n_admitted; i < r->n_computed; i++)
        finish_locked(g, &r->choices[i]);
    r->n_admitted = r->n_computed;
    release_locked(r);
}

static void admit_locked(sv_server *srv, sv_engine *g)
{
    while (g->q_len > 0) {
        sv_request *r = g->queue[g->q_head];
        if (r->cancelled) {
            g->q_head = (g->q_head + 1) % g->q_cap;
            g->q_len--;
            drop_unadmitted_locked(g, r);
            continue;
        }
        /* a prompt's later choices wait until its first holds the prompt, to copy it */
        sv_choice *c = &r->choices[r->n_admitted];
        const uint32_t per = sv_computed_per_prompt(r);
        const sv_choice *first = &r->choices[r->n_admitted - r->n_admitted % per];
        if (first != c && first->state != SV_DONE && first->n_fed + 1 < first->prompt->n)
            return;
        const int slot = choose_slot(g, c->prompt->ids, c->prompt->n - 1);
        if (slot < 0)
            return;
        r->n_admitted++;
        if (r->n_admitted == r->n_computed) {
            g->q_head = (g->q_head + 1) % g->q_cap;
            g->q_len--;
        }
        c->slot = (uint32_t)slot;
        c->state = SV_RUNNING;
        g->slots[slot] = c;
        g->last_use[slot] = ++g->use_clock;
        di_status st = start_from_prefix(srv, g, c);
        /* the slot's own cache, truncated, may keep a grammar of its last
         * request (truncate restores one): this request's starts after its prompt */
        if (!st)
            st = di_session_seq_set_grammar(g->session, (uint32_t)slot, NULL, NULL, 0);
        if (!st && srv->sampling_available) {
            di_sampling_params p = r->params;
            p.seed = c->seed;
            st = di_session_seq_set_sampling(g->session, (uint32_t)slot, r->sampled ? &p : NULL);
        }
        if (st)
            fail_locked(g, c, "preparing the sequence", st, di_session_errmsg(g->session));
    }
}

/* --speculate FILE, outside the lock (the session and the drafter are this
 * thread's): the draft of each entry with room for one, proposed by the
 * draft model after its token into the room reserved behind it, then the
 * step's tokens packed. n_tokens gets each entry's token and draft, *n_tok
 * their sum. 1 when some entry has a draft. A failed proposal leaves its
 * entry without one (the answer is the same) and is said once. */
static int propose_drafts(sv_engine *g, uint32_t n, uint32_t *n_tok)
{
    int drafts = 0;
    uint32_t from = 0, to = 0;
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t take = g->n_tokens[k], room = g->draft_room[k];
        memmove(&g->tokens[to], &g->tokens[from], take * sizeof *g->tokens);
        from += take + room;
        uint32_t n_draft = 0;
        if (room > 0 && di_drafter_propose(g->drafter, g->session, g->seq_ids[k], g->tokens[to], room,
                                           &g->tokens[to + 1], &n_draft) != DI_OK) {
            if (!g->drafter_failed)
                fprintf(stderr, "detinfer serve: the draft model: %s (that sequence goes on without a draft)\n",
                        di_drafter_errmsg(g->drafter));
            g->drafter_failed = 1;
            n_draft = 0;
        }
        g->n_tokens[k] = take + n_draft;
        to += take + n_draft;
        drafts |= n_draft > 0;
    }
    *n_tok = to;
    return drafts;
}

static void *engine_main(void *arg)
{
    sv_server *srv = arg;
    sv_engine *g = srv->engine;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        for (uint32_t i = 0; i < g->n_slots; i++)
            if (g->slots[i] && g->slots[i]->req->cancelled)
                finish_locked(g, g->slots[i]);
        admit_locked(srv, g);
        /* Prompts to score need an all-logits step, which computes every
         * position's logits row: their chunks step without other prompts'
         * chunks (whose rows nobody reads), within one chunk's rows in all
         * (--chunk x the vocabulary's floats); the two kinds take turns. */
        int scoring = 0, others = 0;
        for (uint32_t i = 0; i < g->n_slots; i++) {
            const sv_choice *c = g->slots[i];
            if (c && c->n_fed < c->prompt->n)
                *(c->scores_prompt ? &scoring : &others) = 1;
        }
        const int score_step = scoring && (!others || g->score_turn);
        if (scoring && others)
            g->score_turn = !score_step;
        /* --speculate: decoding choices add drafts (prompt lookup, or the
         * draft model's, proposed below outside the lock) in steps that
         * keep all logits anyway or hold no ordinary prompt chunk, within
         * SV_DRAFT_STEP_TOKENS tokens in all (the more sequences decode,
         * the less a draft saves: none from that many on) */
        uint32_t decoding = 0;
        for (uint32_t i = 0; i < g->n_slots; i++)
            decoding += g->slots[i] && g->slots[i]->n_fed >= g->slots[i]->prompt->n;
        long draft_max = srv->cfg.speculate && (score_step || !others) && decoding
                             ? (long)(SV_DRAFT_STEP_TOKENS / decoding) - 1 : 0;
        if (draft_max > srv->cfg.draft_max)
            draft_max = srv->cfg.draft_max;
        int drafts = 0;
        uint32_t n = 0, n_tok = 0, score_budget = (uint32_t)srv->cfg.chunk;
        for (uint32_t i = 0; i < g->n_slots; i++) {
            sv_choice *c = g->slots[i];
            if (!c)
                continue;
            const sv_prompt *p = c->prompt;
            uint32_t take, room = 0;
            if (c->n_fed < p->n) {
                if (c->scores_prompt != score_step || (score_step && score_budget == 0))
                    continue;
                take = p->n - c->n_fed;
                if (take > (uint32_t)srv->cfg.chunk)
                    take = (uint32_t)srv->cfg.chunk;
                if (score_step && take > score_budget)
                    take = score_budget;
                if (score_step)
                    score_budget -= take;
                memcpy(&g->tokens[n_tok], &p->ids[c->n_fed], take * sizeof *g->tokens);
            } else {
                take = 1;
                g->tokens[n_tok] = c->out[c->n_out - 1];
                c->n_draft = 0;
                /* draft tokens past max_tokens would be stepped for nothing */
                const uint32_t left = c->req->max_tokens - c->n_out;
                room = draft_max > 0 ? (uint32_t)draft_max : 0;
                if (room >= left)
                    room = left > 0 ? left - 1 : 0;
                if (!g->drafter) { /* a prompt-lookup draft now; the draft model's fills the room later */
                    if (room > 0 && di_session_seq_draft_lookup(g->session, i, g->tokens[n_tok], SV_DRAFT_NGRAM,
                                                                room, &g->tokens[n_tok + 1], &c->n_draft) == DI_OK)
                        take += c->n_draft;
                    else
                        c->n_draft = 0;
                    room = 0;
                }
                drafts |= c->n_draft > 0;
            }
            g->seq_ids[n] = i;
            g->n_tokens[n] = take;
            g->draft_room[n] = room;
            g->stepped[n] = c;
            n_tok += take + room;
            n++;
        }
        if (n == 0) {
            if (g->stop && g->q_len == 0)
                break;
            pthread_cond_wait(&g->work, &g->lock);
            continue;
        }
        pthread_mutex_unlock(&g->lock);
        if (g->drafter)
            drafts = propose_drafts(g, n, &n_tok);
        double t0 = cli_now();
        di_status st = di_session_step(g->session, n, g->seq_ids, g->n_tokens, g->tokens,
                                       score_step || drafts ? DI_STEP_ALL_LOGITS : 0);
        double elapsed = cli_now() - t0;
        sv_metrics_step(srv, n, n_tok, elapsed);
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
            else if (g->n_held[slot] + g->n_tokens[k] <= (uint32_t)srv->context) {
                memcpy(g->held[slot] + g->n_held[slot], &g->tokens[at], g->n_tokens[k] * sizeof *g->tokens);
                g->n_held[slot] += g->n_tokens[k];
            }
            at += g->n_tokens[k];
        }
        at = 0;
        for (uint32_t k = 0; k < n; k++) {
            sv_choice *c = g->stepped[k];
            const int32_t *draft = &g->tokens[at + 1];
            at += g->n_tokens[k];
            if (st) {
                fail_locked(g, c, "step", st, di_session_errmsg(g->session));
                continue;
            }
            if (g->draft_room[k])
                c->n_draft = g->n_tokens[k] - 1; /* the draft model's, proposed outside the lock */
            if (c->n_fed >= c->prompt->n && c->n_draft > 0) {
                const uint32_t slot = c->slot;
                resolve_draft_locked(srv, g, c, draft);
                /* the slot's cache holds the accepted tokens only */
                uint32_t length = 0;
                if (di_session_seq_length(g->session, slot, &length) || length < g->n_held[slot])
                    g->n_held[slot] = length;
                continue;
            }
            if (c->n_fed < c->prompt->n) {
                if (c->scores_prompt) {
                    di_status sst = score_prompt_locked(g, c, c->n_fed, g->n_tokens[k]);
                    if (sst) {
                        fail_locked(g, c, "scoring the prompt", sst, di_session_errmsg(g->session));
                        continue;
                    }
                }
                c->n_fed += g->n_tokens[k];
                if (c->n_fed < c->prompt->n)
                    continue; /* more prompt to read */
                if (c->req->max_tokens == 0) {
                    finish_prompt_only_locked(srv, g, c);
                    continue;
                }
                di_status gst = c->req->grammar ? start_grammar(srv, g, c) : DI_OK;
                if (gst) {
                    fail_locked(g, c, "starting the grammar", gst, di_session_errmsg(g->session));
                    continue;
                }
            }
            advance_locked(srv, g, c);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int sv_engine_start(sv_server *srv, char *err, size_t err_size)
{
    sv_engine *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_size, "out of memory");
        return DI_ERR_OUT_OF_MEMORY;
    }
    srv->engine = g;
    g->n_slots = (uint32_t)srv->cfg.max_sequences;
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
    g->q_cap = (int)srv->cfg.queue;
    /* a step's tokens: a prompt chunk, or a token and its draft, per slot */
    const size_t per_slot = (size_t)srv->cfg.chunk > 1 + DI_DRAFT_MAX ? (size_t)srv->cfg.chunk : 1 + DI_DRAFT_MAX;
    size_t max_tokens = (size_t)g->n_slots * per_slot;
    g->slots = calloc(g->n_slots, sizeof *g->slots);
    g->held = calloc(g->n_slots, sizeof *g->held);
    g->n_held = calloc(g->n_slots, sizeof *g->n_held);
    g->last_use = calloc(g->n_slots, sizeof *g->last_use);
    for (uint32_t i = 0; g->held && i < g->n_slots; i++)
        if (!(g->held[i] = calloc((size_t)srv->context, sizeof **g->held))) {
            snprintf(err, err_size, "out of memory");
            return DI_ERR_OUT_OF_MEMORY;
        }
    g->queue = calloc((size_t)g->q_cap, sizeof *g->queue);
    g->seq_ids = calloc(g->n_slots, sizeof *g->seq_ids);
    g->n_tokens = calloc(g->n_slots, sizeof *g->n_tokens);
    g->stepped = calloc(g->n_slots, sizeof *g->stepped);
    g->draft_room = calloc(g->n_slots, sizeof *g->draft_room);
    g->tokens = calloc(max_tokens, sizeof *g->tokens);
    if (!g->slots || !g->held || !g->n_held || !g->last_use || !g->queue || !g->seq_ids || !g->n_tokens || !g->stepped ||
        !g->draft_room || !g->tokens) {
        snprintf(err, err_size, "out of memory");
        return DI_ERR_OUT_OF_MEMORY;
    }
    cli_session_opts so = {.backend = srv->cfg.backend, .profile = srv->cfg.profile,
                          .threads = srv->cfg.threads, .max_sequences = srv->cfg.max_sequences,
                          .context_length = srv->context, .device = srv->cfg.device,
                          .cpu_path = srv->cfg.cpu_path};
    char detail[512] = "";
    di_status st = cli_open_session(srv->model, &so, &g->session, detail, sizeof detail);
    if (st) {
        snprintf(err, err_size, "creating the session: %s: %s", di_status_name(st), detail);
        return st;
    }
    /* --speculate FILE: the draft model, in a session of the same settings
     * (a slot per slot); a vocabulary that differs is refused here */
    if (srv->cfg.draft_model) {
        if ((st = di_model_load(srv->cfg.draft_model, &g->draft, detail, sizeof detail))) {
            snprintf(err, err_size, "cannot load the draft model '%s': %s", srv->cfg.draft_model, detail);
            return st;
        }
        if ((st = cli_open_drafter(srv->model, g->draft, &so, &g->drafter, detail, sizeof detail))) {
            snprintf(err, err_size, "the draft model '%s': %s", srv->cfg.draft_model, detail);
            return st;
        }
    }
    snprintf(srv->backend_info, sizeof srv->backend_info, "%s", di_session_backend_info(g->session));
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->work, NULL);
    if (pthread_create(&g->thread, NULL, engine_main, srv)) {
        snprintf(err, err_size, "cannot start the engine thread");
        return DI_ERR_INTERNAL;
    }
    g->thread_started = 1;
    return DI_OK;
}

int sv_engine_submit(sv_server *srv, sv_request *r, sv_error *e)
{
    sv_engine *g = srv->engine;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->changed, &attr);
    pthread_condattr_destroy(&attr);
    r->t_queued = cli_now();
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    if (sv_draining(srv) || g->stop) {
        sv_set_error(e, 503, "server_error", NULL, "the server is shutting down");
        rc = -1;
    } else if (g->q_len >= g->q_cap) {
        sv_set_error(e, 429, "rate_limit_error", NULL,
                     "the queue is full (%d requests waiting; --queue); retry later", g->q_len);
        rc = -1;
    } else {
        r->refs++;
        g->queue[(g->q_head + g->q_len) % g->q_cap] = r;
        g->q_len++;
        pthread_cond_signal(&g->work);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void sv_engine_lock(sv_server *srv) { pthread_mutex_lock(&srv->engine->lock); }
void sv_engine_unlock(sv_server *srv) { pthread_mutex_unlock(&srv->engine->lock); }

void sv_engine_wait(sv_server *srv, sv_request *r, double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)(seconds * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&r->changed, &srv->engine->lock, &ts);
}

void sv_engine_cancel(sv_server *srv, sv_request *r)
{
    sv_engine *g = srv->engine;
    pthread_mutex_lock(&g->lock);
    if (!sv_request_done(r)) {
        r->cancelled = 1;
        pthread_cond_signal(&g->work);
    }
    pthread_mutex_unlock(&g->lock);
}

void sv_engine_release(sv_server *srv, sv_request *r)
{
    pthread_mutex_lock(&srv->engine->lock);
    release_locked(r);
    pthread_mutex_unlock(&srv->engine->lock);
}

void sv_engine_counts(sv_server *srv, int *queued, int *running)
{
    sv_engine *g = srv->engine;
    pthread_mutex_lock(&g->lock);
    *queued = g->q_len;
    *running = 0;
    for (uint32_t i = 0; i < g->n_slots; i++)
        *running += g->slots[i] != NULL;
    pthread_mutex_unlock(&g->lock);
}

void sv_engine_stop(sv_server *srv)
{
    sv_engine *g = srv->engine;
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
    di_drafter_free(g->drafter);
    di_model_free(g->draft);
    for (uint32_t i = 0; g->held && i < g->n_slots; i++)
        free(g->held[i]);
    free(g->held);
    free(g->n_held);
    free(g->last_use);
    free(g->slots);
    free(g->queue);
    free(g->seq_ids);
    free(g->n_tokens);
    free(g->stepped);
    free(g->draft_room);
    free(g->tokens);
    free(g);
    srv->engine = NULL;
}
