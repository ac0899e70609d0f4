/*
 * check_cuda.c — the CUDA backend, on a machine with or without a GPU.
 *
 * Without a GPU: the per-weight formulas the kernels use (dequant_blocks.h)
 * against kernels/cpu/dequant.c; the warp's index mapping and shuffle tree
 * (canon_order.h, canon_rows.h), run lane by lane on the host, against the
 * CPU's di_cpu_dot, di_cpu_sum, RMSNorm and attention; the shared math
 * compiled by nvcc as host code (build/kernels/libnumerics-nvcc.so, named by
 * DI_TEST_NUMERICS_NVCC) against the C compiler's build; and the documented
 * refusal of DI_BACKEND_CUDA when the plugin is missing or finds no device.
 * With a GPU (the plugin named by DI_TEST_CUDA_PLUGIN creates a session):
 * CPU and GPU logits digests of every generated model, position by position,
 * and the tokens sampled from them. Without one, the same comparisons run the
 * plugin's source on the CPU through tests/cuda_emu (DI_TEST_CUDA_EMU).
 */
#include <check.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/common/canon_order.h"
#include "kernels/common/canon_rows.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dequant.h"
#include "kernels/common/dequant_blocks.h"
#include "detinfer.h"
#include "kernels/common/numerics.h"
#include "test_util.h"

static uint32_t bits_of(float f)
{
    return di_bits_from_float(f);
}

/* Mixed magnitudes and signs, so that a change of order changes the bits. */
static float random_float(uint64_t *rng)
{
    const uint64_t r = tu_rand(rng);
    const float mant = (float)((double)(int64_t)r / 9.2e18);
    return ldexpf(mant, (int)(r % 17) - 8);
}

static void random_bytes(uint64_t *rng, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)tu_rand(rng);
}

/* Every supported type of weight_types.h. */
static const uint32_t all_types[] = {
#define SUPPORTED_TYPE(name, id, elems, bytes, supported, ...) DI_WT_IF_SUPPORTED(supported, DI_TYPE_##name,)
    DI_WEIGHT_TYPES(SUPPORTED_TYPE)
#undef SUPPORTED_TYPE
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* Random blocks whose binary16 scale fields are finite (a NaN scale would
 * only compare NaN payloads); the quantized bits stay fully random. */
static void random_row(uint64_t *rng, uint32_t type, uint8_t *row, uint32_t n)
{
    const uint32_t be = di_weight_block_elems(type), bb = di_weight_block_bytes(type);
    random_bytes(rng, row, (size_t)n / be * bb);
    if (type == DI_TYPE_F32 || type == DI_TYPE_F16 || type == DI_TYPE_BF16)
        return;
    for (uint32_t b = 0; b < n / be; b++) {
        uint8_t *blk = row + (size_t)b * bb;
        /* scale fields: d (and m/dmin) at 0 and 2 but in Q6_K (d at 208),
         * Q2_K (d, dmin at 80, 82) and Q3_K (d at 108) */
        uint8_t *f16s[2] = {blk, NULL};
        if (type == DI_TYPE_Q6_K)
            f16s[0] = blk + 208;
        else if (type == DI_TYPE_Q3_K)
            f16s[0] = blk + 108;
        else if (type == DI_TYPE_Q2_K)
            f16s[0] = blk + 80, f16s[1] = blk + 82;
        else if (type == DI_TYPE_Q4_1 || type == DI_TYPE_Q5_1 || type == DI_TYPE_Q4_K || type == DI_TYPE_Q5_K)
            f16s[1] = blk + 2;
        for (int k = 0; k < 2; k++)
            if (f16s[k] && ((f16s[k][1] >> 2) & 0x1f) == 0x1f)
                f16s[k][1] &= 0x83; /* exponent 31 (inf/NaN) -> 0 (subnormal) */
    }
}

/* ---- dequant_blocks.h against kernels/cpu/dequant.c ------------------------------------- */

START_TEST(test_weight_formulas_match_dequant)
{
    uint64_t rng = 42;
    const uint32_t n = 2048; /* 8 super-blocks, 64 blocks */
    uint8_t *row = malloc((size_t)n * 4);
    float *want = malloc(n * sizeof(float));
    long compared = 0;
    for (size_t t = 0; t < N_TYPES; t++) {
        const uint32_t type = all_types[t];
        ck_assert(di_weight_type_supported(type));
        for (int rep = 0; rep < 200; rep++) {
            random_row(&rng, type, row, n);
            di_dequant_row(type, row, n, want);
            for (uint32_t i = 0; i < n; i++) {
                const float got = di_qb_weight(type, row, i);
                ck_assert_msg(bits_of(got) == bits_of(want[i]),
                              "type %u weight %u: dequant_blocks %a, dequant.c %a", type, i, got, want[i]);
            }
            compared += n;
        }
    }
    ck_assert_int_eq(compared, (long)N_TYPES * 200 * n);
    free(row);
    free(want);
}
END_TEST

/* ---- the warp's order against the CPU's ----------------------------------------- */

static float warp_dot(const float *a, const float *b, uint32_t n)
{
    float lanes[DI_LANES];
    for (uint32_t l = 0; l < DI_LANES; l++)
        lanes[l] = di_lane_dot(a, b, n, l);
    return di_warp_tree_emulate(lanes);
}

static float warp_sum(const float *x, uint32_t n)
{
    float lanes[DI_LANES];
    for (uint32_t l = 0; l < DI_LANES; l++)
        lanes[l] = di_lane_sum(x, n, l);
    return di_warp_tree_emulate(lanes);
}

static const uint32_t edge_lengths[] = {0,    1,    2,    31,   32,   33,   63,   64,   65,   100,
                                        1023, 1024, 1025, 1055, 1056, 1057, 2047, 2048, 2049, 3071,
                                        3072, 3073, 4096, 5000, 8191, 8192, 8193};

START_TEST(test_warp_dot_and_sum_equal_cpu)
{
    uint64_t rng = 7;
    const uint32_t max_n = 9000;
    float *a = malloc(max_n * sizeof(float)), *b = malloc(max_n * sizeof(float));
    int order_matters = 0;
    const uint32_t n_edges = sizeof edge_lengths / sizeof edge_lengths[0];
    for (uint32_t rep = 0; rep < n_edges + 600; rep++) {
        const uint32_t n = rep < n_edges ? edge_lengths[rep] : (uint32_t)(tu_rand(&rng) % max_n);
        for (uint32_t i = 0; i < n; i++) {
            a[i] = random_float(&rng);
            b[i] = random_float(&rng);
        }
        const float cpu = di_cpu_dot(a, b, n), gpu = warp_dot(a, b, n);
        ck_assert_msg(bits_of(cpu) == bits_of(gpu), "dot n=%u: cpu %a warp %a", n, cpu, gpu);
        const float cpu_s = di_cpu_sum(a, n), gpu_s = warp_sum(a, n);
        ck_assert_msg(bits_of(cpu_s) == bits_of(gpu_s), "sum n=%u: cpu %a warp %a", n, cpu_s, gpu_s);
        /* a plain left-to-right loop usually differs: the test can see order */
        float seq = 0.0f;
        for (uint32_t i = 0; i < n; i++)
            seq = fmaf(a[i], b[i], seq);
        order_matters += bits_of(seq) != bits_of(cpu);
    }
    ck_assert_msg(order_matters > 300, "only %d of the lengths are order-sensitive", order_matters);
    /* negative zeros: a lane that only sees -0 products keeps -0 in chunk 0 */
    for (uint32_t i = 0; i < 40; i++) {
        a[i] = -0.0f;
        b[i] = 1.0f;
    }
    ck_assert_uint_eq(bits_of(di_cpu_dot(a, b, 40)), bits_of(warp_dot(a, b, 40)));
    free(a);
    free(b);
}
END_TEST

START_TEST(test_warp_row_dots_equal_cpu)
{
    uint64_t rng = 11;
    const uint32_t n = 2560; /* crosses two chunk boundaries; whole blocks of every type */
    uint8_t *row = malloc((size_t)n * 4);
    float *w = malloc(n * sizeof(float)), *x = malloc((size_t)DI_TOKEN_TILE * n * sizeof(float));
    for (size_t t = 0; t < N_TYPES; t++) {
        for (int rep = 0; rep < 6; rep++) {
            const uint32_t type = all_types[t], n_t = 1 + (uint32_t)(tu_rand(&rng) % DI_TOKEN_TILE);
            random_row(&rng, type, row, n);
            for (size_t i = 0; i < (size_t)n_t * n; i++)
                x[i] = random_float(&rng);
            di_dequant_row(type, row, n, w);
            float lanes[DI_TOKEN_TILE][DI_LANES];
            for (uint32_t l = 0; l < DI_LANES; l++) {
                float total[DI_TOKEN_TILE];
                di_lane_row_dots(type, row, n, x, n_t, l, total);
                for (uint32_t k = 0; k < DI_TOKEN_TILE; k++)
                    lanes[k][l] = total[k];
            }
            for (uint32_t k = 0; k < n_t; k++) {
                const float cpu = di_cpu_dot(w, x + (size_t)k * n, n);
                const float gpu = di_warp_tree_emulate(lanes[k]);
                ck_assert_msg(bits_of(cpu) == bits_of(gpu) || (cpu != cpu && gpu != gpu),
                              "type %u token %u of %u: cpu %a warp %a", type, k, n_t, cpu, gpu);
            }
        }
    }
    free(row);
    free(w);
    free(x);
}
END_TEST

/* RMSNorm as rmsnorm_kernel computes it. */
START_TEST(test_warp_rmsnorm_equals_cpu)
{
    uint64_t rng = 5;
    float x[3000], w[3000], cpu[3000];
    const uint32_t lengths[] = {1, 7, 64, 80, 256, 1024, 1152, 2304, 3000};
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        const uint32_t n = lengths[k];
        for (uint32_t i = 0; i < n; i++) {
            x[i] = random_float(&rng);
            w[i] = random_float(&rng);
        }
        di_cpu_rmsnorm(x, w, n, 1e-6f, cpu);
        const float scale = di_rms_scale(warp_dot(x, x, n), n, 1e-6f);
        for (uint32_t i = 0; i < n; i++)
            ck_assert_uint_eq(bits_of((x[i] * scale) * w[i]), bits_of(cpu[i]));
    }
}
END_TEST

