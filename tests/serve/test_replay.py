"""`detinfer replay`: answers of a live server recomputed from their receipts
(request + response), and tampered receipts caught: one token id changed,
one digest changed. `verify --url --save DIR` writes receipts replay checks."""
import json
import os
import subprocess

from conftest import MODELS, SLOW, SMALL, TOOL

GEMMA_CHAT = os.path.join(MODELS, "chat-google-gemma-3-270m-it.gguf")


def post(server, path, body):
    import urllib.request
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60 * SLOW) as r:
        return json.load(r)


def replay(model, *files, stdin=None):
    return subprocess.run([TOOL, "replay", "--model", model, *files], capture_output=True, text=True,
                          input=stdin, timeout=120 * SLOW)


REQUESTS = [
    ("/v1/completions", {"prompt": "Hello world", "max_tokens": 8}),  # greedy
    ("/v1/completions", {"prompt": [1, 71, 482], "max_tokens": 10, "temperature": 0.9, "seed": 77,
                         "detinfer": {"logits_digests": True, "prompt_ids": True}}),  # sampled
    ("/v1/completions", {"prompt": "The", "max_tokens": 6, "n": 3, "temperature": 1.2, "seed": 5,
                         "stop": ["x"]}),  # n > 1
    ("/v1/completions", {"prompt": "The", "max_tokens": 5, "n": 2}),  # greedy n > 1
]


def test_replay_matches_and_catches_tampering(serve, tmp_path):
    s = serve(SMALL)
    receipts = [{"endpoint": path, "request": body, "response": post(s, path, body)} for path, body in REQUESTS]
    chat = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
    c = serve(GEMMA_CHAT)  # a chat; no max_tokens: the server's default, from the receipt
    chat_receipt = {"request": chat, "response": post(c, "/v1/chat/completions", chat)}
    one = tmp_path / "one.json"
    one.write_text(json.dumps(receipts[1]))
    many = tmp_path / "many.jsonl"
    many.write_text("".join(json.dumps(r) + "\n" for r in receipts))
    out = replay(SMALL, str(one), str(many))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("matched") == 1 + len(receipts) + 1  # each receipt, and the summary line
    assert "holds on any machine" in out.stdout
    out = replay(GEMMA_CHAT, "-", stdin=json.dumps(chat_receipt))
    assert out.returncode == 0 and "matched (chat)" in out.stdout, out.stdout + out.stderr

    # One token id changed: DIFFERS at that position.
    bad = json.loads(json.dumps(receipts[0]))
    bad["response"]["detinfer"]["completion_token_ids"][3] += 1
    out = replay(SMALL, "-", stdin=json.dumps(bad))
    assert out.returncode == 1 and "DIFFERS: choice 0: token 3:" in out.stdout, out.stdout
    # One digest changed (a choice of an n > 1 answer).
    bad = json.loads(json.dumps(receipts[2]))
    d = bad["response"]["detinfer"]["choices"][1]
    d["sequence_digest"] = ("0" if d["sequence_digest"][0] != "0" else "1") + d["sequence_digest"][1:]
    out = replay(SMALL, "-", stdin=json.dumps(bad))
    assert out.returncode == 1 and "choice 1: the sequence digest differs" in out.stdout, out.stdout
    # The text, the logits digests, the prompt, the sampling parameters and the model, each altered.
    for alter, why in ((lambda r: r["response"]["choices"][0].update(text="forged"), "text differs"),
                       (lambda r: r["response"]["detinfer"]["logits_digests"].__setitem__(0, "0" * 32),
                        "logits digest of token 0"),
                       (lambda r: r["response"]["detinfer"]["prompt_ids"].__setitem__(1, 5), "the prompt"),
                       (lambda r: r["response"]["detinfer"]["sampling_params"].update(top_p=0.5), "top_p"),
                       (lambda r: r["response"]["detinfer"]["fingerprint"].update(model_digest="0" * 32),
                        "model digest")):
        bad = json.loads(json.dumps(receipts[1]))
        alter(bad)
        out = replay(SMALL, "-", stdin=json.dumps(bad))
        assert out.returncode == 1 and why in out.stdout, (why, out.stdout)
    # The wrong model file, and usage errors.
    out = replay(os.path.join(MODELS, "tok_spm_noprefix.gguf"), str(one))
    assert out.returncode == 1 and "model digest" in out.stdout
    assert replay(SMALL).returncode == 2
    assert subprocess.run([TOOL, "replay", str(one)], capture_output=True).returncode == 2
    # Receipts after "--" are files too (one named like an option), and the
    # options may follow them; a file that holds no receipt is one that
    # differs, not a failure to start (the engine once got profile 0).
    dashed = tmp_path / "-r.json"
    dashed.write_text(json.dumps(receipts[0]))
    out = subprocess.run([TOOL, "replay", str(one), "--model", SMALL, "--", str(dashed)], capture_output=True,
                         text=True, timeout=120 * SLOW)
    assert out.returncode == 0 and "2 of 2 receipts matched" in out.stdout, out.stdout + out.stderr
    out = replay(SMALL, "-", stdin="{}")
    assert out.returncode == 1 and "receipt 1: DIFFERS: not a receipt" in out.stdout, out.stdout + out.stderr


