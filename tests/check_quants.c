/*
 * check_quants.c — weight types (kernels/cpu/dequant.c, docs/QUANTS.md):
 *   - bitwise agreement with gguf's numpy dequantization, on fixtures written
 *     by tests/tools/make_quant_fixtures.py ($DI_TEST_MODELS/quant_<t>.bin);
 *   - bitwise agreement with the documented float32 formula, evaluated on
 *     numbers this file reads out of the blocks with its own bit-by-bit code;
 *   - the exactness claims of QUANTS.md against double precision: products
 *     exact, at most one rounding, fma contraction and regrouping harmless;
 *   - blocks independent: any split of a row into block ranges, and any
 *     alignment of its bytes, gives the same bits;
 *   - the GGUF parser refuses rows that are not whole blocks, so
 *     di_dequant_row never sees one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dequant.h"
#include "lib/format/gguf.h"
#include "gguf_builder.h"
#include "test_util.h"
#include "kernels/common/weight_types.h"

/* How the documented formula combines the numbers of one weight. */
typedef enum {
    F_RAW,       /* the stored value itself (F32, F16, BF16) */
    F_SCALE,     /* d * q                        (Q4_0, Q5_0, Q8_0, IQ4_NL) */
    F_SCALE_MIN, /* (d * q) + m                  (Q4_1, Q5_1) */
    F_K_MIN,     /* (d * s) * q - (dmin * m)     (Q2_K, Q4_K, Q5_K) */
    F_K_SCALE    /* (d * s) * q                  (Q3_K, Q6_K, IQ4_XS) */
} formula;

typedef struct qtype {
    const char *name;  /* the fixture is quant_<name>.bin */
    uint32_t id, elems, bytes; /* weight_types.h; the fixtures check the layout */
    formula form;
    int half_fields[2]; /* byte offsets of binary16 scales in a block; -1: none */
} qtype;

/* id and layout of type T from the table of weight_types.h */
#define TYPE(T) DI_TYPE_##T, DI_BLOCK_ELEMS_##T, DI_BLOCK_BYTES_##T

/* Every supported type (test_supported_types checks that none is missing). */
static const qtype TYPES[] = {
    {"f32", TYPE(F32), F_RAW, {-1, -1}},
    {"f16", TYPE(F16), F_RAW, {-1, -1}},
    {"bf16", TYPE(BF16), F_RAW, {-1, -1}},
    {"q4_0", TYPE(Q4_0), F_SCALE, {0, -1}},
    {"q4_1", TYPE(Q4_1), F_SCALE_MIN, {0, 2}},
    {"q5_0", TYPE(Q5_0), F_SCALE, {0, -1}},
    {"q5_1", TYPE(Q5_1), F_SCALE_MIN, {0, 2}},
    {"q8_0", TYPE(Q8_0), F_SCALE, {0, -1}},
    {"iq4_nl", TYPE(IQ4_NL), F_SCALE, {0, -1}},
    {"q2_k", TYPE(Q2_K), F_K_MIN, {80, 82}},
    {"q3_k", TYPE(Q3_K), F_K_SCALE, {108, -1}},
    {"q4_k", TYPE(Q4_K), F_K_MIN, {0, 2}},
    {"q5_k", TYPE(Q5_K), F_K_MIN, {0, 2}},
    {"q6_k", TYPE(Q6_K), F_K_SCALE, {208, -1}},
    {"iq4_xs", TYPE(IQ4_XS), F_K_SCALE, {0, -1}},
};
#define N_TYPES ((int)(sizeof TYPES / sizeof TYPES[0]))
#define FIRST_BLOCK_TYPE 3 /* TYPES[3..] are the block-quantized types */

/* A passing ck_assert costs a pipe write in fork mode; the per-weight
 * comparisons only call into Check when they fail. */
#define EXPECT(cond, ...)               \
    do {                                \
        if (!(cond))                    \
            ck_abort_msg(__VA_ARGS__);  \
    } while (0)

