/*
 * cli_options.c — the subcommands' option parsing from a table, by
 * getopt_long (and the --help the table writes), value parsers and error
 * messages (see cli_options.h).
 */
#include "cli/cli_options.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_usage(const cli_command *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "detinfer %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: detinfer %s %s\nTry 'detinfer %s --help'.\n", cmd->name, cmd->synopsis,
            cmd->name);
    return CLI_EXIT_USAGE;
}

/* getopt_long reads argv, with three settings of its optstring: "-" hands
 * back each argument that is not an option (code 1: refused, no command takes
 * one here; so is any after "--"), ":" tells a missing value from an unknown
 * option, "h" is -h.
 * The option's code is its index in cmd->options plus FIRST_CODE. One
 * behaviour of getopt_long is not kept: it takes a unique abbreviation
 * (--temp for --temperature); the tool refuses it, as it always has, so a
 * script's spelling cannot turn ambiguous when an option is added. */
#define FIRST_CODE 256

/* Whether arg spells the option name in full: "--name" or "--name=...". */
static int spelled_out(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == '\0' || arg[n] == '=');
}

static int parse(const cli_command *cmd, int argc, char **argv, int (*apply)(int k, const char *value, void *opts),
                 void *opts, int *given, int operands)
{
    int n = 0;
    while (cmd->options[n].name)
        n++;
    struct option *table = calloc((size_t)n + 2, sizeof *table);
    if (!table)
        return cli_usage(cmd, "out of memory");
    for (int k = 0; k < n; k++)
        table[k] = (struct option){cmd->options[k].name + 2, /* after "--" */
                                   cmd->options[k].metavar ? required_argument : no_argument, NULL, FIRST_CODE + k};
    table[n] = (struct option){"help", no_argument, NULL, 'h'};
    opterr = 0;
    optind = 0; /* a fresh scan (glibc and musl) */
    int rc = CLI_EXIT_OK;
    while (rc == CLI_EXIT_OK) {
        const char *arg = argv[optind ? optind : 1]; /* the argument getopt_long reads next */
        const int c = getopt_long(argc, argv, "-:h", table, NULL);
        const int k = c - FIRST_CODE;
        if (c == -1) {
            for (; rc == CLI_EXIT_OK && optind < argc && operands; optind++) /* after "--" */
                rc = apply(CLI_OPERAND, argv[optind], opts) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
            if (rc == CLI_EXIT_OK && optind < argc)
                rc = cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
            break;
        }
        if (c == 1) {
            rc = !operands                   ? cli_usage(cmd, "unexpected argument '%s'", optarg)
                 : apply(CLI_OPERAND, optarg, opts) ? CLI_EXIT_OK
                                                    : CLI_EXIT_USAGE;
        } else if (c == ':') {
            const cli_option *o = &cmd->options[optopt - FIRST_CODE];
            rc = cli_usage(cmd, "%s needs a value (%s)", o->name, o->metavar);
        } else if (c == '?' && optopt >= FIRST_CODE) {
            rc = cli_usage(cmd, "%s takes no value", cmd->options[optopt - FIRST_CODE].name);
        } else if (c == 'h' && (!strcmp(arg, "-h") || !strcmp(arg, "--help"))) {
            cli_print_help(cmd, stdout);
            rc = -1;
        } else if (c == '?' || c == 'h' || !spelled_out(arg, cmd->options[k].name)) {
            rc = cli_usage(cmd, "unknown option '%s'", arg);
        } else if (!apply(k, optarg, opts)) {
            rc = CLI_EXIT_USAGE;
        } else if (given) {
            given[k] = 1;
        }
    }
    free(table);
    return rc;
}

int cli_parse_options(const cli_command *cmd, int argc, char **argv,
                      int (*apply)(int k, const char *value, void *opts), void *opts, int *given)
{
    return parse(cmd, argc, argv, apply, opts, given, 0);
}

int cli_parse_with_operands(const cli_command *cmd, int argc, char **argv,
                            int (*apply)(int k, const char *value, void *opts), void *opts, int *given)
{
    return parse(cmd, argc, argv, apply, opts, given, 1);
}

void cli_print_help(const cli_command *cmd, FILE *f)
{
    fprintf(f, "usage: detinfer %s %s\n\n%s\n\noptions:\n", cmd->name, cmd->synopsis, cmd->description);
    for (int k = 0; cmd->options[k].name; k++) {
        const cli_option *o = &cmd->options[k];
        if (!o->help)
            continue;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        fprintf(f, "  %-24s %s\n", left, o->help);
    }
    fprintf(f, "  %-24s %s\n", "--help", "this text");
    fprintf(f, "\nexit status: 0 success, 1 a mismatch, failed check or library error, 2 bad arguments\n");
}

