/*
 * check_sampling.c — seeded sampling (docs/DETERMINISM.md, "Sampling"):
 * Philox4x32-10 against Random123's known answers, the uniform rule, the
 * running canonical sum against di_cpu_sum, the parameters' checks and
 * messages, the distribution against the softmax (chi-square over fixed
 * seeds), the filters, penalties, and the greedy equivalences, on fixed
 * logits (the internal sampler) and on generated models (the public API),
 * and the library's draws against an independent float64 reference
 * (tests/sampling_reference.py: NumPy and a pure-Python Philox).
 * The determinism axes of sampled sequences are in check_determinism.c.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/common/numerics.h"
#include "lib/api/sampling.h"
#include "test_util.h"

/* ---- Philox4x32-10 and the uniform -------------------------------------------- */

/* Known answers of Random123 (D. E. Shaw Research), file tests/kat_vectors of
 * https://github.com/DEShawResearch/random123 (commit 9545ff6413f2), the three
 * "philox4x32 10" lines:
 *   philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8
 *   philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd
 *   philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1
 * Columns: counter (4 words), key (2 words), expected output (4 words). */
static const struct {
    uint32_t counter[4], key[2], want[4];
} PHILOX_KAT[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

START_TEST(test_philox_known_answers)
{
    uint32_t out[4];
    di_philox4x32_10(PHILOX_KAT[_i].counter, PHILOX_KAT[_i].key, out);
    for (int w = 0; w < 4; w++)
        ck_assert_msg(out[w] == PHILOX_KAT[_i].want[w], "vector %d word %d: %08x, want %08x", _i, w,
                      out[w], PHILOX_KAT[_i].want[w]);
}
END_TEST

/* u = (x[0] >> 8) * 2^-24 of counter {position, 0, 0, 0}, key {seed low, seed high}. */
START_TEST(test_uniform_rule)
{
    uint64_t rng = 3;
    int distinct_positions = 0;
    for (int i = 0; i < 2000; i++) {
        const uint64_t seed = tu_rand(&rng);
        const uint32_t position = (uint32_t)tu_rand(&rng);
        const uint32_t counter[4] = {position, 0, 0, 0}, key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
        uint32_t x[4];
        di_philox4x32_10(counter, key, x);
        const float u = di_sample_uniform(seed, position);
        ck_assert(u >= 0.0f && u < 1.0f);
        ck_assert_msg((double)u == ldexp((double)(x[0] >> 8), -24), "seed %llu position %u",
                      (unsigned long long)seed, position);
        distinct_positions += di_sample_uniform(seed, position) != di_sample_uniform(seed, position + 1);
    }
    ck_assert_int_ge(distinct_positions, 1990);
    /* the seed's high half counts */
    ck_assert(di_sample_uniform(1, 7) != di_sample_uniform(1 | (1ull << 32), 7));
}
END_TEST

/* The running sum after L terms is di_cpu_sum of those L terms, across chunks. */
START_TEST(test_running_sum_is_canonical)
{
    const uint32_t n = 2 * 1024 + 77;
    float *x = malloc(n * sizeof *x);
    uint64_t rng = 11 + (uint64_t)_i;
    for (uint32_t i = 0; i < n; i++) /* magnitudes over many binades, zeros among them */
        x[i] = (tu_rand(&rng) % 7 == 0) ? 0.0f : ldexpf((float)(tu_rand(&rng) % 1000), -(int)(tu_rand(&rng) % 30));
    di_running_sum r;
    di_running_sum_init(&r);
    ck_assert(di_running_sum_value(&r) == 0.0f);
    for (uint32_t i = 0; i < n; i++) {
        di_running_sum_add(&r, x[i]);
        const float want = di_cpu_sum(x, i + 1), got = di_running_sum_value(&r);
        ck_assert_msg(di_bits_from_float(want) == di_bits_from_float(got), "after %u terms: %a, want %a",
                      i + 1, (double)got, (double)want);
    }
    free(x);
}
END_TEST

/* ---- parameters ------------------------------------------------------------------ */

START_TEST(test_params_init_defaults)
{
    di_sampling_params p;
    memset(&p, 0xab, sizeof p);
    ck_assert_int_eq(di_sampling_params_init(&p), DI_OK);
    ck_assert_uint_eq(p.size, sizeof p);
    ck_assert(p.temperature == 0.0f && p.top_k == 0 && p.top_p == 1.0f && p.min_p == 0.0f);
    ck_assert(p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f);
    ck_assert_uint_eq(p.penalty_window, 64);
    ck_assert_uint_eq(p.seed, 0);
    ck_assert_int_eq(di_sampling_params_init(NULL), DI_ERR_INVALID_ARGUMENT);
}
END_TEST

typedef enum field {
    F_TEMPERATURE, F_TOP_K, F_TOP_P, F_MIN_P, F_REPETITION, F_PRESENCE, F_FREQUENCY, F_SIZE
} field;

/* A bad value of one field; needle: what the message must contain (the name and the value). */
static const struct {
    field field;
    double value;
    const char *needle;
} BAD[] = {
    {F_TEMPERATURE, NAN, "temperature = nan"},
    {F_TEMPERATURE, INFINITY, "temperature = inf"},
    {F_TEMPERATURE, -0.5, "temperature = -0.5"},
    {F_TEMPERATURE, -1e-30, "temperature = -1e-30"},
    {F_TOP_K, -1, "top_k = -1"},
    {F_TOP_K, INT32_MIN, "top_k = -2147483648"},
    {F_TOP_P, 0.0, "top_p = 0:"},
    {F_TOP_P, -0.25, "top_p = -0.25"},
    {F_TOP_P, 1.5, "top_p = 1.5"},
    {F_TOP_P, NAN, "top_p = nan"},
    {F_TOP_P, INFINITY, "top_p = inf"},
    {F_MIN_P, -0.1, "min_p = -0.1"},
    {F_MIN_P, 1.25, "min_p = 1.25"},
    {F_MIN_P, NAN, "min_p = nan"},
    {F_REPETITION, 0.0, "repetition_penalty = 0:"},
    {F_REPETITION, -1.5, "repetition_penalty = -1.5"},
    {F_REPETITION, NAN, "repetition_penalty = nan"},
    {F_REPETITION, INFINITY, "repetition_penalty = inf"},
    {F_PRESENCE, NAN, "presence_penalty = nan"},
    {F_PRESENCE, -INFINITY, "presence_penalty = -inf"},
    {F_FREQUENCY, INFINITY, "frequency_penalty = inf"},
    {F_FREQUENCY, NAN, "frequency_penalty = nan"},
    {F_SIZE, 0, "size = 0:"},
    {F_SIZE, 4, "size = 4:"},
    {F_SIZE, sizeof(di_sampling_params) - 1, "size = "},
    {F_SIZE, 1u << 20, "size = 1048576"},
};

static void set_field(di_sampling_params *p, field f, double v)
{
    switch (f) {
    case F_TEMPERATURE: p->temperature = (float)v; break;
    case F_TOP_K: p->top_k = (int32_t)v; break;
    case F_TOP_P: p->top_p = (float)v; break;
    case F_MIN_P: p->min_p = (float)v; break;
    case F_REPETITION: p->repetition_penalty = (float)v; break;
    case F_PRESENCE: p->presence_penalty = (float)v; break;
    case F_FREQUENCY: p->frequency_penalty = (float)v; break;
    case F_SIZE: p->size = (uint32_t)v; break;
    }
}

/* Steps a prompt into seq 0 of a fresh session on the model. */
static di_session *session_with_prompt(const di_model *m, const char *name, uint32_t max_seq)
{
    int32_t prompt[64];
    const uint32_t n = tu_read_prompt(name, prompt, 64);
    di_session *s = tu_session(m, 1, (int)max_seq, 0);
    for (uint32_t q = 0; q < max_seq; q++)
        tu_step(s, q, prompt, n, 0);
    return s;
}

static int32_t sample(di_session *s, uint32_t seq)
{
    int32_t t = -1;
    di_status st = di_session_sample_token(s, seq, &t);
    ck_assert_msg(st == DI_OK, "sample: %s: %s", di_status_name(st), di_session_errmsg(s));
    return t;
}

static void set_sampling(di_session *s, uint32_t seq, const di_sampling_params *p)
{
    di_status st = di_session_seq_set_sampling(s, seq, p);
    ck_assert_msg(st == DI_OK, "set_sampling: %s: %s", di_status_name(st), di_session_errmsg(s));
}

/* Each bad value: DI_ERR_INVALID_ARGUMENT, a message naming it, nothing changed. */
START_TEST(test_bad_parameter)
{
    di_model *m = tu_load("gqa_untied_f32");
    di_session *s = session_with_prompt(m, "gqa_untied_f32", 1);
    di_sampling_params good;
    di_sampling_params_init(&good);
    good.temperature = 5.0f;
    good.seed = 7;
    set_sampling(s, 0, &good);
    const int32_t want = sample(s, 0);

    di_sampling_params p;
    di_sampling_params_init(&p);
    set_field(&p, BAD[_i].field, BAD[_i].value);
    di_status st = di_session_seq_set_sampling(s, 0, &p);
    ck_assert_msg(st == DI_ERR_INVALID_ARGUMENT, "%s: %s", BAD[_i].needle, di_status_name(st));
    const char *msg = di_session_errmsg(s);
    ck_assert_msg(strstr(msg, BAD[_i].needle) != NULL, "message '%s' lacks '%s'", msg, BAD[_i].needle);
    /* the sequence keeps its parameters: the same token over several seeds' worth */
    ck_assert_int_eq(sample(s, 0), want);
    good.seed = 8;
    set_sampling(s, 0, &good);
    const int32_t other = sample(s, 0);
    ck_assert_int_eq(di_session_seq_set_sampling(s, 0, &p), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sample(s, 0), other);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* The size field: a later release's larger struct with zero in the fields
 * this library does not know is accepted, a set unknown byte is not. */
START_TEST(test_params_size_rules)
{
    di_model *m = tu_load("gqa_untied_f32");
    di_session *s = session_with_prompt(m, "gqa_untied_f32", 1);
    struct {
        di_sampling_params p;
        uint64_t later_field;
    } newer;
    memset(&newer, 0, sizeof newer);
    di_sampling_params_init(&newer.p);
    newer.p.size = sizeof newer;
    ck_assert_int_eq(di_session_seq_set_sampling(s, 0, &newer.p), DI_OK);
    newer.later_field = 1;
    ck_assert_int_eq(di_session_seq_set_sampling(s, 0, &newer.p), DI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(di_session_errmsg(s), "size"));
    /* NULL session, bad sequence id, NULL out pointer */
    ck_assert_int_eq(di_session_seq_set_sampling(NULL, 0, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_set_sampling(s, 1, NULL), DI_ERR_SEQUENCE);
    int32_t t;
    ck_assert_int_eq(di_session_sample_token(NULL, 0, &t), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_sample_token(s, 0, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_sample_token(s, 5, &t), DI_ERR_SEQUENCE);
    /* no logits yet: DI_ERR_STATE, as for the greedy token */
    ck_assert_int_eq(di_session_seq_reset(s, 0), DI_OK);
    ck_assert_int_eq(di_session_sample_token(s, 0, &t), DI_ERR_STATE);
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* ---- greedy equivalences on the models ----------------------------------------------- */

/* Decodes n tokens of seq with sample_token and checks each against
 * greedy_token of the same logits. */
static void expect_greedy(di_session *s, uint32_t seq, int n, const char *what)
{
    for (int d = 0; d < n; d++) {
        int32_t g, t = sample(s, seq);
        ck_assert_int_eq(di_session_greedy_token(s, seq, &g), DI_OK);
        ck_assert_msg(t == g, "%s: step %d: sampled %d, greedy %d", what, d, t, g);
        tu_step(s, seq, &t, 1, 0);
    }
}

START_TEST(test_defaults_are_greedy)
{
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    di_session *s = session_with_prompt(m, name, 3);
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.seed = 12345; /* unused by greedy */
    set_sampling(s, 1, &p);
    set_sampling(s, 2, NULL);
    expect_greedy(s, 0, 8, "never set");
    expect_greedy(s, 1, 8, "di_sampling_params_init");
    expect_greedy(s, 2, 8, "NULL");
    di_session_free(s);
    di_model_free(m);
}
END_TEST

START_TEST(test_temperature_zero_and_top_k_one_are_greedy)
{
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    di_session *s = session_with_prompt(m, name, 2);
    di_sampling_params zero, top1;
    di_sampling_params_init(&zero);
    zero.top_k = 3; /* filters and seed do not matter at temperature 0 */
    zero.top_p = 0.5f;
    zero.min_p = 0.2f;
    zero.seed = 77;
    set_sampling(s, 0, &zero);
    expect_greedy(s, 0, 8, "temperature 0");
    di_sampling_params_init(&top1);
    top1.top_k = 1;
    static const float temperatures[] = {0.25f, 0.7f, 1.0f, 2.0f};
    for (int k = 0; k < 4; k++) {
        top1.temperature = temperatures[k];
        top1.seed = (uint64_t)k * 1000003u;
        set_sampling(s, 1, &top1);
        expect_greedy(s, 1, 4, "top_k 1");
    }
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* Calling it twice, or after greedy_token, gives the same token. */
START_TEST(test_sample_is_repeatable)
{
    di_model *m = tu_load("gemma3_f32");
    di_session *s = session_with_prompt(m, "gemma3_f32", 1);
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.temperature = 1.5f;
    p.top_p = 0.95f;
    for (uint64_t seed = 0; seed < 32; seed++) {
        p.seed = seed;
        set_sampling(s, 0, &p);
        const int32_t a = sample(s, 0);
        int32_t g;
        ck_assert_int_eq(di_session_greedy_token(s, 0, &g), DI_OK);
        ck_assert_int_eq(sample(s, 0), a);
    }
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* ---- fixed logits: distribution, filters, penalties ------------------------------------ */

/* double-precision softmax of logits / temperature over the ids in keep[] */
static void softmax_ref(const float *logits, uint32_t n, float temperature, const int *keep, double *prob)
{
    double max = -INFINITY, sum = 0;
    for (uint32_t i = 0; i < n; i++)
        if (keep[i] && (double)logits[i] / temperature > max)
            max = (double)logits[i] / temperature;
    for (uint32_t i = 0; i < n; i++) {
        prob[i] = keep[i] ? exp((double)logits[i] / temperature - max) : 0.0;
        sum += prob[i];
    }
    for (uint32_t i = 0; i < n; i++)
        prob[i] /= sum;
}

/* Chi-square critical values at p = 0.001 for 1..11 degrees of freedom. */
static const double CHI2_999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26};

/* Logits whose order is 0, 1, 3, 6, 2, 4, 5, 7, 8, 9; at temperature 1 the
 * probabilities are .344 .255 .057 .171 .042 .026 .070 .016 .012 .009, so
 * the running sums in order are .344 .599 .770 .839 .896 ...:
 *   top_k 4 keeps {0, 1, 3, 6};
 *   top_p 0.85 keeps the prefix up to .896: {0, 1, 3, 6, 2};
 *   min_p 0.25 keeps p >= .086: {0, 1, 3};
 *   top_k 4 then top_p 0.7: within the top 4 the probabilities are
 *   .410 .304 .204 .083, sums .410 .714: {0, 1}.
 * Every cut is at least .01 away from a running sum. */
static const float DIST_LOGITS[10] = {2.0f, 1.7f, 0.2f, 1.3f, -0.1f, -0.6f, 0.4f, -1.1f, -1.4f, -1.6f};

static const struct {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
    int keep[10]; /* the tokens the filters keep */
} DISTRIBUTION[] = {
    {1.0f, 0, 1.0f, 0.0f, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {0.7f, 0, 1.0f, 0.0f, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {2.5f, 0, 1.0f, 0.0f, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {1.0f, 4, 1.0f, 0.0f, {1, 1, 0, 1, 0, 0, 1, 0, 0, 0}},
    {1.0f, 0, 0.85f, 0.0f, {1, 1, 1, 1, 0, 0, 1, 0, 0, 0}},
    {1.0f, 0, 1.0f, 0.25f, {1, 1, 0, 1, 0, 0, 0, 0, 0, 0}},
    {1.0f, 4, 0.7f, 0.0f, {1, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
};

START_TEST(test_distribution_chi_square)
{
    const uint32_t n = 10, draws = 20000;
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.temperature = DISTRIBUTION[_i].temperature;
    p.top_k = DISTRIBUTION[_i].top_k;
    p.top_p = DISTRIBUTION[_i].top_p;
    p.min_p = DISTRIBUTION[_i].min_p;
    double prob[10];
    softmax_ref(DIST_LOGITS, n, p.temperature, DISTRIBUTION[_i].keep, prob);
    di_sampler sampler;
    ck_assert_int_eq(di_sampler_init(&sampler, n), DI_OK);
    uint32_t count[10] = {0};
    for (uint32_t d = 0; d < draws; d++) {
        p.seed = 0x5eed0000u + d; /* fixed seeds: the test always draws the same */
        const int32_t t = di_sample(&sampler, &p, DIST_LOGITS, NULL, 0, 17);
        ck_assert(t >= 0 && (uint32_t)t < n);
        ck_assert_msg(DISTRIBUTION[_i].keep[t], "token %d is filtered out but was drawn", t);
        count[t]++;
    }
    di_sampler_release(&sampler);
    double chi2 = 0;
    int df = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!DISTRIBUTION[_i].keep[i])
            continue;
        const double e = prob[i] * draws;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    ck_assert_msg(chi2 < CHI2_999[df], "chi-square %.2f with %d degrees of freedom (bound %.2f)", chi2, df,
                  CHI2_999[df]);
}
END_TEST

/* The same over positions with one seed (the other half of the key). */
START_TEST(test_distribution_over_positions)
{
    const uint32_t n = 10, draws = 20000;
    static const int all[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.temperature = 1.0f;
    p.seed = 424242;
    double prob[10];
    softmax_ref(DIST_LOGITS, n, 1.0f, all, prob);
    di_sampler sampler;
    ck_assert_int_eq(di_sampler_init(&sampler, n), DI_OK);
    uint32_t count[10] = {0};
    for (uint32_t d = 0; d < draws; d++)
        count[di_sample(&sampler, &p, DIST_LOGITS, NULL, 0, d)]++;
    di_sampler_release(&sampler);
    double chi2 = 0;
    for (uint32_t i = 0; i < n; i++)
        chi2 += (count[i] - prob[i] * draws) * (count[i] - prob[i] * draws) / (prob[i] * draws);
    ck_assert_msg(chi2 < CHI2_999[9], "chi-square %.2f", chi2);
}
END_TEST

/* Random logits (NaN and -inf among them) and random filters: a drawn token
 * is never one the filters must exclude. The reference works in double and
 * leaves a margin of 1e-4 at each cut, which float rounding cannot cross. */
START_TEST(test_filters_never_emit_excluded)
{
    const uint32_t n = 300;
    float logits[300];
    double z[300];
    uint32_t rank[300];
    uint64_t rng = 900 + (uint64_t)_i;
    di_sampler sampler;
    ck_assert_int_eq(di_sampler_init(&sampler, n), DI_OK);
    for (int trial = 0; trial < 40; trial++) {
        for (uint32_t i = 0; i < n; i++)
            logits[i] = (float)((double)(tu_rand(&rng) % 2000) / 200.0 - 5.0);
        logits[tu_rand(&rng) % n] = NAN;
        logits[tu_rand(&rng) % n] = -INFINITY;
        di_sampling_params p;
        di_sampling_params_init(&p);
        p.temperature = 0.3f + (float)(tu_rand(&rng) % 30) / 10.0f;
        p.top_k = (tu_rand(&rng) % 2) ? (int32_t)(1 + tu_rand(&rng) % 50) : 0;
        p.top_p = (tu_rand(&rng) % 2) ? 0.05f + (float)(tu_rand(&rng) % 90) / 100.0f : 1.0f;
        p.min_p = (tu_rand(&rng) % 2) ? (float)(tu_rand(&rng) % 60) / 100.0f : 0.0f;
        /* the reference order and probabilities (top-k set) */
        uint32_t n_cand = 0;
        for (uint32_t i = 0; i < n; i++)
            if (logits[i] == logits[i])
                rank[n_cand++] = i;
        for (uint32_t i = 0; i < n; i++)
            z[i] = (double)(logits[i] / p.temperature); /* the float division, as the library */
        for (uint32_t a = 1; a < n_cand; a++) /* insertion sort: z desc, id asc */
            for (uint32_t b = a; b > 0 && (z[rank[b]] > z[rank[b - 1]] ||
                                           (z[rank[b]] == z[rank[b - 1]] && rank[b] < rank[b - 1]));
                 b--) {
                uint32_t tmp = rank[b];
                rank[b] = rank[b - 1];
                rank[b - 1] = tmp;
            }
        const uint32_t k = p.top_k > 0 && (uint32_t)p.top_k < n_cand ? (uint32_t)p.top_k : n_cand;
        double prob[300] = {0}, sum = 0, cum = 0;
        for (uint32_t j = 0; j < k; j++)
            sum += (prob[rank[j]] = exp(z[rank[j]] - z[rank[0]]));
        int surely_out[300] = {0};
        for (uint32_t j = 0; j < n; j++)
            surely_out[j] = 1;
        for (uint32_t j = 0; j < k; j++) {
            const uint32_t v = rank[j];
            prob[v] /= sum;
            surely_out[v] = (p.top_p < 1.0f && cum >= p.top_p + 1e-4) ||
                            prob[v] < p.min_p * prob[rank[0]] * (1 - 1e-4) || prob[v] == 0;
            cum += prob[v];
        }
        for (int d = 0; d < 50; d++) {
            p.seed = tu_rand(&rng);
            const int32_t t = di_sample(&sampler, &p, logits, NULL, 0, (uint32_t)d);
            ck_assert(t >= 0 && (uint32_t)t < n);
            ck_assert_msg(!surely_out[t],
                          "trial %d: token %d (p %.6f) drawn with top_k %d top_p %g min_p %g", trial, t,
                          prob[t], p.top_k, (double)p.top_p, (double)p.min_p);
        }
    }
    di_sampler_release(&sampler);
}
END_TEST

/* Penalties, worked out by hand at temperature 0 (the argmax shows them):
 * l = l > 0 ? l / repetition : l * repetition; l -= count * frequency + presence. */
START_TEST(test_penalties)
{
    /*                  id:  0     1     2     3      4 */
    const float logits[5] = {3.0f, 2.5f, 2.0f, -1.0f, 2.9f};
    const int32_t win[] = {0, 4, 0, 3}; /* counts: id 0 twice, ids 3 and 4 once */
    di_sampler sampler;
    ck_assert_int_eq(di_sampler_init(&sampler, 5), DI_OK);
    di_sampling_params p;
    di_sampling_params_init(&p);
    ck_assert_int_eq(di_sample(&sampler, &p, logits, win, 4, 0), 0);
    /* repetition 1.25: 3.0 -> 2.4 and 2.9 -> 2.32, both below 2.5 */
    p.repetition_penalty = 1.25f;
    ck_assert_int_eq(di_sample(&sampler, &p, logits, win, 4, 0), 1);
    /* a negative logit is multiplied: -1.0 * 1.5 = -1.5 falls below -1.2
     * (divided, it would rise to -0.67 and stay first) */
    const float negative[5] = {-1.0f, -1.2f, -3.0f, -5.0f, -6.0f};
    p.repetition_penalty = 1.5f;
    ck_assert_int_eq(di_sample(&sampler, &p, negative, win, 1, 0), 1);
    /* presence 0.45: ids 0 and 4 become 2.55 and 2.45, 0 stays first; 0.55: 2.45 and 2.35 -> 1 */
    di_sampling_params_init(&p);
    p.presence_penalty = 0.45f;
    ck_assert_int_eq(di_sample(&sampler, &p, logits, win, 4, 0), 0);
    p.presence_penalty = 0.55f;
    ck_assert_int_eq(di_sample(&sampler, &p, logits, win, 4, 0), 1);
    /* frequency 0.25: id 0 (twice) 2.5, id 4 (once) 2.65 -> 4 */
    di_sampling_params_init(&p);
    p.frequency_penalty = 0.25f;
    ck_assert_int_eq(di_sample(&sampler, &p, logits, win, 4, 0), 4);
    /* only the window counts: its last three tokens hold ids 0 and 4 once -> 2.75 > 2.65 */
    ck_assert_int_eq(di_sample(&sampler, &p, logits, win + 1, 3, 0), 0);
    /* a negative frequency rewards: id 3 once with -4.5 -> 3.5, first */
    p.frequency_penalty = -4.5f;
    ck_assert_int_eq(di_sample(&sampler, &p, logits, win + 3, 1, 0), 3);
    /* the caller's logits are not changed */
    ck_assert(logits[0] == 3.0f && logits[3] == -1.0f && logits[4] == 2.9f);
    di_sampler_release(&sampler);
}
END_TEST

/* Rows with NaN and infinities: NaN is never drawn, +inf wins, a row of NaN gives 0. */
START_TEST(test_special_values)
{
    di_sampler sampler;
    ck_assert_int_eq(di_sampler_init(&sampler, 4), DI_OK);
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.temperature = 1.0f;
    const float nan_row[4] = {NAN, NAN, NAN, NAN};
    const float inf_row[4] = {1.0f, INFINITY, NAN, INFINITY};
    const float neg_row[4] = {-INFINITY, NAN, -INFINITY, -INFINITY};
    int seen[4] = {0};
    for (uint64_t seed = 0; seed < 200; seed++) {
        p.seed = seed;
        ck_assert_int_eq(di_sample(&sampler, &p, nan_row, NULL, 0, 0), 0);
        const int32_t t = di_sample(&sampler, &p, inf_row, NULL, 0, 0);
        ck_assert(t == 1 || t == 3);
        seen[t]++;
        const int32_t u = di_sample(&sampler, &p, neg_row, NULL, 0, 0);
        ck_assert(u != 1);
    }
    ck_assert(seen[1] > 50 && seen[3] > 50); /* the +inf tokens share the draws */
    di_sampler_release(&sampler);
}
END_TEST

/* Same seed, same tokens; other seeds, other tokens (on a model, over many seeds). */
START_TEST(test_seeds)
{
    enum { N_SEEDS = 64, N_GEN = 12 };
    di_model *m = tu_load("gqa_untied_f32");
    int32_t prompt[64];
    const uint32_t n_prompt = tu_read_prompt("gqa_untied_f32", prompt, 64);
    static int32_t gen[2][N_SEEDS][N_GEN];
    for (int run = 0; run < 2; run++) {
        di_session *s = tu_session(m, run + 1, 1, 0);
        for (int k = 0; k < N_SEEDS; k++) {
            ck_assert_int_eq(di_session_seq_reset(s, 0), DI_OK);
            di_sampling_params p;
            di_sampling_params_init(&p);
            p.temperature = 1.5f;
            p.seed = (uint64_t)k * 0x9e3779b97f4a7c15ull;
            set_sampling(s, 0, &p);
            tu_step(s, 0, prompt, n_prompt, 0);
            for (int d = 0; d < N_GEN; d++) {
                gen[run][k][d] = sample(s, 0);
                tu_step(s, 0, &gen[run][k][d], 1, 0);
            }
        }
        di_session_free(s);
    }
    int distinct = 0;
    for (int k = 0; k < N_SEEDS; k++) {
        ck_assert_msg(!memcmp(gen[0][k], gen[1][k], sizeof gen[0][k]), "seed %d differs between runs", k);
        int unique = 1;
        for (int j = 0; j < k; j++)
            unique &= memcmp(gen[0][k], gen[0][j], sizeof gen[0][k]) != 0;
        distinct += unique;
    }
    /* 12 tokens at temperature 1.5 over 128: a collision of two seeds would be a freak */
    ck_assert_int_ge(distinct, N_SEEDS - 1);
    di_model_free(m);
}
END_TEST

/* The penalty window is the sequence's own history, via the public API: a
 * huge presence penalty over the whole sequence forbids every token in it. */
START_TEST(test_penalties_use_the_sequence)
{
    di_model *m = tu_load("gqa_untied_f32");
    di_session *s = session_with_prompt(m, "gqa_untied_f32", 1);
    int32_t history[64 + 8];
    uint32_t n = tu_read_prompt("gqa_untied_f32", history, 64);
    di_sampling_params p;
    di_sampling_params_init(&p);
    p.presence_penalty = 1e30f;
    p.penalty_window = 0; /* the whole sequence */
    set_sampling(s, 0, &p);
    for (int d = 0; d < 8; d++) {
        const int32_t t = sample(s, 0);
        for (uint32_t i = 0; i < n; i++)
            ck_assert_msg(t != history[i], "step %d: token %d is in the sequence", d, t);
        tu_step(s, 0, &t, 1, 0);
        history[n++] = t;
    }
    di_session_free(s);
    di_model_free(m);
}
END_TEST

/* The library's tokens against tests/sampling_reference.py on five models
 * (the shared library of this build, DI_TEST_SHARED, loaded by Python's ctypes). */
START_TEST(test_against_python_reference)
{
    const char *root = getenv("DI_TEST_ROOT"), *lib = getenv("DI_TEST_SHARED"), *san = getenv("DI_TEST_SANITIZE");
    ck_assert_msg(root && lib, "DI_TEST_ROOT / DI_TEST_SHARED are not set (run the suite with make check)");
    if (san && *san) {
        fprintf(stderr, "sampling: the Python reference is not run under the sanitizers (Python cannot "
                        "load the instrumented library)\n");
        return;
    }
    static const char *const names[] = {"gqa_untied_f32", "mha_tied_q4_0", "odd_f32", "qwen2_q8_0",
                                        "gemma3_q8_0"};
    char cmd[8192];
    int at = snprintf(cmd, sizeof cmd, "python3 '%s/tests/sampling_reference.py' '%s'", root, lib);
    for (int i = 0; i < 5; i++)
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, " '%s'", tu_model_path(names[i], ".gguf"));
    snprintf(cmd + at, sizeof cmd - (size_t)at, " 2>&1");
    FILE *f = popen(cmd, "r");
    ck_assert(f != NULL);
    char line[512];
    int models = 0;
    while (fgets(line, sizeof line, f)) {
        fputs(line, stderr);
        models += strncmp(line, "sampling reference ", 19) == 0;
    }
    const int status = pclose(f);
    ck_assert_msg(status == 0, "tests/sampling_reference.py failed (status %d)", status);
    ck_assert_int_eq(models, 5);
}
END_TEST

#define LOOP(tc, test, array) tcase_add_loop_test(tc, test, 0, (int)(sizeof array / sizeof array[0]))

Suite *sampling_suite(void)
{
    Suite *s = suite_create("sampling");
    TCase *rng = tcase_create("rng");
    LOOP(rng, test_philox_known_answers, PHILOX_KAT);
    tcase_add_test(rng, test_uniform_rule);
    tcase_add_loop_test(rng, test_running_sum_is_canonical, 0, 3);
    suite_add_tcase(s, rng);

    TCase *params = tcase_create("params");
    tcase_set_timeout(params, 60);
    tcase_add_test(params, test_params_init_defaults);
    LOOP(params, test_bad_parameter, BAD);
    tcase_add_test(params, test_params_size_rules);
    suite_add_tcase(s, params);

    TCase *greedy = tcase_create("greedy");
    tcase_set_timeout(greedy, 120);
    tcase_add_loop_test(greedy, test_defaults_are_greedy, 0, tu_n_models());
    tcase_add_loop_test(greedy, test_temperature_zero_and_top_k_one_are_greedy, 0, tu_n_models());
    tcase_add_test(greedy, test_sample_is_repeatable);
    suite_add_tcase(s, greedy);

    TCase *dist = tcase_create("distribution");
    tcase_set_timeout(dist, 120);
    LOOP(dist, test_distribution_chi_square, DISTRIBUTION);
    tcase_add_test(dist, test_distribution_over_positions);
    tcase_add_loop_test(dist, test_filters_never_emit_excluded, 0, 4);
    tcase_add_test(dist, test_penalties);
    tcase_add_test(dist, test_special_values);
    tcase_add_test(dist, test_seeds);
    tcase_add_test(dist, test_penalties_use_the_sequence);
    tcase_add_test(dist, test_against_python_reference);
    suite_add_tcase(s, dist);
    return s;
}
