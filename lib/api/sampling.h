/*
 * sampling.h — seeded sampling from one logits row in the canonical order of
 * docs/DETERMINISM.md ("Sampling"), used by the session layer for every
 * backend (the logits are on the host by then).
 */
#ifndef DI_SAMPLING_H
#define DI_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"

/* Scratch of one session's sampler: n_vocab-sized arrays, allocated once. */
typedef struct di_sampler {
    uint32_t n_vocab;
    float *z;         /* penalised logits, then divided by the temperature */
    float *p;         /* softmax weights, then probabilities (+0 outside the candidates) */
    float *kept;      /* probabilities of the kept candidates, +0 elsewhere */
    uint32_t *heap;   /* candidates not yet taken, a heap under the candidate order */
    uint32_t *ord;    /* candidates taken from the heap, in order */
    uint32_t *count;  /* occurrences in the penalty window; all zero between calls */
} di_sampler;

/* The defaults of di_sampling_params_init (greedy). */
void di_sampling_defaults(di_sampling_params *params);

/* Checks a caller's struct and copies it into *out (fields the caller's
 * size does not reach get their defaults). A bad value gives
 * DI_ERR_INVALID_ARGUMENT with a message naming the parameter and the value. */
di_status di_sampling_accept(const di_sampling_params *params, di_sampling_params *out,
                             char *errbuf, size_t errbuf_size);

/* 1 when the parameters choose exactly the greedy token of the raw logits
 * (temperature 0 and no penalty). */
int di_sampling_is_greedy(const di_sampling_params *params);

di_status di_sampler_init(di_sampler *sampler, uint32_t n_vocab);
void di_sampler_release(di_sampler *sampler);

/* The token for sequence position `position` from `logits` (n_vocab values,
 * left unchanged), with the penalty window `window` (the sequence's last
 * n_window tokens, each in [0, n_vocab)). Parameters already accepted. */
int32_t di_sample(di_sampler *sampler, const di_sampling_params *params, const float *logits,
                  const int32_t *window, uint32_t n_window, uint32_t position);

/* Softmax weights of z[0..n) against its largest non-NaN value `max`:
 * w[v] = +0 for NaN, 1 where z[v] == max, di_expf(z[v] - max) elsewhere.
 * Returns their canonical sum in token-id order (di_cpu_sum). Step 4 of the
 * sampling order and the log-probabilities (logprobs.c) share it. */
float di_softmax_weights(const float *z, uint32_t n, float max, float *w);

/* The first `want` ids of x[0..n) in the candidate order (x descending, id
 * ascending; NaN values left out) into ord; returns how many there are
 * (fewer than want when NaN values are left out). heap: n scratch entries. */
uint32_t di_candidate_head(const float *x, uint32_t n, uint32_t want, uint32_t *heap, uint32_t *ord);

/* The canonical sum (numerics.h) of a sequence of terms fed one at a time,
 * readable after any number of terms: the running sums of the top-p and
 * inverse-CDF walks. Exposed for the tests. */
typedef struct di_running_sum {
    float done[32]; /* lane totals of the finished chunks (DI_LANES) */
    float part[32]; /* lane sums of the chunk being filled */
    uint32_t n;     /* terms so far */
} di_running_sum;

void di_running_sum_init(di_running_sum *r);
void di_running_sum_add(di_running_sum *r, float x);
/* The canonical sum of the terms so far: di_cpu_sum of them, bit for bit. */
float di_running_sum_value(const di_running_sum *r);

#endif /* DI_SAMPLING_H */
