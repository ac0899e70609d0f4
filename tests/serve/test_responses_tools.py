"""Function tools in /v1/responses (docs/SERVING.md, "The Responses API" and
"Tool calls"): the Responses shapes (flat tools, tool_choice {"type":
"function", "name"}, function_call and function_call_output input items,
function_call output items and their stream events) mapped onto the chat's
tool path, through the official `openai` client on the real Gemma 3 270M.
Each call's arguments validate against the tool's schema (jsonschema); the
calls equal the chat endpoint's for the same request, and the same request
gives the same calls."""
import json

import openai
import pytest
from test_tools import ASK, SCHEMAS, TOOLS, client, gemma, post  # noqa: F401 (gemma: a fixture)

jsonschema = pytest.importorskip("jsonschema")

# The same tools, as the Responses API writes them: flat, not under "function".
RTOOLS = [dict({"type": "function"}, **t["function"]) for t in TOOLS]
QUESTION = ASK[1]["content"]
SYSTEM = ASK[0]["content"]


def calls_of(output):
    """The function_call items of an output: what must not change between
    equal requests (the item ids carry the response's id)."""
    return [{"call_id": o.call_id, "name": o.name, "arguments": o.arguments, "status": o.status}
            for o in output if o.type == "function_call"]


def check(calls, names=None):
    assert calls
    for c in calls:
        assert c["name"] in (names or SCHEMAS) and c["status"] == "completed"
        jsonschema.validate(json.loads(c["arguments"]), SCHEMAS[c["name"]])


@pytest.mark.heavy
def test_calls_are_the_chats_and_repeatable(gemma):
    c = client(gemma)
    for choice, chat_choice, names in (
            ("required", "required", None),
            ({"type": "function", "name": "get_time"}, {"type": "function", "function": {"name": "get_time"}},
             ["get_time"])):
        kw = dict(model="x", instructions=SYSTEM, input=QUESTION, tools=RTOOLS, tool_choice=choice,
                  parallel_tool_calls=False, max_output_tokens=60)
        r = c.responses.create(**kw)
        assert r.status == "completed" and [o.type for o in r.output] == ["function_call"], r
        assert r.output[0].id.startswith("fc_") and r.tools[0].name == "get_weather"
        check(calls_of(r.output), names)
        assert calls_of(c.responses.create(**kw).output) == calls_of(r.output)
        # The chat endpoint, same messages and tools: the same calls, ids included.
        chat = c.chat.completions.create(model="x", messages=ASK, tools=TOOLS, tool_choice=chat_choice,
                                         parallel_tool_calls=False, max_tokens=60)
        want = [{"call_id": t.id, "name": t.function.name, "arguments": t.function.arguments, "status": "completed"}
                for t in chat.choices[0].message.tool_calls]
        assert calls_of(r.output) == want
        assert r.model_extra["detinfer"]["sequence_digest"] == chat.model_extra["detinfer"]["sequence_digest"]
    # Negative control: another tool list, other calls.
    other = c.responses.create(model="x", instructions=SYSTEM, input=QUESTION, tools=RTOOLS[1:],
                               tool_choice="required", parallel_tool_calls=False, max_output_tokens=60)
    assert calls_of(other.output) != calls_of(r.output) and calls_of(other.output)[0]["name"] == "get_time"


def stream_items(events):
    """The output items a stream's events build, checked in order: each
    item added, then its deltas, then done."""
    items, open_index = {}, None
    for e in events:
        if e.type == "response.output_item.added":
            assert open_index is None and e.output_index not in items
            open_index = e.output_index
            items[e.output_index] = {"type": e.item.type, "text": "", "arguments": ""}
            if e.item.type == "function_call":
                assert e.item.status == "in_progress" and e.item.arguments == ""
                items[e.output_index].update(call_id=e.item.call_id, name=e.item.name, id=e.item.id)
        elif e.type == "response.output_text.delta":
            items[e.output_index]["text"] += e.delta
        elif e.type == "response.function_call_arguments.delta":
            assert e.output_index == open_index and e.item_id == items[open_index]["id"]
            items[e.output_index]["arguments"] += e.delta
        elif e.type == "response.function_call_arguments.done":
            assert e.arguments == items[e.output_index]["arguments"]
        elif e.type == "response.output_item.done":
            assert e.output_index == open_index
            if e.item.type == "function_call":
                assert e.item.arguments == items[open_index]["arguments"] and e.item.status == "completed"
            open_index = None
    assert open_index is None and events[-1].type in ("response.completed", "response.incomplete")
    return [items[i] for i in sorted(items)], events[-1].response


def test_stream_builds_the_same_calls(gemma):
    c = client(gemma)
    kw = dict(model="x", instructions=SYSTEM, input=QUESTION, tools=RTOOLS, tool_choice="required",
              parallel_tool_calls=False, max_output_tokens=60)
    whole = c.responses.create(**kw)
    items, final = stream_items(list(c.responses.create(stream=True, **kw)))
    assert [i["type"] for i in items] == ["function_call"]
    got = [{"call_id": i["call_id"], "name": i["name"], "arguments": i["arguments"], "status": "completed"}
           for i in items]
    assert got == calls_of(whole.output) == calls_of(final.output)
    # Negative control: another request's stream builds other calls.
    other, _ = stream_items(list(c.responses.create(stream=True, **dict(kw, tools=RTOOLS[1:]))))
    assert [i["arguments"] for i in other] != [g["arguments"] for g in got]


