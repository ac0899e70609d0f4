/*
 * cpu_ops.c — which CPU kernel path a session runs: what the CPU supports
 * (CPUID through GCC's __builtin_cpu_supports, which also checks that the OS
 * saves the vector registers), what the configuration asks for, and the
 * DETINFER_CPU_PATH variable.
 */
#include "cpu_ops.h"

#include <stdlib.h>
#include <string.h>

#include "errors.h"

static int cpu_has(di_cpu_path path)
{
#ifdef DI_HAVE_X86_PATHS
    __builtin_cpu_init();
    if (path == DI_CPU_PATH_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (path == DI_CPU_PATH_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
    return path == DI_CPU_PATH_SCALAR;
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

static const char *path_name(di_cpu_path path)
{
    switch (path) {
    case DI_CPU_PATH_SCALAR: return "scalar";
    case DI_CPU_PATH_AVX2: return "avx2";
    case DI_CPU_PATH_AVX512: return "avx512";
    default: return "auto";
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
                        path_name(requested));
    return DI_OK;
}
