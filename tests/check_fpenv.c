/*
 * check_fpenv.c — the host's floating-point state changes no bit
 * (lib/base/fpenv.h): rounding toward +inf, -inf and zero, and flush-to-zero with
 * denormals-are-zero, set before or after the session is created, on every
 * CPU path this machine runs, with 1 to 4 threads, give the digests of the
 * default environment; and every call leaves the caller's state (mode and
 * status flags) as it found it.
 *
 * The model and prompt are ones where subnormals occur: with the library's
 * pinning switched off (a test hook), the step raises the underflow and
 * denormal-operand flags in the calling thread, and FTZ|DAZ or a directed
 * rounding changes the digests.
 */
#include <fenv.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu_ops.h"
#include "lib/base/fpenv.h"
#include "test_util.h"

#define FPENV_MODEL "subnormal_f32"
#define MAX_TOKENS 64
#define N_DECODE 4

/* ---- the host's state, as the test sets and reads it ------------------------- */

typedef enum host_mode { MODE_UPWARD, MODE_DOWNWARD, MODE_TOWARDZERO, MODE_FTZ_DAZ, N_MODES } host_mode;
static const char *const mode_names[N_MODES] = {"FE_UPWARD", "FE_DOWNWARD", "FE_TOWARDZERO", "FTZ|DAZ"};

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FLUSH_BITS 0x8040u  /* FTZ (bit 15) | DAZ (bit 6) */
#define UNDERFLOW_BITS 0x12u /* UE (bit 4) | DE (bit 1): a tiny result, a subnormal operand */
static uint64_t host_state(void) { return _mm_getcsr(); }
static void set_flush(void) { _mm_setcsr(_mm_getcsr() | FLUSH_BITS); }
static uint64_t underflow_flags(void) { return _mm_getcsr() & UNDERFLOW_BITS; }
#elif defined(__aarch64__)
static uint64_t host_state(void)
{
    uint64_t cr, sr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(cr));
    __asm__ __volatile__("mrs %0, fpsr" : "=r"(sr));
    return cr << 32 | (sr & 0xffffffffu);
}
static void set_flush(void)
{
    uint64_t cr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(cr));
    cr |= 1u << 24; /* FZ */
    __asm__ __volatile__("msr fpcr, %0" : : "r"(cr));
}
static uint64_t underflow_flags(void) { return fetestexcept(FE_UNDERFLOW); }
#else
static uint64_t host_state(void) { return (uint64_t)fegetround(); }
static void set_flush(void) {}
static uint64_t underflow_flags(void) { return fetestexcept(FE_UNDERFLOW); }
#endif

static void set_mode(host_mode mode)
{
    static const int rounding[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    if (mode == MODE_FTZ_DAZ)
        set_flush();
    else
        ck_assert_int_eq(fesetround(rounding[mode]), 0);
}

/* Back to the process's default: round to nearest, no flushing, no flags. */
static void reset_mode(void)
{
    di_fpenv_set_canonical();
    feclearexcept(FE_ALL_EXCEPT);
}

/* ---- runs --------------------------------------------------------------------- */

typedef struct run {
    uint32_t n;
    di_digest d[MAX_TOKENS + N_DECODE];
} run;

static uint32_t prompt(int32_t *tokens)
{
    return tu_read_prompt(FPENV_MODEL, tokens, MAX_TOKENS);
}

/* Every call must leave the host's state as it was (unless the test hook
 * switched the pinning off). */
#define CALL_KEEPS_STATE(expr, what)                                                          \
    do {                                                                                      \
        const uint64_t before_ = host_state();                                                \
        ck_assert_int_eq((expr), DI_OK);                                                      \
        ck_assert_msg(di_fpenv_test_unpinned || host_state() == before_, "%s changed the host's state %#llx -> %#llx", \
                      (what), (unsigned long long)before_, (unsigned long long)host_state()); \
    } while (0)

static di_session *session_on(const di_model *m, int threads, di_cpu_path path)
{
    di_config *c = NULL;
    di_session *s = NULL;
    char err[256];
    ck_assert_int_eq(di_config_create(&c), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_THREADS, threads), DI_OK);
    ck_assert_int_eq(di_config_set_int(c, DI_CONFIG_CPU_PATH, path), DI_OK);
    CALL_KEEPS_STATE(di_session_create(m, c, &s, err, sizeof err), "di_session_create");
    di_config_free(c);
    return s;
}

/* The prompt in chunks of 7 (every position's digest), then N_DECODE greedy
 * tokens; the host's state is checked around every call. */
static void run_prompt(di_session *s, const int32_t *tokens, uint32_t n, run *out)
{
    uint32_t seq = 0, done = 0;
    while (done < n) {
        uint32_t len = n - done < 7 ? n - done : 7;
        CALL_KEEPS_STATE(di_session_step(s, 1, &seq, &len, tokens + done, DI_STEP_ALL_LOGITS),
                         "di_session_step");
        for (uint32_t i = 0; i < len; i++) {
            const float *row;
            CALL_KEEPS_STATE(di_session_logits_at(s, seq, i, &row, &out->d[done + i]),
                             "di_session_logits_at");
        }
        done += len;
    }
    for (uint32_t k = 0; k < N_DECODE; k++) {
        int32_t t;
        uint32_t one = 1;
        const float *row;
        CALL_KEEPS_STATE(di_session_greedy_token(s, seq, &t), "di_session_greedy_token");
        CALL_KEEPS_STATE(di_session_step(s, 1, &seq, &one, &t, 0), "di_session_step");
        CALL_KEEPS_STATE(di_session_logits(s, seq, &row, &out->d[n + k]), "di_session_logits");
    }
    out->n = n + N_DECODE;
}

