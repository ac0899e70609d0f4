/*
 * check_cli.c — the detinfer command as a user runs it (tests/cli_test.sh,
 * one section per test): usage errors exit 2, run matches the example
 * program's digests, verify passes and is proven able to fail (the tool's
 * test-only DETINFER_TEST_PERTURB hook, also on a near tie's result), its
 * near ties' ulp gaps match an exact recount (tests/tools/ulp_gap.py) and
 * their tokens and digests `detinfer run`'s, doctor prints and compares
 * fingerprints without a GPU, bench prints numbers and valid JSON, and
 * install-tools / uninstall-tools.
 *
 * The tool is $DI_TEST_TOOL, or tools/detinfer next to the example program
 * ($DI_TEST_EXAMPLE is BUILD/examples/generate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_util.h"

static void run_section(const char *section)
{
    const char *root = getenv("DI_TEST_ROOT");
    const char *models = getenv("DI_TEST_MODELS");
    const char *sanitize = getenv("DI_TEST_SANITIZE");
    const char *example = getenv("DI_TEST_EXAMPLE");
    ck_assert_msg(root && models, "DI_TEST_ROOT / DI_TEST_MODELS are not set (run the suite with make check)");
    char tool[4096], cmd[16384];
    tu_tool_path(tool, sizeof tool);
    snprintf(cmd, sizeof cmd, "bash '%s/tests/cli_test.sh' '%s' '%s' '%s' '%s' '%s' '%s' 2>&1", root, section, root,
             tool, models, sanitize ? sanitize : "", example ? example : "");
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    char line[4096];
    while (fgets(line, sizeof line, p))
        fputs(line, stdout);
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "cli_test.sh %s failed (status %d)", section,
                  status);
}

START_TEST(test_cli_usage_errors_exit_2)
{
    run_section("usage");
}
END_TEST

START_TEST(test_cli_run_digests)
{
    run_section("run");
}
END_TEST

START_TEST(test_cli_verify_passes)
{
    run_section("verify");
}
END_TEST

START_TEST(test_cli_verify_detects_perturbation)
{
    run_section("verify-fails");
}
END_TEST

START_TEST(test_cli_doctor_fingerprint)
{
    run_section("doctor");
}
END_TEST

START_TEST(test_cli_bench_numbers_and_json)
{
    run_section("bench");
}
END_TEST

START_TEST(test_cli_install_tools)
{
    run_section("install");
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("detinfer");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cli_usage_errors_exit_2);
    tcase_add_test(tc, test_cli_run_digests);
    tcase_add_test(tc, test_cli_verify_passes);
    tcase_add_test(tc, test_cli_verify_detects_perturbation);
    tcase_add_test(tc, test_cli_doctor_fingerprint);
    tcase_add_test(tc, test_cli_bench_numbers_and_json);
    tcase_add_test(tc, test_cli_install_tools);
    suite_add_tcase(s, tc);
    return s;
}
