/*
 * detinfer_common.c — option parsing, value parsers, errors, the progress bar and the model/session helpers of the tool.
 */
#include "detinfer_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- Options ------------------------------------------------------------- */

void dt_parser_init(dt_parser *p, const dt_command *cmd, int argc, char **argv)
{
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    p->next = 1;
}

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

int dt_next_option(dt_parser *p, const char **value)
{
    *value = NULL;
    if (p->next >= p->argc)
        return DT_OPT_END;
    const char *arg = p->argv[p->next++];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
        return DT_OPT_HELP;
    for (int k = 0; p->cmd->options[k].name; k++) {
        const dt_option *o = &p->cmd->options[k];
        const char *inline_value;
        if (!option_matches(arg, o->name, &inline_value))
            continue;
        if (!o->metavar) {
            if (inline_value) {
                dt_usage(p->cmd, "%s takes no value", o->name);
                return DT_OPT_BAD;
            }
            return k;
        }
        if (inline_value) {
            *value = inline_value;
        } else if (p->next < p->argc) {
            *value = p->argv[p->next++];
        } else {
            dt_usage(p->cmd, "%s needs a value (%s)", o->name, o->metavar);
            return DT_OPT_BAD;
        }
        return k;
    }
    if (arg[0] == '-')
        dt_usage(p->cmd, "unknown option '%s'", arg);
    else
        dt_usage(p->cmd, "unexpected argument '%s'", arg);
    return DT_OPT_BAD;
}

