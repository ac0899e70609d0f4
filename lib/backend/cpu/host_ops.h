/*
 * host_ops.h — what the API layer computes on the host for every backend
 * (sampling and speculation's checks over the logits a backend returns),
 * and the CPU kernel paths it names: the CPU kernels' canonical sum and
 * argmax (docs/DETERMINISM.md) and their path table, reached through this
 * layer so that lib/api includes no kernel header.
 */
#ifndef DI_HOST_OPS_H
#define DI_HOST_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"

/* sum(x[i]) in the canonical order; n == 0 gives +0. */
float di_host_sum(const float *x, uint32_t n);

/* Index of the largest value, lowest index on ties; NaN never chosen; 0 for
 * an all-NaN row. */
uint32_t di_host_argmax(const float *x, uint32_t n);

/* The name of a CPU path ("auto", "scalar", "avx2", "avx512"; "unknown"
 * else), and the path a session asking for `requested` runs
 * (DI_CPU_PATH_AUTO: the variable DETINFER_CPU_PATH when set, else the
 * widest available): DI_ERR_UNSUPPORTED with a message when this CPU or
 * build lacks it, DI_ERR_INVALID_ARGUMENT for a bad variable value. */
const char *di_host_cpu_path_name(di_cpu_path path);
di_status di_host_cpu_path_select(di_cpu_path requested, di_cpu_path *path, char *err, size_t err_size);

#endif /* DI_HOST_OPS_H */
