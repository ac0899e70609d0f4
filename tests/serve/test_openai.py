"""What OpenAI clients send (issue 25), through the official `openai` client:
content parts, the developer and tool roles and assistant tool calls, n > 1,
the stream's chunk shapes with and without include_usage, system_fingerprint,
/v1/models/{id}, the chat max_tokens default, a seed past 2^63 - 1, and the
end-of-sequence token counted alike in usage, chunks and token ids.

References: the library alone (`detinfer run`, the Python bindings'
tokenize/chat_tokenize and sampling), `detinfer doctor`, the model file's
mtime, Python's json.dumps for tool-call arguments; never the server."""
import json
import os
import subprocess

import openai
import pytest
from conftest import MODELS, SLOW, SMALL, TOOL, bindings, check_against_reference, reference, sampled_reference

GEMMA_CHAT = os.path.join(MODELS, "chat-google-gemma-3-270m-it.gguf")
# every template's markers are control tokens; a context of 512 for chats with tool calls
MARKERS = os.path.join(MODELS, "tok_chat_markers_ctx512.gguf")
PROMPT = [1, 71, 482, 635, 441, 476, 141, 625]


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120 * SLOW)


def chat_ids(model, messages, template):
    """The library's chat prompt (bindings: di_chat_tokenize) of (role, content) pairs."""
    detinfer = bindings()
    with detinfer.Model(model) as m:
        return m.chat_tokenize(messages, template=template)


def prompt_ids(r):
    return r.model_extra["detinfer"]["prompt_ids"]


IDS = {"detinfer": {"prompt_ids": True}}


def test_content_parts_and_developer_role(serve):
    s = serve(GEMMA_CHAT)
    c = client(s)
    plain = c.chat.completions.create(model="x", max_tokens=3, extra_body=IDS, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}])
    want = chat_ids(GEMMA_CHAT, [("system", "Be brief."), ("user", "Hi there")], "gemma")
    assert prompt_ids(plain) == want
    # text parts joined in order, the developer role as system: the same prompt, the same answer
    parts = c.chat.completions.create(model="x", max_tokens=3, extra_body=IDS, messages=[
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]}])
    assert prompt_ids(parts) == want
    assert parts.choices[0].message.content == plain.choices[0].message.content
    assert parts.model_extra["detinfer"]["sequence_digest"] == plain.model_extra["detinfer"]["sequence_digest"]
    # image, audio and file parts: 400 naming the part type
    for part in ({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                 {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}},
                 {"type": "file", "file": {"file_id": "f"}}):
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="x", max_tokens=3, messages=[{"role": "user", "content": [part]}])
        assert part["type"] in str(e.value) and "text-only" in str(e.value)
    # a field a message does not have (the empty name too)
    for extra in ({"": 1}, {"audio": None}, {"tool_calls": []}):
        with pytest.raises(openai.BadRequestError):
            c.chat.completions.create(model="x", max_tokens=3, messages=[{"role": "user", "content": "x", **extra}])
    # null content only on an assistant message with tool_calls
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="x", max_tokens=3, messages=[{"role": "user", "content": None}])
    assert "content" in str(e.value)


