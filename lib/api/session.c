/*
 * session.c — the session layer: sequences with their token histories, the
 * batch step (validate everything, then compute), greedy selection, sampling
 * (sampling.c) and digests. The forward pass, its buffers and the KV caches
 * belong to the session's backend (backend.h): the CPU's (cpu_backend.c) or
 * the CUDA plugin, each called the same way.
 *
 * A step gathers the tokens of all its entries into rows and runs them
 * through the forward pass in slices of at most SLICE_ROWS rows. Every row is
 * computed on its own and a row's attention reads only its own sequence's
 * cache up to its own position, so slicing, batching and chunking cannot
 * change a bit of any result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/config.h"
#include "lib/api/digest.h"
#include "lib/base/fpenv.h"
#include "lib/base/growable.h"
#include "lib/api/logprobs.h"
#include "lib/model/model.h"
#include "kernels/common/numerics.h"
#include "lib/api/session_internal.h"

#define fail di_session_fail /* this file's short name for it */

/* ---- creation -------------------------------------------------------------- */

static uint32_t context_length(const di_model *m, const struct di_config *c)
{
    if (c->context_length > 0)
        return (uint32_t)c->context_length;
    return m->n_ctx_train < DI_DEFAULT_CONTEXT_CAP ? m->n_ctx_train : DI_DEFAULT_CONTEXT_CAP;
}

static di_status check_backend(const struct di_config *c, char *errbuf, size_t errbuf_size)
{
    if (c->profile == DI_PROFILE_DEVICE && c->backend != DI_BACKEND_CUDA)
        return di_error(errbuf, errbuf_size, DI_ERR_UNSUPPORTED,
                        "the device numerics profile needs the CUDA backend; the CPU backend runs "
                        "the portable profile only");
    return DI_OK;
}

/* A context beyond the model's training context only when the caller insists. */
static di_status check_context(const di_model *m, const struct di_config *c, char *errbuf,
                               size_t errbuf_size)
{
    if (c->context_length <= m->n_ctx_train || c->allow_long_context)
        return DI_OK;
    return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                    "context_length = %lld exceeds the model's training context of %u tokens; "
                    "set DI_CONFIG_ALLOW_LONG_CONTEXT to 1 to run positions the model was never "
                    "trained on",
                    (long long)c->context_length, m->n_ctx_train);
}

/* The sequences start empty: their histories (and the backend's caches)
 * grow with them. */
static di_status alloc_sequences(di_session *s)
{
    s->seqs = calloc(s->max_sequences, sizeof *s->seqs);
    if (!s->seqs)
        return DI_ERR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < s->max_sequences; i++)
        s->seqs[i].sampling = s->sampling_start;
    return DI_OK;
}

/* The configured backend's table: the CPU's, or the CUDA plugin, loaded. */
static di_status backend_ops(const struct di_config *c, const di_backend_ops **ops, char *errbuf,
                             size_t errbuf_size)
{
    if (c->backend == DI_BACKEND_CUDA)
        return di_backend_load_cuda(ops, errbuf, errbuf_size);
    *ops = di_cpu_backend();
    return DI_OK;
}

/* Creates the backend's state: its forward buffers and caches (and, for the
 * CUDA plugin, the device and the weights). */
static di_status start_backend(di_session *s, const di_backend_ops *ops, const struct di_config *c,
                               char *errbuf, size_t errbuf_size)
{
    const di_backend_params p = {
        .max_sequences = s->max_sequences, .ctx_len = s->ctx_len, .max_rows = SLICE_ROWS,
        .max_logits = s->logits_group, .profile = c->profile, .device = c->device,
        .cpu_path = (int)c->cpu_path, .threads = (uint32_t)c->threads,
    };
    di_status st = ops->create(s->model, &p, &s->backend_state, errbuf, errbuf_size);
    if (st)
        return st;
    s->backend = ops;
    snprintf(s->backend_info, sizeof s->backend_info, "%s", ops->info(s->backend_state));
    return DI_OK;
}

