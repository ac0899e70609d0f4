/*
 * check_model.c — the model loader on files the parser accepts: a valid
 * model and every supported matrix type load; the error buffer rules; the
 * architecture and hyperparameter keys (missing, mistyped, inconsistent,
 * absurd) and the tensors (missing, wrong shape) are refused with their
 * status and a message naming them.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* truncate, strdup */
#endif
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "detinfer.h"
#include "format_util.h"
#include "lib/format/gguf.h"
#include "gguf_builder.h"
#include "test_util.h"

/* ---- the valid model ------------------------------------------------------ */

START_TEST(test_valid_model_loads)
{
    gb_model m;
    gb_layout lay;
    gb_buf b;
    char err[ERRBUF_SIZE] = "";
    di_model *model = NULL;
    tiny_model(&m);
    gb_buf_init(&b);
    gb_model_serialize(&m, &b, &lay);
    di_status st = load_bytes(b.data, b.len, &model, err, sizeof err);
    ck_assert_msg(st == DI_OK, "status %s: %s", di_status_name(st), err);
    ck_assert_ptr_nonnull(model);

    static const struct { di_model_key key; int64_t want; } facts[] = {
        {DI_MODEL_N_VOCAB, 16}, {DI_MODEL_N_CTX_TRAIN, 64}, {DI_MODEL_N_EMBD, 32},
        {DI_MODEL_N_LAYER, 1},  {DI_MODEL_N_HEAD, 2},       {DI_MODEL_N_HEAD_KV, 1},
        {DI_MODEL_N_FF, 64},
    };
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        int64_t v = -1;
        ck_assert_int_eq(di_model_get_int(model, facts[i].key, &v), DI_OK);
        ck_assert_msg(v == facts[i].want, "key %d: %lld, expected %lld", (int)facts[i].key,
                      (long long)v, (long long)facts[i].want);
    }
    int64_t v = -1;
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_N_PARAMS, &v), DI_OK);
    ck_assert_int_eq(v, (int64_t)gb_model_n_params(&m));
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_FILE_SIZE, &v), DI_OK);
    ck_assert_int_eq(v, (int64_t)lay.end);
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_BYTES_PER_TOKEN, &v), DI_OK);
    ck_assert_int_eq(v, (int64_t)lay.end); /* tied: the table is the output matrix */
    ck_assert_int_eq(di_model_get_int(model, (di_model_key)0, &v), DI_ERR_UNKNOWN_KEY);
    ck_assert_int_eq(di_model_get_int(model, (di_model_key)11, &v), DI_ERR_UNKNOWN_KEY);
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_N_VOCAB, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(di_model_architecture(model), "llama");
    di_model_free(model);
    gb_buf_free(&b);
    gb_model_free(&m);
}
END_TEST

/* An untied output.weight is bound and counted. */
START_TEST(test_untied_output_loads)
{
    gb_model m;
    gb_llama_params p = gb_llama_defaults();
    p.untied = 1;
    gb_model_llama(&m, &p);
    char err[ERRBUF_SIZE] = "";
    di_model *model = NULL;
    di_status st = load_model(&m, &model, err, sizeof err);
    ck_assert_msg(st == DI_OK, "status %s: %s", di_status_name(st), err);
    int64_t v = -1, size = -1;
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_N_PARAMS, &v), DI_OK);
    ck_assert_int_eq(v, (int64_t)gb_model_n_params(&m));
    /* a decode step reads one F32 row of n_embd of the untied table, not n_vocab */
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_FILE_SIZE, &size), DI_OK);
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_BYTES_PER_TOKEN, &v), DI_OK);
    ck_assert_int_eq(v, size - (int64_t)(p.n_vocab - 1) * p.n_embd * 4);
    di_model_free(model);
    gb_model_free(&m);
}
END_TEST

/* head_count_kv, rope.freq_base and rope.dimension_count have defaults. */
START_TEST(test_optional_keys_may_be_absent)
{
    gb_model m;
    gb_llama_params p = gb_llama_defaults();
    p.n_head_kv = p.n_head;
    gb_model_llama(&m, &p);
    gb_kv_remove(&m, "llama.attention.head_count_kv");
    gb_kv_remove(&m, "llama.rope.freq_base");
    gb_kv_remove(&m, "llama.rope.dimension_count");
    char err[ERRBUF_SIZE] = "";
    di_model *model = NULL;
    di_status st = load_model(&m, &model, err, sizeof err);
    ck_assert_msg(st == DI_OK, "status %s: %s", di_status_name(st), err);
    int64_t v = -1;
    ck_assert_int_eq(di_model_get_int(model, DI_MODEL_N_HEAD_KV, &v), DI_OK);
    ck_assert_int_eq(v, p.n_head);
    di_model_free(model);
    gb_model_free(&m);
}
END_TEST

