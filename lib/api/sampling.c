/*
 * sampling.c — the sampling parameters (defaults, checks) and the canonical
 * sampling order of docs/DETERMINISM.md, "Sampling":
 *   1. penalties over the window, each distinct id once;
 *   2. z = logit / temperature (temperature 0: argmax, no random number);
 *   3. candidates (non-NaN) under the order z descending, id ascending; top-k;
 *   4. weights exp(z - max) and their canonical sum in token-id order;
 *   5. top-p over the running canonical sum in candidate order, then min-p;
 *   6. inverse CDF with the Philox uniform of (seed, position).
 * Only the head of the candidate order is ever needed (the top-k, the top-p
 * prefix, the walk up to the chosen token), so the candidates sit in a heap
 * and are taken from it one by one instead of sorting the vocabulary.
 */
#include "lib/api/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/cpu/host_ops.h"
#include "lib/base/errors.h"
#include "kernels/common/numerics.h"

/* A caller's struct larger than this is taken for garbage, not a newer release. */
#define MAX_PARAMS_SIZE 1024u

/* ---- parameters ------------------------------------------------------------ */

void di_sampling_defaults(di_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->temperature = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->penalty_window = 64;
    p->seed = 0;
}

DI_API di_status di_sampling_params_init(di_sampling_params *params)
{
    if (!params)
        return DI_ERR_INVALID_ARGUMENT;
    di_sampling_defaults(params);
    return DI_OK;
}

static di_status bad(char *errbuf, size_t errbuf_size, const char *name, double value,
                     const char *rule)
{
    return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "sampling parameter %s = %g: %s",
                    name, value, rule);
}

/* The value rules, one line per parameter. */
static di_status check_values(const di_sampling_params *p, char *errbuf, size_t errbuf_size)
{
    if (!isfinite(p->temperature) || p->temperature < 0.0f)
        return bad(errbuf, errbuf_size, "temperature", p->temperature, "must be finite and >= 0");
    if (p->top_k < 0)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "sampling parameter top_k = %d: must be >= 0 (0: no cut)", (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return bad(errbuf, errbuf_size, "top_p", p->top_p, "must be in (0, 1] (1: no cut)");
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return bad(errbuf, errbuf_size, "min_p", p->min_p, "must be in [0, 1] (0: no cut)");
    if (!isfinite(p->repetition_penalty) || !(p->repetition_penalty > 0.0f))
        return bad(errbuf, errbuf_size, "repetition_penalty", p->repetition_penalty,
                   "must be finite and > 0 (1: none)");
    if (!isfinite(p->presence_penalty))
        return bad(errbuf, errbuf_size, "presence_penalty", p->presence_penalty,
                   "must be finite (0: none)");
    if (!isfinite(p->frequency_penalty))
        return bad(errbuf, errbuf_size, "frequency_penalty", p->frequency_penalty,
                   "must be finite (0: none)");
    return DI_OK;
}

di_status di_sampling_accept(const di_sampling_params *params, di_sampling_params *out, char *errbuf,
                             size_t errbuf_size)
{
    if (!params)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "sampling parameters are NULL");
    const uint32_t size = params->size;
    if (size < sizeof *params)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "sampling parameter size = %u: must be at least %zu (set it with "
                        "di_sampling_params_init)",
                        (unsigned)size, sizeof *params);
    if (size > MAX_PARAMS_SIZE)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "sampling parameter size = %u: larger than any release's struct (%u bytes "
                        "at most); set it with di_sampling_params_init",
                        (unsigned)size, MAX_PARAMS_SIZE);
    /* a newer caller's struct: its fields unknown here must be left at zero */
    const unsigned char *bytes = (const unsigned char *)params;
    for (uint32_t i = sizeof *params; i < size; i++)
        if (bytes[i] != 0)
            return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                            "sampling parameter size = %u: byte %u is set, but this library "
                            "knows only the first %zu bytes",
                            (unsigned)size, (unsigned)i, sizeof *params);
    di_status st = check_values(params, errbuf, errbuf_size);
    if (st)
        return st;
    memcpy(out, params, sizeof *out);
    out->size = sizeof *out;
    return DI_OK;
}

