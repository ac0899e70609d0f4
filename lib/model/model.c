/*
 * model.c — loading a model: map the file, parse it (format layer), read the
 * hyperparameters and bind every tensor to its role, checking types and
 * shapes. What differs between architectures is read from their row of the
 * architecture table (arch.h); nothing here names one.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/common/dequant_blocks.h"
#include "lib/base/errors.h"
#include "lib/model/model.h"
#include "kernels/common/numerics.h"
#include "lib/model/rope_scaling.h"
#include "lib/tokenizer/tokenizer.h"

#define MAX_EMBD (1u << 20)
#define MAX_LAYERS 4096u
#define MAX_FF (1u << 22)
#define MAX_CTX (1u << 24)

typedef struct loader {
    di_model *m;
    char *err;
    size_t err_size;
    di_rope_scaling rope;   /* what the file asks of RoPE (read_rope_scaling) */
    float rope_freq_scale;  /* of the first RoPE set; the window layers' set is unscaled */
    const float *rope_long_factors; /* LongRoPE's rope_factors_long.weight, or NULL */
} loader;

/* ---- metadata ----------------------------------------------------------- */

/* Reads "<arch>.<suffix>" as an integer in [lo, hi]; a missing optional key
 * leaves *out untouched. */
static di_status read_u32(loader *L, const char *suffix, int required, uint32_t lo, uint32_t hi,
                          uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->m->arch, suffix);
    const di_gguf_kv *kv = di_gguf_find_kv(&L->m->gguf, key);
    if (!kv)
        return required ? di_error(L->err, L->err_size, DI_ERR_MODEL, "missing metadata key %s", key)
                        : DI_OK;
    if (!di_gguf_kv_is_integer(kv))
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "metadata key %s must be an integer (type %u)",
                        key, kv->type);
    if ((di_gguf_kv_is_signed(kv) && kv->v.i64 < 0) || kv->v.u64 < lo || kv->v.u64 > hi)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "metadata key %s = %lld is outside [%u, %u]",
                        key, (long long)kv->v.i64, lo, hi);
    *out = (uint32_t)kv->v.u64;
    return DI_OK;
}

static di_status read_f32(loader *L, const char *suffix, int required, float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->m->arch, suffix);
    const di_gguf_kv *kv = di_gguf_find_kv(&L->m->gguf, key);
    if (!kv)
        return required ? di_error(L->err, L->err_size, DI_ERR_MODEL, "missing metadata key %s", key)
                        : DI_OK;
    if (kv->type != DI_GGUF_FLOAT32 && kv->type != DI_GGUF_FLOAT64)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "metadata key %s must be a float (type %u)",
                        key, kv->type);
    float v = (float)kv->v.f64;
    if (!(v > 0.0f) || isinf(v))
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "metadata key %s = %g must be positive and finite",
                        key, kv->v.f64);
    *out = v;
    return DI_OK;
}

static di_status read_architecture(loader *L)
{
    const di_gguf_kv *kv = di_gguf_find_kv(&L->m->gguf, "general.architecture");
    if (!kv)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "missing metadata key general.architecture");
    if (kv->type != DI_GGUF_STRING)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "general.architecture must be a string");
    if (kv->v.str.len >= sizeof L->m->arch || memchr(kv->v.str.ptr, '\0', (size_t)kv->v.str.len))
        return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED, "architecture name of %llu bytes is not supported",
                        (unsigned long long)kv->v.str.len);
    memcpy(L->m->arch, kv->v.str.ptr, (size_t)kv->v.str.len);
    L->m->arch[kv->v.str.len] = '\0';
    L->m->arch_info = di_arch_find(L->m->arch);
    if (L->m->arch_info)
        return DI_OK;
    char names[256];
    di_arch_names(names, sizeof names);
    return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED, "architecture '%s' is not supported (supported: %s)",
                    L->m->arch, names);
}