/* Every supported weight type loads when all matrices use it. */
static const uint32_t SUPPORTED_MATRIX_TYPES[] = {GB_F16, GB_BF16, GB_Q8_0};

START_TEST(test_supported_matrix_types_load)
{
    gb_model m;
    tiny_model(&m);
    for (size_t i = 0; i < m.n_tensors; i++)
        if (m.tensors[i].n_dims == 2)
            gb_tensor_set_type(&m.tensors[i], SUPPORTED_MATRIX_TYPES[_i]);
    expect_loads(&m);
    gb_model_free(&m);
}
END_TEST

/* A non-default general.alignment moves the data; the loader must follow. */
START_TEST(test_alignment_64_loads)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_u32(&m, "general.alignment", 64);
    m.alignment = 64;
    expect_loads(&m);
    gb_model_free(&m);
}
END_TEST

/* Arrays (like a tokenizer vocabulary) are parsed and ignored. */
START_TEST(test_array_metadata_is_accepted)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_append(&m, "tokenizer.ggml.tokens", GB_ARRAY);
    gb_put_u32(&kv->value, GB_STRING);
    gb_put_u64(&kv->value, 16);
    for (int i = 0; i < 16; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "<t%d>", i);
        gb_put_str(&kv->value, tok);
    }
    kv = gb_kv_append(&m, "tokenizer.ggml.scores", GB_ARRAY);
    gb_put_u32(&kv->value, GB_FLOAT32);
    gb_put_u64(&kv->value, 16);
    for (int i = 0; i < 16; i++)
        gb_put_f32(&kv->value, (float)i);
    expect_loads(&m);
    gb_model_free(&m);
}
END_TEST

/* ---- error buffer handling ------------------------------------------------ */

START_TEST(test_errbuf_is_truncated_and_terminated)
{
    char err[8];
    memset(err, 'x', sizeof err);
    di_model *model = UNTOUCHED;
    di_status st = di_model_load("/nonexistent-dir-detinfer/model.gguf", &model, err, sizeof err);
    ck_assert_int_eq(st, DI_ERR_IO);
    ck_assert_ptr_null(model);
    ck_assert_msg(memchr(err, '\0', sizeof err) != NULL, "errbuf not NUL-terminated");
    ck_assert_uint_gt(strlen(err), 0);

    memset(err, 'x', sizeof err);
    model = UNTOUCHED;
    st = di_model_load("/nonexistent-dir-detinfer/model.gguf", &model, err, 0);
    ck_assert_int_eq(st, DI_ERR_IO);
    ck_assert_ptr_null(model);
    ck_assert_msg(err[0] == 'x', "errbuf written although errbuf_size is 0");

    model = UNTOUCHED;
    st = di_model_load("/nonexistent-dir-detinfer/model.gguf", &model, NULL, 0);
    ck_assert_int_eq(st, DI_ERR_IO);
    ck_assert_ptr_null(model);
}
END_TEST

/* A refused file with no error buffer: same status, no crash. */
START_TEST(test_bad_file_without_errbuf)
{
    gb_model m;
    tiny_model(&m);
    gb_tensor_remove(&m, "blk.0.ffn_up.weight");
    di_model *model = UNTOUCHED;
    di_status st = load_model(&m, &model, NULL, 0);
    ck_assert_int_eq(st, DI_ERR_MODEL);
    ck_assert_ptr_null(model);
    gb_model_free(&m);
}
END_TEST