/* One attention head as attention_kernel computes it, from the same pieces. */
static void warp_attention(const float *q, const float *k, const float *v, uint32_t kv_stride,
                           uint32_t n_keys, uint32_t hd, float scale, float softcap, float *s, float *out)
{
    for (uint32_t j = 0; j < n_keys; j++) {
        s[j] = warp_dot(q, k + (size_t)j * kv_stride, hd) * scale;
        if (softcap != 0.0f)
            s[j] = di_softcap(s[j], softcap);
    }
    float m = -INFINITY; /* the kernel's strided scan and tree give the same maximum */
    for (uint32_t j = n_keys; j-- > 0;)
        if (s[j] > m)
            m = s[j];
    for (uint32_t j = 0; j < n_keys; j++)
        s[j] = di_expf(s[j] - m);
    const float sum = warp_sum(s, n_keys);
    for (uint32_t d = 0; d < hd; d++) {
        float lanes[DI_LANES];
        for (uint32_t l = 0; l < DI_LANES; l++)
            lanes[l] = di_lane_dot_strided(s, v + d, kv_stride, n_keys, l);
        out[d] = di_warp_tree_emulate(lanes) / sum;
    }
}

START_TEST(test_warp_attention_equals_cpu)
{
    uint64_t rng = 3;
    const uint32_t hd = 80, kv_stride = 2 * hd, max_keys = 2200;
    float *k = malloc((size_t)max_keys * kv_stride * sizeof(float));
    float *v = malloc((size_t)max_keys * kv_stride * sizeof(float));
    float *s = malloc(max_keys * sizeof(float));
    float *scratch = malloc((max_keys + 2 * DI_LANES * hd) * sizeof(float));
    float q[80], cpu[80], gpu[80];
    for (size_t i = 0; i < (size_t)max_keys * kv_stride; i++) {
        k[i] = random_float(&rng);
        v[i] = random_float(&rng);
    }
    const uint32_t key_counts[] = {1, 2, 31, 33, 1023, 1024, 1025, 2200};
    for (size_t c = 0; c < sizeof key_counts / sizeof key_counts[0]; c++) {
        for (uint32_t d = 0; d < hd; d++)
            q[d] = 4.0f * random_float(&rng);
        const uint32_t n = key_counts[c];
        for (int capped = 0; capped < 2; capped++) {
            const float cap = capped ? 2.5f : 0.0f;
            di_cpu_attention_head(q, k + hd, v + hd, kv_stride, n, hd, 0.1118034f, cap, cpu, scratch);
            warp_attention(q, k + hd, v + hd, kv_stride, n, hd, 0.1118034f, cap, s, gpu);
            for (uint32_t d = 0; d < hd; d++)
                ck_assert_msg(bits_of(cpu[d]) == bits_of(gpu[d]), "keys %u dim %u cap %g: cpu %a warp %a", n,
                              d, (double)cap, cpu[d], gpu[d]);
        }
    }
    free(k);
    free(v);
    free(s);
    free(scratch);
}
END_TEST