/* Whether a metadata value is the string text. */
static int key_is(const di_gguf_kv *kv, const char *text)
{
    const size_t n = strlen(text);
    return kv && kv->type == DI_GGUF_STRING && kv->v.str.len == n && !memcmp(kv->v.str.ptr, text, n);
}

/* YaRN's keys llama.cpp reads only for other architectures (grok, deepseek):
 * for these it uses its defaults, so a file may carry a key only with its
 * default's value; another value is refused, not silently ignored. */
static const struct {
    const char *suffix;
    double llama_cpp_value;
} UNREAD_YARN_KEYS[] = {
    {"rope.scaling.yarn_ext_factor", -1.0}, /* -1: by the scaling type */
    {"rope.scaling.yarn_attn_factor", 1.0},
    {"rope.scaling.yarn_beta_fast", 32.0},
    {"rope.scaling.yarn_beta_slow", 1.0},
    {"rope.scaling.yarn_log_multiplier", 0.0},
};

static di_status check_unread_yarn_keys(loader *L)
{
    char key[128];
    for (size_t i = 0; i < sizeof UNREAD_YARN_KEYS / sizeof UNREAD_YARN_KEYS[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", L->m->arch, UNREAD_YARN_KEYS[i].suffix);
        const di_gguf_kv *kv = di_gguf_find_kv(&L->m->gguf, key);
        if (!kv)
            continue;
        if (kv->type != DI_GGUF_FLOAT32 && kv->type != DI_GGUF_FLOAT64)
            return di_error(L->err, L->err_size, DI_ERR_MODEL, "metadata key %s must be a float (type %u)",
                            key, kv->type);
        if (kv->v.f64 != UNREAD_YARN_KEYS[i].llama_cpp_value)
            return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED,
                            "%s = %g is not supported (llama.cpp does not read it for architecture %s and "
                            "uses %g)", key, kv->v.f64, L->m->arch, UNREAD_YARN_KEYS[i].llama_cpp_value);
    }
    return DI_OK;
}

/* RoPE scaling as llama.cpp reads it: the type (absent means linear), the
 * factor (rope.scaling.factor, or the older rope.scale_linear), the
 * attention factor (every type: it multiplies cos and sin), and for YaRN its
 * original context. *freq_scale is 1 / factor, computed in float as
 * llama.cpp does (its rope_freq_scale_train); "none" never scales. */
static di_status read_rope_scaling(loader *L, di_rope_scaling *sc, float *freq_scale)
{
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", L->m->arch);
    const di_gguf_kv *type = di_gguf_find_kv(&L->m->gguf, key);
    float factor = 0.0f, attn_factor = 1.0f;
    uint32_t n_ctx_orig = 0;
    di_status st = read_f32(L, "rope.scaling.factor", 0, &factor);
    if (!st && factor == 0.0f)
        st = read_f32(L, "rope.scale_linear", 0, &factor);
    if (!st)
        st = read_f32(L, "rope.scaling.attn_factor", 0, &attn_factor);
    if (!st)
        st = read_u32(L, "rope.scaling.original_context_length", 0, 0, MAX_CTX, &n_ctx_orig);
    if (!st)
        st = check_unread_yarn_keys(L);
    if (st)
        return st;
    *sc = di_rope_scaling_none();
    sc->attn_factor = attn_factor;
    sc->n_ctx_orig = n_ctx_orig ? n_ctx_orig : L->m->n_ctx_train; /* llama.cpp's n_ctx_orig_yarn */
    *freq_scale = factor > 0.0f ? 1.0f / factor : 1.0f;
    /* "longrope" scales like linear in llama.cpp (no YaRN ramp); its factor
     * tensors are read with the tensors (bind_rope_factors) */
    if (!type || key_is(type, "linear") || key_is(type, "longrope"))
        return DI_OK;
    if (key_is(type, "none")) {
        *freq_scale = 1.0f;
        return DI_OK;
    }
    if (key_is(type, "yarn")) {
        if (*freq_scale > 1.0f)
            return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED,
                            "%s.rope.scaling.factor = %g with YaRN is not supported (only factors >= 1)",
                            L->m->arch, (double)factor);
        sc->yarn = 1;
        return DI_OK;
    }
    if (type->type != DI_GGUF_STRING)
        return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED, "%s is not a string (type %u)", key, type->type);
    return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED,
                    "%s = '%.*s' is not supported (none, linear, yarn, longrope)", key,
                    type->v.str.len > 32 ? 32 : (int)type->v.str.len, type->v.str.ptr);
}

