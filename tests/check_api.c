/*
 * check_api.c — the public API used wrongly: NULL handles and out pointers,
 * out-of-range settings, sampling keys, impossible steps and calls in the
 * wrong order each give their documented status and leave state as it was.
 * A few behavioural checks (reset, copy, all-logits rows, digests) run on a
 * tiny valid model that gguf_builder writes and the fixture loads.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detinfer.h"
#include "gguf_builder.h"
#include "test_util.h"

#define ERRBUF_SIZE 512
#define N_VOCAB 16 /* of the builder's tiny model */
#define EMPTY_XXH128 "99aa06d3014798d86001c324468d497f" /* xxh128sum of no bytes */

/* ---- fixture: the tiny model ------------------------------------------------ */

static di_model *g_model;

/* Writes the model, loads it and removes the file at once: the mapping stays
 * valid, and a failing test cannot leave files behind. */
static void load_tiny_model(void)
{
    g_model = tu_tiny_model();
}

static void free_tiny_model(void)
{
    di_model_free(g_model);
    g_model = NULL;
}

/* ---- helpers ---------------------------------------------------------------- */

/* A session with max_sequences and context length set (0: defaults). The
 * config is freed at once: the session must have copied what it needs. */
static di_session *new_session(int64_t max_sequences, int64_t context_length)
{
    di_config *c = NULL;
    di_session *s = NULL;
    char err[ERRBUF_SIZE] = "";
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    if (max_sequences)
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, max_sequences), DI_OK);
    if (context_length)
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, context_length), DI_OK);
    di_status st = di_session_create(g_model, c, &s, err, sizeof err);
    di_config_free(c);
    ck_assert_msg(st == DI_OK, "session: %s: %s", di_status_name(st), err);
    return s;
}

/* One entry: n tokens appended to seq. */
static di_status step_one(di_session *s, uint32_t seq, const int32_t *tokens, uint32_t n,
                          uint32_t flags)
{
    return di_session_step(s, 1, &seq, &n, tokens, flags);
}

static void expect_step_ok(di_session *s, uint32_t seq, const int32_t *tokens, uint32_t n,
                           uint32_t flags)
{
    di_status st = step_one(s, seq, tokens, n, flags);
    ck_assert_msg(st == DI_OK, "step: %s: %s", di_status_name(st), di_session_errmsg(s));
}

static uint32_t seq_length(di_session *s, uint32_t seq)
{
    uint32_t n = UINT32_MAX;
    ck_assert_int_eq(di_session_seq_length(s, seq, &n), DI_OK);
    return n;
}

static di_digest logits_digest(di_session *s, uint32_t seq)
{
    const float *logits = NULL;
    di_digest d;
    di_status st = di_session_logits(s, seq, &logits, &d);
    ck_assert_msg(st == DI_OK, "logits of %u: %s", seq, di_status_name(st));
    ck_assert_ptr_nonnull(logits);
    return d;
}

static di_digest seq_digest(di_session *s, uint32_t seq)
{
    di_digest d;
    ck_assert_int_eq(di_session_seq_digest(s, seq, &d), DI_OK);
    return d;
}

static void expect_status(di_status got, di_status want, const char *what)
{
    ck_assert_msg(got == want, "%s: %s, expected %s", what, di_status_name(got),
                  di_status_name(want));
}

/* A failed session call leaves a message; expects both. */
static void expect_failure(di_session *s, di_status got, di_status want, const char *what)
{
    expect_status(got, want, what);
    ck_assert_msg(di_session_errmsg(s)[0] != '\0', "%s: no session message", what);
}

/* ---- status names, version, digests ---------------------------------------- */

START_TEST(test_status_names)
{
    enum { LAST = DI_ERR_GRAMMAR_REJECTED }; /* the highest code the header defines */
    const char *names[LAST + 1];
    for (int code = 0; code <= LAST; code++) {
        names[code] = di_status_name((di_status)code);
        ck_assert_msg(names[code] != NULL, "code %d has no name", code);
        ck_assert_msg(strncmp(names[code], "DI_", 3) == 0, "code %d: '%s'", code, names[code]);
        ck_assert_str_ne(names[code], "DI_STATUS_UNKNOWN");
        for (int other = 0; other < code; other++)
            ck_assert_msg(strcmp(names[code], names[other]) != 0, "codes %d and %d share '%s'",
                          other, code, names[code]);
    }
    ck_assert_str_eq(di_status_name(DI_OK), "DI_OK");
    ck_assert_str_eq(di_status_name(DI_ERR_FORMAT), "DI_ERR_FORMAT");
    ck_assert_str_eq(di_status_name(DI_ERR_INTERNAL), "DI_ERR_INTERNAL");
    ck_assert_str_eq(di_status_name((di_status)(LAST + 1)), "DI_STATUS_UNKNOWN");
    ck_assert_str_eq(di_status_name((di_status)-1), "DI_STATUS_UNKNOWN");
    ck_assert_str_eq(di_status_name((di_status)1000), "DI_STATUS_UNKNOWN");
}
END_TEST

START_TEST(test_version)
{
    ck_assert_uint_eq(di_version_number(), DI_VERSION_NUMBER);
    ck_assert_str_eq(di_version_string(), DI_VERSION_STRING);
    ck_assert_ptr_nonnull(di_build_info());
    ck_assert_uint_gt(strlen(di_build_info()), 0);
}
END_TEST

START_TEST(test_digest_format)
{
    di_digest d;
    char hex[DI_DIGEST_HEX_SIZE];
    for (int i = 0; i < 16; i++)
        d.bytes[i] = (uint8_t)(i * 0x11 + (i == 0 ? 0 : 0x0a)); /* 00 1b 2c ... with a-f digits */
    memset(hex, 'X', sizeof hex);
    ck_assert_int_eq(di_digest_format(&d, hex), DI_OK);
    ck_assert_uint_eq(strlen(hex), 32);
    for (int i = 0; i < 32; i++)
        ck_assert_msg(isdigit((unsigned char)hex[i]) || (hex[i] >= 'a' && hex[i] <= 'f'),
                      "'%s' is not lowercase hex", hex);
    ck_assert_mem_eq(hex, "001b2c3d4e5f", 12); /* bytes in order, high nibble first */
    ck_assert_int_eq(di_digest_format(NULL, hex), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_digest_format(&d, NULL), DI_ERR_INVALID_ARGUMENT);
}
END_TEST

static void expect_hex(const di_digest *d, const char *want)
{
    char hex[DI_DIGEST_HEX_SIZE];
    ck_assert_int_eq(di_digest_format(d, hex), DI_OK);
    ck_assert_str_eq(hex, want);
}

