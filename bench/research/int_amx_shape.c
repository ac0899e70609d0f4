/*
 * int_amx_shape.c — a research kernel, not the library's: the integer
 * profile's many-token product with Intel AMX (AMX-INT8's TDPBUSD), timed
 * against the avx512 VNNI kernel (di_int_rows_avx512) on one matrix shape,
 * with both outputs' checksums, which must be equal (docs/PERFORMANCE-LOG.md,
 * "The third pass"). Q4_K weights, packed as a session packs them.
 *
 * For each 16 rows the kernel decodes the weights into a tile laid out by
 * block (a block's 16 rows x 32 code bytes contiguous: AMX's A; its scales,
 * D and min factors beside them). For each group of 16 tokens it walks the
 * blocks lane by lane (lane l: blocks l, l + 32, ...; the lanes' sums in 16
 * registers, one per row); block b's product C[row][token] = sum of u * c is
 * vpdpbusd's exact int32 sum, with B the tokens' codes as di_qa_tblock lays
 * them out. Three C tiles: block k + 3's product is issued and block k + 2's
 * stored while block k's float stages (the VNNI kernel's token_P and the
 * definition's fmas) run from memory, so the same integers and float
 * operations give the same bits.
 *
 *   make research (build/research/int_amx_shape)
 *   build/research/int_amx_shape K N TOKENS        K a multiple of 256, TOKENS a multiple of 16
 *
 * Needs a CPU with AMX-INT8 and AVX-512 VNNI and Linux's grant of the tile
 * state (it exits with a message without them).
 */
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include "bench/research/int_shape_setup.h"

#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")
#endif
#include "kernels/cpu/cpu_int_avx512_common.h" /* under the pragma: it defines functions */

long syscall(long number, ...); /* unistd.h declares it only with _DEFAULT_SOURCE */

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define ROWS 16u  /* rows per tile product: A's and C's */
#define DEPTH 3u  /* C tiles: products in flight */
#define AHEAD 2u  /* a product is stored AHEAD blocks before its float stages */
#define T_A 4     /* tile registers (the intrinsics take literal numbers) */
#define T_B 6
#define CALLS 25

/* Block b of the tile's 16 rows (the tile is an array of these). */
typedef struct amx_block {
    uint8_t a[ROWS][32];
    float k[ROWS], d[ROWS], n0[ROWS];
} amx_block;

typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void configure(void)
{
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (unsigned t = 0; t < DEPTH; t++)
        c.rows[t] = ROWS, c.colsb[t] = 64; /* C: 16 rows of 16 int32 */
    c.rows[T_A] = ROWS, c.colsb[T_A] = 32; /* A: 16 rows of 32 code bytes */
    c.rows[T_B] = 8, c.colsb[T_B] = 64;    /* B: 8 words of 16 tokens */
    __asm__ volatile("" : : "r"(&c) : "memory"); /* GCC drops the stores ldtilecfg reads otherwise */
    _tile_loadconfig(&c);
}

/* Row q's group of `count` blocks at b0 into the tile (codes, factors). */
static inline void store_group(amx_block *t, uint32_t q, uint32_t b0, uint32_t count, const __m512i u[8], __m512i k,
                               __m512 d, __m512 n0)
{
    for (uint32_t m = 0; m < 8 && 2 * m < count; m++) {
        _mm256_storeu_si256((void *)t[b0 + 2 * m].a[q], _mm512_castsi512_si256(u[m]));
        if (2 * m + 1 < count)
            _mm256_storeu_si256((void *)t[b0 + 2 * m + 1].a[q], _mm512_extracti64x4_epi64(u[m], 1));
    }
    _Alignas(64) float f[3][GROUP];
    _mm512_store_ps(f[0], d);
    _mm512_store_ps(f[1], n0);
    _mm512_store_ps(f[2], _mm512_cvtepi32_ps(k));
    for (uint32_t j = 0; j < count; j++)
        t[b0 + j].d[q] = f[0][j], t[b0 + j].n0[q] = f[1][j], t[b0 + j].k[q] = f[2][j];
}

