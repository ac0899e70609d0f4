/*
 * detinfer_verify_state.h — the state of one `detinfer verify` run, shared
 * by its files: detinfer_verify.c (options, main), _plan.c (the axes),
 * _run.c (running them), _compare.c (traces against the reference),
 * _report.c (text) and _json.c (--json).
 */
#ifndef DETINFER_VERIFY_STATE_H
#define DETINFER_VERIFY_STATE_H

#include <stdint.h>

#include "detinfer_verify.h"

#define MAX_LIST 16
#define MAX_ROWS (2 + 5 * MAX_LIST) /* repeat, mixed, and five lists of axes */
typedef struct verify_opts {
    const char *model, *prompts;
    long reps, max_new, processes, ties, candidates, seed, sampled;
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
    int fresh;       /* run in a fresh process */
    int perturbable; /* the test hook may act here (batch > 1) */
    uint64_t seed;
    row_status status;
    uint64_t requests, rows, differing;
    double seconds;
    char detail[320];
} vrow;

typedef struct mismatch {
    int set;
    uint32_t row, request, prompt, slot, pos;
    int64_t choice; /* generated token index at pos, or -1 for a prompt position */
    di_digest want, got, want_sequence, got_sequence;
    int32_t want_token, got_token;
} mismatch;

typedef struct tie_count {
    uint32_t held, reached; /* runs that chose the reference token / reached it with the same history */
} tie_count;

typedef struct verify {
    verify_opts o;
    di_model *model;
    int64_t n_vocab;
    uint32_t longest;
    dt_prompt_set prompts;
    dt_trace *ref;    /* [n prompts] the reference traces */
    tie_count *ties;  /* [n prompts][max_new] */
    vrow rows[MAX_ROWS];
    uint32_t n_rows, current;
    mismatch first;
    dt_progress progress;
    dt_perturb perturb; /* TEST ONLY: batched runs */
    double ref_seconds;
} verify;

extern const dt_command dt_verify_command;

/* detinfer_verify_plan.c: the runs, one axis changed from the reference each. */
void verify_plan(verify *v);

/* detinfer_verify_run.c */
int verify_run_reference(verify *v); /* DT_EXIT_OK, or DT_EXIT_FAIL after printing why */
void verify_run_row(verify *v, uint32_t index);

/* detinfer_verify_compare.c: the engine's callbacks (ctx is the verify). */
void verify_keep_reference(void *ctx, uint32_t request, const dt_trace *t);
void verify_compare_trace(void *ctx, uint32_t request, const dt_trace *t);
/* 1 when every run matched; the totals over the reference and every run. */
int verify_verdict(const verify *v, uint64_t *requests, uint64_t *rows, uint32_t *bad_rows);

typedef struct tie {
    uint32_t prompt, choice;
    double gap;
} tie;
/* The smallest top-2 gaps of the reference run's greedy requests, smallest
 * first, in a new array; returns how many to report. */
uint32_t verify_smallest_gaps(const verify *v, tie **out);

/* detinfer_verify_report.c */
const char *verify_status_word(row_status s);
void verify_chunk_text(uint32_t chunk, char *buf, size_t n);
void verify_print_text(const verify *v);

/* detinfer_verify_json.c: DT_EXIT_OK, or DT_EXIT_FAIL when it cannot be written. */
int verify_print_json(const verify *v);

#endif /* DETINFER_VERIFY_STATE_H */