/* ---- small helpers, independent of the library's -------------------------- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* `width` bits starting at bit `bit` of a little-endian bit stream. */
static unsigned bits_at(const uint8_t *p, unsigned bit, unsigned width)
{
    unsigned v = 0;
    for (unsigned i = 0; i < width; i++, bit++)
        v |= (unsigned)((p[bit / 8] >> (bit % 8)) & 1u) << i;
    return v;
}

/* binary16 to float by arithmetic (not the library's bit shuffle). */
static float half(const uint8_t *p)
{
    const unsigned h = p[0] | (unsigned)p[1] << 8;
    const unsigned e = (h >> 10) & 31u, mant = h & 1023u;
    float mag;
    if (e == 31)
        return from_bits((h & 0x8000u) << 16 | 0x7f800000u | mant << 13);
    mag = e == 0 ? ldexpf((float)mant, -24) : ldexpf((float)(1024 + mant), (int)e - 25);
    return (h & 0x8000u) ? -mag : mag;
}

/* ---- the documented formula, from numbers read by this file --------------- */

/* The IQ4 code values, as ggml's kvalues_iq4nl lists them. */
static const int IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* The numbers one weight is made of; those a formula does not use stay 0. */
typedef struct parts {
    float raw, d, s, q, dmin, m;
} parts;

/* The K types' 6-bit scale (want_min 0) or min (1) of sub-block sb, from the
 * 12 packed bytes, spelled as bit positions. */
static float k_packed(const uint8_t *scales, unsigned sb, int want_min)
{
    if (sb < 4)
        return (float)bits_at(scales, 8 * (sb + 4 * (unsigned)want_min), 6);
    const unsigned low = bits_at(scales, 8 * (sb + 4) + 4 * (unsigned)want_min, 4);
    const unsigned high = bits_at(scales, 8 * (sb - 4 + 4 * (unsigned)want_min) + 6, 2);
    return (float)(low | high << 4);
}

