/*
 * grammar_mask.c — what a grammar adds to a generated token
 * (docs/STRUCTURED.md, "Speed"), through the public API.
 *
 * Two sequences of one session read the same prompt; sequence 0 has the
 * grammar (a JSON schema or GBNF), sequence 1 none. Each token is chosen on
 * sequence 0 (greedy_token or sample_token), the same call is made on
 * sequence 1, and the chosen token is stepped on each, one at a time: every
 * call timed, the two sequences' calls back to back (the order alternating
 * from token to token) so that the machine's other load falls on both alike.
 * The extra time of a token is
 *     (choice on 0 - choice on 1) + (step on 0 - step on 1),
 * the choice being where a state's allowed set is computed (the first time
 * that state is met) and applied to the logits row; the grammar's part of a
 * step is a few table lookups per byte of the token, below the step's own
 * noise, which the second difference mostly is. Printed: p50, p99 and the
 * largest extra time, the same for the choices alone, the median decode step
 * of sequence 1, and the first di_session_seq_set_grammar of the session (it
 * builds the vocabulary's trie); for a first request (nothing cached) and a
 * second one with the same grammar in the same session (the server's case:
 * the grammar's automaton and sets kept).
 *
 *   grammar_mask MODEL SCHEMA.json|GRAMMAR.gbnf [THREADS [N [TEMPERATURE]]]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "detinfer.h"

#define MAX_N 1024

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, di_status st, di_session *s)
{
    fprintf(stderr, "grammar_mask: %s: %s: %s\n", what, di_status_name(st), s ? di_session_errmsg(s) : "");
    exit(1);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    fclose(f);
    if (text)
        text[n] = '\0';
    *len = (size_t)n;
    return text;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const double *v, int n, double p)
{
    double *c = malloc((size_t)n * sizeof *c);
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double r = c[(int)(p / 100.0 * (n - 1) + 0.5)];
    free(c);
    return r;
}

static double timed_choose(di_session *s, uint32_t seq, int sampled, int32_t *token)
{
    double t0 = now();
    di_status st = sampled ? di_session_sample_token(s, seq, token) : di_session_greedy_token(s, seq, token);
    double dt = now() - t0;
    if (st)
        die("choosing", st, s);
    return dt;
}

static double timed_step(di_session *s, uint32_t seq, int32_t token)
{
    uint32_t n = 1;
    double t0 = now();
    di_status st = di_session_step(s, 1, &seq, &n, &token, 0);
    double dt = now() - t0;
    if (st)
        die("step", st, s);
    return dt;
}

typedef struct run {
    int n;                      /* tokens */
    int32_t tokens[MAX_N];
    double choose[2][MAX_N];    /* per sequence */
    double step[2][MAX_N];      /* step[q][i]: the step that fed token i - 1 */
    double set_grammar;
} run;

static void generate(di_session *s, const di_grammar *g, const int32_t *prompt, uint32_t n_prompt, int n_max,
                     int sampled, int32_t eos, run *r)
{
    uint32_t seqs[2] = {0, 1}, counts[2] = {n_prompt, n_prompt};
    int32_t *both = malloc(2 * n_prompt * sizeof *both);
    memcpy(both, prompt, n_prompt * sizeof *both);
    memcpy(both + n_prompt, prompt, n_prompt * sizeof *both);
    di_status st = di_session_seq_reset(s, 0);
    if (!st)
        st = di_session_seq_reset(s, 1);
    if (!st)
        st = di_session_step(s, 2, seqs, counts, both, 0);
    free(both);
    const double t0 = now();
    if (!st)
        st = di_session_seq_set_grammar(s, 0, g, NULL, 0);
    r->set_grammar = now() - t0;
    if (st)
        die("prompt", st, s);
    r->n = 0;
    for (int i = 0; i < n_max; i++) {
        const uint32_t first = (uint32_t)(i % 2), second = 1 - first;
        int32_t t, other;
        r->choose[first][i] = timed_choose(s, first, sampled, first == 0 ? &t : &other);
        r->choose[second][i] = timed_choose(s, second, sampled, second == 0 ? &t : &other);
        r->tokens[r->n++] = t;
        if (t == eos)
            break;
        r->step[first][i + 1] = timed_step(s, first, t);
        r->step[second][i + 1] = timed_step(s, second, t);
    }
}

