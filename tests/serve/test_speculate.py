"""`detinfer serve --speculate ngram|FILE`: drafts from prompt lookup or from
a draft model, verified several tokens a step, give exactly the answers of
the server without speculation (tokens, text, logprobs, every digest), and of
the library alone, under concurrency, greedy, sampled, with a grammar, stop
strings and logprobs; `verify --url` and `replay` pass against it; a draft
model of another vocabulary is refused at start. docs/DETERMINISM.md,
"Speculative decoding", says why; tests/check_speculate.c checks the
library position by position."""
import json
import os
import subprocess
import threading

import pytest

from conftest import MODELS, SLOW, SMALL, TOOL, check_against_reference, real_model, reference
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


# A smaller model with tok_spm's vocabulary (tests/check_speculate.c drafts with it too).
DRAFT = os.path.join(MODELS, "tok_spm_draft.gguf")


def concurrent_and_alone(url, bodies, count=48):
    """count requests at once (rounds of the bodies), then each body alone (at
    most one sequence decoding: the longest drafts); (body index, response) pairs."""
    got, errors = [None] * count, []

    def one(i):
        try:
            status, r = curl_json(url + "/v1/completions", bodies[i % len(bodies)])
            assert status == 200, r
            got[i] = r
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180 * SLOW)
    assert not errors, errors
    return [(i % len(bodies), r) for i, r in enumerate(got)] + \
        [(k, curl_json(url + "/v1/completions", b)[1]) for k, b in enumerate(bodies)]


def speculation_counts(responses, bodies, want, draft):
    """Checks each response against want (the server without speculation) and
    its speculation facts; per body, the draft tokens (drafted, accepted)."""
    counts = [[0, 0] for _ in bodies]
    for i, (k, r) in enumerate(responses):
        assert answer(r) == answer(want[k]), (i, bodies[k])
        d = r["detinfer"]
        for c in d.get("choices", [d]):
            s = c["speculation"]
            assert s["draft"] == draft and 0 <= s["accepted"] <= s["drafted"], (i, s)
            counts[k][0] += s["drafted"]
            counts[k][1] += s["accepted"]
    return counts


def test_the_same_answers_as_without_speculation(serve):
    # 48 connections at once from one address: past the per-address limit (32) the
    # newest would be refused or displace a slow one (docs/SERVING.md), so no limit here
    plain = serve(SMALL, "--max-sequences", "4")
    spec = serve(SMALL, "--max-sequences", "4", "--speculate", "ngram", "--draft-max", "6",
                 "--max-connections-per-ip", "0", "--queue", "64")
    want = [curl_json(plain.url + "/v1/completions", b)[1] for b in BODIES]
    for b, w in zip(BODIES[:3], want):  # and those of the library alone
        check_against_reference(w["detinfer"], reference(SMALL, prompt=b["prompt"], max_tokens=b["max_tokens"]))
    counts = speculation_counts(concurrent_and_alone(spec.url, BODIES), BODIES, want, "ngram")
    assert sum(a for _, a in counts) > 0, "no draft token was ever accepted: the test did not exercise speculation"
    assert "speculation" not in want[0]["detinfer"]


def test_the_same_answers_with_a_draft_model(serve):
    """--speculate FILE: the draft model's drafts, under concurrency and alone,
    change no bit (every logits digest included). The model as its own draft
    model proposes exactly the greedy choices: every greedy draft token is
    accepted, which prompt lookup would not do; another model of the same
    vocabulary proposes other tokens, and the answers stay the same."""
    bodies = [dict(b, detinfer={"logits_digests": True}) for b in BODIES]
    greedy = [i for i, b in enumerate(bodies) if "temperature" not in b]
    plain = serve(SMALL, "--max-sequences", "4")
    want = [curl_json(plain.url + "/v1/completions", b)[1] for b in bodies]
    assert all(len(c["logits_digests"]) == len(c["completion_token_ids"]) > 0
               for w in want for c in w["detinfer"].get("choices", [w["detinfer"]])), want
    args = ("--max-sequences", "4", "--draft-max", "6", "--max-connections-per-ip", "0", "--queue", "64")
    itself = serve(SMALL, "--speculate", SMALL, *args)
    counts = speculation_counts(concurrent_and_alone(itself.url, bodies), bodies, want, "draft-model")
    for k in greedy:  # drafts in every step with room for one, each accepted
        assert counts[k][0] > 0 and counts[k][1] == counts[k][0], (bodies[k], counts[k])
    other = serve(SMALL, "--speculate", DRAFT, *args)
    counts = speculation_counts(concurrent_and_alone(other.url, bodies, 24), bodies, want, "draft-model")
    assert sum(d for d, _ in counts) > 0, counts


@pytest.mark.skipif(SLOW > 1, reason="a sanitizer build: the real model takes minutes there (the generated ones "
                                      "above take the same paths)")
def test_the_real_model_as_its_own_draft_model(serve):
    """The real model (Gemma 3 270M) drafting for itself, a few requests at once
    and alone: the answers of the server without speculation, every greedy draft
    token accepted."""
    path = real_model()
    if not path:
        pytest.skip("the real model is not available (tools/scripts/fetch-model.sh)")
    bodies = [{"prompt": "List the days of the week: Monday, Tuesday,", "max_tokens": 16},
              {"prompt": "Copy: the quick brown fox jumps over the lazy dog. Copy: the quick", "max_tokens": 12},
              {"prompt": "Count: 1, 2, 3, 4,", "max_tokens": 12, "temperature": 0.8, "seed": 3}]
    bodies = [dict(b, detinfer={"logits_digests": True}) for b in bodies]
    args = ("--max-sequences", "4", "--context", "256")
    plain = serve(path, *args)
    want = [curl_json(plain.url + "/v1/completions", b)[1] for b in bodies]
    spec = serve(path, *args, "--speculate", path, "--draft-max", "6")
    counts = speculation_counts(concurrent_and_alone(spec.url, bodies, 4), bodies, want, "draft-model")
    for k in (0, 1):
        assert counts[k][0] > 0 and counts[k][1] == counts[k][0], (bodies[k], counts[k])


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


def test_bad_speculation_options(serve, tmp_path):
    for args, words in ((["--speculate", "ngram", "--draft-max", "0"], "--draft-max"),
                        (["--speculate", "ngram", "--draft-max", "33"], "--draft-max")):
        out = subprocess.run([TOOL, "serve", "--model", SMALL, "--port", "0", *args], capture_output=True, text=True,
                             timeout=60 * SLOW)
        assert out.returncode == 2 and words in out.stderr, (args, out.stderr)
    # a draft model is refused at start, before listening: another vocabulary (its size,
    # or the same size with other texts), a file that is not there
    for draft, words in ((os.path.join(MODELS, "tok_bpe_llama3.gguf"),
                          "DI_ERR_MODEL: the draft model '{}': the draft model's vocabulary has 643 tokens, "
                          "the model's 652: a draft model must share the model's vocabulary"),
                         (os.path.join(MODELS, "mha_tied_f32.gguf"), "DI_ERR_MODEL"),
                         (str(tmp_path / "missing.gguf"), "DI_ERR_IO: cannot load the draft model '{}'")):
        out = subprocess.run([TOOL, "serve", "--model", SMALL, "--port", "0", "--speculate", draft],
                             capture_output=True, text=True, timeout=60 * SLOW)
        assert out.returncode == 1 and words.format(draft) in out.stderr, (draft, out.stderr)
        assert "listening" not in out.stderr, out.stderr