static di_status create_session(const di_model *model, const di_config *config, di_session **out,
                                char *errbuf, size_t errbuf_size)
{
    if (errbuf && errbuf_size > 0)
        errbuf[0] = '\0';
    if (!out)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "di_session_create: out is NULL");
    *out = NULL;
    if (!model)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "di_session_create: model is NULL");
    struct di_config defaults;
    di_config_defaults(&defaults);
    const struct di_config *c = config ? config : &defaults;
    di_status st = check_backend(c, errbuf, errbuf_size);
    if (!st)
        st = check_context(model, c, errbuf, errbuf_size);
    if (st)
        return st;
    di_sampling_params sampling_start;
    if ((st = di_config_sampling(c, &sampling_start, errbuf, errbuf_size)))
        return st;

    const di_backend_ops *ops = NULL;
    if ((st = backend_ops(c, &ops, errbuf, errbuf_size)))
        return st;

    di_session *s = calloc(1, sizeof *s);
    if (!s)
        return di_error(errbuf, errbuf_size, DI_ERR_OUT_OF_MEMORY, "out of memory");
    s->model = model;
    s->sampling_start = sampling_start;
    di_grammars_init(&s->grammars, model->tokenizer, model->n_vocab);
    s->max_sequences = (uint32_t)c->max_sequences;
    s->ctx_len = context_length(model, c);
    s->logits_group = LOGITS_FLOATS / model->n_vocab;
    if (s->logits_group < 1)
        s->logits_group = 1;
    if (s->logits_group > SLICE_ROWS)
        s->logits_group = SLICE_ROWS;

    st = start_backend(s, ops, c, errbuf, errbuf_size);
    if (st) {
        di_session_free(s);
        return st;
    }
    st = alloc_sequences(s);
    s->backend_rows = calloc(SLICE_ROWS, sizeof *s->backend_rows);
    s->greedy_tmp = calloc(s->logits_group, sizeof *s->greedy_tmp);
    s->logit_rows = calloc(SLICE_ROWS, sizeof *s->logit_rows);
    s->logit_seq = calloc(SLICE_ROWS, sizeof *s->logit_seq);
    s->logits_tmp = malloc((size_t)s->logits_group * model->n_vocab * sizeof(float));
    if (!st && (!s->backend_rows || !s->greedy_tmp || !s->logit_rows || !s->logit_seq || !s->logits_tmp))
        st = DI_ERR_OUT_OF_MEMORY;
    if (st) {
        di_session_free(s);
        return di_error(errbuf, errbuf_size, st, "out of memory for %u sequences of context %u",
                        (unsigned)c->max_sequences, context_length(model, c));
    }
    *out = s;
    return DI_OK;
}

/* Creating a session may compute (a backend's RoPE tables): under the pinned
 * floating-point environment (fpenv.h), like every step. */
DI_API di_status di_session_create(const di_model *model, const di_config *config, di_session **out,
                                   char *errbuf, size_t errbuf_size)
{
    di_fpenv saved;
    di_fpenv_enter(&saved);
    const di_status st = create_session(model, config, out, errbuf, errbuf_size);
    di_fpenv_leave(&saved);
    return st;
}

DI_API void di_session_free(di_session *s)
{
    if (!s)
        return;
    if (s->backend)
        s->backend->destroy(s->backend_state);
    free(s->backend_rows);
    free(s->greedy_tmp);
    if (s->seqs) {
        for (uint32_t i = 0; i < s->max_sequences; i++) {
            free(s->seqs[i].tokens);
            free(s->seqs[i].last_logits);
            di_seq_grammar_drop(&s->grammars, &s->seqs[i].grammar);
        }
        free(s->seqs);
    }
    di_grammars_release(&s->grammars);
    free(s->masked);
    free(s->logit_rows);
    free(s->logit_seq);
    free(s->logits_tmp);
    free(s->all_logits);
    free(s->all_digests);
    di_sampler_release(&s->sampler);
    free(s);
}

DI_API const char *di_session_errmsg(const di_session *s)
{
    return s ? s->errmsg : "session is NULL";
}

