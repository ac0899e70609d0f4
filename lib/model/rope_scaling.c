/*
 * rope_scaling.c — see rope_scaling.h. Everything here is double arithmetic
 * and the library's own logarithm (numerics.h), no libm: the frequencies
 * reach the RoPE tables, hence the logits.
 *
 * ggml computes the same quantities in float: theta_i by repeated
 * multiplication with powf(base, -2/n_rot), its corrections with logf, the
 * ramp in float. We compute the formulas' exact values rounded once (to
 * double, then the tables to float), so our angles differ from ggml's by its
 * float rounding (a few ulp of float per step of its iteration), as with the
 * unscaled tables.
 */
#include "lib/model/rope_scaling.h"

#include <stdlib.h>

#include "lib/base/errors.h"
#include "kernels/common/numerics.h"

/* Positions never reach 2^24 (the loader's context bound) and di_sincos takes
 * angles below 2^30: a frequency times pos_scale stays below 2^6. */
#define DI_ROPE_MAX_FREQ 64.0

/* floor and ceil of x clamped to [lo, hi] (small integers), without libm */
static double floor_clamped(double x, double lo, double hi)
{
    x = x < lo ? lo : x > hi ? hi : x;
    double t = (double)(int64_t)x; /* truncation toward zero */
    return t > x ? t - 1.0 : t;
}

static double ceil_clamped(double x, double lo, double hi)
{
    x = x < lo ? lo : x > hi ? hi : x;
    double t = (double)(int64_t)x;
    return t < x ? t + 1.0 : t;
}

static double ln(double x)
{
    return di_dd_log(x).hi;
}

/* ggml_rope_yarn_corr_dim: the dimension whose wavelength fits n_ctx_orig / beta
 * full turns, n_rot ln(n_ctx_orig / (2 pi beta)) / (2 ln base) */
static double yarn_corr_dim(uint32_t n_rot, uint32_t n_ctx_orig, double beta, double base)
{
    const double two_pi = 4.0 * DI_PIO2_1; /* pi rounded to double, times 2: exact */
    return (double)n_rot * ln((double)n_ctx_orig / (two_pi * beta)) / (2.0 * ln(base));
}

di_status di_rope_set_build(di_rope_set *set, uint32_t n_rot, double base, double freq_scale,
                            const di_rope_scaling *sc, char *err, size_t err_size)
{
    const uint32_t half = n_rot / 2;
    set->freq = NULL;
    set->pos_scale = sc->yarn ? 1.0 : freq_scale;
    set->amplitude = sc->attn_factor;
    /* ggml_rope_yarn_corr_dims: [max(0, floor(dim(beta_fast))), min(n_rot - 1, ceil(dim(beta_slow)))] */
    double low = 0.0, high = 0.0;
    if (sc->yarn) {
        if (!(base > 1.0))
            return di_error(err, err_size, DI_ERR_MODEL, "YaRN needs a RoPE base above 1 (base %g)", base);
        low = floor_clamped(yarn_corr_dim(n_rot, sc->n_ctx_orig, sc->beta_fast, base), 0.0, (double)n_rot);
        high = ceil_clamped(yarn_corr_dim(n_rot, sc->n_ctx_orig, sc->beta_slow, base), -1.0,
                            (double)n_rot - 1.0);
        set->amplitude = sc->attn_factor * (1.0 + 0.1 * ln(1.0 / freq_scale));
    }
    double *freq = malloc((half ? half : 1) * sizeof *freq);
    if (!freq)
        return di_error(err, err_size, DI_ERR_OUT_OF_MEMORY, "out of memory for the RoPE frequencies");
    for (uint32_t i = 0; i < half; i++) {
        double f = di_rope_inv_freq(base, i, n_rot);
        if (sc->freq_factors)
            f = f / (double)sc->freq_factors[i];
        if (sc->yarn && freq_scale != 1.0) {
            /* ggml's rope_yarn_ramp with ext_factor 1: r = 1 - clamp((i - low) / max(0.001, high - low), 0, 1);
             * theta_interp (1 - r) + theta_extrap r = theta_extrap (freq_scale + (1 - freq_scale) r) */
            const double span = high - low > 0.001 ? high - low : 0.001;
            double y = ((double)i - low) / span;
            y = y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y;
            const double r = 1.0 - y;
            f = f * (freq_scale + (1.0 - freq_scale) * r);
        }
        if (!(f * set->pos_scale < DI_ROPE_MAX_FREQ)) {
            free(freq);
            return di_error(err, err_size, DI_ERR_MODEL,
                            "RoPE frequency %u (%g radians per position) is out of range", i, f * set->pos_scale);
        }
        freq[i] = f;
    }
    set->freq = freq;
    return DI_OK;
}

void di_rope_set_release(di_rope_set *set)
{
    free(set->freq);
    set->freq = NULL;
}
