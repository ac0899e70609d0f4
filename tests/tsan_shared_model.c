/*
 * tsan_shared_model.c — one model shared by 4 threads, each with its own
 * 2-thread session, run under ThreadSanitizer (make check-tsan builds the
 * library and this program with -fsanitize=thread). Every thread feeds the
 * same prompt in a different chunking, then decodes greedily; all must give
 * the digests of the first thread. TSan reports any data race and makes the
 * process fail. In the integer profile the sessions are created at once, so
 * that one packs the model's weights (lib/backend/cpu/weight_pack.c, on the
 * avx512 path) while the others wait for it and then read them.
 *
 *   tsan_shared_model MODEL.gguf PROMPT.tokens [portable|integer]
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "detinfer.h"

#define N_THREADS 4
#define MAX_TOKENS 64
#define N_DECODE 4

static di_model *model;
static int profile = DI_PROFILE_PORTABLE;
static int32_t prompt[MAX_TOKENS];
static uint32_t n_prompt;

typedef struct worker {
    uint32_t chunk;
    int failed;
    di_digest d[MAX_TOKENS + N_DECODE];
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    di_config *c = NULL;
    di_session *s = NULL;
    char err[256];
    if (di_config_create(&c) || di_config_set_int(c, DI_CONFIG_THREADS, 2) ||
        di_config_set_int(c, DI_CONFIG_PROFILE, profile) ||
        di_session_create(model, c, &s, err, sizeof err)) {
        w->failed = 1;
        di_config_free(c);
        return NULL;
    }
    di_config_free(c);
    uint32_t seq = 0, done = 0;
    while (done < n_prompt && !w->failed) {
        uint32_t len = n_prompt - done < w->chunk ? n_prompt - done : w->chunk;
        w->failed |= di_session_step(s, 1, &seq, &len, prompt + done, DI_STEP_ALL_LOGITS) != DI_OK;
        for (uint32_t i = 0; i < len && !w->failed; i++) {
            const float *row;
            w->failed |= di_session_logits_at(s, seq, i, &row, &w->d[done + i]) != DI_OK;
        }
        done += len;
    }
    for (int k = 0; k < N_DECODE && !w->failed; k++) {
        int32_t t;
        uint32_t one = 1;
        const float *row;
        w->failed |= di_session_greedy_token(s, seq, &t) != DI_OK;
        w->failed |= di_session_step(s, 1, &seq, &one, &t, 0) != DI_OK;
        w->failed |= di_session_logits(s, seq, &row, &w->d[n_prompt + k]) != DI_OK;
    }
    di_session_free(s);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[3], "integer") == 0)
        profile = DI_PROFILE_INTEGER;
    if (argc != 3 && !(argc == 4 && (profile == DI_PROFILE_INTEGER || strcmp(argv[3], "portable") == 0))) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT.tokens [portable|integer]\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f)
        return 1;
    while (n_prompt < MAX_TOKENS && fscanf(f, "%d", &prompt[n_prompt]) == 1)
        n_prompt++;
    fclose(f);
    char err[256];
    if (di_model_load(argv[1], &model, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    static worker w[N_THREADS];
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i].chunk = (uint32_t)(i * 5 + 1); /* 1, 6, 11, 16 tokens a step */
        if (pthread_create(&t[i], NULL, run, &w[i]))
            return 1;
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(t[i], NULL);
    int bad = 0;
    for (int i = 0; i < N_THREADS; i++) {
        bad |= w[i].failed;
        if (memcmp(w[i].d, w[0].d, (n_prompt + N_DECODE) * sizeof(di_digest)) != 0) {
            fprintf(stderr, "thread %d: digests differ from thread 0\n", i);
            bad = 1;
        }
    }
    di_model_free(model);
    printf("tsan: %d threads, one model, %u positions each: %s\n", N_THREADS, n_prompt + N_DECODE,
           bad ? "FAILED" : "same digests, no race reported");
    return bad;
}