static di_status read_hparams(loader *L)
{
    di_model *m = L->m;
    di_status st;
    if ((st = read_u32(L, "context_length", 1, 1, MAX_CTX, &m->n_ctx_train)) ||
        (st = read_u32(L, "embedding_length", 1, 1, MAX_EMBD, &m->n_embd)) ||
        (st = read_u32(L, "block_count", 1, 1, MAX_LAYERS, &m->n_layer)) ||
        (st = read_u32(L, "feed_forward_length", 1, 1, MAX_FF, &m->n_ff)) ||
        (st = read_u32(L, "attention.head_count", 1, 1, MAX_EMBD, &m->n_head)))
        return st;
    m->n_head_kv = m->n_head;
    if ((st = read_u32(L, "attention.head_count_kv", 0, 1, MAX_EMBD, &m->n_head_kv)))
        return st;
    if (m->n_head_kv > m->n_head || m->n_head % m->n_head_kv != 0)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "KV head count %u does not divide head count %u",
                        m->n_head_kv, m->n_head);
    /* head size: attention.key_length when given, else n_embd / n_head */
    m->head_dim = 0;
    if ((st = read_u32(L, "attention.key_length", 0, 2, MAX_EMBD, &m->head_dim)))
        return st;
    if (m->head_dim == 0) {
        if (m->n_embd % m->n_head != 0)
            return di_error(L->err, L->err_size, DI_ERR_MODEL,
                            "embedding length %u is not divisible by head count %u", m->n_embd, m->n_head);
        m->head_dim = m->n_embd / m->n_head;
    }
    uint32_t value_length = m->head_dim;
    if ((st = read_u32(L, "attention.value_length", 0, 1, MAX_EMBD, &value_length)))
        return st;
    if (value_length != m->head_dim)
        return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED,
                        "attention.value_length %u differs from the key length %u", value_length, m->head_dim);
    if ((uint64_t)m->n_head * m->head_dim > MAX_EMBD)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "%u heads of %u values are too many",
                        m->n_head, m->head_dim);
    m->n_rot = m->head_dim;
    if ((st = read_u32(L, "rope.dimension_count", 0, 2, m->head_dim, &m->n_rot)))
        return st;
    if (m->n_rot % 2 != 0)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "RoPE dimension count %u is odd", m->n_rot);

    m->n_rope_sets = 1;
    m->rope_base[0] = m->arch_info->rope_base;
    m->attn_scale = di_rsqrt((float)m->head_dim);
    if ((st = read_f32(L, "attention.layer_norm_rms_epsilon", 1, &m->rms_eps)) ||
        (st = read_f32(L, "rope.freq_base", 0, &m->rope_base[0])) ||
        (st = read_rope_scaling(L, &L->rope, &L->rope_freq_scale)))
        return st;
    return DI_OK;
}

/* The table's columns that act after the tensors are bound: the embedding
 * scale, Gemma's 27B attention scale, the soft caps (the file's value when
 * it has the key, positive and finite), and the sliding-window layers, which
 * may have a RoPE base of their own (then a second RoPE setting, unscaled). */