/* Weight j of the block at b. */
static parts read_parts(const qtype *t, const uint8_t *b, unsigned j)
{
    parts p = {0};
    const unsigned nib = 8 * (j % 16) + 4 * (j / 16); /* 32-blocks: nibble of weight j */
    const unsigned sb = j / 32, l = j % 32;           /* K types: sub-block, index in it */
    switch (t->id) {
    case DI_TYPE_F32: p.raw = from_bits(le32(b)); break;
    case DI_TYPE_F16: p.raw = half(b); break;
    case DI_TYPE_BF16: p.raw = from_bits((uint32_t)(b[0] | b[1] << 8) << 16); break;
    case DI_TYPE_Q4_0:
        p.d = half(b);
        p.q = (float)((int)bits_at(b + 2, nib, 4) - 8);
        break;
    case DI_TYPE_Q4_1:
        p.d = half(b), p.m = half(b + 2);
        p.q = (float)bits_at(b + 4, nib, 4);
        break;
    case DI_TYPE_Q5_0:
        p.d = half(b);
        p.q = (float)((int)(bits_at(b + 6, nib, 4) | bits_at(b + 2, j, 1) << 4) - 16);
        break;
    case DI_TYPE_Q5_1:
        p.d = half(b), p.m = half(b + 2);
        p.q = (float)(bits_at(b + 8, nib, 4) | bits_at(b + 4, j, 1) << 4);
        break;
    case DI_TYPE_Q8_0:
        p.d = half(b);
        p.q = (float)(int8_t)b[2 + j];
        break;
    case DI_TYPE_IQ4_NL:
        p.d = half(b);
        p.q = (float)IQ4NL[bits_at(b + 2, nib, 4)];
        break;
    case DI_TYPE_Q2_K: {
        const unsigned g = j / 16; /* 16 weights per scale and min */
        p.d = half(b + 80), p.dmin = half(b + 82);
        p.s = (float)bits_at(b + g, 0, 4), p.m = (float)bits_at(b + g, 4, 4);
        p.q = (float)bits_at(b + 16 + 32 * (j / 128) + l, 2 * ((j % 128) / 32), 2);
        break;
    }
    case DI_TYPE_Q3_K: {
        /* 16 six-bit scales: low nibbles in bytes 96..103 (groups 0-7 low
         * halves, 8-15 high halves), top pairs in bytes 104..107 */
        const unsigned g = j / 16;
        const unsigned sc = bits_at(b + 96, 8 * (g % 8) + 4 * (g / 8), 4) |
                            bits_at(b + 104, 8 * (g % 4) + 2 * (g / 4), 2) << 4;
        const unsigned lo = bits_at(b + 32 + 32 * (j / 128) + l, 2 * ((j % 128) / 32), 2);
        const unsigned hi = bits_at(b, 8 * l + j / 32, 1);
        p.d = half(b + 108);
        p.s = (float)((int)sc - 32);
        p.q = (float)((int)(lo | hi << 2) - 4);
        break;
    }
    case DI_TYPE_IQ4_XS: {
        const unsigned sc = bits_at(b + 4, 4 * sb, 4) | bits_at(b + 2, 2 * sb, 2) << 4;
        p.d = half(b);
        p.s = (float)((int)sc - 32);
        p.q = (float)IQ4NL[bits_at(b + 8 + 16 * sb, 8 * (l % 16) + 4 * (l / 16), 4)];
        break;
    }
    case DI_TYPE_Q4_K:
    case DI_TYPE_Q5_K: {
        const int q5 = t->id == DI_TYPE_Q5_K;
        const uint8_t *qs = b + (q5 ? 48 : 16);
        unsigned q = bits_at(qs, 8 * (32 * (sb / 2) + l) + 4 * (sb % 2), 4);
        if (q5)
            q |= bits_at(b + 16, 8 * l + sb, 1) << 4;
        p.d = half(b), p.dmin = half(b + 2);
        p.s = k_packed(b + 4, sb, 0), p.m = k_packed(b + 4, sb, 1);
        p.q = (float)q;
        break;
    }
    case DI_TYPE_Q6_K: {
        const unsigned h = j / 128, k = (j % 128) / 32;
        const unsigned lo = bits_at(b + 64 * h + 32 * (k % 2) + l, 4 * (k / 2), 4);
        const unsigned hi = bits_at(b + 128 + 32 * h + l, 2 * k, 2);
        p.d = half(b + 208);
        p.s = (float)(int8_t)b[192 + j / 16];
        p.q = (float)((int)(lo | hi << 4) - 32);
        break;
    }
    default: ck_abort_msg("no reference for type %u", t->id);
    }
    return p;
}

/* docs/QUANTS.md, operation by operation (the suite is built with
 * -ffp-contract=off, so each operator rounds on its own). */
static float documented(const qtype *t, const parts *p)
{
    switch (t->form) {
    case F_RAW: return p->raw;
    case F_SCALE: return p->d * p->q;
    case F_SCALE_MIN: return (p->d * p->q) + p->m;
    case F_K_MIN: return (p->d * p->s) * p->q - (p->dmin * p->m);
    case F_K_SCALE: return (p->d * p->s) * p->q;
    }
    return 0.0f;
}

/* The real number the block encodes, exactly: every product has at most
 * 11 + 8 + 6 significant bits, and every term lies in [2^-24, 2^28), so each
 * sum spans fewer than 53 bits and double holds it without rounding. */
static double exact_value(const qtype *t, const parts *p)
{
    switch (t->form) {
    case F_RAW: return p->raw;
    case F_SCALE: return (double)p->d * p->q;
    case F_SCALE_MIN: return (double)p->d * p->q + p->m;
    case F_K_MIN: return (double)p->d * p->s * p->q - (double)p->dmin * p->m;
    case F_K_SCALE: return (double)p->d * p->s * p->q;
    }
    return 0.0;
}

/* ---- fixtures -------------------------------------------------------------- */