/* Reference values from xxh128sum of the same little-endian bytes. */
START_TEST(test_digest_values)
{
    const int32_t tokens[3] = {1, 2, 3};
    const float floats[3] = {1.0f, -2.5f, 0.0f};
    di_digest d;
    ck_assert_int_eq(di_digest_tokens(tokens, 0, &d), DI_OK);
    expect_hex(&d, EMPTY_XXH128);
    ck_assert_int_eq(di_digest_floats(floats, 0, &d), DI_OK);
    expect_hex(&d, EMPTY_XXH128);
    ck_assert_int_eq(di_digest_tokens(tokens, 3, &d), DI_OK);
    expect_hex(&d, "a76f94d1118f3bcfe6d1006dda205ce7");
    ck_assert_int_eq(di_digest_floats(floats, 3, &d), DI_OK);
    expect_hex(&d, "bbb1d753e541d01267761070173446a6");
    ck_assert_int_eq(di_digest_tokens(tokens, 3, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_digest_floats(floats, 3, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_digest_tokens(NULL, 3, &d), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_digest_floats(NULL, 3, &d), DI_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_digest_equal)
{
    di_digest a, b;
    const int32_t t1 = 1, t2 = 2;
    ck_assert_int_eq(di_digest_tokens(&t1, 1, &a), DI_OK);
    ck_assert_int_eq(di_digest_tokens(&t1, 1, &b), DI_OK);
    ck_assert_int_eq(di_digest_equal(&a, &b), 1);
    ck_assert_int_eq(di_digest_tokens(&t2, 1, &b), DI_OK);
    ck_assert_int_eq(di_digest_equal(&a, &b), 0);
    ck_assert_int_eq(di_digest_equal(NULL, &b), 0);
    ck_assert_int_eq(di_digest_equal(&a, NULL), 0);
    ck_assert_int_eq(di_digest_equal(NULL, NULL), 0);
}
END_TEST

/* ---- NULL everywhere ----------------------------------------------------------- */

START_TEST(test_free_null_is_noop)
{
    di_model_free(NULL);
    di_config_free(NULL);
    di_session_free(NULL);
}
END_TEST

START_TEST(test_null_model_and_config)
{
    int64_t i = 0;
    double f = 0;
    di_config *c = NULL;
    ck_assert_int_eq(di_model_get_int(NULL, DI_MODEL_N_VOCAB, &i), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_model_get_int(g_model, DI_MODEL_N_VOCAB, NULL), DI_ERR_INVALID_ARGUMENT);
    (void)di_model_architecture(NULL); /* must not crash; the value is unspecified */
    ck_assert_int_eq(di_config_create(NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_config_set_int(NULL, DI_CONFIG_THREADS, 1), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_config_set_float(NULL, DI_CONFIG_TEMPERATURE, 0), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_config_get_int(NULL, DI_CONFIG_THREADS, &i), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_config_get_float(NULL, DI_CONFIG_TOP_P, &f), DI_ERR_INVALID_ARGUMENT);
    (void)di_config_errmsg(NULL);
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_get_int(c, DI_CONFIG_THREADS, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_config_get_float(c, DI_CONFIG_TOP_P, NULL), DI_ERR_INVALID_ARGUMENT);
    di_config_free(c);
}
END_TEST

START_TEST(test_null_session_create)
{
    char err[ERRBUF_SIZE] = "";
    di_session *s = (di_session *)&s;
    expect_status(di_session_create(NULL, NULL, &s, err, sizeof err), DI_ERR_INVALID_ARGUMENT,
                  "create with NULL model");
    ck_assert_ptr_null(s);
    expect_status(di_session_create(g_model, NULL, NULL, err, sizeof err),
                  DI_ERR_INVALID_ARGUMENT, "create with NULL out");
}
END_TEST

/* Every session function with a NULL session, then with NULL out pointers. */
START_TEST(test_null_session_calls)
{
    const uint32_t seq = 0, n = 1;
    const int32_t tok = 1;
    const float *logits = NULL;
    di_digest d;
    int32_t t;
    uint32_t len;
    (void)di_session_errmsg(NULL);
    ck_assert_int_eq(di_session_step(NULL, 1, &seq, &n, &tok, 0), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_logits(NULL, 0, &logits, &d), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_logits_at(NULL, 0, 0, &logits, &d), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_greedy_token(NULL, 0, &t), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_length(NULL, 0, &len), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_digest(NULL, 0, &d), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_reset(NULL, 0), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_truncate(NULL, 0, 0), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_copy(NULL, 0, 1, 0), DI_ERR_INVALID_ARGUMENT);

    di_session *s = new_session(0, 0);
    ck_assert_int_eq(di_session_step(s, 1, NULL, &n, &tok, 0), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_step(s, 1, &seq, NULL, &tok, 0), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_step(s, 1, &seq, &n, NULL, 0), DI_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(seq_length(s, 0), 0);
    expect_step_ok(s, 0, &tok, 1, DI_STEP_ALL_LOGITS);
    ck_assert_int_eq(di_session_logits(s, 0, NULL, &d), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_logits_at(s, 0, 0, NULL, &d), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_greedy_token(s, 0, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_length(s, 0, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_digest(s, 0, NULL), DI_ERR_INVALID_ARGUMENT);
    /* the digest is optional */
    ck_assert_int_eq(di_session_logits(s, 0, &logits, NULL), DI_OK);
    ck_assert_int_eq(di_session_logits_at(s, 0, 0, &logits, NULL), DI_OK);
    di_session_free(s);
}
END_TEST

/* ---- configuration -------------------------------------------------------------- */

START_TEST(test_config_defaults)
{
    static const struct { di_config_key key; int64_t want; } ints[] = {
        {DI_CONFIG_THREADS, 1},   {DI_CONFIG_MAX_SEQUENCES, 1},
        {DI_CONFIG_CONTEXT_LENGTH, 0}, {DI_CONFIG_BACKEND, DI_BACKEND_CPU},
        {DI_CONFIG_PROFILE, DI_PROFILE_PORTABLE}, {DI_CONFIG_DO_SAMPLE, 0},
        {DI_CONFIG_TOP_K, 0}, {DI_CONFIG_ALLOW_LONG_CONTEXT, 0},
    };
    static const struct { di_config_key key; double want; } floats[] = {
        {DI_CONFIG_TEMPERATURE, 0.0}, {DI_CONFIG_TOP_P, 1.0}, {DI_CONFIG_REPETITION_PENALTY, 1.0},
    };
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_str_eq(di_config_errmsg(c), "");
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v = -12345;
        ck_assert_int_eq(di_config_get_int(c, ints[i].key, &v), DI_OK);
        ck_assert_msg(v == ints[i].want, "key %d: %lld", (int)ints[i].key, (long long)v);
    }
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        double v = -12345;
        ck_assert_int_eq(di_config_get_float(c, floats[i].key, &v), DI_OK);
        ck_assert_msg(v == floats[i].want, "key %d: %g", (int)floats[i].key, v);
    }
    int64_t seed;
    ck_assert_int_eq(di_config_get_int(c, DI_CONFIG_SEED, &seed), DI_OK);
    di_config_free(c);
}
END_TEST

/* key, a valid non-default value set first, then a value out of range */
static const struct { di_config_key key; int64_t valid; int64_t bad; } OUT_OF_RANGE[] = {
    {DI_CONFIG_THREADS, 4, 0},
    {DI_CONFIG_THREADS, 4, 257},
    {DI_CONFIG_THREADS, 4, -1},
    {DI_CONFIG_MAX_SEQUENCES, 3, 0},
    {DI_CONFIG_MAX_SEQUENCES, 3, 4097},
    {DI_CONFIG_CONTEXT_LENGTH, 100, -1},
    {DI_CONFIG_CONTEXT_LENGTH, 100, (1 << 24) + 1},
    {DI_CONFIG_CONTEXT_LENGTH, 100, INT64_MIN},
    {DI_CONFIG_BACKEND, DI_BACKEND_CUDA, 3},
    {DI_CONFIG_BACKEND, DI_BACKEND_CUDA, 0},
    {DI_CONFIG_PROFILE, DI_PROFILE_DEVICE, 0},
    {DI_CONFIG_PROFILE, DI_PROFILE_DEVICE, 4},
    {DI_CONFIG_ALLOW_LONG_CONTEXT, 1, 2},
    {DI_CONFIG_ALLOW_LONG_CONTEXT, 1, -1},
};

START_TEST(test_config_out_of_range)
{
    di_config *c = NULL;
    int64_t v = -1;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, OUT_OF_RANGE[_i].key, OUT_OF_RANGE[_i].valid), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, OUT_OF_RANGE[_i].key, OUT_OF_RANGE[_i].bad),
                     DI_ERR_INVALID_ARGUMENT);
    ck_assert_uint_gt(strlen(di_config_errmsg(c)), 0);
    ck_assert_int_eq(di_config_get_int(c, OUT_OF_RANGE[_i].key, &v), DI_OK);
    ck_assert_msg(v == OUT_OF_RANGE[_i].valid, "key %d changed to %lld by a refused value",
                  (int)OUT_OF_RANGE[_i].key, (long long)v);
    di_config_free(c);
}
END_TEST

START_TEST(test_config_range_edges)
{
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_THREADS, 1), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_THREADS, 256), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, 1), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, 4096), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, 0), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, 1 << 24), DI_OK);
    di_config_free(c);
}
END_TEST

