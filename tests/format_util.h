/*
 * format_util.h — what the model-file suites share (check_format.c,
 * check_model.c, check_architectures.c): files written by gguf_builder into
 * a fresh temp dir and removed before any assertion, loaded with
 * di_model_load, and the assertions every refused file gets.
 */
#ifndef DI_TEST_FORMAT_UTIL_H
#define DI_TEST_FORMAT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"
#include "gguf_builder.h"

#define ERRBUF_SIZE 512
#define TWO_POW(n) ((uint64_t)1 << (n))
#define LOOP(tc, test, array) tcase_add_loop_test(tc, test, 0, (int)(sizeof array / sizeof array[0]))

/* What *out holds before a load, so a library that forgets to clear it on
 * failure is caught (and the marker is never freed). */
extern char untouched_marker;
#define UNTOUCHED ((di_model *)&untouched_marker)

/* The one-layer llama of gguf_builder's defaults. */
void tiny_model(gb_model *m);
/* Writes bytes (or the serialized model) to a fresh temp file, loads it and
 * removes the file and dir. */
di_status load_bytes(const void *bytes, size_t len, di_model **out, char *err, size_t err_size);
di_status load_model(const gb_model *m, di_model **out, char *err, size_t err_size);
/* The common assertion of every bad-file case (needle may be NULL). */
void check_refused(di_status st, di_model *model, const char *err, di_status want, const char *needle);
void expect_bytes_refused(const void *bytes, size_t len, di_status want, const char *needle);
void expect_refused(const gb_model *m, di_status want, const char *needle);
/* Builds, distorts nothing, and expects the model to load. */
void expect_loads(const gb_model *m);

#endif /* DI_TEST_FORMAT_UTIL_H */
