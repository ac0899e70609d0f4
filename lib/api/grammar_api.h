/*
 * grammar_api.h — the public di_grammar handle as the session layer sees
 * it: the compiled grammar, its GBNF text and digest, and a reference count
 * (a session holds a reference while a sequence, or its cache, uses it).
 */
#ifndef DI_GRAMMAR_API_H
#define DI_GRAMMAR_API_H

#include "detinfer.h"
#include "lib/grammar/gram_ir.h"

struct di_grammar {
    int refs;            /* atomic: the caller's handle and every session's use */
    di_gram *gram;
    char *gbnf;          /* NUL-terminated, gbnf_len bytes */
    size_t gbnf_len;
    di_digest digest;    /* XXH3-128 of the GBNF text */
};

/* Another reference to g (for a session); dropped with di_grammar_free. */
void di_grammar_retain(const di_grammar *g);

#endif /* DI_GRAMMAR_API_H */
