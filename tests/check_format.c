/*
 * check_format.c — untrusted model files: every malformed or inconsistent
 * file gives its documented status, *out NULL and a message naming what is
 * wrong; nothing crashes and nothing leaks (the suite runs under ASan/LSan).
 * Files are written by gguf_builder into a fresh temp dir and removed before
 * any assertion, so a failing test leaves nothing behind.
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
#include "gguf.h"
#include "gguf_builder.h"
#include "test_util.h"

#define ERRBUF_SIZE 512
#define TWO_POW(n) ((uint64_t)1 << (n))

/* What *out holds before a load, so a library that forgets to clear it on
 * failure is caught (and the marker is never freed). */
static char untouched_marker;
#define UNTOUCHED ((di_model *)&untouched_marker)

/* ---- helpers ------------------------------------------------------------- */

/* Case-insensitive substring test. */
static int mentions(const char *text, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = text; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return n == 0;
}

static void tiny_model(gb_model *m)
{
    gb_llama_params p = gb_llama_defaults();
    gb_model_llama(m, &p);
}

/* Writes bytes to a fresh temp file, loads it and removes the file and dir. */
static di_status load_bytes(const void *bytes, size_t len, di_model **out, char *err,
                            size_t err_size)
{
    char dir[4096], path[4200];
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    gb_path(path, sizeof path, dir, "model.gguf");
    int written = gb_write_file(path, bytes, len);
    di_status st = written == 0 ? di_model_load(path, out, err, err_size) : DI_ERR_INTERNAL;
    gb_rmdir(dir);
    ck_assert_msg(written == 0, "cannot write %s", path);
    return st;
}

static di_status load_model(const gb_model *m, di_model **out, char *err, size_t err_size)
{
    gb_buf b;
    gb_buf_init(&b);
    gb_model_serialize(m, &b, NULL);
    di_status st = load_bytes(b.data, b.len, out, err, err_size);
    gb_buf_free(&b);
    return st;
}

/* The common assertion of every bad-file case. needle may be NULL. */
static void check_refused(di_status st, di_model *model, const char *err, di_status want,
                          const char *needle)
{
    if (model != UNTOUCHED)
        di_model_free(model); /* NULL when the library behaves; freed to keep LSan quiet otherwise */
    ck_assert_msg(st == want, "status %s, expected %s (message: '%s')", di_status_name(st),
                  di_status_name(want), err);
    ck_assert_msg(model == NULL, "*out is not NULL after a failed load");
    ck_assert_msg(err[0] != '\0', "empty error message for %s", di_status_name(want));
    if (needle)
        ck_assert_msg(mentions(err, needle), "message '%s' does not mention '%s'", err, needle);
}

static void expect_bytes_refused(const void *bytes, size_t len, di_status want, const char *needle)
{
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    di_status st = load_bytes(bytes, len, &model, err, sizeof err);
    check_refused(st, model, err, want, needle);
}

static void expect_refused(const gb_model *m, di_status want, const char *needle)
{
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    di_status st = load_model(m, &model, err, sizeof err);
    check_refused(st, model, err, want, needle);
}

/* Builds, distorts nothing, and expects the model to load. */
static void expect_loads(const gb_model *m)
{
    char err[ERRBUF_SIZE] = "";
    di_model *model = NULL;
    di_status st = load_model(m, &model, err, sizeof err);
    di_model_free(model);
    ck_assert_msg(st == DI_OK, "status %s: %s", di_status_name(st), err);
}

/* The names of every tensor the tiny model needs (one layer, tied output). */
static const char *const REQUIRED_TENSORS[] = {
    "token_embd.weight",       "output_norm.weight",      "blk.0.attn_norm.weight",
    "blk.0.attn_q.weight",     "blk.0.attn_k.weight",     "blk.0.attn_v.weight",
    "blk.0.attn_output.weight", "blk.0.ffn_norm.weight",  "blk.0.ffn_gate.weight",
    "blk.0.ffn_up.weight",     "blk.0.ffn_down.weight",
};
#define N_REQUIRED_TENSORS (int)(sizeof REQUIRED_TENSORS / sizeof REQUIRED_TENSORS[0])

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

/* ---- files that cannot be read -------------------------------------------- */

START_TEST(test_missing_file_is_io)
{
    char dir[4096], path[4200], err[ERRBUF_SIZE] = "";
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    gb_path(path, sizeof path, dir, "absent.gguf");
    di_model *model = UNTOUCHED;
    di_status st = di_model_load(path, &model, err, sizeof err);
    gb_rmdir(dir);
    check_refused(st, model, err, DI_ERR_IO, "absent.gguf");
}
END_TEST

START_TEST(test_directory_is_io)
{
    char dir[4096], err[ERRBUF_SIZE] = "";
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    di_model *model = UNTOUCHED;
    di_status st = di_model_load(dir, &model, err, sizeof err);
    gb_rmdir(dir);
    check_refused(st, model, err, DI_ERR_IO, NULL);
}
END_TEST

/* An empty file opens fine; it is simply not GGUF. */
START_TEST(test_empty_file_is_format)
{
    expect_bytes_refused("", 0, DI_ERR_FORMAT, NULL);
}
END_TEST

/* ---- truncation ------------------------------------------------------------ */

/* Every proper prefix of the valid file is refused as DI_ERR_FORMAT. One file
 * is shortened in place (truncate) so the loop costs one load per length. */
START_TEST(test_truncated_at_every_length)
{
    gb_model m;
    gb_layout lay;
    char dir[4096], path[4200];
    tiny_model(&m);
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    gb_path(path, sizeof path, dir, "model.gguf");
    ck_assert_int_eq(gb_model_write(&m, path, &lay), 0);
    gb_model_free(&m);

    size_t bad_len = SIZE_MAX;
    di_status bad_st = DI_OK;
    char bad_err[ERRBUF_SIZE] = "";
    for (size_t len = lay.end; len-- > 0;) {
        char err[ERRBUF_SIZE] = "";
        di_model *model = UNTOUCHED;
        if (truncate(path, (off_t)len) != 0)
            break;
        di_status st = di_model_load(path, &model, err, sizeof err);
        if (model != UNTOUCHED)
            di_model_free(model);
        if (st != DI_ERR_FORMAT || model != NULL || err[0] == '\0') {
            bad_len = len; /* remember the first offender, then stop */
            bad_st = st;
            snprintf(bad_err, sizeof bad_err, "%s", err);
            break;
        }
    }
    gb_rmdir(dir);
    ck_assert_msg(bad_len == SIZE_MAX, "file truncated to %zu of %zu bytes: %s, message '%s'",
                  bad_len, lay.end, di_status_name(bad_st), bad_err);
}
END_TEST

/* Explicit cuts at and around each section boundary, by name. */
START_TEST(test_truncated_at_section_boundaries)
{
    gb_model m;
    gb_layout lay;
    gb_buf b;
    tiny_model(&m);
    gb_buf_init(&b);
    gb_model_serialize(&m, &b, &lay);
    const struct { const char *what; size_t len; } cuts[] = {
        {"inside magic", 2},
        {"after magic", 4},
        {"inside version", 6},
        {"inside tensor count", 12},
        {"inside kv count", 20},
        {"end of header", lay.kv},
        {"inside first key length", lay.kv + 3},
        {"inside first key", lay.kv + 8 + 5},
        {"middle of kv section", (lay.kv + lay.tensor_info) / 2},
        {"one byte before tensor infos", lay.tensor_info - 1},
        {"start of tensor infos", lay.tensor_info},
        {"inside first tensor name", lay.tensor_info + 10},
        {"middle of tensor infos", (lay.tensor_info + lay.data) / 2},
        {"one byte before data", lay.data - 1},
        {"start of data", lay.data},
        {"one byte into data", lay.data + 1},
        {"middle of data", (lay.data + lay.end) / 2},
        {"one byte short", lay.end - 1},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char err[ERRBUF_SIZE] = "";
        di_model *model = UNTOUCHED;
        di_status st = load_bytes(b.data, cuts[i].len, &model, err, sizeof err);
        ck_assert_msg(st == DI_ERR_FORMAT && model == NULL && err[0] != '\0',
                      "cut %s (%zu bytes): %s, message '%s'", cuts[i].what, cuts[i].len,
                      di_status_name(st), err);
    }
    gb_buf_free(&b);
    gb_model_free(&m);
}
END_TEST

