/*
 * gguf.c — GGUF v3 parser. The file is untrusted: every read is bounds
 * checked, every count is checked against the bytes that remain before
 * anything is allocated for it, and every size computation is overflow-safe.
 * Fields are read one by one in little-endian order, never by casting bytes
 * into a struct.
 */
#include "lib/format/gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_ALIGNMENT (1u << 16)
#define GGUF_MAX_NAME_LEN 1024u /* keys and tensor names */

typedef struct cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
    char *err;
    size_t err_size;
    di_status status; /* what a failure returns: DI_ERR_FORMAT unless out of memory */
} cursor;

static int fail(cursor *c, const char *fmt, ...)
{
    if (c->err && c->err_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_size, fmt, ap);
        va_end(ap);
    }
    return 0;
}

static int need(cursor *c, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return fail(c, "truncated file: %s needs %llu bytes at offset %zu, only %zu remain", what,
                    (unsigned long long)n, c->pos, c->size - c->pos);
    return 1;
}

static uint64_t load_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int read_uint(cursor *c, unsigned n, uint64_t *out, const char *what)
{
    if (!need(c, n, what))
        return 0;
    *out = load_le(c->base + c->pos, n);
    c->pos += n;
    return 1;
}

static int read_u32(cursor *c, uint32_t *out, const char *what)
{
    uint64_t v;
    if (!read_uint(c, 4, &v, what))
        return 0;
    *out = (uint32_t)v;
    return 1;
}

static int read_str(cursor *c, di_gguf_str *out, uint64_t max_len, const char *what)
{
    uint64_t len;
    if (!read_uint(c, 8, &len, what))
        return 0;
    if (len > max_len)
        return fail(c, "%s at offset %zu has length %llu (limit %llu)", what, c->pos - 8,
                    (unsigned long long)len, (unsigned long long)max_len);
    if (!need(c, len, what))
        return 0;
    out->ptr = (const char *)(c->base + c->pos);
    out->len = len;
    c->pos += (size_t)len;
    return 1;
}

unsigned di_gguf_scalar_size(uint32_t type)
{
    switch (type) {
    case DI_GGUF_UINT8: case DI_GGUF_INT8: case DI_GGUF_BOOL: return 1;
    case DI_GGUF_UINT16: case DI_GGUF_INT16: return 2;
    case DI_GGUF_UINT32: case DI_GGUF_INT32: case DI_GGUF_FLOAT32: return 4;
    case DI_GGUF_UINT64: case DI_GGUF_INT64: case DI_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static int read_scalar(cursor *c, uint32_t type, di_gguf_kv *kv)
{
    unsigned n = di_gguf_scalar_size(type);
    uint64_t raw;
    if (!read_uint(c, n, &raw, "metadata value"))
        return 0;
    switch (type) {
    case DI_GGUF_INT8: kv->v.i64 = (int8_t)raw; break;
    case DI_GGUF_INT16: kv->v.i64 = (int16_t)raw; break;
    case DI_GGUF_INT32: kv->v.i64 = (int32_t)raw; break;
    case DI_GGUF_INT64: kv->v.i64 = (int64_t)raw; break;
    case DI_GGUF_FLOAT32: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, sizeof f);
        kv->v.f64 = f;
        break;
    }
    case DI_GGUF_FLOAT64: memcpy(&kv->v.f64, &raw, sizeof raw); break;
    case DI_GGUF_BOOL:
        if (raw > 1)
            return fail(c, "bool value %llu at offset %zu is neither 0 nor 1",
                        (unsigned long long)raw, c->pos - 1);
        kv->v.u64 = raw;
        break;
    default: kv->v.u64 = raw; break;
    }
    return 1;
}

