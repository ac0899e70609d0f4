/*
 * text_cursor.c — errors with their line and column (text_cursor.h).
 */
#include "lib/grammar/text_cursor.h"

#include <stdarg.h>
#include <stdio.h>

#include "lib/base/errors.h"

int di_cursor_fail(di_cursor *c, size_t at, const char *fmt, ...)
{
    if (!c->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
        c->failed = 1;
        c->err_at = at;
    }
    return 0;
}

void di_text_line_column(const char *text, size_t len, size_t at, size_t *line, size_t *column)
{
    size_t l = 1, col = 1;
    for (size_t i = 0; i < at && i < len; i++) {
        if (text[i] == '\n') {
            l++;
            col = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            col++;
        }
    }
    *line = l;
    *column = col;
}

di_status di_text_error(const char *text, size_t len, size_t at, di_status st, const char *what, char *err,
                        size_t err_size)
{
    size_t line, column;
    di_text_line_column(text, len, at, &line, &column);
    return di_error(err, err_size, st, "line %zu, column %zu: %s", line, column, what);
}
