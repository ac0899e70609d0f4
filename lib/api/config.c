/*
 * config.c — enum-keyed settings with range checks. The sampling keys are the
 * parameters a session's sequences start with, checked by the same rules as
 * di_session_seq_set_sampling (sampling.c).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/config.h"
#include "lib/api/sampling.h"

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

/* The float a double setting becomes (out-of-range values: infinities). */
static float to_float(double v)
{
    if (v != v)
        return NAN;
    if (fabs(v) > FLT_MAX)
        return v > 0 ? INFINITY : -INFINITY;
    return (float)v;
}

/* The parameters a session created with this config gives its sequences. */
static void sampling_of(const struct di_config *c, di_sampling_params *p)
{
    di_sampling_defaults(p);
    p->temperature = to_float(c->temperature);
    p->top_p = to_float(c->top_p);
    p->top_k = (int32_t)c->top_k;
    p->repetition_penalty = to_float(c->repetition_penalty);
    p->seed = (uint64_t)c->seed;
}

/* Checks a sampling key's new value with the per-sequence rules. */
static di_status check_sampling(di_config *c, const struct di_config *changed)
{
    di_sampling_params p, accepted;
    sampling_of(changed, &p);
    return di_sampling_accept(&p, &accepted, c->errmsg, sizeof c->errmsg);
}

di_status di_config_sampling(const struct di_config *c, di_sampling_params *out, char *errbuf,
                             size_t errbuf_size)
{
    sampling_of(c, out);
    if (c->do_sample && out->temperature == 0.0f)
        return di_error(errbuf, errbuf_size, DI_ERR_SAMPLING_REFUSED,
                        "do_sample = 1 with temperature = 0: set DI_CONFIG_TEMPERATURE > 0 to "
                        "sample, or do_sample to 0 for greedy decoding");
    if (!c->do_sample && out->temperature > 0.0f)
        return di_error(errbuf, errbuf_size, DI_ERR_SAMPLING_REFUSED,
                        "temperature = %g with do_sample = 0: set DI_CONFIG_DO_SAMPLE to 1 to "
                        "sample, or temperature to 0 for greedy decoding",
                        (double)out->temperature);
    return DI_OK;
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
        if (v != DI_PROFILE_PORTABLE && v != DI_PROFILE_DEVICE && v != DI_PROFILE_INTEGER)
            return out_of_range(c, "profile", v, DI_PROFILE_PORTABLE, DI_PROFILE_INTEGER);
        c->profile = v;
        return DI_OK;
    case DI_CONFIG_DO_SAMPLE:
        if (v != 0 && v != 1)
            return out_of_range(c, "do_sample", v, 0, 1);
        c->do_sample = v;
        return DI_OK;
    case DI_CONFIG_TOP_K: {
        if (v > INT32_MAX)
            return out_of_range(c, "top_k", v, 0, INT32_MAX);
        struct di_config changed = *c;
        changed.top_k = v < INT32_MIN ? INT32_MIN : v;
        di_status st = check_sampling(c, &changed);
        if (st)
            return st;
        c->top_k = v;
        return DI_OK;
    }
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
    case DI_CONFIG_ALLOW_LONG_CONTEXT:
        if (v != 0 && v != 1)
            return out_of_range(c, "allow_long_context", v, 0, 1);
        c->allow_long_context = v;
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
    struct di_config changed = *c;
    switch (key) {
    case DI_CONFIG_TEMPERATURE: changed.temperature = v; break;
    case DI_CONFIG_TOP_P: changed.top_p = v; break;
    case DI_CONFIG_REPETITION_PENALTY: changed.repetition_penalty = v; break;
    default:
        return wrong_type(c, (int)key, "a float key");
    }
    di_status st = check_sampling(c, &changed);
    if (st)
        return st;
    changed.errmsg[0] = '\0';
    memcpy(c, &changed, sizeof *c);
    return DI_OK;
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
    case DI_CONFIG_ALLOW_LONG_CONTEXT: *out = c->allow_long_context; return DI_OK;
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
