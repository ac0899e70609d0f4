/*
 * check_rope.c — no libm value reaches a logit (docs/DETERMINISM.md, "RoPE
 * tables" and "The host's environment"):
 *   - di_rope_inv_freq and di_sincos (kernels/common/numerics.h) against mpmath at 256
 *     bits (tests/tools/rope_reference.py): inverse frequencies correctly
 *     rounded, sin/cos at most 1 ulp from the correctly rounded binary64 (an error below 1 ulp) and correctly rounded once
 *     rounded to the float tables;
 *   - the tables they give are the tables glibc's pow/sin/cos gave before
 *     (so no digest changed), for every test model and the real model at
 *     their whole training context, and for every freq_base in use at
 *     positions up to 2^20;
 *   - the built library imports no libm function but the correctly rounded
 *     ones the contract allows, and contains no x87 instruction.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/model/model.h"
#include "kernels/common/numerics.h"
#include "test_util.h"

static double ulp_distance(double a, double b)
{
    if (a == b)
        return 0.0;
    const double u = nextafter(fabs(b), INFINITY) - fabs(b);
    return fabs(a - b) / u;
}

START_TEST(test_rope_against_mpmath)
{
    FILE *f = fopen(tu_model_path("rope_reference", ".txt"), "r");
    ck_assert_msg(f != NULL, "no rope_reference.txt (make check writes it with tests/tools/rope_reference.py)");
    char kind[4];
    unsigned n_freq = 0, n_angles = 0;
    double worst = 0.0;
    while (fscanf(f, "%3s", kind) == 1) {
        if (!strcmp(kind, "F")) {
            double base, want;
            unsigned i, n_rot;
            ck_assert_int_eq(fscanf(f, "%la %u %u %la", &base, &i, &n_rot, &want), 4);
            const double got = di_rope_inv_freq(base, i, n_rot);
            ck_assert_msg(got == want, "base %g pair %u of %u: %a, correctly rounded %a", base, i, n_rot, got,
                          want);
            n_freq++;
        } else {
            double theta, s64, c64, s32, c32, s, c;
            ck_assert_int_eq(fscanf(f, "%la %la %la %la %la", &theta, &s64, &c64, &s32, &c32), 5);
            di_sincos(theta, &s, &c);
            const double e = fmax(ulp_distance(s, s64), ulp_distance(c, c64));
            worst = fmax(worst, e);
            ck_assert_msg(e <= 1.0, "sincos(%a): %a %a, want %a %a (%.2f ulp)", theta, s, c, s64, c64, e);
            ck_assert_msg((float)s == (float)s32 && (float)c == (float)c32,
                          "sincos(%a) as float: %a %a, correctly rounded %a %a", theta, (double)(float)s,
                          (double)(float)c, s32, c32);
            n_angles++;
        }
    }
    fclose(f);
    ck_assert_uint_gt(n_freq, 800);
    ck_assert_uint_gt(n_angles, 1000);
    printf("rope: %u inverse frequencies correctly rounded, %u angles (largest error %.3f ulp in binary64, "
           "binary32 correctly rounded)\n", n_freq, n_angles, worst);
}
END_TEST

/* Entries of the float tables of (base, scale, n_rot) for positions [0, n_pos)
 * (every `stride`-th past 4096) that differ between libm and numerics.h. */
static unsigned long table_differences(double base, double scale, uint32_t n_rot, uint32_t n_pos,
                                       uint32_t stride, unsigned long *n_entries)
{
    unsigned long differ = 0;
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        const double old_freq = pow(base, -2.0 * (double)i / (double)n_rot);
        const double new_freq = di_rope_inv_freq(base, i, n_rot);
        for (uint32_t p = 0; p < n_pos; p = p < 4096 ? p + 1 : p + stride) {
            const double t_old = (double)p * scale * old_freq, t_new = (double)p * scale * new_freq;
            double s, c;
            di_sincos(t_new, &s, &c);
            differ += (float)cos(t_old) != (float)c;
            differ += (float)sin(t_old) != (float)s;
            *n_entries += 2;
        }
    }
    return differ;
}

/* Whether a set is the plain base^(-2i/n_rot) with a position scale and no
 * amplitude (every set before per-frequency factors and YaRN existed). */