/* ---- the shared math compiled by nvcc, against the C compiler's ---------------------- */

typedef float (*fn1)(float);
typedef float (*fn_h)(uint16_t);

static void *nvcc_numerics(void)
{
    const char *path = getenv("DI_TEST_NUMERICS_NVCC");
    if (!path || !*path || access(path, R_OK) != 0) {
        fprintf(stderr, "check_cuda: nvcc's host build of the shared numerics is not built (no nvcc?): "
                        "skipping the gcc-versus-nvcc comparison\n");
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s: %s", path, dlerror());
    return h;
}

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    ck_assert_msg(p != NULL, "libnumerics-nvcc.so lacks %s", name);
    return p;
}

static float c_expf(float x) { return di_expf(x); }
static float c_silu(float x) { return di_silu(x); }
static float c_gelu(float x) { return di_gelu_tanh(x); }
static float c_rsqrt(float x) { return di_rsqrt(x); }
static float c_logf(float x) { return di_logf(x); }
static float c_tanhf(float x) { return di_tanhf(x); }
static float c_f16(uint16_t h) { return di_f16_to_f32(h); }
static float c_bf16(uint16_t h) { return di_bf16_to_f32(h); }

START_TEST(test_nvcc_host_numerics_equal_gcc)
{
    void *h = nvcc_numerics();
    if (!h)
        return;
    fn_h nv_f16, nv_bf16;
    void *p = sym(h, "nv_f16_to_f32");
    memcpy(&nv_f16, &p, sizeof p);
    p = sym(h, "nv_bf16_to_f32");
    memcpy(&nv_bf16, &p, sizeof p);
    for (uint32_t v = 0; v < 65536; v++) {
        ck_assert_uint_eq(bits_of(nv_f16((uint16_t)v)), bits_of(c_f16((uint16_t)v)));
        ck_assert_uint_eq(bits_of(nv_bf16((uint16_t)v)), bits_of(c_bf16((uint16_t)v)));
    }

    /* One-argument functions over float32: every input with DI_TEST_FULL_NUMERICS=1
     * (about a minute per function), else every 97th bit pattern (44 million
     * inputs each; a sparser stride under the sanitizers). */
    const char *full = getenv("DI_TEST_FULL_NUMERICS");
    const char *san = getenv("DI_TEST_SANITIZE");
    const uint64_t stride = full && *full == '1' ? 1 : san && *san == '1' ? 9973 : 97;
    const char *names[] = {"nv_expf", "nv_silu", "nv_gelu_tanh", "nv_rsqrt", "nv_logf", "nv_tanhf"};
    const fn1 mine[] = {c_expf, c_silu, c_gelu, c_rsqrt, c_logf, c_tanhf};
    for (int f = 0; f < (int)(sizeof mine / sizeof mine[0]); f++) {
        fn1 theirs;
        p = sym(h, names[f]);
        memcpy(&theirs, &p, sizeof p);
        uint64_t differ = 0, tested = 0;
        for (uint64_t u = 0; u <= 0xffffffffull; u += stride, tested++) {
            const float x = di_float_from_bits((uint32_t)u);
            const float a = theirs(x), b = mine[f](x);
            if (bits_of(a) != bits_of(b) && !(a != a && b != b))
                differ++;
        }
        ck_assert_msg(differ == 0, "%s: %llu of %llu inputs differ between nvcc and gcc", names[f],
                      (unsigned long long)differ, (unsigned long long)tested);
    }

    /* Philox4x32-10 and the sampling uniform (numerics.h) */
    void (*nv_philox)(const uint32_t *, const uint32_t *, uint32_t *);
    float (*nv_uniform)(uint64_t, uint32_t);
    p = sym(h, "nv_philox4x32_10"); memcpy(&nv_philox, &p, sizeof p);
    p = sym(h, "nv_sample_uniform"); memcpy(&nv_uniform, &p, sizeof p);
    uint64_t prng = 5;
    for (int rep = 0; rep < 100000; rep++) {
        const uint64_t seed = tu_rand(&prng);
        const uint32_t pos = (uint32_t)tu_rand(&prng);
        const uint32_t ctr[4] = {pos, (uint32_t)seed, (uint32_t)(seed >> 17), (uint32_t)rep};
        const uint32_t key[2] = {(uint32_t)(seed >> 32), (uint32_t)seed ^ pos};
        uint32_t x[4], y[4];
        nv_philox(ctr, key, x);
        di_philox4x32_10(ctr, key, y);
        ck_assert(!memcmp(x, y, sizeof x));
        ck_assert_uint_eq(bits_of(nv_uniform(seed, pos)), bits_of(di_sample_uniform(seed, pos)));
    }

    /* the lane tree, RMSNorm scale, and the warp reductions */
    float (*nv_tree)(float *), (*nv_rms)(float, uint32_t, float), (*nv_dot)(const float *, const float *, uint32_t);
    float (*nv_weight)(uint32_t, const uint8_t *, uint32_t);
    void (*nv_rows)(uint32_t, const uint8_t *, uint32_t, const float *, uint32_t, float *);
    p = sym(h, "nv_lane_tree"); memcpy(&nv_tree, &p, sizeof p);
    p = sym(h, "nv_rms_scale"); memcpy(&nv_rms, &p, sizeof p);
    p = sym(h, "nv_warp_dot"); memcpy(&nv_dot, &p, sizeof p);
    p = sym(h, "nv_qb_weight"); memcpy(&nv_weight, &p, sizeof p);
    p = sym(h, "nv_warp_row_dots"); memcpy(&nv_rows, &p, sizeof p);
    uint64_t rng = 99;
    float a[3000], b[3000], lanes1[DI_LANES], lanes2[DI_LANES];
    for (int rep = 0; rep < 20000; rep++) {
        for (int l = 0; l < DI_LANES; l++)
            lanes1[l] = lanes2[l] = random_float(&rng);
        ck_assert_uint_eq(bits_of(nv_tree(lanes1)), bits_of(di_lane_tree(lanes2)));
        const float ss = fabsf(random_float(&rng)) * 1000.0f;
        const uint32_t n = 1 + (uint32_t)(tu_rand(&rng) % 8192);
        ck_assert_uint_eq(bits_of(nv_rms(ss, n, 1e-6f)), bits_of(di_rms_scale(ss, n, 1e-6f)));
    }
    for (int rep = 0; rep < 300; rep++) {
        const uint32_t n = (uint32_t)(tu_rand(&rng) % 3000);
        for (uint32_t i = 0; i < n; i++) {
            a[i] = random_float(&rng);
            b[i] = random_float(&rng);
        }
        ck_assert_uint_eq(bits_of(nv_dot(a, b, n)), bits_of(di_cpu_dot(a, b, n)));
    }
    static uint8_t row[1280 * 4];
    static float x[DI_TOKEN_TILE * 1280], w[1280];
    for (size_t t = 0; t < N_TYPES; t++) {
        const uint32_t type = all_types[t], n = 1280, n_t = 1 + (uint32_t)t % DI_TOKEN_TILE;
        random_row(&rng, type, row, n);
        for (uint32_t i = 0; i < n; i++)
            ck_assert_uint_eq(bits_of(nv_weight(type, row, i)), bits_of(di_qb_weight(type, row, i)));
        for (size_t i = 0; i < (size_t)n_t * n; i++)
            x[i] = random_float(&rng);
        float got[DI_TOKEN_TILE];
        nv_rows(type, row, n, x, n_t, got);
        di_dequant_row(type, row, n, w);
        for (uint32_t k = 0; k < n_t; k++) {
            const float want = di_cpu_dot(w, x + (size_t)k * n, n);
            ck_assert_msg(bits_of(got[k]) == bits_of(want) || (want != want && got[k] != got[k]),
                          "type %u token %u: nvcc %a cpu %a", type, k, got[k], want);
        }
    }
    dlclose(h);
}
END_TEST

