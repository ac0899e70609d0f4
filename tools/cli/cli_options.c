/*
 * cli_options.c — the subcommands' option parsing from a table (and the
 * --help it writes), value parsers and error messages (see cli_options.h).
 */
#include "cli/cli_options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Where the parser is in argv. */
typedef struct parser {
    const dt_command *cmd;
    int argc;
    char **argv;
    int next; /* index of the next argument */
} parser;

#define OPT_END (-1)  /* no more arguments */
#define OPT_BAD (-2)  /* a usage error, already printed */
#define OPT_HELP (-3) /* --help or -h */

int dt_usage(const dt_command *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "detinfer %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: detinfer %s %s\nTry 'detinfer %s --help'.\n", cmd->name, cmd->synopsis,
            cmd->name);
    return DT_EXIT_USAGE;
}

/* Matches "--name" or "--name=value"; *inline_value is the part after '='. */
static int option_matches(const char *arg, const char *name, const char **inline_value)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return 0;
    if (arg[n] == '\0') {
        *inline_value = NULL;
        return 1;
    }
    if (arg[n] == '=') {
        *inline_value = arg + n + 1;
        return 1;
    }
    return 0;
}

/* The index of the next option in cmd->options (its value, if it takes one,
 * in *value: "--opt VALUE" or "--opt=VALUE"), or one of OPT_*. */
static int next_option(parser *p, const char **value)
{
    *value = NULL;
    if (p->next >= p->argc)
        return OPT_END;
    const char *arg = p->argv[p->next++];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
        return OPT_HELP;
    for (int k = 0; p->cmd->options[k].name; k++) {
        const dt_option *o = &p->cmd->options[k];
        const char *inline_value;
        if (!option_matches(arg, o->name, &inline_value))
            continue;
        if (!o->metavar) {
            if (inline_value) {
                dt_usage(p->cmd, "%s takes no value", o->name);
                return OPT_BAD;
            }
            return k;
        }
        if (inline_value) {
            *value = inline_value;
        } else if (p->next < p->argc) {
            *value = p->argv[p->next++];
        } else {
            dt_usage(p->cmd, "%s needs a value (%s)", o->name, o->metavar);
            return OPT_BAD;
        }
        return k;
    }
    if (arg[0] == '-')
        dt_usage(p->cmd, "unknown option '%s'", arg);
    else
        dt_usage(p->cmd, "unexpected argument '%s'", arg);
    return OPT_BAD;
}

int dt_parse_options(const dt_command *cmd, int argc, char **argv,
                     int (*apply)(int k, const char *value, void *opts), void *opts, int *given)
{
    parser p = {cmd, argc, argv, 1};
    for (;;) {
        const char *v;
        int k = next_option(&p, &v);
        if (k == OPT_END)
            return DT_EXIT_OK;
        if (k == OPT_BAD)
            return DT_EXIT_USAGE;
        if (k == OPT_HELP) {
            dt_print_help(cmd, stdout);
            return -1;
        }
        if (!apply(k, v, opts))
            return DT_EXIT_USAGE;
        if (given)
            given[k] = 1;
    }
}

void dt_print_help(const dt_command *cmd, FILE *f)
{
    fprintf(f, "usage: detinfer %s %s\n\n%s\n\noptions:\n", cmd->name, cmd->synopsis, cmd->description);
    for (int k = 0; cmd->options[k].name; k++) {
        const dt_option *o = &cmd->options[k];
        if (!o->help)
            continue;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        fprintf(f, "  %-24s %s\n", left, o->help);
    }
    fprintf(f, "  %-24s %s\n", "--help", "this text");
    fprintf(f, "\nexit status: 0 success, 1 a mismatch, failed check or library error, 2 bad arguments\n");
}

int dt_parse_long(const dt_command *cmd, const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < lo || v > hi) {
        dt_usage(cmd, "%s wants an integer in %ld..%ld, not '%s'", opt, lo, hi, text);
        return 0;
    }
    *out = v;
    return 1;
}

