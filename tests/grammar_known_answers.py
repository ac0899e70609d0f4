#!/usr/bin/env python3
"""Known answers of grammar-constrained decoding (make check: tests/check_grammar.c).

For about 35 small grammars (GBNF, and GBNF the library converts JSON schemas
to) and a few texts each, the set of tokens the library allows after the text
(di_session_seq_grammar_allowed) must equal the brute-force answer of
tests/tools/gbnf_reference.py over the whole vocabulary of two test models
(SentencePiece with byte tokens, and byte-level BPE): the reference is an
Earley recognizer written from the GBNF description, not from the library.
The token texts are the library's pieces (di_model_token_piece, which the
tokenizer suites check against llama.cpp). The text is stepped as tokens
chosen by longest match over the pieces, so multi-byte characters split
across tokens are stepped too; the end-of-sequence token must be allowed
exactly when the text is a complete sentence.

    grammar_known_answers.py LIBDETINFER MODELS_DIR
"""
import ctypes as C
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools"))
import gbnf_reference  # noqa: E402

JSON_GBNF = r'''
root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" (string ":" value ("," string ":" value)*)? "}"
array ::= "[" (value ("," value)*)? "]"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)?
'''

CASES = [
    ("literal", 'root ::= "hello"', ["", "he", "hello"]),
    ("alternatives", 'root ::= "yes" | "no" | "maybe"', ["", "n", "ma"]),
    ("plus", "root ::= [a-z]+", ["", "abc"]),
    ("negated star", "root ::= [^a-z]*", ["", "12", " A"]),
    ("ranges count", "root ::= [a-cx-z0-9]{2,4}", ["", "a", "ab9", "ab9x"]),
    ("optional", 'root ::= "a" "b"? "c"', ["", "a", "ab"]),
    ("group star", 'root ::= ("ab" | "cd")* "!"', ["", "ab", "abcd"]),
    ("list", 'root ::= item ("," item)*\nitem ::= [0-9]+', ["", "1", "12,", "12,3"]),
    ("balanced", 'root ::= "(" root ")" | ""', ["", "((", "(()"]),
    ("any", "root ::= . . .", ["", "\u00e9", "a\u4e2d"]),
    ("unicode", 'root ::= "\u00e9" [\u00e0-\u00ff]+ "\u4e2d"?', ["", "\u00e9", "\u00e9\u00e0"]),
    ("escapes", 'root ::= "\\x41\\u00e9\\n\\t" [\\x30-\\x39]', ["", "A\u00e9\n"]),
    ("json", JSON_GBNF, ["", "{", '{"a":', "[1,", '["x\\', "-0."]),
    ("exactly", 'root ::= "a"{3}', ["", "aa"]),
    ("at least", 'root ::= "a"{2,}', ["", "a", "aaa"]),
    ("at most", 'root ::= "a"{0,2} "b"', ["", "a", "aa"]),
    ("ambiguous", 'root ::= "a"* "a"', ["", "aaa"]),
    ("two ways", 'root ::= x x\nx ::= "a" | "ab"', ["", "a", "ab"]),
    ("comments", '# a comment\nroot ::= a | # after a bar\n  b\na ::= "x" # x\nb ::= (\n  "y" |\n  "z"\n)',
     ["", "y"]),
    ("spaces", 'root ::= [ \\t\\n]* "end"', ["", " \n", " e"]),
    ("words", 'root ::= "say " ( "hi" | "hello" ) " " name\nname ::= [A-Z] [a-z]*',
     ["", "say h", "say hello B"]),
    ("number", 'root ::= "-"? ([0-9] | [1-9] [0-9]+) ("." [0-9]+)?', ["", "-", "12.", "0"]),
    ("nullable", 'root ::= "a" | "b" | [c-f] | ""', [""]),
    ("string body", 'root ::= [^"\\\\]* "\\""', ["", "abc"]),
    ("pairs", "root ::= ([a-z] [0-9])+", ["", "a1b"]),
    ("tags", 'root ::= "<" tag ">"\ntag ::= "b" | "br" | "body"', ["", "<b", "<bo"]),
    ("cyrillic", "root ::= [\\u0400-\\u04ff]+", ["", "\u041f\u0440"]),
    ("non-ascii", "root ::= [^\\x00-\\x7f]+", ["", "\u00e9"]),
    ("optionals", 'root ::= ("a" | "b")? ("c" | "d")? "e"', ["", "a", "ac"]),
    ("keywords", 'root ::= "true" | "false" | "null"', ["", "t", "n"]),
    ("dot star", 'root ::= "x" .* "y"', ["", "x", "x\u00e9y"]),
    # repetitions of what can be empty (issue 42): their closure meets a seen stack and stops
    ("nullable repeat", 'root ::= ( [x]* [a-c]? )* "!"', ["", "x", "xxa", "ab"]),
    ("tail after empty", 'root ::= item root | "."\nitem ::= "a"? "b"?', ["", "a", "ab", "bba"]),
]

