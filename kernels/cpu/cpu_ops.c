/*
 * cpu_ops.c — which CPU kernel path a session runs: what the CPU and the OS
 * support (CPUID and XGETBV, read here), what the configuration asks for, and
 * the DETINFER_CPU_PATH variable.
 */
#include "kernels/cpu/cpu_ops.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/errors.h"

#ifdef DI_HAVE_X86_PATHS
#include <cpuid.h>
#endif

uint32_t di_cpu_test_hidden_features;

/* XCR0: which register state the OS saves on a context switch. */
static uint64_t read_xcr0(void)
{
#ifdef DI_HAVE_X86_PATHS
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
#else
    return 0;
#endif
}

uint32_t di_cpu_features(void)
{
    uint32_t f = 0;
#ifdef DI_HAVE_X86_PATHS
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    if (c & (1u << 12)) f |= DI_CPU_FMA;
    if (c & (1u << 28)) f |= DI_CPU_AVX;
    if (c & (1u << 29)) f |= DI_CPU_F16C;
    if (c & (1u << 27)) { /* OSXSAVE: XGETBV may be used */
        const uint64_t xcr0 = read_xcr0();
        if ((xcr0 & 0x6) == 0x6) f |= DI_CPU_OS_AVX;        /* XMM and YMM state */
        if ((xcr0 & 0xe6) == 0xe6) f |= DI_CPU_OS_AVX512;   /* and opmask, ZMM state */
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        if (b & (1u << 5)) f |= DI_CPU_AVX2;
        if (b & (1u << 16)) f |= DI_CPU_AVX512F;
        if (b & (1u << 17)) f |= DI_CPU_AVX512DQ;
        if (b & (1u << 30)) f |= DI_CPU_AVX512BW;
        if (b & (1u << 31)) f |= DI_CPU_AVX512VL;
        if (c & (1u << 11)) f |= DI_CPU_AVX512VNNI;
    }
#endif
    return f & ~di_cpu_test_hidden_features;
}

/* What each path's instructions need (the target pragmas of cpu_avx2.c and
 * cpu_avx512.c), the OS's register state included. */
static const uint32_t path_needs[] = {
    [DI_CPU_PATH_SCALAR] = 0,
    [DI_CPU_PATH_AVX2] = DI_CPU_NEEDS_AVX2,
    [DI_CPU_PATH_AVX512] = DI_CPU_NEEDS_AVX512,
};

static int cpu_has(di_cpu_path path)
{
    if (path == DI_CPU_PATH_SCALAR)
        return 1;
#ifdef DI_HAVE_X86_PATHS
    if (path == DI_CPU_PATH_AVX2 || path == DI_CPU_PATH_AVX512)
        return (di_cpu_features() & path_needs[path]) == path_needs[path];
#endif
    return 0;
}

const di_cpu_ops *di_cpu_ops_for(di_cpu_path path)
{
    if (!cpu_has(path))
        return NULL;
    switch (path) {
    case DI_CPU_PATH_SCALAR: return &di_cpu_ops_scalar;
#ifdef DI_HAVE_X86_PATHS
    case DI_CPU_PATH_AVX2: return &di_cpu_ops_avx2;
    case DI_CPU_PATH_AVX512: return &di_cpu_ops_avx512;
#endif
    default: return NULL;
    }
}

const char *di_cpu_ops_path_name(di_cpu_path path)
{
    switch (path) {
    case DI_CPU_PATH_AUTO: return "auto";
    case DI_CPU_PATH_SCALAR: return "scalar";
    case DI_CPU_PATH_AVX2: return "avx2";
    case DI_CPU_PATH_AVX512: return "avx512";
    default: return "unknown";
    }
}

di_status di_cpu_ops_select(di_cpu_path requested, const di_cpu_ops **out, char *errbuf,
                            size_t errbuf_size)
{
    *out = NULL;
    const char *source = "the configuration (DI_CONFIG_CPU_PATH)";
    if (requested == DI_CPU_PATH_AUTO) {
        const char *env = getenv("DETINFER_CPU_PATH");
        if (env && *env && strcmp(env, "auto") != 0) {
            source = "DETINFER_CPU_PATH";
            if (strcmp(env, "scalar") == 0)
                requested = DI_CPU_PATH_SCALAR;
            else if (strcmp(env, "avx2") == 0)
                requested = DI_CPU_PATH_AVX2;
            else if (strcmp(env, "avx512") == 0)
                requested = DI_CPU_PATH_AVX512;
            else
                return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                                "DETINFER_CPU_PATH=%s: expected scalar, avx2, avx512 or auto", env);
        }
    }
    if (requested == DI_CPU_PATH_AUTO) {
        static const di_cpu_path widest_first[] = {DI_CPU_PATH_AVX512, DI_CPU_PATH_AVX2,
                                                   DI_CPU_PATH_SCALAR};
        for (size_t i = 0; i < sizeof widest_first / sizeof widest_first[0]; i++)
            if ((*out = di_cpu_ops_for(widest_first[i])) != NULL)
                return DI_OK;
    }
    *out = di_cpu_ops_for(requested);
    if (!*out)
        return di_error(errbuf, errbuf_size, DI_ERR_UNSUPPORTED,
                        "%s asks for the %s CPU path, which this CPU or build cannot run", source,
                        di_cpu_ops_path_name(requested));
    return DI_OK;
}
