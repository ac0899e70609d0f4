/*
 * weight_pack.h — the model's packed weights (weight_pack.c), for the CPU
 * backend's sessions whose kernels read them (di_cpu_ops.int_packed).
 */
#ifndef DI_WEIGHT_PACK_H
#define DI_WEIGHT_PACK_H

#include <stddef.h>

#include "kernels/cpu/cpu_ops.h"
#include "lib/model/model.h"
#include "kernels/cpu/threadpool.h"

/* Packs the model's matrices once for the kernels of ops (ops->int_pack_rows
 * set): the first call does the work, with the pool's threads; later calls
 * wait for it and return at once. Returns the bytes the copies take: 0 when
 * no matrix has a packed layout or the memory could not be had (the kernels
 * then read the file's blocks). */
size_t di_weights_pack(const di_model *m, const di_cpu_ops *ops, di_pool *pool);

#endif /* DI_WEIGHT_PACK_H */
