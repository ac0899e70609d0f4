"""Structured output (docs/SERVING.md, "Structured output"): response_format
(text, json_object, json_schema), the extensions grammar and json_schema, in
completions and chats, streamed and not. Every constrained answer equals the
library's run of the request alone with the same grammar (the Python bindings,
and `detinfer run --grammar/--json-schema`), 32 at once too; its JSON parses
and validates (json, jsonschema); the detinfer object names the grammar's
digest, checked against XXH3-128 of its GBNF text; errors are 400s naming the
field and the place in it; replay rebuilds the grammar and checks its digest."""
import concurrent.futures
import json
import os
import subprocess
import urllib.error
import urllib.request

import openai
import pytest
import xxhash
from conftest import MODELS, SLOW, SMALL, TOOL, bindings

GEMMA_CHAT = os.path.join(MODELS, "chat-google-gemma-3-270m-it.gguf")

SCHEMA = {"type": "object", "properties": {"kind": {"enum": ["fox", "dog"]},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 99},
                                           "tag": {"type": "string", "maxLength": 4}},
          "required": ["kind", "n"], "additionalProperties": False}
GBNF = 'root ::= "the " word (" " word){0,3} "."\nword ::= [a-z]{1,6}'


def post(server, path, body, expect=200):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120 * SLOW) as r:
            assert r.status == expect
            return json.load(r)
    except urllib.error.HTTPError as e:
        assert e.code == expect, (e.code, e.read())
        return json.load(e)


def stream(server, path, body):
    """The chunks of a streamed request (one choice)."""
    body = dict(body, stream=True)
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    chunks = []
    with urllib.request.urlopen(req, timeout=120 * SLOW) as r:
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


def grammar_of(kind, text):
    detinfer = bindings()
    return (detinfer.Grammar.from_json_schema(text) if kind == "schema" else detinfer.Grammar.from_gbnf(text))


def reference(model, prompt_ids, max_tokens, kind, text, end_tokens=(), **sampling):
    """The library alone: the prompt, then up to max_tokens tokens under the
    grammar (ending at EOS or one of end_tokens), as the server chooses them."""
    detinfer = bindings()
    with detinfer.Model(model) as m, m.session(context_length=len(prompt_ids) + max_tokens) as s, \
            grammar_of(kind, text) as g:
        seq = s.sequence(0)
        if sampling:
            seq.set_sampling(detinfer.SamplingParams(**sampling))
        seq.step(list(prompt_ids))
        seq.set_grammar(g, end_tokens)
        tokens, digests = [], []
        for k in range(max_tokens):
            digests.append(s.logits_digest(0))
            t = seq.sample_token()
            tokens.append(t)
            if t == m.eos or t in end_tokens or k + 1 == max_tokens:
                break
            seq.step([t])
        return {"tokens": tokens, "digests": digests, "sequence_digest": seq.digest([t]),
                "grammar_digest": g.digest, "gbnf": g.gbnf,
                "finish": "stop" if (t == m.eos or t in end_tokens) else "length",
                "text": m.detokenize([x for x in tokens if x != m.eos and x not in end_tokens])}


def check(resp, ref, text_key="text"):
    d = resp["detinfer"]
    assert d["completion_token_ids"] == ref["tokens"]
    assert d["sequence_digest"] == ref["sequence_digest"]
    assert d["grammar_digest"] == ref["grammar_digest"] == xxhash.xxh3_128_hexdigest(ref["gbnf"].encode())
    if "logits_digests" in d:
        assert d["logits_digests"] == ref["digests"]
    choice = resp["choices"][0]
    assert choice["finish_reason"] == ref["finish"]
    got = choice["message"]["content"] if text_key == "message" else choice["text"]
    assert got == ref["text"]


