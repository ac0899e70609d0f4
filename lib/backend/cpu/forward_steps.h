/*
 * forward_steps.h — the CPU's implementation of the layer recipe's steps
 * (layer_recipe.h, forward_steps.c).
 */
#ifndef DI_FORWARD_STEPS_H
#define DI_FORWARD_STEPS_H

#include "lib/backend/cpu/forward.h"
#include "lib/backend/layer_recipe.h"

/* One forward call on the CPU: the ctx di_cpu_steps expects. */
typedef struct di_cpu_call {
    di_forward *f;
    const di_forward_row *rows;
    uint32_t n_rows;
} di_cpu_call;

extern const di_steps di_cpu_steps;

#endif /* DI_FORWARD_STEPS_H */