/* ---- DI_BACKEND_CUDA on this machine -------------------------------------------------- */

static di_status cuda_session(const di_model *m, int profile, di_session **s, char *err, size_t n)
{
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_BACKEND, DI_BACKEND_CUDA), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_PROFILE, profile), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, 2), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, 64), DI_OK);
    *s = NULL;
    di_status st = di_session_create(m, c, s, err, n);
    di_config_free(c);
    return st;
}

START_TEST(test_cuda_plugin_missing)
{
    di_model *m = tu_tiny_model();
    setenv("DETINFER_CUDA_PLUGIN", "/nonexistent/libdetinfer-cuda.so.1", 1);
    char err[512] = "";
    di_session *s = NULL;
    di_status st = cuda_session(m, DI_PROFILE_PORTABLE, &s, err, sizeof err);
    ck_assert_msg(st == DI_ERR_BACKEND_UNAVAILABLE, "status %s: %s", di_status_name(st), err);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "DETINFER_CUDA_PLUGIN") && strstr(err, "/nonexistent/libdetinfer-cuda.so.1"),
                  "the message should name the variable and the file: %s", err);
    /* a file that is not a plugin */
    setenv("DETINFER_CUDA_PLUGIN", "libm.so.6", 1);
    st = cuda_session(m, DI_PROFILE_PORTABLE, &s, err, sizeof err);
    ck_assert_msg(st == DI_ERR_BACKEND_UNAVAILABLE && strstr(err, "not a libdetinfer CUDA plugin"),
                  "status %s: %s", di_status_name(st), err);
    unsetenv("DETINFER_CUDA_PLUGIN");
    di_model_free(m);
}
END_TEST

START_TEST(test_cuda_plugin_without_device)
{
    const char *plugin = getenv("DI_TEST_CUDA_PLUGIN");
    if (!plugin || !*plugin || access(plugin, R_OK) != 0) {
        fprintf(stderr, "check_cuda: the CUDA plugin is not built (make cuda): skipping its no-device test\n");
        return;
    }
    setenv("DETINFER_CUDA_PLUGIN", plugin, 1);
    di_model *m = tu_tiny_model();
    char err[512] = "";
    di_session *s = NULL;
    di_status st = cuda_session(m, DI_PROFILE_PORTABLE, &s, err, sizeof err);
    if (st == DI_OK) {
        fprintf(stderr, "check_cuda: a CUDA device is present (%s): the no-device refusal is not tested here\n",
                di_session_backend_info(s));
        di_session_free(s);
    } else {
        ck_assert_msg(st == DI_ERR_BACKEND_UNAVAILABLE, "status %s: %s", di_status_name(st), err);
        ck_assert_msg(strstr(err, "driver") || strstr(err, "device"), "the message should say what is missing: %s",
                      err);
        ck_assert_ptr_null(s);
    }
    unsetenv("DETINFER_CUDA_PLUGIN");
    di_model_free(m);
}
END_TEST