DI_API const char *di_session_backend_info(const di_session *s)
{
    return s ? s->backend_info : "session is NULL";
}

/* ---- the step ---------------------------------------------------------------- */

/* Room for n tokens in q's history, keeping what it holds: 1, or 0 when out
 * of memory (the history then unchanged). */
static int reserve_tokens(sequence *q, uint32_t n)
{
    return DI_GROW(q->tokens, 0, q->tokens_capacity, n, 64);
}

/* Checks every entry before anything changes; on success *total is the
 * number of tokens in the step and every stepped sequence has last_logits. */
static di_status validate_step(di_session *s, uint32_t n_entries, const uint32_t *seq_ids,
                               const uint32_t *n_tokens, const int32_t *tokens, uint32_t flags,
                               uint64_t *total)
{
    const uint64_t mark = ++s->checks;
    if (n_entries == 0 || !seq_ids || !n_tokens || !tokens)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "a step needs at least one entry and non-NULL arrays");
    if (flags & ~DI_STEP_ALL_LOGITS)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "unknown step flags 0x%x", flags & ~DI_STEP_ALL_LOGITS);
    *total = 0;
    for (uint32_t e = 0; e < n_entries; e++) {
        const uint32_t id = seq_ids[e];
        if (id >= s->max_sequences)
            return fail(s, DI_ERR_SEQUENCE, "entry %u: sequence %u is outside [0, %u)", e, id, s->max_sequences);
        sequence *q = &s->seqs[id];
        if (q->step_mark == mark)
            return fail(s, DI_ERR_SEQUENCE, "entry %u: sequence %u appears twice in one step", e, id);
        q->step_mark = mark;
        if (n_tokens[e] == 0)
            return fail(s, DI_ERR_SEQUENCE, "entry %u: sequence %u has no tokens", e, id);
        if ((uint64_t)q->length + n_tokens[e] > s->ctx_len)
            return fail(s, DI_ERR_CONTEXT_FULL,
                        "entry %u: sequence %u holds %u tokens; %u more exceed the context length %u",
                        e, id, q->length, n_tokens[e], s->ctx_len);
        for (uint32_t i = 0; i < n_tokens[e]; i++) {
            const int32_t t = tokens[*total + i];
            if (t < 0 || (uint32_t)t >= s->model->n_vocab)
                return fail(s, DI_ERR_TOKEN_RANGE, "entry %u: token %u is %d, outside [0, %u)", e, i,
                            t, s->model->n_vocab);
        }
        /* the grammar's states of these tokens, written past the sequence's
         * current ones: they count only once the step commits them */
        di_status st = q->grammar.use ? di_seq_grammar_check(&s->grammars, &q->grammar, tokens + *total,
                                                             n_tokens[e], e, id, s->errmsg, sizeof s->errmsg)
                                      : DI_OK;
        if (st)
            return st;
        *total += n_tokens[e];
    }
    /* allocations last, so that nothing is left half-changed by a failure:
     * growing a store keeps what it holds, so a failure part way leaves
     * every sequence as it was (some with more room) */
    const size_t n_vocab = s->model->n_vocab;
    for (uint32_t e = 0; e < n_entries; e++) {
        sequence *q = &s->seqs[seq_ids[e]];
        const uint32_t end = q->length + n_tokens[e];
        if (!q->last_logits && !(q->last_logits = malloc(n_vocab * sizeof(float))))
            return fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for the logits of sequence %u", seq_ids[e]);
        if (!reserve_tokens(q, end))
            return fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for the tokens of sequence %u at %u tokens",
                        seq_ids[e], end);
        di_status st = s->backend->reserve(s->backend_state, seq_ids[e], end, q->length, s->errmsg,
                                           sizeof s->errmsg);
        if (st)
            return st;
    }
    if ((flags & DI_STEP_ALL_LOGITS) && *total > s->all_capacity) {
        if (*total > SIZE_MAX / sizeof(float) / n_vocab)
            return fail(s, DI_ERR_OUT_OF_MEMORY, "%llu rows of logits do not fit in memory",
                        (unsigned long long)*total);
        float *rows = realloc(s->all_logits, (size_t)*total * n_vocab * sizeof(float));
        if (rows)
            s->all_logits = rows;
        di_digest *digests = realloc(s->all_digests, (size_t)*total * sizeof(di_digest));
        if (digests)
            s->all_digests = digests;
        if (!rows || !digests)
            return fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for %llu rows of logits",
                        (unsigned long long)*total);
        s->all_capacity = (size_t)*total;
    }
    return DI_OK;
}