START_TEST(test_load_null_arguments)
{
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    ck_assert_int_eq(di_model_load(NULL, &model, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(model);
    ck_assert_int_eq(di_model_load("x.gguf", NULL, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
}
END_TEST

/* ---- architecture and hyperparameters ------------------------------------------ */

START_TEST(test_missing_architecture)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_remove(&m, "general.architecture");
    expect_refused(&m, DI_ERR_MODEL, "general.architecture");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_architecture_wrong_type)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_u32(&m, "general.architecture", 1);
    expect_refused(&m, DI_ERR_MODEL, "general.architecture");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_unknown_architecture)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_str(&m, "general.architecture", "gpt-j");
    expect_refused(&m, DI_ERR_UNSUPPORTED, "gpt-j");
    gb_model_free(&m);
}
END_TEST

static const char *const REQUIRED_KEYS[] = {
    "llama.context_length",       "llama.embedding_length",     "llama.block_count",
    "llama.feed_forward_length",  "llama.attention.head_count",
    "llama.attention.layer_norm_rms_epsilon",
};
#define N_REQUIRED_KEYS (int)(sizeof REQUIRED_KEYS / sizeof REQUIRED_KEYS[0])

START_TEST(test_required_key_missing)
{
    gb_model m;
    tiny_model(&m);
    ck_assert(gb_kv_remove(&m, REQUIRED_KEYS[_i]));
    expect_refused(&m, DI_ERR_MODEL, REQUIRED_KEYS[_i]);
    gb_model_free(&m);
}
END_TEST

/* Every llama key the loader reads, required or optional, given a string. */
static const char *const ALL_LLAMA_KEYS[] = {
    "llama.context_length",       "llama.embedding_length",
    "llama.block_count",          "llama.feed_forward_length",
    "llama.attention.head_count", "llama.attention.layer_norm_rms_epsilon",
    "llama.attention.head_count_kv", "llama.rope.freq_base",
    "llama.rope.dimension_count",
};
#define N_ALL_LLAMA_KEYS (int)(sizeof ALL_LLAMA_KEYS / sizeof ALL_LLAMA_KEYS[0])

START_TEST(test_key_wrong_type_string)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_str(&m, ALL_LLAMA_KEYS[_i], "32");
    expect_refused(&m, DI_ERR_MODEL, ALL_LLAMA_KEYS[_i]);
    gb_model_free(&m);
}
END_TEST

/* Integer keys given a float, and float keys given an integer array. */
START_TEST(test_key_wrong_type_numeric)
{
    gb_model m;
    tiny_model(&m);
    const char *key = ALL_LLAMA_KEYS[_i];
    gb_kv *kv = gb_kv_find(&m, key);
    if (kv->type == GB_FLOAT32) {
        kv = gb_kv_set_raw(&m, key, GB_ARRAY);
        gb_put_u32(&kv->value, GB_FLOAT32);
        gb_put_u64(&kv->value, 1);
        gb_put_f32(&kv->value, 1.0f);
    } else {
        gb_kv_set_f32(&m, key, 2.0f);
    }
    expect_refused(&m, DI_ERR_MODEL, key);
    gb_model_free(&m);
}
END_TEST

/* Integer hyperparameters that contradict each other or are absurd. The
 * needle is a word any sensible message about that value contains. */
static const struct {
    const char *key;
    uint32_t value;
    const char *key2; /* optional second change */
    uint32_t value2;
    const char *needle;
} BAD_HPARAMS[] = {
    {"llama.attention.head_count", 0, NULL, 0, "head"},
    {"llama.attention.head_count", 3, "llama.attention.head_count_kv", 3, "head"},
    {"llama.attention.head_count", 4, "llama.attention.head_count_kv", 3, "head"},
    {"llama.attention.head_count_kv", 0, NULL, 0, "head"},
    {"llama.attention.head_count_kv", 4, NULL, 0, "head"},
    {"llama.block_count", 0, NULL, 0, "block"},
    {"llama.embedding_length", 0, NULL, 0, "embedding"},
    {"llama.feed_forward_length", 0, NULL, 0, "feed"},
    {"llama.context_length", 0, NULL, 0, "context"},
    {"llama.embedding_length", 0x80000000u, NULL, 0, "embedding"},
    {"llama.block_count", 0x80000000u, NULL, 0, "block"},
    {"llama.feed_forward_length", 0x80000000u, NULL, 0, "feed"},
    {"llama.attention.head_count", 0x80000000u, NULL, 0, "head"},
    {"llama.attention.head_count_kv", 0x80000000u, NULL, 0, "head"},
    {"llama.context_length", 0xffffffffu, NULL, 0, "context"},
    {"llama.rope.dimension_count", 17, NULL, 0, "dimension"}, /* > head dim 16 */
    {"llama.rope.dimension_count", 15, NULL, 0, "dimension"}, /* odd */
    {"llama.rope.dimension_count", 0x80000000u, NULL, 0, "dimension"},
};
#define N_BAD_HPARAMS (int)(sizeof BAD_HPARAMS / sizeof BAD_HPARAMS[0])