def test_verify_url_saves_receipts(serve, tmp_path):
    s = serve(SMALL, "--max-sequences", "4")
    out = subprocess.run([TOOL, "verify", "--url", s.url, "--reps", "2", "--traffic", "2", "--ties", "0",
                          "--save", str(tmp_path)], capture_output=True, text=True, timeout=120 * SLOW)
    assert out.returncode == 0, out.stdout + out.stderr
    files = sorted(str(p) for p in tmp_path.iterdir())
    assert len(files) >= 4
    out = replay(SMALL, *files)
    assert out.returncode == 0 and out.stdout.count(": matched") == len(files), out.stdout + out.stderr


def test_replay_checks_every_computed_field(serve):
    # issue 42: usage, system_fingerprint, finish_reason, logprobs, the
    # message and the object are the server's computation too; id, created
    # and model are its own (docs/SERVING.md, "Auditing a served answer").
    s = serve(SMALL)
    body = {"prompt": "Hello world", "max_tokens": 6, "logprobs": 2}
    good = {"endpoint": "/v1/completions", "request": body, "response": post(s, "/v1/completions", body)}
    c = serve(GEMMA_CHAT)
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "logprobs": True, "top_logprobs": 1}
    good_chat = {"request": chat, "response": post(c, "/v1/chat/completions", chat)}

    def check(receipt, model=SMALL):
        return replay(model, "-", stdin=json.dumps(receipt))

    def altered(receipt, alter):
        bad = json.loads(json.dumps(receipt))
        alter(bad["response"])
        return bad
    # What a client adds or changes that is not the answer's still matches:
    # null fields an SDK writes back, another id, time and model name.
    same = altered(good, lambda r: r.update(id="cmpl-other", created=1, model="other", service_tier=None))
    same["response"]["usage"]["completion_tokens_details"] = None
    out = check(same)
    assert out.returncode == 0 and "matched" in out.stdout, out.stdout + out.stderr
    cases = [
        (good, lambda r: r["usage"].update(completion_tokens=r["usage"]["completion_tokens"] + 1),
         "usage.completion_tokens: the receipt has 7, recomputed 6"),
        (good, lambda r: r["usage"].update(total_tokens=r["usage"]["total_tokens"] + 1), "usage.total_tokens"),
        (good, lambda r: r.update(system_fingerprint="0" * 32), "system_fingerprint: the receipt has \"000"),
        (good, lambda r: r.update(object="chat.completion"), "object"),
        (good, lambda r: r["choices"][0]["logprobs"]["token_logprobs"].__setitem__(2, -0.125),
         "choices[0].logprobs.token_logprobs[2]"),
        (good, lambda r: r["choices"][0]["logprobs"]["top_logprobs"][0].clear(), "choices[0].logprobs.top_logprobs[0]"),
        (good, lambda r: r["choices"][0].update(finish_reason="stop"), "finish_reason"),
        (good, lambda r: r["detinfer"].update(sampling="sampled"), "detinfer.sampling"),
        (good_chat, lambda r: r["choices"][0]["message"].update(role="system"), "choices[0].message.role"),
        (good_chat, lambda r: r["choices"][0]["message"].update(tool_calls=[{"id": "x"}]),
         "choices[0].message.tool_calls: the receipt has"),
        (good_chat, lambda r: r["choices"][0]["logprobs"]["content"][0].update(logprob=0.0),
         "choices[0].logprobs.content[0].logprob"),
    ]
    for receipt, alter, why in cases:
        out = check(altered(receipt, alter), GEMMA_CHAT if receipt is good_chat else SMALL)
        assert out.returncode == 1 and "DIFFERS" in out.stdout and why in out.stdout, (why, out.stdout + out.stderr)
