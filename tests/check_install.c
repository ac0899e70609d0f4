/*
 * check_install.c — the installed library as a user sees it: make install,
 * pkg-config, the example built against the installed header and .so, the
 * Python ctypes smoke test, make uninstall (tests/install_test.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "test_util.h"

START_TEST(test_install_pkgconfig_example_ffi_uninstall)
{
    const char *root = getenv("DI_TEST_ROOT");
    const char *sanitize = getenv("DI_TEST_SANITIZE");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set (run the suite with make check)");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "bash '%s/tests/install_test.sh' '%s' '%s' '%s' 2>&1", root, root,
             tu_model_path("gqa_untied_q8_0", ".gguf"), sanitize ? sanitize : "");
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    char line[1024];
    while (fgets(line, sizeof line, p))
        fputs(line, stdout);
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "install_test.sh failed (status %d)", status);
}
END_TEST

Suite *install_suite(void)
{
    Suite *s = suite_create("install");
    TCase *tc = tcase_create("pkg-config");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_install_pkgconfig_example_ffi_uninstall);
    suite_add_tcase(s, tc);
    return s;
}
