/*
 * cpu_ops.h — the CPU kernel paths behind one table of operations.
 *
 * The scalar path (cpu_kernels.c, portable C) is the reference; the AVX2 and
 * AVX-512 paths (cpu_avx2.c, cpu_avx512.c) implement the same canonical order
 * of docs/DETERMINISM.md with intrinsics and give the same bits for every
 * input. A session picks one table when it is created (di_cpu_ops_select).
 */
#ifndef DI_CPU_OPS_H
#define DI_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"
#include "kernels/common/numerics.h"     /* di_rope_pairing */
#include "kernels/common/weight_types.h" /* di_weight */

/* Floats of per-thread scratch a matmul_rows call may use, for rows of n_in. */
#define DI_MATMUL_TILE_ROWS 16u
#define DI_MATMUL_SCRATCH(n_in) ((size_t)(n_in) * DI_MATMUL_TILE_ROWS + 64u * 32u)

/* A tile of attention: the query heads [0, n_heads) of one KV head at rows
 * t < n_rows of one sequence, row t at position first + n_keys0 - 1 + t, so
 * that it attends to keys j < n_keys0 + t (j counted from the first key kept,
 * the same for every row). Query (t, g) is q + t * q_stride + g * head_dim
 * and its result goes to the same place in out. k, v, kv_stride, head_dim,
 * scale and softcap are those of di_cpu_attention_head. */
typedef struct di_attn_tile {
    const float *q;
    float *out;
    size_t q_stride;
    uint32_t n_rows, n_heads; /* n_rows * n_heads <= DI_ATTN_TILE_QUERIES */
    const float *k, *v;
    uint32_t kv_stride, n_keys0, head_dim;
    float scale, softcap;
} di_attn_tile;

/* Where query qi = t * n_heads + g of a tile starts in q (and its result in out). */
static inline size_t di_attn_query_at(const di_attn_tile *t, uint32_t qi)
{
    return (qi / t->n_heads) * t->q_stride + (size_t)(qi % t->n_heads) * t->head_dim;
}

/* Queries per tile: the AVX-512 path's value sums keep this many queries'
 * accumulators in registers. */
#define DI_ATTN_TILE_QUERIES 12u
/* Floats of scratch an attention_tile call uses for keys < n_keys: every
 * query's scores, then the lane sums of one query (2 x DI_LANES x head_dim)
 * or of every query for a block of up to 32 columns. */
#define DI_ATTN_SCRATCH(n_keys, head_dim)                                     \
    ((size_t)DI_ATTN_TILE_QUERIES * (n_keys) +                                \
     (size_t)DI_LANES * (2u * (head_dim) > 32u * DI_ATTN_TILE_QUERIES ? 2u * (head_dim) \
                                                                     : 32u * DI_ATTN_TILE_QUERIES))

typedef struct di_cpu_ops {
    di_cpu_path path;
    const char *name; /* "scalar", "avx2", "avx512" */
    /* canonical fma-form dot product and plain sum (numerics.h) */
    float (*dot)(const float *a, const float *b, uint32_t n);
    float (*sum)(const float *x, uint32_t n);
    /* y[t * w->n_out + r] = dot(row r of w, x[t * w->n_in ..]) for r in
     * [r0, r1) and t < n_tokens; scratch holds DI_MATMUL_SCRATCH(w->n_in). */
    void (*matmul_rows)(const di_weight *w, uint32_t r0, uint32_t r1, const float *x,
                        uint32_t n_tokens, float *y, float *scratch);
    /* out = (x * scale) * w, scale = di_rms_scale(dot(x, x), n, eps); out may be x */
    void (*rmsnorm)(const float *x, const float *w, uint32_t n, float eps, float *out);
    /* see di_cpu_rope and di_cpu_attention_head in cpu_kernels.h */
    void (*rope)(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot,
                 di_rope_pairing pairing, const float *cos_t, const float *sin_t);
    void (*attention_head)(const float *q, const float *k, const float *v, uint32_t kv_stride,
                           uint32_t n_keys, uint32_t head_dim, float scale, float softcap,
                           float *out, float *scratch);
    /* every query of a tile as attention_head gives it, the loads of each key
     * and value shared by the tile's queries; scratch holds
     * DI_ATTN_SCRATCH(n_keys0 + n_rows - 1, head_dim) floats */
    void (*attention_tile)(const di_attn_tile *t, float *scratch);
    /* gate[i] = act(gate[i]) * up[i], act = di_silu or di_gelu_tanh */
    void (*silu_mul)(float *gate, const float *up, size_t n);
    void (*gelu_mul)(float *gate, const float *up, size_t n);
    /* x[i] = di_softcap(x[i], cap), cap > 0 */
    void (*softcap)(float *x, size_t n, float cap);
    /* dst[i] = a[i] + b[i] */
    void (*add)(float *dst, const float *a, const float *b, size_t n);
    /* lowest index of the largest non-NaN value; 0 when all are NaN */
    uint32_t (*argmax)(const float *x, uint32_t n);
    /* The integer profile's product (cpu_int.h), NULL in the float tables:
     * int_layout lays qa (di_qa_bytes(w->n_in, n_tokens) bytes, 64-byte
     * aligned) out for n_tokens rows of w's input and returns the count of
     * its units (cpu_int.h's di_qa_units); int_quantize writes the
     * quantized rows of x of units [u0, u1) into it, units apart on any
     * thread (what it writes depends on x and the layout alone, so
     * di_cpu_matmul keeps it for the next product of the same input); then
     * int_rows gives y[t * w->n_out + r] for rows [r0, r1)
     * from it; scratch holds DI_MATMUL_SCRATCH(w->n_in) floats. */
    uint32_t (*int_layout)(const di_weight *w, uint32_t n_tokens, void *qa);
    void (*int_quantize)(const di_weight *w, const float *x, void *qa, uint32_t u0, uint32_t u1);
    void (*int_rows)(const di_weight *w, uint32_t r0, uint32_t r1, const void *qa, float *y, float *scratch);
    /* A path whose int_rows reads a weight's packed copy where it has one
     * (di_weight.packed, cpu_int.h "Packed weights"), NULL elsewhere: the
     * bytes of one packed row of a type (0: the type has no packed layout),
     * and the packing of rows [r0, r1) of w into dst, row r at r * stride.
     * A session of such a table packs its model once (weight_pack.c). */
    size_t (*int_packed_row_bytes)(uint32_t type, uint32_t n_in);
    void (*int_pack_rows)(const di_weight *w, uint32_t r0, uint32_t r1, uint8_t *dst, size_t stride);
} di_cpu_ops;