START_TEST(test_inconsistent_hparams)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_u32(&m, BAD_HPARAMS[_i].key, BAD_HPARAMS[_i].value);
    if (BAD_HPARAMS[_i].key2)
        gb_kv_set_u32(&m, BAD_HPARAMS[_i].key2, BAD_HPARAMS[_i].value2);
    expect_refused(&m, DI_ERR_MODEL, BAD_HPARAMS[_i].needle);
    gb_model_free(&m);
}
END_TEST

/* Negative integers in signed keys are as wrong as zero. */
START_TEST(test_negative_signed_hparam)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_i32(&m, "llama.block_count", -1);
    expect_refused(&m, DI_ERR_MODEL, "block");
    gb_model_free(&m);
}
END_TEST

/* Hyperparameters inside every documented range that promise far more
 * weights than a 40 KB file holds (4096 layers of width 2^20). The file is
 * inconsistent, so DI_ERR_MODEL; the loader must notice before reserving
 * memory for the promise (gigabytes), which would give
 * DI_ERR_OUT_OF_MEMORY or, under ASan, abort. */
START_TEST(test_hparams_beyond_file)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_u32(&m, "llama.block_count", 4096);
    gb_kv_set_u32(&m, "llama.embedding_length", 1u << 20);
    gb_kv_set_u32(&m, "llama.attention.head_count", 1);
    gb_kv_set_u32(&m, "llama.attention.head_count_kv", 1);
    gb_kv_remove(&m, "llama.rope.dimension_count");
    expect_refused(&m, DI_ERR_MODEL, NULL);
    gb_model_free(&m);
}
END_TEST

static const struct { const char *key; float value; const char *needle; } BAD_FLOAT_HPARAMS[] = {
    {"llama.attention.layer_norm_rms_epsilon", 0.0f, "epsilon"},
    {"llama.attention.layer_norm_rms_epsilon", -1e-5f, "epsilon"},
    {"llama.attention.layer_norm_rms_epsilon", __builtin_nanf(""), "epsilon"},
    {"llama.attention.layer_norm_rms_epsilon", __builtin_inff(), "epsilon"},
    {"llama.rope.freq_base", 0.0f, "freq"},
    {"llama.rope.freq_base", -10000.0f, "freq"},
    {"llama.rope.freq_base", __builtin_nanf(""), "freq"},
};
#define N_BAD_FLOAT_HPARAMS (int)(sizeof BAD_FLOAT_HPARAMS / sizeof BAD_FLOAT_HPARAMS[0])

START_TEST(test_bad_float_hparams)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_f32(&m, BAD_FLOAT_HPARAMS[_i].key, BAD_FLOAT_HPARAMS[_i].value);
    expect_refused(&m, DI_ERR_MODEL, BAD_FLOAT_HPARAMS[_i].needle);
    gb_model_free(&m);
}
END_TEST

/* The names of every tensor the tiny model needs (one layer, tied output). */
static const char *const REQUIRED_TENSORS[] = {
    "token_embd.weight",       "output_norm.weight",      "blk.0.attn_norm.weight",
    "blk.0.attn_q.weight",     "blk.0.attn_k.weight",     "blk.0.attn_v.weight",
    "blk.0.attn_output.weight", "blk.0.ffn_norm.weight",  "blk.0.ffn_gate.weight",
    "blk.0.ffn_up.weight",     "blk.0.ffn_down.weight",
};
#define N_REQUIRED_TENSORS (int)(sizeof REQUIRED_TENSORS / sizeof REQUIRED_TENSORS[0])

/* ---- tensors -------------------------------------------------------------------- */

START_TEST(test_required_tensor_missing)
{
    gb_model m;
    tiny_model(&m);
    ck_assert(gb_tensor_remove(&m, REQUIRED_TENSORS[_i]));
    expect_refused(&m, DI_ERR_MODEL, REQUIRED_TENSORS[_i]);
    gb_model_free(&m);
}
END_TEST

/* A second layer announced by block_count 2 but never written. */
START_TEST(test_missing_layer)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_u32(&m, "llama.block_count", 2);
    expect_refused(&m, DI_ERR_MODEL, "blk.1.");
    gb_model_free(&m);
}
END_TEST