/* Every NaN becomes the one quiet NaN 0x7fc00000: which NaN an operation
 * returns differs between instruction sets and devices (payloads are not
 * part of IEEE arithmetic's results), and a digest must not. */
static void canonicalize_nans(float *row, uint32_t n)
{
    const float canonical = di_float_from_bits(0x7fc00000u);
    for (uint32_t i = 0; i < n; i++)
        if (row[i] != row[i])
            row[i] = canonical;
}

/* Digest and greedy token (the backend's argmax of the row) of a finished
 * logits row, stored where it belongs. */
static void store_logits(di_session *s, float *row, sequence *q, int is_last, size_t all_index,
                         int keep_all, int32_t greedy)
{
    const uint32_t n_vocab = s->model->n_vocab;
    canonicalize_nans(row, n_vocab);
    di_digest d;
    di_digest_floats(row, n_vocab, &d);
    if (keep_all) {
        memcpy(s->all_logits + all_index * n_vocab, row, (size_t)n_vocab * sizeof(float));
        s->all_digests[all_index] = d;
    }
    if (is_last) {
        memcpy(q->last_logits, row, (size_t)n_vocab * sizeof(float));
        q->last_digest = d;
        q->greedy = greedy;
        q->has_result = 1;
    }
}

/* Logits for the slice rows that need them, in groups of logits_group. */
static di_status slice_logits(di_session *s, const uint32_t *seq_ids, uint32_t n_logit,
                              const size_t *all_index, const int *is_last, int keep_all)
{
    const uint32_t n_vocab = s->model->n_vocab;
    for (uint32_t g0 = 0; g0 < n_logit; g0 += s->logits_group) {
        uint32_t n = n_logit - g0 < s->logits_group ? n_logit - g0 : s->logits_group;
        di_status st = s->backend->logits(s->backend_state, s->logit_rows + g0, n, s->logits_tmp,
                                          s->greedy_tmp, s->errmsg, sizeof s->errmsg);
        if (st)
            return st;
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t k = g0 + i;
            store_logits(s, s->logits_tmp + (size_t)i * n_vocab, &s->seqs[seq_ids[s->logit_seq[k]]],
                         is_last[k], all_index[k], keep_all, s->greedy_tmp[i]);
        }
    }
    return DI_OK;
}