/* ---- header ------------------------------------------------------------------ */

static const char *const BAD_MAGICS[] = {"GGUG", "FUGG", "gguf", "\0\0\0\0", "GGML"};

START_TEST(test_wrong_magic)
{
    gb_model m;
    tiny_model(&m);
    memcpy(m.magic, BAD_MAGICS[_i], 4);
    expect_refused(&m, DI_ERR_FORMAT, "magic");
    gb_model_free(&m);
}
END_TEST

static const uint32_t BAD_VERSIONS[] = {0, 1, 2, 4, 0xffffffffu};

START_TEST(test_unsupported_version)
{
    gb_model m;
    tiny_model(&m);
    m.version = BAD_VERSIONS[_i];
    expect_refused(&m, DI_ERR_FORMAT, "version");
    gb_model_free(&m);
}
END_TEST

static const uint64_t ABSURD_COUNTS[] = {TWO_POW(63), TWO_POW(40), UINT64_MAX, 1000000};

START_TEST(test_absurd_tensor_count)
{
    gb_model m;
    tiny_model(&m);
    m.n_tensors_set = 1;
    m.n_tensors_field = ABSURD_COUNTS[_i];
    expect_refused(&m, DI_ERR_FORMAT, "tensor count");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_absurd_kv_count)
{
    gb_model m;
    tiny_model(&m);
    m.n_kv_set = 1;
    m.n_kv_field = ABSURD_COUNTS[_i];
    expect_refused(&m, DI_ERR_FORMAT, "count");
    gb_model_free(&m);
}
END_TEST

/* Counts one too small make the reader misread the rest: any refusal will
 * do, as long as it is clean. */
START_TEST(test_counts_one_too_small)
{
    gb_model m;
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    tiny_model(&m);
    m.n_tensors_set = 1;
    m.n_tensors_field = m.n_tensors - 1;
    di_status st = load_model(&m, &model, err, sizeof err);
    if (model != UNTOUCHED)
        di_model_free(model);
    ck_assert_msg(st != DI_OK && model == NULL && err[0], "tensor count - 1: %s",
                  di_status_name(st));
    m.n_tensors_set = 0;
    m.n_kv_set = 1;
    m.n_kv_field = m.n_kv - 1;
    model = UNTOUCHED;
    st = load_model(&m, &model, err, sizeof err);
    if (model != UNTOUCHED)
        di_model_free(model);
    ck_assert_msg(st != DI_OK && model == NULL && err[0], "kv count - 1: %s", di_status_name(st));
    gb_model_free(&m);
}
END_TEST

/* ---- metadata ---------------------------------------------------------------- */

/* Key lengths past the parser's name limit (1024) or past the end of the file. */
static const uint64_t ABSURD_KEY_LENGTHS[] = {TWO_POW(62), TWO_POW(40), UINT64_MAX, 1025, 100000};
/* String value lengths past the end of the ~40 KB file. */
static const uint64_t ABSURD_VALUE_LENGTHS[] = {TWO_POW(62), TWO_POW(40), UINT64_MAX, 100000};

START_TEST(test_absurd_key_length)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_find(&m, "llama.block_count");
    kv->key_len_set = 1;
    kv->key_len = ABSURD_KEY_LENGTHS[_i];
    expect_refused(&m, DI_ERR_FORMAT, "key");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_absurd_string_value_length)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_set_raw(&m, "general.name", GB_STRING);
    gb_put_str_len(&kv->value, ABSURD_VALUE_LENGTHS[_i], "tiny", 4);
    expect_refused(&m, DI_ERR_FORMAT, NULL);
    gb_model_free(&m);
}
END_TEST

/* element type, declared count */
static const struct { uint32_t type; uint64_t count; } ABSURD_ARRAYS[] = {
    {GB_UINT32, TWO_POW(62)}, {GB_UINT8, TWO_POW(40)}, {GB_UINT64, UINT64_MAX},
    {GB_STRING, TWO_POW(61)}, {GB_STRING, 100000},     {GB_FLOAT64, TWO_POW(61) + 1},
};

START_TEST(test_absurd_array_count)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_append(&m, "test.array", GB_ARRAY);
    gb_put_u32(&kv->value, ABSURD_ARRAYS[_i].type);
    gb_put_u64(&kv->value, ABSURD_ARRAYS[_i].count);
    gb_put_u64(&kv->value, 0); /* a few real bytes */
    expect_refused(&m, DI_ERR_FORMAT, NULL);
    gb_model_free(&m);
}
END_TEST

START_TEST(test_nested_array)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_append(&m, "test.nested", GB_ARRAY);
    gb_put_u32(&kv->value, GB_ARRAY); /* an array of arrays... */
    gb_put_u64(&kv->value, 1);
    gb_put_u32(&kv->value, GB_UINT32); /* ...whose one element holds two u32 */
    gb_put_u64(&kv->value, 2);
    gb_put_u32(&kv->value, 7);
    gb_put_u32(&kv->value, 8);
    expect_refused(&m, DI_ERR_FORMAT, "array");
    gb_model_free(&m);
}
END_TEST

static const uint32_t UNKNOWN_VALUE_TYPES[] = {13, 99, 0xffffffffu};

START_TEST(test_unknown_value_type)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_append(&m, "test.mystery", UNKNOWN_VALUE_TYPES[_i]);
    gb_put_u32(&kv->value, 1);
    expect_refused(&m, DI_ERR_FORMAT, "test.mystery");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_unknown_array_element_type)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_append(&m, "test.array", GB_ARRAY);
    gb_put_u32(&kv->value, 13);
    gb_put_u64(&kv->value, 1);
    gb_put_u32(&kv->value, 0);
    expect_refused(&m, DI_ERR_FORMAT, "array");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_bool_out_of_range)
{
    gb_model m;
    tiny_model(&m);
    gb_kv *kv = gb_kv_append(&m, "test.flag", GB_BOOL);
    gb_put_u8(&kv->value, 2);
    expect_refused(&m, DI_ERR_FORMAT, "bool");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_duplicate_key)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_duplicate(&m, "llama.block_count");
    expect_refused(&m, DI_ERR_FORMAT, "llama.block_count");
    gb_model_free(&m);
}
END_TEST

/* ---- tensor infos ------------------------------------------------------------- */

START_TEST(test_tensor_n_dims_out_of_range)
{
    static const uint32_t n_dims[] = {0, 5, 0xffffffffu};
    gb_model m;
    tiny_model(&m);
    gb_tensor *t = gb_tensor_find(&m, "blk.0.attn_q.weight");
    const uint64_t ne[GB_MAX_DIMS] = {32, 32, 1, 1, 1, 1, 1, 1};
    gb_tensor_set_dims(t, n_dims[_i], ne);
    expect_refused(&m, DI_ERR_FORMAT, "blk.0.attn_q.weight");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_tensor_dimension_zero)
{
    gb_model m;
    tiny_model(&m);
    const uint64_t ne[2] = {32, 0};
    gb_tensor_set_dims(gb_tensor_find(&m, "blk.0.ffn_up.weight"), 2, ne);
    expect_refused(&m, DI_ERR_FORMAT, "blk.0.ffn_up.weight");
    gb_model_free(&m);
}
END_TEST

/* Each dim alone is plausible (or just too big); their product is not. */
static const uint64_t OVERFLOW_DIMS[][4] = {
    {TWO_POW(40), TWO_POW(40), TWO_POW(40), TWO_POW(40)},
    {TWO_POW(32), TWO_POW(32), 1, 1},
    {TWO_POW(40), TWO_POW(24), 1, 1},
    {TWO_POW(41), 1, 1, 1},
    {UINT64_MAX, 2, 1, 1},
};