static di_status apply_arch(loader *L)
{
    di_model *m = L->m;
    const di_arch *a = m->arch_info;
    uint32_t window = a->swa_default;
    di_status st;
    if (a->swa_period && (st = read_u32(L, "attention.sliding_window", !a->swa_default, 1, MAX_CTX, &window)))
        return st;
    m->attn_softcap = a->attn_softcap;
    m->final_softcap = a->final_softcap;
    if ((a->attn_softcap != 0.0f && (st = read_f32(L, "attn_logit_softcapping", 0, &m->attn_softcap))) ||
        (a->final_softcap != 0.0f && (st = read_f32(L, "final_logit_softcapping", 0, &m->final_softcap))))
        return st;
    if (a->features & DI_FEAT_EMBD_SCALE)
        m->embd_scale = sqrtf((float)m->n_embd);
    if (a->attn_scale_embd_layers && m->n_layer == a->attn_scale_embd_layers)
        m->attn_scale = di_rsqrt((float)(m->n_embd / m->n_head));
    if (!a->swa_period)
        return DI_OK;
    const uint32_t window_set = a->swa_rope_base != 0.0f ? 1 : 0;
    if (window_set) {
        m->n_rope_sets = 2;
        m->rope_base[1] = a->swa_rope_base;
    }
    for (uint32_t il = 0; il < m->n_layer; il++) {
        const int local = il % a->swa_period < a->swa_local;
        m->layers[il].rope_set = local ? window_set : 0;
        m->layers[il].window = local ? window : 0;
    }
    return DI_OK;
}

/* ---- tensors ------------------------------------------------------------ */

static const di_gguf_tensor *find_tensor(loader *L, const char *name, di_status *st)
{
    const di_gguf_tensor *t = di_gguf_find_tensor(&L->m->gguf, name);
    if (!t)
        *st = di_error(L->err, L->err_size, DI_ERR_MODEL, "missing tensor %s", name);
    return t;
}

/* Binds a matrix of n_in x n_out (GGUF ne0 x ne1). n_out == 0 accepts any
 * row count (the vocabulary size of token_embd). */
static di_status bind_matrix(loader *L, const char *name, uint32_t n_in, uint32_t n_out, di_weight *w)
{
    di_status st = DI_OK;
    const di_gguf_tensor *t = find_tensor(L, name, &st);
    if (!t)
        return st;
    if (t->n_dims != 2 || t->ne[0] != n_in || (n_out != 0 && t->ne[1] != n_out) ||
        t->ne[1] > INT32_MAX)
        return di_error(L->err, L->err_size, DI_ERR_MODEL,
                        "tensor %s has shape [%llu, %llu, %llu, %llu], expected [%u, %u]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                        (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], n_in, n_out);
    if (!di_weight_type_supported(t->type))
        return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED,
                        "tensor %s has type %s (%u), not supported (supported:"
                        DI_SUPPORTED_WEIGHT_TYPE_NAMES ")", name, di_weight_type_name(t->type), t->type);
    w->data = t->data;
    w->type = t->type;
    w->n_in = (uint32_t)t->ne[0];
    w->n_out = (uint32_t)t->ne[1];
    w->row_bytes = (size_t)(t->n_bytes / t->ne[1]);
    L->m->n_params += t->ne[0] * t->ne[1];
    return DI_OK;
}

/* Converts a vector tensor of n floats (a norm or a bias) into memory the
 * model owns; exact for F32, F16 and BF16. The tensor is found and checked
 * before anything is allocated, so a file cannot ask for more than it holds. */
