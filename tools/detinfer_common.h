/*
 * detinfer_common.h — what the subcommands of the detinfer tool share:
 * option parsing from a table (which also writes --help), value parsers,
 * error messages, a stderr progress bar, loading a
 * model and opening a session, tokenizing, digests of bytes.
 *
 * The tool uses only the public API of include/detinfer.h.
 */
#ifndef DETINFER_COMMON_H
#define DETINFER_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <detinfer.h>

/* Exit codes of every subcommand. */
#define DT_EXIT_OK 0
#define DT_EXIT_FAIL 1  /* a mismatch, a failed check or a library error */
#define DT_EXIT_USAGE 2 /* bad arguments */

/* ---- Options --------------------------------------------------------------
 * A subcommand describes its options in a table; the parser returns the
 * index of each option it meets, and the same table prints --help. */
typedef struct dt_option {
    const char *name;    /* "--model" */
    const char *metavar; /* "FILE"; NULL for a flag */
    const char *help;    /* one line; NULL hides the option from --help */
} dt_option;

typedef struct dt_command {
    const char *name;        /* "run" */
    const char *synopsis;    /* "--model FILE (--prompt TEXT | --tokens LIST) [options]" */
    const char *description; /* a paragraph printed under the synopsis */
    const dt_option *options; /* ends with a {NULL} entry */
} dt_command;

typedef struct dt_parser {
    const dt_command *cmd;
    int argc;
    char **argv;
    int next; /* index of the next argument */
} dt_parser;

#define DT_OPT_END (-1)  /* no more arguments */
#define DT_OPT_BAD (-2)  /* a usage error, already printed */
#define DT_OPT_HELP (-3) /* --help or -h */

/* argv[0] is the subcommand's name; options start at argv[1]. */
void dt_parser_init(dt_parser *p, const dt_command *cmd, int argc, char **argv);
/* The index of the next option in cmd->options (its value, if it takes one,
 * in *value: "--opt VALUE" or "--opt=VALUE"), or one of DT_OPT_*. */
int dt_next_option(dt_parser *p, const char **value);
/* Reads every option of argv and hands each to apply(index in cmd->options,
 * value or NULL, opts), which returns 0 after printing a usage error; marks
 * given[index] when given is not NULL. Returns DT_EXIT_OK, DT_EXIT_USAGE, or
 * -1 after printing the help for --help. */
int dt_parse_options(const dt_command *cmd, int argc, char **argv,
                     int (*apply)(int k, const char *value, void *opts), void *opts, int *given);