static int read_array(cursor *c, di_gguf_kv *kv)
{
    uint32_t elem_type;
    uint64_t count;
    if (!read_u32(c, &elem_type, "array element type") || !read_uint(c, 8, &count, "array count"))
        return 0;
    kv->v.arr.type = elem_type;
    kv->v.arr.count = count;
    kv->v.arr.data = c->base + c->pos;
    if (elem_type == DI_GGUF_STRING) {
        /* every string is at least its 8-byte length */
        if (count > (c->size - c->pos) / 8)
            return fail(c, "string array of %llu elements cannot fit in the %zu bytes left",
                        (unsigned long long)count, c->size - c->pos);
        for (uint64_t i = 0; i < count; i++) {
            di_gguf_str s;
            if (!read_str(c, &s, UINT64_MAX, "string array element"))
                return 0;
        }
        return 1;
    }
    unsigned elem = di_gguf_scalar_size(elem_type);
    if (elem == 0)
        return fail(c, "array of element type %u is not supported (nested or unknown)", elem_type);
    if (count > (c->size - c->pos) / elem)
        return fail(c, "array of %llu elements of %u bytes cannot fit in the %zu bytes left",
                    (unsigned long long)count, elem, c->size - c->pos);
    if (elem_type == DI_GGUF_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (c->base[c->pos + i] > 1)
                return fail(c, "bool array element %llu is neither 0 nor 1", (unsigned long long)i);
    c->pos += (size_t)(count * elem);
    return 1;
}

static int read_kv(cursor *c, di_gguf_kv *kv)
{
    if (!read_str(c, &kv->key, GGUF_MAX_NAME_LEN, "metadata key") ||
        !read_u32(c, &kv->type, "metadata value type"))
        return 0;
    if (kv->type == DI_GGUF_STRING)
        return read_str(c, &kv->v.str, UINT64_MAX, "metadata string");
    if (kv->type == DI_GGUF_ARRAY)
        return read_array(c, kv);
    if (di_gguf_scalar_size(kv->type) == 0)
        return fail(c, "metadata key '%.*s' has unknown value type %u", (int)kv->key.len,
                    kv->key.ptr, kv->type);
    return read_scalar(c, kv->type, kv);
}

static int read_tensor_info(cursor *c, di_gguf_tensor *t)
{
    if (!read_str(c, &t->name, GGUF_MAX_NAME_LEN, "tensor name") ||
        !read_u32(c, &t->n_dims, "tensor dimension count"))
        return 0;
    if (t->n_dims < 1 || t->n_dims > DI_GGUF_MAX_DIMS)
        return fail(c, "tensor '%.*s' has %u dimensions (1..%d allowed)", (int)t->name.len,
                    t->name.ptr, t->n_dims, DI_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < DI_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (!read_uint(c, 8, &t->ne[d], "tensor dimension"))
            return 0;
        if (t->ne[d] == 0 || t->ne[d] > (UINT64_C(1) << 40))
            return fail(c, "tensor '%.*s' dimension %u is %llu", (int)t->name.len, t->name.ptr, d,
                        (unsigned long long)t->ne[d]);
    }
    return read_u32(c, &t->type, "tensor type") && read_uint(c, 8, &t->offset, "tensor offset");
}

/* Size in bytes of a tensor, overflow-checked. */
static int tensor_bytes(cursor *c, di_gguf_tensor *t)
{
    const uint32_t block_elems = di_weight_block_elems(t->type);
    const uint32_t block_bytes = di_weight_block_bytes(t->type);
    if (block_elems == 0)
        return fail(c, "tensor '%.*s' has unknown type %u", (int)t->name.len, t->name.ptr, t->type);
    if (t->ne[0] % block_elems != 0)
        return fail(c, "tensor '%.*s' of type %s has rows of %llu, not a multiple of %u",
                    (int)t->name.len, t->name.ptr, di_weight_type_name(t->type),
                    (unsigned long long)t->ne[0], block_elems);
    uint64_t bytes = (t->ne[0] / block_elems) * block_bytes; /* ne0 <= 2^40: no overflow */
    for (uint32_t d = 1; d < DI_GGUF_MAX_DIMS; d++) {
        if (bytes > UINT64_MAX / t->ne[d])
            return fail(c, "tensor '%.*s' size overflows", (int)t->name.len, t->name.ptr);
        bytes *= t->ne[d];
    }
    t->n_bytes = bytes;
    return 1;
}

static int str_eq(di_gguf_str s, const char *z)
{
    size_t n = strlen(z);
    return s.len == n && memcmp(s.ptr, z, n) == 0;
}

static int str_cmp(di_gguf_str a, di_gguf_str b)
{
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int r = memcmp(a.ptr, b.ptr, n);
    if (r != 0)
        return r;
    return (a.len > b.len) - (a.len < b.len);
}

static int cmp_kv_key(const void *a, const void *b)
{
    return str_cmp((*(const di_gguf_kv *const *)a)->key, (*(const di_gguf_kv *const *)b)->key);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return str_cmp((*(const di_gguf_tensor *const *)a)->name,
                   (*(const di_gguf_tensor *const *)b)->name);
}

/* Sorts pointers to the items and reports the first name seen twice. */
static int check_unique(cursor *c, const void *items, uint64_t n, size_t item_size,
                        int (*cmp)(const void *, const void *), const char *what)
{
    if (n < 2)
        return 1;
    const void **order = malloc((size_t)n * sizeof *order);
    if (!order) {
        c->status = DI_ERR_OUT_OF_MEMORY;
        return fail(c, "out of memory checking %s names", what);
    }
    for (uint64_t i = 0; i < n; i++)
        order[i] = (const uint8_t *)items + i * item_size;
    qsort(order, (size_t)n, sizeof *order, cmp);
    int ok = 1;
    for (uint64_t i = 1; i < n && ok; i++) {
        if (cmp(&order[i - 1], &order[i]) == 0) {
            /* both item kinds start with their name */
            const di_gguf_str *name = (const di_gguf_str *)order[i];
            ok = fail(c, "%s '%.*s' appears twice", what, (int)name->len, name->ptr);
        }
    }
    free(order);
    return ok;
}

static int read_alignment(cursor *c, const di_gguf *g, uint32_t *alignment)
{
    *alignment = GGUF_DEFAULT_ALIGNMENT;
    const di_gguf_kv *kv = di_gguf_find_kv(g, "general.alignment");
    if (!kv)
        return 1;
    if (kv->type != DI_GGUF_UINT32)
        return fail(c, "general.alignment must be uint32, has type %u", kv->type);
    uint64_t a = kv->v.u64;
    if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT)
        return fail(c, "general.alignment %llu is not a power of two up to %u",
                    (unsigned long long)a, GGUF_MAX_ALIGNMENT);
    *alignment = (uint32_t)a;
    return 1;
}