START_TEST(test_tensor_size_overflows)
{
    gb_model m;
    tiny_model(&m);
    gb_tensor_set_dims(gb_tensor_find(&m, "blk.0.ffn_down.weight"), 4, OVERFLOW_DIMS[_i]);
    expect_refused(&m, DI_ERR_FORMAT, "blk.0.ffn_down.weight");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_tensor_offset_outside_file)
{
    gb_model m;
    gb_layout lay;
    gb_buf b;
    tiny_model(&m);
    gb_buf_init(&b);
    gb_model_serialize(&m, &b, &lay);
    gb_tensor *last = &m.tensors[m.n_tensors - 1];
    const uint64_t offsets[] = {
        TWO_POW(40), UINT64_MAX - 31, /* aligned, far away or wrapping */
        lay.end - lay.data - last->data.len + 32, /* the last tensor, one alignment late */
    };
    last->offset_set = 1;
    last->offset = offsets[_i];
    expect_refused(&m, DI_ERR_FORMAT, last->name);
    gb_buf_free(&b);
    gb_model_free(&m);
}
END_TEST

START_TEST(test_tensor_offset_misaligned)
{
    static const uint64_t shifts[] = {1, 4, 16};
    gb_model m;
    tiny_model(&m);
    gb_tensor *t = &m.tensors[0];
    t->offset_set = 1;
    t->offset = shifts[_i]; /* the first tensor sits at 0 */
    expect_refused(&m, DI_ERR_FORMAT, t->name);
    gb_model_free(&m);
}
END_TEST

static const uint32_t BAD_ALIGNMENTS[] = {0, 3, 48, 1u << 17, 0x80000000u};

START_TEST(test_bad_alignment_value)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_u32(&m, "general.alignment", BAD_ALIGNMENTS[_i]);
    expect_refused(&m, DI_ERR_FORMAT, "alignment");
    gb_model_free(&m);
}
END_TEST

START_TEST(test_bad_alignment_type)
{
    gb_model m;
    tiny_model(&m);
    switch (_i) {
    case 0: gb_kv_set_str(&m, "general.alignment", "32"); break;
    case 1: gb_kv_set_u64(&m, "general.alignment", 32); break;
    default: gb_kv_set_f32(&m, "general.alignment", 32.0f); break;
    }
    expect_refused(&m, DI_ERR_FORMAT, "alignment");
    gb_model_free(&m);
}
END_TEST

static const uint32_t UNKNOWN_TENSOR_TYPES[] = {4, 5, 99, 0xffffffffu};

START_TEST(test_unknown_tensor_type)
{
    gb_model m;
    tiny_model(&m);
    gb_tensor_set_type(gb_tensor_find(&m, "blk.0.attn_v.weight"), UNKNOWN_TENSOR_TYPES[_i]);
    expect_refused(&m, DI_ERR_FORMAT, "blk.0.attn_v.weight");
    gb_model_free(&m);
}
END_TEST

/* Q8_0 rows must be whole blocks of 32: a row of 48 is not. */
START_TEST(test_partial_block_row)
{
    gb_model m;
    tiny_model(&m);
    gb_tensor *t = gb_tensor_find(&m, "blk.0.ffn_gate.weight");
    const uint64_t ne[2] = {48, 64};
    gb_tensor_set_type(t, GB_Q8_0);
    gb_tensor_set_dims(t, 2, ne);
    expect_refused(&m, DI_ERR_FORMAT, "blk.0.ffn_gate.weight");
    gb_model_free(&m);
}
END_TEST

/* The IQ types other than IQ4_NL/IQ4_XS are real GGUF types with a valid
 * layout that this build cannot run: the parser reads them, the loader names
 * the tensor and the type. The model is widened to n_embd 256 so rows are
 * whole blocks and the only thing wrong is the type. */
static const struct {
    uint32_t type;
    const char *type_name, *tensor;
} REFUSED_TYPES[] = {
    {GB_IQ2_XXS, "IQ2_XXS", "token_embd.weight"}, {GB_IQ2_XS, "IQ2_XS", "blk.0.attn_q.weight"},
    {GB_IQ3_XXS, "IQ3_XXS", "blk.0.ffn_up.weight"}, {GB_IQ1_S, "IQ1_S", "blk.0.attn_k.weight"},
    {GB_IQ3_S, "IQ3_S", "blk.0.attn_v.weight"},     {GB_IQ2_S, "IQ2_S", "blk.0.ffn_gate.weight"},
    {GB_IQ1_M, "IQ1_M", "blk.0.attn_output.weight"},
};

START_TEST(test_known_unsupported_type)
{
    gb_model m;
    gb_llama_params p = gb_llama_defaults();
    p.n_embd = 256;
    gb_model_llama(&m, &p);
    gb_tensor_set_type(gb_tensor_find(&m, REFUSED_TYPES[_i].tensor), REFUSED_TYPES[_i].type);
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    di_status st = load_model(&m, &model, err, sizeof err);
    check_refused(st, model, err, DI_ERR_UNSUPPORTED, NULL);
    char want[64];
    snprintf(want, sizeof want, "type %s (%u), not supported", REFUSED_TYPES[_i].type_name,
             REFUSED_TYPES[_i].type);
    ck_assert_msg(mentions(err, REFUSED_TYPES[_i].tensor) && mentions(err, want),
                  "message '%s' does not name the tensor %s and '%s'", err, REFUSED_TYPES[_i].tensor, want);
    gb_model_free(&m);
}
END_TEST