static int has_penalties(const di_sampling_params *p)
{
    return p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f ||
           p->frequency_penalty != 0.0f;
}

int di_sampling_is_greedy(const di_sampling_params *p)
{
    return p->temperature == 0.0f && !has_penalties(p);
}

/* ---- scratch ------------------------------------------------------------- */

di_status di_sampler_init(di_sampler *s, uint32_t n_vocab)
{
    memset(s, 0, sizeof *s);
    s->n_vocab = n_vocab;
    s->z = malloc((size_t)n_vocab * sizeof *s->z);
    s->p = malloc((size_t)n_vocab * sizeof *s->p);
    s->kept = malloc((size_t)n_vocab * sizeof *s->kept);
    s->heap = malloc((size_t)n_vocab * sizeof *s->heap);
    s->ord = malloc((size_t)n_vocab * sizeof *s->ord);
    s->count = calloc(n_vocab, sizeof *s->count);
    if (!s->z || !s->p || !s->kept || !s->heap || !s->ord || !s->count) {
        di_sampler_release(s);
        return DI_ERR_OUT_OF_MEMORY;
    }
    return DI_OK;
}

void di_sampler_release(di_sampler *s)
{
    free(s->z);
    free(s->p);
    free(s->kept);
    free(s->heap);
    free(s->ord);
    free(s->count);
    memset(s, 0, sizeof *s);
}

/* ---- the running canonical sum --------------------------------------------- */

void di_running_sum_init(di_running_sum *r)
{
    memset(r, 0, sizeof *r);
}

/* Term i goes to lane i % 32 of its chunk of DI_CHUNK terms; a finished
 * chunk is added into the totals (the first taken as it is), as di_host_sum. */
void di_running_sum_add(di_running_sum *r, float x)
{
    const uint32_t lane = r->n % DI_LANES;
    r->part[lane] = r->part[lane] + x;
    r->n++;
    if (r->n % DI_CHUNK == 0) {
        for (int l = 0; l < DI_LANES; l++) {
            r->done[l] = r->n == DI_CHUNK ? r->part[l] : r->done[l] + r->part[l];
            r->part[l] = 0.0f;
        }
    }
}

float di_running_sum_value(const di_running_sum *r)
{
    const int has_done = r->n >= DI_CHUNK, has_part = r->n % DI_CHUNK != 0;
    float lanes[DI_LANES];
    for (int l = 0; l < DI_LANES; l++)
        lanes[l] = !has_done ? r->part[l] : has_part ? r->done[l] + r->part[l] : r->done[l];
    return di_lane_tree(lanes);
}

/* Feeds x[0..n) until the running sum reaches the target (sum > target when
 * strict, sum >= target otherwise); returns how many terms that took, or 0
 * when all n were fed without reaching it. The sum of non-negative terms
 * never decreases, so it is read once per call and, when the block reached
 * the target, the block is fed again term by term from a saved state. */
static uint32_t feed_until(di_running_sum *r, const float *x, uint32_t n, float target, int strict)
{
    const di_running_sum before = *r;
    for (uint32_t i = 0; i < n; i++)
        di_running_sum_add(r, x[i]);
    float v = di_running_sum_value(r);
    if (strict ? !(v > target) : !(v >= target))
        return 0;
    *r = before;
    for (uint32_t i = 0; i < n; i++) {
        di_running_sum_add(r, x[i]);
        v = di_running_sum_value(r);
        if (strict ? v > target : v >= target)
            return i + 1;
    }
    return n; /* not reached: the block's sum is the same sum */
}

/* ---- the candidate order ----------------------------------------------------- */

/* 1 when candidate a comes before b: larger z first, then the lower id. */
static inline int before(const float *z, uint32_t a, uint32_t b)
{
    return z[a] > z[b] || (z[a] == z[b] && a < b);
}

typedef struct order {
    const float *z;
    uint32_t *heap, n_heap;
    uint32_t *ord, n_ord;
    uint32_t limit; /* top-k, or every candidate */
} order;

