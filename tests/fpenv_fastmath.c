/*
 * fpenv_fastmath.c — a host linked with -ffast-math (make check builds it so:
 * crtfastmath.o sets FTZ and DAZ before main) that runs a prompt through
 * libdetinfer.so and prints one digest per line, for check_fpenv.c to compare
 * with the digests of a normal process. It first prints "flush X Y": whether
 * FTZ|DAZ were on before the first call and after the last one.
 *
 *   fpenv_fastmath MODEL.gguf PROMPT.tokens
 *
 * The runs are those of check_fpenv.c's run_prompt: the prompt in chunks of
 * 7 with every position's logits, then 4 greedy tokens.
 */
#include <stdio.h>
#include <stdint.h>

#include "detinfer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static int flush_on(void) { return (_mm_getcsr() & 0x8040u) == 0x8040u; }
#elif defined(__aarch64__)
static int flush_on(void)
{
    uint64_t cr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(cr));
    return (cr >> 24) & 1;
}
#else
static int flush_on(void) { return 0; }
#endif

static int print(const di_digest *d)
{
    char hex[DI_DIGEST_HEX_SIZE];
    di_digest_format(d, hex);
    return printf("%s\n", hex) < 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT.tokens\n", argv[0]);
        return 2;
    }
    const int before = flush_on();
    int32_t tokens[256];
    uint32_t n = 0;
    FILE *f = fopen(argv[2], "r");
    if (!f)
        return 1;
    while (n < 256 && fscanf(f, "%d", &tokens[n]) == 1)
        n++;
    fclose(f);
    char err[256];
    di_model *m = NULL;
    di_session *s = NULL;
    if (di_model_load(argv[1], &m, err, sizeof err) || di_session_create(m, NULL, &s, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    di_digest digests[256 + 4];
    uint32_t seq = 0, done = 0, count = 0;
    int bad = 0;
    while (done < n) {
        uint32_t len = n - done < 7 ? n - done : 7;
        bad |= di_session_step(s, 1, &seq, &len, tokens + done, DI_STEP_ALL_LOGITS) != DI_OK;
        for (uint32_t i = 0; i < len; i++) {
            const float *row;
            bad |= di_session_logits_at(s, seq, i, &row, &digests[count++]) != DI_OK;
        }
        done += len;
    }
    for (int k = 0; k < 4; k++) {
        int32_t t;
        uint32_t one = 1;
        const float *row;
        bad |= di_session_greedy_token(s, seq, &t) != DI_OK;
        bad |= di_session_step(s, 1, &seq, &one, &t, 0) != DI_OK;
        bad |= di_session_logits(s, seq, &row, &digests[count++]) != DI_OK;
    }
    printf("flush %s %s\n", before ? "on" : "off", flush_on() ? "on" : "off");
    for (uint32_t i = 0; i < count; i++)
        bad |= print(&digests[i]);
    di_session_free(s);
    di_model_free(m);
    return bad;
}