START_TEST(test_library_needs_no_cuda)
{
    const char *lib = getenv("DI_TEST_SHARED");
    ck_assert_msg(lib && *lib, "DI_TEST_SHARED is not set (run the suite with make check)");
    char cmd[4200], line[512];
    snprintf(cmd, sizeof cmd, "readelf -d '%s' 2>&1", lib);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int needed = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "(NEEDED)"))
            continue;
        needed++;
        ck_assert_msg(!strstr(line, "cuda") && !strstr(line, "cublas") && !strstr(line, "cudnn") &&
                          !strstr(line, "nvrtc") && !strstr(line, "libcu"),
                      "libdetinfer.so depends on a CUDA library: %s", line);
    }
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_int_gt(needed, 0);
}
END_TEST

/* ---- CPU and GPU digests of the generated models ------------------------------------- */

#define MAX_TOKENS 1100

/* A CUDA session through the plugin at `plugin`, or NULL when there is no
 * plugin file or it reports no device. */
static di_session *cuda_session_ctx_or_null(const di_model *m, const char *plugin, int ctx);

static di_session *cuda_session_or_null(const di_model *m, const char *plugin)
{
    return cuda_session_ctx_or_null(m, plugin, MAX_TOKENS + 100);
}

/* A CUDA session (the plugin at path plugin) of 2 sequences of ctx positions,
 * or NULL when there is no such plugin or no device. */
static di_session *cuda_session_ctx_or_null(const di_model *m, const char *plugin, int ctx)
{
    if (!plugin || !*plugin || access(plugin, R_OK) != 0)
        return NULL;
    setenv("DETINFER_CUDA_PLUGIN", plugin, 1);
    char err[512] = "";
    di_session *s = NULL;
    di_config *c = NULL;
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_BACKEND, DI_BACKEND_CUDA), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, 2), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, ctx), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_ALLOW_LONG_CONTEXT, 1), DI_OK); /* past 256 */
    const char *profile = getenv("DI_TEST_PROFILE"); /* as tu_session reads it */
    if (profile && !strcmp(profile, "integer"))
        ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_PROFILE, DI_PROFILE_INTEGER), DI_OK);
    di_status st = di_session_create(m, c, &s, err, sizeof err);
    di_config_free(c);
    if (st == DI_ERR_BACKEND_UNAVAILABLE)
        return NULL;
    ck_assert_msg(st == DI_OK, "CUDA session: %s: %s", di_status_name(st), err);
    return s;
}

/* The model's prompt, then random ids, n in all. */
static void model_tokens(const char *name, const di_model *m, uint32_t n, uint64_t seed, int32_t *tokens)
{
    int64_t n_vocab = 0;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab), DI_OK);
    uint32_t have = tu_read_prompt(name, tokens, n);
    while (have < n)
        tokens[have++] = (int32_t)(tu_rand(&seed) % (uint64_t)n_vocab);
}

/* Every position of tokens[0..n) on the CPU in one step and on the GPU in
 * mixed chunks, then the last n_decode again decoded one by one after the
 * prefix was copied to another sequence: equal digests and greedy tokens. */
static void compare_with_cpu(const char *what, di_model *m, di_session *gpu, const int32_t *tokens, uint32_t n,
                             uint32_t n_decode)
{
    di_session *cpu = tu_session(m, 2, 2, MAX_TOKENS + 100);
    static di_digest want[MAX_TOKENS], got[MAX_TOKENS];
    ck_assert_uint_le(n, MAX_TOKENS);
    ck_assert_uint_lt(n_decode, n);
    const uint32_t chunks[] = {1, 63, 64, 5, 900, 67};
    tu_prompt_digests(cpu, 0, tokens, n, NULL, 0, want);
    tu_prompt_digests(gpu, 0, tokens, n, chunks, 6, got);
    for (uint32_t i = 0; i < n; i++)
        tu_assert_digest_eq(&want[i], &got[i], what, (int)i);
    const uint32_t prefix = n - n_decode;
    ck_assert_int_eq(di_session_seq_copy(gpu, 0, 1, prefix), DI_OK);
    ck_assert_int_eq(di_session_seq_copy(cpu, 0, 1, prefix), DI_OK);
    for (uint32_t i = prefix; i < n; i++) {
        tu_step(gpu, 1, tokens + i, 1, 0);
        tu_step(cpu, 1, tokens + i, 1, 0);
        di_digest d = tu_last_digest(gpu, 1);
        tu_assert_digest_eq(&want[i], &d, what, (int)i);
        int32_t g_cpu = -1, g_gpu = -2;
        ck_assert_int_eq(di_session_greedy_token(cpu, 1, &g_cpu), DI_OK);
        ck_assert_int_eq(di_session_greedy_token(gpu, 1, &g_gpu), DI_OK);
        ck_assert_int_eq(g_cpu, g_gpu);
    }
    di_session_free(cpu);
}

static int32_t g_tokens[MAX_TOKENS];

/* Sampling runs on the host from the logits, whatever the backend: the GPU
 * session samples the CPU's tokens (and steps to the same logits), for
 * three parameter sets and seeds. */
#define N_SAMPLED 6
static void compare_sampled_with_cpu(const char *what, di_model *m, di_session *gpu, const int32_t *prompt,
                                     uint32_t n)
{
    di_session *cpu = tu_session(m, 2, 2, MAX_TOKENS + 100);
    di_session *both[2] = {cpu, gpu};
    for (int k = 0; k < 3; k++) {
        di_sampling_params p;
        ck_assert_int_eq(di_sampling_params_init(&p), DI_OK);
        p.temperature = 0.6f + 0.7f * (float)k;
        p.top_k = k == 1 ? 12 : 0;
        p.top_p = k == 1 ? 0.9f : 1.0f;
        p.min_p = k == 2 ? 0.02f : 0.0f;
        p.repetition_penalty = k == 2 ? 1.3f : 1.0f;
        p.seed = 0xfeed0000u + (uint64_t)k;
        int32_t tokens[2][N_SAMPLED];
        di_digest digests[2][N_SAMPLED];
        for (int b = 0; b < 2; b++) {
            ck_assert_int_eq(di_session_seq_reset(both[b], 0), DI_OK);
            ck_assert_int_eq(di_session_seq_set_sampling(both[b], 0, &p), DI_OK);
            tu_step(both[b], 0, prompt, n, 0);
            for (int d = 0; d < N_SAMPLED; d++) {
                digests[b][d] = tu_last_digest(both[b], 0);
                ck_assert_int_eq(di_session_sample_token(both[b], 0, &tokens[b][d]), DI_OK);
                tu_step(both[b], 0, &tokens[b][d], 1, 0);
            }
        }
        for (int d = 0; d < N_SAMPLED; d++) {
            tu_assert_digest_eq(&digests[0][d], &digests[1][d], what, d);
            ck_assert_msg(tokens[0][d] == tokens[1][d], "%s: parameters %d: token %d: gpu %d, cpu %d", what, k,
                          d, tokens[1][d], tokens[0][d]);
        }
    }
    di_session_free(cpu);
}

