/*
 * check_grammar.c — grammars (docs/STRUCTURED.md): GBNF and JSON-schema
 * errors with their places, the public calls' misuse, and a sequence's
 * grammar through steps, truncate, copy, end tokens and both ways of
 * choosing a token, on a model with a SentencePiece vocabulary (tok_spm).
 * The allowed sets themselves are checked against an independent reference
 * (tests/grammar_known_answers.py, run from here), determinism in
 * check_grammar_determinism.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/grammar/gbnf_parse.h"
#include "lib/grammar/gram_match.h"
#include "lib/grammar/json_dom.h"
#include "lib/grammar/schema_convert.h"
#include "test_util.h"

static di_grammar *gbnf(const char *text)
{
    di_grammar *g = NULL;
    char err[512];
    di_status st = di_grammar_from_gbnf(text, strlen(text), 0, &g, err, sizeof err);
    ck_assert_msg(st == DI_OK, "%s: %s: %s", text, di_status_name(st), err);
    return g;
}

static di_grammar *schema(const char *text)
{
    di_grammar *g = NULL;
    char err[512];
    di_status st = di_grammar_from_json_schema(text, strlen(text), 0, &g, err, sizeof err);
    ck_assert_msg(st == DI_OK, "%s: %s: %s", text, di_status_name(st), err);
    return g;
}

/* ---- errors -------------------------------------------------------------------- */

typedef struct bad_case {
    const char *text;
    di_status status;
    const char *message; /* a substring of the message */
} bad_case;

typedef di_status (*compile_fn)(const char *, size_t, uint32_t, di_grammar **, char *, size_t);

/* Each case refused with its status and a message holding its text. */
static void expect_refusals(const bad_case *cases, size_t n, compile_fn compile)
{
    for (size_t i = 0; i < n; i++) {
        di_grammar *g = (di_grammar *)1;
        char err[512] = "";
        di_status st = compile(cases[i].text, strlen(cases[i].text), 0, &g, err, sizeof err);
        ck_assert_msg(st == cases[i].status, "case %zu (%s): %s (%s)", i, cases[i].text, di_status_name(st), err);
        ck_assert_msg(g == NULL, "case %zu: *out not NULL on failure", i);
        ck_assert_msg(strstr(err, cases[i].message), "case %zu (%s): message '%s' lacks '%s'", i, cases[i].text,
                      err, cases[i].message);
    }
}

START_TEST(test_gbnf_errors)
{
    static char deep[600];
    memset(deep, 0, sizeof deep);
    strcpy(deep, "root ::= ");
    for (int i = 0; i < 130; i++)
        strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 130; i++)
        strcat(deep, ")");
    const bad_case cases[] = {
        {"root ::= \"a\" (\"b\"", DI_ERR_GRAMMAR, "line 1, column 14: unbalanced (: no ) closes it"},
        {"root ::= [a-z", DI_ERR_GRAMMAR, "line 1, column 10: unterminated character class"},
        {"root ::= \"a\" )", DI_ERR_GRAMMAR, "line 1, column 14: unbalanced ): no ( before it"},
        {"root ::= \"a\"{2", DI_ERR_GRAMMAR, "line 1, column 13: unbalanced {"},
        {"root ::= foo\n", DI_ERR_GRAMMAR, "line 1, column 10: undefined rule foo"},
        {"root ::= \"x\" | bar\nbar ::= baz\n", DI_ERR_GRAMMAR, "line 2, column 9: undefined rule baz"},
        {"root ::= root \"a\" | \"b\"", DI_ERR_GRAMMAR,
         "line 1, column 1: left recursion is not supported: rule root can begin with itself (root -> root)"},
        {"root ::= a\na ::= b \"x\"\nb ::= c? a\nc ::= \"c\"", DI_ERR_GRAMMAR,
         "line 2, column 1: left recursion is not supported: rule a can begin with itself (a -> b -> a)"},
        /* through the rules a repetition and a group write out: named by the user's rule and line */
        {"root ::= x\n\nx ::= (\"a\" | root \"b\")*", DI_ERR_GRAMMAR,
         "line 3, column 1: left recursion is not supported: rule x can begin with itself (x -> root -> x)"},
        {"root ::= (\"a\"? root \"b\")+ | \"c\"", DI_ERR_GRAMMAR,
         "line 1, column 1: left recursion is not supported: rule root can begin with itself"},
        /* references alone in a cycle: llama.cpp refuses them too */
        {"root ::= a\na ::= root | \"x\"", DI_ERR_GRAMMAR, "line 1, column 1: left recursion is not supported: "
         "rule root can begin with itself (root -> a -> root)"},
        {"root ::= \"a\"\nroot ::= \"b\"", DI_ERR_GRAMMAR, "line 2, column 1: rule root is defined twice"},
        {"other ::= \"a\"", DI_ERR_GRAMMAR, "no rule named root"},
        {"", DI_ERR_GRAMMAR, "no rule named root"},
        {"root ::= \"\\q\"", DI_ERR_GRAMMAR, "line 1, column 11: unknown escape \\q"},
        {"root ::= \"abc", DI_ERR_GRAMMAR, "line 1, column 10: unterminated literal"},
        {"root ::= \"a\"{3,2}", DI_ERR_GRAMMAR, "maximum below its minimum"},
        {"root ::= \"a\"{99999}", DI_ERR_GRAMMAR, "repetition count over 10000"},
        {"root ::= * \"a\"", DI_ERR_GRAMMAR, "line 1, column 10: * repeats nothing"},
        {"root = \"a\"", DI_ERR_GRAMMAR, "line 1, column 6: expecting ::="},
        {"root ::= [z-a]", DI_ERR_GRAMMAR, "backwards"},
        {"root ::= \"\\x4\"", DI_ERR_GRAMMAR, "expecting 2 hex digits"},
        {"root ::= \"\\U00110000\"", DI_ERR_GRAMMAR, "past U+10FFFF"},
        {"root ::= <[123]>", DI_ERR_GRAMMAR, "token references"},
        {"root ::= \"\xe9\"", DI_ERR_GRAMMAR, "line 1, column 11: invalid UTF-8"},
        {"\n\nroot ::= \"a\" \"b\" ]", DI_ERR_GRAMMAR, "line 3, column 18: unbalanced ]"},
        {deep, DI_ERR_GRAMMAR, "nested deeper than 128"},
    };
    expect_refusals(cases, sizeof cases / sizeof *cases, di_grammar_from_gbnf);
}
END_TEST