static di_status step(di_session *s, uint32_t n_entries, const uint32_t *seq_ids,
                      const uint32_t *n_tokens, const int32_t *tokens, uint32_t flags)
{
    if (!s)
        return DI_ERR_INVALID_ARGUMENT;
    s->errmsg[0] = '\0';
    uint64_t total;
    di_status st = validate_step(s, n_entries, seq_ids, n_tokens, tokens, flags, &total);
    if (st)
        return st;
    for (uint32_t e = 0; e < n_entries; e++)
        if (s->seqs[seq_ids[e]].grammar.use)
            di_seq_grammar_commit(&s->seqs[seq_ids[e]].grammar, n_tokens[e]);
    s->serial++;
    const int keep_all = (flags & DI_STEP_ALL_LOGITS) != 0;

    /* rows are taken entry by entry, token by token, SLICE_ROWS at a time */
    size_t all_index[SLICE_ROWS];
    int is_last[SLICE_ROWS];
    uint32_t e = 0, i = 0;   /* next entry and token within it */
    size_t flat = 0;         /* index of that token in `tokens` */
    while (e < n_entries) {
        uint32_t n_rows = 0, n_logit = 0;
        while (e < n_entries && n_rows < SLICE_ROWS) {
            sequence *q = &s->seqs[seq_ids[e]];
            if (i == 0) {
                q->has_result = 0;
                q->all_serial = keep_all ? s->serial : 0;
                q->all_first = flat;
                q->all_count = keep_all ? n_tokens[e] : 0;
            }
            s->backend_rows[n_rows] = (di_backend_row){tokens[flat], q->length, seq_ids[e]};
            q->tokens[q->length++] = tokens[flat];
            const int last = i + 1 == n_tokens[e];
            if (last || keep_all) {
                s->logit_rows[n_logit] = n_rows;
                s->logit_seq[n_logit] = e;
                all_index[n_logit] = flat;
                is_last[n_logit] = last;
                n_logit++;
            }
            n_rows++;
            flat++;
            if (last) {
                e++;
                i = 0;
            } else {
                i++;
            }
        }
        st = s->backend->forward(s->backend_state, s->backend_rows, n_rows, s->errmsg, sizeof s->errmsg);
        if (!st)
            st = slice_logits(s, seq_ids, n_logit, all_index, is_last, keep_all);
        if (st)
            return st; /* a device failure: the stepped sequences' state is undefined */
    }
    return DI_OK;
}

/* The whole step, in this thread, runs under the pinned floating-point
 * environment (fpenv.h); the pool's workers always do. */
DI_API di_status di_session_step(di_session *s, uint32_t n_entries, const uint32_t *seq_ids,
                                 const uint32_t *n_tokens, const int32_t *tokens, uint32_t flags)
{
    di_fpenv saved;
    di_fpenv_enter(&saved);
    const di_status st = step(s, n_entries, seq_ids, n_tokens, tokens, flags);
    di_fpenv_leave(&saved);
    return st;
}

/* ---- results and sequences ---------------------------------------------------- */

DI_API di_status di_session_logits(di_session *s, uint32_t seq, const float **logits, di_digest *digest)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, logits, &q);
    if (st)
        return st;
    if (!q->has_result)
        return fail(s, DI_ERR_STATE, "sequence %u has no logits: step it first", seq);
    *logits = q->last_logits;
    if (digest)
        *digest = q->last_digest;
    return DI_OK;
}

DI_API di_status di_session_logits_at(di_session *s, uint32_t seq, uint32_t index, const float **logits,
                                      di_digest *digest)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, logits, &q);
    if (st)
        return st;
    if (q->all_serial == 0 || q->all_serial != s->serial)
        return fail(s, DI_ERR_STATE,
                    "sequence %u was not stepped with DI_STEP_ALL_LOGITS in the session's last step", seq);
    if (index >= q->all_count)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "position %u is outside the %u appended in the last step",
                    index, q->all_count);
    *logits = s->all_logits + (q->all_first + index) * s->model->n_vocab;
    if (digest)
        *digest = s->all_digests[q->all_first + index];
    return DI_OK;
}

DI_API di_status di_session_greedy_token(di_session *s, uint32_t seq, int32_t *token)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, token, &q);
    if (st)
        return st;
    if (!q->has_result)
        return fail(s, DI_ERR_STATE, "sequence %u has no greedy token: step it first", seq);
    if (q->grammar.use)
        return di_session_grammar_choose(s, seq, q, 0, token);
    *token = q->greedy;
    return DI_OK;
}

DI_API di_status di_session_seq_length(di_session *s, uint32_t seq, uint32_t *length)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, length, &q);
    if (st)
        return st;
    *length = q->length;
    return DI_OK;
}

DI_API di_status di_session_seq_digest(di_session *s, uint32_t seq, di_digest *digest)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, digest, &q);
    if (st)
        return st;
    return di_digest_tokens(q->tokens, q->length, digest);
}

