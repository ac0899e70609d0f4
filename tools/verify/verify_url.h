/*
 * verify_url.h — the state of one `detinfer verify --url` run, shared
 * by its files: verify_url.c (options, the server's facts, sending the
 * requests, main), verify_url_plan.c (the probes, their request bodies and
 * local references), verify_http.c (the HTTP client), verify_compare.c
 * (each response against its reference) and verify_report.c (the text).
 */
#ifndef DETINFER_VERIFY_URL_H
#define DETINFER_VERIFY_URL_H

#include <pthread.h>
#include <stdint.h>

#include "verify/verify.h"
#include "verify/verify_http.h"

typedef struct vu_opts {
    const char *url, *model, *key_file, *save_dir;
    long reps, max_new, concurrency, traffic, ties, seed, timeout;
} vu_opts;

/* What one response (or the local reference) gave. */
typedef struct vu_outcome {
    int ok;
    char error[256];
    int32_t *tokens;
    char (*digests)[DI_DIGEST_HEX_SIZE];
    uint32_t n;
    char sequence[DI_DIGEST_HEX_SIZE];
    long difference; /* vu_compare: -1 when equal to the reference, else the first differing position */
} vu_outcome;

/* One distinct request, sent `reps` times. */
typedef struct vu_probe {
    char label[96];
    const char *kind; /* greedy, near-tie, sampled, json, traffic */
    int constrained;  /* generated under the JSON schema of the constrained probes */
    int32_t *prompt;
    uint32_t n_prompt, max_new, reps;
    int sampled;
    double temperature, top_p;
    long long seed;
    vu_outcome ref;
    const char *ref_source;
    vu_outcome *got; /* reps of them */
    uint32_t matched;
    const vu_outcome *reference; /* vu_compare: ref, or the first good response; NULL when none */
} vu_probe;

typedef struct vu_job {
    uint32_t probe, rep;
} vu_job;

typedef struct vu {
    vu_opts o;
    vf_http http;
    char *key;
    vu_probe *p;
    uint32_t n_probes;
    vu_job *jobs;
    uint32_t n_jobs, next_job;
    pthread_mutex_t lock;
    di_model *model;
    /* From GET /v1/models. */
    char server_model[128], server_digest[64], server_version[64], server_backend[256];
    di_profile profile; /* the server's (its fingerprint): the local references run it */
    long long n_vocab, context, bos;
    int sampling;
} vu;

extern const cli_command vu_command;

/* verify_url_plan.c: the probes and the shuffled jobs from the server's
 * facts (and near ties found on the local model); CLI_EXIT_OK, or another
 * exit status after saying why. */
int vu_plan(vu *v);
/* With --model, each probe's reference from the local library, run alone in
 * the server's profile; CLI_EXIT_OK, or CLI_EXIT_FAIL after saying why. */
int vu_references(vu *v);
/* The probe as the JSON body of POST /v1/completions (free() it); NULL when out of memory. */
char *vu_request_json(const vu_probe *p);
/* Room for n tokens and digests (o->n = n); 0, or -1 when out of memory. */
int vu_outcome_alloc(vu_outcome *o, uint32_t n);
void vu_outcome_free(vu_outcome *o);
/* Frees the probes, their outcomes and the jobs. */
void vu_plan_free(vu *v);

/* verify_compare.c: every response against its probe's reference (the local
 * one, else the first good response); fills matched, reference and each
 * response's difference. Returns the failed and differing responses. */
uint32_t vu_compare(vu *v);

/* verify_report.c: each failed and differing response, then the table and
 * the verdict (seconds: the time the requests took). */
void vu_print_report(const vu *v, double seconds);

#endif /* DETINFER_VERIFY_URL_H */
