/*
 * step_cost.c — one workload for instruction counts (docs/PERFORMANCE-LOG.md):
 * prefill a prompt into each of S sequences, then K decode steps that each
 * advance all S sequences by one token (their greedy tokens), on one thread.
 * Under `valgrind --tool=callgrind --instr-atstart=no`, only the K decode
 * steps are counted (callgrind's client requests switch the instrumentation
 * on and off around them): the count divided by K is the cost of one
 * S-sequence decode step.
 *
 *   make research; build/research/step_cost MODEL PROFILE S K [TOKENS]
 *     PROFILE  portable | integer;  TOKENS  comma-separated prompt ids
 *
 * Prints the digest of every sequence's last logits, so runs can be compared.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detinfer.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_START_INSTRUMENTATION /* no valgrind headers: nothing to switch */
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#define MAX_SEQS 64
#define MAX_PROMPT 256

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL portable|integer SEQS STEPS [TOKENS]\n", argv[0]);
        return 2;
    }
    const int profile = strcmp(argv[2], "integer") == 0 ? DI_PROFILE_INTEGER : DI_PROFILE_PORTABLE;
    const uint32_t seqs = (uint32_t)atoi(argv[3]), steps = (uint32_t)atoi(argv[4]);
    if (seqs < 1 || seqs > MAX_SEQS) {
        fprintf(stderr, "SEQS must be 1..%d\n", MAX_SEQS);
        return 2;
    }
    int32_t prompt[MAX_PROMPT] = {2, 818, 5279, 529, 7001, 563}; /* BOS "The capital of France is" (Gemma 3) */
    uint32_t n_prompt = 6;
    if (argc > 5) {
        n_prompt = 0;
        for (char *p = argv[5]; *p && n_prompt < MAX_PROMPT;) {
            prompt[n_prompt++] = (int32_t)strtol(p, &p, 10);
            if (*p == ',')
                p++;
        }
    }
    char err[512];
    di_model *m = NULL;
    di_config *c = NULL;
    di_session *s = NULL;
    if (di_model_load(argv[1], &m, err, sizeof err) || di_config_create(&c) ||
        di_config_set_int(c, DI_CONFIG_PROFILE, profile) || di_config_set_int(c, DI_CONFIG_MAX_SEQUENCES, seqs) ||
        di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, n_prompt + steps + 1) ||
        di_session_create(m, c, &s, err, sizeof err)) {
        fprintf(stderr, "setup failed: %s\n", err);
        return 1;
    }
    uint32_t ids[MAX_SEQS], lens[MAX_SEQS];
    int32_t toks[MAX_SEQS];
    for (uint32_t q = 0; q < seqs; q++) {
        ids[q] = q;
        lens[q] = 1;
        if (di_session_step(s, 1, &q, &n_prompt, prompt, 0)) {
            fprintf(stderr, "prefill: %s\n", di_session_errmsg(s));
            return 1;
        }
        di_session_greedy_token(s, q, &toks[q]);
    }
    CALLGRIND_START_INSTRUMENTATION;
    for (uint32_t k = 0; k < steps; k++) {
        if (di_session_step(s, seqs, ids, lens, toks, 0)) {
            fprintf(stderr, "decode: %s\n", di_session_errmsg(s));
            return 1;
        }
        for (uint32_t q = 0; q < seqs; q++)
            di_session_greedy_token(s, q, &toks[q]);
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    for (uint32_t q = 0; q < seqs; q++) {
        di_digest d;
        const float *row;
        char hex[DI_DIGEST_HEX_SIZE];
        di_session_logits(s, q, &row, &d);
        di_digest_format(&d, hex);
        printf("seq %u token %d logits %s\n", q, toks[q], hex);
    }
    printf("%s\n", di_session_backend_info(s));
    di_session_free(s);
    di_config_free(c);
    di_model_free(m);
    return 0;
}