typedef struct fixture {
    uint32_t n_rows, n_cols, row_bytes;
    uint8_t *file;         /* the whole file */
    const uint8_t *rows;   /* n_rows * row_bytes */
    const uint8_t *expect; /* n_rows * n_cols little-endian float32 */
} fixture;

static fixture read_fixture(const qtype *t)
{
    fixture fx = {0};
    char name[64];
    snprintf(name, sizeof name, "quant_%s", t->name);
    const char *path = tu_model_path(name, ".bin");
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (tests/tools/make_quant_fixtures.py)", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    const long size = ftell(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    ck_assert_msg(size >= 24, "%s: too short", path);
    fx.file = malloc((size_t)size);
    ck_assert_ptr_nonnull(fx.file);
    ck_assert_uint_eq(fread(fx.file, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    ck_assert_msg(memcmp(fx.file, "DIQF", 4) == 0 && le32(fx.file + 4) == 1, "%s: bad header", path);
    ck_assert_uint_eq(le32(fx.file + 8), t->id);
    fx.n_rows = le32(fx.file + 12), fx.n_cols = le32(fx.file + 16), fx.row_bytes = le32(fx.file + 20);
    ck_assert_uint_eq(fx.n_cols % t->elems, 0);
    ck_assert_uint_eq(fx.row_bytes, fx.n_cols / t->elems * t->bytes);
    ck_assert_uint_eq((uint64_t)size, 24 + (uint64_t)fx.n_rows * (fx.row_bytes + 4ull * fx.n_cols));
    fx.rows = fx.file + 24;
    fx.expect = fx.rows + (size_t)fx.n_rows * fx.row_bytes;
    return fx;
}

/* Fills out[] with a pattern that is no conversion result, so an element the
 * library forgets to write shows up. */
static void poison(float *out, size_t n)
{
    memset(out, 0xA5, n * sizeof *out);
}

/* Random blocks with finite binary16 scales of any sign and exponent. */
static void random_blocks(const qtype *t, uint8_t *out, uint32_t n_blocks, uint64_t *rng)
{
    for (size_t i = 0; i < (size_t)n_blocks * t->bytes; i++)
        out[i] = (uint8_t)tu_rand(rng);
    for (uint32_t b = 0; b < n_blocks; b++) {
        for (int k = 0; k < 2 && t->half_fields[k] >= 0; k++) {
            uint8_t *h = out + (size_t)b * t->bytes + t->half_fields[k];
            if ((h[1] & 0x7c) == 0x7c)
                h[1] ^= 0x40; /* Inf/NaN exponent -> a finite one */
        }
    }
}

/* ---- tests ----------------------------------------------------------------- */

/* Every row of the fixture, bit for bit as gguf's numpy code converts it. */
START_TEST(test_matches_gguf_package)
{
    const qtype *t = &TYPES[_i];
    fixture fx = read_fixture(t);
    float *out = malloc(fx.n_cols * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (uint32_t r = 0; r < fx.n_rows; r++) {
        poison(out, fx.n_cols);
        di_dequant_row(t->id, fx.rows + (size_t)r * fx.row_bytes, fx.n_cols, out);
        for (uint32_t c = 0; c < fx.n_cols; c++) {
            const uint32_t want = le32(fx.expect + 4 * ((size_t)r * fx.n_cols + c));
            EXPECT(bits_of(out[c]) == want, "%s row %u col %u: got %08x (%.9g), gguf %08x (%.9g)",
                          t->name, r, c, bits_of(out[c]), out[c], want, from_bits(want));
        }
    }
    free(out);
    free(fx.file);
}
END_TEST

/* Compares the library with the documented formula over n_blocks blocks;
 * counts the weights whose exact value is not a float (rounded ones). */
static void check_blocks(const qtype *t, const uint8_t *blocks, uint32_t n_blocks, float *out,
                         uint32_t *n_rounded)
{
    const uint32_t n = n_blocks * t->elems;
    poison(out, n);
    di_dequant_row(t->id, blocks, n, out);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *b = blocks + (size_t)(i / t->elems) * t->bytes;
        const parts p = read_parts(t, b, i % t->elems);
        const float want = documented(t, &p);
        EXPECT(bits_of(out[i]) == bits_of(want), "%s weight %u: got %08x, documented %08x",
                      t->name, i, bits_of(out[i]), bits_of(want));
        if (t->form == F_RAW)
            continue;
        /* the one rounding is a correct rounding of the exact value */
        const double x = exact_value(t, &p);
        EXPECT(bits_of(out[i]) == bits_of((float)x), "%s weight %u: %08x is not the exact %.17g rounded once",
                      t->name, i, bits_of(out[i]), x);
        *n_rounded += (double)out[i] != x;
    }
}

/* The library computes QUANTS.md's formula exactly, on the fixture rows and
 * on random blocks generated here. */
START_TEST(test_matches_documented_formula)
{
    const qtype *t = &TYPES[_i];
    fixture fx = read_fixture(t);
    float *out = malloc(fx.n_cols * sizeof *out);
    ck_assert_ptr_nonnull(out);
    uint32_t n_rounded = 0;
    for (uint32_t r = 0; r < fx.n_rows; r++)
        check_blocks(t, fx.rows + (size_t)r * fx.row_bytes, fx.n_cols / t->elems, out, &n_rounded);
    free(out);
    free(fx.file);

    uint64_t rng = 0x5eed0000u + t->id;
    const uint32_t n_blocks = 4096 / t->elems;
    uint8_t *blocks = malloc((size_t)n_blocks * t->bytes);
    out = malloc(4096 * sizeof *out);
    ck_assert(blocks && out);
    for (int trial = 0; trial < 50; trial++) {
        random_blocks(t, blocks, n_blocks, &rng);
        check_blocks(t, blocks, n_blocks, out, &n_rounded);
    }
    free(blocks);
    free(out);
    /* the types with an addition must actually have met a rounding */
    if (t->form == F_SCALE_MIN || t->form == F_K_MIN)
        ck_assert_msg(n_rounded > 0, "%s: no weight needed rounding; the inputs are too tame", t->name);
    else
        ck_assert_msg(n_rounded == 0, "%s: %u weights rounded in an exact type", t->name, n_rounded);
}
END_TEST

/* QUANTS.md says a backend may contract to fma or regroup the products:
 * check that each alternative gives the same bits on random blocks. */
START_TEST(test_allowed_variants_agree)
{
    const qtype *t = &TYPES[_i];
    uint64_t rng = 0xa17e0000u + t->id;
    uint8_t block[256];
    for (uint32_t trial = 0; trial < (1u << 18) / t->elems; trial++) {
        random_blocks(t, block, 1, &rng);
        for (unsigned j = 0; j < t->elems; j++) {
            const parts p = read_parts(t, block, j);
            const uint32_t want = bits_of(documented(t, &p));
            float alt[3];
            int n_alt = 0;
            switch (t->form) {
            case F_SCALE:
                alt[n_alt++] = p.q * p.d;
                break;
            case F_SCALE_MIN:
                alt[n_alt++] = fmaf(p.d, p.q, p.m);
                alt[n_alt++] = p.m + p.q * p.d;
                break;
            case F_K_MIN:
                alt[n_alt++] = fmaf(p.d * p.s, p.q, -(p.dmin * p.m));
                alt[n_alt++] = p.d * (p.s * p.q) - p.dmin * p.m;
                alt[n_alt++] = (p.d * p.s) * p.q + (-p.dmin) * p.m;
                break;
            case F_K_SCALE:
                alt[n_alt++] = p.d * (p.s * p.q);
                alt[n_alt++] = (p.d * p.q) * p.s;
                break;
            case F_RAW:
                break;
            }
            for (int a = 0; a < n_alt; a++)
                EXPECT(bits_of(alt[a]) == want, "%s weight %u variant %d: %08x, documented %08x",
                              t->name, j, a, bits_of(alt[a]), want);
        }
    }
}
END_TEST

/* No state crosses blocks: converting a row in any split into block ranges,
 * from bytes at any alignment, gives the whole row's bits. */
START_TEST(test_blocks_are_independent)
{
    const qtype *t = &TYPES[_i];
    fixture fx = read_fixture(t);
    const uint32_t n_blocks = fx.n_cols / t->elems;
    float *whole = malloc(fx.n_cols * sizeof *whole), *parts_out = malloc(fx.n_cols * sizeof *whole);
    uint8_t *shifted = malloc(fx.row_bytes + 8);
    ck_assert(whole && parts_out && shifted);
    uint64_t rng = 0x5b1170000u + t->id;
    for (uint32_t r = 0; r < fx.n_rows; r++) {
        const uint8_t *row = fx.rows + (size_t)r * fx.row_bytes;
        di_dequant_row(t->id, row, fx.n_cols, whole);
        for (int trial = 0; trial < 4; trial++) {
            poison(parts_out, fx.n_cols);
            for (uint32_t b = 0; b < n_blocks;) {
                const uint32_t len = 1 + (uint32_t)(tu_rand(&rng) % (trial == 0 ? 1 : n_blocks - b));
                di_dequant_row(t->id, row + (size_t)b * t->bytes, len * t->elems, parts_out + b * t->elems);
                b += len;
            }
            EXPECT(memcmp(whole, parts_out, fx.n_cols * sizeof *whole) == 0,
                          "%s row %u: split conversion differs", t->name, r);
        }
        const uint32_t shift = 1 + r % 7;
        memcpy(shifted + shift, row, fx.row_bytes);
        poison(parts_out, fx.n_cols);
        di_dequant_row(t->id, shifted + shift, fx.n_cols, parts_out);
        EXPECT(memcmp(whole, parts_out, fx.n_cols * sizeof *whole) == 0,
                      "%s row %u: bytes at offset %u convert differently", t->name, r, shift);
    }
    free(whole);
    free(parts_out);
    free(shifted);
    free(fx.file);
}
END_TEST

/* The prose lists of the supported types (README.md, docs/MODELS.md,
 * include/detinfer.h) name the table's, in its order. */
START_TEST(test_docs_list_the_supported_types)
{
#define NAME_AFTER_COMMA(name, id, elems, bytes, supported, ...) DI_WT_IF_SUPPORTED(supported, ", " #name)
    static const char list[] = "" DI_WEIGHT_TYPES(NAME_AFTER_COMMA); /* ", F32, F16, ..." */
#undef NAME_AFTER_COMMA
    const char *want = list + 2;
    static const char *const docs[] = {"README.md", "docs/MODELS.md", "include/detinfer.h"};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char *text = tu_read_doc_flat(docs[i]);
        ck_assert_msg(strstr(text, want) != NULL, "%s does not list '%s'", docs[i], want);
        free(text);
    }
}
END_TEST

/* The table's supported types are exactly the listed ones; every other id
 * converts to zeros. (The fixtures check each listed layout against the
 * gguf package.) */
START_TEST(test_supported_types)
{
    for (uint32_t id = 0; id < 64; id++) {
        int listed = 0;
        for (int k = 0; k < N_TYPES; k++)
            listed |= TYPES[k].id == id;
        ck_assert_msg(di_weight_type_supported(id) == listed, "type %u (%s): supported %d", id,
                      di_weight_type_name(id), di_weight_type_supported(id));
    }
    ck_assert(!di_weight_type_supported(UINT32_MAX));
    /* an unsupported type yields zeros, not garbage */
    float out[64];
    uint8_t row[64 * 36] = {0xff};
    poison(out, 64);
    di_dequant_row(DI_TYPE_Q8_1, row, 64, out);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(bits_of(out[i]), 0);
}
END_TEST

/* docs/QUANTS.md documents exactly the supported types of the table, under
 * the table's names, ids and layouts: "## F32 (0), F16 (1), BF16 (30)" for
 * the float types, "### Q4_0 (2): 32 weights, 18 bytes" for each block type. */
START_TEST(test_quants_doc_follows_the_table)
{
    const char *root = getenv("DI_TEST_ROOT");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/QUANTS.md", root);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[512];
    char float_heading[512] = "";
    int n_block_headings = 0;
    while (fgets(line, sizeof line, f)) {
        char name[16];
        unsigned id, elems, bytes;
        if (strncmp(line, "## F32", 6) == 0)
            snprintf(float_heading, sizeof float_heading, "%s", line);
        if (sscanf(line, "### %15s (%u): %u weights, %u bytes", name, &id, &elems, &bytes) == 4) {
            n_block_headings++;
            ck_assert_msg(di_weight_type_supported(id) && strcmp(name, di_weight_type_name(id)) == 0 &&
                              elems == di_weight_block_elems(id) && bytes == di_weight_block_bytes(id),
                          "QUANTS.md: '%s' differs from weight_types.h", line);
        }
    }
    fclose(f);
    int n_block_types = 0;
    for (uint32_t id = 0; id < 64; id++) {
        if (!di_weight_type_supported(id))
            continue;
        if (di_weight_block_elems(id) > 1) {
            n_block_types++;
            continue;
        }
        char want[32];
        snprintf(want, sizeof want, "%s (%u)", di_weight_type_name(id), id);
        ck_assert_msg(strstr(float_heading, want) != NULL, "QUANTS.md: no '%s' in '%s'", want,
                      float_heading);
    }
    ck_assert_int_eq(n_block_headings, n_block_types);
}
END_TEST

/* Parses a GGUF holding one [ne0, 2] tensor of `type` and data_bytes of zeros. */
static di_status parse_one_tensor(uint32_t type, uint64_t ne0, size_t data_bytes, uint64_t *n_bytes)
{
    gb_buf b;
    gb_buf_init(&b);
    const uint64_t ne[2] = {ne0, 2};
    gb_put_header(&b, "GGUF", 3, 1, 0);
    gb_put_tensor_info(&b, "w", 2, ne, type, 0);
    gb_pad_to(&b, 32);
    gb_put_zeros(&b, data_bytes);
    di_gguf g;
    char err[256];
    const di_status st = di_gguf_parse(b.data, b.len, &g, err, sizeof err);
    if (st == DI_OK) {
        *n_bytes = g.tensors[0].n_bytes;
        di_gguf_release(&g);
    }
    gb_buf_free(&b);
    return st;
}

/* A row of one and a half blocks never reaches di_dequant_row: the parser
 * refuses it; a row of two blocks is accepted with its exact size. */
START_TEST(test_parser_refuses_partial_blocks)
{
    const qtype *t = &TYPES[_i];
    uint64_t n_bytes = 0;
    ck_assert_int_eq(parse_one_tensor(t->id, t->elems + t->elems / 2, 8 * (size_t)t->bytes, &n_bytes),
                     DI_ERR_FORMAT);
    ck_assert_int_eq(parse_one_tensor(t->id, 2 * t->elems, 8 * (size_t)t->bytes, &n_bytes), DI_OK);
    ck_assert_uint_eq(n_bytes, 4 * (uint64_t)t->bytes);
}
END_TEST

Suite *quants_suite(void)
{
    Suite *s = suite_create("quants");
    TCase *tc = tcase_create("dequant");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_matches_gguf_package, 0, N_TYPES);
    tcase_add_loop_test(tc, test_matches_documented_formula, 0, N_TYPES);
    tcase_add_loop_test(tc, test_allowed_variants_agree, FIRST_BLOCK_TYPE, N_TYPES);
    tcase_add_loop_test(tc, test_blocks_are_independent, 0, N_TYPES);
    tcase_add_test(tc, test_supported_types);
    tcase_add_test(tc, test_quants_doc_follows_the_table);
    tcase_add_test(tc, test_docs_list_the_supported_types);
    tcase_add_loop_test(tc, test_parser_refuses_partial_blocks, FIRST_BLOCK_TYPE, N_TYPES);
    suite_add_tcase(s, tc);
    return s;
}
