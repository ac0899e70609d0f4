/*
 * check_main.c — runs every suite in fork mode (one crash cannot hide the
 * rest) and exits non-zero on any failure. Prints Check's summary line
 * "100%: Checks: N, Failures: 0, Errors: 0".
 */
#include <check.h>
#include "detinfer.h"
#include <stdlib.h>

Suite *kernels_suite(void);
Suite *paths_suite(void);
Suite *quants_suite(void);
Suite *tokenizer_suite(void);
Suite *chat_suite(void);
Suite *format_suite(void);
Suite *model_suite(void);
Suite *architectures_suite(void);
Suite *api_suite(void);
Suite *sampling_suite(void);
Suite *reference_suite(void);
Suite *determinism_suite(di_cpu_path path);
Suite *install_suite(void);
Suite *cli_suite(void);
Suite *serve_suite(void);
Suite *real_suite(void);
Suite *cuda_suite(void);
Suite *fpenv_suite(void);
Suite *rope_suite(void);
Suite *golden_suite(void);
Suite *logprobs_suite(void);
Suite *memory_suite(void);
Suite *intdot_suite(void);
Suite *grammar_suite(void);
Suite *grammar_determinism_suite(void);
Suite *speculate_suite(void);

int main(void)
{
    SRunner *runner = srunner_create(kernels_suite());
    srunner_add_suite(runner, paths_suite());
    srunner_add_suite(runner, quants_suite());
    srunner_add_suite(runner, tokenizer_suite());
    srunner_add_suite(runner, chat_suite());
    srunner_add_suite(runner, format_suite());
    srunner_add_suite(runner, model_suite());
    srunner_add_suite(runner, architectures_suite());
    srunner_add_suite(runner, api_suite());
    srunner_add_suite(runner, sampling_suite());
    srunner_add_suite(runner, reference_suite());
    srunner_add_suite(runner, determinism_suite(DI_CPU_PATH_AUTO)); /* paths agree */
    srunner_add_suite(runner, determinism_suite(DI_CPU_PATH_SCALAR));
    srunner_add_suite(runner, determinism_suite(DI_CPU_PATH_AVX2));
    srunner_add_suite(runner, determinism_suite(DI_CPU_PATH_AVX512));
    srunner_add_suite(runner, install_suite());
    srunner_add_suite(runner, cli_suite());
    srunner_add_suite(runner, serve_suite());
    srunner_add_suite(runner, real_suite());
    srunner_add_suite(runner, cuda_suite());
    srunner_add_suite(runner, fpenv_suite());
    srunner_add_suite(runner, rope_suite());
    srunner_add_suite(runner, golden_suite());
    srunner_add_suite(runner, logprobs_suite());
    srunner_add_suite(runner, memory_suite());
    srunner_add_suite(runner, intdot_suite());
    srunner_add_suite(runner, grammar_suite());
    srunner_add_suite(runner, grammar_determinism_suite());
    srunner_add_suite(runner, speculate_suite());
    srunner_set_fork_status(runner, CK_FORK);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