static const di_config_key INT_KEYS[] = {
    DI_CONFIG_THREADS, DI_CONFIG_MAX_SEQUENCES, DI_CONFIG_CONTEXT_LENGTH, DI_CONFIG_BACKEND,
    DI_CONFIG_PROFILE, DI_CONFIG_DO_SAMPLE,     DI_CONFIG_TOP_K,          DI_CONFIG_SEED,
    DI_CONFIG_CPU_PATH, DI_CONFIG_DEVICE, DI_CONFIG_ALLOW_LONG_CONTEXT,
};
static const di_config_key FLOAT_KEYS[] = {
    DI_CONFIG_TEMPERATURE, DI_CONFIG_TOP_P, DI_CONFIG_REPETITION_PENALTY,
};

/* The wrong setter or getter for a key's type, and unknown keys. */
START_TEST(test_config_wrong_type_and_unknown_key)
{
    di_config *c = NULL;
    int64_t i = 0;
    double f = 0;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    for (size_t k = 0; k < sizeof INT_KEYS / sizeof INT_KEYS[0]; k++) {
        ck_assert_int_eq(di_config_set_float(c, INT_KEYS[k], 1.0), DI_ERR_UNKNOWN_KEY);
        ck_assert_int_eq(di_config_get_float(c, INT_KEYS[k], &f), DI_ERR_UNKNOWN_KEY);
    }
    for (size_t k = 0; k < sizeof FLOAT_KEYS / sizeof FLOAT_KEYS[0]; k++) {
        ck_assert_int_eq(di_config_set_int(c, FLOAT_KEYS[k], 1), DI_ERR_UNKNOWN_KEY);
        ck_assert_int_eq(di_config_get_int(c, FLOAT_KEYS[k], &i), DI_ERR_UNKNOWN_KEY);
    }
    static const int unknown[] = {0, 15, 999, -1};
    for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++) {
        di_config_key key = (di_config_key)unknown[k];
        ck_assert_int_eq(di_config_set_int(c, key, 1), DI_ERR_UNKNOWN_KEY);
        ck_assert_int_eq(di_config_set_float(c, key, 1.0), DI_ERR_UNKNOWN_KEY);
        ck_assert_int_eq(di_config_get_int(c, key, &i), DI_ERR_UNKNOWN_KEY);
        ck_assert_int_eq(di_config_get_float(c, key, &f), DI_ERR_UNKNOWN_KEY);
    }
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_THREADS, 2.0), DI_ERR_UNKNOWN_KEY);
    ck_assert_uint_gt(strlen(di_config_errmsg(c)), 0);
    ck_assert_int_eq(di_config_get_int(c, DI_CONFIG_THREADS, &i), DI_OK);
    ck_assert_int_eq(i, 1);
    di_config_free(c);
}
END_TEST

/* The sampling keys give the parameters a session's sequences start with;
 * they were refused before sampling existed and are now accepted, read back
 * as set. */
static const struct {
    di_config_key key;
    int is_float;
    double value;
} SAMPLING_KEYS[] = {
    {DI_CONFIG_TEMPERATURE, 1, 0.7},
    {DI_CONFIG_TEMPERATURE, 1, 1e-30},
    {DI_CONFIG_DO_SAMPLE, 0, 1},
    {DI_CONFIG_TOP_P, 1, 0.9},
    {DI_CONFIG_TOP_K, 0, 40},
    {DI_CONFIG_TOP_K, 0, 1},
    {DI_CONFIG_REPETITION_PENALTY, 1, 1.1},
};

START_TEST(test_sampling_keys_accepted)
{
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    di_status st = SAMPLING_KEYS[_i].is_float
                       ? di_config_set_float(c, SAMPLING_KEYS[_i].key, SAMPLING_KEYS[_i].value)
                       : di_config_set_int(c, SAMPLING_KEYS[_i].key, (int64_t)SAMPLING_KEYS[_i].value);
    ck_assert_msg(st == DI_OK, "key %d: %s: %s", (int)SAMPLING_KEYS[_i].key, di_status_name(st),
                  di_config_errmsg(c));
    if (SAMPLING_KEYS[_i].is_float) {
        double v = -1;
        ck_assert_int_eq(di_config_get_float(c, SAMPLING_KEYS[_i].key, &v), DI_OK);
        ck_assert(v == SAMPLING_KEYS[_i].value);
    } else {
        int64_t v = -1;
        ck_assert_int_eq(di_config_get_int(c, SAMPLING_KEYS[_i].key, &v), DI_OK);
        ck_assert_int_eq(v, (int64_t)SAMPLING_KEYS[_i].value);
    }
    di_config_free(c);
}
END_TEST