int dt_parse_long_list(const dt_command *cmd, const char *opt, const char *text, long lo, long hi,
                       long *out, int max, int *n)
{
    *n = 0;
    const char *s = text;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < lo || v > hi || (*end && *end != ',') || *n == max) {
            dt_usage(cmd, "%s wants up to %d comma-separated integers in %ld..%ld, not '%s'", opt, max, lo,
                     hi, text);
            return 0;
        }
        out[(*n)++] = v;
        s = *end ? end + 1 : end;
    }
    if (*n == 0) {
        dt_usage(cmd, "%s wants a list like 1,2,4, not '%s'", opt, text);
        return 0;
    }
    return 1;
}

di_status dt_token_list(const char *s, int64_t limit, int32_t **out, uint32_t *n)
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

int dt_parse_tokens(const dt_command *cmd, const char *opt, const char *text, int32_t **tokens,
                    uint32_t *n)
{
    switch (dt_token_list(text, (int64_t)INT32_MAX + 1, tokens, n)) {
    case DI_OK:
        return 1;
    case DI_ERR_OUT_OF_MEMORY:
        dt_usage(cmd, "%s: out of memory", opt);
        return 0;
    case DI_ERR_INVALID_ARGUMENT:
        dt_usage(cmd, "%s wants at least one token id", opt);
        return 0;
    default:
        dt_usage(cmd, "%s wants token ids like 1,17,42, not '%s'", opt, text);
        return 0;
    }
}

int dt_parse_backend(const dt_command *cmd, const char *opt, const char *text, di_backend *out)
{
    if (!strcmp(text, "cpu"))
        *out = DI_BACKEND_CPU;
    else if (!strcmp(text, "cuda"))
        *out = DI_BACKEND_CUDA;
    else {
        dt_usage(cmd, "%s wants cpu or cuda, not '%s'", opt, text);
        return 0;
    }
    return 1;
}

/* The numerics profiles by their option spelling: --profile and reports. */
static const struct {
    const char *name;
    di_profile profile;
} profile_names[] = {
    {"portable", DI_PROFILE_PORTABLE},
    {"device", DI_PROFILE_DEVICE},
    {"integer", DI_PROFILE_INTEGER},
};
#define N_PROFILE_NAMES (sizeof profile_names / sizeof profile_names[0])

int dt_parse_profile(const dt_command *cmd, const char *opt, const char *text, di_profile *out)
{
    for (size_t i = 0; i < N_PROFILE_NAMES; i++)
        if (!strcmp(text, profile_names[i].name)) {
            *out = profile_names[i].profile;
            return 1;
        }
    dt_usage(cmd, "%s wants portable, device or integer, not '%s'", opt, text);
    return 0;
}

int dt_parse_device(const dt_command *cmd, const char *opt, const char *text, long *out)
{
    return dt_parse_long(cmd, opt, text, 0, 255, out);
}

/* The spellings are the library's (di_cpu_path_name). */
int dt_parse_cpu_path(const dt_command *cmd, const char *opt, const char *text, di_cpu_path *out)
{
    for (int p = DI_CPU_PATH_AUTO; p <= DI_CPU_PATH_AVX512; p++)
        if (!strcmp(text, di_cpu_path_name((di_cpu_path)p))) {
            *out = (di_cpu_path)p;
            return 1;
        }
    dt_usage(cmd, "%s wants auto, scalar, avx2 or avx512, not '%s'", opt, text);
    return 0;
}

const char *dt_backend_name(di_backend backend)
{
    return backend == DI_BACKEND_CUDA ? "cuda" : backend == DI_BACKEND_CPU ? "cpu" : "unknown";
}

const char *dt_profile_name(di_profile profile)
{
    for (size_t i = 0; i < N_PROFILE_NAMES; i++)
        if (profile_names[i].profile == profile)
            return profile_names[i].name;
    return "unknown";
}

int dt_fail(const dt_command *cmd, const char *what, di_status st, const char *detail)
{
    fprintf(stderr, "detinfer %s: %s: %s%s%s\n", cmd->name, what, di_status_name(st),
            detail && *detail ? ": " : "", detail ? detail : "");
    return DT_EXIT_FAIL;
}

