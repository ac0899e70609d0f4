"""POST /v1/responses, the core of OpenAI's Responses API (docs/SERVING.md,
"The Responses API"), through the official `openai` client: responses.create
with a string, messages and instructions; responses.stream and
create(stream=True) giving the non-streamed text; responses.parse with a
pydantic model (a JSON schema); max_output_tokens giving an incomplete
response; and each refused field a 400 naming it.

References: the library alone (the bindings' chat_tokenize for the prompt,
`detinfer run --tokens` for the tokens and digests, the bindings under a
grammar for structured output), and the same request through
/v1/chat/completions; a different input is the negative control."""
import json
import os
import urllib.request
from typing import Literal

import openai
import pytest
from conftest import MODELS, SLOW, bindings, check_against_reference, metric, real_model, reference
from pydantic import BaseModel, Field

# every template's markers are control tokens, a context of 512: short chat prompts
MARKERS = os.path.join(MODELS, "tok_chat_markers_ctx512.gguf")
DIGESTS = {"detinfer": {"logits_digests": True, "prompt_ids": True}}


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120 * SLOW)


def serve_markers(serve):
    return serve(MARKERS, "--chat-template", "gemma")


def chat_ids(messages):
    """The library's gemma chat prompt of (role, content) pairs (di_chat_tokenize)."""
    detinfer = bindings()
    with detinfer.Model(MARKERS) as m:
        return m.chat_tokenize(messages, template="gemma")


def end_of_turn():
    detinfer = bindings()
    with detinfer.Model(MARKERS) as m:
        return m.token_lookup("<end_of_turn>")


def check_library(d, messages, max_tokens):
    """The response's detinfer object d against the library run alone of the
    same chat prompt: the prompt ids, then the tokens and digests (the same
    ones, or a prefix ending at the end of the turn)."""
    ids = chat_ids(messages)
    assert d["prompt_ids"] == ids
    ref = reference(MARKERS, tokens=ids, max_tokens=max_tokens)
    out = d["completion_token_ids"]
    if len(out) < max_tokens:  # ended at the end of the turn
        assert out[-1] == end_of_turn()
        check_against_reference(d, ref, n_tokens=len(out))
    else:
        check_against_reference(d, ref)
    return ref


def same_answer(resp, chat):
    """A Response and a chat completion of the same request: equal text, token ids and digests."""
    a, b = resp.model_extra["detinfer"], chat.model_extra["detinfer"]
    assert resp.output_text == chat.choices[0].message.content
    for key in ("completion_token_ids", "sequence_digest", "prompt_digest", "prompt_tokens", "logits_digests",
                "grammar_digest", "sampling_params", "fingerprint"):
        assert a.get(key) == b.get(key), key


def check_shape(r, status):
    assert r.object == "response" and r.id.startswith("resp_") and r.status == status
    assert len(r.output) == 1
    item = r.output[0]
    assert item.type == "message" and item.role == "assistant" and item.status == status
    assert item.id.startswith("msg_")
    assert [p.type for p in item.content] == ["output_text"] and item.content[0].annotations == []
    assert r.output_text == item.content[0].text
    d = r.model_extra["detinfer"]
    assert r.usage.input_tokens == d["prompt_tokens"]
    assert r.usage.output_tokens == len(d["completion_token_ids"])
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.input_tokens_details.cached_tokens == 0
    assert r.usage.output_tokens_details.reasoning_tokens == 0
    if status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    else:
        assert r.incomplete_details is None
    assert r.error is None and r.tools == [] and r.store is False


