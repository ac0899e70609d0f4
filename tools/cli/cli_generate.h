/*
 * cli_generate.h — the generation loops `detinfer run` prints and `detinfer
 * bench` times: one token a step, or speculating (a prompt-lookup draft or a
 * draft model's, verified several tokens a step), with exactly the same
 * tokens, logits digests and sequence (include/detinfer.h, "Speculative
 * decoding"). Both loops are these, so what bench compares is what run does.
 */
#ifndef CLI_GENERATE_H
#define CLI_GENERATE_H

#include <stdint.h>

#include <detinfer.h>

/* Called with each generated token and the digest of the logits row it was
 * chosen from, in order. */
typedef void (*cli_take_fn)(void *ctx, int32_t token, const di_digest *logits);

typedef struct cli_generation {
    /* in */
    uint32_t seq;              /* the session's sequence, reset by the caller */
    const int32_t *prompt;     /* stepped first, in one step */
    uint32_t n_prompt;
    const di_grammar *grammar; /* NULL: none; set after the prompt's step */
    int32_t eos;               /* the end-of-sequence token; -1: generate to max_new */
    long max_new;              /* >= 1 */
    cli_take_fn take;
    void *ctx;
    /* in, speculating: a draft model's drafter, else prompt lookup of up to ngram tokens */
    di_drafter *drafter;
    uint32_t draft_max, ngram; /* 1..DI_DRAFT_MAX, 1..DI_DRAFT_MAX_NGRAM */
    /* out */
    uint32_t n_generated;
    int stopped_at_eos;
    int stopped_by_grammar;  /* its text was complete and nothing could follow: no end token */
    int drafter_failed;      /* the failure is the drafter's (di_drafter_errmsg) */
    uint32_t steps, drafted, accepted; /* speculating: steps after the prompt's, draft tokens */
} cli_generation;

/* The prompt in one step, then one token per step (di_session_sample_token:
 * greedy with the default sampling parameters). */
di_status cli_generate(di_session *s, cli_generation *g);
/* The same tokens and digests, each step holding the token chosen last and a
 * draft, resolved by di_session_seq_accept_draft. A generation that ends
 * inside an accepted draft leaves the sequence cut back to what
 * cli_generate steps. */
di_status cli_generate_speculating(di_session *s, cli_generation *g);

/* The sequence digest of a generation (include/detinfer.h, DETINFER_1.2): the
 * tokens seq has stepped, followed by those it has not (the last generated
 * token, or everything when nothing was stepped). */
di_status cli_generation_digest(di_session *s, uint32_t seq, const int32_t *prompt, uint32_t n_prompt,
                                const int32_t *generated, uint32_t n_generated, di_digest *out);

#endif /* CLI_GENERATE_H */