static di_status bind_vector(loader *L, const char *name, uint32_t n, const float **out)
{
    di_model *m = L->m;
    di_status st = DI_OK;
    const di_gguf_tensor *t = find_tensor(L, name, &st);
    if (!t)
        return st;
    if (t->n_dims != 1 || t->ne[0] != n)
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "tensor %s has shape [%llu, ...] in %u dims, expected [%u]",
                        name, (unsigned long long)t->ne[0], t->n_dims, n);
    if (t->type != DI_TYPE_F32 && t->type != DI_TYPE_F16 && t->type != DI_TYPE_BF16)
        return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED,
                        "vector tensor %s has type %s, expected F32, F16 or BF16", name,
                        di_weight_type_name(t->type));
    float **grown = realloc(m->vectors, (m->n_vectors + 1) * sizeof *grown);
    float *dst = malloc((size_t)n * sizeof *dst);
    if (grown)
        m->vectors = grown;
    if (!grown || !dst) {
        free(dst);
        return di_error(L->err, L->err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for tensor %s", name);
    }
    m->vectors[m->n_vectors++] = dst;
    for (uint32_t i = 0; i < n; i++) /* exact: F32, F16 and BF16 all fit in a float */
        dst[i] = di_qb_plain(t->type, t->data, i);
    *out = dst;
    m->n_params += n;
    return DI_OK;
}

_Static_assert(DI_T_COUNT <= 32, "bind_layer keeps a bit per role in a uint32_t");

/* Binds the roles that the layer's fused tensors hold (arch.h's
 * DI_FUSED_TENSORS) as views of their rows, and sets their bits in *bound. */
static di_status bind_fused(loader *L, uint32_t il, uint32_t *bound)
{
    di_model *m = L->m;
    const di_tensor_spec *specs = di_tensor_specs();
    char name[96];
    for (int f = 0; f < DI_N_FUSED; f++) {
        const di_fused_spec *fs = &di_fused_specs()[f];
        if (!(m->arch_info->features & fs->feature))
            continue;
        snprintf(name, sizeof name, "blk.%u.%s", il, fs->name);
        if (!fs->required && !di_gguf_find_tensor(&m->gguf, name))
            continue;
        uint32_t n_out = 0;
        for (uint32_t p = 0; p < fs->n_roles; p++)
            n_out += di_model_dim(m, specs[fs->first + p].n_out);
        di_weight whole;
        const di_status st = bind_matrix(L, name, di_model_dim(m, specs[fs->first].n_in), n_out, &whole);
        if (st)
            return st;
        uint32_t row = 0;
        for (uint32_t p = 0; p < fs->n_roles; p++) {
            const di_tensor_role role = (di_tensor_role)(fs->first + p);
            di_weight *w = (di_weight *)(void *)((char *)&m->layers[il] + di_layer_offset(role));
            *w = whole;
            w->data = whole.data + (size_t)row * whole.row_bytes;
            w->n_out = di_model_dim(m, specs[role].n_out);
            row += w->n_out;
            *bound |= 1u << role;
        }
    }
    return DI_OK;
}

/* Binds the layer's tensors of every role its architecture has (arch.h). */
static di_status bind_layer(loader *L, uint32_t il)
{
    di_model *m = L->m;
    const di_tensor_spec *specs = di_tensor_specs();
    char *ly = (char *)&m->layers[il];
    char name[96];
    uint32_t fused = 0; /* a bit per role bound from a fused tensor */
    di_status fst = bind_fused(L, il, &fused);
    if (fst)
        return fst;
    for (int role = 0; role < DI_T_COUNT; role++) {
        const di_tensor_spec *t = &specs[role];
        if ((t->feature && !(m->arch_info->features & t->feature)) || (fused & (1u << role)))
            continue;
        snprintf(name, sizeof name, "blk.%u.%s", il, t->name);
        void *field = ly + di_layer_offset((di_tensor_role)role);
        const uint32_t n_in = di_model_dim(m, t->n_in), n_out = di_model_dim(m, t->n_out);
        const di_status st = t->kind == DI_MATRIX ? bind_matrix(L, name, n_in, n_out, field)
                                                  : bind_vector(L, name, n_in, field);
        if (st)
            return st;
    }
    return DI_OK;
}

/* A tensor of per-frequency RoPE divisors: n_rot / 2 positive, finite F32
 * values, or NULL in *out when the file has none. */