START_TEST(test_schema_errors)
{
    const bad_case cases[] = {
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"foo\": 1}}}", DI_ERR_UNSUPPORTED,
         "unsupported keyword foo at /properties/a/foo"},
        {"{\"oneOf\": [{\"type\": \"string\"}]}", DI_ERR_UNSUPPORTED, "unsupported keyword oneOf at /oneOf"},
        {"{\"enum\": []}", DI_ERR_GRAMMAR, "empty enum: it allows no value at /enum"},
        {"{\"$ref\": \"#/$defs/missing\", \"$defs\": {}}", DI_ERR_GRAMMAR,
         "bad $ref '#/$defs/missing': it points at nothing in the schema at /$ref"},
        {"{\"type\": \"array\", \"items\": {\"$ref\": \"#/definitions/x\"}}", DI_ERR_GRAMMAR, "at /items/$ref"},
        {"{\"$ref\": \"http://example.com/s.json\"}", DI_ERR_UNSUPPORTED, "only local references"},
        {"{\"type\": \"string\"", DI_ERR_GRAMMAR, "line 1, column 1: unbalanced {"},
        {"{\"type\": \"string\",\n \"type\": \"integer\"}", DI_ERR_GRAMMAR, "line 2, column 2: duplicate key"},
        {"[1, 2,]", DI_ERR_GRAMMAR, "line 1, column 7: expecting a value"},
        {"{\"type\": \"number\", \"minimum\": 2e15}", DI_ERR_GRAMMAR, "no number (a decimal of at most 15"},
        {"{\"type\": \"number\", \"exclusiveMinimum\": 1, \"maximum\": 1}", DI_ERR_GRAMMAR, "no number"},
        {"{\"type\": \"number\", \"exclusiveMaximum\": \"1\"}", DI_ERR_GRAMMAR,
         "exclusiveMaximum must be a number at /exclusiveMaximum"},
        {"{\"type\": \"number\", \"exclusiveMinimum\": true}", DI_ERR_UNSUPPORTED, "as a boolean (draft 4)"},
        {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 1}", DI_ERR_GRAMMAR, "no integer"},
        {"{\"type\": \"string\", \"format\": \"uri\"}", DI_ERR_UNSUPPORTED, "unsupported format \"uri\" at /format"},
        {"{\"type\": \"string\", \"pattern\": \"a(?=b)\"}", DI_ERR_UNSUPPORTED, "unsupported pattern"},
        {"{\"type\": \"string\", \"pattern\": \"a\\\\1\"}", DI_ERR_UNSUPPORTED, "unsupported pattern"},
        {"{\"type\": \"foo\"}", DI_ERR_GRAMMAR, "unknown type \"foo\""},
        {"{\"type\": \"array\", \"items\": []}", DI_ERR_GRAMMAR,
         "items must be a non-empty array of schemas at /items"},
        {"{\"type\": \"array\", \"prefixItems\": {}}", DI_ERR_GRAMMAR,
         "prefixItems must be a non-empty array of schemas at /prefixItems"},
        {"{\"prefixItems\": [{}], \"items\": [{}]}", DI_ERR_UNSUPPORTED, "items as an array beside prefixItems at /items"},
        {"{\"type\": \"array\", \"additionalItems\": false}", DI_ERR_UNSUPPORTED,
         "additionalItems without items as an array at /additionalItems"},
        {"{\"prefixItems\": [{}], \"items\": false, \"minItems\": 2}", DI_ERR_GRAMMAR,
         "minItems 2 is above the 1 items the tuple allows"},
        {"{\"prefixItems\": [{\"type\": \"integer\", \"minimum\": 3, \"maximum\": 2}]}", DI_ERR_GRAMMAR,
         "no integer (of at most 16 digits) lies within the bounds at /prefixItems/0"},
        {"{\"type\": \"array\", \"items\": false, \"minItems\": 1}", DI_ERR_GRAMMAR, "no array is valid"},
        {"{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", DI_ERR_GRAMMAR, "minItems 3 is above maxItems 2"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"]}", DI_ERR_UNSUPPORTED,
         "required property \"b\" is not in properties at /required/0"},
        {"{\"type\": \"object\", \"additionalProperties\": 1}", DI_ERR_GRAMMAR,
         "additionalProperties must be a schema (an object or a boolean) at /additionalProperties"},
        {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\", \"oneOf\": []}}",
         DI_ERR_UNSUPPORTED, "unsupported keyword oneOf at /additionalProperties/oneOf"},
        {"{\"anyOf\": []}", DI_ERR_GRAMMAR, "anyOf must be a non-empty array"},
        {"{\"anyOf\": [{\"type\": \"string\"}], \"type\": \"string\"}", DI_ERR_UNSUPPORTED, "beside anyOf"},
        {"false", DI_ERR_GRAMMAR, "the schema false allows no value"},
        {"{\"type\": \"string\", \"enum\": [1, 2]}", DI_ERR_GRAMMAR, "no value of enum has the schema's type"},
        {"{\"type\": \"string\", \"minLength\": -1}", DI_ERR_GRAMMAR, "minLength must be a non-negative integer"},
        {"{\"properties\": {\"x\": {\"uniqueItems\": true}}}", DI_ERR_UNSUPPORTED,
         "unsupported keyword uniqueItems at /properties/x/uniqueItems"},
        {"{\"$defs\": {\"a\": {\"allOf\": []}}, \"$ref\": \"#/$defs/a\"}", DI_ERR_UNSUPPORTED,
         "unsupported keyword allOf at /$defs/a/allOf"},
        {"{\"$ref\": \"#\"}", DI_ERR_GRAMMAR, "left recursion"},
    };
    expect_refusals(cases, sizeof cases / sizeof *cases, di_grammar_from_json_schema);
}
END_TEST

