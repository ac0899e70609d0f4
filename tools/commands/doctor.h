/*
 * doctor.h — the environment fingerprint of `detinfer doctor`, for
 * the other subcommands (serve's system_fingerprint).
 */
#ifndef DETINFER_DOCTOR_H
#define DETINFER_DOCTOR_H

#include <detinfer.h>

/* The digest `detinfer doctor --profile PROFILE` prints as its fingerprint:
 * two hosts with equal ones promise equal digests in that profile. */
di_status doctor_fingerprint(di_profile profile, di_digest *out);

#endif /* DETINFER_DOCTOR_H */
