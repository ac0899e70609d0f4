#!/usr/bin/env python3
"""Which texts a grammar must accept, from references independent of the
library, for tests/check_grammar.c (test_languages):

- GBNF: tests/tools/gbnf_reference.py's Earley recognizer, which takes any
  context-free grammar (left recursion and repetitions of what can be empty
  included) and so gives the language the grammar's text denotes. That is
  llama.cpp's language too: its matcher expands the same rules, stopping when
  it meets a stack it has seen (llama_grammar_advance_stack), and for
  `root ::= ( [x]* )*` it matches "", "x" and "xx" (issue 42).
- JSON Schema: the `jsonschema` package (tests/requirements.txt) says whether
  a JSON text is valid under the schema, with the validator its $schema names
  (2020-12 when none). A valid text is expected to be accepted only when it is
  in the compact form the converter writes (docs/STRUCTURED.md, "JSON
  Schema"): in_form() below states that form; the texts valid but outside it
  are listed too, expected refused, and counted.

Prints one JSON object per line: {"kind": "gbnf" | "schema", "source": the
grammar or schema text, "text": a candidate, "accept": true | false,
"valid": whether the schema takes it (schemas only)}.
"""

import itertools
import json
import os
import random
import re
import sys
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbnf_reference  # noqa: E402

try:
    import jsonschema
except ImportError:
    sys.exit("grammar_languages.py: the jsonschema package is missing (pip install -r tests/requirements.txt)")


def emit(obj):
    print(json.dumps(obj, ensure_ascii=False))


# ---- GBNF --------------------------------------------------------------------------------------

# (grammar, alphabet of the candidate texts, longest candidate). The candidates
# are every text over the alphabet up to that length. The language of each, as
# its text reads (and as the Earley reference computes it):
GBNF = [
    # a repetition of a repetition: x*. llama.cpp accepts it; "", "x", "xx" match.
    ("root ::= ( [x]* )*", "xy", 5),
    # (x* y?)* is (x|y)*
    ("root ::= ( [x]* [y]? )*", "xyz", 4),
    # a repetition of the empty text: only ""
    ('root ::= ("")*', "x", 2),
    # (a? b?)+ c is (a|b)* c
    ('root ::= ("a"? "b"?)+ "c"', "abc", 4),
    # through a named rule that can be empty: (x|y)*
    ('root ::= a*\na ::= [x]* | "y"', "xyz", 4),
    # the repetition written by hand on the right, its body able to be empty: x*
    ('root ::= item root | ""\nitem ::= "x"?', "xy", 4),
    # bounded repetitions of what can be empty: x*, and (xx?){0,2}... = x{0,4}
    ("root ::= ( [x]* ){2,3}", "xy", 4),
    ('root ::= ( "x" "x"? ){0,2} "!"', "x!", 6),
    # nested: ((a*)* b?)* is (a|b)*
    ('root ::= ( ( "a"* )* "b"? )*', "abc", 4),
    # a tail reference after a prefix that can be empty: (a|b)*
    ('root ::= "a"? "b"? root | ""', "abc", 4),
]


def gbnf_cases():
    for source, alphabet, longest in GBNF:
        g = gbnf_reference.Grammar(source)
        for n in range(longest + 1):
            for t in itertools.product(alphabet, repeat=n):
                text = "".join(t)
                chart = g.start()
                for ch in text:
                    chart = g.scan(chart, ord(ch))
                    if chart is None:
                        break
                emit({"kind": "gbnf", "source": source, "text": text,
                      "accept": chart is not None and g.complete(chart)})


# ---- JSON Schema ---------------------------------------------------------------------------------

