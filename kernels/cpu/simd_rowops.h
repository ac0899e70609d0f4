/*
 * simd_rowops.h — the row and elementwise operations of a SIMD path:
 * RMSNorm, RoPE, soft-capping, the gated activations, addition and argmax
 * (attention is simd_attention.h).
 *
 * Not a normal header: it defines static functions over the vector words of
 * the path that includes it (simd_path.h says how).
 */

/* dst[i] = a[i] + b[i] */
static void simd_add(float *dst, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL)
        vf_store(dst + i, vf_add(vf_load(a + i), vf_load(b + i)));
    for (; i < n; i++)
        dst[i] = a[i] + b[i];
}

/* ---- row operations ---------------------------------------------------------------- */

static void simd_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out)
{
    const float s = di_rms_scale(simd_dot(x, x, n), n, eps);
    const vf scale = vf_set1(s);
    uint32_t i = 0;
    for (; i + VL <= n; i += VL)
        vf_store(out + i, vf_mul(vf_mul(vf_load(x + i), scale), vf_load(w + i)));
    for (; i < n; i++)
        out[i] = (x[i] * s) * w[i];
}

static void simd_rope(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot,
                      di_rope_pairing pairing, const float *cos_t, const float *sin_t)
{
    if (pairing != DI_ROPE_NEOX) { /* interleaved pairs: a negligible cost, left scalar */
        di_cpu_rope(v, n_heads, head_dim, n_rot, pairing, cos_t, sin_t);
        return;
    }
    const uint32_t half = n_rot / 2;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * head_dim;
        uint32_t i = 0;
        for (; i + VL <= half; i += VL) {
            const vf x0 = vf_load(x + i), x1 = vf_load(x + i + half);
            const vf c = vf_load(cos_t + i), s = vf_load(sin_t + i);
            vf_store(x + i, vf_sub(vf_mul(x0, c), vf_mul(x1, s)));
            vf_store(x + i + half, vf_add(vf_mul(x0, s), vf_mul(x1, c)));
        }
        for (; i < half; i++) {
            const float x0 = x[i], x1 = x[i + half];
            x[i] = x0 * cos_t[i] - x1 * sin_t[i];
            x[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
        }
    }
}

/* x[i] = di_softcap(x[i], cap) */
static void simd_softcap(float *x, size_t n, float cap)
{
    const vf c = vf_set1(cap);
    size_t i = 0;
    for (; i + VL <= n; i += VL)
        vf_store(x + i, vf_mul(c, vf_tanhf(vf_div(vf_load(x + i), c))));
    for (; i < n; i++)
        x[i] = di_softcap(x[i], cap);
}

/* ---- elementwise -------------------------------------------------------------------- */

static void simd_silu_mul(float *gate, const float *up, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const vf x = vf_load(gate + i);
        const vf act = vf_div(x, vf_add(vf_set1(1.0f), vf_expf(vf_neg(x))));
        vf_store(gate + i, vf_mul(act, vf_load(up + i)));
    }
    for (; i < n; i++)
        gate[i] = di_silu(gate[i]) * up[i];
}

static void simd_gelu_mul(float *gate, const float *up, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const vf x = vf_load(gate + i);
        const vf x3 = vf_mul(vf_mul(x, x), x);
        const vf u = vf_mul(vf_set1(1.5957691216057308f), vf_add(x, vf_mul(vf_set1(0.044715f), x3)));
        const vf act = vf_div(x, vf_add(vf_set1(1.0f), vf_expf(vf_neg(u))));
        vf_store(gate + i, vf_mul(act, vf_load(up + i)));
    }
    for (; i < n; i++)
        gate[i] = di_gelu_tanh(gate[i]) * up[i];
}

/* Two passes: the largest non-NaN value, then its first index. Equal values
 * (+0 and -0 too) resolve to the lowest index, as in the scalar loop. */
static uint32_t simd_argmax(const float *x, uint32_t n)
{
    vf mv = vf_set1(-INFINITY);
    uint32_t i = 0;
    for (; i + VL <= n; i += VL)
        mv = vf_max_ordered(mv, vf_load(x + i));
    float m = vf_hmax(mv);
    for (; i < n; i++)
        if (x[i] > m)
            m = x[i];
    for (i = 0; i + VL <= n; i += VL) {
        const int l = vf_first_eq(x + i, m);
        if (l >= 0)
            return i + (uint32_t)l;
    }
    for (; i < n; i++)
        if (x[i] == m)
            return i;
    return 0; /* every value is NaN */
}