/* ---- accepted texts ------------------------------------------------------------- */

static char *gbnf_text(const di_grammar *g)
{
    size_t n = 0;
    ck_assert_int_eq(di_grammar_gbnf(g, NULL, 0, &n), DI_ERR_BUFFER_TOO_SMALL);
    char *text = malloc(n + 1);
    size_t m = 0;
    ck_assert_int_eq(di_grammar_gbnf(g, text, n + 1, &m), DI_OK);
    ck_assert_uint_eq(m, n);
    ck_assert_uint_eq(strlen(text), n);
    return text;
}

START_TEST(test_grammar_text_and_digest)
{
    const char *text = "# llama.cpp's arithmetic example\n"
                       "root  ::= (expr \"=\" ws term \"\\n\")+\n"
                       "expr  ::= term ([-+*/] term)*\n"
                       "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
                       "ident ::= [a-z] [a-z0-9_]* ws\n"
                       "num   ::= [0-9]+ ws\n"
                       "ws    ::= [ \\t\\n]*\n";
    di_grammar *a = gbnf(text), *b = gbnf(text), *c = gbnf("root ::= \"x\"");
    char *back = gbnf_text(a);
    ck_assert_str_eq(back, text);
    free(back);
    di_digest da, db, dc;
    ck_assert_int_eq(di_grammar_digest(a, &da), DI_OK);
    ck_assert_int_eq(di_grammar_digest(b, &db), DI_OK);
    ck_assert_int_eq(di_grammar_digest(c, &dc), DI_OK);
    ck_assert(di_digest_equal(&da, &db));
    ck_assert(!di_digest_equal(&da, &dc));
    /* a schema's grammar is GBNF that compiles again to the same digest */
    di_grammar *s = schema("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 1, "
                           "\"maximum\": 12}}, \"required\": [\"n\"], \"additionalProperties\": false}");
    char *st = gbnf_text(s);
    ck_assert_msg(strncmp(st, "root ::= ", 9) == 0, "%s", st);
    di_grammar *again = gbnf(st);
    di_digest ds, dg;
    di_grammar_digest(s, &ds);
    di_grammar_digest(again, &dg);
    ck_assert(di_digest_equal(&ds, &dg));
    free(st);
    di_grammar_free(a);
    di_grammar_free(b);
    di_grammar_free(c);
    di_grammar_free(s);
    di_grammar_free(again);
    di_grammar_free(NULL);
}
END_TEST

START_TEST(test_api_misuse)
{
    di_grammar *g = NULL;
    char err[256];
    ck_assert_int_eq(di_grammar_from_gbnf("root ::= \"a\"", 12, 0, NULL, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_grammar_from_gbnf(NULL, 3, 0, &g, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_grammar_from_gbnf("root ::= \"a\"", 12, 1, &g, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_grammar_from_json_schema("{}", 2, 4, &g, err, sizeof err), DI_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(di_grammar_from_json_schema("{}", 2, 0, &g, NULL, 0), DI_OK);
    ck_assert_int_eq(di_grammar_digest(NULL, NULL), DI_ERR_INVALID_ARGUMENT);
    size_t n;
    ck_assert_int_eq(di_grammar_gbnf(g, NULL, 5, &n), DI_ERR_INVALID_ARGUMENT);

    di_model *m = tu_load("tok_spm");
    di_session *s = tu_session(m, 1, 2, 0);
    ck_assert_int_eq(di_session_seq_set_grammar(s, 9, g, NULL, 0), DI_ERR_SEQUENCE);
    int32_t ends[9] = {0};
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, ends, 9), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, NULL, 1), DI_ERR_INVALID_ARGUMENT);
    ends[0] = 100000;
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, ends, 1), DI_ERR_TOKEN_RANGE);
    ck_assert_msg(strstr(di_session_errmsg(s), "end token 0 is 100000"), "%s", di_session_errmsg(s));
    uint32_t flags = 99, words[4];
    ck_assert_int_eq(di_session_seq_grammar_state(s, 0, &flags), DI_OK);
    ck_assert_uint_eq(flags, 0); /* the failed calls set nothing */
    ck_assert_int_eq(di_session_seq_grammar_state(s, 0, NULL), DI_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(di_session_seq_grammar_allowed(s, 0, words, 4), DI_ERR_BUFFER_TOO_SMALL);
    ck_assert_int_eq(di_session_seq_grammar_allowed(s, 0, NULL, 100), DI_ERR_INVALID_ARGUMENT);
    di_session_free(s);
    di_model_free(m);

    di_model *tiny = tu_tiny_model(); /* no tokenizer: no token has a text */
    s = tu_session(tiny, 1, 1, 0);
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, NULL, 0), DI_ERR_UNSUPPORTED);
    di_session_free(s);
    di_model_free(tiny);
    di_grammar_free(g);
}
END_TEST

/* ---- integer bounds --------------------------------------------------------------- */