START_TEST(test_duplicate_tensor_name)
{
    gb_model m;
    tiny_model(&m);
    gb_tensor_duplicate(&m, "blk.0.ffn_norm.weight");
    expect_refused(&m, DI_ERR_FORMAT, "blk.0.ffn_norm.weight");
    gb_model_free(&m);
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

/* Replaces the F32 matrices parts[0..n_parts) of the model with one tensor
 * called name that holds their rows one after another (Phi-3's fused
 * tensors: the same rows, in one tensor). */
static void fuse_rows(gb_model *m, const char *name, const char *const *parts, int n_parts)
{
    uint64_t ne[2] = {0, 0};
    gb_buf rows;
    gb_buf_init(&rows);
    for (int i = 0; i < n_parts; i++) {
        const gb_tensor *t = gb_tensor_find(m, parts[i]);
        ck_assert_ptr_nonnull(t);
        ne[0] = t->ne[0];
        ne[1] += t->ne[1];
        gb_put(&rows, t->data.data, t->data.len);
    }
    for (int i = 0; i < n_parts; i++)
        ck_assert(gb_tensor_remove(m, parts[i]));
    gb_tensor *fused = gb_tensor_add(m, name, GB_F32, 2, ne);
    ck_assert_uint_eq(fused->data.len, rows.len);
    gb_buf_free(&fused->data);
    fused->data = rows;
}

static const char *const QKV_PARTS[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"};
static const char *const GATE_UP_PARTS[] = {"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"};

/* The model's general.architecture and its keys "llama.*" renamed to arch. */
static void rename_arch_keys(gb_model *m, const char *arch)
{
    gb_kv_set_str(m, "general.architecture", arch);
    for (size_t i = 0; i < m->n_kv; i++) {
        if (strncmp(m->kv[i].key, "llama.", 6) != 0)
            continue;
        char key[GB_MAX_NAME];
        snprintf(key, sizeof key, "%s.%s", arch, m->kv[i].key + 6);
        memcpy(m->kv[i].key, key, sizeof key);
    }
}

/* The tiny model as another architecture: its keys renamed from "llama." to
 * "<arch>.", and the tensors and keys that architecture adds, with the names
 * and shapes llama.cpp's converters write (gguf-py constants). */
static void tiny_arch_model(gb_model *m, const char *arch)
{
    const uint64_t embd = 32, q = 32, kv = 16, head = 16; /* gb_llama_defaults() */
    tiny_model(m);
    rename_arch_keys(m, arch);
    if (strcmp(arch, "qwen2") == 0) {
        gb_tensor_add(m, "blk.0.attn_q.bias", GB_F32, 1, &q);
        gb_tensor_add(m, "blk.0.attn_k.bias", GB_F32, 1, &kv);
        gb_tensor_add(m, "blk.0.attn_v.bias", GB_F32, 1, &kv);
    } else if (strcmp(arch, "gemma3") == 0) {
        gb_tensor_add(m, "blk.0.attn_q_norm.weight", GB_F32, 1, &head);
        gb_tensor_add(m, "blk.0.attn_k_norm.weight", GB_F32, 1, &head);
        gb_tensor_add(m, "blk.0.post_attention_norm.weight", GB_F32, 1, &embd);
        gb_tensor_add(m, "blk.0.post_ffw_norm.weight", GB_F32, 1, &embd);
        gb_kv_set_u32(m, "gemma3.attention.sliding_window", 8);
    } else if (strcmp(arch, "qwen3") == 0) {
        gb_tensor_add(m, "blk.0.attn_q_norm.weight", GB_F32, 1, &head);
        gb_tensor_add(m, "blk.0.attn_k_norm.weight", GB_F32, 1, &head);
    } else if (strcmp(arch, "phi3") == 0) {
        fuse_rows(m, "blk.0.attn_qkv.weight", QKV_PARTS, 3);
        fuse_rows(m, "blk.0.ffn_up.weight", GATE_UP_PARTS, 2);
    } else if (strcmp(arch, "gemma2") == 0) {
        /* no sliding window and no soft caps: llama.cpp's defaults apply */
        gb_tensor_add(m, "blk.0.post_attention_norm.weight", GB_F32, 1, &embd);
        gb_tensor_add(m, "blk.0.post_ffw_norm.weight", GB_F32, 1, &embd);
    }
}

static const char *const EXTRA_ARCHS[] = {"qwen2", "gemma3", "qwen3", "phi3", "gemma2"};

START_TEST(test_arch_model_loads)
{
    gb_model m;
    tiny_arch_model(&m, EXTRA_ARCHS[_i]);
    char err[ERRBUF_SIZE] = "";
    di_model *model = NULL;
    di_status st = load_model(&m, &model, err, sizeof err);
    ck_assert_msg(st == DI_OK, "%s: status %s: %s", EXTRA_ARCHS[_i], di_status_name(st), err);
    ck_assert_str_eq(di_model_architecture(model), EXTRA_ARCHS[_i]);
    di_model_free(model);
    gb_model_free(&m);
}
END_TEST

/* Each tensor an architecture adds is required by it. */
static const struct {
    const char *arch, *tensor;
} ARCH_TENSORS[] = {
    {"qwen2", "blk.0.attn_q.bias"},
    {"qwen2", "blk.0.attn_k.bias"},
    {"qwen2", "blk.0.attn_v.bias"},
    {"gemma3", "blk.0.attn_q_norm.weight"},
    {"gemma3", "blk.0.attn_k_norm.weight"},
    {"gemma3", "blk.0.post_attention_norm.weight"},
    {"gemma3", "blk.0.post_ffw_norm.weight"},
    {"qwen3", "blk.0.attn_q_norm.weight"},
    {"qwen3", "blk.0.attn_k_norm.weight"},
    {"phi3", "blk.0.ffn_up.weight"},
    {"gemma2", "blk.0.post_attention_norm.weight"},
    {"gemma2", "blk.0.post_ffw_norm.weight"},
};

START_TEST(test_arch_tensor_missing)
{
    gb_model m;
    tiny_arch_model(&m, ARCH_TENSORS[_i].arch);
    ck_assert(gb_tensor_remove(&m, ARCH_TENSORS[_i].tensor));
    expect_refused(&m, DI_ERR_MODEL, ARCH_TENSORS[_i].tensor);
    gb_model_free(&m);
}
END_TEST

/* ... and has its shape: a per-head norm of n_embd values is refused. */
START_TEST(test_arch_tensor_wrong_shape)
{
    const uint64_t embd = 32;
    gb_model m;
    tiny_arch_model(&m, "gemma3");
    gb_tensor_set_dims(gb_tensor_find(&m, "blk.0.attn_k_norm.weight"), 1, &embd);
    expect_refused(&m, DI_ERR_MODEL, "blk.0.attn_k_norm.weight");
    gb_model_free(&m);
}
END_TEST

/* Gemma 3's sliding window has no default. */
START_TEST(test_sliding_window_required)
{
    gb_model m;
    tiny_arch_model(&m, "gemma3");
    ck_assert(gb_kv_remove(&m, "gemma3.attention.sliding_window"));
    expect_refused(&m, DI_ERR_MODEL, "gemma3.attention.sliding_window");
    gb_model_free(&m);
}
END_TEST

/* Gemma 2's soft caps must be positive and finite: a negative, zero, NaN or
 * infinite value is refused, naming the key. */
static const struct {
    const char *key;
    float value;
} BAD_SOFTCAPS[] = {
    {"gemma2.attn_logit_softcapping", -50.0f},        {"gemma2.attn_logit_softcapping", 0.0f},
    {"gemma2.attn_logit_softcapping", __builtin_nanf("")}, {"gemma2.attn_logit_softcapping", __builtin_inff()},
    {"gemma2.final_logit_softcapping", -30.0f},       {"gemma2.final_logit_softcapping", 0.0f},
    {"gemma2.final_logit_softcapping", __builtin_nanf("")}, {"gemma2.final_logit_softcapping", -__builtin_inff()},
};

START_TEST(test_gemma2_bad_softcap)
{
    gb_model m;
    tiny_arch_model(&m, "gemma2");
    gb_kv_set_f32(&m, BAD_SOFTCAPS[_i].key, BAD_SOFTCAPS[_i].value);
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    const di_status st = load_model(&m, &model, err, sizeof err);
    check_refused(st, model, err, DI_ERR_MODEL, BAD_SOFTCAPS[_i].key);
    ck_assert_msg(strstr(err, "must be positive and finite") != NULL, "message: %s", err);
    gb_model_free(&m);
}
END_TEST

/* The logits digests of a fixed 8-token prompt on the model m describes: the
 * tests below compare a file with variants of it. */
enum { PROMPT_DIGESTS = 8 };
static void prompt_digests_of(const gb_model *m, di_digest out[PROMPT_DIGESTS])
{
    static const int32_t prompt[PROMPT_DIGESTS] = {1, 5, 9, 2, 14, 7, 3, 11};
    char err[ERRBUF_SIZE] = "";
    di_model *model = NULL;
    const di_status st = load_model(m, &model, err, sizeof err);
    ck_assert_msg(st == DI_OK, "status %s: %s", di_status_name(st), err);
    di_session *s = tu_session(model, 1, 1, 0);
    tu_prompt_digests(s, 0, prompt, PROMPT_DIGESTS, NULL, 0, out);
    di_session_free(s);
    di_model_free(model);
}

/* The digests of 8 prompt positions of the tiny gemma2 model with up to three
 * keys set (value 0: the key left out). */
static void gemma2_digests(float attn_cap, float final_cap, uint32_t window, di_digest *out)
{
    gb_model m;
    tiny_arch_model(&m, "gemma2");
    if (attn_cap != 0.0f)
        gb_kv_set_f32(&m, "gemma2.attn_logit_softcapping", attn_cap);
    if (final_cap != 0.0f)
        gb_kv_set_f32(&m, "gemma2.final_logit_softcapping", final_cap);
    if (window)
        gb_kv_set_u32(&m, "gemma2.attention.sliding_window", window);
    prompt_digests_of(&m, out);
    gb_model_free(&m);
}

/* Without the keys, Gemma 2 runs with llama.cpp's defaults: attention soft
 * cap 50, final soft cap 30, a window of 4096 keys. Each key is read: another
 * value changes the logits. */
START_TEST(test_gemma2_defaults)
{
    di_digest none[8], explicit_defaults[8], other[8];
    gemma2_digests(0.0f, 0.0f, 0, none);
    gemma2_digests(50.0f, 30.0f, 4096, explicit_defaults);
    for (int i = 0; i < 8; i++)
        tu_assert_digest_eq(&explicit_defaults[i], &none[i], "gemma2 defaults", i);
    const struct {
        float attn, final;
        uint32_t window;
    } changed[] = {{0.05f, 30.0f, 4096}, {50.0f, 0.05f, 4096}, {50.0f, 30.0f, 2}};
    for (size_t c = 0; c < sizeof changed / sizeof changed[0]; c++) {
        gemma2_digests(changed[c].attn, changed[c].final, changed[c].window, other);
        ck_assert_msg(!di_digest_equal(&other[7], &none[7]), "case %zu: the key changed no logit", c);
    }
}
END_TEST

/* llama.cpp reads no sliding window for the llama architecture (Mistral's
 * files run with full attention there): llama.attention.sliding_window
 * loads and changes no logit, even for a window shorter than the prompt. */
START_TEST(test_llama_sliding_window_is_ignored)
{
    static const int32_t prompt[] = {1, 5, 9, 2, 14, 7, 3, 11};
    enum { N = sizeof prompt / sizeof prompt[0] };
    di_digest full[N], windowed[N];
    for (int with_key = 0; with_key < 2; with_key++) {
        gb_model m;
        tiny_model(&m);
        if (with_key)
            gb_kv_set_u32(&m, "llama.attention.sliding_window", 2);
        char err[ERRBUF_SIZE] = "";
        di_model *model = NULL;
        const di_status st = load_model(&m, &model, err, sizeof err);
        ck_assert_msg(st == DI_OK, "status %s: %s", di_status_name(st), err);
        di_session *s = tu_session(model, 1, 1, 0);
        tu_prompt_digests(s, 0, prompt, N, NULL, 0, with_key ? windowed : full);
        di_session_free(s);
        di_model_free(model);
        gb_model_free(&m);
    }
    for (int i = 0; i < N; i++)
        tu_assert_digest_eq(&full[i], &windowed[i], "llama.attention.sliding_window", i);
}
END_TEST

/* ---- RoPE scaling (lib/model/rope_scaling.h) ------------------------------ */

static int digests_equal(const di_digest a[PROMPT_DIGESTS], const di_digest b[PROMPT_DIGESTS])
{
    return memcmp(a, b, PROMPT_DIGESTS * sizeof a[0]) == 0;
}

/* The tiny model's digests, unscaled. */
static void plain_digests(di_digest out[PROMPT_DIGESTS])
{
    gb_model m;
    tiny_model(&m);
    prompt_digests_of(&m, out);
    gb_model_free(&m);
}

/* Adds rope_freqs.weight with the n given F32 values (the tiny model has
 * n_rot 16: 8 of them). */
static void add_rope_freqs(gb_model *m, const float *values, uint64_t n)
{
    gb_tensor *t = gb_tensor_add(m, "rope_freqs.weight", GB_F32, 1, &n);
    ck_assert(t->data.len == n * sizeof(float));
    memcpy(t->data.data, values, n * sizeof(float));
}

/* rope_freqs.weight (Llama 3.1) loads and divides the frequencies: all ones
 * change no bit, Llama 3's factors change the logits. */
START_TEST(test_rope_freqs_apply)
{
    static const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    static const float llama3[8] = {1, 1, 1, 4.78f, 8, 8, 8, 8};
    di_digest plain[PROMPT_DIGESTS], d[PROMPT_DIGESTS];
    plain_digests(plain);
    gb_model m;
    tiny_model(&m);
    add_rope_freqs(&m, ones, 8);
    prompt_digests_of(&m, d);
    for (int i = 0; i < PROMPT_DIGESTS; i++)
        tu_assert_digest_eq(&plain[i], &d[i], "rope_freqs.weight of ones", i);
    gb_model_free(&m);
    tiny_model(&m);
    add_rope_freqs(&m, llama3, 8);
    prompt_digests_of(&m, d);
    ck_assert_msg(!digests_equal(plain, d), "rope_freqs.weight changed no logit");
    gb_model_free(&m);
}
END_TEST

/* rope_freqs.weight of the wrong length, type or values, or on an
 * architecture llama.cpp does not read it for; LongRoPE's tensors. */
START_TEST(test_rope_freqs_refused)
{
    static const float seven[7] = {1, 1, 1, 1, 1, 1, 1};
    static const float zero[8] = {1, 1, 1, 0, 1, 1, 1, 1};
    static const float negative[8] = {1, 1, 1, 1, 1, 1, 1, -2};
    static const float valid[8] = {1, 1, 1, 1, 2, 2, 2, 2};
    const uint64_t eight = 8;
    gb_model m;
    tiny_model(&m);
    add_rope_freqs(&m, seven, 7);
    expect_refused(&m, DI_ERR_MODEL, "rope_freqs.weight");
    gb_model_free(&m);
    tiny_model(&m);
    add_rope_freqs(&m, zero, 8);
    expect_refused(&m, DI_ERR_MODEL, "rope_freqs.weight");
    gb_model_free(&m);
    tiny_model(&m);
    add_rope_freqs(&m, negative, 8);
    expect_refused(&m, DI_ERR_MODEL, "rope_freqs.weight");
    gb_model_free(&m);
    tiny_model(&m);
    gb_tensor_add(&m, "rope_freqs.weight", GB_F16, 1, &eight);
    expect_refused(&m, DI_ERR_UNSUPPORTED, "rope_freqs.weight");
    gb_model_free(&m);
    tiny_arch_model(&m, "qwen2");
    add_rope_freqs(&m, valid, 8);
    expect_refused(&m, DI_ERR_UNSUPPORTED, "rope_freqs.weight");
    gb_model_free(&m);
    tiny_model(&m);
    gb_tensor_add(&m, "rope_factors_long.weight", GB_F32, 1, &eight);
    expect_refused(&m, DI_ERR_UNSUPPORTED, "rope_factors_long.weight");
    gb_model_free(&m);
    tiny_model(&m);
    gb_tensor_add(&m, "rope_factors_short.weight", GB_F32, 1, &eight);
    expect_refused(&m, DI_ERR_UNSUPPORTED, "rope_factors_short.weight");
    gb_model_free(&m);
}
END_TEST

/* The attention factor multiplies cos and sin (llama.cpp, every scaling
 * type): 1 is no factor, another value changes the logits. */
START_TEST(test_rope_attn_factor)
{
    di_digest plain[PROMPT_DIGESTS], d[PROMPT_DIGESTS];
    plain_digests(plain);
    gb_model m;
    tiny_model(&m);
    gb_kv_set_f32(&m, "llama.rope.scaling.attn_factor", 1.0f);
    prompt_digests_of(&m, d);
    ck_assert_msg(digests_equal(plain, d), "attn_factor 1 changed the logits");
    gb_kv_set_f32(&m, "llama.rope.scaling.attn_factor", 0.5f);
    prompt_digests_of(&m, d);
    ck_assert_msg(!digests_equal(plain, d), "attn_factor 0.5 changed no logit");
    gb_kv_set_f32(&m, "llama.rope.scaling.attn_factor", 0.0f);
    expect_refused(&m, DI_ERR_MODEL, "llama.rope.scaling.attn_factor");
    gb_model_free(&m);
}
END_TEST

/* The scaling types llama.cpp reads: none ignores the factor; linear is the
 * default type and rope.scale_linear its older key; YaRN's original context
 * is rope.scaling.original_context_length, else context_length (64 here). */
START_TEST(test_rope_scaling_types)
{
    di_digest plain[PROMPT_DIGESTS], linear[PROMPT_DIGESTS], d[PROMPT_DIGESTS];
    plain_digests(plain);
    gb_model m;
    tiny_model(&m);
    gb_kv_set_f32(&m, "llama.rope.scaling.factor", 4.0f);
    prompt_digests_of(&m, linear);
    ck_assert_msg(!digests_equal(plain, linear), "linear factor 4 changed no logit");
    gb_kv_set_str(&m, "llama.rope.scaling.type", "linear");
    prompt_digests_of(&m, d);
    ck_assert_msg(digests_equal(linear, d), "type linear differs from no type");
    gb_kv_set_str(&m, "llama.rope.scaling.type", "none");
    prompt_digests_of(&m, d);
    ck_assert_msg(digests_equal(plain, d), "type none scaled");
    gb_model_free(&m);

    tiny_model(&m);
    gb_kv_set_f32(&m, "llama.rope.scale_linear", 4.0f);
    prompt_digests_of(&m, d);
    ck_assert_msg(digests_equal(linear, d), "rope.scale_linear differs from rope.scaling.factor");
    gb_model_free(&m);

    di_digest yarn[PROMPT_DIGESTS];
    tiny_model(&m);
    gb_kv_set_str(&m, "llama.rope.scaling.type", "yarn");
    gb_kv_set_f32(&m, "llama.rope.scaling.factor", 4.0f);
    prompt_digests_of(&m, yarn);
    ck_assert_msg(!digests_equal(plain, yarn) && !digests_equal(linear, yarn), "YaRN is neither plain nor linear");
    gb_kv_set_u32(&m, "llama.rope.scaling.original_context_length", 64);
    prompt_digests_of(&m, d);
    ck_assert_msg(digests_equal(yarn, d), "original context = context_length differs from none given");
    gb_kv_set_u32(&m, "llama.rope.scaling.original_context_length", 16);
    prompt_digests_of(&m, d);
    ck_assert_msg(!digests_equal(yarn, d), "the original context changed no logit");
    /* YaRN's keys llama.cpp does not read for llama: its values only */
    di_digest betas[PROMPT_DIGESTS];
    gb_kv_set_f32(&m, "llama.rope.scaling.yarn_beta_fast", 32.0f);
    gb_kv_set_f32(&m, "llama.rope.scaling.yarn_beta_slow", 1.0f);
    prompt_digests_of(&m, betas);
    ck_assert_msg(digests_equal(betas, d), "the default betas changed the logits");
    /* without a factor YaRN changes nothing */
    gb_kv_remove(&m, "llama.rope.scaling.factor");
    prompt_digests_of(&m, d);
    ck_assert_msg(digests_equal(plain, d), "YaRN without a factor scaled");
    gb_model_free(&m);
}
END_TEST

/* What would change the logits and is not understood: refused by name. */
static const struct {
    const char *key;
    int is_string;
    const char *text;
    float value;
    di_status want;
    const char *needle;
} ROPE_REFUSED[] = {
    {"llama.rope.scaling.type", 1, "dynamic", 0, DI_ERR_UNSUPPORTED, "llama.rope.scaling.type"},
    {"llama.rope.scaling.type", 0, NULL, 1.0f, DI_ERR_UNSUPPORTED, "llama.rope.scaling.type"},
    {"llama.rope.scaling.yarn_beta_fast", 0, NULL, 16.0f, DI_ERR_UNSUPPORTED, "llama.rope.scaling.yarn_beta_fast"},
    {"llama.rope.scaling.yarn_beta_slow", 0, NULL, 2.0f, DI_ERR_UNSUPPORTED, "llama.rope.scaling.yarn_beta_slow"},
    {"llama.rope.scaling.yarn_ext_factor", 0, NULL, 0.5f, DI_ERR_UNSUPPORTED, "llama.rope.scaling.yarn_ext_factor"},
    {"llama.rope.scaling.yarn_attn_factor", 0, NULL, 0.5f, DI_ERR_UNSUPPORTED,
     "llama.rope.scaling.yarn_attn_factor"},
    {"llama.rope.scaling.yarn_log_multiplier", 0, NULL, 0.1f, DI_ERR_UNSUPPORTED,
     "llama.rope.scaling.yarn_log_multiplier"},
    {"llama.rope.scaling.factor", 0, NULL, 0.001f, DI_ERR_MODEL, "RoPE frequency"}, /* angles too large */
};

START_TEST(test_rope_scaling_refused)
{
    gb_model m;
    tiny_model(&m);
    if (ROPE_REFUSED[_i].is_string)
        gb_kv_set_str(&m, ROPE_REFUSED[_i].key, ROPE_REFUSED[_i].text);
    else
        gb_kv_set_f32(&m, ROPE_REFUSED[_i].key, ROPE_REFUSED[_i].value);
    expect_refused(&m, ROPE_REFUSED[_i].want, ROPE_REFUSED[_i].needle);
    gb_model_free(&m);
}
END_TEST

/* YaRN shrinking the context (a factor below 1) is refused. */
START_TEST(test_rope_yarn_factor_below_one)
{
    gb_model m;
    tiny_model(&m);
    gb_kv_set_str(&m, "llama.rope.scaling.type", "yarn");
    gb_kv_set_f32(&m, "llama.rope.scaling.factor", 0.5f);
    expect_refused(&m, DI_ERR_UNSUPPORTED, "llama.rope.scaling.factor");
    gb_model_free(&m);
}
END_TEST

/* ---- phi3 ---------------------------------------------------------------- */

/* llama.cpp reads Q, K and V from attn_qkv when the file has it and from
 * attn_q, attn_k, attn_v otherwise: the same rows either way give the same
 * logits (the fused tensor is bound as views of its rows). */
START_TEST(test_phi3_qkv_fused_or_separate)
{
    di_digest fused[PROMPT_DIGESTS], separate[PROMPT_DIGESTS];
    gb_model m;
    tiny_arch_model(&m, "phi3");
    prompt_digests_of(&m, fused);
    gb_model_free(&m);
    /* the same weights with the three matrices apart */
    tiny_model(&m);
    rename_arch_keys(&m, "phi3");
    fuse_rows(&m, "blk.0.ffn_up.weight", GATE_UP_PARTS, 2);
    prompt_digests_of(&m, separate);
    gb_model_free(&m);
    for (int i = 0; i < PROMPT_DIGESTS; i++)
        tu_assert_digest_eq(&fused[i], &separate[i], "phi3 attn_qkv versus attn_q/k/v", i);
}
END_TEST

/* A fused tensor must hold every row of its parts: attn_qkv of one row too
 * few, and an ffn_up of n_ff rows (a llama file called phi3) are refused. */
START_TEST(test_phi3_fused_rows_wrong)
{
    gb_model m;
    tiny_arch_model(&m, "phi3");
    const uint64_t qkv_short[2] = {32, 32 + 2 * 16 - 1}, up_short[2] = {32, 64};
    gb_tensor_set_dims(gb_tensor_find(&m, "blk.0.attn_qkv.weight"), 2, qkv_short);
    expect_refused(&m, DI_ERR_MODEL, "blk.0.attn_qkv.weight");
    gb_model_free(&m);
    tiny_arch_model(&m, "phi3");
    gb_tensor_set_dims(gb_tensor_find(&m, "blk.0.ffn_up.weight"), 2, up_short);
    expect_refused(&m, DI_ERR_MODEL, "blk.0.ffn_up.weight");
    gb_model_free(&m);
}
END_TEST

/* llama.cpp turns Phi-3's sliding window off ("Phi SWA is currently
 * disabled"): phi3.attention.sliding_window loads and changes no logit, even
 * for a window shorter than the prompt. */
START_TEST(test_phi3_sliding_window_is_ignored)
{
    di_digest full[PROMPT_DIGESTS], windowed[PROMPT_DIGESTS];
    gb_model m;
    tiny_arch_model(&m, "phi3");
    prompt_digests_of(&m, full);
    gb_kv_set_u32(&m, "phi3.attention.sliding_window", 2);
    prompt_digests_of(&m, windowed);
    gb_model_free(&m);
    for (int i = 0; i < PROMPT_DIGESTS; i++)
        tu_assert_digest_eq(&full[i], &windowed[i], "phi3.attention.sliding_window", i);
}
END_TEST

/* LongRoPE (llama.cpp reads it for phi3): its two factor tensors load
 * together (phi3_longrope_f32 runs them, check_rope.c); one without the
 * other, a factor tensor of the wrong length or type, a factor that is not
 * positive, and the tensors in another architecture are refused. */
static const char *const LONGROPE_TENSORS[] = {"rope_factors_long.weight", "rope_factors_short.weight"};

static void add_longrope_factors(gb_model *m, const char *name, uint64_t n, float value)
{
    gb_tensor *t = gb_tensor_add(m, name, GB_F32, 1, &n);
    ck_assert(t->data.len == n * sizeof(float));
    for (uint64_t i = 0; i < n; i++)
        memcpy(t->data.data + i * sizeof(float), &value, sizeof value);
}

START_TEST(test_phi3_longrope_malformed)
{
    const uint64_t half = 8; /* tiny_arch_model: head size 16, every value rotated */
    gb_model m;
    tiny_arch_model(&m, "phi3");
    add_longrope_factors(&m, LONGROPE_TENSORS[_i], half, 1.5f);
    expect_refused(&m, DI_ERR_MODEL, "LongRoPE needs both");
    add_longrope_factors(&m, LONGROPE_TENSORS[1 - _i], half - 1, 1.5f);
    expect_refused(&m, DI_ERR_MODEL, LONGROPE_TENSORS[1 - _i]);
    gb_model_free(&m);
    tiny_arch_model(&m, "phi3");
    add_longrope_factors(&m, LONGROPE_TENSORS[_i], half, 1.5f);
    add_longrope_factors(&m, LONGROPE_TENSORS[1 - _i], half, 0.0f);
    expect_refused(&m, DI_ERR_MODEL, "expected positive and finite");
    gb_model_free(&m);
    tiny_model(&m);
    add_longrope_factors(&m, LONGROPE_TENSORS[0], half, 1.5f);
    add_longrope_factors(&m, LONGROPE_TENSORS[1], half, 1.5f);
    expect_refused(&m, DI_ERR_UNSUPPORTED, "not supported for architecture llama");
    gb_model_free(&m);
}
END_TEST

/* LongRoPE factors of all ones change no bit, whichever the session takes
 * (the tiny model's sessions hold 64 positions: over an original context of
 * 64 the short factors, of 32 the long ones); rope.scaling.type "longrope"
 * scales like "linear" (llama.cpp applies no YaRN ramp to it). */
START_TEST(test_longrope_neutral_cases)
{
    di_digest plain[PROMPT_DIGESTS], d[PROMPT_DIGESTS];
    for (uint32_t orig = 32; orig <= 64; orig += 32) {
        gb_model m;
        tiny_arch_model(&m, "phi3");
        gb_kv_set_u32(&m, "phi3.rope.scaling.original_context_length", orig);
        prompt_digests_of(&m, plain);
        add_longrope_factors(&m, LONGROPE_TENSORS[0], 8, 1.0f);
        add_longrope_factors(&m, LONGROPE_TENSORS[1], 8, 1.0f);
        prompt_digests_of(&m, d);
        for (int i = 0; i < PROMPT_DIGESTS; i++)
            tu_assert_digest_eq(&plain[i], &d[i], "LongRoPE factors of ones", i);
        gb_model_free(&m);
    }
    gb_model m;
    tiny_model(&m);
    gb_kv_set_f32(&m, "llama.rope.scaling.factor", 2.0f);
    gb_kv_set_str(&m, "llama.rope.scaling.type", "linear");
    prompt_digests_of(&m, plain);
    gb_kv_set_str(&m, "llama.rope.scaling.type", "longrope");
    prompt_digests_of(&m, d);
    for (int i = 0; i < PROMPT_DIGESTS; i++)
        tu_assert_digest_eq(&plain[i], &d[i], "rope.scaling.type longrope versus linear", i);
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

/* ---- the parser directly ---------------------------------------------------------- */

START_TEST(test_parse_null_input)
{
    di_gguf g;
    char err[ERRBUF_SIZE] = "";
    memset(&g, 0xab, sizeof g);
    ck_assert_int_eq(di_gguf_parse(NULL, 0, &g, err, sizeof err), DI_ERR_FORMAT);
    ck_assert_uint_gt(strlen(err), 0);
    ck_assert_ptr_null(g.kv);
    ck_assert_ptr_null(g.tensors);
    ck_assert_uint_eq(g.n_kv, 0);
    ck_assert_int_eq(di_gguf_parse(NULL, 5, &g, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_gguf_parse(NULL, 0, &g, NULL, 0), DI_ERR_FORMAT);
    di_gguf_release(&g);
    di_gguf_release(NULL);
}
END_TEST

/* The smallest valid file: a header with no keys and no tensors. */
START_TEST(test_parse_header_only)
{
    gb_buf b;
    di_gguf g;
    char err[ERRBUF_SIZE] = "";
    gb_buf_init(&b);
    gb_put_header(&b, "GGUF", 3, 0, 0);
    ck_assert_int_eq(di_gguf_parse(b.data, b.len, &g, err, sizeof err), DI_OK);
    ck_assert_uint_eq(g.version, 3);
    ck_assert_uint_eq(g.n_kv, 0);
    ck_assert_uint_eq(g.n_tensors, 0);
    ck_assert_uint_eq(g.alignment, 32);
    ck_assert_ptr_null(di_gguf_find_kv(&g, "general.architecture"));
    ck_assert_ptr_null(di_gguf_find_tensor(&g, "token_embd.weight"));
    di_gguf_release(&g);
    gb_buf_free(&b);
}
END_TEST

static void check_parsed_kvs(const di_gguf *g)
{
    const di_gguf_kv *kv = di_gguf_find_kv(g, "general.architecture");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->type, DI_GGUF_STRING);
    ck_assert_uint_eq(kv->v.str.len, 5);
    ck_assert_mem_eq(kv->v.str.ptr, "llama", 5);
    kv = di_gguf_find_kv(g, "llama.feed_forward_length");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->type, DI_GGUF_UINT32);
    ck_assert_uint_eq(kv->v.u64, 64);
    kv = di_gguf_find_kv(g, "llama.attention.layer_norm_rms_epsilon");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->type, DI_GGUF_FLOAT32);
    ck_assert(kv->v.f64 == (double)1e-5f);
    ck_assert_ptr_null(di_gguf_find_kv(g, "llama.context"));         /* a prefix */
    ck_assert_ptr_null(di_gguf_find_kv(g, "llama.context_length2")); /* longer */
    ck_assert_ptr_null(di_gguf_find_kv(g, ""));
}

static void check_parsed_tensors(const di_gguf *g, gb_model *m, const gb_buf *b)
{
    for (size_t i = 0; i < m->n_tensors; i++) {
        const gb_tensor *want = &m->tensors[i];
        const di_gguf_tensor *t = di_gguf_find_tensor(g, want->name);
        ck_assert_msg(t != NULL, "tensor %s not found", want->name);
        ck_assert_uint_eq(t->n_dims, want->n_dims);
        for (int d = 0; d < DI_GGUF_MAX_DIMS; d++)
            ck_assert_uint_eq(t->ne[d], want->ne[d]);
        ck_assert_uint_eq(t->type, want->type);
        ck_assert_uint_eq(t->n_bytes, want->data.len);
        ck_assert_uint_eq(t->offset % g->alignment, 0);
        ck_assert_ptr_eq(t->data, b->data + g->data_offset + t->offset);
        ck_assert_mem_eq(t->data, want->data.data, want->data.len);
    }
    ck_assert_ptr_null(di_gguf_find_tensor(g, "blk.0.attn_q"));
    ck_assert_ptr_null(di_gguf_find_tensor(g, "output.weight"));
}

START_TEST(test_parse_valid_model)
{
    gb_model m;
    gb_layout lay;
    gb_buf b;
    di_gguf g;
    char err[ERRBUF_SIZE] = "";
    tiny_model(&m);
    gb_buf_init(&b);
    gb_model_serialize(&m, &b, &lay);
    ck_assert_int_eq(di_gguf_parse(b.data, b.len, &g, err, sizeof err), DI_OK);
    ck_assert_str_eq(err, "");
    ck_assert_uint_eq(g.version, 3);
    ck_assert_uint_eq(g.alignment, 32);
    ck_assert_uint_eq(g.n_kv, m.n_kv);
    ck_assert_uint_eq(g.n_tensors, m.n_tensors);
    ck_assert_uint_eq(g.data_offset, lay.data);
    check_parsed_kvs(&g);
    check_parsed_tensors(&g, &m, &b);
    di_gguf_release(&g);
    ck_assert_ptr_null(g.kv);
    gb_buf_free(&b);
    gb_model_free(&m);
}
END_TEST

/* Every proper prefix, straight into the parser (a heap copy of exactly len
 * bytes so ASan sees any read past the end). */
START_TEST(test_parse_every_prefix)
{
    gb_model m;
    gb_buf b;
    tiny_model(&m);
    gb_buf_init(&b);
    gb_model_serialize(&m, &b, NULL);
    for (size_t len = 0; len < b.len; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, b.data, len);
        di_gguf g;
        char err[ERRBUF_SIZE] = "";
        di_status st = di_gguf_parse(copy, len, &g, err, sizeof err);
        free(copy);
        if (st == DI_OK)
            di_gguf_release(&g);
        ck_assert_msg(st == DI_ERR_FORMAT && err[0], "prefix of %zu bytes: %s", len,
                      di_status_name(st));
    }
    gb_buf_free(&b);
    gb_model_free(&m);
}
END_TEST