DI_API di_status di_session_seq_digest_extra(di_session *s, uint32_t seq, const int32_t *extra,
                                             size_t n_extra, di_digest *digest)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, digest, &q);
    if (st)
        return st;
    if ((!extra && n_extra > 0) || n_extra > SIZE_MAX / sizeof(int32_t))
        return fail(s, DI_ERR_INVALID_ARGUMENT, "extra is NULL or too long for %zu tokens", n_extra);
    di_digest_bytes2(q->tokens, (size_t)q->length * sizeof(int32_t), extra, n_extra * sizeof(int32_t),
                     digest);
    return DI_OK;
}

/* Sequence seq now holds `length` tokens: results that a change of the cache
 * makes stale are forgotten, and an empty sequence gives its memory back. */
void di_session_set_length(di_session *s, uint32_t seq, uint32_t length)
{
    sequence *q = &s->seqs[seq];
    q->length = length;
    q->has_result = 0;
    q->all_serial = 0;
    di_seq_grammar_truncate(&s->grammars, &q->grammar, length);
    if (length == 0) {
        free(q->tokens);
        q->tokens = NULL;
        q->tokens_capacity = 0;
    }
    s->backend->truncate(s->backend_state, seq, length);
}

DI_API di_status di_session_seq_truncate(di_session *s, uint32_t seq, uint32_t length)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, s, &q); /* no output pointer */
    if (st)
        return st;
    if (length > q->length)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "cannot truncate sequence %u of %u tokens to %u", seq,
                    q->length, length);
    di_session_set_length(s, seq, length);
    return DI_OK;
}

DI_API di_status di_session_seq_reset(di_session *s, uint32_t seq)
{
    return di_session_seq_truncate(s, seq, 0);
}

DI_API di_status di_session_seq_copy(di_session *s, uint32_t src, uint32_t dst, uint32_t length)
{
    if (!s)
        return DI_ERR_INVALID_ARGUMENT;
    s->errmsg[0] = '\0';
    sequence *from = NULL, *to = NULL;
    di_status st;
    if ((st = di_session_get_seq(s, src, &from)) || (st = di_session_get_seq(s, dst, &to)))
        return st;
    if (src == dst)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "cannot copy sequence %u onto itself", src);
    if (length > from->length)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "sequence %u holds %u tokens, fewer than %u", src,
                    from->length, length);
    /* room first, keeping what dst holds, so that a failure changes nothing */
    if (!reserve_tokens(to, length))
        return fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for the tokens of sequence %u at %u tokens",
                    dst, length);
    if ((st = s->backend->reserve(s->backend_state, dst, length, to->length, s->errmsg, sizeof s->errmsg)) ||
        (st = s->backend->seq_copy(s->backend_state, src, dst, length, s->errmsg, sizeof s->errmsg)))
        return st;
    if (length > 0)
        memcpy(to->tokens, from->tokens, (size_t)length * sizeof *to->tokens);
    di_seq_grammar_drop(&s->grammars, &to->grammar); /* a copied prefix brings no grammar */
    di_session_set_length(s, dst, length);
    return DI_OK;
}

/* ---- sampling ------------------------------------------------------------------ */

DI_API di_status di_session_seq_set_sampling(di_session *s, uint32_t seq,
                                             const di_sampling_params *params)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, s, &q); /* no output pointer */
    if (st)
        return st;
    if (!params) {
        q->sampling = s->sampling_start;
        return DI_OK;
    }
    di_sampling_params accepted;
    if ((st = di_sampling_accept(params, &accepted, s->errmsg, sizeof s->errmsg)))
        return st;
    q->sampling = accepted;
    return DI_OK;
}

