/*
 * cli_model.h — the model and session helpers of the detinfer tool: load a
 * model (printing why not), open a session from the tool's settings, read
 * an integer fact of the model, tokens to text and back.
 */
#ifndef CLI_MODEL_H
#define CLI_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <detinfer.h>

#include "cli/cli_options.h"

typedef struct cli_session_opts {
    di_backend backend;
    di_profile profile;
    long threads;
    long max_sequences;
    int64_t context_length; /* 0: the library's default */
    long device;            /* CUDA device ordinal (DI_CONFIG_DEVICE) */
    di_cpu_path cpu_path;   /* DI_CONFIG_CPU_PATH; DI_CPU_PATH_AUTO is 0 */
    int allow_long_context; /* DI_CONFIG_ALLOW_LONG_CONTEXT */
} cli_session_opts;

/* Loads a model; on failure prints the reason and returns CLI_EXIT_FAIL. */
int cli_load_model(const cli_command *cmd, const char *path, di_model **out);
/* A session with these settings; err receives the detail of a failure. */
di_status cli_open_session(const di_model *model, const cli_session_opts *o, di_session **out, char *err,
                           size_t err_size);
/* A drafter of the draft model for model's sessions, its session made as
 * cli_open_session makes one (past the draft's training context if need be). */
di_status cli_open_drafter(const di_model *model, const di_model *draft, const cli_session_opts *o,
                           di_drafter **out, char *err, size_t err_size);
/* The value of an integer key; 0 when the model has none. */
int64_t cli_model_int(const di_model *model, di_model_key key);

/* Text to tokens; *tokens is malloc'ed. DI_ERR_UNSUPPORTED when the model
 * has no tokenizer. */
di_status cli_tokenize(const di_model *model, const char *text, int add_bos, int32_t **tokens,
                       uint32_t *n, char *err, size_t err_size);
/* Tokens to text, malloc'ed and NUL-terminated; NULL when it cannot. */
char *cli_detokenize(const di_model *model, const int32_t *tokens, size_t n, size_t *len);
/* The text of one token, malloc'ed; NULL when the model has no tokenizer. */
char *cli_token_piece(const di_model *model, int32_t token);

#endif /* CLI_MODEL_H */
