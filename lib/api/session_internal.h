/*
 * session_internal.h — the session and its sequences, as the files of the
 * session layer share them: session.c (creation, steps, results,
 * sampling) and session_grammar.c (the grammar calls on sequences).
 */
#ifndef DI_SESSION_INTERNAL_H
#define DI_SESSION_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/backend/backend.h"
#include "lib/base/errors.h"
#include "lib/api/sampling.h"
#include "lib/api/grammar_state.h"

#define SLICE_ROWS 64u
/* Logits rows computed at once: bounded so that n_vocab x rows stays small. */
#define LOGITS_FLOATS (1u << 22)

typedef struct sequence {
    uint32_t length;          /* tokens in the backend's cache */
    int32_t *tokens;          /* [tokens_capacity]: its history, grown with it */
    size_t tokens_capacity;
    /* results of this sequence's last step */
    int has_result;
    float *last_logits;       /* [n_vocab], allocated on first step */
    di_digest last_digest;
    int32_t greedy;
    /* rows of the session's all-logits buffer that belong to this sequence */
    uint64_t all_serial;      /* step serial the rows belong to */
    size_t all_first;
    uint32_t all_count;
    uint64_t step_mark;       /* duplicate detection within one step */
    di_sampling_params sampling; /* di_session_seq_set_sampling; kept across reset/copy */
    di_seq_grammar grammar;   /* di_session_seq_set_grammar; dropped by reset, copy, truncate before it */
} sequence;

struct di_session {
    const di_model *model;
    uint32_t max_sequences;
    uint32_t ctx_len;
    sequence *seqs;
    uint64_t serial;            /* number of steps so far */
    uint64_t checks;            /* number of step validations so far */
    uint32_t *logit_rows;       /* [SLICE_ROWS] slice row index of each logits row */
    uint32_t *logit_seq;        /* [SLICE_ROWS] entry index of each logits row */
    float *logits_tmp;          /* [logits_group][n_vocab] */
    uint32_t logits_group;
    float *all_logits;          /* [rows of the last ALL_LOGITS step][n_vocab] */
    di_digest *all_digests;
    size_t all_capacity;        /* rows */
    char errmsg[DI_ERRMSG_SIZE];
    char backend_info[256];     /* di_session_backend_info */
    /* The backend: it owns the KV caches and runs the forward pass; digests
     * and results stay here. NULL only while the session is being created. */
    const di_backend_ops *backend;
    void *backend_state;
    di_backend_row *backend_rows; /* [SLICE_ROWS] */
    int32_t *greedy_tmp;        /* [logits_group] */
    di_sampling_params sampling_start; /* every sequence's parameters at creation (config) */
    di_sampler sampler;         /* scratch, allocated by the first non-greedy sample */
    di_grammars grammars;       /* the grammars its sequences use */
    float *masked;              /* [n_vocab]: a row with the grammar's mask applied, allocated when needed */
};

/* Writes the session's message and returns st. */
di_status di_session_fail(di_session *s, di_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sequence seq, or DI_ERR_SEQUENCE with the message. */
di_status di_session_get_seq(di_session *s, uint32_t seq, sequence **out);
/* The common start of a per-sequence call: checks the handle, clears its
 * message, checks the caller's output pointer and the sequence id. */
di_status di_session_begin_seq_call(di_session *s, uint32_t seq, const void *out, sequence **q);

/* Sequence seq now holds `length` (<= its length) tokens: its results are
 * forgotten, its grammar and the backend's cache truncated. */
void di_session_set_length(di_session *s, uint32_t seq, uint32_t length);

/* ---- speculate.c ------------------------------------------------------------- */
/* Cuts a draft of *n tokens, to follow next in seq, before the first token
 * seq's grammar would refuse (no grammar: unchanged). */
di_status di_session_draft_fit_grammar(di_session *s, uint32_t seq, int32_t next, const int32_t *draft, uint32_t *n);

/* ---- session_grammar.c ----------------------------------------------------- */
/* The token di_session_greedy_token / di_session_sample_token give for q,
 * which has a grammar: the mask, then the parameters' order. */
di_status di_session_grammar_choose(di_session *s, uint32_t seq, sequence *q, int sample, int32_t *token);

#endif /* DI_SESSION_INTERNAL_H */