static int plain_set(const di_model *m, uint32_t set)
{
    const di_rope_set *r = &m->rope[set];
    if (r->amplitude != 1.0)
        return 0;
    for (uint32_t i = 0; i < m->n_rot / 2; i++)
        if (r->freq[i] != di_rope_inv_freq(m->rope_base[set], i, m->n_rot))
            return 0;
    return 1;
}

/* The tables the backends use (di_rope_fill_tables) of a plain set equal the
 * libm formula's; a scaled set (rope_scaling.h, checked by the reference
 * suite) is skipped. */
static void model_tables_unchanged(const di_model *m, const char *name)
{
    for (uint32_t set = 0; set < m->n_rope_sets; set++) {
        if (!plain_set(m, set))
            continue;
        unsigned long n = 0;
        const unsigned long d = table_differences(m->rope_base[set], m->rope[set].pos_scale, m->n_rot,
                                                  m->n_ctx_train, 1, &n);
        ck_assert_msg(d == 0, "%s, RoPE set %u: %lu of %lu table entries differ from libm's", name, set, d, n);
        /* and the filled tables are that formula's numerics.h values */
        const uint32_t half = m->n_rot / 2, n_pos = 64;
        float *c = malloc((size_t)n_pos * half * sizeof *c), *s = malloc((size_t)n_pos * half * sizeof *s);
        ck_assert(c && s);
        di_rope_fill_tables(m->n_rot, &m->rope[set], 0, n_pos, c, s);
        for (uint32_t p = 0; p < n_pos; p++)
            for (uint32_t i = 0; i < half; i++) {
                double sn, cs;
                di_sincos((double)p * m->rope[set].pos_scale * di_rope_inv_freq(m->rope_base[set], i, m->n_rot),
                          &sn, &cs);
                ck_assert_msg(c[p * half + i] == (float)cs && s[p * half + i] == (float)sn,
                              "%s, set %u, position %u, pair %u", name, set, p, i);
            }
        free(c);
        free(s);
    }
}

/* The tables equal glibc's: the digests recorded before the change stand. */
START_TEST(test_rope_tables_equal_glibc)
{
#ifndef __GLIBC__
    printf("rope: not glibc: the comparison with the libm the digests were first made with is skipped\n");
#else
    for (int i = 0; i < tu_n_models(); i++) {
        di_model *m = tu_load(tu_models[i]);
        model_tables_unchanged(m, tu_models[i]);
        di_model_free(m);
    }
    const char *real = getenv("DI_TEST_REAL_MODEL");
    if (real && *real) {
        di_model *m = NULL;
        char err[256];
        ck_assert_int_eq(di_model_load(real, &m, err, sizeof err), DI_OK);
        model_tables_unchanged(m, "the real model");
        printf("rope: the real model's tables (%u positions, %u sets) equal libm's\n", m->n_ctx_train,
               m->n_rope_sets);
        di_model_free(m);
    }
    static const double bases[] = {10000.0, 500000.0, 1000000.0, 10000000.0};
    static const uint32_t n_rots[] = {64, 128, 256};
    for (size_t b = 0; b < 4; b++)
        for (size_t r = 0; r < 3; r++) {
            unsigned long n = 0;
            const unsigned long d = table_differences(bases[b], 1.0, n_rots[r], (1u << 20) + 1, 251, &n);
            ck_assert_msg(d == 0, "base %g, n_rot %u: %lu of %lu entries differ from libm's", bases[b],
                          n_rots[r], d, n);
        }
#endif
}
END_TEST

/* Relative difference, for the known answers below. */
static double rel(double got, double want)
{
    return fabs(got - want) / fabs(want);
}

/* The scaled sets of the generated models (tests/tools/make_test_models.py)
 * against their values worked out by hand from llama.cpp's definitions
 * (docs/MODELS.md, "RoPE scaling"), with libm, to a relative 1e-15:
 *   qwen2_yarn_f32: YaRN factor 4, head size 16, base 1e4, original context 256:
 *     correction dimensions d(32) = 16 ln(256 / 64 pi) / (2 ln 1e4) = 0.21 -> 0 and
 *     d(1) = 3.22 -> 4, so r_i = 1 - i/4 (0 from i = 4): f_i = 1e4^(-i/8) (1/4 + 3/4 r_i),
 *     amplitude 1 + 0.1 ln 4, positions unscaled;
 *   llama3_rope_f32: f_i = 1e4^(-i/8) / rope_freqs[i] (1, 1, 1, 4.781834, 8, 8, 8, 8 as
 *     float32), amplitude 0.75 (attn_factor), positions unscaled. */