static int parse(cursor *c, di_gguf *g)
{
    if (!need(c, 4, "magic"))
        return 0;
    if (memcmp(c->base, GGUF_MAGIC, 4) != 0)
        return fail(c, "bad magic: not a GGUF file");
    c->pos = 4;
    uint64_t n_tensors, n_kv;
    if (!read_u32(c, &g->version, "version"))
        return 0;
    if (g->version != 3)
        return fail(c, "GGUF version %u is not supported (only version 3)", g->version);
    if (!read_uint(c, 8, &n_tensors, "tensor count") || !read_uint(c, 8, &n_kv, "metadata count"))
        return 0;
    /* a key/value pair takes at least 12 bytes, a tensor info at least 28 */
    if (n_kv > (c->size - c->pos) / 12)
        return fail(c, "metadata count %llu cannot fit in a file of %zu bytes",
                    (unsigned long long)n_kv, c->size);
    if (n_tensors > (c->size - c->pos) / 28)
        return fail(c, "tensor count %llu cannot fit in a file of %zu bytes",
                    (unsigned long long)n_tensors, c->size);

    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) {
        c->status = DI_ERR_OUT_OF_MEMORY;
        return fail(c, "out of memory for %llu keys and %llu tensors", (unsigned long long)n_kv,
                    (unsigned long long)n_tensors);
    }
    for (uint64_t i = 0; i < n_kv; i++, g->n_kv++)
        if (!read_kv(c, &g->kv[i]))
            return 0;
    if (!check_unique(c, g->kv, g->n_kv, sizeof *g->kv, cmp_kv_key, "metadata key") ||
        !read_alignment(c, g, &g->alignment))
        return 0;

    for (uint64_t i = 0; i < n_tensors; i++, g->n_tensors++)
        if (!read_tensor_info(c, &g->tensors[i]) || !tensor_bytes(c, &g->tensors[i]))
            return 0;
    if (!check_unique(c, g->tensors, g->n_tensors, sizeof *g->tensors, cmp_tensor_name, "tensor"))
        return 0;

    uint64_t data = ((uint64_t)c->pos + g->alignment - 1) / g->alignment * g->alignment;
    if (n_tensors > 0 && data > c->size)
        return fail(c, "tensor data section starts at %llu, past the end of the file (%zu bytes)",
                    (unsigned long long)data, c->size);
    g->data_offset = data;
    for (uint64_t i = 0; i < n_tensors; i++) {
        di_gguf_tensor *t = &g->tensors[i];
        uint64_t room = c->size - data;
        if (t->offset % g->alignment != 0)
            return fail(c, "tensor '%.*s' offset %llu is not a multiple of the alignment %u",
                        (int)t->name.len, t->name.ptr, (unsigned long long)t->offset, g->alignment);
        if (t->offset > room || t->n_bytes > room - t->offset)
            return fail(c, "tensor '%.*s' (%llu bytes at offset %llu) lies outside the file",
                        (int)t->name.len, t->name.ptr, (unsigned long long)t->n_bytes,
                        (unsigned long long)t->offset);
        t->data = c->base + data + t->offset;
    }
    return 1;
}

di_status di_gguf_parse(const uint8_t *bytes, size_t size, di_gguf *out, char *err, size_t err_size)
{
    if (err && err_size > 0)
        err[0] = '\0';
    memset(out, 0, sizeof *out);
    if (!bytes && size > 0)
        return DI_ERR_INVALID_ARGUMENT;
    cursor c = {bytes, size, 0, err, err_size, DI_ERR_FORMAT};
    if (parse(&c, out))
        return DI_OK;
    di_gguf_release(out);
    return c.status;
}

void di_gguf_release(di_gguf *g)
{
    if (!g)
        return;
    free(g->kv);
    free(g->tensors);
    memset(g, 0, sizeof *g);
}

const di_gguf_kv *di_gguf_find_kv(const di_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (str_eq(g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

const di_gguf_tensor *di_gguf_find_tensor(const di_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (str_eq(g->tensors[i].name, name))
            return &g->tensors[i];
    return NULL;
}

int di_gguf_kv_is_integer(const di_gguf_kv *kv)
{
    switch (kv->type) {
    case DI_GGUF_UINT8: case DI_GGUF_UINT16: case DI_GGUF_UINT32: case DI_GGUF_UINT64:
    case DI_GGUF_INT8: case DI_GGUF_INT16: case DI_GGUF_INT32: case DI_GGUF_INT64:
        return 1;
    default:
        return 0;
    }
}

int di_gguf_kv_is_signed(const di_gguf_kv *kv)
{
    return kv->type == DI_GGUF_INT8 || kv->type == DI_GGUF_INT16 || kv->type == DI_GGUF_INT32 ||
           kv->type == DI_GGUF_INT64;
}
