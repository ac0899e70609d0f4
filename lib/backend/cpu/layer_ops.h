/*
 * layer_ops.h — the CPU's implementation of the layer recipe's operations
 * (layer_recipe.h, layer_ops.c).
 */
#ifndef DI_LAYER_OPS_H
#define DI_LAYER_OPS_H

#include "lib/backend/cpu/forward.h"
#include "lib/backend/layer_recipe.h"

/* One forward call on the CPU: the ctx di_cpu_layer_ops expects. */
typedef struct di_cpu_call {
    di_forward *f;
    const di_forward_row *rows;
    uint32_t n_rows;
} di_cpu_call;

extern const di_layer_ops di_cpu_layer_ops;

#endif /* DI_LAYER_OPS_H */
