/*
 * host_ops.c — the CPU kernels' operations the API layer runs on the host
 * (host_ops.h).
 */
#include "lib/backend/cpu/host_ops.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"

float di_host_sum(const float *x, uint32_t n)
{
    return di_cpu_sum(x, n);
}

uint32_t di_host_argmax(const float *x, uint32_t n)
{
    return di_cpu_argmax(x, n);
}

const char *di_host_cpu_path_name(di_cpu_path path)
{
    return di_cpu_ops_path_name(path);
}

di_status di_host_cpu_path_select(di_cpu_path requested, di_cpu_path *path, char *err, size_t err_size)
{
    const di_cpu_ops *ops;
    di_status st = di_cpu_ops_select(requested, &ops, err, err_size);
    if (st == DI_OK)
        *path = ops->path;
    return st;
}