int cli_parse_long(const cli_command *cmd, const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < lo || v > hi) {
        cli_usage(cmd, "%s wants an integer in %ld..%ld, not '%s'", opt, lo, hi, text);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_long_list(const cli_command *cmd, const char *opt, const char *text, long lo, long hi,
                        long *out, int max, int *n)
{
    *n = 0;
    const char *s = text;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < lo || v > hi || (*end && *end != ',') || *n == max) {
            cli_usage(cmd, "%s wants up to %d comma-separated integers in %ld..%ld, not '%s'", opt, max, lo,
                      hi, text);
            return 0;
        }
        out[(*n)++] = v;
        s = *end ? end + 1 : end;
    }
    if (*n == 0) {
        cli_usage(cmd, "%s wants a list like 1,2,4, not '%s'", opt, text);
        return 0;
    }
    return 1;
}

di_status cli_token_list(const char *s, int64_t limit, int32_t **out, uint32_t *n)
{
    size_t cap = strlen(s) / 2 + 1;
    int32_t *t = malloc(cap * sizeof *t);
    uint32_t count = 0;
    if (!t)
        return DI_ERR_OUT_OF_MEMORY;
    for (;;) {
        while (*s == ' ' || *s == ',' || *s == '\t')
            s++;
        if (!*s)
            break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v >= limit || (*end && *end != ',' && *end != ' ' && *end != '\t')) {
            free(t);
            return DI_ERR_TOKEN_RANGE;
        }
        t[count++] = (int32_t)v;
        s = end;
    }
    if (count == 0) {
        free(t);
        return DI_ERR_INVALID_ARGUMENT;
    }
    *out = t;
    *n = count;
    return DI_OK;
}

int cli_parse_tokens(const cli_command *cmd, const char *opt, const char *text, int32_t **tokens,
                     uint32_t *n)
{
    switch (cli_token_list(text, (int64_t)INT32_MAX + 1, tokens, n)) {
    case DI_OK:
        return 1;
    case DI_ERR_OUT_OF_MEMORY:
        cli_usage(cmd, "%s: out of memory", opt);
        return 0;
    case DI_ERR_INVALID_ARGUMENT:
        cli_usage(cmd, "%s wants at least one token id", opt);
        return 0;
    default:
        cli_usage(cmd, "%s wants token ids like 1,17,42, not '%s'", opt, text);
        return 0;
    }
}

int cli_parse_backend(const cli_command *cmd, const char *opt, const char *text, di_backend *out)
{
    if (!strcmp(text, "cpu"))
        *out = DI_BACKEND_CPU;
    else if (!strcmp(text, "cuda"))
        *out = DI_BACKEND_CUDA;
    else {
        cli_usage(cmd, "%s wants cpu or cuda, not '%s'", opt, text);
        return 0;
    }
    return 1;
}

/* The numerics profiles by their option spelling (--profile and reports) and
 * the numerics version of their definition. */
static const struct {
    const char *name;
    di_profile profile;
    int numerics;
} profile_names[] = {
    {"portable", DI_PROFILE_PORTABLE, DI_NUMERICS_VERSION},
    {"device", DI_PROFILE_DEVICE, DI_NUMERICS_VERSION},
    {"integer", DI_PROFILE_INTEGER, DI_INTEGER_NUMERICS_VERSION},
};
#define N_PROFILE_NAMES (sizeof profile_names / sizeof profile_names[0])

int cli_parse_profile(const cli_command *cmd, const char *opt, const char *text, di_profile *out)
{
    for (size_t i = 0; i < N_PROFILE_NAMES; i++)
        if (!strcmp(text, profile_names[i].name)) {
            *out = profile_names[i].profile;
            return 1;
        }
    cli_usage(cmd, "%s wants portable, device or integer, not '%s'", opt, text);
    return 0;
}

int cli_parse_device(const cli_command *cmd, const char *opt, const char *text, long *out)
{
    return cli_parse_long(cmd, opt, text, 0, 255, out);
}

/* The spellings are the library's (di_cpu_path_name). */
int cli_parse_cpu_path(const cli_command *cmd, const char *opt, const char *text, di_cpu_path *out)
{
    for (int p = DI_CPU_PATH_AUTO; p <= DI_CPU_PATH_AVX512; p++)
        if (!strcmp(text, di_cpu_path_name((di_cpu_path)p))) {
            *out = (di_cpu_path)p;
            return 1;
        }
    cli_usage(cmd, "%s wants auto, scalar, avx2 or avx512, not '%s'", opt, text);
    return 0;
}

const char *cli_backend_name(di_backend backend)
{
    return backend == DI_BACKEND_CUDA ? "cuda" : backend == DI_BACKEND_CPU ? "cpu" : "unknown";
}

int cli_profile_numerics(di_profile profile)
{
    for (size_t i = 0; i < N_PROFILE_NAMES; i++)
        if (profile_names[i].profile == profile)
            return profile_names[i].numerics;
    return 0;
}

const char *cli_profile_name(di_profile profile)
{
    for (size_t i = 0; i < N_PROFILE_NAMES; i++)
        if (profile_names[i].profile == profile)
            return profile_names[i].name;
    return "unknown";
}

int cli_fail(const cli_command *cmd, const char *what, di_status st, const char *detail)
{
    fprintf(stderr, "detinfer %s: %s: %s%s%s\n", cmd->name, what, di_status_name(st),
            detail && *detail ? ": " : "", detail ? detail : "");
    return CLI_EXIT_FAIL;
}