/* CPU features the paths need (x86-64), as di_cpu_features reports them:
 * CPUID's instruction sets, and whether the OS saves the registers. */
enum {
    DI_CPU_AVX = 1u << 0, DI_CPU_AVX2 = 1u << 1, DI_CPU_FMA = 1u << 2, DI_CPU_F16C = 1u << 3,
    DI_CPU_OS_AVX = 1u << 4, /* XCR0: XMM and YMM state */
    DI_CPU_AVX512F = 1u << 5, DI_CPU_AVX512BW = 1u << 6, DI_CPU_AVX512VL = 1u << 7,
    DI_CPU_AVX512DQ = 1u << 8,
    DI_CPU_OS_AVX512 = 1u << 9, /* XCR0: opmask and ZMM state too */
    DI_CPU_AVX512VNNI = 1u << 10, /* vpdpbusd: the integer profile's avx512 product (cpu_int.h) */
};
#define DI_CPU_NEEDS_AVX2 (DI_CPU_AVX | DI_CPU_AVX2 | DI_CPU_FMA | DI_CPU_F16C | DI_CPU_OS_AVX)
#define DI_CPU_NEEDS_AVX512                                                                       \
    (DI_CPU_NEEDS_AVX2 | DI_CPU_AVX512F | DI_CPU_AVX512BW | DI_CPU_AVX512VL | DI_CPU_AVX512DQ | \
     DI_CPU_OS_AVX512)

/* The features of this CPU and OS, less di_cpu_test_hidden_features (a test
 * hook: check_paths.c hides one feature at a time). */
uint32_t di_cpu_features(void);
extern uint32_t di_cpu_test_hidden_features;

/* The table for a path, or NULL when this CPU or build cannot run it. */
const di_cpu_ops *di_cpu_ops_for(di_cpu_path path);

/* The path's name: "auto", "scalar", "avx2", "avx512" (di_cpu_path_name's answer), "unknown" else. */
const char *di_cpu_ops_path_name(di_cpu_path path);

/* The table a session gets for `requested` (DI_CPU_PATH_AUTO: the variable
 * DETINFER_CPU_PATH when set, else the widest available path). On failure a
 * message goes to errbuf and the status is DI_ERR_UNSUPPORTED (the path is
 * not available here) or DI_ERR_INVALID_ARGUMENT (a bad variable value). */
di_status di_cpu_ops_select(di_cpu_path requested, const di_cpu_ops **out, char *errbuf,
                            size_t errbuf_size);

/* The tables of each path (NULL-free only where compiled in). */
extern const di_cpu_ops di_cpu_ops_scalar;
#if defined(__x86_64__) && defined(__GNUC__)
#define DI_HAVE_X86_PATHS 1
extern const di_cpu_ops di_cpu_ops_avx2;
extern const di_cpu_ops di_cpu_ops_avx512;
#endif

#endif /* DI_CPU_OPS_H */
