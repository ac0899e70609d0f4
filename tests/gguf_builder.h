/*
 * gguf_builder.h — test tooling that writes GGUF files, valid or not.
 *
 * Two levels:
 *   - gb_buf: a growable byte buffer with little-endian writers for every
 *     GGUF field. Nothing is checked, so any malformed byte sequence can be
 *     spelled out by hand.
 *   - gb_model: a GGUF file described as a header, a list of key/value
 *     entries (each value kept as its raw bytes) and a list of tensors (info
 *     and data). gb_model_llama() fills it with a complete, valid tiny llama
 *     F32 model; tests then remove, replace, duplicate or distort any part
 *     before serializing. Serializing computes tensor offsets unless a test
 *     pinned one, and reports where each section starts.
 *
 * The builder never validates: it exists to write invalid files. It aborts
 * on out of memory (it is test tooling, not the library).
 */
#ifndef GGUF_BUILDER_H
#define GGUF_BUILDER_H

#include <stddef.h>
#include <stdint.h>

/* Metadata value types (GGUF numbering). */
enum {
    GB_UINT8 = 0, GB_INT8 = 1, GB_UINT16 = 2, GB_INT16 = 3, GB_UINT32 = 4, GB_INT32 = 5,
    GB_FLOAT32 = 6, GB_BOOL = 7, GB_STRING = 8, GB_ARRAY = 9, GB_UINT64 = 10, GB_INT64 = 11,
    GB_FLOAT64 = 12
};

/* Tensor types (ggml numbering) the tests use. */
enum { GB_F32 = 0, GB_F16 = 1, GB_Q8_0 = 8, GB_Q2_K = 10, GB_Q4_K = 12, GB_BF16 = 30 };
/* The IQ types of ggml without a compute path here (ids of ggml.h). */
enum { GB_IQ2_XXS = 16, GB_IQ2_XS = 17, GB_IQ3_XXS = 18, GB_IQ1_S = 19, GB_IQ3_S = 21,
       GB_IQ2_S = 22, GB_IQ1_M = 29 };

#define GB_MAX_NAME 128 /* longest key or tensor name a gb_model holds */
#define GB_MAX_DIMS 8   /* more than GGUF allows, so n_dims 5 can be written */

/* ---- Byte buffer --------------------------------------------------------- */
typedef struct gb_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} gb_buf;

void gb_buf_init(gb_buf *b);
void gb_buf_free(gb_buf *b);
void gb_buf_copy(gb_buf *dst, const gb_buf *src); /* dst must be initialized */
void gb_put(gb_buf *b, const void *bytes, size_t n);
void gb_put_zeros(gb_buf *b, size_t n);
void gb_put_u8(gb_buf *b, uint8_t v);
void gb_put_u16(gb_buf *b, uint16_t v);
void gb_put_u32(gb_buf *b, uint32_t v);
void gb_put_u64(gb_buf *b, uint64_t v);
void gb_put_f32(gb_buf *b, float v);
void gb_put_f64(gb_buf *b, double v);
/* A GGUF string: u64 length, then the bytes without a NUL. */
void gb_put_str(gb_buf *b, const char *s);
/* A GGUF string whose declared length need not match the n bytes that follow. */
void gb_put_str_len(gb_buf *b, uint64_t declared_len, const char *bytes, size_t n);
/* Zero bytes up to the next multiple of alignment (0 and 1 mean none). */
void gb_pad_to(gb_buf *b, uint64_t alignment);

/* Whole records, for files built by hand. */
void gb_put_header(gb_buf *b, const char magic[4], uint32_t version, uint64_t n_tensors,
                   uint64_t n_kv);
void gb_put_kv_u32(gb_buf *b, const char *key, uint32_t v);
void gb_put_kv_f32(gb_buf *b, const char *key, float v);
void gb_put_kv_str(gb_buf *b, const char *key, const char *v);
void gb_put_tensor_info(gb_buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                        uint32_t type, uint64_t offset);

/* ---- Model description --------------------------------------------------- */
typedef struct gb_kv {
    char key[GB_MAX_NAME];
    int key_len_set;     /* when set, key_len is written as the key's length */
    uint64_t key_len;
    uint32_t type;       /* the value type field, written as is */
    gb_buf value;        /* every byte after the type field */
} gb_kv;

typedef struct gb_tensor {
    char name[GB_MAX_NAME];
    uint32_t n_dims;     /* written as is; min(n_dims, GB_MAX_DIMS) dims follow */
    uint64_t ne[GB_MAX_DIMS];
    uint32_t type;
    int offset_set;      /* when set, offset is written instead of the computed one */
    uint64_t offset;
    gb_buf data;         /* bytes placed in the data section */
} gb_tensor;

