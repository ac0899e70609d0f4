/*
 * fuzz_grammar.c — libFuzzer over the grammar compilers (lib/grammar):
 * byte 0 picks the input's kind (even: GBNF, odd: a JSON schema), the rest
 * is the text; when the text is long enough its last 64 bytes are also fed,
 * byte by byte, to the compiled grammar's automaton. Traps (a crash for
 * libFuzzer) when a promise breaks:
 *   - a refusal is DI_ERR_GRAMMAR, DI_ERR_UNSUPPORTED or DI_ERR_OUT_OF_MEMORY,
 *     with a message, and a GBNF error names its line and column;
 *   - a schema's GBNF compiles again, to a grammar of its own;
 *   - every state the automaton reaches has a top, and its local state too.
 * ASan and UBSan catch the rest (reads past the text, overflows, leaks).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/grammar/gbnf_parse.h"
#include "lib/grammar/gram_match.h"
#include "lib/grammar/schema_convert.h"

#define TRAP() __builtin_trap()

static void check_refusal(di_status st, const char *err, int gbnf)
{
    if (st != DI_ERR_GRAMMAR && st != DI_ERR_UNSUPPORTED && st != DI_ERR_OUT_OF_MEMORY)
        TRAP();
    if (!err[0])
        TRAP();
    if (gbnf && st == DI_ERR_GRAMMAR && !strstr(err, "line ") && !strstr(err, "no rule named root") &&
        !strstr(err, "bytes; at most") && !strstr(err, "more than"))
        TRAP();
}

static void run_automaton(const di_gram *g, const uint8_t *bytes, size_t n)
{
    di_matcher *m;
    if (di_matcher_create(g, &m))
        return;
    uint32_t s;
    if (di_matcher_start(m, &s) == DI_OK) {
        for (size_t i = 0; i < n && s != DI_MATCH_DEAD; i++) {
            uint32_t local;
            if (m->states[s].n == 0)
                TRAP();
            if (di_matcher_local(m, s, &local) == DI_OK && m->states[local].n == 0)
                TRAP();
            if (di_matcher_step(m, s, bytes[i], &s))
                break;
        }
    }
    di_matcher_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int schema = data[0] & 1;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    char err[512] = "";
    di_gram *g = NULL;
    di_status st;
    if (!schema) {
        st = di_gbnf_parse(text, len, &g, err, sizeof err);
        if (st)
            check_refusal(st, err, 1);
    } else {
        char *gbnf = NULL;
        size_t gbnf_len = 0;
        st = di_schema_to_gbnf(text, len, &gbnf, &gbnf_len, err, sizeof err);
        if (st) {
            check_refusal(st, err, 0);
        } else {
            st = di_gbnf_parse(gbnf, gbnf_len, &g, err, sizeof err);
            /* the converter's grammar always compiles, unless it is too large
             * or its recursion is on the left ({"$ref": "#"}) */
            if (st && st != DI_ERR_OUT_OF_MEMORY && !strstr(err, "left recursion") && !strstr(err, "more than"))
                TRAP();
        }
        free(gbnf);
    }
    if (g && len > 64)
        run_automaton(g, data + size - 64, 64);
    di_gram_free(g);
    return 0;
}