static di_status bind_factor_tensor(loader *L, const char *name, const float **out)
{
    di_model *m = L->m;
    *out = NULL;
    const di_gguf_tensor *t = di_gguf_find_tensor(&m->gguf, name);
    if (!t)
        return DI_OK;
    if (t->type != DI_TYPE_F32)
        return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED, "tensor %s has type %s, expected F32", name,
                        di_weight_type_name(t->type));
    const float *factors = NULL;
    di_status st = bind_vector(L, name, m->n_rot / 2, &factors);
    if (st)
        return st;
    for (uint32_t i = 0; i < m->n_rot / 2; i++)
        if (!(factors[i] > 0.0f) || isinf(factors[i]))
            return di_error(L->err, L->err_size, DI_ERR_MODEL,
                            "tensor %s: factor %u is %g, expected positive and finite", name, i,
                            (double)factors[i]);
    *out = factors;
    return DI_OK;
}

/* The per-frequency divisors llama.cpp reads (one tensor for every layer):
 * rope_freqs.weight (Llama 3.1/3.2) for the architectures with
 * DI_FEAT_ROPE_FREQS; LongRoPE's rope_factors_short.weight and
 * rope_factors_long.weight (Phi-3 128k), both or neither, for those with
 * DI_FEAT_LONGROPE. The short factors go to the sets every session uses up to
 * the original context, the long ones to L->rope_long (build_rope_sets). */
static di_status bind_rope_factors(loader *L)
{
    static const struct {
        const char *name;
        uint32_t feature;
        const char *what;
    } tensors[] = {
        {"rope_freqs.weight", DI_FEAT_ROPE_FREQS, "per-frequency RoPE factors"},
        {"rope_factors_short.weight", DI_FEAT_LONGROPE, "LongRoPE factors"},
        {"rope_factors_long.weight", DI_FEAT_LONGROPE, "LongRoPE factors"},
    };
    di_model *m = L->m;
    const float *factors[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < 3; i++) {
        if (!di_gguf_find_tensor(&m->gguf, tensors[i].name))
            continue;
        if (!(m->arch_info->features & tensors[i].feature))
            return di_error(L->err, L->err_size, DI_ERR_UNSUPPORTED,
                            "tensor %s (%s) is not supported for architecture %s (llama.cpp reads it for %s)",
                            tensors[i].name, tensors[i].what, m->arch,
                            tensors[i].feature == DI_FEAT_LONGROPE ? "phi3" : "llama");
        const di_status st = bind_factor_tensor(L, tensors[i].name, &factors[i]);
        if (st)
            return st;
    }
    if ((factors[1] == NULL) != (factors[2] == NULL))
        return di_error(L->err, L->err_size, DI_ERR_MODEL, "tensor %s without %s (LongRoPE needs both)",
                        factors[1] ? tensors[1].name : tensors[2].name,
                        factors[1] ? tensors[2].name : tensors[1].name);
    L->rope.freq_factors = factors[0] ? factors[0] : factors[1];
    L->rope_long_factors = factors[2];
    return DI_OK;
}

/* Every RoPE set's frequencies and amplitude (rope_scaling.h): the first with
 * the file's scaling, the window layers' with their own base and no scaling
 * factor (llama.cpp's rope_freq_scale_train_swa = 1), both with the
 * per-frequency factors, YaRN's ramp and the attention factor. With LongRoPE,
 * each set twice: with the short factors (rope) and the long ones (rope_long,
 * for sessions whose context per sequence exceeds the original context). */
static di_status build_rope_sets(loader *L)
{
    di_model *m = L->m;
    di_rope_scaling long_scaling = L->rope;
    long_scaling.freq_factors = L->rope_long_factors;
    for (uint32_t set = 0; set < m->n_rope_sets; set++) {
        const double freq_scale = set == 0 ? (double)L->rope_freq_scale : 1.0;
        di_status st = di_rope_set_build(&m->rope[set], m->n_rot, m->rope_base[set], freq_scale, &L->rope,
                                         L->err, L->err_size);
        if (!st && L->rope_long_factors)
            st = di_rope_set_build(&m->rope_long[set], m->n_rot, m->rope_base[set], freq_scale, &long_scaling,
                                   L->err, L->err_size);
        if (st)
            return st;
    }
    if (L->rope_long_factors)
        m->rope_long_above = L->rope.n_ctx_orig;
    return DI_OK;
}

