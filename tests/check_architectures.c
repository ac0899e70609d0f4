/*
 * check_architectures.c — each architecture of the table beside llama
 * (its own tensors and keys, what it requires, what it ignores), RoPE
 * scaling and frequencies (lib/model/rope_scaling.h), Phi-3's fused
 * tensors and LongRoPE, Gemma 2's soft-capping defaults: each loads and
 * computes, or is refused with its status.
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

#include "lib/model/arch.h"
#include "detinfer.h"
#include "format_util.h"
#include "lib/format/gguf.h"
#include "gguf_builder.h"
#include "test_util.h"

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
/* include/detinfer.h's list of the supported architectures (di_model_load's
 * comment) names exactly the architecture table's (lib/model/arch.c), each
 * once: a row added to the table and not to the contract fails here. */
START_TEST(test_header_lists_the_architectures)
{
    char table[512];
    di_arch_names(table, sizeof table); /* "llama, qwen2, ..." */
    char *text = tu_read_doc_flat("include/detinfer.h");
    const char *list = strstr(text, "Supported: architectures ");
    ck_assert_msg(list != NULL, "detinfer.h has no \"Supported: architectures\" list");
    const char *end = strchr(list, ';');
    ck_assert_ptr_nonnull(end);
    int n_listed = 0;
    for (const char *q = strchr(list, '"'); q && q < end; q = strchr(q, '"')) {
        const char *close = strchr(q + 1, '"');
        ck_assert_ptr_nonnull(close);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(close - q - 1), q + 1);
        ck_assert_msg(di_arch_find(name) != NULL, "detinfer.h lists \"%s\", which the table lacks", name);
        n_listed++;
        q = close + 1;
    }
    int n_table = 1;
    for (const char *c = table; *c; c++)
        n_table += *c == ',';
    ck_assert_msg(n_listed == n_table, "detinfer.h lists %d architectures, the table has %d (%s)", n_listed,
                  n_table, table);
    free(text);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------ */

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
    tcase_add_test(tc, test_header_lists_the_architectures);
    return tc;
}

Suite *architectures_suite(void)
{
    Suite *s = suite_create("architectures");
    suite_add_tcase(s, architectures_case());
    return s;
}
