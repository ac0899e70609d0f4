/*
 * digest.c — XXH3-128 digests in canonical (big-endian) byte order, the form
 * `xxh128sum` prints. xxHash is inlined (XXH_INLINE_ALL) so none of its
 * symbols is exported by libdetinfer.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <string.h>

#include "detinfer.h"
#include "lib/api/digest.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "digests hash the in-memory bytes of float32 and int32: a big-endian port must swap them first"
#endif

void di_digest_bytes(const void *data, size_t n, di_digest *out)
{
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits(data, n));
    memcpy(out->bytes, canon.digest, sizeof out->bytes);
}

void di_digest_bytes2(const void *a, size_t na, const void *b, size_t nb, di_digest *out)
{
    /* streaming XXH3 gives the one-shot digest of the concatenation */
    XXH3_state_t state;
    XXH3_INITSTATE(&state);
    XXH3_128bits_reset(&state);
    XXH3_128bits_update(&state, a, na);
    XXH3_128bits_update(&state, b, nb);
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(&state));
    memcpy(out->bytes, canon.digest, sizeof out->bytes);
}

DI_API di_status di_digest_floats(const float *values, size_t n, di_digest *out)
{
    if (!out || (!values && n > 0) || n > SIZE_MAX / sizeof(float))
        return DI_ERR_INVALID_ARGUMENT;
    di_digest_bytes(values, n * sizeof(float), out);
    return DI_OK;
}

DI_API di_status di_digest_tokens(const int32_t *tokens, size_t n, di_digest *out)
{
    if (!out || (!tokens && n > 0) || n > SIZE_MAX / sizeof(int32_t))
        return DI_ERR_INVALID_ARGUMENT;
    di_digest_bytes(tokens, n * sizeof(int32_t), out);
    return DI_OK;
}

DI_API di_status di_digest_format(const di_digest *d, char out[DI_DIGEST_HEX_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    if (!d || !out)
        return DI_ERR_INVALID_ARGUMENT;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[d->bytes[i] >> 4];
        out[2 * i + 1] = hex[d->bytes[i] & 15];
    }
    out[32] = '\0';
    return DI_OK;
}

DI_API int di_digest_equal(const di_digest *a, const di_digest *b)
{
    return a && b && memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}