/* The default environment, scalar path, one thread. */
static void reference(const di_model *m, run *out)
{
    int32_t tokens[MAX_TOKENS];
    const uint32_t n = prompt(tokens);
    reset_mode();
    di_session *s = session_on(m, 1, DI_CPU_PATH_SCALAR);
    run_prompt(s, tokens, n, out);
    di_session_free(s);
}

static int runs_equal(const run *a, const run *b)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (!di_digest_equal(&a->d[i], &b->d[i]))
            return 0;
    return a->n == b->n;
}

static const di_cpu_path paths[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};

/* _i: path * 4 + (threads - 1). Every host mode, set before and after the
 * session is created, gives the reference digests. */
START_TEST(test_host_modes_change_nothing)
{
    const di_cpu_path path = paths[_i / 4];
    const int threads = _i % 4 + 1;
    if (!tu_cpu_path_available(path))
        return; /* reported by the determinism suites */
    di_model *m = tu_load(FPENV_MODEL);
    run want, got;
    reference(m, &want);
    int32_t tokens[MAX_TOKENS];
    const uint32_t n = prompt(tokens);
    for (int mode = 0; mode < N_MODES; mode++)
        for (int after = 0; after < 2; after++) {
            reset_mode();
            if (!after)
                set_mode((host_mode)mode);
            di_session *s = session_on(m, threads, path);
            if (after)
                set_mode((host_mode)mode);
            const uint64_t host = host_state();
            run_prompt(s, tokens, n, &got);
            ck_assert_uint_eq(host_state(), host);
            for (uint32_t i = 0; i < want.n; i++)
                if (!di_digest_equal(&want.d[i], &got.d[i]))
                    ck_abort_msg("%s set %s session creation, path %d, %d threads: digest %u differs",
                                 mode_names[mode], after ? "after" : "before", (int)path, threads, i);
            di_session_free(s);
        }
    reset_mode();
    di_model_free(m);
}
END_TEST

/* Without the pinning (test hook) the same runs would differ: subnormals
 * occur in this model and prompt (the step raises the underflow and
 * denormal flags), and FTZ|DAZ and the directed roundings change digests.
 * One thread, so all the work runs in this thread. */
START_TEST(test_host_modes_matter_unpinned)
{
    di_model *m = tu_load(FPENV_MODEL);
    run want, got;
    reference(m, &want);
    int32_t tokens[MAX_TOKENS];
    const uint32_t n = prompt(tokens);

    di_fpenv_test_unpinned = 1;
    reset_mode();
    di_session *s = session_on(m, 1, DI_CPU_PATH_SCALAR);
    feclearexcept(FE_ALL_EXCEPT);
    run_prompt(s, tokens, n, &got);
    const uint64_t flags = underflow_flags();
    di_session_free(s);
    ck_assert_msg(flags != 0, "no subnormal occurred: the model does not exercise FTZ/DAZ");
    ck_assert_msg(runs_equal(&want, &got), "unpinned default environment differs from the reference");

    int differs[N_MODES] = {0};
    for (int mode = 0; mode < N_MODES; mode++) {
        reset_mode();
        set_mode((host_mode)mode);
        s = session_on(m, 1, DI_CPU_PATH_SCALAR);
        run_prompt(s, tokens, n, &got);
        di_session_free(s);
        differs[mode] = !runs_equal(&want, &got);
    }
    di_fpenv_test_unpinned = 0;
    reset_mode();
    for (int mode = 0; mode < N_MODES; mode++)
        ck_assert_msg(differs[mode], "%s gives the reference digests even unpinned: the test shows nothing",
                      mode_names[mode]);
    di_model_free(m);
}
END_TEST

/* A host built with -ffast-math (crtfastmath.o sets FTZ and DAZ before
 * main) gets the digests of this process: tests/fpenv_fastmath.c, built by
 * make check, prints the digests of the same runs; it also checks that
 * FTZ|DAZ really are set in it, before and after the calls. */
START_TEST(test_fast_math_host)
{
    const char *prog = getenv("DI_TEST_FASTMATH");
    ck_assert_msg(prog && *prog, "DI_TEST_FASTMATH is not set (run the suite with make check)");
    di_model *m = tu_load(FPENV_MODEL);
    run want;
    reference(m, &want);
    di_model_free(m);
    char gguf[1024], cmd[3072];
    snprintf(gguf, sizeof gguf, "%s", tu_model_path(FPENV_MODEL, ".gguf")); /* a static buffer */
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' 2>&1", prog, gguf, tu_model_path(FPENV_MODEL, ".tokens"));
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[512];
    uint32_t i = 0;
    int flush_seen = 0;
    while (fgets(line, sizeof line, p)) {
        if (!strncmp(line, "flush ", 6)) {
            flush_seen = !strcmp(line, "flush on on\n");
            continue;
        }
        char hex[DI_DIGEST_HEX_SIZE];
        ck_assert_msg(i < want.n, "extra output: %s", line);
        di_digest_format(&want.d[i], hex);
        ck_assert_msg(!strncmp(line, hex, DI_DIGEST_HEX_SIZE - 1), "fast-math host, digest %u: %s != %s", i,
                      line, hex);
        i++;
    }
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_uint_eq(i, want.n);
    ck_assert_msg(flush_seen, "the -ffast-math program did not run with FTZ|DAZ on before and after");
}
END_TEST

Suite *fpenv_suite(void)
{
    Suite *s = suite_create("fpenv");
    TCase *tc = tcase_create("fpenv");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_host_modes_change_nothing, 0, 12);
    tcase_add_test(tc, test_host_modes_matter_unpinned);
    tcase_add_test(tc, test_fast_math_host);
    suite_add_tcase(s, tc);
    return s;
}