static void sift_down(order *o, uint32_t i)
{
    uint32_t *h = o->heap;
    const uint32_t item = h[i];
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= o->n_heap)
            break;
        if (child + 1 < o->n_heap && before(o->z, h[child + 1], h[child]))
            child++;
        if (!before(o->z, h[child], item))
            break;
        h[i] = h[child];
        i = child;
    }
    h[i] = item;
}

/* Takes candidates from the heap until `want` are in order (or none is
 * left within the limit); returns how many are. */
static uint32_t order_take(order *o, uint32_t want)
{
    if (want > o->limit)
        want = o->limit;
    while (o->n_ord < want) {
        o->ord[o->n_ord++] = o->heap[0];
        o->heap[0] = o->heap[--o->n_heap];
        if (o->n_heap > 0)
            sift_down(o, 0);
    }
    return o->n_ord;
}

uint32_t di_candidate_head(const float *x, uint32_t n, uint32_t want, uint32_t *heap, uint32_t *ord)
{
    order o = {.z = x, .heap = heap, .ord = ord};
    for (uint32_t v = 0; v < n; v++)
        if (x[v] == x[v])
            heap[o.n_heap++] = v;
    for (uint32_t i = o.n_heap / 2; i-- > 0;)
        sift_down(&o, i);
    o.limit = o.n_heap;
    return order_take(&o, want);
}

float di_softmax_weights(const float *z, uint32_t n, float max, float *w)
{
    for (uint32_t v = 0; v < n; v++)
        w[v] = z[v] != z[v] ? 0.0f : z[v] == max ? 1.0f : di_expf(z[v] - max);
    return di_host_sum(w, n);
}

/* ---- the steps --------------------------------------------------------------- */

/* Step 1: l = l > 0 ? l / repetition : l * repetition, then
 * l = l - (count * frequency + presence), for each distinct id of the window
 * (each changes only its own logit, so the order of the ids cannot matter). */
static void apply_penalties(di_sampler *s, const di_sampling_params *p, const int32_t *window,
                            uint32_t n_window)
{
    for (uint32_t i = 0; i < n_window; i++)
        s->count[window[i]]++;
    for (uint32_t i = 0; i < n_window; i++) {
        const int32_t v = window[i];
        const uint32_t c = s->count[v];
        if (c == 0)
            continue; /* done already */
        float x = s->z[v];
        x = x > 0.0f ? x / p->repetition_penalty : x * p->repetition_penalty;
        x = x - ((float)c * p->frequency_penalty + p->presence_penalty);
        s->z[v] = x;
        s->count[v] = 0;
    }
}

/* Steps 5 and 6 over the candidates in order: kept when among the first
 * n_top and p >= threshold. */
typedef struct kept_rule {
    uint32_t n_top;
    float threshold;
} kept_rule;

static int is_kept(const di_sampler *s, const kept_rule *k, uint32_t j)
{
    return j < k->n_top && s->p[s->ord[j]] >= k->threshold;
}

/* Step 6: the first kept candidate in order whose running sum exceeds
 * target; when rounding leaves every running sum at or below it, the last
 * kept candidate with p > 0. Walks 32 kept candidates at a time. */
static int32_t inverse_cdf(di_sampler *s, order *o, const kept_rule *k, float target)
{
    di_running_sum r;
    di_running_sum_init(&r);
    float block[DI_LANES];
    uint32_t block_ids[DI_LANES];
    int32_t last_positive = -1;
    uint32_t j = 0;
    for (;;) {
        uint32_t n = 0;
        while (n < DI_LANES && j < k->n_top && j < order_take(o, j + 1)) {
            if (is_kept(s, k, j)) {
                block_ids[n] = s->ord[j];
                block[n++] = s->p[s->ord[j]];
            }
            j++;
        }
        if (n == 0)
            break;
        const uint32_t used = feed_until(&r, block, n, target, 1);
        if (used > 0)
            return (int32_t)block_ids[used - 1];
        for (uint32_t i = 0; i < n; i++)
            if (block[i] > 0.0f)
                last_positive = (int32_t)block_ids[i];
    }
    return last_positive >= 0 ? last_positive : (int32_t)s->ord[0];
}

/* Step 5, top-p: the length of the shortest prefix of the order whose running
 * sum reaches top_p, or every candidate within the limit when none does. */