/* The grammar of an integer schema with bounds holds exactly the decimal
 * integers in the range: every integer of [-1100, 1100] fed to the automaton
 * (lib/grammar's matcher, directly), against plain arithmetic. */
static int accepts(di_matcher *m, uint32_t start, const char *text)
{
    uint32_t s;
    ck_assert_int_eq(di_matcher_step_bytes(m, start, (const unsigned char *)text, strlen(text), &s), DI_OK);
    return s != DI_MATCH_DEAD && m->states[s].can_end;
}

START_TEST(test_integer_ranges)
{
    static const struct { const char *bounds; long long lo, hi; } cases[] = {
        {"\"minimum\": 0, \"maximum\": 120", 0, 120},
        {"\"minimum\": -40, \"maximum\": 50", -40, 50},
        {"\"minimum\": 1.5, \"exclusiveMaximum\": 4", 2, 3},
        {"\"exclusiveMinimum\": -12.5, \"maximum\": 999", -12, 999},
        {"\"minimum\": 7, \"maximum\": 7", 7, 7},
        {"\"minimum\": 100, \"maximum\": 1099", 100, 1099},
        {"\"minimum\": -1000, \"maximum\": -10", -1000, -10},
        {"\"maximum\": -995", -9999999999999999LL, -995},
        {"\"exclusiveMinimum\": 1000", 1001, 9999999999999999LL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char schema[256], err[512];
        snprintf(schema, sizeof schema, "{\"type\": \"integer\", %s}", cases[k].bounds);
        char *gbnf;
        size_t len;
        ck_assert_msg(di_schema_to_gbnf(schema, strlen(schema), &gbnf, &len, err, sizeof err) == DI_OK, "%s", err);
        di_gram *g;
        ck_assert_msg(di_gbnf_parse(gbnf, len, &g, err, sizeof err) == DI_OK, "%s: %s", gbnf, err);
        di_matcher *m;
        uint32_t start;
        ck_assert_int_eq(di_matcher_create(g, &m), DI_OK);
        ck_assert_int_eq(di_matcher_start(m, &start), DI_OK);
        for (long long n = -1100; n <= 1100; n++) {
            char text[32];
            snprintf(text, sizeof text, "%lld", n);
            ck_assert_msg(accepts(m, start, text) == (n >= cases[k].lo && n <= cases[k].hi), "%s: %lld (%s)",
                          schema, n, gbnf);
        }
        ck_assert(!accepts(m, start, "-0") && !accepts(m, start, "007") && !accepts(m, start, "1.0"));
        di_matcher_free(m);
        di_gram_free(g);
        free(gbnf);
    }
}
END_TEST

/* ---- languages against independent references ---------------------------------------- */

/* The matcher of a GBNF text, or of a schema's GBNF. */
static di_matcher *compile_matcher(const char *source, int is_schema, di_gram **g, uint32_t *start)
{
    char err[512], *gbnf = NULL;
    size_t len = strlen(source);
    if (is_schema) {
        ck_assert_msg(di_schema_to_gbnf(source, len, &gbnf, &len, err, sizeof err) == DI_OK, "%s: %s", source, err);
    }
    const di_status st = di_gbnf_parse(gbnf ? gbnf : source, len, g, err, sizeof err);
    ck_assert_msg(st == DI_OK, "%s: %s", gbnf ? gbnf : source, err);
    free(gbnf);
    di_matcher *m;
    ck_assert_int_eq(di_matcher_create(*g, &m), DI_OK);
    ck_assert_int_eq(di_matcher_start(m, start), DI_OK);
    return m;
}

/* Repetitions of what can be empty, the language llama.cpp gives them
 * (issue 42): ( [x]* )* is x*. */
START_TEST(test_nullable_repetitions)
{
    static const struct { const char *gbnf, *yes[6], *no[4]; } cases[] = {
        {"root ::= ( [x]* )*", {"", "x", "xx", "xxxxxxx"}, {"y", "xy", "x x"}},
        {"root ::= ( [x]* [y]? )*", {"", "y", "yy", "xyx", "yxxy"}, {"z", "xz"}},
        {"root ::= (\"\")*", {""}, {"x"}},
        {"root ::= (\"a\"? \"b\"?)+ \"c\"", {"c", "abc", "bac", "aac"}, {"", "ab", "ca"}},
        {"root ::= item root | \"\"\nitem ::= \"x\"?", {"", "x", "xxx"}, {"y"}},
        {"root ::= x\nx ::= ( \"a\"* )* \"!\"", {"!", "a!", "aaa!"}, {"", "a", "!!"}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        di_gram *g;
        uint32_t start;
        di_matcher *m = compile_matcher(cases[k].gbnf, 0, &g, &start);
        for (size_t i = 0; i < 6 && cases[k].yes[i]; i++)
            ck_assert_msg(accepts(m, start, cases[k].yes[i]), "%s refuses '%s'", cases[k].gbnf, cases[k].yes[i]);
        for (size_t i = 0; i < 4 && cases[k].no[i]; i++)
            ck_assert_msg(!accepts(m, start, cases[k].no[i]), "%s accepts '%s'", cases[k].gbnf, cases[k].no[i]);
        di_matcher_free(m);
        di_gram_free(g);
        /* and through the public call */
        di_grammar_free(gbnf(cases[k].gbnf));
    }
}
END_TEST

/* Every candidate text of tests/tools/grammar_languages.py (GBNF against its
 * Earley reference; schemas' tuples, additional properties and number bounds
 * against the jsonschema package) accepted exactly when the reference says. */
START_TEST(test_languages)
{
    const char *root = getenv("DI_TEST_ROOT");
    ck_assert_msg(root != NULL, "DI_TEST_ROOT is not set (run the suite with make check)");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && python3 tests/tools/grammar_languages.py", root);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    char *line = NULL, *source = NULL;
    size_t cap = 0, n_lines = 0, n_wrong = 0, n_sources = 0, yes = 0, no = 0;
    ssize_t len;
    di_gram *g = NULL;
    di_matcher *m = NULL;
    uint32_t start = 0;
    while ((len = getline(&line, &cap, p)) > 0) {
        di_json *o;
        char err[512];
        ck_assert_msg(di_json_parse(line, (size_t)len, &o, err, sizeof err) == DI_OK, "%s: %s", line, err);
        const di_json *kind = di_json_get(o, "kind"), *src = di_json_get(o, "source"), *text = di_json_get(o, "text"),
                      *expect = di_json_get(o, "accept");
        ck_assert(kind && src && text && expect);
        if (!source || strcmp(source, src->str) != 0) {
            /* a new grammar: the previous one had to have texts of both kinds */
            ck_assert_msg(!source || (yes > 0 && no > 0), "%s: %zu accepted, %zu refused", source, yes, no);
            yes = no = 0;
            di_matcher_free(m);
            di_gram_free(g);
            free(source);
            source = strdup(src->str);
            m = compile_matcher(source, strcmp(kind->str, "schema") == 0, &g, &start);
            n_sources++;
        }
        const int want = expect->kind == DI_JSON_TRUE, got = accepts(m, start, text->str);
        want ? yes++ : no++;
        if (want != got && n_wrong++ < 20) {
            printf("languages: %s: '%s' %s, the reference says %s\n", source, text->str,
                   got ? "accepted" : "refused", want ? "accept" : "refuse");
            fflush(stdout);
        }
        n_lines++;
        di_json_free(o);
    }
    const int status = pclose(p);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "grammar_languages.py failed (%d)", status);
    ck_assert_msg(!source || (yes > 0 && no > 0), "%s: %zu accepted, %zu refused", source, yes, no);
    di_matcher_free(m);
    di_gram_free(g);
    free(source);
    free(line);
    printf("languages: %zu texts of %zu grammars and schemas, %zu disagree\n", n_lines, n_sources, n_wrong);
    fflush(stdout);
    ck_assert_uint_ge(n_sources, 40);
    ck_assert_uint_eq(n_wrong, 0);
}
END_TEST

/* ---- a sequence's grammar -------------------------------------------------------------- */

typedef struct vocab {
    di_model *m;
    uint32_t n_vocab;
    int32_t eos;
    char **piece;
    size_t *len;
} vocab;

static vocab load_vocab(const char *name)
{
    vocab v = {.m = tu_load(name)};
    int64_t n;
    ck_assert_int_eq(di_model_get_int(v.m, DI_MODEL_N_VOCAB, &n), DI_OK);
    v.n_vocab = (uint32_t)n;
    ck_assert_int_eq(di_model_special_token(v.m, DI_TOKEN_EOS, &v.eos), DI_OK);
    v.piece = calloc(v.n_vocab, sizeof *v.piece);
    v.len = calloc(v.n_vocab, sizeof *v.len);
    for (uint32_t t = 0; t < v.n_vocab; t++) {
        char buf[256];
        ck_assert_int_eq(di_model_token_piece(v.m, (int32_t)t, buf, sizeof buf, &v.len[t]), DI_OK);
        v.piece[t] = malloc(v.len[t] + 1);
        memcpy(v.piece[t], buf, v.len[t] + 1);
    }
    return v;
}

static void free_vocab(vocab *v)
{
    for (uint32_t t = 0; t < v->n_vocab; t++)
        free(v->piece[t]);
    free(v->piece);
    free(v->len);
    di_model_free(v->m);
}

/* The token whose piece is exactly text, failing the test when none is. */
static int32_t token_of(const vocab *v, const char *text)
{
    for (uint32_t t = 0; t < v->n_vocab; t++)
        if (v->len[t] == strlen(text) && memcmp(v->piece[t], text, v->len[t]) == 0)
            return (int32_t)t;
    ck_abort_msg("no token has the text '%s'", text);
    return -1;
}

static int is_allowed(di_session *s, uint32_t seq, uint32_t n_vocab, int32_t t)
{
    uint32_t words[1024];
    ck_assert(n_vocab <= 1024 * 32);
    ck_assert_int_eq(di_session_seq_grammar_allowed(s, seq, words, (n_vocab + 31) / 32), DI_OK);
    return (words[t / 32] >> (t % 32)) & 1;
}

static uint32_t flags_of(di_session *s, uint32_t seq)
{
    uint32_t f;
    ck_assert_int_eq(di_session_seq_grammar_state(s, seq, &f), DI_OK);
    return f;
}

/* The prompt: tokens the grammar would refuse, stepped before it is set. */
static const int32_t PROMPT[] = {1, 40, 41, 42, 43, 44};
#define N_PROMPT 6u

START_TEST(test_generation_follows_the_grammar)
{
    vocab v = load_vocab("tok_spm");
    di_session *s = tu_session(v.m, 1, 1, 0);
    tu_step(s, 0, PROMPT, N_PROMPT, 0);
    di_grammar *g = gbnf("root ::= \"[\" [0-9]+ (\",\" [0-9]+)* \"]\"");
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, NULL, 0), DI_OK);
    di_grammar_free(g); /* the session keeps its own reference */
    ck_assert_uint_eq(flags_of(s, 0), DI_GRAMMAR_ACTIVE);
    char text[256] = "";
    size_t len = 0;
    int ended = 0;
    for (int i = 0; i < 40 && !ended; i++) {
        int32_t t;
        ck_assert_int_eq(di_session_greedy_token(s, 0, &t), DI_OK);
        ck_assert_msg(is_allowed(s, 0, v.n_vocab, t), "step %d: token %d not allowed", i, t);
        /* the greedy rule over the allowed tokens, computed here */
        const float *logits;
        ck_assert_int_eq(di_session_logits(s, 0, &logits, NULL), DI_OK);
        int32_t best = -1;
        for (uint32_t k = 0; k < v.n_vocab; k++)
            if (is_allowed(s, 0, v.n_vocab, (int32_t)k) && logits[k] == logits[k] &&
                (best < 0 || logits[k] > logits[best]))
                best = (int32_t)k;
        ck_assert_int_eq(t, best);
        if (t == v.eos) {
            ck_assert(flags_of(s, 0) & DI_GRAMMAR_CAN_END);
            ended = 1;
        } else {
            memcpy(text + len, v.piece[t], v.len[t]);
            len += v.len[t];
            text[len] = '\0';
        }
        tu_step(s, 0, &t, 1, 0);
    }
    ck_assert_msg(text[0] == '[', "%s", text);
    for (size_t i = 1; i < len; i++)
        ck_assert_msg(strchr("0123456789,]", text[i]), "'%s': byte %zu", text, i);
    if (ended) {
        ck_assert_uint_eq(flags_of(s, 0), DI_GRAMMAR_ACTIVE | DI_GRAMMAR_ENDED);
        int32_t t;
        ck_assert_int_eq(di_session_greedy_token(s, 0, &t), DI_ERR_GRAMMAR_REJECTED);
    }
    di_session_free(s);
    free_vocab(&v);
}
END_TEST