@pytest.mark.heavy
def test_auto_text_then_a_call(gemma):
    # As in the chat: this model writes text, then opens a call; the text is a
    # message item, the call a function_call item after it, streamed the same.
    c = client(gemma)
    kw = dict(model="x", instructions=SYSTEM, input=QUESTION, tools=RTOOLS, parallel_tool_calls=False,
              max_output_tokens=400)
    whole = c.responses.create(**kw)
    assert [o.type for o in whole.output] == ["message", "function_call"], whole.output
    assert whole.output_text and "<tool_call>" not in whole.output_text
    check(calls_of(whole.output))
    chat = c.chat.completions.create(model="x", messages=ASK, tools=TOOLS, parallel_tool_calls=False, max_tokens=400)
    assert whole.output_text == chat.choices[0].message.content
    items, _ = stream_items(list(c.responses.create(stream=True, **kw)))
    assert [i["type"] for i in items] == ["message", "function_call"]
    assert items[0]["text"] == whole.output_text and items[1]["arguments"] == whole.output[1].arguments
    # Without a call, one message item: the text tool_choice none gives.
    short = dict(kw, instructions=None, input="Say hello.", max_output_tokens=12)
    auto = c.responses.create(**short)
    none = c.responses.create(**dict(short, tool_choice="none"))
    assert [o.type for o in auto.output] == ["message"] and auto.output_text == none.output_text


def test_follow_up_items_are_the_chats_tool_turns(gemma):
    # A function_call item and its function_call_output render as the chat's
    # assistant tool_calls and tool message: the same prompt.
    call = {"type": "function_call", "call_id": "call_1", "name": "get_weather",
            "arguments": "{\"city\": \"Paris\", \"days\": 3}"}
    out = {"type": "function_call_output", "call_id": "call_1", "output": "21 C, sunny"}
    items = [{"role": "user", "content": QUESTION}, call, out]
    messages = ASK + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"}]

    def digest(path, body):
        st, r = post(gemma, path, dict(body, detinfer={"prompt_ids": True}))
        assert st == 200, r
        return r["detinfer"]["prompt_ids"]
    resp = {"instructions": SYSTEM, "input": items, "tools": RTOOLS, "tool_choice": "none", "max_output_tokens": 8}
    chat = {"messages": messages, "tools": TOOLS, "tool_choice": "none", "max_tokens": 8}
    assert digest("/v1/responses", resp) == digest("/v1/chat/completions", chat)
    # Negative control: without the output item, another prompt.
    assert digest("/v1/responses", dict(resp, input=items[:2])) != digest("/v1/chat/completions", chat)
    # Text beside the call: an assistant message item then the call, one assistant turn.
    said = [items[0], {"role": "assistant", "content": "Let me look."}, call, out]
    chat_said = messages[:2] + [dict(messages[2], content="Let me look.")] + messages[3:]
    assert digest("/v1/responses", dict(resp, input=said)) == \
        digest("/v1/chat/completions", dict(chat, messages=chat_said))
    r = client(gemma).responses.create(model="x", instructions=SYSTEM, input=items, tools=RTOOLS, tool_choice="none",
                                       max_output_tokens=8)
    assert [o.type for o in r.output] == ["message"] and r.output_text


BAD = [
    ({"tools": [{"type": "web_search"}]}, "tools", "only function tools"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools[0].function", "tools[0].function"),
    ({"tools": [{"type": "function", "name": "bad name"}]}, "tools", "'name' must be"),
    ({"tools": RTOOLS + RTOOLS[:1]}, "tools", "'get_weather' is defined twice"),
    ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "not": {}}}]}, "tools",
     "tool 'f'"),
    ({"tools": RTOOLS, "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice", "'nope'"),
    ({"tools": RTOOLS, "tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "tool_choice",
     "{\"type\": \"function\", \"name\": NAME}"),
    ({"tools": RTOOLS, "tool_choice": "always"}, "tool_choice", "'tool_choice' must be"),
    ({"tool_choice": "required"}, "tool_choice", "no 'tools'"),
    ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0]", "'call_id'"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "x": 1}]}, "input[0].x",
     "input[0].x"),
    ({"input": [{"type": "function_call_output", "output": "1"}]}, "input[0]", "'call_id'"),
]


def test_errors_name_the_field(gemma):
    for extra, param, words in BAD:
        st, r = post(gemma, "/v1/responses", dict({"input": "Hi", "max_output_tokens": 4}, **extra))
        assert st == 400 and r["error"]["param"] == param and words in r["error"]["message"], (extra, r)
    with pytest.raises(openai.BadRequestError):
        client(gemma).responses.create(model="x", input="Hi", tools=[{"type": "web_search"}], max_output_tokens=4)
    # Served: tools [], and tools with tool_choice none.
    for extra in ({"tools": []}, {"tools": RTOOLS, "tool_choice": "none"}):
        st, r = post(gemma, "/v1/responses", dict({"input": "Hi", "max_output_tokens": 4}, **extra))
        assert st == 200 and [o["type"] for o in r["output"]] == ["message"], r
