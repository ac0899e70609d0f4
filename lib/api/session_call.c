/*
 * session_call.c — what every session call starts with, below the files
 * that make the calls (session.c, session_grammar.c, speculate.c,
 * drafter.c): the message of a failure, and a sequence call's checks.
 */
#include <stdarg.h>
#include <stdio.h>

#include "lib/api/session_internal.h"

di_status di_session_fail(di_session *s, di_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
    va_end(ap);
    return st;
}

di_status di_session_get_seq(di_session *s, uint32_t seq, sequence **out)
{
    if (seq >= s->max_sequences)
        return di_session_fail(s, DI_ERR_SEQUENCE, "sequence %u is outside [0, %u)", seq, s->max_sequences);
    *out = &s->seqs[seq];
    return DI_OK;
}

di_status di_session_begin_seq_call(di_session *s, uint32_t seq, const void *out, sequence **q)
{
    if (!s)
        return DI_ERR_INVALID_ARGUMENT;
    s->errmsg[0] = '\0';
    if (!out)
        return di_session_fail(s, DI_ERR_INVALID_ARGUMENT, "an output pointer is NULL");
    return di_session_get_seq(s, seq, q);
}