/* A sampling key's bad value: DI_ERR_INVALID_ARGUMENT naming the parameter
 * and the value (the per-sequence rules), the setting unchanged. */
static const struct {
    di_config_key key;
    int is_float;
    double value;
    const char *needle;
} SAMPLING_BAD[] = {
    {DI_CONFIG_TEMPERATURE, 1, -0.5, "temperature = -0.5"},
    {DI_CONFIG_TEMPERATURE, 1, NAN, "temperature = nan"},
    {DI_CONFIG_TEMPERATURE, 1, 1e300, "temperature = inf"},
    {DI_CONFIG_TOP_P, 1, 0.0, "top_p = 0"},
    {DI_CONFIG_TOP_P, 1, 1.5, "top_p = 1.5"},
    {DI_CONFIG_TOP_K, 0, -1, "top_k = -1"},
    {DI_CONFIG_TOP_K, 0, 1e12, "top_k"},
    {DI_CONFIG_REPETITION_PENALTY, 1, 0.0, "repetition_penalty = 0"},
    {DI_CONFIG_REPETITION_PENALTY, 1, -INFINITY, "repetition_penalty = -inf"},
    {DI_CONFIG_DO_SAMPLE, 0, 2, "do_sample"},
};

START_TEST(test_sampling_key_out_of_range)
{
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    di_status st = SAMPLING_BAD[_i].is_float
                       ? di_config_set_float(c, SAMPLING_BAD[_i].key, SAMPLING_BAD[_i].value)
                       : di_config_set_int(c, SAMPLING_BAD[_i].key, (int64_t)SAMPLING_BAD[_i].value);
    expect_status(st, DI_ERR_INVALID_ARGUMENT, SAMPLING_BAD[_i].needle);
    ck_assert_msg(tu_mentions(di_config_errmsg(c), SAMPLING_BAD[_i].needle), "message '%s' does not name %s",
                  di_config_errmsg(c), SAMPLING_BAD[_i].needle);
    /* the setting keeps its default */
    if (SAMPLING_BAD[_i].is_float) {
        double v = -1;
        ck_assert_int_eq(di_config_get_float(c, SAMPLING_BAD[_i].key, &v), DI_OK);
        ck_assert(v == (SAMPLING_BAD[_i].key == DI_CONFIG_TEMPERATURE ? 0.0 : 1.0));
    } else {
        int64_t v = -1;
        ck_assert_int_eq(di_config_get_int(c, SAMPLING_BAD[_i].key, &v), DI_OK);
        ck_assert_int_eq(v, 0);
    }
    di_config_free(c);
}
END_TEST

/* do_sample and temperature must agree when a session is created:
 * DI_ERR_SAMPLING_REFUSED naming both, otherwise the sequences start with
 * the keys' parameters (the same tokens as di_session_seq_set_sampling). */
START_TEST(test_sampling_keys_start_sequences)
{
    char err[ERRBUF_SIZE];
    di_config *c = NULL;
    di_session *s = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, 2), DI_OK);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_TEMPERATURE, 0.9), DI_OK);
    expect_status(di_session_create(g_model, c, &s, err, sizeof err), DI_ERR_SAMPLING_REFUSED,
                  "temperature without do_sample");
    ck_assert_msg(tu_mentions(err, "temperature") && tu_mentions(err, "do_sample"), "%s", err);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_TEMPERATURE, 0.0), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_DO_SAMPLE, 1), DI_OK);
    expect_status(di_session_create(g_model, c, &s, err, sizeof err), DI_ERR_SAMPLING_REFUSED,
                  "do_sample without temperature");
    ck_assert_msg(tu_mentions(err, "temperature") && tu_mentions(err, "do_sample"), "%s", err);

    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_TEMPERATURE, 3.0), DI_OK);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_TOP_P, 0.95), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_TOP_K, 12), DI_OK);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_REPETITION_PENALTY, 1.3), DI_OK);
    di_sampling_params p;
    ck_assert_int_eq(di_sampling_params_init(&p), DI_OK);
    p.temperature = 3.0f;
    p.top_p = 0.95f;
    p.top_k = 12;
    p.repetition_penalty = 1.3f;
    const int32_t prompt[3] = {4, 9, 2};
    int32_t by_config[2][12], by_call[12];
    int differ = 0;
    for (int64_t seed = 0; seed < 16; seed++) {
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_SEED, seed), DI_OK);
        ck_assert_msg(di_session_create(g_model, c, &s, err, sizeof err) == DI_OK, "%s", err);
        di_session *plain = new_session(1, 0);
        p.seed = (uint64_t)seed;
        ck_assert_int_eq(di_session_seq_set_sampling(plain, 0, &p), DI_OK);
        for (uint32_t q = 0; q < 2; q++) {
            expect_step_ok(s, q, prompt, 3, 0);
            for (int d = 0; d < 12; d++) {
                ck_assert_int_eq(di_session_sample_token(s, q, &by_config[q][d]), DI_OK);
                expect_step_ok(s, q, &by_config[q][d], 1, 0);
            }
        }
        expect_step_ok(plain, 0, prompt, 3, 0);
        for (int d = 0; d < 12; d++) {
            ck_assert_int_eq(di_session_sample_token(plain, 0, &by_call[d]), DI_OK);
            expect_step_ok(plain, 0, &by_call[d], 1, 0);
        }
        ck_assert(!memcmp(by_config[0], by_call, sizeof by_call));
        ck_assert(!memcmp(by_config[1], by_call, sizeof by_call));
        /* the greedy token stays the plain argmax of the logits; the draws
         * leave it for some seeds */
        const float *row = NULL;
        int32_t g, t, argmax = 0;
        ck_assert_int_eq(di_session_logits(s, 0, &row, NULL), DI_OK);
        for (int32_t i = 1; i < N_VOCAB; i++)
            if (row[i] > row[argmax])
                argmax = i;
        ck_assert_int_eq(di_session_greedy_token(s, 0, &g), DI_OK);
        ck_assert_int_eq(g, argmax);
        ck_assert_int_eq(di_session_sample_token(s, 0, &t), DI_OK);
        differ += g != t;
        /* NULL gives a sequence back the session's parameters, not greedy */
        ck_assert_int_eq(di_session_seq_set_sampling(s, 1, NULL), DI_OK);
        ck_assert_int_eq(di_session_sample_token(s, 1, &t), DI_OK);
        di_session_free(plain);
        di_session_free(s);
        s = NULL;
    }
    ck_assert_int_gt(differ, 0);
    di_config_free(c);
}
END_TEST