/* Rows r..r + nr of the packed Q4_K matrix into the tile (rows past nr zero). */
static void decode_rows(const di_weight *w, uint32_t r, uint32_t nr, uint32_t nb, amx_block *t)
{
    for (uint32_t q = 0; q < ROWS; q++) {
        if (q >= nr) {
            for (uint32_t b = 0; b < nb; b++) {
                memset(t[b].a[q], 0, 32);
                t[b].k[q] = t[b].d[q] = t[b].n0[q] = 0.0f;
            }
            continue;
        }
        const row_src src = row_source(w, r + q, packed_q4_k);
        for (uint32_t b0 = 0; b0 < nb; b0 += GROUP) {
            const uint32_t count = nb - b0 < GROUP ? nb - b0 : GROUP;
            pgroup g;
            packed_group(packed_q4_k, &src, b0, count, (__mmask16)((1u << count) - 1), ROWS * w->packed_row_bytes,
                         &g);
            __m512i u[8];
            words_to_blocks(g.u, u);
            store_group(t, q, b0, count, u, g.k[0], g.d, g.n0);
        }
    }
}

#define ISSUE(C)                                             \
    do {                                                     \
        _tile_loadd(T_A, t[b].a, 32);                        \
        _tile_loadd(T_B, tok[b].codes[0], 64);               \
        _tile_zero(C);                                       \
        _tile_dpbusd(C, T_A, T_B);                           \
    } while (0)

static inline void issue(uint32_t set, const amx_block *t, const di_qa_tblock *tok, uint32_t b)
{
    if (set == 0)
        ISSUE(0);
    else if (set == 1)
        ISSUE(1);
    else
        ISSUE(2);
}

static inline void store(uint32_t set, int32_t (*c)[DI_QA_TOKENS])
{
    if (set == 0)
        _tile_stored(0, c, 64);
    else if (set == 1)
        _tile_stored(1, c, 64);
    else
        _tile_stored(2, c, 64);
}

/* Block e's float stages for the 16 rows from its sums c. */
static inline void block_steps(const amx_block *e, const di_qa_tblock *tb, int32_t (*c)[DI_QA_TOKENS],
                               __m512 acc[ROWS])
{
    const int_kind *kd = &KINDS[K_Q4_K];
    const __m512 a = _mm512_load_ps(tb->a), as = _mm512_load_ps(tb->as_full);
    for (uint32_t q = 0; q < ROWS; q++) {
        const __m512i x[2] = {_mm512_load_si512(c[q]), _mm512_setzero_si512()};
        const __m512 P = token_P(kd, x, &e->k[q], 0, tb);
        acc[q] = _mm512_fmadd_ps(P, _mm512_mul_ps(_mm512_set1_ps(e->d[q]), a), acc[q]);
        acc[q] = _mm512_fmadd_ps(_mm512_set1_ps(e->n0[q]), as, acc[q]);
    }
}

/* One chunk [c0, end) of blocks against a group of 16 tokens, lane by
 * lane, into total (di_lane_combine: the first chunk's lanes as they are). */
static void chunk(const amx_block *t, const di_qa_tblock *tok, uint32_t c0, uint32_t end,
                  __m512 total[ROWS][DI_LANES])
{
    _Alignas(64) int32_t c[AHEAD + 1][ROWS][DI_QA_TOKENS];
    uint32_t order[DI_CHUNK], n = 0;
    for (uint32_t l = 0; l < DI_LANES; l++)
        for (uint32_t b = c0 + l; b < end; b += DI_LANES)
            order[n++] = b;
    /* block order[j]: tile j % DEPTH, issued at step j - DEPTH, stored at
     * step j - AHEAD into c[j % (AHEAD + 1)], its float stages at step j */
    for (uint32_t j = 0; j < DEPTH && j < n; j++)
        issue(j % DEPTH, t, tok, order[j]);
    for (uint32_t j = 0; j < AHEAD && j < n; j++)
        store(j % DEPTH, c[j % (AHEAD + 1)]);
    __m512 acc[ROWS];
    for (uint32_t q = 0; q < ROWS; q++) /* set again at each lane's first block; this is for the compiler */
        acc[q] = _mm512_setzero_ps();
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t b = order[k], l = (b - c0) % DI_LANES;
        if (k + AHEAD < n)
            store((k + AHEAD) % DEPTH, c[(k + AHEAD) % (AHEAD + 1)]);
        if (k + DEPTH < n)
            issue((k + DEPTH) % DEPTH, t, tok, order[k + DEPTH]);
        if (b - c0 < DI_LANES) /* the lane's first block adds to +0 */
            for (uint32_t q = 0; q < ROWS; q++)
                acc[q] = _mm512_setzero_ps();
        block_steps(t + b, tok + b, c[k % (AHEAD + 1)], acc);
        if (b + DI_LANES >= end) /* the lane's last block */
            for (uint32_t q = 0; q < ROWS; q++)
                total[q][l] = c0 == 0 ? acc[q] : _mm512_add_ps(total[q][l], acc[q]);
    }
    for (uint32_t l = end - c0; l < DI_LANES; l++) /* lanes no block reaches: +0 */
        for (uint32_t q = 0; q < ROWS; q++)
            total[q][l] = c0 == 0 ? _mm512_setzero_ps() : _mm512_add_ps(total[q][l], _mm512_setzero_ps());
}