SCHEMAS = [
    ("object", {"type": "object", "properties": {"name": {"type": "string"},
                                                  "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                "required": ["name"]},
     ["", '{"name":"Bo', '{"name":"Bo","age":1']),
    ("enum array", {"type": "array", "items": {"enum": ["red", "green"]}, "minItems": 1, "maxItems": 3},
     ["", '["red",']),
    ("pattern", {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}, ["", '"AB-1']),
    ("date", {"type": "string", "format": "date"}, ["", '"2024-02-2']),
    ("recursion", {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"]}}, "$ref": "#/$defs/node"},
     ["", '{"v":1,"kids":[{"v":']),
    ("any object", {"type": "object"}, ["", '{"k":[1,{"z":nu']),
    ("tuple and extra", {"type": "object", "properties": {"t": {"prefixItems": [{"type": "integer"},
                                                                          {"type": "boolean"}]}},
                         "additionalProperties": {"type": "number", "exclusiveMinimum": -1, "maximum": 2.5}},
     ["", '{"t":[1,', '{"t":[],"', '{"t":[],"u":0.', '{"t":[],"u":2.']),
]


class Lib:
    def __init__(self, path):
        L = C.CDLL(path)
        L.di_model_load.argtypes = [C.c_char_p, C.POINTER(C.c_void_p), C.c_char_p, C.c_size_t]
        L.di_model_get_int.argtypes = [C.c_void_p, C.c_int, C.POINTER(C.c_int64)]
        L.di_model_token_piece.argtypes = [C.c_void_p, C.c_int32, C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t)]
        L.di_model_special_token.argtypes = [C.c_void_p, C.c_int, C.POINTER(C.c_int32)]
        L.di_session_create.argtypes = [C.c_void_p, C.c_void_p, C.POINTER(C.c_void_p), C.c_char_p, C.c_size_t]
        L.di_session_free.argtypes = [C.c_void_p]
        L.di_session_step.argtypes = [C.c_void_p, C.c_uint32, C.POINTER(C.c_uint32), C.POINTER(C.c_uint32),
                                      C.POINTER(C.c_int32), C.c_uint32]
        L.di_session_errmsg.argtypes = [C.c_void_p]
        L.di_session_errmsg.restype = C.c_char_p
        L.di_grammar_from_gbnf.argtypes = [C.c_char_p, C.c_size_t, C.c_uint32, C.POINTER(C.c_void_p), C.c_char_p,
                                           C.c_size_t]
        L.di_grammar_from_json_schema.argtypes = L.di_grammar_from_gbnf.argtypes
        L.di_grammar_gbnf.argtypes = [C.c_void_p, C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t)]
        L.di_grammar_free.argtypes = [C.c_void_p]
        L.di_session_seq_set_grammar.argtypes = [C.c_void_p, C.c_uint32, C.c_void_p, C.POINTER(C.c_int32),
                                                 C.c_size_t]
        L.di_session_seq_grammar_allowed.argtypes = [C.c_void_p, C.c_uint32, C.POINTER(C.c_uint32), C.c_size_t]
        self.L = L

    def grammar(self, text, schema=False):
        err = C.create_string_buffer(512)
        g = C.c_void_p()
        data = text.encode()
        fn = self.L.di_grammar_from_json_schema if schema else self.L.di_grammar_from_gbnf
        st = fn(data, len(data), 0, C.byref(g), err, 512)
        if st:
            raise RuntimeError("grammar refused (%d): %s" % (st, err.value.decode()))
        return g

    def gbnf(self, g):
        n = C.c_size_t()
        self.L.di_grammar_gbnf(g, None, 0, C.byref(n))
        buf = C.create_string_buffer(n.value + 1)
        assert self.L.di_grammar_gbnf(g, buf, n.value + 1, C.byref(n)) == 0
        return buf.raw[:n.value].decode()


class Vocab:
    def __init__(self, lib, path):
        L = lib.L
        self.lib = lib
        self.model = C.c_void_p()
        err = C.create_string_buffer(512)
        assert L.di_model_load(path.encode(), C.byref(self.model), err, 512) == 0, err.value
        n = C.c_int64()
        L.di_model_get_int(self.model, 1, C.byref(n))
        self.n_vocab = n.value
        eos = C.c_int32()
        self.eos = eos.value if L.di_model_special_token(self.model, 2, C.byref(eos)) == 0 else -1
        self.pieces = {}
        buf = C.create_string_buffer(4096)
        size = C.c_size_t()
        for t in range(self.n_vocab):
            assert L.di_model_token_piece(self.model, t, buf, 4096, C.byref(size)) == 0
            if size.value:
                self.pieces[t] = buf.raw[:size.value]

    def tokens_of(self, text):
        """The text's bytes as tokens, by longest match over the pieces."""
        data, out, i = text.encode(), [], 0
        longest = max(len(p) for p in self.pieces.values())
        by_bytes = {}
        for t, p in sorted(self.pieces.items(), reverse=True):
            by_bytes[p] = t
        while i < len(data):
            for n in range(min(longest, len(data) - i), 0, -1):
                if data[i:i + n] in by_bytes:
                    out.append(by_bytes[data[i:i + n]])
                    i += n
                    break
            else:
                raise RuntimeError("no token for byte %d of %r" % (i, text))
        return out

    def allowed(self, g, prefix_tokens):
        L = self.lib.L
        s = C.c_void_p()
        err = C.create_string_buffer(512)
        assert L.di_session_create(self.model, None, C.byref(s), err, 512) == 0, err.value
        try:
            def step(toks):
                seq = (C.c_uint32 * 1)(0)
                n = (C.c_uint32 * 1)(len(toks))
                arr = (C.c_int32 * len(toks))(*toks)
                st = L.di_session_step(s, 1, seq, n, arr, 0)
                if st:
                    raise RuntimeError("step refused (%d): %s" % (st, L.di_session_errmsg(s).decode()))
            step([1 % self.n_vocab])  # a prompt token, before the grammar: not constrained
            assert L.di_session_seq_set_grammar(s, 0, g, None, 0) == 0, L.di_session_errmsg(s)
            if prefix_tokens:
                step(prefix_tokens)
            words = (self.n_vocab + 31) // 32
            bits = (C.c_uint32 * words)()
            assert L.di_session_seq_grammar_allowed(s, 0, bits, words) == 0, L.di_session_errmsg(s)
            return {t for t in range(self.n_vocab) if (bits[t // 32] >> (t % 32)) & 1}
        finally:
            L.di_session_free(s)


def main():
    lib = Lib(sys.argv[1])
    models = sys.argv[2]
    cases = [(name, text, False, prefixes) for name, text, prefixes in CASES]
    cases += [("schema " + name, json.dumps(s), True, prefixes) for name, s, prefixes in SCHEMAS]
    failures = checks = 0
    for vocab_name in ("tok_spm", "tok_bpe_llama3"):
        v = Vocab(lib, os.path.join(models, vocab_name + ".gguf"))
        for name, text, schema, prefixes in cases:
            g = lib.grammar(text, schema)
            try:
                ref = gbnf_reference.Grammar(lib.gbnf(g))
                for prefix in prefixes:
                    want, complete = ref.allowed(prefix, v.pieces)
                    if complete and v.eos >= 0:
                        want = want | {v.eos}
                    got = v.allowed(g, v.tokens_of(prefix))
                    checks += 1
                    if got != want:
                        failures += 1
                        extra, missing = sorted(got - want)[:8], sorted(want - got)[:8]
                        print("FAIL %s / %s after %r: the library allows %d tokens, the reference %d; "
                              "only the library: %s; only the reference: %s" %
                              (vocab_name, name, prefix, len(got), len(want),
                               [(t, v.pieces.get(t)) for t in extra], [(t, v.pieces.get(t)) for t in missing]))
            finally:
                lib.L.di_grammar_free(g)
        print("%s: %d grammars, %d vocabulary tokens" % (vocab_name, len(cases), v.n_vocab))
    print("grammar known answers: %d sets of allowed tokens compared, %d differ" % (checks, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