START_TEST(test_rejected_step_changes_nothing)
{
    vocab v = load_vocab("tok_spm");
    di_session *s = tu_session(v.m, 1, 2, 0);
    tu_step(s, 0, PROMPT, N_PROMPT, 0);
    tu_step(s, 1, PROMPT, N_PROMPT, 0);
    di_grammar *g = gbnf("root ::= \"a\"+");
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, NULL, 0), DI_OK);
    const int32_t a = token_of(&v, "a"), b = token_of(&v, "b");
    di_digest before, logits_before, after, logits_after;
    ck_assert_int_eq(di_session_seq_digest(s, 0, &before), DI_OK);
    logits_before = tu_last_digest(s, 0);
    /* alone, and in a batch whose other entry is fine: nothing changes */
    int32_t bad[3] = {a, a, b};
    ck_assert_int_eq(di_session_step(s, 1, (uint32_t[]){0}, (uint32_t[]){3}, bad, 0), DI_ERR_GRAMMAR_REJECTED);
    ck_assert_msg(strstr(di_session_errmsg(s), "entry 0: token 2"), "%s", di_session_errmsg(s));
    int32_t mixed[2] = {a, b};
    ck_assert_int_eq(di_session_step(s, 2, (uint32_t[]){1, 0}, (uint32_t[]){1, 1}, mixed, 0),
                     DI_ERR_GRAMMAR_REJECTED);
    ck_assert_msg(strstr(di_session_errmsg(s), "entry 1: token 0"), "%s", di_session_errmsg(s));
    uint32_t len0, len1;
    di_session_seq_length(s, 0, &len0);
    di_session_seq_length(s, 1, &len1);
    ck_assert_uint_eq(len0, N_PROMPT);
    ck_assert_uint_eq(len1, N_PROMPT);
    ck_assert_int_eq(di_session_seq_digest(s, 0, &after), DI_OK);
    ck_assert(di_digest_equal(&before, &after));
    logits_after = tu_last_digest(s, 0);
    ck_assert(di_digest_equal(&logits_before, &logits_after));
    ck_assert(is_allowed(s, 0, v.n_vocab, a));
    ck_assert(!is_allowed(s, 0, v.n_vocab, b));
    ck_assert(!is_allowed(s, 0, v.n_vocab, v.eos));
    /* the right tokens go through, in a batch with an unconstrained one */
    int32_t good[3] = {a, a, b};
    ck_assert_int_eq(di_session_step(s, 2, (uint32_t[]){0, 1}, (uint32_t[]){2, 1}, good, 0), DI_OK);
    ck_assert_uint_eq(flags_of(s, 0), DI_GRAMMAR_ACTIVE | DI_GRAMMAR_CAN_END);
    ck_assert_uint_eq(flags_of(s, 1), 0);
    di_grammar_free(g);
    di_session_free(s);
    free_vocab(&v);
}
END_TEST

