/*
 * cpu_path.c — the public calls on the CPU kernel paths (di_cpu_path_name,
 * di_cpu_path_resolve) over the CPU kernels' own selection
 * (lib/backend/cpu/host_ops.h), which every CPU session uses too.
 */
#include "lib/backend/cpu/host_ops.h"
#include "lib/base/errors.h"

DI_API const char *di_cpu_path_name(di_cpu_path path)
{
    return di_host_cpu_path_name(path);
}

DI_API di_status di_cpu_path_resolve(di_cpu_path requested, di_cpu_path *path, char *errbuf,
                              size_t errbuf_size)
{
    if (!path)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT, "path is NULL");
    *path = DI_CPU_PATH_AUTO;
    if (requested < DI_CPU_PATH_AUTO || requested > DI_CPU_PATH_AVX512)
        return di_error(errbuf, errbuf_size, DI_ERR_INVALID_ARGUMENT,
                        "unknown CPU path %d: expected 0 (auto) to 3 (avx512)", (int)requested);
    return di_host_cpu_path_select(requested, path, errbuf, errbuf_size);
}