static void rows_amx(const di_weight *w, uint32_t r0, uint32_t r1, const di_qa *qa, float *y, amx_block *t)
{
    const uint32_t nb = qa->nb, groups = di_qa_groups(qa->n_tokens);
    __m512 total[ROWS][DI_LANES];
    configure();
    for (uint32_t r = r0; r < r1; r += ROWS) {
        const uint32_t nr = r1 - r < ROWS ? r1 - r : ROWS;
        decode_rows(w, r, nr, nb, t);
        for (uint32_t gi = 0; gi < groups; gi++) {
            const di_qa_tblock *tok = qa->tok + (size_t)gi * nb;
            for (uint32_t c0 = 0; c0 < nb; c0 += DI_CHUNK)
                chunk(t, tok, c0, di_chunk_end(nb, c0), total);
            for (uint32_t q = 0; q < nr; q++)
                tile_row_out(total[q], DI_QA_TOKENS, y, w->n_out, gi * DI_QA_TOKENS, r + q);
        }
    }
    _tile_release();
}

/* ---- the benchmark ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: int_amx_shape K N TOKENS\n");
        return 2;
    }
    const uint32_t k = (uint32_t)strtoul(argv[1], NULL, 10), n = (uint32_t)strtoul(argv[2], NULL, 10);
    const uint32_t tokens = (uint32_t)strtoul(argv[3], NULL, 10);
    if (k == 0 || k % 256 != 0 || k / 32 > DI_CHUNK || n == 0 || tokens == 0 || tokens % 16 != 0 || tokens > 4096) {
        fprintf(stderr, "int_amx_shape: K a multiple of 256 up to %u, N positive, TOKENS a multiple of 16 up to 4096\n",
                32 * DI_CHUNK);
        return 2;
    }
    if (!__builtin_cpu_supports("avx512vnni") || syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
        fprintf(stderr, "int_amx_shape: needs AVX-512 VNNI, AMX-INT8 and Linux's grant of the tile state\n");
        return 1;
    }
    shape_inputs s;
    shape_make(DI_TYPE_Q4_K, k, n, tokens, 0, &s);
    const di_qa *qa = s.qa;
    float *y = shape_alloc(sizeof(float) * n * tokens), *y_amx = shape_alloc(sizeof(float) * n * tokens);
    float *scratch = shape_alloc(sizeof(float) * DI_MATMUL_SCRATCH(k));
    amx_block *tile = shape_alloc(sizeof(amx_block) * (k / 32));

    double best[2] = {0.0, 0.0};
    for (int call = 0; call < 2 * CALLS; call++) { /* the two kernels alternating */
        const int amx = call % 2;
        const uint64_t t0 = __rdtsc();
        if (amx)
            rows_amx(&s.w, 0, n, qa, y_amx, tile);
        else
            di_int_rows_avx512(&s.w, 0, n, qa, y, scratch);
        const double ticks = (double)(__rdtsc() - t0) / ((double)k * n * tokens / 512.0);
        if (call < 2 || ticks < best[amx])
            best[amx] = ticks;
    }
    const int same = memcmp(y, y_amx, sizeof(float) * n * tokens) == 0;
    printf("Q4_K K %u N %u tokens %u, TSC ticks per 512 multiply-adds: VNNI %.2f, AMX %.2f (%.2fx the time); "
           "checksums %.9g, %.9g: outputs %s\n",
           k, n, tokens, best[0], best[1], best[1] / best[0], shape_checksum(y, (size_t)n * tokens),
           shape_checksum(y_amx, (size_t)n * tokens), same ? "bitwise equal" : "DIFFER");
    shape_free(&s), free(y), free(y_amx), free(scratch), free(tile);
    return same ? 0 : 1;
}

#ifdef __clang__
#pragma clang attribute pop
#endif
