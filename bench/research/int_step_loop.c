/*
 * int_step_loop.c — the inner step of the integer profile's many-token
 * product (kernels/cpu/cpu_int_avx512.c, grouped_tile: lanes = 16 tokens,
 * each 4-byte weight word broadcast), alone, on data that stays in L1, for
 * four definitions of the activation block, alternating, best of 3000 runs:
 *   A  today's: one float stage per 32-weight block (int_dot.h)
 *   B  one activation scale per 256: the blocks' integer scales by
 *      vpmulld, summed in int32; the min sums by vpmaddwd; float stages once
 *      per 256
 *   C  B with a per-32 power of two (a variable shift per block)
 *   D  per 256, the integer scales applied in float: cvt(sum) * k is exact,
 *      the 8 of a super-block summed by fma in block order
 * Prints TSC ticks per 512 multiply-adds. Not the kernel: its instruction
 * mix, to tell what the arithmetic alone costs (docs/PERFORMANCE-LOG.md).
 *
 *   make research (build/research/int_step_loop)
 *   (any -march with AVX-512 F/BW/VNNI)
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

#define NB 96 /* blocks of 32 per row (3072 weights) */
#define ROWS 4
#define SB (NB / 8)

static uint32_t u[ROWS][NB][8];
static int32_t ki[ROWS][NB];
static float kf[ROWS][NB], d[ROWS][NB], n0[ROWS][NB], dsb[ROWS][SB], msb[ROWS][SB];
static int32_t mpair[ROWS][NB / 2];
static __m512i codes[NB][8];
static __m512 a[NB], asf[NB], asb[SB];
static __m512i spair[NB / 2], shift[NB];
static __m512 lanes[ROWS][32];
static float sink;

static void zero_lanes(void)
{
    for (int q = 0; q < ROWS; q++)
        for (int l = 0; l < 32; l++)
            lanes[q][l] = _mm512_setzero_ps();
}

/* The float stages of super-block s of row q (B, C, D): its scaled sum P and
 * its min sum into lane s % 32. */
static inline void superblock_terms(int q, int s, __m512 P, __m512i msum)
{
    const __m512 l = _mm512_fmadd_ps(P, _mm512_mul_ps(_mm512_set1_ps(dsb[q][s]), asb[s]), lanes[q][s % 32]);
    lanes[q][s % 32] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(_mm512_set1_ps(msb[q][s]), asb[s]), l);
}

/* Block b of row q against the 16 tokens: 8 vpdpbusd, two chains. */
static inline __m512i block_sum(int q, int b)
{
    __m512i x0 = _mm512_setzero_si512(), x1 = _mm512_setzero_si512();
    for (int i = 0; i < 8; i += 2) {
        x0 = _mm512_dpbusd_epi32(x0, _mm512_set1_epi32((int)u[q][b][i]), codes[b][i]);
        x1 = _mm512_dpbusd_epi32(x1, _mm512_set1_epi32((int)u[q][b][i + 1]), codes[b][i + 1]);
    }
    return _mm512_add_epi32(x0, x1);
}

__attribute__((noinline)) static void variant_a(void)
{
    zero_lanes();
    for (int b = 0; b < NB; b++)
        for (int q = 0; q < ROWS; q++) {
            __m512 P = _mm512_mul_ps(_mm512_cvtepi32_ps(block_sum(q, b)), _mm512_set1_ps(kf[q][b]));
            __m512 l = _mm512_fmadd_ps(P, _mm512_mul_ps(_mm512_set1_ps(d[q][b]), a[b]), lanes[q][b % 32]);
            lanes[q][b % 32] = _mm512_fmadd_ps(_mm512_set1_ps(n0[q][b]), asf[b], l);
        }
}

/* per 256: integer scale products summed in int32, the min sums by vpmaddwd
 * over pairs of blocks, float stages once per super-block; with_shift: a
 * per-32 power of two as a variable shift. Blocks outer, rows inner, so the
 * tokens' codes of a block are loaded once for the rows, as in A. */