/* With a GPU: every generated model, 1100 tokens (past one 1024-key chunk). */
START_TEST(test_cpu_gpu_digests_equal)
{
    const char *name = tu_models[_i];
    di_model *m = tu_load(name);
    di_session *gpu = cuda_session_or_null(m, getenv("DI_TEST_CUDA_PLUGIN"));
    if (!gpu) {
        if (_i == 0)
            fprintf(stderr, "check_cuda: no CUDA device (or no plugin): CPU-versus-GPU digests not compared\n");
    } else {
        model_tokens(name, m, MAX_TOKENS, 1234 + (uint64_t)_i, g_tokens);
        compare_with_cpu(name, m, gpu, g_tokens, MAX_TOKENS, 10);
        compare_sampled_with_cpu(name, m, gpu, g_tokens, 40);
        di_session_free(gpu);
    }
    di_model_free(m);
}
END_TEST

/*
 * Without a GPU: the plugin's own kernels, forward pass and session code run
 * on the CPU through tests/cuda_emu (DI_TEST_CUDA_EMU names that build of the
 * plugin). The emulation executes the kernels' index math, launch geometry,
 * shuffles and barriers, not nvcc's machine code. In make check: eight models
 * covering every architecture and several types, 24 tokens each (under the
 * sanitizers one model, 12 tokens);
 * DI_TEST_EMU_FULL=1 (make check-cuda-emu): every generated model with 40 tokens, one
 * with 1100 (attention past one 1024-key chunk), and the real model.
 */
/* A session of the emulated plugin, or NULL when it is not built (said
 * once, by loop iteration 0). */
static di_session *emulated_session_or_skip(const di_model *m, int i)
{
    di_session *gpu = cuda_session_or_null(m, getenv("DI_TEST_CUDA_EMU"));
    if (!gpu && i == 0)
        fprintf(stderr, "check_cuda: the emulated plugin is not built (make cuda-emu): skipped\n");
    return gpu;
}

static const char *const emu_quick_models[] = {"odd_f32", "mha_tied_q4_1", "gqa_untied_bf16", "qwen2_q8_0",
                                               "gemma3_q8_0", "qwen3_q8_0", "phi3_q8_0",
                                               "gemma2_q8_0", "phi3_longrope_f32"};

START_TEST(test_emulated_gpu_digests_equal)
{
    const char *full = getenv("DI_TEST_EMU_FULL"), *san = getenv("DI_TEST_SANITIZE");
    const int all = full && *full == '1';
    /* Under the sanitizers one model: ASan slows the fibers' stack switches down
     * and warns about them (google/sanitizers#189); the session's CUDA path is
     * what matters there. */
    const int sanitized = san && *san == '1';
    const int n_models = all ? tu_n_models()
                         : sanitized ? 1
                                     : (int)(sizeof emu_quick_models / sizeof emu_quick_models[0]);
    if (_i >= n_models)
        return;
    const char *name = all ? tu_models[_i] : emu_quick_models[_i];
    di_model *m = tu_load(name);
    di_session *gpu = emulated_session_or_skip(m, _i);
    if (gpu) {
        ck_assert_msg(strstr(di_session_backend_info(gpu), "emulation") != NULL, "not the emulation: %s",
                      di_session_backend_info(gpu));
        const uint32_t n = all ? 40 : sanitized ? 12 : 24;
        model_tokens(name, m, n, 99 + (uint64_t)_i, g_tokens);
        compare_with_cpu(name, m, gpu, g_tokens, n, 10);
        di_session_free(gpu);
    }
    di_model_free(m);
}
END_TEST

/* The sessions of one model on one device read one copy of its file: a
 * second session adds the first one's device memory less the file's copy
 * (the same settings, the same buffers), both give
 * the CPU's digests, the second still does after the first is freed, and
 * when both are gone no device memory is left (the emulation counts it,
 * emu_allocated_bytes). */
START_TEST(test_emulated_gpu_shares_the_model)
{
    const char *emu = getenv("DI_TEST_CUDA_EMU"), *name = "gemma3_q8_0";
    di_model *m = tu_load(name);
    di_session *a = emulated_session_or_skip(m, 0);
    if (!a) {
        di_model_free(m);
        return;
    }
    void *h = dlopen(emu, RTLD_NOW | RTLD_NOLOAD);
    size_t (*allocated)(void) = h ? (size_t (*)(void))dlsym(h, "emu_allocated_bytes") : NULL;
    ck_assert_msg(allocated != NULL, "emu_allocated_bytes: %s", dlerror());
    struct stat st;
    ck_assert_int_eq(stat(tu_model_path(name, ".gguf"), &st), 0);
    const size_t one = allocated();
    di_session *b = cuda_session_or_null(m, emu);
    ck_assert_ptr_nonnull(b);
    const size_t two = allocated();
    /* the first session's bytes are the second's (the same settings) and the
     * file's copy, with its few bytes of slack */
    const size_t copy = one - (two - one);
    ck_assert_msg(two > one && copy >= (size_t)st.st_size && copy < (size_t)st.st_size + 64,
                  "the first session holds %zu bytes, the second added %zu, the file is %lld", one, two - one,
                  (long long)st.st_size);
    model_tokens(name, m, 12, 5, g_tokens);
    compare_with_cpu("shared, first session", m, a, g_tokens, 12, 4);
    di_session_free(a);
    compare_with_cpu("shared, second session after the first is freed", m, b, g_tokens, 12, 4);
    di_session_free(b);
    ck_assert_uint_eq(allocated(), 0);
    dlclose(h);
    di_model_free(m);
}
END_TEST

