/*
 * text_cursor.h — what the grammar side's parsers of untrusted text share
 * (gbnf_parse.c, json_dom.c): a position in the text, the first error kept
 * with its place, and that place as a line and a column.
 */
#ifndef DI_TEXT_CURSOR_H
#define DI_TEXT_CURSOR_H

#include <stddef.h>

#include "detinfer.h"

typedef struct di_cursor {
    const char *s;
    size_t n, i;      /* the text and the position */
    int failed;
    size_t err_at;    /* the byte the first error names */
    char err[256];
} di_cursor;

/* Keeps the first error, at byte `at`; returns 0 (so `return fail(...)`). */
int di_cursor_fail(di_cursor *c, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Line and column (both from 1; the column in characters) of byte `at` of
 * text. */
void di_text_line_column(const char *text, size_t len, size_t at, size_t *line, size_t *column);

/* "line L, column C: what" of byte `at` of text into err; returns st. */
di_status di_text_error(const char *text, size_t len, size_t at, di_status st, const char *what, char *err,
                        size_t err_size);

#endif /* DI_TEXT_CURSOR_H */
