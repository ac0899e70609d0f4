/*
 * digests.c — the digest program of make check-portability: built with each
 * compiler, C library, optimisation level and architecture, it prints the
 * digests of fixed runs, which tests/portability/run.sh compares with the
 * reference build's.
 *
 *   digests CASES
 *
 * Each line of CASES (tab-separated): name, model path, the prompt
 * ("ids:1,2,3" for token ids given directly, "text:..." to tokenize with
 * DI_TOKENIZE_ADD_BOS), and the number of greedy tokens to decode (-1:
 * print the tokens only, run nothing). The
 * prompt is fed 5 tokens a step with every position's logits, on a 2-thread
 * session (DI_DIGESTS_THREADS overrides) of context 256, in the portable
 * profile (DI_DIGESTS_PROFILE=integer: the integer one). Output, one line each:
 *   NAME tokens ID,ID,...     (text prompts: what the tokenizer gave)
 *   NAME POSITION HEX         (every prompt position, then each decode step)
 *   NAME error MESSAGE        (a step of the case failed)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detinfer.h"

#define MAX_TOKENS 256

static int run_case(const char *name, const char *path, const char *prompt, int n_decode)
{
    char err[512];
    di_model *m = NULL;
    di_session *s = NULL;
    di_config *c = NULL;
    int32_t tokens[MAX_TOKENS];
    size_t n = 0;
    if (di_model_load(path, &m, err, sizeof err)) {
        printf("%s error %s\n", name, err);
        return 1;
    }
    if (!strncmp(prompt, "text:", 5)) {
        const char *text = prompt + 5;
        if (di_model_tokenize(m, text, strlen(text), DI_TOKENIZE_ADD_BOS, tokens, MAX_TOKENS, &n, err,
                              sizeof err)) {
            printf("%s error %s\n", name, err);
            di_model_free(m);
            return 1;
        }
        printf("%s tokens", name);
        for (size_t i = 0; i < n; i++)
            printf("%c%d", i ? ',' : ' ', tokens[i]);
        printf("\n");
        if (n_decode < 0) {
            di_model_free(m);
            return 0;
        }
    } else {
        for (const char *p = prompt + 4; *p && n < MAX_TOKENS; n++) {
            char *end;
            tokens[n] = (int32_t)strtol(p, &end, 10);
            p = *end == ',' ? end + 1 : end;
        }
    }
    const char *threads = getenv("DI_DIGESTS_THREADS"), *profile = getenv("DI_DIGESTS_PROFILE");
    const int integer = profile && !strcmp(profile, "integer");
    int bad = di_config_create(&c) || di_config_set_int(c, DI_CONFIG_THREADS, threads ? atoi(threads) : 2) ||
              di_config_set_int(c, DI_CONFIG_CONTEXT_LENGTH, 256) ||
              di_config_set_int(c, DI_CONFIG_PROFILE, integer ? DI_PROFILE_INTEGER : DI_PROFILE_PORTABLE) ||
              di_session_create(m, c, &s, err, sizeof err);
    di_config_free(c);
    if (bad) {
        printf("%s error %s\n", name, err);
        di_model_free(m);
        return 1;
    }
    uint32_t seq = 0, done = 0, pos = 0;
    char hex[DI_DIGEST_HEX_SIZE];
    while (done < n && !bad) {
        uint32_t len = n - done < 5 ? (uint32_t)(n - done) : 5;
        bad |= di_session_step(s, 1, &seq, &len, tokens + done, DI_STEP_ALL_LOGITS) != DI_OK;
        for (uint32_t i = 0; i < len && !bad; i++) {
            const float *row;
            di_digest d;
            bad |= di_session_logits_at(s, seq, i, &row, &d) != DI_OK;
            di_digest_format(&d, hex);
            printf("%s %u %s\n", name, pos++, hex);
        }
        done += len;
    }
    for (int k = 0; k < n_decode && !bad; k++) {
        int32_t t;
        uint32_t one = 1;
        const float *row;
        di_digest d;
        bad |= di_session_greedy_token(s, seq, &t) != DI_OK;
        bad |= di_session_step(s, 1, &seq, &one, &t, 0) != DI_OK;
        bad |= di_session_logits(s, seq, &row, &d) != DI_OK;
        di_digest_format(&d, hex);
        printf("%s %u %s\n", name, pos++, hex);
    }
    if (bad)
        printf("%s error %s\n", name, di_session_errmsg(s));
    di_session_free(s);
    di_model_free(m);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    char line[4096];
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *name = strtok(line, "\t"), *path = strtok(NULL, "\t"), *prompt = strtok(NULL, "\t"),
             *decode = strtok(NULL, "\t");
        if (!name || !path || !prompt || !decode) {
            if (name && *name != '#')
                printf("%s error malformed case line\n", name);
            continue;
        }
        bad |= run_case(name, path, prompt, atoi(decode));
    }
    fclose(f);
    return bad;
}