START_TEST(test_truncate_restores_and_drops)
{
    vocab v = load_vocab("tok_spm");
    di_session *s = tu_session(v.m, 1, 2, 0);
    tu_step(s, 0, PROMPT, N_PROMPT, 0);
    di_grammar *g = gbnf("root ::= (\"ab\" | \"b\" [a-c]*)+");
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, NULL, 0), DI_OK);
    enum { N = 8 };
    uint32_t words[N + 1][64], n_words = (v.n_vocab + 31) / 32;
    uint32_t flags[N + 1];
    for (int i = 0; i <= N; i++) {
        ck_assert_int_eq(di_session_seq_grammar_allowed(s, 0, words[i], n_words), DI_OK);
        flags[i] = flags_of(s, 0);
        if (i == N)
            break;
        int32_t t;
        di_sampling_params p;
        di_sampling_params_init(&p);
        p.temperature = 1.5f;
        p.seed = 7;
        ck_assert_int_eq(di_session_seq_set_sampling(s, 0, &p), DI_OK);
        ck_assert_int_eq(di_session_sample_token(s, 0, &t), DI_OK);
        ck_assert_msg((words[i][t / 32] >> (t % 32)) & 1, "token %d at %d not allowed", t, i);
        for (int32_t k = 0; t == v.eos; k++) /* keep going: another allowed token */
            if (k != v.eos && (words[i][k / 32] >> (k % 32)) & 1)
                t = k;
        tu_step(s, 0, &t, 1, 0);
    }
    for (int k = N; k >= 0; k -= 3) {
        uint32_t w[64];
        ck_assert_int_eq(di_session_seq_truncate(s, 0, N_PROMPT + (uint32_t)k), DI_OK);
        ck_assert_int_eq(di_session_seq_grammar_allowed(s, 0, w, n_words), DI_OK);
        ck_assert_msg(memcmp(w, words[k], n_words * sizeof *w) == 0, "after truncating to %d", k);
        ck_assert_uint_eq(flags_of(s, 0), flags[k]);
    }
    /* a copied prefix brings no grammar, and the copy drops dst's */
    ck_assert_int_eq(di_session_seq_set_grammar(s, 1, g, NULL, 0), DI_OK);
    ck_assert_int_eq(di_session_seq_copy(s, 0, 1, N_PROMPT), DI_OK);
    ck_assert_uint_eq(flags_of(s, 1), 0);
    ck_assert_uint_eq(flags_of(s, 0), flags[N % 3]); /* the source keeps its own (truncated last to N % 3) */
    /* truncating before the start drops it; so does a reset */
    ck_assert_int_eq(di_session_seq_truncate(s, 0, N_PROMPT - 1), DI_OK);
    ck_assert_uint_eq(flags_of(s, 0), 0);
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, NULL, 0), DI_OK);
    ck_assert_int_eq(di_session_seq_reset(s, 0), DI_OK);
    ck_assert_uint_eq(flags_of(s, 0), 0);
    /* NULL removes a grammar: every token allowed */
    ck_assert_int_eq(di_session_seq_set_grammar(s, 1, g, NULL, 0), DI_OK);
    ck_assert_int_eq(di_session_seq_set_grammar(s, 1, NULL, NULL, 0), DI_OK);
    ck_assert_uint_eq(flags_of(s, 1), 0);
    ck_assert(is_allowed(s, 1, v.n_vocab, v.eos));
    di_grammar_free(g);
    di_session_free(s);
    free_vocab(&v);
}
END_TEST