START_TEST(test_neutral_sampling_accepted)
{
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_TEMPERATURE, 0.0), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_DO_SAMPLE, 0), DI_OK);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_TOP_P, 1.0), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_TOP_K, 0), DI_OK);
    ck_assert_int_eq(di_config_set_float(c, DI_CONFIG_REPETITION_PENALTY, 1.0), DI_OK);
    static const int64_t seeds[] = {0, 42, -1, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        int64_t v = 0;
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_SEED, seeds[i]), DI_OK);
        ck_assert_int_eq(di_config_get_int(c, DI_CONFIG_SEED, &v), DI_OK);
        ck_assert_int_eq(v, seeds[i]);
    }
    di_config_free(c);
}
END_TEST

/* The generation digest: the stepped tokens followed by the unstepped ones
 * is the one-shot digest of the whole list, and equals the sequence digest
 * once those tokens are stepped. */
START_TEST(test_seq_digest_extra)
{
    di_session *s = NULL;
    ck_assert_int_eq(di_session_create(g_model, NULL, &s, NULL, 0), DI_OK);
    const int32_t prompt[3] = {1, 2, 3};
    const uint32_t seq = 0, n = 3;
    ck_assert_int_eq(di_session_step(s, 1, &seq, &n, prompt, 0), DI_OK);
    int32_t all[5] = {1, 2, 3, 0, 0};
    ck_assert_int_eq(di_session_greedy_token(s, 0, &all[3]), DI_OK);
    all[4] = all[3] == 7 ? 8 : 7;
    di_digest with, want;
    ck_assert_int_eq(di_session_seq_digest_extra(s, 0, all + 3, 2, &with), DI_OK);
    ck_assert_int_eq(di_digest_tokens(all, 5, &want), DI_OK);
    ck_assert(di_digest_equal(&with, &want));
    ck_assert_int_eq(di_session_seq_digest_extra(s, 0, NULL, 0, &with), DI_OK);
    di_digest stepped = seq_digest(s, 0);
    ck_assert(di_digest_equal(&with, &stepped));
    const uint32_t two = 2;
    ck_assert_int_eq(di_session_step(s, 1, &seq, &two, all + 3, 0), DI_OK);
    stepped = seq_digest(s, 0);
    ck_assert(di_digest_equal(&stepped, &want));
    expect_status(di_session_seq_digest_extra(s, 0, NULL, 1, &with), DI_ERR_INVALID_ARGUMENT, "NULL extra");
    expect_status(di_session_seq_digest_extra(s, 0, all, 1, NULL), DI_ERR_INVALID_ARGUMENT, "NULL out");
    expect_status(di_session_seq_digest_extra(s, 9, all, 1, &with), DI_ERR_SEQUENCE, "bad sequence");
    di_session_free(s);
}
END_TEST

/* ---- session creation ------------------------------------------------------------ */

START_TEST(test_session_defaults)
{
    di_session *s = NULL;
    char err[ERRBUF_SIZE] = "x";
    ck_assert_int_eq(di_session_create(g_model, NULL, &s, err, sizeof err), DI_OK);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(di_session_errmsg(s), "");
    ck_assert_uint_eq(seq_length(s, 0), 0);
    di_digest d = seq_digest(s, 0);
    expect_hex(&d, EMPTY_XXH128);
    di_session_free(s);
}
END_TEST

/* Backend and profile this build cannot honour. */
static const struct { di_config_key key; int64_t value; di_status want; } UNAVAILABLE[] = {
    {DI_CONFIG_BACKEND, DI_BACKEND_CUDA, DI_ERR_BACKEND_UNAVAILABLE},
    {DI_CONFIG_PROFILE, DI_PROFILE_DEVICE, DI_ERR_UNSUPPORTED},
};

START_TEST(test_session_unavailable)
{
    di_config *c = NULL;
    di_session *s = (di_session *)&s;
    char err[ERRBUF_SIZE] = "";
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, UNAVAILABLE[_i].key, UNAVAILABLE[_i].value), DI_OK);
    di_status st = di_session_create(g_model, c, &s, err, sizeof err);
    di_config_free(c);
    expect_status(st, UNAVAILABLE[_i].want, "session create");
    ck_assert_ptr_null(s);
    ck_assert_msg(err[0] != '\0', "no message in errbuf");
}
END_TEST

/* ---- step misuse -------------------------------------------------------------------- */

START_TEST(test_step_token_range)
{
    di_session *s = new_session(0, 0);
    const int32_t bad[] = {-1, N_VOCAB, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        expect_failure(s, step_one(s, 0, &bad[i], 1, 0), DI_ERR_TOKEN_RANGE, "token out of range");
        ck_assert_uint_eq(seq_length(s, 0), 0);
    }
    /* a bad token after good ones in the same entry: nothing is appended */
    const int32_t mixed[] = {1, 2, N_VOCAB};
    expect_failure(s, step_one(s, 0, mixed, 3, 0), DI_ERR_TOKEN_RANGE, "last token bad");
    ck_assert_uint_eq(seq_length(s, 0), 0);
    const int32_t edge[] = {0, N_VOCAB - 1};
    expect_step_ok(s, 0, edge, 2, 0);
    ck_assert_uint_eq(seq_length(s, 0), 2);
    di_session_free(s);
}
END_TEST

START_TEST(test_step_sequence_errors)
{
    di_session *s = new_session(2, 0);
    const int32_t toks[] = {1, 2, 3};
    const uint32_t out_of_range[] = {2, 4096, UINT32_MAX};
    for (size_t i = 0; i < sizeof out_of_range / sizeof out_of_range[0]; i++)
        expect_failure(s, step_one(s, out_of_range[i], toks, 1, 0), DI_ERR_SEQUENCE,
                       "seq >= max_sequences");

    const uint32_t twice[2] = {1, 1}, ones[2] = {1, 1};
    expect_failure(s, di_session_step(s, 2, twice, ones, toks, 0), DI_ERR_SEQUENCE,
                   "seq repeated");

    const uint32_t seqs[2] = {0, 1}, with_empty[2] = {1, 0};
    expect_failure(s, di_session_step(s, 2, seqs, with_empty, toks, 0), DI_ERR_SEQUENCE,
                   "entry with no tokens");
    expect_failure(s, step_one(s, 0, toks, 0, 0), DI_ERR_SEQUENCE, "single empty entry");

    ck_assert_uint_eq(seq_length(s, 0), 0);
    ck_assert_uint_eq(seq_length(s, 1), 0);
    di_session_free(s);
}
END_TEST

