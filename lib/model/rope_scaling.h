/*
 * rope_scaling.h — building a model's RoPE settings (rope_tables.h's
 * di_rope_set) from what its file asks: the frequency base, linear scaling,
 * per-frequency factors (Llama 3's rope_freqs.weight; LongRoPE's factor
 * tensors plug in the same way), YaRN, and the attention factor, all as
 * llama.cpp reads and ggml computes them, in double. The loader (model.c)
 * reads the keys and tensors; this file only computes.
 */
#ifndef DI_ROPE_SCALING_H
#define DI_ROPE_SCALING_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"
#include "kernels/common/rope_tables.h"

/* What a file asks of RoPE besides its base, shared by every set. */
typedef struct di_rope_scaling {
    /* <arch>.rope.scaling.attn_factor (default 1): multiplies cos and sin */
    double attn_factor;
    /* YaRN (rope.scaling.type "yarn": llama.cpp's ext_factor 1): the ramp
     * between interpolated and extrapolated frequencies and the magnitude
     * 1 + 0.1 ln(1 / freq_scale); 0 for the other types */
    int yarn;
    double beta_fast, beta_slow; /* YaRN's correction betas: llama.cpp's 32 and 1 */
    uint32_t n_ctx_orig;         /* YaRN: rope.scaling.original_context_length, else context_length */
    /* [n_rot / 2] divisors of the frequencies, or NULL: rope_freqs.weight
     * (Llama 3.1/3.2), or LongRoPE's rope_factors_{long,short}.weight, as
     * ggml's rope takes them (its freq_factors: theta_i / factor_i) */
    const float *freq_factors;
} di_rope_scaling;

/* The defaults: no scaling at all. */
static inline di_rope_scaling di_rope_scaling_none(void)
{
    di_rope_scaling s = {1.0, 0, 32.0, 1.0, 0, NULL};
    return s;
}

/*
 * Fills set for one RoPE setting: base > 0 (rope.freq_base), freq_scale in
 * (0, 1] for YaRN, > 0 otherwise (1 / rope.scaling.factor; 1 for none), for
 * n_rot rotated dimensions. Pair i's angle per position is, as ggml's rope
 * computes it mathematically,
 *   theta_i = base^(-2i/n_rot) / freq_factors[i]
 *   linear, none:  freq_scale * theta_i                  (pos_scale = freq_scale)
 *   YaRN:          theta_i * (freq_scale * (1 - r_i) + r_i) with ggml's ramp r_i
 *                  over its correction dimensions        (pos_scale = 1)
 * and the amplitude is attn_factor, times 1 + 0.1 ln(1 / freq_scale) for YaRN.
 * Allocates set->freq (di_rope_set_release frees it). Refuses (DI_ERR_MODEL,
 * message in err) settings whose angles would leave di_sincos's range at
 * 2^24 positions.
 */
di_status di_rope_set_build(di_rope_set *set, uint32_t n_rot, double base, double freq_scale,
                            const di_rope_scaling *scaling, char *err, size_t err_size);

void di_rope_set_release(di_rope_set *set);

#endif /* DI_ROPE_SCALING_H */
