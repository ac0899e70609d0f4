"""Grammars in the Python binding (docs/STRUCTURED.md): Grammar.from_gbnf,
Grammar.from_json_schema, Sequence.set_grammar, generate(grammar=...), and the
Ray records' json_schema and grammar (the worker's generator, without Ray).
Results are checked against what the binding did not compute: the header's
numbers, xxhash of the GBNF text, Python's re, json and jsonschema."""
import json
import re

import pytest
import xxhash

import detinfer
from detinfer import DetinferError, Grammar, GrammarState, Status
from detinfer.ray.engine import Generator
from detinfer.ray.records import RequestError, WorkerConfig, parse_request

SCHEMA = {"type": "object", "properties": {"c": {"enum": ["ab", "cd"]},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["c", "n"], "additionalProperties": False}


def test_grammar_flags_match_the_header(header):
    for flag in GrammarState:
        if flag.name == "NONE":
            continue
        m = re.search(r"#define DI_GRAMMAR_%s (0x[0-9a-f]+)u" % flag.name, header)
        assert m and int(m.group(1), 16) == flag.value


def test_errors_name_the_place():
    with pytest.raises(DetinferError) as e:
        Grammar.from_gbnf('root ::= "a" (b')
    assert e.value.status == Status.ERR_GRAMMAR and "line 1, column 14" in e.value.message
    with pytest.raises(DetinferError) as e:
        Grammar.from_json_schema({"type": "object", "properties": {"a": {"type": "string", "foo": 1}}})
    assert e.value.status == Status.ERR_UNSUPPORTED
    assert "unsupported keyword foo at /properties/a/foo" in e.value.message
    with pytest.raises(DetinferError) as e:
        Grammar.from_json_schema('{"enum": []}')
    assert e.value.status == Status.ERR_GRAMMAR and "/enum" in e.value.message


def test_text_and_digest():
    with Grammar.from_gbnf('root ::= "x" [0-9]+') as g:
        assert g.gbnf == 'root ::= "x" [0-9]+'
        assert g.digest == xxhash.xxh3_128(g.gbnf.encode()).hexdigest()
    with Grammar.from_json_schema(SCHEMA) as s, Grammar.from_json_schema(json.dumps(SCHEMA)) as t:
        assert s.gbnf.startswith("root ::= ") and s.digest == t.digest
        assert s.digest == xxhash.xxh3_128(s.gbnf.encode()).hexdigest()
    g.close()  # idempotent
    with pytest.raises(ValueError):
        g.digest


def test_sequence_grammar(spm_path):
    with detinfer.Model(spm_path) as model, model.session(max_sequences=2) as session:
        seq = session.sequence(0)
        seq.step(model.tokenize("the fox"))
        assert seq.grammar_state == GrammarState.NONE
        assert len(seq.allowed_tokens()) == model.n_vocab
        with Grammar.from_gbnf('root ::= [0-9]+ "."') as g:
            seq.set_grammar(g)
        assert seq.grammar_state == GrammarState.ACTIVE
        allowed = seq.allowed_tokens()
        pieces = {t: model.token_piece_bytes(t) for t in allowed}
        assert pieces and all(re.fullmatch(rb"[0-9]+\.?", p) for p in pieces.values()), pieces
        assert model.eos not in allowed
        not_allowed = next(t for t in range(model.n_vocab) if t not in allowed)
        with pytest.raises(DetinferError) as e:
            seq.step([not_allowed])
        assert e.value.status == Status.ERR_GRAMMAR_REJECTED
        assert len(seq) == len(model.tokenize("the fox"))  # all or nothing
        digits = next(t for t in allowed if pieces[t].isdigit())
        seq.step([digits])
        dot = next(t for t in seq.allowed_tokens() if model.token_piece_bytes(t).endswith(b"."))
        seq.step([dot])
        assert seq.grammar_state == GrammarState.ACTIVE | GrammarState.CAN_END | GrammarState.MUST_END
        assert seq.allowed_tokens() == [model.eos]
        seq.set_grammar(None)
        assert seq.grammar_state == GrammarState.NONE


def test_generate_follows_a_schema(spm_path):
    jsonschema = pytest.importorskip("jsonschema")
    with detinfer.Model(spm_path) as model, model.session() as session, \
            Grammar.from_json_schema(SCHEMA) as g:
        for sampling in (None, detinfer.SamplingParams(temperature=1.5, seed=3)):
            seq = session.sequence(0)
            gen = seq.generate(model.tokenize("json:"), max_new=40, sampling=sampling, grammar=g)
            steps = list(gen)
            assert gen.stopped_at_eos, model.detokenize(gen.tokens)
            value = json.loads(model.detokenize(gen.tokens[:-1]))
            jsonschema.validate(value, SCHEMA)
            seq.reset()
        with pytest.raises(ValueError):
            session.sequence(0).generate([1], grammar=g, stop_at_eos=False)
        assert steps


def test_ray_records_take_json_schema_and_grammar(spm_path):
    rows = [{"id": 1, "prompt": "a", "max_new": 40, "json_schema": SCHEMA},
            {"id": 2, "prompt": "b", "max_new": 40, "grammar": 'root ::= "x" [0-9]{1,3}'},
            {"id": 3, "prompt": "c", "max_new": 8},
            {"id": 4, "prompt": "d", "max_new": 40, "json_schema": SCHEMA, "sampling": {"temperature": 1.2},
             "seed": 5},
            {"id": 5, "prompt": "e", "max_new": 4, "grammar": "root ::= undefined"}]
    reqs = [parse_request(r, 32, "test") for r in rows]
    gen = Generator(str(spm_path), WorkerConfig(max_sequences=3), logits_digests=True)
    try:
        records = gen.generate(reqs)
    finally:
        gen.close()
    with detinfer.Model(spm_path) as model, model.session() as session:
        for row, rec in zip(rows, records):
            if row["id"] == 5:
                assert rec["finish"] == "error" and "undefined rule" in rec["error"]
                continue
            seq = session.sequence(0)
            sampling = detinfer.SamplingParams(**row.get("sampling", {}), seed=row.get("seed", 0)) \
                if "sampling" in row else None
            grammar = (Grammar.from_json_schema(row["json_schema"]) if "json_schema" in row else
                       Grammar.from_gbnf(row["grammar"]) if "grammar" in row else None)
            g = seq.generate(model.tokenize(row["prompt"]), max_new=row["max_new"], sampling=sampling,
                             grammar=grammar)
            steps = list(g)
            assert rec["tokens"] == g.tokens and rec["digest"] == g.digest, row
            assert rec["logits_digests"] == [s.digest for s in steps]
            seq.reset()
            session.set_sampling(0, None)
            if grammar is not None:
                grammar.close()
    for bad, message in [({"id": 1, "prompt": "a", "json_schema": {}, "grammar": "root ::= \"a\""}, "at most one"),
                         ({"id": 1, "prompt": "a", "json_schema": "nope"}, "'json_schema' must be"),
                         ({"id": 1, "prompt": "a", "grammar": 3}, "'grammar' must be"),
                         ({"id": 1, "prompt": "a", "grammar": "root ::= \"a\"", "stop_at_eos": False},
                          "stop_at_eos")]:
        with pytest.raises(RequestError, match=message):
            parse_request(bad, 32, "test")