static void report(const char *what, const run *r)
{
    double extra[MAX_N], choice[MAX_N], step[MAX_N];
    int n = 0;
    for (int i = 1; i < r->n; i++, n++) { /* token i: the step feeding token i - 1, then its choice */
        choice[n] = r->choose[0][i] - r->choose[1][i];
        extra[n] = choice[n] + r->step[0][i] - r->step[1][i];
        step[n] = r->step[1][i];
    }
    if (n == 0)
        return;
    double max = extra[0], max_choice = choice[0];
    for (int i = 1; i < n; i++) {
        max = extra[i] > max ? extra[i] : max;
        max_choice = choice[i] > max_choice ? choice[i] : max_choice;
    }
    const double decode = percentile(step, n, 50);
    printf("%-27s %4d tokens | extra p50 %6.3f ms p99 %6.3f max %6.3f | choice alone p50 %6.3f ms p99 %6.3f "
           "max %6.3f | decode step p50 %6.2f ms | extra p50 %5.1f%%, p99 %5.1f%% of a step | set_grammar %.1f ms\n",
           what, n, percentile(extra, n, 50) * 1e3, percentile(extra, n, 99) * 1e3, max * 1e3,
           percentile(choice, n, 50) * 1e3, percentile(choice, n, 99) * 1e3, max_choice * 1e3, decode * 1e3,
           100.0 * percentile(extra, n, 50) / decode, 100.0 * percentile(extra, n, 99) / decode,
           r->set_grammar * 1e3);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL SCHEMA.json|GRAMMAR.gbnf [THREADS [N [TEMPERATURE]]]\n", argv[0]);
        return 2;
    }
    const int threads = argc > 3 ? atoi(argv[3]) : 2;
    const int n_max = argc > 4 && atoi(argv[4]) > 0 && atoi(argv[4]) < MAX_N ? atoi(argv[4]) : 200;
    const float temperature = argc > 5 ? (float)atof(argv[5]) : 0.8f;
    char err[512];
    di_model *m;
    di_status st = di_model_load(argv[1], &m, err, sizeof err);
    if (st) {
        fprintf(stderr, "grammar_mask: %s\n", err);
        return 1;
    }
    size_t len;
    char *text = read_file(argv[2], &len);
    if (!text) {
        fprintf(stderr, "grammar_mask: cannot read %s\n", argv[2]);
        return 1;
    }
    const int gbnf = strstr(argv[2], ".gbnf") != NULL;
    di_grammar *g;
    st = gbnf ? di_grammar_from_gbnf(text, len, 0, &g, err, sizeof err)
              : di_grammar_from_json_schema(text, len, 0, &g, err, sizeof err);
    if (st) {
        fprintf(stderr, "grammar_mask: %s: %s\n", argv[2], err);
        return 1;
    }
    const char *prompt_text = "A customer record in JSON:\n";
    int32_t prompt[64], eos = -1;
    size_t n_prompt;
    if ((st = di_model_tokenize(m, prompt_text, strlen(prompt_text), DI_TOKENIZE_ADD_BOS, prompt, 64, &n_prompt,
                                err, sizeof err)))
        die(err, st, NULL);
    di_model_special_token(m, DI_TOKEN_EOS, &eos);
    di_config *cfg;
    di_config_create(&cfg);
    di_config_set_int(cfg, DI_CONFIG_THREADS, threads);
    di_config_set_int(cfg, DI_CONFIG_MAX_SEQUENCES, 2);
    di_config_set_int(cfg, DI_CONFIG_CONTEXT_LENGTH, (int64_t)n_prompt + n_max + 8);
    di_session *s;
    if ((st = di_session_create(m, cfg, &s, err, sizeof err)))
        die(err, st, NULL);
    printf("model %s, %s, libdetinfer %s; grammar %s\n", argv[1], di_session_backend_info(s), di_version_string(),
           argv[2]);
    static run r;
    for (int sampled = 0; sampled < 2; sampled++) {
        di_sampling_params p;
        di_sampling_params_init(&p);
        if (sampled) {
            p.temperature = temperature;
            p.top_p = 0.95f;
            p.seed = 1;
        }
        di_session_seq_set_sampling(s, 0, &p);
        di_session_seq_set_sampling(s, 1, &p);
        for (int pass = 0; pass < 2; pass++) {
            generate(s, g, prompt, (uint32_t)n_prompt, n_max, sampled, eos, &r);
            char what[64];
            snprintf(what, sizeof what, "%s, %s", sampled ? "sampled" : "greedy",
                     pass ? "warm (2nd request)" : "cold (1st request)");
            report(what, &r);
        }
        char *out = malloc(65536);
        size_t olen = 0;
        if (out && !di_model_detokenize(m, r.tokens, (size_t)r.n, out, 65536, &olen, NULL, 0))
            printf("  output (%s): %.*s\n", r.tokens[r.n - 1] == eos ? "ended" : "cut", (int)olen, out);
        free(out);
    }
    di_session_free(s);
    di_config_free(cfg);
    di_grammar_free(g);
    di_model_free(m);
    free(text);
    return 0;
}
