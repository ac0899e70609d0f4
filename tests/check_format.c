/*
 * check_format.c — the GGUF parser on untrusted bytes: every malformed file
 * (unreadable, truncated, a bad header, metadata or tensor info) gives its
 * documented status, *out NULL and a message naming what is wrong; nothing
 * crashes and nothing leaks (the suite runs under ASan/LSan); and the parser
 * called directly. The loader above it: check_model.c and
 * check_architectures.c.
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
    ck_assert_msg(tu_mentions(err, REFUSED_TYPES[_i].tensor) && tu_mentions(err, want),
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
/* ---- suite ------------------------------------------------------------------------ */

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
    suite_add_tcase(s, io_case());
    suite_add_tcase(s, truncation_case());
    suite_add_tcase(s, header_case());
    suite_add_tcase(s, metadata_case());
    suite_add_tcase(s, tensor_info_case());
    suite_add_tcase(s, parser_case());
    return s;
}
