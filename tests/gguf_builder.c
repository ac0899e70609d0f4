/*
 * gguf_builder.c — see gguf_builder.h. Test tooling: writes whatever it is
 * told to, valid or not, and aborts on out of memory.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#endif
#include "gguf_builder.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tensors larger than this get no data: tests that make dims absurd want the
 * parser to refuse them, not the builder to allocate terabytes. */
#define GB_MAX_TENSOR_BYTES ((size_t)1 << 26)

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("gguf_builder: out of memory\n", stderr);
        abort();
    }
    return q;
}

/* ---- Byte buffer --------------------------------------------------------- */

void gb_buf_init(gb_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void gb_buf_free(gb_buf *b)
{
    free(b->data);
    gb_buf_init(b);
}

void gb_buf_copy(gb_buf *dst, const gb_buf *src)
{
    dst->len = 0;
    gb_put(dst, src->data, src->len);
}

static void reserve(gb_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void gb_put(gb_buf *b, const void *bytes, size_t n)
{
    if (n == 0)
        return;
    reserve(b, n);
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
}

void gb_put_zeros(gb_buf *b, size_t n)
{
    if (n == 0)
        return;
    reserve(b, n);
    memset(b->data + b->len, 0, n);
    b->len += n;
}

/* Little-endian whatever the host order. */
static void put_le(gb_buf *b, uint64_t v, unsigned n)
{
    uint8_t bytes[8];
    for (unsigned i = 0; i < n; i++)
        bytes[i] = (uint8_t)(v >> (8 * i));
    gb_put(b, bytes, n);
}

void gb_put_u8(gb_buf *b, uint8_t v) { put_le(b, v, 1); }
void gb_put_u16(gb_buf *b, uint16_t v) { put_le(b, v, 2); }
void gb_put_u32(gb_buf *b, uint32_t v) { put_le(b, v, 4); }
void gb_put_u64(gb_buf *b, uint64_t v) { put_le(b, v, 8); }

void gb_put_f32(gb_buf *b, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_le(b, bits, 4);
}

void gb_put_f64(gb_buf *b, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_le(b, bits, 8);
}

void gb_put_str(gb_buf *b, const char *s)
{
    size_t n = strlen(s);
    gb_put_str_len(b, n, s, n);
}

void gb_put_str_len(gb_buf *b, uint64_t declared_len, const char *bytes, size_t n)
{
    gb_put_u64(b, declared_len);
    gb_put(b, bytes, n);
}

void gb_pad_to(gb_buf *b, uint64_t alignment)
{
    if (alignment > 1 && b->len % alignment != 0)
        gb_put_zeros(b, (size_t)(alignment - b->len % alignment));
}

void gb_put_header(gb_buf *b, const char magic[4], uint32_t version, uint64_t n_tensors,
                   uint64_t n_kv)
{
    gb_put(b, magic, 4);
    gb_put_u32(b, version);
    gb_put_u64(b, n_tensors);
    gb_put_u64(b, n_kv);
}

void gb_put_kv_u32(gb_buf *b, const char *key, uint32_t v)
{
    gb_put_str(b, key);
    gb_put_u32(b, GB_UINT32);
    gb_put_u32(b, v);
}

void gb_put_kv_f32(gb_buf *b, const char *key, float v)
{
    gb_put_str(b, key);
    gb_put_u32(b, GB_FLOAT32);
    gb_put_f32(b, v);
}

void gb_put_kv_str(gb_buf *b, const char *key, const char *v)
{
    gb_put_str(b, key);
    gb_put_u32(b, GB_STRING);
    gb_put_str(b, v);
}

void gb_put_tensor_info(gb_buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, uint64_t offset)
{
    gb_put_str(b, name);
    gb_put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims && d < GB_MAX_DIMS; d++)
        gb_put_u64(b, ne[d]);
    gb_put_u32(b, type);
    gb_put_u64(b, offset);
}

/* ---- Model: key/value entries --------------------------------------------- */

void gb_model_init(gb_model *m)
{
    memset(m, 0, sizeof *m);
    memcpy(m->magic, "GGUF", 4);
    m->version = 3;
    m->alignment = 32;
}

void gb_model_free(gb_model *m)
{
    for (size_t i = 0; i < m->n_kv; i++)
        gb_buf_free(&m->kv[i].value);
    for (size_t i = 0; i < m->n_tensors; i++)
        gb_buf_free(&m->tensors[i].data);
    free(m->kv);
    free(m->tensors);
    gb_model_init(m);
}

static void copy_name(char dst[GB_MAX_NAME], const char *src)
{
    snprintf(dst, GB_MAX_NAME, "%s", src);
}

gb_kv *gb_kv_find(gb_model *m, const char *key)
{
    for (size_t i = 0; i < m->n_kv; i++)
        if (strcmp(m->kv[i].key, key) == 0)
            return &m->kv[i];
    return NULL;
}

int gb_kv_remove(gb_model *m, const char *key)
{
    gb_kv *kv = gb_kv_find(m, key);
    if (!kv)
        return 0;
    size_t i = (size_t)(kv - m->kv);
    gb_buf_free(&kv->value);
    memmove(&m->kv[i], &m->kv[i + 1], (m->n_kv - i - 1) * sizeof *m->kv);
    m->n_kv--;
    return 1;
}

gb_kv *gb_kv_append(gb_model *m, const char *key, uint32_t type)
{
    if (m->n_kv == m->cap_kv) {
        m->cap_kv = m->cap_kv ? 2 * m->cap_kv : 16;
        m->kv = xrealloc(m->kv, m->cap_kv * sizeof *m->kv);
    }
    gb_kv *kv = &m->kv[m->n_kv++];
    memset(kv, 0, sizeof *kv);
    copy_name(kv->key, key);
    kv->type = type;
    gb_buf_init(&kv->value);
    return kv;
}

gb_kv *gb_kv_set_raw(gb_model *m, const char *key, uint32_t type)
{
    gb_kv *kv = gb_kv_find(m, key);
    if (!kv)
        return gb_kv_append(m, key, type);
    kv->type = type;
    kv->value.len = 0;
    return kv;
}

void gb_kv_set_u32(gb_model *m, const char *key, uint32_t v)
{
    gb_put_u32(&gb_kv_set_raw(m, key, GB_UINT32)->value, v);
}

void gb_kv_set_u64(gb_model *m, const char *key, uint64_t v)
{
    gb_put_u64(&gb_kv_set_raw(m, key, GB_UINT64)->value, v);
}

void gb_kv_set_i32(gb_model *m, const char *key, int32_t v)
{
    gb_put_u32(&gb_kv_set_raw(m, key, GB_INT32)->value, (uint32_t)v);
}

void gb_kv_set_f32(gb_model *m, const char *key, float v)
{
    gb_put_f32(&gb_kv_set_raw(m, key, GB_FLOAT32)->value, v);
}

void gb_kv_set_str(gb_model *m, const char *key, const char *v)
{
    gb_put_str(&gb_kv_set_raw(m, key, GB_STRING)->value, v);
}

gb_kv *gb_kv_duplicate(gb_model *m, const char *key)
{
    gb_kv *src = gb_kv_find(m, key);
    if (!src)
        return NULL;
    size_t i = (size_t)(src - m->kv); /* append may move the array */
    gb_kv *dst = gb_kv_append(m, key, src->type);
    gb_buf_copy(&dst->value, &m->kv[i].value);
    return dst;
}

/* ---- Model: tensors ------------------------------------------------------- */

gb_tensor *gb_tensor_find(gb_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

int gb_tensor_remove(gb_model *m, const char *name)
{
    gb_tensor *t = gb_tensor_find(m, name);
    if (!t)
        return 0;
    size_t i = (size_t)(t - m->tensors);
    gb_buf_free(&t->data);
    memmove(&m->tensors[i], &m->tensors[i + 1], (m->n_tensors - i - 1) * sizeof *m->tensors);
    m->n_tensors--;
    return 1;
}

static gb_tensor *tensor_append(gb_model *m)
{
    if (m->n_tensors == m->cap_tensors) {
        m->cap_tensors = m->cap_tensors ? 2 * m->cap_tensors : 16;
        m->tensors = xrealloc(m->tensors, m->cap_tensors * sizeof *m->tensors);
    }
    gb_tensor *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    gb_buf_init(&t->data);
    return t;
}

/* Elements and bytes per block; 0 for a type the builder does not know. */
static int type_layout(uint32_t type, uint64_t *elems, uint64_t *bytes)
{
    switch (type) {
    case GB_F32: *elems = 1; *bytes = 4; return 1;
    case GB_F16: case GB_BF16: *elems = 1; *bytes = 2; return 1;
    case GB_Q8_0: *elems = 32; *bytes = 34; return 1;
    case GB_Q2_K: *elems = 256; *bytes = 84; return 1;
    case GB_Q4_K: *elems = 256; *bytes = 144; return 1;
    /* ggml-common.h's block_iq* sizes, 256 weights each */
    case GB_IQ2_XXS: *elems = 256; *bytes = 66; return 1;
    case GB_IQ2_XS: *elems = 256; *bytes = 74; return 1;
    case GB_IQ3_XXS: *elems = 256; *bytes = 98; return 1;
    case GB_IQ1_S: *elems = 256; *bytes = 50; return 1;
    case GB_IQ3_S: *elems = 256; *bytes = 110; return 1;
    case GB_IQ2_S: *elems = 256; *bytes = 82; return 1;
    case GB_IQ1_M: *elems = 256; *bytes = 56; return 1;
    default: return 0;
    }
}

size_t gb_tensor_data_size(uint32_t type, uint32_t n_dims, const uint64_t *ne)
{
    uint64_t elems, bytes;
    if (!type_layout(type, &elems, &bytes) || n_dims == 0 || n_dims > GB_MAX_DIMS ||
        ne[0] % elems != 0 || ne[0] / elems > GB_MAX_TENSOR_BYTES / bytes)
        return 0;
    uint64_t size = ne[0] / elems * bytes;
    for (uint32_t d = 1; d < n_dims; d++) {
        if (ne[d] != 0 && size > GB_MAX_TENSOR_BYTES / ne[d])
            return 0;
        size *= ne[d];
    }
    return size > GB_MAX_TENSOR_BYTES ? 0 : (size_t)size;
}

/* FNV-1a, to give every tensor name its own stream of values. */
static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    return h;
}

/* splitmix64: small, deterministic, good enough for test weights. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A value in [-1, 1) with 24 bits, so it is exact in float. */
static float uniform(uint64_t *state)
{
    int64_t r = (int64_t)(next_random(state) >> 40) - (INT64_C(1) << 23);
    return (float)r / (float)(1 << 23);
}

/* Norm weights near 1; embeddings of magnitude ~1; matrices scaled by the row
 * length so activations stay O(1) through the layers. */
static float weight_value(const char *name, uint32_t n_dims, uint64_t ne0, uint64_t *state)
{
    float u = uniform(state);
    if (n_dims == 1)
        return 1.0f + 0.125f * u;
    if (strcmp(name, "token_embd.weight") == 0)
        return u;
    return u * (ne0 >= 64 ? 0.25f : 0.5f);
}

static void fill_data(gb_tensor *t, uint32_t seed)
{
    size_t size = gb_tensor_data_size(t->type, t->n_dims, t->ne);
    t->data.len = 0;
    if (t->type != GB_F32) {
        gb_put_zeros(&t->data, size); /* zero is a valid value in every known type */
        return;
    }
    uint64_t state = hash_name(t->name) ^ seed;
    for (size_t i = 0; i < size / 4; i++)
        gb_put_f32(&t->data, weight_value(t->name, t->n_dims, t->ne[0], &state));
}

static gb_tensor *tensor_new(gb_model *m, const char *name, uint32_t type, uint32_t n_dims,
                             const uint64_t *ne, uint32_t seed)
{
    gb_tensor *t = tensor_append(m);
    copy_name(t->name, name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GB_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    fill_data(t, seed);
    return t;
}

gb_tensor *gb_tensor_add(gb_model *m, const char *name, uint32_t type, uint32_t n_dims,
                         const uint64_t *ne)
{
    return tensor_new(m, name, type, n_dims, ne, 0);
}

gb_tensor *gb_tensor_duplicate(gb_model *m, const char *name)
{
    gb_tensor *src = gb_tensor_find(m, name);
    if (!src)
        return NULL;
    size_t i = (size_t)(src - m->tensors); /* append may move the array */
    gb_tensor *dst = tensor_append(m);
    gb_buf data = dst->data;
    *dst = m->tensors[i];
    dst->data = data;
    gb_buf_copy(&dst->data, &m->tensors[i].data);
    return dst;
}

void gb_tensor_set_dims(gb_tensor *t, uint32_t n_dims, const uint64_t *ne)
{
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GB_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    fill_data(t, 0);
}

void gb_tensor_set_type(gb_tensor *t, uint32_t type)
{
    t->type = type;
    fill_data(t, 0);
}

uint64_t gb_model_n_params(const gb_model *m)
{
    uint64_t total = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        uint64_t n = 1;
        for (uint32_t d = 0; d < m->tensors[i].n_dims && d < GB_MAX_DIMS; d++)
            n *= m->tensors[i].ne[d];
        total += n;
    }
    return total;
}

/* ---- The tiny llama model ------------------------------------------------- */

gb_llama_params gb_llama_defaults(void)
{
    gb_llama_params p = {
        .n_vocab = 16, .n_embd = 32, .n_layer = 1, .n_head = 2, .n_head_kv = 1, .n_ff = 64,
        .n_ctx = 64, .eps = 1e-5f, .rope_base = 10000.0f, .untied = 0, .seed = 0,
    };
    return p;
}

static void add_llama_keys(gb_model *m, const gb_llama_params *p)
{
    gb_kv_set_str(m, "general.architecture", "llama");
    gb_kv_set_str(m, "general.name", "detinfer-builder-tiny");
    gb_kv_set_u32(m, "llama.context_length", p->n_ctx);
    gb_kv_set_u32(m, "llama.embedding_length", p->n_embd);
    gb_kv_set_u32(m, "llama.block_count", p->n_layer);
    gb_kv_set_u32(m, "llama.feed_forward_length", p->n_ff);
    gb_kv_set_u32(m, "llama.attention.head_count", p->n_head);
    gb_kv_set_u32(m, "llama.attention.head_count_kv", p->n_head_kv);
    gb_kv_set_f32(m, "llama.attention.layer_norm_rms_epsilon", p->eps);
    gb_kv_set_f32(m, "llama.rope.freq_base", p->rope_base);
    gb_kv_set_u32(m, "llama.rope.dimension_count", p->n_embd / (p->n_head ? p->n_head : 1));
}

static void add_matrix(gb_model *m, const char *name, uint64_t ne0, uint64_t ne1, uint32_t seed)
{
    const uint64_t ne[2] = {ne0, ne1};
    tensor_new(m, name, GB_F32, 2, ne, seed);
}

static void add_vector(gb_model *m, const char *name, uint64_t ne0, uint32_t seed)
{
    tensor_new(m, name, GB_F32, 1, &ne0, seed);
}

static void add_layer(gb_model *m, const gb_llama_params *p, uint32_t i)
{
    const uint64_t hd = p->n_embd / (p->n_head ? p->n_head : 1);
    const uint64_t q = p->n_head * hd, kv = p->n_head_kv * hd;
    char name[GB_MAX_NAME];
#define LAYER_NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, i), name)
    add_vector(m, LAYER_NAME("attn_norm.weight"), p->n_embd, p->seed);
    add_matrix(m, LAYER_NAME("attn_q.weight"), p->n_embd, q, p->seed);
    add_matrix(m, LAYER_NAME("attn_k.weight"), p->n_embd, kv, p->seed);
    add_matrix(m, LAYER_NAME("attn_v.weight"), p->n_embd, kv, p->seed);
    add_matrix(m, LAYER_NAME("attn_output.weight"), q, p->n_embd, p->seed);
    add_vector(m, LAYER_NAME("ffn_norm.weight"), p->n_embd, p->seed);
    add_matrix(m, LAYER_NAME("ffn_gate.weight"), p->n_embd, p->n_ff, p->seed);
    add_matrix(m, LAYER_NAME("ffn_up.weight"), p->n_embd, p->n_ff, p->seed);
    add_matrix(m, LAYER_NAME("ffn_down.weight"), p->n_ff, p->n_embd, p->seed);
#undef LAYER_NAME
}

void gb_model_llama(gb_model *m, const gb_llama_params *p)
{
    gb_model_init(m);
    add_llama_keys(m, p);
    add_matrix(m, "token_embd.weight", p->n_embd, p->n_vocab, p->seed);
    for (uint32_t i = 0; i < p->n_layer; i++)
        add_layer(m, p, i);
    add_vector(m, "output_norm.weight", p->n_embd, p->seed);
    if (p->untied)
        add_matrix(m, "output.weight", p->n_embd, p->n_vocab, p->seed);
}

/* ---- Serialization -------------------------------------------------------- */

static void put_kv(gb_buf *b, const gb_kv *kv)
{
    size_t n = strlen(kv->key);
    gb_put_str_len(b, kv->key_len_set ? kv->key_len : n, kv->key, n);
    gb_put_u32(b, kv->type);
    gb_put(b, kv->value.data, kv->value.len);
}

static uint64_t align_up(uint64_t x, uint32_t alignment)
{
    return alignment > 1 ? (x + alignment - 1) / alignment * alignment : x;
}

/* Data offsets as a reader computes them: each tensor at the next aligned
 * position after the previous one's data. */
static void compute_offsets(const gb_model *m, uint64_t *offsets)
{
    uint64_t pos = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        pos = align_up(pos, m->alignment);
        offsets[i] = pos;
        pos += m->tensors[i].data.len;
    }
}

