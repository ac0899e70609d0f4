"""/v1/completions as evaluation harnesses call it (lm-eval's loglikelihood):
`echo` with `logprobs` scores the prompt's tokens, `max_tokens: 0` scores
the prompt alone, and `prompt` may be a list of prompts (strings or token-id
arrays), answered with one choice per prompt and `n` (index = prompt x n +
choice).

References are the library alone, never the server: each prompt token's
log-probability comes from stepping the prompt one token at a time and
calling di_session_logprobs after each (ctypes over the bindings), and a
list's choices from `detinfer run --json` on each prompt. The values
themselves are checked against float64 in tests/check_logprobs.c
(test_prompt_logprobs_*)."""
import ctypes as C
import json
import struct
import threading

import openai
import pytest
import xxhash
from conftest import SLOW, SMALL, bindings, check_against_reference, library_logprobs, reference, token_string
from test_logprobs import curl_json

PROMPTS = [[5, 17, 42, 99, 7, 256, 3], [9, 10, 11], [300, 12, 5, 5, 5, 8, 100, 2, 31, 17, 64]]


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120 * SLOW)


def prompt_logprobs_alone(model, tokens, n_top):
    """[(logprob, {text: logprob of the n most likely and the token})] for
    tokens[1:], each from the prefix stepped alone, one token at a time."""
    detinfer = bindings()
    fn = library_logprobs()
    out = []
    with detinfer.Model(model) as m:
        with m.session(max_sequences=1, context_length=len(tokens),
                       profile=detinfer.Profile.INTEGER) as s:  # the server's default profile
            seq = s.sequence(0)
            for i in range(len(tokens) - 1):
                seq.step([tokens[i]])
                lp = C.c_float()
                ids, lps = (C.c_int32 * max(n_top, 1))(), (C.c_float * max(n_top, 1))()
                assert fn(s._h(), 0, tokens[i + 1], C.byref(lp), n_top, ids, lps) == 0, s._msg()
                top = {}
                for j in range(n_top):
                    top.setdefault(token_string(m.token_piece_bytes(ids[j])), lps[j])
                top.setdefault(token_string(m.token_piece_bytes(tokens[i + 1])), lp.value)
                out.append((lp.value, top))
    return out


def check_echoed_prompt(logprobs, tokens, want):
    """The first len(tokens) entries of an echo's logprobs against the library alone."""
    n = len(tokens)
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert logprobs["token_logprobs"][1:n] == [lp for lp, _ in want]  # exact: %.17g of the float
    assert logprobs["top_logprobs"][1:n] == [top for _, top in want]
    assert logprobs["text_offset"][:n] == sorted(logprobs["text_offset"][:n])


@pytest.mark.parametrize("n_top", [0, 1, 5])
def test_echo_scores_the_prompt_as_the_library_alone(serve, n_top):
    s = serve(SMALL, "--chunk", "4")  # prompts cross chunks
    for tokens in PROMPTS:
        want = prompt_logprobs_alone(SMALL, tokens, n_top)
        for max_tokens in (0, 1, 3):
            status, r = curl_json(s.url + "/v1/completions", {"prompt": tokens, "echo": True, "logprobs": n_top,
                                                               "max_tokens": max_tokens})
            assert status == 200, r
            choice = r["choices"][0]
            lp = choice["logprobs"]
            assert len(lp["tokens"]) == len(tokens) + max_tokens
            check_echoed_prompt(lp, tokens, want)
            d = r["detinfer"]
            assert d["completion_token_ids"] == reference(SMALL, tokens=tokens, max_tokens=3)["tokens"][:max_tokens]
            all_ids = tokens + d["completion_token_ids"]
            assert d["sequence_digest"] == xxhash.xxh3_128_hexdigest(struct.pack("<%di" % len(all_ids), *all_ids))
            assert r["usage"] == {"prompt_tokens": len(tokens), "completion_tokens": max_tokens,
                                  "total_tokens": len(tokens) + max_tokens}
            assert choice["finish_reason"] == "length"
            # negative control: the same check fails against the reference one position off
            with pytest.raises(AssertionError):
                check_echoed_prompt(lp, tokens, want[1:] + want[:1])