/* Sampled tokens through the emulated plugin: two models (a llama and a
 * gemma3) in make check, the seven quick ones with DI_TEST_EMU_FULL=1. */
START_TEST(test_emulated_gpu_samples_equal)
{
    const char *full = getenv("DI_TEST_EMU_FULL"), *san = getenv("DI_TEST_SANITIZE");
    const int all = full && *full == '1', sanitized = san && *san == '1';
    const int n_models = all ? (int)(sizeof emu_quick_models / sizeof emu_quick_models[0]) : sanitized ? 1 : 2;
    if (_i >= n_models)
        return;
    const char *name = all || _i == 0 ? emu_quick_models[_i] : "gemma3_q8_0";
    di_model *m = tu_load(name);
    di_session *gpu = emulated_session_or_skip(m, _i);
    if (gpu) {
        model_tokens(name, m, 16, 7 + (uint64_t)_i, g_tokens);
        compare_sampled_with_cpu(name, m, gpu, g_tokens, 16);
        di_session_free(gpu);
    }
    di_model_free(m);
}
END_TEST

/* Speculative decoding on the emulated GPU (prompt-lookup drafts of up to 4
 * tokens, DI_STEP_ALL_LOGITS steps, di_session_seq_accept_draft) gives the
 * CPU's one-token-per-step tokens and logits digests, greedy and sampled. */
START_TEST(test_emulated_gpu_speculation_equal)
{
    const char *name = _i == 0 ? "gemma3_q8_0" : "qwen2_q8_0";
    di_model *m = tu_load(name);
    di_session *gpu = emulated_session_or_skip(m, _i);
    if (gpu) {
        int32_t prompt[64], want[24], got[24];
        di_digest want_d[24], got_d[24];
        const uint32_t half = tu_read_prompt(name, prompt, 32);
        memcpy(prompt + half, prompt, half * sizeof *prompt); /* the text again: the lookup finds it */
        di_session *cpu = tu_session(m, 1, 2, (int)(2 * half + 24));
        di_sampling_params p;
        di_sampling_params_init(&p);
        p.temperature = _i == 0 ? 0.0f : 0.8f;
        p.seed = 3;
        ck_assert_int_eq(di_session_seq_set_sampling(cpu, 0, &p), DI_OK);
        ck_assert_int_eq(di_session_seq_set_sampling(gpu, 0, &p), DI_OK);
        tu_decode(cpu, prompt, 2 * half, 24, 0, want, want_d);
        const uint32_t accepted = tu_decode(gpu, prompt, 2 * half, 24, 4, got, got_d);
        for (uint32_t i = 0; i < 24; i++)
            ck_assert_msg(want[i] == got[i] && di_digest_equal(&want_d[i], &got_d[i]),
                          "%s: speculating on the emulated GPU differs at token %u", name, i);
        fprintf(stderr, "check_cuda: %s: speculation on the emulated GPU: %u draft tokens accepted\n", name,
                accepted);
        di_session_free(cpu);
        di_session_free(gpu);
    }
    di_model_free(m);
}
END_TEST

/* BOS + "The capital of France is" and two more tokens, as Gemma 3 tokenizes them. */
static const int32_t real_tokens[] = {2, 818, 5279, 529, 7001, 563, 9079, 236761};

/* The real model (Q4_K, Q6_K, Q5_0 and Q8_0 weights, a 262144-token vocabulary):
 * BOS + "The capital of France is" and two decode steps, with DI_TEST_EMU_FULL=1. */
START_TEST(test_emulated_gpu_real_model)
{
    const char *full = getenv("DI_TEST_EMU_FULL"), *path = getenv("DI_TEST_REAL_MODEL");
    if (!full || *full != '1')
        return;
    if (!path || !*path) {
        fprintf(stderr, "check_cuda: no real model: its emulated GPU comparison is skipped\n");
        return;
    }
    char err[512] = "";
    di_model *m = NULL;
    ck_assert_msg(di_model_load(path, &m, err, sizeof err) == DI_OK, "%s: %s", path, err);
    di_session *gpu = cuda_session_or_null(m, getenv("DI_TEST_CUDA_EMU"));
    ck_assert_msg(gpu != NULL, "DI_TEST_EMU_FULL=1 needs DI_TEST_CUDA_EMU (make check-cuda-emu)");
    compare_with_cpu("real model", m, gpu, real_tokens, 8, 2);
    di_session_free(gpu);
    di_model_free(m);
}
END_TEST

/* The integer profile through the emulated plugin: its quantization kernel
 * and its dp4a product (tests/cuda_emu emulates dp4a from the PTX ISA's
 * description) give the CPU's integer-profile digests, a model of every
 * quantized type the generated models have (and one F32 model, whose
 * products stay float); with DI_TEST_EMU_FULL=1 also the real model (Q4_K,
 * Q6_K, Q5_0, Q8_0). */
static const char *const emu_integer_models[] = {"mha_tied_q4_0", "mha_tied_q4_1", "mha_tied_q5_0", "mha_tied_q5_1",
                                                 "mha_tied_q8_0", "kq_q2_k",       "kq_q3_k",       "kq_iq4_nl",
                                                 "kq_iq4_xs",     "gemma3_f32"};
#define N_EMU_INTEGER ((int)(sizeof emu_integer_models / sizeof emu_integer_models[0]))

