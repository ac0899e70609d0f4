/*
 * verify_engine.h — runs a queue of requests (greedy or sampled) through one session
 * the way a server does (continuous batching): up to `batch` sequences at
 * once, prompts fed in chunks, new requests admitted one per step so that
 * prefill and decode entries mix, entry order and slots shuffled. Every
 * logits row the library returns is hashed (with last_only: the last row of
 * each entry), so a request's trace can be compared position by position
 * with another run of the same prompt.
 */
#ifndef DETINFER_ENGINE_H
#define DETINFER_ENGINE_H

#include <stdint.h>

#include <detinfer.h>

typedef struct vf_prompt {
    char *label;    /* for reports: the text, or the first token ids */
    char *text;     /* NULL for a token-id prompt */
    int32_t *tokens;
    uint32_t n;
    di_sampling_params sampling; /* a sampled request's parameters; size 0: greedy */
} vf_prompt;

/* What one request produced. Positions are indexes in the sequence: the
 * logits of position p predict token p + 1. A prompt of n tokens and
 * max_new generated tokens give n + max_new - 1 logits rows (the last
 * generated token is chosen but not fed). */
typedef struct vf_trace {
    uint32_t prompt;    /* index into the prompt list */
    uint32_t slot;      /* batch slot (sequence id) it ran in */
    uint32_t n_prompt, max_new, n_pos;
    di_digest *digests; /* [n_pos] digest of each logits row */
    int32_t *tokens;    /* [max_new] chosen tokens (greedy, or sampled) */
    int32_t *runner_up; /* [max_new] the second-best token at each choice */
    float *best_logit;  /* [max_new] the largest logit at each choice */
    float *second_logit;/* [max_new] the runner-up's logit */
    di_digest sequence; /* digest of prompt + generated tokens */
} vf_trace;

int vf_trace_init(vf_trace *t, uint32_t n_prompt, uint32_t max_new);
void vf_trace_free(vf_trace *t);

/* TEST ONLY: the fault injection that proves `detinfer verify` can fail.
 * When enabled, the logits row of sequence position `pos` of every request
 * that runs in batch slot `slot` has the lowest bit of its largest logit
 * flipped before it is hashed (the library's own digest is not used then).
 * Set from DETINFER_TEST_PERTURB; never enabled otherwise. */
typedef struct vf_perturb {
    int enabled;
    uint32_t slot, pos;
} vf_perturb;

typedef void (*vf_done_fn)(void *ctx, uint32_t request, const vf_trace *trace);

typedef struct vf_engine_cfg {
    uint32_t batch;   /* sequences at once; the session needs max_sequences >= batch */
    uint32_t chunk;   /* prompt tokens per step; 0: the whole prompt in one step */
    uint32_t max_new; /* >= 1 */
    uint64_t seed;    /* entry order and slot choice */
    vf_perturb perturb;
    /* 1: only the last position of each entry is read and hashed (no
     * DI_STEP_ALL_LOGITS; the other digests stay zero): for requests whose
     * one interesting row is the last, like the near ties. */
    int last_only;
    /* with chunk > 0: only the last chunk_tail prompt tokens are fed chunk
     * at a time, those before them in one step (0: the whole prompt is
     * chunked). Bounds the cost of chunking long prompts. */
    uint32_t chunk_tail;
    vf_done_fn done;  /* called for each finished request (trace valid during the call) */
    void *ctx;
} vf_engine_cfg;

/* Runs queue[0..n_queue) (prompt indexes). On a library error returns its
 * status with the detail in err; DI_ERR_INTERNAL when the library's greedy
 * token is not the argmax of the logits it returned. A sampled request's
 * tokens come from di_session_sample_token with its parameters. */
di_status vf_engine_run(di_session *s, int64_t n_vocab, const vf_prompt *prompts, const uint32_t *queue,
                        uint32_t n_queue, const vf_engine_cfg *cfg, char *err, size_t err_size);

/* The largest logit (lowest index among equals; NaN never chosen: what
 * di_session_greedy_token picks) and the runner-up, with their values. */
void vf_top2(const float *row, int64_t n, int32_t *best, int32_t *second, float *best_value,
             float *second_value);

/* The gap between two logits in ulp: the number of float32 values x with
 * min(a, b) < x <= max(a, b), so 0 when a == b, 1 for neighbours (+0 and
 * -0 count as one value); UINT64_MAX when either is NaN. */
uint64_t vf_ulp_distance(float a, float b);

#endif /* DETINFER_ENGINE_H */
