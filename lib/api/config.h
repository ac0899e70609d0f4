/*
 * config.h — the settings a di_config holds (read by session.c).
 */
#ifndef DI_CONFIG_H
#define DI_CONFIG_H

#include <stdint.h>
#include "detinfer.h"
#include "lib/base/errors.h"

#define DI_MAX_THREADS 256
#define DI_MAX_SEQUENCES 4096
#define DI_MAX_CONTEXT (1 << 24)
#define DI_DEFAULT_CONTEXT_CAP 4096
#define DI_MAX_DEVICE 255

struct di_config {
    int64_t threads;
    int64_t max_sequences;
    int64_t context_length;   /* 0: the model's, capped at DI_DEFAULT_CONTEXT_CAP */
    int64_t backend;
    int64_t profile;
    int64_t do_sample;
    int64_t top_k;
    int64_t seed;
    int64_t cpu_path;         /* a di_cpu_path; DI_CPU_PATH_AUTO (0) by default */
    int64_t device;           /* CUDA device ordinal */
    int64_t allow_long_context; /* 1: context_length may exceed the model's training context */
    double temperature;
    double top_p;
    double repetition_penalty;
    char errmsg[DI_ERRMSG_SIZE];
};

/* The defaults, for sessions created with a NULL config. */
void di_config_defaults(struct di_config *c);

/* The sampling parameters a session's sequences start with (the sampling
 * keys); DI_ERR_SAMPLING_REFUSED when do_sample and temperature disagree. */
di_status di_config_sampling(const struct di_config *c, di_sampling_params *out, char *errbuf,
                             size_t errbuf_size);

#endif /* DI_CONFIG_H */
