/*
 * batch_vs_prefill.c — the same 16 rows through the forward pass two ways,
 * alternately in one process (docs/PERFORMANCE-LOG.md): a step of 16 sequences
 * with one token each (batched decode) and a step of one sequence with 16
 * tokens (prefill), each timed in thread CPU time, on one thread.
 *
 *   make research (build/research/batch_vs_prefill)
 *   build/research/batch_vs_prefill MODEL [REPS]
 *
 * The first batched step also pages the weights in; compare the later ones.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "detinfer.h"

#define ROWS 16u

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [REPS]\n", argv[0]);
        return 2;
    }
    const int reps = argc > 2 ? atoi(argv[2]) : 3;
    char err[512] = "";
    di_model *m = NULL;
    di_config *c = NULL;
    di_session *s = NULL;
    if (di_model_load(argv[1], &m, err, sizeof err) || di_config_create(&c) ||
        di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, ROWS + 1) || di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, 64) ||
        di_session_create(m, c, &s, err, sizeof err)) {
        fprintf(stderr, "setup failed: %s\n", err);
        return 1;
    }
    uint32_t ids[ROWS], ones[ROWS], last = ROWS, n_rows = ROWS;
    int32_t toks[ROWS];
    int64_t n_vocab = 1;
    di_model_get_int(m, DI_MODEL_N_VOCAB, &n_vocab);
    for (uint32_t i = 0; i < ROWS; i++) {
        ids[i] = i;
        ones[i] = 1;
        toks[i] = (int32_t)((i * 7919 + 13) % n_vocab);
    }
    for (int rep = 0; rep < reps; rep++) {
        for (uint32_t i = 0; i <= ROWS; i++)
            di_session_seq_reset(s, i);
        const double t0 = cpu_seconds();
        di_status st = di_session_step(s, ROWS, ids, ones, toks, 0);
        const double t1 = cpu_seconds();
        if (!st)
            st = di_session_step(s, 1, &last, &n_rows, toks, 0);
        const double t2 = cpu_seconds();
        if (st) {
            fprintf(stderr, "step: %s\n", di_session_errmsg(s));
            return 1;
        }
        printf("rep %d: %u sequences x 1 token %.3f s | 1 sequence x %u tokens %.3f s\n", rep, ROWS, t1 - t0, ROWS,
               t2 - t1);
    }
    di_session_free(s);
    di_config_free(c);
    di_model_free(m);
    return 0;
}