static uint32_t top_p_length(di_sampler *s, order *o, float top_p)
{
    di_running_sum r;
    di_running_sum_init(&r);
    float block[DI_LANES];
    uint32_t j = 0;
    for (;;) {
        const uint32_t have = order_take(o, j + DI_LANES); /* may hold more already (top-k) */
        if (have == j)
            return j;
        const uint32_t n = have - j < DI_LANES ? have - j : DI_LANES;
        for (uint32_t i = 0; i < n; i++)
            block[i] = s->p[s->ord[j + i]];
        const uint32_t used = feed_until(&r, block, n, top_p, 0);
        if (used > 0)
            return j + used;
        j += n;
    }
}

int32_t di_sample(di_sampler *s, const di_sampling_params *p, const float *logits,
                  const int32_t *window, uint32_t n_window, uint32_t position)
{
    const uint32_t n_vocab = s->n_vocab;
    memcpy(s->z, logits, (size_t)n_vocab * sizeof *s->z);
    if (has_penalties(p))
        apply_penalties(s, p, window, n_window);
    if (p->temperature == 0.0f)
        return (int32_t)di_host_argmax(s->z, n_vocab);

    /* step 2 and the candidates */
    order o = {.z = s->z, .heap = s->heap, .ord = s->ord};
    for (uint32_t v = 0; v < n_vocab; v++) {
        s->z[v] = s->z[v] / p->temperature;
        if (s->z[v] == s->z[v])
            s->heap[o.n_heap++] = v;
    }
    if (o.n_heap == 0)
        return 0; /* every logit NaN: as the greedy token */
    for (uint32_t i = o.n_heap / 2; i-- > 0;)
        sift_down(&o, i);
    o.limit = o.n_heap;
    if (p->top_k > 0 && (uint32_t)p->top_k < o.limit)
        o.limit = (uint32_t)p->top_k;
    const int top_k_cut = o.limit < o.n_heap;

    /* step 4: weights of the candidates within the top-k, +0 for the rest,
     * summed in token-id order */
    order_take(&o, top_k_cut ? o.limit : 1);
    const float max = s->z[s->ord[0]];
    if (top_k_cut) {
        memset(s->p, 0, (size_t)n_vocab * sizeof *s->p);
        for (uint32_t j = 0; j < o.n_ord; j++) {
            const uint32_t v = s->ord[j];
            s->p[v] = s->z[v] == max ? 1.0f : di_expf(s->z[v] - max);
        }
    }
    const float sum = top_k_cut ? di_host_sum(s->p, n_vocab) : di_softmax_weights(s->z, n_vocab, max, s->p);
    for (uint32_t v = 0; v < n_vocab; v++)
        s->p[v] = s->p[v] / sum;

    /* step 5 */
    kept_rule k = {.n_top = o.limit, .threshold = 0.0f};
    if (p->top_p < 1.0f)
        k.n_top = top_p_length(s, &o, p->top_p);
    if (p->min_p > 0.0f)
        k.threshold = p->min_p * s->p[s->ord[0]];

    /* step 6: the kept mass, summed in token-id order, scales the uniform */
    float mass;
    if (k.n_top == o.limit && k.threshold == 0.0f) {
        mass = di_host_sum(s->p, n_vocab); /* every candidate within the top-k */
    } else if (k.n_top == o.limit && !top_k_cut) {
        for (uint32_t v = 0; v < n_vocab; v++)
            s->kept[v] = s->p[v] >= k.threshold && s->z[v] == s->z[v] ? s->p[v] : 0.0f;
        mass = di_host_sum(s->kept, n_vocab);
    } else { /* the kept candidates are all in s->ord already */
        memset(s->kept, 0, (size_t)n_vocab * sizeof *s->kept);
        for (uint32_t j = 0; j < k.n_top; j++)
            if (is_kept(s, &k, j))
                s->kept[s->ord[j]] = s->p[s->ord[j]];
        mass = di_host_sum(s->kept, n_vocab);
    }
    const float target = di_sample_uniform(p->seed, position) * mass;
    return inverse_cdf(s, &o, &k, target);
}
