"""`detinfer serve --speculate ngram`: prompt-lookup drafts verified several
tokens a step give exactly the answers of the server without speculation
(tokens, text, logprobs, every digest), and of the library alone, under
concurrency, greedy, sampled, with a grammar, stop strings and logprobs;
`verify --url` and `replay` pass against it. docs/DETERMINISM.md,
"Speculative decoding", says why; tests/check_speculate.c checks the
library position by position."""
import json
import subprocess
import threading

from conftest import SLOW, SMALL, TOOL, check_against_reference, reference
from test_logprobs import curl_json

# Prompts that repeat themselves: the lookup finds drafts in them.
REPEATING = ["the cat sat on the mat and the cat sat on the", "one two three one two three one two",
             "abc abc abc abc abc"]
BODIES = [{"prompt": p, "max_tokens": 24} for p in REPEATING] + [
    {"prompt": REPEATING[0], "max_tokens": 20, "temperature": 0.9, "seed": 4, "repetition_penalty": 1.2},
    {"prompt": REPEATING[1], "max_tokens": 16, "logprobs": 3},
    {"prompt": REPEATING[2], "max_tokens": 20, "stop": ["c a"]},
    {"prompt": REPEATING[0], "max_tokens": 20, "n": 2, "temperature": 0.7, "seed": 9},
    {"prompt": REPEATING[1], "max_tokens": 20, "grammar": "root ::= [a-z ]+ \".\"\n"},
]


def without_speculation(d):
    return {k: v for k, v in d.items() if k not in ("speculation", "fingerprint")}


def answer(r):
    """What must not depend on speculation: every choice's text, logprobs and
    finish, and the detinfer facts less the speculation counts."""
    d = r["detinfer"]
    facts = [without_speculation(c) for c in d["choices"]] if "choices" in d else [without_speculation(d)]
    return [(c["text"], c["logprobs"], c["finish_reason"]) for c in r["choices"]], facts


def test_the_same_answers_as_without_speculation(serve):
    # 48 connections at once from one address: past the per-address limit (32) the
    # newest would be refused or displace a slow one (docs/SERVING.md), so no limit here
    plain = serve(SMALL, "--max-sequences", "4")
    spec = serve(SMALL, "--max-sequences", "4", "--speculate", "ngram", "--draft-max", "6",
                 "--max-connections-per-ip", "0", "--queue", "64")
    want = [curl_json(plain.url + "/v1/completions", b)[1] for b in BODIES]
    for b, w in zip(BODIES[:3], want):  # and those of the library alone
        check_against_reference(w["detinfer"], reference(SMALL, prompt=b["prompt"], max_tokens=b["max_tokens"]))
    # 48 at once (6 rounds of the 8 bodies), and each alone (at most one decoding: the longest drafts)
    got, errors = [None] * 48, []

    def one(i):
        try:
            status, r = curl_json(spec.url + "/v1/completions", BODIES[i % len(BODIES)])
            assert status == 200, r
            got[i] = r
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(48)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180 * SLOW)
    assert not errors, errors
    alone = [curl_json(spec.url + "/v1/completions", b)[1] for b in BODIES]
    accepted = 0
    for i, r in enumerate(got + alone):
        w = want[i % len(BODIES)]
        assert answer(r) == answer(w), (i, BODIES[i % len(BODIES)])
        d = r["detinfer"]
        for c in d.get("choices", [d]):
            assert c["speculation"]["draft"] == "ngram" and c["speculation"]["accepted"] <= c["speculation"]["drafted"]
            accepted += c["speculation"]["accepted"]
    assert accepted > 0, "no draft token was ever accepted: the test did not exercise speculation"
    assert "speculation" not in want[0]["detinfer"]


def test_verify_url_and_replay_pass_with_speculation(serve, tmp_path):
    s = serve(SMALL, "--max-sequences", "4", "--speculate", "ngram")
    out = subprocess.run([TOOL, "verify", "--url", s.url, "--model", SMALL, "--reps", "10"], capture_output=True,
                         text=True, timeout=300 * SLOW)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK: every response equals its reference." in out.stdout
    receipts = [{"endpoint": "/v1/completions", "request": b, "response": curl_json(s.url + "/v1/completions", b)[1]}
                for b in BODIES]
    path = tmp_path / "receipts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in receipts))
    out = subprocess.run([TOOL, "replay", "--model", SMALL, str(path)], capture_output=True, text=True,
                         timeout=300 * SLOW)
    assert out.returncode == 0, out.stdout + out.stderr


def test_bad_speculation_options(serve):
    for args, words in ((["--speculate", "draft.gguf"], "--speculate takes ngram"),
                        (["--speculate", "ngram", "--draft-max", "0"], "--draft-max"),
                        (["--speculate", "ngram", "--draft-max", "33"], "--draft-max")):
        out = subprocess.run([TOOL, "serve", "--model", SMALL, "--port", "0", *args], capture_output=True, text=True,
                             timeout=60 * SLOW)
        assert out.returncode == 2 and words in out.stderr, (args, out.stderr)
