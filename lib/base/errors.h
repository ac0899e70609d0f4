/*
 * errors.h — filling the caller's or a handle's message buffer.
 */
#ifndef DI_ERRORS_H
#define DI_ERRORS_H

#include <stddef.h>
#include "detinfer.h"

#define DI_ERRMSG_SIZE 512

#ifdef __cplusplus /* the CUDA plugin links errors.c too (lib/backend/cuda/cuda.mk) */
extern "C" {
#endif

/* Writes the formatted message into buf (if buf and size > 0) and returns
 * status, so a failure reads `return di_error(buf, n, DI_ERR_X, "...", ...);`. */
di_status di_error(char *buf, size_t size, di_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif /* DI_ERRORS_H */
