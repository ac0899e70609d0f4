/*
 * gguf.h — the format layer: bytes of an untrusted GGUF v3 file in,
 * validated metadata and tensor views out. Knows nothing of models.
 *
 * Every view points into the caller's buffer (normally the mmapped file),
 * which must outlive the di_gguf. Strings are not NUL-terminated.
 */
#ifndef DI_GGUF_H
#define DI_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "detinfer.h"
#include "kernels/common/weight_types.h" /* tensor types: DI_TYPE_*, block layouts */

/* Metadata value types (GGUF spec numbering). */
enum {
    DI_GGUF_UINT8 = 0, DI_GGUF_INT8 = 1, DI_GGUF_UINT16 = 2, DI_GGUF_INT16 = 3,
    DI_GGUF_UINT32 = 4, DI_GGUF_INT32 = 5, DI_GGUF_FLOAT32 = 6, DI_GGUF_BOOL = 7,
    DI_GGUF_STRING = 8, DI_GGUF_ARRAY = 9, DI_GGUF_UINT64 = 10, DI_GGUF_INT64 = 11,
    DI_GGUF_FLOAT64 = 12
};

#define DI_GGUF_MAX_DIMS 4

typedef struct di_gguf_str {
    const char *ptr;
    uint64_t len;
} di_gguf_str;

typedef struct di_gguf_kv {
    di_gguf_str key;
    uint32_t type;               /* DI_GGUF_* */
    union {
        uint64_t u64;            /* UINT8..UINT64, BOOL (zero-extended) */
        int64_t i64;             /* INT8..INT64 (sign-extended) */
        double f64;              /* FLOAT32 and FLOAT64 */
        di_gguf_str str;         /* STRING */
        struct {
            uint32_t type;       /* element type; never ARRAY */
            uint64_t count;
            const uint8_t *data; /* first element's bytes */
        } arr;
    } v;
} di_gguf_kv;

typedef struct di_gguf_tensor {
    di_gguf_str name;
    uint32_t n_dims;
    uint64_t ne[DI_GGUF_MAX_DIMS]; /* innermost first; unused dims are 1 */
    uint32_t type;                 /* ggml type id: a row of weight_types.h */
    uint64_t offset;               /* from the start of the data section */
    uint64_t n_bytes;
    const uint8_t *data;
} di_gguf_tensor;

typedef struct di_gguf {
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv;
    di_gguf_kv *kv;
    uint64_t n_tensors;
    di_gguf_tensor *tensors;
    uint64_t data_offset;          /* start of tensor data in the file */
} di_gguf;

/* Parses and validates bytes[0, size). On failure returns DI_ERR_FORMAT (or
 * DI_ERR_OUT_OF_MEMORY), writes the reason into err and leaves *out empty. */
di_status di_gguf_parse(const uint8_t *bytes, size_t size, di_gguf *out, char *err, size_t err_size);
void di_gguf_release(di_gguf *g);

const di_gguf_kv *di_gguf_find_kv(const di_gguf *g, const char *key);
const di_gguf_tensor *di_gguf_find_tensor(const di_gguf *g, const char *name);

/* 1 when a metadata value is of an integer type (v.u64 / v.i64 hold it), and
 * whether that type is signed. */
int di_gguf_kv_is_integer(const di_gguf_kv *kv);
int di_gguf_kv_is_signed(const di_gguf_kv *kv);

/* Bytes of one scalar metadata value of this type; 0 for STRING, ARRAY and
 * an unknown type. */
unsigned di_gguf_scalar_size(uint32_t type);

#endif /* DI_GGUF_H */
