/*
 * digest.h — internal digest helper.
 */
#ifndef DI_DIGEST_H
#define DI_DIGEST_H

#include <stddef.h>
#include "detinfer.h"

/* XXH3-128 of n bytes, canonical byte order. */
void di_digest_bytes(const void *data, size_t n, di_digest *out);
/* XXH3-128 of the na bytes at a followed by the nb bytes at b. */
void di_digest_bytes2(const void *a, size_t na, const void *b, size_t nb, di_digest *out);

#endif /* DI_DIGEST_H */