START_TEST(test_step_no_entries)
{
    di_session *s = new_session(0, 0);
    const uint32_t seq = 0, n = 1;
    const int32_t tok = 1;
    expect_failure(s, di_session_step(s, 0, NULL, NULL, NULL, 0), DI_ERR_INVALID_ARGUMENT,
                   "no entries, NULL arrays");
    expect_failure(s, di_session_step(s, 0, &seq, &n, &tok, 0), DI_ERR_INVALID_ARGUMENT,
                   "no entries");
    ck_assert_uint_eq(seq_length(s, 0), 0);
    di_session_free(s);
}
END_TEST

START_TEST(test_step_unknown_flags)
{
    di_session *s = new_session(0, 0);
    const int32_t tok = 1;
    expect_failure(s, step_one(s, 0, &tok, 1, 0x2u), DI_ERR_INVALID_ARGUMENT, "unknown flag");
    ck_assert_uint_eq(seq_length(s, 0), 0);
    di_session_free(s);
}
END_TEST

/* Context length 8: 9 tokens at once, 5 then 4, and exactly 8 then 1 more. */
START_TEST(test_step_context_full)
{
    di_session *s = new_session(0, 8);
    const int32_t toks[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    expect_failure(s, step_one(s, 0, toks, 9, 0), DI_ERR_CONTEXT_FULL, "9 tokens in 8");
    ck_assert_uint_eq(seq_length(s, 0), 0);
    expect_step_ok(s, 0, toks, 5, 0);
    di_digest before = logits_digest(s, 0);
    expect_failure(s, step_one(s, 0, toks + 5, 4, 0), DI_ERR_CONTEXT_FULL, "5 + 4 in 8");
    ck_assert_uint_eq(seq_length(s, 0), 5);
    di_digest after = logits_digest(s, 0); /* the last good step's results survive */
    ck_assert(di_digest_equal(&before, &after));
    expect_step_ok(s, 0, toks + 5, 3, 0);
    ck_assert_uint_eq(seq_length(s, 0), 8);
    expect_failure(s, step_one(s, 0, toks, 1, 0), DI_ERR_CONTEXT_FULL, "8 + 1 in 8");
    ck_assert_uint_eq(seq_length(s, 0), 8);
    di_session_free(s);
}
END_TEST

/* Snapshot of what a failed step must not change. */
typedef struct seq_state {
    uint32_t length;
    di_digest tokens;
    di_status logits_status;
    di_digest logits;
} seq_state;

static seq_state snapshot(di_session *s, uint32_t seq)
{
    seq_state st;
    const float *logits;
    memset(&st, 0, sizeof st);
    st.length = seq_length(s, seq);
    st.tokens = seq_digest(s, seq);
    st.logits_status = di_session_logits(s, seq, &logits, &st.logits);
    return st;
}

static void expect_unchanged(di_session *s, uint32_t seq, const seq_state *before)
{
    seq_state now = snapshot(s, seq);
    ck_assert_uint_eq(now.length, before->length);
    ck_assert(di_digest_equal(&now.tokens, &before->tokens));
    ck_assert_int_eq(now.logits_status, before->logits_status);
    if (now.logits_status == DI_OK)
        ck_assert(di_digest_equal(&now.logits, &before->logits));
}

/* One valid entry and one invalid entry: the valid one is not applied. */
static const struct { int32_t bad_token; uint32_t bad_seq; uint32_t bad_n; di_status want; } MIXED[] = {
    {N_VOCAB, 2, 1, DI_ERR_TOKEN_RANGE},
    {-1, 2, 1, DI_ERR_TOKEN_RANGE},
    {1, 7, 1, DI_ERR_SEQUENCE},   /* seq out of range */
    {1, 0, 1, DI_ERR_SEQUENCE},   /* seq 0 repeated */
    {1, 2, 0, DI_ERR_SEQUENCE},   /* no tokens */
    {1, 1, 30, DI_ERR_CONTEXT_FULL},
};

START_TEST(test_step_all_or_nothing)
{
    di_session *s = new_session(3, 32);
    const int32_t prefix[4] = {3, 1, 4, 1};
    expect_step_ok(s, 0, prefix, 4, 0); /* seq 0 has a result, seq 1 a cache, seq 2 nothing */
    expect_step_ok(s, 1, prefix, 4, 0);
    seq_state before[3] = {snapshot(s, 0), snapshot(s, 1), snapshot(s, 2)};

    int32_t toks[32];
    for (int i = 0; i < 32; i++)
        toks[i] = i % N_VOCAB;
    toks[2] = MIXED[_i].bad_token; /* the second entry's first token */
    const uint32_t seqs[2] = {0, MIXED[_i].bad_seq};
    const uint32_t counts[2] = {2, MIXED[_i].bad_n};
    expect_failure(s, di_session_step(s, 2, seqs, counts, toks, 0), MIXED[_i].want, "mixed step");
    for (uint32_t q = 0; q < 3; q++)
        expect_unchanged(s, q, &before[q]);
    di_session_free(s);
}
END_TEST

/* ---- results in the wrong order ------------------------------------------------------ */

START_TEST(test_results_before_any_step)
{
    di_session *s = new_session(2, 0);
    const float *logits = NULL;
    di_digest d;
    int32_t t;
    expect_failure(s, di_session_logits(s, 0, &logits, &d), DI_ERR_STATE, "logits");
    expect_failure(s, di_session_greedy_token(s, 0, &t), DI_ERR_STATE, "greedy");
    expect_failure(s, di_session_logits_at(s, 0, 0, &logits, &d), DI_ERR_STATE, "logits_at");
    /* stepping seq 0 gives seq 1 nothing */
    const int32_t tok = 5;
    expect_step_ok(s, 0, &tok, 1, 0);
    expect_failure(s, di_session_logits(s, 1, &logits, &d), DI_ERR_STATE, "logits of seq 1");
    expect_failure(s, di_session_greedy_token(s, 1, &t), DI_ERR_STATE, "greedy of seq 1");
    di_session_free(s);
}
END_TEST

START_TEST(test_logits_at_misuse)
{
    di_session *s = new_session(2, 0);
    const int32_t toks[3] = {1, 2, 3};
    const float *logits = NULL;
    di_digest d;
    expect_step_ok(s, 0, toks, 3, 0);
    expect_failure(s, di_session_logits_at(s, 0, 0, &logits, &d), DI_ERR_STATE,
                   "logits_at without DI_STEP_ALL_LOGITS");
    expect_step_ok(s, 0, toks, 3, DI_STEP_ALL_LOGITS);
    ck_assert_int_eq(di_session_logits_at(s, 0, 2, &logits, &d), DI_OK);
    expect_failure(s, di_session_logits_at(s, 0, 3, &logits, &d), DI_ERR_INVALID_ARGUMENT,
                   "index == appended");
    expect_failure(s, di_session_logits_at(s, 0, UINT32_MAX, &logits, &d),
                   DI_ERR_INVALID_ARGUMENT, "index huge");
    /* a later step of another sequence ends the validity of these rows */
    expect_step_ok(s, 1, toks, 1, 0);
    expect_failure(s, di_session_logits_at(s, 0, 0, &logits, &d), DI_ERR_STATE,
                   "logits_at after another step");
    di_session_free(s);
}
END_TEST

/* ---- sequence operations --------------------------------------------------------------- */

START_TEST(test_seq_ops_misuse)
{
    di_session *s = new_session(2, 0);
    const int32_t toks[3] = {1, 2, 3};
    expect_step_ok(s, 0, toks, 3, 0);
    expect_failure(s, di_session_seq_truncate(s, 0, 4), DI_ERR_INVALID_ARGUMENT,
                   "truncate beyond length");
    ck_assert_uint_eq(seq_length(s, 0), 3);
    expect_failure(s, di_session_seq_copy(s, 0, 0, 1), DI_ERR_INVALID_ARGUMENT, "copy src == dst");
    expect_failure(s, di_session_seq_copy(s, 0, 1, 4), DI_ERR_INVALID_ARGUMENT,
                   "copy beyond src length");
    ck_assert_uint_eq(seq_length(s, 0), 3);
    ck_assert_uint_eq(seq_length(s, 1), 0);
    ck_assert_int_eq(di_session_seq_truncate(s, 0, 3), DI_OK); /* to its own length is fine */
    ck_assert_uint_eq(seq_length(s, 0), 3);
    di_session_free(s);
}
END_TEST

/* Every per-sequence call with a sequence id >= max_sequences. */
START_TEST(test_seq_id_out_of_range)
{
    di_session *s = new_session(2, 0);
    const float *logits;
    di_digest d;
    int32_t t;
    uint32_t len;
    expect_failure(s, di_session_logits(s, 2, &logits, &d), DI_ERR_SEQUENCE, "logits");
    expect_failure(s, di_session_logits_at(s, 2, 0, &logits, &d), DI_ERR_SEQUENCE, "logits_at");
    expect_failure(s, di_session_greedy_token(s, 2, &t), DI_ERR_SEQUENCE, "greedy");
    expect_failure(s, di_session_seq_length(s, 2, &len), DI_ERR_SEQUENCE, "length");
    expect_failure(s, di_session_seq_digest(s, 2, &d), DI_ERR_SEQUENCE, "digest");
    expect_failure(s, di_session_seq_reset(s, 2), DI_ERR_SEQUENCE, "reset");
    expect_failure(s, di_session_seq_truncate(s, 2, 0), DI_ERR_SEQUENCE, "truncate");
    expect_failure(s, di_session_seq_copy(s, 2, 0, 0), DI_ERR_SEQUENCE, "copy from");
    expect_failure(s, di_session_seq_copy(s, 0, UINT32_MAX, 0), DI_ERR_SEQUENCE, "copy to");
    di_session_free(s);
}
END_TEST

START_TEST(test_errmsg_lifecycle)
{
    di_session *s = new_session(0, 0);
    const int32_t bad = -1;
    ck_assert_ptr_nonnull(di_session_errmsg(s));
    ck_assert_str_eq(di_session_errmsg(s), "");
    ck_assert_int_eq(step_one(s, 0, &bad, 1, 0), DI_ERR_TOKEN_RANGE);
    ck_assert_uint_gt(strlen(di_session_errmsg(s)), 0);
    di_session_free(s);
}
END_TEST

/* ---- behaviour ------------------------------------------------------------------------- */

START_TEST(test_reset_forgets)
{
    di_session *s = new_session(0, 0);
    const int32_t toks[4] = {2, 7, 1, 8};
    const float *logits;
    di_digest first = {{0}}, d;
    int32_t t;
    expect_step_ok(s, 0, toks, 4, 0);
    first = logits_digest(s, 0);
    ck_assert_int_eq(di_session_seq_reset(s, 0), DI_OK);
    ck_assert_uint_eq(seq_length(s, 0), 0);
    d = seq_digest(s, 0);
    expect_hex(&d, EMPTY_XXH128);
    expect_status(di_session_logits(s, 0, &logits, &d), DI_ERR_STATE, "logits after reset");
    expect_status(di_session_greedy_token(s, 0, &t), DI_ERR_STATE, "greedy after reset");
    /* the same tokens again give the same bits */
    expect_step_ok(s, 0, toks, 4, 0);
    d = logits_digest(s, 0);
    ck_assert(di_digest_equal(&first, &d));
    di_session_free(s);
}
END_TEST

/* Copying a prefix then stepping the copy equals stepping the original. */
START_TEST(test_copy_then_step_matches)
{
    di_session *s = new_session(2, 0);
    const int32_t prompt[5] = {3, 14, 15, 9, 2};
    const int32_t next = 6;
    expect_step_ok(s, 0, prompt, 5, 0);
    ck_assert_int_eq(di_session_seq_copy(s, 0, 1, 5), DI_OK);
    ck_assert_uint_eq(seq_length(s, 1), 5);
    di_digest a = seq_digest(s, 0), b = seq_digest(s, 1);
    ck_assert(di_digest_equal(&a, &b));
    expect_step_ok(s, 1, &next, 1, 0);
    expect_step_ok(s, 0, &next, 1, 0);
    a = logits_digest(s, 0);
    b = logits_digest(s, 1);
    ck_assert(di_digest_equal(&a, &b));
    di_session_free(s);
}
END_TEST

/* A shorter copied prefix behaves like a sequence that only ever saw it. */
START_TEST(test_copy_prefix_matches_fresh)
{
    di_session *s = new_session(3, 0);
    const int32_t prompt[6] = {1, 2, 3, 4, 5, 6};
    const int32_t next = 11;
    expect_step_ok(s, 0, prompt, 6, 0);
    ck_assert_int_eq(di_session_seq_copy(s, 0, 1, 3), DI_OK);
    expect_step_ok(s, 1, &next, 1, 0);
    expect_step_ok(s, 2, prompt, 3, 0);
    expect_step_ok(s, 2, &next, 1, 0);
    di_digest a = logits_digest(s, 1), b = logits_digest(s, 2);
    ck_assert(di_digest_equal(&a, &b));
    a = seq_digest(s, 1);
    b = seq_digest(s, 2);
    ck_assert(di_digest_equal(&a, &b));
    di_session_free(s);
}
END_TEST

/* Rows of an all-logits step: each digest matches its floats, and the last
 * row is what di_session_logits reports. The greedy token is the lowest id
 * among the largest logits. */
START_TEST(test_result_consistency)
{
    di_session *s = new_session(0, 0);
    const int32_t toks[4] = {0, 5, 10, 15};
    const float *row, *last;
    di_digest d, check, last_d;
    int32_t greedy;
    expect_step_ok(s, 0, toks, 4, DI_STEP_ALL_LOGITS);
    for (uint32_t i = 0; i < 4; i++) {
        ck_assert_int_eq(di_session_logits_at(s, 0, i, &row, &d), DI_OK);
        ck_assert_int_eq(di_digest_floats(row, N_VOCAB, &check), DI_OK);
        ck_assert(di_digest_equal(&d, &check));
    }
    ck_assert_int_eq(di_session_logits(s, 0, &last, &last_d), DI_OK);
    ck_assert(di_digest_equal(&d, &last_d));
    ck_assert_mem_eq(row, last, N_VOCAB * sizeof(float));
    ck_assert_int_eq(di_session_greedy_token(s, 0, &greedy), DI_OK);
    int32_t want = 0;
    for (int32_t t = 1; t < N_VOCAB; t++)
        if (last[t] > last[want])
            want = t;
    ck_assert_int_eq(greedy, want);
    for (int32_t t = 0; t < N_VOCAB; t++)
        ck_assert_msg(isfinite(last[t]), "logit %d is not finite", t);
    di_digest tokens_d, seq_d = seq_digest(s, 0);
    ck_assert_int_eq(di_digest_tokens(toks, 4, &tokens_d), DI_OK);
    ck_assert(di_digest_equal(&seq_d, &tokens_d));
    di_session_free(s);
}
END_TEST

/* Chunking and batch composition change no bit of a sequence's logits. */
START_TEST(test_chunking_and_batching_invariance)
{
    di_session *s = new_session(3, 0);
    const int32_t prompt[6] = {9, 8, 7, 6, 5, 4};
    expect_step_ok(s, 0, prompt, 6, 0); /* whole prompt at once */
    expect_step_ok(s, 1, prompt, 2, 0); /* in chunks of 2, 3, 1 */
    expect_step_ok(s, 1, prompt + 2, 3, 0);
    expect_step_ok(s, 1, prompt + 5, 1, 0);
    /* seq 2 in a batch with seq 0's next token */
    const uint32_t seqs[2] = {2, 0}, counts[2] = {6, 1};
    const int32_t batch[7] = {9, 8, 7, 6, 5, 4, 3};
    di_digest a = logits_digest(s, 0), b = logits_digest(s, 1);
    ck_assert(di_digest_equal(&a, &b));
    ck_assert_int_eq(di_session_step(s, 2, seqs, counts, batch, 0), DI_OK);
    b = logits_digest(s, 2);
    ck_assert(di_digest_equal(&a, &b));
    di_session_free(s);
}
END_TEST

/* The thread count is not visible in the results. */
START_TEST(test_thread_count_invariance)
{
    const int32_t prompt[7] = {1, 3, 5, 7, 9, 11, 13};
    di_digest d[2];
    for (int k = 0; k < 2; k++) {
        di_config *c = NULL;
        di_session *s = NULL;
        ck_assert_int_eq(di_config_create(&c), DI_OK);
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_THREADS, k == 0 ? 1 : 3), DI_OK);
        ck_assert_int_eq(di_session_create(g_model, c, &s, NULL, 0), DI_OK);
        di_config_free(c);
        expect_step_ok(s, 0, prompt, 7, 0);
        d[k] = logits_digest(s, 0);
        di_session_free(s);
    }
    ck_assert(di_digest_equal(&d[0], &d[1]));
}
END_TEST

