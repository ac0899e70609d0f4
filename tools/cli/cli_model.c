/*
 * cli_model.c — loading a model, opening a session from the tool's
 * settings, tokens to text and back (see cli_model.h).
 */
#include "cli/cli_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_load_model(const cli_command *cmd, const char *path, di_model **out)
{
    char err[512] = "";
    di_status st = di_model_load(path, out, err, sizeof err);
    if (st) {
        char what[1024];
        snprintf(what, sizeof what, "cannot load the model '%s'", path);
        return cli_fail(cmd, what, st, err);
    }
    return CLI_EXIT_OK;
}

int64_t cli_model_int(const di_model *model, di_model_key key)
{
    int64_t v = 0;
    return di_model_get_int(model, key, &v) == DI_OK ? v : 0;
}

/* The configuration of o into *out; else its status, with err set. */
static di_status make_config(const cli_session_opts *o, di_config **out, char *err, size_t err_size)
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
        (st = di_config_set_int(config, DI_CONFIG_ALLOW_LONG_CONTEXT, o->allow_long_context != 0)) ||
        (st = di_config_set_int(config, DI_CONFIG_BACKEND, o->backend)) ||
        (st = di_config_set_int(config, DI_CONFIG_PROFILE, o->profile)) ||
        (st = di_config_set_int(config, DI_CONFIG_DEVICE, o->device)) ||
        (st = di_config_set_int(config, DI_CONFIG_CPU_PATH, o->cpu_path))) {
        snprintf(err, err_size, "%s", di_config_errmsg(config));
        di_config_free(config);
        return st;
    }
    *out = config;
    return DI_OK;
}

di_status cli_open_session(const di_model *model, const cli_session_opts *o, di_session **out, char *err,
                           size_t err_size)
{
    di_config *config = NULL;
    di_status st = make_config(o, &config, err, err_size);
    if (!st)
        st = di_session_create(model, config, out, err, err_size);
    di_config_free(config);
    return st;
}

di_status cli_open_drafter(const di_model *model, const di_model *draft, const cli_session_opts *o,
                           di_drafter **out, char *err, size_t err_size)
{
    cli_session_opts draft_opts = *o;
    draft_opts.allow_long_context = 1; /* a draft past its training context only drafts worse */
    di_config *config = NULL;
    di_status st = make_config(&draft_opts, &config, err, err_size);
    if (!st)
        st = di_drafter_create(model, draft, config, out, err, err_size);
    di_config_free(config);
    return st;
}

di_status cli_tokenize(const di_model *model, const char *text, int add_bos, int32_t **tokens,
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

char *cli_detokenize(const di_model *model, const int32_t *tokens, size_t n, size_t *len)
{
    if (len)
        *len = 0;
    size_t need = 0;
    di_status st = di_model_detokenize(model, tokens, n, NULL, 0, &need, NULL, 0);
    if (st != DI_OK && st != DI_ERR_BUFFER_TOO_SMALL)
        return NULL;
    char *text = malloc(need + 1);
    if (text && di_model_detokenize(model, tokens, n, text, need + 1, &need, NULL, 0) != DI_OK) {
        free(text);
        text = NULL;
    }
    if (text && len)
        *len = need;
    return text;
}

char *cli_token_piece(const di_model *model, int32_t token)
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