int dt_parse_options(const dt_command *cmd, int argc, char **argv,
                     int (*apply)(int k, const char *value, void *opts), void *opts, int *given)
{
    dt_parser p;
    dt_parser_init(&p, cmd, argc, argv);
    for (;;) {
        const char *v;
        int k = dt_next_option(&p, &v);
        if (k == DT_OPT_END)
            return DT_EXIT_OK;
        if (k == DT_OPT_BAD)
            return DT_EXIT_USAGE;
        if (k == DT_OPT_HELP) {
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

int dt_parse_profile(const dt_command *cmd, const char *opt, const char *text, di_profile *out)
{
    if (!strcmp(text, "portable"))
        *out = DI_PROFILE_PORTABLE;
    else if (!strcmp(text, "device"))
        *out = DI_PROFILE_DEVICE;
    else {
        dt_usage(cmd, "%s wants portable or device, not '%s'", opt, text);
        return 0;
    }
    return 1;
}

int dt_parse_device(const dt_command *cmd, const char *opt, const char *text, long *out)
{
    return dt_parse_long(cmd, opt, text, 0, 255, out);
}

static const char *const cpu_path_names[] = {
    [DI_CPU_PATH_AUTO] = "auto", [DI_CPU_PATH_SCALAR] = "scalar", [DI_CPU_PATH_AVX2] = "avx2",
    [DI_CPU_PATH_AVX512] = "avx512"};

int dt_parse_cpu_path(const dt_command *cmd, const char *opt, const char *text, di_cpu_path *out)
{
    for (int p = DI_CPU_PATH_AUTO; p <= DI_CPU_PATH_AVX512; p++)
        if (!strcmp(text, cpu_path_names[p])) {
            *out = (di_cpu_path)p;
            return 1;
        }
    dt_usage(cmd, "%s wants auto, scalar, avx2 or avx512, not '%s'", opt, text);
    return 0;
}

const char *dt_cpu_path_name(di_cpu_path path)
{
    return path >= DI_CPU_PATH_AUTO && path <= DI_CPU_PATH_AVX512 ? cpu_path_names[path] : "unknown";
}

const char *dt_backend_name(di_backend backend)
{
    return backend == DI_BACKEND_CUDA ? "cuda" : backend == DI_BACKEND_CPU ? "cpu" : "unknown";
}

const char *dt_profile_name(di_profile profile)
{
    return profile == DI_PROFILE_DEVICE ? "device" : profile == DI_PROFILE_PORTABLE ? "portable" : "unknown";
}

int dt_fail(const dt_command *cmd, const char *what, di_status st, const char *detail)
{
    fprintf(stderr, "detinfer %s: %s: %s%s%s\n", cmd->name, what, di_status_name(st),
            detail && *detail ? ": " : "", detail ? detail : "");
    return DT_EXIT_FAIL;
}

/* ---- Model and session --------------------------------------------------- */

int dt_load_model(const dt_command *cmd, const char *path, di_model **out)
{
    char err[512] = "";
    di_status st = di_model_load(path, out, err, sizeof err);
    if (st) {
        char what[1024];
        snprintf(what, sizeof what, "cannot load the model '%s'", path);
        return dt_fail(cmd, what, st, err);
    }
    return DT_EXIT_OK;
}

int64_t dt_model_int(const di_model *model, di_model_key key)
{
    int64_t v = 0;
    return di_model_get_int(model, key, &v) == DI_OK ? v : 0;
}

di_status dt_open_session(const di_model *model, const dt_session_opts *o, di_session **out, char *err,
                          size_t err_size)
{
    di_config *config = NULL;
    di_status st = di_config_create(&config);
    if (st) {
        snprintf(err, err_size, "cannot create a configuration");
        return st;
    }
    if ((st = di_config_set_int(config, DI_CONFIG_THREADS, o->threads)) ||
        (st = di_config_set_int(config, DI_CONFIG_MAX_SEQUENCES, o->max_sequences)) ||
        (st = di_config_set_int(config, DI_CONFIG_CONTEXT_LENGTH, o->context_length)) ||
        (st = di_config_set_int(config, DI_CONFIG_BACKEND, o->backend)) ||
        (st = di_config_set_int(config, DI_CONFIG_PROFILE, o->profile)) ||
        (st = di_config_set_int(config, DI_CONFIG_DEVICE, o->device)) ||
        (st = di_config_set_int(config, DI_CONFIG_CPU_PATH, o->cpu_path)))
        snprintf(err, err_size, "%s", di_config_errmsg(config));
    else
        st = di_session_create(model, config, out, err, err_size);
    di_config_free(config);
    return st;
}

di_status dt_tokenize(const di_model *model, const char *text, int add_bos, int32_t **tokens,
                      uint32_t *n, char *err, size_t err_size)
{
    size_t need = 0, len = strlen(text);
    uint32_t flags = add_bos ? DI_TOKENIZE_ADD_BOS : 0;
    *tokens = NULL;
    *n = 0;
    di_status st = di_model_tokenize(model, text, len, flags, NULL, 0, &need, err, err_size);
    if (st != DI_OK && st != DI_ERR_BUFFER_TOO_SMALL)
        return st;
    int32_t *t = malloc((need ? need : 1) * sizeof *t);
    if (!t) {
        snprintf(err, err_size, "out of memory");
        return DI_ERR_OUT_OF_MEMORY;
    }
    if ((st = di_model_tokenize(model, text, len, flags, t, need, &need, err, err_size))) {
        free(t);
        return st;
    }
    if (need > UINT32_MAX) {
        free(t);
        snprintf(err, err_size, "too many tokens");
        return DI_ERR_INVALID_ARGUMENT;
    }
    *tokens = t;
    *n = (uint32_t)need;
    return DI_OK;
}

char *dt_detokenize(const di_model *model, const int32_t *tokens, size_t n)
{
    size_t need = 0;
    di_status st = di_model_detokenize(model, tokens, n, NULL, 0, &need, NULL, 0);
    if (st != DI_OK && st != DI_ERR_BUFFER_TOO_SMALL)
        return NULL;
    char *text = malloc(need + 1);
    if (text && di_model_detokenize(model, tokens, n, text, need + 1, &need, NULL, 0) != DI_OK) {
        free(text);
        text = NULL;
    }
    return text;
}

char *dt_token_piece(const di_model *model, int32_t token)
{
    size_t need = 0;
    di_status st = di_model_token_piece(model, token, NULL, 0, &need);
    if (st != DI_OK && st != DI_ERR_BUFFER_TOO_SMALL)
        return NULL;
    char *text = malloc(need + 1);
    if (text && di_model_token_piece(model, token, text, need + 1, &need) != DI_OK) {
        free(text);
        text = NULL;
    }
    return text;
}

/* ---- Digests ------------------------------------------------------------- */

void dt_hex(const di_digest *d, char out[DI_DIGEST_HEX_SIZE])
{
    if (di_digest_format(d, out) != DI_OK)
        snprintf(out, DI_DIGEST_HEX_SIZE, "%s", "????????????????????????????????");
}

di_status dt_digest_bytes(const void *bytes, size_t n, di_digest *out)
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

/* ---- Output helpers ------------------------------------------------------ */

void dt_copy(char *dst, size_t n, const char *src)
{
    if (n == 0)
        return;
    size_t len = strlen(src);
    len = len < n - 1 ? len : n - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

size_t dt_utf8_length(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    uint32_t cp = len == 2 ? (s[0] & 0x1fu) : len == 3 ? (s[0] & 0x0fu) : (s[0] & 0x07u);
    for (size_t i = 1; i < len; i++)
        cp = cp << 6 | (s[i] & 0x3fu);
    /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* C-style escapes for a terminal. */
void dt_print_quoted(FILE *f, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t len = dt_utf8_length(u + i, n - i);
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\x%02x", c);
        } else if (len == 0) {
            fprintf(f, "\\x%02x", c); /* not UTF-8: the byte's value */
            len = 1;
        } else {
            fwrite(u + i, 1, len, f);
        }
        i += len ? len : 1;
    }
    fputc('"', f);
}

/* ---- Progress ------------------------------------------------------------ */

double dt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void dt_progress_init(dt_progress *p, uint64_t total, int allowed)
{
    p->enabled = allowed && isatty(STDERR_FILENO);
    p->done = 0;
    p->total = total ? total : 1;
    p->last_draw = 0;
}

void dt_progress_add(dt_progress *p, uint64_t n, const char *label)
{
    p->done += n;
    if (!p->enabled)
        return;
    double t = dt_now();
    if (t - p->last_draw < 0.1 && p->done < p->total)
        return; /* redraw at most ten times a second */
    p->last_draw = t;
    const int width = 30;
    uint64_t done = p->done > p->total ? p->total : p->done;
    int filled = (int)(done * (uint64_t)width / p->total);
    fprintf(stderr, "\r[%.*s%*s] %3d%% %-28.28s", filled, "##############################", width - filled,
            "", (int)(done * 100 / p->total), label ? label : "");
    fflush(stderr);
}

void dt_progress_end(dt_progress *p)
{
    if (p->enabled)
        fprintf(stderr, "\r%*s\r", 70, "");
}

uint64_t dt_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
