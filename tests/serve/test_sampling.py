"""Sampled requests: seeded, per request, and equal to the library's run of
the same request alone (through the Python bindings), whatever else the
server batches with them."""
import threading

import openai
import pytest
from conftest import SLOW, SMALL, check_against_reference, reference, sampled_reference

PROMPT = [1, 71, 482, 635, 441, 476, 141, 625]
CASES = [
    dict(temperature=0.8, seed=7),
    dict(temperature=1.0, top_p=0.9, seed=12345),
    dict(temperature=1.5, top_k=20, seed=3),
    dict(temperature=0.7, min_p=0.05, presence_penalty=0.5, frequency_penalty=0.3, seed=99),
    dict(temperature=0.0, frequency_penalty=1.0, seed=1),  # greedy after penalties
]


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120 * SLOW)


def request(c, case, max_tokens=24):
    extra = {"detinfer": {"logits_digests": True}}
    for k in ("top_k", "min_p"):
        if k in case:
            extra[k] = case[k]
    std = {k: v for k, v in case.items() if k not in ("top_k", "min_p")}
    r = c.completions.create(model="x", prompt=PROMPT, max_tokens=max_tokens, extra_body=extra, **std)
    return r.model_extra["detinfer"]


def test_sampled_requests_equal_the_library_alone(serve):
    s = serve(SMALL, "--max-sequences", "8")
    c = client(s)
    if not c.models.list().data[0].model_extra["detinfer"]["sampling"]:
        pytest.skip("this library does not sample")
    # Each case many times at once, interleaved with greedy traffic.
    results = {i: [] for i in range(len(CASES))}
    errors = []

    def worker(i):
        try:
            with client(s) as c_i:  # one connection pool per client thread (--max-connections-per-ip)
                for _ in range(4):
                    results[i].append(request(c_i, CASES[i]))
                    c_i.completions.create(model="x", prompt="Hello world", max_tokens=5)
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i % len(CASES),)) for i in range(2 * len(CASES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120 * SLOW)
    assert not errors, errors
    greedy = reference(SMALL, tokens=PROMPT, max_tokens=24)
    for i, case in enumerate(CASES):
        ref = sampled_reference(SMALL, PROMPT, 24, **case)
        assert len(results[i]) == 8
        for d in results[i]:
            assert d["sampling"] == "sampled"
            assert d["completion_token_ids"] == ref["tokens"], case
            assert d["logits_digests"] == ref["digests"], case
            assert d["sequence_digest"] == ref["sequence_digest"], case
        if case["temperature"] > 0:  # sampling really happened
            assert ref["tokens"] != greedy["tokens"], case
    # Another seed gives another generation.
    assert request(c, dict(temperature=1.0, seed=8))["completion_token_ids"] != results[0][0]["completion_token_ids"]
    # Greedy stays what `detinfer run` gives.
    check_against_reference(request(c, dict(temperature=0)), greedy)
