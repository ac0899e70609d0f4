/*
 * cli_options.h — how a subcommand of the detinfer tool reads its
 * arguments: options described in a table (which also writes --help),
 * value parsers, usage and error messages, the exit codes.
 *
 * The tool uses only the public API of include/detinfer.h.
 */
#ifndef CLI_OPTIONS_H
#define CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <detinfer.h>

/* A macro's value as a string literal, for help texts that name a header's
 * constant: "(default " CLI_STR(DI_DRAFT_DEFAULT) ")". */
#define CLI_STR(x) CLI_STR_(x)
#define CLI_STR_(x) #x

/* Exit codes of every subcommand. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1  /* a mismatch, a failed check or a library error */
#define CLI_EXIT_USAGE 2 /* bad arguments */

/* ---- Options --------------------------------------------------------------
 * A subcommand describes its options in a table; the parser returns the
 * index of each option it meets, and the same table prints --help. */
typedef struct cli_option {
    const char *name;    /* "--model" */
    const char *metavar; /* "FILE"; NULL for a flag */
    const char *help;    /* one line; NULL hides the option from --help */
} cli_option;

typedef struct cli_command {
    const char *name;        /* "run" */
    const char *synopsis;    /* "--model FILE (--prompt TEXT | --tokens LIST) [options]" */
    const char *description; /* a paragraph printed under the synopsis */
    const cli_option *options; /* ends with a {NULL} entry */
} cli_command;

/* The index apply() gets for an operand of a command that takes them. */
#define CLI_OPERAND (-1)

/* Reads every option of argv with getopt_long ("--name VALUE" or
 * "--name=VALUE", names spelled in full; -h is --help; any other argument is
 * an error) and hands each to apply(index in cmd->options,
 * value or NULL, opts), which returns 0 after printing a usage error; marks
 * given[index] when given is not NULL. Returns CLI_EXIT_OK, CLI_EXIT_USAGE, or
 * -1 after printing the help for --help. */
int cli_parse_options(const cli_command *cmd, int argc, char **argv,
                      int (*apply)(int k, const char *value, void *opts), void *opts, int *given);
/* The same for a command with operands (replay's files): every argument that
 * is not an option, "-" and those after "--" included, goes to apply as
 * CLI_OPERAND, in order. */
int cli_parse_with_operands(const cli_command *cmd, int argc, char **argv,
                            int (*apply)(int k, const char *value, void *opts), void *opts, int *given);
/* Prints "detinfer CMD: MESSAGE" and a pointer to --help; returns CLI_EXIT_USAGE. */
int cli_usage(const cli_command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_print_help(const cli_command *cmd, FILE *f);

/* Value parsers: 1 on success; 0 after printing a usage error naming opt. */
int cli_parse_long(const cli_command *cmd, const char *opt, const char *text, long lo, long hi, long *out);
int cli_parse_long_list(const cli_command *cmd, const char *opt, const char *text, long lo, long hi,
                        long *out, int max, int *n);
/* Token ids separated by commas, spaces or tabs, each in [0, limit), into a
 * new array: DI_OK, DI_ERR_TOKEN_RANGE (malformed or out of range),
 * DI_ERR_INVALID_ARGUMENT (no ids) or DI_ERR_OUT_OF_MEMORY. */
di_status cli_token_list(const char *text, int64_t limit, int32_t **out, uint32_t *n);
int cli_parse_tokens(const cli_command *cmd, const char *opt, const char *text, int32_t **tokens,
                     uint32_t *n);
int cli_parse_backend(const cli_command *cmd, const char *opt, const char *text, di_backend *out);
/* The tools' profile when --profile is not given (run, verify, bench, serve):
 * integer, the faster on CPUs and closer to float64 than llama.cpp; both
 * profiles keep every determinism promise, and a digest compares only with
 * one of the same profile and numerics version. The library's fresh
 * di_config keeps DI_PROFILE_PORTABLE (docs/ABI.md). */
#define CLI_DEFAULT_PROFILE DI_PROFILE_INTEGER
/* Help text of --profile; NAME is the default's. */
#define CLI_PROFILE_HELP "numerics profile: integer (default), portable (float64-level accuracy) or device (CUDA)"
int cli_parse_profile(const cli_command *cmd, const char *opt, const char *text, di_profile *out);
/* The profile's numerics version: DI_NUMERICS_VERSION, or for the integer
 * profile DI_INTEGER_NUMERICS_VERSION. */
int cli_profile_numerics(di_profile profile);
/* --device N (0..255) and --cpu-path auto|scalar|avx2|avx512 */
int cli_parse_device(const cli_command *cmd, const char *opt, const char *text, long *out);
int cli_parse_cpu_path(const cli_command *cmd, const char *opt, const char *text, di_cpu_path *out);
const char *cli_backend_name(di_backend backend);
const char *cli_profile_name(di_profile profile);

/* Prints "detinfer CMD: WHAT: STATUS_NAME: DETAIL"; returns CLI_EXIT_FAIL. */
int cli_fail(const cli_command *cmd, const char *what, di_status st, const char *detail);

#endif /* CLI_OPTIONS_H */