START_TEST(test_type_tables)
{
    ck_assert_uint_eq(di_weight_block_elems(DI_TYPE_Q8_0), 32);
    ck_assert_uint_eq(di_weight_block_bytes(DI_TYPE_Q8_0), 34);
    ck_assert_uint_eq(di_weight_block_elems(DI_TYPE_BF16), 1);
    ck_assert_uint_eq(di_weight_block_bytes(DI_TYPE_BF16), 2);
    ck_assert_uint_eq(di_weight_block_elems(12), 256);
    ck_assert_uint_eq(di_weight_block_bytes(12), 144);
    ck_assert_uint_eq(di_weight_block_elems(9), 32); /* Q8_1: parsed, not computed */
    ck_assert_uint_eq(di_weight_block_bytes(9), 36);
    ck_assert(!di_weight_type_supported(9));
    ck_assert_uint_eq(di_weight_block_elems(99), 0);
    ck_assert_uint_eq(di_weight_block_bytes(99), 0);
    ck_assert_str_eq(di_weight_type_name(DI_TYPE_F32), "F32");
    ck_assert_str_eq(di_weight_type_name(12), "Q4_K");
    ck_assert_str_eq(di_weight_type_name(99), "unknown");
}
END_TEST

/* ---- suite ------------------------------------------------------------------------ */

