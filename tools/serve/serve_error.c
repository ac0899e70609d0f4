/*
 * serve_error.c — an sv_error filled in (serve.h): the one place the parts
 * of the server that check a request write the error its answer carries,
 * below all of them, so that none calls up into another.
 */
#include <stdarg.h>
#include <stdio.h>

#include "serve/serve.h"

static void set_error(sv_error *e, int status, const char *type, const char *param, const char *fmt, va_list ap)
{
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    vsnprintf(e->message, sizeof e->message, fmt, ap);
}

void sv_set_error(sv_error *e, int status, const char *type, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(e, status, type, param, fmt, ap);
    va_end(ap);
}

int sv_bad(sv_error *e, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(e, 400, "invalid_request_error", param, fmt, ap);
    va_end(ap);
    return -1;
}