static di_status bind_tensors(loader *L)
{
    di_model *m = L->m;
    di_status st;
    m->layers = calloc(m->n_layer, sizeof *m->layers);
    if (!m->layers)
        return di_error(L->err, L->err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for %u layers", m->n_layer);
    if ((st = bind_matrix(L, "token_embd.weight", m->n_embd, 0, &m->tok_embd)))
        return st;
    m->n_vocab = m->tok_embd.n_out;
    if ((st = bind_vector(L, "output_norm.weight", m->n_embd, &m->output_norm)))
        return st;
    if (di_gguf_find_tensor(&m->gguf, "output.weight")) {
        if ((st = bind_matrix(L, "output.weight", m->n_embd, m->n_vocab, &m->output)))
            return st;
    } else {
        m->output = m->tok_embd; /* tied */
    }
    for (uint32_t il = 0; il < m->n_layer; il++)
        if ((st = bind_layer(L, il)))
            return st;
    if ((st = bind_rope_factors(L)) || (st = apply_arch(L)))
        return st;
    return build_rope_sets(L);
}

/* ---- file --------------------------------------------------------------- */

static di_status map_file(loader *L, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return di_error(L->err, L->err_size, DI_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return di_error(L->err, L->err_size, DI_ERR_IO, "%s is not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return di_error(L->err, L->err_size, DI_ERR_FORMAT, "%s is empty: not a GGUF file", path);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED)
        return di_error(L->err, L->err_size, DI_ERR_IO, "cannot map %s: %s", path, strerror(map_errno));
    L->m->map = map;
    L->m->map_size = (size_t)sb.st_size;
    return DI_OK;
}

di_status di_model_open(const char *path, di_model **out, char *errbuf, size_t errbuf_size)
{
    if (errbuf && errbuf_size > 0)
        errbuf[0] = '\0';
    if (!out)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "di_model_load: out is NULL");
    *out = NULL;
    if (!path)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "di_model_load: path is NULL");
    di_model *m = calloc(1, sizeof *m);
    if (!m)
        return di_error(errbuf, errbuf_size, DI_ERR_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&m->pack_lock, NULL);
    loader L = {m, errbuf, errbuf_size, di_rope_scaling_none(), 1.0f, NULL};
    di_status st = map_file(&L, path);
    if (!st)
        st = di_gguf_parse(m->map, m->map_size, &m->gguf, errbuf, errbuf_size);
    if (!st)
        st = read_architecture(&L);
    if (!st)
        st = read_hparams(&L);
    if (!st)
        st = bind_tensors(&L);
    if (!st)
        st = di_tokenizer_load(&m->gguf, m->n_vocab, &m->tokenizer, errbuf, errbuf_size);
    if (st) {
        di_model_release(m);
        return st;
    }
    *out = m;
    return DI_OK;
}

void di_model_release(di_model *m)
{
    if (!m)
        return;
    di_tokenizer_free(m->tokenizer);
    di_gguf_release(&m->gguf);
    if (m->map)
        munmap(m->map, m->map_size);
    free(m->layers);
    for (uint32_t set = 0; set < DI_MAX_ROPE_SETS; set++) {
        di_rope_set_release(&m->rope[set]);
        di_rope_set_release(&m->rope_long[set]);
    }
    for (size_t i = 0; i < m->n_vectors; i++)
        free(m->vectors[i]);
    free(m->vectors);
    free(m->pack_mem);
    pthread_mutex_destroy(&m->pack_lock);
    free(m);
}