START_TEST(test_rope_scaled_sets)
{
    di_model *m = tu_load("qwen2_yarn_f32");
    ck_assert_uint_eq(m->n_rot, 16);
    ck_assert_uint_eq(m->n_rope_sets, 1);
    ck_assert(m->rope[0].pos_scale == 1.0);
    ck_assert_msg(rel(m->rope[0].amplitude, 1.0 + 0.1 * log(4.0)) < 1e-15, "YaRN amplitude %.17g",
                  m->rope[0].amplitude);
    for (int i = 0; i < 8; i++) {
        const double r = i < 4 ? 1.0 - i / 4.0 : 0.0;
        const double want = pow(1e4, -i / 8.0) * (0.25 + 0.75 * r);
        ck_assert_msg(rel(m->rope[0].freq[i], want) < 1e-15, "YaRN pair %d: %.17g, want %.17g", i,
                      m->rope[0].freq[i], want);
    }
    di_model_free(m);

    static const float factors[8] = {1, 1, 1, 4.781833995199632f, 8, 8, 8, 8};
    m = tu_load("llama3_rope_f32");
    ck_assert(m->rope[0].pos_scale == 1.0 && m->rope[0].amplitude == 0.75);
    for (int i = 0; i < 8; i++) {
        const double want = pow(1e4, -i / 8.0) / (double)factors[i];
        ck_assert_msg(rel(m->rope[0].freq[i], want) < 1e-15, "Llama 3 pair %d: %.17g, want %.17g", i,
                      m->rope[0].freq[i], want);
    }
    /* and the tables: cos and sin times the amplitude */
    float c[4 * 8], sn[4 * 8];
    di_rope_fill_tables(m->n_rot, &m->rope[0], 0, 4, c, sn);
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 8; i++) {
            const double a = p * pow(1e4, -i / 8.0) / (double)factors[i];
            ck_assert_msg(fabs(c[p * 8 + i] - 0.75 * cos(a)) < 1e-7 && fabs(sn[p * 8 + i] - 0.75 * sin(a)) < 1e-7,
                          "Llama 3 table position %d pair %d", p, i);
        }
    di_model_free(m);
}
END_TEST

/* LongRoPE (phi3_longrope_f32: original context 16, context 256): a session
 * whose sequences hold at most 16 positions turns with rope_factors_short.weight,
 * one with more with rope_factors_long.weight, as llama.cpp's get_rope_factors
 * chooses by its context per sequence (the number of sequences does not
 * matter: each holds ctx positions). Every session's logits match the float64
 * reference of its choice (reference.py --ctx: phi3_longrope_f32_ctx16.ref,
 * the prompt's first 16 tokens, short; phi3_longrope_f32.ref long) within 2e-6
 * (normwise, relative: float rounding, about 1e-6 here because the attention
 * factor sqrt(2) doubles the scores; a wrong choice of factors is off by more
 * than 1e-3). At the 16th position the short and long logits differ, and
 * sessions on the same side give the same bits. */
#define LONGROPE_TOL 2e-6

static double relative_error(di_session *s, const tu_ref *ref, uint32_t t)
{
    const float *row;
    ck_assert_int_eq(di_session_logits_at(s, 0, t, &row, NULL), DI_OK);
    const double *want = ref->logits + (size_t)t * ref->n_vocab;
    double max_ref = 0.0, max_err = 0.0;
    for (uint32_t i = 0; i < ref->n_vocab; i++) {
        max_ref = fmax(max_ref, fabs(want[i]));
        max_err = fmax(max_err, fabs((double)row[i] - want[i]));
    }
    return max_err / max_ref;
}

