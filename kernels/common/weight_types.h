/*
 * weight_types.h — the one table of weight storage types (ggml type ids, the
 * `type` of a GGUF tensor), and the 2-D weight view the kernels take. Plain C
 * that the C compiler and nvcc both compile.
 *
 * Each row: name, ggml id, weights per block, bytes per block, 1 when this
 * library computes with the type (0: the GGUF parser knows its size, the
 * model loader refuses it), then the block's layout: the byte offsets of its
 * fields, -1 where the type has none (docs/QUANTS.md draws each block):
 *   d    the binary16 scale            m    the binary16 min (Q4_1, Q5_1) or dmin (K types)
 *   sc   the sub-block scales (and     sch  IQ4_XS's high scale bits
 *        Q2_K's and Q4_K's mins)
 *   qh   the high bits (Q5_x's fifth bits, Q3_K's hmask, Q6_K's top two bits)
 *   qs   the low bits or codes (the values of F32, F16, BF16)
 * Everything else reads this table: the parser's size checks, the
 * dequantizers' and SIMD kernels' dispatch and field offsets, the integer
 * profile, the CUDA plugin and the tests; check_quants.c checks the type lists
 * of docs/QUANTS.md, docs/MODELS.md, README.md and detinfer.h against it.
 * Adding a supported type is one row here plus its cases in the one scalar
 * decoder (weight_codes.h; docs/QUANTS.md), its case in the one x86 decoder
 * (kernels/cpu/x86_codes.h, which the float paths' simd_dequant.h and the
 * avx2 integer path share), its float stage in simd_dequant.h's dq32, its
 * avx512 integer decoders (cpu_int_avx512.c) and its test entries
 * (docs/QUANTS.md lists them).
 */
#ifndef DI_WEIGHT_TYPES_H
#define DI_WEIGHT_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/host_device.h"

/* Rows in groups: the supported float types, 32-weight blocks and 256-weight
 * super-blocks (docs/QUANTS.md's order, which the switches built from the
 * table follow), then the types the parser knows but nothing computes.
 *
 *  X(name, id, elements per block, bytes per block, supported, d, m, sc, sch, qh, qs) */