void gb_model_serialize(const gb_model *m, gb_buf *out, gb_layout *layout)
{
    gb_layout lay = {0};
    uint64_t *offsets = xrealloc(NULL, (m->n_tensors + 1) * sizeof *offsets);
    compute_offsets(m, offsets);
    out->len = 0;

    gb_put_header(out, m->magic, m->version, m->n_tensors_set ? m->n_tensors_field : m->n_tensors,
                  m->n_kv_set ? m->n_kv_field : m->n_kv);
    lay.kv = out->len;
    for (size_t i = 0; i < m->n_kv; i++)
        put_kv(out, &m->kv[i]);
    lay.tensor_info = out->len;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const gb_tensor *t = &m->tensors[i];
        gb_put_tensor_info(out, t->name, t->n_dims, t->ne, t->type,
                           t->offset_set ? t->offset : offsets[i]);
    }
    gb_pad_to(out, m->alignment);
    lay.data = out->len;
    for (size_t i = 0; i < m->n_tensors; i++) {
        gb_put_zeros(out, (size_t)(lay.data + offsets[i] - out->len));
        gb_put(out, m->tensors[i].data.data, m->tensors[i].data.len);
    }
    lay.end = out->len;
    free(offsets);
    if (layout)
        *layout = lay;
}

/* ---- Files ---------------------------------------------------------------- */

int gb_write_file(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t written = len ? fwrite(bytes, 1, len, f) : 0;
    int closed = fclose(f);
    return written == len && closed == 0 ? 0 : -1;
}

int gb_model_write(const gb_model *m, const char *path, gb_layout *layout)
{
    gb_buf b;
    gb_buf_init(&b);
    gb_model_serialize(m, &b, layout);
    int rc = gb_write_file(path, b.data, b.len);
    gb_buf_free(&b);
    return rc;
}

int gb_tmpdir(char *dir, size_t dir_size)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    if ((size_t)snprintf(dir, dir_size, "%s/detinfer-test-XXXXXX", base) >= dir_size)
        return -1;
    return mkdtemp(dir) ? 0 : -1;
}

char *gb_path(char *out, size_t out_size, const char *dir, const char *name)
{
    snprintf(out, out_size, "%s/%s", dir, name);
    return out;
}

void gb_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[4096];
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlink(gb_path(path, sizeof path, dir, e->d_name));
        closedir(d);
    }
    rmdir(dir);
}