def call(arguments, name="f"):
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_messages(arguments="{}"):
    return [{"role": "user", "content": "Q"}, {"role": "assistant", "content": None, "tool_calls": [call(arguments)]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21"}]


# Arguments as clients send them (JSON texts); the template shows them as
# Python's json.dumps(json.loads(text), ensure_ascii=False) writes them.
ARGUMENTS = [r'{"a": 1.5e-7}', r'{"b":[1,2.0,-0.0]}', r'[1e16, 1e15, 0.0001, 1e-5]', r'{"c": "\u00e9\\"}',
             r'{"z": 1, "a": null}', r'{"x":"\u0001\t q\"\n"}', r'123456789.25', r'true']


def test_neutral_chat_fields(serve):
    s = serve(GEMMA_CHAT)
    c = client(s)
    msgs = [{"role": "user", "content": "Hi"}]
    r = c.chat.completions.create(model="x", messages=msgs, max_tokens=2, store=False, metadata={},
                                  service_tier="auto", parallel_tool_calls=True)
    assert r.choices[0].message.role == "assistant"
    for field, value in (("store", True), ("metadata", {"a": "b"}), ("service_tier", "flex"),
                         ("tools", [{"type": "retrieval"}]), ("response_format",
                                                                                     {"type": "xml"})):
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="x", messages=msgs, max_tokens=2, extra_body={field: value})
        assert field in str(e.value)


def test_tool_turns(serve):
    for template in ("chatml", "llama3"):
        s = serve(MARKERS, "--chat-template", template)
        for arguments in ARGUMENTS:
            args = json.dumps(json.loads(arguments), ensure_ascii=False)
            library = [("user", "Q"), ("assistant", ""), ("tool_call", "f\n" + args), ("tool", "21")]
            r = client(s).chat.completions.create(model="x", max_tokens=1, extra_body=IDS,
                                                  messages=tool_messages(arguments))
            assert prompt_ids(r) == chat_ids(MARKERS, library, template), (template, arguments)
        s.stop()
    # a template without tool turns: 400 naming it
    s = serve(GEMMA_CHAT)
    with pytest.raises(openai.BadRequestError) as e:
        client(s).chat.completions.create(model="x", max_tokens=2, messages=tool_messages())
    assert "gemma" in str(e.value) and "no tool turns" in str(e.value)
    # malformed calls and arguments
    for bad in (call("{}", name="bad name"), call("{not json"), call('{"a": 1, "a": 2}')):
        with pytest.raises(openai.BadRequestError):
            client(s).chat.completions.create(model="x", max_tokens=2, messages=[
                {"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [bad]}])


def test_n_sampled_and_greedy(serve):
    s = serve(SMALL, "--max-sequences", "4")
    c = client(s)
    if not c.models.list().data[0].model_extra["detinfer"]["sampling"]:
        pytest.skip("this library does not sample")
    r = c.completions.create(model="x", prompt=PROMPT, max_tokens=12, n=3, temperature=0.9, seed=41,
                             logprobs=2, extra_body={"detinfer": {"logits_digests": True}})
    d = r.model_extra["detinfer"]
    assert [ch.index for ch in r.choices] == [0, 1, 2] and len(d["choices"]) == 3
    for i, facts in enumerate(d["choices"]):
        ref = sampled_reference(SMALL, PROMPT, 12, temperature=0.9, seed=41 + i)
        assert facts["index"] == i and facts["seed"] == 41 + i
        assert facts["completion_token_ids"] == ref["tokens"] and facts["sequence_digest"] == ref["sequence_digest"]
        assert facts["logits_digests"] == ref["digests"]
        assert len(r.choices[i].logprobs.tokens) == len(ref["tokens"])  # logprobs per choice
    assert d["choices"][0]["completion_token_ids"] != d["choices"][1]["completion_token_ids"]
    assert r.usage.completion_tokens == sum(len(f["completion_token_ids"]) for f in d["choices"])
    # streamed: the choices' chunks interleave, each with its index, and add up to the same
    chunks = list(c.completions.create(model="x", prompt=PROMPT, max_tokens=12, n=3, temperature=0.9, seed=41,
                                       stream=True))
    for i in range(3):
        mine = [ch for ch in chunks if ch.choices and ch.choices[0].index == i]
        assert "".join(ch.choices[0].text for ch in mine) == r.choices[i].text
        assert mine[-1].model_extra["detinfer"]["completion_token_ids"] == d["choices"][i]["completion_token_ids"]
    assert {ch.choices[0].index for ch in chunks[:6]} == {0, 1, 2}  # interleaved, not one after another
    # greedy n > 1: n equal choices, each the library's greedy run
    g = c.completions.create(model="x", prompt=PROMPT, max_tokens=8, n=4)
    ref = reference(SMALL, tokens=PROMPT, max_tokens=8)
    assert [ch.index for ch in g.choices] == [0, 1, 2, 3]
    assert len({ch.text for ch in g.choices}) == 1
    for facts in g.model_extra["detinfer"]["choices"]:
        check_against_reference({**g.model_extra["detinfer"], **facts}, ref)
        assert facts["seed"] is None
    # over --max-n: 400 naming the cap
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="x", prompt=PROMPT, max_tokens=2, n=9)
    assert "--max-n" in str(e.value)


def check_envelope(chunk, object_name, fingerprint):
    assert isinstance(chunk["id"], str) and chunk["object"] == object_name
    assert isinstance(chunk["created"], int) and isinstance(chunk["model"], str)
    assert chunk["system_fingerprint"] == fingerprint


def raw_stream(server, path, body):
    """The SSE events of a stream, as JSON objects (the client's types accept
    any extra field: every field is checked here by hand)."""
    import urllib.request
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60 * SLOW) as resp:
        lines = [ln for ln in resp.read().decode().split("\n") if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(ln[6:]) for ln in lines[:-1]]


def doctor_fingerprint(profile="integer"):  # the server's and doctor's default
    out = subprocess.run([TOOL, "doctor", "--json", "--profile", profile], capture_output=True, text=True,
                         timeout=60 * SLOW)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["fingerprint"]


def test_chunk_shapes_and_include_usage(serve):
    s = serve(GEMMA_CHAT)
    fp = doctor_fingerprint()
    msgs = [{"role": "user", "content": "Hi"}]
    for include in (False, True):
        body = {"model": "x", "messages": msgs, "max_tokens": 6, "stream": True}
        if include:
            body["stream_options"] = {"include_usage": True}
        events = raw_stream(s, "/v1/chat/completions", body)
        for ev in events:
            check_envelope(ev, "chat.completion.chunk", fp)
            assert set(ev) <= {"id", "object", "created", "model", "system_fingerprint", "choices", "usage",
                               "detinfer"}
        usage_chunks = [ev for ev in events if "usage" in ev]
        if include:  # one final chunk: no choices, the usage
            assert usage_chunks == [events[-1]] and events[-1]["choices"] == []
            u = events[-1]["usage"]
            assert all(isinstance(u[k], int) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
            assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
            events = events[:-1]
        else:
            assert usage_chunks == []
        for ev in events:
            (ch,) = ev["choices"]
            assert set(ch) == {"index", "delta", "logprobs", "finish_reason"} and ch["index"] == 0
            assert isinstance(ch["delta"], dict) and ch["logprobs"] is None
        # the role in the first delta only; a last chunk with finish_reason and the detinfer object
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert all("role" not in ev["choices"][0]["delta"] for ev in events[1:])
        assert all(isinstance(ev["choices"][0]["delta"]["content"], str) for ev in events)
        assert [ev["choices"][0]["finish_reason"] for ev in events[:-1]] == [None] * (len(events) - 1)
        last = events[-1]
        assert last["choices"][0]["finish_reason"] in ("stop", "length") and "detinfer" in last
        ids = last["detinfer"]["completion_token_ids"]
        assert len(events) - 2 == len(ids)  # one chunk per generated token, between the role and the finish
        if include:
            assert u["completion_tokens"] == len(ids)
    # the client reads the same stream
    chunks = list(client(s).chat.completions.create(model="x", messages=msgs, max_tokens=6, stream=True,
                                                    stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(ch.system_fingerprint == fp for ch in chunks)


def test_fingerprint_models_and_defaults(serve):
    s = serve(GEMMA_CHAT, "--max-tokens-default", "5")
    c = client(s)
    r = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}])
    assert r.system_fingerprint == doctor_fingerprint()
    # without max_tokens: --max-tokens-default, not the cap
    assert r.usage.completion_tokens == 5 or r.choices[0].finish_reason == "stop"
    assert r.model_extra["detinfer"]["sampling_params"]["max_tokens"] == 5
    m = c.models.retrieve("chat-google-gemma-3-270m-it")
    assert m.id == "chat-google-gemma-3-270m-it" and m.object == "model"
    assert m.created == int(os.stat(GEMMA_CHAT).st_mtime)
    assert c.models.list().data[0].created == m.created
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("no-such-model")
    # a seed past 2^63 - 1: 400 naming the range
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="x", prompt="Hi", max_tokens=2, seed=2 ** 63)
    assert "[-2^63, 2^63 - 1]" in str(e.value) and "seed" in str(e.value)
    # --profile portable has its own fingerprint
    s2 = serve(SMALL, "--profile", "portable")
    r2 = client(s2).completions.create(model="x", prompt="Hi", max_tokens=1)
    assert r2.system_fingerprint == doctor_fingerprint("portable") != r.system_fingerprint


def test_end_of_sequence_counts_everywhere(serve):
    """A generation that ends at EOS: the EOS token is in completion_token_ids,
    in usage, and has its chunk in the stream (with empty text)."""
    detinfer = bindings()
    prompt, case = [1, 5], None
    with detinfer.Model(SMALL) as m:  # the library finds a seed whose sampling reaches EOS
        eos = m.eos
        with m.session(max_sequences=1, context_length=64) as sess:
            for seed in range(200):
                seq = sess.sequence(0)
                seq.reset()
                seq.set_sampling(detinfer.SamplingParams(temperature=1.5, seed=seed))
                toks = [t.token for t in seq.generate(prompt, max_new=30)]
                if toks[-1] == eos:
                    case = dict(temperature=1.5, seed=seed)
                    break
    assert case, "no seed reaches EOS"
    ref = sampled_reference(SMALL, prompt, 30, **case)
    assert ref["tokens"][-1] == eos
    s = serve(SMALL)
    r = client(s).completions.create(model="x", prompt=prompt, max_tokens=30, **case)
    d = r.model_extra["detinfer"]
    assert r.choices[0].finish_reason == "stop"
    assert d["completion_token_ids"] == ref["tokens"] and d["sequence_digest"] == ref["sequence_digest"]
    assert r.usage.completion_tokens == len(ref["tokens"])
    events = raw_stream(s, "/v1/completions", {"prompt": prompt, "max_tokens": 30, "stream": True,
                                               "stream_options": {"include_usage": True}, **case})
    tokens, finish, usage = events[:-2], events[-2], events[-1]
    assert len(tokens) == len(ref["tokens"]) == usage["usage"]["completion_tokens"]  # EOS's chunk included
    assert tokens[-1]["choices"][0]["text"] == "" and finish["choices"][0]["finish_reason"] == "stop"
    assert "".join(ev["choices"][0]["text"] for ev in tokens) == r.choices[0].text
    assert finish["detinfer"]["completion_token_ids"] == ref["tokens"]
