"""Log-probabilities through the official openai client, in OpenAI's shapes:
/v1/completions (`logprobs`: 0..5) and /v1/chat/completions (`logprobs`:
true, `top_logprobs`: 0..20), streamed and not. Every value equals, bit for
bit, the library's di_session_logprobs in a run of the same request alone
(conftest.logprobs_reference: the bindings and ctypes, never the server),
whatever else the server batches with it. The values themselves are checked
against a float64 log-softmax in tests/check_logprobs.c."""
import json
import os
import subprocess
import threading

import openai
import pytest
from conftest import (MODELS, SLOW, SMALL, bindings, logprobs_reference, real_model, reference,
                      token_string)

GEMMA_CHAT = os.path.join(MODELS, "chat-google-gemma-3-270m-it.gguf")
PROMPTS = ["The cat sat on the mat", "Hello world", "Once upon a time, in a land far away"]


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120 * SLOW)


def prompt_ids(model, text):
    detinfer = bindings()
    with detinfer.Model(model) as m:
        return m.tokenize(text, add_bos=True)


def check_completion_logprobs(lp, ref, n_top):
    """lp: a completion choice's logprobs (the openai object); ref: logprobs_reference."""
    assert lp.tokens == [token_string(t["piece"]) for t in ref]
    assert lp.token_logprobs == [t["logprob"] for t in ref]  # exact: %.17g of the float
    assert len(lp.top_logprobs) == len(ref)
    for got, want in zip(lp.top_logprobs, ref):
        # the n most likely (a repeated text keeps the higher-ranked one), and the chosen token
        expected = {}
        for _, piece, value in want["top"][:n_top] + [(want["token"], want["piece"], want["logprob"])]:
            expected.setdefault(token_string(piece), value)
        assert got == expected
        assert len(got) <= n_top + 1
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)


def check_chat_logprobs(content, ref, n_top):
    assert len(content) == len(ref)
    for got, want in zip(content, ref):
        assert got.token == token_string(want["piece"])
        assert bytes(got.bytes) == want["piece"]
        assert got.logprob == want["logprob"]
        assert [(t.token, bytes(t.bytes), t.logprob) for t in got.top_logprobs] == \
            [(token_string(p), p, v) for _, p, v in want["top"][:n_top]]


def test_completion_logprobs_equal_the_library_alone(serve):
    s = serve(SMALL, "--max-sequences", "4")
    cases = [(p, n, m) for p in PROMPTS for n, m in ((0, 5), (1, 12), (5, 20))]
    refs = {(p, n, m): logprobs_reference(SMALL, prompt_ids(SMALL, p), m, n) for p, n, m in cases}
    results, errors = {}, []

    def one(case):  # all at once: batched with each other
        p, n, m = case
        try:
            with client(s) as c:
                results[case] = c.completions.create(model="x", prompt=p, max_tokens=m, logprobs=n)
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(c,)) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120 * SLOW)
    assert not errors, errors
    for case in cases:
        r, ref = results[case], refs[case]
        assert r.model_extra["detinfer"]["completion_token_ids"] == [t["token"] for t in ref]
        check_completion_logprobs(r.choices[0].logprobs, ref, case[1])
        # the tokens are those `detinfer run` gives alone
        assert [t["token"] for t in ref] == reference(SMALL, prompt=case[0], max_tokens=case[2])["tokens"]
    # Without logprobs, none.
    r = client(s).completions.create(model="x", prompt="Hello world", max_tokens=3)
    assert r.choices[0].logprobs is None


def test_completion_logprobs_stream(serve):
    s = serve(SMALL)
    prompt, n, m = PROMPTS[2], 3, 20
    ref = logprobs_reference(SMALL, prompt_ids(SMALL, prompt), m, n)
    chunks = list(client(s).completions.create(model="x", prompt=prompt, max_tokens=m, logprobs=n, stream=True))
    with_lp = [ch for ch in chunks if ch.choices[0].logprobs is not None]
    # one chunk per token, as OpenAI sends them; the last chunk has none
    assert all(len(ch.choices[0].logprobs.tokens) == 1 for ch in with_lp)
    assert len(with_lp) == len(ref) and chunks[-1].choices[0].logprobs is None
    merged = type("LP", (), {})()
    for field in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        setattr(merged, field, [x for ch in with_lp for x in getattr(ch.choices[0].logprobs, field)])
    check_completion_logprobs(merged, ref, n)
    whole = client(s).completions.create(model="x", prompt=prompt, max_tokens=m, logprobs=n)
    assert "".join(ch.choices[0].text for ch in chunks) == whole.choices[0].text
    assert merged.text_offset == whole.choices[0].logprobs.text_offset


def test_sampled_logprobs_are_the_raw_distributions(serve):
    """A sampled token's logprob is its log-probability in the model's raw
    distribution (temperature 1, no filter), not in the sampling one."""
    s = serve(SMALL)
    c = client(s)
    if not c.models.list().data[0].model_extra["detinfer"]["sampling"]:
        pytest.skip("this library does not sample")
    tokens = [1, 71, 482, 635, 441, 476, 141, 625]
    params = dict(temperature=0.7, top_p=0.9, seed=7)
    ref = logprobs_reference(SMALL, tokens, 16, 2, **params)
    for stream in (False, True):
        r = c.completions.create(model="x", prompt=tokens, max_tokens=16, logprobs=2, stream=stream, **params)
        if stream:
            chunks = list(r)
            lp = [x for ch in chunks if ch.choices[0].logprobs for x in ch.choices[0].logprobs.token_logprobs]
            ids = chunks[-1].model_extra["detinfer"]["completion_token_ids"]
        else:
            lp, ids = r.choices[0].logprobs.token_logprobs, r.model_extra["detinfer"]["completion_token_ids"]
        assert ids == [t["token"] for t in ref]
        assert lp == [t["logprob"] for t in ref]
    greedy = logprobs_reference(SMALL, tokens, 16, 1)
    assert [t["token"] for t in ref] != [t["token"] for t in greedy], "sampling chose the greedy tokens"
    # some chosen token is not the most likely one: its logprob is below the top's
    assert any(t["logprob"] < t["top"][0][2] for t in ref)


