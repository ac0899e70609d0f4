"""The prefix cache of many prefixes, and /tokenize and /detokenize.

Cache: idle slots keep their caches; a request takes the idle slot whose
whole cache is a prefix of its prompt, else the least recently used one, and
starts from the longest prefix any slot holds. Four system prompts taken in
turn over eight slots reuse their whole prefix every time after the first,
and every answer equals the library's cold run of the request alone.

Token endpoints: llama.cpp's shapes, ids equal to the library's own
tokenizer (the Python bindings), behind the same key."""
import json
import os
import urllib.error
import urllib.request

import openai
from conftest import SLOW, SMALL, bindings, check_against_reference, metric, reference

SYSTEMS = [[1] + [40 + 7 * k + i for i in range(14)] for k in range(4)]  # 15-token "system prompts"
QUESTIONS = [[300 + q, 500 + q] for q in range(3)]


def reused(server):
    with urllib.request.urlopen(server.url + "/metrics") as r:
        return metric(r.read().decode(), "detinfer_prefix_reused_tokens_total")


def test_four_prefixes_over_eight_slots(serve):
    s = serve(SMALL, "--max-sequences", "8")
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=60 * SLOW)
    for rnd, question in enumerate(QUESTIONS):
        for k, system in enumerate(SYSTEMS):
            prompt = system + question
            before = reused(s)
            r = c.completions.create(model="x", prompt=prompt, max_tokens=4,
                                     extra_body={"detinfer": {"logits_digests": True}})
            check_against_reference(r.model_extra["detinfer"], reference(SMALL, tokens=prompt, max_tokens=4))
            if rnd > 0:  # the whole system prompt came from the cache
                assert reused(s) - before >= len(system), (rnd, k, reused(s) - before)


def post(server, path, body, key=None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30 * SLOW) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


TEXTS = ["Hello world", "Le café est très bon", "<s> not a control token", "", "x" * 50]


def test_tokenize_and_detokenize(serve, tmp_path):
    key = tmp_path / "key"
    key.write_text("secret-key-123\n")
    os.chmod(key, 0o600)
    s = serve(SMALL, "--api-key-file", str(key))
    detinfer = bindings()
    with detinfer.Model(SMALL) as m:
        for text in TEXTS:
            for add, special in ((False, False), (True, False), (True, True)):
                status, got = post(s, "/tokenize", {"content": text, "add_special": add, "parse_special": special},
                                   "secret-key-123")
                want = m.tokenize(text, add_bos=add, parse_special=special)
                assert status == 200 and got == {"tokens": want, "count": len(want), "max_model_len": 64}
            status, got = post(s, "/tokenize", {"content": text, "with_pieces": True}, "secret-key-123")
            ids = m.tokenize(text, add_bos=False)
            assert [t["id"] for t in got["tokens"]] == ids
            for t in got["tokens"]:
                piece = m.token_piece_bytes(t["id"])
                assert t["piece"] == (list(piece) if isinstance(t["piece"], list) else piece.decode("utf-8"))
            status, back = post(s, "/detokenize", {"tokens": ids}, "secret-key-123")
            assert status == 200 and back == {"content": m.detokenize(ids), "prompt": m.detokenize(ids)}
        # a text prompt's ids are those of /tokenize with add_special (completions add BOS, parse nothing)
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="secret-key-123", max_retries=0)
        r = c.completions.create(model="x", prompt="Hello world", max_tokens=1,
                                 extra_body={"detinfer": {"prompt_ids": True}})
        assert r.model_extra["detinfer"]["prompt_ids"] == post(s, "/tokenize", {"content": "Hello world",
                                                                               "add_special": True},
                                                               "secret-key-123")[1]["tokens"]
    # the key, and bad input
    assert post(s, "/tokenize", {"content": "x"})[0] == 401
    for path, body, param in (("/tokenize", {"content": 5}, "content"), ("/tokenize", {"text": "x"}, "text"),
                              ("/tokenize", {"content": "x", "add_special": "yes"}, "add_special"),
                              ("/detokenize", {"tokens": [-1]}, "tokens"), ("/detokenize", {"tokens": "x"}, "tokens"),
                              ("/detokenize", {"tokens": [1], "x": 1}, "x")):
        status, err = post(s, path, body, "secret-key-123")
        assert status == 400 and err["error"]["param"] == param, (path, body, err)
    assert post(s, "/tokenize", {"": 1, "content": "x"}, "secret-key-123")[0] == 400  # an empty key