START_TEST(test_end_tokens)
{
    vocab v = load_vocab("tok_spm");
    di_session *s = tu_session(v.m, 1, 1, 0);
    tu_step(s, 0, PROMPT, N_PROMPT, 0);
    di_grammar *g = gbnf("root ::= \"ab\"");
    const int32_t x = token_of(&v, "x"); /* a token with text, given as an end token */
    ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, &x, 1), DI_OK);
    ck_assert(!is_allowed(s, 0, v.n_vocab, v.eos));
    ck_assert(!is_allowed(s, 0, v.n_vocab, x));
    int32_t ab[2] = {token_of(&v, "a"), token_of(&v, "b")};
    ck_assert_int_eq(di_session_step(s, 1, (uint32_t[]){0}, (uint32_t[]){1}, &v.eos, 0), DI_ERR_GRAMMAR_REJECTED);
    tu_step(s, 0, ab, 2, 0);
    ck_assert_uint_eq(flags_of(s, 0), DI_GRAMMAR_ACTIVE | DI_GRAMMAR_CAN_END | DI_GRAMMAR_MUST_END);
    uint32_t words[64];
    ck_assert_int_eq(di_session_seq_grammar_allowed(s, 0, words, (v.n_vocab + 31) / 32), DI_OK);
    for (uint32_t t = 0; t < v.n_vocab; t++)
        ck_assert_msg(((words[t / 32] >> (t % 32)) & 1) == ((int32_t)t == v.eos || (int32_t)t == x),
                      "token %u", t);
    int32_t t;
    ck_assert_int_eq(di_session_greedy_token(s, 0, &t), DI_OK);
    ck_assert_msg(t == v.eos || t == x, "%d", t);
    tu_step(s, 0, &x, 1, 0);
    ck_assert_uint_eq(flags_of(s, 0), DI_GRAMMAR_ACTIVE | DI_GRAMMAR_ENDED);
    ck_assert_int_eq(di_session_greedy_token(s, 0, &t), DI_ERR_GRAMMAR_REJECTED);
    ck_assert_int_eq(di_session_sample_token(s, 0, &t), DI_ERR_GRAMMAR_REJECTED);
    ck_assert_int_eq(di_session_step(s, 1, (uint32_t[]){0}, (uint32_t[]){1}, &v.eos, 0), DI_ERR_GRAMMAR_REJECTED);
    ck_assert_msg(strstr(di_session_errmsg(s), "an end token ended it"), "%s", di_session_errmsg(s));
    ck_assert_int_eq(di_session_seq_grammar_allowed(s, 0, words, (v.n_vocab + 31) / 32), DI_OK);
    for (uint32_t k = 0; k < (v.n_vocab + 31) / 32; k++)
        ck_assert_uint_eq(words[k], 0);
    di_grammar_free(g);
    di_session_free(s);
    free_vocab(&v);
}
END_TEST

/* Sampled tokens are allowed ones, and the masked distribution is the one
 * sampled: top_k = 1 gives the masked greedy token. */