def dumps(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


NUMBER_FORM = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?\Z")
INTEGER_FORM = re.compile(r"-?(0|[1-9][0-9]{0,15})\Z")


def number_in_form(text, bounded):
    """A number as the converter writes it: a bounded one is a plain decimal
    of at most 15 significant digits below 10^15, never -0."""
    if not NUMBER_FORM.match(text) or re.match(r"-0(\.0+)?\Z", text):
        return False
    if not bounded:
        return True
    whole, _, frac = text.lstrip("-").partition(".")
    if whole != "0":
        return len(whole) + len(frac) <= 15
    return len(frac) <= 15


def plain(d):
    """A Decimal as a plain decimal text (no exponent)."""
    s = format(d, "f")
    return "0" if s in ("-0", "0") else s


def number_candidates(bounds):
    out = set()
    for k in range(-12, 13):
        for t in (Decimal(k) / 4, Decimal(k) / 3):
            out.add(plain(t.quantize(Decimal("0.0001"))))
        out.add(str(k))
    out |= {"0", "-0", "0.0", "-0.0", "2.50", "0.30", "0.300", "1.0"}
    for b in bounds:
        d = Decimal(repr(b)) if isinstance(b, float) else Decimal(b)
        for e in range(1, 17):
            for delta in (Decimal(0), Decimal(1).scaleb(-e), -Decimal(1).scaleb(-e)):
                out.add(plain(d + delta))
        for q in range(0, 16):  # the bound rounded to q places, and one unit of the last place either side
            unit = Decimal(1).scaleb(-q)
            r = d.quantize(unit)
            for x in (r - unit, r, r + unit):
                out.add(plain(x))
        out.add(plain(d) + ("0" if "." in plain(d) else ".0"))
        out.add(plain(d))
    return sorted(out)


def array_candidates():
    pool = [1, "a", True, None]
    for n in range(5):
        for t in itertools.product(pool, repeat=n):
            yield list(t)


def object_candidates(keys):
    for n in range(4):
        values = [1, "s", True] if n < 3 else [1, True]
        for ks in itertools.permutations(keys, n):
            for vs in itertools.product(values, repeat=n):
                yield list(zip(ks, vs))


def object_in_form(schema, members):
    """Listed properties first, in their order, then the others."""
    listed = list(schema.get("properties", {}))
    extra = schema.get("additionalProperties", False)
    seen_other = False
    last = -1
    for k, _ in members:
        if k in listed:
            if seen_other or listed.index(k) < last:
                return False
            last = listed.index(k)
        else:
            seen_other = True
            if extra is False or "\\" in dumps(k) or any(ord(ch) < 0x20 for ch in k):
                return False
    return True


NUMBER_SCHEMAS = [
    {"type": "number", "exclusiveMinimum": 0.1, "maximum": 2.5},
    {"type": "number", "minimum": -1.5, "exclusiveMaximum": 0},
    {"type": "number", "exclusiveMinimum": -0.25, "exclusiveMaximum": 0.75},
    {"type": "number", "minimum": 100},
    {"type": "number", "exclusiveMaximum": -3},
    {"type": "number", "minimum": 0.3, "maximum": 0.3},
    {"type": "number", "minimum": 1e-7, "maximum": 1e-6},
    {"type": "number", "minimum": 123456.789, "exclusiveMaximum": 123457},
    {"type": "number", "minimum": 1, "exclusiveMinimum": 1, "maximum": 2, "exclusiveMaximum": 2.5},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": "number", "maximum": 0},
    {"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 3},
    {"type": "integer", "exclusiveMinimum": 2.5, "maximum": 9},
]


def random_number_schemas(n):
    """Bounds drawn with a fixed seed: doubles of every kind of decimal
    expansion (1/3, 0.1, 2.675, ...), both sides, inclusive or not."""
    rng = random.Random(42)
    out = []
    for _ in range(n):
        scale = 10.0 ** rng.randint(-6, 6)
        a = rng.uniform(-1, 1) * scale
        b = a + rng.uniform(0, 2) * scale
        if rng.random() < 0.3:
            a = round(a, rng.randint(0, 4))
        schema = {"type": "number"}
        schema["exclusiveMinimum" if rng.random() < 0.5 else "minimum"] = a
        if rng.random() < 0.8:
            schema["exclusiveMaximum" if rng.random() < 0.5 else "maximum"] = b
        out.append(schema)
    return out


NUMBER_SCHEMAS += random_number_schemas(12)

ARRAY_SCHEMAS = [
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "boolean"},
     "minItems": 1, "maxItems": 3},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
     "minItems": 2, "maxItems": 2},
    {"type": "array", "prefixItems": [{"type": "null"}], "items": {"type": "null"}, "minItems": 2},
    {"prefixItems": [{"const": "a"}], "items": {"type": "integer"}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
     "items": [{"type": "integer"}, {"type": "string"}]},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
     "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
     "items": [{"type": "string"}], "additionalItems": {"type": "boolean"}, "minItems": 2},
    {"type": "array", "items": False},
]

OBJECT_KEYS = ["a", "b", "ab", "", "a\u00e9", "q\"", "\u00e9"]
OBJECT_SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"],
     "additionalProperties": True},
    {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "string"}},
     "additionalProperties": {"type": "boolean"}},
    {"type": "object", "properties": {"": {"type": "integer"}, "a\u00e9": {"type": "string"}},
     "required": ["a\u00e9"], "additionalProperties": {"type": "integer"}},
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"additionalProperties": {"type": "string"}, "properties": {"b": {"type": "boolean"}}, "required": ["b"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}}},
]


VALIDATORS = {}


def check(schema, text):
    key = json.dumps(schema)
    if key not in VALIDATORS:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        VALIDATORS[key] = cls(schema)
    return VALIDATORS[key].is_valid(json.loads(text))


def schema_cases():
    for schema in NUMBER_SCHEMAS:
        bounds = [v for k, v in schema.items() if k != "type"]
        source = json.dumps(schema)
        for text in number_candidates(bounds):
            valid = check(schema, text)
            form = (INTEGER_FORM.match(text) and text != "-0") if schema["type"] == "integer" \
                else number_in_form(text, True)
            emit({"kind": "schema", "source": source, "text": text, "valid": valid,
                  "accept": bool(valid and form)})
    for schema in ARRAY_SCHEMAS:
        source = json.dumps(schema)
        for arr in array_candidates():
            text = dumps(arr)
            valid = check(schema, text)
            emit({"kind": "schema", "source": source, "text": text, "valid": valid, "accept": valid})
    for schema in OBJECT_SCHEMAS:
        source = json.dumps(schema, ensure_ascii=False)
        for members in object_candidates(OBJECT_KEYS):
            text = "{" + ",".join(dumps(k) + ":" + dumps(v) for k, v in members) + "}"
            valid = check(schema, text)
            emit({"kind": "schema", "source": source, "text": text, "valid": valid,
                  "accept": bool(valid and object_in_form(schema, members))})


if __name__ == "__main__":
    gbnf_cases()
    schema_cases()