#define DI_WEIGHT_TYPES(X)                                       \
    X(F32,      0,   1,   4, 1,   -1,  -1,  -1, -1,  -1,  0)     \
    X(F16,      1,   1,   2, 1,   -1,  -1,  -1, -1,  -1,  0)     \
    X(BF16,    30,   1,   2, 1,   -1,  -1,  -1, -1,  -1,  0)     \
    X(Q4_0,     2,  32,  18, 1,    0,  -1,  -1, -1,  -1,  2)     \
    X(Q4_1,     3,  32,  20, 1,    0,   2,  -1, -1,  -1,  4)     \
    X(Q5_0,     6,  32,  22, 1,    0,  -1,  -1, -1,   2,  6)     \
    X(Q5_1,     7,  32,  24, 1,    0,   2,  -1, -1,   4,  8)     \
    X(Q8_0,     8,  32,  34, 1,    0,  -1,  -1, -1,  -1,  2)     \
    X(IQ4_NL,  20,  32,  18, 1,    0,  -1,  -1, -1,  -1,  2)     \
    X(Q2_K,    10, 256,  84, 1,   80,  82,   0, -1,  -1, 16)     \
    X(Q3_K,    11, 256, 110, 1,  108,  -1,  96, -1,   0, 32)     \
    X(Q4_K,    12, 256, 144, 1,    0,   2,   4, -1,  -1, 16)     \
    X(Q5_K,    13, 256, 176, 1,    0,   2,   4, -1,  16, 48)     \
    X(Q6_K,    14, 256, 210, 1,  208,  -1, 192, -1, 128,  0)     \
    X(IQ4_XS,  23, 256, 136, 1,    0,  -1,   4,  2,  -1,  8)     \
    X(Q8_1,     9,  32,  36, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(Q8_K,    15, 256, 292, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(IQ2_XXS, 16, 256,  66, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(IQ2_XS,  17, 256,  74, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(IQ3_XXS, 18, 256,  98, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(IQ1_S,   19, 256,  50, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(IQ3_S,   21, 256, 110, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(IQ2_S,   22, 256,  82, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(IQ1_M,   29, 256,  56, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(I8,      24,   1,   1, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(I16,     25,   1,   2, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(I32,     26,   1,   4, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(I64,     27,   1,   8, 0,   -1,  -1,  -1, -1,  -1, -1)     \
    X(F64,     28,   1,   8, 0,   -1,  -1,  -1, -1,  -1, -1)

/* The 16 values a 4-bit code of IQ4_NL and IQ4_XS stands for (ggml's
 * kvalues_iq4nl: a fact of the format), in code order. */
#define DI_IQ4NL_VALUES -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113

/* DI_TYPE_<name> = id; DI_BLOCK_ELEMS_<name>, DI_BLOCK_BYTES_<name> and the
 * field offsets DI_OFF_<field>_<name>: the layout as constants, for code
 * written for one type. */
enum {
#define DI_WT_ENUM(name, id, elems, bytes, supported, d, m, sc, sch, qh, qs)                  \
    DI_TYPE_##name = id, DI_BLOCK_ELEMS_##name = elems, DI_BLOCK_BYTES_##name = bytes,     \
    DI_OFF_D_##name = d, DI_OFF_M_##name = m, DI_OFF_SC_##name = sc, DI_OFF_SCH_##name = sch, \
    DI_OFF_QH_##name = qh, DI_OFF_QS_##name = qs,
    DI_WEIGHT_TYPES(DI_WT_ENUM)
#undef DI_WT_ENUM
};

/* DI_WT_IF_SUPPORTED(supported, code...): the code (commas allowed) for a row
 * whose column is 1, nothing for 0: a switch or a list over the supported
 * types only. */
#define DI_WT_IF_SUPPORTED(supported, ...) DI_WT_IF_##supported(__VA_ARGS__)
#define DI_WT_IF_1(...) __VA_ARGS__
#define DI_WT_IF_0(...)

/* The supported types' names as one string literal, " F32 F16 Q4_0 ...". */
#define DI_WT_NAME_IF_SUPPORTED(name, id, elems, bytes, supported, ...) \
    DI_WT_IF_SUPPORTED(supported, " " #name)
#define DI_SUPPORTED_WEIGHT_TYPE_NAMES DI_WEIGHT_TYPES(DI_WT_NAME_IF_SUPPORTED)


/* Weights per block, bytes per block; 0 for an id not in the table. */
DI_HD uint32_t di_weight_block_elems(uint32_t type)
{
    switch (type) {
#define DI_WT_CASE(name, id, elems, bytes, supported, ...) case id: return elems;
        DI_WEIGHT_TYPES(DI_WT_CASE)
#undef DI_WT_CASE
    default: return 0;
    }
}

DI_HD uint32_t di_weight_block_bytes(uint32_t type)
{
    switch (type) {
#define DI_WT_CASE(name, id, elems, bytes, supported, ...) case id: return bytes;
        DI_WEIGHT_TYPES(DI_WT_CASE)
#undef DI_WT_CASE
    default: return 0;
    }
}

/* 1 when the library computes with this type (the loader admits it). */
DI_HD int di_weight_type_supported(uint32_t type)
{
    switch (type) {
#define DI_WT_CASE(name, id, elems, bytes, supported, ...) case id: return supported;
        DI_WEIGHT_TYPES(DI_WT_CASE)
#undef DI_WT_CASE
    default: return 0;
    }
}

/* The fields of a block, in the table's order. */
typedef enum di_weight_field_id {
    DI_FIELD_D, DI_FIELD_M, DI_FIELD_SC, DI_FIELD_SCH, DI_FIELD_QH, DI_FIELD_QS,
} di_weight_field_id;

/* The byte offset of a field in a block of `type`, -1 when the type has none
 * (or is not in the table). With a constant type the switch folds away. */
DI_HD int di_weight_field(uint32_t type, di_weight_field_id field)
{
    int at[6] = {-1, -1, -1, -1, -1, -1};
    switch (type) {
#define DI_WT_CASE(name, id, elems, bytes, supported, d, m, sc, sch, qh, qs) \
    case id: at[0] = d, at[1] = m, at[2] = sc, at[3] = sch, at[4] = qh, at[5] = qs; break;
        DI_WEIGHT_TYPES(DI_WT_CASE)
#undef DI_WT_CASE
    default: break;
    }
    return at[field];
}

/* The type's name ("Q8_0"), or "unknown". */
static inline const char *di_weight_type_name(uint32_t type)
{
    switch (type) {
#define DI_WT_CASE(name, id, elems, bytes, supported, ...) case id: return #name;
        DI_WEIGHT_TYPES(DI_WT_CASE)
#undef DI_WT_CASE
    default: return "unknown";
    }
}

/* A 2-D weight matrix: n_out rows of n_in elements, row-major (in the
 * model file, or in a scratch the caller owns). */
typedef struct di_weight {
    const uint8_t *data;
    uint32_t type;      /* DI_TYPE_*, a supported one */
    uint32_t n_in;      /* ne0: elements per row (the reduction length) */
    uint32_t n_out;     /* ne1: rows */
    size_t row_bytes;
    /* The same rows in the layout of the CPU's avx512 integer kernel
     * (kernels/cpu/cpu_int.h "Packed weights"), packed_row_bytes apart, or
     * NULL: made once per model, for a session that runs that kernel. */
    const uint8_t *packed;
    size_t packed_row_bytes;
} di_weight;

#endif /* DI_WEIGHT_TYPES_H */