#define LOOP(tc, test, array) tcase_add_loop_test(tc, test, 0, (int)(sizeof array / sizeof array[0]))

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

static TCase *io_case(void)
{
    TCase *tc = tcase_create("io");
    tcase_add_test(tc, test_missing_file_is_io);
    tcase_add_test(tc, test_directory_is_io);
    tcase_add_test(tc, test_empty_file_is_format);
    return tc;
}

static TCase *truncation_case(void)
{
    TCase *tc = tcase_create("truncation");
    tcase_set_timeout(tc, 300); /* one load per byte of the file, under sanitizers */
    tcase_add_test(tc, test_truncated_at_every_length);
    tcase_add_test(tc, test_truncated_at_section_boundaries);
    tcase_add_test(tc, test_parse_every_prefix);
    return tc;
}

static TCase *header_case(void)
{
    TCase *tc = tcase_create("header");
    LOOP(tc, test_wrong_magic, BAD_MAGICS);
    LOOP(tc, test_unsupported_version, BAD_VERSIONS);
    LOOP(tc, test_absurd_tensor_count, ABSURD_COUNTS);
    LOOP(tc, test_absurd_kv_count, ABSURD_COUNTS);
    tcase_add_test(tc, test_counts_one_too_small);
    return tc;
}

static TCase *metadata_case(void)
{
    TCase *tc = tcase_create("metadata");
    LOOP(tc, test_absurd_key_length, ABSURD_KEY_LENGTHS);
    LOOP(tc, test_absurd_string_value_length, ABSURD_VALUE_LENGTHS);
    LOOP(tc, test_absurd_array_count, ABSURD_ARRAYS);
    tcase_add_test(tc, test_nested_array);
    LOOP(tc, test_unknown_value_type, UNKNOWN_VALUE_TYPES);
    tcase_add_test(tc, test_unknown_array_element_type);
    tcase_add_test(tc, test_bool_out_of_range);
    tcase_add_test(tc, test_duplicate_key);
    return tc;
}

