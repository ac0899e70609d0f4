/*
 * cli_digest.c — digests as text and digests of bytes (see cli_digest.h).
 */
#include "cli/cli_digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

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

int cli_file_digest(const char *path, char out[DI_DIGEST_HEX_SIZE])
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    XXH3_state_t *st = XXH3_createState();
    char *buf = malloc(1 << 20);
    int rc = -1;
    if (st && buf && XXH3_128bits_reset(st) == XXH_OK) {
        size_t n;
        while ((n = fread(buf, 1, 1 << 20, f)) > 0)
            XXH3_128bits_update(st, buf, n);
        if (!ferror(f)) {
            XXH128_canonical_t c;
            XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
            for (int i = 0; i < 16; i++)
                snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
            rc = 0;
        }
    }
    free(buf);
    XXH3_freeState(st);
    fclose(f);
    return rc;
}