START_TEST(test_emulated_gpu_integer_digests_equal)
{
    const char *full = getenv("DI_TEST_EMU_FULL"), *san = getenv("DI_TEST_SANITIZE"),
               *real = getenv("DI_TEST_REAL_MODEL");
    const int all = full && *full == '1', sanitized = san && *san == '1';
    if ((sanitized && _i > 0) || (_i == N_EMU_INTEGER && (!all || !real || !*real)))
        return;
    setenv("DI_TEST_PROFILE", "integer", 1); /* both sessions (tu_session, cuda_session_or_null) */
    char err[512] = "";
    di_model *m = NULL;
    const char *name = _i < N_EMU_INTEGER ? emu_integer_models[_i] : "real model";
    if (_i < N_EMU_INTEGER)
        m = tu_load(name);
    else
        ck_assert_msg(di_model_load(real, &m, err, sizeof err) == DI_OK, "%s: %s", real, err);
    di_session *gpu = emulated_session_or_skip(m, _i);
    if (gpu) {
        ck_assert_msg(strstr(di_session_backend_info(gpu), "profile=integer") != NULL, "not the integer profile: %s",
                      di_session_backend_info(gpu));
        if (_i < N_EMU_INTEGER) {
            const uint32_t n = sanitized ? 12 : 24;
            model_tokens(name, m, n, 31 + (uint64_t)_i, g_tokens);
            compare_with_cpu(name, m, gpu, g_tokens, n, 10);
        } else {
            compare_with_cpu(name, m, gpu, real_tokens, 8, 2);
        }
        di_session_free(gpu);
    }
    di_model_free(m);
    unsetenv("DI_TEST_PROFILE");
}
END_TEST

/* Phi-3 LongRoPE: a session whose context per sequence is within the model's
 * original context (16) takes the short factors, in the plugin as on the CPU
 * (check_rope.c checks the CPU's against the float64 reference); every other
 * session of this suite holds more positions and takes the long ones. */
START_TEST(test_emulated_gpu_longrope_short_factors)
{
    enum { N = 16 };
    di_model *m = tu_load("phi3_longrope_f32");
    di_session *gpu = cuda_session_ctx_or_null(m, getenv("DI_TEST_CUDA_EMU"), N);
    if (!gpu) {
        fprintf(stderr, "check_cuda: the emulated plugin is not built (make cuda-emu): LongRoPE's short factors skipped\n");
        di_model_free(m);
        return;
    }
    int32_t tokens[N];
    ck_assert_uint_eq(tu_read_prompt("phi3_longrope_f32", tokens, N), N);
    di_session *cpu = tu_session(m, 1, 1, N), *cpu_long = tu_session(m, 1, 1, N + 1);
    di_digest want[N], got[N], long_factors[N];
    tu_prompt_digests(cpu, 0, tokens, N, NULL, 0, want);
    tu_prompt_digests(gpu, 0, tokens, N, NULL, 0, got);
    tu_prompt_digests(cpu_long, 0, tokens, N, NULL, 0, long_factors);
    for (int i = 0; i < N; i++)
        tu_assert_digest_eq(&want[i], &got[i], "phi3_longrope_f32, context 16", i);
    ck_assert_msg(memcmp(&want[N - 1], &long_factors[N - 1], sizeof want[0]) != 0,
                  "the short and the long factors gave the same logits");
    di_session_free(cpu_long);
    di_session_free(cpu);
    di_session_free(gpu);
    di_model_free(m);
}
END_TEST

START_TEST(test_emulated_gpu_long_context)
{
    const char *full = getenv("DI_TEST_EMU_FULL");
    if (!full || *full != '1')
        return;
    di_model *m = tu_load("odd_f32");
    di_session *gpu = cuda_session_or_null(m, getenv("DI_TEST_CUDA_EMU"));
    ck_assert_msg(gpu != NULL, "DI_TEST_EMU_FULL=1 needs DI_TEST_CUDA_EMU (make check-cuda-emu)");
    /* the device caches are reserved at creation: 2 sequences x MAX_TOKENS + 100
     * positions x keys and values of every layer */
    int64_t n_layer = 0, n_head_kv = 0, n_embd = 0, n_head = 0;
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_LAYER, &n_layer), DI_OK);
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_HEAD_KV, &n_head_kv), DI_OK);
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_EMBD, &n_embd), DI_OK);
    ck_assert_int_eq(di_model_get_int(m, DI_MODEL_N_HEAD, &n_head), DI_OK);
    uint64_t kv_bytes = 0;
    ck_assert_int_eq(di_session_kv_bytes(gpu, &kv_bytes), DI_OK);
    ck_assert_uint_eq(kv_bytes, 2ull * 2 * (MAX_TOKENS + 100) * (uint64_t)(n_layer * n_head_kv * (n_embd / n_head)) *
                                    sizeof(float));
    model_tokens("odd_f32", m, MAX_TOKENS, 5, g_tokens);
    compare_with_cpu("odd_f32", m, gpu, g_tokens, MAX_TOKENS, 10);
    di_session_free(gpu);
    di_model_free(m);
}
END_TEST

Suite *cuda_suite(void)
{
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("shared order and math");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_weight_formulas_match_dequant);
    tcase_add_test(tc, test_warp_dot_and_sum_equal_cpu);
    tcase_add_test(tc, test_warp_row_dots_equal_cpu);
    tcase_add_test(tc, test_warp_rmsnorm_equals_cpu);
    tcase_add_test(tc, test_warp_attention_equals_cpu);
    tcase_add_test(tc, test_nvcc_host_numerics_equal_gcc);
    suite_add_tcase(s, tc);

    tc = tcase_create("backend selection");
    tcase_add_test(tc, test_cuda_plugin_missing);
    tcase_add_test(tc, test_cuda_plugin_without_device);
    tcase_add_test(tc, test_library_needs_no_cuda);
    suite_add_tcase(s, tc);

    tc = tcase_create("gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_cpu_gpu_digests_equal, 0, tu_n_models());
    suite_add_tcase(s, tc);

    tc = tcase_create("emulated gpu");
    tcase_set_timeout(tc, 1800);
    tcase_add_loop_test(tc, test_emulated_gpu_digests_equal, 0, tu_n_models());
    tcase_add_test(tc, test_emulated_gpu_shares_the_model);
    tcase_add_loop_test(tc, test_emulated_gpu_samples_equal, 0,
                        (int)(sizeof emu_quick_models / sizeof emu_quick_models[0]));
    tcase_add_test(tc, test_emulated_gpu_longrope_short_factors);
    tcase_add_test(tc, test_emulated_gpu_long_context);
    tcase_add_test(tc, test_emulated_gpu_real_model);
    tcase_add_loop_test(tc, test_emulated_gpu_speculation_equal, 0, 2);
    tcase_add_loop_test(tc, test_emulated_gpu_integer_digests_equal, 0, N_EMU_INTEGER + 1);
    suite_add_tcase(s, tc);
    return s;
}