def test_echo_text_is_the_prompt_then_the_completion(serve):
    s = serve(SMALL)
    plain = client(s).completions.create(model="x", prompt="Hello world", max_tokens=4)
    echoed = client(s).completions.create(model="x", prompt="Hello world", max_tokens=4, echo=True)
    scored = client(s).completions.create(model="x", prompt="Hello world", max_tokens=0, echo=True, logprobs=0)
    assert echoed.choices[0].text.endswith(plain.choices[0].text)
    assert echoed.choices[0].text == scored.choices[0].text + plain.choices[0].text
    assert "Hello world" in scored.choices[0].text
    assert echoed.model_extra["detinfer"]["sequence_digest"] == plain.model_extra["detinfer"]["sequence_digest"]
    # the offsets index the echoed text: each token's text starts there
    lp = client(s).completions.create(model="x", prompt="Hello world", max_tokens=3, echo=True, logprobs=0)
    text, offsets = lp.choices[0].text, lp.choices[0].logprobs.text_offset
    for tok, at in zip(lp.choices[0].logprobs.tokens, offsets):
        if tok and not tok.startswith("bytes:") and at + len(tok) <= len(text):
            assert text[at:at + len(tok)] == tok, (tok, at, text)


def test_a_list_of_prompts_is_each_prompt_alone(serve):
    s = serve(SMALL, "--max-sequences", "2")  # fewer slots than prompts: they queue within the request
    r = client(s).completions.create(model="x", prompt=PROMPTS, max_tokens=5, echo=True, logprobs=2)
    assert [c.index for c in r.choices] == [0, 1, 2]
    d = r.model_extra["detinfer"]
    for i, tokens in enumerate(PROMPTS):
        facts = d["choices"][i]
        assert facts["prompt_index"] == i and facts["prompt_tokens"] == len(tokens)
        ref = reference(SMALL, tokens=tokens, max_tokens=5)
        check_against_reference(facts, ref)
        check_echoed_prompt(r.choices[i].logprobs.model_dump(), tokens, prompt_logprobs_alone(SMALL, tokens, 2))
        alone = client(s).completions.create(model="x", prompt=tokens, max_tokens=5, echo=True, logprobs=2)
        assert alone.choices[0].text == r.choices[i].text
        assert alone.choices[0].logprobs == r.choices[i].logprobs
    assert r.usage.prompt_tokens == sum(map(len, PROMPTS))
    assert r.usage.completion_tokens == 15
    # strings too, each with BOS like a string prompt alone
    texts = ["The cat sat", "Hello world", "Once upon a time"]
    r = client(s).completions.create(model="x", prompt=texts, max_tokens=6)
    for i, text in enumerate(texts):
        check_against_reference(r.model_extra["detinfer"]["choices"][i], reference(SMALL, prompt=text, max_tokens=6))


def test_a_list_with_n_sampled_indexes_prompt_times_n(serve):
    s = serve(SMALL)
    body = {"prompt": PROMPTS[:2], "max_tokens": 4, "n": 3, "temperature": 0.9, "seed": 11}
    status, r = curl_json(s.url + "/v1/completions", body)
    assert status == 200, r
    assert [c["index"] for c in r["choices"]] == list(range(6))
    for i, c in enumerate(r["choices"]):
        p, k = divmod(i, 3)
        facts = r["detinfer"]["choices"][i]
        assert facts["prompt_index"] == p and facts["seed"] == 11 + k
        status, alone = curl_json(s.url + "/v1/completions", {"prompt": PROMPTS[p], "max_tokens": 4, "n": 3,
                                                               "temperature": 0.9, "seed": 11})
        assert alone["choices"][k]["text"] == c["text"]
        assert alone["detinfer"]["choices"][k]["sequence_digest"] == facts["sequence_digest"]
    # a stream of the same list gives the same texts, chunk by chunk per index
    chunks = list(client(s).completions.create(model="x", stream=True, **body))
    texts = {}
    for ch in chunks:
        for c in ch.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
    assert texts == {i: c["text"] for i, c in enumerate(r["choices"])}


