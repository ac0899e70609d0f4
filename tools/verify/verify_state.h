/*
 * verify_state.h — the state of one `detinfer verify` run, shared
 * by its files: verify.c (options, main), _plan.c (the axes),
 * _run.c (running them), _compare.c (traces against the reference),
 * _report.c (text) and _json.c (--json).
 */
#ifndef DETINFER_VERIFY_STATE_H
#define DETINFER_VERIFY_STATE_H

#include <stdint.h>

#include "verify/verify.h"

#define MAX_LIST 16
#define N_CPU_PATHS 3 /* scalar, avx2, avx512 */
#define MAX_ROWS (2 + 5 * MAX_LIST + N_CPU_PATHS) /* repeat, mixed, five lists of axes, paths */
#define TIE_CHUNK_TAIL 32 /* near ties on the chunk axis: their last 32 tokens chunked */

typedef struct verify_opts {
    const char *model, *prompts;
    long reps, max_new, processes, near_ties, tie_positions, seed, sampled;
    long batch[MAX_LIST], threads[MAX_LIST], chunks[MAX_LIST];
    int n_batch, n_threads, n_chunks;
    di_backend backends[MAX_LIST];
    int n_backends;
    di_backend backend;
    di_profile profile;
    long device;
    di_cpu_path cpu_path;
    int json, progress;
} verify_opts;

typedef enum row_status { ROW_OK, ROW_MISMATCH, ROW_SKIPPED, ROW_ERROR } row_status;

/* One run of the plan: one axis changed from the reference. */
typedef struct vrow {
    const char *axis;
    char value[32];
    uint32_t batch, chunk, n_queue;
    long threads;
    di_backend backend;
    di_cpu_path cpu_path;
    int fresh;       /* run in a fresh process */
    int perturbable; /* the test hooks may act here (batch > 1) */
    uint64_t seed;
    row_status status;
    uint64_t requests, rows, differing;
    double seconds, tie_seconds; /* the near ties' share of seconds */
    char detail[320];
} vrow;

typedef struct mismatch {
    int set;
    uint32_t row, request, prompt, slot, pos;
    int64_t choice; /* generated token index at pos, or -1 for a prompt position */
    di_digest want, got, want_sequence, got_sequence;
    int32_t want_token, got_token;
} mismatch;

/* What one run of the plan gave at one near tie's position. */
typedef struct tie_result {
    uint32_t runs;    /* evaluations (0: the run did not reach it: skipped or failed) */
    int32_t token;    /* the chosen token: the first that differed, else the first */
    di_digest digest; /* its logits row's digest, likewise */
    int held;         /* every evaluation chose the reference token with the same digest */
} tie_result;

typedef struct verify {
    verify_opts o;
    di_model *model;
    int64_t n_vocab;
    uint32_t longest; /* the longest prompt or near-tie prefix */
    vf_prompt_set prompts;
    vf_trace *ref;       /* [n prompts] the reference traces */
    vf_prompt_set search; /* the prompts the near-tie search started from */
    vf_near_ties ties;   /* what it found: the references of the near ties */
    vf_prompt *tie_prompts; /* [ties.n] each near tie's prefix, run for one token */
    tie_result *tie_results; /* [ties.n][MAX_ROWS] */
    vrow rows[MAX_ROWS];
    uint32_t n_rows, current;
    mismatch first;
    cli_progress progress;
    vf_test_hooks hooks; /* TEST ONLY */
    double ref_seconds;
} verify;

extern const cli_command vf_command;

/* verify_plan.c: the runs, one axis changed from the reference each. */
void verify_plan(verify *v);

/* verify_run.c */
int verify_run_reference(verify *v); /* CLI_EXIT_OK, or CLI_EXIT_FAIL after printing why */
void verify_run_row(verify *v, uint32_t index);

/* verify_compare.c: the engine's callbacks (ctx is the verify). */
void verify_keep_reference(void *ctx, uint32_t request, const vf_trace *t);
void verify_compare_trace(void *ctx, uint32_t request, const vf_trace *t);
/* A near tie's result from one run of the plan (trace->prompt is the tie's
 * index): its token and logits digest at the tie's position, compared with
 * the reference's. */
void verify_record_tie(void *ctx, uint32_t request, const vf_trace *t);
/* 1 when token and digest are the near tie's reference token and digest. */
int verify_tie_held(const vf_near_tie *tie, int32_t token, const di_digest *digest);
/* The (near tie, run) pairs where the result differs from the reference. */
uint32_t verify_ties_differing(const verify *v);
/* 1 when every run matched and every near tie held; the totals over the
 * reference and every run. */
int verify_verdict(const verify *v, uint64_t *requests, uint64_t *rows, uint32_t *bad_rows);

/* verify_report.c */
const char *verify_status_word(row_status s);
void verify_chunk_text(uint32_t chunk, char *buf, size_t n);
/* A near tie's result on run `row`: "held", "DIFFERS", "skipped" or "error". */
const char *verify_tie_word(const verify *v, uint32_t tie, uint32_t row);
void verify_print_text(const verify *v);

/* verify_json.c: CLI_EXIT_OK, or CLI_EXIT_FAIL when it cannot be written. */
int verify_print_json(const verify *v);

#endif /* DETINFER_VERIFY_STATE_H */
