/*
 * fuzz_gguf.c — libFuzzer harness for the GGUF parser (lib/format/gguf.c).
 *
 * Each input is parsed; when the parser accepts it, every view it returned
 * is walked byte by byte (keys, strings, array elements, tensor names and
 * tensor data), so AddressSanitizer reports any view that reaches outside
 * the input, and the parser's promises about what it returns are checked:
 * a broken promise traps, which libFuzzer reports as a crash.
 *
 * Build and run: see tests/fuzz/README.md.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lib/format/gguf.h"

/* Every byte read is folded in here so the reads cannot be optimized away. */
static volatile uint8_t sink;

#define CHECK(cond) \
    do {            \
        if (!(cond)) \
            __builtin_trap(); \
    } while (0)

static void touch(const void *p, uint64_t n)
{
    const volatile uint8_t *b = p;
    uint8_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc ^= b[i];
    sink ^= acc;
}

/* The view lies entirely inside the input. */
static void check_inside(const uint8_t *data, size_t size, const void *p, uint64_t n)
{
    const uint8_t *q = p;
    CHECK(q >= data && q <= data + size);
    CHECK(n <= (uint64_t)(data + size - q));
}

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A string array is count strings, each a u64 length and its bytes. */
static void walk_string_array(const uint8_t *data, size_t size, const uint8_t *p, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        check_inside(data, size, p, 8);
        uint64_t len = load_u64(p);
        check_inside(data, size, p + 8, len);
        touch(p + 8, len);
        p += 8 + len;
    }
}

static void walk_kv(const di_gguf *g, const di_gguf_kv *kv, const uint8_t *data, size_t size)
{
    check_inside(data, size, kv->key.ptr, kv->key.len);
    touch(kv->key.ptr, kv->key.len);
    if (kv->type == DI_GGUF_STRING) {
        check_inside(data, size, kv->v.str.ptr, kv->v.str.len);
        touch(kv->v.str.ptr, kv->v.str.len);
    } else if (kv->type == DI_GGUF_ARRAY) {
        CHECK(kv->v.arr.type != DI_GGUF_ARRAY);
        if (kv->v.arr.type == DI_GGUF_STRING) {
            walk_string_array(data, size, kv->v.arr.data, kv->v.arr.count);
        } else {
            unsigned elem = di_gguf_scalar_size(kv->v.arr.type);
            CHECK(elem != 0);
            CHECK(kv->v.arr.count <= size / elem);
            check_inside(data, size, kv->v.arr.data, kv->v.arr.count * elem);
            touch(kv->v.arr.data, kv->v.arr.count * elem);
        }
    } else {
        CHECK(di_gguf_scalar_size(kv->type) != 0);
        if (kv->type == DI_GGUF_BOOL)
            CHECK(kv->v.u64 <= 1);
    }
    /* keys are unique, so the lookup finds this very entry */
    char key[1025];
    if (kv->key.len < sizeof key && !memchr(kv->key.ptr, '\0', (size_t)kv->key.len)) {
        memcpy(key, kv->key.ptr, (size_t)kv->key.len);
        key[kv->key.len] = '\0';
        CHECK(di_gguf_find_kv(g, key) == kv);
    }
}

static void walk_tensor(const di_gguf *g, const di_gguf_tensor *t, const uint8_t *data,
                        size_t size)
{
    check_inside(data, size, t->name.ptr, t->name.len);
    touch(t->name.ptr, t->name.len);
    CHECK(t->n_dims >= 1 && t->n_dims <= DI_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < DI_GGUF_MAX_DIMS; d++)
        CHECK(t->ne[d] >= 1 && (d < t->n_dims || t->ne[d] == 1));
    const uint32_t block_elems = di_weight_block_elems(t->type);
    CHECK(block_elems != 0);
    CHECK(t->ne[0] % block_elems == 0);
    CHECK(t->offset % g->alignment == 0);
    CHECK(t->data == data + g->data_offset + t->offset);
    check_inside(data, size, t->data, t->n_bytes);
    touch(t->data, t->n_bytes);
    char name[1025];
    if (t->name.len < sizeof name && !memchr(t->name.ptr, '\0', (size_t)t->name.len)) {
        memcpy(name, t->name.ptr, (size_t)t->name.len);
        name[t->name.len] = '\0';
        CHECK(di_gguf_find_tensor(g, name) == t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    di_gguf g;
    char err[256];
    di_status st = di_gguf_parse(data, size, &g, err, sizeof err);
    CHECK(memchr(err, '\0', sizeof err) != NULL);
    if (st != DI_OK) {
        CHECK(st == DI_ERR_FORMAT || st == DI_ERR_OUT_OF_MEMORY);
        CHECK(err[0] != '\0');
        CHECK(g.kv == NULL && g.tensors == NULL && g.n_kv == 0 && g.n_tensors == 0);
        return 0;
    }
    CHECK(g.version == 3);
    CHECK(g.alignment != 0 && (g.alignment & (g.alignment - 1)) == 0);
    CHECK(g.data_offset % g.alignment == 0);
    for (uint64_t i = 0; i < g.n_kv; i++)
        walk_kv(&g, &g.kv[i], data, size);
    for (uint64_t i = 0; i < g.n_tensors; i++)
        walk_tensor(&g, &g.tensors[i], data, size);
    di_gguf_release(&g);
    return 0;
}