START_TEST(test_longrope_factors_follow_context)
{
    static const struct {
        int ctx, n_seq;
        const char *ref;
    } sessions[] = {
        {16, 1, "phi3_longrope_f32_ctx16"}, {16, 4, "phi3_longrope_f32_ctx16"},
        {17, 1, "phi3_longrope_f32"},       {0, 1, "phi3_longrope_f32"}, /* 0: the training context, 256 */
    };
    enum { N = sizeof sessions / sizeof sessions[0], AT = 15 /* the last position of a short session */ };
    di_model *m = tu_load("phi3_longrope_f32");
    int64_t n_vocab;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    float *at[N];
    for (int k = 0; k < N; k++) {
        tu_ref *ref = tu_read_ref(sessions[k].ref);
        /* as much of the reference's prompt as the session holds */
        const uint32_t n = sessions[k].ctx && (uint32_t)sessions[k].ctx < ref->n_tokens ? (uint32_t)sessions[k].ctx
                                                                                          : ref->n_tokens;
        ck_assert_uint_gt(n, AT);
        di_session *s = tu_session(m, 1, sessions[k].n_seq, sessions[k].ctx);
        tu_step(s, 0, ref->tokens, n, DI_STEP_ALL_LOGITS);
        double worst = 0.0;
        for (uint32_t t = 0; t < n; t++)
            worst = fmax(worst, relative_error(s, ref, t));
        ck_assert_msg(worst <= LONGROPE_TOL, "context %d: relative error %.3g against %s", sessions[k].ctx, worst,
                      sessions[k].ref);
        printf("LongRoPE context %3d x %d sequences: %.3e from %s (%u positions)\n", sessions[k].ctx,
               sessions[k].n_seq, worst, sessions[k].ref, n);
        const float *row;
        ck_assert_int_eq(di_session_logits_at(s, 0, AT, &row, NULL), DI_OK);
        at[k] = malloc((size_t)n_vocab * sizeof *at[k]);
        ck_assert_ptr_nonnull(at[k]);
        memcpy(at[k], row, (size_t)n_vocab * sizeof *row);
        di_session_free(s);
        tu_free_ref(ref);
    }
    ck_assert(memcmp(at[0], at[1], (size_t)n_vocab * sizeof(float)) == 0);
    ck_assert(memcmp(at[2], at[3], (size_t)n_vocab * sizeof(float)) == 0);
    double diff = 0.0;
    for (int64_t i = 0; i < n_vocab; i++)
        diff = fmax(diff, fabs((double)at[0][i] - (double)at[2][i]));
    ck_assert_msg(diff > 1e-3, "short and long factors give logits %.3g apart", diff);
    for (int k = 0; k < N; k++)
        free(at[k]);
    di_model_free(m);
}
END_TEST

/* The library imports from libm only the correctly rounded functions the
 * contract allows (fmaf, sqrtf; rintf at -O0, which follows the pinned
 * rounding mode), and has no x87 code, whose control word is not pinned. */
START_TEST(test_no_libm_imports)
{
    const char *lib = getenv("DI_TEST_SHARED");
    ck_assert_msg(lib && *lib, "DI_TEST_SHARED is not set (run the suite with make check)");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "t=$(mktemp) && nm -D --defined-only \"$(cc -print-file-name=libm.so.6)\" | awk '{print $3}' | "
             "sed 's/@.*//' | sort -u > \"$t\" && nm -D --undefined-only '%s' | awk '{print $2}' | "
             "sed 's/@.*//' | sort -u | comm -12 - \"$t\"; rm -f \"$t\"",
             lib);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char name[256];
    int n = 0;
    while (fscanf(p, "%255s", name) == 1) {
        ck_assert_msg(!strcmp(name, "fmaf") || !strcmp(name, "sqrtf") || !strcmp(name, "rintf"),
                      "the library imports %s from libm", name);
        n++;
    }
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_int_gt(n, 0); /* fmaf at least: the listing works */
#if defined(__x86_64__) || defined(__i386__)
    snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s' | grep -cP '^\\s+[0-9a-f]+:\\s+f[a-z0-9]*\\s'",
             lib);
    p = popen(cmd, "r");
    int x87 = -1;
    ck_assert_int_eq(fscanf(p, "%d", &x87), 1);
    pclose(p);
    ck_assert_msg(x87 == 0, "the library has %d x87 instructions", x87);
#endif
}
END_TEST

Suite *rope_suite(void)
{
    Suite *s = suite_create("rope");
    TCase *tc = tcase_create("rope");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_rope_against_mpmath);
    tcase_add_test(tc, test_rope_tables_equal_glibc);
    tcase_add_test(tc, test_rope_scaled_sets);
    tcase_add_test(tc, test_longrope_factors_follow_context);
    tcase_add_test(tc, test_no_libm_imports);
    suite_add_tcase(s, tc);
    return s;
}
