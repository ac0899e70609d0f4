/*
 * format_util.c — the model-file suites' shared helpers (format_util.h).
 */
#include <check.h>
#include <string.h>

#include "format_util.h"
#include "test_util.h"

char untouched_marker;

void tiny_model(gb_model *m)
{
    gb_llama_params p = gb_llama_defaults();
    gb_model_llama(m, &p);
}

/* Writes bytes to a fresh temp file, loads it and removes the file and dir. */
di_status load_bytes(const void *bytes, size_t len, di_model **out, char *err,
                     size_t err_size)
{
    char dir[4096], path[4200];
    ck_assert_int_eq(gb_tmpdir(dir, sizeof dir), 0);
    gb_path(path, sizeof path, dir, "model.gguf");
    int written = gb_write_file(path, bytes, len);
    di_status st = written == 0 ? di_model_load(path, out, err, err_size) : DI_ERR_INTERNAL;
    gb_rmdir(dir);
    ck_assert_msg(written == 0, "cannot write %s", path);
    return st;
}

di_status load_model(const gb_model *m, di_model **out, char *err, size_t err_size)
{
    gb_buf b;
    gb_buf_init(&b);
    gb_model_serialize(m, &b, NULL);
    di_status st = load_bytes(b.data, b.len, out, err, err_size);
    gb_buf_free(&b);
    return st;
}

/* The common assertion of every bad-file case. needle may be NULL. */
void check_refused(di_status st, di_model *model, const char *err, di_status want,
                   const char *needle)
{
    if (model != UNTOUCHED)
        di_model_free(model); /* NULL when the library behaves; freed to keep LSan quiet otherwise */
    ck_assert_msg(st == want, "status %s, expected %s (message: '%s')", di_status_name(st),
                  di_status_name(want), err);
    ck_assert_msg(model == NULL, "*out is not NULL after a failed load");
    ck_assert_msg(err[0] != '\0', "empty error message for %s", di_status_name(want));
    if (needle)
        ck_assert_msg(tu_mentions(err, needle), "message '%s' does not mention '%s'", err, needle);
}

void expect_bytes_refused(const void *bytes, size_t len, di_status want, const char *needle)
{
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    di_status st = load_bytes(bytes, len, &model, err, sizeof err);
    check_refused(st, model, err, want, needle);
}

void expect_refused(const gb_model *m, di_status want, const char *needle)
{
    char err[ERRBUF_SIZE] = "";
    di_model *model = UNTOUCHED;
    di_status st = load_model(m, &model, err, sizeof err);
    check_refused(st, model, err, want, needle);
}

/* Builds, distorts nothing, and expects the model to load. */
void expect_loads(const gb_model *m)
{
    char err[ERRBUF_SIZE] = "";
    di_model *model = NULL;
    di_status st = load_model(m, &model, err, sizeof err);
    di_model_free(model);
    ck_assert_msg(st == DI_OK, "status %s: %s", di_status_name(st), err);
}