/* ---- suite ---------------------------------------------------------------------------- */

#define LOOP(tc, test, array) tcase_add_loop_test(tc, test, 0, (int)(sizeof array / sizeof array[0]))

static TCase *static_case(void)
{
    TCase *tc = tcase_create("static");
    tcase_add_test(tc, test_status_names);
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_digest_format);
    tcase_add_test(tc, test_digest_values);
    tcase_add_test(tc, test_digest_equal);
    tcase_add_test(tc, test_free_null_is_noop);
    return tc;
}

static TCase *config_case(void)
{
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_config_defaults);
    LOOP(tc, test_config_out_of_range, OUT_OF_RANGE);
    tcase_add_test(tc, test_config_range_edges);
    tcase_add_test(tc, test_config_wrong_type_and_unknown_key);
    LOOP(tc, test_sampling_keys_accepted, SAMPLING_KEYS);
    LOOP(tc, test_sampling_key_out_of_range, SAMPLING_BAD);
    tcase_add_test(tc, test_neutral_sampling_accepted);
    return tc;
}

static TCase *model_case(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, load_tiny_model, free_tiny_model);
    tcase_set_timeout(tc, 30);
    return tc;
}

static TCase *null_case(void)
{
    TCase *tc = model_case("null");
    tcase_add_test(tc, test_null_model_and_config);
    tcase_add_test(tc, test_null_session_create);
    tcase_add_test(tc, test_null_session_calls);
    return tc;
}

