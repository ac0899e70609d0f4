/*
 * cli_digest.h — digests as hex text, and the digests of a byte string and of a file.
 */
#ifndef CLI_DIGEST_H
#define CLI_DIGEST_H

#include <stddef.h>

#include <detinfer.h>

/* The 32 hex digits of d ('?' when it cannot be formatted). */
void cli_hex(const di_digest *d, char out[DI_DIGEST_HEX_SIZE]);
/* XXH3-128 of n bytes, n a multiple of 4 (what xxh128sum prints for them):
 * the bytes are packed into little-endian int32 words for di_digest_tokens.
 * On failure (n not a multiple of 4, out of memory) *out is not written, so
 * the status must be read. */
__attribute__((warn_unused_result))
di_status cli_digest_bytes(const void *bytes, size_t n, di_digest *out);
/* XXH3-128 of the file's bytes, as `xxh128sum FILE` prints it; 0, or -1 when
 * the file cannot be opened or read (out is then not a digest). */
int cli_file_digest(const char *path, char out[DI_DIGEST_HEX_SIZE]);

#endif /* CLI_DIGEST_H */