def test_completions_with_a_schema_and_a_grammar(serve):
    jsonschema = pytest.importorskip("jsonschema")
    s = serve(SMALL)
    for field, kind, text, extra in (("json_schema", "schema", SCHEMA, {}),
                                     ("grammar", "gbnf", GBNF, {}),
                                     ("response_format", "schema", SCHEMA,
                                      {"temperature": 1.1, "seed": 4}),
                                     ("json_schema", "schema", SCHEMA, {"temperature": 0.7, "top_p": 0.9, "seed": 9})):
        value = {"type": "json_schema", "json_schema": {"name": "x", "schema": text, "strict": True}} \
            if field == "response_format" else text
        body = {"prompt": "the quick brown fox", "max_tokens": 40, field: value,
                "detinfer": {"logits_digests": True, "prompt_ids": True}, **extra}
        resp = post(s, "/v1/completions", body)
        d = resp["detinfer"]
        sampling = {k: extra[k] for k in ("temperature", "top_p") if k in extra}
        if "seed" in extra:
            sampling["seed"] = extra["seed"]
        ref = reference(SMALL, d["prompt_ids"], 40, kind, json.dumps(text) if kind == "schema" else text,
                        **sampling)
        check(resp, ref)
        if kind == "schema" and ref["finish"] == "stop":
            jsonschema.validate(json.loads(resp["choices"][0]["text"]), SCHEMA)
        # streamed: the same tokens, text and digests, and the last chunk names the grammar
        chunks = stream(s, "/v1/completions", body)
        last = chunks[-1]
        assert last["choices"][0]["finish_reason"] == ref["finish"]
        assert last["detinfer"]["completion_token_ids"] == ref["tokens"]
        assert last["detinfer"]["grammar_digest"] == ref["grammar_digest"]
        assert "".join(c["choices"][0]["text"] for c in chunks) == ref["text"]


def test_the_command_gives_the_same_tokens(serve, tmp_path):
    s = serve(SMALL)
    schema_file, gbnf_file = tmp_path / "s.json", tmp_path / "g.gbnf"
    schema_file.write_text(json.dumps(SCHEMA))
    gbnf_file.write_text(GBNF)
    for option, path, field, value in (("--json-schema", schema_file, "json_schema", SCHEMA),
                                       ("--grammar", gbnf_file, "grammar", GBNF)):
        resp = post(s, "/v1/completions", {"prompt": "a dog", "max_tokens": 30, field: value,
                                           "detinfer": {"prompt_ids": True}})
        d = resp["detinfer"]
        out = subprocess.run([TOOL, "run", "--model", SMALL, "--tokens", ",".join(map(str, d["prompt_ids"])),
                              "--max-new", "30", "--json", option, str(path)], capture_output=True, text=True,
                             timeout=120 * SLOW)
        assert out.returncode == 0, out.stderr
        run = json.loads(out.stdout)
        assert run["tokens"] == d["completion_token_ids"] and run["sequence_digest"] == d["sequence_digest"]
        assert run["grammar_digest"] == d["grammar_digest"]
        assert run["stopped"] == ("eos" if resp["choices"][0]["finish_reason"] == "stop" else "max_new")


def test_chat_json_object_and_text(serve):
    s = serve(GEMMA_CHAT)
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120 * SLOW)
    messages = [{"role": "user", "content": "JSON"}]  # the tiny model's context is 64 tokens
    resp = c.chat.completions.create(model="m", messages=messages, max_tokens=12,
                                     response_format={"type": "json_object"},
                                     extra_body={"detinfer": {"prompt_ids": True}})
    d = resp.model_extra["detinfer"]
    detinfer = bindings()
    with detinfer.Model(GEMMA_CHAT) as m:
        eot = m.token_lookup("<end_of_turn>")
    ref = reference(GEMMA_CHAT, d["prompt_ids"], 12, "schema", '{"type": "object"}', end_tokens=(eot,))
    check(resp.model_dump(), ref, "message")
    if resp.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(resp.choices[0].message.content), dict)
    # text: as if no response_format were given
    plain = c.chat.completions.create(model="m", messages=messages, max_tokens=8)
    text = c.chat.completions.create(model="m", messages=messages, max_tokens=8, response_format={"type": "text"})
    assert plain.model_extra["detinfer"]["completion_token_ids"] == text.model_extra["detinfer"]["completion_token_ids"]
    assert "grammar_digest" not in text.model_extra["detinfer"]
    # a streamed chat with a schema: the deltas are the text
    chunks = stream(s, "/v1/chat/completions", {"messages": messages, "max_tokens": 12, "json_schema": SCHEMA,
                                                "detinfer": {"prompt_ids": True}})
    ref = reference(GEMMA_CHAT, chunks[-1]["detinfer"]["prompt_ids"], 12, "schema", json.dumps(SCHEMA),
                    end_tokens=(eot,))
    assert chunks[-1]["detinfer"]["completion_token_ids"] == ref["tokens"]
    assert "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks) == ref["text"]


