"""The tokenizer endpoints in vLLM's shapes, beside llama.cpp's: what
lm-evaluation-harness's tokenizer_backend=remote reads (lm_eval.utils.RemoteTokenizer:
GET /tokenizer_info, POST /tokenize {"prompt", "add_special_tokens"}, POST
/detokenize {"tokens"} answered {"prompt"}).

References: the library's own tokenizer through the Python bindings, and
Gemma 3's published special tokens (<bos> = 2, <eos> = 1); never the server."""
import json
import os
import urllib.error
import urllib.request

import openai
import pytest
from conftest import MODELS, SLOW, SMALL, bindings, real_model

GEMMA_CHAT = os.path.join(MODELS, "chat-google-gemma-3-270m-it.gguf")
TEXTS = ["Hello world", "Le café est très bon", "<s> a control token's text", "", " two  spaces", "x" * 50]


def call(server, path, body=None, key=None, method=None, headers=()):
    h = {"Content-Type": "application/json", **dict(headers)}
    if key:
        h["Authorization"] = "Bearer " + key
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30 * SLOW) as r:
            return r.status, json.load(r), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e), dict(e.headers)


def tokenize(server, body):
    status, got, _ = call(server, "/tokenize", body)
    assert status == 200, (body, got)
    return got


def test_tokenizer_info_of_the_real_model(serve):
    path = real_model()
    if not path:
        pytest.skip("the real model (tools/scripts/fetch-model.sh) is not available")
    s = serve(path, "--context", "512")
    status, info, _ = call(s, "/tokenizer_info")
    assert status == 200
    # Gemma 3's tokenizer_config.json: bos "<bos>" (2), eos "<eos>" (1); a base model: no chat template
    assert info["bos_token"] == "<bos>" and info["bos_token_id"] == 2
    assert info["eos_token"] == "<eos>" and info["eos_token_id"] == 1
    assert info["pad_token"] is None and info["add_bos_token"] is True
    assert info["model_max_length"] == 512
    assert info["chat_template"] is None and info["chat_template_name"] is None
    # lm-eval's eos_token_id is encode(eos_token)[0], with add_special_tokens false
    assert tokenize(s, {"prompt": info["eos_token"], "add_special_tokens": False})["tokens"] == [1]
    assert tokenize(s, {"prompt": info["bos_token"], "add_special_tokens": False})["tokens"] == [2]
    # and a text round trip, against the library's tokenizer
    detinfer = bindings()
    with detinfer.Model(path) as m:
        for text in ["The capital of France is Paris.", "3 + 4 = 7", "naïve café"]:
            got = tokenize(s, {"prompt": text, "add_special_tokens": False})
            assert got == {"tokens": m.tokenize(text, add_bos=False, parse_special=True), "count": len(got["tokens"]),
                           "max_model_len": 512}
            status, back, _ = call(s, "/detokenize", {"tokens": got["tokens"]})
            assert status == 200 and back == {"prompt": text, "content": text}


def test_tokenizer_info_against_the_library(serve):
    detinfer = bindings()
    for model, args in ((SMALL, ()), (GEMMA_CHAT, ()), (GEMMA_CHAT, ("--chat-template", "chatml"))):
        s = serve(model, *args)
        status, info, _ = call(s, "/tokenizer_info")
        assert status == 200
        with detinfer.Model(model) as m:
            for name, want in (("bos", m.bos), ("eos", m.eos)):
                assert info[name + "_token_id"] == want
                if info[name + "_token"] is not None:  # its text names exactly that token
                    assert m.token_lookup(info[name + "_token"]) == want
                    assert m.tokenize(info[name + "_token"], add_bos=False, parse_special=True) == [want]
            assert info["add_bos_token"] == (m.tokenize("", add_bos=True)[:1] == [m.bos])
            assert info["model_max_length"] == min(2048, m.get_int(detinfer.ModelKey.N_CTX_TRAIN))  # --context
            if model == GEMMA_CHAT and not args:  # the file's own Jinja text, what vLLM's clients render
                assert info["chat_template"] == m.meta_string("tokenizer.chat_template")
                assert "start_of_turn" in info["chat_template"] and info["chat_template_name"] == "gemma"
            else:  # none, or the server formats chats with another template than the file's
                assert info["chat_template"] is None
            assert info["chat_template_name"] == (args[1] if args else m.chat_template)
        s.stop()