def test_string_input_equals_the_chat_and_the_library(serve):
    s = serve_markers(serve)
    c = client(s)
    r = c.responses.create(model="x", input="Hi there", max_output_tokens=12, extra_body=DIGESTS)
    d = r.model_extra["detinfer"]
    check_shape(r, "incomplete" if len(d["completion_token_ids"]) == 12 else "completed")
    assert r.temperature == 0 and r.top_p == 1 and r.max_output_tokens == 12
    assert r.model == os.path.basename(s.model)[:-len(".gguf")]
    assert d["sampling"] == "greedy" and d["chat_template"] == "gemma"
    check_library(d, [("user", "Hi there")], 12)
    chat = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi there"}], max_tokens=12,
                                     extra_body=DIGESTS)
    same_answer(r, chat)
    # the negative control: another input gives another prompt and sequence digest
    other = c.responses.create(model="x", input="Hi here", max_output_tokens=12, extra_body=DIGESTS)
    assert other.model_extra["detinfer"]["prompt_digest"] != d["prompt_digest"]
    assert other.model_extra["detinfer"]["sequence_digest"] != d["sequence_digest"]
    # twice: the same bits (but a new id)
    again = c.responses.create(model="x", input="Hi there", max_output_tokens=12, extra_body=DIGESTS)
    assert again.model_extra["detinfer"] == d and again.output_text == r.output_text and again.id != r.id


