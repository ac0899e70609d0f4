/*
 * doctor.h — the state of one `detinfer doctor` run, shared by its
 * files: doctor.c (options, main), doctor_checks.c (the OK/INFO/WARN
 * lines), doctor_file.c (--save, --compare) and doctor_print.c (text and
 * --json). The facts and their digest are cli/cli_fingerprint.*.
 */
#ifndef DETINFER_DOCTOR_H
#define DETINFER_DOCTOR_H

#include <detinfer.h>

#include "cli/cli_cuda.h"
#include "cli/cli_fingerprint.h"
#include "cli/cli_model.h"
#include "cli/cli_options.h"

#define DOCTOR_MAX_CHECKS 48

typedef enum doctor_level { LV_OK, LV_INFO, LV_WARN } doctor_level;

typedef struct doctor_check {
    doctor_level lv;
    char name[32];
    char text[400];
} doctor_check;

typedef struct doctor {
    di_profile profile;
    cli_facts facts;
    doctor_check checks[DOCTOR_MAX_CHECKS];
    int n_checks;
} doctor;

/* A key of either side, with both values (NULL when a side lacks it). */
typedef struct doctor_difference {
    const char *key, *here, *there;
} doctor_difference;

/* This environment against a fingerprint saved elsewhere. */
typedef struct doctor_comparison {
    int promised, comparable;
    cli_facts other;
    doctor_difference diff[2 * CLI_MAX_FACTS];
    int n_diff;
    di_digest theirs;
} doctor_comparison;

extern const cli_command doctor_command;

/* doctor_checks.c: a line for each fact (ci: what the facts were taken
 * from), in the order of the facts; with --model, the session's. */
void doctor_checks(doctor *d, const cli_cuda_info *ci);
void doctor_session_checks(doctor *d, const char *model_path, const cli_session_opts *so);

/* doctor_file.c: CLI_EXIT_OK, or CLI_EXIT_FAIL after saying why. */
int doctor_save(const doctor *d, const char *path, const di_digest *fp);
int doctor_compare(const doctor *d, const char *path, doctor_comparison *c);

/* doctor_print.c */
void doctor_print_text(const doctor *d, const di_digest *fp);
void doctor_print_compare_text(const doctor *d, const char *path, const doctor_comparison *c);
/* c with path (--compare), else neither; CLI_EXIT_OK or CLI_EXIT_FAIL. */
int doctor_print_json(const doctor *d, const di_digest *fp, const char *path, const doctor_comparison *c);

#endif /* DETINFER_DOCTOR_H */
