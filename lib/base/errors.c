/*
 * errors.c — di_error, the one way every layer fills a message buffer.
 */
#include "lib/base/errors.h"

#include <stdarg.h>
#include <stdio.h>

di_status di_error(char *buf, size_t size, di_status status, const char *fmt, ...)
{
    if (buf && size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, size, fmt, ap);
        va_end(ap);
    }
    return status;
}
