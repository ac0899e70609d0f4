/*
 * check_golden.c — digests that survive upgrades: the digests committed in
 * tests/data/golden_digests/ (every generated model's prompt positions and
 * greedy tokens, the real model on fixed prompts) must come out of this
 * build, on every CPU path this machine runs. They were recorded with
 * DI_NUMERICS_VERSION 1 and reproduced by every build of make
 * check-portability (gcc and clang, -O0 and -O3, glibc and musl, x86-64 and
 * aarch64); a change of any of them is a change of the numerics version
 * (docs/DETERMINISM.md, "Digests across releases").
 *
 * digests-integer.txt holds the same cases in the integer profile
 * (DI_PROFILE_INTEGER, recorded 2026-12-03 when its definition became
 * int8 codes for every quantized type); every CPU path must give them too.
 *
 * The generated models must be the bytes they were recorded on:
 * models.sha256 holds their SHA-256, so a changed generator (or numpy) is
 * reported as such, not as a numerics change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

static const char *golden_path(const char *file)
{
    static char path[1024];
    const char *root = getenv("DI_TEST_ROOT");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set (run the suite with make check)");
    snprintf(path, sizeof path, "%s/tests/data/golden_digests/%s", root, file);
    return path;
}

START_TEST(test_generated_models_are_the_recorded_bytes)
{
    const char *models = getenv("DI_TEST_MODELS");
    ck_assert_ptr_nonnull(models);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && sha256sum --quiet -c '%s' 2>&1", models, golden_path("models.sha256"));
    FILE *p = popen(cmd, "r");
    char line[512], all[4096] = "";
    while (fgets(line, sizeof line, p))
        strncat(all, line, sizeof all - strlen(all) - 1);
    ck_assert_msg(pclose(p) == 0,
                  "tests/tools/make_test_models.py no longer writes the models the golden digests were "
                  "recorded on:\n%s",
                  all);
}
END_TEST

static const char *const paths[] = {"scalar", "avx2", "avx512"};
static const di_cpu_path path_ids[] = {DI_CPU_PATH_SCALAR, DI_CPU_PATH_AVX2, DI_CPU_PATH_AVX512};

static const char *const profiles[] = {"portable", "integer"};
static const char *const golden_files[] = {"digests.txt", "digests-integer.txt"};

/* _i: the CPU path (_i % 3) and the profile (_i / 3). */
START_TEST(test_golden_digests)
{
    const int path = _i % 3, profile = _i / 3;
    if (!tu_cpu_path_available(path_ids[path]))
        return;
    const char *prog = getenv("DI_TEST_DIGESTS"), *root = getenv("DI_TEST_ROOT"),
               *models = getenv("DI_TEST_MODELS"), *real = getenv("DI_TEST_REAL_MODEL");
    ck_assert_msg(prog && root && models, "DI_TEST_DIGESTS, DI_TEST_ROOT or DI_TEST_MODELS is not set");
    const int with_real = real && *real;
    char cases[] = "/tmp/di_golden_cases_XXXXXX";
    const int fd = mkstemp(cases);
    ck_assert_int_ge(fd, 0);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s/tests/portability/cases.sh' '%s' '%s' > '%s' && DETINFER_CPU_PATH=%s DI_DIGESTS_PROFILE=%s '%s' '%s'",
             root, models, with_real ? real : "", cases, paths[path], profiles[profile], prog, cases);
    FILE *p = popen(cmd, "r");
    FILE *g = fopen(golden_path(golden_files[profile]), "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(g);
    char want[512], got[512];
    unsigned n = 0, skipped = 0;
    while (fgets(want, sizeof want, g)) {
        if (!with_real && !strncmp(want, "real", 4)) {
            skipped++;
            continue;
        }
        ck_assert_msg(fgets(got, sizeof got, p) != NULL, "%s path, %s: the digest program stopped before: %s",
                      paths[path], profiles[profile], want);
        ck_assert_msg(!strcmp(want, got), "%s path, %s: golden %s       got %s", paths[path], profiles[profile], want,
                      got);
        n++;
    }
    fclose(g);
    ck_assert_msg(fgets(got, sizeof got, p) == NULL, "more output than golden digests: %s", got);
    ck_assert_int_eq(pclose(p), 0);
    close(fd);
    unlink(cases);
    printf("golden: %s path, %s: %u golden lines equal%s\n", paths[path], profiles[profile], n,
           skipped ? " (no real model: its lines skipped)" : "");
}
END_TEST

Suite *golden_suite(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("golden");
    /* make check-baseline runs every model's digests on the scalar path with
     * glibc's software fmaf: minutes for the 30 generated models and the real one */
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_generated_models_are_the_recorded_bytes);
    tcase_add_loop_test(tc, test_golden_digests, 0, 6);
    suite_add_tcase(s, tc);
    return s;
}
