/*
 * bench.c — prompt processing and generation speed, in the style of
 * llama-bench: "pp N" is one step of N prompt tokens, "tg N" is N decode
 * steps of one token; tokens per second, mean ± sample std over repetitions.
 * Uses only the public API.
 *
 *   bench --model FILE [--threads 1,2] [--pp 128] [--tg 32] [--reps 3]
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <detinfer.h>

#define MAX_THREAD_COUNTS 16
#define MAX_REPS 100

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(const char *msg)
{
    fprintf(stderr, "bench: %s\nusage: bench --model FILE [--threads 1,2] [--pp N] [--tg N] [--reps R]\n", msg);
    return 2;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    return *s && !*end && !errno && *out >= lo && *out <= hi;
}

static void mean_std(const double *x, int n, double *mean, double *std)
{
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    *mean = sum / n;
    for (int i = 0; i < n; i++)
        sq += (x[i] - *mean) * (x[i] - *mean);
    *std = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
}

/* One repetition: pp tokens in one step, then tg decode steps. */
static int run_once(di_session *s, const int32_t *prompt, uint32_t pp, uint32_t tg, double *pp_tps,
                    double *tg_tps)
{
    const uint32_t seq = 0;
    di_status st = di_session_seq_reset(s, seq);
    double t0 = now_seconds();
    if (!st)
        st = di_session_step(s, 1, &seq, &pp, prompt, 0);
    double t1 = now_seconds();
    for (uint32_t i = 0; i < tg && !st; i++) {
        int32_t next;
        const uint32_t one = 1;
        st = di_session_greedy_token(s, seq, &next);
        if (!st)
            st = di_session_step(s, 1, &seq, &one, &next, 0);
    }
    double t2 = now_seconds();
    if (st) {
        fprintf(stderr, "bench: %s: %s\n", di_status_name(st), di_session_errmsg(s));
        return 0;
    }
    *pp_tps = pp / (t1 - t0);
    *tg_tps = tg / (t2 - t1);
    return 1;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    long threads[MAX_THREAD_COUNTS] = {1};
    int n_threads = 1;
    long pp = 128, tg = 32, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage("missing value");
        const char *v = argv[++i];
        if (!strcmp(argv[i - 1], "--model")) {
            path = v;
        } else if (!strcmp(argv[i - 1], "--threads")) {
            n_threads = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
                if (n_threads == MAX_THREAD_COUNTS || !parse_long(tok, 1, 256, &threads[n_threads++]))
                    return usage("--threads wants a list like 1,2");
            if (n_threads == 0)
                return usage("--threads wants a list like 1,2");
        } else if (!strcmp(argv[i - 1], "--pp")) {
            if (!parse_long(v, 1, 1 << 16, &pp))
                return usage("--pp wants 1..65536");
        } else if (!strcmp(argv[i - 1], "--tg")) {
            if (!parse_long(v, 1, 1 << 16, &tg))
                return usage("--tg wants 1..65536");
        } else if (!strcmp(argv[i - 1], "--reps")) {
            if (!parse_long(v, 1, MAX_REPS, &reps))
                return usage("--reps wants 1..100");
        } else {
            return usage("unknown argument");
        }
    }
    if (!path)
        return usage("--model is required");

    char err[512];
    di_model *model;
    di_status st = di_model_load(path, &model, err, sizeof err);
    if (st) {
        fprintf(stderr, "bench: %s: %s\n", di_status_name(st), err);
        return 1;
    }
    int64_t n_vocab, n_params, file_size;
    di_model_get_int(model, DI_MODEL_N_VOCAB, &n_vocab);
    di_model_get_int(model, DI_MODEL_N_PARAMS, &n_params);
    di_model_get_int(model, DI_MODEL_FILE_SIZE, &file_size);
    int32_t *prompt = malloc((size_t)pp * sizeof *prompt);
    for (long i = 0; i < pp; i++)
        prompt[i] = (int32_t)((i * 7919 + 13) % n_vocab);
    printf("model %s: %.1fM parameters, %.1f MiB; libdetinfer %s; %ld repetitions\n", path, n_params / 1e6,
           file_size / 1048576.0, di_version_string(), reps);
    printf("| threads | test   |            t/s | weights read GB/s |\n");
    printf("| ------: | :----- | -------------: | ----------------: |\n");

    int rc = 0;
    for (int k = 0; k < n_threads && rc == 0; k++) {
        di_config *config;
        di_session *s = NULL;
        di_config_create(&config);
        di_config_set_int(config, DI_CONFIG_THREADS, threads[k]);
        di_config_set_int(config, DI_CONFIG_CONTEXT_LENGTH, pp + tg + 1);
        st = di_session_create(model, config, &s, err, sizeof err);
        di_config_free(config);
        if (st) {
            fprintf(stderr, "bench: %s: %s\n", di_status_name(st), err);
            rc = 1;
            break;
        }
        double pps[MAX_REPS], tgs[MAX_REPS], pp_tps, tg_tps;
        run_once(s, prompt, 8, 2, &pp_tps, &tg_tps); /* warm-up: page in the weights */
        for (int r = 0; r < reps && rc == 0; r++)
            if (!run_once(s, prompt, (uint32_t)pp, (uint32_t)tg, &pps[r], &tgs[r]))
                rc = 1;
        if (rc == 0) {
            double m, sd;
            mean_std(pps, (int)reps, &m, &sd);
            printf("| %7ld | pp %-3ld | %7.2f ± %5.2f |                   |\n", threads[k], pp, m, sd);
            mean_std(tgs, (int)reps, &m, &sd);
            printf("| %7ld | tg %-3ld | %7.2f ± %5.2f | %17.2f |\n", threads[k], tg, m, sd,
                   m * (double)file_size / 1e9);
        }
        di_session_free(s);
    }
    free(prompt);
    di_model_free(model);
    return rc;
}