def test_tokenize_vllm_shape_and_llama_cpp_shape(serve):
    s = serve(SMALL)
    detinfer = bindings()
    with detinfer.Model(SMALL) as m:
        context = m.get_int(detinfer.ModelKey.N_CTX_TRAIN)
        for text in TEXTS:
            # vLLM's: add_special_tokens defaults to true, special tokens' texts are parsed (HF tokenizers)
            for body, add in (({"prompt": text}, True), ({"prompt": text, "add_special_tokens": True}, True),
                              ({"prompt": text, "add_special_tokens": False}, False),
                              ({"prompt": text, "add_special_tokens": None}, True)):
                want = m.tokenize(text, add_bos=add, parse_special=True)
                assert tokenize(s, body) == {"tokens": want, "count": len(want), "max_model_len": context}, body
            want = m.tokenize(text, add_bos=True, parse_special=False)
            assert tokenize(s, {"prompt": text, "parse_special": False})["tokens"] == want
            # llama.cpp's: no BOS, nothing parsed, unless asked; the same answer's shape
            for body, add, special in (({"content": text}, False, False),
                                       ({"content": text, "add_special_tokens": True}, True, False),
                                       ({"content": text, "add_special": True, "parse_special": True}, True, True)):
                want = m.tokenize(text, add_bos=add, parse_special=special)
                assert tokenize(s, body) == {"tokens": want, "count": len(want), "max_model_len": context}, body
            got = tokenize(s, {"prompt": text, "with_pieces": True, "add_special_tokens": False})
            assert [t["id"] for t in got["tokens"]] == m.tokenize(text, add_bos=False, parse_special=True)
            # /detokenize answers both clients' field
            ids = m.tokenize(text, add_bos=False)
            status, back, _ = call(s, "/detokenize", {"tokens": ids})
            assert status == 200 and back == {"content": m.detokenize(ids), "prompt": m.detokenize(ids)}
        # the control token's text: a token with "prompt", text with "content"
        assert tokenize(s, {"prompt": "<s>", "add_special_tokens": False})["tokens"] == [m.bos]
        assert m.bos not in tokenize(s, {"content": "<s>"})["tokens"]
        # a text prompt of /v1/completions is /tokenize's "prompt" with its BOS (a text without special tokens)
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=60 * SLOW)
        r = c.completions.create(model="x", prompt="Hello world", max_tokens=1,
                                 extra_body={"detinfer": {"prompt_ids": True}})
        assert r.model_extra["detinfer"]["prompt_ids"] == tokenize(s, {"prompt": "Hello world"})["tokens"]


def test_bad_input(serve, tmp_path):
    key = tmp_path / "key"
    key.write_text("secret-key-123\n")
    os.chmod(key, 0o600)
    s = serve(SMALL, "--api-key-file", str(key))
    k = "secret-key-123"
    with bindings().Model(SMALL) as m:
        n_vocab = m.get_int(bindings().ModelKey.N_VOCAB)
        context = m.get_int(bindings().ModelKey.N_CTX_TRAIN)
    cases = [
        ("/tokenize", {"content": "a", "prompt": "b"}, "prompt", "not both"),
        ("/tokenize", {"prompt": 5}, "prompt", "must be a string"),
        ("/tokenize", {"prompt": ["a", "b"]}, "prompt", "must be a string"),
        ("/tokenize", {"prompt": None}, "prompt", "must be a string"),
        ("/tokenize", {"prompt": "a\u0000b"}, None, "u0000"),  # the JSON parser refuses NUL
        ("/tokenize", {}, "content", "'prompt'"),
        ("/tokenize", {"prompt": "x", "add_special_tokens": "yes"}, "add_special_tokens", "true or false"),
        ("/tokenize", {"prompt": "x", "add_special_tokens": 1}, "add_special_tokens", "true or false"),
        ("/tokenize", {"prompt": "x", "add_special": True, "add_special_tokens": True}, "add_special_tokens",
         "not both"),
        ("/tokenize", {"prompt": "x", "parse_special": "no"}, "parse_special", "true or false"),
        ("/tokenize", {"prompt": "x", "messages": []}, "messages", "unknown field"),
        ("/tokenize", {"prompt": "x" * (context * 1000)}, "prompt", ""),
        ("/detokenize", {"tokens": [n_vocab]}, "tokens", "not an id"),
        ("/detokenize", {"tokens": [-1]}, "tokens", "not an id"),
        ("/detokenize", {"tokens": [1.0]}, "tokens", "not an id"),
        ("/detokenize", {"tokens": [True]}, "tokens", "not an id"),
        ("/detokenize", {"tokens": [2 ** 40]}, "tokens", "not an id"),
        ("/detokenize", {"tokens": "1 2"}, "tokens", "array"),
        ("/detokenize", {"tokens": [[1]]}, "tokens", "not an id"),
        ("/detokenize", {"tokens": [1] * (context + 1)}, "tokens", "at most"),
        ("/detokenize", {}, "tokens", "array"),
        ("/detokenize", {"tokens": [1], "prompt": "x"}, "prompt", "unknown field"),
    ]
    for path, body, param, words in cases:
        status, err, _ = call(s, path, body, k)
        assert status == 400 and err["error"]["param"] == param and words in err["error"]["message"], \
            (path, body, err)
    # /tokenizer_info: a GET behind the key, the Host and the Origin checks, as every route
    assert call(s, "/tokenizer_info")[0] == 401
    assert call(s, "/tokenizer_info", key=k)[0] == 200
    status, err, headers = call(s, "/tokenizer_info", {}, k)  # a POST
    assert status == 405 and headers.get("Allow") == "GET", err
    assert call(s, "/tokenizer_info", key=k, headers={"Host": "evil.example"})[0] == 421
    assert call(s, "/tokenizer_info", key=k, headers={"Origin": "https://evil.example"})[0] == 403
    assert call(s, "/tokenizer_info/x", key=k)[0] == 404
    # the server still serves
    assert call(s, "/tokenize", {"prompt": "ok"}, k)[0] == 200
