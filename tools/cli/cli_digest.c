/*
 * cli_digest.c — digests as text and digests of bytes (see cli_digest.h).
 */
#include "cli/cli_digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_hex(const di_digest *d, char out[DI_DIGEST_HEX_SIZE])
{
    if (di_digest_format(d, out) != DI_OK)
        snprintf(out, DI_DIGEST_HEX_SIZE, "%s", "????????????????????????????????");
}

di_status cli_digest_bytes(const void *bytes, size_t n, di_digest *out)
{
    if (n % 4)
        return DI_ERR_INVALID_ARGUMENT;
    const unsigned char *b = bytes;
    int32_t *words = malloc(n ? n : 4);
    if (!words)
        return DI_ERR_OUT_OF_MEMORY;
    /* Built from the bytes explicitly, so the library's little-endian view of
     * each word is the original byte order on any host. */
    for (size_t i = 0; i < n / 4; i++) {
        uint32_t w = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                     (uint32_t)b[4 * i + 3] << 24;
        memcpy(&words[i], &w, sizeof w);
    }
    di_status st = di_digest_tokens(words, n / 4, out);
    free(words);
    return st;
}