typedef struct gb_model {
    char magic[4];
    uint32_t version;
    int n_tensors_set;   /* when set, n_tensors_field replaces the real count */
    uint64_t n_tensors_field;
    int n_kv_set;        /* when set, n_kv_field replaces the real count */
    uint64_t n_kv_field;
    uint32_t alignment;  /* used to lay out the data; does not write general.alignment */
    gb_kv *kv;
    size_t n_kv;
    size_t cap_kv;
    gb_tensor *tensors;
    size_t n_tensors;
    size_t cap_tensors;
} gb_model;

/* Where each section of a serialized model starts (byte offsets). */
typedef struct gb_layout {
    size_t header;       /* always 0 */
    size_t kv;           /* after magic, version and the two counts */
    size_t tensor_info;
    size_t data;         /* the aligned start of the tensor data */
    size_t end;          /* the file size */
} gb_layout;

typedef struct gb_llama_params {
    uint32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    float eps, rope_base;
    int untied;          /* write output.weight instead of tying it to token_embd */
    uint32_t seed;       /* varies the weights */
} gb_llama_params;

/* n_vocab 16, n_embd 32, n_layer 1, n_head 2, n_head_kv 1, n_ff 64, n_ctx 64. */
gb_llama_params gb_llama_defaults(void);

void gb_model_init(gb_model *m); /* empty: magic "GGUF", version 3, alignment 32 */
void gb_model_free(gb_model *m);
/* A complete valid llama model with F32 weights (m is initialized here). */
void gb_model_llama(gb_model *m, const gb_llama_params *p);

/* Key/value entries. The *_set_* functions replace the first entry with that
 * key (type and value) or append one. */
gb_kv *gb_kv_find(gb_model *m, const char *key);
int gb_kv_remove(gb_model *m, const char *key); /* 1 if one was removed */
gb_kv *gb_kv_append(gb_model *m, const char *key, uint32_t type); /* empty value */
gb_kv *gb_kv_set_raw(gb_model *m, const char *key, uint32_t type); /* value emptied */
void gb_kv_set_u32(gb_model *m, const char *key, uint32_t v);
void gb_kv_set_u64(gb_model *m, const char *key, uint64_t v);
void gb_kv_set_i32(gb_model *m, const char *key, int32_t v);
void gb_kv_set_f32(gb_model *m, const char *key, float v);
void gb_kv_set_str(gb_model *m, const char *key, const char *v);
gb_kv *gb_kv_duplicate(gb_model *m, const char *key); /* appends a copy; NULL if absent */

/* Tensors. */
gb_tensor *gb_tensor_find(gb_model *m, const char *name);
int gb_tensor_remove(gb_model *m, const char *name);
/* Appends a tensor whose data is generated for its type and dims. */
gb_tensor *gb_tensor_add(gb_model *m, const char *name, uint32_t type, uint32_t n_dims,
                         const uint64_t *ne);
gb_tensor *gb_tensor_duplicate(gb_model *m, const char *name);
/* Change dims or type and regenerate data of the matching size (no data when
 * the size is unknown, overflows or is absurd). */
void gb_tensor_set_dims(gb_tensor *t, uint32_t n_dims, const uint64_t *ne);
void gb_tensor_set_type(gb_tensor *t, uint32_t type);
/* Data bytes of a tensor of that type and dims; 0 when unknown or too big. */
size_t gb_tensor_data_size(uint32_t type, uint32_t n_dims, const uint64_t *ne);

/* Number of weights in all tensors (products of their dims). */
uint64_t gb_model_n_params(const gb_model *m);

/* Serialize into out (initialized by the caller, emptied first). */
void gb_model_serialize(const gb_model *m, gb_buf *out, gb_layout *layout);

/* ---- Files --------------------------------------------------------------- */
/* Writes bytes to path; 0 on success, -1 on error. */
int gb_write_file(const char *path, const void *bytes, size_t len);
/* Serializes m to path; 0 on success. layout may be NULL. */
int gb_model_write(const gb_model *m, const char *path, gb_layout *layout);

/* A fresh directory under $TMPDIR (or /tmp); dir must hold 4096 bytes.
 * Returns 0 on success. */
int gb_tmpdir(char *dir, size_t dir_size);
/* dir/name into out; returns out. */
char *gb_path(char *out, size_t out_size, const char *dir, const char *name);
/* Removes the files the tests put in dir (by name), then dir. */
void gb_rmdir(const char *dir);

#endif /* GGUF_BUILDER_H */