static const struct {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[3];
} WRONG_SHAPES[] = {
    {"blk.0.ffn_gate.weight", 2, {64, 32, 1}},   /* transposed */
    {"blk.0.ffn_down.weight", 2, {32, 64, 1}},   /* transposed */
    {"blk.0.attn_k.weight", 2, {32, 32, 1}},     /* as if head_count_kv were 2 */
    {"blk.0.attn_q.weight", 2, {32, 16, 1}},     /* as if head_count were 1 */
    {"blk.0.attn_output.weight", 2, {16, 32, 1}},
    {"blk.0.attn_q.weight", 3, {32, 32, 2}},     /* one dim too many */
    {"blk.0.attn_q.weight", 1, {1024, 1, 1}},    /* flattened */
    {"blk.0.attn_norm.weight", 1, {31, 1, 1}},
    {"blk.0.ffn_norm.weight", 2, {32, 2, 1}},
    {"output_norm.weight", 1, {64, 1, 1}},
    {"token_embd.weight", 2, {16, 32, 1}},       /* rows of n_vocab instead of n_embd */
};
#define N_WRONG_SHAPES (int)(sizeof WRONG_SHAPES / sizeof WRONG_SHAPES[0])

START_TEST(test_tensor_wrong_shape)
{
    gb_model m;
    tiny_model(&m);
    gb_tensor_set_dims(gb_tensor_find(&m, WRONG_SHAPES[_i].name), WRONG_SHAPES[_i].n_dims,
                       WRONG_SHAPES[_i].ne);
    expect_refused(&m, DI_ERR_MODEL, WRONG_SHAPES[_i].name);
    gb_model_free(&m);
}
END_TEST

/* An untied output.weight must agree with token_embd about the vocabulary. */
START_TEST(test_output_vocab_mismatch)
{
    gb_model m;
    gb_llama_params p = gb_llama_defaults();
    p.untied = 1;
    gb_model_llama(&m, &p);
    const uint64_t ne[2] = {32, 15};
    gb_tensor_set_dims(gb_tensor_find(&m, "output.weight"), 2, ne);
    expect_refused(&m, DI_ERR_MODEL, "output.weight");
    gb_model_free(&m);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------ */

static TCase *valid_case(void)
{
    TCase *tc = tcase_create("valid");
    tcase_add_test(tc, test_valid_model_loads);
    tcase_add_test(tc, test_untied_output_loads);
    tcase_add_test(tc, test_optional_keys_may_be_absent);
    LOOP(tc, test_supported_matrix_types_load, SUPPORTED_MATRIX_TYPES);
    tcase_add_test(tc, test_alignment_64_loads);
    tcase_add_test(tc, test_array_metadata_is_accepted);
    tcase_add_test(tc, test_errbuf_is_truncated_and_terminated);
    tcase_add_test(tc, test_bad_file_without_errbuf);
    tcase_add_test(tc, test_load_null_arguments);
    return tc;
}

static TCase *hparams_case(void)
{
    TCase *tc = tcase_create("hparams");
    tcase_add_test(tc, test_missing_architecture);
    tcase_add_test(tc, test_architecture_wrong_type);
    tcase_add_test(tc, test_unknown_architecture);
    tcase_add_loop_test(tc, test_required_key_missing, 0, N_REQUIRED_KEYS);
    tcase_add_loop_test(tc, test_key_wrong_type_string, 0, N_ALL_LLAMA_KEYS);
    tcase_add_loop_test(tc, test_key_wrong_type_numeric, 0, N_ALL_LLAMA_KEYS);
    tcase_add_loop_test(tc, test_inconsistent_hparams, 0, N_BAD_HPARAMS);
    tcase_add_test(tc, test_negative_signed_hparam);
    tcase_add_test(tc, test_hparams_beyond_file);
    tcase_add_loop_test(tc, test_bad_float_hparams, 0, N_BAD_FLOAT_HPARAMS);
    return tc;
}

static TCase *tensors_case(void)
{
    TCase *tc = tcase_create("tensors");
    tcase_add_loop_test(tc, test_required_tensor_missing, 0, N_REQUIRED_TENSORS);
    tcase_add_test(tc, test_missing_layer);
    tcase_add_loop_test(tc, test_tensor_wrong_shape, 0, N_WRONG_SHAPES);
    tcase_add_test(tc, test_output_vocab_mismatch);
    return tc;
}

Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    suite_add_tcase(s, valid_case());
    suite_add_tcase(s, hparams_case());
    suite_add_tcase(s, tensors_case());
    return s;
}
