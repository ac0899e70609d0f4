/*
 * check_serve.c — `detinfer serve` and `detinfer verify --url` as clients
 * see them: runs the pytest suite of tests/serve (the official openai
 * package and curl against a server on a free loopback port; every response
 * compared with the library run alone), in two test cases: the tool-call
 * files and the rest. `make check-serve` runs the same suite directly.
 *
 * The tool is $DI_TEST_TOOL, or tools/detinfer next to the example program
 * ($DI_TEST_EXAMPLE is BUILD/examples/generate).
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_util.h"

/* The tool-call files run the real model most; they are a test case of their
 * own so that each half has its own time bound. */
#define TOOL_FILES "tests/serve/test_tools.py tests/serve/test_responses_tools.py tests/serve/test_langchain.py"

/* pytest over `files` (paths from the root, or "" for tests/serve less the
 * tool-call files); under ASan (DI_TEST_SANITIZE=1) without the tests marked
 * heavy (conftest.py). */
static void run_pytest(const char *files)
{
    const char *root = getenv("DI_TEST_ROOT");
    const char *models = getenv("DI_TEST_MODELS");
    const char *example = getenv("DI_TEST_EXAMPLE");
    const char *tool = getenv("DI_TEST_TOOL");
    const char *sanitize = getenv("DI_TEST_SANITIZE");
    const char *real = getenv("DI_TEST_REAL_MODEL");
    /* DI_TEST_SLOW: the time bounds' factor, when given (.ci/run, sharing the CPUs with another suite) */
    const char *slow = getenv("DI_TEST_SLOW");
    if (slow && strspn(slow, "0123456789") != strlen(slow))
        slow = NULL;
    const int asan = sanitize && !strcmp(sanitize, "1");
    ck_assert_msg(root && models && (tool || example),
                  "DI_TEST_ROOT / DI_TEST_MODELS / DI_TEST_EXAMPLE are not set (run the suite with make check)");
    char path[4096], cmd[16384];
    if (tool && *tool) {
        snprintf(path, sizeof path, "%s", tool);
    } else {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", example);
        snprintf(path, sizeof path, "%s/../tools/detinfer", dirname(copy));
    }
    char select[1024] = "tests/serve";
    if (!*files) {
        const char *f = TOOL_FILES;
        while (*f) { /* --ignore each tool-call file */
            const size_t n = strcspn(f, " ");
            snprintf(select + strlen(select), sizeof select - strlen(select), " --ignore=%.*s", (int)n, f);
            f += n + (f[n] == ' ');
        }
    }
    snprintf(cmd, sizeof cmd,
             "cd '%s' && DETINFER='%s' DI_TEST_MODELS='%s' DI_TEST_REAL_MODEL='%s' DI_TEST_SLOW=%s "
             "python3 -m pytest -q -p no:cacheprovider %s %s 2>&1",
             root, path, models, real ? real : "", slow ? slow : asan ? "4" : "1", asan ? "-m 'not heavy'" : "",
             *files ? files : select);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    char line[4096];
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        fflush(stdout); /* the forked test's output survives its failure */
    }
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tests/serve failed (status %d)", status);
}

START_TEST(test_serve_pytest_suite)
{
    run_pytest("");
}
END_TEST

START_TEST(test_serve_tool_calls)
{
    run_pytest(TOOL_FILES);
}
END_TEST

Suite *serve_suite(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("pytest");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_serve_pytest_suite);
    suite_add_tcase(s, tc);
    TCase *tools = tcase_create("tool calls");
    tcase_set_timeout(tools, 1200);
    tcase_add_test(tools, test_serve_tool_calls);
    suite_add_tcase(s, tools);
    return s;
}