def test_chat_logprobs(serve):
    s = serve(GEMMA_CHAT)
    from test_chat import tokenize_special
    text = "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    ref = logprobs_reference(GEMMA_CHAT, tokenize_special(GEMMA_CHAT, text), 10, 4)
    messages = [{"role": "user", "content": "Hi"}]
    r = client(s).chat.completions.create(model="x", messages=messages, max_tokens=10, logprobs=True,
                                          top_logprobs=4)
    n = len(r.model_extra["detinfer"]["completion_token_ids"])  # it may stop at the end of the turn
    check_chat_logprobs(r.choices[0].logprobs.content, ref[:n], 4)
    # top_logprobs 0 (or absent): the chosen tokens only
    r0 = client(s).chat.completions.create(model="x", messages=messages, max_tokens=10, logprobs=True)
    assert all(t.top_logprobs == [] for t in r0.choices[0].logprobs.content)
    check_chat_logprobs(r0.choices[0].logprobs.content, ref[:n], 0)
    # streamed: one token per chunk, the same values
    chunks = list(client(s).chat.completions.create(model="x", messages=messages, max_tokens=10, logprobs=True,
                                                    top_logprobs=4, stream=True))
    content = [t for ch in chunks if ch.choices[0].logprobs for t in ch.choices[0].logprobs.content]
    assert all(len(ch.choices[0].logprobs.content) == 1 for ch in chunks if ch.choices[0].logprobs)
    check_chat_logprobs(content, ref[:n], 4)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == r.choices[0].message.content
    # without logprobs, none
    plain = client(s).chat.completions.create(model="x", messages=messages, max_tokens=3)
    assert plain.choices[0].logprobs is None


def test_real_model_logprobs_and_offsets(serve):
    path = real_model()
    if not path:
        pytest.skip("the real model is not available (tools/scripts/fetch-model.sh)")
    s = serve(path, "--context", "64")
    prompt = "The capital of France is"
    ref = logprobs_reference(path, prompt_ids(path, prompt), 8, 5)
    r = client(s).completions.create(model="x", prompt=prompt, max_tokens=8, logprobs=5)
    lp = r.choices[0].logprobs
    check_completion_logprobs(lp, ref, 5)
    # Text tokens: the offsets index the text, each token's string is its slice.
    if all(not t.startswith("bytes:") for t in lp.tokens):
        text = r.choices[0].text
        assert "".join(lp.tokens) == text
        ends = lp.text_offset[1:] + [len(text)]
        assert [text[a:b] for a, b in zip(lp.text_offset, ends)] == lp.tokens
    # a real distribution: the chosen greedy token is the top one, and probabilities sum below 1
    for t in ref:
        assert t["top"][0][0] == t["token"] and t["logprob"] <= 0
        assert sum(2.718281828459045 ** v for _, _, v in t["top"]) <= 1.0 + 1e-6


def curl_json(url, body):
    out = subprocess.run(["curl", "-sS", "--max-time", str(int(60 * SLOW)), "-o", "-", "-w", "\n%{http_code}",
                          "-H", "Content-Type: application/json", "--data-binary", json.dumps(body), url],
                         capture_output=True, text=True, timeout=90 * SLOW)
    assert out.returncode == 0, out.stderr
    text, _, status = out.stdout.rpartition("\n")
    return int(status), json.loads(text)


BAD = [
    ("/v1/completions", {"logprobs": 6}, "logprobs"),
    ("/v1/completions", {"logprobs": -1}, "logprobs"),
    ("/v1/completions", {"logprobs": "2"}, "logprobs"),
    ("/v1/completions", {"logprobs": True}, "logprobs"),
    ("/v1/completions", {"logprobs": 2.5}, "logprobs"),
    ("/v1/completions", {"logprobs": 2, "top_logprobs": 2}, "top_logprobs"),  # a chat field
    ("/v1/chat/completions", {"logprobs": 1}, "logprobs"),
    ("/v1/chat/completions", {"logprobs": "true"}, "logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 2.0}, "top_logprobs"),
    ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),  # without logprobs: true
    ("/v1/chat/completions", {"logprobs": False, "top_logprobs": 0}, "top_logprobs"),
]


def test_bad_logprobs_values_are_400(serve):
    s = serve(GEMMA_CHAT)
    for path, fields, param in BAD:
        body = dict(fields, max_tokens=2)
        body.update({"messages": [{"role": "user", "content": "Hi"}]} if "chat" in path else {"prompt": "Hi"})
        status, err = curl_json(s.url + path, body)
        assert status == 400, (path, fields, status, err)
        assert err["error"]["param"] == param and err["error"]["type"] == "invalid_request_error", (fields, err)
        assert err["error"]["message"] and err["error"]["code"] is None
    # the same through the openai client
    with pytest.raises(openai.BadRequestError) as e:
        client(s).completions.create(model="x", prompt="Hi", max_tokens=2, logprobs=6)
    assert "logprobs" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client(s).chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                                          top_logprobs=3)
    assert "top_logprobs" in str(e.value)
    # the edges are fine
    assert curl_json(s.url + "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "logprobs": 5})[0] == 200
    assert curl_json(s.url + "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "logprobs": None})[0] == 200
    assert curl_json(s.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                      "max_tokens": 2, "logprobs": True, "top_logprobs": 20})[0] == 200