static inline void variant_b_body(int with_shift)
{
    zero_lanes();
    for (int s = 0; s < SB; s++) {
        __m512i isum[ROWS], msum[ROWS];
        for (int q = 0; q < ROWS; q++)
            isum[q] = msum[q] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const int b = 8 * s + j;
            for (int q = 0; q < ROWS; q++) {
                __m512i p = _mm512_mullo_epi32(block_sum(q, b), _mm512_set1_epi32(ki[q][b]));
                if (with_shift)
                    p = _mm512_sllv_epi32(p, shift[b]);
                isum[q] = _mm512_add_epi32(isum[q], p);
                if (j % 2 == 0)
                    msum[q] = _mm512_add_epi32(msum[q], _mm512_madd_epi16(spair[b / 2], _mm512_set1_epi32(mpair[q][b / 2])));
            }
        }
        for (int q = 0; q < ROWS; q++)
            superblock_terms(q, s, _mm512_cvtepi32_ps(isum[q]), msum[q]);
    }
}

/* per 256, the integer scales applied in float: cvt(sum) * k is exact
 * (< 2^24), the 8 of a super-block summed by fma in block order */
__attribute__((noinline)) static void variant_d(void)
{
    zero_lanes();
    for (int s = 0; s < SB; s++) {
        __m512 fsum[ROWS];
        __m512i msum[ROWS];
        for (int q = 0; q < ROWS; q++)
            fsum[q] = _mm512_setzero_ps(), msum[q] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const int b = 8 * s + j;
            for (int q = 0; q < ROWS; q++) {
                fsum[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sum(q, b)), _mm512_set1_ps(kf[q][b]), fsum[q]);
                if (j % 2 == 0)
                    msum[q] = _mm512_add_epi32(msum[q], _mm512_madd_epi16(spair[b / 2], _mm512_set1_epi32(mpair[q][b / 2])));
            }
        }
        for (int q = 0; q < ROWS; q++)
            superblock_terms(q, s, fsum[q], msum[q]);
    }
}

__attribute__((noinline)) static void variant_b(void) { variant_b_body(0); }
__attribute__((noinline)) static void variant_c(void) { variant_b_body(1); }

int main(void)
{
    srand(1);
    for (int q = 0; q < ROWS; q++)
        for (int b = 0; b < NB; b++) {
            for (int i = 0; i < 8; i++)
                u[q][b][i] = (uint32_t)rand() & 0x0f0f0f0fu;
            ki[q][b] = rand() % 64, kf[q][b] = (float)ki[q][b];
            d[q][b] = 1e-3f, n0[q][b] = 1e-4f;
            mpair[q][b / 2] = rand() & 0x003f003f;
        }
    for (int q = 0; q < ROWS; q++)
        for (int s = 0; s < SB; s++)
            dsb[q][s] = 1e-3f, msb[q][s] = 1e-4f;
    for (int b = 0; b < NB; b++) {
        for (int i = 0; i < 8; i++)
            codes[b][i] = _mm512_set1_epi32(rand());
        a[b] = asf[b] = _mm512_set1_ps(1e-2f);
        shift[b] = _mm512_set1_epi32(rand() % 4);
        spair[b / 2] = _mm512_set1_epi32(rand() & 0x0fff0fff);
    }
    for (int s = 0; s < SB; s++)
        asb[s] = _mm512_set1_ps(1e-2f);
    void (*fn[4])(void) = {variant_a, variant_b, variant_c, variant_d};
    const char *name[4] = {"A: per 32 (today)", "B: per 256", "C: per 256, per-32 power of two", "D: per 256, k in float"};
    uint64_t best[4] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    for (int rep = 0; rep < 3000; rep++)
        for (int v = 0; v < 4; v++) {
            uint64_t t0 = __rdtsc();
            fn[v]();
            uint64_t t = __rdtsc() - t0;
            best[v] = t < best[v] ? t : best[v];
            sink += lanes[0][0][0];
        }
    const double macs = (double)NB * 32 * 16 * ROWS;
    for (int v = 0; v < 4; v++)
        printf("%-34s %6.2f ticks per 512 multiply-adds (best of 3000)\n", name[v], (double)best[v] / (macs / 512));
    printf("B / A time %.3f, C / A %.3f, D / A %.3f\n", (double)best[1] / best[0], (double)best[2] / best[0], (double)best[3] / best[0]);
    return sink == 12345.0f;
}