static TCase *tensor_info_case(void)
{
    TCase *tc = tcase_create("tensor_info");
    tcase_add_loop_test(tc, test_tensor_n_dims_out_of_range, 0, 3);
    tcase_add_test(tc, test_tensor_dimension_zero);
    LOOP(tc, test_tensor_size_overflows, OVERFLOW_DIMS);
    tcase_add_loop_test(tc, test_tensor_offset_outside_file, 0, 3);
    tcase_add_loop_test(tc, test_tensor_offset_misaligned, 0, 3);
    LOOP(tc, test_bad_alignment_value, BAD_ALIGNMENTS);
    tcase_add_loop_test(tc, test_bad_alignment_type, 0, 3);
    LOOP(tc, test_unknown_tensor_type, UNKNOWN_TENSOR_TYPES);
    tcase_add_test(tc, test_partial_block_row);
    LOOP(tc, test_known_unsupported_type, REFUSED_TYPES);
    tcase_add_test(tc, test_duplicate_tensor_name);
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

static TCase *architectures_case(void)
{
    TCase *tc = tcase_create("architectures");
    LOOP(tc, test_arch_model_loads, EXTRA_ARCHS);
    LOOP(tc, test_arch_tensor_missing, ARCH_TENSORS);
    tcase_add_test(tc, test_arch_tensor_wrong_shape);
    tcase_add_test(tc, test_sliding_window_required);
    tcase_add_test(tc, test_llama_sliding_window_is_ignored);
    tcase_add_test(tc, test_rope_attn_factor);
    tcase_add_test(tc, test_phi3_qkv_fused_or_separate);
    tcase_add_test(tc, test_phi3_fused_rows_wrong);
    tcase_add_test(tc, test_phi3_sliding_window_is_ignored);
    LOOP(tc, test_phi3_longrope_malformed, LONGROPE_TENSORS);
    tcase_add_test(tc, test_longrope_neutral_cases);
    tcase_add_test(tc, test_rope_freqs_apply);
    tcase_add_test(tc, test_rope_freqs_refused);
    tcase_add_test(tc, test_rope_scaling_types);
    tcase_add_loop_test(tc, test_rope_scaling_refused, 0, (int)(sizeof ROPE_REFUSED / sizeof ROPE_REFUSED[0]));
    tcase_add_test(tc, test_rope_yarn_factor_below_one);
    LOOP(tc, test_gemma2_bad_softcap, BAD_SOFTCAPS);
    tcase_add_test(tc, test_gemma2_defaults);
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

static TCase *parser_case(void)
{
    TCase *tc = tcase_create("parser");
    tcase_add_test(tc, test_parse_null_input);
    tcase_add_test(tc, test_parse_header_only);
    tcase_add_test(tc, test_parse_valid_model);
    tcase_add_test(tc, test_type_tables);
    return tc;
}

Suite *format_suite(void)
{
    Suite *s = suite_create("format");
    suite_add_tcase(s, valid_case());
    suite_add_tcase(s, io_case());
    suite_add_tcase(s, truncation_case());
    suite_add_tcase(s, header_case());
    suite_add_tcase(s, metadata_case());
    suite_add_tcase(s, tensor_info_case());
    suite_add_tcase(s, hparams_case());
    suite_add_tcase(s, architectures_case());
    suite_add_tcase(s, tensors_case());
    suite_add_tcase(s, parser_case());
    return s;
}
