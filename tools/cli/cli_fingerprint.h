/*
 * cli_fingerprint.h — the machine's facts and their digest: the
 * fingerprint `detinfer doctor` prints and `detinfer serve` reports as its
 * system_fingerprint.
 *
 * A fingerprint is a list of facts "key=value". Each key has a scope: in the
 * digest of both profiles (what the portable contract depends on: library
 * version, numerics contract, build flags; not the host's floating-point
 * state, which the library pins in every call), in the device profile's
 * digest only (GPU model, CUDA, cuBLAS, cuDNN versions, cuBLAS settings), or
 * informational (CPU, OS, libc...). The digest is XXH3-128 of the canonical
 * text: the facts in scope, sorted by key, one "key=value\n" line each,
 * padded with '\n' to a multiple of 4 bytes.
 */
#ifndef CLI_FINGERPRINT_H
#define CLI_FINGERPRINT_H

#include <stddef.h>

#include <detinfer.h>

#include "cli/cli_cuda.h"

#define CLI_MAX_FACTS 64

typedef struct cli_fact {
    char key[48];
    char value[256];
} cli_fact;

typedef struct cli_facts {
    cli_fact f[CLI_MAX_FACTS];
    int n;
} cli_facts;

/* Appends key=value (newlines in value become spaces); ignored when full. */
void cli_facts_add(cli_facts *facts, const char *key, const char *value);
/* The value of key, or NULL. */
const char *cli_facts_get(const cli_facts *facts, const char *key);
/* This machine's facts for profile, appended in a fixed order: the library,
 * the host's floating point, the CPU and OS, CUDA (ci, from cli_cuda_probe),
 * the environment. */
void cli_facts_collect(cli_facts *facts, di_profile profile, const cli_cuda_info *ci);
/* 1 when key is part of profile's digest. */
int cli_fact_in_digest(const char *key, di_profile profile);
/* The digest of the canonical text of the facts in profile's scope. */
di_status cli_facts_digest(const cli_facts *facts, di_profile profile, di_digest *out);

/* The digest `detinfer doctor --profile PROFILE` prints as its fingerprint:
 * two hosts with equal ones promise equal digests in that profile. */
di_status cli_fingerprint(di_profile profile, di_digest *out);

/* The "; "-separated part of di_build_info() that starts with prefix,
 * without it ("" when there is none). */
void cli_build_info_part(const char *prefix, char *out, size_t n);

#endif /* CLI_FINGERPRINT_H */
