"""`detinfer serve` through real clients (the official openai package, curl):
every response's tokens and digests equal the library's run of the same
request alone (`detinfer run --json`)."""
import json
import subprocess

import openai
import pytest
from conftest import SMALL, check_against_reference, metric, real_model, reference

PROMPTS = ["The cat sat on the mat", "Hello world", "a", "Once upon a time, in a land far away",
           "1 2 3 4 5 6 7 8 9 10 11 12"]


def client(server, key="none"):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=120)


def detinfer_of(obj):
    return obj.model_extra["detinfer"]


def curl(*args):
    out = subprocess.run(["curl", "-sS", "--max-time", "60", *args], capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_completions_equal_the_library_alone(serve):
    s = serve(SMALL)
    c = client(s)
    for prompt in PROMPTS:
        for max_tokens in (1, 7, 20):
            r = c.completions.create(model="tok_spm", prompt=prompt, max_tokens=max_tokens,
                                     extra_body={"detinfer": {"logits_digests": True}})
            ref = reference(SMALL, prompt=prompt, max_tokens=max_tokens)
            d = detinfer_of(r)
            check_against_reference(d, ref)
            assert len(d["logits_digests"]) == len(ref["tokens"])
            assert r.choices[0].text == ref["text"]
            assert r.usage.prompt_tokens == len(ref["prompt_tokens"])
            assert r.usage.completion_tokens == len(ref["tokens"])
            assert r.choices[0].finish_reason == ("stop" if ref["stopped"] == "eos" else "length")
            fp = d["fingerprint"]
            assert fp["library_version"] and fp["backend"].startswith("backend=cpu")
            assert fp["profile"] == "integer" and fp["numerics"] == 1  # the server's default --profile
    # The fingerprint's model digest is the file's XXH3-128 (what xxh128sum prints).
    import xxhash
    with open(SMALL, "rb") as f:
        assert fp["model_digest"] == xxhash.xxh3_128_hexdigest(f.read())


def test_token_id_prompt(serve):
    s = serve(SMALL)
    tokens = [1, 17, 42, 99, 300]
    r = client(s).completions.create(model="x", prompt=tokens, max_tokens=12)
    check_against_reference(detinfer_of(r), reference(SMALL, tokens=tokens, max_tokens=12))


def test_stream_equals_non_stream_and_reference(serve):
    s = serve(SMALL)
    c = client(s)
    prompt = PROMPTS[3]
    ref = reference(SMALL, prompt=prompt, max_tokens=20)
    chunks = list(c.completions.create(model="x", prompt=prompt, max_tokens=20, stream=True,
                                       extra_body={"detinfer": {"logits_digests": True}}))
    assert len(chunks) >= 2
    text = "".join(ch.choices[0].text for ch in chunks)
    assert text == ref["text"]
    assert all(ch.choices[0].finish_reason is None for ch in chunks[:-1])
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    check_against_reference(detinfer_of(chunks[-1]), ref)
    # The raw SSE framing ends with [DONE].
    raw = curl(s.url + "/v1/completions", "-H", "Content-Type: application/json",
               "-d", json.dumps({"prompt": prompt, "max_tokens": 5, "stream": True}))
    events = [line for line in raw.split("\n") if line]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"


def test_stop_string(serve):
    s = serve(SMALL)
    prompt = "The cat sat on the mat"
    ref = reference(SMALL, prompt=prompt, max_tokens=20)
    full = ref["text"]
    assert len(full) > 4, "the reference text is too short to cut"
    stop = full[2:4]
    r = client(s).completions.create(model="x", prompt=prompt, max_tokens=20, stop=[stop, "\u2603never"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == full[:full.index(stop)]
    d = detinfer_of(r)
    # Generation stopped at the token that completed the stop string.
    n = len(d["completion_token_ids"])
    assert n < len(ref["tokens"])
    check_against_reference(d, ref, n_tokens=n)
    # Streamed, the text never shows the stop string either.
    chunks = list(client(s).completions.create(model="x", prompt=prompt, max_tokens=20, stop=stop, stream=True))
    assert "".join(ch.choices[0].text for ch in chunks) == full[:full.index(stop)]


def test_models_health_metrics(serve):
    s = serve(SMALL, "--model-name", "small")
    models = client(s).models.list()
    assert [m.id for m in models.data] == ["small"]
    health = json.loads(curl(s.url + "/health"))
    assert health["status"] == "ok"
    client(s).completions.create(model="small", prompt="Hello", max_tokens=3)
    text = curl(s.url + "/metrics")
    assert metric(text, "detinfer_requests_total", {"endpoint": "/v1/completions", "status": "200"}) == 1
    assert metric(text, "detinfer_completion_tokens_total") >= 1
    assert metric(text, "detinfer_step_batch_sequences_count") >= 1
    assert 'detinfer_info{version="' in text and "model_digest=" in text


def test_chat_needs_a_template(serve):
    s = serve(SMALL)
    with pytest.raises(openai.BadRequestError) as e:
        client(s).chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    assert "chat template" in str(e.value) and "--chat-template" in str(e.value)


def test_real_model_end_to_end(serve):
    path = real_model()
    if not path:
        pytest.skip("the real model is not available (tools/scripts/fetch-model.sh)")
    s = serve(path, "--max-sequences", "4", "--context", "256")
    c = client(s)
    prompt = "The capital of France is"
    r = c.completions.create(model="gemma", prompt=prompt, max_tokens=12,
                             extra_body={"detinfer": {"logits_digests": True}})
    ref = reference(path, prompt=prompt, max_tokens=12)
    check_against_reference(detinfer_of(r), ref)
    assert r.choices[0].text == ref["text"]
    # The base model has no chat template: a clear 400 without --chat-template.
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="gemma", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    assert "--chat-template" in str(e.value)


def test_shared_prefix_is_reused_and_changes_nothing(serve):
    s = serve(SMALL, "--max-sequences", "2")
    c = client(s)
    base = [1, 17, 42, 99, 300, 301, 302, 303, 304, 305]
    for tokens, n in [(base, 6), (base + [7, 8], 6), (base[:4] + [9], 9), (base, 12), (base + [7, 8, 9], 4)]:
        r = c.completions.create(model="x", prompt=tokens, max_tokens=n,
                                 extra_body={"detinfer": {"logits_digests": True}})
        check_against_reference(detinfer_of(r), reference(SMALL, tokens=tokens, max_tokens=n))
    import urllib.request
    with urllib.request.urlopen(s.url + "/metrics") as m:
        # Each request runs in slot 0 after the one before: the shared prefixes
        # 10, 4, 4 and 10 came from its cache (the first request had none).
        assert metric(m.read().decode(), "detinfer_prefix_reused_tokens_total") >= 28


def test_an_empty_text_prompt_is_refused_not_bos_alone(serve):
    """Issue 41: "" is a 400 naming the way to ask for BOS alone (its id), as
    `detinfer run --prompt ""` and the bindings refuse it; ids are unchanged."""
    import urllib.error
    import urllib.request
    s = serve(SMALL)
    for body in ({"prompt": ""}, {"prompt": ["hi", ""]}):
        req = urllib.request.Request(s.url + "/v1/completions", data=json.dumps({**body, "max_tokens": 2}).encode(),
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=60)
        assert e.value.code == 400 and "empty" in json.loads(e.value.read())["error"]["message"], body