START_TEST(test_sampling_under_the_mask)
{
    vocab v = load_vocab("tok_spm");
    di_session *s = tu_session(v.m, 1, 2, 0);
    di_grammar *g = gbnf("root ::= [0-9]+ (\".\" [0-9]+)?");
    for (uint64_t seed = 0; seed < 6; seed++) {
        tu_step(s, 0, PROMPT, N_PROMPT, 0);
        tu_step(s, 1, PROMPT, N_PROMPT, 0);
        ck_assert_int_eq(di_session_seq_set_grammar(s, 0, g, NULL, 0), DI_OK);
        ck_assert_int_eq(di_session_seq_set_grammar(s, 1, g, NULL, 0), DI_OK);
        di_sampling_params p, k1;
        di_sampling_params_init(&p);
        p.temperature = 2.0f;
        p.top_p = 0.95f;
        p.repetition_penalty = 1.1f;
        p.seed = seed;
        di_sampling_params_init(&k1);
        k1.temperature = 1.0f;
        k1.top_k = 1;
        ck_assert_int_eq(di_session_seq_set_sampling(s, 0, &p), DI_OK);
        ck_assert_int_eq(di_session_seq_set_sampling(s, 1, &k1), DI_OK);
        for (int i = 0; i < 12; i++) {
            int32_t t, greedy, top1;
            ck_assert_int_eq(di_session_sample_token(s, 0, &t), DI_OK);
            ck_assert_msg(is_allowed(s, 0, v.n_vocab, t), "seed %llu step %d: token %d", (unsigned long long)seed,
                          i, t);
            ck_assert_int_eq(di_session_greedy_token(s, 1, &greedy), DI_OK);
            ck_assert_int_eq(di_session_sample_token(s, 1, &top1), DI_OK);
            ck_assert_int_eq(greedy, top1);
            if (t == v.eos || greedy == v.eos)
                break;
            tu_step(s, 0, &t, 1, 0);
            tu_step(s, 1, &greedy, 1, 0);
        }
        di_session_seq_reset(s, 0);
        di_session_seq_reset(s, 1);
    }
    di_grammar_free(g);
    di_session_free(s);
    free_vocab(&v);
}
END_TEST

/* Sequences sharing a grammar share its automaton; the handle may be freed
 * while they use it, and sessions in turn reuse it (ASan checks lifetimes). */
START_TEST(test_shared_grammar_lifetimes)
{
    vocab v = load_vocab("tok_bpe_llama3");
    di_grammar *g = schema("{\"type\": \"object\", \"properties\": {\"k\": {\"type\": \"string\", \"maxLength\": 4}},"
                           " \"required\": [\"k\"]}");
    di_session *s = tu_session(v.m, 2, 4, 0);
    for (uint32_t q = 0; q < 4; q++) {
        tu_step(s, q, PROMPT, N_PROMPT - q, 0);
        ck_assert_int_eq(di_session_seq_set_grammar(s, q, g, NULL, 0), DI_OK);
    }
    di_grammar_free(g);
    for (int i = 0; i < 12; i++)
        for (uint32_t q = 0; q < 4; q++) {
            if (flags_of(s, q) & DI_GRAMMAR_ENDED)
                continue;
            int32_t t;
            ck_assert_int_eq(di_session_greedy_token(s, q, &t), DI_OK);
            tu_step(s, q, &t, 1, 0);
        }
    di_session_free(s);
    free_vocab(&v);
}
END_TEST

/* A Python script of tests/ with the library and an argument; its output is
 * the test's. Skipped under sanitizers: an instrumented library cannot be
 * loaded into Python (the C suites cover the same code under them). */
static void run_python(const char *script, const char *arg)
{
    const char *root = getenv("DI_TEST_ROOT"), *lib = getenv("DI_TEST_SHARED"), *san = getenv("DI_TEST_SANITIZE");
    ck_assert_msg(root && lib, "DI_TEST_ROOT / DI_TEST_SHARED are not set (run the suite with make check)");
    if (san && *san) {
        printf("%s: skipped under sanitizers (the library it loads into Python is instrumented)\n", script);
        return;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && python3 tests/%s '%s' '%s' 2>&1", root, script, lib, arg);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    char line[4096];
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        fflush(stdout);
    }
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tests/%s failed (%d)", script, status);
}

/* The allowed sets against the independent reference (Python). */
START_TEST(test_known_answers)
{
    const char *models = getenv("DI_TEST_MODELS");
    ck_assert_msg(models != NULL, "DI_TEST_MODELS is not set");
    run_python("grammar_known_answers.py", models);
}
END_TEST

/* 50 JSON schemas on the real model: every completed output parses and
 * validates (json, jsonschema). */
START_TEST(test_real_model_schemas)
{
    const char *real = getenv("DI_TEST_REAL_MODEL");
    if (!real || !*real) {
        printf("grammar: the real model is not here (tools/scripts/fetch-model.sh): its schemas are skipped\n");
        return;
    }
    run_python("grammar_real_model.py", real);
}
END_TEST

Suite *grammar_suite(void)
{
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("texts");
    tcase_add_test(tc, test_gbnf_errors);
    tcase_add_test(tc, test_schema_errors);
    tcase_add_test(tc, test_grammar_text_and_digest);
    tcase_add_test(tc, test_api_misuse);
    tcase_add_test(tc, test_integer_ranges);
    tcase_add_test(tc, test_nullable_repetitions);
    suite_add_tcase(s, tc);
    tc = tcase_create("languages");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_languages);
    suite_add_tcase(s, tc);
    tc = tcase_create("sequence");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_generation_follows_the_grammar);
    tcase_add_test(tc, test_rejected_step_changes_nothing);
    tcase_add_test(tc, test_truncate_restores_and_drops);
    tcase_add_test(tc, test_end_tokens);
    tcase_add_test(tc, test_sampling_under_the_mask);
    tcase_add_test(tc, test_shared_grammar_lifetimes);
    suite_add_tcase(s, tc);
    tc = tcase_create("known answers");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_known_answers);
    suite_add_tcase(s, tc);
    tc = tcase_create("real model");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_real_model_schemas);
    suite_add_tcase(s, tc);
    return s;
}