/* Prints "detinfer CMD: MESSAGE" and a pointer to --help; returns DT_EXIT_USAGE. */
int dt_usage(const dt_command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dt_print_help(const dt_command *cmd, FILE *f);

/* Value parsers: 1 on success; 0 after printing a usage error naming opt. */
int dt_parse_long(const dt_command *cmd, const char *opt, const char *text, long lo, long hi, long *out);
int dt_parse_long_list(const dt_command *cmd, const char *opt, const char *text, long lo, long hi,
                       long *out, int max, int *n);
/* Token ids separated by commas or spaces; *tokens is malloc'ed. */
/* Token ids separated by commas, spaces or tabs, each in [0, limit), into a
 * new array: DI_OK, DI_ERR_TOKEN_RANGE (malformed or out of range),
 * DI_ERR_INVALID_ARGUMENT (no ids) or DI_ERR_OUT_OF_MEMORY. */
di_status dt_token_list(const char *text, int64_t limit, int32_t **out, uint32_t *n);
int dt_parse_tokens(const dt_command *cmd, const char *opt, const char *text, int32_t **tokens,
                    uint32_t *n);
int dt_parse_backend(const dt_command *cmd, const char *opt, const char *text, di_backend *out);
int dt_parse_profile(const dt_command *cmd, const char *opt, const char *text, di_profile *out);
/* --device N (0..255) and --cpu-path auto|scalar|avx2|avx512 */
int dt_parse_device(const dt_command *cmd, const char *opt, const char *text, long *out);
int dt_parse_cpu_path(const dt_command *cmd, const char *opt, const char *text, di_cpu_path *out);
const char *dt_cpu_path_name(di_cpu_path path);
const char *dt_backend_name(di_backend backend);
const char *dt_profile_name(di_profile profile);

/* Prints "detinfer CMD: WHAT: STATUS_NAME: DETAIL"; returns DT_EXIT_FAIL. */
int dt_fail(const dt_command *cmd, const char *what, di_status st, const char *detail);

/* ---- Model and session --------------------------------------------------- */
typedef struct dt_session_opts {
    di_backend backend;
    di_profile profile;
    long threads;
    long max_sequences;
    int64_t context_length; /* 0: the library's default */
    long device;            /* CUDA device ordinal (DI_CONFIG_DEVICE) */
    di_cpu_path cpu_path;   /* DI_CONFIG_CPU_PATH; DI_CPU_PATH_AUTO is 0 */
} dt_session_opts;

/* Loads a model; on failure prints the reason and returns DT_EXIT_FAIL. */
int dt_load_model(const dt_command *cmd, const char *path, di_model **out);
/* A session with these settings; err receives the detail of a failure. */
di_status dt_open_session(const di_model *model, const dt_session_opts *o, di_session **out, char *err,
                          size_t err_size);
int64_t dt_model_int(const di_model *model, di_model_key key);

/* Text to tokens; *tokens is malloc'ed. DI_ERR_UNSUPPORTED when the model
 * has no tokenizer. */
di_status dt_tokenize(const di_model *model, const char *text, int add_bos, int32_t **tokens,
                      uint32_t *n, char *err, size_t err_size);
/* Tokens to text, malloc'ed and NUL-terminated; NULL when it cannot. */
char *dt_detokenize(const di_model *model, const int32_t *tokens, size_t n);
/* The text of one token, malloc'ed; NULL when the model has no tokenizer. */
char *dt_token_piece(const di_model *model, int32_t token);

/* ---- Digests --------------------------------------------------------------- */
void dt_hex(const di_digest *d, char out[DI_DIGEST_HEX_SIZE]);
/* XXH3-128 of n bytes, n a multiple of 4 (what xxh128sum prints for them):
 * the bytes are packed into little-endian int32 words for di_digest_tokens. */
di_status dt_digest_bytes(const void *bytes, size_t n, di_digest *out);

/* ---- Output helpers ------------------------------------------------------ */
/* Copies src into dst[n], cut to fit; dst is always NUL-terminated. */
void dt_copy(char *dst, size_t n, const char *src);
/* Writes s (n bytes) between double quotes with C-style escapes for
 * control characters, quotes, backslashes and bytes that are not UTF-8. */
void dt_print_quoted(FILE *f, const char *s, size_t n);
/* Length of the valid UTF-8 sequence at s (n >= 1 bytes); 0 when it is not
 * UTF-8 (overlong forms, surrogates and values past U+10FFFF are not). */
size_t dt_utf8_length(const unsigned char *s, size_t n);

/* A progress bar on stderr, drawn only when stderr is a terminal. */
typedef struct dt_progress {
    int enabled;
    uint64_t done, total;
    double last_draw;
} dt_progress;

void dt_progress_init(dt_progress *p, uint64_t total, int allowed);
void dt_progress_add(dt_progress *p, uint64_t n, const char *label);
void dt_progress_end(dt_progress *p);

double dt_now(void); /* seconds, monotonic */
/* splitmix64: small deterministic random numbers for shuffles and prompts. */
uint64_t dt_rand(uint64_t *state);

/* ---- Subcommands (argv[0] is the subcommand's name) ---------------------- */
int dt_cmd_run(int argc, char **argv);
int dt_cmd_verify(int argc, char **argv);
int dt_cmd_verify_url(int argc, char **argv); /* verify --url: a live server */
int dt_cmd_verify_child(int argc, char **argv); /* hidden: the fresh-process axis */
int dt_cmd_doctor(int argc, char **argv);
int dt_cmd_bench(int argc, char **argv);
int dt_cmd_serve(int argc, char **argv); /* tools/serve/ */

#endif /* DETINFER_COMMON_H */
