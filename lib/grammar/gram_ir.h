/*
 * gram_ir.h — a compiled grammar: rules of alternatives over character sets
 * (code points) and rule references. What the GBNF parser (gbnf_parse.c)
 * builds through the builder (gram_build.c), and what the matcher
 * (gram_match.c) runs. Immutable once built.
 *
 * Layout: every alternative is a run of elements ended by an END element, in
 * one flat array; alternative a of rule r starts at
 * elems[alt_start[rule_alts[r] + a]], and rule r has
 * rule_alts[r + 1] - rule_alts[r] alternatives. An element is a CHARS (match
 * one code point of a set) or a RULE (derive that rule here). A position in
 * the grammar is an element index.
 */
#ifndef DI_GRAM_IR_H
#define DI_GRAM_IR_H

#include <stddef.h>
#include <stdint.h>

#include "detinfer.h"

enum { DI_GRAM_END = 0, DI_GRAM_CHARS = 1, DI_GRAM_RULE = 2 };
#define DI_GRAM_KIND(e) ((e) >> 30)
#define DI_GRAM_VALUE(e) ((e) & 0x3fffffffu)
#define DI_GRAM_MAKE(kind, value) (((uint32_t)(kind) << 30) | (uint32_t)(value))

#define DI_GRAM_MAX_CODEPOINT 0x10ffffu

/* Limits on what a grammar text may make (the text is untrusted). */
#define DI_GRAM_MAX_TEXT (1u << 20)       /* bytes of GBNF text */
#define DI_GRAM_MAX_ELEMS (1u << 20)      /* elements after repetitions are expanded */
#define DI_GRAM_MAX_RULES (1u << 16)
#define DI_GRAM_MAX_NESTING 128u          /* groups inside groups */
#define DI_GRAM_MAX_REPEAT 10000u         /* m and n of x{m,n} */

/* A set of code points: sorted, disjoint, non-adjacent ranges, plus a bitmap
 * of its ASCII members for the common case. */
typedef struct di_charset {
    uint32_t first, n;      /* ranges[2*first .. 2*(first+n)) of the grammar: lo, hi pairs */
    uint32_t ascii[4];      /* bit c of the 128: code point c is in the set */
    uint32_t negated;       /* written [^...]: a token may end inside a character only when
                               the set holds every code point its bytes may begin (gram_match.h) */
} di_charset;

typedef struct di_gram {
    uint32_t *elems;
    uint32_t n_elems;
    uint32_t *alt_start;    /* first element of each alternative */
    uint32_t *rule_alts;    /* [n_rules + 1]: rule r's alternatives in alt_start */
    uint32_t n_rules;
    char **rule_names;      /* for messages */
    uint32_t *ranges;       /* lo, hi pairs of every charset */
    di_charset *sets;
    uint32_t n_sets;
    uint32_t root;          /* the rule named "root" */
} di_gram;

void di_gram_free(di_gram *g);

/* 1 when code point c is in charset `set`. */
int di_gram_charset_has(const di_gram *g, uint32_t set, uint32_t c);
/* 1 when some code point in [lo, hi] is in charset `set`. */
int di_gram_charset_meets(const di_gram *g, uint32_t set, uint32_t lo, uint32_t hi);
/* 1 when every code point in [lo, hi] is in charset `set`. */
int di_gram_charset_holds(const di_gram *g, uint32_t set, uint32_t lo, uint32_t hi);

/* ---- Building one (gram_build.c) ------------------------------------------
 * Rules are named; a reference may come before the definition. Each rule's
 * body is appended alternative by alternative: elements, then
 * di_gram_build_end_alt. di_gram_build_finish checks the whole (every
 * referenced rule defined, a rule named root, no left recursion the matcher
 * cannot run: gram_build.c) and lays it out. Errors name the rule and the place in the source (a byte offset the
 * caller turns into a line and column, or -1). */
typedef struct di_gram_builder di_gram_builder;

di_gram_builder *di_gram_build_new(void);
void di_gram_build_free(di_gram_builder *b);
/* The id of the rule `name` (created on first use); offset: where it is
 * named, for an error that it is undefined. -1 when out of memory or past
 * DI_GRAM_MAX_RULES (the builder's error says which). */
int64_t di_gram_build_rule(di_gram_builder *b, const char *name, size_t len, size_t offset);
/* A new rule named after base ("base_N"), defined by the caller at once;
 * offset: the place its text comes from, for messages. */
int64_t di_gram_build_new_rule(di_gram_builder *b, const char *base, size_t offset);
/* Marks rule r defined at offset; 0 when it was already defined. */
int di_gram_build_define(di_gram_builder *b, uint32_t r, size_t offset);
/* Appends to the alternative being written of rule r: a charset made of
 * n ranges (lo, hi pairs, any order, overlaps allowed), negated or not; a
 * reference to rule `ref`; an element as it is; the end of the alternative.
 * 0 on failure. */
int di_gram_build_chars(di_gram_builder *b, uint32_t r, const uint32_t *ranges, size_t n, int negated);
int di_gram_build_ref(di_gram_builder *b, uint32_t r, uint32_t ref);
int di_gram_build_elem(di_gram_builder *b, uint32_t r, uint32_t elem);
int di_gram_build_end_alt(di_gram_builder *b, uint32_t r);
/* Elements in rule r's alternative being written. */
uint32_t di_gram_build_alt_len(const di_gram_builder *b, uint32_t r);
/* Makes the elements of that alternative from index `from` on one element:
 * left as it is when it is one already, else moved into a new rule whose
 * reference takes their place (a repeated literal or group). 0 on failure. */
int di_gram_build_wrap(di_gram_builder *b, uint32_t r, uint32_t from);
/* Removes the last element of that alternative and returns it. */
uint32_t di_gram_build_pop(di_gram_builder *b, uint32_t r);

/* The finished grammar, or NULL with status and message (and *err_offset,
 * or -1 when the error has no place). */
di_status di_gram_build_finish(di_gram_builder *b, di_gram **out, int64_t *err_offset, char *err,
                               size_t err_size);
/* The builder's message when one of the calls above returned 0 or -1. */
const char *di_gram_build_error(const di_gram_builder *b, di_status *status);

#endif /* DI_GRAM_IR_H */