DI_API di_status di_session_sample_token(di_session *s, uint32_t seq, int32_t *token)
{
    sequence *q = NULL;
    di_status st = di_session_begin_seq_call(s, seq, token, &q);
    if (st)
        return st;
    if (!q->has_result)
        return fail(s, DI_ERR_STATE, "sequence %u has no logits to sample from: step it first", seq);
    if (q->grammar.use)
        return di_session_grammar_choose(s, seq, q, 1, token);
    const di_sampling_params *p = &q->sampling;
    if (di_sampling_is_greedy(p)) {
        *token = q->greedy; /* exactly di_session_greedy_token */
        return DI_OK;
    }
    if (!s->sampler.z && di_sampler_init(&s->sampler, s->model->n_vocab))
        return fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for the sampler of %u tokens",
                    s->model->n_vocab);
    const uint32_t window = p->penalty_window == 0 || p->penalty_window > q->length
                                ? q->length
                                : p->penalty_window;
    /* sampling computes (penalties, temperature, exp, sums): under the contract's
     * floating-point environment, like a step */
    di_fpenv saved;
    di_fpenv_enter(&saved);
    *token = di_sample(&s->sampler, p, q->last_logits, q->tokens + (q->length - window), window,
                       q->length);
    di_fpenv_leave(&saved);
    return DI_OK;
}

DI_API di_status di_session_kv_bytes(di_session *s, uint64_t *bytes)
{
    if (!s)
        return DI_ERR_INVALID_ARGUMENT;
    s->errmsg[0] = '\0';
    if (!bytes)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "an output pointer is NULL");
    *bytes = s->backend->kv_bytes(s->backend_state);
    return DI_OK;
}

/* The checks of the two logprobs calls, then di_logprobs on the row that
 * `row` gives for the sequence (its last position, or one of its last step's). */
static di_status logprobs_of_row(di_session *s, uint32_t seq, int has_index, uint32_t index, int32_t token,
                                 float *token_logprob, uint32_t n_top, int32_t *top_tokens, float *top_logprobs)
{
    if (!s)
        return DI_ERR_INVALID_ARGUMENT;
    s->errmsg[0] = '\0';
    sequence *q = NULL;
    di_status st = di_session_get_seq(s, seq, &q);
    if (st)
        return st;
    const uint32_t n_vocab = s->model->n_vocab;
    if (token >= 0 && !token_logprob)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "token_logprob is NULL with token %d", (int)token);
    if (token >= 0 && (uint32_t)token >= n_vocab)
        return fail(s, DI_ERR_TOKEN_RANGE, "token %d is outside the vocabulary [0, %u)", (int)token, n_vocab);
    if (n_top > n_vocab)
        return fail(s, DI_ERR_INVALID_ARGUMENT, "n_top = %u exceeds the vocabulary of %u tokens", n_top, n_vocab);
    if (n_top > 0 && (!top_tokens || !top_logprobs))
        return fail(s, DI_ERR_INVALID_ARGUMENT, "top_tokens or top_logprobs is NULL with n_top = %u", n_top);
    const float *logits = q->last_logits;
    if (has_index) {
        st = di_session_logits_at(s, seq, index, &logits, NULL);
        if (st)
            return st;
    } else if (!q->has_result) {
        return fail(s, DI_ERR_STATE, "sequence %u has no logits: step it first", seq);
    }
    if (!s->sampler.z && di_sampler_init(&s->sampler, n_vocab))
        return fail(s, DI_ERR_OUT_OF_MEMORY, "out of memory for the log-probabilities of %u tokens", n_vocab);
    /* exp, log and sums: under the contract's floating-point environment */
    di_fpenv saved;
    di_fpenv_enter(&saved);
    di_logprobs(&s->sampler, logits, token, token_logprob, n_top, top_tokens, top_logprobs);
    di_fpenv_leave(&saved);
    return DI_OK;
}

DI_API di_status di_session_logprobs(di_session *s, uint32_t seq, int32_t token, float *token_logprob,
                                     uint32_t n_top, int32_t *top_tokens, float *top_logprobs)
{
    return logprobs_of_row(s, seq, 0, 0, token, token_logprob, n_top, top_tokens, top_logprobs);
}

DI_API di_status di_session_logprobs_at(di_session *s, uint32_t seq, uint32_t index, int32_t token,
                                        float *token_logprob, uint32_t n_top, int32_t *top_tokens,
                                        float *top_logprobs)
{
    return logprobs_of_row(s, seq, 1, index, token, token_logprob, n_top, top_tokens, top_logprobs);
}