def test_echo_and_lists_in_a_crowd_keep_their_bits(serve):
    """Scored prompts (all-logits steps) batched with ordinary requests: every
    answer equals the same request alone."""
    s = serve(SMALL, "--max-sequences", "4", "--chunk", "3")
    bodies = [{"prompt": PROMPTS, "echo": True, "logprobs": 1, "max_tokens": 1},
              {"prompt": "Once upon a time", "max_tokens": 12},
              {"prompt": PROMPTS[2], "echo": True, "logprobs": 0, "max_tokens": 0},
              {"prompt": ["The cat", "A dog"], "max_tokens": 8, "echo": True}] * 3
    alone = [curl_json(s.url + "/v1/completions", b)[1] for b in bodies[:4]]
    got, errors = [None] * len(bodies), []

    def one(i):
        try:
            got[i] = curl_json(s.url + "/v1/completions", bodies[i])[1]
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120 * SLOW)
    assert not errors, errors
    for i, r in enumerate(got):
        want = alone[i % 4]
        assert [c["text"] for c in r["choices"]] == [c["text"] for c in want["choices"]]
        assert [c["logprobs"] for c in r["choices"]] == [c["logprobs"] for c in want["choices"]]
        strip = lambda d: json.dumps({k: v for k, v in d.items() if k != "fingerprint"}, sort_keys=True)
        assert strip(r["detinfer"]) == strip(want["detinfer"])


def test_bad_lists_and_echo(serve):
    s = serve(SMALL, "--max-prompts", "3")
    bad = [({"prompt": ["a", [1, 2]]}, "all strings or all token-id arrays"),
           ({"prompt": [[1, 2], "a"]}, "all strings or all token-id arrays"),
           ({"prompt": [[1, 2], []]}, "prompt 1"),
           ({"prompt": [[1, 2], [3, 1000000]]}, "prompt 1"),
           ({"prompt": [[1, 2], [3, "x"]]}, "prompt 1"),
           ({"prompt": [["a"]]}, "token ids"),
           ({"prompt": ["a", "b", "c", "d"]}, "--max-prompts"),
           ({"prompt": "hi", "echo": 1}, "'echo' must be true or false"),
           ({"prompt": "hi", "max_tokens": 0}, "echo"),
           ({"prompt": "hi", "max_tokens": 0, "echo": True, "stream": True}, "stream"),
           ({"prompt": [[1] * 40, [2]], "max_tokens": 30}, "context")]
    for body, words in bad:
        status, r = curl_json(s.url + "/v1/completions", body)
        assert status == 400, (body, r)
        assert words in r["error"]["message"], (body, r)
    # within the cap, and chats refuse echo as an unknown field
    assert curl_json(s.url + "/v1/completions", {"prompt": ["a", "b", "c"], "max_tokens": 1})[0] == 200


def test_replay_checks_lists_and_echo(serve, tmp_path):
    """Receipts of a list of prompts with echo recompute to the same answer; a
    tampered prompt digest or echoed text is caught."""
    import subprocess
    from conftest import TOOL
    s = serve(SMALL)
    body = {"prompt": [PROMPTS[0], PROMPTS[1]], "max_tokens": 3, "echo": True, "n": 2, "temperature": 0.8,
            "seed": 3}
    receipt = {"endpoint": "/v1/completions", "request": body, "response": curl_json(s.url + "/v1/completions", body)[1]}

    def replay(r):
        return subprocess.run([TOOL, "replay", "--model", SMALL, "-"], capture_output=True, text=True,
                              input=json.dumps(r), timeout=120 * SLOW)

    out = replay(receipt)
    assert out.returncode == 0 and "matched" in out.stdout, out.stdout + out.stderr
    bad = json.loads(json.dumps(receipt))
    bad["response"]["detinfer"]["choices"][3]["prompt_digest"] = "0" * 32
    out = replay(bad)
    assert out.returncode == 1 and "prompt 1 (choice 3): its digest differs" in out.stdout, out.stdout
    bad = json.loads(json.dumps(receipt))
    bad["response"]["choices"][2]["text"] = "x" + bad["response"]["choices"][2]["text"]
    out = replay(bad)
    assert out.returncode == 1 and "choice 2: the text differs" in out.stdout, out.stdout


def test_models_state_the_defaults_and_the_prompt_cap(serve):
    s = serve(SMALL, "--max-prompts", "7")
    m = client(s).models.list().data[0].model_extra["detinfer"]
    assert m["max_prompts"] == 7
    assert m["defaults"] == {"temperature": 0.0, "top_p": 1.0, "seed": 0}
    # a request that names no temperature is greedy: the library's greedy run alone
    r = client(s).completions.create(model="x", prompt=PROMPTS[0], max_tokens=5)
    check_against_reference(r.model_extra["detinfer"], reference(SMALL, tokens=PROMPTS[0], max_tokens=5))
