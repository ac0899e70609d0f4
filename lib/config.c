/*
 * config.c — enum-keyed settings with range checks, and the greedy rule:
 * a sampling setting that would make temperature 0 non-greedy is refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

void di_config_defaults(struct di_config *c)
{
    memset(c, 0, sizeof *c);
    c->threads = 1;
    c->max_sequences = 1;
    c->context_length = 0;
    c->backend = DI_BACKEND_CPU;
    c->profile = DI_PROFILE_PORTABLE;
    c->top_p = 1.0;
    c->repetition_penalty = 1.0;
}

DI_API di_status di_config_create(di_config **out)
{
    if (!out)
        return DI_ERR_INVALID_ARGUMENT;
    *out = malloc(sizeof **out);
    if (!*out)
        return DI_ERR_OUT_OF_MEMORY;
    di_config_defaults(*out);
    return DI_OK;
}

DI_API void di_config_free(di_config *c)
{
    free(c);
}

DI_API const char *di_config_errmsg(const di_config *c)
{
    return c ? c->errmsg : "config is NULL";
}

static di_status out_of_range(di_config *c, const char *name, long long v, long long lo, long long hi)
{
    return di_error(c->errmsg, sizeof c->errmsg, DI_ERR_INVALID_ARGUMENT,
                    "%s = %lld is outside [%lld, %lld]", name, v, lo, hi);
}

static di_status refused(di_config *c, const char *name, double v, const char *neutral)
{
    return di_error(c->errmsg, sizeof c->errmsg, DI_ERR_SAMPLING_REFUSED,
                    "%s = %g refused: only greedy decoding (temperature 0, argmax, ties to the "
                    "lowest id) is supported; %s",
                    name, v, neutral);
}

static di_status wrong_type(di_config *c, int key, const char *want)
{
    return di_error(c->errmsg, sizeof c->errmsg, DI_ERR_UNKNOWN_KEY,
                    "configuration key %d is unknown or not %s", key, want);
}

DI_API di_status di_config_set_int(di_config *c, di_config_key key, int64_t v)
{
    if (!c)
        return DI_ERR_INVALID_ARGUMENT;
    c->errmsg[0] = '\0';
    switch (key) {
    case DI_CONFIG_THREADS:
        if (v < 1 || v > DI_MAX_THREADS)
            return out_of_range(c, "threads", v, 1, DI_MAX_THREADS);
        c->threads = v;
        return DI_OK;
    case DI_CONFIG_MAX_SEQUENCES:
        if (v < 1 || v > DI_MAX_SEQUENCES)
            return out_of_range(c, "max_sequences", v, 1, DI_MAX_SEQUENCES);
        c->max_sequences = v;
        return DI_OK;
    case DI_CONFIG_CONTEXT_LENGTH:
        if (v < 0 || v > DI_MAX_CONTEXT)
            return out_of_range(c, "context_length", v, 0, DI_MAX_CONTEXT);
        c->context_length = v;
        return DI_OK;
    case DI_CONFIG_BACKEND:
        if (v != DI_BACKEND_CPU && v != DI_BACKEND_CUDA)
            return out_of_range(c, "backend", v, DI_BACKEND_CPU, DI_BACKEND_CUDA);
        c->backend = v;
        return DI_OK;
    case DI_CONFIG_PROFILE:
        if (v != DI_PROFILE_PORTABLE && v != DI_PROFILE_DEVICE)
            return out_of_range(c, "profile", v, DI_PROFILE_PORTABLE, DI_PROFILE_DEVICE);
        c->profile = v;
        return DI_OK;
    case DI_CONFIG_DO_SAMPLE:
        if (v != 0)
            return refused(c, "do_sample", (double)v, "do_sample must be 0");
        c->do_sample = v;
        return DI_OK;
    case DI_CONFIG_TOP_K:
        if (v != 0)
            return refused(c, "top_k", (double)v, "top_k must be 0 (no filter)");
        c->top_k = v;
        return DI_OK;
    case DI_CONFIG_SEED:
        c->seed = v;
        return DI_OK;
    case DI_CONFIG_CPU_PATH:
        if (v < DI_CPU_PATH_AUTO || v > DI_CPU_PATH_AVX512)
            return out_of_range(c, "cpu_path", v, DI_CPU_PATH_AUTO, DI_CPU_PATH_AVX512);
        c->cpu_path = v;
        return DI_OK;
    case DI_CONFIG_DEVICE:
        if (v < 0 || v > DI_MAX_DEVICE)
            return out_of_range(c, "device", v, 0, DI_MAX_DEVICE);
        c->device = v;
        return DI_OK;
    default:
        return wrong_type(c, (int)key, "an integer key");
    }
}

DI_API di_status di_config_set_float(di_config *c, di_config_key key, double v)
{
    if (!c)
        return DI_ERR_INVALID_ARGUMENT;
    c->errmsg[0] = '\0';
    switch (key) {
    case DI_CONFIG_TEMPERATURE:
        if (v != 0.0)
            return refused(c, "temperature", v,
                           "temperature must be 0 (seeded sampling is not in this release)");
        c->temperature = v;
        return DI_OK;
    case DI_CONFIG_TOP_P:
        if (v != 1.0)
            return refused(c, "top_p", v, "top_p must be 1.0 (no filter)");
        c->top_p = v;
        return DI_OK;
    case DI_CONFIG_REPETITION_PENALTY:
        if (v != 1.0)
            return refused(c, "repetition_penalty", v, "repetition_penalty must be 1.0 (none)");
        c->repetition_penalty = v;
        return DI_OK;
    default:
        return wrong_type(c, (int)key, "a float key");
    }
}

DI_API di_status di_config_get_int(const di_config *c, di_config_key key, int64_t *out)
{
    if (!c || !out)
        return DI_ERR_INVALID_ARGUMENT;
    switch (key) {
    case DI_CONFIG_THREADS: *out = c->threads; return DI_OK;
    case DI_CONFIG_MAX_SEQUENCES: *out = c->max_sequences; return DI_OK;
    case DI_CONFIG_CONTEXT_LENGTH: *out = c->context_length; return DI_OK;
    case DI_CONFIG_BACKEND: *out = c->backend; return DI_OK;
    case DI_CONFIG_PROFILE: *out = c->profile; return DI_OK;
    case DI_CONFIG_DO_SAMPLE: *out = c->do_sample; return DI_OK;
    case DI_CONFIG_TOP_K: *out = c->top_k; return DI_OK;
    case DI_CONFIG_SEED: *out = c->seed; return DI_OK;
    case DI_CONFIG_CPU_PATH: *out = c->cpu_path; return DI_OK;
    case DI_CONFIG_DEVICE: *out = c->device; return DI_OK;
    default: return DI_ERR_UNKNOWN_KEY;
    }
}

DI_API di_status di_config_get_float(const di_config *c, di_config_key key, double *out)
{
    if (!c || !out)
        return DI_ERR_INVALID_ARGUMENT;
    switch (key) {
    case DI_CONFIG_TEMPERATURE: *out = c->temperature; return DI_OK;
    case DI_CONFIG_TOP_P: *out = c->top_p; return DI_OK;
    case DI_CONFIG_REPETITION_PENALTY: *out = c->repetition_penalty; return DI_OK;
    default: return DI_ERR_UNKNOWN_KEY;
    }
}