def test_messages_and_instructions(serve):
    s = serve_markers(serve)
    c = client(s)
    # instructions are a system turn first; developer is system; parts are joined in order; an
    # earlier response's output item (id, status, output_text) may be sent back as it came
    r = c.responses.create(model="x", max_output_tokens=8, extra_body=DIGESTS, instructions="Be brief.", input=[
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"}, {"type": "input_text", "text": " you"}]},
        {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "Hello", "annotations": []}]},
        {"role": "user", "content": "Why?"}])
    messages = [("system", "Be brief."), ("user", "Hi you"), ("assistant", "Hello"), ("user", "Why?")]
    check_library(r.model_extra["detinfer"], messages, 8)
    assert r.instructions == "Be brief."
    chat = c.chat.completions.create(model="x", max_tokens=8, extra_body=DIGESTS,
                                     messages=[{"role": k, "content": v} for k, v in messages])
    same_answer(r, chat)
    # developer = system: the same answer
    dev = c.responses.create(model="x", max_output_tokens=8, extra_body=DIGESTS, input=[
        {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi you"},
        {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Why?"}])
    assert dev.model_extra["detinfer"]["sequence_digest"] == r.model_extra["detinfer"]["sequence_digest"]
    # the negative control: without the instructions, another prompt
    bare = c.responses.create(model="x", max_output_tokens=8, extra_body=DIGESTS, input=[
        {"role": "user", "content": "Hi you"}, {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Why?"}])
    assert bare.model_extra["detinfer"]["prompt_digest"] != r.model_extra["detinfer"]["prompt_digest"]
    # metadata and user are echoed; store false, tools [] and include [] are accepted, and the
    # encrypted reasoning inspect-ai asks for (there is none): the same answer
    m = c.responses.create(model="x", input="Hi", max_output_tokens=4, metadata={"run": "1"}, user="u",
                           store=False, tools=[], include=[], parallel_tool_calls=False, extra_body=DIGESTS)
    assert m.metadata == {"run": "1"} and m.user == "u" and m.parallel_tool_calls is False
    inspect = c.responses.create(model="x", input=[{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
                                 max_output_tokens=4, store=False, include=["reasoning.encrypted_content"],
                                 extra_body=DIGESTS)
    assert inspect.model_extra["detinfer"] == m.model_extra["detinfer"]


def events_of(stream):
    return [e for e in stream]


def test_streams_give_the_same_text(serve):
    s = serve_markers(serve)
    c = client(s)
    body = dict(model="x", input="Tell me", max_output_tokens=16, extra_body=DIGESTS)
    whole = c.responses.create(**body)
    with c.responses.stream(**body) as stream:
        events = events_of(stream)
        final = stream.get_final_response() if whole.status == "completed" else None
    kinds = [e.type for e in events]
    last = "response.completed" if whole.status == "completed" else "response.incomplete"
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added"] + ["response.output_text.delta"] * len(deltas) + [
        "response.output_text.done", "response.content_part.done", "response.output_item.done", last], kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert all(e.delta for e in deltas)
    assert "".join(e.delta for e in deltas) == whole.output_text
    assert events[-4].text == whole.output_text
    done = events[-1].response
    assert done.status == whole.status and done.output_text == whole.output_text
    assert done.model_extra["detinfer"] == whole.model_extra["detinfer"]
    assert done.usage == whole.usage and done.id == events[0].response.id
    if final is not None:
        assert final.output_text == whole.output_text
    # create(stream=True): the same events
    raw = list(c.responses.create(stream=True, **body))
    assert [e.type for e in raw] == kinds
    assert "".join(e.delta for e in raw if e.type == "response.output_text.delta") == whole.output_text
    assert raw[-1].response.model_extra["detinfer"] == whole.model_extra["detinfer"]


def test_max_output_tokens_gives_incomplete(serve):
    s = serve_markers(serve)
    c = client(s)
    r = c.responses.create(model="x", input="Hi", max_output_tokens=2, extra_body=DIGESTS)
    assert len(r.model_extra["detinfer"]["completion_token_ids"]) == 2
    check_shape(r, "incomplete")
    check_library(r.model_extra["detinfer"], [("user", "Hi")], 2)
    raw = list(c.responses.create(model="x", input="Hi", max_output_tokens=2, stream=True))
    assert raw[-1].type == "response.incomplete" and raw[-1].response.status == "incomplete"
    assert raw[-1].response.incomplete_details.reason == "max_output_tokens"
    assert raw[-2].item.status == "incomplete"


class Animal(BaseModel):
    kind: Literal["fox", "dog"]
    n: int = Field(ge=0, le=99)


def grammar_reference(model, prompt_ids, max_tokens, schema):
    """The library alone under the schema's grammar, ending at the end of the turn."""
    detinfer = bindings()
    with detinfer.Model(model) as m:
        eot = m.token_lookup("<end_of_turn>")
    with detinfer.Model(model) as m, m.session(context_length=len(prompt_ids) + max_tokens) as sess, \
            detinfer.Grammar.from_json_schema(json.dumps(schema)) as g:
        seq = sess.sequence(0)
        seq.step(list(prompt_ids))
        seq.set_grammar(g, (eot,))
        tokens = []
        for k in range(max_tokens):
            t = seq.sample_token()
            tokens.append(t)
            if t in (m.eos, eot) or k + 1 == max_tokens:
                break
            seq.step([t])
        return {"tokens": tokens, "sequence_digest": seq.digest([t]), "grammar_digest": g.digest}


def test_parse_with_a_schema(serve):
    jsonschema = pytest.importorskip("jsonschema")
    from openai.lib._pydantic import to_strict_json_schema
    s = serve_markers(serve)
    c = client(s)
    schema = to_strict_json_schema(Animal)
    r = c.responses.parse(model="x", input="An animal", text_format=Animal, max_output_tokens=60, extra_body=DIGESTS)
    d = r.model_extra["detinfer"]
    assert r.status == "completed", r.output_text
    jsonschema.validate(json.loads(r.output_text), schema)
    assert isinstance(r.output_parsed, Animal) and r.output_parsed == Animal.model_validate_json(r.output_text)
    ref = grammar_reference(MARKERS, d["prompt_ids"], 60, schema)
    assert d["completion_token_ids"] == ref["tokens"] and d["sequence_digest"] == ref["sequence_digest"]
    assert d["grammar_digest"] == ref["grammar_digest"]
    # the same through the chat's response_format
    fmt = {"type": "json_schema", "name": "Animal", "schema": schema, "strict": True}
    chat = c.chat.completions.create(model="x", max_tokens=60, messages=[{"role": "user", "content": "An animal"}],
                                     response_format={"type": "json_schema", "json_schema": {
                                         k: v for k, v in fmt.items() if k != "type"}}, extra_body=DIGESTS)
    same_answer(r, chat)
    assert r.text.format.type == "json_schema" and r.text.format.name == "Animal"
    # streamed with the schema: the same text
    with c.responses.stream(model="x", input="An animal", text_format=Animal, max_output_tokens=60) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text == r.output_text and final.output_parsed == r.output_parsed
    # {"type": "text"} is no constraint; json_object any object
    plain = c.responses.create(model="x", input="An animal", max_output_tokens=6, text={"format": {"type": "text"}},
                               extra_body=DIGESTS)
    assert "grammar_digest" not in plain.model_extra["detinfer"]
    obj = c.responses.create(model="x", input="An animal", max_output_tokens=6,
                             text={"format": {"type": "json_object"}}, extra_body=DIGESTS)
    assert "grammar_digest" in obj.model_extra["detinfer"]


def test_real_model_parse_and_stream(serve):
    """The real Gemma 3 270M (a base model: --chat-template gemma): a pydantic
    answer that parses, equal to the library alone and to the chat."""
    path = real_model()
    if path is None:
        pytest.skip("the real model (tools/scripts/fetch-model.sh) is not here")
    jsonschema = pytest.importorskip("jsonschema")
    from openai.lib._pydantic import to_strict_json_schema
    s = serve(path, "--chat-template", "gemma", "--max-sequences", "2", "--context", "256")
    c = client(s)
    schema = to_strict_json_schema(Animal)
    r = c.responses.parse(model="x", input="Name an animal and a number.", instructions="Answer in JSON.",
                          text_format=Animal, max_output_tokens=40, extra_body=DIGESTS)
    assert r.status == "completed", r.output_text
    jsonschema.validate(json.loads(r.output_text), schema)
    assert isinstance(r.output_parsed, Animal)
    d = r.model_extra["detinfer"]
    ref = grammar_reference(path, d["prompt_ids"], 40, schema)
    assert d["completion_token_ids"] == ref["tokens"] and d["sequence_digest"] == ref["sequence_digest"]
    chat = c.chat.completions.create(
        model="x", max_tokens=40, extra_body=DIGESTS,
        messages=[{"role": "system", "content": "Answer in JSON."},
                  {"role": "user", "content": "Name an animal and a number."}],
        response_format={"type": "json_schema", "json_schema": {"name": "Animal", "schema": schema, "strict": True}})
    same_answer(r, chat)
    # free text, streamed and not
    whole = c.responses.create(model="x", input="Write one sentence about foxes.", max_output_tokens=24)
    with c.responses.stream(model="x", input="Write one sentence about foxes.", max_output_tokens=24) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    assert text == whole.output_text and whole.output_text.strip()


REFUSED = [
    ({"store": True}, "store"),
    ({"tools": [{"type": "web_search"}]}, "tools"),  # function tools are served: test_responses_tools.py
    ({"tool_choice": "required"}, "tool_choice"),
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"background": True}, "background"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"reasoning": {"effort": "low"}}, "reasoning"),
    ({"include": ["message.output_text.logprobs"]}, "include"),
    ({"truncation": "auto"}, "truncation"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"frobnicate": 1}, "frobnicate"),
    ({"max_output_tokens": 100000}, "max_output_tokens"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"stream_options": {"include_obfuscation": False}}, "stream_options"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"oneOf": []}}}}, "text.format.schema"),
    ({"text": {"format": {"type": "grammar"}}}, "text.format.type"),
    ({"text": {"verbosity": "low"}}, "text.verbosity"),
    ({"metadata": {"k": 1}}, "metadata"),
    ({"instructions": ["x"]}, "instructions"),
    ({"input": []}, "input"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"input": [{"role": "tool", "content": "1"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
    ({"input": [{"role": "user", "content": "x", "name": "n"}]}, "input[0].name"),
]


def test_refused_fields_name_the_field(serve):
    s = serve_markers(serve)
    c = client(s)
    for fields, param in REFUSED:
        body = dict({"input": "Hi", "max_output_tokens": 4}, **fields)
        with pytest.raises(openai.BadRequestError) as e:
            c.responses.create(model="x", input=body.pop("input"), extra_body=body)
        err = e.value.body
        assert e.value.status_code == 400 and err["param"] == param, (fields, err)
        assert param.split("[")[0].split(".")[0] in err["message"], (fields, err)
    # the server is still serving, and counts them by endpoint
    assert c.responses.create(model="x", input="Hi", max_output_tokens=2).status == "incomplete"
    with urllib.request.urlopen(s.url + "/metrics", timeout=30) as m:
        text = m.read().decode()
    assert metric(text, "detinfer_requests_total", {"endpoint": "/v1/responses", "status": "400"}) == len(REFUSED)
    assert metric(text, "detinfer_requests_total", {"endpoint": "/v1/responses", "status": "200"}) == 1