static TCase *session_case(void)
{
    TCase *tc = model_case("session");
    tcase_add_test(tc, test_session_defaults);
    LOOP(tc, test_session_unavailable, UNAVAILABLE);
    tcase_add_test(tc, test_step_token_range);
    tcase_add_test(tc, test_step_sequence_errors);
    tcase_add_test(tc, test_step_no_entries);
    tcase_add_test(tc, test_step_unknown_flags);
    tcase_add_test(tc, test_step_context_full);
    LOOP(tc, test_step_all_or_nothing, MIXED);
    tcase_add_test(tc, test_results_before_any_step);
    tcase_add_test(tc, test_logits_at_misuse);
    tcase_add_test(tc, test_seq_ops_misuse);
    tcase_add_test(tc, test_seq_id_out_of_range);
    tcase_add_test(tc, test_errmsg_lifecycle);
    return tc;
}

static TCase *behaviour_case(void)
{
    TCase *tc = model_case("behaviour");
    tcase_add_test(tc, test_reset_forgets);
    tcase_add_test(tc, test_copy_then_step_matches);
    tcase_add_test(tc, test_copy_prefix_matches_fresh);
    tcase_add_test(tc, test_result_consistency);
    tcase_add_test(tc, test_chunking_and_batching_invariance);
    tcase_add_test(tc, test_thread_count_invariance);
    tcase_add_test(tc, test_seq_digest_extra);
    tcase_add_test(tc, test_sampling_keys_start_sequences);
    return tc;
}

Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    suite_add_tcase(s, static_case());
    suite_add_tcase(s, config_case());
    suite_add_tcase(s, null_case());
    suite_add_tcase(s, session_case());
    suite_add_tcase(s, behaviour_case());
    return s;
}