def test_max_tokens_cuts_with_length(serve):
    s = serve(SMALL)
    resp = post(s, "/v1/completions", {"prompt": "x", "max_tokens": 3,
                                       "grammar": 'root ::= "{" [a-z]{10,20} "}"'})
    assert resp["choices"][0]["finish_reason"] == "length"
    text = resp["choices"][0]["text"]
    assert text.startswith("{") and "}" not in text  # cut: not valid, as OpenAI's


@pytest.mark.parametrize("body,param,message", [
    ({"grammar": 'root ::= "a" (b'}, "grammar", "line 1, column 14: unbalanced ("),
    ({"grammar": "root ::= undefined"}, "grammar", "undefined rule undefined"),
    ({"grammar": 7}, "grammar", "must be a string"),
    ({"json_schema": {"type": "object", "properties": {"a": {"type": "string", "foo": 1}}}}, "json_schema",
     "unsupported keyword foo at /properties/a/foo"),
    ({"json_schema": {"enum": []}}, "json_schema", "empty enum"),
    ({"json_schema": {"$ref": "#/$defs/nope"}}, "json_schema", "bad $ref"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema", "is required"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "foo"}}}},
     "response_format.json_schema.schema", "unknown type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}, "extra": 1}}},
     "response_format.json_schema", "unknown field"),
    ({"response_format": {"type": "xml"}}, "response_format.type", "unknown response_format type"),
    ({"response_format": {"type": "text", "json_schema": {}}}, "response_format", "unknown field"),
    ({"response_format": {"type": "json_object"}, "grammar": 'root ::= "a"'}, "grammar", "at most one"),
])
def test_errors_name_the_field_and_the_place(serve, body, param, message):
    s = serve(SMALL)
    resp = post(s, "/v1/completions", {"prompt": "x", "max_tokens": 4, **body}, expect=400)
    assert resp["error"]["param"] == param, resp
    assert message in resp["error"]["message"], resp


def test_32_concurrent_constrained_requests_equal_their_runs_alone(serve):
    s = serve(SMALL, "--max-sequences", "16", "--queue", "64")
    bodies = []
    for i in range(32):
        body = {"prompt": ["the fox", "a dog", "json", "x y z"][i % 4], "max_tokens": 24 + i % 5,
                "detinfer": {"logits_digests": True, "prompt_ids": True}}
        if i % 3 == 0:
            body["json_schema"] = SCHEMA
        elif i % 3 == 1:
            body["grammar"] = GBNF
        else:
            body["response_format"] = {"type": "json_object"}
        if i % 2:
            body.update(temperature=1.0, seed=i)
        bodies.append(body)
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda b: post(s, "/v1/completions", b), bodies))
    for body, resp in zip(bodies, answers):
        kind, text = (("schema", json.dumps(body["json_schema"])) if "json_schema" in body else
                      ("gbnf", body["grammar"]) if "grammar" in body else ("schema", '{"type": "object"}'))
        sampling = {"temperature": 1.0, "seed": body["seed"]} if "seed" in body else {}
        ref = reference(SMALL, resp["detinfer"]["prompt_ids"], body["max_tokens"], kind, text, **sampling)
        check(resp, ref)


def test_replay_rebuilds_the_grammar(serve, tmp_path):
    s = serve(SMALL)
    body = {"prompt": "the fox", "max_tokens": 20, "json_schema": SCHEMA}
    receipt = {"endpoint": "/v1/completions", "request": body, "response": post(s, "/v1/completions", body)}

    def replay(r):
        return subprocess.run([TOOL, "replay", "--model", SMALL, "-"], input=json.dumps(r), capture_output=True,
                              text=True, timeout=120 * SLOW)

    out = replay(receipt)
    assert out.returncode == 0 and "matched" in out.stdout, out.stdout + out.stderr
    other = json.loads(json.dumps(receipt))
    other["request"]["json_schema"]["properties"]["n"]["maximum"] = 98
    out = replay(other)
    assert out.returncode == 1 and "the grammar: the receipt's digest" in out.stdout, out.stdout
    forged = json.loads(json.dumps(receipt))
    forged["response"]["detinfer"]["grammar_digest"] = "0" * 32
    out = replay(forged)
    assert out.returncode == 1 and "the grammar" in out.stdout, out.stdout
