"""/v1/chat/completions: the messages formatted with the model's chat template
(or --chat-template NAME), generation stopping at the end of the turn, and
every response equal to the library's run alone of the formatted prompt.

The expected prompt texts are written out here by hand from the templates'
published formats; they are tokenized (special tokens parsed) through the
Python bindings, and the reference generation is `detinfer run --tokens`."""
import os

import openai
import pytest
from conftest import MODELS, SLOW, bindings, check_against_reference, real_model, reference

GEMMA_CHAT = os.path.join(MODELS, "chat-google-gemma-3-270m-it.gguf")
QWEN_CHAT = os.path.join(MODELS, "chat-Qwen-Qwen2.5-7B-Instruct.gguf")


def tokenize_special(model_path, text):
    """Token ids of text with BOS and special tokens parsed, from the library
    through the bindings (not the server)."""
    detinfer = bindings()
    with detinfer.Model(model_path) as m:
        return m.tokenize(text, add_bos=True, parse_special=True)


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120 * SLOW)


def test_chat_with_the_models_template(serve):
    s = serve(GEMMA_CHAT)
    # The synthetic vocabulary has no special tokens, so the markers are
    # spelled out in pieces: one short message fits the 64-token context.
    messages = [{"role": "user", "content": "Hi"}]
    text = "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    ids = tokenize_special(GEMMA_CHAT, text)
    ref = reference(GEMMA_CHAT, tokens=ids, max_tokens=10)
    r = client(s).chat.completions.create(model="x", messages=messages, max_tokens=10,
                                          extra_body={"detinfer": {"logits_digests": True}})
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    check_against_reference(r.model_extra["detinfer"], ref)
    assert r.choices[0].message.content == ref["text"]
    # Streamed, the same.
    chunks = list(client(s).chat.completions.create(model="x", messages=messages, max_tokens=10, stream=True))
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == ref["text"]
    check_against_reference(chunks[-1].model_extra["detinfer"], ref)


def test_chat_template_option_overrides(serve):
    # The Qwen file carries a ChatML template; --chat-template gemma replaces it.
    s = serve(QWEN_CHAT, "--chat-template", "gemma")
    text = "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    ref = reference(QWEN_CHAT, tokens=tokenize_special(QWEN_CHAT, text), max_tokens=6)
    r = client(s).chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], max_tokens=6)
    check_against_reference(r.model_extra["detinfer"], ref)
    s2 = serve(QWEN_CHAT)
    text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    ref = reference(QWEN_CHAT, tokens=tokenize_special(QWEN_CHAT, text), max_tokens=6)
    r = client(s2).chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], max_tokens=6)
    check_against_reference(r.model_extra["detinfer"], ref)
    with pytest.raises(openai.BadRequestError) as e:
        client(s2).chat.completions.create(model="x", messages=[{"role": "wizard", "content": "Hi"}], max_tokens=6)
    assert "wizard" in str(e.value) or "role" in str(e.value)


def test_real_model_chat(serve):
    path = real_model()
    if not path:
        pytest.skip("the real model is not available")
    # The base model has no template: a clear 400 (test_api.py); with --chat-template gemma it chats.
    s = serve(path, "--chat-template", "gemma", "--max-sequences", "2", "--context", "256")
    text = "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
    ids = tokenize_special(path, text)
    assert 105 in ids  # <start_of_turn> is one token, not pieces of text
    ref = reference(path, tokens=ids, max_tokens=24)
    r = client(s).chat.completions.create(
        model="x", messages=[{"role": "user", "content": "What is the capital of France?"}], max_tokens=24)
    d = r.model_extra["detinfer"]
    n = len(d["completion_token_ids"])
    # It stops at the end of the turn (<end_of_turn>, which the reference runs past) or at max_tokens.
    check_against_reference(d, ref, n_tokens=n)
    if r.choices[0].finish_reason == "stop":
        assert d["completion_token_ids"][-1] in (106, 1)
    assert r.choices[0].message.content == ref["text"] or r.choices[0].finish_reason == "stop"


def test_unknown_chat_template_is_a_usage_error():
    import subprocess
    from conftest import TOOL
    out = subprocess.run([TOOL, "serve", "--model", GEMMA_CHAT, "--port", "0", "--chat-template", "nonesuch"],
                         capture_output=True, text=True, timeout=60 * SLOW)
    assert out.returncode == 2 and "--chat-template nonesuch" in out.stderr, out.stderr


def test_chat_default_max_tokens_fills_the_context(serve):
    s = serve(GEMMA_CHAT)
    r = client(s).chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}])
    # the small model's context is 64: the prompt and all generated tokens but the last
    assert r.usage.total_tokens == 65 or r.choices[0].finish_reason == "stop"
